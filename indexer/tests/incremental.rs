//! Incrementality: an edit re-derives only what depends on it (counted through salsa's event
//! hook), and the graph after any sequence of edits equals a clean index of the final files.

use std::collections::BTreeSet;
use std::path::Path;

use fresco_indexer::{FileEvent, Indexer, IndexerOptions};

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

fn executions(indexer: &Indexer, query: &str) -> u64 {
    indexer.take_execution_counts().get(query).copied().unwrap_or(0)
}

fn counts(indexer: &Indexer) -> std::collections::HashMap<String, u64> {
    indexer.take_execution_counts().into_iter().collect()
}

/// A package `app` with a module `core` imported by `n` others.
fn star_repo(root: &Path, n: usize) {
    write(root, "app/__init__.py", "");
    write(
        root,
        "app/core.py",
        "def helper(x):\n    return x + 1\n\n\nclass Engine:\n    def start(self):\n        return helper(1)\n",
    );
    for i in 0..n {
        write(
            root,
            &format!("app/user{i}.py"),
            &format!(
                "from app.core import helper, Engine\n\n\ndef use{i}():\n    Engine().start()\n    return helper({i})\n"
            ),
        );
    }
}

fn fresh(root: &Path) -> Indexer {
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.take_execution_counts();
    indexer
}

#[test]
fn a_body_edit_re_derives_only_its_own_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 20);
    let mut indexer = fresh(dir.path());
    let before = indexer.snapshot().version();

    write(
        dir.path(),
        "app/core.py",
        "def helper(x):\n    y = x * 2\n    print(y)\n    return x + 1\n\n\nclass Engine:\n    def start(self):\n        return helper(1)\n",
    );
    let report = indexer.apply(vec![FileEvent::Changed("app/core.py".into())]).expect("apply");
    let c = counts(&indexer);
    assert_eq!(c.get("file_syntax").copied(), Some(1), "{c:?}");
    assert_eq!(c.get("file_graph").copied(), Some(1), "only app/core.py is re-resolved: {c:?}");
    assert_eq!(report.resolved_files, 1);
    assert_eq!(report.changed_files, vec!["app/core.py".to_string()]);
    assert_eq!(indexer.snapshot().version(), before + 1);
    // Another file's edge into the edited one still resolves.
    let callers = indexer.snapshot().edges_to("app.core.helper");
    let calls =
        callers.iter().filter(|(e, _)| e.src.starts_with("app.user") && e.kind == fresco_graph::EdgeKind::Calls);
    assert_eq!(calls.count(), 20);
}

#[test]
fn typing_a_body_line_re_derives_only_its_own_file_at_every_keystroke() {
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 20);
    let mut indexer = fresh(dir.path());
    // What an editor saves while `print(y)` is typed into a body, then the finished line.
    for line in ["    print(", "    print(y", "    print('", "    print(y)"] {
        write(
            dir.path(),
            "app/core.py",
            &format!(
                "def helper(x):\n    y = x * 2\n{line}\n    return x + 1\n\n\nclass Engine:\n    def start(self):\n        return helper(1)\n"
            ),
        );
        let report = indexer.apply(vec![FileEvent::Changed("app/core.py".into())]).expect("apply");
        let c = counts(&indexer);
        assert_eq!(
            c.get("file_graph").copied(),
            Some(1),
            "while typing {line:?}, only app/core.py is re-resolved: {c:?}"
        );
        assert_eq!(report.resolved_files, 1, "{line:?}");
        let callers = indexer.snapshot().edges_to("app.core.helper");
        let calls = callers
            .iter()
            .filter(|(e, _)| e.src.starts_with("app.user") && e.kind == fresco_graph::EdgeKind::Calls)
            .count();
        assert_eq!(calls, 20, "while typing {line:?}");
        assert!(!indexer.snapshot().edges_to("app.core.Engine").is_empty(), "{line:?}");
    }
}

