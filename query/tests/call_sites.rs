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

/// Rows standing on a file changed on disk are marked, unless the caller says nothing can be
/// stale right now (`anything_stale`), which spares the executor finding each row's file.
#[test]
fn rows_on_a_changed_file_are_marked_unless_nothing_is_pending() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.py"), "def f():\n    return 1\n").expect("write");
    std::fs::write(dir.path().join("b.py"), "from a import f\n\n\ndef g():\n    return f()\n").expect("write");
    std::fs::write(dir.path().join("c.py"), "from a import f\n\n\ndef h():\n    return f()\n").expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let b_changed = |file: &str| file == "b.py";
    let pending = || true;
    let nothing_pending = || false;
    let marks = |anything_stale: Option<&dyn Fn() -> bool>| -> Vec<(String, bool)> {
        let mut ctx = Context::new(&snapshot);
        ctx.is_stale = Some(&b_changed);
        ctx.anything_stale = anything_stale;
        let out = fresco_query::run(&ctx, "callers a.f").expect("callers");
        let mut rows: Vec<(String, bool)> = out.results.iter().map(|r| (r.name.clone(), r.stale)).collect();
        rows.sort();
        rows
    };
    let marked = vec![("b.g".to_string(), true), ("c.h".to_string(), false)];
    assert_eq!(marks(None), marked);
    assert_eq!(marks(Some(&pending)), marked);
    assert_eq!(marks(Some(&nothing_pending)), vec![("b.g".to_string(), false), ("c.h".to_string(), false)]);
}
