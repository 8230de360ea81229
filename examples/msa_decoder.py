"""A small M3-shaped decoder for training through msa's ops (used by train_msa.py).

Layers follow docs/model-spec.md: gemma RMSNorm, QK-norm, partial neox RoPE on the first
half of each head, SwiGLU MLP; the first `n_dense` layers run dense attention, the others
are MSA layers with an index branch (Hi query heads, one shared key head of Di, normed and
roped like the main branch) that selects blocks per KV head (`per_kv_head`, Hi == Hkv).

Attention, selection and the indexer's KL loss are msa calls: msa.dense_attention and
msa.sparse_block_attention (differentiable through msa's backward ops),
msa.indexer_score + msa.block_topk (not differentiated), msa.torch.indexer_kl. Training
caches are built with torch ops (index_put), as docs/python.md says, so gradients reach
k and v. The index branch reads the hidden states detached: only the KL loss trains it.
"""
import itertools
from dataclasses import dataclass

import torch
from torch import nn

import msa
import msa.torch
from hf_decoder_layer import MLP, RMSNorm, rope


@dataclass
class ModelConfig:
    vocab_size: int
    hidden_size: int = 64
    intermediate_size: int = 128
    num_attention_heads: int = 8
    num_key_value_heads: int = 4
    head_dim: int = 16
    sparse_num_index_heads: int = 4
    sparse_index_dim: int = 16
    sparse_block_size: int = 64
    sparse_topk_blocks: int = 4
    sparse_init_block: int = 1
    sparse_local_block: int = 1
    n_dense: int = 1
    n_msa: int = 1
    rms_norm_eps: float = 1e-6
    rope_theta: float = 5e6
    initializer_range: float = 0.02


