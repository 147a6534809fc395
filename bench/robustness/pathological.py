#!/usr/bin/env python3
"""How fresco's indexing time and memory grow with shapes of Python that stress one part of it.

Each shape is a generator of one module, written at three sizes (n, 2n, 4n) into a fresh package
and indexed cold (`fresco index ROOT --db DIR --json`, a new store each time) by each binary
given. Printed per shape, size and binary: the median wall time of three cold indexes (`--reps`), its peak RSS (GNU time), units, edges and
whether the file was flagged with parse errors; then the growth exponent of the time between the
two larger sizes (log2 of their ratio: 1 is linear, 2 quadratic). A shape whose time grows faster
than its input is a way for one file to stall the indexer of a whole repository.

Some shapes go past what CPython accepts (its parser refuses more than 200 nested brackets, 100
indentation levels and deep recursion in its AST builder); fresco must still index them as far as
they parse, flag them, and not stall.

    python3 bench/robustness/pathological.py FRESCO_BIN [FRESCO_BIN ...] [--shapes a,b] [--timeout S]
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile


def inheritance_chain(n):
    # class C_i(C_{i-1}) whose method calls an inherited one: every lookup walks the MRO.
    s = "class C0:\n    def m(self):\n        return self\n"
    for i in range(1, n):
        s += f"class C{i}(C{i - 1}):\n    def m{i}(self):\n        return self.m().m{max(i - 1, 0) or ''}()\n"
    return s


def diamond_lattice(n):
    # Each class inherits from the two before it: wide C3 merges.
    s = "class K0:\n    x = 0\nclass K1(K0):\n    y = 1\n"
    for i in range(2, n):
        s += f"class K{i}(K{i - 1}, K{i - 2}):\n    def f{i}(self):\n        return self.x\n"
    return s


def long_sum(n):
    return "y = " + " + ".join(f"a{i % 50}" for i in range(n)) + "\n"


def nested_brackets(n):
    return "x = " + "(" * n + "1" + ")" * n + "\n"


def call_chain(n):
    return "def f(o):\n    return o" + ".m()" * n + "\n"


def long_body(n):
    return "def big(a):\n" + "".join(f"    a = a.m{i % 300}(a)\n" for i in range(n))


def assignment_chain(n):
    body = "".join(f"    v{i} = v{i - 1}\n" for i in range(1, n))
    return f"class T:\n    def go(self):\n        pass\ndef h():\n    v0 = T()\n{body}    return v{n - 1}.go()\n"


def reassigned_variable(n):
    # One name assigned n times at module level, read by a function: every assignment is a value.
    return "".join(f"x = C{i % 7}()\n" for i in range(n)) + "".join(
        f"class C{i}:\n    def go(self):\n        pass\n" for i in range(7)
    ) + "def use():\n    return x.go()\n"


def big_literal(n):
    return "L = [" + ",".join(f'"s{i}"' for i in range(n)) + "]\n"


def many_functions(n):
    return "".join(f"def f{i}(x):\n    return f{(i * 7) % n}(x) + G{i % 10}\n" for i in range(n)) + "".join(
        f"G{i} = {i}\n" for i in range(10)
    )


def wide_class(n):
    s = "class W:\n"
    for i in range(n):
        s += f"    def m{i}(self):\n        return self.m{(i + 1) % n}()\n"
    return s


def nested_functions(n):
    # Past 99 levels CPython refuses the file ("too many levels of indentation").
    s = ""
    for i in range(n):
        s += "    " * i + f"def f{i}(x):\n"
    return s + "    " * n + "return x\n"


def nested_ifs(n):
    s = "def g(x):\n"
    for i in range(1, n):
        s += "    " * i + "if x:\n"
    return s + "    " * n + "pass\n"


SHAPES = {
    "inheritance_chain": (inheritance_chain, 250),
    "diamond_lattice": (diamond_lattice, 100),
    "long_sum": (long_sum, 25000),
    "nested_brackets": (nested_brackets, 500),
    "call_chain": (call_chain, 2500),
    "long_body": (long_body, 15000),
    "assignment_chain": (assignment_chain, 5000),
    "reassigned_variable": (reassigned_variable, 2000),
    "big_literal": (big_literal, 50000),
    "many_functions": (many_functions, 5000),
    "wide_class": (wide_class, 2500),
    "nested_functions": (nested_functions, 40),
    "nested_ifs": (nested_ifs, 40),
}


# Shapes spanning a package: each gives the body of module m_i of n (written by `write_package`).


def star_import_chain(i, n):
    # m_i does `from .m_{i+1} import *`; the last defines the names.
    body = f"from .m{i + 1} import *\n" if i + 1 < n else "".join(f"def g{j}():\n    pass\n" for j in range(50))
    return body + f"def use{i}():\n    return g{i % 50}()\n"


def alias_chain(i, n):
    # m_i re-exports m_{i+1}'s function under its own name, and calls it through that name.
    body = f"from .m{i + 1} import g{i + 1} as g{i}\n" if i + 1 < n else f"def g{i}():\n    pass\n"
    return body + f"def use{i}():\n    return g{i}()\n"


def import_cycle(i, n):
    # One import cycle: m_i star-imports the next module and calls the previous one's function.
    return f"from .m{(i + 1) % n} import *\ndef f{i}():\n    return f{(i - 1) % n}()\n"


def write_package(root, module_body, n):
    for i in range(n):
        with open(os.path.join(root, "pkg", f"m{i}.py"), "w") as f:
            f.write(module_body(i, n))


MULTI_FILE = {"star_import_chain": (star_import_chain, 8), "alias_chain": (alias_chain, 50), "import_cycle": (import_cycle, 50)}


def run(binary, root, timeout, reps):
    """The run with the median time of `reps` cold indexes."""
    runs = [run_once(binary, root, timeout) for _ in range(reps)]
    if any(r["seconds"] is None for r in runs):
        return {"seconds": None}
    return sorted(runs, key=lambda r: r["seconds"])[len(runs) // 2]


def run_once(binary, root, timeout):
    db = os.path.join(root, "..", "db-" + os.path.basename(root))
    shutil.rmtree(db, ignore_errors=True)
    cmd = ["/usr/bin/time", "-f", "%e %M", binary, "index", root, "--db", db, "--json"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"seconds": None}
    shutil.rmtree(db, ignore_errors=True)
    last = p.stderr.strip().splitlines()[-1].split()
    out = {"seconds": float(last[0]), "rss_mb": int(last[1]) / 1024, "rc": p.returncode}
    try:
        d = json.loads(p.stdout)
        out.update(units=d["units"], edges=d["edges"], flagged=bool(d["parse_errors"]))
    except (json.JSONDecodeError, KeyError):
        out["error"] = p.stderr.strip().splitlines()[0] if p.stderr.strip() else "no output"
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binaries", nargs="+")
    ap.add_argument("--shapes", default=",".join(list(SHAPES) + list(MULTI_FILE)))
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--reps", type=int, default=3, help="cold indexes per size and binary; the median is shown")
    args = ap.parse_args()
    names = args.shapes.split(",")
    work = tempfile.mkdtemp(prefix="fresco-patho-")
    print("| shape | n | bytes | " + " | ".join(f"{os.path.basename(b)} s | MB | units | edges" for b in args.binaries) + " |")
    print("|---|---:|---:|" + "---:|---:|---:|---:|" * len(args.binaries))
    growth = {}
    for name in names:
        if name not in MULTI_FILE and name not in SHAPES:
            sys.exit(f"unknown shape {name}")
        base = MULTI_FILE[name][1] if name in MULTI_FILE else SHAPES[name][1]
        for size in (base, 2 * base, 4 * base):
            root = os.path.join(work, f"{name}-{size}")
            os.makedirs(os.path.join(root, "pkg"))
            open(os.path.join(root, "pkg", "__init__.py"), "w").close()
            if name in MULTI_FILE:
                write_package(root, MULTI_FILE[name][0], size)
            else:
                with open(os.path.join(root, "pkg", "shape.py"), "w") as f:
                    f.write(SHAPES[name][0](size))
            nbytes = sum(os.path.getsize(os.path.join(root, "pkg", x)) for x in os.listdir(os.path.join(root, "pkg")))
            cells = []
            for b in args.binaries:
                r = run(b, root, args.timeout, args.reps)
                growth.setdefault((name, b), []).append(r["seconds"])
                if r["seconds"] is None:
                    cells.append(f"> {args.timeout:.0f} | | | ")
                elif "error" in r:
                    cells.append(f"{r['seconds']:.2f} | {r['rss_mb']:.0f} | {r['error']} | ")
                else:
                    flag = " (flagged)" if r["flagged"] else ""
                    cells.append(f"{r['seconds']:.2f} | {r['rss_mb']:.0f} | {r['units']}{flag} | {r['edges']}")
            shutil.rmtree(root)
            print(f"| {name} | {size} | {nbytes} | " + " | ".join(cells) + " |", flush=True)
    print()
    print("Growth of the time from 2n to 4n (log2 of the ratio; times under 0.05 s are noise):")
    print()
    for (name, b), ts in growth.items():
        if ts[1] and ts[2] and ts[1] >= 0.05:
            print(f"- {name}, {os.path.basename(b)}: {math.log2(ts[2] / ts[1]):.2f}")
        elif ts[2] is None:
            print(f"- {name}, {os.path.basename(b)}: timed out")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
