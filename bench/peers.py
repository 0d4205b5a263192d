#!/usr/bin/env python3
"""libgka beside PyTorch's own attention on the CPU, in one process, float32 and bfloat16.

    peers.py [--seq-len T] [--heads H] [--head-dims 64 128] [--dtypes float32 bfloat16]
             [--reps N] [--threads N] [--accuracy-seq-len T] [--quick] [--out FILE]

The contenders, each on the dtype under test:
- libgka: gka_torch.gka_attention(x, sigma, window), x [B, T, H, D].
- SDPA: torch's scaled_dot_product_attention on GKA written as softmax attention
  (bench/folded.py: q', k', v' of head dim D+1 built from x [B, H, T, D], scale 1; y is
  the output's first D columns), under sdpa_kernel(FLASH_ATTENTION), else the first
  backend that runs (named in the output). Causal: is_causal=True; full: no mask;
  a sliding window: an explicit boolean mask (SDPA has no sliding window, so its
  cost stays quadratic there).
- Flex: torch.nn.attention.flex_attention on the same q', k', v', compiled by
  torch.compile (CPU inductor), with a block mask (causal, sliding; none for full).
  Where torch cannot run it, the output says why instead.
Passes: the forward (under no_grad), and the forward and backward w.r.t. x. The
peers' gradients flow through q', k' and v' to x, and their times include building
them (O(T*D) work beside the O(T^2*D) of attention).

B=1, x ~ 0.125 N(0, 1), sigma 1, dy ~ N(0, 1); torch's threads = libgka's. In each
cell (window, D) every contender's pass is called once (compiling, warming up),
then --reps rounds, each calling them all in a random order, so that a ratio's two
times sample the same moments of the machine; a time is the median of its rounds.
Then each contender's max relative error (max |error| / max |reference|) of y and
dx against gka_torch's double-precision reference at --accuracy-seq-len. Writes
markdown to stdout (and --out). Benchmarks assert nothing about speed.
"""
import argparse
import os
import random
import shlex
import statistics
import subprocess
import sys
import time

try:
    import torch
except ImportError:
    print("SKIP: bench/peers.py needs PyTorch: bash scripts/setup.sh torch")
    sys.exit(77)
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import gka_torch
from folded import fold
from gka_torch.reference import gka_attention_reference, window_mask

B, X_SCALE, SIGMA = 1, 0.125, 1.0
WINDOWS = (("causal", (-1, 0)), ("full", (-1, -1)), ("(255,0)", (255, 0)))
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
PASSES = ("forward", "forward+backward")
SDPA_BACKENDS = (("flash", SDPBackend.FLASH_ATTENTION), ("math", SDPBackend.MATH))
FULL = dict(seq_len=4096, heads=8, head_dims=[64, 128], reps=5, accuracy_seq_len=256)
# --quick: T past the (255, 0) window, and one T for both measures (one compilation a cell)
QUICK = dict(seq_len=384, heads=2, head_dims=[64], reps=2, accuracy_seq_len=384)


class Unavailable(Exception):
    """A peer that this torch cannot run here; the output says why."""


def libgka(T, H, window):
    sigma = torch.full((H,), SIGMA)
    return [("libgka", lambda x: gka_torch.gka_attention(x, sigma, window))]


def sdpa(T, H, window):
    if window == (-1, -1):
        mask = {}
    elif window == (-1, 0):
        mask = {"is_causal": True}
    else:
        mask = {"attn_mask": window_mask(T, window)}

    def on(backend):
        def attend(x):
            q, k, v = fold(x, SIGMA)
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, scale=1.0, **mask)[..., :x.shape[-1]]
        return attend
    return [(f"SDPA {name}", on(backend)) for name, backend in SDPA_BACKENDS]


def flex(T, H, window):
    try:
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention
        # A fresh cache a cell (its shapes, dtype and mask) keeps torch.compile under its
        # recompile limit, past which fullgraph=True raises rather than run eagerly.
        torch._dynamo.reset()
        compiled = torch.compile(flex_attention, dynamic=False, fullgraph=True)
        left, right = window

        def allowed(b, h, q, k):
            if left < 0:
                return k <= q + right
            if right < 0:
                return k >= q - left
            return (k >= q - left) & (k <= q + right)
        block_mask = None if window == (-1, -1) else create_block_mask(allowed, None, None, T, T, device="cpu")
    except Exception as e:
        raise Unavailable(reason(e)) from e

    def attend(x):
        q, k, v = fold(x, SIGMA)
        return compiled(q, k, v, block_mask=block_mask, scale=1.0)[..., :x.shape[-1]]
    return [("Flex", attend)]


# name, layout of x, the (label, function) options in order of preference
CONTENDERS = (("libgka", "bthd", libgka), ("SDPA", "bhtd", sdpa), ("Flex", "bhtd", flex))


def reason(e):
    """The first line of the exception at the root of e's causes (torch.compile wraps
    what the compiled code raised)."""
    while e.__cause__ is not None:
        e = e.__cause__
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"[:240]


