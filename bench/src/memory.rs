//! `fresco-bench memory`: how much memory the daemon keeps after large changes.
//!
//! A daemon lives for days, and some changes touch thousands of files at once: a branch switch,
//! a directory renamed. On a copy of the tree, each given `fresco` binary in turn is started and
//! left to settle; then one directory is renamed back and forth, and after each rename the bench
//! waits for the version that reflects it (a query with freshness `wait`) and for the lexical
//! lane, lets the daemon go idle, and reads its resident memory (`status`'s `memory_bytes`, the
//! RSS). Last, the daemon is killed and started again on the same tree and index (a warm start),
//! which gives the memory of a daemon that never saw the renames. Several binaries side by side are the point:
//! the one before a change against the one after it, on the same machine in the same session.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use serde_json::{Value, json};

use super::query::{Conn, fresco_binary, start_daemon, wait_idle, wait_ready};
use super::{copy_tree, emit};

pub struct MemoryArgs {
    renames: usize,
    dir: Option<String>,
    report: Option<String>,
    binaries: Vec<PathBuf>,
    root: PathBuf,
}

impl MemoryArgs {
    pub fn parse(args: &[String]) -> Result<MemoryArgs> {
        let (mut renames, mut dir, mut report, mut binaries, mut root) = (6, None, None, Vec::new(), None);
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().cloned().with_context(|| format!("{name} needs a value"));
            match a.as_str() {
                "--renames" => renames = value("--renames")?.parse()?,
                "--dir" => dir = Some(value("--dir")?),
                "--report" => report = Some(value("--report")?),
                "--fresco" => binaries.push(PathBuf::from(value("--fresco")?)),
                s if s.starts_with("--") => bail!("unknown option {s}"),
                r => root = Some(PathBuf::from(r).canonicalize().with_context(|| format!("root {r}"))?),
            }
        }
        if binaries.is_empty() {
            binaries.push(fresco_binary(None)?);
        }
        for b in &mut binaries {
            *b = fresco_binary(Some(b))?;
        }
        Ok(MemoryArgs { renames: renames.max(1), dir, report, binaries, root: root.context("no ROOT given")? })
    }
}

/// The top-level directory of `root` with the most Python files under it.
fn largest_directory(root: &Path) -> Result<(String, usize)> {
    let (files, _) = fresco_indexer::walk::discover(root, &Default::default())?;
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for f in &files {
        if let Some((top, _)) = f.split_once('/') {
            *counts.entry(top).or_default() += 1;
        }
    }
    let (dir, n) = counts.into_iter().max_by_key(|(_, n)| *n).context("no Python file below a top-level directory")?;
    Ok((dir.to_string(), n))
}

/// One binary's run.
struct Run {
    binary: PathBuf,
    started: u64,
    /// Per rename: resident bytes once idle, and seconds from the rename to its version.
    renames: Vec<(u64, f64)>,
    restarted: u64,
    /// Readings taken after 120 s of waiting for the daemon to go idle, in vain.
    busy_readings: usize,
}

fn memory_bytes(status: &Value) -> Result<u64> {
    status["memory_bytes"].as_u64().context("status has no memory_bytes")
}

