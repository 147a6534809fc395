//! The embedder: BERT forward, mean pooling, L2 normalisation, and the tokenizer's token count.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::Tokenizer;

use crate::minilm::{Bert, Config};

use super::worker::PAUSE_BUDGET_PER_TEXT;
use super::{BACKGROUND_BATCH_SIZE, BATCH_SIZE, DIMENSIONS, MAX_TOKENS, ModelFiles, QueryFirst, Unavailable, Vector};

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
    /// holding one operation for up to [`LONGEST_PAUSE`](super::worker::LONGEST_PAUSE), stretched one text over dozens of
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
