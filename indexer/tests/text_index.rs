//! The lexical (BM25) lane: the code tokenizer, ranking on a small repo, incremental updates,
//! a real project (requests). (Build time and search latency on django are measured in bench/.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use fresco_indexer::text_index::{TextIndex, code_token_details, code_tokens};
use fresco_indexer::{FileEvent, Indexer};

fn toks(text: &str) -> Vec<String> {
    code_tokens(text)
}

#[test]
fn tokenizer_splits_snake_case_and_keeps_the_whole_identifier() {
    assert_eq!(toks("to_key_val_list"), ["to_key_val_list", "to", "key", "val", "list"]);
    assert_eq!(toks("parse_link_header(value)"), ["parse_link_header", "parse", "link", "header", "value"]);
    assert_eq!(toks("__init__"), ["__init__", "init"]);
    assert_eq!(toks("_private"), ["_private", "private"]);
    // A plain word is emitted once, lowercased.
    assert_eq!(toks("Session session"), ["session", "session"]);
    // Only underscores: nothing.
    assert!(toks("_ __ ___").is_empty());
}

#[test]
fn tokenizer_splits_camel_and_pascal_case_with_acronyms() {
    assert_eq!(toks("HTTPAdapter"), ["httpadapter", "http", "adapter"]);
    assert_eq!(toks("getHTTPResponseCode"), ["gethttpresponsecode", "get", "http", "response", "code"]);
    assert_eq!(toks("parseURL"), ["parseurl", "parse", "url"]);
    assert_eq!(toks("camelCase"), ["camelcase", "camel", "case"]);
    assert_eq!(toks("URL"), ["url"]);
    assert_eq!(toks("XMLHttpRequest_factory"), ["xmlhttprequest_factory", "xml", "http", "request", "factory"]);
}

#[test]
fn tokenizer_handles_dotted_names() {
    assert_eq!(
        toks("requests.adapters.HTTPAdapter"),
        ["requests.adapters.httpadapter", "requests", "adapters", "httpadapter", "http", "adapter"]
    );
    assert_eq!(toks("os.path.join(a, b)"), ["os.path.join", "os", "path", "join", "a", "b"]);
    // A dot not followed by an identifier does not join; punctuation never becomes a token.
    assert_eq!(toks("end. Next"), ["end", "next"]);
    assert_eq!(toks("a..b"), ["a", "b"]);
    assert_eq!(toks(".x."), ["x"]);
    assert_eq!(toks("name: \"quoted\" AND (x) OR -y"), ["name", "quoted", "and", "x", "or", "y"]);
}

#[test]
fn tokenizer_keeps_digits_with_their_letters() {
    assert_eq!(toks("base64_encode"), ["base64_encode", "base64", "encode"]);
    assert_eq!(toks("utf8"), ["utf8"]);
    assert_eq!(toks("Py3Lexer"), ["py3lexer", "py3", "lexer"]);
    assert_eq!(toks("HTTP2Adapter"), ["http2adapter", "http2", "adapter"]);
    assert_eq!(toks("x = 42"), ["x", "42"]);
    assert_eq!(toks("3.14"), ["3.14", "3", "14"]);
}

#[test]
fn tokenizer_positions_and_offsets_are_sensible() {
    let text = "def retry_failed_connection(conn): return self.pool.getConn()";
    let tokens = code_token_details(text);
    let mut last = 0;
    for t in &tokens {
        assert!(t.position >= last, "positions decrease: {tokens:?}");
        last = t.position;
        assert!(t.offset_from < t.offset_to && t.offset_to <= text.len());
        assert_eq!(text[t.offset_from..t.offset_to].to_lowercase(), t.text, "{t:?}");
        assert!(t.position_length >= 1);
    }
    let find = |s: &str| tokens.iter().find(|t| t.text == s).expect(s).clone();
    // Subwords are consecutive; the whole identifier sits on its first subword and spans them.
    assert_eq!(find("def").position, 0);
    assert_eq!(find("retry_failed_connection").position, 1);
    assert_eq!(find("retry_failed_connection").position_length, 3);
    assert_eq!(find("retry").position, 1);
    assert_eq!(find("failed").position, 2);
    assert_eq!(find("connection").position, 3);
    assert_eq!(find("conn").position, 4);
    assert_eq!(find("self.pool.getconn").position, 6);
    assert_eq!(find("self.pool.getconn").position_length, 4);
    assert_eq!(find("getconn").position, 8);
    assert_eq!(find("get").position, 8);
}

