//! Tasks from an external benchmark whose dependencies were annotated by people, not derived
//! from fresco's graph (DevEval's format; `bench/deveval/fetch` writes the file).
//!
//! One JSON object per line:
//! `{"project": "fs", "file": "fs/path.py", "namespace": "fs.path.relativefrom",
//!   "needed": [{"name": "fs.path.iteratepath", "place": "same file"}]}`.
//! `project` is the name of the ROOT directory the task belongs to, `file` is relative to it, and
//! names are the benchmark's dotted names: the file's path from the project root with `src/`,
//! `.py` and `__init__` dropped, then the qualified name inside the file. fresco names modules by
//! their package root instead (a script in a directory without `__init__.py` is its own top-level
//! module), so names are mapped through the file each one lives in; a name that maps to no unit
//! stays as it is and counts as needed and never found.

use std::path::Path;

use anyhow::{Context as _, Result};
use fresco_graph::Snapshot;
use rustc_hash::FxHashMap;

#[derive(Clone, Debug)]
pub struct ExternalTask {
    pub project: String,
    pub file: String,
    pub namespace: String,
    pub needed: Vec<ExternalNeed>,
}

#[derive(Clone, Debug)]
pub struct ExternalNeed {
    pub name: String,
    /// `same class`, `same file` or `other file`, as the benchmark annotated it.
    pub place: String,
}

pub fn load(path: &Path) -> Result<Vec<ExternalTask>> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| parse(l).with_context(|| format!("{}:{}", path.display(), i + 1)))
        .collect()
}

fn parse(line: &str) -> Result<ExternalTask> {
    let v: serde_json::Value = serde_json::from_str(line)?;
    let text = |v: &serde_json::Value, key: &str| -> Result<String> {
        v.get(key).and_then(|s| s.as_str()).map(str::to_string).with_context(|| format!("no string \"{key}\""))
    };
    let needed = v
        .get("needed")
        .and_then(|n| n.as_array())
        .context("no list \"needed\"")?
        .iter()
        .map(|n| Ok(ExternalNeed { name: text(n, "name")?, place: text(n, "place")? }))
        .collect::<Result<Vec<_>>>()?;
    Ok(ExternalTask {
        project: text(&v, "project")?,
        file: text(&v, "file")?,
        namespace: text(&v, "namespace")?,
        needed,
    })
}

/// The benchmark's dotted name of the module at `path`: `src/a/b/__init__.py` is `a.b`.
fn benchmark_module(path: &str) -> Option<String> {
    let stem = path.strip_suffix(".py")?;
    let stem = stem.strip_suffix("/__init__").unwrap_or(stem);
    Some(stem.replace('/', "."))
}

/// Maps the benchmark's dotted names onto the units of one snapshot.
pub struct NameMap {
    /// Benchmark module name → fresco module name.
    modules: FxHashMap<String, String>,
}

impl NameMap {
    pub fn new(snapshot: &Snapshot) -> NameMap {
        let mut modules: FxHashMap<String, String> = FxHashMap::default();
        for file in snapshot.files() {
            let fresco = file.graph.module.clone();
            let Some(full) = benchmark_module(&file.graph.path) else { continue };
            // The layouts' leading directories the benchmark leaves out of its names.
            for name in [Some(full.clone()), full.strip_prefix("src.").map(str::to_string)].into_iter().flatten() {
                modules.entry(name).or_insert_with(|| fresco.clone());
            }
        }
        NameMap { modules }
    }

    /// The unit `name` denotes: the longest prefix of it that names a module, with the rest of
    /// the name taken inside that module. A member named on a class that inherits it (DevEval
    /// writes `Sub.x` for `self.x` set in `Base.__init__`) is the base's member, found along the
    /// `inherits` edges depth first, in the order the bases are listed. A name through a module
    /// that imports it is what the import binds (its public path), and `C.__init__` of a class
    /// with no `__init__` of its own in the repository is the class. `None` when no unit of the
    /// snapshot has that name.
    pub fn unit(&self, snapshot: &Snapshot, name: &str) -> Option<String> {
        self.unit_as_written(snapshot, name).map(|id| last_definition(snapshot, id))
    }

    fn unit_as_written(&self, snapshot: &Snapshot, name: &str) -> Option<String> {
        if snapshot.contains_unit(name) {
            return Some(name.to_string());
        }
        let parts: Vec<&str> = name.split('.').collect();
        for i in (1..=parts.len()).rev() {
            let Some(module) = self.modules.get(&parts[..i].join(".")) else { continue };
            let id = if i == parts.len() { module.clone() } else { format!("{module}.{}", parts[i..].join(".")) };
            if snapshot.contains_unit(&id) {
                return Some(id);
            }
            if let Some((class, member)) = id.rsplit_once('.')
                && let Some(inherited) = inherited_member(snapshot, class, member)
            {
                return Some(inherited);
            }
            // A public path: DevEval writes `alembic.script.ScriptDirectory.from_config` for
            // `alembic.script.base.ScriptDirectory.from_config`, which `alembic/script/__init__.py`
            // imports. Python finds it there, and so does `fresco_query::reexported`.
            if let Some(found) = fresco_query::reexported(snapshot, &id).into_iter().next() {
                return Some(found);
            }
        }
        // `C.__init__` of a class that defines none in the repository (a `str` subclass): the
        // dependency is the class's construction, and the class is the unit that answers to it.
        let class = name.strip_suffix(".__init__")?;
        let class = self.unit_as_written(snapshot, class)?;
        (snapshot.kind_of(&class) == Some(fresco_graph::UnitKind::Class)).then_some(class)
    }
}

