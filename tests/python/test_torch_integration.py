"""msa.torch: PagedKVCache, SparseAttention, MSAWrapper and torch.ops.msa, on the CPU
(here) and on CUDA (skipped visibly without a GPU). Results are checked against
msa.reference (float64, docs/spec.md) and against plain torch attention."""
import json
import math
import os
import sys
import runpy

import pytest
import torch

import msa
import msa.torch as mt
from msa import reference as ref
from msa.torch import library

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAS_CUDA = torch.cuda.is_available() and any(b.startswith("cuda") for b in msa.backends())
CUDA_REASON = ("needs a CUDA GPU: torch.cuda.is_available() is "
               f"{torch.cuda.is_available()} and msa's backends are {msa.backends()}")
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)

# A small MSA shape: GQA 2, 2 KV heads, blocks of 16 tokens.
CFG = dict(Hq=4, Hkv=2, D=32, Hi=2, Di=32, Bs=16)


def nmse(x, r):
    x, r = x.double(), r.double()
    return float(((x - r) ** 2).sum() / (r ** 2).sum().clamp_min(1e-300))


def needs_torch_library():
    if not mt.HAS_TORCH_LIBRARY:
        pytest.skip(f"torch.ops.msa not registered: {mt.STATUS}")


def make_cache(lens, *, device="cpu", dtype=torch.bfloat16, ki_format="plain", max_tokens=None, layers=1,
               shuffle=True, seed=0):
    """A PagedKVCache with shuffled pages and NaN in every unused float slot."""
    g = torch.Generator().manual_seed(seed)
    max_tokens = max_tokens or max(lens) + 64
    blocks = -(-max_tokens // CFG["Bs"])
    P = len(lens) * blocks + 1
    order = torch.randperm(P, generator=g).tolist() if shuffle else None
    return mt.PagedKVCache(len(lens), max_tokens, Hkv=CFG["Hkv"], D=CFG["D"], Di=CFG["Di"], Bs=CFG["Bs"],
                           num_layers=layers, num_pages=P, dtype=dtype, ki_format=ki_format, device=device,
                           fill=float("nan"), page_order=order)


def step_inputs(T, *, dtype=torch.bfloat16, device="cpu", seed=1):
    """q, k, v, qi, ki of one step (values rounded to dtype)."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    return (r(T, CFG["Hq"], CFG["D"]), r(T, CFG["Hkv"], CFG["D"]), r(T, CFG["Hkv"], CFG["D"]),
            r(T, CFG["Hi"], CFG["Di"]), r(T, CFG["Di"]))


def layer(k=4, **kw):
    args = dict(k=k, n_sink=kw.pop("n_sink", 1), n_local=kw.pop("n_local", 1), Bs=CFG["Bs"], use_torch_ops=False)
    args.update(kw)
    return mt.SparseAttention(CFG["Hq"], CFG["Hkv"], CFG["D"], CFG["Hi"], CFG["Di"], **args)


def reference_layer(cache, q, qi, attn, l=0):
    """msa.reference's indexer_topk + sparse_block_attention on the cache's contents."""
    kc, vc, kic, kis = (t.cpu() if t is not None else None for t in cache.layer(l))
    bt, kl, cu = cache.block_table.cpu(), cache.kv_len.cpu(), cache.cu_q.cpu()
    idx, _ = ref.indexer_topk(qi.cpu(), kic, bt, kl, cu, ki_scale=kis, Qb=attn.Qb, k=attn.k,
                              n_sink=attn.n_sink, n_local=attn.n_local)
    out, _ = ref.sparse_block_attention(q.cpu(), kc, vc, bt, kl, cu, idx, Qb=attn.Qb)
    return idx, out


def history_attention(q, ks, vs, b_lens, q_lens, G):
    """Plain causal attention (float64) of each sequence's new queries over its whole
    history ks[b], vs[b] [L][Hkv][D]: what MSA computes when k covers every block."""
    outs, t = [], 0
    for b, n in enumerate(q_lens):
        L = b_lens[b]
        kk = ks[b].double().repeat_interleave(G, dim=1).transpose(0, 1)  # [Hq][L][D]
        vv = vs[b].double().repeat_interleave(G, dim=1).transpose(0, 1)
        qq = q[t:t + n].double().transpose(0, 1)  # [Hq][n][D]
        s = qq @ kk.transpose(1, 2) / math.sqrt(q.shape[-1])
        pos = torch.arange(L - n, L)
        s = s.masked_fill(torch.arange(L)[None, :] > pos[:, None], -math.inf)
        outs.append((torch.softmax(s, -1) @ vv).transpose(0, 1))
        t += n
    return torch.cat(outs)


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


class SparseModule(torch.nn.Module):
    """A module calling torch.ops.msa.sparse_block_attention between torch ops."""

    def forward(self, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx):
        out, lse = torch.ops.msa.sparse_block_attention(q * 2, k_cache, v_cache, block_table, kv_len, cu_q,
                                                        block_idx, 1, q.shape[0], "per_kv_head", None)
        return out.float() + 1.0, lse


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


# --------------------------------------------------------------------------------------
# PagedKVCache
# --------------------------------------------------------------------------------------

def gather_sequence(cache, b, l=0):
    """Sequence b's cached k, v [kv_len][Hkv][D] and ki [kv_len][Di], read through block_table."""
    L, Bs = int(cache.kv_len_host[b]), cache.Bs
    pages = cache.block_table[b, :-(-L // Bs)].long().cpu()
    kc, vc, kic, _ = (t.cpu() if t is not None else None for t in cache.layer(l))
    k = kc[pages].transpose(1, 2).reshape(-1, cache.Hkv, cache.D)[:L]
    v = vc[pages].transpose(1, 2).reshape(-1, cache.Hkv, cache.D)[:L]
    ki = kic[pages].reshape(-1, kic.shape[-1])[:L]
    return k, v, ki


def test_cache_append_grows_kv_len_and_writes_slots():
    cache = make_cache([0, 0])
    hist = [[], []]
    for step, q_lens in enumerate(([17, 33], [1, 1], [0, 5], [1, 1])):
        T = sum(q_lens)
        _, kk, vv, _, ki = step_inputs(T, seed=10 + step)
        cu = torch.tensor([0, q_lens[0], T], dtype=torch.int32)
        cache.append(kk, vv, ki, cu)
        for b in range(2):
            rows = slice(int(cu[b]), int(cu[b + 1]))
            hist[b].append((kk[rows], vv[rows], ki[rows]))
    assert cache.kv_len.tolist() == [19, 40]
    assert cache.positions.tolist() == [18, 39]
    for b in range(2):
        k, v, ki = gather_sequence(cache, b)
        assert torch.equal(k, torch.cat([h[0] for h in hist[b]]))
        assert torch.equal(v, torch.cat([h[1] for h in hist[b]]))
        assert torch.equal(ki, torch.cat([h[2] for h in hist[b]]))


def test_cache_write_equals_reference_kv_append_bitwise():
    cache = make_cache([30, 9])
    cache.begin_step([30, 9])
    before = [t.clone() for t in cache.layer(0)[:3]]
    _, kk, vv, _, ki = step_inputs(39, seed=4)
    cache.write(kk, vv, ki)
    want = ref.kv_append(kk, vv, cache.block_table, cache.kv_len, cache.cu_q, *before[:2], ki=ki, ki_cache=before[2])
    for got, exp in zip(cache.layer(0)[:3], want):
        assert torch.equal(got.view(torch.int16), exp.view(torch.int16))


def needs_ki_format(fmt):
    if fmt.startswith("fp8") and not hasattr(torch, "float8_e4m3fn"):
        pytest.skip(f"{fmt} indexer keys need torch.float8_e4m3fn (torch >= 2.1), this is torch {torch.__version__}")


def as_bytes(t):
    return t if t is None or t.dtype != getattr(torch, "float8_e4m3fn", None) else t.view(torch.uint8)


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8", "fp8_scaled"])
def test_cache_quantized_keys_equal_reference_kv_append(fmt):
    needs_ki_format(fmt)
    cache = make_cache([21], ki_format=fmt)
    cache.begin_step([21])
    _, kk, vv, _, ki = step_inputs(21, seed=5)
    kic0 = cache.ki_caches[0].clone()
    kis0 = None if cache.ki_scales[0] is None else cache.ki_scales[0].clone()
    cache.write(kk, vv, ki)
    want = ref.kv_append(kk, vv, cache.block_table, cache.kv_len, cache.cu_q, cache.k_caches[0],
                         cache.v_caches[0], ki=ki, ki_cache=kic0, ki_scale=kis0)
    assert torch.equal(as_bytes(cache.ki_caches[0]), as_bytes(want[2]))
    if kis0 is not None:
        assert torch.equal(as_bytes(cache.ki_scales[0]), as_bytes(want[3]))


def test_cache_out_of_pages_and_release():
    cache = mt.PagedKVCache(2, 32, Hkv=1, D=8, Di=8, Bs=16, num_pages=3, dtype=torch.float32)
    cache.begin_step([32, 16])
    assert cache.free_pages() == 0
    with pytest.raises(RuntimeError, match="out of pages"):
        cache.begin_step([0, 1])
    cache.release(0)
    assert cache.free_pages() == 2 and cache.kv_len_host.tolist() == [0, 16]
    with pytest.raises(ValueError, match="max_blocks"):
        cache.begin_step([33, 0])


# --------------------------------------------------------------------------------------
# SparseAttention
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("Qb", [1, 4])
def test_sparse_attention_prefill_and_decode_vs_reference(Qb):
    cache = make_cache([0, 0], max_tokens=128)
    attn = layer(k=4, Qb=Qb)
    steps = ([30, 61], [15, 8], [0, 1], [1, 0])
    for step, q_lens in enumerate(steps):
        cu = cache.begin_step(q_lens)
        q, kk, vv, qi, ki = step_inputs(sum(q_lens), seed=20 + step)
        with torch.no_grad():
            out = attn(q, kk, vv, qi, ki, cache, cu)
        idx, want = reference_layer(cache, q, qi, attn)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert nmse(out, want) <= 5e-5, (step, nmse(out, want))
    assert cache.kv_len.tolist() == [46, 70]


def test_sparse_attention_covering_every_block_equals_dense_attention():
    """With k >= the number of blocks, MSA attends to every causal token: plain attention."""
    cache = make_cache([0, 0], max_tokens=96)
    attn = layer(k=8, n_sink=0)  # 96 / 16 = 6 blocks <= k
    hist_k, hist_v = [[], []], [[], []]
    for step, q_lens in enumerate(([40, 25], [1, 1], [7, 0])):
        cu = cache.begin_step(q_lens)
        q, kk, vv, qi, ki = step_inputs(sum(q_lens), seed=40 + step)
        with torch.no_grad():
            out = attn(q, kk, vv, qi, ki, cache, cu)
        for b in range(2):
            rows = slice(int(cache.cu_q_host[b]), int(cache.cu_q_host[b + 1]))
            hist_k[b].append(kk[rows])
            hist_v[b].append(vv[rows])
        want = history_attention(q, [torch.cat(h) for h in hist_k], [torch.cat(h) for h in hist_v],
                                 cache.kv_len_host.tolist(), q_lens, CFG["Hq"] // CFG["Hkv"])
        assert nmse(out, want) <= 5e-5


def test_sparse_attention_flattened_projections_and_layers():
    cache = make_cache([33], layers=2)
    cu = cache.begin_step([33])
    q, kk, vv, qi, ki = step_inputs(33, seed=7)
    flat = lambda t: t.reshape(t.shape[0], -1)  # noqa: E731
    with torch.no_grad():
        a0 = layer(layer_idx=0)(q, kk, vv, qi, ki, cache, cu)
        a1 = layer(layer_idx=1)(flat(q), flat(kk), flat(vv), flat(qi), ki, cache, cu)
    assert a1.shape == (33, CFG["Hq"] * CFG["D"])
    assert torch.equal(a0, a1.view_as(a0))
    assert torch.equal(cache.k_caches[0].view(torch.int16), cache.k_caches[1].view(torch.int16))


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8", "fp8_scaled"])
def test_sparse_attention_quantized_keys_vs_reference(fmt):
    needs_ki_format(fmt)
    cache = make_cache([0], ki_format=fmt, max_tokens=200)
    attn = layer(k=3)
    for step, n in enumerate((150, 1, 1)):
        cu = cache.begin_step([n])
        q, kk, vv, qi, ki = step_inputs(n, seed=60 + step)
        with torch.no_grad():
            out = attn(q, kk, vv, qi, ki, cache, cu)
        _, want = reference_layer(cache, q, qi, attn)
        assert nmse(out, want) <= 5e-5


# --------------------------------------------------------------------------------------
# MSAWrapper
# --------------------------------------------------------------------------------------

def plain_layer(cache, q, qi, *, k, n_sink, n_local=1, Qb=1, NQ=None):
    kc, vc, kic, kis = cache.layer(0)
    args = (cache.block_table, cache.kv_len, cache.cu_q)
    idx, cnt = msa.indexer_topk(qi, kic, *args, ki_scale=kis, Qb=Qb, NQ=NQ, k=k, n_sink=n_sink, n_local=n_local)
    out, lse = msa.sparse_block_attention(q, kc, vc, *args, idx, Qb=Qb, NQ=NQ)
    return idx, cnt, out, lse


@pytest.mark.parametrize("Qb", [1, 8])
@pytest.mark.parametrize("use_workspace", [False, True])
def test_wrapper_plan_run_equals_plain_calls(Qb, use_workspace):
    cache = make_cache([50, 3, 77])
    cu = cache.begin_step([50, 3, 77])
    q, kk, vv, qi, ki = step_inputs(130, seed=8)
    cache.write(kk, vv, ki)
    ws = torch.empty(1 << 20, dtype=torch.uint8) if use_workspace else None
    w = mt.MSAWrapper(ws).plan(cache.block_table, cache.kv_len, cu, Qb=Qb, k=5, n_sink=1, **CFG)
    assert w.NQ == ref.count_query_blocks(cache.cu_q, cache.kv_len, Qb)
    kc, vc, kic, _ = cache.layer(0)
    out, lse = w.run(q, qi, kc, vc, kic, return_lse=True)
    idx, cnt, out2, lse2 = plain_layer(cache, q, qi, k=5, n_sink=1, Qb=Qb)
    assert torch.equal(w.block_idx, idx) and torch.equal(w.block_cnt, cnt)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    if use_workspace:
        base, end = ws.data_ptr(), ws.data_ptr() + ws.numel()
        assert all(base <= t.data_ptr() < end for t in (w.out, w.lse, w.block_idx, w.block_score))


def test_wrapper_replan_keeps_addresses():
    cache = make_cache([20, 20])
    w = mt.MSAWrapper()
    cache.begin_step([1, 1])
    w.plan(cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, **CFG)
    ptrs = [t.data_ptr() for t in (w.out, w.lse, w.block_idx, w.block_table, w.kv_len, w.cu_q)]
    cache.begin_step([1, 1])
    w.plan(cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, **CFG)
    assert ptrs == [t.data_ptr() for t in (w.out, w.lse, w.block_idx, w.block_table, w.kv_len, w.cu_q)]
    assert w.kv_len.tolist() == [2, 2]


def test_wrapper_plan_checks_arguments():
    bt, kl, cu = torch.zeros((1, 4), dtype=torch.int32), torch.tensor([10], dtype=torch.int32), torch.tensor([0, 1])
    w = mt.MSAWrapper()
    with pytest.raises(ValueError, match="'Hi'"):
        w.plan(bt, kl, cu, **dict(CFG, Hi=1))
    with pytest.raises(ValueError, match="'k'"):
        w.plan(bt, kl, cu, k=1, n_sink=1, **CFG)
    with pytest.raises(ValueError, match="'kv_len'"):
        w.plan(bt, torch.tensor([65]), torch.tensor([0, 1]), k=4, **CFG)
    with pytest.raises(ValueError, match="'cu_q'"):
        w.plan(bt, kl, torch.tensor([0, 11]), k=4, **CFG)
    with pytest.raises(ValueError, match="'workspace'"):
        mt.MSAWrapper(torch.empty(8, dtype=torch.uint8)).plan(bt, kl, cu, k=4, **CFG)
    with pytest.raises(RuntimeError, match="plan"):
        mt.MSAWrapper().run(*[torch.empty(0)] * 5)


def test_wrapper_dense_equals_plain_dense():
    cache = make_cache([40])
    cu = cache.begin_step([40])
    q, kk, vv, qi, ki = step_inputs(40, seed=9)
    cache.write(kk, vv, ki)
    w = mt.MSAWrapper().plan(cache.block_table, cache.kv_len, cu, k=4, **CFG)
    out = w.run_dense(q, cache.k_caches[0], cache.v_caches[0])
    out2, _ = msa.dense_attention(q, cache.k_caches[0], cache.v_caches[0], cache.block_table, cache.kv_len, cu)
    assert torch.equal(out, out2)


def test_layer_through_wrapper_equals_layer():
    cache = make_cache([60], layers=2)
    cu = cache.begin_step([60])
    q, kk, vv, qi, ki = step_inputs(60, seed=11)
    w = mt.MSAWrapper().plan(cache.block_table, cache.kv_len, cu, k=4, n_sink=1, **CFG)
    with torch.no_grad():
        a = layer(layer_idx=0)(q, kk, vv, qi, ki, cache, cu).clone()
        b = layer(layer_idx=1)(q, kk, vv, qi, ki, cache, cu, wrapper=w)
    assert torch.equal(a, b)


# --------------------------------------------------------------------------------------
# the example and the benchmarks' CPU paths
# --------------------------------------------------------------------------------------

def load_example():
    return runpy.run_path(os.path.join(ROOT, "examples", "hf_decoder_layer.py"))


def test_hf_decoder_layer_example_runs_on_cpu(capsys):
    assert load_example()["run"](torch.device("cpu"), torch.bfloat16)
    assert "matches dense attention" in capsys.readouterr().out


def load_bench(name):
    """A benchmark script's globals, loaded as `python3 bench/python/<name>` would run it
    (its folder first on sys.path, for its sibling modules)."""
    folder = os.path.join(ROOT, "bench", "python")
    sys.path.insert(0, folder)
    try:
        return runpy.run_path(os.path.join(folder, name))
    finally:
        sys.path.remove(folder)


def test_bench_layer_quick_on_cpu_agrees_with_msa():
    rows = load_bench("bench_layer.py")["main"](["--quick", "--device", "cpu", "--iters", "1",
                                                   "--cases", "decode_b2,decode_b2_nvfp4,prefill128"])
    assert [r["case"] for r in rows] == ["decode_b2", "decode_b2_nvfp4", "prefill128"]
    for r in rows:
        assert r["msa_eager_ms"] > 0
    for r in (rows[0], rows[2]):  # the PyTorch-native MSA layer computes what msa computes
        assert r["torch_msa_nmse_vs_msa"] <= 5e-5 and r["sdpa_dense_ms"] > 0


def test_bench_training_quick_on_cpu_msa_grads_agree_with_torch_autograd(tmp_path):
    bench = load_bench("bench_training.py")
    path = tmp_path / "training.json"
    rows = bench["main"](["--quick", "--iters", "1", "--slow-iters", "1", "--json", str(path)])
    assert json.loads(path.read_text())["rows"] == rows
    ops = {(r["L"], r.get("selection"), r["op"]): r for r in rows}
    for L in (256, 512):
        for op in ("msa_score", "msa_topk", "sdpa_fwd", "sdpa_bwd"):
            assert 0 < ops[(L, None, op)]["ms"] < math.inf
        for kind in ("random", "correlated"):
            for op in ("msa_fwd", "msa_bwd", "msa_kl", "msa_layer", "torch_sparse_fwd_bwd"):
                r = ops[(L, kind, op)]
                assert 0 < r["ms"] < math.inf and 0 < r["tflops"] < math.inf, r
            native = ops[(L, kind, "torch_sparse_fwd_bwd")]  # bf16 autograd vs msa's f32 gradients
            for g in ("out", "dq", "dk", "dv"):
                assert native["nmse_" + g] <= 1e-4, (L, kind, g, native["nmse_" + g])


def test_bench_training_selections_are_valid_and_correlated_ones_drift():
    bench = load_bench("bench_training.py")
    cfg, T = bench["TINY"], 512
    Bs, k = cfg["Bs"], cfg["k"]
    overlap = {}
    for kind in ("random", "correlated"):
        idx = bench["selections"](kind, cfg, T, torch.device("cpu"), seed=3)
        assert idx.shape == (T, cfg["Hkv"], k) and idx.dtype == torch.int32
        idx = idx.long()
        cur = (torch.arange(T) // Bs)[:, None]
        valid = idx >= 0
        assert (valid.sum(-1) == torch.clamp(cur + 1, max=k)).all()  # k blocks, or every visible one
        assert (idx[valid] <= cur.expand(-1, cfg["Hkv"])[..., None].expand_as(idx)[valid]).all()
        assert (valid[..., :-1] >= valid[..., 1:]).all()  # -1 padding last
        ordered = torch.where(valid, idx, torch.full_like(idx, T))
        assert (~valid[..., 1:] | (ordered[..., 1:] > ordered[..., :-1])).all()  # ascending, no duplicates
        assert (idx == 0).any(-1).all() and (idx == cur[..., None]).any(-1).all()  # sink and local block
        overlap[kind] = bench["adjacent_overlap"](idx)
    assert overlap["correlated"] > 0.9 and overlap["random"] < 0.8, overlap


def test_bench_overhead_quick_on_cpu():
    rows = load_bench("bench_overhead.py")["main"](["--quick", "--calls", "20", "--repeats", "1", "--no-cuda"])
    names = {r["call"] for r in rows}
    assert "MSAWrapper.run (indexer_topk + sparse)" in names and all(r["host_us_median"] > 0 for r in rows)


# --------------------------------------------------------------------------------------
# CUDA
# --------------------------------------------------------------------------------------

def cuda_decode_problem(lens=(300, 1000), k=4, seed=0):
    cache = make_cache(list(lens), device="cuda", max_tokens=1100, seed=seed)
    prefill = [n - 1 for n in lens]
    _, kk, vv, _, ki = step_inputs(sum(prefill), device="cuda", seed=seed + 1)
    cache.begin_step(prefill)
    cache.write(kk, vv, ki)
    cache.begin_step([1] * len(lens))
    return cache


def cpu_copy(cache):
    """The same cache contents and step on the CPU."""
    c = make_cache([1] * cache.B, max_tokens=cache.max_blocks * cache.Bs, layers=cache.num_layers)
    c.num_pages = cache.num_pages
    for dst, src in ((c.k_caches, cache.k_caches), (c.v_caches, cache.v_caches), (c.ki_caches, cache.ki_caches)):
        for i, t in enumerate(src):
            dst[i] = t.cpu()
    c.block_table, c.kv_len, c.cu_q = cache.block_table.cpu(), cache.kv_len.cpu(), cache.cu_q.cpu()
    c.kv_len_host, c.cu_q_host, c.T = cache.kv_len_host.clone(), cache.cu_q_host.clone(), cache.T
    return c


def assert_scores_close(x, r):
    """block_score tolerance of docs/spec.md for bf16 inputs: -inf where the reference
    has it, elsewhere |x - r| <= 1e-3 * max(1, |r|)."""
    inf = torch.isinf(r)
    assert torch.equal(torch.isinf(x), inf) and torch.equal(x[inf], r[inf])
    assert bool(((x - r).abs()[~inf] <= 1e-3 * r.abs()[~inf].clamp_min(1.0)).all())


@needs_cuda
def test_cuda_non_default_stream_orders_with_torch():
    cache = cuda_decode_problem()
    T = cache.T
    q0, kk, vv, qi, ki = step_inputs(T, device="cuda", seed=5)
    cache.write(kk, vv, ki)
    kc, vc, kic, _ = cache.layer(0)
    idx, _ = msa.indexer_topk(qi, kic, cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, NQ=T)
    big = torch.randn(4096, 4096, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        q = torch.zeros_like(q0)
        for _ in range(20):  # keeps s busy so an unordered read of q would see zeros
            big = big @ big / 64.0
        q.copy_(q0)  # ordered after the matmuls on s only
        out, _ = msa.sparse_block_attention(q, kc, vc, cache.block_table, cache.kv_len, cache.cu_q, idx, NQ=T)
        consumed = out.float() * 2.0
    torch.cuda.current_stream().wait_stream(s)
    c = cpu_copy(cache)
    want, _ = msa.sparse_block_attention(q0.cpu(), c.k_caches[0], c.v_caches[0], c.block_table, c.kv_len, c.cu_q,
                                         idx.cpu())
    assert nmse(consumed.cpu() / 2.0, want.float()) <= 5e-5


def capture(fn, stream, warmup=3):
    """fn warmed up eagerly on `stream`, then captured on it (torch's recipe)."""
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=stream):
        result = fn()
    return g, result


@needs_cuda
@pytest.mark.parametrize("use_torch_ops", [False, True])
def test_cuda_graph_of_full_layer_equals_eager_bitwise(use_torch_ops):
    if use_torch_ops:
        needs_torch_library()
    cache = cuda_decode_problem()
    attn = layer(k=4, use_torch_ops=use_torch_ops)
    q, kk, vv, qi, ki = step_inputs(cache.T, device="cuda", seed=6)

    def step():
        with torch.no_grad():
            return attn(q, kk, vv, qi, ki, cache)

    eager = step().clone()
    g, static_out = capture(step, torch.cuda.Stream())
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, eager)
    new = step_inputs(cache.T, device="cuda", seed=7)
    for dst, src in zip((q, kk, vv, qi, ki), new):
        dst.copy_(src)
    g.replay()
    torch.cuda.synchronize()
    eager2 = step()
    torch.cuda.synchronize()
    assert torch.equal(static_out, eager2) and not torch.equal(eager2, eager)


@needs_cuda
@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cuda_torch_compile_fullgraph_matches_eager(backend):
    needs_torch_library()
    cache = cuda_decode_problem()
    q, kk, vv, qi, ki = step_inputs(cache.T, device="cuda", seed=8)
    cache.write(kk, vv, ki)
    kc, vc, kic, _ = cache.layer(0)
    idx, _ = msa.indexer_topk(qi, kic, cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, NQ=cache.T)
    args = (q, kc, vc, cache.block_table, cache.kv_len, cache.cu_q, idx)
    with torch.no_grad():
        eager = SparseModule()(*args)
        compiled = torch.compile(SparseModule(), fullgraph=True, backend=backend)(*args)
    torch.cuda.synchronize()
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])


@needs_cuda
def test_cuda_wrapper_equals_cpu_and_replays_in_graph():
    cache = cuda_decode_problem()
    q, kk, vv, qi, ki = step_inputs(cache.T, device="cuda", seed=9)
    cache.write(kk, vv, ki)
    ws = torch.empty(1 << 22, dtype=torch.uint8, device="cuda")
    w = mt.MSAWrapper(ws).plan(cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, **CFG)
    kc, vc, kic, _ = cache.layer(0)
    eager = w.run(q, qi, kc, vc, kic).clone()
    c = cpu_copy(cache)
    wc = mt.MSAWrapper().plan(c.block_table, c.kv_len, c.cu_q, k=4, n_sink=1, **CFG)
    wc.select(qi.cpu(), c.ki_caches[0])
    assert_scores_close(w.block_score.cpu(), wc.block_score)
    want, _ = wc.attend(q.cpu(), c.k_caches[0], c.v_caches[0], w.block_idx.cpu())  # CUDA's selection
    assert nmse(eager.cpu(), want) <= 5e-5
    g, static_out = capture(lambda: w.run(q, qi, kc, vc, kic), torch.cuda.Stream())
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(static_out, eager)
    # next step: grow each sequence by one token, re-plan (same sizes, same tensors), replay
    cache.begin_step([1] * cache.B)
    new = step_inputs(cache.T, device="cuda", seed=10)
    cache.write(*new[1:3], new[4])
    for dst, src in zip((q, qi), (new[0], new[3])):
        dst.copy_(src)
    w.plan(cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, **CFG)
    g.replay()
    replayed = static_out.clone()
    eager2 = w.run(q, qi, kc, vc, kic)
    torch.cuda.synchronize()
    assert torch.equal(replayed, eager2) and not torch.equal(replayed, eager)


@needs_cuda
def test_cuda_backward_equals_cpu():
    cache = cuda_decode_problem()
    kc, vc, kic, _ = cache.layer(0)
    idx = torch.full((cache.T, CFG["Hkv"], 4), -1, dtype=torch.int32, device="cuda")
    idx[..., 0] = 0  # every query attends its sequence's first block
    q = torch.randn(cache.T, CFG["Hq"], CFG["D"], device="cuda")
    grads = []
    for dev in ("cuda", "cpu"):
        leaves = [x.detach().to(dev).float().clone().requires_grad_() for x in (q, kc, vc)]
        args = [x.to(dev) for x in (cache.block_table, cache.kv_len, cache.cu_q, idx)]
        out, _ = msa.sparse_block_attention(*leaves, *args, NQ=cache.T)
        (out * torch.linspace(-1, 1, out.numel(), device=dev).reshape(out.shape)).sum().backward()
        grads.append([x.grad.cpu() for x in leaves])
    for got, want in zip(*grads):
        assert torch.isfinite(got).all() and nmse(got, want) <= 1e-8


@needs_cuda
def test_cuda_hf_decoder_layer_example():
    assert load_example()["run"](torch.device("cuda"), torch.bfloat16)


@needs_cuda
def test_cuda_check_errors_reports_bad_page_id():
    cache = cuda_decode_problem()
    kc, vc, _, _ = cache.layer(0)
    q = torch.randn(cache.T, CFG["Hq"], CFG["D"], device="cuda").to(kc.dtype)
    bad = cache.block_table.clone()
    bad[0, 0] = cache.num_pages + 1000
    idx = torch.full((cache.T, CFG["Hkv"], 4), -1, dtype=torch.int32, device="cuda")
    idx[:, :, 0] = 0
    msa.check_errors()
    msa.sparse_block_attention(q, kc, vc, bad, cache.kv_len, cache.cu_q, idx, NQ=cache.T)
    with pytest.raises(RuntimeError):
        msa.check_errors()
    msa.check_errors()  # the flag was cleared by the report
