//! Shared helpers for the end-to-end tests: the real binary, real corpora, temporary repos.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The real binary. The dense lane is off and never downloads a model (embedding whole test
/// repositories would compete with the tests for the two cores); retrieval tests turn it on.
pub fn fresco() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fresco"));
    command.env("FRESCO_DENSE", "off").env("FRESCO_NO_MODEL_DOWNLOAD", "1");
    command
}

pub fn run(args: &[&str]) -> Output {
    fresco().args(args).output().expect("run fresco")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A pinned real project from the shared corpus (downloaded on first use by the corpus script).
pub fn corpus(name: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/fetch");
    let out = Command::new("bash").arg(&script).arg(name).output().unwrap_or_else(|e| {
        panic!("cannot run {}: {e}", script.display());
    });
    assert!(out.status.success(), "corpus fetch failed: {}", String::from_utf8_lossy(&out.stderr));
    let root = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_string();
    assert!(!root.is_empty(), "corpus fetch printed no path");
    PathBuf::from(root)
}

/// Copies a tree (Python files and directories only matter, but everything is copied).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Writes `files` (relative path, content) under a new temporary directory.
pub fn repo(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }
    dir
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(out), stderr(out)))
}

/// Copies a tree like [`copy_tree`], leaving out index directories (`.fresco`) a corpus may hold
/// from earlier runs.
pub fn copy_source_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        if entry.file_name() == ".fresco" {
            continue;
        }
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_source_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// A real `fresco serve` child process on `root`, with its own runtime directory (so its socket
/// and lock are isolated from other tests) and index directory. Killed on drop.
pub struct Daemon {
    pub child: Option<std::process::Child>,
    pub root: PathBuf,
    pub db: PathBuf,
    pub runtime: PathBuf,
    pub log: PathBuf,
}

/// How long a daemon may take to come up (indexing a small repo in a debug build).
pub const DAEMON_START_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

impl Daemon {
    /// Starts a daemon and waits until it answers `status`.
    pub fn start(root: &Path, db: &Path, runtime: &Path) -> Daemon {
        let d = Daemon::spawn(root, db, runtime);
        d.wait_ready();
        d
    }

    /// Starts a daemon without waiting for it.
    pub fn spawn(root: &Path, db: &Path, runtime: &Path) -> Daemon {
        Daemon::spawn_with(root, db, runtime, &[])
    }

    /// Starts a daemon with extra `serve` arguments (e.g. `--debounce-ms`) and waits for it.
    pub fn start_with(root: &Path, db: &Path, runtime: &Path, extra: &[&str]) -> Daemon {
        let d = Daemon::spawn_with(root, db, runtime, extra);
        d.wait_ready();
        d
    }

    pub fn spawn_with(root: &Path, db: &Path, runtime: &Path, extra: &[&str]) -> Daemon {
        Daemon::spawn_ignoring(root, db, runtime, extra, &[])
    }

