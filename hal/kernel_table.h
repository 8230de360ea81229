// hal::KernelTable: what one backend offers, one entry per op. An entry holds the
// kernel (type-erased over the op's argument struct from ops/args.h), an optional
// `supports` predicate for sizes the kernel does not cover, and, when the kernel is
// absent, the reason. ops:: fills in the types (ops/dispatch.h); backends register with
// `table.set<IndexerScoreArgs>(OpId::indexer_score, &my_kernel)`.
#pragma once
#include <array>
#include <functional>
#include <string>

#include "hal/op_id.h"

namespace msa::hal {

class Stream;

struct KernelEntry {
  // Runs the op: (stream, pointer to the op's Args struct). Empty = unsupported.
  std::function<void(Stream&, const void*)> run;
  // (optional) Returns "" when these args are supported, else why not. Absent = all
  // args that pass the host checks are supported.
  std::function<std::string(const void*)> supports;
  // Why `run` is empty (shown by `msa devices` and in the error).
  std::string reason = "not implemented by this backend";
};

class KernelTable {
 public:
  // Registers `fn` for `op`; Args must be the op's argument struct.
  template <typename Args>
  void set(OpId op, void (*fn)(Stream&, const Args&)) {
    entries_[static_cast<int>(op)].run = [fn](Stream& s, const void* a) { fn(s, *static_cast<const Args*>(a)); };
  }
  // Registers a size predicate for `op` ("" = supported).
  template <typename Args>
  void set_supports(OpId op, std::string (*pred)(const Args&)) {
    entries_[static_cast<int>(op)].supports = [pred](const void* a) { return pred(*static_cast<const Args*>(a)); };
  }
  // Marks `op` unsupported with a reason.
  void set_unsupported(OpId op, std::string reason) {
    auto& e = entries_[static_cast<int>(op)];
    e.run = nullptr;
    e.reason = std::move(reason);
  }
  const KernelEntry& operator[](OpId op) const { return entries_[static_cast<int>(op)]; }
  bool has(OpId op) const { return static_cast<bool>((*this)[op].run); }

  // (optional) indexer_score followed by block_topk on its scores in one launch
  // (ops::indexer_topk). `fn` returns false, enqueuing nothing, when it has no fused kernel
  // for these arguments; the two ops then run one after the other.
  template <typename IndexerArgs, typename TopkArgs>
  void set_indexer_topk(bool (*fn)(Stream&, const IndexerArgs&, const TopkArgs&)) {
    indexer_topk_ = [fn](Stream& s, const void* i, const void* t) {
      return fn(s, *static_cast<const IndexerArgs*>(i), *static_cast<const TopkArgs*>(t));
    };
  }
  const std::function<bool(Stream&, const void*, const void*)>& indexer_topk() const { return indexer_topk_; }

 private:
  std::array<KernelEntry, kOpCount> entries_{};
  std::function<bool(Stream&, const void*, const void*)> indexer_topk_;
};

}  // namespace msa::hal
