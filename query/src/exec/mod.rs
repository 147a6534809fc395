//! The executor: runs a parsed [`Query`] over exactly one [`Snapshot`].
//!
//! Every stage maps a list of rows to a list of rows; rows name units (or external targets) and
//! carry step-specific fields (depth, the edge they were reached by, the call-site line). Every
//! query is bounded: a result limit, a time limit and a cancellation flag are checked as it runs,
//! and hitting a limit marks the output `truncated` rather than failing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::FxHashSet;

use crate::ast::*;
use crate::glob;
use crate::parse::{ParseError, Place, parse};

pub(crate) mod names;
mod walks;

pub(crate) use names::definitions_of_name;
pub use names::{definitions_of, resolve_symbol};
pub(crate) use names::{find_file, one_name, relative_path};
use names::{relative_paths, skipped_module_file};
use walks::{
    completeness_notes, completeness_notes_of_several, cycles, shortest_paths, taint_groups, traverse, unresolved,
};

#[derive(Clone, Debug)]
pub struct Limits {
    /// The most rows any stage may produce.
    pub max_results: usize,
    pub timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { max_results: 2000, timeout: Duration::from_secs(10) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("{0}")]
    Parse(#[from] ParseError),
    /// `at`: where the query names it, when known (see [`QueryError::placed`]).
    #[error("no unit named '{}'{}", shortened(.name), suggestion_text(.suggestions))]
    UnknownSymbol { name: String, suggestions: Vec<String>, at: Option<Place> },
    /// The name would be in a file that was not indexed (too large, not UTF-8, unreadable).
    #[error("no unit named '{}': it would be in {file}, which is not indexed ({reason})", shortened(.name))]
    NotIndexed { name: String, file: String, reason: String, at: Option<Place> },
    #[error("{0}")]
    Invalid(String),
    /// A file or line the query names that is not there, or not one file (`in FILE`,
    /// `file.py:LINE`). `written`: the file (and `:LINE`) as the query gave it, or as made
    /// relative to the root; `at`: where the query names it, when known.
    #[error("{message}")]
    InvalidPlace { written: String, message: String, at: Option<Place> },
    /// An invalid query about what the query writes at byte `offset` (`until 99` past the
    /// answer's version); `at`: that place, once known.
    #[error("{message}")]
    InvalidAt { message: String, offset: usize, at: Option<Place> },
    #[error("the query was cancelled")]
    Cancelled,
    #[error("{0}")]
    HistoryExpired(fresco_graph::HistoryExpired),
}

impl QueryError {
    /// A stable machine-readable code for the error.
    pub fn code(&self) -> &'static str {
        match self {
            QueryError::Parse(_) => "PARSE_ERROR",
            QueryError::UnknownSymbol { .. } | QueryError::NotIndexed { .. } => "UNKNOWN_SYMBOL",
            QueryError::Invalid(_) | QueryError::InvalidPlace { .. } | QueryError::InvalidAt { .. } => "INVALID_QUERY",
            QueryError::Cancelled => "CANCELLED",
            QueryError::HistoryExpired(_) => "HISTORY_EXPIRED",
        }
    }
}

impl QueryError {
    /// The error with the place of the unknown name it reports, when the query names it (the
    /// first symbol written so), so that a client can point at it as at a parse error.
    fn placed(self, text: &str, symbols: &[(String, usize)]) -> QueryError {
        let place = |name: &str| symbols.iter().find(|(s, _)| s == name).map(|&(_, at)| Place::of(text, at));
        match self {
            QueryError::UnknownSymbol { name, suggestions, at: None } => {
                let at = place(&name);
                QueryError::UnknownSymbol { name, suggestions, at }
            }
            QueryError::NotIndexed { name, file, reason, at: None } => {
                let at = place(&name);
                QueryError::NotIndexed { name, file, reason, at }
            }
            QueryError::InvalidPlace { written, message, at: None } => {
                // The file and line as written (`/abs/pkg/a.py:3` made `pkg/a.py:3`, `a.py:03`
                // read as line 3; `pkg/a.py` alone of `pkg/a.py:3`), placed only when one name
                // of the query is it.
                let (file, line) = file_and_line(&written);
                let mut named = symbols.iter().filter(|(s, _)| {
                    let (s_file, s_line) = file_and_line(s);
                    (s_file == file || s_file.ends_with(&format!("/{file}"))) && (line.is_none() || s_line == line)
                });
                let at = match (named.next(), named.next()) {
                    (Some(&(_, at)), None) => Some(Place::of(text, at)),
                    _ => None,
                };
                QueryError::InvalidPlace { written, message, at }
            }
            QueryError::InvalidAt { message, offset, at: None } => {
                QueryError::InvalidAt { message, offset, at: Some(Place::of(text, offset)) }
            }
            other => other,
        }
    }

    /// This error, when it is an invalid query, as one about the file (and line) `written`.
    pub(crate) fn about_place(self, written: &str) -> QueryError {
        match self {
            QueryError::Invalid(message) => {
                QueryError::InvalidPlace { written: written.to_string(), message, at: None }
            }
            other => other,
        }
    }

    /// Where in the query the error is, for a parse error, an unknown name the query wrote, or
    /// a file or line it names that is not there.
    pub fn place(&self) -> Option<Place> {
        match self {
            QueryError::Parse(p) => Some(Place { position: p.position, line: p.line, column: p.column }),
            QueryError::UnknownSymbol { at, .. }
            | QueryError::NotIndexed { at, .. }
            | QueryError::InvalidPlace { at, .. }
            | QueryError::InvalidAt { at, .. } => *at,
            _ => None,
        }
    }
}

/// `file.py:LINE` as its file and line (`None` without a line, or a line that is no number).
fn file_and_line(text: &str) -> (&str, Option<u32>) {
    match text.rsplit_once(':') {
        Some((file, line)) if !line.is_empty() && line.bytes().all(|b| b.is_ascii_digit()) => (file, line.parse().ok()),
        _ => (text, None),
    }
}

