//! Version history: what each published version changed, so that a client that cached context at
//! version V can ask what to refresh.

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::model::{Edge, EdgeKind, Unit, UnitKind};
use crate::snapshot::FileEntry;

#[derive(Clone, Copy, PartialEq, Eq, Debug, Hash)]
pub enum Change {
    Added,
    Removed,
    Changed,
}

impl Change {
    pub fn as_str(self) -> &'static str {
        match self {
            Change::Added => "added",
            Change::Removed => "removed",
            Change::Changed => "changed",
        }
    }
}

/// What one version changed. Stored beside the version it describes (see `store.rs`), so that
/// `changes since V` outlives a restart.
#[derive(Clone, Debug, Default, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct VersionDiff {
    /// The version this diff goes from. Usually the one before; after a daemon stopped without
    /// storing versions it had published, the next version skips their numbers (see the
    /// indexer's version reservation) and its diff goes from the last stored one.
    pub previous: u64,
    pub units: Vec<UnitChange>,
    pub edges_added: Vec<Edge>,
    pub edges_removed: Vec<Edge>,
}

/// A unit added, removed or changed, with a fingerprint of its content (kind, span, signature,
/// docstring, source text) before and after: a unit changed and then changed back over several
/// versions nets to no change.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct UnitChange {
    pub id: String,
    pub before: Option<u64>,
    pub after: Option<u64>,
    /// Where a removed unit was: it is in no snapshot any more, and a client filtering the
    /// changes by file or kind still needs to know.
    pub place: Option<UnitPlace>,
}

/// A unit's file, kind and lines.
#[derive(Clone, Debug, PartialEq, Eq, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct UnitPlace {
    pub file: String,
    pub kind: UnitKind,
    pub start_line: u32,
    pub end_line: u32,
}

impl UnitChange {
    pub fn change(&self) -> Option<Change> {
        match (self.before, self.after) {
            (None, Some(_)) => Some(Change::Added),
            (Some(_), None) => Some(Change::Removed),
            (Some(a), Some(b)) if a != b => Some(Change::Changed),
            _ => None,
        }
    }
}

/// What `changes since` compares a unit by: its file too, so that a unit whose module moved
/// (`pkg/table.py` to `pkg/table/__init__.py`) is changed for a client that knows it by file.
fn fingerprint(unit: &Unit, file: &str, source: &str) -> u64 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&(file.len() as u64).to_le_bytes());
    h.update(file.as_bytes());
    h.update(unit.kind.as_str().as_bytes());
    for part in [unit.signature.as_deref(), unit.docstring.as_deref()] {
        match part {
            Some(text) => {
                h.update(&[1]);
                h.update(&(text.len() as u64).to_le_bytes());
                h.update(text.as_bytes());
            }
            None => h.update(&[0]),
        }
    }
    h.update(&unit.start_line.to_le_bytes());
    h.update(&unit.end_line.to_le_bytes());
    h.update(source.as_bytes());
    h.digest()
}

impl VersionDiff {
    /// The difference between a file's old and new entry (either may be absent), comparing
    /// units by id and content (kind, span, signature, docstring, source text), and edges,
    /// flow edges included.
    pub fn of_file(old: Option<&FileEntry>, new: Option<&FileEntry>, into: &mut VersionDiff) {
        let units = |e: Option<&FileEntry>| -> FxHashMap<String, (u64, UnitPlace)> {
            e.map(|entry| {
                let text = &*entry.text;
                entry
                    .graph
                    .units
                    .iter()
                    .map(|u| {
                        let source = text.get(u.start_byte as usize..u.end_byte as usize).unwrap_or("");
                        let place = UnitPlace {
                            file: entry.graph.path.clone(),
                            kind: u.kind,
                            start_line: u.start_line,
                            end_line: u.end_line,
                        };
                        (u.id.clone(), (fingerprint(u, &entry.graph.path, source), place))
                    })
                    .collect()
            })
            .unwrap_or_default()
        };
        let (before, after) = (units(old), units(new));
        let mut ids: Vec<&String> = before.keys().chain(after.keys()).collect();
        ids.sort();
        ids.dedup();
        for id in ids {
            let (was, now) = (before.get(id), after.get(id));
            let change = UnitChange {
                id: id.clone(),
                before: was.map(|(fp, _)| *fp),
                after: now.map(|(fp, _)| *fp),
                place: if now.is_none() { was.map(|(_, place)| place.clone()) } else { None },
            };
            if change.change().is_some() {
                into.units.push(change);
            }
        }
        let edges = |e: Option<&FileEntry>| -> std::collections::HashSet<Edge> {
            e.map(|entry| entry.edges().cloned().collect()).unwrap_or_default()
        };
        let (eb, ea) = (edges(old), edges(new));
        into.edges_added.extend(ea.difference(&eb).cloned());
        into.edges_removed.extend(eb.difference(&ea).cloned());
    }

