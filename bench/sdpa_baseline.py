#!/usr/bin/env python3
"""Dense-attention decode baseline: PyTorch SDPA (best of its flash / cuDNN / efficient
backends) at the reference decode shapes (Hq=64, Hkv=4, D=128, bf16, one query per
sequence), plus a device-copy ceiling, timed with CUDA events (median of many calls,
rotating among several KV sets so L2 does not flatter small shapes).

    python3 bench/sdpa_baseline.py [--out results.json]

Prints one line per (backend, batch, L): median ms and achieved GB/s on the K+V bytes.
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HQ, HKV, D = 64, 4, 128


def time_ms(fn, iters=50, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return statistics.median(times)


def copy_ceiling():
    n = 1 << 30
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_(0, 255)
    b = torch.empty_like(a)
    ms = time_ms(lambda: b.copy_(a), iters=20)
    return 2 * n / ms / 1e6  # GB/s, read + write


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--lens", default="32768,131072,1048576")
    ap.add_argument("--batches", default="1,8")
    args = ap.parse_args()
    torch.manual_seed(0)
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    results["copy_GBps"] = copy_ceiling()
    print(f"device {results['device']}, torch {results['torch']}, copy ceiling {results['copy_GBps']:.0f} GB/s")
    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    for L in [int(x) for x in args.lens.split(",")]:
        for B in [int(x) for x in args.batches.split(",")]:
            kv_bytes = 2 * B * L * HKV * D * 2
            nsets = max(1, min(4, (4 << 30) // max(kv_bytes, 1)))
            sets = []
            for _ in range(nsets):
                k = torch.randn(B, HKV, L, D, dtype=torch.bfloat16, device="cuda")
                v = torch.randn(B, HKV, L, D, dtype=torch.bfloat16, device="cuda")
                sets.append((k, v))
            q = torch.randn(B, HQ, 1, D, dtype=torch.bfloat16, device="cuda")
            best = None
            for name, be in backends:
                i = [0]

                def run():
                    k, v = sets[i[0] % nsets]
                    i[0] += 1
                    with sdpa_kernel([be]):
                        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                try:
                    ms = time_ms(run)
                except Exception as ex:  # backend refuses this shape
                    print(f"  {name:9s} B={B} L={L}: unavailable ({str(ex).splitlines()[0][:80]})")
                    continue
                gbps = kv_bytes / ms / 1e6
                row = {"backend": name, "B": B, "L": L, "ms": ms, "GBps": gbps}
                results["rows"].append(row)
                print(f"  {name:9s} B={B} L={L:8d}: {ms:8.3f} ms  {gbps:7.0f} GB/s")
                if best is None or ms < best["ms"]:
                    best = row
            if best:
                print(f"best      B={B} L={L:8d}: {best['ms']:.3f} ms ({best['backend']})")
            del sets
            torch.cuda.empty_cache()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
