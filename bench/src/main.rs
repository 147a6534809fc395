//! fresco's benchmark harness.
//!
//! ```text
//! fresco-bench index       [--runs N] [--threads T] [--report NAME] ROOT...
//! fresco-bench incremental [--runs N] [--threads T] [--report NAME] [--file REL]... ROOT...
//! fresco-bench query       [--reps N] [--threads T] [--report NAME] [--fresco PATH] ROOT
//! ```
//! Every figure is a median (and min) over N runs, shown beside the alternative measured in the
//! same invocation (CPython's `ast.parse`, or the cold index). Each cold configuration runs in a
//! fresh child process of this binary (`fresco-bench __child ...`), so that the peak RSS read
//! from `/proc/self/status` belongs to that configuration alone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use fresco_indexer::{FileEvent, Indexer, IndexerOptions, WalkOptions, walk};
use serde_json::{Value, json};

mod fresh;
mod memory;
mod query;

fn main() -> Result<()> {
    // SAFETY: no other thread exists yet (candle's thread count: see the function).
    unsafe { fresco_indexer::process::put_core_count_in_environment() };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(cmd) = args.first() else {
        usage();
        std::process::exit(2);
    };
    // `fresco-bench SUBCOMMAND --help` is a request for the usage, not an unknown option.
    if cmd != "__child" && args[1..].iter().any(|a| a == "-h" || a == "--help") {
        usage();
        return Ok(());
    }
    match cmd.as_str() {
        "__child" => child(&args[1..]),
        "index" => run_index(Args::parse(&args[1..])?),
        "incremental" => run_incremental(Args::parse(&args[1..])?),
        "query" => query::run_query_bench(query::QueryArgs::parse(&args[1..])?),
        "fresh" => fresh::run_fresh_bench(fresh::FreshArgs::parse(&args[1..])?),
        "memory" => memory::run_memory_bench(memory::MemoryArgs::parse(&args[1..])?),
        "-h" | "--help" | "help" => {
            usage();
            Ok(())
        }
        other => {
            eprintln!("unknown subcommand {other:?}");
            usage();
            std::process::exit(2);
        }
    }
}

fn usage() {
    eprintln!(
        "usage:\n  fresco-bench index       [--runs N] [--threads T] [--report NAME] ROOT...\n  \
         fresco-bench incremental [--runs N] [--threads T] [--report NAME] [--file REL]... ROOT...\n  \
         fresco-bench query       [--reps N] [--threads T] [--report NAME] [--fresco PATH] ROOT\n  \
         fresco-bench fresh       [--reps N] [--half-typed] [--report NAME] [--fresco PATH] ROOT\n  \
         fresco-bench memory      [--renames N] [--dir REL] [--report NAME] [--fresco PATH]... ROOT"
    );
}

struct Args {
    runs: usize,
    threads: usize,
    report: Option<String>,
    files: Vec<String>,
    roots: Vec<PathBuf>,
}

impl Args {
    fn parse(args: &[String]) -> Result<Args> {
        let mut out = Args {
            runs: 5,
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            report: None,
            files: Vec::new(),
            roots: Vec::new(),
        };
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().cloned().with_context(|| format!("{name} needs a value"));
            match a.as_str() {
                "--runs" => out.runs = value("--runs")?.parse()?,
                "--threads" => out.threads = value("--threads")?.parse()?,
                "--report" => out.report = Some(value("--report")?),
                "--file" => out.files.push(value("--file")?),
                s if s.starts_with("--") => bail!("unknown option {s}"),
                root => out.roots.push(PathBuf::from(root).canonicalize().with_context(|| format!("root {root}"))?),
            }
        }
        if out.roots.is_empty() {
            bail!("no ROOT given");
        }
        out.runs = out.runs.max(1);
        out.threads = out.threads.max(1);
        Ok(out)
    }
}

// ---------------------------------------------------------------------------------------------
// Statistics and formatting

#[derive(Clone, Debug, Default)]
pub(crate) struct Stat {
    pub(crate) values: Vec<f64>,
}

impl Stat {
    pub(crate) fn of(values: Vec<f64>) -> Stat {
        let mut values = values;
        values.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Stat { values }
    }
    pub(crate) fn median(&self) -> f64 {
        let v = &self.values;
        if v.is_empty() {
            return f64::NAN;
        }
        let n = v.len();
        if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
    }
    pub(crate) fn min(&self) -> f64 {
        self.values.first().copied().unwrap_or(f64::NAN)
    }
    pub(crate) fn max(&self) -> f64 {
        self.values.last().copied().unwrap_or(f64::NAN)
    }
}

