//! Rendering query outputs: JSON for scripts, an aligned table for people, DOT and Mermaid for
//! results that form a subgraph.

use std::io::IsTerminal;

use fresco_query::Output;
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
    if let Some(lanes) = &output.lanes {
        value["lanes"] = json!(lanes);
        // How the lanes were fused, so an answer carries its own provenance: the levels of the
        // lanes this answer asked for and ran (one unavailable, or skipped for the time limit,
        // gave no list to fuse).
        let ran = lanes.iter().filter(|(_, report)| !matches!(report.status, "unavailable" | "skipped"));
        value["fusion"] = json!({
            "method": "reciprocal rank",
            "k": fresco_query::retrieve::RRF_K as u32,
            "levels": fusion_levels(ran.map(|(lane, _)| *lane)),
        });
    }
    if let Some(context) = &output.context {
        value["context"] = json!(context);
    }
    value
}

/// The levels of reciprocal-rank fusion for the lanes of an answer: the text lanes fused
/// first, then their fusion (`text`) with the graph lane; a level of one list is no fusion and
/// is left out (`lanes bm25` has none).
fn fusion_levels<'a>(lanes: impl Iterator<Item = &'a str>) -> Vec<Vec<&'a str>> {
    let lanes: Vec<&str> = lanes.collect();
    let text: Vec<&str> = ["bm25", "dense"].into_iter().filter(|l| lanes.contains(l)).collect();
    let graph = lanes.contains(&"graph");
    let mut levels = Vec::new();
    if text.len() > 1 {
        levels.push(text.clone());
    }
    if graph && !text.is_empty() {
        levels.push(vec![if text.len() > 1 { "text" } else { text[0] }, "graph"]);
    }
    levels
}

struct Style {
    on: bool,
}

impl Style {
    fn paint(&self, code: &str, text: &str) -> String {
        if self.on { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }
}

/// A JSON value as plain text: a string without its quotes, null as nothing.
fn text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => printable(s),
        other => other.to_string(),
    }
}

/// `s` with its control characters escaped (`\n`, `\u{1b}`): a file named with a newline
/// would otherwise break a table's lines, or forge one. JSON output carries the names as they are.
pub fn printable(s: &str) -> String {
    if !s.chars().any(char::is_control) {
        return s.to_string();
    }
    s.chars().map(|c| if c.is_control() { c.escape_default().to_string() } else { c.to_string() }).collect()
}