def run_pass(attend, x, dy, pass_):
    """(y, dx) of one call; dx is None for the forward alone."""
    if pass_ == "forward":
        with torch.no_grad():
            return attend(x), None
    leaf = x.detach().requires_grad_()
    y = attend(leaf)
    y.backward(dy)
    return y, leaf.grad


def first_that_runs(name, options, x, dy, pass_):
    """(label, thunk, (y, dx)) of the first option that runs this pass; the thunk repeats
    the call. libgka, the subject, must run; a peer that cannot gives
    (label, None, the reasons)."""
    failures = []
    for label, attend in options:
        try:
            return label, (lambda: run_pass(attend, x, dy, pass_)), run_pass(attend, x, dy, pass_)
        except Exception as e:
            if name == "libgka":
                raise
            failures.append(f"{label}: {reason(e)}" if len(options) > 1 else reason(e))
    return options[0][0], None, "; ".join(failures)


def inputs(T, H, D, dtype):
    g = torch.Generator().manual_seed(0)
    x = (X_SCALE * torch.randn(B, T, H, D, generator=g)).to(dtype)
    dy = torch.randn(B, T, H, D, generator=g).to(dtype)
    return x, dy


def in_layout(t, layout):
    return t if layout == "bthd" else t.transpose(1, 2).contiguous()


def from_layout(t, layout):
    return t if layout == "bthd" else t.transpose(1, 2)


def prepared(T, H, D, dtype, window):
    """x, dy and {(name, pass): (label, thunk or None, (y, dx) in [B,T,H,D] or the reason)} for one cell."""
    x, dy = inputs(T, H, D, dtype)
    out = {}
    for name, layout, make in CONTENDERS:
        try:
            options = make(T, H, window)
        except Unavailable as e:
            for pass_ in PASSES:
                out[name, pass_] = (name, None, str(e))
            continue
        for pass_ in PASSES:
            label, thunk, result = first_that_runs(name, options, in_layout(x, layout), in_layout(dy, layout), pass_)
            if thunk is not None:
                result = tuple(None if t is None else from_layout(t, layout) for t in result)
            out[name, pass_] = (label, thunk, result)
    return x, dy, out


def timed(thunks, reps, rng):
    """{key: median seconds} of rounds that call every thunk once, in a random order."""
    times = {key: [] for key in thunks}
    order = list(thunks)
    for _ in range(reps):
        rng.shuffle(order)
        for key in order:
            start = time.perf_counter()
            thunks[key]()
            times[key].append(time.perf_counter() - start)
    return {key: statistics.median(t) for key, t in times.items()}


def rel_error(got, ref):
    return ((got.double() - ref).abs().max() / ref.abs().max()).item()


def errors(x, dy, window, results):
    """{(name, pass): (label, the max relative error of y (forward) or dx, or the reason)}."""
    xr = x.double().requires_grad_()
    yr = gka_attention_reference(xr, torch.full((x.shape[2],), SIGMA, dtype=torch.float64), window)
    yr.backward(dy.double())
    out = {}
    for (name, pass_), (label, thunk, result) in results.items():
        if thunk is None:
            out[name, pass_] = (label, result)
        else:
            y, dx = result
            out[name, pass_] = (label, rel_error(y, yr.detach()) if pass_ == "forward" else rel_error(dx, xr.grad))
    return out


def host():
    """lscpu's model name and core count, or what Python knows."""
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        f = {k.strip(): v.strip() for k, v in (line.split(":", 1) for line in text.splitlines() if ":" in line)}
        cores = int(f["Core(s) per socket"]) * int(f.get("Socket(s)", "1"))
        return f"{f.get('Model name', '?')}, {cores} cores, {f.get('CPU(s)', '?')} CPUs (lscpu)"
    except (OSError, subprocess.CalledProcessError, KeyError, ValueError):
        return f"{os.cpu_count()} CPUs (lscpu unavailable)"


def table(corner, columns, rows):
    lines = [f"| {corner} | " + " | ".join(columns) + " |", "| --- " * (len(columns) + 1) + "|"]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return lines


def row(what, entries, text):
    """A table row over the cells' entries (label, value), value a number for text() or a
    reason: the label in the row's name where the cells share it, else in each cell."""
    labels = [label for label, _ in entries]
    shared = len(set(labels)) == 1
    cells = ["unavailable" if isinstance(v, str) else text(v) for _, v in entries]
    if not shared:
        cells = [f"{c} ({label})" for c, label in zip(cells, labels)]
    return what.format(labels[0] if shared else labels[0].split()[0]), cells


