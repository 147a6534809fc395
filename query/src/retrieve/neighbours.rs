//! Evidence from the target's surroundings: what the other code of its class and file uses,
//! which imports were made for it, which definitions nothing else uses, what calls it, and
//! which members of its bases its class defines again.
//!
//! Each is a fact about the graph around the target, found once per target and looked up per
//! candidate; most start from the same count of who around the target uses what
//! ([`NeighbourUsage`]).

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};

use super::ids::{
    body_uses, class_and_bases, code_edges, edge_targets, header_end_line, is_test_path, is_within, last_name,
    likely_neighbours, neighbours_at_line, owner_of, source_order_neighbours, without_lambdas,
};
use super::target::{
    Target, has_no_instance, takes_no_instance, target_name, target_owner, works_on_an_initialised_instance,
};

/// Whether `id` is a private definition of the target's file (`_helper`, `_CACHE`; not a dunder,
/// not inside the target) that nothing uses but the target and tests (see [`used_elsewhere`]): a
/// helper nothing else calls was written for the target, or is dead.
pub(super) fn is_unused_private(snapshot: &Snapshot, target: &Target, header_uses: &FxHashSet<&str>, id: &str) -> bool {
    let name = last_name(id);
    if !name.starts_with('_') || name.ends_with("__") {
        return false;
    }
    let Some(unit) = snapshot.unit(id) else { return false };
    if unit.file.graph.path != target.file || target.id.as_deref().is_some_and(|t| is_within(id, t)) {
        return false;
    }
    !used_elsewhere(snapshot, target, header_uses, id)
}

/// Whether `id` is a public variable of the target's module or class (a constant such as
/// `PULSE_SIZE`, an attribute such as `default_tags`) that nothing uses but the target and tests.
/// The same evidence as a private helper nothing else uses: a constant or attribute nothing else
/// reads or writes is there for the target. Public functions, classes and methods are left out:
/// they are an interface to code outside the repository.
pub(super) fn is_unread_variable(
    snapshot: &Snapshot,
    target: &Target,
    header_uses: &FxHashSet<&str>,
    id: &str,
) -> bool {
    let owner = owner_of(id);
    (owner == target.class.as_deref() || owner == Some(target.module.as_str()))
        && !last_name(id).starts_with('_')
        && snapshot.kind_of(id) == Some(UnitKind::Variable)
        && !used_elsewhere(snapshot, target, header_uses, id)
}

/// Whether any unit other than `id` itself and tests calls, reads, writes or inherits `id` (its
/// own code and lambdas left out), or the target's header does (`header_uses`, see
/// [`header_uses`]): the target's body is what is being predicted, but what its signature or
/// decorators use is explained by them.
fn used_elsewhere(snapshot: &Snapshot, target: &Target, header_uses: &FxHashSet<&str>, id: &str) -> bool {
    snapshot.edges_to(id).into_iter().any(|(e, file)| {
        matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
            && !is_within(&e.src, id)
            && !is_test_path(&file.graph.path)
            && (!target.id.as_deref().is_some_and(|t| is_within(&e.src, t)) || header_uses.contains(id))
    })
}

/// What the target's header (signature, annotations, decorators) uses: calls, reads and bases on
/// its lines before the body. Empty for a function given as text.
pub(super) fn header_uses<'s>(snapshot: &'s Snapshot, target: &Target) -> FxHashSet<&'s str> {
    let Some(id) = target.id.as_deref() else { return FxHashSet::default() };
    let header_end = snapshot.unit(id).map_or(0, |u| header_end_line(&u));
    code_edges(snapshot, id)
        .into_iter()
        .filter(|e| matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits))
        .filter(|e| e.line.is_some_and(|line| line <= header_end))
        .map(|e| &*e.dst)
        .collect()
}

/// The members of the target's class's bases that the class, or a base before them in the
/// method resolution order, defines again: `self.close()` calls the class's own `close`, not
/// the base's. The members of the target's name are left out: an override reaches the version
/// it overrides through `super()`.
pub(super) fn shadowed_members(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    let Some(class) = &target.class else { return FxHashSet::default() };
    let name = target_name(target);
    let mut defined: FxHashSet<String> = FxHashSet::default();
    let mut shadowed: FxHashSet<String> = FxHashSet::default();
    for c in class_and_bases(snapshot, class) {
        let members = edge_targets(snapshot, &c, EdgeKind::Contains);
        for m in &members {
            let member_name = last_name(m);
            if defined.contains(member_name) && Some(member_name) != name {
                shadowed.insert(m.clone());
            }
        }
        defined.extend(members.iter().map(|m| last_name(m).to_string()));
    }
    shadowed
}

