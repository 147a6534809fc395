#!/usr/bin/env python3
"""Score fresco's call graph against the PyCG micro-benchmark's hand-labelled call graphs.

Bench-only tool, Python 3.11 standard library only.

Usage:
    python3 bench/accuracy/pycg_micro.py SNIPPETS_DIR --fresco BIN
            [--json OUT.json] [--mismatches] [--timeout SECONDS]

SNIPPETS_DIR is the benchmark's `micro-benchmark/snippets` directory (118 cases in 18
categories for pycg 0.0.8). The complete benchmark ships in the PyCG authors' source
distribution on PyPI:

    pip download pycg==0.0.8 --no-deps --no-binary :all: -d /tmp/pycg/pypi
    tar xzf /tmp/pycg/pypi/pycg-0.0.8.tar.gz -C /tmp/pycg/pypi
    # SNIPPETS_DIR = /tmp/pycg/pypi/pycg-0.0.8/micro-benchmark/snippets

What it runs, for every <category>/<case>/ that holds a callgraph.json:
    BIN export <case_dir> --no-daemon --db <tmp>/db --out <tmp>/out
    BIN query --no-daemon --db <tmp>/db --json <case_dir> unresolved
in a fresh temporary directory (removed afterwards), with that directory as cwd (so
nothing is written into the benchmark or the current directory), each with a timeout.
The export's nodes.jsonl and edges.jsonl are scored. The `unresolved` query is only
informational: unresolved call sites are in neither edges.jsonl nor export's output, and
the query lists them (caller, callee text, file, line) next to the mismatches. A failed
query is noted, never fatal.

Failures. A case fails when its callgraph.json is missing, unreadable or malformed, when
the export exits non-zero, times out or cannot be started, when nodes.jsonl/edges.jsonl
are missing or malformed, or when a node cannot be mapped (see M2). Failed cases are
counted (column `failed`) and listed with the reason, never dropped silently. A failed
case whose ground truth is readable is scored as if fresco had produced no edges, so its
ground-truth edges count as FN and recall is not inflated; a case whose ground truth is
unreadable cannot be scored and contributes to `cases`/`failed` only.

Comparison. An edge is a (caller, callee) pair; each case compares two sets: all pairs of
callgraph.json ({caller: [callee, ...]}) and fresco's mapped edges. Mapping from fresco
to PyCG names:
  M1  Only fresco edges of kind `calls` are used.
  M2  Module names from file paths. A node that has a file is renamed
      <module>.<rest>, where <module> is the file's path relative to the case dir
      ('/' -> '.', '.py' dropped, a trailing '.__init__' dropped) and <rest> is the node id
      minus the id of fresco's module node for that file. This is the identity except for
      a module in a directory without __init__.py (PEP 420 namespace package), whose
      fresco module id omits the directory (classes/imported_nested_attr_access:
      imported.func -> nest.imported.func). Renames are listed with --mismatches.
      A node whose file has no module node, or whose id does not start with that module's
      id, fails the case.
  M3  Builtins. External names `builtins.str.X`, `builtins.dict.X`, `builtins.list.X`
      become `<**PyStr**>.X`, `<**PyDict**>.X`, `<**PyList**>.X`; any other `builtins.X`
      becomes `<builtin>.X`. Other external nodes (ext.func, ext.Cls.meth) are kept
      verbatim: PyCG uses the same dotted names.
  M4  Constructor calls. `calls` edges whose target is an in-repo node (one with a file)
      of kind `class` are dropped: fresco records `A()` as a call to the class *and* a call
      to the resolved __init__ (own or inherited), PyCG records only the __init__. Edges to
      external classes (ext.Cls, builtins.StopIteration) are kept; PyCG lists those too.
  Lambdas. fresco's lambda units have ids `<owner>.<lambdaN>` (the N-th lambda of the
      owner, in source order), the same convention as PyCG's `main.<lambda1>` or
      `main.func.<lambda1>`, so they map through M2 like any other node.
  Callers. Module-level code is `<module>` on both sides; nested functions and methods use
      the same dotted names on both sides. Nothing else is renamed or filtered.

Variants (the same edges removed from both sides, so each variant's mismatches are a
subset of those of `all`):
  all        every edge, builtins and externals included (as PyCG counts)
  nobuiltin  edges whose callee is a builtin (<builtin>.*, <**Py*>.*) removed
  internal   also edges whose callee is outside the case's own modules (ext.*) removed

Output (stdout): one markdown table per variant with per-category cases, failed, exact
matches, ground-truth edges, fresco edges, TP, FP, FN, precision and recall, and an
OVERALL row (micro-averaged: sums of TP/FP/FN). Failed cases are always listed. With
--mismatches, every case whose `all` edge sets differ is listed with its missing
(in PyCG only) and extra (in fresco only) edges and fresco's unresolved call sites, then
the M2 renames. --json writes the per-case records and the tables.

Exit status: 0 when every case was scored, 1 when some case failed, 2 on bad usage.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

VARIANTS = ("all", "nobuiltin", "internal")
BUILTIN_TYPES = {"str": "<**PyStr**>", "dict": "<**PyDict**>", "list": "<**PyList**>"}


class CaseFailure(Exception):
    """A problem that makes one case unscorable (reported, never fatal for the run)."""


# ---------------------------------------------------------------- name mapping

def module_from_path(path):
    """`pkg/sub/mod.py` -> `pkg.sub.mod`; `pkg/__init__.py` -> `pkg`."""
    p = path.replace(os.sep, "/")
    if p.endswith(".py"):
        p = p[:-3]
    parts = [x for x in p.split("/") if x not in ("", ".")]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def map_external(name):
    """M3: builtins to PyCG's names; other externals verbatim."""
    if name.startswith("builtins."):
        rest = name[len("builtins."):]
        head, _, tail = rest.partition(".")
        if tail and head in BUILTIN_TYPES:
            return BUILTIN_TYPES[head] + "." + tail
        return "<builtin>." + rest
    return name


