//! The dense retrieval lane: sentence embeddings of units with all-MiniLM-L6-v2 (candle, CPU).
//!
//! - [`locate_model`] finds the three model files and checks their SHA-256 (once: the verdict is
//!   cached in a marker file next to the weights, keyed by size and mtime). fresco never runs
//!   Python; the model is downloaded on first use by `crate::model_fetch`, and when it is
//!   missing the reason given says how to get it.
//! - [`Embedder`]: BERT forward, mean pooling over the attention mask, L2 normalisation; inputs
//!   truncated to [`MAX_TOKENS`] tokens, batched by [`BATCH_SIZE`], sorted by length to pad little.
//! - [`unit_text()`]: what is embedded for a unit.
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
//!
//! Modules: [`model_files`] (locating and checking the model), [`embedder`] (the forward pass,
//! token counts), [`unit_text`](mod@unit_text), [`vectors`] (quantised vectors, store, index),
//! [`worker`] (the background worker and [`QueryFirst`]).

mod embedder;
mod model_files;
mod unit_text;
mod vectors;
mod worker;

pub use embedder::*;
pub use model_files::*;
pub use unit_text::*;
pub use vectors::*;
pub use worker::*;
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