/// Whether `id` is defined inside a function or method that does not contain the target.
pub(super) fn is_local_elsewhere(snapshot: &Snapshot, target: &Target, id: &str) -> bool {
    owner_of(id).is_some_and(|owner| {
        matches!(snapshot.kind_of(owner), Some(UnitKind::Function | UnitKind::Method))
            && !is_within(target_owner(target), owner)
    })
}

/// The target's class, the classes holding it (a method's closure is held by the method's class)
/// and their bases, and the target itself when it is a class: the classes whose private members
/// are the target's own to use (see [`is_private_of_another_class`]).
pub(super) fn own_classes(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    // From the target itself (or, for a function given as text, the class or module it goes in)
    // outward: its class is the first class met.
    let mut holding: Vec<&str> = Vec::new();
    let mut owner = target.id.as_deref().or(Some(target_owner(target)));
    while let Some(o) = owner {
        if snapshot.kind_of(o) == Some(UnitKind::Class) {
            holding.push(o);
        }
        owner = owner_of(o);
    }
    holding.into_iter().flat_map(|c| class_and_bases(snapshot, c)).collect()
}

/// Whether `id` is a private member (`_name`, not a dunder) of a class that is none of
/// `own_classes`: by Python's convention, that class's own business. On DevEval's tuning half, 5
/// of 3,856 such candidates were needed (collaborating classes of one package calling each
/// other's helpers); a module's private functions, by contrast, are used across its package.
pub(super) fn is_private_of_another_class(snapshot: &Snapshot, own_classes: &FxHashSet<String>, id: &str) -> bool {
    let name = last_name(id);
    name.starts_with('_')
        && !name.ends_with("__")
        && owner_of(id)
            .is_some_and(|owner| snapshot.kind_of(owner) == Some(UnitKind::Class) && !own_classes.contains(owner))
}

/// The instance attributes of the target's class and its bases, for a target with no instance
/// (see [`has_no_instance`]; empty otherwise): variables an instance method of the class defines
/// (`self.x = ...`) and its class body does not. `cls.x` does not reach them; what a
/// `classmethod`, `__new__` or `__init_subclass__` stores on `cls` is the class's and stays.
pub(super) fn instance_attributes_out_of_reach(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    let Some(class) = target.class.as_deref().filter(|_| has_no_instance(target)) else {
        return FxHashSet::default();
    };
    let mut out = FxHashSet::default();
    for c in class_and_bases(snapshot, class) {
        let Some(class_unit) = snapshot.unit(&c) else { continue };
        let units = &class_unit.file.graph.units;
        let instance_methods: Vec<&fresco_graph::Unit> = units
            .iter()
            .filter(|m| {
                matches!(m.kind, UnitKind::Function | UnitKind::Method)
                    && owner_of(&m.id) == Some(c.as_str())
                    && is_instance_method(m)
            })
            .collect();
        for v in units.iter().filter(|v| v.kind == UnitKind::Variable && owner_of(&v.id) == Some(c.as_str())) {
            if instance_methods.iter().any(|m| m.start_byte <= v.start_byte && v.end_byte <= m.end_byte) {
                out.insert(v.id.clone());
            }
        }
    }
    out
}

/// Whether a method of a class takes an instance (see [`has_no_instance`]).
fn is_instance_method(method: &fresco_graph::Unit) -> bool {
    !takes_no_instance(method.signature.as_deref().unwrap_or(""), Some(last_name(&method.id)))
}

/// The `__init__` methods of the target's class and its bases, for an ordinary method (see
/// [`works_on_an_initialised_instance`]; empty otherwise): they ran when its instance was made.
/// A method with an instance rarely makes another of its class, where a `classmethod` mostly
/// does (DevEval's tuning half: 4 of 392 such candidates needed for ordinary methods, 9 of 14
/// for classmethods).
pub(super) fn initialisers_already_run(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    let Some(class) = target.class.as_deref().filter(|_| works_on_an_initialised_instance(target)) else {
        return FxHashSet::default();
    };
    class_and_bases(snapshot, class)
        .into_iter()
        .flat_map(|c| crate::exec::definitions_of_name(snapshot, &format!("{c}.__init__")))
        .filter(|id| snapshot.contains_unit(id))
        .collect()
}

/// How many calls above the target [`callers_above`] looks.
const CALLER_LEVELS: usize = 3;

/// How many callers [`callers_above`] collects before it stops climbing: a helper the whole
/// repository calls has thousands of callers a few levels up, and they are rarely candidates.
const CALLERS_ENOUGH: usize = 256;

