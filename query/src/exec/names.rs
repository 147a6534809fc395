//! What a query's symbols and files name in the snapshot: unit ids for a symbol (with
//! suggestions when none matches), files for a path given relative to the client, definitions
//! sharing a name.

use std::sync::Arc;

use fresco_graph::{Snapshot, UnitKind};
use rustc_hash::FxHashMap;

use super::{Context, QueryError};
use crate::ast::{Condition, ContextTarget, Query, Stage, Symbol};
use crate::glob;

/// Resolves a symbol to unit ids, or fails with suggestions.
pub fn resolve_symbol(snapshot: &Snapshot, symbol: &Symbol) -> Result<Vec<String>, QueryError> {
    match symbol {
        Symbol::Name(name) => {
            // Units are named by identifiers as Python reads them, NFKC-normalised (`ﬁnd` is
            // `find`); an error still names what the query wrote.
            let normal = nfkc(name);
            if *normal != **name
                && let Ok(ids) = resolve_symbol(snapshot, &Symbol::Name(normal.to_string()))
            {
                return Ok(ids);
            }
            if snapshot.contains_unit(name) {
                return Ok(definitions_of(snapshot, name));
            }
            // `X#1` names the first definition alone, as `X#2` names the second.
            if let Some(first) = name.strip_suffix("#1").filter(|f| !f.contains('#') && snapshot.contains_unit(f)) {
                return Ok(vec![first.to_string()]);
            }
            if snapshot.is_external(name) {
                return Ok(vec![name.clone()]);
            }
            let by_name: Vec<String> =
                snapshot.units().filter(|u| u.unit.name == *name).map(|u| u.unit.id.clone()).collect();
            if !by_name.is_empty() {
                return Ok(by_name);
            }
            let exported = crate::reexport::reexported(snapshot, name);
            if !exported.is_empty() {
                return Ok(exported);
            }
            let inherited = inherited_member(snapshot, name);
            if !inherited.is_empty() {
                return Ok(inherited);
            }
            // `pkg.core.helper` with `pkg/core.py` skipped: say so, not only that it is unknown.
            let skipped = std::iter::successors(Some(name.as_str()), |n| n.rsplit_once('.').map(|(head, _)| head))
                .find_map(|prefix| snapshot.module_file(prefix).filter(|f| f.graph.skipped.is_some()));
            if let Some(file) = skipped {
                return Err(QueryError::NotIndexed {
                    name: name.clone(),
                    file: file.graph.path.clone(),
                    reason: file.graph.skipped.as_ref().map(ToString::to_string).unwrap_or_default(),
                    at: None,
                });
            }
            Err(QueryError::UnknownSymbol { name: name.clone(), suggestions: suggestions(snapshot, &normal), at: None })
        }
        Symbol::Glob(pattern) => {
            let pattern = &*nfkc(pattern);
            let ids: Vec<String> = snapshot
                .units()
                .filter(|u| glob::matches(pattern, &u.unit.id))
                .map(|u| u.unit.id.clone())
                .chain(snapshot.externals().into_iter().filter(|x| glob::matches(pattern, x)).map(str::to_string))
                .collect();
            if ids.is_empty() {
                let written = match symbol {
                    Symbol::Glob(written) => written.clone(),
                    _ => pattern.to_string(),
                };
                return Err(QueryError::UnknownSymbol { name: written, suggestions: Vec::new(), at: None });
            }
            Ok(ids)
        }
        Symbol::Location { file, line } => {
            innermost_unit_at(snapshot, file, *line).map_err(|e| e.about_place(&format!("{file}:{line}")))
        }
    }
}

/// A name or pattern of a query as Python reads identifiers, NFKC-normalised (units are named
/// so: `ﬁnd` is `find`); the text itself when it is ASCII.
pub(crate) fn nfkc(text: &str) -> std::borrow::Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    if text.is_ascii() { std::borrow::Cow::Borrowed(text) } else { std::borrow::Cow::Owned(text.nfkc().collect()) }
}

