//! The wire format (newline-delimited JSON) and the request handlers shared by the daemon and
//! the in-process CLI, so both give the same results in the same JSON.
//! docs/protocol.md documents it for clients.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use fresco_graph::{Snapshot, VersionLog};
use serde_json::{Value, json};

/// The largest request line accepted.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;
/// The largest response line sent; larger results fail with RESULT_TOO_LARGE.
pub const MAX_RESPONSE_BYTES: usize = 64 << 20;
/// Default and maximum result limits and query time.
pub const DEFAULT_LIMIT: usize = 2000;
pub const MAX_LIMIT: usize = 100_000;
pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;
pub const MAX_TIMEOUT_MS: u64 = 120_000;
/// How long `wait` waits for the index to catch up before answering STALE.
pub const DEFAULT_WAIT_MS: u64 = 2_000;

/// An error with a stable code (see docs/protocol.md).
#[derive(Debug, Clone)]
pub struct ProtoError {
    pub code: &'static str,
    pub message: String,
    pub data: Value,
}

impl ProtoError {
    pub fn new(code: &'static str, message: impl Into<String>) -> ProtoError {
        ProtoError { code, message: message.into(), data: Value::Null }
    }

    pub fn with(mut self, key: &str, value: Value) -> ProtoError {
        if !self.data.is_object() {
            self.data = json!({});
        }
        self.data[key] = value;
        self
    }

    pub fn to_json(&self) -> Value {
        let mut err = json!({"code": self.code, "message": self.message});
        if let Value::Object(map) = &self.data {
            for (k, v) in map {
                err[k] = v.clone();
            }
        }
        err
    }

    pub fn stale(files: Vec<String>) -> ProtoError {
        let shown: Vec<&String> = files.iter().take(20).collect();
        let more = files.len().saturating_sub(shown.len());
        let list = shown.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
        ProtoError::new(
            "STALE",
            format!(
                "the index has not caught up with {} changed file(s): {list}{}",
                files.len(),
                if more > 0 { format!(" and {more} more") } else { String::new() }
            ),
        )
        .with("files", json!(files))
    }
}

pub fn response_ok(id: &Value, result: Value) -> Value {
    json!({"id": id, "result": result})
}

pub fn response_err(id: &Value, err: &ProtoError) -> Value {
    json!({"id": id, "error": err.to_json()})
}

/// How fresh an answer must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Freshness {
    Wait,
    Strict,
    Allow,
}

impl Freshness {
    pub fn parse(text: &str) -> Option<Freshness> {
        match text {
            "wait" => Some(Freshness::Wait),
            "strict" => Some(Freshness::Strict),
            "allow" => Some(Freshness::Allow),
            _ => None,
        }
    }
}

/// The parameters each method takes. A misspelt one (`timeout` for `timeout_ms`) is an error,
/// not a silent default.
pub fn check_params(method: &str, params: &Value) -> Result<(), ProtoError> {
    let known: &[&str] = match method {
        "query" => &["query", "freshness", "limit", "timeout_ms", "wait_ms"],
        "export" => &["out", "freshness", "wait_ms"],
        "cancel" => &["id"],
        "status" | "shutdown" => &[],
        _ => return Ok(()),
    };
    // `cancel` names the query it cancels: without one it would answer "not cancelled" to a
    // request that cannot have meant anything.
    if method == "cancel" && params.get("id").is_none_or(Value::is_null) {
        return Err(ProtoError::new("INVALID_REQUEST", "cancel needs params.id, the id of the query to cancel"));
    }
    if params.is_null() {
        return Ok(());
    }
    let Some(object) = params.as_object() else {
        return Err(ProtoError::new("INVALID_REQUEST", "params must be an object"));
    };
    match object.keys().find(|key| !known.contains(&key.as_str())) {
        None => Ok(()),
        Some(key) => {
            let takes = if known.is_empty() { "no parameters".to_string() } else { known.join(", ") };
            let key: String = key.chars().take(60).collect();
            Err(ProtoError::new("INVALID_REQUEST", format!("unknown parameter '{key}': {method} takes {takes}")))
        }
    }
}