/// An aligned table of a query response (the JSON of [`to_json`]); colours only when stdout is a
/// terminal (and NO_COLOR is unset).
pub fn table(response: &Value) -> String {
    let style = Style { on: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none() };
    let empty = Vec::new();
    let results = response["results"].as_array().unwrap_or(&empty);
    let mut out = String::new();
    if let Some(count) = response.get("count").and_then(Value::as_u64) {
        out.push_str(&format!("{count}\n"));
    } else if results.is_empty() {
        out.push_str("(no results)\n");
    } else {
        let optional = [
            ("group", "#"),
            ("depth", "DEPTH"),
            ("via", "VIA"),
            ("from", "FROM"),
            ("line", "AT LINE"),
            ("callee", "CALLEE"),
            ("change", "CHANGE"),
            ("role", "ROLE"),
            ("parse_errors", "FILE PARSE ERRORS"),
            ("skipped", "NOT INDEXED"),
        ];
        let shown: Vec<(&str, &str)> = optional
            .iter()
            .copied()
            .filter(|(k, _)| results.iter().any(|r| r.get(*k).is_some_and(|v| !v.is_null())))
            .collect();
        let mut headers = vec!["NAME", "KIND", "LOCATION"];
        headers.extend(shown.iter().map(|(_, h)| *h));
        let rows: Vec<Vec<String>> = results
            .iter()
            .map(|r| {
                let location =
                    match (r["file"].as_str().map(printable), r["start_line"].as_u64(), r["end_line"].as_u64()) {
                        (Some(f), Some(a), Some(b)) => format!("{f}:{a}-{b}"),
                        (Some(f), None, None) => f,
                        _ => "-".to_string(),
                    };
                let stale = r["stale"].as_bool().unwrap_or(false);
                let name = text(&r["name"]);
                let mut row = vec![if stale { format!("{name} (stale)") } else { name }, text(&r["kind"]), location];
                row.extend(shown.iter().map(|(k, _)| match (*k, r["also_at"].as_array()) {
                    // Every site between the two units: `64, 67`.
                    ("line", Some(more)) => {
                        std::iter::once(text(&r["line"])).chain(more.iter().map(text)).collect::<Vec<_>>().join(", ")
                    }
                    _ => text(&r[*k]),
                }));
                row
            })
            .collect();
        let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
        for row in &rows {
            for (w, cell) in widths.iter_mut().zip(row) {
                *w = (*w).max(display_width(cell));
            }
        }
        let line = |cells: Vec<String>| -> String {
            let last = cells.len() - 1;
            cells
                .into_iter()
                .enumerate()
                .map(|(i, c)| {
                    if i == last {
                        c
                    } else {
                        let pad = widths[i].saturating_sub(display_width(&c));
                        format!("{c}{}", " ".repeat(pad))
                    }
                })
                .collect::<Vec<_>>()
                .join("  ")
        };
        out.push_str(&style.paint("1", &line(headers.iter().map(|h| h.to_string()).collect())));
        out.push('\n');
        for (row, r) in rows.into_iter().zip(results) {
            let l = line(row);
            out.push_str(&if r["stale"].as_bool().unwrap_or(false) { style.paint("33", &l) } else { l });
            out.push('\n');
        }
        for r in results {
            if let Some(source) = r["source"].as_str() {
                out.push_str(&format!("\n{}\n{source}\n", style.paint("1", &text(&r["name"]))));
            }
        }
    }
    // Retrieval: the assembled context, then each lane's health (a lane that is down or behind
    // is said, never silently absent).
    if let Some(context) = response.get("context").filter(|c| c.is_object()) {
        let units = context["units"].as_array().map_or(0, Vec::len);
        let cut = context["cut"].as_array().map_or(0, Vec::len);
        let target = context["target"].as_str().map(|t| format!(" for {t}")).unwrap_or_default();
        out.push_str(&style.paint(
            "1",
            &format!(
                "\ncontext{target}: {units} units, {} of {} tokens (counted by {}), {cut} cut by the budget",
                text(&context["tokens"]),
                text(&context["budget"]),
                text(&context["token_rule"]),
            ),
        ));
        out.push('\n');
        out.push_str(context["text"].as_str().unwrap_or(""));
        if !out.ends_with('\n') {
            out.push('\n');
        }
    }
    if let Some(line) = lanes_line(response) {
        let all_ready = response["lanes"].as_object().is_some_and(|l| l.values().all(|r| r["status"] == "ready"));
        out.push_str(&if all_ready { style.paint("2", &line) } else { style.paint("33", &line) });
        out.push('\n');
    }
    for note in response["notes"].as_array().unwrap_or(&empty) {
        out.push_str(&style.paint("2", &format!("note: {}", text(note))));
        out.push('\n');
    }
    // Every cut the executor makes comes with a note saying which (the result or time limit,
    // the paths shown, a step's rows): this line is for an answer that says nothing more.
    let cut_noted = response["notes"].as_array().is_some_and(|notes| !notes.is_empty());
    if response["truncated"].as_bool().unwrap_or(false) && !cut_noted {
        out.push_str(&style.paint("33", "note: results truncated at the limit"));
        out.push('\n');
    }
    let stale = response["stale"].as_array().unwrap_or(&empty);
    if !stale.is_empty() {
        out.push_str(&style.paint("33", &format!("stale files: {}", stale_list(stale))));
        out.push('\n');
    }
    out.push_str(&style.paint("2", &format!("version {}", text(&response["version"]))));
    out.push('\n');
    out
}

