//! Hybrid retrieval: lexical (BM25), dense and graph lanes fused by reciprocal rank, and
//! token-budgeted context assembly.
//!
//! The lexical and dense lanes live outside this crate (they own indexes derived from the
//! graph); they are reached through the [`Lanes`] trait. The graph lane is computed here, over the
//! snapshot: for a target, the units it can actually reach, ranked for the target.

use std::collections::BTreeMap;

use fresco_graph::{EdgeKind, Snapshot, UnitKind};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ast::{ContextTarget, Lane, Symbol};
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
    /// Dense (embedding) similarity of `text` to each unit of `ids` (`None` for a unit without a
    /// vector); `None` when the dense lane cannot answer. Used by the graph lane to rank the
    /// units a target can reach.
    fn dense_similarities(&self, text: &str, ids: &[&str]) -> Option<Vec<Option<f32>>>;
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
///
/// Lanes are fused by the kind of evidence they carry, in two levels: the lexical and dense
/// lanes are two views of one signal (text similarity to the query) and are fused first; that
/// ranking is then fused with the graph lane (dependency structure). A flat fusion of the three
/// would count similarity twice: two text lanes agreeing on a sibling that merely looks like the
/// target outvote the graph lane's first choice. Both levels use the same constant [`RRF_K`].
/// Every fused result keeps each lane's own rank.
pub fn fuse(lanes: &[(Lane, Vec<String>)]) -> Vec<Fused> {
    let similarity: Vec<&[String]> =
        lanes.iter().filter(|(l, _)| *l != Lane::Graph).map(|(_, ids)| ids.as_slice()).collect();
    let structure: Vec<&[String]> =
        lanes.iter().filter(|(l, _)| *l == Lane::Graph).map(|(_, ids)| ids.as_slice()).collect();
    let similarity_ranking: Vec<String> = rrf(&similarity).into_iter().map(|(id, _)| id).collect();
    let structure_ranking: Vec<String> = rrf(&structure).into_iter().map(|(id, _)| id).collect();
    let scored: Vec<(String, f64)> = match (similarity.is_empty(), structure.is_empty()) {
        (false, false) => rrf(&[similarity_ranking.as_slice(), structure_ranking.as_slice()]),
        (false, true) => rrf(&similarity),
        (true, _) => rrf(&structure),
    };
    let mut ranks: FxHashMap<&str, BTreeMap<&'static str, usize>> = FxHashMap::default();
    for (lane, ids) in lanes {
        let mut seen = FxHashSet::default();
        for (i, id) in ids.iter().enumerate() {
            if seen.insert(id.as_str()) {
                ranks.entry(id.as_str()).or_default().insert(lane.as_str(), i + 1);
            }
        }
    }
    let mut fused: Vec<Fused> = scored
        .into_iter()
        .map(|(id, score)| {
            let ranks = ranks.get(id.as_str()).cloned().unwrap_or_default();
            Fused { id, score, ranks }
        })
        .collect();
    fused.sort_by(|a, b| {
        b.score
            .partial_cmp(&a.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then_with(|| a.ranks.values().min().cmp(&b.ranks.values().min()))
            .then_with(|| a.id.cmp(&b.id))
    });
    fused
}

/// Plain reciprocal rank fusion of ranked lists (duplicates within a list count once), in
/// descending score; ties broken by best single rank, then id.
fn rrf(lists: &[&[String]]) -> Vec<(String, f64)> {
    let mut by_id: FxHashMap<&str, (f64, usize)> = FxHashMap::default();
    for ids in lists {
        let mut seen = FxHashSet::default();
        for (i, id) in ids.iter().enumerate() {
            if !seen.insert(id.as_str()) {
                continue;
            }
            let entry = by_id.entry(id.as_str()).or_insert((0.0, usize::MAX));
            entry.0 += 1.0 / (RRF_K + (i + 1) as f64);
            entry.1 = entry.1.min(i + 1);
        }
    }
    let mut out: Vec<(&str, (f64, usize))> = by_id.into_iter().collect();
    out.sort_by(|a, b| {
        b.1.0.partial_cmp(&a.1.0).unwrap_or(std::cmp::Ordering::Equal).then(a.1.1.cmp(&b.1.1)).then(a.0.cmp(b.0))
    });
    out.into_iter().map(|(id, (score, _))| (id.to_string(), score)).collect()
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
    let text_lanes: Vec<Lane> = wanted.iter().copied().filter(|l| *l != Lane::Graph).collect();
    let ask = |lane: Lane| match lanes {
        None => Err(LaneDown { reason: "no retrieval lanes are loaded in this process".into() }),
        Some(l) if lane == Lane::Bm25 => l.bm25(text, k),
        Some(l) => l.dense(text, k),
    };
    // The dense lane spends most of its time embedding the query (memory-bound matrix products on
    // the embedder's own threads); BM25 answers meanwhile instead of after it.
    let answers: Vec<Result<LaneHits, LaneDown>> =
        if lanes.is_some() && text_lanes.len() > 1 {
            std::thread::scope(|scope| {
                let handles: Vec<_> = text_lanes[1..].iter().map(|&lane| scope.spawn(move || ask(lane))).collect();
                let first = ask(text_lanes[0]);
                std::iter::once(first)
                    .chain(handles.into_iter().map(|h| {
                        h.join().unwrap_or_else(|_| Err(LaneDown { reason: "the lane failed (a bug)".into() }))
                    }))
                    .collect()
            })
        } else {
            text_lanes.iter().map(|&lane| ask(lane)).collect()
        };
    for (lane, answer) in text_lanes.into_iter().zip(answers) {
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
    /// The same without the names of its module and class (which every neighbour shares).
    pub own_text: String,
    /// What the answer should say about how it was chosen, when the request named several
    /// units: which definition of a name defined more than once, the first of a glob's matches,
    /// or that a function given as text matched none or several same-named functions of FILE.
    pub note: Option<String>,
}

pub fn resolve_target(snapshot: &Snapshot, target: &ContextTarget) -> Result<Target, QueryError> {
    match target {
        ContextTarget::Unit(symbol) => {
            let ids = crate::exec::resolve_symbol(snapshot, symbol)?;
            let (count, asked_name) = (ids.len(), ids.first().cloned().unwrap_or_default());
            let one_name = crate::exec::one_name(&ids);
            let id = context_definition(snapshot, ids, one_name)
                .ok_or_else(|| QueryError::Invalid("no unit to assemble context for".into()))?;
            let note = (count > 1).then(|| {
                if one_name {
                    format!(
                        "{count} definitions of {asked_name}: the context is for {id}, the last that is neither an @overload \
                         declaration nor a property's setter or deleter (name another with its #N suffix)"
                    )
                } else {
                    let written = match symbol {
                        Symbol::Name(name) | Symbol::Glob(name) => name.clone(),
                        Symbol::Location { file, line } => format!("{file}:{line}"),
                    };
                    format!("{written} names {count} units: the context is for the first, {id}; name one to choose")
                }
            });
            let unit = snapshot.unit(&id).ok_or_else(|| {
                QueryError::Invalid(format!("'{id}' is external: there is no code to assemble context for"))
            })?;
            let class = match unit.unit.kind {
                UnitKind::Method => owner_of(&id).map(str::to_string),
                _ => None,
            };
            // Where it lives helps the text lanes: its class and module names, split into words.
            let mut own_text = unit.unit.signature.as_deref().unwrap_or(&unit.unit.name).to_string();
            if let Some(doc) = &unit.unit.docstring {
                own_text.push('\n');
                own_text.push_str(doc);
            }
            // Where it lives helps the text lanes: its class and module names, split into words
            // (measured: without them BM25 finds 0.44 of the needed units in its top 50, with
            // them 0.61). The graph lane's word affinity uses `own_text`: every neighbour shares
            // those names.
            let mut text =
                unit.unit.name.rsplit_once('.').map(|(owner, _)| owner.replace(['.', '_'], " ")).unwrap_or_default();
            text.push('\n');
            text.push_str(&own_text);
            Ok(Target {
                module: unit.file.graph.module.clone(),
                file: unit.file.graph.path.clone(),
                class,
                text,
                own_text,
                id: Some(id),
                note,
            })
        }
        ContextTarget::New { text, file } => {
            let entry = snapshot.file(file).cloned().or_else(|| {
                let suffix = format!("/{file}");
                let mut m = snapshot.files().filter(|f| f.graph.path.ends_with(&suffix));
                let first = m.next().cloned();
                if m.next().is_some() { None } else { first }
            });
            let Some(entry) = entry else {
                // A function of a module not written yet: placed by the files beside it.
                let Some((path, module)) = new_module(snapshot, file) else {
                    return Err(QueryError::Invalid(format!(
                        "no indexed file '{file}' (or the name is ambiguous), and no indexed file in its directory to \
                         tell the module a new file would be"
                    )));
                };
                let note = format!(
                    "{path} is not indexed (not written yet?): the context is for a function of a new module {module}, \
                     which can reach its package's modules"
                );
                return Ok(Target {
                    id: None,
                    text: format!("{}\n{text}", module.replace(['.', '_'], " ")),
                    module,
                    file: path,
                    class: None,
                    own_text: text.clone(),
                    note: Some(note),
                });
            };
            let Placement { id, class, ambiguous } = place_new_function(&entry.graph, text);
            let note = (ambiguous.len() > 1).then(|| {
                format!(
                    "{file} defines {} {} times ({}) and the text repeats the signature of none or several of them: \
                     the context is for a new function; name one (`context ID`) to choose",
                    defined_name(text).unwrap_or("it"),
                    ambiguous.len(),
                    ambiguous.join(", ")
                )
            });
            // The text lanes get the names of where it will live, as for an existing unit.
            let owner = class.as_deref().unwrap_or(&entry.graph.module).replace(['.', '_'], " ");
            Ok(Target {
                id,
                module: entry.graph.module.clone(),
                file: entry.graph.path.clone(),
                class,
                text: format!("{owner}\n{text}"),
                own_text: text.clone(),
                note,
            })
        }
    }
}

/// The path and module of `file`, a Python file not indexed yet, from the indexed files in its
/// directory (given as written, else as a suffix naming one directory, as for an indexed file): a
/// sibling `pkg/util.py` of module `app.pkg.util`, or `pkg/__init__.py` of module `app.pkg`, makes
/// `pkg/new.py` module `app.pkg.new`; a sibling whose module name is not its file's (renamed to
/// avoid a clash, `tests.unit.conftest`) says nothing. A new `__init__.py` would change what its
/// siblings are: not placed.
fn new_module(snapshot: &Snapshot, file: &str) -> Option<(String, String)> {
    let (dir, name) = file.rsplit_once('/').unwrap_or(("", file));
    let stem = name.strip_suffix(".py")?;
    if stem.is_empty() || stem == "__init__" || stem.contains('.') {
        return None;
    }
    let mut siblings: Vec<&fresco_graph::FileEntry> =
        snapshot.files().filter(|f| dir_of(&f.graph.path) == dir).map(|f| &**f).collect();
    if siblings.is_empty() && !dir.is_empty() {
        let suffix = format!("/{dir}");
        siblings = snapshot.files().filter(|f| dir_of(&f.graph.path).ends_with(&suffix)).map(|f| &**f).collect();
        let first_dir = dir_of(&siblings.first()?.graph.path);
        if siblings.iter().any(|f| dir_of(&f.graph.path) != first_dir) {
            return None;
        }
    }
    let real_dir = dir_of(&siblings.first()?.graph.path).to_string();
    // The package the directory is: an `__init__.py`'s module, else what a sibling's module
    // name holds before its own file's name.
    let package = siblings.iter().find_map(|f| {
        let (own_name, module) = (f.graph.path.rsplit('/').next().unwrap_or(&f.graph.path), f.graph.module.as_str());
        let own_stem = own_name.strip_suffix(".py")?;
        if own_stem == "__init__" {
            return (module != "__init__" && !module.is_empty()).then(|| Some(module.to_string()));
        }
        if module == own_stem {
            return Some(None);
        }
        module.strip_suffix(own_stem)?.strip_suffix('.').map(|package| Some(package.to_string()))
    })?;
    let module = match package {
        Some(package) => format!("{package}.{stem}"),
        None => stem.to_string(),
    };
    let path = if real_dir.is_empty() { name.to_string() } else { format!("{real_dir}/{name}") };
    Some((path, module))
}

/// The directory part of a relative path (`""` for a file at the root).
fn dir_of(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(dir, _)| dir)
}

/// Which unit `context NAME` assembles for. When the name resolves to several definitions of one
/// name (`one_name`, see [`crate::exec::definitions_of`]): the last, the one Python binds the
/// name to and calls resolve to, passing over `@overload` declarations (the implementation comes
/// after them) and a property's setter and deleter (the getter is what readers of the property
/// run). Otherwise the first unit the name resolves to.
fn context_definition(snapshot: &Snapshot, ids: Vec<String>, one_name: bool) -> Option<String> {
    let first = ids.first()?.clone();
    if !one_name {
        return Some(first);
    }
    let name = last_name(&first);
    let is_declaration_or_accessor = |id: &str| {
        snapshot.unit(id).and_then(|u| u.unit.signature.clone()).is_some_and(|signature| {
            decorator_names(&signature).any(|d| {
                d.rsplit('.').next() == Some("overload")
                    || d == format!("{name}.setter")
                    || d == format!("{name}.deleter")
            })
        })
    };
    ids.iter().rev().find(|id| !is_declaration_or_accessor(id)).cloned().or(Some(first))
}

/// The dotted names of the decorators heading `signature` (`t.overload` for `@t.overload`,
/// `app.route` for `@app.route("/")`).
fn decorator_names(signature: &str) -> impl Iterator<Item = &str> {
    signature
        .lines()
        .map(str::trim)
        .take_while(|line| line.starts_with('@'))
        .map(|line| line.trim_start_matches('@').split('(').next().unwrap_or("").trim())
}

/// Where a function given as text will live in `file`: the unit of the same name already there
/// (a stub, or the function being rewritten: its class and what it uses then count), and if
/// there is none but its first parameter is `self` or `cls`, the file's class when there is only
/// one. Returns the unit's id and its class.
fn place_new_function(file: &fresco_graph::FileGraph, text: &str) -> Placement {
    let mut placed = Placement { id: None, class: None, ambiguous: Vec::new() };
    let Some(name) = defined_name(text) else { return placed };
    let same_name: Vec<&fresco_graph::Unit> = file
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && last_name(&u.name) == name)
        .collect();
    let header = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    let given = header(text);
    let chosen = match same_name.as_slice() {
        [one] => Some(*one),
        [] => None,
        many => {
            // Several (methods of different classes): the one whose signature the text repeats.
            let mut fitting =
                many.iter().filter(|u| u.signature.as_deref().is_some_and(|s| given.contains(&header(s))));
            match (fitting.next(), fitting.next()) {
                (Some(u), None) => Some(*u),
                _ => None,
            }
        }
    };
    if let Some(u) = chosen {
        placed.class = (u.kind == UnitKind::Method).then(|| owner_of(&u.id).map(str::to_string)).flatten();
        placed.id = Some(u.id.clone());
        return placed;
    }
    if same_name.len() > 1 {
        placed.ambiguous = same_name.iter().map(|u| u.id.clone()).collect();
    }
    if first_parameter(text).is_some_and(|p| p == "self" || p == "cls") {
        let mut classes = file.units.iter().filter(|u| u.kind == UnitKind::Class);
        if let (Some(only), None) = (classes.next(), classes.next()) {
            placed.class = Some(only.id.clone());
        }
    }
    placed
}

