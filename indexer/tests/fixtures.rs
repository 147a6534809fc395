//! Data-driven name-resolution fixtures, in the style of rust-analyzer's expect tests.
//!
//! Every directory `tests/fixtures/<case>/` holds a small Python tree under `input/` and the graph
//! fresco must produce for it in `expected.txt`, one sorted line per fact:
//!
//! ```text
//! <kind> <src> -> <dst> @<line>          edges (no `@line` for contains)
//! unit <kind> <id> <start>-<end>         units
//! external <id>                          edge targets defined nowhere in the tree
//! unresolved <caller> <callee> @<line>   call sites fresco could not resolve
//! parse_errors <path> <n>                files tree-sitter had to recover in
//! ```
//!
//! The expected files state Python's semantics, not whatever fresco happens to output: a failing
//! fixture is a resolver bug (or a deliberate, documented limitation).
//!
//! Run with `UPDATE_EXPECT=1` to rewrite the expected files from fresco's current output (then
//! review the diff!). Run with `FIXTURE=<substring>` to run only matching fixtures.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use fresco_indexer::{Indexer, IndexerOptions};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests").join("fixtures")
}

/// Indexes `root` in memory and renders the snapshot as sorted lines.
fn render(root: &Path) -> Vec<String> {
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().unwrap_or_else(|e| panic!("indexing {} failed: {e}", root.display()));
    let snapshot = indexer.snapshot();
    let mut lines: Vec<String> = Vec::new();
    for (edge, _file) in snapshot.edges() {
        let mut line = format!("{} {} -> {}", edge.kind.as_str(), edge.src, edge.dst);
        if let Some(l) = edge.line {
            write!(line, " @{l}").unwrap();
        }
        lines.push(line);
    }
    for unit in snapshot.units() {
        let u = unit.unit;
        lines.push(format!("unit {} {} {}-{}", u.kind.as_str(), u.id, u.start_line, u.end_line));
    }
    for external in snapshot.externals() {
        lines.push(format!("external {external}"));
    }
    for file in snapshot.files() {
        let g = &file.graph;
        if g.parse_errors > 0 {
            lines.push(format!("parse_errors {} {}", g.path, g.parse_errors));
        }
        if let Some(reason) = &g.skipped {
            lines.push(format!("skipped {} {reason}", g.path));
        }
        for u in file.unresolved() {
            lines.push(format!("unresolved {} {} @{}", u.caller, u.callee, u.line));
        }
    }
    for issue in indexer.walk_issues() {
        lines.push(format!("walk_issue {} {}", issue.path, issue.message));
    }
    lines.sort();
    lines.dedup();
    lines
}

/// Reads an expected file: its non-empty lines, ignoring `#` comments.
fn read_expected(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(str::trim_end).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect()
}

/// The header comment lines of an existing expected file, kept when it is rewritten.
fn header(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let mut out = String::new();
    for line in text.lines().take_while(|l| l.starts_with('#')) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// A readable diff: lines fresco should produce but does not, and lines it should not produce.
fn diff(expected: &[String], actual: &[String]) -> Option<String> {
    let exp: BTreeSet<&String> = expected.iter().collect();
    let act: BTreeSet<&String> = actual.iter().collect();
    let missing: Vec<&&String> = exp.difference(&act).collect();
    let extra: Vec<&&String> = act.difference(&exp).collect();
    if missing.is_empty() && extra.is_empty() {
        return None;
    }
    let mut out = String::new();
    for line in &missing {
        writeln!(out, "  - {line}").unwrap();
    }
    for line in &extra {
        writeln!(out, "  + {line}").unwrap();
    }
    writeln!(out, "  ({} missing `-`, {} unexpected `+`)", missing.len(), extra.len()).unwrap();
    Some(out)
}

#[test]
fn fixtures() {
    let update = std::env::var("UPDATE_EXPECT").is_ok_and(|v| v == "1");
    let filter = std::env::var("FIXTURE").ok();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("input").is_dir())
        .filter(|p| {
            filter.as_ref().is_none_or(|f| p.file_name().is_some_and(|n| n.to_string_lossy().contains(f.as_str())))
        })
        .collect();
    cases.sort();
    assert!(!cases.is_empty(), "no fixtures found");

    let mut failures = Vec::new();
    let mut passed = Vec::new();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().to_string();
        // Indexed on a thread of its own, so that a fixture the resolver takes exponential time
        // over (as `self_unpacking` and `self_rebinding` once did) fails instead of hanging the
        // run. The limit is generous: each fixture takes milliseconds.
        let (sender, receiver) = std::sync::mpsc::channel();
        let input = case.join("input");
        std::thread::spawn(move || {
            let _ = sender.send(render(&input));
        });
        let actual = match receiver.recv_timeout(std::time::Duration::from_secs(120)) {
            Ok(actual) => actual,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                failures.push(format!("fixture `{name}` was not indexed within 120 s"));
                continue;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                failures.push(format!("fixture `{name}`: indexing panicked (see above)"));
                continue;
            }
        };
        let expected_path = case.join("expected.txt");
        if update {
            let mut text = header(&expected_path);
            for line in &actual {
                text.push_str(line);
                text.push('\n');
            }
            std::fs::write(&expected_path, text).expect("write expected.txt");
            continue;
        }
        let expected = read_expected(&expected_path);
        match diff(&expected, &actual) {
            None => passed.push(name),
            Some(d) => failures.push(format!("fixture `{name}` (- expected, missing; + actual, unexpected):\n{d}")),
        }
    }
    if update {
        eprintln!("updated {} expected files", cases.len());
        return;
    }
    eprintln!("{} fixtures passed: {}", passed.len(), passed.join(", "));
    if !failures.is_empty() {
        panic!(
            "{} of {} fixtures failed (rerun with UPDATE_EXPECT=1 to accept fresco's output):\n\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        );
    }
}
