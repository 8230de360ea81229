"""Length curriculum, cost model and time guard for train_msa.py.

A schedule is a list of segments, each a range of sequence lengths, sequences per step, a
step count and the sparse run's stage (the dense baseline runs every segment dense). The
cost model predicts a step's seconds from its FLOPs at assumed rates, so the final
segments get as many steps as a time budget allows; the guard ends a segment early when
its share of the budget is spent, so a run slower than predicted still finishes.
"""
import time
from dataclasses import dataclass


@dataclass
class Segment:
    lo: int
    hi: int
    batch: int
    steps: int
    stage: str  # the sparse run's stage; the dense run is dense throughout


@dataclass
class Rates:
    """Assumed throughput: msa's attention ops forward and backward (indexer_kl counts as
    backward), torch's matmuls, and a fixed cost per step (launches, syncs, batch building)."""
    attn_fwd: float
    attn_bwd: float
    torch: float
    per_step: float


# cuda: a portable, untuned tier of msa's kernels; cpu: the cpu backend on a few cores
RATES = {"cuda": Rates(attn_fwd=50e12, attn_bwd=15e12, torch=20e12, per_step=0.05),
         "cpu": Rates(attn_fwd=10e9, attn_bwd=4e9, torch=10e9, per_step=0.03)}


def curriculum(p, seq_len, tokens_per_step, steps=None, warmup=None):
    """Growth segments: ranges [hi/2, hi] with hi = start, start*growth, ... below seq_len,
    each with its preset step count; then the final range [seq_len*min_frac, seq_len], dense
    for a share of its steps (the rest of the sparse run's warm-up) and sparse for the rest.
    The final range's step count is left 0 when `steps` is None (budget() sets it)."""
    c = p["curriculum"]
    his = []
    hi = c["start"]
    while hi < seq_len * p["min_frac"] * 2 and len(his) < len(c["steps"]):
        his.append(hi)
        hi *= c["growth"]
    growth = [Segment(h // 2, h, max(1, tokens_per_step // h), n, "dense") for h, n in zip(his, c["steps"])]
    lo = int(seq_len * p["min_frac"])
    batch = max(1, round(tokens_per_step / ((lo + seq_len) / 2)))
    segs = growth + [Segment(lo, seq_len, batch, 0, "dense"), Segment(lo, seq_len, batch, 0, "sparse")]
    if steps is not None:
        set_final_steps(segs, steps - sum(s.steps for s in growth), p["final_warmup_frac"], warmup)
    return segs


def set_final_steps(segs, n, warmup_frac, warmup=None):
    """The final range's n steps: dense ones (warmup minus the growth steps, or a share) then sparse."""
    grown = sum(s.steps for s in segs[:-2])
    n_dense = warmup - grown if warmup is not None else int(round(n * warmup_frac))
    if n < 1 or not 0 <= n_dense <= n:
        raise ValueError(f"the curriculum's growth takes {grown} steps: need steps > {grown} and "
                         f"{grown} <= warmup-steps <= steps")
    segs[-2].steps, segs[-1].steps = n_dense, n - n_dense


def single(lo, hi, batch, steps, warmup):
    """One length range: `warmup` dense steps, then sparse (the ci preset)."""
    return [Segment(lo, hi, batch, warmup, "dense"), Segment(lo, hi, batch, steps - warmup, "sparse")]


def _pairs(n, window):
    """(query, key) pairs of causal attention over n tokens, each query attending at most `window` keys."""
    w = min(n, window)
    return w * (w + 1) // 2 + (n - w) * w


def step_seconds(c, lengths, stage, rates, train=True):
    """Predicted seconds of one step (forward, and backward when train) over sequences of `lengths`."""
    HD, HI = c.num_attention_heads * c.head_dim, c.sparse_num_index_heads * c.sparse_index_dim
    dense = sum(_pairs(n, n) for n in lengths)
    sparse = sum(_pairs(n, c.sparse_topk_blocks * c.sparse_block_size) for n in lengths)
    fwd, bwd = rates.attn_fwd, rates.attn_bwd
    t_dense_layer = 4 * dense * HD / fwd + (10 * dense * HD / bwd if train else 0)
    score = 2 * dense * HI / fwd
    if stage == "dense":
        msa_layer = t_dense_layer + score + 4 * sparse * HD / fwd
        if train:
            msa_layer += 2 * dense * (HD + 3 * HI) / bwd
    else:
        msa_layer = 4 * sparse * HD / fwd + score + 4 * dense * HD / fwd
        if train:
            msa_layer += 10 * sparse * HD / bwd + 2 * sparse * (HD + 3 * HI) / bwd
    per_layer = 2 * (c.hidden_size * (2 * HD + 2 * c.num_key_value_heads * c.head_dim + 3 * c.intermediate_size) +
                     c.hidden_size * (HI + c.sparse_index_dim))
    T = sum(lengths)
    torch_flops = T * ((c.n_dense + c.n_msa) * per_layer + 2 * c.hidden_size * c.vocab_size) * (3 if train else 1)
    return (rates.per_step + c.n_dense * t_dense_layer + c.n_msa * msa_layer + torch_flops / rates.torch)


def segment_step_seconds(c, seg, stage, rates):
    """Mean predicted seconds of a step of seg (lengths over its range)."""
    grid = [seg.lo + (seg.hi - seg.lo) * i / 8 for i in range(9)]
    return sum(step_seconds(c, [int(n)] * seg.batch, stage, rates) for n in grid) / len(grid)


def run_seconds(c, segs, dense_run, rates):
    return [s.steps * segment_step_seconds(c, s, "dense" if dense_run else s.stage, rates) for s in segs]


def budget(c, segs, rates, train_seconds, final_range, warmup_frac):
    """Sets the final range's steps so both runs fit train_seconds (within final_range = (min, max))."""
    growth = sum(run_seconds(c, segs[:-2], False, rates)) + sum(run_seconds(c, segs[:-2], True, rates))
    s_dense = segment_step_seconds(c, segs[-2], "dense", rates)
    s_sparse = segment_step_seconds(c, segs[-1], "sparse", rates)
    per_step = warmup_frac * s_dense + (1 - warmup_frac) * s_sparse + s_dense
    n = int((train_seconds - growth) / per_step) if train_seconds > growth else 0
    n = min(max(n, final_range[0]), final_range[1])
    set_final_steps(segs, n, warmup_frac)


def describe(c, segs, rates):
    """The planned schedule, one line per segment, with the predicted seconds of both runs."""
    lines, first = [], 1
    for s in segs:
        if not s.steps:
            continue
        last = first + s.steps - 1
        lines.append(f"  steps {first:4d}-{last:4d}  lengths {s.lo:5d}-{s.hi:5d} x{s.batch:<3d} sparse run {s.stage:6s}"
                     f" {segment_step_seconds(c, s, s.stage, rates):6.3f} s/step, dense run "
                     f"{segment_step_seconds(c, s, 'dense', rates):6.3f} s/step")
        first = last + 1
    return lines


class Guard:
    """Per-segment deadlines for one run: segment i may start a step while the run's elapsed
    time plus that step's predicted seconds (scaled by how far the measured steps have run
    from the cost model) stays within its share of the run's budget. None: no guard."""

    def __init__(self, planned, seconds):
        total = sum(planned)
        self.deadlines = None
        if seconds is not None and total > 0:
            scale = seconds / total
            acc, self.deadlines = 0.0, []
            for t in planned:
                acc += t * scale
                self.deadlines.append(acc)
        self.t0, self.ratio = time.time(), None

    def allows(self, i, predicted):
        if self.deadlines is None:
            return True
        return time.time() - self.t0 + predicted * (self.ratio or 1.0) <= self.deadlines[i]

    def measured(self, predicted, seconds):
        r = seconds / max(predicted, 1e-9)
        self.ratio = r if self.ratio is None else 0.5 * (self.ratio + r)

