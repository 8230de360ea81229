"""The training half through the package: the backward ops against torch autograd of
msa.reference's float64 forward, autograd through msa's ops, and the indexer's KL loss
against its definition."""
import pytest
import torch

import msa
import msa.reference as ref
from cases import PagedBatch, random_selection

msa_torch = pytest.importorskip("msa.torch")

# The backends that run the training ops on host tensors here (docs/training.md; cuda
# and hip run them too, on device tensors: tests/python/test_torch_cuda.py).
TRAINING_BACKENDS = [b for b in ("cpu-ref", "cpu", "vulkan") if b in msa.backends()]


@pytest.fixture(params=TRAINING_BACKENDS)
def backend(request):
    return request.param


def _batch(g, dtype=torch.float32):
    return PagedBatch(g, [2, 3], [70, 130], dtype=dtype)


def _leaves(*ts):
    return [t.detach().double().requires_grad_() for t in ts]


def _nmse(x, want):
    x, want = x.double(), want.double()
    return float((x - want).pow(2).sum() / want.pow(2).sum().clamp_min(1e-300))


def _reference_grads(fn, inputs, dout):
    leaves = _leaves(*inputs)
    out, _ = fn(*leaves)
    out.backward(dout.double())
    return [x.grad for x in leaves]


@pytest.mark.parametrize("mode", ["per_kv_head", "shared"])
def test_sparse_backward_matches_autograd_of_the_reference(backend, gen, mode):
    b = _batch(gen)
    idx = random_selection(gen, b, 1 if mode == "shared" else 2, k=2)
    out, lse = msa.sparse_block_attention(b.q, b.k_cache, b.v_cache, *b.paged(), idx, mode=mode, backend=backend)
    dout = torch.randn(out.shape, generator=gen)
    clean = lambda c: torch.nan_to_num(c, nan=0.0)  # autograd of the reference multiplies slack NaN by 0 otherwise
    want = _reference_grads(lambda q, k, v: ref.sparse_block_attention(q, k, v, *b.paged(), idx, mode=mode),
                            (b.q, clean(b.k_cache), clean(b.v_cache)), dout)
    got = msa.sparse_block_attention_backward(dout, b.q, b.k_cache, b.v_cache, *b.paged(), idx, out, lse, mode=mode,
                                              backend=backend)
    for g_, w in zip(got, want):
        assert g_.dtype == torch.float32 and not torch.isnan(g_).any()
        assert _nmse(g_, w) <= 1e-10


def test_dense_backward_matches_autograd_of_the_reference(backend, gen):
    b = _batch(gen)
    out, lse = msa.dense_attention(b.q, b.k_cache, b.v_cache, *b.paged(), backend=backend)
    dout = torch.randn(out.shape, generator=gen)
    clean = lambda c: torch.nan_to_num(c, nan=0.0)
    want = _reference_grads(lambda q, k, v: ref.dense_attention(q, k, v, *b.paged()),
                            (b.q, clean(b.k_cache), clean(b.v_cache)), dout)
    got = msa.dense_attention_backward(dout, b.q, b.k_cache, b.v_cache, *b.paged(), out, lse, backend=backend)
    for g_, w in zip(got, want):
        assert _nmse(g_, w) <= 1e-10


def test_patch_backward_matches_autograd_of_the_reference(backend, gen):
    items = torch.tensor([[5, 2, 2]], dtype=torch.int32)
    q, k, v = (torch.randn(20, 2, 64, generator=gen) for _ in range(3))
    out, lse = msa.patch_attention_3d(q, k, v, items, backend=backend)
    dout = torch.randn(out.shape, generator=gen)
    want = _reference_grads(lambda q_, k_, v_: ref.patch_attention_3d(q_, k_, v_, items), (q, k, v), dout)
    got = msa.patch_attention_3d_backward(dout, q, k, v, items, out, lse, backend=backend)
    for g_, w in zip(got, want):
        assert _nmse(g_, w) <= 1e-10


def test_autograd_through_sparse_attention(gen):
    b = _batch(gen)
    idx = random_selection(gen, b, 2, k=2)
    q = b.q.clone().requires_grad_()
    k_cache = torch.nan_to_num(b.k_cache).requires_grad_()
    v_cache = torch.nan_to_num(b.v_cache).requires_grad_()
    out, lse = msa.sparse_block_attention(q, k_cache, v_cache, *b.paged(), idx)
    assert out.requires_grad and not lse.requires_grad
    dout = torch.randn(out.shape, generator=gen)
    (out * dout).sum().backward()
    want = _reference_grads(lambda q_, k_, v_: ref.sparse_block_attention(q_, k_, v_, *b.paged(), idx),
                            (q, k_cache, v_cache), dout)
    for leaf, w in zip((q, k_cache, v_cache), want):
        assert leaf.grad.dtype == leaf.dtype and _nmse(leaf.grad, w) <= 1e-10


