"""msa.torch.SparseAttention on the CPU, against msa.reference (float64, docs/spec.md) and
against plain causal torch attention where the selection covers every block."""
import math

import pytest
import torch

from msa import reference as ref
from torch_cases import CFG, layer, make_cache, needs_ki_format, nmse, step_inputs


def reference_layer(cache, q, qi, attn, l=0):
    """msa.reference's indexer_topk + sparse_block_attention on the cache's contents."""
    kc, vc, kic, kis = (t.cpu() if t is not None else None for t in cache.layer(l))
    bt, kl, cu = cache.block_table.cpu(), cache.kv_len.cpu(), cache.cu_q.cpu()
    idx, _ = ref.indexer_topk(qi.cpu(), kic, bt, kl, cu, ki_scale=kis, Qb=attn.Qb, k=attn.k,
                              n_sink=attn.n_sink, n_local=attn.n_local)
    out, _ = ref.sparse_block_attention(q.cpu(), kc, vc, bt, kl, cu, idx, Qb=attn.Qb)
    return idx, out


def history_attention(q, ks, vs, b_lens, q_lens, G):
    """Plain causal attention (float64) of each sequence's new queries over its whole
    history ks[b], vs[b] [L][Hkv][D]: what MSA computes when k covers every block."""
    outs, t = [], 0
    for b, n in enumerate(q_lens):
        L = b_lens[b]
        kk = ks[b].double().repeat_interleave(G, dim=1).transpose(0, 1)  # [Hq][L][D]
        vv = vs[b].double().repeat_interleave(G, dim=1).transpose(0, 1)
        qq = q[t:t + n].double().transpose(0, 1)  # [Hq][n][D]
        s = qq @ kk.transpose(1, 2) / math.sqrt(q.shape[-1])
        pos = torch.arange(L - n, L)
        s = s.masked_fill(torch.arange(L)[None, :] > pos[:, None], -math.inf)
        outs.append((torch.softmax(s, -1) @ vv).transpose(0, 1))
        t += n
    return torch.cat(outs)


@pytest.mark.parametrize("Qb", [1, 4])
def test_sparse_attention_prefill_and_decode_vs_reference(Qb):
    cache = make_cache([0, 0], max_tokens=128)
    attn = layer(k=4, Qb=Qb)
    steps = ([30, 61], [15, 8], [0, 1], [1, 0])
    for step, q_lens in enumerate(steps):
        cu = cache.begin_step(q_lens)
        q, kk, vv, qi, ki = step_inputs(sum(q_lens), seed=20 + step)
        with torch.no_grad():
            out = attn(q, kk, vv, qi, ki, cache, cu)
        idx, want = reference_layer(cache, q, qi, attn)
        assert out.shape == q.shape and out.dtype == q.dtype
        assert nmse(out, want) <= 5e-5, (step, nmse(out, want))
    assert cache.kv_len.tolist() == [46, 70]


def test_sparse_attention_covering_every_block_equals_dense_attention():
    """With k >= the number of blocks, MSA attends to every causal token: plain attention."""
    cache = make_cache([0, 0], max_tokens=96)
    attn = layer(k=8, n_sink=0)  # 96 / 16 = 6 blocks <= k
    hist_k, hist_v = [[], []], [[], []]
    for step, q_lens in enumerate(([40, 25], [1, 1], [7, 0])):
        cu = cache.begin_step(q_lens)
        q, kk, vv, qi, ki = step_inputs(sum(q_lens), seed=40 + step)
        with torch.no_grad():
            out = attn(q, kk, vv, qi, ki, cache, cu)
        for b in range(2):
            rows = slice(int(cache.cu_q_host[b]), int(cache.cu_q_host[b + 1]))
            hist_k[b].append(kk[rows])
            hist_v[b].append(vv[rows])
        want = history_attention(q, [torch.cat(h) for h in hist_k], [torch.cat(h) for h in hist_v],
                                 cache.kv_len_host.tolist(), q_lens, CFG["Hq"] // CFG["Hkv"])
        assert nmse(out, want) <= 5e-5


def test_sparse_attention_flattened_projections_and_layers():
    cache = make_cache([33], layers=2)
    cu = cache.begin_step([33])
    q, kk, vv, qi, ki = step_inputs(33, seed=7)
    flat = lambda t: t.reshape(t.shape[0], -1)  # noqa: E731
    with torch.no_grad():
        a0 = layer(layer_idx=0)(q, kk, vv, qi, ki, cache, cu)
        a1 = layer(layer_idx=1)(flat(q), flat(kk), flat(vv), flat(qi), ki, cache, cu)
    assert a1.shape == (33, CFG["Hq"] * CFG["D"])
    assert torch.equal(a0, a1.view_as(a0))
    assert torch.equal(cache.k_caches[0].view(torch.int16), cache.k_caches[1].view(torch.int16))


@pytest.mark.parametrize("fmt", ["nvfp4", "fp8", "fp8_scaled"])
def test_sparse_attention_quantized_keys_vs_reference(fmt):
    needs_ki_format(fmt)
    cache = make_cache([0], ki_format=fmt, max_tokens=200)
    attn = layer(k=3)
    for step, n in enumerate((150, 1, 1)):
        cu = cache.begin_step([n])
        q, kk, vv, qi, ki = step_inputs(n, seed=60 + step)
        with torch.no_grad():
            out = attn(q, kk, vv, qi, ki, cache, cu)
        _, want = reference_layer(cache, q, qi, attn)
        assert nmse(out, want) <= 5e-5