#[test]
fn what_a_caller_passes_moves_flow_edges_without_re_resolving_the_callee() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "app/__init__.py", "");
    write(dir.path(), "app/hooks.py", "def run(callback):\n    return callback()\n");
    write(
        dir.path(),
        "app/main.py",
        "from app.hooks import run\n\n\ndef a():\n    pass\n\n\ndef main():\n    run(a)\n",
    );
    write(dir.path(), "app/other.py", "def alone():\n    return 0\n");
    let mut indexer = fresh(dir.path());
    let targets = |indexer: &Indexer| -> Vec<String> {
        indexer.snapshot().edges_from("app.hooks.run").into_iter().map(|(e, _)| e.dst.to_string()).collect()
    };
    assert_eq!(targets(&indexer), vec!["app.main.a".to_string()]);

    // A body edit in main.py passes another function: hooks.py's flow edge follows, and only
    // main.py is re-resolved.
    write(
        dir.path(),
        "app/main.py",
        "from app.hooks import run\n\n\ndef a():\n    pass\n\n\ndef b():\n    pass\n\n\ndef main():\n    run(b)\n",
    );
    let report = indexer.apply(vec![FileEvent::Changed("app/main.py".into())]).expect("apply");
    let c = counts(&indexer);
    assert_eq!(c.get("file_graph").copied(), Some(1), "only app/main.py is re-resolved: {c:?}");
    assert_eq!(report.changed_files, vec!["app/main.py".to_string()]);
    assert_eq!(targets(&indexer), vec!["app.main.b".to_string()]);
    assert_eq!(indexer.snapshot().totals().unresolved, 0, "the parameter call is resolved by the flow");
    // The version's diff says so too (a client polling for changes sees the moved flow edge).
    let flow = |diff: &[fresco_graph::Edge]| -> Vec<String> {
        diff.iter().filter(|e| &*e.src == "app.hooks.run").map(|e| e.dst.to_string()).collect()
    };
    assert_eq!(flow(&report.diff.edges_added), vec!["app.main.b".to_string()]);
    assert_eq!(flow(&report.diff.edges_removed), vec!["app.main.a".to_string()]);

    // Removing the caller leaves the call of the parameter unresolved again.
    std::fs::remove_file(dir.path().join("app/main.py")).expect("rm");
    indexer.apply(vec![FileEvent::Removed("app/main.py".into())]).expect("apply");
    assert!(targets(&indexer).is_empty());
    assert_eq!(indexer.snapshot().totals().unresolved, 1);
}

#[test]
fn an_interface_change_re_resolves_exactly_the_importers() {
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 20);
    write(dir.path(), "app/unrelated.py", "def alone():\n    return 0\n");
    let mut indexer = fresh(dir.path());

    // Renaming a definition changes what other files can see.
    write(
        dir.path(),
        "app/core.py",
        "def helper2(x):\n    return x + 1\n\nhelper = helper2\n\n\nclass Engine:\n    def start(self):\n        return helper(1)\n",
    );
    let report = indexer.apply(vec![FileEvent::Changed("app/core.py".into())]).expect("apply");
    let c = counts(&indexer);
    assert_eq!(c.get("file_graph").copied(), Some(21), "core and its 20 importers, not unrelated.py: {c:?}");
    assert_eq!(c.get("file_syntax").copied(), Some(1), "importers are re-resolved, not re-parsed: {c:?}");
    assert_eq!(report.resolved_files, 21);
    // Importers now reach the new function through the alias.
    assert!(indexer.snapshot().edges_to("app.core.helper2").iter().any(|(e, _)| &*e.src == "app.user3.use3"));
}

#[test]
fn a_new_definition_re_resolves_only_files_that_looked_that_name_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 20);
    write(dir.path(), "app/wants_more.py", "from app.core import more\n\n\ndef f():\n    return more()\n");
    let mut indexer = fresh(dir.path());
    // `more` is added to core: the 20 importers of `helper` and `Engine` are not affected, the
    // file that looked `more` up (and found nothing) is.
    write(
        dir.path(),
        "app/core.py",
        "def helper(x):\n    return x + 1\n\n\nclass Engine:\n    def start(self):\n        return helper(1)\n\n\ndef more():\n    return 2\n",
    );
    let report = indexer.apply(vec![FileEvent::Changed("app/core.py".into())]).expect("apply");
    let c = counts(&indexer);
    assert_eq!(c.get("file_graph").copied(), Some(2), "core.py and wants_more.py only: {c:?}");
    assert_eq!(report.resolved_files, 2);
    assert!(indexer.snapshot().edges_to("app.core.more").iter().any(|(e, _)| &*e.src == "app.wants_more.f"));
}

