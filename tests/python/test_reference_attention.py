"""msa.reference's attention ops (sparse_block_attention, dense_attention, patch_attention_3d),
against explicit scalar softmax attention and torch's own softmax."""
import math

import pytest
import torch

from msa import reference as ref
from reference_cases import F64, INF, NAN, i32, paged, prefix_sums


def explicit_attention(q_row, keys, values, scale):
    """Scalar softmax attention of one query row over lists of K/V rows."""
    if not keys:
        return [0.0] * len(q_row), -INF
    logits = [scale * sum(a * b for a, b in zip(q_row, k)) for k in keys]
    m = max(logits)
    w = [math.exp(x - m) for x in logits]
    z = sum(w)
    out = [sum(wi * v[d] for wi, v in zip(w, values)) / z for d in range(len(q_row))]
    return out, m + math.log(z)


def attention_case(seed=6, dtype=torch.float32):
    torch.manual_seed(seed)
    kv_len, q_len, Bs, max_blocks, Hkv, G, D = [11, 6], [3, 2], 4, 4, 2, 2, 4
    k_log = [torch.randn(n, Hkv, D).to(dtype) for n in kv_len]
    v_log = [torch.randn(n, Hkv, D).to(dtype) for n in kv_len]
    k_cache, table = paged(k_log, Bs, max_blocks)
    v_cache, _ = paged(v_log, Bs, max_blocks)
    q = torch.randn(sum(q_len), Hkv * G, D).to(dtype)
    return q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G


def test_sparse_attention_matches_explicit_formula():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    # Query blocks (Qb 1): seq 0 at positions 8, 9, 10; seq 1 at 4, 5.
    block_idx = i32([[[0, 2, -1], [1, -1, -1]],
                     [[2, 0, 1], [-1, -1, -1]],
                     [[2, 7, -1], [0, 2, 5]],     # 7, 5 >= ceil(11/4) = 3: contribute nothing
                     [[1, -1, -1], [0, 1, -1]],
                     [[0, -1, -1], [1, -1, -1]]])
    out, lse = ref.sparse_block_attention(q, k_cache, v_cache, table, i32(kv_len), prefix_sums(q_len), block_idx)
    assert out.dtype == F64 and lse.dtype == F64
    scale = 0.5
    t = 0
    for b in range(2):
        for i in range(q_len[b]):
            pos = kv_len[b] - q_len[b] + i
            for h in range(q.shape[1]):
                g = h // G
                listed = [c for c in block_idx[t, g].tolist() if 0 <= c < -(-kv_len[b] // Bs)]
                seen = [s for c in listed for s in range(c * Bs, min((c + 1) * Bs, kv_len[b])) if s <= pos]
                want_out, want_lse = explicit_attention(q[t, h].tolist(), [k_log[b][s, g].tolist() for s in seen],
                                                        [v_log[b][s, g].tolist() for s in seen], scale)
                assert out[t, h].tolist() == pytest.approx(want_out, rel=1e-12, abs=1e-12)
                assert lse[t, h].item() == pytest.approx(want_lse, rel=1e-12)
            t += 1
    # Empty sets: token 1 head group 1 lists nothing; token 3 group 0 lists block 1 = tokens
    # 4..7 of seq 1, query pos 4 sees token 4 only -> not empty.
    assert (out[1, 2:] == 0).all() and (lse[1, 2:] == -INF).all()
    assert torch.isfinite(lse[3]).all()


def test_sparse_attention_empty_and_future_selections_give_zero_and_minus_inf():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    kl, cu = i32(kv_len), prefix_sums(q_len)
    none = torch.full((5, 2, 2), -1, dtype=torch.int32)
    out, lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, none)
    assert (out == 0).all() and (lse == -INF).all()
    # Seq 1's queries sit at positions 4, 5: its block 1 holds token 4, 5 only; a query
    # block at pos 4 that lists only tokens past its position would be empty. Seq 0's
    # first query (pos 8) listing only block 2 sees tokens 8 only.
    one = none.clone()
    one[0, :, 0] = 2
    out, lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, one)
    for h in range(4):
        g = h // G
        assert torch.allclose(out[0, h], v_log[0][8, g].double(), rtol=1e-12, atol=1e-12)
        assert lse[0, h].item() == pytest.approx(0.5 * float(q[0, h].double() @ k_log[0][8, g].double()), rel=1e-12)


