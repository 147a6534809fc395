//! Per-task outcomes of the retrieval benchmark, their aggregation, the Markdown report and the
//! recall plot (SVG written by hand).

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The cut-offs of Recall@k and Precision@k.
pub const KS: [usize; 6] = [1, 3, 5, 10, 20, 50];
/// The lanes as ranked lists, and the fused list; index into `Needed::ranks`.
pub const LISTS: [&str; 4] = ["bm25", "dense", "graph", "fused"];

/// Rankings kept only to show where the fused ranking's gains come from; index into
/// `Needed::ablation_ranks`: the graph lane's candidates ranked without the text lanes' evidence,
/// and the plain reciprocal-rank fusion before the dependencies are put first.
pub const ABLATIONS: [&str; 2] = ["graph lane, structure alone", "plain RRF order"];
/// The depth within which a unit counts as found (the query's `k`).
pub const FOUND_WITHIN: usize = 50;

/// Where a miss was lost.
pub const STAGES: [&str; 5] =
    ["missing from the index", "not retrieved", "ranked too low", "cut by the budget", "other"];

/// One unit the original body used.
#[derive(Clone, Debug)]
pub struct Needed {
    pub id: String,
    /// `function`, `method`, `class` or `variable`.
    pub kind: &'static str,
    /// `same class`, `same file` or `other file`.
    pub place: &'static str,
    /// 1-based rank in each of [`LISTS`] (the lane's own list, and the full fused ranking).
    pub ranks: [Option<usize>; 4],
    /// 1-based rank in each of [`ABLATIONS`].
    pub ablation_ranks: [Option<usize>; 2],
    /// Entered the context (itself or inside a unit that did).
    pub in_context: bool,
    /// Listed as cut by the budget.
    pub cut: bool,
    /// For a unit not in the context: the stage that lost it (one of [`STAGES`]).
    pub stage: Option<&'static str>,
}

impl Needed {
    pub fn found(&self, list: usize, k: usize) -> bool {
        self.ranks[list].is_some_and(|r| r <= k)
    }
}

#[derive(Clone, Debug)]
pub struct TaskResult {
    pub project: String,
    pub target: String,
    pub target_kind: &'static str,
    pub needed: Vec<Needed>,
    /// Units the blanked unit still uses (through its signature or decorators), not counted.
    pub signature_deps: usize,
    /// Length of each lane's list (graph may return up to 4k), and of the full fused ranking.
    pub list_lens: [usize; 4],
    pub context_tokens: usize,
    pub budget: usize,
    pub context_units: usize,
    pub context_dependencies: usize,
    pub token_rule: &'static str,
    /// The whole `context` query, in-process (lanes included), milliseconds.
    pub latency_ms: f64,
    /// Each stage timed alone after the query: bm25, dense (query embedding + search), graph.
    pub stage_ms: [f64; 3],
    /// Lane status as the answer reported it (ready, lagging, partial, unavailable).
    pub lane_status: BTreeMap<String, String>,
}

impl TaskResult {
    pub fn hits(&self, list: usize, k: usize) -> usize {
        self.needed.iter().filter(|n| n.found(list, k)).count()
    }
    pub fn recall(&self, list: usize, k: usize) -> f64 {
        self.hits(list, k) as f64 / self.needed.len() as f64
    }
    pub fn ablation_recall(&self, ablation: usize, k: usize) -> f64 {
        let hits = self.needed.iter().filter(|n| n.ablation_ranks[ablation].is_some_and(|r| r <= k)).count();
        hits as f64 / self.needed.len() as f64
    }
    pub fn precision(&self, list: usize, k: usize) -> f64 {
        self.hits(list, k) as f64 / k as f64
    }
    pub fn context_recall(&self) -> f64 {
        self.needed.iter().filter(|n| n.in_context).count() as f64 / self.needed.len() as f64
    }
}

