//! One client connection: reading request lines, answering each (queries on worker threads so
//! that a `cancel` can arrive while one runs), writing answers within the daemon's memory bounds,
//! and refusing clients past the connection limit.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::query::{handle_export, handle_query};
use super::slots::QuerySlots;
use super::{MAX_CONNECTIONS, Shared};
use crate::protocol::{self, ProtoError};

const MAX_QUERIES_PER_CONNECTION: usize = 8;
/// Of a connection's queries, how many may be computing or holding an answer not yet written.
/// The others wait before they start, holding nothing: a client that pipelines large queries
/// and reads slowly (or never) keeps at most this many answers in the daemon's memory. Six
/// clients each sending 8 `find "*" limit 100000` (4 MB answers) and never reading: 250 MB
/// each with every answer held as a tree, 64 MB each with 8 held as text, 11 MB each with 2 (RSS
/// 217 → 602 MB and 210 → 322 MB for six such clients on CPython's library).
const ANSWERS_IN_HAND_PER_CONNECTION: usize = 2;
const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// How long writing an answer may go without progress on a client that does not read.
const WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// The socket's write timeout: how often a blocked write looks at the progress it made.
const WRITE_SLICE: Duration = Duration::from_secs(5);

/// What the daemon keeps of an open connection to close it when it is the longest idle.
pub(super) struct OpenConnection {
    /// A handle on the socket: shutting it down ends the connection's reading loop.
    stream: UnixStream,
    activity: Arc<ConnectionActivity>,
}

/// When a connection last sent a request, and how many of its queries are unanswered.
pub(super) struct ConnectionActivity {
    last_request: Mutex<Instant>,
    running: Arc<AtomicUsize>,
}

/// A connection idle for less than this is never closed for another.
const IDLE_BEFORE_CLOSED_FOR_ANOTHER: Duration = Duration::from_secs(1);

/// The answers computed and not yet written to their clients may hold this many bytes of text
/// at once: each connection holds at most two, but 16 clients that each pipelined two `show
/// "*"` on django (65 MB answers) and never read took the daemon to 4 GB. Past it an answer is
/// replaced by `BUSY`, until clients read what they were sent (or are dropped after
/// [`WRITE_TIMEOUT`]).
pub(super) const UNWRITTEN_ANSWER_BYTES: usize = 512 << 20;

impl Shared {
    /// Writes a query's answer line, within [`UNWRITTEN_ANSWER_BYTES`] over all connections.
    fn write_answer(&self, writer: &Mutex<UnixStream>, line: String, id: &Value) -> bool {
        let len = line.len();
        let before = self.unwritten_answer_bytes.fetch_add(len, Ordering::Relaxed);
        if before + len > UNWRITTEN_ANSWER_BYTES && before > 0 {
            self.unwritten_answer_bytes.fetch_sub(len, Ordering::Relaxed);
            drop(line);
            let err = ProtoError::new(
                "BUSY",
                format!(
                    "the answer ({} MB) does not fit in what the daemon holds for clients that have not read theirs \
                     ({} MB in all); try again",
                    len >> 20,
                    UNWRITTEN_ANSWER_BYTES >> 20
                ),
            );
            return send(writer, &protocol::response_err(id, &err));
        }
        let written = write_line(writer, &line);
        drop(line);
        self.unwritten_answer_bytes.fetch_sub(len, Ordering::Relaxed);
        written
    }

    /// Records an open connection; `None` when its socket cannot be cloned (it is then never
    /// closed for another).
    pub(super) fn register(&self, number: u64, stream: &UnixStream) -> Option<Arc<ConnectionActivity>> {
        let handle = stream.try_clone().ok()?;
        let activity = Arc::new(ConnectionActivity {
            last_request: Mutex::new(Instant::now()),
            running: Arc::new(AtomicUsize::new(0)),
        });
        let entry = OpenConnection { stream: handle, activity: activity.clone() };
        self.open.lock().unwrap_or_else(|p| p.into_inner()).insert(number, entry);
        Some(activity)
    }

