//! The graph walks behind the traversal steps: neighbours by edge kind, breadth-first
//! traversal from several starts, overriding methods and dispatch, class hierarchies, cycles,
//! shortest paths, and the notes that say what a walk could not see (unresolved call sites).

use std::collections::VecDeque;

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};

use super::names::resolve_symbol;
use super::{Exec, QueryError, Row};
use crate::ast::{Depth, Symbol, Traversal};

fn neighbours(snapshot: &Snapshot, id: &str, traversal: Traversal) -> Vec<(String, EdgeKind, Option<u32>)> {
    let (kinds, backward) = traversal.edges();
    let mut out = Vec::new();
    if backward {
        for (edge, _) in snapshot.edges_to(id) {
            if kinds.contains(&edge.kind) {
                out.push((edge.src.to_string(), edge.kind, edge.line));
            }
        }
        // Importers of a module also import the names defined in it (`from m import f`): for
        // `importers` and for `impact`, whose answer for a module would otherwise leave out
        // every module that imports names from it. Only those imports: what calls `m.f` is
        // `impact m.f`, not the module's.
        if matches!(traversal, Traversal::Importers | Traversal::Impact)
            && let Some(u) = snapshot.unit(id)
            && u.unit.kind == UnitKind::Module
        {
            for name in u.file.graph.units.iter().skip(1) {
                for (edge, _) in snapshot.edges_to(&name.id) {
                    if edge.kind == EdgeKind::Imports && *edge.src != *id {
                        out.push((edge.src.to_string(), edge.kind, edge.line));
                    }
                }
            }
        }
    } else {
        for (edge, _) in snapshot.edges_from(id) {
            if kinds.contains(&edge.kind) {
                out.push((edge.dst.to_string(), edge.kind, edge.line));
            }
        }
    }
    out
}

pub(super) fn traverse(
    exec: &mut Exec,
    starts: &[String],
    tainted: &FxHashSet<String>,
    traversal: Traversal,
    depth: &Depth,
) -> Result<Vec<Row>, QueryError> {
    let max_depth = match depth {
        Depth::Limited(n) => *n,
        Depth::Unbounded => u32::MAX,
    };
    // A breadth-first walk from every start at once, in which each node keeps the first two
    // distinct starts whose waves reach it (the two nearest: waves arrive in order of depth). The
    // first gives a node its row, at its least depth from any start. A start's first is itself;
    // its second, when another start reaches it (`find kind class | subs`: a class that
    // subclasses another input), gives it a row at its least depth from another start. A node
    // passes a second wave on so that such a start is found even when its own wave reached the
    // nodes in between first; a start passes on its own wave only, which reaches whatever lies
    // beyond it sooner than another's through it.
    let direction = if traversal.edges().1 { "in" } else { "out" };
    let mut waves: FxHashMap<String, (usize, Option<usize>)> = FxHashMap::default();
    let mut queue: VecDeque<(String, u32, usize, bool)> = VecDeque::new();
    for (i, s) in starts.iter().enumerate() {
        if !waves.contains_key(s) {
            waves.insert(s.clone(), (i, None));
            queue.push_back((s.clone(), 0, i, tainted.contains(s)));
        }
    }
    // Each queued node carries whether the way it was reached stands on stale evidence.
    let mut rows: Vec<Row> = Vec::new();
    // The row each unit reached got, by (unit, from): a further edge between the same two units
    // (a second call site, or a reference where `via` says calls) adds its line to that row.
    let mut row_of: FxHashMap<(String, String), usize> = FxHashMap::default();
    'outer: while let Some((node, d, origin, node_tainted)) = queue.pop_front() {
        if d >= max_depth {
            continue;
        }
        for (next, kind, line) in neighbours(exec.snapshot(), &node, traversal) {
            if !exec.tick()? {
                break 'outer;
            }
            if let Some(&at) = row_of.get(&(next.clone(), node.clone()))
                && let Some(line) = line
                && rows[at].line != Some(line)
                && !rows[at].also_at.contains(&line)
            {
                rows[at].also_at.push(line);
            }
            // Whether this wave gives `next` a row, and whether it travels on from there.
            let (gives_row, travels_on) = match waves.get_mut(next.as_str()) {
                // A unit's edge to itself (a recursive call): a start is its own caller and
                // callee, listed at depth 1 from itself unless another start reached it first.
                // Any other unit has its row already, and the edge leads nowhere new.
                Some((first, second @ None)) if next == node && d == 0 => {
                    *second = Some(*first);
                    (true, false)
                }
                Some(_) if next == node => continue,
                None => {
                    waves.insert(next.clone(), (origin, None));
                    (true, true)
                }
                Some((first, second @ None)) if *first != origin => {
                    *second = Some(origin);
                    // A start's row comes with another start's wave; anything else's came with
                    // the first, and this one only travels on.
                    let is_start = starts[*first] == next;
                    (is_start, !is_start)
                }
                Some(_) => continue,
            };
            if gives_row && exec.full(&rows) {
                break 'outer;
            }
            let (src, dst) = if direction == "in" { (&next, &node) } else { (&node, &next) };
            let stale_evidence = node_tainted || exec.edge_is_stale(src, dst, kind);
            if gives_row {
                row_of.insert((next.clone(), node.clone()), rows.len());
                rows.push(Row {
                    id: next.clone(),
                    depth: Some(d + 1),
                    via: Some(kind),
                    from: Some(node.clone()),
                    direction: Some(direction),
                    line,
                    stale_evidence,
                    ..Row::default()
                });
            }
            if travels_on {
                queue.push_back((next, d + 1, origin, stale_evidence));
            }
        }
    }
    // `line` is the site of the edge `via` names; `also_at` the others, in order.
    for row in rows.iter_mut().filter(|r| !r.also_at.is_empty()) {
        row.also_at.sort_unstable();
    }
    Ok(rows)
}

