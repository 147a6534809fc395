//! A traversal row per pair of units, with every site between them: `line` the first, `also_at`
//! the others (a rename tool needs them all).

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

#[test]
fn every_call_site_between_two_units_is_listed() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.py"),
        "def helper():\n    return 1\n\n\ndef twice():\n    a = helper()\n    b = helper()\n    return a + helper()\n\n\n\
         def once():\n    return helper()\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let out = fresco_query::run(&Context::new(&snapshot), "callers m.helper").expect("callers");
    let sites: Vec<(String, Option<u32>, Vec<u32>)> =
        out.results.iter().map(|r| (r.name.clone(), r.line, r.also_at.clone())).collect();
    assert_eq!(sites, [("m.twice".to_string(), Some(6), vec![7, 8]), ("m.once".to_string(), Some(12), vec![])]);
    let out = fresco_query::run(&Context::new(&snapshot), "callees m.twice").expect("callees");
    assert_eq!((out.results[0].line, out.results[0].also_at.clone()), (Some(6), vec![7, 8]));
}
