//! The graph lane over small indexed packages: what comes first for a function with a body, and
//! what the target's analogues (the units the text lanes find most like it) contribute.

use std::path::Path;

use fresco_graph::Snapshot;
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::ast::{ContextTarget, Lane, Symbol};
use fresco_query::retrieve::{analogues, assemble, fuse, graph_lane, resolve_target};
use rustc_hash::FxHashSet;

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
fn what_analogues_use_is_reached_across_files_but_ranks_below_what_the_file_reaches() {
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
    // The file does not import it: the body could use it only through a new import, and on the
    // retrieval benchmark such units were rarely needed.
    assert!(pos("pkg.wire.encode_body") > pos("pkg.verbs.unrelated_a"), "{with:?}");
}

#[test]
fn what_calls_the_target_ranks_below_what_it_could_call() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/prep.py",
        "class Prepared:\n    def prepare(self, url, auth):\n        self.prepare_url(url)\n        \
         self.prepare_auth(auth)\n\n\
         \x20   def prepare_url(self, url):\n        \"\"\"Prepare the URL.\"\"\"\n        ...\n\n\
         \x20   def prepare_auth(self, auth):\n        return auth\n\n\
         \x20   def quote(self, text):\n        return text\n\n\n\
         def build(url):\n    p = Prepared()\n    p.prepare(url, None)\n    return p\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.prep.Prepared.prepare_url");
    let caller = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.caller_of_target);
    assert_eq!(caller("pkg.prep.Prepared.prepare"), Some(1.0), "{features:?}");
    // Two calls above it.
    assert_eq!(caller("pkg.prep.build"), Some(1.0), "{features:?}");
    assert_eq!(caller("pkg.prep.Prepared.prepare_auth"), Some(0.0), "{features:?}");
    assert_eq!(caller("pkg.prep.Prepared.quote"), Some(0.0), "{features:?}");
    let ranked = lane_for(&snapshot, "pkg.prep.Prepared.prepare_url", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id);
    assert!(pos("pkg.prep.Prepared.quote") < pos("pkg.prep.Prepared.prepare"), "{ranked:?}");
}

#[test]
fn context_prefers_several_short_dependencies_to_one_long_one_of_similar_rank() {
    let dir = tempfile::tempdir().expect("tempdir");
    let long_body: String = (0..40).map(|i| format!("    step_{i} = compute_something_long({i})\n")).collect();
    write(
        dir.path(),
        "pkg/__init__.py",
        &format!(
            "def long_helper():\n{long_body}    return 1\n\n\
             def short_a():\n    return 1\n\n\
             def short_b():\n    return 2\n\n\
             def short_c():\n    return 3\n\n\
             def target():\n    ...\n"
        ),
    );
    let snapshot = index(dir.path());
    let target = resolve_target(&snapshot, &ContextTarget::Unit(Symbol::Name("pkg.target".into()))).expect("target");
    let order: Vec<String> =
        ["pkg.long_helper", "pkg.short_a", "pkg.short_b", "pkg.short_c"].iter().map(|s| s.to_string()).collect();
    let fused = fuse(&[(Lane::Graph, order.clone())]);
    let deps: FxHashSet<String> = order.iter().cloned().collect();
    // With room for everything, everything is taken, listed in ranking order.
    let all = assemble(&snapshot, None, &target, &fused, &deps, 4000, None);
    let chosen: Vec<&str> = all.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(chosen, ["pkg.long_helper", "pkg.short_a", "pkg.short_b", "pkg.short_c"]);
    let tokens: Vec<usize> = all.units.iter().map(|u| u.tokens).collect();
    assert!(tokens[0] > 4 * (tokens[1] + tokens[2] + tokens[3]), "{tokens:?}");
    // Room for the long one and one short one: in rank order that is what would be taken; by
    // value per token the three short ones are, and the long one is cut.
    let budget = tokens[0] + tokens[1] + tokens[2] / 2;
    let block = assemble(&snapshot, None, &target, &fused, &deps, budget, None);
    let chosen: Vec<&str> = block.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(chosen, ["pkg.short_a", "pkg.short_b", "pkg.short_c"], "{block:?}");
    assert_eq!(block.cut, ["pkg.long_helper"]);
    // The budget covers the whole text, headers and comment lines included (chars/4 here).
    // One token per four characters of the whole text, as the answer states.
    assert_eq!(block.text.chars().count().div_ceil(4), block.tokens, "{}", block.text);
    assert!(block.tokens <= budget, "{} > {budget}", block.tokens);
    for budget in [0, 10, 30, 60, 100, 200, 400] {
        let block = assemble(&snapshot, None, &target, &fused, &deps, budget, None);
        assert!(block.text.chars().count().div_ceil(4) <= budget, "budget {budget}: {}", block.text);
    }
}

#[test]
fn a_container_chosen_after_its_members_gives_their_tokens_back() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The function is long enough to come after the class by value per token.
    let steps: String = (0..12).map(|i| format!("    x = x + {i}\n")).collect();
    write(
        dir.path(),
        "pkg/__init__.py",
        &format!(
            "class Box:\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n\n\
         \x20   def c(self):\n        return self.a() + self.b()\n\n\n\
         def tail_fn(x):\n{}    return x\n\n\n\
         def target():\n    ...\n",
            steps
        ),
    );
    let snapshot = index(dir.path());
    let target = resolve_target(&snapshot, &ContextTarget::Unit(Symbol::Name("pkg.target".into()))).expect("target");
    let alone = |id: &str| {
        let one = vec![id.to_string()];
        let deps: FxHashSet<String> = one.iter().cloned().collect();
        assemble(&snapshot, None, &target, &fuse(&[(Lane::Graph, one)]), &deps, 4000, None).tokens
    };
    let order: Vec<String> =
        ["pkg.Box.a", "pkg.Box.b", "pkg.Box", "pkg.tail_fn"].iter().map(|s| s.to_string()).collect();
    let fused = fuse(&[(Lane::Graph, order.clone())]);
    let deps: FxHashSet<String> = order.iter().cloned().collect();
    // Room for the class and the function (their file header counted twice, less a little):
    // the short methods are taken first, then the class that holds them, and what they cost
    // returns, so the function fits too.
    let budget = alone("pkg.Box") + alone("pkg.tail_fn") - 5;
    let block = assemble(&snapshot, None, &target, &fused, &deps, budget, None);
    let chosen: Vec<&str> = block.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(chosen, ["pkg.Box", "pkg.tail_fn"], "{block:?}");
    assert!(block.cut.is_empty(), "{block:?}");
    assert!(block.tokens <= budget, "{} > {budget}", block.tokens);
}

#[test]
fn context_never_repeats_the_target_nor_what_contains_it_and_marks_stale_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/__init__.py",
        "class Client:\n    def get(self):\n        ...\n\n    def send(self):\n        return 1\n\n\n\
         def helper():\n    return 2\n",
    );
    write(dir.path(), "pkg/other.py", "def far():\n    return 3\n");
    let snapshot = index(dir.path());
    let target =
        resolve_target(&snapshot, &ContextTarget::Unit(Symbol::Name("pkg.Client.get".into()))).expect("target");
    let order: Vec<String> =
        ["pkg.Client", "pkg.Client.send", "pkg.helper", "pkg.other.far"].iter().map(|s| s.to_string()).collect();
    let fused = fuse(&[(Lane::Graph, order.clone())]);
    let deps: FxHashSet<String> = order.iter().take(3).cloned().collect();
    let stale = |file: &str| file == "pkg/other.py";
    let block = assemble(&snapshot, None, &target, &fused, &deps, 4000, Some(&stale));
    let chosen: Vec<&str> = block.units.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(chosen, ["pkg.Client.send", "pkg.helper", "pkg.other.far"], "the class holding the target is left out");
    // Dependencies first, then examples; the stale file is marked in the text.
    let send = block.text.find("# pkg.Client.send").expect("send");
    let far = block.text.find("# pkg.other.far").expect("far");
    assert!(send < far, "{}", block.text);
    assert!(block.text.contains("# file: pkg/other.py (revision") && block.text.contains("STALE"), "{}", block.text);
    assert!(block.units.iter().find(|u| u.name == "pkg.other.far").is_some_and(|u| u.stale));
}

