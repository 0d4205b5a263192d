#!/usr/bin/env python3
"""gka_attention at a head dim other than 64 and 128 against the same features
zero-padded to 64 or 128 (which adds nothing to any distance, so y's first D
columns and the gradients are the same), in one process.

    padded_head_dims.py [--seq-len T] [--heads H] [--head-dims 16 32 80 96] [--reps N]

B=1, causal, float32, x ~ N(0, 1), sigma sqrt(D); the pass is forward and
backward (x.grad). Each round times both forms in a random order, so that a
ratio's two times sample the same moments of the machine; a time is the median
of its rounds. Prints markdown: the times, their ratio and the largest relative
difference of y and x.grad between the forms. It asserts nothing about speed.
"""
import argparse
import random
import statistics
import time

import torch
import torch.nn.functional as F

import gka_torch
from gka_torch import gka_attention


def step(x, sigma, padded_to):
    """y and x.grad of sum(y * dy) for dy = cos(y index), at D or padded."""
    x = x.detach().requires_grad_()
    xin = F.pad(x, (0, padded_to - x.shape[-1])) if padded_to else x
    y = gka_attention(xin, sigma)[..., :x.shape[-1]]
    (y * torch.cos(torch.arange(y.numel(), dtype=y.dtype).view(y.shape))).sum().backward()
    return y.detach(), x.grad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--head-dims", type=int, nargs="+", default=[16, 32, 80, 96])
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    print(f"B=1, T={args.seq_len}, H={args.heads}, causal, float32, forward+backward; libgka family "
          f"{gka_torch.cpu_family()}, {gka_torch.get_num_threads()} threads; median of {args.reps} interleaved rounds\n")
    print("| D | padded to | at D (ms) | padded (ms) | at D / padded | max rel. difference (y, dx) |")
    print("|---|---|---|---|---|---|")
    for d in args.head_dims:
        padded_to = 64 if d < 64 else 128
        g = torch.Generator().manual_seed(d)
        x = torch.randn(1, args.seq_len, args.heads, d, generator=g)
        sigma = torch.full((args.heads,), d ** 0.5)
        times = {0: [], padded_to: []}
        results = {form: step(x, sigma, form) for form in times}  # warm-up, and the results compared
        for _ in range(args.reps):
            for form in random.sample(list(times), len(times)):
                start = time.perf_counter()
                step(x, sigma, form)
                times[form].append(time.perf_counter() - start)
        at_d, padded = (statistics.median(times[f]) * 1e3 for f in (0, padded_to))
        diff = max(((a - b).abs().max() / b.abs().max()).item() for a, b in zip(results[0], results[padded_to]))
        print(f"| {d} | {padded_to} | {at_d:.1f} | {padded:.1f} | {at_d / padded:.2f} | {diff:.1e} |")


if __name__ == "__main__":
    main()
