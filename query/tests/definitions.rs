//! A name defined more than once in one scope (`@overload` declarations before the implementation, a
//! property's getter and setter, a conditional redefinition): its definitions have the ids
//! `X`, `X#2`, `X#3`, calls resolve to the last, and the plain name selects them all.

use std::path::Path;

use fresco_graph::Snapshot;
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::ast::{ContextTarget, Symbol};
use fresco_query::retrieve::resolve_target;
use fresco_query::{Context, Output};

const MODULE: &str = r#"import typing as t


class Adapter:
    @t.overload
    def match(self, x: int) -> int: ...

    @t.overload
    def match(self, x: str) -> str: ...

    def match(self, x):
        """Match x against the rules."""
        return helper(x)

    @property
    def size(self):
        return self._size

    @size.setter
    def size(self, value):
        self._size = value


def helper(x):
    return x


if helper(1):
    def pick():
        return 1
else:
    def pick():
        def inner():
            return 2
        return helper(inner())


def use():
    return Adapter().match(1)


def choose():
    return pick()
"#;

fn index(root: &Path) -> Snapshot {
    std::fs::create_dir_all(root.join("pkg")).expect("mkdir");
    std::fs::write(root.join("pkg/__init__.py"), "").expect("write");
    std::fs::write(root.join("pkg/m.py"), MODULE).expect("write");
    std::fs::write(
        root.join("pkg/two.py"),
        "class A:\n    def run(self, x):\n        return x\n\n\nclass B:\n    def run(self, y):\n        return y\n",
    )
    .expect("write");
    std::fs::write(
        root.join("pkg/deco.py"),
        "class A:\n    @staticmethod\n    def run(x):\n        return x\n\n\nclass B:\n    def run(self, y):\n        return y\n\n\n\
         class C:\n    @classmethod\n    def run(cls, y):\n        return y\n\n\nclass D:\n    @other\n    def run(cls, y):\n        return y\n",
    )
    .expect("write");
    // A class defined twice: its second definition's members are `C#2.f`, `C#2.f#2`, ...
    std::fs::write(
        root.join("pkg/twice.py"),
        "import typing as t\n\ntry:\n    import fast\n\n    class Codec:\n        def encode(self, x):\n            return x\n\
         except ImportError:\n    class Codec:\n        @t.overload\n        def encode(self, x: int) -> int: ...\n\n        \
         @t.overload\n        def encode(self, x: str) -> str: ...\n\n        def encode(self, x):\n            return x\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}

fn run(snapshot: &Snapshot, text: &str) -> Output {
    fresco_query::run(&Context::new(snapshot), text).unwrap_or_else(|e| panic!("query {text:?} failed: {e}"))
}

fn names(out: &Output) -> Vec<&str> {
    out.results.iter().map(|r| r.name.as_str()).collect()
}

fn context_target(snapshot: &Snapshot, name: &str) -> Option<String> {
    resolve_target(snapshot, &ContextTarget::Unit(Symbol::Name(name.to_string()))).expect("target").id
}

#[test]
fn the_plain_name_selects_every_definition_and_reaches_what_calls_the_last() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let shown = run(&snapshot, "show pkg.m.Adapter.match");
    assert_eq!(names(&shown), ["pkg.m.Adapter.match", "pkg.m.Adapter.match#2", "pkg.m.Adapter.match#3"]);
    // The call resolves to the implementation, the definition Python binds last.
    assert_eq!(names(&run(&snapshot, "callers pkg.m.Adapter.match#3")), ["pkg.m.use"]);
    assert_eq!(names(&run(&snapshot, "callers pkg.m.Adapter.match")), ["pkg.m.use"]);
    assert_eq!(names(&run(&snapshot, "callers pkg.m.pick")), ["pkg.m.choose"]);
    // A suffixed id selects that definition alone; `#1` names the first.
    assert_eq!(names(&run(&snapshot, "show pkg.m.Adapter.match#2")), ["pkg.m.Adapter.match#2"]);
    assert_eq!(names(&run(&snapshot, "show pkg.m.pick#1")), ["pkg.m.pick"]);
    assert!(fresco_query::run(&Context::new(&snapshot), "show pkg.m.helper#1").is_ok(), "every unit is its own #1");
    assert!(names(&run(&snapshot, "callees pkg.m.pick")).contains(&"pkg.m.helper"), "the second `pick` calls helper");
}

/// `where name = GLOB` selects what `find GLOB` does: every definition of the name, the
/// suffixed ones too.
#[test]
fn where_name_matches_every_definition_as_find_does() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let all = ["pkg.m.Adapter.match", "pkg.m.Adapter.match#2", "pkg.m.Adapter.match#3"];
    assert_eq!(names(&run(&snapshot, "find \"match\" in pkg/m.py")), all);
    for glob in ["match", "pkg.m.Adapter.match", "ma*"] {
        let piped = run(&snapshot, &format!("find \"*\" in pkg/m.py | where name = \"{glob}\""));
        assert_eq!(names(&piped), all, "{glob}");
    }
    let exact = run(&snapshot, "find \"*\" in pkg/m.py | where name = \"pkg.m.Adapter.match#2\"");
    assert_eq!(names(&exact), ["pkg.m.Adapter.match#2"]);
}

