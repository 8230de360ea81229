"""msa's PyTorch integration (docs/python.md).

- `torch.ops.msa.*`: the MSA ops as torch custom ops with fake kernels, registered on
  import when torch >= 2.4 (HAS_TORCH_LIBRARY; STATUS says why not otherwise).
- MSAWrapper: plan() once per step, graph-safe run() per layer.
- PagedKVCache: paged KV and indexer-key caches with a page allocator.
- SparseAttention: one MSA attention layer as an nn.Module.
- indexer_kl: the index branch's KL loss as a differentiable value (msa.torch.autograd;
  sparse, dense and patch attention route there by themselves when an input requires grad).
"""
from msa.torch import library

try:
    library.register()
except Exception as e:  # a torch whose custom-op API differs: the msa.* functions still work
    library.STATUS = f"torch.ops.msa registration failed on torch {library.torch.__version__}: {e!r}"

HAS_TORCH_LIBRARY = library.HAS_TORCH_LIBRARY
STATUS = library.STATUS

from msa.torch.autograd import indexer_kl  # noqa: E402
from msa.torch.cache import PagedKVCache  # noqa: E402
from msa.torch.layer import SparseAttention  # noqa: E402
from msa.torch.wrapper import MSAWrapper  # noqa: E402

__all__ = ["HAS_TORCH_LIBRARY", "STATUS", "MSAWrapper", "PagedKVCache", "SparseAttention", "indexer_kl"]