/// Where [`place_new_function`] puts a function given as text.
struct Placement {
    /// The unit of that name already in the file, when one is it.
    id: Option<String>,
    /// Its class.
    class: Option<String>,
    /// The same-named functions of the file when the text matched none or several of them.
    ambiguous: Vec<String>,
}

/// The name a `def` in `text` defines (`async def` too).
fn defined_name(text: &str) -> Option<&str> {
    let at = text.find("def ")?;
    let rest = text[at + 4..].trim_start();
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Where the parameter list of the `def` in `text` opens (its `(`, past the decorators'
/// parentheses).
fn parameters_start(text: &str) -> Option<usize> {
    let def = text.find("def ")?;
    Some(def + text[def..].find('(')?)
}

/// The first parameter's name of the `def` in `text`.
fn first_parameter(text: &str) -> Option<&str> {
    let open = parameters_start(text)?;
    let rest = text[open + 1..].trim_start();
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// The classes a target's signature and docstring name: those it already refers to (parameter
/// and return annotations, kept when a body is blanked) and the classes its file can reach by a
/// name that appears, as written, in its text.
fn mentioned_classes(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let add = |id: &str, out: &mut Vec<String>| {
        if snapshot.kind_of(id) == Some(UnitKind::Class)
            && target.class.as_deref() != Some(id)
            && !out.iter().any(|c| c == id)
        {
            out.push(id.to_string());
        }
    };
    if let Some(id) = &target.id {
        for (e, _) in snapshot.edges_from(id) {
            if matches!(e.kind, EdgeKind::References | EdgeKind::Calls) {
                add(&e.dst, &mut out);
            }
        }
    }
    let written = capitalised_words(&target.own_text);
    for class in classes_written(snapshot, &target.module, &written) {
        add(&class, &mut out);
    }
    out
}

/// The words of `text` that start with a capital letter: the names a class may go by.
fn capitalised_words(text: &str) -> FxHashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_uppercase()))
        .collect()
}

/// The classes the code of `module` can reach by one of the names in `written`: its own classes
/// and those it imports by name, and the classes of the modules it imports (`from . import
/// models` then `models.Request`).
fn classes_written(snapshot: &Snapshot, module: &str, written: &FxHashSet<&str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    if written.is_empty() {
        return out;
    }
    let mut add = |id: &str| {
        if snapshot.kind_of(id) == Some(UnitKind::Class) && !out.iter().any(|c| c == id) {
            out.push(id.to_string());
        }
    };
    let named = |id: &str| id.rsplit('.').next().is_some_and(|short| written.contains(short));
    for (e, _) in &snapshot.edges_from(module) {
        let reachable = matches!(e.kind, EdgeKind::Contains | EdgeKind::Imports);
        if reachable && named(&e.dst) {
            add(&e.dst);
        }
        if e.kind == EdgeKind::Imports && snapshot.kind_of(&e.dst) == Some(UnitKind::Module) {
            for (m, _) in snapshot.edges_from(&e.dst) {
                if m.kind == EdgeKind::Contains && named(&m.dst) {
                    add(&m.dst);
                }
            }
        }
    }
    out
}

/// Where the parameter list of the `def` in `text` ends (just past its `)`). Brackets and
/// string literals in the parameters are skipped, so a default like `sep="->"` or `(a, b)` does
/// not end it early.
fn parameters_end(text: &str) -> Option<usize> {
    let open = parameters_start(text)?;
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut chars = text[open..].char_indices();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(open + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where the return annotation of the `def` in `text` lies (`Response` in
/// `def send(self) -> Response:`), as a byte range, when it has one.
fn return_annotation_range(text: &str) -> Option<(usize, usize)> {
    let close = parameters_end(text)?;
    let after = text[close..].trim_start();
    let rest = after.strip_prefix("->")?;
    let start = text.len() - rest.len();
    // The annotation ends at the colon that ends the header, or at the end of its line (a unit's
    // stored signature has no colon, and its docstring follows on the next line): one outside
    // brackets.
    let mut depth = 0usize;
    let mut end = text.len();
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ':' | '\n' if depth == 0 => {
                end = start + i;
                break;
            }
            _ => {}
        }
    }
    Some((start, end))
}

/// The return annotation of the `def` in `text`, trimmed.
fn return_annotation(text: &str) -> Option<&str> {
    return_annotation_range(text).map(|(start, end)| text[start..end].trim())
}

/// The header of the `def` in `text`: its decorators, name, parameters and return annotation,
/// without the docstring that follows.
fn def_header(text: &str) -> Option<&str> {
    let end = match return_annotation_range(text) {
        Some((_, end)) => end,
        None => parameters_end(text)?,
    };
    Some(&text[..end])
}

/// The classes the target's header names (in annotations and defaults), as its file can reach
/// them by those names.
fn header_classes(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(header) = def_header(&target.own_text) else { return Vec::new() };
    let written = capitalised_words(header);
    classes_written(snapshot, &target.module, &written)
}

/// The constructors of the classes the target's return annotation names: each class's
/// `__init__`, or the first one found through its bases. A function declared to return a class
/// most often builds one (`request_context(...) -> RequestContext` calls
/// `RequestContext.__init__`; `make_null_session(...) -> NullSession` runs the `__init__`
/// `NullSession` inherits).
fn returned_constructors(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    let Some(annotation) = return_annotation(&target.own_text) else { return FxHashSet::default() };
    let written = capitalised_words(annotation);
    let mut out = FxHashSet::default();
    for class in classes_written(snapshot, &target.module, &written) {
        let constructor = class_and_bases(snapshot, &class)
            .into_iter()
            .map(|c| format!("{c}.__init__"))
            .find(|init| snapshot.contains_unit(init));
        out.extend(constructor);
    }
    out
}

/// Units retrieval deals in: code units other than lambdas (a lambda is retrieved as part of the
/// unit containing it).
fn is_code_unit(unit: &fresco_graph::Unit) -> bool {
    !matches!(unit.kind, UnitKind::Module | UnitKind::External) && !unit.is_lambda()
}

/// The graph lane: the units the target can reach, ranked for it.
///
/// First (for an existing unit) what it already uses: its resolved callees, references and bases,
/// in order of first use, then what those call in turn. Then the candidates it could use: members
/// of its class and bases, the classes its signature or docstring names (with their members),
/// units of its own file, what the file's and the class's other code
/// uses, what the file imports (imported names, the modules it binds to a name, members of
/// imported modules and classes) and the members of the classes that code works with. A module
/// ranks like any candidate (what reads it is recorded as a `references` edge) but is never
/// pasted into the context text: its source is a whole file. Candidates are scored by
/// - locality ([`Tier`]): what a method needs is most often on its own class, then in its file;
/// - usage by neighbours: how many of the class's other methods and the file's other units use
///   it (a class's methods work with the same attributes and collaborators);
/// - an import nothing else in the file uses: the code it was imported for is likely the target,
///   as likely as a member of its own class;
/// - word affinity with the target's signature and docstring, words weighted by how rare they
///   are among the candidates, and dense (embedding) affinity;
/// - the target's name: a namesake on a collaborator (a method often delegates to it), what the
///   methods of that name in its file, on its class's bases and in its direct subclasses use,
///   and what its name siblings (names that differ from it in one word) use;
/// - what other code working with the classes its header names uses of them;
/// - its return annotation: the constructor of the class it names (a function declared to
///   return a class most often builds one).
///
/// How much the rest of the repository uses a candidate was a feature too: it changed Recall@10
/// by 0.001 on the retrieval benchmark and, counted through every file that refers to the
/// candidate's module, cost most of the lane's time on django: it is left out.
///
/// The weights are stated priors (locality first, then usage, then words) shrunk toward a
/// logistic fit on human-annotated dependencies (the tuning half of DevEval): half of the fit's
/// normalised weights added to the priors' (bench/retrieval-fit/blend.py). The fit alone
/// overfits: it ranked worse on tasks whose truth is the original body's graph edges; the blend
/// ranked better on projects it was not fitted on (bench/reports/retrieval-fit.md). The fit
/// moved weight to imports and to what the target's relatives use: what its family uses now
/// weighs more than membership of its class, which no longer comes first by itself.
///
/// `use_dense`: whether the dense affinity may be asked for (not when a query leaves the dense
/// lane out: that would embed the query all the same).
pub fn graph_lane(
    snapshot: &Snapshot,
    target: &Target,
    lanes: Option<&dyn Lanes>,
    use_dense: bool,
    analogues: &[String],
    k: usize,
) -> Vec<String> {
    let mut ranked: Vec<String> = Vec::new();
    let mut seen: FxHashSet<String> = FxHashSet::default();
    if let Some(id) = &target.id {
        seen.insert(id.clone());
        // What its header uses (annotations, decorators) is not what its body needs first: for a
        // stub that is all it uses, and those units compete with the other candidates instead.
        for dst in body_uses(snapshot, id) {
            if seen.insert(dst.clone()) {
                ranked.push(dst);
            }
        }
        // Their neighbourhood: what the directly used units call in turn.
        let direct = ranked.clone();
        for d in direct {
            for (e, _) in snapshot.edges_from(&d) {
                if e.kind == EdgeKind::Calls
                    && snapshot.unit(&e.dst).is_some_and(|u| is_code_unit(u.unit))
                    && seen.insert(e.dst.clone())
                {
                    ranked.push(e.dst.clone());
                }
            }
        }
    }
    let mut scored: Vec<(f64, String)> = candidate_features(snapshot, target, lanes, use_dense, analogues, &seen)
        .into_iter()
        .map(|(id, features)| (features.score(), id))
        .collect();
    scored.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.1.cmp(&b.1)));
    ranked.extend(scored.into_iter().map(|(_, id)| id));
    ranked.truncate(k.max(1).saturating_mul(4));
    ranked
}

/// What the body of unit `id` uses (calls, reads, inherits: code units only), in source order.
/// What its header uses (annotations, decorators) is left out.
fn body_uses(snapshot: &Snapshot, id: &str) -> Vec<String> {
    let body_starts_after = snapshot.unit(id).map_or(0, |u| header_end_line(&u));
    let mut uses: Vec<(u32, String)> = code_edges(snapshot, id)
        .into_iter()
        .filter(|e| matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits))
        .filter(|e| e.line.is_none_or(|line| line > body_starts_after))
        .filter(|e| snapshot.unit(&e.dst).is_some_and(|u| is_code_unit(u.unit)))
        .map(|e| (e.line.unwrap_or(0), e.dst.clone()))
        .collect();
    uses.sort();
    uses.into_iter().map(|(_, dst)| dst).collect()
}

