"""gka_torch.distributed.context_parallel_gka with 2 and 4 processes (gloo, CPU),
spawned here: each rank's outputs and gradients against the single-process
gka_attention of the whole sequence, for causal, full and sliding windows,
contiguous shards of uneven lengths and zig-zag shards; a rank that fails
makes the run fail within the process group's timeout, not hang.

Run: GKA_LIBRARY=build/runtime/libgka.so PYTHONPATH=python python tests/python/test_distributed.py [-v]
(CTest: gka.torch.distributed). Without PyTorch it exits 77 (Skipped).
"""
import datetime
import gc
import os
import sys
import tempfile
import time
import unittest

SKIP_RETURN_CODE = 77
try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    if __name__ == "__main__":
        print(f"SKIPPED: torch is not installed in {sys.executable}")
        sys.exit(SKIP_RETURN_CODE)
    raise unittest.SkipTest("torch is not installed")

TIMEOUT = datetime.timedelta(seconds=20)  # a rank waiting on a failed one gives up after this
RTOL = 2e-5  # the chunk kernels (direct form) against the one-call kernels (float32 both)

# (window, layout, the contiguous shards' lengths per world size or None for even ones)
CASES = [
    ((-1, 0), "contiguous", {2: [30, 11], 4: [5, 17, 1, 18]}),
    ((-1, 0), "zigzag", None),
    ((-1, -1), "contiguous", {2: [20, 21], 4: [12, 9, 10, 10]}),
    ((6, 0), "contiguous", {2: [25, 16], 4: [3, 14, 4, 20]}),  # a shard shorter than the window
    ((6, 0), "zigzag", None),
    ((2, 3), "contiguous", None),
    ((-1, 0), "contiguous", {2: [0, 41], 4: [20, 0, 21, 0]}),  # ranks without tokens
]


def init(rank, world, path):
    dist.init_process_group("gloo", init_method=f"file://{path}", rank=rank, world_size=world, timeout=TIMEOUT)
    torch.set_num_threads(1)
    import gka_torch
    gka_torch._LIB.gka_set_num_threads(1)  # the processes share the cores


def relative(got, want):
    if want.numel() == 0:  # a rank without tokens
        return 0.0 if got.numel() == 0 else float("inf")
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-30)).item()


def leave():
    """What a rank's script does last, as examples/ddp/train_gka_ddp.py's ranks
    do (docs/distributed.md): every rank done with its peers, nothing left
    holding tensors of the group's work, then the group destroyed while the
    interpreter is whole, so that gloo's threads are joined before
    finalization. The process then returns normally, as a user's script does."""
    dist.barrier()
    gc.collect()
    dist.destroy_process_group()


def check_cases(rank, world, path):
    init(rank, world, path)
    run_cases(rank, world)
    leave()


def run_cases(rank, world):
    import gka_torch
    from gka_torch.distributed import context_parallel_gka, segments_of
    T, H, D = 41, 2, 16
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, T, H, D, generator=g)
    dy = torch.randn(2, T, H, D, generator=g)
    sigma = torch.tensor([2.0, 5.0])
    for window, layout, lengths in CASES:
        xr, sr = x.clone().requires_grad_(), sigma.clone().requires_grad_()
        want = gka_torch.gka_attention(xr, sr, window)
        (want * dy).sum().backward()
        if layout == "zigzag" or lengths is None:
            segments = segments_of(T, world, layout)
        else:
            starts = [sum(lengths[world][:r]) for r in range(world)]
            segments = [[(starts[r], n)] for r, n in enumerate(lengths[world])]
        mine = segments[rank]

        def local(t):
            return torch.cat([t[:, s:s + n] for s, n in mine], dim=1)

        xl, sl = local(x).requires_grad_(), sigma.clone().requires_grad_()
        y = context_parallel_gka(xl, sl, window, layout=layout,
                                 segments=None if layout == "contiguous" else segments)
        (y * local(dy)).sum().backward()
        what = f"rank {rank}/{world}, window {window}, {layout} {mine}"
        for name, got, ref in (("y", y, local(want)), ("dx", xl.grad, local(xr.grad)), ("dsigma", sl.grad, sr.grad)):
            err = relative(got.detach(), ref.detach())
            if not err < RTOL:
                raise AssertionError(f"{what}: {name} off by {err:.2e} relative (bound {RTOL})")


def failing_rank(rank, world, path):
    init(rank, world, path)
    from gka_torch.distributed import context_parallel_gka
    if rank == 1:
        raise RuntimeError("rank 1 fails before it sends anything")
    context_parallel_gka(torch.randn(1, 8, 1, 4), torch.ones(1), (-1, 0))  # waits on rank 1's features


class Plan(unittest.TestCase):
    """What each rank sends whom: the slices a window needs, and no more."""

    def plan(self, window, layout="contiguous", T=400, world=4):
        from gka_torch.distributed import _Plan, segments_of
        return _Plan(segments_of(T, world, layout), 0, window).lent

    def test_sliding_window_talks_to_the_next_rank_alone(self):
        # (6, 0): each rank's first queries reach the previous rank's last 6 keys.
        self.assertEqual(self.plan((6, 0)), {(0, 1): [(94, 6)], (1, 2): [(194, 6)], (2, 3): [(294, 6)]})
        self.assertEqual(self.plan((2, 3)), {(0, 1): [(98, 2)], (1, 0): [(100, 3)], (1, 2): [(198, 2)],
                                             (2, 1): [(200, 3)], (2, 3): [(298, 2)], (3, 2): [(300, 3)]})

    def test_zigzag_sliding_window_sends_only_what_it_reaches(self):
        # Pieces of 50: each rank's late piece reads the last 6 keys of the piece before it.
        self.assertEqual(self.plan((6, 0), "zigzag"), {(0, 1): [(44, 6)], (1, 2): [(94, 6)], (2, 3): [(144, 6)],
                                                       (3, 2): [(244, 6)], (2, 1): [(294, 6)], (1, 0): [(344, 6)]})

    def test_causal_sends_whole_shards_forward_only(self):
        lent = self.plan((-1, 0))
        self.assertEqual(sorted(lent), [(h, r) for h in range(4) for r in range(4) if h < r])
        self.assertEqual(lent[(0, 3)], [(0, 100)])
        # Zig-zag: every rank holds an early and a late piece; the late pieces read every early one.
        zigzag = self.plan((-1, 0), "zigzag")
        self.assertEqual(len(zigzag), 12)


class ContextParallel(unittest.TestCase):
    def spawn(self, fn, world):
        with tempfile.TemporaryDirectory() as d:
            mp.spawn(fn, args=(world, os.path.join(d, "rendezvous")), nprocs=world, join=True)

    def test_two_processes(self):
        self.spawn(check_cases, 2)

    def test_four_processes(self):
        self.spawn(check_cases, 4)

    def test_a_failing_rank_is_an_error_not_a_hang(self):
        start = time.monotonic()
        with self.assertRaisesRegex(Exception, "rank 1 fails"):
            self.spawn(failing_rank, 2)
        self.assertLess(time.monotonic() - start, TIMEOUT.total_seconds() + 30)


if __name__ == "__main__":
    unittest.main()