/// Per-project facts for the report.
#[derive(Clone, Debug, Default)]
pub struct ProjectInfo {
    pub name: String,
    pub root: String,
    pub files: usize,
    pub units: usize,
    pub edges: usize,
    pub index_s: f64,
    pub candidates: usize,
    pub tried: usize,
    pub skipped: BTreeMap<String, usize>,
    pub tasks: usize,
    /// Seconds until the lexical lane and the dense lane were ready on the first snapshot.
    pub bm25_ready_s: f64,
    pub dense_ready_s: Option<f64>,
    pub dense_status: String,
    /// The dense lane started from vectors stored by an earlier run (`--vector-cache`).
    pub vectors_reused: bool,
    /// Median seconds from `apply` returning to both lanes reflecting the blanked version.
    pub lane_update_median_ms: f64,
    /// Needed `C.__init__` dropped because `C` itself is needed.
    pub init_folded: usize,
}

/// Median / p95 / mean of a sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub p95: f64,
    pub mean: f64,
    pub max: f64,
}

pub fn stats(values: &[f64]) -> Stats {
    if values.is_empty() {
        return Stats::default();
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let pick = |q: f64| {
        let i = ((q * (v.len() - 1) as f64).round() as usize).min(v.len() - 1);
        v[i]
    };
    Stats {
        n: v.len(),
        median: pick(0.5),
        p95: pick(0.95),
        mean: v.iter().sum::<f64>() / v.len() as f64,
        max: v[v.len() - 1],
    }
}

fn mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(s, n), v| (s + v, n + 1));
    if n == 0 { f64::NAN } else { sum / n as f64 }
}

pub fn mean_recall(tasks: &[TaskResult], list: usize, k: usize) -> f64 {
    mean(tasks.iter().map(|t| t.recall(list, k)))
}

fn f3(x: f64) -> String {
    if x.is_nan() { "–".into() } else { format!("{x:.3}") }
}

fn pct(n: usize, d: usize) -> String {
    if d == 0 { "–".into() } else { format!("{:.0} %", 100.0 * n as f64 / d as f64) }
}

fn ms(x: f64) -> String {
    if x >= 100.0 { format!("{x:.0} ms") } else { format!("{x:.1} ms") }
}

