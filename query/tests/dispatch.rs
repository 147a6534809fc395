//! `callers` of an overriding method says which call sites, resolved to the method it overrides,
//! may reach it at run time: they are not its callers as written, but its list is not complete
//! without them.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

#[test]
fn callers_of_an_override_name_the_base_methods_call_sites() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.py"),
        "class A:\n    def step(self):\n        return 1\n\n\nclass B(A):\n    def step(self):\n        return super().step() + 1\n\n\n\
         class C(B):\n    def step(self):\n        return super().step() + 2\n\n\n\
         def drive(a: A):\n    return a.step()\n\n\ndef other():\n    return 0\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let notes = |query: &str| -> Vec<String> {
        fresco_query::run(&Context::new(&snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}")).notes
    };
    let dispatch = |notes: Vec<String>| notes.into_iter().find(|n| n.contains("dynamic dispatch"));
    // `drive` calls A.step: with a C it runs C.step. The super() calls in B.step and C.step go up,
    // never down to C.step, and are not counted.
    let note = dispatch(notes("callers m.C.step")).expect("a dispatch note");
    assert!(note.contains("m.A.step (1)"), "{note}");
    assert!(!note.contains("m.B.step ("), "B.step's only caller is C.step's super(): {note}");
    // B.step: A.step's site in drive, and B.step is called by C's super() as written.
    let note = dispatch(notes("callers m.B.step")).expect("a dispatch note");
    assert!(note.contains("m.A.step (1)"), "{note}");
    // A method that overrides nothing, and a function, have no such note.
    assert_eq!(dispatch(notes("callers m.A.step")), None);
    assert_eq!(dispatch(notes("callers m.other")), None);
}
