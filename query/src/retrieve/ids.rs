//! Small helpers every part of retrieval shares: names read from unit ids, paths, and the edges
//! of a unit's code (a lambda's edges counted as its owner's, a header's told from a body's).
//!
//! Kept in one place so that the other modules depend on this one for them and not on each
//! other.

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};

/// The last component of a unit id (`timeout` for `pkg.Session.timeout`), without the `#n` of
/// a repeated definition.
pub(super) fn last_name(id: &str) -> &str {
    let last = id.rsplit('.').next().unwrap_or(id);
    last.split('#').next().unwrap_or(last)
}

/// The class or module unit `id` is defined in (`pkg.C` for `pkg.C.m`).
pub(super) fn owner_of(id: &str) -> Option<&str> {
    id.rsplit_once('.').map(|(owner, _)| owner)
}

/// Whether unit id `inner` is `outer` or nested in it (`pkg.f.<lambda1>` in `pkg.f`).
pub(super) fn is_within(inner: &str, outer: &str) -> bool {
    inner == outer || (inner.starts_with(outer) && inner[outer.len()..].starts_with('.'))
}

/// `id` without the lambdas it is nested in (`pkg.f` for `pkg.f.<lambda1>.<lambda1>`).
pub(super) fn without_lambdas(id: &str) -> &str {
    let mut owner = id;
    while fresco_graph::is_lambda_id(owner) {
        match owner.rsplit_once('.') {
            Some((rest, _)) => owner = rest,
            None => break,
        }
    }
    owner
}

/// The identifiers written in `text` (words of letters, digits and underscores).
pub(super) fn identifiers_in(text: &str) -> FxHashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .collect()
}

/// Whether unit `inner` lies within unit `outer`'s source (the same file, its bytes inside
/// `outer`'s; a unit lies within itself): a class's members, a function's nested functions.
pub(crate) fn lies_within(inner: &fresco_graph::UnitRef<'_>, outer: &fresco_graph::UnitRef<'_>) -> bool {
    outer.file.graph.path == inner.file.graph.path
        && outer.unit.start_byte <= inner.unit.start_byte
        && inner.unit.end_byte <= outer.unit.end_byte
}

/// The directory part of a relative path (`""` for a file at the root).
pub(super) fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Whether a path looks like test code (a `test`/`tests` directory or a `test_*.py`/`*_test.py` file).
pub fn is_test_path(path: &str) -> bool {
    path.split('/').any(|part| {
        part == "test"
            || part == "tests"
            || part == "testing"
            || part.starts_with("test_")
            || part.ends_with("_test.py")
    })
}

/// Units retrieval deals in: code units other than lambdas (a lambda is retrieved as part of the
/// unit containing it).
pub(super) fn is_code_unit(unit: &fresco_graph::Unit) -> bool {
    !matches!(unit.kind, UnitKind::Module | UnitKind::External) && !unit.is_lambda()
}

/// The last line of a unit's header (decorators and `def ...:`): uses on it or before it come
/// from annotations, defaults and decorators, not from the body. A function whose body shares
/// the header's last line (`def f(n): return f(n - 1)`) has its uses there counted as the
/// body's: edges carry lines, not columns, and the body is most of what such a line holds.
pub(super) fn header_end_line(u: &fresco_graph::UnitRef<'_>) -> u32 {
    let source = u.file.source_of(u.unit);
    let end =
        match u.unit.signature.as_deref().filter(|s| !s.is_empty()).and_then(|s| source.find(s).map(|at| at + s.len()))
        {
            Some(end) => u.unit.start_line + source[..end].matches('\n').count() as u32,
            None => u.unit.start_line,
        };
    // A one-line stub (`def f(p: Path) -> int: ...`) has no body to count: its line is header.
    let one_line_body =
        matches!(u.unit.kind, UnitKind::Function | UnitKind::Method) && end >= u.unit.end_line && !is_unwritten(u);
    if one_line_body { end.saturating_sub(1) } else { end }
}