def is_builtin(name):
    return name.startswith("<builtin>.") or name.startswith("<**Py")


def case_modules(case_dir):
    """Module names of the case's own .py files (for the `internal` variant)."""
    mods = set()
    for dp, _, fns in os.walk(case_dir):
        for fn in fns:
            if fn.endswith(".py"):
                mods.add(module_from_path(os.path.relpath(os.path.join(dp, fn), case_dir)))
    mods.discard("")
    return mods


def is_internal(name, modules):
    return any(name == m or name.startswith(m + ".") for m in modules)


def filt(edges, variant, modules):
    if variant == "all":
        return set(edges)
    out = set()
    for s, d in edges:
        if is_builtin(d):
            continue
        if variant == "internal" and not is_internal(d, modules):
            continue
        out.add((s, d))
    return out


# ---------------------------------------------------------------- inputs

def read_jsonl(path):
    if not os.path.isfile(path):
        raise CaseFailure(f"missing export file {os.path.basename(path)}")
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                row = json.loads(line)
                if not isinstance(row, dict):
                    raise CaseFailure(f"{os.path.basename(path)}:{i}: not a JSON object")
                rows.append(row)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CaseFailure(f"unreadable {os.path.basename(path)}: {e}") from None
    return rows


def load_ground_truth(path):
    try:
        with open(path, encoding="utf-8") as f:
            cg = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CaseFailure(f"unreadable callgraph.json: {e}") from None
    if not isinstance(cg, dict):
        raise CaseFailure("malformed callgraph.json: not an object")
    edges = set()
    for src, dsts in cg.items():
        if not isinstance(dsts, list) or not all(isinstance(d, str) for d in dsts):
            raise CaseFailure(f"malformed callgraph.json: callees of {src!r} are not a list of strings")
        edges.update((src, d) for d in dsts)
    return edges