/// The tables of one group of tasks (all projects, or one).
pub fn tables(out: &mut String, tasks: &[TaskResult], headline: bool) {
    let needed: Vec<&Needed> = tasks.iter().flat_map(|t| &t.needed).collect();
    let n_needed = needed.len();
    let _ = writeln!(
        out,
        "{} tasks, {} needed units ({:.1} per task, median {}).\n",
        tasks.len(),
        n_needed,
        n_needed as f64 / tasks.len().max(1) as f64,
        stats(&tasks.iter().map(|t| t.needed.len() as f64).collect::<Vec<_>>()).median
    );
    // Recall@k.
    let _ =
        writeln!(out, "**Recall@k** (mean over tasks of the share of the task's needed units in the list's top k):\n");
    let _ = write!(out, "| list |");
    for k in KS {
        let _ = write!(out, " R@{k} |");
    }
    let _ = writeln!(out, "\n|---|{}", "---:|".repeat(KS.len()));
    for (i, name) in LISTS.iter().enumerate() {
        let _ = write!(out, "| {}{}{} |", if i == 3 { "**" } else { "" }, name, if i == 3 { "**" } else { "" });
        for k in KS {
            let _ = write!(out, " {} |", f3(mean_recall(tasks, i, k)));
        }
        let _ = writeln!(out);
    }
    for (i, name) in ABLATIONS.iter().enumerate() {
        let _ = write!(out, "| *{name}* |");
        for k in KS {
            let _ = write!(out, " {} |", f3(mean(tasks.iter().map(|t| t.ablation_recall(i, k)))));
        }
        let _ = writeln!(out);
    }
    let _ = writeln!(
        out,
        "\n*Italic rows* show where the gains come from: the graph lane with its text evidence (word and \
         dense affinity, what the target's analogues use) left out, and the reciprocal-rank fusion of the \
         lanes before the dependencies (the graph lane's first k, in its order) are put ahead of the examples."
    );
    let ctx = mean(tasks.iter().map(TaskResult::context_recall));
    let _ = writeln!(
        out,
        "\nIn the assembled context (budget {}): **{}** of the needed units per task (mean), {} of all needed units.\n",
        tasks.first().map_or(0, |t| t.budget),
        f3(ctx),
        pct(needed.iter().filter(|n| n.in_context).count(), n_needed)
    );
    if !headline {
        return;
    }
    // Precision@k.
    let _ = writeln!(out, "**Precision@k** (mean over tasks of needed units in the top k / k):\n");
    let _ = write!(out, "| list |");
    for k in KS {
        let _ = write!(out, " P@{k} |");
    }
    let _ = writeln!(out, "\n|---|{}", "---:|".repeat(KS.len()));
    for (i, name) in LISTS.iter().enumerate() {
        let _ = write!(out, "| {name} |");
        for k in KS {
            let _ = write!(out, " {} |", f3(mean(tasks.iter().map(|t| t.precision(i, k)))));
        }
        let _ = writeln!(out);
    }
    // No hit at all.
    let _ = writeln!(out, "\n**Tasks with no needed unit found at all** (within the top {FOUND_WITHIN}):\n");
    let _ = writeln!(out, "| list | tasks with no hit | share |\n|---|---:|---:|");
    for (i, name) in LISTS.iter().enumerate() {
        let none = tasks.iter().filter(|t| t.hits(i, FOUND_WITHIN) == 0).count();
        let _ = writeln!(out, "| {name} | {none} | {} |", pct(none, tasks.len()));
    }
    let none = tasks.iter().filter(|t| !t.needed.iter().any(|n| n.in_context)).count();
    let _ = writeln!(out, "| context | {none} | {} |", pct(none, tasks.len()));
    // Rank distribution.
    let buckets: [(usize, usize, &str); 7] = [
        (1, 1, "1"),
        (2, 3, "2–3"),
        (4, 5, "4–5"),
        (6, 10, "6–10"),
        (11, 20, "11–20"),
        (21, 50, "21–50"),
        (51, usize::MAX, "> 50"),
    ];
    let _ = writeln!(out, "\n**Rank of each needed unit** (share of the {n_needed} needed units):\n");
    let _ = write!(out, "| list |");
    for (_, _, label) in buckets {
        let _ = write!(out, " {label} |");
    }
    let _ = writeln!(out, " not returned | median rank (found) |\n|---|{}---:|---:|", "---:|".repeat(buckets.len()));
    for (i, name) in LISTS.iter().enumerate() {
        let _ = write!(out, "| {name} |");
        for (lo, hi, _) in buckets {
            let c = needed.iter().filter(|n| n.ranks[i].is_some_and(|r| r >= lo && r <= hi)).count();
            let _ = write!(out, " {} |", pct(c, n_needed));
        }
        let missing = needed.iter().filter(|n| n.ranks[i].is_none()).count();
        let ranks: Vec<f64> = needed.iter().filter_map(|n| n.ranks[i].map(|r| r as f64)).collect();
        let _ = writeln!(out, " {} | {} |", pct(missing, n_needed), stats(&ranks).median);
    }
    let lens: Vec<String> = LISTS
        .iter()
        .enumerate()
        .map(|(i, l)| format!("{l} {:.0}", mean(tasks.iter().map(|t| t.list_lens[i] as f64))))
        .collect();
    let _ = writeln!(
        out,
        "\nMean list lengths: {} (bm25 and dense are asked for k = 50; the graph lane returns up to 4k; the fused ranking is the union).",
        lens.join(", ")
    );
    // Unique finds.
    let _ =
        writeln!(out, "\n**Needed units found by exactly one lane** (within its top {FOUND_WITHIN}), and by none:\n");
    let _ = writeln!(out, "| lane | found | found only by this lane |\n|---|---:|---:|");
    for (i, name) in LISTS[..3].iter().enumerate() {
        let found = needed.iter().filter(|n| n.found(i, FOUND_WITHIN)).count();
        let only = needed
            .iter()
            .filter(|n| n.found(i, FOUND_WITHIN) && (0..3).filter(|&j| n.found(j, FOUND_WITHIN)).count() == 1)
            .count();
        let _ = writeln!(out, "| {name} | {found} ({}) | {only} ({}) |", pct(found, n_needed), pct(only, n_needed));
    }
    let none = needed.iter().filter(|n| (0..3).all(|j| !n.found(j, FOUND_WITHIN))).count();
    let _ = writeln!(out, "| no lane | {none} ({}) | |", pct(none, n_needed));
    // Breakdown by kind and by place.
    for (title, key) in [("dependency kind", 0usize), ("where the dependency lives", 1)] {
        let _ = writeln!(
            out,
            "\n**By {title}** (share of the needed units of that group found — pooled over tasks, not a per-task mean):\n"
        );
        let _ = writeln!(
            out,
            "| {} | needed | bm25 R@10 | dense R@10 | graph R@10 | fused R@10 | fused R@50 | in context |\n|---|---:|---:|---:|---:|---:|---:|---:|",
            if key == 0 { "kind" } else { "place" }
        );
        let groups: Vec<&str> = if key == 0 {
            // Annotated dependencies may also be modules, or name nothing fresco indexed.
            let mut kinds = vec!["function", "method", "class", "variable"];
            for other in ["module", "not in the index"] {
                if needed.iter().any(|n| n.kind == other) {
                    kinds.push(other);
                }
            }
            kinds
        } else {
            vec!["same class", "same file", "other file"]
        };
        for g in groups {
            let members: Vec<&&Needed> =
                needed.iter().filter(|n| if key == 0 { n.kind == g } else { n.place == g }).collect();
            let m = members.len();
            let share = |list: usize, k: usize| pct(members.iter().filter(|n| n.found(list, k)).count(), m);
            let _ = writeln!(
                out,
                "| {g} | {m} | {} | {} | {} | {} | {} | {} |",
                share(0, 10),
                share(1, 10),
                share(2, 10),
                share(3, 10),
                share(3, 50),
                pct(members.iter().filter(|n| n.in_context).count(), m)
            );
        }
    }
    // Attribution.
    let missed: Vec<&&Needed> = needed.iter().filter(|n| !n.in_context).collect();
    let _ = writeln!(
        out,
        "\n**Where the misses were lost** ({} needed units did not enter the context, {} of all):\n",
        missed.len(),
        pct(missed.len(), n_needed)
    );
    let _ = writeln!(out, "| stage | units | share of misses |\n|---|---:|---:|");
    for stage in STAGES {
        let c = missed.iter().filter(|n| n.stage == Some(stage)).count();
        let _ = writeln!(out, "| {stage} | {c} | {} |", pct(c, missed.len()));
    }
    let _ = writeln!(out, "\nMisses by place and stage:\n");
    let _ = write!(out, "| place |");
    for s in STAGES {
        let _ = write!(out, " {s} |");
    }
    let _ = writeln!(out, "\n|---|{}", "---:|".repeat(STAGES.len()));
    for place in ["same class", "same file", "other file"] {
        let _ = write!(out, "| {place} |");
        for s in STAGES {
            let _ = write!(out, " {} |", missed.iter().filter(|n| n.place == place && n.stage == Some(s)).count());
        }
        let _ = writeln!(out);
    }
    // By task kind.
    let mut parts = Vec::new();
    for kind in ["function", "method"] {
        let group: Vec<TaskResult> = tasks.iter().filter(|t| t.target_kind == kind).cloned().collect();
        if !group.is_empty() {
            parts.push(format!(
                "{kind}s: {} tasks, fused R@10 {}, R@50 {}",
                group.len(),
                f3(mean_recall(&group, 3, 10)),
                f3(mean_recall(&group, 3, 50))
            ));
        }
    }
    let _ = writeln!(out, "\n**By task kind**: {}.", parts.join("; "));
    // Why needed units miss the fused top 10.
    let miss10: Vec<&&Needed> = needed.iter().filter(|n| !n.found(3, 10)).collect();
    let best = |n: &Needed| n.ranks[..3].iter().flatten().min().copied();
    let _ = writeln!(
        out,
        "\n**Why needed units miss the fused top 10** ({} of {} needed units, {}), by the best rank any lane gave them:\n",
        miss10.len(),
        n_needed,
        pct(miss10.len(), n_needed)
    );
    let _ = writeln!(
        out,
        "| best lane rank | units | share of top-10 misses | of which in the context |\n|---|---:|---:|---:|"
    );
    let groups: [(&str, Box<dyn Fn(Option<usize>) -> bool>); 4] = [
        ("≤ 10 in some lane (lost in fusion)", Box::new(|b| b.is_some_and(|r| r <= 10))),
        ("11–50", Box::new(|b| b.is_some_and(|r| r > 10 && r <= 50))),
        ("> 50 (only the graph lane's long list)", Box::new(|b| b.is_some_and(|r| r > 50))),
        ("in no lane's list", Box::new(|b| b.is_none())),
    ];
    for (label, test) in &groups {
        let members: Vec<&&&Needed> = miss10.iter().filter(|n| test(best(n))).collect();
        let ctx = members.iter().filter(|n| n.in_context).count();
        let _ = writeln!(out, "| {label} | {} | {} | {ctx} |", members.len(), pct(members.len(), miss10.len()));
    }
    // Examples.
    let worst: Vec<&TaskResult> = tasks.iter().filter(|t| t.hits(3, 10) == 0).take(8).collect();
    if !worst.is_empty() {
        let _ = writeln!(
            out,
            "\nTasks with no needed unit in the fused top 10 (first {} of {}; ranks as bm25/dense/graph/fused, `-` = not in the list):\n",
            worst.len(),
            tasks.iter().filter(|t| t.hits(3, 10) == 0).count()
        );
        for t in worst {
            let needs: Vec<String> = t
                .needed
                .iter()
                .take(4)
                .map(|n| {
                    let r: Vec<String> = n.ranks.iter().map(|r| r.map_or("-".into(), |r| r.to_string())).collect();
                    format!("`{}` ({}, {}: {})", n.id, n.kind, n.place, r.join("/"))
                })
                .collect();
            let more = if t.needed.len() > 4 { format!(" and {} more", t.needed.len() - 4) } else { String::new() };
            let _ = writeln!(out, "- `{}` needs {}{more}", t.target, needs.join(", "));
        }
    }
    // Context tokens.
    let tokens = stats(&tasks.iter().map(|t| t.context_tokens as f64).collect::<Vec<_>>());
    let units = stats(&tasks.iter().map(|t| t.context_units as f64).collect::<Vec<_>>());
    let deps = stats(&tasks.iter().map(|t| t.context_dependencies as f64).collect::<Vec<_>>());
    let budget = tasks.first().map_or(0, |t| t.budget);
    let rule = tasks.first().map_or("?", |t| t.token_rule);
    let full = tasks.iter().filter(|t| t.context_tokens as f64 >= 0.9 * t.budget as f64).count();
    let _ = writeln!(
        out,
        "\n**Context**: budget {budget} tokens (counted by `{rule}`); tokens used median {:.0}, mean {:.0}, p95 {:.0}; \
         {} of contexts use at least 90 % of the budget; units per context median {:.0} (of which dependencies {:.0}).",
        tokens.median,
        tokens.mean,
        tokens.p95,
        pct(full, tasks.len()),
        units.median,
        deps.median
    );
    let precision_ctx = {
        let per: Vec<f64> = tasks
            .iter()
            .filter(|t| t.context_units > 0)
            .map(|t| t.needed.iter().filter(|n| n.in_context).count() as f64 / t.context_units as f64)
            .collect();
        mean(per.into_iter())
    };
    let _ = writeln!(out, "Share of the context's units that are needed units (mean per task): {}.", f3(precision_ctx));
    // Latency.
    let lat = stats(&tasks.iter().map(|t| t.latency_ms).collect::<Vec<_>>());
    let _ = writeln!(
        out,
        "\n**Latency** of `context NAME budget {budget} k 50` in-process (lanes included, query embedding included): \
         median {}, p95 {}, max {} (n = {}).",
        ms(lat.median),
        ms(lat.p95),
        ms(lat.max),
        lat.n
    );
    let stage_names = ["bm25 search", "dense: embed the query + search", "graph lane"];
    let parts: Vec<String> = stage_names
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let st = stats(&tasks.iter().map(|t| t.stage_ms[i]).collect::<Vec<_>>());
            format!("{s} median {}", ms(st.median))
        })
        .collect();
    let _ = writeln!(
        out,
        "Each stage timed alone right after: {}; the rest is fusion and context assembly.",
        parts.join(", ")
    );
    let mut statuses: BTreeMap<String, usize> = BTreeMap::new();
    for t in tasks {
        for (lane, s) in &t.lane_status {
            *statuses.entry(format!("{lane}: {s}")).or_default() += 1;
        }
    }
    let st: Vec<String> = statuses.iter().map(|(k, v)| format!("{k} ×{v}")).collect();
    let _ = writeln!(out, "Lane status in the answers: {}.", st.join(", "));
}

