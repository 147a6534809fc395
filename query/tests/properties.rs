//! Property tests of the query executor against independent computations over the same snapshot:
//!
//! (a) `callers` and `callees` (depth 1) are inverse relations, and each equals the raw call edges;
//! (b) `impact X` (depth *) is exactly reverse reachability over calls, references, inherits and
//!     imports edges, computed with petgraph, and every row's `depth` is the BFS distance;
//! (c) `path A -> B` rows are valid walks over edges of the used kinds (with the reported lines),
//!     are shortest (petgraph's distance), are all the shortest paths up to the bound, and are
//!     empty when B is unreachable from A.
//!
//! Snapshots come from generated Python packages (a deterministic xorshift generator, several
//! seeds) and from the requests corpus (`../shared/corpus/fetch requests`).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use fresco_graph::{EdgeKind, Snapshot};
use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::{Context, Item, Limits, Output};
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::Bfs;

// ---------------------------------------------------------------------------------------------
// A tiny deterministic generator.

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() { None } else { Some(&items[self.below(items.len())]) }
    }
}

// ---------------------------------------------------------------------------------------------
// Generated repositories.

struct Module {
    dotted: String,
    path: String,
    funcs: Vec<String>,
    /// Class name and its method names.
    classes: Vec<(String, Vec<String>)>,
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
    std::fs::write(p, text).expect("write");
}

/// A class usable in a module: the expression naming it, its methods, and (for a class of the
/// module itself) its position, so that a class only inherits from classes defined before it.
struct ClassRef {
    expr: String,
    methods: Vec<String>,
    local: Option<usize>,
}

fn module_text(rng: &mut Rng, mods: &[Module], me: usize) -> String {
    let this = &mods[me];
    let mut text = String::from("import os\n");
    let mut callables: Vec<String> = this.funcs.clone();
    let mut classes: Vec<ClassRef> = this
        .classes
        .iter()
        .enumerate()
        .map(|(j, (c, ms))| ClassRef { expr: c.clone(), methods: ms.clone(), local: Some(j) })
        .collect();
    let this_parent = this.dotted.rsplit_once('.').expect("dotted").0;
    for _ in 0..rng.below(6) {
        let k = rng.below(mods.len());
        if k == me {
            continue;
        }
        let other = &mods[k];
        let (parent, leaf) = other.dotted.rsplit_once('.').expect("dotted");
        let prefix = match rng.below(6) {
            0 => {
                text.push_str(&format!("import {}\n", other.dotted));
                other.dotted.clone()
            }
            1 => {
                text.push_str(&format!("from {parent} import {leaf}\n"));
                leaf.to_string()
            }
            2 => {
                let alias = format!("{leaf}_mod");
                text.push_str(&format!("import {} as {alias}\n", other.dotted));
                alias
            }
            3 if parent == this_parent => {
                text.push_str(&format!("from . import {leaf}\n"));
                leaf.to_string()
            }
            _ => {
                // Names imported from the module, under aliases so they never shadow local names.
                let f = rng.pick(&other.funcs).expect("a module has functions").clone();
                let alias = format!("{leaf}_{f}");
                text.push_str(&format!("from {} import {f} as {alias}\n", other.dotted));
                callables.push(alias);
                if let Some((c, ms)) = rng.pick(&other.classes) {
                    let alias = format!("{leaf}_{c}");
                    text.push_str(&format!("from {} import {c} as {alias}\n", other.dotted));
                    classes.push(ClassRef { expr: alias, methods: ms.clone(), local: None });
                }
                continue;
            }
        };
        callables.extend(other.funcs.iter().map(|f| format!("{prefix}.{f}")));
        classes.extend(other.classes.iter().map(|(c, ms)| ClassRef {
            expr: format!("{prefix}.{c}"),
            methods: ms.clone(),
            local: None,
        }));
    }
    if rng.below(3) == 0 {
        let target = rng.pick(&callables).expect("callables").clone();
        text.push_str(&format!("\nHANDLER = {target}\n"));
    }
    let statement = |rng: &mut Rng, indent: &str, own: &str| -> String {
        match rng.below(6) {
            0 | 1 => format!("{indent}{}(x)\n", rng.pick(&callables).expect("callables")),
            2 => format!("{indent}y = {}\n", rng.pick(&callables).expect("callables")),
            3 => match rng.pick(&classes) {
                Some(c) => {
                    let m = rng.pick(&c.methods).expect("methods");
                    format!("{indent}{}().{m}()\n", c.expr)
                }
                None => format!("{indent}os.path.join('a', 'b')\n"),
            },
            4 => format!("{indent}os.path.join('a', 'b')\n"),
            _ => format!("{indent}{own}(x)\n"),
        }
    };
    for f in &this.funcs {
        // Now and then defined twice (`f`, then `f#2`, the one calls reach): a plain name then
        // selects both definitions.
        for _ in 0..if rng.below(4) == 0 { 2 } else { 1 } {
            text.push_str(&format!("\n\ndef {f}(x=None):\n"));
            for _ in 0..rng.below(5) {
                let s = statement(rng, "    ", f);
                text.push_str(&s);
            }
            text.push_str("    return None\n");
        }
    }
    for (j, (c, methods)) in this.classes.iter().enumerate() {
        let bases: Vec<&ClassRef> = classes.iter().filter(|b| b.local.is_none_or(|l| l < j)).collect();
        let base = match rng.below(3) {
            0 => String::new(),
            1 => match rng.pick(&bases) {
                Some(b) => format!("({})", b.expr),
                None => String::new(),
            },
            _ => "(Exception)".to_string(),
        };
        text.push_str(&format!("\n\nclass {c}{base}:\n"));
        for m in methods {
            text.push_str(&format!("    def {m}(self, x=None):\n"));
            for _ in 0..rng.below(4) {
                let s = match rng.below(3) {
                    0 => format!("        self.{}()\n", rng.pick(methods).expect("methods")),
                    _ => statement(rng, "        ", "os.getcwd"),
                };
                text.push_str(&s);
            }
            text.push_str("        return None\n");
        }
    }
    text
}

