"""The MSA ops through the Python package, on every CPU-side backend (and Vulkan where
found), NumPy and torch inputs, against msa.reference with the contract's tolerances."""
import numpy as np
import pytest
import torch

import msa
import msa.reference as ref
from cases import PagedBatch, assert_out_close, assert_score_close, random_selection
from conftest import as_framework, poisoned_like

FRAMEWORK_DTYPES = [("numpy", torch.float32), ("torch", torch.float32), ("torch", torch.bfloat16)]
Q_LENS, KV_LENS = [1, 5, 0, 3], [150, 70, 9, 200]


def _batch(g, dtype, **kw):
    return PagedBatch(g, Q_LENS, KV_LENS, dtype=dtype, **kw)


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
@pytest.mark.parametrize("Qb,pool", [(1, "max"), (4, "lse")])
def test_indexer_score(backend, gen, framework, dtype, Qb, pool):
    b = _batch(gen, dtype)
    want = ref.indexer_score(b.qi, b.ki_cache, *b.paged(), Qb=Qb, pool=pool)
    qi, ki, bt, kl, cu = as_framework(framework, b.qi, b.ki_cache, *b.paged())
    got = msa.indexer_score(qi, ki, bt, kl, cu, Qb=Qb, pool=pool, backend=backend)
    assert isinstance(got, np.ndarray if framework == "numpy" else torch.Tensor)
    assert_score_close(got, want, dtype)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_block_topk_matches_reference_exactly(backend, gen, framework):
    b = _batch(gen, torch.float32)
    NQ = ref.count_query_blocks(b.cu_q, b.kv_len)
    scores = torch.randn(NQ, 2, b.max_blocks, generator=gen).round(decimals=1)  # ties to break by index
    scores[0, 0, 1] = float("nan")
    want_idx, want_cnt = ref.block_topk(scores, b.kv_len, b.cu_q, Bs=b.Bs, k=3, n_sink=1)
    s, kl, cu = as_framework(framework, scores, b.kv_len, b.cu_q)
    idx, cnt = msa.block_topk(s, kl, cu, Bs=b.Bs, k=3, n_sink=1, backend=backend)
    assert torch.equal(torch.as_tensor(idx), want_idx)
    assert torch.equal(torch.as_tensor(cnt), want_cnt)


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
def test_indexer_topk_is_score_then_select(backend, gen, framework, dtype):
    b = _batch(gen, dtype)
    qi, ki, bt, kl, cu = as_framework(framework, b.qi, b.ki_cache, *b.paged())
    NQ = int(b.cu_q[-1])
    score = msa.indexer_score(qi, ki, bt, kl, cu, backend=backend)
    block_score = poisoned_like(score)  # a workspace the fused call writes
    idx, cnt = msa.indexer_topk(qi, ki, bt, kl, cu, k=3, block_score=block_score, backend=backend)
    assert_score_close(block_score, ref.indexer_score(b.qi, b.ki_cache, *b.paged()), dtype)
    want_idx, want_cnt = ref.block_topk(torch.as_tensor(block_score), b.kv_len, b.cu_q, NQ=NQ, Bs=b.Bs, k=3)
    assert torch.equal(torch.as_tensor(idx), want_idx)
    assert torch.equal(torch.as_tensor(cnt), want_cnt)


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
@pytest.mark.parametrize("Qb,mode", [(1, "per_kv_head"), (4, "per_kv_head"), (1, "shared")])
def test_sparse_block_attention(backend, gen, framework, dtype, Qb, mode):
    b = _batch(gen, dtype)
    idx = random_selection(gen, b, 1 if mode == "shared" else 2, k=2, Qb=Qb)
    want_out, want_lse = ref.sparse_block_attention(b.q, b.k_cache, b.v_cache, *b.paged(), idx, Qb=Qb, mode=mode)
    args = as_framework(framework, b.q, b.k_cache, b.v_cache, *b.paged(), idx)
    out, lse = msa.sparse_block_attention(*args, Qb=Qb, mode=mode, backend=backend)
    assert_out_close(out, want_out, dtype)
    assert_score_close(lse, want_lse, dtype)


