#!/usr/bin/env python3
"""Call-edge recall of fresco against the calls a project's own test suite really makes.

For one project root this script

1. copies ROOT to a temporary directory (the original is never touched), creates (or reuses,
   ``--venv``) a throw-away venv, ``pip install -e``'s the copy (its source dirs also go on
   ``PYTHONPATH``, so the run works when that install fails) plus pytest and the test
   requirements it finds (``requirements/tests.txt``, ``requirements-dev.txt``, ... or
   ``--requirements``);
2. runs pytest on the copy's TESTS_DIR under a ``sys.setprofile`` / ``threading.setprofile``
   tracer (this very script, re-run with the venv's python in its ``_trace`` mode). On every
   ``call`` event whose frame runs code from the project's *source* files (``--src`` dirs; by
   default ``ROOT/src``, else the top-level packages; never the tests, never site-packages) it
   records (caller code, callee code, caller line) where the caller is the calling frame, or,
   when that frame belongs to the stdlib / site-packages (``with self.scope()`` entering a
   ``contextlib`` generator, ``json.dumps(default=f)``, a werkzeug test client calling the app),
   the nearest project frame above it (then the pair is marked ``via`` that library frame; the
   walk stops at a test file). The line is the caller frame's ``f_lineno`` at the call. A
   generator's frame is "called" on each resumption, so its pairs are recorded from whoever
   iterates it; calling a generator function runs no frame, so a project frame *returning* a
   project generator object is also recorded as calling it, at its return line (this catches
   ``return self.generator()``, not a generator stored or passed on); calls of an ``__init__``
   also record the class of ``self``;
3. maps code objects to fresco units: the code object's (file relative to the root,
   ``co_firstlineno``, ``co_name``) is matched with ``ast`` to the ``def``/``class``/``lambda`` that
   starts there (``co_firstlineno`` is the first decorator's line for a decorated def), then to
   fresco's innermost ``function``/``method``/``class`` unit in that file whose span contains the
   ``def`` line and whose last name component is the def's name (fresco's ``start_line`` may
   include the decorators and comments above the def; the span test does not depend on it).
   Nested functions are fresco units of their own and map to themselves; a lambda maps to
   fresco's lambda unit (``owner.<lambdaN>``) starting on its line when there is exactly one
   (else it is "unmapped"); comprehension / generator-expression code objects are not units:
   as callers they map to the innermost function unit containing them, as callees they are
   ignored. Module and class bodies are not callers (only functions / methods / lambdas are);
4. runs ``BIN export COPY --db TMP --out TMP`` and keeps its ``calls`` edges between units of the
   source files. An observed pair (caller, callee) is *found* when fresco has a ``calls`` edge
   caller -> callee at any line (for an ``__init__`` callee, an edge to its class counts too);
5. classifies each observed pair by the caller's source at the observed line(s), with ``ast``:
   - ``direct``: a call expression spanning that line whose function is a name or attribute
     ending with the callee's name (for ``__init__``: the name of the defining class, of the
     runtime class of ``self``, or ``__init__`` itself as in ``super().__init__()``);
   - ``indirect``: the line holds call expressions but none names the callee (a call through a
     parameter / variable / stored callback, ``cls(...)``, a wrapper, a library calling back);
   - ``implicit``: no call expression at that line (property getters, operators and dunder
     protocols, generator resumption in a ``for``, ...), and every ``__del__`` (the garbage
     collector runs it wherever it triggers).
   A pair seen at several lines takes the strongest class. A pair only seen through a library
   frame is never ``direct`` unless that library is ``contextlib`` (``with self.scope():`` of a
   ``@contextmanager`` generator is a direct call of ``scope``; ``s.loads()`` of itsdangerous
   calling back the project's serializer's ``loads`` is not);
6. project decorators: calling a function decorated by one runs the decorator's wrapper W (a
   nested function) first. When A called W at a line whose call names N (not W), and that
   W-frame called F, a function W closes over, named N, the pair (A, F) is added (the call as
   written, classified as above) and (A, W) is counted apart as ``wrapper``. One level only.

Recall is reported per class; the ``direct`` recall is the number that matters. Every missed
pair is dumped with its call site (file, line, source text) and fresco's callees at that line.
It also lists fresco ``calls`` edges between two units that both ran but whose pair was never
observed. That is only a weak hint of imprecision (the tests may not exercise that path; a
``functools.cached_property`` getter runs once per object), not a precision measure.

Limits: only code the tests execute is seen; subprocesses are not traced; calls from test files
and into code outside the source dirs are out of scope by design; a generator stored before it is
returned or iterated is attributed to whoever iterates it; a comprehension inside a lambda is
attributed to the lambda's owner. pytest runs with ``-p no:warnings`` by default (the projects'
``filterwarnings = error`` turns deprecation warnings of newer dependencies into failures).
Needs Python 3.11+ (``co_qualname``).

Usage:
    python3 dynamic_oracle.py ROOT --fresco BIN [--tests tests] [--venv DIR] [--src DIR ...]
        [--requirements FILE ...] [--pip PKG ...] [--json OUT.json] [--pytest-args ARGS...]
Everything the tests need is installed in the venv (bench-only); the script itself is standard
library only and also runs as the tracer inside that venv.
"""
import argparse
import ast
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

