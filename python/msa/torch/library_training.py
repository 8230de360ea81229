"""The training half of `torch.ops.msa` (torch >= 2.4): the backward ops and the indexer's
KL loss as custom ops with fake kernels, and the autograd formulas of the attention ops
and of `indexer_kl`, so a training step through `torch.ops.msa` differentiates and traces
under `torch.compile(fullgraph=True)` (AOTAutograd sees the backward ops as graph nodes).

Positional arguments follow the msa function of the same name, as for the forward ops:
- `msa::sparse_block_attention_backward(dout, q, k_cache, v_cache, block_table, kv_len,
  cu_q, block_idx, out, lse, Qb, NQ, mode, scale) -> (dq, dk_cache, dv_cache)`, float32;
- `msa::dense_attention_backward(dout, q, k_cache, v_cache, block_table, kv_len, cu_q,
  out, lse, scale)`, `msa::patch_attention_3d_backward(dout, q, k, v, items, out, lse,
  window, scale)`: the same three gradients;
- `msa::indexer_kl(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx,
  stage, Qb, NQ, mode, scale, scale_i) -> kl` (`block_idx` None for stage "dense"),
  differentiable to `qi` and `ki_cache`; its backward is
  `msa::indexer_kl_backward(dkl, <the same arguments>) -> (dqi, dki_cache)`.
Gradients reach the inputs in their own dtypes; `lse` is not differentiable.
"""
from typing import Optional, Tuple

import torch
from torch import Tensor

import msa


def _grads_fake(q, k, v):
    f32 = torch.float32
    return q.new_empty(q.shape, dtype=f32), k.new_empty(k.shape, dtype=f32), v.new_empty(v.shape, dtype=f32)


def _cast(grad, like):
    return grad if grad.dtype == like.dtype else grad.to(like.dtype)


def _define_backward_ops(custom_op, register_fake):
    @custom_op("msa::sparse_block_attention_backward", mutates_args=())
    def sparse_block_attention_backward(dout: Tensor, q: Tensor, k_cache: Tensor, v_cache: Tensor,
                                        block_table: Tensor, kv_len: Tensor, cu_q: Tensor, block_idx: Tensor,
                                        out: Tensor, lse: Tensor, Qb: int, NQ: int, mode: str,
                                        scale: Optional[float]) -> Tuple[Tensor, Tensor, Tensor]:
        return msa.sparse_block_attention_backward(dout, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx,
                                                   out, lse, Qb=Qb, NQ=NQ, mode=mode, scale=scale)

    @register_fake("msa::sparse_block_attention_backward")
    def _(dout, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, out, lse, Qb, NQ, mode, scale):
        return _grads_fake(q, k_cache, v_cache)

    @custom_op("msa::dense_attention_backward", mutates_args=())
    def dense_attention_backward(dout: Tensor, q: Tensor, k_cache: Tensor, v_cache: Tensor, block_table: Tensor,
                                 kv_len: Tensor, cu_q: Tensor, out: Tensor, lse: Tensor,
                                 scale: Optional[float]) -> Tuple[Tensor, Tensor, Tensor]:
        return msa.dense_attention_backward(dout, q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse,
                                            scale=scale)

    @register_fake("msa::dense_attention_backward")
    def _(dout, q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse, scale):
        return _grads_fake(q, k_cache, v_cache)

    @custom_op("msa::patch_attention_3d_backward", mutates_args=())
    def patch_attention_3d_backward(dout: Tensor, q: Tensor, k: Tensor, v: Tensor, items: Tensor, out: Tensor,
                                    lse: Tensor, window: int,
                                    scale: Optional[float]) -> Tuple[Tensor, Tensor, Tensor]:
        return msa.patch_attention_3d_backward(dout, q, k, v, items, out, lse, window=window, scale=scale)

    @register_fake("msa::patch_attention_3d_backward")
    def _(dout, q, k, v, items, out, lse, window, scale):
        return _grads_fake(q, k, v)

    return [sparse_block_attention_backward, dense_attention_backward, patch_attention_3d_backward]


