"""Helpers of the msa.reference tests: paged caches built from logical per-sequence
contents, with NaN in every slot no token occupies."""
import math
import random

import torch

NAN, INF = math.nan, math.inf
F64 = torch.float64


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def paged(logical, Bs, max_blocks, *, head_dim_first=True, seed=0):
    """Scatters logical caches (one [kv_len][...] tensor per sequence) into pages in a
    shuffled order. Returns (cache, block_table); every slot no token occupies is NaN
    (0x7f for uint8: an E4M3 NaN). head_dim_first: the page layout is [P][H][Bs][D]
    (k/v) rather than [P][Bs][...]."""
    fill = 0x7F if logical[0].dtype == torch.uint8 else NAN
    rng = random.Random(seed)
    need = [-(-x.shape[0] // Bs) for x in logical]
    P = sum(need) + 1  # one spare page that stays NaN
    pages = list(range(P))
    rng.shuffle(pages)
    row_shape = tuple(logical[0].shape[1:])
    if head_dim_first:
        cache = torch.full((P, row_shape[0], Bs, *row_shape[1:]), fill, dtype=logical[0].dtype)
    else:
        cache = torch.full((P, Bs, *row_shape), fill, dtype=logical[0].dtype)
    table = torch.zeros((len(logical), max_blocks), dtype=torch.int32)
    it = iter(pages)
    for b, x in enumerate(logical):
        for c in range(need[b]):
            page = next(it)
            table[b, c] = page
            for s in range(c * Bs, min((c + 1) * Bs, x.shape[0])):
                if head_dim_first:
                    cache[page, :, s - c * Bs] = x[s]
                else:
                    cache[page, s - c * Bs] = x[s]
    return cache, table


def prefix_sums(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return i32(out)