class PackedBatch:
    """Sequences of different lengths packed into T tokens, with the paged layout msa reads:
    sequence b owns pages [page0[b], page0[b] + ceil(len/Bs)); token i of it sits in
    page page0[b] + i // Bs, slot i % Bs. Index tensors live on `ops_device`."""

    def __init__(self, lengths, Bs, device, ops_device):
        self.lengths, self.Bs, self.T = list(lengths), Bs, sum(lengths)
        pages = [(n + Bs - 1) // Bs for n in lengths]
        self.P, max_blocks = sum(pages), max(pages)
        page0 = [sum(pages[:b]) for b in range(len(lengths))]
        table = torch.zeros(len(lengths), max_blocks, dtype=torch.int32)
        for b, n in enumerate(pages):
            table[b, :n] = torch.arange(page0[b], page0[b] + n, dtype=torch.int32)
        pos = torch.cat([torch.arange(n) for n in lengths])
        page = torch.cat([torch.full((n,), page0[b]) + torch.arange(n) // Bs for b, n in enumerate(lengths)])
        self.pos, self.page, self.slot = pos.to(device), page.to(ops_device), (pos % Bs).to(ops_device)
        cu_q = [0] + list(itertools.accumulate(lengths))
        self.paged = (table.to(ops_device), torch.tensor(lengths, dtype=torch.int32, device=ops_device),
                      torch.tensor(cu_q, dtype=torch.int32, device=ops_device))
        self.ops_device = ops_device

    def cache(self, x):
        """x [T][H][Dh] (or [T][Dh]) as a paged cache [P][H][Bs][Dh] ([P][Bs][Dh]), differentiably."""
        x = x.to(self.ops_device)
        empty = x.new_zeros((self.P, self.Bs) + tuple(x.shape[1:]))
        paged = empty.index_put((self.page, self.slot), x)
        return (paged.transpose(1, 2) if x.dim() == 3 else paged).contiguous()


class Attention(nn.Module):
    """Projections, QK-norm and RoPE around msa's attention; an index branch in MSA layers."""

    def __init__(self, c: ModelConfig, msa_layer):
        super().__init__()
        self.c, self.msa_layer = c, msa_layer
        Hq, Hkv, D, Hi, Di = (c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.sparse_num_index_heads,
                              c.sparse_index_dim)
        self.q_proj = nn.Linear(c.hidden_size, Hq * D, bias=False)
        self.k_proj = nn.Linear(c.hidden_size, Hkv * D, bias=False)
        self.v_proj = nn.Linear(c.hidden_size, Hkv * D, bias=False)
        self.o_proj = nn.Linear(Hq * D, c.hidden_size, bias=False)
        self.q_norm, self.k_norm = RMSNorm(D, c.rms_norm_eps), RMSNorm(D, c.rms_norm_eps)
        if msa_layer:
            self.index_q_proj = nn.Linear(c.hidden_size, Hi * Di, bias=False)
            self.index_k_proj = nn.Linear(c.hidden_size, Di, bias=False)
            self.index_q_norm, self.index_k_norm = RMSNorm(Di, c.rms_norm_eps), RMSNorm(Di, c.rms_norm_eps)

    @torch.no_grad()
    def match_keys_to_queries(self):
        """Initialises each key head as the first query head of its group (the index key as
        index query head 0), so q.k starts as content similarity: a query attends to tokens
        like itself, the lookup retrieval needs. From independent random projections the
        model takes far longer to find it."""
        c = self.c
        G, D = c.num_attention_heads // c.num_key_value_heads, c.head_dim
        for h in range(c.num_key_value_heads):
            self.k_proj.weight[h * D:(h + 1) * D] = self.q_proj.weight[h * G * D:(h * G + 1) * D]
        if self.msa_layer:
            self.index_k_proj.weight.copy_(self.index_q_proj.weight[:c.sparse_index_dim])

    def _heads(self, x, H, Dh, norm, pos):
        return rope(norm(x.view(x.shape[0], H, Dh)), pos, self.c.rope_theta).contiguous()

    def forward(self, x, batch, stage, stats):
        """stage 'dense' or 'sparse' (MSA layers; dense layers always run dense). Appends this
        layer's KL [T][Hkv] and recall [T][Hq] (dense attention mass inside the indexer's
        selection) to stats."""
        c, pos, od = self.c, batch.pos, batch.ops_device
        q = self._heads(self.q_proj(x), c.num_attention_heads, c.head_dim, self.q_norm, pos).to(od)
        k = self._heads(self.k_proj(x), c.num_key_value_heads, c.head_dim, self.k_norm, pos)
        v = self.v_proj(x).view(x.shape[0], c.num_key_value_heads, c.head_dim)
        kc, vc = batch.cache(k), batch.cache(v)
        if not self.msa_layer:
            out, _ = msa.dense_attention(q, kc, vc, *batch.paged)
        else:
            out = self._msa(x, q, kc, vc, batch, stage, stats)
        return self.o_proj(out.to(x.device).reshape(x.shape[0], -1))

    def _msa(self, x, q, kc, vc, batch, stage, stats):
        c, pos, xi = self.c, batch.pos, x.detach()
        qi = self._heads(self.index_q_proj(xi), c.sparse_num_index_heads, c.sparse_index_dim, self.index_q_norm,
                         pos).to(batch.ops_device)
        ki = self._heads(self.index_k_proj(xi), 1, c.sparse_index_dim, self.index_k_norm, pos).view(x.shape[0], -1)
        kic = batch.cache(ki)
        with torch.no_grad():
            score = msa.indexer_score(qi.detach(), kic.detach(), *batch.paged)
            idx, _ = msa.block_topk(score, *batch.paged[1:], Bs=c.sparse_block_size, k=c.sparse_topk_blocks,
                                    n_sink=c.sparse_init_block, n_local=c.sparse_local_block)
        if stage == "dense":
            out, lse = msa.dense_attention(q, kc, vc, *batch.paged)
            kl = msa.torch.indexer_kl(qi, kic, q.detach(), kc.detach(), lse, *batch.paged, stage="dense")
            with torch.no_grad():
                _, lse_sel = msa.sparse_block_attention(q.detach(), kc.detach(), vc.detach(), *batch.paged, idx)
            lse_dense = lse
        else:
            out, lse = msa.sparse_block_attention(q, kc, vc, *batch.paged, idx)
            kl = msa.torch.indexer_kl(qi, kic, q.detach(), kc.detach(), lse, *batch.paged, block_idx=idx,
                                      stage="sparse")
            with torch.no_grad():
                _, lse_dense = msa.dense_attention(q.detach(), kc.detach(), vc.detach(), *batch.paged)
            lse_sel = lse
        # lse is log sum exp(scale q.k) over a token set, so exp(lse_sel - lse_dense) is the share
        # of the dense softmax mass that falls inside the selected blocks
        stats.append((kl, torch.exp(lse_sel - lse_dense).clamp(max=1.0)))
        return out


class Block(nn.Module):
    def __init__(self, c: ModelConfig, msa_layer):
        super().__init__()
        self.input_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.self_attn = Attention(c, msa_layer)
        self.post_attention_layernorm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.mlp = MLP(c)

    def forward(self, x, batch, stage, stats):
        h = x + self.self_attn(self.input_layernorm(x), batch, stage, stats)
        return h + self.mlp(self.post_attention_layernorm(h))


class Decoder(nn.Module):
    """Embedding (of one or more ids per position), n_dense dense layers, n_msa MSA layers, final norm, LM head."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=0)
        self.layers = nn.ModuleList([Block(c, i >= c.n_dense) for i in range(c.n_dense + c.n_msa)])
        self.norm = RMSNorm(c.hidden_size, c.rms_norm_eps)
        self.lm_head = nn.Linear(c.hidden_size, c.vocab_size, bias=False)
        self.apply(self._init_weights)
        for layer in self.layers:
            layer.self_attn.match_keys_to_queries()

    def _init_weights(self, m):
        # Hugging Face's init (normal, std initializer_range). torch's defaults (N(0, 1)
        # embeddings) make each token's own embedding dominate the residual stream, so the
        # final norm leaves the retrieved value a tiny share of the readout: retrieval
        # then stays at chance within a short run.
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=self.c.initializer_range)
        if isinstance(m, nn.Embedding) and m.padding_idx is not None:
            with torch.no_grad():
                m.weight[m.padding_idx].zero_()

    def forward(self, ids, batch, stage):
        """ids [T][n] (summed embeddings; id 0 embeds to 0) -> logits [T][vocab] and, per MSA
        layer, (kl [T][Hkv], recall [T][Hq])."""
        stats = []
        x = self.embed(ids).sum(1)
        for layer in self.layers:
            x = layer(x, batch, stage, stats)
        return self.lm_head(self.norm(x)), stats