/// The freshness a request asks for: `wait` when absent.
pub fn freshness_param(params: &Value) -> Result<Freshness, ProtoError> {
    match params.get("freshness") {
        None | Some(Value::Null) => Ok(Freshness::Wait),
        Some(Value::String(s)) => Freshness::parse(s)
            .ok_or_else(|| ProtoError::new("INVALID_REQUEST", "params.freshness must be wait, strict or allow")),
        Some(_) => Err(ProtoError::new("INVALID_REQUEST", "params.freshness must be a string")),
    }
}

/// The parameters of a `query` request, validated.
pub struct QueryParams {
    pub text: String,
    pub freshness: Freshness,
    pub limits: fresco_query::Limits,
    pub wait: Duration,
    /// When the query's time limit began counting, if before it runs (see
    /// `fresco_query::Context::started`).
    pub started: Option<std::time::Instant>,
}

pub fn query_params(params: &Value) -> Result<QueryParams, ProtoError> {
    let text = params
        .get("query")
        .and_then(Value::as_str)
        .ok_or_else(|| ProtoError::new("INVALID_REQUEST", "params.query (a string) is required"))?
        .to_string();
    let freshness = freshness_param(params)?;
    let number = |key: &str, default: u64, max: u64| -> Result<u64, ProtoError> {
        match params.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 && n <= max => Ok(n),
                _ => {
                    Err(ProtoError::new("INVALID_REQUEST", format!("params.{key} must be an integer from 1 to {max}")))
                }
            },
        }
    };
    let limit = number("limit", DEFAULT_LIMIT as u64, MAX_LIMIT as u64)? as usize;
    let timeout = number("timeout_ms", DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS)?;
    let wait = number("wait_ms", DEFAULT_WAIT_MS, MAX_TIMEOUT_MS)?;
    Ok(QueryParams {
        text,
        freshness,
        limits: fresco_query::Limits { max_results: limit, timeout: Duration::from_millis(timeout) },
        wait: Duration::from_millis(wait),
        started: None,
    })
}

/// `params.wait_ms` of an `export`: how long the freshness gate may wait, as for a query.
pub fn export_wait(params: &Value) -> Result<Duration, ProtoError> {
    match params.get("wait_ms") {
        None | Some(Value::Null) => Ok(Duration::from_millis(DEFAULT_WAIT_MS)),
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_TIMEOUT_MS).contains(&n) => Ok(Duration::from_millis(n)),
            _ => Err(ProtoError::new(
                "INVALID_REQUEST",
                format!("params.wait_ms must be an integer from 1 to {MAX_TIMEOUT_MS}"),
            )),
        },
    }
}

pub fn query_error(err: &fresco_query::QueryError) -> ProtoError {
    let mut e = ProtoError::new(err.code(), err.to_string());
    if let Some(p) = err.place() {
        e = e.with("position", json!(p.position)).with("line", json!(p.line)).with("column", json!(p.column));
    }
    match err {
        fresco_query::QueryError::UnknownSymbol { suggestions, .. } => {
            e = e.with("suggestions", json!(suggestions));
        }
        fresco_query::QueryError::NotIndexed { file, reason, .. } => {
            e = e.with("file", json!(file)).with("not_indexed", json!(reason));
        }
        _ => {}
    }
    e
}

/// What a query reads: one snapshot, the history of versions before it, and the root its
/// paths are relative to.
#[derive(Clone, Copy)]
pub struct IndexView<'a> {
    pub snapshot: &'a Snapshot,
    pub history: Option<&'a VersionLog>,
    pub root: &'a std::path::Path,
}

