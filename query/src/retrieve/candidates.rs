//! The units the graph lane may rank for a target, each with how it is reachable ([`Tier`]):
//! its class and bases, the classes it names, its file, what the code around it uses, what its
//! file imports, what its analogues use.
//!
//! Separate from the evidence about each candidate: this decides what is in the list, the
//! evidence only orders it, so a unit left out here is not found whatever the weights.

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::FxHashSet;

use super::ids::{class_and_bases, dir_of, edge_targets, is_code_unit, last_name, owner_of};
use super::neighbours::NeighbourUsage;
use super::relatives::AnalogueUsage;
use super::target::{Target, def_header, return_annotation};

/// The classes a target's signature and docstring name: those it already refers to (parameter
/// and return annotations, kept when a body is blanked) and the classes its file can reach by a
/// name that appears, as written, in its text.
pub(super) fn mentioned_classes(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let add = |id: &str, out: &mut Vec<String>| {
        if snapshot.kind_of(id) == Some(UnitKind::Class)
            && target.class.as_deref() != Some(id)
            && !out.iter().any(|c| c == id)
        {
            out.push(id.to_string());
        }
    };
    if let Some(id) = &target.id {
        for (e, _) in snapshot.edges_from(id) {
            if matches!(e.kind, EdgeKind::References | EdgeKind::Calls) {
                add(&e.dst, &mut out);
            }
        }
    }
    let written = capitalised_words(&target.own_text);
    for class in classes_written(snapshot, &target.module, &written) {
        add(&class, &mut out);
    }
    out
}

/// The words of `text` that start with a capital letter: the names a class may go by.
fn capitalised_words(text: &str) -> FxHashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_uppercase()))
        .collect()
}

/// The classes the code of `module` can reach by one of the names in `written`: its own classes
/// and those it imports by name, and the classes of the modules it imports (`from . import
/// models` then `models.Request`).
fn classes_written(snapshot: &Snapshot, module: &str, written: &FxHashSet<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if written.is_empty() {
        return out;
    }
    let mut add = |id: &str| {
        if snapshot.kind_of(id) == Some(UnitKind::Class) && !out.iter().any(|c| c == id) {
            out.push(id.to_string());
        }
    };
    let named = |id: &str| id.rsplit('.').next().is_some_and(|short| written.contains(short));
    for (e, _) in &snapshot.edges_from(module) {
        let reachable = matches!(e.kind, EdgeKind::Contains | EdgeKind::Imports);
        if reachable && named(&e.dst) {
            add(&e.dst);
        }
        if e.kind == EdgeKind::Imports && snapshot.kind_of(&e.dst) == Some(UnitKind::Module) {
            for (m, _) in snapshot.edges_from(&e.dst) {
                if m.kind == EdgeKind::Contains && named(&m.dst) {
                    add(&m.dst);
                }
            }
        }
    }
    out
}

/// The classes the target's header names (in annotations and defaults), as its file can reach
/// them by those names.
pub(super) fn header_classes(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(header) = def_header(&target.own_text) else { return Vec::new() };
    let written = capitalised_words(header);
    classes_written(snapshot, &target.module, &written)
}

/// The constructors of the classes the target's return annotation names: each class's
/// `__init__`, or the first one found through its bases. A function declared to return a class
/// most often builds one (`request_context(...) -> RequestContext` calls
/// `RequestContext.__init__`; `make_null_session(...) -> NullSession` runs the `__init__`
/// `NullSession` inherits).
pub(super) fn returned_constructors(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    let Some(annotation) = return_annotation(&target.own_text) else { return FxHashSet::default() };
    let written = capitalised_words(annotation);
    let mut out = FxHashSet::default();
    for class in classes_written(snapshot, &target.module, &written) {
        let constructor = class_and_bases(snapshot, &class)
            .into_iter()
            .map(|c| format!("{c}.__init__"))
            .find(|init| snapshot.contains_unit(init));
        out.extend(constructor);
    }
    out
}

