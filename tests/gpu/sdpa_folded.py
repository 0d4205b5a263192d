#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention in fp32 on GKA's folded problem.

GKA's forward is softmax attention on q', k', v' of head dim D+1, scale 1
(bench/folded.py, which builds them). This times
SDPA (causal and a (255, 0) sliding window as a boolean mask) for the shapes of
gka_bench_cuda, with TF32 off, and reports TFLOP/s by docs/spec.md's accounting for
the same pairs (so the rows compare with gka_bench_cuda's). Writes markdown.
usage: sdpa_folded.py --out file.md
"""
import argparse
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from folded import fold  # noqa: E402


def pairs(T, window_left):
    if window_left < 0:
        return T * (T + 1) // 2
    W = window_left + 1
    return sum(min(i + 1, W) for i in range(T))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: torch sees no CUDA device")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    lines = ["PyTorch %s SDPA fp32 (TF32 off) on the folded problem, %s, B=1 H=8, TFLOP/s by docs/spec.md's forward "
             "accounting (4*D*pairs) for comparison with gka_bench_cuda\n" % (torch.__version__, torch.cuda.get_device_name()),
             "| T | D | window | fwd ms | GKA-equivalent TFLOP/s |", "| --- | --- | --- | --- | --- |"]
    for T in (2048, 4096, 16384):
        for D in (64, 128):
            for left in (-1, 255):
                x = torch.randn(1, 8, T, D, device=dev)
                q, k, v = fold(x, 1.0)
                if left < 0:
                    call = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=1.0)
                else:
                    i = torch.arange(T, device=dev)
                    mask = (i[None, :] <= i[:, None]) & (i[None, :] >= i[:, None] - left)
                    call = lambda: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
                try:
                    for _ in range(2):
                        call()
                    torch.cuda.synchronize()
                    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    start.record()
                    for _ in range(args.iterations):
                        call()
                    stop.record()
                    torch.cuda.synchronize()
                    ms = start.elapsed_time(stop) / args.iterations
                    tflops = 4 * D * 8 * pairs(T, left) / (ms * 1e9)
                    row = "| %d | %d | %s | %.3f | %.2f |" % (T, D, "causal" if left < 0 else "(255, 0)", ms, tflops)
                except RuntimeError as e:  # e.g. out of memory for a dense mask
                    row = "| %d | %d | %s | failed: %s | |" % (T, D, "causal" if left < 0 else "(255, 0)", str(e)[:80])
                print(row, flush=True)
                lines.append(row)
                del x, q, k, v
                torch.cuda.empty_cache()
    open(args.out, "w").write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
