#include "backends/cpu/parallel.h"

#include <tbb/blocked_range.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <thread>

#include "backends/cpu/backend.h"

// ThreadSanitizer builds compile this file without -fsanitize=thread and with
// MSA_TSAN_ANNOTATE (see CMakeLists.txt): oneTBB's scheduler lives in the uninstrumented
// libtbb, so TSan cannot see its synchronisation. Its inlined code stays out of TSan's
// view here and the two edges that matter are declared by hand: the caller's writes
// happen before every task, every task happens before the caller continues. Tasks get
// no edge between each other, so a race between two tasks is still reported.
#if MSA_TSAN_ANNOTATE
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define MSA_TSAN_ACQUIRE(p) __tsan_acquire(p)
#define MSA_TSAN_RELEASE(p) __tsan_release(p)
#else
#define MSA_TSAN_ACQUIRE(p) ((void)(p))
#define MSA_TSAN_RELEASE(p) ((void)(p))
#endif

namespace msa::cpu {
namespace {

std::mutex g_mutex;
int g_override = 0;                            // set_thread_count; 0 = default
std::unique_ptr<tbb::task_arena> g_arena;      // built lazily for the current count
std::unique_ptr<tbb::global_control> g_limit;  // lets the arena exceed the core count
int g_arena_threads = 0;

int default_threads() {
  if (const char* env = std::getenv("MSA_CPU_THREADS")) {
    const int n = std::atoi(env);
    if (n >= 1) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw == 0 ? 1 : static_cast<int>(hw);
}

tbb::task_arena& arena() {
  std::lock_guard<std::mutex> lock(g_mutex);
  const int want = g_override > 0 ? g_override : default_threads();
  if (!g_arena || g_arena_threads != want) {
    // TBB caps workers at the core count unless told otherwise; an explicit
    // MSA_CPU_THREADS above it is honoured (useful to test thread-count independence).
    g_limit.reset();
    if (want > static_cast<int>(std::thread::hardware_concurrency()))
      g_limit = std::make_unique<tbb::global_control>(tbb::global_control::max_allowed_parallelism,
                                                      static_cast<size_t>(want));
    g_arena = std::make_unique<tbb::task_arena>(want);
    g_arena_threads = want;
  }
  return *g_arena;
}

}  // namespace

int thread_count() {
  std::lock_guard<std::mutex> lock(g_mutex);
  return g_override > 0 ? g_override : default_threads();
}

void set_thread_count(int n) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_override = n > 0 ? n : 0;
}

void parallel_for(int64_t n, const std::function<void(int64_t)>& fn, int64_t grain) {
  if (n <= 0) return;
  if (n <= grain) {  // one chunk: no point waking the arena
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  tbb::task_arena& a = arena();
  if (a.max_concurrency() == 1) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  char start = 0, done = 0;  // TSan sync objects (MSA_TSAN_ANNOTATE); unused otherwise
  MSA_TSAN_RELEASE(&start);
  struct Done {  // releases even when fn throws
    char* p;
    ~Done() { MSA_TSAN_RELEASE(p); }
  };
  a.execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, grain > 0 ? grain : 1),
                      [&](const tbb::blocked_range<int64_t>& r) {
                        MSA_TSAN_ACQUIRE(&start);
                        Done d{&done};
                        for (int64_t i = r.begin(); i != r.end(); ++i) fn(i);
                      });
  });
  MSA_TSAN_ACQUIRE(&done);
}

}  // namespace msa::cpu
