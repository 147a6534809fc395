//! The stable export format: `nodes.jsonl` and `edges.jsonl`, one JSON object per line.
//!
//! node: `{"id", "kind", "name", "file", "start_line", "end_line", "revision"}`;
//! edge: `{"src", "dst", "kind", "line"}`. External targets become nodes of kind `external` with
//! no file and no revision. Tools outside the project read this: keep it stable.

use std::fs;
use std::io::{BufWriter, Write};
use std::path::Path;

use anyhow::{Context, Result};
use fresco_graph::Snapshot;
use serde_json::json;

pub struct ExportCounts {
    pub nodes: usize,
    pub edges: usize,
}

pub fn write(snapshot: &Snapshot, out_dir: &Path) -> Result<ExportCounts> {
    fs::create_dir_all(out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let nodes_path = out_dir.join("nodes.jsonl");
    let edges_path = out_dir.join("edges.jsonl");
    let mut nodes = BufWriter::new(
        fs::File::create(&nodes_path).with_context(|| format!("cannot write {}", nodes_path.display()))?,
    );
    let mut node_count = 0;
    for u in snapshot.units() {
        let line = json!({
            "id": u.unit.id,
            "kind": u.unit.kind.as_str(),
            "name": u.unit.name,
            "file": u.file.graph.path,
            "start_line": u.unit.start_line,
            "end_line": u.unit.end_line,
            "revision": u.file.graph.revision.to_string(),
        });
        writeln!(nodes, "{line}")?;
        node_count += 1;
    }
    // A module whose file was skipped (too large, binary, unreadable) has no units, but other
    // modules' imports and references still name it: its node keeps those edges from dangling.
    for file in snapshot.files() {
        let graph = &file.graph;
        let Some(reason) = &graph.skipped else { continue };
        if graph.module.is_empty() || snapshot.unit(&graph.module).is_some() {
            continue;
        }
        let line = json!({
            "id": graph.module,
            "kind": "module",
            "name": graph.module,
            "file": graph.path,
            "start_line": 0,
            "end_line": 0,
            "revision": graph.revision.to_string(),
            "skipped": reason.to_string(),
        });
        writeln!(nodes, "{line}")?;
        node_count += 1;
    }
    for external in snapshot.externals() {
        let line = json!({
            "id": external,
            "kind": "external",
            "name": external,
            "file": null,
            "start_line": 0,
            "end_line": 0,
            "revision": null,
        });
        writeln!(nodes, "{line}")?;
        node_count += 1;
    }
    nodes.flush()?;
    let mut edges = BufWriter::new(
        fs::File::create(&edges_path).with_context(|| format!("cannot write {}", edges_path.display()))?,
    );
    let mut edge_count = 0;
    for (e, _) in snapshot.edges() {
        let line = json!({"src": &*e.src, "dst": &*e.dst, "kind": e.kind.as_str(), "line": e.line});
        writeln!(edges, "{line}")?;
        edge_count += 1;
    }
    edges.flush()?;
    Ok(ExportCounts { nodes: node_count, edges: edge_count })
}
