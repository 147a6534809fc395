//! `fresco serve`: the daemon.
//!
//! Threads: the watcher (notify, debounced, in the indexer crate) sends batches over a crossbeam
//! channel to the single indexer thread, which applies them and publishes each new version by
//! swapping an `Arc` (readers clone it and never hold a lock while they work); the main thread
//! accepts connections; each connection reads requests on its own thread and runs queries on
//! worker threads so that a `cancel` can arrive while a query runs.

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crossbeam::channel::{Receiver, Sender};
use fresco_graph::{Snapshot, VersionLog};
use fresco_indexer::watch::{self, Batch, Debounce, Tracker};
use fresco_indexer::{Indexer, IndexerOptions};
use serde_json::{Value, json};

use crate::paths::daemon_paths;
use crate::protocol::{self, Freshness, ProtoError};
use fresco_indexer::lanes::{LaneUpdate, RetrievalLanes};

/// How long a stopping daemon waits for the queries in flight to be answered.
const SHUTDOWN_QUERY_WAIT: Duration = Duration::from_secs(5);
/// How long a stopping daemon waits for the indexer to write what it published.
const SHUTDOWN_PERSIST_WAIT: Duration = Duration::from_secs(30);

const MAX_CONNECTIONS: usize = 64;
/// `sun_path`'s size on Linux, its terminating NUL included.
const MAX_SOCKET_PATH_BYTES: usize = 108;
const MAX_QUERIES_PER_CONNECTION: usize = 8;
/// Of a connection's queries, how many may be computing or holding an answer not yet written.
/// The others wait before they start, holding nothing: a client that pipelines large queries
/// and reads slowly (or never) keeps at most this many answers in the daemon's memory. Six
/// clients each sending 8 `find "*" limit 100000` (4 MB answers) and never reading: 250 MB
/// each with every answer held as a tree, 64 MB each with 8 held as text, 11 MB each with 2 (RSS
/// 217 → 602 MB and 210 → 322 MB for six such clients on CPython's library).
const ANSWERS_IN_HAND_PER_CONNECTION: usize = 2;
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long writing an answer may go without progress on a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// The socket's write timeout: how often a blocked write looks at the progress it made.
const WRITE_SLICE: Duration = Duration::from_secs(5);
const COOKIE_TIMEOUT: Duration = Duration::from_secs(2);

/// One published version, as readers see it.
struct Published {
    snapshot: Snapshot,
    history: Arc<VersionLog>,
}

struct Shared {
    root: PathBuf,
    /// Indexed files with more than one hard link: a write through a link outside the root
    /// reaches the file without an event the watcher sees, so the freshness gate compares
    /// their stamps itself ([`Shared::check_hard_links`]).
    hard_linked: Mutex<std::collections::BTreeSet<String>>,
    /// Where the freshness gate sends the changes it finds itself (the watcher's channel).
    changes: Sender<Batch>,
    /// Where the freshness gate writes its cookie files (see [`cookie_dir`]).
    cookie_dir: PathBuf,
    /// What the last walk could not index (shown by `status` with the skipped files).
    walk_issues: Mutex<Vec<fresco_indexer::WalkIssue>>,
    current: Mutex<Arc<Published>>,
    tracker: Arc<Tracker>,
    flush: Sender<()>,
    started: Instant,
    shutdown: AtomicBool,
    /// Queries running or writing their answers, over all connections: a stopping daemon
    /// waits for them (bounded), so that a query in flight gets its answer.
    in_flight: AtomicUsize,
    /// Bytes of answer lines computed and not yet written (see [`UNWRITTEN_ANSWER_BYTES`]).
    unwritten_answer_bytes: AtomicUsize,
    /// The root directory's device and inode when the daemon started.
    root_identity: (u64, u64),
    /// Why the indexer thread gave up, when it did: the daemon then exits with an error.
    indexer_failure: Mutex<Option<String>>,
    connections: AtomicUsize,
    /// The open connections, for closing the longest idle one when a new client finds the
    /// daemon at [`MAX_CONNECTIONS`] (see [`Shared::close_idlest`]).
    open: Mutex<HashMap<u64, OpenConnection>>,
    next_connection: AtomicU64,
    cookie_counter: AtomicU64,
    last_error: Mutex<Option<String>>,
    lanes: Arc<RetrievalLanes>,
    /// Queries running at once, across connections (see [`QuerySlots`]).
    query_slots: QuerySlots,
}

/// Bounds the queries that compute at once over all connections. A query holds its result in
/// memory while it runs: `find "*" limit 100000` on django is about 110 MB, so the
/// per-connection limit alone let 5 pipelining clients take the daemon to 4 GB. A query past the
/// bound waits for a slot (it holds nothing meanwhile) instead of being refused.
struct QuerySlots {
    state: Mutex<SlotState>,
    freed: std::sync::Condvar,
}

#[derive(Default)]
struct SlotState {
    free: usize,
    /// Slots held, by connection.
    held: HashMap<u64, usize>,
    /// Queries waiting for a slot, in arrival order: (connection, ticket).
    waiting: std::collections::VecDeque<(u64, u64)>,
    next_ticket: u64,
    /// Slots granted so far, and the number of the last one each connection got.
    grants: u64,
    last_grant: HashMap<u64, u64>,
}

/// Connections whose last grant [`SlotState`] remembers (the most recent ones).
const GRANTS_REMEMBERED: u64 = 4096;

impl SlotState {
    /// The waiting query a free slot goes to: of those whose connection holds the fewest slots,
    /// the one whose connection was served longest ago (never, first), then the first to
    /// arrive. Ten clients each pipelining two `find "*" limit 100000` held a one-line `callers`
    /// of an eleventh back 7 to 9 s when slots went first come, first served.
    fn next_in_line(&self) -> Option<u64> {
        self.waiting
            .iter()
            .min_by_key(|(conn, ticket)| {
                let held = self.held.get(conn).copied().unwrap_or(0);
                let served = self.last_grant.get(conn).map_or(0, |g| g + 1);
                (held, served, *ticket)
            })
            .map(|(_, t)| *t)
    }

    fn grant(&mut self, conn: u64) {
        self.free -= 1;
        *self.held.entry(conn).or_default() += 1;
        self.last_grant.insert(conn, self.grants);
        self.grants += 1;
        if self.last_grant.len() as u64 > GRANTS_REMEMBERED {
            let oldest_kept = self.grants.saturating_sub(GRANTS_REMEMBERED);
            self.last_grant.retain(|_, g| *g >= oldest_kept);
        }
    }

    fn leave(&mut self, ticket: u64) {
        self.waiting.retain(|(_, t)| *t != ticket);
    }
}