    /// Merges what [`VersionDiff::of_file`] recorded for one unit from two files (removed from
    /// the file its module left, added in the one it moved to) into one change, and drops the
    /// merged changes that change nothing. Call once, after every file of the version.
    pub fn merge_moved_units(&mut self) {
        self.units.sort_by(|a, b| a.id.cmp(&b.id));
        let mut merged: Vec<UnitChange> = Vec::with_capacity(self.units.len());
        for change in std::mem::take(&mut self.units) {
            match merged.last_mut() {
                Some(last) if last.id == change.id => {
                    last.before = last.before.or(change.before);
                    last.after = last.after.or(change.after);
                    last.place = if last.after.is_some() { None } else { last.place.take().or(change.place) };
                }
                _ => merged.push(change),
            }
        }
        merged.retain(|c| c.change().is_some());
        self.units = merged;
    }

    pub fn is_empty(&self) -> bool {
        self.units.is_empty() && self.edges_added.is_empty() && self.edges_removed.is_empty()
    }

    /// How many changes it holds (units plus edges).
    pub fn len(&self) -> usize {
        self.units.len() + self.edges_added.len() + self.edges_removed.len()
    }
}

/// The net change of a unit or an edge since some version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetChange {
    Unit(String, Change),
    Edge(Edge, Change),
}

/// `since` is not a version the log can answer for: older than the history kept, newer than the
/// newest version (a number from another index), or a version published but never stored before
/// the daemon stopped (its numbers are skipped, not reused).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "version {since} is not in the history kept (versions {oldest} to {newest}; {}); a full refresh is needed",
    if since > newest {
        "it is newer than any this index published: a version number from another index"
    } else if since < oldest {
        "it is older"
    } else {
        "it is not a version this index stored: a daemon stopped before storing it, or skipped the number after such a stop"
    }
)]
pub struct HistoryExpired {
    pub since: u64,
    pub oldest: u64,
    pub newest: u64,
}

/// Versions of history kept (in memory and in the store) for `changes since`.
pub const HISTORY_VERSIONS: usize = 10_000;

/// Changes (units plus edges) the history holds at most, over all its versions. A save changes
/// tens; a version that changes everything (a branch switch; a line added at the top of every
/// file of django changes all its 62 k units and moves most of its 340 k edges, 37 MB in the
/// store) is not worth keeping: a client that missed it refreshes in full rather than apply a
/// diff as large as the graph.
pub const HISTORY_MAX_CHANGES: usize = 200_000;

/// The diffs of the last versions, within [`HISTORY_VERSIONS`] and [`HISTORY_MAX_CHANGES`].
#[derive(Clone, Debug)]
pub struct VersionLog {
    entries: VecDeque<(u64, Arc<VersionDiff>)>,
    capacity: usize,
    max_changes: usize,
    /// Changes held by `entries`.
    changes: usize,
    /// The version the log starts after: changes since any version >= this are known.
    base: u64,
}

impl VersionLog {
    pub fn new(base: u64, capacity: usize) -> VersionLog {
        VersionLog::with_limits(base, capacity, HISTORY_MAX_CHANGES)
    }

    pub fn with_limits(base: u64, capacity: usize, max_changes: usize) -> VersionLog {
        VersionLog { entries: VecDeque::new(), capacity: capacity.max(1), max_changes, changes: 0, base }
    }

    /// Appends the next version's diff, dropping the oldest beyond the limits (the new one too,
    /// when it alone is over the change budget). A diff that does not go from the newest version
    /// the log knows starts the log afresh at its `previous`.
    pub fn push(&mut self, version: u64, diff: Arc<VersionDiff>) {
        if diff.previous != self.newest() {
            self.entries.clear();
            self.changes = 0;
            self.base = diff.previous;
        }
        self.changes += diff.len();
        self.entries.push_back((version, diff));
        while self.entries.len() > self.capacity || self.changes > self.max_changes {
            let Some((v, dropped)) = self.entries.pop_front() else { break };
            self.changes -= dropped.len();
            self.base = v;
        }
    }

    pub fn oldest(&self) -> u64 {
        self.base
    }

    /// The newest version the log knows (its base when it holds no diff).
    pub fn newest(&self) -> u64 {
        self.entries.back().map_or(self.base, |(v, _)| *v)
    }

