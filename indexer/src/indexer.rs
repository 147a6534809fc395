//! The indexer: the single writer that turns file changes into published graph versions.
//!
//! It owns the salsa database, the current [`Snapshot`] and (optionally) the on-disk [`Store`].
//! A batch of changes updates the salsa inputs, re-resolves exactly the files that can be
//! affected (the changed ones, plus those whose resolution consulted a module whose interface
//! changed), and publishes version N+1 sharing every unchanged file's part with version N.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use fresco_graph::{
    FileChange, FileEntry, FileGraph, FileStamp, HISTORY_VERSIONS, IndexDeps, Snapshot, Store, StoreError, VersionDiff,
    VersionLog,
};
use rustc_hash::{FxHashMap, FxHashSet};
use salsa::Setter;

use crate::db::{
    Database, ExecutionLog, SourceFile, Workspace, file_graph, file_interface, file_interface_names, module_info,
};
use crate::flows::FlowIndex;
use crate::walk::{self, SourceRead, WalkIssue, WalkOptions};

#[derive(Clone, Debug)]
pub struct IndexerOptions {
    pub walk: WalkOptions,
    /// Threads used to resolve many files at once (cold index, large batches).
    pub threads: usize,
}

impl Default for IndexerOptions {
    fn default() -> Self {
        IndexerOptions {
            walk: WalkOptions::default(),
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1).min(8),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path} is not a directory")]
    NotADirectory { path: String },
    #[error("cannot reserve version numbers in {path}: {source}")]
    Io { path: String, source: std::io::Error },
    #[error(transparent)]
    Walk(#[from] walk::WalkFailed),
    /// The stored index, read as it is ([`Indexer::read_stored`]), cannot be.
    #[error("the stored index cannot be read as it is ({why}); it was not repaired: `fresco index` rebuilds it")]
    StoredUnusable { why: String },
    #[error("no index is stored at {path}")]
    NotStored { path: String },
    /// Opened again after a failed write, the store holds a version this process did not write.
    #[error(
        "the store holds version {found}, not version {expected} this daemon wrote last (another process \
         wrote it): restart the daemon, which catches up from the files"
    )]
    StoreChanged { found: u64, expected: u64 },
    /// The disk holding the index is (almost) full: see [`MIN_FREE_TO_OPEN`].
    #[error(
        "the disk holding {path} has {free_kib} KiB free, under the 1 MiB fresco needs to open the index \
         there (opening it on a full disk can damage it)"
    )]
    NoRoom { path: String, free_kib: u64 },
}

/// The room a disk must have for the index on it to be opened to write: two of the segments
/// (512 KiB) by which sled grows its log. sled also writes a snapshot as it opens a database:
/// opened on a full disk (a tmpfs of 4 MiB), it damaged the database, and the next open rebuilt
/// it from the files. (The error's text says 1 MiB.)
pub const MIN_FREE_TO_OPEN: u64 = 1024 * 1024;

/// Fails when the disk holding the index directory `dir` has less than [`MIN_FREE_TO_OPEN`]
/// free: the store is not to be opened there.
fn room_to_open(dir: &Path) -> Result<(), IndexError> {
    match free_bytes(dir) {
        Some(free) if free < MIN_FREE_TO_OPEN => {
            Err(IndexError::NoRoom { path: dir.display().to_string(), free_kib: free / 1024 })
        }
        _ => Ok(()),
    }
}

