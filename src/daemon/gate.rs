//! The freshness gate: before a query reads a version, make sure every change made on disk
//! before it was asked is known (a cookie file the watcher must report), then wait for those
//! changes, refuse with the stale files, or answer marking them, as the query's mode says.
//! Files with a second hard link, whose writes through a link outside the root send no event,
//! are compared by stamp here.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fresco_graph::Snapshot;
use fresco_indexer::Indexer;
use fresco_indexer::watch::{self, Batch};
use serde_json::json;

use super::{Published, Shared};
use crate::protocol::{Freshness, ProtoError};

const COOKIE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long the gate waits for a cookie before it writes another (see `Shared::sync_with_disk`).
const COOKIE_RETRY: Duration = Duration::from_millis(500);

/// How often a query waiting at the gate looks whether it was cancelled.
const CANCEL_CHECK: Duration = Duration::from_millis(50);

fn is_cancelled(cancel: Option<&AtomicBool>) -> bool {
    cancel.is_some_and(|c| c.load(Ordering::Relaxed))
}

/// The error a cancelled query answers, wherever it stopped.
pub(super) fn cancelled() -> ProtoError {
    ProtoError::new("CANCELLED", "the query was cancelled")
}

impl Shared {
    /// Synchronises with the file system: when this returns, every change made before the call
    /// has been registered as pending by the watcher. Waits for the watcher up to `wait` (at
    /// least [`COOKIE_TIMEOUT`]): after an overflow of the kernel's event queue the watcher
    /// rescans the tree before it reports the cookie.
    fn sync_with_disk(&self, wait: Duration, cancel: Option<&AtomicBool>) -> Result<(), ProtoError> {
        let first = self.write_cookie()?;
        let mut names = vec![first.0];
        let mut paths = vec![first.1];
        let deadline = Instant::now() + wait.max(COOKIE_TIMEOUT);
        let mut next_cookie = Instant::now() + COOKIE_RETRY;
        let outcome = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.tracker.wait_cookie(&names, left.min(CANCEL_CHECK)) {
                break Ok(true);
            }
            if left <= CANCEL_CHECK {
                break Ok(false);
            }
            if is_cancelled(cancel) {
                break Err(cancelled());
            }
            // A cookie made while the kernel's event queue was full sent no event: the watcher
            // never reports it. Another one, made once the queue drained, is reported, and
            // seeing it says as much (it was made later).
            if Instant::now() >= next_cookie {
                next_cookie = Instant::now() + COOKIE_RETRY;
                if let Ok((name, path)) = self.write_cookie() {
                    names.push(name);
                    paths.push(path);
                }
            }
        };
        for path in &paths {
            let _ = fs::remove_file(path);
        }
        if outcome? {
            self.check_hard_links();
            Ok(())
        } else if self.root_replaced() {
            // The watches are on the directory that was there: nothing under the new one is
            // seen, so no query could be fresh again. Stop, as for a root moved away.
            eprintln!("{}", self.root_replaced_message());
            self.shutdown.store(true, Ordering::Relaxed);
            Err(ProtoError::new("SYNC_FAILED", self.root_replaced_message()))
        } else {
            Err(ProtoError::new(
                "SYNC_FAILED",
                "the file watcher did not report a cookie file in time; freshness cannot be guaranteed",
            ))
        }
    }

    /// Writes a new cookie file: in the index directory, else in the root (the index directory
    /// may have been deleted under the daemon; it is rewritten at the next commit). Returns the
    /// cookie's name and path.
    fn write_cookie(&self) -> Result<(String, PathBuf), ProtoError> {
        let n = self.cookie_counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}{}-{n}", watch::COOKIE_PREFIX, std::process::id());
        let path = self.cookie_dir.join(&name);
        if fs::write(&path, b"").is_ok() {
            return Ok((name, path));
        }
        let path = self.root.join(&name);
        fs::write(&path, b"").map_err(|e| {
            ProtoError::new("SYNC_FAILED", format!("cannot write a cookie file in {}: {e}", self.root.display()))
        })?;
        Ok((name, path))
    }

    /// Registers as changed every hard-linked file whose stamp on disk is not the one of its
    /// indexed version (and is not pending already): what the watcher could not see, as if it
    /// had. Usually no file has a second link, and this costs nothing.
    fn check_hard_links(&self) {
        let linked: Vec<String> = self.hard_linked.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect();
        if linked.is_empty() {
            return;
        }
        let snapshot = self.current().snapshot.clone();
        let mut batch = Batch::default();
        for rel in linked {
            let on_disk = fs::symlink_metadata(self.root.join(&rel)).ok().map(|m| fresco_indexer::walk::stamp_of(&m));
            let indexed = snapshot.file(&rel).map(|f| f.stamp);
            if on_disk != indexed && !self.tracker.is_stale(&rel) {
                let seq = self.tracker.note_path(rel.clone());
                batch.paths.push((rel, seq));
            }
        }
        if !batch.paths.is_empty() {
            let _ = self.changes.send(batch);
        }
    }

    /// The refusal for `files` not caught up with, with the indexer's last error when it has
    /// one: a full disk showed only as "not caught up".
    fn stale(&self, files: Vec<String>) -> ProtoError {
        let err = ProtoError::stale(files);
        match self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            Some(why) => {
                let message = format!("{}; the indexer's last error: {why}", err.message);
                ProtoError { message, ..err }.with("indexer_error", json!(why))
            }
            None => err,
        }
    }

    /// Whether the root's path now names another directory than the one the daemon watches
    /// (`rm -rf repo && git clone ... repo`).
    pub(super) fn root_replaced(&self) -> bool {
        directory_identity(&self.root).is_some_and(|now| now != self.root_identity)
    }

    pub(super) fn root_replaced_message(&self) -> String {
        format!(
            "fresco: the repository root {} was replaced by another directory; stopping (start `fresco serve` \
             again to serve the new one)",
            self.root.display()
        )
    }

    /// `pending` less the directories that cannot make anything stale: gone from the disk, with
    /// no indexed file under them. The watcher cannot tell what a vanished path was, so a
    /// temporary file renamed away (`sed -i` writes one) is registered as a directory to
    /// re-examine; listing it as stale, or refusing a strict query for it, would be noise.
    fn without_phantoms(&self, pending: Vec<String>, published: &Published) -> Vec<String> {
        pending
            .into_iter()
            .filter(|key| {
                !key.ends_with('/')
                    || self.root.join(key.trim_end_matches('/')).exists()
                    || published.snapshot.has_file_under(key)
            })
            .collect()
    }

    /// `pending` as the freshness gate counts it: without phantoms, and without the files whose
    /// content on disk is, byte for byte, what `published` indexed. An in-place write sends
    /// several events (truncate, write, close); the indexer may have read the final text on the
    /// first while the last is still pending, and a file written back as it was changed
    /// nothing: listing them refused `strict` queries the snapshot answered truly (9 % of the
    /// refusals in one review's run).
    pub(super) fn still_pending(&self, pending: Vec<String>, published: &Published) -> Vec<String> {
        self.split_pending(pending, published).0
    }

    /// `pending` without phantoms, split into the paths still pending and the files whose
    /// content `published` already holds (see [`Shared::still_pending`]).
    fn split_pending(&self, pending: Vec<String>, published: &Published) -> (Vec<String>, Vec<String>) {
        let pending = self.without_phantoms(pending, published);
        // Each check reads the file: a burst (a branch switch) is listed as it is.
        if pending.len() > MAX_CONTENT_CHECKS {
            return (pending, Vec::new());
        }
        let mut budget = MAX_CONTENT_CHECK_TOTAL;
        pending
            .into_iter()
            .partition(|key| key.ends_with('/') || !self.indexed_as_is(key, &published.snapshot, &mut budget))
    }

    /// Whether the file at `rel` is on disk exactly as `snapshot` indexed it: the same bytes (its
    /// revision is their hash), or absent from both. A skipped file, a huge one, or anything
    /// unreadable is not (the gate stays conservative).
    /// `budget`: the bytes the query may still read for such checks (a file past it is not read).
    fn indexed_as_is(&self, rel: &str, snapshot: &Snapshot, budget: &mut u64) -> bool {
        let path = self.root.join(rel);
        let meta = fs::symlink_metadata(&path);
        match snapshot.file(rel) {
            None => meta.is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound),
            Some(entry) => {
                let Ok(meta) = meta else { return false };
                if entry.graph.skipped.is_some() || !meta.is_file() || meta.len() > *budget {
                    return false;
                }
                *budget -= meta.len();
                fs::read(&path).is_ok_and(|bytes| fresco_graph::Revision::of(&bytes) == entry.graph.revision)
            }
        }
    }

    /// The freshness gate: the snapshot to answer from and the files to mark stale (with
    /// `allow`, also the files pending whose content the snapshot holds: not to be marked).
    /// A query cancelled while it waits (its client hung up, or sent `cancel`) stops waiting
    /// within [`CANCEL_CHECK`].
    pub(super) fn gate(
        &self,
        mode: Freshness,
        wait: Duration,
        cancel: Option<&AtomicBool>,
    ) -> Result<(Arc<Published>, Vec<String>, Vec<String>), ProtoError> {
        match mode {
            Freshness::Allow => {
                // Synchronise first, or a write made just before the query may not be
                // registered yet and its file's items would be served old and unmarked. Then
                // take what is pending BEFORE the version: a change applied in between is in
                // that version; one still pending is listed (and its items marked).
                self.sync_with_disk(wait, cancel)?;
                let (pending, rescan) = self.tracker.pending();
                let published = self.current();
                let (mut stale, indexed_as_is) = self.split_pending(pending, &published);
                if rescan {
                    stale.push("(full rescan)".into());
                }
                Ok((published, stale, indexed_as_is))
            }
            Freshness::Strict => {
                self.sync_with_disk(wait, cancel)?;
                // Only changes made before the query count; later ones may stay pending.
                let upto = self.tracker.watermark();
                let (pending, rescan) = self.tracker.pending_upto(upto);
                let pending = self.still_pending(pending, &self.current());
                if !pending.is_empty() || rescan {
                    let mut files = pending;
                    if rescan {
                        files.push("(full rescan)".into());
                    }
                    return Err(self.stale(files));
                }
                Ok((self.current(), Vec::new(), Vec::new()))
            }
            Freshness::Wait => {
                let asked = Instant::now();
                self.sync_with_disk(wait, cancel)?;
                // Wait for the changes made before the query, not for the tree to go quiet
                // (which, under continuous writes, it never does).
                let upto = self.tracker.watermark();
                let _ = self.flush.try_send(());
                let deadline = asked + wait;
                let applied = loop {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match self.tracker.wait_applied(upto, left.min(CANCEL_CHECK)) {
                        Ok(()) => break Ok(()),
                        Err(files) if left <= CANCEL_CHECK => break Err(files),
                        Err(_) if is_cancelled(cancel) => return Err(cancelled()),
                        Err(_) => {}
                    }
                };
                match applied {
                    Ok(()) => Ok((self.current(), Vec::new(), Vec::new())),
                    Err(files) => {
                        // Left only temporary files renamed away (see `without_phantoms`):
                        // every change the query must see is in.
                        let files = self.still_pending(files, &self.current());
                        if files.is_empty() {
                            Ok((self.current(), Vec::new(), Vec::new()))
                        } else {
                            Err(self.stale(files))
                        }
                    }
                }
            }
        }
    }
}

