#!/usr/bin/env python3
"""Train a small M3-shaped decoder with MSA from scratch on long-context key-value retrieval.

Each sequence is filler tokens with key-value pairs planted at random depths (a position
holding a key token and its value token, see Task); at the end come queries `QUERY key`,
and at each queried key the model must predict its value. The model (msa_decoder.py) has dense first layers and
MSA layers. Two stages, as M3 trains: a dense warm-up (the MSA layers attend densely,
the index branch learns from indexer_kl(stage="dense")), then the sparse stage (selection
by indexer_score + block_topk per KV head, sparse_block_attention, indexer_kl(stage=
"sparse")). A second run with dense attention throughout is the baseline.

    PYTHONPATH=build/python python3 examples/train_msa.py --preset ci --out-dir out

Per step it prints the task loss, the indexer's KL, its recall (the share of the dense
attention mass inside the selected blocks, over tokens whose context exceeds k blocks,
and at the query tokens) and the accuracy; at the end, the held-out accuracy of the
sparse model and of the dense one. --out-dir gets train_msa.json (the curves) and
train_msa.png (the plots; skipped with a notice when matplotlib is missing).
"""
import argparse
import json
import math
import os
import tempfile
import time
from dataclasses import asdict, dataclass

import torch

import msa
from msa_decoder import Decoder, ModelConfig, PackedBatch


@dataclass
class Task:
    """Tokens: NONE (0), QUERY, keys, values, filler. A position holds a token and a companion
    token (NONE almost everywhere), embedded as the sum of the two: a planted pair is one
    position holding (key, value), so finding it is one attention hop from the query."""
    n_keys: int
    n_values: int
    n_filler: int
    n_pairs: int
    n_queries: int

    NONE, QUERY = 0, 1

    @property
    def vocab_size(self):
        return 2 + self.n_keys + self.n_values + self.n_filler

    def sequence(self, gen, length):
        """ids [length][2], target positions (the queried key tokens) and their values (token ids)."""
        keys0, values0 = 2, 2 + self.n_keys
        filler0 = values0 + self.n_values
        body = length - 2 * self.n_queries
        ids = torch.full((length, 2), self.NONE)
        ids[:, 0] = torch.randint(filler0, self.vocab_size, (length,), generator=gen)
        keys = torch.randperm(self.n_keys, generator=gen)[:self.n_pairs] + keys0
        values = torch.randint(values0, filler0, (self.n_pairs,), generator=gen)
        depth = torch.randperm(body, generator=gen)[:self.n_pairs]
        ids[depth, 0], ids[depth, 1] = keys, values
        asked = torch.randperm(self.n_pairs, generator=gen)[:self.n_queries]
        at = body + 2 * torch.arange(self.n_queries)
        ids[at, 0], ids[at + 1, 0] = self.QUERY, keys[asked]
        return ids, at + 1, values[asked]


PRESETS = {
    # cpu backend, under 3 minutes on 2 cores; sequences of 85-128 tokens in blocks of 16
    "ci": dict(task=Task(n_keys=32, n_values=16, n_filler=64, n_pairs=16, n_queries=16),
               model=dict(hidden_size=64, intermediate_size=128, num_attention_heads=8, num_key_value_heads=4,
                          head_dim=16, sparse_num_index_heads=4, sparse_index_dim=16, sparse_block_size=16,
                          sparse_topk_blocks=4, n_dense=1, n_msa=1),
               seq_len=128, min_frac=2 / 3, batch=4, steps=240, warmup_frac=0.6, lr=3e-3, eval_batches=4),
    # GPU; sequences of 8K-32K tokens, M3's Bs and k
    "full": dict(task=Task(n_keys=256, n_values=64, n_filler=512, n_pairs=64, n_queries=16),
                 model=dict(hidden_size=256, intermediate_size=512, num_attention_heads=16, num_key_value_heads=4,
                            head_dim=64, sparse_num_index_heads=4, sparse_index_dim=64, sparse_block_size=128,
                            sparse_topk_blocks=16, n_dense=1, n_msa=3),
                 seq_len=32768, min_frac=0.25, batch=2, steps=2000, warmup_frac=0.2, lr=1e-3, eval_batches=8),
}


