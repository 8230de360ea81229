"""Training through torch.ops.msa (torch >= 2.4): the attention ops' and indexer_kl's
gradients equal those of the msa.* autograd path, the backward ops have fake kernels,
the selection ops give outputs without grad, and a whole training step compiles with
fullgraph=True (AOTAutograd traces the backward ops) and matches eager."""
import pytest
import torch

import msa
import msa.torch as mt
from cases import PagedBatch, random_selection
from msa.torch import library

pytestmark = pytest.mark.skipif(not mt.HAS_TORCH_LIBRARY, reason=f"torch.ops.msa not registered: {mt.STATUS}")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() and "cuda" in msa.backends() else [])


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


def _batch(g, device, dtype=torch.float32):
    """A varlen paged batch on `device` (slack slots zeroed: the caches are leaves) and a
    selection of 2 blocks per (query, KV head)."""
    b = PagedBatch(g, [2, 3], [70, 130], dtype=dtype)
    idx = random_selection(g, b, 2, k=2).to(device)
    for name in ("q", "k_cache", "v_cache", "qi", "ki_cache"):
        setattr(b, name, torch.nan_to_num(getattr(b, name)).to(device))
    b.block_table, b.kv_len, b.cu_q = (t.to(device) for t in b.paged())
    return b, idx


def _leaves(*ts):
    return [t.detach().clone().requires_grad_() for t in ts]


def test_training_ops_are_registered():
    for name in ("sparse_block_attention_backward", "dense_attention_backward", "patch_attention_3d_backward",
                 "indexer_kl", "indexer_kl_backward"):
        assert name in library.OPS and hasattr(torch.ops.msa, name), name


def test_sparse_gradients_equal_the_autograd_functions(gen, device):
    b, idx = _batch(gen, device)
    dout = torch.randn(b.q.shape, generator=gen).to(device)
    grads = []
    for use_ops in (False, True):
        q, k, v = _leaves(b.q, b.k_cache, b.v_cache)
        if use_ops:
            out, lse = torch.ops.msa.sparse_block_attention(q, k, v, *b.paged(), idx, 1, idx.shape[0],
                                                            "per_kv_head", None)
        else:
            out, lse = msa.sparse_block_attention(q, k, v, *b.paged(), idx)
        assert out.requires_grad and not lse.requires_grad
        (out * dout).sum().backward()
        grads.append([x.grad for x in (q, k, v)])
    for a, w in zip(*grads):
        assert a.dtype == w.dtype and torch.equal(a, w)


def test_dense_and_patch_gradients_equal_the_autograd_functions(gen, device):
    b, _ = _batch(gen, device, torch.bfloat16)
    dout = torch.randn(b.q.shape, generator=gen).to(device, torch.bfloat16)
    grads = []
    for use_ops in (False, True):
        q, k, v = _leaves(b.q, b.k_cache, b.v_cache)
        fn = torch.ops.msa.dense_attention if use_ops else msa.dense_attention
        out, _ = fn(q, k, v, *b.paged(), None) if use_ops else fn(q, k, v, *b.paged())
        (out.float() * dout.float()).sum().backward()
        grads.append([x.grad for x in (q, k, v)])
    for a, w in zip(*grads):
        assert a.dtype == torch.bfloat16 and torch.equal(a, w)
    items = torch.tensor([[2, 2, 3], [1, 2, 2]], dtype=torch.int32, device=device)
    N = 2 * 2 * 3 + 4
    q0, k0, v0 = (torch.randn(N, 2, 32, generator=gen).to(device) for _ in range(3))
    grads = []
    for use_ops in (False, True):
        q, k, v = _leaves(q0, k0, v0)
        out, _ = (torch.ops.msa.patch_attention_3d(q, k, v, items, 4, None) if use_ops
                  else msa.patch_attention_3d(q, k, v, items))
        out.pow(2).sum().backward()
        grads.append([x.grad for x in (q, k, v)])
    for a, w in zip(*grads):
        assert torch.equal(a, w)


