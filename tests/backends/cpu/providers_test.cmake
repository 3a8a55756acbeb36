# Included from each provider's test folder (openblas/, blis/, onednn/).

# tunableop_cpu_provider_test(<NAME> <label> <test target> <source>): the provider's own test
# when src/backends/cpu/<name> was built (global property TUNABLEOP_HAVE_<NAME>), and then the
# cross-provider test (symbol and thread-state isolation between the CPU BLAS libraries): built
# once, with a define per provider built.
function(tunableop_cpu_provider_test name label target source)
  get_property(_have GLOBAL PROPERTY TUNABLEOP_HAVE_${name})
  if(NOT _have)
    message(STATUS "tunableop: ${label} provider not built: ${target} skipped")
    return()
  endif()
  tunableop_add_test(${target} ${source})
  if(NOT TARGET test_cpu_providers)
    tunableop_add_test(test_cpu_providers ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/providers_test.cc)
    foreach(_lib OPENBLAS BLIS ONEDNN)
      get_property(_have_lib GLOBAL PROPERTY TUNABLEOP_HAVE_${_lib})
      if(_have_lib)
        target_compile_definitions(test_cpu_providers PRIVATE TUNABLEOP_HAVE_${_lib})
      endif()
    endforeach()
  endif()
endfunction()