/// What the graph lane knows about one candidate: each value is a feature of the score.
#[derive(Clone, Debug, Default, serde::Serialize)]
// Read back only by the test that checks the measuring tools' copy of the weights.
#[cfg_attr(test, derive(serde::Deserialize))]
pub struct CandidateFeatures {
    /// How it is reachable ([`Tier`]), one-hot.
    pub own_class: f64,
    pub base_class: f64,
    pub mentioned_class: f64,
    pub class_neighbourhood: f64,
    pub file: f64,
    pub file_neighbourhood: f64,
    pub imported_name: f64,
    /// A module the file binds to a name (`from pkg import errors`, `import pkg.util as u`):
    /// the body may read it (`errors.Missing(...)`), and the module is then a dependency.
    pub imported_module: f64,
    pub imported: f64,
    /// 1 when nothing but an analogue's use reaches it ([`Tier::AnalogueUse`]): neither the
    /// target's class, its file nor its imports lead to it, so the body could use it only
    /// through an import the file does not have.
    pub analogue_only: f64,
    /// ln(1 + how many of the class's other methods use it in their bodies).
    pub class_users: f64,
    /// ln(1 + how many of the file's other units use it in their bodies (or at the module's top
    /// level)).
    pub file_users: f64,
    /// 1 when it is a name imported for the target (see [`ImportUse`]): nothing else in the file
    /// uses it and the target's body is not written. Ranks first.
    pub unused_import: f64,
    /// 1 when it is a private definition of the target's file (`_name`, not a dunder) that no
    /// code outside the target and the tests uses: a helper nothing else calls was written for
    /// the target, or is dead. The same evidence as an unused import, for what the file defines.
    pub unused_private: f64,
    /// 1 when it is a public variable of the target's module or class that no code outside the
    /// target and the tests uses (see [`is_unread_variable`]).
    pub unread_variable: f64,
    /// Rare-word overlap with the target's signature and docstring.
    pub word_affinity: f64,
    /// Dense similarity to the target text, as a z-score over the candidates.
    pub dense_affinity: f64,
    /// Use by the units most like the target (see [`analogues`]): the sum of 1 / rank over the
    /// analogues that call, read or inherit it in their bodies (not in their annotations or
    /// decorators). Similar code needs similar building blocks.
    pub analogue_users: f64,
    /// 1 when the target's signature or docstring names it as written (`timeout` in
    /// `def __init__(self, timeout)` for the attribute `self.timeout`).
    pub named_in_text: f64,
    /// How many of the target's two source-order neighbours (the function or method defined
    /// just before it and just after it, in the same class or module) use it in their bodies:
    /// code written next to each other tends to do related work.
    pub adjacent_users: f64,
    /// What analogues in other classes (or modules) use of their own owner, carried over by
    /// name to the target's owner: `Live.__exit__` calls `Live.stop`, so for
    /// `Progress.__exit__` the member `Progress.stop` counts (sum of 1 / analogue rank).
    pub analogue_role_users: f64,
    /// 1 when it has the target's name, up to leading underscores (not a dunder), and is not the
    /// target: a method often delegates to its namesake on a collaborator or a base
    /// (`Session.send` calls `HTTPAdapter.send`, `Response.aclose` calls
    /// `AsyncByteStream.aclose`), and a public name to its private implementation
    /// (`Live.get_renderable` calls `Live._get_renderable`; a property `x` reads `self._x`).
    pub same_name: f64,
    /// 1 when it is such a namesake and a member of a class the target's class works with (its
    /// other methods use the class or its members): `Session.send` calls `HTTPAdapter.send`, and
    /// `Session.__init__` mounts an `HTTPAdapter`. A namesake elsewhere may only share the name.
    pub collaborator_namesake: f64,
    /// Use by the target's family (see [`family_of`]): the share of the methods of the target's
    /// name in its file and on its class's bases that use it in their bodies (or its counterpart
    /// on the target's class). The version an override extends and sibling implementations do
    /// the same job.
    pub family_users: f64,
    /// Use by the target's name siblings (see [`name_siblings`]): the share of the functions or
    /// methods of its class or module whose names differ from its name in one word that use it in
    /// their bodies (`_get_text_stdin` uses `_WindowsConsoleReader`; `_get_text_stdout`, its
    /// sibling, uses `_WindowsConsoleWriter`, and so may `_get_text_stderr`).
    pub sibling_users: f64,
    /// 1 when it is the constructor of a class the target's return annotation names (see
    /// [`returned_constructors`]): a function declared to return a class most often builds one.
    pub return_constructor: f64,
    /// Use by other code working with the classes the target's header names (see
    /// [`TypeUsage`]): the largest share, over those classes, of the functions using the class
    /// that also use it. Code taking a `Request` reads the same few of its members.
    pub type_users: f64,
    /// 1 when it calls or uses the target, directly or through one or two other functions (see
    /// [`callers_above`]): it stands above the target in the call graph, and what the target's
    /// body needs lies below it. Recursion is the exception.
    pub caller_of_target: f64,
    /// 1 when it is defined inside a function that does not contain the target: a local name
    /// of that function, which the target can reach only as a value handed to it (a decorator's
    /// inner function, a callback).
    pub local_elsewhere: f64,
    /// 1 when it is a member of one of the target's class's bases that the class, or a base
    /// before it in the method resolution order, defines again (see [`shadowed_members`]):
    /// `self.name` reaches the redefinition.
    pub shadowed: f64,
}

/// The weight of evidence that outranks every other: more than all the others can add up to, so
/// the candidates that have it come first, in the order of the rest of their score.
const AHEAD_OF_ALL: f64 = 100.0;

impl CandidateFeatures {
    /// The graph lane's score: an import only the target can be using first, then a weighted
    /// sum of locality, usage by neighbours and relatives, and affinity: stated priors shrunk
    /// toward a fit on annotated dependencies (see [`graph_lane`]; the table is
    /// `bench/retrieval-fit/blend.py`'s output, and `fit.py`'s `STATED` repeats it).
    pub fn score(&self) -> f64 {
        3.0 * self.own_class
            + 3.0 * self.base_class
            + 2.25 * self.mentioned_class
            + 1.75 * self.class_neighbourhood
            + 1.75 * self.file
            + 0.75 * self.file_neighbourhood
            + 2.0 * self.imported_name
            + 1.5 * self.imported_module
            - 0.25 * self.imported
            + 1.25 * self.class_users
            + 0.5 * self.file_users
            + AHEAD_OF_ALL * self.unused_import
            + 3.75 * self.unused_private
            + 3.5 * self.unread_variable
            + 2.25 * self.word_affinity
            + 0.75 * self.dense_affinity
            + 2.25 * self.analogue_users
            + 1.5 * self.named_in_text
            + 2.0 * self.adjacent_users
            + 3.25 * self.analogue_role_users
            + 1.5 * self.same_name
            + 2.5 * self.collaborator_namesake
            + 4.5 * self.family_users
            + 2.0 * self.sibling_users
            + 3.0 * self.return_constructor
            + 2.5 * self.type_users
            - 2.75 * self.analogue_only
            - 5.75 * self.caller_of_target
            - 5.0 * self.local_elsewhere
            - 4.25 * self.shadowed
    }

    /// The score without the text lanes' evidence (word and dense affinity, what analogues
    /// use): the graph lane as structure alone, to measure what the hybrid adds.
    pub fn structure_score(&self) -> f64 {
        CandidateFeatures {
            word_affinity: 0.0,
            dense_affinity: 0.0,
            analogue_users: 0.0,
            analogue_role_users: 0.0,
            named_in_text: 0.0,
            same_name: 0.0,
            collaborator_namesake: 0.0,
            ..self.clone()
        }
        .score()
    }
}

/// The candidates the graph lane ranks for `target` (excluding `exclude`) and their features.
pub fn candidate_features(
    snapshot: &Snapshot,
    target: &Target,
    lanes: Option<&dyn Lanes>,
    use_dense: bool,
    analogues: &[String],
    exclude: &FxHashSet<String>,
) -> Vec<(String, CandidateFeatures)> {
    let usage = NeighbourUsage::of(snapshot, target);
    let header = header_uses(snapshot, target);
    let analogue_use = AnalogueUsage::of(snapshot, target, analogues);
    let family_use = UseShare::of(snapshot, target, &family_of(snapshot, target));
    let sibling_use = UseShare::of(snapshot, target, &name_siblings(snapshot, target));
    let name = target_name(target);
    let constructors = returned_constructors(snapshot, target);
    let mentioned = mentioned_classes(snapshot, target);
    let type_use = TypeUsage::of(snapshot, target, &header_classes(snapshot, target));
    let import_use = ImportUse::of(snapshot, target, &usage, &header);
    let candidates = reachable_candidates(snapshot, target, &usage, &analogue_use, &mentioned, &constructors, exclude);
    let collaborators = collaborator_classes(snapshot, target, &usage);
    let callers = callers_above(snapshot, target);
    let shadowed = shadowed_members(snapshot, target);
    let target_words: FxHashSet<String> = words(lanes, &target.own_text).into_iter().collect();
    let candidate_words: Vec<FxHashSet<String>> = candidates
        .iter()
        .map(|c| snapshot.unit(&c.id).map(|u| words(lanes, &describe(&u))).unwrap_or_default().into_iter().collect())
        .collect();
    let idf = WordRarity::over(&candidate_words);
    let identifiers = identifiers_in(&target.own_text);
    let dense = dense_affinity(lanes.filter(|_| use_dense), &target.text, &candidates);
    candidates
        .into_iter()
        .zip(&candidate_words)
        .zip(dense)
        .map(|((c, cand_words), dense)| {
            let one = |t: Tier| if c.tier == t { 1.0 } else { 0.0 };
            let namesake = name.is_some_and(|n| are_namesakes(last_name(&c.id), n));
            let features = CandidateFeatures {
                own_class: one(Tier::Class),
                base_class: one(Tier::BaseClass),
                mentioned_class: one(Tier::MentionedClass),
                class_neighbourhood: one(Tier::ClassNeighbourhood),
                file: one(Tier::File),
                file_neighbourhood: one(Tier::FileNeighbourhood),
                imported_name: one(Tier::ImportedName),
                imported_module: one(Tier::ImportedModule),
                imported: one(Tier::Imported),
                analogue_only: one(Tier::AnalogueUse),
                class_users: (usage.class_body_users(&c.id) as f64).ln_1p(),
                file_users: (usage.file_body_users(&c.id) as f64).ln_1p(),
                // Reached first as an imported name: not a member of its class, file or the like.
                unused_import: if matches!(c.tier, Tier::ImportedName | Tier::ImportedModule)
                    && import_use.imported_for_target(&c.id)
                {
                    1.0
                } else {
                    0.0
                },
                unused_private: if is_unused_private(snapshot, target, &header, &c.id) { 1.0 } else { 0.0 },
                unread_variable: if is_unread_variable(snapshot, target, &header, &c.id) { 1.0 } else { 0.0 },
                word_affinity: idf.affinity(cand_words, &target_words),
                dense_affinity: dense,
                analogue_users: analogue_use.score(&c.id),
                named_in_text: if identifiers.contains(last_name(&c.id)) { 1.0 } else { 0.0 },
                adjacent_users: usage.adjacent_users(&c.id) as f64,
                analogue_role_users: analogue_use.role_score(&c.id),
                same_name: if namesake { 1.0 } else { 0.0 },
                collaborator_namesake: if namesake && owner_of(&c.id).is_some_and(|o| collaborators.contains(o)) {
                    1.0
                } else {
                    0.0
                },
                family_users: family_use.share(&c.id),
                sibling_users: sibling_use.share(&c.id),
                return_constructor: if constructors.contains(&c.id) { 1.0 } else { 0.0 },
                type_users: type_use.share(&c.id),
                caller_of_target: if callers.contains(c.id.as_str()) { 1.0 } else { 0.0 },
                local_elsewhere: if is_local_elsewhere(snapshot, target, &c.id) { 1.0 } else { 0.0 },
                shadowed: if shadowed.contains(&c.id) { 1.0 } else { 0.0 },
            };
            (c.id, features)
        })
        .collect()
}

/// Whether `id` is a private definition of the target's file (`_helper`, `_CACHE`; not a dunder,
/// not inside the target) that nothing uses but the target and tests (see [`used_elsewhere`]): a
/// helper nothing else calls was written for the target, or is dead.
fn is_unused_private(snapshot: &Snapshot, target: &Target, header_uses: &FxHashSet<&str>, id: &str) -> bool {
    let name = last_name(id);
    if !name.starts_with('_') || name.ends_with("__") {
        return false;
    }
    let Some(unit) = snapshot.unit(id) else { return false };
    if unit.file.graph.path != target.file || target.id.as_deref().is_some_and(|t| is_within(id, t)) {
        return false;
    }
    !used_elsewhere(snapshot, target, header_uses, id)
}

/// Whether `id` is a public variable of the target's module or class (a constant such as
/// `PULSE_SIZE`, an attribute such as `default_tags`) that nothing uses but the target and tests.
/// The same evidence as a private helper nothing else uses: a constant or attribute nothing else
/// reads or writes is there for the target. Public functions, classes and methods are left out:
/// they are an interface to code outside the repository.
fn is_unread_variable(snapshot: &Snapshot, target: &Target, header_uses: &FxHashSet<&str>, id: &str) -> bool {
    let owner = owner_of(id);
    (owner == target.class.as_deref() || owner == Some(target.module.as_str()))
        && !last_name(id).starts_with('_')
        && snapshot.kind_of(id) == Some(UnitKind::Variable)
        && !used_elsewhere(snapshot, target, header_uses, id)
}