#[test]
fn tokenizer_survives_unicode() {
    let samples = [
        "größe_Überprüfen = 1",
        "変数名 = 関数()",
        "naïveBayes",
        "ǅemal ǈubljana",
        "İstanbulİİ",
        "ΣΊΣΥΦΟΣ.σίσυφος",
        "e\u{301}tat_e\u{301}",
        "emoji 🦀_crab 🎉",
        "\u{0}\u{FFFD}\u{200B}zero\u{200D}width",
        "a.\u{1F600}.b",
        "ﬁle_ﬂow",
        "x\u{0661}\u{0662}y",
    ];
    for s in samples {
        let tokens = code_token_details(s);
        for t in &tokens {
            assert!(s.is_char_boundary(t.offset_from) && s.is_char_boundary(t.offset_to));
            assert!(!t.text.is_empty());
        }
    }
    assert_eq!(toks("größe_Überprüfen"), ["größe_überprüfen", "größe", "überprüfen"]);
    assert_eq!(toks("naïveBayes"), ["naïvebayes", "naïve", "bayes"]);
    // Words of scripts written without spaces: overlapping pairs, the whole run kept too.
    assert_eq!(toks("変数名"), ["変数名", "変数", "数名"]);
    assert_eq!(toks("返回链接的列表"), ["返回链接的列表", "返回", "回链", "链接", "接的", "的列", "列表"]);
    assert_eq!(toks("get_用户名"), ["get_用户名", "get", "用户", "户名"]);
    assert_eq!(toks("値"), ["値"]);
}

fn write(root: &Path, path: &str, text: &str) {
    let p = root.join(path);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

const NET: &str = r#""""Networking helpers."""

import socket


def retry_failed_connection(conn, attempts=3):
    """Open the connection again after it dropped."""
    for _ in range(attempts):
        if conn.open():
            return True
    return False


def close_socket(sock):
    sock.close()


class ConnectionPool:
    """A pool of open connections."""

    max_size = 10

    def acquire(self):
        return socket.socket()

    def release(self, conn):
        conn.close()
"#;

const OTHER: &str = r#""""Unrelated things that mention a connection and retrying in passing."""

RETRY_LIMIT = 5


def connection_string(host):
    return "db://" + host


def failed(items):
    return [i for i in items if not i]


def backoff_delay(n):
    """Seconds to wait before attempt n."""
    return 2 ** n


def parse_links(header):
    """返回链接的列表。"""
    return header.split(",")
"#;

fn ids(hits: &[(String, f32)]) -> Vec<&str> {
    hits.iter().map(|(id, _)| id.as_str()).collect()
}

fn small_repo() -> (tempfile::TempDir, Indexer) {
    let dir = tempfile::tempdir().expect("tempdir");
    write(dir.path(), "pkg/__init__.py", "");
    write(dir.path(), "pkg/net.py", NET);
    write(dir.path(), "pkg/other.py", OTHER);
    let mut indexer = Indexer::in_memory(dir.path(), Default::default());
    indexer.refresh().expect("refresh");
    (dir, indexer)
}

#[test]
fn ranks_the_matching_function_first() {
    let (_dir, indexer) = small_repo();
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    assert_eq!(index.version(), indexer.snapshot().version());

    let hits = index.search("retry connection", 10).expect("search");
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("pkg.net.retry_failed_connection"), "{hits:?}");
    // Scores are sorted, best first.
    assert!(hits.windows(2).all(|w| w[0].1 >= w[1].1), "{hits:?}");

    // The exact identifier, a camel-cased spelling and a dotted name find it too.
    for q in ["retry_failed_connection", "retryFailedConnection", "net.retry_failed_connection"] {
        let hits = index.search(q, 3).expect("search");
        assert_eq!(hits.first().map(|h| h.0.as_str()), Some("pkg.net.retry_failed_connection"), "{q}: {hits:?}");
    }

    // Kinds: a class by a member name, a variable by its value, a module by its docstring.
    let hits = index.search("acquire release", 3).expect("search");
    assert!(ids(&hits).contains(&"pkg.net.ConnectionPool"), "{hits:?}");
    let hits = index.search("RETRY_LIMIT", 3).expect("search");
    assert_eq!(hits[0].0, "pkg.other.RETRY_LIMIT", "{hits:?}");
    let hits = index.search("networking helpers", 3).expect("search");
    assert_eq!(hits[0].0, "pkg.net", "{hits:?}");

    // k bounds the result; queries with no known token or no token at all find nothing.
    assert_eq!(index.search("connection", 2).expect("search").len(), 2);
    assert!(index.search("connection", 0).expect("search").is_empty());
    // A k far beyond the number of units returns them all instead of reserving k slots (a
    // `k 4294967296` from a client once ran the daemon out of memory).
    let all = index.search("connection", 10).expect("search");
    for k in [1 << 32, usize::MAX] {
        assert_eq!(index.search("connection", k).expect("huge k"), all);
    }
    assert!(index.search("zebra", 10).expect("search").is_empty());
    // A docstring in Chinese is found by a word of it (no spaces separate the words).
    let hits = index.search("链接", 3).expect("search");
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("pkg.other.parse_links"), "{hits:?}");
    assert!(index.search("", 10).expect("search").is_empty());
    assert!(index.search("  ?! ", 10).expect("search").is_empty());
    // Query syntax of any kind is just text.
    for q in ["name:\"retry", "body:(x OR", "retry AND -connection^3 ~2 [a TO b] *", "\\", "{}"] {
        index.search(q, 5).expect(q);
    }
}

