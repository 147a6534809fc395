#!/usr/bin/env python3
"""How much of a file fresco keeps while it is being typed.

Takes files of a real project and saves one half-typed edit into each, the kind an editor
saves between keystrokes, then indexes the edited copies and the original copies with
`fresco export` and compares the units (qualified name, kind, start line) of every file:

- `colon`: a `def`/`class` header's colon deleted (`def load(path)` above its body);
- `call`: a call cut after its opening bracket (`x = foo(` with the rest of the line gone);
- `string`: a line cut inside its first one-line string literal (`log('starting` while typing);
- `indent`: a statement of a body dedented by two spaces, between two levels (`IndentationError:
  unindent does not match any outer indentation level`, as while re-indenting a block);
- `header`: a `def` header cut after its first parameter (`def load(self, ` above its body;
  the first parameter is kept, as `self.x = ...` in the body means nothing without it);
- `docstring`: the closing line of a multi-line triple-quoted string (a docstring, mostly)
  blanked, as while the string is still being typed;
- `fstring`: a line cut inside an f-string's first replacement field (`log(f"{name` while
  typing);
- `newdef`: a new function's header half-typed on the blank line above a `def` or `class` of the
  same indentation, before its colon (`def n`, `def new_helper(value) -> bo`);
- `newdecorated`: the same on two blank lines, under a decorator (`@property`, `@app.route(...)`);
- `newstatement`: another statement half-typed on the blank line above a `def` or `class` of the
  same indentation: a compound header without its colon (`if x == 1`, `for item in items`) or an
  expression cut short (`x = a +`, `total = 1 + \\`, `value = a if ready`).

No edit removes a line, so every unit of the original keeps its name, kind and start
line: a unit missing from the edited copy was lost, one not in the original was invented.
The edges out of each file's units are compared the same way, leaving out those recorded at the
edited line (which change with it). Some of the others may change for a reason: the body of a
`def` cut after its first parameter no longer knows the types of the parameters cut.

    python3 bench/robustness/half_typed.py FRESCO_BIN PROJECT_ROOT [--files N] [--seed S]
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import tempfile
import tokenize

HEADER = re.compile(r'^\s*(async\s+def|def|class)\s+\w+.*:\s*$')
STRING = re.compile(r'^(\s*[^#\'"]*?(?<![\'"])([\'"])(?!\2))[^\'"\\\\]*\2.*$')
DEF = re.compile(r'^(\s*(?:async\s+)?def\s+\w+\(\w*(?:,\s?)?)(.*\).*:)\s*$')
FSTRING = re.compile(r'^(\s*[^#\'"]*?\b[fF]([\'"])(?!\2)[^\'"{}]*\{\w*)(.*)$')
# What a new function's header reads like while it is typed, before its colon.
NEW_HEADERS = ['def n', 'def new_helper', 'def new_helper(value)', 'def new_helper(value) -> ',
               'def new_helper(value) -> bo', 'async def new_helper(value) -> None']
# Other statements as they read while typed, above a definition.
NEW_STATEMENTS = ['if x == 1', 'for item in items', 'while pending', 'with open(path) as f', 'x = a +',
                  'total = 1 + \\', 'value = a if ready', 'ready = a and', 'handler = lambda event:',
                  'x = 1; y =']
CALL = re.compile(r'^(\s+)(?!def |class |async |@|#)(.*?\w\()(.*\))\s*$')


def python_files(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith('.'))
        for f in sorted(files):
            if f.endswith('.py'):
                yield os.path.join(d, f)


def whole_lines(lines):
    """The indices of the lines that hold one whole logical line (not part of a multi-line
    string or bracket) and no lambda: cutting such a line leaves every other line as it was
    (a lambda is a unit: cutting one renumbers the later ones)."""
    whole = set()
    try:
        tokens = list(tokenize.generate_tokens(iter(line + '\n' for line in lines).__next__))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return whole
    first = None
    for tok in tokens:
        if tok.type in (tokenize.NL, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING):
            continue
        if first is None:
            first = tok.start[0]
        if tok.type == tokenize.NEWLINE:
            if tok.start[0] == first:
                whole.add(first - 1)
            first = None
    return {i for i in whole if i < len(lines) and 'lambda' not in lines[i]}


def triple_quoted_closings(lines):
    """The indices of the lines that only close a triple-quoted string opened on an earlier line."""
    try:
        tokens = list(tokenize.generate_tokens(iter(line + '\n' for line in lines).__next__))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return []
    at = []
    for tok in tokens:
        if tok.type != tokenize.STRING or tok.end[0] == tok.start[0]:
            continue
        quote = tok.string.lstrip('rRbBuU')[:3]
        if quote in ('"""', "'''") and lines[tok.end[0] - 1].strip() == quote:
            at.append(tok.end[0] - 1)
    return at