#[test]
fn what_the_source_order_neighbours_use_ranks_above_what_farther_functions_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    // `near` and `far` are equally local (same file) and each used by one other function; only
    // `near`'s user is defined right next to the target.
    write(
        dir.path(),
        "pkg/__init__.py",
        "def near():\n    return 1\n\n\
         def far():\n    return 2\n\n\
         def uses_far():\n    return far()\n\n\
         def filler_a():\n    return 3\n\n\
         def filler_b():\n    return 4\n\n\
         def uses_near():\n    return near()\n\n\
         def target():\n    ...\n",
    );
    let snapshot = index(dir.path());
    let ranked = lane_for(&snapshot, "pkg.target", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id);
    assert!(pos("pkg.near").is_some() && pos("pkg.far").is_some(), "{ranked:?}");
    assert!(pos("pkg.near") < pos("pkg.far"), "{ranked:?}");
}

#[test]
fn what_an_analogue_uses_of_its_own_class_carries_over_to_the_targets_class() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/live.py",
        "class Live:\n    def stop(self):\n        pass\n\n    def __exit__(self, *exc):\n        self.stop()\n",
    );
    write(
        dir.path(),
        "pkg/reader.py",
        "class Reader:\n    def close(self):\n        pass\n\n    def stop(self):\n        pass\n\n\
         \x20   def read(self):\n        pass\n\n    def __exit__(self, *exc):\n        ...\n",
    );
    let snapshot = index(dir.path());
    let without = lane_for(&snapshot, "pkg.reader.Reader.__exit__", &[]);
    let with = lane_for(&snapshot, "pkg.reader.Reader.__exit__", &["pkg.live.Live.__exit__"]);
    let pos = |l: &[String], id: &str| l.iter().position(|r| r == id);
    // Without the analogue, `stop` has nothing over `close` (alphabetical order decides).
    assert!(pos(&without, "pkg.reader.Reader.close") < pos(&without, "pkg.reader.Reader.stop"), "{without:?}");
    assert_eq!(with.first().map(String::as_str), Some("pkg.reader.Reader.stop"), "{with:?}");
    // The analogue's own member is not the target's: it is not what `Reader.__exit__` calls.
    assert!(pos(&with, "pkg.live.Live.stop") > pos(&with, "pkg.reader.Reader.stop"), "{with:?}");
}

#[test]
fn what_a_lambda_in_the_body_uses_is_the_functions_own_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/__init__.py",
        "def weight(item):\n    return 1\n\n\
         def other():\n    return 2\n\n\
         def ordered(items):\n    return sorted(items, key=lambda item: weight(item))\n",
    );
    let snapshot = index(dir.path());
    // The call is the lambda's own edge in the graph ...
    assert!(
        snapshot.edges_from("pkg.ordered.<lambda1>").iter().any(|(e, _)| &*e.dst == "pkg.weight"),
        "{:?}",
        snapshot.edges_from("pkg.ordered.<lambda1>")
    );
    // ... and for retrieval it is what `ordered` uses; the lambda itself is never a result.
    let ranked = lane_for(&snapshot, "pkg.ordered", &[]);
    assert_eq!(ranked.first().map(String::as_str), Some("pkg.weight"), "{ranked:?}");
    assert!(!ranked.iter().any(|r| r.contains("<lambda")), "{ranked:?}");
}

#[test]
fn neighbours_count_for_what_their_bodies_use_not_their_annotations() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/types.py", "HeaderTypes = dict\n");
    write(dir.path(), "pkg/util.py", "def normalize(x):\n    return x\n");
    write(
        dir.path(),
        "pkg/client.py",
        "from pkg.types import HeaderTypes\nfrom pkg.util import normalize\n\n\
         class Client:\n    def target(self):\n        ...\n\n\
         \x20   def a(self, headers: HeaderTypes = None):\n        return normalize(headers)\n\n\
         \x20   def b(self, headers: HeaderTypes = None):\n        return 1\n\n\
         \x20   def c(self, headers: HeaderTypes = None):\n        return 2\n",
    );
    let snapshot = index(dir.path());
    let ranked = lane_for(&snapshot, "pkg.client.Client.target", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id);
    // Every other method names the alias, but only in its signature; one calls `normalize`.
    assert!(pos("pkg.types.HeaderTypes").is_some(), "{ranked:?}");
    assert!(pos("pkg.util.normalize") < pos("pkg.types.HeaderTypes"), "{ranked:?}");
}

#[test]
fn a_neighbour_naming_a_type_in_its_signature_does_not_count_as_using_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/types.py", "Alias = dict\n");
    write(dir.path(), "pkg/util.py", "def helper(x):\n    return x\n");
    write(
        dir.path(),
        "pkg/jobs.py",
        "from pkg.types import Alias\nfrom pkg.util import helper\n\n\
         def before(options: Alias = None):\n    return 1\n\n\
         def target():\n    ...\n\n\
         def far_one():\n    return 0\n\n\
         def far_two():\n    return helper(1)\n",
    );
    let snapshot = index(dir.path());
    let ranked = lane_for(&snapshot, "pkg.jobs.target", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id);
    // The function just before the target names `Alias` in its signature only; a function
    // further away calls `helper` in its body.
    assert!(pos("pkg.types.Alias").is_some(), "{ranked:?}");
    assert!(pos("pkg.util.helper") < pos("pkg.types.Alias"), "{ranked:?}");
}

#[test]
fn a_private_helper_nothing_else_uses_ranks_above_one_other_code_uses() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/__init__.py",
        "def _used_elsewhere(x):\n    return x\n\n\
         def _orphan(x):\n    return x\n\n\
         def public(x):\n    return _used_elsewhere(x)\n\n\
         def stub(value):\n    \"\"\"Check a value.\"\"\"\n    ...\n",
    );
    // A test calling the orphan does not make it used: tests are not what code is written for.
    write(dir.path(), "tests/test_pkg.py", "from pkg import _orphan\n\n\ndef test_orphan():\n    _orphan(1)\n");
    let snapshot = index(dir.path());
    let ranked = lane_for(&snapshot, "pkg.stub", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(pos("pkg._orphan") < pos("pkg._used_elsewhere"), "{ranked:?}");
    assert_eq!(pos("pkg._orphan"), 0, "{ranked:?}");
}

fn features_for(snapshot: &Snapshot, name: &str) -> Vec<(String, fresco_query::retrieve::CandidateFeatures)> {
    features_with_analogues(snapshot, name, &[])
}

fn features_with_analogues(
    snapshot: &Snapshot,
    name: &str,
    analogues: &[String],
) -> Vec<(String, fresco_query::retrieve::CandidateFeatures)> {
    let target = resolve_target(snapshot, &ContextTarget::Unit(Symbol::Name(name.to_string()))).expect("target");
    let exclude: FxHashSet<String> = target.id.iter().cloned().collect();
    fresco_query::retrieve::candidate_features(snapshot, &target, None, false, analogues, &exclude)
}

