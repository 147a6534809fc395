//! The background worker: keeps a vector index per graph version, stepping aside for queries.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender, TryRecvError};
use fresco_graph::Snapshot;

use super::{
    BATCH_SIZE, DIMENSIONS, EmbedError, Embedder, Quantized, Unavailable, Vector, VectorIndex, VectorStore,
    default_model_dir, locate_model, text_key, unit_text,
};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaneState {
    /// Loading the model (or waiting for the first snapshot).
    Loading,
    /// Embedding the texts of `version` not yet in the store: `done` of the version's `total`
    /// distinct unit texts have a vector (those embedded before this job included).
    Embedding { done: usize, total: usize },
    /// The index of `version` is published.
    Ready,
    /// No model: the reason says how to get one. Retried on every new snapshot.
    Unavailable(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneStatus {
    pub state: LaneState,
    /// The snapshot version the state is about (0 before the first job).
    pub version: u64,
}

/// Counters since the worker started.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkerStats {
    /// Texts embedded by the model (not found in the store).
    pub embedded: u64,
    /// Jobs completed (indexes published, partial ones not counted).
    pub jobs: u64,
    /// Jobs abandoned for a newer snapshot (their finished batches are kept).
    pub superseded: u64,
    /// Partial indexes published during long jobs.
    pub partials: u64,
    /// Of the first partial index published, the units without a vector, and all its units.
    pub first_partial: Option<(usize, usize)>,
}

/// Threads for embedding a query: the cores there are (at most 4). A query is one short forward
/// pass that someone waits for; background embedding keeps to its own single thread.
pub fn default_query_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get()).min(4)
}

#[derive(Clone, Debug)]
pub struct EmbedWorkerOptions {
    pub model_dir: PathBuf,
    /// Threads for background embedding (0: the global rayon pool).
    pub threads: usize,
    /// Threads for [`EmbedWorker::embed_query`].
    pub query_threads: usize,
    /// During a long job, publish a partial index (see [`VectorIndex::missing`]) this often, and
    /// as soon as half the texts have vectors when no index was published yet.
    pub partial_every: Duration,
}

impl Default for EmbedWorkerOptions {
    fn default() -> Self {
        EmbedWorkerOptions {
            model_dir: default_model_dir(),
            threads: 1,
            query_threads: default_query_threads(),
            partial_every: Duration::from_secs(30),
        }
    }
}

enum Msg {
    Job(u64, Snapshot),
}

/// Queries go first: while a query holds a turn (the dense lane holds one while it embeds the
/// query's text and scans the index), the background embedding waits between two operations of
/// its forward pass, so that the query has every core and the memory bandwidth.
///
/// Why a cooperative pause and not a lower thread priority: candle runs some operations on a pool
/// shared by every embedder in the process, whose waiters spin, and a low-priority worker holding
/// it made normal-priority queries wait (tried and reverted: the benchmark's `context` p95 went
/// from 118 ms to 1.7 s). A worker paused here holds nothing: it stops only between operations.
#[derive(Debug, Default)]
pub struct QueryFirst {
    queries: AtomicUsize,
    lock: Mutex<()>,
    idle: Condvar,
}

/// How long the background embedding waits at one pause point while queries keep coming: it then
/// does one more operation. With [`PAUSE_BUDGET_PER_TEXT`], a stream of queries slows it down but
/// never starves it.
pub(super) const LONGEST_PAUSE: Duration = Duration::from_millis(200);

/// How long, in all, the background embedding steps aside for queries per text it embeds (see
/// [`Embedder::embed_behind_queries`]).
pub(super) const PAUSE_BUDGET_PER_TEXT: Duration = Duration::from_millis(250);

/// A query's turn (see [`QueryFirst::begin_query`]); the background embedding resumes when the
/// last one is dropped.
pub struct QueryTurn<'a>(&'a QueryFirst);

impl Drop for QueryTurn<'_> {
    fn drop(&mut self) {
        if self.0.queries.fetch_sub(1, Ordering::SeqCst) == 1 {
            // Taking the lock orders this with a waiter between its check and its wait.
            let _guard = self.0.lock.lock().unwrap_or_else(|p| p.into_inner());
            self.0.idle.notify_all();
        }
    }
}

impl QueryFirst {
    /// Marks a query as running until the returned turn is dropped.
    pub fn begin_query(&self) -> QueryTurn<'_> {
        self.queries.fetch_add(1, Ordering::SeqCst);
        QueryTurn(self)
    }

    /// Whether a query holds a turn now.
    pub fn query_running(&self) -> bool {
        self.queries.load(Ordering::SeqCst) > 0
    }

    /// Called by the background embedding between operations: returns at once when no query
    /// runs, else when the last one ends (or after [`LONGEST_PAUSE`]).
    pub fn pause_for_queries(&self) {
        if !self.query_running() {
            return;
        }
        let guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self.idle.wait_timeout_while(guard, LONGEST_PAUSE, |_| self.query_running());
    }
}