#[test]
fn context_assembles_for_the_implementation_not_an_overload_declaration_nor_a_setter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    assert_eq!(context_target(&snapshot, "pkg.m.Adapter.match").as_deref(), Some("pkg.m.Adapter.match#3"));
    assert_eq!(context_target(&snapshot, "pkg.m.Adapter.size").as_deref(), Some("pkg.m.Adapter.size"));
    assert_eq!(context_target(&snapshot, "pkg.m.pick").as_deref(), Some("pkg.m.pick#2"));
    assert_eq!(context_target(&snapshot, "pkg.m.Adapter.size#2").as_deref(), Some("pkg.m.Adapter.size#2"));
    assert_eq!(context_target(&snapshot, "pkg.m.pick#1").as_deref(), Some("pkg.m.pick"));
    // The answer says which unit it assembled for.
    let out = run(&snapshot, "context pkg.m.Adapter.match budget 500");
    let block = out.context.expect("a context");
    assert_eq!(block.target.as_deref(), Some("pkg.m.Adapter.match#3"));
    assert!(block.units.iter().any(|u| u.name == "pkg.m.helper"), "what the implementation calls comes first");
    assert!(
        out.notes
            .iter()
            .any(|n| n.starts_with("3 definitions of pkg.m.Adapter.match: the context is for pkg.m.Adapter.match#3")),
        "{:?}",
        out.notes
    );
    assert!(run(&snapshot, "context pkg.m.helper budget 500").notes.is_empty(), "one definition needs no note");
    // A glob matching a name's plain id stands for the name: the implementation, said so.
    for glob in ["pkg.m.Adapter.matc?", "pkg.m.*.match", "pkg.m.Adapter.match#?", "pkg.m.Adapter.match#*"] {
        let out = run(&snapshot, &format!("context {glob} budget 500"));
        assert_eq!(out.context.expect("a context").target.as_deref(), Some("pkg.m.Adapter.match#3"), "{glob}");
        assert!(out.notes.iter().any(|n| n.starts_with("3 definitions of pkg.m.Adapter.match")), "{:?}", out.notes);
    }
    // Several names, one of them defined more than once: that name's implementation.
    let out = run(&snapshot, "context pkg.m.Adapter.* budget 500");
    assert_eq!(out.context.expect("a context").target.as_deref(), Some("pkg.m.Adapter.match#3"));
    // A unit nested in one definition is a name of its own.
    let out = run(&snapshot, "context pkg.m.pick#2.inne? budget 500");
    assert_eq!(out.context.expect("a context").target.as_deref(), Some("pkg.m.pick#2.inner"));
    // A property's setter matched alone stands for the property: its getter.
    let out = run(&snapshot, "context pkg.m.Adapter.size#? budget 500");
    assert_eq!(out.context.expect("a context").target.as_deref(), Some("pkg.m.Adapter.size"));
    // A glob naming several units: the first is taken, and the answer says so.
    let out = run(&snapshot, "context pkg.two.*.run budget 500");
    assert_eq!(out.context.expect("a context").target.as_deref(), Some("pkg.two.A.run"));
    assert!(
        out.notes.iter().any(
            |n| n == "pkg.two.*.run names 2 units: the context is for the first, pkg.two.A.run; name one to choose"
        ),
        "{:?}",
        out.notes
    );
}

