//! fresco's indexer: turns Python files into graph versions.

pub mod lower;
pub mod syntax;
