// The host-side work setup the KV-block-outer tensor-core kernels share (attention
// backward's dk / dv kernel, indexer_kl's dki kernel, each op's mma.cu; the forward's
// sparse_block_attention/kv_outer.cu): the scratch it takes; per call the sequence info,
// the sorted inverse index, its entries' token prefix, each list's item count scanned
// into offsets and the zeroed chunk flags and ticket; and the persistent launch sized by
// the blocks' key chunks.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "backends/cuda/kernels/attention_backward/mma_index.cuh"

namespace msa::cuda::bwd {

// The setup's scratch, reserved after the op's own: the inverse index of `entries` raw
// entries over `buckets` buckets, its sorted entries' token prefix, the item offsets of
// `lists` lists, `flags` chunk flags and the ticket, the radix sort's second buffer and
// CUB's temporary storage (enough for the two scans and the sort).
struct ItemScratch {
  IndexPlan ip;
  size_t tok_at, off_at, sem_at, alt_at, tmp_bytes, tmp_at;

  ItemScratch(ScratchPlan& plan, int64_t entries, int64_t buckets, int64_t lists, int64_t flags)
      : ip(plan, entries, buckets),
        tok_at(plan.reserve<int>(ip.N + 1)),
        off_at(plan.reserve<int>(lists + 1)),
        sem_at(plan.reserve<int>(flags + 1)),
        alt_at(plan.reserve<uint64_t>(ip.N)),
        tmp_bytes(std::max({scan_bytes(static_cast<int>(ip.N + 1)), scan_bytes(static_cast<int>(lists + 1)),
                            sort_bytes(static_cast<int>(ip.N), key_bits(ip.buckets))})),
        tmp_at(plan.reserve<char>(static_cast<int64_t>(tmp_bytes))) {}
};

// A kernel writing each list's item count (then scanned into the item offsets): (inverse
// index, token prefix, lists S, heads per page, buckets per page Hb, tokens per item, counts).
using ItemCountKernel = void (*)(InverseIndex, const int*, int, int, int, int, int*);

// Which lists get an item even when no token attended them (their outputs are written
// whatever the selection): none, every list, or a page's first head's list.
enum class EmptyLists : int { none, every, first_head };

// The ItemCountKernel of the KV-block-outer kernels: cnt[s] = items of list s (page
// s / heads, head s % heads, bucket page * Hb + head): ceil(tokens / tpi), raised to 1 as
// kEmpty says; cnt[S] = 0.
template <EmptyLists kEmpty>
__global__ void __launch_bounds__(kPrepThreads)
    list_items_kernel(InverseIndex inv, const int* tokpre, int S, int heads, int Hb, int tpi, int* cnt) {
  for (int s = blockIdx.x * kPrepThreads + threadIdx.x; s <= S; s += gridDim.x * kPrepThreads) {
    int n = 0;
    if (s < S) {
      const int page = s / heads, g = s % heads;
      const int64_t bucket = int64_t{page} * Hb + (Hb == 1 ? 0 : g);
      const int tokens = tokpre[inv.begin[bucket + 1]] - tokpre[inv.begin[bucket]];
      n = (tokens + tpi - 1) / tpi;
      if (kEmpty == EmptyLists::every || (kEmpty == EmptyLists::first_head && g == 0)) n = max(n, 1);
    }
    cnt[s] = n;
  }
}

// Fills the work fields of kernel arguments `m` (tokpre, item_off, sem, ticket, inv; sets,
// Hb, S and tpi already set) in workspace `ws` laid out by `x`: the sequence info `si`, the
// inverse index, the token prefix, the item offsets of m.S lists counted by `count` (with
// `heads` lists per page) and `flags` zeroed chunk flags followed by the zeroed ticket.
template <typename Args>
void build_items(Stream& st, Args& m, const ItemScratch& x, char* ws, SeqInfo* si, bool sparse, ItemCountKernel count,
                 int heads, int64_t flags) {
  auto* tok = reinterpret_cast<int*>(ws + x.tok_at);
  auto* off = reinterpret_cast<int*>(ws + x.off_at);
  auto* sem = reinterpret_cast<int*>(ws + x.sem_at);
  m.tokpre = tok;
  m.item_off = off;
  m.sem = sem;
  m.ticket = sem + flags;
  void* tmp = ws + x.tmp_at;

  launch_seq_info(st, m.sets, sparse, si);
  m.inv = inverse_index(st, m.sets, m.Hb, x.ip, ws, reinterpret_cast<uint64_t*>(ws + x.alt_at), tmp, x.tmp_bytes);
  launch_entry_tokens(st, m.inv, x.ip.N, tok);
  scan_in_place(st, tmp, x.tmp_bytes, tok, static_cast<int>(x.ip.N + 1));
  count<<<grid_for(int64_t{m.S} + 1, kPrepThreads, st.props()), kPrepThreads, 0, st.native()>>>(m.inv, tok, m.S, heads,
                                                                                                m.Hb, m.tpi, off);
  MSA_CUDA_CHECK_LAUNCH();
  scan_in_place(st, tmp, x.tmp_bytes, off, m.S + 1);
  MSA_CUDA_CHECK(cudaMemsetAsync(sem, 0, static_cast<size_t>(flags + 1) * sizeof(int), st.native()));
}

// Launches a persistent KV-block-outer kernel: `launch(kw, grid)` launches the variant for
// KW = chunk_keys(Bs) keys a chunk (kw: std::integral_constant<int, KW>) on `grid` blocks,
// two per multiprocessor at KW = 64, one at KW = 128.
template <typename Launch>
void launch_persistent(Stream& st, int Bs, const Launch& launch) {
  const auto go = [&](auto kw_tag) {
    constexpr int KW = decltype(kw_tag)::value;
    launch(kw_tag, static_cast<unsigned>(std::max(1, st.props().sm_count) * (KW == 64 ? 2 : 1)));
  };
  if (chunk_keys(Bs) == 64)
    go(std::integral_constant<int, 64>{});
  else
    go(std::integral_constant<int, 128>{});
  MSA_CUDA_CHECK_LAUNCH();
}

}  // namespace msa::cuda::bwd