    /// At the connection limit: closes the connection idle the longest (no query unanswered,
    /// no request for a second at least), so that connections a client leaked cannot lock every
    /// other client out until the idle timeout. Whether one was closed.
    pub(super) fn close_idlest(&self) -> bool {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let idlest = open
            .iter()
            .filter(|(_, c)| c.activity.running.load(Ordering::Relaxed) == 0)
            .map(|(number, c)| (*c.activity.last_request.lock().unwrap_or_else(|p| p.into_inner()), *number))
            .filter(|(last, _)| last.elapsed() >= IDLE_BEFORE_CLOSED_FOR_ANOTHER)
            .min_by_key(|(last, _)| *last)
            .map(|(_, number)| number);
        // Taken out here, under the lock: the next newcomer must find another to close, not the
        // same one before its thread has ended (300 newcomers at once were all let in).
        match idlest.and_then(|number| open.remove(&number)) {
            Some(connection) => connection.stream.shutdown(std::net::Shutdown::Both).is_ok(),
            None => false,
        }
    }
}

/// Reads one line of at most `MAX_REQUEST_BYTES`. `Ok(None)` at end of stream.
fn read_line(reader: &mut BufReader<UnixStream>, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    let n = reader.by_ref().take(protocol::MAX_REQUEST_BYTES as u64 + 1).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(None);
    }
    let complete = buf.last() == Some(&b'\n');
    Ok(Some(complete || buf.len() <= protocol::MAX_REQUEST_BYTES))
}

/// The error answer for a result of `bytes` bytes, over the protocol's limit.
fn too_large(id: &Value, bytes: usize) -> Value {
    let err = ProtoError::new(
        "RESULT_TOO_LARGE",
        format!("the result is {bytes} bytes, over the {} byte limit; lower `limit`", protocol::MAX_RESPONSE_BYTES),
    );
    protocol::response_err(id, &err)
}

/// Writes one answer.
fn send(writer: &Mutex<UnixStream>, value: &Value) -> bool {
    write_line(writer, &answer_line(value))
}

/// The line an answer is written as: its JSON, or `RESULT_TOO_LARGE` past the protocol's limit.
fn answer_line(value: &Value) -> String {
    let mut text = value.to_string();
    if text.len() > protocol::MAX_RESPONSE_BYTES {
        let id = value.get("id").cloned().unwrap_or(Value::Null);
        text = too_large(&id, text.len()).to_string();
    }
    text.push('\n');
    text
}

/// Writes one answer line. A write that fails (the client did not read for
/// [`WRITE_TIMEOUT`], or went away) may have sent part of the line: the connection is shut down
/// then, so the client sees its end rather than a cut line with the next answer glued to it.
fn write_line(writer: &Mutex<UnixStream>, text: &str) -> bool {
    let mut stream = writer.lock().unwrap_or_else(|p| p.into_inner());
    let written = write_with_progress(&mut stream, text.as_bytes());
    if !written {
        let _ = stream.shutdown(std::net::Shutdown::Both);
    }
    written
}