    /// The diffs the log holds with their versions, oldest first.
    pub fn diffs(&self) -> impl Iterator<Item = &(u64, Arc<VersionDiff>)> + '_ {
        self.entries.iter()
    }

    /// Where the units removed after `since` were when they were removed (the last removal, for
    /// a unit removed more than once).
    pub fn removed_places(&self, since: u64) -> FxHashMap<String, UnitPlace> {
        let mut places = FxHashMap::default();
        for (_, diff) in self.entries.iter().filter(|(v, _)| *v > since) {
            for change in &diff.units {
                if let Some(place) = &change.place {
                    places.insert(change.id.clone(), place.clone());
                }
            }
        }
        places
    }

    /// Net changes after `since` up to the newest version, units first then edges, sorted.
    pub fn changes_since(&self, since: u64) -> Result<Vec<NetChange>, HistoryExpired> {
        self.changes_between(since, u64::MAX)
    }

    /// Net changes after `since` up to version `until` (the state after the last version at or
    /// before it), units first then edges, sorted: the same range gives the same list whatever
    /// came after it, so a long list can be read a page at a time.
    pub fn changes_between(&self, since: u64, until: u64) -> Result<Vec<NetChange>, HistoryExpired> {
        let newest = self.newest();
        // Only the versions the log has a state for: its base and each diff's version (numbers
        // skipped after an unclean stop are neither).
        let known = since == self.base || self.entries.binary_search_by_key(&since, |(v, _)| *v).is_ok();
        if !known {
            return Err(HistoryExpired { since, oldest: self.base, newest });
        }
        // Per unit, its content at `since` (the first diff's before) and now (the last's after).
        let mut units: FxHashMap<&str, (Option<u64>, Option<u64>)> = FxHashMap::default();
        let mut edges: FxHashMap<Edge, i32> = FxHashMap::default();
        for (_, diff) in self.entries.iter().filter(|(v, _)| *v > since && *v <= until) {
            for change in &diff.units {
                units.entry(change.id.as_str()).or_insert((change.before, change.after)).1 = change.after;
            }
            for e in &diff.edges_added {
                *edges.entry(e.clone()).or_default() += 1;
            }
            for e in &diff.edges_removed {
                *edges.entry(e.clone()).or_default() -= 1;
            }
        }
        let mut out: Vec<NetChange> = units
            .into_iter()
            .filter_map(|(id, (before, after))| {
                let net = UnitChange { id: id.to_string(), before, after, place: None };
                net.change().map(|c| NetChange::Unit(net.id, c))
            })
            .collect();
        out.sort_by(|a, b| match (a, b) {
            (NetChange::Unit(x, _), NetChange::Unit(y, _)) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        });
        let mut edge_changes: Vec<(Edge, Change)> = edges
            .into_iter()
            .filter(|(_, n)| *n != 0)
            .map(|(e, n)| (e, if n > 0 { Change::Added } else { Change::Removed }))
            .collect();
        edge_changes.sort_by(|(a, _), (b, _)| {
            (&a.src, &a.dst, kind_order(a.kind), a.line).cmp(&(&b.src, &b.dst, kind_order(b.kind), b.line))
        });
        out.extend(edge_changes.into_iter().map(|(e, c)| NetChange::Edge(e, c)));
        Ok(out)
    }
}

