#!/usr/bin/env python3
"""The kernel variants: the one place that decides which kernels exist.

    variants.py --families cmake/families.tsv --build-families F,... --functions gaussian,...
                --tuned build/tuned_resolved.tsv [--select "pass=forward,backward ..."] --out variants.tsv

A variant is one AOT-compiled kernel: a pass of a family at a head dim, for an
element type, a kernel function, a score form and a shape class, with its knobs.
The rules below (`variants`) give every variant the build's families have; the
selection (GKA_SELECT) keeps those that a call it names could run (`select`). The build
(cmake/GkaKernels.cmake) runs this when it configures and compiles each row of
the table it writes, whose fields also make the runtime's dispatch table
(runtime/kernel_variants.cpp: a variant's properties are fields, never read
out of its name); the tests and the tuner read the same table in the build
folder (variants.tsv).

Its columns: name (the kernel's function name), pass (PASSES, below), device (cpu, cuda), family, generator,
head_dim (0: any), window (any, global, sliding), min_seq_len, max_seq_len
(0: no bound), knobs ("-": the schedule's defaults), scores (centred, origin,
direct; random-feature GKA's rf_ passes, which form no scores: direct), element (float32, bfloat16), function, params (the generator's, space
separated). Standard library only.
"""
import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "autotune"))
import tuned_table  # noqa: E402  (the tables' reader: cmake/families.tsv, the resolved tuned table)

HEAD_DIMS = (64, 128, 0)  # 64 and 128 with constant loops; 0 serves every other head dim
ELEMENTS = ("float32", "bfloat16")
PASSES = ("forward", "backward", "decode", "forward_chunk", "backward_chunk", "rf_states", "rf_forward", "rf_backward")
FEATURE_PASSES = ("rf_states", "rf_forward", "rf_backward")  # random-feature GKA: no score form, the Gaussian alone
FORMS = ("centred", "origin", "direct")
EVERY_SHAPE = ("any", 1, 0)  # window, min_seq_len, max_seq_len

Variant = collections.namedtuple(
    "Variant", "name pass_ device family generator head_dim window min_seq_len max_seq_len knobs scores element "
               "function params")
# What GKA_SELECT may name, and the values each field takes.
SELECTABLE = {"pass": PASSES, "head_dim": ("64", "128", "any"), "element": ELEMENTS, "scores": FORMS, "function": None}


def tuned_classes(path):
    """{(family, generator, head_dim): {(window, min, max): knobs}}, in the order of
    the resolved tuned table (autotune/tuned_table.py --resolve)."""
    classes = collections.defaultdict(dict)
    for _, fields in tuned_table.data_lines(path):
        family, kernel, head_dim, window, lo, hi, knobs = fields
        classes[family, kernel, int(head_dim)][window, int(lo), int(hi)] = knobs
    return classes


def make(family, kind, bf16_products, pass_, head_dim, element, function, scores, shape=EVERY_SHAPE, knobs=""):
    """The variant, named as the build and gka_last_kernel() name it: pass, family,
    head dim, then each field that differs from the common case."""
    window, lo, hi = shape
    chunk = pass_.endswith("_chunk")
    generator = "gka_" + pass_.replace("_chunk", "")
    name = f"gka_{pass_}_{family}_" + (f"d{head_dim}" if head_dim else "any")
    params = [f"head_dim={head_dim}"] + (["chunk=true"] if chunk else [])
    if window != "any":
        name += "_" + window
    if hi:
        name += f"_t{lo}_{hi}"
    elif lo > 1:
        name += f"_t{lo}_up"
    if knobs:
        params.append(f"knobs={knobs}")
    params.append(f"scores={scores}")
    if element == "bfloat16":
        name += "_bf16"
        params.append("element=bfloat16")
        if pass_ in ("forward", "backward") and bf16_products:
            params.append("bf16_products=true")
    if scores != "centred" and pass_ not in FEATURE_PASSES:
        name += "_" + scores
    if function != "gaussian":
        name += "_" + function
        params.append(f"kernel_function={function}")
    return Variant(name, pass_, kind, family, generator, head_dim, window, lo, hi, knobs, scores, element, function,
                   params)


