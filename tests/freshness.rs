//! A freshness stress test of the real daemon: a writer edits files continuously while readers
//! query in every freshness mode, and no answer may be older than the disk at the moment its
//! query was sent unless it says so.
//!
//! Each file `mK.py` holds an edit number N (on its first line) and a function `f` that calls
//! `t_N`, defined in the same file. So `callees mK.f` names the N the answer was computed from,
//! and a reader that reads the file just before sending knows the oldest N a fresh answer may
//! show.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const FILES: usize = 12;
const RUN_FOR: Duration = Duration::from_secs(8);
/// Pause between two edits of the writer.
const EDIT_PAUSE: Duration = Duration::from_millis(3);

fn content(n: u64) -> String {
    format!("# N={n}\n\n\ndef t_{n}():\n    return {n}\n\n\ndef f():\n    return t_{n}()\n")
}

/// The N a file holds on disk now.
fn n_on_disk(path: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(path).expect("read");
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("# N="))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no N in {}: {text:?}", path.display()))
}

/// A tiny deterministic PRNG (xorshift), so the test needs no dependency.
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

#[derive(Default, Debug)]
struct Counts {
    /// Answers (results, not errors).
    answers: u64,
    /// Answers that showed exactly the N read just before sending, or a later one.
    fresh: u64,
    /// Answers older than the disk, with the item marked `"stale": true` (allow mode).
    stale_marked: u64,
    /// Answers older than the disk and not marked: must never happen.
    stale_unmarked: u64,
    /// STALE errors.
    stale_errors: u64,
    /// Any other error.
    other_errors: u64,
}

#[test]
fn readers_never_get_unmarked_stale_answers_while_a_writer_edits() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("repo");
    let scratch = tmp.path().join("scratch");
    std::fs::create_dir_all(&root).expect("mkdir");
    std::fs::create_dir_all(&scratch).expect("mkdir");
    let root = root.canonicalize().expect("canonical");
    for k in 0..FILES {
        std::fs::write(root.join(format!("m{k}.py")), content(0)).expect("write");
    }
    let d = Daemon::start(&root, &tmp.path().join("db"), &tmp.path().join("rt"));
    let socket = d.socket().expect("socket");
    assert_eq!(d.conn().status()["files"], FILES as u64);

    let stop = Arc::new(AtomicBool::new(false));
    let edits = Arc::new(AtomicU64::new(0));
    let started = Instant::now();

    let writer = {
        let (root, scratch, stop, edits) = (root.clone(), scratch.clone(), stop.clone(), edits.clone());
        std::thread::spawn(move || {
            let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let k = rng.below(FILES);
                write_atomic(&root.join(format!("m{k}.py")), &scratch, content(n).as_bytes());
                edits.store(n, Ordering::Relaxed);
                std::thread::sleep(EDIT_PAUSE);
            }
        })
    };

    let readers: Vec<_> = ["wait", "strict", "allow"]
        .into_iter()
        .enumerate()
        .map(|(i, mode)| {
            let (root, socket, stop) = (root.clone(), socket.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = Conn::connect(&socket).expect("connect");
                let mut rng = Rng(0x2545_f491_4f6c_dd1d + i as u64);
                let mut counts = Counts::default();
                let mut examples = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let k = rng.below(FILES);
                    let sent_n = n_on_disk(&root.join(format!("m{k}.py")));
                    let r = c.call("query", json!({"query": format!("callees m{k}.f"), "freshness": mode}));
                    let Some(result) = r.get("result") else {
                        match r["error"]["code"].as_str() {
                            Some("STALE") => counts.stale_errors += 1,
                            _ => {
                                counts.other_errors += 1;
                                if examples.len() < 5 {
                                    examples.push(format!("error: {r}"));
                                }
                            }
                        }
                        continue;
                    };
                    counts.answers += 1;
                    let items = result["results"].as_array().expect("results");
                    let item =
                        items.iter().find(|it| it["name"].as_str().is_some_and(|n| n.starts_with(&format!("m{k}.t_"))));
                    let Some(item) = item else {
                        counts.other_errors += 1;
                        if examples.len() < 5 {
                            examples.push(format!("no t_N in {result}"));
                        }
                        continue;
                    };
                    let got: u64 = item["name"].as_str().expect("name")[format!("m{k}.t_").len()..]
                        .parse()
                        .expect("N in the name");
                    let marked = item["stale"] == true;
                    if got >= sent_n {
                        counts.fresh += 1;
                    } else if marked {
                        counts.stale_marked += 1;
                    } else {
                        counts.stale_unmarked += 1;
                        if examples.len() < 5 {
                            examples.push(format!("m{k}: sent at N={sent_n}, answered N={got} unmarked: {result}"));
                        }
                    }
                }
                (mode, counts, examples)
            })
        })
        .collect();

    std::thread::sleep(RUN_FOR);
    stop.store(true, Ordering::Relaxed);
    writer.join().expect("writer");
    let results: Vec<_> = readers.into_iter().map(|r| r.join().expect("reader")).collect();
    let elapsed = started.elapsed();

    // Once the writer stops, every file converges to what is on disk.
    let mut c = d.conn();
    for k in 0..FILES {
        let n = n_on_disk(&root.join(format!("m{k}.py")));
        let r = c.ok(&format!("callees m{k}.f"), "wait");
        assert_eq!(names(&r), vec![format!("m{k}.t_{n}")], "m{k} converges");
        let r = c.ok(&format!("callees m{k}.f"), "strict");
        assert_eq!(names(&r), vec![format!("m{k}.t_{n}")], "m{k} converges (strict)");
    }
    let status = c.status();

    println!(
        "freshness stress: {} edits in {elapsed:.1?}, final version {}, watcher {}",
        edits.load(Ordering::Relaxed),
        status["version"],
        status["watcher"]
    );
    let mut unmarked = 0;
    for (mode, counts, examples) in &results {
        println!("  {mode:<6} {counts:?}");
        for e in examples {
            println!("         e.g. {e}");
        }
        unmarked += counts.stale_unmarked;
    }
    assert_eq!(unmarked, 0, "answers older than the disk were served unmarked");
    let wait = &results[0].1;
    assert!(wait.answers > 0, "wait mode answered at least once while the writer ran: {wait:?}");
    for (mode, counts, examples) in &results {
        assert_eq!(counts.other_errors, 0, "{mode}: {examples:?}");
        if *mode != "allow" {
            assert_eq!(counts.stale_marked, 0, "{mode} never serves stale items");
        }
    }
    assert!(results[2].1.answers > 0, "allow always answers");
}