/// A name as an error message shows it: a name pasted by mistake (a whole file, say) is cut, and
/// characters that show nothing are escapes (see [`visible`]).
fn shortened(name: &str) -> String {
    const SHOWN: usize = 200;
    match name.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}… ({} characters)", visible(&name[..end]), name.chars().count()),
        None => visible(name),
    }
}

/// `text` with the characters that show nothing written as escapes: controls (`\r`) and
/// zero-width, bidirectional and other invisible marks (`\u{200b}`), so that a name and the
/// suggestion it differs from never look alike.
fn visible(text: &str) -> String {
    let shows_nothing = |c: char| {
        c.is_control()
            || matches!(c, '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}')
            || matches!(c, '\u{2066}'..='\u{2069}' | '\u{FEFF}')
    };
    if !text.chars().any(shows_nothing) {
        return text.to_string();
    }
    text.chars()
        .map(|c| match c {
            c if c.is_control() => c.escape_default().to_string(),
            c if shows_nothing(c) => c.escape_unicode().to_string(),
            c => c.to_string(),
        })
        .collect()
}

fn suggestion_text(s: &[String]) -> String {
    if s.is_empty() {
        String::new()
    } else {
        format!("; did you mean: {}?", s.iter().map(|s| visible(s)).collect::<Vec<_>>().join(", "))
    }
}

/// One result row.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct Item {
    pub name: String,
    pub kind: &'static str,
    pub file: Option<String>,
    pub start_line: Option<u32>,
    pub end_line: Option<u32>,
    pub revision: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub depth: Option<u32>,
    /// The edge kind this row was reached by.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<&'static str>,
    /// The unit it was reached from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// For traversal rows, which way the edge `via` points: `out` (`from` -> this row, as for
    /// `callees`) or `in` (this row -> `from`, as for `callers`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub direction: Option<&'static str>,
    /// The call-site (or reference, import) line of that edge, in the file of the source unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// For traversal rows: the further lines where the same two units are joined by an edge the
    /// traversal follows (calls, references, imports), in order; `line` is the site of the edge
    /// `via` names: a row per pair of units, every site listed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub also_at: Vec<u32>,
    /// For path and cycle results: which path or cycle the row belongs to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<usize>,
    /// For unresolved call sites: the callee as written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callee: Option<String>,
    /// For `show` and `changes`: the unit's source or what happened to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change: Option<&'static str>,
    /// Retrieval: the fused score and the rank of the unit in each lane that found it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<std::collections::BTreeMap<&'static str, usize>>,
    /// Context: `dependency` or `example`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<&'static str>,
    /// Set by the daemon when the item's file changed on disk after the snapshot was taken.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
    /// The parse errors of the item's file, when it has any: the unit was read from a file that
    /// does not parse as written (as far as it parses, or from its repaired text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parse_errors: Option<u32>,
    /// The item's file had its name resolution cut at the step budget: some of its calls and
    /// references may be missing (kept as unresolved).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub resolution_cut: bool,
    /// For a module whose file was not indexed (too large, not UTF-8, unreadable): why. Edges
    /// of other files still name it; it has no units.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Output {
    pub version: u64,
    pub results: Vec<Item>,
    pub truncated: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// Caveats: where "none" may mean "unknown" (unresolved call sites that could reach a unit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Retrieval: the health of every lane asked (never silently absent).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lanes: Option<std::collections::BTreeMap<&'static str, crate::retrieve::LaneReport>>,
    /// `context`: the assembled context.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<crate::retrieve::ContextBlock>,
    /// Retrieval: every lane's own ranked answer before fusion (for the retrieval trace).
    #[serde(skip)]
    pub lane_hits: Vec<(&'static str, Vec<String>)>,
}

#[derive(Clone, Debug, Default)]
struct Row {
    id: String,
    depth: Option<u32>,
    via: Option<EdgeKind>,
    from: Option<String>,
    direction: Option<&'static str>,
    line: Option<u32>,
    also_at: Vec<u32>,
    group: Option<usize>,
    callee: Option<String>,
    source: Option<String>,
    change: Option<&'static str>,
    score: Option<f64>,
    ranks: Option<std::collections::BTreeMap<&'static str, usize>>,
    role: Option<&'static str>,
    /// The row stands on evidence from a file that changed after the snapshot: the edge that
    /// reached it, or one before it on its chain (through earlier steps too), or its path or
    /// cycle.
    stale_evidence: bool,
    /// Where a unit that `changes since` reports removed was: no snapshot has it any more.
    gone: Option<fresco_graph::UnitPlace>,
}

impl Row {
    fn unit(id: impl Into<String>) -> Row {
        Row { id: id.into(), ..Row::default() }
    }
}

pub struct Context<'a> {
    pub snapshot: &'a Snapshot,
    pub limits: Limits,
    pub cancel: Option<Arc<AtomicBool>>,
    /// The index's version history, for `changes since V` (absent for an index built in memory,
    /// whose version numbers are its own).
    pub history: Option<&'a fresco_graph::VersionLog>,
    /// The lexical and dense retrieval lanes, when loaded.
    pub lanes: Option<&'a dyn crate::retrieve::Lanes>,
    /// Whether a file (relative path) changed on disk after the snapshot (the daemon's
    /// freshness `allow`): `context` marks such files in the text it assembles, and rows
    /// standing on such a file are marked `stale` (see [`Exec::edge_is_stale`]).
    pub is_stale: Option<&'a dyn Fn(&str) -> bool>,
    /// Whether `is_stale` may hold for any file at all right now: `false` lets the executor skip
    /// finding the files of an edge's ends (three unit lookups per edge: 10 of the 15 ms of
    /// `callers` of django's most-called method, 1,538 rows, when nothing was pending). `None`:
    /// it may.
    pub anything_stale: Option<&'a dyn Fn() -> bool>,
    /// Whether a file's resolution consulted a module whose file changed on disk after the
    /// snapshot: the edges leaving its units may change once that file is indexed.
    pub resolution_is_stale: Option<&'a dyn Fn(&str) -> bool>,
    /// The repository's root, as the index names it: a query may then name a file by its
    /// absolute path (what an editor has), which is made relative to it.
    pub root: Option<&'a std::path::Path>,
    /// How the file system names a path (through symbolic links), for an absolute path that is
    /// not under `root` as written; the executor itself reads no file.
    pub canonicalize: Option<&'a dyn Fn(&std::path::Path) -> Option<std::path::PathBuf>>,
    /// When the query's time began, if before it runs (a command that waited for embeddings
    /// first): `limits.timeout` counts from then. `None`: from when it runs.
    pub started: Option<Instant>,
}

