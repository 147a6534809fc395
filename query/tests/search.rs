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
    LaneHits { ids: ids.iter().take(k).map(|id| format!("m.{id}")).collect(), version: 1, ..LaneHits::default() }
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

#[test]
fn a_context_ranking_and_its_lane_ranks_do_not_depend_on_k() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let lanes = Ranked;
    let answer = |k: usize| -> Vec<(String, String)> {
        let mut ctx = Context::new(&snapshot);
        ctx.lanes = Some(&lanes);
        let out = fresco_query::run(&ctx, &format!("context m.e k {k}")).expect("context");
        out.results.iter().map(|item| (item.name.clone(), format!("{:?}", item.lanes))).collect()
    };
    let all = answer(50);
    assert!(all.len() >= 4, "{all:?}");
    // Asked for fewer, the lanes listed only k each: `k 1` lost m.a's BM25 rank (1), and the
    // text lanes' best were cut before fusion.
    for k in 1..4 {
        let short = answer(k);
        assert_eq!(short[..k], all[..k], "k {k}");
        // Every row (those past k are in the text) keeps the ranks it has in the full answer.
        for row in &short {
            assert!(all.contains(row), "k {k}: {row:?} not as in {all:?}");
        }
    }
}

/// A lexical lane one version behind: it ranked `m.b` by its body before the edit.
#[derive(Debug)]
struct Before(Snapshot);

impl fresco_query::IndexedText for Before {
    fn ranked_by_older_text(&self, snapshot: &Snapshot, id: &str) -> bool {
        let text = |s: &Snapshot| s.unit(id).map(|u| u.file.source_of(u.unit).to_string());
        text(&self.0) != text(snapshot)
    }
}

struct Lagging(Snapshot);

impl Lanes for Lagging {
    fn bm25(&self, _: &str, _: usize) -> Result<LaneHits, LaneDown> {
        Ok(LaneHits {
            ids: vec!["m.b".into(), "m.a".into()],
            version: self.0.version(),
            indexed: Some(std::sync::Arc::new(Before(self.0.clone()))),
            ..LaneHits::default()
        })
    }
    fn dense(&self, _: &str, _: usize) -> Result<LaneHits, LaneDown> {
        Err(LaneDown::new("not in this test"))
    }
    fn tokens(&self, text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_lowercase).collect()
    }
}

#[test]
fn a_hit_a_lagging_lane_ranked_by_earlier_text_is_marked_in_every_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    std::fs::write(dir.path().join("m.py"), "def a():\n    return 1\n\n\ndef b():\n    return 1\n").expect("write");
    indexer.refresh().expect("index");
    let before = indexer.snapshot().clone();
    std::fs::write(dir.path().join("m.py"), "def a():\n    return 1\n\n\ndef b():\n    return 2\n").expect("write");
    indexer.apply(vec![fresco_indexer::FileEvent::Changed("m.py".into())]).expect("apply");
    let after = indexer.snapshot().clone();
    let lanes = Lagging(before);
    let stale_of = |allow: bool| -> Vec<(String, bool)> {
        let nothing_on_disk_changed = |_: &str| false;
        let mut ctx = Context::new(&after);
        ctx.lanes = Some(&lanes);
        if allow {
            ctx.is_stale = Some(&nothing_on_disk_changed);
        }
        let out = fresco_query::run(&ctx, "search \"b\" k 5 lanes bm25").expect("search");
        assert_eq!(out.lanes.as_ref().and_then(|l| l.get("bm25")).map(|h| h.status), Some("lagging"));
        out.results.iter().map(|i| (i.name.clone(), i.stale)).collect()
    };
    // `allow` answers from what it has and marks what is not fresh: m.b was ranked by its old body.
    assert_eq!(stale_of(true), [("m.b".to_string(), true), ("m.a".to_string(), false)]);
    // So does `wait`, which waits for the files but not for a lane (the dense one can lag): no
    // mode returns a row ranked by earlier text unmarked.
    assert_eq!(stale_of(false), [("m.b".to_string(), true), ("m.a".to_string(), false)]);
}

/// The lanes' rankings, recording the deepest one asked for.
#[derive(Default)]
struct Recording(std::sync::atomic::AtomicUsize);

impl Lanes for Recording {
    fn bm25(&self, _: &str, k: usize) -> Result<LaneHits, LaneDown> {
        self.0.fetch_max(k, std::sync::atomic::Ordering::Relaxed);
        Ok(first(&["a", "b", "c", "d", "e"], k))
    }
    fn dense(&self, _: &str, k: usize) -> Result<LaneHits, LaneDown> {
        self.0.fetch_max(k, std::sync::atomic::Ordering::Relaxed);
        Ok(first(&["e", "d", "c", "b", "a"], k))
    }
    fn tokens(&self, text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_lowercase).collect()
    }
}