/// Whether any unit other than `id` itself and tests calls, reads, writes or inherits `id` (its
/// own code and lambdas left out), or the target's header does (`header_uses`, see
/// [`header_uses`]): the target's body is what is being predicted, but what its signature or
/// decorators use is explained by them.
fn used_elsewhere(snapshot: &Snapshot, target: &Target, header_uses: &FxHashSet<&str>, id: &str) -> bool {
    snapshot.edges_to(id).into_iter().any(|(e, file)| {
        matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
            && !is_within(&e.src, id)
            && !is_test_path(&file.graph.path)
            && (!target.id.as_deref().is_some_and(|t| is_within(&e.src, t)) || header_uses.contains(id))
    })
}

/// What the target's header (signature, annotations, decorators) uses: calls, reads and bases on
/// its lines before the body. Empty for a function given as text.
fn header_uses<'s>(snapshot: &'s Snapshot, target: &Target) -> FxHashSet<&'s str> {
    let Some(id) = target.id.as_deref() else { return FxHashSet::default() };
    let header_end = snapshot.unit(id).map_or(0, |u| header_end_line(&u));
    code_edges(snapshot, id)
        .into_iter()
        .filter(|e| matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits))
        .filter(|e| e.line.is_some_and(|line| line <= header_end))
        .map(|e| e.dst.as_str())
        .collect()
}

/// The members of the target's class's bases that the class, or a base before them in the
/// method resolution order, defines again: `self.close()` calls the class's own `close`, not
/// the base's. The members of the target's name are left out: an override reaches the version
/// it overrides through `super()`.
fn shadowed_members(snapshot: &Snapshot, target: &Target) -> FxHashSet<String> {
    let Some(class) = &target.class else { return FxHashSet::default() };
    let name = target_name(target);
    let mut defined: FxHashSet<String> = FxHashSet::default();
    let mut shadowed: FxHashSet<String> = FxHashSet::default();
    for c in class_and_bases(snapshot, class) {
        let members = edge_targets(snapshot, &c, EdgeKind::Contains);
        for m in &members {
            let member_name = last_name(m);
            if defined.contains(member_name) && Some(member_name) != name {
                shadowed.insert(m.clone());
            }
        }
        defined.extend(members.iter().map(|m| last_name(m).to_string()));
    }
    shadowed
}

/// The targets of `id`'s edges of one kind, in edge order: a class's or module's members
/// (`Contains`), a module's imports (`Imports`).
fn edge_targets(snapshot: &Snapshot, id: &str, kind: EdgeKind) -> Vec<String> {
    snapshot.edges_from(id).into_iter().filter(|(e, _)| e.kind == kind).map(|(e, _)| e.dst.clone()).collect()
}

/// Whether `id` is defined inside a function or method that does not contain the target.
fn is_local_elsewhere(snapshot: &Snapshot, target: &Target, id: &str) -> bool {
    owner_of(id).is_some_and(|owner| {
        matches!(snapshot.kind_of(owner), Some(UnitKind::Function | UnitKind::Method))
            && !is_within(target_owner(target), owner)
    })
}

/// How many calls above the target [`callers_above`] looks.
const CALLER_LEVELS: usize = 3;

/// How many callers [`callers_above`] collects before it stops climbing: a helper the whole
/// repository calls has thousands of callers a few levels up, and they are rarely candidates.
const CALLERS_ENOUGH: usize = 256;

/// The units that call or use the target (calls, reads, bases; a lambda's uses are its
/// owner's), and their callers and users, up to [`CALLER_LEVELS`] levels above it: code the
/// target's body is written for, not code it calls. Empty for a function given as text.
fn callers_above<'s>(snapshot: &'s Snapshot, target: &Target) -> FxHashSet<&'s str> {
    let Some(id) = target.id.as_deref() else { return FxHashSet::default() };
    let mut found: FxHashSet<&str> = FxHashSet::default();
    let mut level: Vec<&str> = vec![id];
    for _ in 0..CALLER_LEVELS {
        let mut next: Vec<&str> = Vec::new();
        for callee in &level {
            for (e, _) in snapshot.edges_to_lazily(callee) {
                if found.len() >= CALLERS_ENOUGH {
                    return found;
                }
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits) {
                    continue;
                }
                let user = without_lambdas(&e.src);
                // Code at a module's top level stands above the target, but whoever reads the
                // module does not stand above that code.
                if !is_within(user, id) && found.insert(user) && snapshot.kind_of(user) != Some(UnitKind::Module) {
                    next.push(user);
                }
            }
        }
        level = next;
    }
    found
}

/// Whether unit id `inner` is `outer` or nested in it (`pkg.f.<lambda1>` in `pkg.f`).
fn is_within(inner: &str, outer: &str) -> bool {
    inner == outer || (inner.starts_with(outer) && inner[outer.len()..].starts_with('.'))
}

/// Dense affinity of each candidate to the target text, as a z-score over the candidates
/// (clipped to [-2, 3]; 0 without a vector or without the dense lane): cosine similarities of
/// MiniLM vectors sit in a narrow band that differs between queries, their spread does not.
fn dense_affinity(lanes: Option<&dyn Lanes>, text: &str, candidates: &[Candidate]) -> Vec<f64> {
    let ids: Vec<&str> = candidates.iter().map(|c| c.id.as_str()).collect();
    let Some(sims) = lanes.and_then(|l| l.dense_similarities(text, &ids)) else {
        return vec![0.0; candidates.len()];
    };
    let known: Vec<f64> = sims.iter().flatten().map(|&s| s as f64).collect();
    if known.len() < 2 {
        return vec![0.0; candidates.len()];
    }
    let mean = known.iter().sum::<f64>() / known.len() as f64;
    let var = known.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / known.len() as f64;
    let sd = var.sqrt().max(1e-6);
    sims.iter().map(|s| s.map_or(0.0, |s| ((s as f64 - mean) / sd).clamp(-2.0, 3.0))).collect()
}

/// The words a candidate is known by: its name within its module (`Session.send`), signature
/// and the docstring's first paragraph (its summary; a large class has thousands of
/// candidates, and tokenizing whole docstrings was most of the lane's time). The module path is
/// left out: every candidate of a file shares it.
fn describe(u: &fresco_graph::UnitRef<'_>) -> String {
    let module = u.file.graph.module.as_str();
    let local = u.unit.name.strip_prefix(module).and_then(|n| n.strip_prefix('.')).unwrap_or(&u.unit.name);
    let mut t = local.replace('.', " ");
    if let Some(signature) = &u.unit.signature {
        t.push(' ');
        t.push_str(signature);
    }
    if let Some(doc) = &u.unit.docstring {
        let doc = doc.trim_start();
        let summary = doc.split("\n\n").next().unwrap_or(doc);
        let cut = summary.char_indices().nth(400).map_or(summary.len(), |(i, _)| i);
        t.push(' ');
        t.push_str(&summary[..cut]);
    }
    t
}

/// Inverse document frequency of words over the candidate set.
struct WordRarity {
    df: FxHashMap<String, usize>,
    n: f64,
}

impl WordRarity {
    fn over(sets: &[FxHashSet<String>]) -> WordRarity {
        let mut df: FxHashMap<String, usize> = FxHashMap::default();
        for s in sets {
            for w in s {
                *df.entry(w.clone()).or_default() += 1;
            }
        }
        WordRarity { df, n: sets.len().max(1) as f64 }
    }

    /// Weight of a word in [0, 1]: 1 for a word only one candidate has.
    fn weight(&self, word: &str) -> f64 {
        let df = self.df.get(word).copied().unwrap_or(1).max(1) as f64;
        (1.0 + self.n / df).ln() / (1.0 + self.n).ln()
    }

    /// Shared words, weighted by rarity, normalised by the candidate's length (long docstrings
    /// do not win by size).
    fn affinity(&self, cand: &FxHashSet<String>, target: &FxHashSet<String>) -> f64 {
        if cand.is_empty() {
            return 0.0;
        }
        let shared: f64 = cand.intersection(target).map(|w| self.weight(w)).sum();
        shared / (cand.len() as f64).sqrt()
    }
}

/// The last line of a unit's header (decorators and `def ...:`): uses on it or before it come
/// from annotations, defaults and decorators, not from the body.
fn header_end_line(u: &fresco_graph::UnitRef<'_>) -> u32 {
    let source = u.file.source_of(u.unit);
    match u.unit.signature.as_deref().filter(|s| !s.is_empty()).and_then(|s| source.find(s).map(|at| at + s.len())) {
        Some(end) => u.unit.start_line + source[..end].matches('\n').count() as u32,
        None => u.unit.start_line,
    }
}

/// The identifiers written in `text` (words of letters, digits and underscores).
fn identifiers_in(text: &str) -> FxHashSet<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.chars().next().is_some_and(|c| c.is_alphabetic() || c == '_'))
        .collect()
}

/// The last component of a unit id (`timeout` for `pkg.Session.timeout`), without the `#n` of
/// a repeated definition.
fn last_name(id: &str) -> &str {
    let last = id.rsplit('.').next().unwrap_or(id);
    last.split('#').next().unwrap_or(last)
}

/// How many of the text lanes' best hits count as the target's analogues.
pub const ANALOGUES: usize = 10;

/// The target's analogues: the units the text lanes (lexical and dense, fused) find most like
/// it, the target itself and what it contains left out. Functions that read like the target
/// tend to use what the target needs (`Session.put` and `Session.patch` both call
/// `Session.request`); the graph lane counts their uses.
pub fn analogues(text_lanes: &[(Lane, Vec<String>)], target: &Target) -> Vec<String> {
    let lists: Vec<&[String]> =
        text_lanes.iter().filter(|(l, _)| *l != Lane::Graph).map(|(_, ids)| ids.as_slice()).collect();
    let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
    rrf(&lists).into_iter().map(|(id, _)| id).filter(|id| !inside_target(id)).take(ANALOGUES).collect()
}

/// What the target's analogues use in their bodies: per used unit, the sum of 1 / rank of the
/// analogues that call, read or inherit it, and the used units in order of first appearance.
/// Also what they use of their own class or module, carried over by name to the target's
/// (`role`).
struct AnalogueUsage {
    score: FxHashMap<String, f64>,
    order: Vec<String>,
    role: FxHashMap<String, f64>,
}

impl AnalogueUsage {
    fn of(snapshot: &Snapshot, target: &Target, analogues: &[String]) -> AnalogueUsage {
        let mut score: FxHashMap<String, f64> = FxHashMap::default();
        let mut order: Vec<String> = Vec::new();
        let mut role: FxHashMap<String, f64> = FxHashMap::default();
        let target_owner = target_owner(target);
        for (i, analogue) in analogues.iter().enumerate() {
            let weight = 1.0 / (i + 1) as f64;
            let analogue_owner = owner_of(analogue);
            let mut counted: FxHashSet<&str> = FxHashSet::default();
            for e in body_edges(snapshot, analogue) {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
                    || target.id.as_deref() == Some(e.dst.as_str())
                    || !counted.insert(e.dst.as_str())
                {
                    continue;
                }
                let entry = score.entry(e.dst.clone()).or_insert_with(|| {
                    order.push(e.dst.clone());
                    0.0
                });
                *entry += weight;
                // A member of the analogue's own owner, when the analogue lives elsewhere: the
                // target's owner's member of the same name plays the same part.
                let Some(owner) = analogue_owner.filter(|o| *o != target_owner) else { continue };
                let Some((dst_owner, member)) = e.dst.rsplit_once('.') else { continue };
                if dst_owner != owner {
                    continue;
                }
                let counterpart = format!("{target_owner}.{member}");
                if target.id.as_deref() != Some(counterpart.as_str()) && snapshot.contains_unit(&counterpart) {
                    *role.entry(counterpart).or_default() += weight;
                }
            }
        }
        AnalogueUsage { score, order, role }
    }

    fn score(&self, id: &str) -> f64 {
        self.score.get(id).copied().unwrap_or(0.0)
    }

    fn role_score(&self, id: &str) -> f64 {
        self.role.get(id).copied().unwrap_or(0.0)
    }
}

/// The class or module a target is defined in (for a new function: where it will live).
fn target_owner(target: &Target) -> &str {
    match &target.id {
        Some(id) => id.rsplit_once('.').map_or(id.as_str(), |(owner, _)| owner),
        None => target.class.as_deref().unwrap_or(&target.module),
    }
}

/// The name the target has or will have (`send` for `pkg.Session.send`).
fn target_name(target: &Target) -> Option<&str> {
    match &target.id {
        Some(id) => Some(last_name(id)),
        None => defined_name(&target.own_text),
    }
}

/// The classes the target's class works with: those its other methods use, directly or through
/// one of their members. Empty for a function outside a class.
fn collaborator_classes<'u>(snapshot: &Snapshot, target: &Target, usage: &'u NeighbourUsage) -> FxHashSet<&'u str> {
    let Some(class) = target.class.as_deref() else { return FxHashSet::default() };
    let is_class = |id: &str| snapshot.kind_of(id) == Some(UnitKind::Class);
    usage
        .class_users
        .keys()
        .filter_map(|used| if is_class(used) { Some(used.as_str()) } else { owner_of(used).filter(|o| is_class(o)) })
        .filter(|c| *c != class)
        .collect()
}

