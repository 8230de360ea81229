#!/usr/bin/env python3
"""A Hugging Face-style decoder layer whose attention is msa's SparseAttention.

The layer follows docs/model-spec.md (M3's shape): gemma RMSNorm before attention and
MLP, q/k/v/o projections, per-head QK-norm, partial neox RoPE on the first half of each
head, and the index branch (index_q_proj to Hi heads of Di, index_k_proj to one key head
of Di, each normed and roped like the main branch). Attention runs through
msa.torch.SparseAttention over a PagedKVCache: kv_append, indexer_topk,
sparse_block_attention.

    PYTHONPATH=build/python python3 examples/hf_decoder_layer.py [--device cuda]

It prefills two prompts of different lengths in chunks, decodes a few tokens, and checks
one step against dense attention (k large enough to cover every block).
"""
import argparse
import math
from dataclasses import dataclass

import torch
from torch import nn

from msa.torch import PagedKVCache, SparseAttention


@dataclass
class Config:
    """Field names of the M3 config (docs/model-spec.md); tiny sizes by default."""
    hidden_size: int = 128
    intermediate_size: int = 256
    num_attention_heads: int = 8
    num_key_value_heads: int = 2
    head_dim: int = 32
    sparse_num_index_heads: int = 2
    sparse_index_dim: int = 32
    sparse_block_size: int = 16
    sparse_topk_blocks: int = 4
    sparse_local_block: int = 1
    sparse_init_block: int = 1
    rms_norm_eps: float = 1e-6
    rope_theta: float = 5e6


class RMSNorm(nn.Module):
    """Gemma RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), computed in f32."""

    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim))
        self.eps = eps

    def forward(self, x):
        x32 = x.float()
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps) * (1.0 + self.weight.float())
        return y.to(x.dtype)


def rope(x, pos, theta):
    """Neox RoPE on the first half of the last dim of x [T][H][Dh] at positions pos [T]."""
    rot = x.shape[-1] // 2
    inv = theta ** (-torch.arange(0, rot, 2, device=x.device, dtype=torch.float32) / rot)
    ang = pos.float()[:, None] * inv[None, :]
    cos, sin = torch.cat([ang.cos()] * 2, -1)[:, None], torch.cat([ang.sin()] * 2, -1)[:, None]
    xr, rest = x[..., :rot].float(), x[..., rot:]
    half = rot // 2
    rotated = torch.cat([-xr[..., half:], xr[..., :half]], -1)
    return torch.cat([(xr * cos + rotated * sin).to(x.dtype), rest], -1)


class MSAAttention(nn.Module):
    """Projections, norms and RoPE around SparseAttention (one MSA layer)."""

    def __init__(self, c: Config, layer_idx=0):
        super().__init__()
        self.c = c
        Hq, Hkv, D, Hi, Di = (c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                              c.sparse_num_index_heads, c.sparse_index_dim)
        self.q_proj = nn.Linear(c.hidden_size, Hq * D, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, Hkv * D, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, Hkv * D, bias=False)
        self.o_proj = nn.Linear(Hq * D, c.hidden_size, bias=False)
        self.index_q_proj = nn.Linear(c.hidden_size, Hi * Di, bias=False)
        self.index_k_proj = nn.Linear(c.hidden_size, Di, bias=False)
        self.q_norm, self.k_norm = RMSNorm(D, c.rms_norm_eps), RMSNorm(D, c.rms_norm_eps)
        self.index_q_norm, self.index_k_norm = RMSNorm(Di, c.rms_norm_eps), RMSNorm(Di, c.rms_norm_eps)
        self.attn = SparseAttention(Hq, Hkv, D, Hi, Di, k=c.sparse_topk_blocks, n_sink=c.sparse_init_block,
                                    n_local=c.sparse_local_block, Bs=c.sparse_block_size, layer_idx=layer_idx)

    def _heads(self, x, H, Dh, norm, pos):
        return rope(norm(x.view(x.shape[0], H, Dh)), pos, self.c.rope_theta).contiguous()

    def forward(self, x, cache):
        c, pos = self.c, cache.positions
        q = self._heads(self.q_proj(x), c.num_attention_heads, c.head_dim, self.q_norm, pos)
        k = self._heads(self.k_proj(x), c.num_key_value_heads, c.head_dim, self.k_norm, pos)
        v = self.v_proj(x).view(x.shape[0], c.num_key_value_heads, c.head_dim)
        qi = self._heads(self.index_q_proj(x), c.sparse_num_index_heads, c.sparse_index_dim, self.index_q_norm, pos)
        ki = self._heads(self.index_k_proj(x), 1, c.sparse_index_dim, self.index_k_norm, pos).view(x.shape[0], -1)
        out = self.attn(q, k, v, qi, ki, cache)
        return self.o_proj(out.view(x.shape[0], -1))