/// A member a class inherits, named through the class, as Python finds it: `flask.Flask.route`
/// is `flask.sansio.scaffold.Scaffold.route`, the member of the first class in `Flask`'s method
/// resolution order that defines `route`. The class itself may be named by a public path. A base
/// outside the repository met first answers for the member when the graph knows it there (a call
/// resolved to `json.JSONEncoder.encode`), and ends the search otherwise: what it defines is not
/// known, and a definition further on may not be the one Python finds.
fn inherited_member(snapshot: &Snapshot, name: &str) -> Vec<String> {
    let Some((owner, member)) = name.rsplit_once('.') else { return Vec::new() };
    let classes: Vec<String> = if snapshot.kind_of(owner) == Some(UnitKind::Class) {
        vec![owner.to_string()]
    } else {
        crate::reexport::reexported(snapshot, owner)
    };
    let Some(class) = classes.into_iter().find(|c| snapshot.kind_of(c) == Some(UnitKind::Class)) else {
        return Vec::new();
    };
    for base in method_resolution_order(snapshot, &class).into_iter().skip(1) {
        let id = format!("{base}.{member}");
        if snapshot.contains_unit(&id) {
            return definitions_of(snapshot, &id);
        }
        // A marker base (`ABC`, `Generic[T]`, `Protocol`) supplies no member: the search goes
        // on past it, as the resolver's does.
        if snapshot.kind_of(&base) != Some(UnitKind::Class) && !MARKER_BASES.contains(&base.as_str()) {
            return if snapshot.is_external(&id) { vec![id] } else { Vec::new() };
        }
    }
    Vec::new()
}

/// Bases outside the repository that supply no member to their subclasses (the resolver's
/// list): lookup goes on past them.
const MARKER_BASES: &[&str] =
    &["abc.ABC", "typing.Generic", "typing.Protocol", "typing_extensions.Protocol", "typing_extensions.Generic"];

/// The classes `class` looks members up in, itself first: C3 linearisation over the `inherits`
/// edges (in the order the bases are written), as Python computes `__mro__` and as the resolver
/// orders them: a base outside the repository takes its place with no bases of its own known,
/// and `object`, which every class ends with, is left out (an explicit `object` base merged
/// early would hide the mixins after it). Where the bases admit no linearisation (Python
/// refuses such a class), or the hierarchy is deeper than [`MRO_DEPTH`], depth first, left to
/// right.
pub(crate) fn method_resolution_order(snapshot: &Snapshot, class: &str) -> Vec<String> {
    let mut memo = FxHashMap::default();
    if let Some(order) = linearise(snapshot, class, &mut Vec::new(), &mut memo) {
        return order;
    }
    let mut order: Vec<String> = Vec::new();
    let mut stack = vec![class.to_string()];
    let mut seen = rustc_hash::FxHashSet::default();
    while let Some(c) = stack.pop() {
        if !seen.insert(c.clone()) {
            continue;
        }
        stack.extend(direct_bases(snapshot, &c).into_iter().rev());
        order.push(c);
    }
    order
}

/// How deep a hierarchy [`method_resolution_order`] linearises (deeper: depth first).
const MRO_DEPTH: usize = 1000;

/// The bases a class is written with, in order: classes of the repository and targets outside it.
fn direct_bases(snapshot: &Snapshot, class: &str) -> Vec<String> {
    if snapshot.kind_of(class) != Some(UnitKind::Class) {
        return Vec::new();
    }
    let mut out: Vec<String> = Vec::new();
    for (edge, _) in snapshot.edges_from(class) {
        if edge.kind == fresco_graph::EdgeKind::Inherits
            && &*edge.dst != "builtins.object"
            && !out.iter().any(|b| **b == *edge.dst)
        {
            out.push(edge.dst.to_string());
        }
    }
    out
}

fn linearise(
    snapshot: &Snapshot,
    class: &str,
    visiting: &mut Vec<String>,
    memo: &mut FxHashMap<String, Option<Vec<String>>>,
) -> Option<Vec<String>> {
    if let Some(known) = memo.get(class) {
        return known.clone();
    }
    // A cycle of bases (only a broken tree has one), or a hierarchy too deep to be real.
    if visiting.iter().any(|c| c == class) || visiting.len() > MRO_DEPTH {
        return None;
    }
    visiting.push(class.to_string());
    let direct = direct_bases(snapshot, class);
    let mut sequences: Vec<Vec<String>> = Vec::with_capacity(direct.len() + 1);
    let mut complete = true;
    for base in &direct {
        match linearise(snapshot, base, visiting, memo) {
            Some(order) => sequences.push(order),
            None => complete = false,
        }
    }
    visiting.pop();
    sequences.push(direct);
    let result = if complete { merge(class, sequences) } else { None };
    memo.insert(class.to_string(), result.clone());
    result
}