fn kind_order(k: EdgeKind) -> u8 {
    k as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_changes_and_expires_old_versions() {
        let mut log = VersionLog::new(0, 3);
        // (id, content before, content after)
        let diff = |previous: u64, units: Vec<(&str, Option<u64>, Option<u64>)>| {
            Arc::new(VersionDiff {
                previous,
                units: units
                    .into_iter()
                    .map(|(id, before, after)| UnitChange { id: id.to_string(), before, after, place: None })
                    .collect(),
                ..VersionDiff::default()
            })
        };
        log.push(1, diff(0, vec![("a", None, Some(1)), ("b", Some(1), Some(2))]));
        log.push(2, diff(1, vec![("a", Some(1), None), ("c", Some(1), None)]));
        log.push(3, diff(2, vec![("c", None, Some(3))]));
        let net = log.changes_since(0).unwrap();
        assert_eq!(
            net,
            vec![NetChange::Unit("b".into(), Change::Changed), NetChange::Unit("c".into(), Change::Changed)]
        );
        assert_eq!(log.changes_since(2).unwrap(), vec![NetChange::Unit("c".into(), Change::Added)]);
        log.push(4, diff(3, vec![("d", None, Some(1))]));
        assert_eq!(log.changes_since(0), Err(HistoryExpired { since: 0, oldest: 1, newest: 4 }));
        // A version newer than any published (the index was rebuilt): not "no changes".
        assert_eq!(log.changes_since(9), Err(HistoryExpired { since: 9, oldest: 1, newest: 4 }));
        assert!(log.changes_since(1).is_ok());
        assert_eq!(log.changes_since(4), Ok(Vec::new()), "the newest version itself: nothing since");

        // After an unclean stop, 5 to 8 were published but never stored: the next version is 9,
        // from 4. The skipped numbers are not states the log can compare with.
        log.push(9, diff(4, vec![("e", None, Some(1))]));
        assert_eq!(log.changes_since(4).map(|c| c.len()), Ok(1));
        for lost in 5..9 {
            let err = log.changes_since(lost).unwrap_err();
            assert!(err.to_string().contains("stopped before storing it"), "{err}");
        }
        // A diff from a version the log does not end at starts it afresh.
        log.push(12, diff(11, vec![]));
        assert_eq!((log.oldest(), log.newest()), (11, 12));
        assert!(log.changes_since(9).is_err());
    }

    #[test]
    fn a_range_ends_where_it_is_told_whatever_came_after() {
        let diff = |previous: u64, id: &str, before: Option<u64>, after: Option<u64>| {
            Arc::new(VersionDiff {
                previous,
                units: vec![UnitChange { id: id.into(), before, after, place: None }],
                ..VersionDiff::default()
            })
        };
        let mut log = VersionLog::new(0, 10);
        log.push(1, diff(0, "m.a", None, Some(1)));
        log.push(2, diff(1, "m.b", None, Some(1)));
        let up_to_2 = log.changes_between(0, 2).unwrap();
        log.push(3, diff(2, "m.a", Some(1), None));
        log.push(4, diff(3, "m.c", None, Some(1)));
        assert_eq!(log.changes_between(0, 2).unwrap(), up_to_2, "later versions do not reach into the range");
        assert_eq!(
            log.changes_between(1, 3).unwrap(),
            vec![NetChange::Unit("m.a".into(), Change::Removed), NetChange::Unit("m.b".into(), Change::Added)]
        );
        assert_eq!(log.changes_between(0, u64::MAX).unwrap(), log.changes_since(0).unwrap());
        assert_eq!(log.changes_between(2, 2).unwrap(), Vec::new());
    }

    #[test]
    fn a_unit_changed_and_changed_back_nets_to_nothing() {
        let diff = |previous: u64, before: Option<u64>, after: Option<u64>| {
            Arc::new(VersionDiff {
                previous,
                units: vec![UnitChange { id: "m.f".into(), before, after, place: None }],
                ..VersionDiff::default()
            })
        };
        let mut log = VersionLog::new(0, 10);
        log.push(1, diff(0, Some(7), Some(8)));
        log.push(2, diff(1, Some(8), Some(7)));
        assert_eq!(log.changes_since(0), Ok(Vec::new()), "back to what it was at 0");
        assert_eq!(log.changes_since(1), Ok(vec![NetChange::Unit("m.f".into(), Change::Changed)]));
        log.push(3, diff(2, Some(7), None));
        log.push(4, diff(3, None, Some(7)));
        assert_eq!(log.changes_since(2), Ok(Vec::new()), "removed and restored as it was");
        assert_eq!(log.changes_since(3), Ok(vec![NetChange::Unit("m.f".into(), Change::Added)]));
    }

    #[test]
    fn a_budget_of_changes_drops_the_oldest_and_a_version_over_it_alone() {
        let diff = |previous: u64, n: usize| {
            Arc::new(VersionDiff {
                previous,
                units: (0..n)
                    .map(|i| UnitChange { id: format!("u{i}"), before: Some(1), after: Some(2), place: None })
                    .collect(),
                ..VersionDiff::default()
            })
        };
        let mut log = VersionLog::with_limits(0, 100, 10);
        log.push(1, diff(0, 4));
        log.push(2, diff(1, 4));
        assert_eq!(log.oldest(), 0);
        log.push(3, diff(2, 4));
        assert_eq!((log.oldest(), log.newest()), (1, 3), "12 changes > 10: version 1 goes");
        log.push(4, diff(3, 11));
        assert_eq!((log.oldest(), log.newest()), (4, 4), "a version over the budget alone is not kept");
        assert!(log.changes_since(3).is_err());
        assert_eq!(log.changes_since(4), Ok(Vec::new()));
        log.push(5, diff(4, 1));
        assert_eq!(log.changes_since(4).map(|c| c.len()), Ok(1));
    }
}