/// The bytes this process may still write on the file system holding `path` (or the nearest
/// directory above it that exists): the blocks free to anyone, and for root its reserve too.
/// `None` when it cannot be asked, or the file system is read-only (opening says so then).
fn free_bytes(path: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    // Absolute: the ancestors of a relative path end at "", which does not exist.
    let path = std::path::absolute(path).ok()?;
    let existing = path.ancestors().find(|p| p.exists())?;
    let c_path = std::ffi::CString::new(existing.as_os_str().as_bytes()).ok()?;
    // SAFETY: statvfs is plain old data; all zeroes is a valid value for it.
    let mut stats: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c_path` is a NUL-terminated path and `stats` a valid place to write the answer.
    if unsafe { libc::statvfs(c_path.as_ptr(), &mut stats) } != 0 || stats.f_flag & libc::ST_RDONLY != 0 {
        return None;
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let blocks = if unsafe { libc::geteuid() } == 0 { stats.f_bfree } else { stats.f_bavail };
    Some((blocks as u64).saturating_mul(stats.f_frsize as u64))
}

/// A change to one file, by path relative to the root.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileEvent {
    /// Created or modified: read it again.
    Changed(String),
    Removed(String),
}

/// Whether `db_dir` holds fresco's layout before `graph/`: a sled database directly in it, with
/// fresco's `committed-version` marker beside it (without the marker, a `db` and a `conf` may be
/// another program's: sled's own names).
fn in_old_layout(db_dir: &Path) -> bool {
    ["db", "conf", "committed-version"].iter().all(|f| db_dir.join(f).is_file())
}

/// What [`Indexer::open`] redid to bring the stored index up to the files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatchUp {
    /// Files whose graph changed (edited, new, or read differently) since the stored version.
    pub changed_files: usize,
    pub removed_files: usize,
    /// Files resolved again: the changed ones and those resolved against them.
    pub resolved_files: usize,
}

impl CatchUp {
    /// How many of an index of `files` files came from the store as they were.
    pub fn reused_of(&self, files: usize) -> usize {
        files.saturating_sub(self.resolved_files)
    }
}

/// What applying a batch did.
#[derive(Clone, Debug, Default)]
pub struct BatchReport {
    pub version: u64,
    /// Files whose graph changed (and were written to the store).
    pub changed_files: Vec<String>,
    pub removed_files: Vec<String>,
    /// Files re-resolved (changed or affected through their dependencies).
    pub resolved_files: usize,
    /// A new version was published (false when the batch changed nothing).
    pub published: bool,
    /// What the published version changed (empty when nothing was published).
    pub diff: Arc<VersionDiff>,
}

pub struct Indexer {
    root: PathBuf,
    options: IndexerOptions,
    db: Database,
    ws: Workspace,
    inputs: BTreeMap<String, SourceFile>,
    /// The inputs of files removed from the tree, kept for the path's return. salsa never frees
    /// an input: a new input per return (a branch switched back and forth) grew a daemon on
    /// django from 360 MB to 980 MB in six switches. A retired input holds no text, and what was
    /// derived from its text is replaced when it is retired (see [`Indexer::forget_derived`]):
    /// a path ever seen costs an empty input, and a file that comes back is lowered again.
    retired: FxHashMap<String, SourceFile>,
    stamps: FxHashMap<String, FileStamp>,
    /// Module name (canonical) -> files whose resolution consulted it.
    dependents: Dependents,
    snapshot: Snapshot,
    store: Option<Store>,
    db_dir: Option<PathBuf>,
    log: Arc<ExecutionLog>,
    walk_issues: Vec<WalkIssue>,
    /// Why the store was rebuilt on open, if it was.
    pub rebuilt_store: Option<String>,
    /// A rebuild's reason is kept in [`REBUILD_MARKER`] until the rebuilt store holds a version:
    /// set while that file is to be removed after the next write.
    rebuild_marked: bool,
    /// What [`Indexer::open`] redid to catch up with the files (`None` for any other indexer).
    caught_up: Option<CatchUp>,
    /// Published versions not yet written to the store (see [`Indexer::persist`]).
    unpersisted: Option<Unpersisted>,
    defer_persistence: bool,
    /// Who passes callables to whom across files, for the flow edges (see [`crate::flows`]).
    flows: FlowIndex,
    /// What each recent version changed, for `changes since V`; loaded from the store, so it
    /// outlives a restart.
    history: VersionLog,
    /// Version numbers up to this one may have been handed out before this session (see
    /// [`VersionReservation`]): the next version numbers past it.
    version_floor: u64,
    /// Numbers up to this one are reserved on disk for this session's versions.
    reserved: u64,
    /// The index directory of an indexer that stores nothing because it cannot write there
    /// ([`Indexer::in_memory_numbered_after`]): the numbers it hands out are still recorded
    /// there, as soon as the directory takes a write.
    numbers_only: Option<PathBuf>,
    /// A write to the store failed: sled keeps a database's first I/O error for good, so the
    /// store is opened again before the next write (see [`Indexer::reopen_failed_store`]).
    store_failed: bool,
    /// The version the store holds as this process last committed or loaded it, and the
    /// versions whose commits failed since (their batches may have reached the disk): what a
    /// store opened again may hold for the pending changes to apply to it.
    stored_version: u64,
    failed_commits: Vec<u64>,
    /// The version the store, opened again, held (another process's) and the one expected:
    /// nothing more is written to it until a restart, which catches up from the files.
    store_changed: Option<(u64, u64)>,
}

/// Version numbers are never reused, so that `changes since V` cannot answer for a graph V did
/// not name. A daemon publishes a version before it writes it (answering first), so a crash or a
/// stop can lose versions clients saw: their numbers are reserved first, in blocks of
/// [`VERSION_BLOCK`], in `INDEX/versions` (beside the graph store), and a new session numbers
/// from past the reservation, so versions skip numbers after a daemon's restart. An index
/// rebuilt from the files (a new fresco, a corrupt store) starts from an empty store: it numbers
/// from past the version the old store last committed. Only deleting the whole index directory
/// forgets the numbers.
const VERSION_BLOCK: u64 = 64;

struct VersionReservation;

impl VersionReservation {
    const FILE: &str = "versions";

    fn path(db_dir: &Path) -> PathBuf {
        db_dir.join(Self::FILE)
    }

    /// The reservation on disk; 0 when there is none (a new index directory, or one from before
    /// reservations), which is safe: the store's own version is also a floor.
    fn read(db_dir: &Path) -> u64 {
        std::fs::read_to_string(Self::path(db_dir)).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
    }

    /// [`VersionReservation::write`], as an index error.
    fn record(db_dir: &Path, up_to: u64) -> Result<(), IndexError> {
        Self::write(db_dir, up_to)
            .map_err(|e| IndexError::Io { path: Self::path(db_dir).display().to_string(), source: e })
    }

    /// Durably records `up_to` before any number up to it is handed out.
    fn write(db_dir: &Path, up_to: u64) -> std::io::Result<()> {
        write_durably(db_dir, Self::FILE, up_to.to_string().as_bytes())
    }
}

/// Writes `name` in `dir` whole or not at all (a temporary file renamed over it), and durably:
/// the file and the rename are synced before this returns.
fn write_durably(dir: &Path, name: &str, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = dir.join(format!("{name}.tmp"));
    let written = std::fs::File::create(&tmp).and_then(|mut file| {
        file.write_all(contents)?;
        file.sync_all()
    });
    if let Err(e) = written {
        // Not left behind (a full disk takes the file and refuses its bytes).
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, dir.join(name))?;
    // The rename itself is durable only once the directory is.
    std::fs::File::open(dir)?.sync_all()
}

/// Whether an I/O error says the disk (or the user's quota) is full.
fn is_disk_full(error: &std::io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
}

/// Failed commits remembered (see [`Indexer::reopen_failed_store`]): a daemon on a full disk
/// tries once per batch.
const MAX_FAILED_COMMITS_KEPT: usize = 4096;

/// What published versions changed that the store does not hold yet.
#[derive(Default)]
struct Unpersisted {
    upserts: BTreeMap<String, Arc<FileEntry>>,
    removed: Vec<String>,
    /// The diffs of the versions published since the last commit.
    diffs: Vec<(u64, Arc<VersionDiff>)>,
}

/// Moves a damaged graph store out of the way, to `graph.damaged` beside it (replacing an older
/// one), so that it can be looked at; says where it went, or that it was removed.
fn set_aside_damaged(graph_dir: &Path, db_dir: &Path) -> String {
    let aside = db_dir.join("graph.damaged");
    let _ = std::fs::remove_dir_all(&aside);
    if std::fs::rename(graph_dir, &aside).is_ok() {
        format!(" and was kept in {}", aside.display())
    } else {
        let _ = std::fs::remove_dir_all(graph_dir);
        String::new()
    }
}

impl Indexer {
    /// An indexer with no files and no store.
    pub fn in_memory(root: &Path, options: IndexerOptions) -> Indexer {
        let log = Arc::new(ExecutionLog::default());
        let db = Database::new(Some(log.clone()));
        let ws = Workspace::new(&db, Vec::new());
        Indexer {
            root: root.to_path_buf(),
            options,
            db,
            ws,
            inputs: BTreeMap::new(),
            retired: FxHashMap::default(),
            stamps: FxHashMap::default(),
            dependents: Dependents::default(),
            snapshot: Snapshot::empty(),
            store: None,
            db_dir: None,
            log,
            walk_issues: Vec::new(),
            rebuilt_store: None,
            rebuild_marked: false,
            caught_up: None,
            unpersisted: None,
            defer_persistence: false,
            flows: FlowIndex::default(),
            history: VersionLog::new(0, HISTORY_VERSIONS),
            version_floor: 0,
            reserved: 0,
            numbers_only: None,
            store_failed: false,
            stored_version: 0,
            failed_commits: Vec::new(),
            store_changed: None,
        }
    }

    /// An indexer with no store whose versions number past those of the index in `db_dir`,
    /// where it cannot write: a daemon that cannot write its index serves from memory, and its
    /// clients, who may have seen the stored versions, must not see their numbers again for
    /// other graphs. The numbers it hands out are recorded in `db_dir` (`INDEX/versions`) as
    /// soon as a write there succeeds (room made on the disk), and a store opened later numbers
    /// past them; numbers never recorded (the directory stayed read-only, or the disk full until
    /// the daemon stopped) may be handed out again by a later session.
    pub fn in_memory_numbered_after(root: &Path, db_dir: &Path, options: IndexerOptions) -> Indexer {
        let mut indexer = Indexer::in_memory(root, options);
        indexer.version_floor = fresco_graph::store::last_committed(&db_dir.join("graph"))
            .max(fresco_graph::store::last_committed(db_dir))
            .max(VersionReservation::read(db_dir));
        indexer.reserved = indexer.version_floor;
        indexer.numbers_only = Some(db_dir.to_path_buf());
        indexer
    }

    /// Opens the index of `root` stored in `db_dir`: loads the last committed version, reuses
    /// every file whose size, mtime and content did not change, and applies what changed while
    /// nobody watched. An incompatible or corrupt store is rebuilt from the files.
    pub fn open(root: &Path, db_dir: &Path, options: IndexerOptions) -> Result<Indexer, IndexError> {
        let mut indexer = Indexer::open_stored(root, db_dir, options)?;
        let report = indexer.refresh()?;
        indexer.caught_up = Some(CatchUp {
            changed_files: report.changed_files.len(),
            removed_files: report.removed_files.len(),
            resolved_files: report.resolved_files,
        });
        Ok(indexer)
    }

    /// What opening the stored index redid to catch up with the files; every other file's
    /// facts were reused as stored. `None` unless the indexer came from [`Indexer::open`].
    pub fn caught_up(&self) -> Option<CatchUp> {
        self.caught_up
    }

    /// The index exactly as last committed, read without repairing anything (for `export
    /// --stored`): a store that is damaged, corrupt, of another format or analysis, or in the
    /// older layout is an error saying so, and is left for the next [`Indexer::open`] to rebuild
    /// with a warning, never cleared or set aside here. sled opens its database to write (it
    /// takes its lock and may write its own recovery files), but no record is written, and no
    /// database is created where there is none: a first index that committed nothing reads as
    /// the empty version 0, an index directory that does not exist is an error. The indexer
    /// keeps no store: it is for reading.
    pub fn read_stored(root: &Path, db_dir: &Path, options: IndexerOptions) -> Result<Indexer, IndexError> {
        if !root.is_dir() {
            return Err(IndexError::NotADirectory { path: root.display().to_string() });
        }
        // sled writes as it opens, even to read: on a full disk that damaged the store.
        if db_dir.is_dir() {
            room_to_open(db_dir)?;
        }
        let mut indexer = Indexer::in_memory(root, options);
        let unusable = |e: StoreError| match e {
            StoreError::Damaged(_)
            | StoreError::Corrupt(_)
            | StoreError::IncompatibleFormat { .. }
            | StoreError::DifferentAnalysis { .. } => IndexError::StoredUnusable { why: e.to_string() },
            other => IndexError::Store(other),
        };
        if in_old_layout(db_dir) {
            return Err(IndexError::StoredUnusable { why: "it is in the layout of an older fresco".into() });
        }
        if !db_dir.is_dir() {
            return Err(IndexError::NotStored { path: db_dir.display().to_string() });
        }
        let graph_dir = db_dir.join("graph");
        // No database was made (sled writes these first; fresco the marker when it commits):
        // nothing is stored. A database missing only some of them is left to sled and `load`.
        if !["conf", "db", "committed-version"].iter().any(|f| graph_dir.join(f).exists()) {
            return Ok(indexer);
        }
        let store = Store::open(&graph_dir, crate::analysis_fingerprint()).map_err(unusable)?;
        // A first index stopped part way committed no version: its partial records are no
        // damage, and nothing is stored yet.
        // (A marker naming a version, or garbage, is left for `load` to judge.)
        let marker = std::fs::read_to_string(graph_dir.join("committed-version")).ok();
        let none_committed = marker.as_deref().is_none_or(|text| text.trim() == "0");
        if none_committed && store.version().map_err(unusable)? == 0 {
            return Ok(indexer);
        }
        let snapshot = store.load().map_err(unusable)?;
        indexer.seed_from(snapshot);
        Ok(indexer)
    }

    /// Opens the index exactly as last committed, without reconciling it with the disk, and
    /// ready to write: a damaged or incompatible store is rebuilt empty (see
    /// [`Indexer::rebuilt_store`]); [`Indexer::read_stored`] reads without repairing.
    pub fn open_stored(root: &Path, db_dir: &Path, options: IndexerOptions) -> Result<Indexer, IndexError> {
        if !root.is_dir() {
            return Err(IndexError::NotADirectory { path: root.display().to_string() });
        }
        room_to_open(db_dir)?;
        let mut indexer = Indexer::in_memory(root, options);
        let db_dir_existed = db_dir.exists();
        let analysis = crate::analysis_fingerprint();
        // The index directory holds the graph store (`graph/`) beside derived data that outlives
        // it (the dense lane's vectors, keyed by text): a rebuild replaces only `graph/`.
        let graph_dir = db_dir.join("graph");
        // A rebuild below starts an empty store: its versions must still number past the old
        // one's (see `VersionReservation`). The old store's number is recorded in
        // `INDEX/versions` before the rebuild touches it, so that a rebuild interrupted before
        // its first commit does not forget it.
        let reserved_before = VersionReservation::read(db_dir);
        let interrupted_rebuild = interrupted_rebuild(db_dir);
        let numbered_before = fresco_graph::store::last_committed(&graph_dir)
            .max(fresco_graph::store::last_committed(db_dir))
            .max(reserved_before);
        // `also`: a number the damaged store still gives (its own version record, when only the
        // marker file beside it is garbage).
        let keep_numbering = |also: u64| -> Result<(), IndexError> {
            let numbered_before = numbered_before.max(also);
            if numbered_before > reserved_before {
                VersionReservation::record(db_dir, numbered_before)?;
            }
            Ok(())
        };
        // The layout before `graph/`: removed. Another program's `db` and `conf` (no marker)
        // are left alone, never deleted.
        // Why the store is rebuilt is written down before the old store is touched (see
        // `begin_rebuild`); the warning names the cause an earlier, stopped rebuild began with.
        let earlier = interrupted_rebuild.as_deref();
        if in_old_layout(db_dir) {
            indexer.rebuilt_store = Some(begin_rebuild(db_dir, "the index used an older layout", earlier));
            keep_numbering(0)?;
            for stale in ["db", "conf", "blobs", "snap.*", "committed-version"] {
                let _ = std::fs::remove_file(db_dir.join(stale));
            }
            let _ = std::fs::remove_dir_all(db_dir.join("blobs"));
        }
        let (store, loaded) = match Store::open(&graph_dir, analysis) {
            Ok(store) => match store.load() {
                Ok(snapshot) => (store, Some(snapshot)),
                Err(StoreError::Corrupt(why)) => {
                    let cause = format!("the index was corrupt ({why})");
                    indexer.rebuilt_store = Some(begin_rebuild(db_dir, &cause, earlier));
                    // A garbage `committed-version` file reads as 0 above; the store's own record
                    // of its version may still be whole.
                    keep_numbering(store.version().unwrap_or(0))?;
                    store.clear(analysis)?;
                    (store, None)
                }
                Err(StoreError::Damaged(why)) => {
                    drop(store);
                    let cause = format!("the index database was damaged ({why})");
                    mark_rebuild(db_dir, &cause, earlier);
                    keep_numbering(0)?;
                    let kept = set_aside_damaged(&graph_dir, db_dir);
                    indexer.rebuilt_store = Some(rebuild_warning(&cause, &kept, earlier));
                    (Store::open(&graph_dir, analysis)?, None)
                }
                Err(e) => return Err(e.into()),
            },
            Err(StoreError::Damaged(why)) => {
                let cause = format!("the index database was damaged ({why})");
                mark_rebuild(db_dir, &cause, earlier);
                keep_numbering(0)?;
                let kept = set_aside_damaged(&graph_dir, db_dir);
                indexer.rebuilt_store = Some(rebuild_warning(&cause, &kept, earlier));
                (Store::open(&graph_dir, analysis)?, None)
            }
            Err(
                e @ (StoreError::IncompatibleFormat { .. }
                | StoreError::DifferentAnalysis { .. }
                | StoreError::Corrupt(_)),
            ) => {
                indexer.rebuilt_store = Some(begin_rebuild(db_dir, &e.to_string(), earlier));
                keep_numbering(0)?;
                std::fs::remove_dir_all(&graph_dir).ok();
                (Store::open(&graph_dir, analysis)?, None)
            }
            Err(e) => return Err(e.into()),
        };
        keep_out_of_version_control(db_dir, db_dir_existed);
        // Why the store is being rebuilt stays on disk until the rebuilt store holds a version:
        // a run stopped before that (a kill, a full disk) would otherwise leave a store that
        // reads as a first index never finished, and the warning would be lost.
        match (&indexer.rebuilt_store, earlier) {
            (Some(_), _) => indexer.rebuild_marked = true,
            (None, Some(cause)) if loaded.as_ref().is_none_or(|s| s.version() == 0) => {
                indexer.rebuilt_store = Some(rebuild_warning(cause, "", Some(cause)));
                indexer.rebuild_marked = true;
            }
            (None, Some(_)) => {
                // The rebuild stored a version and was stopped before it said so.
                let _ = std::fs::remove_file(db_dir.join(REBUILD_MARKER));
            }
            (None, None) => {}
        }
        if let Some(snapshot) = &loaded {
            let version = snapshot.version();
            // History that cannot be read costs clients a full refresh, not the index.
            indexer.history =
                store.load_history(version).unwrap_or_else(|_| VersionLog::new(version, HISTORY_VERSIONS));
        }
        indexer.stored_version = loaded.as_ref().map_or(0, |s| s.version());
        indexer.store = Some(store);
        indexer.db_dir = Some(db_dir.to_path_buf());
        // A store can hold a version its `committed-version` file does not name yet: the
        // commit writes that file after sled, and a kill in between leaves it one behind. This
        // open hands that version out, so it is recorded where a rebuild after damage, which can
        // no longer read sled's own record, still finds it (a number reused for another graph
        // otherwise: a kill in that window, then damage, gave two graphs version 2).
        // What a rebuild recorded above counts too (a store's own version read past a garbage
        // marker file).
        let mut floor = numbered_before.max(VersionReservation::read(db_dir));
        if let Some(snapshot) = &loaded
            && snapshot.version() > floor
        {
            VersionReservation::record(db_dir, snapshot.version())?;
            floor = snapshot.version();
        }
        indexer.version_floor = floor;
        indexer.reserved = indexer.version_floor;
        if let Some(snapshot) = loaded {
            indexer.seed_from(snapshot);
        }
        Ok(indexer)
    }

    /// Seeds the salsa inputs and dependency maps from a stored snapshot, without reading disk.
    fn seed_from(&mut self, snapshot: Snapshot) {
        for entry in snapshot.files() {
            let path = entry.graph.path.clone();
            let file = SourceFile::new(
                &self.db,
                path.clone(),
                entry.text.clone(),
                entry.graph.revision,
                entry.graph.skipped.clone(),
            );
            self.inputs.insert(path.clone(), file);
            self.stamps.insert(path.clone(), entry.stamp);
            self.dependents.add(&path, &entry.deps.modules);
        }
        let files: Vec<SourceFile> = self.inputs.values().copied().collect();
        self.ws.set_files(&mut self.db).to(files);
        // Flow edges are derived, not stored: join them again for the whole snapshot.
        for entry in snapshot.files() {
            self.flows.update(&entry.graph.path, Some(&entry.graph));
        }
        let mut reflowed = Vec::new();
        for entry in snapshot.files() {
            if entry.graph.param_calls.is_empty() {
                continue;
            }
            let edges = self.flows.flow_edges(&entry.graph, |p| snapshot.file(p).map(|e| &*e.graph));
            if !edges.is_empty() {
                reflowed.push(FileChange::Upsert(Arc::new(entry.reflowed(edges))));
            }
        }
        self.snapshot = if reflowed.is_empty() { snapshot } else { snapshot.apply_as(snapshot.version(), reflowed) };
    }

    /// Where the index is stored; `None` for an index kept in memory only.
    pub fn db_dir(&self) -> Option<&Path> {
        self.db_dir.as_deref()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn walk_issues(&self) -> &[WalkIssue] {
        &self.walk_issues
    }

    /// What the recent versions changed (see [`VersionLog`]).
    pub fn history(&self) -> &VersionLog {
        &self.history
    }

    /// The history for clients: only a stored index's, since an index built in memory numbers
    /// its versions on its own (they name nothing the stored index published).
    pub fn stored_history(&self) -> Option<&VersionLog> {
        self.db_dir.as_ref().map(|_| &self.history)
    }

    pub fn options(&self) -> &IndexerOptions {
        &self.options
    }

    /// Query executions counted since the last call (for tests and benchmarks).
    pub fn take_execution_counts(&self) -> FxHashMap<String, u64> {
        self.log.take()
    }

    /// Rescans the tree and applies every difference from the current version: new, changed
    /// (by size and mtime, then content) and deleted files.
    pub fn refresh(&mut self) -> Result<BatchReport, IndexError> {
        let (files, issues) = walk::discover(&self.root, &self.options.walk)?;
        self.walk_issues = issues;
        let on_disk: FxHashSet<&String> = files.iter().collect();
        let mut events = Vec::new();
        for path in &files {
            // As `read_source` stamps it: a symbolic link's own metadata.
            let stamp = std::fs::symlink_metadata(self.root.join(path)).ok().map(|m| walk::stamp_of(&m));
            let changed = match &stamp {
                None => true,
                Some(stamp) => self.stamps.get(path) != Some(stamp) || self.size_limit_moved(path, stamp.size),
            };
            if changed {
                events.push(FileEvent::Changed(path.clone()));
            }
        }
        for path in self.inputs.keys() {
            if !on_disk.contains(path) {
                events.push(FileEvent::Removed(path.clone()));
            }
        }
        self.apply(events)
    }

    /// Whether an unchanged file must be read again because this run's size limit treats it
    /// otherwise than the run that indexed it did: skipped as too large under another limit, or
    /// indexed but over this one. The limit is an option of each run, not of the stored index.
    fn size_limit_moved(&self, path: &str, size: u64) -> bool {
        let max = self.options.walk.max_file_size;
        match self.inputs.get(path).map(|file| file.skipped(&self.db)) {
            Some(Some(fresco_graph::SkipReason::TooLarge { limit, .. })) => *limit != max,
            Some(_) => size > max,
            None => false,
        }
    }

    /// Whether `path` (relative) is a file this indexer would index, by name and default
    /// exclusions (the watcher applies gitignore rules on top).
    pub fn is_candidate(&self, rel: &str) -> bool {
        walk::is_candidate(&self.root, rel, &self.options.walk)
    }

    /// Applies a batch of file events and publishes a new version if anything changed.
    pub fn apply(&mut self, events: Vec<FileEvent>) -> Result<BatchReport, IndexError> {
        // What can fail on disk, first: past this point the batch changes the inputs, and a
        // failure there would leave them ahead of a version never published (a retry would
        // then see nothing to do, and the change would be lost).
        self.ensure_store()?;
        self.reserve_versions()?;
        let trace = Trace::start();
        // 1. Read what changed; a file that vanished before we read it is a removal.
        let mut latest: BTreeMap<String, Option<SourceRead>> = BTreeMap::new();
        let reads: Vec<(String, Option<SourceRead>)> = self.read_all(events);
        for (path, read) in reads {
            latest.insert(path, read);
        }

        trace.mark("read");
        // 2. Update salsa inputs, remembering which modules' identities or interfaces moved.
        let mut touched: Vec<String> = Vec::new();
        let mut added_or_removed = false;
        let mut removed: Vec<String> = Vec::new();
        let mut old_interfaces: FxHashMap<String, (Option<String>, u64)> = FxHashMap::default();
        for (path, read) in &latest {
            if let Some(&file) = self.inputs.get(path) {
                let old = self.snapshot.file(path).map(|e| e.deps.interface);
                let name = self.snapshot.file(path).map(|e| e.graph.module.clone());
                old_interfaces.insert(path.clone(), (name, old.unwrap_or(0)));
                match read {
                    Some(read) => {
                        self.stamps.insert(path.clone(), read.stamp);
                        if file.revision(&self.db) == read.revision && file.skipped(&self.db) == &read.skipped {
                            continue;
                        }
                        file.set_text(&mut self.db).to(read.text.clone());
                        file.set_revision(&mut self.db).to(read.revision);
                        file.set_skipped(&mut self.db).to(read.skipped.clone());
                        touched.push(path.clone());
                    }
                    None => {
                        self.inputs.remove(path);
                        retire(&mut self.db, file);
                        self.retired.insert(path.clone(), file);
                        self.stamps.remove(path);
                        removed.push(path.clone());
                        added_or_removed = true;
                    }
                }
            } else if let Some(read) = read {
                let file = match self.retired.remove(path) {
                    Some(file) => {
                        if file.revision(&self.db) != read.revision || file.skipped(&self.db) != &read.skipped {
                            file.set_text(&mut self.db).to(read.text.clone());
                            file.set_revision(&mut self.db).to(read.revision);
                            file.set_skipped(&mut self.db).to(read.skipped.clone());
                        }
                        file
                    }
                    None => {
                        SourceFile::new(&self.db, path.clone(), read.text.clone(), read.revision, read.skipped.clone())
                    }
                };
                self.inputs.insert(path.clone(), file);
                self.stamps.insert(path.clone(), read.stamp);
                touched.push(path.clone());
                added_or_removed = true;
            }
        }
        if added_or_removed {
            let files: Vec<SourceFile> = self.inputs.values().copied().collect();
            self.ws.set_files(&mut self.db).to(files);
        }

        // 3. Which files must be re-resolved.
        let mut affected: FxHashSet<String> = touched.iter().cloned().collect();
        let mut changed_modules: FxHashSet<String> = FxHashSet::default();
        for path in &removed {
            if let Some(entry) = self.snapshot.file(path) {
                changed_modules.insert(entry.graph.module.clone());
            }
        }
        let mut renamed_any = false;
        // Parsing happens here (the interface needs the summary): in parallel.
        let interfaces = self.par_query(&touched, |db, ws, file| {
            (
                module_info(db, ws, file).map(|i| i.name),
                file_interface(db, ws, file),
                file_interface_names(db, ws, file),
            )
        });
        for (path, (new_name, interface, names)) in touched.iter().zip(interfaces) {
            match old_interfaces.get(path) {
                Some((old_name, old_interface)) if *old_name == new_name && *old_interface == interface => {}
                Some((old_name, _)) if *old_name == new_name && new_name.is_some() => {
                    // Same module, different interface: only the names whose part of the
                    // summary changed matter, to the files that looked those names up.
                    let module = new_name.clone().unwrap_or_default();
                    let old_names: FxHashMap<&str, u64> = self
                        .snapshot
                        .file(path)
                        .map(|e| e.deps.interface_names.iter().map(|(n, h)| (n.as_str(), *h)).collect())
                        .unwrap_or_default();
                    if old_names.is_empty() {
                        changed_modules.insert(module.clone());
                    }
                    let new_names: FxHashMap<&str, u64> = names.iter().map(|(n, h)| (n.as_str(), *h)).collect();
                    for (name, hash) in &new_names {
                        if old_names.get(name) != Some(hash) {
                            changed_modules.insert(crate::summary::name_key(&module, name));
                        }
                    }
                    for name in old_names.keys() {
                        if !new_names.contains_key(name) {
                            changed_modules.insert(crate::summary::name_key(&module, name));
                        }
                    }
                }
                _ => {
                    if let Some(name) = new_name {
                        changed_modules.insert(name);
                    }
                }
            }
        }
        if added_or_removed {
            // Adding or removing a file can rename others (name collisions): compare every name.
            for (path, &file) in &self.inputs {
                if let Some(entry) = self.snapshot.file(path) {
                    let name = module_info(&self.db, self.ws, file).map(|i| i.name).unwrap_or_default();
                    if name != entry.graph.module {
                        renamed_any = true;
                        affected.insert(path.clone());
                        changed_modules.insert(name);
                        changed_modules.insert(entry.graph.module.clone());
                    }
                }
            }
            // Files that looked a module up by another name (a namespace path, with or without
            // `src.`), and packages that appeared or disappeared with a directory.
            let added: Vec<&String> = touched.iter().filter(|p| self.snapshot.file(p).is_none()).collect();
            for path in added.iter().copied().chain(removed.iter()) {
                let is_added = self.inputs.contains_key(path);
                if let Some(info) = self.inputs.get(path).and_then(|f| module_info(&self.db, self.ws, *f)) {
                    changed_modules.insert(info.name);
                }
                let dotted = path.trim_end_matches(".py").trim_end_matches("/__init__").replace('/', ".");
                changed_modules.insert(dotted.trim_start_matches("src.").to_string());
                changed_modules.insert(dotted);
                let mut dir = path.as_str();
                while let Some((parent, _)) = dir.rsplit_once('/') {
                    let prefix = format!("{parent}/");
                    let existed_before = self.snapshot.has_file_under(&prefix);
                    let exists_now =
                        self.inputs.range(prefix.clone()..).next().is_some_and(|(p, _)| p.starts_with(&prefix));
                    let appeared_or_vanished = if is_added { !existed_before } else { !exists_now };
                    if !appeared_or_vanished {
                        break;
                    }
                    let package = parent.replace('/', ".");
                    changed_modules.insert(package.trim_start_matches("src.").to_string());
                    changed_modules.insert(package);
                    dir = parent;
                }
            }
        }
        for module in &changed_modules {
            affected.extend(self.dependents.of(module).map(str::to_string));
        }
        let _ = renamed_any;
        affected.retain(|p| self.inputs.contains_key(p));

        trace.mark("inputs");
        // 4. Resolve them (in parallel when there are many).
        let mut affected: Vec<String> = affected.into_iter().collect();
        affected.sort();
        let resolved = self.resolve_many(&affected);
        self.forget_derived(&removed);
        trace.mark("resolve");
        if affected.len() > crate::db::SYNTAX_CACHE {
            // A new revision lets salsa evict the lowered syntax beyond its LRU capacity: nothing
            // below needs it, and committing allocates as much again.
            salsa::Database::synthetic_write(&mut self.db, salsa::Durability::LOW);
            // The lowered syntax of a large batch is allocated and freed by the worker threads,
            // in their own malloc arenas, which the (main-thread) commit that follows cannot
            // reuse: without this, the peak holds both.
            crate::process::release_free_memory();
            trace.mark("evict");
        }

        // 5. Build the next version from what actually changed.
        let mut changes = Vec::new();
        let mut upserts = Vec::new();
        let mut changed_files = Vec::new();
        let mut reflowed_files: Vec<String> = Vec::new();
        let mut fresh: BTreeMap<String, (Arc<FileGraph>, Arc<str>, FileStamp, IndexDeps)> = BTreeMap::new();
        for (path, resolved, interface, interface_names) in resolved {
            let file = self.inputs[&path];
            let old = self.snapshot.file(&path);
            let stamp = self.stamps.get(&path).copied().unwrap_or_default();
            let deps =
                IndexDeps { modules: resolved.deps.clone(), interface, interface_names: (*interface_names).clone() };
            if let Some(old) = old {
                if *old.graph == *resolved.graph && old.deps == deps && old.stamp == stamp {
                    continue;
                }
                self.dependents.remove(&path, &old.deps.modules);
            }
            self.dependents.add(&path, &deps.modules);
            fresh.insert(path.clone(), (resolved.graph.clone(), file.text(&self.db).clone(), stamp, deps));
            changed_files.push(path);
        }
        // Flow edges: the changed files', and those of files whose parameters the changed (or
        // removed) files pass callables to, before or now.
        let mut reflow: FxHashSet<String> = FxHashSet::default();
        for (path, (graph, ..)) in &fresh {
            reflow.extend(self.flows.update(path, Some(graph)));
        }
        for path in &removed {
            reflow.extend(self.flows.update(path, None));
        }
        let current = |p: &str| -> Option<&FileGraph> {
            match fresh.get(p) {
                Some((graph, ..)) => Some(&**graph),
                None if removed.iter().any(|r| r == p) => None,
                None => self.snapshot.file(p).map(|e| &*e.graph),
            }
        };
        // Building an entry sorts its edges twice: in parallel when many files changed (a cold
        // index spent 0.1 s here on one thread).
        let fresh_values: Vec<_> = fresh.values().collect();
        let threads = if fresh_values.len() < 64 { 1 } else { self.options.threads };
        let entries = parallel_map(&fresh_values, threads, |(graph, text, stamp, deps)| {
            let edges = self.flows.flow_edges(graph, current);
            Arc::new(FileEntry::with_flow_edges(graph.clone(), text.clone(), *stamp, deps.clone(), edges))
        });
        for entry in entries {
            upserts.push(entry.clone());
            changes.push(FileChange::Upsert(entry));
        }
        let mut reflow: Vec<String> =
            reflow.into_iter().filter(|p| !fresh.contains_key(p) && !removed.contains(p)).collect();
        reflow.sort();
        for path in reflow {
            if let Some(old) = self.snapshot.file(&path) {
                let entry = old.reflowed(self.flows.flow_edges(&old.graph, current));
                if entry.flow_edges() != old.flow_edges() {
                    // Only derived edges moved: nothing of the file itself to persist.
                    changes.push(FileChange::Upsert(Arc::new(entry)));
                    reflowed_files.push(path);
                }
            }
        }
        // Stamps of untouched files that were re-read (touch without change) must persist too.
        for path in latest.keys() {
            if changed_files.contains(path) || removed.contains(path) || reflowed_files.contains(path) {
                continue;
            }
            if let (Some(old), Some(stamp)) = (self.snapshot.file(path), self.stamps.get(path))
                && old.stamp != *stamp
            {
                let entry = Arc::new(old.restamped(*stamp));
                upserts.push(entry.clone());
                changes.push(FileChange::Upsert(entry));
            }
        }
        for path in &removed {
            if let Some(old) = self.snapshot.file(path) {
                self.dependents.remove(path, &old.deps.modules);
            }
            changes.push(FileChange::Remove(path.clone()));
        }
        let published = !changed_files.is_empty() || !removed.is_empty() || !reflowed_files.is_empty();
        let mut diff = VersionDiff { previous: self.snapshot.version(), ..VersionDiff::default() };
        // The first version has no predecessor to differ from.
        if published && self.snapshot.version() > 0 {
            for change in &changes {
                let (path, new) = match change {
                    FileChange::Upsert(e) => (e.graph.path.as_str(), Some(&**e)),
                    FileChange::Remove(p) => (p.as_str(), None),
                };
                let old = self.snapshot.file(path).map(|e| &**e);
                VersionDiff::of_file(old, new, &mut diff);
            }
            diff.merge_moved_units();
        }
        let diff = Arc::new(diff);
        let metadata_only = !published && !upserts.is_empty();
        if published || metadata_only {
            let version = if published { self.next_version() } else { self.snapshot.version() };
            trace.mark("diff");
            let first = self.snapshot.version() == 0;
            let next = self.snapshot.apply_as(version, changes);
            self.snapshot = next;
            trace.mark("publish");
            if published && first {
                // Nothing before the first version: changes are known since it.
                self.history = VersionLog::new(version, HISTORY_VERSIONS);
            } else if published {
                self.history.push(version, diff.clone());
            }
            // A store that failed a write takes what is pending once it is opened again.
            if self.store.is_some() || self.store_failed {
                let oldest_kept = self.history.oldest();
                let pending = self.unpersisted.get_or_insert_with(Unpersisted::default);
                if published && !first {
                    pending.diffs.push((version, diff.clone()));
                    // What the history no longer keeps is never written (`Store::commit` writes
                    // diffs past its oldest version): while writes fail (a full disk), pending
                    // diffs stay as many as the history holds, not one per version since.
                    pending.diffs.retain(|(at, _)| *at > oldest_kept);
                }
                for entry in upserts {
                    let path = entry.graph.path.clone();
                    pending.removed.retain(|p| *p != path);
                    pending.upserts.insert(path, entry);
                }
                for path in &removed {
                    pending.upserts.remove(path);
                    if !pending.removed.contains(path) {
                        pending.removed.push(path.clone());
                    }
                }
            }
            if !self.defer_persistence {
                self.persist()?;
                trace.mark("commit");
            }
        }
        if self.unpersisted.is_none() {
            // Everything published is stored, or there was nothing to store (a tree without
            // Python files): a rebuild is over either way.
            self.unmark_rebuild();
        }
        Ok(BatchReport {
            version: self.snapshot.version(),
            changed_files,
            removed_files: removed,
            resolved_files: affected.len(),
            published,
            diff,
        })
    }

    /// Applies a watcher batch: file paths are re-read, directories (`dir/`) re-examined as a
    /// whole subtree, and a lost-events batch rescans everything.
    pub fn apply_batch(&mut self, batch: &crate::watch::Batch) -> Result<BatchReport, IndexError> {
        if batch.rescan.is_some() {
            return self.refresh();
        }
        let mut events = Vec::new();
        for (path, _) in &batch.paths {
            if let Some(dir) = path.strip_suffix('/') {
                let prefix = format!("{dir}/");
                events.extend(
                    self.inputs
                        .range::<str, _>((std::ops::Bound::Included(prefix.as_str()), std::ops::Bound::Unbounded))
                        .take_while(|(p, _)| p.starts_with(&prefix))
                        .map(|(p, _)| FileEvent::Changed(p.clone())),
                );
                let (found, issues) = walk::discover_under(&self.root, dir, &self.options.walk)?;
                // The subtree was walked again: its problems are those found now.
                let under = self.root.join(dir);
                self.walk_issues.retain(|issue| !issue.on_disk.starts_with(&under));
                self.walk_issues.extend(issues);
                events.extend(found.into_iter().map(FileEvent::Changed));
            } else {
                // A FIFO created as `x.py`, or a link to a directory, is recorded as the walk
                // would record it; a path that changed is examined again.
                let on_disk = self.root.join(path);
                self.walk_issues.retain(|issue| issue.on_disk != on_disk);
                if self.is_candidate(path) {
                    self.walk_issues.extend(walk::issue_at(&on_disk));
                    events.push(FileEvent::Changed(path.clone()));
                }
            }
        }
        // A problem that no longer applies (the path is gone, or a regular file now) is dropped.
        self.walk_issues.retain(|issue| issue.still_applies());
        self.apply(events)
    }

    /// The number of the next version: past every number handed out before, by this session or an
    /// earlier one (see [`VersionReservation`]).
    fn next_version(&self) -> u64 {
        self.snapshot.version().max(self.version_floor) + 1
    }

    /// Makes sure the next version's number is reserved on disk (see [`VersionReservation`]).
    fn reserve_versions(&mut self) -> Result<(), IndexError> {
        let next = self.next_version();
        // Only a daemon (deferred persistence) hands out numbers before storing them; otherwise
        // the store's own version is the record.
        if let Some(db_dir) = &self.db_dir
            && self.defer_persistence
            && next > self.reserved
        {
            // Never below another process's record (one may have written while the store's
            // handle was let go, see `reopen_failed_store`).
            let up_to = (next + VERSION_BLOCK - 1).max(VersionReservation::read(db_dir));
            match VersionReservation::record(db_dir, up_to) {
                Ok(()) => self.reserved = up_to,
                // A full disk: the version is published all the same, as a daemon serves from
                // memory what it cannot write; its number is recorded with a later one once
                // there is room (a crash before then may hand it out again).
                Err(IndexError::Io { source, .. }) if is_disk_full(&source) => {}
                Err(e) => return Err(e),
            }
        }
        // Without a store: recorded where it can be, tried again at the next version (the
        // directory could not be written to begin with: that is why nothing is stored). Never
        // lowering what another process recorded there meanwhile.
        if let Some(dir) = &self.numbers_only
            && next > self.reserved
        {
            let existed = dir.exists();
            let up_to = (next + VERSION_BLOCK - 1).max(VersionReservation::read(dir));
            if std::fs::create_dir_all(dir).is_ok() && VersionReservation::record(dir, up_to).is_ok() {
                keep_out_of_version_control(dir, existed);
                self.reserved = up_to;
            }
        }
        Ok(())
    }

    /// After the daemon wrote its last version and stops: numbers past it were never handed
    /// out, so the next session may use them (versions then run on without a gap).
    pub fn release_unused_versions(&mut self) -> Result<(), IndexError> {
        if self.unpersisted.is_some() {
            return Ok(());
        }
        // Never below the floor this session started from (numbers an earlier store used).
        let keep = self.snapshot.version().max(self.version_floor);
        if let Some(db_dir) = &self.db_dir
            && self.reserved > keep
            && VersionReservation::read(db_dir) <= self.reserved
        {
            VersionReservation::record(db_dir, keep)?;
            self.reserved = keep;
        }
        // Without a store, what was handed out is recorded now if it never could be before
        // (the block reserved ahead stays: skipped numbers are harmless, and the directory may
        // hold another process's record by now).
        if let Some(dir) = &self.numbers_only
            && self.reserved < keep
        {
            let existed = dir.exists();
            std::fs::create_dir_all(dir).map_err(|e| IndexError::Io { path: dir.display().to_string(), source: e })?;
            VersionReservation::record(dir, keep.max(VersionReservation::read(dir)))?;
            keep_out_of_version_control(dir, existed);
            self.reserved = keep;
        }
        Ok(())
    }

    /// With deferred persistence, `apply` publishes a version without writing it; the caller
    /// (the daemon, which answers queries from the published version first) then calls
    /// [`Indexer::persist`]. The store still only ever holds complete versions.
    pub fn set_defer_persistence(&mut self, defer: bool) {
        self.defer_persistence = defer;
    }

    /// Writes every published version not yet in the store, atomically, as the current version.
    /// On failure nothing is lost: the next call writes it all again.
    pub fn persist(&mut self) -> Result<(), IndexError> {
        if let Some((found, expected)) = self.store_changed {
            return Err(IndexError::StoreChanged { found, expected });
        }
        if self.store_failed && self.unpersisted.is_some() {
            self.reopen_failed_store()?;
        }
        // Without a store handle (see `ensure_store`) the pending versions wait for one.
        let Some(store) = &self.store else { return Ok(()) };
        let Some(pending) = self.unpersisted.take() else { return Ok(()) };
        let upserts: Vec<Arc<FileEntry>> = pending.upserts.values().cloned().collect();
        let version = self.snapshot.version();
        let result = store.commit(
            version,
            &upserts,
            &pending.removed,
            fresco_graph::manifest(&self.snapshot),
            &pending.diffs,
            self.history.oldest(),
        );
        if let Err(e) = result {
            // The store keeps its last complete version (sled recovers a batch whole or not at
            // all). sled 0.34 keeps a database's first I/O error for good (a full disk): later
            // writes through this handle would fail too, so the next one opens it again.
            self.unpersisted = Some(pending);
            self.store_failed = true;
            if self.failed_commits.len() < MAX_FAILED_COMMITS_KEPT {
                self.failed_commits.push(version);
            }
            return Err(e.into());
        }
        self.stored_version = version;
        self.failed_commits.clear();
        self.unmark_rebuild();
        Ok(())
    }

    /// Opens the store again after a failed write, once the disk has room for it
    /// ([`MIN_FREE_TO_OPEN`]; an open on a full disk damaged a database). The handle is let go
    /// first (sled locks its database), so another process could write the store meanwhile:
    /// the store opened must hold the version this process last committed, or one whose commit
    /// failed here (its batch reached the disk after all), for the pending changes to apply to
    /// it. Anything else is left for a restart, which catches up from the files. Until the open
    /// succeeds, changes keep accumulating and each write tries again.
    fn reopen_failed_store(&mut self) -> Result<(), IndexError> {
        let Some(dir) = self.db_dir.clone() else { return Ok(()) };
        room_to_open(&dir)?;
        self.store = None;
        let store = Store::open(&dir.join("graph"), crate::analysis_fingerprint())?;
        let found = store.version()?;
        if found != self.stored_version && !self.failed_commits.contains(&found) {
            // Keeps no handle: a restart reconciles the store with the files. The other process
            // numbered its versions from the reservation on disk: the next ones here number past
            // both, never again handing out a number it gave another graph.
            let theirs = found.max(VersionReservation::read(&dir));
            if theirs > self.version_floor {
                self.version_floor = theirs;
            }
            self.store_changed = Some((found, self.stored_version));
            return Err(IndexError::StoreChanged { found, expected: self.stored_version });
        }
        self.store = Some(store);
        self.store_failed = false;
        Ok(())
    }

    /// The rebuilt store holds a version now: its reason need not be kept on disk.
    fn unmark_rebuild(&mut self) {
        if self.rebuild_marked
            && let Some(dir) = &self.db_dir
        {
            let _ = std::fs::remove_file(dir.join(REBUILD_MARKER));
            self.rebuild_marked = false;
        }
    }

    /// If the store directory was deleted under us, recreate it and write the whole current
    /// version, so that a restart still finds a complete index.
    fn ensure_store(&mut self) -> Result<(), IndexError> {
        // A stored index only. Without a store handle (an earlier attempt below failed) it tries
        // again: giving up would leave every later version unwritten, silently.
        let Some(dir) = self.db_dir.clone() else {
            return Ok(());
        };
        let dir = dir.as_path();
        // A store whose write failed is opened again by `persist`, with what is pending; its
        // handle may be let go meanwhile.
        if (self.store.is_some() || self.store_failed) && dir.join("graph").exists() {
            return Ok(());
        }
        if !dir.parent().is_some_and(Path::is_dir) {
            // The directory holding the index went too (the repository was moved or deleted):
            // re-creating the path would write an index of nothing where nothing is.
            return Err(IndexError::NotADirectory { path: dir.parent().unwrap_or(dir).display().to_string() });
        }
        // Not on a full disk: an open there damaged the database (see `MIN_FREE_TO_OPEN`).
        room_to_open(dir)?;
        self.rebuilt_store = Some(format!("the index directory {} disappeared; rewritten", dir.display()));
        // The old handle's files are gone. Until the rewrite below succeeds, the next batch tries
        // it again (not a reopen of the new, empty store, which would hold no version of ours).
        self.store = None;
        self.store_failed = false;
        let store = Store::open(&dir.join("graph"), crate::analysis_fingerprint())?;
        keep_out_of_version_control(dir, false);
        if self.reserved > 0 {
            // The reservation went with the directory: numbers handed out must stay used.
            VersionReservation::record(dir, self.reserved)?;
        }
        let entries: Vec<Arc<FileEntry>> = self.snapshot.files().cloned().collect();
        let history: Vec<(u64, Arc<VersionDiff>)> = self.history.diffs().cloned().collect();
        let manifest = fresco_graph::manifest(&self.snapshot);
        store.commit(self.snapshot.version(), &entries, &[], manifest, &history, self.history.oldest())?;
        self.stored_version = self.snapshot.version();
        self.store_failed = false;
        self.failed_commits.clear();
        self.store = Some(store);
        self.unmark_rebuild();
        self.unpersisted = None;
        Ok(())
    }

    fn read_all(&self, events: Vec<FileEvent>) -> Vec<(String, Option<SourceRead>)> {
        let mut paths: BTreeMap<String, bool> = BTreeMap::new();
        for event in events {
            match event {
                FileEvent::Changed(p) => paths.insert(p, true),
                FileEvent::Removed(p) => paths.insert(p, false),
            };
        }
        let jobs: Vec<(String, bool)> = paths.into_iter().collect();
        let max = self.options.walk.max_file_size;
        let root = &self.root;
        let read = |(path, exists): &(String, bool)| {
            let read = if *exists { walk::read_source(root, path, max) } else { None };
            (path.clone(), read)
        };
        parallel_map(&jobs, self.options.threads, read)
    }

    /// Resolves `paths`, in parallel over database handles when there are enough of them.
    #[allow(clippy::type_complexity)]
    fn resolve_many(
        &self,
        paths: &[String],
    ) -> Vec<(String, Arc<crate::db::ResolvedFile>, u64, Arc<Vec<(String, u64)>>)> {
        let results = self.par_query(paths, |db, ws, file| {
            (file_graph(db, ws, file), file_interface(db, ws, file), file_interface_names(db, ws, file))
        });
        paths.iter().cloned().zip(results).map(|(p, (r, h, n))| (p, r, h, n)).collect()
    }

    /// Replaces what was derived from the files removed in this batch (their summaries and
    /// graphs) by what a file outside the workspace derives: salsa keeps a query's last value
    /// until the query runs again, and a removed file's are never asked for otherwise. Kept, they
    /// were a copy of every summary and graph of a renamed directory under its old name. The
    /// cost: a file that comes back is lowered again, where it used to reuse them; renaming
    /// django's `tests/` back and forth published each rename in about the same time either way,
    /// since its files' module names change and most files are resolved again regardless.
    fn forget_derived(&self, removed: &[String]) {
        for path in removed {
            if let Some(&file) = self.retired.get(path) {
                let _ = file_graph(&self.db, self.ws, file);
                let _ = file_interface(&self.db, self.ws, file);
                let _ = file_interface_names(&self.db, self.ws, file);
            }
        }
    }

    /// Runs a query for each path, on several database handles when there are enough paths.
    fn par_query<R: Send>(
        &self,
        paths: &[String],
        query: impl Fn(&Database, Workspace, SourceFile) -> R + Sync,
    ) -> Vec<R> {
        let files: Vec<SourceFile> = paths.iter().map(|p| self.inputs[p]).collect();
        let ws = self.ws;
        let threads = if files.len() < 16 { 1 } else { self.options.threads.max(1) };
        if threads == 1 {
            return files.iter().map(|f| query(&self.db, ws, *f)).collect();
        }
        parallel_map_with(&files, threads, || self.db.clone(), |db, f| query(db, ws, *f))
    }
}

/// Writes `.gitignore` (`*`) into the index directory, as pytest and mypy do for their caches:
/// an index committed with the repository is overwritten under a running daemon by the next
/// checkout, and blocks checkouts with its "local changes". Only into a directory that is
/// fresco's own: the default `.fresco`, or one this open created. A `--db` naming an existing
/// directory of the user's (the repository itself, say) is left alone: `*` there would hide
/// everything in it from git. Best effort: an index directory that cannot take the file works.
fn keep_out_of_version_control(db_dir: &Path, existed: bool) {
    let ours = !existed || db_dir.file_name().is_some_and(|n| n == ".fresco");
    let ignore = db_dir.join(".gitignore");
    if ours && !ignore.exists() {
        let _ = std::fs::write(&ignore, "# Written by fresco: its index is not part of the repository.\n*\n");
    }
}

/// The file in the index directory that holds why the store is being rebuilt, until the
/// rebuilt store holds a version (see [`Indexer::open_stored`]). Named so that no file of the
/// user's is taken for it in a `--db` directory of theirs.
pub const REBUILD_MARKER: &str = ".fresco-rebuilding";

/// What a marker starts with, so that a file fresco did not write is never read as one.
const REBUILD_MARKER_HEADER: &str = "fresco rebuild: ";

/// Why the store was being rebuilt by a run that was stopped before the rebuilt store held a
/// version, when one was.
pub fn interrupted_rebuild(db_dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(db_dir.join(REBUILD_MARKER)).ok()?;
    let cause = text.strip_prefix(REBUILD_MARKER_HEADER)?.trim();
    (!cause.is_empty()).then(|| cause.chars().take(2000).collect())
}

/// Writes down why the store is rebuilt, durably, before the old store is touched, unless an
/// earlier run's rebuild, stopped part way, already did: its cause is the one that counts (what
/// this open finds is most likely that rebuild's partial first write). Best effort: a disk that
/// refuses it loses only the warning's repetition.
fn mark_rebuild(db_dir: &Path, cause: &str, earlier: Option<&str>) {
    if earlier.is_some() {
        return;
    }
    let _ = write_durably(db_dir, REBUILD_MARKER, format!("{REBUILD_MARKER_HEADER}{cause}\n").as_bytes());
}

/// [`mark_rebuild`], and the warning to give (see [`rebuild_warning`]).
fn begin_rebuild(db_dir: &Path, cause: &str, earlier: Option<&str>) -> String {
    mark_rebuild(db_dir, cause, earlier);
    rebuild_warning(cause, "", earlier)
}

/// The warning of a rebuild: its cause, or the cause of an earlier rebuild stopped part way.
fn rebuild_warning(cause: &str, kept: &str, earlier: Option<&str>) -> String {
    match earlier {
        Some(earlier) => format!(
            "{earlier}{kept}; rebuilt from the files (the rebuild an earlier run began was stopped before it stored a \
             version)"
        ),
        None => format!("{cause}{kept}; rebuilt from the files"),
    }
}

/// Empties the input of a file removed from the tree. The input itself stays (see
/// `Indexer::retired`), but not its text: a file that comes back is read again anyway.
fn retire(db: &mut Database, file: SourceFile) {
    file.set_text(db).to(Arc::from(""));
    file.set_revision(db).to(fresco_graph::Revision::of(b""));
    file.set_skipped(db).to(None);
}

/// The stack of each indexing worker thread.
const WORKER_STACK: usize = 8 * 1024 * 1024;

/// Maps `f` over `items` on up to `threads` threads, keeping the order.
fn parallel_map<T: Sync, R: Send>(items: &[T], threads: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    parallel_map_with(items, threads, || (), |_, item| f(item))
}

/// Maps `f` over `items` on up to `threads` threads, each with its own state from `init` (a
/// database handle, say), keeping the order. Items run in parallel only when there are enough.
fn parallel_map_with<T: Sync, S: Send, R: Send>(
    items: &[T],
    threads: usize,
    mut init: impl FnMut() -> S,
    f: impl Fn(&S, &T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() < 16 {
        let state = init();
        return items.iter().map(|item| f(&state, item)).collect();
    }
    let next = AtomicUsize::new(0);
    let mut results: Vec<Option<R>> = std::iter::repeat_with(|| None).take(items.len()).collect();
    let work = |state: S| {
        let mut out = Vec::new();
        loop {
            let i = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(i) else { break };
            out.push((i, f(&state, item)));
        }
        out
    };
    std::thread::scope(|scope| {
        // The calling thread is one of the workers: with `threads` malloc arenas (see
        // `process::limit_malloc_arenas`) every worker then has one of its own, and the memory
        // the calling thread frees here is what it allocates from afterwards.
        let handles: Vec<_> = (1..threads)
            .filter_map(|_| {
                // States are made here, on the calling thread, and moved to the workers.
                let state = init();
                let work = &work;
                // The main thread's stack size, not a spawned thread's 2 MiB: lowering and
                // resolution recurse over nested code (bounded, see `lower::MAX_NESTING`). A
                // worker that cannot start leaves its share to the others.
                std::thread::Builder::new().stack_size(WORKER_STACK).spawn_scoped(scope, move || work(state)).ok()
            })
            .collect();
        let mut parts = vec![work(init())];
        parts.extend(handles.into_iter().filter_map(|h| h.join().ok()));
        for part in parts {
            for (i, r) in part {
                results[i] = Some(r);
            }
        }
    });
    // Items a panicked worker took are computed here (a bug would panic again, visibly).
    let state = init();
    results.into_iter().zip(items).map(|(r, item)| r.unwrap_or_else(|| f(&state, item))).collect()
}

/// Which files consulted each module (or `module\u{1}name` key) during resolution: the files to
/// re-resolve when that module's interface changes.
#[derive(Default)]
struct Dependents {
    // Paths are shared: a file registers under hundreds of keys (one string each was a tenth of
    // a second of a cold django index).
    files_of: FxHashMap<String, FxHashSet<Arc<str>>>,
}

impl Dependents {
    fn add(&mut self, path: &str, modules: &[String]) {
        let path: Arc<str> = Arc::from(path);
        for module in modules {
            match self.files_of.get_mut(module.as_str()) {
                Some(files) => {
                    files.insert(path.clone());
                }
                None => {
                    self.files_of.insert(module.clone(), FxHashSet::from_iter([path.clone()]));
                }
            }
        }
    }

    fn remove(&mut self, path: &str, modules: &[String]) {
        for module in modules {
            if let Some(files) = self.files_of.get_mut(module.as_str()) {
                files.remove(path);
                // A key nobody reads any more goes, set and all: a directory renamed leaves
                // every key its files registered under by their old module names.
                if files.is_empty() {
                    self.files_of.remove(module.as_str());
                }
            }
        }
    }

    fn of(&self, module: &str) -> impl Iterator<Item = &str> {
        self.files_of.get(module).into_iter().flatten().map(|p| &**p)
    }
}

/// Phase timings on stderr when `FRESCO_TRACE` is set (for profiling, not for output).
struct Trace {
    enabled: bool,
    last: std::cell::Cell<std::time::Instant>,
}

impl Trace {
    fn start() -> Trace {
        Trace { enabled: crate::trace_enabled(), last: std::cell::Cell::new(std::time::Instant::now()) }
    }
    fn mark(&self, phase: &str) {
        if self.enabled {
            let now = std::time::Instant::now();
            let rss = std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmRSS:"))
                        .map(|l| l.trim_start_matches("VmRSS:").trim().to_string())
                })
                .unwrap_or_default();
            eprintln!("fresco: {phase}: {:.1} ms (rss {rss})", (now - self.last.get()).as_secs_f64() * 1000.0);
            self.last.set(now);
        }
    }
}
