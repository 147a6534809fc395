//! The answer to a `context` request: its ranking (dependencies in the graph lane's order, then
//! examples in fused order) and the text assembled from it within a token budget.
//!
//! Separate from the ranking: it takes the lanes' lists as given and only orders and chooses
//! what fits.

use std::collections::BTreeMap;

use fresco_graph::Snapshot;
use rustc_hash::{FxHashMap, FxHashSet};

use super::ids::{is_code_unit, lies_within};
use super::target::Target;
use super::{Fused, Lanes};

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
    /// per four characters of the whole text, rounded up) when the tokenizer is not available.
    pub token_rule: &'static str,
    pub units: Vec<ContextUnit>,
    /// Units that ranked high but did not fit the budget.
    pub cut: Vec<String>,
    pub text: String,
    /// When the budget fits no unit at all: the cut unit needing the fewest tokens (with its
    /// comment line and file header), and how many, so the answer can say what would fit.
    pub smallest_cut: Option<(String, usize)>,
}

/// What follows each unit's source in the text.
const UNIT_SEPARATOR: &str = "\n\n";

/// Assembles context within `budget` tokens: dependencies first, then usage examples, each as
/// the whole unit's source. In the text each of the two parts is grouped by file (the target's
/// own file last, closest to where the code goes) and in source order within a file.
///
/// The budget covers the whole text, headers and comment lines included: each unit is counted
/// with its comment line and the blank line after it, and each file header when its first unit
/// is taken. The pieces are separated by line breaks, where the tokenizer splits, so the text's
/// count is their sum. With `chars/4` the pieces are rounded up one by one while choosing, which
/// is at least the whole's count (so the budget holds), and `tokens` is the whole's.
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
    // One rule for the whole context: a tokenizer loaded while it is assembled (a model that
    // arrived meanwhile) is used from the next context on.
    let count = |text: &str| -> usize {
        match lanes.filter(|_| counted_by_tokenizer).and_then(|l| l.count_tokens(text)) {
            Some(n) => n,
            None => text.chars().count().div_ceil(4),
        }
    };
    let stale = |file: &str| is_stale.is_some_and(|f| f(file));
    let inside = |outer: &fresco_graph::UnitRef<'_>, inner: &fresco_graph::UnitRef<'_>| lies_within(inner, outer);
    let target_unit = target.id.as_ref().and_then(|id| snapshot.unit(id));
    // A method not written yet has no unit, but its class does: the class and the classes
    // around it would repeat the code the method is written into.
    let encloses_new_method = |id: &str| {
        target.id.is_none()
            && target
                .class
                .as_deref()
                .is_some_and(|c| c == id || c.strip_prefix(id).is_some_and(|r| r.starts_with('.')))
    };
    let overlaps_target = |u: &fresco_graph::UnitRef<'_>| {
        target_unit.as_ref().is_some_and(|t| inside(u, t) || inside(t, u)) || encloses_new_method(&u.unit.id)
    };
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
        let mut broken = match u.file.graph.parse_errors {
            0 => String::new(),
            1 => "; 1 parse error".to_string(),
            n => format!("; {n} parse errors"),
        };
        if u.file.graph.resolution_cut {
            broken.push_str("; name resolution cut short: some calls unresolved");
        }
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
            // Once the budget is (nearly) spent, the rest is cut without counting its tokens
            // (a small budget with nothing chosen yet is counted against: a unit may fit it).
            if used > 0 && budget.saturating_sub(used) < 24 {
                cut_ranks.push(i);
                continue;
            }
            // A unit nested in one already chosen is already in the text.
            if taken.iter().any(|&t| inside(&ranked[t].0, u)) {
                continue;
            }
            let tokens =
                count(&unit_comment(u, role)) + count(u.file.display_source_of(u.unit)) + count(UNIT_SEPARATOR);
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
                    text.push_str(UNIT_SEPARATOR);
                }
            }
        }
        (text, tokens)
    };
    // At most what was counted while choosing (units dropped since only lower it). One token per
    // four characters is stated of the text: its pieces rounded up one by one count more.
    let (text, tokens) = render(&taken);
    let tokens = if counted_by_tokenizer { tokens } else { text.chars().count().div_ceil(4) };
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
    // Counted only for an empty text: the units were cut without counting once the budget was
    // nearly spent.
    let smallest_cut = if taken.is_empty() {
        cut_ranks
            .iter()
            .map(|&i| {
                let (u, role) = &ranked[i];
                let tokens = count(&file_header(u))
                    + count(&unit_comment(u, role))
                    + count(u.file.display_source_of(u.unit))
                    + count(UNIT_SEPARATOR);
                (tokens, u.unit.id.clone())
            })
            .min()
            .map(|(tokens, id)| (id, tokens))
    } else {
        None
    };
    ContextBlock {
        target: target.id.clone(),
        budget,
        tokens,
        token_rule: if counted_by_tokenizer { "minilm" } else { "chars/4" },
        units: chosen,
        cut,
        text,
        smallest_cut,
    }
}

/// The units a target depends on as the graph sees them: the graph lane's first `k` (its
/// prediction of what the target needs; the rest of its list only deepens the fusion), the target
/// itself among them when the lane ranks it there (a call to itself). Everything else in the fused
/// ranking is a usage example.
pub fn dependency_set(snapshot: &Snapshot, graph_ranked: &[String], k: usize) -> FxHashSet<String> {
    let mut deps: FxHashSet<String> = graph_ranked.iter().take(k.max(1)).cloned().collect();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::Lane;
    use crate::retrieve::fuse;
    use crate::retrieve::test_support::list;

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
}