/// Brings the set of hard-linked files up to date with what a batch looked at: every path it
/// names, what it changed or removed, and for a directory or a rescan every file under it. A
/// link made while the daemon runs sends no event (Linux reports a link count change to watches
/// of the inode, not of its directory): the file joins the set when a batch next names it.
pub(super) fn refresh_hard_links(
    shared: &Shared,
    indexer: &Indexer,
    batch: &Batch,
    changed: &[String],
    removed: &[String],
) {
    let snapshot = indexer.snapshot();
    let mut looked_at: std::collections::BTreeSet<String> = changed.iter().chain(removed).cloned().collect();
    let directories: Vec<&str> = if batch.rescan.is_some() {
        vec![""]
    } else {
        batch.paths.iter().map(|(p, _)| p.as_str()).filter(|p| p.ends_with('/')).collect()
    };
    looked_at.extend(batch.paths.iter().map(|(p, _)| p).filter(|p| !p.ends_with('/')).cloned());
    if !directories.is_empty() {
        looked_at.extend(
            snapshot.files().map(|f| &f.graph.path).filter(|p| directories.iter().any(|d| p.starts_with(d))).cloned(),
        );
    }
    // Only indexed files: one the index left out has no stamp to compare.
    let linked_now =
        hard_linked_files(indexer.root(), looked_at.iter().map(String::as_str).filter(|p| snapshot.file(p).is_some()));
    let mut linked = shared.hard_linked.lock().unwrap_or_else(|p| p.into_inner());
    for rel in &looked_at {
        linked.remove(rel);
    }
    linked.extend(linked_now);
}