/// C3's merge: repeatedly the first head that is in no sequence's tail. Each sequence is read
/// from a moving start, with a count per class of the tails it is in, so a chain of n classes
/// costs about n² rather than n³ (a 1,600-class chain took 27 s in the indexer's first merge).
fn merge(class: &str, sequences: Vec<Vec<String>>) -> Option<Vec<String>> {
    let mut starts = vec![0usize; sequences.len()];
    let mut in_tails: FxHashMap<&str, usize> = FxHashMap::default();
    for s in &sequences {
        for c in s.iter().skip(1) {
            *in_tails.entry(c.as_str()).or_insert(0) += 1;
        }
    }
    let mut order = vec![class.to_string()];
    loop {
        let mut heads = sequences.iter().zip(&starts).filter_map(|(s, &at)| s.get(at));
        let Some(first) = heads.next() else { return Some(order) };
        let head =
            std::iter::once(first).chain(heads).find(|h| in_tails.get(h.as_str()).copied().unwrap_or(0) == 0)?.clone();
        for (s, at) in sequences.iter().zip(starts.iter_mut()) {
            if s.get(*at) == Some(&head) {
                *at += 1;
                // The next element leaves its sequence's tail for its head.
                if let Some(next) = s.get(*at)
                    && let Some(count) = in_tails.get_mut(next.as_str())
                {
                    *count = count.saturating_sub(1);
                }
            }
        }
        order.push(head);
    }
}

/// The innermost unit at `line` of `file` (the definition rather than its module on a tie).
fn innermost_unit_at(snapshot: &Snapshot, file: &str, line: u32) -> Result<Vec<String>, QueryError> {
    let Some(entry) = find_file(snapshot, file)? else {
        let near = files_named_like(snapshot, file);
        let hint = if near.is_empty() { String::new() } else { format!("; did you mean: {}?", near.join(", ")) };
        return Err(QueryError::Invalid(format!("no indexed file '{file}'{hint}")));
    };
    let innermost = entry
        .graph
        .units
        .iter()
        .filter(|u| u.start_line <= line && line <= u.end_line)
        // On a tie (a one-function file), the definition rather than its module.
        .min_by_key(|u| (u.end_line - u.start_line, std::cmp::Reverse(u.start_line), u.kind == UnitKind::Module));
    match innermost {
        Some(u) => Ok(vec![u.id.clone()]),
        // A file that was not indexed (too large, not UTF-8) has no units: say why.
        None => match &entry.graph.skipped {
            Some(reason) => {
                Err(QueryError::Invalid(format!("{file} has no unit at line {line}: it is not indexed ({reason})")))
            }
            None => Err(QueryError::Invalid(format!("{file} has no unit at line {line}"))),
        },
    }
}

