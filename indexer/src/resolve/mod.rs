//! Name resolution: from one file's syntax and the summaries of the modules it uses to its
//! units, edges and unresolved call sites.
//!
//! The analysis is a small abstract interpretation: every expression evaluates to a set of
//! abstract [`Value`]s (a module, a class, a function, an instance of a class, an external
//! dotted name, ...). Names are looked up with Python's LEGB rules, flow-insensitively within a
//! scope; attributes through modules (re-exports and star imports included) and classes (C3
//! MRO); calls through constructors, `__call__`, return values, generators and containers.
//! Arguments flow into the parameters of functions of the same file, so callbacks resolve.
//! Nothing is ever matched by name suffix: a call whose callee does not evaluate to anything is
//! recorded as unresolved.
//!
//! Other modules are seen only through [`ModuleSummary`]s (see `summary.rs`), which is what makes
//! body edits invisible to other files' resolution.
//!
//! One [`Resolver`] per file; its methods are split by job: this module holds the values, the
//! resolver's state and memo tables, and module lookups; `classes` the MRO and class attributes;
//! `values` what module- and class-level variables hold; `calls` what calls and attributes
//! give; `local` this file's own code at a site; `graph` the argument-flow fixpoint and the
//! edges; `builtins` what Python's builtins are.

use std::cell::RefCell;
use std::sync::Arc;

use fresco_graph::{Edge, EdgeKind, FileGraph, Unit, UnitKind, Unresolved};
use rustc_hash::{FxHashMap, FxHashSet};

use crate::db::{ModuleLookup, SourceFile, Workspace, file_summary, lookup_module, module_info, module_syntax};
use crate::lower::TYPE_OF;
use crate::summary::{
    ClassSummary, FunctionSummary, Member, MethodFlags, ModuleSummary, SumBinding, absolute_module, method_flags,
};
use crate::syntax::*;

mod builtins;
mod calls;
mod classes;
mod graph;
mod local;
mod protocols;
mod values;

use builtins::*;
use classes::*;
use protocols::*;

/// A unit of some module: the module's name and the unit's path within it.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Target {
    pub module: Arc<str>,
    pub path: Arc<str>,
}

impl Target {
    fn new(module: &str, path: &str) -> Target {
        Target { module: Arc::from(module), path: Arc::from(path) }
    }
    pub fn id(&self) -> String {
        format!("{}.{}", self.module, self.path)
    }
    /// The class a member path belongs to (`Session.request` -> `Session`).
    fn owner(&self) -> Option<Target> {
        let (owner, _) = self.path.rsplit_once('.')?;
        Some(Target::new(&self.module, owner))
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
enum Value {
    Module(Arc<str>),
    Class(Target),
    Function(Target),
    /// A function as its `def` made it, before its decorators: what a decorator receives. Calls
    /// of it reach the function alone, never the wrappers its decorators return.
    Undecorated(Target),
    /// A variable unit; transparent: evaluation replaces it by its values and sites record it
    /// as a reference.
    Var(Target),
    Instance(Target),
    External(Arc<str>),
    ExternalInstance(Arc<str>),
    Lambda(ScopeId),
    /// `super()` written in class `.0` with `self` an instance of `.1` (or, with `.2`, `cls` the
    /// class `.1` itself: in a classmethod, where a property read is the property object):
    /// attribute lookups follow the MRO of `.1`, starting after `.0`.
    Super(Target, Target, bool),
    /// A property made by `property(getter, setter)`: read on an instance it calls the getter,
    /// assigned there the setter (a `@property` is instead its getter `Function`).
    Property(Target, Option<Target>),
}

/// What `self` and `cls` are in a method's code read from its summary: instances of (and)
/// `receiver`, the class the method was called on; `defined_in` is the class whose body defines
/// the method, where `super()` starts and private `__names` are looked up (Python mangles them
/// to `_Class__name` of that class).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct SelfClass {
    receiver: Target,
    defined_in: Target,
    /// The method's first parameter is the class itself (a classmethod): `super()` there is the
    /// class's, and a property read on it is the property object.
    on_class: bool,
}

impl SelfClass {
    /// A method's code as its own class sees it.
    fn own(class: Target) -> SelfClass {
        SelfClass { receiver: class.clone(), defined_in: class, on_class: false }
    }
}

/// Whether a method named `name` with these flags receives its class first: a classmethod, or
/// one of the methods Python makes classmethods implicitly.
fn receives_class(name: &str, flags: MethodFlags) -> bool {
    flags.is_class || is_implicit_classmethod(name)
}

/// Whether Python makes a method of this name a classmethod without a decorator.
fn is_implicit_classmethod(name: &str) -> bool {
    matches!(name, "__init_subclass__" | "__class_getitem__")
}

/// Whether an attribute name is private to its class (`__name`, not `__dunder__`).
fn is_mangled(attr: &str) -> bool {
    attr.starts_with("__") && !attr.ends_with("__")
}

/// For a private `__name` read in a method called on a subclass: `self` as the defining class
/// (`self.__make()` in `Base` is `self._Base__make`, never the subclass's own `__make`). `None`
/// when the method's own view applies anyway.
fn private_lookup(attr: &str, self_class: Option<&SelfClass>) -> Option<SelfClass> {
    self_class.filter(|c| is_mangled(attr) && c.receiver != c.defined_in).map(|c| SelfClass::own(c.defined_in.clone()))
}

/// A variable's assigned expressions in the summary that holds them (see [`Resolver::var_exprs`]).
struct VarExprs {
    summary: Option<Arc<ModuleSummary>>,
    var: Target,
    /// For a class member: the index of its class in the summary.
    member_of: Option<usize>,
}

impl VarExprs {
    fn iter(&self) -> Box<dyn Iterator<Item = &Expr> + '_> {
        let Some(summary) = &self.summary else { return Box::new(std::iter::empty()) };
        match self.member_of {
            None => Box::new(summary.name(&self.var.path).unwrap_or(&[]).iter().filter_map(|b| match b {
                SumBinding::Value(e) => Some(e),
                _ => None,
            })),
            Some(class) => {
                let attr = own_name(&self.var.path);
                let values = summary.classes.get(class).and_then(|(_, c)| c.member(attr)).map(|m| m.values.as_slice());
                Box::new(values.unwrap_or(&[]).iter())
            }
        }
    }
}

