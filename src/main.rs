//! The `fresco` command line: index, export, query, status, serve, stop.
//!
//! `query`, `status` and `export` talk to the daemon serving the root when there is one, and
//! otherwise open the on-disk index in-process and answer the same way, in the same JSON.

mod client;
mod daemon;
mod export;
mod output;
mod paths;
mod protocol;
mod render;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use fresco_indexer::{IndexError, Indexer, IndexerOptions};
use output::{out, outln};
use serde_json::{Value, json};

/// Exit codes (documented in the README).
const EXIT_QUERY_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_STALE: u8 = 3;
const EXIT_NO_DAEMON: u8 = 4;
/// How many stale files a refusal names on stderr; the rest are counted (`--json` lists them all).
const STALE_FILES_SHOWN: usize = 50;

#[derive(Parser)]
#[command(name = "fresco", version, about = "A fresh, versioned code property graph of a Python repository")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone, Default)]
struct IndexArgs {
    /// The repository root (default: the nearest enclosing directory fresco indexes, else the current directory).
    path: Option<PathBuf>,
    /// Where the index lives (default: PATH/.fresco).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Threads for parsing and resolution (default: all cores, at most 8; at most 256).
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
    /// Do not apply .gitignore rules. The index keeps this for later commands.
    #[arg(long, conflicts_with = "gitignore")]
    no_gitignore: bool,
    /// Apply .gitignore rules again after `--no-gitignore` (the default).
    #[arg(long)]
    gitignore: bool,
    /// Skip files larger than this many bytes (default 2 MiB). The index keeps it for later
    /// commands that do not give one.
    #[arg(long)]
    max_file_size: Option<u64>,
}

