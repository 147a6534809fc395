//! Immutable, versioned snapshots of the whole graph.
//!
//! A [`Snapshot`] is a persistent (structurally shared) map from path to [`FileEntry`], plus two
//! global indexes (unit id to owning file, edge target to the files holding edges to it). Deriving
//! version N+1 from version N touches only the changed files and the index entries they mention,
//! so publishing costs O(changed files); readers keep whatever version they hold for as long as
//! they like, and the writer never waits for them.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{Edge, FileGraph, FileStamp, IndexDeps, Unit, UnitKind};

/// One file's part of a snapshot: its graph, its text (so any unit's source can be served at the
/// revision it was indexed from) and per-file lookup tables.
#[derive(Debug)]
pub struct FileEntry {
    pub graph: Arc<FileGraph>,
    pub text: Arc<str>,
    pub stamp: FileStamp,
    /// What the indexer needs to update this file incrementally after a restart: the modules
    /// its resolution consulted and a hash of the interface it exposes to other files.
    pub deps: IndexDeps,
    /// Calls of this file's parameters that reach what other files pass in: the indexer joins
    /// their [`ArgFlow`](crate::model::ArgFlow)s with this file's
    /// [`ParamCall`](crate::model::ParamCall)s. Not part of `graph`, which holds the file's own
    /// facts (what is persisted); [`FileEntry::edges`] yields both.
    flow_edges: Vec<Edge>,
    /// Unresolved sites of `graph` that flow edges resolve, by position (sorted).
    resolved_by_flow: Vec<u32>,
    /// Positions of units sorted by id, and of edges (own, then flow edges) sorted by source and
    /// by target: lookups by binary search, without copying any id.
    units_by_id: Vec<u32>,
    edges_by_src: Vec<u32>,
    edges_by_dst: Vec<u32>,
}

impl PartialEq for FileEntry {
    fn eq(&self, other: &Self) -> bool {
        self.graph == other.graph
            && self.stamp == other.stamp
            && self.text == other.text
            && self.flow_edges == other.flow_edges
    }
}

impl FileEntry {
    pub fn new(graph: Arc<FileGraph>, text: Arc<str>, stamp: FileStamp, deps: IndexDeps) -> FileEntry {
        FileEntry::with_flow_edges(graph, text, stamp, deps, Vec::new())
    }

    /// An entry whose parameter calls reach `flow_edges` besides the file's own edges. Flow edges
    /// come from this file's `param_calls` (their source is a unit of this file).
    pub fn with_flow_edges(
        graph: Arc<FileGraph>,
        text: Arc<str>,
        stamp: FileStamp,
        deps: IndexDeps,
        mut flow_edges: Vec<Edge>,
    ) -> FileEntry {
        flow_edges.sort_by(|a, b| (&a.src, a.line, &a.dst).cmp(&(&b.src, b.line, &b.dst)));
        flow_edges.dedup();
        let mut units_by_id: Vec<u32> = (0..graph.units.len() as u32).collect();
        units_by_id.sort_by(|&a, &b| graph.units[a as usize].id.cmp(&graph.units[b as usize].id));
        // A parameter call that reaches something through flow edges is no longer unresolved.
        // Looked up in sets: a scan of both lists per unresolved call was quadratic (a function
        // calling its parameter 100,000 times took tens of seconds).
        let resolved_by_flow = if flow_edges.is_empty() {
            Vec::new()
        } else {
            let param_calls: rustc_hash::FxHashSet<(&str, u32, &str)> =
                graph.param_calls.iter().map(|pc| (pc.caller.as_str(), pc.line, pc.name.as_str())).collect();
            let flow_sites: rustc_hash::FxHashSet<(&str, Option<u32>)> =
                flow_edges.iter().map(|e| (&*e.src, e.line)).collect();
            graph
                .unresolved
                .iter()
                .enumerate()
                .filter(|(_, u)| {
                    param_calls.contains(&(u.caller.as_str(), u.line, u.callee.as_str()))
                        && flow_sites.contains(&(u.caller.as_str(), Some(u.line)))
                })
                .map(|(i, _)| i as u32)
                .collect()
        };
        // A flow edge the file's own resolution found as well (`make(A)` in this file and
        // `make(B)` in another both reach `Base.__init__` through `k(1)`) is one edge.
        if !flow_edges.is_empty() {
            let own: rustc_hash::FxHashSet<&Edge> = graph.edges.iter().collect();
            flow_edges.retain(|e| !own.contains(e));
        }
        let mut entry = FileEntry {
            graph,
            text,
            stamp,
            deps,
            flow_edges,
            resolved_by_flow,
            units_by_id,
            edges_by_src: Vec::new(),
            edges_by_dst: Vec::new(),
        };
        let count = entry.edge_count() as u32;
        let mut edges_by_src: Vec<u32> = (0..count).collect();
        edges_by_src.sort_by(|&a, &b| entry.edge_at(a).src.cmp(&entry.edge_at(b).src));
        let mut edges_by_dst: Vec<u32> = (0..count).collect();
        edges_by_dst.sort_by(|&a, &b| entry.edge_at(a).dst.cmp(&entry.edge_at(b).dst));
        entry.edges_by_src = edges_by_src;
        entry.edges_by_dst = edges_by_dst;
        entry
    }

