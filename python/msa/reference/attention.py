"""Attention over the paged KV cache: sparse_block_attention, dense_attention, and _attend,
the softmax attention of one set of rows that every attention op uses."""

from typing import List, Tuple

import torch

from ._common import F64, NEG_INF, _check_mode, _ints, _require, _resolve_scale
from .batch import Sequence, _batch, _batch_query_blocks, _check_block_table, _slots, _valid_tokens


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale * q k^T) @ v over every row of k and v. q [n][D], k and v [m][D]
    -> (out [n][D], lse [n]), lse the natural log of the softmax denominator. The caller
    passes exactly the attended rows (selected by index, never masked by a multiply), so
    data outside the attended set cannot reach the result. m = 0: out 0, lse -inf."""
    n, D = q.shape
    if k.shape[0] == 0:
        return torch.zeros((n, D), dtype=F64), torch.full((n,), NEG_INF, dtype=F64)
    logits = scale * (q @ k.T)
    m = logits.amax(dim=-1, keepdim=True)
    p = torch.exp(logits - m)
    denom = p.sum(dim=-1, keepdim=True)
    return (p @ v) / denom, (m + torch.log(denom)).squeeze(-1)


def _check_attention_inputs(q, k_cache, v_cache) -> Tuple[int, int]:
    """(G, Bs) after checking q [T][Hq][D] and the caches [P][Hkv][Bs][D]."""
    _require(q.dim() == 3, "q", f"must be [T][Hq][D], got {tuple(q.shape)}")
    _require(k_cache.dim() == 4 and k_cache.shape[3] == q.shape[2], "k_cache",
             f"must be [P][Hkv][Bs][D] with D = {q.shape[2]}, got {tuple(k_cache.shape)}")
    _require(tuple(v_cache.shape) == tuple(k_cache.shape), "v_cache", "must have k_cache's shape")
    Hkv = k_cache.shape[1]
    _require(Hkv > 0 and q.shape[1] % Hkv == 0, "k_cache", f"Hkv = {Hkv} must divide Hq = {q.shape[1]}")
    return q.shape[1] // Hkv, k_cache.shape[2]


def _gather_kv(k_cache, v_cache, block_table, seq: Sequence, g: int, tokens: torch.Tensor,
               Bs: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """K and V rows [len(tokens)][D] of KV head g at the given cached positions."""
    pages, slots = _slots(block_table, seq, tokens, Bs)
    return k_cache[pages, g, slots].to(F64), v_cache[pages, g, slots].to(F64)


def _listed_blocks(entries: torch.Tensor, seq: Sequence, Bs: int, where: str) -> List[int]:
    """The entries of one block_idx row that contribute (0 <= c < ceil(kv_len/Bs); -1
    and every other entry contribute nothing), ascending. Duplicates are rejected."""
    listed = sorted(c for c in _ints(entries) if 0 <= c < seq.n_blocks(Bs))
    _require(len(set(listed)) == len(listed), "block_idx", f"{where} lists a block more than once")
    return listed


def _tokens_of_blocks(listed: List[int], Bs: int, kv_len: int) -> torch.Tensor:
    """Positions of the listed blocks' tokens that are in the cache (s < kv_len)."""
    parts = [torch.arange(c * Bs, min((c + 1) * Bs, kv_len), dtype=torch.long) for c in listed]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def _attend_causal(q64, out, lse, seq: Sequence, t_range: range, heads: slice, tokens: torch.Tensor,
                   k_rows: torch.Tensor, v_rows: torch.Tensor, scale: float) -> None:
    """Query heads `heads` of each token t attend to the rows of `tokens` with s <= pos(t)."""
    for t in t_range:
        seen = tokens <= seq.position(t)
        out[t, heads], lse[t, heads] = _attend(q64[t, heads], k_rows[seen], v_rows[seen], scale)


def sparse_block_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, *, Qb=1,
                           NQ=None, mode="per_kv_head", scale=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [T][Hq][D] float64, lse [T][Hq] float64).

    Query t, head h attends to every token s of every block listed in
    block_idx[qb(t)][h // G] (selection 0 in shared mode) with s < kv_len and s <= pos(t).
    Entries that are negative or >= ceil(kv_len/Bs) contribute nothing; an empty set gives
    out = 0, lse = -inf."""
    G, Bs = _check_attention_inputs(q, k_cache, v_cache)
    T, Hq, D = q.shape
    P, Hkv = k_cache.shape[0], k_cache.shape[1]
    shared = _check_mode(mode)
    _require(block_idx.dim() == 3, "block_idx", f"must be [NQ][Hs][k], got {tuple(block_idx.shape)}")
    rows, Hs = block_idx.shape[0], block_idx.shape[1]
    _require(Hs == (1 if shared else Hkv), "block_idx",
             f"selection heads must be {'1 (shared)' if shared else f'Hkv = {Hkv} (per_kv_head)'}, got {Hs}")
    scale = _resolve_scale(scale, D)
    seqs = _batch(cu_q, kv_len, T, Bs, block_table.shape[1])
    _check_block_table(block_table, seqs, Bs, P)
    blocks = _batch_query_blocks(seqs, Qb, NQ)
    _require(rows == len(blocks), "block_idx", f"must have NQ = {len(blocks)} rows, got {rows}")

    q64 = q.to(F64)
    out = torch.zeros((T, Hq, D), dtype=F64)
    lse = torch.full((T, Hq), NEG_INF, dtype=F64)
    for n, qb in enumerate(blocks):
        seq = seqs[qb.seq]
        for g in range(Hkv):
            h_sel = 0 if shared else g  # shared: one selection, K/V still from KV head g
            listed = _listed_blocks(block_idx[n, h_sel], seq, Bs, f"block_idx[{n}][{h_sel}]")
            tokens = _tokens_of_blocks(listed, Bs, seq.kv_len)
            k_rows, v_rows = _gather_kv(k_cache, v_cache, block_table, seq, g, tokens, Bs)
            _attend_causal(q64, out, lse, seq, range(qb.t_begin, qb.t_end), slice(g * G, (g + 1) * G),
                           tokens, k_rows, v_rows, scale)
    return out, lse


def dense_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, *,
                    scale=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse): sparse_block_attention over every valid, causal cached token."""
    G, Bs = _check_attention_inputs(q, k_cache, v_cache)
    T, Hq, D = q.shape
    P, Hkv = k_cache.shape[0], k_cache.shape[1]
    scale = _resolve_scale(scale, D)
    seqs = _batch(cu_q, kv_len, T, Bs, block_table.shape[1])
    _check_block_table(block_table, seqs, Bs, P)

    q64 = q.to(F64)
    out = torch.zeros((T, Hq, D), dtype=F64)
    lse = torch.full((T, Hq), NEG_INF, dtype=F64)
    for seq in seqs:
        if seq.q_len == 0:
            continue
        tokens = _valid_tokens(seq)
        for g in range(Hkv):
            k_rows, v_rows = _gather_kv(k_cache, v_cache, block_table, seq, g, tokens, Bs)
            _attend_causal(q64, out, lse, seq, range(seq.q_begin, seq.q_begin + seq.q_len),
                           slice(g * G, (g + 1) * G), tokens, k_rows, v_rows, scale)
    return out, lse
