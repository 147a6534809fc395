//! MiniLM's encoder (BERT, inference only) on candle: the forward pass the dense lane embeds with.
//!
//! Written out here, rather than taken whole from a model library, for one reason: the background
//! embedder must be able to stop between two operations of a forward pass when a query needs the
//! cores (see [`crate::embed::QueryFirst`]). A text of code takes 60 to 90 ms to embed on one
//! thread, longer than a whole query (about 15 ms), so pausing between passes would come too
//! late. [`Bert::forward`] calls a `pause` hook before each operation instead, and the background
//! embedder's hook waits while a query holds a turn.
//!
//! The weights and the operations are BERT's, as in Hugging Face transformers' `BertModel` and
//! candle-transformers' port of it (which fresco used before; `tests/embed.rs` checks the vectors
//! against ones recorded from that port):
//! embeddings (word + position + token type, layer norm), then per layer self-attention with the
//! padding masked out, a residual and a layer norm, the feed-forward block (GELU, erf form), a
//! residual and a layer norm. No pooler: the embedder mean-pools the last hidden states itself.

use candle_core::{D, DType, Module, Result, Tensor};
use candle_nn::{Embedding, LayerNorm, Linear, VarBuilder, embedding, layer_norm, linear};

/// The fields of a BERT `config.json` the encoder needs.
#[derive(Clone, Debug, serde::Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub hidden_act: String,
    pub max_position_embeddings: usize,
    pub type_vocab_size: usize,
    pub layer_norm_eps: f64,
}

struct Layer {
    query: Dense,
    key: Dense,
    value: Dense,
    attention_output: Dense,
    attention_norm: LayerNorm,
    intermediate: Dense,
    output: Dense,
    output_norm: LayerNorm,
}

/// The encoder: token ids in, one hidden state per token out.
pub struct Bert {
    word_embeddings: Embedding,
    position_embeddings: Embedding,
    token_type_embeddings: Embedding,
    embedding_norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    head_size: usize,
}

