# The layers of the build and what each may include (docs/design.md, "Layout"). Every library
# target is one layer; a build step checks each of its files' quoted #includes against these
# rules before it compiles (cmake/CheckIncludes.cmake), so a file that includes what its layer
# must not fails the build, naming the file and the include. tests/layers proves it on planted
# files with the same rules.

# Public headers of core: the rest of include/tunableop (op.h, gemm.h, ...) belongs to ops.
set(TUNABLEOP_CORE_PUBLIC_HEADERS
  status.h types.h device.h config.h context.h log.h registry.h results.h timer.h tuner.h half.h cpu_info.h in_context.h
  checked_size.h safe_file.h status_boundary.h)
set(_core_public "")
foreach(_h IN LISTS TUNABLEOP_CORE_PUBLIC_HEADERS)
  list(APPEND _core_public tunableop/${_h})
endforeach()

set(TUNABLEOP_LAYER_ALLOW_core core/ ${_core_public})
set(TUNABLEOP_LAYER_ALLOW_ops tunableop/ ops/)
set(TUNABLEOP_LAYER_ALLOW_backend_cpu_kernels tunableop/ ops/ backends/cpu/kernels/ backends/cpu/attention/
  backends/cpu/all_reduce/)
set(TUNABLEOP_LAYER_ALLOW_backend_cpu_shared tunableop/ ops/ backends/cpu/shared/)
foreach(_p openblas blis onednn)
  set(TUNABLEOP_LAYER_ALLOW_backend_${_p} tunableop/ ops/ backends/cpu/shared/ backends/cpu/${_p}/)
endforeach()
set(TUNABLEOP_LAYER_ALLOW_backend_cuda tunableop/ ops/ cuda_common/ backends/cuda/)
set(TUNABLEOP_LAYER_ISOLATE_backend_cuda backends/cuda)
# The registry glue: every backend's registration header, nothing of ops.
set(TUNABLEOP_LAYER_ALLOW_backends tunableop/ backends/)
# CUDA helpers shared by the CUDA backend and the engine: the CUDA runtime and core only.
set(TUNABLEOP_LAYER_ALLOW_cuda_common cuda_common/ ${_core_public})
# The engine: the public API and ops; the CUDA helpers shared with the CUDA backend.
set(TUNABLEOP_LAYER_ALLOW_llm tunableop/ ops/ llm/ cuda_common/)
# The interposer sits on top, like the CLI: it makes contexts with every backend (the glue) and
# shares the CUDA backend's per-thread cuBLAS handles.
set(TUNABLEOP_LAYER_ALLOW_interpose tunableop/ ops/ interpose/ backends/register_all.h cuda_common/
  backends/cuda/common/)
# The server: the engine and its text library below it; no backend, no core internals.
set(TUNABLEOP_LAYER_ALLOW_serve tunableop/ llm/ serve/)
set(TUNABLEOP_LAYER_ALLOW_cli tunableop/ ops/ llm/ serve/)

# tunableop_layer(<target> <layer> FILES <files...>): checks <files> against the rules of
# <layer> before <target> builds. Writes the rules to ${CMAKE_BINARY_DIR}/layers/<layer>.cmake
# (also read by tests/layers).
function(tunableop_layer target layer)
  cmake_parse_arguments(ARG "" "" "FILES" ${ARGN})
  set(_rules ${CMAKE_BINARY_DIR}/layers/${layer}.cmake)
  file(CONFIGURE OUTPUT ${_rules} CONTENT
"set(LAYER ${layer})
set(ROOT \"${PROJECT_SOURCE_DIR}\")
set(ALLOW \"${TUNABLEOP_LAYER_ALLOW_${layer}}\")
set(ISOLATE \"${TUNABLEOP_LAYER_ISOLATE_${layer}}\")
set(FILES \"${ARG_FILES}\")
")
  set(_stamp ${CMAKE_BINARY_DIR}/layers/${layer}.stamp)
  add_custom_command(OUTPUT ${_stamp}
    COMMAND ${CMAKE_COMMAND} -DRULES=${_rules} -DSTAMP=${_stamp} -P ${PROJECT_SOURCE_DIR}/cmake/CheckIncludes.cmake
    DEPENDS ${ARG_FILES} ${_rules} ${PROJECT_SOURCE_DIR}/cmake/CheckIncludes.cmake
    COMMENT "Checking the includes of layer ${layer}"
    VERBATIM)
  add_custom_target(${target}_layer_check DEPENDS ${_stamp})
  add_dependencies(${target} ${target}_layer_check)
endfunction()

# tunableop_object_library(<target> <layer> DIRS <dirs...> [HEADERS <files...>]): an object
# library of one layer; its layer check covers every source and header under DIRS (relative to
# the current source dir) plus HEADERS. Sources are added by the caller (target_sources).
function(tunableop_object_library target layer)
  cmake_parse_arguments(ARG "" "" "DIRS;HEADERS" ${ARGN})
  add_library(${target} OBJECT)
  target_include_directories(${target}
    PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${target} PUBLIC Threads::Threads PRIVATE fmt::fmt nlohmann_json::nlohmann_json ${CMAKE_DL_LIBS})
  if(OpenMP_CXX_FOUND)
    target_link_libraries(${target} PUBLIC OpenMP::OpenMP_CXX)
  endif()
  tunableop_warnings(${target})
  set(_files ${ARG_HEADERS})
  foreach(_dir IN LISTS ARG_DIRS)
    file(GLOB_RECURSE _found CONFIGURE_DEPENDS ${_dir}/*.h ${_dir}/*.cc ${_dir}/*.cu ${_dir}/*.cuh)
    list(APPEND _files ${_found})
  endforeach()
  tunableop_layer(${target} ${layer} FILES ${_files})
  set_property(GLOBAL APPEND PROPERTY TUNABLEOP_LIBRARY_LAYERS ${target})
endfunction()