#[test]
fn a_function_given_as_text_that_matches_several_says_so() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    // Its header repeats neither `run`: it is taken as a new function, and the answer says why.
    let out = run(&snapshot, "context for \"def run(self, z):\" in pkg/two.py budget 500");
    assert_eq!(out.context.expect("a context").target, None);
    assert!(
        out.notes.iter().any(|n| n.contains("pkg/two.py defines run 2 times (pkg.two.A.run, pkg.two.B.run)")),
        "{:?}",
        out.notes
    );
    // Repeating one header picks that method, with nothing to say.
    let out = run(&snapshot, "context for \"def run(self, y):\" in pkg/two.py budget 500");
    assert_eq!(out.context.expect("a context").target.as_deref(), Some("pkg.two.B.run"));
    assert!(out.notes.is_empty(), "{:?}", out.notes);
    // The `def` line decides, whatever decorators the definition has and the text leaves out;
    // between equal `def` lines, the decorators the text repeats.
    for (text, target) in [
        ("def run(x):", Some("pkg.deco.A.run")),
        ("@staticmethod\\ndef run(x):", Some("pkg.deco.A.run")),
        ("def run(self, y):", Some("pkg.deco.B.run")),
        ("def run(cls, y):", None),
        ("@classmethod\\ndef run(cls, y):", Some("pkg.deco.C.run")),
        ("@other\\ndef run(cls, y):", Some("pkg.deco.D.run")),
    ] {
        let out = run(&snapshot, &format!("context for \"{text}\" in pkg/deco.py budget 500"));
        assert_eq!(out.context.expect("a context").target.as_deref(), target, "{text}");
    }
}

#[test]
fn a_function_of_a_module_not_written_yet_is_placed_by_its_siblings() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    // `pkg/fresh.py` does not exist: its siblings make it module `pkg.fresh`, whose package's
    // modules it can reach.
    let out = run(
        &snapshot,
        "context for \"def twice(x):\\n    \\\"\\\"\\\"Call helper on x.\\\"\\\"\\\"\" in pkg/fresh.py budget 500",
    );
    assert!(out.notes.iter().any(|n| n.contains("new module pkg.fresh")), "{:?}", out.notes);
    assert_eq!(out.context.as_ref().expect("a context").target, None);
    assert!(names(&out).contains(&"pkg.m.helper"), "{:?}", names(&out));
    // A directory no indexed file lives in tells no module: a clear error.
    let err =
        fresco_query::run(&Context::new(&snapshot), "context for \"def f():\" in nowhere/x.py").expect_err("no module");
    assert!(err.to_string().contains("no indexed file in its directory"), "{err}");
    // A file that cannot be a module is named for what it is, not for its directory.
    for (file, why) in [
        ("pkg/README.md", "not a Python file"),
        ("pkg/__init__.py.bak", "not a Python file"),
        ("pkg", "'pkg' is a directory: give the .py file"),
        ("pkg/", "is a directory"),
        (".", "'.' is a directory"),
        ("pkg/a.b.py", "cannot be a module's file"),
        ("pkg/sub/__init__.py", "a new __init__.py"),
    ] {
        let query = format!("context for \"def f():\" in {file}");
        let err = fresco_query::run(&Context::new(&snapshot), &query).expect_err(file);
        assert!(err.to_string().contains(why), "{file}: {err}");
    }
}

#[test]
fn a_new_method_is_written_into_its_class_which_the_text_leaves_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    // pkg/m.py has a single class: a new method taking `self` is placed in it.
    let out = run(&snapshot, "context for \"def brand_new(self, x):\" in pkg/m.py budget 3000");
    let context = out.context.expect("a context");
    assert_eq!(context.target, None);
    let chosen: Vec<&str> = context.units.iter().map(|u| u.name.as_str()).collect();
    assert!(!chosen.contains(&"pkg.m.Adapter"), "its class would repeat the code being written: {chosen:?}");
    assert!(!context.text.contains("class Adapter:"), "{}", context.text);
    // Its siblings are what it can use.
    assert!(chosen.iter().any(|u| u.starts_with("pkg.m.Adapter.")), "{chosen:?}");
}