#[test]
fn a_long_query_keeps_its_first_words_the_index_holds_and_says_so() {
    let (_dir, indexer) = small_repo();
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    // Words no unit holds take no place: after 60 of them, `acquire` still counts (the first 48
    // distinct words were all the query used).
    let filler: Vec<String> = (0..60).map(|i| format!("w{i:03}q")).collect();
    let answer = index.search_explained(&format!("{} acquire", filler.join(" ")), 3).expect("search");
    assert!(ids(&answer.hits).contains(&"pkg.net.ConnectionPool"), "{:?}", answer.hits);
    assert_eq!(answer.note, None, "nothing the index holds was left out");
    // More words the index holds than are used: the first are, and the answer says how many.
    let mut words: Vec<String> = Vec::new();
    for (i, token) in fresco_indexer::text_index::code_tokens(&format!("{NET}\n{OTHER}")).into_iter().enumerate() {
        if !words.contains(&token) && i % 5 != 4 {
            words.push(token);
        }
    }
    assert!(words.len() > 48, "the fixture has {} distinct words", words.len());
    let note = index.search_explained(&words.join(" "), 3).expect("search").note.expect("a note");
    assert!(note.starts_with("the lexical lane used the first 48 of the "), "{note}");
}

#[test]
fn updates_follow_edits_and_removals() {
    let (dir, mut indexer) = small_repo();
    let index = TextIndex::build(indexer.snapshot(), 2).expect("build");
    let before = index.stats().expect("stats");
    assert_eq!(before.docs, indexer.snapshot().units().count() as u64);

    // Replace the function by another one.
    write(
        dir.path(),
        "pkg/net.py",
        &NET.replace(
            "def retry_failed_connection(conn, attempts=3):\n    \"\"\"Open the connection again after it dropped.\"\"\"",
            "def reconnect_with_jitter(conn, attempts=3):\n    \"\"\"Open it again, waiting a randomised interval.\"\"\"",
        ),
    );
    let report = indexer.apply(vec![FileEvent::Changed("pkg/net.py".into())]).expect("apply");
    assert!(report.published);
    index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
    assert_eq!(index.version(), indexer.snapshot().version());

    let hits = index.search("jitter randomised", 5).expect("search");
    assert_eq!(hits.first().map(|h| h.0.as_str()), Some("pkg.net.reconnect_with_jitter"), "{hits:?}");
    let hits = index.search("retry_failed_connection", 50).expect("search");
    assert!(!ids(&hits).contains(&"pkg.net.retry_failed_connection"), "{hits:?}");
    // The unchanged file is still there, exactly once.
    let hits = index.search("backoff_delay", 50).expect("search");
    assert_eq!(ids(&hits).iter().filter(|id| **id == "pkg.other.backoff_delay").count(), 1, "{hits:?}");
    // Every unit of the new snapshot is a document; nothing stale is left.
    let units = indexer.snapshot().units().count() as u64;
    assert_eq!(index.stats().expect("stats").docs, units);

    // Remove a file.
    std::fs::remove_file(dir.path().join("pkg/other.py")).expect("rm");
    let report = indexer.apply(vec![FileEvent::Removed("pkg/other.py".into())]).expect("apply");
    assert_eq!(report.removed_files, vec!["pkg/other.py".to_string()]);
    index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
    assert_eq!(index.version(), indexer.snapshot().version());
    let hits = index.search("backoff delay", 50).expect("search");
    assert!(ids(&hits).iter().all(|id| !id.starts_with("pkg.other")), "{hits:?}");
    assert_eq!(index.stats().expect("stats").docs, indexer.snapshot().units().count() as u64);

    // Add a file.
    write(dir.path(), "pkg/fresh.py", "def brand_new_helper():\n    return 'zeppelin'\n");
    let report = indexer.refresh().expect("refresh");
    index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
    let (version, hits) = index.search_versioned("zeppelin", 5).expect("search");
    assert_eq!(version, indexer.snapshot().version());
    assert_eq!(ids(&hits), ["pkg.fresh.brand_new_helper"]);
}