#[test]
fn adding_deleting_and_renaming_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 5);
    write(dir.path(), "app/late.py", "from app.extra import thing\n\n\ndef f():\n    return thing()\n");
    let mut indexer = fresh(dir.path());
    assert!(indexer.snapshot().file("app/late.py").expect("late").graph.unresolved.iter().any(|u| u.callee == "thing"));

    // A new module: itself and the file that was looking for it are resolved.
    write(dir.path(), "app/extra.py", "def thing():\n    return 1\n");
    let report = indexer.apply(vec![FileEvent::Changed("app/extra.py".into())]).expect("apply");
    let c = counts(&indexer);
    assert_eq!(c.get("file_graph").copied(), Some(2), "{c:?}");
    assert_eq!(report.resolved_files, 2);
    assert!(indexer.snapshot().edges_to("app.extra.thing").iter().any(|(e, _)| &*e.src == "app.late.f"));

    // Deleting it: the importer goes back to unresolved. The second execution is the removed
    // file's own, replacing its graph by that of a file outside the workspace (see
    // `Indexer::forget_derived`).
    std::fs::remove_file(dir.path().join("app/extra.py")).expect("rm");
    indexer.apply(vec![FileEvent::Removed("app/extra.py".into())]).expect("apply");
    let c = counts(&indexer);
    assert_eq!(c.get("file_graph").copied(), Some(2), "{c:?}");
    assert!(indexer.snapshot().unit("app.extra.thing").is_none());
    assert!(indexer.snapshot().file("app/late.py").expect("late").graph.unresolved.iter().any(|u| u.callee == "thing"));

    // Renaming core.py to engine.py: the importers now miss it.
    std::fs::rename(dir.path().join("app/core.py"), dir.path().join("app/engine.py")).expect("mv");
    indexer
        .apply(vec![FileEvent::Removed("app/core.py".into()), FileEvent::Changed("app/engine.py".into())])
        .expect("apply");
    let c = counts(&indexer);
    assert_eq!(
        c.get("file_graph").copied(),
        Some(7),
        "engine.py, the 5 importers of app.core, and core.py's own graph replaced: {c:?}"
    );
    assert!(indexer.snapshot().unit("app.engine.helper").is_some());
    assert!(indexer.snapshot().unit("app.core.helper").is_none());
}

#[test]
fn import_cycles_are_fine_and_body_edits_stay_local() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "a.py", "import b\n\n\ndef fa():\n    return b.fb()\n");
    write(dir.path(), "b.py", "import a\nfrom a import *\n\n\ndef fb():\n    return a.fa()\n");
    let mut indexer = fresh(dir.path());
    assert!(indexer.snapshot().edges_to("b.fb").iter().any(|(e, _)| &*e.src == "a.fa"));
    assert!(indexer.snapshot().edges_to("a.fa").iter().any(|(e, _)| &*e.src == "b.fb"));
    write(dir.path(), "a.py", "import b\n\n\ndef fa():\n    x = 1\n    return b.fb()\n");
    indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
    assert_eq!(executions(&indexer, "file_graph"), 1);
}

#[test]
fn a_touch_without_a_change_publishes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 3);
    let mut indexer = fresh(dir.path());
    let version = indexer.snapshot().version();
    let text = std::fs::read_to_string(dir.path().join("app/core.py")).expect("read");
    write(dir.path(), "app/core.py", &text);
    let report = indexer.apply(vec![FileEvent::Changed("app/core.py".into())]).expect("apply");
    assert!(!report.published);
    assert_eq!(indexer.snapshot().version(), version);
    assert_eq!(executions(&indexer, "file_graph"), 0);
}

/// A tiny deterministic generator (no external crate needed for a property test).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Everything the graph says, as comparable text.
fn render(indexer: &Indexer) -> BTreeSet<String> {
    let snap = indexer.snapshot();
    let mut out = BTreeSet::new();
    for f in snap.files() {
        out.insert(format!("file {} {} {}", f.graph.path, f.graph.module, f.graph.revision));
        for u in &f.graph.units {
            out.insert(format!("unit {} {:?} {}-{} {:?}", u.id, u.kind, u.start_line, u.end_line, u.signature));
        }
        // Flow edges (joined across files) included: they must follow edits like the rest.
        for e in f.edges() {
            out.insert(format!("edge {} {} {:?} {:?}", e.src, e.dst, e.kind, e.line));
        }
        for u in f.unresolved() {
            out.insert(format!("unresolved {} {} {}", u.caller, u.callee, u.line));
        }
    }
    out
}

