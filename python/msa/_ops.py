"""One function per msa op (docs/ops-cli.md names, defaults and output order).

Each resolves the defaults (`NQ`, `scale`), creates the outputs not given as the first
tensor argument's type on its device, and calls msa._C, which reads every tensor in place
through DLPack. See docs/python.md.
"""
from msa import _C
from msa._tensors import F32, I32, check_no_grad, dim, target_of, wants_grad

_DEFAULT_SCALE = 0.0  # msa's "1/sqrt(head dim)"


def _scale(op, scale):
    if scale is None:
        return _DEFAULT_SCALE
    scale = float(scale)
    if not scale > 0.0 or scale == float("inf"):
        raise ValueError(f"{op}: argument 'scale': must be a finite float > 0 (None for 1/sqrt(head dim)), got {scale}")
    return scale


def _count_nq(op, target, cu_q, kv_len, Qb, T):
    """NQ of the batch: T at Qb = 1, else counted on the host (a copy for CUDA tensors)."""
    if Qb == 1:
        return T
    if target.is_torch and cu_q.device.type != "cpu":
        cu_q, kv_len = cu_q.cpu(), kv_len.cpu()
    return _C.count_query_blocks(cu_q, kv_len, Qb)


def _check_positive(op, name, value):
    if value < 1:
        raise ValueError(f"{op}: argument '{name}': must be >= 1, got {value}")


def indexer_score(qi, ki_cache, block_table, kv_len, cu_q, *, ki_scale=None, Qb=1, NQ=None, mode="per_kv_head",
                  scale=None, pool="max", block_score=None, backend=None):
    """Block scores [NQ][Hi][max_blocks] f32 of the index branch (docs/spec.md)."""
    op = "indexer_score"
    t = target_of(op, qi)
    if NQ is None:
        NQ = block_score.shape[0] if block_score is not None else _count_nq(op, t, cu_q, kv_len, Qb, dim(qi, 0))
    if block_score is None:
        block_score = t.empty((NQ, dim(qi, 1), dim(block_table, 1)), F32)
    _C.indexer_score(backend or "", t.stream, qi, ki_cache, ki_scale, block_table, kv_len, cu_q, Qb, NQ, mode,
                     _scale(op, scale), pool, block_score)
    return block_score


def block_topk(block_score, kv_len, cu_q, *, Qb=1, NQ=None, Bs=128, k=16, n_sink=0, n_local=1, block_idx=None,
               block_cnt=None, backend=None):
    """The top-k blocks per (query block, selection head): (block_idx, block_cnt)."""
    op = "block_topk"
    t = target_of(op, block_score)
    _check_positive(op, "k", k)
    if NQ is None:
        NQ = dim(block_score, 0)
    Hs = dim(block_score, 1)
    if block_idx is None:
        block_idx = t.empty((NQ, Hs, k), I32)
    if block_cnt is None:
        block_cnt = t.empty((NQ, Hs), I32)
    _C.block_topk(backend or "", t.stream, block_score, kv_len, cu_q, Qb, NQ, Bs, k, n_sink, n_local, block_idx,
                  block_cnt)
    return block_idx, block_cnt


def indexer_topk(qi, ki_cache, block_table, kv_len, cu_q, *, ki_scale=None, Qb=1, NQ=None, mode="per_kv_head",
                 scale=None, pool="max", k=16, n_sink=0, n_local=1, block_score=None, block_idx=None, block_cnt=None,
                 backend=None):
    """indexer_score then block_topk (Bs = ki_cache.shape[1]) in one call: (block_idx, block_cnt)."""
    op = "indexer_topk"
    t = target_of(op, qi)
    _check_positive(op, "k", k)
    if NQ is None:
        if block_score is not None:
            NQ = block_score.shape[0]
        elif block_idx is not None:
            NQ = block_idx.shape[0]
        else:
            NQ = _count_nq(op, t, cu_q, kv_len, Qb, dim(qi, 0))
    Hi = dim(qi, 1)
    if block_score is None:
        block_score = t.empty((NQ, Hi, dim(block_table, 1)), F32)
    if block_idx is None:
        block_idx = t.empty((NQ, Hi, k), I32)
    if block_cnt is None:
        block_cnt = t.empty((NQ, Hi), I32)
    _C.indexer_topk(backend or "", t.stream, qi, ki_cache, ki_scale, block_table, kv_len, cu_q, Qb, NQ, mode,
                    _scale(op, scale), pool, k, n_sink, n_local, block_score, block_idx, block_cnt)
    return block_idx, block_cnt


def _autograd(op, out, lse):
    """msa.torch.autograd, for a call whose inputs require grad (outputs are then its own)."""
    if out is not None or lse is not None:
        raise ValueError(f"{op}: out= and lse= cannot be given when an input requires grad")
    from msa.torch import autograd

    return autograd


def _attention_outputs(t, q, out, lse):
    if out is None:
        out = t.empty(tuple(q.shape), q.dtype)
    if lse is None:
        lse = t.empty((dim(q, 0), dim(q, 1)), F32)
    return out, lse


def sparse_block_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, *, Qb=1, NQ=None,
                           mode="per_kv_head", scale=None, out=None, lse=None, backend=None):
    """Attention over the selected KV blocks: (out [T][Hq][D], lse [T][Hq] f32)."""
    op = "sparse_block_attention"
    t = target_of(op, q)
    if wants_grad(t, q, k_cache, v_cache):
        return _autograd(op, out, lse).SparseBlockAttention.apply(q, k_cache, v_cache, block_table, kv_len, cu_q,
                                                                  block_idx, Qb, NQ, mode, scale, backend)
    if NQ is None:
        NQ = dim(block_idx, 0)
    out, lse = _attention_outputs(t, q, out, lse)
    _C.sparse_block_attention(backend or "", t.stream, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, Qb,
                              NQ, mode, _scale(op, scale), out, lse)
    return out, lse


