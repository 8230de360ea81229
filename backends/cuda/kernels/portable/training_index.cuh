// The attended sets of the training kernels on the device (sparse_block_attention_backward,
// dense_attention_backward, indexer_kl), as the forward ops define them, and their
// inverse: for each key slab, the (query block, block) entries that attended it.
//  - seq_info_kernel validates cu_q / kv_len (and NQ) with the forward's checks and
//    error flags (seq.cuh) and numbers the query blocks; tokens and query blocks are then
//    found by binary search (find_token, find_qblock).
//  - for_each_attended walks one token's blocks (block_idx order, or every causal block
//    of a dense call), skipping entries that contribute nothing and flagging bad pages.
//  - build_inverse groups the raw entries (query block, selection row, j) by bucket (a
//    page, or a page and selection head): a key (bucket << 32 | entry id) per entry,
//    sorted (sort_keys.cuh), then each bucket's first position. Distinct keys make the
//    order, hence every sum over a bucket, independent of scheduling: no float atomics.
#pragma once
#include <cstdint>

#include "backends/cuda/kernels/portable/paged_batch.cuh"
#include "backends/cuda/kernels/portable/seq.cuh"
#include "backends/cuda/kernels/portable/sort_keys.cuh"
#include "hal/op_id.h"
#include "hal/tensor.h"