pub(crate) fn ms(secs: f64) -> String {
    let ms = secs * 1000.0;
    if ms >= 100.0 {
        format!("{ms:.0} ms")
    } else if ms >= 1.0 {
        format!("{ms:.1} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

fn mib(kb: f64) -> String {
    format!("{:.0} MiB", kb / 1024.0)
}

fn bytes_h(b: u64) -> String {
    let b = b as f64;
    if b >= 1024.0 * 1024.0 { format!("{:.1} MiB", b / 1048576.0) } else { format!("{:.1} KiB", b / 1024.0) }
}

fn si(x: f64) -> String {
    if x >= 1e6 {
        format!("{:.2} M", x / 1e6)
    } else if x >= 1e3 {
        format!("{:.1} k", x / 1e3)
    } else {
        format!("{x:.0}")
    }
}

pub(crate) fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**MISSED**" }
}

/// Peak resident set size of this process, in KiB.
fn vm_hwm_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
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
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().map(|l| l.split_whitespace().nth(1).unwrap_or("0").to_string()))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map(|kb| format!("{:.1} GiB", kb / 1048576.0))
        .unwrap_or_default();
    let date = cmd_out("date", &["-u", "+%Y-%m-%d %H:%M UTC"]);
    let kernel = cmd_out("uname", &["-r"]);
    let rustc = cmd_out("rustc", &["--version"]);
    let python = cmd_out("python3", &["--version"]);
    let commit = env!("FRESCO_BENCH_COMMIT");
    let dirty = env!("FRESCO_BENCH_DIRTY");
    let commit = if dirty.is_empty() {
        commit.to_string()
    } else {
        format!(
            "{commit} plus uncommitted changes to {dirty} (work in progress by another engineer, built into this binary)"
        )
    };
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load = load.split_whitespace().take(3).collect::<Vec<_>>().join(" ");
    format!(
        "- date: {date}\n- CPU: {cpu}, nproc = {nproc}, memory {mem}\n- kernel {kernel}; {rustc}; {python}\n\
         - fresco commit {commit} (release build; the sources the binary was built from)\n\
         - load average when the report was written: {load} (the 2 cores are shared with other work, so single runs are noisy: read the medians)\n"
    )
}

fn cmd_out(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "?".into())
}

