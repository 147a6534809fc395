//! `fresco-bench query`: query latency end to end through the real daemon's Unix socket, beside
//! the in-process time of the same query over the same graph.
//!
//! The graph is indexed once in this process (`Indexer::open` into a temporary store), its
//! snapshot kept, the indexer dropped (releasing the store), and then `fresco serve` is started
//! on the same store, so that the daemon and the in-process executor answer from equal graphs
//! (checked through `status`). Requests are written on one connection, one at a time, as NDJSON;
//! the time is from writing the request to having read the whole response line.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use fresco_graph::{EdgeKind, Snapshot};
use fresco_indexer::Indexer;
use serde_json::{Value, json};

use super::{Stat, emit, ms, options, verdict};

pub struct QueryArgs {
    reps: usize,
    threads: usize,
    report: Option<String>,
    fresco: Option<PathBuf>,
    root: PathBuf,
}

impl QueryArgs {
    pub fn parse(args: &[String]) -> Result<QueryArgs> {
        let mut reps = 200;
        let mut threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let mut report = None;
        let mut fresco = None;
        let mut root = None;
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut value = |name: &str| it.next().cloned().with_context(|| format!("{name} needs a value"));
            match a.as_str() {
                "--reps" => reps = value("--reps")?.parse()?,
                "--threads" => threads = value("--threads")?.parse()?,
                "--report" => report = Some(value("--report")?),
                "--fresco" => fresco = Some(PathBuf::from(value("--fresco")?)),
                s if s.starts_with("--") => bail!("unknown option {s}"),
                r => {
                    if root.is_some() {
                        bail!("`query` takes one ROOT");
                    }
                    root = Some(PathBuf::from(r).canonicalize().with_context(|| format!("root {r}"))?);
                }
            }
        }
        Ok(QueryArgs {
            reps: reps.max(5),
            threads: threads.max(1),
            report,
            fresco,
            root: root.context("no ROOT given")?,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The daemon and a raw protocol connection.

pub(crate) struct Daemon {
    pub(crate) child: Option<Child>,
    socket: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The socket of the daemon serving `root`, as `src/paths.rs` names it.
pub(crate) fn socket_path(runtime: &Path, root: &Path) -> PathBuf {
    let key = xxhash_rust::xxh3::xxh3_64(root.as_os_str().as_encoded_bytes());
    runtime.join(format!("{key:016x}.sock"))
}

pub(crate) fn fresco_binary(explicit: Option<&Path>) -> Result<PathBuf> {
    let path = match explicit {
        Some(p) => p.to_path_buf(),
        None => std::env::current_exe()?.parent().context("no parent of the bench binary")?.join("fresco"),
    };
    if !path.is_file() {
        bail!(
            "no fresco binary at {} (build it with `cargo build --release -p fresco`, or pass --fresco PATH)",
            path.display()
        );
    }
    Ok(path)
}

pub(crate) fn start_daemon(fresco: &Path, root: &Path, db: &Path, runtime: &Path, log: &Path) -> Result<Daemon> {
    std::fs::create_dir_all(runtime)?;
    let log_file = std::fs::File::create(log)?;
    let child = Command::new(fresco)
        .arg("serve")
        .arg(root)
        .arg("--db")
        .arg(db)
        .env("FRESCO_RUNTIME_DIR", runtime)
        // Graph queries are measured: background embedding would share the two cores.
        .env("FRESCO_DENSE", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log_file)
        .spawn()
        .with_context(|| format!("cannot start {} serve", fresco.display()))?;
    Ok(Daemon { child: Some(child), socket: socket_path(runtime, root), log: log.to_path_buf() })
}

pub(crate) struct Conn {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
    line: String,
}

impl Conn {
    pub(crate) fn connect(socket: &Path) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(120)))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader, next_id: 1, line: String::new() })
    }

    /// One request; returns the time from writing it to having read its whole response line,
    /// and the response line's length. Requests go one at a time, so the next line is the
    /// response (its id is checked by [`Conn::parse_last`]).
    pub(crate) fn round_trip(&mut self, method: &str, params: &Value) -> Result<(f64, usize)> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = serde_json::to_vec(&json!({"id": id, "method": method, "params": params}))?;
        request.push(b'\n');
        self.line.clear();
        let start = Instant::now();
        self.stream.write_all(&request)?;
        let n = self.reader.read_line(&mut self.line)?;
        let secs = start.elapsed().as_secs_f64();
        if n == 0 {
            bail!("the daemon closed the connection");
        }
        Ok((secs, n))
    }

    /// The last response, parsed; fails on an error response or a mismatched id.
    pub(crate) fn parse_last(&self) -> Result<Value> {
        let v: Value = serde_json::from_str(self.line.trim()).context("the daemon sent invalid JSON")?;
        if v["id"] != json!(self.next_id - 1) {
            bail!("response to another request: {}", &self.line[..self.line.len().min(300)]);
        }
        if let Some(err) = v.get("error") {
            bail!("error response: {err}");
        }
        Ok(v["result"].clone())
    }

    pub(crate) fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.round_trip(method, &params)?;
        self.parse_last()
    }
}