fn random_module(rng: &mut Rng, names: &[&str], me: usize) -> String {
    let mut text = String::new();
    let other = names[rng.below(names.len())];
    if other != names[me] {
        match rng.below(3) {
            0 => text.push_str(&format!("from pkg.{other} import *\n")),
            1 => text.push_str(&format!("from pkg import {other}\n")),
            _ => text.push_str(&format!("from .{other} import f0, C0\n")),
        }
    }
    for i in 0..1 + rng.below(3) {
        text.push_str(&format!("\n\ndef f{i}(x=None):\n"));
        for _ in 0..rng.below(3) {
            text.push_str("    x = x\n");
        }
        match rng.below(6) {
            0 => text.push_str(&format!("    return {other}.f0()\n")),
            1 => text.push_str("    return f0()\n"),
            2 => text.push_str("    return C0().m()\n"),
            // Callables passed to another module's function, which calls its parameter.
            3 => text.push_str(&format!("    return {other}.g(f{i})\n")),
            4 => text.push_str(&format!("    return {other}.g(cb=C0)\n")),
            _ => text.push_str("    return len([x])\n"),
        }
    }
    if rng.below(2) == 0 {
        text.push_str("\n\ndef g(cb=None):\n    return cb()\n");
    }
    if rng.below(2) == 0 {
        text.push_str(
            "\n\nclass C0:\n    def m(self):\n        return self.n()\n\n    def n(self):\n        return f0()\n",
        );
    }
    text
}

#[test]
fn any_edit_sequence_ends_where_a_clean_index_does() {
    let names = ["a", "b", "c", "d", "e", "f"];
    for seed in 1..=12u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        write(root, "pkg/__init__.py", "");
        let mut present = vec![false; names.len()];
        for (i, name) in names.iter().enumerate().take(4) {
            write(root, &format!("pkg/{name}.py"), &random_module(&mut rng, &names, i));
            present[i] = true;
        }
        let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
        indexer.refresh().expect("index");
        for step in 0..25 {
            let i = rng.below(names.len());
            let path = format!("pkg/{}.py", names[i]);
            let event = if present[i] && rng.below(4) == 0 {
                std::fs::remove_file(root.join(&path)).expect("rm");
                present[i] = false;
                FileEvent::Removed(path)
            } else {
                write(root, &path, &random_module(&mut rng, &names, i));
                present[i] = true;
                FileEvent::Changed(path)
            };
            indexer.apply(vec![event]).expect("apply");
            let mut clean = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
            clean.refresh().expect("clean index");
            let (got, want) = (render(&indexer), render(&clean));
            if got != want {
                let missing: Vec<_> = want.difference(&got).collect();
                let extra: Vec<_> = got.difference(&want).collect();
                panic!(
                    "seed {seed} step {step}: incremental graph differs from a clean index\nmissing: {missing:#?}\nextra: {extra:#?}"
                );
            }
        }
    }
}

/// The pinned `requests` from the shared corpus (downloaded on first use by its script).
fn requests_corpus() -> std::path::PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/fetch");
    let out = std::process::Command::new("bash").arg(&script).arg("requests").output().expect("run the corpus script");
    assert!(out.status.success(), "corpus fetch failed: {}", String::from_utf8_lossy(&out.stderr));
    std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim())
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