/// Waits for the version that reflects a rename just made: a query with freshness `wait` is
/// answered only once the daemon has seen every change made before it was sent and published a
/// version with them (docs/protocol.md), and that version is the answer's. Then waits until the
/// lexical lane reflects it. Returns the status and the seconds from `since` to the answer.
fn wait_for_rename(conn: &mut Conn, probe: &str, since: Instant) -> Result<(Value, f64)> {
    let params = json!({"query": format!("find kind module in \"{probe}\""), "freshness": "wait", "wait_ms": 120000});
    let answer = conn.call("query", params)?;
    let published = since.elapsed().as_secs_f64();
    let version = answer["version"].as_u64().context("the answer has no version")?;
    if answer["results"].as_array().is_none_or(|r| r.is_empty()) {
        bail!("version {version} has no module in {probe} after the rename");
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let status = conn.call("status", json!({}))?;
        let bm25 = &status["lanes"]["bm25"];
        if bm25["version"].as_u64().is_some_and(|v| v >= version) && bm25["lag"].as_u64() == Some(0) {
            return Ok((status, published));
        }
        if Instant::now() > deadline || bm25["status"] == "failed" || bm25["status"] == "unavailable" {
            bail!("the lexical lane did not reach version {version}: {bm25}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn measure(binary: &Path, source: &Path, dir: &str, renames: usize) -> Result<Run> {
    let work = tempfile::tempdir()?;
    let root = work.path().join("tree");
    copy_tree(source, &root)?;
    let root = root.canonicalize()?;
    let db = work.path().join("db");
    let runtime = work.path().join("run");
    let log = work.path().join("daemon.log");
    // A reading taken while the daemon was still busy is counted, and the report says so.
    let busy_readings = std::cell::Cell::new(0);
    let settle = |daemon: &super::query::Daemon| {
        let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
        if wait_idle(pid, Duration::from_secs(120)) >= 120.0 {
            busy_readings.set(busy_readings.get() + 1);
        }
    };

    let mut daemon = start_daemon(binary, &root, &db, &runtime, &log)?;
    let (mut conn, _) = wait_ready(&mut daemon, Duration::from_secs(600))?;
    settle(&daemon);
    let started = memory_bytes(&conn.call("status", json!({}))?)?;

    let moved = format!("{dir}.fresco-moved");
    let mut runs = Vec::new();
    for i in 0..renames {
        let (from, to) = if i % 2 == 0 { (dir, moved.as_str()) } else { (moved.as_str(), dir) };
        let since = Instant::now();
        std::fs::rename(root.join(from), root.join(to)).with_context(|| format!("rename {from}"))?;
        let (_, published) = wait_for_rename(&mut conn, &format!("{to}/*"), since)?;
        settle(&daemon);
        let status = conn.call("status", json!({}))?;
        runs.push((memory_bytes(&status)?, published));
    }
    drop(conn);
    drop(daemon);

    let mut daemon = start_daemon(binary, &root, &db, &runtime, &log)?;
    let (mut conn, _) = wait_ready(&mut daemon, Duration::from_secs(600))?;
    settle(&daemon);
    let restarted = memory_bytes(&conn.call("status", json!({}))?)?;
    Ok(Run { binary: binary.to_path_buf(), started, renames: runs, restarted, busy_readings: busy_readings.get() })
}

/// A markdown table, the first column left-aligned and the others right-aligned.
fn table(header: &[String], rows: &[Vec<String>]) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let rule: Vec<String> = (0..header.len()).map(|i| if i == 0 { "---".into() } else { "---:".into() }).collect();
    let mut out = line(header) + &line(&rule);
    for row in rows {
        out += &line(row);
    }
    out
}

fn mb(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / 1e6)
}

pub fn run_memory_bench(args: MemoryArgs) -> Result<()> {
    let (dir, files) = match &args.dir {
        Some(d) => (d.clone(), 0),
        None => largest_directory(&args.root)?,
    };
    if !args.root.join(&dir).is_dir() {
        bail!("{} has no directory {dir}", args.root.display());
    }
    let mut runs = Vec::new();
    for binary in &args.binaries {
        eprintln!("{}: starting", binary.display());
        runs.push(measure(binary, &args.root, &dir, args.renames)?);
    }

    let mut body = format!(
        "Each binary in turn serves a copy of the tree (a cold index: *started*); `{dir}/`{} is renamed \
         back and forth {} times. After each rename a query with freshness `wait` for the modules under \
         the new name gives the version that reflects the rename (its answer time is the time to \
         publish), the bench waits until the lexical lane has reached that version, then until the \
         daemon has used no CPU for a second, and reads `status`'s `memory_bytes` (the daemon's \
         resident set). The dense lane is off. *Restarted* is the same daemon killed and started \
         again on the same tree and index, a warm start from the stored graph with no derived values \
         in memory: the memory of one that never saw the renames. MB are 10^6 bytes.{}\n\n",
        if files > 0 { format!(" ({files} Python files)") } else { String::new() },
        args.renames,
        match runs.iter().map(|r| r.busy_readings).sum::<usize>() {
            0 => String::new(),
            n => format!(" {n} readings were taken from a daemon still busy after 120 s of waiting."),
        }
    );
    let renames: Vec<String> = (1..=args.renames).map(|i| format!("rename {i}")).collect();
    let header: Vec<String> = ["binary", "started"]
        .into_iter()
        .map(String::from)
        .chain(renames.iter().cloned())
        .chain(["restarted".into()])
        .collect();
    let memory_rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            let mut row = vec![format!("`{}`", run.binary.display()), format!("{} MB", mb(run.started))];
            row.extend(run.renames.iter().map(|(bytes, _)| format!("{} MB", mb(*bytes))));
            row.push(format!("{} MB", mb(run.restarted)));
            row
        })
        .collect();
    body.push_str(&table(&header, &memory_rows));
    body.push_str("\nSeconds from each rename to the version that reflects it:\n\n");
    let header: Vec<String> = std::iter::once("binary".to_string()).chain(renames).collect();
    let time_rows: Vec<Vec<String>> = runs
        .iter()
        .map(|run| {
            std::iter::once(format!("`{}`", run.binary.display()))
                .chain(run.renames.iter().map(|(_, secs)| format!("{secs:.1}")))
                .collect()
        })
        .collect();
    body.push_str(&table(&header, &time_rows));
    let binaries: Vec<String> = args.binaries.iter().map(|b| format!("--fresco {}", b.display())).collect();
    let args_line = format!(
        "fresco-bench memory --renames {}{} {} {}",
        args.renames,
        args.dir.as_ref().map(|d| format!(" --dir {d}")).unwrap_or_default(),
        binaries.join(" "),
        args.root.display()
    );
    emit(args.report.as_deref(), "Daemon memory after large changes", &args_line, &body)
}