impl<'a> Context<'a> {
    pub fn new(snapshot: &'a Snapshot) -> Context<'a> {
        Context {
            snapshot,
            limits: Limits::default(),
            cancel: None,
            history: None,
            lanes: None,
            is_stale: None,
            anything_stale: None,
            resolution_is_stale: None,
            root: None,
            canonicalize: None,
            started: None,
        }
    }
}

pub fn run(ctx: &Context, text: &str) -> Result<Output, QueryError> {
    let query = parse(text)?;
    execute(ctx, &query).map_err(|e| e.placed(text, &query.symbols))
}

struct Exec<'c, 'a> {
    ctx: &'c Context<'a>,
    started: Instant,
    truncated: bool,
    notes: Vec<String>,
    ticks: u64,
    lanes: Option<std::collections::BTreeMap<&'static str, crate::retrieve::LaneReport>>,
    context: Option<crate::retrieve::ContextBlock>,
    lane_hits: Vec<(&'static str, Vec<String>)>,
    /// Rows the running step may produce: the result limit for the last step, [`COUNT_CAP`] for
    /// a step whose rows go to another step (a `where` or an `order by` must see the whole set,
    /// not the first rows of it) or are only counted (never sent, so the result limit, which
    /// bounds answers, does not apply).
    row_cap: usize,
    /// Whether the query ends in `count`: its rows are never sent.
    counting: bool,
}

/// Candidates `search` takes from each text lane before fusing them (`k` when larger): as
/// many as `context` takes by default.
const SEARCH_LANE_DEPTH: usize = 50;

/// Rows a step whose rows go to another step (or are only counted) may produce: about 400 bytes
/// each as measured, so 100 MB at most; the time limit bounds its work. django has 62 k units
/// and 340 k edges.
const COUNT_CAP: usize = 250_000;

/// How many conditions a `where` step tests whatever the time limit (four per row of the
/// largest input, COUNT_CAP); past that, the limit stops it (see `Stage::Where`).
const WHERE_WORK_PAST_LIMIT: usize = 4 * COUNT_CAP;

impl Exec<'_, '_> {
    fn snapshot(&self) -> &Snapshot {
        self.ctx.snapshot
    }

    /// Checks the time limit and cancellation; `Ok(false)` means stop (time is up).
    fn tick(&mut self) -> Result<bool, QueryError> {
        self.ticks += 1;
        if !self.ticks.is_multiple_of(256) {
            return Ok(true);
        }
        if self.ctx.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(QueryError::Cancelled);
        }
        Ok(!self.time_is_up())
    }

    /// [`Exec::tick`] for `n` units of work at once: the limits are checked whenever the count
    /// passes a multiple of 256.
    fn tick_many(&mut self, n: usize) -> Result<bool, QueryError> {
        let before = self.ticks;
        self.ticks = self.ticks.saturating_add(n as u64);
        if before / 256 == self.ticks / 256 {
            return Ok(true);
        }
        if self.ctx.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(QueryError::Cancelled);
        }
        Ok(!self.time_is_up())
    }

    /// Whether the query's time limit has passed; if so the answer is marked truncated, with a
    /// note saying so.
    fn time_is_up(&mut self) -> bool {
        if self.started.elapsed() <= self.ctx.limits.timeout {
            return false;
        }
        self.truncated = true;
        if !self.notes.iter().any(|n| n.starts_with("time limit")) {
            self.notes.push(format!("time limit of {:?} reached", self.ctx.limits.timeout));
        }
        true
    }

    /// Whether a retrieval row stands on text older than the snapshot: a lane behind it ranked
    /// the unit by its earlier text. Marked as stale evidence where freshness `allow` marks what
    /// is stale; `wait` and `strict` wait for the lexical lane, and the dense lane reports its
    /// lag in the answer's lane health.
    /// In every freshness mode: `wait` and `strict` wait for the files, not for the dense lane,
    /// whose rank of a unit may rest on the unit's earlier text (no row is stale unmarked).
    fn ranked_by_older_text(&self, older_text: &FxHashSet<String>, id: &str) -> bool {
        older_text.contains(id)
    }

    /// Whether the unit's file changed on disk after the snapshot.
    fn unit_is_stale(&self, id: &str) -> bool {
        let Some(is_stale) = self.ctx.is_stale else { return false };
        if self.ctx.anything_stale.is_some_and(|anything| !anything()) {
            return false;
        }
        self.ctx.snapshot.unit(id).is_some_and(|u| is_stale(&u.file.graph.path))
    }

    /// Whether the unit's file was resolved against a module whose file changed on disk after
    /// the snapshot (a re-export in an `__init__.py`): the edges leaving it may change.
    fn resolved_against_stale(&self, id: &str) -> bool {
        let Some(resolution_is_stale) = self.ctx.resolution_is_stale else { return false };
        self.ctx.snapshot.unit(id).is_some_and(|u| resolution_is_stale(&u.file.graph.path))
    }

