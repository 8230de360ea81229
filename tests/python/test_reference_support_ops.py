"""msa.reference's supporting ops (norms, rotary embeddings, elementwise ops, matmul, embedding,
scatter_visual, argmax), against hand-worked values and torch's own ops."""
import math

import pytest
import torch

from msa import reference as ref
from reference_cases import INF, NAN, i32


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
