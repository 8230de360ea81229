# Installs libmsa, its public headers and an msa-config.cmake so another project can
# find_package(msa) and link msa::msa.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
install(TARGETS msa EXPORT msaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(dir hal ops model dist)
  install(DIRECTORY ${CMAKE_SOURCE_DIR}/${dir}/ DESTINATION include/msa/${dir}
          FILES_MATCHING PATTERN "*.h")
endforeach()
install(EXPORT msaTargets NAMESPACE msa:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/msa-config.cmake.in
  ${CMAKE_BINARY_DIR}/msa-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/msa-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/msa-config.cmake ${CMAKE_BINARY_DIR}/msa-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
if(TARGET msa_cli)
  # The installed CLI finds the installed libmsa relative to itself (bin/ -> lib/).
  file(RELATIVE_PATH _bin_to_lib ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
  set_target_properties(msa_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_bin_to_lib}")
  install(TARGETS msa_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
