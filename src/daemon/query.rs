//! The `query` and `export` requests: through the freshness gate to one published version,
//! then run on it.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Shared;
use super::slots::QuerySlot;
use crate::protocol::{self, Freshness, ProtoError};

/// Runs a query; the query slot it computes in is left in `slot` (`None` if it never got one),
/// for the caller to give back once the answer is a line of text: turning a large result into
/// JSON takes memory and time too, and is bounded by the slots as computing is.
pub(super) fn handle_query<'s>(
    shared: &'s Shared,
    params: &Value,
    cancel: Arc<AtomicBool>,
    connection: u64,
    slot: &mut Option<QuerySlot<'s>>,
) -> Result<Value, ProtoError> {
    let params = protocol::query_params(params)?;
    let started = Instant::now();
    let (published, stale, indexed_as_is) = shared.gate(params.freshness, params.wait, Some(&cancel))?;
    // Retrieval reads the lexical lane too: under `wait` and `strict` it catches up with the
    // version answering (milliseconds after it is published) within what is left of the wait.
    // The dense lane may take longer; a lane still behind is reported lagging in the answer.
    if params.freshness != Freshness::Allow && asks_retrieval(&params.text) {
        let left = params.wait.saturating_sub(started.elapsed()).max(Duration::from_millis(100));
        shared.lanes.wait_text(published.snapshot.version(), left, &cancel);
    }
    // A slot bounds the queries computing at once. Taken after the waits above (a query waiting
    // for the index holds no memory and must not keep others from running) and given back
    // once the answer is a line, before it is written (a client that does not read its answers
    // must not hold slots others need).
    *slot = shared.query_slots.acquire(connection, Some(&cancel));
    // Cancelled while it waited (its client hung up): nothing to compute.
    if slot.is_none() || cancel.load(Ordering::Relaxed) {
        return Err(super::gate::cancelled());
    }
    let tracker = shared.tracker.clone();
    let allow = params.freshness == Freshness::Allow;
    // Pending when the version was taken (it may have been applied since, in a later version
    // than the one answering), or changed since.
    let pending_at_gate = stale.clone();
    // Files pending at the gate whose content the snapshot holds (the gate read them): the
    // tracker counts them until their events are applied.
    let indexed_as_is: std::collections::HashSet<String> = indexed_as_is.into_iter().collect();
    let is_stale = move |file: &str| {
        pending_at_gate
            .iter()
            .any(|p| p == file || p == "(full rescan)" || (p.ends_with('/') && file.starts_with(p.as_str())))
            || (tracker.is_stale(file) && !indexed_as_is.contains(file))
    };
    let nothing_pending_at_gate = stale.is_empty();
    let watcher = shared.tracker.clone();
    let anything_stale = move || !nothing_pending_at_gate || !watcher.nothing_pending();
    let index =
        protocol::IndexView { snapshot: &published.snapshot, history: Some(&published.history), root: &shared.root };
    let answered = protocol::run_query(
        index,
        &params,
        Some(cancel),
        Some(&*shared.lanes as &dyn fresco_query::Lanes),
        if allow { Some(&is_stale as &dyn Fn(&str) -> bool) } else { None },
        if allow { Some(&anything_stale as &dyn Fn() -> bool) } else { None },
        &stale,
    );
    match answered {
        Ok((_, value)) => Ok(value),
        // An error is an answer too: under `allow`, one read from a snapshot behind the disk
        // (an unknown name just written, a line past the old end) says so, as rows do.
        // A name may be in any file not indexed yet; an invalid query may change only when it
        // names such a file (a line past its old end). A parse error, a path outside the root or
        // a cancellation does not depend on the snapshot.
        Err(e)
            if allow
                && !stale.is_empty()
                && (e.code == "UNKNOWN_SYMBOL"
                    || (e.code == "INVALID_QUERY" && stale.iter().any(|f| e.message.contains(f.as_str())))) =>
        {
            Err(behind_the_disk(e, published.snapshot.version(), &stale))
        }
        Err(e) => Err(e),
    }
}

/// `error`, found in version `version` while `stale` files had changed on disk since: the
/// message says the answer may differ once they are indexed, and the error lists them.
fn behind_the_disk(error: ProtoError, version: u64, stale: &[String]) -> ProtoError {
    let shown: Vec<&str> = stale.iter().take(5).map(String::as_str).collect();
    let more = stale.len() - shown.len();
    let message = format!(
        "{} (freshness allow: answered from version {version}, and {} changed file(s) are not indexed yet: {}{}; \
         with freshness wait the answer may differ)",
        error.message,
        stale.len(),
        shown.join(", "),
        if more > 0 { format!(" and {more} more") } else { String::new() }
    );
    ProtoError { message, ..error }.with("stale", json!(stale)).with("version", json!(version))
}

/// Whether a query has a `search` or `context` step (one that reads the retrieval lanes).
fn asks_retrieval(text: &str) -> bool {
    use fresco_query::ast::Stage;
    fresco_query::parse(text)
        .is_ok_and(|q| q.stages.iter().any(|s| matches!(s, Stage::Search { .. } | Stage::Context { .. })))
}

pub(super) fn handle_export(shared: &Shared, params: &Value) -> Result<Value, ProtoError> {
    let out = params
        .get("out")
        .and_then(Value::as_str)
        .ok_or_else(|| ProtoError::new("INVALID_REQUEST", "params.out (a directory) is required"))?;
    // Relative to what? The daemon's working directory is not the client's.
    if !Path::new(out).is_absolute() {
        return Err(ProtoError::new("INVALID_REQUEST", "params.out must be an absolute path"));
    }
    let freshness = protocol::freshness_param(params)?;
    let (published, _, _) = shared.gate(freshness, protocol::export_wait(params)?, None)?;
    let counts = crate::export::write(&published.snapshot, Path::new(out))
        .map_err(|e| ProtoError::new("EXPORT_FAILED", format!("{e:#}")))?;
    Ok(json!({"version": published.snapshot.version(), "nodes": counts.nodes, "edges": counts.edges, "out": out}))
}