/// The units that call or use the target (calls, reads, bases; a lambda's uses are its
/// owner's), and their callers and users, up to [`CALLER_LEVELS`] levels above it: code the
/// target's body is written for, not code it calls. Empty for a function given as text.
pub(super) fn callers_above<'s>(snapshot: &'s Snapshot, target: &Target) -> FxHashSet<&'s str> {
    let Some(id) = target.id.as_deref() else { return FxHashSet::default() };
    let mut found: FxHashSet<&str> = FxHashSet::default();
    let mut level: Vec<&str> = vec![id];
    for _ in 0..CALLER_LEVELS {
        let mut next: Vec<&str> = Vec::new();
        for callee in &level {
            for (e, _) in snapshot.edges_to_lazily(callee) {
                if found.len() >= CALLERS_ENOUGH {
                    return found;
                }
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits) {
                    continue;
                }
                let user = without_lambdas(&e.src);
                // Code at a module's top level stands above the target, but whoever reads the
                // module does not stand above that code.
                if !is_within(user, id) && found.insert(user) && snapshot.kind_of(user) != Some(UnitKind::Module) {
                    next.push(user);
                }
            }
        }
        level = next;
    }
    found
}

/// The classes the target's class works with: those its other methods use, directly or through
/// one of their members. Empty for a function outside a class.
pub(super) fn collaborator_classes<'u>(
    snapshot: &Snapshot,
    target: &Target,
    usage: &'u NeighbourUsage,
) -> FxHashSet<&'u str> {
    let Some(class) = target.class.as_deref() else { return FxHashSet::default() };
    let is_class = |id: &str| snapshot.kind_of(id) == Some(UnitKind::Class);
    usage
        .class_users
        .keys()
        .filter_map(|used| if is_class(used) { Some(used.as_str()) } else { owner_of(used).filter(|o| is_class(o)) })
        .filter(|c| *c != class)
        .collect()
}

/// The classes the target's class seems to hold in its attributes, by what it calls on them:
/// for each attribute its other methods call methods on that no analysis resolves
/// (`self.connection.get_all_volumes()`, where nothing says what `connection` holds), the
/// classes among `classes` (the owners of the candidates) that define the most of those names,
/// every class tied at the top. Duck typing, read as evidence, never as an edge: what
/// `self.connection.attach_volume()` will call is most likely a method of such a class. Empty
/// for a function outside a class.
pub(super) fn receiver_classes<'c>(
    snapshot: &Snapshot,
    target: &Target,
    classes: impl IntoIterator<Item = &'c str>,
) -> FxHashSet<&'c str> {
    let Some(class) = target.class.as_deref() else { return FxHashSet::default() };
    let Some(file) = snapshot.file(&target.file) else { return FxHashSet::default() };
    let inside_target = |caller: &str| target.id.as_deref().is_some_and(|t| is_within(caller, t));
    // Per attribute (`self.connection`), the names called on it.
    let mut called_on: FxHashMap<&str, FxHashSet<&str>> = FxHashMap::default();
    for site in file.unresolved() {
        let caller = site.caller.as_str();
        if caller == class || !is_within(caller, class) || inside_target(caller) {
            continue;
        }
        let callee = site.callee.as_str();
        if callee.contains(['[', '(', ' ']) {
            continue;
        }
        if let Some((receiver, name)) = callee.rsplit_once('.')
            && receiver.starts_with("self.")
        {
            called_on.entry(receiver).or_default().insert(name);
        }
    }
    if called_on.is_empty() {
        return FxHashSet::default();
    }
    // The target's own class counts: an attribute may hold another instance of it (a tree's
    // `self.parent`, a list's `self.next`) or a wrapped object with the same methods.
    let classes: Vec<&str> = classes.into_iter().collect();
    let mut found = FxHashSet::default();
    for names in called_on.values() {
        let defined = |c: &str| names.iter().filter(|n| snapshot.contains_unit(&format!("{c}.{n}"))).count();
        let counts: Vec<(&str, usize)> = classes.iter().map(|c| (*c, defined(c))).collect();
        let best = counts.iter().map(|(_, n)| *n).max().unwrap_or(0);
        if best > 0 {
            found.extend(counts.iter().filter(|(_, n)| *n == best).map(|(c, _)| *c));
        }
    }
    found
}