pub(crate) fn wait_ready(daemon: &mut Daemon, timeout: Duration) -> Result<(Conn, f64)> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        if let Ok(mut c) = Conn::connect(&daemon.socket)
            && let Ok(status) = c.call("status", json!({}))
            && status.get("version").is_some()
        {
            return Ok((c, start.elapsed().as_secs_f64()));
        }
        if let Some(child) = daemon.child.as_mut()
            && let Ok(Some(code)) = child.try_wait()
        {
            bail!("the daemon exited ({code}); log:\n{}", daemon.log());
        }
        if start.elapsed() > timeout {
            bail!("the daemon did not answer in {timeout:?}; log:\n{}", daemon.log());
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// CPU time (user + system, in clock ticks) a process has used so far.
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: count fields after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

/// Waits until the daemon has used (almost) no CPU for a whole second: background work after
/// start-up (the watcher registering the tree) would otherwise share the cores with the
/// measurements. Returns how long that took.
pub(crate) fn wait_idle(pid: u32, timeout: Duration) -> f64 {
    let start = Instant::now();
    let mut quiet = 0;
    let mut last = cpu_ticks(pid);
    while start.elapsed() < timeout && quiet < 4 {
        std::thread::sleep(Duration::from_millis(250));
        let now = cpu_ticks(pid);
        match (last, now) {
            (Some(a), Some(b)) if b.saturating_sub(a) <= 1 => quiet += 1,
            _ => quiet = 0,
        }
        last = now;
    }
    start.elapsed().as_secs_f64()
}

// ---------------------------------------------------------------------------------------------
// Picking the measured units.

fn quotable(id: &str) -> bool {
    !id.contains(['"', '\'', '\\', '*', '?', '[', ':'])
}

struct Picks {
    typical_callee: String,
    typical_callers: usize,
    calls_hub: String,
    calls_hub_callers: usize,
    fan_out: String,
    fan_out_callees: usize,
    impact_hub: String,
    impact_hub_in: usize,
    path_from: String,
    path_to: String,
    path_len: u32,
}

fn pick_units(snapshot: &Snapshot) -> Result<Picks> {
    let impact_kinds = [EdgeKind::Calls, EdgeKind::References, EdgeKind::Inherits, EdgeKind::Imports];
    let mut calls_in: HashMap<&str, usize> = HashMap::new();
    let mut calls_out: HashMap<&str, Vec<&str>> = HashMap::new();
    let mut any_in: HashMap<&str, usize> = HashMap::new();
    for (e, _) in snapshot.edges() {
        if e.src == e.dst {
            continue;
        }
        if e.kind == EdgeKind::Calls {
            *calls_in.entry(&e.dst).or_default() += 1;
            calls_out.entry(&e.src).or_default().push(&e.dst);
        }
        if impact_kinds.contains(&e.kind) {
            *any_in.entry(&e.dst).or_default() += 1;
        }
    }
    // Library code, not its test suite, and callables only.
    let candidates: Vec<&str> = snapshot
        .units()
        .filter(|u| u.unit.kind.is_callable() && !u.file.graph.path.starts_with("tests/") && quotable(&u.unit.id))
        .map(|u| u.unit.id.as_str())
        .collect();
    let best = |score: &dyn Fn(&str) -> usize| -> Option<(String, usize)> {
        candidates
            .iter()
            .map(|id| (score(id), *id))
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(a.1)))
            .map(|(s, id)| (id.to_string(), s))
    };
    let (calls_hub, calls_hub_callers) = best(&|id| calls_in.get(id).copied().unwrap_or(0)).context("no callable")?;
    let (impact_hub, impact_hub_in) = best(&|id| any_in.get(id).copied().unwrap_or(0)).context("no callable")?;
    let (fan_out, fan_out_callees) = best(&|id| calls_out.get(id).map_or(0, |v| v.len())).context("no callable")?;
    // A typical called unit: the median number of callers among callables that have some.
    let mut called: Vec<(usize, &str)> =
        candidates.iter().filter_map(|id| calls_in.get(id).map(|&n| (n, *id))).collect();
    called.sort();
    let (typical_callers, typical_callee) =
        called.get(called.len() / 2).map(|&(n, id)| (n, id.to_string())).context("no calls")?;
    // A path: the unit farthest (at most 4 calls) from the fan-out unit, by BFS over calls.
    let mut dist: HashMap<&str, u32> = HashMap::new();
    let mut queue = VecDeque::new();
    dist.insert(fan_out.as_str(), 0);
    queue.push_back(fan_out.as_str());
    while let Some(n) = queue.pop_front() {
        let d = dist[n];
        if d == 4 {
            continue;
        }
        for &m in calls_out.get(n).map(Vec::as_slice).unwrap_or(&[]) {
            if !dist.contains_key(m) && snapshot.contains_unit(m) {
                dist.insert(m, d + 1);
                queue.push_back(m);
            }
        }
    }
    let (path_to, path_len) = dist
        .iter()
        .filter(|(id, _)| quotable(id))
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(id, d)| (id.to_string(), *d))
        .context("no path")?;
    Ok(Picks {
        typical_callee,
        typical_callers,
        calls_hub,
        calls_hub_callers,
        path_from: fan_out.clone(),
        fan_out,
        fan_out_callees,
        impact_hub,
        impact_hub_in,
        path_to,
        path_len,
    })
}

