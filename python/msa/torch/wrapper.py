"""MSAWrapper: plan once per step (host work), run once per layer (graph-safe)."""
import torch

import msa
from msa import _C
from msa.torch.buffers import StepBuffers, required_bytes

MODES = {"per_kv_head", "shared"}
POOLS = {"max", "lse"}


def _fail(arg, what):
    raise ValueError(f"MSAWrapper.plan: argument '{arg}': {what}")


def _host_i32(t, arg):
    """A contiguous int32 CPU copy of an index tensor (waits for a CUDA tensor)."""
    t = torch.as_tensor(t)
    if t.dtype not in (torch.int32, torch.int64):
        _fail(arg, f"must be an int32 index tensor, got {t.dtype}")
    return t.detach().to("cpu", torch.int32).contiguous()


def min_k(Qb, Bs, n_sink, n_local):
    """The smallest k block_topk takes (docs/spec.md, "Op: block_topk")."""
    return n_sink + (n_local - 1 + max(1.0, Qb / Bs) if n_local > 0 else 0)


def check_batch(block_table, kv_len, cu_q, Bs):
    """Checks the host copies of a step's lengths (docs/spec.md, varlen packing)."""
    if block_table.dim() != 2:
        _fail("block_table", f"must be [B][max_blocks], got {tuple(block_table.shape)}")
    B = block_table.shape[0]
    if tuple(kv_len.shape) != (B,):
        _fail("kv_len", f"must be [{B}], got {tuple(kv_len.shape)}")
    if tuple(cu_q.shape) != (B + 1,) or int(cu_q[0]) != 0:
        _fail("cu_q", f"must be [{B + 1}] prefix sums starting at 0, got {cu_q.tolist()}")
    q_len = cu_q[1:] - cu_q[:-1]
    if bool((q_len < 0).any()) or bool((q_len > kv_len).any()):
        _fail("cu_q", "needs 0 <= q_len[b] <= kv_len[b]")
    if B and int(kv_len.max()) > block_table.shape[1] * Bs:
        _fail("kv_len", f"exceeds max_blocks * Bs = {block_table.shape[1] * Bs}")


