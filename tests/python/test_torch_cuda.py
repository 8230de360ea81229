"""msa.torch on CUDA (skipped visibly without a GPU): stream ordering, CUDA graphs, torch.compile,
MSAWrapper and the backward against the CPU, and device-side error reports."""
import pytest
import torch

import msa
import msa.torch as mt
from torch_cases import (CFG, SparseModule, layer, load_example, make_cache, needs_cuda, needs_torch_library,
                         nmse, step_inputs)


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
