//! Task selection and body blanking for the retrieval benchmark.
//!
//! A task is a function or method whose original body uses at least one unit of the repository
//! (a `calls`, `references` or `inherits` edge to a class, function, method or variable of the
//! snapshot). Its body is blanked (decorators, signature and docstring kept, the rest becomes
//! `...`) and the retrieval query asks for the context of the blanked unit; the truth is the set
//! of units the original body used and the blanked unit no longer does.

use std::collections::BTreeSet;

use fresco_graph::{EdgeKind, Snapshot, UnitKind};

/// A `tests`/`test`/`testing` directory, `test_*.py`, `*_test.py` or `conftest.py`.
pub fn is_test_path(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    let (file, dirs) = parts.split_last().map(|(f, d)| (*f, d)).unwrap_or(("", &[]));
    dirs.iter().any(|d| matches!(*d, "tests" | "test" | "testing"))
        || file.starts_with("test_")
        || file.ends_with("_test.py")
        || file == "conftest.py"
}

/// What the code of unit `id` uses: the destinations of `calls`, `references` and `inherits`
/// edges from it or from units nested in it, that are units of the snapshot other than modules
/// and are not nested in it (nor lambdas).
pub fn uses(snapshot: &Snapshot, id: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let Some(unit) = snapshot.unit(id) else {
        return out;
    };
    let prefix = format!("{id}.");
    for e in unit.file.edges() {
        if !(*e.src == *id || e.src.starts_with(&prefix)) {
            continue;
        }
        if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits) {
            continue;
        }
        if *e.dst == *id || e.dst.starts_with(&prefix) {
            continue;
        }
        // A lambda elsewhere is reached through the unit that contains it (or the variable bound
        // to it): retrieval deals in the units around lambdas, not in lambdas.
        if snapshot
            .unit(&e.dst)
            .is_some_and(|d| !matches!(d.unit.kind, UnitKind::Module | UnitKind::External) && !d.unit.is_lambda())
        {
            out.insert(e.dst.to_string());
        }
    }
    out
}

/// A function or method that can become a task.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub id: String,
    pub path: String,
    pub kind: UnitKind,
}

/// Every function and method (not a lambda) outside test files, defined directly in a module or a class, with a
/// plain id (no `#2` redefinitions) and at least one in-repository use; in a deterministic
/// pseudo-random order (xxh3 of the id), so that the first N spread over the repository.
pub fn candidates(snapshot: &Snapshot) -> Vec<Candidate> {
    let mut out: Vec<(u64, Candidate)> = Vec::new();
    for u in snapshot.units() {
        if !u.unit.kind.is_callable() || u.unit.id.contains('#') || u.unit.is_lambda() {
            continue;
        }
        let path = &u.file.graph.path;
        if is_test_path(path) {
            continue;
        }
        let Some((parent, _)) = u.unit.id.rsplit_once('.') else { continue };
        if !matches!(snapshot.kind_of(parent), Some(UnitKind::Module | UnitKind::Class)) {
            continue;
        }
        if uses(snapshot, &u.unit.id).is_empty() {
            continue;
        }
        let key = xxhash_rust::xxh3::xxh3_64(u.unit.id.as_bytes());
        out.push((key, Candidate { id: u.unit.id.clone(), path: path.clone(), kind: u.unit.kind }));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.id.cmp(&b.1.id)));
    out.into_iter().map(|(_, c)| c).collect()
}

/// Why a candidate could not be blanked.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum BlankSkip {
    /// The file does not parse cleanly to begin with.
    ParseErrors,
    /// No `def` with the unit's name inside its span.
    NotFound,
    /// The body is only a docstring (nothing to blank).
    Empty,
    /// The blanked file does not parse (e.g. a docstring and a statement on the `def` line).
    Invalid,
}

fn parser() -> tree_sitter::Parser {
    fresco_indexer::lower::new_parser().expect("the Python grammar loads")
}

