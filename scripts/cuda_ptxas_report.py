#!/usr/bin/env python3
"""Registers, spills and shared memory of every CUDA kernel, by ptxas.

Halide embeds the PTX of a CUDA pipeline in its STMT output (the buffer
cuda_gpu_source_kernels); the driver JIT-compiles it at run time. This script
extracts that PTX from each given .stmt file and runs `ptxas -v` on it for the
architecture the kernels target, so registers and spills can be reviewed on a
machine without a GPU. The JIT's register cap (libgka sets it, see
runtime/cuda_driver.cpp) is passed as --maxrregcount.

usage: cuda_ptxas_report.py [--arch sm_80] [--maxrregcount N] file.stmt...
"""
import argparse
import re
import subprocess
import sys
import tempfile


def extract_ptx(stmt_path):
    text = open(stmt_path, "rb").read().decode("latin1")
    start = text.index("buffer cuda_gpu_source_kernels = {") + len("buffer cuda_gpu_source_kernels = {")
    end = text.index("\nexternal_plus_metadata func", start)
    ptx = text[start:end].rstrip().rstrip("}").rstrip("\x00 \n")
    return ptx + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--arch", default="sm_80")
    ap.add_argument("--maxrregcount", type=int, default=0)
    ap.add_argument("--ptxas", default="/usr/local/cuda/bin/ptxas")
    ap.add_argument("stmt", nargs="+")
    args = ap.parse_args()
    print("| library | kernel | registers | spill stores | spill loads | shared bytes | stack bytes |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for path in args.stmt:
        with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
            f.write(extract_ptx(path))
            f.flush()
            cmd = [args.ptxas, "-arch=" + args.arch, "-v", f.name, "-o", "/dev/null"]
            if args.maxrregcount:
                cmd.insert(1, "--maxrregcount=%d" % args.maxrregcount)
            out = subprocess.run(cmd, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit("ptxas failed on %s:\n%s" % (path, out.stderr))
        kernel = None
        stats = {}
        lib = re.sub(r".*/|\.stmt$", "", path)
        for line in out.stderr.splitlines():
            m = re.search(r"Compiling entry function '(\w+)'", line)
            if m:
                kernel = m.group(1)
                stats = {}
            m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
            if m:
                stats["stack"], stats["st"], stats["ld"] = m.groups()
            m = re.search(r"Used (\d+) registers", line)
            if m and kernel:
                smem = re.search(r"(\d+) bytes smem", line)
                print("| %s | %s | %s | %s | %s | %s | %s |" % (lib, kernel, m.group(1), stats.get("st", "?"),
                      stats.get("ld", "?"), smem.group(1) if smem else 0, stats.get("stack", "?")))
                kernel = None


if __name__ == "__main__":
    main()
