//! Every stage stops at the time limit and says so: `cycles` and `unresolved` ran to the end
//! whatever `timeout_ms` said (black-box review: 193 ms and 539 ms on django with 1 ms).

use std::time::Duration;

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::{Context, Limits};

#[test]
fn cycles_and_unresolved_stop_at_the_time_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    // 400 functions calling each other in a ring, each also calling something unknown.
    let mut text = String::new();
    for i in 0..400 {
        text.push_str(&format!("def f{i}():\n    unknown_{i}()\n    return f{}()\n\n\n", (i + 1) % 400));
    }
    std::fs::write(dir.path().join("ring.py"), text).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    for query in ["cycles calls", "unresolved"] {
        let full = fresco_query::run(&Context::new(&snapshot), query).expect(query);
        assert!(!full.truncated, "{query}: {:?}", full.notes);
        assert_eq!(full.results.len(), 400, "{query}");
        let mut ctx = Context::new(&snapshot);
        ctx.limits = Limits { max_results: 2000, timeout: Duration::ZERO };
        let cut = fresco_query::run(&ctx, query).expect(query);
        assert!(cut.truncated, "{query}: {:?}", cut.notes);
        assert!(cut.notes.iter().any(|n| n.starts_with("time limit")), "{query}: {:?}", cut.notes);
        assert!(cut.results.len() < 400, "{query}: {}", cut.results.len());
    }
}

/// A `context` whose time limit has passed when the graph lane would run answers without it:
/// marked truncated, the graph lane `skipped` with the reason (it ran to its end whatever
/// `timeout_ms` said).
#[test]
fn context_skips_the_graph_lane_past_the_time_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("shop.py"),
        "RATE = 2\n\n\ndef subtotal(items):\n    return sum(items)\n\n\n\
         def total(items):\n    \"\"\"The subtotal at the rate.\"\"\"\n    pass\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let query = "context shop.total budget 500";
    let full = fresco_query::run(&Context::new(&snapshot), query).expect(query);
    assert!(!full.truncated, "{:?}", full.notes);
    let graph = |answer: &fresco_query::Output| answer.lanes.as_ref().and_then(|l| l.get("graph")).cloned();
    let full_graph = graph(&full).expect("the graph lane's health");
    assert_eq!((full_graph.status, full_graph.hits > 0), ("ready", true), "{full_graph:?}");

    let mut ctx = Context::new(&snapshot);
    ctx.limits = Limits { max_results: 2000, timeout: Duration::ZERO };
    let cut = fresco_query::run(&ctx, query).expect(query);
    assert!(cut.truncated, "{:?}", cut.notes);
    assert!(cut.notes.iter().any(|n| n.starts_with("time limit")), "{:?}", cut.notes);
    let skipped = graph(&cut).expect("the graph lane is reported, not absent");
    assert_eq!(skipped.status, "skipped");
    assert!(skipped.reason.as_deref().is_some_and(|r| r.contains("time limit")), "{skipped:?}");
    assert!(cut.results.iter().all(|r| r.role != Some("dependency")), "nothing is labelled by the graph lane");
}

/// A later step sees every row of the step before it, not the first result-limit of them: a
/// `where` finds what lies past the limit, an `order by` sorts the whole set, and a `limit` that
/// gives what was asked is no truncation. Only the answer is cut at the result limit.
#[test]
fn the_result_limit_bounds_the_answer_not_what_one_step_passes_to_the_next() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut text: String = (0..30).map(|i| format!("def f{i:02}():\n    return {i}\n\n\n")).collect();
    text.push_str("def zz_last():\n    return 0\n");
    std::fs::write(dir.path().join("many.py"), text).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let mut ctx = Context::new(&snapshot);
    ctx.limits = Limits { max_results: 10, timeout: Duration::from_secs(60) };
    let run = |query: &str| fresco_query::run(&ctx, query).expect(query);
    let names = |out: &fresco_query::Output| out.results.iter().map(|r| r.name.clone()).collect::<Vec<_>>();

    let found = run("find * kind function | where name = \"zz_*\"");
    assert_eq!(names(&found), ["many.zz_last"], "{:?}", found.notes);
    assert!(!found.truncated, "{:?}", found.notes);
    let last = run("find * kind function | order by name desc | limit 3");
    assert_eq!(names(&last), ["many.zz_last", "many.f29", "many.f28"]);
    assert!(!last.truncated, "{:?}", last.notes);
    let five = run("find * | limit 5");
    assert_eq!((five.results.len(), five.truncated), (5, false), "{:?}", five.notes);
    // The answer itself: at most the limit, marked, whichever step is last.
    for query in ["find * kind function", "find * kind function | where name = \"f*\"", "find * | order by name"] {
        let cut = run(query);
        assert_eq!(cut.results.len(), 10, "{query}");
        assert!(
            cut.truncated && cut.notes.iter().any(|n| n.starts_with("result limit of 10")),
            "{query}: {:?}",
            cut.notes
        );
    }
    let all = run("find * kind function | where name = \"f*\" | count");
    assert_eq!(all.count, Some(30));
    // A later `find` filters every row it is given, and `show` gives every unit its name
    // matches: both are cut at the limit like the answer of any other step.
    for query in ["find * | find *", "find * | find \"f*\"", "show \"*\""] {
        let cut = run(query);
        assert_eq!(cut.results.len(), 10, "{query}");
        assert!(cut.truncated, "{query}: {:?}", cut.notes);
    }
    // Steps that bound their own rows are not cut again: `context` lists its `k`, then the
    // units its text holds.
    let context = run("context many.f05 budget 4000 k 3");
    assert!(!context.truncated && context.results.len() > 10, "{} rows: {:?}", context.results.len(), context.notes);
}

