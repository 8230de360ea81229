// MSA_GPU_NS, the namespace the GPU backend's code lands in (cuda, or hip when hipcc
// compiles the portable tier), without the vendor runtime headers: host-only code (the
// kernel choosers, their tests) includes this instead of vendor.h.
#pragma once

#ifndef MSA_GPU_NS
#if defined(__HIP_PLATFORM_AMD__) || defined(MSA_VENDOR_HIP)
#define MSA_GPU_NS hip
#else
#define MSA_GPU_NS cuda
#endif
#endif