/// Writes a generated package of 30 to 60 modules under `root`.
fn generate(seed: u64, root: &Path) {
    let mut rng = Rng::new(seed);
    let n = 30 + rng.below(31);
    let mut mods = Vec::new();
    for i in 0..n {
        let (dotted, path) = if rng.below(3) == 0 {
            (format!("gen.sub.m{i}"), format!("gen/sub/m{i}.py"))
        } else {
            (format!("gen.m{i}"), format!("gen/m{i}.py"))
        };
        let funcs = (0..1 + rng.below(5)).map(|j| format!("f{j}")).collect();
        let classes = (0..rng.below(3))
            .map(|j| (format!("C{j}"), (0..1 + rng.below(3)).map(|k| format!("meth{k}")).collect()))
            .collect();
        mods.push(Module { dotted, path, funcs, classes });
    }
    write(root, "gen/__init__.py", "def pkg_helper():\n    return None\n");
    write(root, "gen/sub/__init__.py", "from gen import pkg_helper\n");
    for i in 0..n {
        let text = module_text(&mut rng, &mods, i);
        write(root, &mods[i].path, &text);
    }
}

fn index(root: &Path) -> Snapshot {
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 2, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    indexer.snapshot().clone()
}

/// The requests corpus (downloaded on first use by the shared corpus script).
fn corpus(name: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/corpus/fetch");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .arg(name)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(out.status.success(), "corpus fetch failed: {}", String::from_utf8_lossy(&out.stderr));
    let root = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_string();
    assert!(!root.is_empty(), "corpus fetch printed no path");
    PathBuf::from(root)
}

// ---------------------------------------------------------------------------------------------
// Running queries.

fn context(snapshot: &Snapshot) -> Context<'_> {
    let mut ctx = Context::new(snapshot);
    ctx.limits = Limits { max_results: 1_000_000, timeout: Duration::from_secs(600) };
    ctx
}

/// Whether an id can be written as a quoted symbol that parses back to the same name.
fn quotable(id: &str) -> bool {
    !id.contains(['"', '\'', '\\', '*', '?', '[', ':'])
}

fn run(ctx: &Context, text: &str) -> Output {
    fresco_query::run(ctx, text).unwrap_or_else(|e| panic!("query {text:?} failed: {e}"))
}

fn names(out: &Output) -> BTreeSet<String> {
    out.results.iter().map(|r| r.name.clone()).collect()
}

/// The definitions a name selects: itself, then `#2`, `#3`, … while they exist (a suffixed id
/// selects itself alone). Written here independently of the executor's own lookup.
fn definitions_of(snapshot: &Snapshot, id: &str) -> Vec<String> {
    let mut out = vec![id.to_string()];
    if !id.contains('#') {
        out.extend((2..).map(|n| format!("{id}#{n}")).take_while(|d| snapshot.contains_unit(d)));
    }
    out
}

