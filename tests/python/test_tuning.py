"""msa.tuning / msa.set_tuning: a device's kernel-choice knobs (docs/tuning.md). The CUDA
part runs the same decode call in two routings and compares them (skipped visibly without a
GPU)."""
import pytest
import torch

import msa
from test_torch_cuda import cpu_copy, cuda_decode_problem
from torch_cases import needs_cuda, nmse, step_inputs


def test_cpu_backends_have_no_knobs_and_refuse_setting_one():
    assert msa.tuning("cpu-ref") == []
    with pytest.raises(ValueError, match="no knob 'decode'"):
        msa.set_tuning("cpu-ref", "decode", 1)


@needs_cuda
def test_cuda_lists_its_switches_and_hooks():
    knobs = {k["name"]: k for k in msa.tuning("cuda:0")}
    assert knobs["decode"]["env"] == "MSA_CUDA_DECODE" and knobs["decode"]["default"] == 2
    assert knobs["tier"]["shown"] in ("native", "portable")
    assert knobs["flash_splits"]["env"] == ""  # a test hook
    with pytest.raises(ValueError, match="decode"):
        msa.set_tuning("cuda:0", "decode", 7)
    with pytest.raises(ValueError, match="no knob 'nope'"):
        msa.set_tuning("cuda:0", "nope", 1)


@needs_cuda
@pytest.mark.parametrize("knob,value", [("decode", 1), ("decode", 0), ("tier", "portable")])
def test_cuda_routings_compute_the_same_decode(knob, value):
    cache = cuda_decode_problem()
    T = cache.T
    q, kk, vv, qi, ki = step_inputs(T, device="cuda", seed=7)
    cache.write(kk, vv, ki)
    kc, vc, kic, _ = cache.layer(0)
    idx, _ = msa.indexer_topk(qi, kic, cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, NQ=T)
    before = {k["name"]: k["value"] for k in msa.tuning("cuda:0")}[knob]
    msa.set_tuning("cuda:0", knob, value)
    try:
        assert {k["name"]: k["shown"] for k in msa.tuning("cuda:0")}[knob] == str(value)
        out, _ = msa.sparse_block_attention(q, kc, vc, cache.block_table, cache.kv_len, cache.cu_q, idx, NQ=T)
        torch.cuda.synchronize()
    finally:
        msa.set_tuning("cuda:0", knob, before)
    c = cpu_copy(cache)
    want, _ = msa.sparse_block_attention(q.cpu(), c.k_caches[0], c.v_caches[0], c.block_table, c.kv_len, c.cu_q,
                                         idx.cpu())
    assert nmse(out.float().cpu(), want.float()) <= 5e-5