#[test]
fn edit_sequences_on_requests_end_where_a_clean_index_does() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("requests");
    copy_dir(&requests_corpus(), &root);
    let _ = std::fs::remove_dir_all(root.join(".fresco"));
    let files: Vec<String> = {
        let (all, _) = fresco_indexer::walk::discover(&root, &Default::default()).expect("walk");
        all.into_iter().filter(|f| f.starts_with("src/requests/")).collect()
    };
    let originals: Vec<String> = files.iter().map(|f| std::fs::read_to_string(root.join(f)).expect("read")).collect();
    let mut indexer = Indexer::in_memory(&root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let mut rng = Rng(0x5EED_F00D);
    let mut deleted: Vec<usize> = Vec::new();
    for step in 0..16 {
        let i = rng.below(files.len());
        let path = files[i].clone();
        let event = match rng.below(4) {
            // A new function that calls something of another module.
            0 | 1 if !deleted.contains(&i) => {
                let other = &files[rng.below(files.len())];
                let module = other.trim_start_matches("src/").trim_end_matches(".py").replace('/', ".");
                let module = module.trim_end_matches(".__init__");
                let text = std::fs::read_to_string(root.join(&path)).expect("read");
                let added =
                    format!("{text}\n\ndef fresco_added_{step}():\n    import {module}\n    return {module}.get()\n");
                std::fs::write(root.join(&path), added).expect("write");
                FileEvent::Changed(path)
            }
            2 if !deleted.contains(&i) => {
                std::fs::remove_file(root.join(&path)).expect("rm");
                deleted.push(i);
                FileEvent::Removed(path)
            }
            _ => {
                std::fs::write(root.join(&path), &originals[i]).expect("restore");
                deleted.retain(|d| *d != i);
                FileEvent::Changed(path)
            }
        };
        indexer.apply(vec![event]).expect("apply");
        let mut clean = Indexer::in_memory(&root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
        clean.refresh().expect("clean index");
        let (got, want) = (render(&indexer), render(&clean));
        if got != want {
            let missing: Vec<_> = want.difference(&got).take(10).collect();
            let extra: Vec<_> = got.difference(&want).take(10).collect();
            panic!(
                "requests, step {step}: incremental graph differs from a clean index\nmissing: {missing:#?}\nextra: {extra:#?}"
            );
        }
    }
}

/// A same-size rewrite whose modification time is put back (`cp -p`, `rsync -a`, `touch -r`)
/// is still seen by a rescan: the stamp holds the inode change time too.
#[test]
fn a_rewrite_with_the_old_mtime_is_still_seen() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "m.py", "def third():\n    return 1\n");
    let mut indexer = fresh(dir.path());
    let path = dir.path().join("m.py");
    let mtime = std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime");
    // The ctime clock must move on: some filesystems keep whole-second or coarse timestamps.
    std::thread::sleep(std::time::Duration::from_millis(20));
    write(dir.path(), "m.py", "def fifth():\n    return 1\n");
    std::fs::File::options().write(true).open(&path).and_then(|f| f.set_modified(mtime)).expect("set mtime");
    assert_eq!(std::fs::metadata(&path).and_then(|m| m.modified()).expect("mtime"), mtime);
    indexer.refresh().expect("rescan");
    let units: Vec<String> =
        indexer.snapshot().files().flat_map(|f| f.graph.units.iter().map(|u| u.id.clone())).collect();
    assert!(units.contains(&"m.fifth".to_string()) && !units.contains(&"m.third".to_string()), "{units:?}");
}

#[test]
fn the_size_limit_is_each_runs_own_not_the_stored_indexs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    let db = dir.path().join("db");
    write(&root, "small.py", "A = 1\n");
    write(&root, "big.py", &format!("def big():\n    return {}\n", "1 + ".repeat(100) + "1"));
    let with_limit = |max_file_size: u64| IndexerOptions {
        threads: 1,
        walk: fresco_indexer::WalkOptions { max_file_size, ..Default::default() },
    };
    let skipped = |indexer: &Indexer| indexer.snapshot().file("big.py").and_then(|f| f.graph.skipped.clone());
    let has_big = |indexer: &Indexer| indexer.snapshot().unit("big.big").is_some();

    // A run with a small limit skips the big file...
    let mut indexer = Indexer::open(&root, &db, with_limit(100)).expect("open");
    indexer.refresh().expect("index");
    assert!(skipped(&indexer).is_some_and(|r| r.to_string().contains("too large")));
    assert!(!has_big(&indexer));
    drop(indexer);

    // ...and the next run, with the default limit, indexes it although the file did not change.
    let mut indexer =
        Indexer::open(&root, &db, IndexerOptions { threads: 1, ..IndexerOptions::default() }).expect("open");
    indexer.refresh().expect("index");
    assert_eq!(skipped(&indexer), None);
    assert!(has_big(&indexer));
    drop(indexer);

    // A smaller limit applies to files indexed before, changed or not.
    let mut indexer = Indexer::open(&root, &db, with_limit(100)).expect("open");
    indexer.refresh().expect("index");
    assert!(skipped(&indexer).is_some_and(|r| r.to_string().contains("limit 100")), "{:?}", skipped(&indexer));
    assert!(!has_big(&indexer));
    assert!(indexer.snapshot().unit("small.A").is_some());
}