def test_autograd_through_dense_attention_in_bf16(gen):
    b = _batch(gen, torch.bfloat16)
    leaves = [t.clone().requires_grad_() for t in (b.q, torch.nan_to_num(b.k_cache), torch.nan_to_num(b.v_cache))]
    out, _ = msa.dense_attention(*leaves, *b.paged())
    dout = torch.randn(out.shape, generator=gen).to(torch.bfloat16)
    (out.float() * dout.float()).sum().backward()
    want = _reference_grads(lambda q_, k_, v_: ref.dense_attention(q_, k_, v_, *b.paged()), leaves, dout)
    for leaf, w in zip(leaves, want):
        assert leaf.grad.dtype == torch.bfloat16 and _nmse(leaf.grad, w) <= 1e-4


def _kl_by_definition(b, qi, ki_cache, q, k_cache, lse, scale, scale_i, sets):
    """KL(p || u) per (token, selection head) from docs/training.md, in float64."""
    T, Hq, D = q.shape
    Hs = qi.shape[1]
    G = Hq // Hs
    kl = torch.zeros(T, Hs, dtype=torch.float64)
    for t in range(T):
        for g in range(Hs):
            slots = sets(t, g)
            if not slots:
                continue
            keys = torch.stack([ki_cache[p, s] for p, s in slots]).double()
            u = torch.softmax(scale_i * keys @ qi[t, g].double(), 0)
            p = torch.zeros(len(slots), dtype=torch.float64)
            for h in range(g * G, g * G + G):
                kh = torch.stack([k_cache[pg, g, s] for pg, s in slots]).double()
                p += torch.exp(scale * kh @ q[t, h].double() - lse[t, h].double()) / G
            kl[t, g] = (p * (torch.log(p.clamp_min(1e-300)) - torch.log(u))).sum()
    return kl


def test_indexer_kl_dense_stage_is_its_definition_and_its_gradients_are_autograd(gen):
    b = _batch(gen)
    kc = torch.nan_to_num(b.k_cache)
    ki = torch.nan_to_num(b.ki_cache)
    _, lse = msa.dense_attention(b.q, kc, b.v_cache, *b.paged())
    qi = b.qi.clone().requires_grad_()
    kic = ki.clone().requires_grad_()
    kl = msa_torch.indexer_kl(qi, kic, b.q, kc, lse, *b.paged(), stage="dense")
    pos = ref.token_positions(b.cu_q, b.kv_len)
    seq = torch.repeat_interleave(torch.arange(2), torch.tensor([2, 3]))

    def causal(t, g):
        return [(int(b.block_table[seq[t], s // b.Bs]), s % b.Bs) for s in range(int(pos[t]) + 1)]

    want = _kl_by_definition(b, b.qi, ki, b.q, kc, lse, 64 ** -0.5, 64 ** -0.5, causal)
    assert (kl.detach().double() - want).abs().max() <= 1e-5 * max(1.0, float(want.abs().max()))
    weights = torch.rand(kl.shape, generator=gen)
    (kl * weights).sum().backward()
    # the same loss built from torch ops in float64 and differentiated by autograd
    qi64, ki64 = _leaves(b.qi, ki)
    loss = torch.zeros((), dtype=torch.float64)
    for t in range(kl.shape[0]):
        for g in range(kl.shape[1]):
            slots = causal(t, g)
            keys = torch.stack([ki64[p, s] for p, s in slots])
            logu = torch.log_softmax(64 ** -0.5 * keys @ qi64[t, g], 0)
            p = torch.zeros(len(slots), dtype=torch.float64)
            for h in range(g * 2, g * 2 + 2):
                kh = torch.stack([kc[pg, g, s] for pg, s in slots]).double()
                p += torch.exp(64 ** -0.5 * kh @ b.q[t, h].double() - lse[t, h].double()) / 2
            loss = loss + weights[t, g].double() * (p * (torch.log(p) - logu)).sum()
    loss.backward()
    assert _nmse(qi.grad, qi64.grad) <= 1e-10
    assert _nmse(kic.grad, ki64.grad) <= 1e-10


def test_ops_without_a_backward_say_so(gen):
    b = _batch(gen)
    k = torch.randn(5, 2, 64, generator=gen, requires_grad=True)
    with pytest.raises(RuntimeError, match="kv_append.*no backward"):
        msa.kv_append(k, k.detach(), *b.paged(), b.k_cache.clone(), b.v_cache.clone())
