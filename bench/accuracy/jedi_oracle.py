#!/usr/bin/env python3
"""Call-edge accuracy of fresco against an independent resolver (jedi).

For one project root this script

1. runs ``fresco export ROOT --out TMP`` and loads ``nodes.jsonl`` / ``edges.jsonl``;
2. walks the ``.py`` files fresco indexed (the ``file`` of its module nodes), parses each with
   ``ast`` and collects every call site: each ``ast.Call`` (the position of the callee's *name*:
   ``c`` in ``a.b.c(...)``, ``f`` in ``f(...)``), plus the two implicit calls fresco also counts:
   a bare decorator (``@deco``) and a bare ``raise Exc``;
3. asks jedi ``Script.goto(line, col, follow_imports=True)`` at that position (and ``infer`` when
   goto stops on an assignment / parameter / import); answers landing on a ``def``/``class``
   inside the root are mapped to fresco units by file + definition line (innermost unit whose
   span contains the ``def``/``class`` line and whose last name component is the jedi name);
4. the caller of a site is the innermost fresco unit (module/class/function/method) containing
   the *evaluation scope* of the call, with Python's scoping: decorators, default values,
   annotations, base classes are evaluated in the enclosing scope; comprehensions belong to the
   enclosing function; a lambda is a fresco unit of its own (``owner.<lambdaN>``, the N-th lambda
   of its owner in source order), so calls in its body are its calls;
5. compares the oracle edge set {(caller, callee, line)} with fresco's in-project ``calls``
   edges, at edge level and at (caller, callee) pair level, and writes a JSON dump of every
   disagreement (for categorisation) next to a summary on stdout.

Precision is judged only where jedi answered: a fresco edge counts as *judged* when every call
site of its (caller, line) got a definitive jedi answer (a def/class in the project, or a
definition outside it) and at least one of them is in the project; other fresco edges are
*unjudged*. A fresco edge that no call site explains is checked as a property read: if its
callee is a property and jedi resolves a name on that line to it, it is counted apart as
"property" (correct, but outside precision/recall, which are about explicit call sites); the
iterator protocol's implicit calls (`for x in obj`: `__iter__`, `__next__`) whose iterable jedi
infers to be an instance of that class are counted apart the same way ("protocol"); the rest with
no call site on their line are "nosite". A jedi answer landing on a lambda maps to the
lambda unit starting on that line when there is exactly one.

Usage:
    python jedi_oracle.py ROOT [--fresco BIN] [--json OUT.json] [--sample N]
The jedi oracle is a bench-only dependency (a venv); fresco never uses it.
"""
import argparse
import ast
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

import jedi

DEF_KINDS = {"class", "function", "method"}
SCOPE_KINDS = {"module", "class", "function", "method"}


# --------------------------------------------------------------------------------------------
# fresco side
# --------------------------------------------------------------------------------------------
def run_fresco(fresco, root):
    out = tempfile.mkdtemp(prefix="fresco-acc-")
    subprocess.run([fresco, "export", root, "--out", out], check=True,
                   stdout=subprocess.DEVNULL)
    nodes = [json.loads(l) for l in open(os.path.join(out, "nodes.jsonl"))]
    edges = [json.loads(l) for l in open(os.path.join(out, "edges.jsonl"))]
    return nodes, edges


class UnitIndex:
    """Per-file spans of fresco's units, for innermost-containing lookups."""

    def __init__(self, nodes):
        self.by_id = {n["id"]: n for n in nodes}
        self.by_file = collections.defaultdict(list)
        self.module_of_file = {}
        for n in nodes:
            if n["file"] is None:
                continue
            if n["kind"] == "module":
                self.module_of_file[n["file"]] = n["id"]
            if n["kind"] in SCOPE_KINDS:
                self.by_file[n["file"]].append(n)

    def innermost(self, file, line, kinds, name=None):
        """Innermost unit of `kinds` in `file` whose span contains `line`, lambdas aside (they
        are found by position, `lambda_at`); with `name`, the unit's last qualified-name
        component must equal it (else None)."""
        best = None
        for n in self.by_file.get(file, ()):
            if n["kind"] not in kinds or is_lambda(n["id"]):
                continue
            if n["start_line"] <= line <= n["end_line"]:
                if best is None or (n["end_line"] - n["start_line"]) < (
                        best["end_line"] - best["start_line"]):
                    best = n
        if best is None:
            return None
        if name is not None and last_name(best["id"]) != name:
            return None
        return best["id"]


    def lambda_at(self, file, line):
        """The lambda unit starting on `line` of `file`, when there is exactly one."""
        found = [n["id"] for n in self.by_file.get(file, ())
                 if is_lambda(n["id"]) and n["start_line"] == line]
        return found[0] if len(found) == 1 else None


