"""How the package takes tensors: in place through DLPack, int64 indices, bad inputs
refused with a ValueError naming the argument, which backend runs a call."""
import os
import re

import numpy as np
import pytest
import torch

import msa
from cases import PagedBatch, random_selection


@pytest.fixture
def batch(gen):
    return PagedBatch(gen, [1, 3], [70, 130])


def _sparse_args(gen, b):
    return (b.q, b.k_cache, b.v_cache, *b.paged(), random_selection(gen, b, 2, k=2))


def _project_version():
    """The version of the top-level CMakeLists.txt's project(), the one place it is set."""
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "CMakeLists.txt")) as f:
        return re.search(r"project\(msa VERSION (\d+\.\d+\.\d+)", f.read()).group(1)


def test_version_devices_backends():
    assert msa.__version__ == _project_version()
    names = msa.backends()
    assert "cpu-ref" in names
    listed = {d["backend"]: d for d in msa.devices()}
    assert listed["cpu-ref"]["devices"] == ["cpu-ref"] and listed["cpu-ref"]["compiled"]
    assert all(isinstance(d["unavailable_reason"], str) for d in listed.values())


def test_cpu_tensors_run_on_the_simd_backend_when_built():
    want = "cpu" if "cpu" in msa.backends() else "cpu-ref"
    assert msa._C.default_host_device() == want


def test_out_tensors_are_written_in_place(gen, batch):
    args = _sparse_args(gen, batch)
    out = torch.full_like(batch.q, float("nan"))
    lse = torch.full(batch.q.shape[:2], float("nan"))
    got_out, got_lse = msa.sparse_block_attention(*args, out=out, lse=lse)
    assert got_out is out and got_lse is lse
    want_out, want_lse = msa.sparse_block_attention(*args)
    assert torch.equal(out, want_out) and torch.equal(lse, want_lse)


def test_numpy_results_share_the_given_memory(gen):
    a, b = np.ones((3, 5), np.float32), np.full((3, 5), 2.0, np.float32)
    y = np.zeros((3, 5), np.float32)
    got = msa.add(a, b, y=y)
    assert got is y and np.shares_memory(got, y) and (y == 3).all()


def test_inputs_are_read_in_place_not_copied(gen):
    # A torch view of a NumPy array and the array itself are the same memory: msa reads
    # the bytes where they are, so an edit through one is seen through the other.
    base = np.zeros((2, 4), np.float32)
    view = torch.from_numpy(base)
    base[1, 2] = 7.0
    assert msa.argmax(view)[1] == 2


def test_int64_indices_on_the_cpu_are_narrowed(gen, batch):
    args = list(_sparse_args(gen, batch))
    want = msa.sparse_block_attention(*args)
    for i in (3, 4, 5, 6):  # block_table, kv_len, cu_q, block_idx
        args64 = list(args)
        args64[i] = args[i].long()
        got = msa.sparse_block_attention(*args64)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])


def test_int64_values_that_do_not_fit_are_refused(gen, batch):
    args = list(_sparse_args(gen, batch))
    args[3] = args[3].long()
    args[3][0, 0] = 2**40
    with pytest.raises(ValueError, match="'block_table'.*does not fit int32"):
        msa.sparse_block_attention(*args)


def test_int64_outputs_are_refused(gen, batch):
    NQ = int(batch.cu_q[-1])
    scores = torch.randn(NQ, 2, batch.max_blocks, generator=gen)
    with pytest.raises(ValueError, match="'block_idx'.*int32"):
        msa.block_topk(scores, batch.kv_len, batch.cu_q, Bs=batch.Bs, k=2,
                       block_idx=torch.empty((NQ, 2, 2), dtype=torch.int64))


def test_non_contiguous_input_names_the_argument(gen, batch):
    args = list(_sparse_args(gen, batch))
    args[0] = args[0].transpose(0, 1).contiguous().transpose(0, 1)
    with pytest.raises(ValueError, match="argument 'q'.*contiguous"):
        msa.sparse_block_attention(*args)


