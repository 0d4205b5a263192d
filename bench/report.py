#!/usr/bin/env python3
"""Runs the benchmark suite and writes a markdown report and PNG plots.

    report.py [--quick | --smoke] [--repetitions N] [--out DIR] [--bench PATH]

Every figure is the median of N repetitions; ratios are taken between
benchmarks of the same run (the machine is shared and noisy), whose repetitions
are interleaved in random order, so that the kernels and their yardsticks sample
the same moments of the machine rather than one slow stretch each.
"""
import argparse
import json
import os
import re
import subprocess
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# The kernels' runs: "gka/..." by sequence length, "dims/..." the head-dim sweep
# (the best family, one T).
NAME = re.compile(r"^(?P<suite>gka|dims)/(?P<family>\w+)/(?P<pass_>\w+)/(?P<window>\w+)/D=(?P<D>\d+)/T=(?P<T>\d+)")
# Random-feature GKA beside exact GKA ("M=exact") by T.
FEATURES = re.compile(r"^features/(?P<family>\w+)/(?P<pass_>\w+)/(?P<window>\w+)/D=(?P<D>\d+)/M=(?P<M>\w+)/T=(?P<T>\d+)$")
FAMILIES_TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "cmake", "families.tsv")


def cpu_families():
    """The CPU families of cmake/families.tsv, best first."""
    rows = [l.rstrip("\n").split("\t") for l in open(FAMILIES_TABLE) if l.strip() and not l.startswith("#")]
    return [r[0] for r in rows[1:] if r[3] == "cpu"]


def run_suite(args):
    os.makedirs(args.out, exist_ok=True)
    out_json = os.path.join(args.out, "bench.json")
    cmd = [args.bench, f"--benchmark_repetitions={args.repetitions}", "--benchmark_report_aggregates_only=true",
           "--benchmark_enable_random_interleaving=true", f"--benchmark_out={out_json}",
           "--benchmark_out_format=json"]
    if args.mode != "full":
        cmd.insert(1, f"--{args.mode}")
    print("report: running", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)
    return out_json


def load_medians(path):
    with open(path) as f:
        data = json.load(f)
    medians = {}
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].replace("/real_time", "")
        medians[name] = {"time_ms": b["real_time"], "gflops": b.get("GFLOP", 0.0),
                         "pairs": b.get("pairs", 0.0), "gbytes": b.get("GB", 0.0)}
    return data["context"], medians


def kernel_runs(medians, suite):
    """(family, pass, window, D, T, entry) of each run of the suite ("gka" or "dims")."""
    for name, m in medians.items():
        g = NAME.match(name)
        if g and g["suite"] == suite:
            yield g["family"], g["pass_"], g["window"], int(g["D"]), int(g["T"]), m


def gka_rows(medians):
    rows = defaultdict(dict)  # (family, pass, window, D) -> {T: entry}
    for family, pass_, window, D, T, m in kernel_runs(medians, "gka"):
        rows[(family, pass_, window, D)][T] = m
    return rows


def dims_rows(medians):
    """{(family, pass, window, T): {D: entry}} of the head-dim sweep."""
    rows = defaultdict(dict)
    for family, pass_, window, D, T, m in kernel_runs(medians, "dims"):
        rows[(family, pass_, window, T)][D] = m
    return rows


def write_head_dims(f, dims):
    """GFLOP/s by head dim, and each over D=64's rate in the same run where the sweep has it."""
    if not dims:
        return
    head_dims = sorted({D for r in dims.values() for D in r})
    f.write("\n## Head dims: GFLOP/s (over D=64's)\n\n| family | pass | window | T | "
            + " | ".join(f"D={D}" for D in head_dims) + " |\n" + "| --- " * (4 + len(head_dims)) + "|\n")
    for key in sorted(dims):
        row, base = dims[key], dims[key].get(64)
        cells = [(f"{row[D]['gflops']:.1f}" + (f" ({row[D]['gflops'] / base['gflops']:.2f})" if base else ""))
                 if D in row else "" for D in head_dims]
        f.write("| " + " | ".join(str(k) for k in key) + " | " + " | ".join(cells) + " |\n")