/// Runs a query over one snapshot. `is_stale` (freshness `allow` only: `None` otherwise, so that
/// no other query pays for the checks) tells which files changed on disk after the snapshot, to
/// mark the items standing on them; `stale` lists those files for the response.
pub fn run_query(
    index: IndexView<'_>,
    params: &QueryParams,
    cancel: Option<Arc<AtomicBool>>,
    lanes: Option<&dyn fresco_query::Lanes>,
    is_stale: Option<&dyn Fn(&str) -> bool>,
    anything_stale: Option<&dyn Fn() -> bool>,
    stale: &[String],
) -> Result<(fresco_query::Output, Value), ProtoError> {
    let IndexView { snapshot, history, root } = index;
    // Which files were resolved against a module whose file changed (memoised per file: a
    // traversal asks once per edge).
    let stale_modules = if is_stale.is_some() { stale_module_names(snapshot, stale) } else { HashSet::new() };
    let consulted_stale: std::cell::RefCell<HashMap<String, bool>> = Default::default();
    let resolution_is_stale = |file: &str| -> bool {
        if let Some(&known) = consulted_stale.borrow().get(file) {
            return known;
        }
        let consulted = snapshot.file(file).is_some_and(|entry| {
            entry.deps.modules.iter().any(|key| stale_modules.contains(key.split('\u{1}').next().unwrap_or(key)))
        });
        consulted_stale.borrow_mut().insert(file.to_string(), consulted);
        consulted
    };
    let ctx = fresco_query::Context {
        snapshot,
        limits: params.limits.clone(),
        cancel,
        history,
        lanes,
        is_stale,
        anything_stale,
        // Only the files stale at the gate count here (`stale_modules`): none, nothing to ask.
        resolution_is_stale: is_stale
            .filter(|_| !stale_modules.is_empty())
            .map(|_| &resolution_is_stale as &dyn Fn(&str) -> bool),
        root: Some(root),
        canonicalize: Some(&canonical_path),
        started: params.started,
    };
    let started = std::time::Instant::now();
    let mut output = fresco_query::run(&ctx, &params.text).map_err(|e| query_error(&e))?;
    if output.lanes.is_some() {
        trace_retrieval(&params.text, &output, started.elapsed());
    }
    if let (Some(context), Some(is_stale)) = (&mut output.context, is_stale) {
        for unit in &mut context.units {
            unit.stale = is_stale(&unit.file);
        }
    }
    let value = crate::render::to_json(&output, stale);
    Ok((output, value))
}

/// How the file system names `path`; for a file not written yet (`context for ... in FILE`),
/// through its directory.
fn canonical_path(path: &Path) -> Option<std::path::PathBuf> {
    std::fs::canonicalize(path).ok().or_else(|| {
        let real = std::fs::canonicalize(path.parent()?).ok()?;
        Some(real.join(path.file_name()?))
    })
}

/// The error the query's `context` targets would give when it runs (a file or name that does
/// not resolve), found without running it: see [`fresco_query::check_context_targets`].
pub fn check_context_targets(index: IndexView<'_>, params: &QueryParams) -> Result<(), ProtoError> {
    let mut ctx = fresco_query::Context::new(index.snapshot);
    ctx.root = Some(index.root);
    ctx.canonicalize = Some(&canonical_path);
    fresco_query::check_context_targets(&ctx, &params.text).map_err(|e| query_error(&e))
}

/// The module names a changed file stands for: the one the snapshot gives it, and the ones its
/// path would give a new file (with and without a leading `src.`), as lookups record them.
fn stale_module_names(snapshot: &Snapshot, stale_files: &[String]) -> HashSet<String> {
    let mut out = HashSet::new();
    let by_path = |path: &str, out: &mut HashSet<String>| {
        let dotted = path.trim_end_matches('/').trim_end_matches(".py").trim_end_matches("/__init__").replace('/', ".");
        out.insert(dotted.trim_start_matches("src.").to_string());
        out.insert(dotted);
    };
    for path in stale_files {
        if path.ends_with('/') {
            // A directory created, removed or renamed: every module under it, and the package.
            for entry in snapshot.files().filter(|f| f.graph.path.starts_with(path.as_str())) {
                out.insert(entry.graph.module.clone());
            }
            by_path(path, &mut out);
        } else if path.ends_with(".py") {
            if let Some(entry) = snapshot.file(path) {
                out.insert(entry.graph.module.clone());
            }
            by_path(path, &mut out);
        }
    }
    out
}

fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// The `status` result.
pub struct StatusInfo<'a> {
    pub root: &'a Path,
    pub snapshot: &'a Snapshot,
    pub daemon: bool,
    pub pending: Vec<String>,
    pub uptime: Option<Duration>,
    pub watcher: Option<(u64, u64)>,
    pub last_error: Option<String>,
    /// Why nothing of this index is stored, when nothing is: a daemon that could not write the
    /// index when it started, or a command that indexed the files in memory.
    pub not_stored: Option<String>,
    /// The index directory answered from (a daemon's: clients given `--db` compare it with
    /// theirs when the daemon could not record its socket there).
    pub db: Option<&'a Path>,
    /// Lane health (see `lanes.rs`); `None` when no lanes are loaded.
    pub lanes: Option<Value>,
    /// What the walk met and could not index (a name that is not UTF-8, a FIFO named `x.py`, a
    /// link to a directory): skipped too, though no file of the graph stands for it.
    pub walk_issues: &'a [fresco_indexer::WalkIssue],
    /// The version history, for `history_since`; `None` for an index built in memory.
    pub history: Option<&'a VersionLog>,
    /// What opening the stored index redid to catch up with the files (a daemon's at its start),
    /// with how many files it reused as stored then: whether a restart reused the stored index.
    /// `None` when nothing was stored to reuse.
    pub caught_up: Option<(fresco_indexer::CatchUp, usize)>,
}

/// A path as text, its bytes that are not UTF-8 written `\xNN` (`caf\xe9.py`): a name that
/// is not UTF-8 is shown so that the file can be found (`$'caf\xe9.py'` in a shell), not with
/// a replacement character standing for any byte.
fn escaped_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let mut out = String::new();
    for chunk in path.as_os_str().as_bytes().utf8_chunks() {
        out.push_str(chunk.valid());
        for byte in chunk.invalid() {
            out.push_str(&format!("\\x{byte:02x}"));
        }
    }
    out
}

/// Every skipped file with its reason: those the graph records (binary, not UTF-8, too large,
/// unreadable, a symbolic link) and those the walk could not even name as graph files.
pub fn skipped_files(
    root: &Path,
    snapshot: &Snapshot,
    walk_issues: &[fresco_indexer::WalkIssue],
) -> Vec<(String, String)> {
    // The snapshot counts them: the walk over every file stops at the last one (at once when
    // there is none, the usual case; `status` is polled).
    let recorded = snapshot
        .files()
        .filter_map(|f| f.graph.skipped.as_ref().map(|r| (f.graph.path.clone(), r.to_string())))
        .take(snapshot.totals().skipped_files);
    let walked = walk_issues.iter().map(|issue| {
        let shown = match issue.on_disk.strip_prefix(root) {
            Ok(relative) => escaped_path(relative),
            Err(_) => issue.path.clone(),
        };
        (shown, issue.message.clone())
    });
    recorded.chain(walked).collect()
}

/// Files `status` lists by name under each count (it is polled: the counts are exact, the lists
/// bounded).
const STATUS_LISTED: usize = 50;

