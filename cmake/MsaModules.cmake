# The CUDA and HIP backends as modules: libmsa_backend_<name>.so, built next to libmsa and
# installed beside it in lib/, that libmsa's registry dlopen()s when the backend is first
# probed (hal/module_loader.cpp). A machine without the backend's runtime (libcudart,
# libamdhip64) then still runs everything else, and `msa devices` says why the backend is
# absent.
#
# msa_add_backend_module(<name>), in backends/<name>/, after its static library
# msa_backend_<name>:
#   msa_backend_<name>_entry   OBJECT: backends/<name>/module.cpp, the C entry point
#   msa_backend_<name>_module  MODULE: libmsa_backend_<name>.so = the entry + the static library
# Test programs that reach into a backend's internals link msa_backend_<name>_entry (and
# with it the static library) and hand the entry to hal::use_linked_backend_module, so
# that their process holds one copy of the backend.
function(msa_add_backend_module name)
  set(lib msa_backend_${name})
  add_library(${lib}_entry OBJECT ${PROJECT_SOURCE_DIR}/backends/${name}/module.cpp)
  target_link_libraries(${lib}_entry PUBLIC ${lib} msa)
  target_compile_definitions(${lib}_entry PRIVATE MSA_VERSION_STRING="${PROJECT_VERSION}")
  add_library(${lib}_module MODULE $<TARGET_OBJECTS:${lib}_entry>)
  target_link_libraries(${lib}_module PRIVATE ${lib} msa)
  set_target_properties(${lib}_module PROPERTIES
    OUTPUT_NAME ${lib}
    EXPORT_NAME backend_${name}
    LIBRARY_OUTPUT_DIRECTORY $<TARGET_FILE_DIR:msa>
    INSTALL_RPATH "$ORIGIN")
  if(CMAKE_SYSTEM_NAME STREQUAL "Linux")
    target_link_options(${lib}_module PRIVATE "LINKER:--version-script=${PROJECT_SOURCE_DIR}/cmake/backend_module.map")
    set_target_properties(${lib}_module PROPERTIES LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/backend_module.map)
  endif()
  set_property(GLOBAL APPEND PROPERTY MSA_BACKEND_MODULES ${lib}_module)
endfunction()

# Makes `target` (a program or the Python extension that opens devices) build after every
# backend module, so that running it from the build tree finds them.
function(msa_depends_on_modules target)
  get_property(_modules GLOBAL PROPERTY MSA_BACKEND_MODULES)
  if(_modules)
    add_dependencies(${target} ${_modules})
  endif()
endfunction()
