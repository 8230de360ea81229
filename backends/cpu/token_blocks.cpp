#include "backends/cpu/token_blocks.h"

#include "backends/cpu_ref/attended_sets.h"

namespace msa::cpu {

TokenBlocks::TokenBlocks(const cpu_ref::Batch& batch, int64_t T, const hal::Tensor* block_idx, bool shared,
                         int64_t heads, int64_t Bs) {
  seq.resize(static_cast<size_t>(T));
  pos.resize(static_cast<size_t>(T));
  kv_len.resize(static_cast<size_t>(T));
  for (size_t b = 0; b < batch.seqs.size(); ++b) {
    const cpu_ref::Sequence& s = batch.seqs[b];
    for (int64_t i = 0; i < s.q_len; ++i) {
      seq[static_cast<size_t>(s.q_begin + i)] = static_cast<int64_t>(b);
      pos[static_cast<size_t>(s.q_begin + i)] = s.pos0 + i;
      kv_len[static_cast<size_t>(s.q_begin + i)] = s.kv_len;
    }
  }
  std::vector<int64_t> qb_of(static_cast<size_t>(T), 0);
  for (int64_t n = 0; n < batch.nq(); ++n)
    for (int64_t t = batch.qblocks[static_cast<size_t>(n)].t_begin; t < batch.qblocks[static_cast<size_t>(n)].t_end;
         ++t)
      qb_of[static_cast<size_t>(t)] = n;
  list_begin.assign(1, 0);
  std::vector<int64_t> blocks;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < heads; ++g) {
      const int64_t p = pos[static_cast<size_t>(t)];
      if (block_idx == nullptr) {
        for (int64_t blk = 0; blk * Bs <= p; ++blk) list.push_back(static_cast<int32_t>(blk));
      } else {
        cpu_ref::selected_blocks(batch, *block_idx, qb_of[static_cast<size_t>(t)], shared ? 0 : g, Bs, blocks);
        for (const int64_t blk : blocks)
          if (blk * Bs <= p) list.push_back(static_cast<int32_t>(blk));
      }
      list_begin.push_back(static_cast<int64_t>(list.size()));
    }
}

}  // namespace msa::cpu