#[test]
fn a_methods_namesake_on_a_collaborator_ranks_above_its_other_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/transport.py",
        "class Transport:\n    def open(self):\n        return 1\n\n    def send(self, request):\n        \
         return request\n\n    def reset(self):\n        return 2\n",
    );
    write(
        dir.path(),
        "pkg/client.py",
        "from pkg.transport import Transport\n\n\
         class Client:\n    def _send(self, request):\n        return request\n\n    def _other(self):\n        \
         return 1\n\n    def send(self, request):\n        \"\"\"Deliver it.\"\"\"\n        ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.client.Client.send");
    let same_name = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.same_name);
    assert_eq!(same_name("pkg.transport.Transport.send"), Some(1.0));
    assert_eq!(same_name("pkg.transport.Transport.open"), Some(0.0));
    // A private implementation of the same name is a namesake too.
    assert_eq!(same_name("pkg.client.Client._send"), Some(1.0));
    assert_eq!(same_name("pkg.client.Client._other"), Some(0.0));
    let ranked = lane_for(&snapshot, "pkg.client.Client.send", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(pos("pkg.transport.Transport.send") < pos("pkg.transport.Transport.open"), "{ranked:?}");
    assert!(pos("pkg.transport.Transport.send") < pos("pkg.transport.Transport.reset"), "{ranked:?}");
}

#[test]
fn what_the_overridden_version_and_a_sibling_in_the_file_use_counts_for_an_override() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/base.py",
        "class Base:\n    def flush(self):\n        return 1\n\n    def other(self):\n        return 2\n\n    \
         def close(self):\n        self.flush()\n",
    );
    // A sibling class in the target's file: its `close` uses its own `release`, and the target's
    // class has one too.
    write(
        dir.path(),
        "pkg/sub.py",
        "from pkg.base import Base\n\n\
         class Sibling(Base):\n    def release(self):\n        return 3\n\n    def close(self):\n        \
         self.release()\n\n\
         class Sub(Base):\n    def release(self):\n        return 4\n\n    def unrelated(self):\n        \
         return 5\n\n    def close(self):\n        \"\"\"Close it.\"\"\"\n        ...\n",
    );
    // A subclass in a test file is not family.
    write(
        dir.path(),
        "tests/test_sub.py",
        "from pkg.base import Base\n\n\nclass InTests(Base):\n    def close(self):\n        self.other()\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.sub.Sub.close");
    let family = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.family_users);
    // The family: `Base.close` and `Sibling.close`; each uses one thing.
    assert_eq!(family("pkg.base.Base.flush"), Some(0.5), "{features:?}");
    assert_eq!(family("pkg.sub.Sub.release"), Some(0.5), "{features:?}");
    assert_eq!(family("pkg.base.Base.other"), Some(0.0), "{features:?}");
    assert_eq!(family("pkg.sub.Sub.unrelated"), Some(0.0), "{features:?}");
    let ranked = lane_for(&snapshot, "pkg.sub.Sub.close", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(pos("pkg.sub.Sub.release") < pos("pkg.sub.Sub.unrelated"), "{ranked:?}");
    assert!(pos("pkg.base.Base.flush") < pos("pkg.base.Base.other"), "{ranked:?}");
}

#[test]
fn what_a_name_sibling_uses_counts_for_the_target() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/__init__.py",
        "class Reader:\n    pass\n\n\nclass Writer:\n    pass\n\n\nclass Other:\n    pass\n\n\n\
         def get_text_stdin():\n    return Reader()\n\n\n\
         def get_text_stdout():\n    return Writer()\n\n\n\
         def get_binary_stream():\n    return Other()\n\n\n\
         def get_text_stderr():\n    \"\"\"The error stream.\"\"\"\n    ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.get_text_stderr");
    let sibling = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.sibling_users);
    // Its siblings differ from it in one word: `get_text_stdin` and `get_text_stdout`, not
    // `get_binary_stream` (two words differ).
    assert_eq!(sibling("pkg.Reader"), Some(0.5), "{features:?}");
    assert_eq!(sibling("pkg.Writer"), Some(0.5), "{features:?}");
    assert_eq!(sibling("pkg.Other"), Some(0.0), "{features:?}");
}

#[test]
fn the_constructor_of_the_returned_class_counts_even_when_inherited() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/models.py",
        "class Session:\n    def __init__(self, data):\n        self.data = data\n\n    def save(self):\n        \
         return 1\n\n\nclass NullSession(Session):\n    pass\n\n\nclass Other:\n    def __init__(self):\n        \
         pass\n",
    );
    write(
        dir.path(),
        "pkg/factory.py",
        "from pkg.models import NullSession, Other\n\n\n\
         def make(kind: Other) -> \"NullSession\":\n    \"\"\"An empty session.\"\"\"\n    ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.factory.make");
    let constructor = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.return_constructor);
    // `NullSession` has no `__init__` of its own: the one it inherits runs. A parameter's class
    // is not what the function builds.
    assert_eq!(constructor("pkg.models.Session.__init__"), Some(1.0), "{features:?}");
    assert_eq!(constructor("pkg.models.Other.__init__"), Some(0.0), "{features:?}");
    let ranked = lane_for(&snapshot, "pkg.factory.make", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(pos("pkg.models.Session.__init__") < pos("pkg.models.Other.__init__"), "{ranked:?}");
}

#[test]
fn what_other_code_taking_the_named_class_uses_of_it_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/models.py",
        "class Request:\n    def __init__(self):\n        self.url = ''\n        self.method = ''\n        \
         self.body = b''\n\n    def read(self):\n        return self.body\n\n\n\
         class Response:\n    def __init__(self):\n        self.status = 200\n",
    );
    // Two functions taking a `Request` read its `url`; one of them its `method` too. Nothing
    // reads `body` but the class itself. Two functions taking a `Response` read its `status`.
    write(
        dir.path(),
        "pkg/log.py",
        "from pkg.models import Request, Response\n\n\n\
         def describe(request: Request) -> str:\n    return request.method + request.url\n\n\n\
         def link(request: Request) -> str:\n    return request.url\n\n\n\
         def ok(response: Response) -> bool:\n    return response.status == 200\n\n\n\
         def fine(response: Response) -> bool:\n    return response.status < 400\n",
    );
    write(
        dir.path(),
        "pkg/send.py",
        "from pkg.models import Request, Response\n\n\n\
         def send(request: Request) -> None:\n    \"\"\"Send it; the server answers with a Response.\"\"\"\n    ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.send.send");
    let type_users = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.type_users);
    assert_eq!(type_users("pkg.models.Request.url"), Some(1.0), "{features:?}");
    assert_eq!(type_users("pkg.models.Request.method"), Some(0.5), "{features:?}");
    assert_eq!(type_users("pkg.models.Request.body"), Some(0.0), "{features:?}");
    // A class only the docstring names does not count: what code taking a `Response` reads is
    // not what a function taking a `Request` needs.
    assert_eq!(type_users("pkg.models.Response.status"), Some(0.0), "{features:?}");
}

#[test]
fn what_an_override_in_a_subclass_uses_counts_for_the_method_it_overrides() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/base.py",
        "class Base:\n    def flush(self):\n        return 1\n\n    def other(self):\n        return 2\n\n    \
         def close(self):\n        \"\"\"Close it.\"\"\"\n        ...\n",
    );
    write(
        dir.path(),
        "pkg/sub.py",
        "from pkg.base import Base\n\n\nclass Sub(Base):\n    def close(self):\n        self.flush()\n        \
         super().close()\n",
    );
    // A test's subclass is not family.
    write(
        dir.path(),
        "tests/test_base.py",
        "from pkg.base import Base\n\n\nclass InTests(Base):\n    def close(self):\n        self.other()\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.base.Base.close");
    let family = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.family_users);
    assert_eq!(family("pkg.base.Base.flush"), Some(1.0), "{features:?}");
    assert_eq!(family("pkg.base.Base.other"), Some(0.0), "{features:?}");
}