def test_sparse_attention_nan_outside_the_attended_set_never_propagates():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    kl, cu = i32(kv_len), prefix_sums(q_len)
    # paged() leaves every slack slot NaN (seq 0: slot 3 of block 2; seq 1: slots 2, 3 of
    # block 1). Poison an unselected block too, in K and V.
    assert torch.isnan(k_cache).any() and torch.isnan(v_cache).any()
    block_idx = torch.full((5, 2, 2), -1, dtype=torch.int32)
    block_idx[:3, :, 0], block_idx[:3, :, 1] = 2, 0
    block_idx[3:, :, 0] = 1
    clean_out, clean_lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, block_idx)
    k_bad, v_bad = k_cache.clone(), v_cache.clone()
    k_bad[table[0, 1]], v_bad[table[0, 1]] = NAN, NAN  # seq 0 block 1: never listed
    out, lse = ref.sparse_block_attention(q, k_bad, v_bad, table, kl, cu, block_idx)
    assert not torch.isnan(out).any() and not torch.isnan(lse).any()
    assert torch.equal(out, clean_out) and torch.equal(lse, clean_lse)
    # A causally hidden token inside a listed block: seq 0 token 10 (block 2) for query pos 8.
    k_bad[table[0, 2], :, 2] = NAN
    v_bad[table[0, 2], :, 2] = NAN
    out, _ = ref.sparse_block_attention(q, k_bad, v_bad, table, kl, cu, block_idx)
    assert torch.equal(out[0], clean_out[0]) and torch.equal(out[1], clean_out[1])
    assert torch.isnan(out[2]).all()  # pos 10 does see token 10


def test_sparse_attention_all_blocks_equals_dense_and_paging_does_not_matter():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case(dtype=torch.bfloat16)
    kl, cu = i32(kv_len), prefix_sums(q_len)
    every = i32([[[2, 1, 0]] * 2] * 3 + [[[1, 0, -1]] * 2] * 2)
    out, lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, every)
    d_out, d_lse = ref.dense_attention(q, k_cache, v_cache, table, kl, cu)
    assert torch.allclose(out, d_out, rtol=1e-13, atol=1e-13)
    assert torch.allclose(lse, d_lse, rtol=1e-13, atol=1e-13)
    k2, t2 = paged(k_log, Bs, 4, seed=9)
    v2, _ = paged(v_log, Bs, 4, seed=9)
    assert not torch.equal(t2, table)
    o2, l2 = ref.dense_attention(q, k2, v2, t2, kl, cu)
    assert torch.equal(o2, d_out) and torch.equal(l2, d_lse)


def test_dense_attention_matches_torch_softmax_with_a_causal_mask():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    out, lse = ref.dense_attention(q, k_cache, v_cache, table, i32(kv_len), prefix_sums(q_len), scale=0.3)
    t0 = 0
    for b in range(2):
        qs = q[t0:t0 + q_len[b]].double()                     # [n][Hq][D]
        ks = k_log[b].double().repeat_interleave(G, dim=1)    # [kv][Hq][D]
        vs = v_log[b].double().repeat_interleave(G, dim=1)
        logits = 0.3 * torch.einsum("nhd,shd->hns", qs, ks)
        pos = torch.arange(kv_len[b] - q_len[b], kv_len[b])
        mask = torch.arange(kv_len[b])[None, :] > pos[:, None]
        logits = logits.masked_fill(mask, -INF)
        want = torch.einsum("hns,shd->nhd", torch.softmax(logits, dim=-1), vs)
        assert torch.allclose(out[t0:t0 + q_len[b]], want, rtol=1e-12, atol=1e-12)
        assert torch.allclose(lse[t0:t0 + q_len[b]], torch.logsumexp(logits, dim=-1).T, rtol=1e-12)
        t0 += q_len[b]


