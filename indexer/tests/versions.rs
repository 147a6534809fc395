//! Version numbers and the stored history: a number clients may have seen is never handed out
//! again for another graph, across crashes, stops and rebuilds, so `changes since V` answers for
//! the graph V named or refuses.

use std::path::Path;

use fresco_graph::{Change, NetChange};
use fresco_indexer::{FileEvent, Indexer, IndexerOptions};

fn write(root: &Path, path: &str, text: &str) {
    std::fs::write(root.join(path), text).expect("write");
}

/// A temporary directory with an empty repository and where its index goes.
fn workspace() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let (root, db) = (dir.path().join("repo"), dir.path().join("db"));
    std::fs::create_dir_all(&root).expect("mkdir");
    (dir, root, db)
}

fn options() -> IndexerOptions {
    IndexerOptions { threads: 1, ..IndexerOptions::default() }
}

fn added_units(indexer: &Indexer, since: u64) -> Vec<String> {
    let changes = indexer.history().changes_since(since).expect("in the history");
    changes
        .into_iter()
        .filter_map(|c| match c {
            NetChange::Unit(id, Change::Added) => Some(id),
            _ => None,
        })
        .collect()
}

#[test]
fn versions_a_daemon_published_but_never_stored_are_not_handed_out_again() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    let stored = {
        let mut indexer = Indexer::open(&root, &db, options()).expect("open");
        let stored = indexer.snapshot().version();
        // As the daemon does: publish first, write afterwards. It dies before writing.
        indexer.set_defer_persistence(true);
        write(&root, "a.py", "def f():\n    return 1\n\n\ndef g():\n    return 2\n");
        let report = indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
        assert_eq!(report.version, stored + 1);
        stored
    };
    let seen = stored + 1;

    // Meanwhile the file changes again; the next session publishes a different graph.
    write(&root, "a.py", "def f():\n    return 1\n\n\ndef h():\n    return 3\n");
    let mut indexer = Indexer::open(&root, &db, options()).expect("reopen");
    let now = indexer.snapshot().version();
    assert!(now > seen, "version {now} reuses the number {seen} a client saw for another graph");
    let err = indexer.history().changes_since(seen).expect_err("the lost version is unknown");
    assert!(err.to_string().contains("stopped before storing it"), "{err}");
    // From the stored version, the answer is exact: h added, g never was.
    assert_eq!(added_units(&indexer, stored), vec!["a.h".to_string()]);

    // Within a session versions follow each other, past the end of a reserved block too.
    indexer.set_defer_persistence(true);
    let mut last = now;
    for i in 0..70 {
        write(&root, "a.py", &format!("def f():\n    return {i}\n"));
        let report = indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
        assert_eq!(report.version, last + 1);
        last = report.version;
    }
    indexer.persist().expect("persist");
    assert_eq!(indexer.history().changes_since(now).map(|c| !c.is_empty()), Ok(true));
}

#[test]
fn an_index_kept_in_memory_beside_one_it_cannot_write_numbers_past_it() {
    // A daemon whose index cannot be written (a full disk) serves from memory: its versions
    // must not repeat numbers the stored index, or an earlier daemon, handed out.
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    let reserved = {
        let mut indexer = Indexer::open(&root, &db, options()).expect("open");
        indexer.set_defer_persistence(true);
        write(&root, "a.py", "def f():\n    return 2\n");
        indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
        indexer.persist().expect("persist");
        // A daemon reserves numbers ahead of what it stores (`INDEX/versions`).
        std::fs::read_to_string(db.join("versions")).expect("reservation").trim().parse::<u64>().expect("number")
    };
    let mut in_memory = Indexer::in_memory_numbered_after(&root, &db, options());
    in_memory.refresh().expect("index in memory");
    assert!(in_memory.snapshot().version() > reserved, "{} after {reserved}", in_memory.snapshot().version());
    // Where the directory takes a write after all (room made on the disk), the numbers handed
    // out are recorded, and the store, opened again, numbers past them.
    write(&root, "a.py", "def f():\n    return 3\n");
    in_memory.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
    let handed_out = in_memory.snapshot().version();
    in_memory.release_unused_versions().expect("recorded");
    drop(in_memory);
    let reopened = Indexer::open(&root, &db, options()).expect("reopen");
    assert!(reopened.snapshot().version() > handed_out, "{} after {handed_out}", reopened.snapshot().version());
    drop(reopened);
    // Numbered past an index directory that holds nothing: from 1. Made to record the numbers,
    // it is kept out of git as an index directory is.
    let made = root.join("no-index-here");
    let mut fresh = Indexer::in_memory_numbered_after(&root, &made, options());
    fresh.refresh().expect("index in memory");
    assert_eq!(fresh.snapshot().version(), 1);
    assert!(made.join("versions").is_file() && made.join(".gitignore").is_file());
}