/// Past the time limit, a `where` and an `order by` still go through every row the steps before
/// them found: a filter of what was found, in the order asked, marked truncated. The parser
/// bounds how many steps a query has; a `where` tests at most a million conditions past the
/// limit (see `where_with_many_conditions_stops_at_the_time_limit`).
#[test]
fn after_the_time_limit_later_steps_work_on_every_row_found() {
    let snapshot = six_hundred_functions_and_variables();
    let mut ctx = Context::new(&snapshot);
    ctx.limits = Limits { max_results: 2000, timeout: Duration::ZERO };
    let found = fresco_query::run(&ctx, "find * | count").expect("count");
    assert!(found.truncated, "{:?}", found.notes);
    let all = found.count.expect("a count");
    let functions = fresco_query::run(&ctx, "find * | where kind = function | count").expect("where");
    let variables = fresco_query::run(&ctx, "find * | where kind = variable | count").expect("where");
    // The module itself is the one row of neither kind.
    assert_eq!(functions.count.unwrap_or(0) + variables.count.unwrap_or(0) + 1, all, "every row found is filtered");
    let sorted = fresco_query::run(&ctx, "find * | order by name desc").expect("order by");
    assert!(sorted.truncated && !sorted.results.is_empty(), "{:?}", sorted.notes);
    let names: Vec<&str> = sorted.results.iter().map(|r| r.name.as_str()).collect();
    assert!(names.windows(2).all(|w| w[0] >= w[1]), "in the order asked");

    let steps = |n: usize| format!("find *{}", " | where kind = function".repeat(n - 1));
    assert!(fresco_query::run(&Context::new(&snapshot), &steps(32)).is_ok());
    let err = fresco_query::run(&Context::new(&snapshot), &steps(33)).expect_err("33 steps");
    assert!(err.to_string().contains("at most 32 steps"), "{err}");
}

/// A `where` of thousands of conditions stops at the time limit: one of 20,000 conditions over
/// django's units took 17 s with `timeout_ms` 1000 (a review), holding a query slot.
#[test]
fn where_with_many_conditions_stops_at_the_time_limit() {
    let snapshot = six_hundred_functions_and_variables();
    // 1,201 rows times 2,000 conditions: past the million tested whatever the time.
    let query = format!("find * | where {}", vec!["kind = function"; 2_000].join(" and "));
    let full = fresco_query::run(&Context::new(&snapshot), &query).expect("where");
    assert!(!full.truncated, "{:?}", full.notes);
    assert_eq!(full.results.len(), 600);
    let mut ctx = Context::new(&snapshot);
    ctx.limits = Limits { max_results: 2000, timeout: Duration::ZERO };
    let cut = fresco_query::run(&ctx, &query).expect("where");
    assert!(cut.truncated, "{:?}", cut.notes);
    assert!(cut.notes.iter().any(|n| n.starts_with("time limit")), "{:?}", cut.notes);
    assert!(cut.results.len() < 600, "{}", cut.results.len());
}

/// The snapshot of one file of 600 functions and 600 variables (1,201 units with the module).
fn six_hundred_functions_and_variables() -> fresco_graph::Snapshot {
    let dir = tempfile::tempdir().expect("tempdir");
    let text: String = (0..600).map(|i| format!("def f{i}():\n    return {i}\n\n\nV{i} = {i}\n")).collect();
    std::fs::write(dir.path().join("many.py"), text).expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}