def test_sparse_attention_shared_mode_and_gqa_head_mapping():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    kl, cu = i32(kv_len), prefix_sums(q_len)
    sel = i32([[[0, 2]], [[1, -1]], [[2, 1]], [[0, -1]], [[1, 0]]])
    shared, shared_lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, sel, mode="shared")
    per_head, per_lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, sel.repeat(1, 2, 1))
    assert torch.equal(shared, per_head) and torch.equal(shared_lse, per_lse)
    # Per-head selections differ: heads 0, 1 (KV head 0) follow row 0, heads 2, 3 row 1.
    mixed = torch.cat([sel, torch.full_like(sel, -1)], dim=1)
    out, lse = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, mixed)
    assert torch.equal(out[:, :2], shared[:, :2]) and (lse[:, 2:] == -INF).all()
    with pytest.raises(ValueError, match="block_idx"):
        ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, sel)  # Hs 1 in per_kv_head
    with pytest.raises(ValueError, match="block_idx"):
        ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, i32([[[0, 0]]] * 5), mode="shared")


def test_sparse_attention_query_blocks_share_one_selection_row():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    kl, cu = i32(kv_len), prefix_sums(q_len)
    # Qb 2: seq 0 positions 8, 9 | 10; seq 1 positions 4, 5 -> NQ = 3.
    grouped = i32([[[0, -1]] * 2, [[1, -1]] * 2, [[0, -1]] * 2])
    out, _ = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, grouped, Qb=2)
    per_token = i32([[[0, -1]] * 2, [[0, -1]] * 2, [[1, -1]] * 2, [[0, -1]] * 2, [[0, -1]] * 2])
    want, _ = ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, per_token)
    assert torch.equal(out, want)
    with pytest.raises(ValueError, match="block_idx"):
        ref.sparse_block_attention(q, k_cache, v_cache, table, kl, cu, grouped)  # NQ 5 expected


def test_sparse_attention_rejects_duplicate_blocks():
    q, k_log, v_log, k_cache, v_cache, table, kv_len, q_len, Bs, G = attention_case()
    dup = torch.full((5, 2, 2), -1, dtype=torch.int32)
    dup[0, 0] = i32([1, 1])
    with pytest.raises(ValueError, match="more than once"):
        ref.sparse_block_attention(q, k_cache, v_cache, table, i32(kv_len), prefix_sums(q_len), dup)


def test_patch_attention_3d_windows():
    torch.manual_seed(7)
    # Item 0: grid (3, 1, 2) -> windows of 2 temporal patches: tokens 0..3 and 4..5.
    # Item 1: grid (1, 2, 1) -> tokens 6..7.
    N, H, D = 8, 2, 4
    q, k, v = (torch.randn(N, H, D) for _ in range(3))
    out, lse = ref.patch_attention_3d(q, k, v, i32([[3, 1, 2], [1, 2, 1]]), window=2)
    window_of = [0, 0, 0, 0, 1, 1, 2, 2]
    mask = torch.tensor([[window_of[i] != window_of[j] for j in range(N)] for i in range(N)])
    logits = (0.5 * torch.einsum("nhd,mhd->hnm", q.double(), k.double())).masked_fill(mask, -INF)
    want = torch.einsum("hnm,mhd->nhd", torch.softmax(logits, dim=-1), v.double())
    assert torch.allclose(out, want, rtol=1e-12, atol=1e-12)
    assert torch.allclose(lse, torch.logsumexp(logits, dim=-1).T, rtol=1e-12)
    with pytest.raises(ValueError, match="items"):
        ref.patch_attention_3d(q, k, v, i32([[3, 1, 2]]), window=2)