/// The module-level names of other modules (and star-import surfaces, `*`) a file's resolution
/// read, for its dependency keys ([`crate::summary::name_key`]). Recording one is a lookup without
/// allocation when it is already known: resolution records a name at every summary lookup.
#[derive(Default)]
struct NamesUsed {
    by_module: FxHashMap<Arc<str>, FxHashSet<Box<str>>>,
}

impl NamesUsed {
    fn insert(&mut self, module: &str, name: &str) {
        match self.by_module.get_mut(module) {
            Some(names) => {
                if !names.contains(name) {
                    names.insert(Box::from(name));
                }
            }
            None => {
                self.by_module.insert(Arc::from(module), FxHashSet::from_iter([Box::from(name)]));
            }
        }
    }

    fn keys(&self) -> impl Iterator<Item = String> + '_ {
        self.by_module
            .iter()
            .flat_map(|(module, names)| names.iter().map(move |name| crate::summary::name_key(module, name)))
    }
}

const MAX_VALUES: usize = 24;
/// Receivers an inherited method is evaluated for, per file; calls on further subclasses take
/// the method's result for its own class (see [`Resolver::call_result_on`]).
const MAX_RECEIVERS: usize = 8;
const MAX_DEPTH: u32 = 16;

/// Evaluation steps one file's resolution may take (see [`Resolver::too_deep`]). The largest
/// file of the corpora, sympy's, takes 5.3 M (0.4 s); a step costs about 100 ns, so the budget is
/// about two seconds. Past it every evaluation is cut: what was not resolved yet stays
/// unresolved and the file is flagged (`resolution_cut`), instead of a superlinear path not yet
/// found holding the indexer up for minutes. `FRESCO_RESOLUTION_STEPS` overrides it.
pub(crate) const DEFAULT_STEP_BUDGET: u64 = 20_000_000;

pub(crate) fn step_budget() -> u64 {
    static BUDGET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BUDGET.get_or_init(|| match std::env::var("FRESCO_RESOLUTION_STEPS") {
        Err(_) => DEFAULT_STEP_BUDGET,
        Ok(value) => value.trim().parse().unwrap_or_else(|_| {
            eprintln!(
                "fresco: warning: FRESCO_RESOLUTION_STEPS={value:?} is not a whole number of steps; using the default \
                 {DEFAULT_STEP_BUDGET}"
            );
            DEFAULT_STEP_BUDGET
        }),
    })
}
/// How many levels of nesting an element path follows (`a, (b, (c, d)) = x`: `d` is element 1
/// of element 1 of element 1 of `x`, a path of three). Each unpacking of a name adds a level, so
/// a name unpacked from itself (`rv, status = rv`, as flask's `make_response` does) made paths
/// grow until the depth bound, one walk per binding at every level: exponential in the number
/// of such lines (three took 1.5 s, five did not finish). The paths are memoised, so the cost
/// grows with the number of distinct paths (three positions, six levels: 729; flask indexes in
/// 0.15 s, 0.11 s with four levels, 0.41 s with eight). Deeper than this, nothing is known.
const MAX_ELEMENT_PATH: usize = 6;
/// In a memo key of element paths, "an element of": what `for a, b in pairs` unpacks is keyed
/// as `pairs`'s path `[ANY_ELEMENT, i]` (no position written in code comes near it).
const ANY_ELEMENT: u32 = u32::MAX;

/// How many distinct arguments are kept per parameter (a full list may have dropped some).
const MAX_PARAM_FLOWS: usize = 16;

fn push(values: &mut Vec<Value>, v: Value) {
    if values.len() < MAX_VALUES && !values.contains(&v) {
        values.push(v);
    }
}

fn extend(values: &mut Vec<Value>, more: Vec<Value>) {
    for v in more {
        push(values, v);
    }
}

impl SiteHits {
    /// A made property's or descriptor's getter called, its accessors kept beside it.
    fn push_made(&mut self, made: &MadeProperty) {
        let at = self.properties.len();
        self.properties.push(made.getter.clone());
        if let Some(setter) = &made.setter {
            self.setters.push((at, setter.clone()));
        }
        if let Some(deleter) = &made.deleter {
            self.deleters.push((at, deleter.clone()));
        }
    }
}

/// What a class attribute made as a property (`x = property(getter, setter)`) or holding a
/// descriptor calls: read on an instance, the getter; assigned, the setter; deleted, the deleter.
struct MadeProperty {
    getter: Target,
    /// For a descriptor: its class (whose instance `__get__`'s `self` is, when inherited).
    descriptor: Option<Target>,
    setter: Option<Target>,
    deleter: Option<Target>,
}

/// What an evaluation at a site touched on the way: variables read, properties invoked.
#[derive(Default)]
struct SiteHits {
    vars: Vec<Target>,
    properties: Vec<Target>,
    /// For the getters in `properties` of properties made by `property(getter, setter, deleter)`
    /// and of descriptors, by their index there: their setters (`__set__`), which an
    /// assignment calls instead, and deleters (`__delete__`), which `del` calls.
    setters: Vec<(usize, Target)>,
    deleters: Vec<(usize, Target)>,
    /// Modules of the repository read through a name or an attribute on the way
    /// (`exceptions` in `exceptions.Boom()` after `from pkg import exceptions`).
    modules: Vec<Arc<str>>,
}