impl Bert {
    /// Loads the weights (names as in the Hugging Face checkpoint, with or without a `bert.`
    /// prefix). Only the erf form of GELU, MiniLM's, is supported.
    pub fn load(vb: VarBuilder, config: &Config) -> Result<Bert> {
        if config.hidden_act != "gelu" {
            candle_core::bail!("unsupported activation {:?} (the encoder implements \"gelu\")", config.hidden_act);
        }
        if config.num_attention_heads == 0 || !config.hidden_size.is_multiple_of(config.num_attention_heads) {
            candle_core::bail!(
                "hidden size {} is not a multiple of {} attention heads",
                config.hidden_size,
                config.num_attention_heads
            );
        }
        let vb = if vb.contains_tensor("bert.embeddings.word_embeddings.weight") { vb.pp("bert") } else { vb };
        let (hidden, eps) = (config.hidden_size, config.layer_norm_eps);
        let emb = vb.pp("embeddings");
        let layers = (0..config.num_hidden_layers)
            .map(|i| {
                let vb = vb.pp(format!("encoder.layer.{i}"));
                let attention = vb.pp("attention");
                Ok(Layer {
                    query: Dense(linear(hidden, hidden, attention.pp("self.query"))?),
                    key: Dense(linear(hidden, hidden, attention.pp("self.key"))?),
                    value: Dense(linear(hidden, hidden, attention.pp("self.value"))?),
                    attention_output: Dense(linear(hidden, hidden, attention.pp("output.dense"))?),
                    attention_norm: layer_norm(hidden, eps, attention.pp("output.LayerNorm"))?,
                    intermediate: Dense(linear(hidden, config.intermediate_size, vb.pp("intermediate.dense"))?),
                    output: Dense(linear(config.intermediate_size, hidden, vb.pp("output.dense"))?),
                    output_norm: layer_norm(hidden, eps, vb.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Bert {
            word_embeddings: embedding(config.vocab_size, hidden, emb.pp("word_embeddings"))?,
            position_embeddings: embedding(config.max_position_embeddings, hidden, emb.pp("position_embeddings"))?,
            token_type_embeddings: embedding(config.type_vocab_size, hidden, emb.pp("token_type_embeddings"))?,
            embedding_norm: layer_norm(hidden, eps, emb.pp("LayerNorm"))?,
            layers,
            heads: config.num_attention_heads,
            head_size: hidden / config.num_attention_heads,
        })
    }

    /// The last hidden states, `(batch, tokens, hidden)`, of `ids` `(batch, tokens)` (u32) with
    /// `mask` `(batch, tokens)` (u32: 1 for a token, 0 for padding). Every sequence is one
    /// segment (token type 0). `pause` runs before each operation.
    pub fn forward(&self, ids: &Tensor, mask: &Tensor, pause: &dyn Fn()) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        let positions = Tensor::arange(0u32, tokens as u32, ids.device())?;
        pause();
        let words = self.word_embeddings.forward(ids)?;
        let types = self.token_type_embeddings.forward(&ids.zeros_like()?)?;
        let summed = (words + types)?.broadcast_add(&self.position_embeddings.forward(&positions)?)?;
        let mut hidden = self.embedding_norm.forward(&summed)?;
        // Padding gets the lowest score before the softmax: (1 - mask) * f32::MIN, per key.
        let mask = mask.to_dtype(DType::F32)?.reshape((batch, 1, 1, tokens))?;
        let mask = (mask.ones_like()? - &mask)?.affine(f32::MIN as f64, 0.0)?;
        let scale = (self.head_size as f64).sqrt();
        // (batch, tokens, hidden) -> (batch, heads, tokens, head_size)
        let split = |x: Tensor| x.reshape((batch, tokens, self.heads, self.head_size))?.transpose(1, 2)?.contiguous();
        for layer in &self.layers {
            pause();
            let q = split(layer.query.forward(&hidden)?)?;
            pause();
            let k = split(layer.key.forward(&hidden)?)?;
            pause();
            let v = split(layer.value.forward(&hidden)?)?;
            pause();
            let scores = (q.matmul(&k.t()?)? / scale)?.broadcast_add(&mask)?;
            let probabilities = candle_nn::ops::softmax(&scores, D::Minus1)?;
            pause();
            let context = probabilities.matmul(&v)?.transpose(1, 2)?.contiguous()?.flatten_from(D::Minus2)?;
            pause();
            let attended = layer.attention_norm.forward(&(layer.attention_output.forward(&context)? + &hidden)?)?;
            pause();
            let intermediate = layer.intermediate.forward(&attended)?.gelu_erf()?;
            pause();
            hidden = layer.output_norm.forward(&(layer.output.forward(&intermediate)? + &attended)?)?;
        }
        Ok(hidden)
    }
}

/// Token rows (batch x tokens) up to which [`Dense::forward`] multiplies the weight by the
/// transposed input: a query's 5 to 20 tokens, not the background embedder's texts of code.
const WEIGHT_FIRST_MAX_ROWS: usize = 24;

/// A linear layer whose product is computed weight-first for a few token rows.
///
/// `x · Wᵀ` runs the matrix kernel along the token rows: with a query's handful of tokens most
/// of its vector lanes are empty. `(W · xᵀ)ᵀ` runs it along the weight's output rows and fills
/// them. The same dot products summed in another order (the vectors agree to about 1e-6); on
/// this machine a 5- to 12-token query embeds 15 to 25 % faster (examples measured on 1 thread,
/// paired runs), no gain from 24 tokens on.
struct Dense(Linear);

impl Dense {
    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (batch, tokens, inputs) = x.dims3()?;
        let rows = batch * tokens;
        if rows > WEIGHT_FIRST_MAX_ROWS {
            return self.0.forward(x);
        }
        let product = self.0.weight().matmul(&x.reshape((rows, inputs))?.t()?)?;
        let product = product.t()?.contiguous()?.reshape((batch, tokens, ()))?;
        match self.0.bias() {
            Some(bias) => product.broadcast_add(bias),
            None => Ok(product),
        }
    }
}
