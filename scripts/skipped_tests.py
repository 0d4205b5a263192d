"""Lists the tests the last CTest run skipped, each with the reason it printed.

CTest shows a skipped test (exit 77) as "Skipped" without its output; every
skipping test here prints one line starting "SKIP:" or "SKIPPED:" first, which
this finds in build/Testing/Temporary/LastTest.log.
    skipped_tests.py BUILD_DIR
"""
import pathlib
import re
import sys


def skipped(log: str):
    """(test name, reason) for each test whose output holds a SKIP line, unless
    it passes by that output (PASS_REGULAR_EXPRESSION: the stub-driver tests).
    (The log says "Test Passed." of skipped tests too.)"""
    for block in re.split(r"\n(?=\d+/\d+ Testing: )", log):
        name = re.match(r"\d+/\d+ Testing: (.*)", block.strip())
        reason = re.search(r"^(?:SKIP|SKIPPED): (.*)$", block, re.MULTILINE)
        passed = "Required regular expression found" in block
        if name and reason and not passed:
            yield name.group(1), reason.group(1)


def main() -> int:
    log = pathlib.Path(sys.argv[1]) / "Testing" / "Temporary" / "LastTest.log"
    if not log.exists():
        return 0
    found = list(skipped(log.read_text(errors="replace")))
    if found:
        print(f"Skipped, and why ({len(found)}):")
        for name, reason in found:
            print(f"  {name}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