    /// The same file with other flow edges (after another file's calls into it changed).
    pub fn reflowed(&self, flow_edges: Vec<Edge>) -> FileEntry {
        FileEntry::with_flow_edges(self.graph.clone(), self.text.clone(), self.stamp, self.deps.clone(), flow_edges)
    }

    /// The same file with another on-disk stamp (touched, not changed).
    pub fn restamped(&self, stamp: FileStamp) -> FileEntry {
        FileEntry::with_flow_edges(
            self.graph.clone(),
            self.text.clone(),
            stamp,
            self.deps.clone(),
            self.flow_edges.clone(),
        )
    }

    fn edge_at(&self, i: u32) -> &Edge {
        let i = i as usize;
        let own = self.graph.edges.len();
        if i < own { &self.graph.edges[i] } else { &self.flow_edges[i - own] }
    }

    /// Every edge whose source is a unit of this file: its own, then its flow edges.
    pub fn edges(&self) -> impl Iterator<Item = &Edge> {
        self.graph.edges.iter().chain(self.flow_edges.iter())
    }

    pub fn flow_edges(&self) -> &[Edge] {
        &self.flow_edges
    }

    pub fn edge_count(&self) -> usize {
        self.graph.edges.len() + self.flow_edges.len()
    }

    /// The call sites of this file that nothing resolves (flow edges included).
    pub fn unresolved(&self) -> impl Iterator<Item = &crate::model::Unresolved> {
        self.graph
            .unresolved
            .iter()
            .enumerate()
            .filter(|(i, _)| self.resolved_by_flow.binary_search(&(*i as u32)).is_err())
            .map(|(_, u)| u)
    }

    pub fn unit(&self, id: &str) -> Option<&Unit> {
        let units = &self.graph.units;
        let i = self.units_by_id.binary_search_by(|&i| units[i as usize].id.as_str().cmp(id)).ok()?;
        Some(&units[self.units_by_id[i] as usize])
    }

