//! `fresco serve`: the daemon.
//!
//! Threads: the watcher (notify, debounced, in the indexer crate) sends batches over a crossbeam
//! channel to the single indexer thread, which applies them and publishes each new version by
//! swapping an `Arc` (readers clone it and never hold a lock while they work); the main thread
//! accepts connections; each connection reads requests on its own thread and runs queries on
//! worker threads so that a `cancel` can arrive while a query runs.
//!
//! Modules: [`gate`] (the freshness gate), [`connection`] (a client's connection), [`query`]
//! (the `query` and `export` requests), [`slots`] (how many queries compute at once).

mod connection;
mod gate;
mod query;
mod slots;
mod workers;

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use crossbeam::channel::{Receiver, Sender};
use fresco_graph::{Snapshot, VersionLog};
use fresco_indexer::lanes::{LaneUpdate, RetrievalLanes};
use fresco_indexer::watch::{self, Batch, Debounce, Tracker};
use fresco_indexer::{Indexer, IndexerOptions};

use crate::paths::daemon_paths;
use connection::{OpenConnection, handle_connection, refuse_busy};
use gate::{cookie_dir, directory_identity, hard_linked_files, refresh_hard_links};
use slots::{QuerySlots, max_running_queries};
use workers::QueryWorkers;

/// How long a stopping daemon waits for the queries in flight to be answered.
const SHUTDOWN_QUERY_WAIT: Duration = Duration::from_secs(5);
/// How long a stopping daemon waits for the indexer to write what it published.
const SHUTDOWN_PERSIST_WAIT: Duration = Duration::from_secs(30);

const MAX_CONNECTIONS: usize = 64;
/// `sun_path`'s size on Linux, its terminating NUL included.
const MAX_SOCKET_PATH_BYTES: usize = 108;

/// One published version, as readers see it.
struct Published {
    snapshot: Snapshot,
    history: Arc<VersionLog>,
}

struct Shared {
    root: PathBuf,
    /// What opening the stored index redid at the start, and how many files it reused as stored
    /// then (`status` says whether a restart reused the index); `None` when nothing was stored.
    caught_up: Option<(fresco_indexer::CatchUp, usize)>,
    /// The socket this daemon listens on (recorded in the index directory for clients of other
    /// runtime directories: see [`record_socket_again`]).
    socket: PathBuf,
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
    /// Bytes of answer lines computed and not yet written (see [`connection::UNWRITTEN_ANSWER_BYTES`]).
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
    /// Why nothing is stored, when the daemon started on an index it could not write (see
    /// [`serve`]): every version is then served from memory (`status` says so, as
    /// `not_stored`).
    unstored: Option<String>,
    /// The index directory (`--db`, made absolute).
    db: PathBuf,
    lanes: Arc<RetrievalLanes>,
    /// Queries running at once, across connections (see [`QuerySlots`]).
    query_slots: QuerySlots,
    /// The threads queries run on (see [`QueryWorkers`]).
    query_workers: QueryWorkers,
}

