# The layers of the build and what each may include (docs/design.md, "Layout"). Every library
# target is one layer. Two rules, enforced twice:
# - Public headers live in one folder per layer, each an include root of its own that spells
#   its headers `tunableop/x.h`: include/core (core's) and include/ops (the ops'). A layer is
#   given only the roots it may use (TUNABLEOP_LAYER_ROOTS_<layer>), so the compiler itself
#   refuses core code that includes an op's header: the file is not on its include path.
# - What a layer may include of src/ (the other roots are PRIVATE and shared) is checked by a
#   build step before it compiles (cmake/CheckIncludes.cmake): each file's includes, quoted or
#   in angle brackets, against TUNABLEOP_LAYER_ALLOW_<layer> (prefixes of src/ paths) and its
#   roots. A file that includes what its layer must not fails the build, naming the file and
#   the include. tests/layers proves it on planted files with the same rules.

# The public include roots, lowest first.
set(TUNABLEOP_PUBLIC_ROOTS core ops)

set(TUNABLEOP_LAYER_ROOTS_core core)
set(TUNABLEOP_LAYER_ALLOW_core core/)
set(TUNABLEOP_LAYER_ALLOW_ops ops/)
set(TUNABLEOP_LAYER_ALLOW_backend_cpu_kernels ops/ backends/cpu/kernels/ backends/cpu/attention/
  backends/cpu/all_reduce/)
set(TUNABLEOP_LAYER_ALLOW_backend_cpu_shared ops/ backends/cpu/shared/)
foreach(_p openblas blis onednn)
  set(TUNABLEOP_LAYER_ALLOW_backend_${_p} ops/ backends/cpu/shared/ backends/cpu/${_p}/)
endforeach()
# The CPU backend library's entry point: every CPU provider's registration header.
set(TUNABLEOP_LAYER_ALLOW_backend_cpu backends/cpu/)
set(TUNABLEOP_LAYER_ALLOW_backend_cuda ops/ cuda_common/ backends/cuda/)
set(TUNABLEOP_LAYER_ISOLATE_backend_cuda backends/cuda)
# The registry glue: the backend libraries' entry points and the host runtime; core's headers.
set(TUNABLEOP_LAYER_ROOTS_backends core)
set(TUNABLEOP_LAYER_ALLOW_backends backends/register_all.h backends/cpu_runtime.h backends/cpu/register.h
  backends/cuda/register.h)
# CUDA helpers shared by the CUDA backend and the engine: the CUDA runtime and core only.
set(TUNABLEOP_LAYER_ROOTS_cuda_common core)
set(TUNABLEOP_LAYER_ALLOW_cuda_common cuda_common/)
# The engine: the public API and ops; the CUDA helpers shared with the CUDA backend.
set(TUNABLEOP_LAYER_ALLOW_llm ops/ llm/ cuda_common/)
# The interposer sits on top, like the CLI: it makes contexts with every backend (the glue) and
# shares the CUDA backend's per-thread cuBLAS handles.
set(TUNABLEOP_LAYER_ALLOW_interpose ops/ interpose/ backends/register_all.h cuda_common/ backends/cuda/common/)
# The server: the engine and its text library below it; no backend, no ops or core internals.
set(TUNABLEOP_LAYER_ALLOW_serve llm/ serve/)
# The C ABI: the public API and nothing else.
set(TUNABLEOP_LAYER_ALLOW_c_api "")
# The CLI: the public API (tunableop/op_tools.h for what ops lend tools), the engine, the server.
set(TUNABLEOP_LAYER_ALLOW_cli llm/ serve/)
# Every layer above core sees both roots unless it says otherwise.
foreach(_l ops backend_cpu_kernels backend_cpu_shared backend_openblas backend_blis backend_onednn backend_cpu
        backend_cuda llm interpose serve cli c_api)
  set(TUNABLEOP_LAYER_ROOTS_${_l} core ops)
endforeach()

# tunableop_layer(<target> <layer> FILES <files...>): checks <files> against the rules of
# <layer> before <target> builds. Writes the rules to ${CMAKE_BINARY_DIR}/layers/<layer>.cmake
# (also read by tests/layers).
function(tunableop_layer target layer)
  cmake_parse_arguments(ARG "" "" "FILES" ${ARGN})
  set(_rules ${CMAKE_BINARY_DIR}/layers/${layer}.cmake)
  file(CONFIGURE OUTPUT ${_rules} CONTENT
"set(LAYER ${layer})
set(ROOT \"${PROJECT_SOURCE_DIR}\")
set(PUBLIC_ROOTS \"${TUNABLEOP_PUBLIC_ROOTS}\")
set(ROOTS \"${TUNABLEOP_LAYER_ROOTS_${layer}}\")
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

# tunableop_public_includes(<target> <layer>): the include roots of <layer> on <target>
# (PUBLIC: what links it sees them too), installed merged into one include/tunableop.
function(tunableop_public_includes target layer)
  foreach(_root IN LISTS TUNABLEOP_LAYER_ROOTS_${layer})
    target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include/${_root}>)
  endforeach()
  target_include_directories(${target} PUBLIC $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
endfunction()

# Which installable library a layer's objects go into (cmake/TunableopLibraries.cmake):
# libtunableop (core, ops, the registry glue), libtunableop_backend_cpu, libtunableop_backend_cuda
# (with the CUDA helpers it shares with the engine) and libtunableop_llm (engine and text).
function(tunableop_tier_of layer out)
  if(layer MATCHES "^(backend_cuda|cuda_common)$")
    set(${out} backend_cuda PARENT_SCOPE)
  elseif(layer MATCHES "^backend_")
    set(${out} backend_cpu PARENT_SCOPE)
  elseif(layer STREQUAL "llm")
    set(${out} llm PARENT_SCOPE)
  else()
    set(${out} tunableop PARENT_SCOPE)
  endif()
endfunction()

# tunableop_object_library(<target> <layer> DIRS <dirs...> [HEADERS <files...>]): an object
# library of one layer; its layer check covers every source and header under DIRS (relative to
# the current source dir) plus HEADERS. Sources are added by the caller (target_sources). It
# sees the include roots of its layer and src/ (for its own and lower layers' internals, which
# the check polices). Its objects join the library of its tier (tunableop_tier_of).
function(tunableop_object_library target layer)
  cmake_parse_arguments(ARG "" "" "DIRS;HEADERS" ${ARGN})
  add_library(${target} OBJECT)
  tunableop_public_includes(${target} ${layer})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR}/src)
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
  tunableop_tier_of(${layer} _tier)
  set_property(GLOBAL APPEND PROPERTY TUNABLEOP_TIER_${_tier} ${target})
endfunction()
