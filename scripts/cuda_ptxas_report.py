#!/usr/bin/env python3
"""Registers, spills, shared memory and SASS mix of every CUDA kernel, by ptxas.

Halide embeds the PTX of a CUDA pipeline in its STMT output (the buffer
cuda_gpu_source_kernels); the driver JIT-compiles it at run time. This script
extracts that PTX from each given .stmt file and runs `ptxas -v` on it for the
architecture the kernels target, so that registers and spills can be reviewed,
and guarded, on a machine without a GPU. The JIT's register cap (libgka sets
it, see runtime/cuda_driver.cpp) is passed as --maxrregcount.

With --sass, each library's cubin is disassembled (nvdisasm, from PyPI's
nvidia-cuda-nvdisasm) and each kernel that loads from shared memory (the pair
loops': the others stage nothing) is reported with its FFMA and shared-memory
load (LDS) counts: how many multiply-adds each load feeds, the register
tiles' aim.

Guards (exit status 1, naming what failed): --no-spills (no kernel may spill
or keep a stack frame), --min-ffma-per-lds R (every pair-loop kernel of every
library given at R or more) and --max-ffma-per-lds R (each library's lowest
pair loop below R: a schedule that lost what raised its ratio is told apart).

usage: cuda_ptxas_report.py [--arch sm_86] [--maxrregcount N] [--sass] [guards] file.stmt...
"""
import argparse
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile


def extract_ptx(stmt_path):
    text = open(stmt_path, "rb").read().decode("latin1")
    start = text.index("buffer cuda_gpu_source_kernels = {") + len("buffer cuda_gpu_source_kernels = {")
    end = text.index("\nexternal_plus_metadata func", start)
    ptx = text[start:end].rstrip().rstrip("}").rstrip("\x00 \n")
    return ptx + "\n"


def find_nvdisasm():
    """nvdisasm on the PATH, the CUDA toolkit's, or PyPI's nvidia-cuda-nvdisasm beside this Python."""
    found = shutil.which("nvdisasm") or (os.path.exists("/usr/local/cuda/bin/nvdisasm") and "/usr/local/cuda/bin/nvdisasm")
    if found:
        return found
    for site in sys.path:
        for path in sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", "nvdisasm"))):
            return path
    return None


def ptxas(args, ptx_path, cubin_path):
    cmd = [args.ptxas, "-arch=" + args.arch, "-v", ptx_path, "-o", cubin_path]
    if args.maxrregcount:
        cmd.insert(1, "--maxrregcount=%d" % args.maxrregcount)
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit("ptxas failed on %s:\n%s" % (ptx_path, out.stderr))
    kernels, kernel, stats = [], None, {}
    for line in out.stderr.splitlines():
        m = re.search(r"Compiling entry function '(\w+)'", line)
        if m:
            kernel, stats = m.group(1), {}
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            stats["stack"], stats["st"], stats["ld"] = (int(g) for g in m.groups())
        m = re.search(r"Used (\d+) registers", line)
        if m and kernel:
            smem = re.search(r"(\d+) bytes smem", line)
            kernels.append(dict(stats, kernel=kernel, registers=int(m.group(1)), smem=int(smem.group(1)) if smem else 0))
            kernel = None
    return kernels


def sass_mix(nvdisasm, cubin_path):
    """{kernel: [FFMA count, LDS count]} of a cubin's SASS."""
    sass = subprocess.run([nvdisasm, "-c", cubin_path], capture_output=True, text=True, check=True).stdout
    mix, kernel = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*\.text\.(\w+):", line)
        if m:
            kernel = m.group(1)
            mix[kernel] = [0, 0]
        elif kernel and re.search(r"\bFFMA\b", line):
            mix[kernel][0] += 1
        elif kernel and re.search(r"\bLDS\b", line):
            mix[kernel][1] += 1
    return mix


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--maxrregcount", type=int, default=0)
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("--sass", action="store_true", help="report the pair loop's FFMA per shared-memory load")
    ap.add_argument("--no-spills", action="store_true")
    ap.add_argument("--min-ffma-per-lds", type=float)
    ap.add_argument("--max-ffma-per-lds", type=float)
    ap.add_argument("stmt", nargs="+")
    args = ap.parse_args()
    sass = args.sass or args.min_ffma_per_lds is not None or args.max_ffma_per_lds is not None
    nvdisasm = find_nvdisasm() if sass else None
    if sass and not nvdisasm:
        sys.exit("cuda_ptxas_report: nvdisasm not found (pip install nvidia-cuda-nvdisasm)")
    failures = []
    print("| library | kernel | registers | spill stores | spill loads | shared bytes | stack bytes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    mixes = []
    for path in args.stmt:
        lib = re.sub(r".*/|\.stmt$", "", path)
        with tempfile.TemporaryDirectory() as tmp:
            ptx, cubin = os.path.join(tmp, lib + ".ptx"), os.path.join(tmp, lib + ".cubin")
            open(ptx, "w").write(extract_ptx(path))
            for k in ptxas(args, ptx, cubin):
                print("| %s | %s | %d | %s | %s | %d | %s |" % (lib, k["kernel"], k["registers"], k.get("st", "?"),
                      k.get("ld", "?"), k["smem"], k.get("stack", "?")))
                if args.no_spills and (k.get("st") or k.get("ld") or k.get("stack")):
                    failures.append("%s %s spills (%s bytes stored, %s loaded, %s of stack)" %
                                    (lib, k["kernel"], k.get("st"), k.get("ld"), k.get("stack")))
            if sass:
                mixes += [(lib, kernel, ffma, lds) for kernel, (ffma, lds) in sass_mix(nvdisasm, cubin).items() if lds]
    if mixes:
        print("\n| library | pair-loop kernel | FFMA | LDS | FFMA per LDS |")
        print("| --- | --- | --- | --- | --- |")
    for lib, kernel, ffma, lds in mixes:
        ratio = ffma / lds if lds else float("inf")
        print("| %s | %s | %d | %d | %.2f |" % (lib, kernel, ffma, lds, ratio))
        if args.min_ffma_per_lds is not None and ratio < args.min_ffma_per_lds:
            failures.append("%s: %.2f FFMA per LDS, below %g" % (lib, ratio, args.min_ffma_per_lds))
    if args.max_ffma_per_lds is not None:
        for lib in sorted({m[0] for m in mixes}):
            lowest = min(ffma / lds for name, _, ffma, lds in mixes if name == lib)
            if lowest >= args.max_ffma_per_lds:
                failures.append("%s: every pair loop at %.2f FFMA per LDS or more, none below %g" %
                                (lib, lowest, args.max_ffma_per_lds))
    for f in failures:
        print("FAILED: " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
