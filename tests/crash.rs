//! Crash safety: killing fresco (SIGKILL) at any point of a large update leaves the last complete
//! version on disk, never a mix, and the next open catches up to exactly what a clean index of
//! the final files gives.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;

/// The export of `root` with index `db`, as a comparable set of lines (nodes and edges).
fn export(root: &Path, db: &Path, out: &Path, stored: bool) -> BTreeSet<String> {
    try_export(root, db, out, stored).unwrap_or_else(|err| panic!("export failed: {err}"))
}

/// [`export`], or what the command said when it failed.
fn try_export(root: &Path, db: &Path, out: &Path, stored: bool) -> Result<BTreeSet<String>, String> {
    let _ = std::fs::remove_dir_all(out);
    let mut args = vec![
        "export".to_string(),
        root.display().to_string(),
        "--db".into(),
        db.display().to_string(),
        "--out".into(),
        out.display().to_string(),
    ];
    if stored {
        args.push("--stored".into());
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = run(&refs);
    if !result.status.success() {
        return Err(stderr(&result));
    }
    let mut lines = BTreeSet::new();
    for file in ["nodes.jsonl", "edges.jsonl"] {
        let text = std::fs::read_to_string(out.join(file)).expect("export file");
        lines.extend(text.lines().map(str::to_string));
    }
    Ok(lines)
}

/// A repository of `n` modules; `generation` changes every function's body and calls.
fn write_repo(root: &Path, n: usize, generation: usize) {
    std::fs::create_dir_all(root.join("pkg")).expect("mkdir");
    std::fs::write(root.join("pkg/__init__.py"), "").expect("write");
    for i in 0..n {
        let next = (i + 1 + generation) % n;
        let mut text = format!("from pkg import m{next}\n\n\n");
        for f in 0..6 {
            text.push_str(&format!(
                "def f{f}_{generation}(x=None):\n    \"\"\"Generation {generation}.\"\"\"\n    return m{next}.f{}_{generation}(x)\n\n\n",
                (f + 1) % 6
            ));
        }
        text.push_str(&format!("class C{i}:\n    def run(self):\n        return f0_{generation}()\n"));
        std::fs::write(root.join(format!("pkg/m{i}.py")), text).expect("write");
    }
}

#[test]
fn a_kill_at_any_point_leaves_a_complete_version_and_the_next_open_catches_up() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("repo");
    let db = work.path().join("db");
    let out = work.path().join("out");
    let n = 400;

    write_repo(&root, n, 0);
    let first = run(&["index", root.to_str().expect("utf8"), "--db", db.to_str().expect("utf8")]);
    assert!(first.status.success(), "{}", stderr(&first));
    let before = export(&root, &db, &out, true);

    // The update every killed run attempts: every file changes.
    write_repo(&root, n, 1);
    let clean_db = work.path().join("clean-db");
    let clean = export(&root, &clean_db, &out, false);
    assert_ne!(before, clean);

    // How long an uninterrupted update takes, to spread the kills over it.
    let probe_db = work.path().join("probe-db");
    copy_tree(&db, &probe_db);
    let started = Instant::now();
    let probe = run(&["index", root.to_str().expect("utf8"), "--db", probe_db.to_str().expect("utf8")]);
    assert!(probe.status.success());
    let full = started.elapsed();

    let mut outcomes = (0, 0, 0); // (old version kept, new version complete, process finished first)
    let mut damaged = 0;
    for step in 0..12u32 {
        let attempt_db = work.path().join(format!("db-{step}"));
        copy_tree(&db, &attempt_db);
        let delay = full.mul_f64(f64::from(step) / 10.0);
        let mut child = fresco()
            .args(["index", root.to_str().expect("utf8"), "--db", attempt_db.to_str().expect("utf8")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(delay);
        let finished = child.try_wait().expect("try_wait").is_some();
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();

        // What is on disk is exactly one complete version: the old or the new, never a mix. Or,
        // rarely, a database sled 0.34 cannot open again after the kill: `--stored` repairs
        // nothing and says so, and the catch-up below rebuilds it from the files.
        let stored = match try_export(&root, &attempt_db, &out, true) {
            Ok(stored) => stored,
            Err(err) if err.contains("the index database is damaged") => {
                // Only a kill mid-write may leave that: a run that finished left a whole store.
                assert!(!finished, "kill after {delay:?}: a finished run left a damaged store: {err}");
                damaged += 1;
                let caught_up = export(&root, &attempt_db, &out, false);
                assert!(caught_up == clean, "kill after {delay:?}: rebuilding did not give a clean index");
                continue;
            }
            Err(err) => panic!("kill after {delay:?}: export --stored failed: {err}"),
        };
        if stored == before {
            outcomes.0 += 1;
        } else if stored == clean {
            outcomes.1 += 1;
        } else {
            let missing = clean.difference(&stored).take(5).collect::<Vec<_>>();
            let extra = stored.difference(&clean).take(5).collect::<Vec<_>>();
            panic!("kill after {delay:?}: the store holds a mix of versions\nmissing {missing:#?}\nextra {extra:#?}");
        }
        if finished {
            outcomes.2 += 1;
        }
        // A database sled could not open again (see above) is counted to be seen.
        if attempt_db.join("graph.damaged").exists() {
            damaged += 1;
        }
        // And the next open catches up to exactly the clean graph.
        let caught_up = export(&root, &attempt_db, &out, false);
        assert!(caught_up == clean, "kill after {delay:?}: reopening did not catch up to a clean index");
    }
    eprintln!(
        "kills: {} left the previous version, {} the new one ({} runs had finished, {} rebuilt a database sled could not open); full update {:?}",
        outcomes.0, outcomes.1, outcomes.2, damaged, full
    );
    assert!(outcomes.0 > 0, "no kill landed before the commit: the test did not exercise a crash");
    let _ = Duration::ZERO;
}

#[test]
fn a_kill_during_the_first_index_leaves_no_version_or_the_whole_one() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("repo");
    let out = work.path().join("out");
    // More files than one chunk of the first commit, which is written in chunks.
    write_repo(&root, 700, 0);
    let clean = export(&root, &work.path().join("clean-db"), &out, false);
    let probe_db = work.path().join("probe-db");
    let started = Instant::now();
    assert!(run(&["index", root.to_str().expect("utf8"), "--db", probe_db.to_str().expect("utf8")]).status.success());
    let full = started.elapsed();
    let (mut empty, mut damaged) = (0, 0);
    for step in 0..8u32 {
        let db = work.path().join(format!("first-{step}"));
        let mut child = fresco()
            .args(["index", root.to_str().expect("utf8"), "--db", db.to_str().expect("utf8")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        std::thread::sleep(full.mul_f64(0.3 + f64::from(step) / 10.0));
        let _ = child.kill();
        let _ = child.wait();
        // As above: a database sled cannot open again after the kill is said to be damaged.
        match try_export(&root, &db, &out, true) {
            Ok(stored) if stored.is_empty() => empty += 1,
            Ok(stored) => assert!(stored == clean, "kill after {step}: the first version on disk is partial"),
            Err(err) if err.contains("the index database is damaged") => damaged += 1,
            Err(err) => panic!("kill after {step}: export --stored failed: {err}"),
        }
        assert!(export(&root, &db, &out, false) == clean, "reopening did not catch up to a clean index");
    }
    eprintln!(
        "first-index kills: {empty} left no version, {damaged} a database sled could not open, {} the complete one",
        8 - empty - damaged
    );
}

#[test]
fn a_corrupt_store_is_rebuilt_with_a_warning() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("repo");
    let db = work.path().join("db");
    write_repo(&root, 20, 0);
    let first = run(&["index", root.to_str().expect("utf8"), "--db", db.to_str().expect("utf8")]);
    assert!(first.status.success());
    // Damage every file of the store.
    for entry in walk(&db) {
        let mut bytes = std::fs::read(&entry).expect("read");
        if bytes.len() > 64 {
            let mid = bytes.len() / 2;
            for b in &mut bytes[mid..mid + 32] {
                *b ^= 0x5a;
            }
            std::fs::write(&entry, bytes).expect("write");
        }
    }
    let again = run(&["index", root.to_str().expect("utf8"), "--db", db.to_str().expect("utf8"), "--json"]);
    assert!(again.status.success(), "a corrupt store must not fail the index: {}", stderr(&again));
    assert!(json(&again)["units"].as_u64().unwrap_or(0) > 100);
    let text = stderr(&again);
    assert!(text.contains("rebuilt") || text.contains("corrupt"), "a warning is printed: {text}");
}

/// sled 0.34 itself refusing to open its database (as it was seen to do, rarely, after a
/// SIGKILL): fresco keeps the damaged database aside, says so, and rebuilds from the files.
#[test]
fn a_database_sled_cannot_open_is_set_aside_and_rebuilt() {
    let work = tempfile::tempdir().expect("tempdir");
    let root = work.path().join("repo");
    let db = work.path().join("db");
    let out = work.path().join("out");
    write_repo(&root, 20, 0);
    let clean = export(&root, &work.path().join("clean-db"), &out, false);
    let first = run(&["index", root.to_str().expect("utf8"), "--db", db.to_str().expect("utf8")]);
    assert!(first.status.success());
    // sled checks its configuration file against a checksum when it opens.
    let conf = db.join("graph").join("conf");
    let original = std::fs::read(&conf).expect("sled's conf file");
    let mut damaged = original.clone();
    damaged[5] ^= 0x5a;
    std::fs::write(&conf, &damaged).expect("write");

    // `export --stored` reads the store as it is: it says the store cannot be read and fails,
    // repairing nothing, so that the next index still finds the damage and says so.
    let (db_s, out_s) = (db.to_str().expect("utf8"), out.to_str().expect("utf8"));
    let export_stored = || run(&["export", root.to_str().expect("utf8"), "--db", db_s, "--out", out_s, "--stored"]);
    let refused = export_stored();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("cannot be read as it is"), "{}", stderr(&refused));
    assert_eq!(std::fs::read(&conf).expect("conf"), damaged, "export --stored changed the store");
    assert!(!db.join("graph.damaged").exists(), "export --stored set the store aside");
    // A marker naming a version the store does not hold: the same.
    std::fs::write(&conf, &original).expect("write");
    let marker = db.join("graph").join("committed-version");
    let committed = std::fs::read(&marker).expect("the committed-version marker");
    std::fs::write(&marker, "999\n").expect("write");
    let refused = export_stored();
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert_eq!(std::fs::read_to_string(&marker).expect("marker"), "999\n", "export --stored changed the marker");
    std::fs::write(&marker, &committed).expect("write");
    std::fs::write(&conf, &damaged).expect("write");
    // An index directory that is not there (a mistyped --db) is no empty version.
    let missing = work.path().join("no-such-db");
    let refused = run(&[
        "export",
        root.to_str().expect("utf8"),
        "--db",
        missing.to_str().expect("utf8"),
        "--out",
        out_s,
        "--stored",
    ]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("no index is stored at"), "{}", stderr(&refused));
    assert!(!missing.exists(), "export --stored made an index directory");

    let again = run(&["index", root.to_str().expect("utf8"), "--db", db.to_str().expect("utf8")]);
    assert!(again.status.success(), "a damaged database must not fail the index: {}", stderr(&again));
    let text = stderr(&again);
    assert!(text.contains("damaged") && text.contains("rebuilt"), "a warning is printed: {text}");
    assert!(db.join("graph.damaged").join("conf").is_file(), "the damaged database is kept aside");
    assert_eq!(export(&root, &db, &out, true), clean, "the rebuilt store holds the clean graph");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = entry.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