def is_lambda(qid):
    return last_name(qid).startswith("<lambda")


def iterables_by_line(code):
    """What `for` statements and comprehensions iterate over, by the iterable's first line."""
    out = collections.defaultdict(list)
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return out
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.AsyncFor, ast.comprehension)):
            out[node.iter.lineno].append(node.iter)
    return out


def last_name(qid):
    """`a.b.f#2` -> `f`; `a.f#3.decorator` -> `decorator`."""
    return qid.rsplit(".", 1)[-1].split("#")[0]


def strip_dup(qid):
    """`a.C.p#2` -> `a.C.p` (fresco numbers a second definition of a name in one scope)."""
    head, _, tail = qid.rpartition(".")
    return (head + "." if head else "") + tail.split("#")[0]


def package_roots(nodes, root):
    """Directories that hold top-level packages (e.g. ROOT/src), for jedi's sys.path."""
    roots = set()
    for n in nodes:
        if n["kind"] != "module" or not n["file"]:
            continue
        parts = n["file"][:-3].split("/")
        if parts[-1] == "__init__":
            parts = parts[:-1]
        depth = len(n["name"].split("."))
        if depth <= len(parts):
            roots.add(os.path.join(root, *parts[:len(parts) - depth]))
    return sorted(roots)


# --------------------------------------------------------------------------------------------
# call sites from ast
# --------------------------------------------------------------------------------------------
class Site:
    __slots__ = ("file", "kind", "line", "col", "lines", "scope_line", "expr", "caller",
                 "answer", "targets", "outside", "jedi_desc", "execute")

    def __init__(self, file, kind, line, col, lines, scope_line, expr):
        self.file, self.kind, self.line, self.col = file, kind, line, col
        self.lines, self.scope_line, self.expr = lines, scope_line, expr
        self.caller = None
        self.execute = False   # the callee is a call result: targets = what the inner call returns
        self.answer = None     # 'project' | 'outside' | 'none' | 'nopos'
        self.targets = []      # fresco ids (or UNMAPPED:...) jedi resolved to
        self.outside = []      # descriptions of out-of-project answers
        self.jedi_desc = []


def char_col(src_lines, lineno, byte_col):
    """ast columns are UTF-8 byte offsets; jedi wants character columns."""
    line = src_lines[lineno - 1].encode("utf-8")
    return len(line[:byte_col].decode("utf-8", errors="replace"))


def name_position(func):
    """(line, byte_col) of the callee's name, or None when the callee is not a name."""
    if isinstance(func, ast.Name):
        return func.lineno, func.col_offset
    if isinstance(func, ast.Attribute):
        # the attribute name ends the node: a.b.c -> position of `c`
        return func.end_lineno, func.end_col_offset - len(func.attr)
    return None


