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

#[test]
fn callees_of_a_method_name_the_overrides_its_calls_may_dispatch_to() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("m.py"),
        "class A:\n    def step(self):\n        return 1\n\n    def run(self):\n        return self.step()\n\n\n\
         class B(A):\n    def step(self):\n        return super().step() + 1\n\n\n\
         class C(B):\n    def step(self):\n        return 2\n\n\n\
         def drive(a: A):\n    return a.step()\n\n\ndef exact():\n    return A().step()\n\n\n\
         def leaf(b: C):\n    return b.step()\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let dispatch = |query: &str| -> Option<String> {
        fresco_query::run(&Context::new(&snapshot), query)
            .unwrap_or_else(|e| panic!("{query}: {e}"))
            .notes
            .into_iter()
            .find(|n| n.contains("dynamic dispatch"))
    };
    // `self.step()` in A.run runs B.step or C.step on their instances: both are named, in
    // breadth-first order down the hierarchy.
    let note = dispatch("callees m.A.run").expect("a dispatch note");
    assert!(note.contains("calls m.A.step") && note.contains("m.B.step, m.C.step"), "{note}");
    // The same through a parameter annotated with the base.
    let note = dispatch("deps m.drive").expect("a dispatch note");
    assert!(note.contains("m.B.step, m.C.step"), "{note}");
    // super().step() goes up, never down; A().step() runs on an A; C.step has no overrides.
    assert_eq!(dispatch("callees m.B.step"), None);
    assert_eq!(dispatch("callees m.exact"), None);
    assert_eq!(dispatch("callees m.leaf"), None);
}

#[test]
fn a_step_with_several_starts_keeps_their_notes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text = String::from(
        "class X:\n    def frob(self):\n        return 1\n\n\nclass Y:\n    def frob(self):\n        return 2\n\n\n",
    );
    // Five methods with an unresolved call site of their name each, then one function using them.
    for n in 0..5 {
        text.push_str(&format!("class K{n}:\n    def m{n}(self):\n        return {n}\n\n\n"));
    }
    text.push_str("def use(obj):\n    obj.m0(); obj.m1(); obj.m2(); obj.m3(); obj.m4()\n    return obj.frob()\n\n\n");
    text.push_str("def use2(obj):\n    obj.m0()\n    return obj.m1()\n");
    std::fs::write(dir.path().join("m.py"), text).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let notes = |query: &str| -> Vec<String> {
        fresco_query::run(&Context::new(&snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}")).notes
    };
    // One start, a glob over two, a pipe: each start's own note while they are few.
    let one = notes("callers m.X.frob");
    assert!(one.iter().any(|n| n.contains("named 'frob' might also reach m.X.frob")), "{one:?}");
    let glob = notes("callers \"m.*.frob\"");
    assert!(glob.iter().any(|n| n.contains("might also reach m.X.frob")), "{glob:?}");
    assert!(glob.iter().any(|n| n.contains("might also reach m.Y.frob")), "{glob:?}");
    let piped = notes("find \"frob\" | callers");
    assert_eq!(piped.iter().filter(|n| n.contains("might also reach")).count(), 2, "{piped:?}");
    // Many: one note counting them.
    let many = notes("find kind method | callers");
    let summary = many.iter().find(|n| n.contains("may be incomplete")).expect("a summary note");
    assert!(summary.contains("7 of the 7 units"), "{summary}");
    assert!(!many.iter().any(|n| n.contains("might also reach")), "{many:?}");
    // Past the first 200 starts nothing is looked at, and a note says so even when those
    // looked at have nothing to say.
    let mut wide = String::new();
    for n in 0..250 {
        let body = if n >= 220 { "x.unknown_method()" } else { "1" };
        wide.push_str(&format!("def f{n}(x):\n    return {body}\n\n\n"));
    }
    std::fs::write(dir.path().join("wide.py"), wide).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let wide_snapshot = indexer.snapshot().clone();
    let out = fresco_query::run(&Context::new(&wide_snapshot), "callees \"wide.f*\"").expect("callees");
    assert!(
        out.notes.iter().any(|n| n.contains("checked for the first 200 of the 250 units this step started from")),
        "{:?}",
        out.notes
    );
    // A start that comes several times (a pipe from rows of one unit) is looked at once.
    let twice = notes("unresolved | callees");
    let own: Vec<&String> = twice.iter().filter(|n| n.contains("unresolved call site(s):")).collect();
    assert_eq!(own.len(), 2, "{twice:?}");
    assert!(own[0].starts_with("m.use has 6") && own[1].starts_with("m.use2 has 2"), "{own:?}");
}