/// Recall against k per lane: axes, one polyline per list, a legend and the two recall targets.
pub fn svg(tasks: &[TaskResult], title: &str) -> String {
    let (w, h) = (760.0, 420.0);
    let (left, right, top, bottom) = (70.0, 560.0, 50.0, 360.0);
    let kmax = *KS.last().unwrap() as f64;
    let x = |k: f64| left + (right - left) * k.ln() / kmax.ln();
    let y = |r: f64| bottom - (bottom - top) * r;
    let colors = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728"];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="24" font-size="15" text-anchor="middle">{}</text>"#,
        (left + right) / 2.0,
        escape(title)
    );
    // Grid and y axis.
    for i in 0..=5 {
        let r = i as f64 / 5.0;
        let _ = writeln!(s, r##"<line x1="{left}" y1="{0:.1}" x2="{right}" y2="{0:.1}" stroke="#ddd"/>"##, y(r));
        let _ = writeln!(s, r#"<text x="{}" y="{:.1}" text-anchor="end">{r:.1}</text>"#, left - 8.0, y(r) + 4.0);
    }
    for k in KS {
        let xk = x(k as f64);
        let _ = writeln!(s, r##"<line x1="{xk:.1}" y1="{top}" x2="{xk:.1}" y2="{bottom}" stroke="#eee"/>"##);
        let _ = writeln!(s, r#"<text x="{xk:.1}" y="{}" text-anchor="middle">{k}</text>"#, bottom + 18.0);
    }
    let _ = writeln!(s, r#"<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>"#);
    let _ = writeln!(s, r#"<line x1="{left}" y1="{top}" x2="{left}" y2="{bottom}" stroke="black"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">k (log scale)</text>"#,
        (left + right) / 2.0,
        bottom + 40.0
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{0}" text-anchor="middle" transform="rotate(-90 20 {0})">Recall@k (mean over tasks)</text>"#,
        (top + bottom) / 2.0
    );
    // Targets.
    for (k, r) in [(10.0, 0.75), (50.0, 0.9)] {
        let (px, py) = (x(k), y(r));
        let _ = writeln!(
            s,
            r##"<path d="M{:.1} {:.1} L{:.1} {:.1} M{:.1} {:.1} L{:.1} {:.1}" stroke="#555" stroke-width="2"/>"##,
            px - 5.0,
            py - 5.0,
            px + 5.0,
            py + 5.0,
            px - 5.0,
            py + 5.0,
            px + 5.0,
            py - 5.0
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" fill="#555" text-anchor="end">target {r}</text>"##,
            px - 8.0,
            py - 6.0
        );
    }
    // Lines.
    for (i, name) in LISTS.iter().enumerate() {
        let points: Vec<(f64, f64)> = KS.iter().map(|&k| (x(k as f64), y(mean_recall(tasks, i, k)))).collect();
        let pts: Vec<String> = points.iter().map(|(a, b)| format!("{a:.1},{b:.1}")).collect();
        let width = if *name == "fused" { 3 } else { 2 };
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="{width}"/>"#,
            pts.join(" "),
            colors[i]
        );
        for (a, b) in points {
            let _ = writeln!(s, r#"<circle cx="{a:.1}" cy="{b:.1}" r="3" fill="{}"/>"#, colors[i]);
        }
    }
    // Legend.
    let lx = right + 30.0;
    let _ = writeln!(
        s,
        r##"<rect x="{}" y="{top}" width="160" height="{}" fill="white" stroke="#999"/>"##,
        lx - 10.0,
        24.0 * 4.0 + 36.0
    );
    for (i, name) in LISTS.iter().enumerate() {
        let ly = top + 20.0 + 24.0 * i as f64;
        let r50 = mean_recall(tasks, i, 50);
        let _ = writeln!(
            s,
            r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="3"/>"#,
            lx + 24.0,
            colors[i]
        );
        let _ = writeln!(s, r#"<text x="{}" y="{}">{name} (R@50 {r50:.2})</text>"#, lx + 32.0, ly + 4.0);
    }
    let ly = top + 20.0 + 24.0 * 4.0;
    let _ = writeln!(s, r##"<text x="{lx}" y="{}" fill="#555">× targets (fused)</text>"##, ly + 4.0);
    s.push_str("</svg>\n");
    s
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}