    fn edge_range<'a>(
        &'a self,
        order: &'a [u32],
        key: &str,
        field: fn(&Edge) -> &str,
    ) -> impl Iterator<Item = &'a Edge> + use<'a> {
        let start = order.partition_point(|&i| field(self.edge_at(i)) < key);
        let end = start + order[start..].partition_point(|&i| field(self.edge_at(i)) == key);
        order[start..end].iter().map(move |&i| self.edge_at(i))
    }

    /// The full source text of a unit of this file, exactly as indexed.
    pub fn source_of(&self, unit: &Unit) -> &str {
        self.text.get(unit.start_byte as usize..unit.end_byte as usize).unwrap_or("")
    }

    /// The unit's source as a reader should see it: from the start of its first line when only
    /// indentation precedes it there, so a method's first line is indented like the rest, and to
    /// the end of its last line when only a comment follows it there (`TIMEOUT = 5  # seconds`:
    /// often the only word on what a variable means).
    pub fn display_source_of(&self, unit: &Unit) -> &str {
        let (start, end) = (unit.start_byte as usize, unit.end_byte as usize);
        let line_start = self.text.get(..start).and_then(|before| before.rfind('\n').map(|i| i + 1)).unwrap_or(0);
        let indented = self.text.get(line_start..start).is_some_and(|pad| pad.chars().all(|c| c == ' ' || c == '\t'));
        let from = if indented { line_start } else { start };
        let rest_of_line = self.text.get(end..).map_or("", |rest| rest.split('\n').next().unwrap_or(""));
        let comment_only = rest_of_line.trim_start_matches([' ', '\t']).starts_with('#');
        let to = if comment_only { end + rest_of_line.trim_end().len() } else { end };
        self.text.get(from..to).unwrap_or("")
    }

    pub fn edges_from<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a Edge> + use<'a> {
        self.edge_range(&self.edges_by_src, id, |e| &*e.src)
    }

    pub fn edges_to<'a>(&'a self, id: &str) -> impl Iterator<Item = &'a Edge> + use<'a> {
        self.edge_range(&self.edges_by_dst, id, |e| &*e.dst)
    }

    /// The distinct edge targets of this file.
    fn distinct_targets(&self) -> impl Iterator<Item = &Arc<str>> {
        let mut last: Option<&Arc<str>> = None;
        self.edges_by_dst.iter().filter_map(move |&i| {
            let dst = &self.edge_at(i).dst;
            if last == Some(dst) {
                None
            } else {
                last = Some(dst);
                Some(dst)
            }
        })
    }
}

/// A unit together with the file entry it lives in (`None` for external targets, which have no file).
#[derive(Clone, Copy)]
pub struct UnitRef<'a> {
    pub unit: &'a Unit,
    pub file: &'a FileEntry,
}

/// A change to apply when deriving the next version.
pub enum FileChange {
    Upsert(Arc<FileEntry>),
    Remove(String),
}

#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Totals {
    pub files: usize,
    pub units: usize,
    pub edges: usize,
    pub unresolved: usize,
    pub parse_error_files: usize,
    pub skipped_files: usize,
    /// Files whose resolution stopped at the step budget (see [`crate::FileGraph::resolution_cut`]).
    pub resolution_cut_files: usize,
}

impl Totals {
    fn add(&mut self, entry: &FileEntry, sign: isize) {
        let g = &entry.graph;
        let apply = |field: &mut usize, n: usize| {
            *field = (*field as isize + sign * n as isize).max(0) as usize;
        };
        apply(&mut self.files, 1);
        apply(&mut self.units, g.units.len());
        apply(&mut self.edges, entry.edge_count());
        apply(&mut self.unresolved, entry.unresolved().count());
        apply(&mut self.parse_error_files, usize::from(g.parse_errors > 0));
        apply(&mut self.skipped_files, usize::from(g.skipped.is_some()));
        apply(&mut self.resolution_cut_files, usize::from(g.resolution_cut));
    }
}

type Path = Arc<str>;

/// One file's share of a snapshot's manifest: the hash of its path followed by its revision.
fn manifest_term(entry: &FileEntry) -> u64 {
    let mut hasher = xxhash_rust::xxh3::Xxh3::new();
    hasher.update(entry.graph.path.as_bytes());
    hasher.update(&entry.graph.revision.0.to_le_bytes());
    hasher.digest()
}

/// The index key of unresolved call sites with callee last name `name` (NUL cannot occur in an
/// id, so these keys never collide with edge targets).
fn unresolved_key(name: &str) -> String {
    format!("\u{0}unresolved:{name}")
}

/// A persistent hash map with the fast (non-DoS-resistant) hasher: keys are module names and
/// paths of the indexed tree, and publishing a version hashes every edge target's prefixes.
type FxImblMap<K, V> = imbl::GenericHashMap<K, V, rustc_hash::FxBuildHasher, imbl::shared_ptr::DefaultSharedPtr>;

