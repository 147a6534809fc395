//! The on-disk index: sled, one record per file, serialised with rkyv.
//!
//! Layout (one sled tree, so that a version is one atomic batch):
//! - `meta/format`: [`FORMAT_VERSION`] as little-endian u32. A store of another format is never read.
//! - `meta/version`: the last committed version, u64 little-endian.
//! - `file/<path>\0<piece>`: an 8-byte xxh3 checksum of the payload followed by the rkyv bytes
//!   of a [`FileRecord`] (graph, text, stamp), LZ4-compressed, cut into pieces of at most
//!   [`PIECE`] bytes (`piece` a u32, big-endian; see [`PIECE`] for why).
//! - `history/<version, u64 big-endian><piece>`: what that version changed ([`VersionDiff`],
//!   same layout), for the versions the indexer's history keeps (see [`HISTORY_MAX_CHANGES`]); written
//!   in the batch of the version it describes, so a restart answers `changes since V` for
//!   versions before it.
//!
//! A version is committed with a single `apply_batch` (all changed files and the version number
//! together) followed by a flush: after a crash at any point the store holds either the previous
//! version or the new one, never a mix. A record whose checksum does not match, or a store that
//! lost records, is reported as [`StoreError::Corrupt`]; a database sled cannot read back as
//! [`StoreError::Damaged`]; either way the caller rebuilds from the files.

use std::path::Path;
use std::sync::Arc;

use crate::history::{HISTORY_MAX_CHANGES, HISTORY_VERSIONS, VersionDiff, VersionLog};
use crate::model::{FileGraph, FileStamp, IndexDeps};
use crate::snapshot::{FileChange, FileEntry, Snapshot};

/// Bump whenever the record layout or the meaning of a field changes.
pub const FORMAT_VERSION: u32 = 12;

const KEY_FORMAT: &[u8] = b"meta/format";
const KEY_VERSION: &[u8] = b"meta/version";
const KEY_ANALYSIS: &[u8] = b"meta/analysis";
const KEY_MANIFEST: &[u8] = b"meta/manifest";
/// Records per write when the first version is written in chunks.
const FIRST_COMMIT_CHUNK: usize = 256;
const FILE_PREFIX: &[u8] = b"file/";
const HISTORY_PREFIX: &[u8] = b"history/";

/// Records are stored in pieces of at most this many bytes. sled 0.34 writes a tree node larger
/// than a quarter of its 512 KiB segment to a file of its own (a blob), and removes a replaced
/// blob only when the log segment that replaced it is sealed: a process that exits first (every
/// `fresco index`) leaves the old blob behind for good. Whole records made such nodes (a leaf
/// holds up to 17 items): django's index grew by 14 MB with every rewrite of all its files, 955
/// orphaned blob files after 16. Pieces of 4 KiB keep every node under the blob threshold.
const PIECE: usize = 4096;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    // sled's error is quoted in the message, not chained as a source (it would be printed
    // twice), and an I/O error as the system says it (sled shows its debug form).
    #[error("cannot open the index at {path}: {}", sled_text(.error))]
    Open { path: String, error: sled::Error },
    #[error("index I/O error: {}", sled_text(.0))]
    Io(sled::Error),
    #[error("the index was written by an incompatible format (found {found}, expected {expected})")]
    IncompatibleFormat { found: u32, expected: u32 },
    #[error("the index was built by a different analysis ({found:016x}, this build is {expected:016x})")]
    DifferentAnalysis { found: u64, expected: u64 },
    #[error("the index is corrupt: {0}")]
    Corrupt(String),
    /// The database itself cannot be read back (see [`damage`]): unlike [`StoreError::Corrupt`],
    /// which fresco's own checks find in readable data, this is worth keeping for a bug report.
    #[error("the index database is damaged: {0}")]
    Damaged(String),
    #[error("cannot serialise a record: {0}")]
    Serialise(String),
}

impl From<sled::Error> for StoreError {
    fn from(error: sled::Error) -> StoreError {
        StoreError::Io(error)
    }
}

/// A sled error as a person reads it: an I/O error as the system words it (`No space left on
/// device (os error 28)`), not in Rust's debug form.
fn sled_text(error: &sled::Error) -> String {
    match error {
        sled::Error::Io(e) => {
            let text = e.to_string();
            // sled passes some system errors on as their debug text inside another error
            // (`Os { code: 28, kind: StorageFull, message: "..." }`): say them as the system does.
            let code = text.strip_prefix("Os { code: ").and_then(|rest| {
                let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<i32>().ok()
            });
            match code {
                Some(code) => std::io::Error::from_raw_os_error(code).to_string(),
                None => text,
            }
        }
        other => other.to_string(),
    }
}

#[derive(rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
struct FileRecord {
    graph: FileGraph,
    text: String,
    stamp: FileStamp,
    deps: IndexDeps,
}

