//! The salsa database: file texts are inputs, everything else is derived.
//!
//! ```text
//! SourceFile (input) ──> file_syntax ──> module_syntax ──> file_summary ──┐
//! Workspace (input) ──> module_table ──> lookup_module ────────────────────┼──> file_graph (per file)
//!                                     └─> module_info ─────────────────────┘
//! ```
//! `module_syntax` is `file_syntax` with the paths unit ids take (a package's definition named
//! like a submodule takes a `#N` suffix): it reads the module table only for a package's
//! top-level names.
//! `file_graph(f)` reads `module_syntax(f)` and, for the modules `f` uses, only `lookup_module` and
//! `file_summary` of those modules: never their syntax. A body edit elsewhere re-derives that
//! file's syntax and summary; the summary compares equal, salsa backdates it, and `file_graph(f)`
//! is not re-executed.

use std::sync::{Arc, Mutex};

use fresco_graph::{FileGraph, Revision, SkipReason};
use rustc_hash::FxHashMap;

use crate::modules::{Lookup, ModuleInfo, ModuleTable};
use crate::summary::ModuleSummary;
use crate::syntax::FileSyntax;

#[salsa::input(debug)]
pub struct SourceFile {
    #[returns(ref)]
    pub path: String,
    #[returns(ref)]
    pub text: Arc<str>,
    #[returns(copy)]
    pub revision: Revision,
    #[returns(ref)]
    pub skipped: Option<SkipReason>,
}