#[derive(Clone)]
pub struct Snapshot {
    version: u64,
    files: imbl::OrdMap<Path, Arc<FileEntry>>,
    /// Module name to the file defining it. Unit ids start with their module's name, so this
    /// also finds the file of any unit without a map over all units.
    modules: FxImblMap<Arc<str>, Path>,
    /// At least the byte length of the longest module name in `modules` (it never shrinks):
    /// a prefix of an id longer than this names no module, so looking up a name of thousands of
    /// segments does not hash each of its thousands of prefixes.
    longest_module: usize,
    /// For every edge-target key (the module holding the target unit, or the id of an external
    /// target), the files holding edges to it.
    incoming: FxImblMap<Arc<str>, Arc<[Path]>>,
    /// The incoming keys each file registered, so that removing it is exact.
    registered: FxImblMap<Path, Arc<[Arc<str>]>>,
    totals: Totals,
    /// The XOR of every file's [`manifest_term`], kept as files come and go so that persisting
    /// a version does not hash every path of the repository again.
    manifest_hash: u64,
}

impl Snapshot {
    pub fn empty() -> Snapshot {
        Snapshot {
            version: 0,
            files: imbl::OrdMap::new(),
            modules: FxImblMap::default(),
            longest_module: 0,
            incoming: FxImblMap::default(),
            registered: FxImblMap::default(),
            totals: Totals::default(),
            manifest_hash: 0,
        }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn totals(&self) -> Totals {
        self.totals
    }

    /// What the snapshot's files are: their count and an order-independent hash of their
    /// (path, revision) pairs. Two snapshots with equal manifests hold the same file revisions.
    pub fn manifest(&self) -> (u64, u64) {
        (self.files.len() as u64, self.manifest_hash)
    }

    /// Derives the next version. The result has version `self.version() + 1` even when `changes`
    /// turn out to change nothing; callers decide whether such a version is worth publishing.
    pub fn apply(&self, changes: impl IntoIterator<Item = FileChange>) -> Snapshot {
        self.apply_as(self.version + 1, changes)
    }

    /// Derives a snapshot with an explicit version number (used when reopening a store).
    /// Costs O(changed files + the index entries they mention).
    pub fn apply_as(&self, version: u64, changes: impl IntoIterator<Item = FileChange>) -> Snapshot {
        let mut next = self.clone();
        next.version = version;
        // Path -> its entry, or `None` when the last change to it is a removal (the last change
        // to a path wins, whatever the order of upserts and removals).
        let mut added: FxHashMap<Path, Option<Arc<FileEntry>>> = FxHashMap::default();
        // key -> (files to add, files to remove)
        let mut delta: FxHashMap<Arc<str>, (Vec<Path>, Vec<Path>)> = FxHashMap::default();
        for change in changes {
            let path: Path = match &change {
                FileChange::Upsert(entry) => Arc::from(entry.graph.path.as_str()),
                FileChange::Remove(path) => Arc::from(path.as_str()),
            };
            if let Some(old) = next.files.remove(&path) {
                next.totals.add(&old, -1);
                next.manifest_hash ^= manifest_term(&old);
                if next.modules.get(old.graph.module.as_str()).is_some_and(|p| *p == path) {
                    next.modules.remove(old.graph.module.as_str());
                }
                if let Some(keys) = next.registered.remove(&path) {
                    for key in keys.iter() {
                        delta.entry(key.clone()).or_default().1.push(path.clone());
                    }
                }
            }
            let entry = match change {
                FileChange::Upsert(entry) => Some(entry),
                FileChange::Remove(_) => None,
            };
            added.insert(path, entry);
        }
        let mut added: Vec<(Path, Arc<FileEntry>)> =
            added.into_iter().filter_map(|(path, entry)| Some((path, entry?))).collect();
        added.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // Register every new module before computing keys, so edges between files of the same
        // batch find each other.
        for (path, entry) in &added {
            if entry.graph.skipped.is_none() || !entry.graph.module.is_empty() {
                next.modules.insert(Arc::from(entry.graph.module.as_str()), path.clone());
                next.longest_module = next.longest_module.max(entry.graph.module.len());
            }
        }
        for (path, entry) in added {
            next.totals.add(&entry, 1);
            next.manifest_hash ^= manifest_term(&entry);
            let mut keys: Vec<Arc<str>> = Vec::new();
            for dst in entry.distinct_targets() {
                let key: Arc<str> = match next.module_of(dst) {
                    Some((module, _)) => module,
                    None => dst.clone(),
                };
                keys.push(key);
            }
            // Unresolved call sites are indexed by the callee's last name, under keys no unit id
            // can take, so that "who might also call X" does not scan the whole repository.
            for u in entry.unresolved() {
                keys.push(Arc::from(unresolved_key(u.last_name()).as_str()));
            }
            keys.sort_unstable();
            keys.dedup();
            for key in &keys {
                delta.entry(key.clone()).or_default().0.push(path.clone());
            }
            next.registered.insert(path.clone(), Arc::from(keys));
            next.files.insert(path, entry);
        }
        for (key, (add, remove)) in delta {
            let mut paths: Vec<Path> = next.incoming.get(&key).map(|p| p.to_vec()).unwrap_or_default();
            paths.retain(|p| !remove.contains(p) || add.contains(p));
            for p in add {
                if let Err(i) = paths.binary_search(&p) {
                    paths.insert(i, p);
                }
            }
            if paths.is_empty() {
                next.incoming.remove(&key);
            } else {
                next.incoming.insert(key, Arc::from(paths));
            }
        }
        next
    }

    /// Unresolved call sites whose callee's last name is `name`, with their files.
    pub fn unresolved_named<'a>(&'a self, name: &str) -> Vec<(&'a crate::model::Unresolved, &'a FileEntry)> {
        let Some(paths) = self.incoming.get(unresolved_key(name).as_str()) else { return Vec::new() };
        let mut out = Vec::new();
        for path in paths.iter() {
            if let Some(file) = self.files.get(path) {
                out.extend(file.unresolved().filter(|u| u.last_name() == name).map(|u| (u, &**file)));
            }
        }
        out
    }

