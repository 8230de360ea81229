"""examples/train_msa.py at its ci preset, shortened: it learns the retrieval (held-out loss
below the value prior ln(n_values), accuracy above chance, sparse and dense), its KL and
recall are in range, and it writes its curves and plot."""
import json
import math
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="the training example needs PyTorch")
msa = pytest.importorskip("msa", reason="the training example needs the msa package")

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "..", "examples")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    if "cpu" not in msa.backends() and "cpu-ref" not in msa.backends():
        pytest.skip("no CPU backend with the training ops in this build")
    sys.path.insert(0, EXAMPLES)
    try:
        import train_msa
    finally:
        sys.path.remove(EXAMPLES)
    out = tmp_path_factory.mktemp("train_msa")
    rep = train_msa.main(["--preset", "ci", "--steps", "140", "--warmup-steps", "100", "--out-dir", str(out)])
    return rep, out


def _mean(xs):
    return sum(xs) / len(xs)


def test_the_task_loss_falls_in_both_runs(report):
    rep, _ = report
    for name in ("sparse", "dense"):
        loss = rep["runs"][name]["loss"]
        assert all(math.isfinite(x) for x in loss)
        assert _mean(loss[-4:]) < _mean(loss[:4]) - 0.2, (name, loss)


def test_both_models_retrieve_above_chance_on_held_out_data(report):
    # the value prior alone gives loss ln(n_values) and accuracy 1 / n_values
    rep, _ = report
    prior = math.log(rep["task"]["n_values"])
    for name in ("sparse", "dense"):
        r = rep["final"][name]
        assert r["loss"] < prior - 0.5, (name, r, prior)
        assert r["acc"] > 4 * rep["chance"], (name, r)


def test_the_sparse_run_has_both_stages(report):
    rep, _ = report
    assert rep["runs"]["sparse"]["stage"] == ["dense"] * 100 + ["sparse"] * 40
    assert set(rep["runs"]["dense"]["stage"]) == {"dense"}


def test_kl_is_finite_and_non_negative_and_recall_is_a_share(report):
    rep, _ = report
    for name, curves in rep["runs"].items():
        assert all(math.isfinite(x) and x >= 0 for x in curves["kl"]), name
        for key in ("recall", "recall_query"):
            assert all(0.0 <= x <= 1.0 for x in curves[key]), (name, key)
    for r in rep["final"].values():
        assert 0.0 <= r["acc"] <= 1.0 and 0.0 <= r["recall"] <= 1.0 and r["kl"] >= 0


def test_the_sparse_stage_attends_to_less_than_everything(report):
    # k blocks out of up to 8: a selection that covered everything would give recall 1
    rep, _ = report
    assert _mean(rep["runs"]["sparse"]["recall"]) < 0.999


def test_outputs_are_written(report):
    rep, out = report
    with open(out / "train_msa.json") as f:
        on_disk = json.load(f)
    assert on_disk["runs"]["sparse"]["loss"] == rep["runs"]["sparse"]["loss"]
    assert set(on_disk["final"]) == {"sparse", "dense", "dense_model_sparse_inference"}
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return
    png = out / "train_msa.png"
    assert png.stat().st_size > 1000 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in os.listdir(out) if p.endswith(".tmp")]
