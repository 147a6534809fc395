//! The `fresco` command line: index, export, query, status, serve, stop.

mod export;
mod render;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use fresco_indexer::{Indexer, IndexerOptions};

#[derive(Parser)]
#[command(name = "fresco", version, about = "A fresh, versioned code property graph of a Python repository")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args, Clone)]
struct IndexArgs {
    /// The repository root (default: the current directory).
    path: Option<PathBuf>,
    /// Where the index lives (default: PATH/.fresco).
    #[arg(long)]
    db: Option<PathBuf>,
    /// Threads for parsing and resolution (default: all cores, at most 8).
    #[arg(long)]
    threads: Option<usize>,
    /// Do not apply .gitignore rules.
    #[arg(long)]
    no_gitignore: bool,
    /// Skip files larger than this many bytes.
    #[arg(long)]
    max_file_size: Option<u64>,
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
    Query {
        /// `[PATH] QUERY`: the repository root (default: the current directory) and the query.
        #[arg(num_args = 1..=2, required = true, value_names = ["PATH", "QUERY"])]
        words: Vec<String>,
        #[arg(long)]
        db: Option<PathBuf>,
        /// Print JSON (same as --format json).
        #[arg(long)]
        json: bool,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Table)]
        format: Format,
        /// The most results any step may produce.
        #[arg(long, default_value_t = 2000)]
        limit: usize,
        /// Give up (and report `truncated`) after this many milliseconds.
        #[arg(long, default_value_t = 10_000)]
        timeout_ms: u64,
    },
    /// Write the graph as nodes.jsonl and edges.jsonl.
    Export {
        #[command(flatten)]
        args: IndexArgs,
        /// The directory to write into.
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Format {
    Table,
    Json,
    Dot,
    Mermaid,
}

/// Exit codes (documented in the README): 0 success, 1 query error, 2 usage error, 3 stale,
/// 4 daemon unavailable where one was required.
const EXIT_QUERY_ERROR: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("fresco: {err:#}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Index { args, json } => {
            let started = Instant::now();
            let indexer = open_index(&args)?;
            let elapsed = started.elapsed();
            print_index_summary(&indexer, elapsed, json);
            Ok(ExitCode::SUCCESS)
        }
        Command::Query { words, db, json, format, limit, timeout_ms } => {
            let (path, text) = match words.as_slice() {
                [q] => (None, q.clone()),
                [p, q] => (Some(PathBuf::from(p)), q.clone()),
                _ => unreachable!("clap enforces one or two words"),
            };
            let args = IndexArgs { path, db, threads: None, no_gitignore: false, max_file_size: None };
            let indexer = open_index(&args)?;
            let mut ctx = fresco_query::Context::new(indexer.snapshot());
            ctx.limits = fresco_query::Limits { max_results: limit, timeout: std::time::Duration::from_millis(timeout_ms) };
            let format = if json { Format::Json } else { format };
            match fresco_query::run(&ctx, &text) {
                Ok(output) => {
                    let rendered = match format {
                        Format::Json => format!("{}\n", render::to_json(&output, &[])),
                        Format::Table => render::table(&output, &[]),
                        Format::Dot => render::dot(&output),
                        Format::Mermaid => render::mermaid(&output),
                    };
                    print!("{rendered}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(err) => {
                    report_query_error(&text, &err, format == Format::Json);
                    Ok(ExitCode::from(EXIT_QUERY_ERROR))
                }
            }
        }
        Command::Export { args, out } => {
            let indexer = open_index(&args)?;
            let counts = export::write(indexer.snapshot(), &out)?;
            eprintln!(
                "exported version {}: {} nodes, {} edges to {}",
                indexer.snapshot().version(),
                counts.nodes,
                counts.edges,
                out.display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn root_of(path: &Option<PathBuf>) -> Result<PathBuf> {
    let root = path.clone().unwrap_or_else(|| PathBuf::from("."));
    root.canonicalize().with_context(|| format!("cannot open {}", root.display()))
}

fn db_dir(root: &Path, db: &Option<PathBuf>) -> PathBuf {
    db.clone().unwrap_or_else(|| root.join(".fresco"))
}

fn indexer_options(args: &IndexArgs) -> IndexerOptions {
    let mut options = IndexerOptions::default();
    if let Some(t) = args.threads {
        options.threads = t.max(1);
    }
    if args.no_gitignore {
        options.walk.gitignore = false;
    }
    if let Some(max) = args.max_file_size {
        options.walk.max_file_size = max;
    }
    options
}

fn open_index(args: &IndexArgs) -> Result<Indexer> {
    let root = root_of(&args.path)?;
    let db = db_dir(&root, &args.db);
    let indexer = Indexer::open(&root, &db, indexer_options(args))?;
    if let Some(why) = &indexer.rebuilt_store {
        eprintln!("fresco: warning: {why}");
    }
    for issue in indexer.walk_issues() {
        eprintln!("fresco: warning: {} {}", issue.path, issue.message);
    }
    Ok(indexer)
}

fn print_index_summary(indexer: &Indexer, elapsed: std::time::Duration, json: bool) {
    let snap = indexer.snapshot();
    let t = snap.totals();
    let skipped: Vec<(String, String)> = snap
        .files()
        .filter_map(|f| f.graph.skipped.as_ref().map(|r| (f.graph.path.clone(), r.to_string())))
        .collect();
    let parse_errors: Vec<(String, u32)> = snap
        .files()
        .filter(|f| f.graph.parse_errors > 0)
        .map(|f| (f.graph.path.clone(), f.graph.parse_errors))
        .collect();
    if json {
        let value = serde_json::json!({
            "version": snap.version(),
            "files": t.files,
            "units": t.units,
            "edges": t.edges,
            "unresolved_calls": t.unresolved,
            "parse_error_files": parse_errors.iter().map(|(p, n)| serde_json::json!({"file": p, "parse_errors": n})).collect::<Vec<_>>(),
            "skipped_files": skipped.iter().map(|(p, r)| serde_json::json!({"file": p, "reason": r})).collect::<Vec<_>>(),
            "seconds": elapsed.as_secs_f64(),
        });
        println!("{value}");
        return;
    }
    println!("version            {}", snap.version());
    println!("files              {}", t.files);
    println!("units              {}", t.units);
    println!("edges              {}", t.edges);
    println!("unresolved calls   {}", t.unresolved);
    println!("parse-error files  {}", parse_errors.len());
    for (path, n) in &parse_errors {
        println!("  {path}: {n} parse error(s)");
    }
    println!("skipped files      {}", skipped.len());
    for (path, why) in &skipped {
        println!("  {path}: {why}");
    }
    println!("time               {:.3} s", elapsed.as_secs_f64());
}

fn report_query_error(text: &str, err: &fresco_query::QueryError, json: bool) {
    if json {
        let mut value = serde_json::json!({"error": {"code": err.code(), "message": err.to_string()}});
        if let fresco_query::QueryError::Parse(p) = err {
            value["error"]["position"] = serde_json::json!(p.position);
        }
        if let fresco_query::QueryError::UnknownSymbol { suggestions, .. } = err {
            value["error"]["suggestions"] = serde_json::json!(suggestions);
        }
        println!("{value}");
        return;
    }
    match err {
        fresco_query::QueryError::Parse(p) => eprintln!("fresco: query error\n{}", p.render(text)),
        other => eprintln!("fresco: {other}"),
    }
}
