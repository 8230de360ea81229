"""A float64 PyTorch reference of the MSA ops, written from docs/spec.md.

Each function is one op of the contract, written to be read: the math of the op, the
masks, and the selection rules appear directly in the code. Loops run over sequences,
query blocks and heads; work inside a row is vectorized. This module imports only torch
(no ``msa._C``) and runs on torch 1.13 and torch 2.x.

Conventions
-----------
- Arguments are CPU torch tensors. Float tensors are read exactly (f32, bf16, f16 and
  f64 all convert to float64 without rounding); index tensors may be int32 or int64.
- The names and order of arguments follow docs/python.md: required tensors positional,
  everything else keyword. There is no ``out=`` and no ``backend=``.
- Float results are float64 and index results int32. ``kv_append`` and
  ``scatter_visual`` return updated copies: ``kv_append``'s caches keep their own dtypes
  (their bits are what the contract fixes), ``scatter_visual``'s ``x`` is float64.
- Invalid arguments raise ``ValueError`` naming the argument.
- ``scale=None`` is ``1/sqrt(D)`` (``1/sqrt(Di)`` for the indexer) in float64; a given
  scale must be a finite float > 0.

Indexer key formats (``indexer_score``, ``indexer_topk``, ``kv_append``)
-----------------------------------------------------------------------
``ki_format=None`` reads the format off ``ki_cache``'s dtype:

- float32, bfloat16, float16: plain keys ``[P][Bs][Di]``; ``ki_scale`` must be absent.
- ``torch.float8_e4m3fn`` (torch >= 2.1): fp8 E4M3 keys ``[P][Bs][Di]`` with an optional
  per-token ``ki_scale[P][Bs]`` (a float tensor; absent = 1).
- uint8: NVFP4 keys ``[P][Bs][Di/2]`` (``fp4_e2m1x2``: two E2M1 codes per byte, the low
  nibble the even element) with the required group scales ``ki_scale[P][Bs][Di/16]``
  holding E4M3 bytes (uint8 or ``torch.float8_e4m3fn``). This is how msa's Python package
  reads a uint8 ``ki_cache`` too.

``ki_format="fp8_e4m3"`` reads a uint8 ``ki_cache`` as E4M3 bytes instead (for torch
without float8 dtypes); ``ki_format="nvfp4"`` names the NVFP4 reading explicitly. The
shape must fit the format: fp8 keys have ``Di`` bytes per row, NVFP4 keys ``Di/2``.
"""

import math
from typing import List, NamedTuple, Optional, Set, Tuple

import torch

__all__ = [
    "as_bytes", "decode_e4m3", "encode_e4m3", "decode_e2m1", "encode_e2m1", "unpack_e2m1x2",
    "pack_e2m1x2", "decode_nvfp4", "quantize_nvfp4", "quantize_fp8_scaled",
    "indexer_key_format", "decode_indexer_keys",
    "Sequence", "QueryBlock", "sequences", "query_blocks", "count_query_blocks",
    "token_positions", "token_query_block",
    "indexer_score", "min_k", "block_topk", "indexer_topk",
    "sparse_block_attention", "dense_attention", "patch_windows", "patch_attention_3d",
    "kv_append", "matmul", "rms_norm", "layer_norm", "rope", "rope_3d", "swiglu", "gelu",
    "add", "embedding", "scatter_visual", "argmax",
]

F64 = torch.float64
NEG_INF = -math.inf
FLOAT8_E4M3 = getattr(torch, "float8_e4m3fn", None)  # absent before torch 2.1
PLAIN_KEY_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
NVFP4_GROUP = 16  # dims per NVFP4 scale


def _require(ok: bool, arg: str, message: str) -> None:
    if not ok:
        raise ValueError(f"{arg}: {message}")


def _ints(t) -> List[int]:
    """An index tensor (or list) as a list of Python ints."""
    return [int(x) for x in (t.tolist() if isinstance(t, torch.Tensor) else t)]


def _resolve_scale(scale: Optional[float], dim: int) -> float:
    if scale is None:
        return 1.0 / math.sqrt(dim)
    _require(math.isfinite(scale) and scale > 0, "scale", f"must be a finite float > 0, got {scale}")
    return float(scale)


def _check_mode(mode: str) -> bool:
    """True for shared mode, False for per_kv_head."""
    _require(mode in ("per_kv_head", "shared"), "mode", f"must be per_kv_head or shared, got {mode!r}")
    return mode == "shared"


# ---------------------------------------------------------------------------------------
# Number formats: OCP E4M3FN (fp8) and OCP E2M1 (the 4-bit codes of NVFP4)
# ---------------------------------------------------------------------------------------

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
    """"plain", "fp8_e4m3" or "nvfp4" (see the module docstring), with the shapes checked."""
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


# ---------------------------------------------------------------------------------------
# Sequences, positions and query blocks (spec: "Sequences", "Query blocks")
# ---------------------------------------------------------------------------------------