/// The definition a name defined more than once stands for: the last (`to_tuple#4` after three
/// `@overload`s), which Python binds and calls resolve to; but a property's setter or deleter
/// (`@x.setter`, defined after the getter) is not what a read of `x` runs: the getter stays.
fn last_definition(snapshot: &Snapshot, id: String) -> String {
    if id.contains('#') {
        return id;
    }
    let is_accessor = |id: &str| {
        snapshot.unit(id).is_some_and(|u| {
            u.file
                .source_of(u.unit)
                .lines()
                .map(str::trim)
                .skip_while(|l| l.is_empty() || l.starts_with('#'))
                .take_while(|l| l.starts_with('@'))
                .any(|decorator| decorator.ends_with(".setter") || decorator.ends_with(".deleter"))
        })
    };
    let mut last = id.clone();
    for n in 2.. {
        let next = format!("{id}#{n}");
        if !snapshot.contains_unit(&next) {
            break;
        }
        if !is_accessor(&next) {
            last = next;
        }
    }
    last
}

/// `member` of the first base of `class` (depth first, bases in order) that defines it.
fn inherited_member(snapshot: &Snapshot, class: &str, member: &str) -> Option<String> {
    if snapshot.kind_of(class) != Some(fresco_graph::UnitKind::Class) {
        return None;
    }
    let mut stack = vec![class.to_string()];
    let mut seen = rustc_hash::FxHashSet::default();
    while let Some(c) = stack.pop() {
        if !seen.insert(c.clone()) {
            continue;
        }
        let id = format!("{c}.{member}");
        if c != class && snapshot.contains_unit(&id) {
            return Some(id);
        }
        let Some(unit) = snapshot.unit(&c) else { continue };
        let bases: Vec<String> = unit
            .file
            .edges_from(&c)
            .filter(|e| e.kind == fresco_graph::EdgeKind::Inherits)
            .map(|e| e.dst.to_string())
            .collect();
        stack.extend(bases.into_iter().rev());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_module_names() {
        assert_eq!(benchmark_module("src/a/b/__init__.py").as_deref(), Some("src.a.b"));
        assert_eq!(benchmark_module("tools/cgrep.py").as_deref(), Some("tools.cgrep"));
        assert_eq!(benchmark_module("README.md"), None);
    }

    #[test]
    fn names_map_through_the_file_they_live_in() {
        let dir = tempfile::tempdir().unwrap();
        let write = |rel: &str, text: &str| {
            let p = dir.path().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("src/pkg/__init__.py", "from .mod import C\nfrom . import mod as m\n");
        write(
            "src/pkg/mod.py",
            "LIMIT = 3\n\nclass C:\n    def m(self):\n        self.x = LIMIT\n\nclass D(C):\n    pass\n",
        );
        write(
            "tools/script.py",
            "def g():\n    pass\n\n\ndef g():\n    return 1\n\n\nclass P:\n    @property\n    def x(self):\n        return 1\n\n    # Sets it.\n    @x.setter\n    def x(self, v):\n        pass\n",
        );
        let mut indexer = fresco_indexer::Indexer::in_memory(dir.path(), fresco_indexer::IndexerOptions::default());
        indexer.refresh().unwrap();
        let snap = indexer.snapshot();
        let names = NameMap::new(snap);
        assert_eq!(names.unit(snap, "pkg.mod.C.m").as_deref(), Some("pkg.mod.C.m"));
        assert_eq!(names.unit(snap, "pkg.mod.C.x").as_deref(), Some("pkg.mod.C.x"));
        assert_eq!(names.unit(snap, "pkg.mod").as_deref(), Some("pkg.mod"));
        // A script outside any package is a top-level module to fresco.
        let script = snap.file("tools/script.py").unwrap().graph.module.clone();
        // Defined twice: the name stands for the last definition.
        assert_eq!(names.unit(snap, "tools.script.g"), Some(format!("{script}.g#2")));
        // A property: its getter, not the setter defined after it.
        assert_eq!(names.unit(snap, "tools.script.P.x"), Some(format!("{script}.P.x")));
        assert_eq!(names.unit(snap, "pkg.mod.C.nothing"), None);
        // Named on the subclass, defined on the base.
        assert_eq!(names.unit(snap, "pkg.mod.D.x").as_deref(), Some("pkg.mod.C.x"));
        assert_eq!(names.unit(snap, "pkg.mod.D.m").as_deref(), Some("pkg.mod.C.m"));
        assert_eq!(names.unit(snap, "pkg.mod.D.nothing"), None);
        // Public paths: through what `pkg/__init__.py` imports.
        assert_eq!(names.unit(snap, "pkg.C.m").as_deref(), Some("pkg.mod.C.m"));
        assert_eq!(names.unit(snap, "pkg.m.LIMIT").as_deref(), Some("pkg.mod.LIMIT"));
        assert_eq!(names.unit(snap, "pkg.C.nothing"), None);
        // A class with no `__init__` of its own: constructing it is the class.
        assert_eq!(names.unit(snap, "pkg.mod.D.__init__").as_deref(), Some("pkg.mod.D"));
        assert_eq!(names.unit(snap, "pkg.mod.LIMIT.__init__"), None);
    }

    #[test]
    fn a_task_line_parses_and_a_broken_one_says_what_is_missing() {
        let t = parse(r#"{"project": "fs", "file": "fs/path.py", "namespace": "fs.path.f", "needed": [{"name": "fs.path.g", "place": "same file"}]}"#).unwrap();
        assert_eq!((t.project.as_str(), t.needed.len(), t.needed[0].place.as_str()), ("fs", 1, "same file"));
        let err = parse(r#"{"project": "fs", "file": "fs/path.py", "needed": []}"#).unwrap_err();
        assert!(err.to_string().contains("namespace"), "{err}");
    }
}