/// Whether the name selects one definition only.
fn single(snapshot: &Snapshot, id: &str) -> bool {
    definitions_of(snapshot, id).len() == 1
}

/// Every edge of the snapshot, for membership checks.
type EdgeSet = HashSet<(String, String, EdgeKind, Option<u32>)>;

fn edge_set(snapshot: &Snapshot) -> EdgeSet {
    snapshot.edges().map(|(e, _)| (e.src.to_string(), e.dst.to_string(), e.kind, e.line)).collect()
}

/// The snapshot's edges of some kinds as a petgraph graph, built from `Snapshot::edges()` only
/// (not from the per-unit indexes the executor uses), optionally reversed.
struct Graph {
    g: DiGraph<String, EdgeKind>,
    index: HashMap<String, NodeIndex>,
}

impl Graph {
    fn new(snapshot: &Snapshot, kinds: &[EdgeKind], reversed: bool) -> Graph {
        let mut g = DiGraph::new();
        let mut index: HashMap<String, NodeIndex> = HashMap::new();
        for (e, _) in snapshot.edges() {
            if !kinds.contains(&e.kind) {
                continue;
            }
            let mut node = |id: &str| *index.entry(id.to_string()).or_insert_with(|| g.add_node(id.to_string()));
            let (a, b) = (node(&e.src), node(&e.dst));
            if reversed {
                g.add_edge(b, a, e.kind)
            } else {
                g.add_edge(a, b, e.kind)
            };
        }
        Graph { g, index }
    }

    /// What `impact` walks: [`IMPACT_KINDS`] reversed, and a module also reached back from each
    /// import of a name defined in it (`from m import f` imports from `m`).
    fn impact(snapshot: &Snapshot) -> Graph {
        let mut graph = Graph::new(snapshot, &IMPACT_KINDS, true);
        for (_, src, module) in name_imports(snapshot) {
            let mut node =
                |id: &str| *graph.index.entry(id.to_string()).or_insert_with(|| graph.g.add_node(id.to_string()));
            let (a, b) = (node(&src), node(&module));
            graph.g.add_edge(b, a, EdgeKind::Imports);
        }
        graph
    }

    /// Whether `id` has an edge to itself (a recursive call): a traversal from it lists it at
    /// depth 1.
    fn has_self_loop(&self, id: &str) -> bool {
        self.index.get(id).is_some_and(|&n| self.g.contains_edge(n, n))
    }

    /// Distances (in edges) from `start` to every node reachable from it, by BFS.
    fn distances(&self, start: &str) -> HashMap<String, u32> {
        let Some(&s) = self.index.get(start) else { return HashMap::new() };
        let dist = petgraph::algo::dijkstra(&self.g, s, None, |_| 1u32);
        // Cross-check against a plain petgraph BFS: same reachable set.
        let mut bfs = Bfs::new(&self.g, s);
        let mut reached = HashSet::new();
        while let Some(n) = bfs.next(&self.g) {
            reached.insert(n);
        }
        assert_eq!(reached.len(), dist.len(), "BFS and dijkstra disagree on reachability from {start}");
        dist.into_iter().map(|(n, d)| (self.g[n].clone(), d)).collect()
    }

    /// The number of distinct shortest node sequences from `start` to every reachable node.
    fn shortest_path_counts(&self, start: &str, dist: &HashMap<String, u32>) -> HashMap<String, u64> {
        let mut order: Vec<(&String, u32)> = dist.iter().map(|(k, &d)| (k, d)).collect();
        order.sort_by_key(|&(_, d)| d);
        let mut count: HashMap<String, u64> = HashMap::new();
        count.insert(start.to_string(), 1);
        for (id, d) in order {
            if d == 0 {
                continue;
            }
            let n = self.index[id];
            let preds: BTreeSet<NodeIndex> = self.g.neighbors_directed(n, petgraph::Direction::Incoming).collect();
            let mut c = 0u64;
            for p in preds {
                if dist.get(&self.g[p]) == Some(&(d - 1)) {
                    c = c.saturating_add(count.get(&self.g[p]).copied().unwrap_or(0));
                }
            }
            count.insert(id.clone(), c);
        }
        count
    }
}

// ---------------------------------------------------------------------------------------------
// (a) callers and callees are inverse, and match the raw call edges.