class MLP(nn.Module):
    def __init__(self, c: Config):
        super().__init__()
        self.gate_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.up_proj = nn.Linear(c.hidden_size, c.intermediate_size, bias=False)
        self.down_proj = nn.Linear(c.intermediate_size, c.hidden_size, bias=False)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class MSADecoderLayer(nn.Module):
    """x + Attn(RMSNorm(x)), then x + MLP(RMSNorm(x)); tokens packed as [T][hidden]."""

    def __init__(self, c: Config, layer_idx=0):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = MSAAttention(c, layer_idx)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, hidden_states, cache):
        h = hidden_states + self.self_attn(self.input_layernorm(hidden_states), cache)
        return h + self.mlp(self.post_attention_layernorm(h))


def dense_reference(layer, x, cache, history):
    """The attention output [T][Hq][D] computed with plain torch over each sequence's
    whole history (history[b]: list of (k, v) per step, [n][Hkv][D]): what MSA gives
    when k covers every block."""
    a, c = layer.self_attn, layer.self_attn.c
    h = layer.input_layernorm(x)
    q = a._heads(a.q_proj(h), c.num_attention_heads, c.head_dim, a.q_norm, cache.positions).float()
    G, outs = c.num_attention_heads // c.num_key_value_heads, []
    for b in range(cache.B):
        t0, t1 = int(cache.cu_q_host[b]), int(cache.cu_q_host[b + 1])
        k = torch.cat([s[0] for s in history[b]]).float().repeat_interleave(G, 1).transpose(0, 1)
        v = torch.cat([s[1] for s in history[b]]).float().repeat_interleave(G, 1).transpose(0, 1)
        L = k.shape[1]
        s = q[t0:t1].transpose(0, 1) @ k.transpose(1, 2) / math.sqrt(c.head_dim)
        pos = torch.arange(L - (t1 - t0), L, device=x.device)
        s = s.masked_fill(torch.arange(L, device=x.device)[None] > pos[:, None], -math.inf)
        outs.append((s.softmax(-1) @ v).transpose(0, 1))
    return torch.cat(outs)


def kv_of(layer, x, cache):
    """This step's k, v [T][Hkv][D], as the layer computes them."""
    a, c = layer.self_attn, layer.self_attn.c
    h = layer.input_layernorm(x)
    k = a._heads(a.k_proj(h), c.num_key_value_heads, c.head_dim, a.k_norm, cache.positions)
    return k, a.v_proj(h).view(x.shape[0], c.num_key_value_heads, c.head_dim)


def steps(prompts, chunk, decode_steps):
    """q_lens of each step: chunked prefill of every prompt, then decode_steps of one token each."""
    left = list(prompts)
    while any(left):
        q_lens = [min(chunk, n) for n in left]
        left = [n - q for n, q in zip(left, q_lens)]
        yield q_lens
    for _ in range(decode_steps):
        yield [1] * len(prompts)


def run(device, dtype, prompts=(70, 45), chunk=32, decode_steps=4, seed=0):
    torch.manual_seed(seed)
    c = Config(sparse_topk_blocks=16)  # 16 blocks of 16 >= every context here: dense-equivalent
    layer = MSADecoderLayer(c).to(device, dtype).eval()
    B = len(prompts)
    cache = PagedKVCache(B, 512, Hkv=c.num_key_value_heads, D=c.head_dim, Di=c.sparse_index_dim,
                         Bs=c.sparse_block_size, dtype=dtype, device=device)
    history, worst = [[] for _ in range(B)], 0.0
    with torch.inference_mode():
        for q_lens in steps(prompts, chunk, decode_steps):
            cache.begin_step(q_lens)
            x = torch.randn(sum(q_lens), c.hidden_size, device=device).to(dtype)
            k, v = kv_of(layer, x, cache)
            for b in range(B):
                t0, t1 = int(cache.cu_q_host[b]), int(cache.cu_q_host[b + 1])
                history[b].append((k[t0:t1], v[t0:t1]))
            seen = []
            hook = layer.self_attn.attn.register_forward_hook(lambda m, args, out: seen.append(out))
            y = layer(x, cache)
            hook.remove()
            want = dense_reference(layer, x, cache, history)
            err = float(((seen[0].float() - want) ** 2).sum() / (want ** 2).sum())
            worst = max(worst, err)
            print(f"step q_lens={q_lens} kv_len={cache.kv_len_host.tolist()}: out {tuple(y.shape)} "
                  f"{y.dtype}, attention NMSE vs dense torch {err:.2e}")
    tol = 5e-5 if dtype != torch.float32 else 1e-10  # docs/spec.md's out tolerances
    verdict = "matches dense attention" if worst <= tol else "DIFFERS from dense attention"
    print(f"{verdict}: worst NMSE {worst:.2e} (tolerance {tol:.0e})")
    return worst <= tol


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    args = ap.parse_args([] if __name__ != "__main__" else None)
    ok = run(torch.device(args.device), getattr(torch, args.dtype))
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
