#!/usr/bin/env python3
"""One MSA attention layer called from Python against `msa layer`, a PyTorch-native MSA
layer and dense SDPA, at M3's layout (docs/spec.md, reference configuration).

Per case (decode B=1 and B=8 at 128K and 1M, B=8 1M with NVFP4 indexer keys, an 8K
prefill chunk at 128K and 1M) it times, as medians of CUDA-event intervals:
- msa_graph: MSAWrapper.run (indexer_topk + sparse_block_attention) replayed as a CUDA graph;
- msa_eager: MSAWrapper.run called eagerly, queued behind device work (device time;
  msa_eager_idle_ms in the JSON: started on an idle device, host enqueue included);
- msa_cli: `msa layer --queued --json` at the same shape (its layer_ms, same two ops);
- torch_msa: the same math in plain PyTorch (indexer matmul, per-block amax, top-k per KV
  head, gather of the selected blocks, SDPA over them); prefill selects per 128-query
  block, the granularity block masks have;
- torch_flex: prefill only, FlexAttention with a block mask of those selections;
- sdpa_dense: dense causal SDPA (GQA) over the whole context.
Caches are filled through msa.kv_append (identity page table), so NVFP4 keys come from
msa's own quantizer. Sizes are printed before anything is allocated.

    PYTHONPATH=build/python python3 bench/python/bench_layer.py --msa-bin build/tools/msa \
        --json layer.json --png layer.png
    PYTHONPATH=build-dev/python python3 bench/python/bench_layer.py --quick   # tiny, CPU too
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import msa
from msa.torch import MSAWrapper
from results import log_bar_chart, write_json

M3 = dict(Hq=64, Hkv=4, D=128, Hi=4, Di=128, Bs=128, k=16, n_sink=0, n_local=1)
TINY = dict(Hq=4, Hkv=2, D=32, Hi=2, Di=32, Bs=16, k=4, n_sink=0, n_local=1)
K128, M1 = 131072, 1048576
CASES = [  # name, B, L, q_len, ki format
    ("decode_b1_128k", 1, K128, 1, "bf16"), ("decode_b1_1m", 1, M1, 1, "bf16"),
    ("decode_b8_128k", 8, K128, 1, "bf16"), ("decode_b8_1m", 8, M1, 1, "bf16"),
    ("decode_b8_1m_nvfp4", 8, M1, 1, "nvfp4"),
    ("prefill8k_128k", 1, K128, 8192, "bf16"), ("prefill8k_1m", 1, M1, 8192, "bf16"),
]
QUICK_CASES = [("decode_b1", 1, 512, 1, "bf16"), ("decode_b2", 2, 2048, 1, "bf16"),
               ("decode_b2_nvfp4", 2, 2048, 1, "nvfp4"), ("prefill128", 1, 1024, 128, "bf16")]
GIB = float(1 << 30)


# ----------------------------------------------------------------------------- timing

class Timer:
    """Medians in ms: CUDA events on the GPU (queued behind a device spin so the host has
    enqueued the whole call before the device reaches the first event), perf_counter on
    the CPU."""

    def __init__(self, device, iters, warmup=2, head_cycles=int(3e6)):
        self.cuda = device.type == "cuda"
        self.iters, self.warmup, self.head_cycles = iters, warmup, head_cycles

    def __call__(self, fn, queued=True):
        for _ in range(self.warmup):
            fn()
        self.sync()
        return statistics.median(self._once(fn, queued) for _ in range(self.iters))

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def _once(self, fn, queued):
        if not self.cuda:
            t0 = time.perf_counter()
            fn()
            return (time.perf_counter() - t0) * 1e3
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if queued:
            torch.cuda._sleep(self.head_cycles)
        e0.record()
        fn()
        e1.record()
        e1.synchronize()
        return e0.elapsed_time(e1)


def graph_of(fn):
    """fn captured in a CUDA graph after an eager warm-up on the capture stream."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        fn()
    torch.cuda.synchronize()
    return g


# ----------------------------------------------------------------------------- sizes