/// How close a reachable unit is to the target: its class (and bases), its file, or imported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tier {
    Class,
    /// Members of the target's class's bases.
    BaseClass,
    /// Classes the target's signature or docstring names, and their members.
    MentionedClass,
    /// What the target's class's other methods use (other classes' methods and attributes,
    /// functions of other modules): a class's methods tend to work with the same things.
    ClassNeighbourhood,
    File,
    /// What the other functions of the target's file use.
    FileNeighbourhood,
    /// A name the file imports explicitly (`from m import name`).
    ImportedName,
    /// A module of the repository the file binds to a name (`import m`, `from pkg import m`).
    ImportedModule,
    /// Members of modules the file imports, of imported classes, and of the classes the
    /// neighbourhood works with.
    Imported,
    /// Used by one of the target's analogues and reachable no other way.
    AnalogueUse,
}

/// A unit the target could use, and how it is reachable.
pub(super) struct Candidate {
    pub(super) id: String,
    pub(super) tier: Tier,
}

pub(super) fn reachable_candidates(
    snapshot: &Snapshot,
    target: &Target,
    usage: &NeighbourUsage,
    analogue_use: &AnalogueUsage,
    mentioned: &[String],
    constructors: &FxHashSet<String>,
    exclude: &FxHashSet<String>,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen: FxHashSet<String> = exclude.clone();
    let mut push = |id: &str, tier: Tier, out: &mut Vec<Candidate>| {
        // A module is a candidate only as one the file binds to a name.
        let rankable = snapshot.unit(id).is_some_and(|u| match tier {
            Tier::ImportedModule => u.unit.kind == UnitKind::Module,
            _ => is_code_unit(u.unit),
        });
        if rankable && seen.insert(id.to_string()) {
            out.push(Candidate { id: id.to_string(), tier });
        }
    };
    let members = |owner: &str| edge_targets(snapshot, owner, EdgeKind::Contains);
    let is_class = |id: &str| snapshot.kind_of(id) == Some(UnitKind::Class);
    // Classes the neighbourhood works with: their members come last.
    let mut used_classes: Vec<String> = Vec::new();
    // The class and its bases, with their members.
    if let Some(class) = &target.class {
        for (i, c) in class_and_bases(snapshot, class).iter().enumerate() {
            let tier = if i == 0 { Tier::Class } else { Tier::BaseClass };
            for m in members(c) {
                push(&m, tier, &mut out);
            }
        }
    }
    // Classes its signature and docstring name (`request: PreparedRequest`, ":class:`Request`"):
    // the body will work with their members.
    for c in mentioned {
        push(c, Tier::MentionedClass, &mut out);
        for m in members(c) {
            push(&m, Tier::MentionedClass, &mut out);
        }
    }
    // The constructor a returned class inherits is reached through it.
    let mut constructors: Vec<&String> = constructors.iter().collect();
    constructors.sort();
    for c in constructors {
        push(c, Tier::MentionedClass, &mut out);
    }
    if target.class.is_some() {
        let mut neighbours: Vec<&String> = usage.class_users.keys().collect();
        neighbours.sort();
        for n in neighbours {
            push(n, Tier::ClassNeighbourhood, &mut out);
            if is_class(n) {
                used_classes.push(n.clone());
            }
        }
    }
    // The file's own definitions.
    for m in members(&target.module) {
        push(&m, Tier::File, &mut out);
    }
    // What the file's other code uses.
    let mut neighbours: Vec<&String> = usage.file_users.keys().collect();
    neighbours.sort();
    for n in neighbours {
        push(n, Tier::FileNeighbourhood, &mut out);
        if is_class(n) {
            used_classes.push(n.clone());
        }
    }
    // What the file imports: imported names first, then members of imported modules and classes.
    let imports_of = |module: &str| edge_targets(snapshot, module, EdgeKind::Imports);
    let imports = imports_of(&target.module);
    let bound = modules_bound_by_name(snapshot, &target.module);
    for dst in &imports {
        match snapshot.kind_of(dst) {
            Some(UnitKind::Module) if bound.contains(dst.as_str()) => push(dst, Tier::ImportedModule, &mut out),
            Some(UnitKind::Module) | None => {}
            Some(_) => push(dst, Tier::ImportedName, &mut out),
        }
    }
    for dst in &imports {
        match snapshot.kind_of(dst) {
            Some(UnitKind::Module) => {
                for m in members(dst) {
                    push(&m, Tier::Imported, &mut out);
                }
                // And what it re-exports: `import click` reaches `click.pause`, defined in
                // `click.termui` and imported by the package's `__init__` (`push` leaves out the
                // modules and external names it imports).
                for name in imports_of(dst) {
                    push(&name, Tier::Imported, &mut out);
                }
                // A package whose `__init__` re-exports a module's names with `from .m import *`
                // (falcon's `vendor.mimeparse`): `from falcon.vendor import mimeparse` reaches
                // `mimeparse.best_match`, defined in `vendor/mimeparse/mimeparse.py`. One level,
                // as Python's star import copies the names of that module only, and only those it
                // exports (its `__all__`, else its public names).
                for star in star_imported_modules(snapshot, dst) {
                    for m in members(star) {
                        if crate::reexport::exports(snapshot, star, last_name(&m)) {
                            push(&m, Tier::Imported, &mut out);
                        }
                    }
                }
            }
            Some(UnitKind::Class) => used_classes.push(dst.clone()),
            _ => {}
        }
    }
    for c in classes_named_by_attributes(snapshot, target) {
        push(&c, Tier::Imported, &mut out);
        used_classes.push(c);
    }
    for c in used_classes {
        for m in members(&c) {
            push(&m, Tier::Imported, &mut out);
        }
    }
    // A module not written yet imports nothing so far: it can reach the modules beside it (its
    // package's), a relative import away.
    if snapshot.file(&target.file).is_none() {
        let dir = dir_of(&target.file);
        let mut siblings: Vec<&str> =
            snapshot.files().filter(|f| dir_of(&f.graph.path) == dir).map(|f| f.graph.module.as_str()).collect();
        siblings.sort_unstable();
        for module in siblings {
            for m in members(module) {
                push(&m, Tier::Imported, &mut out);
            }
        }
    }
    // What code like the target uses, wherever it lives.
    for used in &analogue_use.order {
        push(used, Tier::AnalogueUse, &mut out);
    }
    out
}

