//! Small helpers every part of retrieval shares: names read from unit ids, paths, and the edges
//! of a unit's code (a lambda's edges counted as its owner's, a header's told from a body's).
//!
//! Kept in one place so that the other modules depend on this one for them and not on each
//! other.

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::FxHashSet;

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
/// from annotations, defaults and decorators, not from the body.
pub(super) fn header_end_line(u: &fresco_graph::UnitRef<'_>) -> u32 {
    let source = u.file.source_of(u.unit);
    match u.unit.signature.as_deref().filter(|s| !s.is_empty()).and_then(|s| source.find(s).map(|at| at + s.len())) {
        Some(end) => u.unit.start_line + source[..end].matches('\n').count() as u32,
        None => u.unit.start_line,
    }
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
        .map(|e| (e.line.unwrap_or(0), e.dst.clone()))
        .collect();
    uses.sort();
    uses.into_iter().map(|(_, dst)| dst).collect()
}

/// The targets of `id`'s edges of one kind, in edge order: a class's or module's members
/// (`Contains`), a module's imports (`Imports`).
pub(super) fn edge_targets(snapshot: &Snapshot, id: &str, kind: EdgeKind) -> Vec<String> {
    snapshot.edges_from(id).into_iter().filter(|(e, _)| e.kind == kind).map(|(e, _)| e.dst.clone()).collect()
}

/// `class` and its bases in the repository, transitively, nearest first: at most 16 classes
/// (a base is looked for while fewer are known).
pub(super) fn class_and_bases(snapshot: &Snapshot, class: &str) -> Vec<String> {
    let mut classes = vec![class.to_string()];
    let mut i = 0;
    while i < classes.len() && classes.len() < 16 {
        for (e, _) in snapshot.edges_from(&classes[i]) {
            if e.kind == EdgeKind::Inherits && snapshot.contains_unit(&e.dst) && !classes.contains(&e.dst) {
                classes.push(e.dst.clone());
            }
        }
        i += 1;
    }
    classes
}

/// The functions or methods (not lambdas) defined just before and just after `id` with the same
/// owner (class or module), in source order.
pub(super) fn source_order_neighbours<'g>(file: &'g fresco_graph::FileGraph, id: &str) -> Vec<&'g str> {
    let Some(target_owner) = owner_of(id) else { return Vec::new() };
    let siblings: Vec<&fresco_graph::Unit> = file
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
        .filter(|u| owner_of(&u.id) == Some(target_owner))
        .collect();
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
}
