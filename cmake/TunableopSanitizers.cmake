# Sanitizer and fuzzing builds (CI: scripts/ci-hardening.sh). Included before any target is
# defined, so the flags reach every library, test and tool of the build.
#   -DTUNABLEOP_SANITIZE=address,undefined   ASan + UBSan (any -fsanitize= list works)
#   -DTUNABLEOP_SANITIZE=thread              TSan
#   -DTUNABLEOP_BUILD_FUZZERS=ON             libFuzzer targets in fuzz/ (clang; add ASan+UBSan)
set(TUNABLEOP_SANITIZE "" CACHE STRING "Build everything with -fsanitize=<this> (e.g. address,undefined or thread)")
option(TUNABLEOP_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs clang)" OFF)

if(TUNABLEOP_SANITIZE)
  # Every finding fails the run (no recovering UBSan), with frames a report can name.
  set(_tunableop_san -fsanitize=${TUNABLEOP_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:${_tunableop_san}>")
  add_link_options(-fsanitize=${TUNABLEOP_SANITIZE})
  message(STATUS "tunableop: sanitizers ON (${TUNABLEOP_SANITIZE})")
endif()

if(TUNABLEOP_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TUNABLEOP_BUILD_FUZZERS needs clang (libFuzzer): configure with CXX=clang++ CC=clang")
  endif()
  # Coverage feedback from the library too, not only from the fuzz drivers: the parsers live there.
  add_compile_options("$<$<COMPILE_LANGUAGE:C,CXX>:-fsanitize=fuzzer-no-link>")
  message(STATUS "tunableop: libFuzzer targets ON")
endif()
