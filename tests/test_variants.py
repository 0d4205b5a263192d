"""kernels/variants.py, the table of the kernel variants: what every family has,
what a selection (GKA_SELECT) keeps, and the refusals.

usage: test_variants.py TUNED_RESOLVED (the build's tuned_resolved.tsv)
"""
import collections
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SCRIPT = os.path.join(ROOT, "kernels", "variants.py")
FAMILIES = os.path.join(ROOT, "cmake", "families.tsv")
FUNCTIONS = "gaussian,laplace,cauchy"
TUNED = None


def table(families, select=""):
    """(exit status, rows as dicts, stderr) of variants.py."""
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "variants.tsv")
        run = subprocess.run([sys.executable, SCRIPT, "--families", FAMILIES, "--build-families", families,
                              "--functions", FUNCTIONS, "--tuned", TUNED, "--select", select, "--out", out],
                             capture_output=True, text=True)
        if run.returncode:
            return run.returncode, [], run.stderr
        with open(out) as f:
            lines = [line.rstrip("\n").split("\t") for line in f if not line.startswith("#")]
    return 0, [dict(zip(lines[0], r)) for r in lines[1:]], run.stderr


class Variants(unittest.TestCase):
    def test_every_family(self):
        status, rows, why = table("zen4,avx512,avx2,generic,cuda86,cuda")
        self.assertEqual(status, 0, why)
        names = [r["name"] for r in rows]
        self.assertEqual(len(names), len(set(names)))
        self.assertEqual(len(rows), 587)  # x86-64's families: the count docs/design.md quotes
        by = collections.Counter((r["device"], r["function"]) for r in rows)
        self.assertEqual(by[("cuda", "laplace")], by[("cuda", "cauchy")])
        # The expansions are the Gaussian's on the CPU alone; the origin form the
        # forward's, and the bfloat16 backward's of a family with bfloat16 products.
        for r in rows:
            if r["scores"] != "direct":
                self.assertEqual((r["device"], r["function"]), ("cpu", "gaussian"), r["name"])
            if r["scores"] == "origin" and r["pass"] != "forward":
                self.assertEqual((r["pass"], r["element"], r["family"]), ("backward", "bfloat16", "zen4"), r["name"])
        # Random-feature GKA: one kernel a pass and CPU family, any D, float32.
        features = [(r["family"], r["pass"]) for r in rows if r["pass"].startswith("rf_")]
        self.assertEqual(sorted(features), sorted((f, p) for f in ("zen4", "avx512", "avx2", "generic")
                                                  for p in ("rf_states", "rf_forward", "rf_backward")))
        for r in rows:
            if r["pass"].startswith("rf_"):
                self.assertEqual((r["head_dim"], r["element"], r["function"]), ("0", "float32", "gaussian"))
                self.assertEqual(r["name"], f"gka_{r['pass']}_{r['family']}_any")
        # A family whose bfloat16 kernels multiply in bfloat16 (families.tsv) says so to its generator.
        params = {r["name"]: r["params"] for r in rows}
        for name in ("gka_forward_zen4_d64_bf16", "gka_backward_zen4_d64_bf16_origin"):
            self.assertIn("bf16_products=true", params[name])
        self.assertNotIn("bf16_products=true", params["gka_forward_avx512_d64_bf16"])
        self.assertNotIn("gka_backward_avx512_d64_bf16_origin", params)

    def test_a_head_dim_keeps_the_direct_form_of_any_head_dim(self):
        status, rows, why = table("zen4", "pass=forward,backward head_dim=64 element=float32 function=gaussian")
        self.assertEqual(status, 0, why)
        names = {r["name"] for r in rows}
        self.assertIn("gka_forward_zen4_d64", names)
        self.assertIn("gka_forward_zen4_d64_origin", names)
        self.assertIn("gka_backward_zen4_any_direct", names)  # a D=64 call's fallback
        self.assertNotIn("gka_forward_zen4_any", names)  # the centred form has D=64's own
        self.assertFalse({r["element"] for r in rows} - {"float32"})
        self.assertFalse({r["pass"] for r in rows} - {"forward", "backward"})

    def test_selection_by_function_and_form(self):
        status, rows, why = table("generic", "function=laplace scores=direct pass=decode")
        self.assertEqual(status, 0, why)
        self.assertEqual(sorted(r["name"] for r in rows),
                         sorted(f"gka_decode_generic_{d}{e}_direct_laplace" for d in ("d64", "d128", "any")
                                for e in ("", "_bf16")))

    def test_refusals(self):
        for select, says in (("pass=sideways", "GKA_SELECT: 'pass=sideways'"),
                             ("function=epanechnikov", "function: gaussian, laplace, cauchy"),
                             ("head_dim", "a term is field=value"),
                             ("scores=origin pass=backward", "keeps no variant")):
            with self.subTest(select=select):
                status, _, why = table("generic", select)
                self.assertNotEqual(status, 0)
                self.assertIn(says, why)


if __name__ == "__main__":
    TUNED = sys.argv.pop(1)
    unittest.main()