#[test]
fn a_store_rebuilt_from_the_files_numbers_past_the_old_one() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    let old = {
        let mut indexer = Indexer::open(&root, &db, options()).expect("open");
        for body in ["2", "3", "4"] {
            write(&root, "a.py", &format!("def f():\n    return {body}\n"));
            indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
        }
        indexer.snapshot().version()
    };
    // A store that says it committed more than it holds is corrupt: it is rebuilt. The first
    // attempt is interrupted after the old store is cleared and before anything is committed.
    std::fs::write(db.join("graph/committed-version"), (old + 10).to_string()).expect("write marker");
    let interrupted = Indexer::open_stored(&root, &db, options()).expect("open without indexing");
    assert!(interrupted.rebuilt_store.is_some());
    drop(interrupted);
    assert!(db.join(fresco_indexer::indexer::REBUILD_MARKER).exists(), "why the store is rebuilt is kept on disk");
    // The store was cleared, not corrupt; the warning of the rebuild stopped part way is not lost.
    let indexer = Indexer::open(&root, &db, options()).expect("reopen");
    let warning = indexer.rebuilt_store.clone().unwrap_or_default();
    assert!(warning.contains("corrupt") && warning.contains("was stopped before it stored a version"), "{warning:?}");
    assert!(!db.join(fresco_indexer::indexer::REBUILD_MARKER).exists(), "the rebuilt store holds a version");
    drop(indexer);
    let indexer = Indexer::open(&root, &db, options()).expect("reopen");
    assert!(indexer.rebuilt_store.is_none(), "{:?}", indexer.rebuilt_store);
    let now = indexer.snapshot().version();
    assert!(now > old + 10, "the rebuilt index's version {now} must pass the old store's {}", old + 10);
    for earlier in [1, old] {
        assert!(indexer.history().changes_since(earlier).is_err(), "version {earlier} named the old store's graph");
    }
    assert_eq!(indexer.history().changes_since(now), Ok(Vec::new()));
}

/// A commit stopped between sled and its `committed-version` file leaves that file a version
/// behind the store; the version the next open hands out must still be counted by a rebuild
/// after damage, which cannot read sled's own record.
#[test]
fn a_version_handed_out_from_a_store_ahead_of_its_marker_is_not_reused_after_damage() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    drop(Indexer::open(&root, &db, options()).expect("open"));
    write(&root, "a.py", "def f():\n    return 2\n");
    let seen = {
        let indexer = Indexer::open(&root, &db, options()).expect("reopen");
        indexer.snapshot().version()
    };
    // As a kill between the commit and the file's rename leaves it.
    std::fs::write(db.join("graph/committed-version"), (seen - 1).to_string()).expect("marker behind");
    let handed_out = Indexer::open(&root, &db, options()).expect("reopen").snapshot().version();
    assert_eq!(handed_out, seen);
    for file in ["db", "conf"] {
        std::fs::write(db.join("graph").join(file), vec![0x5a; 4096]).expect("damage");
    }
    write(&root, "a.py", "def f():\n    return 3\n");
    let rebuilt = Indexer::open(&root, &db, options()).expect("rebuild");
    assert!(rebuilt.rebuilt_store.is_some());
    assert!(rebuilt.snapshot().version() > seen, "version {} was handed out before", seen);
}

