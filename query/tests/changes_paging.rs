//! `changes since V until W skip N` pages through a change larger than the result limit: the
//! pages, read while the index moves on, add up to the whole range, each change once.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::{Context, Limits, Output};

fn names(answer: &Output) -> Vec<String> {
    answer.results.iter().map(|r| format!("{} {:?} {:?}", r.name, r.change, r.from)).collect()
}

#[test]
fn pages_add_up_to_the_whole_change() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.py"), "def f0():\n    pass\n").expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let since = indexer.snapshot().version();
    // 30 functions each calling the one before: 30 units and 29 edges added, and the module.
    let text: String = (0..30).map(|i| format!("def f{i}():\n    return f{}()\n\n\n", i.max(1) - 1)).collect();
    std::fs::write(dir.path().join("a.py"), text).expect("write");
    indexer.refresh().expect("index");
    let until = indexer.snapshot().version();

    let snapshot = indexer.snapshot().clone();
    let mut ctx = Context::new(&snapshot);
    ctx.history = Some(indexer.history());
    let whole = fresco_query::run(&ctx, &format!("changes since {since}")).expect("changes");
    assert!(!whole.truncated && whole.notes.is_empty(), "{:?}", whole.notes);
    assert!(whole.results.len() > 40, "{}", whole.results.len());

    // The index moves on: the range keeps its end, and the pages, followed by their notes, add
    // up to it.
    std::fs::write(dir.path().join("b.py"), "def g():\n    pass\n").expect("write");
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let newest = snapshot.version();
    let run = |query: &str, max_results: usize| {
        let mut ctx = Context::new(&snapshot);
        ctx.history = Some(indexer.history());
        ctx.limits = Limits { max_results, ..Limits::default() };
        fresco_query::run(&ctx, query)
    };
    let follow = |first: String| {
        let (mut rows, mut query, mut pages) = (Vec::new(), first, 0);
        loop {
            let page = run(&query, 16).expect("a page");
            rows.extend(names(&page));
            pages += 1;
            match page.notes.iter().find_map(|n| n.split('`').nth(1)) {
                Some(next) if pages < 20 => query = next.to_string(),
                _ => return (rows, pages),
            }
        }
    };
    let (paged, pages) = follow(format!("changes since {since} until {until}"));
    assert_eq!(paged, names(&whole), "the pages, in order, are the whole range, each change once");
    assert_eq!(pages, whole.results.len().div_ceil(16));

    // Followed by other steps, a page is still `limit` changes, and the note's query reads the
    // next: filtered page by page, the pages add up to the whole range filtered.
    let (mut paged_units, mut query, mut pages) = (Vec::new(), format!("changes since {since} until {until}"), 0);
    loop {
        let page = run(&format!("{query} | where kind = function"), 16).expect("a filtered page");
        paged_units.extend(names(&page));
        pages += 1;
        match page.notes.iter().find_map(|n| n.split('`').nth(1)) {
            Some(next) if pages < 20 => query = next.to_string(),
            _ => break,
        }
    }
    let whole_filtered = run(&format!("changes since {since} until {until} | where kind = function"), 2000)
        .expect("the range filtered at once");
    assert!(whole_filtered.results.len() > 16 && whole_filtered.results.len() < whole.results.len());
    assert_eq!(paged_units, names(&whole_filtered), "each change once, in order");
    assert_eq!(pages, whole.results.len().div_ceil(16));

    // Only counted, the range is counted whole, not a page of it.
    let counted = run(&format!("changes since {since} until {until} | count"), 16).expect("count");
    assert_eq!(counted.count, Some(whole.results.len()), "{:?}", counted.notes);

    // Without `until`, the first page's note fixes the range at the answer's version.
    let to_newest = run(&format!("changes since {since}"), 2000).expect("changes");
    assert!(to_newest.results.len() > whole.results.len(), "b.py's changes too");
    let (paged, _) = follow(format!("changes since {since}"));
    assert_eq!(paged, names(&to_newest));

    // The last page, exactly as long as the limit, is whole: not truncated, no next page.
    let last =
        run(&format!("changes since {since} until {until} skip {}", whole.results.len() - 16), 16).expect("last");
    assert_eq!(last.results.len(), 16);
    assert!(!last.truncated && last.notes.is_empty(), "{:?}", last.notes);

    // Placed at the version `until` names, as a parse error is.
    let query = format!("changes since {since} until {}", newest + 1);
    let later = run(&query, 16).expect_err("past the answer's version");
    assert!(later.to_string().contains("after this answer's version"), "{later}");
    assert_eq!(later.place().map(|p| p.position), query.rfind(' ').map(|space| space + 1), "{later}");
    let query = format!("changes since {until} until {since}");
    let backwards = run(&query, 16).expect_err("backwards");
    assert!(backwards.to_string().contains("before"), "{backwards}");
    assert_eq!(backwards.place().map(|p| (p.line, p.column)), query.rfind(' ').map(|space| (1, space + 2)));
    // A `since` past every version is from another index: HISTORY_EXPIRED, not a complaint about
    // an `until` nobody wrote.
    let ahead = run(&format!("changes since {}", newest + 40), 16).expect_err("no such version");
    assert_eq!(ahead.code(), "HISTORY_EXPIRED", "{ahead}");
    assert!(ahead.to_string().contains("newer than any this index published"), "{ahead}");
    let twice = run(&format!("changes since {since} skip 1 skip 2"), 16);
    assert!(twice.is_err_and(|e| e.to_string().contains("given twice")));
}