struct Resolver<'a> {
    /// The file's text (for the callee text of unresolved call sites).
    source: Arc<str>,
    db: &'a dyn salsa::Database,
    ws: Workspace,
    module: Arc<str>,
    is_package: bool,
    syntax: &'a FileSyntax,
    /// For scopes that can hold variable units (module, class bodies): name -> def.
    scope_units: FxHashMap<(ScopeId, &'a str), DefId>,
    /// For every scope: name -> indices of its bindings.
    scope_bindings: Vec<FxHashMap<&'a str, Vec<usize>>>,
    /// The nested scopes that assign a function's local through `nonlocal`, by (the function's
    /// scope, name): what they assign is what the local may hold.
    nonlocal_writers: FxHashMap<(ScopeId, &'a str), Vec<ScopeId>>,
    /// The lambdas module-level names are bound to, in binding order (they are not in the
    /// summary: their identity is positional). Gathered once: a scan of a name's bindings per
    /// read was quadratic in a module rebinding one name 50,000 times.
    module_lambdas: FxHashMap<&'a str, Vec<ScopeId>>,
    /// This file's defs by unit path (a redefinition's `#N` path included).
    defs_by_path: FxHashMap<&'a str, DefId>,
    /// Arguments flowing into parameters of this file's functions: (scope, param) -> (caller scope, arg).
    param_flow: FxHashMap<(ScopeId, u32), Vec<(ScopeId, Expr)>>,
    /// Instance attributes this file's methods set from a parameter (`self.cb = cb`): unit path
    /// of the attribute (`Button.cb`) -> (method scope, the parameter's name).
    attributes_from_params: FxHashMap<String, Vec<ParamStore>>,
    summaries: RefCell<FxHashMap<Arc<str>, Option<Arc<ModuleSummary>>>>,
    lookups: RefCell<FxHashMap<String, (ModuleLookup, Option<Arc<str>>)>>,
    /// `module\u{1}name` keys of the module-level names whose summaries this file consulted.
    names_used: RefCell<NamesUsed>,
    module_names: RefCell<FxHashMap<(Arc<str>, Name), Vec<Value>>>,
    local_names: RefCell<FxHashMap<(ScopeId, Name), Memo>>,
    /// What iterating over a name of this file gives, memoised like `local_names` (and for the
    /// same reason: a name rebound from itself many times, `terms = terms + [...]`, made the
    /// unmemoised walk exponential in the number of rebindings).
    local_elements: RefCell<FxHashMap<(ScopeId, Name), Memo>>,
    /// What a name the module body rebinds is at a line of the module body (see
    /// [`Resolver::module_body_values`]), memoised the same way.
    module_body_names: RefCell<FxHashMap<(Name, u32), Memo>>,
    /// What a variable's assignments give (see [`Resolver::var_values`]), memoised the same way.
    variables: RefCell<FxHashMap<Target, Memo>>,
    /// The element at a path of a name of this file (see [`Resolver::element_at`]): by binding
    /// scope, name, path and, for the module scope, the line of the site being resolved.
    local_element_paths: RefCell<FxHashMap<(ScopeId, Name, Vec<u32>, Option<u32>), Memo>>,
    /// The names whose written-out elements are being listed (see
    /// [`Resolver::element_exprs`]): a name bound to itself (`data = data` in a branch) lists
    /// its other bindings' once, not again at every level down to the depth bound.
    listing_elements: RefCell<Vec<(ScopeId, Name)>>,
    /// The element at a path of a module-level name (see [`Resolver::element_closed`]).
    module_element_paths: RefCell<FxHashMap<(Arc<str>, Name, Vec<u32>), Memo>>,
    /// What calling a function returns, memoised the same way: the returns of a function are
    /// read from summaries, which do not change while a file is resolved, and on sympy
    /// re-evaluating them at every call (through functions returning the results of others)
    /// took most of the time.
    call_results: RefCell<FxHashMap<CallKey, Memo>>,
    /// How many memoised computations are running (see [`Resolver::memoised`]).
    memo_level: std::cell::Cell<u32>,
    /// The lowest level of a running computation whose key was read since the current
    /// computation started (`u32::MAX`: none).
    lowest_cycle_hit: std::cell::Cell<u32>,
    mros: RefCell<FxHashMap<Target, Arc<Vec<MroEntry>>>>,
    /// Receiver classes seen at calls of this file's methods: method body scope -> classes.
    receiver_flow: FxHashMap<ScopeId, Vec<Target>>,
    /// The receivers each inherited method was evaluated for (see [`MAX_RECEIVERS`]).
    receivers_of: RefCell<FxHashMap<Target, FxHashSet<Target>>>,
    /// How many evaluations were cut short by the depth bound. A memoised result computed while
    /// this moved is partial and is not cached.
    cuts: std::cell::Cell<u64>,
    /// How many evaluation steps resolving this file took (each call of [`Resolver::too_deep`],
    /// which every recursive evaluation makes first), reported with slow files under
    /// `FRESCO_TRACE`: a superlinear path shows as millions of steps for a few lines.
    steps: std::cell::Cell<u64>,
    /// [`step_budget`], read once per file.
    step_budget: u64,
    /// The line of the module-body site being resolved, if any: names the module rebinds are
    /// looked up as they are at that line (see [`FileSyntax::bindings_at_line`]).
    module_site_line: std::cell::Cell<Option<u32>>,
}

/// Resolves one file: its graph, and what resolution consulted (its dependencies): module names
/// looked up, and `module\u{1}name` keys of the module-level names whose summaries were read.
pub fn resolve_file(db: &dyn salsa::Database, ws: Workspace, file: SourceFile) -> (FileGraph, Vec<String>) {
    let path = file.path(db).clone();
    let revision = file.revision(db);
    let Some(info) = module_info(db, ws, file) else {
        let reason = fresco_graph::SkipReason::Unreadable { error: "not part of the workspace".into() };
        return (FileGraph::skipped(path, String::new(), revision, reason), Vec::new());
    };
    if let Some(reason) = file.skipped(db) {
        return (FileGraph::skipped(path, info.name, revision, reason.clone()), Vec::new());
    }
    let syntax = module_syntax(db, ws, file);
    let started = crate::trace_enabled().then(std::time::Instant::now);
    let mut resolver = Resolver::new(db, ws, &info.name, info.is_package, &syntax, file.text(db).clone());
    if info.is_package {
        // `module_syntax` asked whether each top-level name is a submodule (one that is renames
        // the definition): a submodule of such a name coming or going re-resolves the package.
        for def in syntax.defs.iter().filter(|d| d.parent.is_none()) {
            resolver.lookup(&format!("{}.{}", info.name, def.name));
        }
    }
    let mut graph = resolver.run(path, revision);
    if let Some(took) = started.map(|s| s.elapsed()).filter(|t| t.as_millis() >= 100) {
        // A file far slower than the rest points at a superlinear path in the resolver.
        eprintln!(
            "fresco: slow file: {}: {} ms, {} evaluation steps",
            graph.path,
            took.as_millis(),
            resolver.steps.get()
        );
    }
    let mut deps: Vec<String> = resolver.lookups.borrow().keys().cloned().collect();
    deps.extend(resolver.names_used.borrow().keys());
    deps.sort_unstable();
    deps.shrink_to_fit();
    compact(&mut graph);
    (graph, deps)
}

/// Gives back the slack of the graph's strings and vectors: every file's graph stays in memory
/// for as long as it is current, and ids built piece by piece (`format!`) carry spare capacity.
fn compact(graph: &mut FileGraph) {
    for unit in &mut graph.units {
        unit.id.shrink_to_fit();
        unit.name.shrink_to_fit();
        if let Some(s) = unit.signature.as_mut() {
            s.shrink_to_fit();
        }
        if let Some(s) = unit.docstring.as_mut() {
            s.shrink_to_fit();
        }
    }
    for u in &mut graph.unresolved {
        u.caller.shrink_to_fit();
        u.callee.shrink_to_fit();
    }
    graph.units.shrink_to_fit();
    graph.edges.shrink_to_fit();
    graph.unresolved.shrink_to_fit();
    graph.arg_flows.shrink_to_fit();
    graph.param_calls.shrink_to_fit();
}

impl<'a> Resolver<'a> {
    fn new(
        db: &'a dyn salsa::Database,
        ws: Workspace,
        module: &str,
        is_package: bool,
        syntax: &'a FileSyntax,
        source: Arc<str>,
    ) -> Resolver<'a> {
        let mut scope_units = FxHashMap::default();
        for (id, def) in syntax.defs.iter().enumerate() {
            // A lambda binds no name.
            if def.kind == DefKind::Lambda {
                continue;
            }
            let container = match def.parent {
                None => 0,
                Some(p) => match syntax.def(p).body {
                    Some(body) if syntax.def(p).kind == DefKind::Class => body,
                    _ => continue,
                },
            };
            match scope_units.entry((container, def.name.as_str())) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(id as DefId);
                }
                std::collections::hash_map::Entry::Occupied(mut o) => {
                    if def.kind != DefKind::Variable && !def.is_accessor() {
                        o.insert(id as DefId);
                    }
                }
            }
        }
        let scope_bindings: Vec<FxHashMap<&str, Vec<usize>>> = syntax
            .scopes
            .iter()
            .map(|scope| {
                let mut map: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
                for (i, (name, _)) in scope.bindings.iter().enumerate() {
                    map.entry(name.as_str()).or_default().push(i);
                }
                map
            })
            .collect();
        let nonlocal_writers = nonlocal_writers(syntax, &scope_bindings);
        let mut module_lambdas: FxHashMap<&str, Vec<ScopeId>> = FxHashMap::default();
        for (name, binding) in syntax.scope(0).bindings.iter() {
            if let Binding::Value(Expr::Lambda(l)) = binding {
                module_lambdas.entry(name.as_str()).or_default().push(*l);
            }
        }
        let attributes_from_params = attributes_from_params(syntax);
        let defs_by_path = syntax.defs.iter().enumerate().map(|(id, d)| (d.path.as_str(), id as DefId)).collect();
        Resolver {
            source,
            db,
            ws,
            attributes_from_params,
            module: Arc::from(module),
            is_package,
            syntax,
            scope_units,
            scope_bindings,
            nonlocal_writers,
            module_lambdas,
            defs_by_path,
            param_flow: FxHashMap::default(),
            summaries: RefCell::default(),
            lookups: RefCell::default(),
            names_used: RefCell::default(),
            module_names: RefCell::default(),
            local_names: RefCell::default(),
            variables: RefCell::default(),
            local_element_paths: RefCell::default(),
            listing_elements: RefCell::default(),
            module_element_paths: RefCell::default(),
            module_body_names: RefCell::default(),
            local_elements: RefCell::default(),
            call_results: RefCell::default(),
            memo_level: std::cell::Cell::new(0),
            lowest_cycle_hit: std::cell::Cell::new(u32::MAX),
            mros: RefCell::default(),
            receiver_flow: FxHashMap::default(),
            receivers_of: RefCell::default(),
            cuts: std::cell::Cell::new(0),
            steps: std::cell::Cell::new(0),
            step_budget: step_budget(),
            module_site_line: std::cell::Cell::new(None),
        }
    }

    fn too_deep(&self, depth: u32) -> bool {
        self.steps.set(self.steps.get() + 1);
        if depth > MAX_DEPTH || self.steps.get() > self.step_budget {
            self.cuts.set(self.cuts.get() + 1);
            true
        } else {
            false
        }
    }

    // ---- modules -------------------------------------------------------------------------

    /// Looks a module up by absolute name: the lookup and the module's canonical name.
    fn lookup(&self, name: &str) -> (ModuleLookup, Option<Arc<str>>) {
        if let Some(hit) = self.lookups.borrow().get(name) {
            return hit.clone();
        }
        let found = lookup_module(self.db, self.ws, name.to_string());
        let canonical = match found {
            ModuleLookup::File(f) => module_info(self.db, self.ws, f).map(|i| Arc::from(i.name.as_str())),
            ModuleLookup::Namespace => Some(Arc::from(name)),
            ModuleLookup::Missing => None,
        };
        self.lookups.borrow_mut().insert(name.to_string(), (found, canonical.clone()));
        (found, canonical)
    }

    /// The summary of `module`, recording that this file's resolution depends on what it says
    /// about the top-level name `path` starts with (see `IndexDeps::names`).
    fn summary_for(&self, module: &str, path: &str) -> Option<Arc<ModuleSummary>> {
        let top = path.split('.').next().unwrap_or(path);
        self.names_used.borrow_mut().insert(module, top);
        self.summary(module)
    }

    fn summary(&self, module: &str) -> Option<Arc<ModuleSummary>> {
        if let Some(hit) = self.summaries.borrow().get(module) {
            return hit.clone();
        }
        let summary = match self.lookup(module).0 {
            ModuleLookup::File(f) => Some(file_summary(self.db, self.ws, f)),
            _ => None,
        };
        self.summaries.borrow_mut().insert(Arc::from(module), summary.clone());
        summary
    }

    /// Whether a missing module would be inside the repository (its top-level package is
    /// here): then it is unresolved, not external.
    fn is_internal_path(&self, name: &str) -> bool {
        let top = name.split('.').next().unwrap_or(name);
        top != name && self.lookup(top).0 != ModuleLookup::Missing
    }

    fn module_value(&self, name: &str) -> Option<Value> {
        match self.lookup(name) {
            (ModuleLookup::Missing, _) if self.is_internal_path(name) => None,
            (ModuleLookup::Missing, _) => Some(Value::External(Arc::from(name))),
            (_, Some(canonical)) => Some(Value::Module(canonical)),
            (_, None) => Some(Value::Module(Arc::from(name))),
        }
    }

    /// `from module import name`, following re-exports; raw (may contain `Var`).
    fn import_name(&self, module: &str, name: &str, depth: u32) -> Vec<Value> {
        match self.lookup(module) {
            (ModuleLookup::Missing, _) if self.is_internal_path(module) => Vec::new(),
            (ModuleLookup::Missing, _) => vec![Value::External(Arc::from(format!("{module}.{name}").as_str()))],
            (lookup, canonical) => {
                let canonical = canonical.unwrap_or_else(|| Arc::from(module));
                let mut values = if lookup == ModuleLookup::Namespace {
                    Vec::new()
                } else {
                    self.module_member(&canonical, name, depth + 1)
                };
                if values.is_empty() {
                    let sub = format!("{canonical}.{name}");
                    if self.lookup(&sub).0 != ModuleLookup::Missing {
                        values.extend(self.module_value(&sub));
                    }
                }
                values
            }
        }
    }

    /// A module-level name of a repository module; raw (may contain `Var`).
    fn module_member(&self, module: &Arc<str>, name: &str, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let key = (module.clone(), Name::new(name));
        if let Some(hit) = self.module_names.borrow().get(&key) {
            return hit.clone();
        }
        // In-progress marker: an import cycle evaluates to nothing rather than looping.
        self.module_names.borrow_mut().insert(key.clone(), Vec::new());
        let cuts_before = self.cuts.get();
        let mut values = Vec::new();
        if let Some(summary) = self.summary_for(module, name) {
            if let Some(bindings) = summary.name(name) {
                let has_unit = bindings.iter().any(|b| matches!(b, SumBinding::Def { kind: DefKind::Variable, .. }));
                for b in bindings {
                    match b {
                        SumBinding::Def { path, kind } => push(&mut values, def_value(module, path, *kind)),
                        SumBinding::ImportModule(m) => values.extend(self.module_value(m)),
                        SumBinding::ImportName { module: m, name: n } => {
                            extend(&mut values, self.import_name(m, n, depth + 1))
                        }
                        SumBinding::Value(e) if !has_unit => {
                            extend(&mut values, self.eval_closed(e, module, None, depth + 1))
                        }
                        SumBinding::Value(_) => {}
                    }
                }
                // A package's own definition named like one of its submodules (`def tools` in
                // `pkg/__init__.py` beside `pkg/tools.py`): once anything imports the submodule,
                // the import sets the package's attribute to the module, so either may be there.
                // (A name the package imports, `from .tools import tools`, is bound after the
                // submodule's import and stays what it imported.)
                let defined_here = bindings.iter().all(|b| matches!(b, SumBinding::Def { .. } | SumBinding::Value(_)));
                let submodule = format!("{module}.{name}");
                // The module of that name, not one a path merely reaches (`a/b.py` beside `a.py`,
                // without `a/__init__.py`, is the module `b`).
                if defined_here
                    && self.lookup(&submodule).1.as_deref() == Some(submodule.as_str())
                    && matches!(self.lookup(&submodule).0, ModuleLookup::File(_))
                {
                    values.extend(self.module_value(&submodule));
                }
            } else {
                self.names_used.borrow_mut().insert(module, "*");
                // A star import binds what its module exports when it runs, so of several the
                // last that exports the name wins. What a repository module exports is known; an
                // external module's is not, so a name a repository module exports is its, wherever
                // an external star import stands (`from os.path import *` then `from .b import *`:
                // `x` is `b.x`, not `os.path.x`).
                let mut external_stars = Vec::new();
                for star in summary.star_imports.iter().rev() {
                    // Whether `name` comes through depends on `__all__` and on `name` itself.
                    self.names_used.borrow_mut().insert(star, name);
                    match self.summary_for(star, "__all__") {
                        Some(s) if s.is_public(name) => extend(&mut values, self.import_name(star, name, depth + 1)),
                        // Without `__all__`, `*` takes every public name of the module's
                        // namespace, those its own star imports put there too (`a` star-imports
                        // `b`, which star-imports `c`: `a` sees `c`'s names). Looked up as a
                        // module-level name only: a submodule is in the namespace only once
                        // something imported it.
                        Some(s) if s.dunder_all.is_none() && !name.starts_with('_') && !s.star_imports.is_empty() => {
                            let canonical = self.lookup(star).1.unwrap_or_else(|| Arc::from(&**star));
                            extend(&mut values, self.module_member(&canonical, name, depth + 1));
                        }
                        Some(_) => {}
                        None if self.lookup(star).0 == ModuleLookup::Missing => external_stars.push(star),
                        None => {}
                    }
                    if !values.is_empty() {
                        break;
                    }
                }
                // Otherwise only an external star import can have bound it. A builtin's name
                // stays the builtin (`len` after `from os.path import *` was `os.path.len`), but
                // for the standard library's modules that export one of their own (`pow` after
                // `from math import *` is `math.pow`; of several, the last such). Any other name
                // is the one external star import's, if there is one; of several, which exports
                // it is unknown, and it stays unresolved. (`external_stars` is last first.)
                if values.is_empty() {
                    let star = match builtin(name) {
                        Some(_) => external_stars.iter().find(|star| star_shadows_builtin(star, name)),
                        None => match external_stars.as_slice() {
                            [star] => Some(star),
                            _ => None,
                        },
                    };
                    if let Some(star) = star {
                        extend(&mut values, self.import_name(star, name, depth + 1));
                    }
                }
            }
        }
        if self.cuts.get() == cuts_before {
            self.module_names.borrow_mut().insert(key, values.clone());
        } else {
            self.module_names.borrow_mut().remove(&key);
        }
        values
    }
}

