#!/usr/bin/env python3
"""Groups the disagreements dumped by jedi_oracle.py --json into heuristic categories.

Usage: python categorize.py acc-*.json  [--examples N]
Categories come from the shape of the callee expression and of the two answers; they are a
first cut for reading, the verdicts in bench/reports/accuracy.md come from reading the code.
"""
import collections
import json
import re
import sys


def shape(expr):
    """Shape of the callee expression."""
    if expr.startswith("super()."):
        return "super().m()"
    if re.match(r"^(self|cls)\.\w+$", expr):
        return "self.m() / cls.m()"
    if re.match(r"^(self|cls)\.\w+(\.\w+)+$", expr):
        return "self.attr.m() (attribute's type)"
    if re.match(r"^\w+$", expr):
        return "plain name f()"
    if re.match(r"^\w+(\.\w+)+$", expr):
        return "x.m() (module attr or local/param receiver)"
    if "(" in expr:
        return "m() on a call result / subscript"
    return "other"


def last(q):
    return (q or "").rsplit(".", 1)[-1].split("#")[0]


_trees = {}


def binding(root, file, line, expr):
    """How the receiver `x` of `x.m()` / `x.a.m()` is bound at that line, as a short label."""
    import ast
    import os
    recv = expr.split(".")[0]
    if not re.match(r"^\w+$", recv) or recv in ("self", "cls"):
        return None
    key = (root, file)
    if key not in _trees:
        src = open(os.path.join(root, file), encoding="utf-8").read()
        _trees[key] = (ast.parse(src), src)
    tree, src = _trees[key]
    fn = None  # innermost function containing the line
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= line <= n.end_lineno:
            if fn is None or n.lineno >= fn.lineno:
                fn = n
    scopes = [fn, tree] if fn is not None else [tree]
    for sc in scopes:
        if isinstance(sc, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = sc.args
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None and arg.arg == recv:
                    if arg.annotation is None:
                        return "parameter, no annotation"
                    ann = ast.get_source_segment(src, arg.annotation)
                    if isinstance(arg.annotation, ast.Constant):
                        return "parameter, string annotation"
                    if re.search(r"Optional|Union|\|", ann):
                        return "parameter, Optional/Union annotation"
                    return "parameter, plain annotation"
        body = sc.body if sc is tree else [sc]
        for n in ast.walk(sc if sc is not tree else tree):
            if sc is tree and fn is not None and n is fn:
                continue
            if isinstance(n, (ast.Import, ast.ImportFrom)):
                for al in n.names:
                    if (al.asname or al.name.split(".")[0]) == recv:
                        return "imported name (module attribute / imported object)"
            if isinstance(n, (ast.Assign, ast.AnnAssign)):
                tg = n.targets if isinstance(n, ast.Assign) else [n.target]
                if any(isinstance(t, ast.Name) and t.id == recv for t in tg):
                    v = n.value
                    if v is None:
                        return "annotated local without value"
                    if isinstance(n, ast.AnnAssign):
                        return "annotated local"
                    if isinstance(v, ast.Call):
                        f = ast.get_source_segment(src, v.func) or ""
                        if re.match(r"^([A-Z]\w*|\w+\.[A-Z]\w*)$", f.split(".")[-1] if "." in f else f):
                            return "local = Class(...)"
                        return "local = f(...) (return value)"
                    if isinstance(v, ast.Attribute):
                        return "local = obj.attr"
                    return "local = other expression"
            if isinstance(n, (ast.For, ast.comprehension)) and isinstance(n.target, ast.Name) \
                    and n.target.id == recv:
                return "loop variable"
            if isinstance(n, ast.withitem) and isinstance(n.optional_vars, ast.Name) \
                    and n.optional_vars.id == recv:
                return "with ... as"
            if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == recv:
                return "local def/class"
    return "unknown binding"


def cat_missed(r, root=None):
    if r["fresco_here"]:
        here = [d for d in r["fresco_here"] if last(d) == last(r["expected"])]
        if here:
            return "different target, same name (%s)" % shape(r["expr"])
        return "fresco resolved a different callee at the line (%s)" % shape(r["expr"])
    if r["kind"] != "call":
        return "%s (%s)" % (r["kind"], shape(r["expr"]))
    sh = shape(r["expr"])
    if sh.startswith("x.m()") and root:
        return "unresolved: x.m(), x = " + (binding(root, r["file"], r["line"], r["expr"]) or "?")
    return "unresolved: " + sh


def cat_false(r):
    if r.get("relation"):
        return "%s (%s)" % (r["relation"], shape(r["expr"]))
    jt = r["jedi"]
    if any(last(t) == last(r["fresco_dst"]) for t in jt):
        return "same name, other class/def (%s)" % shape(r["expr"])
    return "other callee (%s)" % shape(r["expr"])


def main():
    args = sys.argv[1:]
    n = 5
    if "--examples" in args:
        i = args.index("--examples")
        n = int(args[i + 1])
        del args[i:i + 2]
    files = args
    cats = {"missed": collections.defaultdict(list), "false": collections.defaultdict(list),
            "jedi_outside": collections.defaultdict(list), "nosite": collections.defaultdict(list)}
    for f in files:
        d = json.load(open(f))
        proj = d["summary"]["root"].rstrip("/").rsplit("/", 1)[-1]
        dis = d["disagreements"]
        for r in dis["missed"]:
            r["proj"] = proj
            cats["missed"][cat_missed(r, d["summary"]["root"])].append(r)
        for k in ("false", "jedi_outside"):
            for r in dis[k]:
                r["proj"] = proj
                cats[k][cat_false(r)].append(r)
        for r in dis["nosite"]:
            r["proj"] = proj
            cats["nosite"]["property" if r["property"] else "not a property"].append(r)
    for k, groups in cats.items():
        print("\n######## %s: %d" % (k, sum(len(v) for v in groups.values())))
        for c, rs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
            per = collections.Counter(r["proj"] for r in rs)
            print("\n== %s: %d  %s" % (c, len(rs), dict(per)))
            for r in rs[:n]:
                if k == "nosite":
                    print("  %s/%s:%s  %s  -> fresco %s (caller %s)" % (
                        r["proj"], r["file"], r["line"], r["text"][:90], r["fresco_dst"],
                        r["caller"]))
                    continue
                print("  %s/%s:%s  %s" % (r["proj"], r["file"], r["line"], r["src"][:100]))
                print("      caller %s | jedi %s | fresco %s" % (
                    r["caller"], r["jedi"], r.get("fresco_dst") or r["fresco_here"]))


main()