pub struct Store {
    db: sled::Db,
    tree: sled::Tree,
    /// A small file beside sled's recording the last committed version: if sled ever comes back
    /// with an older one (a damaged log it recovered by dropping data), the loss is detected.
    version_file: std::path::PathBuf,
}

/// Opens a sled database, waiting briefly for its file lock when another handle in this process
/// is still letting go of it: sled's flusher thread keeps a dropped database open for up to one
/// flush interval, so closing and reopening at once can fail to take the lock. A lock held by
/// another live process is reported after about two seconds, as before.
///
/// sled 0.34 panics, rather than returning `Corruption`, on some damaged logs (a few flipped bytes
/// in a store spanning several segments: `tried to serialize Uninitialized`, an index out of
/// bounds): such a panic is caught and reported as [`sled::Error::ReportableBug`], which
/// [`damage`] reads as damage, so the store is moved aside and rebuilt like any other.
pub fn open_sled(config: &sled::Config) -> sled::Result<sled::Db> {
    let mut attempts = 0;
    loop {
        match open_catching_panics(config) {
            // sled reports a held lock as an `Other` I/O error with this text.
            Err(sled::Error::Io(e)) if e.to_string().contains("could not acquire lock") && attempts < 40 => {
                attempts += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

thread_local! {
    /// Set while this thread opens a sled database: a panic there is an error to report, not a
    /// crash, so the panic hook stays quiet about it.
    static OPENING_SLED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `config.open()`, with a panic inside sled turned into an error.
fn open_catching_panics(config: &sled::Config) -> sled::Result<sled::Db> {
    static QUIET_HOOK: std::sync::Once = std::sync::Once::new();
    QUIET_HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !OPENING_SLED.with(std::cell::Cell::get) {
                previous(info);
            }
        }));
    });
    OPENING_SLED.with(|o| o.set(true));
    let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| config.open()));
    OPENING_SLED.with(|o| o.set(false));
    opened.unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        Err(sled::Error::ReportableBug(format!("{SLED_PANICKED}: {what}")))
    })
}

/// How [`open_catching_panics`] words a panic inside sled.
const SLED_PANICKED: &str = "sled panicked reading its own data";

impl Store {
    /// Opens (or creates) the store in `dir`. An empty store gets the current format stamp.
    /// `analysis` fingerprints the code that derived the stored graphs: a store derived by other
    /// code is reported as [`StoreError::DifferentAnalysis`] rather than served.
    pub fn open(dir: &Path, analysis: u64) -> Result<Store, StoreError> {
        let db =
            open_sled(&sled::Config::new().path(dir).cache_capacity(8 * 1024 * 1024)).map_err(
                |source| match damage(&source) {
                    Some(why) => StoreError::Damaged(why),
                    None => StoreError::Open { path: dir.display().to_string(), error: source },
                },
            )?;
        let tree = db.open_tree("fresco").map_err(read_error)?;
        let store = Store { db, tree, version_file: dir.join("committed-version") };
        match store.tree.get(KEY_FORMAT).map_err(read_error)? {
            None => {
                store.tree.insert(KEY_FORMAT, &FORMAT_VERSION.to_le_bytes())?;
            }
            Some(bytes) => {
                let found = u32::from_le_bytes(
                    bytes.as_ref().try_into().map_err(|_| StoreError::Corrupt("format stamp".into()))?,
                );
                if found != FORMAT_VERSION {
                    return Err(StoreError::IncompatibleFormat { found, expected: FORMAT_VERSION });
                }
            }
        }
        match store.tree.get(KEY_ANALYSIS).map_err(read_error)? {
            None => {
                store.tree.insert(KEY_ANALYSIS, &analysis.to_le_bytes())?;
            }
            Some(bytes) => {
                let found = u64::from_le_bytes(
                    bytes.as_ref().try_into().map_err(|_| StoreError::Corrupt("analysis stamp".into()))?,
                );
                if found != analysis {
                    return Err(StoreError::DifferentAnalysis { found, expected: analysis });
                }
            }
        }
        Ok(store)
    }

    /// Removes every record (used before a rebuild of an incompatible or corrupt store).
    pub fn clear(&self, analysis: u64) -> Result<(), StoreError> {
        self.tree.clear()?;
        let _ = std::fs::remove_file(&self.version_file);
        self.tree.insert(KEY_FORMAT, &FORMAT_VERSION.to_le_bytes())?;
        self.tree.insert(KEY_ANALYSIS, &analysis.to_le_bytes())?;
        self.db.flush()?;
        Ok(())
    }

    pub fn version(&self) -> Result<u64, StoreError> {
        match self.tree.get(KEY_VERSION).map_err(read_error)? {
            None => Ok(0),
            Some(bytes) => Ok(u64::from_le_bytes(
                bytes.as_ref().try_into().map_err(|_| StoreError::Corrupt("version number".into()))?,
            )),
        }
    }