def report(dtype_name, cells, times, accuracy, args, notes):
    """The dtype's three tables; what was unavailable goes to notes: {reason: [where]}."""
    columns = [f"{w} D={D}" for w, _, D in cells]
    for measure, results in (("", times), (f", accuracy at T={args.accuracy_seq_len}", accuracy)):
        for c, col in zip(cells, columns):
            for (name, pass_), (label, value) in results[c].items():
                if isinstance(value, str):
                    notes.setdefault(f"{label} {pass_}: {value}", []).append(f"{dtype_name} {col}{measure}")
    def ratio(ours, peer):
        return peer[0], ours[1] / peer[1] if isinstance(peer[1], float) else peer[1]
    ratios = [row(pass_ + " vs {}", [ratio(times[c]["libgka", pass_], times[c][peer, pass_]) for c in cells],
                  lambda r: f"{r:.2f}") for peer in ("SDPA", "Flex") for pass_ in PASSES]
    ms = [row("{} " + pass_, [times[c][name, pass_] for c in cells], lambda t: f"{t * 1e3:.1f}")
          for name, _, _ in CONTENDERS for pass_ in PASSES]
    errs = [row("{} " + ("y" if pass_ == "forward" else "dx"), [accuracy[c][name, pass_] for c in cells],
                lambda e: f"{e:.1e}") for name, _, _ in CONTENDERS for pass_ in PASSES]
    return ([f"## {dtype_name}", ""] + table(f"{dtype_name}, libgka time / peer time", columns, ratios) + [""] +
            table(f"{dtype_name}, median ms", columns, ms) + [""] +
            table(f"{dtype_name}, max rel. error at T={args.accuracy_seq_len}", columns, errs) + [""])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq-len", type=int, help=f"T of the timings ({FULL['seq_len']}; --quick {QUICK['seq_len']})")
    ap.add_argument("--heads", type=int, help=f"H ({FULL['heads']}; --quick {QUICK['heads']})")
    ap.add_argument("--head-dims", type=int, nargs="+", help=f"D ({FULL['head_dims']}; --quick {QUICK['head_dims']})")
    ap.add_argument("--reps", type=int, help=f"timed rounds ({FULL['reps']}; --quick {QUICK['reps']})")
    ap.add_argument("--accuracy-seq-len", type=int,
                    help=f"T of the accuracy check ({FULL['accuracy_seq_len']}; --quick {QUICK['accuracy_seq_len']})")
    ap.add_argument("--dtypes", nargs="+", choices=list(DTYPES), default=list(DTYPES))
    ap.add_argument("--threads", type=int, default=torch.get_num_threads(),
                    help="torch's and libgka's threads (torch.get_num_threads())")
    ap.add_argument("--quick", action="store_true", help="small shapes, a smoke run")
    ap.add_argument("--out", help="also write the markdown here")
    args = ap.parse_args()
    for key, value in (QUICK if args.quick else FULL).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    torch.set_num_threads(args.threads)
    gka_torch.set_num_threads(args.threads)

    cells = [(w, window, D) for w, window in WINDOWS for D in args.head_dims]
    out = ["# libgka beside PyTorch's attention on the CPU (bench/peers.py)", "",
           f"- command: `{shlex.join([sys.executable] + sys.argv)}`",
           f"- host: {host()}",
           f"- torch {torch.__version__}, threads: torch {torch.get_num_threads()}, libgka "
           f"{gka_torch.get_num_threads()}; libgka {gka_torch.__version__}, CPU family {gka_torch.cpu_family()}",
           f"- B={B} H={args.heads} T={args.seq_len}, x ~ {X_SCALE} N(0, 1), sigma {SIGMA}, dy ~ N(0, 1); "
           f"medians of {args.reps} rounds, each contender once a round in a random order, after a first "
           "untimed call each",
           "- peers on the folded problem (bench/folded.py): q' = [x/s^2, -1/(2 s^2)], k' = [x, |x|^2], "
           "v' = [x, 0], head dim D+1, scale 1, in the dtype under test; SDPA causal by is_causal, full "
           "unmasked, (255,0) by a boolean mask (quadratic); Flex with a block mask, compiled by torch.compile",
           "- forward: under no_grad; forward+backward: w.r.t. x, the peers' gradients flowing through "
           "q', k', v' to x; the peers' times include building q', k', v'",
           f"- accuracy: max |error| / max |reference| of y and dx against gka_torch's double reference "
           f"(gka_torch.reference) on the same inputs, B={B} H={args.heads} T={args.accuracy_seq_len}", ""]
    print("\n".join(out), flush=True)
    rng = random.Random(0)
    notes = {}
    for dtype_name in args.dtypes:
        dtype = DTYPES[dtype_name]
        times, accuracy = {}, {}
        for w, window, D in cells:
            c = (w, window, D)
            x, dy, results = prepared(args.accuracy_seq_len, args.heads, D, dtype, window)
            accuracy[c] = errors(x, dy, window, results)
            if args.seq_len != args.accuracy_seq_len:
                _, _, results = prepared(args.seq_len, args.heads, D, dtype, window)
            medians = timed({k: r[1] for k, r in results.items() if r[1] is not None}, args.reps, rng)
            times[c] = {k: (r[0], medians[k] if r[1] is not None else r[2]) for k, r in results.items()}
        section = report(dtype_name, cells, times, accuracy, args, notes)
        print("\n".join(section), flush=True)
        out += section
    if notes:
        everywhere = 2 * len(args.dtypes) * len(cells)  # timings and accuracy, every dtype and cell
        section = ["Unavailable:", ""] + [f"- {why} ({'every cell' if len(where) == everywhere else '; '.join(where)})"
                                          for why, where in notes.items()] + [""]
        print("\n".join(section), flush=True)
        out += section
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