#[test]
fn an_import_only_the_unwritten_body_can_use_ranks_first_unless_the_file_uses_it_otherwise() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/_impl.py", "def impl_helper(x):\n    return x\n");
    write(
        dir.path(),
        "pkg/util.py",
        "from pkg._impl import impl_helper\n\n\
         def for_target(x):\n    return x\n\n\
         def kept_for_old_callers(x):\n    return x\n\n\
         class Codes:\n    @classmethod\n    def is_error(cls, code):\n        return code >= 400\n",
    );
    write(
        dir.path(),
        "pkg/helpers.py",
        "def wanted(x):\n    return x\n\ndef exported(x):\n    return x\n\nMode = str\n",
    );
    write(
        dir.path(),
        "pkg/api.py",
        "from pkg import util\n\
         from pkg.util import Codes, for_target\n\
         from pkg.util import (  # noqa: F401\n    kept_for_old_callers,\n)\n\
         from pkg.helpers import Mode, exported, wanted\n\n\
         __all__ = [\"exported\"]\n\n\
         def other(code):\n    util.impl_helper(code)\n    return Codes.is_error(code)\n\n\
         def target(x, mode: Mode):\n    \"\"\"Do it.\"\"\"\n    ...\n\n\
         def written(x):\n    return other(x)\n",
    );
    let snapshot = index(dir.path());
    let flagged = |name: &str| -> Vec<String> {
        let mut ids: Vec<String> = features_for(&snapshot, name)
            .into_iter()
            .filter(|(_, f)| f.unused_import > 0.0)
            .map(|(id, _)| id)
            .collect();
        ids.sort();
        ids
    };
    // `Codes` is used through its member, the `noqa` import and the `__all__` name are kept on
    // purpose, `Mode` (a type alias) is what the target's signature names, the module `util` is
    // read by `other`: only two imports are there for the target's body.
    assert_eq!(flagged("pkg.api.target"), ["pkg.helpers.wanted", "pkg.util.for_target"]);
    // A written body says what it uses itself: a dead import is no evidence for it.
    assert!(flagged("pkg.api.written").is_empty(), "{:?}", flagged("pkg.api.written"));
    // A package's `__init__.py` imports what it offers; a whole module imported for the target
    // says which module (it is flagged itself), not which member.
    write(dir.path(), "pkg/sub/__init__.py", "from pkg.helpers import wanted\n\ndef pending():\n    ...\n");
    write(dir.path(), "pkg/mod.py", "from pkg import helpers\n\ndef pending():\n    ...\n");
    let snapshot = index(dir.path());
    let flagged = |name: &str| -> Vec<String> {
        features_for(&snapshot, name).into_iter().filter(|(_, f)| f.unused_import > 0.0).map(|(id, _)| id).collect()
    };
    assert!(flagged("pkg.sub.pending").is_empty(), "{:?}", flagged("pkg.sub.pending"));
    assert_eq!(flagged("pkg.mod.pending"), ["pkg.helpers"]);
    let ranked = lane_for(&snapshot, "pkg.api.target", &[]);
    let mut first_two: Vec<&str> = ranked.iter().take(2).map(String::as_str).collect();
    first_two.sort();
    assert_eq!(first_two, ["pkg.helpers.wanted", "pkg.util.for_target"], "{ranked:?}");
}

#[test]
fn a_namesake_on_a_class_the_targets_class_works_with_counts_more_than_one_elsewhere() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/transport.py",
        "class Transport:\n    def send(self, request):\n        return request\n\n\
         class Mailer:\n    def send(self, letter):\n        return letter\n",
    );
    write(
        dir.path(),
        "pkg/client.py",
        "from pkg.transport import Mailer, Transport\n\n\
         def notify(letter):\n    return Mailer().send(letter)\n\n\
         class Client:\n    def __init__(self):\n        self.transport = Transport()\n\n    \
         def send(self, request):\n        \"\"\"Deliver it.\"\"\"\n        ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.client.Client.send");
    let get = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| (f.same_name, f.collaborator_namesake));
    // `Client.__init__` builds a `Transport`; only the module's function uses a `Mailer`.
    assert_eq!(get("pkg.transport.Transport.send"), Some((1.0, 1.0)));
    assert_eq!(get("pkg.transport.Mailer.send"), Some((1.0, 0.0)));
    let ranked = lane_for(&snapshot, "pkg.client.Client.send", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(pos("pkg.transport.Transport.send") < pos("pkg.transport.Mailer.send"), "{ranked:?}");
}

#[test]
fn a_public_constant_or_attribute_nothing_else_uses_counts_like_an_unused_private_helper() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/__init__.py",
        "PULSE_SIZE = 20\nMode = str\n\n\
         def unused_function():\n    return 1\n\n\
         class Serializer:\n    default_tags = [1, 2]\n    read_elsewhere = 3\n\n    \
         def __init__(self):\n        self.tags = {}\n\n    \
         def unused_api(self):\n        return 1\n\n    \
         def other(self):\n        return self.read_elsewhere + len(self.tags)\n\n    \
         def setup(self, mode: Mode):\n        \"\"\"Register the default tags.\"\"\"\n        ...\n",
    );
    // A test reading the attribute does not make it used: tests are not what code is written for.
    write(
        dir.path(),
        "tests/test_pkg.py",
        "from pkg import Serializer\n\n\ndef test_tags():\n    assert Serializer.default_tags\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.Serializer.setup");
    let unread = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.unread_variable);
    assert_eq!(unread("pkg.Serializer.default_tags"), Some(1.0));
    assert_eq!(unread("pkg.PULSE_SIZE"), Some(1.0));
    // Read by another method, written by `__init__`: used elsewhere.
    assert_eq!(unread("pkg.Serializer.read_elsewhere"), Some(0.0));
    assert_eq!(unread("pkg.Serializer.tags"), Some(0.0));
    // What the target's own signature uses is explained by the signature.
    assert_eq!(unread("pkg.Mode"), Some(0.0));
    // A public function or method nothing calls is an interface, not evidence.
    assert_eq!(unread("pkg.Serializer.unused_api"), Some(0.0));
    assert_eq!(unread("pkg.unused_function"), Some(0.0));
}

#[test]
fn a_whole_module_import_reaches_what_the_module_re_exports() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "from pkg.termui import pause\n");
    write(dir.path(), "pkg/termui.py", "def pause(info=None):\n    \"\"\"Wait for a key.\"\"\"\n    return info\n");
    write(
        dir.path(),
        "examples/demo.py",
        "import pkg\n\n\ndef menu():\n    return 1\n\n\ndef pause():\n    \"\"\"Show how to pause.\"\"\"\n    ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "demo.pause");
    assert!(features.iter().any(|(id, _)| id == "pkg.termui.pause"), "{features:?}");
    let ranked = lane_for(&snapshot, "demo.pause", &[]);
    // The module nothing else reads was imported for the target; what it re-exports comes next.
    let first_two: Vec<&str> = ranked.iter().take(2).map(String::as_str).collect();
    assert_eq!(first_two, ["pkg", "pkg.termui.pause"], "{ranked:?}");
}