    /// Reads the last committed version as a snapshot, verifying every record.
    pub fn load(&self) -> Result<Snapshot, StoreError> {
        let version = self.version()?;
        if let Ok(text) = std::fs::read_to_string(&self.version_file) {
            let committed: u64 =
                text.trim().parse().map_err(|_| StoreError::Corrupt("committed-version file".into()))?;
            if committed > version {
                return Err(StoreError::Corrupt(format!(
                    "version {committed} was committed but the store holds version {version}"
                )));
            }
        }
        if version == 0 {
            // Nothing was ever committed: records left by an interrupted first index (written
            // in chunks, see `commit`) are not a version.
            if self.tree.scan_prefix(FILE_PREFIX).next().is_some() {
                return Err(StoreError::Corrupt("an interrupted first index left partial records".into()));
            }
            return Ok(Snapshot::empty());
        }
        let mut changes = Vec::new();
        let mut decode_record = |base: &[u8], bytes: &[u8]| -> Result<(), StoreError> {
            let record = decode(bytes).map_err(|why| {
                let path = &base[FILE_PREFIX.len()..base.len() - 1];
                StoreError::Corrupt(format!("record {}: {why}", String::from_utf8_lossy(path)))
            })?;
            let entry = FileEntry::new(Arc::new(record.graph), Arc::from(record.text), record.stamp, record.deps);
            changes.push(FileChange::Upsert(Arc::new(entry)));
            Ok(())
        };
        // Pieces come in key order: a record's are adjacent, first to last.
        let mut current: Option<(Vec<u8>, Vec<u8>)> = None;
        for item in self.tree.scan_prefix(FILE_PREFIX) {
            let (key, value) = item.map_err(read_error)?;
            let (base, piece) = split_piece_key(&key).ok_or_else(|| StoreError::Corrupt("a record key".into()))?;
            match &mut current {
                Some((at, bytes)) if at.as_slice() == base => {
                    if piece as usize != bytes.len().div_ceil(PIECE) {
                        return Err(StoreError::Corrupt(format!("record {}: a missing piece", piece_path(base))));
                    }
                    bytes.extend_from_slice(&value);
                }
                _ => {
                    if let Some((at, bytes)) = current.take() {
                        decode_record(&at, &bytes)?;
                    }
                    if piece != 0 {
                        return Err(StoreError::Corrupt(format!(
                            "record {}: its first piece is missing",
                            piece_path(base)
                        )));
                    }
                    current = Some((base.to_vec(), value.to_vec()));
                }
            }
        }
        if let Some((at, bytes)) = current.take() {
            decode_record(&at, &bytes)?;
        }
        let snapshot = Snapshot::empty().apply_as(version, changes);
        // A store that lost records (a damaged or truncated log that sled recovered from by
        // dropping data) still opens; the manifest tells.
        if let Some(bytes) = self.tree.get(KEY_MANIFEST).map_err(read_error)? {
            let expected = decode_manifest(&bytes).ok_or_else(|| StoreError::Corrupt("manifest".into()))?;
            let found = manifest(&snapshot);
            if expected != found {
                let what = if found.0 == expected.0 {
                    format!("its {} file records are not the files and revisions its manifest lists", found.0)
                } else {
                    format!("the store holds {} file records, its manifest says {}", found.0, expected.0)
                };
                return Err(StoreError::Corrupt(what));
            }
        }
        Ok(snapshot)
    }

    /// The history of the versions up to `version` that the store holds: the longest unbroken
    /// chain of diffs (each from its `previous`) ending at `version`. A record that does not read back
    /// ends the run there (the history is a convenience: losing part of it costs a client a full
    /// refresh, never a wrong answer).
    pub fn load_history(&self, version: u64) -> Result<VersionLog, StoreError> {
        let mut run: Vec<(u64, Arc<VersionDiff>)> = Vec::new();
        let mut changes = 0;
        // Newest first; a version's pieces come last to first.
        let mut pieces: Vec<sled::IVec> = Vec::new();
        let mut keys = self.tree.scan_prefix(HISTORY_PREFIX).rev().peekable();
        while let Some(item) = keys.next() {
            let (key, value) = item.map_err(read_error)?;
            let Some((at, piece)) = split_history_key(&key) else { break };
            pieces.push(value);
            let next_is_same = match keys.peek() {
                Some(Ok((next, _))) => split_history_key(next).is_some_and(|(v, _)| v == at),
                _ => false,
            };
            if next_is_same {
                continue;
            }
            let bytes: Vec<u8> = pieces.drain(..).rev().flat_map(|p| p.to_vec()).collect();
            // Each diff says which version it goes from: the run follows that chain down.
            let expected = run.last().map_or(version, |(_, d)| d.previous);
            if at > expected {
                continue;
            }
            if at < expected || piece != 0 {
                break;
            }
            let Ok(diff) = decode_diff(&bytes) else { break };
            changes += diff.len();
            if changes > HISTORY_MAX_CHANGES {
                break;
            }
            let first = diff.previous == 0;
            run.push((at, Arc::new(diff)));
            if run.len() >= HISTORY_VERSIONS || first {
                break;
            }
        }
        let base = run.last().map_or(version, |(_, d)| d.previous);
        let mut log = VersionLog::new(base, HISTORY_VERSIONS);
        for (at, diff) in run.into_iter().rev() {
            log.push(at, diff);
        }
        Ok(log)
    }

