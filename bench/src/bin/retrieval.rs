//! fresco's retrieval benchmark: can the context of a function be retrieved without its body?
//!
//! ```text
//! retrieval [--tasks N] [--budget B] [--trace FILE] [--report NAME]
//!           [--latency ROOT] [--latency-queries N] [--latency-reps R] [--embed-seconds S] ROOT...
//! ```
//! For each ROOT (copied to a temporary directory and indexed into a temporary store), up to N
//! functions and methods whose original body uses units of the repository become tasks: the
//! body is blanked (decorators, signature and docstring kept), the change is applied to the
//! index and fed to the retrieval lanes (`RetrievalLanes`, the daemon's lanes thread), and
//! `context NAME budget B k 50` is asked. The truth is what the original body used. Each lane's
//! own ranking, the fused ranking and the assembled context are scored against it; with
//! `--trace FILE` every query is written as one JSON line. With `--latency ROOT` the latency of
//! `search` and `context` is measured on that (large) repository. See bench/README.md.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use fresco_graph::{Snapshot, UnitKind};
use fresco_indexer::lanes::{LaneUpdate, RetrievalLanes};
use fresco_indexer::{FileEvent, Indexer, IndexerOptions};
use fresco_query::ast::{ContextTarget, Lane, Symbol};
use fresco_query::{Context, Lanes, Limits, retrieve};
use rustc_hash::FxHashSet;
use serde_json::json;

#[path = "../retrieval/external.rs"]
mod external;
#[path = "../retrieval/latency.rs"]
mod latency;
#[path = "../retrieval/metrics.rs"]
mod metrics;
#[path = "../retrieval/tasks.rs"]
mod tasks;

use metrics::{LISTS, Needed, ProjectInfo, TaskResult};

struct Args {
    tasks: usize,
    budget: usize,
    k: usize,
    trace: Option<PathBuf>,
    report: Option<String>,
    latency: Option<PathBuf>,
    latency_queries: usize,
    latency_reps: usize,
    embed_seconds: u64,
    lane_timeout: u64,
    /// Tasks with annotated dependencies (`--tasks-from FILE`) instead of tasks derived from the
    /// graph.
    external: Option<Vec<external::ExternalTask>>,
    /// No project starts after this many minutes (`--stop-after`); the report covers those run.
    stop_after: Option<Duration>,
    /// Each project's stored vectors are taken from and given back to `DIR/<project>`
    /// (`--vector-cache`), so a rerun embeds only the texts it has not seen.
    vector_cache: Option<PathBuf>,
    /// `--as-new file|line`: each task's function is removed from its file (a `pass` in its
    /// place) and asked for as a function not written yet, `context for "HEADER" in FILE`, with
    /// `:LINE` (where it was) for `line`.
    as_new: Option<AsNew>,
    roots: Vec<PathBuf>,
}

/// How `--as-new` names where the function will be written.
#[derive(Clone, Copy, PartialEq, Debug)]
enum AsNew {
    File,
    Line,
}

impl Args {
    fn parse() -> Result<Args> {
        let mut out = Args {
            tasks: 60,
            budget: 4000,
            k: 50,
            trace: None,
            report: None,
            latency: None,
            latency_queries: 50,
            latency_reps: 3,
            embed_seconds: 180,
            lane_timeout: 900,
            external: None,
            stop_after: None,
            vector_cache: None,
            as_new: None,
            roots: Vec::new(),
        };
        let mut it = std::env::args().skip(1);
        while let Some(a) = it.next() {
            let mut value = || it.next().with_context(|| format!("{a} needs a value"));
            match a.as_str() {
                "--tasks" => out.tasks = value()?.parse()?,
                "--budget" => out.budget = value()?.parse()?,
                "--trace" => out.trace = Some(PathBuf::from(value()?)),
                "--report" => out.report = Some(value()?),
                "--latency" => out.latency = Some(PathBuf::from(value()?)),
                "--latency-queries" => out.latency_queries = value()?.parse()?,
                "--latency-reps" => out.latency_reps = value()?.parse()?,
                "--embed-seconds" => out.embed_seconds = value()?.parse()?,
                "--lane-timeout" => out.lane_timeout = value()?.parse()?,
                "--stop-after" => out.stop_after = Some(Duration::from_secs_f64(value()?.parse::<f64>()? * 60.0)),
                "--tasks-from" => out.external = Some(external::load(Path::new(&value()?))?),
                "--vector-cache" => out.vector_cache = Some(PathBuf::from(value()?)),
                "--as-new" => {
                    out.as_new = Some(match value()?.as_str() {
                        "file" => AsNew::File,
                        "line" => AsNew::Line,
                        other => bail!("--as-new takes `file` or `line`, not `{other}`"),
                    })
                }
                "-h" | "--help" => {
                    eprintln!(
                        "usage: retrieval [--tasks N] [--budget B] [--trace FILE] [--report NAME] [--latency ROOT] \
                         [--latency-queries N] [--latency-reps R] [--embed-seconds S] [--lane-timeout S] [--tasks-from FILE] [--stop-after MINUTES] [--vector-cache DIR] [--as-new file|line] ROOT..."
                    );
                    std::process::exit(0);
                }
                s if s.starts_with("--") => bail!("unknown option {s}"),
                _ => out.roots.push(PathBuf::from(a)),
            }
        }
        if out.roots.is_empty() && out.latency.is_none() {
            bail!("give at least one ROOT (or --latency ROOT)");
        }
        Ok(out)
    }
}