fn check_callers_callees(label: &str, snapshot: &Snapshot) -> usize {
    let ctx = context(snapshot);
    let edges = edge_set(snapshot);
    let mut out_calls: HashMap<&str, BTreeSet<String>> = HashMap::new();
    let mut in_calls: HashMap<&str, BTreeSet<String>> = HashMap::new();
    for (e, _) in snapshot.edges() {
        // A recursive call too: a unit is its own caller and callee.
        if e.kind == EdgeKind::Calls {
            out_calls.entry(&e.src).or_default().insert(e.dst.to_string());
            in_calls.entry(&e.dst).or_default().insert(e.src.to_string());
        }
    }
    // A plain name selects every definition of it (`X`, `X#2`, …): a query on it starts from each.
    let check_rows = |q: &str, out: &Output, start: &str, backward: bool| {
        assert!(!out.truncated, "{label}: {q} truncated");
        let starts = definitions_of(snapshot, start);
        for r in &out.results {
            assert_eq!(r.depth, Some(1), "{label}: {q}: row {r:?}");
            assert_eq!(r.via, Some("calls"), "{label}: {q}: row {r:?}");
            let from = r.from.clone().unwrap_or_default();
            assert!(starts.contains(&from), "{label}: {q}: row {r:?} starts from none of {starts:?}");
            let (src, dst) = if backward { (r.name.clone(), from) } else { (from, r.name.clone()) };
            assert!(
                edges.contains(&(src.clone(), dst.clone(), EdgeKind::Calls, r.line)),
                "{label}: {q}: no calls edge {src} -> {dst} at line {:?}",
                r.line
            );
        }
    };

    let units: Vec<String> = snapshot.units().map(|u| u.unit.id.clone()).filter(|id| quotable(id)).collect();
    let mut callees: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut callers: HashMap<String, BTreeSet<String>> = HashMap::new();
    let mut queries = 0;
    for x in &units {
        let q = format!("callees \"{x}\"");
        let out = run(&ctx, &q);
        queries += 1;
        check_rows(&q, &out, x, false);
        let got = names(&out);
        let want: BTreeSet<String> = definitions_of(snapshot, x)
            .iter()
            .flat_map(|d| out_calls.get(d.as_str()).cloned().unwrap_or_default())
            .collect();
        assert_eq!(got, want, "{label}: {q} differs from the raw call edges");
        callees.insert(x.clone(), got);
    }
    let mut targets: BTreeSet<String> = units.iter().cloned().collect();
    targets.extend(callees.values().flatten().filter(|id| quotable(id)).cloned());
    for y in &targets {
        let q = format!("callers \"{y}\"");
        let out = match fresco_query::run(&ctx, &q) {
            Ok(out) => out,
            Err(e) => {
                let callers_of: Vec<&String> =
                    callees.iter().filter(|(_, ys)| ys.contains(y)).map(|(x, _)| x).collect();
                panic!("{label}: {q} failed ({e}) although `callees` of {callers_of:?} returned {y}");
            }
        };
        queries += 1;
        check_rows(&q, &out, y, true);
        let got = names(&out);
        let want: BTreeSet<String> = definitions_of(snapshot, y)
            .iter()
            .flat_map(|d| in_calls.get(d.as_str()).cloned().unwrap_or_default())
            .collect();
        assert_eq!(got, want, "{label}: {q} differs from the raw call edges");
        callers.insert(y.clone(), got);
    }
    // The inverse property itself, up to the definitions a plain name selects.
    let any_of = |set: &BTreeSet<String>, id: &str| definitions_of(snapshot, id).iter().any(|d| set.contains(d));
    for (x, ys) in &callees {
        for y in ys.iter().filter(|y| quotable(y)) {
            assert!(any_of(&callers[y], x), "{label}: {y} is a callee of {x}, but {x} is not among `callers {y}`");
        }
    }
    for (y, xs) in &callers {
        for x in xs.iter().filter(|x| quotable(x)) {
            let of_x = callees.get(x).unwrap_or_else(|| panic!("{label}: caller {x} of {y} is not a unit"));
            assert!(any_of(of_x, y), "{label}: {x} is a caller of {y}, but {y} is not among `callees {x}`");
        }
    }
    queries
}

// ---------------------------------------------------------------------------------------------
// (b) impact is reverse reachability, with BFS depths.

/// Each import of a name defined in another module (not the module itself): (its line, the
/// importing unit, the module defining the name).
fn name_imports(snapshot: &Snapshot) -> Vec<(Option<u32>, String, String)> {
    let mut out = Vec::new();
    for (e, _) in snapshot.edges() {
        if e.kind != EdgeKind::Imports {
            continue;
        }
        let Some(dst) = snapshot.unit(&e.dst) else { continue };
        let Some(module) = dst.file.graph.units.first() else { continue };
        if *module.id != *e.dst && *module.id != *e.src {
            out.push((e.line, e.src.to_string(), module.id.clone()));
        }
    }
    out
}