class SiteCollector(ast.NodeVisitor):
    """Collects call sites with the line of their evaluation scope's def/class (None = module)."""

    def __init__(self, file, src_lines):
        self.file, self.src_lines = file, src_lines
        self.scope = [None]
        self.sites = []
        # (owner scope, (line, byte col), key) per lambda, outer lambdas before inner ones; a
        # scope is None (module), a def/class line, or a lambda's key.
        self.lambdas = []

    def add(self, kind, node, func):
        execute = False
        if isinstance(func, ast.Call):
            # f(...)(...) or a decorator factory @f(...): the callee is what f returns
            execute, func = True, func.func
        pos = name_position(func)
        lines = {node.lineno, func.end_lineno}
        if pos is None:
            line, col = node.lineno, None
        else:
            line, col = pos[0], char_col(self.src_lines, pos[0], pos[1])
            lines.add(pos[0])
        expr = ast.get_source_segment("\n".join(self.src_lines), func) or ""
        site = Site(self.file, kind, line, col, lines, self.scope[-1], expr[:80])
        site.execute = execute
        self.sites.append(site)

    # decorators, defaults, annotations, bases: evaluated in the enclosing scope
    def _def(self, node, is_class):
        for d in node.decorator_list:
            # @deco calls deco; @factory(...) calls factory (an ast.Call, visited below) and
            # then calls what the factory returns ("decorator-result")
            self.add("decorator" if not isinstance(d, ast.Call) else "decorator-result", d, d)
            self.visit(d)
        if is_class:
            for b in node.bases:
                self.visit(b)
            for k in node.keywords:
                self.visit(k)
        else:
            a = node.args
            for d in a.defaults + [x for x in a.kw_defaults if x is not None]:
                self.visit(d)
            for arg in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg]:
                if arg is not None and arg.annotation is not None:
                    self.visit(arg.annotation)
            if node.returns is not None:
                self.visit(node.returns)
        self.scope.append(node.lineno)
        for s in node.body:
            self.visit(s)
        self.scope.pop()

    def visit_FunctionDef(self, node):
        self._def(node, False)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self._def(node, True)

    def visit_Call(self, node):
        self.add("call", node, node.func)
        self.generic_visit(node)

    def visit_Lambda(self, node):
        a = node.args
        for d in a.defaults + [x for x in a.kw_defaults if x is not None]:
            self.visit(d)
        key = ("lambda", len(self.lambdas))
        self.lambdas.append((self.scope[-1], (node.lineno, node.col_offset), key))
        self.scope.append(key)
        self.visit(node.body)
        self.scope.pop()

    def lambda_ids(self, module_id, units):
        """fresco's id of each lambda: `<owner>.<lambdaN>`, N counting the owner's lambdas in
        source order."""
        by_owner = collections.defaultdict(list)
        for owner, pos, key in self.lambdas:
            by_owner[owner].append((pos, key))
        ordinal = {}
        for entries in by_owner.values():
            for i, (_, key) in enumerate(sorted(entries)):
                ordinal[key] = i + 1
        ids = {}
        for owner, _, key in self.lambdas:
            ids[key] = "%s.<lambda%d>" % (self.scope_id(owner, module_id, units, ids), ordinal[key])
        return ids

    def scope_id(self, scope, module_id, units, lambda_ids):
        if scope is None:
            return module_id
        if isinstance(scope, tuple):
            return lambda_ids.get(scope)
        return units.innermost(self.file, scope, SCOPE_KINDS)

    def visit_Raise(self, node):
        if node.exc is not None and isinstance(node.exc, (ast.Name, ast.Attribute)):
            self.add("raise", node.exc, node.exc)
        self.generic_visit(node)


# --------------------------------------------------------------------------------------------
# jedi side
# --------------------------------------------------------------------------------------------
def under(path, root):
    return path is not None and os.path.abspath(str(path)).startswith(root.rstrip("/") + "/")


def resolve_site(script, site, root, units):
    """Fill site.answer / site.targets from jedi."""
    if site.col is None:
        site.answer = "nopos"
        return
    try:
        if site.execute:
            # the callee is the return value of the inner callee
            names = [r for n in script.infer(site.line, site.col)
                     if n.type == "function" for r in n.execute()]
        else:
            names = script.goto(site.line, site.col, follow_imports=True)
            # goto stopping on an assignment, a parameter or an import: ask infer as well
            if not names or any(n.type not in ("function", "class") for n in names):
                names = list(names) + list(script.infer(site.line, site.col))
    except Exception as e:  # jedi occasionally crashes on odd code
        site.answer = "none"
        site.jedi_desc.append("jedi error: %r" % (e,))
        return
    targets, outside = [], []
    for n in names:
        site.jedi_desc.append("%s %s %s:%s" % (n.type, n.full_name or n.name,
                                               n.module_path and os.path.relpath(
                                                   str(n.module_path), root), n.line))
        if n.type not in ("function", "class"):
            continue
        if under(n.module_path, root) and n.line is not None:
            rel = os.path.relpath(str(n.module_path), root)
            if not rel.endswith(".py"):
                continue  # .pyi stub inside the project: not a fresco unit
            if n.name == "<lambda>":
                uid = units.lambda_at(rel, n.line)
                targets.append(uid or "UNMAPPED:%s:%s:<lambda>" % (rel, n.line))
                continue
            uid = units.innermost(rel, n.line, DEF_KINDS, name=n.name)
            targets.append(uid or "UNMAPPED:%s:%s:%s" % (rel, n.line, n.name))
        elif (n.full_name or "").startswith(("builtins.classmethod", "builtins.staticmethod")):
            continue  # jedi lost a method stored in a variable (`f = C.classmeth`): no answer
        else:
            outside.append(n.full_name or n.name)
    site.targets = sorted(set(targets))
    site.outside = sorted(set(outside))
    site.answer = "project" if targets else ("outside" if outside else "none")


