//! Rendering query outputs: JSON for scripts, an aligned table for people, DOT and Mermaid for
//! results that form a subgraph.

use std::io::IsTerminal;

use fresco_query::{Item, Output};
use serde_json::{Value, json};

/// The stable JSON shape of a query response (see docs/query-language.md).
pub fn to_json(output: &Output, stale: &[String]) -> Value {
    let mut value = json!({
        "version": output.version,
        "results": output.results,
        "stale": stale,
        "truncated": output.truncated,
    });
    if let Some(count) = output.count {
        value["count"] = json!(count);
    }
    if !output.notes.is_empty() {
        value["notes"] = json!(output.notes);
    }
    value
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.on { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }
}

/// An aligned table; colours only when stdout is a terminal (and NO_COLOR is unset).
pub fn table(output: &Output, stale: &[String]) -> String {
    let style = Style { on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() };
    let mut out = String::new();
    if let Some(count) = output.count {
        out.push_str(&format!("{count}\n"));
    } else if output.results.is_empty() {
        out.push_str("(no results)\n");
    } else {
        let has = |f: fn(&Item) -> bool| output.results.iter().any(f);
        let mut headers = vec!["NAME", "KIND", "LOCATION"];
        let show_depth = has(|i| i.depth.is_some());
        let show_via = has(|i| i.via.is_some());
        let show_line = has(|i| i.line.is_some());
        let show_group = has(|i| i.group.is_some());
        let show_callee = has(|i| i.callee.is_some());
        let show_change = has(|i| i.change.is_some());
        if show_group {
            headers.insert(0, "#");
        }
        if show_depth {
            headers.push("DEPTH");
        }
        if show_via {
            headers.push("VIA");
        }
        if show_line {
            headers.push("AT LINE");
        }
        if show_callee {
            headers.push("CALLEE");
        }
        if show_change {
            headers.push("CHANGE");
        }
        let rows: Vec<Vec<String>> = output
            .results
            .iter()
            .map(|i| {
                let location = match (&i.file, i.start_line, i.end_line) {
                    (Some(f), Some(s), Some(e)) => format!("{f}:{s}-{e}"),
                    _ => "-".to_string(),
                };
                let mut row = vec![
                    if i.stale { format!("{} (stale)", i.name) } else { i.name.clone() },
                    i.kind.to_string(),
                    location,
                ];
                if show_group {
                    row.insert(0, i.group.map(|g| g.to_string()).unwrap_or_default());
                }
                if show_depth {
                    row.push(i.depth.map(|d| d.to_string()).unwrap_or_default());
                }
                if show_via {
                    row.push(i.via.unwrap_or("").to_string());
                }
                if show_line {
                    row.push(i.line.map(|d| d.to_string()).unwrap_or_default());
                }
                if show_callee {
                    row.push(i.callee.clone().unwrap_or_default());
                }
                if show_change {
                    row.push(i.change.unwrap_or("").to_string());
                }
                row
            })
            .collect();
        let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell.chars().count());
            }
        }
        let line = |cells: Vec<String>| -> String {
            let last = cells.len() - 1;
            cells
                .into_iter()
                .enumerate()
                .map(|(i, c)| if i == last { c } else { format!("{c:<width$}", width = widths[i]) })
                .collect::<Vec<_>>()
                .join("  ")
        };
        out.push_str(&style.paint("1", &line(headers.iter().map(|h| h.to_string()).collect())));
        out.push('\n');
        for (row, item) in rows.into_iter().zip(&output.results) {
            let text = line(row);
            out.push_str(&if item.stale { style.paint("33", &text) } else { text });
            out.push('\n');
        }
        for item in &output.results {
            if let Some(source) = &item.source {
                out.push_str(&format!("\n{}\n{source}\n", style.paint("1", &item.name)));
            }
        }
    }
    for note in &output.notes {
        out.push_str(&style.paint("2", &format!("note: {note}")));
        out.push('\n');
    }
    if output.truncated {
        out.push_str(&style.paint("33", "note: results truncated at the limit"));
        out.push('\n');
    }
    if !stale.is_empty() {
        out.push_str(&style.paint("33", &format!("stale files: {}", stale.join(", "))));
        out.push('\n');
    }
    out.push_str(&style.paint("2", &format!("version {}", output.version)));
    out.push('\n');
    out
}

/// The subgraph a result describes: every row reached from another row (or the query's start)
/// contributes the edge it was reached by.
fn edges(output: &Output) -> Vec<(String, String, String)> {
    output
        .results
        .iter()
        .filter_map(|i| Some((i.from.clone()?, i.name.clone(), i.via.unwrap_or("").to_string())))
        .collect()
}

fn nodes(output: &Output) -> Vec<String> {
    let mut all: Vec<String> = output.results.iter().map(|i| i.name.clone()).collect();
    all.extend(output.results.iter().filter_map(|i| i.from.clone()));
    all.sort();
    all.dedup();
    all
}

pub fn dot(output: &Output) -> String {
    let mut out = String::from("digraph fresco {\n  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    for n in nodes(output) {
        out.push_str(&format!("  {:?};\n", n));
    }
    for (a, b, via) in edges(output) {
        out.push_str(&format!("  {:?} -> {:?} [label={:?}];\n", a, b, via));
    }
    out.push_str("}\n");
    out
}

pub fn mermaid(output: &Output) -> String {
    let names = nodes(output);
    let id = |n: &str| names.iter().position(|x| x == n).map(|i| format!("n{i}")).unwrap_or_default();
    let mut out = String::from("flowchart LR\n");
    for n in &names {
        out.push_str(&format!("  {}[\"{}\"]\n", id(n), n.replace('"', "'")));
    }
    for (a, b, via) in edges(output) {
        out.push_str(&format!("  {} -->|{}| {}\n", id(&a), via, id(&b)));
    }
    out
}
