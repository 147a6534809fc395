//! Hybrid retrieval: lexical (BM25), dense and graph lanes fused by reciprocal rank, and
//! token-budgeted context assembly.
//!
//! The lexical and dense lanes live outside this crate (they own indexes derived from the
//! graph); they are reached through the [`Lanes`] trait. The graph lane is computed here, over the
//! snapshot: for a target, the units it can actually reach, ranked for the target.

use std::collections::BTreeMap;

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ast::{ContextTarget, Lane};
use crate::exec::QueryError;

/// The reciprocal-rank-fusion constant (Cormack et al.'s 60), fixed in configuration and not
/// tuned on outcomes.
pub const RRF_K: f64 = 60.0;

/// One lane's ranked answer and the graph version its index reflects.
#[derive(Clone, Debug, Default)]
pub struct LaneHits {
    pub ids: Vec<String>,
    pub version: u64,
    /// Set when the lane's index covers only part of that version (e.g. embedding in progress).
    pub partial: Option<String>,
}

/// Why a lane did not answer.
#[derive(Clone, Debug)]
pub struct LaneDown {
    pub reason: String,
}

/// The lexical and dense lanes, and the tokenizer shared by retrieval.
pub trait Lanes: Sync {
    fn bm25(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown>;
    fn dense(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown>;
    /// Splits code and prose into lowercase word tokens (identifiers split too).
    fn tokens(&self, text: &str) -> Vec<String>;
    /// Counts tokens the way the context budget is stated; `None` to use the fallback rule.
    fn count_tokens(&self, text: &str) -> Option<usize>;
}

/// A lane's health as reported with every retrieval answer.
#[derive(Clone, Debug, serde::Serialize)]
pub struct LaneReport {
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<u64>,
    /// How many versions the lane's index is behind the snapshot answered from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lag: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    pub hits: usize,
}

/// A fused result: the unit, its fused score and its rank in each lane (1-based).
#[derive(Clone, Debug)]
pub struct Fused {
    pub id: String,
    pub score: f64,
    pub ranks: BTreeMap<&'static str, usize>,
}

/// Reciprocal rank fusion, deduplicated by unit id; ties broken by best single rank, then id.
pub fn fuse(lanes: &[(Lane, Vec<String>)]) -> Vec<Fused> {
    let mut by_id: FxHashMap<&str, Fused> = FxHashMap::default();
    for (lane, ids) in lanes {
        let mut seen = FxHashSet::default();
        for (i, id) in ids.iter().enumerate() {
            if !seen.insert(id.as_str()) {
                continue;
            }
            let entry = by_id.entry(id.as_str()).or_insert_with(|| Fused {
                id: id.clone(),
                score: 0.0,
                ranks: BTreeMap::new(),
            });
            entry.score += 1.0 / (RRF_K + (i + 1) as f64);
            entry.ranks.insert(lane.as_str(), i + 1);
        }
    }
    let mut fused: Vec<Fused> = by_id.into_values().collect();
    fused.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.ranks.values().min().cmp(&b.ranks.values().min()))
            .then_with(|| a.id.cmp(&b.id))
    });
    fused
}

/// Runs the lexical and dense lanes for `text`, recording each lane's health. Hits for units
/// not in `snapshot` (removed since the lane's index was built) are dropped.
pub fn run_text_lanes(
    snapshot: &Snapshot,
    lanes: Option<&dyn Lanes>,
    wanted: &[Lane],
    text: &str,
    k: usize,
    health: &mut BTreeMap<&'static str, LaneReport>,
) -> Vec<(Lane, Vec<String>)> {
    let mut out = Vec::new();
    for lane in wanted.iter().copied().filter(|l| *l != Lane::Graph) {
        let answer = match lanes {
            None => Err(LaneDown { reason: "no retrieval lanes are loaded in this process".into() }),
            Some(l) if lane == Lane::Bm25 => l.bm25(text, k),
            Some(l) => l.dense(text, k),
        };
        match answer {
            Ok(hits) => {
                let ids: Vec<String> = hits.ids.into_iter().filter(|id| snapshot.contains_unit(id)).collect();
                let lag = snapshot.version().saturating_sub(hits.version);
                let status = if hits.partial.is_some() {
                    "partial"
                } else if lag == 0 {
                    "ready"
                } else {
                    "lagging"
                };
                health.insert(
                    lane.as_str(),
                    LaneReport {
                        status,
                        version: Some(hits.version),
                        lag: Some(lag),
                        reason: hits.partial,
                        hits: ids.len(),
                    },
                );
                out.push((lane, ids));
            }
            Err(down) => {
                health.insert(
                    lane.as_str(),
                    LaneReport { status: "unavailable", version: None, lag: None, reason: Some(down.reason), hits: 0 },
                );
            }
        }
    }
    out
}

