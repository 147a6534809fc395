//! Public paths: a name that is not a unit, looked up through the module that binds it by an
//! import, as Python would find it (`httpx.Client` is `httpx._client.Client`, which
//! `httpx/__init__.py` binds by `from ._client import *`). Users and LLM tools write the public
//! path; units are named where they are defined.
//!
//! The graph's `imports` edges say what an import statement resolved to, not which name it
//! bound, so the statement is read again from the module's text: a name is found only where the
//! module binds it at its top level (not in a function or class), under the name it binds (`as`
//! included), and a star import only binds what the imported module exports (its `__all__`, or
//! its public names). Where several statements bind it, the last one does. Not followed: `del`,
//! names bound any other way (assignment, `globals()`), and conditional imports are all taken as
//! written, the last winning.

use fresco_graph::{EdgeKind, FileEntry, Snapshot, UnitKind};

use crate::exec::definitions_of;

/// The definitions `name` reaches through a module prefix that binds its next segment by an
/// import (the longest such prefix first), the rest of the name looked up inside what it binds:
/// `httpx.Client.send` is `httpx._client.Client.send`. Empty when none does.
pub fn reexported(snapshot: &Snapshot, name: &str) -> Vec<String> {
    found_through_imports(snapshot, name, 0).into_iter().flat_map(|id| definitions_of(snapshot, &id)).collect()
}

/// How many star imports deep a name is followed (`pkg/__init__.py` star-importing `pkg._a`,
/// which star-imports `pkg._b`, is two).
const MAX_STAR_DEPTH: u32 = 8;

/// [`reexported`]'s units, before their redefinitions are added; `depth` star imports in.
fn found_through_imports(snapshot: &Snapshot, name: &str, depth: u32) -> Vec<String> {
    let segments: Vec<&str> = name.split('.').collect();
    // Where each prefix of `split` segments ends, to skip those longer than any module name
    // before joining them: a name of thousands of segments took cubic time.
    let mut ends = Vec::with_capacity(segments.len());
    let mut end = 0;
    for s in &segments {
        end += s.len();
        ends.push(end);
        end += 1;
    }
    for split in (1..segments.len()).rev() {
        if ends[split - 1] > snapshot.longest_module_name() {
            continue;
        }
        let module = segments[..split].join(".");
        if snapshot.kind_of(&module) != Some(UnitKind::Module) {
            continue;
        }
        let (wanted, rest) = (segments[split], &segments[split + 1..]);
        // The binding statements by line: the last one binds the name.
        let mut found: Vec<(u32, String)> = Vec::new();
        for (edge, file) in snapshot.edges_from(&module) {
            let Some(line) = edge.line.filter(|_| edge.kind == EdgeKind::Imports) else { continue };
            if !at_top_level(file, line) {
                continue;
            }
            let Some(statement) = statement_at(&file.text, line) else { continue };
            for Binding { imported, bound, package } in bindings(&statement) {
                let definition = if imported == "*" {
                    let star_target = snapshot.kind_of(&edge.dst) == Some(UnitKind::Module);
                    if !star_target || !exports(snapshot, &edge.dst, wanted) {
                        continue;
                    }
                    format!("{}.{wanted}", edge.dst)
                } else if package {
                    // `import x.y.z` binds the package `x`, whichever of its modules the edge reached.
                    let reached = *edge.dst == *imported || edge.dst.starts_with(&format!("{imported}."));
                    if bound != wanted || !reached {
                        continue;
                    }
                    imported.clone()
                } else if bound == wanted && imported.rsplit('.').next() == edge.dst.rsplit('.').next().map(plain_name)
                {
                    edge.dst.to_string()
                } else {
                    continue;
                };
                let candidate = if rest.is_empty() { definition } else { format!("{definition}.{}", rest.join(".")) };
                // A name bound to something outside the repository (`import urllib3`, `from
                // collections.abc import Mapping`) is that external node.
                if snapshot.contains_unit(&candidate) || (rest.is_empty() && snapshot.is_external(&candidate)) {
                    found.push((line, candidate));
                } else if imported == "*" && depth < MAX_STAR_DEPTH {
                    // The star-imported module binds the name by an import of its own.
                    for id in found_through_imports(snapshot, &candidate, depth + 1) {
                        found.push((line, id));
                    }
                }
            }
        }
        if let Some(last) = found.iter().map(|(line, _)| *line).max() {
            let mut ids: Vec<String> = found.into_iter().filter(|(line, _)| *line == last).map(|(_, id)| id).collect();
            ids.sort();
            ids.dedup();
            return ids;
        }
    }
    Vec::new()
}

/// A unit's last name without its definition number: an import of a name defined more than once
/// (`@overload`s before the implementation) reaches the last definition, `to_tuple#4`.
fn plain_name(last: &str) -> &str {
    last.split_once('#').map_or(last, |(name, _)| name)
}

