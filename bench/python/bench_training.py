#!/usr/bin/env python3
"""MSA's training ops against dense SDPA and a PyTorch-native sparse backward, at M3's
layout (Hq=64, Hkv=4, D=128, Bs=128, k=16, Hi=Hkv=4 per_kv_head selection, Di=128,
bf16, Qb=1), training from an empty cache: one sequence with q_len = kv_len = L.

Per context L (--contexts) and selection kind (--selections: `random`, or `correlated`:
adjacent tokens share most blocks, the per-token set drifting slowly), block_idx is
built with torch (valid, duplicate-free, ascending, -1 padded; the sink block 0 and the
local block always in, as block_topk with n_sink=1, n_local=1 would; the same definition
as check/synthetic_selection.h, which `msa layer --backward` and msa-bench's
msa_layer_backward cases use, docs/training.md "Benchmarks"). It times, as
medians of CUDA-event intervals (perf_counter on the CPU):
- msa_fwd: msa.sparse_block_attention; msa_bwd: msa.sparse_block_attention_backward
  (given out, lse); msa_kl: msa.indexer_kl(stage="sparse") over the same selections;
- msa_score, msa_topk: msa.indexer_score and msa.block_topk (n_sink=1, n_local=1) over
  the context (once per L: they do not depend on the synthetic selections);
- msa_layer: the sum of the medians of msa_score + msa_topk + msa_fwd + msa_bwd + msa_kl,
  the MSA layer's forward and backward (not a separate run: that would repeat the slow
  backward);
- sdpa_fwd, sdpa_bwd: dense causal SDPA, every torch.nn.attention.sdpa_kernel backend
  of --sdpa-backends (enable_gqa, else K/V expanded to Hq heads), the best reported with
  its name (torch without SDPA: the math with a causal mask);
- torch_sparse_fwd_bwd: autograd through an index_select of the selected blocks from f32
  leaves and attention per token over its k*Bs gathered keys (masked past the token and
  for -1 entries), chunked over tokens; skipped, saying so, when its estimated memory
  exceeds --native-mem-gib. Its gradients are compared with msa_bwd's (nmse).
- matmul: the same-run ceiling, a bf16 N^3 torch.matmul (N = 8192).

FLOP counts (keys = tokens attended per query and head, exact from block_idx; dense:
the causal sum(t + 1)): attention forward 4*T*Hq*keys*D, backward 2.5x forward,
torch_sparse_fwd_bwd 3.5x forward (its masked padding not counted), indexer_kl
2*T*Hq*keys*D (the main branch's logits) + 6*T*Hi*keys*Di (student logits, dqi, dki),
indexer_score 2*Hi*Di*sum(t + 1), matmul 2*N^3. Every op's TFLOP/s and its fraction of
the matmul ceiling are reported. Timing: one warm-up call, then --iters calls,
--slow-iters when the warm-up took over --slow-s seconds, one call when it took over
--very-slow-s. Sizes are printed before anything is allocated.

    PYTHONPATH=build/python python3 bench/python/bench_training.py --json training.json --png training.png
    PYTHONPATH=build-dev/python python3 bench/python/bench_training.py --quick   # tiny, CPU backend
"""
import argparse
import math
import sys
import time

import torch

import msa
from bench_layer import GIB, Timer, print_sizes, sdpa
from results import log_bar_chart, write_json

M3 = dict(Hq=64, Hkv=4, D=128, Hi=4, Di=128, Bs=128, k=16)
TINY = dict(Hq=4, Hkv=2, D=32, Hi=2, Di=32, Bs=16, k=4)
DRIFT = 64  # tokens between the anchors of the correlated selections


# ----------------------------------------------------------------------------- sizes, FLOPs

def sizes(cfg, L, native_chunk):
    """Bytes of the large tensors of one context, by name."""
    c, T, nblk = cfg, L, L // cfg["Bs"]
    qb = T * c["Hq"] * c["D"]
    kv = 2 * L * c["Hkv"] * c["D"]
    return {"q+dout+out bf16": 3 * qb * 2, "dq f32": qb * 4, "K+V bf16": kv * 2, "dK+dV f32": kv * 4,
            "qi, ki + grads": T * c["Hi"] * c["Di"] * 6 + L * c["Di"] * 6,
            "block_score f32": T * c["Hi"] * nblk * 4, "block_idx x2": 2 * T * c["Hkv"] * c["k"] * 4,
            "sdpa q,K,V,grads (expanded)": qb * 2 * 6, "torch sparse": native_bytes(cfg, L, native_chunk)}


