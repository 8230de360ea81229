// Hopper-tier (sm_90a) dense prefill attention on warpgroup MMA (wgmma), in the
// FlashAttention-3 style, for the main shape: D = 128, bf16/f16, causal (bottom-right),
// GQA, varlen, paged K/V with Bs a multiple of 128. Other shapes, other GPUs, the portable
// tier and the Tuning knob flash < 2 take attention/flash_prefill.cu (the
// FlashAttention-2 kernel) or the kernels after it (dense_attention's chooser).
//
// One thread block of two warpgroups owns 128 query rows sharing one KV head (GQA
// packing as in flash_prefill.cu: 128 / G tokens x G heads); warpgroup w owns rows
// 64 w .. 64 w + 63 (its warps 16 each, as the wgmma accumulator layout dictates).
// Q (128 x 128) stays in shared memory, K and V tiles of 128 keys stream through 3-slot
// rings, all in 128-byte swizzled panels of 64 columns (hopper_ptx.cuh):
//   S = Q K^T: wgmma m64n128k16 SS, both operands K-major (K rows are [key][dim]);
//   O += P V:  wgmma m64n128k16 RS, P from registers (the S accumulators rounded to
//              bf16/f16 are the A fragments, as with mma.sync), V [key][dim] read as an
//              MN-major operand (TransB = 1: LBO = panel stride, SBO = 8 rows).
// Pipelining (FA3's intra-warpgroup overlap): iteration j issues S_j = Q K_j^T and
// O += P_{j-1} V_{j-1} back to back, waits for S_j only, runs the softmax of S_j while
// the P V product is still in the tensor pipe, then waits for it and rescales O.
// Loads: warpgroup 1 issues 16-byte cp.async copies straight into the swizzled layout
// (zero fill past the valid keys), then fence.proxy.async publishes them to the async
// proxy that wgmma reads through. Schedule: ping-pong (FA3's inter-warpgroup overlap):
// the warpgroups take turns issuing their GEMMs (named barriers), so one's softmax runs
// under the other's GEMMs. (A lock-step schedule, one block barrier per tile with all
// threads copying, measured 1.19x slower and is not built.)
// Split-KV (few blocks, long context) writes f32 partials merged by launch_merge.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>

#include "backends/cuda/kernels/attention/launchers.cuh"
#include "backends/cuda/kernels/common/hopper_ptx.cuh"
#include "backends/cuda/kernels/common/mma_ptx.cuh"

namespace msa::cuda {
namespace {

using attn_geom::kWgBK;            // keys per tile
using attn_geom::kWgD;             // head dim (the only one compiled)
using attn_geom::kWgRows;          // query rows per block
constexpr int kWgSlots = 3;        // K and V ring depth
constexpr int kWgThreads = 256;    // two consumer warpgroups
constexpr int kPanel = 128 * 128;  // bytes: 128 rows x 64 two-byte columns, swizzled
constexpr int kTile = 2 * kPanel;  // a 128 x 128 tile (two panels)
constexpr int kQOff = 0;
constexpr int kKOff = kQOff + kTile;
constexpr int kVOff = kKOff + kWgSlots * kTile;
constexpr int kRowOff = kVOff + kWgSlots * kTile;  // row ids (int64) and limits (int)
constexpr int kMetaOff = kRowOff + kWgRows * 12;   // per slot: first key, valid keys
constexpr int kSmemUsed = kMetaOff + 2 * kWgSlots * 4;
constexpr int kSmemBytes = kSmemUsed + 1024;  // + alignment of the base to 1024
constexpr int kORow = kWgD + 4;               // floats per staged output row
static_assert(kSmemBytes <= 232448, "fits the 227 KB opt-in shared memory");
static_assert(8 * 16 * kORow * 4 <= 2 * kWgSlots * kTile, "output staging in the K/V rings");

struct WgParams {
  Batch bt;
  const char* q = nullptr;
  const char* kc = nullptr;
  const char* vc = nullptr;
  int Hq = 1, Hkv = 1, G = 1;
  int tpc = 1;         // tokens per block
  int S = 1;           // KV splits
  int64_t nslots = 0;  // token-chunk slots
  float scale_log2 = 1.0f;
  AttnOut o;
};

// Keeps the compiler from touching registers an in-flight wgmma reads or writes.
__device__ __forceinline__ void fence_u32(uint32_t (&r)[8][4]) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) asm volatile("" : "+r"(r[i][k])::"memory");
}

// Named barriers of the ping-pong schedule (0 is __syncthreads).
__device__ __forceinline__ void named_sync(int id) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(kWgThreads) : "memory");
}
__device__ __forceinline__ void named_arrive(int id) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(kWgThreads) : "memory");
}