/// A rebuild stopped part way, then found by the next open as a store to rebuild again (its
/// partial first write reads as corrupt): the warning names the first rebuild's cause.
#[test]
fn a_rebuild_stopped_twice_keeps_the_cause_it_began_with() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    drop(Indexer::open(&root, &db, options()).expect("open"));
    std::fs::write(db.join("graph/committed-version"), "77").expect("write marker");
    drop(Indexer::open_stored(&root, &db, options()).expect("a rebuild begins"));
    // The next attempt finds the store corrupt again, for another reason.
    std::fs::write(db.join("graph/committed-version"), "500").expect("write marker");
    let reopened = Indexer::open(&root, &db, options()).expect("reopen");
    let warning = reopened.rebuilt_store.clone().unwrap_or_default();
    assert!(warning.contains("77") && warning.contains("was stopped before it stored a version"), "{warning:?}");
    drop(reopened);
    assert!(Indexer::open(&root, &db, options()).expect("reopen").rebuilt_store.is_none());
}

/// A file of the user's in a `--db` directory of theirs is neither taken for a marker nor
/// removed.
#[test]
fn a_file_of_the_users_is_not_taken_for_a_rebuild_marker() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    std::fs::create_dir_all(&db).expect("mkdir");
    let theirs = db.join(fresco_indexer::indexer::REBUILD_MARKER);
    std::fs::write(&theirs, "notes on rebuilding the kitchen\n").expect("write");
    let indexer = Indexer::open(&root, &db, options()).expect("open");
    assert!(indexer.rebuilt_store.is_none(), "{:?}", indexer.rebuilt_store);
    drop(indexer);
    assert_eq!(std::fs::read_to_string(&theirs).expect("still there"), "notes on rebuilding the kitchen\n");
}

/// A rebuild of a tree without Python files stores no version, and is over all the same: the
/// next open does not warn of a rebuild stopped part way.
#[test]
fn a_rebuild_with_nothing_to_store_is_not_taken_for_one_stopped_part_way() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    drop(Indexer::open(&root, &db, options()).expect("open"));
    std::fs::remove_file(root.join("a.py")).expect("rm");
    std::fs::write(db.join("graph/committed-version"), "99").expect("write marker");
    let rebuilt = Indexer::open(&root, &db, options()).expect("reopen");
    assert!(rebuilt.rebuilt_store.is_some());
    drop(rebuilt);
    assert!(!db.join(fresco_indexer::indexer::REBUILD_MARKER).exists());
    let indexer = Indexer::open(&root, &db, options()).expect("reopen");
    assert!(indexer.rebuilt_store.is_none(), "{:?}", indexer.rebuilt_store);
}

#[test]
fn a_garbage_version_marker_does_not_restart_the_numbering() {
    // Indexed by the command line alone: no daemon ever reserved numbers.
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    let old = {
        let mut indexer = Indexer::open(&root, &db, options()).expect("open");
        for body in ["2", "3"] {
            write(&root, "a.py", &format!("def f():\n    return {body}\n"));
            indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
        }
        indexer.snapshot().version()
    };
    for garbage in ["garbage", "", "-5"] {
        std::fs::write(db.join("graph/committed-version"), garbage).expect("damage the marker");
        write(&root, "a.py", &format!("def f():\n    return 4\n\n\ndef g{}():\n    return 5\n", garbage.len()));
        let indexer = Indexer::open(&root, &db, options()).expect("reopen");
        assert!(indexer.rebuilt_store.is_some(), "{garbage:?}: the store is rebuilt");
        let now = indexer.snapshot().version();
        assert!(now > old, "{garbage:?}: version {now} names another graph than the old store's {old}");
        for earlier in 1..=old {
            assert!(
                indexer.history().changes_since(earlier).is_err(),
                "{garbage:?}: version {earlier} is not this graph's"
            );
        }
    }
}

