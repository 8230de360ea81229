"""The indexer key formats of ki_cache: plain, fp8 E4M3 (optionally with a per-token
scale) and NVFP4; see msa.reference's docstring."""

from typing import Optional, Tuple

import torch

from ._common import F64, _require
from .number_formats import (E4M3_MAX, FLOAT8_E4M3, as_bytes, decode_e2m1, decode_e4m3, encode_e2m1,
                             encode_e4m3, pack_e2m1x2, unpack_e2m1x2)

PLAIN_KEY_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
NVFP4_GROUP = 16  # dims per NVFP4 scale


def decode_nvfp4(ki_cache: torch.Tensor, ki_scale: torch.Tensor) -> torch.Tensor:
    """NVFP4 keys [..., Di/2] bytes with E4M3 group scales [..., Di/16] -> float64 [..., Di]:
    element d is e2m1(code d) * e4m3(scale d // 16). A NaN scale makes its group NaN."""
    values = decode_e2m1(unpack_e2m1x2(ki_cache))
    scales = decode_e4m3(ki_scale).repeat_interleave(NVFP4_GROUP, dim=-1)
    return values * scales


_F32_ONE_SIXTH = torch.tensor(1.0 / 6.0, dtype=torch.float32)  # f32(1/6), bits 0x3e2aaaab


def quantize_nvfp4(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Keys [..., Di] -> (codes [..., Di/2] uint8, scale bytes [..., Di/16] uint8), the spec's
    kv_append rule per group of 16 dims, every value first converted to f32:
    amax = the largest |x| that is not NaN; scale = e4m3(amax * f32(1/6)) (f32 product,
    nearest even, saturating at 448); codes = encode_e2m1(x, scale), all 0 if scale is 0."""
    Di = x.shape[-1]
    _require(Di % NVFP4_GROUP == 0, "ki", f"NVFP4 keys need Di to be a multiple of 16, got {Di}")
    groups = x.to(torch.float32).reshape(*x.shape[:-1], Di // NVFP4_GROUP, NVFP4_GROUP)
    amax = groups.abs().masked_fill(torch.isnan(groups), 0.0).amax(dim=-1)
    scale_bytes = encode_e4m3(amax * _F32_ONE_SIXTH)
    scale = decode_e4m3(scale_bytes).unsqueeze(-1)
    codes = encode_e2m1(groups, scale).masked_fill(scale == 0, 0)
    return pack_e2m1x2(codes.reshape(x.shape)), scale_bytes


def quantize_fp8_scaled(x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Keys [..., Di] -> (E4M3 bytes [..., Di], f32 scale [...]) for an fp8 cache with a
    ki_scale, computed in f32: scale = amax / 448 with amax the largest non-NaN |x| (1 for
    a row with amax = 0), stored code = e4m3(x / scale) (nearest even, saturating).
    docs/spec.md leaves this rule open; it is the rule of msa's cpu-ref backend."""
    x32 = x.to(torch.float32)
    amax = x32.abs().masked_fill(torch.isnan(x32), 0.0).amax(dim=-1)
    scale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    return encode_e4m3(x32 / scale.unsqueeze(-1)), scale


def indexer_key_format(ki_cache: torch.Tensor, ki_scale: Optional[torch.Tensor], Di: int,
                       ki_format: Optional[str] = None) -> str:
    """"plain", "fp8_e4m3" or "nvfp4" (see msa.reference's docstring), with the shapes checked."""
    _require(ki_cache.dim() == 3, "ki_cache", f"must be [P][Bs][Di], got shape {tuple(ki_cache.shape)}")
    _require(ki_format in (None, "fp8_e4m3", "nvfp4"), "ki_format",
             f"must be None, 'fp8_e4m3' or 'nvfp4', got {ki_format!r}")
    P, Bs, width = ki_cache.shape
    if ki_cache.dtype in PLAIN_KEY_DTYPES:
        _require(ki_format is None, "ki_format", f"does not apply to {ki_cache.dtype} keys")
        fmt = "plain"
    elif FLOAT8_E4M3 is not None and ki_cache.dtype == FLOAT8_E4M3:
        _require(ki_format in (None, "fp8_e4m3"), "ki_format", "float8_e4m3fn keys are fp8_e4m3")
        fmt = "fp8_e4m3"
    elif ki_cache.dtype == torch.uint8:
        fmt = ki_format or "nvfp4"
    else:
        raise ValueError(f"ki_cache: unsupported dtype {ki_cache.dtype}")

    if fmt == "nvfp4":
        _require(Di % NVFP4_GROUP == 0, "ki_cache", f"NVFP4 keys need Di % 16 == 0, got Di = {Di}")
        _require(width * 2 == Di, "ki_cache",
                 f"NVFP4 keys are [P][Bs][Di/2] = [.][.][{Di // 2}], got {width} bytes per row "
                 "(pass ki_format='fp8_e4m3' for a uint8 tensor of E4M3 bytes)")
        _require(ki_scale is not None, "ki_scale", "is required with NVFP4 keys: [P][Bs][Di/16] e4m3 bytes")
        _require(tuple(ki_scale.shape) == (P, Bs, Di // NVFP4_GROUP), "ki_scale",
                 f"must be [P][Bs][Di/16] = {(P, Bs, Di // NVFP4_GROUP)}, got {tuple(ki_scale.shape)}")
        as_bytes(ki_scale)  # uint8 or float8_e4m3fn
        return fmt
    _require(width == Di, "ki_cache", f"must be [P][Bs][Di] with Di = {Di}, got {tuple(ki_cache.shape)}")
    if ki_scale is not None:
        _require(fmt == "fp8_e4m3", "ki_scale", "is only allowed with fp8_e4m3 or NVFP4 keys")
        _require(tuple(ki_scale.shape) == (P, Bs), "ki_scale",
                 f"must be [P][Bs] = {(P, Bs)}, got {tuple(ki_scale.shape)}")
        _require(ki_scale.is_floating_point(), "ki_scale", "fp8 key scales are floats (f32)")
    return fmt


def decode_indexer_keys(ki_cache: torch.Tensor, ki_scale: Optional[torch.Tensor], Di: int,
                        ki_format: Optional[str] = None) -> Tuple[torch.Tensor, Optional[torch.Tensor]]:
    """The keys as float64 [P][Bs][Di] and, for fp8 keys with a ki_scale, the per-token
    scales [P][Bs] (else None)."""
    fmt = indexer_key_format(ki_cache, ki_scale, Di, ki_format)
    if fmt == "nvfp4":
        return decode_nvfp4(as_bytes(ki_cache), ki_scale), None
    if fmt == "fp8_e4m3":
        return decode_e4m3(ki_cache), (None if ki_scale is None else ki_scale.to(F64))
    return ki_cache.to(F64), None