    /// Whether an edge stands on a file that changed on disk after the snapshot: the file of
    /// either end (the call site, the definition it resolved to), or a module the source's file
    /// consulted when it was resolved. `contains` is structure within one file, resolved
    /// against nothing.
    fn edge_is_stale(&self, src: &str, dst: &str, kind: EdgeKind) -> bool {
        self.ctx.is_stale.is_some()
            && (self.unit_is_stale(src)
                || self.unit_is_stale(dst)
                || (kind != EdgeKind::Contains && self.resolved_against_stale(src)))
    }

    /// `k` of `search` and `context`, at most the result limit: the lanes rank that many units
    /// each and cannot stop part way, so the limit is what bounds their time (`search ... k
    /// 100000` on django ranked 61,563 units in 0.7 s whatever the time limit).
    fn retrieval_depth(&self, k: usize) -> usize {
        k.min(self.ctx.limits.max_results)
    }

    /// After a ranking of `ranked` units for `k` asked: the answer is truncated only when the
    /// result limit may have kept some out (a `k` over the limit with fewer units found than the
    /// limit cut nothing).
    fn note_retrieval_cut(&mut self, k: usize, ranked: usize) {
        let limit = self.ctx.limits.max_results;
        // Each lane ranks at most the limit: as many as that (or more, fused) means some may
        // have been left out.
        if k > limit && ranked >= limit {
            self.truncated = true;
            self.notes.push(format!("k {k} is over the result limit: the first {limit} are ranked"));
        }
    }

    fn full(&mut self, rows: &[Row]) -> bool {
        if rows.len() >= self.row_cap {
            if self.row_cap == self.ctx.limits.max_results {
                self.result_limit_reached();
            } else {
                self.truncated = true;
                let note = format!(
                    "a step stopped at {} rows, the most one step passes to the next: the steps after it saw only those",
                    self.row_cap
                );
                if !self.notes.contains(&note) {
                    self.notes.push(note);
                }
            }
            true
        } else {
            false
        }
    }

    fn result_limit_reached(&mut self) {
        self.truncated = true;
        // The note says which limit, in every output format (the table used to print its own
        // line, JSON said nothing).
        if !self.notes.iter().any(|n| n.starts_with("result limit")) {
            self.notes.push(format!(
                "result limit of {} reached: results past it, if any, are not shown",
                self.ctx.limits.max_results
            ));
        }
    }
}

/// Resolves what the query's `context` steps are for, without running them: the error a
/// target that does not resolve would give ([`resolve_target`](crate::retrieve::resolve_target)),
/// or a parse error. For a caller that prepares something slow before running a query (the
/// in-process command line embeds units for the dense lane), so that a misnamed file or
/// function is reported at once.
pub fn check_context_targets(ctx: &Context, text: &str) -> Result<(), QueryError> {
    let parsed = parse(text)?;
    let query = relative_paths(&parsed, ctx).map_err(|e| e.placed(text, &parsed.symbols))?;
    for stage in &query.stages {
        if let Stage::Context { target, .. } = stage {
            crate::retrieve::resolve_target(ctx.snapshot, target).map_err(|e| e.placed(text, &query.symbols))?;
        }
    }
    Ok(())
}

pub fn execute(ctx: &Context, query: &Query) -> Result<Output, QueryError> {
    let relative = relative_paths(query, ctx)?;
    let query = &relative;
    let mut exec = Exec {
        ctx,
        started: ctx.started.unwrap_or_else(Instant::now),
        truncated: false,
        notes: Vec::new(),
        ticks: 0,
        lanes: None,
        context: None,
        lane_hits: Vec::new(),
        row_cap: ctx.limits.max_results,
        counting: matches!(query.stages.last(), Some(Stage::Count)),
    };
    let counting = exec.counting;
    let mut rows: Vec<Row> = Vec::new();
    let mut count = None;
    for (i, stage) in query.stages.iter().enumerate() {
        if count.is_some() {
            return Err(QueryError::Invalid("'count' must be the last step".into()));
        }
        // A daemon's cancellation is seen between steps too (`order by` does not tick).
        if ctx.cancel.as_ref().is_some_and(|c| c.load(Ordering::Relaxed)) {
            return Err(QueryError::Cancelled);
        }
        let last = i + 1 == query.stages.len();
        exec.row_cap = if last && !counting { ctx.limits.max_results } else { ctx.limits.max_results.max(COUNT_CAP) };
        rows = run_stage(&mut exec, stage, rows, i == 0)?;
        if let Stage::Count = stage {
            count = Some(rows.len());
        }
    }
    // The answer holds at most the result limit, whatever its last step (a `where`, `order by`,
    // `limit` or later `find` passes on as many rows as it was given, a `show` gives every unit
    // its names match), but for the two that hold more by design: a `context` adds the units its
    // text holds to its `k`, and a `path` is whole or absent.
    let more_by_design = matches!(query.stages.last(), Some(Stage::Context { .. } | Stage::Path { .. }));
    if !more_by_design && count.is_none() && rows.len() > ctx.limits.max_results {
        rows.truncate(ctx.limits.max_results);
        exec.result_limit_reached();
    }
    let snapshot = ctx.snapshot;
    let results = if count.is_some() {
        Vec::new()
    } else {
        rows.iter()
            .map(|r| Item { stale: r.stale_evidence || exec.unit_is_stale(&r.id), ..item(snapshot, r) })
            .collect()
    };
    Ok(Output {
        version: snapshot.version(),
        results,
        truncated: exec.truncated,
        count,
        notes: exec.notes,
        lanes: exec.lanes,
        context: exec.context,
        lane_hits: exec.lane_hits,
    })
}

