"""Number formats: OCP E4M3FN (fp8) and OCP E2M1 (the 4-bit codes of NVFP4), as bytes and codes."""

import math

import torch

from ._common import F64

FLOAT8_E4M3 = getattr(torch, "float8_e4m3fn", None)  # absent before torch 2.1


def _e4m3_value(code: int) -> float:
    """The value of one E4M3FN byte: 1 sign, 4 exponent (bias 7) and 3 mantissa bits; no
    infinities, S.1111.111 is NaN, the largest finite value is 448."""
    sign = -1.0 if code & 0x80 else 1.0
    exponent, mantissa = (code >> 3) & 0xF, code & 0x7
    if exponent == 0xF and mantissa == 0x7:
        return math.nan
    if exponent == 0:
        return sign * mantissa * 2.0 ** -9  # subnormal: (m / 8) * 2^-6
    return sign * (1.0 + mantissa / 8.0) * 2.0 ** (exponent - 7)


E4M3_TABLE = torch.tensor([_e4m3_value(c) for c in range(256)], dtype=F64)
E4M3_MAX = 448.0
# Codes 0x00..0x7e are the non-negative finite values, ascending with the code.
_E4M3_GRID = E4M3_TABLE[:0x7F]
_E4M3_MIDPOINTS = (_E4M3_GRID[:-1] + _E4M3_GRID[1:]) / 2


def as_bytes(t: torch.Tensor) -> torch.Tensor:
    """The raw bytes of a uint8 or float8_e4m3fn tensor, as uint8."""
    if t.dtype == torch.uint8:
        return t
    if FLOAT8_E4M3 is not None and t.dtype == FLOAT8_E4M3:
        return t.view(torch.uint8)
    raise ValueError(f"expected uint8 or float8_e4m3fn bytes, got {t.dtype}")


def decode_e4m3(codes: torch.Tensor) -> torch.Tensor:
    """E4M3FN bytes (uint8 or float8_e4m3fn) -> float64 values."""
    return E4M3_TABLE[as_bytes(codes).long()]


def encode_e4m3(x: torch.Tensor) -> torch.Tensor:
    """Float values -> E4M3FN bytes (uint8): the E4M3 value nearest to x (x's exact value;
    convert to f32 first where the spec says so), ties to the even code, saturating at
    +-448; NaN gives 0x7f with x's sign bit, and -0 (or a negative value that rounds to 0)
    gives 0x80."""
    x = x.to(F64)
    magnitude = x.abs()
    # Midpoints strictly below |x|: the lower neighbour's code (at a tie too); 0x7e past the top.
    code = torch.bucketize(magnitude, _E4M3_MIDPOINTS)
    on_midpoint = (code < 0x7E) & (magnitude == _E4M3_MIDPOINTS[code.clamp(max=0x7D)])
    code = torch.where(on_midpoint & (code % 2 == 1), code + 1, code)  # tie: the even code
    code = code.masked_fill(torch.isnan(x), 0x7F)
    code = code | (torch.signbit(x).long() << 7)
    return code.to(torch.uint8)


E2M1_MAGNITUDES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
E2M1_TABLE = torch.tensor(list(E2M1_MAGNITUDES) + [-m for m in E2M1_MAGNITUDES], dtype=F64)
# The boundary between codes i and i+1 (in units of the group scale) and whether a value
# exactly on it takes the upper code: ties go to the even code.
E2M1_BOUNDARIES = tuple(((E2M1_MAGNITUDES[i] + E2M1_MAGNITUDES[i + 1]) / 2, (i + 1) % 2 == 0)
                        for i in range(7))  # 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5


def decode_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """E2M1 codes (the low 4 bits: sign bit 3, magnitude index bits 0-2) -> float64."""
    return E2M1_TABLE[codes.long() & 0xF]


def encode_e2m1(x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The E2M1 code (uint8, 0..15) of x for group scale(s) `scale` > 0 (broadcast against
    x): the magnitude nearest |x| / scale, ties to the even code, saturating at 6, with
    x's sign; a zero magnitude is always +0 and NaN gives +0. Decided by exact comparisons
    of |x| with scale * boundary, as the spec fixes."""
    x, scale = x.to(F64), scale.to(F64)
    magnitude = x.abs()
    code = torch.zeros(x.shape, dtype=torch.long)
    for boundary, tie_goes_up in E2M1_BOUNDARIES:
        threshold = boundary * scale
        code = code + (magnitude >= threshold if tie_goes_up else magnitude > threshold).long()
    negative = torch.signbit(x) & (code != 0)
    code = torch.where(negative, code | 8, code)
    code = code.masked_fill(torch.isnan(x), 0)
    return code.to(torch.uint8)


def unpack_e2m1x2(packed: torch.Tensor) -> torch.Tensor:
    """Bytes [..., n] -> codes [..., 2n]: element 2i is the low nibble of byte i, 2i+1 the high."""
    b = packed.long()
    return torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2).to(torch.uint8)


def pack_e2m1x2(codes: torch.Tensor) -> torch.Tensor:
    """Codes [..., 2n] (0..15) -> bytes [..., n], the even element in the low nibble."""
    c = codes.long()
    return (c[..., 0::2] | (c[..., 1::2] << 4)).to(torch.uint8)