// grid: nslots x Hkv x S (split fastest, latest chunks first). Ping-pong schedule (see
// the main loop); warpgroup 1 alone issues the K/V copies.
template <int DT>
__global__ void __launch_bounds__(kWgThreads, 1) flash_wgmma_kernel(const WgParams p) {
#if MSA_HOPPER_PTX
  using namespace hopper;
  using T = typename Elem<DT>::T;
  extern __shared__ char smem_raw[];
  const uint32_t raw_base = ptx::smem_u32(smem_raw);
  const uint32_t sb = (raw_base + 1023u) & ~1023u;  // swizzled tiles need 1024-byte alignment
  char* smem = smem_raw + (sb - raw_base);
  int64_t* s_row_id = reinterpret_cast<int64_t*>(smem + kRowOff);
  int* s_row_lim = reinterpret_cast<int*>(smem + kRowOff + kWgRows * 8);  // last visible key (-1: unused)
  int* s_kp = reinterpret_cast<int*>(smem + kMetaOff);                    // per slot: first key
  int* s_nk = s_kp + kWgSlots;                                            // per slot: valid keys

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wg = __shfl_sync(0xffffffffu, warp >> 2, 0);  // warp-uniform for the compiler
  const int gq = lane >> 2, qd = lane & 3;
  const float ninf = __int_as_float(0xff800000u);
  const Batch& bt = p.bt;
  const int Bs = bt.Bs;

  int64_t x = blockIdx.x;
  const int split = static_cast<int>(x % p.S);
  x /= p.S;
  const int g = static_cast<int>(x % p.Hkv);
  const int64_t slot = p.nslots - 1 - x / p.Hkv;
  if (blockIdx.x == 0 && tid == 0)  // report bad lengths once
    for (int b = 0; b < bt.B; ++b) load_seq(bt, b, true);
  const ChunkLoc loc = locate_chunk(bt, slot, p.tpc);
  if (loc.b < 0) return;  // uniform
  const int b = loc.b, kv = loc.s.kv;
  const int t_in = loc.chunk * p.tpc;
  const int ntok = min(p.tpc, loc.s.qlen - t_in);
  const int pos0 = loc.s.kv - loc.s.qlen + t_in;
  const int max_lim = pos0 + ntok - 1;
  for (int r = tid; r < kWgRows; r += kWgThreads) {
    const int tl = r / p.G;
    const bool ok = r < p.tpc * p.G && tl < ntok;
    s_row_id[r] = ok ? int64_t{loc.s.q0 + t_in + tl} * p.Hq + g * p.G + r % p.G : -1;
    s_row_lim[r] = ok ? pos0 + tl : -1;
  }
  const int ntiles_all = max_lim / kWgBK + 1;  // tiles never cross a page (Bs % 128 == 0)
  const int per = (ntiles_all + p.S - 1) / p.S;
  const int u0 = min(ntiles_all, split * per), nt = min(ntiles_all, u0 + per) - u0;
  const int32_t* bt_row = bt.block_table + int64_t{b} * bt.max_blocks;

  // Copy mapping: thread copies 16-byte chunk ch of keys key_t + 16 i (i < 8); the swizzled
  // chunk depends on key % 8 = key_t % 8 only, so the shared offset is one constant + 2 KB i.
  const int ch = tid & 15, key_t = tid >> 4;
  const uint32_t soff = (ch >> 3) * kPanel + key_t * 128 + (((ch & 7) ^ (key_t & 7)) << 4);
  const int rowbytes = kWgD * 2;
  // K/V copies by warpgroup 1 alone: keys key_c + 8 i, i < 16 (key_c = key_t - 8 has the
  // same key % 8).
  constexpr int kCopyStep = 8, kCopyN = kWgBK / kCopyStep;
  const int key_c = key_t - 8;
  const uint32_t soff_c = soff - 8 * 128;
  // Tile u's K (and V) rows into ring slot u % kWgSlots; metadata with K.
  auto issue = [&](int iu, bool k_side) {
    if (iu >= nt || wg == 0) return;
    const int u = u0 + iu;
    const int kpos0 = u * kWgBK;
    const int c = kpos0 / Bs;
    const int raw = __ldg(bt_row + c);
    const bool pg_ok = raw >= 0 && raw < bt.P;
    const int nk = pg_ok ? min(kWgBK, kv - kpos0) : 0;
    const int sl = iu % kWgSlots;
    if (k_side && tid == 128) {
      if (!pg_ok) raise_flag(bt.flag, kErrPageId, bt.op);
      s_kp[sl] = kpos0;
      s_nk[sl] = nk;
    }
    const int64_t row0 = (int64_t{pg_ok ? raw : 0} * p.Hkv + g) * Bs + (kpos0 - c * Bs);
    const char* src = (k_side ? p.kc : p.vc) + row0 * rowbytes + ch * 16;
    const uint32_t dst = sb + (k_side ? kKOff : kVOff) + sl * kTile + soff_c;
#pragma unroll
    for (int i = 0; i < kCopyN; ++i) {
      const int j = key_c + kCopyStep * i;
      const bool in = j < nk;  // else zero fill from key 0 of the tile, nothing read
      ptx::cp_async16(dst + i * kCopyStep * 128, src + (in ? j * rowbytes : 0), in ? 16 : 0);
    }
  };

  issue(0, true);
  ptx::cp_async_commit();
  issue(1, true);
  issue(0, false);
  ptx::cp_async_commit();
  __syncthreads();  // row table visible
  // Q rows -> shared, swizzled like K.
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int r = key_t + 16 * i;
    const int64_t id = s_row_id[r];
    uint4 v = make_uint4(0, 0, 0, 0);
    if (id >= 0) v = ldg16(p.q + id * rowbytes + ch * 16);
    *reinterpret_cast<uint4*>(smem + kQOff + soff + i * 16 * 128) = v;
  }

  // This lane's rows: 64 wg + 16 (warp % 4) + gq (+ 8).
  const int rbase = 64 * wg + 16 * (warp & 3) + gq;
  const int lim0 = s_row_lim[rbase], lim1 = s_row_lim[rbase + 8];
  const float sl2 = p.scale_log2;
  float m[2] = {ninf, ninf}, l[2] = {0.0f, 0.0f};
  float o[64], sc[64];
  uint32_t pa[8][4];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) pa[i][0] = pa[i][1] = pa[i][2] = pa[i][3] = 0u;

  const uint32_t qa = sb + kQOff + wg * 64 * 128;  // this warpgroup's 64 rows (8 KB aligned)
  auto issue_s = [&](int iu) {
    const uint32_t kb = sb + kKOff + (iu % kWgSlots) * kTile;
#pragma unroll
    for (int kk = 0; kk < kWgD / 16; ++kk) {
      const uint32_t off = (kk >> 2) * kPanel + (kk & 3) * 32;
      wgmma_ss<DT, 128>(sc, desc_kmajor_sw128(qa + off), desc_kmajor_sw128(kb + off), kk > 0);
    }
    wgmma_commit();
  };
  auto issue_pv = [&](int iu) {
    const uint32_t vb = sb + kVOff + (iu % kWgSlots) * kTile;
#pragma unroll
    for (int kc = 0; kc < kWgBK / 16; ++kc)
      wgmma_rs<DT, 128, 1>(o, pa[kc], smem_desc(vb + kc * 16 * 128, kPanel, 1024, Swizzle::b128), true);
    wgmma_commit();
  };
  // Softmax of S (tile iu), base 2: masks, new row maxima, P = 2^(S - m) in sc, l; returns
  // the factors O must be rescaled by (applied by the caller once P V is done).
  auto softmax = [&](int iu, float& a0, float& a1) {
    const int sl = iu % kWgSlots;
    const int kpos0 = s_kp[sl], nk = s_nk[sl];
    const int rel0 = min(lim0 - kpos0, nk - 1), rel1 = min(lim1 - kpos0, nk - 1);
    const bool need_mask = __any_sync(0xffffffffu, min(rel0, rel1) < kWgBK - 1);
    float mx0 = ninf, mx1 = ninf;
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      float v = sc[i] * sl2;
      // A visible -inf logit becomes NaN: with NaN and +inf ones (exp2(inf - inf)) it
      // turns l into NaN, which marks the row (docs/spec.md, "Non-finite inputs").
      if (v == ninf) v = quiet_nan();
      if (need_mask) {
        const int j = 8 * (i >> 2) + 2 * qd + (i & 1);
        if (j > ((i & 2) ? rel1 : rel0)) v = ninf;
      }
      sc[i] = v;
      if (i & 2)
        mx1 = fmaxf(mx1, v);
      else
        mx0 = fmaxf(mx0, v);
    }
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 1));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 1));
    mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, 2));
    mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, 2));
    const float mn0 = fmaxf(m[0], mx0), mn1 = fmaxf(m[1], mx1);
    const float mu0 = mn0 == ninf ? 0.0f : mn0, mu1 = mn1 == ninf ? 0.0f : mn1;  // no inf - inf
    a0 = ptx::ex2(m[0] - mu0);
    a1 = ptx::ex2(m[1] - mu1);
    m[0] = mn0;
    m[1] = mn1;
    float ps0 = 0.0f, ps1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      sc[i] = ptx::ex2(sc[i] - ((i & 2) ? mu1 : mu0));
      if (i & 2)
        ps1 += sc[i];
      else
        ps0 += sc[i];
    }
    l[0] = l[0] * a0 + ps0;  // NaN stays NaN through every later tile
    l[1] = l[1] * a1 + ps1;
  };
  auto rescale_and_pack = [&](float a0, float a1) {
#pragma unroll
    for (int i = 0; i < 64; ++i) o[i] *= (i & 2) ? a1 : a0;
#pragma unroll
    for (int kc = 0; kc < 8; ++kc) {
      pa[kc][0] = ptx::pack2<DT>(sc[8 * kc + 0], sc[8 * kc + 1]);
      pa[kc][1] = ptx::pack2<DT>(sc[8 * kc + 2], sc[8 * kc + 3]);
      pa[kc][2] = ptx::pack2<DT>(sc[8 * kc + 4], sc[8 * kc + 5]);
      pa[kc][3] = ptx::pack2<DT>(sc[8 * kc + 6], sc[8 * kc + 7]);
    }
  };

  if (nt > 0) {
    // Ping-pong (FA3): the warpgroups take turns on the tensor pipe. Round j issues
    // S_j = Q K_j^T (j < nt) and P_{j-1} V_{j-1} (j > 0); warpgroup 0 issues round j after
    // warpgroup 1 issued round j - 1 (barrier 1), warpgroup 1 after warpgroup 0 issued round
    // j (barrier 2), so one warpgroup's softmax runs under the other's GEMMs. The same
    // barriers publish the copies (warpgroup 1 waits for its cp.async groups and fences
    // before arriving) and free the ring slots: after barrier 2 of round j, warpgroup 0 has
    // finished round j - 1, so the slots of K_{j-1} and V_{j-2} take K_{j+2} and V_{j+1}.
    // The code between the barriers is the same for both warpgroups (barrier ids by
    // arithmetic; warpgroup 0's copy calls and cp.async waits are empty), and every round
    // but the first and last issues the same wgmmas: ptxas serialises wgmma behind
    // warpgroup-divergent paths.
    fence_proxy_async_shared();  // Q
    ptx::cp_async_wait<1>();     // K_0 (warpgroup 1)
    fence_proxy_async_shared();
    __syncthreads();               // Q and K_0 published
    if (wg == 1) named_arrive(1);  // round 0 of warpgroup 0 may start
    const int my_bar = wg == 0 ? 1 : 2, other_bar = wg == 0 ? 2 : 1;
    float a0, a1;
    // Round 0: S_0.
    named_sync(my_bar);
    wgmma_fence();
    issue_s(0);
    issue(2, true);
    issue(1, false);
    ptx::cp_async_commit();
    ptx::cp_async_wait<1>();  // warpgroup 1: K_1, V_0
    fence_proxy_async_shared();
    named_arrive(other_bar);
    wgmma_wait<0>();
    fence_regs(sc);
    softmax(0, a0, a1);
    rescale_and_pack(a0, a1);
    for (int j = 1; j < nt; ++j) {  // round j: S_j and P_{j-1} V_{j-1}
      named_sync(my_bar);
      fence_u32(pa);
      wgmma_fence();
      issue_s(j);
      issue_pv(j - 1);
      issue(j + 2, true);  // after the GEMMs: the tensor pipe starts first
      issue(j + 1, false);
      ptx::cp_async_commit();
      ptx::cp_async_wait<1>();  // warpgroup 1: K_{j+1}, V_j
      fence_proxy_async_shared();
      named_arrive(other_bar);
      wgmma_wait<1>();  // S_j done; P_{j-1} V_{j-1} may still run
      fence_regs(sc);
      softmax(j, a0, a1);
      wgmma_wait<0>();
      fence_regs(o);
      fence_u32(pa);
      rescale_and_pack(a0, a1);
    }
    // Round nt: P_{nt-1} V_{nt-1}.
    named_sync(my_bar);
    fence_u32(pa);
    wgmma_fence();
    issue_pv(nt - 1);
    named_arrive(other_bar);
    wgmma_wait<0>();
    fence_regs(o);
    fence_u32(pa);
    if (wg == 0) named_sync(1);  // warpgroup 1's last arrival
  }
  ptx::cp_async_wait<0>();
  __syncthreads();  // every warpgroup is done with the rings: reuse them for the output

  // ---- O / l (staged per warp for coalesced rows) and lse ----
  ptx::mark_nonfinite_rows(o, l);  // a non-finite attended value: a NaN row
  const bool split_mode = p.S > 1;
  float* ob = reinterpret_cast<float*>(smem + kKOff) + warp * 16 * kORow;
  float inv[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    float lt = l[hh];
    lt += __shfl_xor_sync(0xffffffffu, lt, 1);
    lt += __shfl_xor_sync(0xffffffffu, lt, 2);
    inv[hh] = lt != lt ? quiet_nan() : lt > 0.0f ? 1.0f / lt : 0.0f;  // NaN: a non-finite row
    const int64_t id = s_row_id[rbase + 8 * hh];
    if (qd == 0 && id >= 0) {
      const float lse = lt != lt ? quiet_nan() : lt > 0.0f ? (m[hh] + log2f(lt)) * 0.69314718055994531f : ninf;
      if (split_mode)
        p.o.part_lse[int64_t{split} * p.o.rows_total + id] = lse;
      else
        p.o.lse[id] = lse;
    }
  }