def test_sparse_block_attention_empty_selection(backend, gen):
    b = _batch(gen, torch.float32)
    idx = torch.full((int(b.cu_q[-1]), 2, 2), -1, dtype=torch.int32)
    out, lse = msa.sparse_block_attention(b.q, b.k_cache, b.v_cache, *b.paged(), idx, backend=backend)
    assert torch.equal(out, torch.zeros_like(out))
    assert torch.isneginf(lse).all()


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
def test_dense_attention(backend, gen, framework, dtype):
    b = _batch(gen, dtype)
    want_out, want_lse = ref.dense_attention(b.q, b.k_cache, b.v_cache, *b.paged())
    out, lse = msa.dense_attention(*as_framework(framework, b.q, b.k_cache, b.v_cache, *b.paged()), backend=backend)
    assert_out_close(out, want_out, dtype)
    assert_score_close(lse, want_lse, dtype)


@pytest.mark.parametrize("framework,dtype", FRAMEWORK_DTYPES)
def test_patch_attention_3d(backend, gen, framework, dtype):
    items = torch.tensor([[6, 2, 3], [1, 2, 2]], dtype=torch.int32)
    N = 6 * 6 + 4
    q, k, v = (torch.randn(N, 2, 80, generator=gen).to(dtype) for _ in range(3))
    want_out, want_lse = ref.patch_attention_3d(q, k, v, items, window=4)
    out, lse = msa.patch_attention_3d(*as_framework(framework, q, k, v, items), window=4, backend=backend)
    assert_out_close(out, want_out, dtype)
    assert_score_close(lse, want_lse, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_append_in_place(backend, gen, dtype):
    b = _batch(gen, dtype)
    T = int(b.cu_q[-1])
    k, v = (torch.randn(T, 2, 64, generator=gen).to(dtype) for _ in range(2))
    ki = torch.randn(T, 64, generator=gen).to(dtype)
    want = ref.kv_append(k, v, *b.paged(), b.k_cache, b.v_cache, ki=ki, ki_cache=b.ki_cache)
    caches = (b.k_cache.clone(), b.v_cache.clone(), b.ki_cache.clone())
    got = msa.kv_append(k, v, *b.paged(), caches[0], caches[1], ki=ki, ki_cache=caches[2], backend=backend)
    for g, c, w in zip(got, caches, want):
        assert g is c  # written in place, the caller's own tensors returned
        assert torch.equal(g.view(torch.int16 if dtype == torch.bfloat16 else torch.int32),
                           w.view(torch.int16 if dtype == torch.bfloat16 else torch.int32))  # NaN slack bits kept too


def test_kv_append_nvfp4_keys_bit_exact(backend, gen):
    b = _batch(gen, torch.float32)
    T, P = int(b.cu_q[-1]), b.k_cache.shape[0]
    k, v = (torch.randn(T, 2, 64, generator=gen) for _ in range(2))
    ki = torch.randn(T, 64, generator=gen) * 3
    ki_cache = torch.randint(0, 256, (P, b.Bs, 32), generator=gen, dtype=torch.uint8)
    ki_scale = torch.randint(0, 120, (P, b.Bs, 4), generator=gen, dtype=torch.uint8)
    want = ref.kv_append(k, v, *b.paged(), b.k_cache, b.v_cache, ki=ki, ki_cache=ki_cache, ki_scale=ki_scale)
    got = msa.kv_append(k, v, *b.paged(), b.k_cache.clone(), b.v_cache.clone(), ki=ki, ki_cache=ki_cache.clone(),
                        ki_scale=ki_scale.clone(), backend=backend)
    assert torch.equal(got[2], want[2]) and torch.equal(got[3], want[3])


def test_indexer_score_nvfp4_keys(backend, gen):
    b = _batch(gen, torch.float32)
    P = b.k_cache.shape[0]
    ki_cache = torch.randint(0, 256, (P, b.Bs, 32), generator=gen, dtype=torch.uint8)
    ki_scale = torch.randint(40, 70, (P, b.Bs, 4), generator=gen, dtype=torch.uint8)
    want = ref.indexer_score(b.qi, ki_cache, *b.paged(), ki_scale=ki_scale)
    got = msa.indexer_score(b.qi, ki_cache, *b.paged(), ki_scale=ki_scale, backend=backend)
    assert_score_close(got, want, torch.float32)