/// Those of `paths` (relative to `root`) whose file has more than one hard link.
pub(super) fn hard_linked_files<'p>(
    root: &Path,
    paths: impl Iterator<Item = &'p str>,
) -> std::collections::BTreeSet<String> {
    use std::os::unix::fs::MetadataExt;
    paths
        .filter(|rel| fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.is_file() && m.nlink() > 1))
        .map(str::to_string)
        .collect()
}

/// The device and inode of a directory.
pub(super) fn directory_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
}

/// At most this many pending files are read to tell whether the index already holds their
/// content (see `Shared::still_pending`), at most this many bytes in all per query (a few
/// milliseconds; the files a burst leaves pending are listed, not read).
const MAX_CONTENT_CHECKS: usize = 256;
const MAX_CONTENT_CHECK_TOTAL: u64 = 8 * 1024 * 1024;

/// Fails, saying why, when no cookie file can be written where [`Shared::sync_with_disk`] writes
/// them: in [`cookie_dir`], else in the root.
pub(super) fn check_cookies_writable(root: &Path, db: &Path) -> anyhow::Result<()> {
    // Not a cookie's name (the watcher takes those for cookies) nor a Python file's: ignored.
    let name = format!(".fresco-probe-{}", std::process::id());
    let mut failure = None;
    for dir in [cookie_dir(root, db), root.to_path_buf()] {
        let probe = dir.join(&name);
        match fs::write(&probe, b"") {
            Ok(()) => {
                let _ = fs::remove_file(&probe);
                return Ok(());
            }
            Err(e) => failure = Some(e),
        }
    }
    let e = failure.map(|e| e.to_string()).unwrap_or_default();
    anyhow::bail!(
        "cannot write in {} ({e}): a daemon writes small files there to know it has seen every change \
         before it answers; without one, `fresco query`, `status` and `export` answer in-process, from \
         the stored index or from the files indexed in memory",
        root.display()
    )
}

/// Where the freshness gate writes its cookie files: the index directory when it is inside the
/// watched root (the default `.fresco/`, whose `.gitignore` keeps them out of `git add -A`), else
/// the root itself. A cookie lives for a few milliseconds, but in the root a concurrent
/// `git add -A` saw it and failed ("unable to stat") or committed it.
pub(super) fn cookie_dir(root: &Path, db: &Path) -> PathBuf {
    let db = fs::canonicalize(db).unwrap_or_else(|_| db.to_path_buf());
    if db.starts_with(root) && db.is_dir() { db } else { root.to_path_buf() }
}

#[cfg(test)]
mod cookie_dir_tests {
    use super::*;

    #[test]
    fn cookies_go_to_an_index_directory_inside_the_root() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = fs::canonicalize(dir.path()).expect("canonical");
        let inside = root.join(".fresco");
        fs::create_dir(&inside).expect("mkdir");
        assert_eq!(cookie_dir(&root, &inside), inside);
        // An index elsewhere is not watched: the root it is.
        let other = tempfile::tempdir().expect("tempdir");
        assert_eq!(cookie_dir(&root, other.path()), root);
    }
}
