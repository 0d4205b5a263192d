"""gka_torch: Gaussian Kernel Attention for PyTorch, over libgka's kernels.

    from gka_torch import gka_attention
    y = gka_attention(x, sigma, window=(-1, 0))   # x [B,T,H,D] float32, sigma [H]

gka_attention is the custom op torch.ops.gka.forward (which also returns lse
[B,H,T]) with an autograd formula calling torch.ops.gka.backward: gradients
flow to x and sigma, and torch.compile keeps each op whole. libgka is loaded
with ctypes from GKA_LIBRARY (a path) if set, else from the installation this
package came with, else from the system's library path (gka_torch._lib).
"""
try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("gka_torch needs PyTorch: pip install torch "
                      "(CPU-only: pip install torch --index-url https://download.pytorch.org/whl/cpu)") from e

from ._ops import LIBRARY_PATH, gka_attention
from ._ops import LIB as _LIB
from ._lib import has_cuda as _has_cuda
from .reference import gka_attention_reference, gka_forward_reference

__all__ = ["gka_attention", "gka_attention_reference", "gka_forward_reference", "library_path", "has_cuda",
           "cpu_family"]

library_path = LIBRARY_PATH  # the libgka this process loaded


def has_cuda():
    """Whether the loaded libgka has CUDA entry points (CUDA tensors need them)."""
    return _has_cuda(_LIB)


def cpu_family():
    """The CPU family libgka's kernels run on here: "avx512", "avx2" or "generic"."""
    return _LIB.gka_cpu_family().decode()
