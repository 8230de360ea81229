"""The supporting ops of the model around the attention: matmul, norms, rotary embeddings,
activations, embedding lookup, scatter_visual and argmax."""

import math

import torch

from ._common import F64, NEG_INF, _ints, _require


def matmul(x, w, *, bias=None) -> torch.Tensor:
    """y = x W^T (+ bias): x [..., K], w [N][K], bias [N]."""
    _require(w.dim() == 2 and x.shape[-1] == w.shape[1], "w", f"must be [N][K] with K = {x.shape[-1]}")
    y = x.to(F64) @ w.to(F64).T
    return y if bias is None else y + bias.to(F64)


def rms_norm(x, w, *, eps=1e-6, kind="gemma") -> torch.Tensor:
    """Over the last dim: x * rsqrt(mean(x^2) + eps) * (1 + w) (gemma, M3) or * w (plain)."""
    _require(kind in ("gemma", "plain"), "kind", f"must be gemma or plain, got {kind!r}")
    _require(math.isfinite(eps) and eps >= 0, "eps", f"must be finite and >= 0, got {eps}")
    x64, w64 = x.to(F64), w.to(F64)
    normed = x64 / torch.sqrt((x64 * x64).mean(dim=-1, keepdim=True) + eps)
    return normed * (1.0 + w64 if kind == "gemma" else w64)


def layer_norm(x, w, *, b=None, eps=1e-6) -> torch.Tensor:
    """Over the last dim: (x - mean) / sqrt(var + eps) * w (+ b), var biased (1/N)."""
    _require(math.isfinite(eps) and eps >= 0, "eps", f"must be finite and >= 0, got {eps}")
    x64 = x.to(F64)
    centered = x64 - x64.mean(dim=-1, keepdim=True)
    var = (centered * centered).mean(dim=-1, keepdim=True)
    y = centered / torch.sqrt(var + eps) * w.to(F64)
    return y if b is None else y + b.to(F64)


def _rotate_half(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Neox rotation of the first 2 * n dims of x [..., D] by angle [..., n]: the pair
    (j, j + n) becomes (x_j cos - x_{j+n} sin, x_{j+n} cos + x_j sin); the rest pass."""
    n = angle.shape[-1]
    x1, x2, rest = x[..., :n], x[..., n:2 * n], x[..., 2 * n:]
    cos, sin = torch.cos(angle), torch.sin(angle)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def rope(x, pos, *, rotary_dim=None, theta=1e4) -> torch.Tensor:
    """Neox rotary embedding of x [T][H][D] at positions pos [T]: the first rotary_dim
    dims (default D) rotate with inv_freq_j = theta^(-2j / rotary_dim); the rest pass."""
    _require(x.dim() == 3, "x", f"must be [T][H][D], got {tuple(x.shape)}")
    D = x.shape[2]
    rd = D if rotary_dim is None else rotary_dim
    _require(rd >= 2 and rd % 2 == 0 and rd <= D, "rotary_dim", f"must be even, >= 2 and <= D = {D}, got {rd}")
    _require(math.isfinite(theta) and theta > 0, "theta", f"must be finite and > 0, got {theta}")
    j = torch.arange(rd // 2, dtype=F64)
    inv_freq = theta ** (-2.0 * j / rd)
    angle = pos.to(F64)[:, None] * inv_freq[None, :]  # [T][rd/2]
    return _rotate_half(x.to(F64), angle[:, None, :])


def rope_3d(x, pos, *, theta=1e4) -> torch.Tensor:
    """The ViT's 3-axis rotary embedding of x [N][H][D] at pos [N][3] (t, h, w):
    a = 2 * floor(D / 6) dims per axis, inv_freq_j = theta^(-2j / a), frequency vector
    [t (a/2) | h (a/2) | w (a/2)] rotated neox-style over the first 3a dims."""
    _require(x.dim() == 3 and x.shape[2] >= 6, "x", f"must be [N][H][D] with D >= 6, got {tuple(x.shape)}")
    _require(pos.dim() == 2 and pos.shape[1] == 3, "pos", f"must be [N][3], got {tuple(pos.shape)}")
    _require(math.isfinite(theta) and theta > 0, "theta", f"must be finite and > 0, got {theta}")
    a = 2 * (x.shape[2] // 6)
    j = torch.arange(a // 2, dtype=F64)
    inv_freq = theta ** (-2.0 * j / a)
    p = pos.to(F64)
    angle = torch.cat([p[:, axis:axis + 1] * inv_freq[None, :] for axis in range(3)], dim=-1)  # [N][3a/2]
    return _rotate_half(x.to(F64), angle[:, None, :])


def swiglu(gate, up) -> torch.Tensor:
    """silu(gate) * up = gate / (1 + exp(-gate)) * up."""
    _require(tuple(up.shape) == tuple(gate.shape), "up", "must have gate's shape")
    g = gate.to(F64)
    return g / (1.0 + torch.exp(-g)) * up.to(F64)


def gelu(x) -> torch.Tensor:
    """The exact (erf) GELU: x / 2 * (1 + erf(x / sqrt(2)))."""
    x64 = x.to(F64)
    return 0.5 * x64 * (1.0 + torch.erf(x64 / math.sqrt(2.0)))


def add(a, b) -> torch.Tensor:
    """a + b, elementwise, same shapes."""
    _require(tuple(b.shape) == tuple(a.shape), "b", "must have a's shape")
    return a.to(F64) + b.to(F64)


def embedding(table, ids) -> torch.Tensor:
    """y[t] = table[ids[t]]; table [V][H], ids [T] in [0, V)."""
    V = table.shape[0]
    for t, i in enumerate(_ints(ids)):
        _require(0 <= i < V, "ids", f"ids[{t}] = {i} is outside the table's {V} rows")
    return table.to(F64)[ids.long()]


def scatter_visual(tokens, vis, x, *, placeholder=0) -> torch.Tensor:
    """A copy of x [T][H] whose rows with tokens[t] == placeholder take the rows of
    vis [Nv][H], in order. The placeholder count must equal Nv."""
    where = (tokens.long() == placeholder).nonzero().flatten()
    _require(where.numel() == vis.shape[0], "vis",
             f"has {vis.shape[0]} rows but tokens hold {where.numel()} placeholders (id {placeholder})")
    y = x.to(F64).clone()
    y[where] = vis.to(F64)
    return y


def argmax(x) -> torch.Tensor:
    """idx [M] int32: the first index of the largest value of each row of x [M][N].
    NaN is never the maximum; -0 == +0; an all-NaN row gives 0."""
    _require(x.dim() == 2 and x.shape[1] >= 1, "x", f"must be [M][N] with N >= 1, got {tuple(x.shape)}")
    x64 = x.to(F64)
    valid = ~torch.isnan(x64)
    best = x64.masked_fill(~valid, NEG_INF).amax(dim=1, keepdim=True)
    is_best = valid & (x64 == best)
    index = torch.arange(x.shape[1]).expand_as(x64)
    first = index.masked_fill(~is_best, x.shape[1]).amin(dim=1)
    return torch.where(first == x.shape[1], torch.zeros_like(first), first).to(torch.int32)