/// Who, around the target, uses what: per used unit, how many of the target's class's other
/// methods and how many of its file's other units (the module's top level included) read, call
/// or inherit it. The target itself (and what it contains) is left out.
///
/// Uses in a body are also counted apart from uses in a header (annotations, decorators,
/// defaults): a body is what the target is missing, and a type alias that every signature of
/// the class names (`HeaderTypes`) is rarely what a body uses.
pub(super) struct NeighbourUsage {
    pub(super) class_users: FxHashMap<String, usize>,
    pub(super) file_users: FxHashMap<String, usize>,
    class_body_users: FxHashMap<String, usize>,
    file_body_users: FxHashMap<String, usize>,
    adjacent_users: FxHashMap<String, usize>,
}

impl NeighbourUsage {
    pub(super) fn of(snapshot: &Snapshot, target: &Target) -> NeighbourUsage {
        let mut class_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut file_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut adjacent_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut class_body_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut file_body_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut header_ends: FxHashMap<&str, u32> = FxHashMap::default();
        let inside_target = |src: &str| target.id.as_deref().is_some_and(|t| is_within(src, t));
        let in_class = |src: &str| target.class.as_deref().is_some_and(|c| src != c && is_within(src, c));
        if let Some(file) = snapshot.file(&target.file) {
            let adjacent = match (&target.id, target.line) {
                (Some(id), _) => source_order_neighbours(&file.graph, id),
                (None, Some(line)) => {
                    neighbours_at_line(&file.graph, target.class.as_deref().unwrap_or(&target.module), line)
                }
                (None, None) => {
                    likely_neighbours(&file.graph, target.class.as_deref().unwrap_or(&target.module), &target.own_text)
                }
            };
            for e in file.edges() {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
                    || inside_target(&e.src)
                {
                    continue;
                }
                // A lambda's uses are its owner's.
                let src = without_lambdas(&e.src);
                file_pairs.insert((&*e.dst, src));
                if in_class(src) {
                    class_pairs.insert((&*e.dst, src));
                }
                let header_end = *header_ends.entry(src).or_insert_with(|| match snapshot.unit(src) {
                    Some(u) if matches!(u.unit.kind, UnitKind::Function | UnitKind::Method | UnitKind::Class) => {
                        header_end_line(&u)
                    }
                    _ => 0,
                });
                if e.line.is_none_or(|line| line > header_end) {
                    file_body_pairs.insert((&*e.dst, src));
                    if adjacent.contains(&src) {
                        adjacent_pairs.insert((&*e.dst, src));
                    }
                    if in_class(src) {
                        class_body_pairs.insert((&*e.dst, src));
                    }
                }
            }
        }
        let count = |pairs: FxHashSet<(&str, &str)>| {
            let mut m: FxHashMap<String, usize> = FxHashMap::default();
            for (dst, _) in pairs {
                *m.entry(dst.to_string()).or_default() += 1;
            }
            m
        };
        NeighbourUsage {
            class_users: count(class_pairs),
            file_users: count(file_pairs),
            class_body_users: count(class_body_pairs),
            file_body_users: count(file_body_pairs),
            adjacent_users: count(adjacent_pairs),
        }
    }

    pub(super) fn class_body_users(&self, id: &str) -> usize {
        self.class_body_users.get(id).copied().unwrap_or(0)
    }

    pub(super) fn file_body_users(&self, id: &str) -> usize {
        self.file_body_users.get(id).copied().unwrap_or(0)
    }

    pub(super) fn adjacent_users(&self, id: &str) -> usize {
        self.adjacent_users.get(id).copied().unwrap_or(0)
    }
}

/// Which of the file's imports of a name (a class, function or variable; not a whole module)
/// were made for the target: those nothing else in the file uses, while the target's body uses
/// nothing of the repository (a body of `...` or `pass`, a blanked body, a function given as
/// text; a written body says what it uses itself). An import only the unwritten body can be
/// using is the strongest evidence the lane has: on the retrieval benchmark's first 60 tasks per
/// project 48 of the 51 it flagged were needed, and all 34 it flagged by name on 200 other
/// tasks, outside a package's `__init__.py` (there 1 of 37 was).
///
/// An import counts as used by the file's other code or the target's header when they use it or
/// one of its members (`codes.is_error(...)` is a use of `codes`). An import kept for other
/// modules is no evidence: every import of a package's `__init__.py` (its interface), one whose
/// statement carries `# noqa` (bare or with F401) or pylint's `unused-import`, and a name the
/// module's `__all__` lists. A whole module imported for the target (`from . import errors`)
/// says which module, not which of its members: none of the 11 members flagged on those 200
/// tasks was needed. The module itself is flagged instead (a candidate since the graph records
/// modules read through a name): on DevEval's tuning half, 6 of the 8 modules flagged were
/// needed.
pub(super) struct ImportUse<'a> {
    /// False when no import can be evidence: the target's body uses units of the repository
    /// (then it says what it needs), or it lives in a package's `__init__.py`.
    applies: bool,
    /// What the file's other code and the target's header use, with every owner up the dotted
    /// name.
    used: FxHashSet<&'a str>,
    /// Imported units the file marks as deliberately unused.
    deliberate: FxHashSet<String>,
}