/// Whether a function's body is not written yet: nothing but a docstring, comments and `pass`,
/// `...` or `raise NotImplementedError` (with or without arguments), what a stub holds. Read from
/// the text: a body using only builtins (`return len(d)`) uses no unit either, but is written.
pub(super) fn is_unwritten(u: &fresco_graph::UnitRef<'_>) -> bool {
    is_unwritten_def(u.file.source_of(u.unit), last_name(&u.unit.id))
}

/// [`is_unwritten`] for the source of a function named `name` (decorators first, if any).
fn is_unwritten_def(source: &str, name: &str) -> bool {
    let Some(def) = def_keyword(source, name) else { return false };
    let Some(colon) = header_colon(&source[def..]) else { return false };
    let mut rest = &source[def + colon + 1..];
    let word_ends = |after: &str| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_');
    loop {
        rest = rest.trim_start_matches(|c: char| c.is_whitespace() || c == ';' || c == '\\');
        if let Some(comment) = rest.strip_prefix('#') {
            rest = comment.find(['\n', '\r']).map_or("", |end| &comment[end..]);
            continue;
        }
        if rest.is_empty() {
            return true;
        }
        // A string on its own (the docstring, wherever comments put it, or another) does
        // nothing; an f-string evaluates what it holds.
        let prefix_len = rest.find(['"', '\'']).unwrap_or(0);
        if !rest[..prefix_len].contains(['f', 'F'])
            && let Some(after) = skip_string(rest)
        {
            rest = after;
            continue;
        }
        if let Some(after) = rest.strip_prefix("pass").filter(|a| word_ends(a)) {
            rest = after;
        } else if let Some(after) = rest.strip_prefix("...") {
            rest = after;
        } else if let Some(after) = rest.strip_prefix("raise").filter(|a| word_ends(a)) {
            let after = after.trim_start_matches([' ', '\t']);
            let Some(after) = after.strip_prefix("NotImplementedError").filter(|a| word_ends(a)) else {
                return false;
            };
            let after = after.trim_start_matches([' ', '\t']);
            rest = match after.strip_prefix('(') {
                Some(args) => match closing_paren(args) {
                    Some(end) => &args[end + 1..],
                    None => return false,
                },
                None => after,
            };
            // `raise NotImplementedError from None`: the cause, to the end of the line.
            if let Some(cause) = rest.trim_start_matches([' ', '\t']).strip_prefix("from").filter(|a| word_ends(a)) {
                rest = cause.find(['\n', '\r']).map_or("", |end| &cause[end..]);
            }
        } else {
            return false;
        }
    }
}

/// The byte offset of the `def` keyword of function `name` in its source: the first line that
/// starts (after indentation, and `async`) with `def`, whitespace and the name. A decorator's
/// line starts with `@`, whatever text its arguments hold.
fn def_keyword(source: &str, name: &str) -> Option<usize> {
    // Read as code (strings and comments skipped: a decorator's text may hold `def f(`), at the
    // start of a line (`\n`, `\r\n` or a lone `\r`, as Python reads them) past its indentation.
    let mut line_start = true;
    let blank = |c: char| c == ' ' || c == '\t' || c == '\x0c';
    scan_code(source, |at, c| {
        if c == '\n' || c == '\r' {
            line_start = true;
            return None;
        }
        if blank(c) || !std::mem::replace(&mut line_start, false) {
            return None;
        }
        let rest = &source[at..];
        let def_at = match rest.strip_prefix("async").filter(|a| a.starts_with(blank)) {
            Some(after) => at + rest.len() - after.trim_start_matches(blank).len(),
            None => at,
        };
        let after_def = source[def_at..].strip_prefix("def").filter(|a| a.starts_with(blank))?;
        // `def f(`, and Python 3.12's `def f[T](`.
        after_def
            .trim_start_matches(blank)
            .strip_prefix(name)
            .is_some_and(|a| a.starts_with(['(', '[', ' ', '\t']))
            .then_some(def_at)
    })
}

/// The byte offset of the `:` ending a `def` header (the first outside brackets and strings).
fn header_colon(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    scan_code(text, |at, c| match c {
        '(' | '[' | '{' => {
            depth += 1;
            None
        }
        ')' | ']' | '}' => {
            depth = depth.saturating_sub(1);
            None
        }
        ':' if depth == 0 => Some(at),
        _ => None,
    })
}

