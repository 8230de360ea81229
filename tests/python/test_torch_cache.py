"""msa.torch.PagedKVCache: appends and step writes into their slots, bit for bit what
msa.reference's kv_append writes (quantized keys too), and running out of pages."""
import pytest
import torch

import msa.torch as mt
from msa import reference as ref
from torch_cases import make_cache, needs_ki_format, step_inputs


def gather_sequence(cache, b, l=0):
    """Sequence b's cached k, v [kv_len][Hkv][D] and ki [kv_len][Di], read through block_table."""
    L, Bs = int(cache.kv_len_host[b]), cache.Bs
    pages = cache.block_table[b, :-(-L // Bs)].long().cpu()
    kc, vc, kic, _ = (t.cpu() if t is not None else None for t in cache.layer(l))
    k = kc[pages].transpose(1, 2).reshape(-1, cache.Hkv, cache.D)[:L]
    v = vc[pages].transpose(1, 2).reshape(-1, cache.Hkv, cache.D)[:L]
    ki = kic[pages].reshape(-1, kic.shape[-1])[:L]
    return k, v, ki


def test_cache_append_grows_kv_len_and_writes_slots():
    cache = make_cache([0, 0])
    hist = [[], []]
    for step, q_lens in enumerate(([17, 33], [1, 1], [0, 5], [1, 1])):
        T = sum(q_lens)
        _, kk, vv, _, ki = step_inputs(T, seed=10 + step)
        cu = torch.tensor([0, q_lens[0], T], dtype=torch.int32)
        cache.append(kk, vv, ki, cu)
        for b in range(2):
            rows = slice(int(cu[b]), int(cu[b + 1]))
            hist[b].append((kk[rows], vv[rows], ki[rows]))
    assert cache.kv_len.tolist() == [19, 40]
    assert cache.positions.tolist() == [18, 39]
    for b in range(2):
        k, v, ki = gather_sequence(cache, b)
        assert torch.equal(k, torch.cat([h[0] for h in hist[b]]))
        assert torch.equal(v, torch.cat([h[1] for h in hist[b]]))
        assert torch.equal(ki, torch.cat([h[2] for h in hist[b]]))


def test_cache_write_equals_reference_kv_append_bitwise():
    cache = make_cache([30, 9])
    cache.begin_step([30, 9])
    before = [t.clone() for t in cache.layer(0)[:3]]
    _, kk, vv, _, ki = step_inputs(39, seed=4)
    cache.write(kk, vv, ki)
    want = ref.kv_append(kk, vv, cache.block_table, cache.kv_len, cache.cu_q, *before[:2], ki=ki, ki_cache=before[2])
    for got, exp in zip(cache.layer(0)[:3], want):
        assert torch.equal(got.view(torch.int16), exp.view(torch.int16))


def as_bytes(t):
    return t if t is None or t.dtype != getattr(torch, "float8_e4m3fn", None) else t.view(torch.uint8)


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8", "fp8_scaled"])
def test_cache_quantized_keys_equal_reference_kv_append(fmt):
    needs_ki_format(fmt)
    cache = make_cache([21], ki_format=fmt)
    cache.begin_step([21])
    _, kk, vv, _, ki = step_inputs(21, seed=5)
    kic0 = cache.ki_caches[0].clone()
    kis0 = None if cache.ki_scales[0] is None else cache.ki_scales[0].clone()
    cache.write(kk, vv, ki)
    want = ref.kv_append(kk, vv, cache.block_table, cache.kv_len, cache.cu_q, cache.k_caches[0],
                         cache.v_caches[0], ki=ki, ki_cache=kic0, ki_scale=kis0)
    assert torch.equal(as_bytes(cache.ki_caches[0]), as_bytes(want[2]))
    if kis0 is not None:
        assert torch.equal(as_bytes(cache.ki_scales[0]), as_bytes(want[3]))


def test_cache_out_of_pages_and_release():
    cache = mt.PagedKVCache(2, 32, Hkv=1, D=8, Di=8, Bs=16, num_pages=3, dtype=torch.float32)
    cache.begin_step([32, 16])
    assert cache.free_pages() == 0
    with pytest.raises(RuntimeError, match="out of pages"):
        cache.begin_step([0, 1])
    cache.release(0)
    assert cache.free_pages() == 2 and cache.kv_len_host.tolist() == [0, 16]
    with pytest.raises(ValueError, match="max_blocks"):
        cache.begin_step([33, 0])
