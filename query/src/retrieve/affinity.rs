//! Text evidence for a candidate: word affinity (shared words, weighted by how rare they are
//! among the candidates) and dense affinity (embedding similarity as a z-score), and the words a
//! candidate is known by.
//!
//! The only evidence that asks the lanes (for tokens and dense similarities), kept apart so that
//! the structural evidence does not depend on them.

use rustc_hash::{FxHashMap, FxHashSet};

use super::Lanes;
use super::candidates::Candidate;

/// Dense affinity of each candidate to the target text, as a z-score over the candidates
/// (clipped to [-2, 3]; 0 without a vector or without the dense lane): cosine similarities of
/// MiniLM vectors sit in a narrow band that differs between queries, their spread does not.
pub(super) fn dense_affinity(lanes: Option<&dyn Lanes>, text: &str, candidates: &[Candidate]) -> Vec<f64> {
    let ids: Vec<&str> = candidates.iter().map(|c| c.id.as_str()).collect();
    let Some(sims) = lanes.and_then(|l| l.dense_similarities(text, &ids)) else {
        return vec![0.0; candidates.len()];
    };
    let known: Vec<f64> = sims.iter().flatten().map(|&s| s as f64).collect();
    if known.len() < 2 {
        return vec![0.0; candidates.len()];
    }
    let mean = known.iter().sum::<f64>() / known.len() as f64;
    let var = known.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / known.len() as f64;
    let sd = var.sqrt().max(1e-6);
    sims.iter().map(|s| s.map_or(0.0, |s| ((s as f64 - mean) / sd).clamp(-2.0, 3.0))).collect()
}

/// The words a candidate is known by: its name within its module (`Session.send`), signature
/// and the docstring's first paragraph (its summary; a large class has thousands of
/// candidates, and tokenizing whole docstrings was most of the lane's time). The module path is
/// left out: every candidate of a file shares it.
pub(super) fn describe(u: &fresco_graph::UnitRef<'_>) -> String {
    let module = u.file.graph.module.as_str();
    let local = u.unit.name.strip_prefix(module).and_then(|n| n.strip_prefix('.')).unwrap_or(&u.unit.name);
    let mut t = local.replace('.', " ");
    if let Some(signature) = &u.unit.signature {
        t.push(' ');
        t.push_str(signature);
    }
    if let Some(doc) = &u.unit.docstring {
        let doc = doc.trim_start();
        let summary = doc.split("\n\n").next().unwrap_or(doc);
        let cut = summary.char_indices().nth(400).map_or(summary.len(), |(i, _)| i);
        t.push(' ');
        t.push_str(&summary[..cut]);
    }
    t
}

/// Inverse document frequency of words over the candidate set.
pub(super) struct WordRarity {
    df: FxHashMap<String, usize>,
    n: f64,
}

impl WordRarity {
    pub(super) fn over(sets: &[FxHashSet<String>]) -> WordRarity {
        let mut df: FxHashMap<String, usize> = FxHashMap::default();
        for s in sets {
            for w in s {
                *df.entry(w.clone()).or_default() += 1;
            }
        }
        WordRarity { df, n: sets.len().max(1) as f64 }
    }

    /// Weight of a word in [0, 1]: 1 for a word only one candidate has.
    fn weight(&self, word: &str) -> f64 {
        let df = self.df.get(word).copied().unwrap_or(1).max(1) as f64;
        (1.0 + self.n / df).ln() / (1.0 + self.n).ln()
    }

    /// Shared words, weighted by rarity, normalised by the candidate's length (long docstrings
    /// do not win by size).
    pub(super) fn affinity(&self, cand: &FxHashSet<String>, target: &FxHashSet<String>) -> f64 {
        if cand.is_empty() {
            return 0.0;
        }
        let shared: f64 = cand.intersection(target).map(|w| self.weight(w)).sum();
        shared / (cand.len() as f64).sqrt()
    }
}

pub(super) fn words(lanes: Option<&dyn Lanes>, text: &str) -> Vec<String> {
    match lanes {
        Some(l) => l.tokens(text),
        None => text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(|w| w.to_lowercase()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_rarity_prefers_rare_shared_words() {
        let set = |ws: &[&str]| ws.iter().map(|w| w.to_string()).collect::<FxHashSet<String>>();
        let cands = [set(&["self", "timeout"]), set(&["self", "headers"]), set(&["self", "url"])];
        let rarity = WordRarity::over(&cands);
        let target = set(&["self", "timeout"]);
        let a = rarity.affinity(&cands[0], &target);
        let b = rarity.affinity(&cands[1], &target);
        assert!(a > b && b > 0.0, "{a} {b}");
        assert!((rarity.weight("timeout") - 1.0).abs() < 1e-12);
    }
}
