"""Finds and loads libgka with ctypes, declares its C ABI, maps its errors.

This module imports nothing but the standard library, so the installation test
can check where the library is found on a machine without PyTorch.

Why ctypes and not a C++ extension: an extension would be compiled against one
PyTorch's C++ ABI and need rebuilding for every torch release (and a compiler
at install time); ctypes works with any torch and any installed libgka, the C
ABI takes a plain struct of pointers and sizes (gka_call), and ctypes releases
the GIL for the duration of each foreign call, so the kernels' threads run
while other Python threads proceed. The per-call overhead (a few microseconds)
is negligible next to an attention kernel.
"""
import ctypes
import ctypes.util
import os

GKA_OK = 0
GKA_ERR_INVALID_ARGUMENT = 1
STATUS_NAMES = {
    1: "GKA_ERR_INVALID_ARGUMENT",
    2: "GKA_ERR_UNSUPPORTED",
    3: "GKA_ERR_OUT_OF_MEMORY",
    4: "GKA_ERR_DEVICE",
    5: "GKA_ERR_INTERNAL",
}


class Shape(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int64), ("seq_len", ctypes.c_int64), ("heads", ctypes.c_int64),
                ("head_dim", ctypes.c_int64)]


class Window(ctypes.Structure):
    _fields_ = [("left", ctypes.c_int64), ("right", ctypes.c_int64)]


class Chunk(ctypes.Structure):
    _fields_ = [("query_start", ctypes.c_int64), ("key_start", ctypes.c_int64), ("key_len", ctypes.c_int64)]


_p = ctypes.c_void_p
_status = ctypes.c_int


class Memory(ctypes.Structure):
    """gka.h's gka_memory: the CPU kernels' working memory, in bytes."""
    _fields_ = [("in_use", ctypes.c_uint64), ("peak", ctypes.c_uint64), ("idle", ctypes.c_uint64)]


class Call(ctypes.Structure):
    """gka.h's gka_call, the description of a compute call; the enums are ints
    (gka_dtype, gka_kernel_function: gka_kernels()' order, gka_score_policy,
    gka_device)."""
    _fields_ = [("size", ctypes.c_size_t), ("shape", Shape), ("window", Window), ("dtype", ctypes.c_int),
                ("kernel", ctypes.c_int), ("scores", ctypes.c_int), ("device", ctypes.c_int), ("stream", _p),
                ("cu_seqlens", _p), ("chunk", ctypes.POINTER(Chunk)), ("cache_capacity", ctypes.c_int64),
                ("cache_lens", _p), ("x", _p), ("sigma", _p), ("y", _p), ("lse", _p), ("dy", _p), ("dx", _p),
                ("dsigma", _p), ("keys", _p), ("dx_keys", _p), ("cache", _p),
                ("features", ctypes.c_int64), ("frequencies", _p), ("dfrequencies", _p)]

    def __init__(self, **fields):
        fields.setdefault("window", Window(-1, 0))  # gka_call_init's: causal
        super().__init__(size=ctypes.sizeof(Call), **fields)


# gka_score_policy's values, by gka_set_score_form's names.
SCORE_POLICIES = ("auto", "origin", "centred", "direct")
GKA_CPU, GKA_CUDA = 0, 1

# The compute calls (runtime/include/gka/gka.h): a description by reference.
RUN_CALLS = ("gka_run_forward", "gka_run_backward", "gka_run_decode")