#pragma unroll
  for (int n = 0; n < 16; ++n) {
    float* row = ob + gq * kORow + 8 * n + 2 * qd;
    *reinterpret_cast<float2*>(row) = make_float2(o[4 * n] * inv[0], o[4 * n + 1] * inv[0]);
    *reinterpret_cast<float2*>(row + 8 * kORow) = make_float2(o[4 * n + 2] * inv[1], o[4 * n + 3] * inv[1]);
  }
  __syncwarp();
  constexpr int C4 = kWgD / 4;  // float4 chunks per staged row
#pragma unroll 4
  for (int i = 0; i < 16 * C4 / 32; ++i) {
    const int idx = lane + 32 * i, r = idx / C4, c4 = idx % C4;
    const int64_t id = s_row_id[16 * warp + r];
    if (id >= 0) {
      const float4 v = *reinterpret_cast<const float4*>(ob + r * kORow + c4 * 4);
      if (split_mode) {
        *reinterpret_cast<float4*>(p.o.part_o + (int64_t{split} * p.o.rows_total + id) * kWgD + c4 * 4) = v;
      } else {
        T* out = static_cast<T*>(p.o.out) + id * kWgD + c4 * 4;
        *reinterpret_cast<uint2*>(out) = make_uint2(ptx::pack2<DT>(v.x, v.y), ptx::pack2<DT>(v.z, v.w));
      }
    }
  }