/// The modules `module`'s imports bind to a name (`import m`, `import m as x`, `from pkg import
/// m`): not one a star import only reads names from (`from m import *`), nor `module` itself.
fn modules_bound_by_name<'s>(snapshot: &'s Snapshot, module: &str) -> FxHashSet<&'s str> {
    imported_modules(snapshot, module, false).into_iter().collect()
}

/// The modules `module` star-imports (`from m import *`).
fn star_imported_modules<'s>(snapshot: &'s Snapshot, module: &str) -> Vec<&'s str> {
    imported_modules(snapshot, module, true)
}

/// The modules `module` imports (not itself) by a star import (`star`) or by any other.
fn imported_modules<'s>(snapshot: &'s Snapshot, module: &str, star: bool) -> Vec<&'s str> {
    let Some(file) = snapshot.unit(module).map(|u| u.file) else { return Vec::new() };
    let lines: Vec<&str> = file.text.lines().collect();
    let is_star = |line: Option<u32>, dst: &str| {
        line.and_then(|l| lines.get((l as usize).saturating_sub(1)))
            .is_some_and(|text| star_imports_on_line(text).any(|from| star_import_names(from, dst)))
    };
    let mut out: Vec<&str> = snapshot
        .edges_from(module)
        .into_iter()
        .map(|(e, _)| e)
        .filter(|e| e.kind == EdgeKind::Imports && *e.dst != *module && is_star(e.line, &e.dst) == star)
        .filter(|e| snapshot.kind_of(&e.dst) == Some(UnitKind::Module))
        .map(|e| &*e.dst)
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The modules named by the star imports of a line (`from .m import *` gives `.m`), of each
/// of its statements (`import os; from .m import *`), its comment left out.
fn star_imports_on_line(line: &str) -> impl Iterator<Item = &str> {
    let code = line.split('#').next().unwrap_or("");
    code.split(';').filter_map(|statement| {
        let from = statement.trim().strip_prefix("from")?.strip_suffix("*")?.trim_end().strip_suffix("import")?;
        Some(from.trim())
    })
}