FUNC_KINDS = {"function", "method"}
COMPREHENSIONS = {"<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>"}
DEFAULT_PYTEST_ARGS = ["-q", "-p", "no:cacheprovider", "-p", "no:warnings"]
REQ_CANDIDATES = ["requirements/tests.txt", "requirements/test.txt", "requirements-test.txt",
                  "requirements-tests.txt", "requirements-dev.txt", "test-requirements.txt"]


# --------------------------------------------------------------------------------------------
# tracer (runs inside the venv: `python dynamic_oracle.py _trace OUT SRC... -- PYTEST ARGS`)
# --------------------------------------------------------------------------------------------
def trace_main(argv):
    out, rest = argv[0], argv[1:]
    sep = rest.index("--")
    src_dirs = tuple(os.path.realpath(d).rstrip("/") + "/" for d in rest[:sep])
    tests_dir = os.path.realpath(rest[sep + 1]).rstrip("/") + "/"
    pytest_args = rest[sep + 1:]
    import threading
    import types

    kind_of = {}   # code -> 'p' (project source), 't' (test / other file under ROOT), 'l' (library)
    pairs = {}     # (caller code, callee code) -> {"lines": set, "via": set, "cls": set, "n": int}
    executed = set()
    wrapped = {}   # (caller code, nested-function code, its callee code) -> caller lines
    root_prefix = os.path.commonpath([d for d in src_dirs] + [tests_dir]).rstrip("/") + "/"

    def kind(code):
        k = kind_of.get(code)
        if k is None:
            f = os.path.realpath(code.co_filename)
            if f.startswith(src_dirs) and not f.startswith(tests_dir):
                k = "p"
            elif f.startswith(tests_dir) or f.startswith(root_prefix):
                k = "t"
            else:
                k = "l"
            kind_of[code] = k
        return k

    gen_types = (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)

    def observe(key, line):
        """Counts one call of the pair `key` at the caller's `line`; returns its record."""
        rec = pairs.get(key)
        if rec is None:
            rec = pairs[key] = {"lines": set(), "via": set(), "cls": set(), "n": 0}
        rec["n"] += 1
        if len(rec["lines"]) < 50:
            rec["lines"].add(line)
        return rec

    def prof(frame, event, arg):
        if event == "return":
            # a generator function's frame first runs when someone iterates it, not at the
            # call `self.gen()`; catch the call site when the caller returns the generator
            if type(arg) in gen_types and kind(frame.f_code) == "p":
                g = getattr(arg, "gi_code", None) or getattr(arg, "cr_code", None) or \
                    getattr(arg, "ag_code", None)
                if g is not None and kind(g) == "p":
                    rec = observe((frame.f_code, g), frame.f_lineno)
                    rec["via"].add("<returns generator>")
            return
        if event != "call":
            return
        code = frame.f_code
        if kind(code) != "p":
            return
        executed.add(code)
        back = frame.f_back
        via = None
        depth = 0
        while back is not None:
            k = kind(back.f_code)
            if k == "p":
                break
            if k == "t" or depth > 12:
                back = None
                break
            if via is None:
                via = "%s:%s" % (os.path.basename(back.f_code.co_filename), back.f_code.co_name)
            back = back.f_back
            depth += 1
        if back is None:
            return
        rec = observe((back.f_code, code), back.f_lineno)
        if via is not None and len(rec["via"]) < 5:
            rec["via"].add(via)
        elif via is None:
            rec["via"].add("")
        if via is None and back.f_code.co_freevars and "<locals>" in back.f_code.co_qualname:
            # the caller is a nested function calling a function it closes over (a decorator's
            # wrapper calling the decorated function): keep who called the wrapper
            gp = back.f_back
            loc = back.f_locals
            if gp is not None and kind(gp.f_code) == "p" and any(
                    getattr(loc.get(v), "__code__", None) is code
                    for v in back.f_code.co_freevars):
                ls = wrapped.setdefault((gp.f_code, back.f_code, code), set())
                if len(ls) < 20:
                    ls.add(gp.f_lineno)
        if code.co_name == "__init__" and len(rec["cls"]) < 10:
            try:
                rec["cls"].add(type(frame.f_locals.get("self")).__name__)
            except Exception:
                pass

    import pytest
    threading.setprofile(prof)
    sys.setprofile(prof)
    try:
        rc = pytest.main(pytest_args)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)

    def cid(c):
        return [os.path.realpath(c.co_filename), c.co_firstlineno, c.co_name]

    with open(out, "w") as f:
        json.dump({"rc": int(rc),
                   "pairs": [{"caller": cid(a), "callee": cid(b), "lines": sorted(r["lines"]),
                              "via": sorted(r["via"]), "cls": sorted(r["cls"]), "n": r["n"]}
                             for (a, b), r in pairs.items()],
                   "wrapped": [{"caller": cid(a), "wrapper": cid(w), "callee": cid(b),
                                "lines": sorted(ls)} for (a, w, b), ls in wrapped.items()],
                   "executed": [cid(c) for c in executed]}, f)