namespace msa::MSA_GPU_NS {

// A dense call numbered as one query block per sequence with queries.
inline constexpr int kDenseQb = 0x7fffffff;

struct SeqInfo {
  int q0 = 0, qlen = 0, kv = 0;
  int qb0 = 0;  // its first query block
  int nqb = 0;  // its query blocks (0: no queries, or invalid)
};

// The attended sets of one call: dense (bidx null: every causal block of the sequence)
// or the selection of block_idx [NQ][Hs][k].
struct AttendSets {
  Batch bt;
  const SeqInfo* si = nullptr;    // [B], from seq_info_kernel
  const int32_t* bidx = nullptr;  // null: dense
  int Qb = kDenseQb;
  int k = 0;
  int Hs = 1;      // block_idx rows per query block
  int64_t NQ = 0;  // query blocks (dense: B, an upper bound)
  // Sparse: the inverse index covers query blocks qb_first .. (entry e of entry_kernel is
  // raw entry qb_first * Hs * k + e), so a call's queries can be indexed in groups.
  int64_t qb_first = 0;
};

// One block: validates every sequence (raising the flag as the forward kernels do),
// numbers the query blocks, and checks their total against NQ when check_nq.
template <int kThreads>
__global__ void __launch_bounds__(kThreads) seq_info_kernel(Batch bt, int Qb, int64_t NQ, bool check_nq, SeqInfo* si) {
  __shared__ int scratch[kThreads / kWarp + 1];
  int64_t carry = 0;
  for (int b0 = 0; b0 < bt.B; b0 += kThreads) {
    const int b = b0 + static_cast<int>(threadIdx.x);
    Seq s;
    int n = 0;
    if (b < bt.B) {
      s = load_seq(bt, b);
      n = s.ok ? seq_qblocks(s, Qb) : 0;
    }
    int total = 0;
    const int before = block_excl_scan(n, scratch, &total);
    if (b < bt.B) si[b] = SeqInfo{s.q0, s.qlen, s.kv, static_cast<int>(carry + before), n};
    carry += total;
  }
  if (threadIdx.x == 0 && check_nq && carry != NQ) raise_flag(bt.flag, kErrNQ, bt.op);
}

// Query block qb of the call (ntok = 0 when there is none).
__device__ __forceinline__ QBlock find_qblock(const AttendSets& a, int64_t qb) {
  QBlock r;
  int lo = 0, hi = a.bt.B - 1, f = -1;
  while (lo <= hi) {
    const int mid = (lo + hi) >> 1;
    if (a.si[mid].qb0 <= qb) {
      f = mid;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  if (f < 0) return r;
  // Sequences without blocks share their successor's qb0: the last one found is the one
  // holding qb, if any does.
  const SeqInfo s = a.si[f];
  if (qb >= int64_t{s.qb0} + s.nqb) return r;
  const int first = s.kv - s.qlen;
  const int64_t blk = first / a.Qb + (qb - s.qb0);
  const int64_t pstart = max(int64_t{first}, blk * a.Qb);
  const int64_t pend = min(int64_t{s.kv} - 1, blk * a.Qb + a.Qb - 1);
  r.b = f;
  r.t0 = s.q0 + static_cast<int>(pstart - first);
  r.ntok = static_cast<int>(pend - pstart + 1);
  r.p0 = static_cast<int>(pstart);
  r.kv = s.kv;
  return r;
}

// A packed token: its sequence (b = -1: none valid), position, kv_len and query block.
struct TokenAt {
  int b = -1;
  int pos = 0, kv = 0;
  int64_t qb = -1;
};

__device__ __forceinline__ TokenAt find_token(const AttendSets& a, int t) {
  TokenAt r;
  const int b = seq_of_token(a.bt, t);
  if (b < 0) return r;
  const SeqInfo s = a.si[b];
  if (s.nqb == 0 || t < s.q0 || t >= s.q0 + s.qlen) return r;
  const int first = s.kv - s.qlen, pos = first + (t - s.q0);
  const int64_t qb = s.qb0 + (pos / a.Qb - first / a.Qb);
  if (qb >= a.NQ) return r;  // NQ disagrees with the batch (flagged by seq_info_kernel)
  r.b = b;
  r.pos = pos;
  r.kv = s.kv;
  r.qb = qb;
  return r;
}

// Key slots of block c that a query at `pos` attends (pos < kv_len).
__device__ __forceinline__ int attended_slots(int Bs, int pos, int c) { return min(Bs, pos + 1 - c * Bs); }

// fn(j, c, page, slots) for every block token `tk` attends with block_idx row `row`
// (sparse; ignored when dense), in block_idx order (dense: ascending); j is the entry's
// column in block_idx (dense: j = c). Entries outside the sequence or after the token
// contribute nothing; a bad page id is flagged and skipped.
template <class Fn>
__device__ __forceinline__ void for_each_attended_at(const AttendSets& a, const TokenAt& tk, int row, Fn&& fn) {
  if (tk.b < 0) return;
  const int Bs = a.bt.Bs, nblk = (tk.kv + Bs - 1) / Bs;
  const int n = a.bidx != nullptr ? a.k : tk.pos / Bs + 1;
  const int32_t* sel = a.bidx != nullptr ? a.bidx + (tk.qb * a.Hs + row) * int64_t{a.k} : nullptr;
  for (int j = 0; j < n; ++j) {
    const int c = sel != nullptr ? sel[j] : j;
    if (c < 0 || c >= nblk || int64_t{c} * Bs > tk.pos) continue;
    const int64_t page = page_of(a.bt, tk.b, c);
    if (page < 0) continue;
    fn(j, c, page, attended_slots(Bs, tk.pos, c));
  }
}

// fn(c, page, slots) for the same blocks.
template <class Fn>
__device__ __forceinline__ void for_each_attended(const AttendSets& a, const TokenAt& tk, int row, Fn&& fn) {
  for_each_attended_at(a, tk, row, [&](int, int c, int64_t page, int slots) { fn(c, page, slots); });
}

// The same walk one entry at a time (kernels that prefetch blocks ahead): the entries
// j in [0, attended_count) of token tk, and entry j's block c and page, or false when
// for_each_attended skips it (a bad page id is flagged).
__device__ __forceinline__ int attended_count(const AttendSets& a, const TokenAt& tk) {
  if (tk.b < 0) return 0;
  return a.bidx != nullptr ? a.k : tk.pos / a.bt.Bs + 1;
}
__device__ __forceinline__ bool attended_at(const AttendSets& a, const TokenAt& tk, int row, int j, int& c,
                                            int64_t& page) {
  const int Bs = a.bt.Bs, nblk = (tk.kv + Bs - 1) / Bs;
  c = a.bidx != nullptr ? a.bidx[(tk.qb * a.Hs + row) * int64_t{a.k} + j] : j;
  if (c < 0 || c >= nblk || int64_t{c} * Bs > tk.pos) return false;
  page = page_of(a.bt, tk.b, c);
  return page >= 0;
}

// One entry of the inverse index: tokens [t0, t1) (positions p0, p0 + 1, ..) attend
// logical block c with selection head hs (-1: every head, dense).
struct Entry {
  int t0 = 0, t1 = 0, p0 = 0, c = 0, hs = -1;
};

struct InverseIndex {
  const Entry* ent = nullptr;       // by raw entry id
  const uint64_t* order = nullptr;  // sorted keys: bucket << 32 | entry id
  const int* begin = nullptr;       // [buckets + 1]: bucket b is order[begin[b] .. begin[b+1])

  __device__ __forceinline__ int64_t id(int w) const { return static_cast<int64_t>(order[w] & 0xffffffffu); }
  __device__ __forceinline__ const Entry& at(int w) const { return ent[id(w)]; }
};

// Raw entry e: (query block, row, j) of block_idx, or (sequence block, c) when dense.
// Bucket: page * Hb + row (Hb = 1: the page). Invalid entries get key ~0 (sorted last),
// as do the padding keys [E, N).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    entry_kernel(AttendSets a, int Hb, int64_t E, int64_t N, Entry* ent, uint64_t* keys) {
  const int Bs = a.bt.Bs;
  for (int64_t e = int64_t{blockIdx.x} * kThreads + threadIdx.x; e < N; e += int64_t{gridDim.x} * kThreads) {
    uint64_t key = ~uint64_t{0};
    if (e < E) {
      int64_t qb;
      int hs, c;
      if (a.bidx != nullptr) {
        const int64_t ea = a.qb_first * a.Hs * a.k + e;  // E stays inside block_idx
        qb = ea / (int64_t{a.Hs} * a.k);
        hs = static_cast<int>((ea / a.k) % a.Hs);
        c = a.bidx[ea];
      } else {
        qb = e / a.bt.max_blocks;
        hs = -1;
        c = static_cast<int>(e % a.bt.max_blocks);
      }
      const QBlock q = find_qblock(a, qb);
      if (q.ntok > 0 && c >= 0 && c < (q.kv + Bs - 1) / Bs) {
        const int64_t page = page_of(a.bt, q.b, c);
        const int64_t first = max(int64_t{c} * Bs, int64_t{q.p0});  // first attending position
        if (page >= 0 && first <= q.p0 + q.ntok - 1) {
          ent[e] = Entry{q.t0 + static_cast<int>(first - q.p0), q.t0 + q.ntok, static_cast<int>(first), c, hs};
          const int64_t bucket = page * Hb + (Hb == 1 ? 0 : hs);
          key = (static_cast<uint64_t>(bucket) << 32) | static_cast<uint64_t>(e);
        }
      }
    }
    keys[e] = key;
  }
}

// begin[b] = first sorted position of bucket b (buckets: the end, past the valid keys).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    bucket_begin_kernel(const uint64_t* keys, int64_t N, int64_t buckets, int* begin) {
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i <= N; i += int64_t{gridDim.x} * kThreads) {
    const int64_t prev = i == 0 ? -1 : min(static_cast<int64_t>(keys[i - 1] >> 32), buckets);
    const int64_t cur = i == N ? buckets : min(static_cast<int64_t>(keys[i] >> 32), buckets);
    for (int64_t b = prev + 1; b <= cur; ++b) begin[b] = static_cast<int>(i);
  }
}

