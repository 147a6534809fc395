//! fresco's graph: the data model, immutable versioned snapshots, and their persistent store.
//!
//! This crate knows nothing of tree-sitter, salsa, sockets or JSON: it is the vocabulary the
//! indexer produces and the query engine consumes.

// These crates are read by the people who work on fresco, with their private items
// (`cargo doc --document-private-items`): a public item's docs may link to the private code that
// explains it.
#![allow(rustdoc::private_intra_doc_links)]

pub mod history;
pub mod model;
pub mod snapshot;
pub mod store;

pub use history::{
    Change, HISTORY_VERSIONS, HistoryExpired, NetChange, UnitChange, UnitPlace, VersionDiff, VersionLog,
};
pub use model::{
    ArgFlow, ArgSlot, Edge, EdgeKind, FileGraph, FileStamp, IndexDeps, ParamCall, ParseError, Revision, SkipReason,
    Unit, UnitKind, Unresolved, is_lambda_id,
};
pub use snapshot::{FileChange, FileEntry, Snapshot, Totals, UnitRef};
pub use store::{FORMAT_VERSION, Store, StoreError, manifest};