/// The methods of the method `id`'s base classes (transitively, as the graph's `inherits` edges
/// give them) that it overrides, each with how many call sites resolve to it. A call resolved to
/// a base's method (`a.step()` with `a: A`) reaches the override whenever the receiver is an
/// instance of the subclass: `callers` of the override cannot list such sites as its own, but
/// must not let its list look complete.
fn overridden_callers(snapshot: &Snapshot, id: &str) -> Vec<(String, usize)> {
    let Some((class, method)) = id.rsplit_once('.') else { return Vec::new() };
    let out: Vec<String> = hierarchy(snapshot, class, Direction::Up)
        .iter()
        .map(|base| format!("{base}.{method}"))
        .filter(|candidate| snapshot.kind_of(candidate) == Some(UnitKind::Method))
        .collect();
    // Left out, as they never reach the override: a method of the same name calling it (an
    // override's `super().step()`, in this hierarchy or a sibling one), and a construction of
    // the base itself (`Base(...)` calls `Base.__init__` on a `Base`).
    out.into_iter()
        .filter_map(|candidate| {
            let base = candidate.rsplit_once('.').map_or("", |(base, _)| base);
            let sites = snapshot
                .edges_to(&candidate)
                .iter()
                .filter(|(e, _)| {
                    let same_name = e.src.rsplit('.').next() == Some(method);
                    let construction = snapshot
                        .edges_from(&e.src)
                        .iter()
                        .any(|(other, _)| other.kind == EdgeKind::Calls && *other.dst == *base && other.line == e.line);
                    e.kind == EdgeKind::Calls && !same_name && !construction
                })
                .count();
            (sites > 0).then_some((candidate, sites))
        })
        .collect()
}

/// The methods overriding the method `id` in its class's subclasses (transitively, down the
/// graph's `inherits` edges), in breadth-first order.
fn overriding_methods(snapshot: &Snapshot, id: &str) -> Vec<String> {
    let Some((class, method)) = id.rsplit_once('.') else { return Vec::new() };
    hierarchy(snapshot, class, Direction::Down)
        .into_iter()
        .map(|subclass| format!("{subclass}.{method}"))
        .filter(|candidate| snapshot.kind_of(candidate) == Some(UnitKind::Method))
        .collect()
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Up,
    Down,
}