#[test]
fn after_many_updates_the_index_ranks_as_one_built_afresh() {
    // tantivy's BM25 statistics count deleted documents until their segment is merged: a
    // daemon's index, updated over and over, ranked differently from a fresh one. (One indexing
    // thread here and below: the segments, and so the last bits of the scores, are then the same
    // in every run, and the comparisons cannot depend on luck at a rounding step.)
    let (dir, mut indexer) = small_repo();
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    let queries = ["retry a failed connection", "close socket", "connection pool", "backoff delay"];
    for round in 0..12 {
        write(dir.path(), "pkg/net.py", &format!("{NET}\n# edit {round}\n"));
        let report = indexer.apply(vec![FileEvent::Changed("pkg/net.py".into())]).expect("apply");
        index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
        let stats = index.stats().expect("stats");
        assert!(stats.segments <= 9, "round {round}: {stats:?}");
        // Each edit re-indexes about half of the documents: past the share, all are merged.
        assert_eq!(stats.deleted, 0, "round {round}: {stats:?}");
        let fresh = TextIndex::build(indexer.snapshot(), 1).expect("fresh build");
        for q in queries {
            assert_eq!(
                index.search(q, 10).expect("search"),
                fresh.search(q, 10).expect("search"),
                "round {round}, {q:?}"
            );
        }
    }
}

/// 120 one-function modules, a third of them with a second function: enough documents that
/// editing one file deletes far fewer than the share that merges everything.
fn many_small_modules() -> (tempfile::TempDir, Indexer) {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..120 {
        let extra = if i % 3 == 0 { "\n\ndef retry_connection():\n    \"\"\"Open it again.\"\"\"\n" } else { "" };
        write(dir.path(), &format!("m{i:03}.py"), &format!("def open_{i}(conn):\n    return conn.open({i}){extra}\n"));
    }
    let mut indexer = Indexer::in_memory(dir.path(), Default::default());
    indexer.refresh().expect("refresh");
    (dir, indexer)
}

/// The two indexes give the same top `k`, scores included, for queries over [`many_small_modules`].
fn assert_ranks_alike(index: &TextIndex, fresh: &TextIndex, k: usize, when: &str) {
    for q in ["retry connection", "open conn", "open it again"] {
        assert_eq!(index.search(q, k).expect("search"), fresh.search(q, k).expect("search"), "{when}, {q:?}");
    }
}

#[test]
fn deleted_documents_left_in_segments_do_not_change_scores() {
    // Small edits leave deleted documents in their segments (below the share that merges
    // everything). BM25's statistics leave them out: the updated index scores every hit exactly
    // as an index built afresh from the same snapshot, so two processes that saw the same edits
    // batched differently answer alike.
    let (dir, mut indexer) = many_small_modules();
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    for round in 0..6 {
        let path = format!("m{:03}.py", round * 3);
        write(dir.path(), &path, &format!("def open_{round}(conn, retry=3):\n    return conn.open({round})\n"));
        let report = indexer.apply(vec![FileEvent::Changed(path)]).expect("apply");
        index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
        assert!(index.stats().expect("stats").deleted > 0, "round {round}: the test needs deleted documents left");
        let fresh = TextIndex::build(indexer.snapshot(), 1).expect("fresh build");
        assert_ranks_alike(&index, &fresh, 20, &format!("round {round}"));
    }
}

