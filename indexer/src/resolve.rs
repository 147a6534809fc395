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
    /// `super()` written in class `.0` with `self` an instance of `.1`: attribute lookups
    /// follow the MRO of `.1`, starting after `.0`.
    Super(Target, Target),
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
}

impl SelfClass {
    /// A method's code as its own class sees it.
    fn own(class: Target) -> SelfClass {
        SelfClass { receiver: class.clone(), defined_in: class }
    }
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

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum MroEntry {
    Class(Target),
    External(Arc<str>),
}

/// C3 linearisation (Python's MRO): `head`, then a merge of `lists` (each base's MRO, then the
/// direct bases in order). An inconsistent hierarchy, which CPython refuses, gets what was merged
/// so far and then the lists depth-first, left to right, without repeats.
///
/// Each list is consumed through a cursor and every entry's occurrences in the lists' tails are
/// counted, so a merge costs O(entries × lists) rather than O(entries² × lists): a chain of 1,600
/// subclasses took 27 s with the textbook merge.
fn c3_merge(head: MroEntry, lists: &[Vec<MroEntry>]) -> Vec<MroEntry> {
    let mut result = vec![head];
    let mut cursors = vec![0usize; lists.len()];
    // How often each entry sits in a list after that list's cursor.
    let mut in_tails: FxHashMap<&MroEntry, usize> = FxHashMap::default();
    for list in lists {
        for entry in list.iter().skip(1) {
            *in_tails.entry(entry).or_default() += 1;
        }
    }
    loop {
        let heads = lists.iter().zip(&cursors).filter_map(|(list, &at)| list.get(at));
        let mut heads = heads.peekable();
        if heads.peek().is_none() {
            return result;
        }
        let candidate = heads.find(|head| in_tails.get(head).copied().unwrap_or(0) == 0).cloned();
        let Some(candidate) = candidate else {
            let mut seen: FxHashSet<&MroEntry> = result.iter().collect();
            let mut rest = Vec::new();
            for entry in lists.iter().flatten() {
                if seen.insert(entry) {
                    rest.push(entry.clone());
                }
            }
            result.extend(rest);
            return result;
        };
        for (list, at) in lists.iter().zip(cursors.iter_mut()) {
            if list.get(*at) == Some(&candidate) {
                *at += 1;
                if let Some(next_head) = list.get(*at)
                    && let Some(count) = in_tails.get_mut(next_head)
                {
                    *count -= 1;
                }
            }
        }
        result.push(candidate);
    }
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
                let attr = self.var.path.rsplit('.').next().unwrap_or("");
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

/// The builtins that are classes: calling them makes an instance whose methods are known by name.
const BUILTIN_CLASSES: &[&str] = &[
    "object",
    "int",
    "float",
    "complex",
    "bool",
    "str",
    "bytes",
    "bytearray",
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
    "type",
    "range",
    "slice",
    "memoryview",
    "property",
    "staticmethod",
    "classmethod",
    "super",
    "Exception",
    "BaseException",
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "AttributeError",
    "RuntimeError",
    "NotImplementedError",
    "OSError",
    "IOError",
    "ImportError",
    "StopIteration",
    "AssertionError",
    "LookupError",
    "ArithmeticError",
    "ZeroDivisionError",
    "UnicodeError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "FileNotFoundError",
    "PermissionError",
    "TimeoutError",
    "ConnectionError",
    "DeprecationWarning",
    "UserWarning",
    "Warning",
    "RuntimeWarning",
    "PendingDeprecationWarning",
    "FutureWarning",
    "SyntaxError",
    "SyntaxWarning",
    "NameError",
    "RecursionError",
    "EOFError",
    "KeyboardInterrupt",
    "SystemExit",
    "GeneratorExit",
    "StopAsyncIteration",
    "BufferError",
    "MemoryError",
    "OverflowError",
    "ReferenceError",
    "EnvironmentError",
    "NotADirectoryError",
    "IsADirectoryError",
    "FileExistsError",
    "InterruptedError",
    "BlockingIOError",
    "ChildProcessError",
    "ProcessLookupError",
    "BrokenPipeError",
    "ConnectionAbortedError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ModuleNotFoundError",
    "UnboundLocalError",
    "IndentationError",
    "TabError",
    "SystemError",
    "FloatingPointError",
    "ImportWarning",
    "UnicodeWarning",
    "BytesWarning",
    "ResourceWarning",
    "EncodingWarning",
    "UnicodeTranslateError",
    "ExceptionGroup",
    "BaseExceptionGroup",
];

const BUILTIN_FUNCTIONS: &[&str] = &[
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "breakpoint",
    "callable",
    "chr",
    "compile",
    "delattr",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "filter",
    "format",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "locals",
    "map",
    "max",
    "min",
    "next",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "repr",
    "reversed",
    "round",
    "setattr",
    "sorted",
    "sum",
    "vars",
    "zip",
    "__import__",
    "NotImplemented",
    "Ellipsis",
    "__name__",
    "__file__",
    "__doc__",
    "__debug__",
    "__spec__",
    "__loader__",
    "__package__",
    "__builtins__",
    "__dict__",
    "__path__",
    "__all__",
    "__version__",
    "exit",
    "quit",
    "copyright",
    "credits",
    "license",
    "reload",
    "unicode",
    "basestring",
    "long",
    "xrange",
    "raw_input",
    "unichr",
    "execfile",
    "file",
    "cmp",
    "buffer",
    "apply",
    "intern",
    "coerce",
];

fn builtin(name: &str) -> Option<Value> {
    builtin_name(name).map(Value::External)
}

/// `builtins.<name>` for a builtin class or function, shared: looked up by hash (this runs for
/// every name that is not bound in its module, and a scan of the lists was visible in profiles).
fn builtin_name(name: &str) -> Option<Arc<str>> {
    static NAMES: std::sync::OnceLock<FxHashMap<&'static str, Arc<str>>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| {
            BUILTIN_CLASSES
                .iter()
                .chain(BUILTIN_FUNCTIONS)
                .map(|n| (*n, Arc::from(format!("builtins.{n}").as_str())))
                .collect()
        })
        .get(name)
        .cloned()
}

/// An instance of builtin type `name` (`str`, `list`, `NoneType`, ...).
fn builtin_instance(name: &str) -> Value {
    static NONE_TYPE: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    let ty = match name {
        "NoneType" => Some(NONE_TYPE.get_or_init(|| Arc::from("builtins.NoneType")).clone()),
        _ => builtin_name(name),
    };
    Value::ExternalInstance(ty.unwrap_or_else(|| Arc::from(format!("builtins.{name}").as_str())))
}

fn builtin_class_instance(external: &str) -> Option<Value> {
    let name = external.strip_prefix("builtins.")?;
    if BUILTIN_CLASSES.contains(&name) && !matches!(name, "super" | "property" | "staticmethod" | "classmethod") {
        Some(Value::ExternalInstance(Arc::from(external)))
    } else {
        None
    }
}

/// External factories whose result type is well known.
const EXTERNAL_FACTORIES: &[(&str, &str)] = &[
    ("logging.getLogger", "logging.Logger"),
    ("re.compile", "re.Pattern"),
    ("re.match", "re.Match"),
    ("re.search", "re.Match"),
    ("re.fullmatch", "re.Match"),
    ("threading.Lock", "threading.Lock"),
    ("threading.RLock", "threading.RLock"),
    // Methods of `str` and `bytes` that give the same type, or the other one.
    ("builtins.str.lower", "builtins.str"),
    ("builtins.str.upper", "builtins.str"),
    ("builtins.str.strip", "builtins.str"),
    ("builtins.str.lstrip", "builtins.str"),
    ("builtins.str.rstrip", "builtins.str"),
    ("builtins.str.replace", "builtins.str"),
    ("builtins.str.format", "builtins.str"),
    ("builtins.str.join", "builtins.str"),
    ("builtins.str.title", "builtins.str"),
    ("builtins.str.capitalize", "builtins.str"),
    ("builtins.str.casefold", "builtins.str"),
    ("builtins.str.removeprefix", "builtins.str"),
    ("builtins.str.removesuffix", "builtins.str"),
    ("builtins.str.encode", "builtins.bytes"),
    ("builtins.str.split", "builtins.list"),
    ("builtins.str.rsplit", "builtins.list"),
    ("builtins.str.splitlines", "builtins.list"),
    ("builtins.str.partition", "builtins.tuple"),
    ("builtins.str.rpartition", "builtins.tuple"),
    ("builtins.bytes.lower", "builtins.bytes"),
    ("builtins.bytes.upper", "builtins.bytes"),
    ("builtins.bytes.strip", "builtins.bytes"),
    ("builtins.bytes.lstrip", "builtins.bytes"),
    ("builtins.bytes.rstrip", "builtins.bytes"),
    ("builtins.bytes.replace", "builtins.bytes"),
    ("builtins.bytes.join", "builtins.bytes"),
    ("builtins.bytes.decode", "builtins.str"),
    ("builtins.bytes.split", "builtins.list"),
    ("builtins.bytes.rsplit", "builtins.list"),
    ("builtins.bytes.splitlines", "builtins.list"),
    ("builtins.bytes.partition", "builtins.tuple"),
    ("builtins.bytes.rpartition", "builtins.tuple"),
];

/// What iterating or unpacking the result of an external callable gives, when that is well
/// known: a `str` or `bytes` method that makes a list or tuple ([`EXTERNAL_FACTORIES`]) makes one
/// of its receiver's type (`text.split(":")`, `raw.partition(b";")`).
fn external_call_element(external: &str) -> Option<Value> {
    let (_, product) = EXTERNAL_FACTORIES.iter().find(|(f, _)| *f == external)?;
    let (receiver, _) = external.rsplit_once('.')?;
    let sequence = matches!(*product, "builtins.list" | "builtins.tuple");
    (sequence && matches!(receiver, "builtins.str" | "builtins.bytes"))
        .then(|| Value::ExternalInstance(Arc::from(receiver)))
}

/// External classes whose names do not follow the CapWords convention.
const LOWERCASE_EXTERNAL_CLASSES: &[&str] = &[
    "collections.defaultdict",
    "collections.deque",
    "collections.abc",
    "datetime.datetime",
    "datetime.date",
    "datetime.time",
    "datetime.timedelta",
    "datetime.timezone",
    "threading.local",
    "array.array",
    "io.open",
];

/// What calling an external name gives: an instance when the name is a class (a builtin class,
/// a CapWords name by PEP 8, or a known lowercase class), a known factory's product; else nothing
/// is known.
fn external_call_result(external: &str) -> Option<Value> {
    if let Some(v) = builtin_class_instance(external) {
        return Some(v);
    }
    if let Some((_, product)) = EXTERNAL_FACTORIES.iter().find(|(f, _)| *f == external) {
        return Some(Value::ExternalInstance(Arc::from(*product)));
    }
    if external.starts_with("builtins.") {
        return None;
    }
    let last = external.rsplit('.').next().unwrap_or(external);
    let capwords =
        last.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && last.chars().any(|c| c.is_ascii_lowercase());
    if capwords || LOWERCASE_EXTERNAL_CLASSES.contains(&external) {
        Some(Value::ExternalInstance(Arc::from(external)))
    } else {
        None
    }
}