// Scratch of one call, carved from a single Stream::workspace() request (the workspace
// is valid until the next request) at 256-byte boundaries.
class ScratchPlan {
 public:
  // Reserves `count` objects of T; returns their byte offset.
  template <typename T>
  size_t reserve(int64_t count) {
    const size_t at = bytes_;
    bytes_ += (static_cast<size_t>(count) * sizeof(T) + 255) / 256 * 256;
    return at;
  }
  char* allocate(Stream& st) { return static_cast<char*>(st.workspace(bytes_ + 256)); }

 private:
  size_t bytes_ = 0;
};

// Where build_inverse keeps its arrays for E raw entries and `buckets` buckets.
struct IndexPlan {
  int64_t E = 0, N = 0, buckets = 0;
  size_t ent = 0, keys = 0, begin = 0;

  IndexPlan(ScratchPlan& plan, int64_t entries, int64_t n_buckets)
      : E(entries), N(sort_capacity(entries)), buckets(n_buckets) {
    ent = plan.reserve<Entry>(E);
    keys = plan.reserve<uint64_t>(N);
    begin = plan.reserve<int>(buckets + 1);
  }
};

// The launches of build_inverse before and after its sort: the raw entries and their
// keys, and the buckets' first positions in the sorted keys.
inline void launch_entry_keys(Stream& st, const AttendSets& a, int Hb, const IndexPlan& ip, Entry* ent,
                              uint64_t* keys) {
  constexpr int kThreads = 256;
  entry_kernel<kThreads>
      <<<grid_for(ip.N, kThreads, st.props()), kThreads, 0, st.native()>>>(a, Hb, ip.E, ip.N, ent, keys);
  MSA_CUDA_CHECK_LAUNCH();
}
inline void launch_bucket_begin(Stream& st, const IndexPlan& ip, const uint64_t* keys, int* begin) {
  constexpr int kThreads = 256;
  bucket_begin_kernel<kThreads>
      <<<grid_for(ip.N + 1, kThreads, st.props()), kThreads, 0, st.native()>>>(keys, ip.N, ip.buckets, begin);
  MSA_CUDA_CHECK_LAUNCH();
}

