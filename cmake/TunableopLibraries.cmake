# The installable libraries, each made of the objects of its tier's layers (tunableop_tier_of in
# TunableopLayers.cmake), static and shared:
#   libtunableop               core + ops + the registry glue     tunableop::tunableop
#   libtunableop_backend_cpu   our CPU kernels, the BLAS providers tunableop::backend_cpu
#   libtunableop_backend_cuda  the CUDA backend + src/cuda_common  tunableop::backend_cuda
#   libtunableop_llm           the engine and its text library     tunableop::llm
# (each with a `_shared` twin: tunableop::tunableop_shared, ...). Linking tunableop::tunableop
# brings every backend of the build; tunableop::llm brings tunableop::tunableop.
#
# The registry glue (src/backends/register_all.cc) is built twice. In the static libraries it
# calls each backend's entry point (the libraries name each other, a cycle CMake allows among
# static libraries). libtunableop.so opens each backend library beside it at run time instead
# (ggml's way: a machine without CUDA's libraries still loads libtunableop.so and its CPU
# backend), and the backend libraries link libtunableop.so: no cycle.

# tunableop_tier_library(<target> <tier> STATIC|SHARED): a library of the tier's objects that
# carries the layers' usage requirements (include roots, fmt, CUDA, ...) while building.
function(tunableop_tier_library target tier kind)
  get_property(_layers GLOBAL PROPERTY TUNABLEOP_TIER_${tier})
  add_library(${target} ${kind})
  foreach(_layer IN LISTS _layers)
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:${_layer}>)
    target_link_libraries(${target} PUBLIC $<BUILD_INTERFACE:${_layer}>)
  endforeach()
  target_include_directories(${target} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(kind STREQUAL "SHARED")
    set_target_properties(${target} PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION 0 INSTALL_RPATH "$ORIGIN")
  endif()
endfunction()

# The glue, one object library per way (static: linked; shared: loaded).
foreach(_how linked loaded)
  add_library(tunableop_register_all_${_how} OBJECT ${PROJECT_SOURCE_DIR}/src/backends/register_all.cc)
  target_link_libraries(tunableop_register_all_${_how} PRIVATE tunableop_backends fmt::fmt ${CMAKE_DL_LIBS})
  target_include_directories(tunableop_register_all_${_how} PRIVATE ${PROJECT_SOURCE_DIR}/src)
  if(TUNABLEOP_HAVE_CUDA)
    target_compile_definitions(tunableop_register_all_${_how} PRIVATE TUNABLEOP_HAVE_CUDA_BACKEND)
  endif()
  tunableop_warnings(tunableop_register_all_${_how})
endforeach()
target_compile_definitions(tunableop_register_all_loaded PRIVATE TUNABLEOP_BACKENDS_LOADED_AT_RUN_TIME
  TUNABLEOP_SOVERSION="0")

set(_tiers tunableop backend_cpu)
if(TUNABLEOP_HAVE_CUDA)
  list(APPEND _tiers backend_cuda)
endif()
list(APPEND _tiers llm)
# In-tree names: tunableop / tunableop_shared, tunableop_<tier>_static / tunableop_<tier>_shared.
foreach(_tier IN LISTS _tiers)
  if(_tier STREQUAL "tunableop")
    set(_static tunableop)
    set(_shared tunableop_shared)
    set(_file tunableop)
    set(_export tunableop)
  else()
    set(_static tunableop_${_tier}_static)
    set(_shared tunableop_${_tier}_shared)
    set(_file tunableop_${_tier})
    set(_export ${_tier})
  endif()
  tunableop_tier_library(${_static} ${_tier} STATIC)
  tunableop_tier_library(${_shared} ${_tier} SHARED)
  set_target_properties(${_static} ${_shared} PROPERTIES OUTPUT_NAME ${_file})
  set_target_properties(${_static} PROPERTIES EXPORT_NAME ${_export})
  set_target_properties(${_shared} PROPERTIES EXPORT_NAME ${_export}_shared)
  add_library(tunableop::${_export} ALIAS ${_static})
  add_library(tunableop::${_export}_shared ALIAS ${_shared})
  list(APPEND TUNABLEOP_INSTALLED_LIBRARIES ${_static} ${_shared})
endforeach()

target_sources(tunableop PRIVATE $<TARGET_OBJECTS:tunableop_register_all_linked>)
target_sources(tunableop_shared PRIVATE $<TARGET_OBJECTS:tunableop_register_all_loaded>)
target_link_libraries(tunableop_shared PRIVATE ${CMAKE_DL_LIBS})
foreach(_tier backend_cpu backend_cuda)
  if(TARGET tunableop_${_tier}_static)
    target_link_libraries(tunableop PUBLIC tunableop_${_tier}_static)
    target_link_libraries(tunableop_${_tier}_static PUBLIC tunableop)
    target_link_libraries(tunableop_${_tier}_shared PUBLIC tunableop_shared)
  endif()
endforeach()
# The engine: above every backend (its CUDA device uses src/cuda_common, which lives in the
# CUDA backend's library).
target_link_libraries(tunableop_llm_static PUBLIC tunableop)
target_link_libraries(tunableop_llm_shared PUBLIC tunableop_shared)
if(TUNABLEOP_HAVE_CUDA)
  target_link_libraries(tunableop_llm_static PUBLIC tunableop_backend_cuda_static)
  target_link_libraries(tunableop_llm_shared PUBLIC tunableop_backend_cuda_shared)
endif()
# Older in-tree name of the text library, now part of libtunableop_llm.
add_library(tunableop_llm_text ALIAS tunableop_llm_static)