#else
  __trap();
#endif
}

}  // namespace

void launch_flash_wgmma(Stream& st, const DenseParams& d, hal::DType dt) {
  WgParams p;
  p.bt = d.bt;
  p.q = static_cast<const char*>(d.q);
  p.kc = d.kc;
  p.vc = d.vc;
  p.Hq = d.Hq;
  p.Hkv = d.Hkv;
  p.G = d.G;
  p.tpc = kWgRows / d.G;
  p.scale_log2 = d.scale * 1.4426950408889634f;
  p.o.out = d.o.out;
  p.o.lse = d.o.lse;
  const int64_t T = p.bt.T, rows = T * p.Hq;
  p.nslots = (T + int64_t{p.bt.B} * (p.tpc - 1)) / p.tpc;  // >= sum over b of ceil(q_len / tpc)
  const int64_t groups = p.nslots * p.Hkv;
  if (groups <= 0) return;
  p.S = attn_geom::wgmma_splits(attn_call(st, d, dt), st.props(), st.tuning());
  if (p.S > 1) split_buffers(st, p.S, rows, kWgD, p.o);
  const unsigned grid = static_cast<unsigned>(groups * p.S);
  if (dt == hal::DType::bf16) {
    allow_smem<flash_wgmma_kernel<kBF16>>(kSmemBytes, st.props().index);
    flash_wgmma_kernel<kBF16><<<grid, kWgThreads, kSmemBytes, st.native()>>>(p);
  } else {
    allow_smem<flash_wgmma_kernel<kF16>>(kSmemBytes, st.props().index);
    flash_wgmma_kernel<kF16><<<grid, kWgThreads, kSmemBytes, st.native()>>>(p);
  }
  MSA_CUDA_CHECK_LAUNCH();
  if (p.S > 1) {
    if (dt == hal::DType::bf16)
      launch_merge<kBF16>(st, p.o, p.S, rows, kWgD, p.o.out, p.o.lse);
    else
      launch_merge<kF16>(st, p.o, p.S, rows, kWgD, p.o.out, p.o.lse);
  }
}

}  // namespace msa::cuda