/// What an annotation promises, given the values its names evaluate to: instances of the classes
/// among them (of the repository, builtin or external); functions, modules and the like promise
/// nothing. Classes the annotation already states as such (`Type[X]`) stay classes.
fn instances(values: Vec<Value>) -> Vec<Value> {
    let mut out = Vec::new();
    for v in values {
        match v {
            Value::Class(t) => push(&mut out, Value::Instance(t)),
            // `typing.AnyStr` (imported from `typing`, not a class of the code that shares its
            // name) is the type variable constrained to `str` and `bytes`.
            Value::External(x) if &*x == "typing.AnyStr" => {
                push(&mut out, builtin_instance("str"));
                push(&mut out, builtin_instance("bytes"));
            }
            // A bare qualifier or special form of `typing` (`x: Final = ...`, `registry:
            // ClassVar`, `-> Optional`), under any name it is imported as, names no type: no
            // instance of `typing.Final` with methods of its own (`typing.Final.decode` was
            // invented). A class of the code named `Final` is a `Class`, not this.
            Value::External(x) if is_typing_special_form(&x) => {}
            Value::External(x) => {
                if let Some(i) = external_call_result(&x).filter(|i| matches!(i, Value::ExternalInstance(_))) {
                    push(&mut out, i);
                }
            }
            _ => {}
        }
    }
    out
}