#[test]
fn history_outlives_a_clean_reopen_and_spans_what_changed_while_closed() {
    let (_dir, root, db) = workspace();
    write(&root, "a.py", "def f():\n    return 1\n");
    let first = {
        let mut indexer = Indexer::open(&root, &db, options()).expect("open");
        let first = indexer.snapshot().version();
        write(&root, "a.py", "def f():\n    return 1\n\n\ndef g():\n    return 2\n");
        indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
        first
    };
    write(&root, "b.py", "def k():\n    return 0\n");
    let indexer = Indexer::open(&root, &db, options()).expect("reopen");
    let mut added = added_units(&indexer, first);
    added.sort();
    assert_eq!(added, vec!["a.g", "b", "b.k"]);
    assert_eq!(indexer.history().oldest(), first);
}

#[test]
fn a_file_restored_to_its_state_at_a_version_shows_no_change_since_it() {
    let (_dir, root, db) = workspace();
    let original = "def f():\n    return g()\n\n\ndef g():\n    return 1\n";
    write(&root, "a.py", original);
    let mut indexer = Indexer::open(&root, &db, options()).expect("open");
    let at = indexer.snapshot().version();
    write(&root, "a.py", "def f():\n    return 2\n\n\ndef g():\n    return 1\n");
    indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
    let changed = indexer.history().changes_since(at).expect("history");
    assert!(changed.contains(&NetChange::Unit("a.f".into(), Change::Changed)), "{changed:?}");
    write(&root, "a.py", original);
    indexer.apply(vec![FileEvent::Changed("a.py".into())]).expect("apply");
    assert!(indexer.snapshot().version() > at + 1);
    assert_eq!(indexer.history().changes_since(at), Ok(Vec::new()), "the file is as it was at {at}");
}

#[test]
fn a_module_that_becomes_a_package_has_its_units_changed_not_removed() {
    let (_dir, root, db) = workspace();
    std::fs::create_dir_all(root.join("pkg")).expect("mkdir");
    write(&root, "pkg/__init__.py", "");
    write(&root, "pkg/table.py", "def a():\n    return 1\n");
    let mut indexer = Indexer::open(&root, &db, options()).expect("open");
    let first = indexer.snapshot().version();
    write(&root, "pkg/table.py", "def a():\n    return 2\n");
    indexer.apply(vec![FileEvent::Changed("pkg/table.py".into())]).expect("apply");
    let edited = indexer.snapshot().version();
    // The same text, now the package's `__init__.py`: both units moved to another file.
    std::fs::remove_file(root.join("pkg/table.py")).expect("rm");
    std::fs::create_dir_all(root.join("pkg/table")).expect("mkdir");
    write(&root, "pkg/table/__init__.py", "def a():\n    return 2\n");
    indexer
        .apply(vec![FileEvent::Removed("pkg/table.py".into()), FileEvent::Changed("pkg/table/__init__.py".into())])
        .expect("apply");
    let units = |indexer: &Indexer, since: u64| -> Vec<NetChange> {
        let changes = indexer.history().changes_since(since).expect("in the history");
        changes.into_iter().filter(|c| matches!(c, NetChange::Unit(..))).collect()
    };
    let changed = vec![
        NetChange::Unit("pkg.table".into(), Change::Changed),
        NetChange::Unit("pkg.table.a".into(), Change::Changed),
    ];
    assert_eq!(units(&indexer, first), changed, "edited, then moved");
    assert_eq!(units(&indexer, edited), changed, "moved alone: a client knows them by their file");
    // An edit inside the package after the move: still changed since the module's day.
    write(&root, "pkg/table/__init__.py", "def a():\n    return 3\n");
    indexer.apply(vec![FileEvent::Changed("pkg/table/__init__.py".into())]).expect("apply");
    assert_eq!(units(&indexer, edited), changed);
}
