"""Random-feature GKA's error against exact GKA as M grows (docs/random-features.md):
y's root-mean-square error, relative to the features' scale, of the float64 loops of
the feature map (gka_torch.gka_features_reference) against exact GKA's
(gka_forward_reference), averaged over seeded draws of W (gka_torch.draw_frequencies,
independent rows and orthogonal blocks), at feature scales where |u|^2 = |x / sigma|^2
is 0.25, 1 and 2 (2: GaussianKernelAttention's default sigma = sqrt(D / 2) on features
of unit scale). Writes a markdown table and a plot.

    GKA_LIBRARY=build/runtime/libgka.so PYTHONPATH=python .venv/bin/python bench/feature_error.py OUT_DIR
"""
import os
import sys

import torch

import gka_torch
from gka_torch.reference import gka_features_reference, gka_forward_reference

FEATURE_COUNTS = (16, 32, 64, 128, 256, 512, 1024)
SQUARED_NORMS = (0.25, 1.0, 2.0)  # |u|^2 a token, on average
T, D, DRAWS = 128, 64, 16


def relative_rms_error(x, sigma, orthogonal, count, seed):
    exact, _ = gka_forward_reference(x, sigma, (-1, 0))
    scale = x.pow(2).mean().sqrt()
    total = 0.0
    for k in range(DRAWS):
        w = gka_torch.draw_frequencies(1, count, D, seed=seed + k, orthogonal=orthogonal).double()
        estimate, _ = gka_features_reference(x, sigma, w, (-1, 0))
        total += (estimate - exact).pow(2).mean().item()
    return (total / DRAWS) ** 0.5 / scale.item()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    x = torch.randn(1, T, 1, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    x = x / x.pow(2).sum(-1, keepdim=True).sqrt()  # unit norm: |u|^2 = 1 / sigma^2
    rows = []
    for squared_norm in SQUARED_NORMS:
        sigma = torch.tensor([squared_norm ** -0.5], dtype=torch.float64)
        for orthogonal in (False, True):
            errors = [relative_rms_error(x, sigma, orthogonal, m, 1000 * m) for m in FEATURE_COUNTS]
            rows.append((squared_norm, orthogonal, errors))
            print(f"|u|^2 {squared_norm}, {'orthogonal' if orthogonal else 'independent'}: "
                  + ", ".join(f"M={m} {e:.4f}" for m, e in zip(FEATURE_COUNTS, errors)), flush=True)
    with open(os.path.join(out, "feature_error.md"), "w") as f:
        f.write("| \\|u\\|^2 | draws | " + " | ".join(f"M = {m}" for m in FEATURE_COUNTS) + " |\n")
        f.write("| --- | --- | " + " | ".join("---" for _ in FEATURE_COUNTS) + " |\n")
        for squared_norm, orthogonal, errors in rows:
            f.write(f"| {squared_norm} | {'orthogonal' if orthogonal else 'independent'} | "
                    + " | ".join(f"{e:.4f}" for e in errors) + " |\n")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for (squared_norm, orthogonal, errors), colour in zip(rows, ("C0", "C0", "C1", "C1", "C2", "C2")):
        ax.loglog(FEATURE_COUNTS, errors, color=colour, linestyle="-" if orthogonal else "--", marker="o",
                  label=f"|u|^2 = {squared_norm}, {'orthogonal' if orthogonal else 'independent'}")
    reference = rows[0][2][0] * (FEATURE_COUNTS[0] / torch.tensor(FEATURE_COUNTS, dtype=torch.float64)) ** 0.5
    ax.loglog(FEATURE_COUNTS, reference.tolist(), color="grey", linestyle=":", label="1/sqrt(M)")
    ax.set_xlabel("random features M")
    ax.set_ylabel("rms error of y / rms of x")
    ax.set_title(f"Random features against exact GKA: T={T}, D={D}, causal, {DRAWS} draws", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "feature_error.png"), dpi=110)


if __name__ == "__main__":
    main()