/// A package re-exporting a module's names with a star import (falcon's `vendor.mimeparse`):
/// the module imported by name reaches the names it copies in (public ones, without `__all__`).
#[test]
fn a_module_import_reaches_what_the_module_star_imports() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "app/__init__.py", "");
    write(dir.path(), "app/vendor/__init__.py", "");
    write(dir.path(), "app/vendor/mimeparse/__init__.py", "from .mimeparse import *  # NOQA\nimport os\n");
    write(
        dir.path(),
        "app/vendor/mimeparse/mimeparse.py",
        "def best_match(supported, header):\n    return supported[0]\n\n\ndef quality(mime_type, ranges):\n    return 1.0\n\n\n\
         def _parse(mime):\n    return mime\n",
    );
    write(
        dir.path(),
        "app/request.py",
        "from app.vendor import mimeparse\n\n\nclass Request:\n    def client_prefers(self, media_types):\n        \"\"\"The media type the client prefers.\"\"\"\n        ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "app.request.Request.client_prefers");
    for reached in ["app.vendor.mimeparse.mimeparse.best_match", "app.vendor.mimeparse.mimeparse.quality"] {
        assert!(features.iter().any(|(id, _)| id == reached), "{reached}: {features:?}");
    }
    // A private name is not copied by the star import.
    assert!(!features.iter().any(|(id, _)| id == "app.vendor.mimeparse.mimeparse._parse"), "{features:?}");
}

#[test]
fn a_function_local_to_another_function_is_marked_unless_it_shares_the_targets_owner() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/app.py",
        "def route(rule):\n    def decorator(f):\n        return f\n    return decorator\n\n\n\
         @route(\"/\")\ndef index():\n    return 1\n\n\n\
         def outer():\n    def step():\n        return 2\n\n    def finish():\n        \"\"\"Finish.\"\"\"\n        ...\n\n    \
         return finish() + step()\n\n\n\
         def serve():\n    \"\"\"Serve the app.\"\"\"\n    ...\n",
    );
    let snapshot = index(dir.path());
    let local = |target: &str, id: &str| {
        features_for(&snapshot, target).into_iter().find(|(c, _)| c == id).map(|(_, f)| f.local_elsewhere)
    };
    assert_eq!(local("pkg.app.serve", "pkg.app.route.decorator"), Some(1.0));
    assert_eq!(local("pkg.app.serve", "pkg.app.route"), Some(0.0));
    assert_eq!(local("pkg.app.serve", "pkg.app.outer.step"), Some(1.0));
    // A sibling inside the same function is the target's own neighbour.
    assert_eq!(local("pkg.app.outer.finish", "pkg.app.outer.step"), Some(0.0));
}

#[test]
fn a_base_member_the_class_defines_again_ranks_below_the_redefinition() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/io.py",
        "class Base:\n    def close(self):\n        return 0\n\n    def flush(self):\n        return 1\n\n\
         \x20   def send(self, data):\n        return data\n\n\n\
         class Stream(Base):\n    def close(self):\n        self.flush()\n        return super().close()\n\n\
         \x20   def send(self, data):\n        \"\"\"Send and close.\"\"\"\n        ...\n\n\
         \x20   def write(self, data):\n        \"\"\"Write and close.\"\"\"\n        ...\n",
    );
    let snapshot = index(dir.path());
    let shadowed = |target: &str, id: &str| {
        features_for(&snapshot, target).into_iter().find(|(c, _)| c == id).map(|(_, f)| f.shadowed)
    };
    assert_eq!(shadowed("pkg.io.Stream.write", "pkg.io.Base.close"), Some(1.0));
    assert_eq!(shadowed("pkg.io.Stream.write", "pkg.io.Base.send"), Some(1.0));
    assert_eq!(shadowed("pkg.io.Stream.write", "pkg.io.Base.flush"), Some(0.0));
    assert_eq!(shadowed("pkg.io.Stream.write", "pkg.io.Stream.close"), Some(0.0));
    // An override reaches the version it overrides through super().
    assert_eq!(shadowed("pkg.io.Stream.send", "pkg.io.Base.send"), Some(0.0));
    let ranked = lane_for(&snapshot, "pkg.io.Stream.write", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id);
    assert!(pos("pkg.io.Base.flush") < pos("pkg.io.Base.close"), "{ranked:?}");
}

#[test]
fn analogues_and_name_siblings_count_for_what_their_bodies_use_not_their_annotations() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/types.py", "HeaderTypes = dict\n\n\ndef encode(value):\n    return value\n");
    write(
        dir.path(),
        "pkg/client.py",
        "from pkg.types import HeaderTypes, encode\n\n\n\
         def send_headers(headers: HeaderTypes):\n    \"\"\"Send the headers.\"\"\"\n    return encode(headers)\n\n\n\
         def send_cookies(cookies: HeaderTypes):\n    \"\"\"Send the cookies.\"\"\"\n    ...\n",
    );
    let snapshot = index(dir.path());
    let features = features_with_analogues(&snapshot, "pkg.client.send_cookies", &["pkg.client.send_headers".into()]);
    let analogue_users = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.analogue_users);
    assert_eq!(analogue_users("pkg.types.encode"), Some(1.0), "{features:?}");
    assert_eq!(analogue_users("pkg.types.HeaderTypes"), Some(0.0), "{features:?}");
    // `send_headers` is also a name sibling of `send_cookies`: the same rule.
    let sibling_users = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.sibling_users);
    assert_eq!(sibling_users("pkg.types.encode"), Some(1.0), "{features:?}");
    assert_eq!(sibling_users("pkg.types.HeaderTypes"), Some(0.0), "{features:?}");
}

#[test]
fn a_module_the_file_binds_is_a_candidate_ranked_by_who_reads_it_and_stays_out_of_the_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/errors.py", "class Missing(Exception):\n    pass\n\nclass Invalid(Exception):\n    pass\n");
    write(dir.path(), "pkg/codec.py", "def encode(v):\n    return v\n");
    write(dir.path(), "pkg/unused.py", "def nothing():\n    return None\n");
    write(dir.path(), "pkg/starred.py", "def spread():\n    return 1\n");
    write(
        dir.path(),
        "pkg/store.py",
        "from pkg import errors\nimport pkg.codec as codec\nfrom pkg import unused\nfrom pkg.starred import *\n\n\
         class Store:\n    def get(self, key):\n        if key is None:\n            raise errors.Invalid(key)\n        \
         return codec.encode(key)\n\n    def drop(self, key):\n        raise errors.Missing(key)\n\n    \
         def put(self, key, value):\n        \"\"\"Store value under key.\"\"\"\n        ...\n\n\
         def helper():\n    return unused.nothing()\n",
    );
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.store.Store.put");
    let of = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.clone());
    // Both of the class's other methods read `errors`, one reads `codec`; `unused` is read only
    // outside the class; no name is bound to the package, nor to a module star-imported.
    let errors = of("pkg.errors").expect("errors is a candidate");
    let codec = of("pkg.codec").expect("codec is a candidate");
    let unused = of("pkg.unused").expect("unused is a candidate");
    assert_eq!((errors.imported_module, codec.imported_module, unused.imported_module), (1.0, 1.0, 1.0));
    assert!(errors.class_users > codec.class_users && codec.class_users > unused.class_users, "{features:?}");
    assert!(of("pkg").is_none() && of("pkg.starred").is_none(), "{features:?}");
    assert!(of("pkg.starred.spread").is_some(), "what the star import brings is: {features:?}");
    let ranked = lane_for(&snapshot, "pkg.store.Store.put", &[]);
    let at = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(at("pkg.errors") < at("pkg.codec") && at("pkg.codec") < at("pkg.unused"), "{ranked:?}");
    // The context ranks the module but never pastes a whole file as a unit's source (the
    // assembler takes code units only).
    let target =
        resolve_target(&snapshot, &ContextTarget::Unit(Symbol::Name("pkg.store.Store.put".into()))).expect("target");
    let fused = fuse(&[(Lane::Graph, ranked.clone())]);
    let deps: FxHashSet<String> = ranked.iter().take(10).cloned().collect();
    let block = assemble(&snapshot, None, &target, &fused, &deps, 4000, None);
    assert!(!block.units.iter().any(|u| u.name == "pkg.errors"), "{:?}", block.units);
    assert!(
        block.units.iter().any(|u| u.name == "pkg.errors.Missing" || u.name == "pkg.errors.Invalid"),
        "{:?}",
        block.units
    );
}

