//! fresco's indexer: turns Python files into graph versions.
//!
//! - [`lower`]: the tree-sitter frontend (file text to [`syntax::FileSyntax`]).
//! - [`summary`]: the per-file interface other files see (the ItemTree analogue).
//! - [`modules`]: which dotted name each file is imported as.
//! - [`resolve`]: name resolution, producing a file's units, edges and unresolved sites.
//! - [`db`]: the salsa database tying these together incrementally.
//! - [`walk`]: finding and reading files.
//! - [`indexer`]: the single writer that applies file changes and publishes versions.

pub mod db;
pub mod indexer;
pub mod lower;
pub mod modules;
pub mod resolve;
pub mod summary;
pub mod syntax;
pub mod walk;

pub use indexer::{BatchReport, FileEvent, IndexError, Indexer, IndexerOptions};
pub use walk::{WalkIssue, WalkOptions};