#[test]
fn a_new_files_path_is_read_as_the_index_writes_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    for file in ["./pkg/fresh.py", "pkg/sub/../fresh.py", "pkg//fresh.py"] {
        let out = run(&snapshot, &format!("context for \"def twice(x):\" in {file} budget 500"));
        assert!(out.notes.iter().any(|n| n.contains("new module pkg.fresh")), "{file}: {:?}", out.notes);
    }
    let err = fresco_query::run(&Context::new(&snapshot), "context for \"def f():\" in ../../etc/passwd")
        .expect_err("outside the root");
    assert!(err.to_string().contains("outside the indexed root"), "{err}");
    // Text that is no `def` header is taken as a description, and the answer says so.
    let out = run(&snapshot, "context for \"parse the rules\" in pkg/m.py budget 500");
    assert!(out.notes.iter().any(|n| n.contains("no `def` header")), "{:?}", out.notes);
}

/// A caller that prepares the retrieval lanes before a query learns first, without running it,
/// that a `context` target does not resolve: the same error the query gives.
#[test]
fn a_context_target_that_does_not_resolve_is_found_without_running_the_query() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let ctx = Context::new(&snapshot);
    for bad in ["context for \"def f():\" in 5", "context pkg.m.no_such_function", "context for \"def f():\" in pkg"] {
        let checked = fresco_query::check_context_targets(&ctx, bad).expect_err(bad);
        let ran = fresco_query::run(&ctx, bad).expect_err(bad);
        assert_eq!(checked.to_string(), ran.to_string(), "{bad}");
    }
    assert!(fresco_query::check_context_targets(&ctx, "context for \"def f():\" in pkg/m.py").is_ok());
    assert!(fresco_query::check_context_targets(&ctx, "context for \"def f():\" in pkg/new.py").is_ok());
    // Nothing to check in a query without `context`; a parse error is one.
    assert!(fresco_query::check_context_targets(&ctx, "find \"*\"").is_ok());
    assert!(fresco_query::check_context_targets(&ctx, "context for").is_err());
}

#[test]
fn a_file_the_index_skipped_is_named_with_its_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("pkg")).expect("mkdir");
    std::fs::write(dir.path().join("pkg/__init__.py"), "").expect("write");
    std::fs::write(dir.path().join("pkg/bad.py"), b"def bad():\n    \"\"\"caf\xe9\"\"\"\n    return 1\n")
        .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let out = run(&snapshot, "context for \"def bad():\" in pkg/bad.py budget 500");
    assert!(
        out.notes.iter().any(|n| n.contains("pkg/bad.py is not indexed (") && n.contains("UTF-8")),
        "{:?}",
        out.notes
    );
    // By name, and by file and line (an invalid place, as a line with no unit is).
    let err = fresco_query::run(&Context::new(&snapshot), "show pkg.bad.bad").expect_err("by name").to_string();
    assert!(err.contains("it would be in pkg/bad.py, which is not indexed (") && err.contains("UTF-8"), "{err}");
    let err = fresco_query::run(&Context::new(&snapshot), "show pkg/bad.py:1").expect_err("by line");
    assert_eq!(err.code(), "INVALID_QUERY");
    assert!(err.to_string().contains("pkg/bad.py has no unit at line 1: it is not indexed (not valid UTF-8)"), "{err}");
}

/// A file of several classes and a method given without a line: the class it shares rare words
/// with, or the one whose base or sibling defines its name, is chosen and the answer says so;
/// with no clear evidence it is placed in no class.
#[test]
fn a_new_method_without_a_line_goes_in_the_class_the_evidence_names() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index_files(dir.path(), &[("pkg/store.py", STORE)]);
    let class_of = |text: &str| placed_class(&snapshot, text, "pkg/store.py");

    let (class, note) = class_of(
        "def evict_oldest(self):\n    \"\"\"Drop the oldest entries until the cache is within its capacity.\"\"\"",
    );
    assert_eq!(class.as_deref(), Some("pkg.store.LruCache"), "{note}");
    assert!(note.contains("8 classes and no line was given: the method is placed in pkg.store.LruCache"), "{note}");
    assert!(note.contains("words the text shares with it") && !note.contains("sibling"), "{note}");

    // `render` is what TextRenderer's base and its sibling define, and it has none.
    let (class, note) = class_of("def render(self, node):");
    assert_eq!(class.as_deref(), Some("pkg.store.TextRenderer"), "{note}");
    assert!(note.contains("a base or sibling class defines its name"), "{note}");

    // Sharing `object` with the classes that define `draw` makes no family.
    let (class, note) = class_of("def draw(self):");
    assert_eq!(class, None, "{note}");

    // Nothing tells the classes apart: no class, and the answer says so.
    let (class, note) = class_of("def run(self):");
    assert_eq!(class, None, "{note}");
    assert!(note.contains("8 classes and no line was given: nothing in the text sets one apart"), "{note}");

    // A function (no `self`) is not a method of any class.
    let (class, _) = class_of("def evict_oldest(cache):\n    \"\"\"Drop the oldest entries of the cache.\"\"\"");
    assert_eq!(class, None);
}

