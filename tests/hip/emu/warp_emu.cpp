// The fiber scheduler and the host-memory runtime behind warp_emu.h. One block runs at a
// time: each GPU thread is a fiber (ucontext for the first entry, then _setjmp/_longjmp,
// which do not save the signal mask); a fiber runs until it reaches a collective or
// exits, then the scheduler releases the collectives whose participants have all
// arrived (waves first, then the block barrier) or reports why none can complete.
#undef _FORTIFY_SOURCE  // longjmp between fiber stacks trips the fortified check
#include "tests/hip/emu/warp_emu.h"

#include <setjmp.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <vector>

#include "hal/dtype.h"

namespace msa_emu {
namespace {

constexpr size_t kStackBytes = 256 * 1024;
constexpr int kMaxThreads = 1024;
constexpr size_t kLdsBytes = 64 * 1024;

enum class State { ready, at_warp, at_block, done };

struct Fiber {
  ucontext_t start{};
  jmp_buf jb{};
  bool started = false;
  State state = State::ready;
  uint3 tid{0, 0, 0};
  int lane = 0, warp = 0;
  uint64_t tag = 0;      // collective this fiber waits at
  uint64_t contrib = 0;  // its contribution
};

struct Wave {
  uint64_t values[64] = {};  // last released collective's contributions
  Mask live = 0;             // lanes that contributed to it
};

// Stacks are kept across launches (mmap'd lazily, only touched pages are committed).
struct StackPool {
  std::vector<char*> stacks;
  char* get(int i) {
    while (static_cast<int>(stacks.size()) <= i) {
      void* p = mmap(nullptr, kStackBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw EmuError("emu: cannot map a fiber stack");
      stacks.push_back(static_cast<char*>(p));
    }
    return stacks[i];
  }
  ~StackPool() {
    for (char* s : stacks) munmap(s, kStackBytes);
  }
};

struct Block {
  int warp = 32;
  dim3 grid, block;
  uint3 bidx{0, 0, 0};
  const std::function<void()>* body = nullptr;
  std::vector<Fiber> fibers;
  std::vector<Wave> waves;
  std::vector<unsigned char> smem_store;  // dynamic shared memory, 256-byte aligned at smem
  unsigned char* smem = nullptr;
  size_t smem_bytes = 0;
  Fiber* cur = nullptr;
  jmp_buf main{};
  std::string error;  // set by a fiber that cannot continue
};

thread_local Block* t_block = nullptr;
thread_local StackPool t_stacks;
thread_local Error t_last_error = kSuccess;  // launch errors are thrown instead (more precise)

Fiber& self() {
  if (t_block == nullptr || t_block->cur == nullptr) {
    std::fprintf(stderr, "msa_emu: device code called outside an emulated launch\n");
    std::abort();
  }
  return *t_block->cur;
}

// Back to the scheduler; returns when the scheduler resumes this fiber.
void yield() {
  Fiber& f = self();
  if (_setjmp(f.jb) == 0) _longjmp(t_block->main, 1);
}

void fiber_entry() {
  Block& b = *t_block;
  Fiber& f = *b.cur;
  try {
    (*b.body)();
  } catch (const std::exception& e) {
    if (b.error.empty()) b.error = std::string("exception in device code: ") + e.what();
  } catch (...) {
    if (b.error.empty()) b.error = "unknown exception in device code";
  }
  f.state = State::done;
  _longjmp(b.main, 1);
}

void resume(Block& b, Fiber& f) {
  b.cur = &f;
  if (_setjmp(b.main) == 0) {
    if (!f.started) {
      f.started = true;
      setcontext(&f.start);
    } else {
      _longjmp(f.jb, 1);
    }
  }
  b.cur = nullptr;
}

std::string where(const Block& b) {
  return "block (" + std::to_string(b.bidx.x) + "," + std::to_string(b.bidx.y) + "," + std::to_string(b.bidx.z) + ")";
}

const char* tag_name(uint64_t tag) {
  switch (tag >> 56) {
    case kIdx:
      return "__shfl";
    case kXor:
      return "__shfl_xor";
    case kUp:
      return "__shfl_up";
    case kDown:
      return "__shfl_down";
    case kBallot:
      return "__ballot/__any/__all";
    case kSyncWarp:
      return "__syncwarp";
    default:
      return "?";
  }
}

// Releases every wave whose live lanes all wait at the same collective. Returns true if
// one was released; throws when a wave can never complete.
bool release_waves(Block& b) {
  bool any = false;
  const int nwaves = static_cast<int>(b.waves.size());
  for (int w = 0; w < nwaves; ++w) {
    const int first = w * b.warp;
    const int last = std::min<int>(first + b.warp, static_cast<int>(b.fibers.size()));
    int waiting = 0, at_block = 0, done = 0;
    for (int i = first; i < last; ++i) {
      const State s = b.fibers[i].state;
      waiting += s == State::at_warp;
      at_block += s == State::at_block;
      done += s == State::done;
    }
    if (waiting == 0) continue;
    if (waiting + at_block + done < last - first) continue;  // some lane still running
    if (at_block > 0 || done > 0)
      throw EmuError("emu: wave " + std::to_string(w) + " of " + where(b) + ": " + std::to_string(waiting) +
                     " lane(s) wait at " + tag_name(b.fibers[first + 0].tag) + " while " + std::to_string(at_block) +
                     " wait at __syncthreads and " + std::to_string(done) +
                     " have exited (a collective every live lane must reach)");
    const uint64_t tag = b.fibers[first].tag;
    Wave& wave = b.waves[w];
    wave.live = 0;
    for (int i = first; i < last; ++i) {
      Fiber& f = b.fibers[i];
      if (f.tag != tag)
        throw EmuError(std::string("emu: lanes of wave ") + std::to_string(w) + " of " + where(b) +
                       " reached different collectives (" + tag_name(tag) + " vs " + tag_name(f.tag) +
                       ", or a different offset/width)");
      wave.values[f.lane] = f.contrib;
      wave.live |= 1ull << f.lane;
      f.state = State::ready;
    }
    any = true;
  }
  return any;
}

void run_block(Block& b) {
  const int n = static_cast<int>(b.fibers.size());
  for (int i = 0; i < n; ++i) {
    Fiber& f = b.fibers[i];
    f = Fiber{};
    const unsigned bx = b.block.x, by = b.block.y;
    f.tid = uint3{static_cast<unsigned>(i) % bx, (static_cast<unsigned>(i) / bx) % by,
                  static_cast<unsigned>(i) / (bx * by)};
    f.lane = i % b.warp;
    f.warp = i / b.warp;
    getcontext(&f.start);
    f.start.uc_stack.ss_sp = t_stacks.get(i);
    f.start.uc_stack.ss_size = kStackBytes;
    f.start.uc_link = nullptr;
    makecontext(&f.start, &fiber_entry, 0);
  }
  if (b.smem_bytes != 0) std::memset(b.smem, 0xff, b.smem_bytes);
  for (;;) {
    bool ran = false;
    for (int i = 0; i < n; ++i) {
      if (b.fibers[i].state != State::ready) continue;
      resume(b, b.fibers[i]);
      ran = true;
      if (!b.error.empty()) throw EmuError("emu: " + where(b) + ", thread " + std::to_string(i) + ": " + b.error);
    }
    if (ran) continue;
    int live = 0, at_block = 0;
    for (const Fiber& f : b.fibers) {
      live += f.state != State::done;
      at_block += f.state == State::at_block;
    }
    if (live == 0) return;
    if (release_waves(b)) continue;
    if (at_block == live) {
      for (Fiber& f : b.fibers)
        if (f.state == State::at_block) f.state = State::ready;
      continue;
    }
    throw EmuError("emu: " + where(b) + ": deadlock: " + std::to_string(at_block) + " of " + std::to_string(live) +
                   " live threads wait at __syncthreads, the others at wave collectives that cannot complete");
  }
}

}  // namespace

void check_width(int width) {
  const int W = t_block->warp;
  if (width <= 0 || width > W || (width & (width - 1)) != 0)
    throw EmuError("emu: shuffle width " + std::to_string(width) + " is not a power of two <= the wave size " +
                   std::to_string(W));
}

void run_grid(int warp, const LaunchCfg& cfg, const std::function<void()>& body) {
  if (warp != 32 && warp != 64) throw EmuError("emu: wave size must be 32 or 64");
  const uint64_t threads = uint64_t{cfg.block.x} * cfg.block.y * cfg.block.z;
  const uint64_t blocks = uint64_t{cfg.grid.x} * cfg.grid.y * cfg.grid.z;
  if (threads == 0 || threads > kMaxThreads || blocks == 0 || cfg.grid.y > 65535 || cfg.grid.z > 65535) {
    throw EmuError("emu: invalid launch configuration: grid (" + std::to_string(cfg.grid.x) + "," +
                   std::to_string(cfg.grid.y) + "," + std::to_string(cfg.grid.z) + "), block (" +
                   std::to_string(cfg.block.x) + "," + std::to_string(cfg.block.y) + "," + std::to_string(cfg.block.z) +
                   ")");
  }
  if (cfg.smem > kLdsBytes) {
    throw EmuError("emu: " + std::to_string(cfg.smem) + " bytes of dynamic shared memory exceed the " +
                   std::to_string(kLdsBytes) + " bytes of LDS per workgroup");
  }
  if (t_block != nullptr) throw EmuError("emu: nested launch from device code");
  Block b;
  b.warp = warp;
  b.grid = cfg.grid;
  b.block = cfg.block;
  b.body = &body;
  b.fibers.resize(threads);
  b.waves.resize((threads + warp - 1) / warp);
  b.smem_store.assign(cfg.smem + 256, 0xff);
  b.smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(b.smem_store.data()) + 255) & ~uintptr_t{255});
  b.smem_bytes = cfg.smem;
  t_block = &b;
  try {
    for (unsigned z = 0; z < cfg.grid.z; ++z)
      for (unsigned y = 0; y < cfg.grid.y; ++y)
        for (unsigned x = 0; x < cfg.grid.x; ++x) {
          b.bidx = uint3{x, y, z};
          run_block(b);
        }
  } catch (...) {
    t_block = nullptr;
    throw;
  }
  t_block = nullptr;
}