def test_indexer_kl_gradients_equal_the_autograd_function(gen, device):
    b, idx = _batch(gen, device)
    _, lse = msa.sparse_block_attention(b.q, b.k_cache, b.v_cache, *b.paged(), idx)
    weights = torch.rand(b.q.shape[0], 2, generator=gen).to(device)
    results = []
    for use_ops in (False, True):
        qi, ki = _leaves(b.qi, b.ki_cache)
        if use_ops:
            kl = torch.ops.msa.indexer_kl(qi, ki, b.q, b.k_cache, lse, *b.paged(), idx, "sparse", 1, idx.shape[0],
                                          "per_kv_head", None, None)
        else:
            kl = mt.indexer_kl(qi, ki, b.q, b.k_cache, lse, *b.paged(), block_idx=idx)
        (kl * weights).sum().backward()
        results.append((kl.detach(), qi.grad, ki.grad))
    for a, w in zip(*results):
        assert torch.equal(a, w)
    assert results[0][1].abs().sum() > 0 and results[0][2].abs().sum() > 0


def test_selection_outputs_do_not_require_grad(gen):
    b, _ = _batch(gen, "cpu")
    qi = b.qi.clone().requires_grad_()
    NQ = b.q.shape[0]
    score = torch.ops.msa.indexer_score(qi, b.ki_cache, *b.paged(), None, 1, NQ, "per_kv_head", None, "max")
    idx, _ = torch.ops.msa.indexer_topk(qi, b.ki_cache, *b.paged(), None, 1, NQ, "per_kv_head", None, "max", 2, 1, 1)
    assert not score.requires_grad and not idx.requires_grad


def test_backward_ops_fake_kernels_give_shapes(gen):
    b, idx = _batch(gen, "cpu")
    m = lambda t: t.to("meta")  # noqa: E731
    lse = torch.zeros(b.q.shape[:2])
    dq, dk, dv = torch.ops.msa.sparse_block_attention_backward(
        m(b.q), m(b.q), m(b.k_cache), m(b.v_cache), *(m(t) for t in b.paged()), m(idx), m(b.q), m(lse), 1,
        idx.shape[0], "per_kv_head", None)
    assert dq.shape == b.q.shape and dk.shape == b.k_cache.shape and dv.dtype == torch.float32
    dqi, dki = torch.ops.msa.indexer_kl_backward(m(lse[:, :2]), m(b.qi), m(b.ki_cache), m(b.q), m(b.k_cache), m(lse),
                                                 *(m(t) for t in b.paged()), None, "dense", 1, 0, "per_kv_head",
                                                 None, None)
    assert dqi.shape == b.qi.shape and dki.shape == b.ki_cache.shape


class TrainStep(torch.nn.Module):
    """Sparse attention over projected queries plus the indexer's KL, as one loss."""

    def __init__(self, D):
        super().__init__()
        self.wq = torch.nn.Linear(D, D, bias=False)

    def forward(self, q, k, v, qi, ki, block_table, kv_len, cu_q, idx):
        qp = self.wq(q)
        out, lse = torch.ops.msa.sparse_block_attention(qp, k, v, block_table, kv_len, cu_q, idx, 1, idx.shape[0],
                                                        "per_kv_head", None)
        kl = torch.ops.msa.indexer_kl(qi, ki, qp.detach(), k.detach(), lse, block_table, kv_len, cu_q, idx, "sparse",
                                      1, idx.shape[0], "per_kv_head", None, None)
        return out.pow(2).mean() + kl.mean()


def test_training_step_compiles_fullgraph_and_matches_eager(gen, device):
    b, idx = _batch(gen, device)
    torch.manual_seed(0)
    model = TrainStep(b.q.shape[-1]).to(device)
    results = []
    for compiled in (False, True):
        model.zero_grad()
        k, v, qi, ki = _leaves(b.k_cache, b.v_cache, b.qi, b.ki_cache)
        fn = torch.compile(model, fullgraph=True, backend="aot_eager") if compiled else model
        loss = fn(b.q, k, v, qi, ki, *b.paged(), idx)
        loss.backward()
        results.append([loss.detach(), model.wq.weight.grad.clone(), k.grad, v.grad, qi.grad, ki.grad])
    for a, w in zip(*results):
        assert torch.allclose(a, w, rtol=1e-5, atol=1e-6)