def _define_indexer_kl(custom_op, register_fake):
    @custom_op("msa::indexer_kl", mutates_args=())
    def indexer_kl(qi: Tensor, ki_cache: Tensor, q: Tensor, k_cache: Tensor, lse: Tensor, block_table: Tensor,
                   kv_len: Tensor, cu_q: Tensor, block_idx: Optional[Tensor], stage: str, Qb: int, NQ: int, mode: str,
                   scale: Optional[float], scale_i: Optional[float]) -> Tensor:
        kl, _, _ = msa.indexer_kl(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx=block_idx,
                                  stage=stage, Qb=Qb, NQ=NQ, mode=mode, scale=scale, scale_i=scale_i)
        return kl

    @register_fake("msa::indexer_kl")
    def _(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx, stage, Qb, NQ, mode, scale, scale_i):
        return qi.new_empty((qi.shape[0], qi.shape[1]), dtype=torch.float32)

    @custom_op("msa::indexer_kl_backward", mutates_args=())
    def indexer_kl_backward(dkl: Tensor, qi: Tensor, ki_cache: Tensor, q: Tensor, k_cache: Tensor, lse: Tensor,
                            block_table: Tensor, kv_len: Tensor, cu_q: Tensor, block_idx: Optional[Tensor], stage: str,
                            Qb: int, NQ: int, mode: str, scale: Optional[float],
                            scale_i: Optional[float]) -> Tuple[Tensor, Tensor]:
        _, dqi, dki = msa.indexer_kl(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx=block_idx,
                                     dkl=dkl, stage=stage, Qb=Qb, NQ=NQ, mode=mode, scale=scale, scale_i=scale_i)
        return dqi, dki

    @register_fake("msa::indexer_kl_backward")
    def _(dkl, qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx, stage, Qb, NQ, mode, scale,
          scale_i):
        f32 = torch.float32
        return qi.new_empty(qi.shape, dtype=f32), ki_cache.new_empty(ki_cache.shape, dtype=f32)

    return [indexer_kl, indexer_kl_backward]


def _attention_autograd(opdef, n_tensors, backward_op):
    """Registers the formula of an attention op whose first n_tensors inputs are tensors
    (q, k, v first) and whose remaining inputs are its parameters: (dq, dk, dv) from
    backward_op(dout, *tensors, out, lse, *params)."""

    def setup_context(ctx, inputs, output):
        out, lse = output
        ctx.mark_non_differentiable(lse)
        ctx.save_for_backward(*inputs[:n_tensors], out, lse)
        ctx.params = tuple(inputs[n_tensors:])

    def backward(ctx, dout, _dlse):
        saved = ctx.saved_tensors
        q, k, v = saved[:3]
        dq, dk, dv = backward_op(dout.contiguous().to(q.dtype), *saved, *ctx.params)
        return (_cast(dq, q), _cast(dk, k), _cast(dv, v)) + (None,) * (n_tensors - 3 + len(ctx.params))

    opdef.register_autograd(backward, setup_context=setup_context)


def _indexer_kl_autograd(opdef):
    def setup_context(ctx, inputs, output):
        tensors = [t for t in inputs[:8]]
        ctx.save_for_backward(*tensors)
        ctx.rest = tuple(inputs[8:])  # block_idx (a tensor or None) and the parameters

    def backward(ctx, dkl):
        qi, ki_cache = ctx.saved_tensors[:2]
        dqi, dki = torch.ops.msa.indexer_kl_backward(dkl.contiguous().float(), *ctx.saved_tensors, *ctx.rest)
        return (_cast(dqi, qi), _cast(dki, ki_cache)) + (None,) * (6 + len(ctx.rest))

    opdef.register_autograd(backward, setup_context=setup_context)


def define(custom_op, register_fake, forward_defs):
    """Defines the training ops and registers the forward attention ops' autograd.
    forward_defs maps "sparse_block_attention" etc. to their CustomOpDefs. Returns the new
    CustomOpDefs."""
    backward_defs = _define_backward_ops(custom_op, register_fake)
    kl_defs = _define_indexer_kl(custom_op, register_fake)
    ops = torch.ops.msa
    _attention_autograd(forward_defs["sparse_block_attention"], 7, ops.sparse_block_attention_backward)
    _attention_autograd(forward_defs["dense_attention"], 6, ops.dense_attention_backward)
    _attention_autograd(forward_defs["patch_attention_3d"], 4, ops.patch_attention_3d_backward)
    _indexer_kl_autograd(kl_defs[0])
    return backward_defs + kl_defs
