# Installs the library, its headers as <kfmm/MODULE/NAME.hpp>, the `kfmm` tool and a CMake
# package so that downstream apps can `find_package(kfmm)` and link `kfmm::kfmm`.
include(CMakePackageConfigHelpers)

set_target_properties(kfmm PROPERTIES INSTALL_RPATH "${CMAKE_INSTALL_FULL_LIBDIR}")
install(TARGETS kfmm EXPORT kfmmTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(module ${KFMM_MODULES})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${module}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kfmm/${module}
          FILES_MATCHING PATTERN "*.hpp" PATTERN "hdf5_handle.hpp" EXCLUDE)
endforeach()
install(FILES ${KFMM_BUILD_INCLUDE}/kfmm/build_config.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kfmm)

set(KFMM_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kfmm)
install(EXPORT kfmmTargets NAMESPACE kfmm:: DESTINATION ${KFMM_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kfmmConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/kfmmConfig.cmake INSTALL_DESTINATION ${KFMM_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kfmmConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kfmmConfig.cmake ${PROJECT_BINARY_DIR}/kfmmConfigVersion.cmake
        DESTINATION ${KFMM_CMAKE_DIR})