const IMPACT_KINDS: [EdgeKind; 4] = [EdgeKind::Calls, EdgeKind::References, EdgeKind::Inherits, EdgeKind::Imports];

fn check_impact(label: &str, snapshot: &Snapshot, sample: Option<usize>) -> usize {
    let ctx = context(snapshot);
    let edges = edge_set(snapshot);
    let reversed = Graph::impact(snapshot);
    let imports_from_module: HashSet<(String, String, Option<u32>)> =
        name_imports(snapshot).into_iter().map(|(line, src, module)| (src, module, line)).collect();
    // Names that select one definition: reachability here is from a single node.
    let mut units: Vec<String> =
        snapshot.units().map(|u| u.unit.id.clone()).filter(|id| quotable(id) && single(snapshot, id)).collect();
    if let Some(n) = sample {
        // Every unit with many incoming edges, then a deterministic spread of the rest.
        let mut rng = Rng::new(units.len() as u64);
        units.sort_by_key(|id| std::cmp::Reverse(reversed.index.get(id).map_or(0, |&n| reversed.g.edges(n).count())));
        let (hubs, rest) = units.split_at(n.min(units.len()) / 2);
        let mut picked = hubs.to_vec();
        let rest: Vec<String> = rest.to_vec();
        while picked.len() < n.min(units.len()) {
            picked.push(rest[rng.below(rest.len())].clone());
        }
        units = picked;
    }
    let mut nonempty = 0;
    for x in &units {
        let q = format!("impact \"{x}\" depth *");
        let out = run(&ctx, &q);
        assert!(!out.truncated, "{label}: {q} truncated");
        let mut want = reversed.distances(x);
        want.remove(x);
        if reversed.has_self_loop(x) {
            want.insert(x.clone(), 1);
        }
        let got: BTreeMap<String, &Item> = out.results.iter().map(|r| (r.name.clone(), r)).collect();
        assert_eq!(got.len(), out.results.len(), "{label}: {q} lists a unit twice");
        let got_set: BTreeSet<&String> = got.keys().collect();
        let want_set: BTreeSet<&String> = want.keys().collect();
        if got_set != want_set {
            let missing: Vec<_> = want_set.difference(&got_set).take(10).collect();
            let extra: Vec<_> = got_set.difference(&want_set).take(10).collect();
            panic!("{label}: {q} is not reverse reachability: missing {missing:?}, extra {extra:?}");
        }
        for (id, r) in &got {
            assert_eq!(r.depth, Some(want[id.as_str()]), "{label}: {q}: depth of {id} is not its BFS distance");
            // Each row is reached over a real edge from a row one step closer (or from X).
            let from = r.from.as_deref().expect("from");
            let kind = EdgeKind::parse(r.via.expect("via")).expect("edge kind");
            assert!(IMPACT_KINDS.contains(&kind), "{label}: {q}: via {kind:?}");
            assert!(
                edges.contains(&(id.to_string(), from.to_string(), kind, r.line))
                    || (kind == EdgeKind::Imports
                        && imports_from_module.contains(&(id.to_string(), from.to_string(), r.line))),
                "{label}: {q}: no {kind:?} edge {id} -> {from} (or to a name defined in it) at line {:?}",
                r.line
            );
            // Every further site listed is an edge between the same two units.
            for line in &r.also_at {
                assert!(
                    IMPACT_KINDS.iter().any(|k| edges.contains(&(id.to_string(), from.to_string(), *k, Some(*line))))
                        || imports_from_module.contains(&(id.to_string(), from.to_string(), Some(*line))),
                    "{label}: {q}: also_at {line} of {id} -> {from} is no edge"
                );
            }
            let from_depth = if from == x { 0 } else { want[from] };
            assert_eq!(
                from_depth + 1,
                want[id.as_str()],
                "{label}: {q}: {id} reached from {from}, not one step closer"
            );
        }
        if !got.is_empty() {
            nonempty += 1;
        }
    }
    assert!(nonempty > 0, "{label}: every impact set was empty; the test is vacuous");
    units.len()
}

// ---------------------------------------------------------------------------------------------
// (c) paths are valid, shortest, complete up to the bound, and empty when there is none.

const MAX_PATHS: usize = 10;

struct PathCheck<'s> {
    label: &'s str,
    ctx: Context<'s>,
    edges: EdgeSet,
    found: usize,
    none: usize,
}

