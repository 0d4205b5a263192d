"""Runs the Python examples of docs/pytorch.md that are marked to run
(`<!-- run: tests/python/test_docs.py -->` on the line before the block), each
as written, in a fresh interpreter: an example a user pastes must work.

Run: GKA_LIBRARY=build/runtime/libgka.so PYTHONPATH=python python tests/python/test_docs.py
(CTest: gka.torch.docs). Without PyTorch it prints SKIPPED and exits 77.
"""
import os
import re
import subprocess
import sys

MARK = "<!-- run: tests/python/test_docs.py -->"
DOC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs", "pytorch.md")


def marked_blocks(text):
    return re.findall(re.escape(MARK) + r"\n```python\n(.*?)\n```", text, flags=re.S)


def main():
    try:
        import torch  # noqa: F401
    except ImportError:
        print(f"SKIPPED: torch is not installed in {sys.executable} (bash scripts/setup.sh torch)")
        return 77
    with open(DOC) as f:
        text = f.read()
    blocks = marked_blocks(text)
    if len(blocks) != text.count(MARK):
        print(f"FAIL: {DOC}: a run mark not followed by a ```python block")
        return 1
    failed = 0
    for i, block in enumerate(blocks):
        first = block.splitlines()[0] if block else ""
        run = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True)
        print(f"--- docs/pytorch.md example {i + 1} of {len(blocks)} ({first}): exit {run.returncode}")
        print(run.stdout + run.stderr)
        failed += run.returncode != 0
    print(f"{len(blocks) - failed} passed, {failed} failed")
    return 1 if failed or not blocks else 0


if __name__ == "__main__":
    sys.exit(main())