impl Shared {
    fn current(&self) -> Arc<Published> {
        self.current.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn publish(&self, published: Published) {
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Arc::new(published);
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
    refuse_if_served_elsewhere(&root, &options.db, &paths.socket)?;
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
    // The freshness gate writes cookie files the watcher must report: where none can be written
    // (a read-only checkout), no query could be answered, so no daemon starts. Asked once the
    // index directory exists (cookies go there; on a first run the root would take the probe).
    let (mut indexer, unstored) = match open_when_free(&root, &options, &paths.socket) {
        Ok(indexer) => {
            gate::check_cookies_writable(&root, &options.db)?;
            (indexer, None)
        }
        // A full disk, a read-only checkout: the commands answer from the files indexed in
        // memory then, and so does the daemon, which keeps them fresh all the same.
        Err(err) if crate::store_unwritable(&err) => {
            gate::check_cookies_writable(&root, &options.db)?;
            let why = crate::error_text(&err);
            eprintln!(
                "fresco: warning: {why}; this daemon serves the files indexed in memory and stores nothing: \
                 once the index can be written there, restart the daemon (`fresco stop`, then `fresco serve`)"
            );
            let mut indexer = Indexer::in_memory_numbered_after(&root, &options.db, options.indexer.clone());
            indexer.refresh()?;
            (indexer, Some(why))
        }
        Err(err) => return Err(err),
    };
    // Settings are kept beside a stored index only (the commands after this one read them there).
    if unstored.is_none() {
        (options.remember)()?;
    }
    indexer.set_defer_persistence(true);
    if let Some(why) = indexer.rebuilt_store.take() {
        eprintln!("fresco: warning: {why}");
    }
    for issue in indexer.walk_issues() {
        eprintln!("fresco: warning: {} {}", crate::render::printable(&issue.path), issue.message);
    }
    let t = indexer.snapshot().totals();
    // Whether the stored index was reused, and what catching up with the files redid.
    let reuse = match indexer.caught_up() {
        Some(c) => format!(
            "; {} reused as stored, {} changed, {} removed, {} resolved again",
            c.reused_of(t.files),
            c.changed_files,
            c.removed_files,
            c.resolved_files
        ),
        None => String::new(),
    };
    let banner = format!(
        "fresco: serving {} (version {}, {} files, {} units, {} edges{reuse}) on {} after {:.2} s",
        root.display(),
        indexer.snapshot().version(),
        t.files,
        t.units,
        t.edges,
        paths.socket.display(),
        started.elapsed().as_secs_f64()
    );

    // The dense lane keeps its vectors in the index directory: not where nothing is stored.
    let vectors_dir = match &unstored {
        None => Ok(options.db.as_path()),
        Some(why) => Err(format!("the index is not stored, and its vectors with it ({why})")),
    };
    let (lanes, lane_updates) = RetrievalLanes::start(vectors_dir, indexer.snapshot().clone());
    let hard_linked = Mutex::new(hard_linked_files(&root, indexer.snapshot().files().map(|f| f.graph.path.as_str())));
    let shared = Arc::new(Shared {
        lanes,
        root: root.clone(),
        caught_up: indexer.caught_up().map(|c| (c, c.reused_of(t.files))),
        socket: paths.socket.clone(),
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
        unstored: unstored.clone(),
        db: options.db.clone(),
        walk_issues: Mutex::new(indexer.walk_issues().to_vec()),
        query_slots: QuerySlots::new(max_running_queries()),
        query_workers: QueryWorkers::new(),
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
    if shared.unstored.is_some() {
        eprintln!(
            "fresco: warning: the socket is not recorded in {} either: clients must share this runtime directory",
            options.db.display()
        );
    } else if let Err(e) = fs::write(&recorded_socket, format!("{}\n", paths.socket.display())) {
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
    // Only what this daemon wrote (one that stores nothing wrote none: another may have).
    if shared.unstored.is_none() {
        let _ = fs::remove_file(&recorded_socket);
    }
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
                    Ok(()) => {
                        *last_error = None;
                        record_socket_again(&shared);
                    }
                    // Another process wrote the store meanwhile: its message says to restart.
                    Err(e @ fresco_indexer::IndexError::StoreChanged { .. }) => {
                        eprintln!("fresco: cannot write the index: {e}");
                        *last_error = Some(e.to_string());
                    }
                    Err(e) => {
                        // The store keeps its last complete version; the next batch tries again
                        // (after a failed write, by opening it anew: see `Indexer::persist`).
                        eprintln!(
                            "fresco: cannot write the index: {e}; it keeps its last complete version, and this \
                             daemon serves the newer ones from memory and tries to write them at each change"
                        );
                        *last_error = Some(format!(
                            "{e}; the store keeps its last complete version, and the newer ones are written when \
                             a write succeeds"
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

/// The socket's path written again into the index directory when it is not there: the index
/// directory deleted while the daemon runs is made anew by the next write, without it, and
/// clients of another runtime directory then found no daemon and waited minutes for the index
/// it holds. A stat per written batch.
fn record_socket_again(shared: &Shared) {
    let recorded = shared.db.join(crate::paths::DAEMON_SOCKET_FILE);
    if shared.unstored.is_none() && !shared.shutdown.load(Ordering::Relaxed) && !recorded.exists() {
        let _ = fs::write(&recorded, format!("{}\n", shared.socket.display()));
    }
}

/// Writes what was published and not yet stored (normally nothing: each batch is written after
/// it is published).
fn persist_at_exit(indexer: &mut Indexer) {
    match indexer.persist() {
        // Everything published is stored: the numbers reserved past it were never handed out.
        Ok(()) => match indexer.release_unused_versions() {
            Ok(()) => {}
            // Nothing stored: the numbers handed out are what could not be recorded.
            Err(e) if indexer.stored_history().is_none() => eprintln!(
                "fresco: warning: the version numbers this daemon handed out (up to {}) could not be \
                 recorded ({e}): a later session may hand them out again",
                indexer.snapshot().version()
            ),
            Err(e) => eprintln!("fresco: cannot release unused version numbers at exit: {e}"),
        },
        Err(e) => eprintln!("fresco: cannot write the index at exit: {e}"),
    }
}

/// How long a starting daemon waits for another fresco command (an in-process `query` or
/// `index` bringing the stored index up to date) to release the index.
const STORE_RELEASE_WAIT: Duration = Duration::from_secs(300);

/// Opens the stored index, waiting while another fresco process holds it: an in-process command
/// catching up after a branch switch holds it for seconds, and a daemon started meanwhile (an
/// editor checking with `status`, then starting `serve`) died on the store's lock.
/// Refuses to start where a daemon of another runtime directory (`FRESCO_RUNTIME_DIR`,
/// `XDG_RUNTIME_DIR`) serves the root: it records its socket in the index directory.
fn refuse_if_served_elsewhere(root: &Path, db: &Path, own_socket: &Path) -> Result<()> {
    if let Some(other) = crate::paths::recorded_socket(root, db)
        && other != own_socket
        && UnixStream::connect(&other).is_ok()
    {
        bail!(
            "a daemon already serves {} on {} (started with another FRESCO_RUNTIME_DIR or XDG_RUNTIME_DIR)",
            root.display(),
            other.display()
        );
    }
    Ok(())
}

fn open_when_free(root: &Path, options: &ServeOptions, own_socket: &Path) -> Result<Indexer> {
    let started = Instant::now();
    let mut told = false;
    loop {
        match Indexer::open(root, &options.db, options.indexer.clone()).map_err(anyhow::Error::from) {
            Err(err)
                if err.chain().any(|e| e.to_string().contains("could not acquire lock"))
                    && started.elapsed() < STORE_RELEASE_WAIT =>
            {
                // What holds it may be a daemon of another runtime directory, still indexing when
                // this one started: once it serves, this one is refused, as it would have been
                // had it started then (it waited, and took over when the other stopped).
                refuse_if_served_elsewhere(root, &options.db, own_socket)?;
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