impl PathCheck<'_> {
    fn check(
        &mut self,
        graph: &Graph,
        a: &str,
        b: &str,
        kinds: &[EdgeKind],
        dist: &HashMap<String, u32>,
        counts: &HashMap<String, u64>,
    ) {
        let label = self.label;
        let via = if kinds == [EdgeKind::Calls] {
            String::new()
        } else {
            format!(" via {}", kinds.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", "))
        };
        let q = format!("path \"{a}\" -> \"{b}\"{via}");
        let out = run(&self.ctx, &q);
        let Some(&d) = dist.get(b) else {
            assert!(
                out.results.is_empty(),
                "{label}: {q}: petgraph finds no path, the query returned {:?}",
                out.results
            );
            assert!(!out.truncated, "{label}: {q}: empty and truncated");
            self.none += 1;
            return;
        };
        let _ = graph;
        let mut groups: BTreeMap<usize, Vec<&Item>> = BTreeMap::new();
        for r in &out.results {
            groups.entry(r.group.expect("path rows have a group")).or_default().push(r);
        }
        assert!(!groups.is_empty(), "{label}: {q}: petgraph finds a path of length {d}, the query none");
        let mut distinct = HashSet::new();
        for (g, rows) in &groups {
            assert_eq!(
                rows.len() as u32,
                d + 1,
                "{label}: {q}: path {g} has {} steps, the shortest has {d}",
                rows.len() - 1
            );
            assert_eq!(rows[0].name, a, "{label}: {q}: path {g} does not start at {a}");
            assert_eq!(rows[0].depth, Some(0));
            assert_eq!(rows[0].via, None);
            assert_eq!(rows.last().expect("rows").name, b, "{label}: {q}: path {g} does not end at {b}");
            for k in 1..rows.len() {
                let (prev, r) = (rows[k - 1], rows[k]);
                assert_eq!(r.depth, Some(k as u32), "{label}: {q}: path {g} step {k}");
                assert_eq!(r.from.as_deref(), Some(prev.name.as_str()), "{label}: {q}: path {g} step {k}: from");
                let kind = EdgeKind::parse(r.via.expect("via")).expect("edge kind");
                assert!(kinds.contains(&kind), "{label}: {q}: path {g} step {k} uses {kind:?}");
                assert!(
                    self.edges.contains(&(prev.name.clone(), r.name.clone(), kind, r.line)),
                    "{label}: {q}: path {g} step {k}: no {kind:?} edge {} -> {} at line {:?}",
                    prev.name,
                    r.name,
                    r.line
                );
            }
            // A path is a sequence of units, whatever edges join them.
            let walk: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
            assert!(distinct.insert(walk), "{label}: {q}: path {g} is listed twice");
        }
        // Every distinct shortest unit sequence, up to the bound, with one kind or several.
        let total = counts[b];
        let expected = (total as usize).min(MAX_PATHS);
        assert_eq!(groups.len(), expected, "{label}: {q}: {total} shortest paths exist");
        assert_eq!(
            out.truncated,
            total as usize > MAX_PATHS,
            "{label}: {q}: {total} shortest paths exist; truncated = {}",
            out.truncated
        );
        self.found += 1;
    }
}

fn check_paths(label: &str, snapshot: &Snapshot, sources: usize, seed: u64) -> (usize, usize) {
    let mut check = PathCheck { label, ctx: context(snapshot), edges: edge_set(snapshot), found: 0, none: 0 };
    let mut rng = Rng::new(seed);
    let all_kinds = [EdgeKind::Calls, EdgeKind::References, EdgeKind::Inherits, EdgeKind::Imports];
    for kinds in [&[EdgeKind::Calls][..], &all_kinds[..]] {
        let graph = Graph::new(snapshot, kinds, false);
        // Names that select one definition: paths here run between single nodes.
        let units: Vec<String> =
            snapshot.units().map(|u| u.unit.id.clone()).filter(|id| quotable(id) && single(snapshot, id)).collect();
        // A deterministic shuffle of the units that have edges of these kinds.
        let mut starts: Vec<(u64, &String)> =
            units.iter().filter(|id| graph.index.contains_key(*id)).map(|id| (rng.next(), id)).collect();
        starts.sort();
        for (_, a) in starts.into_iter().take(sources) {
            let dist = graph.distances(a);
            let counts = graph.shortest_path_counts(a, &dist);
            let mut reachable: Vec<(&String, u32)> = dist
                .iter()
                .filter(|(b, d)| **d > 0 && quotable(b) && single(snapshot, b))
                .map(|(b, &d)| (b, d))
                .collect();
            reachable.sort();
            // The farthest target, the one with the most shortest paths, and a random one.
            let mut targets: Vec<String> = Vec::new();
            if let Some((b, _)) = reachable.iter().max_by_key(|(b, d)| (*d, std::cmp::Reverse(*b))) {
                targets.push(b.to_string());
            }
            if let Some((b, _)) = reachable.iter().max_by_key(|(b, _)| (counts[*b], std::cmp::Reverse(*b))) {
                targets.push(b.to_string());
            }
            if let Some((b, _)) = rng.pick(&reachable) {
                targets.push(b.to_string());
            }
            // And two units that cannot be reached.
            for _ in 0..2 {
                let b = &units[rng.below(units.len())];
                if b != a && !dist.contains_key(b) {
                    targets.push(b.clone());
                }
            }
            for b in &targets {
                check.check(&graph, a, b, kinds, &dist, &counts);
            }
        }
    }
    assert!(
        check.found > 0 && check.none > 0,
        "{label}: paths found {}, no-path cases {}: the test is vacuous",
        check.found,
        check.none
    );
    (check.found, check.none)
}

