# Install: the public headers (include/core and include/ops merged into one include/tunableop),
# the libraries of every tier (cmake/TunableopLibraries.cmake), the CLI, and a package config
# so that an installed copy is found with find_package(tunableop). The libraries are built from
# object libraries, so the config declares the imported targets and their link needs itself.
include(CMakePackageConfigHelpers)
install(TARGETS ${TUNABLEOP_INSTALLED_LIBRARIES}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/core/tunableop include/ops/tunableop DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The engine's headers, spelled llm/x.h under an include root of their own (tunableop::llm's):
# the model, engine, generation and text interfaces, without the devices' internals. Not yet a
# stable API.
install(DIRECTORY src/llm/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/tunableop_llm/llm
  FILES_MATCHING PATTERN "*.h" PATTERN "cpu" EXCLUDE PATTERN "cuda" EXCLUDE)
set(TUNABLEOP_CONFIG_HAVE_CUDA ${TUNABLEOP_HAVE_CUDA})
set(TUNABLEOP_CONFIG_HAVE_OPENMP ${OpenMP_CXX_FOUND})
# The static engine library needs SentencePiece's own library where the build used it.
get_property(TUNABLEOP_CONFIG_LLM_LIBS GLOBAL PROPERTY TUNABLEOP_LLM_INSTALLED_LINK_LIBRARIES)
configure_package_config_file(cmake/tunableopConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tunableopConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tunableop
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tunableopConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tunableopConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tunableopConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tunableop)