def load_fresco(outdir, case_dir):
    """Mapped `calls` edges of one export, plus what the mapping did."""
    nodes = {}
    for n in read_jsonl(os.path.join(outdir, "nodes.jsonl")):
        if not isinstance(n.get("id"), str) or not isinstance(n.get("kind"), str):
            raise CaseFailure(f"malformed node in nodes.jsonl: {n!r}")
        nodes[n["id"]] = n

    def rel_file(n):
        f = n.get("file")
        if f is None:
            return None
        if not isinstance(f, str):
            raise CaseFailure(f"malformed file of node {n['id']!r}: {f!r}")
        return os.path.relpath(f, case_dir) if os.path.isabs(f) else f

    modules_by_file = {rel_file(n): n["id"] for n in nodes.values() if n["kind"] == "module"}
    renames = {}

    def pycg_name(node_id):
        n = nodes.get(node_id)
        f = rel_file(n) if n is not None else None
        if f is None:
            return map_external(node_id)
        mod_id = modules_by_file.get(f)
        if mod_id is None:
            raise CaseFailure(f"node {node_id!r}: file {f!r} has no module node")
        if node_id != mod_id and not node_id.startswith(mod_id + "."):
            raise CaseFailure(f"node {node_id!r} is not inside its module {mod_id!r}")
        new = module_from_path(f) + node_id[len(mod_id):]
        if new != node_id:
            renames[node_id] = new
        return new

    edges, dropped_class, n_raw = set(), [], 0
    for e in read_jsonl(os.path.join(outdir, "edges.jsonl")):
        if e.get("kind") != "calls":
            continue
        src, dst = e.get("src"), e.get("dst")
        if not isinstance(src, str) or not isinstance(dst, str):
            raise CaseFailure(f"malformed calls edge in edges.jsonl: {e!r}")
        n_raw += 1
        d = nodes.get(dst)
        if d is not None and d["kind"] == "class" and rel_file(d) is not None:   # M4
            dropped_class.append([src, dst, e.get("line")])
            continue
        edges.add((pycg_name(src), pycg_name(dst)))
    return edges, n_raw, dropped_class, renames


# ---------------------------------------------------------------- running fresco