def variants(families, functions, tuned):
    """Every variant of the build's families (rows of cmake/families.tsv, best first)."""
    out = []
    for f in families:
        family, kind, products = f["family"], f["kind"], f["bf16_products"] == "yes"

        def add(pass_, head_dim, element, function, scores, classes=False):
            tuned_knobs = tuned.get((family, "gka_" + pass_.replace("_chunk", ""), head_dim), {})
            out.append(make(family, kind, products, pass_, head_dim, element, function, scores,
                            knobs=tuned_knobs.get(EVERY_SHAPE, "")))
            for shape, class_knobs in (tuned_knobs.items() if classes else ()):
                if shape != EVERY_SHAPE:
                    out.append(make(family, kind, products, pass_, head_dim, element, function, scores, shape,
                                    class_knobs))

        for pass_ in ("forward", "backward"):
            for head_dim in HEAD_DIMS:
                for element in ELEMENTS:
                    if kind == "cuda":  # the direct form alone: the expansions' choice would sync the stream
                        add(pass_, head_dim, element, "gaussian", "direct")
                        continue
                    # The Gaussian's expansions, with the tuned table's shape classes;
                    # the origin form runs first on features near the origin: the
                    # forward's, and the backward's of bfloat16 products (its dot
                    # products exact: generators/gka_backward.h).
                    add(pass_, head_dim, element, "gaussian", "centred", classes=True)
                    if pass_ == "forward" or (products and element == "bfloat16"):
                        add(pass_, head_dim, element, "gaussian", "origin", classes=True)
            if kind == "cpu":  # the direct form, the fallback that serves every input: one for any D
                for element in ELEMENTS:
                    add(pass_, 0, element, "gaussian", "direct")
        # Random-feature GKA: any D, float32, the CPU families (no scores: its
        # table field says direct, the form that forms no expansion).
        for pass_ in FEATURE_PASSES if kind == "cpu" else ():
            add(pass_, 0, "float32", "gaussian", "direct")
        # Chunks (float32) and decode, the direct form; the other kernel functions,
        # the direct form alone (generators/gka_math.h, kernel_scores, says why).
        for function in functions:
            for head_dim in HEAD_DIMS:
                for element in ELEMENTS:
                    for pass_ in ("forward", "backward") if function != "gaussian" else ():
                        add(pass_, head_dim, element, function, "direct")
                    add("decode", head_dim, element, function, "direct")
                for pass_ in ("forward_chunk", "backward_chunk"):
                    add(pass_, head_dim, "float32", function, "direct")
    return out


def parse_selection(text, functions):
    """{field: set of values} of GKA_SELECT: space- or semicolon-separated
    field=value,value terms; empty or "all": everything."""
    chosen = {}
    for term in text.replace(";", " ").split():
        if term == "all":
            continue
        field, _, values = term.partition("=")
        allowed = SELECTABLE.get(field, ()) if field != "function" else functions
        picked = set(values.split(","))
        if field not in SELECTABLE or not values or not picked <= set(allowed):
            raise ValueError(f"GKA_SELECT: '{term}': a term is field=value,... with fields "
                             + "; ".join(f"{k}: {', '.join(v if v is not None else functions)}"
                                         for k, v in SELECTABLE.items()))
        chosen[field] = picked
    return chosen


def select(table, chosen):
    """The variants a call the selection names could run: their fields among the
    chosen values, where a head dim names the calls of that D, which run the
    variant of any D in a form that has no variant of their own D (the direct
    form on a CPU family)."""
    def key(v, head_dim):
        return v.family, v.pass_, v.element, v.function, v.scores, head_dim

    own = {key(v, v.head_dim) for v in table}
    dims = chosen.get("head_dim", {"64", "128", "any"})
    wanted = {0 if d == "any" else int(d) for d in dims}

    def serves(v):
        return v.head_dim in wanted or (v.head_dim == 0 and any(key(v, d) not in own for d in wanted))

    fields = lambda v: {"pass": v.pass_, "element": v.element, "scores": v.scores, "function": v.function}
    return [v for v in table if serves(v) and all(fields(v)[k] in values for k, values in chosen.items()
                                                  if k != "head_dim")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", required=True, help="cmake/families.tsv")
    ap.add_argument("--build-families", required=True, help="the families the build compiles, comma-separated")
    ap.add_argument("--functions", required=True, help="the kernel functions, comma-separated, the Gaussian first")
    ap.add_argument("--tuned", required=True, help="the resolved tuned table (autotune/tuned_table.py --resolve)")
    ap.add_argument("--select", default="", help="GKA_SELECT")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    functions = args.functions.split(",")
    wanted = [name for name in args.build_families.split(",") if name]
    rows = {f["family"]: f for f in tuned_table.families(args.families)}
    try:
        chosen = parse_selection(args.select, functions)
    except ValueError as e:
        sys.exit(str(e))
    table = select(variants([rows[name] for name in wanted], functions, tuned_classes(args.tuned)), chosen)
    if not table:
        sys.exit(f"GKA_SELECT '{args.select}' keeps no variant of the families {', '.join(wanted)}")
    with open(args.out + ".new", "w") as f:
        f.write("# The kernel variants this build compiles (kernels/variants.py); GKA_SELECT: "
                f"{args.select or 'all'}\n")
        f.write("\t".join(Variant._fields).replace("pass_", "pass") + "\n")
        for v in table:
            fields = [str(x) for x in v[:-1]] + [" ".join(v.params)]
            fields[Variant._fields.index("knobs")] = v.knobs or "-"
            f.write("\t".join(fields) + "\n")
    os.replace(args.out + ".new", args.out)


if __name__ == "__main__":
    main()