/// The classes above `class` (its bases, transitively) or below it (its subclasses), along the
/// graph's `inherits` edges, breadth first. Bounded at 200: a framework's base class may have
/// hundreds of subclasses.
fn hierarchy(snapshot: &Snapshot, class: &str, direction: Direction) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut seen: FxHashSet<String> = FxHashSet::default();
    let mut queue: VecDeque<String> = VecDeque::from([class.to_string()]);
    while let Some(current) = queue.pop_front() {
        let edges = match direction {
            Direction::Up => snapshot.edges_from(&current),
            Direction::Down => snapshot.edges_to(&current),
        };
        for (edge, _) in edges {
            let next = if direction == Direction::Up { &edge.dst } else { &edge.src };
            if edge.kind != EdgeKind::Inherits || seen.len() >= 200 || !seen.insert(next.to_string()) {
                continue;
            }
            out.push(next.to_string());
            queue.push_back(next.to_string());
        }
    }
    out
}

/// The methods `id` calls that subclasses override, each with the overrides: a call resolved to
/// `A.step` (`self.step()` in a method of A, `a.step()` with `a: A`) runs `B.step` when the
/// receiver is a B. Left out, as they never dispatch down: a method of the same name calling it
/// (`super().step()`), a construction (`A(...)` runs `A.__init__` on an A) and `__init__` and
/// `__new__` in general.
fn dispatched_callees(snapshot: &Snapshot, id: &str) -> Vec<(String, Vec<String>)> {
    let own_name = id.rsplit('.').next();
    let edges = snapshot.edges_from(id);
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for (edge, _) in edges.iter() {
        if edge.kind != EdgeKind::Calls
            || snapshot.kind_of(&edge.dst) != Some(UnitKind::Method)
            || out.iter().any(|(callee, _)| **callee == *edge.dst)
        {
            continue;
        }
        let Some((class, method)) = edge.dst.rsplit_once('.') else { continue };
        let construction = edges
            .iter()
            .any(|(other, _)| other.kind == EdgeKind::Calls && *other.dst == *class && other.line == edge.line);
        if Some(method) == own_name || construction || method == "__init__" || method == "__new__" {
            continue;
        }
        // Overrides the unit's own edges already reach (a receiver known to be the subclass)
        // are in the list as rows.
        let mut overrides = overriding_methods(snapshot, &edge.dst);
        overrides.retain(|o| !edges.iter().any(|(e, _)| e.kind == EdgeKind::Calls && *e.dst == **o));
        if !overrides.is_empty() {
            out.push((edge.dst.to_string(), overrides));
        }
    }
    out
}

/// "None" is not "unknown": say when call sites that fresco could not resolve might reach the
/// unit (callers), or when the unit itself has unresolved call sites (callees).
pub(super) fn completeness_notes(exec: &mut Exec, id: &str, traversal: Traversal) {
    let snapshot = exec.ctx.snapshot;
    let Some(unit) = snapshot.unit(id) else {
        return;
    };
    match traversal {
        Traversal::Callers | Traversal::Impact if unit.unit.kind.is_callable() || unit.unit.kind == UnitKind::Class => {
            let simple = unit.unit.name.rsplit('.').next().unwrap_or("");
            let count = snapshot.unresolved_named(simple).len();
            if count > 0 {
                exec.notes.push(format!(
                    "{count} unresolved call site(s) named '{simple}' might also reach {id}: the list may be incomplete (see `unresolved`)"
                ));
            }
            let overridden =
                if unit.unit.kind == UnitKind::Method { overridden_callers(snapshot, id) } else { Vec::new() };
            if !overridden.is_empty() {
                let class = id.rsplit_once('.').map_or(id, |(class, _)| class);
                let listed: Vec<String> =
                    overridden.iter().map(|(method, sites)| format!("{method} ({sites})")).collect();
                exec.notes.push(format!(
                    "call sites of {}, which {id} overrides, may reach {id} at run time, when the receiver is an \
                     instance of {class} (dynamic dispatch): `callers` of those methods lists them",
                    listed.join(", ")
                ));
            }
        }
        Traversal::Callees | Traversal::Deps => {
            for (callee, overrides) in dispatched_callees(snapshot, id) {
                const SHOWN: usize = 6;
                let mut listed = overrides.iter().take(SHOWN).cloned().collect::<Vec<_>>().join(", ");
                if overrides.len() > SHOWN {
                    listed.push_str(&format!(", ... ({} in all)", overrides.len()));
                }
                exec.notes.push(format!(
                    "{id} calls {callee}, which subclasses override: at run time the call runs the override of the \
                     receiver's class (dynamic dispatch): {listed}"
                ));
            }
            let own: Vec<&fresco_graph::Unresolved> = unit.file.unresolved().filter(|u| u.caller == id).collect();
            if !own.is_empty() {
                let sample: Vec<String> =
                    own.iter().take(5).map(|u| format!("{} (line {})", u.callee, u.line)).collect();
                exec.notes.push(format!(
                    "{id} has {} unresolved call site(s): {}{}",
                    own.len(),
                    sample.join(", "),
                    if own.len() > 5 { ", ..." } else { "" }
                ));
            }
        }
        _ => {}
    }
}