impl QuerySlots {
    fn new(slots: usize) -> QuerySlots {
        QuerySlots {
            state: Mutex::new(SlotState { free: slots, ..SlotState::default() }),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Waits for a slot for a query of connection `conn` (see [`SlotState::next_in_line`]);
    /// `None` when `cancel` is set meanwhile (its client hung up, or cancelled it).
    fn acquire(&self, conn: u64, cancel: Option<&AtomicBool>) -> Option<QuerySlot<'_>> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let ticket = state.next_ticket;
        state.next_ticket += 1;
        state.waiting.push_back((conn, ticket));
        loop {
            if state.free > 0 && state.next_in_line() == Some(ticket) {
                state.leave(ticket);
                state.grant(conn);
                // Another slot may be free for the next in line.
                self.freed.notify_all();
                return Some(QuerySlot { slots: self, conn });
            }
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                state.leave(ticket);
                self.freed.notify_all();
                return None;
            }
            // Woken when a slot is freed; the timeout notices a cancellation.
            state = self.freed.wait_timeout(state, Duration::from_millis(100)).unwrap_or_else(|p| p.into_inner()).0;
        }
    }
}

struct QuerySlot<'a> {
    slots: &'a QuerySlots,
    conn: u64,
}

impl Drop for QuerySlot<'_> {
    fn drop(&mut self) {
        let mut state = self.slots.state.lock().unwrap_or_else(|p| p.into_inner());
        state.free += 1;
        if let Some(held) = state.held.get_mut(&self.conn) {
            *held -= 1;
            if *held == 0 {
                state.held.remove(&self.conn);
            }
        }
        self.slots.freed.notify_all();
    }
}

/// Queries running at once over all connections: twice the cores, at least 4 and at most 16.
/// Measured on django with 5 clients pipelining 8 `find "*" limit 100000` each (2 cores): peak
/// memory 4.0 GB and 18.4 s without the bound, 1.49 GB and 11.6 s with 8 slots, 1.17 GB and
/// 12.4 s with 4.
fn max_running_queries() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_mul(2).clamp(4, 16)
}

/// What the daemon keeps of an open connection to close it when it is the longest idle.
struct OpenConnection {
    /// A handle on the socket: shutting it down ends the connection's reading loop.
    stream: UnixStream,
    activity: Arc<ConnectionActivity>,
}

/// When a connection last sent a request, and how many of its queries are unanswered.
struct ConnectionActivity {
    last_request: Mutex<Instant>,
    running: Arc<AtomicUsize>,
}

/// A connection idle for less than this is never closed for another.
const IDLE_BEFORE_CLOSED_FOR_ANOTHER: Duration = Duration::from_secs(1);

/// The answers computed and not yet written to their clients may hold this many bytes of text
/// at once: each connection holds at most two, but 16 clients that each pipelined two `show
/// "*"` on django (65 MB answers) and never read took the daemon to 4 GB. Past it an answer is
/// replaced by `BUSY`, until clients read what they were sent (or are dropped after
/// [`WRITE_TIMEOUT`]).
const UNWRITTEN_ANSWER_BYTES: usize = 512 << 20;

impl Shared {
    /// Writes a query's answer line, within [`UNWRITTEN_ANSWER_BYTES`] over all connections.
    fn write_answer(&self, writer: &Mutex<UnixStream>, line: String, id: &Value) -> bool {
        let len = line.len();
        let before = self.unwritten_answer_bytes.fetch_add(len, Ordering::Relaxed);
        if before + len > UNWRITTEN_ANSWER_BYTES && before > 0 {
            self.unwritten_answer_bytes.fetch_sub(len, Ordering::Relaxed);
            drop(line);
            let err = ProtoError::new(
                "BUSY",
                format!(
                    "the answer ({} MB) does not fit in what the daemon holds for clients that have not read theirs \
                     ({} MB in all); try again",
                    len >> 20,
                    UNWRITTEN_ANSWER_BYTES >> 20
                ),
            );
            return send(writer, &protocol::response_err(id, &err));
        }
        let written = write_line(writer, &line);
        drop(line);
        self.unwritten_answer_bytes.fetch_sub(len, Ordering::Relaxed);
        written
    }

    /// Records an open connection; `None` when its socket cannot be cloned (it is then never
    /// closed for another).
    fn register(&self, number: u64, stream: &UnixStream) -> Option<Arc<ConnectionActivity>> {
        let handle = stream.try_clone().ok()?;
        let activity = Arc::new(ConnectionActivity {
            last_request: Mutex::new(Instant::now()),
            running: Arc::new(AtomicUsize::new(0)),
        });
        let entry = OpenConnection { stream: handle, activity: activity.clone() };
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(number, entry);
        Some(activity)
    }

    /// At the connection limit: closes the connection idle the longest (no query unanswered,
    /// no request for a second at least), so that connections a client leaked cannot lock every
    /// other client out until the idle timeout. Whether one was closed.
    fn close_idlest(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let idlest = open
            .iter()
            .filter(|(_, c)| c.activity.running.load(Ordering::Relaxed) == 0)
            .map(|(number, c)| (*c.activity.last_request.lock().unwrap_or_else(|p| p.into_inner()), *number))
            .filter(|(last, _)| last.elapsed() >= IDLE_BEFORE_CLOSED_FOR_ANOTHER)
            .min_by_key(|(last, _)| *last)
            .map(|(_, number)| number);
        // Taken out here, under the lock: the next newcomer must find another to close, not the
        // same one before its thread has ended (300 newcomers at once were all let in).
        match idlest.and_then(|number| open.remove(&number)) {
            Some(connection) => connection.stream.shutdown(std::net::Shutdown::Both).is_ok(),
            None => false,
        }
    }

    fn current(&self) -> Arc<Published> {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn publish(&self, published: Published) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(published);
    }