def feature_rows(medians):
    """{(family, pass, window, D): {M: {T: entry}}} of the features/ runs; M "exact" or a count."""
    rows = defaultdict(lambda: defaultdict(dict))
    for name, m in medians.items():
        g = FEATURES.match(name)
        if g:
            rows[(g["family"], g["pass_"], g["window"], int(g["D"]))][g["M"]][int(g["T"])] = m
    return rows


def feature_targets(features):
    """The random-feature issue's targets: linear in T (time(4T) / time(T) <= 4.4 from T = 4096 on) and, at
    T = 16384, M = 128, forward+backward >= 5x exact causal GKA's speed."""
    lines = []
    for (family, pass_, window, D), by_m in sorted(features.items()):
        if pass_ != "fwdbwd":
            continue
        for M, by_t in sorted(by_m.items()):
            for T in sorted(by_t):
                if M != "exact" and T >= 4096 and 4 * T in by_t:
                    r = by_t[4 * T]["time_ms"] / by_t[T]["time_ms"]
                    lines.append((f"features {family} fwdbwd M={M}: time(T={4 * T}) / time(T={T})", "<= 4.4",
                                  f"{r:.2f}", r <= 4.4))
        exact, m128 = by_m.get("exact", {}).get(16384), by_m.get("128", {}).get(16384)
        if exact and m128:
            r = exact["time_ms"] / m128["time_ms"]
            lines.append((f"features {family} fwdbwd T=16384 M=128: exact GKA's time / its time", ">= 5",
                          f"{r:.2f}", r >= 5))
    return lines


def write_features(f, features):
    """Random-feature GKA's times by T, each M beside exact GKA's, with exact's time over each M's."""
    if not features:
        return
    f.write("\n## Random-feature GKA: ms (exact GKA's time / this)\n")
    for key in sorted(features):
        by_m = features[key]
        seq_lens = sorted({T for r in by_m.values() for T in r})
        f.write(f"\n{' '.join(str(k) for k in key)}\n\n| M | " + " | ".join(f"T={T}" for T in seq_lens) + " |\n"
                + "| --- " * (1 + len(seq_lens)) + "|\n")
        for M in sorted(by_m, key=lambda m: (m != "exact", int(m) if m.isdigit() else 0)):
            cells = []
            for T in seq_lens:
                e, exact = by_m[M].get(T), by_m.get("exact", {}).get(T)
                ratio = f" ({exact['time_ms'] / e['time_ms']:.2f})" if e and exact and M != "exact" else ""
                cells.append(f"{e['time_ms']:.1f}{ratio}" if e else "")
            f.write(f"| {M} | " + " | ".join(cells) + " |\n")


def sgemm_yardstick(medians):
    for name, m in medians.items():
        if re.match(r"^sgemm/\d+\^3$", name):
            return name, m["gflops"]
    sys.exit("report: the sgemm yardstick is missing from the run")