#[test]
fn the_index_ignores_itself_for_git_only_in_a_directory_of_its_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    write(&root, "a.py", "A = 1\n");
    let options = || IndexerOptions { threads: 1, ..IndexerOptions::default() };
    // The default `.fresco`, and a directory the index creates: `*` keeps git out.
    for db in [root.join(".fresco"), dir.path().join("fresh-index")] {
        Indexer::open(&root, &db, options()).expect("open");
        let ignore = std::fs::read_to_string(db.join(".gitignore")).expect(".gitignore");
        assert!(ignore.lines().any(|l| l == "*"), "{ignore}");
    }
    // A directory of the user's that existed before (here the repository itself): left alone.
    let db = dir.path().join("existing");
    std::fs::create_dir_all(&db).expect("mkdir");
    Indexer::open(&root, &db, options()).expect("open");
    assert!(!db.join(".gitignore").exists());
}

#[test]
fn a_file_that_comes_back_reuses_its_input_but_nothing_derived_from_its_old_text() {
    // A branch switched away and back removes files and writes them again: salsa never frees
    // an input or what was derived from it, so a new input per return grew without bound. The
    // input is reused; what was derived from it is replaced when the file goes (a daemon on
    // django renaming `tests/` back and forth otherwise held a copy of every summary and graph
    // of both names), so a file that comes back is lowered again, once.
    let dir = tempfile::tempdir().expect("tempdir");
    star_repo(dir.path(), 3);
    let mut indexer = fresh(dir.path());
    let text = std::fs::read_to_string(dir.path().join("app/user0.py")).expect("read");
    std::fs::remove_file(dir.path().join("app/user0.py")).expect("rm");
    indexer.take_execution_counts();
    indexer.apply(vec![FileEvent::Removed("app/user0.py".into())]).expect("apply");
    assert!(indexer.snapshot().unit("app.user0.use0").is_none());
    let c = counts(&indexer);
    assert_eq!(
        c.get("file_graph").copied(),
        Some(1),
        "the removed file's graph is replaced, nothing else re-resolves: {c:?}"
    );
    assert_eq!(c.get("file_syntax"), None, "an empty file outside the workspace is not lowered: {c:?}");
    write(dir.path(), "app/user0.py", &text);
    indexer.apply(vec![FileEvent::Changed("app/user0.py".into())]).expect("apply");
    assert_eq!(executions(&indexer, "file_syntax"), 1, "lowered again, once");
    assert_eq!(render(&indexer), render(&fresh(dir.path())));
    // Back with other text, it is lowered and resolved like any edit.
    std::fs::remove_file(dir.path().join("app/user0.py")).expect("rm");
    indexer.apply(vec![FileEvent::Removed("app/user0.py".into())]).expect("apply");
    write(dir.path(), "app/user0.py", "from app.core import helper\n\n\ndef again():\n    return helper(0)\n");
    indexer.apply(vec![FileEvent::Changed("app/user0.py".into())]).expect("apply");
    assert!(indexer.snapshot().edges_to("app.core.helper").iter().any(|(e, _)| &*e.src == "app.user0.again"));
    assert_eq!(render(&indexer), render(&fresh(dir.path())));
}

