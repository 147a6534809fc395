//! The query language's syntax tree.

use fresco_graph::{EdgeKind, UnitKind};

/// A pipeline: stages separated by `|`; each stage consumes the units the previous produced.
#[derive(Clone, Debug, PartialEq)]
pub struct Query {
    pub stages: Vec<Stage>,
    /// Where each unit the query names was written (and the file of a `context for ... in
    /// FILE`): the symbol as parsed and its byte offset in the text, in order, so that an unknown
    /// name, or a file or line that is not there, can be pointed at as a parse error is.
    pub symbols: Vec<(String, usize)>,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Depth {
    Limited(u32),
    Unbounded,
}

/// How a unit is named in a query.
#[derive(Clone, Debug, PartialEq)]
pub enum Symbol {
    /// A qualified name or unit id (`requests.api.get`).
    Name(String),
    /// A glob over qualified names (`requests.*.get`).
    Glob(String),
    /// `file.py:LINE`: the innermost unit there.
    Location { file: String, line: u32 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Traversal {
    Callers,
    Callees,
    Deps,
    Impact,
    Supers,
    Subs,
    Imports,
    Importers,
    Members,
}

impl Traversal {
    pub fn keyword(self) -> &'static str {
        match self {
            Traversal::Callers => "callers",
            Traversal::Callees => "callees",
            Traversal::Deps => "deps",
            Traversal::Impact => "impact",
            Traversal::Supers => "supers",
            Traversal::Subs => "subs",
            Traversal::Imports => "imports",
            Traversal::Importers => "importers",
            Traversal::Members => "members",
        }
    }

    /// The edge kinds followed and whether they are followed backwards (to the source).
    pub fn edges(self) -> (&'static [EdgeKind], bool) {
        use EdgeKind::*;
        match self {
            Traversal::Callers => (&[Calls], true),
            Traversal::Callees => (&[Calls], false),
            Traversal::Deps => (&[Calls, References, Inherits, Imports], false),
            Traversal::Impact => (&[Calls, References, Inherits, Imports], true),
            Traversal::Supers => (&[Inherits], false),
            Traversal::Subs => (&[Inherits], true),
            Traversal::Imports => (&[Imports], false),
            Traversal::Importers => (&[Imports], true),
            Traversal::Members => (&[Contains], false),
        }
    }

    pub fn default_depth(self) -> Depth {
        match self {
            Traversal::Impact | Traversal::Supers | Traversal::Subs => Depth::Unbounded,
            _ => Depth::Limited(1),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum Stage {
    /// `callers X [depth N]` etc. Without a symbol, applies to every unit of the input.
    Traverse {
        traversal: Traversal,
        symbol: Option<Symbol>,
        depth: Option<Depth>,
    },
    /// `path A -> B [via kinds]`.
    Path {
        from: Symbol,
        to: Symbol,
        via: Vec<EdgeKind>,
    },
    /// `find ["glob"] [kind K] [in "file glob"]`; as a later stage, filters its input.
    Find {
        pattern: Option<String>,
        kind: Option<UnitKind>,
        file: Option<String>,
    },
    /// `unresolved [in X]`.
    Unresolved {
        scope: Option<Symbol>,
    },
    /// `cycles imports|calls`.
    Cycles {
        kind: EdgeKind,
    },
    /// `changes since V [until W] [skip N]`.
    Changes {
        since: u64,
        /// The last version of the range (`None`: the snapshot's).
        until: Option<u64>,
        /// Where the query writes `until`'s version (a byte offset), to place an error about it.
        until_at: Option<usize>,
        /// Changes passed over, in the answer's order.
        skip: usize,
    },
    /// `show X`: the unit itself, with its source.
    Show {
        symbol: Symbol,
    },
    /// `search "text" [k N] [lanes a,b]`: hybrid retrieval over units.
    Search {
        text: String,
        k: usize,
        lanes: Vec<Lane>,
    },
    /// `context X budget N` / `context for "signature and docstring" in FILE budget N`.
    Context {
        target: ContextTarget,
        budget: usize,
        k: usize,
        lanes: Vec<Lane>,
    },
    Where(Vec<Condition>),
    Limit(usize),
    OrderBy {
        field: Field,
        descending: bool,
    },
    Count,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Name,
    Kind,
    File,
    Line,
    Depth,
}

impl Field {
    pub fn parse(word: &str) -> Option<Field> {
        Some(match word {
            "name" => Field::Name,
            "kind" => Field::Kind,
            "file" => Field::File,
            "line" | "start_line" => Field::Line,
            "depth" => Field::Depth,
            _ => return None,
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Comparison {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Condition {
    Kind { kinds: Vec<UnitKind>, negated: bool },
    NameGlob(String),
    NameRegex(String),
    FileGlob(String),
    Depth(Comparison, u32),
}

/// A retrieval lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Lane {
    Bm25,
    Dense,
    Graph,
}

impl Lane {
    pub const ALL: [Lane; 3] = [Lane::Bm25, Lane::Dense, Lane::Graph];

    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Bm25 => "bm25",
            Lane::Dense => "dense",
            Lane::Graph => "graph",
        }
    }

    pub fn parse(text: &str) -> Option<Lane> {
        Lane::ALL.into_iter().find(|l| l.as_str() == text)
    }
}

/// What `context` assembles context for.
#[derive(Clone, Debug, PartialEq)]
pub enum ContextTarget {
    /// An existing unit (possibly one whose body is still to be written: `pass`, `...`).
    Unit(Symbol),
    /// A function not written yet: its signature and docstring, the file it will live in and,
    /// when given (`FILE:LINE`), the line it will be written at.
    New { text: String, file: String, line: Option<u32> },
}