/// The offset of the `)` closing an opened parenthesis in `text` (strings skipped).
fn closing_paren(text: &str) -> Option<usize> {
    let mut depth = 1usize;
    scan_code(text, |at, c| match c {
        '(' => {
            depth += 1;
            None
        }
        ')' => {
            depth -= 1;
            (depth == 0).then_some(at)
        }
        _ => None,
    })
}

/// Calls `visit` with each character of `text` outside strings and comments, and its offset,
/// until it answers.
fn scan_code<T>(text: &str, mut visit: impl FnMut(usize, char) -> Option<T>) -> Option<T> {
    let mut at = 0;
    while at < text.len() {
        let rest = &text[at..];
        if let Some(after) = skip_string(rest) {
            at = text.len() - after.len();
            continue;
        }
        let c = rest.chars().next()?;
        if c == '#' {
            at += rest.find(['\n', '\r']).unwrap_or(rest.len());
            continue;
        }
        if let Some(found) = visit(at, c) {
            return Some(found);
        }
        at += c.len_utf8();
    }
    None
}

/// `text` after the string literal it starts with (prefix letters, then single or triple
/// quotes), or `None` when it does not start with one. An unclosed string runs to the end.
fn skip_string(text: &str) -> Option<&str> {
    let prefix = text.find(['"', '\'']).filter(|&p| p <= 2 && text[..p].chars().all(|c| "rRbBuUfF".contains(c)))?;
    let quote_char = &text[prefix..prefix + 1];
    let triple = quote_char.repeat(3);
    let (quote, mut at) =
        if text[prefix..].starts_with(&triple) { (triple.as_str(), prefix + 3) } else { (quote_char, prefix + 1) };
    while at < text.len() {
        let rest = &text[at..];
        if rest.starts_with(quote) {
            return Some(&text[at + quote.len()..]);
        }
        // A backslash keeps the next character in the string, in a raw string too.
        if rest.starts_with('\\') {
            at += 1 + text[at + 1..].chars().next().map_or(0, char::len_utf8);
            continue;
        }
        if quote.len() == 1 && rest.starts_with(['\n', '\r']) {
            return Some(rest);
        }
        at += rest.chars().next().map_or(1, char::len_utf8);
    }
    Some("")
}

/// What the code of unit `id` uses and calls: its edges and its lambdas' (a lambda's code is
/// part of the unit containing it, for retrieval).
pub(super) fn code_edges<'s>(snapshot: &'s Snapshot, id: &str) -> Vec<&'s fresco_graph::Edge> {
    let Some(unit) = snapshot.unit(id) else { return Vec::new() };
    unit.file.edges().filter(|e| without_lambdas(&e.src) == id).collect()
}

/// [`code_edges`] of `id` past its header: what the body of a function, method or class uses,
/// not what its annotations, defaults, decorators or bases name. Relatives and analogues of the
/// target count for what their bodies use, as its neighbours do: a signature's names say what
/// the signature says, not what a body needs.
pub(super) fn body_edges<'s>(snapshot: &'s Snapshot, id: &str) -> Vec<&'s fresco_graph::Edge> {
    let header_end = match snapshot.unit(id) {
        Some(u) if matches!(u.unit.kind, UnitKind::Function | UnitKind::Method | UnitKind::Class) => {
            header_end_line(&u)
        }
        _ => 0,
    };
    code_edges(snapshot, id).into_iter().filter(|e| e.line.is_none_or(|line| line > header_end)).collect()
}

/// What the body of unit `id` uses (calls, reads, inherits: code units only), in source order.
/// What its header uses (annotations, decorators) is left out.
pub(super) fn body_uses(snapshot: &Snapshot, id: &str) -> Vec<String> {
    let body_starts_after = snapshot.unit(id).map_or(0, |u| header_end_line(&u));
    let mut uses: Vec<(u32, String)> = code_edges(snapshot, id)
        .into_iter()
        .filter(|e| matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits))
        .filter(|e| e.line.is_none_or(|line| line > body_starts_after))
        .filter(|e| snapshot.unit(&e.dst).is_some_and(|u| is_code_unit(u.unit)))
        .map(|e| (e.line.unwrap_or(0), e.dst.to_string()))
        .collect();
    uses.sort();
    uses.into_iter().map(|(_, dst)| dst).collect()
}

