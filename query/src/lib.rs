//! fresco's query language: a parser with positioned errors, and an executor that runs a query
//! over exactly one snapshot, bounded in results, time and cancellable.
//!
//! See docs/query-language.md for the grammar and examples.

// These crates are read by the people who work on fresco, with their private items
// (`cargo doc --document-private-items`): a public item's docs may link to the private code that
// explains it.
#![allow(rustdoc::private_intra_doc_links)]

pub mod ast;
pub mod exec;
pub mod glob;
pub mod parse;
mod reexport;
pub mod retrieve;
mod width_table;

pub use exec::{Context, Item, Limits, Output, QueryError, check_context_targets, execute, resolve_symbol, run};
pub use parse::{ParseError, Place, parse};
pub use reexport::reexported;
pub use retrieve::{IndexedText, LaneDown, LaneHits, Lanes};
