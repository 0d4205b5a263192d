"""A GPU family's knob search: compiled where the build is, timed where the GPU is.

The CPU search (gka_autotune.py) compiles each candidate from what the last ones
measured. A GPU machine may have the driver and no Halide, so a GPU family's
search is a sweep of points chosen ahead, in three stages:

  prepare  (with the build) for each class: the points (the table's rows for the
           kernel, from schedules/tuned.tsv and schedules/cuda_candidates.tsv,
           then the defaults' and those rows' neighbours, then random knob sets
           the generator takes, up to --trials), each compiled; a point that
           spills registers in any kernel its row would compile into (ptxas at
           the family's capability and libgka's cap) is dropped, since
           libgka's guards allow no spills. All are linked
           into one program beside the default-knob kernel (autotune/harness.cpp
           built with GKA_SWEEP): <sweep>/<class>/.
  run      (on the GPU: Python's standard library and the sweep folder alone)
           checks each point against the double reference and times it
           interleaved with the defaults, as the CPU's harness does, then the
           best three twice more; --gpu-minutes for all classes together.
  import   (with the build) each class's results into its log and, with
           --write-table, its best into schedules/tuned.tsv by the CPU search's
           rule (the slowest of its runs beats the defaults by 2%), naming the
           GPU. The sweep must be of this build's code (the schedule fingerprint).

Without --stage the three run in turn, for a machine with both.
"""
import glob
import itertools
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

import tuned_table

STAGES = ("prepare", "run", "import")
CANDIDATES = os.path.join(tuned_table.ROOT, "schedules", "cuda_candidates.tsv")
PTXAS = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
# libgka's register cap for the CUDA JIT (runtime/cuda_driver.cpp).
REGISTER_CAP = 255
# The share of a class's time for its sweep; the rest confirms the best three.
SWEEP_SHARE = 0.7
FINALISTS, CONFIRMATIONS = 3, 2


def sweep_folder(args):
    return args.sweep or os.path.join(args.build, "autotune-sweep", args.family)


def main(args, runs, tuner):
    sweep = sweep_folder(args)
    if args.stage in (None, "prepare"):
        for r in runs:
            prepare(r, os.path.join(sweep, r.name), tuner)
    if args.stage is None:
        run(sweep, args.gpu_minutes, tuner, [r.name for r in runs])
    if args.stage in (None, "import"):
        for r in runs:
            import_results(r, os.path.join(sweep, r.name), tuner)


def points(args, rules, tuner):
    """The knob sets to sweep, best guesses first, the defaults (the baseline) left out."""
    space, defaults = rules.space, rules.defaults
    rows = tuned_table.read() + tuned_table.read(merge=CANDIDATES)
    seeds = [dict(defaults, **tuner.parse_knobs(r.knobs)) for r in rows
             if (r.family, r.kernel, r.head_dim) == (args.family, "gka_" + args.kernel, args.head_dim)]
    seeds = [k for k in seeds if set(k) == set(space)]
    everything = [dict(zip(space, values)) for values in itertools.product(*space.values())]
    random.Random(args.seed).shuffle(everything)
    order = seeds + [n for k in [defaults] + seeds for n in tuner.neighbours(k, space)] + everything
    chosen, seen = [], {tuner.knob_string(defaults)}
    for knobs in order:
        name = tuner.knob_string(knobs)
        if name not in seen and rules.worth_trying(knobs):
            chosen.append(knobs)
            if len(chosen) == args.trials:
                break
        seen.add(name)
    return chosen


def kernel_functions():
    """The kernel functions, the Gaussian first (generators/kernel_function.h, their one list)."""
    with open(os.path.join(tuned_table.ROOT, "generators", "kernel_function.h")) as f:
        line = next(line for line in f if "kernel_function_names[] = " in line)
    return re.findall(r'"([a-z0-9_]+)"', line)


