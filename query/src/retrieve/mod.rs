//! Hybrid retrieval: lexical (BM25), dense and graph lanes fused by reciprocal rank, and
//! token-budgeted context assembly.
//!
//! The lexical and dense lanes live outside this crate (they own indexes derived from the
//! graph); they are reached through the [`Lanes`] trait. The graph lane is computed here, over the
//! snapshot: for a target, the units it can actually reach, ranked for the target.
//!
//! This file holds the lanes' interface, the run of the text lanes and the fusion of the
//! rankings. The rest is split by job, so that each part can be read without the others:
//! - `target`: what a request's target is, resolved against the snapshot, and how its `def`
//!   header reads; `class_guess`: which class of its file a method given as text goes in;
//! - `candidates`: the units the graph lane may rank for a target, and how each is reachable;
//! - `neighbours`, `relatives` and `affinity`: the evidence about each candidate: what the code
//!   around the target uses, what code like the target uses, and how near its words and vector
//!   are to the target's;
//! - `graph_lane`: the graph lane itself: the candidates' features and the weights that score
//!   them;
//! - `context`: the context's ranking and its token-budgeted text;
//! - `ids`: small helpers on unit ids, paths and edges that the others share.

use std::collections::BTreeMap;
use std::sync::Arc;

use fresco_graph::Snapshot;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::ast::Lane;

mod affinity;
mod candidates;
mod class_guess;
mod context;
mod graph_lane;
mod ids;
mod neighbours;
mod relatives;
mod target;

pub use context::{ContextBlock, ContextUnit, assemble, context_order, dependency_set};
pub use graph_lane::{CandidateFeatures, candidate_features, graph_lane};
pub use ids::is_test_path;
pub(crate) use ids::lies_within;
pub use relatives::{ANALOGUES, analogues};
pub use target::{Target, resolve_target};

/// The reciprocal-rank-fusion constant (Cormack et al.'s 60), fixed in configuration and not
/// tuned on outcomes.
pub const RRF_K: f64 = 60.0;

/// What a lane's answer was ranked from, to tell the hits that stood on a unit's earlier text.
pub trait IndexedText: Send + Sync + std::fmt::Debug {
    /// Whether the lane ranked unit `id` by text other than its text in `snapshot` (its index
    /// is behind the snapshot, and the unit changed since).
    fn ranked_by_older_text(&self, snapshot: &Snapshot, id: &str) -> bool;

    /// For each of `ids`, whether the lane's index holds no text of it at all (a unit added
    /// since the index was built, or not embedded yet): the lane could not rank it, so its
    /// silence says nothing about it.
    fn unseen(&self, ids: &[&str]) -> Vec<bool> {
        vec![false; ids.len()]
    }
}

/// Per text lane, the units other lanes listed that its index holds no text of (see
/// [`IndexedText::unseen`]); empty when every lane is up to date.
pub type Unseen = BTreeMap<Lane, FxHashSet<String>>;

/// One lane's ranked answer and the graph version its index reflects.
#[derive(Clone, Debug, Default)]
pub struct LaneHits {
    pub ids: Vec<String>,
    pub version: u64,
    /// Set when the lane's index covers only part of that version (e.g. embedding in progress).
    pub partial: Option<String>,
    /// What the answer leaves out of the query, when it does (the lexical lane uses a long
    /// query's first words): reported as the lane's `reason`.
    pub note: Option<String>,
    /// What the hits were ranked from (`None`: the snapshot's own text).
    pub indexed: Option<Arc<dyn IndexedText>>,
}

/// Why a lane did not answer.
#[derive(Clone, Debug)]
pub struct LaneDown {
    pub reason: String,
    /// The lane's state as its health reports it: `unavailable`, or a state it is on its way to
    /// answering from (`building`, `loading`, `embedding`).
    pub status: &'static str,
}

impl LaneDown {
    /// A lane that cannot answer.
    pub fn new(reason: impl Into<String>) -> LaneDown {
        LaneDown { reason: reason.into(), status: "unavailable" }
    }