/// What a context is assembled for, resolved against the snapshot.
pub struct Target {
    /// The unit, when it exists.
    pub id: Option<String>,
    /// Its module (the file's module for a new function).
    pub module: String,
    /// The file it lives in.
    pub file: String,
    /// Its class, for methods.
    pub class: Option<String>,
    /// Text describing it: signature and docstring (what a retrieval lane is asked with).
    pub text: String,
}

pub fn resolve_target(snapshot: &Snapshot, target: &ContextTarget) -> Result<Target, QueryError> {
    match target {
        ContextTarget::Unit(symbol) => {
            let ids = crate::exec::resolve_symbol(snapshot, symbol)?;
            let id =
                ids.into_iter().next().ok_or_else(|| QueryError::Invalid("no unit to assemble context for".into()))?;
            let unit = snapshot.unit(&id).ok_or_else(|| {
                QueryError::Invalid(format!("'{id}' is external: there is no code to assemble context for"))
            })?;
            let class = match unit.unit.kind {
                UnitKind::Method => id.rsplit_once('.').map(|(c, _)| c.to_string()),
                _ => None,
            };
            // Where it lives helps the text lanes: its class and module names, split into words.
            let mut text =
                unit.unit.name.rsplit_once('.').map(|(owner, _)| owner.replace(['.', '_'], " ")).unwrap_or_default();
            text.push('\n');
            text.push_str(unit.unit.signature.as_deref().unwrap_or(&unit.unit.name));
            if let Some(doc) = &unit.unit.docstring {
                text.push('\n');
                text.push_str(doc);
            }
            Ok(Target {
                module: unit.file.graph.module.clone(),
                file: unit.file.graph.path.clone(),
                class,
                text,
                id: Some(id),
            })
        }
        ContextTarget::New { text, file } => {
            let entry = snapshot.file(file).cloned().or_else(|| {
                let suffix = format!("/{file}");
                let mut m = snapshot.files().filter(|f| f.graph.path.ends_with(&suffix));
                let first = m.next().cloned();
                if m.next().is_some() { None } else { first }
            });
            let entry = entry
                .ok_or_else(|| QueryError::Invalid(format!("no indexed file '{file}' (or the name is ambiguous)")))?;
            Ok(Target {
                id: None,
                module: entry.graph.module.clone(),
                file: entry.graph.path.clone(),
                class: None,
                text: text.clone(),
            })
        }
    }
}

fn is_code_unit(kind: UnitKind) -> bool {
    !matches!(kind, UnitKind::Module | UnitKind::External)
}

/// The graph lane: the units the target can reach, ranked for it.
///
/// First (for an existing unit) what it already uses: its resolved callees, references and bases,
/// in order of first use. Then the candidates it could use: units of its own file, of the modules
/// its file imports (what they define, following re-exports), its class and bases with their
/// members; ranked by word overlap with the target's signature and docstring, then by how much
/// the rest of the repository uses them.
pub fn graph_lane(snapshot: &Snapshot, target: &Target, lanes: Option<&dyn Lanes>, k: usize) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    let mut seen: FxHashSet<String> = FxHashSet::default();
    if let Some(id) = &target.id {
        seen.insert(id.clone());
        let mut uses: Vec<(u32, String)> = snapshot
            .edges_from(id)
            .into_iter()
            .filter(|(e, _)| matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits))
            .filter(|(e, _)| snapshot.unit(&e.dst).is_some_and(|u| is_code_unit(u.unit.kind)))
            .map(|(e, _)| (e.line.unwrap_or(0), e.dst.clone()))
            .collect();
        uses.sort();
        for (_, dst) in uses {
            if seen.insert(dst.clone()) {
                ranked.push(dst);
            }
        }
        // Their neighbourhood: what the directly used units call in turn.
        let direct = ranked.clone();
        for d in direct {
            for (e, _) in snapshot.edges_from(&d) {
                if e.kind == EdgeKind::Calls && snapshot.unit(&e.dst).is_some_and(|u| is_code_unit(u.unit.kind)) {
                    if seen.insert(e.dst.clone()) {
                        ranked.push(e.dst.clone());
                    }
                }
            }
        }
    }
    let candidates = reachable_candidates(snapshot, target, &seen);
    let target_words: FxHashSet<String> = words(lanes, &target.text).into_iter().collect();
    let mut scored: Vec<(f64, String)> = candidates
        .into_iter()
        .map(|(id, tier)| {
            let text = snapshot
                .unit(&id)
                .map(|u| {
                    let mut t = u.unit.name.clone();
                    if let Some(s) = &u.unit.signature {
                        t.push(' ');
                        t.push_str(s);
                    }
                    if let Some(d) = &u.unit.docstring {
                        t.push(' ');
                        t.push_str(d);
                    }
                    t
                })
                .unwrap_or_default();
            let cand: FxHashSet<String> = words(lanes, &text).into_iter().collect();
            let overlap = cand.intersection(&target_words).count() as f64;
            let overlap = if cand.is_empty() { 0.0 } else { overlap / (cand.len() as f64).sqrt() };
            let popularity = (1.0 + snapshot.edges_to(&id).len() as f64).ln();
            (tier.weight() + overlap * 2.0 + popularity * 0.1, id)
        })
        .collect();
    scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.1.cmp(&b.1)));
    ranked.extend(scored.into_iter().map(|(_, id)| id));
    ranked.truncate(k.max(1) * 4);
    ranked
}

