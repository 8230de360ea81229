"""Shared fixtures: the backends this build can run (CPU ones always; Vulkan where a device,
e.g. Mesa's lavapipe, is found) and the frameworks tensors come from."""
import os
import sys

import pytest

torch = pytest.importorskip("torch", reason="the package tests need PyTorch (Debian: python3-torch)")

sys.path.insert(0, os.path.dirname(__file__))

import msa  # noqa: E402


def _runnable():
    names = []
    for b in msa.devices():
        if b["backend"] in ("cpu-ref", "cpu") and b["devices"]:
            names.append(b["backend"])
        elif b["backend"] == "vulkan" and b["devices"]:
            names.append("vulkan:0")
    return names


BACKENDS = _runnable()


@pytest.fixture(params=BACKENDS)
def backend(request):
    return request.param


@pytest.fixture
def gen():
    g = torch.Generator()
    g.manual_seed(1234)
    return g


def as_framework(framework, *tensors):
    """The tensors as torch tensors or NumPy arrays (None stays None)."""
    if framework == "torch":
        return tensors
    return tuple(None if t is None else t.numpy() for t in tensors)


def poisoned_like(x):
    """A NaN-filled tensor or array of x's type, shape and dtype (outputs are poisoned before a run)."""
    if isinstance(x, torch.Tensor):
        return torch.full_like(x, float("nan"))
    import numpy as np

    return np.full_like(x, np.nan)