    /// The module holding `id` (the longest dotted prefix of `id` that is a module) and its file.
    fn module_of(&self, id: &str) -> Option<(Arc<str>, Path)> {
        let mut prefix = self.longest_module_prefix(id)?;
        loop {
            if let Some((module, path)) = self.modules.get_key_value(prefix) {
                return Some((module.clone(), path.clone()));
            }
            match prefix.rfind('.') {
                Some(dot) => prefix = &prefix[..dot],
                None => return None,
            }
        }
    }

    pub fn file(&self, path: &str) -> Option<&Arc<FileEntry>> {
        self.files.get(path)
    }

    pub fn files(&self) -> impl Iterator<Item = &Arc<FileEntry>> {
        self.files.values()
    }

    /// Whether any file's path starts with `prefix` (a directory path ending in `/`).
    pub fn has_file_under(&self, prefix: &str) -> bool {
        self.files.range::<_, Arc<str>>(Arc::from(prefix)..).next().is_some_and(|(p, _)| p.starts_with(prefix))
    }

    pub fn file_count(&self) -> usize {
        self.files.len()
    }

    /// The file of a module, by module name.
    pub fn module_file(&self, module: &str) -> Option<&Arc<FileEntry>> {
        self.files.get(self.modules.get(module)?)
    }

