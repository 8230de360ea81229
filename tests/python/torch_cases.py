"""Helpers of the msa.torch tests: the small MSA shape, paged caches with NaN in every unused
slot, one step's inputs, the layer, and the CUDA and torch.library skips."""
import os
import runpy

import pytest
import torch

import msa
import msa.torch as mt

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HAS_CUDA = torch.cuda.is_available() and any(b.startswith("cuda") for b in msa.backends())
CUDA_REASON = ("needs a CUDA GPU: torch.cuda.is_available() is "
               f"{torch.cuda.is_available()} and msa's backends are {msa.backends()}")
needs_cuda = pytest.mark.skipif(not HAS_CUDA, reason=CUDA_REASON)

# A small MSA shape: GQA 2, 2 KV heads, blocks of 16 tokens.
CFG = dict(Hq=4, Hkv=2, D=32, Hi=2, Di=32, Bs=16)


def nmse(x, r):
    x, r = x.double(), r.double()
    return float(((x - r) ** 2).sum() / (r ** 2).sum().clamp_min(1e-300))


def needs_torch_library():
    if not mt.HAS_TORCH_LIBRARY:
        pytest.skip(f"torch.ops.msa not registered: {mt.STATUS}")


def make_cache(lens, *, device="cpu", dtype=torch.bfloat16, ki_format="plain", max_tokens=None, layers=1,
               shuffle=True, seed=0):
    """A PagedKVCache with shuffled pages and NaN in every unused float slot."""
    g = torch.Generator().manual_seed(seed)
    max_tokens = max_tokens or max(lens) + 64
    blocks = -(-max_tokens // CFG["Bs"])
    P = len(lens) * blocks + 1
    order = torch.randperm(P, generator=g).tolist() if shuffle else None
    return mt.PagedKVCache(len(lens), max_tokens, Hkv=CFG["Hkv"], D=CFG["D"], Di=CFG["Di"], Bs=CFG["Bs"],
                           num_layers=layers, num_pages=P, dtype=dtype, ki_format=ki_format, device=device,
                           fill=float("nan"), page_order=order)


def step_inputs(T, *, dtype=torch.bfloat16, device="cpu", seed=1):
    """q, k, v, qi, ki of one step (values rounded to dtype)."""
    g = torch.Generator().manual_seed(seed)

    def r(*shape):
        return torch.randn(*shape, generator=g).to(dtype).to(device)

    return (r(T, CFG["Hq"], CFG["D"]), r(T, CFG["Hkv"], CFG["D"]), r(T, CFG["Hkv"], CFG["D"]),
            r(T, CFG["Hi"], CFG["Di"]), r(T, CFG["Di"]))


def layer(k=4, **kw):
    args = dict(k=k, n_sink=kw.pop("n_sink", 1), n_local=kw.pop("n_local", 1), Bs=CFG["Bs"], use_torch_ops=False)
    args.update(kw)
    return mt.SparseAttention(CFG["Hq"], CFG["Hkv"], CFG["D"], CFG["Hi"], CFG["Di"], **args)


class SparseModule(torch.nn.Module):
    """A module calling torch.ops.msa.sparse_block_attention between torch ops."""

    def forward(self, q, k_cache, v_cache, block_table, kv_len, cu_q, block_idx):
        out, lse = torch.ops.msa.sparse_block_attention(q * 2, k_cache, v_cache, block_table, kv_len, cu_q,
                                                        block_idx, 1, q.shape[0], "per_kv_head", None)
        return out.float() + 1.0, lse


def needs_ki_format(fmt):
    if fmt.startswith("fp8") and not hasattr(torch, "float8_e4m3fn"):
        pytest.skip(f"{fmt} indexer keys need torch.float8_e4m3fn (torch >= 2.1), this is torch {torch.__version__}")


def load_example():
    return runpy.run_path(os.path.join(ROOT, "examples", "hf_decoder_layer.py"))