pub fn status(info: StatusInfo) -> Value {
    let t = info.snapshot.totals();
    let skipped = skipped_files(info.root, info.snapshot, info.walk_issues);
    json!({
        "daemon": info.daemon,
        // The daemon's; an in-process answer has no daemon to name.
        "pid": info.daemon.then(std::process::id),
        "root": info.root.display().to_string(),
        "version": info.snapshot.version(),
        "files": t.files,
        "units": t.units,
        "edges": t.edges,
        "unresolved_calls": t.unresolved,
        "parse_error_files": t.parse_error_files,
        "parse_errors": info
            .snapshot
            .files()
            .filter(|f| f.graph.parse_errors > 0)
            .take(STATUS_LISTED.min(t.parse_error_files))
            .map(|f| parse_error_json(&f.graph))
            .collect::<Vec<_>>(),
        "skipped_files": skipped.len(),
        "resolution_cut_files": t.resolution_cut_files,
        "resolution_cut": info
            .snapshot
            .files()
            .filter(|f| f.graph.resolution_cut)
            .take(STATUS_LISTED.min(t.resolution_cut_files))
            .map(|f| f.graph.path.as_str())
            .collect::<Vec<_>>(),
        // Which, and why (binary, not UTF-8, too large, unreadable, a symbolic link, a name
        // that is not UTF-8): a file that turns to non-UTF-8 under the daemon takes its edges
        // with it, visibly.
        "skipped": skipped
            .iter()
            .take(STATUS_LISTED)
            .map(|(file, reason)| json!({"file": file, "reason": reason}))
            .collect::<Vec<_>>(),
        "pending_changes": info.pending.len(),
        "pending": info.pending.iter().take(STATUS_LISTED).collect::<Vec<_>>(),
        "memory_bytes": rss_bytes(),
        "uptime_s": info.uptime.map(|u| u.as_secs_f64()),
        "watcher": info.watcher.map(|(events, rescans)| json!({"events": events, "rescans": rescans})),
        "lanes": info.lanes.unwrap_or_else(|| json!({"graph": {"status": "ready", "version": info.snapshot.version()}, "bm25": {"status": "not loaded", "reason": "lanes are built by the daemon or by a search/context query"}, "dense": {"status": "not loaded", "reason": "lanes are built by the daemon or by a search/context query"}})),
        "last_error": info.last_error,
        "not_stored": info.not_stored,
        "db": info.db.map(|db| db.display().to_string()),
        // `changes since V` answers for the versions published from this one to `version`.
        "history_since": info.history.map(|h| h.oldest()),
        "caught_up": info.caught_up.map(|(c, reused)| caught_up_json(c, reused)),
    })
}

/// What catching up with the files redid, as `status` and `index --json` give it.
pub fn caught_up_json(c: fresco_indexer::CatchUp, reused: usize) -> Value {
    json!({
        "changed_files": c.changed_files,
        "removed_files": c.removed_files,
        "resolved_files": c.resolved_files,
        "reused_files": reused,
    })
}

/// Lane health as JSON, keyed by lane.
pub fn lanes_json(health: &[fresco_indexer::lanes::LaneHealth]) -> Value {
    let mut out = json!({});
    for h in health {
        let mut v = json!({"status": h.status});
        if let Some(version) = h.version {
            v["version"] = json!(version);
        }
        if let Some(lag) = h.lag {
            v["lag"] = json!(lag);
        }
        if let Some(reason) = &h.reason {
            v["reason"] = json!(reason);
        }
        if let Some((done, total)) = h.progress {
            v["progress"] = json!({"done": done, "total": total});
        }
        if let Some(missing) = h.missing {
            v["missing"] = json!(missing);
        }
        if let Some(embedded) = h.embedded {
            v["embedded"] = json!(embedded);
        }
        out[h.lane] = v;
    }
    out
}

/// Where the opt-in retrieval trace goes (`FRESCO_RETRIEVAL_TRACE=FILE` or `serve
/// --retrieval-trace FILE`): one JSON line per `search`/`context` query, so that a failure can be
/// attributed to a stage (not in the index, not retrieved by a lane, ranked too low, cut by the
/// budget).
static RETRIEVAL_TRACE: std::sync::OnceLock<Option<std::sync::Mutex<std::fs::File>>> = std::sync::OnceLock::new();

pub fn set_retrieval_trace(path: Option<&Path>) -> std::io::Result<()> {
    let env = std::env::var_os("FRESCO_RETRIEVAL_TRACE").filter(|p| !p.is_empty()).map(std::path::PathBuf::from);
    let file = match path.map(Path::to_path_buf).or(env) {
        Some(p) => Some(std::sync::Mutex::new(std::fs::OpenOptions::new().create(true).append(true).open(p)?)),
        None => None,
    };
    let _ = RETRIEVAL_TRACE.set(file);
    Ok(())
}

