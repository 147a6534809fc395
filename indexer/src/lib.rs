//! fresco's indexer: turns Python files into graph versions.
//!
//! - [`lower`]: the tree-sitter frontend (file text to [`syntax::FileSyntax`]).
//! - [`annotation`]: type annotations as the instances they promise.
//! - [`summary`]: the per-file interface other files see (the ItemTree analogue).
//! - [`modules`]: which dotted name each file is imported as.
//! - [`resolve`]: name resolution, producing a file's units, edges and unresolved sites.
//! - `builtin_members`: the attributes of builtin value types (generated).
//! - `repair`: closing the unclosed brackets that hide the rest of a half-typed file.
//! - [`db`]: the salsa database tying these together incrementally.
//! - [`walk`]: finding and reading files.
//! - [`indexer`]: the single writer that applies file changes and publishes versions.

// These crates are read by the people who work on fresco, with their private items
// (`cargo doc --document-private-items`): a public item's docs may link to the private code that
// explains it.
#![allow(rustdoc::private_intra_doc_links)]

pub mod annotation;
mod builtin_members;
pub mod db;
mod edge_ids;
pub mod embed;
pub mod flows;
mod grammar;
pub mod indexer;
pub mod lanes;
pub mod lower;
pub mod minilm;
pub mod model_fetch;
pub mod modules;
pub mod process;
mod repair;
pub mod resolve;
pub mod source_encoding;
pub mod summary;
pub mod syntax;
pub mod text_index;
mod tree_memory;
pub mod walk;
pub mod watch;

/// Whether `FRESCO_TRACE` is set: phase timings and slow files on stderr (for profiling, not
/// for output).
pub(crate) fn trace_enabled() -> bool {
    static ENABLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ENABLED.get_or_init(|| std::env::var_os("FRESCO_TRACE").is_some())
}

pub use indexer::{BatchReport, CatchUp, FileEvent, IndexError, Indexer, IndexerOptions};
pub use walk::{WalkIssue, WalkOptions};

/// A fingerprint of the code that derives graphs from files. A stored index derived by different
/// code is rebuilt rather than served, so a new fresco never answers from an old analysis.
pub const ANALYSIS_FINGERPRINT: u64 = xxhash_rust::const_xxh3::xxh3_64(
    concat!(
        include_str!("annotation.rs"),
        include_str!("builtin_members.rs"),
        include_str!("db.rs"),
        include_str!("edge_ids.rs"),
        include_str!("flows.rs"),
        include_str!("grammar.rs"),
        include_str!("lower/mod.rs"),
        include_str!("lower/assignments.rs"),
        include_str!("lower/definitions.rs"),
        include_str!("lower/expressions.rs"),
        include_str!("lower/imports.rs"),
        include_str!("lower/literal.rs"),
        include_str!("lower/identifiers.rs"),
        include_str!("lower/narrowing.rs"),
        include_str!("lower/recovery.rs"),
        include_str!("lower/statements.rs"),
        include_str!("repair.rs"),
        include_str!("syntax.rs"),
        include_str!("summary.rs"),
        include_str!("modules.rs"),
        include_str!("resolve/mod.rs"),
        include_str!("resolve/builtins.rs"),
        include_str!("resolve/calls.rs"),
        include_str!("resolve/classes.rs"),
        include_str!("resolve/graph.rs"),
        include_str!("resolve/local.rs"),
        include_str!("resolve/protocols.rs"),
        include_str!("resolve/values.rs"),
        include_str!("source_encoding.rs"),
        include_str!("walk.rs"),
    )
    .as_bytes(),
);

/// [`ANALYSIS_FINGERPRINT`] with the settings that change what the analysis derives: a step
/// budget other than the default (`FRESCO_RESOLUTION_STEPS`) resolves cut files differently, so
/// an index built under another budget is rebuilt, not served.
pub fn analysis_fingerprint() -> u64 {
    let budget = resolve::step_budget();
    if budget == resolve::DEFAULT_STEP_BUDGET {
        ANALYSIS_FINGERPRINT
    } else {
        ANALYSIS_FINGERPRINT ^ xxhash_rust::xxh3::xxh3_64(&budget.to_le_bytes())
    }
}

#[cfg(test)]
mod fingerprint_tests {
    /// Files of this crate that do not derive a stored graph from a file's text, and why.
    const NOT_ANALYSIS: [(&str, &str); 15] = [
        ("lib.rs", "declarations and this fingerprint"),
        ("embed/mod.rs", "vectors of units, stored apart and keyed by the unit's text"),
        ("embed/embedder.rs", "the embedding model's forward pass"),
        ("embed/model_files.rs", "locating the embedding model"),
        ("embed/unit_text.rs", "the text embedded for a unit (vectors are keyed by it)"),
        ("embed/vectors.rs", "the vector store and index"),
        ("embed/worker.rs", "embedding in the background"),
        ("minilm.rs", "the embedding model"),
        ("model_fetch.rs", "downloading the model"),
        ("lanes.rs", "the retrieval lanes, derived from snapshots in memory"),
        ("text_index.rs", "the lexical index, derived from snapshots in memory"),
        ("indexer.rs", "scheduling: which files to derive again, and publishing versions"),
        ("process.rs", "running the analysis on threads"),
        ("tree_memory.rs", "the parser's memory accounting"),
        ("watch.rs", "the file watcher"),
    ];

    /// A file added to the crate is either analysis (and in the fingerprint, so that stored
    /// indexes derived by the old code are rebuilt) or listed above with the reason it is not.
    #[test]
    fn every_source_file_is_fingerprinted_or_said_not_to_derive_graphs() {
        let lib = include_str!("lib.rs");
        let fingerprint = &lib[lib.find("pub const ANALYSIS_FINGERPRINT").expect("the fingerprint")..];
        let fingerprint = &fingerprint[..fingerprint.find(");").expect("its end")];
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut unaccounted = Vec::new();
        // The files under src/, by their path there (`resolve/mod.rs`), subdirectories included.
        let mut dirs = vec![src.clone()];
        let mut names = Vec::new();
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).expect("a source directory") {
                let path = entry.expect("an entry").path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let name = path.strip_prefix(&src).expect("under src/").to_string_lossy().replace('\\', "/");
                    names.push(name);
                }
            }
        }
        assert!(names.iter().any(|n| n == "resolve/mod.rs"), "subdirectories are read: {names:?}");
        for name in names {
            let fingerprinted = fingerprint.contains(&format!("include_str!(\"{name}\")"));
            let excused = NOT_ANALYSIS.iter().any(|(n, _)| *n == name);
            if fingerprinted == excused {
                unaccounted.push(name);
            }
        }
        assert!(unaccounted.is_empty(), "in the fingerprint and excused, or neither: {unaccounted:?}");
    }
}
