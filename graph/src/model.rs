//! The data model: units (nodes), edges, unresolved sites and the per-file graph that owns them.
//!
//! Everything a file contributes to the graph lives in its [`FileGraph`]: the units it defines, the
//! edges whose source is one of those units, and the call sites that could not be resolved. A
//! snapshot is a map from path to `Arc<FileGraph>`, so publishing a version after an edit replaces
//! only the changed files' parts and shares the rest.

use std::fmt;
use std::sync::Arc;

/// The content hash of a file: the revision every unit and edge from that file is stamped with.
#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
pub struct Revision(pub u64);

impl Revision {
    pub fn of(bytes: &[u8]) -> Revision {
        Revision(xxhash_rust::xxh3::xxh3_64(bytes))
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl fmt::Debug for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Revision({self})")
    }
}

#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(PartialEq, Eq, Debug))]
pub enum UnitKind {
    Module,
    Class,
    Function,
    Method,
    Variable,
    External,
}

impl UnitKind {
    pub const ALL: [UnitKind; 6] = [
        UnitKind::Module,
        UnitKind::Class,
        UnitKind::Function,
        UnitKind::Method,
        UnitKind::Variable,
        UnitKind::External,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            UnitKind::Module => "module",
            UnitKind::Class => "class",
            UnitKind::Function => "function",
            UnitKind::Method => "method",
            UnitKind::Variable => "variable",
            UnitKind::External => "external",
        }
    }

    pub fn parse(text: &str) -> Option<UnitKind> {
        UnitKind::ALL.into_iter().find(|k| k.as_str() == text)
    }

    pub fn is_callable(self) -> bool {
        matches!(self, UnitKind::Function | UnitKind::Method)
    }
}

#[derive(
    Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
)]
#[rkyv(derive(PartialEq, Eq, Debug))]
pub enum EdgeKind {
    Contains,
    Imports,
    Inherits,
    Calls,
    References,
}

impl EdgeKind {
    pub const ALL: [EdgeKind; 5] =
        [EdgeKind::Contains, EdgeKind::Imports, EdgeKind::Inherits, EdgeKind::Calls, EdgeKind::References];

    pub fn as_str(self) -> &'static str {
        match self {
            EdgeKind::Contains => "contains",
            EdgeKind::Imports => "imports",
            EdgeKind::Inherits => "inherits",
            EdgeKind::Calls => "calls",
            EdgeKind::References => "references",
        }
    }

    pub fn parse(text: &str) -> Option<EdgeKind> {
        EdgeKind::ALL.into_iter().find(|k| k.as_str() == text)
    }
}

/// One structural unit of a file: a module, class, function, method or variable. A `lambda` is a
/// function unit named `<lambdaN>` (the N-th lambda of its owner, in source order).
///
/// `id` is unique within a snapshot. It is the qualified name, except when a name is defined
/// more than once (a redefinition, a property setter, two scripts with the same module name),
/// where later definitions get a `#2`, `#3`, ... suffix so every definition stays addressable,
/// and a package's definition named like one of its submodules, which takes the next suffix.
#[derive(Clone, PartialEq, Eq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Unit {
    pub id: String,
    pub name: String,
    pub kind: UnitKind,
    /// 1-based, inclusive.
    pub start_line: u32,
    pub end_line: u32,
    pub start_byte: u32,
    pub end_byte: u32,
    /// For callables and classes: the header with its decorators, e.g. `@property\ndef url(self) -> str`.
    pub signature: Option<String>,
    pub docstring: Option<String>,
}

impl Unit {
    /// Whether this is a lambda (`pkg.f.<lambda1>`): an anonymous function, a unit of the graph
    /// but not of retrieval (its code is part of the unit that contains it).
    pub fn is_lambda(&self) -> bool {
        is_lambda_id(&self.id)
    }
}

/// Whether the unit id names a lambda (`pkg.f.<lambda1>`).
pub fn is_lambda_id(id: &str) -> bool {
    id.rsplit('.').next().is_some_and(|last| last.starts_with("<lambda"))
}

