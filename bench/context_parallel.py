#!/usr/bin/env python3
"""Context parallelism's step time and traffic on this machine (gka_torch.distributed).

    context_parallel.py [--processes 1 2 4] [--seq 4096] [--window causal|W] [--layout zigzag] [--reps 5]

For each process count P: P processes (gloo, one kernel thread each: they share
the cores) run context_parallel_gka's forward and backward on one sequence
(B=1, H=8, D=64), sharded; it reports the median step time (the slowest rank's)
and the bytes each rank sent per step, measured (gka_torch.distributed.bytes_sent)
beside the formula 4 * B * H * D * (tokens it lends + tokens it borrows): the
features it lends forward, the gradients of those it borrowed backward. The one-call gka_attention
on the whole sequence, with as many threads as processes, is the yardstick.
"""
import argparse
import datetime
import os
import statistics
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

H, D = 8, 64


def worker(rank, world, args, path, out):
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=120))
    torch.set_num_threads(1)
    import gka_torch
    from gka_torch import distributed as cp
    gka_torch._LIB.gka_set_num_threads(1)
    window = (-1, 0) if args.window == "causal" else (int(args.window) - 1, 0)
    g = torch.Generator().manual_seed(0)
    x, dy = torch.randn(1, args.seq, H, D, generator=g) / 8, torch.randn(1, args.seq, H, D, generator=g)
    segments = cp.segments_of(args.seq, world, args.layout)
    mine = lambda t: torch.cat([t[:, s:s + n] for s, n in segments[rank]], dim=1)  # noqa: E731
    sigma = torch.ones(H)
    times, sent = [], []
    for _ in range(args.reps + 1):
        xl = mine(x).requires_grad_()
        dist.barrier()
        before, start = cp.bytes_sent, time.perf_counter()
        y = cp.context_parallel_gka(xl, sigma, window, segments=segments)
        y.backward(mine(dy))
        dist.barrier()
        times.append(time.perf_counter() - start)
        sent.append(cp.bytes_sent - before)
    lent = cp._Plan(segments, rank, window).lent
    # Forward: the slices it lends; backward: the gradients of those it borrowed.
    formula = 4 * H * D * sum(n for (holder, reader), slices in lent.items() if rank in (holder, reader)
                              for _, n in slices)
    result = torch.tensor([statistics.median(times[1:]), sent[-1], formula], dtype=torch.float64)
    gathered = [torch.zeros(3, dtype=torch.float64) for _ in range(world)]
    dist.all_gather(gathered, result)
    if rank == 0:
        torch.save(gathered, out)
    dist.destroy_process_group()


def one_call(args, threads):
    import gka_torch
    gka_torch._LIB.gka_set_num_threads(threads)
    window = (-1, 0) if args.window == "causal" else (int(args.window) - 1, 0)
    g = torch.Generator().manual_seed(0)
    x, dy = torch.randn(1, args.seq, H, D, generator=g) / 8, torch.randn(1, args.seq, H, D, generator=g)
    times = []
    for _ in range(args.reps + 1):
        xr = x.clone().requires_grad_()
        start = time.perf_counter()
        gka_torch.gka_attention(xr, torch.ones(H), window).backward(dy)
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--window", default="causal")
    parser.add_argument("--layout", default="zigzag", choices=["contiguous", "zigzag"])
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(f"T={args.seq} H={H} D={D} window {args.window}, {args.layout} shards; {os.cpu_count()} CPUs")
    print("| processes | step (fwd+bwd) | one-call gka_attention, as many threads | bytes sent per rank per step "
          "(measured / formula) |\n| --- | --- | --- | --- |")
    for world in args.processes:
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "result.pt")
            mp.spawn(worker, args=(world, args, os.path.join(d, "rendezvous"), out), nprocs=world)
            rows = torch.load(out)
        step = max(r[0].item() for r in rows)
        sent = "; ".join(f"{int(r[1])} / {int(r[2])}" for r in rows)
        print(f"| {world} | {step * 1e3:.0f} ms | {one_call(args, world) * 1e3:.0f} ms | {sent} |")


if __name__ == "__main__":
    main()
