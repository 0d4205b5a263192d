"""The memory a forward and a backward take beyond the caller's tensors, in
tensors of x's size: resident (the process's peak resident size less its size
before the call, every output page touched first) and, where the library
counts it (gka_memory_usage), its allocator's peak. Through the float32 calls
that every libgka has, with ctypes, so that it measures older builds too; one
process per library, as a call's peak is the process's.

    python bench/working_memory.py LIBGKA T H D LEFT     (B=1, window (LEFT, 0), -1: causal)
"""
import ctypes
import importlib.util
import os
import sys
import time

import numpy as np

# gka.h's structs as gka_torch declares them: its _lib.py imports the standard
# library alone, so it loads here without the package (and torch).
_spec = importlib.util.spec_from_file_location(
    "gka_lib", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python", "gka_torch", "_lib.py"))
_lib = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_lib)
Shape, Window, Memory = _lib.Shape, _lib.Window, _lib.Memory


def kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])


def main():
    lib = ctypes.CDLL(sys.argv[1])
    seq_len, heads, head_dim, left = (int(a) for a in sys.argv[2:6])
    counted = hasattr(lib, "gka_memory_usage")
    if counted:
        lib.gka_memory_usage.restype = Memory
    n = seq_len * heads * head_dim
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
    sigma = np.full(heads, np.sqrt(head_dim) * 0.75, dtype=np.float32)
    # np.ones, not zeros: calloc'ed pages would count when the call first writes them.
    y, dx, dsigma = np.ones(n, np.float32), np.ones(n, np.float32), np.ones(heads, np.float32)
    lse = np.ones(seq_len * heads, np.float32)
    p = lambda a: a.ctypes.data_as(ctypes.c_void_p)
    shape, window = Shape(1, seq_len, heads, head_dim), Window(left, 0)
    passes = (("forward", lambda: lib.gka_forward(shape, window, p(x), p(sigma), p(y), p(lse))),
              ("backward", lambda: lib.gka_backward(shape, window, p(x), p(sigma), p(y), p(lse), p(dy), p(dx),
                                                    p(dsigma))))
    tensor = n * 4
    report = []
    for name, call in passes:
        before = kib("VmRSS")
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # the peak resident size restarts from the current one
        if counted:
            lib.gka_reset_memory_peak()
        start = time.time()
        status = call()
        took = time.time() - start
        if status != 0:
            sys.exit(f"{name}: status {status}")
        resident = (kib("VmHWM") - before) * 1024 / tensor
        count = f"{lib.gka_memory_usage().peak / tensor:.2f}" if counted else "-"
        report.append(f"{name} {took:.1f} s, resident {resident:.2f}, counted {count}")
    print(f"T={seq_len} H={heads} D={head_dim} window ({left}, 0), {sys.argv[1]}: " + "; ".join(report))


if __name__ == "__main__":
    main()
