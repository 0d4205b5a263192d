#!/usr/bin/env python3
"""autotune/tuned_table.py, the one reader of schedules/tuned.tsv: its shape
classes as numbers, knobs_from, the rows it refuses (and how CMake hears of
them), and the tuner's writes. On small tables of its own, not the project's."""
import os
import subprocess
import sys
import tempfile
import unittest

READER = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "autotune", "tuned_table.py")
sys.path.insert(0, os.path.dirname(READER))
import tuned_table  # noqa: E402
from tuned_table import Row, TableError  # noqa: E402

FAMILIES = """# a comment
family\thalide_target\thost_features\tkind\tbf16_products\tknobs_from
big\tx86-64-linux-big\tf\tcpu\tno\t-
copy\tx86-64-linux-copy\tf\tcpu\tyes\tbig
own\tx86-64-linux-own\tf\tcpu\tno\tbig
small\tx86-64-linux-small\tf\tcpu\tno\t-
"""
TABLE = """# family\tkernel\thead_dim\twindow\tseq_len\tknobs\tspeedup\ttuned_on
big\tgka_forward\t64\tany\tany\tband:96\t1.1\tT=4096

big\tgka_forward\tany\tglobal\t1-2048\tdefaults\t1.0\tT=1024
big\tgka_backward\t128\tsliding\t2049-\tband:16,key_tile:4\t1.2\tT=4096
own\tgka_forward\t64\tany\tany\tband:32\t1.0\tT=4096
"""


class Tables(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.families = self.write("families.tsv", FAMILIES)
        self.table = self.write("tuned.tsv", TABLE)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, name, text):
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def read(self, extra_rows=""):
        with open(self.table, "a") as f:
            f.write(extra_rows)
        return tuned_table.read(self.table, self.families)

    def test_classes_as_numbers(self):
        rows = self.read()
        self.assertEqual(rows[:3], [Row("big", "gka_forward", 64, "any", 1, 0, "band:96"),
                                    Row("big", "gka_forward", 0, "global", 1, 2048, ""),
                                    Row("big", "gka_backward", 128, "sliding", 2049, 0, "band:16,key_tile:4")])

    def test_knobs_from_serves_a_family_without_rows_of_its_own(self):
        by_family = {}
        for r in self.read():
            by_family.setdefault(r.family, []).append(r)
        self.assertEqual(by_family["copy"], [r._replace(family="copy") for r in by_family["big"]])
        self.assertEqual([r.knobs for r in by_family["own"]], ["band:32"])  # its own rows alone
        self.assertNotIn("small", by_family)

    def test_bad_rows_are_refused_with_their_line(self):
        bad = {"big\tgka_forward\t64\tany\tany": "a row needs family, kernel",
               "big\tgka_forward\t64\tdiagonal\tany\tk:1": "window must be any|global|sliding",
               "big\tgka_forward\t64\tany\t2048\tk:1": "seq_len any|lo-|lo-hi",
               "big\tgka_forward\t64\tany\t5-3\tk:1": "no range of lengths",
               "big\tgka_forward\t64\tany\t0-8\tk:1": "no range of lengths",
               "big\tgka_forward\t64\tglobal\t1-\tk:1": "1- is every length",
               "big\tgka_forward\tsixty\tany\tany\tk:1": "head_dim must be any or a number",
               "huge\tgka_forward\t64\tany\tany\tk:1": "huge is no family",
               "big\tgka_forward\t64\tany\tany\tk:2": "a second row for the same shape class"}
        for row, why in bad.items():
            with self.subTest(row=row):
                self.table = self.write("tuned.tsv", TABLE)
                with self.assertRaisesRegex(TableError, f"tuned.tsv:7: .*{why}"):
                    self.read(row + "\n")

    def test_cmake_gets_the_resolved_table_or_the_reason(self):
        resolved = os.path.join(self.dir.name, "resolved.tsv")
        run = [sys.executable, READER, "--families", self.families, "--table", self.table, "--resolve", resolved]
        subprocess.run(run, check=True)
        with open(resolved) as f:
            lines = [line for line in f if not line.startswith("#")]
        self.assertEqual(lines[1], "big\tgka_forward\t0\tglobal\t1\t2048\t\n")
        self.assertEqual(len(lines), 7)  # the table's 4 rows and copy's 3
        self.write("tuned.tsv", TABLE + "big\tgka_forward\t64\tdiagonal\tany\tk:1\n")
        r = subprocess.run(run, capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("tuned.tsv:7: window must be", r.stderr)

    def test_a_merged_table_replaces_its_classes_rows(self):
        merge = self.write("candidates.tsv", "# candidates\nbig\tgka_forward\t64\tany\tany\tband:64\t-\tnot run\n"
                                             "small\tgka_forward\t128\tany\tany\tband:32\t-\tnot run\n")
        rows = tuned_table.read(self.table, self.families, merge)
        big = [r for r in rows if r.family == "big" and r.kernel == "gka_forward" and r.head_dim == 64]
        self.assertEqual([r.knobs for r in big], ["band:64"])  # replaced, not added beside
        self.assertIn(Row("small", "gka_forward", 128, "any", 1, 0, "band:32"), rows)
        self.assertIn(Row("big", "gka_forward", 0, "global", 1, 2048, ""), rows)  # the others kept
        self.write("candidates.tsv", "big\tgka_forward\t64\tdiagonal\tany\tk:1\n")
        with self.assertRaisesRegex(TableError, "candidates.tsv:1: window must be"):
            tuned_table.read(self.table, self.families, merge)

    def test_the_tuner_replaces_its_class_row(self):
        store = lambda key, rest: tuned_table.store(key, rest, self.table, self.families)  # noqa: E731
        store(["big", "gka_forward", "64", "any", "any"], ["band:48", "1.3", "T=4096"])
        store(["small", "gka_forward", "64", "sliding", "any"], ["defaults", "1.000", "T=4096"])
        store(["own", "gka_forward", "64", "any", "any"], None)
        with self.assertRaisesRegex(TableError, "window must be"):
            store(["small", "gka_forward", "64", "diagonal", "any"], ["k:1", "1.0", "T=1"])
        with open(self.table) as f:
            lines = f.read().splitlines()
        self.assertTrue(lines[0].startswith("# family"))
        self.assertEqual([line.split("\t")[:6] for line in lines[1:]],
                         [["big", "gka_backward", "128", "sliding", "2049-", "band:16,key_tile:4"],
                          ["big", "gka_forward", "64", "any", "any", "band:48"],
                          ["big", "gka_forward", "any", "global", "1-2048", "defaults"],
                          ["small", "gka_forward", "64", "sliding", "any", "defaults"]])


if __name__ == "__main__":
    unittest.main()