# --------------------------------------------------------------------------------------------
# environment: copy, venv, test run
# --------------------------------------------------------------------------------------------
def default_src_dirs(root, tests):
    if os.path.isdir(os.path.join(root, "src")):
        return ["src"]
    skip = {tests.rstrip("/"), "tests", "test", "docs", "doc", "examples", "benchmarks", "build"}
    return sorted(d for d in os.listdir(root)
                  if d not in skip and not d.startswith(".")
                  and os.path.isfile(os.path.join(root, d, "__init__.py")))


def run(cmd, log, **kw):
    print("  $ " + " ".join(cmd), file=log)
    return subprocess.run(cmd, **kw)


def prepare_venv(venv, copy, reqs, extra, log):
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        run([sys.executable, "-m", "venv", venv], log, check=True)
    pip = [py, "-m", "pip", "install", "-q"]
    editable = run(pip + ["-e", copy], log, cwd=copy).returncode == 0
    cmd = pip + ["pytest"] + list(extra)
    for r in reqs:
        cmd += ["-r", os.path.join(copy, r)]
    if run(cmd, log, cwd=copy).returncode != 0:
        # a pinned file that does not resolve: fall back to pytest + extras only
        run(pip + ["pytest"] + list(extra), log, cwd=copy, check=True)
    return py, editable


