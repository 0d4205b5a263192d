#!/usr/bin/env python3
"""Searches the schedule knobs of one GKA kernel for one shape class and records the winner.

    gka_autotune.py [--family avx512] [--kernel forward] [--head-dim 64] [--class long]
                    [--window causal] [--seq-len 4096] [--heads 8] [--trials 40] [--minutes 15]
                    [--seed 1] [--log autotune/logs/<class>.jsonl] [--write-table]
    gka_autotune.py --measure band:96,key_tile:16 [--trials 3] [shape options as above]
    gka_autotune.py --all [--family avx512] [--trials 40] [--minutes 15] [--write-table]
    gka_autotune.py --all --family cuda86 [--stage prepare|run|import] [--sweep DIR] [--gpu-minutes 7]
                    [--write-table]

A GPU family is swept instead of searched: compiled here, timed on the GPU,
possibly on another machine (gpu_sweep.py).

A shape class is a head dim, a window kind and a sequence-length range (CLASSES);
it is tuned on one shape in it (--window, --seq-len: the class's by default; a
search on a shape of one's own does not write the table). --all tunes each kernel,
head dim and class in turn: the head dims the build compiles with constant loops
(its variant table, variants.tsv), each class with its own log.

Each trial generates the kernel with the candidate knobs (the generator's `knobs`
parameter), checks it against the double reference on a small problem, then times it
interleaved with the default-knob kernel on the tuning shape (autotune/harness.cpp);
the score is the median over pairs of runs of default time / candidate time (at least
5 pairs, a second of them), so drift of the shared machine cancels.
The search samples the knob space at random (the table's other rows for this kernel
first) for at most half its budget, then refines around the best so far, the defaults
until something beats them (one knob moved to a neighbouring value at a time). Every
trial goes to the log (JSON lines), stamped with a fingerprint of the code it ran
(schedule_fingerprint); a rerun with the same log resumes, skipping what was
measured on the same code. --write-table stores the
winner in schedules/tuned.tsv (the best three re-measured twice, each scored by its
slowest figure; autotune/tuned_table.py reads and writes the table for the build, the
tests and this tuner), which the build reads: for the class "long" only if it
beats the defaults; a narrower class always gets a row ("defaults" if they win), so
that it never runs knobs tuned for other shapes.
"""
import argparse
import ctypes
import functools
import hashlib
import importlib.util
import itertools
import json
import os
import platform
import random
import re
import subprocess
import sys
import tempfile
import time

import gpu_sweep
import tuned_table

ROOT = tuned_table.ROOT

# The kernels whose CPU schedules are searched; each one's knobs and the values
# worth trying come from its schedule's knob table (gka_knobs --space).
KERNELS = ("forward", "backward")
# Heads of the tuning shapes, unless --heads says otherwise (B=1).
HEADS = 8


def schedule_fingerprint(build, shape):
    """What a trial's timing depends on besides its knobs: the generator binary
    (the algorithms and schedules as built), the Halide release it links, the
    CPU families' targets, the harness, the allocator and the problem maker it
    runs with, and the tuning shape (`shape`: window, length, heads). A log
    entry of another fingerprint was measured on code or a shape since changed
    (even under the same knob names), and a resumed search sets it aside."""
    from importlib.metadata import version
    generator = os.path.join(build, "kernels", "gka.generator")
    if not os.path.exists(generator):
        sys.exit(f"autotune: no generator at {generator}: build the project first (make build)")
    h = hashlib.sha256((version("halide") + " " + " ".join(map(str, shape))).encode())
    for path in (generator, os.path.join(ROOT, "cmake", "families.tsv"),
                 *(os.path.join(ROOT, p) for p in ("autotune/harness.cpp", "runtime/block_cache.cpp",
                                                    "oracle/reference.cpp", "oracle/reference.h",
                                                    "oracle/contract.cpp", "oracle/contract.h"))):
        with open(path, "rb") as f:
            h.update(f.read())
    return h.hexdigest()[:12]


def class_fingerprint(args):
    """schedule_fingerprint of a class's run: its build and tuning shape."""
    return schedule_fingerprint(args.build, (args.window, args.seq_len, args.heads))


