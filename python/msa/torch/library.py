"""msa's ops as `torch.ops.msa.*` custom ops (torch >= 2.4), with fake kernels.

Each op takes every argument positionally, in the order of the msa function of the same
name (required tensors, then its keyword arguments without `backend` and outputs), with
`NQ` always given (the caller counts it outside the traced region: MSAWrapper.plan does).
The fake kernels give the outputs' shapes and dtypes, so `torch.compile(fullgraph=True)`
traces a call without a graph break. `kv_append` mutates its caches and returns nothing.

The attention ops differentiate (to q, k_cache, v_cache) through the backward ops, and
`msa::indexer_kl` (to qi and ki_cache), all defined in msa.torch.library_training. The
selection ops are not differentiated: their outputs never require grad. `kv_append`, an
in-place cache write, refuses inputs that require grad (with grad mode on) with a
RuntimeError at the call.

With older torch (no `torch.library.custom_op`) nothing is registered: HAS_TORCH_LIBRARY
is False and STATUS says why; the plain `msa.*` functions work on any torch.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

import msa
from msa.torch import library_training

MIN_TORCH = (2, 4)
NAMESPACE = "msa"
OPS = ("indexer_score", "block_topk", "indexer_topk", "sparse_block_attention", "dense_attention",
       "patch_attention_3d", "kv_append", "sparse_block_attention_backward", "dense_attention_backward",
       "patch_attention_3d_backward", "indexer_kl", "indexer_kl_backward")
NOT_DIFFERENTIATED = ("indexer_score", "block_topk", "indexer_topk")  # selection: outputs without grad
REFUSES_GRAD = ("kv_append",)

HAS_TORCH_LIBRARY = False
STATUS = "not registered yet"
_opdefs = []  # the CustomOpDef objects (kept alive with their registrations)
_guard_lib = None  # the torch.library.Library holding the selection ops' and kv_append's autograd kernels


def torch_version():
    """(major, minor) of the torch imported."""
    parts = torch.__version__.split("+")[0].split(".")[:2]
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts)


def _attention_fake(q):
    return q.new_empty(q.shape), q.new_empty((q.shape[0], q.shape[1]), dtype=torch.float32)


def _define_selection_ops(custom_op, register_fake):
    @custom_op("msa::indexer_score", mutates_args=())
    def indexer_score(qi: Tensor, ki_cache: Tensor, block_table: Tensor, kv_len: Tensor, cu_q: Tensor,
                      ki_scale: Optional[Tensor], Qb: int, NQ: int, mode: str, scale: Optional[float],
                      pool: str) -> Tensor:
        return msa.indexer_score(qi, ki_cache, block_table, kv_len, cu_q, ki_scale=ki_scale, Qb=Qb, NQ=NQ,
                                 mode=mode, scale=scale, pool=pool)

    @register_fake("msa::indexer_score")
    def _(qi, ki_cache, block_table, kv_len, cu_q, ki_scale, Qb, NQ, mode, scale, pool):
        return qi.new_empty((NQ, qi.shape[1], block_table.shape[1]), dtype=torch.float32)

    @custom_op("msa::block_topk", mutates_args=())
    def block_topk(block_score: Tensor, kv_len: Tensor, cu_q: Tensor, Qb: int, NQ: int, Bs: int, k: int,
                   n_sink: int, n_local: int) -> Tuple[Tensor, Tensor]:
        return msa.block_topk(block_score, kv_len, cu_q, Qb=Qb, NQ=NQ, Bs=Bs, k=k, n_sink=n_sink, n_local=n_local)

    @register_fake("msa::block_topk")
    def _(block_score, kv_len, cu_q, Qb, NQ, Bs, k, n_sink, n_local):
        Hs = block_score.shape[1]
        return (block_score.new_empty((NQ, Hs, k), dtype=torch.int32),
                block_score.new_empty((NQ, Hs), dtype=torch.int32))

    @custom_op("msa::indexer_topk", mutates_args=())
    def indexer_topk(qi: Tensor, ki_cache: Tensor, block_table: Tensor, kv_len: Tensor, cu_q: Tensor,
                     ki_scale: Optional[Tensor], Qb: int, NQ: int, mode: str, scale: Optional[float], pool: str,
                     k: int, n_sink: int, n_local: int) -> Tuple[Tensor, Tensor]:
        return msa.indexer_topk(qi, ki_cache, block_table, kv_len, cu_q, ki_scale=ki_scale, Qb=Qb, NQ=NQ, mode=mode,
                                scale=scale, pool=pool, k=k, n_sink=n_sink, n_local=n_local)

    @register_fake("msa::indexer_topk")
    def _(qi, ki_cache, block_table, kv_len, cu_q, ki_scale, Qb, NQ, mode, scale, pool, k, n_sink, n_local):
        Hi = qi.shape[1]
        return qi.new_empty((NQ, Hi, k), dtype=torch.int32), qi.new_empty((NQ, Hi), dtype=torch.int32)

    return [indexer_score, block_topk, indexer_topk]


def _define_attention_ops(custom_op, register_fake):
    @custom_op("msa::sparse_block_attention", mutates_args=())
    def sparse_block_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor, kv_len: Tensor,
                               cu_q: Tensor, block_idx: Tensor, Qb: int, NQ: int, mode: str,
                               scale: Optional[float]) -> Tuple[Tensor, Tensor]:
        return msa.sparse_block_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, Qb=Qb, NQ=NQ,
                                          mode=mode, scale=scale)

    @register_fake("msa::sparse_block_attention")
    def _(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, Qb, NQ, mode, scale):
        return _attention_fake(q)

    @custom_op("msa::dense_attention", mutates_args=())
    def dense_attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor, kv_len: Tensor,
                        cu_q: Tensor, scale: Optional[float]) -> Tuple[Tensor, Tensor]:
        return msa.dense_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, scale=scale)

    @register_fake("msa::dense_attention")
    def _(q, k_cache, v_cache, block_table, kv_len, cu_q, scale):
        return _attention_fake(q)

    @custom_op("msa::patch_attention_3d", mutates_args=())
    def patch_attention_3d(q: Tensor, k: Tensor, v: Tensor, items: Tensor, window: int,
                           scale: Optional[float]) -> Tuple[Tensor, Tensor]:
        return msa.patch_attention_3d(q, k, v, items, window=window, scale=scale)

    @register_fake("msa::patch_attention_3d")
    def _(q, k, v, items, window, scale):
        return _attention_fake(q)

    return [sparse_block_attention, dense_attention, patch_attention_3d]


def _define_cache_ops(custom_op, register_fake):
    @custom_op("msa::kv_append", mutates_args=("k_cache", "v_cache", "ki_cache", "ki_scale"))
    def kv_append(k: Tensor, v: Tensor, block_table: Tensor, kv_len: Tensor, cu_q: Tensor, k_cache: Tensor,
                  v_cache: Tensor, ki: Optional[Tensor], ki_cache: Optional[Tensor],
                  ki_scale: Optional[Tensor]) -> None:
        msa.kv_append(k, v, block_table, kv_len, cu_q, k_cache, v_cache, ki=ki, ki_cache=ki_cache, ki_scale=ki_scale)

    @register_fake("msa::kv_append")
    def _(k, v, block_table, kv_len, cu_q, k_cache, v_cache, ki, ki_cache, ki_scale):
        return None

    return [kv_append]


def _below_autograd_kernel(name, refuse):
    """An autograd kernel that runs the op below autograd (outputs without grad); with
    `refuse`, inputs needing grad (in grad mode) are an error naming the op."""
    op = getattr(getattr(torch.ops, NAMESPACE), name).default
    below = torch._C._after_autograd_keyset

    def kernel(keyset, *args, **kwargs):
        if refuse and torch.is_grad_enabled() and any(isinstance(a, Tensor) and a.requires_grad for a in args):
            raise RuntimeError(f"msa::{name}: an input requires grad, and {name} (an in-place cache write) has no "
                               "backward: call it under torch.no_grad() or pass detached tensors")
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & below, *args, **kwargs)

    return kernel


def _guard_autograd():
    """Puts the below-autograd kernels of the ops without a formula on the CPU and CUDA
    autograd keys."""
    global _guard_lib
    _guard_lib = torch.library.Library(NAMESPACE, "IMPL")
    for name in NOT_DIFFERENTIATED + REFUSES_GRAD:
        kernel = _below_autograd_kernel(name, refuse=name in REFUSES_GRAD)
        for key in ("AutogradCPU", "AutogradCUDA"):
            _guard_lib.impl(name, kernel, key, with_keyset=True)


def register():
    """Registers torch.ops.msa.* once; returns HAS_TORCH_LIBRARY. Raises what torch raises
    when defining an op fails."""
    global HAS_TORCH_LIBRARY, STATUS
    if HAS_TORCH_LIBRARY:
        return True
    if torch_version() < MIN_TORCH or not hasattr(torch.library, "custom_op"):
        STATUS = (f"torch {torch.__version__} has no torch.library.custom_op (needs torch >= "
                  f"{MIN_TORCH[0]}.{MIN_TORCH[1]}): torch.ops.msa is not registered; the msa.* functions work")
        return False
    custom_op, register_fake = torch.library.custom_op, torch.library.register_fake
    _opdefs.extend(_define_selection_ops(custom_op, register_fake))
    attention = _define_attention_ops(custom_op, register_fake)
    _opdefs.extend(attention)
    _opdefs.extend(_define_cache_ops(custom_op, register_fake))
    names = ("sparse_block_attention", "dense_attention", "patch_attention_3d")
    _opdefs.extend(library_training.define(custom_op, register_fake, dict(zip(names, attention))))
    HAS_TORCH_LIBRARY = True
    STATUS = f"torch.ops.msa registered (torch {torch.__version__})"
    try:
        _guard_autograd()
    except Exception as e:  # the ops work; grad inputs then fail only at backward (no formula)
        STATUS += f"; no autograd kernels for the selection ops and kv_append ({e!r})"
    return True
