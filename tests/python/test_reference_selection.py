"""msa.reference's query blocks and block selection (indexer_score, block_topk, indexer_topk),
against explicit scalar formulas and brute-force top-k oracles."""
import math
import random

import pytest
import torch

from msa import reference as ref
from reference_cases import F64, INF, NAN, i32, paged, prefix_sums


# --------------------------------------------------------------------------------------
# Query blocks
# --------------------------------------------------------------------------------------

def test_query_blocks_and_positions():
    cu_q, kv_len = i32([0, 3, 3, 5]), i32([10, 4, 2])
    # seq 0: positions 7, 8, 9; seq 1: none; seq 2: positions 0, 1.
    assert ref.token_positions(cu_q, kv_len).tolist() == [7, 8, 9, 0, 1]
    assert ref.count_query_blocks(cu_q, kv_len, 1) == 5
    # Qb 4: floor(pos/4) = 1, 2, 2 | 0, 0.
    assert ref.count_query_blocks(cu_q, kv_len, 4) == 3
    assert ref.token_query_block(cu_q, kv_len, 4).tolist() == [0, 1, 1, 2, 2]
    blocks = ref.query_blocks(cu_q, kv_len, 4)
    assert [(b.seq, b.t_begin, b.t_end, b.p0, b.p1) for b in blocks] == [
        (0, 0, 1, 7, 7), (0, 1, 3, 8, 9), (2, 3, 5, 0, 1)]
    with pytest.raises(ValueError, match="Qb"):
        ref.count_query_blocks(cu_q, kv_len, 3)
    with pytest.raises(ValueError, match="kv_len"):
        ref.count_query_blocks(i32([0, 5]), i32([4]), 1)


def test_empty_batches_do_no_work():
    bt, kl, cu = torch.zeros((0, 2), dtype=torch.int32), i32([]), i32([0])
    score = ref.indexer_score(torch.zeros(0, 1, 4), torch.zeros(1, 4, 4), bt, kl, cu)
    assert score.shape == (0, 1, 2)
    idx, cnt = ref.block_topk(score, kl, cu, Bs=4, k=2)
    assert idx.shape == (0, 1, 2) and cnt.shape == (0, 1)
    cache = torch.zeros(1, 1, 4, 4)
    out, lse = ref.dense_attention(torch.zeros(0, 2, 4), cache, cache, bt, kl, cu)
    assert out.shape == (0, 2, 4) and lse.shape == (0, 2)
    # A sequence with cached tokens but no query this step owns no query block.
    assert ref.indexer_score(torch.zeros(0, 1, 4), cache[:, 0], i32([[0]]), i32([3]), i32([0, 0])).shape == (0, 1, 1)


# --------------------------------------------------------------------------------------
# indexer_score
# --------------------------------------------------------------------------------------