impl<'a> ImportUse<'a> {
    pub(super) fn of(
        snapshot: &'a Snapshot,
        target: &Target,
        usage: &'a NeighbourUsage,
        header_uses: &FxHashSet<&'a str>,
    ) -> ImportUse<'a> {
        let body_written = target.id.as_deref().is_some_and(|id| !body_uses(snapshot, id).is_empty());
        let package_init = target.file == "__init__.py" || target.file.ends_with("/__init__.py");
        let mut import_use = ImportUse {
            applies: !body_written && !package_init,
            used: FxHashSet::default(),
            deliberate: FxHashSet::default(),
        };
        if !import_use.applies {
            return import_use;
        }
        // The target's own header explains an import as well as other code does:
        // `align: AlignMethod` is no sign the body will use `AlignMethod`.
        for id in usage.file_users.keys().map(String::as_str).chain(header_uses.iter().copied()) {
            let mut owner = id;
            loop {
                if !import_use.used.insert(owner) {
                    break; // its owners are in already
                }
                match owner_of(owner) {
                    Some(up) => owner = up,
                    None => break,
                }
            }
        }
        if let Some(file) = snapshot.file(&target.file) {
            let lines: Vec<&str> = file.text.lines().collect();
            let all = snapshot.unit(&format!("{}.__all__", target.module)).map(|u| u.file.source_of(u.unit));
            for (e, _) in snapshot.edges_from(&target.module) {
                if e.kind != EdgeKind::Imports {
                    continue;
                }
                let marked = e.line.is_some_and(|line| marked_unused(&lines, line as usize));
                let name = last_name(&e.dst);
                let exported =
                    all.is_some_and(|a| a.contains(&format!("\"{name}\"")) || a.contains(&format!("'{name}'")));
                if marked || exported {
                    import_use.deliberate.insert(e.dst.to_string());
                }
            }
        }
        import_use
    }

    /// Whether the name imported as `id` was imported for the target.
    pub(super) fn imported_for_target(&self, id: &str) -> bool {
        self.applies && !self.used.contains(id) && !self.deliberate.contains(id)
    }
}

/// Whether the import statement starting on 1-based `line` is marked as deliberately unused: a
/// `# noqa` comment (bare, or with F401 among its codes) or `# pylint: disable=unused-import` on
/// any of its lines (a parenthesised or continued statement spans several).
fn marked_unused(lines: &[&str], line: usize) -> bool {
    let mut depth: i32 = 0;
    for text in lines.iter().skip(line.saturating_sub(1)).take(200) {
        let (code, comment) = match text.find('#') {
            Some(i) => (&text[..i], &text[i + 1..]),
            None => (*text, ""),
        };
        let comment = comment.to_ascii_lowercase();
        if let Some(i) = comment.find("noqa") {
            let rest = comment[i + 4..].trim_start();
            match rest.strip_prefix(':') {
                Some(codes) => {
                    if codes.split(|c: char| c == ',' || c.is_whitespace()).any(|c| c.trim() == "f401") {
                        return true;
                    }
                }
                None => return true,
            }
        }
        if comment.contains("pylint:") && comment.contains("unused-import") {
            return true;
        }
        depth += code.matches('(').count() as i32 - code.matches(')').count() as i32;
        if depth <= 0 && !code.trim_end().ends_with('\\') {
            break;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_statement_is_marked_unused_by_noqa_f401_or_pylint_on_any_of_its_lines() {
        let text = "import os  # noqa\n\
                    import sys  # noqa: E501\n\
                    from a import (  # noqa: E402, F401\n    b,\n)\n\
                    from c import (\n    d,  # noqa:F401\n)\n\
                    from e import f  # pylint: disable=unused-import\n\
                    from g import (\n    h,\n)\n\
                    x = 1  # noqa\n";
        let lines: Vec<&str> = text.lines().collect();
        let marked: Vec<usize> = (1..=lines.len()).filter(|&l| marked_unused(&lines, l)).collect();
        // Line 2 is marked for another rule; the statement on line 10 ends before line 13's noqa.
        assert_eq!(marked, [1, 3, 6, 7, 9, 13]);
    }
}