#[salsa::input(debug)]
pub struct Workspace {
    /// Sorted by path.
    #[returns(ref)]
    pub files: Vec<SourceFile>,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Modules {
    pub table: ModuleTable,
    files: Vec<SourceFile>,
    index_of: FxHashMap<SourceFile, usize>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ModuleLookup {
    File(SourceFile),
    Namespace,
    Missing,
}

#[salsa::tracked(returns(ref))]
pub fn module_table(db: &dyn salsa::Database, ws: Workspace) -> Modules {
    let files = ws.files(db).clone();
    let paths: Vec<&str> = files.iter().map(|f| f.path(db).as_str()).collect();
    let table = ModuleTable::build(&paths);
    let index_of = files.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    Modules { table, files, index_of }
}

#[salsa::tracked(returns(clone))]
pub fn module_info(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> Option<ModuleInfo> {
    let modules = module_table(db, ws);
    modules.index_of.get(&file).map(|&i| modules.table.modules[i].clone())
}

#[salsa::tracked(returns(copy))]
pub fn lookup_module(db: &dyn salsa::Database, ws: Workspace, name: String) -> ModuleLookup {
    let modules = module_table(db, ws);
    match modules.table.lookup(&name) {
        Lookup::File(i) => ModuleLookup::File(modules.files[i]),
        Lookup::Namespace => ModuleLookup::Namespace,
        Lookup::Missing => ModuleLookup::Missing,
    }
}

/// Lowered syntax is needed only to (re)derive its own file's summary and graph: keep the most
/// recent ones, not all (the indexer triggers eviction after large batches).
pub const SYNTAX_CACHE: usize = 128;

#[salsa::tracked(returns(clone), lru = 128)]
pub fn file_syntax(db: &dyn salsa::Database, file: SourceFile) -> Arc<FileSyntax> {
    Arc::new(crate::lower::lower_file(file.path(db), file.text(db)))
}

/// A file's syntax with its definitions' paths as unit ids take them. A package's top-level
/// definition named like one of its submodules (`def storage_uri` in `boto/__init__.py` beside
/// `boto/storage_uri.py`) takes the next `#N` suffix: the submodule keeps the name, as it does
/// in Python (`import boto.storage_uri` binds the module, and sets the package's attribute to it),
/// and every unit id stays unique in the snapshot.
#[salsa::tracked(returns(clone), lru = 128)]
pub fn module_syntax(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> Arc<FileSyntax> {
    let syntax = file_syntax(db, file);
    let Some(info) = module_info(db, ws, file).filter(|info| info.is_package) else {
        return syntax;
    };
    let is_submodule = |name: &str| {
        let dotted = format!("{}.{name}", info.name);
        matches!(lookup_module(db, ws, dotted.clone()), ModuleLookup::File(sub)
            if module_info(db, ws, sub).is_some_and(|m| m.name == dotted))
    };
    // At most one definition of a name has the plain name for its path (the others are `#N`).
    let clashes: Vec<&str> = syntax
        .defs
        .iter()
        .filter(|d| d.parent.is_none() && *d.path == *d.name && is_submodule(&d.name))
        .map(|d| &*d.name)
        .collect();
    if clashes.is_empty() {
        return syntax;
    }
    let mut renamed = (*syntax).clone();
    for name in clashes {
        let taken = syntax.defs.iter().filter(|d| d.parent.is_none() && *d.name == *name).count();
        let top = format!("{name}#{}", taken + 1);
        let nested = format!("{name}.");
        for def in renamed.defs.iter_mut() {
            if *def.path == *name {
                def.path = crate::syntax::Name::new(&top);
            } else if let Some(rest) = def.path.strip_prefix(&nested) {
                def.path = crate::syntax::Name::new(&format!("{top}.{rest}"));
            }
        }
    }
    Arc::new(renamed)
}

#[salsa::tracked(returns(clone))]
pub fn file_summary(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> Arc<ModuleSummary> {
    let Some(info) = module_info(db, ws, file) else {
        return Arc::new(ModuleSummary::default());
    };
    let syntax = module_syntax(db, ws, file);
    crate::summary::summarise(&syntax, &info.name, info.is_package)
}

/// A file's graph and the module names its resolution consulted.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ResolvedFile {
    pub graph: Arc<FileGraph>,
    pub deps: Vec<String>,
}

#[salsa::tracked(returns(clone))]
pub fn file_graph(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> Arc<ResolvedFile> {
    let (graph, deps) = crate::resolve::resolve_file(db, ws, file);
    Arc::new(ResolvedFile { graph: Arc::new(graph), deps })
}

/// The per-name hashes of a file's interface (see `summary::name_hashes`).
#[salsa::tracked(returns(clone))]
pub fn file_interface_names(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> Arc<Vec<(String, u64)>> {
    Arc::new(crate::summary::name_hashes(&file_summary(db, ws, file)))
}

/// A hash of what a file exposes to other files: its module name and its summary. Two equal
/// hashes mean no other file's resolution can differ.
#[salsa::tracked(returns(copy))]
pub fn file_interface(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::hash::DefaultHasher::new();
    module_info(db, ws, file).hash(&mut hasher);
    file_summary(db, ws, file).hash(&mut hasher);
    hasher.finish()
}

/// Counts how many times each derived query executed, from salsa's event hook. Tests and the
/// benchmark use it to prove that an edit re-derives only what depends on it.
#[derive(Default)]
pub struct ExecutionLog {
    counts: Mutex<FxHashMap<String, u64>>,
}

impl ExecutionLog {
    fn record(&self, query: &str) {
        if let Ok(mut counts) = self.counts.lock() {
            *counts.entry(query.to_string()).or_default() += 1;
        }
    }

    /// Executions per query name since the last call, and resets the counts.
    pub fn take(&self) -> FxHashMap<String, u64> {
        self.counts.lock().map(|mut c| std::mem::take(&mut *c)).unwrap_or_default()
    }
}

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
}

#[salsa::db]
impl salsa::Database for Database {}

impl Database {
    pub fn new(log: Option<Arc<ExecutionLog>>) -> Database {
        let callback: Option<Box<dyn Fn(salsa::Event) + Send + Sync + 'static>> = log.map(|log| {
            Box::new(move |event: salsa::Event| {
                if let salsa::EventKind::WillExecute { database_key } = event.kind {
                    let text = format!("{database_key:?}");
                    let name = text.split('(').next().unwrap_or(&text);
                    log.record(name);
                }
            }) as Box<dyn Fn(salsa::Event) + Send + Sync + 'static>
        });
        Database { storage: salsa::Storage::new(callback) }
    }
}

impl Default for Database {
    fn default() -> Self {
        Database::new(None)
    }
}