/// [`completeness_notes`] for a step with several starts (a glob, a pipe): each start's notes
/// while they are few, else one note naming how many of the starts have some and the first of
/// them. A short or empty list is never presented as the whole truth, whatever the start. The
/// first [`STARTS_CHECKED`] distinct starts are looked at (each costs a look at its file's
/// unresolved sites and its class's hierarchy: all of django's 23,000 units took 12 s), and the
/// note says so when there were more.
pub(super) fn completeness_notes_of_several(exec: &mut Exec, starts: &[String], traversal: Traversal) {
    const SHOWN: usize = 3;
    let mut distinct: FxHashSet<&str> = FxHashSet::default();
    let starts: Vec<&String> = starts.iter().filter(|id| distinct.insert(id.as_str())).collect();
    let mut found: Vec<(&String, Vec<String>)> = Vec::new();
    let checked = starts.len().min(STARTS_CHECKED);
    for id in &starts[..checked] {
        let kept = std::mem::take(&mut exec.notes);
        completeness_notes(exec, id, traversal);
        let own = std::mem::replace(&mut exec.notes, kept);
        if !own.is_empty() {
            found.push((id, own));
        }
    }
    if found.iter().map(|(_, notes)| notes.len()).sum::<usize>() <= SHOWN && checked == starts.len() {
        exec.notes.extend(found.into_iter().flat_map(|(_, notes)| notes));
        return;
    }
    if found.is_empty() {
        // Nothing among those looked at; the rest were not looked at, and the answer says so.
        exec.notes.push(format!(
            "the answer's completeness was checked for the first {checked} of the {} units this step started \
             from (none of them has unresolved call sites or overrides that bear on it); ask for one of the \
             others alone to check it",
            starts.len()
        ));
        return;
    }
    let named: Vec<&str> = found.iter().take(SHOWN).map(|(id, _)| id.as_str()).collect();
    let of = if checked < starts.len() {
        format!("of the first {checked} of the {} units this step started from", starts.len())
    } else {
        format!("of the {checked} units this step started from")
    };
    exec.notes.push(format!(
        "the answer may be incomplete for {} {of} (unresolved call sites, overrides): {}{}; ask for one of \
         them alone to see why",
        found.len(),
        named.join(", "),
        if found.len() > SHOWN { ", ..." } else { "" }
    ));
}

/// How many starts of a step [`completeness_notes_of_several`] looks at.
const STARTS_CHECKED: usize = 200;

