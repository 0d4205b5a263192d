#!/usr/bin/env python3
"""Tuned knobs vs the schedule's defaults vs Halide's autoschedulers, per shape class.

    compare.py [--family avx512] [--heads 8] [--kernels forward,backward] [--head-dims 64,128]
               [--autoschedulers-on long] [--out build/autotune-report]

For each standard shape class (the kernels and head dims asked for, the classes of
gka_autotune.CLASSES), on the class's tuning shape, it builds the kernel with the
knobs the build's libgka runs there (its answer: schedules/tuned.tsv's narrowest
class containing the shape, or the defaults) and, for the classes named by --autoschedulers-on, with each CPU
autoscheduler shipped in the Halide wheel (Adams2019, Mullapudi2016, Li2018) on the
same algorithm (the generators' estimates); it checks each against the double
reference and times each interleaved with the default kernel (autotune/harness.cpp).
Writes report.md and compare.png, and the search curves (best so far vs trials) of
the logs in autotune/logs/.
"""
import argparse
import glob
import json
import os
import statistics
import sys
import tempfile
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gka_autotune as tune  # noqa: E402

AUTOSCHEDULERS = ["Adams2019", "Mullapudi2016", "Li2018"]
PLUGINS = {"Adams2019": "adams2019", "Mullapudi2016": "mullapudi2016", "Li2018": "li2018"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default=tune.host_best_family())
    ap.add_argument("--heads", type=int, default=tune.HEADS)
    ap.add_argument("--kernels", default="forward,backward", help="kernels (comma-separated) to compare")
    ap.add_argument("--head-dims", help="head dims (comma-separated) to compare (default: those the build "
                    "compiles with constant loops)")
    ap.add_argument("--autoschedulers-on", default="long", help="classes (comma-separated) to run them on")
    ap.add_argument("--build", default=os.path.join(tune.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(tune.ROOT, "build", "autotune-report"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import halide
    plugin_dir = os.path.join(halide.install_dir(), "lib64")

    head_dims = [int(d) for d in args.head_dims.split(",")] if args.head_dims else tune.tuned_head_dims(args.build)
    results = {}  # (kernel, D, class) -> {variant: entry}
    for kernel in args.kernels.split(","):
        for head_dim in head_dims:
            for class_name, cls in tune.CLASSES.items():
                shape = argparse.Namespace(**vars(args), kernel=kernel, head_dim=head_dim, window=cls["window"],
                                           seq_len=cls["seq_len"], target=None)
                row = results.setdefault((kernel, head_dim, class_name), {})
                knobs = tune.knobs_that_run(args.build, args.family, kernel, head_dim, cls["window"], cls["seq_len"])
                variants = [("tuned", knobs, ())]
                if class_name in args.autoschedulers_on.split(","):
                    variants += [(a, "", ("-p", os.path.join(plugin_dir, f"libautoschedule_{PLUGINS[a]}.so"),
                                          f"autoscheduler={a}")) for a in AUTOSCHEDULERS]
                with tempfile.TemporaryDirectory(prefix="gka-compare-") as work:
                    trials = tune.Trials(shape, work)
                    for name, knob_spec, extra in variants:
                        start = time.time()
                        entry = trials.measure(tune.parse_knobs(knob_spec), extra=extra,
                                               check_shape=(shape.seq_len, args.heads))
                        entry["seconds"] = time.time() - start
                        row[name] = entry
                        shown = (f"{entry['speedup']:.3f}x the default" if entry["status"] == "ok"
                                 else f"{entry['status']}: {entry.get('error', '')}")
                        print(f"compare: {kernel} D={head_dim} {class_name} {name}: {shown} "
                              f"({entry['seconds']:.0f} s)", flush=True)
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump({" ".join(map(str, key)): row for key, row in results.items()}, f, indent=1)
    write_report(args, results)


def gflops(kernel, head_dim, class_name, args, ms):
    cls = tune.CLASSES[class_name]
    (left, right), T = tune.WINDOWS[cls["window"]], cls["seq_len"]
    pairs = sum(i - (0 if left < 0 else max(0, i - left)) + 1 for i in range(T)) * args.heads if right == 0 else None
    if pairs is None:
        return float("nan")
    return (4 if kernel == "forward" else 10) * head_dim * pairs / (ms * 1e-3) * 1e-9


def write_report(args, results):
    md = os.path.join(args.out, "report.md")
    with open(md, "w") as f:
        f.write(f"# Tuned vs default vs Halide's autoschedulers ({args.family})\n\n")
        f.write(f"B=1, H={args.heads}, each class on its tuning shape (gka_autotune.CLASSES); each variant timed "
                "interleaved with the default-knob kernel (the median ratio of at least 5 pairs of runs, a "
                "second of them), after a check against the double reference on that same shape "
                "(autoscheduled pipelines fail on shapes smaller than their tiles). "
                f"Autoschedulers on the classes {args.autoschedulers_on}. "
                "Anderson2021 is a GPU autoscheduler and has no CPU counterpart to run here.\n\n")
        f.write("| kernel | D | class (shape) | variant | GFLOP/s | vs default | tuned vs it |\n"
                "| --- | --- | --- | --- | --- | --- | --- |\n")
        for (kernel, D, class_name), row in results.items():
            cls = tune.CLASSES[class_name]
            where = f"| {kernel} | {D} | {class_name} (T={cls['seq_len']} {cls['window']}) |"
            default_ms = row["tuned"].get("default_ms")
            if default_ms:
                f.write(f"{where} default | {gflops(kernel, D, class_name, args, default_ms):.1f} | 1.00 | "
                        f"{row['tuned'].get('speedup', float('nan')):.2f} |\n")
            for name, e in row.items():
                if e["status"] != "ok":
                    f.write(f"{where} {name} | {e['status']}: {e.get('error', '')[:120]} | | |\n")
                    continue
                tuned_ms = row["tuned"].get("ms", float("nan"))
                f.write(f"{where} {name} | {gflops(kernel, D, class_name, args, e['ms']):.1f} | "
                        f"{e['speedup']:.2f} | {e['ms'] / tuned_ms:.2f} |\n")
        speedups = sorted(row["tuned"]["speedup"] for row in results.values() if row["tuned"]["status"] == "ok")
        if speedups:
            f.write(f"\nTuned vs default over the {len(speedups)} classes: median "
                    f"{statistics.median(speedups):.2f}, min {speedups[0]:.2f}, max {speedups[-1]:.2f}.\n")
        logs = sorted(glob.glob(os.path.join(tune.ROOT, "autotune", "logs", "*.jsonl")))
        if logs:
            f.write("\n![search curves](search.png)\n")
    fig, ax = plt.subplots(figsize=(9, 4))
    labels, values = [], []
    for (kernel, D, class_name), row in results.items():
        for name, e in row.items():
            if e["status"] == "ok":
                labels.append(f"{kernel[:3]} D={D} {class_name}\n{name}")
                values.append(e["speedup"])
    ax.bar(range(len(values)), values)
    ax.set_xticks(range(len(values)), labels, fontsize=6, rotation=60)
    ax.axhline(1.0, color="black", linestyle="--")
    ax.set_ylabel("speed vs default knobs")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "compare.png"), dpi=110)
    plt.close(fig)
    plot_search_curves(args.out, args.build)
    print(f"compare: wrote {md}")


def plot_search_curves(out, build):
    """Best speed-up so far vs trials, one panel per family, one line per log."""
    # The tuner's logs by family: <family>-<kernel>-d<head dim>-<class>.jsonl.
    logs = {}
    for log in sorted(glob.glob(os.path.join(tune.ROOT, "autotune", "logs", "*.jsonl"))):
        parts = os.path.basename(log)[:-len(".jsonl")].split("-")
        if len(parts) == 4 and parts[1] in tune.KERNELS and parts[3] in tune.CLASSES:
            logs.setdefault(parts[0], []).append((log, parts[1], tune.CLASSES[parts[3]], "-".join(parts[1:])))
    if not logs:
        return
    fig, axes = plt.subplots(len(logs), 1, figsize=(9, 3.2 * len(logs)), squeeze=False)
    tab20 = plt.get_cmap("tab20").colors  # pairs of shades: the dark ones first
    colors = tab20[0::2] + tab20[1::2]  # twelve classes a family: no colour twice
    for ax, family in zip(axes[:, 0], sorted(logs)):
        lines = 0
        for log, kernel, cls, label in logs[family]:
            # The fingerprint of make autotune's runs: the class's shape, the default heads.
            fingerprint = tune.schedule_fingerprint(build, (cls["window"], cls["seq_len"], tune.HEADS))
            best, curve = 0.0, []
            for e in tune.current_entries(log, kernel, fingerprint):  # as the tuner resumes
                if e.get("status") == "ok":
                    best = max(best, e["speedup"])
                curve.append(best)
            if curve:
                ax.plot(range(1, len(curve) + 1), curve, marker=".", markersize=3, color=colors[lines % len(colors)],
                        label=label)
                lines += 1
        ax.set_title(family, fontsize=9)
        ax.set_xlabel("trial")
        ax.set_ylabel("best speed-up so far")
        ax.grid(True, alpha=0.3)
        if lines:
            ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        else:
            ax.text(0.5, 0.5, "no trials of the current code in autotune/logs/", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "search.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