fn item(snapshot: &Snapshot, row: &Row) -> Item {
    let mut item = Item {
        name: row.id.clone(),
        depth: row.depth,
        via: row.via.map(EdgeKind::as_str),
        from: row.from.clone(),
        direction: row.direction,
        line: row.line,
        also_at: row.also_at.clone(),
        group: row.group,
        callee: row.callee.clone(),
        source: row.source.clone(),
        change: row.change,
        score: row.score,
        lanes: row.ranks.clone(),
        role: row.role,
        ..Item::default()
    };
    match snapshot.unit(&row.id) {
        Some(u) => {
            item.kind = u.unit.kind.as_str();
            item.file = Some(u.file.graph.path.clone());
            item.start_line = Some(u.unit.start_line);
            item.end_line = Some(u.unit.end_line);
            item.revision = Some(u.file.graph.revision.to_string());
            item.parse_errors = Some(u.file.graph.parse_errors).filter(|&n| n > 0);
            item.resolution_cut = u.file.graph.resolution_cut;
        }
        None => match &row.gone {
            // A removed unit says what it was and where, from the history.
            Some(place) => {
                item.kind = place.kind.as_str();
                item.file = Some(place.file.clone());
                item.start_line = Some(place.start_line);
                item.end_line = Some(place.end_line);
            }
            None => match snapshot.module_file(&row.id).filter(|f| f.graph.skipped.is_some()) {
                Some(file) => {
                    item.kind = "module";
                    item.file = Some(file.graph.path.clone());
                    item.revision = Some(file.graph.revision.to_string());
                    item.skipped = file.graph.skipped.as_ref().map(ToString::to_string);
                }
                None => item.kind = row_kind(snapshot, row).map_or("removed", UnitKind::as_str),
            },
        },
    }
    item
}