    /// The longest prefix of `id` that may name a module: `id` itself, or cut at a `.` to at
    /// most the longest module name. `None` when no prefix can.
    fn longest_module_prefix<'i>(&self, id: &'i str) -> Option<&'i str> {
        if id.len() <= self.longest_module {
            return Some(id);
        }
        // A `.` is one byte in UTF-8, so cutting before it cuts at a character boundary.
        let dot = id.as_bytes()[..=self.longest_module].iter().rposition(|&b| b == b'.')?;
        Some(&id[..dot])
    }

    /// At least the byte length of the longest module name: a name whose prefix up to a `.` is
    /// longer names no unit through that prefix.
    pub fn longest_module_name(&self) -> usize {
        self.longest_module
    }

    pub fn unit(&self, id: &str) -> Option<UnitRef<'_>> {
        let mut prefix = self.longest_module_prefix(id)?;
        loop {
            if let Some(path) = self.modules.get(prefix)
                && let Some(file) = self.files.get(path)
                && let Some(unit) = file.unit(id)
            {
                return Some(UnitRef { unit, file });
            }
            prefix = &prefix[..prefix.rfind('.')?];
        }
    }

    pub fn contains_unit(&self, id: &str) -> bool {
        self.unit(id).is_some()
    }

    /// Whether `id` is the target of some edge but defined nowhere in the repository.
    pub fn is_external(&self, id: &str) -> bool {
        self.incoming.contains_key(id) && !self.contains_unit(id)
    }

    /// Every unit of every file, in path order and source order within a file.
    pub fn units(&self) -> impl Iterator<Item = UnitRef<'_>> {
        self.files.values().flat_map(|file| file.graph.units.iter().map(move |unit| UnitRef { unit, file }))
    }

    /// The ids of external targets (stdlib, third party) referenced by some edge, sorted.
    pub fn externals(&self) -> Vec<&str> {
        let mut out: Vec<&str> = self
            .incoming
            .keys()
            .filter(|k| !k.starts_with('\u{0}') && !self.modules.contains_key(&**k) && !self.contains_unit(k))
            .map(|k| &**k)
            .collect();
        out.sort_unstable();
        out
    }

    pub fn edges_from<'a>(&'a self, id: &str) -> Vec<(&'a Edge, &'a FileEntry)> {
        let Some(u) = self.unit(id) else {
            return Vec::new();
        };
        u.file.edges_from(id).map(|e| (e, u.file)).collect()
    }

    /// Edges into `id` with the file that holds each, ordered by file path.
    pub fn edges_to<'a>(&'a self, id: &str) -> Vec<(&'a Edge, &'a FileEntry)> {
        self.edges_to_lazily(id).collect()
    }

    /// [`Snapshot::edges_to`], file by file as they are read: for a caller that stops early
    /// (a module like sympy's `core.basic` is referred to by thousands of files).
    pub fn edges_to_lazily<'a, 'b>(
        &'a self,
        id: &'b str,
    ) -> impl Iterator<Item = (&'a Edge, &'a FileEntry)> + use<'a, 'b> {
        let key: Arc<str> = match self.module_of(id) {
            Some((module, _)) => module,
            None => Arc::from(id),
        };
        self.incoming
            .get(&key)
            .into_iter()
            .flat_map(|sources| sources.iter())
            .filter_map(|path| self.files.get(path))
            .flat_map(move |file| file.edges_to(id).map(move |e| (e, &**file)))
    }

    /// All edges of the snapshot, file by file.
    pub fn edges(&self) -> impl Iterator<Item = (&Edge, &FileEntry)> {
        self.files.values().flat_map(|file| file.edges().map(move |e| (e, &**file)))
    }

    /// The kind of the node `id` names: a unit's kind, `External` for an external target.
    pub fn kind_of(&self, id: &str) -> Option<UnitKind> {
        match self.unit(id) {
            Some(u) => Some(u.unit.kind),
            None if self.incoming.contains_key(id) => Some(UnitKind::External),
            None => None,
        }
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot").field("version", &self.version).field("totals", &self.totals).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{EdgeKind, Revision};

    fn unit(id: &str, kind: UnitKind) -> Unit {
        Unit {
            id: id.into(),
            name: id.into(),
            kind,
            start_line: 1,
            end_line: 1,
            start_byte: 0,
            end_byte: 0,
            signature: None,
            docstring: None,
        }
    }

    fn file(path: &str, module: &str, units: &[&str], edges: &[(&str, &str)]) -> Arc<FileEntry> {
        let mut all = vec![unit(module, UnitKind::Module)];
        all.extend(units.iter().map(|u| unit(u, UnitKind::Function)));
        let graph = FileGraph {
            path: path.into(),
            revision: Revision::of(path.as_bytes()),
            module: module.into(),
            parse_errors: 0,
            first_parse_error: None,
            skipped: None,
            units: all,
            edges: edges
                .iter()
                .map(|(s, d)| Edge { src: Arc::from(*s), dst: Arc::from(*d), kind: EdgeKind::Calls, line: Some(1) })
                .collect(),
            unresolved: vec![],
            arg_flows: vec![],
            param_calls: vec![],
            resolution_cut: false,
        };
        Arc::new(FileEntry::new(Arc::new(graph), Arc::from(""), FileStamp::default(), IndexDeps::default()))
    }

    /// The manifest kept as files come and go equals one computed from scratch over the files
    /// (the formula stored manifests were written with: xxh3 of the path then the revision).
    #[test]
    fn the_kept_manifest_equals_one_computed_from_the_files() {
        let from_scratch = |s: &Snapshot| {
            let mut hash = 0u64;
            for f in s.files() {
                let mut key = f.graph.path.as_bytes().to_vec();
                key.extend_from_slice(&f.graph.revision.0.to_le_bytes());
                hash ^= xxhash_rust::xxh3::xxh3_64(&key);
            }
            (s.file_count() as u64, hash)
        };
        let with_revision = |entry: Arc<FileEntry>, text: &str| {
            let mut graph = (*entry.graph).clone();
            graph.revision = Revision::of(text.as_bytes());
            Arc::new(FileEntry::new(Arc::new(graph), Arc::from(""), FileStamp::default(), IndexDeps::default()))
        };
        let v1 = Snapshot::empty().apply([
            FileChange::Upsert(file("a.py", "a", &["a.f"], &[])),
            FileChange::Upsert(file("b.py", "b", &["b.g"], &[("b.g", "a.f")])),
            FileChange::Upsert(file("c.py", "c", &[], &[])),
        ]);
        assert_eq!(v1.manifest(), from_scratch(&v1));
        // A changed revision, a removal, and a path upserted then removed in one batch.
        let v2 = v1.apply([
            FileChange::Upsert(with_revision(file("a.py", "a", &["a.f"], &[]), "edited")),
            FileChange::Remove("c.py".into()),
            FileChange::Upsert(file("d.py", "d", &[], &[])),
            FileChange::Remove("d.py".into()),
        ]);
        assert_eq!(v2.manifest(), from_scratch(&v2));
        assert_eq!(v2.manifest().0, 2);
        assert_ne!(v2.manifest(), v1.manifest());
        // Back to v1's files: back to v1's manifest.
        let v3 = v2.apply([
            FileChange::Upsert(file("a.py", "a", &["a.f"], &[])),
            FileChange::Upsert(file("c.py", "c", &[], &[])),
        ]);
        assert_eq!(v3.manifest(), v1.manifest());
    }

    #[test]
    fn display_source_keeps_the_first_lines_indentation_and_a_trailing_comment() {
        let text = "class C:\n    def m(self):\n        return 1\nx = 1; y = 2\nT = 5  # seconds \r\nU = 6 ; # not only a comment\n";
        let entry = FileEntry::new(
            Arc::new(FileGraph {
                path: "c.py".into(),
                revision: Revision::of(text.as_bytes()),
                module: "c".into(),
                parse_errors: 0,
                first_parse_error: None,
                skipped: None,
                units: vec![],
                edges: vec![],
                unresolved: vec![],
                arg_flows: vec![],
                param_calls: vec![],
                resolution_cut: false,
            }),
            Arc::from(text),
            FileStamp::default(),
            IndexDeps::default(),
        );
        let span = |needle: &str, len: usize| {
            let start = text.find(needle).unwrap_or(0) as u32;
            Unit { start_byte: start, end_byte: start + len as u32, ..unit("u", UnitKind::Method) }
        };
        let method = span("def m", "def m(self):\n        return 1".len());
        assert_eq!(entry.source_of(&method), "def m(self):\n        return 1");
        assert_eq!(entry.display_source_of(&method), "    def m(self):\n        return 1");
        // Something other than indentation before it on its line: the unit alone.
        let y = span("y = 2", 5);
        assert_eq!(entry.display_source_of(&y), "y = 2");
        let class = span("class C", 8);
        assert_eq!(entry.display_source_of(&class), "class C:");
        // A comment alone after it on its last line is part of what it says.
        assert_eq!(entry.display_source_of(&span("T = 5", 5)), "T = 5  # seconds");
        assert_eq!(entry.display_source_of(&span("U = 6", 5)), "U = 6");
        assert_eq!(entry.display_source_of(&span("x = 1", 5)), "x = 1");
    }

    #[test]
    fn versions_are_independent_and_indexes_follow_changes() {
        let v0 = Snapshot::empty();
        let v1 = v0.apply([
            FileChange::Upsert(file("a.py", "a", &["a.f"], &[("a.f", "b.g"), ("a.f", "os.path.join")])),
            FileChange::Upsert(file("b.py", "b", &["b.g"], &[])),
        ]);
        assert_eq!(v1.version(), 1);
        assert_eq!(v1.edges_to("b.g").len(), 1);
        assert!(v1.is_external("os.path.join"));
        assert_eq!(v1.externals(), vec!["os.path.join"]);

        let v2 = v1.apply([FileChange::Upsert(file("a.py", "a", &["a.f"], &[]))]);
        assert_eq!(v2.edges_to("b.g").len(), 0);
        assert!(!v2.is_external("os.path.join"));
        // v1 is untouched by deriving v2.
        assert_eq!(v1.edges_to("b.g").len(), 1);

        let v3 = v2.apply([FileChange::Remove("b.py".into())]);
        assert!(v3.unit("b.g").is_none());
        assert!(v2.unit("b.g").is_some());
        assert_eq!(v3.totals().files, 1);
        assert_eq!(v3.totals().units, 2);
    }

    #[test]
    fn ids_longer_than_any_module_name_are_looked_up_through_their_module() {
        let v = Snapshot::empty().apply([
            FileChange::Upsert(file("pkg/mod.py", "pkg.mod", &["pkg.mod.C.method_with_a_long_name"], &[])),
            FileChange::Upsert(file("é.py", "é", &["é.ü"], &[])),
        ]);
        assert_eq!(v.longest_module_name(), "pkg.mod".len());
        assert!(v.unit("pkg.mod.C.method_with_a_long_name").is_some());
        assert!(v.unit("pkg.mod").is_some());
        // A multi-byte name longer than every module name: cut at a `.`, never inside a character.
        assert!(v.unit("é.ü").is_some());
        assert!(v.unit("éééééééé.ü").is_none());
        assert!(v.unit("pkgXmodXC").is_none());
        let many = format!("{}b", "a.".repeat(100_000));
        assert!(v.unit(&many).is_none());
        assert!(v.unit(&format!("pkg.mod.{many}")).is_none());
    }

    #[test]
    fn flow_edges_are_edges_of_the_entry_and_the_last_change_to_a_path_wins() {
        let b = file("b.py", "b", &["b.g"], &[]);
        let flow = Edge { src: "b.g".into(), dst: "a.f".into(), kind: EdgeKind::Calls, line: Some(1) };
        let v1 = Snapshot::empty().apply([
            FileChange::Upsert(file("a.py", "a", &["a.f"], &[])),
            FileChange::Upsert(Arc::new(b.reflowed(vec![flow.clone(), flow.clone()]))),
        ]);
        assert_eq!(v1.edges_to("a.f").len(), 1, "flow edges are indexed by target, once");
        assert_eq!(v1.edges_from("b.g").len(), 1);
        assert_eq!(v1.totals().edges, 1);
        // A flow edge the file's own resolution found too is one edge, not two.
        let mut own = (*b.graph).clone();
        own.edges.push(flow.clone());
        let b_own = FileEntry::new(Arc::new(own), b.text.clone(), b.stamp, b.deps.clone());
        let v1b = Snapshot::empty().apply([FileChange::Upsert(Arc::new(b_own.reflowed(vec![flow.clone()])))]);
        assert_eq!((v1b.edges_from("b.g").len(), v1b.totals().edges), (1, 1));
        // An upsert followed by a removal of the same path in one batch leaves no file.
        let v2 = v1.apply([FileChange::Upsert(b.clone()), FileChange::Remove("b.py".into())]);
        assert!(v2.file("b.py").is_none());
        assert_eq!(v2.edges_to("a.f").len(), 0);
    }
}
