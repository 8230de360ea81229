"""torch.autograd.Functions over msa's ops: sparse, dense and patch attention (gradients
to q, k_cache, v_cache through the backward ops) and the indexer's KL loss (gradients to
qi and ki_cache only: the main branch is its detached target). Selection (indexer_score,
block_topk) is not differentiated. msa.sparse_block_attention and friends route here by
themselves when an input requires grad."""
import torch

from msa import _ops, _training


def _detached(*ts):
    return tuple(t.detach() if isinstance(t, torch.Tensor) else t for t in ts)


def _cast(grad, like):
    return grad if grad.dtype == like.dtype else grad.to(like.dtype)


class SparseBlockAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, Qb, NQ, mode, scale, backend):
        out, lse = _ops.sparse_block_attention(*_detached(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx),
                                               Qb=Qb, NQ=NQ, mode=mode, scale=scale, backend=backend)
        ctx.save_for_backward(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, out, lse)
        ctx.params = dict(Qb=Qb, NQ=NQ, mode=mode, scale=scale, backend=backend)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, out, lse = ctx.saved_tensors
        dq, dk, dv = _training.sparse_block_attention_backward(
            dout.contiguous().to(q.dtype), *_detached(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, out,
                                                      lse), **ctx.params)
        return (_cast(dq, q), _cast(dk, k_cache), _cast(dv, v_cache)) + (None,) * 9


class DenseAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k_cache, v_cache, block_table, kv_len, cu_q, scale, backend):
        out, lse = _ops.dense_attention(*_detached(q, k_cache, v_cache, block_table, kv_len, cu_q), scale=scale,
                                        backend=backend)
        ctx.save_for_backward(q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse)
        ctx.params = dict(scale=scale, backend=backend)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse = ctx.saved_tensors
        dq, dk, dv = _training.dense_attention_backward(
            dout.contiguous().to(q.dtype), *_detached(q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse),
            **ctx.params)
        return (_cast(dq, q), _cast(dk, k_cache), _cast(dv, v_cache)) + (None,) * 5


class PatchAttention3d(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, items, window, scale, backend):
        out, lse = _ops.patch_attention_3d(*_detached(q, k, v, items), window=window, scale=scale, backend=backend)
        ctx.save_for_backward(q, k, v, items, out, lse)
        ctx.params = dict(window=window, scale=scale, backend=backend)
        ctx.mark_non_differentiable(lse)
        return out, lse

    @staticmethod
    def backward(ctx, dout, _dlse):
        q, k, v, items, out, lse = ctx.saved_tensors
        dq, dk, dv = _training.patch_attention_3d_backward(dout.contiguous().to(q.dtype),
                                                           *_detached(q, k, v, items, out, lse), **ctx.params)
        return (_cast(dq, q), _cast(dk, k), _cast(dv, v)) + (None,) * 4


class IndexerKl(torch.autograd.Function):
    """kl [T][Hs]; its backward runs indexer_kl again with the incoming gradient as dkl
    (the op's gradients are those of sum(dkl * kl))."""

    @staticmethod
    def forward(ctx, qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx, stage, Qb, NQ, mode, scale,
                scale_i, backend):
        args = _detached(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q)
        params = dict(block_idx=None if block_idx is None else block_idx.detach(), stage=stage, Qb=Qb, NQ=NQ,
                      mode=mode, scale=scale, scale_i=scale_i, backend=backend)
        kl, _, _ = _training.indexer_kl(*args, **params)
        ctx.save_for_backward(*args)
        ctx.params = params
        return kl

    @staticmethod
    def backward(ctx, dkl):
        qi, ki_cache = ctx.saved_tensors[:2]
        _, dqi, dki = _training.indexer_kl(*ctx.saved_tensors, dkl=dkl.contiguous().float(), **ctx.params)
        return (_cast(dqi, qi), _cast(dki, ki_cache)) + (None,) * 14


def indexer_kl(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, *, block_idx=None, stage="sparse", Qb=1,
               NQ=None, mode="per_kv_head", scale=None, scale_i=None, backend=None):
    """The indexer's KL loss kl [T][Hs] as a differentiable torch value (to qi and ki_cache)."""
    if NQ is None and block_idx is not None:
        NQ = block_idx.shape[0]
    return IndexerKl.apply(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx, stage, Qb, NQ, mode,
                           scale, scale_i, backend)
