function(tunableop_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
endfunction()

# tunableop_add_test(NAME src... [LABELS l...]) : one GoogleTest executable, tests discovered by ctest.
function(tunableop_add_test name)
  # RUN_SERIAL: ctest runs the test alone (a ratio timed in one run that another test's burst on
  # a 2-core machine would distort).
  cmake_parse_arguments(ARG "RUN_SERIAL" "" "LABELS" ${ARGN})
  add_executable(${name} ${ARG_UNPARSED_ARGUMENTS})
  target_link_libraries(${name} PRIVATE tunableop::llm tunableop_test_support GTest::gtest_main GTest::gmock fmt::fmt nlohmann_json::nlohmann_json)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/tests)
  tunableop_warnings(${name})
  set(_labels ${ARG_LABELS})
  if(NOT _labels)
    set(_labels cpu)
  endif()
  list(GET _labels 0 _first)
  set(_serial FALSE)
  if(ARG_RUN_SERIAL)
    set(_serial TRUE)
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST DISCOVERY_TIMEOUT 60
    PROPERTIES LABELS ${_first} ENVIRONMENT "TUNABLEOP_SOURCE_DIR=${PROJECT_SOURCE_DIR}" RUN_SERIAL ${_serial})
  # Several labels (gpu multigpu): CMake 3.25 loses a list value on its way to discovered tests,
  # so a file ctest reads after the discovery sets them all.
  list(LENGTH _labels _count)
  if(_count GREATER 1)
    set(_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
    file(WRITE ${_file} "if(DEFINED ${name}_TESTS)\n  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${_labels}\")\nendif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
  endif()
endfunction()