#[test]
fn an_attribute_named_after_a_class_of_the_package_reaches_that_classs_members() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/connection.py",
        "class EC2Connection:\n    def create_tags(self, ids, tags):\n        return ids\n\n\
         class S3Connection:\n    def make_bucket(self, name):\n        return name\n",
    );
    write(dir.path(), "other/__init__.py", "");
    write(dir.path(), "other/table.py", "class Table:\n    def describe(self):\n        return 1\n");
    write(
        dir.path(),
        "pkg/tagged.py",
        "class Tagged:\n    def __init__(self, connection=None, table=None):\n        \
         self.connection = connection\n        self.table = table\n\n    \
         def add_tags(self, tags):\n        \"\"\"Add tags to this object.\"\"\"\n        ...\n",
    );
    let snapshot = index(dir.path());
    let ids: Vec<String> =
        features_for(&snapshot, "pkg.tagged.Tagged.add_tags").into_iter().map(|(id, _)| id).collect();
    // `connection` names both connection classes of the package (at most three may match);
    // `table` names a class of another package, which the attribute says nothing about.
    for reached in ["pkg.connection.EC2Connection.create_tags", "pkg.connection.S3Connection.make_bucket"] {
        assert!(ids.iter().any(|id| id == reached), "{reached} not in {ids:?}");
    }
    assert!(!ids.iter().any(|id| id.starts_with("other.")), "{ids:?}");
}

#[test]
fn the_target_ranks_as_its_own_dependency_when_it_calls_itself_or_could() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/walk.py",
        "def flatten(d):\n    return [x for v in d for x in flatten(v)]\n\n\
         def merge(a, b):\n    \"\"\"Merge b into a, nested dicts too.\"\"\"\n    ...\n\n\
         def size(d):\n    return len(d)\n",
    );
    write(dir.path(), "pkg/plain.py", "def helper():\n    return 1\n\ndef stub():\n    ...\n");
    let snapshot = index(dir.path());
    // A written body that calls itself lists the target among what it uses.
    let ranked = lane_for(&snapshot, "pkg.walk.flatten", &[]);
    assert_eq!(ranked.first().map(String::as_str), Some("pkg.walk.flatten"), "{ranked:?}");
    // A written body that does not: never, though it uses no unit (only a builtin).
    let ranked = lane_for(&snapshot, "pkg.walk.size", &[]);
    assert!(!ranked.iter().any(|r| r == "pkg.walk.size"), "{ranked:?}");
    // A body not written yet: a candidate, with the file's other recursive functions as evidence.
    let itself = |name: &str| {
        features_for(&snapshot, name)
            .into_iter()
            .find(|(id, _)| id == name)
            .map(|(_, f)| (f.itself, f.recursive_neighbours))
    };
    assert_eq!(itself("pkg.walk.merge"), Some((1.0, 1.0)));
    assert_eq!(itself("pkg.plain.stub"), Some((1.0, 0.0)));
    // The evidence lifts it: beside a recursive function it ranks above the file's other code.
    let ranked = lane_for(&snapshot, "pkg.walk.merge", &[]);
    let pos = |id: &str| ranked.iter().position(|r| r == id);
    assert!(pos("pkg.walk.merge") < pos("pkg.walk.size"), "{ranked:?}");
    // It is ranked, never pasted: the context text would repeat the code being written.
    let target =
        resolve_target(&snapshot, &ContextTarget::Unit(Symbol::Name("pkg.walk.merge".into()))).expect("target");
    let fused = fuse(&[(Lane::Graph, ranked.clone())]);
    let deps: FxHashSet<String> = ranked.iter().cloned().collect();
    let block = assemble(&snapshot, None, &target, &fused, &deps, 4000, None);
    assert!(!block.units.iter().any(|u| u.name == "pkg.walk.merge"), "{:?}", block.units);
    assert!(block.units.iter().any(|u| u.name == "pkg.walk.size"), "{:?}", block.units);
}

#[test]
fn a_new_function_given_a_line_lives_in_the_class_there_beside_the_functions_around_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "shop/__init__.py", "");
    let models = "class Cart:\n    def __init__(self):\n        self.items = []\n\n    def subtotal(self):\n        \
                  return sum(self.items)\n\n    def tax(self):\n        return self.subtotal() * 0.2\n\n\n\
                  class Order:\n    def __init__(self):\n        self.lines = []\n\n    def count(self):\n        \
                  return len(self.lines)\n";
    write(dir.path(), "shop/models.py", models);
    let snapshot = index(dir.path());
    let new = |file: &str, line: Option<u32>| {
        let target = ContextTarget::New {
            text: "def total(self):\n    \"\"\"The subtotal with tax.\"\"\"".into(),
            file: file.into(),
            line,
        };
        resolve_target(&snapshot, &target)
    };
    // Two classes: without a line the method goes in the one its words point to (`subtotal`).
    assert_eq!(new("shop/models.py", None).expect("target").class.as_deref(), Some("shop.models.Cart"));
    // Line 7 is inside Cart (between `subtotal` and `tax`); line 11, a blank line below Cart's
    // last, still Cart's for a method; line 18 (after the file's 17) Order's.
    for (line, class) in [(7, "shop.models.Cart"), (11, "shop.models.Cart"), (18, "shop.models.Order")] {
        let target = new("shop/models.py", Some(line)).expect("target");
        assert_eq!(target.class.as_deref(), Some(class), "line {line}");
    }
    // Past the end of the file plus one: an error naming the file's length.
    let Err(err) = new("shop/models.py", Some(40)) else { panic!("line 40 is past the end") };
    assert!(err.to_string().contains("17 lines"), "{err}");
    // Placed in Cart at line 7, its neighbours are `subtotal` and `tax`: what they use counts.
    let target = new("shop/models.py", Some(7)).expect("target");
    let features =
        fresco_query::retrieve::candidate_features(&snapshot, &target, None, false, &[], &FxHashSet::default());
    let adjacent = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.adjacent_users);
    assert_eq!(adjacent("shop.models.Cart.items"), Some(1.0), "{features:?}");
    assert_eq!(adjacent("shop.models.Cart.subtotal"), Some(1.0), "{features:?}");
    let own_class = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.own_class);
    assert_eq!(own_class("shop.models.Cart.items"), Some(1.0), "{features:?}");
    assert!(own_class("shop.models.Order.lines").is_none_or(|o| o == 0.0), "Order's members are not its own");
    // Without a line, the functions of its class sharing the most rare words with the text
    // stand in for its neighbours: `subtotal` (the docstring says it), not `__init__`.
    let target = new("shop/models.py", None).expect("target");
    let features =
        fresco_query::retrieve::candidate_features(&snapshot, &target, None, false, &[], &FxHashSet::default());
    let adjacent = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.adjacent_users);
    assert_eq!(adjacent("shop.models.Cart.items"), Some(1.0), "{features:?}");
    assert_eq!(adjacent("shop.models.Order.lines").unwrap_or(0.0), 0.0, "{features:?}");
}

