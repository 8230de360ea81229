// dense_attention: every valid, causal cached token. Query rows are chunks of a
// sequence's tokens x the G heads of one KV head (up to 16 rows per thread block); the
// KV blocks 0 .. (last row's position)/Bs are split over several thread blocks when the
// grid would be small (decode), merged by LSE in fixed order.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {
namespace {

struct DenseParams {
  Batch bt;
  const void* q = nullptr;
  const char* kc = nullptr;
  const char* vc = nullptr;
  int Hq = 1, Hkv = 1, G = 1, D = 0, es = 2;
  int tpc = 1, S = 1, bps = 1;  // tokens per chunk, splits, KV blocks per split
  float scale_log2 = 1.0f;
  AttnOut o;
};

struct DenseSrc {
  const DenseParams* p;
  int b, g, kv, c0, tpb;
  __device__ bool tile(int i, Tile& t) const {
    const int Bs = p->bt.Bs;
    const int c = c0 + i / tpb, part = i % tpb;
    const int64_t page = page_of(p->bt, b, c);
    if (page < 0) return false;
    t.kpos0 = c * Bs + part * kBK;
    t.nkeys = min(kBK, min(Bs - part * kBK, kv - t.kpos0));
    const int64_t off = ((page * p->Hkv + g) * Bs + part * kBK) * int64_t{p->D} * p->es;
    t.k = p->kc + off;
    t.v = p->vc + off;
    t.stride = p->D;
    return true;
  }
};

template <int DT, int DP>
__global__ void __launch_bounds__(kAttnThreads) dense_kernel(DenseParams p) {
  extern __shared__ __align__(16) char smem[];
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.S);
  x /= p.S;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t slot = x / p.Hkv;
  // Find the chunk: sequences contribute ceil(q_len / tpc) chunks each.
  if (blockIdx.x == 0)
    for (int b = threadIdx.x; b < p.bt.B; b += blockDim.x) load_seq(p.bt, b);
  int b = -1, chunk = 0;
  Seq sq;
  int64_t acc = 0;
  for (int i = 0; i < p.bt.B; ++i) {
    const Seq s = load_seq(p.bt, i, false);
    const int n = s.ok ? (s.qlen + p.tpc - 1) / p.tpc : 0;
    if (slot < acc + n) {
      b = i;
      chunk = static_cast<int>(slot - acc);
      sq = s;
      break;
    }
    acc += n;
  }
  if (b < 0) return;
  int64_t* row_id = attn_row_id<DT, DP>(smem);
  int* row_lim = attn_row_lim<DT, DP>(smem);
  if (threadIdx.x < kRows) {
    const int r = threadIdx.x, ti = chunk * p.tpc + r / p.G;
    const bool ok = r < p.tpc * p.G && ti < sq.qlen;
    row_id[r] = ok ? int64_t{sq.q0 + ti} * p.Hq + g * p.G + r % p.G : -1;
    row_lim[r] = ok ? sq.kv - sq.qlen + ti : -1;  // pos <= kv - 1 always
  }
  __syncthreads();
  int max_lim = -1;
  for (int r = 0; r < kRows; ++r) max_lim = max(max_lim, row_lim[r]);
  const int nblk = max_lim / p.bt.Bs + 1;
  const int c0 = split * p.bps, c1 = min(nblk, c0 + p.bps);
  DenseSrc src{&p, b, g, sq.kv, c0, (p.bt.Bs + kBK - 1) / kBK};
  AttnOut o = p.o;
  o.split = split;
  attend<DT, DP>(smem, p.q, p.D, p.scale_log2, src, max(0, c1 - c0) * src.tpb, o);
}

}  // namespace

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
  p.scale_log2 = a.scale * 1.4426950408889634f;
  const int64_t slots = (T + p.tpc - 1) / p.tpc + p.bt.B;
  const int64_t rows = T * Hq;
  const int64_t base = ((T + p.tpc - 1) / p.tpc) * p.Hkv;
  p.S = choose_splits(base, p.bt.max_blocks, rows, D, st.props());
  p.bps = (p.bt.max_blocks + p.S - 1) / p.S;
  p.o.out = a.out.data<void>();
  p.o.lse = a.lse.data<float>();
  if (p.S > 1) split_buffers(st, p.S, rows, D, p.o);
  const unsigned grid = static_cast<unsigned>(slots * p.Hkv * p.S);
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    MSA_DISPATCH_DP(D, DP, {
      constexpr int smem = AttnLayout<DT, DP>::BYTES;
      allow_smem(dense_kernel<DT, DP>, smem);
      dense_kernel<DT, DP><<<grid, kAttnThreads, smem, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    });
    if (p.S > 1) launch_merge<DT>(st, p.o, p.S, rows, p.D, a.out.data<void>(), a.lse.data<float>());
  });
}

}  // namespace msa::MSA_GPU_NS