# The older calls, which the autotuner and tests still call. Pointers travel as
# void* (torch's data_ptr()), shape and window by value.
_HOST_SIGNATURES = {
    "gka_forward": [Shape, Window, _p, _p, _p, _p],
    "gka_backward": [Shape, Window, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_bf16": [Shape, Window, _p, _p, _p, _p],
    "gka_backward_bf16": [Shape, Window, _p, _p, _p, _p, _p, _p, _p],
    "gka_decode": [Shape, ctypes.c_int64, Window, _p, _p, _p, _p, _p, _p],
    "gka_decode_bf16": [Shape, ctypes.c_int64, Window, _p, _p, _p, _p, _p, _p],
    "gka_forward_varlen": [Shape, _p, Window, _p, _p, _p, _p],
    "gka_backward_varlen": [Shape, _p, Window, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_varlen_bf16": [Shape, _p, Window, _p, _p, _p, _p],
    "gka_backward_varlen_bf16": [Shape, _p, Window, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_chunk": [Shape, Chunk, Window, _p, _p, _p, _p, _p],
    "gka_backward_chunk": [Shape, Chunk, Window, _p, _p, _p, _p, _p, _p, _p, _p, _p],
}

# The CUDA entry points (gka.h), where a libgka has them: device pointers and
# a cudaStream_t last.
CUDA_SIGNATURES = {
    "gka_forward_cuda": [Shape, Window, _p, _p, _p, _p, _p],
    "gka_backward_cuda": [Shape, Window, _p, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_bf16_cuda": [Shape, Window, _p, _p, _p, _p, _p],
    "gka_backward_bf16_cuda": [Shape, Window, _p, _p, _p, _p, _p, _p, _p, _p],
    "gka_decode_cuda": [Shape, ctypes.c_int64, Window, _p, _p, _p, _p, _p, _p, _p],
    "gka_decode_bf16_cuda": [Shape, ctypes.c_int64, Window, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_chunk_cuda": [Shape, Chunk, Window, _p, _p, _p, _p, _p, _p],
    "gka_backward_chunk_cuda": [Shape, Chunk, Window, _p, _p, _p, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_varlen_cuda": [Shape, _p, Window, _p, _p, _p, _p, _p],
    "gka_backward_varlen_cuda": [Shape, _p, Window, _p, _p, _p, _p, _p, _p, _p, _p],
    "gka_forward_varlen_bf16_cuda": [Shape, _p, Window, _p, _p, _p, _p, _p],
    "gka_backward_varlen_bf16_cuda": [Shape, _p, Window, _p, _p, _p, _p, _p, _p, _p, _p],
}

# The library's queries and settings (gka.h): name -> (argument types, result type).
_char_p, _int = ctypes.c_char_p, ctypes.c_int
_CONTROL_SIGNATURES = {
    "gka_last_error": ([], _char_p),
    "gka_version": ([], _char_p),
    "gka_cpu_family": ([], _char_p),
    "gka_cpu_families": ([], _char_p),
    "gka_set_score_form": ([_char_p], _status),
    "gka_score_form": ([], _char_p),
    "gka_set_kernel": ([_char_p], _status),
    "gka_kernel": ([], _char_p),
    "gka_kernels": ([], _char_p),
    "gka_last_kernel": ([], _char_p),
    "gka_num_threads": ([], _int),
    "gka_set_num_threads": ([_int], _status),
    "gka_memory_usage": ([], Memory),
    "gka_reset_memory_peak": ([], None),
    "gka_cuda_compiled": ([], _int),
    "gka_cuda_families": ([], _char_p),
    "gka_cuda_available": ([], _int),
    "gka_kernel_variant": ([_char_p, _char_p, Shape, Window, ctypes.POINTER(_char_p)], _char_p),
    "gka_chunk_has_pairs": ([Shape, Chunk, Window], _int),
    "gka_draw_frequencies": ([ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64, _int, _p], _status),
}

# Where an installed gka_torch finds the installed libgka: CMake writes the
# path of the library relative to this package into this file at install time
# (python/CMakeLists.txt). It does not exist in the source tree.
_INSTALL_LOCATION_FILE = "_libgka_location"


def candidates():
    """The library paths or names to try, in order, each with where it came from
    (a generator: later ones are looked up only when the earlier ones fail)."""
    env = os.environ.get("GKA_LIBRARY")
    if env:
        yield env, "GKA_LIBRARY"
    here = os.path.dirname(os.path.abspath(__file__))
    location = os.path.join(here, _INSTALL_LOCATION_FILE)
    if os.path.exists(location):
        with open(location) as f:
            relative = f.read().strip()
        yield os.path.normpath(os.path.join(here, relative)), "the installation beside this package"
    name = ctypes.util.find_library("gka")
    if name:
        yield name, "ctypes.util.find_library('gka')"
    yield "libgka.so.0", "the dynamic loader's search path (LD_LIBRARY_PATH, ldconfig)"


def load():
    """Loads libgka: GKA_LIBRARY when set (and then nothing else), else the
    library installed beside this package, else the system's. Raises ImportError
    naming everything tried."""
    tried = []
    for path, origin in candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"  {path} ({origin}): {e}")
            if origin == "GKA_LIBRARY":
                break  # an explicit choice that fails is an error, never a silent fallback
            continue
        declare(lib)
        return lib, path
    raise ImportError("gka_torch could not load libgka. Tried:\n" + "\n".join(tried) +
                      "\nBuild it (make build) and set GKA_LIBRARY=/path/to/libgka.so, or install the project "
                      "(make install PREFIX=...) and import the gka_torch installed with it.")


def declare(lib):
    """Declares libgka's calls on a loaded library (load() does; a caller that
    loads a particular build's libgka itself, as the autotuner does, calls this)."""
    for name in RUN_CALLS:
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = [ctypes.POINTER(Call)], _status
    for name, argtypes in _HOST_SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, _status
    for name, (argtypes, restype) in _CONTROL_SIGNATURES.items():
        fn = getattr(lib, name)
        fn.argtypes, fn.restype = argtypes, restype
    for name, argtypes in CUDA_SIGNATURES.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.argtypes, fn.restype = argtypes, _status


def kernel_functions(lib):
    """The kernel functions' names (gka_kernels), the Gaussian first."""
    return tuple(lib.gka_kernels().decode().split(","))


def has_cuda(lib):
    """Whether the library has the CUDA kernels compiled in (gka_cuda_compiled)."""
    return bool(lib.gka_cuda_compiled())


def check(lib, status, call):
    """Raises the Python exception for a libgka status, with gka_last_error()."""
    if status == GKA_OK:
        return
    message = (lib.gka_last_error() or b"").decode(errors="replace")
    text = f"{call} failed ({STATUS_NAMES.get(status, f'status {status}')}): {message}"
    if status == 1:
        raise ValueError(text)
    if status == 2:
        raise NotImplementedError(text)
    if status == 3:
        raise MemoryError(text)
    raise RuntimeError(text)
