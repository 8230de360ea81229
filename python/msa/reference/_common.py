"""Constants and argument checks shared by the modules of msa.reference."""

import math
from typing import List, Optional

import torch

F64 = torch.float64
NEG_INF = -math.inf


def _require(ok: bool, arg: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{arg}: {message}")


def _ints(t) -> List[int]:
    """An index tensor (or list) as a list of Python ints."""
    return [int(x) for x in (t.tolist() if isinstance(t, torch.Tensor) else t)]


def _resolve_scale(scale: Optional[float], dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(dim)
    _require(math.isfinite(scale) and scale > 0, "scale", f"must be a finite float > 0, got {scale}")
    return float(scale)


def _check_mode(mode: str) -> bool:
    """True for shared mode, False for per_kv_head."""
    _require(mode in ("per_kv_head", "shared"), "mode", f"must be per_kv_head or shared, got {mode!r}")
    return mode == "shared"