class MSAWrapper:
    """FlashInfer-style driver of one MSA attention step.

    plan() once per step does the host work: it checks the batch, counts NQ on host
    copies of cu_q and kv_len, copies block_table, kv_len and cu_q into device tensors of
    its own and gets the step's outputs (block_score, block_idx, block_cnt, out, lse) from
    the workspace tensor given (uint8, on the device) or from torch. A plan with the same
    sizes as the last one reuses the same tensors, so a CUDA graph captured around run()
    replays correctly after the next plan().

    run() once per layer calls msa.indexer_topk then msa.sparse_block_attention with NQ
    and every output given: no allocation, no synchronisation, capturable. Its `out` is
    the planned tensor (overwritten by the next run) unless `out=` is given.
    """

    def __init__(self, workspace=None):
        self._buffers = StepBuffers(workspace)
        self._index = StepBuffers()  # the device copies of block_table, kv_len, cu_q
        self.planned = False

    @staticmethod
    def workspace_bytes(*, T, NQ, B, max_blocks, Hq, Hi, D, k, dtype):
        """Bytes of workspace a plan of these sizes carves."""
        return required_bytes(MSAWrapper._specs(T, NQ, max_blocks, Hq, Hi, D, k, dtype))

    @staticmethod
    def _specs(T, NQ, max_blocks, Hq, Hi, D, k, dtype):
        return {"block_score": ((NQ, Hi, max_blocks), torch.float32), "block_idx": ((NQ, Hi, k), torch.int32),
                "block_cnt": ((NQ, Hi), torch.int32), "out": ((T, Hq, D), dtype), "lse": ((T, Hq), torch.float32)}

    def plan(self, block_table, kv_len, cu_q, *, Hq, Hkv, Hi, D, Di, Bs=128, Qb=1, k=16, n_sink=0, n_local=1,
             mode="per_kv_head", pool="max", scale=None, scale_i=None, dtype=torch.bfloat16, device=None):
        """Prepares a step; see the class docstring. Waits for CUDA inputs (host copies)."""
        self._check_config(Hq, Hkv, Hi, Bs, Qb, k, n_sink, n_local, mode, pool)
        device = torch.device(device) if device is not None else torch.as_tensor(block_table).device
        bt_h, kl_h, cu_h = (_host_i32(block_table, "block_table"), _host_i32(kv_len, "kv_len"),
                            _host_i32(cu_q, "cu_q"))
        check_batch(bt_h, kl_h, cu_h, Bs)
        B, max_blocks = bt_h.shape
        T = int(cu_h[-1])
        NQ = T if Qb == 1 else _C.count_query_blocks(cu_h, kl_h, Qb)
        self.Hq, self.Hkv, self.Hi, self.D, self.Di, self.Bs = Hq, Hkv, Hi, D, Di, Bs
        self.Qb, self.k, self.n_sink, self.n_local, self.mode, self.pool = Qb, k, n_sink, n_local, mode, pool
        self.scale, self.scale_i, self.dtype, self.device = scale, scale_i, dtype, device
        self.B, self.T, self.NQ, self.max_blocks = B, T, NQ, max_blocks
        self._copy_index(bt_h, kl_h, cu_h, device)
        t = self._buffers.get(self._specs(T, NQ, max_blocks, Hq, Hi, D, k, dtype), device)
        self.block_score, self.block_idx, self.block_cnt = t["block_score"], t["block_idx"], t["block_cnt"]
        self.out, self.lse = t["out"], t["lse"]
        self.planned = True
        return self

    @staticmethod
    def _check_config(Hq, Hkv, Hi, Bs, Qb, k, n_sink, n_local, mode, pool):
        if Hkv < 1 or Hq < 1 or Hq % Hkv:
            _fail("Hq", f"must be a positive multiple of Hkv = {Hkv}, got {Hq}")
        if mode not in MODES:
            _fail("mode", f"must be one of {sorted(MODES)}, got {mode!r}")
        if pool not in POOLS:
            _fail("pool", f"must be one of {sorted(POOLS)}, got {pool!r}")
        want_hi = Hkv if mode == "per_kv_head" else 1
        if Hi != want_hi:
            _fail("Hi", f"must be {want_hi} in {mode} mode, got {Hi}")
        if Qb < 1 or Qb > 128 or Qb & (Qb - 1):
            _fail("Qb", f"must be 1 or a power of two up to 128, got {Qb}")
        if Bs < 1:
            _fail("Bs", f"must be >= 1, got {Bs}")
        if k < 1 or k < min_k(Qb, Bs, n_sink, n_local):
            _fail("k", f"must be >= max(1, {min_k(Qb, Bs, n_sink, n_local)}) (n_sink, n_local, Qb/Bs), got {k}")

    def _copy_index(self, bt_h, kl_h, cu_h, device):
        specs = {"block_table": (tuple(bt_h.shape), torch.int32), "kv_len": (tuple(kl_h.shape), torch.int32),
                 "cu_q": (tuple(cu_h.shape), torch.int32)}
        t = self._index.get(specs, device)
        for name, host in (("block_table", bt_h), ("kv_len", kl_h), ("cu_q", cu_h)):
            t[name].copy_(host)
        self.block_table, self.kv_len, self.cu_q = t["block_table"], t["kv_len"], t["cu_q"]

    def _check_run(self, q, qi, k_cache, v_cache, ki_cache):
        if not self.planned:
            raise RuntimeError("MSAWrapper.run: call plan() first")
        want = {"q": (q, (self.T, self.Hq, self.D)), "qi": (qi, (self.T, self.Hi, self.Di))}
        for name, (t, shape) in want.items():
            if tuple(t.shape) != shape:
                raise ValueError(f"MSAWrapper.run: argument '{name}': must be {list(shape)} as planned, "
                                 f"got {list(t.shape)}")
        if tuple(k_cache.shape[1:]) != (self.Hkv, self.Bs, self.D):
            raise ValueError(f"MSAWrapper.run: argument 'k_cache': must be [P][{self.Hkv}][{self.Bs}][{self.D}], "
                             f"got {list(k_cache.shape)}")
        if ki_cache.dim() != 3 or ki_cache.shape[1] != self.Bs:
            raise ValueError(f"MSAWrapper.run: argument 'ki_cache': must be [P][{self.Bs}][.], "
                             f"got {list(ki_cache.shape)}")
        if q.dtype != self.dtype or q.device != self.device:
            raise ValueError(f"MSAWrapper.run: argument 'q': must be {self.dtype} on {self.device} as planned, "
                             f"got {q.dtype} on {q.device}")

    def select(self, qi, ki_cache, ki_scale=None):
        """indexer_topk into the planned block_score, block_idx, block_cnt; returns block_idx."""
        msa.indexer_topk(qi, ki_cache, self.block_table, self.kv_len, self.cu_q, ki_scale=ki_scale, Qb=self.Qb,
                         NQ=self.NQ, mode=self.mode, scale=self.scale_i, pool=self.pool, k=self.k,
                         n_sink=self.n_sink, n_local=self.n_local, block_score=self.block_score,
                         block_idx=self.block_idx, block_cnt=self.block_cnt)
        return self.block_idx

    def attend(self, q, k_cache, v_cache, block_idx=None, *, out=None, lse=None):
        """sparse_block_attention over block_idx (default: the planned one); returns (out, lse)."""
        out = self.out if out is None else out
        lse = self.lse if lse is None else lse
        msa.sparse_block_attention(q, k_cache, v_cache, self.block_table, self.kv_len, self.cu_q,
                                   self.block_idx if block_idx is None else block_idx, Qb=self.Qb, NQ=self.NQ,
                                   mode=self.mode, scale=self.scale, out=out, lse=lse)
        return out, lse

    def run(self, q, qi, k_cache, v_cache, ki_cache, ki_scale=None, *, out=None, lse=None, return_lse=False):
        """One MSA layer's attention: out [T][Hq][D] (and lse [T][Hq] with return_lse)."""
        self._check_run(q, qi, k_cache, v_cache, ki_cache)
        self.select(qi, ki_cache, ki_scale)
        out, lse = self.attend(q, k_cache, v_cache, out=out, lse=lse)
        return (out, lse) if return_lse else out

    def run_dense(self, q, k_cache, v_cache, *, out=None, lse=None, return_lse=False):
        """Dense causal attention over the planned batch (M3's first layers), into the planned out."""
        out = self.out if out is None else out
        lse = self.lse if lse is None else lse
        msa.dense_attention(q, k_cache, v_cache, self.block_table, self.kv_len, self.cu_q, scale=self.scale,
                            out=out, lse=lse)
        return (out, lse) if return_lse else out
