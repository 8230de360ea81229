"""Seeded random inputs for the package tests: paged batches with NaN in every cache slot
no op may read (slack slots past kv_len, unused pages), and the contract's tolerances."""
import math

import torch

import msa.reference as ref

NAN = float("nan")


def randn(g, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=torch.float32).to(dtype)


class PagedBatch:
    """A varlen batch over a paged cache: q_lens[b] new tokens of sequences holding
    kv_lens[b] tokens (this step's included), pages in a shuffled order."""

    def __init__(self, g, q_lens, kv_lens, *, Hq=4, Hkv=2, D=64, Bs=64, Hi=2, Di=64, dtype=torch.float32,
                 spare_pages=2):
        self.q_lens, self.kv_lens, self.Bs = list(q_lens), list(kv_lens), Bs
        B = len(q_lens)
        blocks = [math.ceil(n / Bs) for n in kv_lens]
        self.max_blocks = max(blocks + [1]) + 1
        P = sum(blocks) + spare_pages
        order = torch.randperm(P, generator=g).to(torch.int32)
        self.block_table = torch.zeros((B, self.max_blocks), dtype=torch.int32)
        used, page = [], 0
        for b, n in enumerate(blocks):
            self.block_table[b, :n] = order[page:page + n]
            used += [(b, c, int(order[page + c])) for c in range(n)]
            page += n
        self.kv_len = torch.tensor(kv_lens, dtype=torch.int32)
        self.cu_q = torch.tensor([0] + list(_prefix(q_lens)), dtype=torch.int32)
        T = int(self.cu_q[-1])
        self.q = randn(g, T, Hq, D, dtype=dtype)
        self.k_cache = self._cache(g, (P, Hkv, Bs, D), used, dtype, head_dim=True)
        self.v_cache = self._cache(g, (P, Hkv, Bs, D), used, dtype, head_dim=True)
        self.qi = randn(g, T, Hi, Di, dtype=dtype)
        self.ki_cache = self._cache(g, (P, Bs, Di), used, dtype, head_dim=False)

    def _cache(self, g, shape, used, dtype, head_dim):
        c = torch.full(shape, NAN, dtype=torch.float32)
        for b, blk, page in used:
            n = min(self.Bs, self.kv_lens[b] - blk * self.Bs)
            if head_dim:
                c[page, :, :n] = torch.randn(shape[1], n, shape[3], generator=g)
            else:
                c[page, :n] = torch.randn(n, shape[2], generator=g)
        return c.to(dtype)

    def paged(self):
        return self.block_table, self.kv_len, self.cu_q


def _prefix(xs):
    s = 0
    for x in xs:
        s += x
        yield s


def random_selection(g, batch, Hs, k, Qb=1):
    """A block_idx of the reference's block_topk over random scores (forced blocks included)."""
    NQ = ref.count_query_blocks(batch.cu_q, batch.kv_len, Qb)
    scores = torch.randn(NQ, Hs, batch.max_blocks, generator=g, dtype=torch.float64).float()
    idx, _ = ref.block_topk(scores, batch.kv_len, batch.cu_q, Qb=Qb, NQ=NQ, Bs=batch.Bs, k=k)
    return idx.to(torch.int32)


def to64(x):
    if not isinstance(x, torch.Tensor):
        x = torch.from_numpy(x)
    return x.to(torch.float64)


def assert_out_close(x, want, dtype):
    """The contract's `out` tolerance: global NMSE and every row; NaN never passes."""
    x, want = to64(x), to64(want)
    assert x.shape == want.shape
    assert not torch.isnan(x).any(), "out holds NaN"
    g_tol, row_tol = (1e-10, 1e-8) if dtype == torch.float32 else (5e-5, 2e-4)
    err = (x - want).pow(2)
    denom = want.pow(2).sum().clamp_min(1e-300)
    assert err.sum() / denom <= g_tol, f"global NMSE {float(err.sum() / denom):.3g}"
    rows = err.flatten(2).sum(-1) if x.dim() > 2 else err
    row_den = want.pow(2).flatten(2).sum(-1).clamp_min(1e-30) if x.dim() > 2 else want.pow(2).clamp_min(1e-30)
    worst = float((rows / row_den).max()) if rows.numel() else 0.0
    assert worst <= row_tol, f"worst row NMSE {worst:.3g}"


def assert_score_close(x, want, dtype):
    """The contract's `lse` / `block_score` tolerance: -inf exactly where the reference has it."""
    x, want = to64(x), to64(want)
    assert x.shape == want.shape
    ninf = torch.isneginf(want)
    assert torch.equal(torch.isneginf(x), ninf), "-inf entries differ"
    tol = 1e-5 if dtype == torch.float32 else 1e-3
    a, b = x[~ninf], want[~ninf]
    assert not torch.isnan(a).any(), "NaN where the reference is finite"
    assert ((a - b).abs() <= tol * b.abs().clamp_min(1.0)).all(), f"max error {float((a - b).abs().max()):.3g}"