/// Only the classes at a file's top level are where a method given without a line goes: a
/// nested `Meta` or a class local to a function is not counted, and a base counts toward the
/// family only when the repository defines it (anywhere: an override of a base in another file).
#[test]
fn a_new_methods_class_is_one_at_the_top_level_and_its_family_is_the_repositorys() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index_files(
        dir.path(),
        &[
            (
                "pkg/forms.py",
                "class SignupForm:\n    \"\"\"Sign a user up.\"\"\"\n    email = None\n\n    class Meta:\n        fields = []\n\n\n\
         def make():\n    class Helper:\n        def go(self):\n            return 1\n    return Helper\n",
            ),
            (
                "pkg/pair.py",
                "class Alpha:\n    def run(self, x):\n        return x\n\n\n\
         class Beta:\n    def run(self, y, z):\n        return y\n\n\n\
         class Gamma:\n    def other(self):\n        return 0\n",
            ),
            ("pkg/base.py", "class Renderer:\n    def render(self, node):\n        return node\n"),
            (
                "pkg/views.py",
                "from abc import ABC\nfrom pkg.base import Renderer\n\n\n\
         class FileStorage(ABC):\n    def close(self):\n        pass\n\n\n\
         class NetStorage(ABC):\n    def close(self):\n        pass\n\n\n\
         class Palette(ABC):\n    def colors(self):\n        return []\n\n\n\
         class HtmlView(Renderer):\n    def title(self):\n        return ''\n\n\n\
         class Counter:\n    def count(self):\n        return 0\n",
            ),
        ],
    );
    let class_of = |text: &str, file: &str| placed_class(&snapshot, text, file);
    // One class at the top level: the method is its, whatever the nested and local classes.
    let (class, note) = class_of("def get_model_fields(self):", "pkg/forms.py");
    assert_eq!(class.as_deref(), Some("pkg.forms.SignupForm"), "{note}");
    assert!(!note.contains("classes and no line"), "{note}");
    // Left alone by the others' `run`, Gamma still needs evidence of its own, and has none.
    let (class, note) = class_of("def run(self, q):", "pkg/pair.py");
    assert_eq!(class, None, "{note}");
    // `close` is defined by two classes sharing `abc.ABC`, which the repository does not define:
    // Palette is no family of theirs.
    let (class, note) = class_of("def close(self):", "pkg/views.py");
    assert_eq!(class, None, "{note}");
    // `render` overrides HtmlView's base in pkg/base.py.
    let (class, note) = class_of("def render(self, node):", "pkg/views.py");
    assert_eq!(class.as_deref(), Some("pkg.views.HtmlView"), "{note}");
    assert!(
        note.contains("a base or sibling class defines its name") && !note.contains("words the text shares"),
        "{note}"
    );
}

