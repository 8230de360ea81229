// The shared-core kernels of sparse_block_attention, dense_attention and
// patch_attention_3d (portable/attention_kernels.cuh) instantiated with the wmma
// tensor-core core (wmma_core.cuh) for bf16 and f16, and the chooser's view of a bound
// call (launchers.cuh).
#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/attention/wmma_core.cuh"

namespace msa::cuda {
static_assert(attn_geom::kRows == kRows, "the choosers' row chunks are the shared-core kernels'");
namespace {

// Runs BODY with `constexpr int DT` bound to bf16 or f16.
#define MSA_HALF_DISPATCH(dt, ...) \
  if ((dt) == hal::DType::bf16) {  \
    constexpr int DT = kBF16;      \
    __VA_ARGS__;                   \
  } else {                         \
    constexpr int DT = kF16;       \
    __VA_ARGS__;                   \
  }

// The fields every attention call shares.
AttnCall base_call(const Stream& st, hal::DType dt, int64_t T, int Hq, int Hkv, int D, const void* q, const void* k,
                   const void* v, const void* out) {
  AttnCall c;
  c.dtype = dt;
  c.T = T;
  c.Hq = Hq;
  c.Hkv = Hkv;
  c.G = Hq / Hkv;
  c.D = D;
  c.aligned16 = aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out);
  c.counter_slot = st.counter_slot();
  return c;
}

}  // namespace

AttnCall attn_call(const Stream& st, const SparseParams& p, hal::DType dt) {
  AttnCall c = base_call(st, dt, p.bt.T, p.Hq, p.Hkv, p.D, p.q, p.kc, p.vc, p.o.out);
  c.B = p.bt.B;
  c.max_blocks = p.bt.max_blocks;
  c.Bs = p.bt.Bs;
  c.NQ = p.NQ;
  c.Qb = p.Qb;
  c.k = p.k;
  c.Hs = p.Hs;
  c.pages = p.bt.P;
  return c;
}

AttnCall attn_call(const Stream& st, const DenseParams& p, hal::DType dt) {
  AttnCall c = base_call(st, dt, p.bt.T, p.Hq, p.Hkv, p.D, p.q, p.kc, p.vc, p.o.out);
  c.B = p.bt.B;
  c.max_blocks = p.bt.max_blocks;
  c.Bs = p.bt.Bs;
  return c;
}

AttnCall attn_call(const Stream& st, const ops::PatchAttention3dArgs& a) {
  const int64_t N = a.q.dim(0);
  const int H = static_cast<int>(a.q.dim(1)), D = static_cast<int>(a.q.dim(2));
  if (N == 0) return base_call(st, a.q.dtype, 0, H, H, D, nullptr, nullptr, nullptr, nullptr);  // no data to read
  return base_call(st, a.q.dtype, N, H, H, D, a.q.data<void>(), a.k.data<void>(), a.v.data<void>(), a.out.data<void>());
}

void launch_wmma_sparse(Stream& st, SparseParams& p, hal::DType dt) {
  MSA_HALF_DISPATCH(dt, run_sparse_tiles<TcCore, DT>(st, p));
}

void launch_wmma_dense(Stream& st, DenseParams& p, hal::DType dt) {
  MSA_HALF_DISPATCH(dt, run_dense_tiles<TcCore, DT>(st, p));
}

void launch_wmma_patch(Stream& st, const PatchParams& p, hal::DType dt) {
  MSA_HALF_DISPATCH(dt, run_patch_tiles<TcCore, DT>(st, p));
}

}  // namespace msa::cuda