    /// As [`Daemon::spawn_with`], with `ignored` signals set to be ignored in the child before
    /// it starts, as `nohup` (SIGHUP) or a shell's background job (SIGINT) leaves them.
    pub fn spawn_ignoring(root: &Path, db: &Path, runtime: &Path, extra: &[&str], ignored: &[i32]) -> Daemon {
        std::fs::create_dir_all(runtime).expect("runtime dir");
        let root = root.canonicalize().expect("canonical root");
        let log = runtime.with_extension(format!(
            "log-{}",
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
        ));
        let log_file = std::fs::File::create(&log).expect("log file");
        let mut command = fresco();
        if !ignored.is_empty() {
            use std::os::unix::process::CommandExt;
            let ignored = ignored.to_vec();
            // SAFETY: between fork and exec only `signal`, which is async-signal-safe, runs.
            unsafe {
                command.pre_exec(move || {
                    for &signal in &ignored {
                        libc::signal(signal, libc::SIG_IGN);
                    }
                    Ok(())
                });
            }
        }
        let child = command
            .arg("serve")
            .arg(&root)
            .arg("--db")
            .arg(db)
            .args(extra)
            .env("FRESCO_RUNTIME_DIR", runtime)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log_file)
            .spawn()
            .expect("spawn fresco serve");
        Daemon { child: Some(child), root, db: db.to_path_buf(), runtime: runtime.to_path_buf(), log }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("child").id()
    }

    /// The daemon's log (its stderr).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The socket of the daemon: the only `*.sock` in its runtime directory.
    pub fn socket(&self) -> Option<PathBuf> {
        socket_in(&self.runtime)
    }

    /// Polls until the daemon answers `status` over its socket (bounded; panics with its log).
    pub fn wait_ready(&self) {
        let deadline = std::time::Instant::now() + DAEMON_START_TIMEOUT;
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            if let Some(sock) = self.socket()
                && let Ok(mut c) = Conn::connect(&sock)
                && c.call("status", serde_json::json!({})).get("result").is_some()
            {
                return;
            }
            if std::time::Instant::now() > deadline {
                panic!("the daemon did not come up in {DAEMON_START_TIMEOUT:?}; log:\n{}", self.log());
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(std::time::Duration::from_millis(100));
        }
    }

    pub fn conn(&self) -> Conn {
        Conn::connect(&self.socket().expect("socket")).expect("connect to the daemon")
    }

    /// Runs the CLI against this daemon's runtime directory.
    pub fn cli(&self, args: &[&str]) -> Output {
        fresco().args(args).env("FRESCO_RUNTIME_DIR", &self.runtime).output().expect("run fresco")
    }

    /// `kill -9`.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits (bounded) for the process to exit by itself, e.g. after `fresco stop`.
    pub fn wait_exit(&mut self, timeout: std::time::Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + timeout;
        let child = self.child.as_mut()?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            if std::time::Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        self.kill9();
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The only `*.sock` file in `dir`, if any.
pub fn socket_in(dir: &Path) -> Option<PathBuf> {
    std::fs::read_dir(dir).ok()?.flatten().map(|e| e.path()).find(|p| p.extension().is_some_and(|x| x == "sock"))
}

/// A raw protocol connection: newline-delimited JSON.
pub struct Conn {
    pub stream: std::os::unix::net::UnixStream,
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
    next_id: u64,
}

impl Conn {
    pub fn connect(socket: &Path) -> std::io::Result<Conn> {
        let stream = std::os::unix::net::UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(std::time::Duration::from_secs(60)))?;
        let reader = std::io::BufReader::new(stream.try_clone()?);
        Ok(Conn { stream, reader, next_id: 1 })
    }

    /// Sends raw bytes.
    pub fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    /// Reads one response line; `None` when the daemon closed the connection.
    pub fn read(&mut self) -> Option<serde_json::Value> {
        use std::io::BufRead;
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => {
                Some(serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("response is not JSON ({e}): {line}")))
            }
        }
    }

    /// Sends a request without waiting; returns its id.
    pub fn send(&mut self, method: &str, params: serde_json::Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = format!("{}\n", serde_json::json!({"id": id, "method": method, "params": params}));
        self.send_raw(line.as_bytes()).expect("send request");
        id
    }

    /// Sends a request and returns the whole response object (`result` or `error`).
    pub fn call(&mut self, method: &str, params: serde_json::Value) -> serde_json::Value {
        let id = self.send(method, params);
        self.response_to(id)
    }

    /// Reads responses until the one to the request `id` (sent by [`Conn::send`]); returns it.
    pub fn response_to(&mut self, id: u64) -> serde_json::Value {
        loop {
            let response = self.read().expect("the daemon closed the connection");
            if response["id"] == serde_json::json!(id) {
                return response;
            }
        }
    }

    /// A query; returns the response object.
    pub fn query(&mut self, text: &str, freshness: &str) -> serde_json::Value {
        self.call("query", serde_json::json!({"query": text, "freshness": freshness}))
    }

    /// A `wait` query that must succeed, allowed up to `wait_ms` to catch up: for changes whose
    /// indexing time is not what the test checks (the default wait is a product setting, and a
    /// loaded machine may need longer to index a thousand files).
    pub fn ok_waiting(&mut self, text: &str, wait_ms: u64) -> serde_json::Value {
        let r = self.call("query", serde_json::json!({"query": text, "freshness": "wait", "wait_ms": wait_ms}));
        assert!(r.get("result").is_some(), "query {text:?} (wait up to {wait_ms} ms) failed: {r}");
        r["result"].clone()
    }

    /// A query that must succeed; returns its result.
    pub fn ok(&mut self, text: &str, freshness: &str) -> serde_json::Value {
        let r = self.query(text, freshness);
        assert!(r.get("result").is_some(), "query {text:?} ({freshness}) failed: {r}");
        r["result"].clone()
    }

    pub fn status(&mut self) -> serde_json::Value {
        let r = self.call("status", serde_json::json!({}));
        r["result"].clone()
    }
}

/// The names of a query result's items.
pub fn names(result: &serde_json::Value) -> Vec<String> {
    result["results"]
        .as_array()
        .map(|a| a.iter().filter_map(|r| r["name"].as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Writes a file atomically (a temporary file outside the watched tree, then a rename), so that
/// a reader never sees it half-written.
pub fn write_atomic(path: &Path, tmp_dir: &Path, content: &[u8]) {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = tmp_dir.join(format!("tmp-{}-{n}", std::process::id()));
    std::fs::write(&tmp, content).expect("write temporary file");
    std::fs::rename(&tmp, path).expect("rename into place");
}