/// A directed edge. `src` is always a unit of the file that owns the edge; `dst` is a unit id anywhere
/// in the snapshot or the dotted name of an external target.
///
/// The ids are shared: a file's edges from one unit, or to one target, hold one allocation of
/// its id between them (the resolver interns them per file, and the store writes each once per
/// record). Edges are most of a graph: django's 348,000 held a `String` for each end.
#[derive(Clone, PartialEq, Eq, Hash, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Edge {
    pub src: Arc<str>,
    pub dst: Arc<str>,
    pub kind: EdgeKind,
    /// The line of the call site, reference, import or base-class list; `None` for `contains`.
    pub line: Option<u32>,
}

/// A call site whose target could not be determined: kept, counted and reported, never dropped and
/// never guessed.
#[derive(Clone, PartialEq, Eq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct Unresolved {
    /// The id of the unit whose code contains the call.
    pub caller: String,
    /// The callee as written, e.g. `self.hooks[event](data)` becomes `self.hooks[...]`.
    pub callee: String,
    pub line: u32,
}

impl Unresolved {
    /// The last name of the callee as written (`send` for `self.adapter.send`, `x` for
    /// `from m import x`): what a definition would have to be called to be the target.
    pub fn last_name(&self) -> &str {
        self.callee.rsplit(['.', ' ']).next().unwrap_or(&self.callee)
    }
}

/// Why a discovered file contributes no units.
#[derive(Clone, PartialEq, Eq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum SkipReason {
    Binary,
    NotUtf8,
    /// Its coding declaration (PEP 263) names an encoding the bytes are not valid in.
    NotValidIn {
        encoding: String,
    },
    /// Its coding declaration names an encoding fresco cannot decode.
    UnknownEncoding {
        encoding: String,
    },
    TooLarge {
        size: u64,
        limit: u64,
    },
    Unreadable {
        error: String,
    },
    /// Text in a wide encoding: UTF-16 or UTF-32 by its byte order mark, or UTF-16 by its
    /// pattern of NUL bytes. Python reads source only in encodings where ASCII is ASCII, so this is no module
    /// Python would import either; it is named so that the fix (convert it) is plain, rather than
    /// called binary.
    WideEncoding {
        encoding: String,
    },
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Binary => write!(f, "binary file (contains NUL bytes)"),
            SkipReason::NotUtf8 => write!(f, "not valid UTF-8"),
            SkipReason::NotValidIn { encoding } => {
                write!(f, "not valid {encoding}, the encoding its coding declaration names")
            }
            SkipReason::UnknownEncoding { encoding } => {
                write!(f, "its coding declaration names {encoding}, an encoding fresco cannot decode")
            }
            SkipReason::TooLarge { size, limit } => {
                write!(f, "too large ({size} bytes > limit {limit})")
            }
            SkipReason::Unreadable { error } => write!(f, "unreadable: {error}"),
            SkipReason::WideEncoding { encoding } => write!(
                f,
                "{encoding} text: Python reads source only in an ASCII-compatible encoding (convert it to UTF-8)"
            ),
        }
    }
}

/// Where a file first fails to parse, and why.
#[derive(Clone, PartialEq, Eq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ParseError {
    /// 1-based.
    pub line: u32,
    /// 1-based, in characters of the line.
    pub column: u32,
    /// What is wrong there: `missing ")"`, `does not parse: "if x == 1"`, `a block with no
    /// statement`.
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// Everything one file contributes to a snapshot.
#[derive(Clone, PartialEq, Eq, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct FileGraph {
    /// Relative to the indexed root, `/`-separated.
    pub path: String,
    pub revision: Revision,
    /// The module's dotted name (`requests.sessions`).
    pub module: String,
    /// The number of syntax errors tree-sitter recovered from; the file is still indexed.
    pub parse_errors: u32,
    /// Where the first of them is, when there are any.
    pub first_parse_error: Option<ParseError>,
    pub skipped: Option<SkipReason>,
    /// Units in source order; the module unit first.
    pub units: Vec<Unit>,
    pub edges: Vec<Edge>,
    pub unresolved: Vec<Unresolved>,
    /// Callables this file's calls pass to functions of other files (see [`ArgFlow`]).
    pub arg_flows: Vec<ArgFlow>,
    /// Calls this file's functions make of their own parameters (see [`ParamCall`]).
    pub param_calls: Vec<ParamCall>,
    /// Name resolution stopped at the file's step budget: calls and references it had not
    /// reached are kept as unresolved. Set only by a superlinear path in the resolver, which
    /// the budget keeps from holding the indexer up.
    pub resolution_cut: bool,
}

