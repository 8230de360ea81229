// sparse_block_attention: for each query block and KV head, the G query heads of the
// group x the query block's tokens (up to 16 rows per thread block) attend to the KV
// blocks listed in block_idx. Each selected (page, KV head) slab is one contiguous read
// that serves the whole GQA group. Decode splits the selected blocks over several thread
// blocks (split-KV) and merges the partials by their LSE in fixed split order. Entries
// < 0 or past the sequence's last block contribute nothing; a bad page id is skipped and
// flagged. No allocation or host sync: partials live in the stream's workspace.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"

namespace msa::MSA_GPU_NS {

void sparse_block_attention(hal::Stream& s, const ops::SparseAttentionArgs& a) {
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  if (a.NQ == 0 || T == 0) return;
  auto& st = gpu_stream(s);
  SparseParams p;
  p.bt.cu_q = a.cu_q.data<int32_t>();
  p.bt.kv_len = a.kv_len.data<int32_t>();
  p.bt.block_table = a.block_table.data<int32_t>();
  p.bt.B = static_cast<int>(a.kv_len.dim(0));
  p.bt.T = static_cast<int>(T);
  p.bt.max_blocks = static_cast<int>(a.block_table.dim(1));
  p.bt.Bs = static_cast<int>(a.k_cache.dim(2));
  p.bt.P = a.k_cache.dim(0);
  p.bt.flag = st.error_flag();
  p.bt.op = static_cast<int>(hal::OpId::sparse_block_attention);
  p.q = a.q.data<void>();
  p.kc = a.k_cache.data<char>();
  p.vc = a.v_cache.data<char>();
  p.bidx = a.block_idx.data<int32_t>();
  p.Qb = a.Qb;
  p.NQ = a.NQ;
  p.Hq = static_cast<int>(Hq);
  p.Hkv = static_cast<int>(a.k_cache.dim(1));
  p.G = p.Hq / p.Hkv;
  p.D = static_cast<int>(D);
  p.k = static_cast<int>(a.block_idx.dim(2));
  p.Hs = static_cast<int>(a.block_idx.dim(1));
  p.es = static_cast<int>(hal::dtype_size(a.q.dtype));
  p.tpc = std::max(1, kRows / p.G);
  p.nrc = static_cast<int>((std::min<int64_t>(a.Qb, T) + p.tpc - 1) / p.tpc);
  p.scale = a.scale;
  p.o.out = a.out.data<void>();
  p.o.lse = a.lse.data<float>();
  if (launch_decode_sparse(st, p, a.q.dtype)) return;  // CUDA native tier, decode-sized calls
  if (launch_flash_sparse(st, p, a.q.dtype)) return;   // CUDA native tier, prefill
  const int64_t rows = T * Hq;
  const int64_t base = a.NQ * p.Hkv * p.nrc;
  p.S = choose_splits(base, p.k, rows, D, st.props());
  if (p.S > 1) split_buffers(st, p.S, rows, D, p.o);
  const unsigned grid = static_cast<unsigned>(base * p.S);
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    if (!launch_tc_sparse(st, p, grid, a.q.dtype)) {
      MSA_DISPATCH_DP(D, DP, {
        constexpr int smem = AttnLayout<DT, DP>::BYTES;
        allow_smem<sparse_kernel<DT, DP, FmaCore>>(smem, st.props().index);
        sparse_kernel<DT, DP, FmaCore><<<grid, kAttnThreads, smem, st.native()>>>(p);
        MSA_CUDA_CHECK_LAUNCH();
      });
    }
    if (p.S > 1) launch_merge<DT>(st, p.o, p.S, rows, p.D, a.out.data<void>(), a.lse.data<float>());
  });
}

}  // namespace msa::MSA_GPU_NS