    /// Synchronises with the file system: when this returns, every change made before the call
    /// has been registered as pending by the watcher. Waits for the watcher up to `wait` (at
    /// least [`COOKIE_TIMEOUT`]): after an overflow of the kernel's event queue the watcher
    /// rescans the tree before it reports the cookie.
    fn sync_with_disk(&self, wait: Duration) -> Result<(), ProtoError> {
        let n = self.cookie_counter.fetch_add(1, Ordering::Relaxed);
        let name = format!("{}{}-{n}", watch::COOKIE_PREFIX, std::process::id());
        // The index directory may have been deleted under the daemon (it is rewritten at the
        // next commit): the root then takes the cookie.
        let mut path = self.cookie_dir.join(&name);
        if fs::write(&path, b"").is_err() {
            path = self.root.join(&name);
            fs::write(&path, b"").map_err(|e| {
                ProtoError::new("SYNC_FAILED", format!("cannot write a cookie file in {}: {e}", self.root.display()))
            })?;
        }
        let seen = self.tracker.wait_cookie(&name, wait.max(COOKIE_TIMEOUT));
        let _ = fs::remove_file(&path);
        if seen {
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
    fn root_replaced(&self) -> bool {
        directory_identity(&self.root).is_some_and(|now| now != self.root_identity)
    }

    fn root_replaced_message(&self) -> String {
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
    fn still_pending(&self, pending: Vec<String>, published: &Published) -> Vec<String> {
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
    fn gate(&self, mode: Freshness, wait: Duration) -> Result<(Arc<Published>, Vec<String>, Vec<String>), ProtoError> {
        match mode {
            Freshness::Allow => {
                // Synchronise first, or a write made just before the query may not be
                // registered yet and its file's items would be served old and unmarked. Then
                // take what is pending BEFORE the version: a change applied in between is in
                // that version; one still pending is listed (and its items marked).
                self.sync_with_disk(wait)?;
                let (pending, rescan) = self.tracker.pending();
                let published = self.current();
                let (mut stale, indexed_as_is) = self.split_pending(pending, &published);
                if rescan {
                    stale.push("(full rescan)".into());
                }
                Ok((published, stale, indexed_as_is))
            }
            Freshness::Strict => {
                self.sync_with_disk(wait)?;
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
                self.sync_with_disk(wait)?;
                // Wait for the changes made before the query, not for the tree to go quiet
                // (which, under continuous writes, it never does).
                let upto = self.tracker.watermark();
                let _ = self.flush.try_send(());
                match self.tracker.wait_applied(upto, wait.saturating_sub(asked.elapsed())) {
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

pub struct ServeOptions {
    pub root: PathBuf,
    pub db: PathBuf,
    pub indexer: IndexerOptions,
    pub debounce: Debounce,
    /// Kept in the index directory once the index is open (see `remember_settings`).
    pub remember: Box<dyn FnOnce() -> Result<()> + Send>,
}

/// The pid of a daemon that holds the root's lock: one serving, or one still indexing before it
/// listens (its socket is not there yet).
pub fn lock_holder(root: &Path) -> Option<String> {
    let paths = daemon_paths(root).ok()?;
    let lock = fs::OpenOptions::new().read(true).write(true).open(&paths.lock).ok()?;
    if lock.try_lock().is_ok() {
        return None;
    }
    Some(fs::read_to_string(&paths.lock).unwrap_or_default().trim().to_string())
}

pub fn serve(options: ServeOptions) -> Result<()> {
    let root = options.root.clone();
    let paths = daemon_paths(&root)?;
    // Said before the first index, not after it: a Unix socket's path has at most 107 bytes.
    if paths.socket.as_os_str().len() >= MAX_SOCKET_PATH_BYTES {
        bail!(
            "the socket path {} is {} bytes, over the {} a Unix socket allows; set FRESCO_RUNTIME_DIR to a \
             shorter directory (for the daemon and its clients alike)",
            paths.socket.display(),
            paths.socket.as_os_str().len(),
            MAX_SOCKET_PATH_BYTES - 1
        );
    }

    // One daemon per root: an advisory lock the OS releases if we die, so a crash never leaves
    // a lock that blocks the next start.
    let lock = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&paths.lock)
        .with_context(|| format!("cannot open {}", paths.lock.display()))?;
    if lock.try_lock().is_err() {
        let pid = fs::read_to_string(&paths.lock).unwrap_or_default();
        bail!("a daemon already serves {} (pid {})", root.display(), pid.trim());
    }
    {
        let mut l = &lock;
        let _ = l.set_len(0);
        let _ = write!(l, "{}", std::process::id());
    }
    if let Some(other) = crate::paths::recorded_socket(&root, &options.db)
        && other != paths.socket
        && UnixStream::connect(&other).is_ok()
    {
        bail!(
            "a daemon already serves {} on {} (started with another FRESCO_RUNTIME_DIR or XDG_RUNTIME_DIR)",
            root.display(),
            other.display()
        );
    }
    if paths.socket.exists() {
        // Left by a daemon that died: we hold the lock, so nobody serves it.
        fs::remove_file(&paths.socket).with_context(|| format!("cannot remove stale {}", paths.socket.display()))?;
    }

    // Watch before indexing, so that nothing written during the initial index is missed.
    let tracker = Arc::new(Tracker::default());
    let (batch_tx, batch_rx) = crossbeam::channel::unbounded::<Batch>();
    let (flush_tx, flush_rx) = crossbeam::channel::bounded::<()>(1);
    let _watcher = watch::start(
        root.clone(),
        options.indexer.walk.clone(),
        options.debounce,
        tracker.clone(),
        batch_tx.clone(),
        flush_rx,
    )
    .map_err(|e| {
        let hint = if watch::is_watch_limit(&e) { " (the inotify limits: see `sysctl fs.inotify`)" } else { "" };
        anyhow::anyhow!("cannot watch the tree{hint}: {e}")
    })?;
    for dir in &_watcher.unwatched {
        eprintln!(
            "fresco: warning: cannot watch {} (no permission to read it): changes inside it are not seen",
            dir.display()
        );
    }

    let started = Instant::now();
    let interactive = std::io::IsTerminal::is_terminal(&std::io::stderr());
    if interactive {
        eprintln!("fresco: indexing {} ...", root.display());
    }
    let mut indexer = open_when_free(&root, &options)?;
    (options.remember)()?;
    indexer.set_defer_persistence(true);
    if let Some(why) = indexer.rebuilt_store.take() {
        eprintln!("fresco: warning: {why}");
    }
    for issue in indexer.walk_issues() {
        eprintln!("fresco: warning: {} {}", crate::render::printable(&issue.path), issue.message);
    }
    let t = indexer.snapshot().totals();
    let banner = format!(
        "fresco: serving {} (version {}, {} files, {} units, {} edges) on {} after {:.2} s",
        root.display(),
        indexer.snapshot().version(),
        t.files,
        t.units,
        t.edges,
        paths.socket.display(),
        started.elapsed().as_secs_f64()
    );

    let (lanes, lane_updates) = RetrievalLanes::start(&options.db, indexer.snapshot().clone());
    let hard_linked = Mutex::new(hard_linked_files(&root, indexer.snapshot().files().map(|f| f.graph.path.as_str())));
    let shared = Arc::new(Shared {
        lanes,
        root: root.clone(),
        hard_linked,
        changes: batch_tx.clone(),
        cookie_dir: cookie_dir(&root, &options.db),
        current: Mutex::new(Arc::new(Published {
            snapshot: indexer.snapshot().clone(),
            history: Arc::new(indexer.history().clone()),
        })),
        tracker: tracker.clone(),
        flush: flush_tx,
        started,
        shutdown: AtomicBool::new(false),
        in_flight: AtomicUsize::new(0),
        unwritten_answer_bytes: AtomicUsize::new(0),
        root_identity: directory_identity(&root).unwrap_or_default(),
        indexer_failure: Mutex::new(None),
        connections: AtomicUsize::new(0),
        open: Mutex::new(HashMap::new()),
        next_connection: AtomicU64::new(0),
        cookie_counter: AtomicU64::new(0),
        last_error: Mutex::new(None),
        walk_issues: Mutex::new(indexer.walk_issues().to_vec()),
        query_slots: QuerySlots::new(max_running_queries()),
    });

    let indexer_thread = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("fresco-indexer".into())
            // Small batches are lowered and resolved on this thread: the main thread's stack.
            .stack_size(8 * 1024 * 1024)
            .spawn(move || indexer_loop(indexer, batch_rx, shared, lane_updates))?
    };

    let listener =
        UnixListener::bind(&paths.socket).with_context(|| format!("cannot bind {}", paths.socket.display()))?;
    fs::set_permissions(&paths.socket, fs::Permissions::from_mode(0o600))?;
    listener.set_nonblocking(true)?;
    let recorded_socket = options.db.join(crate::paths::DAEMON_SOCKET_FILE);
    if let Err(e) = fs::write(&recorded_socket, format!("{}\n", paths.socket.display())) {
        eprintln!(
            "fresco: warning: cannot write {} ({e}); clients must share this runtime directory",
            recorded_socket.display()
        );
    }
    // Once it listens: a client that reads the banner can connect at once.
    eprintln!("{banner}");
    // `kill`, Ctrl-C and a closed terminal stop the daemon as `fresco stop` does: the socket is
    // removed and what was published is written, instead of the process dying mid-write.
    // A signal ignored when the daemon started stays ignored: `nohup fresco serve &` must survive
    // the terminal closing, and a shell's background job its Ctrl-C.
    let terminate = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT, signal_hook::consts::SIGHUP] {
        if !ignored_at_start(signal) {
            signal_hook::flag::register(signal, terminate.clone())
                .with_context(|| format!("cannot handle signal {signal}"))?;
        }
    }
    let refusing = Arc::new(AtomicUsize::new(0));
    while !shared.shutdown.load(Ordering::Relaxed) {
        if terminate.load(Ordering::Relaxed) {
            eprintln!("fresco: stopping on a signal");
            shared.shutdown.store(true, Ordering::Relaxed);
            break;
        }
        match listener.accept() {
            Ok((stream, _)) => {
                let _ = stream.set_nonblocking(false);
                if shared.connections.load(Ordering::Relaxed) >= MAX_CONNECTIONS && !shared.close_idlest() {
                    refuse_busy(stream, &refusing);
                    continue;
                }
                shared.connections.fetch_add(1, Ordering::Relaxed);
                let shared = shared.clone();
                let _ = std::thread::Builder::new().name("fresco-conn".into()).spawn(move || {
                    let number = shared.next_connection.fetch_add(1, Ordering::Relaxed);
                    let registered = shared.register(number, &stream);
                    handle_connection(stream, &shared, registered.as_deref(), number);
                    shared.open.lock().unwrap_or_else(|p| p.into_inner()).remove(&number);
                    shared.connections.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => eprintln!("fresco: accept failed: {e}"),
        }
    }
    let _ = fs::remove_file(&paths.socket);
    let _ = fs::remove_file(&recorded_socket);
    // Queries already running get their answers (a query stopped mid-way had its connection
    // closed with nothing said); bounded, as a `wait` query waits at most its own time.
    let deadline = Instant::now() + SHUTDOWN_QUERY_WAIT;
    while shared.in_flight.load(Ordering::Relaxed) > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Let the indexer finish the batch in hand and write what it published: a version clients
    // saw is then stored, and `changes since` it still answers after a restart. Bounded, so a
    // stuck write cannot keep the daemon from exiting (its numbers are reserved: see the
    // indexer's version reservation).
    let deadline = Instant::now() + SHUTDOWN_PERSIST_WAIT;
    while !indexer_thread.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    if !indexer_thread.is_finished() {
        eprintln!("fresco: the index was still being written at exit; the next start catches up from the disk");
    }
    if let Some(why) = shared.indexer_failure.lock().unwrap_or_else(|p| p.into_inner()).take() {
        anyhow::bail!("the indexer failed ({why}); the last complete version is kept");
    }
    Ok(())
}

/// Whether `signal` is ignored (`SIG_IGN`) in this process, as `nohup` leaves SIGHUP.
fn ignored_at_start(signal: i32) -> bool {
    // SAFETY: sigaction with a null new action only reads the current disposition into `old`,
    // a zeroed, properly aligned struct owned by this frame.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

fn indexer_loop(mut indexer: Indexer, batches: Receiver<Batch>, shared: Arc<Shared>, lanes: Sender<LaneUpdate>) {
    // A batch that failed to apply (an I/O error writing the store, say) is retried with the
    // next one, or after a second: its changes must not stay pending forever.
    let mut failed: Option<Batch> = None;
    loop {
        let first = match &failed {
            // Woken now and then to notice a shutdown.
            None => match batches.recv_timeout(Duration::from_millis(100)) {
                Ok(b) => b,
                Err(crossbeam::channel::RecvTimeoutError::Timeout) => {
                    if shared.shutdown.load(Ordering::Relaxed) {
                        persist_at_exit(&mut indexer);
                        return;
                    }
                    continue;
                }
                Err(crossbeam::channel::RecvTimeoutError::Disconnected) => {
                    persist_at_exit(&mut indexer);
                    return;
                }
            },
            Some(_) => match batches.recv_timeout(Duration::from_secs(1)) {
                Ok(b) => b,
                Err(crossbeam::channel::RecvTimeoutError::Timeout) => Batch::default(),
                Err(crossbeam::channel::RecvTimeoutError::Disconnected) => return,
            },
        };
        // Coalesce whatever else is already queued into the same version.
        let mut batch = first;
        if let Some(previous) = failed.take() {
            batch.paths.extend(previous.paths);
            if batch.rescan.is_none() {
                batch.rescan = previous.rescan;
            }
        }
        while let Ok(more) = batches.try_recv() {
            batch.paths.extend(more.paths);
            if more.rescan.is_some() {
                batch.rescan = more.rescan;
            }
        }
        if shared.root_replaced() {
            eprintln!("{}", shared.root_replaced_message());
            shared.shutdown.store(true, Ordering::Relaxed);
            return;
        }
        if !indexer.root().is_dir() {
            // Moved or deleted: what is there now is not this repository, and writing the index
            // back would re-create the old path. Stop; a new `fresco serve` serves the new place.
            eprintln!("fresco: the repository root {} is gone (moved or deleted); stopping", indexer.root().display());
            shared.shutdown.store(true, Ordering::Relaxed);
            return;
        }
        // A panic in the indexer would leave the daemon up with nothing keeping it fresh, every
        // query then waiting for a version that never comes while `status` looked healthy: the
        // daemon stops instead, with the reason, and the last complete version stays stored
        // (nothing of the failed batch is written). Clients then index in-process.
        let applied = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| indexer.apply_batch(&batch))) {
            Ok(applied) => applied,
            Err(panic) => {
                let why = fresco_indexer::process::panic_message(&*panic).unwrap_or_else(|| "a panic".to_string());
                eprintln!("fresco: the indexer failed ({why}); stopping the daemon");
                *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) =
                    Some(format!("the indexer failed: {why}"));
                *shared.indexer_failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                shared.shutdown.store(true, Ordering::Relaxed);
                return;
            }
        };
        *shared.walk_issues.lock().unwrap_or_else(|p| p.into_inner()) = indexer.walk_issues().to_vec();
        match applied {
            Ok(report) => {
                refresh_hard_links(&shared, &indexer, &batch, &report.changed_files, &report.removed_files);
                if report.published {
                    let history = Arc::new(indexer.history().clone());
                    shared.publish(Published { snapshot: indexer.snapshot().clone(), history });
                    let _ = lanes.send(LaneUpdate {
                        snapshot: indexer.snapshot().clone(),
                        changed: report.changed_files.clone(),
                        removed: report.removed_files.clone(),
                    });
                }
                if let Some(why) = indexer.rebuilt_store.take() {
                    eprintln!("fresco: warning: {why}");
                }
                // Published first, then marked applied: a waiting query that wakes up finds
                // the new version. Then written to disk, off the path of waiting queries.
                shared.tracker.applied(&batch);
                let persisted = indexer.persist();
                if report.changed_files.len() + report.removed_files.len()
                    >= fresco_indexer::process::RELEASE_AFTER_FILES
                {
                    fresco_indexer::process::release_free_memory();
                }
                let mut last_error = shared.last_error.lock().unwrap_or_else(|p| p.into_inner());
                match persisted {
                    // Applied and written: an earlier error is over.
                    Ok(()) => *last_error = None,
                    Err(e) => {
                        // The store keeps its last complete version; sled keeps a database's
                        // first I/O error for good (see `Indexer::persist`), so say what helps.
                        eprintln!(
                            "fresco: cannot write the index: {e}; it keeps its last complete version, and this \
                             daemon serves the newer ones from memory: once the disk has room, restart the \
                             daemon (`fresco stop`, then `fresco serve`), which catches up from the files"
                        );
                        *last_error = Some(format!(
                            "{e}; the store keeps its last complete version: restart the daemon once the disk has room"
                        ));
                    }
                }
            }
            Err(e) => {
                eprintln!("fresco: error applying changes (will retry): {e}");
                *shared.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
                failed = Some(batch);
            }
        }
        if shared.shutdown.load(Ordering::Relaxed) {
            persist_at_exit(&mut indexer);
            return;
        }
    }
}

/// Brings the set of hard-linked files up to date with what a batch looked at: every path it
/// names, what it changed or removed, and for a directory or a rescan every file under it. A
/// link made while the daemon runs sends no event (Linux reports a link count change to watches
/// of the inode, not of its directory): the file joins the set when a batch next names it.
fn refresh_hard_links(shared: &Shared, indexer: &Indexer, batch: &Batch, changed: &[String], removed: &[String]) {
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
fn hard_linked_files<'p>(root: &Path, paths: impl Iterator<Item = &'p str>) -> std::collections::BTreeSet<String> {
    use std::os::unix::fs::MetadataExt;
    paths
        .filter(|rel| fs::symlink_metadata(root.join(rel)).is_ok_and(|m| m.is_file() && m.nlink() > 1))
        .map(str::to_string)
        .collect()
}

/// The device and inode of a directory.
fn directory_identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().filter(|m| m.is_dir()).map(|m| (m.dev(), m.ino()))
}

/// Writes what was published and not yet stored (normally nothing: each batch is written after
/// it is published).
fn persist_at_exit(indexer: &mut Indexer) {
    match indexer.persist() {
        // Everything published is stored: the numbers reserved past it were never handed out.
        Ok(()) => {
            if let Err(e) = indexer.release_unused_versions() {
                eprintln!("fresco: cannot release unused version numbers at exit: {e}");
            }
        }
        Err(e) => eprintln!("fresco: cannot write the index at exit: {e}"),
    }
}

/// Reads one line of at most `MAX_REQUEST_BYTES`. `Ok(None)` at end of stream.
fn read_line(reader: &mut BufReader<UnixStream>, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let n = reader.by_ref().take(protocol::MAX_REQUEST_BYTES as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    let complete = buf.last() == Some(&b'\n');
    Ok(Some(complete || buf.len() <= protocol::MAX_REQUEST_BYTES))
}

/// The error answer for a result of `bytes` bytes, over the protocol's limit.
fn too_large(id: &Value, bytes: usize) -> Value {
    let err = ProtoError::new(
        "RESULT_TOO_LARGE",
        format!("the result is {bytes} bytes, over the {} byte limit; lower `limit`", protocol::MAX_RESPONSE_BYTES),
    );
    protocol::response_err(id, &err)
}

/// Writes one answer.
fn send(writer: &Mutex<UnixStream>, value: &Value) -> bool {
    write_line(writer, &answer_line(value))
}

/// The line an answer is written as: its JSON, or `RESULT_TOO_LARGE` past the protocol's limit.
fn answer_line(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > protocol::MAX_RESPONSE_BYTES {
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        text = too_large(&id, text.len()).to_string();
    }
    text.push('\n');
    text
}

/// Writes one answer line. A write that fails (the client did not read for
/// [`WRITE_TIMEOUT`], or went away) may have sent part of the line: the connection is shut down
/// then, so the client sees its end rather than a cut line with the next answer glued to it.
fn write_line(writer: &Mutex<UnixStream>, text: &str) -> bool {
    let mut stream = writer.lock().unwrap_or_else(|p| p.into_inner());
    let written = write_with_progress(&mut stream, text.as_bytes());
    if !written {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    written
}

/// Writes all of `bytes`, failing once no byte has been taken for [`WRITE_TIMEOUT`]. The socket's
/// own timeout is a slice of that ([`WRITE_SLICE`]): a write that blocks for the whole timeout and
/// then reports the bytes it took at its start would restart the wait (the connection of a
/// client that never read was closed after 120 s, not 60).
fn write_with_progress(stream: &mut UnixStream, mut bytes: &[u8]) -> bool {
    let mut last_progress = Instant::now();
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return false,
            Ok(n) => {
                bytes = &bytes[n..];
                last_progress = Instant::now();
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if last_progress.elapsed() >= WRITE_TIMEOUT {
                    return false;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    stream.flush().is_ok()
}

fn handle_connection(stream: UnixStream, shared: &Arc<Shared>, activity: Option<&ConnectionActivity>, connection: u64) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    // A client that stops reading its answers is dropped instead of holding the threads that
    // write to it (and their answers) forever.
    let _ = stream.set_write_timeout(Some(WRITE_SLICE));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let Ok(hangup_probe) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(write_half));
    let mut reader = BufReader::new(stream);
    let cancels: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>> = Arc::default();
    let running = activity.map_or_else(|| Arc::new(AtomicUsize::new(0)), |a| a.running.clone());
    let answers = Arc::new(QuerySlots::new(ANSWERS_IN_HAND_PER_CONNECTION));
    let mut buf = Vec::new();
    loop {
        let line = match read_line(&mut reader, &mut buf) {
            Ok(None) => {
                await_answers_or_hangup(&hangup_probe, &running, &cancels);
                return;
            }
            Err(e) if !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                // Reset by the peer: nobody reads what is still computing.
                cancel_all(&cancels);
                return;
            }
            Err(_) => return,
            Ok(Some(false)) => {
                let err = ProtoError::new(
                    "REQUEST_TOO_LARGE",
                    format!(
                        "a request line may be at most {} bytes; closing the connection",
                        protocol::MAX_REQUEST_BYTES
                    ),
                );
                send(&writer, &protocol::response_err(&Value::Null, &err));
                return;
            }
            Ok(Some(true)) => &buf,
        };
        // JSON is UTF-8 (RFC 8259): a request that is not is refused, not silently altered (a
        // lossy decoding would turn its bytes into U+FFFD and answer a different question).
        let text = match std::str::from_utf8(line) {
            Ok(text) => text.trim(),
            Err(e) => {
                let err = ProtoError::new("INVALID_JSON", format!("the request is not valid UTF-8: {e}"));
                if !send(&writer, &protocol::response_err(&Value::Null, &err)) {
                    return;
                }
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        let request: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let err = ProtoError::new("INVALID_JSON", invalid_json_message(text, &e));
                if !send(&writer, &protocol::response_err(&Value::Null, &err)) {
                    return;
                }
                continue;
            }
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let Some(method) = request.get("method").and_then(Value::as_str) else {
            let err =
                ProtoError::new("INVALID_REQUEST", "a request is an object with \"id\", \"method\" and \"params\"");
            if !send(&writer, &protocol::response_err(&id, &err)) {
                return;
            }
            continue;
        };
        let params = request.get("params").cloned().unwrap_or(json!({}));
        if let Err(err) = protocol::check_params(method, &params) {
            if !send(&writer, &protocol::response_err(&id, &err)) {
                return;
            }
            continue;
        }
        // Only a request counts as activity: blank lines and garbage sent every half second kept
        // 64 connections from ever being idle, and locked every other client out.
        if let Some(activity) = activity {
            *activity.last_request.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
        match method {
            "query" => {
                if running.load(Ordering::Relaxed) >= MAX_QUERIES_PER_CONNECTION {
                    let err = ProtoError::new(
                        "BUSY",
                        format!("at most {MAX_QUERIES_PER_CONNECTION} queries at once per connection"),
                    );
                    send(&writer, &protocol::response_err(&id, &err));
                    continue;
                }
                let flag = Arc::new(AtomicBool::new(false));
                let key = id.to_string();
                cancels.lock().unwrap_or_else(|p| p.into_inner()).insert(key.clone(), flag.clone());
                running.fetch_add(1, Ordering::Relaxed);
                let (worker_shared, worker_writer, worker_cancels, worker_running, worker_answers) =
                    (shared.clone(), writer.clone(), cancels.clone(), running.clone(), answers.clone());
                shared.in_flight.fetch_add(1, Ordering::Relaxed);
                let spawned = std::thread::Builder::new().name("fresco-query".into()).spawn(move || {
                    let answer_in_hand = worker_answers.acquire(connection, None);
                    let response = match handle_query(&worker_shared, &params, flag, connection) {
                        Ok(result) => protocol::response_ok(&id, result),
                        Err(err) => protocol::response_err(&id, &err),
                    };
                    worker_cancels.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    // The line, not the tree, waits for a client that reads slowly (a `find "*"
                    // limit 100000` over 600 files: 4 MB of text, about 30 MB as a tree).
                    let line = answer_line(&response);
                    drop(response);
                    worker_shared.write_answer(&worker_writer, line, &id);
                    drop(answer_in_hand);
                    worker_shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                    // Counted until written, not until computed: a client that sends queries
                    // and never reads would otherwise have every answer held in memory
                    // (250 MB a client measured, with 8 `find "*" limit 100000` each).
                    worker_running.fetch_sub(1, Ordering::Relaxed);
                });
                if spawned.is_err() {
                    shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                    running.fetch_sub(1, Ordering::Relaxed);
                    let err = ProtoError::new("BUSY", "cannot start a query thread");
                    send(&writer, &protocol::response_err(&Value::Null, &err));
                }
            }
            "cancel" => {
                let target = params.get("id").map(|v| v.to_string()).unwrap_or_default();
                let found = cancels.lock().unwrap_or_else(|p| p.into_inner()).get(&target).cloned();
                let result = match found {
                    Some(flag) => {
                        flag.store(true, Ordering::Relaxed);
                        json!({"cancelled": true})
                    }
                    None => json!({"cancelled": false}),
                };
                if !send(&writer, &protocol::response_ok(&id, result)) {
                    return;
                }
            }
            "status" => {
                let published = shared.current();
                let (pending, rescan) = shared.tracker.pending();
                let mut pending = shared.still_pending(pending, &published);
                if rescan {
                    pending.push("(full rescan)".into());
                }
                let result = protocol::status(protocol::StatusInfo {
                    root: &shared.root,
                    snapshot: &published.snapshot,
                    daemon: true,
                    pending,
                    uptime: Some(shared.started.elapsed()),
                    watcher: Some(shared.tracker.counters()),
                    last_error: shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                    lanes: Some(protocol::lanes_json(&shared.lanes.health(published.snapshot.version()))),
                    walk_issues: &shared.walk_issues.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                    history: Some(&published.history),
                });
                if !send(&writer, &protocol::response_ok(&id, result)) {
                    return;
                }
            }
            "export" => {
                // Counted as a query unanswered while it runs or waits for the index: the
                // connection is not idle, and not closed for another client.
                running.fetch_add(1, Ordering::Relaxed);
                let response = match handle_export(shared, &params) {
                    Ok(result) => protocol::response_ok(&id, result),
                    Err(err) => protocol::response_err(&id, &err),
                };
                running.fetch_sub(1, Ordering::Relaxed);
                if !send(&writer, &response) {
                    return;
                }
            }
            "shutdown" => {
                send(&writer, &protocol::response_ok(&id, json!({"stopping": true})));
                shared.shutdown.store(true, Ordering::Relaxed);
                return;
            }
            other => {
                let err = ProtoError::new(
                    "UNKNOWN_METHOD",
                    format!("unknown method '{other}' (status, query, export, cancel, shutdown)"),
                );
                if !send(&writer, &protocol::response_err(&id, &err)) {
                    return;
                }
            }
        }
    }
}

/// After the client's end of stream, while its queries run or wait: a client that only shut its
/// writing half (`nc -U`, `socat`) still reads their answers; one that closed the connection
/// cannot, and they are cancelled instead of computing answers nobody reads (6 clients that
/// each sent 8 `find "*" limit 100000` and closed kept the daemon busy for 17 s of CPU).
fn await_answers_or_hangup(
    stream: &UnixStream,
    running: &AtomicUsize,
    cancels: &Mutex<HashMap<String, Arc<AtomicBool>>>,
) {
    use std::os::fd::AsRawFd;
    while running.load(Ordering::Relaxed) > 0 {
        let mut probe = libc::pollfd { fd: stream.as_raw_fd(), events: 0, revents: 0 };
        // SAFETY: one valid `pollfd` for the duration of the call; the descriptor is owned by
        // `stream`, which outlives it. A closed peer is `POLLHUP` (reported whatever `events`
        // asks); a half-closed one is not.
        let ready = unsafe { libc::poll(&mut probe, 1, 100) };
        if ready > 0 && probe.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            cancel_all(cancels);
            return;
        }
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// Cancels every query of a connection, running or waiting for a slot.
fn cancel_all(cancels: &Mutex<HashMap<String, Arc<AtomicBool>>>) {
    for flag in cancels.lock().unwrap_or_else(|p| p.into_inner()).values() {
        flag.store(true, Ordering::Relaxed);
    }
}

fn handle_query(
    shared: &Shared,
    params: &Value,
    cancel: Arc<AtomicBool>,
    connection: u64,
) -> Result<Value, ProtoError> {
    let params = protocol::query_params(params)?;
    let started = Instant::now();
    let (published, stale, indexed_as_is) = shared.gate(params.freshness, params.wait)?;
    // Retrieval reads the lexical lane too: under `wait` and `strict` it catches up with the
    // version answering (milliseconds after it is published) within what is left of the wait.
    // The dense lane may take longer; a lane still behind is reported lagging in the answer.
    if params.freshness != Freshness::Allow && asks_retrieval(&params.text) {
        let left = params.wait.saturating_sub(started.elapsed()).max(Duration::from_millis(100));
        shared.lanes.wait_text(published.snapshot.version(), left);
    }
    // A slot bounds the queries computing at once. Taken after the waits above (a query waiting
    // for the index holds no memory and must not keep others from running) and given back
    // with the result, before the answer is written (a client that does not read its answers
    // must not hold slots others need).
    let slot = shared.query_slots.acquire(connection, Some(&cancel));
    // Cancelled while it waited (its client hung up): nothing to compute.
    if slot.is_none() || cancel.load(Ordering::Relaxed) {
        return Err(ProtoError::new("CANCELLED", "the query was cancelled"));
    }
    let tracker = shared.tracker.clone();
    let allow = params.freshness == Freshness::Allow;
    // Pending when the version was taken (it may have been applied since, in a later version
    // than the one answering), or changed since.
    let pending_at_gate = stale.clone();
    // Files pending at the gate whose content the snapshot holds (the gate read them): the
    // tracker counts them until their events are applied.
    let indexed_as_is: std::collections::HashSet<String> = indexed_as_is.into_iter().collect();
    let is_stale = move |file: &str| {
        pending_at_gate
            .iter()
            .any(|p| p == file || p == "(full rescan)" || (p.ends_with('/') && file.starts_with(p.as_str())))
            || (tracker.is_stale(file) && !indexed_as_is.contains(file))
    };
    let index =
        protocol::IndexView { snapshot: &published.snapshot, history: Some(&published.history), root: &shared.root };
    let answered = protocol::run_query(
        index,
        &params,
        Some(cancel),
        Some(&*shared.lanes as &dyn fresco_query::Lanes),
        if allow { Some(&is_stale as &dyn Fn(&str) -> bool) } else { None },
        &stale,
    );
    match answered {
        Ok((_, value)) => Ok(value),
        // An error is an answer too: under `allow`, one read from a snapshot behind the disk
        // (an unknown name just written, a line past the old end) says so, as rows do.
        // A name may be in any file not indexed yet; an invalid query may change only when it
        // names such a file (a line past its old end). A parse error, a path outside the root or
        // a cancellation does not depend on the snapshot.
        Err(e)
            if allow
                && !stale.is_empty()
                && (e.code == "UNKNOWN_SYMBOL"
                    || (e.code == "INVALID_QUERY" && stale.iter().any(|f| e.message.contains(f.as_str())))) =>
        {
            Err(behind_the_disk(e, published.snapshot.version(), &stale))
        }
        Err(e) => Err(e),
    }
}

/// `error`, found in version `version` while `stale` files had changed on disk since: the
/// message says the answer may differ once they are indexed, and the error lists them.
fn behind_the_disk(error: ProtoError, version: u64, stale: &[String]) -> ProtoError {
    let shown: Vec<&str> = stale.iter().take(5).map(String::as_str).collect();
    let more = stale.len() - shown.len();
    let message = format!(
        "{} (freshness allow: answered from version {version}, and {} changed file(s) are not indexed yet: {}{}; \
         with freshness wait the answer may differ)",
        error.message,
        stale.len(),
        shown.join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    );
    ProtoError { message, ..error }.with("stale", json!(stale)).with("version", json!(version))
}

/// Whether a query has a `search` or `context` step (one that reads the retrieval lanes).
fn asks_retrieval(text: &str) -> bool {
    use fresco_query::ast::Stage;
    fresco_query::parse(text)
        .is_ok_and(|q| q.stages.iter().any(|s| matches!(s, Stage::Search { .. } | Stage::Context { .. })))
}

fn handle_export(shared: &Shared, params: &Value) -> Result<Value, ProtoError> {
    let out = params
        .get("out")
        .and_then(Value::as_str)
        .ok_or_else(|| ProtoError::new("INVALID_REQUEST", "params.out (a directory) is required"))?;
    // Relative to what? The daemon's working directory is not the client's.
    if !Path::new(out).is_absolute() {
        return Err(ProtoError::new("INVALID_REQUEST", "params.out must be an absolute path"));
    }
    let freshness = protocol::freshness_param(params)?;
    let (published, _, _) = shared.gate(freshness, protocol::export_wait(params)?)?;
    let counts = crate::export::write(&published.snapshot, Path::new(out))
        .map_err(|e| ProtoError::new("EXPORT_FAILED", format!("{e:#}")))?;
    Ok(json!({"version": published.snapshot.version(), "nodes": counts.nodes, "edges": counts.edges, "out": out}))
}

/// At most this many pending files are read to tell whether the index already holds their
/// content (see `Shared::still_pending`), at most this many bytes in all per query (a few
/// milliseconds; the files a burst leaves pending are listed, not read).
const MAX_CONTENT_CHECKS: usize = 256;
const MAX_CONTENT_CHECK_TOTAL: u64 = 8 * 1024 * 1024;

/// How many refused connections are being answered at once (see [`refuse_busy`]).
const MAX_REFUSING: usize = 16;

/// Tells a client over the connection limit that the daemon is busy. The client has usually
/// sent its request already: closing the socket with that request unread would reset the
/// connection, and the client would see "connection reset" instead of the answer. So the
/// answer is written, the request read and dropped (for a second at most), then the socket
/// closed, on a thread of its own; past [`MAX_REFUSING`] of those the socket is just closed.
fn refuse_busy(mut stream: UnixStream, refusing: &Arc<AtomicUsize>) {
    let err = ProtoError::new(
        "BUSY",
        format!("the daemon is busy: too many connections (limit {MAX_CONNECTIONS}); try again"),
    );
    let _ = writeln!(stream, "{}", protocol::response_err(&Value::Null, &err));
    if refusing.fetch_add(1, Ordering::Relaxed) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let counter = refusing.clone();
    let spawned = std::thread::Builder::new().name("fresco-busy".into()).spawn(move || {
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = std::io::copy(&mut (&mut stream).take(1 << 16), &mut std::io::sink());
        counter.fetch_sub(1, Ordering::Relaxed);
    });
    if spawned.is_err() {
        refusing.fetch_sub(1, Ordering::Relaxed);
    }
}

/// How long a starting daemon waits for another fresco command (an in-process `query` or
/// `index` bringing the stored index up to date) to release the index.
const STORE_RELEASE_WAIT: Duration = Duration::from_secs(300);

/// Opens the stored index, waiting while another fresco process holds it: an in-process command
/// catching up after a branch switch holds it for seconds, and a daemon started meanwhile (an
/// editor checking with `status`, then starting `serve`) died on the store's lock.
fn open_when_free(root: &Path, options: &ServeOptions) -> Result<Indexer> {
    let started = Instant::now();
    let mut told = false;
    loop {
        match Indexer::open(root, &options.db, options.indexer.clone()).map_err(anyhow::Error::from) {
            Err(err)
                if err.chain().any(|e| e.to_string().contains("could not acquire lock"))
                    && started.elapsed() < STORE_RELEASE_WAIT =>
            {
                if !told {
                    eprintln!(
                        "fresco: the index at {} is in use by another fresco command; waiting for it to finish",
                        options.db.display()
                    );
                    told = true;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            other => return other,
        }
    }
}

/// Where the freshness gate writes its cookie files: the index directory when it is inside the
/// watched root (the default `.fresco/`, whose `.gitignore` keeps them out of `git add -A`), else
/// the root itself. A cookie lives for a few milliseconds, but in the root a concurrent
/// `git add -A` saw it and failed ("unable to stat") or committed it.
fn cookie_dir(root: &Path, db: &Path) -> PathBuf {
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

#[cfg(test)]
mod query_slot_tests {
    use super::*;

    /// A freed slot goes to the connection served longest ago, not to the first in the queue:
    /// a client that pipelined many queries does not hold back one that sent a single query.
    #[test]
    fn a_freed_slot_goes_to_the_connection_served_longest_ago() {
        let slots = Arc::new(QuerySlots::new(1));
        let held = slots.acquire(1, None).expect("a free slot");
        let order = Arc::new(Mutex::new(Vec::new()));
        let waiter = |conn: u64| {
            let (slots, order) = (slots.clone(), order.clone());
            std::thread::spawn(move || {
                let slot = slots.acquire(conn, None).expect("no cancel");
                order.lock().unwrap_or_else(|p| p.into_inner()).push(conn);
                std::thread::sleep(Duration::from_millis(20));
                drop(slot);
            })
        };
        // Connection 1 queues three more before connection 2 queues its one.
        let mut waiters = Vec::new();
        for _ in 0..3 {
            waiters.push(waiter(1));
            std::thread::sleep(Duration::from_millis(30));
        }
        waiters.push(waiter(2));
        std::thread::sleep(Duration::from_millis(30));
        drop(held);
        for w in waiters {
            w.join().expect("a waiter");
        }
        let order = order.lock().unwrap_or_else(|p| p.into_inner()).clone();
        assert_eq!(order.first(), Some(&2), "connection 2 was never served: it goes first ({order:?})");
        assert_eq!(order.len(), 4);
    }

    /// A query whose client hung up leaves the queue.
    #[test]
    fn a_cancelled_query_stops_waiting() {
        let slots = Arc::new(QuerySlots::new(1));
        let _held = slots.acquire(1, None).expect("a free slot");
        let cancel = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (slots, cancel) = (slots.clone(), cancel.clone());
            std::thread::spawn(move || slots.acquire(2, Some(&cancel)).is_none())
        };
        std::thread::sleep(Duration::from_millis(50));
        cancel.store(true, Ordering::Relaxed);
        assert!(waiter.join().expect("the waiter"), "no slot for a cancelled query");
        assert!(slots.state.lock().unwrap_or_else(|p| p.into_inner()).waiting.is_empty());
    }

    #[test]
    fn a_query_past_the_bound_waits_for_a_slot() {
        let slots = Arc::new(QuerySlots::new(2));
        let (a, b) = (slots.acquire(1, None), slots.acquire(1, None));
        let third_ran = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (slots, third_ran) = (slots.clone(), third_ran.clone());
            std::thread::spawn(move || {
                let _slot = slots.acquire(2, None);
                third_ran.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(100));
        assert!(!third_ran.load(Ordering::SeqCst), "both slots are held");
        drop(a);
        waiter.join().expect("the third query ran once a slot was freed");
        assert!(third_ran.load(Ordering::SeqCst));
        drop(b);
        assert_eq!(slots.state.lock().unwrap_or_else(|p| p.into_inner()).free, 2);
    }
}

/// What is wrong with a request that is not JSON. serde's words for a lone UTF-16 surrogate
/// escape (`"\\ud800"` alone: half of a character outside the BMP) are "unexpected end of hex
/// escape" or "lone leading surrogate", which send a client looking for a typo in its hex digits.
fn invalid_json_message(text: &str, err: &serde_json::Error) -> String {
    let message = format!("the request is not valid JSON: {err}");
    let surrogate_escape = text.as_bytes().windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && matches!(w[2], b'd' | b'D')
            && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
    });
    let said = err.to_string();
    if (surrogate_escape && said.contains("escape")) || said.contains("surrogate") {
        format!(
            "{message} (a \\uD800-\\uDFFF escape is half of a UTF-16 surrogate pair: it must be a high one \\uD800-\\uDBFF \
             followed at once by a low one \\uDC00-\\uDFFF; alone it is no character)"
        )
    } else {
        message
    }
}

#[cfg(test)]
mod invalid_json_tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_escape_is_named_as_such() {
        for text in [r#"{"id": 1, "method": "query", "params": {"query": "find \"\ud800\""}}"#, r#"{"x": "\uDC00 a"}"#]
        {
            let err = serde_json::from_str::<Value>(text).expect_err("a lone surrogate is not JSON text");
            let message = invalid_json_message(text, &err);
            assert!(message.contains("half of a UTF-16 surrogate pair"), "{message}");
        }
        // A pair is a character; other faults keep serde's words alone.
        assert!(serde_json::from_str::<Value>(r#"{"x": "\ud83d\ude00"}"#).is_ok());
        let text = r#"{"x": "\u12"}"#;
        let err = serde_json::from_str::<Value>(text).expect_err("a short escape");
        assert!(!invalid_json_message(text, &err).contains("surrogate"));
        let text = r#"{"x": 1,}"#;
        let err = serde_json::from_str::<Value>(text).expect_err("a trailing comma");
        assert_eq!(invalid_json_message(text, &err), format!("the request is not valid JSON: {err}"));
    }
}
