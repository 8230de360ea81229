#!/usr/bin/env python3
"""Per-call host cost of msa's Python package.

CPU tensors: wall time per call (time.perf_counter over many calls, median of repeats) of
an empty Python function, torch.add on 1 element, msa._C.add (the binding alone),
msa.add (wrapper + binding) on 1 element with and without a given output,
sparse_block_attention at T = 1 over a one-page cache (outputs and NQ given),
MSAWrapper.run at that size and torch.ops.msa.sparse_block_attention when registered.
The 1-element calls are the no-op-sized floor: what a call costs beyond its kernel.

CUDA tensors (when a GPU is there): host time per call, enqueue only (no synchronisation
inside the timed loop; the loop is short enough not to fill the launch queue), of
torch.add, msa.add, sparse_block_attention and MSAWrapper.run (plan outside the loop) at
a small decode shape and at M3's decode shape, and of a CUDA graph replay of
MSAWrapper.run; plus each loop's time to completion per call.

    PYTHONPATH=build/python python3 bench/python/bench_overhead.py [--quick] [--json out.json]
"""
import argparse
import statistics
import sys
import time

import torch

import msa
import msa.torch as mt
from results import write_json

SMALL = dict(Hq=4, Hkv=1, D=64, Hi=1, Di=64, Bs=64)
M3 = dict(Hq=64, Hkv=4, D=128, Hi=4, Di=128, Bs=128)


def per_call_us(fn, calls, repeats, sync=None):
    """(median, min) over repeats of host µs per call of `calls` calls; with `sync`, also
    the median µs per call until the device finished them."""
    host, done = [], []
    for _ in range(repeats):
        if sync:
            sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        if sync:
            sync()
        t2 = time.perf_counter()
        host.append((t1 - t0) / calls * 1e6)
        done.append((t2 - t0) / calls * 1e6)
    return statistics.median(host), min(host), statistics.median(done)


def decode_problem(cfg, device, context, k=16):
    """A decode step of one sequence over `context` tokens: wrapper planned, inputs made."""
    c = cfg
    cache = mt.PagedKVCache(1, context, Hkv=c["Hkv"], D=c["D"], Di=c["Di"], Bs=c["Bs"], dtype=torch.bfloat16,
                            device=device, fill=0.5)
    cache.begin_step([context - 1])  # the prefix (its slots hold the fill value)
    cache.begin_step([1])
    q = torch.randn(1, c["Hq"], c["D"], device=device).to(torch.bfloat16)
    qi = torch.randn(1, c["Hi"], c["Di"], device=device).to(torch.bfloat16)
    k = min(k, cache.max_blocks)
    w = mt.MSAWrapper().plan(cache.block_table, cache.kv_len, cache.cu_q, k=k, **c)
    kc, vc, kic, _ = cache.layer(0)
    idx, _ = msa.indexer_topk(qi, kic, cache.block_table, cache.kv_len, cache.cu_q, k=k, NQ=1)
    return cache, q, qi, w, idx


def attention_calls(cache, q, qi, w, idx):
    """name -> zero-argument call of the attention paths at one shape."""
    kc, vc, kic, _ = cache.layer(0)
    bt, kl, cu = cache.block_table, cache.kv_len, cache.cu_q
    calls = {
        "msa.sparse_block_attention (outputs given)":
            lambda: msa.sparse_block_attention(q, kc, vc, bt, kl, cu, idx, NQ=1, out=w.out, lse=w.lse),
        "MSAWrapper.run (indexer_topk + sparse)": lambda: w.run(q, qi, kc, vc, kic),
    }
    if mt.HAS_TORCH_LIBRARY:
        calls["torch.ops.msa.sparse_block_attention"] = (
            lambda: torch.ops.msa.sparse_block_attention(q, kc, vc, bt, kl, cu, idx, 1, 1, "per_kv_head", None))
    return calls


def tiny_calls(device):
    a, b = torch.ones(1, device=device), torch.ones(1, device=device)
    y = torch.empty(1, device=device)
    stream = 0 if device.type == "cpu" else torch.cuda.current_stream().cuda_stream
    calls = {"torch.add 1 element (out=)": lambda: torch.add(a, b, out=y),
             "msa.add 1 element (y given)": lambda: msa.add(a, b, y=y),
             "msa.add 1 element (allocating)": lambda: msa.add(a, b)}
    if device.type == "cpu":
        calls = dict({"empty Python function": lambda: None,
                      "msa._C.add 1 element (binding only)": lambda: msa._C.add("", stream, a, b, y)}, **calls)
    return calls


def measure(calls, n, repeats, sync, rows, device, shape):
    for name, fn in calls.items():
        fn()  # first call: opens the device, allocates workspace
        med, best, done = per_call_us(fn, n, repeats, sync)
        rows.append({"device": device, "shape": shape, "call": name, "host_us_median": med, "host_us_min": best,
                     "complete_us_median": done if sync else med})
        print(f"{device:5s} {shape:18s} {name:46s} {med:9.2f} us/call (min {best:8.2f})"
              + (f", {done:9.2f} us/call to completion" if sync else ""), flush=True)


def cpu_rows(args, rows):
    dev = torch.device("cpu")
    with torch.inference_mode():
        measure(tiny_calls(dev), args.calls, args.repeats, None, rows, "cpu", "1 element")
        measure(attention_calls(*decode_problem(SMALL, dev, SMALL["Bs"], k=1)), args.calls // 10, args.repeats,
                None, rows, "cpu", "T=1, 1 page")


def graph_replay(w, q, qi, cache):
    kc, vc, kic, _ = cache.layer(0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            w.run(q, qi, kc, vc, kic)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g, stream=s):
        w.run(q, qi, kc, vc, kic)
    return g.replay


def cuda_rows(args, rows):
    dev = torch.device("cuda")
    n = min(args.calls, 200)  # a few hundred launches stay below the launch queue's depth
    with torch.inference_mode():
        measure(tiny_calls(dev), n, args.repeats, torch.cuda.synchronize, rows, "cuda", "1 element")
        shapes = [("small T=1 4K", SMALL, 4096)] + ([] if args.quick else [("M3 T=1 128K", M3, 131072)])
        for label, cfg, ctx in shapes:
            prob = decode_problem(cfg, dev, ctx)
            calls = attention_calls(*prob)
            calls["CUDA graph replay of MSAWrapper.run"] = graph_replay(prob[3], prob[1], prob[2], prob[0])
            measure(calls, n, args.repeats, torch.cuda.synchronize, rows, "cuda", label)
            del prob
            torch.cuda.empty_cache()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls, small shapes only")
    ap.add_argument("--calls", type=int, default=None, help="calls per timed loop")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--no-cuda", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    args.calls = args.calls or (2000 if args.quick else 20000)
    args.repeats = args.repeats or (3 if args.quick else 7)
    print(f"torch {torch.__version__}, msa {msa.__version__}, backends {msa.backends()}, "
          f"torch.ops.msa: {mt.STATUS}", flush=True)
    rows = []
    cpu_rows(args, rows)
    if torch.cuda.is_available() and not args.no_cuda:
        cuda_rows(args, rows)
    if args.json:
        write_json(args.json, {"torch": torch.__version__, "msa": msa.__version__, "command": " ".join(sys.argv),
                               "rows": rows})
    return rows


if __name__ == "__main__":
    main()