def explicit_indexer_score(qi, keys, kv_len, q_len, Bs, max_blocks, scale, pool, Qb=1):
    """Scalar loops over the spec's definition, one list of logical keys per sequence."""
    rows = []
    t0 = 0
    for b in range(len(kv_len)):
        pos0 = kv_len[b] - q_len[b]
        groups = {}
        for i in range(q_len[b]):
            pos = pos0 + i
            per_head = []
            for j in range(qi.shape[1]):
                row = []
                for c in range(max_blocks):
                    logits = [scale * sum(float(qi[t0 + i, j, d]) * float(keys[b][s][d])
                                          for d in range(qi.shape[2]))
                              for s in range(c * Bs, min((c + 1) * Bs, kv_len[b])) if s <= pos]
                    if not logits:
                        row.append(-INF)
                    elif pool == "max":
                        row.append(max(logits))
                    else:
                        m = max(logits)
                        row.append(m + math.log(sum(math.exp(v - m) for v in logits)))
                per_head.append(row)
            groups.setdefault(pos // Qb, []).append(per_head)
        for key in sorted(groups):
            members = groups[key]
            rows.append([[max(m[j][c] for m in members) for c in range(max_blocks)]
                         for j in range(qi.shape[1])])
        t0 += q_len[b]
    return torch.tensor(rows, dtype=F64)


def indexer_case(seed=3):
    torch.manual_seed(seed)
    kv_len, q_len, Bs, max_blocks, Hi, Di = [7, 5], [3, 1], 2, 5, 2, 4
    keys = [torch.randn(n, Di) for n in kv_len]
    ki_cache, table = paged(keys, Bs, max_blocks, head_dim_first=False)
    qi = torch.randn(sum(q_len), Hi, Di)
    return qi, keys, ki_cache, table, kv_len, q_len, Bs, max_blocks


@pytest.mark.parametrize("pool", ["max", "lse"])
def test_indexer_score_matches_explicit_formula(pool):
    qi, keys, ki_cache, table, kv_len, q_len, Bs, max_blocks = indexer_case()
    got = ref.indexer_score(qi, ki_cache, table, i32(kv_len), prefix_sums(q_len), pool=pool)
    want = explicit_indexer_score(qi, keys, kv_len, q_len, Bs, max_blocks, 0.5, pool)
    assert got.dtype == F64 and got.shape == (4, 2, 5)
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    # Seq 0, first query at pos 4: blocks 0..2 are seen, 3 (tokens 6) is its future, 4 is past
    # the sequence's last block.
    assert torch.isfinite(got[0, :, :3]).all() and (got[0, :, 3:] == -INF).all()
    assert torch.isfinite(got[2, :, 3]).all()  # the query at pos 6 sees token 6
    assert not torch.isnan(got).any()  # the NaN slack slots never reach a score


def test_indexer_score_query_blocks_take_the_max_over_their_queries():
    qi, keys, ki_cache, table, kv_len, q_len, Bs, max_blocks = indexer_case()
    kl, cu = i32(kv_len), prefix_sums(q_len)
    per_token = ref.indexer_score(qi, ki_cache, table, kl, cu, Qb=1)
    grouped = ref.indexer_score(qi, ki_cache, table, kl, cu, Qb=2)
    # Seq 0 positions 4, 5, 6 -> Qb 2 groups {4, 5}, {6}; seq 1 position 4 -> {4}.
    assert grouped.shape[0] == 3
    assert torch.equal(grouped[0], torch.maximum(per_token[0], per_token[1]))
    assert torch.equal(grouped[1], per_token[2]) and torch.equal(grouped[2], per_token[3])
    want = explicit_indexer_score(qi, keys, kv_len, q_len, Bs, max_blocks, 0.5, "max", Qb=2)
    assert torch.allclose(grouped, want, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="NQ"):
        ref.indexer_score(qi, ki_cache, table, kl, cu, Qb=2, NQ=4)


def test_indexer_score_fp8_bytes_with_scale():
    # One sequence, kv_len 3, Bs 4, Di 2; key bytes with known values.
    ki = torch.zeros((1, 4, 2), dtype=torch.uint8)
    ki[0, 0] = torch.tensor([0x38, 0x40], dtype=torch.uint8)  # (1, 2)
    ki[0, 1] = torch.tensor([0xB8, 0x30], dtype=torch.uint8)  # (-1, 0.5)
    ki[0, 2] = torch.tensor([0x7E, 0x00], dtype=torch.uint8)  # (448, 0)
    ki[0, 3] = torch.tensor([0x7F, 0x7F], dtype=torch.uint8)  # NaN in the slack slot
    ki_scale = torch.tensor([[0.5, 2.0, 0.25, NAN]], dtype=torch.float32)
    qi = torch.tensor([[[1.0, 3.0]], [[2.0, -1.0]]])  # positions 1 and 2
    args = (ki, i32([[0]]), i32([3]), i32([0, 2]))
    got = ref.indexer_score(qi, *args, ki_scale=ki_scale, ki_format="fp8_e4m3", scale=1.0)
    # pos 1: tokens 0, 1: (1+6)*0.5 = 3.5, (-1+1.5)*2 = 1 -> 3.5
    # pos 2: tokens 0..2: (2-2)*0.5 = 0, (-2-0.5)*2 = -5, 896*0.25 = 224 -> 224
    assert got[:, 0, 0].tolist() == [3.5, 224.0]
    lse = ref.indexer_score(qi, *args, ki_scale=ki_scale, ki_format="fp8_e4m3", scale=1.0, pool="lse")
    assert lse[0, 0, 0].item() == pytest.approx(math.log(math.exp(3.5) + math.exp(1.0)), rel=1e-14)
    with pytest.raises(ValueError, match="ki_cache"):  # a uint8 cache reads as NVFP4 by default
        ref.indexer_score(qi, *args, ki_scale=ki_scale, scale=1.0)
    if ref.FLOAT8_E4M3 is not None:
        as_fp8 = ref.indexer_score(qi, ki.view(ref.FLOAT8_E4M3), *args[1:], ki_scale=ki_scale, scale=1.0)
        assert torch.equal(as_fp8, got)


def test_indexer_score_nvfp4_equals_the_decoded_plain_keys():
    torch.manual_seed(4)
    Di, Bs, kv_len = 32, 4, 6
    keys = torch.randn(kv_len, Di) * 3
    packed, scale_bytes = ref.quantize_nvfp4(keys)
    ki_cache, table = paged([packed], Bs, 2, head_dim_first=False)
    scale_cache, _ = paged([scale_bytes], Bs, 2, head_dim_first=False)  # same page order (seed)
    assert (scale_cache[table[0, 1].item(), 2:] == 0x7F).all()  # NaN scales in the slack slots
    plain_cache, _ = paged([ref.decode_nvfp4(packed, scale_bytes).float()], Bs, 2, head_dim_first=False)
    qi = torch.randn(2, 1, Di)
    args = (table, i32([kv_len]), i32([0, 2]))
    got = ref.indexer_score(qi, ki_cache, *args, ki_scale=scale_cache)
    want = ref.indexer_score(qi, plain_cache, *args)
    assert torch.isfinite(got).all()
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-12)
    # A NaN scale of a valid key makes the blocks holding it NaN for queries that see it.
    scale_cache[table[0, 0].item(), 1, 0] = 0x7F
    poisoned = ref.indexer_score(qi, ki_cache, *args, ki_scale=scale_cache)
    assert torch.isnan(poisoned[:, 0, 0]).all() and torch.isfinite(poisoned[:, 0, 1]).all()