/// A removed unit sorts by where it was, as its row shows: between the files around it, not
/// before every file.
#[test]
fn removed_units_sort_by_where_they_were() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (file, f) in [("m0.py", "a"), ("m1.py", "b"), ("m2.py", "c")] {
        std::fs::write(dir.path().join(file), format!("def {f}():\n    pass\n")).expect("write");
    }
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let since = indexer.snapshot().version();
    std::fs::write(dir.path().join("m0.py"), "def a():\n    pass\n\n\ndef a2():\n    pass\n").expect("write");
    std::fs::write(dir.path().join("m2.py"), "def c():\n    pass\n\n\ndef c2():\n    pass\n").expect("write");
    std::fs::remove_file(dir.path().join("m1.py")).expect("remove");
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let mut ctx = Context::new(&snapshot);
    ctx.history = Some(indexer.history());
    for (query, expected) in [
        (format!("changes since {since} | order by file"), ["m0.py", "m1.py", "m2.py"]),
        (format!("changes since {since} | order by file desc"), ["m2.py", "m1.py", "m0.py"]),
    ] {
        let out = fresco_query::run(&ctx, &query).expect(&query);
        let mut files: Vec<String> = out.results.iter().filter_map(|r| r.file.clone()).collect();
        files.dedup();
        assert_eq!(files, expected, "{query}");
    }
    let kinds = fresco_query::run(&ctx, &format!("changes since {since} | where kind = function | order by kind"))
        .expect("order by kind");
    assert!(kinds.results.iter().all(|r| r.kind == "function"), "removed functions keep their kind");
}

/// An edge removed to an external name that no edge of the answer's version names any more is
/// still to an external: its row's kind says so, and `where kind = external` keeps it.
#[test]
fn an_edge_to_a_vanished_external_name_is_to_an_external() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.py"), "import zz_only_here\n\nzz_only_here.go()\n").expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let since = indexer.snapshot().version();
    std::fs::write(dir.path().join("a.py"), "").expect("write");
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let mut ctx = Context::new(&snapshot);
    ctx.history = Some(indexer.history());
    let removed = fresco_query::run(&ctx, &format!("changes since {since} | where kind = external")).expect("changes");
    let rows: Vec<(String, &str, Option<&str>)> =
        removed.results.iter().map(|r| (r.name.clone(), r.kind, r.change)).collect();
    assert!(
        rows.iter().any(|(n, k, c)| n == "zz_only_here.go" && *k == "external" && *c == Some("edge_removed")),
        "{rows:?}"
    );
}
