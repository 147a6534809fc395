//! `search` fuses the same candidates whatever `k` is: the top k is a prefix of the top k+n.
//!
//! The lanes here answer from fixed rankings (the real BM25 and dense lanes are tested in the
//! indexer, and the dense one needs the model), cut to the depth the executor asks for: what is
//! tested is how deep the executor asks, and what it fuses.

use std::path::Path;

use fresco_graph::Snapshot;
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;
use fresco_query::retrieve::{LaneDown, LaneHits, Lanes};

fn index(root: &Path) -> Snapshot {
    let functions: String =
        ["a", "b", "c", "d", "e"].iter().map(|f| format!("def {f}():\n    return 1\n\n\n")).collect();
    std::fs::write(root.join("m.py"), functions).expect("write");
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}

/// Each lane's ranking, cut to the `k` asked: BM25 ranks `a` first, the dense lane `c`, and
/// `c` is third in BM25.
struct Ranked;

fn first(ids: &[&str], k: usize) -> LaneHits {
    LaneHits { ids: ids.iter().take(k).map(|id| format!("m.{id}")).collect(), version: 1, partial: None, note: None }
}

impl Lanes for Ranked {
    fn bm25(&self, _: &str, k: usize) -> Result<LaneHits, LaneDown> {
        Ok(first(&["a", "b", "c"], k))
    }
    fn dense(&self, _: &str, k: usize) -> Result<LaneHits, LaneDown> {
        Ok(first(&["c", "d", "e"], k))
    }
    fn tokens(&self, text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_lowercase).collect()
    }
    fn count_tokens(&self, _: &str) -> Option<usize> {
        None
    }
    fn dense_similarities(&self, _: &str, _: &[&str]) -> Option<Vec<Option<f32>>> {
        None
    }
}

#[test]
fn the_ranking_does_not_depend_on_k() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let lanes = Ranked;
    let names = |k: usize| -> Vec<String> {
        let mut ctx = Context::new(&snapshot);
        ctx.lanes = Some(&lanes);
        let out = fresco_query::run(&ctx, &format!("search \"anything\" k {k}")).expect("search");
        out.results.iter().map(|item| item.name.clone()).collect()
    };
    let all = names(5);
    // Fused from k per lane, `k 1` named m.a (first in BM25, tied with m.c) and `k 3` m.c
    // (first in one lane, third in the other).
    assert_eq!(all[0], "m.c", "{all:?}");
    for k in 1..5 {
        assert_eq!(names(k), all[..k], "k {k}");
    }
}