/// The instance whose getter a property read on `value` runs: `value` itself when an instance,
/// and for `super()` in a method (`super().pair`) its receiver's instance; `None` for anything
/// else (read on a class, `super()` in a classmethod included, a property is the property
/// object).
fn property_receiver(value: &Value) -> Option<Value> {
    match value {
        Value::Instance(_) => Some(value.clone()),
        Value::Super(_, k, false) => Some(Value::Instance(k.clone())),
        _ => None,
    }
}

/// Whether `e` is a call of `super` (`super()`, `super(Cls, self)`), by name.
fn is_super_call(e: &Expr) -> bool {
    matches!(e, Expr::Call(callee) if matches!(callee.as_ref(), Expr::Name(n) if n == "super"))
}

/// Whether the external name `x` is a special form of `typing` (or `typing_extensions`) that
/// names no type when written alone.
fn is_typing_special_form(x: &str) -> bool {
    let Some((module, name)) = x.rsplit_once('.') else { return false };
    matches!(module, "typing" | "typing_extensions")
        && matches!(
            name,
            "Final"
                | "ClassVar"
                | "Required"
                | "NotRequired"
                | "ReadOnly"
                | "Annotated"
                | "Optional"
                | "Union"
                | "Any"
                | "Literal"
                | "LiteralString"
                | "NoReturn"
                | "Never"
                | "Self"
                | "TypeAlias"
                | "TypeGuard"
                | "TypeIs"
                | "Unpack"
                | "Concatenate"
                | "Generic"
                | "Protocol"
        )
}

