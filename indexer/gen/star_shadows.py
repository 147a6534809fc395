"""Prints the standard-library modules whose star import binds a builtin's name to something
else (`from math import *` binds `pow` to `math.pow`), for `STAR_SHADOWED_BUILTINS` in
indexer/src/resolve/builtins.rs. Run with the Python whose standard library to record (3.11
here); modules that need a display or print on import are left out.

    python3 indexer/gen/star_shadows.py
"""
import builtins
import contextlib
import importlib
import io
import sys
import warnings

warnings.simplefilter("ignore")
BUILTIN_NAMES = set(dir(builtins))
LEFT_OUT = {"antigravity", "this", "idlelib", "turtledemo", "tkinter", "turtle"}

for name in sorted(sys.stdlib_module_names):
    if name.startswith("_") or name in LEFT_OUT:
        continue
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            module = importlib.import_module(name)
    except BaseException:
        continue
    exported = getattr(module, "__all__", None)
    if exported is None:
        exported = [n for n in dir(module) if not n.startswith("_")]
    shadowed = sorted(
        n for n in set(exported) & BUILTIN_NAMES
        if not n.startswith("_") and getattr(module, n, None) is not getattr(builtins, n, object())
    )
    if shadowed:
        print(f'    ("{name}", &[{", ".join(f"{chr(34)}{n}{chr(34)}" for n in shadowed)}]),')
