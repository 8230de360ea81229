// dense_attention: every valid, causal cached token. Query rows are chunks of a
// sequence's tokens x the G heads of one KV head (up to 16 rows per thread block); the
// KV blocks 0 .. (last row's position)/Bs are split over several thread blocks when the
// grid would be small (decode), merged by LSE in fixed order.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_kernels.cuh"
#include "backends/cuda/kernels/portable/attention_launch.cuh"

namespace msa::MSA_GPU_NS {

void dense_attention(hal::Stream& s, const ops::DenseAttentionArgs& a) {
  const int64_t T = a.q.dim(0), Hq = a.q.dim(1), D = a.q.dim(2);
  if (T == 0) return;
  auto& st = gpu_stream(s);
  DenseParams p;
  p.bt.cu_q = a.cu_q.data<int32_t>();
  p.bt.kv_len = a.kv_len.data<int32_t>();
  p.bt.block_table = a.block_table.data<int32_t>();
  p.bt.B = static_cast<int>(a.kv_len.dim(0));
  p.bt.T = static_cast<int>(T);
  p.bt.max_blocks = static_cast<int>(a.block_table.dim(1));
  p.bt.Bs = static_cast<int>(a.k_cache.dim(2));
  p.bt.P = a.k_cache.dim(0);
  p.bt.flag = st.error_flag();
  p.bt.op = static_cast<int>(hal::OpId::dense_attention);
  if (p.bt.max_blocks == 0) return;
  p.q = a.q.data<void>();
  p.kc = a.k_cache.data<char>();
  p.vc = a.v_cache.data<char>();
  p.Hq = static_cast<int>(Hq);
  p.Hkv = static_cast<int>(a.k_cache.dim(1));
  p.G = p.Hq / p.Hkv;
  p.D = static_cast<int>(D);
  p.es = static_cast<int>(hal::dtype_size(a.q.dtype));
  p.tpc = std::max(1, kRows / p.G);
  p.scale = a.scale;
  p.o.out = a.out.data<void>();
  p.o.lse = a.lse.data<float>();
  if (launch_decode_dense(st, p, a.q.dtype)) return;  // CUDA native tier, decode-sized calls
  if (launch_wgmma_dense(st, p, a.q.dtype)) return;   // CUDA native tier, sm_90 prefill (D = 128)
  if (launch_flash_dense(st, p, a.q.dtype)) return;   // CUDA native tier, prefill
  const int64_t slots = (T + p.tpc - 1) / p.tpc + p.bt.B;
  const int64_t rows = T * Hq;
  const int64_t base = ((T + p.tpc - 1) / p.tpc) * p.Hkv;
  p.S = choose_splits(base, p.bt.max_blocks, rows, D, st.props());
  p.bps = (p.bt.max_blocks + p.S - 1) / p.S;
  if (p.S > 1) split_buffers(st, p.S, rows, D, p.o);
  const unsigned grid = static_cast<unsigned>(slots * p.Hkv * p.S);
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    if (!launch_tc_dense(st, p, grid, a.q.dtype)) {
      MSA_DISPATCH_DP(D, DP, {
        constexpr int smem = AttnLayout<DT, DP>::BYTES;
        allow_smem<dense_kernel<DT, DP, FmaCore>>(smem, st.props().index);
        dense_kernel<DT, DP, FmaCore><<<grid, kAttnThreads, smem, st.native()>>>(p);
        MSA_CUDA_CHECK_LAUNCH();
      });
    }
    if (p.S > 1) launch_merge<DT>(st, p.o, p.S, rows, p.D, a.out.data<void>(), a.lse.data<float>());
  });
}

}  // namespace msa::MSA_GPU_NS