/// Whether an evaluated annotation names a class of the repository.
fn names_repo_class(values: &[Value]) -> bool {
    values.iter().any(|v| matches!(v, Value::Instance(_) | Value::Class(_)))
}

/// Whether inferred values say anything about the repository's code (not just external objects).
fn names_repo_value(values: &[Value]) -> bool {
    values.iter().any(|v| !matches!(v, Value::External(_) | Value::ExternalInstance(_)))
}

/// Adds what an annotation promises to inferred values that say nothing about the repository: a
/// promise of a repository class replaces them (they are proxies, casts, `None`), other promises
/// join them.
fn prefer_promised(out: &mut Vec<Value>, promised: Vec<Value>) {
    if names_repo_class(&promised) {
        out.clear();
    }
    extend(out, promised);
}

/// A store into an instance attribute from a method's parameter (see [`attributes_from_params`]).
struct ParamStore {
    /// The method's scope.
    scope: ScopeId,
    /// What is stored: the parameter, or a container holding it.
    value: Expr,
    /// Whether it is stored into the attribute's container (`self.adapters[prefix] = adapter`),
    /// not into the attribute itself.
    element_only: bool,
}

/// The instance attributes each method of the file's classes sets from one of its unannotated
/// parameters (`self.cb = cb`), by the attribute's unit path: the method's scope and the
/// parameter's name.
fn attributes_from_params(syntax: &FileSyntax) -> FxHashMap<String, Vec<ParamStore>> {
    let mut out: FxHashMap<String, Vec<ParamStore>> = FxHashMap::default();
    for (id, sc) in syntax.scopes.iter().enumerate() {
        if sc.kind != ScopeKind::Function {
            continue;
        }
        let Some(class) = sc.parent.and_then(|p| syntax.scope(p).def).map(|d| syntax.def(d)) else { continue };
        let is_static = sc.def.is_some_and(|d| method_flags(&syntax.def(d).decorators).is_static);
        let (Some(receiver), true) = (sc.params.first(), class.kind == DefKind::Class && !is_static) else {
            continue;
        };
        for store in sc.attr_stores.iter() {
            let on_receiver = matches!(&store.base, Expr::Name(n) if *n == receiver.name);
            // An annotated parameter promises its type: the summary already uses it, and what
            // one file passes would only add its callers' subclasses.
            let is_param = |e: &Expr| {
                matches!(e, Expr::Name(v)
                    if *v != receiver.name && sc.params.iter().any(|p| p.name == *v && p.annotation.is_none()))
            };
            // `self.cb = cb`, or a container holding one: `self.adapters[prefix] = adapter`.
            let from_param = match &store.value {
                Expr::Container(_, items) | Expr::Added(items) => items.iter().any(is_param),
                Expr::Keyed(items) => items.iter().any(|(_, e)| is_param(e)),
                value => is_param(value),
            };
            if on_receiver && from_param {
                out.entry(format!("{}.{}", class.path, store.attr)).or_default().push(ParamStore {
                    scope: id as ScopeId,
                    value: store.value.clone(),
                    element_only: store.element_only,
                });
            }
        }
    }
    out
}