impl FileGraph {
    /// The graph of a file that was discovered but could not be indexed.
    pub fn skipped(path: String, module: String, revision: Revision, reason: SkipReason) -> FileGraph {
        FileGraph {
            path,
            revision,
            module,
            parse_errors: 0,
            first_parse_error: None,
            skipped: Some(reason),
            units: Vec::new(),
            edges: Vec::new(),
            unresolved: Vec::new(),
            arg_flows: Vec::new(),
            param_calls: Vec::new(),
            resolution_cut: false,
        }
    }
}

/// Which parameter an argument binds: by position (bound `self`/`cls` counted, so `0` of a
/// method called on an instance is never an argument) or by keyword.
#[derive(Clone, PartialEq, Eq, Hash, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub enum ArgSlot {
    Position(u32),
    Keyword(String),
}

/// A callable a call of this file passes to a function of another file: calling that parameter
/// there reaches `targets` (what calling the value reaches, resolved here: the function and its
/// decorators' wrapper, a class and its `__init__`, a lambda, an external name).
///
/// Argument flow *between* files is not part of any file's own resolution (that would make a
/// file's graph depend on its users' bodies): the indexer joins these records with the other
/// file's [`ParamCall`]s when it assembles a snapshot, into edges owned by the called file.
#[derive(Clone, PartialEq, Eq, Hash, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ArgFlow {
    /// The id of the function (or method) called.
    pub callee: String,
    pub slot: ArgSlot,
    pub targets: Vec<String>,
}

/// A call, in this file, of a parameter of one of its functions (`func(*args)` in a decorator's
/// wrapper, `callback()`): it calls whatever callers pass there, from any file.
#[derive(Clone, PartialEq, Eq, Hash, Debug, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct ParamCall {
    /// The unit whose code contains the call.
    pub caller: String,
    /// The function whose parameter is called (the caller itself, or a function enclosing it).
    pub function: String,
    /// The parameter's position (counting `self`/`cls`) and name.
    pub param: u32,
    pub name: String,
    pub line: u32,
}

impl ParamCall {
    pub fn takes(&self, slot: &ArgSlot) -> bool {
        match slot {
            ArgSlot::Position(p) => *p == self.param,
            ArgSlot::Keyword(k) => *k == self.name,
        }
    }
}

/// A file's identity on disk, to tell cheaply whether it changed while nobody watched. Size and
/// modification time alone miss a same-size rewrite whose mtime was put back (`cp -p`,
/// `rsync -a`, `touch -r`, two writes within one timestamp tick); the inode change time cannot
/// be set back, and the inode number changes when a file is replaced by a rename.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: i128,
    pub ctime_ns: i128,
    pub inode: u64,
}

/// Opaque bookkeeping the indexer keeps per file so that it can update incrementally after a
/// restart without re-deriving unchanged files.
#[derive(Clone, PartialEq, Eq, Debug, Default, rkyv::Archive, rkyv::Serialize, rkyv::Deserialize)]
pub struct IndexDeps {
    /// What this file's resolution consulted: module names looked up (found or not), and
    /// `module\u{1}name` keys of the module-level names whose interface it read.
    pub modules: Vec<String>,
    /// A hash of the interface this file exposes to others.
    pub interface: u64,
    /// The same, per module-level name (and `*` for its star-import surface).
    pub interface_names: Vec<(String, u64)>,
}