#[test]
fn recursion_is_listed_once_for_functions_only_and_always_as_a_dependency() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/rec.py",
        "def fact(n): return n * fact(n - 1) if n else 1\n\n\
         def todo(x):\n    raise NotImplementedError(todo(x))\n\n\
         class Node:\n    empty = staticmethod(lambda: Node())\n\n\
         def walk(tree, k=1):\n    def visit(t):\n        return t\n    helper()\n    return [walk(c) for c in visit(tree)]\n\n\
         def helper():\n    return 1\n",
    );
    let snapshot = index(dir.path());
    // A one-line body is a body: its call to itself is listed.
    let ranked = lane_for(&snapshot, "pkg.rec.fact", &[]);
    assert_eq!(ranked.first().map(String::as_str), Some("pkg.rec.fact"), "{ranked:?}");
    // A stub that calls itself lists itself once.
    let ranked = lane_for(&snapshot, "pkg.rec.todo", &[]);
    assert_eq!(ranked.iter().filter(|r| *r == "pkg.rec.todo").count(), 1, "{ranked:?}");
    // A class naming itself in its body does not depend on itself.
    let ranked = lane_for(&snapshot, "pkg.rec.Node", &[]);
    assert!(!ranked.iter().any(|r| r == "pkg.rec.Node"), "{ranked:?}");
    // A nested function takes no dependency slot: with k 2 the target is still a dependency.
    let out = fresco_query::run(&fresco_query::Context::new(&snapshot), "context pkg.rec.walk k 2 lanes graph")
        .expect("context");
    let roles: Vec<(&str, Option<&str>)> = out.results.iter().map(|r| (r.name.as_str(), r.role)).collect();
    assert!(!roles.iter().any(|(n, _)| *n == "pkg.rec.walk.visit"), "{roles:?}");
    assert!(roles.contains(&("pkg.rec.walk", Some("dependency"))), "{roles:?}");
}

#[test]
fn a_line_decides_which_function_and_class_a_text_is_and_a_skipped_file_ignores_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    let io = "class Reader:\n    def save(self):\n        return 1\n\n\n\
              def builder():\n    class Local:\n        pass\n    return Local\n\n\n\
              class Writer:\n    def flush(self):\n        return 2\n";
    write(dir.path(), "pkg/io.py", io);
    std::fs::write(dir.path().join("pkg/bin.py"), b"x = '\xff\xfe'\n").expect("write");
    let snapshot = index(dir.path());
    let at = |text: &str, file: &str, line: Option<u32>| {
        resolve_target(&snapshot, &ContextTarget::New { text: text.into(), file: file.into(), line })
            .map(|t| (t.id, t.class))
            .map_err(|e| e.to_string())
    };
    // Without a line, the file's only `save` is it; at a line inside Writer, a new method of Writer.
    let save = "def save(self):\n    \"\"\"Save.\"\"\"";
    assert_eq!(at(save, "pkg/io.py", None), Ok((Some("pkg.io.Reader.save".into()), Some("pkg.io.Reader".into()))));
    assert_eq!(at(save, "pkg/io.py", Some(14)), Ok((None, Some("pkg.io.Writer".into()))));
    assert_eq!(at(save, "pkg/io.py", Some(3)), Ok((Some("pkg.io.Reader.save".into()), Some("pkg.io.Reader".into()))));
    // Below `builder` (line 10), a method goes on Reader, not on the class local to `builder`.
    assert_eq!(at("def load(self):", "pkg/io.py", Some(10)), Ok((None, Some("pkg.io.Reader".into()))));
    // Text with no `def` header, at a line inside Writer: Writer's.
    assert_eq!(at("Flush twice.", "pkg/io.py", Some(14)), Ok((None, Some("pkg.io.Writer".into()))));
    // A file the index skipped (not UTF-8) has no lines to place by: the line is not an error.
    assert!(at("def f():", "pkg/bin.py", Some(5)).is_ok(), "{:?}", at("def f():", "pkg/bin.py", Some(5)));
}

#[test]
fn a_one_line_stub_keeps_its_annotations_as_header_and_a_class_keeps_dependency_slots() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/paths.py", "class Path:\n    pass\n");
    write(
        dir.path(),
        "pkg/check.py",
        "from pkg.paths import Path\nfrom pkg.util import shape, verify_mode\n\n\n\
         def verify(path: Path) -> int: ...\n\n\n\
         class Big:\n    a = 1\n    b = 2\n    c = 3\n    d = 4\n\n    def m(self):\n        return shape(self.a)\n",
    );
    write(dir.path(), "pkg/util.py", "def verify_mode(x):\n    return x\n\n\ndef shape(x):\n    return x\n");
    let snapshot = index(dir.path());
    // The import only the one-line stub can be for ranks first; its annotation's `Path` is header.
    let ranked = lane_for(&snapshot, "pkg.check.verify", &[]);
    assert_eq!(ranked.first().map(String::as_str), Some("pkg.util.verify_mode"), "{ranked:?}");
    // A class's own members are inside it: they take none of `k 1`'s slots.
    let out = fresco_query::run(&fresco_query::Context::new(&snapshot), "context pkg.check.Big k 1 lanes graph")
        .expect("context");
    let deps: Vec<&str> =
        out.results.iter().filter(|r| r.role == Some("dependency")).map(|r| r.name.as_str()).collect();
    assert_eq!(deps, ["pkg.util.shape"], "{:?}", out.results.iter().map(|r| &r.name).collect::<Vec<_>>());
    let hits = out.lanes.as_ref().and_then(|l| l.get("graph")).map(|r| r.hits);
    assert!(hits.is_some_and(|h| h >= 1), "{hits:?}");
}

#[test]
fn members_of_the_class_an_attribute_seems_to_hold_carry_their_affinity() {
    // Nothing says what `self.connection` holds; the calls on it name methods `Connection`
    // defines (and `Other` defines one of): `Connection` is what it holds, by duck typing.
    let volume = |calls_on_the_attribute: bool| {
        let (update, delete) = if calls_on_the_attribute {
            ("self.connection.get_all_volumes([1])", "self.connection.delete_volume(1)")
        } else {
            ("1", "2")
        };
        format!(
            "import pkg.connection\n\n\
             class Volume:\n    def __init__(self, connection=None):\n        self.connection = connection\n\n    \
             def update(self):\n        return {update}\n\n    def delete(self):\n        return {delete}\n\n    \
             def attach(self, instance_id):\n        \"\"\"Attach this volume to an instance.\"\"\"\n        ...\n"
        )
    };
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/connection.py",
        "class Connection:\n    def get_all_volumes(self, ids):\n        return ids\n\n    \
         def delete_volume(self, vid):\n        return vid\n\n    def attach_volume(self, vid, instance):\n        \
         return vid\n\n\nclass Other:\n    def delete_volume(self, vid):\n        return vid\n\n    \
         def attach_volume(self, vid, instance):\n        return vid\n",
    );
    write(dir.path(), "pkg/volume.py", &volume(true));
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.volume.Volume.attach");
    let of = |id: &str| features.iter().find(|(c, _)| c == id).map(|(_, f)| f.clone());
    let attach = of("pkg.connection.Connection.attach_volume").expect("a candidate");
    assert!(attach.word_affinity > 0.0, "{attach:?}");
    assert_eq!(attach.receiver_words, attach.word_affinity, "a member of the class the attribute holds");
    // `Other` defines fewer of the names called on the attribute: not what it holds.
    if let Some(other) = of("pkg.connection.Other.attach_volume") {
        assert_eq!(other.receiver_words, 0.0, "{other:?}");
    }
    // Without the calls on the attribute, nothing says what it holds.
    write(dir.path(), "pkg/volume.py", &volume(false));
    let snapshot = index(dir.path());
    let features = features_for(&snapshot, "pkg.volume.Volume.attach");
    let attach = features.iter().find(|(c, _)| c == "pkg.connection.Connection.attach_volume").map(|(_, f)| f);
    assert!(attach.is_none_or(|f| f.receiver_words == 0.0 && f.receiver_dense == 0.0), "{attach:?}");
}

