// sparse_block_attention: one plan group per query block and KV head over its selected
// blocks, small query blocks with overlapping selections merged (attention_plan.h; run
// by paged_attention.cpp).
#include <algorithm>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "backends/cpu/attention_plan.h"
#include "backends/cpu/kernels.h"
#include "hal/error.h"

namespace msa::cpu {

void sparse_block_attention(hal::Stream&, const ops::SparseAttentionArgs& a) {
  const char* op = "sparse_block_attention";
  PagedAttnPlan p;
  init_plan(p, op, a.q, a.k_cache, a.v_cache, a.block_table, a.kv_len, a.cu_q, a.Qb, a.scale, a.out, a.lse);
  check_nq(op, p.batch, a.NQ);
  const int64_t Hs = a.block_idx.dim(1), K = a.block_idx.dim(2);
  const bool shared = a.mode == ops::SelectionMode::shared;
  MSA_CHECK_ARG(Hs == (shared ? 1 : p.Hkv), op, "block_idx",
                "dim 1 must be " + std::string(shared ? "1 (shared mode)" : "Hkv (per_kv_head mode)"));
  const int32_t* idx = a.block_idx.data<const int32_t>();
  const int64_t tpg = tokens_per_group(p.G);
  std::vector<int32_t> uni, next;
  std::vector<int64_t> members;  // query blocks of the group being built
  for (size_t b = 0; b < p.batch.seqs.size(); ++b) {
    const SeqInfo& s = p.batch.seqs[b];
    for (int64_t h = 0; h < p.Hkv; ++h) {
      auto list_of = [&](int64_t n) { return idx + (n * Hs + (shared ? 0 : h)) * K; };
      // The valid entries of query block n's list, sorted and without duplicates.
      auto valid = [&](int64_t n, std::vector<int32_t>& out) {
        out.clear();
        for (int64_t j = 0; j < K; ++j) {
          const int32_t c = list_of(n)[j];
          if (c >= 0 && c < s.n_blocks) out.push_back(c);
        }
        std::sort(out.begin(), out.end());
        out.erase(std::unique(out.begin(), out.end()), out.end());
      };
      for (int64_t n = s.qb_begin; n < s.qb_begin + s.n_qb;) {
        const QBlock& qb = p.batch.qblocks[static_cast<size_t>(n)];
        if (qb.t_end - qb.t_begin >= tpg) {  // a large query block: token tiles of its own
          for (int64_t t0 = qb.t_begin; t0 < qb.t_end; t0 += tpg)
            add_group(p, qb.seq, h, t0, std::min(t0 + tpg, qb.t_end), list_of(n), K);
          ++n;
          continue;
        }
        valid(n, uni);
        members.assign(1, n);
        int64_t ntok = qb.t_end - qb.t_begin;
        double separate = static_cast<double>(uni.size()) * static_cast<double>(ntok);
        int64_t m = n + 1;
        for (; m < s.qb_begin + s.n_qb; ++m) {
          const QBlock& nb = p.batch.qblocks[static_cast<size_t>(m)];
          const int64_t nt = nb.t_end - nb.t_begin;
          if (ntok + nt > tpg) break;
          valid(m, next);
          std::vector<int32_t> merged;
          std::set_union(uni.begin(), uni.end(), next.begin(), next.end(), std::back_inserter(merged));
          const double sep = separate + static_cast<double>(next.size()) * static_cast<double>(nt);
          if (static_cast<double>(merged.size()) * static_cast<double>(ntok + nt) > kMergeSlack * sep) break;
          uni.swap(merged);
          separate = sep;
          ntok += nt;
          members.push_back(m);
        }
        if (members.size() == 1) {
          add_group(p, qb.seq, h, qb.t_begin, qb.t_end, list_of(n), K);
        } else {
          add_group(p, qb.seq, h, qb.t_begin, p.batch.qblocks[static_cast<size_t>(m - 1)].t_end, nullptr,
                    static_cast<int64_t>(uni.size()));
          PagedAttnPlan::Group& g = p.groups.back();
          g.list_off = static_cast<int64_t>(p.lists.size());
          g.sel_off = static_cast<int64_t>(p.sel.size());
          p.lists.insert(p.lists.end(), uni.begin(), uni.end());
          const size_t base = p.sel.size();
          p.sel.resize(base + uni.size() * static_cast<size_t>(ntok), 0);
          for (int64_t mb : members) {
            const QBlock& q = p.batch.qblocks[static_cast<size_t>(mb)];
            valid(mb, next);
            for (size_t e = 0; e < uni.size(); ++e)
              if (std::binary_search(next.begin(), next.end(), uni[e]))
                for (int64_t t = q.t_begin; t < q.t_end; ++t)
                  p.sel[base + e * static_cast<size_t>(ntok) + static_cast<size_t>(t - qb.t_begin)] = 1;
          }
        }
        n = m;
      }
    }
  }
  // p.lists is complete: point the merged groups at their lists.
  for (PagedAttnPlan::Group& g : p.groups)
    if (g.list_off >= 0) g.list = p.lists.data() + g.list_off;
  finish_plan(p, kSparseChunkBlocks);
  run_paged_plan(p);
}

}  // namespace msa::cpu