// ---------------------------------------------------------------------------------------------
// The tests.

const SEEDS: [u64; 5] = [1, 2, 3, 7, 42];

fn generated(seed: u64) -> (tempfile::TempDir, Snapshot) {
    let dir = tempfile::tempdir().expect("tempdir");
    generate(seed, dir.path());
    let snapshot = index(dir.path());
    let t = snapshot.totals();
    assert!(t.files >= 30 && t.edges > 100, "seed {seed}: the generated repo is too small: {t:?}");
    (dir, snapshot)
}

#[test]
fn callers_and_callees_are_inverse_on_generated_repos() {
    for seed in SEEDS {
        let (_dir, snapshot) = generated(seed);
        let queries = check_callers_callees(&format!("seed {seed}"), &snapshot);
        eprintln!("seed {seed}: {:?}; {queries} callers/callees queries", snapshot.totals());
    }
}

#[test]
fn impact_is_reverse_reachability_on_generated_repos() {
    for seed in SEEDS {
        let (_dir, snapshot) = generated(seed);
        let n = check_impact(&format!("seed {seed}"), &snapshot, None);
        eprintln!("seed {seed}: {n} impact queries");
    }
}

/// `find "*" in FILE | impact depth *`: every unit reachable from an input is a row at its least
/// depth from any input; an input is a row exactly when another input reaches it, at its least
/// depth from the others, or itself through its edge to itself. Generated repositories import in cycles, where an input's own wave
/// reaches the units between it and another input first.
fn check_piped_impact(label: &str, snapshot: &Snapshot) -> usize {
    let ctx = context(snapshot);
    let reversed = Graph::impact(snapshot);
    let mut files: Vec<String> = snapshot.files().map(|f| f.graph.path.clone()).collect();
    files.sort();
    let mut inputs_reached = 0;
    for file in &files {
        let inputs: Vec<String> =
            run(&ctx, &format!("find \"*\" in \"{file}\"")).results.into_iter().map(|r| r.name).collect();
        let from_each: Vec<HashMap<String, u32>> = inputs.iter().map(|x| reversed.distances(x)).collect();
        let mut want: BTreeMap<String, u32> = BTreeMap::new();
        for (i, dist) in from_each.iter().enumerate() {
            for (id, &d) in dist {
                let other_input = inputs.iter().position(|x| x == id).is_some_and(|j| j != i);
                if d > 0 && (other_input || !inputs.contains(id)) {
                    want.entry(id.clone()).and_modify(|w| *w = (*w).min(d)).or_insert(d);
                }
            }
        }
        for x in inputs.iter().filter(|x| reversed.has_self_loop(x)) {
            want.insert(x.clone(), 1);
        }
        let q = format!("find \"*\" in \"{file}\" | impact depth *");
        let out = run(&ctx, &q);
        assert!(!out.truncated, "{label}: {q} truncated");
        let got: BTreeMap<String, u32> =
            out.results.iter().map(|r| (r.name.clone(), r.depth.expect("a traversal row has a depth"))).collect();
        assert_eq!(got.len(), out.results.len(), "{label}: {q} lists a unit twice");
        if got != want {
            let wrong: Vec<_> = want.iter().filter(|(id, d)| got.get(*id) != Some(d)).take(10).collect();
            let extra: Vec<_> = got.keys().filter(|id| !want.contains_key(*id)).take(10).collect();
            panic!(
                "{label}: {q}: rows missing or at the wrong depth {wrong:?} (got {:?}), extra {extra:?}",
                wrong.iter().map(|(id, _)| got.get(*id)).collect::<Vec<_>>()
            );
        }
        inputs_reached += want.keys().filter(|id| inputs.contains(id)).count();
    }
    assert!(inputs_reached > 0, "{label}: no input reached another; the test is vacuous");
    inputs_reached
}