fn main() -> Result<()> {
    // SAFETY: no other thread exists yet (candle's thread count: see the function).
    unsafe { fresco_indexer::process::put_core_count_in_environment() };
    let args = Args::parse()?;
    let args_line = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let mut trace = match &args.trace {
        Some(p) => Some(std::io::BufWriter::new(std::fs::File::create(p).with_context(|| p.display().to_string())?)),
        None => None,
    };
    let mut all: Vec<TaskResult> = Vec::new();
    let mut infos: Vec<ProjectInfo> = Vec::new();
    let mut not_started: Vec<String> = Vec::new();
    let started = Instant::now();
    for root in &args.roots {
        if args.stop_after.is_some_and(|limit| started.elapsed() > limit) {
            eprintln!("--stop-after: {} not started", root.display());
            not_started.push(root.display().to_string());
            continue;
        }
        let (results, info) = run_project(root, &args, trace.as_mut().map(|t| t as &mut dyn std::io::Write))?;
        eprintln!(
            "{}: {} tasks, fused R@10 {:.3}, R@50 {:.3}",
            info.name,
            results.len(),
            metrics::mean_recall(&results, 3, 10),
            metrics::mean_recall(&results, 3, 50)
        );
        all.extend(results);
        infos.push(info);
        // Flushed per project, so a run stopped early keeps what it measured.
        if let Some(t) = trace.as_mut() {
            t.flush()?;
        }
    }
    let latency = match &args.latency {
        Some(root) => Some(latency::run(root, args.latency_queries, args.latency_reps, args.embed_seconds)?),
        None => None,
    };
    let report = render(&args, &args_line, &all, &infos, &not_started, latency.as_ref());
    println!("{report}");
    if let Some(name) = &args.report {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{name}.md")), &report)?;
        if !all.is_empty() {
            let projects: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
            let title = format!("Recall@k per lane, {} tasks ({})", all.len(), projects.join(", "));
            std::fs::write(dir.join(format!("{name}-recall.svg")), metrics::svg(&all, &title))?;
        }
        eprintln!("wrote {}", dir.join(format!("{name}.md")).display());
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let dst = to.join(entry.file_name());
        if ty.is_dir() {
            copy_tree(&entry.path(), &dst)?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), &dst)?;
        }
    }
    Ok(())
}

/// Replaces `cached` with a copy of the closed store `vectors`, through a sibling, so that an
/// interrupted copy never leaves a torn store behind.
fn save_vectors(vectors: &Path, cached: &Path) -> Result<()> {
    let mut fresh_name = cached.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    fresh_name.push(".new");
    let fresh = cached.with_file_name(fresh_name);
    if fresh.exists() {
        std::fs::remove_dir_all(&fresh)?;
    }
    copy_tree(vectors, &fresh)?;
    if cached.exists() {
        std::fs::remove_dir_all(cached)?;
    }
    std::fs::rename(&fresh, cached)?;
    Ok(())
}

/// When the lanes first reflected `version`: (bm25 ready after, dense ready after or its status).
fn wait_lanes(
    lanes: &RetrievalLanes,
    version: u64,
    timeout: Duration,
    wait_dense: bool,
) -> (Option<Duration>, Result<Duration, String>) {
    let t = Instant::now();
    let (mut bm25, mut dense): (Option<Duration>, Option<Result<Duration, String>>) =
        (None, (!wait_dense).then(|| Err("not waited for (it failed to become ready)".to_string())));
    // A dense lane whose state does not move for a minute is dead (its thread panicked).
    let mut dense_seen: (String, Option<(usize, usize)>, Instant) = (String::new(), None, Instant::now());
    loop {
        for h in lanes.health(version) {
            match h.lane {
                "bm25" if bm25.is_none() => {
                    if h.status == "ready" && h.version == Some(version) {
                        bm25 = Some(t.elapsed());
                    } else if h.status == "unavailable" {
                        bm25 = Some(Duration::MAX);
                    }
                }
                "dense" if dense.is_none() => {
                    if h.status == "ready" && h.version.is_some_and(|v| v >= version) {
                        dense = Some(Ok(t.elapsed()));
                    } else if h.status == "unavailable" {
                        dense = Some(Err(h.reason.clone().unwrap_or_else(|| "unavailable".into())));
                    } else if (h.status, h.progress) != (dense_seen.0.as_str(), dense_seen.1) {
                        dense_seen = (h.status.to_string(), h.progress, Instant::now());
                    } else if dense_seen.2.elapsed() > Duration::from_secs(60) {
                        dense = Some(Err(format!(
                            "stuck at '{}' {:?} for 60 s (the embedding thread died?)",
                            h.status, h.progress
                        )));
                    }
                }
                _ => {}
            }
        }
        if (bm25.is_some() && dense.is_some()) || t.elapsed() > timeout {
            let bm25 = bm25.filter(|d| *d != Duration::MAX);
            return (bm25, dense.unwrap_or_else(|| Err(format!("not ready after {timeout:?}"))));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The daemon's lanes, with context tokens counted by the MiniLM tokenizer without truncation.
///
/// `RetrievalLanes::count_tokens` loads `tokenizer.json` as shipped, which truncates and pads every
/// text to 128 tokens: every unit then "costs" 128 + 12 tokens whatever its size, and a 4000-token
/// budget admits 28 units of any length. The benchmark counts with `Embedder::count_tokens`
/// (the same tokenizer, truncation off), which is what the budget means.
struct CountedLanes<'a> {
    lanes: &'a RetrievalLanes,
    counter: Option<&'a fresco_indexer::embed::Embedder>,
}

impl Lanes for CountedLanes<'_> {
    fn bm25(&self, text: &str, k: usize) -> Result<fresco_query::LaneHits, fresco_query::LaneDown> {
        self.lanes.bm25(text, k)
    }
    fn dense(&self, text: &str, k: usize) -> Result<fresco_query::LaneHits, fresco_query::LaneDown> {
        self.lanes.dense(text, k)
    }
    fn tokens(&self, text: &str) -> Vec<String> {
        self.lanes.tokens(text)
    }
    fn dense_similarities(&self, text: &str, ids: &[&str]) -> Option<Vec<Option<f32>>> {
        self.lanes.dense_similarities(text, ids)
    }
    fn count_tokens(&self, text: &str) -> Option<usize> {
        match self.counter {
            Some(c) => Some(c.count_tokens(text)),
            None => self.lanes.count_tokens(text),
        }
    }
}

fn place_of(snapshot: &Snapshot, target: &str, target_kind: UnitKind, dep: &str) -> &'static str {
    let target_file = snapshot.unit(target).map(|u| u.file.graph.path.clone());
    if target_kind == UnitKind::Method
        && let Some((class, _)) = target.rsplit_once('.')
        && (dep == class || dep.strip_prefix(class).is_some_and(|r| r.starts_with('.')))
    {
        return "same class";
    }
    match (snapshot.unit(dep), target_file) {
        (Some(u), Some(f)) if u.file.graph.path == f => "same file",
        _ => "other file",
    }
}

