"""The supporting ops through the package against msa.reference, on every CPU-side backend."""
import pytest
import torch

import msa
import msa.reference as ref
from cases import assert_out_close
from conftest import as_framework

DTYPES = [("numpy", torch.float32), ("torch", torch.float32), ("torch", torch.bfloat16)]


def _close(got, want, dtype):
    got = torch.as_tensor(got).double()
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    assert not torch.isnan(got).any()
    assert (got - want).abs().max() <= tol * max(1.0, float(want.abs().max())), float((got - want).abs().max())


@pytest.mark.parametrize("framework,dtype", DTYPES)
def test_elementwise_and_norms(backend, gen, framework, dtype):
    x, y2, up = (torch.randn(6, 64, generator=gen).to(dtype) for _ in range(3))
    w, bias = torch.randn(64, generator=gen).to(dtype), torch.randn(64, generator=gen).to(dtype)
    X, Y2, UP, W, BIAS = as_framework(framework, x, y2, up, w, bias)
    _close(msa.add(X, Y2, backend=backend), ref.add(x, y2), dtype)
    _close(msa.gelu(X, backend=backend), ref.gelu(x), dtype)
    _close(msa.swiglu(X, UP, backend=backend), ref.swiglu(x, up), dtype)
    _close(msa.rms_norm(X, W, backend=backend), ref.rms_norm(x, w), dtype)
    _close(msa.rms_norm(X, W, kind="plain", eps=1e-5, backend=backend), ref.rms_norm(x, w, kind="plain", eps=1e-5), dtype)
    _close(msa.layer_norm(X, W, b=BIAS, backend=backend), ref.layer_norm(x, w, b=bias), dtype)


@pytest.mark.parametrize("framework,dtype", DTYPES)
def test_matmul(backend, gen, framework, dtype):
    x, w, b = torch.randn(5, 32, generator=gen).to(dtype), torch.randn(7, 32, generator=gen).to(dtype), torch.randn(7, generator=gen).to(dtype)
    X, W, B = as_framework(framework, x, w, b)
    _close(msa.matmul(X, W, bias=B, backend=backend), ref.matmul(x, w, bias=b), dtype)


@pytest.mark.parametrize("framework,dtype", DTYPES)
def test_rope_out_of_place_and_in_place(backend, gen, framework, dtype):
    x = torch.randn(5, 2, 64, generator=gen).to(dtype)
    pos = torch.tensor([0, 3, 9, 100, 4000], dtype=torch.int32)
    want = ref.rope(x, pos, rotary_dim=32)
    X, POS = as_framework(framework, x.clone(), pos)
    _close(msa.rope(X, POS, rotary_dim=32, backend=backend), want, dtype)
    y = msa.rope(X, POS, rotary_dim=32, y=X, backend=backend)
    assert y is X
    _close(X, want, dtype)


@pytest.mark.parametrize("framework,dtype", DTYPES)
def test_rope_3d(backend, gen, framework, dtype):
    x = torch.randn(4, 2, 80, generator=gen).to(dtype)
    pos = torch.tensor([[0, 0, 0], [1, 2, 3], [3, 0, 7], [2, 5, 1]], dtype=torch.int32)
    _close(msa.rope_3d(*as_framework(framework, x, pos), backend=backend), ref.rope_3d(x, pos), dtype)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_embedding_scatter_argmax(backend, gen, framework):
    table = torch.randn(10, 16, generator=gen)
    ids = torch.tensor([3, 0, 9, 3], dtype=torch.int32)
    T, I = as_framework(framework, table, ids)
    _close(msa.embedding(T, I, backend=backend), ref.embedding(table, ids), torch.float32)
    tokens = torch.tensor([5, 0, 0, 7, 0], dtype=torch.int32)
    vis, x = torch.randn(3, 16, generator=gen), torch.randn(5, 16, generator=gen)
    want = ref.scatter_visual(tokens, vis, x)
    TOK, VIS, X = as_framework(framework, tokens, vis, x.clone())
    assert msa.scatter_visual(TOK, VIS, X, backend=backend) is X
    _close(X, want, torch.float32)
    scores = torch.randn(4, 33, generator=gen)
    scores[1, :] = float("nan")
    scores[2, 5] = float("nan")
    got = msa.argmax(*as_framework(framework, scores), backend=backend)
    assert torch.equal(torch.as_tensor(got), ref.argmax(scores))


def test_outputs_keep_the_contract_dtype(backend, gen):
    x = torch.randn(4, 8, generator=gen).to(torch.bfloat16)
    assert msa.add(x, x, backend=backend).dtype == torch.bfloat16
    assert msa.argmax(x, backend=backend).dtype == torch.int32
    assert_out_close(msa.add(x, x, backend=backend).float()[None], (2 * x.double())[None], torch.bfloat16)