def mutate(lines, kind, rng):
    whole = whole_lines(lines)
    if kind == 'colon':
        at = [i for i, l in enumerate(lines) if HEADER.match(l)]
        if not at:
            return None
        i = rng.choice(at)
        return lines[:i] + [lines[i].rstrip()[:-1]] + lines[i + 1:], i + 1
    if kind == 'indent':
        def indent(line):
            return len(line) - len(line.lstrip(' '))
        at = [i for i in sorted(whole) if i > 0 and i - 1 in whole and indent(lines[i]) >= 8
              and indent(lines[i]) == indent(lines[i - 1]) and not lines[i].lstrip(' ').startswith(('\t', '#'))
              and lines[i].strip()]
        if not at:
            return None
        i = rng.choice(at)
        return lines[:i] + [lines[i][2:]] + lines[i + 1:], i + 1
    if kind == 'newdef':
        def starts_definition(line):
            return re.match(r'\s*(async\s+def|def|class)\s', line) is not None
        at = [i for i in range(len(lines) - 1) if lines[i].strip() == '' and starts_definition(lines[i + 1])]
        if not at:
            return None
        i = rng.choice(at)
        indent = lines[i + 1][:len(lines[i + 1]) - len(lines[i + 1].lstrip())]
        typed = rng.choice(NEW_HEADERS)
        return lines[:i] + [indent + typed] + lines[i + 1:], i + 1
    if kind == 'newstatement':
        at = [i for i in range(len(lines) - 1) if lines[i].strip() == ''
              and re.match(r'\s*(async\s+def|def|class)\s', lines[i + 1])]
        if not at:
            return None
        i = rng.choice(at)
        indent = lines[i + 1][:len(lines[i + 1]) - len(lines[i + 1].lstrip())]
        return lines[:i] + [indent + rng.choice(NEW_STATEMENTS)] + lines[i + 1:], i + 1
    if kind == 'newdecorated':
        # Two blank lines above a definition: a decorator, then the header being typed.
        at = [i for i in range(1, len(lines) - 1) if lines[i - 1].strip() == '' and lines[i].strip() == ''
              and re.match(r'\s*(async\s+def|def|class)\s', lines[i + 1])]
        if not at:
            return None
        i = rng.choice(at)
        indent = lines[i + 1][:len(lines[i + 1]) - len(lines[i + 1].lstrip())]
        decorator = rng.choice(['@property', '@staticmethod', '@functools.cache', '@app.route("/new")'])
        return lines[:i - 1] + [indent + decorator, indent + rng.choice(NEW_HEADERS)] + lines[i + 1:], i + 1
    if kind == 'docstring':
        at = triple_quoted_closings(lines)
        if not at:
            return None
        i = rng.choice(at)
        return lines[:i] + [''] + lines[i + 1:], i + 1
    pattern = {'call': CALL, 'string': STRING, 'header': DEF, 'fstring': FSTRING}[kind]
    at = [i for i, l in enumerate(lines) if i in whole and pattern.match(l)]
    if not at:
        return None
    i = rng.choice(at)
    m = pattern.match(lines[i])
    if kind in ('header', 'string', 'fstring'):
        return lines[:i] + [m.group(1)] + lines[i + 1:], i + 1
    return lines[:i] + [m.group(1) + m.group(2)] + lines[i + 1:], i + 1