const STORE: &str = r#"class LruCache:
    """Keeps the most recently used entries within a capacity."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = {}

    def lookup(self, key):
        return self.entries.get(key)


class TokenParser:
    """Splits lines into tokens."""

    def parse_line(self, line):
        return line.split()


class Renderer:
    def render(self, node):
        return str(node)


class HtmlRenderer(Renderer):
    def render(self, node):
        return "<p>" + str(node) + "</p>"


class TextRenderer(Renderer):
    def width(self):
        return 80


class Widget(object):
    def draw(self):
        return 1


class Gizmo(object):
    def draw(self):
        return 2


class Gadget(object):
    def size(self):
        return 3
"#;

/// Indexes `files` (relative path, text) under `root`, with `pkg/__init__.py`.
fn index_files(root: &Path, files: &[(&str, &str)]) -> Snapshot {
    std::fs::create_dir_all(root.join("pkg")).expect("mkdir");
    std::fs::write(root.join("pkg/__init__.py"), "").expect("write");
    for (path, text) in files {
        std::fs::write(root.join(path), text).expect("write");
    }
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}

/// The class `context for TEXT in FILE` (no line) places a new function in, and the answer's notes.
fn placed_class(snapshot: &Snapshot, text: &str, file: &str) -> (Option<String>, String) {
    let target = ContextTarget::New { text: text.to_string(), file: file.into(), line: None };
    let resolved = resolve_target(snapshot, &target).expect("target");
    (resolved.class, resolved.note.unwrap_or_default())
}

/// A file or line a query names that is not there is pointed at, as an unknown name is.
#[test]
fn a_file_or_line_that_is_not_there_is_placed_in_the_query() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let ctx = Context::new(&snapshot);
    for (text, token) in [
        ("callers pkg/m.py:999", "pkg/m.py:999"),
        ("path pkg.m.helper -> nope.py:3", "nope.py:3"),
        ("context for \"def f():\" in pkg/nope/x.py budget 100", "pkg/nope/x.py"),
        ("context for \"def f():\" in pkg/m.py:999", "pkg/m.py:999"),
        ("context for \"def f():\" in pkg k 5", "pkg"),
        // An external target: no code to assemble context for.
        ("context typing budget 100", "typing"),
    ] {
        let err = fresco_query::run(&ctx, text).map(|_| ()).expect_err(text);
        assert_eq!(err.code(), "INVALID_QUERY", "{text}: {err}");
        let at = err.place().unwrap_or_else(|| panic!("{text}: no place for '{err}'"));
        assert_eq!(at.position, text.find(token).expect("the token"), "{text}: {err}");
    }
    let err = fresco_query::run(&ctx, "context typing budget 100").map(|_| ()).expect_err("external");
    assert!(err.to_string().contains("'typing' is external"), "{err}");
}

/// Two names of one file at lines written differently are told apart by their line.
#[test]
fn a_missing_line_is_placed_at_its_own_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let ctx = Context::new(&snapshot);
    let text = "path m.py:0999 -> pkg/m.py:3";
    let err = fresco_query::run(&ctx, text).map(|_| ()).expect_err(text);
    let at = err.place().unwrap_or_else(|| panic!("no place for '{err}'"));
    assert_eq!(at.position, text.find("m.py:0999").expect("the token"), "{err}");
}

/// The graph lane ranks a name defined more than once as one entry, the definition Python binds:
/// `@overload` declarations and a property's setter would otherwise take places of their own in
/// the ranking of what a new method of the class may use.
#[test]
fn the_graph_lane_ranks_each_name_once_as_the_definition_python_binds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let snapshot = index(dir.path());
    let out = run(&snapshot, "context for \"def brand_new(self, x):\" in pkg/m.py budget 3000");
    let graph = &out.lane_hits.iter().find(|(lane, _)| *lane == "graph").expect("the graph lane's list").1;
    for (bound, others) in [
        ("pkg.m.Adapter.match#3", &["pkg.m.Adapter.match", "pkg.m.Adapter.match#2"][..]),
        ("pkg.m.Adapter.size", &["pkg.m.Adapter.size#2"][..]),
        ("pkg.m.pick#2", &["pkg.m.pick"][..]),
    ] {
        assert!(graph.iter().any(|id| id == bound), "{bound} in {graph:?}");
        for other in others {
            assert!(!graph.iter().any(|id| id == other), "{other} stands for {bound}: {graph:?}");
        }
    }
    // In a class defined twice, the second one's members are named by their own definitions.
    let out = run(&snapshot, "context for \"def decode(self, x):\" in pkg/twice.py:18 budget 3000");
    let graph = &out.lane_hits.iter().find(|(lane, _)| *lane == "graph").expect("the graph lane's list").1;
    assert!(graph.iter().any(|id| id == "pkg.twice.Codec#2.encode#3"), "{graph:?}");
    for declaration in ["pkg.twice.Codec#2.encode", "pkg.twice.Codec#2.encode#2"] {
        assert!(!graph.iter().any(|id| id == declaration), "{declaration}: {graph:?}");
    }
    // The context pastes the implementation, not a declaration.
    let context = out.context.expect("a context");
    assert!(!context.text.contains("def match(self, x: int) -> int: ..."), "{}", context.text);
}