fn run_stage(exec: &mut Exec, stage: &Stage, input: Vec<Row>, first: bool) -> Result<Vec<Row>, QueryError> {
    match stage {
        Stage::Traverse { traversal, symbol, depth } => {
            let starts = match symbol {
                Some(s) => resolve_symbol(exec.snapshot(), s)?,
                None => input.iter().map(|r| r.id.clone()).collect(),
            };
            // What an earlier step reached through stale evidence passes it on.
            let tainted: FxHashSet<String> =
                input.iter().filter(|r| symbol.is_none() && r.stale_evidence).map(|r| r.id.clone()).collect();
            let depth = depth.clone().unwrap_or_else(|| traversal.default_depth());
            let rows = traverse(exec, &starts, &tainted, *traversal, &depth)?;
            if one_name(&starts) {
                completeness_notes(exec, &starts[0], *traversal);
            } else {
                completeness_notes_of_several(exec, &starts, *traversal);
            }
            Ok(rows)
        }
        Stage::Path { from, to, via } => {
            let from = resolve_symbol(exec.snapshot(), from)?;
            let to = resolve_symbol(exec.snapshot(), to)?;
            let kinds = if via.is_empty() { vec![EdgeKind::Calls] } else { via.clone() };
            let mut rows = shortest_paths(exec, &from, &to, &kinds)?;
            taint_groups(exec, &mut rows);
            Ok(rows)
        }
        Stage::Find { pattern, kind, file } => {
            let keep = |exec: &Exec, id: &str| -> bool {
                let snapshot = exec.snapshot();
                let unit = snapshot.unit(id);
                // A module whose file was skipped (too large, not UTF-8) has no units but is a
                // module of the tree, as `show` and the traversals list it.
                let skipped = unit.is_none().then(|| skipped_module_file(snapshot, id)).flatten();
                let kind_of = if skipped.is_some() { Some(UnitKind::Module) } else { snapshot.kind_of(id) };
                if let Some(k) = kind
                    && kind_of != Some(*k)
                {
                    return false;
                }
                if let Some(f) = file {
                    let path =
                        unit.map(|u| u.file.graph.path.as_str()).or(skipped.as_ref().map(|f| f.graph.path.as_str()));
                    match path {
                        Some(path) if glob::matches(f, path) => {}
                        _ => return false,
                    }
                }
                if let Some(p) = pattern
                    && !name_matches(p, id, unit.map(|u| u.unit.name.as_str()))
                {
                    return false;
                }
                true
            };
            let mut rows = Vec::new();
            if first {
                let snapshot = exec.snapshot();
                let ids: Vec<String> = if *kind == Some(UnitKind::External) {
                    snapshot.externals().into_iter().map(str::to_string).collect()
                } else {
                    let skipped = snapshot
                        .files()
                        .filter(|f| f.graph.skipped.is_some() && !f.graph.module.is_empty())
                        .map(|f| f.graph.module.clone());
                    snapshot.units().map(|u| u.unit.id.clone()).chain(skipped).collect()
                };
                for id in ids {
                    if !exec.tick()? {
                        break;
                    }
                    if keep(exec, &id) {
                        if exec.full(&rows) {
                            break;
                        }
                        rows.push(Row::unit(id));
                    }
                }
            } else {
                rows = input.into_iter().filter(|r| keep(exec, &r.id)).collect();
            }
            Ok(rows)
        }
        Stage::Show { symbol } => {
            let ids = resolve_symbol(exec.snapshot(), symbol)?;
            Ok(ids
                .into_iter()
                .map(|id| {
                    let source = exec.snapshot().unit(&id).map(|u| u.file.display_source_of(u.unit).to_string());
                    Row { source, ..Row::unit(id) }
                })
                .collect())
        }
        Stage::Unresolved { scope } => unresolved(exec, scope.as_ref()),
        Stage::Cycles { kind } => {
            let mut rows = cycles(exec, *kind)?;
            taint_groups(exec, &mut rows);
            Ok(rows)
        }
        Stage::Changes { since, until, until_at, skip } => {
            let Some(history) = exec.ctx.history else {
                return Err(QueryError::Invalid(
                    "'changes since' needs the stored index's version history; this answer comes from files indexed in \
                     memory (a daemon holds the index: ask it, without --no-daemon; or the index cannot be opened \
                     here)"
                        .into(),
                ));
            };
            // A page is `--limit` changes whatever steps follow: `skip` counts changes, so the
            // next page's query in the note below is exact only then. Only counted, no page is
            // read, and the whole range is counted.
            if !exec.counting {
                exec.row_cap = exec.ctx.limits.max_results;
            }
            let current = exec.snapshot().version();
            // A `since` past every version is a number from another index (or a client's
            // mistake), whatever the range's end: say so, not that an `until` nobody wrote is
            // before it.
            if *since > current {
                return Err(QueryError::HistoryExpired(fresco_graph::HistoryExpired {
                    since: *since,
                    oldest: history.oldest(),
                    newest: current,
                }));
            }
            let until = until.unwrap_or(current);
            let invalid = |message: String| match *until_at {
                Some(offset) => QueryError::InvalidAt { message, offset, at: None },
                None => QueryError::Invalid(message),
            };
            if until > current {
                return Err(invalid(format!("'until {until}' is after this answer's version, {current}")));
            }
            if until < *since {
                return Err(invalid(format!("'until {until}' is before 'since {since}'")));
            }
            let changes = history.changes_between(*since, until).map_err(QueryError::HistoryExpired)?;
            let total = changes.len();
            let places = history.removed_places(*since);
            let gone = |id: &str| {
                if exec.ctx.snapshot.contains_unit(id) { None } else { places.get(id).cloned() }
            };
            let mut rows = Vec::new();
            let remaining = total.saturating_sub(*skip);
            for change in changes.into_iter().skip(*skip) {
                let row = match change {
                    fresco_graph::NetChange::Unit(id, c) => {
                        Row { change: Some(unit_change(c)), gone: gone(&id), ..Row::unit(id) }
                    }
                    fresco_graph::NetChange::Edge(e, c) => Row {
                        from: Some(e.src.to_string()),
                        via: Some(e.kind),
                        line: e.line,
                        change: Some(edge_change(c)),
                        gone: gone(&e.dst),
                        ..Row::unit(e.dst.to_string())
                    },
                };
                rows.push(row);
                // A page that ends with the range is whole: not truncated.
                if rows.len() < remaining && exec.full(&rows) {
                    break;
                }
            }
            let next = skip + rows.len();
            if next < total {
                exec.notes.push(format!(
                    "{total} changes from version {since} to {until}: these are {} to {next}; the next ones: \
                     `changes since {since} until {until} skip {next}`, followed by this query's other steps",
                    skip + 1
                ));
            }
            Ok(rows)
        }
        Stage::Where(conditions) => {
            let snapshot = exec.ctx.snapshot;
            // Regexes are compiled once per stage, not once per row (the parser has checked them).
            let regexes: Vec<Option<regex::Regex>> = conditions
                .iter()
                .map(|c| match c {
                    Condition::NameRegex(p) => regex::Regex::new(p).ok(),
                    _ => None,
                })
                .collect();
            // Every row the steps before found is filtered, past the time limit too, up to
            // WHERE_WORK_PAST_LIMIT conditions tested; then the time limit and cancellation are
            // checked as a traversal's are (a request of 1 MiB may hold 58,000 conditions, over up
            // to COUNT_CAP rows: one such query took 17 s whatever its limit, and held a query
            // slot). Rows not filtered when the time is up are left out, and the answer is cut.
            let mut kept = Vec::new();
            let mut tested = 0usize;
            for row in input {
                tested = tested.saturating_add(conditions.len());
                if tested > WHERE_WORK_PAST_LIMIT && !exec.tick_many(conditions.len())? {
                    break;
                }
                if conditions.iter().zip(&regexes).all(|(c, re)| condition_holds(snapshot, &row, c, re.as_ref())) {
                    kept.push(row);
                }
            }
            Ok(kept)
        }
        Stage::Limit(n) => {
            let mut rows = input;
            rows.truncate(*n);
            Ok(rows)
        }
        Stage::OrderBy { field, descending } => {
            // Each row's key computed once (a comparison used to look its unit up and copy its
            // path), so a sort of COUNT_CAP rows stays short; stable, so ties keep their order.
            let snapshot = exec.snapshot();
            let mut rows = input;
            if *descending {
                rows.sort_by_cached_key(|r| std::cmp::Reverse(sort_key(snapshot, r, *field)));
            } else {
                rows.sort_by_cached_key(|r| sort_key(snapshot, r, *field));
            }
            Ok(rows)
        }
        Stage::Count => Ok(input),
        Stage::Search { text, k: asked, lanes } => {
            use crate::retrieve::*;
            let k = &exec.retrieval_depth(*asked);
            let wanted: Vec<Lane> = if lanes.is_empty() { vec![Lane::Bm25, Lane::Dense] } else { lanes.clone() };
            let mut health = std::collections::BTreeMap::new();
            // Each lane gives the same number of candidates whatever k is, so the fused ranking
            // does not depend on it up to 50: the best of `k 3` is the best of `k 10`, and the
            // top k is a prefix of the top k+n while k+n is at most 50 (fused from k per lane, `k 1` and `k 10` named different
            // best units on httpx, a black-box finding).
            let depth = (*k).max(SEARCH_LANE_DEPTH);
            let TextLaneAnswers { mut ranked, older_text, unseen } =
                run_text_lanes(exec.snapshot(), exec.ctx.lanes, &wanted, text, depth, &mut health);
            if wanted.contains(&Lane::Graph) {
                health.insert(
                    "graph",
                    LaneReport {
                        status: "unavailable",
                        version: Some(exec.snapshot().version()),
                        lag: None,
                        reason: Some("the graph lane needs a target: use `context`".into()),
                        hits: 0,
                    },
                );
            }
            ranked.retain(|(_, ids)| !ids.is_empty());
            report_unseen(&mut health, &ranked, &unseen);
            let fused = fuse_seeing(&ranked, &unseen);
            exec.note_retrieval_cut(*asked, fused.len());
            exec.lane_hits = ranked.iter().map(|(l, ids)| (l.as_str(), ids.clone())).collect();
            exec.lanes = Some(health);
            Ok(fused
                .into_iter()
                .take(*k)
                .map(|f| {
                    let stale_evidence = exec.ranked_by_older_text(&older_text, &f.id);
                    Row { score: Some(f.score), ranks: Some(f.ranks), stale_evidence, ..Row::unit(f.id) }
                })
                .collect())
        }
        Stage::Context { target, budget, k: asked, lanes } => {
            use crate::retrieve::*;
            let k = &exec.retrieval_depth(*asked);
            let snapshot = exec.ctx.snapshot;
            let target = resolve_target(snapshot, target)?;
            exec.notes.extend(target.note.clone());
            let wanted: Vec<Lane> = if lanes.is_empty() { Lane::ALL.to_vec() } else { lanes.clone() };
            let mut health = std::collections::BTreeMap::new();
            // As for `search`: every lane lists as deep whatever `k` is, so the top k is the top k
            // of the default answer (the analogues the graph lane learns from are the text lanes'
            // best, and a shorter list lost lane ranks too).
            let depth = (*k).max(SEARCH_LANE_DEPTH);
            let TextLaneAnswers { mut ranked, older_text, unseen } =
                run_text_lanes(snapshot, exec.ctx.lanes, &wanted, &target.text, depth, &mut health);
            // Test code is not what non-test code needs: keep the text lanes to code like the target.
            if !is_test_path(&target.file) {
                for (_, ids) in ranked.iter_mut() {
                    ids.retain(|id| snapshot.unit(id).is_some_and(|u| !is_test_path(&u.file.graph.path)));
                }
            }
            let analogues = analogues(&ranked, &target);
            // The text lanes, once asked, answer (tens of milliseconds on django); the graph
            // lane, the costliest step, is not run once the time limit has passed: the answer
            // is the text lanes' fusion, marked truncated, the graph lane `skipped`.
            let run_graph = wanted.contains(&Lane::Graph) && !exec.time_is_up();
            // Without the graph lane (`lanes bm25,dense`), nothing is ranked or labelled by it:
            // the answer is the fusion of the lanes asked for, all of it examples.
            let graph: Vec<String> = if run_graph {
                graph_lane(snapshot, &target, exec.ctx.lanes, wanted.contains(&Lane::Dense), &analogues, depth)
            } else {
                Vec::new()
            };
            if wanted.contains(&Lane::Graph) {
                let (status, reason) = if run_graph {
                    ("ready", None)
                } else {
                    let why = format!(
                        "not run: the query's time limit of {:?} was reached before it",
                        exec.ctx.limits.timeout
                    );
                    ("skipped", Some(why))
                };
                health.insert(
                    "graph",
                    LaneReport { status, version: Some(snapshot.version()), lag: Some(0), reason, hits: graph.len() },
                );
                if run_graph {
                    ranked.insert(0, (Lane::Graph, graph.clone()));
                }
            }
            // The text lanes lose the target and what lies inside it (an attribute its body
            // assigns, a function it nests), as the graph lane does: its own code, never what it
            // needs. A text lane finds the target most like its own text, which says nothing; the
            // graph lane ranks it only as a call to itself (recursion).
            let target_unit = target.id.as_ref().and_then(|id| snapshot.unit(id));
            for (lane, ids) in ranked.iter_mut() {
                if let Some(t) = target_unit.as_ref().filter(|_| *lane != Lane::Graph) {
                    ids.retain(|x| !snapshot.unit(x).is_some_and(|u| lies_within(&u, t)));
                }
                // Nor the target's own module, its whole file: never an example of anything.
                if *lane != Lane::Graph {
                    ids.retain(|x| *x != target.module);
                }
                // A lane's health counts the hits the answer stands on, not those left out.
                if let Some(report) = health.get_mut(lane.as_str()) {
                    report.hits = ids.len();
                }
            }
            exec.lane_hits = ranked.iter().map(|(l, ids)| (l.as_str(), ids.clone())).collect();
            let deps = if graph.is_empty() { FxHashSet::default() } else { dependency_set(snapshot, &graph, *k) };
            report_unseen(&mut health, &ranked, &unseen);
            let fused = context_order(fuse_seeing(&ranked, &unseen), &graph, &deps);
            exec.note_retrieval_cut(*asked, fused.len());
            let block = assemble(snapshot, exec.ctx.lanes, &target, &fused, &deps, *budget, exec.ctx.is_stale);
            if let Some((unit, tokens)) = &block.smallest_cut {
                let plural = if *budget == 1 { "" } else { "s" };
                exec.notes.push(format!(
                    "a budget of {budget} token{plural} fits no unit: the smallest, {unit}, needs {tokens} with its file header"
                ));
            }
            // The choice itself stands on the target's file: its imports, its class, its body.
            if exec.ctx.is_stale.is_some_and(|stale| stale(&target.file)) {
                exec.notes.push(format!(
                    "{} changed on disk after version {}: the context was chosen from its earlier text",
                    target.file,
                    snapshot.version()
                ));
            }
            // The ranking: its first k, and further down every unit the text holds (an example
            // used in the text, ranked below k dependencies, kept its ranks nowhere).
            let in_text: FxHashSet<&str> = block.units.iter().map(|u| u.name.as_str()).collect();
            let rows = fused
                .into_iter()
                .enumerate()
                .filter(|(rank, f)| *rank < *k || in_text.contains(f.id.as_str()))
                .map(|(_, f)| {
                    let role = if deps.contains(&f.id) { "dependency" } else { "example" };
                    let stale_evidence = exec.ranked_by_older_text(&older_text, &f.id);
                    Row {
                        score: Some(f.score),
                        ranks: Some(f.ranks),
                        role: Some(role),
                        stale_evidence,
                        ..Row::unit(f.id)
                    }
                })
                .collect();
            exec.lanes = Some(health);
            exec.context = Some(block);
            Ok(rows)
        }
    }
}

