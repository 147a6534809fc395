//! The client side of the socket protocol, used by the CLI when a daemon serves the root.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::paths::{self, daemon_paths};

/// Whether this process already said that it reached the daemon outside its runtime directory.
static NOTED_ELSEWHERE: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub struct Client {
    stream: UnixStream,
    reader: BufReader<UnixStream>,
    next_id: u64,
    /// The socket it is connected to (the daemon's, wherever the runtime directory put it).
    socket: std::path::PathBuf,
}

impl Client {
    /// Connects to the daemon serving `root`, if one does.
    ///
    /// The socket is looked for in this process's runtime directory, then where the daemon
    /// recorded it beside the root's default index (see [`paths::DAEMON_SOCKET_FILE`]), so that
    /// a client started with another `XDG_RUNTIME_DIR` does not take the daemon's index for a
    /// busy one and wait.
    pub fn connect(root: &Path) -> Option<Client> {
        let own = daemon_paths(root).ok().map(|p| p.socket);
        if let Some(client) = own.as_deref().and_then(Client::connect_to) {
            return Some(client);
        }
        let recorded = paths::recorded_socket(root, &root.join(".fresco"))?;
        let client = Client::connect_to(&recorded)?;
        if own.as_ref() != Some(&recorded) && !NOTED_ELSEWHERE.swap(true, std::sync::atomic::Ordering::Relaxed) {
            eprintln!(
                "fresco: note: the daemon's socket is {} (this process's runtime directory is another: \
                 FRESCO_RUNTIME_DIR or XDG_RUNTIME_DIR differ)",
                recorded.display()
            );
        }
        Some(client)
    }

    /// Connects to the daemon listening on `socket`, if one does.
    pub fn connect_to(socket: &Path) -> Option<Client> {
        let stream = UnixStream::connect(socket).ok()?;
        let reader = BufReader::new(stream.try_clone().ok()?);
        Some(Client { stream, reader, next_id: 1, socket: socket.to_path_buf() })
    }

    /// The socket it is connected to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Sends one request and waits for its response: `Ok(Ok(result))` or `Ok(Err(error))`.
    pub fn call(&mut self, method: &str, params: Value, timeout: Duration) -> Result<Result<Value, Value>> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"id": id, "method": method, "params": params});
        self.stream.set_read_timeout(Some(timeout))?;
        writeln!(self.stream, "{request}").context("cannot send to the daemon")?;
        loop {
            let mut line = String::new();
            let n = self.reader.read_line(&mut line).context("no answer from the daemon")?;
            if n == 0 {
                bail!("the daemon closed the connection");
            }
            let response: Value = serde_json::from_str(line.trim()).context("the daemon sent invalid JSON")?;
            // An error without an id is about the connection itself (`BUSY`): it answers this
            // request too.
            let about_connection = response.get("id").is_none_or(Value::is_null) && response.get("error").is_some();
            if response.get("id") != Some(&json!(id)) && !about_connection {
                continue;
            }
            if let Some(err) = response.get("error") {
                return Ok(Err(err.clone()));
            }
            return Ok(Ok(response.get("result").cloned().unwrap_or(Value::Null)));
        }
    }
}