pub(super) fn unresolved(exec: &mut Exec, scope: Option<&Symbol>) -> Result<Vec<Row>, QueryError> {
    let snapshot = exec.ctx.snapshot;
    let ids = match scope {
        Some(s) => Some(resolve_symbol(snapshot, s)?),
        None => None,
    };
    let mut rows = Vec::new();
    for file in snapshot.files() {
        for u in file.unresolved() {
            if !exec.tick()? {
                return Ok(rows);
            }
            let wanted = match &ids {
                None => true,
                Some(ids) => ids
                    .iter()
                    .any(|id| u.caller == *id || u.caller.starts_with(&format!("{id}.")) || file.graph.module == *id),
            };
            if wanted {
                if exec.full(&rows) {
                    return Ok(rows);
                }
                // Unresolved against a module whose file changed since: it may resolve now (the
                // changed file defines the name), so the row stands on stale evidence.
                let stale_evidence = exec.resolved_against_stale(&u.caller);
                rows.push(Row {
                    callee: Some(u.callee.clone()),
                    line: Some(u.line),
                    stale_evidence,
                    ..Row::unit(u.caller.clone())
                });
            }
        }
    }
    Ok(rows)
}

pub(super) fn cycles(exec: &mut Exec, kind: EdgeKind) -> Result<Vec<Row>, QueryError> {
    let snapshot = exec.ctx.snapshot;
    let mut graph: petgraph::graph::DiGraph<String, ()> = petgraph::graph::DiGraph::new();
    let mut index: FxHashMap<String, petgraph::graph::NodeIndex> = FxHashMap::default();
    let mut node = |g: &mut petgraph::graph::DiGraph<String, ()>, id: &str| {
        *index.entry(id.to_string()).or_insert_with(|| g.add_node(id.to_string()))
    };
    for (edge, file) in snapshot.edges() {
        // Out of time, the cycles of the edges read so far are cycles of the graph too (the
        // answer says it is truncated).
        if !exec.tick()? {
            break;
        }
        if edge.kind != kind {
            continue;
        }
        let (src, dst) = if kind == EdgeKind::Imports {
            // Module-level graph: an import of a name counts as an import of its module.
            match snapshot.unit(&edge.dst) {
                Some(u) => (file.graph.module.clone(), u.file.graph.module.clone()),
                None => continue,
            }
        } else {
            if !snapshot.contains_unit(&edge.dst) {
                continue;
            }
            (edge.src.to_string(), edge.dst.to_string())
        };
        if src == dst && kind == EdgeKind::Imports {
            continue;
        }
        let a = node(&mut graph, &src);
        let b = node(&mut graph, &dst);
        graph.update_edge(a, b, ());
    }
    let mut sccs: Vec<Vec<String>> = petgraph::algo::tarjan_scc(&graph)
        .into_iter()
        .filter(|c| c.len() > 1 || graph.contains_edge(c[0], c[0]))
        .map(|c| {
            let mut names: Vec<String> = c.into_iter().map(|n| graph[n].clone()).collect();
            names.sort();
            names
        })
        .collect();
    sccs.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    let mut rows = Vec::new();
    for (i, cycle) in sccs.into_iter().enumerate() {
        for id in cycle {
            if exec.full(&rows) {
                return Ok(rows);
            }
            rows.push(Row { group: Some(i), ..Row::unit(id) });
        }
    }
    Ok(rows)
}

/// Marks every row of a path or cycle stale when one of its units, or one of its edges, stands
/// on a file that changed after the snapshot: the path or cycle may not exist any more.
pub(super) fn taint_groups(exec: &Exec, rows: &mut [Row]) {
    if exec.ctx.is_stale.is_none() {
        return;
    }
    let stale_groups: FxHashSet<usize> = rows
        .iter()
        .filter(|r| match (&r.from, r.via) {
            (Some(from), Some(kind)) => exec.edge_is_stale(from, &r.id, kind),
            // A cycle lists its units only: the edges among them leave their files.
            _ => exec.unit_is_stale(&r.id) || exec.resolved_against_stale(&r.id),
        })
        .filter_map(|r| r.group)
        .collect();
    for row in rows.iter_mut() {
        if row.group.is_some_and(|g| stale_groups.contains(&g)) {
            row.stale_evidence = true;
        }
    }
}