def current_entries(log, space, fingerprint):
    """The entries of `log` measured on this code: this fingerprint and the knob set of
    `space` (a line cut short by an interrupted run is skipped)."""
    entries = []
    for line in open(log):
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return [e for e in entries
            if e.get("schedule") == fingerprint and set(e.get("knobs", ())) == set(space)]


class KnobRules:
    """The schedule's default knobs, its search space, and whether it takes a knob
    set, as the generators' own code answers (autotune/gka_knobs): no knob or
    constraint is written twice."""

    def __init__(self, args):
        ask = [os.path.join(args.build, "autotune", "gka_knobs"), "gka_" + args.kernel,
               "target=" + family_targets()[args.family], f"head_dim={args.head_dim}"] + generator_params(args.family)
        r = subprocess.run(ask, capture_output=True, text=True)
        if r.returncode:
            sys.exit("autotune: gka_knobs cannot say the defaults:\n" + r.stderr)
        self.all_defaults = parse_knobs(r.stdout.strip())
        r = subprocess.run(ask + ["--space"], capture_output=True, text=True)
        if r.returncode:
            sys.exit("autotune: gka_knobs cannot say the search space:\n" + r.stderr)
        answer = json.loads(r.stdout)
        self.space, self.zero_means_all_of = answer["knobs"], answer["zero_means_all_of"]
        self.only_with = answer["only_with"]
        self.defaults = {k: v for k, v in self.all_defaults.items() if k in self.space}
        self.head_dim, self.answers = args.head_dim, {}
        self.checker = subprocess.Popen(ask + ["--check"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def why_not(self, knobs):
        """"" if the generator takes `knobs`, else its reason."""
        name = knob_string(knobs)
        if name not in self.answers:
            self.checker.stdin.write(name + "\n")
            self.checker.stdin.flush()
            answer = self.checker.stdout.readline().strip()
            self.answers[name] = "" if answer == "ok" else answer or "gka_knobs stopped answering"
        return self.answers[name]

    def worth_trying(self, knobs):
        """Taken by the generator, and a kernel of their own: d blocks are whole
        vectors, one past the head dim is the whole head dim, a knob whose 0
        means "all of" another (a GEMM chunk of the whole tile) is the same kernel
        at that other's value as at 0, and a mode's own knob (only_with) is the
        same kernel at every value while its mode is off."""
        if "d_block" in knobs:
            vec, d_block = self.all_defaults["vector"], knobs["d_block"]
            if d_block % vec or d_block > max(self.head_dim, vec):
                return False
        if any(knobs[part] == knobs[whole] for part, whole in self.zero_means_all_of.items()):
            return False
        if any(not knobs[mode] and knobs[name] != self.defaults[name] for name, mode in self.only_with.items()):
            return False
        return not self.why_not(knobs)


WINDOWS = {"full": (-1, -1), "causal": (-1, 0), "w255": (255, 0)}
# The standard shape classes of a kernel and head dim: the table's window kind and
# sequence-length range, and the shape each is tuned on. "long" is the catch-all
# kernel, which serves every shape no narrower class takes.
CLASSES = {
    "long": {"window_kind": "any", "seq_range": "any", "window": "causal", "seq_len": 4096},
    "short": {"window_kind": "global", "seq_range": "1-2048", "window": "causal", "seq_len": 1024},
    "sliding": {"window_kind": "sliding", "seq_range": "any", "window": "w255", "seq_len": 4096},
}


def families():
    """cmake/families.tsv's rows for this machine's architecture (CPU families best first)."""
    arch = {"x86_64": "x86-64", "aarch64": "arm-64", "arm64": "arm-64"}.get(platform.machine(), platform.machine())
    return [f for f in tuned_table.families() if f["halide_target"].startswith(arch + "-")]


def family_targets():
    return {f["family"]: f["halide_target"] for f in families()}


def host_best_family():
    flags = set(re.findall(r"^flags\s*:\s*(.*)$", open("/proc/cpuinfo").read(), re.M)[0].split())
    cpu = [f for f in families() if f["kind"] == "cpu"]
    return next((f["family"] for f in cpu if flags >= set(f["host_features"].split(","))), cpu[-1]["family"])


def host_cpu():
    """The CPU the winners were measured on: another may rank them otherwise."""
    names = re.findall(r"^model name\s*:\s*(.+)$", open("/proc/cpuinfo").read(), re.M)
    return f"{names[0] if names else 'unknown CPU'}, {os.cpu_count()} cores"


def knob_string(knobs):
    return ",".join(f"{k}:{v}" for k, v in sorted(knobs.items()))


def parse_knobs(spec):
    return {} if spec in ("", "defaults") else {k: int(v) for k, v in (item.split(":") for item in spec.split(","))}


def tuned_head_dims(build):
    """The head dims the build compiles with constant loops: its variant table's
    (build/variants.tsv, kernels/variants.py; 0, the kernel of every other head
    dim, is not tuned)."""
    table = os.path.join(build, "variants.tsv")
    if not os.path.exists(table):
        sys.exit(f"autotune: no {table}: configure the build first (make build)")
    with open(table) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
    column = rows[0].index("head_dim")
    return sorted({int(r[column]) for r in rows[1:]} - {0})


def gka_abi():
    """libgka's C ABI as python/gka_torch declares it (its _lib module, which needs
    no torch, loaded alone: the package's __init__ imports torch)."""
    spec = importlib.util.spec_from_file_location("gka_abi", os.path.join(ROOT, "python", "gka_torch", "_lib.py"))
    abi = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(abi)
    return abi


@functools.lru_cache(maxsize=None)
def libgka(build):
    """The build's libgka, for gka_kernel_variant, and its ABI's structs."""
    path = os.path.join(build, "runtime", "libgka.so")
    if not os.path.exists(path):
        sys.exit(f"autotune: no libgka at {path}: build the project first (make build)")
    abi, lib = gka_abi(), ctypes.CDLL(path)
    abi.declare(lib)
    return lib, abi


def knobs_that_run(build, family, kernel, head_dim, window, seq_len):
    """The knobs of the variant libgka runs for this shape ("": the schedule's
    defaults), as libgka itself answers (gka_kernel_variant): the tuned table's
    narrowest class that contains the shape, as the build compiled it."""
    lib, abi = libgka(build)
    knobs = ctypes.c_char_p()
    name = lib.gka_kernel_variant(family.encode(), kernel.encode(), abi.Shape(1, seq_len, HEADS, head_dim),
                                  abi.Window(*WINDOWS[window]), ctypes.byref(knobs))
    if name is None:
        sys.exit(f"autotune: the libgka of {build} has no {kernel} kernels for the family {family}")
    return knobs.value.decode()


def is_gpu(family):
    return next(f["kind"] for f in families() if f["family"] == family) != "cpu"


def generator_params(family):
    """What the build passes the family's generators besides head dim and knobs:
    a GPU family's kernels are the direct score form alone (runtime/CMakeLists.txt)."""
    return ["scores=direct"] if is_gpu(family) else []


def harness_target(args):
    """The family's Halide target as the harness runs it (or --target's): its
    GPU kernels on Halide's own context (libgka passes its stream through
    user_context; the harness has none to pass, and the code is otherwise the
    same)."""
    return args.target or family_targets()[args.family].replace("-user_context", "")


class Trials:
    """Builds and runs candidates for one shape class. With sweep=True (a GPU
    family's, gpu_sweep.py), the harness is left for the sweep to compile
    around its points."""

    def __init__(self, args, work, sweep=False):
        self.args, self.work = args, work
        self.generator = os.path.join(args.build, "kernels", "gka.generator")
        import halide  # the project's .venv has it
        self.include = os.path.join(halide.install_dir(), "include")
        self.target = harness_target(args) + "-no_runtime"
        self.params = generator_params(args.family)
        self.generate_runtime_and_harness(sweep)
        self.baseline = self.generate("baseline", "")

    def run(self, cmd):
        return subprocess.run(cmd, capture_output=True, text=True)

    def compile(self, src, obj, defines=()):
        cmd = ["g++", "-O2", "-std=c++17", "-c", "-I" + self.include, "-I" + self.work,
               "-I" + os.path.join(ROOT, "oracle"), "-I" + os.path.join(ROOT, "runtime", "include"),
               "-I" + os.path.join(ROOT, "runtime")] + list(defines)
        if self.args.kernel == "forward" and "harness" in src:
            cmd.append("-DGKA_TUNE_FORWARD")
        r = self.run(cmd + [os.path.join(ROOT, src), "-o", os.path.join(self.work, obj)])
        if r.returncode:
            sys.exit("autotune: cannot compile " + src + ":\n" + r.stderr)

    def generate_runtime_and_harness(self, sweep):
        r = self.run([self.generator, "-r", "runtime", "-o", self.work, "target=" + harness_target(self.args)])
        if r.returncode:
            sys.exit("autotune: cannot generate the Halide runtime:\n" + r.stderr)
        # Declarations only: the candidate and the baseline share the generated signature.
        for name in ("baseline",) if sweep else ("candidate", "baseline"):
            self.generate(name, "", header_only=True)
        # The backward's timed inputs y and lse come from the forward (default
        # knobs), as in training.
        self.inputs = []
        if self.args.kernel == "backward":
            lib = self.generate("forward_inputs", "", kernel="forward", header_to_work=True)
            if lib is None:
                sys.exit("autotune: cannot generate the forward for the backward's inputs:\n" + self.generator_error)
            self.inputs = [lib]
        for src, obj in (("autotune/harness.cpp", "harness.o"), ("oracle/reference.cpp", "reference.o"),
                         ("oracle/contract.cpp", "contract.o"), ("runtime/block_cache.cpp", "block_cache.o")):
            if not (sweep and "harness" in src):
                self.compile(src, obj)

    def objects(self):
        return [os.path.join(self.work, o) for o in ("harness.o", "reference.o", "contract.o", "block_cache.o")]

    def generate(self, name, knobs, header_only=False, extra=(), kernel=None, header_to_work=False, emit=()):
        """work/name/name.a (None if the generator refuses); `emit`: the outputs, if not the library and header."""
        outdir = os.path.join(self.work, name)
        os.makedirs(outdir, exist_ok=True)
        emit = emit or (("h",) if header_only else ("static_library", "h"))
        cmd = [self.generator, "-g", "gka_" + (kernel or self.args.kernel), "-f", name, "-o", outdir,
               "-e", ",".join(emit), "target=" + self.target,
               f"head_dim={self.args.head_dim}"] + self.params + ([f"knobs={knobs}"] if knobs else []) + list(extra)
        r = self.run(cmd)
        self.generator_error = r.stderr.strip().splitlines()[-1] if r.returncode and r.stderr.strip() else ""
        if (header_only or header_to_work) and r.returncode == 0:
            os.replace(os.path.join(outdir, name + ".h"), os.path.join(self.work, name + ".h"))
        return None if r.returncode else os.path.join(outdir, name + ".a")

    def measure(self, knobs, extra=(), check_shape=()):
        """Checks and times the kernel built with `knobs` (and extra generator
        arguments, e.g. an autoscheduler) against the default-knob kernel."""
        lib = self.generate("candidate", knob_string(knobs), extra=extra)
        if lib is None:
            return {"status": "invalid", "error": self.generator_error}
        exe = os.path.join(self.work, "harness")
        r = self.run(["g++"] + self.objects() + [lib, self.baseline] + self.inputs + [os.path.join(self.work, "runtime.a"),
                                          "-lpthread", "-ldl", "-o", exe])
        if r.returncode:
            return {"status": "link failed", "error": r.stderr[-500:]}
        return harness_verdict(self.run([exe] + harness_command(self.args) + [str(n) for n in check_shape]))

    def slowest(self, knobs, speedup, runs):
        """The lowest of `speedup` and `runs` more measurements of `knobs` (0 for a failed run)."""
        return min([speedup] + [self.measure(knobs).get("speedup", 0.0) for _ in range(runs)])


def harness_command(args):
    """The harness's arguments for the class's tuning shape: T left right head_dim heads."""
    left, right = WINDOWS[args.window]
    return [str(n) for n in (args.seq_len, left, right, args.head_dim, args.heads)]


def harness_verdict(r):
    """A trial's entry from its harness run (autotune/harness.cpp): ok with its
    times, wrong or crashed."""
    words = r.stdout.split()
    if r.returncode or not words:
        return {"status": "crashed", "error": (r.stderr or r.stdout)[-500:]}
    if words[0] == "broken":  # the harness, not the candidate: no trial can be scored
        sys.exit("autotune: the trial harness failed: " + " ".join(words[1:]))
    if words[0] != "ok":
        return {"status": "wrong", "error": " ".join(words[1:])}
    cand, base, speedup = (float(w) for w in words[1:4])
    return {"status": "ok", "ms": cand, "default_ms": base, "speedup": speedup}


def neighbours(knobs, space):
    for name, values in space.items():
        k = values.index(knobs[name]) if knobs[name] in values else 0
        for j in (k - 1, k + 1):
            if 0 <= j < len(values):
                yield dict(knobs, **{name: values[j]})


def write_table(args, best, measured_on=None):
    """Stores the class's winner (None: the defaults won) in the table;
    measured_on: the device its figures come from (default: this CPU)."""
    cls = CLASSES[args.shape_class]
    key = [args.family, "gka_" + args.kernel, str(args.head_dim), cls["window_kind"], cls["seq_range"]]
    shape = f"T={args.seq_len} H={args.heads} {args.window} on {measured_on or host_cpu()}"
    if best is not None:
        tuned_table.store(key, [knob_string(best["knobs"]), f"{best['speedup']:.3f}", shape])
    elif args.shape_class != "long":  # the catch-all's defaults are its schedule's: no row needed
        tuned_table.store(key, ["defaults", "1.000", shape])
    else:
        tuned_table.store(key, None)
    print(f"autotune: wrote {' '.join(key)} -> {knob_string(best['knobs']) if best else 'the defaults'} "
          f"to {tuned_table.TABLE}")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--family", choices=sorted(family_targets()), help="default: the best CPU family of this host")
    ap.add_argument("--all", action="store_true", help="tune every kernel, head dim the build compiles with "
                    "constant loops, and class in turn, each with its own log")
    ap.add_argument("--kernel", choices=KERNELS, help="default: forward")
    ap.add_argument("--head-dim", type=int, help="a head dim the build compiles with constant loops (default: the first)")
    ap.add_argument("--class", dest="shape_class", choices=list(CLASSES), help="default: long")
    ap.add_argument("--window", choices=sorted(WINDOWS), help="the tuning shape's window (default: the class's)")
    ap.add_argument("--seq-len", type=int, help="the tuning shape's length (default: the class's)")
    ap.add_argument("--heads", type=int, default=HEADS)
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--minutes", type=float, default=15)
    ap.add_argument("--random-trials", type=int, default=None, help="random samples before refining (default: half)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--log")
    ap.add_argument("--write-table", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="start a new log instead of resuming")
    ap.add_argument("--measure", metavar="KNOBS", help="score these knobs (name:value,...) --trials times and "
                    "exit, without searching, logging or writing the table")
    gpu = ap.add_argument_group("GPU families (gpu_sweep.py: compiled here, timed on the GPU)")
    gpu.add_argument("--stage", choices=gpu_sweep.STAGES, help="one stage of the sweep (default: all three in turn)")
    gpu.add_argument("--gpu-minutes", type=float, default=7, help="the sweep's time on the GPU, all classes together "
                     "(default: 7; --trials caps a class's points)")
    gpu.add_argument("--sweep", help="the sweep's folder (default: <build>/autotune-sweep/<family>; --stage run: "
                     "every class prepared in it)")
    gpu.add_argument("--target", help="compile the family's schedules for this Halide target instead of its own "
                     "(the sweep checked on a CPU through OpenCL)")
    return ap.parse_args()


def class_runs(args):
    """One set of arguments per class to tune: the class asked for, or with --all each
    kernel, head dim and class (the shape, the log and a resumed search are each one's).
    A GPU family has the catch-all class alone: the build compiles one GPU variant
    a kernel and head dim (runtime/CMakeLists.txt)."""
    one_class = ("kernel", "head_dim", "shape_class", "window", "seq_len", "log", "measure")
    head_dims = tuned_head_dims(args.build)
    classes = ["long"] if is_gpu(args.family) else list(CLASSES)
    if args.all:
        given = [name for name in one_class if getattr(args, name) is not None]
        if given:
            sys.exit(f"autotune: --all tunes every class; it takes none of {', '.join(given)}")
        return [argparse.Namespace(**dict(vars(args), kernel=k, head_dim=d, shape_class=c))
                for k, d, c in itertools.product(KERNELS, head_dims, classes)]
    if args.shape_class not in (None, *classes):
        sys.exit(f"autotune: the family {args.family} has the classes {', '.join(classes)}")
    if args.head_dim not in (None, *head_dims):
        sys.exit(f"autotune: --head-dim takes the head dims the build compiles with constant loops: {head_dims}")
    return [argparse.Namespace(**dict(vars(args), kernel=args.kernel or KERNELS[0],
                                      head_dim=args.head_dim or head_dims[0], shape_class=args.shape_class or "long"))]


def with_tuning_shape(args):
    """The class's shape and log, unless given; a shape of one's own is for trying
    out, not for the table, whose row names the class it was tuned for."""
    cls = CLASSES[args.shape_class]
    if args.write_table and (args.window or args.seq_len):
        sys.exit(f"autotune: --write-table tunes on the class's own shape (T={cls['seq_len']} {cls['window']}): "
                 "drop --window and --seq-len")
    args.window = args.window or cls["window"]
    args.seq_len = args.seq_len or cls["seq_len"]
    args.name = f"{args.family}-{args.kernel}-d{args.head_dim}-{args.shape_class}"
    args.log = args.log or os.path.join(ROOT, "autotune", "logs", args.name + ".jsonl")
    os.makedirs(os.path.dirname(args.log), exist_ok=True)
    return args


def main():
    args = parse_args()
    if not (args.stage == "run" and args.sweep):  # the run on the GPU machine needs no family (any CPU)
        args.family = args.family or host_best_family()
    if args.stage == "run":  # no build, no Halide
        gpu_sweep.run(gpu_sweep.sweep_folder(args), args.gpu_minutes, sys.modules[__name__])
        return
    if not is_gpu(args.family) and (args.stage or args.sweep or args.target):
        sys.exit("autotune: --stage, --sweep and --target are for GPU families")
    if args.target and args.write_table:
        sys.exit("autotune: --target compiles for another target than the family's: its figures are not the "
                 "family's to write")
    try:
        if is_gpu(args.family):
            if args.measure is not None:
                sys.exit("autotune: --measure times on this machine; a GPU family's points are swept (--stage)")
            runs = [with_tuning_shape(run) for run in class_runs(args)]
            gpu_sweep.main(args, runs, sys.modules[__name__])
            return
        for run in class_runs(args):
            run = with_tuning_shape(run)
            if run.measure is not None:
                measure(run)
            else:
                search(run)
    except tuned_table.TableError as e:
        sys.exit(f"autotune: {e}")


def measure(args):
    with tempfile.TemporaryDirectory(prefix="gka-autotune-") as work:
        trials = Trials(args, work)
        for n in range(args.trials):
            entry = trials.measure(parse_knobs(args.measure))
            shown = f"{entry['speedup']:.3f}x the default ({entry['ms']:.2f} vs {entry['default_ms']:.2f} ms)" \
                if entry["status"] == "ok" else f"{entry['status']} {entry.get('error', '')}"
            print(f"[{n + 1}/{args.trials}] {args.measure or 'defaults'} on T={args.seq_len} {args.window}: {shown}",
                  flush=True)
            if entry["status"] != "ok":
                sys.exit(1)


def search(args):
    """Searches the class's knobs, resuming its log, and with --write-table stores the winner."""
    rules = KnobRules(args)
    space = rules.space
    done = {}
    if args.fresh and os.path.exists(args.log):
        os.remove(args.log)
    fingerprint = class_fingerprint(args)
    if os.path.exists(args.log):
        current = current_entries(args.log, space, fingerprint)
        for entry in current:  # a knob set's later line (its confirmed figure) wins
            done[knob_string(entry["knobs"])] = entry
        older = sum(1 for _ in open(args.log)) - len(current)
        print(f"autotune: resuming from {args.log} ({len(done)} trials measured"
              + (f"; {older} lines of other code or shapes set aside)" if older else ")"))
    rng = random.Random(args.seed)
    everything = [dict(zip(space, values)) for values in itertools.product(*space.values())]
    everything = [k for k in everything if rules.worth_trying(k)]
    rng.shuffle(everything)
    # The table's knobs for this kernel's other classes first (a knob not in a
    # row: its default): often good here too.
    seeds = [dict(rules.defaults, **parse_knobs(r.knobs)) for r in tuned_table.read()
             if (r.family, r.kernel, r.head_dim) == (args.family, "gka_" + args.kernel, args.head_dim)]
    seeds = [k for i, k in enumerate(seeds) if set(k) == set(space) and k not in seeds[:i]]
    everything = seeds + [k for k in everything if k not in seeds]
    n_random = len(seeds) + (args.random_trials if args.random_trials is not None else max(1, args.trials // 2))

    start, deadline = time.time(), time.time() + 60 * args.minutes
    with tempfile.TemporaryDirectory(prefix="gka-autotune-") as work:
        trials = Trials(args, work)
        with open(args.log, "a") as log:
            # The defaults score 1.0 by definition: until a candidate beats them,
            # the refinement explores their neighbours.
            defaults = dict(knobs=rules.defaults, status="ok", speedup=1.0)

            def best():
                ok = [e for e in done.values() if e["status"] == "ok"]
                return max(ok + [defaults], key=lambda e: e["speedup"])

            def candidates():
                # Random samples for at most half the budget (trials or time), then refinement.
                half_time, n = start + (deadline - start) / 2, 0
                for n, knobs in enumerate(everything[:n_random]):
                    if n >= len(seeds) and time.time() > half_time:
                        break
                    yield knobs
                more_random = iter(everything[n:])
                while True:  # refine: neighbours of the best so far
                    b = best()
                    fresh = [k for k in neighbours(b["knobs"], space)
                             if knob_string(k) not in done and rules.worth_trying(k)]
                    if not fresh:  # the best's neighbourhood is measured: another random sample
                        fresh = [next((k for k in more_random if knob_string(k) not in done), None)]
                        if fresh[0] is None:
                            return
                    yield fresh[0]

            count = 0
            for knobs in candidates():
                if count >= args.trials or time.time() > deadline:
                    break
                name = knob_string(knobs)
                if name in done:
                    continue
                count += 1
                entry = dict(knobs=knobs, schedule=fingerprint, **trials.measure(knobs))
                b = best()
                if entry["status"] == "ok" and entry["speedup"] > b["speedup"]:
                    # A new best steers the refinement: a lucky moment must not, so it
                    # is measured again and keeps its slower figure.
                    entry["speedup"] = trials.slowest(knobs, entry["speedup"], 1)
                done[name] = entry
                log.write(json.dumps(entry) + "\n")
                log.flush()
                b = best()
                result = f"{entry['speedup']:.3f}x" if entry["status"] == "ok" else entry["status"]
                print(f"[{count}/{args.trials}] {name}: {result}; best {b['speedup']:.3f}x "
                      f"({knob_string(b['knobs'])}) ; {time.time() - start:.0f} s, "
                      f"{max(0, deadline - time.time()):.0f} s left", flush=True)
        b = best()
        if not any(e["status"] == "ok" for e in done.values()):
            sys.exit("autotune: no candidate passed the reference check")
        print(f"autotune: best for {args.name}: {knob_string(b['knobs'])} at {b['speedup']:.3f}x the default")
        if args.write_table:
            # One lucky run on a shared machine is no win: the best three are measured
            # twice more, each scored by its slowest figure; the default stays unless
            # beaten in all three.
            finalists = sorted((e for e in done.values() if e["status"] == "ok"), key=lambda e: -e["speedup"])[:3]
            with open(args.log, "a") as log:
                for e in finalists:
                    e["confirmed"] = trials.slowest(e["knobs"], e["speedup"], 2)
                    print(f"autotune: {knob_string(e['knobs'])} confirmed at {e['confirmed']:.3f}x "
                          "(the slowest of its search run and two more)", flush=True)
                    # The log keeps the confirmed figure (a later line wins on resume), so
                    # that an outlier does not stay the best that a rerun refines around.
                    log.write(json.dumps(dict(e, speedup=e["confirmed"])) + "\n")
            b = max(finalists, key=lambda e: e["confirmed"])
            if b["confirmed"] > 1.02:
                write_table(args, dict(b, speedup=b["confirmed"]))
            else:
                print("autotune: the default stays (no candidate beat it by 2% in all its runs)")
                write_table(args, None)


if __name__ == "__main__":
    main()
