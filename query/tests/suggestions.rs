//! What an unknown name's error suggests.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::{Context, QueryError};

#[test]
fn a_file_path_without_a_line_suggests_its_module() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("src/pkg")).expect("mkdir");
    std::fs::write(dir.path().join("src/pkg/__init__.py"), "").expect("write");
    std::fs::write(dir.path().join("src/pkg/api.py"), "def get():\n    return 1\n").expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    for query in ["callers src/pkg/api.py", "callers pkg/api.py", "callers ./src/pkg/api.py"] {
        match fresco_query::run(&Context::new(&snapshot), query) {
            Err(QueryError::UnknownSymbol { suggestions, .. }) => {
                assert_eq!(suggestions, vec!["pkg.api".to_string()], "{query}")
            }
            other => panic!("{query}: {:?}", other.map(|o| o.results.len())),
        }
    }
}

#[test]
fn a_name_an_external_target_ends_suggests_that_target_first() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("app.py"),
        "import os\n\ndef sorter(xs):\n    return sorted(xs)\n\ndef where(a):\n    return os.path.join(a, 'b')\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    for (query, first) in [("callers sorted", "builtins.sorted"), ("callers path.join", "os.path.join")] {
        match fresco_query::run(&Context::new(&snapshot), query) {
            Err(QueryError::UnknownSymbol { suggestions, .. }) => {
                assert_eq!(suggestions.first().map(String::as_str), Some(first), "{query}: {suggestions:?}")
            }
            other => panic!("{query}: {:?}", other.map(|o| o.results.len())),
        }
    }
    // The suggestion answers: the external's callers are the unit that calls it.
    let answer = fresco_query::run(&Context::new(&snapshot), "callers builtins.sorted").expect("callers");
    assert_eq!(answer.results.len(), 1);
    // A name no external ends and no unit is near suggests nothing.
    match fresco_query::run(&Context::new(&snapshot), "callers zzzzzzzz") {
        Err(QueryError::UnknownSymbol { suggestions, .. }) => assert!(suggestions.is_empty(), "{suggestions:?}"),
        other => panic!("{:?}", other.map(|o| o.results.len())),
    }
}