pub(crate) fn emit(report: Option<&str>, title: &str, args_line: &str, body: &str) -> Result<()> {
    let text = format!("# {title}\n\n`{args_line}`\n\n{}\n{body}", machine_info());
    println!("{text}");
    if let Some(name) = report {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("reports");
        std::fs::create_dir_all(&dir)?;
        let path = dir.join(format!("{name}.md"));
        std::fs::write(&path, &text)?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

fn options(threads: usize) -> IndexerOptions {
    IndexerOptions { threads, ..IndexerOptions::default() }
}

// ---------------------------------------------------------------------------------------------
// Child processes: one cold measurement each.

/// `__child KIND THREADS ROOT [DB_DIR]`: runs one measurement and prints one JSON line.
fn child(args: &[String]) -> Result<()> {
    let [kind, threads, root, rest @ ..] = args else { bail!("__child KIND THREADS ROOT [DB]") };
    let threads: usize = threads.parse()?;
    // As the fresco binary does, so that the peak RSS measured is the product's.
    fresco_indexer::process::limit_malloc_arenas(threads);
    let root = Path::new(root);
    let out = match kind.as_str() {
        "memory" => {
            let start = Instant::now();
            let mut indexer = Indexer::in_memory(root, options(threads));
            indexer.refresh()?;
            let secs = start.elapsed().as_secs_f64();
            index_json(&indexer, secs)
        }
        "persisted" | "reopen" => {
            let db = Path::new(rest.first().context("DB_DIR")?);
            let start = Instant::now();
            let indexer = Indexer::open(root, db, options(threads))?;
            let secs = start.elapsed().as_secs_f64();
            let mut v = index_json(&indexer, secs);
            let counts = indexer.take_execution_counts();
            v["executions"] = json!(counts.into_iter().collect::<std::collections::BTreeMap<_, _>>());
            v["rebuilt"] = json!(indexer.rebuilt_store);
            drop(indexer);
            v["store_bytes"] = json!(dir_size(db));
            v
        }
        "parse" | "lower" => {
            let (files, _) = walk::discover(root, &WalkOptions::default())?;
            let texts: Vec<std::sync::Arc<str>> = files
                .iter()
                .filter_map(|f| walk::read_source(root, f, walk::DEFAULT_MAX_FILE_SIZE))
                .filter(|r| r.skipped.is_none())
                .map(|r| r.text)
                .collect();
            let lower = kind == "lower";
            let errors = AtomicUsize::new(0);
            let start = Instant::now();
            parallel_for(&texts, threads, |text| {
                if lower {
                    let syntax = fresco_indexer::lower::lower(text);
                    std::hint::black_box(&syntax);
                } else {
                    match fresco_indexer::lower::parse(text) {
                        Some(tree) => {
                            if tree.root_node().has_error() {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                            std::hint::black_box(&tree);
                        }
                        None => {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            });
            let secs = start.elapsed().as_secs_f64();
            json!({"secs": secs, "files": texts.len(), "errors": errors.load(Ordering::Relaxed), "hwm_kb": vm_hwm_kb()})
        }
        other => bail!("unknown child kind {other}"),
    };
    println!("{out}");
    Ok(())
}

fn index_json(indexer: &Indexer, secs: f64) -> Value {
    let snap = indexer.snapshot();
    let t = snap.totals();
    let (mut lines, mut bytes) = (0usize, 0usize);
    for f in snap.files() {
        bytes += f.text.len();
        lines += f.text.bytes().filter(|&b| b == b'\n').count();
    }
    json!({
        "secs": secs, "files": t.files, "lines": lines, "bytes": bytes, "units": t.units, "edges": t.edges,
        "unresolved": t.unresolved, "parse_error_files": t.parse_error_files, "skipped": t.skipped_files,
        "hwm_kb": vm_hwm_kb(),
    })
}

fn parallel_for<T: Sync>(items: &[T], threads: usize, f: impl Fn(&T) + Sync) {
    if threads <= 1 {
        items.iter().for_each(f);
        return;
    }
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            let (next, f) = (&next, &f);
            scope.spawn(move || {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) {
                    f(item);
                }
            });
        }
    });
}

fn spawn_child(kind: &str, threads: usize, root: &Path, db: Option<&Path>) -> Result<Value> {
    let exe = std::env::current_exe()?;
    let mut cmd = Command::new(exe);
    cmd.arg("__child").arg(kind).arg(threads.to_string()).arg(root);
    if let Some(db) = db {
        cmd.arg(db);
    }
    let out = cmd.output()?;
    if !out.status.success() {
        bail!("child {kind} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    let text = String::from_utf8(out.stdout)?;
    Ok(serde_json::from_str(text.lines().last().context("no child output")?)?)
}

/// N cold runs of one configuration, each in a fresh process (and a fresh store directory).
fn cold_runs(kind: &str, threads: usize, root: &Path, runs: usize) -> Result<Vec<Value>> {
    let mut out = Vec::new();
    for i in 0..runs {
        eprint!("\r  {kind:<9} threads={threads} run {}/{runs}   ", i + 1);
        let v = if kind == "persisted" {
            let tmp = tempfile::tempdir()?;
            spawn_child(kind, threads, root, Some(&tmp.path().join("db")))?
        } else {
            spawn_child(kind, threads, root, None)?
        };
        out.push(v);
    }
    eprintln!();
    Ok(out)
}

fn stat(runs: &[Value], key: &str) -> Stat {
    Stat::of(runs.iter().map(|v| v[key].as_f64().unwrap_or(f64::NAN)).collect())
}

fn du(path: &Path) -> (u64, u64) {
    // (apparent bytes, allocated bytes)
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    if let Ok(entries) = std::fs::read_dir(path) {
        for e in entries.flatten() {
            let Ok(meta) = e.metadata() else { continue };
            if meta.is_dir() {
                let (a, b) = du(&e.path());
                total.0 += a;
                total.1 += b;
            } else {
                total.0 += meta.len();
                total.1 += meta.blocks() * 512;
            }
        }
    }
    total
}

fn dir_size(path: &Path) -> u64 {
    du(path).0
}

// ---------------------------------------------------------------------------------------------
// CPython baseline

const PY_BASELINE: &str = r#"
import ast, json, os, sys, time, warnings
warnings.simplefilter("ignore")
root, runs = sys.argv[1], int(sys.argv[2])
SKIP = {".git", "__pycache__", "node_modules", "build", "dist", "venv", ".venv"}
paths = []
for d, dirs, files in os.walk(root):
    dirs[:] = sorted(x for x in dirs if x not in SKIP)
    paths.extend(os.path.join(d, f) for f in sorted(files) if f.endswith(".py"))
times, errors, nbytes, lines = [], 0, 0, 0
for r in range(runs):
    errors = nbytes = lines = 0
    t0 = time.perf_counter()
    for p in paths:
        with open(p, "rb") as fh:
            src = fh.read()
        try:
            ast.parse(src, p)
        except (SyntaxError, ValueError):
            errors += 1
        nbytes += len(src)
    times.append(time.perf_counter() - t0)
for p in paths:
    with open(p, "rb") as fh:
        lines += fh.read().count(b"\n")
print(json.dumps({"files": len(paths), "bytes": nbytes, "lines": lines, "errors": errors, "times": times}))
"#;

fn python_baseline(root: &Path, runs: usize) -> Result<Value> {
    eprintln!("  python3 ast.parse x{runs}");
    let out = Command::new("python3").arg("-c").arg(PY_BASELINE).arg(root).arg(runs.to_string()).output()?;
    if !out.status.success() {
        bail!("python3 failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(serde_json::from_slice(&out.stdout)?)
}

// ---------------------------------------------------------------------------------------------
// `index`

fn run_index(args: Args) -> Result<()> {
    let t = args.threads;
    let mut body = String::new();
    let mut summary = String::new();
    writeln!(
        summary,
        "## Summary\n\n| corpus | files | lines | cold in-memory, {t} thr | cold persisted, {t} thr | CPython read+ast.parse | fresco {t} thr / ast.parse | fresco 1 thr / ast.parse | peak RSS (in-memory, {t} thr) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )?;
    for root in &args.roots {
        let name = root.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        eprintln!("{name}:");
        let py = python_baseline(root, args.runs)?;
        let py_times = Stat::of(py["times"].as_array().unwrap().iter().filter_map(|v| v.as_f64()).collect());
        let mut configs: Vec<(String, Vec<Value>)> = Vec::new();
        let mut thread_set = vec![1];
        if t > 1 {
            thread_set.push(t);
        }
        for &th in thread_set.iter().rev() {
            configs.push((format!("cold in-memory index, {th} thr"), cold_runs("memory", th, root, args.runs)?));
        }
        configs.push((format!("cold persisted index, {t} thr"), cold_runs("persisted", t, root, args.runs)?));
        let mut phases: Vec<(String, Vec<Value>)> = Vec::new();
        for kind in ["parse", "lower"] {
            for &th in &thread_set {
                phases.push((format!("{kind}, {th} thr"), cold_runs(kind, th, root, args.runs)?));
            }
        }

        let first = &configs[0].1[0];
        let files = first["files"].as_f64().unwrap_or(0.0);
        let lines = first["lines"].as_f64().unwrap_or(0.0);
        let bytes = first["bytes"].as_f64().unwrap_or(0.0);
        writeln!(body, "## {name}\n\n`{}`\n", root.display())?;
        writeln!(
            body,
            "{} files ({} skipped, {} with parse errors), {} lines, {}; graph: {} units, {} edges, {} unresolved call sites.\n\
             CPython walked {} files ({} lines), {} failed `ast.parse`.\n",
            files,
            first["skipped"],
            first["parse_error_files"],
            lines,
            bytes_h(bytes as u64),
            first["units"],
            first["edges"],
            first["unresolved"],
            py["files"],
            py["lines"],
            py["errors"],
        )?;
        writeln!(
            body,
            "| configuration | median | min | max | files/s | lines/s | peak RSS (median) | time / CPython's |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        )?;
        let pym = py_times.median();
        writeln!(
            body,
            "| CPython 3 read + `ast.parse` (1 thr, in one process) | {} | {} | {} | {} | {} | – | 1.00x |",
            ms(pym),
            ms(py_times.min()),
            ms(py_times.max()),
            si(py["files"].as_f64().unwrap_or(0.0) / pym),
            si(py["lines"].as_f64().unwrap_or(0.0) / pym),
        )?;
        for (label, runs) in configs.iter().chain(phases.iter()) {
            let s = stat(runs, "secs");
            let m = s.median();
            let n_files = runs[0]["files"].as_f64().unwrap_or(files);
            writeln!(
                body,
                "| {label} | {} | {} | {} | {} | {} | {} | {:.2}x |",
                ms(m),
                ms(s.min()),
                ms(s.max()),
                si(n_files / m),
                si(lines / m),
                mib(stat(runs, "hwm_kb").median()),
                m / pym,
            )?;
        }
        if let Some(p) = configs.iter().find(|(l, _)| l.starts_with("cold persisted")) {
            let store = stat(&p.1, "store_bytes").median();
            writeln!(
                body,
                "\nStore size after a cold persisted index: {} ({:.2}x the {} of source).",
                bytes_h(store as u64),
                store / bytes,
                bytes_h(bytes as u64)
            )?;
        }
        // Phase shares, single-threaded.
        let med = |label: &str| {
            configs
                .iter()
                .chain(phases.iter())
                .find(|(l, _)| l == label)
                .map(|(_, r)| stat(r, "secs").median())
                .unwrap_or(f64::NAN)
        };
        let (p1, l1, i1) = (med("parse, 1 thr"), med("lower, 1 thr"), med("cold in-memory index, 1 thr"));
        if !(p1 < l1 && l1 < i1) {
            // Each configuration is measured in its own processes, one after the other: when the
            // machine's speed moves between them, a part can read as taking negative time.
            writeln!(
                body,
                "\nPhase breakdown (1 thread): not computed in this run: the medians are out of order (parse {}, \
                 parse+lower {}, whole cold index {}), so the machine's speed moved between configurations.",
                ms(p1),
                ms(l1),
                ms(i1),
            )?;
        } else {
            writeln!(
                body,
                "\nPhase breakdown (1 thread, medians, files already in memory for parse/lower): tree-sitter parse {} \
             ({:.0}% of the cold index), lowering {} ({:.0}%), everything else (walk, read, summaries, module table, \
             resolution, snapshot) {} ({:.0}%).",
                ms(p1),
                100.0 * p1 / i1,
                ms(l1 - p1),
                100.0 * (l1 - p1) / i1,
                ms(i1 - l1),
                100.0 * (i1 - l1) / i1,
            )?;
        }
        if t > 1 {
            let (pt, lt, it) = (
                med(&format!("parse, {t} thr")),
                med(&format!("lower, {t} thr")),
                med(&format!("cold in-memory index, {t} thr")),
            );
            writeln!(
                body,
                "With {t} threads: parse {} ({:.2}x speed-up), parse+lower {} ({:.2}x), cold in-memory index {} ({:.2}x).",
                ms(pt),
                p1 / pt,
                ms(lt),
                l1 / lt,
                ms(it),
                i1 / it
            )?;
        }
        writeln!(body)?;
        let mem_t = med(&format!("cold in-memory index, {t} thr"));
        let pers_t = med(&format!("cold persisted index, {t} thr"));
        let rss = configs
            .iter()
            .find(|(l, _)| *l == format!("cold in-memory index, {t} thr"))
            .map(|(_, r)| stat(r, "hwm_kb").median())
            .unwrap_or(f64::NAN);
        writeln!(
            summary,
            "| {name} | {files} | {lines} | {} | {} | {} | {:.2}x | {:.2}x | {} |",
            ms(mem_t),
            ms(pers_t),
            ms(pym),
            mem_t / pym,
            i1 / pym,
            mib(rss)
        )?;
    }
    writeln!(
        summary,
        "\nRatios are fresco's median wall time divided by CPython's median read+`ast.parse` time over the same tree, measured in the same invocation (below 1 = fresco is faster). The fresco cold index includes the walk, reading, parsing, lowering, summaries, name resolution and building the snapshot (plus store writes when persisted); CPython's figure is read + parse only, walk excluded.\n"
    )?;
    let line = format!("fresco-bench index --runs {} --threads {} {}", args.runs, t, roots_line(&args.roots));
    emit(args.report.as_deref(), "fresco-bench index", &line, &format!("{summary}\n{body}"))
}

fn roots_line(roots: &[PathBuf]) -> String {
    roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(" ")
}

// ---------------------------------------------------------------------------------------------
// `incremental`

pub(crate) fn copy_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let ty = entry.file_type()?;
        let dst = to.join(entry.file_name());
        if ty.is_dir() {
            copy_tree(&entry.path(), &dst)?;
        } else if ty.is_file() {
            std::fs::copy(entry.path(), &dst)?;
        } else if ty.is_symlink()
            && let Ok(target) = std::fs::read_link(entry.path())
        {
            std::os::unix::fs::symlink(target, &dst).ok();
        }
    }
    Ok(())
}

/// A top-level or method `def` with a one-line signature, a parameter list without `*`, `/` or
/// a trailing comma, and a plain body. Returns (line index of the def, index of the last body
/// line, body indentation).
#[derive(Clone, Debug)]
struct Target {
    def_line: usize,
    last_body_line: usize,
    body_indent: String,
    name: String,
}

fn find_targets(text: &str) -> Vec<Target> {
    let lines: Vec<&str> = text.lines().collect();
    let indent_of = |l: &str| l.len() - l.trim_start().len();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        if !trimmed.starts_with("def ") || !trimmed.ends_with("):") {
            continue;
        }
        let Some(open) = trimmed.find('(') else {
            continue;
        };
        let params = &trimmed[open + 1..trimmed.len() - 2];
        if params.contains('*') || params.contains('/') || params.trim_end().ends_with(',') || params.contains('(') {
            continue;
        }
        let def_indent = indent_of(line);
        let mut last = None;
        let mut body_indent = None;
        for (j, l) in lines.iter().enumerate().skip(i + 1) {
            if l.trim().is_empty() {
                continue;
            }
            if indent_of(l) <= def_indent {
                break;
            }
            if body_indent.is_none() {
                body_indent = Some(l[..indent_of(l)].to_string());
            }
            last = Some(j);
        }
        let (Some(last), Some(body_indent)) = (last, body_indent) else {
            continue;
        };
        // The last body line must be at body indentation and not inside a string or bracket.
        let ll = lines[last];
        if indent_of(ll) != body_indent.len()
            || ll.contains("\"\"\"")
            || ll.contains("'''")
            || ll.trim_end().ends_with('\\')
        {
            continue;
        }
        let name = trimmed[4..open].to_string();
        out.push(Target { def_line: i, last_body_line: last, body_indent, name });
    }
    out
}

fn body_edit(text: &str, t: &Target, k: usize) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    lines.insert(t.last_body_line + 1, format!("{}_fresco_bench_local = {k}", t.body_indent));
    lines.join("\n") + "\n"
}

fn signature_edit(text: &str, t: &Target, k: usize) -> String {
    let mut lines: Vec<String> = text.lines().map(String::from).collect();
    let line = &lines[t.def_line];
    let head = &line[..line.len() - 2];
    let sep = if head.ends_with('(') { "" } else { ", " };
    lines[t.def_line] = format!("{head}{sep}_fresco_bench_param{k}=None):");
    lines.join("\n") + "\n"
}

#[derive(Default)]
struct Measure {
    secs: Vec<f64>,
    resolved: Vec<usize>,
    changed: Vec<usize>,
    executions: Vec<std::collections::BTreeMap<String, u64>>,
}

impl Measure {
    fn push(&mut self, secs: f64, report: &fresco_indexer::BatchReport, ex: std::collections::BTreeMap<String, u64>) {
        self.secs.push(secs);
        self.resolved.push(report.resolved_files);
        self.changed.push(report.changed_files.len() + report.removed_files.len());
        self.executions.push(ex);
    }
    fn stat(&self) -> Stat {
        Stat::of(self.secs.clone())
    }
    fn executions_text(&self) -> String {
        // Report the median count per query over the runs.
        let mut names: Vec<&String> = self.executions.iter().flat_map(|m| m.keys()).collect();
        names.sort();
        names.dedup();
        if names.is_empty() {
            return "none".into();
        }
        names
            .iter()
            .map(|n| {
                let s = Stat::of(self.executions.iter().map(|m| *m.get(*n).unwrap_or(&0) as f64).collect());
                let (lo, hi) = (s.min(), s.max());
                if lo == hi { format!("{n} {lo}") } else { format!("{n} {} ({lo}–{hi})", s.median()) }
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
    fn counts_text(v: &[usize]) -> String {
        if v.is_empty() {
            return "–".into();
        }
        let s = Stat::of(v.iter().map(|&x| x as f64).collect());
        if s.min() == s.max() { format!("{}", s.min()) } else { format!("{} ({}–{})", s.median(), s.min(), s.max()) }
    }
}

struct Edited {
    path: String,
    module: String,
    n_dependents: usize,
    target: Target,
    lines: usize,
    body_m: Measure,
    sig_m: Measure,
    interface_changed: Vec<bool>,
    lower_secs: Stat,
}

fn sorted_counts(indexer: &Indexer) -> std::collections::BTreeMap<String, u64> {
    indexer.take_execution_counts().into_iter().collect()
}

fn run_incremental(args: Args) -> Result<()> {
    let t = args.threads;
    let mut body = String::new();
    let mut summary = String::from(
        "## Summary\n\n| corpus | operation | median | cold persisted index (median) | ratio to cold | target | verdict |\n|---|---|---:|---:|---:|---:|---|\n",
    );
    for root in &args.roots {
        let name = root.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
        eprintln!("{name}:");
        let tmp = tempfile::tempdir()?;
        let copy = tmp.path().join(&name);
        eprintln!("  copying the tree to {}", copy.display());
        copy_tree(root, &copy)?;
        let db = tmp.path().join("db");

        // Cold persisted index of the copy, in fresh processes (and fresh stores).
        let cold = cold_runs("persisted", t, &copy, args.runs)?;
        let cold_s = stat(&cold, "secs");
        let cold_m = cold_s.median();

        // The index the edits run against.
        let mut indexer = Indexer::open(&copy, &db, options(t))?;
        let snap = indexer.snapshot().clone();
        let source_bytes: u64 = snap.files().map(|f| f.text.len() as u64).sum();

        // Pick the target file: the one whose module the most files consulted, with a function
        // we can edit (or --file).
        let mut dependents: std::collections::HashMap<&str, usize> = Default::default();
        for f in snap.files() {
            for m in &f.deps.modules {
                *dependents.entry(m.as_str()).or_default() += 1;
            }
        }
        let mut candidates: Vec<(usize, String)> = snap
            .files()
            .map(|f| (*dependents.get(f.graph.module.as_str()).unwrap_or(&0), f.graph.path.clone()))
            .collect();
        candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let pick = |path: &str| -> Option<(String, String, Target)> {
            let text = std::fs::read_to_string(copy.join(path)).ok()?;
            let targets = find_targets(&text);
            // Prefer a top-level function.
            // Prefer a public top-level function (part of the module's interface), then any.
            let top = |t: &&Target| !text.lines().nth(t.def_line).unwrap().starts_with(' ');
            let target = targets
                .iter()
                .find(|t| top(t) && !t.name.starts_with('_'))
                .or(targets.iter().find(top))
                .or(targets.first())?
                .clone();
            Some((path.to_string(), text, target))
        };
        // The automatic pick, then every --file present under this root.
        let mut chosen: Vec<(String, String, Target)> = vec![
            candidates
                .iter()
                .filter(|(_, p)| !p.contains("test"))
                .find_map(|(_, p)| pick(p))
                .context("no editable file")?,
        ];
        for f in &args.files {
            if copy.join(f).is_file() && !chosen.iter().any(|c| c.0 == *f) {
                chosen.push(pick(f).with_context(|| format!("no editable function in {f}"))?);
            }
        }
        let mut edited: Vec<Edited> = Vec::new();
        for (path, original, target) in chosen {
            let module = snap.file(&path).map(|f| f.graph.module.clone()).unwrap_or_default();
            let n_dependents = dependents.get(module.as_str()).copied().unwrap_or(0);
            eprintln!("  target {path} ({module}, consulted by {n_dependents} files), function {}", target.name);
            let file_abs = copy.join(&path);
            let check = |indexer: &Indexer, what: &str| -> Result<()> {
                let errors = indexer.snapshot().file(&path).map(|f| f.graph.parse_errors).unwrap_or(0);
                if errors > 0 {
                    bail!("the {what} edit of {path} introduced a parse error");
                }
                Ok(())
            };
            let restore = |indexer: &mut Indexer| -> Result<()> {
                std::fs::write(&file_abs, &original)?;
                indexer.apply(vec![FileEvent::Changed(path.clone())])?;
                Ok(())
            };
            let interface = |indexer: &Indexer| indexer.snapshot().file(&path).map(|f| f.deps.interface);

            // (a) body edit
            let mut body_m = Measure::default();
            for k in 0..args.runs {
                eprint!("\r  body edit run {}/{}   ", k + 1, args.runs);
                let new = body_edit(&original, &target, k);
                indexer.take_execution_counts();
                let start = Instant::now();
                std::fs::write(&file_abs, &new)?;
                let report = indexer.apply(vec![FileEvent::Changed(path.clone())])?;
                let secs = start.elapsed().as_secs_f64();
                body_m.push(secs, &report, sorted_counts(&indexer));
                check(&indexer, "body")?;
                if !report.published {
                    bail!("the body edit published nothing");
                }
            }
            eprintln!();
            restore(&mut indexer)?;

            // (b) signature edit
            let mut sig_m = Measure::default();
            let mut interface_changed = Vec::new();
            for k in 0..args.runs {
                eprint!("\r  signature edit run {}/{}   ", k + 1, args.runs);
                let new = signature_edit(&original, &target, k);
                let before = interface(&indexer);
                indexer.take_execution_counts();
                let start = Instant::now();
                std::fs::write(&file_abs, &new)?;
                let report = indexer.apply(vec![FileEvent::Changed(path.clone())])?;
                let secs = start.elapsed().as_secs_f64();
                sig_m.push(secs, &report, sorted_counts(&indexer));
                interface_changed.push(interface(&indexer) != before);
                check(&indexer, "signature")?;
                // Put the original back between runs so that every run is the same edit size.
                restore(&mut indexer)?;
            }
            eprintln!();

            // For scale: lowering the edited file alone, in this process.
            let lower_secs = Stat::of(
                (0..args.runs)
                    .map(|_| {
                        let start = Instant::now();
                        std::hint::black_box(fresco_indexer::lower::lower(&original));
                        start.elapsed().as_secs_f64()
                    })
                    .collect(),
            );
            let lines = original.lines().count();
            edited.push(Edited {
                path,
                module,
                n_dependents,
                target,
                lines,
                body_m,
                sig_m,
                interface_changed,
                lower_secs,
            });
        }

        // (c) add a new file, then delete it
        let path = edited[0].path.clone();
        let new_rel = match path.rsplit_once('/') {
            Some((dir, _)) => format!("{dir}/_fresco_bench_new.py"),
            None => "_fresco_bench_new.py".to_string(),
        };
        let new_abs = copy.join(&new_rel);
        let (mut add_m, mut del_m) = (Measure::default(), Measure::default());
        for k in 0..args.runs {
            eprint!("\r  add/delete run {}/{}   ", k + 1, args.runs);
            let text = format!(
                "import os\n\nfrom . import {stem}\n\n\ndef fresco_bench_new_{k}(x=None):\n    return os.path.join(str(x), {stem}.__name__)\n",
                stem = path.rsplit('/').next().unwrap().trim_end_matches(".py")
            );
            indexer.take_execution_counts();
            let start = Instant::now();
            std::fs::write(&new_abs, &text)?;
            let report = indexer.apply(vec![FileEvent::Changed(new_rel.clone())])?;
            add_m.push(start.elapsed().as_secs_f64(), &report, sorted_counts(&indexer));
            indexer.take_execution_counts();
            let start = Instant::now();
            std::fs::remove_file(&new_abs)?;
            let report = indexer.apply(vec![FileEvent::Removed(new_rel.clone())])?;
            del_m.push(start.elapsed().as_secs_f64(), &report, sorted_counts(&indexer));
        }
        eprintln!();
        let final_totals = indexer.snapshot().totals();
        drop(indexer);

        // (d) reopen the unchanged index, each in a fresh process.
        let mut reopen = Vec::new();
        for i in 0..args.runs {
            eprint!("\r  reopen run {}/{}   ", i + 1, args.runs);
            reopen.push(spawn_child("reopen", t, &copy, Some(&db))?);
        }
        eprintln!();

        // (e) store size
        let (store_apparent, store_alloc) = du(&db);
        let cold_store = stat(&cold, "store_bytes").median();

        // Report
        writeln!(
            body,
            "## {name}\n\n`{}` (copied to a temporary directory; store in a temporary directory)\n",
            root.display()
        )?;
        writeln!(
            body,
            "{} files, {} of Python source; {} units, {} edges, {} unresolved call sites.\n",
            final_totals.files,
            bytes_h(source_bytes),
            final_totals.units,
            final_totals.edges,
            final_totals.unresolved,
        )?;
        for e in &edited {
            writeln!(
                body,
                "- Edited `{}` ({} lines; module `{}`, consulted by {} files' resolution), function `{}` (line {}). \
                 The signature edit changed the file's interface hash in {}/{} runs. \
                 `lower::lower` of this file alone takes {} (median, in-process).",
                e.path,
                e.lines,
                e.module,
                e.n_dependents,
                e.target.name,
                e.target.def_line + 1,
                e.interface_changed.iter().filter(|&&c| c).count(),
                e.interface_changed.len(),
                ms(e.lower_secs.median()),
            )?;
        }
        writeln!(
            body,
            "\n(The first file is the most-consulted non-test module with an editable function, picked automatically; others were named with `--file`.)"
        )?;
        writeln!(body)?;
        writeln!(
            body,
            "Cold persisted index (fresh process and store, {t} threads): median {}, min {}, max {} over {} runs.\n",
            ms(cold_m),
            ms(cold_s.min()),
            ms(cold_s.max()),
            args.runs
        )?;
        writeln!(
            body,
            "| operation | median | min | max | ratio to cold | target | verdict | files re-resolved | files changed in the graph | salsa queries re-executed (per run) |\n|---|---:|---:|---:|---:|---:|---|---:|---:|---|"
        )?;
        let mut row = |label: &str, m: &Measure, target: Option<f64>| -> Result<()> {
            let s = m.stat();
            let ratio = s.median() / cold_m;
            let (target_s, verdict_s) = match target {
                Some(tg) => (format!("< 1/{:.0}", 1.0 / tg), verdict(ratio < tg).to_string()),
                None => ("–".into(), "–".into()),
            };
            writeln!(
                body,
                "| {label} | {} | {} | {} | 1/{:.0} ({:.4}) | {target_s} | {verdict_s} | {} | {} | {} |",
                ms(s.median()),
                ms(s.min()),
                ms(s.max()),
                1.0 / ratio,
                ratio,
                Measure::counts_text(&m.resolved),
                Measure::counts_text(&m.changed),
                m.executions_text()
            )?;
            if let Some(tg) = target {
                writeln!(
                    summary,
                    "| {name} | {label} | {} | {} | 1/{:.0} | < 1/{:.0} | {} |",
                    ms(s.median()),
                    ms(cold_m),
                    1.0 / ratio,
                    1.0 / tg,
                    verdict(ratio < tg)
                )?;
            }
            Ok(())
        };
        for e in &edited {
            row(&format!("(a) body edit in `{}` (write → published version)", e.path), &e.body_m, Some(1.0 / 200.0))?;
        }
        for e in &edited {
            row(
                &format!("(b) signature edit in `{}`: new parameter with a default", e.path),
                &e.sig_m,
                Some(1.0 / 20.0),
            )?;
        }
        row("(c) add a new file", &add_m, None)?;
        row("(c) delete that file", &del_m, None)?;
        let mut reopen_m = Measure::default();
        for r in &reopen {
            reopen_m.secs.push(r["secs"].as_f64().unwrap_or(f64::NAN));
            reopen_m.executions.push(serde_json::from_value(r["executions"].clone()).unwrap_or_default());
        }
        row("(d) reopen the unchanged index (fresh process)", &reopen_m, Some(1.0 / 5.0))?;
        let rebuilt: Vec<&Value> = reopen.iter().map(|r| &r["rebuilt"]).filter(|v| !v.is_null()).collect();
        if !rebuilt.is_empty() {
            writeln!(body, "\nWARNING: a reopen rebuilt the store: {rebuilt:?}")?;
        }
        let ratio_e = store_apparent as f64 / source_bytes as f64;
        writeln!(
            body,
            "\n(e) Store size on disk: {} apparent ({} allocated) after the edits, vs {} of `.py` source: {:.2}x (target < 3x: {}). \
             Right after a cold index: {} ({:.2}x).\n\
             Peak RSS: cold persisted index {} (median), reopen {} (median).\n\
             The \"files re-resolved\" column counts the files the indexer re-ran resolution for (`BatchReport::resolved_files`); \
             for a reopen the indexer does not report it. Query counts are from `Indexer::take_execution_counts()`, reset right before each edit.\n",
            bytes_h(store_apparent),
            bytes_h(store_alloc),
            bytes_h(source_bytes),
            ratio_e,
            verdict(ratio_e < 3.0),
            bytes_h(cold_store as u64),
            cold_store / source_bytes as f64,
            mib(stat(&cold, "hwm_kb").median()),
            mib(stat(&reopen, "hwm_kb").median()),
        )?;
        writeln!(
            summary,
            "| {name} | (e) store size on disk after the edits | {} | source {} | {:.2}x | < 3x | {} |",
            bytes_h(store_apparent),
            bytes_h(source_bytes),
            ratio_e,
            verdict(ratio_e < 3.0)
        )?;
        let ratio_cold = cold_store / source_bytes as f64;
        writeln!(
            summary,
            "| {name} | (e) store size on disk right after a cold index | {} | source {} | {:.2}x | < 3x | {} |",
            bytes_h(cold_store as u64),
            bytes_h(source_bytes),
            ratio_cold,
            verdict(ratio_cold < 3.0)
        )?;
    }
    let files: String = args.files.iter().map(|f| format!("--file {f} ")).collect();
    let line =
        format!("fresco-bench incremental --runs {} --threads {} {files}{}", args.runs, t, roots_line(&args.roots));
    emit(args.report.as_deref(), "fresco-bench incremental", &line, &format!("{summary}\n{body}"))
}