/// Whether `line` of the module's file is outside every function and class (an import there
/// binds a name of the module).
fn at_top_level(file: &FileEntry, line: u32) -> bool {
    !file.graph.units.iter().any(|u| {
        matches!(u.kind, UnitKind::Function | UnitKind::Method | UnitKind::Class)
            && u.start_line <= line
            && line <= u.end_line
    })
}

/// The logical line that starts at `line` (1-based): joined over open brackets and backslashes,
/// comments removed.
fn statement_at(text: &str, line: u32) -> Option<String> {
    let mut lines = text.lines().skip(line.checked_sub(1)? as usize);
    let mut statement = String::new();
    let mut depth: i32 = 0;
    loop {
        let physical = lines.next()?;
        let code = physical.split('#').next().unwrap_or("");
        depth += code.matches('(').count() as i32 - code.matches(')').count() as i32;
        let continued = code.trim_end().ends_with('\\');
        statement.push_str(code.trim_end().trim_end_matches('\\'));
        statement.push(' ');
        if depth <= 0 && !continued {
            return Some(statement);
        }
    }
}

/// A name an import statement binds.
#[derive(Debug, PartialEq)]
struct Binding {
    /// What it imports: a name of the module `from` names, a module, or `*`.
    imported: String,
    /// The name it binds.
    bound: String,
    /// An `import x.y` without `as`: it binds the package `x` (`imported` and `bound` are both
    /// `x`), while the statement's edge leads to `x.y`.
    package: bool,
}

/// What an import statement binds: `from m import a, b as c` binds `a` to `a` and `c` to `b`;
/// `import x.y as z` binds `z` to `x.y`; `import x.y` binds `x` to the package `x`;
/// `from m import *` gives `*` for both. Empty for anything else.
fn bindings(statement: &str) -> Vec<Binding> {
    let statement = statement.trim();
    let items = |list: &str| -> Vec<(String, String)> {
        list.replace(['(', ')'], " ")
            .split(',')
            .filter_map(|item| {
                let words: Vec<&str> = item.split_whitespace().collect();
                match words.as_slice() {
                    [name] => Some((name.to_string(), name.to_string())),
                    [name, "as", bound] => Some((name.to_string(), bound.to_string())),
                    _ => None,
                }
            })
            .collect()
    };
    if let Some(rest) = statement.strip_prefix("from ") {
        let Some((_, list)) = rest.split_once(" import ") else { return Vec::new() };
        if list.trim() == "*" {
            return vec![Binding { imported: "*".into(), bound: "*".into(), package: false }];
        }
        return items(list).into_iter().map(|(imported, bound)| Binding { imported, bound, package: false }).collect();
    }
    if let Some(list) = statement.strip_prefix("import ") {
        return items(list)
            .into_iter()
            .map(|(module, bound)| {
                // `import x.y` binds `x`; `import x.y as z` binds `z` to `x.y`.
                if module == bound {
                    let top = module.split('.').next().unwrap_or(&module).to_string();
                    Binding { imported: top.clone(), bound: top, package: true }
                } else {
                    Binding { imported: module, bound, package: false }
                }
            })
            .collect();
    }
    Vec::new()
}

/// Whether `from module import *` binds `name`: listed in the module's `__all__` when it has one
/// (as a string in the assignment's text), else a public name.
pub(crate) fn exports(snapshot: &Snapshot, module: &str, name: &str) -> bool {
    match snapshot.unit(&format!("{module}.__all__")) {
        Some(all) => {
            let text = all.file.source_of(all.unit);
            text.contains(&format!("\"{name}\"")) || text.contains(&format!("'{name}'"))
        }
        None => !name.starts_with('_'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn import_statements_bind_what_python_binds() {
        let pairs =
            |s: &str| -> Vec<(String, String)> { bindings(s).into_iter().map(|b| (b.imported, b.bound)).collect() };
        let p = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(pairs("from ._impl import *"), [p("*", "*")]);
        assert_eq!(pairs("from .x import A, B as C"), [p("A", "A"), p("B", "C")]);
        assert_eq!(pairs("from .x import (A,  B as C, )"), [p("A", "A"), p("B", "C")]);
        assert_eq!(pairs("import pkg.deep.leaf"), [p("pkg", "pkg")]);
        assert!(bindings("import pkg.deep.leaf, os").iter().all(|b| b.package));
        assert!(bindings("import pkg.deep.leaf as leaf").iter().all(|b| !b.package));
        assert!(bindings("from pkg import deep").iter().all(|b| !b.package));
        assert_eq!(pairs("import pkg.deep.leaf as leaf, os"), [p("pkg.deep.leaf", "leaf"), p("os", "os")]);
        assert_eq!(pairs("x = 1"), Vec::<(String, String)>::new());
        assert_eq!(
            statement_at("a\nfrom m import (\n    A,  # the a\n    B,\n)\nz\n", 2)
                .as_deref()
                .map(str::split_whitespace)
                .map(|w| w.collect::<Vec<_>>().join(" ")),
            Some("from m import ( A, B, )".to_string())
        );
        assert_eq!(statement_at("from m import A, \\\n    B\n", 1).map(|s| bindings(&s).len()), Some(2));
    }
}