fn run_project(
    root: &Path,
    args: &Args,
    mut trace: Option<&mut dyn std::io::Write>,
) -> Result<(Vec<TaskResult>, ProjectInfo)> {
    let name = root.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_else(|| "root".into());
    let tmp = tempfile::tempdir()?;
    let src = tmp.path().join(&name);
    copy_tree(root, &src)?;
    let db = tmp.path().join("db");
    let t = Instant::now();
    let mut indexer = Indexer::open(&src, &db, IndexerOptions::default())?;
    let index_s = t.elapsed().as_secs_f64();
    let base = indexer.snapshot().clone();
    let totals = base.totals();
    // The work list: each task with its annotated dependencies (fresco id when mapped, and the
    // benchmark's place), or with `None` when the truth comes from the graph.
    type Annotated = Vec<(String, &'static str)>;
    let mut absent_targets = 0usize;
    let work: Vec<(tasks::Candidate, Option<Annotated>)> = match &args.external {
        None => tasks::candidates(&base).into_iter().map(|c| (c, None)).collect(),
        Some(all) => {
            let names = external::NameMap::new(&base);
            let mut out = Vec::new();
            for task in all.iter().filter(|t| t.project == name) {
                let target = names.unit(&base, &task.namespace).and_then(|id| base.unit(&id));
                let Some(target) = target.filter(|u| u.unit.kind.is_callable() && u.file.graph.path == task.file)
                else {
                    eprintln!("{name}: {} is not a function of {} here", task.namespace, task.file);
                    absent_targets += 1;
                    continue;
                };
                let mut needed: Annotated = Vec::new();
                for need in &task.needed {
                    let id = names.unit(&base, &need.name).unwrap_or_else(|| need.name.clone());
                    let place = match need.place.as_str() {
                        "same class" => "same class",
                        "same file" => "same file",
                        _ => "other file",
                    };
                    if !needed.iter().any(|(n, _)| *n == id) {
                        needed.push((id, place));
                    }
                }
                let cand = tasks::Candidate {
                    id: target.unit.id.clone(),
                    path: target.file.graph.path.clone(),
                    kind: target.unit.kind,
                };
                out.push((cand, Some(needed)));
            }
            out
        }
    };
    let candidates = work.len() + absent_targets;
    let mut info = ProjectInfo {
        name: name.clone(),
        root: root.display().to_string(),
        files: totals.files,
        units: totals.units,
        edges: totals.edges,
        index_s,
        candidates,
        tried: absent_targets,
        ..ProjectInfo::default()
    };
    if absent_targets > 0 {
        info.skipped.insert("the target is not a function of its file in this release".into(), absent_targets);
    }
    eprintln!("{name}: {} units, {candidates} candidate tasks; starting the lanes", totals.units);

    let counter = fresco_indexer::embed::locate_model(&fresco_indexer::embed::default_model_dir())
        .ok()
        .and_then(|files| fresco_indexer::embed::Embedder::load(&files, 1).ok());
    let cached_vectors = args.vector_cache.as_ref().map(|dir| dir.join(&name));
    if let Some(cached) = cached_vectors.as_ref().filter(|c| c.is_dir()) {
        // A cache that cannot be read costs time, not results: the lane embeds afresh.
        match copy_tree(cached, &db.join("vectors")) {
            Ok(()) => info.vectors_reused = true,
            Err(e) => {
                eprintln!("{name}: cannot read the vector cache {}: {e:#}; embedding afresh", cached.display());
                let _ = std::fs::remove_dir_all(db.join("vectors"));
            }
        }
    }
    let (lanes, tx) = RetrievalLanes::start(Ok(&db), base.clone());
    let timeout = Duration::from_secs(args.lane_timeout);
    let (bm25, dense) = wait_lanes(&lanes, base.version(), timeout, true);
    let dense_alive = dense.is_ok();
    info.bm25_ready_s = bm25.map_or(f64::NAN, |d| d.as_secs_f64());
    match &dense {
        Ok(d) => {
            info.dense_ready_s = Some(d.as_secs_f64());
            info.dense_status = "ready".into();
        }
        Err(why) => info.dense_status = why.clone(),
    }
    eprintln!("{name}: lanes ready (bm25 {:.1} s, dense {:?})", info.bm25_ready_s, info.dense_ready_s);

    let mut results = Vec::new();
    let mut update_ms = Vec::new();
    for (cand, annotated) in &work {
        if results.len() >= args.tasks {
            break;
        }
        info.tried += 1;
        let mut skip = |why: &str| *info.skipped.entry(why.to_string()).or_default() += 1;
        let unit = base.unit(&cand.id).expect("candidate exists");
        let abs = src.join(&cand.path);
        let original = std::fs::read_to_string(&abs)?;
        let simple = unit.unit.name.rsplit('.').next().unwrap_or(&unit.unit.name).to_string();
        let blanked = match tasks::blank(&original, unit.unit.start_byte as usize, unit.unit.end_byte as usize, &simple)
        {
            Ok(b) => b,
            Err(why) => {
                skip(&format!("cannot blank: {why:?}"));
                continue;
            }
        };
        // `--as-new`: the function leaves its file (a `pass` keeps the block it was in) and is
        // asked for by its header and docstring, as the blanked file has them.
        let new_function = match args.as_new {
            None => None,
            Some(_) if fresco_query::exec::definitions_of(&base, &cand.id).len() > 1 => {
                skip("defined more than once (removing one renames the others)");
                continue;
            }
            // `context for` would take a same-named function of the file for it.
            Some(_)
                if unit.file.graph.units.iter().any(|u| {
                    u.id != cand.id
                        && matches!(u.kind, fresco_graph::UnitKind::Function | fresco_graph::UnitKind::Method)
                        && u.id.rsplit('.').next().and_then(|n| n.split('#').next()) == Some(simple.as_str())
                }) =>
            {
                skip("another function of its file has its name");
                continue;
            }
            Some(mode) => {
                let (start, end) = (unit.unit.start_byte as usize, unit.unit.end_byte as usize);
                let blanked_end = end - (original.len() - blanked.len());
                let header = blanked[start..blanked_end].trim_end();
                let header = header.strip_suffix("...").unwrap_or(header).trim_end().to_string();
                let line = (mode == AsNew::Line).then_some(unit.unit.start_line);
                Some((format!("{}pass{}", &original[..start], &original[end..]), header, line))
            }
        };
        let used = tasks::uses(&base, &cand.id);
        std::fs::write(&abs, new_function.as_ref().map_or(&blanked, |(removed, _, _)| removed))?;
        let report = indexer.apply(vec![FileEvent::Changed(cand.path.clone())])?;
        let snap = indexer.snapshot().clone();
        let same_errors = snap.file(&cand.path).map(|f| f.graph.parse_errors) == Some(0);
        let kept = tasks::uses(&snap, &cand.id);
        let needed: Vec<String> = match annotated {
            // What people annotated is the truth, whatever the graph says the body used.
            Some(annotated) => annotated.iter().map(|(id, _)| id.clone()).collect(),
            None => {
                let mut needed: Vec<String> =
                    used.difference(&kept).filter(|d| snap.contains_unit(d)).cloned().collect();
                // A constructor call uses the class and its `__init__`: the class brings its
                // `__init__`.
                let before = needed.len();
                let classes: BTreeSet<String> = needed.iter().cloned().collect();
                needed.retain(|d| d.strip_suffix(".__init__").is_none_or(|class| !classes.contains(class)));
                info.init_folded += before - needed.len();
                needed
            }
        };
        let restore = |indexer: &mut Indexer| -> Result<()> {
            std::fs::write(&abs, &original)?;
            let report = indexer.apply(vec![FileEvent::Changed(cand.path.clone())])?;
            tx.send(LaneUpdate {
                snapshot: indexer.snapshot().clone(),
                changed: report.changed_files,
                removed: report.removed_files,
            })
            .ok();
            Ok(())
        };
        let indexed_as_expected = snap.unit(&cand.id).is_some() != new_function.is_some();
        if !indexed_as_expected || !same_errors || !report.published {
            skip("the blanked unit is not indexed cleanly");
            restore(&mut indexer)?;
            continue;
        }
        if needed.is_empty() {
            skip(if annotated.is_some() {
                "no dependency annotated"
            } else {
                "every use is kept by the signature or decorators"
            });
            restore(&mut indexer)?;
            continue;
        }
        let t = Instant::now();
        tx.send(LaneUpdate {
            snapshot: snap.clone(),
            changed: report.changed_files.clone(),
            removed: report.removed_files.clone(),
        })
        .ok();
        let (bm25, dense) = wait_lanes(&lanes, snap.version(), timeout, dense_alive);
        update_ms.push(t.elapsed().as_secs_f64() * 1000.0);
        if bm25.is_none() {
            eprintln!("{name}: the lexical lane did not reach version {}", snap.version());
        }
        if let (true, Err(why)) = (dense_alive, &dense) {
            eprintln!("{name}: the dense lane did not reach version {}: {why}", snap.version());
        }

        let counted = CountedLanes { lanes: &lanes, counter: counter.as_ref() };
        let places: Option<BTreeMap<String, &'static str>> =
            annotated.as_ref().map(|a| a.iter().map(|(id, place)| (id.clone(), *place)).collect());
        let result = evaluate(
            &name,
            cand,
            &snap,
            &counted,
            &needed,
            places.as_ref(),
            kept.len(),
            new_function.as_ref().map(|(_, header, line)| (header.as_str(), *line)),
            args,
            trace.as_mut().map(|t| &mut **t as &mut dyn std::io::Write),
        )?;
        results.push(result);
        restore(&mut indexer)?;
    }
    info.tasks = results.len();
    info.lane_update_median_ms = metrics::stats(&update_ms).median;
    // Let the lanes settle, stop their thread, then drop the store.
    drop(tx);
    let deadline = Instant::now() + Duration::from_secs(60);
    while Arc::strong_count(&lanes) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    // The store is closed only once the lanes' thread let go of them: a store still open is not
    // copied.
    let store_closed = Arc::strong_count(&lanes) == 1;
    drop(lanes);
    drop(indexer);
    if let Some(cached) = &cached_vectors {
        if !store_closed {
            eprintln!("{name}: the lanes did not stop within 60 s; the vector cache is left as it was");
        } else if let Err(e) = save_vectors(&db.join("vectors"), cached) {
            // The results stand; only the next run's time is lost.
            eprintln!("{name}: cannot write the vector cache {}: {e:#}", cached.display());
        }
    }
    Ok((results, info))
}

#[allow(clippy::too_many_arguments)]
fn evaluate(
    project: &str,
    cand: &tasks::Candidate,
    snap: &Snapshot,
    lanes: &CountedLanes,
    needed: &[String],
    places: Option<&BTreeMap<String, &'static str>>,
    signature_deps: usize,
    new_function: Option<(&str, Option<u32>)>,
    args: &Args,
    trace: Option<&mut dyn std::io::Write>,
) -> Result<TaskResult> {
    let lanes_dyn: &dyn Lanes = lanes;
    let ctx = Context {
        snapshot: snap,
        limits: Limits::default(),
        cancel: None,
        history: None,
        lanes: Some(lanes_dyn),
        is_stale: None,
        anything_stale: None,
        resolution_is_stale: None,
        root: None,
        canonicalize: None,
        started: None,
    };
    // The plain name of a unit defined again in its scope selects every definition, and
    // `context` would pick the last: `#1` asks for the blanked first definition itself.
    let redefined = fresco_query::exec::definitions_of(snap, &cand.id).len() > 1;
    let asked = if redefined { format!("{}#1", cand.id) } else { cand.id.clone() };
    let (query, asked_for) = match new_function {
        None => (
            format!("context \"{asked}\" budget {} k {}", args.budget, args.k),
            ContextTarget::Unit(Symbol::Name(asked.clone())),
        ),
        Some((header, line)) => {
            let quoted = header.replace('\\', "\\\\").replace('"', "\\\"");
            let place = line.map_or(cand.path.clone(), |l| format!("{}:{l}", cand.path)).replace('"', "\\\"");
            (
                format!("context for \"{quoted}\" in \"{place}\" budget {} k {}", args.budget, args.k),
                ContextTarget::New { text: header.to_string(), file: cand.path.clone(), line },
            )
        }
    };
    let t = Instant::now();
    let out = fresco_query::run(&ctx, &query).with_context(|| query.clone())?;
    let latency_ms = t.elapsed().as_secs_f64() * 1000.0;
    let assembled_for = out.context.as_ref().and_then(|c| c.target.as_deref());
    let expected = new_function.is_none().then_some(cand.id.as_str());
    anyhow::ensure!(
        assembled_for == expected,
        "{query}: context was assembled for {assembled_for:?}, not {expected:?} (the task's function)"
    );

    // Each stage alone.
    let target = retrieve::resolve_target(snap, &asked_for)?;
    let text_lanes: Vec<(Lane, Vec<String>)> = out
        .lane_hits
        .iter()
        .filter_map(|(l, ids)| Lane::parse(l).filter(|l| *l != Lane::Graph).map(|l| (l, ids.clone())))
        .collect();
    let analogues = retrieve::analogues(&text_lanes, &target);
    let time = |f: &dyn Fn()| {
        let t = Instant::now();
        f();
        t.elapsed().as_secs_f64() * 1000.0
    };
    // The graph lane first: in `context` it finds the query's embedding made by the dense lane,
    // which the lanes keep for the last text; timed after the dense stage below, it would
    // embed again.
    let graph_ms = time(&|| {
        let _ = retrieve::graph_lane(snap, &target, Some(lanes_dyn), true, &analogues, args.k);
    });
    let stage_ms = [
        time(&|| {
            let _ = lanes_dyn.bm25(&target.text, args.k);
        }),
        time(&|| {
            // `context` asked with this text just now: a trailing space is another text, which
            // tokenizes alike and is embedded again, so this times the embedding too, not the
            // vector scan alone.
            let _ = lanes_dyn.dense(&format!("{} ", target.text), args.k);
        }),
        graph_ms,
    ];

    let lists: BTreeMap<&str, &Vec<String>> = out.lane_hits.iter().map(|(l, ids)| (*l, ids)).collect();
    // The context's ranking, recomputed from the lane lists: reciprocal rank fusion, then the
    // dependencies (the graph lane's first k) before the examples.
    let fused = retrieve::fuse(
        &out.lane_hits.iter().map(|(l, ids)| (Lane::parse(l).expect("a lane name"), ids.clone())).collect::<Vec<_>>(),
    );
    let graph_list = lists.get("graph").map(|l| l.as_slice()).unwrap_or(&[]);
    let plain_fusion: Vec<String> = fused.iter().map(|f| f.id.clone()).collect();
    let fused = retrieve::context_order(fused, graph_list, &retrieve::dependency_set(snap, graph_list, args.k));
    // The graph lane's candidates and their features: for the trace, and for the graph lane
    // ranked by structure alone.
    let exclude: FxHashSet<String> = std::iter::once(cand.id.clone()).collect();
    let features = retrieve::candidate_features(snap, &target, Some(lanes_dyn), true, &analogues, &exclude);
    let mut by_structure: Vec<(f64, &str)> =
        features.iter().map(|(id, f)| (f.structure_score(), id.as_str())).collect();
    by_structure.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.1.cmp(b.1)));
    let ablations: [Vec<&str>; 2] =
        [by_structure.iter().map(|(_, id)| *id).collect(), plain_fusion.iter().map(String::as_str).collect()];
    // The ranking's first k (the answer goes on past it with the units the text holds).
    let top: Vec<&str> = out.results.iter().take(args.k).map(|r| r.name.as_str()).collect();
    let recomputed: Vec<&str> = fused.iter().take(top.len()).map(|f| f.id.as_str()).collect();
    if top != recomputed {
        eprintln!(
            "{project}: warning: the fused ranking recomputed from lane_hits differs from the answer for {}",
            cand.id
        );
    }
    let block = out.context.clone().context("a context block")?;
    let lane_status: BTreeMap<String, String> =
        out.lanes.iter().flatten().map(|(l, r)| (l.to_string(), r.status.to_string())).collect();
    let lanes_complete = lane_status.values().all(|s| s == "ready");
    let in_block = |id: &str| -> bool {
        if block.units.iter().any(|u| u.name == id) {
            return true;
        }
        let Some(u) = snap.unit(id) else { return false };
        block
            .units
            .iter()
            .any(|c| c.file == u.file.graph.path && c.start_line <= u.unit.start_line && u.unit.end_line <= c.end_line)
    };
    let cut: BTreeSet<&str> = block.cut.iter().map(String::as_str).collect();
    let mut needs = Vec::new();
    for dep in needed {
        let mut ranks = [None; 4];
        for (i, lane) in LISTS[..3].iter().enumerate() {
            ranks[i] = lists.get(lane).and_then(|ids| ids.iter().position(|x| x == dep)).map(|p| p + 1);
        }
        ranks[3] = fused.iter().position(|f| &f.id == dep).map(|p| p + 1);
        let ablation_ranks = ablations.each_ref().map(|l| l.iter().position(|x| x == dep).map(|p| p + 1));
        let in_context = in_block(dep);
        let is_cut = cut.contains(dep.as_str());
        let stage = if in_context {
            None
        } else if !snap.contains_unit(dep) || (!lanes_complete && ranks[3].is_none()) {
            Some("missing from the index")
        } else if ranks[3].is_none() {
            Some("not retrieved")
        } else if ranks[3].is_some_and(|r| r > args.k) {
            Some("ranked too low")
        } else if is_cut {
            Some("cut by the budget")
        } else {
            Some("other")
        };
        let kind = snap.unit(dep).map_or("not in the index", |u| u.unit.kind.as_str());
        let place =
            places.and_then(|p| p.get(dep).copied()).unwrap_or_else(|| place_of(snap, &cand.id, cand.kind, dep));
        needs.push(Needed { id: dep.clone(), kind, place, ranks, ablation_ranks, in_context, cut: is_cut, stage });
    }
    let result = TaskResult {
        project: project.to_string(),
        target: cand.id.clone(),
        target_kind: cand.kind.as_str(),
        needed: needs,
        signature_deps,
        list_lens: [
            lists.get("bm25").map_or(0, |l| l.len()),
            lists.get("dense").map_or(0, |l| l.len()),
            lists.get("graph").map_or(0, |l| l.len()),
            fused.len(),
        ],
        context_tokens: block.tokens,
        budget: block.budget,
        context_units: block.units.len(),
        context_dependencies: block.units.iter().filter(|u| u.role == "dependency").count(),
        token_rule: block.token_rule,
        latency_ms,
        stage_ms,
        lane_status,
    };
    if let Some(w) = trace {
        let line = json!({
            "graph_features": features.iter().map(|(id, f)| json!({"id": id, "f": f})).collect::<Vec<_>>(),
            "project": project,
            "task": cand.id,
            "query": query,
            "snapshot_version": out.version,
            "lanes": serde_json::to_value(&out.lanes)?,
            "target_text": target.text,
            "lane_hits": out.lane_hits.iter().map(|(l, ids)| {
                (l.to_string(), json!(ids.iter().enumerate().map(|(i, id)| json!({"rank": i + 1, "id": id})).collect::<Vec<_>>()))
            }).collect::<serde_json::Map<_, _>>(),
            "fused": out.results.iter().take(args.k).enumerate().map(|(i, r)| json!({
                "rank": i + 1, "id": r.name, "score": r.score, "lanes": r.lanes, "role": r.role,
            })).collect::<Vec<_>>(),
            "context": {
                "budget": block.budget,
                "tokens": block.tokens,
                "token_rule": block.token_rule,
                "units": block.units.iter().map(|u| json!({"id": u.name, "role": u.role, "tokens": u.tokens, "file": u.file})).collect::<Vec<_>>(),
                "cut": block.cut,
            },
            "needed": result.needed.iter().map(|n| json!({
                "id": n.id, "kind": n.kind, "place": n.place,
                "ranks": {"bm25": n.ranks[0], "dense": n.ranks[1], "graph": n.ranks[2], "fused": n.ranks[3]},
                "in_context": n.in_context, "cut": n.cut, "lost_at": n.stage,
            })).collect::<Vec<_>>(),
            "signature_deps": signature_deps,
            "latency_ms": latency_ms,
        });
        serde_json::to_writer(&mut *w, &line)?;
        w.write_all(b"\n")?;
    }
    Ok(result)
}