/// The targets of `id`'s edges of one kind, in edge order: a class's or module's members
/// (`Contains`), a module's imports (`Imports`).
pub(super) fn edge_targets(snapshot: &Snapshot, id: &str, kind: EdgeKind) -> Vec<String> {
    snapshot.edges_from(id).into_iter().filter(|(e, _)| e.kind == kind).map(|(e, _)| e.dst.to_string()).collect()
}

/// `class` and its bases in the repository, transitively, nearest first: at most 16 classes
/// (a base is looked for while fewer are known).
pub(super) fn class_and_bases(snapshot: &Snapshot, class: &str) -> Vec<String> {
    let mut classes = vec![class.to_string()];
    let mut i = 0;
    while i < classes.len() && classes.len() < 16 {
        for (e, _) in snapshot.edges_from(&classes[i]) {
            if e.kind == EdgeKind::Inherits && snapshot.contains_unit(&e.dst) && !classes.iter().any(|c| *c == *e.dst) {
                classes.push(e.dst.to_string());
            }
        }
        i += 1;
    }
    classes
}

/// The functions or methods (not lambdas) `owner` (a class or module) defines, in source order.
fn functions_of<'g>(file: &'g fresco_graph::FileGraph, owner: &str) -> Vec<&'g fresco_graph::Unit> {
    file.units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
        .filter(|u| owner_of(&u.id) == Some(owner))
        .collect()
}

/// The functions or methods (not lambdas) of `owner` (a class or module) defined just before and
/// just after `line`, where a function not written yet will be: its source-order neighbours.
pub(super) fn neighbours_at_line<'g>(file: &'g fresco_graph::FileGraph, owner: &str, line: u32) -> Vec<&'g str> {
    let siblings = functions_of(file, owner);
    let before = siblings.iter().filter(|u| u.start_line < line).max_by_key(|u| u.start_line);
    let after = siblings.iter().filter(|u| u.start_line >= line).min_by_key(|u| u.start_line);
    before.into_iter().chain(after).map(|u| u.id.as_str()).collect()
}

/// The ids of the file's functions and methods.
pub(super) fn function_ids(file: &fresco_graph::FileGraph) -> FxHashSet<&str> {
    file.units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method))
        .map(|u| u.id.as_str())
        .collect()
}

/// Whether the unit is defined inside one of `functions` (a class local to a function is not
/// where a method given with a file alone goes).
pub(super) fn in_a_function(functions: &FxHashSet<&str>, id: &str) -> bool {
    let mut owner = owner_of(id);
    while let Some(o) = owner {
        if functions.contains(o) {
            return true;
        }
        owner = owner_of(o);
    }
    false
}

/// For a function not written yet whose line is not known: the two functions or methods of
/// `owner` whose names, signatures and docstrings share the most words with `text` (at least one;
/// each weighted by how few of the owner's functions have it), standing in for its source-order
/// neighbours: code on one subject is written together.
pub(super) fn likely_neighbours<'g>(file: &'g fresco_graph::FileGraph, owner: &str, text: &str) -> Vec<&'g str> {
    let siblings = functions_of(file, owner);
    let vocabularies: Vec<FxHashSet<String>> = siblings
        .iter()
        .map(|u| {
            let described = [Some(last_name(&u.name)), u.signature.as_deref(), u.docstring.as_deref()];
            super::class_guess::words(&described.into_iter().flatten().collect::<Vec<_>>().join("\n")).collect()
        })
        .collect();
    let mut df: FxHashMap<&str, usize> = FxHashMap::default();
    for v in &vocabularies {
        for w in v {
            *df.entry(w.as_str()).or_default() += 1;
        }
    }
    let target: FxHashSet<String> = super::class_guess::words(text).collect();
    let n = siblings.len() as f64;
    let mut scored: Vec<(f64, &str)> = siblings
        .iter()
        .zip(&vocabularies)
        .map(|(u, v)| {
            let score: f64 =
                v.intersection(&target).map(|w| (1.0 + n / df.get(w.as_str()).copied().unwrap_or(1) as f64).ln()).sum();
            (score, u.id.as_str())
        })
        .filter(|(score, _)| *score > 0.0)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(2).map(|(_, id)| id).collect()
}