def export(binary, tree):
    """The units of every file, and the edges out of every file's units, of `tree`'s graph."""
    db, out = tree + '-db', tree + '-out'
    subprocess.run([binary, 'export', tree, '--db', db, '--out', out], check=True, capture_output=True)
    units, file_of = {}, {}
    with open(os.path.join(out, 'nodes.jsonl')) as nodes:
        for line in nodes:
            n = json.loads(line)
            if n['file']:
                units.setdefault(n['file'], set()).add((n['name'], n['kind'], n['start_line']))
                file_of[n['name']] = n['file']
    edges = {}
    with open(os.path.join(out, 'edges.jsonl')) as lines:
        for line in lines:
            e = json.loads(line)
            if e['src'] in file_of:
                edges.setdefault(file_of[e['src']], set()).add((e['src'], e['dst'], e['kind'], e['line']))
    return units, edges


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('binary')
    ap.add_argument('root')
    ap.add_argument('--files', type=int, default=300)
    ap.add_argument('--seed', type=int, default=7)
    ap.add_argument('--edits', default='colon,call,string,indent,header,docstring,fstring,newdef,newdecorated,'
                    'newstatement')
    args = ap.parse_args()
    files = list(python_files(args.root))
    print('| edit | files | files with every unit kept | units lost | units invented '
          '| edges of other lines lost | invented |')
    print('|---|---:|---:|---:|---:|---:|---:|')
    for kind in args.edits.split(','):
        rng = random.Random(args.seed)
        order = files[:]
        rng.shuffle(order)
        work = tempfile.mkdtemp(prefix='fresco-half-typed-')
        original, edited = os.path.join(work, 'original'), os.path.join(work, 'edited')
        os.makedirs(original)
        os.makedirs(edited)
        picked = 0
        edited_line = {}
        for path in order:
            if picked == args.files:
                break
            try:
                with open(path, encoding='utf-8') as f:
                    lines = f.read().split('\n')
            except (UnicodeDecodeError, OSError):
                continue
            mutated = mutate(lines, kind, rng)
            if mutated is None:
                continue
            changed, edited_line[f'm{picked:04d}.py'] = mutated
            name = f'm{picked:04d}.py'
            with open(os.path.join(original, name), 'w') as f:
                f.write('\n'.join(lines))
            with open(os.path.join(edited, name), 'w') as f:
                f.write('\n'.join(changed))
            picked += 1
        (before, edges_before), (after, edges_after) = export(args.binary, original), export(args.binary, edited)
        kept = sum(1 for f in before if before[f] <= after.get(f, set()))
        lost = sum(len(before[f] - after.get(f, set())) for f in before)
        invented = sum(len(after.get(f, set()) - before[f]) for f in before)
        total = sum(len(u) for u in before.values())
        # Edges recorded at the edited line change with it; every other edge should not.
        def elsewhere(edges, f):
            return {e for e in edges.get(f, set()) if e[3] != edited_line.get(f)}

        edges_lost = sum(len(elsewhere(edges_before, f) - elsewhere(edges_after, f)) for f in before)
        edges_invented = sum(len(elsewhere(edges_after, f) - elsewhere(edges_before, f)) for f in before)
        edges_total = sum(len(elsewhere(edges_before, f)) for f in before)
        print(f'| {kind} | {len(before)} | {kept} | {lost} of {total} | {invented} '
              f'| {edges_lost} of {edges_total} | {edges_invented} |')
        shutil.rmtree(work)


if __name__ == '__main__':
    main()