struct Shared {
    status: Mutex<LaneStatus>,
    index: RwLock<Option<(u64, Arc<VectorIndex>)>>,
    query: RwLock<Option<Arc<Embedder>>>,
    embedded: AtomicU64,
    jobs: AtomicU64,
    partials: AtomicU64,
    first_partial: Mutex<Option<(usize, usize)>>,
    superseded: AtomicU64,
    stop: AtomicBool,
    query_first: QueryFirst,
}

impl Shared {
    fn set(&self, state: LaneState, version: u64) {
        *self.status.lock().unwrap_or_else(|p| p.into_inner()) = LaneStatus { state, version };
    }
}

/// The dense lane's background thread: give it every published snapshot with
/// [`EmbedWorker::submit`]; it embeds what the store lacks and publishes an index per version.
/// Only the newest pending snapshot is worked on; a newer one arriving mid-job supersedes it at
/// the next batch boundary (finished batches stay in the store).
pub struct EmbedWorker {
    tx: Option<Sender<Msg>>,
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl EmbedWorker {
    /// Starts the thread; the model is loaded there (status `Loading` meanwhile).
    pub fn start(store: VectorStore, options: EmbedWorkerOptions) -> EmbedWorker {
        let (tx, rx) = crossbeam::channel::unbounded();
        let shared = Arc::new(Shared {
            status: Mutex::new(LaneStatus { state: LaneState::Loading, version: 0 }),
            index: RwLock::new(None),
            query: RwLock::new(None),
            embedded: AtomicU64::new(0),
            jobs: AtomicU64::new(0),
            partials: AtomicU64::new(0),
            first_partial: Mutex::new(None),
            superseded: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            query_first: QueryFirst::default(),
        });
        let thread = {
            let shared = shared.clone();
            std::thread::Builder::new().name("fresco-embed".into()).spawn(move || {
                let state = shared.clone();
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || {
                    let mut worker = Worker { shared, store, options, rx, embedder: None, files: HashMap::new() };
                    worker.run();
                }));
                if outcome.is_err() {
                    // Never leave the lane saying "embedding" forever: report it down.
                    state.set(LaneState::Unavailable("the embedding thread failed (a bug); restart fresco".into()), 0);
                }
            })
        };
        let thread = match thread {
            Ok(handle) => Some(handle),
            Err(e) => {
                shared.set(LaneState::Unavailable(format!("cannot start the embedding thread: {e}")), 0);
                None
            }
        };
        EmbedWorker { tx: Some(tx), shared, thread }
    }

    /// Queues a snapshot (cheap: snapshots share structure).
    pub fn submit(&self, version: u64, snapshot: Snapshot) {
        if let Some(tx) = &self.tx {
            tx.send(Msg::Job(version, snapshot)).ok();
        }
    }

    pub fn status(&self) -> LaneStatus {
        self.shared.status.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The newest published index and its version (possibly partial: see
    /// [`VectorIndex::missing`]).
    pub fn index(&self) -> Option<(u64, Arc<VectorIndex>)> {
        self.shared.index.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn stats(&self) -> WorkerStats {
        WorkerStats {
            embedded: self.shared.embedded.load(Ordering::Relaxed),
            jobs: self.shared.jobs.load(Ordering::Relaxed),
            superseded: self.shared.superseded.load(Ordering::Relaxed),
            partials: self.shared.partials.load(Ordering::Relaxed),
            first_partial: *self.shared.first_partial.lock().unwrap_or_else(|p| p.into_inner()),
        }
    }

    /// Embeds a query on the query pool. It does not wait for background batches: the background
    /// embedding pauses while it runs (see [`QueryFirst`]).
    pub fn embed_query(&self, text: &str) -> Result<Vector, EmbedError> {
        let embedder = self.shared.query.read().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(embedder) = embedder else {
            return Err(match self.status().state {
                LaneState::Unavailable(reason) => EmbedError::Unavailable(Unavailable { reason }),
                _ => EmbedError::Loading,
            });
        };
        embedder.embed_query_first(text, &self.shared.query_first)
    }

    /// Holds the background embedding paused until the turn is dropped: the dense lane takes one
    /// for the query's embedding and its scan of the index (the scan of 62k vectors reads 24 MB,
    /// and beside a running worker took 5.8 to 7.2 ms instead of 4.4 to 4.9; holding a turn,
    /// 4.2 to 5.4 ms).
    pub fn query_turn(&self) -> QueryTurn<'_> {
        self.shared.query_first.begin_query()
    }

    /// MiniLM tokens of `text` (no special tokens, no truncation); `None` until the model is
    /// loaded (and while it is unavailable).
    pub fn count_tokens(&self, text: &str) -> Option<usize> {
        self.shared.query.read().unwrap_or_else(|p| p.into_inner()).as_ref().map(|e| e.count_tokens(text))
    }

    /// Waits until the index of `version` (or a newer one) is complete, or the lane is
    /// unavailable, or `timeout` passes. Returns the last status.
    pub fn wait_ready(&self, version: u64, timeout: Duration) -> LaneStatus {
        let deadline = Instant::now() + timeout;
        loop {
            let status = self.status();
            let done = match &status.state {
                LaneState::Ready => status.version >= version,
                LaneState::Unavailable(_) => true,
                _ => false,
            };
            if done || Instant::now() >= deadline {
                return status;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Stops the thread after its current batch and waits for it.
    pub fn shutdown(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.tx = None;
        if let Some(thread) = self.thread.take() {
            thread.join().ok();
        }
    }
}

impl Drop for EmbedWorker {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}

/// Per file: the ids and text keys of its units, valid while path, revision and module match.
struct FileKeys {
    revision: fresco_graph::Revision,
    module: String,
    units: Vec<(Box<str>, u64)>,
}

struct Worker {
    shared: Arc<Shared>,
    store: VectorStore,
    options: EmbedWorkerOptions,
    rx: Receiver<Msg>,
    embedder: Option<Embedder>,
    files: HashMap<String, FileKeys>,
}

enum Outcome {
    Done,
    Superseded(u64, Snapshot),
    Stopped,
}

impl Worker {
    fn run(&mut self) {
        self.ensure_model(0);
        let mut next: Option<(u64, Snapshot)> = None;
        loop {
            let (version, snapshot) = match next.take() {
                Some(job) => job,
                None => match self.rx.recv() {
                    Ok(Msg::Job(v, s)) => (v, s),
                    Err(_) => return,
                },
            };
            // Only the newest pending snapshot matters.
            let (version, snapshot) = self.newest((version, snapshot));
            if self.stopped() {
                return;
            }
            if !self.ensure_model(version) {
                continue;
            }
            match self.job(version, &snapshot) {
                Ok(Outcome::Done) => {}
                Ok(Outcome::Superseded(v, s)) => {
                    self.shared.superseded.fetch_add(1, Ordering::Relaxed);
                    next = Some((v, s));
                }
                Ok(Outcome::Stopped) => return,
                Err(e) => self.shared.set(LaneState::Unavailable(format!("embedding failed: {e}")), version),
            }
        }
    }

    fn stopped(&self) -> bool {
        self.shared.stop.load(Ordering::Relaxed)
    }

    fn newest(&self, mut job: (u64, Snapshot)) -> (u64, Snapshot) {
        while let Ok(Msg::Job(v, s)) = self.rx.try_recv() {
            job = (v, s);
        }
        job
    }

    /// Loads the model if needed; false (status Unavailable) when it cannot be.
    fn ensure_model(&mut self, version: u64) -> bool {
        if self.embedder.is_some() {
            return true;
        }
        // `loading` only once there is a model to load: a model missing or failing its hash
        // check stays `unavailable` through every retry, instead of passing for one on its way
        // (a query waiting on the lane read `loading` one time in four).
        let files = match locate_model(&self.options.model_dir) {
            Ok(files) => files,
            Err(unavailable) => {
                self.shared.set(LaneState::Unavailable(unavailable.reason), version);
                return false;
            }
        };
        self.shared.set(LaneState::Loading, version);
        let loaded = Embedder::load(&files, self.options.threads)
            .and_then(|e| Ok((e.with_threads(self.options.query_threads)?, e)));
        match loaded {
            Ok((query, embedder)) => {
                *self.shared.query.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(query));
                self.embedder = Some(embedder);
                true
            }
            Err(e) => {
                let reason = match e {
                    EmbedError::Unavailable(u) => u.reason,
                    e => format!("the embedding model could not be loaded: {e}"),
                };
                self.shared.set(LaneState::Unavailable(reason), version);
                false
            }
        }
    }

    fn job(&mut self, version: u64, snapshot: &Snapshot) -> Result<Outcome, EmbedError> {
        // 1. The text key of every unit; texts only for those not stored yet.
        let mut previous = self.shared.index.read().unwrap_or_else(|p| p.into_inner()).clone();
        let rows_by_key = |previous: &Option<(u64, Arc<VectorIndex>)>| -> HashMap<u64, u32> {
            previous
                .as_ref()
                .map(|(_, ix)| ix.keys.iter().enumerate().map(|(i, &k)| (k, i as u32)).collect())
                .unwrap_or_default()
        };
        let mut known = rows_by_key(&previous);
        let mut files: HashMap<String, FileKeys> = HashMap::with_capacity(snapshot.file_count());
        let mut missing: Vec<(u64, String)> = Vec::new();
        let mut pending: std::collections::HashSet<u64> = Default::default();
        for entry in snapshot.files() {
            let g = &entry.graph;
            let mut cached = self.files.remove(&g.path).filter(|f| f.revision == g.revision && f.module == g.module);
            if let Some(c) = &cached {
                for (_, key) in &c.units {
                    if !known.contains_key(key) && !self.store.contains(*key)? {
                        cached = None; // vectors lost from the store: recompute the texts
                        break;
                    }
                }
            }
            let keys = match cached {
                Some(keys) => keys,
                None => {
                    let mut units = Vec::with_capacity(g.units.len());
                    // Lambdas are embedded as part of the unit that contains them.
                    for unit in g.units.iter().filter(|u| !u.is_lambda()) {
                        let text = unit_text(unit, entry.source_of(unit));
                        let key = text_key(&text);
                        units.push((Box::from(unit.id.as_str()), key));
                        if !known.contains_key(&key) && !pending.contains(&key) && !self.store.contains(key)? {
                            pending.insert(key);
                            missing.push((key, text));
                        }
                    }
                    FileKeys { revision: g.revision, module: g.module.clone(), units }
                }
            };
            files.insert(g.path.clone(), keys);
        }
        // Progress counts the snapshot's distinct texts, those with a vector from before
        // included: a job resumed after an interrupted one reads "700 of 977", not "124 of 401".
        let distinct: std::collections::HashSet<u64> =
            files.values().flat_map(|f| f.units.iter().map(|(_, key)| *key)).collect();
        let already = distinct.len().saturating_sub(missing.len());
        self.files = files;

        // 2. Embed what is missing, shortest first, persisting every batch.
        let total = missing.len();
        let Some(embedder) = self.embedder.as_ref() else {
            // `run` loads the model before any job; without one there is nothing to embed with.
            return Err(EmbedError::Loading);
        };
        missing.sort_by_key(|(_, t)| t.len());
        let mut fresh: HashMap<u64, Quantized> = HashMap::new();
        let mut done = 0;
        let mut last_publish = Instant::now();
        if total > 0 {
            self.shared.set(LaneState::Embedding { done: already, total: already + total }, version);
            // Restarted on stored vectors (or a first job the store mostly covers): what the
            // store holds serves at once, not after the first batch is embedded (a query in
            // between read `embedding` with no hits though 85 % of the texts had vectors).
            if self.nothing_published() && 2 * already >= already + total {
                self.publish_partial(version, snapshot, previous.as_ref(), &known, &fresh)?;
                last_publish = Instant::now();
                // Built from the store once: the final index takes its rows from this one.
                previous = self.shared.index.read().unwrap_or_else(|p| p.into_inner()).clone();
                known = rows_by_key(&previous);
            }
        }
        for chunk in missing.chunks(BATCH_SIZE) {
            if self.stopped() {
                return Ok(Outcome::Stopped);
            }
            match self.rx.try_recv() {
                Ok(Msg::Job(v, s)) => {
                    let job = self.newest((v, s));
                    return Ok(Outcome::Superseded(job.0, job.1));
                }
                Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => {}
            }
            let texts: Vec<&str> = chunk.iter().map(|(_, t)| t.as_str()).collect();
            let vectors = embedder.embed_behind_queries(&texts, &self.shared.query_first)?;
            let items: Vec<(u64, Vector)> = chunk.iter().map(|(k, _)| *k).zip(vectors).collect();
            self.store.put_batch(&items)?;
            for (k, v) in &items {
                fresh.insert(*k, Quantized::of(v));
            }
            done += chunk.len();
            self.shared.embedded.fetch_add(chunk.len() as u64, Ordering::Relaxed);
            self.shared.set(LaneState::Embedding { done: already + done, total: already + total }, version);
            // A lane with no index at all publishes one as soon as half of the version's texts
            // have vectors: a daemon restarted on stored vectors answered `dense unavailable` for
            // the first `partial_every` (a black-box finding) while nearly all of them could
            // serve. Not before half: the shortest texts come first (modules, constants), and a
            // lane of a few dozen of them, fused at full weight, ranked worse than BM25 alone
            // (a review finding).
            let half_covered = 2 * (already + done) >= already + total;
            if done < total
                && ((self.nothing_published() && half_covered) || last_publish.elapsed() >= self.options.partial_every)
            {
                self.publish_partial(version, snapshot, previous.as_ref(), &known, &fresh)?;
                last_publish = Instant::now();
            }
        }
        if total > 0 {
            self.store.flush()?;
        }

        // 3. Publish the index of this version.
        let index = self.build(snapshot, previous.as_ref(), &known, &fresh)?;
        *self.shared.index.write().unwrap_or_else(|p| p.into_inner()) = Some((version, Arc::new(index)));
        self.shared.jobs.fetch_add(1, Ordering::Relaxed);
        self.shared.set(LaneState::Ready, version);
        if total > 0 {
            // The model's activations for each batch were freed into malloc's arenas, which keep
            // them: on django, with every unit embedded, the daemon held 670 MB, 566 MB once
            // returned.
            crate::process::release_free_memory();
        }
        Ok(Outcome::Done)
    }

    fn nothing_published(&self) -> bool {
        self.shared.index.read().unwrap_or_else(|p| p.into_inner()).is_none()
    }

    /// Publishes the index of `version` with the vectors there are so far (`partial`).
    fn publish_partial(
        &self,
        version: u64,
        snapshot: &Snapshot,
        previous: Option<&(u64, Arc<VectorIndex>)>,
        known: &HashMap<u64, u32>,
        fresh: &HashMap<u64, Quantized>,
    ) -> Result<(), EmbedError> {
        let index = self.build(snapshot, previous, known, fresh)?;
        self.shared
            .first_partial
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_or_insert((index.missing(), index.len() + index.missing()));
        *self.shared.index.write().unwrap_or_else(|p| p.into_inner()) = Some((version, Arc::new(index)));
        self.shared.partials.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn build(
        &self,
        snapshot: &Snapshot,
        previous: Option<&(u64, Arc<VectorIndex>)>,
        known: &HashMap<u64, u32>,
        fresh: &HashMap<u64, Quantized>,
    ) -> Result<VectorIndex, EmbedError> {
        let mut index = VectorIndex::default();
        let n = snapshot.totals().units;
        index.ids.reserve_exact(n);
        index.keys.reserve_exact(n);
        index.scales.reserve_exact(n);
        index.data.reserve_exact(n * DIMENSIONS);
        for entry in snapshot.files() {
            let Some(keys) = self.files.get(&entry.graph.path) else {
                continue;
            };
            for (id, key) in &keys.units {
                if let (Some(&row), Some((_, prev))) = (known.get(key), previous) {
                    let row = row as usize;
                    index.ids.push(id.clone());
                    index.keys.push(*key);
                    index.scales.push(prev.scales[row]);
                    index.data.extend_from_slice(&prev.data[row * DIMENSIONS..(row + 1) * DIMENSIONS]);
                } else if let Some(q) = fresh.get(key) {
                    index.push(id.clone(), *key, q);
                } else if let Some(q) = self.store.get_quantized(*key)? {
                    index.push(id.clone(), *key, &q);
                } else {
                    index.missing += 1;
                }
            }
        }
        Ok(index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_background_pause_is_free_without_queries() {
        let gate = QueryFirst::default();
        let t = Instant::now();
        for _ in 0..1000 {
            gate.pause_for_queries();
        }
        assert!(t.elapsed() < LONGEST_PAUSE, "no query runs, yet the pause waited");
    }

    #[test]
    fn the_background_waits_until_the_last_query_ends() {
        let gate = Arc::new(QueryFirst::default());
        let first = gate.begin_query();
        let second = gate.begin_query();
        let ended = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (gate, ended) = (gate.clone(), ended.clone());
            std::thread::spawn(move || {
                gate.pause_for_queries();
                ended.load(Ordering::SeqCst)
            })
        };
        std::thread::sleep(Duration::from_millis(20));
        drop(first);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!waiter.is_finished(), "resumed while a query still ran");
        ended.store(true, Ordering::SeqCst);
        drop(second);
        assert!(waiter.join().unwrap(), "resumed before the last query ended");
        assert!(!gate.query_running());
    }

    #[test]
    fn a_stream_of_queries_slows_the_background_but_does_not_stop_it() {
        let gate = QueryFirst::default();
        let _endless = gate.begin_query();
        let t = Instant::now();
        gate.pause_for_queries();
        let waited = t.elapsed();
        assert!(waited >= LONGEST_PAUSE && waited < LONGEST_PAUSE * 5, "waited {waited:?}");
    }
}
