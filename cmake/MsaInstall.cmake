# Installs libmsa, its backend modules, its public headers and an msa-config.cmake so another project can
# find_package(msa) and link msa::msa; exports the build tree's msa::msa the same way, so
# find_package(msa) also works with msa_DIR (or CMAKE_PREFIX_PATH) set to this build folder.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The public headers: the op API, the HAL types it takes, the model and multi-device APIs,
# and what they include (hal/device.h includes hal/tuning.h, which includes hal/env.h).
# Everything else stays internal and is not installed: the backends, the case library
# (ops/cases/), the op functions' argument checks, the CPU backends' device shape
# (hal/host_device.h), file helpers (hal/atomic_file.h, hal/json_bounds.h), NCCL and
# in-process communicators, and the `msa run` internals. Installed under include/msa/ with
# their source paths (include/msa/hal/device.h), since they include each other as
# "hal/...". The consumer test (examples/consumer, MSA_CONSUMER_ALL_HEADERS) compiles every
# installed header together, so a public header that includes an internal one fails CI.
set(MSA_PUBLIC_HEADERS
  hal/buffer.h hal/device.h hal/dtype.h hal/error.h hal/event.h hal/export.h hal/host_tensor.h
  hal/kernel_table.h hal/nvfp4.h hal/op_id.h hal/registry.h hal/safetensors.h hal/stream.h
  hal/tensor.h hal/tuning.h hal/env.h hal/version.h
  ops/args.h ops/ops.h ops/paged_batch.h
  model/config.h model/decoder.h model/device_weights.h model/generate.h model/head_parallel.h model/kv_cache.h
  model/op_runner.h model/profiler.h model/video.h model/vision.h model/weights.h
  model/workspace.h
  dist/communicator.h dist/world.h)
foreach(h ${MSA_PUBLIC_HEADERS})
  get_filename_component(_dir ${h} DIRECTORY)
  install(FILES ${PROJECT_SOURCE_DIR}/${h} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/msa/${_dir})
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/include/msa/msa.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/msa)

# The backend modules go beside libmsa (lib/), where it looks for them; exported as
# msa::backend_cuda and msa::backend_hip (IMPORTED MODULE targets), for a project that
# bundles libmsa and has to copy them along.
get_property(_msa_modules GLOBAL PROPERTY MSA_BACKEND_MODULES)
install(TARGETS msa ${_msa_modules} EXPORT msaTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT msaTargets NAMESPACE msa:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
# The build tree's package: msaTargets.cmake names the targets in this build folder (the
# source folders as include directories), beside the same msa-config.cmake as installed.
export(EXPORT msaTargets NAMESPACE msa:: FILE ${PROJECT_BINARY_DIR}/msaTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/msa-config.cmake.in
  ${PROJECT_BINARY_DIR}/msa-config.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/msa-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/msa-config.cmake ${PROJECT_BINARY_DIR}/msa-config-version.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/msa)
if(TARGET msa_cli)
  # The installed CLI finds the installed libmsa relative to itself (bin/ -> lib/).
  file(RELATIVE_PATH _bin_to_lib ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR})
  set_target_properties(msa_cli PROPERTIES INSTALL_RPATH "$ORIGIN/${_bin_to_lib}")
  install(TARGETS msa_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