def run_traced(py, copy, src_dirs, tests, pytest_args, work, log):
    out = os.path.join(work, "trace.json")
    env = dict(os.environ)
    # without an editable install the source dirs go on sys.path; harmless with one
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(copy, d) for d in src_dirs] +
                                        ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    cmd = ([py, os.path.abspath(__file__), "_trace", out]
           + [os.path.join(copy, d) for d in src_dirs]
           + ["--", os.path.join(copy, tests)] + list(pytest_args))
    t = time.time()
    p = run(cmd, log, cwd=copy, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True)
    tail = p.stdout.strip().splitlines()[-3:]
    print("    pytest: %s (%.0fs)" % (" | ".join(tail), time.time() - t), file=log)
    with open(out) as f:
        data = json.load(f)
    data["pytest_tail"] = tail
    data["seconds"] = time.time() - t
    return data


# --------------------------------------------------------------------------------------------
# fresco side
# --------------------------------------------------------------------------------------------
def run_fresco(fresco, root, tmp):
    out = os.path.join(tmp, "out")
    subprocess.run([fresco, "export", root, "--db", os.path.join(tmp, "db"), "--out", out],
                   check=True, stdout=subprocess.DEVNULL)
    nodes = [json.loads(l) for l in open(os.path.join(out, "nodes.jsonl"))]
    edges = [json.loads(l) for l in open(os.path.join(out, "edges.jsonl"))]
    return nodes, edges


def last_name(qid):
    """`a.b.f#2` -> `f`."""
    return qid.rsplit(".", 1)[-1].split("#")[0]


class Units:
    def __init__(self, nodes):
        self.by_id = {n["id"]: n for n in nodes}
        self.by_file = collections.defaultdict(list)
        for n in nodes:
            if n["file"] and n["kind"] in ("function", "method", "class", "module"):
                self.by_file[n["file"]].append(n)

    def innermost(self, file, line, kinds, name=None):
        best = None
        for n in self.by_file.get(file, ()):
            if n["kind"] not in kinds or n["id"].endswith(">") and name != "<lambda>":
                continue
            if name is not None and last_name(n["id"]) != name:
                continue
            if n["start_line"] <= line <= n["end_line"]:
                span = n["end_line"] - n["start_line"]
                if best is None or span < best["end_line"] - best["start_line"]:
                    best = n
        return best

    def lambda_at(self, file, line):
        found = [n for n in self.by_file.get(file, ())
                 if last_name(n["id"]).startswith("<lambda") and n["start_line"] == line]
        return found[0] if len(found) == 1 else None


# --------------------------------------------------------------------------------------------
# source side: defs by first line, calls by line
# --------------------------------------------------------------------------------------------
class Source:
    def __init__(self, path):
        self.text = open(path, encoding="utf-8", errors="replace").read()
        self.lines = self.text.split("\n")
        self.tree = ast.parse(self.text)
        self.defs = collections.defaultdict(list)   # first line -> [(name, def line, kind)]
        self.calls = collections.defaultdict(list)  # line -> [ast.Call]
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([d.lineno for d in node.decorator_list] + [node.lineno])
                k = "class" if isinstance(node, ast.ClassDef) else "def"
                self.defs[first].append((node.name, node.lineno, k))
            elif isinstance(node, ast.Lambda):
                self.defs[node.lineno].append(("<lambda>", node.lineno, "lambda"))
            elif isinstance(node, ast.Call):
                for l in range(node.lineno, node.end_lineno + 1):
                    self.calls[l].append(node)

    def line(self, n):
        return self.lines[n - 1].strip() if 0 < n <= len(self.lines) else ""


def call_name(call):
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


