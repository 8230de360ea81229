"""Where a call's outputs are created and which stream it runs on.

msa never imports torch or NumPy itself: a tensor is recognised by the modules the caller
has already imported, so `import msa` stays cheap and works with either alone.
"""
import sys

F32 = "f32"
I32 = "i32"


class Target:
    """The first tensor argument's framework and device: outputs are made there, and
    CUDA tensors run on the framework's current stream."""

    __slots__ = ("empty", "stream", "is_torch")

    def __init__(self, empty, stream, is_torch):
        self.empty = empty
        self.stream = stream
        self.is_torch = is_torch


_torch_dtypes = None


def _torch_dtype(torch, dtype):
    global _torch_dtypes
    if _torch_dtypes is None:
        _torch_dtypes = {F32: torch.float32, I32: torch.int32}
    return _torch_dtypes.get(dtype, dtype) if isinstance(dtype, str) else dtype


def _raw_stream(torch, index):
    """The raw cudaStream_t of torch's current stream on device `index`."""
    get = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if get is not None:
        return get(index)
    return torch.cuda.current_stream(index).cuda_stream


_torch_targets = {}  # torch.device -> (empty, CUDA ordinal or -1)


def _torch_target(torch, device):
    index = device.index if device.type == "cuda" else -1
    if index >= 0:
        from msa import _workspace

        _workspace.ensure(index)

    def empty(shape, dtype):
        return torch.empty(shape, dtype=_torch_dtype(torch, dtype), device=device)

    _torch_targets[device] = (empty, index)
    return _torch_targets[device]


def target_of(op, first):
    """The Target of `first`, the op's first tensor argument."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(first, torch.Tensor):
        device = first.device
        empty, index = _torch_targets.get(device) or _torch_target(torch, device)
        return Target(empty, _raw_stream(torch, index) if index >= 0 else 0, True)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(first, np.ndarray):
        return Target(_numpy_empty, 0, False)

    def refuse(shape, dtype):
        raise ValueError(f"{op}: outputs cannot be created for {type(first).__name__} inputs: pass the output tensors")

    return Target(refuse, 0, False)


def _numpy_empty(shape, dtype):
    np = sys.modules["numpy"]
    return np.empty(shape, dtype=np.float32 if dtype == F32 else np.int32 if dtype == I32 else dtype)


def wants_grad(target, *tensors):
    """True when a torch input requires grad and grad mode is on (autograd takes the call)."""
    if not target.is_torch:
        return False
    torch = sys.modules["torch"]
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def check_no_grad(op, target, *tensors):
    """Ops other than the attention ops and the indexer's KL loss have no backward: refuse
    inputs that would need one rather than return outputs cut off from the graph."""
    if wants_grad(target, *tensors):
        raise RuntimeError(
            f"{op}: an input requires grad, and {op} has no backward (msa differentiates sparse_block_attention, "
            "dense_attention, patch_attention_3d and msa.torch.indexer_kl): call it under torch.no_grad() or pass "
            "detached tensors"
        )


def dim(t, i):
    """Dim i of t's shape, or 0 when t has too few dims (the op then names the argument)."""
    shape = getattr(t, "shape", ())
    return shape[i] if -len(shape) <= i < len(shape) else 0
