//! A `context` budget too small for any unit: the text is empty and the answer says why, with
//! what the smallest unit would need.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

#[test]
fn a_budget_that_fits_no_unit_says_what_the_smallest_needs() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.py"),
        "def tiny():\n    return 1\n\n\ndef larger(x):\n    y = x + 1\n    return y * 2\n\n\ndef main():\n    return tiny() + larger(2)\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let run =
        |query: &str| fresco_query::run(&Context::new(&snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}"));

    let out = run("context m.main budget 5");
    let block = out.context.as_ref().expect("a context block");
    assert!(block.units.is_empty() && block.text.is_empty(), "{block:?}");
    assert!(!block.cut.is_empty(), "{block:?}");
    let note = out.notes.iter().find(|n| n.contains("fits no unit")).unwrap_or_else(|| panic!("{:?}", out.notes));
    assert!(note.starts_with("a budget of 5 tokens fits no unit: the smallest, m.tiny, needs "), "{note}");
    // What the note says is enough is: the smallest unit is chosen at that budget.
    let needed: usize =
        note.rsplit("needs ").next().and_then(|n| n.split(' ').next()).and_then(|n| n.parse().ok()).expect("a number");
    let out = run(&format!("context m.main budget {needed}"));
    let block = out.context.as_ref().expect("a context block");
    assert!(block.units.iter().any(|u| u.name == "m.tiny"), "{block:?}");
    assert!(!out.notes.iter().any(|n| n.contains("fits no unit")), "{:?}", out.notes);
}
