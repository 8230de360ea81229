"""Scratch memory for msa's CUDA kernels from torch's caching allocator.

Each stream's scratch is one uint8 tensor that grows when an op needs more (the msa stream
keeps using it until it asks again, and only in that stream's order). Scratch requested
while a stream is being captured into a CUDA graph belongs to that graph's memory pool and
is kept for the life of the process, since the graph's replays use it.
"""
import sys

from msa import _C

_registered = set()
_eager = {}  # (device index, raw stream) -> tensor
_captured = []


def _allocator(index):
    def allocate(nbytes):
        torch = sys.modules["torch"]
        device = torch.device("cuda", index)
        t = torch.empty(nbytes, dtype=torch.uint8, device=device)
        if torch.cuda.is_current_stream_capturing():
            _captured.append(t)
        else:
            _eager[(index, torch.cuda.current_stream(device).cuda_stream)] = t
        return t.data_ptr()

    return allocate


def ensure(index):
    """Points msa's cuda:<index> at torch's allocator (once)."""
    if index in _registered:
        return
    _C.set_workspace_allocator(f"cuda:{index}", _allocator(index))
    _registered.add(index)
