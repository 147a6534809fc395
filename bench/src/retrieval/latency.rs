//! Latency of `search` and `context` on a large repository (django), with the lanes ready.
//!
//! Embedding every unit of django takes far longer than a benchmark run (60k texts on one
//! thread), so the dense lane is measured honestly in parts: the embedding worker runs for a fixed
//! time (its throughput is reported), the partial index it published is searched for the
//! queries, and a synthetic index of the full size (random unit vectors, same int8 brute-force
//! scan) gives the cost of searching all units. Queries run with no embedding in the background,
//! then once more beside a thread that embeds as the daemon's worker does, with and without its
//! pauses for queries (`embed::QueryFirst`).

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result};
use fresco_graph::Snapshot;
use fresco_indexer::embed::{self, DIMENSIONS, Embedder, Vector, VectorIndex};
use fresco_indexer::text_index::{self, TextIndex};
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::{Context, LaneDown, LaneHits, Lanes, Limits};

use crate::metrics::{Stats, stats};
use crate::tasks;

/// The lanes over a fixed snapshot: the BM25 index, a (possibly partial) vector index and a
/// query embedder of its own. Same behaviour as `fresco_indexer::lanes::RetrievalLanes`, without
/// a background thread.
pub struct FixedLanes {
    text: TextIndex,
    /// The index, its version and how many units it lacks.
    dense: Option<(u64, Arc<VectorIndex>, usize)>,
    embedder: Embedder,
    /// The daemon's rule that query embeddings go ahead of the background embedding.
    queries: embed::QueryFirst,
    /// The last query and its embedding (as `RetrievalLanes` keeps it: `context` asks the dense
    /// lane and the graph lane's dense affinity with the same text).
    last_query: std::sync::Mutex<Option<(String, fresco_indexer::embed::Vector)>>,
}

impl FixedLanes {
    fn embed_query(&self, text: &str) -> Result<fresco_indexer::embed::Vector, LaneDown> {
        let mut last = self.last_query.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((t, v)) = last.as_ref()
            && t == text
        {
            return Ok(*v);
        }
        let v = self.embedder.embed_query_first(text, &self.queries).map_err(|e| LaneDown::new(e.to_string()))?;
        *last = Some((text.to_string(), v));
        Ok(v)
    }
}

