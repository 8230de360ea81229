"""kv_append: this step's keys and values (and indexer keys) written into the paged caches."""

from typing import List, Tuple

import torch

from ._common import _require
from .batch import Sequence, _batch, _check_block_table
from .key_formats import indexer_key_format, quantize_fp8_scaled, quantize_nvfp4
from .number_formats import as_bytes, encode_e4m3


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
