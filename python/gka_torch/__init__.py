"""gka_torch: Gaussian Kernel Attention for PyTorch, over libgka's kernels.

    from gka_torch import gka_attention
    y = gka_attention(x, sigma, window=(-1, 0))   # x [B,T,H,D] float32, sigma [H]

gka_attention is the custom op torch.ops.gka.forward (which also returns lse
[B,H,T]) with an autograd formula calling torch.ops.gka.backward: gradients
flow to x and sigma, and torch.compile keeps each op whole. gka_attention_varlen
runs packed sequences of mixed lengths (torch.ops.gka.forward_varlen);
gka_attention_chunked cuts the sequence into chunks whose partial results merge
exactly (torch.ops.gka.forward_chunk, merge_chunks), and gka_torch.distributed
shards a sequence across torch.distributed processes on them. gka_decode runs new
tokens against a cache of the features before them (torch.ops.gka.decode). libgka is loaded
with ctypes from GKA_LIBRARY (a path) if set, else from the installation this
package came with, else from the system's library path (gka_torch._lib).
"""
try:
    import torch  # noqa: F401
except ImportError as e:
    raise ImportError("gka_torch needs PyTorch: pip install torch "
                      "(CPU-only: pip install torch --index-url https://download.pytorch.org/whl/cpu)") from e

from ._ops import LIBRARY_PATH, gka_attention, gka_attention_chunked, gka_attention_varlen, gka_decode, merge_chunks
from ._ops import LIB as _LIB
from ._lib import has_cuda as _has_cuda
from .reference import gka_attention_reference, gka_forward_reference

__all__ = ["gka_attention", "gka_attention_varlen", "gka_attention_chunked", "merge_chunks", "gka_decode",
           "gka_attention_reference", "gka_forward_reference", "library_path", "has_cuda", "cpu_family", "set_score_form", "score_form", "last_kernel"]

library_path = LIBRARY_PATH  # the libgka this process loaded


def has_cuda():
    """Whether the loaded libgka has CUDA entry points (CUDA tensors need them)."""
    return _has_cuda(_LIB)


def cpu_family():
    """The CPU family libgka's kernels run on here: one of the library's compiled
    families (gka.h, gka_cpu_families(); cmake/families.tsv)."""
    return _LIB.gka_cpu_family().decode()


def set_score_form(form):
    """How the CPU kernels form |x_i - x_j|^2, by the first score form a call tries:
    "auto" (the default: "origin" where sampled tokens allow, else "centred"),
    "origin", "centred" (each an expansion, then the next form wherever it would
    miss the accuracy contract) or "direct" (always); "expansion" is an alias of
    "centred". gka.h, gka_set_score_form."""
    from ._lib import check
    check(_LIB, _LIB.gka_set_score_form(None if form is None else form.encode()), "gka_set_score_form")


def score_form():
    """The score form set: "auto", "origin", "centred" or "direct"."""
    return _LIB.gka_score_form().decode()


def last_kernel():
    """The kernel variant that gave this thread's last results, e.g. gka_forward_avx512_d64."""
    return _LIB.gka_last_kernel().decode()