class Mapper:
    """Code-object ids [abs file, firstlineno, co_name] -> fresco unit ids."""

    def __init__(self, copy, units, src_files):
        self.copy, self.units, self.src_files = copy, units, src_files
        self.sources = {}
        self.cache = {}
        self.problems = collections.Counter()

    def source(self, rel):
        if rel not in self.sources:
            try:
                self.sources[rel] = Source(os.path.join(self.copy, rel))
            except (OSError, SyntaxError):
                self.sources[rel] = None
        return self.sources[rel]

    def rel(self, path):
        r = os.path.relpath(path, self.copy)
        return r if r in self.src_files else None

    def map(self, cid, as_caller):
        """('unit', id) | ('skip', why) | ('unmapped', why)."""
        key = (tuple(cid), as_caller)
        if key not in self.cache:
            self.cache[key] = self._map(*cid, as_caller=as_caller)
        return self.cache[key]

    def _map(self, path, first, name, as_caller):
        rel = self.rel(path)
        if rel is None:
            return ("unmapped", "file not indexed by fresco")
        if name == "<module>":
            return ("skip", "module body")
        if name in COMPREHENSIONS:
            if not as_caller:
                return ("skip", "comprehension")
            n = self.units.innermost(rel, first, FUNC_KINDS | {"class", "module"})
            if n is None or n["kind"] not in FUNC_KINDS:
                return ("skip", "comprehension outside a function")
            return ("unit", n["id"])
        src = self.source(rel)
        if src is None:
            return ("unmapped", "unparsable file")
        cands = [d for d in src.defs.get(first, ()) if d[0] == name]
        if not cands:
            return ("unmapped", "no def %s at %s:%d" % (name, rel, first))
        dname, dline, dkind = cands[0]
        if dkind == "class":
            return ("skip", "class body")
        if dkind == "lambda":
            n = self.units.lambda_at(rel, dline)
            return ("unit", n["id"]) if n else ("unmapped", "lambda at %s:%d" % (rel, dline))
        n = self.units.innermost(rel, dline, FUNC_KINDS, name=dname)
        if n is None:
            return ("unmapped", "no fresco unit for %s at %s:%d" % (dname, rel, dline))
        return ("unit", n["id"])


def classify(src, lines, callee_id, callee_name, classes, library_only):
    """('direct'|'indirect'|'implicit', line) for the strongest observed line. `library_only`:
    the pair was only seen through a library frame other than contextlib's, so a call at that
    line naming the callee names the library's function (`s.loads()` of itsdangerous calling
    back the project's `loads`), not the callee."""
    owner = callee_id.rsplit(".", 1)[0]
    ok_names = {callee_name}
    if callee_name == "__init__":
        ok_names |= {last_name(owner)} | set(classes)
    best = ("implicit", lines[0])
    if callee_name == "__del__":
        return best  # run by the garbage collector wherever it happens to trigger
    for l in lines:
        calls = src.calls.get(l, [])
        if not library_only and any(call_name(c) in ok_names for c in calls):
            return ("direct", l)
        if calls and best[0] == "implicit":
            best = ("indirect", l)
    return best