/// The functions or methods (not lambdas) defined just before and just after `id` with the same
/// owner (class or module), in source order.
pub(super) fn source_order_neighbours<'g>(file: &'g fresco_graph::FileGraph, id: &str) -> Vec<&'g str> {
    let Some(target_owner) = owner_of(id) else { return Vec::new() };
    let siblings = functions_of(file, target_owner);
    let Some(at) = siblings.iter().position(|u| u.id == id) else { return Vec::new() };
    let mut out = Vec::new();
    if at > 0 {
        out.push(siblings[at - 1].id.as_str());
    }
    if let Some(next) = siblings.get(at + 1) {
        out.push(next.id.as_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_as_written_and_last_names() {
        let ids = identifiers_in(
            "def send(self, request: PreparedRequest, timeout=3) -> 'Response':\n    \"Uses ``self.max_retries``.\"",
        );
        for expected in ["send", "self", "request", "PreparedRequest", "timeout", "Response", "max_retries", "Uses"] {
            assert!(ids.contains(expected), "{expected} missing from {ids:?}");
        }
        assert!(!ids.contains("3"), "numbers are not identifiers");
        assert_eq!(last_name("pkg.Session.timeout"), "timeout");
        assert_eq!(last_name("pkg.helper#2"), "helper");
    }

    #[test]
    fn a_stub_is_unwritten_and_a_body_using_only_builtins_is_not() {
        let unwritten = [
            "def f(x):\n    ...\n",
            "def f(x): pass\n",
            "@dec(\"def f\")\ndef f(x: Dict[str, int] = {'a': 1}) -> int:\n    \"\"\"Doc: with ) and # inside.\"\"\"\n    ...\n",
            "def f(self):\n    r'''Doc \\''' still'''\n    # a comment\n    raise NotImplementedError\n",
            "async def f(self):\n    raise NotImplementedError(\n        \"not (yet)\"\n    )\n",
            "def f(a, b=lambda: 1):\n    'doc'; pass\n",
            "def f():\n    \"\"\"Only a docstring.\"\"\"\n",
            "def f():\n    # type: () -> None\n    \"\"\"Doc.\"\"\"\n    ...\n",
            "def\tf(x):\n    raise  NotImplementedError\n",
            "def  f(x):\n    raise\tNotImplementedError from None\n",
            "def f(x):\n    'one'\n    'two'\n",
            "@dec(\"def f(\")\ndef f(x):\n    pass\n",
            "def f(x, sep=\"\\\u{e9}\"):\n    \"\\\u{e9}\"\n    raise NotImplementedError(\"\\\u{e9}\")\n",
            "@dec\rdef f(x):\r    # todo\r    ...\r",
            "def f[T](x: T) -> T:\n    ...\n",
            "async  def f(x):\n    pass\n",
        ];
        for source in unwritten {
            assert!(is_unwritten_def(source, "f"), "{source}");
        }
        let written = [
            "def f(d):\n    return len(d)\n",
            "def f(x):\n    ...\n    return x\n",
            "def f(x):\n    raise NotImplementedError2()\n",
            "def f(x):\n    raise ValueError\n",
            "def f(x):\n    passed = 1\n",
            "def fx(x):\n    ...\n",
            "def f(x):\n    f\"{g()}\"\n",
            "def f(x):\n    raise NotImplementedError from g()\n    return 1\n",
            "def f(x):\n    \"\"\"Doc.\"\"\"\n    return \"\\\u{e9}\"\n",
            "@dec(\"\"\"\ndef f(x): ...\n\"\"\")\ndef f(x):\n    return g(x)\n",
            "def f(x):\r    # c\r    return g(x)\r",
        ];
        for source in written {
            assert!(!is_unwritten_def(source, "f"), "{source}");
        }
    }
}