/// An edge of a drawing: from, to, the edge kind, and for a `changes` answer whether the edge
/// was added or removed.
type DrawnEdge = (String, String, String, Option<&'static str>);

/// The lanes' health of a `search` or `context` answer, one line: `lanes: bm25 ready; dense
/// unavailable: ...`.
fn lanes_line(response: &Value) -> Option<String> {
    let lanes = response.get("lanes").and_then(Value::as_object)?;
    let described: Vec<String> = lanes
        .iter()
        .map(|(lane, report)| {
            let status = text(&report["status"]);
            let lag = report["lag"].as_u64().filter(|&l| l > 0).map(|l| format!(", {l} versions behind"));
            let reason = report["reason"].as_str().map(|r| format!(": {r}"));
            format!("{lane} {status}{}{}", lag.unwrap_or_default(), reason.unwrap_or_default())
        })
        .collect();
    Some(format!("lanes: {}", described.join("; ")))
}

/// The subgraph a result describes: every row reached from another row contributes the edge it
/// was reached by, once (the paths of a `path` answer share edges: each is drawn one arrow), in
/// the order the rows first give it.
fn edges(response: &Value) -> Vec<DrawnEdge> {
    let empty = Vec::new();
    let mut drawn = std::collections::HashSet::new();
    response["results"]
        .as_array()
        .unwrap_or(&empty)
        .iter()
        .filter_map(|r| {
            let (from, name) = (r["from"].as_str()?.to_string(), r["name"].as_str()?.to_string());
            let via = r["via"].as_str().unwrap_or("").to_string();
            let change = match r["change"].as_str() {
                Some("edge_added") => Some("added"),
                Some("edge_removed") => Some("removed"),
                _ => None,
            };
            // A row reached backwards (`callers`, `subs`, `importers`, `impact`) is the source
            // of the edge it was reached by.
            Some(if r["direction"] == "in" { (name, from, via, change) } else { (from, name, via, change) })
        })
        .filter(|edge| drawn.insert(edge.clone()))
        .collect()
}

fn nodes(response: &Value) -> Vec<String> {
    let empty = Vec::new();
    let results = response["results"].as_array().unwrap_or(&empty);
    let mut all: Vec<String> = results.iter().filter_map(|r| r["name"].as_str().map(str::to_string)).collect();
    all.extend(results.iter().filter_map(|r| r["from"].as_str().map(str::to_string)));
    all.sort();
    all.dedup();
    all
}

/// What a drawing says of a node besides its name: stale (its file changed on disk after the
/// snapshot), and in a `changes` answer added, removed or changed.
#[derive(Default)]
struct NodeMarks {
    stale: bool,
    change: Option<&'static str>,
}

impl NodeMarks {
    fn label(&self, name: &str) -> String {
        let words: Vec<&str> = self.change.into_iter().chain(self.stale.then_some("stale")).collect();
        if words.is_empty() { name.to_string() } else { format!("{name} ({})", words.join(", ")) }
    }
}

fn node_marks(response: &Value, name: &str) -> NodeMarks {
    let Some(results) = response["results"].as_array() else { return NodeMarks::default() };
    let rows = || results.iter().filter(|r| r["name"].as_str() == Some(name));
    NodeMarks {
        stale: rows().any(|r| r["stale"].as_bool().unwrap_or(false)),
        change: rows().find_map(|r| match r["change"].as_str() {
            Some("added") => Some("added"),
            Some("removed") => Some("removed"),
            Some("changed") => Some("changed"),
            _ => None,
        }),
    }
}

/// What a drawing cannot show as nodes and edges: the version, a `count`, notes, stale files. As
/// comment lines, so that nothing of the answer is lost and the graph stays valid.
fn comment_lines(response: &Value, prefix: &str) -> String {
    let empty = Vec::new();
    // A comment ends at a line break: one inside a note (a quoted file name can hold one) would
    // put the rest of it into the graph.
    let text = |v: &Value| text(v).replace(['\r', '\n'], " ");
    let mut out = String::new();
    if let Some(version) = response["version"].as_u64() {
        out.push_str(&format!("{prefix} version {version}\n"));
    }
    if let Some(count) = response.get("count").and_then(Value::as_u64) {
        out.push_str(&format!("{prefix} count: {count}\n"));
    }
    for note in response["notes"].as_array().unwrap_or(&empty) {
        out.push_str(&format!("{prefix} note: {}\n", text(note)));
    }
    if let Some(lanes) = lanes_line(response) {
        out.push_str(&format!("{prefix} {}\n", text(&json!(lanes))));
    }
    let stale = response["stale"].as_array().unwrap_or(&empty);
    if !stale.is_empty() {
        out.push_str(&format!("{prefix} stale files: {}\n", stale_list(stale)));
    }
    out
}

/// How many stale files a rendering names before it counts the rest: a branch switch can leave
/// thousands stale for a moment, and one line naming them all says less than a count.
const STALE_FILES_NAMED: usize = 10;

/// The stale files, the first [`STALE_FILES_NAMED`] by name and the rest counted (`--json` lists
/// them all).
fn stale_list(stale: &[Value]) -> String {
    let named: Vec<String> = stale.iter().take(STALE_FILES_NAMED).map(text).collect();
    match stale.len().checked_sub(STALE_FILES_NAMED) {
        Some(rest) if rest > 0 => format!("{} and {rest} more (--json lists them all)", named.join(", ")),
        _ => named.join(", "),
    }
}

pub fn dot(response: &Value) -> String {
    let mut out = String::from("digraph fresco {\n");
    out.push_str(&comment_lines(response, "  //"));
    out.push_str("  rankdir=LR;\n  node [shape=box, fontname=\"monospace\"];\n");
    for n in nodes(response) {
        let marks = node_marks(response, &n);
        let mut attributes = Vec::new();
        if marks.stale || marks.change.is_some() {
            attributes.push(format!("label={:?}", marks.label(&n)));
        }
        match marks.change {
            Some("removed") => attributes.push("style=dashed, color=red".into()),
            Some("added") => attributes.push("color=darkgreen".into()),
            Some(_) => attributes.push("color=darkorange".into()),
            None if marks.stale => attributes.push("style=dashed".into()),
            None => {}
        }
        if attributes.is_empty() {
            out.push_str(&format!("  {:?};\n", n));
        } else {
            out.push_str(&format!("  {:?} [{}];\n", n, attributes.join(", ")));
        }
    }
    for (a, b, via, change) in edges(response) {
        match change {
            Some("removed") => out.push_str(&format!(
                "  {:?} -> {:?} [label={:?}, style=dashed, color=red];\n",
                a,
                b,
                format!("{via} (removed)")
            )),
            Some(_) => out.push_str(&format!(
                "  {:?} -> {:?} [label={:?}, color=darkgreen];\n",
                a,
                b,
                format!("{via} (added)")
            )),
            None => out.push_str(&format!("  {:?} -> {:?} [label={:?}];\n", a, b, via)),
        }
    }
    out.push_str("}\n");
    out
}

/// Text inside a Mermaid label: its entity codes for what Mermaid would read as markup or the
/// end of the label (`<lambda1>` is a tag to its HTML labels).
fn mermaid_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '|' => out.push_str("#124;"),
            '#' => out.push_str("#35;"),
            c => out.push(c),
        }
    }
    out
}