/// `@contextmanager` / `@contextlib.asynccontextmanager` (by name: the decorator only decides
/// whether `with` binds what the generator yields, which must still resolve).
fn is_contextmanager_decorator(decorator: &Expr) -> bool {
    match decorator {
        Expr::Name(n) | Expr::Attr(_, n) => n == "contextmanager" || n == "asynccontextmanager",
        _ => false,
    }
}

/// The `R`s of the `Callable[..., R]` parts of an annotation (through unions).
fn collect_returning<'e>(annotation: &'e Expr, out: &mut Vec<&'e Expr>) {
    match annotation {
        Expr::Returning(r) => out.push(r),
        Expr::Union(items) => {
            for e in items {
                collect_returning(e, out);
            }
        }
        _ => {}
    }
}

/// Whether class member `m` is an attribute only ever set through `self` (`self.x = ...` in a
/// method): it lives in the instance's dict, in no class's namespace.
fn set_only_through_self(m: &Member) -> bool {
    m.kind == DefKind::Variable && !m.class_body_value
}

/// The function scope a `nonlocal name` written in a scope whose parent is `from` refers to:
/// the nearest enclosing function scope that binds the name itself (not through `nonlocal`
/// again); class bodies are skipped, as Python skips them.
fn nonlocal_target(
    syntax: &FileSyntax,
    scope_bindings: &[FxHashMap<&str, Vec<usize>>],
    name: &str,
    from: ScopeId,
) -> Option<ScopeId> {
    let mut s = from;
    loop {
        let sc = syntax.scope(s);
        if sc.kind == ScopeKind::Module {
            return None;
        }
        if sc.kind == ScopeKind::Function
            && scope_bindings[s as usize].contains_key(name)
            && !sc.nonlocals.iter().any(|n| n == name)
        {
            return Some(s);
        }
        s = sc.parent?;
    }
}

/// See [`Resolver::nonlocal_writers`]: every scope declaring `nonlocal name` that assigns it,
/// under the function scope the name belongs to.
fn nonlocal_writers<'a>(
    syntax: &'a FileSyntax,
    scope_bindings: &[FxHashMap<&'a str, Vec<usize>>],
) -> FxHashMap<(ScopeId, &'a str), Vec<ScopeId>> {
    let mut out: FxHashMap<(ScopeId, &str), Vec<ScopeId>> = FxHashMap::default();
    for (id, sc) in syntax.scopes.iter().enumerate() {
        let Some(parent) = sc.parent else { continue };
        for name in sc.nonlocals.iter() {
            if !scope_bindings[id].contains_key(name.as_str()) {
                continue;
            }
            if let Some(target) = nonlocal_target(syntax, scope_bindings, name, parent) {
                out.entry((target, name.as_str())).or_default().push(id as ScopeId);
            }
        }
    }
    out
}

/// Whether an external base's `__init__` (`x`) is code a constructor call runs: not `object`'s,
/// nor that of typing's markers (`Generic`, `Protocol`, `NamedTuple`, ...), which are not
/// classes whose initialiser the instance gets, nor that of the standard library's abstract
/// bases (`abc.ABC`, `collections.abc.Mapping`, ...; of those only `MappingView` defines one):
/// naming `abc.ABC.__init__` would invent a target.
fn runs_external_init(x: &str) -> bool {
    !(x.starts_with("builtins.object.")
        || x.starts_with("typing.")
        || x.starts_with("typing_extensions.")
        || x == "abc.ABC.__init__"
        || (x.starts_with("collections.abc.") && x != "collections.abc.MappingView.__init__"))
}

/// Methods whose result has the elements of the container they are called on (`d.values()`,
/// `items.copy()`).
fn is_element_preserving(method: &str) -> bool {
    matches!(method, "values" | "copy")
}

/// `base` when `expr` is `base.method(...)`.
fn method_receiver<'e>(expr: &'e Expr, method: &str) -> Option<&'e Expr> {
    let Expr::Call(callee) = expr else { return None };
    match callee.as_ref() {
        Expr::Attr(base, name) if name == method => Some(base),
        _ => None,
    }
}

/// Whether values are those of a dict of a builtin mapping type and of nothing else that could
/// have methods of its own (an instance of a class of the code, a class, a module).
fn is_builtin_dict(values: &[Value]) -> bool {
    let is_dict = |v: &Value| {
        matches!(v, Value::ExternalInstance(x) if matches!(&**x,
            "builtins.dict" | "collections.OrderedDict" | "collections.defaultdict" | "typing.Dict"))
    };
    let foreign = |v: &Value| matches!(v, Value::Instance(_) | Value::Class(_) | Value::Module(_));
    values.iter().any(is_dict) && !values.iter().any(foreign)
}

/// Whether `values` are a builtin list, set or deque and nothing of the repository's: what their
/// `pop()` (a deque's `popleft()`) takes out is one of their elements.
fn is_builtin_sequence(values: &[Value]) -> bool {
    let is_sequence = |v: &Value| {
        matches!(v, Value::ExternalInstance(x) if matches!(&**x,
            "builtins.list" | "builtins.set" | "collections.deque" | "typing.List" | "typing.Set" | "typing.Deque"))
    };
    let foreign = |v: &Value| matches!(v, Value::Instance(_) | Value::Class(_) | Value::Module(_));
    values.iter().any(is_sequence) && !values.iter().any(foreign)
}