    /// A lane that cannot answer yet: its index is being built (`status`).
    pub fn not_yet(status: &'static str, reason: impl Into<String>) -> LaneDown {
        LaneDown { reason: reason.into(), status }
    }
}

/// The lexical and dense lanes, and the tokenizer shared by retrieval.
pub trait Lanes: Sync {
    fn bm25(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown>;
    fn dense(&self, text: &str, k: usize) -> Result<LaneHits, LaneDown>;
    /// Splits code and prose into lowercase word tokens (identifiers split too).
    fn tokens(&self, text: &str) -> Vec<String>;
    /// Counts tokens the way the context budget is stated; `None` (the default: no tokenizer) to
    /// use the fallback rule.
    fn count_tokens(&self, _text: &str) -> Option<usize> {
        None
    }
    /// Dense (embedding) similarity of `text` to each unit of `ids` (`None` for a unit without a
    /// vector); `None` when the dense lane cannot answer (the default: no dense lane). Used by
    /// the graph lane to rank the units a target can reach.
    fn dense_similarities(&self, _text: &str, _ids: &[&str]) -> Option<Vec<Option<f32>>> {
        None
    }
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
    fuse_seeing(lanes, &Unseen::new())
}

/// [`fuse`], where a text lane whose index has not seen a unit yet (`unseen`: added since, or not
/// embedded yet) does not count against it: among the text lanes, such a unit is credited, in
/// the lane that could not rank it, with what that lane gives on average to units ranked alike
/// ([`unseen_credit`]). Otherwise a function just written, which the up-to-date lexical lane
/// ranks first, fell out of a `search`'s top 10 for as long as the dense lane was behind: one
/// lane's vote could not beat two (a black-box finding).
pub fn fuse_seeing(lanes: &[(Lane, Vec<String>)], unseen: &Unseen) -> Vec<Fused> {
    let similarity: Vec<(Lane, &[String])> =
        lanes.iter().filter(|(l, _)| *l != Lane::Graph).map(|(l, ids)| (*l, ids.as_slice())).collect();
    let structure: Vec<&[String]> =
        lanes.iter().filter(|(l, _)| *l == Lane::Graph).map(|(_, ids)| ids.as_slice()).collect();
    let similarity_scored = rrf_seeing(&similarity, unseen);
    let similarity_ranking: Vec<String> = similarity_scored.iter().map(|(id, _)| id.clone()).collect();
    let structure_ranking: Vec<String> = rrf(&structure).into_iter().map(|(id, _)| id).collect();
    let scored: Vec<(String, f64)> = match (similarity.is_empty(), structure.is_empty()) {
        (false, false) => rrf(&[similarity_ranking.as_slice(), structure_ranking.as_slice()]),
        (false, true) => similarity_scored,
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

/// What a text lane that could not rank a unit is credited with, for a unit the lanes that could
/// rank it place at best rank `rank`: what a lane gave on average to the units the other lane
/// ranked `rank`. Measured on DevEval's tuning half (756 `context` queries, both lanes up to
/// date, lists of 50): 0.0145 at rank 1, 0.0088 at 10, 0.0061 at 20, 0.0045 at 30; the
/// curve 1 / (60 + 5 (rank + 1)) reads 0.0143, 0.0087, 0.0061, 0.0047. Not the other lane's own
/// 1 / (60 + rank): that credited a unit at rank 50 of one lane above the first of that lane's
/// units the other lane saw and left out (a review finding).
fn unseen_credit(rank: usize) -> f64 {
    1.0 / (RRF_K + 5.0 * (rank as f64 + 1.0))
}

/// [`rrf`] of the text lanes' lists, where a lane that has not seen a unit (see [`fuse_seeing`])
/// is credited with what it gives on average to units ranked alike ([`unseen_credit`]) instead
/// of nothing; plain [`rrf`] when every lane has seen every unit listed.
fn rrf_seeing(lists: &[(Lane, &[String])], unseen: &Unseen) -> Vec<(String, f64)> {
    let plain: Vec<&[String]> = lists.iter().map(|(_, ids)| *ids).collect();
    if unseen.values().all(|u| u.is_empty()) {
        return rrf(&plain);
    }
    let mut credited: Vec<(String, f64, usize)> = rrf_with_best_ranks(&plain)
        .into_iter()
        .map(|(id, score, best)| {
            let blind = lists.iter().filter(|(l, _)| unseen.get(l).is_some_and(|u| u.contains(&id))).count();
            (id, score + blind as f64 * unseen_credit(best), best)
        })
        .collect();
    credited.sort_by(|a, b| {
        b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0))
    });
    credited.into_iter().map(|(id, score, _)| (id, score)).collect()
}

/// Adds to each lane's health how many units of the final lists it credited without having
/// seen them (see [`fuse_seeing`]): counted after `context` has left the target and test code
/// out of the lists.
pub fn report_unseen(health: &mut BTreeMap<&'static str, LaneReport>, ranked: &[(Lane, Vec<String>)], unseen: &Unseen) {
    for (lane, blind) in unseen {
        // Only a lane that takes part in the fusion, and the text lanes' units it is credited for.
        if !ranked.iter().any(|(l, _)| l == lane) {
            continue;
        }
        let listed: FxHashSet<&str> = ranked
            .iter()
            .filter(|(l, _)| l != lane && *l != Lane::Graph)
            .flat_map(|(_, ids)| ids.iter().map(String::as_str))
            .filter(|id| blind.contains(*id))
            .collect();
        if listed.is_empty() {
            continue;
        }
        if let Some(report) = health.get_mut(lane.as_str()) {
            let said = format!(
                "{} units the other lanes listed are not in its index yet: fused with the credit a lane gives \
                 units ranked alike",
                listed.len()
            );
            report.reason = Some(match report.reason.take() {
                Some(reason) => format!("{reason}; {said}"),
                None => said,
            });
        }
    }
}

/// Plain reciprocal rank fusion of ranked lists (duplicates within a list count once), in
/// descending score; ties broken by best single rank, then id.
fn rrf(lists: &[&[String]]) -> Vec<(String, f64)> {
    rrf_with_best_ranks(lists).into_iter().map(|(id, score, _)| (id, score)).collect()
}

/// [`rrf`], each unit with its best rank over the lists (1-based).
fn rrf_with_best_ranks(lists: &[&[String]]) -> Vec<(String, f64, usize)> {
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
    out.into_iter().map(|(id, (score, best))| (id.to_string(), score, best)).collect()
}

/// What the text lanes answered: each lane's ranked list (in the order the lanes were asked),
/// the hits a lagging lane ranked by a unit's earlier text, and what a lane behind had not seen.
#[derive(Default)]
pub struct TextLaneAnswers {
    pub ranked: Vec<(Lane, Vec<String>)>,
    /// Hits a lane behind the snapshot ranked by the unit's earlier text (marked stale).
    pub older_text: FxHashSet<String>,
    /// Per lane behind, the units other lanes listed that it has no text of (see [`fuse_seeing`]).
    pub unseen: Unseen,
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
) -> TextLaneAnswers {
    let mut out = Vec::new();
    let mut older_text = FxHashSet::default();
    let mut unseen = Unseen::new();
    let text_lanes: Vec<Lane> = wanted.iter().copied().filter(|l| *l != Lane::Graph).collect();
    let ask = |lane: Lane| match lanes {
        None => Err(LaneDown::new("no retrieval lanes are loaded in this process")),
        Some(l) if lane == Lane::Bm25 => l.bm25(text, k),
        Some(l) => l.dense(text, k),
    };
    // The dense lane spends most of its time embedding the query (memory-bound matrix products on
    // the embedder's own threads); BM25 answers meanwhile instead of after it.
    let answers: Vec<Result<LaneHits, LaneDown>> = if lanes.is_some() && text_lanes.len() > 1 {
        std::thread::scope(|scope| {
            let handles: Vec<_> = text_lanes[1..].iter().map(|&lane| scope.spawn(move || ask(lane))).collect();
            let first = ask(text_lanes[0]);
            std::iter::once(first)
                .chain(
                    handles
                        .into_iter()
                        .map(|h| h.join().unwrap_or_else(|_| Err(LaneDown::new("the lane failed (a bug)")))),
                )
                .collect()
        })
    } else {
        text_lanes.iter().map(|&lane| ask(lane)).collect()
    };
    // Lanes behind the snapshot, or partial: what they were ranked from, to ask what they saw.
    let mut behind: Vec<(Lane, Arc<dyn IndexedText>)> = Vec::new();
    for (lane, answer) in text_lanes.into_iter().zip(answers) {
        match answer {
            Ok(hits) => {
                let ids: Vec<String> = hits.ids.into_iter().filter(|id| snapshot.contains_unit(id)).collect();
                let lag = snapshot.version().saturating_sub(hits.version);
                if let Some(indexed) = hits.indexed.as_ref().filter(|_| lag > 0 || hits.partial.is_some()) {
                    behind.push((lane, indexed.clone()));
                }
                if let Some(indexed) = hits.indexed.as_ref().filter(|_| lag > 0) {
                    older_text.extend(ids.iter().filter(|id| indexed.ranked_by_older_text(snapshot, id)).cloned());
                }
                let status = if hits.partial.is_some() {
                    "partial"
                } else if lag == 0 {
                    "ready"
                } else {
                    "lagging"
                };
                let reason = match (hits.partial, hits.note) {
                    (Some(partial), Some(note)) => Some(format!("{partial}; {note}")),
                    (partial, note) => partial.or(note),
                };
                health.insert(
                    lane.as_str(),
                    LaneReport { status, version: Some(hits.version), lag: Some(lag), reason, hits: ids.len() },
                );
                out.push((lane, ids));
            }
            Err(down) => {
                health.insert(
                    lane.as_str(),
                    LaneReport { status: down.status, version: None, lag: None, reason: Some(down.reason), hits: 0 },
                );
            }
        }
    }
    // The units the other lanes listed that a lane behind has no text of (see [`fuse_seeing`]).
    for (lane, indexed) in behind {
        let others: Vec<&str> = out
            .iter()
            .filter(|(l, _)| *l != lane)
            .flat_map(|(_, ids)| ids.iter().map(String::as_str))
            .collect::<FxHashSet<&str>>()
            .into_iter()
            .collect();
        if others.is_empty() {
            continue;
        }
        let blind: FxHashSet<String> =
            others.iter().zip(indexed.unseen(&others)).filter(|(_, b)| *b).map(|(id, _)| id.to_string()).collect();
        if !blind.is_empty() {
            unseen.insert(lane, blind);
        }
    }
    TextLaneAnswers { ranked: out, older_text, unseen }
}

/// What the unit tests of more than one module use.
#[cfg(test)]
mod test_support {
    pub(super) fn list(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::list;
    use super::*;

    /// A unit a lane has not seen is credited with what that lane gives units ranked alike, not
    /// with its rank in the lane that saw it: last in BM25's fifty, it stays below BM25's first,
    /// which the dense lane saw and left out; first in BM25, it passes the dense lane's first,
    /// which BM25 saw and left out.
    #[test]
    fn a_unit_a_lane_has_not_seen_gets_the_credit_of_units_ranked_alike() {
        let bm25: Vec<String> = (1..50).map(|i| format!("b{i}")).chain(["new".to_string()]).collect();
        let dense: Vec<String> = (1..=50).map(|i| format!("d{i}")).collect();
        let lanes = [(Lane::Bm25, bm25), (Lane::Dense, dense)];
        let unseen: Unseen = [(Lane::Dense, ["new".to_string()].into_iter().collect())].into_iter().collect();
        let order: Vec<String> = fuse_seeing(&lanes, &unseen).into_iter().map(|f| f.id).collect();
        let at = |id: &str| order.iter().position(|x| x == id).expect("fused");
        assert!(at("new") > at("b1") && at("new") > at("d1"), "{order:?}");
        let (mut bm25, dense) = (lanes[0].1.clone(), lanes[1].1.clone());
        bm25.rotate_right(1);
        let order: Vec<String> =
            fuse_seeing(&[(Lane::Bm25, bm25), (Lane::Dense, dense)], &unseen).into_iter().map(|f| f.id).collect();
        assert_eq!(order[0], "new", "{order:?}");
        // Nothing unseen: plain fusion.
        let plain: Vec<String> = fuse(&lanes).into_iter().map(|f| f.id).collect();
        let same: Vec<String> = fuse_seeing(&lanes, &Unseen::new()).into_iter().map(|f| f.id).collect();
        assert_eq!(plain, same);
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

    /// Lanes whose answers are the two closures' (bm25, then dense).
    struct Scripted<B, D>(B, D);

    type Answer = Result<LaneHits, LaneDown>;

    impl<B: Fn() -> Answer + Sync, D: Fn() -> Answer + Sync> Lanes for Scripted<B, D> {
        fn bm25(&self, _: &str, _: usize) -> Answer {
            (self.0)()
        }
        fn dense(&self, _: &str, _: usize) -> Answer {
            (self.1)()
        }
        fn tokens(&self, text: &str) -> Vec<String> {
            text.split_whitespace().map(str::to_lowercase).collect()
        }
    }

    #[test]
    fn bm25_answers_while_the_dense_lane_runs() {
        // BM25 answers only once the dense lane has started: run one after the other, the lanes
        // would wait for each other until BM25 gives up.
        let (tx, rx) = std::sync::mpsc::channel();
        let dense_started = std::sync::Mutex::new(Some(tx));
        let bm25_may_answer = std::sync::Mutex::new(rx);
        let lanes = Scripted(
            || {
                let may_answer = bm25_may_answer.lock().unwrap_or_else(|p| p.into_inner());
                match may_answer.recv_timeout(std::time::Duration::from_secs(10)) {
                    Ok(()) => Ok(LaneHits::default()),
                    Err(_) => Err(LaneDown::new("waited for the dense lane in vain")),
                }
            },
            || {
                if let Some(tx) = dense_started.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    tx.send(()).ok();
                }
                Ok(LaneHits::default())
            },
        );
        let mut health = BTreeMap::new();
        let ranked = run_text_lanes(
            &Snapshot::empty(),
            Some(&lanes),
            &[Lane::Bm25, Lane::Dense, Lane::Graph],
            "retry",
            10,
            &mut health,
        )
        .ranked;
        assert_eq!(health.get("bm25").map(|h| h.status), Some("ready"), "{:?}", health.get("bm25"));
        assert_eq!(health.get("dense").map(|h| h.status), Some("ready"));
        // The lanes keep the order they were asked in.
        let order: Vec<Lane> = ranked.iter().map(|(lane, _)| *lane).collect();
        assert_eq!(order, [Lane::Bm25, Lane::Dense]);
    }

    #[test]
    fn a_lane_on_its_way_and_a_shortened_query_are_reported_as_such() {
        // A lexical lane that left words of a long query out, and a dense lane still embedding.
        let on_the_way = Scripted(
            || {
                Ok(LaneHits {
                    note: Some("the lexical lane used the first 48 of the 60 words".into()),
                    ..LaneHits::default()
                })
            },
            || Err(LaneDown::not_yet("embedding", "embedding the repository (3 of 9 unit texts have vectors)")),
        );
        let mut health = BTreeMap::new();
        run_text_lanes(&Snapshot::empty(), Some(&on_the_way), &[Lane::Bm25, Lane::Dense], "retry", 10, &mut health);
        let dense = health.get("dense").expect("dense health");
        assert_eq!(dense.status, "embedding", "not an outage: {dense:?}");
        assert!(dense.reason.as_deref().is_some_and(|r| r.contains("3 of 9")), "{dense:?}");
        let bm25 = health.get("bm25").expect("bm25 health");
        assert_eq!(bm25.status, "ready");
        assert!(bm25.reason.as_deref().is_some_and(|r| r.contains("first 48")), "{bm25:?}");
        assert_eq!(LaneDown::new("gone").status, "unavailable");
    }
}
