//! `where` conditions: on fields a row may not have, and on names read as units are named.

use fresco_graph::Snapshot;
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

/// The snapshot of a repository of one module, `m.py`, holding `source`.
fn index_module(source: &str) -> Snapshot {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("m.py"), source).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}

/// What a query ending in `| count` counts.
fn count_of(snapshot: &Snapshot, query: &str) -> usize {
    let out = fresco_query::run(&Context::new(snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}"));
    out.count.unwrap_or_else(|| panic!("{query}: no count"))
}

#[test]
fn a_row_without_a_depth_matches_no_depth_comparison() {
    let snapshot = index_module("def a():\n    return b()\n\n\ndef b():\n    return 1\n");
    let count = |query: &str| count_of(&snapshot, query);
    for op in ["= 0", "!= 1", "< 5", ">= 0"] {
        assert_eq!(count(&format!("find \"*\" | where depth {op} | count")), 0, "find rows have no depth ({op})");
    }
    assert_eq!(count("callees m.a | where depth = 1 | count"), 1);
    assert_eq!(count("callees m.a | where depth != 1 | count"), 0);
}

#[test]
fn name_patterns_and_unknown_names_are_read_nfkc_normalised_as_units_are_named() {
    // `def ﬁnd` (a ligature) defines `find`, as Python reads identifiers.
    let snapshot = index_module("def \u{fb01}nd():\n    return 1\n\n\ndef use():\n    return find()\n");
    let count = |query: &str| count_of(&snapshot, query);
    assert_eq!(count("find \"*\" | where name ~ \"\u{fb01}\" | count"), 1);
    assert_eq!(count("find \"*\" | where name ~ \"^m\\.\u{fb01}nd$\" | count"), 1);
    assert_eq!(count("find \"*\" | where name ~ \"fi\" | count"), 1);
    // A decomposed letter composes, as in an identifier: `e` and a combining acute are `é`.
    let cafe = index_module("def caf\u{e9}():\n    return 1\n");
    assert_eq!(count_of(&cafe, "find \"*\" | where name ~ \"cafe\u{301}\" | count"), 1);
    // Characters NFKC would turn into regex syntax stay what they are: `…` is no `...`.
    assert_eq!(count("find \"*\" | where name ~ \"\u{2026}\" | count"), 0);
    assert!(fresco_query::run(&Context::new(&snapshot), "find \"*\" | where name ~ \"\u{fe59}\"").is_ok());
    match fresco_query::run(&Context::new(&snapshot), "callers \u{fb01}nd") {
        Err(fresco_query::QueryError::UnknownSymbol { suggestions, .. }) => {
            assert_eq!(suggestions, vec!["m.find".to_string()])
        }
        other => panic!("{:?}", other.map(|o| o.results.len())),
    }
}
