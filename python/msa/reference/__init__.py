"""A float64 PyTorch reference of the MSA ops, written from docs/spec.md.

Each function is one op of the contract, written to be read: the math of the op, the
masks, and the selection rules appear directly in the code. Loops run over sequences,
query blocks and heads; work inside a row is vectorized. This package imports only torch
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

# The ops by responsibility: number_formats and key_formats (fp8 / NVFP4 keys), batch
# (sequences and query blocks), selection, attention, patch_attention, cache_append
# (kv_append) and support_ops; _common holds the checks they share.
from ._common import F64, NEG_INF
from .number_formats import (E2M1_BOUNDARIES, E2M1_MAGNITUDES, E2M1_TABLE, E4M3_MAX, E4M3_TABLE, FLOAT8_E4M3,
                             as_bytes, decode_e2m1, decode_e4m3, encode_e2m1, encode_e4m3, pack_e2m1x2,
                             unpack_e2m1x2)
from .key_formats import (NVFP4_GROUP, PLAIN_KEY_DTYPES, decode_indexer_keys, decode_nvfp4, indexer_key_format,
                          quantize_fp8_scaled, quantize_nvfp4)
from .batch import (QueryBlock, Sequence, count_query_blocks, query_blocks, sequences, token_positions,
                    token_query_block)
from .selection import block_topk, indexer_score, indexer_topk, min_k
from .attention import dense_attention, sparse_block_attention
from .patch_attention import patch_attention_3d, patch_windows
from .cache_append import kv_append
from .support_ops import (add, argmax, embedding, gelu, layer_norm, matmul, rms_norm, rope, rope_3d, scatter_visual,
                          swiglu)

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
    "F64", "NEG_INF", "FLOAT8_E4M3", "E4M3_TABLE", "E4M3_MAX", "E2M1_MAGNITUDES", "E2M1_TABLE",
    "E2M1_BOUNDARIES", "PLAIN_KEY_DTYPES", "NVFP4_GROUP",
]