def sizes(cfg, B, L, q_len, ki):
    """Bytes of every large tensor of a case, by name."""
    nblk, T = L // cfg["Bs"], B * q_len
    kv = 2 * B * L * cfg["Hkv"] * cfg["D"] * 2
    ki_bytes = B * L * (cfg["Di"] * 2 if ki == "bf16" else cfg["Di"] // 2 + cfg["Di"] // 16)
    s = {"paged K+V": kv, "indexer keys": ki_bytes, "block_score": T * cfg["Hi"] * nblk * 4,
         "contiguous K+V for SDPA/flex": kv}
    if q_len == 1:
        s["torch_msa scores"] = B * cfg["Hi"] * L * 2
    else:
        s["torch_msa score chunk"] = cfg["Hi"] * prefill_chunk(L) * L * 2
    return s


def prefill_chunk(L):
    """Queries per indexer matmul of the torch prefill: about 1 GiB of bf16 scores per Hi head."""
    return max(128, min(2048, (1 << 29) // L // 128 * 128))


def print_sizes(name, s):
    total = sum(s.values())
    parts = ", ".join(f"{k} {v / GIB:.2f}" for k, v in s.items())
    print(f"{name}: {parts} GiB; total {total / GIB:.1f} GiB", flush=True)
    return total


# ----------------------------------------------------------------------------- msa CLI

def run_cli(args, cfg, B, L, q_len, ki, device):
    """`msa layer --queued --json` at the case's shape: its JSON, or {"error": ...}."""
    if not args.msa_bin:
        return {"error": "no --msa-bin"}
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [args.msa_bin, "layer", "--backend", "cuda" if device.type == "cuda" else "cpu", "--batch", str(B),
           "--context", str(L), "--q-len", str(q_len), "--iters", str(args.iters), "--queued", "--json", path]
    for key in ("Hq", "Hkv", "D", "Hi", "Di", "Bs", "k", "n_sink", "n_local"):
        cmd += ["--config", f"{key}={cfg[key]}"]
    if ki == "nvfp4":
        cmd += ["--config", "ki_dtype=nvfp4"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
        if p.returncode != 0:
            return {"error": ((p.stderr or p.stdout).strip().splitlines() or ["exit %d" % p.returncode])[-1][:300]}
        with open(path) as f:
            return json.load(f)
    except (OSError, subprocess.TimeoutExpired, ValueError) as e:
        return {"error": repr(e)[:300]}
    finally:
        if os.path.exists(path):
            os.unlink(path)


# ----------------------------------------------------------------------------- problem

class Problem:
    """Paged caches filled through msa.kv_append with an identity page table (sequence b's
    block c is page b*nblk + c), and one step's q, qi."""

    def __init__(self, cfg, B, L, q_len, ki, device, seed=0):
        torch.manual_seed(seed)
        c = cfg
        self.cfg, self.B, self.L, self.q_len, self.ki, self.device = cfg, B, L, q_len, ki, device
        self.nblk, self.T = L // c["Bs"], B * q_len
        P = B * self.nblk
        self.k_cache = torch.empty((P, c["Hkv"], c["Bs"], c["D"]), dtype=torch.bfloat16, device=device)
        self.v_cache = torch.empty_like(self.k_cache)
        if ki == "nvfp4":
            self.ki_cache = torch.empty((P, c["Bs"], c["Di"] // 2), dtype=torch.uint8, device=device)
            self.ki_scale = torch.empty((P, c["Bs"], c["Di"] // 16), dtype=torch.uint8, device=device)
        else:
            self.ki_cache = torch.empty((P, c["Bs"], c["Di"]), dtype=torch.bfloat16, device=device)
            self.ki_scale = None
        self.block_table = torch.arange(P, dtype=torch.int32, device=device).view(B, self.nblk)
        self.kv_len = torch.full((B,), L, dtype=torch.int32, device=device)
        self.cu_q = torch.arange(0, self.T + 1, q_len, dtype=torch.int32, device=device)
        self._fill()
        self.q = torch.randn(self.T, c["Hq"], c["D"], device=device).to(torch.bfloat16)
        self.qi = torch.randn(self.T, c["Hi"], c["Di"], device=device).to(torch.bfloat16)

    def _fill(self, chunk=65536):
        c = self.cfg
        for b in range(self.B):
            for s0 in range(0, self.L, chunk):
                n = min(chunk, self.L - s0)
                r = lambda *shape: torch.randn(*shape, device=self.device).to(torch.bfloat16)  # noqa: E731
                kl = torch.tensor([s0 + n], dtype=torch.int32, device=self.device)
                cu = torch.tensor([0, n], dtype=torch.int32, device=self.device)
                msa.kv_append(r(n, c["Hkv"], c["D"]), r(n, c["Hkv"], c["D"]), self.block_table[b:b + 1], kl, cu,
                              self.k_cache, self.v_cache, ki=r(n, c["Di"]), ki_cache=self.ki_cache,
                              ki_scale=self.ki_scale)

    def paged_view(self, t):
        """[P][Hkv][Bs][D] as [B][nblk][Hkv][Bs][D]."""
        return t.view(self.B, self.nblk, *t.shape[1:])

    def contiguous_kv(self):
        """K, V as [B][Hkv][L][D] (a copy) for SDPA and FlexAttention."""
        c = self.cfg
        return tuple(self.paged_view(t).permute(0, 2, 1, 3, 4).reshape(self.B, c["Hkv"], self.L, c["D"])
                     for t in (self.k_cache, self.v_cache))

    def ki_seq(self):
        """Indexer keys as [B][L][Di] (bf16 keys only)."""
        return self.ki_cache.view(self.B, self.L, self.cfg["Di"])


# ----------------------------------------------------------------------------- msa

def msa_wrapper(p, Qb=1):
    c = p.cfg
    w = MSAWrapper().plan(p.block_table, p.kv_len, p.cu_q, Hq=c["Hq"], Hkv=c["Hkv"], Hi=c["Hi"], D=c["D"],
                          Di=c["Di"], Bs=c["Bs"], Qb=Qb, k=c["k"], n_sink=c["n_sink"], n_local=c["n_local"],
                          dtype=torch.bfloat16)
    return w, (lambda: w.run(p.q, p.qi, p.k_cache, p.v_cache, p.ki_cache, p.ki_scale))


def time_msa(p, timer, row):
    w, fn = msa_wrapper(p)
    row["msa_eager_ms"] = timer(fn)
    row["msa_eager_idle_ms"] = timer(fn, queued=False)  # starts on an idle device: host enqueue included
    if timer.cuda:
        g = graph_of(fn)
        row["msa_graph_ms"] = timer(g.replay)
    return w.out.clone()


# ----------------------------------------------------------------------------- PyTorch-native MSA

def sdpa(q, k, v, mask=None):
    """F.scaled_dot_product_attention, or its math where torch has none (torch < 2.0)."""
    if hasattr(F, "scaled_dot_product_attention"):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    return (s.softmax(-1) @ v.float()).to(q.dtype)


def gqa_sdpa(q, k, v, mask=None):
    """SDPA with Hkv < Hq heads: enable_gqa where torch has it, else repeated K/V."""
    G = q.shape[1] // k.shape[1]
    if G > 1 and hasattr(F, "scaled_dot_product_attention"):
        try:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        except (TypeError, RuntimeError):  # torch < 2.5, or no kernel for GQA with this mask
            pass
    return sdpa(q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1), mask)


def torch_decode(p):
    """Decode (one query per sequence at position L-1, L a multiple of Bs): per-token
    selection per KV head, then SDPA over the gathered blocks."""
    c, B = p.cfg, p.B
    kpg, vpg, ki = p.paged_view(p.k_cache), p.paged_view(p.v_cache), p.ki_seq()
    b_idx = torch.arange(B, device=p.device)[:, None, None]
    h_idx = torch.arange(c["Hkv"], device=p.device)[None, :, None]

    def run():
        s = torch.bmm(p.qi, ki.transpose(1, 2))  # [B][Hi][L]
        blk = s.view(B, c["Hi"], p.nblk, c["Bs"]).amax(-1).float()
        blk[..., -1] = math.inf  # the local block (n_local = 1)
        idx = blk.topk(c["k"], dim=-1).indices  # [B][Hkv][k]
        ks = kpg[b_idx, idx, h_idx].reshape(B, c["Hkv"], -1, c["D"])
        vs = vpg[b_idx, idx, h_idx].reshape(B, c["Hkv"], -1, c["D"])
        return gqa_sdpa(p.q.view(B, c["Hq"], 1, c["D"]), ks, vs).view(B, c["Hq"], c["D"])

    return run


def prefill_selection(p, Qb):
    """Top-k blocks per (KV head, Qb-query block) of a prefill chunk (B = 1): [Hi][NQb][k]."""
    c, L, C = p.cfg, p.L, p.q_len
    off, NQb, ki = L - C, C // Qb, p.ki_seq()[0]
    diag = (off + torch.arange(NQb, device=p.device) * Qb + Qb - 1) // c["Bs"]
    later = torch.arange(p.nblk, device=p.device)[None, :] > diag[:, None]
    rows = torch.arange(NQb, device=p.device)
    chunk = prefill_chunk(L)

    def run():
        scores = torch.empty((c["Hi"], NQb, p.nblk), device=p.device)
        for q0 in range(0, C, chunk):
            n = min(chunk, C - q0)
            s = torch.matmul(p.qi[q0:q0 + n].transpose(0, 1), ki.t())  # [Hi][n][L]
            s = s.view(c["Hi"], n // Qb, Qb, p.nblk, c["Bs"]).amax(dim=(2, 4))
            scores[:, q0 // Qb:(q0 + n) // Qb] = s.float()
        scores.masked_fill_(later, -math.inf)
        scores[:, rows, diag] = math.inf
        return scores.topk(c["k"], dim=-1).indices

    return run, diag


def torch_prefill(p, group=16):
    """Prefill: selection per query block of Qb = Bs tokens (128 at M3: a block mask's
    granularity), then per group of query blocks a gather of each KV head's blocks and one
    masked SDPA (the G heads of a KV head share its rows)."""
    c, C, G, Bs = p.cfg, p.q_len, p.cfg["Hq"] // p.cfg["Hkv"], p.cfg["Bs"]
    Qb = Bs
    select, _ = prefill_selection(p, Qb)
    kpg, vpg = p.paged_view(p.k_cache)[0], p.paged_view(p.v_cache)[0]  # [nblk][Hkv][Bs][D]
    NQb, off = C // Qb, p.L - C
    h_idx = torch.arange(c["Hkv"], device=p.device)[:, None, None]
    q = p.q.view(NQb, Qb, c["Hkv"], G, c["D"]).permute(2, 0, 3, 1, 4)  # [Hkv][NQb][G][Qb][D]
    pos = off + torch.arange(C, device=p.device).view(NQb, 1, Qb).expand(NQb, G, Qb).reshape(NQb, G * Qb)
    slot = torch.arange(Bs, device=p.device)

    def run():
        idx = select()  # [Hkv][NQb][k]
        out = torch.empty((c["Hkv"], NQb, G * Qb, c["D"]), dtype=p.q.dtype, device=p.device)
        for j0 in range(0, NQb, group):
            j = slice(j0, min(NQb, j0 + group))
            sel = idx[:, j]
            ks = kpg[sel, h_idx].flatten(2, 3).flatten(0, 1)  # [Hkv*n][k*Bs][D]
            vs = vpg[sel, h_idx].flatten(2, 3).flatten(0, 1)
            tok = (sel[..., None] * Bs + slot).flatten(2)  # [Hkv][n][k*Bs]
            mask = (tok[:, :, None, :] <= pos[j][None, :, :, None]).flatten(0, 1)[:, None]
            qq = q[:, j].reshape(-1, 1, G * Qb, c["D"])
            out[:, j] = sdpa(qq, ks[:, None], vs[:, None], mask).view(
                c["Hkv"], -1, G * Qb, c["D"])
        return out.view(c["Hkv"], NQb, G, Qb, c["D"]).permute(1, 3, 0, 2, 4).reshape(C, c["Hq"], c["D"])

    return run


def torch_flex(p, kd, vd):
    """Prefill with FlexAttention: the selected blocks as a BlockMask (the diagonal block
    partial, with a causal mask_mod; the others full)."""
    from torch.nn.attention.flex_attention import BlockMask, flex_attention

    c, C, L, G = p.cfg, p.q_len, p.L, p.cfg["Hq"] // p.cfg["Hkv"]
    Qb = c["Bs"]
    select, diag = prefill_selection(p, Qb)
    flex = torch.compile(flex_attention, dynamic=False)
    NQb, off = C // Qb, L - C
    q = p.q.transpose(0, 1)[None].contiguous()  # [1][Hq][C][D]

    def causal(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + off

    def block_mask(idx):
        idx = idx.repeat_interleave(G, 0)[None].int()  # [1][Hq][NQb][k], the diagonal first (+inf score)
        part = torch.zeros((1, c["Hq"], NQb, p.nblk), dtype=torch.int32, device=p.device)
        full = torch.zeros_like(part)
        part[..., 0] = diag.int()
        full[..., :c["k"] - 1] = idx[..., 1:]
        ones = torch.ones((1, c["Hq"], NQb), dtype=torch.int32, device=p.device)
        kw = dict(BLOCK_SIZE=(Qb, c["Bs"]), mask_mod=causal)
        try:
            return BlockMask.from_kv_blocks(ones, part, ones * (c["k"] - 1), full, seq_lengths=(C, L), **kw)
        except TypeError:  # torch without seq_lengths
            return BlockMask.from_kv_blocks(ones, part, ones * (c["k"] - 1), full, **kw)

    def run():
        return flex(q, kd, vd, block_mask=block_mask(select()), enable_gqa=True)

    return run


def dense_sdpa(p, kd, vd):
    c, B, C = p.cfg, p.B, p.q_len
    q = p.q.view(B, C, c["Hq"], c["D"]).transpose(1, 2)
    if C == 1:
        return lambda: gqa_sdpa(q, kd, vd)
    try:
        from torch.nn.attention.bias import causal_lower_right

        mask = causal_lower_right(C, p.L)
    except ImportError:  # torch < 2.3: the same mask as a bool tensor
        mask = torch.arange(p.L, device=p.device)[None] <= torch.arange(p.L - C, p.L, device=p.device)[:, None]
    return lambda: gqa_sdpa(q, kd, vd, mask)


def nmse(x, r):
    x, r = x.double(), r.double()
    return float(((x - r) ** 2).sum() / (r ** 2).sum())


def try_time(row, key, timer, make):
    """row[key] = the median ms of make()'s function, or the error it raised."""
    try:
        fn = make()
        row[key] = timer(fn)
        return fn
    except Exception as e:  # a method this torch or shape does not support
        row[key] = None
        row[key.replace("_ms", "_error")] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
        print(f"  {key}: {row[key.replace('_ms', '_error')]}", flush=True)
        return None


# ----------------------------------------------------------------------------- one case

def run_case(args, cfg, case, device, timer):
    name, B, L, q_len, ki = case
    row = {"case": name, "B": B, "L": L, "q_len": q_len, "ki": ki}
    total = print_sizes(name, sizes(cfg, B, L, q_len, ki))
    row["memory_gib"] = total / GIB
    if device.type == "cuda" and total > args.mem_gib * GIB:
        row["error"] = f"needs {total / GIB:.1f} GiB > --mem-gib {args.mem_gib}"
        return row
    row["msa_cli"] = run_cli(args, cfg, B, L, q_len, ki, device)
    row["msa_cli_ms"] = row["msa_cli"].get("layer_ms")
    p = Problem(cfg, B, L, q_len, ki, device)
    msa_out = time_msa(p, timer, row)
    if ki == "bf16":
        time_torch(p, timer, row, msa_out)
    del p
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return row


def time_torch(p, timer, row, msa_out):
    native = try_time(row, "torch_msa_ms", timer, lambda: torch_decode(p) if p.q_len == 1 else torch_prefill(p))
    if native is not None:  # agreement with msa at the same selection granularity (near-ties may differ)
        ref = msa_out if p.q_len == 1 else msa_wrapper(p, Qb=p.cfg["Bs"])[1]()
        row["torch_msa_nmse_vs_msa"] = nmse(native(), ref)
    kd, vd = p.contiguous_kv()
    if p.q_len > 1 and p.device.type == "cuda":
        try_time(row, "torch_flex_ms", timer, lambda: torch_flex(p, kd, vd))
    try_time(row, "sdpa_dense_ms", timer, lambda: dense_sdpa(p, kd, vd))


# ----------------------------------------------------------------------------- report

METHODS = ["msa_graph_ms", "msa_eager_ms", "msa_cli_ms", "torch_msa_ms", "torch_flex_ms", "sdpa_dense_ms"]


def print_table(rows):
    head = f"{'case':22s} " + " ".join(f"{m[:-3]:>12s}" for m in METHODS)
    print("\nmedian ms per layer call\n" + head)
    for r in rows:
        cells = []
        for m in METHODS:
            v = r.get(m)
            cells.append(f"{v:12.3f}" if isinstance(v, float) else f"{'-':>12s}")
        print(f"{r['case']:22s} " + " ".join(cells) + (f"  ({r['error']})" if "error" in r else ""))


def plot(rows, path):
    series = {m[:-3]: [r.get(m) for r in rows] for m in METHODS}
    log_bar_chart(path, [r["case"] for r in rows], series, ylabel="median ms per layer call (log)",
                  title="MSA layer from Python vs msa CLI, PyTorch-native MSA and dense SDPA", rotation=20)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny config and contexts (runs on the CPU too)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available)")
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--msa-bin", default=None, help="path of the msa CLI for `msa layer --queued --json`")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per msa CLI run")
    ap.add_argument("--mem-gib", type=float, default=125.0, help="skip cases needing more GPU memory")
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    cfg, cases = (TINY, QUICK_CASES) if args.quick else (M3, CASES)
    if args.cases:
        want = set(args.cases.split(","))
        cases = [c for c in cases if c[0] in want]
    if args.quick:
        args.iters = min(args.iters, 5)
    timer = Timer(device, args.iters)
    meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "msa": msa.__version__, "config": cfg, "command": " ".join(sys.argv)}
    print(f"{meta['device']}, torch {meta['torch']}, config {cfg}", flush=True)
    rows = []
    with torch.inference_mode():
        for case in cases:
            rows.append(run_case(args, cfg, case, device, timer))
            if args.json:
                write_json(args.json, dict(meta, rows=rows))
    print_table(rows)
    if args.png:
        plot(rows, args.png)
    return rows


if __name__ == "__main__":
    main()
