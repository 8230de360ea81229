"""SparseAttention: one MSA attention layer as an nn.Module (no parameters: the
projections belong to the model; see examples/hf_decoder_layer.py)."""
import torch
from torch import nn

import msa
from msa.torch import library


def _heads(x, H, Dh):
    """x as [T][H][Dh] (a [T][H*Dh] projection output is viewed, not copied)."""
    return x.view(x.shape[0], H, Dh) if x.dim() == 2 else x


class SparseAttention(nn.Module):
    """kv_append -> indexer_topk -> sparse_block_attention over a PagedKVCache.

    forward(q, k, v, qi, ki, cache, cu_q=None) takes this step's q [T][Hq][D], k, v
    [T][Hkv][D], qi [T][Hi][Di], ki [T][Di] (or each flattened to [T][H*Dh]) after the
    cache's begin_step, writes k, v, ki into layer `layer_idx` of the cache and returns
    out in q's shape. NQ comes from the cache's host lengths, so a call does no host
    round trip and can be captured in a CUDA graph. With `wrapper` (a planned
    MSAWrapper) the selection and attention run through wrapper.run.

    use_torch_ops: call torch.ops.msa.* (traceable by torch.compile) instead of the msa.*
    functions; None picks them when they are registered.
    """

    def __init__(self, Hq, Hkv, D, Hi, Di, *, k=16, n_sink=0, n_local=1, Qb=1, Bs=128, mode="per_kv_head",
                 pool="max", scale=None, scale_i=None, layer_idx=0, use_torch_ops=None):
        super().__init__()
        self.Hq, self.Hkv, self.D, self.Hi, self.Di = Hq, Hkv, D, Hi, Di
        self.k, self.n_sink, self.n_local, self.Qb, self.Bs = k, n_sink, n_local, Qb, Bs
        self.mode, self.pool, self.scale, self.scale_i, self.layer_idx = mode, pool, scale, scale_i, layer_idx
        self.use_torch_ops = library.HAS_TORCH_LIBRARY if use_torch_ops is None else use_torch_ops
        if self.use_torch_ops and not library.HAS_TORCH_LIBRARY:
            raise ValueError(f"SparseAttention: use_torch_ops=True but {library.STATUS}")

    def extra_repr(self):
        return (f"Hq={self.Hq}, Hkv={self.Hkv}, D={self.D}, Hi={self.Hi}, Di={self.Di}, k={self.k}, "
                f"n_sink={self.n_sink}, n_local={self.n_local}, Qb={self.Qb}, Bs={self.Bs}, mode={self.mode}")

    def forward(self, q, k, v, qi, ki, cache, cu_q=None, *, wrapper=None):
        shape = q.shape
        q, k, v = _heads(q, self.Hq, self.D), _heads(k, self.Hkv, self.D), _heads(v, self.Hkv, self.D)
        qi = _heads(qi, self.Hi, self.Di)
        cache.write(k, v, ki, layer=self.layer_idx, cu_q=cu_q, use_torch_ops=self.use_torch_ops)
        kc, vc, kic, kis = cache.layer(self.layer_idx)
        if wrapper is not None:
            out = wrapper.run(q, qi, kc, vc, kic, kis)
        else:
            out = self._attend(q, qi, kc, vc, kic, kis, cache, cache.cu_q if cu_q is None else cu_q)
        return out.view(shape)

    def _attend(self, q, qi, kc, vc, kic, kis, cache, cu_q):
        NQ = cache.query_blocks(self.Qb)
        bt, kl = cache.block_table, cache.kv_len
        if self.use_torch_ops:
            ops = torch.ops.msa
            idx, _ = ops.indexer_topk(qi, kic, bt, kl, cu_q, kis, self.Qb, NQ, self.mode, self.scale_i, self.pool,
                                      self.k, self.n_sink, self.n_local)
            out, _ = ops.sparse_block_attention(q, kc, vc, bt, kl, cu_q, idx, self.Qb, NQ, self.mode, self.scale)
            return out
        idx, _ = msa.indexer_topk(qi, kic, bt, kl, cu_q, ki_scale=kis, Qb=self.Qb, NQ=NQ, mode=self.mode,
                                  scale=self.scale_i, pool=self.pool, k=self.k, n_sink=self.n_sink,
                                  n_local=self.n_local)
        out, _ = msa.sparse_block_attention(q, kc, vc, bt, kl, cu_q, idx, Qb=self.Qb, NQ=NQ, mode=self.mode,
                                            scale=self.scale)
        return out
