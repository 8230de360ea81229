"""msa.reference's kv_append: every token in its slot, the indexer keys in each key format."""
import pytest
import torch

from msa import reference as ref
from reference_cases import NAN, i32


def kv_append_case():
    torch.manual_seed(8)
    P, Hkv, Bs, D, Di = 4, 2, 4, 3, 16
    k_cache = torch.full((P, Hkv, Bs, D), NAN, dtype=torch.bfloat16)
    v_cache = torch.full((P, Hkv, Bs, D), NAN, dtype=torch.bfloat16)
    # seq 0: kv_len 6, q_len 3 -> positions 3, 4, 5: block 0 slot 3, block 1 slots 0, 1.
    table = i32([[2, 0], [3, 1]])
    kv_len, cu = i32([6, 1]), i32([0, 3, 4])  # seq 1: position 0 -> page 3 slot 0
    k = torch.randn(4, Hkv, D).to(torch.bfloat16)
    v = torch.randn(4, Hkv, D).to(torch.bfloat16)
    ki = torch.randn(4, Di) * 10
    return k_cache, v_cache, table, kv_len, cu, k, v, ki, Bs, Di


def test_kv_append_writes_each_token_into_its_slot():
    k_cache, v_cache, table, kv_len, cu, k, v, ki, Bs, Di = kv_append_case()
    k_out, v_out = ref.kv_append(k, v, table, kv_len, cu, k_cache, v_cache)
    placed = {(2, 3): 0, (0, 0): 1, (0, 1): 2, (3, 0): 3}  # (page, slot) -> token
    for page in range(4):
        for slot in range(Bs):
            if (page, slot) in placed:
                t = placed[(page, slot)]
                assert torch.equal(k_out[page, :, slot], k[t]) and torch.equal(v_out[page, :, slot], v[t])
            else:
                assert torch.isnan(k_out[page, :, slot].float()).all()
    assert k_out.dtype == torch.bfloat16
    assert torch.isnan(k_cache.float()).all()  # the input is not modified


def test_kv_append_indexer_keys_per_format():
    k_cache, v_cache, table, kv_len, cu, k, v, ki, Bs, Di = kv_append_case()
    args = (k, v, table, kv_len, cu, k_cache, v_cache)
    # bf16 keys: f32 then bf16 (round to nearest even).
    plain = torch.zeros((4, Bs, Di), dtype=torch.bfloat16)
    *_, ki_out = ref.kv_append(*args, ki=ki, ki_cache=plain)
    assert torch.equal(ki_out[0, 1], ki[2].to(torch.bfloat16))
    # fp8 bytes without a scale: e4m3 of the value itself.
    fp8 = torch.zeros((4, Bs, Di), dtype=torch.uint8)
    *_, ki_out = ref.kv_append(*args, ki=ki, ki_cache=fp8, ki_format="fp8_e4m3")
    assert torch.equal(ki_out[3, 0], ref.encode_e4m3(ki[3]))
    # fp8 bytes with a scale: amax / 448 per token, 448 at the largest |x|.
    scale = torch.full((4, Bs), NAN, dtype=torch.float32)
    *_, ki_out, scale_out = ref.kv_append(*args, ki=ki, ki_cache=fp8, ki_scale=scale, ki_format="fp8_e4m3")
    amax = ki[1].abs().max()
    assert scale_out[0, 0].item() == (amax / 448).item()
    assert ref.decode_e4m3(ki_out[0, 0]).abs().max().item() == 448.0
    assert torch.isnan(scale_out[1]).all()  # untouched page
    # NVFP4: Di/2 code bytes and Di/16 scale bytes per token, as quantize_nvfp4 gives them.
    codes = torch.zeros((4, Bs, Di // 2), dtype=torch.uint8)
    scales = torch.zeros((4, Bs, Di // 16), dtype=torch.uint8)
    *_, ki_out, scale_out = ref.kv_append(*args, ki=ki, ki_cache=codes, ki_scale=scales)
    want_codes, want_scale = ref.quantize_nvfp4(ki[0:1])
    assert torch.equal(ki_out[2, 3], want_codes[0]) and torch.equal(scale_out[2, 3], want_scale[0])
    decoded = ref.decode_nvfp4(ki_out[2, 3], scale_out[2, 3])
    err = (decoded - ki[0].double()).abs().max().item()
    assert 0 < err <= ki[0].abs().max().item() / 6  # half a step of the coarsest grid interval
    with pytest.raises(ValueError, match="ki"):
        ref.kv_append(*args, ki=ki)
