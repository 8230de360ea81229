"""PagedKVCache: msa's paged, block-major KV and indexer-key caches for B sequences, with
a page allocator and the step's block_table, kv_len and cu_q on the device."""
import torch

import msa
from msa import _C

KI_FORMATS = ("plain", "fp8", "fp8_scaled", "nvfp4")


def _fp8_dtype(fmt):
    dtype = getattr(torch, "float8_e4m3fn", None)
    if dtype is None:
        raise ValueError(f"PagedKVCache: argument 'ki_format': {fmt!r} needs torch.float8_e4m3fn "
                         f"(torch >= 2.1), this is torch {torch.__version__}")
    return dtype


def _ki_tensors(fmt, P, Bs, Di, dtype, device):
    """(ki_cache, ki_scale) of an indexer-key format (docs/spec.md, "Data types")."""
    if fmt == "plain":
        return torch.empty((P, Bs, Di), dtype=dtype, device=device), None
    if fmt in ("fp8", "fp8_scaled"):
        ki = torch.zeros((P, Bs, Di), dtype=torch.uint8, device=device).view(_fp8_dtype(fmt))
        scale = torch.ones((P, Bs), dtype=torch.float32, device=device) if fmt == "fp8_scaled" else None
        return ki, scale
    if fmt == "nvfp4":
        if Di % 16:
            raise ValueError(f"PagedKVCache: argument 'Di': NVFP4 keys need a multiple of 16, got {Di}")
        return (torch.zeros((P, Bs, Di // 2), dtype=torch.uint8, device=device),
                torch.zeros((P, Bs, Di // 16), dtype=torch.uint8, device=device))
    raise ValueError(f"PagedKVCache: argument 'ki_format': must be one of {KI_FORMATS}, got {fmt!r}")


class PagedKVCache:
    """Caches of `num_layers` layers sharing one page table.

    Per layer: k_caches[l], v_caches[l] [P][Hkv][Bs][D] and ki_caches[l] [P][Bs][Di]
    (ki_scales[l] for fp8_scaled and NVFP4 keys; None otherwise). Shared: block_table
    [B][max_blocks] int32 and kv_len [B] int32 on the device, their host mirrors, and the
    step's cu_q [B+1] int32 and positions [T] int32.

    A step: begin_step(q_lens) (host work: grows kv_len by the new tokens, as the spec's
    kv_len includes them, allocates pages, fills cu_q), then write() per layer (kv_append,
    graph-safe). append() does both for one layer. fill: a value every float cache slot
    starts with (NaN checks that unused slots never reach an output); None leaves them
    uninitialised.
    """

    def __init__(self, batch, max_tokens, *, Hkv, D, Di, Bs=128, num_layers=1, num_pages=None,
                 dtype=torch.bfloat16, ki_format="plain", device="cpu", fill=None, page_order=None):
        self.B, self.Hkv, self.D, self.Di, self.Bs = batch, Hkv, D, Di, Bs
        self.dtype, self.ki_format, self.device = dtype, ki_format, torch.device(device)
        self.max_blocks = -(-max_tokens // Bs)
        self.num_pages = batch * self.max_blocks if num_pages is None else num_pages
        self._make_caches(num_layers, fill)
        self._free = list(page_order) if page_order is not None else list(range(self.num_pages))
        self._table_host = torch.zeros((batch, self.max_blocks), dtype=torch.int32)
        self._pages = [[] for _ in range(batch)]
        self.kv_len_host = torch.zeros(batch, dtype=torch.int32)
        self.cu_q_host = torch.zeros(batch + 1, dtype=torch.int32)
        self.block_table = torch.zeros((batch, self.max_blocks), dtype=torch.int32, device=self.device)
        self.kv_len = torch.zeros(batch, dtype=torch.int32, device=self.device)
        self.cu_q = torch.zeros(batch + 1, dtype=torch.int32, device=self.device)
        self.positions = torch.zeros(0, dtype=torch.int32, device=self.device)
        self.T = 0

    def _make_caches(self, num_layers, fill):
        P, shape = self.num_pages, (self.num_pages, self.Hkv, self.Bs, self.D)
        self.k_caches, self.v_caches, self.ki_caches, self.ki_scales = [], [], [], []
        for _ in range(num_layers):
            k, v = (torch.empty(shape, dtype=self.dtype, device=self.device) for _ in range(2))
            ki, scale = _ki_tensors(self.ki_format, P, self.Bs, self.Di, self.dtype, self.device)
            if fill is not None:
                for t in (k, v) + ((ki,) if ki.is_floating_point() and ki.element_size() > 1 else ()):
                    t.fill_(fill)
            self.k_caches.append(k)
            self.v_caches.append(v)
            self.ki_caches.append(ki)
            self.ki_scales.append(scale)

    @property
    def num_layers(self):
        return len(self.k_caches)

    def layer(self, l):
        """(k_cache, v_cache, ki_cache, ki_scale) of layer l."""
        return self.k_caches[l], self.v_caches[l], self.ki_caches[l], self.ki_scales[l]

    # -- pages ---------------------------------------------------------------------------

    def free_pages(self):
        return len(self._free)

    def _grow(self, b, new_len):
        need = -(-new_len // self.Bs)
        if need > self.max_blocks:
            raise ValueError(f"PagedKVCache: sequence {b} would hold {new_len} tokens, more than "
                             f"max_blocks * Bs = {self.max_blocks * self.Bs}")
        while len(self._pages[b]) < need:
            if not self._free:
                raise RuntimeError(f"PagedKVCache: out of pages ({self.num_pages}) growing sequence {b}")
            page = self._free.pop(0)
            self._table_host[b, len(self._pages[b])] = page
            self._pages[b].append(page)

    def release(self, b):
        """Frees sequence b's pages and empties it (kv_len 0); takes effect at the next step."""
        self._free.extend(self._pages[b])
        self._pages[b] = []
        self._table_host[b].zero_()
        self.kv_len_host[b] = 0

    # -- steps ---------------------------------------------------------------------------

    def begin_step(self, q_lens):
        """Starts a step of q_lens[b] new tokens per sequence: kv_len grows by them, pages
        are allocated, and block_table, kv_len, cu_q and positions are updated on the device
        (in place, same addresses while T is unchanged). Returns cu_q."""
        q_lens = [int(x) for x in (q_lens.tolist() if torch.is_tensor(q_lens) else q_lens)]
        if len(q_lens) != self.B or min(q_lens, default=0) < 0:
            raise ValueError(f"PagedKVCache.begin_step: argument 'q_lens': must be {self.B} counts >= 0, got {q_lens}")
        for b, n in enumerate(q_lens):
            self._grow(b, int(self.kv_len_host[b]) + n)
            self.kv_len_host[b] += n
        self.cu_q_host[1:] = torch.cumsum(torch.tensor(q_lens, dtype=torch.int64), 0).to(torch.int32)
        self.T = int(self.cu_q_host[-1])
        self.block_table.copy_(self._table_host)
        self.kv_len.copy_(self.kv_len_host)
        self.cu_q.copy_(self.cu_q_host)
        self._set_positions(q_lens)
        return self.cu_q

    def _set_positions(self, q_lens):
        pos = [p for b, n in enumerate(q_lens) for p in range(int(self.kv_len_host[b]) - n, int(self.kv_len_host[b]))]
        host = torch.tensor(pos, dtype=torch.int32)
        if self.positions.shape != host.shape:
            self.positions = torch.empty_like(host, device=self.device)
        self.positions.copy_(host)

    def query_blocks(self, Qb=1):
        """NQ of the current step, counted on the host (no device work)."""
        return self.T if Qb == 1 else _C.count_query_blocks(self.cu_q_host, self.kv_len_host, Qb)

    def write(self, k, v, ki=None, *, layer=0, cu_q=None, use_torch_ops=False):
        """kv_append of this step's k, v [T][Hkv][D] (and ki [T][Di]) into layer's caches,
        at the slots begin_step made. Graph-safe. use_torch_ops: through torch.ops.msa."""
        kc, vc, kic, kis = self.layer(layer)
        if ki is None:
            kic = kis = None
        cu_q = self.cu_q if cu_q is None else cu_q
        if use_torch_ops:
            torch.ops.msa.kv_append(k, v, self.block_table, self.kv_len, cu_q, kc, vc, ki, kic, kis)
        else:
            msa.kv_append(k, v, self.block_table, self.kv_len, cu_q, kc, vc, ki=ki, ki_cache=kic, ki_scale=kis)

    def append(self, k, v, ki=None, cu_q=None, *, layer=0):
        """begin_step with the lengths of cu_q (default: all T tokens in sequence 0 when
        B = 1), then write(): one layer's whole step. Waits for a CUDA cu_q (host copy)."""
        if cu_q is None:
            if self.B != 1:
                raise ValueError("PagedKVCache.append: argument 'cu_q': required when B > 1")
            q_lens = [k.shape[0]]
        else:
            cu = torch.as_tensor(cu_q).to("cpu", torch.int64)
            q_lens = (cu[1:] - cu[:-1]).tolist()
        self.begin_step(q_lens)
        self.write(k, v, ki, layer=layer)
        return self.cu_q

    def memory_bytes(self):
        """Bytes of every cache tensor (all layers)."""
        ts = self.k_caches + self.v_caches + self.ki_caches + [s for s in self.ki_scales if s is not None]
        return sum(t.numel() * t.element_size() for t in ts)
