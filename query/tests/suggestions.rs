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