/// All shortest paths (up to a bound) from any of `from` to any of `to` over `kinds`.
pub(super) fn shortest_paths(
    exec: &mut Exec,
    from: &[String],
    to: &[String],
    kinds: &[EdgeKind],
) -> Result<Vec<Row>, QueryError> {
    const MAX_PATHS: usize = 10;
    let snapshot = exec.ctx.snapshot;
    let targets: FxHashSet<&str> = to.iter().map(String::as_str).collect();
    let mut dist: FxHashMap<String, u32> = from.iter().map(|f| (f.clone(), 0)).collect();
    // Parents at the previous distance, with the edge used.
    let mut parents: FxHashMap<String, Vec<(String, EdgeKind, Option<u32>)>> = FxHashMap::default();
    let mut frontier: Vec<String> = from.to_vec();
    let mut found: Vec<String> = from.iter().filter(|f| targets.contains(f.as_str())).cloned().collect();
    let mut d = 0;
    while found.is_empty() && !frontier.is_empty() {
        d += 1;
        let mut next = Vec::new();
        for node in &frontier {
            for (edge, _) in snapshot.edges_from(node) {
                if !exec.tick()? {
                    return Ok(Vec::new());
                }
                if !kinds.contains(&edge.kind) {
                    continue;
                }
                match dist.get(&*edge.dst) {
                    Some(&dd) if dd < d => continue,
                    Some(_) => {}
                    None => {
                        dist.insert(edge.dst.to_string(), d);
                        next.push(edge.dst.to_string());
                        if targets.contains(&*edge.dst) {
                            found.push(edge.dst.to_string());
                        }
                    }
                }
                // One entry per unit one step nearer: a path is a sequence of units, each hop
                // shown by the first edge found between them. Kept per kind, two kinds joining
                // one pair (a call and a reference) made the same units two paths, which filled
                // the bound and hid a distinct path (a review: 5 of rich's 6 shown, "more than 10").
                let list = parents.entry(edge.dst.to_string()).or_default();
                if !list.iter().any(|(p, _, _)| p == node) {
                    list.push((node.clone(), edge.kind, edge.line));
                }
            }
        }
        frontier = next;
    }
    // Enumerate paths backwards from each target.
    /// A unit on a path and the edge that reached it (kind, line, from), none for the start.
    type Step = (String, Option<(EdgeKind, Option<u32>, String)>);
    /// Per unit, the units one step nearer the start with an edge to it (kind, line).
    type Parents = FxHashMap<String, Vec<(String, EdgeKind, Option<u32>)>>;
    let mut paths: Vec<Vec<Step>> = Vec::new();
    fn walk(
        node: &str,
        parents: &Parents,
        dist: &FxHashMap<String, u32>,
        suffix: &mut Vec<Step>,
        out: &mut Vec<Vec<Step>>,
    ) {
        // One more than shown, to tell "exactly MAX_PATHS" from "more".
        if out.len() > MAX_PATHS {
            return;
        }
        let here = dist.get(node).copied().unwrap_or(0);
        if here == 0 {
            let mut path = vec![(node.to_string(), None)];
            path.extend(suffix.iter().rev().cloned());
            out.push(path);
            return;
        }
        for (parent, kind, line) in parents.get(node).map(Vec::as_slice).unwrap_or(&[]) {
            if dist.get(parent).copied() != Some(here - 1) {
                continue;
            }
            suffix.push((node.to_string(), Some((*kind, *line, parent.clone()))));
            walk(parent, parents, dist, suffix, out);
            suffix.pop();
        }
    }
    found.sort();
    for target in &found {
        walk(target, &parents, &dist, &mut Vec::new(), &mut paths);
    }
    if paths.len() > MAX_PATHS {
        paths.truncate(MAX_PATHS);
        exec.truncated = true;
        exec.notes.push(format!("more than {MAX_PATHS} shortest paths; showing {MAX_PATHS}"));
    }
    let mut rows = Vec::new();
    for (i, path) in paths.into_iter().enumerate() {
        for (step, (id, edge)) in path.into_iter().enumerate() {
            let (via, line, from) = match edge {
                Some((k, l, f)) => (Some(k), l, Some(f)),
                None => (None, None, None),
            };
            rows.push(Row { id, depth: Some(step as u32), via, line, from, group: Some(i), ..Row::default() });
        }
    }
    Ok(rows)
}
