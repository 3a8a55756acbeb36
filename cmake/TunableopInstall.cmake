include(CMakePackageConfigHelpers)
# The installed package exposes the static and shared libraries and the public headers.
install(TARGETS tunableop tunableop_shared EXPORT tunableopTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY include/tunableop DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
