// sparse_block_attention: for each query block and KV head, the G query heads of the
// group x the query block's tokens (up to 16 rows per thread block) attend to the KV
// blocks listed in block_idx. Each selected (page, KV head) slab is one contiguous read
// that serves the whole GQA group. Decode splits the selected blocks over several thread
// blocks (split-KV) and merges the partials by their LSE in fixed split order. Entries
// < 0 or past the sequence's last block contribute nothing; a bad page id is skipped and
// flagged. No allocation or host sync: partials live in the stream's workspace.
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/kernels/portable/attention_launch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "hal/op_id.h"

namespace msa::MSA_GPU_NS {
namespace {

struct SparseParams {
  Batch bt;
  const void* q = nullptr;
  const char* kc = nullptr;
  const char* vc = nullptr;
  const int32_t* bidx = nullptr;  // [NQ][Hs][k]
  int Qb = 1;
  int64_t NQ = 0;
  int Hq = 1, Hkv = 1, G = 1, D = 0, k = 1, Hs = 1;
  int tpc = 1, nrc = 1, S = 1, es = 2;
  float scale_log2 = 1.0f;
  AttnOut o;
};

struct SparseSrc {
  const SparseParams* p;
  const int32_t* entries;
  int b, g, kv, e0, tpb;
  __device__ bool tile(int i, Tile& t) const {
    const int Bs = p->bt.Bs;
    const int e = e0 + i / tpb, part = i % tpb;
    const int c = entries[e];
    if (c < 0 || c >= (kv + Bs - 1) / Bs) return false;
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
__global__ void __launch_bounds__(kAttnThreads) sparse_kernel(SparseParams p) {
  extern __shared__ __align__(16) char smem[];
  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.S);
  x /= p.S;
  const int rc = static_cast<int>(x % p.nrc);
  x /= p.nrc;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t qb = x / p.Hkv;
  const QBlock q = locate_qblock(p.bt, p.Qb, qb, p.NQ, blockIdx.x == 0);
  if (q.ntok <= rc * p.tpc) return;  // no rows here (uniform)
  int64_t* row_id = attn_row_id<DT, DP>(smem);
  int* row_lim = attn_row_lim<DT, DP>(smem);
  if (threadIdx.x < kRows) {
    const int r = threadIdx.x, ti = rc * p.tpc + r / p.G;
    const bool ok = r < p.tpc * p.G && ti < q.ntok;
    row_id[r] = ok ? int64_t{q.t0 + ti} * p.Hq + g * p.G + r % p.G : -1;
    row_lim[r] = ok ? min(q.kv - 1, q.p0 + ti) : -1;
  }
  __syncthreads();
  const int eps = (p.k + p.S - 1) / p.S, e0 = split * eps;
  const int ne = max(0, min(p.k, e0 + eps) - e0);
  SparseSrc src{&p, p.bidx + (qb * p.Hs + (p.Hs == 1 ? 0 : g)) * int64_t{p.k}, q.b, g, q.kv, e0,
                (p.bt.Bs + kBK - 1) / kBK};
  AttnOut o = p.o;
  o.split = split;
  attend<DT, DP>(smem, p.q, p.D, p.scale_log2, src, ne * src.tpb, o);
}

}  // namespace

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
  p.scale_log2 = a.scale * 1.4426950408889634f;
  const int64_t rows = T * Hq;
  const int64_t base = a.NQ * p.Hkv * p.nrc;
  p.S = choose_splits(base, p.k, rows, D, st.props());
  p.o.out = a.out.data<void>();
  p.o.lse = a.lse.data<float>();
  if (p.S > 1) split_buffers(st, p.S, rows, D, p.o);
  const unsigned grid = static_cast<unsigned>(base * p.S);
  MSA_DISPATCH_ACT(a.q.dtype, DT, {
    MSA_DISPATCH_DP(D, DP, {
      constexpr int smem = AttnLayout<DT, DP>::BYTES;
      allow_smem(sparse_kernel<DT, DP>, smem);
      sparse_kernel<DT, DP><<<grid, kAttnThreads, smem, st.native()>>>(p);
      MSA_CUDA_CHECK_LAUNCH();
    });
    if (p.S > 1) launch_merge<DT>(st, p.o, p.S, rows, p.D, a.out.data<void>(), a.lse.data<float>());
  });
}

}  // namespace msa::MSA_GPU_NS