/// What an evaluation at a site touched on the way: variables read, properties invoked.
#[derive(Default)]
struct SiteHits {
    vars: Vec<Target>,
    properties: Vec<Target>,
    /// For the getters in `properties` of properties made by `property(getter, setter)`: their
    /// setters, which an assignment calls instead.
    setters: Vec<(Target, Target)>,
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
    for edge in &mut graph.edges {
        edge.src.shrink_to_fit();
        edge.dst.shrink_to_fit();
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
        let scope_bindings = syntax
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
            defs_by_path,
            param_flow: FxHashMap::default(),
            summaries: RefCell::default(),
            lookups: RefCell::default(),
            names_used: RefCell::default(),
            module_names: RefCell::default(),
            local_names: RefCell::default(),
            variables: RefCell::default(),
            local_element_paths: RefCell::default(),
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
                for star in &summary.star_imports {
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
                        None if self.lookup(star).0 == ModuleLookup::Missing => {
                            extend(&mut values, self.import_name(star, name, depth + 1))
                        }
                        None => {}
                    }
                    if !values.is_empty() {
                        break;
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

    // ---- classes -------------------------------------------------------------------------

    fn class_summary(&self, class: &Target) -> Option<(Arc<ModuleSummary>, usize)> {
        let summary = self.summary_for(&class.module, &class.path)?;
        let index = summary.classes.binary_search_by(|(p, _)| p.as_str().cmp(&class.path)).ok()?;
        Some((summary, index))
    }

    fn with_class<R>(&self, class: &Target, f: impl FnOnce(&ClassSummary) -> R) -> Option<R> {
        let (summary, index) = self.class_summary(class)?;
        Some(f(&summary.classes[index].1))
    }

    /// The C3 linearisation of a class (itself first); falls back to depth-first order when the
    /// hierarchy is inconsistent.
    fn mro(&self, class: &Target, depth: u32) -> Arc<Vec<MroEntry>> {
        if let Some(hit) = self.mros.borrow().get(class) {
            return hit.clone();
        }
        self.mros.borrow_mut().insert(class.clone(), Arc::new(vec![MroEntry::Class(class.clone())]));
        let cuts_before = self.cuts.get();
        let bases = self.with_class(class, |c| c.bases.clone()).unwrap_or_default();
        let mut base_lists: Vec<Vec<MroEntry>> = Vec::new();
        let mut direct: Vec<MroEntry> = Vec::new();
        if !self.too_deep(depth + 1) {
            for base in &bases {
                for v in self.eval_closed(base, &class.module, None, depth + 1) {
                    match v {
                        Value::Class(t) if t != *class => {
                            base_lists.push(self.mro(&t, depth + 1).as_ref().clone());
                            direct.push(MroEntry::Class(t));
                        }
                        Value::External(x) if &*x != "builtins.object" => {
                            base_lists.push(vec![MroEntry::External(x.clone())]);
                            direct.push(MroEntry::External(x));
                        }
                        _ => {}
                    }
                }
            }
        }
        base_lists.push(direct);
        let result = c3_merge(MroEntry::Class(class.clone()), &base_lists);
        let result = Arc::new(result);
        if self.cuts.get() == cuts_before {
            self.mros.borrow_mut().insert(class.clone(), result.clone());
        } else {
            self.mros.borrow_mut().remove(class);
        }
        result
    }

    /// What a name declared with an annotation holds (`iface: Base = Derived()`): what the
    /// annotation promises, and where that names a repository class, also the assigned values
    /// that are instances (classes, for `type[Base]`) of a subclass of a promised class: calls
    /// then reach `Derived`'s methods, which are what runs, as well as `Base`'s, which other
    /// assignments of any `Base` may run. An annotation naming no repository class (a proxy's
    /// `LocalProxy`, `int`) gives way to the assigned values.
    fn declared(&self, promised: Vec<Value>, assigned: impl FnOnce() -> Vec<Value>, depth: u32) -> Vec<Value> {
        if !names_repo_class(&promised) {
            return assigned();
        }
        let mut out = promised;
        let promised_classes: Vec<(Target, bool)> = out
            .iter()
            .filter_map(|v| match v {
                Value::Instance(t) => Some((t.clone(), true)),
                Value::Class(t) => Some((t.clone(), false)),
                _ => None,
            })
            .collect();
        for v in assigned() {
            let (t, instance) = match &v {
                Value::Instance(t) => (t, true),
                Value::Class(t) => (t, false),
                _ => continue,
            };
            let refines = promised_classes
                .iter()
                .any(|(p, p_instance)| *p_instance == instance && p != t && self.is_subclass(t, p, depth));
            if refines {
                push(&mut out, v);
            }
        }
        out
    }

    /// A position of an annotated tuple (`pair: Tuple[Base, str]`), given what any element of
    /// what callers pass is: a class of the code with the subclasses' instances among them (see
    /// [`Resolver::declared`]); a type outside the code (`str`) as it is, since the other
    /// positions' values are no evidence for this one; a position that says nothing (`Any`) is
    /// what any element is.
    fn declared_position(&self, promised: Vec<Value>, any: impl FnOnce() -> Vec<Value>, depth: u32) -> Vec<Value> {
        if promised.is_empty() {
            any()
        } else if names_repo_class(&promised) {
            self.declared(promised, any, depth)
        } else {
            promised
        }
    }

    /// Looks `attr` up on a class through its MRO, skipping entries up to and including `after`.
    fn class_attr(&self, class: &Target, attr: &str, after: Option<&Target>, depth: u32) -> Vec<Value> {
        let mro = self.mro(class, depth + 1);
        let mut skipping = after.is_some();
        for entry in mro.iter() {
            match entry {
                MroEntry::Class(t) => {
                    if skipping {
                        if Some(t) == after {
                            skipping = false;
                        }
                        continue;
                    }
                    // The member's value, not the member: cloning it copied its value expressions.
                    let found = self.with_class(t, |c| {
                        c.member(attr).map(|m| {
                            let assigned = matches!(m.kind, DefKind::Method)
                                && !m.values.is_empty()
                                && (m.method_replaced || !m.data_descriptor);
                            (member_value(t, m), assigned, m.method_replaced, set_only_through_self(m))
                        })
                    });
                    if let Some((mut value, assigned, replaced, instance_only)) = found.flatten() {
                        // An attribute only ever set through `self` is in the instance's dict,
                        // which a property further along the MRO takes precedence over: reads
                        // call its getter and `self.x = v` its setter (`self.debug = True` in a
                        // subclass of a class with a `debug` property; flask's `Flask.debug`).
                        if instance_only && let Some(property) = self.property_after(&mro, t, attr) {
                            return property;
                        }
                        // A method whose name the class body assigns again after it (`run =
                        // helper`) is that value; one a method assigns on `self` (`self.send =
                        // fast_send` in `__init__`) is shadowed by it on instances, where it
                        // is set: both are in view.
                        if assigned {
                            let var = Target::new(&t.module, &format!("{}.{attr}", t.path));
                            if replaced {
                                value.clear();
                            }
                            extend(&mut value, self.var_values(&var, depth + 1));
                        }
                        return value;
                    }
                }
                MroEntry::External(x) => {
                    // A marker base (`ABC`, `Generic[T]`, `Protocol`) supplies no attribute a
                    // subclass's code reads: `column.format` on an `ABC` subclass is no
                    // `abc.ABC.format`. Lookup goes on past it, as it would past `object`.
                    if skipping || MARKER_BASES.contains(&&**x) {
                        continue;
                    }
                    let member = format!("{x}.{attr}");
                    // `abc.ABC` and the like define no `__init__` (`super().__init__()` in their
                    // subclass runs the next one's): naming theirs would invent a target.
                    if attr == "__init__" && !runs_external_init(&member) && !member.starts_with("builtins.object.") {
                        continue;
                    }
                    return vec![Value::External(Arc::from(member.as_str()))];
                }
            }
        }
        Vec::new()
    }

    /// Whether `def` is an attribute only ever set through `self` whose name a base class
    /// defines as a property: no attribute of the instance is made (`self.debug = True` calls
    /// the base's setter), so it is no unit.
    fn shadowed_by_property(&self, def: &Def) -> bool {
        let Some(parent) = def.parent.map(|p| self.syntax.def(p)) else { return false };
        if def.kind != DefKind::Variable || parent.kind != DefKind::Class {
            return false;
        }
        let class = Target::new(&self.module, &parent.path);
        let instance_only =
            self.with_class(&class, |c| c.member(&def.name).is_some_and(set_only_through_self)).unwrap_or(false);
        instance_only && self.property_after(&self.mro(&class, 0), &class, &def.name).is_some()
    }

    /// What the classes after `class` on `mro` have in their own namespace as `attr`, when the
    /// first of them to have it has a data descriptor (a property): Python's attribute lookup
    /// takes that over an instance's own attribute. Attributes only set through `self` are in no
    /// class's namespace and are passed over.
    fn property_after(&self, mro: &[MroEntry], class: &Target, attr: &str) -> Option<Vec<Value>> {
        let start = mro.iter().position(|e| matches!(e, MroEntry::Class(t) if t == class))? + 1;
        for entry in &mro[start..] {
            let MroEntry::Class(t) = entry else { return None };
            let found = self.with_class(t, |c| {
                c.member(attr).filter(|m| !set_only_through_self(m)).map(|m| {
                    // `x = property(getter, setter)` in the class body is one too.
                    let made = m.values.iter().any(|v| matches!(v, Expr::Property(..)));
                    (m.data_descriptor || made).then(|| member_value(t, m))
                })
            });
            if let Some(Some(first)) = found {
                return first;
            }
        }
        None
    }

    /// Whether `class` is an enumeration: `enum.Enum` (or another of the module's bases) is on
    /// its method resolution order.
    fn is_enum(&self, class: &Target, depth: u32) -> bool {
        self.mro(class, depth + 1).iter().any(|e| matches!(e, MroEntry::External(x) if ENUM_BASES.contains(&&**x)))
    }

    /// The `@name.setter` method of property `getter`, when its class defines one.
    fn property_setter(&self, getter: &Target) -> Option<Target> {
        let class = getter.owner()?;
        let name = getter.path.rsplit('.').next()?;
        let setter = self.with_class(&class, |c| c.member(name).and_then(|m| m.setter.clone())).flatten()?;
        Some(Target::new(&getter.module, &setter))
    }

    fn method_flags(&self, method: &Target) -> MethodFlags {
        let Some(summary) = self.summary_for(&method.module, &method.path) else {
            return MethodFlags::default();
        };
        summary.function(&method.path).map(|f| f.flags).unwrap_or_default()
    }

    // ---- values --------------------------------------------------------------------------

    /// Replaces variables by their values.
    fn deref(&self, raw: Vec<Value>, depth: u32) -> Vec<Value> {
        if !raw.iter().any(|v| matches!(v, Value::Var(_))) {
            return raw;
        }
        let mut out = Vec::new();
        for v in raw {
            match v {
                Value::Var(t) => extend(&mut out, self.var_values(&t, depth + 1)),
                other => push(&mut out, other),
            }
        }
        out
    }

    /// What a variable is assigned, as its module's summary says (borrowed from it: variables
    /// are evaluated at nearly every site, and copying their expressions cost more than
    /// evaluating them).
    fn var_exprs(&self, var: &Target) -> VarExprs {
        let Some(summary) = self.summary_for(&var.module, &var.path) else {
            return VarExprs { summary: None, var: var.clone(), member_of: None };
        };
        if summary.name(&var.path).is_some() {
            return VarExprs { summary: Some(summary), var: var.clone(), member_of: None };
        }
        let Some((summary, class)) = var.owner().and_then(|owner| self.class_summary(&owner)) else {
            return VarExprs { summary: None, var: var.clone(), member_of: None };
        };
        VarExprs { summary: Some(summary), var: var.clone(), member_of: Some(class) }
    }

    /// The getters and setters of the properties a class attribute is made as (`x =
    /// property(getter, setter)` in its class body): read from its own assignments, never from
    /// a property object that flowed into another attribute (`self.cache = self.x` in code read
    /// from a summary, where property reads are not evaluated).
    fn made_properties(&self, var: &Target, depth: u32) -> Vec<(Target, Option<Target>)> {
        // Only a class attribute is a descriptor: `self.p = property(g)` stores the property
        // object in the instance, whose reads never call `g`.
        let attr = var.path.rsplit('.').next().unwrap_or(&var.path);
        let in_class_body = var
            .owner()
            .and_then(|owner| self.with_class(&owner, |c| c.member(attr).is_some_and(|m| m.class_body_value)));
        if in_class_body != Some(true) {
            return Vec::new();
        }
        let self_class = var.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for e in self.var_exprs(var).iter() {
            if !matches!(e, Expr::Property(..)) {
                continue;
            }
            for v in self.eval_closed(e, &var.module, self_class.as_ref(), depth + 1) {
                if let Value::Property(getter, setter) = v {
                    out.push((getter, setter));
                }
            }
        }
        out
    }

    fn var_values(&self, var: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        // Memoised: a variable assigned from itself (`x = x.y`, over and over) otherwise re-read
        // every assignment at every level down to the depth bound, exponential in the number of
        // assignments (50 of them took 15 s to index; 100, minutes).
        self.memoised(&self.variables, var.clone(), || self.var_values_uncached(var, depth))
    }

    fn var_values_uncached(&self, var: &Target, depth: u32) -> Vec<Value> {
        let self_class = if self.summary_for(&var.module, &var.path).is_some_and(|s| s.name(&var.path).is_some()) {
            None
        } else {
            var.owner().map(SelfClass::own)
        };
        // `Color.RED` of `class Color(Enum): RED = 1` is a Color, not 1.
        let attr = var.path.rsplit('.').next().unwrap_or(&var.path);
        if self_class.is_some()
            && is_enum_member_name(attr)
            && let Some(owner) = var.owner()
            && self.with_class(&owner, |c| {
                c.member(attr).is_some_and(|m| m.kind == DefKind::Variable && m.class_body_value)
            }) == Some(true)
            && self.is_enum(&owner, depth + 1)
        {
            return vec![Value::Instance(owner)];
        }
        let mut out = Vec::new();
        // Key-value stores (`self.adapters[prefix] = adapter`, or a dict written out) make the
        // value a dict only when nothing else says what it is: an attribute assigned
        // `Registry()` and filled by subscript keeps `Registry`'s methods.
        let mut keyed = Vec::new();
        for e in self.var_exprs(var).iter() {
            let values = match e {
                // `str = str` (a compat module re-exporting a builtin): the right side is read
                // before the name is bound, so it is the builtin. Evaluated as the variable, it is
                // the variable itself: a cycle, which gives nothing.
                Expr::Name(n) if self_class.is_none() && **n == *var.path => builtin(n).into_iter().collect(),
                _ => self.eval_closed(e, &var.module, self_class.as_ref(), depth + 1),
            };
            let is_keyed = matches!(e, Expr::Keyed(_) | Expr::Container(ContainerKind::Dict, _));
            extend(if is_keyed { &mut keyed } else { &mut out }, values);
        }
        // A default (`on_hover=None`) says little: what calls pass counts too.
        extend(&mut out, self.attribute_from_arguments(var, depth + 1));
        if out.is_empty() {
            out = keyed;
        }
        out
    }

    /// An instance attribute of a class of this file that a method sets from one of its
    /// parameters (`self.callback = callback` in `__init__`): what this file's calls pass for
    /// that parameter (`Button(on_click)`). Only this file's own calls count, as for every
    /// argument flow: the summary other files see does not change.
    fn attribute_from_arguments(&self, var: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) || *var.module != *self.module {
            return Vec::new();
        }
        let mut out = Vec::new();
        for store in self.attributes_from_params.get(&*var.path).into_iter().flatten() {
            // `self.adapters[prefix] = adapter` adds elements; it does not make the attribute a dict.
            if !store.element_only {
                extend(&mut out, self.eval_local(&store.value, store.scope, depth + 1));
            }
        }
        out
    }

    /// Evaluates a summary expression (closed over module scope) in `module`.
    fn eval_closed(&self, expr: &Expr, module: &Arc<str>, self_class: Option<&SelfClass>, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let raw = match expr {
            Expr::Name(n) => {
                let mut v = self.module_member(module, n, depth + 1);
                if v.is_empty() {
                    v.extend(builtin(n));
                }
                v
            }
            Expr::DefPath(p) => {
                let summary = self.summary_for(module, p);
                match summary {
                    Some(s) if s.class(p).is_some() => vec![Value::Class(Target::new(module, p))],
                    Some(s) if s.function(p).is_some() => {
                        vec![Value::Function(Target::new(module, p))]
                    }
                    _ => Vec::new(),
                }
            }
            Expr::Attr(base, attr) => {
                let own = private_lookup(attr, self_class);
                let mut out = Vec::new();
                for b in self.eval_closed(base, module, own.as_ref().or(self_class), depth + 1) {
                    let mut values = self.attr_of(&b, attr, depth + 1);
                    // Code read from a summary does not evaluate property reads, and an
                    // instance never holds the property object: `self.cache = self.made` (with
                    // `made = property(getter)`) gives the attribute nothing from it.
                    if matches!(b, Value::Instance(_)) {
                        values.retain(
                            |v| !matches!(v, Value::Var(var) if !self.made_properties(var, depth + 1).is_empty()),
                        );
                    }
                    extend(&mut out, values);
                }
                out
            }
            // `super()` in a method read from its summary (`return super().filter()`): the
            // receiver, looked up from the class after the one defining the method in the
            // receiver's MRO.
            Expr::Call(callee)
                if matches!(callee.as_ref(), Expr::Name(n) if n == "super")
                    && self_class.is_some()
                    && self.module_member(module, "super", depth + 1).is_empty() =>
            {
                self_class.map(|c| vec![Value::Super(c.defined_in.clone(), c.receiver.clone())]).unwrap_or_default()
            }
            Expr::Call(callee) => {
                if let Expr::Attr(base, attr) = callee.as_ref() {
                    // As evaluating the callee would: its depth checked, then its base's.
                    if self.too_deep(depth + 1) {
                        Vec::new()
                    } else {
                        // `self.__make()`: looked up as `_Base__make` on the defining class,
                        // called with `self` still the receiver.
                        let bases = self.eval_closed(base, module, self_class, depth + 2);
                        let lookup_in = private_lookup(attr, self_class)
                            .filter(|_| matches!(base.as_ref(), Expr::SelfRef | Expr::ClsRef))
                            .map(|own| own.defined_in);
                        self.method_call_result(&bases, attr, false, lookup_in.as_ref(), depth)
                    }
                } else {
                    let mut out = Vec::new();
                    for c in self.eval_closed(callee, module, self_class, depth + 1) {
                        extend(&mut out, self.call_result(&c, depth + 1));
                    }
                    out
                }
            }
            // `Subscript` is also what lowering writes for an element of what iterating gives
            // (`for a, b in x`, `*rest`, `yield from x`): only a subscript written with a key
            // (`Item`) asks `__getitem__`.
            Expr::Subscript(base) => self.elements_closed(base, module, self_class, depth + 1),
            // At this depth: its fallback, any element, is evaluated as deep as it always was (one
            // more level would make more evaluations meet the depth bound).
            Expr::Item(base, key) => {
                let bases = self.eval_closed(base, module, self_class, depth + 1);
                self.subscript(bases, depth, || self.item_closed(base, key, module, self_class, depth))
            }
            // A slice is a sequence of the same type.
            Expr::Slice(base, _) => self.eval_closed(base, module, self_class, depth + 1),
            Expr::Element(base, index) => self.element_closed(base, &[*index], module, self_class, depth + 1),
            Expr::Container(kind, _) => {
                vec![builtin_instance(kind.builtin())]
            }
            Expr::Keyed(_) => vec![Value::ExternalInstance(Arc::from("builtins.dict"))],
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Literal(t) => vec![builtin_instance(t)],
            Expr::Constant(k) => {
                vec![builtin_instance(constant_type(k))]
            }
            Expr::ItemAt(base, _) => {
                let bases = self.eval_closed(base, module, self_class, depth + 1);
                self.subscript(bases, depth, || self.elements_closed(base, module, self_class, depth + 1))
            }
            Expr::SelfRef => self_class.map(|c| vec![Value::Instance(c.receiver.clone())]).unwrap_or_default(),
            Expr::ClsRef => self_class.map(|c| vec![Value::Class(c.receiver.clone())]).unwrap_or_default(),
            Expr::Instance(ty) => instances(self.eval_closed(ty, module, self_class, depth + 1)),
            Expr::Declared(ty, value) => {
                let promised = self.eval_closed(ty, module, self_class, depth + 1);
                let assigned = || self.eval_closed(value, module, self_class, depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Decorated(inner, count) => {
                let mut out = Vec::new();
                for v in self.eval_closed(inner, module, self_class, depth + 1) {
                    match &v {
                        Value::Function(t) => extend(&mut out, self.decorated_arg(t, *count as usize, depth + 1)),
                        _ => push(&mut out, v),
                    }
                }
                out
            }
            Expr::Property(getter, setter) => {
                let getters = self.eval_closed(getter, module, self_class, depth + 1);
                let setters = || setter.as_deref().map(|s| self.eval_closed(s, module, self_class, depth + 1));
                property_values(getters, setters)
            }
            Expr::Lambda(_) | Expr::Returning(_) | Expr::Added(_) | Expr::Unknown => Vec::new(),
        };
        self.deref(raw, depth)
    }

    fn elements_closed(
        &self,
        expr: &Expr,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::Container(_, items) | Expr::Added(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (_, e) in items {
                    extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Slice(inner, _) => self.elements_closed(inner, module, self_class, depth + 1),
            Expr::Name(_) | Expr::Attr(..) => {
                let mut out = Vec::new();
                let raw = match expr {
                    Expr::Name(n) => self.module_member(module, n, depth + 1),
                    Expr::Attr(base, attr) => {
                        let own = private_lookup(attr, self_class);
                        let mut r = Vec::new();
                        for b in self.eval_closed(base, module, own.as_ref().or(self_class), depth + 1) {
                            extend(&mut r, self.attr_of(&b, attr, depth + 1));
                        }
                        r
                    }
                    _ => Vec::new(),
                };
                extend(&mut out, self.variable_elements(raw, depth + 1));
                out
            }
            Expr::Call(callee) => {
                let mut out = Vec::new();
                // `d.values()`, `d.copy()`: the elements of `d`, as in `elements_local`.
                if let Expr::Attr(base, method) = callee.as_ref()
                    && is_element_preserving(method)
                {
                    extend(&mut out, self.elements_closed(base, module, self_class, depth + 1));
                }
                for c in self.eval_closed(callee, module, self_class, depth + 1) {
                    extend(&mut out, self.call_elements(&c, depth + 1));
                }
                out
            }
            Expr::Declared(ty, value) => {
                let promised = self.elements_closed(ty, module, self_class, depth + 1);
                let assigned = || self.elements_closed(value, module, self_class, depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.elements_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Literal(_) | Expr::Constant(_) | Expr::Instance(_) => {
                self.value_elements(self.eval_closed(expr, module, self_class, depth + 1), depth)
            }
            _ => Vec::new(),
        }
    }

    /// `base["key"]` in a summary expression: the value written under that key when `base` is a
    /// dict with constant keys (or a module-level variable holding only such dicts, see
    /// [`Resolver::variable_items`]); any element otherwise.
    fn item_closed(
        &self,
        base: &Expr,
        key: &str,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match base {
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (k, e) in items {
                    if k == key {
                        extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                    }
                }
                out
            }
            Expr::Container(ContainerKind::List | ContainerKind::Tuple, items)
                if integer_key(key).is_some_and(|i| i < items.len()) =>
            {
                let i = integer_key(key).unwrap_or_default();
                items.get(i).map(|e| self.eval_closed(e, module, self_class, depth + 1)).unwrap_or_default()
            }
            Expr::Name(n) => match self.variable_items(self.module_member(module, n, depth + 1), key, depth + 1) {
                Some(items) => items,
                None => self.elements_closed(base, module, self_class, depth + 1),
            },
            // `settings.TABLE["b"]`, as in `item_local`.
            Expr::Attr(inner, attr) => {
                let mut raw = Vec::new();
                for v in self.eval_closed(inner, module, self_class, depth + 1) {
                    extend(&mut raw, self.attr_of(&v, attr, depth + 1));
                }
                match self.variable_items(raw, key, depth + 1) {
                    Some(items) => items,
                    None => self.elements_closed(base, module, self_class, depth + 1),
                }
            }
            _ => self.elements_closed(base, module, self_class, depth + 1),
        }
    }

    /// The items under `key` of the module-level variables `raw` names (`TABLE["b"]` with
    /// `TABLE` imported from another module, or read as `settings.TABLE`), read from their
    /// modules' summaries. `None` unless `raw` names only module-level variables, each assigned
    /// only dicts with constant keys (or, for an integer key, literal lists or tuples): then the
    /// item is what is written under the key (by literals, `d["k"] = v` and `d.update({...})`
    /// in the module, as for the module's own reads), and nothing else.
    fn variable_items(&self, raw: Vec<Value>, key: &str, depth: u32) -> Option<Vec<Value>> {
        if self.too_deep(depth) || raw.is_empty() {
            return None;
        }
        let by_index = integer_key(key).is_some();
        let mut out = Vec::new();
        for v in raw {
            let Value::Var(t) = v else { return None };
            let exprs = self.var_exprs(&t);
            // An attribute's dict is filled from anywhere (`self.r2.update(...)` in a method,
            // `obj.table[k] = f` elsewhere), which its class's summary does not record.
            if exprs.member_of.is_some() {
                return None;
            }
            let keyed = |e: &Expr| match e {
                Expr::Keyed(_) => true,
                Expr::Container(ContainerKind::List | ContainerKind::Tuple, _) => by_index,
                _ => false,
            };
            if exprs.iter().next().is_none() || !exprs.iter().all(keyed) {
                return None;
            }
            for e in exprs.iter() {
                extend(
                    &mut out,
                    self.item_closed(e, key, &t.module, t.owner().map(SelfClass::own).as_ref(), depth + 1),
                );
            }
        }
        Some(out)
    }

    /// The element at `path` (`[1, 0]`: element 0 of element 1, for `a, (b, c) = ...`) of a
    /// summary expression: of literal tuples and lists, of those a module-level variable is
    /// assigned, of those a function returns; any element otherwise (one level only: deeper,
    /// nothing is known).
    fn element_closed(
        &self,
        expr: &Expr,
        path: &[u32],
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) || path.len() > MAX_ELEMENT_PATH {
            return Vec::new();
        }
        let Some((&index, rest)) = path.split_first() else {
            return self.eval_closed(expr, module, self_class, depth + 1);
        };
        match expr {
            Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => items
                .get(index as usize)
                .map(|e| self.element_closed(e, rest, module, self_class, depth + 1))
                .unwrap_or_default(),
            // Memoised, as a variable unpacked from itself reads its own assignments again at
            // every level (see [`MAX_ELEMENT_PATH`]).
            Expr::Name(n) => {
                self.memoised(&self.module_element_paths, (module.clone(), n.clone(), path.to_vec()), || {
                    let mut out = Vec::new();
                    for v in self.module_member(module, n, depth + 1) {
                        if let Value::Var(t) = v {
                            for e in self.var_exprs(&t).iter() {
                                extend(
                                    &mut out,
                                    self.element_closed(
                                        e,
                                        path,
                                        &t.module,
                                        t.owner().map(SelfClass::own).as_ref(),
                                        depth + 1,
                                    ),
                                );
                            }
                        }
                    }
                    out
                })
            }
            Expr::Call(callee) => {
                let mut out = Vec::new();
                for c in self.eval_closed(callee, module, self_class, depth + 1) {
                    extend(&mut out, self.call_element(&c, path, depth + 1));
                }
                out
            }
            Expr::Element(inner, j) => {
                let outer: Vec<u32> = std::iter::once(*j).chain(path.iter().copied()).collect();
                self.element_closed(inner, &outer, module, self_class, depth + 1)
            }
            Expr::Slice(inner, Some(start)) => {
                self.element_closed(inner, &shifted_path(index, *start, rest), module, self_class, depth + 1)
            }
            // `for k, v in d.items()` at module level: `v` is a value of `d`.
            Expr::Subscript(inner) => match self.dict_view_closed(inner, "items", module, self_class, depth + 1) {
                Some(base) if index == 1 && rest.is_empty() => {
                    self.elements_closed(base, module, self_class, depth + 1)
                }
                Some(_) => Vec::new(),
                None if rest.is_empty() => self.elements_closed(expr, module, self_class, depth + 1),
                None => Vec::new(),
            },
            _ if rest.is_empty() => self.elements_closed(expr, module, self_class, depth + 1),
            _ => Vec::new(),
        }
    }

    /// The element at `path` of what calling `callee` gives: of each tuple or list its function
    /// returns (`return headers, stream`), or any element when that is not how it returns.
    fn call_element(&self, callee: &Value, path: &[u32], depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        if let Value::Function(t) = callee {
            let summary = self.summary_for(&t.module, &t.path);
            let function = summary.as_ref().and_then(|s| s.function(&t.path));
            if let Some(f) = function.filter(|f| f.yields.is_empty() && !f.returns.is_empty()) {
                return self.memoised(&self.call_results, CallKey::Element(t.clone(), path.to_vec()), || {
                    let owner = t.owner().map(SelfClass::own);
                    let mut out = Vec::new();
                    for r in &f.returns {
                        extend(&mut out, self.element_closed(r, path, &t.module, owner.as_ref(), depth + 1));
                    }
                    out
                });
            }
        }
        if path.len() == 1 { self.call_elements(callee, depth + 1) } else { Vec::new() }
    }

    /// Element `path` of each element of the summary expression `expr` (a container written
    /// out, or an annotation's element type): the tuples of `self._list = [(k, v), ...]`, or of
    /// `self.pairs: List[Tuple[A, B]]`. Nothing for other expressions.
    fn item_element_closed(
        &self,
        expr: &Expr,
        path: &[u32],
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            // A dict's items are its values, but iterating it gives its keys (not tracked).
            Expr::Container(ContainerKind::List | ContainerKind::Tuple | ContainerKind::Set, items)
            | Expr::Added(items) => {
                let mut out = Vec::new();
                for item in items {
                    extend(&mut out, self.element_closed(item, path, module, self_class, depth + 1));
                }
                out
            }
            Expr::Declared(ty, value) => {
                let promised = self.item_element_closed(ty, path, module, self_class, depth + 1);
                self.declared(promised, || self.item_element_closed(value, path, module, self_class, depth + 1), depth)
            }
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.item_element_closed(e, path, module, self_class, depth + 1));
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// Element `path` of each element the repository function `callee` produces when iterated:
    /// of the tuples it yields (`yield name, command`), else of the element type its return
    /// annotation declares (`-> Iterator[Tuple[str, Command]]`). Nothing for other values.
    fn call_item_element(&self, callee: &Value, path: &[u32], depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        self.with_function(callee, |t, f| {
            let owner = t.owner().map(SelfClass::own);
            let mut out = Vec::new();
            for y in &f.yields {
                extend(&mut out, self.element_closed(y, path, &t.module, owner.as_ref(), depth + 1));
            }
            if out.is_empty()
                && let Some(Expr::Container(ContainerKind::List | ContainerKind::Set, items)) = &f.annotation
            {
                for item in items {
                    extend(&mut out, self.element_closed(item, path, &t.module, owner.as_ref(), depth + 1));
                }
            }
            out
        })
        .unwrap_or_default()
    }

    /// `compute()`, memoised under `key` in `memo` for the file being resolved.
    ///
    /// While it runs, `key` reads as nothing: a value that reaches itself (`terms = terms +
    /// [...]`, a function returning its own result through others) adds nothing more, and the
    /// walk stays linear instead of exponential in the number of such paths. A result is kept
    /// only when it is complete: nothing in it was cut short by the depth bound, and it did not
    /// read a computation still running further out (that one's values were not known yet;
    /// reading its own key is fine, as the values are a union that cannot grow from itself).
    fn memoised<K: std::hash::Hash + Eq + Clone>(
        &self,
        memo: &RefCell<FxHashMap<K, Memo>>,
        key: K,
        compute: impl FnOnce() -> Vec<Value>,
    ) -> Vec<Value> {
        match memo.borrow().get(&key) {
            Some(Memo::Done(values)) => return values.clone(),
            Some(Memo::Running(level)) => {
                self.lowest_cycle_hit.set(self.lowest_cycle_hit.get().min(*level));
                return Vec::new();
            }
            None => {}
        }
        let level = self.memo_level.get() + 1;
        self.memo_level.set(level);
        memo.borrow_mut().insert(key.clone(), Memo::Running(level));
        let outer_hit = self.lowest_cycle_hit.replace(u32::MAX);
        let cuts_before = self.cuts.get();
        let values = compute();
        let hit = self.lowest_cycle_hit.get();
        self.lowest_cycle_hit.set(outer_hit.min(hit));
        self.memo_level.set(level - 1);
        if self.cuts.get() == cuts_before && hit >= level {
            memo.borrow_mut().insert(key, Memo::Done(values.clone()));
        } else {
            memo.borrow_mut().remove(&key);
        }
        values
    }

    /// What iterating over the variables among `raw` yields (their assigned containers).
    fn variable_elements(&self, raw: Vec<Value>, depth: u32) -> Vec<Value> {
        let mut out = Vec::new();
        for v in raw {
            if let Value::Var(t) = v {
                for e in self.var_exprs(&t).iter() {
                    extend(
                        &mut out,
                        self.elements_closed(e, &t.module, t.owner().map(SelfClass::own).as_ref(), depth + 1),
                    );
                }
                // Elements a method of this file stores from its parameters
                // (`self.adapters[prefix] = adapter`): what this file's calls pass.
                if *t.module == *self.module && !self.too_deep(depth) {
                    for store in self.attributes_from_params.get(&*t.path).into_iter().flatten() {
                        if !matches!(store.value, Expr::Name(_)) {
                            extend(&mut out, self.elements_local(&store.value, store.scope, depth + 1));
                        }
                    }
                }
            }
        }
        out
    }

    /// What iterating over the values of a literal, a constant or an annotation (`x: T`) yields:
    /// a string's characters, a bytes object's integers, and for an instance of a class of the
    /// repository what its iterator protocol gives (`lines: LineList` iterates as
    /// `LineList(...)` does).
    fn value_elements(&self, values: Vec<Value>, depth: u32) -> Vec<Value> {
        let instances: Vec<Value> = values.iter().filter(|v| matches!(v, Value::Instance(_))).cloned().collect();
        let mut out = string_items(values);
        if !instances.is_empty() {
            extend(&mut out, self.iterate_instances(&instances, false, depth + 1).1);
        }
        out
    }

    /// A subscript of `bases`: what `__getitem__` returns when every base is an instance of a
    /// class of the code defining it (see [`Resolver::getitem_results`]), else that with what
    /// `items` reads (the containers' items written out, or any element).
    fn subscript(&self, bases: Vec<Value>, depth: u32, items: impl FnOnce() -> Vec<Value>) -> Vec<Value> {
        let (got, only) = self.getitem_results(bases, depth);
        if only {
            return got;
        }
        let mut out = items();
        extend(&mut out, got);
        out
    }

    /// What subscripting instances of repository classes that define `__getitem__` gives: what
    /// it returns (`table["x"]` is `Table.__getitem__`'s result, not what iterating `table`
    /// yields), and whether that is all the subscript can give: every value is such an instance
    /// and some result is known. Otherwise the caller adds what the other values' items are
    /// (`w = Wrap() if flag else {"a": v}`: both).
    fn getitem_results(&self, values: Vec<Value>, depth: u32) -> (Vec<Value>, bool) {
        let mut out = Vec::new();
        let mut all_instances = !values.is_empty();
        for v in values {
            let Value::Instance(class) = &v else {
                all_instances = false;
                continue;
            };
            let mut defined = false;
            for m in self.deref(self.class_attr(class, "__getitem__", None, depth + 1), depth + 1) {
                if let Value::Function(_) = m {
                    defined = true;
                    extend(&mut out, self.call_result(&m, depth + 1));
                }
            }
            all_instances &= defined;
        }
        let only = all_instances && !out.is_empty();
        (out, only)
    }

    /// Whether every base of `class` and of its repository ancestors evaluates to a class: a
    /// base nothing resolves (`namedtuple(...)`, an import that is missing) may define anything,
    /// `__iter__` included.
    fn bases_all_known(&self, class: &Target, depth: u32) -> bool {
        self.mro(class, depth).iter().all(|entry| {
            let MroEntry::Class(c) = entry else { return true };
            let bases = self.with_class(c, |k| k.bases.clone()).unwrap_or_default();
            bases.iter().all(|b| {
                self.eval_closed(b, &c.module, None, depth + 1)
                    .iter()
                    .any(|v| matches!(v, Value::Class(_) | Value::External(_)))
            })
        })
    }

    /// What iterating over the result of calling `callee` yields (generators, returned containers).
    fn call_elements(&self, callee: &Value, depth: u32) -> Vec<Value> {
        if let Value::External(x) = callee
            && let Some(element) = external_call_element(x)
        {
            return vec![element];
        }
        if let Value::Class(t) = callee {
            // Iterating a new instance: what its class's `__next__` returns.
            return self.iterate_instances(&[Value::Instance(t.clone())], false, depth + 1).1;
        }
        self.with_function(callee, |t, f| {
            self.memoised(&self.call_results, CallKey::Elements(t.clone()), || {
                let owner = t.owner().map(SelfClass::own);
                let mut out = self.yielded(t, f, depth);
                for r in &f.returns {
                    extend(&mut out, self.elements_closed(r, &t.module, owner.as_ref(), depth + 1));
                }
                if let Some(annotation) = &f.annotation
                    && !names_repo_value(&out)
                {
                    let promised = self.elements_closed(annotation, &t.module, owner.as_ref(), depth + 1);
                    prefer_promised(&mut out, promised);
                }
                out
            })
        })
        .unwrap_or_default()
    }

    /// `with`'s result for the repository function `callee` and its summary (`None` for other
    /// values, or without a summary).
    fn with_function<R>(&self, callee: &Value, with: impl FnOnce(&Target, &FunctionSummary) -> R) -> Option<R> {
        let (Value::Function(t) | Value::Undecorated(t)) = callee else { return None };
        let summary = self.summary_for(&t.module, &t.path)?;
        summary.function(&t.path).map(|f| with(t, f))
    }

    /// What the function `t` (summarised as `f`) yields.
    fn yielded(&self, t: &Target, f: &FunctionSummary, depth: u32) -> Vec<Value> {
        let owner = t.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for y in &f.yields {
            extend(&mut out, self.eval_closed(y, &t.module, owner.as_ref(), depth + 1));
        }
        out
    }

    /// The iterator protocol on the instances among `values`: the repository methods iterating
    /// them calls (`__iter__`, then `__next__` on what `__iter__` returns; `__aiter__` and
    /// `__anext__` for `async for`) and the elements it yields (what `__next__` returns, or what a
    /// generator `__iter__` yields).
    fn iterate_instances(&self, values: &[Value], is_async: bool, depth: u32) -> (Vec<Value>, Vec<Value>) {
        let (iter_name, next_name) = if is_async { ("__aiter__", "__anext__") } else { ("__iter__", "__next__") };
        let mut methods = Vec::new();
        let mut elements = Vec::new();
        if self.too_deep(depth) {
            return (methods, elements);
        }
        for v in values {
            let Value::Instance(t) = v else { continue };
            let iters = self.deref(self.class_attr(t, iter_name, None, depth + 1), depth);
            // No `__iter__` but a `__getitem__`: Python iterates by calling it with 0, 1, ...
            // until `IndexError` (django's gdal `DataSource`, rich's `Palette`). An external base
            // (`dict`, `CookieJar`) answers for `__iter__` by name: it may define one.
            if !is_async
                && iters.is_empty()
                && self.class_attr(t, "__aiter__", None, depth + 1).is_empty()
                && self.bases_all_known(t, depth + 1)
            {
                for getitem in self.deref(self.class_attr(t, "__getitem__", None, depth + 1), depth) {
                    if matches!(getitem, Value::Function(_)) {
                        extend(&mut elements, self.call_result(&getitem, depth + 1));
                        push(&mut methods, getitem);
                    }
                }
            }
            for iter in iters {
                if !matches!(iter, Value::Function(_)) {
                    continue;
                }
                push(&mut methods, iter.clone());
                // A generator `__iter__` yields the elements itself. (What `async for` binds is
                // what awaiting `__anext__`'s result gives: not followed.)
                let known = elements.len();
                if !is_async {
                    extend(&mut elements, self.call_generated(&iter, depth + 1));
                }
                // `def __iter__(self) -> Iterator[Item]: return iter(self._items)`: the
                // annotation says what the elements are when nothing it yields does (rich's
                // `Lines`; the annotation reads as a list of `Item`).
                if !is_async && elements.len() == known {
                    let annotated = self
                        .with_function(&iter, |t, f| match &f.annotation {
                            Some(Expr::Container(_, items)) => {
                                let owner = t.owner().map(SelfClass::own);
                                let mut out = Vec::new();
                                for item in items {
                                    extend(&mut out, self.eval_closed(item, &t.module, owner.as_ref(), depth + 1));
                                }
                                // A type variable (`Iterator[T]`, `T = TypeVar("T")`) says
                                // nothing of the elements: `typing.TypeVar.strip` would be
                                // invented. (`AnyStr` reads as `str | bytes`, see
                                // [`instances`].)
                                out.retain(|v| {
                                    !matches!(v, Value::ExternalInstance(x) | Value::External(x) if x.starts_with("typing."))
                                });
                                out
                            }
                            _ => Vec::new(),
                        })
                        .unwrap_or_default();
                    extend(&mut elements, annotated);
                }
                for iterator in self.call_result(&iter, depth + 1) {
                    let Value::Instance(k) = &iterator else { continue };
                    for next in self.deref(self.class_attr(k, next_name, None, depth + 1), depth) {
                        if matches!(next, Value::Function(_)) {
                            push(&mut methods, next.clone());
                            if !is_async {
                                extend(&mut elements, self.call_result(&next, depth + 1));
                            }
                        }
                    }
                }
            }
        }
        (methods, elements)
    }

    /// What calling the generator function `callee` yields (nothing for other functions).
    fn call_generated(&self, callee: &Value, depth: u32) -> Vec<Value> {
        self.with_function(callee, |t, f| self.yielded(t, f, depth)).unwrap_or_default()
    }

    /// `value.attr`; raw (may contain `Var`).
    fn attr_of(&self, value: &Value, attr: &str, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        // `type(obj)` (lowered to this attribute, which no source can name) is the instance's
        // class whatever the class says its `__class__` is; a class's is its metaclass, not
        // known here.
        if attr == TYPE_OF {
            return match value {
                Value::Instance(t) => vec![Value::Class(t.clone())],
                Value::ExternalInstance(x) => vec![Value::External(x.clone())],
                _ => Vec::new(),
            };
        }
        match value {
            Value::Module(m) => {
                let mut v = self.module_member(m, attr, depth + 1);
                if v.is_empty() {
                    let sub = format!("{m}.{attr}");
                    if self.lookup(&sub).0 != ModuleLookup::Missing {
                        v.extend(self.module_value(&sub));
                    }
                }
                v
            }
            // A class's class is its metaclass: not known here.
            Value::Class(_) if attr == "__class__" => Vec::new(),
            Value::Class(t) => self.class_attr(t, attr, None, depth + 1),
            // `obj.__class__` is the instance's class, unless the code defines `__class__`
            // itself (django's `LazyObject` makes it a property; some classes assign
            // `self.__class__`).
            Value::Instance(t) if attr == "__class__" => {
                let own = self.class_attr(t, attr, None, depth + 1);
                if own.iter().any(|v| !matches!(v, Value::External(_))) { own } else { vec![Value::Class(t.clone())] }
            }
            Value::Instance(t) => self.class_attr(t, attr, None, depth + 1),
            Value::Super(written_in, self_class) => self.class_attr(self_class, attr, Some(written_in), depth + 1),
            // A function has no attributes of its own here: `cli.command` on `@click.group()
            // def cli()` is an attribute of what the decorator made of it.
            Value::Function(t) => {
                let mut out = Vec::new();
                for v in self.decorated_result(t, depth + 1) {
                    if let Value::Instance(c) = v {
                        extend(&mut out, self.class_attr(&c, attr, None, depth + 1));
                    }
                }
                // `@value.setter` on a `@property`: the builtin property's method.
                if out.is_empty() && matches!(attr, "setter" | "getter" | "deleter") && self.method_flags(t).is_property
                {
                    out.push(Value::External(Arc::from(format!("builtins.property.{attr}").as_str())));
                }
                out
            }
            // `yaml = None` as the fallback of an optional import: code reads attributes on the
            // name's other values, never on `None` (which has none worth an edge).
            Value::ExternalInstance(x) if &**x == "builtins.NoneType" => Vec::new(),
            // `d.save()` where `d` may be a dict (among other values): a dict has no `save`, so
            // that value gives no edge (an invented `builtins.dict.save` would be one).
            Value::ExternalInstance(x) if !builtin_has_attr(x, attr) => Vec::new(),
            // `value.__class__` (and `type(value)`) of an instance is its type (`list`, not
            // `list.__class__`); of a class, its metaclass, which is not known here (naming
            // `unittest.TestCase.__class__` would invent a target).
            Value::ExternalInstance(x) if attr == "__class__" => vec![Value::External(x.clone())],
            Value::External(_) if attr == "__class__" => Vec::new(),
            Value::External(x) if !builtin_has_attr(x, attr) => Vec::new(),
            Value::External(x) | Value::ExternalInstance(x) => {
                vec![Value::External(Arc::from(format!("{x}.{attr}").as_str()))]
            }
            _ => Vec::new(),
        }
    }

    /// What the outermost decorator of function `t` makes of it, as far as it is an instance of a
    /// class of the code: the decorator is a class (`@C`), a function returning instances (by
    /// its returned values or its annotation), or a call whose result is such a function
    /// (`@d(...)` with `d` annotated `-> Callable[..., C]`, or returning such a function).
    fn decorated_result(&self, t: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let Some(summary) = self.summary_for(&t.module, &t.path) else {
            return Vec::new();
        };
        let Some(decorator) = summary.function(&t.path).and_then(|f| f.outermost_decorator().cloned()) else {
            return Vec::new();
        };
        // Decorators are closed over the scope the `def` is in: no `self` to bind.
        let mut out = Vec::new();
        if let Expr::Call(callee) = &decorator {
            for d in self.eval_closed(callee, &t.module, None, depth + 1) {
                if let Value::Function(g) = &d {
                    extend(&mut out, self.promised_by_callable(g, depth + 1));
                }
            }
        }
        if out.is_empty() {
            for d in self.eval_closed(&decorator, &t.module, None, depth + 1) {
                extend(&mut out, self.applied(&d, depth + 1));
            }
        }
        out.retain(|v| matches!(v, Value::Instance(_)));
        out
    }

    /// Function `t` as its `count` innermost decorators make it (all of them with `usize::MAX`),
    /// applied innermost first: a decorator returning a function of the code (a wrapper it
    /// defines, say) replaces it by that; one returning its argument, or whose result is not
    /// known (external decorators, classes, anything else), leaves it what it was, so that the
    /// decorated name still resolves.
    fn decorated_chain(&self, t: &Target, count: usize, depth: u32) -> Vec<Value> {
        let mut current = vec![Value::Function(t.clone())];
        if self.too_deep(depth) {
            return current;
        }
        let Some(decorators) =
            self.summary_for(&t.module, &t.path).and_then(|s| s.function(&t.path).map(|f| f.decorators.clone()))
        else {
            return current;
        };
        for decorator in decorators.iter().rev().take(count) {
            // Decorators are closed over the scope the `def` is in: no `self` to bind.
            let mut next = Vec::new();
            for d in self.eval_closed(decorator, &t.module, None, depth + 1) {
                let Value::Function(g) = &d else { continue };
                let Some(g_summary) = self.summary_for(&g.module, &g.path).and_then(|s| s.function(&g.path).cloned())
                else {
                    continue;
                };
                if g_summary.returns_first_argument {
                    extend(&mut next, current.clone());
                }
                let owner = g.owner().map(SelfClass::own);
                // A decorator usable bare and called (`@deco` and `@deco("msg")`: `if
                // callable(arg): return decorator(arg)` then `return decorator`): applied bare, it
                // returns what its inner decorator makes, not the inner decorator itself (37 calls
                // in django reached `async_unsafe.decorator` as well as its `inner`).
                let bare = !matches!(decorator, Expr::Call(_));
                let dual_use = bare && g_summary.returns.iter().any(|r| matches!(r, Expr::Call(_)));
                for r in &g_summary.returns {
                    if dual_use && !matches!(r, Expr::Call(_)) && self.is_inner_decorator(r, g, owner.as_ref(), depth) {
                        continue;
                    }
                    for v in self.eval_closed(r, &g.module, owner.as_ref(), depth + 1) {
                        if matches!(v, Value::Function(_)) {
                            push(&mut next, v);
                        }
                    }
                }
            }
            if !next.is_empty() {
                current = next;
            }
        }
        current
    }

    /// Whether `r`, returned by `g`, names a function defined in `g` that itself returns a
    /// function defined in it: a decorator `g` makes (`decorator` in `def deco(arg): def
    /// decorator(func): def inner(...): ...; return inner`).
    fn is_inner_decorator(&self, r: &Expr, g: &Target, owner: Option<&SelfClass>, depth: u32) -> bool {
        let nested_in = |outer: &Target, inner: &Target| {
            inner.module == outer.module
                && inner.path.strip_prefix(&*outer.path).is_some_and(|rest| rest.starts_with('.'))
        };
        self.eval_closed(r, &g.module, owner, depth + 1).iter().any(|v| {
            let Value::Function(w) = v else { return false };
            if !nested_in(g, w) {
                return false;
            }
            let Some(returns) =
                self.summary_for(&w.module, &w.path).and_then(|s| s.function(&w.path).map(|f| f.returns.clone()))
            else {
                return false;
            };
            returns.iter().any(|r2| {
                self.eval_closed(r2, &w.module, owner, depth + 1)
                    .iter()
                    .any(|x| matches!(x, Value::Function(x) if nested_in(w, x)))
            })
        })
    }

    /// What a decorator with `count` decorators below it receives: the wrapper they return, or
    /// the function itself, undecorated.
    fn decorated_arg(&self, t: &Target, count: usize, depth: u32) -> Vec<Value> {
        self.decorated_chain(t, count, depth)
            .into_iter()
            .map(|v| match v {
                Value::Function(w) if w == *t => Value::Undecorated(w),
                other => other,
            })
            .collect()
    }

    /// The wrappers a call of decorated function `t` also reaches: functions of the code its
    /// decorators return in its place.
    fn wrappers(&self, t: &Target) -> Vec<Target> {
        self.decorated_chain(t, usize::MAX, 0)
            .into_iter()
            .filter_map(|v| match v {
                Value::Function(w) if w != *t => Some(w),
                _ => None,
            })
            .collect()
    }

    /// What calling `g`'s result gives, by `g`'s return annotation `Callable[..., R]`.
    fn promised_by_callable(&self, g: &Target, depth: u32) -> Vec<Value> {
        let Some(summary) = self.summary_for(&g.module, &g.path) else {
            return Vec::new();
        };
        let Some(annotation) = summary.function(&g.path).and_then(|f| f.annotation.clone()) else {
            return Vec::new();
        };
        let mut returning = Vec::new();
        collect_returning(&annotation, &mut returning);
        let owner = g.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for r in returning {
            extend(&mut out, self.eval_closed(r, &g.module, owner.as_ref(), depth + 1));
        }
        out
    }

    /// Applying decorator value `d` to a function: an instance of a decorator class, or what a
    /// decorator function returns (its returned instances, else its annotation's).
    fn applied(&self, d: &Value, depth: u32) -> Vec<Value> {
        match d {
            Value::Class(c) => vec![Value::Instance(c.clone())],
            Value::Function(g) => {
                let mut out: Vec<Value> =
                    self.call_result(d, depth + 1).into_iter().filter(|v| matches!(v, Value::Instance(_))).collect();
                if out.is_empty()
                    && let Some(annotation) =
                        self.summary_for(&g.module, &g.path).and_then(|s| s.function(&g.path)?.annotation.clone())
                {
                    out = self.eval_closed(&annotation, &g.module, g.owner().map(SelfClass::own).as_ref(), depth + 1);
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// What a call of function `t` returns: what its summary's returns evaluate to, lambdas it
    /// returns (this file), else what its return annotation promises.
    fn function_result(&self, t: &Target, depth: u32) -> Vec<Value> {
        self.function_result_as(t, None, depth)
    }

    /// What the function or method `t` returns; with `receiver`, called on that class (or an
    /// instance of it), which inherits it: `self` and `cls` are then the receiver's, as at run
    /// time (a returned `cls()` or `self`, and `self.m()` dispatched to the receiver's override),
    /// while `super()` and private `__names` stay the defining class's (see [`SelfClass`]).
    fn function_result_as(&self, t: &Target, receiver: Option<&Target>, depth: u32) -> Vec<Value> {
        let Some(summary) = self.summary_for(&t.module, &t.path) else {
            return Vec::new();
        };
        let Some(f) = summary.function(&t.path) else {
            return Vec::new();
        };
        let self_class = t
            .owner()
            .map(|owner| SelfClass { receiver: receiver.cloned().unwrap_or_else(|| owner.clone()), defined_in: owner });
        let mut out = Vec::new();
        for r in &f.returns {
            extend(&mut out, self.eval_closed(r, &t.module, self_class.as_ref(), depth + 1));
        }
        // A lambda returned by a function of this file (summaries leave lambdas out).
        if *t.module == *self.module
            && let Some(body) = self.defs_by_path.get(&*t.path).and_then(|&d| self.syntax.def(d).body)
        {
            for r in self.syntax.scope(body).returns.iter() {
                if let Expr::Lambda(l) = r {
                    push(&mut out, Value::Lambda(*l));
                }
            }
        }
        // The inferred values win when they say something about the code; the return
        // annotation fills in when they do not (`return unknown_ext()`, `return None`).
        if let Some(annotation) = &f.annotation {
            let promised = self.eval_closed(annotation, &t.module, self_class.as_ref(), depth + 1);
            if !names_repo_value(&out) {
                prefer_promised(&mut out, promised);
            } else {
                // A promised class no inferred instance belongs to (`-> Group` where the values
                // seen are `Command`s: the `Group` passed in as `cls` came from another file) is
                // added: the values found are not all there is.
                for p in promised {
                    if let Value::Instance(class) = &p
                        && !out.iter().any(|v| matches!(v, Value::Instance(t) if self.is_subclass(t, class, depth)))
                    {
                        push(&mut out, p);
                    }
                }
            }
        }
        out
    }

    /// Whether `class` is `base` or inherits from it.
    fn is_subclass(&self, class: &Target, base: &Target, depth: u32) -> bool {
        class == base || self.mro(class, depth + 1).iter().any(|e| matches!(e, MroEntry::Class(c) if c == base))
    }

    /// What `base.attr(...)` returns, where `bases` are the values of `base` (evaluated at
    /// `depth + 2`, as the callee's evaluation would), `call_properties` says whether a
    /// property read on an instance gives its getter's result (as in this file's code), and
    /// `lookup_in` is the class to look a private `__name` up on (the one whose code calls it).
    ///
    /// A method defined by a base and looked up on a subclass (or its instance, or through
    /// `super()` in one) returns what it returns for the subclass: `Engine.build()`, with `build`
    /// a base's classmethod returning `cls()`, is an `Engine`, `engine.configure()` returning
    /// `self` is the engine, and a base's `return self.request()` reaches the subclass's
    /// `request`. They were the base's, so the next call reached the base's method, not the
    /// subclass's override. Only for a method the
    /// lookup found in a class body (not a callable an instance attribute or a property holds,
    /// whose `self` is another object), a classmethod when the receiver is a class (an instance
    /// method called on a class gets its `self` as an argument), never a staticmethod.
    fn method_call_result(
        &self,
        bases: &[Value],
        attr: &str,
        call_properties: bool,
        lookup_in: Option<&Target>,
        depth: u32,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        for b in bases {
            let (receiver, on_class) = match b {
                Value::Class(k) => (Some(k), true),
                Value::Instance(k) | Value::Super(_, k) => (Some(k), false),
                _ => (None, false),
            };
            // A private name is looked up on the class whose code reads it (`lookup_in`).
            let looked_up = match (b, lookup_in) {
                (Value::Class(_), Some(class)) => Value::Class(class.clone()),
                (Value::Instance(_), Some(class)) => Value::Instance(class.clone()),
                _ => b.clone(),
            };
            for raw in self.attr_of(&looked_up, attr, depth + 2) {
                if let (Value::Var(var), Value::Instance(_)) = (&raw, b)
                    && call_properties
                {
                    let made = self.made_properties(var, depth + 2);
                    if !made.is_empty() {
                        for (getter, _) in made {
                            for c in self.getter_result(&Value::Function(getter), b, depth + 2) {
                                extend(&mut out, self.call_result(&c, depth + 1));
                            }
                        }
                        continue;
                    }
                }
                // A method of a class body is a `Function`; an attribute's value comes as `Var`.
                let from_class_body = matches!(raw, Value::Function(_));
                for v in self.deref(vec![raw], depth + 1) {
                    let property = matches!((&v, b), (Value::Function(t), Value::Instance(_))
                        if call_properties && self.method_flags(t).is_property);
                    if property {
                        for c in self.getter_result(&v, b, depth + 2) {
                            extend(&mut out, self.call_result(&c, depth + 1));
                        }
                        continue;
                    }
                    match (&v, receiver) {
                        (Value::Function(t), Some(k))
                            if from_class_body && self.dispatches_on(t, k, on_class, depth + 1) =>
                        {
                            extend(&mut out, self.call_result_on(t, k, depth + 1));
                        }
                        _ => extend(&mut out, self.call_result(&v, depth + 1)),
                    }
                }
            }
        }
        out
    }

    /// Whether the method `t`, looked up on `class` (itself, or an instance of it when
    /// `!on_class`), runs with `self` or `cls` the receiver's: `t` is inherited (defined by a
    /// class `class` inherits from) and binds its first parameter to the receiver (a
    /// classmethod, or an instance method on an instance; not a staticmethod or a property).
    fn dispatches_on(&self, t: &Target, class: &Target, on_class: bool, depth: u32) -> bool {
        let flags = self.method_flags(t);
        !(flags.is_static || flags.is_property || (on_class && !flags.is_class)) && self.is_inherited(t, class, depth)
    }

    /// What reading the property `getter` on `instance` gives: its getter's result, evaluated
    /// for the instance's class when that class inherits the property (`@property def form(self):
    /// return self.get_form()` reaches the subclass's `get_form`).
    fn getter_result(&self, getter: &Value, instance: &Value, depth: u32) -> Vec<Value> {
        match (getter, instance) {
            (Value::Function(t), Value::Instance(k)) if self.is_inherited(t, k, depth) => {
                self.call_result_on(t, k, depth)
            }
            _ => self.call_result(getter, depth),
        }
    }

    /// Whether the method `t` is defined by a class that `class` inherits from (not `class`).
    fn is_inherited(&self, t: &Target, class: &Target, depth: u32) -> bool {
        let Some(owner) = t.owner() else { return false };
        owner != *class
            && self.mro(class, depth + 1).iter().any(|entry| matches!(entry, MroEntry::Class(c) if *c == owner))
    }

    /// What the method `t`, inherited by `class`, returns when called on it (or its instance).
    fn call_result_on(&self, t: &Target, class: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        // Past a few receivers, the method's own result: a base whose methods call each other
        // was walked again for every subclass (50 subclasses of a 7-method base took 1.8 s and
        // hit the step budget, where the method's own result takes 0.03 s).
        {
            let mut receivers = self.receivers_of.borrow_mut();
            let seen = receivers.entry(t.clone()).or_default();
            if !seen.contains(class) {
                if seen.len() >= MAX_RECEIVERS {
                    drop(receivers);
                    return self.call_result(&Value::Function(t.clone()), depth);
                }
                seen.insert(class.clone());
            }
        }
        self.memoised(&self.call_results, CallKey::ResultOn(t.clone(), class.clone()), || {
            self.function_result_as(t, Some(class), depth)
        })
    }

    /// The values a call of `callee` returns.
    fn call_result(&self, callee: &Value, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match callee {
            Value::Class(t) => vec![Value::Instance(t.clone())],
            Value::Function(t) | Value::Undecorated(t) => {
                self.memoised(&self.call_results, CallKey::Result(t.clone()), || self.function_result(t, depth))
            }
            Value::Instance(t) => {
                let mut out = Vec::new();
                for c in self.deref(self.class_attr(t, "__call__", None, depth + 1), depth) {
                    extend(&mut out, self.call_result(&c, depth + 1));
                }
                out
            }
            Value::External(x) => external_call_result(x).into_iter().collect(),
            Value::Lambda(scope) => {
                let mut out = Vec::new();
                for r in &self.syntax.scope(*scope).returns {
                    extend(&mut out, self.eval_local(r, *scope, depth + 1));
                }
                out
            }
            _ => Vec::new(),
        }
    }

    // ---- local evaluation (this file) ----------------------------------------------------

    /// The scope whose binding of `name` is visible from `scope` (LEGB; class bodies are not
    /// visible from nested functions). `None` means builtins.
    /// Whether the code of `scope` runs while the module body runs, at its lines: the module's
    /// own, and a class body's at module level (`class Renderer: backend = Templates` reads
    /// the `Templates` of that line, before a later `class Templates` rebinds it).
    fn runs_with_module_body(&self, scope: ScopeId) -> bool {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            match (sc.kind, sc.parent) {
                (ScopeKind::Module, _) => return true,
                (ScopeKind::Class, Some(parent)) => s = parent,
                _ => return false,
            }
        }
    }

    fn binding_scope(&self, name: &str, scope: ScopeId) -> Option<ScopeId> {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            if sc.globals.iter().any(|g| g == name) {
                return Some(0);
            }
            let visible = sc.kind != ScopeKind::Class || s == scope;
            if visible && self.scope_bindings[s as usize].contains_key(name) {
                return Some(s);
            }
            match sc.parent {
                Some(p) => s = p,
                None => return None,
            }
        }
    }

    fn head_is_param(&self, expr: &Expr, scope: ScopeId) -> bool {
        let mut head = expr;
        while let Expr::Attr(base, _) = head {
            head = base;
        }
        let Expr::Name(name) = head else { return false };
        let Some(s) = self.binding_scope(name, scope) else {
            return false;
        };
        let indices = self.scope_bindings[s as usize].get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]);
        indices.iter().any(|&i| matches!(self.syntax.scope(s).bindings[i].1, Binding::Param(_)))
    }

    fn enclosing_class(&self, scope: ScopeId) -> Option<(Target, ScopeId)> {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            if sc.kind == ScopeKind::Function {
                let parent = sc.parent?;
                let ps = self.syntax.scope(parent);
                if ps.kind == ScopeKind::Class {
                    let def = ps.def?;
                    return Some((Target::new(&self.module, &self.syntax.def(def).path), s));
                }
            }
            s = sc.parent?;
        }
    }

    /// A name the module body rebinds, read by the module body's own code at the site being
    /// resolved: its raw values at that line (the bindings in force there, not the final ones), and
    /// the variable unit it reads, if it is one. `None` for every other name or site.
    fn module_body_values(&self, name: &str, scope: ScopeId, depth: u32) -> Option<(Vec<Value>, Option<Target>)> {
        let line = self.module_site_line.get()?;
        if scope != 0 && self.binding_scope(name, scope) != Some(0) {
            return None;
        }
        let indices = self.scope_bindings[0].get(name).map(Vec::as_slice).unwrap_or(&[]);
        let body = self.syntax.scope(0);
        if indices.len() < 2 || !indices.iter().any(|&i| body.replacing_index(i)) {
            return None;
        }
        // Memoised by name and line: the bindings in force there are evaluated at the same line,
        // so a name rebound from itself (`x = x.y`, over and over) read every binding again at
        // every level down to the depth bound (25 lines took 0.5 s, 50 lines 15 s).
        let values = self.memoised(&self.module_body_names, (Name::new(name), line), || {
            let mut values = Vec::new();
            // Raw, as `name_values` returns them: the site records the variables among them (an
            // imported list that `urlpatterns += [...]` reads) before they are replaced by their
            // values.
            for i in self.syntax.bindings_at_line(0, indices, line) {
                extend(&mut values, self.binding_values(&body.bindings[i].1, 0, depth + 1));
            }
            values
        });
        let variable = self
            .defs_by_path
            .get(name)
            .filter(|&&d| self.syntax.def(d).kind == DefKind::Variable)
            .map(|_| Target::new(&self.module, name));
        Some((values, variable))
    }

    /// The values of a name read in `scope`; raw (may contain `Var`).
    fn name_values(&self, name: &str, scope: ScopeId, depth: u32) -> Vec<Value> {
        let Some(s) = self.binding_scope(name, scope) else {
            // Not bound by any statement of this file: a star import, else a builtin.
            let mut values = self.module_member(&self.module, name, depth + 1);
            if values.is_empty() {
                values.extend(builtin(name));
            }
            return values;
        };
        if s == 0 {
            let mut values = self.module_member(&self.module, name, depth + 1);
            // Lambdas at module level are not in the summary (their identity is positional).
            for &i in self.scope_bindings[0].get(name).map(Vec::as_slice).unwrap_or(&[]) {
                if let (_, Binding::Value(Expr::Lambda(l))) = &self.syntax.scope(0).bindings[i] {
                    push(&mut values, Value::Lambda(*l));
                }
            }
            return values;
        }
        if self.syntax.scope(s).kind == ScopeKind::Class
            && let Some(&def) = self.scope_units.get(&(s, name))
        {
            let d = self.syntax.def(def);
            return vec![def_value(&self.module, &d.path, d.kind)];
        }
        self.memoised(&self.local_names, (s, Name::new(name)), || {
            let mut values = Vec::new();
            let indices = self.scope_bindings[s as usize].get(name).cloned().unwrap_or_default();
            for i in self.syntax.live_bindings(s, &indices) {
                let binding = &self.syntax.scope(s).bindings[i].1;
                extend(&mut values, self.binding_values(binding, s, depth + 1));
            }
            values
        })
    }

    fn binding_values(&self, binding: &Binding, scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match binding {
            Binding::Value(e) => self.eval_local(e, scope, depth + 1),
            Binding::Unpack(Expr::Container(_, items), i) => {
                items.get(*i as usize).map(|e| self.eval_local(e, scope, depth + 1)).unwrap_or_default()
            }
            Binding::Unpack(e, i) => self.element_at(e, &[*i], scope, depth + 1),
            Binding::Iter(e) => self.elements_local(e, scope, depth + 1),
            Binding::Enter(e) => self.entered(e, scope, depth + 1),
            Binding::Exception(e) => self
                .eval_local(e, scope, depth + 1)
                .into_iter()
                .filter_map(|v| match v {
                    Value::Class(t) => Some(Value::Instance(t)),
                    Value::External(x) => Some(Value::ExternalInstance(x)),
                    _ => None,
                })
                .collect(),
            Binding::Def(d) => {
                let def = self.syntax.def(*d);
                vec![def_value(&self.module, &def.path, def.kind)]
            }
            Binding::Import(Import::Module { module }) => {
                match absolute_module(module, &self.module, self.is_package) {
                    Some(m) => self.module_value(&m).into_iter().collect(),
                    None => Vec::new(),
                }
            }
            Binding::Import(Import::Name { module, name }) => {
                match absolute_module(module, &self.module, self.is_package) {
                    Some(m) => self.import_name(&m, name, depth + 1),
                    None => Vec::new(),
                }
            }
            Binding::Param(i) => self.param_values(scope, *i, depth + 1),
        }
    }

    /// `with expr as x`: x is what `expr` evaluates to, except for calls of generator context
    /// managers (`@contextmanager def f() -> Iterator[X]: yield ...`), where it is what they yield.
    fn entered(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<Value> {
        let Expr::Call(callee) = expr else {
            return self.eval_local(expr, scope, depth + 1);
        };
        let mut out = Vec::new();
        for c in self.eval_local(callee, scope, depth + 1) {
            if let Value::Function(t) = &c {
                let is_context_manager = self
                    .summary_for(&t.module, &t.path)
                    .and_then(|s| s.function(&t.path).and_then(|f| f.outermost_decorator().cloned()))
                    .is_some_and(|d| is_contextmanager_decorator(&d));
                if is_context_manager {
                    extend(&mut out, self.call_elements(&c, depth + 1));
                    continue;
                }
            }
            extend(&mut out, self.call_result(&c, depth + 1));
        }
        out
    }

    fn param_values(&self, scope: ScopeId, index: u32, depth: u32) -> Vec<Value> {
        let sc = self.syntax.scope(scope);
        let Some(param) = sc.params.get(index as usize) else {
            return Vec::new();
        };
        let mut values = Vec::new();
        if index == 0
            && sc.kind == ScopeKind::Function
            && let Some(parent) = sc.parent
        {
            let ps = self.syntax.scope(parent);
            if ps.kind == ScopeKind::Class
                && let (Some(class_def), Some(def)) = (ps.def, sc.def)
            {
                let flags = method_flags(&self.syntax.def(def).decorators);
                let class = Target::new(&self.module, &self.syntax.def(class_def).path);
                let is_meta_new =
                    self.syntax.def(def).name == "__new__" || self.syntax.def(def).name == "__init_subclass__";
                // `self`/`cls` is the class, or whatever receivers calls in this file
                // were seen to pass (subclass instances calling inherited methods).
                let mut classes = vec![class.clone()];
                for receiver in self.receiver_flow.get(&scope).map(Vec::as_slice).unwrap_or(&[]) {
                    if !classes.contains(receiver) {
                        classes.push(receiver.clone());
                    }
                }
                if flags.is_class || is_meta_new {
                    return classes.into_iter().map(Value::Class).collect();
                } else if !flags.is_static {
                    return classes.into_iter().map(Value::Instance).collect();
                }
            }
        }
        if param.variadic {
            return values;
        }
        let parent = sc.parent.unwrap_or(0);
        if let Some(default) = &param.default {
            extend(&mut values, self.eval_local(default, parent, depth + 1));
        }
        if let Some(annotation) = &param.annotation {
            extend(&mut values, self.eval_local(annotation, scope, depth + 1));
        }
        if let Some(flows) = self.param_flow.get(&(scope, index)) {
            for (caller_scope, arg) in flows {
                extend(&mut values, self.eval_local(arg, *caller_scope, depth + 1));
            }
        }
        values
    }

    /// Evaluates an expression of this file written in `scope`; variables are replaced by values.
    fn eval_local(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<Value> {
        self.eval_site(expr, scope, None, depth)
    }

    /// Evaluates an expression; when `hits` is given, records the variables and properties the
    /// name/attribute chain passes through (the site's references).
    fn eval_site(&self, expr: &Expr, scope: ScopeId, mut hits: Option<&mut SiteHits>, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let raw = match expr {
            Expr::Name(n) => {
                let values = match self.module_body_values(n, scope, depth + 1) {
                    Some((values, variable)) => {
                        if let (Some(h), Some(t)) = (hits.as_deref_mut(), variable) {
                            h.vars.push(t);
                        }
                        values
                    }
                    None => self.name_values(n, scope, depth + 1),
                };
                // A module handed over as an argument is not named by this code.
                if let Some(h) = hits.as_deref_mut()
                    && !self.head_is_param(expr, scope)
                {
                    self.note_modules(&values, h);
                }
                values
            }
            Expr::Attr(base, attr) => {
                let bases = self.eval_site(base, scope, hits.as_deref_mut(), depth + 1);
                let named_here = hits.is_some() && !self.head_is_param(expr, scope);
                let mut out = Vec::new();
                for b in &bases {
                    let values = self.attr_of(b, attr, depth + 1);
                    if let Some(h) = hits.as_deref_mut().filter(|_| named_here) {
                        // `pkg.mod.f()` reads `pkg.mod`: the package on the way is only the path
                        // to it (else everything written `pkg.…` would reference the package).
                        if let Value::Module(outer) = b
                            && values.iter().any(|v| matches!(v, Value::Module(_)))
                        {
                            h.modules.retain(|m| m != outer);
                        }
                        self.note_modules(&values, h);
                    }
                    for v in values {
                        if let (Value::Function(t), Value::Instance(_)) = (&v, b)
                            && self.method_flags(t).is_property
                        {
                            if let Some(h) = hits.as_deref_mut() {
                                h.properties.push(t.clone());
                            }
                            extend(&mut out, self.getter_result(&v, b, depth + 1));
                            continue;
                        }
                        // A class attribute `x = property(getter, setter)`, read on an instance:
                        // the variable is read, and its getter called.
                        if let (Value::Var(var), Value::Instance(_)) = (&v, b) {
                            let made = self.made_properties(var, depth + 1);
                            if !made.is_empty() {
                                if let Some(h) = hits.as_deref_mut() {
                                    h.vars.push(var.clone());
                                    for (getter, setter) in &made {
                                        h.properties.push(getter.clone());
                                        if let Some(setter) = setter {
                                            h.setters.push((getter.clone(), setter.clone()));
                                        }
                                    }
                                }
                                for (getter, _) in made {
                                    extend(&mut out, self.getter_result(&Value::Function(getter), b, depth + 1));
                                }
                                continue;
                            }
                        }
                        push(&mut out, v);
                    }
                }
                out
            }
            Expr::Call(callee) => {
                if let Expr::Name(n) = callee.as_ref()
                    && n == "super"
                    && self.binding_scope("super", scope).is_none()
                {
                    let Some((class, method_scope)) = self.enclosing_class(scope) else {
                        return Vec::new();
                    };
                    let mut out = Vec::new();
                    for v in self.param_values(method_scope, 0, depth + 1) {
                        if let Value::Instance(k) | Value::Class(k) = v {
                            push(&mut out, Value::Super(class.clone(), k));
                        }
                    }
                    if out.is_empty() {
                        out.push(Value::Super(class.clone(), class));
                    }
                    return out;
                }
                let mut out = match callee.as_ref() {
                    Expr::Attr(base, attr) => {
                        if self.too_deep(depth + 1) {
                            Vec::new()
                        } else {
                            let bases = self.eval_local(base, scope, depth + 2);
                            self.method_call_result(&bases, attr, true, None, depth)
                        }
                    }
                    _ => {
                        let mut out = Vec::new();
                        for c in self.eval_local(callee, scope, depth + 1) {
                            extend(&mut out, self.call_result(&c, depth + 1));
                        }
                        out
                    }
                };
                // `d.get(k)`, `d.pop(k)`, `d.setdefault(k, v)`: a value of the dict.
                for method in ["get", "pop", "setdefault"] {
                    if let Some(base) = self.dict_view(expr, method, scope, depth + 1) {
                        extend(&mut out, self.elements_local(base, scope, depth + 1));
                    }
                }
                out
            }
            // Also an element of what iterating gives (see `eval_closed`): no `__getitem__`.
            Expr::Subscript(base) => self.elements_local(base, scope, depth + 1),
            // A slice is a sequence of the same type.
            Expr::Slice(base, _) => self.eval_site(base, scope, hits.as_deref_mut(), depth + 1),
            Expr::Element(base, index) => self.element_at(base, &[*index], scope, depth + 1),
            Expr::Item(base, key) => {
                let bases = self.eval_local(base, scope, depth + 1);
                self.subscript(bases, depth, || self.item_local(base, key, scope, depth + 1))
            }
            Expr::Container(kind, _) => {
                vec![builtin_instance(kind.builtin())]
            }
            Expr::Keyed(_) => vec![Value::ExternalInstance(Arc::from("builtins.dict"))],
            Expr::Lambda(l) => vec![Value::Lambda(*l)],
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Literal(t) => vec![builtin_instance(t)],
            Expr::Constant(k) => {
                vec![builtin_instance(constant_type(k))]
            }
            Expr::ItemAt(base, key) => {
                let bases = self.eval_local(base, scope, depth + 1);
                self.subscript(bases, depth, || {
                    let item = self.item_at(base, key, scope, depth + 1);
                    self.eval_site(&item, scope, hits.as_deref_mut(), depth + 1)
                })
            }
            Expr::Instance(ty) => instances(self.eval_local(ty, scope, depth + 1)),
            Expr::Declared(ty, value) => {
                let promised = self.eval_local(ty, scope, depth + 1);
                let assigned = || self.eval_site(value, scope, hits.as_deref_mut(), depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Decorated(inner, count) => {
                let mut out = Vec::new();
                for v in self.eval_local(inner, scope, depth + 1) {
                    match &v {
                        Value::Function(t) => extend(&mut out, self.decorated_arg(t, *count as usize, depth + 1)),
                        _ => push(&mut out, v),
                    }
                }
                out
            }
            // The getter and setter are read where `property(...)` is called, as its arguments.
            Expr::Property(getter, setter) => {
                let getters = self.eval_local(getter, scope, depth + 1);
                let setters = || setter.as_deref().map(|s| self.eval_local(s, scope, depth + 1));
                property_values(getters, setters)
            }
            Expr::SelfRef | Expr::ClsRef | Expr::DefPath(_) | Expr::Returning(_) | Expr::Added(_) | Expr::Unknown => {
                Vec::new()
            }
        };
        if let Some(h) = hits {
            for v in &raw {
                if let Value::Var(t) = v {
                    h.vars.push(t.clone());
                }
            }
        }
        self.deref(raw, depth)
    }

    /// Element `index` of `expr` when it is (bound to) a literal tuple or list of the right
    /// shape; otherwise any of its elements.
    fn element_at(&self, expr: &Expr, path: &[u32], scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) || path.len() > MAX_ELEMENT_PATH {
            return Vec::new();
        }
        let Some((&index, rest)) = path.split_first() else {
            return self.eval_local(expr, scope, depth + 1);
        };
        // Not written out: any element, one level deep; deeper, nothing is known.
        let any_element = || if rest.is_empty() { self.elements_local(expr, scope, depth + 1) } else { Vec::new() };
        match expr {
            // `a, b = f()` with `f` a function of the repository: its returned tuples' elements.
            Expr::Call(callee) => {
                let callees = self.eval_local(callee, scope, depth + 1);
                if !callees.is_empty() && callees.iter().all(|c| matches!(c, Value::Function(_))) {
                    let mut out = Vec::new();
                    for c in &callees {
                        extend(&mut out, self.call_element(c, path, depth + 1));
                    }
                    out
                } else {
                    any_element()
                }
            }
            Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => {
                items.get(index as usize).map(|e| self.element_at(e, rest, scope, depth + 1)).unwrap_or_default()
            }
            // Element `i` of `seq[start:]` is element `start + i` of `seq`.
            Expr::Slice(inner, Some(start)) => {
                self.element_at(inner, &shifted_path(index, *start, rest), scope, depth + 1)
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else {
                    return Vec::new();
                };
                // Memoised, as a name unpacked from itself (`rv, status = rv`) reads its own
                // bindings again at every level (see [`MAX_ELEMENT_PATH`]).
                let site_line = if s == 0 { self.module_site_line.get() } else { None };
                self.memoised(&self.local_element_paths, (s, n.clone(), path.to_vec(), site_line), || {
                    let indices = self.scope_bindings[s as usize].get(n.as_str()).cloned().unwrap_or_default();
                    let mut out = Vec::new();
                    for i in indices {
                        match &self.syntax.scope(s).bindings[i].1 {
                            Binding::Value(e) => extend(&mut out, self.element_at(e, path, s, depth + 1)),
                            Binding::Unpack(e, j) => {
                                let outer: Vec<u32> = std::iter::once(*j).chain(path.iter().copied()).collect();
                                extend(&mut out, self.element_at(e, &outer, s, depth + 1));
                            }
                            // `for p in pairs: a, b = p`, as `for a, b in pairs`.
                            Binding::Iter(e) => extend(
                                &mut out,
                                self.element_at(&Expr::Subscript(Box::new(e.clone())), path, s, depth + 1),
                            ),
                            Binding::Param(p) => {
                                // `def f(u: Tuple[Key, Val])`, then `c, d = u`: the annotation's
                                // positions (a `List[X]` has none: any element is an X).
                                match self.syntax.scope(s).params.get(*p as usize).and_then(|p| p.annotation.as_ref()) {
                                    // Read as an annotated variable is (see
                                    // [`Resolver::declared`]): a position naming a class of the
                                    // code, with the subclasses' instances callers pass; any
                                    // other (`Tuple[Any, X]`, `str`) is what any element is.
                                    Some(annotation @ Expr::Container(ContainerKind::Tuple, _)) => {
                                        let promised = self.element_at(annotation, path, s, depth + 1);
                                        extend(&mut out, self.declared_position(promised, any_element, depth))
                                    }
                                    _ => extend(&mut out, any_element()),
                                }
                            }
                            _ => extend(&mut out, any_element()),
                        }
                    }
                    out
                })
            }
            // `a, (b, c) = x`: element 0 of element 1 of `x`.
            Expr::Element(inner, j) => {
                let outer: Vec<u32> = std::iter::once(*j).chain(path.iter().copied()).collect();
                self.element_at(inner, &outer, scope, depth + 1)
            }
            // `u: Tuple[Key, Val] = make()`: the annotation's positions, as an annotated
            // variable's value is read (see [`Resolver::declared`]).
            Expr::Declared(ty, value) if matches!(ty.as_ref(), Expr::Container(ContainerKind::Tuple, _)) => {
                let promised = self.element_at(ty, path, scope, depth + 1);
                self.declared(promised, || self.element_at(value, path, scope, depth + 1), depth)
            }
            Expr::Subscript(inner) => {
                // `for k, v in d.items()`: `v` is a value of `d` (keys are not tracked).
                if let Some(base) = self.dict_view(inner, "items", scope, depth + 1) {
                    return if index == 1 && rest.is_empty() {
                        self.elements_local(base, scope, depth + 1)
                    } else {
                        Vec::new()
                    };
                }
                // `for a, b in pairs`: element `i` of each element written out in `pairs`.
                let written = self.element_exprs(inner, scope, depth + 1);
                if written.is_empty() {
                    // `for name, command in visible_commands()`: element `i` of what a
                    // repository function yields or declares it returns the elements of.
                    if let Expr::Call(callee) = inner.as_ref() {
                        let mut out = Vec::new();
                        for c in self.eval_local(callee, scope, depth + 1) {
                            extend(&mut out, self.call_item_element(&c, path, depth + 1));
                        }
                        if !out.is_empty() {
                            return out;
                        }
                    }
                    // `for _, key, value in self._list`: element `i` of each element of what
                    // the attribute is assigned (or declared to hold), wherever that is written.
                    if let Expr::Attr(base, attr) = inner.as_ref() {
                        let mut out = Vec::new();
                        for b in self.eval_local(base, scope, depth + 1) {
                            for v in self.attr_of(&b, attr, depth + 1) {
                                let Value::Var(t) = v else { continue };
                                let owner = t.owner().map(SelfClass::own);
                                for e in self.var_exprs(&t).iter() {
                                    extend(
                                        &mut out,
                                        self.item_element_closed(e, path, &t.module, owner.as_ref(), depth + 1),
                                    );
                                }
                            }
                        }
                        if !out.is_empty() {
                            return out;
                        }
                    }
                    return any_element();
                }
                let mut out = Vec::new();
                for (e, s) in written {
                    extend(&mut out, self.element_at(&e, path, s, depth + 1));
                }
                out
            }
            // `a, b = rows[i + 1]`: as `rows[0]` when the key is a known constant, else as any
            // element of `rows` is unpacked.
            Expr::ItemAt(base, key) => {
                let item = self.item_at(base, key, scope, depth + 1);
                self.element_at(&item, path, scope, depth + 1)
            }
            // `p = pairs[0]`, then `a, b = p`: element `i` of each item written out under the key.
            Expr::Item(base, key) => {
                let written = self.item_exprs(base, key, scope, depth + 1);
                if written.is_empty() {
                    return any_element();
                }
                let mut out = Vec::new();
                for (e, s) in written {
                    extend(&mut out, self.element_at(&e, path, s, depth + 1));
                }
                out
            }
            _ => any_element(),
        }
    }

    /// The element expressions written out in this file for the container `expr` is bound to
    /// (and the scope to read each in): literal items, through names, and what was added to it.
    fn element_exprs(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<(Expr, ScopeId)> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::Container(_, items) | Expr::Added(items) => items.iter().map(|e| (e.clone(), scope)).collect(),
            Expr::Keyed(items) => items.iter().map(|(_, e)| (e.clone(), scope)).collect(),
            Expr::Slice(inner, _) => self.element_exprs(inner, scope, depth + 1),
            Expr::Name(n) => {
                let mut out: Vec<(Expr, ScopeId)> = self
                    .bound_values(n, scope)
                    .into_iter()
                    .flat_map(|(e, s)| self.element_exprs(e, s, depth + 1))
                    .collect();
                // `def f(pairs: List[Tuple[A, B]])`: the elements its annotation promises.
                for (annotation, s) in self.param_annotations(n, scope) {
                    out.extend(self.element_exprs(annotation, s, depth + 1));
                }
                out
            }
            // `pairs: List[Tuple[A, B]] = []`: the elements the annotation promises when it
            // writes any out, else those of the value.
            Expr::Declared(ty, value) => {
                let promised = self.element_exprs(ty, scope, depth + 1);
                if promised.is_empty() { self.element_exprs(value, scope, depth + 1) } else { promised }
            }
            // `enumerate(xs)`: the call, and the list of pairs it iterates as (see
            // `lower::iteration_view`).
            Expr::Union(items) => items.iter().flat_map(|e| self.element_exprs(e, scope, depth + 1)).collect(),
            _ => Vec::new(),
        }
    }

    /// The expressions a name is bound to by plain assignment in the scope whose binding is
    /// visible from `scope` (and that scope).
    fn bound_values(&self, name: &Name, scope: ScopeId) -> Vec<(&'a Expr, ScopeId)> {
        let Some(s) = self.binding_scope(name, scope) else { return Vec::new() };
        let Some(indices) = self.scope_bindings[s as usize].get(name.as_str()) else { return Vec::new() };
        let bindings = &self.syntax.scope(s).bindings;
        indices
            .iter()
            .filter_map(|&i| match &bindings[i].1 {
                Binding::Value(e) => Some((e, s)),
                _ => None,
            })
            .collect()
    }

    /// The annotations of the parameters a name is bound to in the scope whose binding is
    /// visible from `scope` (and that scope).
    fn param_annotations(&self, name: &Name, scope: ScopeId) -> Vec<(&'a Expr, ScopeId)> {
        let Some(s) = self.binding_scope(name, scope) else { return Vec::new() };
        let Some(indices) = self.scope_bindings[s as usize].get(name.as_str()) else { return Vec::new() };
        let sc = self.syntax.scope(s);
        indices
            .iter()
            .filter_map(|&i| match &sc.bindings[i].1 {
                Binding::Param(p) => sc.params.get(*p as usize)?.annotation.as_ref().map(|a| (a, s)),
                _ => None,
            })
            .collect()
    }

    /// The expressions written out in this file under the constant key `key` of the dicts
    /// `expr` is bound to.
    fn item_exprs(&self, expr: &Expr, key: &str, scope: ScopeId, depth: u32) -> Vec<(Expr, ScopeId)> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::Keyed(items) => items.iter().filter(|(k, _)| k == key).map(|(_, e)| (e.clone(), scope)).collect(),
            // `rows[0]` of a literal list or tuple: the element at that index when it is written
            // out there, any element otherwise (it may have been appended).
            Expr::Container(kind, items) => {
                let index = match kind {
                    ContainerKind::List | ContainerKind::Tuple => integer_key(key),
                    ContainerKind::Set | ContainerKind::Dict => None,
                };
                match index.and_then(|i| items.get(i)) {
                    Some(e) => vec![(e.clone(), scope)],
                    None => items.iter().map(|e| (e.clone(), scope)).collect(),
                }
            }
            Expr::Added(items) => items.iter().map(|e| (e.clone(), scope)).collect(),
            Expr::Slice(inner, start) => match (start, integer_key(key)) {
                (Some(start), Some(i)) => {
                    self.item_exprs(inner, &integer_key_of(i + *start as usize), scope, depth + 1)
                }
                _ => self.element_exprs(inner, scope, depth + 1),
            },
            Expr::Name(n) => {
                let mut out: Vec<(Expr, ScopeId)> = self
                    .bound_values(n, scope)
                    .into_iter()
                    .flat_map(|(e, s)| self.item_exprs(e, key, s, depth + 1))
                    .collect();
                // `def f(pairs: List[Tuple[A, B]])`, then `pairs[0]`: what the annotation promises.
                for (annotation, s) in self.param_annotations(n, scope) {
                    out.extend(self.item_exprs(annotation, key, s, depth + 1));
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// The expression written at position `index` of the tuple or list `expr` is (and the scope
    /// to read it in), following names bound once and nested unpacking; `None` when it is not
    /// written out in this file.
    fn element_expr(&self, expr: &Expr, index: u32, scope: ScopeId, depth: u32) -> Option<(Expr, ScopeId)> {
        if self.too_deep(depth) {
            return None;
        }
        match expr {
            Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => {
                items.get(index as usize).map(|e| (e.clone(), scope))
            }
            Expr::Element(inner, j) => {
                let (e, s) = self.element_expr(inner, *j, scope, depth + 1)?;
                self.element_expr(&e, index, s, depth + 1)
            }
            Expr::Slice(inner, Some(start)) => self.element_expr(inner, index.saturating_add(*start), scope, depth + 1),
            Expr::Name(n) => {
                let s = self.binding_scope(n, scope)?;
                let indices = self.scope_bindings[s as usize].get(n.as_str())?;
                let [only] = indices.as_slice() else { return None };
                match &self.syntax.scope(s).bindings[*only].1 {
                    Binding::Value(e) => self.element_expr(e, index, s, depth + 1),
                    Binding::Unpack(e, j) => {
                        let (e, s) = self.element_expr(e, *j, s, depth + 1)?;
                        self.element_expr(&e, index, s, depth + 1)
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `base` when `expr` is `base.method()` and `base` is a dict of builtin type (a literal, or a
    /// `dict`, `OrderedDict`, `defaultdict`; not an instance of a class of the code, whose
    /// `method` may be anything).
    fn dict_view<'e>(&self, expr: &'e Expr, method: &str, scope: ScopeId, depth: u32) -> Option<&'e Expr> {
        let base = method_receiver(expr, method)?;
        (!self.too_deep(depth) && is_builtin_dict(&self.eval_local(base, scope, depth + 1))).then_some(base)
    }

    /// [`Resolver::dict_view`] for a summary expression.
    fn dict_view_closed<'e>(
        &self,
        expr: &'e Expr,
        method: &str,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Option<&'e Expr> {
        let base = method_receiver(expr, method)?;
        let values =
            if self.too_deep(depth) { Vec::new() } else { self.eval_closed(base, module, self_class, depth + 1) };
        is_builtin_dict(&values).then_some(base)
    }

    /// `base[key]` with `key` a name, as `base["the constant"]` when the name holds one known
    /// constant there, else as any item of `base`.
    fn item_at(&self, base: &Expr, key: &Expr, scope: ScopeId, depth: u32) -> Expr {
        match self.constant_of(key, scope, depth + 1) {
            Some(k) => Expr::Item(Box::new(base.clone()), k),
            None => Expr::Subscript(Box::new(base.clone())),
        }
    }

    /// The one constant (see [`Expr::Constant`]) `expr` holds at every binding that reaches it:
    /// a literal, a name bound only to the same constant (through assignments, imports, and for
    /// a parameter its default and what this file's calls pass), else `None`.
    fn constant_of(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Option<Name> {
        if self.too_deep(depth) {
            return None;
        }
        let Expr::Name(n) = expr else {
            return match expr {
                Expr::Constant(k) => Some(k.clone()),
                _ => None,
            };
        };
        let s = self.binding_scope(n, scope)?;
        let sc = self.syntax.scope(s);
        let indices = self.scope_bindings[s as usize].get(n.as_str())?;
        // A function that declares the name `global` and assigns it can change it to anything.
        let rebound_by_function = |name: &Name| {
            self.syntax.scopes.iter().any(|f| f.globals.contains(name) && f.bindings.iter().any(|(b, _)| b == name))
        };
        if s == 0 && rebound_by_function(n) {
            return None;
        }
        let mut found: Option<Name> = None;
        let mut agree = |k: Name| -> bool {
            match &found {
                Some(f) if *f != k => false,
                _ => {
                    found = Some(k);
                    true
                }
            }
        };
        for i in self.syntax.live_bindings(s, indices) {
            match &sc.bindings[i].1 {
                Binding::Value(e) => {
                    if !agree(self.constant_of(e, s, depth + 1)?) {
                        return None;
                    }
                }
                Binding::Param(p) => {
                    // Only this file's calls are known: a function other modules can call may
                    // receive any key from them. A nested function's callers are all here.
                    let nested = sc.parent.is_some_and(|parent| self.syntax.scope(parent).kind == ScopeKind::Function);
                    let flows = self.param_flow.get(&(s, *p)).map(Vec::as_slice).unwrap_or(&[]);
                    if !nested || flows.len() >= MAX_PARAM_FLOWS {
                        return None;
                    }
                    let param = sc.params.get(*p as usize)?;
                    if let Some(default) = &param.default
                        && !agree(self.constant_of(default, sc.parent.unwrap_or(0), depth + 1)?)
                    {
                        return None;
                    }
                    for (caller, arg) in flows {
                        if !agree(self.constant_of(arg, *caller, depth + 1)?) {
                            return None;
                        }
                    }
                }
                Binding::Import(Import::Name { module, name }) => {
                    let m = absolute_module(module, &self.module, self.is_package)?;
                    if !agree(self.imported_constant(&m, name, depth + 1)?) {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        found
    }

    /// The constant module-level name `name` of `module` holds, if it holds one (re-exports
    /// followed).
    fn imported_constant(&self, module: &str, name: &str, depth: u32) -> Option<Name> {
        if self.too_deep(depth) {
            return None;
        }
        let summary = self.summary_for(module, name)?;
        let bindings = summary.name(name)?;
        let mut found: Option<Name> = None;
        for b in bindings {
            let k = match b {
                SumBinding::Value(Expr::Constant(k)) => k.clone(),
                SumBinding::ImportName { module: m, name: n } => self.imported_constant(m, n, depth + 1)?,
                // The variable unit a module-level assignment defines: its values are the
                // `Value` bindings beside it.
                SumBinding::Def { kind: DefKind::Variable, .. } => continue,
                _ => return None,
            };
            if found.as_ref().is_some_and(|f| *f != k) {
                return None;
            }
            found = Some(k);
        }
        found
    }

    /// `base["key"]`: the value under that key when `base` is (bound to) dicts with constant
    /// keys; any element otherwise.
    fn item_local(&self, base: &Expr, key: &str, scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match base {
            // `(f, g)[0]`: the element written at that index.
            Expr::Container(ContainerKind::List | ContainerKind::Tuple, items)
                if integer_key(key).is_some_and(|i| i < items.len()) =>
            {
                let i = integer_key(key).unwrap_or_default();
                items.get(i).map(|e| self.eval_local(e, scope, depth + 1)).unwrap_or_default()
            }
            // Item `i` of `seq[start:]` is item `start + i` of `seq`.
            Expr::Slice(inner, Some(start)) if integer_key(key).is_some() => {
                let i = integer_key(key).unwrap_or_default() + *start as usize;
                self.item_local(inner, &integer_key_of(i), scope, depth + 1)
            }
            // `table["a"]["b"]`: under "b" of what is written under "a".
            Expr::Item(inner, outer_key) => {
                let written = self.item_exprs(inner, outer_key, scope, depth + 1);
                if written.is_empty() {
                    return self.elements_local(base, scope, depth + 1);
                }
                let mut out = Vec::new();
                for (e, s) in written {
                    extend(&mut out, self.item_local(&e, key, s, depth + 1));
                }
                out
            }
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (k, e) in items {
                    if k == key {
                        extend(&mut out, self.eval_local(e, scope, depth + 1));
                    }
                }
                out
            }
            // `u: Tuple[Key, Val] = make()`, then `u[1]`: the annotation's position, as an
            // annotated variable's value is read (see [`Resolver::declared`]).
            Expr::Declared(ty, value) => {
                let promised = self.item_local(ty, key, scope, depth + 1);
                self.declared(promised, || self.item_local(value, key, scope, depth + 1), depth)
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else {
                    // Bound by no statement of this file: a star import, whose module's dict
                    // gives what it writes under the key.
                    let raw = self.name_values(n, scope, depth + 1);
                    return match self.variable_items(raw.clone(), key, depth + 1) {
                        Some(items) => items,
                        None => self.variable_elements(raw, depth + 1),
                    };
                };
                let indices = self.scope_bindings[s as usize].get(n.as_str()).cloned().unwrap_or_default();
                // `kwargs["key"]` in a function: the value each call passes under that key.
                if let [only] = indices.as_slice()
                    && let Binding::Param(p) = &self.syntax.scope(s).bindings[*only].1
                    && self.syntax.scope(s).params.get(*p as usize).is_some_and(|p| p.keywords)
                {
                    let mut out = Vec::new();
                    for (caller, arg) in self.param_flow.get(&(s, *p)).into_iter().flatten() {
                        extend(&mut out, self.item_local(arg, key, *caller, depth + 1));
                    }
                    return out;
                }
                let by_key = integer_key(key).is_some();
                // `u[1]` with `u: Tuple[Key, Val]` a parameter: the position its annotation gives.
                if by_key
                    && let [only] = indices.as_slice()
                    && let Binding::Param(p) = &self.syntax.scope(s).bindings[*only].1
                    && let Some(annotation @ Expr::Container(ContainerKind::Tuple, _)) =
                        self.syntax.scope(s).params.get(*p as usize).and_then(|p| p.annotation.as_ref())
                {
                    let promised = self.item_local(annotation, key, s, depth + 1);
                    return self.declared_position(promised, || self.elements_local(base, scope, depth + 1), depth);
                }
                // `u = make()`, `p = pairs[0]`, `for p in pairs`, then `p[1]`: the element at
                // that position, as unpacking `p` gives it.
                let positional = |b: &Binding| {
                    matches!(
                        b,
                        Binding::Iter(_)
                            | Binding::Unpack(..)
                            | Binding::Value(Expr::Item(..) | Expr::Call(_) | Expr::Element(..))
                    )
                };
                if let (true, Some(i)) = (!indices.is_empty(), integer_key(key))
                    && indices.iter().all(|&b| positional(&self.syntax.scope(s).bindings[b].1))
                    && let Ok(i) = u32::try_from(i)
                {
                    let element = self.element_at(base, &[i], scope, depth + 1);
                    return if element.is_empty() { self.elements_local(base, scope, depth + 1) } else { element };
                }
                // A dict written out with constant keys, or (for an integer key) a literal list or
                // tuple never added to (or a local annotated as a tuple): the item is the one
                // written there.
                let all_keyed = indices.iter().all(|&i| match &self.syntax.scope(s).bindings[i].1 {
                    Binding::Value(Expr::Keyed(_)) => true,
                    Binding::Value(Expr::Container(ContainerKind::List | ContainerKind::Tuple, _)) => by_key,
                    Binding::Value(Expr::Slice(_, Some(_))) => by_key,
                    Binding::Value(Expr::Declared(ty, _)) => {
                        by_key && matches!(ty.as_ref(), Expr::Container(ContainerKind::Tuple, _))
                    }
                    _ => false,
                });
                if !all_keyed {
                    // `TABLE["b"]` with `TABLE` imported: what its module writes under the key.
                    // Only a name this file binds by imports alone: the module's own names are
                    // read as they are at the site's line, which its summary (the final
                    // bindings) does not say.
                    let imported = !indices.is_empty()
                        && indices.iter().all(|&i| matches!(self.syntax.scope(s).bindings[i].1, Binding::Import(_)));
                    let raw = if s == 0 && imported { self.name_values(n, s, depth + 1) } else { Vec::new() };
                    return match self.variable_items(raw, key, depth + 1) {
                        Some(items) => items,
                        None => self.elements_local(base, scope, depth + 1),
                    };
                }
                let mut out = Vec::new();
                for i in indices {
                    if let Binding::Value(e) = &self.syntax.scope(s).bindings[i].1 {
                        extend(&mut out, self.item_local(e, key, s, depth + 1));
                    }
                }
                out
            }
            // `settings.TABLE["b"]`: what the module writes under the key.
            Expr::Attr(inner, attr) => {
                let mut raw = Vec::new();
                for v in self.eval_local(inner, scope, depth + 1) {
                    extend(&mut raw, self.attr_of(&v, attr, depth + 1));
                }
                match self.variable_items(raw, key, depth + 1) {
                    Some(items) => items,
                    None => self.elements_local(base, scope, depth + 1),
                }
            }
            _ => self.elements_local(base, scope, depth + 1),
        }
    }

    /// What iterating over `name`, bound in scope `s`, gives: the elements of what its
    /// bindings hold (see `elements_local`, which memoises this).
    fn name_elements(&self, n: &Name, s: ScopeId, depth: u32) -> Vec<Value> {
        let mut out = Vec::new();
        let indices = self.scope_bindings[s as usize].get(n.as_str()).cloned().unwrap_or_default();
        for i in indices {
            match &self.syntax.scope(s).bindings[i].1 {
                Binding::Value(e) => extend(&mut out, self.elements_local(e, s, depth + 1)),
                Binding::Param(p) => {
                    let annotation = self.syntax.scope(s).params.get(*p as usize).and_then(|p| p.annotation.as_ref());
                    if let Some(annotation) = annotation {
                        extend(&mut out, self.elements_local(annotation, s, depth + 1));
                    }
                    if let Some(flows) = self.param_flow.get(&(s, *p)) {
                        for (caller, arg) in flows {
                            extend(&mut out, self.elements_local(arg, *caller, depth + 1));
                        }
                    }
                }
                // `for key, group in pairs: for item in group`: what an unpacked or iterated
                // instance's iterator protocol gives (and a string's characters).
                binding @ (Binding::Unpack(..) | Binding::Iter(_)) => {
                    extend(&mut out, self.value_elements(self.binding_values(binding, s, depth + 1), depth + 1));
                }
                // Looked up for what the lookup records (the other module is a dependency); the
                // elements of an imported container are not followed.
                Binding::Import(_) => {
                    let _ = self.binding_values(&self.syntax.scope(s).bindings[i].1, s, depth + 1);
                }
                _ => {}
            }
        }
        if out.is_empty() && s == 0 {
            for v in self.module_member(&self.module, n, depth + 1) {
                if let Value::Var(t) = v {
                    for e in self.var_exprs(&t).iter() {
                        extend(&mut out, self.elements_closed(e, &t.module, None, depth + 1));
                    }
                }
            }
        }
        out
    }

    /// What iterating over (or subscripting) `expr` yields.
    fn elements_local(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::ItemAt(base, key) => {
                let item = self.item_at(base, key, scope, depth + 1);
                self.elements_local(&item, scope, depth + 1)
            }
            Expr::Element(inner, j) => match self.element_expr(inner, *j, scope, depth + 1) {
                Some((e, s)) => self.elements_local(&e, s, depth + 1),
                None => Vec::new(),
            },
            Expr::Slice(inner, _) => self.elements_local(inner, scope, depth + 1),
            // `table[i][j]`: the elements of the containers written out as `table`'s elements.
            Expr::Subscript(inner) => {
                let mut out = Vec::new();
                for (e, s) in self.element_exprs(inner, scope, depth + 1) {
                    extend(&mut out, self.elements_local(&e, s, depth + 1));
                }
                out
            }
            // `table["key"][i]`: the elements of the containers written out under that key.
            Expr::Item(inner, key) => {
                let mut out = Vec::new();
                for (e, s) in self.item_exprs(inner, key, scope, depth + 1) {
                    extend(&mut out, self.elements_local(&e, s, depth + 1));
                }
                out
            }
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (_, e) in items {
                    extend(&mut out, self.eval_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Container(_, items) | Expr::Added(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else {
                    return Vec::new();
                };
                self.memoised(&self.local_elements, (s, n.clone()), || self.name_elements(n, s, depth))
            }
            Expr::Attr(base, attr) => {
                let mut out = Vec::new();
                for b in self.eval_local(base, scope, depth + 1) {
                    extend(&mut out, self.variable_elements(self.attr_of(&b, attr, depth + 1), depth + 1));
                }
                out
            }
            Expr::Call(callee) => {
                let mut out = Vec::new();
                if let Expr::Attr(base, method) = callee.as_ref()
                    && is_element_preserving(method)
                {
                    extend(&mut out, self.elements_local(base, scope, depth + 1));
                }
                for c in self.eval_local(callee, scope, depth + 1) {
                    match &c {
                        Value::Lambda(l) => {
                            for r in &self.syntax.scope(*l).returns {
                                extend(&mut out, self.elements_local(r, *l, depth + 1));
                            }
                        }
                        _ => extend(&mut out, self.call_elements(&c, depth + 1)),
                    }
                }
                out
            }
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.elements_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Declared(ty, value) => {
                let promised = self.elements_local(ty, scope, depth + 1);
                let assigned = || self.elements_local(value, scope, depth + 1);
                self.declared(promised, assigned, depth)
            }
            // A string's characters are strings, a bytes object's items integers (`text[0]`
            // with `text = "..."` or `text: str`).
            Expr::Literal(_) | Expr::Constant(_) | Expr::Instance(_) => {
                self.value_elements(self.eval_local(expr, scope, depth + 1), depth)
            }
            _ => Vec::new(),
        }
    }

    // ---- the graph -----------------------------------------------------------------------

    fn unit_of_scope(&self, scope: ScopeId) -> String {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            // Comprehensions belong to their enclosing unit; a lambda is a unit of its own.
            if sc.kind != ScopeKind::Anonymous || sc.def.is_some() {
                return match sc.def {
                    Some(d) => format!("{}.{}", self.module, self.syntax.def(d).path),
                    None => self.module.to_string(),
                };
            }
            match sc.parent {
                Some(p) => s = p,
                None => return self.module.to_string(),
            }
        }
    }

    /// The targets a call of `values` reaches: functions, classes with their `__init__`,
    /// `__call__` of instances, externals. `None` when nothing is known.
    fn call_targets(&self, values: &[Value]) -> (Vec<String>, bool) {
        let mut targets = Vec::new();
        let mut resolved = false;
        for v in values {
            match v {
                Value::Function(t) => {
                    resolved = true;
                    targets.push(t.id());
                    // A decorated function is still called by name, and its wrapper runs first.
                    targets.extend(self.wrappers(t).iter().map(Target::id));
                }
                Value::Undecorated(t) => {
                    resolved = true;
                    targets.push(t.id());
                }
                Value::Class(t) => {
                    resolved = true;
                    targets.push(t.id());
                    // The `__init__` the MRO finds first: the code's own, or an external base's
                    // (`class A(ext.Base)` without one of its own runs `ext.Base.__init__`).
                    for init in self.deref(self.class_attr(t, "__init__", None, 0), 0) {
                        match init {
                            Value::Function(i) => targets.push(i.id()),
                            Value::External(x) if runs_external_init(&x) => targets.push(x.to_string()),
                            _ => {}
                        }
                    }
                }
                Value::Instance(t) => {
                    for call in self.deref(self.class_attr(t, "__call__", None, 0), 0) {
                        match call {
                            Value::Function(c) => {
                                resolved = true;
                                targets.push(c.id());
                            }
                            Value::External(x) => {
                                resolved = true;
                                targets.push(x.to_string());
                            }
                            _ => {}
                        }
                    }
                }
                Value::External(x) => {
                    resolved = true;
                    targets.push(x.to_string());
                }
                Value::Lambda(scope) => {
                    resolved = true;
                    if let Some(def) = self.syntax.scope(*scope).def {
                        targets.push(format!("{}.{}", self.module, self.syntax.def(def).path));
                    }
                }
                Value::ExternalInstance(_)
                | Value::Module(_)
                | Value::Var(_)
                | Value::Super(..)
                | Value::Property(..) => {}
            }
        }
        (targets, resolved)
    }

    /// Records argument flow into this file's functions; returns whether anything new flowed.
    fn flow_arguments(&mut self, call: &CallSite, scope: ScopeId, values: &[Value]) -> bool {
        let mut changed = false;
        // The receiver of a method call flows into the method's `self`/`cls`.
        if let Expr::Attr(base, attr) = &call.callee {
            // Each receiver class, with the class a `super()` lookup starts after.
            let receivers: Vec<(Target, Option<Target>)> = self
                .eval_local(base, scope, 0)
                .into_iter()
                .filter_map(|v| match v {
                    Value::Instance(k) | Value::Class(k) => Some((k, None)),
                    Value::Super(written_in, k) => Some((k, Some(written_in))),
                    _ => None,
                })
                .collect();
            for v in values {
                let Value::Function(t) = v else { continue };
                if *t.module != *self.module {
                    continue;
                }
                let Some(body) = self.defs_by_path.get(&*t.path).and_then(|&d| self.syntax.def(d).body) else {
                    continue;
                };
                // A receiver reaches this method only if its class's lookup finds this one (with
                // `element_class.create()` over several classes, each has its own `create`).
                let reaching: Vec<Target> = receivers
                    .iter()
                    .filter(|(k, after)| {
                        self.deref(self.class_attr(k, attr, after.as_ref(), 0), 0)
                            .iter()
                            .any(|m| matches!(m, Value::Function(f) if f == t))
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &reaching {
                    let entry = self.receiver_flow.entry(body).or_default();
                    if entry.len() < 16 && !entry.contains(k) {
                        entry.push(k.clone());
                        changed = true;
                    }
                }
            }
        }
        for v in values {
            // A lambda's parameters take the arguments as a function's do.
            if let Value::Lambda(l) = v {
                changed |= self.flow_into(call, scope, *l, 0);
                continue;
            }
            let (target, bound) = match v {
                Value::Function(t) | Value::Undecorated(t) => (t.clone(), self.callee_is_bound(&call.callee, scope, 0)),
                Value::Class(t) => {
                    let init = self
                        .deref(self.class_attr(t, "__init__", None, 0), 0)
                        .into_iter()
                        .find_map(|i| if let Value::Function(f) = i { Some(f) } else { None });
                    match init {
                        Some(f) => (f, true),
                        None => continue,
                    }
                }
                _ => continue,
            };
            if *target.module != *self.module {
                continue;
            }
            let Some(&def) = self.defs_by_path.get(&*target.path) else {
                continue;
            };
            let def = self.syntax.def(def);
            let Some(body) = def.body else { continue };
            let flags = method_flags(&def.decorators);
            let offset = usize::from(def.kind == DefKind::Method && !flags.is_static && (bound || flags.is_class));
            changed |= self.flow_into(call, scope, body, offset);
        }
        changed
    }

    /// Whether calling `callee` calls a method bound to an instance (its first parameter is
    /// taken): `obj.method(...)`, or a name holding `obj.method` (assigned, or passed in as an
    /// argument by a call in this file). `Cls.method(obj, ...)` is not bound.
    fn callee_is_bound(&self, callee: &Expr, scope: ScopeId, depth: u32) -> bool {
        if self.too_deep(depth) {
            return false;
        }
        match callee {
            Expr::Attr(base, _) => {
                let receivers = self.eval_local(base, scope, depth + 1);
                receivers.is_empty() || receivers.iter().any(|v| !matches!(v, Value::Class(_)))
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else { return false };
                let Some(indices) = self.scope_bindings[s as usize].get(n.as_str()) else { return false };
                indices.iter().any(|&i| match &self.syntax.scope(s).bindings[i].1 {
                    Binding::Value(e) => self.callee_is_bound(e, s, depth + 1),
                    Binding::Param(p) => self.param_flow.get(&(s, *p)).is_some_and(|flows| {
                        flows.iter().any(|(caller, arg)| self.callee_is_bound(arg, *caller, depth + 1))
                    }),
                    _ => false,
                })
            }
            _ => false,
        }
    }

    /// Records the flow of `call`'s arguments (made in `scope`) into the parameters of the
    /// function or lambda whose body is `body`; `offset` skips a bound `self`/`cls`.
    fn flow_into(&mut self, call: &CallSite, scope: ScopeId, body: ScopeId, offset: usize) -> bool {
        let mut changed = false;
        let sc = self.syntax.scope(body);
        let mut flows: Vec<(u32, Expr)> = Vec::new();
        for (i, arg) in call.args.iter().enumerate() {
            let p = i + offset;
            if let Some(param) = sc.params.get(p)
                && !param.variadic
            {
                flows.push((p as u32, arg.clone()));
            }
        }
        // Keywords no named parameter takes go to `**kwargs`, as the dict they arrive in.
        let mut unclaimed: Vec<(Name, Expr)> = Vec::new();
        for (name, arg) in &call.keywords {
            match sc.params.iter().position(|p| &p.name == name && !p.variadic) {
                Some(p) => flows.push((p as u32, arg.clone())),
                None => unclaimed.push((name.clone(), arg.clone())),
            }
        }
        if let (Some(p), false) = (sc.params.iter().position(|p| p.keywords), unclaimed.is_empty()) {
            flows.push((p as u32, Expr::Keyed(unclaimed)));
        }
        for (p, arg) in flows {
            if !is_flow_worthy(&arg) {
                continue;
            }
            let entry = self.param_flow.entry((body, p)).or_default();
            if entry.len() < MAX_PARAM_FLOWS && !entry.iter().any(|(s, e)| *s == scope && *e == arg) {
                entry.push((scope, arg));
                changed = true;
            }
        }
        changed
    }

    fn run(&mut self, path: String, revision: fresco_graph::Revision) -> FileGraph {
        // Argument and receiver flow into this file's functions, to a small fixpoint: each round
        // follows values one call further.
        for _ in 0..3 {
            let mut changed = false;
            for scope in 0..self.syntax.scopes.len() as ScopeId {
                for call in &self.syntax.scope(scope).calls {
                    let values = self.eval_local(&call.callee, scope, 0);
                    changed |= self.flow_arguments(call, scope, &values);
                }
            }
            if !changed {
                break;
            }
            self.local_names.borrow_mut().clear();
            self.local_elements.borrow_mut().clear();
            self.call_results.borrow_mut().clear();
            self.variables.borrow_mut().clear();
            self.local_element_paths.borrow_mut().clear();
            self.module_element_paths.borrow_mut().clear();
            self.module_body_names.borrow_mut().clear();
        }

        let mut edges: Vec<Edge> = Vec::new();
        // Edges already added, by hash (indices into `edges`): the first of equal edges is kept.
        let mut seen: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        let mut add = |edges: &mut Vec<Edge>, src: &str, dst: String, kind: EdgeKind, line: Option<u32>| {
            if src == dst && kind != EdgeKind::Calls {
                return;
            }
            let hash = {
                use std::hash::BuildHasher;

                rustc_hash::FxBuildHasher.hash_one((src, dst.as_str(), kind, line))
            };
            let same = seen.entry(hash).or_default();
            if same.iter().any(|&i| {
                let e = &edges[i as usize];
                e.src == src && e.dst == dst && e.kind == kind && e.line == line
            }) {
                return;
            }
            same.push(edges.len() as u32);
            edges.push(Edge { src: src.to_string(), dst, kind, line });
        };
        let mut unresolved = Vec::new();
        let mut arg_flows: Vec<fresco_graph::ArgFlow> = Vec::new();
        let mut param_calls: Vec<fresco_graph::ParamCall> = Vec::new();
        let module_id = self.module.to_string();

        // Attributes a base's property takes the place of are no units (computed once: each
        // needs the class's MRO).
        let shadowed: Vec<bool> = self.syntax.defs.iter().map(|d| self.shadowed_by_property(d)).collect();
        let kept_defs = || self.syntax.defs.iter().zip(&shadowed).filter(|(_, s)| !**s).map(|(d, _)| d);

        // contains
        for def in kept_defs() {
            let parent = match def.parent {
                Some(p) => format!("{}.{}", self.module, self.syntax.def(p).path),
                None => module_id.clone(),
            };
            add(&mut edges, &parent, format!("{}.{}", self.module, def.path), EdgeKind::Contains, None);
        }

        for scope_id in 0..self.syntax.scopes.len() as ScopeId {
            let scope = self.syntax.scope(scope_id);
            let unit = self.unit_of_scope(scope_id);

            // imports
            for import in &scope.imports {
                let Some(module) = absolute_module(&import.module, &self.module, self.is_package) else {
                    unresolved.push(Unresolved {
                        caller: module_id.clone(),
                        callee: format!("import {}{}", ".".repeat(import.module.level as usize), import.module.name),
                        line: import.line,
                    });
                    continue;
                };
                let line = Some(import.line);
                if !import.is_from || import.names.iter().any(|n| n == "*") {
                    match self.module_value(&module) {
                        Some(Value::Module(m)) if matches!(self.lookup(&m).0, ModuleLookup::File(_)) => {
                            add(&mut edges, &module_id, m.to_string(), EdgeKind::Imports, line)
                        }
                        Some(Value::External(x)) => add(&mut edges, &module_id, x.to_string(), EdgeKind::Imports, line),
                        Some(_) => {}
                        None => unresolved.push(Unresolved {
                            caller: module_id.clone(),
                            callee: format!("import {module}"),
                            line: import.line,
                        }),
                    }
                }
                for name in import.names.iter().filter(|n| *n != "*") {
                    let values = self.import_name(&module, name, 0);
                    if values.is_empty() {
                        unresolved.push(Unresolved {
                            caller: module_id.clone(),
                            callee: format!("from {module} import {name}"),
                            line: import.line,
                        });
                        // The name is not found, but the module is a file of the repository (one
                        // skipped as too large or not UTF-8, or one that makes the name at run
                        // time): the statement still imports from it.
                        if matches!(self.lookup(&module).0, ModuleLookup::File(_)) {
                            add(&mut edges, &module_id, module.to_string(), EdgeKind::Imports, line);
                        }
                    }
                    // A name the module only re-exports (`from .compat import urlparse`, where
                    // `compat` imports it from `urllib.parse`) reaches its definition, but the
                    // statement still runs and depends on the module it names: removing the
                    // re-export breaks it. So it imports that module too, and `importers` and
                    // `impact` of the module find it. A name defined in the module, or one of its
                    // submodules, is found through the definition already.
                    let from_elsewhere = values.iter().any(|v| match v {
                        Value::Class(t) | Value::Function(t) | Value::Var(t) => *t.module != *module,
                        Value::Module(m) => m.strip_prefix(&*module).is_none_or(|rest| !rest.starts_with('.')),
                        Value::External(_) => true,
                        _ => false,
                    });
                    if from_elsewhere && matches!(self.lookup(&module).0, ModuleLookup::File(_)) {
                        add(&mut edges, &module_id, module.to_string(), EdgeKind::Imports, line);
                    }
                    for v in values {
                        let dst = match v {
                            Value::Module(m) => {
                                if matches!(self.lookup(&m).0, ModuleLookup::File(_)) {
                                    Some(m.to_string())
                                } else {
                                    None
                                }
                            }
                            Value::Class(t) | Value::Function(t) | Value::Var(t) => Some(t.id()),
                            Value::External(x) => Some(x.to_string()),
                            _ => None,
                        };
                        if let Some(dst) = dst {
                            add(&mut edges, &module_id, dst, EdgeKind::Imports, line);
                        }
                    }
                }
            }

            // inherits
            if scope.kind == ScopeKind::Class {
                let parent = scope.parent.unwrap_or(0);
                for (base, line) in &scope.bases {
                    // A base is read as the class statement runs, at its line.
                    self.module_site_line.set(self.runs_with_module_body(parent).then_some(*line));
                    let bases = self.eval_local(base, parent, 0);
                    self.module_site_line.set(None);
                    for v in bases {
                        match v {
                            Value::Class(t) => add(&mut edges, &unit, t.id(), EdgeKind::Inherits, Some(*line)),
                            Value::External(x) => {
                                add(&mut edges, &unit, x.to_string(), EdgeKind::Inherits, Some(*line))
                            }
                            _ => {}
                        }
                    }
                }
            }

            // calls
            for call in &scope.calls {
                let mut hits = SiteHits::default();
                self.module_site_line.set(self.runs_with_module_body(scope_id).then_some(call.line));
                let values = self.eval_site(&call.callee, scope_id, Some(&mut hits), 0);
                self.module_site_line.set(None);
                let (targets, resolved) = self.call_targets(&values);
                for t in targets {
                    add(&mut edges, &unit, t, EdgeKind::Calls, Some(call.line));
                }
                self.export_arg_flows(call, scope_id, &values, &mut arg_flows);
                if let Some(pc) = self.param_call(call, scope_id, &unit) {
                    param_calls.push(pc);
                }
                self.add_hits(&mut edges, &mut add, &unit, &hits, call.line);
                // `map(f, items)`, `sorted(items, key=f)`: the builtin calls `f`.
                for callback in builtin_callbacks(&values, call) {
                    let callables: Vec<Value> = self
                        .eval_local(callback, scope_id, 0)
                        .into_iter()
                        .filter(|v| {
                            matches!(v, Value::Function(_) | Value::Undecorated(_) | Value::Class(_) | Value::Lambda(_))
                        })
                        .collect();
                    for t in self.call_targets(&callables).0 {
                        add(&mut edges, &unit, t, EdgeKind::Calls, Some(call.line));
                    }
                }
                if !resolved {
                    unresolved.push(Unresolved {
                        caller: unit.clone(),
                        callee: callee_text(&self.source, call.callee_span),
                        line: call.line,
                    });
                }
            }

            // raise E (without a call): E is instantiated.
            for (expr, line) in &scope.raises {
                if matches!(expr, Expr::Call(_)) {
                    continue;
                }
                let values = self.eval_local(expr, scope_id, 0);
                let classes: Vec<Value> = values.into_iter().filter(|v| matches!(v, Value::Class(_))).collect();
                let (targets, _) = self.call_targets(&classes);
                for t in targets {
                    add(&mut edges, &unit, t, EdgeKind::Calls, Some(*line));
                }
            }

            // `for x in obj`: the iterator protocol's methods are called, on the iterable's line.
            // `with` statements: the context manager's `__enter__` and `__exit__` run there.
            for (expr, line, is_async) in &scope.contexts {
                let (enter, exit) = if *is_async { ("__aenter__", "__aexit__") } else { ("__enter__", "__exit__") };
                for value in self.eval_local(expr, scope_id, 0) {
                    let Value::Instance(t) = &value else { continue };
                    for name in [enter, exit] {
                        for m in self.deref(self.class_attr(t, name, None, 1), 1) {
                            if let Value::Function(f) = m {
                                add(&mut edges, &unit, f.id(), EdgeKind::Calls, Some(*line));
                            }
                        }
                    }
                }
            }
            for (expr, line, is_async) in &scope.iterations {
                let values = self.eval_local(expr, scope_id, 0);
                let (methods, _) = self.iterate_instances(&values, *is_async, 0);
                for m in methods {
                    if let Value::Function(t) = m {
                        add(&mut edges, &unit, t.id(), EdgeKind::Calls, Some(*line));
                    }
                }
            }

            // references
            for access in &scope.accesses {
                let mut hits = SiteHits::default();
                self.module_site_line.set(self.runs_with_module_body(scope_id).then_some(access.line));
                let values = self.eval_site(&access.expr, scope_id, Some(&mut hits), 0);
                // The properties read on the way to the attribute assigned (`self.a` in
                // `self.a.b = v`) are read: their getters run. The evaluation records them first.
                let read_on_the_way = match &access.expr {
                    Expr::Attr(base, _) if access.write && !hits.properties.is_empty() => {
                        let mut base_hits = SiteHits::default();
                        self.eval_site(base, scope_id, Some(&mut base_hits), 0);
                        base_hits.properties.len().min(hits.properties.len())
                    }
                    _ => hits.properties.len(),
                };
                self.module_site_line.set(None);
                if access.write {
                    // Assigning through a property calls its setter. Without one nothing is
                    // called: a `cached_property`'s value is stored in the instance, and a
                    // getter-only property refuses the assignment (its getter does not run).
                    let assigned = hits.properties.split_off(read_on_the_way);
                    for p in assigned {
                        let made = hits.setters.iter().find(|(getter, _)| *getter == p).map(|(_, s)| s.clone());
                        if let Some(setter) = made.or_else(|| self.property_setter(&p)) {
                            hits.properties.push(setter);
                        }
                    }
                }
                self.add_hits(&mut edges, &mut add, &unit, &hits, access.line);
                // A class or function *named* here is referenced; one that merely flowed in
                // through a parameter is not named by this code.
                if !access.write && !self.head_is_param(&access.expr, scope_id) {
                    for v in values {
                        match v {
                            Value::Class(t) | Value::Function(t) => {
                                add(&mut edges, &unit, t.id(), EdgeKind::References, Some(access.line))
                            }
                            _ => {}
                        }
                    }
                }
            }
        }

        let mut units = Vec::with_capacity(self.syntax.defs.len() + 1);
        units.push(Unit {
            id: module_id.clone(),
            name: module_id.clone(),
            kind: UnitKind::Module,
            start_line: 1,
            end_line: self.syntax.line_count.max(1),
            start_byte: 0,
            end_byte: self.syntax.byte_len,
            signature: None,
            docstring: self.syntax.docstring.map(|range| docstring_text(&self.source, range)),
        });
        let mut defs: Vec<&Def> = kept_defs().collect();
        defs.sort_by_key(|d| (d.start_byte, std::cmp::Reverse(d.end_byte)));
        for def in defs {
            units.push(Unit {
                id: format!("{}.{}", self.module, def.path),
                name: format!("{}.{}", self.module, strip_suffixes(&def.path)),
                kind: match def.kind {
                    DefKind::Class => UnitKind::Class,
                    DefKind::Function | DefKind::Lambda => UnitKind::Function,
                    DefKind::Method => UnitKind::Method,
                    DefKind::Variable => UnitKind::Variable,
                },
                start_line: def.start_line,
                end_line: def.end_line,
                start_byte: def.start_byte,
                end_byte: def.end_byte,
                signature: def.signature(&self.source),
                docstring: def.docstring(&self.source),
            });
        }
        unresolved.sort_by(|a: &Unresolved, b| (a.line, &a.callee).cmp(&(b.line, &b.callee)));
        unresolved.dedup();
        FileGraph {
            path,
            revision,
            module: module_id,
            parse_errors: self.syntax.parse_errors,
            first_parse_error: self.syntax.first_error.as_ref().map(|(at, why)| parse_error_at(&self.source, *at, why)),
            skipped: None,
            units,
            edges,
            unresolved,
            arg_flows,
            param_calls,
            resolution_cut: self.steps.get() > self.step_budget,
        }
    }

    /// Records the callables `call` passes to functions of other modules (see
    /// [`fresco_graph::ArgFlow`]): what calling each argument reaches, by the parameter it binds.
    fn export_arg_flows(
        &self,
        call: &CallSite,
        scope: ScopeId,
        callees: &[Value],
        out: &mut Vec<fresco_graph::ArgFlow>,
    ) {
        if call.args.is_empty() && call.keywords.is_empty() {
            return;
        }
        // The functions of other modules this call reaches, with the position its first
        // argument takes there and the parameters their code calls (only those are worth an
        // export: most calls pass nothing that will be called).
        let mut receivers: Vec<(Target, u32, Vec<(u32, Name)>)> = Vec::new();
        let mut add = |t: Target, first: Option<u32>| {
            let called = self.called_params(&t);
            if !called.is_empty() {
                let first = first.unwrap_or_else(|| {
                    let bound = self.callee_is_bound(&call.callee, scope, 0);
                    self.first_argument_position(&t, bound)
                });
                receivers.push((t, first, called));
            }
        };
        for v in callees {
            match v {
                Value::Function(t) | Value::Undecorated(t) if *t.module != *self.module => add(t.clone(), None),
                Value::Class(c) => {
                    for init in self.deref(self.class_attr(c, "__init__", None, 0), 0) {
                        if let Value::Function(i) = init
                            && *i.module != *self.module
                        {
                            add(i, Some(1));
                        }
                    }
                }
                _ => {}
            }
        }
        if receivers.is_empty() {
            return;
        }
        let reached = |arg: &Expr| -> Vec<String> {
            let callables: Vec<Value> = self
                .eval_local(arg, scope, 0)
                .into_iter()
                .filter(|v| {
                    matches!(
                        v,
                        Value::Function(_)
                            | Value::Undecorated(_)
                            | Value::Class(_)
                            | Value::Lambda(_)
                            | Value::External(_)
                    )
                })
                .collect();
            self.call_targets(&callables).0
        };
        for (callee, first, called) in &receivers {
            for (i, arg) in call.args.iter().enumerate() {
                let position = i as u32 + first;
                if !is_flow_worthy(arg) || !called.iter().any(|(p, _)| *p == position) {
                    continue;
                }
                let targets = reached(arg);
                if !targets.is_empty() {
                    let slot = fresco_graph::ArgSlot::Position(position);
                    out.push(fresco_graph::ArgFlow { callee: callee.id(), slot, targets });
                }
            }
            for (name, arg) in call.keywords.iter() {
                if !called.iter().any(|(_, n)| n == name) {
                    continue;
                }
                let targets = reached(arg);
                if !targets.is_empty() {
                    let slot = fresco_graph::ArgSlot::Keyword(name.to_string());
                    out.push(fresco_graph::ArgFlow { callee: callee.id(), slot, targets });
                }
            }
        }
    }

    /// The parameters function `t`'s code calls (see `FunctionSummary::called_params`).
    fn called_params(&self, t: &Target) -> Vec<(u32, Name)> {
        self.summary_for(&t.module, &t.path)
            .and_then(|s| s.function(&t.path).map(|f| f.called_params.clone()))
            .unwrap_or_default()
    }

    /// The parameter position a call's first argument binds in function `t` of another module: 1
    /// for a method called on an instance (or a classmethod), else 0.
    fn first_argument_position(&self, t: &Target, bound: bool) -> u32 {
        let Some(owner) = t.owner() else { return 0 };
        let is_method = self.summary_for(&owner.module, &owner.path).is_some_and(|s| s.class(&owner.path).is_some());
        if !is_method {
            return 0;
        }
        let flags = self.method_flags(t);
        u32::from(!flags.is_static && (flags.is_class || bound))
    }

    /// `call` as a call of a parameter (`func(...)` where `func` is a parameter of the enclosing
    /// function or of one enclosing it), for the join with other files' argument flows.
    fn param_call(&self, call: &CallSite, scope: ScopeId, unit: &str) -> Option<fresco_graph::ParamCall> {
        let Expr::Name(name) = &call.callee else { return None };
        let (function, index) = crate::summary::called_param(self.syntax, name, scope)?;
        let def = self.syntax.def(self.syntax.scope(function).def?);
        Some(fresco_graph::ParamCall {
            caller: unit.to_string(),
            function: format!("{}.{}", self.module, def.path),
            param: index,
            name: name.to_string(),
            line: call.line,
        })
    }

    /// Records the repository's modules among `values` (a file of this repository, not a
    /// namespace package or an external module) as read.
    fn note_modules(&self, values: &[Value], hits: &mut SiteHits) {
        for v in values {
            if let Value::Module(m) = v
                && matches!(self.lookup(m).0, ModuleLookup::File(_))
                && !hits.modules.contains(m)
            {
                hits.modules.push(m.clone());
            }
        }
    }

    fn add_hits(
        &self,
        edges: &mut Vec<Edge>,
        add: &mut impl FnMut(&mut Vec<Edge>, &str, String, EdgeKind, Option<u32>),
        unit: &str,
        hits: &SiteHits,
        line: u32,
    ) {
        for v in &hits.vars {
            add(edges, unit, v.id(), EdgeKind::References, Some(line));
        }
        for p in &hits.properties {
            add(edges, unit, p.id(), EdgeKind::Calls, Some(line));
        }
        // A module read through the name an import bound is a module-level name read, as a
        // variable is.
        for m in &hits.modules {
            // Code inside a module reading that module by name (`pkg` in `pkg/__init__.py`)
            // references nothing outside itself.
            let inside = unit.strip_prefix(&**m).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
            if !inside {
                add(edges, unit, m.to_string(), EdgeKind::References, Some(line));
            }
        }
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

/// The bases that make a class an enumeration, whose class attributes are its members.
const ENUM_BASES: &[&str] =
    &["enum.Enum", "enum.IntEnum", "enum.StrEnum", "enum.Flag", "enum.IntFlag", "enum.ReprEnum"];

/// Whether a class attribute of an enumeration named `attr` is one of its members: not a
/// `_sunder_` or `__dunder__` name (`_ignore_`, `__slots__`), and not private.
fn is_enum_member_name(attr: &str) -> bool {
    !attr.starts_with('_')
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

/// Whether an instance of external type `ty` can have attribute `attr`: false only for the
/// builtin value types (`builtins.str`, `builtins.dict`, ...) that do not define it.
fn builtin_has_attr(ty: &str, attr: &str) -> bool {
    match ty.strip_prefix("builtins.").and_then(crate::builtin_members::members) {
        Some(members) => members.binary_search(&attr).is_ok(),
        None => true,
    }
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

/// The arguments a builtin higher-order function calls, when `values` (what the call site's
/// callee is) include it: every positional argument of `map` and `filter` (whichever position
/// the function is in, the iterables are not callable), the first of `functools.reduce` and the
/// `itertools` filters, the `key=` of `sorted`, `min`, `max` and `list.sort`.
fn builtin_callbacks<'c>(values: &[Value], call: &'c CallSite) -> Vec<&'c Expr> {
    let mut out: Vec<&Expr> = Vec::new();
    for v in values {
        let Value::External(x) = v else { continue };
        match &**x {
            "builtins.map" | "builtins.filter" => out.extend(call.args.iter()),
            "functools.reduce"
            | "itertools.starmap"
            | "itertools.filterfalse"
            | "itertools.takewhile"
            | "itertools.dropwhile" => out.extend(call.args.first()),
            "builtins.sorted" | "builtins.min" | "builtins.max" | "builtins.list.sort" => {
                out.extend(call.keywords.iter().filter(|(k, _)| k == "key").map(|(_, e)| e))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod builtin_attr_tests {
    use super::builtin_has_attr;

    #[test]
    fn builtin_value_types_have_only_their_own_attributes() {
        assert!(builtin_has_attr("builtins.dict", "items"));
        assert!(builtin_has_attr("builtins.str", "removeprefix"));
        assert!(builtin_has_attr("builtins.int", "is_integer"));
        assert!(!builtin_has_attr("builtins.dict", "append"));
        assert!(!builtin_has_attr("builtins.str", "items"));
        // Types without a member list keep every attribute.
        assert!(builtin_has_attr("builtins.ValueError", "anything"));
        assert!(builtin_has_attr("requests.Session", "anything"));
    }

    #[test]
    fn member_lists_are_sorted_for_binary_search() {
        for ty in ["object", "type", "int", "bool", "float", "str", "bytes", "list", "tuple", "dict", "set"] {
            let names = crate::builtin_members::members(ty).expect("a builtin type");
            assert!(names.windows(2).all(|w| w[0] < w[1]), "{ty}");
        }
    }
}

#[cfg(test)]
mod c3_tests {
    use super::{MroEntry, Target, c3_merge};

    fn class(name: &str) -> MroEntry {
        MroEntry::Class(Target::new("m", name))
    }

    /// What CPython's MRO is, given each class's bases (classes listed after their bases).
    fn linearise(classes: &[(&str, &[&str])]) -> std::collections::HashMap<String, Vec<MroEntry>> {
        let mut mros: std::collections::HashMap<String, Vec<MroEntry>> = std::collections::HashMap::new();
        for (name, bases) in classes {
            let mut lists: Vec<Vec<MroEntry>> = bases.iter().map(|b| mros[*b].clone()).collect();
            lists.push(bases.iter().map(|b| class(b)).collect());
            mros.insert(name.to_string(), c3_merge(class(name), &lists));
        }
        mros
    }

    fn names(mro: &[MroEntry]) -> Vec<String> {
        mro.iter()
            .map(|e| match e {
                MroEntry::Class(t) => t.path.to_string(),
                MroEntry::External(x) => x.to_string(),
            })
            .collect()
    }

    #[test]
    fn merges_as_cpython_does() {
        // The example of "The Python 2.3 Method Resolution Order"; CPython prints this MRO for Z.
        let mros = linearise(&[
            ("O", &[]),
            ("A", &["O"]),
            ("B", &["O"]),
            ("C", &["O"]),
            ("D", &["O"]),
            ("E", &["O"]),
            ("K1", &["A", "B", "C"]),
            ("K2", &["D", "B", "E"]),
            ("K3", &["D", "A"]),
            ("Z", &["K1", "K2", "K3"]),
        ]);
        assert_eq!(names(&mros["Z"]), ["Z", "K1", "K2", "K3", "D", "A", "B", "C", "E", "O"]);
        assert_eq!(names(&mros["K3"]), ["K3", "D", "A", "O"]);
    }

    #[test]
    fn an_inconsistent_hierarchy_falls_back_to_depth_first_without_repeats() {
        // class X(A, B) and class Y(B, A), then class Z(X, Y): CPython raises TypeError.
        let mros = linearise(&[
            ("O", &[]),
            ("A", &["O"]),
            ("B", &["O"]),
            ("X", &["A", "B"]),
            ("Y", &["B", "A"]),
            ("Z", &["X", "Y"]),
        ]);
        // Merged: Z, X, Y; then A and B are each in the other's tail.
        assert_eq!(names(&mros["Z"]), ["Z", "X", "Y", "A", "B", "O"]);
    }

    #[test]
    fn external_bases_keep_their_place() {
        let lists = vec![vec![class("A"), MroEntry::External("abc.ABC".into())], vec![class("A")]];
        assert_eq!(names(&c3_merge(class("B"), &lists)), ["B", "A", "abc.ABC"]);
    }
}
