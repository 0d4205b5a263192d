"""The kernel cache's key (scripts/kernel_cache.py) covers the recipe: a kernel
generated through the cache is the generator's own output (byte for byte), the
same recipe from another clone of the sources hits, and a change to a schedule,
a generator source (once the generator is rebuilt: until then its kernels are
the old sources'), a parameter or the build's recipe file misses.

usage: kernel_cache_test.py GENERATOR SOURCE_DIR RECIPE_FILE SCRATCH
"""
import filecmp
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
LAUNCHER = os.path.join(HERE, "..", "scripts", "kernel_cache.py")


def main(built_generator, sources, recipe, scratch):
    shutil.rmtree(scratch, ignore_errors=True)
    os.makedirs(scratch)
    cache = os.path.join(scratch, "cache")
    failures, checks = [], 0
    # A copy, which the test "rebuilds" (a new mtime) without touching the build's.
    generator = os.path.join(scratch, "bin", "gka.generator")
    os.makedirs(os.path.dirname(generator))
    shutil.copy2(built_generator, generator)

    def generate(label, source_root=sources, recipe_file=recipe, knobs=None, cache_on=True):
        out = os.path.join(scratch, label)
        os.makedirs(out)
        name = "cache_probe"
        # As the build runs it: in the kernel's folder, "-o ." (the header's
        # include guard is named after the output path).
        command = [generator, "-n", name, "-g", "gka_decode", "-f", name, "-e", "c_header,object", "-o", ".",
                   "target=x86-64-linux-sse41-no_runtime", "head_dim=0", "scores=direct"]
        if knobs:
            command.append(f"knobs={knobs}")
        env = dict(os.environ, GKA_KERNEL_CACHE=cache if cache_on else "off")
        run = subprocess.run([sys.executable, LAUNCHER, "--sources", source_root, "--recipe", recipe_file, "--",
                              *command], env=env, cwd=out, capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"FAIL: {label}: exit {run.returncode}\n{run.stdout}{run.stderr}")
        return out, "kernel cache: hit" in run.stdout

    def expect(label, hit, want):
        nonlocal checks
        checks += 1
        ok = hit == want
        print(f"{'ok' if ok else 'FAIL'}: {label}: {'hit' if hit else 'miss'}")
        if not ok:
            failures.append(label)

    first, hit = generate("first")
    expect("an empty cache", hit, False)
    again, hit = generate("again")
    expect("the same recipe again", hit, True)
    fresh, _ = generate("fresh", cache_on=False)
    for f in ("cache_probe.h", "cache_probe.o"):
        checks += 1
        same = filecmp.cmp(os.path.join(again, f), os.path.join(fresh, f), shallow=False)
        print(f"{'ok' if same else 'FAIL'}: {f} from the cache is the generator's own output")
        if not same:
            failures.append(f)

    clone = os.path.join(scratch, "another_clone")
    for folder in ("generators", "schedules", "kernels"):
        shutil.copytree(os.path.join(sources, folder), os.path.join(clone, folder))
    _, hit = generate("clone", source_root=clone)
    expect("the same sources in another clone", hit, True)

    _, hit = generate("knobs", knobs="chunk:512")
    expect("another parameter", hit, False)

    other_recipe = os.path.join(scratch, "recipe.txt")
    with open(recipe) as f, open(other_recipe, "w") as g:
        g.write(f.read() + "compiler another\n")
    _, hit = generate("recipe", recipe_file=other_recipe)
    expect("another compiler or Halide (the recipe file)", hit, False)

    for changed in ("schedules/decode_cpu.cpp", "generators/gka_decode.h"):
        with open(os.path.join(clone, changed), "a") as f:
            f.write("\n// a change\n")
        _, hit = generate("edited_" + os.path.basename(changed), source_root=clone)
        expect(f"{changed} edited while the generator is the one built before (a build in progress)", hit, True)
        stat = os.stat(generator)
        os.utime(generator, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # as a rebuild leaves it
        _, hit = generate("changed_" + os.path.basename(changed), source_root=clone)
        expect(f"a changed {changed}, the generator rebuilt", hit, False)

    print(f"{checks - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    sys.exit(main(*(os.path.abspath(a) for a in sys.argv[1:])))