#[test]
fn piped_impact_finds_inputs_behind_other_inputs_on_generated_repos() {
    for seed in SEEDS {
        let (_dir, snapshot) = generated(seed);
        let n = check_piped_impact(&format!("seed {seed}"), &snapshot);
        eprintln!("seed {seed}: {n} inputs reached by other inputs");
    }
}

#[test]
fn paths_are_shortest_valid_walks_on_generated_repos() {
    for seed in SEEDS {
        let (_dir, snapshot) = generated(seed);
        let (found, none) = check_paths(&format!("seed {seed}"), &snapshot, 30, seed);
        eprintln!("seed {seed}: {found} paths found, {none} without a path");
    }
}

#[test]
fn properties_hold_on_requests() {
    let root = corpus("requests");
    let snapshot = index(&root);
    assert!(snapshot.totals().files > 20, "requests indexed too few files: {:?}", snapshot.totals());
    let queries = check_callers_callees("requests", &snapshot);
    let impacts = check_impact("requests", &snapshot, Some(150));
    let (found, none) = check_paths("requests", &snapshot, 40, 99);
    eprintln!(
        "requests: {:?}; {queries} callers/callees, {impacts} impact, {found} + {none} path queries",
        snapshot.totals()
    );
}

/// The bound on the number of shortest paths is exact: with 9, 10 and 11 disjoint shortest paths
/// (a -> bI -> c), all of them are listed up to 10, and only more than 10 is reported truncated.
#[test]
fn path_bound_is_exact() {
    for n in [1usize, 9, 10, 11, 25] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut text = String::from("def c():\n    return None\n\n\ndef a():\n");
        for i in 0..n {
            text.push_str(&format!("    b{i}()\n"));
        }
        for i in 0..n {
            text.push_str(&format!("\n\ndef b{i}():\n    return c()\n"));
        }
        write(dir.path(), "fan.py", &text);
        let snapshot = index(dir.path());
        let graph = Graph::new(&snapshot, &[EdgeKind::Calls], false);
        let dist = graph.distances("fan.a");
        let counts = graph.shortest_path_counts("fan.a", &dist);
        assert_eq!(counts["fan.c"], n as u64, "the fixture should have {n} shortest paths");
        let mut check =
            PathCheck { label: "fan", ctx: context(&snapshot), edges: edge_set(&snapshot), found: 0, none: 0 };
        check.check(&graph, "fan.a", "fan.c", &[EdgeKind::Calls], &dist, &counts);
        check.check(&graph, "fan.c", "fan.a", &[EdgeKind::Calls], &graph.distances("fan.c"), &HashMap::new());
        assert_eq!((check.found, check.none), (1, 1));
    }
}

/// A traversal fed by a pipe lists a row that is also one of its inputs when another input
/// reaches it (`Engine` subclasses `Base`, both are classes), but a start is never listed as
/// reached from itself.
#[test]
fn piped_traversals_keep_inputs_that_other_inputs_reach() {
    let dir = tempfile::tempdir().expect("tempdir");
    write(
        dir.path(),
        "pkg/core.py",
        "class Base:\n    pass\n\n\nclass Engine(Base):\n    pass\n\n\nclass Turbo(Engine):\n    pass\n\n\n\
         def ping():\n    return pong()\n\n\ndef pong():\n    return ping()\n",
    );
    write(dir.path(), "pkg/__init__.py", "");
    let snapshot = index(dir.path());
    let ctx = context(&snapshot);
    let piped = names(&run(&ctx, "find kind class | subs"));
    assert_eq!(
        piped,
        names(&run(&ctx, "subs pkg.core.Base")).union(&names(&run(&ctx, "subs pkg.core.Engine"))).cloned().collect()
    );
    assert!(piped.contains("pkg.core.Engine") && piped.contains("pkg.core.Turbo"), "{piped:?}");
    // A cycle back to the start is not a result of the start's own traversal.
    let callees = names(&run(&ctx, "callees pkg.core.ping depth *"));
    assert_eq!(callees, BTreeSet::from(["pkg.core.pong".to_string()]));
}