#[test]
fn ties_at_the_cut_go_to_the_smallest_unit_ids() {
    // Sixty modules define the same function (boto has 45 `connect_to_region`s, most alike): the top 10 are
    // the first ten by id, wherever the segments put their documents, even once the first ones
    // are re-indexed into a segment of their own, after the others.
    let dir = tempfile::tempdir().expect("tempdir");
    let same = "def connect_to_region(region_name, **kw_params):\n    return region_name\n";
    for i in 0..60 {
        write(dir.path(), &format!("r{i:02}.py"), same);
    }
    let mut indexer = Indexer::in_memory(dir.path(), Default::default());
    indexer.refresh().expect("refresh");
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    let expected: Vec<String> = (0..10).map(|i| format!("r{i:02}.connect_to_region")).collect();
    let top = |index: &TextIndex| -> Vec<String> {
        let hits = index.search("connect_to_region", 10).expect("search");
        assert!(hits.windows(2).all(|w| w[0].1 == w[1].1), "the units tie: {hits:?}");
        hits.into_iter().map(|(id, _)| id).collect()
    };
    assert_eq!(top(&index), expected);
    let paths: Vec<String> = (0..5).map(|i| format!("r{i:02}.py")).collect();
    for p in &paths {
        write(dir.path(), p, &format!("{same}\n# touched\n"));
    }
    let report = indexer.apply(paths.iter().map(|p| FileEvent::Changed(p.clone())).collect()).expect("apply");
    index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
    assert_eq!(top(&index), expected);
}

#[test]
fn small_updates_keep_few_segments_and_few_deleted_documents() {
    let dir = tempfile::tempdir().expect("tempdir");
    for i in 0..100 {
        write(
            dir.path(),
            &format!("m{i}.py"),
            &format!("def open_{i}():\n    return {i}\n\n\ndef close_{i}():\n    return -{i}\n"),
        );
    }
    let mut indexer = Indexer::in_memory(dir.path(), Default::default());
    indexer.refresh().expect("refresh");
    let index = TextIndex::build(indexer.snapshot(), 2).expect("build");
    for round in 0..40 {
        let i = round % 100;
        write(
            dir.path(),
            &format!("m{i}.py"),
            &format!("def open_{i}():\n    return {round}\n\n\ndef close_{i}():\n    return -{i}\n"),
        );
        let report = indexer.apply(vec![FileEvent::Changed(format!("m{i}.py"))]).expect("apply");
        index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
        let stats = index.stats().expect("stats");
        assert!(stats.segments <= 8, "round {round}: {stats:?}");
        assert!(stats.deleted * 10 <= stats.docs + stats.deleted, "round {round}: {stats:?}");
        assert_eq!(stats.docs, indexer.snapshot().units().count() as u64);
    }
}

#[test]
fn searches_run_concurrently_with_updates() {
    let (dir, mut indexer) = small_repo();
    let index = Arc::new(TextIndex::build(indexer.snapshot(), 1).expect("build"));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..2)
        .map(|_| {
            let index = index.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let (_, hits) = index.search_versioned("connection", 10).expect("search");
                    assert!(!hits.is_empty());
                    n += 1;
                }
                n
            })
        })
        .collect();
    for i in 0..5 {
        write(dir.path(), "pkg/gen.py", &format!("def generated_{i}(connection):\n    return connection\n"));
        let report = indexer.refresh().expect("refresh");
        index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
        let hits = index.search(&format!("generated_{i}"), 3).expect("search");
        assert_eq!(hits[0].0, format!("pkg.gen.generated_{i}"));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader") > 0);
    }
}

/// A pinned real project from the shared corpus (downloaded on first use).
fn corpus(name: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/fetch");
    let out = Command::new("bash")
        .arg(&script)
        .arg(name)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(out.status.success(), "corpus fetch failed: {}", String::from_utf8_lossy(&out.stderr));
    let root = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_string();
    assert!(!root.is_empty(), "corpus fetch printed no path");
    PathBuf::from(root)
}

