// MSA_API marks what libmsa exports. libmsa is compiled with hidden visibility
// (-fvisibility=hidden -fvisibility-inlines-hidden), so a function or class without it
// stays inside the library. On a class it exports the out-of-line members, the vtable and
// the type_info (one copy per process, so msa::Error thrown in a backend module is the
// msa::Error a caller catches). The installed headers carry it; so do the few internal
// headers whose functions msa's own CLI and tests call (hal/atomic_file.h,
// hal/host_device.h, model/run.h, model/logit_check.h), which link the same shared
// library as every other user: one copy of hal in a process that also loads the CUDA or
// HIP module. Those are not installed and have no compatibility promise.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define MSA_API __attribute__((visibility("default")))
#else
#define MSA_API
#endif
