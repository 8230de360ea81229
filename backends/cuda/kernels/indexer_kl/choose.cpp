// indexer_kl's chooser (choose.h): the tensor-core tier for bf16 inputs, D and Di multiples
// of 16 up to 128, groups of 1, 2, 4, 8 or 16 query heads (per_kv_head, or shared over one
// KV head), aligned data, its shared memory on the device and its index sizes in ints;
// else the portable tiles.
#include "backends/cuda/kernels/indexer_kl/choose.h"

#include <algorithm>
#include <climits>

#include "backends/cuda/kernels/common/aligned.h"
#include "backends/cuda/kernels/indexer_kl/mma_layout.h"

namespace msa::cuda {
namespace {}  // namespace

const char* kernel_name(KlKernel k) { return k == KlKernel::mma ? "mma" : "portable"; }

KlShape kl_shape(const ops::IndexerKlArgs& a) {
  const hal::DType bf = hal::DType::bf16;
  KlShape s;
  s.bf16 = a.q.dtype == bf && a.k_cache.dtype == bf && a.qi.dtype == bf && a.ki_cache.dtype == bf;
  s.T = a.q.dim(0);
  s.Hq = a.q.dim(1);
  s.D = a.q.dim(2);
  s.P = a.k_cache.dim(0);
  s.Hkv = a.k_cache.dim(1);
  s.Bs = a.k_cache.dim(2);
  s.Hs = a.qi.dim(1);
  s.Di = a.qi.dim(2);
  s.MB = a.block_table.dim(1);
  s.shared = a.mode == ops::SelectionMode::shared;
  s.sparse = a.stage == ops::KlStage::sparse;
  if (s.sparse) {
    s.bidx_Hs = a.block_idx.dim(1);
    s.k = a.block_idx.dim(2);
  }
  s.aligned = aligned_to(a.q, 16) && aligned_to(a.k_cache, 16) && aligned_to(a.qi, 16) && aligned_to(a.ki_cache, 16) &&
              aligned_to(a.dqi, 8) && aligned_to(a.dki_cache, 8);
  return s;
}

KlItems kl_items(const KlShape& s, const Tuning& t) {
  KlItems it;
  const int64_t G = s.Hkv > 0 ? s.Hq / s.Hkv : 1;
  // Tokens of the sorted entries (each token is in at most Hs * k entries, or one per
  // causal block when dense) and of all lists (a dense bucket serves every selection
  // head).
  const int64_t tok_bound = s.sparse ? s.T * s.bidx_Hs * s.k : s.T * s.MB;
  const int64_t list_tok_bound = tok_bound * (s.sparse ? 1 : s.Hs);
  const int KW = bwd::chunk_keys(static_cast<int>(s.Bs));
  it.tpi = bwd::tokens_per_item(bwd::forced_item_tokens(t.kl_item_tokens), G, list_tok_bound);
  it.chunks = static_cast<int>((s.Bs + KW - 1) / KW);
  it.lists = s.P * s.Hs;
  const int64_t items_bound = (it.lists + list_tok_bound / it.tpi + 1) * it.chunks;
  const int64_t row_units = G >= 1 && G <= 16 ? (s.T + 16 / G - 1) / (16 / G) * s.Hs : 0;
  it.fits = tok_bound < INT_MAX && list_tok_bound < INT_MAX && it.lists < INT_MAX && s.P * it.chunks < INT_MAX &&
            items_bound < INT_MAX && row_units / klmma::kRowWarps < INT_MAX && s.T * s.Hq < INT_MAX &&
            s.P * s.Bs < INT_MAX;
  return it;
}

KlKernel choose_indexer_kl(const KlShape& s, const DeviceProps& pr, const Tuning& t) {
  if (t.training_mma == 0 || !t.native() || pr.cc_major < 8 || !s.bf16) return KlKernel::portable;
  if (s.Hkv < 1 || s.Hq % s.Hkv != 0 || s.Bs < 1) return KlKernel::portable;
  const int64_t G = s.Hq / s.Hkv;
  if (G > 16 || (G & (G - 1)) != 0 || (s.shared && s.Hkv != 1) || s.Hs != (s.shared ? 1 : s.Hkv))
    return KlKernel::portable;
  if (s.D <= 0 || s.D > 128 || s.D % 16 != 0 || s.Di <= 0 || s.Di > 128 || s.Di % 16 != 0) return KlKernel::portable;
  if ((s.sparse && s.bidx_Hs != s.Hs) || !s.aligned) return KlKernel::portable;
  const int smem = klmma::kl_smem_bytes(static_cast<int>(std::max(s.D, s.Di)), static_cast<int>(s.Bs));
  if (static_cast<size_t>(smem) > pr.smem_optin) return KlKernel::portable;
  return kl_items(s, t).fits ? KlKernel::mma : KlKernel::portable;
}

}  // namespace msa::cuda