def run(cmd, cwd, timeout):
    """Run cmd; return (ok, reason, stdout)."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, errors="replace", timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"timed out after {timeout}s", ""
    except OSError as e:
        return False, f"cannot run {cmd[0]}: {e}", ""
    if p.returncode != 0:
        tail = " | ".join(p.stderr.strip().splitlines()[-3:])
        return False, f"exit status {p.returncode}: {tail}", p.stdout
    return True, "", p.stdout


def parse_unresolved(text):
    doc = json.loads(text)
    out = []
    for r in doc.get("results", []):
        out.append([r.get("name"), r.get("callee"), r.get("file"), r.get("line")])
    return out


def score_case(cat, case, case_dir, fresco, timeout):
    rec = {"category": cat, "case": case, "failed": None, "scored": False,
           "raw_calls": 0, "dropped_class_edges": [], "renames": {},
           "unresolved": [], "unresolved_error": None, "variants": {}}
    modules = case_modules(case_dir)
    try:
        gt = load_ground_truth(os.path.join(case_dir, "callgraph.json"))
    except CaseFailure as e:
        rec["failed"] = str(e)
        return rec
    fr = set()
    with tempfile.TemporaryDirectory(prefix="pycg-micro-") as tmp:
        db, out = os.path.join(tmp, "db"), os.path.join(tmp, "out")
        ok, why, _ = run([fresco, "export", case_dir, "--no-daemon", "--db", db, "--out", out],
                         tmp, timeout)
        try:
            if not ok:
                raise CaseFailure(f"export failed: {why}")
            fr, rec["raw_calls"], rec["dropped_class_edges"], rec["renames"] = load_fresco(out, case_dir)
        except CaseFailure as e:
            rec["failed"] = str(e)
            fr = set()
        if ok:
            qok, qwhy, qout = run([fresco, "query", "--no-daemon", "--db", db, "--json",
                                   case_dir, "unresolved"], tmp, timeout)
            try:
                if not qok:
                    raise ValueError(qwhy)
                rec["unresolved"] = parse_unresolved(qout)
            except (ValueError, AttributeError, TypeError) as e:
                rec["unresolved_error"] = f"unresolved query failed: {e}"
    rec["scored"] = True   # a failed export scores as an empty graph
    for v in VARIANTS:
        g, f = filt(gt, v, modules), filt(fr, v, modules)
        rec["variants"][v] = {"tp": sorted(g & f), "fp": sorted(f - g), "fn": sorted(g - f),
                              "n_gt": len(g), "n_fresco": len(f),
                              "exact": rec["failed"] is None and g == f}
    return rec


# ---------------------------------------------------------------- report

def ratio(a, b):
    return a / b if b else None


def fmt(x):
    return "n/a" if x is None else f"{x:.3f}"


def table_rows(results, variant):
    cats = sorted({r["category"] for r in results})
    rows = []
    for c in cats + ["OVERALL"]:
        rs = results if c == "OVERALL" else [r for r in results if r["category"] == c]
        vs = [r["variants"][variant] for r in rs if r["scored"]]
        tp = sum(len(v["tp"]) for v in vs)
        fp = sum(len(v["fp"]) for v in vs)
        fn = sum(len(v["fn"]) for v in vs)
        rows.append({"category": c, "cases": len(rs),
                     "failed": sum(r["failed"] is not None for r in rs),
                     "exact": sum(v["exact"] for v in vs),
                     "gt": tp + fn, "fresco": tp + fp, "tp": tp, "fp": fp, "fn": fn,
                     "precision": ratio(tp, tp + fp), "recall": ratio(tp, tp + fn)})
    return rows


def print_table(variant, rows):
    print(f"\n### variant: {variant}\n")
    print("| category | cases | failed | exact | GT | fresco | TP | FP | FN | precision | recall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        name = f"**{r['category']}**" if r["category"] == "OVERALL" else r["category"]
        print(f"| {name} | {r['cases']} | {r['failed']} | {r['exact']} | {r['gt']} | {r['fresco']} "
              f"| {r['tp']} | {r['fp']} | {r['fn']} | {fmt(r['precision'])} | {fmt(r['recall'])} |")


def find_cases(snippets):
    cases = []
    for cat in sorted(os.listdir(snippets)):
        cdir = os.path.join(snippets, cat)
        if not os.path.isdir(cdir):
            continue
        for case in sorted(os.listdir(cdir)):
            if os.path.isfile(os.path.join(cdir, case, "callgraph.json")):
                cases.append((cat, case))
    return cases


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snippets", metavar="SNIPPETS_DIR",
                    help="the benchmark's micro-benchmark/snippets directory")
    ap.add_argument("--fresco", required=True, metavar="BIN", help="the fresco binary")
    ap.add_argument("--json", metavar="OUT.json", help="write all results here")
    ap.add_argument("--mismatches", action="store_true",
                    help="list every case whose edges differ, and the M2 renames")
    ap.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                    help="per fresco command (default 120)")
    args = ap.parse_args(argv)

    snippets = os.path.abspath(args.snippets)
    if not os.path.isdir(snippets):
        ap.error(f"not a directory: {args.snippets}")
    fresco = args.fresco
    if os.sep in fresco:
        fresco = os.path.abspath(fresco)   # the commands run from a temporary cwd
    cases = find_cases(snippets)
    if not cases:
        ap.error(f"no <category>/<case>/callgraph.json under {args.snippets}")

    results = [score_case(cat, case, os.path.join(snippets, cat, case), fresco, args.timeout)
               for cat, case in cases]
    tables = {v: table_rows(results, v) for v in VARIANTS}

    print(f"# fresco vs PyCG micro-benchmark ({len(results)} cases, binary {args.fresco})")
    for v in VARIANTS:
        print_table(v, tables[v])

    failed = [r for r in results if r["failed"] is not None]
    print(f"\n## failed cases: {len(failed)}")
    for r in failed:
        print(f"- {r['category']}/{r['case']}: {r['failed']}")
    qfail = [r for r in results if r["unresolved_error"]]
    if qfail:
        print(f"\n## unresolved query failed (informational): {len(qfail)}")
        for r in qfail:
            print(f"- {r['category']}/{r['case']}: {r['unresolved_error']}")

    if args.mismatches:
        bad = [r for r in results if r["scored"] and not r["variants"]["all"]["exact"]]
        print(f"\n## mismatches (variant all): {len(bad)} cases\n")
        for r in bad:
            v = r["variants"]["all"]
            print(f"{r['category']}/{r['case']}" + (" (FAILED)" if r["failed"] else ""))
            for s, d in v["fn"]:
                print(f"    MISSING {s} -> {d}")
            for s, d in v["fp"]:
                print(f"    EXTRA   {s} -> {d}")
            for name, callee, f, line in r["unresolved"]:
                print(f"    (fresco unresolved: in {name} call {callee!r} at {f}:{line})")
            print()
        print("## renames applied (M2)\n")
        for r in results:
            for a, b in r["renames"].items():
                print(f"- {r['category']}/{r['case']}: {a} -> {b}")

    if args.json:
        doc = {"snippets": snippets, "fresco": args.fresco, "variants": list(VARIANTS),
               "tables": tables, "failed": [f"{r['category']}/{r['case']}" for r in failed],
               "cases": results}
        try:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=1)
        except OSError as e:
            print(f"cannot write {args.json}: {e}", file=sys.stderr)
            return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