fn words(lanes: Option<&dyn Lanes>, text: &str) -> Vec<String> {
    match lanes {
        Some(l) => l.tokens(text),
        None => text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(|w| w.to_lowercase()).collect(),
    }
}

/// Units a target in `target.file` can reach by name: its file's definitions, what the file
/// imports, its class and its bases' members.
/// How close a reachable unit is to the target: its class (and bases), its file, or imported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    Class,
    /// What the target's class's other methods use (other classes' methods and attributes,
    /// functions of other modules): a class's methods tend to work with the same things.
    ClassNeighbourhood,
    File,
    /// What the other functions of the target's file use.
    FileNeighbourhood,
    Imported,
}

impl Tier {
    /// Locality dominates the graph lane's order: what a method needs is most often on its own
    /// class, then in its own file, then among its file's imports.
    fn weight(self) -> f64 {
        match self {
            Tier::Class => 3.0,
            Tier::ClassNeighbourhood => 2.0,
            Tier::File => 1.5,
            Tier::FileNeighbourhood => 0.75,
            Tier::Imported => 0.0,
        }
    }
}

fn reachable_candidates(snapshot: &Snapshot, target: &Target, exclude: &FxHashSet<String>) -> Vec<(String, Tier)> {
    let mut out: Vec<(String, Tier)> = Vec::new();
    let mut seen: FxHashSet<String> = exclude.clone();
    let mut push = |id: &str, tier: Tier, out: &mut Vec<(String, Tier)>| {
        if snapshot.unit(id).is_some_and(|u| is_code_unit(u.unit.kind)) && seen.insert(id.to_string()) {
            out.push((id.to_string(), tier));
        }
    };
    let module_members = |module: &str| -> Vec<String> {
        snapshot
            .edges_from(module)
            .into_iter()
            .filter(|(e, _)| e.kind == EdgeKind::Contains)
            .map(|(e, _)| e.dst.clone())
            .collect()
    };
    // The class and its bases, with their members.
    if let Some(class) = &target.class {
        let mut classes = vec![class.clone()];
        let mut i = 0;
        while i < classes.len() && classes.len() < 16 {
            for (e, _) in snapshot.edges_from(&classes[i]) {
                if e.kind == EdgeKind::Inherits && snapshot.contains_unit(&e.dst) && !classes.contains(&e.dst) {
                    classes.push(e.dst.clone());
                }
            }
            i += 1;
        }
        for c in &classes {
            for m in module_members(c) {
                push(&m, Tier::Class, &mut out);
            }
        }
        for m in module_members(class) {
            for (e, _) in snapshot.edges_from(&m) {
                if matches!(e.kind, EdgeKind::Calls | EdgeKind::References) {
                    push(&e.dst, Tier::ClassNeighbourhood, &mut out);
                }
            }
        }
    }
    // The file's own definitions.
    for m in module_members(&target.module) {
        push(&m, Tier::File, &mut out);
    }
    // What the file's other functions use.
    for m in module_members(&target.module) {
        for (e, _) in snapshot.edges_from(&m) {
            if matches!(e.kind, EdgeKind::Calls | EdgeKind::References) {
                push(&e.dst, Tier::FileNeighbourhood, &mut out);
            }
        }
    }
    // What the file imports: imported units, and the members of imported modules.
    for (e, _) in snapshot.edges_from(&target.module) {
        if e.kind != EdgeKind::Imports {
            continue;
        }
        match snapshot.unit(&e.dst).map(|u| u.unit.kind) {
            Some(UnitKind::Module) => {
                for m in module_members(&e.dst) {
                    push(&m, Tier::Imported, &mut out);
                }
            }
            Some(UnitKind::Class) => {
                push(&e.dst, Tier::Imported, &mut out);
                for m in module_members(&e.dst) {
                    push(&m, Tier::Imported, &mut out);
                }
            }
            Some(_) => push(&e.dst, Tier::Imported, &mut out),
            None => {}
        }
    }
    out
}

