"""gka_torch: Gaussian Kernel Attention for PyTorch, over libgka's kernels.

    import gka_torch
    from gka_torch import GaussianKernelAttention, gka_attention
    attention = GaussianKernelAttention(heads=8, head_dim=64)  # causal; learns sigma per head
    y = attention(x)                                           # x [B,T,8*64] or [B,T,8,64]
    y = gka_attention(x, sigma, window=(-1, 0))                # x [B,T,H,D] float32, sigma [H]
    y = gka_attention(x, sigma, kernel="laplace")              # or "cauchy": gka_torch.KERNELS
    print(gka_torch.info())                                    # the libgka in use, for bug reports

gka_attention is the custom op torch.ops.gka.forward (which also returns lse
[B,H,T]) with an autograd formula calling torch.ops.gka.backward: gradients
flow to x and sigma, and torch.compile keeps each op whole. gka_attention_varlen
runs packed sequences of mixed lengths (torch.ops.gka.forward_varlen);
gka_attention_chunked cuts the sequence into chunks whose partial results merge
exactly (torch.ops.gka.forward_chunk, merge_chunks), and gka_torch.distributed
shards a sequence across torch.distributed processes on them. gka_decode runs new
tokens against a cache of the features before them (torch.ops.gka.decode).
gka_attention_features is random-feature GKA, linear in T (torch.ops.gka.forward_features;
docs/random-features.md): gradients flow to x, sigma and the frequencies. libgka is loaded
with ctypes from GKA_LIBRARY (a path) if set, else from the installation this
package came with, else from the system's library path (gka_torch._lib).

__version__ is the project's version (CMakeLists.txt, project(VERSION)), as the
libgka it loaded reports it (gka_version()): gka_torch is that project's binding.
"""
import os as _os

try:
    import torch as _torch
except ImportError as e:
    raise ImportError("gka_torch needs PyTorch: pip install torch "
                      "(CPU-only: pip install torch --index-url https://download.pytorch.org/whl/cpu)") from e

from ._ops import (KERNELS, draw_frequencies, gka_attention, gka_attention_chunked, gka_attention_features,
                   gka_attention_varlen, gka_decode, gka_decode_features, merge_chunks, new_feature_state)
from . import _ops
from ._ops import LIB as _LIB
from ._ops import LIBRARY_PATH as _LIBRARY_PATH
from ._lib import check as _check
from ._lib import has_cuda as _has_cuda
from ._module import DecodeCache, FeatureStateCache, GaussianKernelAttention
from .reference import gka_attention_reference, gka_features_reference, gka_forward_reference

__all__ = ["GaussianKernelAttention", "DecodeCache", "FeatureStateCache", "KERNELS", "gka_attention", "gka_attention_varlen",
           "gka_attention_chunked", "gka_attention_features", "draw_frequencies", "merge_chunks", "gka_decode",
           "gka_decode_features", "new_feature_state", "gka_attention_reference", "gka_forward_reference",
           "gka_features_reference", "library_path",
           "has_cuda", "cpu_family", "set_score_form", "score_form", "last_kernel", "set_num_threads",
           "get_num_threads", "memory_stats", "reset_peak_memory", "info"]

__version__ = _LIB.gka_version().decode()
library_path = _LIBRARY_PATH  # the libgka this process loaded


def has_cuda():
    """Whether the loaded libgka has the CUDA kernels compiled in (CUDA tensors need them)."""
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
    "centred". gka_torch's setting, for the whole process: each call passes it to
    libgka in its description (gka.h, gka_call.scores; the names are
    gka_set_score_form's, which checks them)."""
    _ops.set_score_policy(form)


def score_form():
    """The score form set: "auto", "origin", "centred" or "direct"."""
    return _ops.score_policy()


def last_kernel():
    """The kernel variant that gave this thread's last results, e.g. gka_forward_avx512_d64."""
    return _LIB.gka_last_kernel().decode()


def set_num_threads(threads):
    """Worker threads of libgka's CPU kernels, 1 to 1024 (gka.h, gka_set_num_threads);
    results do not depend on it. The default: GKA_NUM_THREADS (environment) where set,
    which libgka reads and this package leaves alone; otherwise torch.get_num_threads()
    as it is when gka_torch is imported (so OMP_NUM_THREADS and a torch.set_num_threads
    before the import limit both). A later torch.set_num_threads does not follow."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"gka: threads must be an int, got {threads!r}")
    _check(_LIB, _LIB.gka_set_num_threads(threads), "gka_set_num_threads")


def get_num_threads():
    """Worker threads of libgka's CPU kernels (gka.h, gka_num_threads)."""
    return _LIB.gka_num_threads()


if "GKA_NUM_THREADS" not in _os.environ:
    set_num_threads(min(_torch.get_num_threads(), 1024))


def memory_stats():
    """The working memory of libgka's CPU kernels, in bytes (gka.h, gka_memory_usage):
    {"in_use": held by the calls running now, "peak": the most held at once since
    the library loaded or reset_peak_memory(), "idle": freed buffers kept for the
    next calls}. Beyond the tensors the caller passes and receives."""
    m = _LIB.gka_memory_usage()
    return {"in_use": m.in_use, "peak": m.peak, "idle": m.idle}


def reset_peak_memory():
    """Restarts memory_stats()'s peak from what is in use (gka_reset_memory_peak)."""
    _LIB.gka_reset_memory_peak()


def info():
    """A description of the libgka this process runs, for bug reports: its version and
    path, its CPU families and the one in use, the thread count, the score form and
    CUDA's state. It returns the text: print(gka_torch.info()). (Where libgka has
    CUDA kernels, it asks the driver whether a device runs them: gka_cuda_available.)"""
    if not _LIB.gka_cuda_compiled():
        cuda = "not compiled in"
    else:
        families = _LIB.gka_cuda_families().decode()
        available = _LIB.gka_cuda_available()
        # The families' names are cmake/families.tsv's: PTX for one compute
        # capability each (cuda86: 8.6), best first.
        cuda = f"{families} (PTX by compute capability, best first), " + ("a device runs them" if available else
                                  f"no device runs them: {_LIB.gka_last_error().decode(errors='replace')}")
    env_threads = _os.environ.get("GKA_NUM_THREADS")
    return "\n".join([
        f"version: {__version__} (libgka's gka_version(), gka_torch.__version__)",
        f"library: {library_path}",
        f"CPU families compiled: {_LIB.gka_cpu_families().decode()}",
        f"CPU family in use: {cpu_family()}",
        f"threads: {get_num_threads()}" + (f" (GKA_NUM_THREADS={env_threads})" if env_threads is not None else ""),
        f"score form: {score_form()}",
        f"kernel functions: {', '.join(KERNELS)}",
        f"CUDA kernels: {cuda}",
        f"torch: {_torch.__version__}, torch.cuda.is_available(): {_torch.cuda.is_available()}",
    ])
