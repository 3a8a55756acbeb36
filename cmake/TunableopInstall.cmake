# Install: headers, both libraries, the CLI, and a package config so that an installed copy is
# found with find_package(tunableop). The libraries are built from one object library, so the
# config declares the imported targets and their link needs itself.
include(CMakePackageConfigHelpers)
install(TARGETS tunableop tunableop_shared
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/tunableop DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
set(TUNABLEOP_CONFIG_HAVE_CUDA ${TUNABLEOP_HAVE_CUDA})
set(TUNABLEOP_CONFIG_HAVE_OPENMP ${OpenMP_CXX_FOUND})
configure_package_config_file(cmake/tunableopConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/tunableopConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tunableop
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/tunableopConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/tunableopConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/tunableopConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tunableop)