/// A submodule added beside a package's definition of its name takes the name: the definition
/// takes a `#N` suffix, and loses it when the submodule goes, as a clean index says.
/// A package directory replaced by a symbolic link to another directory holding files of the
/// same names (a branch switch can do that in one batch): its known files are re-read, and a
/// re-read must not go through the link, which the walk never enters. The graph then equals a
/// clean index of the tree, whatever the link leads to (here, a directory outside the root).
#[test]
fn a_directory_replaced_by_a_link_is_not_read_through() {
    let dir = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "app/__init__.py", "");
    write(root, "app/plugins/__init__.py", "P = 1\n");
    write(root, "app/plugins/core.py", "def plugin_v1():\n    return 1\n");
    write(outside.path(), "__init__.py", "V = 2\n");
    write(outside.path(), "core.py", "def plugin_v2():\n    return 2\n");
    let mut indexer = fresh(root);
    std::fs::remove_dir_all(root.join("app/plugins")).expect("rm");
    std::os::unix::fs::symlink(outside.path(), root.join("app/plugins")).expect("symlink");
    let events = ["app/plugins/__init__.py", "app/plugins/core.py"].map(|p| FileEvent::Changed(p.to_string())).to_vec();
    indexer.apply(events).expect("apply");
    let units: Vec<String> =
        indexer.snapshot().files().flat_map(|f| f.graph.units.iter().map(|u| u.id.clone())).collect();
    assert!(!units.iter().any(|u| u.starts_with("app.plugins")), "read through the link: {units:?}");
    assert_eq!(render(&indexer), render(&fresh(root)), "the graph is not a clean index of the tree");
}

#[test]
fn a_submodule_named_like_a_packages_definition_renames_it_both_ways() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    write(root, "pkg/__init__.py", "def tools():\n    return 1\n");
    write(root, "main.py", "from pkg import tools\n\n\ndef run():\n    return tools()\n");
    let mut indexer = fresh(root);
    let ids = |indexer: &Indexer| -> Vec<String> {
        let mut ids: Vec<String> =
            indexer.snapshot().files().flat_map(|f| f.graph.units.iter().map(|u| u.id.clone())).collect();
        ids.sort();
        ids
    };
    assert!(ids(&indexer).contains(&"pkg.tools".to_string()));
    write(root, "pkg/tools.py", "def hammer():\n    return 1\n");
    indexer.apply(vec![FileEvent::Changed("pkg/tools.py".into())]).expect("apply");
    assert!(ids(&indexer).contains(&"pkg.tools#2".to_string()), "{:?}", ids(&indexer));
    assert_eq!(render(&indexer), render(&fresh(root)));
    std::fs::remove_file(root.join("pkg/tools.py")).expect("rm");
    indexer.apply(vec![FileEvent::Removed("pkg/tools.py".into())]).expect("apply");
    assert!(!ids(&indexer).iter().any(|id| id.contains('#')), "{:?}", ids(&indexer));
    assert_eq!(render(&indexer), render(&fresh(root)));
}

/// An index directory holding a sled database of the layout before `graph/` is rebuilt, and the
/// old database removed; a `db` and a `conf` without fresco's marker may be another program's
/// (sled's own names) and are left alone.
#[test]
fn only_an_old_store_of_fresco_is_removed_from_the_index_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("repo");
    write(&root, "a.py", "A = 1\n");
    let options = || IndexerOptions { threads: 1, ..IndexerOptions::default() };
    let foreign = dir.path().join("foreign");
    write(&foreign, "db", "precious");
    write(&foreign, "conf", "precious");
    write(&foreign, "blobs/x", "precious");
    let mut indexer = Indexer::open(&root, &foreign, options()).expect("open");
    indexer.refresh().expect("index");
    assert!(indexer.rebuilt_store.is_none(), "{:?}", indexer.rebuilt_store);
    drop(indexer);
    for kept in ["db", "conf", "blobs/x"] {
        assert_eq!(std::fs::read_to_string(foreign.join(kept)).expect(kept), "precious", "{kept}");
    }

    let old = dir.path().join("old");
    write(&old, "db", "sled");
    write(&old, "conf", "sled");
    write(&old, "blobs/x", "sled");
    write(&old, "committed-version", "3");
    let mut indexer = Indexer::open(&root, &old, options()).expect("open");
    indexer.refresh().expect("index");
    assert!(
        indexer.rebuilt_store.as_deref().is_some_and(|r| r.contains("older layout")),
        "{:?}",
        indexer.rebuilt_store
    );
    assert!(indexer.snapshot().unit("a.A").is_some());
    for gone in ["db", "conf", "blobs"] {
        assert!(!old.join(gone).exists(), "{gone}");
    }
}
