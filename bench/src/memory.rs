//! `fresco-bench memory`: how much memory the daemon keeps after large changes.
//!
//! A daemon lives for days, and some changes touch thousands of files at once: a branch switch,
//! a directory renamed. On a copy of the tree, each given `fresco` binary in turn is started and
//! left to settle; then one directory is renamed back and forth, and after each rename the bench
//! waits until the version that reflects it is published and the lexical lane has caught up,
//! lets the daemon go idle, and reads its resident memory (`status`'s `memory_bytes`, the RSS).
//! Last, the daemon is stopped and started again on the same tree and index, which gives the
//! memory of a daemon that never saw the renames. Several binaries side by side are the point:
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
}

fn memory_bytes(status: &Value) -> Result<u64> {
    status["memory_bytes"].as_u64().context("status has no memory_bytes")
}

/// Waits until the daemon publishes a version after `previous` with no change pending, then
/// until the lexical lane reflects it; returns the status and the seconds to the publication.
fn wait_for_version(conn: &mut Conn, previous: u64, since: Instant) -> Result<(Value, f64)> {
    let published = loop {
        let status = conn.call("status", json!({}))?;
        let version = status["version"].as_u64().unwrap_or(0);
        if version > previous && status["pending"].as_array().is_some_and(|p| p.is_empty()) {
            break since.elapsed().as_secs_f64();
        }
        if since.elapsed() > Duration::from_secs(600) {
            bail!("no new version 600 s after the rename");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    loop {
        let status = conn.call("status", json!({}))?;
        if status["lanes"]["bm25"]["lag"].as_u64() == Some(0) {
            return Ok((status, published));
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
    let settle = |daemon: &super::query::Daemon| {
        let pid = daemon.child.as_ref().map(|c| c.id()).unwrap_or(0);
        wait_idle(pid, Duration::from_secs(120));
    };

    let mut daemon = start_daemon(binary, &root, &db, &runtime, &log)?;
    let (mut conn, _) = wait_ready(&mut daemon, Duration::from_secs(600))?;
    settle(&daemon);
    let status = conn.call("status", json!({}))?;
    let started = memory_bytes(&status)?;
    let mut version = status["version"].as_u64().unwrap_or(0);

    let (here, there) = (root.join(dir), root.join(format!("{dir}.fresco-moved")));
    let mut runs = Vec::new();
    for i in 0..renames {
        let (from, to) = if i % 2 == 0 { (&here, &there) } else { (&there, &here) };
        let since = Instant::now();
        std::fs::rename(from, to).with_context(|| format!("rename {}", from.display()))?;
        let (status, published) = wait_for_version(&mut conn, version, since)?;
        version = status["version"].as_u64().unwrap_or(version);
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
    Ok(Run { binary: binary.to_path_buf(), started, renames: runs, restarted })
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
        "Each binary in turn serves a copy of the tree; `{dir}/`{} is renamed back and forth {} times. \
         After each rename the bench waits until the version reflecting it is published with nothing \
         pending and the lexical lane has caught up, then until the daemon has used no CPU for a \
         second, and reads `status`'s `memory_bytes` (the daemon's resident set). The dense lane is \
         off. *Restarted* is the same daemon stopped and started again on the same tree and index: \
         the memory of one that never saw the renames. MB are 10^6 bytes.\n\n",
        if files > 0 { format!(" ({files} Python files)") } else { String::new() },
        args.renames
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
        "fresco-bench memory --renames {} --dir {dir} {} {}",
        args.renames,
        binaries.join(" "),
        args.root.display()
    );
    emit(args.report.as_deref(), "Daemon memory after large changes", &args_line, &body)
}
