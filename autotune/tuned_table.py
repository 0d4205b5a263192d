#!/usr/bin/env python3
"""The autotuner's table, schedules/tuned.tsv, as everything that reads it reads it.

    tuned_table.py [--families cmake/families.tsv] [--table schedules/tuned.tsv] [--merge TABLE] --resolve OUT

The one reader of the table: it checks each row, gives a family without rows of
its own the rows of the family it takes its knobs from (cmake/families.tsv,
knobs_from), and turns each shape class into numbers. The build runs it when it
configures (cmake/GkaKernels.cmake) and writes its answer, the resolved table,
into the build folder, which the kernels' knobs and tests/test_tuned_table.cpp
come from; the autotuner reads and writes the table through it. Which row a
shape takes is libgka's to say (runtime/kernel_variants.h, gka_kernel_variant).

The resolved table has a row a variant, tab-separated: family, kernel, head_dim
(0: any), window (any, global or sliding), min_seq_len, max_seq_len (0: no
bound), knobs ("name:value,..."; empty: the schedule's defaults). Standard
library only: CMake runs it with whatever Python it found.
"""
import argparse
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAMILIES = os.path.join(ROOT, "cmake", "families.tsv")
TABLE = os.path.join(ROOT, "schedules", "tuned.tsv")
WINDOWS = ("any", "global", "sliding")

# A row of the resolved table.
Row = collections.namedtuple("Row", "family kernel head_dim window min_seq_len max_seq_len knobs")


class TableError(ValueError):
    """A row the build cannot use; the message names its file and line."""


def shown(path):
    """A path as messages name it: relative to the repository where it is inside."""
    return os.path.relpath(path, ROOT) if path.startswith(ROOT + os.sep) else path


def data_lines(path):
    """(where, fields) of each row of a tab-separated table: comments and blank lines skipped."""
    with open(path) as f:
        for number, line in enumerate(f, 1):
            if line.strip() and not line.startswith("#"):
                yield f"{shown(path)}:{number}", line.rstrip("\n").split("\t")


def families(path=FAMILIES):
    """cmake/families.tsv's rows as dicts, keyed by its header."""
    rows = data_lines(path)
    _, header = next(rows)
    return [dict(zip(header, fields)) for _, fields in rows]


def row_text(fields):
    return "\t".join(fields)


def seq_range(seq_len, where, row):
    """(min_seq_len, max_seq_len) of "any", "lo-" or "lo-hi"; max 0: no bound."""
    if seq_len == "any":
        return 1, 0
    lo, hi = (int(n or 0) for n in seq_len.split("-"))
    if lo < 1 or (hi and hi < lo):
        raise TableError(f"{where}: seq_len {seq_len} is no range of lengths (they start at 1): '{row}'")
    if (lo, hi) == (1, 0):
        raise TableError(f"{where}: seq_len 1- is every length: write any: '{row}'")
    return lo, hi


def parse_row(fields, where, known_families):
    """The Row of one line of the table (its first six fields), checked."""
    row = row_text(fields)
    if len(fields) < 6:
        raise TableError(f"{where}: a row needs family, kernel, head_dim, window, seq_len, knobs: '{row}'")
    family, kernel, head_dim, window, seq_len, knobs = fields[:6]
    if window not in WINDOWS or not re.fullmatch(r"any|[0-9]+-[0-9]*", seq_len):
        raise TableError(f"{where}: window must be any|global|sliding and seq_len any|lo-|lo-hi: '{row}'")
    if not re.fullmatch(r"any|[1-9][0-9]*", head_dim):
        raise TableError(f"{where}: head_dim must be any or a number: '{row}'")
    if family not in known_families:
        raise TableError(f"{where}: {family} is no family of cmake/families.tsv: '{row}'")
    return Row(family, kernel, 0 if head_dim == "any" else int(head_dim), window, *seq_range(seq_len, where, row),
               "" if knobs == "defaults" else knobs)


def class_key(row):
    return row.family, row.kernel, row.head_dim, row.window, row.min_seq_len, row.max_seq_len


def own_rows(table, known_families):
    """The table's rows, checked: one a shape class."""
    rows, seen = [], set()
    for where, fields in data_lines(table):
        row = parse_row(fields, where, known_families)
        if class_key(row) in seen:
            raise TableError(f"{where}: a second row for the same shape class: '{row_text(fields)}'")
        seen.add(class_key(row))
        rows.append(row)
    return rows


def read(table=TABLE, families_path=FAMILIES, merge=None):
    """The table's rows, checked and parsed, and for each family that takes
    another's knobs (knobs_from) and has no rows of its own, copies of that
    family's rows (in the table's order, which the build's variants keep).
    merge: a second table in the same format (schedules/cuda_candidates.tsv)
    whose rows take the place of the first's of the same shape class."""
    knobs_from = {f["family"]: f["knobs_from"] for f in families(families_path)}
    for taker, giver in knobs_from.items():
        if giver != "-" and giver not in knobs_from:
            raise TableError(f"{shown(families_path)}: {taker} takes its knobs from {giver}, which is no family")
    rows = own_rows(table, knobs_from)
    if merge:
        merged = own_rows(merge, knobs_from)
        replaced = {class_key(r) for r in merged}
        rows = [r for r in rows if class_key(r) not in replaced] + merged
    tuned = {r.family for r in rows}
    return rows + [r._replace(family=taker) for taker, giver in knobs_from.items() if taker not in tuned
                   for r in rows if r.family == giver]


def write_resolved(rows, path):
    with open(path, "w") as f:
        f.write("# schedules/tuned.tsv as the build reads it (autotune/tuned_table.py): head_dim 0 any, "
                "max_seq_len 0 no bound, knobs empty the schedule's defaults\n# " + row_text(Row._fields) + "\n")
        f.writelines(row_text(map(str, r)) + "\n" for r in rows)


def store(key, rest, table=TABLE, families_path=FAMILIES):
    """Puts the row key + rest in the table in place of its shape class's
    (key: family, kernel, head_dim, window, seq_len; rest: knobs, speedup,
    tuned_on), checked as the build checks it; rest None drops the class's row.
    The table's comments stay first, its rows sorted."""
    parse_row(key + (rest or ["defaults"]), "the new row", {f["family"] for f in families(families_path)})
    lines = []
    if os.path.exists(table):
        with open(table) as f:
            lines = f.read().splitlines()
    header = [line for line in lines if line.startswith("#")]
    body = [line for line in lines if line.strip() and not line.startswith("#") and line.split("\t")[:5] != key]
    with open(table, "w") as f:
        f.write("\n".join(header + sorted(body + ([row_text(key + rest)] if rest else []))) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=FAMILIES)
    ap.add_argument("--table", default=TABLE)
    ap.add_argument("--merge", metavar="TABLE", help="rows that replace the table's of their shape classes")
    ap.add_argument("--resolve", metavar="OUT", required=True, help="where to write the resolved table")
    args = ap.parse_args()
    try:
        write_resolved(read(args.table, args.families, args.merge), args.resolve)
    except TableError as e:
        sys.exit(str(e))


if __name__ == "__main__":
    main()