/// A private member of another class (`Pool._reap`) is that class's business: it ranks after
/// every other candidate. The target's own class and its bases keep their private members; a module's private function is not a class's member.
#[test]
fn a_private_member_of_another_class_ranks_after_every_other_candidate() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/pool.py",
        "def _clock():\n    return 0\n\n\n\
         class Pool:\n    def _reap(self):\n        return _clock()\n\n    def reap(self):\n        return self._reap()\n\n\n\
         class Base:\n    def _flush(self):\n        return 1\n\n\n\
         class Conn(Base):\n    def _send(self, pool: Pool):\n        return pool.reap()\n\n\
         \x20   class Options:\n        def _set(self):\n            return 2\n\n        def apply(self):\n            \
         \"\"\"Apply the options to the pool.\"\"\"\n            ...\n\n\
         \x20   def close(self, pool: Pool):\n        \"\"\"Reap the pool and close.\"\"\"\n        ...\n\n\
         \x20   def later(self):\n        def flush_pool():\n            \"\"\"Flush the connection.\"\"\"\n            ...\n\n        \
         return flush_pool\n",
    );
    let snapshot = index(dir.path());
    let marked = |target: &str, id: &str| {
        features_for(&snapshot, target).into_iter().find(|(c, _)| c == id).map(|(_, f)| f.private_of_another_class)
    };
    assert_eq!(marked("pkg.pool.Conn.close", "pkg.pool.Pool._reap"), Some(1.0));
    assert_eq!(marked("pkg.pool.Conn.close", "pkg.pool.Pool.reap"), Some(0.0));
    assert_eq!(marked("pkg.pool.Conn.close", "pkg.pool.Conn._send"), Some(0.0), "its own class");
    assert_eq!(marked("pkg.pool.Conn.close", "pkg.pool.Base._flush"), Some(0.0), "a base");
    assert_eq!(marked("pkg.pool.Conn.close", "pkg.pool._clock"), Some(0.0), "a module's private function");
    assert_eq!(marked("pkg.pool.Conn.Options.apply", "pkg.pool.Pool._reap"), Some(1.0));
    // A closure in a method is the class's code too: its class's bases' private members are its own.
    let closure = features_for(&snapshot, "pkg.pool.Conn.later.flush_pool");
    let flag = |id: &str| closure.iter().find(|(c, _)| c == id).map(|(_, f)| f.private_of_another_class);
    assert_eq!(flag("pkg.pool.Pool._reap"), Some(1.0), "{closure:?}");
    assert!(flag("pkg.pool.Base._flush").is_none_or(|f| f == 0.0), "{closure:?}");
    assert!(flag("pkg.pool.Conn._send").is_none_or(|f| f == 0.0), "{closure:?}");
    let ranked = lane_for(&snapshot, "pkg.pool.Conn.close", &[]);
    let at = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert_eq!(at("pkg.pool.Pool._reap"), ranked.len() - 1, "{ranked:?}");
}

/// A classmethod or staticmethod has no instance: an attribute its class's methods set on `self`
/// (and its class body does not define) ranks after every other candidate for it, but not for
/// an ordinary method, for which the class's initialisers rank last instead.
#[test]
fn what_a_method_cannot_reach_or_has_already_run_ranks_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(
        dir.path(),
        "pkg/shape.py",
        "class Base:\n    def __init__(self):\n        self.origin = 0\n\n\n\
         class Box(Base):\n    LIMIT = 3\n    size = None\n\n    def __init__(self, size):\n        super().__init__()\n        \
         self.size = size\n        self.area = size * size\n\n    def grow(self):\n        \"\"\"Grow the box.\"\"\"\n        ...\n\n\
         \x20   @classmethod\n    def unit(cls):\n        \"\"\"A box of size one, within the limit.\"\"\"\n        ...\n\n\
         \x20   @classmethod  # registered once\n    def register(cls):\n        cls.registry = {}\n\n\
         \x20   @staticmethod\n    def check(size):\n        \"\"\"Check a size against the limit.\"\"\"\n        ...\n",
    );
    let snapshot = index(dir.path());
    let marked = |target: &str, id: &str| {
        features_for(&snapshot, target).into_iter().find(|(c, _)| c == id).map(|(_, f)| f.instance_out_of_reach)
    };
    for target in ["pkg.shape.Box.unit", "pkg.shape.Box.check"] {
        assert_eq!(marked(target, "pkg.shape.Box.area"), Some(1.0), "{target}");
        assert_eq!(marked(target, "pkg.shape.Base.origin"), Some(1.0), "{target}: a base's");
        assert_eq!(marked(target, "pkg.shape.Box.LIMIT"), Some(0.0), "{target}: the class body's");
        assert_eq!(marked(target, "pkg.shape.Box.size"), Some(0.0), "{target}: also in the class body");
        assert_eq!(marked(target, "pkg.shape.Box.__init__"), Some(0.0), "{target}");
        assert_eq!(marked(target, "pkg.shape.Box.registry"), Some(0.0), "{target}: stored on cls, the class's");
    }
    assert_eq!(marked("pkg.shape.Box.grow", "pkg.shape.Box.area"), Some(0.0), "an ordinary method has self");
    let ranked = lane_for(&snapshot, "pkg.shape.Box.unit", &[]);
    let at = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(at("pkg.shape.Box.area") > at("pkg.shape.Box.LIMIT"), "{ranked:?}");
    assert!(ranked.len() - at("pkg.shape.Box.area") <= 2, "{ranked:?}");
    // An ordinary method's instance was set up before it runs: its class's and bases'
    // initialisers rank last for it, not for the classmethod, which makes instances.
    let initialiser = |target: &str, id: &str| {
        features_for(&snapshot, target).into_iter().find(|(c, _)| c == id).map(|(_, f)| f.initialiser_already_run)
    };
    assert_eq!(initialiser("pkg.shape.Box.grow", "pkg.shape.Box.__init__"), Some(1.0));
    assert_eq!(initialiser("pkg.shape.Box.grow", "pkg.shape.Base.__init__"), Some(1.0));
    assert_eq!(initialiser("pkg.shape.Box.unit", "pkg.shape.Box.__init__"), Some(0.0));
    assert_eq!(initialiser("pkg.shape.Box.check", "pkg.shape.Box.__init__"), Some(0.0));
    let ranked = lane_for(&snapshot, "pkg.shape.Box.grow", &[]);
    let at = |id: &str| ranked.iter().position(|r| r == id).unwrap_or(usize::MAX);
    assert!(ranked.len() - at("pkg.shape.Box.__init__") <= 2, "{ranked:?}");
    // A method given as text is read the same way: decorated, or taking `cls` without the
    // decorator, it makes instances.
    for (text, has_instance) in [
        ("def resize(self, factor):", true),
        ("@classmethod\\ndef square(cls, side):", false),
        ("# made from a side\\n@classmethod  # noqa\\ndef square(cls, side):", false),
        ("def square(cls, side):", false),
    ] {
        let out = fresco_query::run(
            &fresco_query::Context::new(&snapshot),
            &format!("context for \"{text}\" in pkg/shape.py:24 budget 2000"),
        )
        .unwrap_or_else(|e| panic!("{text}: {e}"));
        let graph = &out.lane_hits.iter().find(|(lane, _)| *lane == "graph").expect("the graph lane").1;
        let at = |id: &str| graph.iter().position(|r| r == id).unwrap_or(usize::MAX);
        let area_last = graph.len().saturating_sub(at("pkg.shape.Box.area")) <= 3;
        let init_last = graph.len().saturating_sub(at("pkg.shape.Box.__init__")) <= 3;
        assert_eq!((init_last, area_last), (has_instance, !has_instance), "{text}: {graph:?}");
    }
}
