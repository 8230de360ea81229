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
    PYTHONPATH=build/python python3 examples/train_msa.py --preset full --device cuda --out-dir out

The full preset grows the sequence length from 128-256 tokens to 8K-32K (a curriculum,
train_schedule.py) and gives the final range the steps that fit --time-budget by a cost
model; a time guard ends a segment early when a run is slower than predicted.

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
import train_schedule as schedule
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
    # GPU; a length curriculum from 128-256 tokens (where ci learns) through 512-1K and 2K-4K
    # to 8K-32K, where the sparse stage runs: Bs 64 and k 16 select 1K tokens, 1/8 to 1/32 of
    # a sequence. The final range gets the steps that fit time_budget (train_schedule.py).
    "full": dict(task=Task(n_keys=64, n_values=32, n_filler=128, n_pairs=32, n_queries=32),
                 model=dict(hidden_size=128, intermediate_size=256, num_attention_heads=8, num_key_value_heads=4,
                            head_dim=64, sparse_num_index_heads=4, sparse_index_dim=64, sparse_block_size=64,
                            sparse_topk_blocks=16, n_dense=1, n_msa=2),
                 seq_len=32768, min_frac=0.25, curriculum=dict(start=256, growth=4, steps=[150, 60, 40]),
                 tokens_per_step=8192, final_steps=(20, 400), final_warmup_frac=0.4, lr=2e-3, eval_seqs=4,
                 time_budget=210),
}


def training_ops_device(device):
    """Where msa's ops run: `device`, or the CPU when msa's backend for it refuses the
    backward ops (docs/training.md); the torch parts stay on `device`."""
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


def lengths_of(gen, p, n, lo, hi):
    lo = max(lo, 2 * p["task"].n_queries + p["task"].n_pairs + 1)
    return [int(x) for x in torch.randint(lo, hi + 1, (n,), generator=gen)]


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


def train(name, p, segs, dense_run, seed, device, ops_device, guard_seconds=None, rates=None):
    """Trains one model through the segments (sparse run: each segment's stage; dense run:
    dense throughout). guard_seconds: the run's time budget, spread over the segments by
    the cost model (schedule.Guard); the sparse stage always gets at least one step."""
    torch.manual_seed(seed)
    c = ModelConfig(vocab_size=p["task"].vocab_size, **p["model"])
    model = Decoder(c).to(device)
    steps = sum(s.steps for s in segs)
    opt = torch.optim.AdamW(model.parameters(), lr=p["lr"], weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10) * 0.5 *
                                              (1 + math.cos(math.pi * min(s, steps) / max(steps, 1))) + 0.05)
    gen = torch.Generator().manual_seed(seed)
    curves = {k: [] for k in ("stage", "max_len", "loss", "kl", "recall", "recall_query", "acc", "seconds")}
    stages = ["dense" if dense_run else s.stage for s in segs]
    guard = schedule.Guard(schedule.run_seconds(c, segs, dense_run, rates) if rates else [], guard_seconds)
    ran, step = [], 0
    for i, (seg, stage) in enumerate(zip(segs, stages)):
        done = 0
        while done < seg.steps:
            lengths = lengths_of(gen, p, seg.batch, seg.lo, seg.hi)
            predicted = schedule.step_seconds(c, lengths, stage, rates) if rates else 0.0
            if not guard.allows(i, predicted) and not (done == 0 and stage == "sparse"):
                print(f"[{name}] time guard: segment {seg.lo}-{seg.hi} {stage} ends after {done} of {seg.steps} "
                      f"steps (steps run {guard.ratio or 1.0:.2f}x the cost model)", flush=True)
                break
            t0 = time.time()
            m = measure(model, *make_batch(p["task"], gen, lengths, c.sparse_block_size, device, ops_device), stage)
            opt.zero_grad(set_to_none=True)
            (m["loss"] + m["kl"]).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            row = dict(stage=stage, max_len=max(lengths), loss=float(m["loss"]), kl=float(m["kl"]),
                       recall=m["recall"], recall_query=m["recall_query"], acc=m["acc"], seconds=time.time() - t0)
            guard.measured(predicted, row["seconds"])
            for k, v in row.items():
                curves[k].append(v)
            done, step = done + 1, step + 1
            print(f"[{name}] step {step:4d}/{steps} {stage:6s} len {row['max_len']:5d} loss {row['loss']:.4f} "
                  f"kl {row['kl']:.4f} recall {row['recall']:.3f} (queries {row['recall_query']:.3f}) "
                  f"acc {row['acc']:.3f} {row['seconds']:.2f}s", flush=True)
        ran.append(done)
    return model, curves, ran


