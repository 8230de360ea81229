"""msa.torch's torch.ops.msa: registration, fake kernels on meta tensors, torch.compile without
graph breaks; and grad inputs, which the attention ops differentiate and MSAWrapper and
kv_append refuse."""
import pytest
import torch

import msa
import msa.torch as mt
from msa.torch import library
from torch_cases import CFG, SparseModule, layer, make_cache, needs_torch_library, step_inputs


# --------------------------------------------------------------------------------------
# torch.library registration
# --------------------------------------------------------------------------------------

def test_registration_flag_matches_torch_version():
    if library.torch_version() < library.MIN_TORCH:
        assert not mt.HAS_TORCH_LIBRARY
        pytest.skip(f"torch {torch.__version__} < 2.4: {mt.STATUS}")
    assert mt.HAS_TORCH_LIBRARY, mt.STATUS
    for name in library.OPS:
        assert hasattr(torch.ops.msa, name), name


def decode_problem(device="cpu", lens=(40, 70), k=4):
    """Two sequences after a prefill, at a decode step whose k, v, ki are written; its selection."""
    cache = make_cache(list(lens), device=device)
    prefill = [n - 1 for n in lens]
    q, kk, vv, qi, ki = step_inputs(sum(prefill), device=device, seed=2)
    cache.append(kk, vv, ki, torch.tensor([0, prefill[0], sum(prefill)]))
    cache.begin_step([1] * len(lens))
    q, kk, vv, qi, ki = step_inputs(len(lens), device=device, seed=3)
    cache.write(kk, vv, ki)
    idx, _ = msa.indexer_topk(qi, cache.ki_caches[0], cache.block_table, cache.kv_len, cache.cu_q, k=k, n_sink=1,
                              NQ=len(lens))
    return cache, q, qi, idx


def test_fake_kernels_give_shapes_on_meta_tensors():
    needs_torch_library()
    cache, q, qi, idx = decode_problem()
    m = lambda t: t.to("meta")  # noqa: E731
    kc, vc, kic, _ = cache.layer(0)
    out, lse = torch.ops.msa.sparse_block_attention(m(q), m(kc), m(vc), m(cache.block_table), m(cache.kv_len),
                                                    m(cache.cu_q), m(idx), 1, q.shape[0], "per_kv_head", None)
    assert out.shape == q.shape and out.dtype == q.dtype and lse.shape == q.shape[:2] and lse.dtype == torch.float32
    bi, bc = torch.ops.msa.indexer_topk(m(qi), m(kic), m(cache.block_table), m(cache.kv_len), m(cache.cu_q), None,
                                        1, q.shape[0], "per_kv_head", None, "max", 4, 1, 1)
    assert bi.shape == (q.shape[0], CFG["Hi"], 4) and bc.shape == (q.shape[0], CFG["Hi"]) and bi.dtype == torch.int32


def test_torch_ops_equal_plain_calls():
    needs_torch_library()
    cache, q, qi, idx = decode_problem()
    kc, vc, kic, _ = cache.layer(0)
    args = (cache.block_table, cache.kv_len, cache.cu_q)
    bi, bc = torch.ops.msa.indexer_topk(qi, kic, *args, None, 1, q.shape[0], "per_kv_head", None, "max", 4, 1, 1)
    assert torch.equal(bi, idx)
    out, lse = torch.ops.msa.sparse_block_attention(q, kc, vc, *args, idx, 1, q.shape[0], "per_kv_head", None)
    out2, lse2 = msa.sparse_block_attention(q, kc, vc, *args, idx)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)


def test_torch_compile_fullgraph_cpu():
    needs_torch_library()
    cache, q, qi, idx = decode_problem()
    kc, vc, _, _ = cache.layer(0)
    args = (q, kc, vc, cache.block_table, cache.kv_len, cache.cu_q, idx)
    with torch.no_grad():
        eager = SparseModule()(*args)
        compiled = torch.compile(SparseModule(), fullgraph=True, backend="aot_eager")(*args)
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])


def test_torch_compile_fullgraph_of_whole_layer_cpu():
    """SparseAttention through torch.ops.msa (kv_append mutates the caches) compiles
    without graph breaks and writes the same caches and output as eager."""
    needs_torch_library()
    outs, caches = [], []
    for compiled in (False, True):
        cache = make_cache([30, 12])
        cu = cache.begin_step([30, 12])
        q, kk, vv, qi, ki = step_inputs(42, seed=12)
        attn = layer(use_torch_ops=True)
        fn = torch.compile(attn, fullgraph=True, backend="aot_eager") if compiled else attn
        with torch.no_grad():
            outs.append(fn(q, kk, vv, qi, ki, cache, cu))
        caches.append(cache.k_caches[0].view(torch.int16).clone())
    assert torch.equal(outs[0], outs[1]) and torch.equal(caches[0], caches[1])


# --------------------------------------------------------------------------------------
# grad inputs: the attention ops differentiate; MSAWrapper and kv_append refuse them
# --------------------------------------------------------------------------------------

def test_requires_grad_goes_through_autograd_or_is_refused():
    cache, q, qi, idx = decode_problem()
    kc, vc, kic, _ = cache.layer(0)
    qg = q.float().requires_grad_()
    kcf, vcf = kc.float(), vc.float()
    args = (cache.block_table, cache.kv_len, cache.cu_q)
    out, _ = msa.sparse_block_attention(qg, kcf, vcf, *args, idx)
    out.sum().backward()
    assert qg.grad is not None and qg.grad.shape == qg.shape
    w = mt.MSAWrapper().plan(*args, dtype=torch.float32, k=4, n_sink=1, **CFG)
    with pytest.raises(ValueError, match="requires grad"):
        w.run(qg, qi.float().requires_grad_(), kcf, vcf, kic)
    if mt.HAS_TORCH_LIBRARY:  # torch.ops.msa differentiates too (tests/python/test_torch_ops_training.py)
        q2 = q.float().requires_grad_()
        out2, _ = torch.ops.msa.sparse_block_attention(q2, kcf, vcf, *args, idx, 1, q.shape[0], "per_kv_head", None)
        out2.sum().backward()
        assert torch.equal(q2.grad, qg.grad)
    with torch.no_grad():  # allowed without grad mode
        msa.sparse_block_attention(qg, kcf, vcf, *args, idx)
        if mt.HAS_TORCH_LIBRARY:
            torch.ops.msa.sparse_block_attention(qg, kcf, vcf, *args, idx, 1, q.shape[0], "per_kv_head", None)


def test_layer_with_grad_inputs_raises():
    q, kk, vv, qi, ki = (t.requires_grad_() for t in step_inputs(20, dtype=torch.float32))
    cache32 = mt.PagedKVCache(1, 64, Hkv=CFG["Hkv"], D=CFG["D"], Di=CFG["Di"], Bs=CFG["Bs"], dtype=torch.float32)
    cache32.begin_step([20])
    with pytest.raises(RuntimeError, match="kv_append.*no backward"):
        layer()(q, kk, vv, qi, ki, cache32)
