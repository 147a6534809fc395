//! Every stage stops at the time limit and says so: `cycles` and `unresolved` ran to the end
//! whatever `timeout_ms` said (black-box review: 193 ms and 539 ms on django with 1 ms).

use std::time::Duration;

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::{Context, Limits};

#[test]
fn cycles_and_unresolved_stop_at_the_time_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 400 functions calling each other in a ring, each also calling something unknown.
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!("def f{i}():\n    unknown_{i}()\n    return f{}()\n\n\n", (i + 1) % 400));
    }
    std::fs::write(dir.path().join("ring.py"), text).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    for query in ["cycles calls", "unresolved"] {
        let full = fresco_query::run(&Context::new(&snapshot), query).expect(query);
        assert!(!full.truncated, "{query}: {:?}", full.notes);
        assert_eq!(full.results.len(), 400, "{query}");
        let mut ctx = Context::new(&snapshot);
        ctx.limits = Limits { max_results: 2000, timeout: Duration::ZERO };
        let cut = fresco_query::run(&ctx, query).expect(query);
        assert!(cut.truncated, "{query}: {:?}", cut.notes);
        assert!(cut.notes.iter().any(|n| n.starts_with("time limit")), "{query}: {:?}", cut.notes);
        assert!(cut.results.len() < 400, "{query}: {}", cut.results.len());
    }
}
