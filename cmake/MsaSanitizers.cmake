# MSA_SANITIZE: "" (none), "address,undefined", or "thread". Applied to all C++ targets.
set(MSA_SANITIZE "" CACHE STRING "Sanitizers for C++ code: address,undefined | thread")
if(MSA_SANITIZE)
  # -g1 (line tables): the reports' file:line, at a sixth less compile time than -g (which
  # also overrode the presets' -g1).
  add_compile_options(-fsanitize=${MSA_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all
                      $<$<COMPILE_LANGUAGE:CXX>:-g1>)
  add_link_options(-fsanitize=${MSA_SANITIZE})
endif()