def dense_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, *, scale=None, out=None, lse=None, backend=None):
    """Causal attention over the whole paged cache: (out, lse)."""
    op = "dense_attention"
    t = target_of(op, q)
    if wants_grad(t, q, k_cache, v_cache):
        return _autograd(op, out, lse).DenseAttention.apply(q, k_cache, v_cache, block_table, kv_len, cu_q, scale,
                                                            backend)
    out, lse = _attention_outputs(t, q, out, lse)
    _C.dense_attention(backend or "", t.stream, q, k_cache, v_cache, block_table, kv_len, cu_q, _scale(op, scale),
                       out, lse)
    return out, lse


def patch_attention_3d(q, k, v, items, *, window=4, scale=None, out=None, lse=None, backend=None):
    """The ViT's 3D attention within windows of `window` temporal patches: (out, lse)."""
    op = "patch_attention_3d"
    t = target_of(op, q)
    if wants_grad(t, q, k, v):
        return _autograd(op, out, lse).PatchAttention3d.apply(q, k, v, items, window, scale, backend)
    out, lse = _attention_outputs(t, q, out, lse)
    _C.patch_attention_3d(backend or "", t.stream, q, k, v, items, window, _scale(op, scale), out, lse)
    return out, lse


def kv_append(k, v, block_table, kv_len, cu_q, k_cache, v_cache, *, ki=None, ki_cache=None, ki_scale=None,
              backend=None):
    """Writes this step's keys and values into their cache slots, in place; returns the caches given."""
    op = "kv_append"
    t = target_of(op, k)
    check_no_grad(op, t, k, v, ki)
    _C.kv_append(backend or "", t.stream, k, v, ki, block_table, kv_len, cu_q, k_cache, v_cache, ki_cache, ki_scale)
    caches = (k_cache, v_cache)
    if ki_cache is not None:
        caches += (ki_cache,)
    if ki_scale is not None:
        caches += (ki_scale,)
    return caches


def matmul(x, w, *, bias=None, y=None, backend=None):
    """y = x @ w.T (+ bias)."""
    op = "matmul"
    t = target_of(op, x)
    check_no_grad(op, t, x, w, bias)
    if y is None:
        y = t.empty((dim(x, 0), dim(w, 0)), x.dtype)
    _C.matmul(backend or "", t.stream, x, w, bias, y)
    return y


def _same_shape_op(op, first, inputs, y):
    t = target_of(op, first)
    check_no_grad(op, t, *inputs)
    if y is None:
        y = t.empty(tuple(first.shape), first.dtype)
    return t, y


def rms_norm(x, w, *, eps=1e-6, kind="gemma", y=None, backend=None):
    t, y = _same_shape_op("rms_norm", x, (x, w), y)
    _C.rms_norm(backend or "", t.stream, x, w, eps, kind, y)
    return y


def layer_norm(x, w, *, b=None, eps=1e-6, y=None, backend=None):
    t, y = _same_shape_op("layer_norm", x, (x, w, b), y)
    _C.layer_norm(backend or "", t.stream, x, w, b, eps, y)
    return y


def rope(x, pos, *, rotary_dim=None, theta=1e4, y=None, backend=None):
    """Neox rotary embedding of the first rotary_dim dims (default: all); y=x works in place."""
    t, y = _same_shape_op("rope", x, (x,), y)
    _C.rope(backend or "", t.stream, x, pos, 0 if rotary_dim is None else rotary_dim, theta, y)
    return y


def rope_3d(x, pos, *, theta=1e4, y=None, backend=None):
    t, y = _same_shape_op("rope_3d", x, (x,), y)
    _C.rope_3d(backend or "", t.stream, x, pos, theta, y)
    return y


def swiglu(gate, up, *, y=None, backend=None):
    t, y = _same_shape_op("swiglu", gate, (gate, up), y)
    _C.swiglu(backend or "", t.stream, gate, up, y)
    return y


def gelu(x, *, y=None, backend=None):
    t, y = _same_shape_op("gelu", x, (x,), y)
    _C.gelu(backend or "", t.stream, x, y)
    return y


def add(a, b, *, y=None, backend=None):
    t, y = _same_shape_op("add", a, (a, b), y)
    _C.add(backend or "", t.stream, a, b, y)
    return y


def embedding(table, ids, *, y=None, backend=None):
    op = "embedding"
    t = target_of(op, table)
    check_no_grad(op, t, table)
    if y is None:
        y = t.empty((dim(ids, 0), dim(table, 1)), table.dtype)
    _C.embedding(backend or "", t.stream, table, ids, y)
    return y


def scatter_visual(tokens, vis, x, *, placeholder=0, backend=None):
    """Replaces, in place, the rows of x whose token is the placeholder by the rows of vis."""
    op = "scatter_visual"
    t = target_of(op, x)
    check_no_grad(op, t, vis, x)
    _C.scatter_visual(backend or "", t.stream, tokens, vis, x, placeholder)
    return x


def argmax(x, *, idx=None, backend=None):
    op = "argmax"
    t = target_of(op, x)
    if idx is None:
        idx = t.empty((dim(x, 0),), I32)
    _C.argmax(backend or "", t.stream, x, idx)
    return idx