/// `k` past the result limit ranks as far as the limit, and says so: the lanes cannot stop part
/// way, so the limit is what bounds their work (`search ... k 100000` ranked 61,563 units of
/// django whatever `--limit` and `--timeout-ms` said).
#[test]
fn k_is_bounded_by_the_result_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let lanes = Recording::default();
    let mut ctx = Context::new(&snapshot);
    ctx.lanes = Some(&lanes);
    ctx.limits.max_results = 3;
    let out = fresco_query::run(&ctx, "search \"anything\" k 100000").expect("search");
    assert_eq!(out.results.len(), 3);
    assert!(out.truncated, "{:?}", out.notes);
    assert!(out.notes.iter().any(|n| n.contains("over the result limit")), "{:?}", out.notes);
    let deepest = lanes.0.load(std::sync::atomic::Ordering::Relaxed);
    assert!(deepest <= 50, "the lanes were asked for {deepest}");
    let within = fresco_query::run(&ctx, "search \"anything\" k 3").expect("search");
    assert!(!within.truncated, "{:?}", within.notes);
    // Over the limit, with fewer units found than the limit: nothing was cut.
    ctx.limits.max_results = 2000;
    let few = fresco_query::run(&ctx, "search \"anything\" k 100000").expect("search");
    assert!(few.results.len() < 2000 && !few.truncated, "{:?}", few.notes);
    assert!(!few.notes.iter().any(|n| n.contains("over the result limit")), "{:?}", few.notes);
}

/// A dense lane one version behind, whose index has no vector for `m.e` (written since): BM25,
/// up to date, ranks it first; the dense lane ranks `m.d` first and the others in reverse.
struct DenseBehind;

#[derive(Debug)]
struct VectorsWithout(&'static str);

impl fresco_query::IndexedText for VectorsWithout {
    fn ranked_by_older_text(&self, _: &Snapshot, _: &str) -> bool {
        false
    }
    fn unseen(&self, ids: &[&str]) -> Vec<bool> {
        ids.iter().map(|id| *id == self.0).collect()
    }
}

impl Lanes for DenseBehind {
    fn bm25(&self, _: &str, k: usize) -> Result<LaneHits, LaneDown> {
        Ok(first(&["e", "a", "b", "c"], k))
    }
    fn dense(&self, _: &str, k: usize) -> Result<LaneHits, LaneDown> {
        Ok(LaneHits {
            version: 0,
            indexed: Some(std::sync::Arc::new(VectorsWithout("m.e"))),
            ..first(&["d", "c", "b", "a"], k)
        })
    }
    fn tokens(&self, text: &str) -> Vec<String> {
        text.split_whitespace().map(str::to_lowercase).collect()
    }
}

/// A unit a lane behind has not seen is not ranked as if that lane had left it out: `m.e`, first
/// in BM25, comes before `m.d`, first in the dense lane, which BM25 saw and left out (fused
/// plainly, the two tie and `m.d` wins on its name). The units both lanes list come first.
#[test]
fn a_unit_a_lane_behind_has_not_seen_is_credited_not_left_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    assert!(snapshot.version() >= 1);
    let lanes = DenseBehind;
    let mut ctx = Context::new(&snapshot);
    ctx.lanes = Some(&lanes);
    let out = fresco_query::run(&ctx, "search \"anything\" k 5").expect("search");
    let names: Vec<&str> = out.results.iter().map(|item| item.name.as_str()).collect();
    assert_eq!(names, ["m.a", "m.c", "m.b", "m.e", "m.d"], "{names:?}");
    let dense = &out.lanes.as_ref().expect("lane health")["dense"];
    assert!(dense.reason.as_deref().is_some_and(|r| r.contains("1 units the other lanes listed")), "{dense:?}");
    // With every lane up to date the same lists fuse plainly: m.e and m.d tie, m.d first.
    let plain = fresco_query::retrieve::fuse(&[
        (fresco_query::ast::Lane::Bm25, ["m.e", "m.a", "m.b", "m.c"].map(String::from).to_vec()),
        (fresco_query::ast::Lane::Dense, ["m.d", "m.c", "m.b", "m.a"].map(String::from).to_vec()),
    ]);
    let order: Vec<&str> = plain.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(order, ["m.a", "m.c", "m.b", "m.d", "m.e"]);
}