#[test]
fn finds_sensible_units_in_requests() {
    let root = corpus("requests");
    let mut indexer = Indexer::in_memory(&root, Default::default());
    indexer.refresh().expect("refresh");
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    // One document per unit, lambdas aside (searched as part of the unit containing them).
    let searchable = indexer.snapshot().units().filter(|u| !u.unit.is_lambda()).count();
    assert!(searchable < indexer.snapshot().units().count(), "requests has lambdas");
    assert_eq!(index.stats().expect("stats").docs, searchable as u64);

    let hits = index.search("retry a failed connection", 10).expect("search");
    eprintln!("retry a failed connection: {hits:#?}");
    assert_eq!(hits.len(), 10);
    assert!(ids(&hits).iter().any(|id| id.starts_with("requests.adapters")), "{hits:?}");

    let hits = index.search("HTTPAdapter send", 5).expect("search");
    eprintln!("HTTPAdapter send: {hits:#?}");
    assert!(ids(&hits).contains(&"requests.adapters.HTTPAdapter.send"), "{hits:?}");

    let hits = index.search("parse link header", 3).expect("search");
    assert_eq!(hits[0].0, "requests.utils.parse_header_links", "{hits:?}");

    let hits = index.search("to_key_val_list", 3).expect("search");
    assert_eq!(hits[0].0, "requests.utils.to_key_val_list", "{hits:?}");
}

#[test]
fn updates_through_both_kinds_of_merge_rank_as_a_fresh_index() {
    // One file per update: past 8 segments the smallest are merged (rounds 7 and 11), and once a
    // tenth of the documents are deleted everything is (round 12); after each, the index answers
    // as one built afresh from the same snapshot.
    let (dir, mut indexer) = many_small_modules();
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    let mut merged = (false, false);
    for round in 0..14 {
        let before = index.stats().expect("stats");
        let path = format!("m{:03}.py", (round * 7) % 120);
        write(dir.path(), &path, &format!("def open_{round}(conn, retry=3):\n    return conn.open({round})\n"));
        let report = indexer.apply(vec![FileEvent::Changed(path)]).expect("apply");
        index.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
        let after = index.stats().expect("stats");
        merged.0 |= after.segments < before.segments && after.deleted > 0;
        merged.1 |= after.segments == 1 && after.deleted == 0;
        let fresh = TextIndex::build(indexer.snapshot(), 1).expect("fresh build");
        assert_ranks_alike(&index, &fresh, 20, &format!("round {round}"));
    }
    assert_eq!(merged, (true, true), "the test needs both kinds of merge");
}

#[test]
fn a_file_named_twice_in_one_update_is_indexed_once() {
    // The lanes put the changes of several versions into one update when they come faster than
    // it runs (a file saved twice): each unit must stay one document.
    let (dir, mut indexer) = small_repo();
    let index = TextIndex::build(indexer.snapshot(), 1).expect("build");
    write(dir.path(), "pkg/net.py", &format!("{NET}\n# saved\n"));
    let report = indexer.apply(vec![FileEvent::Changed("pkg/net.py".into())]).expect("apply");
    let twice: Vec<String> = report.changed_files.iter().chain(&report.changed_files).cloned().collect();
    index.update(indexer.snapshot(), &twice, &report.removed_files).expect("update");
    assert_eq!(index.stats().expect("stats").docs, indexer.snapshot().units().count() as u64);
    let hits = index.search("retry_failed_connection", 50).expect("search");
    assert_eq!(ids(&hits).iter().filter(|id| **id == "pkg.net.retry_failed_connection").count(), 1, "{hits:?}");
}

// ---------------------------------------------------------------------------------------------
// The index stored on disk (queries without a daemon)
// ---------------------------------------------------------------------------------------------

/// Every query over [`many_small_modules`] ranks alike, scores included, in both indexes.
fn assert_stored_ranks_as_fresh(stored: &TextIndex, indexer: &Indexer, when: &str) {
    let fresh = TextIndex::build(indexer.snapshot(), 1).expect("fresh build");
    assert_eq!(stored.version(), indexer.snapshot().version(), "{when}");
    assert_eq!(stored.stats().expect("stats").docs, fresh.stats().expect("stats").docs, "{when}");
    assert_ranks_alike(stored, &fresh, 50, when);
}