def training_ops_device(device):
    """Where msa's ops run: `device`, or the CPU when its backend has no backward ops
    (docs/training.md: the GPU backends refuse them); the torch parts stay on `device`."""
    if device.type == "cpu":
        return device
    i32 = dict(dtype=torch.int32, device=device)
    q = torch.zeros(1, 1, 16, device=device)
    kc = torch.zeros(1, 1, 16, 16, device=device)
    paged = torch.zeros(1, 1, **i32), torch.ones(1, **i32), torch.tensor([0, 1], **i32)
    try:
        out, lse = msa.dense_attention(q, kc, kc, *paged)
        msa.dense_attention_backward(out, q, kc, kc, *paged, out, lse)
        return device
    except RuntimeError as e:
        print(f"notice: msa's training ops do not run on {device} ({e}); msa's ops run on the cpu, "
              f"the rest of the model on {device}")
        return torch.device("cpu")


def make_batch(task, gen, lengths, Bs, device, ops_device):
    parts = [task.sequence(gen, n) for n in lengths]
    offsets = [sum(lengths[:b]) for b in range(len(lengths))]
    ids = torch.cat([p[0] for p in parts]).to(device)
    at = torch.cat([p[1] + o for p, o in zip(parts, offsets)]).to(device)
    want = torch.cat([p[2] for p in parts]).to(device)
    return ids, at, want, PackedBatch(lengths, Bs, device, ops_device)


def lengths_of(gen, p, n):
    lo = max(int(p["seq_len"] * p["min_frac"]), 2 * p["task"].n_queries + p["task"].n_pairs + 1)
    return [int(x) for x in torch.randint(lo, p["seq_len"] + 1, (n,), generator=gen)]


def measure(model, ids, at, want, batch, stage):
    """loss, kl, recall (tokens past k blocks), recall at the queries, accuracy; loss and kl differentiable."""
    logits, stats = model(ids, batch, stage)
    pred = logits[at]
    loss = torch.nn.functional.cross_entropy(pred, want)
    kl = torch.stack([k.mean() for k, _ in stats]).mean()
    c = model.c
    far = (batch.pos >= c.sparse_topk_blocks * c.sparse_block_size).to(batch.ops_device)
    rec = torch.cat([r for _, r in stats], 1)
    recall = rec[far].mean() if far.any() else rec.mean()
    return dict(loss=loss, kl=kl, recall=float(recall), recall_query=float(rec[at.to(rec.device)].mean()),
                acc=float((pred.argmax(-1) == want).float().mean()))


def train(name, p, steps, warmup, seed, device, ops_device):
    """Trains one model: `warmup` dense steps, then sparse (warmup == steps: dense throughout)."""
    torch.manual_seed(seed)
    c = ModelConfig(vocab_size=p["task"].vocab_size, **p["model"])
    model = Decoder(c).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * 0.5 *
                                              (1 + math.cos(math.pi * min(s, steps) / max(steps, 1))) + 0.05)
    gen = torch.Generator().manual_seed(seed)
    curves = {k: [] for k in ("stage", "loss", "kl", "recall", "recall_query", "acc", "seconds")}
    for step in range(steps):
        stage = "dense" if step < warmup else "sparse"
        t0 = time.time()
        m = measure(model, *make_batch(p["task"], gen, lengths_of(gen, p, p["batch"]), c.sparse_block_size, device,
                                       ops_device), stage)
        opt.zero_grad(set_to_none=True)
        (m["loss"] + m["kl"]).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        row = dict(stage=stage, loss=float(m["loss"]), kl=float(m["kl"]), recall=m["recall"],
                   recall_query=m["recall_query"], acc=m["acc"], seconds=time.time() - t0)
        for k, v in row.items():
            curves[k].append(v)
        print(f"[{name}] step {step + 1:4d}/{steps} {stage:6s} loss {row['loss']:.4f} kl {row['kl']:.4f} "
              f"recall {row['recall']:.3f} (queries {row['recall_query']:.3f}) acc {row['acc']:.3f} "
              f"{row['seconds']:.1f}s", flush=True)
    return model, curves