@pytest.mark.parametrize("arg,bad,message", [
    (0, lambda t: t[0], "argument 'q'.*rank"),
    (1, lambda t: t.double(), "argument 'k_cache'.*float64"),
    (2, lambda t: t[:, :1], "argument 'v_cache'"),
    (6, lambda t: t.float(), "argument 'block_idx'"),
    (4, lambda t: [70, 130], "argument 'kv_len'.*expected a tensor"),
])
def test_bad_inputs_name_the_argument(gen, batch, arg, bad, message):
    args = list(_sparse_args(gen, batch))
    args[arg] = bad(args[arg])
    with pytest.raises(ValueError, match=message):
        msa.sparse_block_attention(*args)


def test_bad_outputs_and_aliasing_name_the_argument(gen, batch):
    args = _sparse_args(gen, batch)
    with pytest.raises(ValueError, match="argument 'out'"):
        msa.sparse_block_attention(*args, out=torch.empty(batch.q.shape, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="argument 'lse'"):
        msa.sparse_block_attention(*args, lse=torch.empty(3))
    buf = torch.randn(40, generator=gen)
    a, y = buf[:32].view(4, 8), buf[4:36].view(4, 8)
    with pytest.raises(ValueError, match="argument 'y'.*overlaps"):
        msa.add(a, a, y=y)


def test_bad_scalars_name_the_parameter(gen, batch):
    args = _sparse_args(gen, batch)
    for scale in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="argument 'scale'"):
            msa.sparse_block_attention(*args, scale=scale)
    with pytest.raises(ValueError, match="argument 'scale'.*not representable"):
        msa.sparse_block_attention(*args, scale=1e-50)
    with pytest.raises(ValueError, match="argument 'mode'"):
        msa.sparse_block_attention(*args, mode="dsa")
    with pytest.raises(ValueError, match="argument 'Qb'"):
        msa.sparse_block_attention(*args, Qb=3, NQ=4)
    with pytest.raises(ValueError, match="argument 'k'"):
        msa.block_topk(torch.zeros(1, 1, 1), batch.kv_len, batch.cu_q, k=0)
    with pytest.raises(ValueError, match="argument 'k'.*32-bit"):
        msa.indexer_topk(batch.qi, batch.ki_cache, *batch.paged(), k=2**40, block_idx=torch.empty(4, 2, 1, dtype=torch.int32))


def test_bad_page_id_is_an_error_on_the_cpu_backends(gen, batch):
    args = list(_sparse_args(gen, batch))
    args[3] = args[3].clone()
    args[3][1, 0] = 10_000
    for backend in ("cpu-ref", "cpu") if "cpu" in msa.backends() else ("cpu-ref",):
        with pytest.raises(ValueError, match="block_table"):
            msa.sparse_block_attention(*args, backend=backend)


def test_unknown_backend_names_the_argument(gen):
    x = torch.randn(2, 2, generator=gen)
    with pytest.raises(ValueError, match="backend.*tpu"):
        msa.add(x, x, backend="tpu:0")


def test_tensors_that_need_grad_are_refused_by_ops_without_a_backward(gen):
    x = torch.randn(4, 8, generator=gen, requires_grad=True)
    w = torch.randn(3, 8, generator=gen)
    with pytest.raises(RuntimeError, match="matmul.*no backward"):
        msa.matmul(x, w)
    with torch.no_grad():
        y = msa.matmul(x, w)
    assert not y.requires_grad


def test_nq_is_computed_for_query_blocks(gen, batch):
    idx = random_selection(gen, batch, 2, k=2, Qb=4)
    out, lse = msa.sparse_block_attention(batch.q, batch.k_cache, batch.v_cache, *batch.paged(), idx, Qb=4)
    with pytest.raises(ValueError, match="argument '(NQ|block_idx)'"):
        msa.sparse_block_attention(batch.q, batch.k_cache, batch.v_cache, *batch.paged(), idx, Qb=4,
                                   NQ=idx.shape[0] + 1)


def test_empty_batches_are_valid(gen, batch):
    # T = 0 and B = 0 are valid calls with nothing to do (torch gives empty tensors odd strides).
    q = torch.randn(0, 4, 64)
    idx = torch.zeros(0, 2, 2, dtype=torch.int32)
    cu_q = torch.zeros(3, dtype=torch.int32)
    out, lse = msa.sparse_block_attention(q, batch.k_cache, batch.v_cache, batch.block_table, batch.kv_len, cu_q, idx)
    assert out.shape == (0, 4, 64) and lse.shape == (0, 4)