const uint3& thread_idx() { return self().tid; }
const uint3& block_idx() {
  self();
  return t_block->bidx;
}
const dim3& block_dim() {
  self();
  return t_block->block;
}
const dim3& grid_dim() {
  self();
  return t_block->grid;
}
int warp_width() {
  self();
  return t_block->warp;
}
int lane_id() { return self().lane; }
void* dyn_smem_base() {
  self();
  return t_block->smem_bytes == 0 ? nullptr : t_block->smem;
}

void sync_block_impl() {
  Fiber& f = self();
  f.state = State::at_block;
  yield();
}

const uint64_t* exchange_impl(uint64_t mine, uint64_t tag, Mask* live) {
  Fiber& f = self();
  f.state = State::at_warp;
  f.tag = tag;
  f.contrib = mine;
  yield();
  const Wave& w = t_block->waves[self().warp];
  *live = w.live;
  return w.values;
}

void trap(const char* what) { throw EmuError(std::string("emu: device code trapped: ") + what); }

float f16_to_f32(uint16_t u) { return msa::hal::f16_to_f32(u); }
uint16_t f32_to_f16(float f) { return msa::hal::f32_to_f16(f); }

// ---- runtime ---------------------------------------------------------------------------

const char* rt_error_string(Error e) {
  switch (e) {
    case kSuccess:
      return "no error (emulated)";
    case kInvalidValue:
      return "invalid argument (emulated)";
    case kMemoryAllocation:
      return "out of memory (emulated)";
    case kInvalidConfiguration:
      return "invalid configuration argument (emulated)";
    case kNoDevice:
      return "no device (emulated)";
    default:
      return "unspecified launch failure (emulated)";
  }
}
Error rt_get_last_error() {
  const Error e = t_last_error;
  t_last_error = kSuccess;
  return e;
}
Error rt_set_device(int d) { return d == 0 ? kSuccess : kInvalidValue; }
Error rt_get_device(int* d) {
  *d = 0;
  return kSuccess;
}
Error rt_malloc(void** p, size_t n) {
  // 256-byte alignment, as cudaMalloc/hipMalloc give.
  *p = std::aligned_alloc(256, (std::max<size_t>(n, 1) + 255) & ~size_t{255});
  return *p != nullptr ? kSuccess : kMemoryAllocation;
}
Error rt_free(void* p) {
  std::free(p);
  return kSuccess;
}
Error rt_malloc_async(void** p, size_t n, Stream) { return rt_malloc(p, n); }
Error rt_free_async(void* p, Stream) { return rt_free(p); }
Error rt_malloc_host(void** p, size_t n) { return rt_malloc(p, n); }
Error rt_free_host(void* p) { return rt_free(p); }
Error rt_memcpy_async(void* dst, const void* src, size_t n, MemcpyKind, Stream) {
  if (n != 0) std::memmove(dst, src, n);
  return kSuccess;
}
Error rt_memset_async(void* dst, int value, size_t n, Stream) {
  if (n != 0) std::memset(dst, value, n);
  return kSuccess;
}
Error rt_stream_create(Stream* s, unsigned) {
  *s = new StreamObj();
  return kSuccess;
}
Error rt_stream_destroy(Stream s) {
  delete s;
  return kSuccess;
}
Error rt_stream_synchronize(Stream) { return kSuccess; }
Error rt_event_create(Event* e) {
  *e = new EventObj();
  return kSuccess;
}
Error rt_event_destroy(Event e) {
  delete e;
  return kSuccess;
}
Error rt_event_record(Event e, Stream) {
  e->t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
  return kSuccess;
}
Error rt_event_elapsed(float* ms, Event a, Event b) {
  *ms = static_cast<float>(b->t - a->t);
  return kSuccess;
}
Error rt_mem_get_info(size_t* free_b, size_t* total_b) {
  *free_b = *total_b = size_t{1} << 30;
  return kSuccess;
}
size_t max_dyn_smem() { return kLdsBytes; }

}  // namespace msa_emu