/// The class or module unit `id` is defined in (`pkg.C` for `pkg.C.m`).
fn owner_of(id: &str) -> Option<&str> {
    id.rsplit_once('.').map(|(owner, _)| owner)
}

/// Whether two names are the same up to leading underscores (`send` and `send`, `_x` and `x`),
/// dunders left out (every class has an `__init__`).
fn are_namesakes(a: &str, b: &str) -> bool {
    let is_dunder = |n: &str| n.len() > 4 && n.starts_with("__") && n.ends_with("__");
    let bare = a.trim_start_matches('_');
    !is_dunder(a) && !is_dunder(b) && !bare.is_empty() && bare == b.trim_start_matches('_')
}

/// At most this many family members (and name siblings) are counted.
const FAMILY_MEMBERS: usize = 32;

/// The target's family: the functions and methods of the target's name in its file (a sibling
/// class's version, a sync and an async twin), the methods of that name of its class's bases,
/// transitively (the version an override extends), and of its class's direct subclasses (the
/// overrides extending it).
///
/// The other subclasses of the bases were family too, found through the edges into each base: on
/// django that cost 5.5 ms per target (hundreds of files import a base like `Field`), and on the
/// retrieval benchmark's trace Recall@10 read the same without them (0.692 either way).
fn family_of(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(name) = target_name(target) else { return Vec::new() };
    let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
    let mut family: Vec<String> = Vec::new();
    if let Some(file) = snapshot.file(&target.file) {
        family.extend(
            file.graph
                .units
                .iter()
                .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
                .filter(|u| last_name(&u.id) == name && !inside_target(&u.id))
                .map(|u| u.id.clone()),
        );
    }
    if let Some(class) = &target.class {
        for base in class_and_bases(snapshot, class).into_iter().skip(1) {
            let member = format!("{base}.{name}");
            if !family.contains(&member)
                && snapshot.unit(&member).is_some_and(|u| matches!(u.unit.kind, UnitKind::Function | UnitKind::Method))
            {
                family.push(member);
            }
        }
    }
    // The overrides in its class's direct subclasses (outside tests): what they add to the
    // target's version tells what it does too.
    if let Some(class) = &target.class {
        for (e, file) in snapshot.edges_to(class) {
            let member = format!("{}.{name}", e.src);
            if e.kind == EdgeKind::Inherits
                && !is_test_path(&file.graph.path)
                && !family.contains(&member)
                && snapshot.unit(&member).is_some_and(|u| matches!(u.unit.kind, UnitKind::Function | UnitKind::Method))
            {
                family.push(member);
            }
        }
    }
    family.truncate(FAMILY_MEMBERS);
    family
}

/// The target's name siblings: the functions or methods of its class (or module, for a function)
/// whose names have as many words as its name and differ from it in exactly one
/// (`_get_text_stdin` and `_get_text_stdout` for `_get_text_stderr`, `iter_text` for
/// `iter_bytes`): variants of one operation, written alike.
fn name_siblings(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(name) = target_name(target) else { return Vec::new() };
    fn words(n: &str) -> Vec<&str> {
        n.trim_matches('_').split('_').collect()
    }
    let target_words = words(name);
    if target_words.len() < 2 {
        return Vec::new();
    }
    let owner = target_owner(target);
    let Some(file) = snapshot.file(&target.file) else { return Vec::new() };
    let mut siblings: Vec<String> = file
        .graph
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
        .filter(|u| u.id.rsplit_once('.').is_some_and(|(o, _)| o == owner))
        .filter(|u| {
            let theirs = words(last_name(&u.id));
            theirs.len() == target_words.len() && theirs.iter().zip(&target_words).filter(|(a, b)| a != b).count() == 1
        })
        .map(|u| u.id.clone())
        .collect();
    siblings.truncate(FAMILY_MEMBERS);
    siblings
}

/// At most this many users of a class are read for [`TypeUsage`]: a class like django's `Model`
/// has thousands.
const TYPE_USERS: usize = 64;

/// What other code working with the classes the target's header names (its annotations) uses:
/// per used unit, the largest share, over those classes, of the functions and methods using the
/// class (in a signature or a body; at least two of them) that use it too. A function taking a
/// `Request` reads the members such functions read. Classes only its docstring names are left
/// out: on the retrieval benchmark they added nothing (Recall@10 0.7205 with the header's
/// classes, 0.7209 with both, offline), and on sympy, whose docstrings name core classes that
/// thousands of files refer to, reading their users cost a few milliseconds per target.
struct TypeUsage {
    share: FxHashMap<String, f64>,
}

impl TypeUsage {
    fn of(snapshot: &Snapshot, target: &Target, classes: &[String]) -> TypeUsage {
        let mut share: FxHashMap<String, f64> = FxHashMap::default();
        let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
        for class in classes {
            let mut users: Vec<&str> = Vec::new();
            for (e, _) in snapshot.edges_to_lazily(class) {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References) {
                    continue;
                }
                let user = without_lambdas(&e.src);
                if !inside_target(user)
                    && !users.contains(&user)
                    && matches!(snapshot.kind_of(user), Some(UnitKind::Function | UnitKind::Method))
                {
                    users.push(user);
                    if users.len() == TYPE_USERS {
                        break;
                    }
                }
            }
            if users.len() < 2 {
                continue;
            }
            let mut count: FxHashMap<&str, usize> = FxHashMap::default();
            for user in &users {
                let mut used: FxHashSet<&str> = FxHashSet::default();
                // Its own edges (not its lambdas'): an index lookup, where a scan of its file's
                // edges for the lambdas too cost a millisecond per django target.
                for (e, _) in snapshot.edges_from(user) {
                    if matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits) && e.dst != *class
                    {
                        used.insert(e.dst.as_str());
                    }
                }
                for id in used {
                    *count.entry(id).or_default() += 1;
                }
            }
            for (id, n) in count {
                if inside_target(id) {
                    continue;
                }
                let s = n as f64 / users.len() as f64;
                let entry = share.entry(id.to_string()).or_default();
                *entry = entry.max(s);
            }
        }
        TypeUsage { share }
    }

    fn share(&self, id: &str) -> f64 {
        self.share.get(id).copied().unwrap_or(0.0)
    }
}

/// What a group of the target's relatives uses in their bodies (its family, its name siblings):
/// per used unit, the share of the group that calls, reads or inherits it. A member's use of its
/// own class (`Sibling.release` in `Sibling.close`) also stands for the target's class's member
/// of that name (`Sub.release`), as for analogues.
struct UseShare {
    share: FxHashMap<String, f64>,
}

impl UseShare {
    fn of(snapshot: &Snapshot, target: &Target, members: &[String]) -> UseShare {
        let mut share: FxHashMap<String, f64> = FxHashMap::default();
        if members.is_empty() {
            return UseShare { share };
        }
        let inside_target = |id: &str| target.id.as_deref().is_some_and(|t| is_within(id, t));
        let target_owner = target_owner(target);
        let each = 1.0 / members.len() as f64;
        for member in members {
            let member_owner = owner_of(member);
            let mut used: FxHashSet<String> = FxHashSet::default();
            for e in body_edges(snapshot, member) {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits) {
                    continue;
                }
                used.insert(e.dst.clone());
                let Some(owner) = member_owner.filter(|o| *o != target_owner) else { continue };
                if let Some((dst_owner, used_member)) = e.dst.rsplit_once('.')
                    && dst_owner == owner
                {
                    let counterpart = format!("{target_owner}.{used_member}");
                    if snapshot.contains_unit(&counterpart) {
                        used.insert(counterpart);
                    }
                }
            }
            for id in used {
                if !inside_target(&id) {
                    *share.entry(id).or_default() += each;
                }
            }
        }
        UseShare { share }
    }

    fn share(&self, id: &str) -> f64 {
        self.share.get(id).copied().unwrap_or(0.0)
    }
}

/// `class` and its bases in the repository, transitively, nearest first: at most 16 classes
/// (a base is looked for while fewer are known).
fn class_and_bases(snapshot: &Snapshot, class: &str) -> Vec<String> {
    let mut classes = vec![class.to_string()];
    let mut i = 0;
    while i < classes.len() && classes.len() < 16 {
        for (e, _) in snapshot.edges_from(&classes[i]) {
            if e.kind == EdgeKind::Inherits && snapshot.contains_unit(&e.dst) && !classes.contains(&e.dst) {
                classes.push(e.dst.clone());
            }
        }
        i += 1;
    }
    classes
}

/// Who, around the target, uses what: per used unit, how many of the target's class's other
/// methods and how many of its file's other units (the module's top level included) read, call
/// or inherit it. The target itself (and what it contains) is left out.
///
/// Uses in a body are also counted apart from uses in a header (annotations, decorators,
/// defaults): a body is what the target is missing, and a type alias that every signature of
/// the class names (`HeaderTypes`) is rarely what a body uses.
struct NeighbourUsage {
    class_users: FxHashMap<String, usize>,
    file_users: FxHashMap<String, usize>,
    class_body_users: FxHashMap<String, usize>,
    file_body_users: FxHashMap<String, usize>,
    adjacent_users: FxHashMap<String, usize>,
}

impl NeighbourUsage {
    fn of(snapshot: &Snapshot, target: &Target) -> NeighbourUsage {
        let mut class_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut file_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut adjacent_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut class_body_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut file_body_pairs: FxHashSet<(&str, &str)> = FxHashSet::default();
        let mut header_ends: FxHashMap<&str, u32> = FxHashMap::default();
        let inside_target = |src: &str| target.id.as_deref().is_some_and(|t| is_within(src, t));
        let in_class = |src: &str| target.class.as_deref().is_some_and(|c| src != c && is_within(src, c));
        if let Some(file) = snapshot.file(&target.file) {
            let adjacent = target.id.as_deref().map(|id| source_order_neighbours(&file.graph, id)).unwrap_or_default();
            for e in file.edges() {
                if !matches!(e.kind, EdgeKind::Calls | EdgeKind::References | EdgeKind::Inherits)
                    || inside_target(&e.src)
                {
                    continue;
                }
                // A lambda's uses are its owner's.
                let src = without_lambdas(&e.src);
                file_pairs.insert((e.dst.as_str(), src));
                if in_class(src) {
                    class_pairs.insert((e.dst.as_str(), src));
                }
                let header_end = *header_ends.entry(src).or_insert_with(|| match snapshot.unit(src) {
                    Some(u) if matches!(u.unit.kind, UnitKind::Function | UnitKind::Method | UnitKind::Class) => {
                        header_end_line(&u)
                    }
                    _ => 0,
                });
                if e.line.is_none_or(|line| line > header_end) {
                    file_body_pairs.insert((e.dst.as_str(), src));
                    if adjacent.contains(&src) {
                        adjacent_pairs.insert((e.dst.as_str(), src));
                    }
                    if in_class(src) {
                        class_body_pairs.insert((e.dst.as_str(), src));
                    }
                }
            }
        }
        let count = |pairs: FxHashSet<(&str, &str)>| {
            let mut m: FxHashMap<String, usize> = FxHashMap::default();
            for (dst, _) in pairs {
                *m.entry(dst.to_string()).or_default() += 1;
            }
            m
        };
        NeighbourUsage {
            class_users: count(class_pairs),
            file_users: count(file_pairs),
            class_body_users: count(class_body_pairs),
            file_body_users: count(file_body_pairs),
            adjacent_users: count(adjacent_pairs),
        }
    }

    fn class_body_users(&self, id: &str) -> usize {
        self.class_body_users.get(id).copied().unwrap_or(0)
    }

    fn file_body_users(&self, id: &str) -> usize {
        self.file_body_users.get(id).copied().unwrap_or(0)
    }

    fn adjacent_users(&self, id: &str) -> usize {
        self.adjacent_users.get(id).copied().unwrap_or(0)
    }
}

/// Which of the file's imports of a name (a class, function or variable; not a whole module)
/// were made for the target: those nothing else in the file uses, while the target's body uses
/// nothing of the repository (a body of `...` or `pass`, a blanked body, a function given as
/// text; a written body says what it uses itself). An import only the unwritten body can be
/// using is the strongest evidence the lane has: on the retrieval benchmark's first 60 tasks per
/// project 48 of the 51 it flagged were needed, and all 34 it flagged by name on 200 other
/// tasks, outside a package's `__init__.py` (there 1 of 37 was).
///
/// An import counts as used by the file's other code or the target's header when they use it or
/// one of its members (`codes.is_error(...)` is a use of `codes`). An import kept for other
/// modules is no evidence: every import of a package's `__init__.py` (its interface), one whose
/// statement carries `# noqa` (bare or with F401) or pylint's `unused-import`, and a name the
/// module's `__all__` lists. A whole module imported for the target (`from . import errors`)
/// says which module, not which of its members: none of the 11 members flagged on those 200
/// tasks was needed. The module itself is flagged instead (a candidate since the graph records
/// modules read through a name): on DevEval's tuning half, 6 of the 8 modules flagged were
/// needed.
struct ImportUse<'a> {
    /// False when no import can be evidence: the target's body uses units of the repository
    /// (then it says what it needs), or it lives in a package's `__init__.py`.
    applies: bool,
    /// What the file's other code and the target's header use, with every owner up the dotted
    /// name.
    used: FxHashSet<&'a str>,
    /// Imported units the file marks as deliberately unused.
    deliberate: FxHashSet<String>,
}