// ---------------------------------------------------------------------------------------------
// Measuring.

struct Case {
    label: String,
    method: &'static str,
    query: Option<String>,
    freshness: &'static str,
    /// The end-to-end median target, if any.
    target: Option<f64>,
}

struct Measured {
    reps: usize,
    socket: Stat,
    inproc: Option<Stat>,
    inproc_json: Option<Stat>,
    bytes: usize,
    results: String,
}

/// At most this long per measured series: expensive queries get fewer repetitions (never < 20).
const SERIES_BUDGET_SECS: f64 = 20.0;

fn reps_for(one: f64, reps: usize) -> usize {
    if one * reps as f64 <= SERIES_BUDGET_SECS { reps } else { ((SERIES_BUDGET_SECS / one) as usize).clamp(20, reps) }
}

fn percentile(s: &Stat, p: f64) -> f64 {
    // Nearest rank.
    let v = &s.values;
    if v.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

fn measure(conn: &mut Conn, snapshot: &Snapshot, case: &Case, reps: usize) -> Result<Measured> {
    let params = match &case.query {
        Some(q) => json!({"query": q, "freshness": case.freshness}),
        None => json!({}),
    };
    // Warm up, check the answer, size the series.
    let mut warm = Vec::new();
    for _ in 0..3 {
        warm.push(conn.round_trip(case.method, &params)?.0);
    }
    let result = conn.parse_last().with_context(|| format!("{}: {:?}", case.label, case.query))?;
    let results = match result.get("results").and_then(Value::as_array) {
        Some(rows) => {
            let groups: std::collections::BTreeSet<i64> = rows.iter().filter_map(|r| r["group"].as_i64()).collect();
            let mut s = format!("{} rows", rows.len());
            if !groups.is_empty() {
                s.push_str(&format!(" in {} groups", groups.len()));
            }
            if result["truncated"].as_bool() == Some(true) {
                s.push_str(", **truncated**");
            }
            s
        }
        None => "–".into(),
    };
    let ctx = fresco_query::Context::new(snapshot);
    let mut one = Stat::of(warm).median();
    if let Some(q) = &case.query {
        let out = fresco_query::run(&ctx, q).map_err(|e| anyhow::anyhow!("in-process {q}: {e}"))?;
        let daemon_rows = result["results"].as_array().map_or(0, Vec::len);
        if out.results.len() != daemon_rows {
            bail!("{q}: the daemon returned {daemon_rows} rows, in-process {}", out.results.len());
        }
        let start = Instant::now();
        std::hint::black_box(serde_json::to_vec(&fresco_query::run(&ctx, q).map_err(|e| anyhow::anyhow!("{e}"))?)?);
        one += 2.0 * start.elapsed().as_secs_f64();
    }
    // Interleaved: one request through the socket, one in-process run, one in-process run with
    // JSON, so that all three see the same load from whatever else runs on the machine.
    let reps = reps_for(one, reps);
    let (mut socket, mut a, mut b) = (Vec::with_capacity(reps), Vec::with_capacity(reps), Vec::with_capacity(reps));
    let mut bytes = 0;
    for _ in 0..reps {
        let (secs, n) = conn.round_trip(case.method, &params)?;
        socket.push(secs);
        bytes = n;
        if let Some(q) = &case.query {
            let start = Instant::now();
            let out = fresco_query::run(&ctx, q).map_err(|e| anyhow::anyhow!("{e}"))?;
            a.push(start.elapsed().as_secs_f64());
            std::hint::black_box(&out);
            let start = Instant::now();
            let out = fresco_query::run(&ctx, q).map_err(|e| anyhow::anyhow!("{e}"))?;
            let text = serde_json::to_vec(&out)?;
            b.push(start.elapsed().as_secs_f64());
            std::hint::black_box(&text);
        }
    }
    conn.parse_last()?;
    let (inproc, inproc_json) =
        if case.query.is_some() { (Some(Stat::of(a)), Some(Stat::of(b))) } else { (None, None) };
    Ok(Measured { reps, socket: Stat::of(socket), inproc, inproc_json, bytes, results })
}

pub fn run_query_bench(args: QueryArgs) -> Result<()> {
    let fresco = fresco_binary(args.fresco.as_deref())?;
    let root = args.root.clone();
    let name = root.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default();
    let tmp = tempfile::tempdir()?;
    let db = tmp.path().join("db");
    let runtime = tmp.path().join("run");

    eprintln!("{name}: indexing in-process into {}", db.display());
    let start = Instant::now();
    let indexer = Indexer::open(&root, &db, options(args.threads))?;
    let index_secs = start.elapsed().as_secs_f64();
    let snapshot = indexer.snapshot().clone();
    drop(indexer); // releases the store for the daemon
    let totals = snapshot.totals();

    eprintln!("{name}: starting {} serve", fresco.display());
    let mut daemon = start_daemon(&fresco, &root, &db, &runtime, &tmp.path().join("daemon.log"))?;
    let (mut conn, ready_secs) = wait_ready(&mut daemon, Duration::from_secs(300))?;
    let status = conn.call("status", json!({}))?;
    for (key, want) in [
        ("files", totals.files),
        ("units", totals.units),
        ("edges", totals.edges),
        ("unresolved_calls", totals.unresolved),
    ] {
        if status[key].as_u64() != Some(want as u64) {
            bail!("the daemon's graph differs from the in-process one: {key} = {} vs {want}", status[key]);
        }
    }

    let pid = daemon.child.as_ref().map(Child::id).context("daemon")?;
    let idle_secs = wait_idle(pid, Duration::from_secs(300));
    eprintln!("{name}: the daemon answered after {}, was idle after {} more", ms(ready_secs), ms(idle_secs));
    let p = pick_units(&snapshot)?;
    let q = |s: &str| format!("\"{s}\"");
    let find_glob = "*cache*";
    let cases = vec![
        Case {
            label: "`status` (pure socket round trip + status handler)".into(),
            method: "status",
            query: None,
            freshness: "allow",
            target: Some(0.0002),
        },
        Case {
            label: format!("callers of a typical unit ({} callers)", p.typical_callers),
            method: "query",
            query: Some(format!("callers {}", q(&p.typical_callee))),
            freshness: "allow",
            target: Some(0.001),
        },
        Case {
            label: format!("callers of the most-called unit ({} call edges in)", p.calls_hub_callers),
            method: "query",
            query: Some(format!("callers {}", q(&p.calls_hub))),
            freshness: "allow",
            target: Some(0.001),
        },
        Case {
            label: "callers of a typical unit, freshness **wait**".into(),
            method: "query",
            query: Some(format!("callers {}", q(&p.typical_callee))),
            freshness: "wait",
            target: None,
        },
        Case {
            label: format!("callees depth 2 of the unit with the most calls ({} out)", p.fan_out_callees),
            method: "query",
            query: Some(format!("callees {} depth 2", q(&p.fan_out))),
            freshness: "allow",
            target: None,
        },
        Case {
            label: format!("impact of a hub ({} edges in)", p.impact_hub_in),
            method: "query",
            query: Some(format!("impact {}", q(&p.impact_hub))),
            freshness: "allow",
            target: Some(0.050),
        },
        Case {
            label: format!("path over calls, {} steps apart", p.path_len),
            method: "query",
            query: Some(format!("path {} -> {}", q(&p.path_from), q(&p.path_to))),
            freshness: "allow",
            target: None,
        },
        Case {
            label: "find with a glob".into(),
            method: "query",
            query: Some(format!("find \"{find_glob}\" kind function")),
            freshness: "allow",
            target: None,
        },
        Case {
            label: "cycles imports".into(),
            method: "query",
            query: Some("cycles imports".into()),
            freshness: "allow",
            target: None,
        },
    ];

    let mut measured = Vec::new();
    for case in &cases {
        eprintln!("  {}: {}", case.label, case.query.as_deref().unwrap_or("status"));
        let m = measure(&mut conn, &snapshot, case, args.reps)?;
        eprintln!(
            "    socket median {} p95 {}; in-process {}",
            ms(m.socket.median()),
            ms(percentile(&m.socket, 0.95)),
            m.inproc.as_ref().map_or("–".into(), |s| ms(s.median()))
        );
        measured.push(m);
    }
    // Diagnostic: the lookup `callers`/`impact` of a callable make for their completeness note
    // (the unresolved call sites named like it, through the snapshot's index by last name).
    let simple = p.typical_callee.rsplit('.').next().unwrap_or("").to_string();
    let mut named = 0usize;
    let scan = Stat::of(
        (0..50)
            .map(|_| {
                let start = Instant::now();
                named = std::hint::black_box(snapshot.unresolved_named(&simple).len());
                start.elapsed().as_secs_f64()
            })
            .collect(),
    );
    // Stop the daemon the polite way (then Drop kills it if it did not exit).
    let _ = conn.call("shutdown", json!({}));
    if let Some(child) = daemon.child.as_mut() {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                daemon.child = None;
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    // ----------------------------------------------------------------------------------------
    // Report.
    let mut body = String::new();
    writeln!(body, "## {name}\n\n`{}`\n", root.display())?;
    writeln!(
        body,
        "{} files, {} units, {} edges. Indexed in this process into a temporary store in {} (`Indexer::open`, {} threads); \
         then `{} serve` was started on that store and answered `status` after {} (reopening the store, starting the watcher); measurements began once its CPU time had \
         stopped growing for a second, {} later. \
         The daemon's `status` reported the same numbers of files, units, edges and unresolved call sites as the in-process snapshot.\n",
        totals.files,
        totals.units,
        totals.edges,
        ms(index_secs),
        args.threads,
        fresco.display(),
        ms(ready_secs),
        ms(idle_secs),
    )?;
    writeln!(
        body,
        "Units measured (picked from the graph, library code only, `tests/` excluded):\n\n\
         - typical called unit (the median number of callers among callables with any): `{}` ({} callers)\n\
         - most-called unit: `{}` ({} call edges in)\n\
         - hub for `impact` (most calls, references, inherits and imports edges in): `{}` ({} edges in)\n\
         - unit with the most outgoing calls (for `callees depth 2`, and the start of the path): `{}` ({} calls out)\n\
         - path end: `{}`, {} calls away by BFS\n",
        p.typical_callee,
        p.typical_callers,
        p.calls_hub,
        p.calls_hub_callers,
        p.impact_hub,
        p.impact_hub_in,
        p.fan_out,
        p.fan_out_callees,
        p.path_to,
        p.path_len
    )?;
    writeln!(
        body,
        "| query class | query | result | response | reps | socket median | socket p95 | in-process median | in-process p95 | in-process + JSON median | socket − (in-process + JSON), medians | target (socket median) | verdict |\n\
         |---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"
    )?;
    let mut misses = Vec::new();
    for (case, m) in cases.iter().zip(&measured) {
        let sm = m.socket.median();
        let p95 = percentile(&m.socket, 0.95);
        let overhead = m.inproc_json.as_ref().map(|s| sm - s.median());
        let (target, verdict_s) = match case.target {
            Some(t) => {
                if sm >= t {
                    misses.push(format!("{}: median {} (target < {})", case.label, ms(sm), ms(t)));
                }
                (format!("< {}", ms(t)), verdict(sm < t).to_string())
            }
            None => ("–".into(), "–".into()),
        };
        writeln!(
            body,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} | {} | {} | {} | {target} | {verdict_s} |",
            case.label,
            case.query.as_deref().unwrap_or("status").replace('|', "\\|"),
            m.results,
            super::bytes_h(m.bytes as u64),
            m.reps,
            ms(sm),
            ms(p95),
            m.inproc.as_ref().map_or("–".into(), |s| ms(s.median())),
            m.inproc.as_ref().map_or("–".into(), |s| ms(percentile(s, 0.95))),
            m.inproc_json.as_ref().map_or("–".into(), |s| ms(s.median())),
            overhead.map_or("–".into(), ms),
        )?;
    }
    // Targets over all classes.
    let worst = cases
        .iter()
        .zip(&measured)
        .filter(|(c, _)| c.freshness == "allow")
        .map(|(c, m)| (percentile(&m.socket, 0.95), c.label.clone()))
        .max_by(|a, b| a.0.partial_cmp(&b.0).unwrap())
        .context("no cases")?;
    let status_m = measured[0].socket.median();
    let typical = &measured[1];
    let small_overhead = typical.socket.median() - typical.inproc_json.as_ref().map_or(f64::NAN, |s| s.median());
    let wait = &measured[3];
    let mut summary = String::new();
    writeln!(summary, "## Summary ({name})\n\n| target | measured | verdict |\n|---|---|---|")?;
    writeln!(
        summary,
        "| single-unit `callers`, median end to end < 1 ms | typical unit {}; most-called unit {} | {} |",
        ms(typical.socket.median()),
        ms(measured[2].socket.median()),
        verdict(typical.socket.median() < 0.001 && measured[2].socket.median() < 0.001)
    )?;
    writeln!(
        summary,
        "| `impact` of a hub < 50 ms (median end to end, default limits) | {} (p95 {}; {}) | {} |",
        ms(measured[5].socket.median()),
        ms(percentile(&measured[5].socket, 0.95)),
        measured[5].results,
        verdict(measured[5].socket.median() < 0.050)
    )?;
    writeln!(
        summary,
        "| no query class above 200 ms at default limits (p95 end to end, freshness allow) | worst p95: {} ({}) | {} |",
        ms(worst.0),
        worst.1,
        verdict(worst.0 < 0.200)
    )?;
    writeln!(
        summary,
        "| socket overhead < 0.2 ms per small query | `status` round trip {}; typical `callers`: socket median − in-process (run + JSON) median = {} | {} |",
        ms(status_m),
        ms(small_overhead),
        verdict(status_m < 0.0002 && small_overhead < 0.0002)
    )?;
    writeln!(
        summary,
        "\nThe freshness gate: the same typical `callers` with `\"freshness\": \"wait\"` takes {} median (p95 {}) against {} with `allow`: \
         {} for the gate (a cookie file written into the tree and seen by the watcher, then waiting for the indexer to be idle).\n",
        ms(wait.socket.median()),
        ms(percentile(&wait.socket, 0.95)),
        ms(typical.socket.median()),
        ms(wait.socket.median() - typical.socket.median())
    )?;
    writeln!(
        summary,
        "The completeness note of `callers` (and `impact`) of a callable (\"N unresolved call sites named X might also reach \
         ...\") looks up the unresolved call sites named like it through the snapshot's index by last name (of {} in the \
         repository, {} are named `{}`): {} median in-process (50 runs, measured after the series above, under whatever load \
         the machine had then).\n",
        totals.unresolved,
        named,
        simple,
        ms(scan.median())
    )?;
    if !misses.is_empty() {
        writeln!(summary, "Missed per-class targets: {}.\n", misses.join("; "))?;
    }
    writeln!(
        body,
        "\nColumns: *socket* is the time from writing the request line to having read the whole response line, on one connection, \
         one request at a time (parsing the response in the client is not included); each socket request is followed by the two in-process runs of the same query, interleaved, so that all three series see the same load; *in-process* is `fresco_query::run` over the \
         same snapshot in the bench process (default limits: 2000 results, 10 s), and *in-process + JSON* adds `serde_json::to_vec` \
         of its output, roughly what the daemon does besides the socket. Series that would take longer than {SERIES_BUDGET_SECS:.0} s \
         (all three together) use fewer repetitions (at least 20); each series was preceded by 3 warm-up requests. \
         The daemon and the bench share the 2 cores (and the machine with other work). A negative difference means the \
         daemon answered faster than the in-process run: its snapshot was loaded from the store (compact, freshly \
         decoded records) while the bench's comes from a cold multi-threaded index, and scans over every file (the \
         unresolved-call-site scan, `find`, `cycles`) are sensitive to that memory layout; treat the `status` round trip as \
         the socket overhead.\n"
    )?;
    let line = format!(
        "fresco-bench query --reps {} --threads {}{} {}",
        args.reps,
        args.threads,
        args.fresco.as_ref().map(|f| format!(" --fresco {}", f.display())).unwrap_or_default(),
        root.display()
    );
    emit(args.report.as_deref(), "fresco-bench query", &line, &format!("{summary}\n{body}"))
}
