"""msa.torch.MSAWrapper: plan/run equals the plain op calls, re-planning keeps the buffers'
addresses, and the layer through a wrapper equals the layer."""
import pytest
import torch

import msa
import msa.torch as mt
from msa import reference as ref
from torch_cases import CFG, layer, make_cache, step_inputs


def plain_layer(cache, q, qi, *, k, n_sink, n_local=1, Qb=1, NQ=None):
    kc, vc, kic, kis = cache.layer(0)
    args = (cache.block_table, cache.kv_len, cache.cu_q)
    idx, cnt = msa.indexer_topk(qi, kic, *args, ki_scale=kis, Qb=Qb, NQ=NQ, k=k, n_sink=n_sink, n_local=n_local)
    out, lse = msa.sparse_block_attention(q, kc, vc, *args, idx, Qb=Qb, NQ=NQ)
    return idx, cnt, out, lse


@pytest.mark.parametrize("Qb", [1, 8])
@pytest.mark.parametrize("use_workspace", [False, True])
def test_wrapper_plan_run_equals_plain_calls(Qb, use_workspace):
    cache = make_cache([50, 3, 77])
    cu = cache.begin_step([50, 3, 77])
    q, kk, vv, qi, ki = step_inputs(130, seed=8)
    cache.write(kk, vv, ki)
    ws = torch.empty(1 << 20, dtype=torch.uint8) if use_workspace else None
    w = mt.MSAWrapper(ws).plan(cache.block_table, cache.kv_len, cu, Qb=Qb, k=5, n_sink=1, **CFG)
    assert w.NQ == ref.count_query_blocks(cache.cu_q, cache.kv_len, Qb)
    kc, vc, kic, _ = cache.layer(0)
    out, lse = w.run(q, qi, kc, vc, kic, return_lse=True)
    idx, cnt, out2, lse2 = plain_layer(cache, q, qi, k=5, n_sink=1, Qb=Qb)
    assert torch.equal(w.block_idx, idx) and torch.equal(w.block_cnt, cnt)
    assert torch.equal(out, out2) and torch.equal(lse, lse2)
    if use_workspace:
        base, end = ws.data_ptr(), ws.data_ptr() + ws.numel()
        assert all(base <= t.data_ptr() < end for t in (w.out, w.lse, w.block_idx, w.block_score))


def test_wrapper_replan_keeps_addresses():
    cache = make_cache([20, 20])
    w = mt.MSAWrapper()
    cache.begin_step([1, 1])
    w.plan(cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, **CFG)
    ptrs = [t.data_ptr() for t in (w.out, w.lse, w.block_idx, w.block_table, w.kv_len, w.cu_q)]
    cache.begin_step([1, 1])
    w.plan(cache.block_table, cache.kv_len, cache.cu_q, k=4, n_sink=1, **CFG)
    assert ptrs == [t.data_ptr() for t in (w.out, w.lse, w.block_idx, w.block_table, w.kv_len, w.cu_q)]
    assert w.kv_len.tolist() == [2, 2]


def test_wrapper_plan_checks_arguments():
    bt, kl, cu = torch.zeros((1, 4), dtype=torch.int32), torch.tensor([10], dtype=torch.int32), torch.tensor([0, 1])
    w = mt.MSAWrapper()
    with pytest.raises(ValueError, match="'Hi'"):
        w.plan(bt, kl, cu, **dict(CFG, Hi=1))
    with pytest.raises(ValueError, match="'k'"):
        w.plan(bt, kl, cu, k=1, n_sink=1, **CFG)
    with pytest.raises(ValueError, match="'kv_len'"):
        w.plan(bt, torch.tensor([65]), torch.tensor([0, 1]), k=4, **CFG)
    with pytest.raises(ValueError, match="'cu_q'"):
        w.plan(bt, kl, torch.tensor([0, 11]), k=4, **CFG)
    with pytest.raises(ValueError, match="'workspace'"):
        mt.MSAWrapper(torch.empty(8, dtype=torch.uint8)).plan(bt, kl, cu, k=4, **CFG)
    with pytest.raises(RuntimeError, match="plan"):
        mt.MSAWrapper().run(*[torch.empty(0)] * 5)


def test_wrapper_dense_equals_plain_dense():
    cache = make_cache([40])
    cu = cache.begin_step([40])
    q, kk, vv, qi, ki = step_inputs(40, seed=9)
    cache.write(kk, vv, ki)
    w = mt.MSAWrapper().plan(cache.block_table, cache.kv_len, cu, k=4, **CFG)
    out = w.run_dense(q, cache.k_caches[0], cache.v_caches[0])
    out2, _ = msa.dense_attention(q, cache.k_caches[0], cache.v_caches[0], cache.block_table, cache.kv_len, cu)
    assert torch.equal(out, out2)


def test_layer_through_wrapper_equals_layer():
    cache = make_cache([60], layers=2)
    cu = cache.begin_step([60])
    q, kk, vv, qi, ki = step_inputs(60, seed=11)
    w = mt.MSAWrapper().plan(cache.block_table, cache.kv_len, cu, k=4, n_sink=1, **CFG)
    with torch.no_grad():
        a = layer(layer_idx=0)(q, kk, vv, qi, ki, cache, cu).clone()
        b = layer(layer_idx=1)(q, kk, vv, qi, ki, cache, cu, wrapper=w)
    assert torch.equal(a, b)
