//! A unit with an edge to itself (a recursive call) is its own caller and callee: traversals
//! from it list it, once, at depth 1.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

#[test]
fn a_recursive_function_is_its_own_caller_and_callee() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.py"),
        "def rec(n):\n    if n:\n        return rec(n - 1) + rec(n - 2)\n    return 0\n\n\n\
         def user():\n    return rec(3)\n\n\ndef plain():\n    return user()\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let rows = |query: &str| -> Vec<(String, Option<u32>, Option<String>, Option<u32>, Vec<u32>)> {
        let out = fresco_query::run(&Context::new(&snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}"));
        let mut rows: Vec<_> = out.results.into_iter().map(|r| (r.name, r.depth, r.from, r.line, r.also_at)).collect();
        rows.sort();
        rows
    };
    let own = |depth: u32| ("m.rec".to_string(), Some(depth), Some("m.rec".to_string()), Some(3), vec![]);
    assert_eq!(
        rows("callers m.rec"),
        vec![own(1), ("m.user".to_string(), Some(1), Some("m.rec".to_string()), Some(8), vec![])]
    );
    let callees = rows("callees m.rec");
    assert!(callees.contains(&own(1)), "{callees:?}");
    let impact = rows("impact m.rec depth *");
    assert_eq!(impact.iter().filter(|r| r.0 == "m.rec").count(), 1, "{impact:?}");
    assert!(impact.iter().any(|r| r.0 == "m.plain" && r.1 == Some(2)), "{impact:?}");
    // Not a start: reached from another unit, its edge to itself adds no row.
    let deps = rows("deps m.user depth *");
    assert_eq!(deps.iter().filter(|r| r.0 == "m.rec").count(), 1, "{deps:?}");
    assert_eq!(deps.iter().find(|r| r.0 == "m.rec").map(|r| r.2.clone()), Some(Some("m.user".to_string())));
    // A function that does not call itself is not listed among its own callers.
    assert!(rows("callers m.user").iter().all(|r| r.0 != "m.user"));
    // Piped: each input once.
    let piped = rows("find \"*\" in \"m.py\" kind function | callers");
    assert_eq!(piped.iter().filter(|r| r.0 == "m.rec").count(), 1, "{piped:?}");
}