    /// Atomically commits `version`: the given files are written or removed together with the
    /// version number, the manifest of the resulting snapshot (see [`manifest`]) and the diffs
    /// of the versions published since the last commit (`history`), then flushed to disk.
    /// History up to `history_since` (the oldest version of the caller's [`VersionLog`]) is
    /// dropped in the same batch.
    pub fn commit(
        &self,
        version: u64,
        upserts: &[Arc<FileEntry>],
        removals: &[String],
        manifest: (u64, u64),
        history: &[(u64, Arc<VersionDiff>)],
        history_since: u64,
    ) -> Result<(), StoreError> {
        let mut batch = sled::Batch::default();
        if self.version()? == 0 && upserts.len() > FIRST_COMMIT_CHUNK {
            // The first version of a large repository: write the records in chunks so that the
            // encoded records of the whole repository are never in memory at once. Until the
            // final batch below writes the version number, the store still holds "no version"
            // (and `load` refuses partial records), so atomicity is kept.
            for chunk in upserts.chunks(FIRST_COMMIT_CHUNK) {
                let mut part = sled::Batch::default();
                for (entry, record) in chunk.iter().zip(encode_all(chunk)) {
                    self.put_pieces(&mut part, &file_key(&entry.graph.path), &record?)?;
                }
                self.tree.apply_batch(part)?;
                // Flushing per chunk lets sled write its buffers out instead of holding the
                // whole first version in memory.
                self.db.flush()?;
            }
        } else {
            for (entry, record) in upserts.iter().zip(encode_all(upserts)) {
                self.put_pieces(&mut batch, &file_key(&entry.graph.path), &record?)?;
            }
        }
        for path in removals {
            self.remove_pieces(&mut batch, &file_key(path))?;
        }
        for (at, diff) in history.iter().filter(|(at, _)| *at > history_since) {
            self.put_pieces(&mut batch, &history_key(*at), &encode_diff(diff)?)?;
        }
        for item in self.tree.range(history_key(0)..history_key(history_since.saturating_add(1))) {
            let (key, _) = item.map_err(read_error)?;
            batch.remove(key);
        }
        batch.insert(KEY_VERSION, &version.to_le_bytes());
        let mut m = manifest.0.to_le_bytes().to_vec();
        m.extend_from_slice(&manifest.1.to_le_bytes());
        batch.insert(KEY_MANIFEST, m);
        self.tree.apply_batch(batch)?;
        self.db.flush()?;
        // After the flush: a crash in between leaves the file behind sled, which is harmless.
        let tmp = self.version_file.with_extension("tmp");
        if std::fs::write(&tmp, version.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, &self.version_file);
        }
        Ok(())
    }

    /// Writes `bytes` (a sealed record, never empty) as the pieces of the record keyed `base`,
    /// removing pieces a longer earlier record left beyond them.
    fn put_pieces(&self, batch: &mut sled::Batch, base: &[u8], bytes: &[u8]) -> Result<(), StoreError> {
        let mut count = 0;
        for piece in bytes.chunks(PIECE) {
            batch.insert(piece_key(base, count), piece);
            count += 1;
        }
        for key in self.tree.range(piece_key(base, count)..=piece_key(base, u32::MAX)).keys() {
            batch.remove(key.map_err(read_error)?);
        }
        Ok(())
    }

    fn remove_pieces(&self, batch: &mut sled::Batch, base: &[u8]) -> Result<(), StoreError> {
        for key in self.tree.scan_prefix(base).keys() {
            batch.remove(key.map_err(read_error)?);
        }
        Ok(())
    }

    pub fn size_on_disk(&self) -> Result<u64, StoreError> {
        Ok(self.db.size_on_disk()?)
    }
}

/// The version the store in `dir` last committed, by the marker file beside sled (0 when there
/// is none), readable whatever state or format the database itself is in.
pub fn last_committed(dir: &Path) -> u64 {
    std::fs::read_to_string(dir.join("committed-version")).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0)
}