# --------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------
def compare(trace, nodes, edges, copy, src_dirs):
    units = Units(nodes)
    src_files = {n["file"] for n in nodes if n["kind"] == "module" and n["file"]
                 and any(n["file"].startswith(d.rstrip("/") + "/") or d in (".", "")
                         for d in src_dirs)}
    mapper = Mapper(copy, units, src_files)

    fr = collections.defaultdict(set)  # (src, dst) -> lines
    for e in edges:
        if e["kind"] != "calls":
            continue
        s, d = units.by_id.get(e["src"]), units.by_id.get(e["dst"])
        if s and d and s["file"] in src_files and d["file"] in src_files:
            fr[(e["src"], e["dst"])].add(e["line"])

    def fresco_has(c, d):
        if (c, d) in fr:
            return True
        if last_name(d) == "__init__":
            return (c, d.rsplit(".", 1)[0]) in fr
        return False

    observed = {}  # (caller unit, callee unit) -> info
    unmapped = collections.Counter()
    skipped = collections.Counter()
    for p in trace["pairs"]:
        mc, md = mapper.map(p["caller"], True), mapper.map(p["callee"], False)
        if mc[0] != "unit" or md[0] != "unit":
            for m in (mc, md):
                if m[0] == "unmapped":
                    unmapped[m[1]] += 1
                elif m[0] == "skip":
                    skipped[m[1]] += 1
            continue
        if units.by_id[mc[1]]["kind"] not in FUNC_KINDS:
            continue
        rec = observed.setdefault((mc[1], md[1]), {"lines": set(), "via": set(), "cls": set(),
                                                   "n": 0})
        rec["lines"] |= set(p["lines"])
        rec["via"] |= set(p["via"])
        rec["cls"] |= set(p["cls"])
        rec["n"] += p["n"]

    # project decorators: `self.record_once(f)` runs the decorator's wrapper (`wrapper_func`),
    # which calls the decorated `record_once`. The tracer keeps, for each call a nested function
    # W makes of a function it closes over, who called W (A, at its line); when that line of A
    # calls a name N (and not W's name) and W's callee F is named N, the pair (A, F) is added (the
    # call as written) and (A, W) is counted apart as "wrapper". Stacked decorators are not
    # unwound further.
    wrapped = set()
    for t in trace.get("wrapped", ()):
        ma, mw, mf = (mapper.map(t["caller"], True), mapper.map(t["wrapper"], True),
                      mapper.map(t["callee"], False))
        if ma[0] != "unit" or mw[0] != "unit" or mf[0] != "unit":
            continue
        a, w, f = ma[1], mw[1], mf[1]
        if (a, w) not in observed or units.by_id[a]["kind"] not in FUNC_KINDS:
            continue
        src = mapper.source(units.by_id[a]["file"])
        lines = {l for l in t["lines"]
                 if any(call_name(c) == last_name(f) for c in src.calls.get(l, []))
                 and not any(call_name(c) == last_name(w) for c in src.calls.get(l, []))}
        if not lines:
            continue
        r2 = observed.setdefault((a, f), {"lines": set(), "via": set(), "cls": set(), "n": 0})
        r2["lines"] |= lines
        r2["via"] |= {"", "wrapper:" + w}
        r2["n"] += 1
        wrapped.add((a, w))

    executed = set()
    for cid in trace["executed"]:
        m = mapper.map(cid, True)
        if m[0] == "unit":
            executed.add(m[1])

    rows = []
    for (c, d), rec in observed.items():
        rel = units.by_id[c]["file"]
        src = mapper.source(rel)
        lines = sorted(rec["lines"])
        library_only = "" not in rec["via"] and any(
            not v.startswith(("contextlib.py:", "<returns generator>")) for v in rec["via"])
        cls, line = classify(src, lines, d, last_name(d), rec["cls"], library_only)
        if (c, d) in wrapped:
            cls = "wrapper"
        rows.append({"caller": c, "callee": d, "class": cls, "found": fresco_has(c, d),
                     "file": rel, "line": line, "src": src.line(line),
                     "lines": lines[:10], "via": sorted(v for v in rec["via"] if v),
                     "direct_frame": bool(rec["via"] & {"", "<returns generator>"}),
                     "runtime_cls": sorted(rec["cls"]),
                     "n": rec["n"],
                     "fresco_at_line": sorted(dd for (cc, dd), ls in fr.items()
                                              if cc == c and line in ls)})
    rows.sort(key=lambda r: (r["file"], r["line"], r["callee"]))

    by_class = {}
    for k in ("direct", "indirect", "implicit", "wrapper"):
        rs = [r for r in rows if r["class"] == k]
        by_class[k] = {"pairs": len(rs), "found": sum(r["found"] for r in rs),
                       "recall": sum(r["found"] for r in rs) / max(1, len(rs))}
    obs_pairs = set(observed)
    obs_with_init_class = obs_pairs | {(c, d.rsplit(".", 1)[0]) for (c, d) in obs_pairs
                                       if last_name(d) == "__init__"}
    unobserved = []
    for (c, d), ls in sorted(fr.items()):
        if units.by_id[c]["kind"] not in FUNC_KINDS or units.by_id[d]["kind"] not in FUNC_KINDS:
            continue
        if c in executed and d in executed and (c, d) not in obs_with_init_class:
            rel = units.by_id[c]["file"]
            l = min(x for x in ls if x) if any(ls) else 0
            unobserved.append({"caller": c, "callee": d, "file": rel, "line": l,
                               "src": mapper.source(rel).line(l) if l else ""})
    summary = {
        "src_files": len(src_files),
        "executed_units": len(executed),
        "fresco_calls_edges_in_src": len(fr),
        "observed_pairs": len(rows),
        "found": sum(r["found"] for r in rows),
        "recall_all": sum(r["found"] for r in rows) / max(1, len(rows)),
        "by_class": by_class,
        "pairs_only_via_library": sum(1 for r in rows if not r["direct_frame"]),
        "unmapped_code_pairs": dict(unmapped.most_common(20)),
        "unmapped_total": sum(unmapped.values()),
        "skipped_code_pairs": dict(skipped),
        "fresco_edges_both_executed": sum(
            1 for (c, d) in fr if c in executed and d in executed
            and units.by_id[c]["kind"] in FUNC_KINDS and units.by_id[d]["kind"] in FUNC_KINDS),
        "fresco_edges_both_executed_unobserved": len(unobserved),
    }
    return summary, rows, unobserved


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_trace":
        trace_main(sys.argv[2:])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("root")
    ap.add_argument("--fresco", required=True)
    ap.add_argument("--tests", default="tests", help="test directory, relative to ROOT")
    ap.add_argument("--venv", help="venv to create or reuse (default: a temporary one)")
    ap.add_argument("--src", action="append", help="source dir relative to ROOT (repeatable)")
    ap.add_argument("--requirements", action="append",
                    help="requirements file relative to ROOT (default: the first of %s found)"
                    % ", ".join(REQ_CANDIDATES))
    ap.add_argument("--pip", action="append", default=[], help="extra package for the venv")
    ap.add_argument("--json", help="write summary + every observed pair here")
    ap.add_argument("--keep", action="store_true", help="keep the temporary copy")
    ap.add_argument("--pytest-args", nargs=argparse.REMAINDER, default=None,
                    help="pytest arguments (default: %s)" % " ".join(DEFAULT_PYTEST_ARGS))
    a = ap.parse_args()
    log = sys.stderr
    root = os.path.abspath(a.root)
    work = tempfile.mkdtemp(prefix="dyn-oracle-")
    copy = os.path.join(work, os.path.basename(root))
    shutil.copytree(root, copy, symlinks=True, ignore=shutil.ignore_patterns(
        ".fresco", "__pycache__", "*.pyc", ".git"))
    src_dirs = a.src or default_src_dirs(copy, a.tests)
    reqs = a.requirements
    if reqs is None:
        reqs = [r for r in REQ_CANDIDATES if os.path.exists(os.path.join(copy, r))][:1]
    print("copy: %s; src: %s; requirements: %s" % (copy, src_dirs, reqs), file=log)

    t0 = time.time()
    nodes, edges = run_fresco(a.fresco, copy, work)
    t_fresco = time.time() - t0
    venv = a.venv or os.path.join(work, "venv")
    py, editable = prepare_venv(venv, copy, reqs, a.pip, log)
    pytest_args = a.pytest_args if a.pytest_args is not None else DEFAULT_PYTEST_ARGS
    trace = run_traced(py, copy, src_dirs, a.tests, pytest_args, work, log)
    summary, rows, unobserved = compare(trace, nodes, edges, copy, src_dirs)
    summary.update({"root": root, "src_dirs": src_dirs, "requirements": reqs,
                    "editable_install": editable, "pytest": trace["pytest_tail"],
                    "pytest_seconds": round(trace["seconds"]),
                    "fresco_seconds": round(t_fresco, 1)})
    print(json.dumps(summary, indent=2))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"summary": summary,
                       "missed": [r for r in rows if not r["found"]],
                       "pairs": rows, "fresco_unobserved": unobserved}, f, indent=1)
    if not a.keep:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