/// The query with every absolute file path made relative to `root`: the paths the index holds
/// are relative to it. A path outside the root is an error that says where the root is, rather
/// than "no indexed file". File globs (`in "..."`, `where file`) that start with `/` are made
/// relative the same way as far as their first wildcard.
pub(super) fn relative_paths(query: &Query, ctx: &Context) -> Result<Query, QueryError> {
    let Some(root) = ctx.root else { return Ok(query.clone()) };
    let mut query = query.clone();
    visit_paths(&mut query, &mut |path, glob| {
        let written = path.clone();
        if !path.starts_with('/') {
            // A relative glob through `.` or `..` (`src/../tests/*`) is read from the root, as
            // an absolute one is: matched as written, it would match nothing.
            if !(glob && walks_through_dots(path)) {
                return Ok(());
            }
            *path = root.join(&*path).to_string_lossy().into_owned();
        }
        let under = |p: &std::path::Path| -> Option<String> {
            p.strip_prefix(root).ok().and_then(|rest| rest.to_str()).map(str::to_string)
        };
        if glob {
            // A glob written from the root down: the directories before its first wildcard with
            // `.` and `..` resolved, then through symbolic links as the file system names them
            // (an editor that opened the repository by a link).
            // Without a wildcard the whole path is the directory part (the root itself names no
            // file, and matches nothing).
            let cut = match path.find(['*', '?']) {
                Some(wildcard) => path[..wildcard].rfind('/').unwrap_or(0),
                None => path.len(),
            };
            let (directory, pattern) = path.split_at(cut);
            let directory = lexically_normal(directory);
            let real = under(&directory)
                .or_else(|| ctx.canonicalize.and_then(|c| c(&directory)).and_then(|real| under(&real)));
            return match real {
                Some(rest) => {
                    *path = if rest.is_empty() {
                        pattern.trim_start_matches('/').to_string()
                    } else {
                        format!("{rest}{pattern}")
                    };
                    Ok(())
                }
                // Paths are kept relative to the root: an absolute pattern elsewhere never matches.
                None => Err(QueryError::Invalid(format!(
                    "'{written}' is not under the indexed root {}: name files by their path under it",
                    root.display()
                ))
                .about_place(&written)),
            };
        }
        // `a/../b` as the path it names; then, through symbolic links (an editor that opened the
        // repository by a link has the link's path), as the file system names it.
        let normal = lexically_normal(path);
        let relative =
            under(&normal).or_else(|| ctx.canonicalize.and_then(|c| c(&normal)).and_then(|real| under(&real)));
        match relative {
            Some(rest) if !rest.is_empty() => {
                *path = rest;
                Ok(())
            }
            Some(_) => Err(QueryError::Invalid(format!("'{path}' is the indexed root itself, not a file under it"))
                .about_place(path)),
            None => Err(QueryError::Invalid(format!(
                "'{path}' is not a file under the indexed root {}: name files by their path under it",
                root.display()
            ))
            .about_place(path)),
        }
    })?;
    Ok(query)
}

/// Whether a glob's directories before its first wildcard include `.` or `..`.
fn walks_through_dots(glob: &str) -> bool {
    let directories = match glob.find(['*', '?']) {
        Some(wildcard) => glob[..wildcard].rsplit_once('/').map_or("", |(dirs, _)| dirs),
        None => glob,
    };
    directories.split('/').any(|part| part == "." || part == "..")
}