/// Whether `from <from> import *` can be the import of the module `dst`: the module it names
/// ends with `dst`'s last name, or it names a package by dots alone (`from . import *`).
fn star_import_names(from: &str, dst: &str) -> bool {
    let named = from.trim_start_matches('.');
    named.is_empty() || named.rsplit('.').next() == dst.rsplit('.').next()
}

/// The classes defined in the target's directory that its class's attributes are named after:
/// an attribute `self.connection` whose value the graph cannot follow (set from a parameter, by
/// a caller, through `setattr`) most often holds an instance of the package's `EC2Connection`
/// (the class name ends with the attribute's name, underscores dropped). Every variable member
/// of the class and its bases counts. An attribute name matching more than
/// [`MAX_CLASSES_PER_ATTRIBUTE`] classes says nothing.
fn classes_named_by_attributes(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(class) = target.class.as_deref() else { return Vec::new() };
    let mut names: Vec<String> = Vec::new();
    for c in class_and_bases(snapshot, class) {
        for m in edge_targets(snapshot, &c, EdgeKind::Contains) {
            if snapshot.kind_of(&m) != Some(UnitKind::Variable) {
                continue;
            }
            let name: String = last_name(&m).chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect();
            if name.len() >= 4 && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Vec::new();
    }
    let dir = dir_of(&target.file);
    // Each class with its name lowercased once.
    let classes: Vec<(&str, String)> = snapshot
        .files()
        .filter(|f| dir_of(&f.graph.path) == dir)
        .flat_map(|f| {
            f.graph
                .units
                .iter()
                .filter(move |u| u.kind == UnitKind::Class && owner_of(&u.id) == Some(f.graph.module.as_str()))
        })
        .map(|u| u.id.as_str())
        .filter(|id| *id != class)
        .map(|id| (id, last_name(id).to_lowercase()))
        .collect();
    let mut out: Vec<String> = Vec::new();
    for name in &names {
        let matching: Vec<&str> =
            classes.iter().filter(|(_, lower)| lower.ends_with(name.as_str())).map(|(id, _)| *id).collect();
        if matching.len() <= MAX_CLASSES_PER_ATTRIBUTE {
            for id in matching {
                if !out.iter().any(|o| o == id) {
                    out.push(id.to_string());
                }
            }
        }
    }
    out.sort();
    out
}

const MAX_CLASSES_PER_ATTRIBUTE: usize = 3;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_import_is_told_from_another_import_on_its_line() {
        fn stars(line: &str) -> Vec<&str> {
            star_imports_on_line(line).collect()
        }
        assert_eq!(stars("from .m import *  # re-exported"), vec![".m"]);
        assert_eq!(stars("import os; from .m import*"), vec![".m"]);
        assert_eq!(stars("from . import *"), vec!["."]);
        assert!(stars("from m import a  # not import *").is_empty());
        let on_line = |line: &str, dst: &str| star_imports_on_line(line).any(|from| star_import_names(from, dst));
        assert!(on_line("import os; from .m import *", "pkg.m"));
        assert!(!on_line("import os; from .m import *", "os"), "os is bound by name");
        assert!(on_line("from . import *", "pkg"));
        assert!(on_line("from pkg.sub import *", "pkg.sub"));
    }
}