fn render(
    args: &Args,
    args_line: &str,
    all: &[TaskResult],
    infos: &[ProjectInfo],
    not_started: &[String],
    latency: Option<&latency::LatencyReport>,
) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(out, "# Retrieval benchmark\n\n`retrieval {args_line}`\n\n{}", machine_info());
    let (tasks_are, truth_is, proxy) = if args.external.is_some() {
        (
            "A task is a function or method of DevEval (Li et al., 2024: real projects, each function's dependencies \
             annotated by people as intra-class, intra-file and cross-file), read from the file given with \
             `--tasks-from` (`bench/deveval/fetch` writes it, with each project's source from its PyPI sdist), \
             at most {} per project. Names are mapped onto fresco's units through the file each one lives in \
             (bench/src/retrieval/external.rs); a task whose function this release does not define is skipped, and a \
             dependency no unit answers to stays needed and is never found",
            "The **truth** of a task is the set of dependencies DevEval annotated for it, whatever fresco's graph says \
             the body used; modules among them count like any unit.",
            "This is the held-out external benchmark the targets refer to, on the PyPI releases nearest to \
             DevEval's snapshots (`bench/deveval/fetch` writes how many task signatures sit on DevEval's line to \
             `projects.tsv`).",
        )
    } else {
        (
            "A task is a function or method of a real project (outside test files, defined in a module or a class) whose \
             original body uses at least one unit of the repository: a `calls`, `references` or `inherits` edge to a \
             class, function, method or variable of the snapshot. Tasks are taken in a fixed pseudo-random order (xxh3 of \
             the unit id), at most {} per project",
            "The **truth** of a task is the set of units the original body used minus those the blanked unit still uses \
             (through its signature, annotations or decorators: those are not retrieval).",
            "This is a proxy for the external benchmark the targets \
             refer to: it asks whether fresco finds what a body needs from its signature and docstring alone.",
        )
    };
    let _ = writeln!(
        out,
        "## What is measured\n\n\
         {}. For each task the file is rewritten with the body blanked — decorators, \
         signature and docstring kept, the rest replaced by `...` — the change is applied to the index \
         (`Indexer::apply`) and sent to the retrieval lanes (`RetrievalLanes::start`, the daemon's lanes thread: \
         BM25 updated incrementally, the changed units re-embedded), the benchmark waits until both lanes report the \
         new version, and runs `context NAME budget {} k {}` in-process (`fresco_query::run`). Then the original file \
         is restored and applied again.\n\n\
         {truth_is} Each lane's own ranked list \
         (`Output.lane_hits`: bm25 and dense asked for k = {}, the graph lane's list up to 4k), the fused ranking \
         (the ranking `context` returns: the dependencies — the graph lane's first k, in its order — then the \
         usage examples in the order of the reciprocal rank fusion over those lists; recomputed in full from the lists and checked against \
         `Output.results`) \
         and the assembled context (`Output.context`: a needed unit counts as in the context when it or a unit \
         containing it was chosen) are scored against it. {proxy} \
         Context tokens are counted with the MiniLM tokenizer without truncation (`Embedder::count_tokens`), \
         as `RetrievalLanes::count_tokens` does (the shipped `tokenizer.json` truncates and pads to 128 tokens for \
         the model; both switch that off).\n\n\
         **Where a miss was lost** (a needed unit not in the context): *missing from the index* (not in the snapshot, \
         or a lane was not complete and no list had it), *not retrieved* (in no lane's list), *ranked too low* (in \
         some list but beyond fused rank {}), *cut by the budget* (within the fused top {} but listed as cut), \
         *other* (within the fused top {} and not cut, but never pasted by design: a module, the target itself, a \
         class containing the target). A median of an even count is the upper of the two middle values, p95 the \
         value at rank round(0.95 (n - 1)) from the smallest; stage times are taken right after the query, the \
         dense one with the query embedded again.\n",
        tasks_are.replace("{}", &args.tasks.to_string()),
        args.budget,
        args.k,
        args.k,
        args.k,
        args.k,
        args.k
    );

    if let Some(mode) = args.as_new {
        let _ = writeln!(
            out,
            "**Mode `--as-new {}`**: the task's function is not blanked but removed from its file (decorators, \
             signature, docstring and body; a `pass` keeps the block it was in), and asked for as a function not \
             written yet: `context for \"HEADER\" in FILE{} budget {} k {}`, HEADER being the decorators, signature \
             and docstring the blanked file has. Functions defined more than once are skipped (removing one renames \
             the others), and so are functions of a file with another function of their name (`context for` would \
             take it for them). What the graph lane knows of a stub's place (its class, its neighbours) comes from {}.\n",
            if mode == AsNew::Line { "line" } else { "file" },
            if mode == AsNew::Line { ":LINE" } else { "" },
            args.budget,
            args.k,
            if mode == AsNew::Line {
                "LINE, the line the function started at"
            } else {
                "the text alone: a method is placed in a class only when the file has one"
            },
        );
    }
    // A run of `--latency ROOT` alone has no projects and no tasks: no table of them.
    if !infos.is_empty() {
        let _ = writeln!(out, "## Projects\n");
        let _ = writeln!(
            out,
            "| project | root | files | units | edges | cold index | candidates | tried | tasks | BM25 ready | dense ready (all units) | lanes caught up after an edit (median) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for i in infos {
            let dense = match i.dense_ready_s {
                Some(s) if i.vectors_reused => format!("{s:.1} s (vectors of an earlier run)"),
                Some(s) => format!("{s:.1} s ({:.0} units/s)", i.units as f64 / s.max(1e-9)),
                None => i.dense_status.clone(),
            };
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} | {:.2} s | {} | {} | {} | {:.2} s | {} | {:.0} ms |",
                i.name,
                i.root,
                i.files,
                i.units,
                i.edges,
                i.index_s,
                i.candidates,
                i.tried,
                i.tasks,
                i.bm25_ready_s,
                dense,
                i.lane_update_median_ms
            );
        }
        for i in infos {
            if !i.skipped.is_empty() {
                let s: Vec<String> = i.skipped.iter().map(|(k, v)| format!("{k}: {v}")).collect();
                let _ = writeln!(out, "\n{} candidates skipped: {}.", i.name, s.join("; "));
            }
        }
        if !not_started.is_empty() {
            let _ = writeln!(
                out,
                "\nNot started (`--stop-after` reached; in the order given): {}.",
                not_started.iter().map(|r| format!("`{r}`")).collect::<Vec<_>>().join(", ")
            );
        }
        let sig: usize = all.iter().map(|t| t.signature_deps).sum();
        if args.external.is_some() {
            let _ = writeln!(
                out,
                "\nUnits the blanked signatures still use, by fresco's graph: {sig} over {} tasks (counted as needed when \
             DevEval annotated them).\n",
                all.len()
            );
        } else {
            let _ = writeln!(
                out,
                "\nUses kept by the blanked signatures (not counted as needed): {sig} over {} tasks. `C.__init__` folded into \
         its class `C` when both are needed (a constructor call): {}.\n",
                all.len(),
                infos.iter().map(|i| i.init_folded).sum::<usize>()
            );
        }
    }
    if !all.is_empty() {
        let _ = writeln!(out, "## Results, all projects\n");
        // The plot is written beside the report as `NAME-recall.svg` (see `main`).
        if let Some(name) = args.report.as_deref().and_then(|r| Path::new(r).file_name()) {
            let _ = writeln!(out, "![Recall@k per lane]({}-recall.svg)\n", name.to_string_lossy());
        }
        metrics::tables(&mut out, all, true);
        let _ = writeln!(out, "\n## Targets\n");
        let r10 = metrics::mean_recall(all, 3, 10);
        let r50 = metrics::mean_recall(all, 3, 50);
        let _ = writeln!(out, "| target | measured | |\n|---|---:|---|");
        let verdict = |ok: bool| if ok { "met" } else { "**MISSED**" };
        let on = if args.external.is_some() { "DevEval" } else { "proxy" };
        let _ = writeln!(out, "| fused Recall@10 ≥ 0.75 ({on}) | {r10:.3} | {} |", verdict(r10 >= 0.75));
        let _ = writeln!(out, "| fused Recall@50 ≥ 0.9 ({on}) | {r50:.3} | {} |", verdict(r50 >= 0.9));
        if let Some(l) = latency {
            let _ = writeln!(
                out,
                "| `search` median < 20 ms (django, dense lane partial: see below) | {:.1} ms | {} |",
                l.search.median,
                verdict(l.search.median < 20.0)
            );
            let _ = writeln!(
                out,
                "| `context` median < 50 ms (django) | {:.1} ms | {} |",
                l.context.median,
                verdict(l.context.median < 50.0)
            );
        }
        for info in infos {
            let tasks: Vec<TaskResult> = all.iter().filter(|t| t.project == info.name).cloned().collect();
            if tasks.is_empty() {
                continue;
            }
            let _ = writeln!(out, "\n## {}\n", info.name);
            metrics::tables(&mut out, &tasks, false);
            let lat = metrics::stats(&tasks.iter().map(|t| t.latency_ms).collect::<Vec<_>>());
            let _ = writeln!(out, "`context` latency: median {:.1} ms, p95 {:.1} ms.", lat.median, lat.p95);
        }
    }
    if let Some(l) = latency {
        let _ = writeln!(
            out,
            "\n## Latency on {}\n",
            Path::new(&l.root).file_name().map_or(l.root.clone(), |n| n.to_string_lossy().to_string())
        );
        let embed_rate = l.embedded as f64 / l.embed_s.max(1e-9);
        let _ = writeln!(
            out,
            "`{}`: {} files, {} units; cold index {:.1} s; BM25 index built in {:.1} s (1 thread).\n\n\
             **Dense lane**: every unit's production text (`embed::unit_text`) was embedded with the production \
             embedder (`Embedder`, 1 thread like the worker's default, batches of {}) in a fixed pseudo-random order for \
             {:.0} s (model load {:.2} s): {} of {} texts, **{:.1} units/s**, so all units would take about {:.0} min on \
             this machine. The queries below use that partial index ({} vectors, {} units missing), so the dense lane \
             answers `partial`; nothing runs in the background while they are measured. The cost of scanning a \
             full-size index is measured separately on a synthetic index of {} random unit vectors (same int8 \
             brute-force scan).\n",
            l.root,
            l.files,
            l.units,
            l.index_s,
            l.text_build_s,
            fresco_indexer::embed::BATCH_SIZE,
            l.embed_s,
            l.model_load_s,
            l.embedded,
            l.to_embed,
            embed_rate,
            l.to_embed as f64 / embed_rate.max(1e-9) / 60.0,
            l.dense_indexed,
            l.dense_missing,
            l.units,
        );
        if l.text_panics > 0 {
            let _ = writeln!(
                out,
                "**The production embedding worker cannot index this repository**: `embed::unit_text` panics on {} of \
                 its units (first: `{}`) — `skip_docstring` slices the text at a byte offset inside a multi-byte \
                 character (`inner[i..]` while stepping bytes) — which kills the `fresco-embed` thread; the lane then \
                 stays `embedding` forever instead of turning `unavailable`. That is why this measurement embeds in the \
                 benchmark rather than through `EmbedWorker` (those units are left out).\n",
                l.text_panics,
                l.panic_example.as_deref().unwrap_or("none"),
            );
        }
        let _ = writeln!(
            out,
            "{} queries of each kind, {} repetitions each, in-process (`fresco_query::run`, end to end including the \
             query embedding); search texts are the first line of docstrings of functions picked in a fixed \
             pseudo-random order, context targets are other functions and methods (bodies intact).\n",
            l.queries, l.reps
        );
        let _ = writeln!(out, "| query | median | p95 | max | n |\n|---|---:|---:|---:|---:|");
        let row = |out: &mut String, name: &str, s: &metrics::Stats| {
            let _ = writeln!(out, "| {name} | {:.2} ms | {:.2} ms | {:.2} ms | {} |", s.median, s.p95, s.max, s.n);
        };
        row(&mut out, "`search \"…\" k 10` (bm25 + dense, partial dense index)", &l.search);
        row(&mut out, "`search \"…\" k 10 lanes bm25`", &l.search_bm25);
        row(&mut out, "`context X budget 4000 k 50` (all lanes, partial dense index)", &l.context);
        row(&mut out, "`context X budget 4000 k 50 lanes bm25,graph`", &l.context_bm25_graph);
        let label = format!(
            "part: embed the query (MiniLM, the query pool's {} threads)",
            fresco_indexer::embed::default_query_threads()
        );
        row(&mut out, &label, &l.embed_query);
        row(&mut out, "part: BM25 top 10", &l.bm25_alone);
        row(
            &mut out,
            &format!("part: dense scan of the partial index ({} vectors)", l.dense_indexed),
            &l.dense_partial_scan,
        );
        row(
            &mut out,
            &format!("part: dense scan of a full-size index ({} vectors, synthetic)", l.units),
            &l.dense_full_scan,
        );
        for (round, how) in [
            (&l.while_embedding, "the worker pausing for queries"),
            (&l.while_embedding_unpaused, "not pausing, as before"),
        ] {
            row(&mut out, &format!("`search \"…\" k 10` while the background embedding runs ({how})"), &round.search);
            row(
                &mut out,
                &format!("`context X budget 4000 k 50` while the background embedding runs ({how})"),
                &round.context,
            );
            row(
                &mut out,
                &format!("part: dense scan of the full-size index while the background embedding runs ({how})"),
                &round.full_scan,
            );
        }
        let e = &l.edited;
        row(
            &mut out,
            &format!("BM25 index update: one file re-indexed ({} files, one per update)", e.files),
            &e.update,
        );
        row(
            &mut out,
            "part: BM25 top 10 right after each of those updates (a new generation's first query)",
            &e.first_search,
        );
        row(&mut out, "BM25 index update with nothing to re-index (commit, reload, live statistics)", &e.empty_update);
        row(&mut out, "part: BM25 top 10, after those updates", &e.bm25);
        row(&mut out, "`context X budget 4000 k 50 lanes bm25,graph`, after those updates", &e.context_bm25_graph);
        let heavy_share = 100.0 * e.heavy_deleted as f64 / (e.heavy_docs + e.heavy_deleted).max(1) as f64;
        row(
            &mut out,
            &format!("BM25 index update: one file re-indexed, {heavy_share:.1} % of documents deleted"),
            &e.heavy_update,
        );
        row(
            &mut out,
            &format!("part: BM25 top 10 right after each of those updates, {heavy_share:.1} % deleted"),
            &e.heavy_first_search,
        );
        let full_search = l.search.median + (l.dense_full_scan.median - l.dense_partial_scan.median).max(0.0);
        let full_context = l.context.median + (l.dense_full_scan.median - l.dense_partial_scan.median).max(0.0);
        let _ = writeln!(
            out,
            "\nWith every unit embedded the dense scan would cost the full-size figure instead of the partial one: \
             estimated `search` median ≈ {full_search:.1} ms and `context` median ≈ {full_context:.1} ms. \
             Context tokens used on django: median {:.0} of 4000.",
            l.context_tokens.median
        );
        let _ = writeln!(
            out,
            "\nThe BM25 rows after the dense ones come last: the index re-indexed {} files one per update, as a daemon \
             does on saves, each followed by one query (the first of its reader generation, which counts its terms' \
             statistics afresh), and kept {} deleted documents in {} segments (merges drop them past a share of \
             10 %); then the queries again, their statistics counted once per generation. Then more files, until \
             8 % of the documents were deleted, and {} more update-then-query pairs ({} deleted at the end). BM25's \
             statistics count live documents only, so that the same snapshot ranks the same whatever the index's \
             history: an update computes them for the new reader generation, and a query term's count walks its \
             postings or seeks them to each deleted document, whichever is shorter.",
            e.files, e.deleted, e.segments, e.heavy_update.n, e.heavy_deleted
        );
        let rate = |r: &latency::BusyRound| r.embedded as f64 / r.seconds.max(1e-9);
        let _ = writeln!(
            out,
            "\nThe rows \"while the background embedding runs\" repeat one round of the queries with a thread \
             embedding the remaining units on one thread, as the daemon's worker does after an index. First as the \
             worker does now: passes of {} texts, pausing between two operations while a query embeds its text \
             and scans the vector index (`embed::QueryFirst`); it embedded {} texts in those {:.1} s ({:.1} units/s). Then without the pauses, \
             in passes of {} texts, as the worker did before: {} texts in {:.1} s ({:.1} units/s). Alone: {:.1} units/s.",
            fresco_indexer::embed::BACKGROUND_BATCH_SIZE,
            l.while_embedding.embedded,
            l.while_embedding.seconds,
            rate(&l.while_embedding),
            fresco_indexer::embed::BATCH_SIZE,
            l.while_embedding_unpaused.embedded,
            l.while_embedding_unpaused.seconds,
            rate(&l.while_embedding_unpaused),
            embed_rate,
        );
    }
    out
}

fn machine_info() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name").map(|v| v.trim_start_matches([' ', '\t', ':']).to_string()))
        })
        .unwrap_or_else(|| "unknown".into());
    let nproc = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let out = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    let date = out("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let commit = env!("FRESCO_BENCH_COMMIT");
    let dirty = env!("FRESCO_BENCH_DIRTY");
    let commit = if dirty.is_empty() {
        commit.to_string()
    } else {
        format!(
            "{commit} plus uncommitted changes to {dirty} (other engineers' work in progress, built into this binary)"
        )
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    format!(
        "- date: {date}\n- CPU: {cpu}, nproc = {nproc}\n- fresco commit {commit} (release build)\n\
         - load average when the report was written: {load} (2 cores shared with other work: latencies are noisy)\n"
    )
}