fn trace_retrieval(query: &str, output: &fresco_query::Output, elapsed: Duration) {
    let trace = RETRIEVAL_TRACE.get_or_init(|| {
        // Empty is unset, as for the other FRESCO_ variables.
        let path = std::env::var_os("FRESCO_RETRIEVAL_TRACE").filter(|p| !p.is_empty())?;
        match std::fs::OpenOptions::new().create(true).append(true).open(&path) {
            Ok(file) => Some(std::sync::Mutex::new(file)),
            // Asked for and not written: said once, not a silent absence.
            Err(e) => {
                eprintln!(
                    "fresco: warning: cannot open the retrieval trace file {} (FRESCO_RETRIEVAL_TRACE): {e}; no trace \
                     is written",
                    crate::render::printable(&path.to_string_lossy())
                );
                None
            }
        }
    });
    let Some(file) = trace else { return };
    let lanes: serde_json::Map<String, Value> = output
        .lane_hits
        .iter()
        .map(|(lane, ids)| {
            let ranked: Vec<Value> = ids.iter().enumerate().map(|(i, id)| json!({"rank": i + 1, "name": id})).collect();
            (lane.to_string(), json!(ranked))
        })
        .collect();
    let line = json!({
        "query": query,
        "version": output.version,
        "lanes": output.lanes,
        "lane_results": lanes,
        "fused": output.results.iter().map(|r| json!({"name": r.name, "score": r.score, "lanes": r.lanes, "role": r.role})).collect::<Vec<_>>(),
        "context": output.context.as_ref().map(|c| json!({
            "target": c.target,
            "units": c.units.iter().map(|u| json!({"name": u.name, "role": u.role, "tokens": u.tokens})).collect::<Vec<_>>(),
            "cut": c.cut,
            "tokens": c.tokens,
            "budget": c.budget,
            "token_rule": c.token_rule,
        })),
        "ms": elapsed.as_secs_f64() * 1000.0,
    });
    if let Ok(mut f) = file.lock() {
        use std::io::Write;
        let _ = writeln!(f, "{line}");
    }
}

/// A file with parse errors, for `status` and `index --json`: how many, and where the first is
/// (`"first": {"line": 12, "column": 5, "message": "missing \")\""}`).
pub fn parse_error_json(graph: &fresco_graph::FileGraph) -> Value {
    let first =
        graph.first_parse_error.as_ref().map(|e| json!({"line": e.line, "column": e.column, "message": e.message}));
    json!({"file": graph.path, "parse_errors": graph.parse_errors, "first": first})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_score_read_back_from_json_is_the_number_sent() {
        // Reciprocal-rank scores as `context` gives them: the client re-reads the daemon's JSON,
        // and its answer must equal the in-process one to the last digit.
        for rank in 1..2000u32 {
            for score in [1.0 / f64::from(60 + rank), 1.0 / f64::from(60 + rank) + 1.0 / f64::from(61 + rank * 3)] {
                let text = serde_json::to_string(&json!({ "score": score })).expect("serialise");
                let back: Value = serde_json::from_str(&text).expect("parse");
                assert_eq!(back["score"].as_f64(), Some(score), "{text}");
            }
        }
    }

    #[test]
    fn an_export_takes_a_wait_like_a_query() {
        assert!(check_params("export", &json!({"out": "/tmp/x", "wait_ms": 60000})).is_ok());
        assert_eq!(export_wait(&json!({"out": "/x"})).ok(), Some(Duration::from_millis(DEFAULT_WAIT_MS)));
        assert_eq!(export_wait(&json!({"wait_ms": 60000})).ok(), Some(Duration::from_millis(60000)));
        for bad in [json!(0), json!(MAX_TIMEOUT_MS + 1), json!("soon")] {
            let err = export_wait(&json!({ "wait_ms": bad })).err().map(|e| e.code);
            assert_eq!(err, Some("INVALID_REQUEST"), "{bad}");
        }
    }
}