def targets(medians, rows, sgemm):
    """The issue's targets (AVX-512 family) and the denormal guard, each with its measured value."""
    lines = []

    def g(family, p, w, D, T):
        return rows.get((family, p, w, D), {}).get(T)

    best = next((f for f in cpu_families() if any(k[0] == f for k in rows)), None)
    for D in (64, 128):
        for p, goal in (("fwd", 0.85), ("bwd", 0.60)):
            e = g(best, p, "causal", D, 4096)
            if e:
                r = e["gflops"] / sgemm
                lines.append((f"{p} causal T=4096 H=8 D={D}: GFLOP/s / sgemm", f">= {goal}", f"{e['gflops']:.1f} / {sgemm:.1f} = {r:.2f}", r >= goal))
    for D in (64, 128):
        a, b = g(best, "fwd", "w255", D, 4096), g(best, "fwd", "w255", D, 16384)
        if a and b:
            r = b["time_ms"] / a["time_ms"]
            lines.append((f"fwd (255,0) D={D}: time(T=16384) / time(T=4096)", "<= 4.4", f"{r:.2f}", r <= 4.4))
        c = g(best, "fwd", "causal", D, 16384) or g(best, "fwd", "causal", D, 4096)
        w = g(best, "fwd", "w255", D, 16384) or g(best, "fwd", "w255", D, 4096)
        if c and w:
            r = w["pairs"] / c["pairs"]
            lines.append((f"fwd (255,0) D={D}: pairs/s / causal pairs/s", ">= 0.7", f"{r:.2f}", r >= 0.7))
    for D in (64, 128):
        for p in ("fwd", "bwd"):
            smooth, sharp = g(best, p, "causal", D, 4096), g(best, p, "causal_sharp", D, 4096)
            if smooth and sharp:
                r = sharp["gflops"] / smooth["gflops"]
                lines.append((f"{p} causal T=4096 D={D}: sharp inputs' GFLOP/s / smooth inputs'", ">= 0.9",
                              f"{r:.2f}", r >= 0.9))
    for D in (64, 128):
        u = medians.get(f"unfused_blas/fwd/causal/D={D}/T=4096")
        e = g(best, "fwd", "causal", D, 4096)
        if u and e:
            r = u["time_ms"] / e["time_ms"]
            lines.append((f"fwd causal T=4096 D={D}: speed-up over unfused BLAS", ">= 3", f"{r:.2f}", r >= 3))
    read = medians.get("memory/read")
    step = medians.get(f"decode/{best}/causal/D=64/T=32768")
    if read and step:
        r = step["gbytes"] / read["gbytes"]
        lines.append(("decode causal T=32768: cache GB/s / memory/read GB/s", ">= 0.6",
                      f"{step['gbytes']:.1f} / {read['gbytes']:.1f} = {r:.2f}", r >= 0.6))
    short, long_ = medians.get(f"decode/{best}/w255/D=64/T=1024"), medians.get(f"decode/{best}/w255/D=64/T=65536")
    if short and long_:
        r = long_["time_ms"] / short["time_ms"]
        lines.append(("decode (255,0): time(T=65536) / time(T=1024)", "<= 1.1", f"{r:.2f}", r <= 1.1))
    for p in ("fwd", "bwd"):
        packed, alone = (medians.get(f"varlen/{best}/{p}/causal/D=64/{how}") for how in ("varlen", "separate"))
        if packed and alone:
            r = packed["time_ms"] / alone["time_ms"]
            lines.append((f"varlen {p}, mixed documents: time / their separate calls' time", "<= 1.1", f"{r:.2f}",
                          r <= 1.1))
    return best, lines