/// Whether a sled error means the database on disk is damaged rather than unreachable: sled
/// reports a log or page it cannot read back as `Corruption`, and a page stored out of line
/// whose file is gone as an I/O `NotFound`. sled 0.34 has been seen (about once in a few
/// hundred SIGKILLs during an update, never reproduced on demand) to leave a store it then
/// refuses to open this way.
fn damage(error: &sled::Error) -> Option<String> {
    match error {
        sled::Error::Corruption { at, .. } => {
            // sled's own text is its debug form (`at file offset Some(Inline(918782)) backtrace ()`).
            let place = format!("{at:?}");
            let offset: String = place.chars().filter(char::is_ascii_digit).collect();
            Some(match (place.starts_with("Some(Inline("), offset.is_empty()) {
                (true, false) => {
                    format!("sled cannot read back its own data: a corrupt record at byte {offset} of its log")
                }
                _ if place.starts_with("Some(Blob(") => {
                    "sled cannot read back its own data: a corrupt record in one of its blob files".to_string()
                }
                _ => "sled cannot read back its own data: a corrupt record".to_string(),
            })
        }
        sled::Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Some(format!("part of sled's data is missing: {error}"))
        }
        // A `conf` file sled cannot parse reads as a database of sled before 0.29, which
        // fresco never used: the file is damaged (the index was unusable, never rebuilt).
        sled::Error::Unsupported(_) => Some(format!("sled cannot read its configuration: {error}")),
        sled::Error::ReportableBug(what) if what.starts_with(SLED_PANICKED) => Some(what.clone()),
        _ => None,
    }
}

/// A sled error met while reading the store: damage is [`StoreError::Damaged`] (the caller
/// rebuilds from the files), anything else stays an I/O error.
fn read_error(error: sled::Error) -> StoreError {
    match damage(&error) {
        Some(why) => StoreError::Damaged(why),
        None => StoreError::Io(error),
    }
}

/// What a snapshot's files are: their count and an order-independent hash of (path, revision).
pub fn manifest(snapshot: &Snapshot) -> (u64, u64) {
    snapshot.manifest()
}

fn decode_manifest(bytes: &[u8]) -> Option<(u64, u64)> {
    let count = u64::from_le_bytes(bytes.get(0..8)?.try_into().ok()?);
    let hash = u64::from_le_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((count, hash))
}

/// Encodes records on two threads when there are many (a cold index writes thousands).
fn encode_all(entries: &[Arc<FileEntry>]) -> Vec<Result<Vec<u8>, StoreError>> {
    if entries.len() < 64 {
        return entries.iter().map(|e| encode(e)).collect();
    }
    let (left, right) = entries.split_at(entries.len() / 2);
    std::thread::scope(|scope| {
        let handle = scope.spawn(|| right.iter().map(|e| encode(e)).collect::<Vec<_>>());
        let mut out: Vec<_> = left.iter().map(|e| encode(e)).collect();
        match handle.join() {
            Ok(rest) => out.extend(rest),
            Err(_) => out.extend(right.iter().map(|e| encode(e))),
        }
        out
    })
}

/// The base of a version's history record (its pieces follow).
fn history_key(version: u64) -> Vec<u8> {
    let mut key = HISTORY_PREFIX.to_vec();
    key.extend_from_slice(&version.to_be_bytes());
    key
}

/// The base of a file's record: the path then a NUL, which no path contains, so that the pieces
/// of `a.py` are not a prefix of those of `a.py.orig`.
fn file_key(path: &str) -> Vec<u8> {
    let mut key = FILE_PREFIX.to_vec();
    key.extend_from_slice(path.as_bytes());
    key.push(0);
    key
}

fn piece_key(base: &[u8], piece: u32) -> Vec<u8> {
    let mut key = base.to_vec();
    key.extend_from_slice(&piece.to_be_bytes());
    key
}

/// A file record's key as (base, piece).
fn split_piece_key(key: &[u8]) -> Option<(&[u8], u32)> {
    let (base, piece) = key.split_at_checked(key.len().checked_sub(4)?)?;
    if base.last() != Some(&0) {
        return None;
    }
    Some((base, u32::from_be_bytes(piece.try_into().ok()?)))
}

/// A history record's key as (version, piece).
fn split_history_key(key: &[u8]) -> Option<(u64, u32)> {
    let rest = key.strip_prefix(HISTORY_PREFIX)?;
    let version = u64::from_be_bytes(rest.get(..8)?.try_into().ok()?);
    let piece = u32::from_be_bytes(rest.get(8..)?.try_into().ok()?);
    Some((version, piece))
}

/// The path in a file record's base, for messages.
fn piece_path(base: &[u8]) -> String {
    String::from_utf8_lossy(&base[FILE_PREFIX.len()..base.len().saturating_sub(1)]).into_owned()
}

/// Record layout: xxh3 checksum of the rest (8 bytes), then an LZ4 block (size-prefixed) of the
/// rkyv bytes. Compression keeps the store a small multiple of the source size; decompression
/// costs well under a millisecond per file.
fn encode(entry: &FileEntry) -> Result<Vec<u8>, StoreError> {
    let record = FileRecord {
        graph: (*entry.graph).clone(),
        text: entry.text.to_string(),
        stamp: entry.stamp,
        deps: entry.deps.clone(),
    };
    let payload = rkyv::to_bytes::<rkyv::rancor::Error>(&record).map_err(|e| StoreError::Serialise(e.to_string()))?;
    Ok(seal(&payload))
}