fn unit_change(c: fresco_graph::Change) -> &'static str {
    c.as_str()
}

fn edge_change(c: fresco_graph::Change) -> &'static str {
    match c {
        fresco_graph::Change::Added => "edge_added",
        fresco_graph::Change::Removed => "edge_removed",
        fresco_graph::Change::Changed => "edge_changed",
    }
}

/// What `order by` sorts a row by: one variant per field, so rows compare within it.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum SortKey {
    Name(String),
    Depth(Option<u32>),
    Kind(Option<UnitKind>),
    /// The unit's file, then where it starts.
    File(String, u32),
    /// The row's own line (a call site, reference or import) when it has one, else where the
    /// unit starts; the file breaks ties.
    Line(u32, String),
}

/// A removed unit (a `changes` row) sorts by where it was, as its row shows and `where` reads.
fn sort_key(snapshot: &Snapshot, row: &Row, field: Field) -> SortKey {
    let place = || -> Option<(String, u32)> {
        match snapshot.unit(&row.id) {
            Some(u) => Some((u.file.graph.path.clone(), u.unit.start_line)),
            None => row.gone.as_ref().map(|g| (g.file.clone(), g.start_line)),
        }
    };
    match field {
        Field::Name => SortKey::Name(row.id.clone()),
        Field::Depth => SortKey::Depth(row.depth),
        Field::Kind => SortKey::Kind(row_kind(snapshot, row)),
        Field::File => {
            let (file, start) = place().unwrap_or_default();
            SortKey::File(file, start)
        }
        Field::Line => {
            let (file, start) = place().unwrap_or_default();
            SortKey::Line(row.line.unwrap_or(start), file)
        }
    }
}

