#!/usr/bin/env python3
"""The MSA layer against dense attention over context length, on one GPU.

For L in --lens and each workload (decode batch 1 and 8 with bf16 and fp8 indexer keys;
prefill of an 8K chunk over a cached prefix; prefill from empty up to --empty-max), runs
`msa layer --json` (indexer -> top-k -> sparse attention, and our dense attention on the
same cache) and, when PyTorch is installed, PyTorch SDPA (flash, cuDNN, efficient; best
of them) on the same shapes in the same call. Writes <out>/layer_sweep.json and
<out>/layer_sweep.png (speed-up of the MSA layer over the best dense attention vs L).

    python3 bench/layer_sweep.py --msa build/tools/msa --out results/
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HQ, HKV, D = 64, 4, 128


def run_msa(msa, batch, L, q_len, iters, extra, timeout):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    cmd = [msa, "layer", "--backend", "cuda", "--batch", str(batch), "--context", str(L), "--q-len", str(q_len),
           "--iters", str(iters), "--json", path] + extra
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    if p.returncode != 0:
        return {"error": (p.stderr or p.stdout).strip().splitlines()[-1][:200]}
    with open(path) as f:
        r = json.load(f)
    os.unlink(path)
    return r


def sdpa_best(batch, L, q_len):
    """Median ms of the fastest SDPA backend for q_len queries over L keys (causal, aligned
    bottom-right, when q_len > 1), or None without PyTorch / CUDA."""
    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.nn.attention.bias import causal_lower_right
    except ImportError:
        return None, {}
    if not torch.cuda.is_available():
        return None, {}
    torch.manual_seed(0)
    q = torch.randn(batch, HQ, q_len, D, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(batch, HKV, L, D, dtype=torch.bfloat16, device="cuda")
    v = torch.randn(batch, HKV, L, D, dtype=torch.bfloat16, device="cuda")
    if q_len > 1:  # GQA by repetition: not every backend takes enable_gqa with a mask
        k = k.repeat_interleave(HQ // HKV, dim=1)
        v = v.repeat_interleave(HQ // HKV, dim=1)
    per = {}
    for name, be in [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                     ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        def call():
            with sdpa_kernel([be]):
                if q_len == 1:
                    return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                if q_len == L:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=True)
                return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(q_len, L))
        try:
            call()
            torch.cuda.synchronize()
            iters = 20 if q_len == 1 else 3
            times = []
            for _ in range(iters):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record()
                call()
                e.record()
                e.synchronize()
                times.append(s.elapsed_time(e))
            per[name] = statistics.median(times)
        except Exception as ex:  # a backend that refuses the shape
            per[name] = f"unavailable: {str(ex).splitlines()[0][:80]}"
    del q, k, v
    torch.cuda.empty_cache()
    nums = [x for x in per.values() if isinstance(x, float)]
    return (min(nums) if nums else None), per


def write_json(args, rows):
    out = {"rows": rows, "command": "python3 bench/layer_sweep.py " + " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in vars(args).items())}
    with open(os.path.join(args.out, "layer_sweep.json"), "w") as f:
        json.dump(out, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--msa", default="build/tools/msa")
    ap.add_argument("--out", default=".")
    ap.add_argument("--lens", default="32768,131072,524288,1048576")
    ap.add_argument("--empty-max", type=int, default=131072, help="largest L for prefill from empty")
    ap.add_argument("--workloads", default="decode1,decode8,decode1_fp8,decode8_fp8,chunk8k,empty")
    ap.add_argument("--timeout", type=int, default=240)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    fp8 = ["--config", "ki_dtype=fp8_e4m3"]
    workloads = {  # name: (batch, q_len(L), iters, extra msa flags)
        "decode1": (1, lambda L: 1, 10, []),
        "decode8": (8, lambda L: 1, 10, []),
        "decode1_fp8": (1, lambda L: 1, 10, fp8),
        "decode8_fp8": (8, lambda L: 1, 10, fp8),
        "chunk8k": (1, lambda L: 8192, 2, []),
        "empty": (1, lambda L: L, 1, []),
    }
    rows = []
    sdpa_cache = {}
    for name in args.workloads.split(","):
        batch, qf, iters, extra = workloads[name]
        for L in [int(x) for x in args.lens.split(",")]:
            q_len = qf(L)
            if name == "empty" and L > args.empty_max:
                continue
            r = run_msa(args.msa, batch, L, q_len, iters, extra, args.timeout)
            key = (batch, L, q_len)
            if key not in sdpa_cache:
                sdpa_cache[key] = sdpa_best(batch, L, q_len)
            best_sdpa, per = sdpa_cache[key]
            row = {"workload": name, "batch": batch, "L": L, "q_len": q_len, "msa": r, "sdpa_ms": per,
                   "sdpa_best_ms": best_sdpa}
            if "layer_ms" in r:
                dense = [x for x in (r["dense_ms"], best_sdpa) if x]
                row["best_dense_ms"] = min(dense)
                row["speedup_vs_best_dense"] = row["best_dense_ms"] / r["layer_ms"]
                row["speedup_vs_our_dense"] = r["dense_ms"] / r["layer_ms"]
            rows.append(row)
            write_json(args, rows)  # after every row: a run cut short keeps what it measured
            print(f"{name:12s} L={L:8d}: msa {r.get('layer_ms', r.get('error'))} ms, our dense {r.get('dense_ms')} ms,"
                  f" sdpa best {best_sdpa} ms -> speed-up {row.get('speedup_vs_best_dense', float('nan')):.2f}x",
                  flush=True)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot")
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in dict.fromkeys(r["workload"] for r in rows):
        pts = [(r["L"], r["speedup_vs_best_dense"]) for r in rows if r["workload"] == name and "speedup_vs_best_dense" in r]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("context length L (tokens)")
    ax.set_ylabel("MSA layer speed-up over best dense")
    ax.set_title("msa on H200: MSA layer vs best of (msa dense, PyTorch SDPA)")
    ax.axhline(1.0, color="gray", lw=0.5)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "layer_sweep.png"), dpi=120)
    print("wrote", os.path.join(args.out, "layer_sweep.png"))


if __name__ == "__main__":
    main()
