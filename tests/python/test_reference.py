"""Tests of msa.reference (the float64 PyTorch reference of docs/spec.md): hand-worked
small cases, each confirmed by a different computation (explicit scalar formulas,
brute-force oracles, torch's own softmax/layer_norm), plus the spec's edge rules."""
import math
import random

import pytest
import torch

from msa import reference as ref

NAN, INF = math.nan, math.inf
F64 = torch.float64


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


# --------------------------------------------------------------------------------------
# Paged caches built from logical per-sequence contents
# --------------------------------------------------------------------------------------

def paged(logical, Bs, max_blocks, *, head_dim_first=True, seed=0):
    """Scatters logical caches (one [kv_len][...] tensor per sequence) into pages in a
    shuffled order. Returns (cache, block_table); every slot no token occupies is NaN
    (0x7f for uint8: an E4M3 NaN). head_dim_first: the page layout is [P][H][Bs][D]
    (k/v) rather than [P][Bs][...]."""
    fill = 0x7F if logical[0].dtype == torch.uint8 else NAN
    rng = random.Random(seed)
    need = [-(-x.shape[0] // Bs) for x in logical]
    P = sum(need) + 1  # one spare page that stays NaN
    pages = list(range(P))
    rng.shuffle(pages)
    row_shape = tuple(logical[0].shape[1:])
    if head_dim_first:
        cache = torch.full((P, row_shape[0], Bs, *row_shape[1:]), fill, dtype=logical[0].dtype)
    else:
        cache = torch.full((P, Bs, *row_shape), fill, dtype=logical[0].dtype)
    table = torch.zeros((len(logical), max_blocks), dtype=torch.int32)
    it = iter(pages)
    for b, x in enumerate(logical):
        for c in range(need[b]):
            page = next(it)
            table[b, c] = page
            for s in range(c * Bs, min((c + 1) * Bs, x.shape[0])):
                if head_dim_first:
                    cache[page, :, s - c * Bs] = x[s]
                else:
                    cache[page, s - c * Bs] = x[s]
    return cache, table


def prefix_sums(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return i32(out)


# --------------------------------------------------------------------------------------
# Number formats
# --------------------------------------------------------------------------------------

def test_decode_e4m3_spot_values():
    codes = torch.tensor([0x7E, 0xFE, 0x38, 0xB8, 0x40, 0x3C, 0x08, 0x01, 0x07, 0x00, 0x77],
                         dtype=torch.uint8)
    want = [448.0, -448.0, 1.0, -1.0, 2.0, 1.5, 2.0 ** -6, 2.0 ** -9, 7 * 2.0 ** -9, 0.0, 240.0]
    assert ref.decode_e4m3(codes).tolist() == want
    special = ref.decode_e4m3(torch.tensor([0x7F, 0xFF, 0x80], dtype=torch.uint8))
    assert math.isnan(special[0]) and math.isnan(special[1])
    assert special[2] == 0.0 and math.copysign(1.0, special[2]) == -1.0  # 0x80 is -0


def test_encode_e4m3_inverts_decode_on_every_code():
    codes = torch.arange(256).to(torch.uint8)
    values = ref.decode_e4m3(codes)
    finite = ~torch.isnan(values)
    assert torch.equal(ref.encode_e4m3(values)[finite], codes[finite])


def test_encode_e4m3_ties_saturation_nan_and_sign():
    x = torch.tensor([1.0625, 1.1875, 464.0, 449.0, 1e9, -1e9, INF, -1e-9, 0.0, 2.0 ** -10,
                      3 * 2.0 ** -10, NAN])
    got = ref.encode_e4m3(x).tolist()
    # 1.0625 is halfway 1 (0x38) / 1.125 (0x39): even 0x38; 1.1875 halfway 1.125 / 1.25: 0x3a.
    # 2^-10 halfway 0 / 2^-9: 0; 3*2^-10 halfway 2^-9 (0x01) / 2^-8 (0x02): 0x02.
    assert got == [0x38, 0x3A, 0x7E, 0x7E, 0x7E, 0xFE, 0x7E, 0x80, 0x00, 0x00, 0x02, 0x7F]


def test_encode_e4m3_matches_brute_force_nearest():
    values = [ref.decode_e4m3(torch.tensor([c], dtype=torch.uint8)).item() for c in range(0x7F)]
    rng = random.Random(1)
    xs = [rng.choice([-1, 1]) * rng.uniform(0, 470) * 2.0 ** rng.randint(-14, 0) for _ in range(2000)]
    xs += [(values[i] + values[i + 1]) / 2 for i in range(0x7E)]  # every tie
    got = ref.encode_e4m3(torch.tensor(xs, dtype=F64)).tolist()
    for x, code in zip(xs, got):
        a = abs(x)
        best = min(range(0x7F), key=lambda c: (abs(values[c] - a), c % 2))  # nearest, then even
        if a >= 448:
            best = 0x7E
        assert code == best | (0x80 if x < 0 else 0), (x, code, best)


def test_nvfp4_nibble_order_and_group_scales():
    # Di = 32: two groups. Byte 0x21: element 0 = code 1 (0.5), element 1 = code 2 (1.0).
    # Byte 0x9f: element 2 = code 0xf (-6), element 3 = code 9 (-0.5).
    packed = torch.zeros((1, 1, 16), dtype=torch.uint8)
    packed[0, 0, 0], packed[0, 0, 1] = 0x21, 0x9F
    packed[0, 0, 8] = 0x7A  # group 1: element 16 = code 0xa (-1.0), element 17 = code 7 (6)
    scale = torch.tensor([[[0x38, 0x40]]], dtype=torch.uint8)  # 1.0, 2.0
    keys = ref.decode_nvfp4(packed, scale)[0, 0]
    assert keys[:4].tolist() == [0.5, 1.0, -6.0, -0.5]
    assert keys[16:18].tolist() == [-2.0, 12.0]
    assert keys[4:16].abs().sum() == 0 and keys[18:].abs().sum() == 0
    codes = ref.unpack_e2m1x2(packed)
    assert torch.equal(ref.pack_e2m1x2(codes), packed)


def test_nvfp4_quantize_hand_worked_group():
    # amax 6 -> scale e4m3(6 * f32(1/6)) = 1.0 (0x38), so codes are |x| rounded on the grid.
    x = torch.tensor([[0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 6.0,
                       -0.1, NAN, -6.0, 0.5, -1.0, -0.0, 3.0, -2.9]])
    packed, scale = ref.quantize_nvfp4(x)
    assert scale.tolist() == [[0x38]]
    codes = ref.unpack_e2m1x2(packed)[0].tolist()
    # Ties go to the even code: 0.25->0, 0.75->2, 1.25->2, 1.75->4, 2.5->4, 3.5->6, 5->6.
    # -0.1 rounds to a zero magnitude: +0; NaN: +0; -0: +0.
    assert codes == [0, 2, 2, 4, 4, 6, 6, 7, 0, 0, 0xF, 1, 0xA, 0, 5, 0xD]


def test_nvfp4_quantize_scale_rule():
    zeros = torch.zeros((1, 16))
    packed, scale = ref.quantize_nvfp4(zeros)
    assert scale.item() == 0 and packed.abs().sum() == 0
    big = torch.full((1, 16), 1e6)
    big[0, 3] = -1e6
    packed, scale = ref.quantize_nvfp4(big)
    assert scale.item() == 0x7E  # 1e6 / 6 saturates at 448
    assert ref.unpack_e2m1x2(packed)[0, :4].tolist() == [7, 7, 7, 0xF]
    # amax 3 (NaN ignored): 3 * f32(1/6) = 0.5 exactly -> 0x30; 3 / 0.5 = 6 -> code 7.
    x = torch.zeros((1, 16))
    x[0, 0], x[0, 1], x[0, 2] = 3.0, NAN, 0.3
    packed, scale = ref.quantize_nvfp4(x)
    assert scale.item() == 0x30
    assert ref.unpack_e2m1x2(packed)[0, :3].tolist() == [7, 0, 1]  # 0.3 / 0.5 = 0.6 -> 0.5


def test_nvfp4_scale_uses_the_f32_product_with_f32_one_sixth():
    # amax just below 6 * 1.1875 (the midpoint of e4m3 1.125 / 1.25): amax / 6 is below the
    # midpoint (-> 1.125, 0x39), but amax * f32(1/6) rounds in f32 onto it (-> even, 0x3a).
    amax = torch.nextafter(torch.tensor(7.125), torch.tensor(0.0))
    assert ref.encode_e4m3(amax.double() / 6).item() == 0x39
    x = torch.zeros((1, 16))
    x[0, 5] = amax
    _, scale = ref.quantize_nvfp4(x)
    assert scale.item() == 0x3A


def test_e2m1_encode_matches_brute_force_nearest():
    mags = ref.E2M1_MAGNITUDES
    rng = random.Random(2)
    scales = [0.5, 1.0, 3.0, 448.0]
    xs, ss = [], []
    for _ in range(3000):
        s = rng.choice(scales)
        xs.append(rng.choice([-1, 1]) * rng.choice([rng.uniform(0, 7), rng.choice(
            [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])]) * s)
        ss.append(s)
    got = ref.encode_e2m1(torch.tensor(xs, dtype=F64), torch.tensor(ss, dtype=F64)).tolist()
    for x, s, code in zip(xs, ss, got):
        r = abs(x) / s
        best = min(range(8), key=lambda c: (abs(mags[c] - r), c % 2))
        want = best | (8 if x < 0 and best != 0 else 0)
        assert code == want, (x, s, code, want)


def test_fp8_scaled_quantize_uses_amax_over_448():
    x = torch.tensor([[224.0, -112.0, 0.0, NAN], [0.0, 0.0, 0.0, 0.0]])
    codes, scale = ref.quantize_fp8_scaled(x)
    assert scale.tolist() == [0.5, 1.0]
    assert ref.decode_e4m3(codes[0, :3]).tolist() == [448.0, -224.0, 0.0]
    assert math.isnan(ref.decode_e4m3(codes[0, 3:]).item())


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


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------

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


# --------------------------------------------------------------------------------------
# kv_append
# --------------------------------------------------------------------------------------

def kv_append_case():
    torch.manual_seed(8)
    P, Hkv, Bs, D, Di = 4, 2, 4, 3, 16
    k_cache = torch.full((P, Hkv, Bs, D), NAN, dtype=torch.bfloat16)
    v_cache = torch.full((P, Hkv, Bs, D), NAN, dtype=torch.bfloat16)
    # seq 0: kv_len 6, q_len 3 -> positions 3, 4, 5: block 0 slot 3, block 1 slots 0, 1.
    table = i32([[2, 0], [3, 1]])
    kv_len, cu = i32([6, 1]), i32([0, 3, 4])  # seq 1: position 0 -> page 3 slot 0
    k = torch.randn(4, Hkv, D).to(torch.bfloat16)
    v = torch.randn(4, Hkv, D).to(torch.bfloat16)
    ki = torch.randn(4, Di) * 10
    return k_cache, v_cache, table, kv_len, cu, k, v, ki, Bs, Di


def test_kv_append_writes_each_token_into_its_slot():
    k_cache, v_cache, table, kv_len, cu, k, v, ki, Bs, Di = kv_append_case()
    k_out, v_out = ref.kv_append(k, v, table, kv_len, cu, k_cache, v_cache)
    placed = {(2, 3): 0, (0, 0): 1, (0, 1): 2, (3, 0): 3}  # (page, slot) -> token
    for page in range(4):
        for slot in range(Bs):
            if (page, slot) in placed:
                t = placed[(page, slot)]
                assert torch.equal(k_out[page, :, slot], k[t]) and torch.equal(v_out[page, :, slot], v[t])
            else:
                assert torch.isnan(k_out[page, :, slot].float()).all()
    assert k_out.dtype == torch.bfloat16
    assert torch.isnan(k_cache.float()).all()  # the input is not modified


def test_kv_append_indexer_keys_per_format():
    k_cache, v_cache, table, kv_len, cu, k, v, ki, Bs, Di = kv_append_case()
    args = (k, v, table, kv_len, cu, k_cache, v_cache)
    # bf16 keys: f32 then bf16 (round to nearest even).
    plain = torch.zeros((4, Bs, Di), dtype=torch.bfloat16)
    *_, ki_out = ref.kv_append(*args, ki=ki, ki_cache=plain)
    assert torch.equal(ki_out[0, 1], ki[2].to(torch.bfloat16))
    # fp8 bytes without a scale: e4m3 of the value itself.
    fp8 = torch.zeros((4, Bs, Di), dtype=torch.uint8)
    *_, ki_out = ref.kv_append(*args, ki=ki, ki_cache=fp8, ki_format="fp8_e4m3")
    assert torch.equal(ki_out[3, 0], ref.encode_e4m3(ki[3]))
    # fp8 bytes with a scale: amax / 448 per token, 448 at the largest |x|.
    scale = torch.full((4, Bs), NAN, dtype=torch.float32)
    *_, ki_out, scale_out = ref.kv_append(*args, ki=ki, ki_cache=fp8, ki_scale=scale, ki_format="fp8_e4m3")
    amax = ki[1].abs().max()
    assert scale_out[0, 0].item() == (amax / 448).item()
    assert ref.decode_e4m3(ki_out[0, 0]).abs().max().item() == 448.0
    assert torch.isnan(scale_out[1]).all()  # untouched page
    # NVFP4: Di/2 code bytes and Di/16 scale bytes per token, as quantize_nvfp4 gives them.
    codes = torch.zeros((4, Bs, Di // 2), dtype=torch.uint8)
    scales = torch.zeros((4, Bs, Di // 16), dtype=torch.uint8)
    *_, ki_out, scale_out = ref.kv_append(*args, ki=ki, ki_cache=codes, ki_scale=scales)
    want_codes, want_scale = ref.quantize_nvfp4(ki[0:1])
    assert torch.equal(ki_out[2, 3], want_codes[0]) and torch.equal(scale_out[2, 3], want_scale[0])
    decoded = ref.decode_nvfp4(ki_out[2, 3], scale_out[2, 3])
    err = (decoded - ki[0].double()).abs().max().item()
    assert 0 < err <= ki[0].abs().max().item() / 6  # half a step of the coarsest grid interval
    with pytest.raises(ValueError, match="ki"):
        ref.kv_append(*args, ki=ki)


# --------------------------------------------------------------------------------------
# Supporting ops
# --------------------------------------------------------------------------------------

def test_rms_norm_gemma_and_plain():
    x = torch.tensor([[3.0, 4.0]])
    w = torch.tensor([0.5, -1.0])
    inv = 1 / math.sqrt((9 + 16) / 2 + 1e-6)
    assert ref.rms_norm(x, w).tolist()[0] == pytest.approx([3 * inv * 1.5, 0.0], abs=1e-15)
    assert ref.rms_norm(x, w, kind="plain").tolist()[0] == pytest.approx([3 * inv * 0.5, -4 * inv], rel=1e-15)
    with pytest.raises(ValueError, match="kind"):
        ref.rms_norm(x, w, kind="other")


def test_layer_norm_matches_torch():
    torch.manual_seed(9)
    x, w, b = torch.randn(3, 8).double(), torch.randn(8).double(), torch.randn(8).double()
    want = torch.nn.functional.layer_norm(x, (8,), w, b, eps=1e-5)
    assert torch.allclose(ref.layer_norm(x, w, b=b, eps=1e-5), want, rtol=1e-12, atol=1e-12)


def test_rope_explicit_pair_and_partial_rotary_dim():
    torch.manual_seed(10)
    x = torch.randn(2, 1, 6)
    pos = i32([0, 3])
    y = ref.rope(x, pos, rotary_dim=4, theta=100.0)
    assert torch.allclose(y[0], x[0].double(), rtol=0, atol=0)  # position 0: identity
    # rotary_dim 4: pairs (0, 2) with inv_freq 1 and (1, 3) with 100^(-1/2); dims 4, 5 pass.
    for j, f in ((0, 1.0), (1, 0.1)):
        a, b = float(x[1, 0, j]), float(x[1, 0, j + 2])
        c, s = math.cos(3 * f), math.sin(3 * f)
        assert y[1, 0, j].item() == pytest.approx(a * c - b * s, rel=1e-12)
        assert y[1, 0, j + 2].item() == pytest.approx(b * c + a * s, rel=1e-12)
    assert torch.equal(y[1, 0, 4:], x[1, 0, 4:].double())


def test_rope_scores_depend_only_on_the_relative_position():
    torch.manual_seed(11)
    q, k = torch.randn(1, 1, 8).repeat(3, 1, 1), torch.randn(1, 1, 8).repeat(3, 1, 1)
    rq = ref.rope(q, i32([5, 12, 40]), theta=5e6)
    rk = ref.rope(k, i32([2, 9, 37]), theta=5e6)
    dots = (rq * rk).sum(-1).flatten().tolist()
    assert dots[0] == pytest.approx(dots[1], rel=1e-12) and dots[0] == pytest.approx(dots[2], rel=1e-12)


def test_rope_3d_axes():
    # D = 8: a = 2 dims per axis, one frequency each (theta^0 = 1): angles (t, h, w),
    # pairs (0, 3), (1, 4), (2, 5); dims 6, 7 pass through.
    x = torch.arange(1.0, 9.0).reshape(1, 1, 8)
    pos = i32([[1, 2, 3]])
    y = ref.rope_3d(x, pos)[0, 0]
    for j, angle in enumerate((1, 2, 3)):
        a, b = j + 1.0, j + 4.0
        assert y[j].item() == pytest.approx(a * math.cos(angle) - b * math.sin(angle), rel=1e-12)
        assert y[j + 3].item() == pytest.approx(b * math.cos(angle) + a * math.sin(angle), rel=1e-12)
    assert y[6:].tolist() == [7.0, 8.0]
    # D = 14: a = 4 dims per axis, inv_freq (1, theta^(-1/2)) = (1, 0.01): angles
    # (t, t/100, h, h/100, w, w/100) on pairs (i, i + 6); dims 12, 13 pass through.
    x14 = torch.randn(1, 1, 14)
    y14 = ref.rope_3d(x14, i32([[3, 5, 7]]))[0, 0]
    for i, angle in enumerate((3, 0.03, 5, 0.05, 7, 0.07)):
        a, b = float(x14[0, 0, i]), float(x14[0, 0, i + 6])
        assert y14[i].item() == pytest.approx(a * math.cos(angle) - b * math.sin(angle), rel=1e-12, abs=1e-15)
        assert y14[i + 6].item() == pytest.approx(b * math.cos(angle) + a * math.sin(angle), rel=1e-12, abs=1e-15)
    assert torch.equal(y14[12:], x14[0, 0, 12:].double())
    # D = 80 (M3's ViT): 26 dims per axis, 78 rotated, 2 unrotated; pos 0 is the identity.
    x80 = torch.randn(2, 1, 80)
    y80 = ref.rope_3d(x80, i32([[0, 0, 0], [1, 1, 1]]))
    assert torch.equal(y80[0], x80[0].double()) and torch.equal(y80[1, 0, 78:], x80[1, 0, 78:].double())
    assert not torch.allclose(y80[1, 0, :78], x80[1, 0, :78].double())


def test_elementwise_ops():
    x = torch.tensor([-2.0, 0.0, 1.0, 3.0])
    assert torch.allclose(ref.swiglu(x, x + 1), torch.nn.functional.silu(x.double()) * (x.double() + 1))
    assert ref.gelu(torch.tensor([1.0])).item() == pytest.approx(0.8413447460685429, rel=1e-15)
    assert ref.gelu(torch.tensor([-1.0])).item() == pytest.approx(-0.15865525393145707, rel=1e-14)
    assert ref.add(x, x).tolist() == [-4.0, 0.0, 2.0, 6.0]
    with pytest.raises(ValueError, match="b"):
        ref.add(x, x[:2])


def test_matmul_embedding_scatter_visual():
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    w = torch.tensor([[1.0, 0.0], [1.0, -1.0], [2.0, 0.5]])
    assert ref.matmul(x, w, bias=torch.tensor([0.0, 10.0, 0.0])).tolist() == [[1, 9, 3], [3, 9, 8]]
    table = torch.arange(12.0).reshape(4, 3)
    assert ref.embedding(table, i32([3, 0, 3])).tolist() == [[9, 10, 11], [0, 1, 2], [9, 10, 11]]
    with pytest.raises(ValueError, match="ids"):
        ref.embedding(table, i32([4]))
    tokens, vis = i32([5, 0, 7, 0]), torch.tensor([[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]])
    y = ref.scatter_visual(tokens, vis, table)
    assert y.tolist() == [[0, 1, 2], [1, 1, 1], [6, 7, 8], [2, 2, 2]]
    assert table[1].tolist() == [3, 4, 5]  # a copy
    with pytest.raises(ValueError, match="vis"):
        ref.scatter_visual(i32([0, 1, 2, 3]), vis, table)


def test_argmax_ties_nan_and_signed_zero():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0],
                      [NAN, -INF, NAN, NAN],
                      [NAN, NAN, NAN, NAN],
                      [-0.0, 0.0, -1.0, NAN],
                      [NAN, 5.0, 9.0, 9.0]])
    assert ref.argmax(x).tolist() == [1, 1, 0, 0, 2]
    assert ref.argmax(x).dtype == torch.int32


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