/// The kind of the unit a row stands for, as its row shows it: as the snapshot has it, else as
/// it was when removed, else a module for a skipped file's module, else, for the end of a
/// changed edge that no unit is (now, or removed since), an external name, also when no edge of
/// this version names it any more.
fn row_kind(snapshot: &Snapshot, row: &Row) -> Option<UnitKind> {
    if let Some(u) = snapshot.unit(&row.id) {
        return Some(u.unit.kind);
    }
    if let Some(place) = &row.gone {
        return Some(place.kind);
    }
    if snapshot.module_file(&row.id).is_some_and(|f| f.graph.skipped.is_some()) {
        return Some(UnitKind::Module);
    }
    let edge_end = row.change.is_some_and(|c| c.starts_with("edge_"));
    (edge_end || snapshot.is_external(&row.id)).then_some(UnitKind::External)
}

/// Whether a name glob matches a unit, for `find` and `where` alike: its whole id, its name (the
/// id without the `#N` that tells several definitions of one name apart) or the name's last
/// segment, so that `command` matches `click.decorators.command#5`.
fn name_matches(pattern: &str, id: &str, name: Option<&str>) -> bool {
    // As units are named: identifiers NFKC-normalised (a copy only for a pattern beyond ASCII).
    let pattern = &*names::nfkc(pattern);
    let name = name.unwrap_or(id);
    let simple = name.rsplit('.').next().unwrap_or(name);
    glob::matches(pattern, id) || glob::matches(pattern, name) || glob::matches(pattern, simple)
}

/// An id without its `#N` suffix (`pkg.f#2` is `pkg.f`): the name of a unit the snapshot does
/// not have (one removed since, an external name, which has no suffix).
fn without_suffix(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((name, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => id,
    }
}

fn condition_holds(snapshot: &Snapshot, row: &Row, condition: &Condition, regex: Option<&regex::Regex>) -> bool {
    match condition {
        Condition::Kind { kinds, negated } => {
            let k = row_kind(snapshot, row);
            kinds.iter().any(|x| Some(*x) == k) != *negated
        }
        Condition::NameGlob(p) => {
            let name = snapshot.unit(&row.id).map_or_else(|| without_suffix(&row.id), |u| u.unit.name.as_str());
            name_matches(p, &row.id, Some(name))
        }
        Condition::NameRegex(_) => regex.is_some_and(|re| re.is_match(&row.id)),
        Condition::FileGlob(p) => match snapshot.unit(&row.id) {
            Some(u) => glob::matches(p, &u.file.graph.path),
            None => row.gone.as_ref().is_some_and(|g| glob::matches(p, &g.file)),
        },
        Condition::Depth(op, n) => {
            // A row no traversal reached (`find`'s) has no depth: no comparison holds for it,
            // rather than one as if it were at depth 0.
            let Some(d) = row.depth else { return false };
            match op {
                Comparison::Eq => d == *n,
                Comparison::Ne => d != *n,
                Comparison::Lt => d < *n,
                Comparison::Le => d <= *n,
                Comparison::Gt => d > *n,
                Comparison::Ge => d >= *n,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name and the suggestion it differs from never look alike in the message.
    #[test]
    fn characters_that_show_nothing_are_escaped_in_errors() {
        let err = QueryError::UnknownSymbol {
            name: "click.core.P\r\rarameter".into(),
            suggestions: vec!["click.core.Parameter".into()],
            at: None,
        };
        assert_eq!(err.to_string(), "no unit named 'click.core.P\\r\\rarameter'; did you mean: click.core.Parameter?");
        let err = QueryError::UnknownSymbol { name: "a\u{200b}b\u{202e}c".into(), suggestions: vec![], at: None };
        assert_eq!(err.to_string(), "no unit named 'a\\u{200b}b\\u{202e}c'");
        assert_eq!(visible("plain.name_ü"), "plain.name_ü");
    }
}