/// Writes all of `bytes`, failing once no byte has been taken for [`WRITE_TIMEOUT`]. The socket's
/// own timeout is a slice of that ([`WRITE_SLICE`]): a write that blocks for the whole timeout and
/// then reports the bytes it took at its start would restart the wait (the connection of a
/// client that never read was closed after 120 s, not 60).
fn write_with_progress(stream: &mut UnixStream, mut bytes: &[u8]) -> bool {
    let mut last_progress = Instant::now();
    while !bytes.is_empty() {
        match stream.write(bytes) {
            Ok(0) => return false,
            Ok(n) => {
                bytes = &bytes[n..];
                last_progress = Instant::now();
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                if last_progress.elapsed() >= WRITE_TIMEOUT {
                    return false;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    stream.flush().is_ok()
}

pub(super) fn handle_connection(
    stream: UnixStream,
    shared: &Arc<Shared>,
    activity: Option<&ConnectionActivity>,
    connection: u64,
) {
    let _ = stream.set_read_timeout(Some(IDLE_TIMEOUT));
    // A client that stops reading its answers is dropped instead of holding the threads that
    // write to it (and their answers) forever.
    let _ = stream.set_write_timeout(Some(WRITE_SLICE));
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let Ok(hangup_probe) = stream.try_clone() else {
        return;
    };
    let writer = Arc::new(Mutex::new(write_half));
    let mut reader = BufReader::new(stream);
    let cancels: Arc<Mutex<RunningQueries>> = Arc::default();
    // Each query's own number on this connection: clients may give several queries one `id`,
    // or none, and each must still be cancelled when its client hangs up.
    let mut next_query: u64 = 0;
    let running = activity.map_or_else(|| Arc::new(AtomicUsize::new(0)), |a| a.running.clone());
    let answers = Arc::new(QuerySlots::new(ANSWERS_IN_HAND_PER_CONNECTION));
    let mut buf = Vec::new();
    loop {
        let line = match read_line(&mut reader, &mut buf) {
            Ok(None) => {
                await_answers_or_hangup(&hangup_probe, &running, &cancels);
                return;
            }
            Err(e) if !matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                // Reset by the peer: nobody reads what is still computing.
                cancel_all(&cancels);
                return;
            }
            Err(_) => return,
            Ok(Some(false)) => {
                let err = ProtoError::new(
                    "REQUEST_TOO_LARGE",
                    format!(
                        "a request line may be at most {} bytes; closing the connection",
                        protocol::MAX_REQUEST_BYTES
                    ),
                );
                send(&writer, &protocol::response_err(&Value::Null, &err));
                return;
            }
            Ok(Some(true)) => &buf,
        };
        // JSON is UTF-8 (RFC 8259): a request that is not is refused, not silently altered (a
        // lossy decoding would turn its bytes into U+FFFD and answer a different question).
        let text = match std::str::from_utf8(line) {
            // JSON's own whitespace only: a line of U+2028 or no-break spaces is no blank line.
            Ok(text) => text.trim_matches([' ', '\t', '\n', '\r']),
            Err(e) => {
                let err = ProtoError::new("INVALID_JSON", format!("the request is not valid UTF-8: {e}"));
                if !send(&writer, &protocol::response_err(&Value::Null, &err)) {
                    return;
                }
                continue;
            }
        };
        if text.is_empty() {
            continue;
        }
        let request: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                let err = ProtoError::new("INVALID_JSON", invalid_json_message(text, &e));
                if !send(&writer, &protocol::response_err(&Value::Null, &err)) {
                    return;
                }
                continue;
            }
        };
        let id = request.get("id").cloned().unwrap_or(Value::Null);
        let Some(method) = request.get("method").and_then(Value::as_str) else {
            let err =
                ProtoError::new("INVALID_REQUEST", "a request is an object with \"id\", \"method\" and \"params\"");
            if !send(&writer, &protocol::response_err(&id, &err)) {
                return;
            }
            continue;
        };
        let params = request.get("params").cloned().unwrap_or(json!({}));
        if let Err(err) = protocol::check_params(method, &params) {
            if !send(&writer, &protocol::response_err(&id, &err)) {
                return;
            }
            continue;
        }
        // Only a request counts as activity: blank lines and garbage sent every half second kept
        // 64 connections from ever being idle, and locked every other client out.
        if let Some(activity) = activity {
            *activity.last_request.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        }
        match method {
            "query" => {
                if running.load(Ordering::Relaxed) >= MAX_QUERIES_PER_CONNECTION {
                    let err = ProtoError::new(
                        "BUSY",
                        format!("at most {MAX_QUERIES_PER_CONNECTION} queries at once per connection"),
                    );
                    send(&writer, &protocol::response_err(&id, &err));
                    continue;
                }
                let flag = Arc::new(AtomicBool::new(false));
                next_query += 1;
                let key = next_query;
                cancels.lock().unwrap_or_else(|p| p.into_inner()).insert(key, (id.to_string(), flag.clone()));
                running.fetch_add(1, Ordering::Relaxed);
                let (worker_shared, worker_writer, worker_cancels, worker_running, worker_answers) =
                    (shared.clone(), writer.clone(), cancels.clone(), running.clone(), answers.clone());
                shared.in_flight.fetch_add(1, Ordering::Relaxed);
                let spawned = shared.query_workers.run(move || {
                    let answer_in_hand = worker_answers.acquire(connection, None);
                    let mut slot = None;
                    let answered = handle_query(&worker_shared, &params, flag.clone(), connection, &mut slot);
                    worker_cancels.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    // A `cancel` answered `cancelled: true` before the entry went: the query
                    // answers CANCELLED, as that said, even if it had just finished.
                    let answered = if flag.load(Ordering::Relaxed) { Err(super::gate::cancelled()) } else { answered };
                    let response = match answered {
                        Ok(result) => protocol::response_ok(&id, result),
                        Err(err) => protocol::response_err(&id, &err),
                    };
                    // The line, not the tree, waits for a client that reads slowly (a `find "*"
                    // limit 100000` over 600 files: 4 MB of text, about 30 MB as a tree). It is
                    // made within the query's slot, so that no more answers are being turned
                    // into text at once than queries compute (62 clients that never read, each
                    // with two 65 MB answers, took the daemon to 4.4 GB).
                    let line = answer_line(&response);
                    drop(response);
                    drop(slot);
                    worker_shared.write_answer(&worker_writer, line, &id);
                    drop(answer_in_hand);
                    worker_shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                    // Counted until written, not until computed: a client that sends queries
                    // and never reads would otherwise have every answer held in memory
                    // (250 MB a client measured, with 8 `find "*" limit 100000` each).
                    worker_running.fetch_sub(1, Ordering::Relaxed);
                });
                if spawned.is_err() {
                    cancels.lock().unwrap_or_else(|p| p.into_inner()).remove(&key);
                    shared.in_flight.fetch_sub(1, Ordering::Relaxed);
                    running.fetch_sub(1, Ordering::Relaxed);
                    let err = ProtoError::new("BUSY", "cannot start a query thread");
                    send(&writer, &protocol::response_err(&Value::Null, &err));
                }
            }
            "cancel" => {
                // Every query of this connection with that id, running or waiting.
                let target = params.get("id").map(|v| v.to_string()).unwrap_or_default();
                let mut found = false;
                for (query_id, flag) in cancels.lock().unwrap_or_else(|p| p.into_inner()).values() {
                    if *query_id == target {
                        flag.store(true, Ordering::Relaxed);
                        found = true;
                    }
                }
                let result = json!({"cancelled": found});
                if !send(&writer, &protocol::response_ok(&id, result)) {
                    return;
                }
            }
            "status" => {
                let published = shared.current();
                let (pending, rescan) = shared.tracker.pending();
                let mut pending = shared.still_pending(pending, &published);
                if rescan {
                    pending.push("(full rescan)".into());
                }
                let result = protocol::status(protocol::StatusInfo {
                    root: &shared.root,
                    snapshot: &published.snapshot,
                    daemon: true,
                    pending,
                    uptime: Some(shared.started.elapsed()),
                    watcher: Some(shared.tracker.counters()),
                    last_error: shared.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                    not_stored: shared.unstored.clone(),
                    db: Some(&shared.db),
                    lanes: Some(protocol::lanes_json(&shared.lanes.health(published.snapshot.version()))),
                    walk_issues: &shared.walk_issues.lock().unwrap_or_else(|p| p.into_inner()).clone(),
                    history: Some(&published.history),
                    caught_up: shared.caught_up,
                });
                if !send(&writer, &protocol::response_ok(&id, result)) {
                    return;
                }
            }
            "export" => {
                // Counted as a query unanswered while it runs or waits for the index: the
                // connection is not idle, and not closed for another client.
                running.fetch_add(1, Ordering::Relaxed);
                let response = match handle_export(shared, &params) {
                    Ok(result) => protocol::response_ok(&id, result),
                    Err(err) => protocol::response_err(&id, &err),
                };
                running.fetch_sub(1, Ordering::Relaxed);
                if !send(&writer, &response) {
                    return;
                }
            }
            "shutdown" => {
                send(&writer, &protocol::response_ok(&id, json!({"stopping": true})));
                shared.shutdown.store(true, Ordering::Relaxed);
                return;
            }
            other => {
                let err = ProtoError::new(
                    "UNKNOWN_METHOD",
                    format!("unknown method '{other}' (status, query, export, cancel, shutdown)"),
                );
                if !send(&writer, &protocol::response_err(&id, &err)) {
                    return;
                }
            }
        }
    }
}

/// After the client's end of stream, while its queries run or wait: a client that only shut its
/// writing half (`nc -U`, `socat`) still reads their answers; one that closed the connection
/// cannot, and they are cancelled instead of computing answers nobody reads (6 clients that
/// each sent 8 `find "*" limit 100000` and closed kept the daemon busy for 17 s of CPU).
fn await_answers_or_hangup(stream: &UnixStream, running: &AtomicUsize, cancels: &Mutex<RunningQueries>) {
    use std::os::fd::AsRawFd;
    while running.load(Ordering::Relaxed) > 0 {
        let mut probe = libc::pollfd { fd: stream.as_raw_fd(), events: 0, revents: 0 };
        // SAFETY: one valid `pollfd` for the duration of the call; the descriptor is owned by
        // `stream`, which outlives it. A closed peer is `POLLHUP` (reported whatever `events`
        // asks); a half-closed one is not.
        let ready = unsafe { libc::poll(&mut probe, 1, 100) };
        if ready > 0 && probe.revents & (libc::POLLHUP | libc::POLLERR) != 0 {
            cancel_all(cancels);
            return;
        }
        if ready < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// A connection's queries not answered yet, by their number on the connection: the request's
/// `id` as JSON text, and the flag that cancels the query.
type RunningQueries = HashMap<u64, (String, Arc<AtomicBool>)>;

/// Cancels every query of a connection, running or waiting for a slot.
fn cancel_all(cancels: &Mutex<RunningQueries>) {
    for (_, flag) in cancels.lock().unwrap_or_else(|p| p.into_inner()).values() {
        flag.store(true, Ordering::Relaxed);
    }
}

/// How many refused connections are being answered at once (see [`refuse_busy`]).
const MAX_REFUSING: usize = 16;

/// Tells a client over the connection limit that the daemon is busy. The client has usually
/// sent its request already: closing the socket with that request unread would reset the
/// connection, and the client would see "connection reset" instead of the answer. So the
/// answer is written, the request read and dropped (for a second at most), then the socket
/// closed, on a thread of its own; past [`MAX_REFUSING`] of those the socket is just closed.
pub(super) fn refuse_busy(mut stream: UnixStream, refusing: &Arc<AtomicUsize>) {
    let err = ProtoError::new(
        "BUSY",
        format!("the daemon is busy: too many connections (limit {MAX_CONNECTIONS}); try again"),
    );
    let _ = writeln!(stream, "{}", protocol::response_err(&Value::Null, &err));
    if refusing.fetch_add(1, Ordering::Relaxed) >= MAX_REFUSING {
        refusing.fetch_sub(1, Ordering::Relaxed);
        return;
    }
    let counter = refusing.clone();
    let spawned = std::thread::Builder::new().name("fresco-busy".into()).spawn(move || {
        let _ = stream.shutdown(std::net::Shutdown::Write);
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let _ = std::io::copy(&mut (&mut stream).take(1 << 16), &mut std::io::sink());
        counter.fetch_sub(1, Ordering::Relaxed);
    });
    if spawned.is_err() {
        refusing.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What is wrong with a request that is not JSON. serde's words for a lone UTF-16 surrogate
/// escape (`"\\ud800"` alone: half of a character outside the BMP) are "unexpected end of hex
/// escape" or "lone leading surrogate", which send a client looking for a typo in its hex digits.
fn invalid_json_message(text: &str, err: &serde_json::Error) -> String {
    let message = format!("the request is not valid JSON: {err}");
    let surrogate_escape = text.as_bytes().windows(4).any(|w| {
        w[0] == b'\\'
            && w[1] == b'u'
            && matches!(w[2], b'd' | b'D')
            && matches!(w[3], b'8'..=b'9' | b'a'..=b'f' | b'A'..=b'F')
    });
    let said = err.to_string();
    if (surrogate_escape && said.contains("escape")) || said.contains("surrogate") {
        format!(
            "{message} (a \\uD800-\\uDFFF escape is half of a UTF-16 surrogate pair: it must be a high one \\uD800-\\uDBFF \
             followed at once by a low one \\uDC00-\\uDFFF; alone it is no character)"
        )
    } else {
        message
    }
}

#[cfg(test)]
mod invalid_json_tests {
    use super::*;

    #[test]
    fn a_lone_surrogate_escape_is_named_as_such() {
        for text in [r#"{"id": 1, "method": "query", "params": {"query": "find \"\ud800\""}}"#, r#"{"x": "\uDC00 a"}"#]
        {
            let err = serde_json::from_str::<Value>(text).expect_err("a lone surrogate is not JSON text");
            let message = invalid_json_message(text, &err);
            assert!(message.contains("half of a UTF-16 surrogate pair"), "{message}");
        }
        // A pair is a character; other faults keep serde's words alone.
        assert!(serde_json::from_str::<Value>(r#"{"x": "\ud83d\ude00"}"#).is_ok());
        let text = r#"{"x": "\u12"}"#;
        let err = serde_json::from_str::<Value>(text).expect_err("a short escape");
        assert!(!invalid_json_message(text, &err).contains("surrogate"));
        let text = r#"{"x": 1,}"#;
        let err = serde_json::from_str::<Value>(text).expect_err("a trailing comma");
        assert_eq!(invalid_json_message(text, &err), format!("the request is not valid JSON: {err}"));
    }
}