/// A unit chosen for the context, with why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ContextUnit {
    pub name: String,
    pub role: &'static str,
    pub file: String,
    pub start_line: u32,
    pub end_line: u32,
    pub revision: String,
    pub tokens: usize,
    /// Set by the daemon (freshness `allow`) when the unit's file changed on disk after the
    /// snapshot the context was assembled from.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ContextBlock {
    pub budget: usize,
    pub tokens: usize,
    /// How tokens are counted: `minilm` (the MiniLM WordPiece tokenizer) or `chars/4` (one token
    /// per four characters, rounded up) when the tokenizer is not available.
    pub token_rule: &'static str,
    pub units: Vec<ContextUnit>,
    /// Units that ranked high but did not fit the budget.
    pub cut: Vec<String>,
    pub text: String,
}

/// Assembles context within `budget` tokens: dependencies first, then usage examples, each as
/// the whole unit's source; grouped by file and in source order in the text.
pub fn assemble(
    snapshot: &Snapshot,
    lanes: Option<&dyn Lanes>,
    target: &Target,
    fused: &[Fused],
    dependencies: &FxHashSet<String>,
    budget: usize,
) -> ContextBlock {
    let counted_by_tokenizer = lanes.and_then(|l| l.count_tokens("x")).is_some();
    let count = |text: &str| -> usize {
        match lanes.and_then(|l| l.count_tokens(text)) {
            Some(n) => n,
            None => text.chars().count().div_ceil(4),
        }
    };
    let mut chosen: Vec<ContextUnit> = Vec::new();
    let mut cut = Vec::new();
    let mut used = 0usize;
    let mut taken: FxHashSet<&str> = FxHashSet::default();
    let ordered = fused
        .iter()
        .filter(|f| dependencies.contains(&f.id))
        .map(|f| (f, "dependency"))
        .chain(fused.iter().filter(|f| !dependencies.contains(&f.id)).map(|f| (f, "example")));
    for (f, role) in ordered {
        if Some(&f.id) == target.id.as_ref() || !taken.insert(f.id.as_str()) {
            continue;
        }
        let Some(u) = snapshot.unit(&f.id) else { continue };
        if !is_code_unit(u.unit.kind) {
            continue;
        }
        // Once the budget is (nearly) spent, the rest is cut without counting its tokens.
        if budget.saturating_sub(used) < 24 {
            cut.push(f.id.clone());
            continue;
        }
        // A unit nested in one already chosen is already in the text.
        if chosen
            .iter()
            .any(|c| c.file == u.file.graph.path && c.start_line <= u.unit.start_line && u.unit.end_line <= c.end_line)
        {
            continue;
        }
        let tokens = count(u.file.source_of(u.unit)) + 12;
        if used + tokens > budget {
            cut.push(f.id.clone());
            continue;
        }
        used += tokens;
        chosen.push(ContextUnit {
            name: f.id.clone(),
            role,
            file: u.file.graph.path.clone(),
            start_line: u.unit.start_line,
            end_line: u.unit.end_line,
            revision: u.file.graph.revision.to_string(),
            tokens,
            stale: false,
        });
    }
    // The text: grouped by file (the target's file last, closest to where the code will go),
    // units in source order within a file.
    let mut by_file: BTreeMap<(bool, String), Vec<&ContextUnit>> = BTreeMap::new();
    for c in &chosen {
        by_file.entry((c.file == target.file, c.file.clone())).or_default().push(c);
    }
    let mut text = String::new();
    for ((_, file), mut units) in by_file {
        units.sort_by_key(|u| u.start_line);
        let revision = units.first().map(|u| u.revision.clone()).unwrap_or_default();
        text.push_str(&format!("# file: {file} (revision {revision})\n"));
        for u in units {
            if let Some(unit) = snapshot.unit(&u.name) {
                text.push_str(&format!("# {} lines {}-{} ({})\n", u.name, u.start_line, u.end_line, u.role));
                text.push_str(unit.file.source_of(unit.unit));
                text.push_str("\n\n");
            }
        }
    }
    ContextBlock {
        budget,
        tokens: used,
        token_rule: if counted_by_tokenizer { "minilm" } else { "chars/4" },
        units: chosen,
        cut,
        text,
    }
}

/// The units a target depends on as the graph sees them: what it uses, and what it could use
/// by name (definitions reachable from its file and class). Everything else is an example.
pub fn dependency_set(snapshot: &Snapshot, target: &Target, graph_ranked: &[String]) -> FxHashSet<String> {
    let mut deps: FxHashSet<String> = graph_ranked.iter().cloned().collect();
    if let Some(id) = &target.id {
        deps.remove(id);
    }
    deps.retain(|id| snapshot.unit(id).is_some());
    deps
}

/// Whether a path looks like test code (a `test`/`tests` directory or a `test_*.py`/`*_test.py` file).
pub fn is_test_path(path: &str) -> bool {
    path.split('/').any(|part| {
        part == "test"
            || part == "tests"
            || part == "testing"
            || part.starts_with("test_")
            || part.ends_with("_test.py")
    })
}
