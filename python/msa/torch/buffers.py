"""Step tensors of MSAWrapper: kept while their specs stay the same, so their addresses
do too (a captured CUDA graph replays on them), and carved from a caller's workspace
tensor when one is given."""
import torch

ALIGN = 256  # bytes between carved tensors


def _nbytes(shape, dtype):
    n = 1
    for s in shape:
        n *= s
    return n * torch.empty((), dtype=dtype).element_size()


def _aligned(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def required_bytes(specs):
    """Workspace bytes for specs {name: (shape, dtype)} (one ALIGN of slack for the base address)."""
    return ALIGN + sum(_aligned(_nbytes(shape, dtype)) for shape, dtype in specs.values())


class StepBuffers:
    """Named tensors of given (shape, dtype) on one device."""

    def __init__(self, workspace=None):
        if workspace is not None and (workspace.dtype != torch.uint8 or workspace.dim() != 1
                                      or not workspace.is_contiguous()):
            raise ValueError("MSAWrapper: argument 'workspace': must be a contiguous 1-D torch.uint8 tensor")
        self.workspace = workspace
        self._specs = None
        self._device = None
        self.tensors = {}

    def get(self, specs, device):
        """The tensors of `specs` {name: (shape, dtype)}; the same ones as the last call
        when specs and device are unchanged."""
        specs = {name: (tuple(int(s) for s in shape), dtype) for name, (shape, dtype) in specs.items()}
        device = torch.device(device)
        if specs == self._specs and device == self._device:
            return self.tensors
        self.tensors = self._carve(specs, device) if self.workspace is not None else self._allocate(specs, device)
        self._specs, self._device = specs, device
        return self.tensors

    @staticmethod
    def _allocate(specs, device):
        return {name: torch.empty(shape, dtype=dtype, device=device) for name, (shape, dtype) in specs.items()}

    def _carve(self, specs, device):
        ws = self.workspace
        if ws.device != device:
            raise ValueError(f"MSAWrapper: argument 'workspace': is on {ws.device}, the step runs on {device}")
        need = required_bytes(specs)
        if ws.numel() < need:
            raise ValueError(f"MSAWrapper: argument 'workspace': holds {ws.numel()} bytes, this step needs {need}")
        base = ws.data_ptr()
        out, offset = {}, _aligned(base) - base
        for name, (shape, dtype) in specs.items():
            n = _nbytes(shape, dtype)
            out[name] = ws[offset:offset + n].view(dtype).view(shape)
            offset += _aligned(n)
        return out
