# The CUDA backend's portable tier as the HIP backend and its CPU emulation tests see it:
# every backends/cuda/kernels/portable/*.cu, and one MSA_PORTABLE_<NAME>=1 definition per
# file, which backends/hip/table.cpp keys on (an op is offered when <op>.cu exists).
function(msa_portable_kernels out_sources out_defs)
  file(GLOB srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/backends/cuda/kernels/portable/*.cu)
  set(defs)
  foreach(s ${srcs})
    get_filename_component(n ${s} NAME_WE)
    string(TOUPPER ${n} n)
    list(APPEND defs MSA_PORTABLE_${n}=1)
  endforeach()
  set(${out_sources} ${srcs} PARENT_SCOPE)
  set(${out_defs} ${defs} PARENT_SCOPE)
endfunction()
