#!/usr/bin/env python3
"""Tuned knobs vs the schedule's defaults vs Halide's autoschedulers, per shape class.

    compare.py [--family avx512] [--seq-len 2048] [--heads 8] [--out build/autotune-report]

For each shape class (forward and backward, D = 64 and 128) it builds the kernel
with the knobs of schedules/tuned.tsv (or the defaults where the table has no
row) and with each CPU autoscheduler shipped in the Halide wheel (Adams2019,
Mullapudi2016, Li2018) on the same algorithm (the generators' estimates), checks
each against the double reference, and times each interleaved with the default
kernel (autotune/harness.cpp). Writes report.md and compare.png, and the search
curves (best so far vs trials) of the logs in autotune/logs/.
"""
import argparse
import glob
import json
import os
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


def tuned_knobs(family, kernel, head_dim):
    if not os.path.exists(tune.TABLE):
        return ""
    for line in open(tune.TABLE):
        f = line.rstrip("\n").split("\t")
        if not line.startswith("#") and len(f) >= 4 and f[:3] == [family, "gka_" + kernel, str(head_dim)]:
            return f[3]
    return ""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", default=tune.host_best_family())
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--window", default="causal", choices=sorted(tune.WINDOWS))
    ap.add_argument("--build", default=os.path.join(tune.ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(tune.ROOT, "build", "autotune-report"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import halide
    plugin_dir = os.path.join(halide.install_dir(), "lib64")

    results = {}  # (kernel, D) -> {variant: entry}
    for kernel in ("forward", "backward"):
        for head_dim in (64, 128):
            cls = argparse.Namespace(**vars(args), kernel=kernel, head_dim=head_dim)
            row = results.setdefault((kernel, head_dim), {})
            with tempfile.TemporaryDirectory(prefix="gka-compare-") as work:
                trials = tune.Trials(cls, work)
                knobs = tuned_knobs(args.family, kernel, head_dim)
                variants = [("tuned", knobs, ())] + [
                    (a, "", ("-p", os.path.join(plugin_dir, f"libautoschedule_{PLUGINS[a]}.so"), f"autoscheduler={a}"))
                    for a in AUTOSCHEDULERS]
                for name, knob_spec, extra in variants:
                    start = time.time()
                    parsed = dict(item.split(":") for item in knob_spec.split(",")) if knob_spec else {}
                    entry = trials.measure({k: int(v) for k, v in parsed.items()}, extra=extra,
                                           check_shape=(args.seq_len, args.heads))
                    entry["seconds"] = time.time() - start
                    row[name] = entry
                    shown = (f"{entry['speedup']:.3f}x the default" if entry["status"] == "ok"
                             else f"{entry['status']}: {entry.get('error', '')}")
                    print(f"compare: {kernel} D={head_dim} {name}: {shown} ({entry['seconds']:.0f} s)", flush=True)
    with open(os.path.join(args.out, "compare.json"), "w") as f:
        json.dump({f"{k} {d}": row for (k, d), row in results.items()}, f, indent=1)
    write_report(args, results)


def gflops(kernel, head_dim, args, ms):
    left, right = tune.WINDOWS[args.window]
    T = args.seq_len
    pairs = sum(i - (0 if left < 0 else max(0, i - left)) + 1 for i in range(T)) * args.heads if right == 0 else None
    if pairs is None:
        return float("nan")
    return (4 if kernel == "forward" else 10) * head_dim * pairs / (ms * 1e-3) * 1e-9


def write_report(args, results):
    md = os.path.join(args.out, "report.md")
    with open(md, "w") as f:
        f.write(f"# Tuned vs default vs Halide's autoschedulers ({args.family})\n\n")
        f.write(f"B=1, T={args.seq_len}, H={args.heads}, {args.window}; each variant timed interleaved with the "
                "default-knob kernel (medians of 5 pairs), after a check against the double reference "
                "on that same shape (autoscheduled pipelines fail on shapes smaller than their tiles).\n"
                "Anderson2021 is a GPU autoscheduler and has no CPU counterpart to run here.\n\n")
        f.write("| kernel | D | variant | GFLOP/s | vs default | tuned vs it |\n| --- | --- | --- | --- | --- | --- |\n")
        for (kernel, D), row in results.items():
            default_ms = row["tuned"].get("default_ms")
            if default_ms:
                f.write(f"| {kernel} | {D} | default | {gflops(kernel, D, args, default_ms):.1f} | 1.00 | "
                        f"{row['tuned'].get('speedup', float('nan')):.2f} |\n")
            for name, e in row.items():
                if e["status"] != "ok":
                    f.write(f"| {kernel} | {D} | {name} | {e['status']}: {e.get('error', '')[:120]} | | |\n")
                    continue
                tuned_ms = row["tuned"].get("ms", float("nan"))
                f.write(f"| {kernel} | {D} | {name} | {gflops(kernel, D, args, e['ms']):.1f} | {e['speedup']:.2f} | "
                        f"{e['ms'] / tuned_ms:.2f} |\n")
        logs = sorted(glob.glob(os.path.join(tune.ROOT, "autotune", "logs", "*.jsonl")))
        if logs:
            f.write("\n![search curves](search.png)\n")
    fig, ax = plt.subplots(figsize=(9, 4))
    labels, values = [], []
    for (kernel, D), row in results.items():
        for name, e in row.items():
            if e["status"] == "ok":
                labels.append(f"{kernel[:3]} D={D}\n{name}")
                values.append(e["speedup"])
    ax.bar(range(len(values)), values)
    ax.set_xticks(range(len(values)), labels, fontsize=6, rotation=60)
    ax.axhline(1.0, color="black", linestyle="--")
    ax.set_ylabel("speed vs default knobs")
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "compare.png"), dpi=110)
    plt.close(fig)
    plot_search_curves(args.out)
    print(f"compare: wrote {md}")


def plot_search_curves(out):
    fig, ax = plt.subplots(figsize=(7, 4))
    for log in sorted(glob.glob(os.path.join(tune.ROOT, "autotune", "logs", "*.jsonl"))):
        best, curve = 0.0, []
        for line in open(log):
            e = json.loads(line)
            if e.get("status") == "ok":
                best = max(best, e["speedup"])
            curve.append(best)
        ax.plot(range(1, len(curve) + 1), curve, marker=".", label=os.path.basename(log)[:-6])
    ax.set_xlabel("trial")
    ax.set_ylabel("best speed-up over the defaults so far")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "search.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
