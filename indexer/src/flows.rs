//! Argument flow between files, joined when a snapshot is assembled.
//!
//! A file's own resolution never looks at its callers (that would make its graph depend on other
//! files' bodies, and a body edit anywhere could invalidate it). Instead each file exports the
//! callables its calls pass to other modules' functions ([`ArgFlow`]) and the calls its functions
//! make of their own parameters ([`ParamCall`](fresco_graph::ParamCall)). [`FlowIndex`]
//! remembers who exports what, and the indexer turns the join into *flow edges* of the called
//! file's entry when it publishes a version: re-deriving them costs a lookup per affected
//! parameter call, and no file is re-resolved because another one changed what it passes.

use fresco_graph::{ArgFlow, Edge, EdgeKind, FileGraph};
use rustc_hash::{FxHashMap, FxHashSet};

#[derive(Default)]
pub struct FlowIndex {
    /// Function id -> files whose calls pass callables to it.
    flows_into: FxHashMap<String, FxHashSet<String>>,
    /// Function id -> files whose code calls one of its parameters (the file defining it).
    param_callers: FxHashMap<String, FxHashSet<String>>,
    /// What each file registered above, so that replacing or removing it is exact.
    registered: FxHashMap<String, (Vec<String>, Vec<String>)>,
}

impl FlowIndex {
    /// Records `graph` as the current graph of `path` (`None`: the file is gone) and returns the
    /// files whose flow edges may have changed (those calling parameters of functions this file
    /// passed callables to, before or now, and the file itself).
    pub fn update(&mut self, path: &str, graph: Option<&FileGraph>) -> FxHashSet<String> {
        let mut affected = FxHashSet::default();
        affected.insert(path.to_string());
        let mut touched: Vec<String> = Vec::new();
        if let Some((callees, functions)) = self.registered.remove(path) {
            for callee in callees {
                remove(&mut self.flows_into, &callee, path);
                touched.push(callee);
            }
            for function in functions {
                remove(&mut self.param_callers, &function, path);
            }
        }
        if let Some(graph) = graph {
            let mut callees: Vec<String> = graph.arg_flows.iter().map(|f| f.callee.clone()).collect();
            callees.sort_unstable();
            callees.dedup();
            let mut functions: Vec<String> = graph.param_calls.iter().map(|p| p.function.clone()).collect();
            functions.sort_unstable();
            functions.dedup();
            for callee in &callees {
                self.flows_into.entry(callee.clone()).or_default().insert(path.to_string());
                touched.push(callee.clone());
            }
            for function in &functions {
                self.param_callers.entry(function.clone()).or_default().insert(path.to_string());
            }
            if !callees.is_empty() || !functions.is_empty() {
                self.registered.insert(path.to_string(), (callees, functions));
            }
        }
        for callee in touched {
            if let Some(files) = self.param_callers.get(&callee) {
                affected.extend(files.iter().cloned());
            }
        }
        affected
    }

    /// The flow edges of `graph`: each of its parameter calls to what other files pass to that
    /// parameter. `graph_of` gives the current graph of a file.
    pub fn flow_edges<'g>(&self, graph: &FileGraph, graph_of: impl Fn(&str) -> Option<&'g FileGraph>) -> Vec<Edge> {
        let mut edges = Vec::new();
        let mut ids = crate::edge_ids::EdgeIds::default();
        for call in &graph.param_calls {
            let Some(sources) = self.flows_into.get(&call.function) else { continue };
            let mut sources: Vec<&String> = sources.iter().collect();
            sources.sort_unstable();
            for source in sources {
                let Some(from) = graph_of(source) else { continue };
                let flows =
                    from.arg_flows.iter().filter(|f: &&ArgFlow| f.callee == call.function && call.takes(&f.slot));
                for flow in flows {
                    for target in &flow.targets {
                        edges.push(Edge {
                            src: ids.get(&call.caller),
                            dst: ids.get(target),
                            kind: EdgeKind::Calls,
                            line: Some(call.line),
                        });
                    }
                }
            }
        }
        edges
    }
}

fn remove(map: &mut FxHashMap<String, FxHashSet<String>>, key: &str, path: &str) {
    if let Some(set) = map.get_mut(key) {
        set.remove(path);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fresco_graph::{ArgSlot, ParamCall, Revision};

    fn graph(path: &str, flows: Vec<ArgFlow>, calls: Vec<ParamCall>) -> FileGraph {
        let mut g = FileGraph::skipped(
            path.into(),
            path.trim_end_matches(".py").into(),
            Revision(0),
            fresco_graph::SkipReason::Binary,
        );
        g.skipped = None;
        g.arg_flows = flows;
        g.param_calls = calls;
        g
    }

    fn flow(callee: &str, slot: ArgSlot, target: &str) -> ArgFlow {
        ArgFlow { callee: callee.into(), slot, targets: vec![target.into()] }
    }

    fn param_call(function: &str, param: u32, name: &str) -> ParamCall {
        ParamCall { caller: format!("{function}.inner"), function: function.into(), param, name: name.into(), line: 3 }
    }

    #[test]
    fn joins_flows_by_position_and_keyword_and_forgets_removed_files() {
        let mut index = FlowIndex::default();
        let deco = graph("deco.py", vec![], vec![param_call("deco.traced", 0, "func")]);
        let api = graph("api.py", vec![flow("deco.traced", ArgSlot::Position(0), "api.fetch")], vec![]);
        let cli = graph("cli.py", vec![flow("deco.traced", ArgSlot::Keyword("func".into()), "cli.run")], vec![]);
        let other = graph("other.py", vec![flow("deco.traced", ArgSlot::Position(1), "other.no")], vec![]);
        index.update("deco.py", Some(&deco));
        index.update("api.py", Some(&api));
        index.update("cli.py", Some(&cli));
        let affected = index.update("other.py", Some(&other));
        assert!(affected.contains("deco.py"), "a new flow into deco.traced re-derives deco.py's flow edges");
        let files = [("api.py", &api), ("cli.py", &cli), ("other.py", &other)];
        let lookup = |p: &str| files.iter().find(|(q, _)| *q == p).map(|(_, g)| *g);
        let dsts: Vec<String> = index.flow_edges(&deco, lookup).into_iter().map(|e| e.dst.to_string()).collect();
        assert_eq!(dsts, vec!["api.fetch".to_string(), "cli.run".to_string()]);
        let affected = index.update("api.py", None);
        assert!(affected.contains("deco.py"));
        let dsts: Vec<String> = index.flow_edges(&deco, lookup).into_iter().map(|e| e.dst.to_string()).collect();
        assert_eq!(dsts, vec!["cli.run".to_string()]);
    }
}
