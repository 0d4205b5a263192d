#!/usr/bin/env python3
"""A content-addressed cache of generated kernels, like ccache for the generator.

The build runs every custom command through this launcher (CMake's
RULE_LAUNCH_CUSTOM, cmake/GkaKernels.cmake). A command that runs gka.generator
for one kernel (-g GENERATOR -f FUNCTION -e EMITS -o DIR) is looked up by its
recipe: the sources the generator is built from (every file of generators/,
schedules/ and kernels/ but the tables, whose knobs reach the generator as its
parameters, read once per generator binary: see source_digests), the build's
recipe file (Halide's version and library, the
compiler and its flags: written at configure time), and the command's
arguments (the target, the parameters, the names, the output folder: the
generator names the header's include guard after it, and the build runs it in
the kernel's folder as "-o .", the same in every clone). A hit
copies the stored files into DIR; a miss runs the command and stores what it
wrote. Any other command runs as it is.

The cache is shared by every build folder and clone on the machine:
GKA_KERNEL_CACHE names its folder (default ~/.cache/gka/kernels, or
$XDG_CACHE_HOME/gka/kernels); GKA_KERNEL_CACHE=off runs every command. A
stored entry is never changed: one recipe, one set of files.

usage: kernel_cache.py --sources SRC --recipe FILE -- COMMAND...
"""
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

FORMAT = "gka-kernel-cache-1"
SOURCE_FOLDERS = ("generators", "schedules", "kernels")
SOURCE_SUFFIXES = (".h", ".cpp", ".txt")
# What each of the generator's emit options writes (Halide's Generator -e names).
EMIT_SUFFIXES = {"c_header": ".h", "object": ".o", "assembly": ".s", "stmt": ".stmt", "static_library": ".a"}


def cache_folder():
    where = os.environ.get("GKA_KERNEL_CACHE")
    if where is not None:
        return None if where.lower() in ("off", "0", "") else where
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "gka", "kernels")


def kernel_command(command):
    """(output folder, [file names], [its arguments]) of a generator run for one
    kernel, or None for any other command."""
    if not command or os.path.basename(command[0]) != "gka.generator":
        return None
    args = command[1:]
    flags = {args[i]: args[i + 1] for i in range(len(args) - 1) if args[i].startswith("-")}
    if not {"-g", "-f", "-e", "-o"} <= flags.keys():
        return None
    emits = flags["-e"].split(",")
    if any(e not in EMIT_SUFFIXES for e in emits):
        return None
    name = flags.get("-n", flags["-f"])
    return flags["-o"], [name + EMIT_SUFFIXES[e] for e in emits], args


def source_files(root):
    for folder in SOURCE_FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
            dirnames.sort()
            for f in sorted(filenames):
                if f.endswith(SOURCE_SUFFIXES):
                    yield os.path.join(dirpath, f)


def read_digests(root):
    digests = []
    for path in source_files(root):
        with open(path, "rb") as f:
            digests.append((os.path.relpath(path, root), hashlib.sha256(f.read()).hexdigest()))
    return digests


def source_digests(root, generator):
    """[(path, sha256)] of the sources as they were when `generator` was built.
    Read from the sources by the first kernel command after each build of the
    generator and kept beside it (a stamp per source folder, naming the binary's
    size and mtime), so that a source edited while the build generates kernels
    does not file the old generator's kernels under the new sources' key."""
    binary = os.stat(generator)
    identity = f"{FORMAT} {binary.st_size} {binary.st_mtime_ns} {os.path.abspath(root)}"
    stamp = f"{generator}.sources-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"
    try:
        with open(stamp) as f:
            lines = f.read().splitlines()
        if lines and lines[0] == identity:
            return [tuple(line.split("\t")) for line in lines[1:]]
    except OSError:
        pass
    digests = read_digests(root)
    try:
        with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(stamp) or ".", delete=False) as f:
            f.write("\n".join([identity] + ["\t".join(d) for d in digests]) + "\n")
        os.replace(f.name, stamp)  # atomic: another command reads a whole stamp or none
    except OSError as e:  # without a stamp each command reads the sources itself
        print(f"kernel cache: no source stamp ({e})", file=sys.stderr)
    return digests


def recipe_key(digests, recipe_file, recipe_args):
    h = hashlib.sha256(FORMAT.encode())
    for path, digest in digests:
        h.update(b"\0file\0" + path.encode() + b"\0")
        h.update(bytes.fromhex(digest))
    with open(recipe_file, "rb") as f:
        h.update(b"\0recipe\0" + f.read())
    h.update(b"\0args\0" + "\0".join(recipe_args).encode())
    return h.hexdigest()


def run_cached(root, recipe_file, command):
    parsed = kernel_command(command)
    cache = cache_folder()
    if parsed is None or cache is None:
        return subprocess.call(command)
    out, files, recipe_args = parsed
    key = recipe_key(source_digests(root, command[0]), recipe_file, recipe_args)
    entry = os.path.join(cache, key[:2], key)
    if all(os.path.isfile(os.path.join(entry, f)) for f in files):
        for f in files:
            target = os.path.join(out, f)
            shutil.copyfile(os.path.join(entry, f), target + ".tmp")
            os.replace(target + ".tmp", target)  # a fresh mtime: ninja sees it written
        print(f"kernel cache: hit {files[0].rsplit('.', 1)[0]} ({key[:12]})", flush=True)
        return 0
    status = subprocess.call(command)
    if status != 0 or not all(os.path.isfile(os.path.join(out, f)) for f in files):
        return status
    try:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        staging = tempfile.mkdtemp(prefix=key[:12] + ".", dir=os.path.dirname(entry))
        for f in files:
            shutil.copyfile(os.path.join(out, f), os.path.join(staging, f))
        try:
            os.rename(staging, entry)  # atomic: a reader sees a whole entry or none
        except OSError:  # stored meanwhile by another build: keep that one
            shutil.rmtree(staging, ignore_errors=True)
    except OSError as e:  # a cache that cannot be written costs its speed, not the build
        print(f"kernel cache: not stored ({e})", file=sys.stderr)
    return 0


def main(argv):
    try:
        split = argv.index("--")
        options, command = argv[:split], argv[split + 1:]
        root = options[options.index("--sources") + 1]
        recipe_file = options[options.index("--recipe") + 1]
    except (ValueError, IndexError):
        print(__doc__, file=sys.stderr)
        return 2
    return run_cached(root, recipe_file, command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