impl Lanes for FixedLanes {
    fn bm25(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown> {
        let (version, hits) = self.text.search_versioned(text, k).map_err(|e| LaneDown::new(e.to_string()))?;
        Ok(LaneHits { ids: hits.into_iter().map(|(id, _)| id).collect(), version, ..LaneHits::default() })
    }

    fn dense(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown> {
        let Some((version, index, missing)) = &self.dense else {
            return Err(LaneDown::new("no vector index"));
        };
        // As `RetrievalLanes::dense`: the background embedding waits for the embedding and the scan.
        let _turn = self.queries.begin_query();
        let query = self.embed_query(text)?;
        let ids = index.search(&query, k).into_iter().map(|(id, _)| id).collect();
        let partial = (*missing > 0).then(|| format!("{missing} units not embedded yet"));
        Ok(LaneHits { ids, version: *version, partial, ..LaneHits::default() })
    }

    fn tokens(&self, text: &str) -> Vec<String> {
        text_index::code_tokens(text)
    }

    fn dense_similarities(&self, text: &str, ids: &[&str]) -> Option<Vec<Option<f32>>> {
        let (_, index, _) = self.dense.as_ref()?;
        let _turn = self.queries.begin_query();
        let query = self.embed_query(text).ok()?;
        Some(index.similarities(&query, ids))
    }

    fn count_tokens(&self, text: &str) -> Option<usize> {
        Some(self.embedder.count_tokens(text))
    }
}

pub struct LatencyReport {
    pub root: String,
    pub files: usize,
    pub units: usize,
    pub index_s: f64,
    pub text_build_s: f64,
    pub model_load_s: f64,
    /// Seconds spent embedding, texts embedded, texts to embed.
    pub embed_s: f64,
    pub embedded: usize,
    pub to_embed: usize,
    /// Units whose `embed::unit_text` panics (and so stops the production worker).
    pub text_panics: usize,
    pub panic_example: Option<String>,
    pub dense_indexed: usize,
    pub dense_missing: usize,
    pub search: Stats,
    pub search_bm25: Stats,
    pub context: Stats,
    pub context_bm25_graph: Stats,
    pub embed_query: Stats,
    pub bm25_alone: Stats,
    pub dense_partial_scan: Stats,
    pub dense_full_scan: Stats,
    /// `search` and `context` while the background embedding runs on the worker's 1 thread, as
    /// the worker does (pausing for queries), then as it did before (not pausing).
    pub while_embedding: BusyRound,
    pub while_embedding_unpaused: BusyRound,
    pub queries: usize,
    pub reps: usize,
    pub context_tokens: Stats,
    /// The lexical lane after saves (see [`EditedText`]).
    pub edited: EditedText,
}

/// The lexical lane of a daemon that has seen saves: [`EDITED_FILES`] files re-indexed one per
/// update, the documents each replaced left in their segments until a merge drops them. BM25's
/// statistics count live documents only, which costs an update (the statistics of the new
/// reader generation) and a search (each deleted document a query term's postings are sought
/// to).
pub struct EditedText {
    pub files: usize,
    /// One file re-indexed (delete, add, commit, merge when due, reload, statistics).
    pub update: Stats,
    /// The BM25 query right after each of those updates (the generation's first).
    pub first_search: Stats,
    /// An update with nothing to re-index: commit, reload and the statistics alone.
    pub empty_update: Stats,
    pub deleted: u64,
    pub segments: usize,
    pub bm25: Stats,
    pub context_bm25_graph: Stats,
    /// The same update-then-query pairs once deleted documents near the share that merges
    /// everything ([`NEAR_FULL_MERGE`]).
    pub heavy_update: Stats,
    pub heavy_first_search: Stats,
    pub heavy_deleted: u64,
    pub heavy_docs: u64,
}

/// How many files the edited-lexical-lane measurement re-indexes per series.
pub const EDITED_FILES: usize = 40;

/// The share of deleted documents the heavy series starts from: below the text index's 10 %,
/// past which an update merges everything, with room for the series' own deletions.
const NEAR_FULL_MERGE: f64 = 0.08;

/// One round of queries with the background embedding running beside them.
pub struct BusyRound {
    pub search: Stats,
    pub context: Stats,
    /// The scan of the full-size index for each search's query vector, right after embedding the
    /// query, with the background paused as the dense lane pauses it (when pausing) or not.
    pub full_scan: Stats,
    /// Texts the background embedded meanwhile, in how many seconds (the pass in progress when the
    /// queries ended included).
    pub embedded: usize,
    pub seconds: f64,
}

/// The queries of a busy round: query strings, the search texts and their vectors, and the
/// full-size index their scans are timed on.
struct BusyQueries<'a> {
    search: &'a [String],
    context: &'a [String],
    search_texts: &'a [String],
    vectors: &'a [Vector],
    full: &'a VectorIndex,
}

/// Runs every query of `queries` once while `background` embeds `texts` on its own thread:
/// pausing for queries (the worker's way) or not (its way before).
fn busy_round(
    ctx: &Context,
    lanes: &FixedLanes,
    background: &Embedder,
    texts: &[(u64, String, String)],
    queries: &BusyQueries,
    pausing: bool,
) -> Result<BusyRound> {
    let stop = std::sync::atomic::AtomicBool::new(false);
    let mut search_ms = Vec::new();
    let mut context_ms = Vec::new();
    let mut scan_ms = Vec::new();
    let start = Instant::now();
    let embedded = std::thread::scope(|scope| -> Result<usize> {
        let worker = scope.spawn(|| {
            let mut done = 0usize;
            for chunk in texts.chunks(embed::BATCH_SIZE) {
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    break;
                }
                let batch: Vec<&str> = chunk.iter().map(|(_, _, t)| t.as_str()).collect();
                let embedded = if pausing {
                    background.embed_behind_queries(&batch, &lanes.queries)
                } else {
                    background.embed(&batch)
                };
                if embedded.is_err() {
                    break;
                }
                done += batch.len();
            }
            done
        });
        // Let the first batch start.
        std::thread::sleep(Duration::from_millis(200));
        for (i, q) in queries.search.iter().enumerate() {
            search_ms.push(time_ms(|| {
                fresco_query::run(ctx, q).expect("search runs");
            }));
            // The scan as the dense lane runs it: right after embedding the query, under the same
            // turn when pausing (so the worker has stopped by then).
            if let (Some(v), Some(text)) = (queries.vectors.get(i), queries.search_texts.get(i)) {
                let _turn = pausing.then(|| lanes.queries.begin_query());
                lanes.embedder.embed(&[text.as_str()]).expect("embeds");
                scan_ms.push(time_ms(|| {
                    queries.full.search(v, 10);
                }));
            }
        }
        for q in queries.context {
            context_ms.push(time_ms(|| {
                fresco_query::run(ctx, q).expect("context runs");
            }));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        worker.join().map_err(|_| anyhow::anyhow!("the background embedding thread panicked"))
    })?;
    Ok(BusyRound {
        search: stats(&search_ms),
        context: stats(&context_ms),
        full_scan: stats(&scan_ms),
        embedded,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn time_ms(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1000.0
}

fn quote(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The first line of a docstring, as a user would phrase a search.
fn search_text(doc: &str) -> Option<String> {
    let line = doc.trim().lines().next()?.trim().trim_end_matches('.');
    let line: String = line.chars().take(120).collect();
    (line.split_whitespace().count() >= 3).then_some(line)
}

/// Deterministic query sets: units of non-test files in xxh3 order.
fn pick(snapshot: &Snapshot, n: usize) -> (Vec<String>, Vec<String>) {
    let mut units: Vec<(u64, String, Option<String>)> = snapshot
        .units()
        .filter(|u| u.unit.kind.is_callable() && !u.unit.id.contains('#') && !tasks::is_test_path(&u.file.graph.path))
        .map(|u| (xxhash_rust::xxh3::xxh3_64(u.unit.id.as_bytes()), u.unit.id.clone(), u.unit.docstring.clone()))
        .collect();
    units.sort();
    let searches: Vec<String> =
        units.iter().filter_map(|(_, _, d)| d.as_deref().and_then(search_text)).take(n).collect();
    let contexts: Vec<String> = units.iter().rev().map(|(_, id, _)| id.clone()).take(n).collect();
    (searches, contexts)
}

/// Pseudo-random unit vectors (xorshift), for the full-size scan.
fn synthetic(n: usize) -> impl Iterator<Item = (String, Vector)> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..n).map(move |i| {
        let mut v = [0f32; DIMENSIONS];
        let mut norm = 0f32;
        for x in v.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *x = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            norm += *x * *x;
        }
        let norm = norm.sqrt().max(1e-6);
        v.iter_mut().for_each(|x| *x /= norm);
        (format!("synthetic.u{i}"), v)
    })
}

pub fn run(root: &Path, queries: usize, reps: usize, embed_seconds: u64) -> Result<LatencyReport> {
    let tmp = tempfile::tempdir()?;
    let db = tmp.path().join("db");
    eprintln!("latency: indexing {}", root.display());
    let t = Instant::now();
    let indexer = Indexer::open(root, &db, IndexerOptions::default()).context("index the latency root")?;
    let index_s = t.elapsed().as_secs_f64();
    let snapshot = indexer.snapshot().clone();
    drop(indexer);
    let totals = snapshot.totals();

    eprintln!("latency: building the BM25 index");
    let t = Instant::now();
    let text = TextIndex::build(&snapshot, 1)?;
    let text_build_s = t.elapsed().as_secs_f64();

    // The dense lane: the production text of every unit (`embed::unit_text`) embedded with the
    // production embedder on 1 thread (the worker's default), in a fixed pseudo-random order, for
    // a bounded time. (Not the `EmbedWorker` itself, whose order and pace are its own; units whose
    // `unit_text` panics are counted in `text_panics`: such a panic once stopped the worker.)
    let files = embed::locate_model(&embed::default_model_dir())?;
    let t = Instant::now();
    let embedder = Embedder::load(&files, 1)?;
    let model_load_s = t.elapsed().as_secs_f64();
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut texts: Vec<(u64, String, String)> = Vec::with_capacity(totals.units);
    let mut text_panics = 0usize;
    let mut panic_example = None;
    for u in snapshot.units() {
        let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            embed::unit_text(u.unit, u.file.source_of(u.unit))
        }));
        match made {
            Ok(text) => texts.push((xxhash_rust::xxh3::xxh3_64(u.unit.id.as_bytes()), u.unit.id.clone(), text)),
            Err(_) => {
                text_panics += 1;
                panic_example.get_or_insert_with(|| u.unit.id.clone());
            }
        }
    }
    std::panic::set_hook(hook);
    texts.sort();
    eprintln!(
        "latency: {} texts ({text_panics} units whose text panics); embedding for up to {embed_seconds} s",
        texts.len()
    );
    let to_embed = texts.len();
    let t = Instant::now();
    let deadline = t + Duration::from_secs(embed_seconds);
    let mut vectors: Vec<(String, Vector)> = Vec::new();
    for chunk in texts.chunks(embed::BATCH_SIZE) {
        if Instant::now() >= deadline {
            break;
        }
        let batch: Vec<&str> = chunk.iter().map(|(_, _, t)| t.as_str()).collect();
        let v = embedder.embed(&batch)?;
        vectors.extend(chunk.iter().map(|(_, id, _)| id.clone()).zip(v));
    }
    let embed_s = t.elapsed().as_secs_f64();
    let embedded = vectors.len();
    let index = VectorIndex::build(vectors);
    let dense_indexed = index.len();
    let dense_missing = totals.units - dense_indexed;
    let dense = Some((snapshot.version(), Arc::new(index), dense_missing));
    eprintln!("latency: embedded {embedded} of {to_embed} texts in {embed_s:.0} s");
    // What embeds in the background of the last measurement: the worker's single thread.
    let background = embedder.with_threads(1)?;
    // Queries are embedded on the daemon's query pool size (`EmbedWorkerOptions::query_threads`).
    let embedder = embedder.with_threads(embed::default_query_threads())?;
    let lanes = FixedLanes {
        text,
        dense,
        embedder,
        queries: embed::QueryFirst::default(),
        last_query: std::sync::Mutex::new(None),
    };
    let ctx = Context {
        snapshot: &snapshot,
        limits: Limits::default(),
        cancel: None,
        history: None,
        lanes: Some(&lanes as &dyn Lanes),
        is_stale: None,
        anything_stale: None,
        resolution_is_stale: None,
        root: None,
        canonicalize: None,
        started: None,
    };

    let (searches, contexts) = pick(&snapshot, queries);
    let search_q: Vec<String> = searches.iter().map(|s| format!("search {} k 10", quote(s))).collect();
    let search_bm25_q: Vec<String> = searches.iter().map(|s| format!("search {} k 10 lanes bm25", quote(s))).collect();
    let context_q: Vec<String> = contexts.iter().map(|id| format!("context {} budget 4000 k 50", quote(id))).collect();
    let context_bg_q: Vec<String> =
        contexts.iter().map(|id| format!("context {} budget 4000 k 50 lanes bm25,graph", quote(id))).collect();
    // Warm up.
    for q in search_q.iter().take(3).chain(context_q.iter().take(3)) {
        fresco_query::run(&ctx, q)?;
    }
    let mut s_ms = Vec::new();
    let mut sb_ms = Vec::new();
    let mut c_ms = Vec::new();
    let mut cb_ms = Vec::new();
    let mut tokens = Vec::new();
    let mut eq_ms = Vec::new();
    let mut bm_ms = Vec::new();
    let mut dp_ms = Vec::new();
    let mut df_ms = Vec::new();
    let mut query_vectors: Vec<Vector> = Vec::new();
    for rep in 0..reps {
        for i in 0..search_q.len() {
            s_ms.push(time_ms(|| {
                fresco_query::run(&ctx, &search_q[i]).expect("search runs");
            }));
            sb_ms.push(time_ms(|| {
                fresco_query::run(&ctx, &search_bm25_q[i]).expect("search runs");
            }));
            let mut v = None;
            eq_ms.push(time_ms(|| v = Some(lanes.embedder.embed(&[searches[i].as_str()]).expect("embeds").remove(0))));
            let v = v.unwrap();
            bm_ms.push(time_ms(|| {
                lanes.text.search(&searches[i], 10).expect("bm25");
            }));
            if let Some((_, ix, _)) = &lanes.dense {
                dp_ms.push(time_ms(|| {
                    ix.search(&v, 10);
                }));
            }
            if rep == 0 {
                query_vectors.push(v);
            }
        }
        for i in 0..context_q.len() {
            let mut out = None;
            c_ms.push(time_ms(|| out = Some(fresco_query::run(&ctx, &context_q[i]).expect("context runs"))));
            if rep == 0 {
                tokens.push(out.and_then(|o| o.context).map_or(0, |c| c.tokens) as f64);
            }
            cb_ms.push(time_ms(|| {
                fresco_query::run(&ctx, &context_bg_q[i]).expect("context runs");
            }));
        }
    }
    // The daemon right after indexing a large repository: its worker embeds units on one thread
    // while queries arrive. One repetition of each query kind with the embedding running, the
    // texts not embedded above, as the worker would go on with them: as the worker does now, then
    // without its pauses for queries (as before).
    let rest = &texts[embedded..];
    let full = VectorIndex::build(synthetic(totals.units));
    let busy = BusyQueries {
        search: &search_q,
        context: &context_q,
        search_texts: &searches,
        vectors: &query_vectors,
        full: &full,
    };
    let while_embedding = busy_round(&ctx, &lanes, &background, rest, &busy, true)?;
    let while_embedding_unpaused = busy_round(&ctx, &lanes, &background, rest, &busy, false)?;
    // The full-size scan.
    for _ in 0..reps {
        for v in &query_vectors {
            df_ms.push(time_ms(|| {
                full.search(v, 10);
            }));
        }
    }
    let edited = edited_text(&snapshot, &ctx, &lanes, &searches, &context_bg_q, reps)?;
    Ok(LatencyReport {
        root: root.display().to_string(),
        files: snapshot.file_count(),
        units: totals.units,
        index_s,
        text_build_s,
        model_load_s,
        embed_s,
        embedded,
        to_embed,
        text_panics,
        panic_example,
        dense_indexed,
        dense_missing,
        search: stats(&s_ms),
        search_bm25: stats(&sb_ms),
        context: stats(&c_ms),
        context_bm25_graph: stats(&cb_ms),
        embed_query: stats(&eq_ms),
        bm25_alone: stats(&bm_ms),
        dense_partial_scan: stats(&dp_ms),
        dense_full_scan: stats(&df_ms),
        while_embedding,
        while_embedding_unpaused,
        queries: search_q.len().min(context_q.len()),
        reps,
        context_tokens: stats(&tokens),
        edited,
    })
}