impl<'a> ImportUse<'a> {
    fn of(
        snapshot: &'a Snapshot,
        target: &Target,
        usage: &'a NeighbourUsage,
        header_uses: &FxHashSet<&'a str>,
    ) -> ImportUse<'a> {
        let body_written = target.id.as_deref().is_some_and(|id| !body_uses(snapshot, id).is_empty());
        let package_init = target.file == "__init__.py" || target.file.ends_with("/__init__.py");
        let mut import_use = ImportUse {
            applies: !body_written && !package_init,
            used: FxHashSet::default(),
            deliberate: FxHashSet::default(),
        };
        if !import_use.applies {
            return import_use;
        }
        // The target's own header explains an import as well as other code does:
        // `align: AlignMethod` is no sign the body will use `AlignMethod`.
        for id in usage.file_users.keys().map(String::as_str).chain(header_uses.iter().copied()) {
            let mut owner = id;
            loop {
                if !import_use.used.insert(owner) {
                    break; // its owners are in already
                }
                match owner_of(owner) {
                    Some(up) => owner = up,
                    None => break,
                }
            }
        }
        if let Some(file) = snapshot.file(&target.file) {
            let lines: Vec<&str> = file.text.lines().collect();
            let all = snapshot.unit(&format!("{}.__all__", target.module)).map(|u| u.file.source_of(u.unit));
            for (e, _) in snapshot.edges_from(&target.module) {
                if e.kind != EdgeKind::Imports {
                    continue;
                }
                let marked = e.line.is_some_and(|line| marked_unused(&lines, line as usize));
                let name = last_name(&e.dst);
                let exported =
                    all.is_some_and(|a| a.contains(&format!("\"{name}\"")) || a.contains(&format!("'{name}'")));
                if marked || exported {
                    import_use.deliberate.insert(e.dst.clone());
                }
            }
        }
        import_use
    }

    /// Whether the name imported as `id` was imported for the target.
    fn imported_for_target(&self, id: &str) -> bool {
        self.applies && !self.used.contains(id) && !self.deliberate.contains(id)
    }
}

/// Whether the import statement starting on 1-based `line` is marked as deliberately unused: a
/// `# noqa` comment (bare, or with F401 among its codes) or `# pylint: disable=unused-import` on
/// any of its lines (a parenthesised or continued statement spans several).
fn marked_unused(lines: &[&str], line: usize) -> bool {
    let mut depth: i32 = 0;
    for text in lines.iter().skip(line.saturating_sub(1)).take(200) {
        let (code, comment) = match text.find('#') {
            Some(i) => (&text[..i], &text[i + 1..]),
            None => (*text, ""),
        };
        let comment = comment.to_ascii_lowercase();
        if let Some(i) = comment.find("noqa") {
            let rest = comment[i + 4..].trim_start();
            match rest.strip_prefix(':') {
                Some(codes) => {
                    if codes.split(|c: char| c == ',' || c.is_whitespace()).any(|c| c.trim() == "f401") {
                        return true;
                    }
                }
                None => return true,
            }
        }
        if comment.contains("pylint:") && comment.contains("unused-import") {
            return true;
        }
        depth += code.matches('(').count() as i32 - code.matches(')').count() as i32;
        if depth <= 0 && !code.trim_end().ends_with('\\') {
            break;
        }
    }
    false
}

/// What the code of unit `id` uses and calls: its edges and its lambdas' (a lambda's code is
/// part of the unit containing it, for retrieval).
fn code_edges<'s>(snapshot: &'s Snapshot, id: &str) -> Vec<&'s fresco_graph::Edge> {
    let Some(unit) = snapshot.unit(id) else { return Vec::new() };
    unit.file.edges().filter(|e| without_lambdas(&e.src) == id).collect()
}

/// [`code_edges`] of `id` past its header: what the body of a function, method or class uses,
/// not what its annotations, defaults, decorators or bases name. Relatives and analogues of the
/// target count for what their bodies use, as its neighbours do: a signature's names say what
/// the signature says, not what a body needs.
fn body_edges<'s>(snapshot: &'s Snapshot, id: &str) -> Vec<&'s fresco_graph::Edge> {
    let header_end = match snapshot.unit(id) {
        Some(u) if matches!(u.unit.kind, UnitKind::Function | UnitKind::Method | UnitKind::Class) => {
            header_end_line(&u)
        }
        _ => 0,
    };
    code_edges(snapshot, id).into_iter().filter(|e| e.line.is_none_or(|line| line > header_end)).collect()
}

/// `id` without the lambdas it is nested in (`pkg.f` for `pkg.f.<lambda1>.<lambda1>`).
fn without_lambdas(id: &str) -> &str {
    let mut owner = id;
    while fresco_graph::is_lambda_id(owner) {
        match owner.rsplit_once('.') {
            Some((rest, _)) => owner = rest,
            None => break,
        }
    }
    owner
}

/// The functions or methods (not lambdas) defined just before and just after `id` with the same
/// owner (class or module), in source order.
fn source_order_neighbours<'g>(file: &'g fresco_graph::FileGraph, id: &str) -> Vec<&'g str> {
    let Some(target_owner) = owner_of(id) else { return Vec::new() };
    let siblings: Vec<&fresco_graph::Unit> = file
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && !u.is_lambda())
        .filter(|u| owner_of(&u.id) == Some(target_owner))
        .collect();
    let Some(at) = siblings.iter().position(|u| u.id == id) else { return Vec::new() };
    let mut out = Vec::new();
    if at > 0 {
        out.push(siblings[at - 1].id.as_str());
    }
    if let Some(next) = siblings.get(at + 1) {
        out.push(next.id.as_str());
    }
    out
}

fn words(lanes: Option<&dyn Lanes>, text: &str) -> Vec<String> {
    match lanes {
        Some(l) => l.tokens(text),
        None => text.split(|c: char| !c.is_alphanumeric()).filter(|w| w.len() > 1).map(|w| w.to_lowercase()).collect(),
    }
}

/// How close a reachable unit is to the target: its class (and bases), its file, or imported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tier {
    Class,
    /// Members of the target's class's bases.
    BaseClass,
    /// Classes the target's signature or docstring names, and their members.
    MentionedClass,
    /// What the target's class's other methods use (other classes' methods and attributes,
    /// functions of other modules): a class's methods tend to work with the same things.
    ClassNeighbourhood,
    File,
    /// What the other functions of the target's file use.
    FileNeighbourhood,
    /// A name the file imports explicitly (`from m import name`).
    ImportedName,
    /// A module of the repository the file binds to a name (`import m`, `from pkg import m`).
    ImportedModule,
    /// Members of modules the file imports, of imported classes, and of the classes the
    /// neighbourhood works with.
    Imported,
    /// Used by one of the target's analogues and reachable no other way.
    AnalogueUse,
}

/// A unit the target could use, and how it is reachable.
struct Candidate {
    id: String,
    tier: Tier,
}

fn reachable_candidates(
    snapshot: &Snapshot,
    target: &Target,
    usage: &NeighbourUsage,
    analogue_use: &AnalogueUsage,
    mentioned: &[String],
    constructors: &FxHashSet<String>,
    exclude: &FxHashSet<String>,
) -> Vec<Candidate> {
    let mut out: Vec<Candidate> = Vec::new();
    let mut seen: FxHashSet<String> = exclude.clone();
    let mut push = |id: &str, tier: Tier, out: &mut Vec<Candidate>| {
        // A module is a candidate only as one the file binds to a name.
        let rankable = snapshot.unit(id).is_some_and(|u| match tier {
            Tier::ImportedModule => u.unit.kind == UnitKind::Module,
            _ => is_code_unit(u.unit),
        });
        if rankable && seen.insert(id.to_string()) {
            out.push(Candidate { id: id.to_string(), tier });
        }
    };
    let members = |owner: &str| edge_targets(snapshot, owner, EdgeKind::Contains);
    let is_class = |id: &str| snapshot.kind_of(id) == Some(UnitKind::Class);
    // Classes the neighbourhood works with: their members come last.
    let mut used_classes: Vec<String> = Vec::new();
    // The class and its bases, with their members.
    if let Some(class) = &target.class {
        for (i, c) in class_and_bases(snapshot, class).iter().enumerate() {
            let tier = if i == 0 { Tier::Class } else { Tier::BaseClass };
            for m in members(c) {
                push(&m, tier, &mut out);
            }
        }
    }
    // Classes its signature and docstring name (`request: PreparedRequest`, ":class:`Request`"):
    // the body will work with their members.
    for c in mentioned {
        push(c, Tier::MentionedClass, &mut out);
        for m in members(c) {
            push(&m, Tier::MentionedClass, &mut out);
        }
    }
    // The constructor a returned class inherits is reached through it.
    let mut constructors: Vec<&String> = constructors.iter().collect();
    constructors.sort();
    for c in constructors {
        push(c, Tier::MentionedClass, &mut out);
    }
    if target.class.is_some() {
        let mut neighbours: Vec<&String> = usage.class_users.keys().collect();
        neighbours.sort();
        for n in neighbours {
            push(n, Tier::ClassNeighbourhood, &mut out);
            if is_class(n) {
                used_classes.push(n.clone());
            }
        }
    }
    // The file's own definitions.
    for m in members(&target.module) {
        push(&m, Tier::File, &mut out);
    }
    // What the file's other code uses.
    let mut neighbours: Vec<&String> = usage.file_users.keys().collect();
    neighbours.sort();
    for n in neighbours {
        push(n, Tier::FileNeighbourhood, &mut out);
        if is_class(n) {
            used_classes.push(n.clone());
        }
    }
    // What the file imports: imported names first, then members of imported modules and classes.
    let imports_of = |module: &str| edge_targets(snapshot, module, EdgeKind::Imports);
    let imports = imports_of(&target.module);
    let bound = modules_bound_by_name(snapshot, &target.module);
    for dst in &imports {
        match snapshot.kind_of(dst) {
            Some(UnitKind::Module) if bound.contains(dst.as_str()) => push(dst, Tier::ImportedModule, &mut out),
            Some(UnitKind::Module) | None => {}
            Some(_) => push(dst, Tier::ImportedName, &mut out),
        }
    }
    for dst in &imports {
        match snapshot.kind_of(dst) {
            Some(UnitKind::Module) => {
                for m in members(dst) {
                    push(&m, Tier::Imported, &mut out);
                }
                // And what it re-exports: `import click` reaches `click.pause`, defined in
                // `click.termui` and imported by the package's `__init__` (`push` leaves out the
                // modules and external names it imports).
                for name in imports_of(dst) {
                    push(&name, Tier::Imported, &mut out);
                }
            }
            Some(UnitKind::Class) => used_classes.push(dst.clone()),
            _ => {}
        }
    }
    for c in classes_named_by_attributes(snapshot, target) {
        push(&c, Tier::Imported, &mut out);
        used_classes.push(c);
    }
    for c in used_classes {
        for m in members(&c) {
            push(&m, Tier::Imported, &mut out);
        }
    }
    // A module not written yet imports nothing so far: it can reach the modules beside it (its
    // package's), a relative import away.
    if snapshot.file(&target.file).is_none() {
        let dir = dir_of(&target.file);
        let mut siblings: Vec<&str> =
            snapshot.files().filter(|f| dir_of(&f.graph.path) == dir).map(|f| f.graph.module.as_str()).collect();
        siblings.sort_unstable();
        for module in siblings {
            for m in members(module) {
                push(&m, Tier::Imported, &mut out);
            }
        }
    }
    // What code like the target uses, wherever it lives.
    for used in &analogue_use.order {
        push(used, Tier::AnalogueUse, &mut out);
    }
    out
}

/// The modules `module`'s imports bind to a name (`import m`, `import m as x`, `from pkg import
/// m`): not one a star import only reads names from (`from m import *`), nor `module` itself.
fn modules_bound_by_name<'s>(snapshot: &'s Snapshot, module: &str) -> FxHashSet<&'s str> {
    let Some(file) = snapshot.unit(module).map(|u| u.file) else { return FxHashSet::default() };
    let lines: Vec<&str> = file.text.lines().collect();
    let is_star = |line: Option<u32>| {
        line.and_then(|l| lines.get((l as usize).saturating_sub(1)))
            .is_some_and(|text| text.split('#').next().unwrap_or("").trim_end().ends_with("import *"))
    };
    snapshot
        .edges_from(module)
        .into_iter()
        .map(|(e, _)| e)
        .filter(|e| e.kind == EdgeKind::Imports && e.dst != module && !is_star(e.line))
        .filter(|e| snapshot.kind_of(&e.dst) == Some(UnitKind::Module))
        .map(|e| e.dst.as_str())
        .collect()
}