fn encode_diff(diff: &VersionDiff) -> Result<Vec<u8>, StoreError> {
    let payload = rkyv::to_bytes::<rkyv::rancor::Error>(diff).map_err(|e| StoreError::Serialise(e.to_string()))?;
    Ok(seal(&payload))
}

/// Compresses and checksums rkyv bytes (the layout above).
fn seal(payload: &[u8]) -> Vec<u8> {
    let compressed = lz4_flex::compress_prepend_size(payload);
    let mut out = Vec::with_capacity(compressed.len() + 8);
    out.extend_from_slice(&xxhash_rust::xxh3::xxh3_64(&compressed).to_le_bytes());
    out.extend_from_slice(&compressed);
    out
}

fn decode(bytes: &[u8]) -> Result<FileRecord, String> {
    let payload = unseal(bytes)?;
    rkyv::from_bytes::<FileRecord, rkyv::rancor::Error>(&payload).map_err(|e| e.to_string())
}

fn decode_diff(bytes: &[u8]) -> Result<VersionDiff, String> {
    let payload = unseal(bytes)?;
    rkyv::from_bytes::<VersionDiff, rkyv::rancor::Error>(&payload).map_err(|e| e.to_string())
}

/// Checks and decompresses what [`seal`] wrote.
fn unseal(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if bytes.len() < 8 {
        return Err("truncated".into());
    }
    let (sum, payload) = bytes.split_at(8);
    let expected = u64::from_le_bytes(sum.try_into().map_err(|_| "truncated checksum")?);
    if xxhash_rust::xxh3::xxh3_64(payload) != expected {
        return Err("checksum mismatch".into());
    }
    lz4_flex::decompress_size_prepended(payload).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Revision, Unit, UnitKind};

    fn entry(path: &str, text: &str) -> Arc<FileEntry> {
        let graph = FileGraph {
            path: path.into(),
            revision: Revision::of(text.as_bytes()),
            module: path.trim_end_matches(".py").into(),
            parse_errors: 0,
            first_parse_error: None,
            skipped: None,
            units: vec![Unit {
                id: "m".into(),
                name: "m".into(),
                kind: UnitKind::Module,
                start_line: 1,
                end_line: 1,
                start_byte: 0,
                end_byte: text.len() as u32,
                signature: None,
                docstring: Some("doc".into()),
            }],
            edges: vec![],
            unresolved: vec![],
            arg_flows: vec![],
            param_calls: vec![],
            resolution_cut: false,
        };
        Arc::new(FileEntry::new(
            Arc::new(graph),
            Arc::from(text),
            FileStamp { size: text.len() as u64, mtime_ns: 7, ctime_ns: 8, inode: 9 },
            IndexDeps { modules: vec!["os".into()], interface: 9, interface_names: vec![("x".into(), 1)] },
        ))
    }

    #[test]
    fn sled_io_errors_read_as_the_system_words_them() {
        let plain = sled::Error::Io(std::io::Error::from_raw_os_error(28));
        assert_eq!(sled_text(&plain), "No space left on device (os error 28)");
        let debug_text = format!("{:?}", std::io::Error::from_raw_os_error(28));
        let wrapped = sled::Error::Io(std::io::Error::other(debug_text));
        assert_eq!(sled_text(&wrapped), "No space left on device (os error 28)");
        assert_eq!(StoreError::from(wrapped).to_string(), "index I/O error: No space left on device (os error 28)");
    }

    #[test]
    fn sled_corruption_is_worded_for_people_not_in_sleds_debug_form() {
        let text = damage(&sled::Error::Corruption { at: None, bt: () }).expect("damage");
        assert_eq!(text, "sled cannot read back its own data: a corrupt record");
    }

    #[test]
    fn round_trips_and_detects_corruption() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path(), 1).unwrap();
            let (a, b) = (entry("a.py", "x = 1\n"), entry("b.py", ""));
            let both = Snapshot::empty().apply([FileChange::Upsert(a.clone()), FileChange::Upsert(b.clone())]);
            store.commit(3, &[a, b], &[], manifest(&both), &[], 0).unwrap();
            let one = both.apply([FileChange::Remove("b.py".into())]);
            store.commit(4, &[], &["b.py".to_string()], manifest(&one), &[], 0).unwrap();
        }
        let store = Store::open(dir.path(), 1).unwrap();
        let snap = store.load().unwrap();
        assert_eq!(snap.version(), 4);
        assert_eq!(snap.file_count(), 1);
        assert_eq!(&*snap.file("a.py").unwrap().text, "x = 1\n");

        // Flip one payload byte: the checksum catches it.
        let mut raw = store.tree.get(piece_key(&file_key("a.py"), 0)).unwrap().unwrap().to_vec();
        let last = raw.len() - 1;
        raw[last] ^= 0xff;
        store.tree.insert(piece_key(&file_key("a.py"), 0), raw).unwrap();
        assert!(matches!(store.load(), Err(StoreError::Corrupt(_))));
    }

    #[test]
    fn edges_read_back_share_their_ids_as_they_were_written() {
        use crate::model::{Edge, EdgeKind};
        let dir = tempfile::tempdir().unwrap();
        let (caller, callee): (Arc<str>, Arc<str>) = (Arc::from("m.caller"), Arc::from("other.callee"));
        let mut graph = (*entry("m.py", "").graph).clone();
        graph.edges = (1..=3)
            .map(|line| Edge { src: caller.clone(), dst: callee.clone(), kind: EdgeKind::Calls, line: Some(line) })
            .collect();
        let written =
            Arc::new(FileEntry::new(Arc::new(graph), Arc::from(""), FileStamp::default(), IndexDeps::default()));
        {
            let store = Store::open(dir.path(), 1).unwrap();
            let snap = Snapshot::empty().apply([FileChange::Upsert(written.clone())]);
            store.commit(1, &[written], &[], manifest(&snap), &[], 0).unwrap();
        }
        let snap = Store::open(dir.path(), 1).unwrap().load().unwrap();
        let edges = &snap.file("m.py").unwrap().graph.edges;
        assert_eq!(edges.len(), 3);
        assert_eq!(&*edges[2].src, "m.caller");
        assert_eq!(&*edges[2].dst, "other.callee");
        // One allocation per id after a restart too, not one per edge end.
        assert!(edges.iter().all(|e| Arc::ptr_eq(&e.src, &edges[0].src) && Arc::ptr_eq(&e.dst, &edges[0].dst)));
    }

    #[test]
    fn refuses_an_incompatible_format() {
        let dir = tempfile::tempdir().unwrap();
        {
            let store = Store::open(dir.path(), 1).unwrap();
            store.tree.insert(KEY_FORMAT, &999u32.to_le_bytes()).unwrap();
            store.db.flush().unwrap();
        }
        assert!(matches!(Store::open(dir.path(), 1), Err(StoreError::IncompatibleFormat { found: 999, .. })));
    }

    #[test]
    fn records_are_stored_in_pieces_that_shrink_and_go_with_them() {
        let dir = tempfile::tempdir().unwrap();
        let pieces = |store: &Store, path: &str| store.tree.scan_prefix(file_key(path)).count();
        // Text that LZ4 cannot shrink much: about 30 KB, several pieces.
        let big: String = (0..3000u32).map(|i| format!("{:08x}\n", i.wrapping_mul(2654435761))).collect();
        let (a, a_orig) = (entry("a.py", &big), entry("a.py.orig", "y = 2\n"));
        let snap = Snapshot::empty().apply([FileChange::Upsert(a.clone()), FileChange::Upsert(a_orig.clone())]);
        let store = Store::open(dir.path(), 1).unwrap();
        store.commit(1, &[a.clone(), a_orig.clone()], &[], manifest(&snap), &[], 1).unwrap();
        assert!(pieces(&store, "a.py") > 3, "{}", pieces(&store, "a.py"));
        assert_eq!(pieces(&store, "a.py.orig"), 1);
        let loaded = store.load().unwrap();
        assert_eq!(&*loaded.file("a.py").unwrap().text, big.as_str());
        assert_eq!(&*loaded.file("a.py.orig").unwrap().text, "y = 2\n");

        // Shrunk: the pieces beyond the new end go; removed: all of them, and only them.
        let small = entry("a.py", "x = 1\n");
        let snap = snap.apply([FileChange::Upsert(small.clone())]);
        store.commit(2, &[small], &[], manifest(&snap), &[], 1).unwrap();
        assert_eq!(pieces(&store, "a.py"), 1);
        assert_eq!(&*store.load().unwrap().file("a.py").unwrap().text, "x = 1\n");
        let snap = snap.apply([FileChange::Remove("a.py".into())]);
        store.commit(3, &[], &["a.py".to_string()], manifest(&snap), &[], 1).unwrap();
        assert_eq!(pieces(&store, "a.py"), 0);
        assert_eq!(pieces(&store, "a.py.orig"), 1);

        // A missing piece is corruption, not a shorter record.
        let snap = snap.apply([FileChange::Upsert(a.clone())]);
        store.commit(4, &[a], &[], manifest(&snap), &[], 1).unwrap();
        store.tree.remove(piece_key(&file_key("a.py"), 1)).unwrap();
        assert!(matches!(store.load(), Err(StoreError::Corrupt(why)) if why.contains("a.py")));
    }

    #[test]
    fn history_is_read_back_up_to_the_first_gap_and_old_versions_are_dropped() {
        use crate::history::{Change, NetChange, UnitChange};
        let dir = tempfile::tempdir().unwrap();
        let diff = |previous: u64, id: &str| {
            let units = vec![UnitChange { id: id.to_string(), before: None, after: Some(1), place: None }];
            Arc::new(VersionDiff { previous, units, ..VersionDiff::default() })
        };
        let a = entry("a.py", "x = 1\n");
        let snap = Snapshot::empty().apply([FileChange::Upsert(a.clone())]);
        {
            let store = Store::open(dir.path(), 1).unwrap();
            store.commit(1, std::slice::from_ref(&a), &[], manifest(&snap), &[], 1).unwrap();
            store.commit(2, &[], &[], manifest(&snap), &[(2, diff(1, "b"))], 1).unwrap();
            // Two versions in one commit (the daemon persists after answering).
            store.commit(4, &[], &[], manifest(&snap), &[(3, diff(2, "c")), (4, diff(3, "d"))], 1).unwrap();
        }
        let store = Store::open(dir.path(), 1).unwrap();
        let log = store.load_history(4).unwrap();
        assert_eq!((log.oldest(), log.newest()), (1, 4));
        let added = |log: &VersionLog, since| -> Vec<String> {
            log.changes_since(since)
                .unwrap()
                .into_iter()
                .filter_map(|c| match c {
                    NetChange::Unit(id, Change::Added) => Some(id),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(added(&log, 1), vec!["b", "c", "d"]);

        // A version whose diff is missing (not written, or unreadable) ends what can be answered.
        store.commit(6, &[], &[], manifest(&snap), &[(6, diff(5, "f"))], 1).unwrap();
        let log = store.load_history(6).unwrap();
        assert_eq!((log.oldest(), log.newest()), (5, 6));
        assert!(log.changes_since(4).is_err(), "version 5 is unknown: a full refresh, not a wrong answer");
        store.tree.insert(piece_key(&history_key(7), 0), b"garbage".to_vec()).unwrap();
        store.tree.insert(KEY_VERSION, &7u64.to_le_bytes()).unwrap();
        assert_eq!(store.load_history(7).unwrap().oldest(), 7);

        // What the caller's log no longer holds is dropped in the batch that commits.
        store.commit(8, &[], &[], manifest(&snap), &[(8, diff(7, "h"))], 3).unwrap();
        let kept: Vec<u64> = store
            .tree
            .scan_prefix(HISTORY_PREFIX)
            .keys()
            .filter_map(|k| split_history_key(&k.unwrap()).map(|(v, _)| v))
            .collect();
        assert_eq!(kept, vec![4, 6, 7, 8]);
    }
}

#[cfg(test)]
mod reopen_tests {
    use super::*;

    #[test]
    fn a_database_sled_cannot_read_is_damaged_not_an_open_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        drop(Store::open(dir.path(), 1).expect("create"));
        let conf = dir.path().join("conf");
        let mut bytes = std::fs::read(&conf).expect("sled's conf file");
        bytes[5] ^= 0x5a;
        std::fs::write(&conf, bytes).expect("write");
        assert!(matches!(Store::open(dir.path(), 1), Err(StoreError::Damaged(_))));
        // Garbage sled cannot parse at all reads as a pre-0.29 database: damaged too.
        std::fs::write(&conf, b"\xff\xfegarbage").expect("write");
        assert!(matches!(Store::open(dir.path(), 1), Err(StoreError::Damaged(_))));
    }

    #[test]
    fn a_panic_inside_sled_on_a_damaged_log_is_reported_as_damage() {
        // A store over several segments, bytes flipped at spread offsets: sled 0.34 panics on
        // some of them (`tried to serialize Uninitialized`), returns `Corruption` on others.
        let dir = tempfile::tempdir().expect("tempdir");
        let config = sled::Config::new().path(dir.path());
        {
            let db = open_sled(&config).expect("create");
            for i in 0u32..40_000 {
                let value: Vec<u8> = (0..200u32).map(|j| (i.wrapping_mul(31) ^ j) as u8).collect();
                db.insert(i.to_be_bytes(), value).expect("insert");
            }
            db.flush().expect("flush");
        }
        let log = dir.path().join("db");
        let good = std::fs::read(&log).expect("sled's log");
        let mut panicked = 0;
        for percent in (5..100).step_by(3) {
            let mut bytes = good.clone();
            let at = bytes.len() * percent / 100;
            bytes[at..at + 4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
            std::fs::write(&log, &bytes).expect("write");
            if let Err(sled::Error::ReportableBug(what)) = open_sled(&config) {
                assert!(what.starts_with(SLED_PANICKED), "{what}");
                assert!(damage(&sled::Error::ReportableBug(what)).is_some());
                panicked += 1;
            }
        }
        assert!(panicked > 0, "no flip made sled panic: the test no longer reaches the caught panic");
    }

    #[test]
    fn a_database_reopened_while_its_last_handle_lets_go_opens() {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = sled::Config::new().path(dir.path());
        let first = open_sled(&config).expect("first open");
        first.insert(b"k", b"v").expect("insert");
        // Still held: a second open waits, and succeeds once the first handle is gone.
        let closer = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(200));
            drop(first);
        });
        let second = open_sled(&config).expect("reopened after the first handle was dropped");
        closer.join().expect("closer thread");
        assert_eq!(second.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
    }
}