/// `text` with the body of the `def NAME` inside bytes `start..end` replaced by `...`: the
/// decorators, the signature and the docstring stay; with a docstring, `...` goes on its own line
/// at the docstring's indentation, otherwise it takes the place of the first statement (which
/// may share the `def` line).
pub fn blank(text: &str, start: usize, end: usize, name: &str) -> Result<String, BlankSkip> {
    let mut parser = parser();
    let tree = parser.parse(text, None).ok_or(BlankSkip::ParseErrors)?;
    if tree.root_node().has_error() {
        return Err(BlankSkip::ParseErrors);
    }
    // The outermost `function_definition` named NAME starting within the span (pre-order). It
    // may end past the span: a unit ends with its last code, as Python's `ast` does, before a
    // comment on the same line (`return x  # why`), which tree-sitter's node takes in.
    let mut stack = vec![tree.root_node()];
    let mut found = None;
    while let Some(node) = stack.pop() {
        if node.end_byte() <= start || node.start_byte() >= end {
            continue;
        }
        if node.kind() == "function_definition"
            && node.start_byte() >= start
            && node.child_by_field_name("name").and_then(|n| n.utf8_text(text.as_bytes()).ok()) == Some(name)
        {
            found = Some(node);
            break;
        }
        let mut cursor = node.walk();
        let children: Vec<_> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    let def = found.ok_or(BlankSkip::NotFound)?;
    let body = def.child_by_field_name("body").ok_or(BlankSkip::NotFound)?;
    let mut cursor = body.walk();
    let statements: Vec<_> = body.named_children(&mut cursor).filter(|n| n.kind() != "comment").collect();
    let first = statements.first().ok_or(BlankSkip::Empty)?;
    let is_doc = first.kind() == "expression_statement"
        && first.named_child(0).is_some_and(|s| matches!(s.kind(), "string" | "concatenated_string"));
    let mut out = String::with_capacity(text.len());
    if is_doc {
        if statements.len() == 1 {
            return Err(BlankSkip::Empty);
        }
        let doc_end = first.end_byte();
        let line_start = text[..first.start_byte()].rfind('\n').map_or(0, |i| i + 1);
        let indent = &text[line_start..first.start_byte()];
        if !indent.chars().all(|c| c == ' ' || c == '\t') {
            return Err(BlankSkip::Invalid);
        }
        out.push_str(&text[..doc_end]);
        out.push('\n');
        out.push_str(indent);
        out.push_str("...");
        out.push_str(&text[body.end_byte()..]);
    } else {
        out.push_str(&text[..body.start_byte()]);
        out.push_str("...");
        out.push_str(&text[body.end_byte()..]);
    }
    let check = parser.parse(&out, None).ok_or(BlankSkip::Invalid)?;
    if check.root_node().has_error() {
        return Err(BlankSkip::Invalid);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank_all(text: &str, name: &str) -> String {
        blank(text, 0, text.len(), name).unwrap()
    }

    #[test]
    fn keeps_decorators_signature_and_docstring() {
        let src = "import x\n\nclass A:\n    @dec\n    def f(self, a):\n        \"\"\"Doc.\"\"\"\n        y = a + 1\n        return x.g(y)\n\n    def h(self):\n        pass\n";
        let out = blank_all(src, "f");
        assert_eq!(
            out,
            "import x\n\nclass A:\n    @dec\n    def f(self, a):\n        \"\"\"Doc.\"\"\"\n        ...\n\n    def h(self):\n        pass\n"
        );
    }

    #[test]
    fn one_line_body() {
        assert_eq!(blank_all("def f(a): return g(a)\n", "f"), "def f(a): ...\n");
    }

    #[test]
    fn no_docstring() {
        let out = blank_all("def f(a):\n    # c\n    return g(a)\nz = 1\n", "f");
        assert!(out == "def f(a):\n    ...\nz = 1\n" || out == "def f(a):\n    # c\n    ...\nz = 1\n", "{out:?}");
    }

    /// The span given is the unit's, which ends before a comment on its last line.
    #[test]
    fn a_comment_after_the_last_line_of_code_is_past_the_span() {
        let src = "def f(a):\n    return g(a)  # why\n\nz = 1\n";
        let unit_end = src.find("  # why").unwrap();
        assert_eq!(blank(src, 0, unit_end, "f").unwrap(), "def f(a):\n    ...\n\nz = 1\n");
    }

    #[test]
    fn docstring_only_is_skipped() {
        assert_eq!(blank("def f():\n    'doc'\n", 0, 18, "f"), Err(BlankSkip::Empty));
    }

    #[test]
    fn tests_paths() {
        assert!(is_test_path("tests/test_x.py"));
        assert!(is_test_path("src/pkg/conftest.py"));
        assert!(!is_test_path("src/requests/sessions.py"));
    }
}
