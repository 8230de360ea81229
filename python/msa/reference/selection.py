"""The block selection ops: indexer_score, block_topk, indexer_topk."""

from typing import List, Optional, Set, Tuple

import torch

from ._common import F64, NEG_INF, _check_mode, _require, _resolve_scale
from .batch import (QueryBlock, Sequence, _batch, _batch_query_blocks, _check_block_table, _check_qb, _slots,
                    _valid_tokens)
from .key_formats import decode_indexer_keys


def _logsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """log(sum(exp(x))) along dim: -inf for an all -inf row, NaN if any entry is NaN."""
    m = x.amax(dim=dim, keepdim=True)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return (torch.log(torch.exp(x - shift).sum(dim=dim, keepdim=True)) + shift).squeeze(dim)


def _pool_blocks(logits: torch.Tensor, Bs: int, pool: str) -> torch.Tensor:
    """[..., L] token logits (masked ones -inf) -> [..., ceil(L / Bs)] per KV block:
    the max (pool="max") or log-sum-exp (pool="lse") of each block's tokens."""
    L = logits.shape[-1]
    n_blocks = -(-L // Bs)
    pad = torch.full((*logits.shape[:-1], n_blocks * Bs - L), NEG_INF, dtype=F64)
    per_block = torch.cat([logits, pad], dim=-1).reshape(*logits.shape[:-1], n_blocks, Bs)
    return per_block.amax(dim=-1) if pool == "max" else _logsumexp(per_block, dim=-1)


def _indexer_token_scores(qi: torch.Tensor, keys: torch.Tensor, key_scale: Optional[torch.Tensor],
                          block_table: torch.Tensor, seq: Sequence, Bs: int, scale: float,
                          pool: str) -> torch.Tensor:
    """Pooled logits of every query of `seq`: [q_len][Hi][n_blocks]. The logit of query t,
    head j, token s is scale * dot(qi[t][j], ki[s]) (* ki_scale[s]) for s < kv_len and
    s <= pos(t); every other token is masked to -inf (so a block no token of which a query
    sees pools to -inf)."""
    tokens = _valid_tokens(seq)
    pages, slots = _slots(block_table, seq, tokens, Bs)
    ki = keys[pages, slots]  # [kv_len][Di]
    q = qi[seq.q_begin:seq.q_begin + seq.q_len].to(F64)  # [q_len][Hi][Di]
    dots = torch.einsum("qhd,sd->qhs", q, ki)
    if key_scale is not None:
        dots = dots * key_scale[pages, slots]
    logits = scale * dots
    pos = seq.pos0 + torch.arange(seq.q_len, dtype=torch.long)
    future = tokens[None, :] > pos[:, None]  # [q_len][kv_len]
    logits = logits.masked_fill(future[:, None, :], NEG_INF)
    return _pool_blocks(logits, Bs, pool)


def indexer_score(qi, ki_cache, block_table, kv_len, cu_q, *, ki_scale=None, Qb=1, NQ=None,
                  mode="per_kv_head", scale=None, pool="max", ki_format=None) -> torch.Tensor:
    """block_score [NQ][Hi][max_blocks] float64.

    qi [T][Hi][Di]; ki_cache [P][Bs][Di] (or NVFP4 [P][Bs][Di/2], see the module
    docstring) with ki_scale; block_table [B][max_blocks]; kv_len [B]; cu_q [B+1].
    Per query and KV block: the max (or log-sum-exp) of the valid logits; per query
    block: the max over its queries (NaN propagates). Blocks no query of the query block
    sees, and every entry past the sequence's last block, are -inf."""
    _require(qi.dim() == 3, "qi", f"must be [T][Hi][Di], got shape {tuple(qi.shape)}")
    T, Hi, Di = qi.shape
    _require(Hi >= 1 and Di >= 1, "qi", "needs Hi >= 1 and Di >= 1")
    if _check_mode(mode):
        _require(Hi == 1, "qi", f"shared mode needs exactly one indexer head, got Hi = {Hi}")
    _require(pool in ("max", "lse"), "pool", f"must be max or lse, got {pool!r}")
    keys, key_scale = decode_indexer_keys(ki_cache, ki_scale, Di, ki_format)
    P, Bs = ki_cache.shape[0], ki_cache.shape[1]
    scale = _resolve_scale(scale, Di)
    max_blocks = block_table.shape[1]
    seqs = _batch(cu_q, kv_len, T, Bs, max_blocks)
    _check_block_table(block_table, seqs, Bs, P)
    blocks = _batch_query_blocks(seqs, Qb, NQ)

    token_scores = torch.full((T, Hi, max_blocks), NEG_INF, dtype=F64)
    for s in seqs:
        if s.q_len > 0:
            pooled = _indexer_token_scores(qi, keys, key_scale, block_table, s, Bs, scale, pool)
            token_scores[s.q_begin:s.q_begin + s.q_len, :, :s.n_blocks(Bs)] = pooled
    block_score = torch.full((len(blocks), Hi, max_blocks), NEG_INF, dtype=F64)
    for n, qb in enumerate(blocks):
        block_score[n] = token_scores[qb.t_begin:qb.t_end].amax(dim=0)
    return block_score


def min_k(Qb: int, Bs: int, n_sink: int, n_local: int) -> int:
    """The host's bound: k >= n_sink + (n_local - 1 + max(1, Qb / Bs)), the bracket only
    when n_local > 0 (Qb / Bs in integers: Qb and Bs are powers of two)."""
    return n_sink + ((n_local - 1 + max(1, Qb // Bs)) if n_local > 0 else 0)


def _forced_blocks(qb: QueryBlock, Bs: int, nvalid: int, n_sink: int, n_local: int) -> Set[int]:
    """Sinks 0 .. n_sink-1 and, for every query position p of the block, the n_local blocks
    floor(p/Bs) - n_local + 1 .. floor(p/Bs), clipped to the valid blocks 0 .. nvalid-1."""
    forced = set(range(min(n_sink, nvalid)))
    for p in range(qb.p0, qb.p1 + 1):
        own = p // Bs
        forced.update(c for c in range(own - n_local + 1, own + 1) if 0 <= c < nvalid)
    return forced


def _select_blocks(score: torch.Tensor, forced: Set[int], k: int) -> List[int]:
    """One row of block_topk over the valid blocks' scores [nvalid], ascending."""
    nvalid = score.numel()
    if nvalid <= k:
        return list(range(nvalid))  # all valid blocks, whatever the scores
    # NaN ranks as -inf; adding +0.0 turns -0 into +0 so the two compare (and sort) equal.
    score = score.to(F64).masked_fill(torch.isnan(score), NEG_INF) + 0.0
    candidates = torch.tensor([c for c in range(nvalid) if c not in forced and score[c] > NEG_INF],
                              dtype=torch.long)
    # Descending score; the stable sort keeps ties in ascending block order.
    order = torch.sort(-score[candidates], stable=True).indices
    best = candidates[order][:k - len(forced)]
    return sorted(forced | set(best.tolist()))


def block_topk(block_score, kv_len, cu_q, *, Qb=1, NQ=None, Bs=128, k=16, n_sink=0,
               n_local=1) -> Tuple[torch.Tensor, torch.Tensor]:
    """(block_idx [NQ][Hs][k] int32, ascending, padded with -1; block_cnt [NQ][Hs] int32).

    For a query block whose last position is p1 the valid blocks are 0 .. floor(p1/Bs).
    With at most k valid blocks all of them are taken. Otherwise the forced blocks (sinks
    and local blocks), then the other valid blocks with a score that is not -inf (NaN
    counts as -inf, -0 == +0) by descending score, ties to the lower index, until k."""
    _require(block_score.dim() == 3, "block_score", f"must be [NQ][Hs][max_blocks], got {tuple(block_score.shape)}")
    rows, Hs, max_blocks = block_score.shape
    _require(k >= 1, "k", f"must be >= 1, got {k}")
    _require(n_sink >= 0, "n_sink", f"must be >= 0, got {n_sink}")
    _require(n_local >= 0, "n_local", f"must be >= 0, got {n_local}")
    _check_qb(Qb)
    _require(Bs >= 1, "Bs", f"must be >= 1, got {Bs}")
    _require(k >= min_k(Qb, Bs, n_sink, n_local), "k",
             f"must be >= n_sink + n_local - 1 + max(1, Qb/Bs) = {min_k(Qb, Bs, n_sink, n_local)}, got {k}")
    seqs = _batch(cu_q, kv_len, None, Bs, max_blocks)
    blocks = _batch_query_blocks(seqs, Qb, NQ)
    _require(rows == len(blocks), "block_score", f"must have NQ = {len(blocks)} rows, got {rows}")

    block_idx = torch.full((rows, Hs, k), -1, dtype=torch.int32)
    block_cnt = torch.zeros((rows, Hs), dtype=torch.int32)
    for n, qb in enumerate(blocks):
        nvalid = qb.p1 // Bs + 1
        forced = _forced_blocks(qb, Bs, nvalid, n_sink, n_local)
        _require(nvalid <= k or len(forced) <= k, "k",
                 f"{len(forced)} forced blocks in query block {n} exceed k = {k}")
        for h in range(Hs):
            chosen = _select_blocks(block_score[n, h, :nvalid], forced, k)
            block_idx[n, h, :len(chosen)] = torch.tensor(chosen, dtype=torch.int32)
            block_cnt[n, h] = len(chosen)
    return block_idx, block_cnt


def indexer_topk(qi, ki_cache, block_table, kv_len, cu_q, *, ki_scale=None, Qb=1, NQ=None,
                 mode="per_kv_head", scale=None, pool="max", k=16, n_sink=0, n_local=1,
                 ki_format=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """indexer_score, then block_topk over its scores with Bs = ki_cache.shape[1]."""
    score = indexer_score(qi, ki_cache, block_table, kv_len, cu_q, ki_scale=ki_scale, Qb=Qb, NQ=NQ,
                          mode=mode, scale=scale, pool=pool, ki_format=ki_format)
    return block_topk(score, kv_len, cu_q, Qb=Qb, NQ=score.shape[0], Bs=ki_cache.shape[1], k=k,
                      n_sink=n_sink, n_local=n_local)