/// `path` with `.` and `..` components resolved by their text (`/r/pkg/../pkg/a.py` is
/// `/r/pkg/a.py`).
fn lexically_normal(path: &str) -> std::path::PathBuf {
    use std::path::Component;
    let mut out = std::path::PathBuf::new();
    for component in std::path::Path::new(path).components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Calls `f` on every file path and file glob (second argument `true`) a query names.
fn visit_paths(
    query: &mut Query,
    f: &mut dyn FnMut(&mut String, bool) -> Result<(), QueryError>,
) -> Result<(), QueryError> {
    let symbol = |s: &mut Symbol, f: &mut dyn FnMut(&mut String, bool) -> Result<(), QueryError>| match s {
        Symbol::Location { file, .. } => f(file, false),
        Symbol::Name(_) | Symbol::Glob(_) => Ok(()),
    };
    for stage in &mut query.stages {
        match stage {
            Stage::Traverse { symbol: Some(s), .. }
            | Stage::Unresolved { scope: Some(s) }
            | Stage::Show { symbol: s } => symbol(s, f)?,
            Stage::Path { from, to, .. } => {
                symbol(from, f)?;
                symbol(to, f)?;
            }
            Stage::Context { target: ContextTarget::Unit(s), .. } => symbol(s, f)?,
            Stage::Context { target: ContextTarget::New { file, .. }, .. } => f(file, false)?,
            Stage::Find { file: Some(glob), .. } => f(glob, true)?,
            Stage::Where(conditions) => {
                for condition in conditions {
                    if let Condition::FileGlob(glob) = condition {
                        f(glob, true)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The indexed file `file` names: a path relative to the root (a leading `./` allowed), or the
/// end of exactly one path (`app.py` for `src/app.py`). `Ok(None)` when none; naming several is
/// an error that lists them.
/// The file of `module` when it was skipped, not indexed.
pub(super) fn skipped_module_file(snapshot: &Snapshot, module: &str) -> Option<Arc<fresco_graph::FileEntry>> {
    snapshot.module_file(module).filter(|f| f.graph.skipped.is_some()).cloned()
}

pub(crate) fn find_file(snapshot: &Snapshot, file: &str) -> Result<Option<Arc<fresco_graph::FileEntry>>, QueryError> {
    let normal = relative_path(file)?;
    let file = normal.as_str();
    if let Some(entry) = snapshot.file(file) {
        return Ok(Some(entry.clone()));
    }
    let suffix = format!("/{file}");
    let mut matches: Vec<_> = snapshot.files().filter(|f| f.graph.path.ends_with(&suffix)).cloned().collect();
    match matches.len() {
        0 => Ok(None),
        1 => Ok(Some(matches.remove(0))),
        n => {
            let mut paths: Vec<&str> = matches.iter().map(|f| f.graph.path.as_str()).collect();
            paths.sort_unstable();
            let shown = paths.iter().take(5).copied().collect::<Vec<_>>().join(", ");
            let more = if n > 5 { format!(" and {} more", n - 5) } else { String::new() };
            Err(QueryError::Invalid(format!("'{file}' is ambiguous: {shown}{more}; write more of its path")))
        }
    }
}

/// `file`, a path relative to the root, as the index writes paths: `.` segments and empty ones
/// dropped, `dir/..` folded (`./pkg/sub/../new.py` is `pkg/new.py`). A path that leaves the root
/// is an error.
pub(crate) fn relative_path(file: &str) -> Result<String, QueryError> {
    let mut parts: Vec<&str> = Vec::new();
    for part in file.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(QueryError::Invalid(format!(
                        "'{file}' leads outside the indexed root: give a path relative to the root"
                    )));
                }
            }
            _ => parts.push(part),
        }
    }
    Ok(parts.join("/"))
}

/// Up to five indexed files whose name is like the end of `file`: the same name but for a
/// leading underscore (`api.py` for `httpx/_api.py`), a name an edit or two away, or one
/// containing it (`test_api.py`), closest first.
fn files_named_like(snapshot: &Snapshot, file: &str) -> Vec<String> {
    let wanted = file.rsplit('/').next().unwrap_or(file).to_ascii_lowercase();
    // A short name needs a closer match: within two edits of `api.py` are `asgi.py` and `base.py`.
    let slack = if wanted.len() < 10 { 1 } else { 2 };
    let mut near: Vec<(usize, String)> = snapshot
        .files()
        .filter_map(|f| {
            let path = &f.graph.path;
            let name = path.rsplit('/').next().unwrap_or(path).to_ascii_lowercase();
            let distance = if name.trim_start_matches('_') == wanted.trim_start_matches('_') {
                0
            } else if wanted.trim_end_matches(".py").len() >= 3 && name.contains(wanted.trim_end_matches(".py")) {
                slack + 1
            } else if name.len().abs_diff(wanted.len()) <= slack {
                Some(edit_distance(&name, &wanted)).filter(|&d| d <= slack).unwrap_or(usize::MAX)
            } else {
                usize::MAX
            };
            (distance <= slack + 1).then(|| (distance, path.clone()))
        })
        .collect();
    near.sort();
    near.into_iter().take(5).map(|(_, path)| path).collect()
}

fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            cur[j] = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Every definition of the name `id` was given: `id` itself, then `id#2`, `id#3`, … (a name
/// defined again in the same scope: an `@overload` chain, a property's setter, a conditional
/// redefinition), in source order. Calls resolve to the last, the one Python binds, so a query
/// on the plain name reaches them all.
pub fn definitions_of(snapshot: &Snapshot, id: &str) -> Vec<String> {
    if id.contains('#') {
        return vec![id.to_string()];
    }
    definitions_of_name(snapshot, id)
}

/// Every definition of `name` (`name`, `name#2`, ...), also for a name inside a definition that
/// has a suffix of its own (`m.C#2.f`, `m.C#2.f#2`), which [`definitions_of`] takes as one
/// definition selected alone.
pub(crate) fn definitions_of_name(snapshot: &Snapshot, name: &str) -> Vec<String> {
    let mut out = vec![name.to_string()];
    for n in 2.. {
        let next = format!("{name}#{n}");
        if !snapshot.contains_unit(&next) {
            break;
        }
        out.push(next);
    }
    out
}

/// Whether `ids` are the definitions of one name (see [`definitions_of`]).
pub(crate) fn one_name(ids: &[String]) -> bool {
    ids.first().is_some_and(|first| {
        ids.iter().all(|id| id == first || id.strip_prefix(first.as_str()).is_some_and(|rest| rest.starts_with('#')))
    })
}

/// The closest existing names: same last segment first, then by edit distance; when none is
/// close, the members of the name's module or class, if it exists.
///
/// Edit distances are computed only between strings whose lengths allow a close match, so the
/// work stays proportional to the number of units whatever the name's length (a name of 100,000
/// characters took 9 s here when every unit's name was compared with it in full). A short name
/// needs a near-exact match: within 2 edits of a 1-character name is every short name.
fn suggestions(snapshot: &Snapshot, name: &str) -> Vec<String> {
    // A file's path without a line (`callers src/pkg/api.py`): its module is the unit meant.
    if name.ends_with(".py") && name.contains('/') {
        let path = name.trim_start_matches("./");
        let suffix = format!("/{path}");
        let mut modules: Vec<String> = snapshot
            .files()
            .filter(|f| f.graph.path == path || f.graph.path.ends_with(&suffix))
            .map(|f| f.graph.module.clone())
            .collect();
        if !modules.is_empty() {
            modules.sort();
            modules.truncate(5);
            return modules;
        }
    }
    let last = name.rsplit('.').next().unwrap_or(name).to_ascii_lowercase();
    let simple_slack = (last.chars().count() / 3).min(2);
    let id_slack = (name.chars().count() / 3).min(3);
    let mut scored: Vec<(usize, String)> = Vec::new();
    for u in snapshot.units() {
        let id = &u.unit.id;
        let simple = id.rsplit('.').next().unwrap_or(id).to_ascii_lowercase();
        let close_simple = simple == last
            || (last.len() > 3 && simple.contains(&last))
            || (simple.len().abs_diff(last.len()) <= simple_slack && edit_distance(&simple, &last) <= simple_slack);
        // Only between names of similar length (id_slack is at most 3).
        let distance = (id.len().abs_diff(name.len()) <= 64).then(|| edit_distance(id, name));
        let close_id = id.len().abs_diff(name.len()) <= id_slack && distance.is_some_and(|d| d <= id_slack);
        if close_simple || close_id {
            scored.push((distance.unwrap_or(usize::MAX), id.clone()));
        }
    }
    if scored.is_empty()
        && let Some((parent, _)) = name.rsplit_once('.')
        && snapshot.unit(parent).is_some()
    {
        // Nothing of that name anywhere, but its module or class exists (`requests.api.nothing`):
        // what that defines, the closest names first.
        let prefix = format!("{parent}.");
        for u in snapshot.units() {
            let id = &u.unit.id;
            if let Some(member) = id.strip_prefix(&prefix).filter(|m| !m.contains('.')) {
                // Only between names of similar length, as above.
                let distance = if member.len().abs_diff(last.len()) <= 64 {
                    edit_distance(&member.to_ascii_lowercase(), &last)
                } else {
                    usize::MAX
                };
                scored.push((distance, id.clone()));
            }
        }
    }
    scored.sort();
    scored.dedup_by(|a, b| a.1 == b.1);
    // External targets the name ends (`sorted` for `builtins.sorted`, `path.join` for
    // `os.path.join`) are what was meant more surely than any near-miss among the units: they
    // come first, builtins before the rest.
    let suffix = format!(".{name}");
    let mut externals: Vec<&str> = snapshot.externals().into_iter().filter(|e| e.ends_with(&suffix)).collect();
    externals.sort_by_key(|e| (!e.starts_with("builtins."), e.len(), *e));
    let mut out: Vec<String> = externals.into_iter().take(5).map(str::to_string).collect();
    out.extend(scored.into_iter().map(|(_, id)| id).take(5));
    out.truncate(5);
    out
}
