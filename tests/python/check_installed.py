"""make install's layout for gka_torch: installs the build into a scratch prefix and
checks that the installed package loads the installed libgka, found relative to
itself (no GKA_LIBRARY, no LD_LIBRARY_PATH). The loader needs no torch, so this
runs everywhere; where this Python has torch, a call through the installed
package runs too, and where it has not, importing gka_torch must fail with a
message that says how to install torch.

Usage: check_installed.py BUILD_DIR CMAKE PYTHON_INSTALL_DIR (relative to the prefix)
"""
import importlib.util
import os
import subprocess
import sys
import tempfile


def main(build, cmake, python_dir):
    with tempfile.TemporaryDirectory() as scratch:
        prefix = os.path.join(scratch, "prefix")
        # By component: each writes its own install_manifest_<component>.txt, so
        # this never races gka.install_and_consume's install_manifest.txt.
        for component in ("Unspecified", "gka_torch"):
            subprocess.run([cmake, "--install", build, "--prefix", prefix, "--component", component], check=True,
                           stdout=subprocess.DEVNULL)
        site = os.path.join(prefix, python_dir)
        package = os.path.join(site, "gka_torch")
        for name in ("__init__.py", "_lib.py", "_ops.py", "reference.py", "_libgka_location"):
            if not os.path.isfile(os.path.join(package, name)):
                sys.exit(f"FAIL: {name} is not installed in {package}")

        env = {k: v for k, v in os.environ.items() if k not in ("GKA_LIBRARY", "LD_LIBRARY_PATH", "PYTHONPATH")}
        os.environ.clear()
        os.environ.update(env)
        spec = importlib.util.spec_from_file_location("installed_gka_torch_lib", os.path.join(package, "_lib.py"))
        lib_module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(lib_module)
        lib, path = lib_module.load()
        if not os.path.realpath(path).startswith(os.path.realpath(prefix) + os.sep):
            sys.exit(f"FAIL: the installed gka_torch loaded {path}, not the libgka installed in {prefix}")
        print(f"installed gka_torch loads {os.path.relpath(path, prefix)} (CPU family {lib.gka_cpu_family().decode()})")

        env["PYTHONPATH"] = site
        has_torch = importlib.util.find_spec("torch") is not None
        if has_torch:
            code = ("import torch, gka_torch\n"
                    "y = gka_torch.gka_attention(torch.ones(1, 3, 2, 4), torch.ones(2))\n"
                    "assert torch.allclose(y, torch.ones(1, 3, 2, 4)), y\n"
                    "print('a call through the installed gka_torch OK:', gka_torch.library_path)\n")
            subprocess.run([sys.executable, "-c", code], env=env, cwd=scratch, check=True)
        else:
            r = subprocess.run([sys.executable, "-c", "import gka_torch"], env=env, cwd=scratch,
                               capture_output=True, text=True)
            if r.returncode == 0 or "pip install torch" not in r.stderr:
                sys.exit(f"FAIL: without torch, import gka_torch should say how to install it; got:\n{r.stderr}")
            print("no torch in this Python: import gka_torch says how to install it (the torch call is not run)")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