class Sequence(NamedTuple):
    """One sequence of a varlen batch: packed query tokens [q_begin, q_begin + q_len),
    kv_len cached tokens including this step's."""
    index: int
    q_begin: int
    q_len: int
    kv_len: int

    @property
    def pos0(self) -> int:
        """Position of the first query: kv_len - q_len."""
        return self.kv_len - self.q_len

    def n_blocks(self, Bs: int) -> int:
        """Logical KV blocks holding tokens: ceil(kv_len / Bs)."""
        return -(-self.kv_len // Bs)

    def position(self, t: int) -> int:
        """Position of packed query token t."""
        return self.pos0 + (t - self.q_begin)


class QueryBlock(NamedTuple):
    """The queries of one sequence with equal floor(pos / Qb): packed tokens
    [t_begin, t_end) at positions p0 .. p1."""
    seq: int
    t_begin: int
    t_end: int
    p0: int
    p1: int


def sequences(cu_q, kv_len, *, T: Optional[int] = None,
              max_tokens: Optional[int] = None) -> List[Sequence]:
    """Validates cu_q [B+1] and kv_len [B] (cu_q[0] = 0, non-decreasing, cu_q[B] = T when T
    is given, 0 <= q_len <= kv_len <= max_tokens when given) and returns the sequences."""
    cu, kl = _ints(cu_q), _ints(kv_len)
    _require(len(cu) == len(kl) + 1, "cu_q", f"must have B+1 = {len(kl) + 1} entries, got {len(cu)}")
    _require(cu[0] == 0, "cu_q", f"cu_q[0] must be 0, got {cu[0]}")
    if T is not None:
        _require(cu[-1] == T, "cu_q", f"cu_q[B] = {cu[-1]} but there are {T} query tokens")
    seqs = []
    for b, n_kv in enumerate(kl):
        q_len = cu[b + 1] - cu[b]
        _require(q_len >= 0, "cu_q", f"must be non-decreasing at {b}")
        _require(n_kv >= q_len, "kv_len", f"kv_len[{b}] = {n_kv} < q_len = {q_len}")
        if max_tokens is not None:
            _require(n_kv <= max_tokens, "kv_len", f"kv_len[{b}] = {n_kv} > max_blocks * Bs = {max_tokens}")
        seqs.append(Sequence(b, cu[b], q_len, n_kv))
    return seqs


def _check_qb(Qb: int) -> None:
    _require(Qb >= 1 and Qb <= 128 and Qb & (Qb - 1) == 0, "Qb",
             f"must be 1 or a power of two up to 128, got {Qb}")


def _query_blocks_of(seqs: List[Sequence], Qb: int) -> List[QueryBlock]:
    blocks = []
    for s in seqs:
        if s.q_len == 0:
            continue
        last_pos = s.pos0 + s.q_len - 1
        for group in range(s.pos0 // Qb, last_pos // Qb + 1):
            p0, p1 = max(s.pos0, group * Qb), min(last_pos, group * Qb + Qb - 1)
            blocks.append(QueryBlock(s.index, s.q_begin + p0 - s.pos0, s.q_begin + p1 - s.pos0 + 1, p0, p1))
    return blocks


def query_blocks(cu_q, kv_len, Qb: int = 1) -> List[QueryBlock]:
    """The query blocks in the contract's order: sequence by sequence, in position order."""
    _check_qb(Qb)
    return _query_blocks_of(sequences(cu_q, kv_len), Qb)


def count_query_blocks(cu_q, kv_len, Qb: int = 1) -> int:
    """NQ: the number of query blocks (ops::count_query_blocks)."""
    return len(query_blocks(cu_q, kv_len, Qb))


def token_positions(cu_q, kv_len) -> torch.Tensor:
    """pos of every packed query token, int64 [T]: kv_len[b] - q_len[b] + i."""
    seqs = sequences(cu_q, kv_len)
    return torch.tensor([s.position(t) for s in seqs for t in range(s.q_begin, s.q_begin + s.q_len)],
                        dtype=torch.long)


def token_query_block(cu_q, kv_len, Qb: int = 1) -> torch.Tensor:
    """The query block of every packed query token, int32 [T]."""
    blocks = query_blocks(cu_q, kv_len, Qb)
    T = blocks[-1].t_end if blocks else 0
    out = torch.empty(T, dtype=torch.int32)
    for n, qb in enumerate(blocks):
        out[qb.t_begin:qb.t_end] = n
    return out


def _batch(cu_q, kv_len, T: Optional[int], Bs: int, max_blocks: int) -> List[Sequence]:
    _require(Bs >= 1, "Bs", f"must be >= 1, got {Bs}")
    return sequences(cu_q, kv_len, T=T, max_tokens=max_blocks * Bs)


def _batch_query_blocks(seqs: List[Sequence], Qb: int, NQ: Optional[int]) -> List[QueryBlock]:
    _check_qb(Qb)
    blocks = _query_blocks_of(seqs, Qb)
    if NQ is not None:
        _require(NQ == len(blocks), "NQ", f"is {NQ} but cu_q, kv_len and Qb give {len(blocks)} query blocks")
    return blocks


def _check_block_table(block_table: torch.Tensor, seqs: List[Sequence], Bs: int, P: int) -> None:
    """Every entry that can be read (c < ceil(kv_len / Bs)) is a page id in [0, P)."""
    _require(block_table.dim() == 2 and block_table.shape[0] == len(seqs), "block_table",
             f"must be [B][max_blocks] with B = {len(seqs)}, got {tuple(block_table.shape)}")
    for s in seqs:
        for c, page in enumerate(_ints(block_table[s.index, :s.n_blocks(Bs)])):
            _require(0 <= page < P, "block_table", f"block_table[{s.index}][{c}] = {page} is not a page in [0, {P})")


def _slots(block_table: torch.Tensor, seq: Sequence, tokens: torch.Tensor,
           Bs: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(page, slot) of each cached token position of `seq`: token s of logical block s // Bs
    sits in slot s % Bs of page block_table[b][s // Bs]."""
    pages = block_table[seq.index].long()[tokens // Bs]
    return pages, tokens % Bs


def _valid_tokens(seq: Sequence) -> torch.Tensor:
    """Positions 0 .. kv_len-1: the only slots ever read (slack slots past kv_len are not)."""
    return torch.arange(seq.kv_len, dtype=torch.long)


# ---------------------------------------------------------------------------------------
# Op: indexer_score, block_topk, indexer_topk
# ---------------------------------------------------------------------------------------

def _logsumexp(x: torch.Tensor, dim: int) -> torch.Tensor:
    """log(sum(exp(x))) along dim: -inf for an all -inf row, NaN if any entry is NaN."""
    m = x.amax(dim=dim, keepdim=True)
    shift = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return (torch.log(torch.exp(x - shift).sum(dim=dim, keepdim=True)) + shift).squeeze(dim)


def _pool_blocks(logits: torch.Tensor, Bs: int, pool: str) -> torch.Tensor:
    """[..., L] token logits (masked ones -inf) -> [..., ceil(L / Bs)] per KV block:
    the max (pool="max") or log-sum-exp (pool="lse") of each block's tokens."""
    L = logits.shape[-1]
    n_blocks = -(-L // Bs)
    pad = torch.full((*logits.shape[:-1], n_blocks * Bs - L), NEG_INF, dtype=F64)
    per_block = torch.cat([logits, pad], dim=-1).reshape(*logits.shape[:-1], n_blocks, Bs)
    return per_block.amax(dim=-1) if pool == "max" else _logsumexp(per_block, dim=-1)


def _indexer_token_scores(qi: torch.Tensor, keys: torch.Tensor, key_scale: Optional[torch.Tensor],
                          block_table: torch.Tensor, seq: Sequence, Bs: int, scale: float,
                          pool: str) -> torch.Tensor:
    """Pooled logits of every query of `seq`: [q_len][Hi][n_blocks]. The logit of query t,
    head j, token s is scale * dot(qi[t][j], ki[s]) (* ki_scale[s]) for s < kv_len and
    s <= pos(t); every other token is masked to -inf (so a block no token of which a query
    sees pools to -inf)."""
    tokens = _valid_tokens(seq)
    pages, slots = _slots(block_table, seq, tokens, Bs)
    ki = keys[pages, slots]  # [kv_len][Di]
    q = qi[seq.q_begin:seq.q_begin + seq.q_len].to(F64)  # [q_len][Hi][Di]
    dots = torch.einsum("qhd,sd->qhs", q, ki)
    if key_scale is not None:
        dots = dots * key_scale[pages, slots]
    logits = scale * dots
    pos = seq.pos0 + torch.arange(seq.q_len, dtype=torch.long)
    future = tokens[None, :] > pos[:, None]  # [q_len][kv_len]
    logits = logits.masked_fill(future[:, None, :], NEG_INF)
    return _pool_blocks(logits, Bs, pool)


def indexer_score(qi, ki_cache, block_table, kv_len, cu_q, *, ki_scale=None, Qb=1, NQ=None,
                  mode="per_kv_head", scale=None, pool="max", ki_format=None) -> torch.Tensor:
    """block_score [NQ][Hi][max_blocks] float64.

    qi [T][Hi][Di]; ki_cache [P][Bs][Di] (or NVFP4 [P][Bs][Di/2], see the module
    docstring) with ki_scale; block_table [B][max_blocks]; kv_len [B]; cu_q [B+1].
    Per query and KV block: the max (or log-sum-exp) of the valid logits; per query
    block: the max over its queries (NaN propagates). Blocks no query of the query block
    sees, and every entry past the sequence's last block, are -inf."""
    _require(qi.dim() == 3, "qi", f"must be [T][Hi][Di], got shape {tuple(qi.shape)}")
    T, Hi, Di = qi.shape
    _require(Hi >= 1 and Di >= 1, "qi", "needs Hi >= 1 and Di >= 1")
    if _check_mode(mode):
        _require(Hi == 1, "qi", f"shared mode needs exactly one indexer head, got Hi = {Hi}")
    _require(pool in ("max", "lse"), "pool", f"must be max or lse, got {pool!r}")
    keys, key_scale = decode_indexer_keys(ki_cache, ki_scale, Di, ki_format)
    P, Bs = ki_cache.shape[0], ki_cache.shape[1]
    scale = _resolve_scale(scale, Di)
    max_blocks = block_table.shape[1]
    seqs = _batch(cu_q, kv_len, T, Bs, max_blocks)
    _check_block_table(block_table, seqs, Bs, P)
    blocks = _batch_query_blocks(seqs, Qb, NQ)

    token_scores = torch.full((T, Hi, max_blocks), NEG_INF, dtype=F64)
    for s in seqs:
        if s.q_len > 0:
            pooled = _indexer_token_scores(qi, keys, key_scale, block_table, s, Bs, scale, pool)
            token_scores[s.q_begin:s.q_begin + s.q_len, :, :s.n_blocks(Bs)] = pooled
    block_score = torch.full((len(blocks), Hi, max_blocks), NEG_INF, dtype=F64)
    for n, qb in enumerate(blocks):
        block_score[n] = token_scores[qb.t_begin:qb.t_end].amax(dim=0)
    return block_score


def min_k(Qb: int, Bs: int, n_sink: int, n_local: int) -> int:
    """The host's bound: k >= n_sink + (n_local - 1 + max(1, Qb / Bs)), the bracket only
    when n_local > 0 (Qb / Bs in integers: Qb and Bs are powers of two)."""
    return n_sink + ((n_local - 1 + max(1, Qb // Bs)) if n_local > 0 else 0)


def _forced_blocks(qb: QueryBlock, Bs: int, nvalid: int, n_sink: int, n_local: int) -> Set[int]:
    """Sinks 0 .. n_sink-1 and, for every query position p of the block, the n_local blocks
    floor(p/Bs) - n_local + 1 .. floor(p/Bs), clipped to the valid blocks 0 .. nvalid-1."""
    forced = set(range(min(n_sink, nvalid)))
    for p in range(qb.p0, qb.p1 + 1):
        own = p // Bs
        forced.update(c for c in range(own - n_local + 1, own + 1) if 0 <= c < nvalid)
    return forced


def _select_blocks(score: torch.Tensor, forced: Set[int], k: int) -> List[int]:
    """One row of block_topk over the valid blocks' scores [nvalid], ascending."""
    nvalid = score.numel()
    if nvalid <= k:
        return list(range(nvalid))  # all valid blocks, whatever the scores
    # NaN ranks as -inf; adding +0.0 turns -0 into +0 so the two compare (and sort) equal.
    score = score.to(F64).masked_fill(torch.isnan(score), NEG_INF) + 0.0
    candidates = torch.tensor([c for c in range(nvalid) if c not in forced and score[c] > NEG_INF],
                              dtype=torch.long)
    # Descending score; the stable sort keeps ties in ascending block order.
    order = torch.sort(-score[candidates], stable=True).indices
    best = candidates[order][:k - len(forced)]
    return sorted(forced | set(best.tolist()))


def block_topk(block_score, kv_len, cu_q, *, Qb=1, NQ=None, Bs=128, k=16, n_sink=0,
               n_local=1) -> Tuple[torch.Tensor, torch.Tensor]:
    """(block_idx [NQ][Hs][k] int32, ascending, padded with -1; block_cnt [NQ][Hs] int32).

    For a query block whose last position is p1 the valid blocks are 0 .. floor(p1/Bs).
    With at most k valid blocks all of them are taken. Otherwise the forced blocks (sinks
    and local blocks), then the other valid blocks with a score that is not -inf (NaN
    counts as -inf, -0 == +0) by descending score, ties to the lower index, until k."""
    _require(block_score.dim() == 3, "block_score", f"must be [NQ][Hs][max_blocks], got {tuple(block_score.shape)}")
    rows, Hs, max_blocks = block_score.shape
    _require(k >= 1, "k", f"must be >= 1, got {k}")
    _require(n_sink >= 0, "n_sink", f"must be >= 0, got {n_sink}")
    _require(n_local >= 0, "n_local", f"must be >= 0, got {n_local}")
    _check_qb(Qb)
    _require(Bs >= 1, "Bs", f"must be >= 1, got {Bs}")
    _require(k >= min_k(Qb, Bs, n_sink, n_local), "k",
             f"must be >= n_sink + n_local - 1 + max(1, Qb/Bs) = {min_k(Qb, Bs, n_sink, n_local)}, got {k}")
    seqs = _batch(cu_q, kv_len, None, Bs, max_blocks)
    blocks = _batch_query_blocks(seqs, Qb, NQ)
    _require(rows == len(blocks), "block_score", f"must have NQ = {len(blocks)} rows, got {rows}")

    block_idx = torch.full((rows, Hs, k), -1, dtype=torch.int32)
    block_cnt = torch.zeros((rows, Hs), dtype=torch.int32)
    for n, qb in enumerate(blocks):
        nvalid = qb.p1 // Bs + 1
        forced = _forced_blocks(qb, Bs, nvalid, n_sink, n_local)
        _require(nvalid <= k or len(forced) <= k, "k",
                 f"{len(forced)} forced blocks in query block {n} exceed k = {k}")
        for h in range(Hs):
            chosen = _select_blocks(block_score[n, h, :nvalid], forced, k)
            block_idx[n, h, :len(chosen)] = torch.tensor(chosen, dtype=torch.int32)
            block_cnt[n, h] = len(chosen)
    return block_idx, block_cnt


def indexer_topk(qi, ki_cache, block_table, kv_len, cu_q, *, ki_scale=None, Qb=1, NQ=None,
                 mode="per_kv_head", scale=None, pool="max", k=16, n_sink=0, n_local=1,
                 ki_format=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """indexer_score, then block_topk over its scores with Bs = ki_cache.shape[1]."""
    score = indexer_score(qi, ki_cache, block_table, kv_len, cu_q, ki_scale=ki_scale, Qb=Qb, NQ=NQ,
                          mode=mode, scale=scale, pool=pool, ki_format=ki_format)
    return block_topk(score, kv_len, cu_q, Qb=Qb, NQ=score.shape[0], Bs=ki_cache.shape[1], k=k,
                      n_sink=n_sink, n_local=n_local)


# ---------------------------------------------------------------------------------------
# Attention: sparse_block_attention, dense_attention, patch_attention_3d
# ---------------------------------------------------------------------------------------

def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
            scale: float) -> Tuple[torch.Tensor, torch.Tensor]:
    """softmax(scale * q k^T) @ v over every row of k and v. q [n][D], k and v [m][D]
    -> (out [n][D], lse [n]), lse the natural log of the softmax denominator. The caller
    passes exactly the attended rows (selected by index, never masked by a multiply), so
    data outside the attended set cannot reach the result. m = 0: out 0, lse -inf."""
    n, D = q.shape
    if k.shape[0] == 0:
        return torch.zeros((n, D), dtype=F64), torch.full((n,), NEG_INF, dtype=F64)
    logits = scale * (q @ k.T)
    m = logits.amax(dim=-1, keepdim=True)
    p = torch.exp(logits - m)
    denom = p.sum(dim=-1, keepdim=True)
    return (p @ v) / denom, (m + torch.log(denom)).squeeze(-1)


def _check_attention_inputs(q, k_cache, v_cache) -> Tuple[int, int]:
    """(G, Bs) after checking q [T][Hq][D] and the caches [P][Hkv][Bs][D]."""
    _require(q.dim() == 3, "q", f"must be [T][Hq][D], got {tuple(q.shape)}")
    _require(k_cache.dim() == 4 and k_cache.shape[3] == q.shape[2], "k_cache",
             f"must be [P][Hkv][Bs][D] with D = {q.shape[2]}, got {tuple(k_cache.shape)}")
    _require(tuple(v_cache.shape) == tuple(k_cache.shape), "v_cache", "must have k_cache's shape")
    Hkv = k_cache.shape[1]
    _require(Hkv > 0 and q.shape[1] % Hkv == 0, "k_cache", f"Hkv = {Hkv} must divide Hq = {q.shape[1]}")
    return q.shape[1] // Hkv, k_cache.shape[2]


def _gather_kv(k_cache, v_cache, block_table, seq: Sequence, g: int, tokens: torch.Tensor,
               Bs: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """K and V rows [len(tokens)][D] of KV head g at the given cached positions."""
    pages, slots = _slots(block_table, seq, tokens, Bs)
    return k_cache[pages, g, slots].to(F64), v_cache[pages, g, slots].to(F64)


def _listed_blocks(entries: torch.Tensor, seq: Sequence, Bs: int, where: str) -> List[int]:
    """The entries of one block_idx row that contribute (0 <= c < ceil(kv_len/Bs); -1
    and every other entry contribute nothing), ascending. Duplicates are rejected."""
    listed = sorted(c for c in _ints(entries) if 0 <= c < seq.n_blocks(Bs))
    _require(len(set(listed)) == len(listed), "block_idx", f"{where} lists a block more than once")
    return listed


def _tokens_of_blocks(listed: List[int], Bs: int, kv_len: int) -> torch.Tensor:
    """Positions of the listed blocks' tokens that are in the cache (s < kv_len)."""
    parts = [torch.arange(c * Bs, min((c + 1) * Bs, kv_len), dtype=torch.long) for c in listed]
    return torch.cat(parts) if parts else torch.zeros(0, dtype=torch.long)


def _attend_causal(q64, out, lse, seq: Sequence, t_range: range, heads: slice, tokens: torch.Tensor,
                   k_rows: torch.Tensor, v_rows: torch.Tensor, scale: float) -> None:
    """Query heads `heads` of each token t attend to the rows of `tokens` with s <= pos(t)."""
    for t in t_range:
        seen = tokens <= seq.position(t)
        out[t, heads], lse[t, heads] = _attend(q64[t, heads], k_rows[seen], v_rows[seen], scale)


def sparse_block_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx, *, Qb=1,
                           NQ=None, mode="per_kv_head", scale=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [T][Hq][D] float64, lse [T][Hq] float64).

    Query t, head h attends to every token s of every block listed in
    block_idx[qb(t)][h // G] (selection 0 in shared mode) with s < kv_len and s <= pos(t).
    Entries that are negative or >= ceil(kv_len/Bs) contribute nothing; an empty set gives
    out = 0, lse = -inf."""
    G, Bs = _check_attention_inputs(q, k_cache, v_cache)
    T, Hq, D = q.shape
    P, Hkv = k_cache.shape[0], k_cache.shape[1]
    shared = _check_mode(mode)
    _require(block_idx.dim() == 3, "block_idx", f"must be [NQ][Hs][k], got {tuple(block_idx.shape)}")
    rows, Hs = block_idx.shape[0], block_idx.shape[1]
    _require(Hs == (1 if shared else Hkv), "block_idx",
             f"selection heads must be {'1 (shared)' if shared else f'Hkv = {Hkv} (per_kv_head)'}, got {Hs}")
    scale = _resolve_scale(scale, D)
    seqs = _batch(cu_q, kv_len, T, Bs, block_table.shape[1])
    _check_block_table(block_table, seqs, Bs, P)
    blocks = _batch_query_blocks(seqs, Qb, NQ)
    _require(rows == len(blocks), "block_idx", f"must have NQ = {len(blocks)} rows, got {rows}")

    q64 = q.to(F64)
    out = torch.zeros((T, Hq, D), dtype=F64)
    lse = torch.full((T, Hq), NEG_INF, dtype=F64)
    for n, qb in enumerate(blocks):
        seq = seqs[qb.seq]
        for g in range(Hkv):
            h_sel = 0 if shared else g  # shared: one selection, K/V still from KV head g
            listed = _listed_blocks(block_idx[n, h_sel], seq, Bs, f"block_idx[{n}][{h_sel}]")
            tokens = _tokens_of_blocks(listed, Bs, seq.kv_len)
            k_rows, v_rows = _gather_kv(k_cache, v_cache, block_table, seq, g, tokens, Bs)
            _attend_causal(q64, out, lse, seq, range(qb.t_begin, qb.t_end), slice(g * G, (g + 1) * G),
                           tokens, k_rows, v_rows, scale)
    return out, lse


def dense_attention(q, k_cache, v_cache, block_table, kv_len, cu_q, *,
                    scale=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out, lse): sparse_block_attention over every valid, causal cached token."""
    G, Bs = _check_attention_inputs(q, k_cache, v_cache)
    T, Hq, D = q.shape
    P, Hkv = k_cache.shape[0], k_cache.shape[1]
    scale = _resolve_scale(scale, D)
    seqs = _batch(cu_q, kv_len, T, Bs, block_table.shape[1])
    _check_block_table(block_table, seqs, Bs, P)

    q64 = q.to(F64)
    out = torch.zeros((T, Hq, D), dtype=F64)
    lse = torch.full((T, Hq), NEG_INF, dtype=F64)
    for seq in seqs:
        if seq.q_len == 0:
            continue
        tokens = _valid_tokens(seq)
        for g in range(Hkv):
            k_rows, v_rows = _gather_kv(k_cache, v_cache, block_table, seq, g, tokens, Bs)
            _attend_causal(q64, out, lse, seq, range(seq.q_begin, seq.q_begin + seq.q_len),
                           slice(g * G, (g + 1) * G), tokens, k_rows, v_rows, scale)
    return out, lse


def patch_windows(items, window: int = 4) -> List[range]:
    """The token ranges of the attention windows: items [n][3] = {grid_t, grid_h, grid_w}
    packed item by item; each item is cut into windows of `window` temporal patches of
    grid_h * grid_w tokens each (the last window may be shorter)."""
    _require(window >= 1, "window", f"must be >= 1, got {window}")
    windows, first = [], 0
    for i, (gt, gh, gw) in enumerate(_ints(row) for row in items):
        _require(gt >= 1 and gh >= 1 and gw >= 1, "items", f"items[{i}] = {(gt, gh, gw)} has a grid dim < 1")
        hw = gh * gw
        for w0 in range(0, gt, window):
            windows.append(range(first + w0 * hw, first + min(gt, w0 + window) * hw))
        first += gt * hw
    return windows


def patch_attention_3d(q, k, v, items, *, window=4, scale=None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [N][H][D], lse [N][H]) float64: every patch attends, bidirectionally, to every
    patch of its window and to nothing else."""
    _require(q.dim() == 3, "q", f"must be [N][H][D], got {tuple(q.shape)}")
    _require(tuple(k.shape) == tuple(q.shape), "k", "must have q's shape")
    _require(tuple(v.shape) == tuple(q.shape), "v", "must have q's shape")
    N, H, D = q.shape
    windows = patch_windows(items, window)
    covered = sum(len(w) for w in windows)
    _require(covered == N, "items", f"describe {covered} tokens but q has N = {N}")
    scale = _resolve_scale(scale, D)
    q64, k64, v64 = q.to(F64), k.to(F64), v.to(F64)
    out = torch.zeros((N, H, D), dtype=F64)
    lse = torch.full((N, H), NEG_INF, dtype=F64)
    for w in windows:
        rows = slice(w.start, w.stop)
        for h in range(H):
            out[rows, h], lse[rows, h] = _attend(q64[rows, h], k64[rows, h], v64[rows, h], scale)
    return out, lse


# ---------------------------------------------------------------------------------------
# kv_append
# ---------------------------------------------------------------------------------------

def _new_token_slots(seqs: List[Sequence], block_table: torch.Tensor, Bs: int) -> List[Tuple[int, int, int]]:
    """(packed token t, page, slot) for every query token: token i of sequence b goes to
    position pos = kv_len - q_len + i, slot pos % Bs of page block_table[b][pos // Bs]."""
    out = []
    for s in seqs:
        for t in range(s.q_begin, s.q_begin + s.q_len):
            pos = s.position(t)
            out.append((t, int(block_table[s.index, pos // Bs]), pos % Bs))
    return out


def _like(raw: torch.Tensor, original: torch.Tensor) -> torch.Tensor:
    """uint8 bytes back in the dtype of `original` (uint8 or float8_e4m3fn)."""
    return raw if original.dtype == torch.uint8 else raw.view(original.dtype)


def kv_append(k, v, block_table, kv_len, cu_q, k_cache, v_cache, *, ki=None, ki_cache=None,
              ki_scale=None, ki_format=None) -> Tuple[torch.Tensor, ...]:
    """Updated copies of the caches given: (k_cache, v_cache[, ki_cache[, ki_scale]]).

    k, v [T][Hkv][D] have the cache dtype and are copied bit for bit into
    k_cache / v_cache [P][Hkv][Bs][D]. ki [T][Di] goes into ki_cache by its format:
    plain keys take ki converted to f32 then to the cache dtype; fp8 keys without a
    scale take e4m3(f32(ki)); fp8 keys with a ki_scale and NVFP4 keys are quantized by
    quantize_fp8_scaled and quantize_nvfp4."""
    _require(k_cache.dim() == 4, "k_cache", f"must be [P][Hkv][Bs][D], got {tuple(k_cache.shape)}")
    _require(tuple(v_cache.shape) == tuple(k_cache.shape), "v_cache", "must have k_cache's shape")
    P, Hkv, Bs, D = k_cache.shape
    _require(k.dim() == 3 and tuple(k.shape[1:]) == (Hkv, D), "k", f"must be [T][{Hkv}][{D}], got {tuple(k.shape)}")
    _require(tuple(v.shape) == tuple(k.shape), "v", "must have k's shape")
    _require(k.dtype == k_cache.dtype, "k", "must have k_cache's dtype")
    _require(v.dtype == v_cache.dtype, "v", "must have v_cache's dtype")
    _require((ki is None) == (ki_cache is None), "ki_cache" if ki is not None else "ki",
             "ki and ki_cache must be given together")
    _require(ki_cache is not None or ki_scale is None, "ki_scale", "is only allowed with a ki_cache")
    T = k.shape[0]
    seqs = _batch(cu_q, kv_len, T, Bs, block_table.shape[1])
    _check_block_table(block_table, seqs, Bs, P)
    slots = _new_token_slots(seqs, block_table, Bs)

    k_out, v_out = k_cache.clone(), v_cache.clone()
    for t, page, slot in slots:
        k_out[page, :, slot] = k[t]
        v_out[page, :, slot] = v[t]
    if ki_cache is None:
        return k_out, v_out

    _require(ki.dim() == 2 and ki.shape[0] == T, "ki", f"must be [T][Di] with T = {T}, got {tuple(ki.shape)}")
    _require(ki_cache.shape[0] == P and ki_cache.shape[1] == Bs, "ki_cache", f"must be [{P}][{Bs}][.]")
    fmt = indexer_key_format(ki_cache, ki_scale, ki.shape[1], ki_format)
    ki32 = ki.to(torch.float32)
    scale_out = None if ki_scale is None else ki_scale.clone()
    if fmt == "plain":
        rows, ki_out = ki32.to(ki_cache.dtype), ki_cache.clone()
    elif fmt == "fp8_e4m3" and ki_scale is None:
        rows, ki_out = encode_e4m3(ki32), as_bytes(ki_cache).clone()
    elif fmt == "fp8_e4m3":
        rows, row_scale = quantize_fp8_scaled(ki32)
        ki_out = as_bytes(ki_cache).clone()
    else:  # nvfp4
        rows, row_scale = quantize_nvfp4(ki32)
        ki_out, scale_out = as_bytes(ki_cache).clone(), as_bytes(ki_scale).clone()
    for t, page, slot in slots:
        ki_out[page, slot] = rows[t]
        if fmt != "plain" and ki_scale is not None:
            scale_out[page, slot] = row_scale[t].to(scale_out.dtype)
    ki_out = ki_out if fmt == "plain" else _like(ki_out, ki_cache)
    if ki_scale is None:
        return k_out, v_out, ki_out
    return k_out, v_out, ki_out, (_like(scale_out, ki_scale) if fmt == "nvfp4" else scale_out)


# ---------------------------------------------------------------------------------------
# Supporting ops
# ---------------------------------------------------------------------------------------

def matmul(x, w, *, bias=None) -> torch.Tensor:
    """y = x W^T (+ bias): x [..., K], w [N][K], bias [N]."""
    _require(w.dim() == 2 and x.shape[-1] == w.shape[1], "w", f"must be [N][K] with K = {x.shape[-1]}")
    y = x.to(F64) @ w.to(F64).T
    return y if bias is None else y + bias.to(F64)


def rms_norm(x, w, *, eps=1e-6, kind="gemma") -> torch.Tensor:
    """Over the last dim: x * rsqrt(mean(x^2) + eps) * (1 + w) (gemma, M3) or * w (plain)."""
    _require(kind in ("gemma", "plain"), "kind", f"must be gemma or plain, got {kind!r}")
    _require(math.isfinite(eps) and eps >= 0, "eps", f"must be finite and >= 0, got {eps}")
    x64, w64 = x.to(F64), w.to(F64)
    normed = x64 / torch.sqrt((x64 * x64).mean(dim=-1, keepdim=True) + eps)
    return normed * (1.0 + w64 if kind == "gemma" else w64)


def layer_norm(x, w, *, b=None, eps=1e-6) -> torch.Tensor:
    """Over the last dim: (x - mean) / sqrt(var + eps) * w (+ b), var biased (1/N)."""
    _require(math.isfinite(eps) and eps >= 0, "eps", f"must be finite and >= 0, got {eps}")
    x64 = x.to(F64)
    centered = x64 - x64.mean(dim=-1, keepdim=True)
    var = (centered * centered).mean(dim=-1, keepdim=True)
    y = centered / torch.sqrt(var + eps) * w.to(F64)
    return y if b is None else y + b.to(F64)


def _rotate_half(x: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    """Neox rotation of the first 2 * n dims of x [..., D] by angle [..., n]: the pair
    (j, j + n) becomes (x_j cos - x_{j+n} sin, x_{j+n} cos + x_j sin); the rest pass."""
    n = angle.shape[-1]
    x1, x2, rest = x[..., :n], x[..., n:2 * n], x[..., 2 * n:]
    cos, sin = torch.cos(angle), torch.sin(angle)
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, rest], dim=-1)


def rope(x, pos, *, rotary_dim=None, theta=1e4) -> torch.Tensor:
    """Neox rotary embedding of x [T][H][D] at positions pos [T]: the first rotary_dim
    dims (default D) rotate with inv_freq_j = theta^(-2j / rotary_dim); the rest pass."""
    _require(x.dim() == 3, "x", f"must be [T][H][D], got {tuple(x.shape)}")
    D = x.shape[2]
    rd = D if rotary_dim is None else rotary_dim
    _require(rd >= 2 and rd % 2 == 0 and rd <= D, "rotary_dim", f"must be even, >= 2 and <= D = {D}, got {rd}")
    _require(math.isfinite(theta) and theta > 0, "theta", f"must be finite and > 0, got {theta}")
    j = torch.arange(rd // 2, dtype=F64)
    inv_freq = theta ** (-2.0 * j / rd)
    angle = pos.to(F64)[:, None] * inv_freq[None, :]  # [T][rd/2]
    return _rotate_half(x.to(F64), angle[:, None, :])


def rope_3d(x, pos, *, theta=1e4) -> torch.Tensor:
    """The ViT's 3-axis rotary embedding of x [N][H][D] at pos [N][3] (t, h, w):
    a = 2 * floor(D / 6) dims per axis, inv_freq_j = theta^(-2j / a), frequency vector
    [t (a/2) | h (a/2) | w (a/2)] rotated neox-style over the first 3a dims."""
    _require(x.dim() == 3 and x.shape[2] >= 6, "x", f"must be [N][H][D] with D >= 6, got {tuple(x.shape)}")
    _require(pos.dim() == 2 and pos.shape[1] == 3, "pos", f"must be [N][3], got {tuple(pos.shape)}")
    _require(math.isfinite(theta) and theta > 0, "theta", f"must be finite and > 0, got {theta}")
    a = 2 * (x.shape[2] // 6)
    j = torch.arange(a // 2, dtype=F64)
    inv_freq = theta ** (-2.0 * j / a)
    p = pos.to(F64)
    angle = torch.cat([p[:, axis:axis + 1] * inv_freq[None, :] for axis in range(3)], dim=-1)  # [N][3a/2]
    return _rotate_half(x.to(F64), angle[:, None, :])


def swiglu(gate, up) -> torch.Tensor:
    """silu(gate) * up = gate / (1 + exp(-gate)) * up."""
    _require(tuple(up.shape) == tuple(gate.shape), "up", "must have gate's shape")
    g = gate.to(F64)
    return g / (1.0 + torch.exp(-g)) * up.to(F64)


def gelu(x) -> torch.Tensor:
    """The exact (erf) GELU: x / 2 * (1 + erf(x / sqrt(2)))."""
    x64 = x.to(F64)
    return 0.5 * x64 * (1.0 + torch.erf(x64 / math.sqrt(2.0)))


def add(a, b) -> torch.Tensor:
    """a + b, elementwise, same shapes."""
    _require(tuple(b.shape) == tuple(a.shape), "b", "must have a's shape")
    return a.to(F64) + b.to(F64)


def embedding(table, ids) -> torch.Tensor:
    """y[t] = table[ids[t]]; table [V][H], ids [T] in [0, V)."""
    V = table.shape[0]
    for t, i in enumerate(_ints(ids)):
        _require(0 <= i < V, "ids", f"ids[{t}] = {i} is outside the table's {V} rows")
    return table.to(F64)[ids.long()]


def scatter_visual(tokens, vis, x, *, placeholder=0) -> torch.Tensor:
    """A copy of x [T][H] whose rows with tokens[t] == placeholder take the rows of
    vis [Nv][H], in order. The placeholder count must equal Nv."""
    where = (tokens.long() == placeholder).nonzero().flatten()
    _require(where.numel() == vis.shape[0], "vis",
             f"has {vis.shape[0]} rows but tokens hold {where.numel()} placeholders (id {placeholder})")
    y = x.to(F64).clone()
    y[where] = vis.to(F64)
    return y


def argmax(x) -> torch.Tensor:
    """idx [M] int32: the first index of the largest value of each row of x [M][N].
    NaN is never the maximum; -0 == +0; an all-NaN row gives 0."""
    _require(x.dim() == 2 and x.shape[1] >= 1, "x", f"must be [M][N] with N >= 1, got {tuple(x.shape)}")
    x64 = x.to(F64)
    valid = ~torch.isnan(x64)
    best = x64.masked_fill(~valid, NEG_INF).amax(dim=1, keepdim=True)
    is_best = valid & (x64 == best)
    index = torch.arange(x.shape[1]).expand_as(x64)
    first = index.masked_fill(~is_best, x.shape[1]).amin(dim=1)
    return torch.where(first == x.shape[1], torch.zeros_like(first), first).to(torch.int32)
