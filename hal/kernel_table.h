// hal::KernelTable: what one backend offers, one entry per op of hal/op_id.h. An entry
// holds the kernel (type-erased over the op's argument struct from ops/args.h), an
// optional `supports` predicate for sizes the kernel does not cover, and, when the kernel
// is absent, the reason. Backends register with
// `table.set<ops::IndexerScoreArgs>(OpId::indexer_score, &my_kernel)`, usually through one
// expansion of the op list (ops/op_list.h).
#pragma once
#include <array>
#include <functional>
#include <string>

#include "hal/op_id.h"

namespace msa::hal {

class Stream;

struct KernelEntry {
  // Runs the op: (stream, pointer to the op's Args struct). Empty = unsupported. Returns
  // false, enqueuing nothing, only where a composite op's fused kernel declines these
  // args (ops/ then runs the parts); kernels of the other ops always return true.
  std::function<bool(Stream&, const void*)> run;
  // (optional) Returns "" when these args are supported, else why not. Absent = all
  // args that pass the host checks are supported.
  std::function<std::string(const void*)> supports;
  // Why `run` is empty (shown in the "not supported" error).
  std::string reason = "not implemented by this backend";
};

class KernelTable {
 public:
  // Registers `fn` for `op`; Args must be the op's argument struct.
  template <typename Args>
  void set(OpId op, void (*fn)(Stream&, const Args&)) {
    entries_[static_cast<int>(op)].run = [fn](Stream& s, const void* a) {
      fn(s, *static_cast<const Args*>(a));
      return true;
    };
  }
  // Registers a kernel that may decline (returns false, enqueuing nothing): a composite
  // op's fused kernel.
  template <typename Args>
  void set(OpId op, bool (*fn)(Stream&, const Args&)) {
    entries_[static_cast<int>(op)].run = [fn](Stream& s, const void* a) { return fn(s, *static_cast<const Args*>(a)); };
  }
  // Registers a size predicate for `op` ("" = supported).
  template <typename Args>
  void set_supports(OpId op, std::string (*pred)(const Args&)) {
    entries_[static_cast<int>(op)].supports = [pred](const void* a) { return pred(*static_cast<const Args*>(a)); };
  }
  // ... one that carries state (e.g. a vendor's limits): `set_supports<Args>(op, lambda)`.
  template <typename Args>
  void set_supports(OpId op, std::function<std::string(const Args&)> pred) {
    entries_[static_cast<int>(op)].supports = [pred = std::move(pred)](const void* a) {
      return pred(*static_cast<const Args*>(a));
    };
  }
  // Marks `op` unsupported with a reason.
  void set_unsupported(OpId op, std::string reason) {
    auto& e = entries_[static_cast<int>(op)];
    e.run = nullptr;
    e.supports = nullptr;
    e.reason = std::move(reason);
  }
  const KernelEntry& operator[](OpId op) const { return entries_[static_cast<int>(op)]; }
  bool has(OpId op) const { return static_cast<bool>((*this)[op].run); }

 private:
  std::array<KernelEntry, kOpCount> entries_ = default_entries();

  // Kernel ops start "not implemented"; composite ops start with no fused kernel.
  static std::array<KernelEntry, kOpCount> default_entries() {
    std::array<KernelEntry, kOpCount> e{};
    for (int i = kKernelOpCount; i < kOpCount; ++i)
      e[i].reason = "no fused kernel on this backend: runs as its parts (ops/)";
    return e;
  }
};

}  // namespace msa::hal
