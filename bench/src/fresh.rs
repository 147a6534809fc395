//! `fresco-bench fresh`: save-to-fresh-answer latency through the real daemon.
//!
//! On a copy of the tree (the daemon writes cookie files into it and the bench edits it), the
//! daemon is started and left to settle; then, repeatedly, a new function is appended to one of
//! the repository's files and, immediately after the write, a `wait` query asks for it by name.
//! The time from starting the write to having the answer is the save-to-fresh latency: it
//! includes the watcher, the debounce (flushed early by the waiting query), re-indexing the file
//! and publishing the version. An answer that does not contain the new function counts as a
//! failure (it never should).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::json;

use super::query::{Conn, fresco_binary, start_daemon, wait_idle, wait_ready};
use super::{Stat, copy_tree, emit, ms, verdict};

pub struct FreshArgs {
    reps: usize,
    /// Save each new function half-typed: its header's bracket open and its colon missing.
    half_typed: bool,
    report: Option<String>,
    fresco: Option<PathBuf>,
    root: PathBuf,
}

impl FreshArgs {
    pub fn parse(args: &[String]) -> Result<FreshArgs> {
        let (mut reps, mut report, mut fresco, mut root) = (100, None, None, None);
        let mut half_typed = false;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().cloned().with_context(|| format!("{name} needs a value"));
            match a.as_str() {
                "--reps" => reps = value("--reps")?.parse()?,
                "--report" => report = Some(value("--report")?),
                "--fresco" => fresco = Some(PathBuf::from(value("--fresco")?)),
                "--half-typed" => half_typed = true,
                s if s.starts_with("--") => bail!("unknown option {s}"),
                r => root = Some(PathBuf::from(r).canonicalize().with_context(|| format!("root {r}"))?),
            }
        }
        Ok(FreshArgs { reps: reps.max(10), half_typed, report, fresco, root: root.context("no ROOT given")? })
    }
}

/// Python files of the tree, in a deterministic order, skipping tests.
fn candidate_files(root: &Path) -> Result<Vec<String>> {
    let (files, _) = fresco_indexer::walk::discover(root, &Default::default())?;
    Ok(files.into_iter().filter(|f| !f.contains("test") && f.ends_with(".py") && !f.ends_with("__init__.py")).collect())
}

pub fn run_fresh_bench(args: FreshArgs) -> Result<()> {
    let fresco = fresco_binary(args.fresco.as_deref())?;
    let work = tempfile::tempdir()?;
    let root = work.path().join("tree");
    copy_tree(&args.root, &root)?;
    let root = root.canonicalize()?;
    let db = work.path().join("db");
    let runtime = work.path().join("run");
    let mut daemon = start_daemon(&fresco, &root, &db, &runtime, &work.path().join("daemon.log"))?;
    let (mut conn, startup) = wait_ready(&mut daemon, Duration::from_secs(600))?;
    let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
    let settle = wait_idle(pid, Duration::from_secs(120));
    let status = conn.call("status", json!({}))?;

    let files = candidate_files(&root)?;
    if files.is_empty() {
        bail!("no Python files under {}", root.display());
    }
    // Module names as the daemon sees them, to ask for the new function by its qualified name.
    let mut latencies = Vec::new();
    let mut failures = 0;
    let mut versions = Vec::new();
    let mut originals: Vec<(PathBuf, Vec<u8>)> = Vec::new();
    for i in 0..args.reps {
        let rel = &files[(i * 7919) % files.len()];
        let path = root.join(rel);
        let original = std::fs::read(&path)?;
        if !originals.iter().any(|(p, _)| *p == path) {
            originals.push((path.clone(), original.clone()));
        }
        let module = module_of(&mut conn, rel)?;
        let name = format!("fresco_probe_{i}");
        let mut text = original.clone();
        let header = if args.half_typed { format!("def {name}(x, ") } else { format!("def {name}():") };
        text.extend_from_slice(format!("\n\n{header}\n    return {i}\n").as_bytes());
        let params = json!({"query": format!("show {module}.{name}"), "freshness": "wait"});
        let start = Instant::now();
        std::fs::write(&path, &text)?;
        let (_, _) = conn.round_trip("query", &params)?;
        let secs = start.elapsed().as_secs_f64();
        match conn.parse_last() {
            Ok(result) if result["results"][0]["name"] == json!(format!("{module}.{name}")) => {
                latencies.push(secs);
                versions.push(result["version"].as_u64().unwrap_or(0));
            }
            _ => failures += 1,
        }
        // Let the daemon settle before the next save, as a person saving files would.
        std::thread::sleep(Duration::from_millis(40));
    }
    for (path, bytes) in &originals {
        std::fs::write(path, bytes)?;
    }
    let stat = Stat::of(latencies);
    let p95 = stat.values.get(((stat.values.len() as f64) * 0.95) as usize).copied().unwrap_or(f64::NAN);
    let body = format!(
        "daemon start {}, settled after {:.1} s more; {} files, {} units\n\n\
         | measure | value |\n|---|---|\n\
         | saves measured | {} (failures, i.e. an answer without the new function: {failures}) |\n\
         | save → fresh answer, median | {} |\n\
         | save → fresh answer, p95 | {} |\n\
         | save → fresh answer, min / max | {} / {} |\n\
         | target: p95 under 50 ms including debounce | {} |\n\n\
         Each save appends a new function to a different file of the tree (skipping tests and \
         `__init__.py`); the query is `show MODULE.fresco_probe_N` with freshness `wait`, sent right \
         after the write returns; the time runs from the start of the write to the end of the answer. \
         The daemon runs with its default 15 ms debounce, which a waiting query flushes early; the dense \
         lane is off (background embedding would share the cores).{}\n",
        ms(startup),
        settle,
        status["files"],
        status["units"],
        stat.values.len(),
        ms(stat.median()),
        ms(p95),
        ms(stat.min()),
        ms(stat.max()),
        verdict(p95 < 0.050),
        if args.half_typed {
            "\n\nWith `--half-typed` each new function is saved as it is while its parameters are typed: \
             `def fresco_probe_N(x, ` above its body, the bracket open and the colon missing. The file \
             then has a parse error, and the answer needs the repair of `indexer/src/repair.rs`: \
             several candidate texts parsed again, the one that leaves least in error kept."
        } else {
            ""
        },
    );
    let flag = if args.half_typed { " --half-typed" } else { "" };
    let args_line = format!("fresco-bench fresh --reps {}{flag} {}", args.reps, args.root.display());
    let title =
        if args.half_typed { "Save-to-fresh-answer latency, half-typed saves" } else { "Save-to-fresh-answer latency" };
    emit(args.report.as_deref(), title, &args_line, &body)?;
    if failures > 0 {
        bail!("{failures} answers did not reflect the save");
    }
    Ok(())
}

fn module_of(conn: &mut Conn, rel: &str) -> Result<String> {
    let query = format!("find kind module in \"{rel}\"");
    let result = conn.call("query", json!({"query": query, "freshness": "allow"}))?;
    Ok(result["results"][0]["name"].as_str().context("no module unit for the file")?.to_string())
}