def native_bytes(cfg, T, chunk):
    """The PyTorch-native sparse fwd+bwd: f32 leaves and their grads, plus one chunk's
    gathered keys/values (f32 and bf16, and their grads) and f32 scores."""
    c, kbs = cfg, cfg["k"] * cfg["Bs"]
    leaves = 2 * 4 * (T * c["Hq"] * c["D"] + 2 * T * c["Hkv"] * c["D"])
    per_token = 2 * (2 * c["Hkv"] * kbs * c["D"] * 6) + c["Hq"] * kbs * 18
    return leaves + min(chunk, T) * per_token


def attended_keys(idx, Bs):
    """Tokens attended per (token, selection head), summed: block b of token t
    contributes min(Bs, t - b*Bs + 1) tokens (q_len == kv_len, so pos(t) = t)."""
    t = torch.arange(idx.shape[0], device=idx.device)[:, None, None]
    n = (t - idx.long() * Bs + 1).clamp(0, Bs)
    return int(torch.where(idx >= 0, n, torch.zeros_like(n)).sum())


def causal_keys(T):
    return T * (T + 1) // 2


# ----------------------------------------------------------------------------- selections

def selections(kind, cfg, T, device, seed, chunk=8192):
    """block_idx [T][Hkv][k] int32 with q_len = kv_len = T: all visible blocks where a
    token sees at most k; else block 0, the local block and k-2 others, by random scores
    (`random`: independent per token; `correlated`: interpolated between anchors every
    DRIFT tokens, each anchor an AR(1) step from the last, so the set drifts slowly)."""
    Bs, k = cfg["Bs"], cfg["k"]
    nblk, H = T // Bs, cfg["Hkv"]
    g = torch.Generator().manual_seed(seed)
    anchors = None
    if kind == "correlated":
        n = T // DRIFT + 2
        a = torch.empty((n, H, nblk))
        a[0] = torch.randn((H, nblk), generator=g)
        for i in range(1, n):
            a[i] = 0.95 * a[i - 1] + math.sqrt(1 - 0.95 ** 2) * torch.randn((H, nblk), generator=g)
        anchors = a.to(device)
    elif kind != "random":
        raise ValueError(f"selection kind must be random or correlated, got {kind!r}")
    idx = torch.empty((T, H, k), dtype=torch.int32, device=device)
    blocks = torch.arange(nblk, device=device)
    for t0 in range(0, T, chunk):
        t = torch.arange(t0, min(T, t0 + chunk), device=device)
        cur = (t // Bs)[:, None, None]
        if anchors is None:
            score = torch.rand((len(t), H, nblk), generator=g).to(device)
        else:
            w = ((t % DRIFT).float() / DRIFT)[:, None, None]
            score = (1 - w) * anchors[t // DRIFT] + w * anchors[t // DRIFT + 1]
        score = score.masked_fill((blocks == 0) | (blocks >= cur), -math.inf)  # candidates 1 .. cur-1
        rest = score.topk(k - 2, dim=-1).indices
        few = cur[:, 0, 0] < k  # at most k visible blocks: all of them
        chosen = torch.cat([torch.zeros_like(rest[..., :1]), cur.expand(-1, H, 1), rest], dim=-1)
        all_vis = torch.arange(k, device=device).expand(len(t), H, k)
        all_vis = torch.where(all_vis <= cur, all_vis, torch.full_like(all_vis, -1))
        chosen = torch.where(few[:, None, None], all_vis, chosen)
        big = torch.where(chosen < 0, torch.full_like(chosen, nblk), chosen).sort(dim=-1).values
        idx[t0:t0 + len(t)] = torch.where(big == nblk, torch.full_like(big, -1), big).int()
    return idx


def adjacent_overlap(idx, sample=4096):
    """Mean share of token t's blocks that token t+1 also selects (last `sample` tokens)."""
    n = min(sample, idx.shape[0] - 1)
    a, b = idx[-n - 1:-1].long(), idx[-n:].long()
    same = (a[..., :, None] == b[..., None, :]) & (a[..., :, None] >= 0)
    return float(same.any(-1).sum() / (a >= 0).sum())


# ----------------------------------------------------------------------------- problem

class Problem:
    """One training sequence: q, dout, qi and the paged caches (identity page table)."""

    def __init__(self, cfg, L, device, seed=0):
        torch.manual_seed(seed)
        c = cfg
        self.cfg, self.T, self.device = cfg, L, device
        self.nblk = L // c["Bs"]
        r = lambda *shape: torch.randn(*shape, device=device).to(torch.bfloat16)  # noqa: E731
        self.q, self.dout = r(L, c["Hq"], c["D"]), r(L, c["Hq"], c["D"])
        self.k_cache, self.v_cache = r(self.nblk, c["Hkv"], c["Bs"], c["D"]), r(self.nblk, c["Hkv"], c["Bs"], c["D"])
        self.qi, self.ki_cache = r(L, c["Hi"], c["Di"]), r(self.nblk, c["Bs"], c["Di"])
        self.block_table = torch.arange(self.nblk, dtype=torch.int32, device=device)[None]
        self.kv_len = torch.tensor([L], dtype=torch.int32, device=device)
        self.cu_q = torch.tensor([0, L], dtype=torch.int32, device=device)

    def paged(self):
        return self.block_table, self.kv_len, self.cu_q


# ----------------------------------------------------------------------------- timing

class Clock:
    """One warm-up call, then the median of Timer's iterations: --iters of them when the
    warm-up took under --slow-s seconds, --slow-iters under --very-slow-s, else one (the
    warm-up has then already paid any first-call cost)."""

    def __init__(self, device, iters, slow_iters, slow_s, very_slow_s):
        self.timers = [Timer(device, n, warmup=0) for n in (iters, slow_iters, 1)]
        self.limits = (slow_s, very_slow_s)

    def __call__(self, fn):
        self.timers[0].sync()
        t0 = time.perf_counter()
        fn()
        self.timers[0].sync()
        wall = time.perf_counter() - t0
        return self.timers[sum(wall > x for x in self.limits)](fn)

    def attempt(self, fn):
        """{"ms": the median} or, where fn raised (no kernel, out of memory), {"ms": None,
        "error": why}, so that one failing op does not end the run."""
        try:
            return {"ms": self(fn)}
        except Exception as e:
            why = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            print(f"  failed: {why}", flush=True)
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
            return {"ms": None, "error": why}


def add(rows, ceiling, **row):
    """Append a result row with its TFLOP/s and fraction of the matmul ceiling."""
    ms, flops = row.get("ms"), row.get("flops")
    if ms and flops:
        row["tflops"] = flops / ms / 1e9
        row["frac_of_matmul"] = row["tflops"] / ceiling if ceiling else None
    rows.append(row)
    return row


def matmul_ceiling(device, clock, n):
    a = torch.randn(n, n, device=device).to(torch.bfloat16)
    b = torch.randn(n, n, device=device).to(torch.bfloat16)
    ms = clock(lambda: torch.matmul(a, b))
    return ms, 2.0 * n ** 3


# ----------------------------------------------------------------------------- msa

def msa_index(p, clock, backend):
    """indexer_score and block_topk over the whole sequence: their Clock.attempt results."""
    c = p.cfg
    score = torch.empty((p.T, c["Hi"], p.nblk), dtype=torch.float32, device=p.device)
    idx = torch.empty((p.T, c["Hi"], c["k"]), dtype=torch.int32, device=p.device)
    cnt = torch.empty((p.T, c["Hi"]), dtype=torch.int32, device=p.device)
    score_r = clock.attempt(lambda: msa.indexer_score(p.qi, p.ki_cache, *p.paged(), Qb=1, block_score=score,
                                                      backend=backend))
    topk_r = clock.attempt(lambda: msa.block_topk(score, p.kv_len, p.cu_q, Qb=1, Bs=c["Bs"], k=c["k"], n_sink=1,
                                                  n_local=1, block_idx=idx, block_cnt=cnt, backend=backend))
    return score_r, topk_r


class MsaTraining:
    """The msa training ops at one selection, with preallocated outputs."""

    def __init__(self, p, idx, backend):
        c = p.cfg
        self.p, self.idx, self.backend = p, idx, backend
        self.out = torch.empty_like(p.q)
        self.lse = torch.empty((p.T, c["Hq"]), dtype=torch.float32, device=p.device)
        self.dq = torch.empty(p.q.shape, dtype=torch.float32, device=p.device)
        self.dk = torch.empty(p.k_cache.shape, dtype=torch.float32, device=p.device)
        self.dv = torch.empty_like(self.dk)
        self.kl = torch.empty((p.T, c["Hi"]), dtype=torch.float32, device=p.device)
        self.dqi = torch.empty(p.qi.shape, dtype=torch.float32, device=p.device)
        self.dki = torch.empty(p.ki_cache.shape, dtype=torch.float32, device=p.device)

    def fwd(self):
        p = self.p
        msa.sparse_block_attention(p.q, p.k_cache, p.v_cache, *p.paged(), self.idx, Qb=1, out=self.out, lse=self.lse,
                                   backend=self.backend)

    def bwd(self):
        p = self.p
        msa.sparse_block_attention_backward(p.dout, p.q, p.k_cache, p.v_cache, *p.paged(), self.idx, self.out,
                                            self.lse, Qb=1, dq=self.dq, dk_cache=self.dk, dv_cache=self.dv,
                                            backend=self.backend)

    def kl_step(self):
        p = self.p
        msa.indexer_kl(p.qi, p.ki_cache, p.q, p.k_cache, self.lse, *p.paged(), block_idx=self.idx, stage="sparse",
                       Qb=1, kl=self.kl, dqi=self.dqi, dki_cache=self.dki, backend=self.backend)


# ----------------------------------------------------------------------------- PyTorch-native sparse

def torch_sparse(p, idx, chunk):
    """Autograd through the gather of each token's selected blocks from f32 leaves (so the
    key gradients sum in f32) and bf16 attention over its k*Bs keys, chunk tokens at a
    time: (run, last), last() giving the (out, dq, dk, dv) of the latest run for dout."""
    c, T, Bs, k = p.cfg, p.T, p.cfg["Bs"], p.cfg["k"]
    H, G, D = c["Hkv"], c["Hq"] // c["Hkv"], c["D"]
    scale, dt = 1.0 / math.sqrt(D), p.q.dtype
    q32 = p.q.float().requires_grad_()
    k32 = p.k_cache.float().view(-1, Bs, D).requires_grad_()  # row page*Hkv + g
    v32 = p.v_cache.float().view(-1, Bs, D).requires_grad_()
    heads = torch.arange(H, device=p.device)[None, :, None]
    slot = torch.arange(Bs, device=p.device)
    out = torch.empty_like(p.q)

    def run():
        for x in (q32, k32, v32):
            x.grad = None
        for t0 in range(0, T, chunk):
            t1 = min(T, t0 + chunk)
            sel = idx[t0:t1].long()
            blk = sel.clamp(min=0)
            rows = (p.block_table[0].long()[blk] * H + heads).flatten()
            kg = k32.index_select(0, rows).view(t1 - t0, H, k * Bs, D).to(dt)
            vg = v32.index_select(0, rows).view(t1 - t0, H, k * Bs, D).to(dt)
            pos = (blk[..., None] * Bs + slot).flatten(2)  # [n][Hkv][k*Bs]
            t = torch.arange(t0, t1, device=p.device)[:, None, None]
            ok = (sel[..., None] >= 0).expand(-1, -1, -1, Bs).flatten(2) & (pos <= t)
            qq = q32[t0:t1].view(t1 - t0, H, G, D).to(dt)
            s = torch.matmul(qq, kg.transpose(-1, -2)).float() * scale  # [n][Hkv][G][k*Bs]
            pr = s.masked_fill(~ok[:, :, None, :], -math.inf).softmax(-1)
            o = torch.matmul(pr.to(dt), vg)
            o.backward(p.dout[t0:t1].view_as(o))
            out[t0:t1] = o.detach().view(t1 - t0, c["Hq"], D)

    def last():
        return out, q32.grad, k32.grad.view(p.k_cache.shape), v32.grad.view(p.k_cache.shape)

    return run, last


def nmse(x, r):
    """Normalized squared error, the sums accumulated by torch in f32 (no f64 copies of
    multi-GiB gradients)."""
    x, r = x.float(), r.float()
    return float(((x - r) ** 2).sum()) / max(float((r ** 2).sum()), 1e-30)


# ----------------------------------------------------------------------------- dense SDPA

def sdpa_backends(names):
    """(name, context manager factory) per requested backend this torch has; torch without
    torch.nn.attention: one entry, the math with a causal mask."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return [("math (no torch.nn.attention)", None)]
    table = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION",
             "math": "MATH"}
    return [(n, (lambda b=getattr(SDPBackend, table[n]): sdpa_kernel(b)))
            for n in names if hasattr(SDPBackend, table[n])]


def dense_sdpa(p, ctx):
    """(forward, backward, gqa kind) of causal SDPA under backend ctx; backward is the
    gradient of one retained forward graph for dout."""
    import contextlib
    import torch.nn.functional as F

    c, G = p.cfg, p.cfg["Hq"] // p.cfg["Hkv"]
    q = p.q.transpose(0, 1)[None].contiguous().requires_grad_()
    kv = [t.permute(1, 0, 2, 3).reshape(1, c["Hkv"], p.T, c["D"]).contiguous().requires_grad_()
          for t in (p.k_cache, p.v_cache)]
    do = p.dout.transpose(0, 1)[None].contiguous()
    enter = ctx or contextlib.nullcontext
    if ctx is None:  # torch without SDPA: the math, causal mask, K/V expanded
        mask = torch.ones((p.T, p.T), dtype=torch.bool, device=p.device).tril()
        call, gqa = (lambda: sdpa(q, *(t.repeat_interleave(G, 1) for t in kv), mask)), "expanded"
    else:
        def call_gqa():
            return F.scaled_dot_product_attention(q, *kv, is_causal=True, enable_gqa=True)

        def call_expanded():
            return F.scaled_dot_product_attention(q, *(t.repeat_interleave(G, 1) for t in kv), is_causal=True)

        call, gqa = call_gqa, "enable_gqa"
        try:
            with enter(), torch.no_grad():
                call()
        except (TypeError, RuntimeError):
            call, gqa = call_expanded, "expanded"
    with enter():
        graph = call()

    def fwd():
        with enter(), torch.no_grad():
            call()

    def bwd():
        with enter():
            torch.autograd.grad(graph, [q] + kv, do, retain_graph=True)

    return fwd, bwd, gqa


def time_dense(p, args, clock, rows, ceiling, base):
    """Every backend's forward and backward; the best of each is added as a row."""
    flops = 4.0 * p.cfg["Hq"] * p.cfg["D"] * causal_keys(p.T)
    best = {}
    for name, ctx in sdpa_backends(args.sdpa_backends.split(",")):
        try:
            fwd, bwd, gqa = dense_sdpa(p, ctx)
            times = {"sdpa_fwd": clock(fwd), "sdpa_bwd": clock(bwd)}
        except Exception as e:  # a backend this GPU, dtype or shape does not support
            print(f"  sdpa {name}: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}", flush=True)
            continue
        print(f"  sdpa {name} ({gqa}): fwd {times['sdpa_fwd']:.3f} ms, bwd {times['sdpa_bwd']:.3f} ms", flush=True)
        for op, ms in times.items():
            if op not in best or ms < best[op]["ms"]:
                best[op] = dict(base, op=op, ms=ms, backend=name, gqa=gqa,
                                flops=flops * (2.5 if op == "sdpa_bwd" else 1.0))
        if p.device.type == "cuda":
            torch.cuda.empty_cache()
    for op in ("sdpa_fwd", "sdpa_bwd"):
        add(rows, ceiling, **(best.get(op) or dict(base, op=op, ms=None, error="no SDPA backend ran")))


# ----------------------------------------------------------------------------- one context

def run_context(args, cfg, L, device, clock, rows, ceiling, backend):
    base = {"L": L}
    total = print_sizes(f"L={L}", sizes(cfg, L, args.native_chunk))
    if device.type == "cuda" and total > args.mem_gib * GIB:
        add(rows, ceiling, **dict(base, op="all", ms=None, error=f"needs {total / GIB:.1f} GiB > --mem-gib"))
        return
    p = Problem(cfg, L, device)
    c = cfg
    score_flops = 2.0 * c["Hi"] * c["Di"] * causal_keys(L)
    score_r, topk_r = msa_index(p, clock, backend)
    add(rows, ceiling, **dict(base, op="msa_score", flops=score_flops, **score_r))
    add(rows, ceiling, **dict(base, op="msa_topk", **topk_r))
    time_dense(p, args, clock, rows, ceiling, base)
    for kind in args.selections.split(","):
        idx = selections(kind, cfg, L, device, seed=1)
        sel = dict(base, selection=kind)
        keys = attended_keys(idx, c["Bs"])
        fwd_flops = 4.0 * (c["Hq"] // c["Hkv"]) * c["D"] * keys
        kl_flops = 2.0 * (c["Hq"] // c["Hkv"]) * c["D"] * keys + 6.0 * c["Di"] * keys
        overlap = adjacent_overlap(idx)
        print(f"  {kind}: mean keys per query {keys / (L * c['Hkv']):.0f}, adjacent-token overlap {overlap:.2f}",
              flush=True)
        m = MsaTraining(p, idx, backend)
        parts = [score_r, topk_r,
                 add(rows, ceiling, **dict(sel, op="msa_fwd", flops=fwd_flops, mean_keys=keys / (L * c["Hkv"]),
                                           adjacent_overlap=overlap, **clock.attempt(m.fwd))),
                 add(rows, ceiling, **dict(sel, op="msa_bwd", flops=2.5 * fwd_flops, **clock.attempt(m.bwd))),
                 add(rows, ceiling, **dict(sel, op="msa_kl", flops=kl_flops, **clock.attempt(m.kl_step)))]
        ok = all(r["ms"] is not None for r in parts)
        add(rows, ceiling, **dict(sel, op="msa_layer", ms=sum(r["ms"] for r in parts) if ok else None,
                                  flops=score_flops + 3.5 * fwd_flops + kl_flops,
                                  **({} if ok else {"error": "a part failed"})))
        if parts[3]["ms"] is not None:  # m holds the backward to compare with
            time_native(p, idx, m, args, clock, rows, ceiling, sel, fwd_flops)
        del m, idx
        if device.type == "cuda":
            torch.cuda.empty_cache()


def time_native(p, idx, m, args, clock, rows, ceiling, sel, fwd_flops):
    need = native_bytes(p.cfg, p.T, args.native_chunk)
    if need > args.native_mem_gib * GIB:
        msg = f"skipped: needs about {need / GIB:.1f} GiB > --native-mem-gib {args.native_mem_gib}"
        print(f"  torch_sparse_fwd_bwd {msg}", flush=True)
        add(rows, ceiling, **dict(sel, op="torch_sparse_fwd_bwd", ms=None, error=msg))
        return
    run, last = torch_sparse(p, idx, args.native_chunk)
    r = add(rows, ceiling, **dict(sel, op="torch_sparse_fwd_bwd", flops=3.5 * fwd_flops, **clock.attempt(run)))
    if r["ms"] is None:
        return
    out, dq, dk, dv = last()  # against m's buffers, still holding its last fwd and bwd
    r.update(nmse_out=nmse(m.out, out), nmse_dq=nmse(m.dq, dq), nmse_dk=nmse(m.dk, dk), nmse_dv=nmse(m.dv, dv))
    print(f"  msa vs torch sparse: nmse out {r['nmse_out']:.2e}, dq {r['nmse_dq']:.2e}, dk {r['nmse_dk']:.2e}, "
          f"dv {r['nmse_dv']:.2e}", flush=True)


# ----------------------------------------------------------------------------- report

def print_table(rows, ceiling):
    print(f"\nmedian ms; TFLOP/s and fraction of the bf16 matmul ceiling ({ceiling:.1f} TFLOP/s)")
    print(f"{'L':>7s} {'selection':10s} {'op':22s} {'ms':>10s} {'TFLOP/s':>8s} {'frac':>6s}  note")
    for r in rows:
        ms, tf, fr = r.get("ms"), r.get("tflops"), r.get("frac_of_matmul")
        note = r.get("error") or (f"{r['backend']} ({r['gqa']})" if "backend" in r else "")
        if "nmse_dq" in r:
            note = f"nmse vs msa: dq {r['nmse_dq']:.1e} dk {r['nmse_dk']:.1e} dv {r['nmse_dv']:.1e}"
        print(f"{r['L']:7d} {r.get('selection', '-'):10s} {r['op']:22s} "
              + (f"{ms:10.3f}" if ms is not None else f"{'-':>10s}") + " "
              + (f"{tf:8.2f} {fr:6.3f}" if tf is not None and fr is not None else f"{'-':>8s} {'-':>6s}")
              + f"  {note}")


def plot(rows, path):
    ops = ["msa_fwd", "msa_bwd", "msa_kl", "msa_layer", "torch_sparse_fwd_bwd", "sdpa_fwd", "sdpa_bwd"]
    groups = sorted({(r["L"], r["selection"]) for r in rows if "selection" in r})

    def median_of(op, L, kind):
        v = [r["ms"] for r in rows if r["op"] == op and r["L"] == L and r.get("selection", kind) == kind
             and r.get("ms")]
        return float(v[0]) if v else None

    series = {op: [median_of(op, L, kind) for L, kind in groups] for op in ops}
    log_bar_chart(path, [f"L={L} {kind}" for L, kind in groups], series, ylabel="median ms (log)",
                  title="MSA training ops vs dense SDPA and a PyTorch-native sparse backward")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="tiny config and contexts on the CPU (cpu backend)")
    ap.add_argument("--device", default=None, help="cuda or cpu (default: cuda when available; --quick: cpu)")
    ap.add_argument("--backend", default=None, help="msa backend (default: the tensors' device; cpu on the CPU)")
    ap.add_argument("--contexts", default=None, help="comma-separated L (default 32768,131072; --quick 256,512)")
    ap.add_argument("--selections", default="random,correlated")
    ap.add_argument("--iters", type=int, default=5, help="timed calls of an op whose warm-up was fast")
    ap.add_argument("--slow-iters", type=int, default=2, help="timed calls of an op whose warm-up took > --slow-s")
    ap.add_argument("--slow-s", type=float, default=0.5)
    ap.add_argument("--very-slow-s", type=float, default=3.0, help="one timed call past this warm-up time")
    ap.add_argument("--sdpa-backends", default="cudnn,flash",
                    help="comma-separated among flash, cudnn, efficient, math")
    ap.add_argument("--native-chunk", type=int, default=256, help="tokens per chunk of the PyTorch-native sparse")
    ap.add_argument("--native-mem-gib", type=float, default=24.0,
                    help="skip the PyTorch-native sparse where its estimate exceeds this")
    ap.add_argument("--matmul-n", type=int, default=8192)
    ap.add_argument("--mem-gib", type=float, default=125.0, help="skip contexts needing more GPU memory")
    ap.add_argument("--json", default=None)
    ap.add_argument("--png", default=None)
    return ap.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    device = torch.device(args.device or ("cpu" if args.quick or not torch.cuda.is_available() else "cuda"))
    backend = args.backend or ("cpu" if device.type == "cpu" else None)
    cfg = TINY if args.quick else M3
    contexts = [int(x) for x in (args.contexts or ("256,512" if args.quick else "32768,131072")).split(",")]
    if args.quick:
        args.matmul_n, args.native_chunk = min(args.matmul_n, 256), min(args.native_chunk, 64)
    clock = Clock(device, args.iters, args.slow_iters, args.slow_s, args.very_slow_s)
    meta = {"device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
            "torch": torch.__version__, "msa": msa.__version__, "msa_backend": backend or device.type,
            "config": cfg, "command": " ".join(sys.argv)}
    print(f"{meta['device']}, torch {meta['torch']}, msa backend {meta['msa_backend']}, config {cfg}", flush=True)
    rows = []
    ms, flops = matmul_ceiling(device, clock, args.matmul_n)
    ceiling = flops / ms / 1e9
    add(rows, ceiling, L=0, op=f"matmul_{args.matmul_n}", ms=ms, flops=flops)
    meta["matmul_tflops"] = ceiling
    for L in contexts:
        run_context(args, cfg, L, device, clock, rows, ceiling, backend)
        if args.json:
            write_json(args.json, dict(meta, rows=rows))
    print_table(rows, ceiling)
    if args.png:
        plot(rows, args.png)
    return rows


if __name__ == "__main__":
    main()