def test_indexer_score_shared_mode_needs_one_head():
    qi, keys, ki_cache, table, kv_len, q_len, Bs, max_blocks = indexer_case()
    with pytest.raises(ValueError, match="qi"):
        ref.indexer_score(qi, ki_cache, table, i32(kv_len), prefix_sums(q_len), mode="shared")
    one = ref.indexer_score(qi[:, :1], ki_cache, table, i32(kv_len), prefix_sums(q_len), mode="shared")
    full = ref.indexer_score(qi, ki_cache, table, i32(kv_len), prefix_sums(q_len))
    assert torch.equal(one[:, 0], full[:, 0])


# --------------------------------------------------------------------------------------
# block_topk
# --------------------------------------------------------------------------------------

def one_row(kv_len, scores, **kw):
    """block_topk for one decode query at position kv_len - 1 and one selection head."""
    kw.setdefault("Bs", 4)
    max_blocks = max(len(scores), -(-kv_len // kw["Bs"]))
    row = torch.full((1, 1, max_blocks), -INF, dtype=F64)
    row[0, 0, :len(scores)] = torch.tensor(scores, dtype=F64)
    idx, cnt = ref.block_topk(row, i32([kv_len]), i32([0, 1]), **kw)
    assert idx.dtype == torch.int32 and cnt.dtype == torch.int32
    return idx[0, 0].tolist(), cnt[0, 0].item()


def test_block_topk_forced_local_then_best_scores():
    # pos 19, Bs 4: blocks 0..4 valid; block 4 is forced, then 2 (7) and 0 (5).
    assert one_row(20, [5, 1, 7, 3, -2], k=3) == ([0, 2, 4], 3)
    # The forced local block is taken even at -inf; NaN and -inf are never taken by score.
    assert one_row(20, [NAN, -INF, 1, -INF, -INF], k=3) == ([2, 4, -1], 2)


def test_block_topk_ties_go_to_the_lower_index_and_signed_zeros_tie():
    assert one_row(20, [3, 3, 3, 3, 0], k=3) == ([0, 1, 4], 3)
    assert one_row(16, [-1, -0.0, 0.0, 5], k=2) == ([1, 3], 2)
    assert one_row(16, [-1, 0.0, -0.0, 5], k=2) == ([1, 3], 2)
    assert one_row(16, [NAN, -1e30, NAN, 0], k=2) == ([1, 3], 2)  # finite beats NaN


def test_block_topk_at_most_k_valid_blocks_takes_all_whatever_the_scores():
    # pos 9, Bs 4: 3 valid blocks <= k = 4; the huge score of block 3 is past p1 and unread.
    assert one_row(10, [NAN, -INF, -INF, 1e9], k=4) == ([0, 1, 2, -1], 3)
    assert one_row(12, [-INF, -INF, -INF], k=3, n_local=0) == ([0, 1, 2], 3)


def test_block_topk_sinks_and_local_blocks():
    s = [1, 2, 3, 9, 4, 8, 0, -1]  # pos 31, Bs 4: 8 valid blocks
    assert one_row(32, s, k=5, n_sink=2, n_local=2) == ([0, 1, 3, 6, 7], 5)
    assert one_row(32, s, k=2, n_local=0) == ([3, 5], 2)  # nothing forced
    assert one_row(32, s, k=3, n_sink=1, n_local=1) == ([0, 3, 7], 3)


def test_block_topk_query_block_forces_the_local_block_of_every_query():
    # Bs 4, Qb 8: 8 queries at positions 16..23 form one query block spanning blocks 4, 5,
    # both forced; 6 valid blocks > k = 3, so one block more by score.
    scores = torch.tensor([[[0, 9, 1, 2, -3, -3]]], dtype=F64)
    idx, cnt = ref.block_topk(scores, i32([24]), i32([0, 8]), Qb=8, Bs=4, k=3)
    assert idx.tolist() == [[[1, 4, 5]]] and cnt.tolist() == [[3]]
    # The parameter check: k >= n_local - 1 + max(1, Qb / Bs) = 2 here.
    with pytest.raises(ValueError, match=r"n_local - 1 \+ max\(1, Qb/Bs\) = 2"):
        ref.block_topk(scores, i32([24]), i32([0, 8]), Qb=8, Bs=4, k=1)


def test_block_topk_heads_are_independent_and_rows_follow_sequences():
    scores = torch.tensor([[[5, 1, 0, 0, 0], [0, 0, 7, 0, 0]],
                           [[0, 0, 0, 0, 0], [0, 0, 0, 0, 0]]], dtype=F64)
    # Seq 0: one query at pos 19 (5 blocks); seq 1: no query; seq 2: one at pos 3 (1 block).
    idx, cnt = ref.block_topk(scores, i32([20, 8, 4]), i32([0, 1, 1, 2]), Bs=4, k=2)
    assert idx.tolist() == [[[0, 4], [2, 4]], [[0, -1], [0, -1]]]
    assert cnt.tolist() == [[2, 2], [1, 1]]


def brute_force_topk(scores, p0, p1, Bs, k, n_sink, n_local):
    nvalid = p1 // Bs + 1
    if nvalid <= k:
        return list(range(nvalid))
    forced = set(range(min(n_sink, nvalid)))
    if n_local > 0:
        for p in range(p0, p1 + 1):
            forced |= {c for c in range(p // Bs - n_local + 1, p // Bs + 1) if c >= 0}
    rank = [(-scores[c], c) for c in range(nvalid)
            if c not in forced and not math.isnan(scores[c]) and scores[c] != -INF]
    rank.sort()  # python floats: -0.0 == 0.0, so ties fall to the index
    return sorted(forced | {c for _, c in rank[:k - len(forced)]})


def test_block_topk_matches_brute_force_on_random_ties():
    rng = random.Random(5)
    palette = [0.0, -0.0, 1.0, 1.0, 2.0, -INF, NAN, -3.5, 7.0]
    for trial in range(60):
        Bs, Qb = rng.choice([1, 2, 4]), rng.choice([1, 2, 4, 8])
        q_lens = [rng.randint(0, 9) for _ in range(rng.randint(1, 3))]
        kv = [q + rng.randint(0, 20) for q in q_lens]
        max_blocks = max(-(-n // Bs) for n in kv) + 1
        n_sink, n_local = rng.randint(0, 2), rng.randint(0, 2)
        k = max(1, ref.min_k(Qb, Bs, n_sink, n_local)) + rng.randint(0, 3)
        cu = prefix_sums(q_lens)
        blocks = ref.query_blocks(cu, i32(kv), Qb)
        scores = torch.tensor([[[rng.choice(palette) for _ in range(max_blocks)] for _ in range(2)]
                               for _ in blocks], dtype=F64).reshape(len(blocks), 2, max_blocks)
        try:
            idx, cnt = ref.block_topk(scores, i32(kv), cu, Qb=Qb, Bs=Bs, k=k, n_sink=n_sink, n_local=n_local)
        except ValueError as e:  # more forced blocks than k (Qb not a multiple of Bs)
            assert "forced" in str(e)
            continue
        for n, qb in enumerate(blocks):
            for h in range(2):
                want = brute_force_topk(scores[n, h].tolist(), qb.p0, qb.p1, Bs, k, n_sink, n_local)
                assert idx[n, h].tolist() == want + [-1] * (k - len(want)), (trial, n, h)
                assert cnt[n, h].item() == len(want)


def test_indexer_topk_is_score_then_topk():
    qi, keys, ki_cache, table, kv_len, q_len, Bs, max_blocks = indexer_case()
    kl, cu = i32(kv_len), prefix_sums(q_len)
    idx, cnt = ref.indexer_topk(qi, ki_cache, table, kl, cu, k=2, n_local=1)
    score = ref.indexer_score(qi, ki_cache, table, kl, cu)
    want_idx, want_cnt = ref.block_topk(score, kl, cu, Bs=Bs, k=2, n_local=1)
    assert torch.equal(idx, want_idx) and torch.equal(cnt, want_cnt)
    # Query 0 (pos 4, blocks 0..2): block 2 forced, then the better of blocks 0 and 1.
    for h in range(2):
        best = 0 if score[0, h, 0] >= score[0, h, 1] else 1
        assert idx[0, h].tolist() == [best, 2]