/// Re-indexes [`EDITED_FILES`] files (non-test files with units, in xxh3 order of their paths)
/// one per update, then times updates with nothing to re-index and the BM25 queries again.
fn edited_text(
    snapshot: &Snapshot,
    ctx: &Context<'_>,
    lanes: &FixedLanes,
    searches: &[String],
    context_queries: &[String],
    reps: usize,
) -> Result<EditedText> {
    let mut paths: Vec<(u64, String)> = snapshot
        .files()
        .filter(|f| !f.graph.units.is_empty() && !fresco_query::retrieve::is_test_path(&f.graph.path))
        .map(|f| (xxhash_rust::xxh3::xxh3_64(f.graph.path.as_bytes()), f.graph.path.clone()))
        .collect();
    paths.sort();
    let mut paths = paths.into_iter().map(|(_, p)| p);
    // One file re-indexed, then one BM25 query: the first query of a reader generation, whose
    // statistics are counted afresh for its terms.
    let update_and_search = |path: &String, text: &String, update_ms: &mut Vec<f64>, search_ms: &mut Vec<f64>| {
        update_ms.push(time_ms(|| {
            lanes.text.update(snapshot, std::slice::from_ref(path), &[]).expect("text index update");
        }));
        search_ms.push(time_ms(|| {
            lanes.text.search(text, 10).expect("bm25");
        }));
    };
    let mut update_ms = Vec::new();
    let mut first_ms = Vec::new();
    let mut texts = searches.iter().cycle();
    let mut files = 0;
    for path in paths.by_ref().take(EDITED_FILES) {
        let text = texts.next().expect("search texts");
        update_and_search(&path, text, &mut update_ms, &mut first_ms);
        files += 1;
    }
    let mut empty_ms = Vec::new();
    for _ in 0..EDITED_FILES {
        empty_ms.push(time_ms(|| lanes.text.update(snapshot, &[], &[]).expect("text index update")));
    }
    let after = lanes.text.stats()?;
    let mut bm_ms = Vec::new();
    let mut cb_ms = Vec::new();
    for _ in 0..reps {
        for text in searches {
            bm_ms.push(time_ms(|| {
                lanes.text.search(text, 10).expect("bm25");
            }));
        }
        for q in context_queries {
            cb_ms.push(time_ms(|| {
                fresco_query::run(ctx, q).expect("context runs");
            }));
        }
    }
    // More files, until deleted documents near the share that merges everything, then the
    // same pairs again.
    let share = |s: &text_index::TextIndexStats| s.deleted as f64 / (s.docs + s.deleted).max(1) as f64;
    while share(&lanes.text.stats()?) < NEAR_FULL_MERGE {
        let Some(path) = paths.next() else { break };
        lanes.text.update(snapshot, std::slice::from_ref(&path), &[])?;
    }
    let mut heavy_update_ms = Vec::new();
    let mut heavy_first_ms = Vec::new();
    for path in paths.by_ref().take(EDITED_FILES) {
        let text = texts.next().expect("search texts");
        update_and_search(&path, text, &mut heavy_update_ms, &mut heavy_first_ms);
    }
    let heavy = lanes.text.stats()?;
    Ok(EditedText {
        files,
        update: stats(&update_ms),
        first_search: stats(&first_ms),
        empty_update: stats(&empty_ms),
        deleted: after.deleted,
        segments: after.segments,
        bm25: stats(&bm_ms),
        context_bm25_graph: stats(&cb_ms),
        heavy_update: stats(&heavy_update_ms),
        heavy_first_search: stats(&heavy_first_ms),
        heavy_deleted: heavy.deleted,
        heavy_docs: heavy.docs,
    })
}
