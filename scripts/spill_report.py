#!/usr/bin/env python3
"""Vector register spills in the kernels' innermost loops, from the assembly
Halide writes beside each kernel (LLVM marks every spill and reload with a
comment, "16-byte Spill" / "Folded Reload", and every innermost loop's header
with "This Inner Loop Header"). A spill there costs a store or load on every
iteration of the hottest code; those outside (set-up, per-band code) do not
matter. Prints a markdown row per file; with --fail-over N, exits 1 if any
file has more than N in its innermost loops.

usage: spill_report.py [--fail-over N] kernel.s...
"""
import argparse
import re
import sys

LABEL = re.compile(r"^(\.?L?BB\d+_\d+|[A-Za-z_][\w.$]*):")
SPILL = re.compile(r"(\d+)-byte (Folded )?(Spill|Reload)")
HEADER = re.compile(r"in Loop: Header=(BB\d+_\d+)")


def inner_loop_spills(lines):
    """(spills and reloads in innermost loops, in all) of one assembly file."""
    inner_headers, block_of_line, header_of_block = set(), [], {}
    block = None
    for line in lines:
        m = LABEL.match(line)
        if m:
            block = m.group(1).lstrip(".L")
            if "This Inner Loop Header" in line:
                inner_headers.add(block)
                header_of_block[block] = block
        elif block and "This Inner Loop Header" in line:
            inner_headers.add(block)
            header_of_block[block] = block
        h = HEADER.search(line)
        if h and block and block not in header_of_block:
            header_of_block[block] = h.group(1)
        block_of_line.append(block)
    inner = total = 0
    for line, block in zip(lines, block_of_line):
        m = SPILL.search(line)
        if m and int(m.group(1)) >= 16:  # vector registers
            total += 1
            inner += header_of_block.get(block) in inner_headers
    return inner, total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fail-over", type=int, default=None)
    ap.add_argument("asm", nargs="+")
    args = ap.parse_args()
    print("| kernel | vector spills+reloads in innermost loops | in all |")
    print("| --- | --- | --- |")
    worst = 0
    for path in args.asm:
        inner, total = inner_loop_spills(open(path, errors="replace").read().splitlines())
        worst = max(worst, inner)
        print(f"| {path.rsplit('/', 1)[-1]} | {inner} | {total} |")
    if args.fail_over is not None and worst > args.fail_over:
        print(f"spill_report: {worst} vector spills and reloads in an innermost loop, over {args.fail_over}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
