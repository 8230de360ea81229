"""The Hugging Face decoder-layer example and the benchmarks' CPU paths (bench/python) run and
agree with msa."""
import json
import math
import os
import sys
import runpy

import torch

from torch_cases import ROOT, load_example


def test_hf_decoder_layer_example_runs_on_cpu(capsys):
    assert load_example()["run"](torch.device("cpu"), torch.bfloat16)
    assert "matches dense attention" in capsys.readouterr().out


def load_bench(name):
    """A benchmark script's globals, loaded as `python3 bench/python/<name>` would run it
    (its folder first on sys.path, for its sibling modules)."""
    folder = os.path.join(ROOT, "bench", "python")
    sys.path.insert(0, folder)
    try:
        return runpy.run_path(os.path.join(folder, name))
    finally:
        sys.path.remove(folder)


def test_bench_layer_quick_on_cpu_agrees_with_msa():
    rows = load_bench("bench_layer.py")["main"](["--quick", "--device", "cpu", "--iters", "1",
                                                   "--cases", "decode_b2,decode_b2_nvfp4,prefill128"])
    assert [r["case"] for r in rows] == ["decode_b2", "decode_b2_nvfp4", "prefill128"]
    for r in rows:
        assert r["msa_eager_ms"] > 0
    for r in (rows[0], rows[2]):  # the PyTorch-native MSA layer computes what msa computes
        assert r["torch_msa_nmse_vs_msa"] <= 5e-5 and r["sdpa_dense_ms"] > 0


def test_bench_training_quick_on_cpu_msa_grads_agree_with_torch_autograd(tmp_path):
    bench = load_bench("bench_training.py")
    path = tmp_path / "training.json"
    rows = bench["main"](["--quick", "--iters", "1", "--slow-iters", "1", "--json", str(path)])
    assert json.loads(path.read_text())["rows"] == rows
    ops = {(r["L"], r.get("selection"), r["op"]): r for r in rows}
    for L in (256, 512):
        for op in ("msa_score", "msa_topk", "sdpa_fwd", "sdpa_bwd"):
            assert 0 < ops[(L, None, op)]["ms"] < math.inf
        for kind in ("random", "correlated"):
            for op in ("msa_fwd", "msa_bwd", "msa_kl", "msa_layer", "torch_sparse_fwd_bwd"):
                r = ops[(L, kind, op)]
                assert 0 < r["ms"] < math.inf and 0 < r["tflops"] < math.inf, r
            native = ops[(L, kind, "torch_sparse_fwd_bwd")]  # bf16 autograd vs msa's f32 gradients
            for g in ("out", "dq", "dk", "dv"):
                assert native["nmse_" + g] <= 1e-4, (L, kind, g, native["nmse_" + g])


def test_bench_training_selections_are_valid_and_correlated_ones_drift():
    bench = load_bench("bench_training.py")
    cfg, T = bench["TINY"], 512
    Bs, k = cfg["Bs"], cfg["k"]
    overlap = {}
    for kind in ("random", "correlated"):
        idx = bench["selections"](kind, cfg, T, torch.device("cpu"), seed=3)
        assert idx.shape == (T, cfg["Hkv"], k) and idx.dtype == torch.int32
        idx = idx.long()
        cur = (torch.arange(T) // Bs)[:, None]
        valid = idx >= 0
        assert (valid.sum(-1) == torch.clamp(cur + 1, max=k)).all()  # k blocks, or every visible one
        assert (idx[valid] <= cur.expand(-1, cfg["Hkv"])[..., None].expand_as(idx)[valid]).all()
        assert (valid[..., :-1] >= valid[..., 1:]).all()  # -1 padding last
        ordered = torch.where(valid, idx, torch.full_like(idx, T))
        assert (~valid[..., 1:] | (ordered[..., 1:] > ordered[..., :-1])).all()  # ascending, no duplicates
        assert (idx == 0).any(-1).all() and (idx == cur[..., None]).any(-1).all()  # sink and local block
        overlap[kind] = bench["adjacent_overlap"](idx)
    assert overlap["correlated"] > 0.9 and overlap["random"] < 0.8, overlap


def test_bench_overhead_quick_on_cpu():
    rows = load_bench("bench_overhead.py")["main"](["--quick", "--calls", "20", "--repeats", "1", "--no-cuda"])
    names = {r["call"] for r in rows}
    assert "MSAWrapper.run (indexer_topk + sparse)" in names and all(r["host_us_median"] > 0 for r in rows)
