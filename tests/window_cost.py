"""A sliding window's cost is linear in T: the instructions one call executes,
counted by callgrind (not timed), per allowed (query, key) pair, stay the same
when T grows 4x at a fixed window (255, 0); a kernel that computed the masked
pairs and discarded them would cost about 3x more per pair. Counted on the
families valgrind runs (AVX2 and SSE4.1; it has no AVX-512), in each score
form ("auto" runs the forward's expansion about the origin, "centred" the
centred one), one thread, where the build compiled the family (a quick build
holds the host's best family and the fallback alone). Exit 77 (CTest: Skipped)
where valgrind is missing or the build has none of the families.

usage: window_cost.py path/to/gka_one_call path/to/libgka.so
"""
import ctypes
import os
import re
import shutil
import subprocess
import sys

WINDOW = (255, 0)
HEAD_DIM = 64
SEQ_LENS = (512, 2048)
# valgrind 3.19 lacks the register form of vmovq (VEX 66 0F D6) that LLVM emits
# in the AVX2 direct backward (SIGILL there): the direct form is counted on SSE4.1.
CASES = [("avx2", "auto"), ("generic", "auto"), ("generic", "centred"), ("generic", "direct")]
MOST_GROWTH = 1.25  # per-pair cost at 4x T over that at T; quadratic work gives about 3.2


def pairs(t):
    w = WINDOW[0] + 1
    return t * w - w * (w - 1) // 2  # every row has w keys but the first w - 1


def instructions(one_call, family, form, kernel, t):
    env = dict(os.environ, GKA_CPU_TARGET=family, GKA_NUM_THREADS="1")
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", f"--toggle-collect=gka_run_{kernel}",
         one_call, kernel, form, str(t), str(WINDOW[0]), str(WINDOW[1]), str(HEAD_DIM)],
        env=env, capture_output=True, text=True, check=True)
    collected = re.search(r"Collected : (\d+)", run.stderr)
    if not collected:
        sys.exit(f"no instruction count in callgrind's output:\n{run.stderr}")
    return int(collected.group(1)), run.stdout.strip()


def compiled_families(libgka):
    lib = ctypes.CDLL(libgka)
    lib.gka_cpu_families.restype = ctypes.c_char_p
    return lib.gka_cpu_families().decode().split(",")


def main():
    if shutil.which("valgrind") is None:
        print("SKIP: valgrind is not installed (Debian's valgrind counts the instructions)")
        return 77
    compiled = compiled_families(sys.argv[2])
    cases = [(family, form) for family, form in CASES if family in compiled]
    for family in sorted({family for family, _ in CASES} - set(compiled)):
        print(f"SKIP family {family}: not compiled in this build (FAMILIES=all compiles every family)")
    if not cases:
        return 77
    failures = 0
    for family, form in cases:
        # The backward has no form about the origin: its "centred" is its "auto".
        for kernel in ("forward",) if form == "centred" else ("forward", "backward"):
            per_pair = []
            for t in SEQ_LENS:
                count, variant = instructions(sys.argv[1], family, form, kernel, t)
                per_pair.append(count / pairs(t))
                print(f"{variant}: T={t} window {WINDOW}: {count} instructions, {per_pair[-1]:.1f} per pair")
            growth = per_pair[1] / per_pair[0]
            ok = growth <= MOST_GROWTH
            failures += not ok
            print(f"  per-pair cost grew {growth:.3f}x over 4x T ({'ok' if ok else f'FAIL: over {MOST_GROWTH}'})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
