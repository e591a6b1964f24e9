# Install rules (docs/install.md): `cmake --install build --prefix ~/.local/trellis`
# lays out bin/ (the programs and trellis-keeper) and share/trellis/ (examples,
# dashboards, docs, the deploy recipes); `cpack` (from the build directory)
# packs the same tree as trellis-<version>-<arch>.tar.gz. Nothing in the tree
# names the build or source directory: the programs find each other beside
# themselves (the controller its worker, the worker its rank program, the CLI
# trellis-export), the batch-script template is compiled in, and libraries
# outside the system's directories (a LibTorch from PyTorch, a site's gRPC)
# stay found through the RPATH set at link time (CMAKE_INSTALL_RPATH_USE_LINK_PATH,
# set before the targets in CMakeLists.txt).
include(GNUInstallDirs)
set(_trellis_share ${CMAKE_INSTALL_DATADIR}/trellis)

foreach(program trellis trellis-controller trellis-worker trellis-rank trellis-train
                trellis-corpus trellis-export)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()
install(PROGRAMS deploy/keepalive/trellis-keeper DESTINATION ${CMAKE_INSTALL_BINDIR})

install(DIRECTORY examples dashboards docs DESTINATION ${_trellis_share}
        PATTERN "*_test*" EXCLUDE PATTERN "check_schema*" EXCLUDE)
install(FILES README.md DESTINATION ${_trellis_share})
install(FILES deploy/slurm/trellis.sbatch.in DESTINATION ${_trellis_share}/deploy/slurm)
install(FILES deploy/keepalive/scrontab.example deploy/keepalive/trellis-controller.service
        DESTINATION ${_trellis_share}/deploy/keepalive)
install(PROGRAMS deploy/tls/make-self-signed.sh DESTINATION ${_trellis_share}/deploy/tls)

set(CPACK_PACKAGE_NAME trellis)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_FILE_NAME trellis-${PROJECT_VERSION}-${CMAKE_SYSTEM_PROCESSOR})
set(CPACK_GENERATOR TGZ)
set(CPACK_STRIP_FILES ON)  # the programs' line tables are for the build tree
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