/// The classes defined in the target's directory that its class's attributes are named after:
/// an attribute `self.connection` whose value the graph cannot follow (set from a parameter, by
/// a caller, through `setattr`) most often holds an instance of the package's `EC2Connection`
/// (the class name ends with the attribute's name, underscores dropped). Every variable member
/// of the class and its bases counts. An attribute name matching more than
/// [`MAX_CLASSES_PER_ATTRIBUTE`] classes says nothing.
fn classes_named_by_attributes(snapshot: &Snapshot, target: &Target) -> Vec<String> {
    let Some(class) = target.class.as_deref() else { return Vec::new() };
    let mut names: Vec<String> = Vec::new();
    for c in class_and_bases(snapshot, class) {
        for m in edge_targets(snapshot, &c, EdgeKind::Contains) {
            if snapshot.kind_of(&m) != Some(UnitKind::Variable) {
                continue;
            }
            let name: String = last_name(&m).chars().filter(|c| *c != '_').flat_map(char::to_lowercase).collect();
            if name.len() >= 4 && !names.contains(&name) {
                names.push(name);
            }
        }
    }
    if names.is_empty() {
        return Vec::new();
    }
    let dir = dir_of(&target.file);
    // Each class with its name lowercased once.
    let classes: Vec<(&str, String)> = snapshot
        .files()
        .filter(|f| dir_of(&f.graph.path) == dir)
        .flat_map(|f| {
            f.graph
                .units
                .iter()
                .filter(move |u| u.kind == UnitKind::Class && owner_of(&u.id) == Some(f.graph.module.as_str()))
        })
        .map(|u| u.id.as_str())
        .filter(|id| *id != class)
        .map(|id| (id, last_name(id).to_lowercase()))
        .collect();
    let mut out: Vec<String> = Vec::new();
    for name in &names {
        let matching: Vec<&str> =
            classes.iter().filter(|(_, lower)| lower.ends_with(name.as_str())).map(|(id, _)| *id).collect();
        if matching.len() <= MAX_CLASSES_PER_ATTRIBUTE {
            for id in matching {
                if !out.iter().any(|o| o == id) {
                    out.push(id.to_string());
                }
            }
        }
    }
    out.sort();
    out
}

const MAX_CLASSES_PER_ATTRIBUTE: usize = 3;

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
    /// When the unit's file changed on disk after the snapshot the context was assembled from
    /// (the daemon's freshness `allow`); the text marks the file's header too.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stale: bool,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct ContextBlock {
    /// The unit the context was assembled for, when it exists (for `context for "…" in FILE`,
    /// the unit of that name already in FILE, if any).
    pub target: Option<String>,
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
/// the whole unit's source. In the text each of the two parts is grouped by file (the target's
/// own file last, closest to where the code goes) and in source order within a file.
///
/// The budget covers the whole text, headers and comment lines included: each unit is counted
/// with its comment line, and each file header when its first unit is taken. The pieces are
/// separated by line breaks, where the tokenizer splits, so the text's count is their sum (with
/// `chars/4`, the sum rounds up per piece: at least the whole's).
///
/// Dependencies are chosen by value per token, not strictly in rank order: how likely the unit
/// at dependency rank r is needed falls as 1/r (0.7/r on the retrieval benchmark, ranks 1 to
/// 50), so a long unit at rank 4 is worth less than several short ones at ranks 5 to 12 that fit
/// in its place. The i-th dependency's density is (1/i) / its length; the dependencies are
/// taken in that order while they fit (in-context recall 0.826 taking them in rank order, 0.860
/// by density, simulated on the benchmark's trace). Examples then fill what is left, in order.
/// The target itself, units containing it (its class) and units inside it are never included:
/// they would repeat the code being written. `units` lists what was chosen in ranking order.
pub fn assemble(
    snapshot: &Snapshot,
    lanes: Option<&dyn Lanes>,
    target: &Target,
    fused: &[Fused],
    dependencies: &FxHashSet<String>,
    budget: usize,
    is_stale: Option<&dyn Fn(&str) -> bool>,
) -> ContextBlock {
    let counted_by_tokenizer = lanes.and_then(|l| l.count_tokens("x")).is_some();
    let count = |text: &str| -> usize {
        match lanes.and_then(|l| l.count_tokens(text)) {
            Some(n) => n,
            None => text.chars().count().div_ceil(4),
        }
    };
    let stale = |file: &str| is_stale.is_some_and(|f| f(file));
    let inside = |outer: &fresco_graph::UnitRef<'_>, inner: &fresco_graph::UnitRef<'_>| {
        outer.file.graph.path == inner.file.graph.path
            && outer.unit.start_byte <= inner.unit.start_byte
            && inner.unit.end_byte <= outer.unit.end_byte
    };
    let target_unit = target.id.as_ref().and_then(|id| snapshot.unit(id));
    let overlaps_target =
        |u: &fresco_graph::UnitRef<'_>| target_unit.as_ref().is_some_and(|t| inside(u, t) || inside(t, u));
    // Candidates in ranking order: code units other than the target (and what contains it or is
    // inside it), each once.
    let mut seen: FxHashSet<&str> = FxHashSet::default();
    let ranked: Vec<(fresco_graph::UnitRef<'_>, &'static str)> = fused
        .iter()
        .filter(|f| dependencies.contains(&f.id))
        .map(|f| (f, "dependency"))
        .chain(fused.iter().filter(|f| !dependencies.contains(&f.id)).map(|f| (f, "example")))
        .filter(|(f, _)| Some(&f.id) != target.id.as_ref() && seen.insert(f.id.as_str()))
        .filter_map(|(f, role)| snapshot.unit(&f.id).filter(|u| is_code_unit(u.unit)).map(|u| (u, role)))
        .filter(|(u, _)| !overlaps_target(u))
        .collect();
    // What a unit and a file header put into the text.
    let unit_comment = |u: &fresco_graph::UnitRef<'_>, role: &str| {
        format!("# {} lines {}-{} ({role})\n", u.unit.id, u.unit.start_line, u.unit.end_line)
    };
    let file_header = |u: &fresco_graph::UnitRef<'_>| {
        let (path, revision) = (&u.file.graph.path, u.file.graph.revision);
        // A file that does not parse as written says so: its units may be incomplete.
        let broken = match u.file.graph.parse_errors {
            0 => String::new(),
            1 => "; 1 parse error".to_string(),
            n => format!("; {n} parse errors"),
        };
        if stale(path) {
            format!(
                "# file: {path} (revision {revision}{broken}; STALE: changed on disk after version {})\n",
                snapshot.version()
            )
        } else {
            format!("# file: {path} (revision {revision}{broken})\n")
        }
    };
    // The order in which they are considered: dependencies by density, then examples by rank.
    let n_deps = ranked.iter().filter(|(_, role)| *role == "dependency").count();
    let mut consider: Vec<usize> = (0..ranked.len()).collect();
    consider[..n_deps].sort_by(|&a, &b| {
        let density = |i: usize| {
            let u = &ranked[i].0;
            let length = (u.unit.end_byte.saturating_sub(u.unit.start_byte)).max(1) as f64;
            1.0 / ((i + 1) as f64 * length)
        };
        density(b).partial_cmp(&density(a)).unwrap_or(std::cmp::Ordering::Equal).then(a.cmp(&b))
    });
    let mut taken: Vec<usize> = Vec::new();
    let mut cut_ranks: Vec<usize> = Vec::new();
    let mut tokens_of: FxHashMap<usize, usize> = FxHashMap::default();
    let mut headers: FxHashMap<(&'static str, &str), usize> = FxHashMap::default();
    let mut used = 0usize;
    // Two passes: a unit that contains units chosen before it takes their place and gives their
    // tokens back, so what the first pass cut may fit in the second.
    for pass in 0..2 {
        let order = if pass == 0 { consider.clone() } else { std::mem::take(&mut cut_ranks) };
        for i in order {
            let (u, role) = &ranked[i];
            // Once the budget is (nearly) spent, the rest is cut without counting its tokens.
            if budget.saturating_sub(used) < 24 {
                cut_ranks.push(i);
                continue;
            }
            // A unit nested in one already chosen is already in the text.
            if taken.iter().any(|&t| inside(&ranked[t].0, u)) {
                continue;
            }
            let tokens = count(&unit_comment(u, role)) + count(u.file.display_source_of(u.unit));
            let header_key = (*role, u.file.graph.path.as_str());
            let header = if headers.contains_key(&header_key) { 0 } else { count(&file_header(u)) };
            // Units already chosen inside this one leave the text with it in: their tokens return.
            let absorbed: Vec<usize> = taken.iter().copied().filter(|&t| inside(u, &ranked[t].0)).collect();
            let returned: usize = absorbed.iter().map(|t| tokens_of.get(t).copied().unwrap_or(0)).sum();
            if (used + tokens + header).saturating_sub(returned) > budget {
                cut_ranks.push(i);
                continue;
            }
            used = (used + tokens + header).saturating_sub(returned);
            taken.retain(|t| !absorbed.contains(t));
            for t in &absorbed {
                tokens_of.remove(t);
            }
            if header > 0 {
                headers.insert(header_key, header);
            }
            tokens_of.insert(i, tokens);
            taken.push(i);
        }
    }
    // A unit chosen before the unit that contains it was chosen is in the text twice: drop it.
    let contained: FxHashSet<usize> = taken
        .iter()
        .copied()
        .filter(|&a| taken.iter().any(|&b| b != a && inside(&ranked[b].0, &ranked[a].0)))
        .collect();
    taken.retain(|i| !contained.contains(i));
    // What the text holds through a containing unit was not cut.
    cut_ranks.retain(|&c| !taken.iter().any(|&t| inside(&ranked[t].0, &ranked[c].0)));
    taken.sort_unstable();
    // The text: dependencies, then examples; in each, files with the target's file last, units in
    // source order within a file.
    let render = |taken: &[usize]| -> (String, usize) {
        let mut text = String::new();
        let mut tokens = 0;
        for part in ["dependency", "example"] {
            let mut by_file: BTreeMap<(bool, &str), Vec<usize>> = BTreeMap::new();
            for &i in taken.iter().filter(|&&i| ranked[i].1 == part) {
                let path = ranked[i].0.file.graph.path.as_str();
                by_file.entry((path == target.file, path)).or_default().push(i);
            }
            for (_, mut units) in by_file {
                units.sort_by_key(|&i| ranked[i].0.unit.start_line);
                let header = file_header(&ranked[units[0]].0);
                tokens += count(&header);
                text.push_str(&header);
                for i in units {
                    let (u, role) = &ranked[i];
                    tokens += tokens_of.get(&i).copied().unwrap_or(0);
                    text.push_str(&unit_comment(u, role));
                    text.push_str(u.file.display_source_of(u.unit));
                    text.push_str("\n\n");
                }
            }
        }
        (text, tokens)
    };
    // At most what was counted while choosing (units dropped since only lower it).
    let (text, tokens) = render(&taken);
    cut_ranks.sort_unstable();
    let cut: Vec<String> = cut_ranks.iter().map(|&i| ranked[i].0.unit.id.clone()).collect();
    let chosen: Vec<ContextUnit> = taken
        .iter()
        .map(|&i| {
            let (u, role) = &ranked[i];
            ContextUnit {
                name: u.unit.id.clone(),
                role,
                file: u.file.graph.path.clone(),
                start_line: u.unit.start_line,
                end_line: u.unit.end_line,
                revision: u.file.graph.revision.to_string(),
                tokens: tokens_of.get(&i).copied().unwrap_or(0),
                stale: stale(&u.file.graph.path),
            }
        })
        .collect();
    ContextBlock {
        target: target.id.clone(),
        budget,
        tokens,
        token_rule: if counted_by_tokenizer { "minilm" } else { "chars/4" },
        units: chosen,
        cut,
        text,
    }
}

/// The units a target depends on as the graph sees them: the graph lane's first `k` (its
/// prediction of what the target needs; the rest of its list only deepens the fusion). Everything
/// else in the fused ranking is a usage example.
pub fn dependency_set(snapshot: &Snapshot, target: &Target, graph_ranked: &[String], k: usize) -> FxHashSet<String> {
    let mut deps: FxHashSet<String> = graph_ranked.iter().take(k.max(1)).cloned().collect();
    if let Some(id) = &target.id {
        deps.remove(id);
    }
    deps.retain(|id| snapshot.unit(id).is_some());
    deps
}

