#!/usr/bin/env python3
"""Trains the ViT of vit.py with GKA (full window) and with dot-product attention on the
same digits split, width, depth, optimizer, data order and step budget, then writes a
report: <out>/report.md and <out>/learning_curves.png (run by `make compare-vision`).
Set GKA_LIBRARY (or install the project) so that gka_torch finds libgka; PYTHONPATH=python
in the source tree."""
import argparse
import json
import os
import pathlib
import platform
import subprocess

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import train  # noqa: E402  (after matplotlib.use)

NAMES = {"gka": "GKA", "dot": "dot-product"}


def cpu_model():
    """lscpu's model name, to name the host beside its figures."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or "unknown CPU"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")),
                "unknown CPU")


def plot(logs, path):
    fig, (losses, accuracy) = plt.subplots(1, 2, figsize=(11, 4.5))
    for (name, log), color in zip(logs.items(), ("tab:blue", "tab:orange")):
        steps = [r["step"] for r in log]
        losses.plot(steps, [r["train_loss"] for r in log], color=color, label=f"{NAMES[name]} train")
        losses.plot(steps, [r["test_loss"] for r in log], color=color, linestyle="--", label=f"{NAMES[name]} test")
        accuracy.plot(steps, [r["train_accuracy"] for r in log], color=color, label=f"{NAMES[name]} train")
        accuracy.plot(steps, [r["test_accuracy"] for r in log], color=color, linestyle="--",
                      label=f"{NAMES[name]} test")
    losses.set_yscale("log")
    losses.set_ylabel("cross-entropy (whole split)")
    accuracy.set_ylim(0.8, 1.0)  # past the first steps, where the two differ
    accuracy.set_ylabel("accuracy (whole split)")
    for ax in (losses, accuracy):
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("ViT on scikit-learn's digits: GKA (full window) vs dot-product attention")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def count(v):
    return f"{v:,.0f}"


def percent(v):
    return f"{100 * v:.2f}%"


def loss(v):
    return f"{v:.4f}"


# The table's rows: (label, how to show it, a summary's key or a function of a summary).
ROWS = [
    ("parameters", count, "parameters"),
    ("attention parameters", count, "attention_parameters"),
    ("training FLOPs / image", count, "training_flops_per_image"),
    ("attention training FLOPs / image", count, "attention_training_flops_per_image"),
    ("final train loss", loss, "train_loss"),
    ("final test loss", loss, "test_loss"),
    ("test - train loss gap", loss, lambda s: s["test_loss"] - s["train_loss"]),
    ("train accuracy", percent, "train_accuracy"),
    ("test accuracy", percent, "test_accuracy"),
    ("train - test accuracy gap", percent, lambda s: s["train_accuracy"] - s["test_accuracy"]),
    ("training images / s", count, "images_per_s"),
]


def table(g, d):
    """GKA's and dot-product attention's summaries side by side, with their ratio (of no gap)."""
    lines = ["| | GKA | dot-product | GKA / dot |", "| --- | --- | --- | --- |"]
    for label, show, key in ROWS:
        a, b = (key(s) if callable(key) else s[key] for s in (g, d))
        ratio = f"{a / b:.3f}" if b and not callable(key) else ""
        lines.append(f"| {label} | {show(a)} | {show(b)} | {ratio} |")
    return lines


def report(results, args, out):
    g, d = results["gka"][1], results["dot"][1]
    tokens = g["tokens"]
    lines = [
        "# GKA vs dot-product attention: a small ViT on scikit-learn's digits, on this CPU", "",
        f"Data: `sklearn.datasets.load_digits` (1,797 8x8 images, 10 classes), a fixed stratified split "
        f"({1 - train.TEST_FRACTION:.0%} train, {train.TEST_FRACTION:.0%} test, seed {train.SPLIT_SEED}). "
        f"Model: {tokens} patches of {args.patch}x{args.patch} pixels, {args.layers} layers, width "
        f"{args.heads * args.head_dim} ({args.heads} heads x {args.head_dim}), mean pooling; GKA's window "
        f"(-1, -1). {args.steps} AdamW steps of {args.batch} images (lr {args.lr}, weight decay "
        f"{args.weight_decay}), seed {args.seed}, the same data order for both. Losses and accuracies are over "
        f"the whole of each split. Host: {cpu_model()}, {os.cpu_count()} cores, {g['threads']} threads; libgka family {g['cpu_family']}.",
        "", "![learning curves](learning_curves.png)", "", *table(g, d),
        "", f"Learned bandwidths sigma (per layer and head, initialized at sqrt(D/2) = "
        f"{(args.head_dim / 2) ** 0.5:.3f}): {g['sigma']}", "",
        "FLOPs count 6 per weight per token of every product (forward and backward) and docs/spec.md's 4 + 10 "
        "FLOPs per head dimension per pair for the pairwise part of both attentions (all "
        f"{tokens}^2 pairs: full window). GKA's attention keeps W_O alone, 1/4 of the dot-product layer's "
        "projections; the pairwise part is the same for both.", "",
        "Reproduce: `make compare-vision` (or `.venv/bin/python examples/vision/compare.py --help`).",
    ]
    (out / "report.md").write_text("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="build/compare-vision")
    args = train.add_options(p).parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = {}
    for attention in NAMES:
        results[attention] = train.train(attention, args, log=lambda line: print(line, flush=True))
        (out / f"{attention}.json").write_text(json.dumps(dict(log=results[attention][0],
                                                               summary=results[attention][1]), indent=1) + "\n")
    plot({name: log for name, (log, _) in results.items()}, out / "learning_curves.png")
    report(results, args, out)
    print(f"compare-vision: wrote {out / 'report.md'} and {out / 'learning_curves.png'}")


if __name__ == "__main__":
    main()