#[test]
fn a_stored_index_reopened_indexes_only_what_changed_and_ranks_as_one_built_afresh() {
    let (repo, mut indexer) = many_small_modules();
    let store = tempfile::tempdir().expect("tempdir");
    let dir = store.path().join("text");
    let first = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("create");
    assert_stored_ranks_as_fresh(&first, &indexer, "created");
    drop(first);

    // Nothing changed: reopened as it is, no commit written.
    let meta = std::fs::read(dir.join("meta.json")).expect("meta");
    let same = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("reopen");
    assert_eq!(std::fs::read(dir.join("meta.json")).expect("meta"), meta, "an unchanged tree commits nothing");
    assert_stored_ranks_as_fresh(&same, &indexer, "reopened unchanged");
    drop(same);

    // Files edited, added and removed while no index was open: the next open catches up.
    write(repo.path(), "m000.py", "def open_0(conn, zeppelin=1):\n    return conn.open(0)\n");
    write(repo.path(), "m500.py", "def retry_connection_later():\n    \"\"\"Open it again, later.\"\"\"\n");
    std::fs::remove_file(repo.path().join("m001.py")).expect("remove");
    indexer.refresh().expect("refresh");
    let caught_up = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("reopen");
    assert_ne!(std::fs::read(dir.join("meta.json")).expect("meta"), meta);
    assert_eq!(ids(&caught_up.search("zeppelin", 5).expect("search")), ["m000.open_0"]);
    assert!(caught_up.search("open_1", 50).expect("search").iter().all(|(id, _)| id != "m001.open_1"));
    assert_stored_ranks_as_fresh(&caught_up, &indexer, "after edits");

    // Updated in place, then reopened: the commit recorded what the update indexed.
    write(repo.path(), "m002.py", "def open_2(conn):\n    return conn.open('quasar')\n");
    let report = indexer.refresh().expect("refresh");
    caught_up.update(indexer.snapshot(), &report.changed_files, &report.removed_files).expect("update");
    drop(caught_up);
    let meta = std::fs::read(dir.join("meta.json")).expect("meta");
    let reopened = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("reopen");
    assert_eq!(std::fs::read(dir.join("meta.json")).expect("meta"), meta, "the update's commit is current");
    assert_eq!(ids(&reopened.search("quasar", 5).expect("search")), ["m002.open_2"]);
    assert_stored_ranks_as_fresh(&reopened, &indexer, "after an update");
}

#[test]
fn a_stored_index_that_is_not_fresco_s_or_is_damaged_is_rebuilt() {
    let (_repo, indexer) = many_small_modules();
    let store = tempfile::tempdir().expect("tempdir");
    let dir = store.path().join("text");
    // Garbage where the index should be, then an index whose commit names no files (written by
    // other code): both are replaced.
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("meta.json"), b"\x00 not json").expect("write");
    let rebuilt = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("rebuilt over garbage");
    assert_stored_ranks_as_fresh(&rebuilt, &indexer, "over garbage");
    drop(rebuilt);
    let meta = std::fs::read_to_string(dir.join("meta.json")).expect("meta");
    let foreign = meta.replace("fresco text index", "fresco text index of other code");
    assert_ne!(foreign, meta, "the commit carries the manifest");
    std::fs::write(dir.join("meta.json"), foreign).expect("write");
    let rebuilt = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("rebuilt over another format");
    assert_stored_ranks_as_fresh(&rebuilt, &indexer, "over another format");
    assert!(std::fs::read_to_string(dir.join("meta.json")).expect("meta").contains("fresco text index "));
}

#[test]
fn a_stored_index_held_by_another_process_is_left_alone() {
    let (_repo, indexer) = many_small_modules();
    let store = tempfile::tempdir().expect("tempdir");
    let dir = store.path().join("text");
    let holder = TextIndex::stored(&dir, indexer.snapshot(), 1).expect("create");
    let error = TextIndex::stored(&dir, indexer.snapshot(), 1).expect_err("the writer lock is held");
    assert!(error.to_string().contains("in use"), "{error}");
    // The holder's index is intact.
    assert_stored_ranks_as_fresh(&holder, &indexer, "while another open was refused");
}
