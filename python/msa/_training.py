"""The training ops (docs/training.md): attention backward passes and the indexer's KL
loss, with the tensor and parameter names of docs/ops-cli.md. Gradients are float32,
created as the first tensor argument's type on its device unless given."""
from msa import _C
from msa._ops import _scale
from msa._tensors import F32, dim, target_of


def _grads(t, like_q, like_k, dq, dk, dv):
    if dq is None:
        dq = t.empty(tuple(like_q.shape), F32)
    if dk is None:
        dk = t.empty(tuple(like_k.shape), F32)
    if dv is None:
        dv = t.empty(tuple(like_k.shape), F32)
    return dq, dk, dv


def sparse_block_attention_backward(dout, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, out, lse, *,
                                    Qb=1, NQ=None, mode="per_kv_head", scale=None, dq=None, dk_cache=None,
                                    dv_cache=None, backend=None):
    """Gradients of sparse_block_attention: (dq, dk_cache, dv_cache), float32."""
    op = "sparse_block_attention_backward"
    t = target_of(op, dout)
    if NQ is None:
        NQ = dim(block_idx, 0)
    dq, dk_cache, dv_cache = _grads(t, q, k_cache, dq, dk_cache, dv_cache)
    _C.sparse_block_attention_backward(backend or "", t.stream, dout, q, k_cache, v_cache, block_table, kv_len, cu_q,
                                       block_idx, out, lse, Qb, NQ, mode, _scale(op, scale), dq, dk_cache, dv_cache)
    return dq, dk_cache, dv_cache


def dense_attention_backward(dout, q, k_cache, v_cache, block_table, kv_len, cu_q, out, lse, *, scale=None, dq=None,
                             dk_cache=None, dv_cache=None, backend=None):
    """Gradients of dense_attention: (dq, dk_cache, dv_cache), float32."""
    op = "dense_attention_backward"
    t = target_of(op, dout)
    dq, dk_cache, dv_cache = _grads(t, q, k_cache, dq, dk_cache, dv_cache)
    _C.dense_attention_backward(backend or "", t.stream, dout, q, k_cache, v_cache, block_table, kv_len, cu_q, out,
                                lse, _scale(op, scale), dq, dk_cache, dv_cache)
    return dq, dk_cache, dv_cache


def patch_attention_3d_backward(dout, q, k, v, items, out, lse, *, window=4, scale=None, dq=None, dk=None, dv=None,
                                backend=None):
    """Gradients of patch_attention_3d: (dq, dk, dv), float32."""
    op = "patch_attention_3d_backward"
    t = target_of(op, dout)
    dq, dk, dv = _grads(t, q, k, dq, dk, dv)
    _C.patch_attention_3d_backward(backend or "", t.stream, dout, q, k, v, items, out, lse, window, _scale(op, scale),
                                   dq, dk, dv)
    return dq, dk, dv


def indexer_kl(qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, *, block_idx=None, dkl=None, stage="sparse",
               Qb=1, NQ=None, mode="per_kv_head", scale=None, scale_i=None, kl=None, dqi=None, dki_cache=None,
               backend=None):
    """KL(main branch || index branch) per query and selection head over the token sets of
    `stage`, with the gradients of sum(dkl * kl) to qi and ki_cache: (kl, dqi, dki_cache)."""
    op = "indexer_kl"
    t = target_of(op, qi)
    if NQ is None:
        NQ = dim(block_idx, 0) if block_idx is not None else 0
    Hs = dim(qi, 1)
    if kl is None:
        kl = t.empty((dim(qi, 0), Hs), F32)
    if dqi is None:
        dqi = t.empty(tuple(qi.shape), F32)
    if dki_cache is None:
        dki_cache = t.empty(tuple(ki_cache.shape), F32)
    _C.indexer_kl(backend or "", t.stream, qi, ki_cache, q, k_cache, lse, block_table, kv_len, cu_q, block_idx, dkl,
                  stage, Qb, NQ, mode, _scale(op, scale), _scale(op, scale_i), kl, dqi, dki_cache)
    return kl, dqi, dki_cache