def write_markdown(path, context, medians, rows, sgemm_name, sgemm, best, target_lines):
    with open(path, "w") as f:
        f.write("# GKA benchmark report\n\n")
        f.write(f"Host: {context.get('host_name', '?')}, {context.get('num_cpus', '?')} CPUs at "
                f"{context.get('mhz_per_cpu', '?')} MHz; B=1, H=8; medians of the run's repetitions, "
                "interleaved at random.\n")
        f.write(f"Yardstick: {sgemm_name} (OpenBLAS) = {sgemm:.1f} GFLOP/s in the same run.\n\n")
        f.write("## Targets (best family: %s)\n\n| target | goal | measured | met |\n| --- | --- | --- | --- |\n" % best)
        for name, goal, value, met in target_lines:
            f.write(f"| {name} | {goal} | {value} | {'yes' if met else 'NO'} |\n")
        seq_lens = sorted({T for r in rows.values() for T in r})
        f.write("\n## GKA kernels: GFLOP/s (ratio to sgemm)\n\n")
        f.write("| family | pass | window | D | " + " | ".join(f"T={T}" for T in seq_lens) + " |\n")
        f.write("| --- " * (4 + len(seq_lens)) + "|\n")
        for key in sorted(rows):
            cells = []
            for T in seq_lens:
                e = rows[key].get(T)
                cells.append(f"{e['gflops']:.1f} ({e['gflops'] / sgemm:.2f})" if e else "")
            f.write("| " + " | ".join(str(k) for k in key) + " | " + " | ".join(cells) + " |\n")
        bf16 = sorted(k for k in rows if k[1].endswith("_bf16"))
        if bf16:
            f.write("\n## bfloat16 against float32 (same run)\n\n| family | pass | window | D | T | bf16 GFLOP/s | "
                    "float32 GFLOP/s | bf16 / float32 |\n" + "| --- " * 8 + "|\n")
            for key in bf16:
                for T, e in sorted(rows[key].items()):
                    ref = rows.get((key[0], key[1][:-len("_bf16")]) + key[2:], {}).get(T)
                    if not ref:
                        sys.exit(f"report: {key} T={T} has no float32 run to compare with")
                    f.write(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {T} | {e['gflops']:.1f} | "
                            f"{ref['gflops']:.1f} | {e['gflops'] / ref['gflops']:.2f} |\n")
        write_head_dims(f, dims_rows(medians))
        write_features(f, feature_rows(medians))
        f.write("\n## Yardsticks\n\n| benchmark | time (ms) | GFLOP/s |\n| --- | --- | --- |\n")
        for name in sorted(medians):
            if not name.startswith(("gka/", "dims/", "features/")):
                f.write(f"| {name} | {medians[name]['time_ms']:.3f} | {medians[name]['gflops']:.1f} |\n")
        families = sorted({k[0] for k in rows})
        if len(families) > 1:
            f.write("\n## Families relative to the best\n\n| family | pass | window | D | T | GFLOP/s | / best | / sgemm |\n")
            f.write("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
            for key in sorted(rows):
                for T, e in sorted(rows[key].items()):
                    ref = rows.get((best,) + key[1:], {}).get(T)
                    if ref:
                        f.write(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {T} | {e['gflops']:.1f} | "
                                f"{e['gflops'] / ref['gflops']:.2f} | {e['gflops'] / sgemm:.2f} |\n")


LINE_STYLES = ["-", "--", ":", "-."]  # the families' lines, best first


def plot(out, rows, sgemm):
    kinds = sorted({(k[1], k[2]) for k in rows})  # (pass, window): one color each
    colors = {kind: f"C{n % 10}" for n, kind in enumerate(kinds)}
    for D in sorted({k[3] for k in rows}):
        fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
        for key in sorted(rows):
            if key[3] != D:
                continue
            Ts = sorted(rows[key])
            gf = [rows[key][T]["gflops"] for T in Ts]
            label = f"{key[0]} {key[1]} {key[2]}"
            rank = cpu_families().index(key[0]) if key[0] in cpu_families() else 0
            style = dict(marker="o", color=colors[(key[1], key[2])], linestyle=LINE_STYLES[rank % len(LINE_STYLES)])
            axes[0].plot(Ts, gf, label=label, **style)
            axes[1].plot(Ts, [x / sgemm for x in gf], label=label, **style)
        axes[0].axhline(sgemm, color="black", linestyle="--", label="sgemm 2048^3")
        axes[1].axhline(1.0, color="black", linestyle="--")
        for ax, ylabel in zip(axes, ("GFLOP/s (docs/spec.md accounting)", "ratio to sgemm")):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("T")
            ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
        axes[0].legend(fontsize=6, ncol=2)
        fig.suptitle(f"GKA kernels, B=1 H=8 D={D}")
        fig.tight_layout()
        fig.savefig(os.path.join(out, f"gflops_D{D}.png"), dpi=110)
        plt.close(fig)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick")
    mode.add_argument("--smoke", dest="mode", action="store_const", const="smoke")
    ap.set_defaults(mode="full")
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--out", default="build/report")
    ap.add_argument("--bench", default="build/bench/gka_bench")
    ap.add_argument("--json", help="report on an existing JSON instead of running the suite")
    args = ap.parse_args()

    path = args.json or run_suite(args)
    context, medians = load_medians(path)
    rows = gka_rows(medians)
    sgemm_name, sgemm = sgemm_yardstick(medians)
    best, target_lines = targets(medians, rows, sgemm)
    target_lines += feature_targets(feature_rows(medians))
    md = os.path.join(args.out, "report.md")
    os.makedirs(args.out, exist_ok=True)
    write_markdown(md, context, medians, rows, sgemm_name, sgemm, best, target_lines)
    plot(args.out, rows, sgemm)
    print(f"report: wrote {md} and {args.out}/gflops_D*.png")


if __name__ == "__main__":
    main()
