//! fresco's query language: a parser with positioned errors, and an executor that runs a query
//! over exactly one snapshot, bounded in results, time and cancellable.
//!
//! See docs/query-language.md for the grammar and examples.

pub mod ast;
pub mod exec;
pub mod glob;
pub mod parse;
pub mod retrieve;
mod width_table;

pub use exec::{Context, Item, Limits, Output, QueryError, execute, resolve_symbol, run};
pub use parse::{ParseError, parse};
pub use retrieve::{LaneDown, LaneHits, Lanes};
