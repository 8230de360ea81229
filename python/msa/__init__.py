"""msa: MiniMax-style sparse attention (MSA) ops on torch tensors and NumPy arrays.

Every op of msa's contract is a function here (see docs/python.md); `msa.torch` holds
the PyTorch integration and `msa.reference` a float64 implementation for checks.
"""
from msa import _C
from msa._ops import (add, argmax, block_topk, dense_attention, embedding, gelu, indexer_score, indexer_topk,
                      kv_append, layer_norm, matmul, patch_attention_3d, rms_norm, rope, rope_3d, scatter_visual,
                      sparse_block_attention, swiglu)
from msa._training import (dense_attention_backward, indexer_kl, patch_attention_3d_backward,
                           sparse_block_attention_backward)

__version__ = _C.__version__


def devices():
    """Every backend msa knows (compiled in or not), its devices and why it has none:
    what `msa devices` prints, as a list of dicts."""
    return _C.devices()


def backends():
    """The names of the backends compiled into this build."""
    return [b["backend"] for b in _C.devices() if b["compiled"]]


def tuning(device):
    """The kernel-choice knobs of `device` ("cuda:0", "cpu", ...) as a list of dicts (name,
    value, default, env, shown, help): what `msa devices` lists. Empty on backends with one
    kernel per op. See docs/tuning.md."""
    return _C.tuning(device)


def set_tuning(device, knob, value):
    """Sets one kernel-choice knob of `device` (e.g. set_tuning("cuda:0", "decode", 1)) for
    the ops called from now on; `value` is a number, on/off or a value name ("portable").
    ValueError naming the knob when the device has no such knob or the value is out of range.
    No knob changes what an op computes, only which kernel computes it."""
    _C.set_tuning(device, knob, str(value))


def check_errors(device=None):
    """Waits for the current torch stream of a CUDA device (default: torch's current
    device) and raises the device-side index errors msa's kernels flagged on it as
    RuntimeError. CPU backends raise such errors at the call itself."""
    import torch

    index = torch.cuda.current_device() if device is None else torch.device(device).index or 0
    _C.check_errors(f"cuda:{index}", torch.cuda.current_stream(index).cuda_stream)


__all__ = ["add", "argmax", "backends", "block_topk", "check_errors", "dense_attention", "dense_attention_backward",
           "devices", "embedding", "gelu", "indexer_kl", "indexer_score", "indexer_topk", "kv_append", "layer_norm",
           "matmul", "patch_attention_3d", "patch_attention_3d_backward", "rms_norm", "rope", "rope_3d",
           "scatter_visual", "set_tuning", "sparse_block_attention", "sparse_block_attention_backward", "swiglu",
           "tuning"]
