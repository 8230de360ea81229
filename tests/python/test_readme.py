"""The README's "From PyTorch" code runs as written: on CUDA where there is a GPU, and on
the CPU (the same code with its device changed) everywhere, checked against msa.reference."""
import os
import re

import pytest
import torch

import msa.reference as ref
from cases import assert_out_close

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def readme_python_blocks():
    text = open(os.path.join(ROOT, "README.md")).read()
    section = text.split("## From PyTorch", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def run_readme(device):
    ns = {}
    for block in readme_python_blocks():
        exec(compile(block.replace('"cuda"', repr(device)), "README.md", "exec"), ns)
    return ns


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_readme_example_runs_and_matches_the_reference(device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: torch.cuda.is_available() is False")
    ns = run_readme(device)
    assert len(readme_python_blocks()) >= 2
    cpu = {k: ns[k].cpu() for k in ("q", "qi", "k_cache", "v_cache", "ki_cache", "block_table", "kv_len", "cu_q")}
    want_idx, _ = ref.indexer_topk(cpu["qi"], cpu["ki_cache"], cpu["block_table"], cpu["kv_len"], cpu["cu_q"], k=16)
    assert ns["block_idx"].shape == want_idx.shape
    want_out, _ = ref.sparse_block_attention(cpu["q"], cpu["k_cache"], cpu["v_cache"], cpu["block_table"],
                                             cpu["kv_len"], cpu["cu_q"], ns["block_idx"].cpu())
    assert_out_close(ns["out"].cpu(), want_out, torch.bfloat16)
    assert torch.equal(ns["wrapper"].out.cpu(), ns["out"].cpu())  # plan/run computes what the two calls did
