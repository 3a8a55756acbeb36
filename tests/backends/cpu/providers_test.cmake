# The cross-provider test (symbol and thread-state isolation between the CPU BLAS libraries).
# Included from each provider's test folder; built once, with a define per provider built.
if(NOT TARGET test_cpu_providers)
  tunableop_add_test(test_cpu_providers ${CMAKE_CURRENT_LIST_DIR}/providers_test.cc)
  foreach(_lib OPENBLAS BLIS ONEDNN)
    get_property(_have_lib GLOBAL PROPERTY TUNABLEOP_HAVE_${_lib})
    if(_have_lib)
      target_compile_definitions(test_cpu_providers PRIVATE TUNABLEOP_HAVE_${_lib})
    endif()
  endforeach()
endif()