def spills(trials, name, knobs):
    """Why ptxas finds that a kernel the knobs would compile into spills ("" if
    none; None where ptxas cannot be asked): the timed one (work/name, emitted
    with its stmt), then those that take the same row of the table (the chunk
    pass, the other kernel functions), whose pair terms hold more registers."""
    capability = re.search(r"cuda_capability_([0-9]+)", trials.target)
    if not capability or not os.path.exists(PTXAS):
        return None
    variants = [[f"kernel_function={f}", f"chunk={chunk}"] for f in kernel_functions() for chunk in ("false", "true")]
    for n, extra in enumerate(variants):
        stmt_name = name if n == 0 else f"{name}_variant"
        if n > 0 and trials.generate(stmt_name, knobs, emit=("stmt",), extra=extra) is None:
            return f"{' '.join(extra)}: {trials.generator_error}"
        r = subprocess.run([sys.executable, os.path.join(tuned_table.ROOT, "scripts", "cuda_ptxas_report.py"),
                            "--ptxas", PTXAS, "--arch", "sm_" + capability.group(1), "--maxrregcount",
                            str(REGISTER_CAP), "--no-spills", os.path.join(trials.work, stmt_name, stmt_name + ".stmt")],
                           capture_output=True, text=True)
        if r.returncode:
            return f"{' '.join(extra)}: " + (r.stdout + r.stderr).strip().splitlines()[-1]
    return ""


def prepare(args, folder, tuner):
    rules = tuner.KnobRules(args)
    chosen = points(args, rules, tuner)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    print(f"autotune: {args.name}: compiling {len(chosen)} points", flush=True)
    with tempfile.TemporaryDirectory(prefix="gka-sweep-") as work:
        trials = tuner.Trials(args, work, sweep=True)
        entries, libraries, unchecked = [], [], False
        for knobs in chosen:
            name = f"point_{len(libraries)}"
            lib = trials.generate(name, tuner.knob_string(knobs), emit=("static_library", "h", "stmt"))
            entry = dict(knobs=knobs)
            why = None if lib is None else spills(trials, name, tuner.knob_string(knobs))
            if lib is None:
                entry.update(status="invalid", error=trials.generator_error)
            elif why:
                entry.update(status="spills", error=why)
            else:
                unchecked |= why is None
                entry.update(status="ready", point=len(libraries))
                libraries.append(lib)
            entries.append(entry)
            print(f"  {tuner.knob_string(knobs)}: {entry['status']}", flush=True)
        if not libraries:
            sys.exit(f"autotune: {args.name}: no point compiled")
        if unchecked:
            print(f"autotune: no ptxas at {PTXAS} or no CUDA target: the points' spills are not checked", flush=True)
        with open(os.path.join(work, "points.h"), "w") as f:
            f.write('#include "baseline.h"\n')
            f.writelines(f'extern "C" decltype(baseline) point_{i};\n' for i in range(len(libraries)))
            f.write("decltype(&baseline) const kPoints[] = {"
                    + ", ".join(f"point_{i}" for i in range(len(libraries))) + "};\n")
        trials.compile("autotune/harness.cpp", "harness.o", ["-DGKA_SWEEP"])
        r = trials.run(["g++", "-s"] + trials.objects() + libraries + [trials.baseline] + trials.inputs +
                       [os.path.join(work, "runtime.a"), "-lpthread", "-ldl", "-o", os.path.join(folder, "sweep")])
        if r.returncode:
            sys.exit(f"autotune: {args.name}: cannot link the sweep:\n" + r.stderr[-2000:])
    with open(os.path.join(folder, "class.json"), "w") as f:
        json.dump(dict(name=args.name, schedule=tuner.class_fingerprint(args), command=tuner.harness_command(args),
                       target=trials.target), f)
    with open(os.path.join(folder, "points.jsonl"), "w") as f:
        f.writelines(json.dumps(e) + "\n" for e in entries)
    print(f"autotune: {args.name}: {len(libraries)} points in {os.path.join(folder, 'sweep')}", flush=True)


def device_name():
    """The GPU the figures come from, as nvidia-smi names it (with its driver)."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        first = r.stdout.strip().splitlines()[0] if r.returncode == 0 and r.stdout.strip() else ""
    except (OSError, subprocess.TimeoutExpired):
        first = ""
    if not first:
        return "a device nvidia-smi does not name"
    name, _, driver = first.partition(", ")
    return f"{name} (driver {driver})" if driver else name


def measure(folder, command, point, seconds_left, tuner):
    """One run of one point: the harness's verdict as a log entry."""
    try:
        r = subprocess.run([os.path.join(folder, "sweep"), str(point)] + command, capture_output=True, text=True,
                           timeout=max(10, min(120, seconds_left)))
    except subprocess.TimeoutExpired:
        return dict(status="timed out")
    return tuner.harness_verdict(r)


