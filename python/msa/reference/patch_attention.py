"""patch_attention_3d: the ViT's windowed, bidirectional attention over patches."""

from typing import List, Tuple

import torch

from ._common import F64, NEG_INF, _ints, _require, _resolve_scale
from .attention import _attend


def patch_windows(items, window: int = 4) -> List[range]:
    """The token ranges of the attention windows: items [n][3] = {grid_t, grid_h, grid_w}
    packed item by item; each item is cut into windows of `window` temporal patches of
    grid_h * grid_w tokens each (the last window may be shorter)."""
    _require(window >= 1, "window", f"must be >= 1, got {window}")
    windows, first = [], 0
    for i, (gt, gh, gw) in enumerate(_ints(row) for row in items):
        _require(gt >= 1 and gh >= 1 and gw >= 1, "items", f"items[{i}] = {(gt, gh, gw)} has a grid dim < 1")
        hw = gh * gw
        for w0 in range(0, gt, window):
            windows.append(range(first + w0 * hw, first + min(gt, w0 + window) * hw))
        first += gt * hw
    return windows


def patch_attention_3d(q, k, v, items, *, window=4, scale=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [N][H][D], lse [N][H]) float64: every patch attends, bidirectionally, to every
    patch of its window and to nothing else."""
    _require(q.dim() == 3, "q", f"must be [N][H][D], got {tuple(q.shape)}")
    _require(tuple(k.shape) == tuple(q.shape), "k", "must have q's shape")
    _require(tuple(v.shape) == tuple(q.shape), "v", "must have q's shape")
    N, H, D = q.shape
    windows = patch_windows(items, window)
    covered = sum(len(w) for w in windows)
    _require(covered == N, "items", f"describe {covered} tokens but q has N = {N}")
    scale = _resolve_scale(scale, D)
    q64, k64, v64 = q.to(F64), k.to(F64), v.to(F64)
    out = torch.zeros((N, H, D), dtype=F64)
    lse = torch.full((N, H), NEG_INF, dtype=F64)
    for w in windows:
        rows = slice(w.start, w.stop)
        for h in range(H):
            out[rows, h], lse[rows, h] = _attend(q64[rows, h], k64[rows, h], v64[rows, h], scale)
    return out, lse