pub fn mermaid(response: &Value) -> String {
    let names = nodes(response);
    let id = |n: &str| names.iter().position(|x| x == n).map(|i| format!("n{i}")).unwrap_or_default();
    let mut out = String::from("flowchart LR\n");
    out.push_str(&comment_lines(response, "  %%"));
    for n in &names {
        out.push_str(&format!("  {}[\"{}\"]\n", id(n), mermaid_text(&node_marks(response, n).label(n))));
    }
    // Added edges thick, removed ones dotted; their labels say which as well.
    for (a, b, via, change) in edges(response) {
        let (arrow, label) = match change {
            Some("removed") => ("-.->", format!("{via} (removed)")),
            Some(_) => ("==>", format!("{via} (added)")),
            None => ("-->", via),
        };
        // Quoted where it holds more than a word: Mermaid reads `(` in a bare label as a shape.
        let plain = label.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        let label = if plain { mermaid_text(&label) } else { format!("\"{}\"", mermaid_text(&label)) };
        out.push_str(&format!("  {} {arrow}|{label}| {}\n", id(&a), id(&b)));
    }
    out
}

/// The columns a terminal gives `text`: East Asian wide and fullwidth characters take two (a
/// table of Chinese or Japanese names was misaligned when every character counted one).
fn display_width(text: &str) -> usize {
    text.chars()
        .map(|c| {
            let wide = matches!(c as u32,
                0x1100..=0x115F     // Hangul Jamo initials
                | 0x2E80..=0x303E   // CJK radicals, punctuation
                | 0x3041..=0x33FF   // kana, CJK symbols
                | 0x3400..=0x4DBF   // CJK Extension A
                | 0x4E00..=0x9FFF   // CJK Unified Ideographs
                | 0xA000..=0xA4CF   // Yi
                | 0xAC00..=0xD7A3   // Hangul syllables
                | 0xF900..=0xFAFF   // CJK Compatibility Ideographs
                | 0xFE30..=0xFE4F   // CJK compatibility forms
                | 0xFF00..=0xFF60   // fullwidth forms
                | 0xFFE0..=0xFFE6
                | 0x1F300..=0x1F64F // pictographs and emoji
                | 0x1F900..=0x1F9FF
                | 0x20000..=0x3FFFD // CJK Extensions B and later
            );
            if wide { 2 } else { 1 }
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fusion_levels_name_the_lanes_asked_for_only() {
        let levels = |lanes: &[&'static str]| fusion_levels(lanes.iter().copied());
        let all: Vec<Vec<&str>> = vec![vec!["bm25", "dense"], vec!["text", "graph"]];
        assert_eq!(levels(&["bm25", "dense", "graph"]), all);
        assert_eq!(levels(&["bm25", "dense"]), vec![vec!["bm25", "dense"]]);
        assert_eq!(levels(&["bm25", "graph"]), vec![vec!["bm25", "graph"]]);
        assert_eq!(levels(&["dense"]), Vec::<Vec<&str>>::new());
        assert_eq!(levels(&["graph"]), Vec::<Vec<&str>>::new());
    }

    #[test]
    fn fusion_levels_leave_out_a_lane_that_did_not_run() {
        use fresco_query::retrieve::LaneReport;
        let report =
            |status: &'static str| LaneReport { status, version: Some(1), lag: Some(0), reason: None, hits: 0 };
        let answer = |dense: &'static str, graph: &'static str| {
            let lanes = [("bm25", report("ready")), ("dense", report(dense)), ("graph", report(graph))];
            let output = Output { lanes: Some(lanes.into_iter().collect()), ..Output::default() };
            to_json(&output, &[])["fusion"]["levels"].clone()
        };
        assert_eq!(answer("ready", "ready"), json!([["bm25", "dense"], ["text", "graph"]]));
        assert_eq!(answer("ready", "skipped"), json!([["bm25", "dense"]]));
        assert_eq!(answer("unavailable", "ready"), json!([["bm25", "graph"]]));
        assert_eq!(answer("unavailable", "skipped"), json!([]));
    }

    #[test]
    fn a_cut_the_answer_notes_is_not_said_again_as_the_result_limit() {
        let response = |notes: Value| {
            json!({"version": 1, "truncated": true, "notes": notes, "results": [
                {"name": "m", "kind": "module", "file": "a.py", "start_line": 1, "end_line": 2},
            ]})
        };
        let out = table(&response(json!(["more than 10 shortest paths; showing 10"])));
        assert!(!out.contains("truncated at the limit"), "{out}");
        let out = table(&response(json!([])));
        assert!(out.contains("note: results truncated at the limit"), "{out}");
    }

    #[test]
    fn control_characters_in_names_cannot_forge_table_lines() {
        assert_eq!(printable("pkg/a.py"), "pkg/a.py");
        assert_eq!(printable("evil\n  fake.py: not valid UTF-8"), "evil\\n  fake.py: not valid UTF-8");
        let response = json!({"version": 1, "results": [
            {"name": "m", "kind": "module", "file": "a\nb.py", "start_line": 1, "end_line": 2},
        ]});
        assert_eq!(table(&response).lines().count(), 3, "{}", table(&response));
    }

    #[test]
    fn a_context_table_shows_roles_the_assembled_text_and_every_lanes_health() {
        let response = json!({
            "version": 3,
            "results": [
                {"name": "pkg.helper", "kind": "function", "file": "pkg/a.py", "start_line": 1, "end_line": 2, "role": "dependency"},
                {"name": "pkg.other", "kind": "function", "file": "pkg/b.py", "start_line": 4, "end_line": 9, "role": "example"},
            ],
            "context": {
                "target": "pkg.caller", "budget": 2000, "tokens": 41, "token_rule": "minilm",
                "units": [{"name": "pkg.helper"}], "cut": ["pkg.other"],
                "text": "# file: pkg/a.py (revision abc)\ndef helper():\n    return 1\n",
            },
            "lanes": {
                "bm25": {"status": "ready", "lag": 0, "hits": 2},
                "dense": {"status": "unavailable", "reason": "embedding the repository (3 of 10 unit texts have vectors)", "hits": 0},
                "graph": {"status": "ready", "lag": 0, "hits": 2},
            },
        });
        let out = table(&response);
        assert!(out.lines().next().is_some_and(|h| h.contains("ROLE")), "{out}");
        assert!(out.contains("pkg.helper") && out.contains("dependency") && out.contains("example"), "{out}");
        assert!(
            out.contains("context for pkg.caller: 1 units, 41 of 2000 tokens (counted by minilm), 1 cut by the budget"),
            "{out}"
        );
        assert!(out.contains("def helper():\n    return 1\n"), "{out}");
        assert!(
            out.contains("lanes: bm25 ready; dense unavailable: embedding the repository (3 of 10 unit texts have vectors); graph ready"),
            "{out}"
        );
        assert!(out.trim_end().ends_with("version 3"), "{out}");
    }

    #[test]
    fn a_traversal_table_has_no_retrieval_lines() {
        let response = json!({"version": 1, "results": [{"name": "a.f", "kind": "function", "depth": 1}]});
        let out = table(&response);
        assert!(!out.contains("lanes:") && !out.contains("context:") && !out.contains("ROLE"), "{out}");
    }

    #[test]
    fn columns_line_up_under_wide_characters() {
        let response = json!({"version": 1, "results": [
            {"name": "pkg.用户名", "kind": "function", "file": "pkg.py", "start_line": 1, "end_line": 2},
            {"name": "pkg.username", "kind": "function", "file": "pkg.py", "start_line": 4, "end_line": 5},
        ]});
        let out = table(&response);
        let columns: Vec<usize> = out
            .lines()
            .filter(|l| l.starts_with("pkg."))
            .map(|l| l.split("function").next().map_or(0, display_width))
            .collect();
        assert_eq!(columns.len(), 2, "{out}");
        assert_eq!(columns[0], columns[1], "the kind column starts at the same place: {out}");
        assert_eq!(display_width("pkg.用户名"), 10);
    }

    #[test]
    fn graph_formats_draw_edges_the_way_they_point() {
        let response = json!({"version": 1, "results": [
            {"name": "pkg.main", "kind": "function", "depth": 1, "via": "calls", "from": "pkg.helper", "direction": "in"},
            {"name": "pkg.leaf", "kind": "function", "depth": 1, "via": "calls", "from": "pkg.helper", "direction": "out"},
        ]});
        let edges = edges(&response);
        assert!(edges.contains(&("pkg.main".into(), "pkg.helper".into(), "calls".into(), None)), "{edges:?}");
        assert!(edges.contains(&("pkg.helper".into(), "pkg.leaf".into(), "calls".into(), None)), "{edges:?}");
    }

    /// A `changes` answer drawn: what was removed is not drawn as if it were still there.
    #[test]
    fn graph_formats_say_what_a_change_added_and_removed() {
        let response = json!({"version": 2, "results": [
            {"name": "c.gone", "kind": "function", "change": "removed"},
            {"name": "c.new", "kind": "function", "change": "added"},
            {"name": "c.limit", "kind": "function", "change": "changed"},
            {"name": "c.limit", "kind": "function", "change": "edge_removed", "from": "c.gone", "via": "calls"},
            {"name": "c.limit", "kind": "function", "change": "edge_added", "from": "c.new", "via": "calls"},
        ]});
        let dot = dot(&response);
        assert!(dot.contains("\"c.gone\" [label=\"c.gone (removed)\", style=dashed, color=red];"), "{dot}");
        assert!(dot.contains("\"c.new\" [label=\"c.new (added)\", color=darkgreen];"), "{dot}");
        assert!(dot.contains("\"c.limit\" [label=\"c.limit (changed)\", color=darkorange];"), "{dot}");
        assert!(
            dot.contains("\"c.gone\" -> \"c.limit\" [label=\"calls (removed)\", style=dashed, color=red];"),
            "{dot}"
        );
        assert!(dot.contains("\"c.new\" -> \"c.limit\" [label=\"calls (added)\", color=darkgreen];"), "{dot}");
        let mermaid = mermaid(&response);
        assert!(
            mermaid.contains("[\"c.gone (removed)\"]") && mermaid.contains("-.->|\"calls (removed)\"|"),
            "{mermaid}"
        );
        assert!(mermaid.contains("==>|\"calls (added)\"|"), "{mermaid}");
    }

    #[test]
    fn graph_formats_keep_the_lanes_health() {
        let response = json!({"version": 3, "results": [{"name": "m.f", "kind": "function"}],
            "lanes": {"bm25": {"status": "ready"}, "dense": {"status": "unavailable", "reason": "no model"}}});
        assert!(dot(&response).contains("  // lanes: bm25 ready; dense unavailable: no model\n"), "{}", dot(&response));
        assert!(mermaid(&response).contains("  %% lanes: bm25 ready; dense unavailable: no model\n"));
    }

    #[test]
    fn an_edge_shared_by_paths_is_drawn_once() {
        let step = |group: u32, from: &str, name: &str| json!({"name": name, "kind": "function", "via": "calls", "from": from, "direction": "out", "group": group});
        let response = json!({"version": 1, "results": [
            step(1, "pkg.a", "pkg.b"), step(1, "pkg.b", "pkg.d"),
            step(2, "pkg.a", "pkg.b"), step(2, "pkg.b", "pkg.c"),
        ]});
        assert_eq!(dot(&response).matches("\"pkg.a\" -> \"pkg.b\"").count(), 1, "{}", dot(&response));
        assert_eq!(mermaid(&response).matches("-->|calls|").count(), 3, "{}", mermaid(&response));
    }

    #[test]
    fn graph_formats_mark_stale_nodes_and_escape_mermaid_labels() {
        let response = json!({"version": 4, "stale": ["pkg/a.py"], "notes": ["a note"], "results": [
            {"name": "pkg.a.<lambda1>", "kind": "function", "via": "calls", "from": "pkg.a.f", "direction": "out", "stale": true},
        ]});
        let dot = dot(&response);
        assert!(dot.contains("\"pkg.a.<lambda1>\" [label=\"pkg.a.<lambda1> (stale)\", style=dashed];"), "{dot}");
        assert!(dot.contains("  // version 4\n") && dot.contains("  // note: a note\n"), "{dot}");
        assert!(dot.contains("  // stale files: pkg/a.py\n"), "{dot}");
        let mermaid = mermaid(&response);
        assert!(mermaid.contains("[\"pkg.a.#lt;lambda1#gt; (stale)\"]"), "{mermaid}");
        assert!(!mermaid.contains("<lambda1>"), "{mermaid}");
        assert!(mermaid.contains("  %% stale files: pkg/a.py\n"), "{mermaid}");
    }

    #[test]
    fn many_stale_files_are_named_up_to_a_count() {
        let files: Vec<String> = (0..2491).map(|i| format!("pkg/m{i}.py")).collect();
        let listed = stale_list(&files.iter().map(|f| json!(f)).collect::<Vec<_>>());
        assert!(listed.starts_with("pkg/m0.py, pkg/m1.py, "), "{listed}");
        assert!(listed.ends_with("pkg/m9.py and 2481 more (--json lists them all)"), "{listed}");
        let few = stale_list(&files[..10].iter().map(|f| json!(f)).collect::<Vec<_>>());
        assert!(few.ends_with("pkg/m9.py") && !few.contains("more"), "{few}");
    }
}