// Builds the inverse index of `a` (bucket = page * Hb + row) in the scratch at `ws`.
inline InverseIndex build_inverse(Stream& st, const AttendSets& a, int Hb, const IndexPlan& ip, char* ws) {
  auto* ent = reinterpret_cast<Entry*>(ws + ip.ent);
  auto* keys = reinterpret_cast<uint64_t*>(ws + ip.keys);
  auto* begin = reinterpret_cast<int*>(ws + ip.begin);
  launch_entry_keys(st, a, Hb, ip, ent, keys);
  sort_keys(st, keys, ip.N);
  launch_bucket_begin(st, ip, keys, begin);
  return InverseIndex{ent, keys, begin};
}

// The attended sets of a paged training call (Args: its cu_q, kv_len, block_table and
// k_cache): the selection of `block_idx` [NQ][Hs][k] in query blocks of Qb, or with
// block_idx null every causal block.
template <typename Args>
AttendSets attend_sets(Stream& st, const Args& a, int64_t T, const hal::Tensor* block_idx, int Qb, int64_t NQ,
                       hal::OpId op) {
  AttendSets sets;
  sets.bt = to_batch(st, ops::batch_of(a), T, a.k_cache.dim(2), a.k_cache.dim(0), op);
  if (block_idx != nullptr) {
    sets.bidx = block_idx->data<int32_t>();
    sets.k = static_cast<int>(block_idx->dim(2));
    sets.Hs = static_cast<int>(block_idx->dim(1));
    sets.Qb = Qb;
    sets.NQ = NQ;
  } else {
    sets.NQ = sets.bt.B;
  }
  return sets;
}

// Validates and numbers the sequences of `a` into si (launches seq_info_kernel).
inline void launch_seq_info(Stream& st, const AttendSets& a, bool check_nq, SeqInfo* si) {
  constexpr int kThreads = 256;
  seq_info_kernel<kThreads><<<1, kThreads, 0, st.native()>>>(a.bt, a.Qb, a.NQ, check_nq, si);
  MSA_CUDA_CHECK_LAUNCH();
}

// Raw entries of a call's inverse index.
inline int64_t raw_entries(const AttendSets& a) {
  return a.bidx != nullptr ? a.NQ * a.Hs * a.k : int64_t{a.bt.B} * a.bt.max_blocks;
}

}  // namespace msa::MSA_GPU_NS