def run(sweep, minutes, tuner, names=None):
    """Times the prepared classes' points (those of `names`, else every class
    in `sweep`) within `minutes` in all (a class's unspent share goes to the
    next); writes <class>/results.jsonl."""
    folders = sorted(os.path.dirname(p) for p in glob.glob(os.path.join(sweep, "*", "class.json")))
    folders = [f for f in folders if names is None or os.path.basename(f) in names]
    if not folders:
        sys.exit(f"autotune: no prepared sweep under {sweep} (--stage prepare)")
    device, start, deadline = device_name(), time.time(), time.time() + 60 * minutes
    print(f"autotune: sweeping {len(folders)} classes on {device}, {minutes:g} minutes", flush=True)
    for n, folder in enumerate(folders):
        meta = json.load(open(os.path.join(folder, "class.json")))
        ready = [json.loads(line) for line in open(os.path.join(folder, "points.jsonl"))]
        ready = [e for e in ready if e["status"] == "ready"]
        class_end = time.time() + (deadline - time.time()) / (len(folders) - n)
        sweep_end = time.time() + SWEEP_SHARE * (class_end - time.time())
        results = []
        with open(os.path.join(folder, "results.jsonl"), "w") as out:
            def measure_and_record(point, stage):
                """One run of a point (its points.jsonl entry), into the results."""
                entry = measure(folder, meta["command"], point["point"], class_end - time.time(), tuner)
                results.append(dict(point, stage=stage, device=device, **entry))
                out.write(json.dumps(results[-1]) + "\n")
                out.flush()
                shown = f"{entry['speedup']:.3f}x" if entry["status"] == "ok" else entry["status"]
                print(f"  {meta['name']} [{stage}] {tuner.knob_string(point['knobs'])}: {shown}; "
                      f"{time.time() - start:.0f} s", flush=True)

            for point in ready:
                if time.time() > sweep_end:
                    print(f"  {meta['name']}: out of time after {len(results)} of {len(ready)} points", flush=True)
                    break
                measure_and_record(point, "sweep")
            finalists = sorted((r for r in results if r["status"] == "ok"), key=lambda r: -r["speedup"])[:FINALISTS]
            for r in finalists:
                for _ in range(CONFIRMATIONS):
                    if time.time() > class_end:
                        break
                    measure_and_record(next(p for p in ready if p["point"] == r["point"]), "confirm")


def import_results(args, folder, tuner):
    """A class's results into its log; with --write-table, its best into the table."""
    path = os.path.join(folder, "results.jsonl")
    if not os.path.exists(path):
        sys.exit(f"autotune: {args.name}: no results at {path} (--stage run, on the GPU)")
    meta = json.load(open(os.path.join(folder, "class.json")))
    fingerprint = tuner.class_fingerprint(args)
    if meta["schedule"] != fingerprint:
        sys.exit(f"autotune: {args.name}: the sweep in {folder} was compiled from other code or for another shape "
                 f"(schedule {meta['schedule']}, this build's {fingerprint}): prepare and run it again")
    results = [json.loads(line) for line in open(path)]
    by_knobs = {}
    for r in results:
        by_knobs.setdefault(tuner.knob_string(r["knobs"]), []).append(r)
    entries = []
    for runs in by_knobs.values():
        ok = [r for r in runs if r["status"] == "ok"]
        entry = dict(runs[0], schedule=fingerprint)
        if len(ok) == len(runs):
            # Scored by its slowest run, as the CPU search confirms its finalists.
            entry.update(min(ok, key=lambda r: r["speedup"]))
        else:
            entry.update(next(r for r in runs if r["status"] != "ok"))
        entry["runs"] = len(runs)
        for key in ("stage", "point"):
            entry.pop(key)
        entries.append(entry)
    with open(args.log, "a") as log:
        log.writelines(json.dumps(e) + "\n" for e in entries)
    confirmed = [e for e in entries if e["status"] == "ok" and e["runs"] > 1]
    failed = [e for e in entries if e["status"] != "ok"]
    best = max(confirmed, key=lambda e: e["speedup"], default=None)
    print(f"autotune: {args.name}: {len(entries)} points measured on {results[0]['device']}, {len(failed)} failed"
          + "".join(f"\n  {tuner.knob_string(e['knobs'])}: {e['status']} {e.get('error', '')}" for e in failed))
    if best is None:
        sys.exit(f"autotune: {args.name}: no point passed the reference check and its confirmations")
    print(f"autotune: best for {args.name}: {tuner.knob_string(best['knobs'])} at {best['speedup']:.3f}x the default "
          "(the slowest of its runs)")
    if args.write_table:
        winner = best if best["speedup"] > 1.02 else None
        if winner is None:
            print("autotune: the default stays (no point beat it by 2% in all its runs)")
        tuner.write_table(args, winner, measured_on=f"{results[0]['device']} (gpu_sweep.py)")