fn def_value(module: &str, path: &str, kind: DefKind) -> Value {
    let t = Target::new(module, path);
    match kind {
        DefKind::Class => Value::Class(t),
        DefKind::Function | DefKind::Method | DefKind::Lambda => Value::Function(t),
        DefKind::Variable => Value::Var(t),
    }
}

/// The line and column (1-based, in characters) of byte `at` of `source`, with `why`.
fn parse_error_at(source: &str, at: u32, why: &str) -> fresco_graph::ParseError {
    let mut at = (at as usize).min(source.len());
    while !source.is_char_boundary(at) {
        at -= 1;
    }
    // Lines end as Python ends them (`\n`, `\r\n`, a lone `\r`); a byte order mark takes no
    // column.
    let before = source[..at].strip_prefix('\u{feff}').unwrap_or(&source[..at]);
    let bytes = before.as_bytes();
    let breaks = |i: usize| bytes[i] == b'\n' || (bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n'));
    let line_start = (0..bytes.len()).rev().find(|&i| breaks(i)).map_or(0, |i| i + 1);
    fresco_graph::ParseError {
        line: (0..bytes.len()).filter(|&i| breaks(i)).count() as u32 + 1,
        column: before[line_start..].chars().count() as u32 + 1,
        message: why.to_string(),
    }
}

/// The values of `property(getter, setter)`: a [`Value::Property`] per function the getter may
/// be, else the builtin property object.
fn property_values(getters: Vec<Value>, setters: impl FnOnce() -> Option<Vec<Value>>) -> Vec<Value> {
    let getters: Vec<Target> = getters
        .into_iter()
        .filter_map(|g| match g {
            Value::Function(t) => Some(t),
            _ => None,
        })
        .collect();
    if getters.is_empty() {
        return vec![Value::ExternalInstance(Arc::from("builtins.property"))];
    }
    let setter = setters().into_iter().flatten().find_map(|s| match s {
        Value::Function(t) => Some(t),
        _ => None,
    });
    getters.into_iter().map(|g| Value::Property(g, setter.clone())).collect()
}

fn member_value(class: &Target, member: &Member) -> Vec<Value> {
    match &member.path {
        Some(path) => vec![def_value(&class.module, path, member.kind)],
        None => Vec::new(),
    }
}

/// External bases that only mark a class (abstract, generic, a protocol): their own attributes
/// are machinery (`_abc_impl`, `__class_getitem__`), never what a subclass's code reads.
const MARKER_BASES: &[&str] =
    &["abc.ABC", "typing.Generic", "typing.Protocol", "typing_extensions.Protocol", "typing_extensions.Generic"];

/// The base that makes a class a named tuple whose fields are its annotated names.
const NAMED_TUPLE_BASES: &[&str] = &["typing.NamedTuple", "typing_extensions.NamedTuple"];

/// What a named tuple class has beyond `tuple`'s attributes.
const NAMED_TUPLE_MEMBERS: &[&str] = &["_make", "_replace", "_asdict", "_fields", "_field_defaults"];

/// The bases that make a class an enumeration, whose class attributes are its members.
const ENUM_BASES: &[&str] =
    &["enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag", "enum.ReprEnum"];

/// Whether a class attribute of an enumeration named `attr` is one of its members: not a
/// `_sunder_` or `__dunder__` name (`_ignore_`, `__slots__`), and not private.
fn is_enum_member_name(attr: &str) -> bool {
    !attr.starts_with('_')
}

/// The name a unit's path ends with, without its redefinition suffix: `m` of `A.m#2`. A
/// redefined method is still looked up, and called, by its name.
fn own_name(path: &str) -> &str {
    let last = path.rsplit('.').next().unwrap_or(path);
    last.split('#').next().unwrap_or(last)
}

/// `A#2.m` -> `A.m`: the qualified name of a redefined unit drops the disambiguating suffixes.
fn strip_suffixes(path: &str) -> String {
    if !path.contains('#') {
        return path.to_string();
    }
    path.split('.').map(|part| part.split('#').next().unwrap_or(part)).collect::<Vec<_>>().join(".")
}
/// The index an integer dict key written as a subscript stands for (`rows[0]`), as lowering
/// marks integer keys.
fn integer_key(key: &str) -> Option<usize> {
    key.strip_prefix(INTEGER_KEY)?.parse().ok()
}

/// A memoised evaluation: its values, or the level it runs at (see [`Resolver::memoised`]).
enum Memo {
    Running(u32),
    Done(Vec<Value>),
}

/// What is memoised about a call of a repository function (see [`Resolver::memoised`]).
#[derive(Clone, PartialEq, Eq, Hash)]
enum CallKey {
    /// What the call returns.
    Result(Target),
    /// What the method returns called on a class that inherits it (or an instance of one).
    ResultOn(Target, Target),
    /// What iterating over its result gives.
    Elements(Target),
    /// The element at this path of its result (`a, (b, c) = f()`).
    Element(Target, Vec<u32>),
}

/// The items of the strings and bytes objects among `values`: a string's characters are
/// strings, a bytes object's items integers (`text[0]`, `for ch in text`).
fn string_items(values: Vec<Value>) -> Vec<Value> {
    values
        .into_iter()
        .filter_map(|v| match &v {
            Value::ExternalInstance(t) if &**t == "builtins.str" => Some(v),
            Value::ExternalInstance(t) if &**t == "builtins.bytes" => Some(builtin_instance("int")),
            _ => None,
        })
        .collect()
}

/// The path `[index, rest..]` into `seq[start:]` as a path into `seq`.
fn shifted_path(index: u32, start: u32, rest: &[u32]) -> Vec<u32> {
    std::iter::once(index.saturating_add(start)).chain(rest.iter().copied()).collect()
}

/// The constant key of integer `i` (as lowering writes `seq[i]`).
fn integer_key_of(i: usize) -> String {
    format!("{INTEGER_KEY}{i}")
}