# --------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------
def compare(root, fresco, sample=None, log=sys.stderr):
    root = os.path.abspath(root)
    t0 = time.time()
    nodes, edges = run_fresco(fresco, root)
    units = UnitIndex(nodes)
    files = sorted(units.module_of_file)
    if sample:
        files = files[::max(1, len(files) // sample)][:sample]
    project = jedi.Project(root, added_sys_path=package_roots(nodes, root))

    sites, srcs = [], {}
    for i, rel in enumerate(files):
        path = os.path.join(root, rel)
        code = open(path, encoding="utf-8", errors="replace").read()
        srcs[rel] = code.split("\n")
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        col = SiteCollector(rel, srcs[rel])
        col.visit(tree)
        script = jedi.Script(code, path=path, project=project)
        module_id = units.module_of_file[rel]
        lambda_ids = col.lambda_ids(module_id, units)
        for s in col.sites:
            s.caller = col.scope_id(s.scope_line, module_id, units, lambda_ids)
            resolve_site(script, s, root, units)
        sites.extend(col.sites)
        print("  [%d/%d] %s: %d sites (%.0fs)" % (i + 1, len(files), rel, len(col.sites),
                                                 time.time() - t0), file=log)

    # ---- fresco calls edges to in-project units, in the files considered ----
    file_set = set(files)
    fr = set()
    for e in edges:
        if e["kind"] != "calls":
            continue
        src, dst = units.by_id.get(e["src"]), units.by_id.get(e["dst"])
        if dst is None or dst["kind"] == "external" or src is None or src["file"] not in file_set:
            continue
        fr.add((e["src"], e["dst"], e["line"]))
    # a constructor: fresco's class edge is the match; drop its extra __init__ edge(s)
    class_at = {(s, l) for (s, d, l) in fr if units.by_id[d]["kind"] == "class"}
    fr_init_dropped = {x for x in fr if last_name(x[1]) == "__init__" and (x[0], x[2]) in class_at}
    fr -= fr_init_dropped

    # ---- oracle edges ----
    sites_at = collections.defaultdict(list)  # (caller, line) -> sites
    for s in sites:
        for l in s.lines:
            sites_at[(s.caller, l)].append(s)
    oracle = {}  # (caller, callee, site line) -> site
    for s in sites:
        if s.answer == "project":
            for t in s.targets:
                oracle[(s.caller, t, s.line)] = s

    def fresco_has(caller, callee, site):
        return any((caller, callee, l) in fr for l in site.lines)

    matched_oracle = {k for k, s in oracle.items() if fresco_has(k[0], k[1], s)}
    missed = {k: s for k, s in oracle.items() if k not in matched_oracle}

    fr_status = {}
    for (c, d, l) in fr:
        ss = sites_at.get((c, l), [])
        if any(s.answer == "project" and d in s.targets for s in ss):
            fr_status[(c, d, l)] = "matched"
        elif not ss:
            fr_status[(c, d, l)] = "nosite"
        elif all(s.answer in ("project", "outside") for s in ss) and any(
                s.answer == "project" for s in ss):
            fr_status[(c, d, l)] = "false"
        elif all(s.answer == "outside" for s in ss):
            fr_status[(c, d, l)] = "jedi_outside"
        else:
            fr_status[(c, d, l)] = "unjudged"

    # ---- fresco edges that no call site explains: implicit calls (property read, callback).
    # If the callee is a property and jedi resolves a name on that line to it, the edge is a
    # correct property-getter call (status "property"); it stays out of precision/recall, which
    # are about explicit call sites, and is reported on its own.
    nosite_info = {}
    scripts = {}
    for (c, d, l), st in list(fr_status.items()):
        if st == "matched":
            continue
        rel = units.by_id[c]["file"]
        dn = units.by_id[d]
        name = last_name(d)
        text = srcs[rel][l - 1] if l and l <= len(srcs[rel]) else ""
        is_prop = False
        if dn["file"] in srcs or os.path.exists(os.path.join(root, dn["file"] or "")):
            dsrc = srcs.get(dn["file"]) or open(os.path.join(root, dn["file"])).read().split("\n")
            deco = "\n".join(dsrc[dn["start_line"] - 1:dn["start_line"] + 3])
            is_prop = "property" in deco or ".setter" in deco
        jedi_same = None
        idx = text.find(name)
        while idx >= 0 and jedi_same is None:
            if rel not in scripts:
                scripts[rel] = jedi.Script("\n".join(srcs[rel]), path=os.path.join(root, rel),
                                           project=project)
            try:
                ns = scripts[rel].goto(l, idx, follow_imports=True)
            except Exception:
                ns = []
            for n in ns:
                if under(n.module_path, root) and n.line is not None:
                    r2 = os.path.relpath(str(n.module_path), root)
                    u = units.innermost(r2, n.line, DEF_KINDS, name=n.name)
                    # a property with a setter is two defs (`p`, `p#2`, or one unit): either
                    # def of that name in the callee's file matches
                    if (u is not None and strip_dup(u) == strip_dup(d)) or (
                            n.name == last_name(d) and r2 == dn["file"]):
                        jedi_same = True
            idx = text.find(name, idx + 1)
        nosite_info[(c, d, l)] = {"property": is_prop, "jedi_same": bool(jedi_same),
                                  "text": text.strip(), "was": st}
        if is_prop and jedi_same:
            fr_status[(c, d, l)] = "property"

    # ---- implicit calls of the iterator protocol: `for x in obj` calls obj's `__iter__` and the
    # iterator's `__next__` on the iterable's line. When jedi infers the iterable to be an
    # instance of the `__iter__`'s class (a constructor call, or a call returning one), the edge
    # is correct
    # (status "protocol"; `__next__` follows its `__iter__`); like property reads it stays out of
    # precision/recall.
    iter_ok, iterables = set(), {}
    protocol = [(k, st) for k, st in fr_status.items()
                if st != "matched" and last_name(k[1]) in ("__iter__", "__next__", "__aiter__", "__anext__")]
    for (c, d, l), st in sorted(protocol, key=lambda kv: last_name(kv[0][1]) not in ("__iter__", "__aiter__")):
        rel = units.by_id[c]["file"]
        text = srcs[rel][l - 1] if l and l <= len(srcs[rel]) else ""
        owner = units.by_id[d]["id"].rsplit(".", 1)[0]
        ok = False
        if last_name(d) in ("__next__", "__anext__"):
            ok = (c, l) in iter_ok
        else:
            if rel not in iterables:
                iterables[rel] = iterables_by_line("\n".join(srcs[rel]))
            for it in iterables[rel].get(l, []):
                callee = it.func if isinstance(it, ast.Call) else it
                pos = name_position(callee)
                if pos is None:
                    continue
                if rel not in scripts:
                    scripts[rel] = jedi.Script("\n".join(srcs[rel]), path=os.path.join(root, rel),
                                               project=project)
                try:
                    inferred = scripts[rel].infer(pos[0], char_col(srcs[rel], pos[0], pos[1]))
                except Exception:
                    inferred = []
                if isinstance(it, ast.Call):
                    # `for x in Cls(...)`: the class; `for x in f(...)`: what f returns
                    results = []
                    for n in inferred:
                        if n.type == "class":
                            results.append(n)
                        elif n.type == "function":
                            try:
                                results.extend(n.execute())
                            except Exception:
                                pass
                    ok = ok or any(r.type in ("class", "instance") and r.name == last_name(owner)
                                   for r in results)
                else:
                    ok = ok or any(n.type == "instance" and n.name == last_name(owner) for n in inferred)
            if ok:
                iter_ok.add((c, l))
        nosite_info[(c, d, l)] = {"property": False, "protocol": ok, "text": text.strip(), "was": st}
        if ok:
            fr_status[(c, d, l)] = "protocol"

    # ---- pair level ----
    o_pairs = {(c, d) for (c, d, _) in oracle}
    f_pairs_all = {(c, d) for (c, d, _) in fr}
    f_pairs_judged = {(c, d) for (c, d, l), st in fr_status.items() if st in ("matched", "false")}

    n_false = sum(1 for st in fr_status.values() if st == "false")
    n_match_f = sum(1 for st in fr_status.values() if st == "matched")
    res = {
        "root": root,
        "files": len(files),
        "sites": len(sites),
        "sites_by_answer": dict(collections.Counter(s.answer for s in sites)),
        "oracle_edges": len(oracle),
        "oracle_unmapped": sum(1 for k in oracle if k[1].startswith("UNMAPPED")),
        "fresco_edges": len(fr),
        "fresco_init_edges_dropped": len(fr_init_dropped),
        "fresco_status": dict(collections.Counter(fr_status.values())),
        "matched": len(matched_oracle),
        "recall": len(matched_oracle) / max(1, len(oracle)),
        "precision": n_match_f / max(1, n_match_f + n_false),
        "lambda_targets": sum(1 for x in sites if any(is_lambda(t) for t in x.targets)),
        "pairs": {
            "oracle": len(o_pairs), "fresco": len(f_pairs_all),
            "matched": len(o_pairs & f_pairs_all),
            "recall": len(o_pairs & f_pairs_all) / max(1, len(o_pairs)),
            "judged": len(f_pairs_judged),
            "precision": len(f_pairs_judged & o_pairs) / max(1, len(f_pairs_judged)),
        },
        "seconds": time.time() - t0,
    }

    # class hierarchy from fresco's inherits edges, to tell override fan-out from base picks
    bases = collections.defaultdict(set)
    for e in edges:
        if e["kind"] == "inherits":
            bases[e["src"]].add(e["dst"])

    def ancestors(c):
        seen, todo = set(), [c]
        while todo:
            for b in bases.get(todo.pop(), ()):
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return seen

    def owner(q):
        n = units.by_id.get(q)
        return q.rsplit(".", 1)[0] if n and n["kind"] == "method" else None

    def relation(d, targets, here):
        """How a fresco callee relates to jedi's targets at the site."""
        for t in targets:
            if d.startswith(t + "."):
                return "closure defined inside jedi's target"
            if last_name(d) == last_name(t) and owner(d) and owner(t):
                if owner(t) in ancestors(owner(d)):
                    return ("override of jedi's target (fan-out), jedi's target also emitted"
                            if t in here else "override of jedi's target, jedi's target missing")
                if owner(d) in ancestors(owner(t)):
                    return "base-class method although jedi's class overrides it"
                return "same name, unrelated class"
        return "other callee"

    def site_rec(s, extra=None):
        text = srcs[s.file][s.line - 1].strip() if s.line <= len(srcs[s.file]) else ""
        r = {"file": s.file, "line": s.line, "kind": s.kind, "expr": s.expr, "src": text,
             "caller": s.caller, "jedi": s.targets or s.outside, "jedi_raw": s.jedi_desc[:4],
             "fresco_here": sorted({d for (c, d, l) in fr if c == s.caller and l in s.lines})}
        if extra:
            r.update(extra)
        return r

    dis = {
        "missed": [site_rec(s, {"expected": k[1]}) for k, s in sorted(missed.items(),
                                                                      key=lambda kv: (kv[1].file, kv[1].line))],
        "false": [],
        "jedi_outside": [],
        "nosite": [],
        "property": [],
        "protocol": [],
    }
    for (c, d, l), st in sorted(fr_status.items(), key=lambda kv: (str(kv[0][0]), kv[0][2] or 0)):
        if st in ("false", "jedi_outside"):
            ss = sites_at[(c, l)]
            s = next((x for x in ss if x.answer == "project"), ss[0])
            here = sorted({d2 for (c2, d2, l2) in fr if c2 == c and l2 == l})
            tg = [t for x in ss for t in x.targets]
            rec = site_rec(s, {"fresco_dst": d, "edge_line": l, "relation": relation(d, tg, here),
                               "all_sites": [(x.expr, x.targets or x.outside) for x in ss]})
            dis[st].append(rec)
        elif st in ("nosite", "property", "protocol"):
            rel = units.by_id[c]["file"]
            dis[st].append({"file": rel, "line": l, "caller": c, "fresco_dst": d,
                            **nosite_info[(c, d, l)]})
    rel = collections.Counter(r["relation"] for r in dis["false"])
    res["false_by_relation"] = dict(rel)
    fan = rel.get("override of jedi's target (fan-out), jedi's target also emitted", 0)
    # the same, not counting fresco's extra override targets (dispatch fan-out) as false
    res["precision_excl_fanout"] = n_match_f / max(1, n_match_f + n_false - fan)
    return res, dis


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--fresco", default="/tmp/fresco-accuracy/fresco")
    ap.add_argument("--json", help="write summary + disagreements here")
    ap.add_argument("--sample", type=int, help="only this many files (evenly spaced)")
    a = ap.parse_args()
    res, dis = compare(a.root, a.fresco, a.sample)
    print(json.dumps(res, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": res, "disagreements": dis, "jedi": jedi.__version__}, f,
                      indent=1)


if __name__ == "__main__":
    main()