def evaluate(model, p, seed, device, ops_device, stage):
    """Held-out accuracy (and loss, kl, recall) over p['eval_batches'] batches, the same for every model."""
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    rows = []
    with torch.no_grad():
        for _ in range(p["eval_batches"]):
            batch = make_batch(p["task"], gen, lengths_of(gen, p, p["batch"]), model.c.sparse_block_size, device,
                               ops_device)
            rows.append(measure(model, *batch, stage))
    return {k: sum(float(r[k]) for r in rows) / len(rows) for k in ("loss", "kl", "recall", "recall_query", "acc")}


def write_atomic(path, write):
    """write(file) into a temporary file next to path, then rename it over path."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix="." + os.path.basename(path), suffix=".tmp")
    try:
        os.fchmod(fd, 0o644)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def plot(path, runs, warmup):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("notice: matplotlib is not installed; no plot written")
        return None
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    panels = [("loss", "task loss (cross-entropy at the queries)"), ("kl", "indexer KL"),
              ("recall", "indexer recall (dense mass in the selected blocks)"), ("acc", "training accuracy")]
    for ax, (key, title) in zip(axes.flat, panels):
        for name, curves in runs.items():
            ax.plot(range(1, len(curves[key]) + 1), curves[key], label=name)
        if key == "recall":
            ax.plot(range(1, len(runs["sparse"]["recall_query"]) + 1), runs["sparse"]["recall_query"], ":",
                    label="sparse, at the queries")
        ax.axvline(warmup + 0.5, color="grey", lw=0.8, ls="--")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    fig.suptitle(f"MSA training (dense warm-up to step {warmup}, then sparse) vs dense throughout")
    fig.tight_layout()
    write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="ci")
    ap.add_argument("--steps", type=int, help="total training steps (default: the preset's)")
    ap.add_argument("--warmup-steps", type=int, help="dense warm-up steps (default: a share of --steps)")
    ap.add_argument("--seq-len", type=int, help="longest sequence (default: the preset's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default="train_msa_out")
    args = ap.parse_args(argv)
    p = dict(PRESETS[args.preset])
    if args.seq_len:
        p["seq_len"] = args.seq_len
    steps = args.steps or p["steps"]
    warmup = args.warmup_steps if args.warmup_steps is not None else int(steps * p["warmup_frac"])
    if not 0 <= warmup <= steps or steps < 1:
        ap.error("need steps >= 1 and 0 <= warmup-steps <= steps")
    device = torch.device(args.device)
    ops_device = training_ops_device(device)
    os.makedirs(args.out_dir, exist_ok=True)

    t0 = time.time()
    sparse_model, sparse_curves = train("sparse", p, steps, warmup, args.seed, device, ops_device)
    dense_model, dense_curves = train("dense", p, steps, steps, args.seed, device, ops_device)
    final = {"sparse": evaluate(sparse_model, p, args.seed, device, ops_device, "sparse"),
             "dense": evaluate(dense_model, p, args.seed, device, ops_device, "dense"),
             "dense_model_sparse_inference": evaluate(dense_model, p, args.seed, device, ops_device, "sparse")}
    seconds = time.time() - t0
    chance = 1.0 / p["task"].n_values
    for name, r in final.items():
        print(f"final {name:30s} accuracy {r['acc']:.3f} (chance {chance:.3f}) loss {r['loss']:.4f} "
              f"kl {r['kl']:.4f} recall {r['recall']:.3f} (queries {r['recall_query']:.3f})")
    print(f"sparse vs dense accuracy: {final['sparse']['acc']:.3f} vs {final['dense']['acc']:.3f}; {seconds:.0f}s")

    runs = {"sparse": sparse_curves, "dense": dense_curves}
    report = dict(preset=args.preset, device=str(device), ops_device=str(ops_device), backends=msa.backends(),
                  steps=steps, warmup_steps=warmup, seed=args.seed, seq_len=p["seq_len"],
                  task=asdict(p["task"]), model=p["model"], chance=chance, runs=runs, final=final, seconds=seconds)
    json_path = os.path.join(args.out_dir, "train_msa.json")
    write_atomic(json_path, lambda f: f.write(json.dumps(report, indent=1).encode()))
    png = plot(os.path.join(args.out_dir, "train_msa.png"), runs, warmup)
    print(f"wrote {json_path}" + (f", {png}" if png else ""))
    return report


if __name__ == "__main__":
    main()