/// The ranking a `context` answer returns: the dependencies in the graph lane's order, then the
/// usage examples in fused order (the assembled text follows the same order). Every unit keeps
/// its fused score and lane ranks.
///
/// Why not fused order among the dependencies too: the graph lane already weighs the text lanes'
/// evidence for a dependency (word and dense affinity, what the target's analogues use); fusing
/// again by text similarity lifts look-alike siblings over what the body calls. On the retrieval
/// benchmark fused order gave Recall@10 0.569, the graph lane's order 0.647 (Recall@50 0.907 for
/// both: the same set). A dependency only a text lane returned is not one: it is an example.
pub fn context_order(fused: Vec<Fused>, graph_ranked: &[String], dependencies: &FxHashSet<String>) -> Vec<Fused> {
    let (deps, examples): (Vec<Fused>, Vec<Fused>) = fused.into_iter().partition(|f| dependencies.contains(&f.id));
    let mut by_id: FxHashMap<String, Fused> = deps.into_iter().map(|f| (f.id.clone(), f)).collect();
    let mut ordered: Vec<Fused> = graph_ranked.iter().filter_map(|id| by_id.remove(id)).collect();
    // Dependencies the graph list does not name (none when it is the list they came from) keep
    // their fused order.
    let mut rest: Vec<Fused> = by_id.into_values().collect();
    rest.sort_by(|a, b| {
        b.score.partial_cmp(&a.score).unwrap_or(std::cmp::Ordering::Equal).then_with(|| a.id.cmp(&b.id))
    });
    ordered.extend(rest);
    ordered.extend(examples);
    ordered
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

#[cfg(test)]
mod tests {
    use super::*;

    fn list(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn text_lanes_alone_fuse_as_plain_rrf() {
        let fused = fuse(&[(Lane::Bm25, list(&["a", "b", "c"])), (Lane::Dense, list(&["b", "a", "d"]))]);
        let order: Vec<&str> = fused.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(order, ["a", "b", "c", "d"]);
        let expected = 1.0 / 61.0 + 1.0 / 62.0;
        assert!((fused[0].score - expected).abs() < 1e-12);
        assert_eq!(fused[1].ranks.get("bm25"), Some(&2));
        assert_eq!(fused[1].ranks.get("dense"), Some(&1));
    }

    #[test]
    fn two_agreeing_text_lanes_count_as_one_vote_against_the_graph_lane() {
        // Flat fusion would put "look_alike" (2nd in both text lanes) above "needed" (1st in
        // the graph lane only); grouped by evidence, the graph's first choice keeps its place.
        let lanes = [
            (Lane::Bm25, list(&["x", "look_alike", "y"])),
            (Lane::Dense, list(&["z", "look_alike", "w"])),
            (Lane::Graph, list(&["needed", "q", "r"])),
        ];
        let fused = fuse(&lanes);
        let pos = |id: &str| fused.iter().position(|f| f.id == id);
        assert!(pos("needed") < pos("look_alike"), "{:?}", fused.iter().map(|f| &f.id).collect::<Vec<_>>());
        // Provenance: every lane's own rank is kept.
        let la = &fused[pos("look_alike").unwrap_or(0)];
        assert_eq!(la.ranks.get("bm25"), Some(&2));
        assert_eq!(la.ranks.get("dense"), Some(&2));
        assert_eq!(la.ranks.get("graph"), None);
    }

    #[test]
    fn duplicates_in_a_lane_count_once_and_ties_break_by_best_rank() {
        let fused = fuse(&[(Lane::Graph, list(&["a", "a", "b"]))]);
        assert_eq!(fused.len(), 2);
        assert_eq!(fused[0].id, "a");
        assert_eq!(fused[1].ranks.get("graph"), Some(&3));
    }

    #[test]
    fn context_order_puts_dependencies_first_in_graph_order_then_examples_in_fused_order() {
        // The text lanes favour d1 (a look-alike); the graph lane ranks d2 first.
        let graph = list(&["d2", "d1", "x"]);
        let lanes = [
            (Lane::Bm25, list(&["e1", "d1", "e2", "d2"])),
            (Lane::Dense, list(&["d1", "e1"])),
            (Lane::Graph, graph.clone()),
        ];
        let fused = fuse(&lanes);
        let deps: FxHashSet<String> = ["d1", "d2"].iter().map(|s| s.to_string()).collect();
        assert_eq!(fused[0].id, "d1", "fused order differs from the graph lane's here");
        let examples_in_fused_order: Vec<String> =
            fused.iter().filter(|f| !deps.contains(&f.id)).map(|f| f.id.clone()).collect();
        let order = context_order(fused, &graph, &deps);
        let ids: Vec<String> = order.iter().map(|f| f.id.clone()).collect();
        assert_eq!(ids[..2], ["d2", "d1"]);
        assert_eq!(ids[2..], examples_in_fused_order[..]);
        // Provenance survives the reordering.
        assert_eq!(order[0].ranks.get("graph"), Some(&1));
        assert_eq!(order[0].ranks.get("bm25"), Some(&4));
    }

    #[test]
    fn the_header_ends_before_the_docstring() {
        assert_eq!(def_header("def f(a: A) -> B:\n    \"\"\"Uses C.\"\"\""), Some("def f(a: A) -> B"));
        assert_eq!(def_header("@d(x)\ndef f(a=\")\"):\n    \"\"\"Doc (C).\"\"\""), Some("@d(x)\ndef f(a=\")\")"));
        assert_eq!(def_header("class C:"), None);
        // A unit's stored signature has no colon; its docstring follows.
        assert_eq!(def_header("def f(a: A) -> B\nUses C."), Some("def f(a: A) -> B"));
        assert_eq!(return_annotation("def f() -> Dict[\n    str, B\n]\nReturns C."), Some("Dict[\n    str, B\n]"));
    }

    #[test]
    fn the_first_parameter_is_the_defs_not_a_decorators() {
        assert_eq!(first_parameter("def f(self, x):"), Some("self"));
        assert_eq!(first_parameter("@app.route(\"/\")\ndef index(cls):"), Some("cls"));
        assert_eq!(first_parameter("async def f(\n    self,\n):"), Some("self"));
        assert_eq!(first_parameter("def f():"), None);
        assert_eq!(first_parameter("x = (1, 2)"), None);
    }

    #[test]
    fn the_return_annotation_is_read_past_brackets_and_strings_in_the_parameters() {
        assert_eq!(return_annotation("def send(self, r: Request) -> Response:"), Some("Response"));
        assert_eq!(
            return_annotation("async def f(sep=\"->\", p=(1, 2)) -> t.Optional[\"Style\"]"),
            Some("t.Optional[\"Style\"]")
        );
        assert_eq!(
            return_annotation("@property\ndef f(\n    self,\n) -> dict[str, t.Any]:\n    \"\"\"Doc: -> X.\"\"\""),
            Some("dict[str, t.Any]")
        );
        assert_eq!(return_annotation("def f(self):\n    \"\"\"Returns -> Response.\"\"\""), None);
        assert_eq!(return_annotation("def f(s='a)b') -> int"), Some("int"));
        assert_eq!(return_annotation("no function here"), None);
    }

    #[test]
    fn namesakes_are_equal_up_to_leading_underscores_and_never_dunders() {
        assert!(are_namesakes("send", "send"));
        assert!(are_namesakes("_get_renderable", "get_renderable"));
        assert!(are_namesakes("x", "__x"));
        assert!(!are_namesakes("__init__", "__init__"));
        assert!(!are_namesakes("__init__", "init"));
        assert!(!are_namesakes("send", "sender"));
        assert!(!are_namesakes("_", ""));
    }

    #[test]
    fn identifiers_as_written_and_last_names() {
        let ids = identifiers_in(
            "def send(self, request: PreparedRequest, timeout=3) -> 'Response':\n    \"Uses ``self.max_retries``.\"",
        );
        for expected in ["send", "self", "request", "PreparedRequest", "timeout", "Response", "max_retries", "Uses"] {
            assert!(ids.contains(expected), "{expected} missing from {ids:?}");
        }
        assert!(!ids.contains("3"), "numbers are not identifiers");
        assert_eq!(last_name("pkg.Session.timeout"), "timeout");
        assert_eq!(last_name("pkg.helper#2"), "helper");
    }

    #[test]
    fn word_rarity_prefers_rare_shared_words() {
        let set = |ws: &[&str]| ws.iter().map(|w| w.to_string()).collect::<FxHashSet<String>>();
        let cands = [set(&["self", "timeout"]), set(&["self", "headers"]), set(&["self", "url"])];
        let rarity = WordRarity::over(&cands);
        let target = set(&["self", "timeout"]);
        let a = rarity.affinity(&cands[0], &target);
        let b = rarity.affinity(&cands[1], &target);
        assert!(a > b && b > 0.0, "{a} {b}");
        assert!((rarity.weight("timeout") - 1.0).abs() < 1e-12);
    }

    /// BM25 answers only once the dense lane has started: run one after the other, the lanes
    /// would wait for each other until BM25 gives up.
    struct DenseFirst {
        dense_started: std::sync::Mutex<Option<std::sync::mpsc::Sender<()>>>,
        bm25_may_answer: std::sync::Mutex<std::sync::mpsc::Receiver<()>>,
    }

    impl Lanes for DenseFirst {
        fn bm25(&self, _: &str, _: usize) -> Result<LaneHits, LaneDown> {
            let may_answer = self.bm25_may_answer.lock().unwrap_or_else(|p| p.into_inner());
            match may_answer.recv_timeout(std::time::Duration::from_secs(10)) {
                Ok(()) => Ok(LaneHits { ids: Vec::new(), version: 0, partial: None }),
                Err(_) => Err(LaneDown { reason: "waited for the dense lane in vain".into() }),
            }
        }
        fn dense(&self, _: &str, _: usize) -> Result<LaneHits, LaneDown> {
            if let Some(tx) = self.dense_started.lock().unwrap_or_else(|p| p.into_inner()).take() {
                tx.send(()).ok();
            }
            Ok(LaneHits { ids: Vec::new(), version: 0, partial: None })
        }
        fn tokens(&self, text: &str) -> Vec<String> {
            text.split_whitespace().map(str::to_lowercase).collect()
        }
        fn count_tokens(&self, _: &str) -> Option<usize> {
            None
        }
        fn dense_similarities(&self, _: &str, _: &[&str]) -> Option<Vec<Option<f32>>> {
            None
        }
    }

    #[test]
    fn bm25_answers_while_the_dense_lane_runs() {
        let (tx, rx) = std::sync::mpsc::channel();
        let lanes =
            DenseFirst { dense_started: std::sync::Mutex::new(Some(tx)), bm25_may_answer: std::sync::Mutex::new(rx) };
        let mut health = BTreeMap::new();
        let ranked = run_text_lanes(
            &Snapshot::empty(),
            Some(&lanes),
            &[Lane::Bm25, Lane::Dense, Lane::Graph],
            "retry",
            10,
            &mut health,
        );
        assert_eq!(health.get("bm25").map(|h| h.status), Some("ready"), "{:?}", health.get("bm25"));
        assert_eq!(health.get("dense").map(|h| h.status), Some("ready"));
        // The lanes keep the order they were asked in.
        let order: Vec<Lane> = ranked.iter().map(|(lane, _)| *lane).collect();
        assert_eq!(order, [Lane::Bm25, Lane::Dense]);
    }

    #[test]
    fn an_import_statement_is_marked_unused_by_noqa_f401_or_pylint_on_any_of_its_lines() {
        let text = "import os  # noqa\n\
                    import sys  # noqa: E501\n\
                    from a import (  # noqa: E402, F401\n    b,\n)\n\
                    from c import (\n    d,  # noqa:F401\n)\n\
                    from e import f  # pylint: disable=unused-import\n\
                    from g import (\n    h,\n)\n\
                    x = 1  # noqa\n";
        let lines: Vec<&str> = text.lines().collect();
        let marked: Vec<usize> = (1..=lines.len()).filter(|&l| marked_unused(&lines, l)).collect();
        // Line 2 is marked for another rule; the statement on line 10 ends before line 13's noqa.
        assert_eq!(marked, [1, 3, 6, 7, 9, 13]);
    }
}

/// The measuring tools (bench/retrieval-fit) rank the trace's candidates with a copy of the
/// weights, `STATED` in fit.py: it must be the score the lane uses, feature for feature.
#[cfg(test)]
mod weights_match_the_measuring_tools {
    use super::CandidateFeatures;

    /// `STATED = { "name": weight, ... }` of fit.py.
    fn stated_weights() -> Vec<(String, f64)> {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../bench/retrieval-fit/fit.py");
        let text = std::fs::read_to_string(path).expect("bench/retrieval-fit/fit.py is in the repository");
        let start = text.find("STATED = {").expect("fit.py defines STATED");
        let body = &text[start + "STATED = {".len()..];
        let body = &body[..body.find('}').expect("STATED's closing brace")];
        // One `"name": number` per comma; fit.py keeps the table free of comments for this.
        body.split(',')
            .map(str::trim)
            .filter(|entry| !entry.is_empty())
            .map(|entry| {
                let (name, weight) = entry
                    .split_once(':')
                    .unwrap_or_else(|| panic!("fit.py's STATED: `{entry}` is not `\"name\": weight`"));
                let weight = weight
                    .trim()
                    .parse()
                    .unwrap_or_else(|_| panic!("fit.py's STATED: the weight of `{entry}` is not a plain number"));
                (name.trim().trim_matches('"').to_string(), weight)
            })
            .collect()
    }

    /// The features by name, as the trace writes them.
    fn feature_names() -> Vec<String> {
        let json = serde_json::to_value(CandidateFeatures::default()).expect("features serialise");
        json.as_object().expect("an object").keys().cloned().collect()
    }

    fn with_one(name: &str) -> CandidateFeatures {
        let mut json = serde_json::to_value(CandidateFeatures::default()).expect("features serialise");
        json[name] = serde_json::json!(1.0);
        serde_json::from_value(json).expect("features deserialise")
    }

    #[test]
    fn fit_py_states_the_weights_the_score_uses() {
        let stated = stated_weights();
        let mut names: Vec<&str> = stated.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        let mut features = feature_names();
        features.sort_unstable();
        assert_eq!(names, features, "fit.py's STATED names every feature, and nothing else");
        for (name, weight) in &stated {
            let score = with_one(name).score();
            assert!((score - weight).abs() < 1e-9, "{name}: the score weighs it {score}, fit.py {weight}");
        }
    }
}
