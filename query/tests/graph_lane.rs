//! The graph lane over small indexed packages: what comes first for a function with a body, and
//! what the target's analogues (the units the text lanes find most like it) contribute.

use std::path::Path;

use fresco_graph::Snapshot;
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::ast::{ContextTarget, Lane, Symbol};
use fresco_query::retrieve::{analogues, graph_lane, resolve_target};

fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

fn index(root: &Path) -> Snapshot {
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}

fn lane_for(snapshot: &Snapshot, name: &str, text_hits: &[&str]) -> Vec<String> {
    let target = resolve_target(snapshot, &ContextTarget::Unit(Symbol::Name(name.to_string()))).expect("target");
    let text_lanes = vec![(Lane::Bm25, text_hits.iter().map(|s| s.to_string()).collect::<Vec<_>>())];
    let similar = analogues(&text_lanes, &target);
    graph_lane(snapshot, &target, None, false, &similar, 10)
}

#[test]
fn body_uses_come_first_and_header_uses_compete() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/__init__.py",
        "class Url:\n    pass\n\n\
         def helper(x):\n    return x\n\n\
         def fetch(url: Url):\n    \"\"\"Fetch a url.\"\"\"\n    return helper(url)\n",
    );
    let snapshot = index(dir.path());
    let ranked = lane_for(&snapshot, "pkg.fetch", &[]);
    // `Url` is used on an earlier line, but by the header: the body's use leads.
    assert_eq!(ranked.first().map(String::as_str), Some("pkg.helper"), "{ranked:?}");
    assert!(ranked.iter().any(|r| r == "pkg.Url"), "the header's use is still a candidate: {ranked:?}");
}

#[test]
fn what_analogues_use_ranks_high_and_is_reached_across_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    // Not imported by the target's file: reachable only through what an analogue uses.
    write(dir.path(), "pkg/wire.py", "def encode_body(data):\n    return data\n");
    write(
        dir.path(),
        "pkg/verbs.py",
        "from pkg.other import put_with_body\n\n\
         def unrelated_a():\n    return 1\n\n\
         def unrelated_b():\n    return 2\n\n\
         def patch(url, data):\n    \"\"\"Send a PATCH request with a body.\"\"\"\n    ...\n",
    );
    write(
        dir.path(),
        "pkg/other.py",
        "from pkg.wire import encode_body\n\n\
         def put_with_body(url, data):\n    \"\"\"Send a PUT request with a body.\"\"\"\n    return encode_body(data)\n",
    );
    let snapshot = index(dir.path());
    let without = lane_for(&snapshot, "pkg.verbs.patch", &[]);
    assert!(!without.iter().any(|r| r == "pkg.wire.encode_body"), "{without:?}");
    let with = lane_for(&snapshot, "pkg.verbs.patch", &["pkg.verbs.patch", "pkg.other.put_with_body"]);
    let pos = |id: &str| with.iter().position(|r| r == id);
    assert!(pos("pkg.wire.encode_body").is_some(), "{with:?}");
    assert!(pos("pkg.wire.encode_body") < pos("pkg.verbs.unrelated_a"), "{with:?}");
}