#[derive(clap::Args, Clone, Default)]
struct ClientArgs {
    /// Only talk to a running daemon; exit 4 if none serves the root.
    #[arg(long, conflicts_with = "no_daemon")]
    daemon: bool,
    /// Never talk to a daemon; open the index in-process.
    #[arg(long)]
    no_daemon: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Build or update the graph of a repository and print a summary.
    Index {
        #[command(flatten)]
        args: IndexArgs,
        /// Print the summary as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Ask the graph a question (see docs/query-language.md).
    #[command(
        override_usage = "fresco query [OPTIONS] [PATH] <QUERY>",
        after_help = "Arguments:\n  [PATH]   the repository root (default: the nearest enclosing directory fresco indexes, \
                      else the current directory)\n  <QUERY>  the query, one argument: quote it (fresco query . 'callers x')"
    )]
    Query {
        /// `[PATH] QUERY`, listed in the help's own Arguments section: any number of words reach
        /// the check below, which says how to quote the query (clap's own refusal of a third
        /// word did not, and its listing of two optional words read as several query words).
        #[arg(num_args = 1.., required = true, hide = true, value_name = "QUERY")]
        words: Vec<String>,
        /// Where the index lives (default: PATH/.fresco).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print JSON (same as --format json).
        #[arg(long)]
        json: bool,
        /// Output format (table by default).
        #[arg(long, value_enum)]
        format: Option<Format>,
        /// How fresh the answer must be: wait for the index to catch up with the disk, fail
        /// if it has not (strict), or answer at once marking stale items (allow).
        #[arg(long, value_enum, default_value_t = FreshnessArg::Wait)]
        freshness: FreshnessArg,
        /// The most results the answer may hold (a step feeding another may go through up to 250,000).
        #[arg(long, default_value_t = protocol::DEFAULT_LIMIT as u64,
              value_parser = clap::value_parser!(u64).range(1..=protocol::MAX_LIMIT as u64))]
        limit: u64,
        /// Give up (and report `truncated`) after this many milliseconds.
        #[arg(long, default_value_t = protocol::DEFAULT_TIMEOUT_MS,
              value_parser = clap::value_parser!(u64).range(1..=protocol::MAX_TIMEOUT_MS))]
        timeout_ms: u64,
        /// With `--freshness wait`: how long to wait for the index to catch up with the disk
        /// before answering STALE (a large change, a branch switch, can take longer than the
        /// default).
        #[arg(long, default_value_t = protocol::DEFAULT_WAIT_MS,
              value_parser = clap::value_parser!(u64).range(1..=protocol::MAX_TIMEOUT_MS))]
        wait_ms: u64,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Show the state of the index (and of the daemon, if one serves the root).
    Status {
        /// The repository root (default: the nearest enclosing directory fresco indexes, else the current directory).
        path: Option<PathBuf>,
        /// Where the index lives (default: PATH/.fresco).
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Write the graph as nodes.jsonl and edges.jsonl.
    Export {
        #[command(flatten)]
        args: IndexArgs,
        /// The directory to write into.
        #[arg(long)]
        out: PathBuf,
        /// Export the last committed version exactly as stored, without bringing it up to date
        /// with the disk (in-process only).
        #[arg(long)]
        stored: bool,
        #[command(flatten)]
        client: ClientArgs,
    },
    /// Index, then keep the graph fresh by watching the tree, and answer over a Unix socket.
    Serve {
        #[command(flatten)]
        args: IndexArgs,
        /// Milliseconds of quiet before a burst of changes is applied.
        #[arg(long, default_value_t = 15)]
        debounce_ms: u64,
        /// Append a JSON line per retrieval query (search, context) to this file: each lane's
        /// results and ranks, what entered the context, tokens (also FRESCO_RETRIEVAL_TRACE).
        #[arg(long)]
        retrieval_trace: Option<PathBuf>,
    },
    /// Stop the daemon serving the root.
    Stop {
        /// The repository root (default: the nearest enclosing directory fresco indexes, else the current directory).
        path: Option<PathBuf>,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Json,
    Dot,
    Mermaid,
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum FreshnessArg {
    Wait,
    Strict,
    Allow,
}

impl FreshnessArg {
    fn as_str(self) -> &'static str {
        match self {
            FreshnessArg::Wait => "wait",
            FreshnessArg::Strict => "strict",
            FreshnessArg::Allow => "allow",
        }
    }
}

/// An error and its causes, each cause once: a message that already quotes its cause (as most
/// of the libraries' messages do, `index I/O error: {0}`) is not followed by it again.
pub(crate) fn error_text(err: &anyhow::Error) -> String {
    let mut text = err.to_string();
    for cause in err.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Whether the command asked for JSON (`--json`): its errors are then also written to standard
/// output as `{"error": {"code", "message"}}`, as a query's own errors are, so that a script
/// reading standard output sees why there is no answer (`--json --daemon` with no daemon printed
/// nothing there).
static JSON_ERRORS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Writes an error that ends the command: as text on standard error, and as JSON on standard
/// output when the command asked for JSON.
fn report_failure(code: &str, message: &str) {
    eprintln!("fresco: {message}");
    if JSON_ERRORS.load(std::sync::atomic::Ordering::Relaxed) {
        outln!("{}", json!({ "error": { "code": code, "message": message } }));
    }
}

/// Ends the command for want of a daemon (`--daemon`), with exit code 4.
fn exit_without_daemon(message: &str) -> ! {
    report_failure("NO_DAEMON", message);
    std::process::exit(EXIT_NO_DAEMON as i32)
}

fn main() -> ExitCode {
    // Before any thread exists: one malloc arena per indexing thread (see the function).
    fresco_indexer::process::limit_malloc_arenas(IndexerOptions::default().threads);
    // SAFETY: no other thread exists yet.
    unsafe { fresco_indexer::process::put_core_count_in_environment() };
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // A command line clap refuses (`--limit abc`, conflicting flags) that asked for JSON
            // gets its error as JSON on standard output too, as every later error does.
            // Arguments as the OS gives them: one that is not UTF-8 is clap's error to report.
            let asks_json = {
                let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
                args.iter().any(|a| a == "--json" || a == "--format=json")
                    || args.windows(2).any(|w| w[0] == "--format" && w[1] == "json")
            };
            if asks_json && err.use_stderr() {
                // The error's first paragraph, without clap's usage and help lines: what is
                // wrong, and what it names (`the following required arguments were not
                // provided: <QUERY>`).
                let message = err.to_string();
                let paragraph: Vec<&str> =
                    message.lines().take_while(|l| !l.trim().is_empty()).map(str::trim).collect();
                let text = paragraph.join(" ");
                let text = text.strip_prefix("error: ").unwrap_or(&text);
                outln!("{}", json!({ "error": { "code": "USAGE", "message": text } }));
            }
            err.exit()
        }
    };
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            let usage = err.downcast_ref::<UsageError>().is_some();
            report_failure(if usage { "USAGE" } else { "ERROR" }, &error_text(&err));
            ExitCode::from(if usage { EXIT_USAGE } else { 1 })
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    // Every command looks for a daemon (or is one): with a relative runtime directory it would
    // look in a different place from each working directory, and say no daemon serves the root.
    let asked_json = matches!(
        cli.command,
        Command::Index { json: true, .. }
            | Command::Query { json: true, .. }
            | Command::Query { format: Some(Format::Json), .. }
            | Command::Status { json: true, .. }
    );
    JSON_ERRORS.store(asked_json, std::sync::atomic::Ordering::Relaxed);
    paths::configured_runtime_dir().map_err(UsageError)?;
    match cli.command {
        Command::Index { args, json } => {
            let started = Instant::now();
            let indexer = open_index(&args)?;
            print_index_summary(&indexer, started.elapsed(), json);
            Ok(ExitCode::SUCCESS)
        }
        Command::Query { words, db, json, format, freshness, limit, timeout_ms, wait_ms, client } => {
            let (path, text) = match words.as_slice() {
                [q] => (None, q.clone()),
                [p, q] => (Some(PathBuf::from(p)), q.clone()),
                // clap counts the words of one run: options between them (`query PATH --db D
                // callers x`) start another, so more can arrive.
                _ => {
                    return Err(UsageError(format!(
                        "query takes [PATH] QUERY, {} words were given: put the query in one quoted argument \
                         (fresco query PATH 'callers x')",
                        words.len()
                    ))
                    .into());
                }
            };
            let format = match (json, format) {
                (true, Some(other)) if other != Format::Json => {
                    report_failure("USAGE", "--json asks for JSON, --format for another format: give one of them");
                    return Ok(ExitCode::from(EXIT_USAGE));
                }
                (true, _) => Format::Json,
                (false, format) => format.unwrap_or(Format::Table),
            };
            let params = json!({
                "query": text,
                "freshness": freshness.as_str(),
                "limit": limit,
                "timeout_ms": timeout_ms,
                "wait_ms": wait_ms,
            });
            if let Some(p) = &path
                && !p.exists()
            {
                return Err(UsageError(format!(
                    "cannot open {}: no such directory (a query of several words goes in one quoted argument: \
                     fresco query 'callers pkg.mod.f')",
                    p.display()
                ))
                .into());
            }
            // A query that cannot run indexes nothing first: a typo, or a PATH taken for the
            // query (`fresco query httpx`), used to walk the working directory and leave an
            // index there, which then made its subdirectories "inside an indexed root".
            let checked = protocol::query_params(&params)
                .map_err(|e| e.to_json())
                .and_then(|_| fresco_query::parse(&text).map_err(|e| protocol::query_error(&e.into()).to_json()));
            if let Err(mut error) = checked {
                if path.is_none() && Path::new(&text).is_dir() {
                    let hint = format!(
                        " ('{text}' is a directory: a PATH goes before the query, fresco query {text} 'callers pkg.mod.f')"
                    );
                    if let Some(message) =
                        error.get_mut("message").and_then(|m| m.as_str().map(|m| format!("{m}{hint}")))
                    {
                        error["message"] = json!(message);
                    }
                }
                return Ok(report_error(&text, &error, format == Format::Json));
            }
            let root = root_of(&path)?;
            refuse_nested_root(&path, &root, &db)?;
            let args = IndexArgs { path, db, ..IndexArgs::default() };
            let response = match daemon_or_index(&root, &client, &args)? {
                Answerer::Daemon(mut c) => {
                    c.call("query", params, Duration::from_millis(timeout_ms + wait_ms + 30_000))?
                }
                Answerer::InProcess(indexer) => {
                    let mut params = protocol::query_params(&params).map_err(|e| anyhow::anyhow!(e.message))?;
                    // Retrieval needs the lanes: build them for this query (the daemon keeps
                    // them warm instead); embed only for a query that asks the dense lane.
                    // An index built in memory (a daemon holds the stored one, and its vectors,
                    // or the index cannot be written): the dense lane is down, and says why.
                    let vectors = indexer.db_dir().ok_or_else(|| {
                        "the files were indexed in memory for this command, without the stored vectors (a daemon \
                         holds them, or the index cannot be written here): ask the daemon serving this root, if one \
                         does, for the dense lane"
                            .to_string()
                    });
                    // In-process, the index has just been brought up to date with the disk.
                    let history = indexer.stored_history();
                    let index = protocol::IndexView { snapshot: indexer.snapshot(), history, root: indexer.root() };
                    // Building the lanes may embed for seconds: a target that does not resolve
                    // is reported first.
                    let asked = dense_asked(&params.text);
                    let checked =
                        if asked.is_some() { protocol::check_context_targets(index, &params) } else { Ok(()) };
                    let building = Instant::now();
                    let lanes = asked.filter(|_| checked.is_ok()).map(|dense| {
                        fresco_indexer::lanes::RetrievalLanes::build_now(
                            vectors,
                            indexer.snapshot(),
                            dense.then(|| in_process_dense_wait(timeout_ms)),
                        )
                    });
                    // The time spent waiting for embeddings is the query's: `--timeout-ms` bounds
                    // the whole answer. The wait takes at most half of it (see
                    // `in_process_dense_wait`), so the rest is the query's own.
                    params.started = Some(building);
                    let lanes_ref = lanes.as_ref().map(|l| l as &dyn fresco_query::Lanes);
                    match checked.and_then(|()| protocol::run_query(index, &params, None, lanes_ref, None, None, &[])) {
                        Ok((_, mut value)) => {
                            if indexer.db_dir().is_none() {
                                // Numbered from 1 like any new index: the number alone would pass
                                // for a version the daemon published.
                                note(
                                    &mut value,
                                    format!(
                                        "answered from files indexed in memory (another fresco process holds \
                                         the stored index, or it cannot be written here): version {} is this \
                                         index's own, not one a daemon published",
                                        indexer.snapshot().version()
                                    ),
                                );
                            }
                            Ok(value)
                        }
                        Err(e) => Err(e.to_json()),
                    }
                }
            };
            match response {
                Ok(value) => {
                    let rendered = match format {
                        Format::Json => format!("{value}\n"),
                        Format::Table => render::table(&value),
                        Format::Dot => render::dot(&value),
                        Format::Mermaid => render::mermaid(&value),
                    };
                    out!("{rendered}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(error) => Ok(report_error(&text, &error, format == Format::Json)),
            }
        }
        Command::Status { path, db, json, client } => {
            let root = root_of(&path)?;
            refuse_nested_root(&path, &root, &db)?;
            let index_dir = db_dir(&root, &db);
            let mut daemon_socket = None;
            let value = match daemon_or_index(&root, &client, &IndexArgs { path, db, ..IndexArgs::default() })? {
                Answerer::Daemon(mut c) => {
                    daemon_socket = Some(c.socket().to_path_buf());
                    match c.call("status", json!({}), Duration::from_secs(30))? {
                        Ok(v) => v,
                        Err(e) => return Ok(report_error("", &e, json)),
                    }
                }
                Answerer::InProcess(indexer) => protocol::status(protocol::StatusInfo {
                    root: &root,
                    snapshot: indexer.snapshot(),
                    daemon: false,
                    pending: Vec::new(),
                    uptime: None,
                    watcher: None,
                    last_error: None,
                    not_stored: indexer
                        .stored_history()
                        .is_none()
                        .then(|| "the files were indexed in memory for this command".to_string()),
                    db: Some(&index_dir),
                    lanes: None,
                    walk_issues: indexer.walk_issues(),
                    history: indexer.stored_history(),
                    caught_up: indexer.caught_up().map(|c| (c, c.reused_of(indexer.snapshot().totals().files))),
                }),
            };
            // Where a daemon for this root listens (or would): for clients that speak the
            // protocol themselves (docs/protocol.md). The one answering, or listening while this
            // process answers (`--no-daemon`): its runtime directory may not be this process's.
            let mut value = value;
            let listening =
                || paths::recorded_socket(&root, &index_dir).filter(|s| client::Client::connect_to(s).is_some());
            let socket = daemon_socket.or_else(listening).or_else(|| paths::daemon_paths(&root).ok().map(|p| p.socket));
            if let (Some(fields), Some(socket)) = (value.as_object_mut(), socket) {
                fields.insert("socket".into(), json!(socket.display().to_string()));
            }
            if json {
                outln!("{value}");
            } else {
                print_status(&value);
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Export { args, out, stored, client } => {
            let root = root_of(&args.path)?;
            refuse_nested_root(&args.path, &root, &args.db)?;
            let out_abs = if out.is_absolute() { out.clone() } else { std::env::current_dir()?.join(&out) };
            let client = if stored { ClientArgs { daemon: false, no_daemon: true } } else { client };
            match connect(&root, &client)? {
                Some(mut c) => {
                    if args.max_file_size.is_some() || args.no_gitignore || args.gitignore {
                        eprintln!(
                            "fresco: the daemon serving {} exports its graph, built with its own settings: \
                             --max-file-size and --gitignore/--no-gitignore apply to `index` and `serve`",
                            root.display()
                        );
                    }
                    // An export is no interactive answer: after a branch switch it waits for the
                    // daemon to catch up (as an in-process export would), up to the longest wait.
                    let params = json!({"out": out_abs.display().to_string(), "wait_ms": protocol::MAX_TIMEOUT_MS});
                    match c.call("export", params, Duration::from_secs(600))? {
                        Ok(v) => eprintln!(
                            "exported version {}: {} nodes, {} edges to {}",
                            v["version"],
                            v["nodes"],
                            v["edges"],
                            out.display()
                        ),
                        Err(e) => return Ok(report_error("", &e, false)),
                    }
                }
                None => {
                    let indexer = if stored {
                        // Another root's index read as this root's would export its graph under
                        // this root's name.
                        refuse_another_roots_index(&root, &args.db)?;
                        let db = db_dir(&root, &args.db);
                        Indexer::read_stored(&root, &db, indexer_options(&args, &db)?)
                            .map_err(anyhow::Error::from)
                            .map_err(|err| {
                                if store_in_use(&err) { anyhow::Error::new(StoreInUse(db.clone())) } else { err }
                            })?
                    } else {
                        match open_index(&args) {
                            Err(err) if store_in_use(&err) && client.no_daemon => {
                                index_in_memory(&root, &args, &daemon_holds(&root))?
                            }
                            Err(err) if store_unwritable(&err) => index_in_memory(
                                &root,
                                &args,
                                &format!("warning: {err}; exporting the files indexed in memory (nothing is stored)"),
                            )?,
                            other => other?,
                        }
                    };
                    let counts = export::write(indexer.snapshot(), &out_abs)?;
                    // Version 0 is the empty graph before any version was committed (a first
                    // index stopped part way): say so rather than export it as if it were one.
                    let nothing = if stored && indexer.snapshot().version() == 0 {
                        match fresco_indexer::indexer::interrupted_rebuild(&db_dir(&root, &args.db)) {
                            Some(cause) => format!(
                                " (no version is stored yet: a rebuild, begun because {cause}, was stopped before it \
                                 stored one)"
                            ),
                            None => " (no version is stored yet: the first index has not completed)".to_string(),
                        }
                    } else {
                        String::new()
                    };
                    eprintln!(
                        "exported version {}: {} nodes, {} edges to {}{nothing}",
                        indexer.snapshot().version(),
                        counts.nodes,
                        counts.edges,
                        out.display()
                    );
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Serve { args, debounce_ms, retrieval_trace } => {
            let root = root_of(&args.path)?;
            refuse_nested_root(&args.path, &root, &args.db)?;
            refuse_another_roots_index(&root, &args.db)?;
            protocol::set_retrieval_trace(retrieval_trace.as_deref())
                .with_context(|| "cannot open the retrieval trace file".to_string())?;
            let debounce = fresco_indexer::watch::Debounce::quiet_for(Duration::from_millis(debounce_ms));
            let db = db_dir(&root, &args.db);
            let remember = {
                let (args, db) = (args.clone(), db.clone());
                Box::new(move || remember_settings(&args, &db))
            };
            daemon::serve(daemon::ServeOptions {
                indexer: indexer_options(&args, &db)?,
                db,
                root,
                debounce,
                remember,
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Stop { path } => {
            let root = root_of(&path)?;
            let mut connection = client::Client::connect(&root);
            if connection.is_none()
                && let Some(pid) = daemon::lock_holder(&root)
            {
                // A daemon still indexing before it listens: stop it once it does, rather than
                // report that none runs while it goes on to serve.
                eprintln!("fresco: the daemon of {} (pid {pid}) is still starting; waiting for it", root.display());
                let started = Instant::now();
                while connection.is_none() && started.elapsed() < DAEMON_STARTUP_WAIT {
                    std::thread::sleep(Duration::from_millis(200));
                    if daemon::lock_holder(&root).is_none() {
                        break;
                    }
                    connection = client::Client::connect(&root);
                }
            }
            let Some(mut c) = connection else {
                // `fresco stop .` in a subdirectory of a served root: name the root to give.
                if let Some(above) = root.ancestors().skip(1).find(|dir| client::Client::connect(dir).is_some()) {
                    eprintln!(
                        "fresco: no daemon serves {}; the daemon of {} does (`fresco stop {}`, or no PATH)",
                        root.display(),
                        above.display(),
                        above.display()
                    );
                } else {
                    eprintln!("fresco: no daemon serves {}", root.display());
                }
                return Ok(ExitCode::from(EXIT_NO_DAEMON));
            };
            // A refusal (`BUSY` when every connection slot is taken) means the daemon goes on
            // running: say so instead of reporting a stop that did not happen.
            if let Err(refusal) = c.call("shutdown", json!({}), Duration::from_secs(10))? {
                let code = refusal.get("code").and_then(Value::as_str).unwrap_or("ERROR");
                let message = refusal.get("message").and_then(Value::as_str).unwrap_or("");
                eprintln!("fresco: the daemon serving {} did not stop: {code}: {message}", root.display());
                return Ok(ExitCode::from(EXIT_QUERY_ERROR));
            }
            // Wait until the socket is gone, so that a following `serve` can start at once.
            let socket = paths::daemon_paths(&root)?.socket;
            let deadline = Instant::now() + Duration::from_secs(10);
            while socket.exists() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if socket.exists() {
                eprintln!("fresco: the daemon serving {} accepted the stop but still runs after 10 s", root.display());
                return Ok(ExitCode::from(EXIT_QUERY_ERROR));
            }
            // Then until it exits (it writes what it published first): a `serve` right after
            // `stop` found the lock still held (3 times of 3, 50 to 100 ms after the socket).
            let deadline = Instant::now() + Duration::from_secs(40);
            while daemon::lock_holder(&root).is_some() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            if daemon::lock_holder(&root).is_some() {
                eprintln!(
                    "fresco: the daemon serving {} stopped listening but has not exited after 40 s",
                    root.display()
                );
                return Ok(ExitCode::from(EXIT_QUERY_ERROR));
            }
            eprintln!("fresco: stopped the daemon serving {}", root.display());
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// How long an in-process retrieval query waits for the dense lane to embed what it lacks.
const IN_PROCESS_DENSE_WAIT_S: u64 = 10;

/// The dense wait of an in-process query: never longer than half the query's own time limit,
/// which it counts against (a query given `--timeout-ms 50` answers from what is embedded,
/// marked partial, at once).
fn in_process_dense_wait(timeout_ms: u64) -> Duration {
    // Half the query's time limit at most: the query itself, which the wait counts against,
    // keeps the rest (it had none left when the wait could take it all).
    Duration::from_secs(IN_PROCESS_DENSE_WAIT_S).min(Duration::from_millis(timeout_ms / 2))
}

/// Whether a query's `search` and `context` steps ask the dense lane (a step naming no lanes asks
/// every lane); `None` when it has no such step and needs no retrieval lanes at all.
fn dense_asked(text: &str) -> Option<bool> {
    use fresco_query::ast::{Lane, Stage};
    let query = fresco_query::parse(text).ok()?;
    let asked: Vec<&Vec<Lane>> = query
        .stages
        .iter()
        .filter_map(|s| match s {
            Stage::Search { lanes, .. } | Stage::Context { lanes, .. } => Some(lanes),
            _ => None,
        })
        .collect();
    (!asked.is_empty()).then(|| asked.iter().any(|lanes| lanes.is_empty() || lanes.contains(&Lane::Dense)))
}

/// The daemon connection to use, per the client flags.
fn connect(root: &Path, client: &ClientArgs) -> Result<Option<client::Client>> {
    if client.no_daemon {
        return Ok(None);
    }
    match client::Client::connect(root) {
        Some(c) => Ok(Some(c)),
        None if client.daemon => {
            exit_without_daemon(&format!("no daemon serves {} (start one with `fresco serve`)", root.display()))
        }
        None => Ok(None),
    }
}

fn report_error(text: &str, error: &Value, json: bool) -> ExitCode {
    let code = error["code"].as_str().unwrap_or("ERROR");
    let exit = if code == "STALE" { EXIT_STALE } else { EXIT_QUERY_ERROR };
    if json {
        outln!("{}", json!({ "error": error }));
        return ExitCode::from(exit);
    }
    let message = error["message"].as_str().unwrap_or("error");
    match (code, error["position"].as_u64()) {
        ("PARSE_ERROR", Some(position)) => {
            // The message names the place; the picture shows it.
            let bare = message
                .split_once(": ")
                .map_or(message, |(place, rest)| if place.starts_with("at ") { rest } else { message });
            let err = fresco_query::ParseError::at(text, position as usize, bare.to_string());
            eprintln!("fresco: query error\n{}", err.render(text));
        }
        // An unknown name the query wrote, or a file or line that is not there: pointed at the
        // same way.
        ("UNKNOWN_SYMBOL" | "INVALID_QUERY", Some(position)) => {
            let err = fresco_query::ParseError::at(text, position as usize, message.to_string());
            eprintln!("fresco: query error\n{}", err.render(text));
        }
        _ => eprintln!("fresco: {message}"),
    }
    if let Some(files) = error["files"].as_array() {
        for f in files.iter().take(STALE_FILES_SHOWN) {
            eprintln!("  stale: {}", f.as_str().unwrap_or(""));
        }
        if files.len() > STALE_FILES_SHOWN {
            eprintln!("  ... and {} more stale files (--json lists them all)", files.len() - STALE_FILES_SHOWN);
        }
    }
    ExitCode::from(exit)
}

/// The repository root: the path given, else the current directory's nearest ancestor (itself
/// included) that fresco indexes (it holds `.fresco/`, or a daemon serves it), else the current
/// directory. So a command run in a subdirectory of an indexed repository answers about that
/// repository, as git's do, instead of indexing the subdirectory as a repository of its own (with
/// other module names).
fn root_of(path: &Option<PathBuf>) -> Result<PathBuf> {
    if let Some(root) = path {
        let canonical = root.canonicalize().map_err(|e| UsageError(format!("cannot open {}: {e}", root.display())))?;
        if !canonical.is_dir() {
            return Err(UsageError(format!("{} is not a directory (PATH is a repository root)", root.display())).into());
        }
        return Ok(canonical);
    }
    let here = PathBuf::from(".").canonicalize().context("cannot open the current directory")?;
    Ok(here.ancestors().find(|dir| is_indexed(dir)).map_or_else(|| here.clone(), Path::to_path_buf))
}

/// Whether fresco indexes `dir`: it holds `.fresco/`, or a daemon serves it (one answers on its
/// socket: a daemon killed without its cleanup leaves the socket file behind).
fn is_indexed(dir: &Path) -> bool {
    dir.join(".fresco").is_dir()
        || paths::daemon_paths(dir)
            .is_ok_and(|p| p.socket.exists() && std::os::unix::net::UnixStream::connect(&p.socket).is_ok())
}

/// For a command that only reads (query, status, export) given a PATH with no index of its own
/// (and no `--db`): refuses when a directory above it is indexed. Answering would index PATH as
/// a repository of its own, with other module names, beside the index the user meant, and that
/// new `.fresco/` would then be found first by every command run below it.
fn refuse_nested_root(path: &Option<PathBuf>, root: &Path, db: &Option<PathBuf>) -> Result<()> {
    if path.is_none() || db.is_some() || is_indexed(root) {
        return Ok(());
    }
    if let Some(above) = root.ancestors().skip(1).find(|dir| is_indexed(dir)) {
        return Err(UsageError(format!(
            "{} is inside {}, which fresco indexes: give that root or no PATH at all (module names are relative \
             to the root), or run `fresco index {}` first to index this directory as a repository of its own",
            root.display(),
            above.display(),
            root.display()
        ))
        .into());
    }
    Ok(())
}

/// A command line that cannot be carried out as given: exit code 2, like clap's own errors.
#[derive(Debug)]
struct UsageError(String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

fn db_dir(root: &Path, db: &Option<PathBuf>) -> PathBuf {
    // Absolute: a daemon names it in `status`, for clients in other working directories.
    db.clone().map(|db| std::path::absolute(&db).unwrap_or(db)).unwrap_or_else(|| root.join(".fresco"))
}

/// The indexer's options for a command: the settings of the index (see [`IndexSettings`]) as
/// stored, overridden by the flags the command gives.
fn indexer_options(args: &IndexArgs, db: &Path) -> Result<IndexerOptions> {
    let mut options = IndexerOptions::default();
    if let Some(t) = args.threads {
        options.threads = usize::from(t);
    }
    let settings = IndexSettings::read(db)?.overridden_by(args);
    if let Some(max) = settings.max_file_size {
        options.walk.max_file_size = max;
    }
    if let Some(gitignore) = settings.gitignore {
        options.walk.gitignore = gitignore;
    }
    Ok(options)
}

/// What decides which files are indexed, given with `--max-file-size`, `--no-gitignore` or
/// `--gitignore`: kept in the index directory once a command applied them, for every later
/// command on that index that does not give them (a query or `status` must not undo them with
/// the defaults, re-reading the tree the other way).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct IndexSettings {
    max_file_size: Option<u64>,
    gitignore: Option<bool>,
}

/// The file in the index directory holding [`IndexSettings`], a `key = value` per line.
const SETTINGS_FILE: &str = "settings";

/// The file in the index directory naming the root whose graph it holds (the path's bytes).
const ROOT_FILE: &str = "root";

/// The root whose graph the index directory `db` holds, as recorded there.
fn recorded_root(db: &Path) -> Option<PathBuf> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = std::fs::read(db.join(ROOT_FILE)).ok()?;
    (!bytes.is_empty()).then(|| PathBuf::from(std::ffi::OsStr::from_bytes(&bytes)))
}

/// Refuses an index directory given with `--db` that holds the graph of another root that still
/// exists: opening it for `root` would replace that graph, and its history, with this root's
/// (`query a --db b/.fresco` rebuilt b's index from a's files without a word, and `b`'s next
/// command rebuilt it back). An index whose root is gone (the repository moved) is taken over,
/// and so is `root`'s default index, `root/.fresco` (a copy of a repository, `cp -r a c`, brings
/// a's index along as c's own, taken over without `--db`; another index inside `root`, a nested
/// repository's, is not `root`'s). An index written before roots were recorded is not checked.
fn refuse_another_roots_index(root: &Path, db: &Option<PathBuf>) -> Result<()> {
    if db.is_none() {
        return Ok(());
    }
    let dir = db_dir(root, db);
    let default_of_root = dir.canonicalize().is_ok_and(|dir| dir == root.join(".fresco"));
    match recorded_root(&dir) {
        Some(other) if other != root && other.is_dir() && !default_of_root => Err(UsageError(format!(
            "the index {} holds the graph of {}, not of {} (a command for {} would replace that graph and \
             its history with this one's); give another --db, or remove {} to use it for {}",
            dir.display(),
            other.display(),
            root.display(),
            root.display(),
            dir.display(),
            root.display()
        ))
        .into()),
        _ => Ok(()),
    }
}

/// Records in the index directory `db` that it holds `root`'s graph (see
/// [`refuse_another_roots_index`]). A directory that cannot take the record still serves: the
/// record only guards against a mistaken `--db`.
fn record_root(root: &Path, db: &Path) {
    use std::os::unix::ffi::OsStrExt;
    if recorded_root(db).as_deref() != Some(root) {
        let _ = std::fs::write(db.join(ROOT_FILE), root.as_os_str().as_bytes());
    }
}

impl IndexSettings {
    fn read(db: &Path) -> Result<IndexSettings> {
        let path = db.join(SETTINGS_FILE);
        // No file: nothing was set. One that cannot be read, or is not text, is an error like a
        // line fresco does not know, not settings silently dropped.
        let text = match std::fs::read(&path) {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|_| anyhow::anyhow!("{} is not UTF-8 text (delete the file to reset)", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(IndexSettings::default()),
            Err(e) => return Err(anyhow::anyhow!("cannot read {}: {e}", path.display())),
        };
        let mut settings = IndexSettings::default();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            let bad = || {
                anyhow::anyhow!(
                    "{} has a line fresco does not know: {line:?} (delete the file to reset)",
                    path.display()
                )
            };
            let (key, value) = line.split_once('=').ok_or_else(bad)?;
            match (key.trim(), value.trim()) {
                ("max-file-size", v) => settings.max_file_size = Some(v.parse().map_err(|_| bad())?),
                ("gitignore", v) => settings.gitignore = Some(v.parse().map_err(|_| bad())?),
                _ => return Err(bad()),
            }
        }
        Ok(settings)
    }

    fn overridden_by(self, args: &IndexArgs) -> IndexSettings {
        IndexSettings {
            max_file_size: args.max_file_size.or(self.max_file_size),
            gitignore: if args.no_gitignore {
                Some(false)
            } else if args.gitignore {
                Some(true)
            } else {
                self.gitignore
            },
        }
    }
}

/// Keeps the settings `args` gives, once the command applied them to the index in `db` (not
/// before: a command that fails, or a daemon that answers with its own, changes nothing).
pub(crate) fn remember_settings(args: &IndexArgs, db: &Path) -> Result<()> {
    record_root(&root_of(&args.path)?, db);
    let stored = IndexSettings::read(db)?;
    let settings = stored.overridden_by(args);
    if settings == stored {
        return Ok(());
    }
    let mut text =
        String::from("# Written by fresco: how this index was built, for the commands after the one that set it.\n");
    if let Some(max) = settings.max_file_size {
        text.push_str(&format!("max-file-size = {max}\n"));
    }
    if let Some(gitignore) = settings.gitignore {
        text.push_str(&format!("gitignore = {gitignore}\n"));
    }
    let path = db.join(SETTINGS_FILE);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// How long a command waits for a daemon that holds the index but does not answer yet (it binds
/// its socket once its first version is published).
const DAEMON_STARTUP_WAIT: Duration = Duration::from_secs(120);

/// How long a `--no-daemon` command waits for another command holding the stored index before
/// it indexes the repository in memory: about what indexing django takes.
const NO_DAEMON_STORE_WAIT: Duration = Duration::from_secs(10);

/// Who answers a command: the daemon serving the root, or the index opened in this process.
enum Answerer {
    Daemon(client::Client),
    // Boxed: an in-process indexer is large, a daemon connection small.
    InProcess(Box<Indexer>),
}

/// The daemon serving `root`, else the index opened in-process. When another fresco process
/// holds the index (a daemon still indexing before it listens), waits for that daemon instead of
/// failing on the store's lock.
fn daemon_or_index(root: &Path, client: &ClientArgs, args: &IndexArgs) -> Result<Answerer> {
    // `--db` names the index to answer from. A daemon serves the root from one index; it answers
    // only when it holds this one, which its lock on the store says (the opening below fails as
    // in use, and the daemon is asked after all). Before, the daemon answered from its own index
    // whatever `--db` named (black-box review: `changes since 2` of another index's history).
    if args.db.is_some() && !client.daemon && !client.no_daemon && client::Client::connect(root).is_some() {
        // The daemon that holds this index answers at once (opening the store first waited two
        // seconds for its lock every time).
        let db = db_dir(root, &args.db);
        if store_locked_elsewhere(&db)
            && let Some(c) = daemon_holding(root, &db)
        {
            return Ok(Answerer::Daemon(c));
        }
        match open_index(args) {
            Ok(indexer) => return Ok(Answerer::InProcess(Box::new(indexer))),
            Err(err) if store_in_use(&err) => {}
            Err(err) if store_unwritable(&err) => return answer_though_unwritable(root, args, client, &err),
            Err(err) => return Err(err),
        }
    }
    if let (Some(db), true) = (&args.db, client.daemon) {
        // `--daemon` with `--db DIR`: only the daemon holding DIR may answer (it records its
        // socket there); the root's daemon answered from its own index before.
        let db = db_dir(root, &Some(db.clone()));
        let Some(c) = daemon_holding(root, &db) else {
            exit_without_daemon(&format!("no daemon holds the index {} of {}", db.display(), root.display()))
        };
        return Ok(Answerer::Daemon(c));
    }
    if let Some(c) = connect(root, client)? {
        return Ok(Answerer::Daemon(c));
    }
    if client.no_daemon && args.db.is_none() && client::Client::connect(root).is_some() {
        // A daemon serves the root and holds its default store: no need to wait on the store's
        // lock. Another `--db` is opened as given (in memory only if that one is in use too).
        return Ok(Answerer::InProcess(Box::new(index_in_memory(root, args, &daemon_holds(root))?)));
    }
    let holder = || daemon_holding(root, &db_dir(root, &args.db));
    let first_try = Instant::now();
    match open_index(args) {
        Ok(indexer) => Ok(Answerer::InProcess(Box::new(indexer))),
        Err(err) if store_in_use(&err) && !client.no_daemon => {
            if let Some(c) = holder() {
                return Ok(Answerer::Daemon(c));
            }
            // A daemon still indexing before it listens, or another command (an in-process
            // `query` catching up): whichever answers or lets go first.
            eprintln!("fresco: the index is in use by another fresco process; waiting for it");
            let started = Instant::now();
            while started.elapsed() < DAEMON_STARTUP_WAIT {
                if let Some(c) = client::Client::connect(root).or_else(holder) {
                    return Ok(Answerer::Daemon(c));
                }
                match open_index(args) {
                    Ok(indexer) => return Ok(Answerer::InProcess(Box::new(indexer))),
                    Err(again) if store_in_use(&again) => std::thread::sleep(Duration::from_millis(200)),
                    Err(other) => return Err(other),
                }
            }
            Err(err)
        }
        Err(err) if store_in_use(&err) => {
            // `--no-daemon` with the store held by another command, not a daemon (two queries at
            // once): wait for it to let go, as indexing in memory redoes the whole repository
            // (and said a daemon held the index).
            if client::Client::connect(root).is_none() && holder().is_none() {
                eprintln!(
                    "fresco: the index is in use by another fresco command; waiting for it (up to {} s, then \
                     indexing in memory)",
                    NO_DAEMON_STORE_WAIT.as_secs()
                );
                // Each try (the first one too) waits for the store's lock a while itself: one
                // more is made only while it can end within the limit.
                let one_try = first_try.elapsed();
                while first_try.elapsed() + one_try <= NO_DAEMON_STORE_WAIT {
                    match open_index(args) {
                        Ok(indexer) => return Ok(Answerer::InProcess(Box::new(indexer))),
                        Err(again) if store_in_use(&again) => {
                            if client::Client::connect(root).is_some() || holder().is_some() {
                                break;
                            }
                        }
                        Err(other) => return Err(other),
                    }
                }
            }
            let why = if client::Client::connect(root).is_some() || holder().is_some() {
                daemon_holds(root)
            } else {
                "another fresco command holds the stored index; --no-daemon indexes the repository in memory for \
                 this command"
                    .to_string()
            };
            Ok(Answerer::InProcess(Box::new(index_in_memory(root, args, &why)?)))
        }
        // A read-only checkout, or an index another user wrote: answered all the same.
        Err(err) if store_unwritable(&err) => answer_though_unwritable(root, args, client, &err),
        Err(err) => Err(err),
    }
}

/// The daemon holding the index in `db`, which records its socket there: found whatever runtime
/// directory it and this process were given, for `--db` as for the default index. A daemon that
/// could not write there (it serves from memory) is found through this process's runtime
/// directory, when its `status` names `db`.
fn daemon_holding(root: &Path, db: &Path) -> Option<client::Client> {
    if let Some(c) = paths::recorded_socket(root, db).and_then(|socket| client::Client::connect_to(&socket)) {
        return Some(c);
    }
    let mut c = client::Client::connect(root)?;
    let status = c.call("status", json!({}), Duration::from_secs(5)).ok()?.ok()?;
    let same = |a: &Path, b: &Path| {
        std::fs::canonicalize(a).unwrap_or_else(|_| a.to_path_buf())
            == std::fs::canonicalize(b).unwrap_or_else(|_| b.to_path_buf())
    };
    let serves_db = status["not_stored"].is_string() && status["db"].as_str().is_some_and(|d| same(Path::new(d), db));
    serves_db.then_some(c)
}

/// A read-only checkout, an index another user wrote, a full disk: answered all the same, by the
/// daemon holding the index if one does and `--no-daemon` was not given (a full disk can fail
/// the opening before the store's lock says it is in use), else from memory.
fn answer_though_unwritable(
    root: &Path,
    args: &IndexArgs,
    client: &ClientArgs,
    err: &anyhow::Error,
) -> Result<Answerer> {
    if !client.no_daemon
        && let Some(c) = daemon_holding(root, &db_dir(root, &args.db))
    {
        return Ok(Answerer::Daemon(c));
    }
    let why = format!("warning: {err}; answering from the files indexed in memory (nothing is stored)");
    Ok(Answerer::InProcess(Box::new(index_in_memory(root, args, &why)?)))
}

/// Adds `text` to an answer's `notes`.
fn note(value: &mut serde_json::Value, text: String) {
    match value.get_mut("notes").and_then(serde_json::Value::as_array_mut) {
        Some(notes) => notes.push(json!(text)),
        None => {
            if let Some(fields) = value.as_object_mut() {
                fields.insert("notes".into(), json!([text]));
            }
        }
    }
}

/// `--no-daemon` promises an answer from this process even while a daemon holds the stored
/// index: the graph is then built in memory from the files (slower, equally fresh).
/// The repository indexed in memory for this command, when the stored index cannot be opened;
/// `why` (printed) says why.
fn index_in_memory(root: &Path, args: &IndexArgs, why: &str) -> Result<Indexer> {
    eprintln!("fresco: {why}");
    let mut indexer = Indexer::in_memory(root, indexer_options(args, &db_dir(root, &args.db))?);
    indexer.refresh()?;
    for issue in indexer.walk_issues() {
        eprintln!("fresco: warning: {} {}", render::printable(&issue.path), issue.message);
    }
    Ok(indexer)
}

/// Why a command indexes in memory when a daemon holds the stored index.
fn daemon_holds(root: &Path) -> String {
    format!("a daemon serves {}; --no-daemon indexes the repository in memory for this command", root.display())
}

/// Whether the index could not be opened for want of permission or space to write it (the store
/// takes a lock and writes as it opens, and the catch-up writes what changed).
pub(crate) fn store_unwritable(err: &anyhow::Error) -> bool {
    // EACCES, EROFS, EPERM, and a full disk or quota (ENOSPC, EDQUOT), as `io::Error` shows them,
    // or its kind's name for the last two (sled's errors carry them as text).
    err.chain().any(|e| {
        if e.downcast_ref::<IndexError>().is_some_and(|e| matches!(e, IndexError::NoRoom { .. })) {
            return true;
        }
        let text = e.to_string();
        [
            "(os error 13)",
            "(os error 30)",
            "(os error 1)",
            "(os error 28)",
            "(os error 122)",
            "kind: StorageFull",
            "kind: QuotaExceeded",
        ]
        .iter()
        .any(|code| text.contains(code))
    })
}

/// Whether opening the index failed because another process holds its store.
fn store_in_use(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<StoreInUse>() || e.to_string().contains("could not acquire lock"))
}

/// Whether another process holds the lock of the store in the index directory `db` (sled's
/// `flock` on `graph/db`), asked without opening the store: sled's opening waits two seconds
/// for a lock held elsewhere.
fn store_locked_elsewhere(db: &Path) -> bool {
    std::fs::File::open(db.join("graph").join("db")).is_ok_and(|file| file.try_lock_shared().is_err())
}

/// Another fresco process holds the index's store.
#[derive(Debug)]
struct StoreInUse(PathBuf);

impl std::fmt::Display for StoreInUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the index at {} is in use by another fresco process: a daemon serving this repository (query through \
             it, or stop it with `fresco stop`), or another command still indexing (try again when it ends)",
            self.0.display()
        )
    }
}

impl std::error::Error for StoreInUse {}

fn open_index(args: &IndexArgs) -> Result<Indexer> {
    let root = root_of(&args.path)?;
    refuse_another_roots_index(&root, &args.db)?;
    let db = db_dir(&root, &args.db);
    // A link to nowhere read as "File exists (os error 17)" from deep in the store.
    if db.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink())
        && let Err(e) = std::fs::metadata(&db)
    {
        let target = std::fs::read_link(&db).map(|t| t.display().to_string()).unwrap_or_else(|_| "?".into());
        let why = match e.raw_os_error() {
            // ELOOP (Linux's number): the link leads back to itself.
            Some(40) => "which leads back to the link: remove the link, or point it at a directory".to_string(),
            _ if e.kind() == std::io::ErrorKind::NotFound => {
                "which does not exist: create that directory, or remove the link".to_string()
            }
            _ => format!("which cannot be used ({e}): point it at a directory, or remove it"),
        };
        anyhow::bail!("the index directory {} is a symbolic link to {target}, {why}", db.display());
    }
    let indexer =
        Indexer::open(&root, &db, indexer_options(args, &db)?).map_err(anyhow::Error::from).map_err(|err| {
            // The lock error itself says the same thing twice, in Rust's debug form: say it once.
            if store_in_use(&err) { anyhow::Error::new(StoreInUse(db.clone())) } else { err }
        })?;
    remember_settings(args, &db)?;
    if let Some(why) = &indexer.rebuilt_store {
        eprintln!("fresco: warning: {why}");
    }
    for issue in indexer.walk_issues() {
        eprintln!("fresco: warning: {} {}", render::printable(&issue.path), issue.message);
    }
    Ok(indexer)
}

fn print_status(v: &Value) {
    let field = |k: &str| match &v[k] {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    outln!("root               {}", field("root"));
    outln!(
        "daemon             {}",
        if v["daemon"].as_bool() == Some(true) {
            format!("running (pid {})", field("pid"))
        } else {
            "none answered (in-process)".into()
        }
    );
    outln!("socket             {}", field("socket"));
    outln!("version            {}", field("version"));
    outln!("history since      {}", field("history_since"));
    outln!("files              {}", field("files"));
    outln!("units              {}", field("units"));
    outln!("edges              {}", field("edges"));
    outln!("unresolved calls   {}", field("unresolved_calls"));
    outln!("pending changes    {}", field("pending_changes"));
    outln!("parse-error files  {}", field("parse_error_files"));
    for file in v["parse_errors"].as_array().into_iter().flatten() {
        let first = &file["first"];
        let first = first["line"].as_u64().map(|line| {
            format!("{line}:{}: {}", first["column"].as_u64().unwrap_or(0), first["message"].as_str().unwrap_or(""))
        });
        outln!(
            "  {}",
            parse_error_line(file["file"].as_str().unwrap_or("?"), file["parse_errors"].as_u64().unwrap_or(0), first)
        );
    }
    outln!("skipped files      {}", field("skipped_files"));
    for skipped in v["skipped"].as_array().into_iter().flatten() {
        outln!(
            "  {}: {}",
            render::printable(skipped["file"].as_str().unwrap_or("?")),
            skipped["reason"].as_str().unwrap_or("?")
        );
    }
    if v["resolution_cut_files"].as_u64().is_some_and(|n| n > 0) {
        outln!("resolution cut     {} (FRESCO_RESOLUTION_STEPS)", field("resolution_cut_files"));
    }
    if let Some(bytes) = v["memory_bytes"].as_u64() {
        outln!("memory             {:.1} MiB", bytes as f64 / (1024.0 * 1024.0));
    }
    if let Some(up) = v["uptime_s"].as_f64() {
        outln!("uptime             {up:.0} s");
    }
    // What opening the stored index redid: a daemon's at its start, a command's this run.
    let caught_up = &v["caught_up"];
    if caught_up.is_object() {
        let n = |key: &str| caught_up[key].as_u64().unwrap_or(0);
        outln!(
            "{}{} reused as stored, {} changed, {} removed, {} resolved again",
            if v["daemon"] == true { "at start           " } else { "this run           " },
            n("reused_files"),
            n("changed_files"),
            n("removed_files"),
            n("resolved_files")
        );
    }
    if let Some(lanes) = v["lanes"].as_object() {
        for (name, lane) in lanes {
            outln!("lane {name:<13} {}", lane_line(lane));
        }
    }
    if let Some(why) = v["not_stored"].as_str() {
        outln!("stored             no: {}", render::printable(why));
    }
    // What the daemon's indexer could not do (a full disk): the JSON had it, the text did not.
    if let Some(error) = v["last_error"].as_str() {
        outln!("last error         {}", render::printable(error));
    }
}

/// A lane's health in one line: `embedding 1200 of 5000, 2 versions behind`, `unavailable:
/// disabled by configuration (FRESCO_DENSE=off)`.
fn lane_line(lane: &Value) -> String {
    let mut line = lane["status"].as_str().unwrap_or("?").to_string();
    let mut details = Vec::new();
    if let (Some(done), Some(total)) = (lane["progress"]["done"].as_u64(), lane["progress"]["total"].as_u64()) {
        details.push(format!("{done} of {total}"));
    }
    if let Some(lag) = lane["lag"].as_u64().filter(|&lag| lag > 0) {
        details.push(format!("{lag} version{} behind", if lag == 1 { "" } else { "s" }));
    }
    if !details.is_empty() {
        line.push(' ');
        line.push_str(&details.join(", "));
    }
    if let Some(reason) = lane["reason"].as_str() {
        line.push_str(": ");
        line.push_str(&render::printable(reason));
    }
    line
}

/// A line of the parse-error list: `pkg/half.py: 3 parse errors, the first at 12:5: missing ")"`.
fn parse_error_line(path: &str, count: u64, first: Option<String>) -> String {
    let plural = if count == 1 { "" } else { "s" };
    let first = first.map(|f| format!(", the first at {}", render::printable(&f))).unwrap_or_default();
    format!("{}: {count} parse error{plural}{first}", render::printable(path))
}

fn print_index_summary(indexer: &Indexer, elapsed: Duration, json: bool) {
    let snap = indexer.snapshot();
    let t = snap.totals();
    let skipped = protocol::skipped_files(indexer.root(), snap, indexer.walk_issues());
    let parse_errors: Vec<&fresco_graph::FileGraph> =
        snap.files().filter(|f| f.graph.parse_errors > 0).map(|f| &*f.graph).collect();
    let cut: Vec<&str> = snap.files().filter(|f| f.graph.resolution_cut).map(|f| f.graph.path.as_str()).collect();
    if json {
        let value = json!({
            "version": snap.version(),
            "files": t.files,
            "units": t.units,
            "edges": t.edges,
            "unresolved_calls": t.unresolved,
            // The keys `status` has, with the same types: counts under `*_files`, the files
            // under their own keys (here every one; `status` lists at most 50).
            "root": indexer.root().display().to_string(),
            "parse_error_files": parse_errors.len(),
            "parse_errors": parse_errors.iter().map(|g| protocol::parse_error_json(g)).collect::<Vec<_>>(),
            "skipped_files": skipped.len(),
            "skipped": skipped.iter().map(|(p, r)| json!({"file": p, "reason": r})).collect::<Vec<_>>(),
            "resolution_cut_files": cut.len(),
            "resolution_cut": cut,
            "caught_up": indexer.caught_up().map(|c| protocol::caught_up_json(c, c.reused_of(t.files))),
            "seconds": elapsed.as_secs_f64(),
        });
        outln!("{value}");
        return;
    }
    outln!("version            {}", snap.version());
    outln!("files              {}", t.files);
    // What this run redid; every other file's facts came from the store as they were.
    if let Some(c) = indexer.caught_up() {
        let reused = c.reused_of(t.files);
        let rest = if reused > 0 { format!("; {reused} reused as stored") } else { String::new() };
        outln!(
            "this run           {} changed, {} removed, {} resolved again{rest}",
            c.changed_files,
            c.removed_files,
            c.resolved_files
        );
    }
    outln!("units              {}", t.units);
    outln!("edges              {}", t.edges);
    outln!("unresolved calls   {}", t.unresolved);
    outln!("parse-error files  {}", parse_errors.len());
    for g in &parse_errors {
        outln!(
            "  {}",
            parse_error_line(&g.path, u64::from(g.parse_errors), g.first_parse_error.as_ref().map(|e| e.to_string()))
        );
    }
    outln!("skipped files      {}", skipped.len());
    for (path, why) in &skipped {
        outln!("  {}: {why}", render::printable(path));
    }
    // Only when it happens: a superlinear path in the resolver, cut by the step budget.
    if !cut.is_empty() {
        outln!("resolution cut     {} (FRESCO_RESOLUTION_STEPS; what was not reached is unresolved)", cut.len());
        for path in &cut {
            outln!("  {}", render::printable(path));
        }
    }
    outln!("time               {:.3} s", elapsed.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{dense_asked, error_text, in_process_dense_wait, store_in_use, store_unwritable};

    /// A message that quotes its cause is not followed by the cause again; one that does not is.
    #[test]
    fn an_error_names_each_cause_once() {
        let io = std::io::Error::from_raw_os_error(28);
        let quoted =
            anyhow::Error::new(std::io::Error::from_raw_os_error(28)).context(format!("index I/O error: {io}"));
        assert_eq!(error_text(&quoted), "index I/O error: No space left on device (os error 28)");
        let bare = anyhow::Error::new(std::io::Error::from_raw_os_error(28)).context("cannot write the index");
        assert_eq!(error_text(&bare), "cannot write the index: No space left on device (os error 28)");
    }

    #[test]
    fn the_dense_wait_takes_at_most_half_the_query_time_limit() {
        assert_eq!(in_process_dense_wait(50), Duration::from_millis(25));
        assert_eq!(in_process_dense_wait(10_000), Duration::from_secs(5));
        assert_eq!(in_process_dense_wait(120_000), Duration::from_secs(10));
    }

    #[test]
    fn only_a_retrieval_step_that_asks_the_dense_lane_waits_for_embeddings() {
        let dense = dense_asked;
        assert_eq!(dense("callers pkg.f"), None, "no retrieval step: no lanes");
        assert_eq!(dense("search \"retry a failed connection\" k 10"), Some(true), "every lane by default");
        assert_eq!(dense("search \"retry\" k 10 lanes bm25"), Some(false));
        assert_eq!(dense("context pkg.f budget 2000 lanes bm25,graph"), Some(false));
        assert_eq!(dense("context pkg.f budget 2000 lanes dense"), Some(true));
        assert_eq!(dense("search \"x\" k 3 lanes bm25 | limit 2"), Some(false));
    }

    /// A store that cannot be written (a read-only checkout, another user's index) is told apart
    /// from one in use and from other failures: queries then answer from memory.
    #[test]
    fn an_unwritable_store_is_told_apart() {
        let denied =
            anyhow::Error::new(std::io::Error::from_raw_os_error(13)).context("cannot open the index at /r/.fresco");
        let read_only = anyhow::Error::new(std::io::Error::from_raw_os_error(30));
        let not_permitted = anyhow::Error::new(std::io::Error::from_raw_os_error(1));
        let corrupt = anyhow::anyhow!("the index is corrupt: bad record");
        assert!(store_unwritable(&denied) && store_unwritable(&read_only) && store_unwritable(&not_permitted));
        // A full disk or quota: the index cannot be written either, and a query still answers.
        let full = anyhow::Error::new(std::io::Error::from_raw_os_error(28));
        let quota = anyhow::Error::new(std::io::Error::from_raw_os_error(122));
        let full_in_debug_form =
            anyhow::anyhow!("IO error: Os {{ code: 28, kind: StorageFull, message: \"No space\" }}");
        assert!(store_unwritable(&full) && store_unwritable(&quota) && store_unwritable(&full_in_debug_form));
        // A disk with too little room to open the index on it safely.
        let no_room =
            anyhow::Error::new(fresco_indexer::IndexError::NoRoom { path: "/r/.fresco".into(), free_kib: 52 })
                .context("cannot open the index");
        assert!(store_unwritable(&no_room), "{no_room}");
        assert!(!store_unwritable(&corrupt) && !store_in_use(&denied));
        let lost = anyhow::Error::new(std::io::Error::from_raw_os_error(2));
        assert!(!store_unwritable(&lost), "no such file is another failure");
        // ENOTRECOVERABLE (131) is no EACCES (13), nor EPERM (1).
        let other = anyhow::Error::new(std::io::Error::from_raw_os_error(131));
        assert!(!store_unwritable(&other), "{other}");
    }
}