def eval_lengths(p, gen):
    """Held-out batches: the ci preset's eval_batches random batches, or eval_seqs single
    sequences spread evenly over the final range (both ends included)."""
    lo, hi = int(p["seq_len"] * p["min_frac"]), p["seq_len"]
    if "eval_seqs" not in p:
        for _ in range(p["eval_batches"]):
            yield lengths_of(gen, p, p["batch"], lo, hi)
        return
    n = p["eval_seqs"]
    for i in range(n):
        yield [round(lo + (hi - lo) * i / max(n - 1, 1))]


def evaluate(model, p, seed, device, ops_device, stage):
    """Held-out accuracy (and loss, kl, recall), the mean over eval_lengths' batches, the same
    for every model; with each batch's longest length and accuracy."""
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    rows = []
    with torch.no_grad():
        for lengths in eval_lengths(p, gen):
            batch = make_batch(p["task"], gen, lengths, model.c.sparse_block_size, device, ops_device)
            rows.append(dict(measure(model, *batch, stage), max_len=max(lengths)))
    keys = ("loss", "kl", "recall", "recall_query", "acc")
    r = {k: sum(float(r[k]) for r in rows) / len(rows) for k in keys}
    r["per_batch"] = [dict(max_len=x["max_len"], acc=x["acc"], recall=x["recall"]) for x in rows]
    return r


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
    fig, axes = plt.subplots(2, 3, figsize=(15, 7))
    panels = [("loss", "task loss (cross-entropy at the queries)"), ("kl", "indexer KL"),
              ("recall", "indexer recall (dense mass in the selected blocks)"), ("acc", "training accuracy"),
              ("max_len", "longest sequence of the step (tokens)")]
    for ax, (key, title) in zip(axes.flat, panels):
        for name, curves in runs.items():
            ax.plot(range(1, len(curves[key]) + 1), curves[key], label=name)
        if key == "recall":
            ax.plot(range(1, len(runs["sparse"]["recall_query"]) + 1), runs["sparse"]["recall_query"], ":",
                    label="sparse, at the queries")
        if key == "max_len":
            ax.set_yscale("log", base=2)
        ax.axvline(warmup + 0.5, color="grey", lw=0.8, ls="--")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.legend(fontsize=8)
    axes.flat[-1].axis("off")
    fig.suptitle(f"MSA training (dense warm-up to step {warmup}, then sparse) vs dense throughout")
    fig.tight_layout()
    write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=110))
    plt.close(fig)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--preset", choices=sorted(PRESETS), default="ci")
    ap.add_argument("--steps", type=int, help="total training steps (default: the preset's; full: what fits "
                                              "--time-budget)")
    ap.add_argument("--warmup-steps", type=int, help="dense warm-up steps (default: a share of --steps; full: the "
                                                     "growth steps and a share of the final range's)")
    ap.add_argument("--seq-len", type=int, help="longest sequence (default: the preset's); full: the final range "
                                                "is [seq-len * min_frac, seq-len]")
    ap.add_argument("--topk-blocks", type=int, help="k, the blocks each token selects (default: the preset's)")
    ap.add_argument("--tokens-per-step", type=int, help="full: tokens per step (default: the preset's)")
    ap.add_argument("--time-budget", type=float, help="full: seconds for both runs and the evaluation, excluding "
                                                      "start-up (default: the preset's); steps past it are skipped")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-dir", default="train_msa_out")
    args = ap.parse_args(argv)
    p = dict(PRESETS[args.preset])
    if args.seq_len:
        p["seq_len"] = args.seq_len
    if args.topk_blocks:
        p["model"] = dict(p["model"], sparse_topk_blocks=args.topk_blocks)
    device = torch.device(args.device)
    ops_device = training_ops_device(device)
    c = ModelConfig(vocab_size=p["task"].vocab_size, **p["model"])
    rates, budget_s, train_s = None, None, None
    try:
        if "curriculum" in p:
            rates = schedule.RATES[ops_device.type]
            budget_s = args.time_budget or p["time_budget"]
            segs = schedule.curriculum(p, p["seq_len"], args.tokens_per_step or p["tokens_per_step"], args.steps,
                                       args.warmup_steps)
            eval_s = sum(schedule.step_seconds(c, n, "sparse", rates, train=False) * 2 +
                         schedule.step_seconds(c, n, "dense", rates, train=False) for n in eval_lengths(p, None))
            train_s = budget_s - max(10.0, 3 * eval_s)
            if args.steps is None:
                schedule.budget(c, segs, rates, train_s, p["final_steps"], p["final_warmup_frac"])
        else:
            steps = args.steps or p["steps"]
            warmup = args.warmup_steps if args.warmup_steps is not None else int(steps * p["warmup_frac"])
            if not 0 <= warmup <= steps or steps < 1:
                raise ValueError("need steps >= 1 and 0 <= warmup-steps <= steps")
            segs = schedule.single(int(p["seq_len"] * p["min_frac"]), p["seq_len"], p["batch"], steps, warmup)
    except ValueError as e:
        ap.error(str(e))
    steps, warmup = sum(s.steps for s in segs), sum(s.steps for s in segs if s.stage == "dense")
    os.makedirs(args.out_dir, exist_ok=True)
    if rates:
        planned = [sum(schedule.run_seconds(c, segs, d, rates)) for d in (False, True)]
        print(f"plan: {steps} steps, {warmup} dense warm-up; time budget {budget_s:.0f} s, {train_s:.0f} s of it "
              f"for training; cost model ({ops_device.type}): msa attention {rates.attn_fwd / 1e12:g} TFLOP/s "
              f"forward, {rates.attn_bwd / 1e12:g} backward, torch {rates.torch / 1e12:g}, {rates.per_step} s/step")
        print("\n".join(schedule.describe(c, segs, rates)))
        print(f"predicted: sparse run {planned[0]:.0f} s, dense run {planned[1]:.0f} s", flush=True)

    t0 = time.time()
    share = None if train_s is None else train_s * planned[0] / sum(planned)
    sparse_model, sparse_curves, sparse_ran = train("sparse", p, segs, False, args.seed, device, ops_device, share,
                                                    rates)
    left = None if train_s is None else train_s - (time.time() - t0)
    dense_model, dense_curves, dense_ran = train("dense", p, segs, True, args.seed, device, ops_device, left, rates)
    final = {"sparse": evaluate(sparse_model, p, args.seed, device, ops_device, "sparse"),
             "dense": evaluate(dense_model, p, args.seed, device, ops_device, "dense"),
             "dense_model_sparse_inference": evaluate(dense_model, p, args.seed, device, ops_device, "sparse")}
    seconds = time.time() - t0
    chance = 1.0 / p["task"].n_values
    for name, r in final.items():
        at = " ".join(f"{b['max_len']}:{b['acc']:.2f}" for b in r["per_batch"])
        print(f"final {name:30s} accuracy {r['acc']:.3f} (chance {chance:.3f}) loss {r['loss']:.4f} "
              f"kl {r['kl']:.4f} recall {r['recall']:.3f} (queries {r['recall_query']:.3f}); by length {at}")
    print(f"sparse vs dense accuracy: {final['sparse']['acc']:.3f} vs {final['dense']['acc']:.3f}; {seconds:.0f}s")

    runs = {"sparse": sparse_curves, "dense": dense_curves}
    real_warmup = sparse_curves["stage"].count("dense")
    report = dict(preset=args.preset, device=str(device), ops_device=str(ops_device), backends=msa.backends(),
                  steps=steps, warmup_steps=warmup, seed=args.seed, seq_len=p["seq_len"],
                  task=asdict(p["task"]), model=p["model"], chance=chance, runs=runs, final=final, seconds=seconds,
                  schedule=[dict(asdict(s), sparse_run_steps=a, dense_run_steps=b)
                            for s, a, b in zip(segs, sparse_ran, dense_ran)],
                  time_budget=budget_s)
    json_path = os.path.join(args.out_dir, "train_msa.json")
    write_atomic(json_path, lambda f: f.write(json.dumps(report, indent=1).encode()))
    png = plot(os.path.join(args.out_dir, "train_msa.png"), runs, real_warmup)
    print(f"wrote {json_path}" + (f", {png}" if png else ""))
    return report


if __name__ == "__main__":
    main()
