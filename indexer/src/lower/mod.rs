//! The tree-sitter frontend: parses a Python file and lowers the tree to [`FileSyntax`].
//!
//! One walk over the tree records, per scope, what binds which name, what is called, what is read
//! and which attributes are stored, as small [`Expr`] trees. Nothing here resolves a name: that
//! needs other files and is done by [`crate::resolve`].
//!
//! This module holds the parsing (with the trees kept for incremental reparsing), the
//! scopes and the [`Lowerer`]'s state; the walk is split by what it lowers: `statements`,
//! `definitions` (functions and classes), `assignments` (and calls' values), `imports`,
//! `expressions`, `narrowing` (`isinstance` tests), and `recovery` (a file with syntax errors).

use std::cell::RefCell;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use tree_sitter::{Node, Parser, Tree};

use crate::syntax::*;

mod assignments;
mod definitions;
mod expressions;
mod identifiers;
mod imports;
mod literal;
mod narrowing;
mod recovery;
mod statements;

use recovery::*;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `text` with tree-sitter-python. Returns `None` only if the grammar cannot be loaded,
/// which is a build defect, never a property of the input.
pub fn parse(text: &str) -> Option<Tree> {
    parse_with(text, None)
}

/// Parses `text`, reusing the unchanged parts of `old` (already told about the edit).
fn parse_with(text: &str, old: Option<&Tree>) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(new_parser()?);
        }
        let parser = slot.as_mut()?;
        // A UTF-8 byte order mark, which Python skips, is an error to tree-sitter: parse what
        // follows it. Byte offsets and lines stay those of the file.
        let after_bom = text.strip_prefix('\u{feff}').map(|rest| text.len() - rest.len());
        if let Some(start) = after_bom {
            let range = tree_sitter::Range {
                start_byte: start,
                end_byte: text.len(),
                start_point: tree_sitter::Point { row: 0, column: start },
                end_point: end_point(text),
            };
            parser.set_included_ranges(&[range]).ok()?;
        }
        let tree = parser.parse(text, old);
        if after_bom.is_some() {
            // Back to whole documents for the next file.
            parser.set_included_ranges(&[]).ok()?;
        }
        tree
    })
}

/// Where `text` ends, as tree-sitter counts (row, byte column).
fn end_point(text: &str) -> tree_sitter::Point {
    match text.rfind('\n') {
        Some(i) => tree_sitter::Point { row: text.matches('\n').count(), column: text.len() - i - 1 },
        None => tree_sitter::Point { row: 0, column: text.len() },
    }
}

/// A tree-sitter-python parser. Every parser fresco makes comes from here, so that tree-sitter's
/// allocator is chosen before its first allocation.
pub fn new_parser() -> Option<Parser> {
    crate::tree_memory::use_mimalloc();
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_python::LANGUAGE.into()).ok()?;
    Some(parser)
}

/// Field lookup by id. tree-sitter's `child_by_field_name` first finds the field's id by comparing
/// the name with every field name of the grammar (`strncmp` in a loop), at every call; lowering
/// asks for fields dozens of times per function, and that scan was about 2 % of indexing CPU time.
trait FieldChild<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>>;
}

impl<'t> FieldChild<'t> for Node<'t> {
    fn field(&self, name: &str) -> Option<Node<'t>> {
        static FIELD_IDS: std::sync::OnceLock<FxHashMap<String, u16>> = std::sync::OnceLock::new();
        let ids = FIELD_IDS.get_or_init(|| {
            let language: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
            let mut ids = FxHashMap::default();
            for id in 1..=language.field_count() as u16 {
                if let Some(name) = language.field_name_for_id(id) {
                    ids.insert(name.to_string(), id);
                }
            }
            ids
        });
        match ids.get(name) {
            Some(&id) => self.child_by_field_id(id),
            None => self.child_by_field_name(name),
        }
    }
}

/// A node's kind by id. tree-sitter's `Node::kind` makes a `&str` of the kind's C string at every
/// call (`strlen` and UTF-8 validation); lowering and the grammar check ask every node's kind,
/// often several times, and that was about a sixth of lowering's time.
pub(crate) trait NodeKind {
    fn kind_str(&self) -> &'static str;
}

impl NodeKind for Node<'_> {
    fn kind_str(&self) -> &'static str {
        let id = self.kind_id();
        match kind_names().get(id as usize) {
            Some(kind) => kind,
            // tree-sitter's own symbols past the grammar's: `ERROR` (65535) and `_ERROR`.
            None => python_language().node_kind_for_id(id).unwrap_or(""),
        }
    }
}

fn python_language() -> &'static tree_sitter::Language {
    static LANGUAGE: std::sync::OnceLock<tree_sitter::Language> = std::sync::OnceLock::new();
    LANGUAGE.get_or_init(|| tree_sitter_python::LANGUAGE.into())
}

/// The grammar's node kinds by id.
pub(crate) fn kind_names() -> &'static [&'static str] {
    static KINDS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
    KINDS.get_or_init(|| {
        let language = python_language();
        (0..language.node_kind_count() as u16).map(|id| language.node_kind_for_id(id).unwrap_or("")).collect()
    })
}

/// How many recently lowered files keep their tree, for an incremental re-parse when they are
/// edited again (editors save the same few files over and over).
const RECENT_TREES: usize = 8;

thread_local! {
    /// The trees of the files this thread lowered last, most recent at the end: (path, text,
    /// tree). Per thread, because a tree is freed by the thread that evicts it: with one cache
    /// shared by the workers of a cold index, most trees were freed by the other worker, whose
    /// every `free` then fought the allocating thread for its malloc arena (one cold index in
    /// three of django spent 2 s more parsing, in 100,000 futex waits).
    static RECENT: RefCell<Vec<(Arc<str>, Arc<str>, Tree)>> = const { RefCell::new(Vec::new()) };
}

/// Parses and lowers the file at `path` (relative). When it was among the last files lowered,
/// tree-sitter re-parses only what the edit touched: the old tree is told the changed byte range
/// (the text between the common prefix and the common suffix of the two texts). The result is
/// the same as a fresh parse; only the time differs (an edit at line 1,500 of django's 2,500-line
/// `db/models/base.py` is parsed and lowered in 3.2 ms instead of 10.2 ms).
///
/// An edit to the last line of a block followed by a dedent to the module's level (the
/// incremental benchmark's, at the end of a top-level function near the top of that file)
/// gains nothing: the re-parse took 17 ms, as long as a fresh one, against 0.5 to 2 ms for lines
/// inside method bodies (measured in the 2026-12-01 session). tree-sitter's log shows why: it
/// tries to reuse the next definition at the byte where the dedent's zero-width tokens sit, before
/// lexing them, so the Python scanner's state (its indent stack) differs from the one recorded
/// in the old tree, reuse is refused (`reusable_node_has_different_external_scanner_state`), and
/// the same happens at every later module-level boundary. Nothing here can change that short of
/// patching tree-sitter.
pub fn lower_file(path: &str, text: &Arc<str>) -> FileSyntax {
    if has_lone_carriage_return(text) {
        return lower(text);
    }
    let previous =
        RECENT.with_borrow_mut(|recent| recent.iter().position(|(p, ..)| &**p == path).map(|i| recent.remove(i)));
    let tree = match previous {
        Some((_, old_text, tree)) if old_text == *text => Some(tree),
        Some((_, old_text, mut tree)) => {
            tree.edit(&edit_between(&old_text, text));
            parse_with(text, Some(&tree))
        }
        None => parse(text),
    };
    let Some(tree) = tree else { return lower_tree(text, None) };
    let syntax = lower_tree(text, Some(&tree));
    let evicted = RECENT.with_borrow_mut(|recent| {
        recent.push((Arc::from(path), text.clone(), tree));
        (recent.len() > RECENT_TREES).then(|| recent.remove(0))
    });
    drop(evicted);
    syntax
}

/// The edit that turns `old` into `new`: everything between their common prefix and suffix.
fn edit_between(old: &str, new: &str) -> tree_sitter::InputEdit {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let max_suffix = a.len().min(b.len()) - prefix;
    let suffix = a.iter().rev().zip(b.iter().rev()).take(max_suffix).take_while(|(x, y)| x == y).count();
    let point = |bytes: &[u8], offset: usize| {
        let before = &bytes[..offset];
        let row = before.iter().filter(|&&c| c == b'\n').count();
        let column = offset - before.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1);
        tree_sitter::Point { row, column }
    };
    tree_sitter::InputEdit {
        start_byte: prefix,
        old_end_byte: a.len() - suffix,
        new_end_byte: b.len() - suffix,
        start_position: point(a, prefix),
        old_end_position: point(a, a.len() - suffix),
        new_end_position: point(b, b.len() - suffix),
    }
}

/// Parses and lowers one file.
pub fn lower(text: &str) -> FileSyntax {
    if has_lone_carriage_return(text) {
        // Old Mac line endings: Python reads a lone `\r` as a line break, tree-sitter does not.
        // Same length, so every byte offset stays valid for the original text.
        let normalized: String = text
            .char_indices()
            .map(|(i, c)| if c == '\r' && !text[i + 1..].starts_with('\n') { '\n' } else { c })
            .collect();
        return lower_tree(&normalized, parse(&normalized).as_ref());
    }
    lower_tree(text, parse(text).as_ref())
}

/// What the name after `as` receives: the entered context (`with`), the exception caught
/// (`except`), or the group of them (`except*`).
#[derive(Clone, Copy)]
enum Caught {
    /// By `with` (`true`: `async with`).
    Entered(bool),
    Exception,
    Group,
}

impl Caught {
    fn binding(self, value: Expr) -> Binding {
        match self {
            Caught::Entered(is_async) => Binding::Enter(value, is_async),
            // `except (NotFound, Denied) as err`: an instance of any of them.
            Caught::Exception => match value {
                Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => {
                    Binding::Exception(Expr::Union(items))
                }
                value => Binding::Exception(value),
            },
            Caught::Group => Binding::Exception(Expr::Name(Name::new("ExceptionGroup"))),
        }
    }
}

/// Whether `expr` reads a name for which `bound` holds.
fn mentions_name(expr: &Expr, bound: &dyn Fn(&str) -> bool) -> bool {
    match expr {
        Expr::Name(n) => bound(n.as_str()),
        Expr::Attr(e, _)
        | Expr::Slice(e, _)
        | Expr::Call(e)
        | Expr::Subscript(e)
        | Expr::Item(e, _)
        | Expr::Element(e, _)
        | Expr::Instance(e)
        | Expr::Returning(e)
        | Expr::Decorated(e, _)
        | Expr::Entered(e, _) => mentions_name(e, bound),
        Expr::Container(_, es) | Expr::Added(es) | Expr::Union(es) => es.iter().any(|e| mentions_name(e, bound)),
        Expr::Keyed(items) => items.iter().any(|(_, e)| mentions_name(e, bound)),
        Expr::ItemAt(a, b) | Expr::Declared(a, b) | Expr::Narrowed(a, b) | Expr::NotInstance(a, b) => {
            mentions_name(a, bound) || mentions_name(b, bound)
        }
        Expr::Property(getter, setter, deleter) => {
            mentions_name(getter, bound) || [setter, deleter].into_iter().flatten().any(|a| mentions_name(a, bound))
        }
        Expr::Lambda(_)
        | Expr::Literal(_)
        | Expr::Constant(_)
        | Expr::SelfRef
        | Expr::ClsRef
        | Expr::DefPath(_)
        | Expr::Unknown => false,
    }
}

/// Whether `text` has a `\r` that is not part of a `\r\n`.
fn has_lone_carriage_return(text: &str) -> bool {
    text.bytes().enumerate().any(|(i, b)| b == b'\r' && text.as_bytes().get(i + 1) != Some(&b'\n'))
}

/// Lowers `original` from its tree (`None`: the grammar could not be loaded).
fn lower_tree(original: &str, tree: Option<&Tree>) -> FileSyntax {
    let Some(tree) = tree else {
        return FileSyntax {
            parse_errors: 1,
            line_count: line_starts(original).len() as u32,
            byte_len: original.len() as u32,
            docstring: None,
            scopes: vec![Scope::new(ScopeKind::Module, None, None)],
            defs: Vec::new(),
            dunder_all: None,
            first_error: Some((0, "the Python grammar could not be loaded".into())),
        };
    };
    // A file with errors may be hiding most of itself behind an unclosed bracket, string or
    // header (see `repair`): lower a repaired text instead when less of it is in error. The
    // file is flagged with its own errors either way.
    let errors = error_extent(tree.root_node()).1;
    let repaired = if errors > 0 { repair(original, tree) } else { None };
    let (text, root, mut inserted) = match &repaired {
        Some(fix) => (fix.text.as_str(), fix.tree.root_node(), fix.inserted.clone()),
        None => (original, tree.root_node(), Vec::new()),
    };
    let (mut syntax, refused) = lower_text(original, text, root, repaired.is_some());
    // The file is flagged with what its first lowering refused, whatever is mended below.
    let parse_errors = errors + syntax.parse_errors;
    let refusal = syntax.first_error.take().map(|(at, why)| (original_offset(&inserted, at), why));
    let first_error = match (first_tree_error(tree.root_node(), original), refusal) {
        (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
        (a, b) => a.or(b),
    };
    // tree-sitter reads a statement dedented between two levels (`unindent does not match any
    // outer indentation level`) as one of the outer block, taking the rest of the body with it;
    // the lowering refuses it. Put it back into the block it was typed in.
    // So does a line indented with a tab among lines indented with spaces (tree-sitter reads the
    // tab as eight columns): it is indented with spaces where the line before it says.
    for mend_indentation in [crate::repair::indent_stray_dedents, crate::repair::indent_tabbed_lines] {
        if refused > 0
            && let Some((indented, spaces)) = mend_indentation(text)
            && let Some(indented_tree) = parse(&indented)
            && error_extent(indented_tree.root_node()) <= error_extent(root)
        {
            let (mended, still_refused) =
                lower_text(original, &indented, indented_tree.root_node(), repaired.is_some());
            if still_refused < refused {
                syntax = mended;
                inserted.push(spaces);
                break;
            }
        }
    }
    syntax.parse_errors = parse_errors;
    // The last stage's insertions first: each stage's offsets are in its own output.
    for stage in inserted.iter().rev() {
        syntax.remove_insertions(stage);
    }
    syntax.first_error = first_error;
    // A NUL byte: Python refuses the file for it before anything else, wherever it is, and
    // tree-sitter may read it inside a string without an error, or report an error elsewhere
    // (at the top of the file, for one in a string). It is the error the file is flagged with.
    if let Some(at) = original.bytes().position(|b| b == 0) {
        syntax.parse_errors = syntax.parse_errors.max(1);
        syntax.first_error = Some((at as u32, "a NUL byte (Python refuses source that holds one)".to_string()));
    }
    syntax
}

/// An offset of a text that repair stages inserted bytes into (`stages`, each's offsets in its
/// own output), mapped back to the file's own text.
fn original_offset(stages: &[Vec<u32>], at: u32) -> u32 {
    stages.iter().rev().fold(at, |at, inserted| at - inserted.partition_point(|&i| i < at) as u32)
}

/// The first of tree-sitter's error and missing nodes, in source order: its byte offset and a
/// message (`missing ")"`, `does not parse: "if x == 1"`).
fn first_tree_error(root: Node, src: &str) -> Option<(u32, String)> {
    let mut node = root.has_error().then_some(root)?;
    loop {
        if node.is_missing() {
            let kind = node.kind_str();
            let what =
                if kind.chars().any(|c| c.is_alphanumeric()) { kind.replace('_', " ") } else { format!("\"{kind}\"") };
            return Some((node.start_byte() as u32, format!("missing {what}")));
        }
        // tree-sitter does not say what is wrong in the text an error node holds (a header
        // without its colon, an unclosed bracket, a stray token): quote its first line.
        if node.is_error() {
            // An error that runs from well before an unclosed bracket over it (tree-sitter's
            // recovery may wrap the file from its docstring on): the bracket is the error, as
            // Python says (`'(' was never closed`).
            if let Some(bracket) = cause_within(src, node.start_byte(), node.end_byte()) {
                return Some(bracket);
            }
            let text = src.get(node.start_byte()..node.end_byte()).unwrap_or("");
            let first_line = text.lines().next().unwrap_or("").trim_end();
            let mut quoted: String = first_line.chars().take(40).collect();
            if quoted.len() < first_line.len() {
                quoted.push('…');
            }
            let why =
                if quoted.is_empty() { "does not parse".to_string() } else { format!("does not parse: {quoted:?}") };
            return Some((node.start_byte() as u32, why));
        }
        let mut cursor = node.walk();
        let next = node.children(&mut cursor).find(|c| c.has_error() || c.is_missing() || c.is_error());
        node = next?;
    }
}

/// The first of a bracket never closed and a header without its colon lying after the first
/// line of the error `start..end` (tree-sitter's recovery may wrap the file from its docstring
/// on), as an error: its offset and Python's message. An error starting on the line of either is
/// the statement's own and says more.
fn cause_within(src: &str, start: usize, end: usize) -> Option<(u32, String)> {
    let first_line_end = src.get(start..end)?.find('\n').map_or(end, |i| start + i);
    let within = |at: usize| first_line_end < at && at < end;
    // Inserted colons: the first one's offset is the file's own (nothing was inserted before it).
    let colon = crate::repair::insert_missing_colons(src)
        .and_then(|(_, inserted)| inserted.first().map(|&at| at as usize))
        .filter(|&at| within(at))
        .map(|at| (at as u32, "expected ':'".to_string()));
    let bracket = first_unclosed_bracket(src).filter(|(at, _)| within(*at as usize));
    match (colon, bracket) {
        (Some(c), Some(b)) => Some(if c.0 < b.0 { c } else { b }),
        (c, b) => c.or(b),
    }
}

/// The first bracket of `src` that was never closed (by either rule of
/// [`crate::repair::Closing`], the stricter first): its offset and Python's message.
fn first_unclosed_bracket(src: &str) -> Option<(u32, String)> {
    use crate::repair::{Closing, Mending, close_unclosed_brackets};
    [Closing::ByKeyword, Closing::ByIndentation].into_iter().find_map(|rule| {
        // Blanking replaces each unclosed bracket by a space and moves nothing else.
        let (blanked, inserted) = close_unclosed_brackets(src, rule, Mending::Blank)?;
        if !inserted.is_empty() || blanked.len() != src.len() {
            return None;
        }
        let at = src.bytes().zip(blanked.bytes()).position(|(a, b)| a != b && matches!(a, b'(' | b'[' | b'{'))?;
        let bracket = src.get(at..)?.chars().next()?;
        Some((at as u32, format!("'{bracket}' was never closed")))
    })
}

/// Lowers `text` (`original` itself, or a repair of it) from its tree's `root`. The syntax's
/// `parse_errors` counts what the lowering itself refuses or cuts (tree-sitter's errors are the
/// caller's); the second value is the statements refused for their indentation or layout.
///
/// `repaired`: `text` is a repair of the file, whose blanked lines may leave a body empty; such
/// a body is still counted, but not taken for where the file's first error is.
fn lower_text(original: &str, text: &str, root: Node, repaired: bool) -> (FileSyntax, u32) {
    // A type alias is written out where an annotation names it as the file is read (see
    // `Lowerer::type_of`); a binding of the name read later (`class Handler` after `Handler =
    // A | B`, a class attribute of the name) means the annotation may name something else: such
    // names are lowered again as plain names. Each round rules out at least one more alias.
    let mut unusable = FxHashSet::default();
    let normalized = identifiers::normalized_identifiers(text, root);
    for _ in 0..MAX_ALIAS_ROUNDS {
        let (syntax, refused, conflicting) = lower_text_once(original, text, root, repaired, &unusable, &normalized);
        let before = unusable.len();
        unusable.extend(conflicting);
        if unusable.len() == before {
            return (syntax, refused);
        }
    }
    let (syntax, refused, _) = lower_text_once(original, text, root, repaired, &unusable, &normalized);
    (syntax, refused)
}

/// Where an alias is not to be written out (see [`lower_text`]): everywhere (`None`: the
/// module binds its name otherwise too), or in annotations read by one scope (a scope around it
/// binds the name). Scope ids are the same in every lowering of a text.
type AliasUse = (Option<ScopeId>, Name);

/// How many times a file is lowered again for aliases whose names turned out to be bound
/// otherwise too (see [`lower_text`]); after that, the last lowering stands.
const MAX_ALIAS_ROUNDS: usize = 3;

/// One lowering of [`lower_text`], with the names never to be taken for aliases; also gives
/// the aliases it wrote out where their names are bound otherwise too.
fn lower_text_once(
    original: &str,
    text: &str,
    root: Node,
    repaired: bool,
    unusable_aliases: &FxHashSet<AliasUse>,
    normalized: &identifiers::NormalizedIdentifiers,
) -> (FileSyntax, u32, Vec<AliasUse>) {
    let line_starts = line_starts(text);
    let line_count = line_starts.len() as u32;
    let mut lowerer = Lowerer {
        src: text,
        normalized,
        line_starts,
        scopes: vec![ScopeB::new(ScopeKind::Module, None, None)],
        defs: Vec::new(),
        path_counts: FxHashMap::default(),
        dunder_all: None,
        module_variables: FxHashMap::default(),
        conditional_depth: 0,
        in_run_time_alternative: false,
        narrowings: Vec::new(),
        match_subjects: Vec::new(),
        rebound_builtins: rebound_value_builtins(root, text),
        type_aliases: crate::annotation::TypeAliases::default(),
        unusable_aliases,
        alias_uses: RefCell::default(),
        first_refusal: None,
        statement_start: 0,
        repaired,
        dunder_all_dynamic: false,
        nesting: 0,
        too_deep: 0,
        empty_bodies: 0,
        refused_statements: 0,
        global_writes: Vec::new(),
        inplace_item: None,
    };
    lowerer.block(root, 0);
    // Only over a tree that parsed whole: beside tree-sitter's own errors (or a repair of them) a
    // half-typed header (`def f(a=1, b`) would be reported for its parameters, not its bracket.
    if !repaired && !root.has_error() {
        for (at, why) in crate::grammar::grammar_refusals(root) {
            lowerer.refused_statements += 1;
            lowerer.refusal(at, why);
        }
        // Tabs and spaces mixed so that the meaning depends on a tab's width: tree-sitter reads
        // a tab as eight columns, Python refuses the file.
        if let Some(at) = crate::repair::inconsistent_tab_line(text) {
            lowerer.refused_statements += 1;
            lowerer.refusal(at, "inconsistent use of tabs and spaces in indentation (Python's TabError)");
        }
    }
    lowerer.define_global_writes();
    let conflicting = lowerer.conflicting_aliases();
    lowerer.drop_local_reads();
    lowerer.name_lambdas();
    let docstring = lowerer.docstring(root);
    let syntax = FileSyntax {
        parse_errors: lowerer.too_deep + lowerer.empty_bodies + lowerer.refused_statements,
        first_error: lowerer.first_refusal.map(|(at, why)| (at, why.to_string())),
        line_count,
        byte_len: original.len() as u32,
        docstring,
        scopes: finish_scopes(lowerer.scopes),
        defs: {
            let mut defs = lowerer.defs;
            defs.shrink_to_fit();
            defs
        },
        dunder_all: if lowerer.dunder_all_dynamic { None } else { lowerer.dunder_all },
    };
    (syntax, lowerer.refused_statements, conflicting)
}

/// From how many bindings on a scope's look-ups by name go through an index (below it, a scan
/// is as quick); the summary's look-ups use the same bound.
pub(crate) const INDEXED_FROM: usize = 16;

/// A [`Scope`] while it is being lowered: growable, frozen into exact-size slices at the end.
struct ScopeB {
    kind: ScopeKind,
    parent: Option<ScopeId>,
    def: Option<DefId>,
    params: Vec<Param>,
    /// Pushed only through [`ScopeB::push_binding`], which keeps `binding_index` up to date.
    bindings: Vec<(Name, Binding)>,
    /// Where each name's bindings are in `bindings`, once there are [`INDEXED_FROM`] of them: a
    /// look-up per call of a name (is it an import of `copy`, a dict, a class's own name) scanned
    /// them all, and 100,000 `x = list(y)` lines took 46 s.
    binding_index: FxHashMap<Name, Vec<u32>>,
    replacing: Vec<(u32, u32)>,
    item_stores: Vec<u32>,
    globals: Vec<Name>,
    nonlocals: Vec<Name>,
    calls: Vec<CallSite>,
    accesses: Vec<Access>,
    attr_stores: Vec<AttrStore>,
    returns: Vec<Expr>,
    yields: Vec<Expr>,
    raises: Vec<(Expr, u32)>,
    iterations: Vec<(Expr, u32, bool)>,
    contexts: Vec<(Expr, u32, bool)>,
    implicit_calls: Vec<(Expr, u32, ImplicitCall)>,
    operators: Vec<OperatorUse>,
    bases: Vec<(Expr, u32)>,
    fields: Vec<Name>,
    metaclass: Option<Expr>,
    imports: Vec<ImportStmt>,
}

impl ScopeB {
    fn new(kind: ScopeKind, parent: Option<ScopeId>, def: Option<DefId>) -> ScopeB {
        ScopeB {
            kind,
            parent,
            def,
            params: Vec::new(),
            bindings: Vec::new(),
            binding_index: FxHashMap::default(),
            replacing: Vec::new(),
            item_stores: Vec::new(),
            globals: Vec::new(),
            nonlocals: Vec::new(),
            calls: Vec::new(),
            accesses: Vec::new(),
            attr_stores: Vec::new(),
            returns: Vec::new(),
            yields: Vec::new(),
            raises: Vec::new(),
            iterations: Vec::new(),
            contexts: Vec::new(),
            implicit_calls: Vec::new(),
            operators: Vec::new(),
            bases: Vec::new(),
            fields: Vec::new(),
            metaclass: None,
            imports: Vec::new(),
        }
    }

    fn push_binding(&mut self, name: Name, binding: Binding) {
        let at = self.bindings.len();
        if at + 1 == INDEXED_FROM {
            for (i, (n, _)) in self.bindings.iter().enumerate() {
                self.binding_index.entry(n.clone()).or_default().push(i as u32);
            }
        }
        if at + 1 >= INDEXED_FROM {
            self.binding_index.entry(name.clone()).or_default().push(at as u32);
        }
        self.bindings.push((name, binding));
    }

    /// The bindings of `name` so far, in the order they were made.
    fn bindings_of<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Binding> + 'a {
        let indexed = self.bindings.len() >= INDEXED_FROM;
        let listed = indexed.then(|| self.binding_index.get(name)).flatten();
        let scanned = (!indexed).then(|| self.bindings.iter().filter(move |(n, _)| n == name).map(|(_, b)| b));
        listed.into_iter().flatten().map(|&i| &self.bindings[i as usize].1).chain(scanned.into_iter().flatten())
    }

    /// Whether the scope has bound `name` so far.
    fn binds(&self, name: &str) -> bool {
        self.bindings_of(name).next().is_some()
    }

    fn finish(self) -> Scope {
        Scope {
            kind: self.kind,
            parent: self.parent,
            def: self.def,
            params: self.params.into_boxed_slice(),
            bindings: self.bindings.into_boxed_slice(),
            replacing: self.replacing.into_boxed_slice(),
            item_stores: self.item_stores.into_boxed_slice(),
            globals: self.globals.into_boxed_slice(),
            nonlocals: self.nonlocals.into_boxed_slice(),
            calls: self.calls.into_boxed_slice(),
            accesses: self.accesses.into_boxed_slice(),
            attr_stores: self.attr_stores.into_boxed_slice(),
            returns: self.returns.into_boxed_slice(),
            yields: self.yields.into_boxed_slice(),
            raises: self.raises.into_boxed_slice(),
            iterations: self.iterations.into_boxed_slice(),
            contexts: self.contexts.into_boxed_slice(),
            implicit_calls: self.implicit_calls.into_boxed_slice(),
            operators: self.operators.into_boxed_slice(),
            bases: self.bases.into_boxed_slice(),
            fields: self.fields.into_boxed_slice(),
            metaclass: self.metaclass,
            imports: self.imports.into_boxed_slice(),
        }
    }
}

/// Freezes the scopes into a vector of exactly their number (a `collect` would reuse the larger
/// builder allocation).
fn finish_scopes(scopes: Vec<ScopeB>) -> Vec<Scope> {
    let mut out = Vec::with_capacity(scopes.len());
    out.extend(scopes.into_iter().map(ScopeB::finish));
    out
}

fn line_starts(text: &str) -> Vec<u32> {
    let mut starts = vec![0u32];
    for (i, b) in text.bytes().enumerate() {
        if b == b'\n' && i + 1 < text.len() {
            starts.push(i as u32 + 1);
        }
    }
    starts
}

/// How much of a tree is in error: the bytes its ERROR nodes cover and the number of its
/// errors (ERROR nodes, each one error however many tokens it swallowed, and MISSING nodes),
/// compared in that order. A repair that trades one error swallowing half the file for
/// two small ones is better; counting errors alone would refuse it.
fn error_extent(root: Node) -> (u32, u32) {
    if !root.has_error() {
        return (0, 0);
    }
    let (mut bytes, mut count) = (0, 0);
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() {
            bytes += (node.end_byte() - node.start_byte()) as u32;
            count += 1;
            continue;
        }
        if node.is_missing() {
            count += 1;
        }
        if node.has_error() {
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    (bytes, count)
}

fn span(node: Node) -> (u32, u32) {
    (node.start_byte() as u32, node.end_byte() as u32)
}

fn line(node: Node) -> u32 {
    node.start_position().row as u32 + 1
}

struct Lowerer<'a> {
    /// The file's text. Node byte ranges fall on character boundaries (tree-sitter lexes UTF-8
    /// by code point), so slicing it with `get` is an O(1) check, not a UTF-8 validation.
    src: &'a str,
    /// The identifiers whose NFKC form differs from how they are written (see
    /// [`identifiers`]): what [`Lowerer::text`] gives for them.
    normalized: &'a identifiers::NormalizedIdentifiers,
    line_starts: Vec<u32>,
    scopes: Vec<ScopeB>,
    defs: Vec<Def>,
    /// How often each unit path was defined so far, to give redefinitions a `#N` suffix.
    path_counts: FxHashMap<String, u32>,
    dunder_all: Option<Vec<Name>>,
    /// `__all__` is built in a way lowering cannot follow (a comprehension, a call, another
    /// module's list): star imports then fall back to the public names.
    dunder_all_dynamic: bool,
    /// For module and class scopes: names that already have a variable or def unit.
    module_variables: FxHashMap<(ScopeId, Name), DefId>,
    /// How many conditional blocks (if/try/loop/with/match) of the current scope enclose us.
    conditional_depth: u32,
    /// Lowering the clause that runs instead of an `if TYPE_CHECKING:` body (see
    /// `Lowerer::if_clause`).
    in_run_time_alternative: bool,
    /// How many expressions enclose the one being lowered (see [`MAX_NESTING`]).
    nesting: u32,
    /// Expressions left unlowered because they were nested deeper than that.
    too_deep: u32,
    /// `def`s and classes without a statement in their body (see [`Lowerer::check_body`]).
    empty_bodies: u32,
    /// Statements Python refuses and tree-sitter accepts (see [`Lowerer::check_statements`]).
    refused_statements: u32,
    /// For the target of an augmented assignment being bound (`t[k] += v`): the right operand,
    /// the in-place method and the statement's line, for the item's operator (see
    /// [`Lowerer::augmented`]).
    inplace_item: Option<(Expr, &'static str, u32)>,
    /// Names a function declares `global` and assigns, in source order: they become module
    /// variables when the module itself never binds them (see [`Lowerer::define_global_writes`]).
    global_writes: Vec<GlobalWrite>,
    /// The `isinstance` tests in force over the statements being lowered (see
    /// [`Lowerer::if_clause`]).
    narrowings: Vec<Narrowing>,
    /// The subjects of the `match` statements being lowered, innermost last (`None`: not a name
    /// or an attribute chain).
    match_subjects: Vec<Option<Name>>,
    /// The builtins this file binds a name to (see [`rebound_value_builtins`]): its own `zip`
    /// may be anything.
    rebound_builtins: FxHashSet<&'static str>,
    /// The module's type aliases so far (`Pair = tuple[Lo, Hi]`, `Id: TypeAlias = "int | str"`,
    /// `type Either = Lo | Hi`, a `TypeVar`'s bound), written out where later annotations name
    /// them (see [`Lowerer::type_of`]).
    type_aliases: crate::annotation::TypeAliases,
    /// Names never taken for aliases in this lowering: a first lowering wrote them out where the
    /// name turned out to be bound otherwise too (see [`lower_text`]).
    unusable_aliases: &'a FxHashSet<AliasUse>,
    /// Where aliases were written out: the scope reading the annotation, and the alias.
    alias_uses: RefCell<FxHashSet<(ScopeId, Name)>>,
    /// The first of the refusals counted in `too_deep`, `empty_bodies` and
    /// `refused_statements`: its byte offset and why.
    first_refusal: Option<(u32, &'static str)>,
    /// Where the statement being lowered starts (for the refusals that have no node of their own).
    statement_start: usize,
    /// The text is a repair of the file (see [`lower_text`]).
    repaired: bool,
}

/// `isinstance(name, T)` holds where code of `scope` reads `name` (a name or an attribute chain,
/// `self.conn`): inside `if isinstance(x, T):` and after `if not isinstance(x, T): raise ...` in
/// the same block, until a statement binds the name again.
struct Narrowing {
    scope: ScopeId,
    name: Name,
    /// The instance type the test names (`T`, or `A | B` for a tuple of classes); `None` from
    /// the statement after one that binds the name again (`x = make()`) to the end of its block:
    /// what the test said no longer holds there.
    ty: Option<Expr>,
    /// The test was found false (the `elif` and `else` after `if isinstance(x, T):`): the name
    /// holds no T there.
    negated: bool,
}

/// `global CONFIG` then `CONFIG = ...` inside a function: where the assignment is.
struct GlobalWrite {
    name: Name,
    start_line: u32,
    end_line: u32,
    start_byte: u32,
    end_byte: u32,
}

/// Expressions nested deeper than this are not lowered (their calls and reads are lost, and the
/// file is flagged with a parse error). CPython itself rejects nesting near 200 parentheses;
/// long flat chains (`a or b or ...`, `x + y + ...`), which tree-sitter nests one level per
/// operator, are walked without nesting. The bound keeps the recursive walk within a thread's
/// stack on any input.
pub(crate) const MAX_NESTING: u32 = 200;

impl<'a> Lowerer<'a> {
    /// A node's text; an identifier's as Python reads it, NFKC-normalised.
    fn text(&self, node: Node) -> &'a str {
        if !self.normalized.is_empty()
            && let Some(normal) = self.normalized.get(&(node.start_byte() as u32, node.end_byte() as u32))
        {
            return normal;
        }
        self.src.get(node.start_byte()..node.end_byte()).unwrap_or("")
    }

    /// A dotted name (`a.b.c` of an import) without its spaces, each identifier normalised.
    fn dotted_text(&self, node: Node) -> String {
        if self.normalized.is_empty() || node.kind_str() != "dotted_name" {
            return normalise_dotted(self.text(node));
        }
        let mut cursor = node.walk();
        let parts: Vec<&str> = node.named_children(&mut cursor).map(|part| self.text(part)).collect();
        normalise_dotted(&parts.join("."))
    }

    /// The simple name of the class whose method's code `scope` is (the nearest class around
    /// it), if any.
    fn enclosing_class_name(&self, scope: ScopeId) -> Option<String> {
        let mut s = Some(scope);
        while let Some(id) = s {
            let sc = &self.scopes[id as usize];
            if sc.kind == ScopeKind::Class {
                return sc.def.map(|d| self.defs[d as usize].name.to_string());
            }
            s = sc.parent;
        }
        None
    }

    fn scope(&mut self, id: ScopeId) -> &mut ScopeB {
        &mut self.scopes[id as usize]
    }

    fn new_scope(&mut self, kind: ScopeKind, parent: ScopeId, def: Option<DefId>) -> ScopeId {
        self.scopes.push(ScopeB::new(kind, Some(parent), def));
        (self.scopes.len() - 1) as ScopeId
    }

    fn bind(&mut self, scope: ScopeId, name: &str, binding: Binding) {
        self.scope(scope).push_binding(Name::new(name), binding);
        self.module_binds(scope, name);
    }

    /// A binding of `name` in `scope`: when it is the module's, the name is no alias from
    /// here on (an alias's own assignment records it again after binding it).
    fn module_binds(&mut self, scope: ScopeId, name: &str) {
        if scope == 0 {
            self.type_aliases.remove(name);
        }
    }

    /// The unit path prefix for definitions made directly in `scope`.
    fn path_prefix(&self, scope: ScopeId) -> Option<&str> {
        let mut s = scope;
        loop {
            let sc = &self.scopes[s as usize];
            if let Some(def) = sc.def {
                return Some(&self.defs[def as usize].path);
            }
            match (sc.kind, sc.parent) {
                (ScopeKind::Module, _) | (_, None) => return None,
                (_, Some(p)) => s = p,
            }
        }
    }

    /// The def that owns code written in `scope` (anonymous scopes belong to their parent).
    /// The def whose unit code in `scope` belongs to: the nearest enclosing def, class or lambda
    /// (comprehensions are part of their enclosing unit).
    fn owner_def(&self, scope: ScopeId) -> Option<DefId> {
        let mut s = scope;
        loop {
            let sc = &self.scopes[s as usize];
            if sc.kind != ScopeKind::Anonymous || sc.def.is_some() {
                return sc.def;
            }
            s = sc.parent?;
        }
    }

    /// Names the lambdas: `<lambdaN>` is the N-th lambda of its owner (the enclosing def, class,
    /// lambda or the module) in source order, as PyCG and most call-graph tools number them.
    /// Lowering order is not source order everywhere (an assignment's right side is lowered
    /// before its target), so the numbers are given once every lambda is known. Owners come
    /// before what they contain in `defs`, so a nested lambda's prefix is final when it is named.
    fn name_lambdas(&mut self) {
        let mut by_owner: FxHashMap<Option<DefId>, Vec<DefId>> = FxHashMap::default();
        for (id, def) in self.defs.iter().enumerate() {
            if def.kind == DefKind::Lambda {
                by_owner.entry(def.parent).or_default().push(id as DefId);
            }
        }
        let mut ordinal: FxHashMap<DefId, usize> = FxHashMap::default();
        for lambdas in by_owner.values_mut() {
            lambdas.sort_by_key(|&id| self.defs[id as usize].start_byte);
            for (i, &id) in lambdas.iter().enumerate() {
                ordinal.insert(id, i + 1);
            }
        }
        for id in 0..self.defs.len() {
            let Some(&n) = ordinal.get(&(id as DefId)) else { continue };
            let name = format!("<lambda{n}>");
            let path = match self.defs[id].parent {
                Some(p) => format!("{}.{name}", self.defs[p as usize].path),
                None => name.clone(),
            };
            self.defs[id].name = Name::new(&name);
            self.defs[id].path = Name::new(&path);
        }
    }

    fn unique_path(&mut self, scope: ScopeId, name: &str) -> Name {
        let base = match self.path_prefix(scope) {
            Some(prefix) => format!("{prefix}.{name}"),
            None => name.to_string(),
        };
        let count = self.path_counts.entry(base.clone()).or_insert(0);
        *count += 1;
        if *count == 1 { Name::new(&base) } else { Name::new(&format!("{base}#{count}")) }
    }

    /// Start line and byte of a definition including the comment lines directly above it.
    fn start_with_leading_comments(&self, node: Node) -> (u32, u32) {
        let mut row = node.start_position().row;
        let indent = node.start_position().column;
        // Not above the code before it, a line of a string there may start with `#` too: the
        // statement before it, or for a block's first one, the header the block belongs to.
        let before =
            code_before(node).or_else(|| node.parent().filter(|p| p.kind_str() == "block").and_then(code_before));
        let floor = before.map_or(0, |sibling| last_code_token(sibling).end_position().row + 1);
        while row > floor {
            let prev = row - 1;
            let start = self.line_starts[prev] as usize;
            let end = self.line_starts.get(prev + 1).map(|&e| e as usize).unwrap_or(self.src.len());
            let line = self.src.get(start..end).unwrap_or("");
            let trimmed = line.trim_start();
            let this_indent = line.len() - trimmed.len();
            // A shebang and a coding declaration head the file, not the definition below them.
            let file_header = (prev == 0 && trimmed.starts_with("#!"))
                || (prev <= 1
                    && crate::source_encoding::coding_declaration(self.src.as_bytes())
                        .is_some_and(|(at, _)| at == prev));
            if trimmed.starts_with('#') && this_indent == indent && !file_header {
                row = prev;
            } else {
                break;
            }
        }
        if row == node.start_position().row {
            (row as u32 + 1, node.start_byte() as u32)
        } else {
            (row as u32 + 1, self.line_starts[row] + indent as u32)
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn push_def(
        &mut self,
        scope: ScopeId,
        kind: DefKind,
        name: &str,
        outer: Node,
        header: Option<(u32, u32)>,
        docstring: Option<(u32, u32)>,
        decorators: Vec<Expr>,
    ) -> DefId {
        let path = self.unique_path(scope, name);
        let (start_line, start_byte) = self.start_with_leading_comments(outer);
        let end = last_code_token(outer);
        let parent = self.owner_def(scope);
        self.defs.push(Def {
            kind,
            name: Name::new(name),
            path,
            parent,
            body: None,
            start_line,
            end_line: end.end_position().row as u32 + 1,
            start_byte,
            end_byte: end.end_byte() as u32,
            header,
            docstring,
            decorators: decorators.into_boxed_slice(),
            return_type: None,
            conditional: self.conditional_depth > 0,
        });
        (self.defs.len() - 1) as DefId
    }

    /// Lowers a def or class body: conditionality is relative to the body's own scope.
    fn body(&mut self, body: Node, scope: ScopeId) {
        let saved = std::mem::replace(&mut self.conditional_depth, 0);
        let alternative = std::mem::replace(&mut self.in_run_time_alternative, false);
        self.block(body, scope);
        self.conditional_depth = saved;
        self.in_run_time_alternative = alternative;
    }

    /// Reads of a bare name bound in the same function scope (a local or parameter) can never
    /// be a reference to a unit by themselves: what the local holds was read where it was
    /// assigned. Dropping them keeps the IR small (they are most identifiers of a body).
    /// Attribute chains on locals (`self.x`, `s.get`) are kept.
    fn drop_local_reads(&mut self) {
        for scope in self.scopes.iter_mut() {
            if !matches!(scope.kind, ScopeKind::Function | ScopeKind::Anonymous) {
                continue;
            }
            let locals: rustc_hash::FxHashSet<&str> = scope
                .bindings
                .iter()
                .filter(|(n, b)| !matches!(b, Binding::Import(_) | Binding::Def(_)) && !scope.globals.contains(n))
                .map(|(n, _)| n.as_str())
                .collect();
            if locals.is_empty() {
                continue;
            }
            let keep: Vec<Access> = scope
                .accesses
                .iter()
                .filter(
                    |a| !matches!(&a.expr, Expr::Name(n) if a.kind != AccessKind::Write && locals.contains(n.as_str())),
                )
                .cloned()
                .collect();
            scope.accesses = keep;
        }
    }
}

fn is_statement_like(kind: &str) -> bool {
    kind.ends_with("_statement")
        || kind.ends_with("_clause") && kind != "for_in_clause" && kind != "if_clause"
        || matches!(kind, "block" | "function_definition" | "class_definition" | "decorated_definition")
}

/// `update_wrapper` or `functools.update_wrapper`.
fn is_update_wrapper(callee: &Expr) -> bool {
    match callee {
        Expr::Name(n) => n == "update_wrapper",
        Expr::Attr(m, n) => n == "update_wrapper" && matches!(m.as_ref(), Expr::Name(m) if m == "functools"),
        _ => false,
    }
}

/// A call's arguments as lowering keeps them (see [`CallSite`]).
struct CallArguments {
    /// Positional arguments, `Unknown` where one cannot flow; none after a `*splat`.
    args: Vec<Expr>,
    /// Keyword arguments that can carry a callable or an instance.
    keywords: Vec<(Name, Expr)>,
    /// Positional and keyword arguments as written; `None` with a splat.
    written: Option<(u16, u16)>,
}

/// The attribute `type(obj)` is lowered to: not an identifier, so no source names it.
pub(crate) const TYPE_OF: &str = "type()";

/// The builtins whose calls lowering reads a value from: those [`iteration_view`] reads,
/// `property` (see [`Lowerer::property_value`]) and `type` (`type(obj)`, see [`TYPE_OF`]).
const VALUE_BUILTINS: [&str; 12] = [
    "sorted",
    "reversed",
    "iter",
    "tuple",
    "frozenset",
    "list",
    "set",
    "filter",
    "enumerate",
    "zip",
    "property",
    "type",
];

/// Those of [`VALUE_BUILTINS`] the file binds a name to, anywhere: a function or class
/// definition (not a method), an assignment or loop target, an import, a parameter, a walrus, a
/// `global`. A call of such a name may be the file's own function, so it is not read as the
/// builtin's (coarse on purpose: the file's calls of that name keep only their own value). Using
/// the builtin as a value (`isinstance(x, tuple)`) binds nothing.
fn rebound_value_builtins(root: Node, src: &str) -> FxHashSet<&'static str> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = FxHashSet::default();
    // Each occurrence of one of the words in the text, looked up in the tree, instead of a walk
    // over every node; the text is read once for all the words (once per word, it was 13 % of
    // lowering's time on django).
    let mut candidates = Vec::new();
    let mut words = src.char_indices().peekable();
    while let Some((at, c)) = words.next() {
        if !is_word(c) {
            continue;
        }
        let mut end = at + c.len_utf8();
        while let Some(&(next, c)) = words.peek() {
            if !is_word(c) {
                break;
            }
            end = next + c.len_utf8();
            words.next();
        }
        let word = &src[at..end];
        let Some(builtin) = VALUE_BUILTINS.iter().find(|b| **b == word) else { continue };
        if !cannot_bind(src, at, end) {
            candidates.push((at, end, *builtin));
        }
    }
    // Each look-up costs the tree's depth: past a few hundred, or past a budget of levels
    // descended in all, one walk over the tree is cheaper (`x = list | list | ...` of 20,000
    // terms, nested as deep, took 12 s; 512 words in an expression of 100,000 terms, 10 s).
    if candidates.len() > MAX_BUILTIN_LOOKUPS {
        return rebound_by_walking(root, src);
    }
    let mut levels_left = MAX_LOOKUP_LEVELS;
    for (at, end, builtin) in candidates {
        if out.contains(builtin) {
            continue;
        }
        match binding_at(root, at, end, &mut levels_left) {
            Some(true) => {
                out.insert(builtin);
            }
            Some(false) => {}
            None => return rebound_by_walking(root, src),
        }
    }
    out
}

/// How many tree levels [`rebound_value_builtins`] descends in all, over its look-ups, before it
/// walks the whole tree instead.
const MAX_LOOKUP_LEVELS: usize = 20_000;

/// Whether the identifier at `at..end`, if the tree has one there, is where a statement binds
/// its name; `None` when finding it would take more than `levels_left` more levels.
fn binding_at(root: Node, at: usize, end: usize, levels_left: &mut usize) -> Option<bool> {
    let mut cursor = root.walk();
    // The nodes from the root down to the cursor's parent.
    let mut ancestors: Vec<Node> = Vec::new();
    loop {
        let node = cursor.node();
        if node.start_byte() > at {
            return Some(false);
        }
        if node.kind_str() == "identifier" && node.start_byte() == at && node.end_byte() == end {
            return Some(binds_name_in(node, &ancestors));
        }
        // The first child reaching past `at`: the one holding it, if any does.
        if cursor.goto_first_child_for_byte(at).is_none() {
            return Some(false);
        }
        ancestors.push(node);
        *levels_left = levels_left.checked_sub(1)?;
    }
}

/// How many words [`rebound_value_builtins`] looks up in the tree one by one before it walks the
/// whole tree instead.
const MAX_BUILTIN_LOOKUPS: usize = 512;

/// [`rebound_value_builtins`] by one walk over every node, the ancestors of each at hand.
fn rebound_by_walking(root: Node, src: &str) -> FxHashSet<&'static str> {
    let mut out = FxHashSet::default();
    let mut cursor = root.walk();
    // The nodes from the root down to the cursor's parent.
    let mut ancestors: Vec<Node> = Vec::new();
    loop {
        let node = cursor.node();
        if node.kind_str() == "identifier"
            && let Some(builtin) = src.get(node.byte_range()).and_then(|w| VALUE_BUILTINS.iter().find(|b| **b == w))
            && !out.contains(builtin)
            && binds_name_in(node, &ancestors)
        {
            out.insert(*builtin);
        }
        if cursor.goto_first_child() {
            ancestors.push(node);
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                return out;
            }
            ancestors.pop();
        }
    }
}

/// Whether the word at `at..end` of `src` cannot be a name bound there, by its neighbours alone:
/// an attribute (`self.list`), or a name called or subscripted (`list(x)`, `list[int]`) that no
/// `def` or `class` names. Those need no look-up in the tree, which costs the tree's depth:
/// `list[T0] | list[T1] | ...`, 10,000 terms nested as deep, took 3 s.
fn cannot_bind(src: &str, at: usize, end: usize) -> bool {
    // Past blanks, form feeds and line continuations (`def \` then `list(x):` on the next line
    // defines `list`), but not past a line's end: the line before may end with a `.` of its own
    // (`# a comment.`, `1.`, `...`), and the line after may open a bracket.
    let before = before_continuations(&src[..at]);
    let after = after_continuations(&src[end..]);
    let defined = before.ends_with("def") || before.ends_with("class");
    before.ends_with('.') || (after.starts_with(['(', '[']) && !defined)
}

/// `text` without the blanks, form feeds and backslash continuations it ends with. A backslash
/// on a line holding a `#` may end a comment, which continues nothing (`# C:\\data\\.\\`): the
/// text is then left as it is, and the word after it is looked up in the tree.
fn before_continuations(mut text: &str) -> &str {
    loop {
        text = text.trim_end_matches([' ', '\t', '\x0c']);
        let Some(rest) = text.strip_suffix("\\\n").or_else(|| text.strip_suffix("\\\r\n")) else { return text };
        let line_start = rest.rfind('\n').map_or(0, |i| i + 1);
        if rest[line_start..].contains('#') {
            return text;
        }
        text = rest;
    }
}

/// `text` without the blanks, form feeds and backslash continuations it starts with.
fn after_continuations(mut text: &str) -> &str {
    loop {
        text = text.trim_start_matches([' ', '\t', '\x0c']);
        match text.strip_prefix("\\\n").or_else(|| text.strip_prefix("\\\r\n")) {
            Some(rest) => text = rest,
            None => return text,
        }
    }
}

/// Whether identifier `node` is where a statement binds its name in a scope the module's code
/// may read: not in a class body, whose names (methods, nested classes, class attributes) only
/// the class body's own code reads, and that code checks its class's names itself (see
/// `Lowerer::builtin_rebound`). `global` and `nonlocal` count wherever they are: in a class body
/// they bind the module's or the enclosing function's name. `path` holds `node`'s ancestors from the root down to its parent.
fn binds_name_in(node: Node, path: &[Node]) -> bool {
    // Nearest first.
    let up = |k: usize| path.len().checked_sub(k + 1).and_then(|i| path.get(i)).copied();
    let Some(parent) = up(0) else { return false };
    let is_field = |field: &str| parent.child_by_field_name(field) == Some(node);
    let binds = match parent.kind_str() {
        // `global` binds the module's name, `nonlocal` the enclosing function's, also when
        // written in a class body.
        "global_statement" | "nonlocal_statement" => return true,
        // A parameter is its function's or lambda's, never a class body's.
        "parameters" | "lambda_parameters" | "typed_parameter" => return true,
        "default_parameter" | "typed_default_parameter" if is_field("name") => return true,
        "function_definition" | "class_definition" => is_field("name"),
        "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause" => is_field("left"),
        "pattern_list" | "tuple_pattern" | "list_pattern" | "list_splat_pattern" | "dictionary_splat_pattern" => true,
        "as_pattern_target" => true,
        "named_expression" => is_field("name"),
        "aliased_import" => is_field("alias"),
        // `import zip`, `import zip.sub` (which binds `zip`), `from m import zip`; a capture
        // pattern (`case zip:`, `case P(x=zip)`), not a class pattern's class or a value pattern
        // (`case m.zip:`).
        "dotted_name" => {
            let first = parent.named_child(0) == Some(node);
            let single = parent.named_child_count() == 1;
            up(1).is_some_and(|holder| match holder.kind_str() {
                "import_statement" => first,
                "import_from_statement" => single && holder.child_by_field_name("module_name") != Some(parent),
                "case_pattern" | "keyword_pattern" => single,
                _ => false,
            })
        }
        // `case [*zip]`, `case {**zip}`.
        "splat_pattern" => true,
        // `case 1 as zip` (in a `with`, the name bound is the alias's, `as_pattern_target`).
        "as_pattern" => parent.named_child(0) != Some(node),
        // `with a as (zip):`, `with a as (b, (c, *zip)):`, `with a as [b, zip]:`, looked for a
        // few brackets up only (each look passes the brackets around the name, and a name deep
        // in `[[[...]]]` is no `with` target).
        "parenthesized_expression" | "tuple" | "list" | "list_splat" => path
            .iter()
            .rev()
            .take(MAX_TARGET_BRACKETS + 1)
            .find(|a| !matches!(a.kind_str(), "parenthesized_expression" | "tuple" | "list" | "list_splat"))
            .is_some_and(|target| target.kind_str() == "as_pattern_target"),
        _ => false,
    };
    binds && !bound_in_class_body(node, path, parent.kind_str() == "named_expression")
}

/// How many levels up [`bound_in_class_body`] looks for the scope a name is bound in: past it,
/// the binding counts for the whole file (coarse, never an edge invented), and each look-up
/// stays short.
const MAX_SCOPE_SEARCH: usize = 64;

/// Whether the nearest scope around the binding of `node` is a class body. Only a function's,
/// a lambda's or a class's body is a scope of its own: a definition's name, its decorators,
/// defaults and bases are bound and evaluated in the scope around it. A comprehension binds its
/// loop's names itself, but a walrus (`walrus`) in it binds in the scope around it.
fn bound_in_class_body(node: Node, path: &[Node], walrus: bool) -> bool {
    let mut child = node;
    for ancestor in path.iter().rev().take(MAX_SCOPE_SEARCH) {
        let in_body = ancestor.child_by_field_name("body") == Some(child);
        match ancestor.kind_str() {
            // A walrus in an annotation (`v: (list := Bag) = 1`, `def m(a: (zip := Z))`): the
            // class body evaluates it, but lowering records no binding from it, so the class
            // body's own code could not tell; it counts for the whole file.
            "type" if walrus => return false,
            "class_definition" if in_body => return true,
            "function_definition" | "lambda" if in_body => return false,
            "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression"
                if !walrus =>
            {
                return false;
            }
            "module" => return false,
            _ => {}
        }
        child = *ancestor;
    }
    false
}

/// How many brackets around a name [`binds_name_in`] looks through for a `with` target.
const MAX_TARGET_BRACKETS: usize = 8;

/// What iterating the result of a builtin that iterates over its arguments gives, as a list of
/// those elements: `enumerate(xs)` pairs of an `int` and an element of `xs`, `zip(a, b)` pairs of
/// their elements, `sorted(xs)`, `reversed(xs)`, `iter(xs)`, `tuple(xs)`, `list(xs)`, `set(xs)`,
/// `frozenset(xs)` and `filter(f, xs)` the elements of `xs`. The call keeps its own value beside
/// it (the builtin's result type), so `for i, x in enumerate(self.items)` gives `x` what
/// `self.items` holds, and `self.kids = list(children)` what `children` holds. `sorted` counts
/// only with a `key=`: a container's elements are, for a dict, its values, where iterating it
/// gives its keys, and `sorted(commands)` of a dict is how its keys are listed in order, while
/// objects are sorted by a key. A function of the same name defined in the file would only add
/// the argument's elements.
fn iteration_view(callee: &Expr, args: &[Expr], sorted_by_key: bool, std_deque: bool) -> Option<Expr> {
    let element = |xs: &Expr| (*xs != Expr::Unknown).then(|| Expr::Subscript(Box::new(xs.clone())));
    let list_of = |item: Expr| Expr::Container(ContainerKind::List, vec![item]);
    // `collections.deque(xs)` (`std_deque`: the callee names it, see
    // `Lowerer::names_std_function`).
    if let ([xs, ..], true) = (args, std_deque) {
        return element(xs).map(list_of);
    }
    let Expr::Name(name) = callee else { return None };
    match (name.as_str(), args) {
        ("sorted", [xs, ..]) if sorted_by_key => element(xs).map(list_of),
        ("reversed" | "iter" | "tuple" | "frozenset" | "list" | "set", [xs, ..]) => element(xs).map(list_of),
        ("filter", [_, xs]) => element(xs).map(list_of),
        ("enumerate", [xs, ..]) => {
            element(xs).map(|x| list_of(Expr::Container(ContainerKind::Tuple, vec![Expr::Literal("int"), x])))
        }
        ("zip", items) if !items.is_empty() && items.iter().any(|xs| *xs != Expr::Unknown) => {
            let elements = items.iter().map(|xs| element(xs).unwrap_or(Expr::Unknown)).collect();
            Some(list_of(Expr::Container(ContainerKind::Tuple, elements)))
        }
        _ => None,
    }
}

fn flow_only(arg: Expr) -> Expr {
    if is_flow_worthy(&arg) { arg } else { Expr::Unknown }
}

fn normalise_dotted(text: &str) -> String {
    text.split('.').map(str::trim).filter(|s| !s.is_empty()).collect::<Vec<_>>().join(".")
}

/// Whether an identifier spelled `name` occurs anywhere under `node`.
/// The classes a `case` pattern requires the subject to be an instance of: `Circle()`,
/// `pkg.Square(x=1) | Tri()`, `Point() as p`; none when any alternative is not a class pattern
/// (`case Circle() | None:` says nothing of the subject's class).
fn case_classes<'s>(pattern: Node, text: &dyn Fn(Node) -> &'s str) -> Vec<&'s str> {
    let mut node = pattern;
    loop {
        match node.kind_str() {
            "case_pattern" | "as_pattern" => match node.named_child(0) {
                Some(inner) => node = inner,
                None => return Vec::new(),
            },
            "class_pattern" => {
                return node.named_child(0).filter(|n| n.kind_str() == "dotted_name").map(text).into_iter().collect();
            }
            "union_pattern" => {
                let mut cursor = node.walk();
                let mut out = Vec::new();
                for alternative in node.named_children(&mut cursor) {
                    let classes = case_classes(alternative, text);
                    if classes.is_empty() {
                        return Vec::new();
                    }
                    out.extend(classes);
                }
                return out;
            }
            _ => return Vec::new(),
        }
    }
}

/// The name an expression starts from: `a` of `a`, `a.b`, `a.b()`, `a[0].c`.
fn root_name(expr: &Expr) -> Option<&Name> {
    match expr {
        Expr::Name(n) => Some(n),
        Expr::Attr(base, _)
        | Expr::Call(base)
        | Expr::Subscript(base)
        | Expr::Item(base, _)
        | Expr::ItemAt(base, _) => root_name(base),
        _ => None,
    }
}

fn mentions_identifier(node: Node, name: &str, src: &str) -> bool {
    let mut cursor = node.walk();
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.kind_str() == "identifier" && src.get(n.start_byte()..n.end_byte()) == Some(name) {
            return true;
        }
        stack.extend(n.children(&mut cursor));
    }
    false
}

/// The names an `__all__` value lists: literal lists and tuples of strings, and sums of them
/// (`["a"] + ["b"]`); `None` for anything else (a comprehension, a call, another list).
fn all_names(lowerer: &Lowerer, node: Option<Node>) -> Option<Vec<Name>> {
    let node = node?;
    match node.kind_str() {
        "list" | "tuple" | "parenthesized_expression" => {
            let mut out = Vec::new();
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                match child.kind_str() {
                    "string" => {
                        let s = string_value(lowerer.text(child));
                        if !s.is_empty() {
                            out.push(Name::new(&s));
                        }
                    }
                    "comment" => {}
                    "list" | "tuple" | "parenthesized_expression" | "binary_operator" => {
                        out.extend(all_names(lowerer, Some(child))?)
                    }
                    _ => return None,
                }
            }
            Some(out)
        }
        "binary_operator" => {
            let mut out = all_names(lowerer, node.field("left"))?;
            out.extend(all_names(lowerer, node.field("right"))?);
            Some(out)
        }
        _ => None,
    }
}

pub use literal::{clean_docstring, string_value};

/// The statement before `node` in its block, comments left out.
fn code_before(node: Node) -> Option<Node> {
    let mut before = node.prev_sibling();
    while let Some(sibling) = before.filter(|s| s.kind_str() == "comment") {
        before = sibling.prev_sibling();
    }
    before
}

/// The last token of `node` that is not a comment. tree-sitter leaves the comments that follow a
/// block's last statement, up to the next line of code, inside the block: a unit ends with its
/// own code, and those comments are most often about what follows.
fn last_code_token(node: Node) -> Node {
    let mut node = node;
    loop {
        let last_code = (0..node.child_count())
            .rev()
            .filter_map(|i| node.child(i))
            .find(|child| child.kind_str() != "comment" && child.end_byte() > child.start_byte());
        match last_code {
            Some(child) => node = child,
            None => return node,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Re-parsing from the previous tree gives exactly what a fresh parse gives, through a run
    /// of edits that break the syntax and mend it, grow and shrink the file, and touch its ends.
    #[test]
    fn incremental_reparse_equals_a_fresh_parse() {
        let mut text = String::from(
            "import os\n\n\nclass A:\n    \"\"\"Doc.\"\"\"\n\n    def m(self, x):\n        return helper(x)\n\n\n\
             def helper(y):\n    return os.path.join(y, 'z')\n",
        );
        let path = "incremental_reparse_test/a.py";
        let edits: &[(&str, &str)] = &[
            ("return helper(x)", "return helper(x) + helper(x * 2)"),
            ("def helper(y):", "def helper(y"),
            ("def helper(y", "def helper(y, z=1):"),
            ("class A:", "class A(Base):\n    attr = 1\n"),
            ("import os\n", ""),
            ("'z')\n", "'z')\n\n\ndef tail():\n    pass\n"),
            ("    \"\"\"Doc.\"\"\"\n", "    \"\"\"Doc, now longer,\n    and on two lines.\"\"\"\n"),
            ("(self, x)", "(self, x"),
            ("(self, x", "(self, x)"),
            // é and è share their first UTF-8 byte: the edit starts inside a character.
            ("'z'", "'zé'"),
            ("'zé'", "'zè'"),
        ];
        let mut syntax = lower_file(path, &Arc::from(text.as_str()));
        assert_eq!(syntax, lower(&text));
        for (from, to) in edits {
            assert!(text.contains(from), "fixture edit {from:?} does not apply");
            text = text.replacen(from, to, 1);
            syntax = lower_file(path, &Arc::from(text.as_str()));
            assert_eq!(syntax, lower(&text), "after replacing {from:?} with {to:?}:\n{text}");
        }
        // Same text again: the kept tree is reused as it is.
        assert_eq!(lower_file(path, &Arc::from(text.as_str())), lower(&text));
    }

    #[test]
    fn deep_and_long_expressions_do_not_exhaust_the_stack() {
        // Run on a thread with the default stack of a spawned thread (2 MiB).
        let handle = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| {
                let chain = vec!["f()"; 5000].join(" or ");
                let sum = vec!["g()"; 5000].join(" + ");
                let nested = format!("{}x{}", "(".repeat(3000), ")".repeat(3000));
                let text = format!("A = {chain}\nB = {sum}\nC = {nested}\ndef h():\n    return f()\n");
                let syn = lower(&text);
                let module_calls = syn.scopes[0].calls.len();
                (module_calls, syn.defs.iter().any(|d| d.path == "h"), syn.parse_errors)
            })
            .expect("spawn");
        let (calls, has_h, errors) = handle.join().expect("no stack overflow");
        assert_eq!(calls, 10_000, "every call of the flat chains is kept");
        assert!(has_h, "what follows is lowered");
        assert!(errors >= 1, "the over-deep parentheses flag the file");
    }

    #[test]
    fn rebound_builtins_are_found_by_their_bindings_only() {
        let rebound = |text: &str| {
            let tree = parse(text).expect("grammar");
            let mut found: Vec<&str> = rebound_value_builtins(tree.root_node(), text).into_iter().collect();
            found.sort_unstable();
            // The walk over the whole tree, taken when the look-ups would cost too much, agrees.
            let mut walked: Vec<&str> = rebound_by_walking(tree.root_node(), text).into_iter().collect();
            walked.sort_unstable();
            assert_eq!(found, walked, "{text:?}");
            found
        };
        let text = "def list(x):\n    pass\nclass type (Base):\n    pass\nzip = 3\nfor iter in xs:\n    pass\n";
        assert_eq!(rebound(text), ["iter", "list", "type", "zip"]);
        // Read, called, subscripted or an attribute: nothing bound.
        let text = "x = list(y) + tuple [0]\nself.zip = 1\nprint(set)\nf = filter\nclass C:\n    def type(self):\n        pass\n";
        assert_eq!(rebound(text), Vec::<&str>::new());
        // A class attribute, a method or a nested class binds a name of its class (the class
        // body's own code checks those itself); `global` there binds the module's name.
        let text =
            "class C:\n    list = Bag\n    zip: int = 0\n    from m import set\n    for iter in xs:\n        pass\n";
        assert_eq!(rebound(text), Vec::<&str>::new());
        assert_eq!(rebound("class C:\n    global tuple\n    tuple = Bag\n"), ["tuple"]);
        // Around a class body: a function's names, a comprehension's, a parameter's, and a
        // walrus in a comprehension, a default or a class's bases (bound outside them).
        let text = "class C:\n    def m(self, list=1):\n        zip = 1\n    xs = [tuple for tuple in ys]\n";
        assert_eq!(rebound(text), ["list", "tuple", "zip"]);
        assert_eq!(rebound("class C:\n    def m(self, x=(set := 1)):\n        pass\n"), Vec::<&str>::new());
        assert_eq!(rebound("class C:\n    def m(self):\n        xs = [(iter := y) for y in ys]\n"), ["iter"]);
        assert_eq!(rebound("class C((list := Base)):\n    pass\nf = lambda tuple: tuple\n"), ["list", "tuple"]);
        assert_eq!(rebound("class C:\n    f = lambda: (zip := 1)\n"), ["zip"]);
        let text = "class C:\n    v: (list := Bag) = 1\n    def m(self, a: (zip := Z)) -> (set := S):\n        pass\n";
        assert_eq!(rebound(text), ["list", "set", "zip"]);
        assert_eq!(rebound("def f():\n    class C:\n        nonlocal list\n        list = Bag\n"), ["list"]);
        // A method or a nested class binds a name of its class, decorated or not.
        let text = "class C:\n    @property\n    def type(self):\n        pass\n    class list:\n        pass\n    @dataclass\n    class zip:\n        pass\n";
        assert_eq!(rebound(text), Vec::<&str>::new());
        // Decorated at the module's level, a definition binds its name.
        assert_eq!(rebound("@cache\ndef list(x):\n    pass\n@dataclass\nclass zip:\n    pass\n"), ["list", "zip"]);
        // Followed by a bracket after a `def` or `class`, a name is bound all the same, also
        // across a line continuation or a form feed.
        assert_eq!(rebound("async def set(x):\n    pass\n"), ["set"]);
        assert_eq!(rebound("def \\\nlist(x):\n    pass\nclass\x0ctype(B):\n    pass\n"), ["list", "type"]);
        // Whatever the line before ends with: its own `.`, or a comment ending in a backslash,
        // which continues no line.
        // Match captures, names bound by `with` in brackets, the first part of a dotted import.
        let text = "match x:\n    case list:\n        pass\n    case [a, *zip]:\n        pass\n    case {**set}:\n        pass\n    case P(x=iter):\n        pass\n    case 1 as tuple:\n        pass\n";
        assert_eq!(rebound(text), ["iter", "list", "set", "tuple", "zip"]);
        let text = "match x:\n    case type():\n        pass\n    case m.list:\n        pass\n    case P(zip=1):\n        pass\n";
        assert_eq!(rebound(text), Vec::<&str>::new());
        let text =
            "with a as (list):\n    pass\nwith b as (c, zip):\n    pass\nimport set.sub\nimport tuple.sub as t\n";
        assert_eq!(rebound(text), ["list", "set", "zip"]);
        assert_eq!(rebound("with list as f:\n    pass\nwith open(p) as f:\n    pass\n"), Vec::<&str>::new());
        for target in ["(head, *list)", "[b, *list]", "(b, (list))", "((list))", "[b, (list)]", "(b, [c, list])"] {
            assert_eq!(rebound(&format!("with open(p) as {target}:\n    pass\n")), ["list"], "{target}");
        }
        let text = "# Our own.\nlist = Bag\nRATIO = 1.\nzip = Z\nfrom m import set\n(a, b) = (1, 2)\n";
        assert_eq!(rebound(text), ["list", "set", "zip"]);
        assert_eq!(rebound("# Saved under C:\\data\\.\\\nlist = Bag\n"), ["list"]);
        // More candidates than are looked up one by one, or a few in an expression so deep that
        // looking them up would cost too many levels: the walk decides, and finds the binding
        // behind them.
        let reads = vec!["list"; 2 * MAX_BUILTIN_LOOKUPS].join(" | ");
        assert_eq!(rebound(&format!("x = {reads}\n")), Vec::<&str>::new());
        assert_eq!(rebound(&format!("x = {reads}\ndef f(list):\n    pass\nimport zip\n")), ["list", "zip"]);
        let deep = format!("x = {} or a\n", vec!["a"; MAX_LOOKUP_LEVELS].join(" or "));
        let tree = parse(&deep).expect("grammar");
        let mut levels_left = MAX_LOOKUP_LEVELS;
        // `or` groups to the left: the first operand is the deepest.
        assert_eq!(binding_at(tree.root_node(), 4, 5, &mut levels_left), None, "over the budget");
        assert_eq!(rebound(&format!("{deep}x = list\nlist = 1\n")), ["list"]);
    }

    #[test]
    fn long_and_deep_annotations_do_not_exhaust_the_stack() {
        // A generated union of 20,000 types recursed once per `|` and killed the process, and a
        // dotted name of 20,000 parts made an attribute chain as deep.
        let handle = std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(|| {
                let union = vec!["A"; 20_000].join(" | ");
                let nested = format!("{}A{}", "list[".repeat(3000), "]".repeat(3000));
                // A dotted name 10,000 parts long, made an attribute chain as deep.
                let dotted: Vec<String> = (0..10_000).map(|i| format!("a{i}")).collect();
                let dotted = dotted.join(".");
                let text = format!(
                    "class A:\n    pass\ndef f(x: {union}) -> {union}:\n    pass\nv: {union} = 1\n\
                     def g(x: {nested}):\n    pass\ndef k(p: {dotted}) -> {dotted}:\n    pass\nw: {dotted} = 1\n\
                     def after():\n    return 1\n"
                );
                let syn = lower(&text);
                // Summarised as resolution reads it (its walks recurse over expressions too).
                let summary = crate::summary::summarise(&syn, "m", false);
                assert!(summary.function("k").is_some());
                let reads_of_a =
                    |s: &Scope| s.accesses.iter().filter(|a| matches!(&a.expr, Expr::Name(n) if n == "A")).count();
                let f = syn.defs.iter().find(|d| d.path == "f").and_then(|d| d.body).expect("f");
                (
                    reads_of_a(&syn.scopes[0]),
                    reads_of_a(&syn.scopes[f as usize]),
                    syn.defs.iter().any(|d| d.path == "after"),
                    syn.parse_errors,
                )
            })
            .expect("spawn");
        let (module_reads, f_reads, has_after, errors) = handle.join().expect("no stack overflow");
        assert!(module_reads + f_reads >= 60_000, "every type of the unions is read: {module_reads} + {f_reads}");
        assert!(has_after, "what follows is lowered");
        assert!(errors >= 1, "the over-deep subscript flags the file");
    }

    #[test]
    fn comprehensions_whose_names_double_at_each_clause_stay_small() {
        // Each clause pairs the name before it: written out, the element would have 2^20 parts
        // (a million; more clauses would make a regression exhaust memory rather than fail).
        let clauses: String = (1..20).map(|i| format!(" for v{i} in (v{p}, v{p})", p = i - 1)).collect();
        let text = format!("def f(xs):\n    out = [v19 for v0 in xs{clauses}]\n    return out\n");
        let syn = lower(&text);
        let f = syn.scopes.iter().find(|s| s.bindings.iter().any(|(n, _)| n == "out")).expect("f's scope");
        let Some((_, Binding::Value(Expr::Container(ContainerKind::List, elements)))) =
            f.bindings.iter().find(|(n, _)| n == "out")
        else {
            panic!("out is a list: {:?}", f.bindings)
        };
        assert!(
            elements.iter().all(|e| expressions::parts(e, 0) <= 2 * expressions::MAX_SUBSTITUTED_PARTS),
            "{elements:?}"
        );
        // Two clauses are written out whole.
        let syn = lower("def g(xs):\n    out = [b for a in xs for b in (a, a)]\n");
        let g = syn.scopes.iter().find(|s| s.bindings.iter().any(|(n, _)| n == "out")).expect("g's scope");
        let element = Expr::Subscript(Box::new(Expr::Container(
            ContainerKind::Tuple,
            vec![Expr::Subscript(Box::new(Expr::Name(Name::new("xs")))); 2],
        )));
        let out = g.bindings.iter().find(|(n, _)| n == "out").map(|(_, b)| b.clone());
        assert_eq!(out, Some(Binding::Value(Expr::Container(ContainerKind::List, vec![element]))));
    }

    #[test]
    fn kinds_by_id_are_the_kinds_tree_sitter_names() {
        let clean = "import os\nfrom . import (a as b,)\n@dec(1)\nclass A(B, metaclass=M):\n    x: int = 1\n    \
                     def f(self, *a, k=2, **kw) -> 'A':\n        async def g():\n            await h(); yield\n        \
                     return [i async for i in g() if i] or {k: v for k, v in kw.items()} or (lambda q: q)(1)\n\
                     match x:\n    case {\"a\": [1, *rest]} | None if rest:\n        pass\n\
                     type T[U] = list[U]\nwith (open(p) as f, g()):\n    del f[0], a.b\n\
                     try:\n    raise E from e\nexcept* (E, F) as e:\n    print(f\"{e!r:>{w}}\", b'x' rb\"y\")\n";
        // Broken lines: tree-sitter's own `ERROR` and missing nodes have ids past the grammar's.
        let broken = "def f(:\n    x = [1,\ndef dumpobj: int, fp) -> None:\n    pass\nclass (:\n    y = )\n";
        for (text, least, errors_expected) in [(clean, 300, false), (broken, 20, true)] {
            let tree = parse(text).expect("parses");
            let mut cursor = tree.root_node().walk();
            let (mut seen, mut errors) = (0, 0);
            loop {
                let node = cursor.node();
                assert_eq!(node.kind_str(), node.kind(), "at byte {} of {text:?}", node.start_byte());
                seen += 1;
                errors += usize::from(node.is_error());
                if cursor.goto_first_child() {
                    continue;
                }
                while !cursor.goto_next_sibling() {
                    if !cursor.goto_parent() {
                        break;
                    }
                }
                if cursor.node() == tree.root_node() {
                    break;
                }
            }
            assert!(seen > least, "the text has many nodes ({seen})");
            assert_eq!(errors > 0, errors_expected, "{errors} error nodes in {text:?}");
        }
    }

    #[test]
    fn a_byte_order_mark_is_not_a_parse_error() {
        let text = "\u{feff}import os\n\ndef f():\n    return os.getcwd()\n";
        let syn = lower(text);
        assert_eq!(syn.parse_errors, 0);
        let f = syn.defs.iter().find(|d| d.path == "f").expect("f is a unit");
        assert_eq!(&text[f.start_byte as usize..f.end_byte as usize], "def f():\n    return os.getcwd()");
        // The parser parses whole documents again afterwards.
        let plain = lower("def g():\n    return 1\n");
        assert_eq!(plain.parse_errors, 0);
        assert!(plain.defs.iter().any(|d| d.path == "g"));
    }

    #[test]
    fn deep_targets_attribute_chains_and_blocks_do_not_exhaust_the_stack() {
        // Each of these overflowed the stack before lowering bounded every recursion (a chained
        // assignment recursed per target, an attribute chain per link, a nested target per level,
        // a `case` pattern per level).
        let cases = [
            format!("{}1\n", (0..10_000).map(|i| format!("v{i} = ")).collect::<String>()),
            format!("x = a{}\n", ".b".repeat(10_000)),
            format!("{}a,{}) = b\n", "(".repeat(10_000), "),".repeat(9_999)),
            format!("match x:\n    case {}a{}:\n        pass\n", "C(".repeat(10_000), ")".repeat(10_000)),
            format!("match x:\n    case {}a{}:\n        pass\n", "{1: ".repeat(10_000), "}".repeat(10_000)),
            format!("match x:\n    case {}a{}:\n        pass\n", "(".repeat(10_000), " as b)".repeat(10_000)),
            format!(
                "{}{}f()\n",
                (0..1_000).map(|i| format!("{}if x:\n", " ".repeat(i))).collect::<String>(),
                " ".repeat(1_000)
            ),
        ];
        for text in cases {
            let handle = std::thread::Builder::new()
                .stack_size(2 * 1024 * 1024)
                .spawn(move || {
                    let syn = lower(&format!("{text}def after():\n    return 1\n"));
                    (syn.defs.iter().any(|d| d.path == "after"), syn.parse_errors)
                })
                .expect("spawn");
            let (has_after, errors) = handle.join().expect("no stack overflow");
            assert!(has_after, "what follows is lowered");
            assert!(errors >= 1, "the cut flags the file");
        }
    }

    #[test]
    fn a_header_without_its_colon_keeps_its_unit_with_spans_of_the_file_itself() {
        let src = "class Cache(Base)\n    \"\"\"Doc.\"\"\"\n    def get(self, key)\n        return self.load(key)\n\ndef after():\n    return Cache().get(1)\n";
        let syn = lower(src);
        assert!(syn.parse_errors > 0, "still flagged with the file's own errors");
        let units: Vec<(&str, Option<String>, Option<String>)> =
            syn.defs.iter().map(|d| (d.path.as_str(), d.signature(src), d.docstring(src))).collect();
        assert_eq!(
            units,
            [
                ("Cache", Some("class Cache(Base)".to_string()), Some("Doc.".to_string())),
                ("Cache.get", Some("def get(self, key)".to_string()), None),
                ("after", Some("def after()".to_string()), None),
            ]
        );
        let after = &syn.defs[2];
        assert_eq!(&src[after.start_byte as usize..after.end_byte as usize], "def after():\n    return Cache().get(1)");
        let call = &syn.scopes[syn.defs[1].body.unwrap_or(0) as usize].calls[0];
        assert_eq!(callee_text(src, call.callee_span), "self.load");
    }

    #[test]
    fn a_definition_header_typed_above_the_next_one_hides_nothing() {
        // Each state of typing a function above `b`: the name, a return annotation before the
        // colon, a method's name in a class. `b` (and `C.n`) used to vanish into the header.
        for typed in ["def ty", "def ty\n", "def f(x) -> int", "def f(x) -> ", "async def g", "class K(Base)"] {
            let src = format!(
                "def a():\n    return 1\n\n\n{typed}\ndef b(x) -> int:\n    \"\"\"Doc.\"\"\"\n    return a()\n\n\nclass C:\n    def ne\n    def n(self):\n        return b(1)\n"
            );
            let syn = lower(&src);
            assert!(syn.parse_errors > 0, "{typed:?}: still flagged");
            let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
            assert_eq!(paths, ["a", "b", "C", "C.n"], "{typed:?}");
            let b = &syn.defs[1];
            assert_eq!(
                &src[b.start_byte as usize..b.end_byte as usize],
                "def b(x) -> int:\n    \"\"\"Doc.\"\"\"\n    return a()"
            );
            assert_eq!(b.docstring(&src), Some("Doc.".to_string()), "{typed:?}");
            let body = syn.defs[3].body.unwrap_or(0) as usize;
            let calls: Vec<String> = syn.scopes[body].calls.iter().map(|c| callee_text(&src, c.callee_span)).collect();
            assert_eq!(calls, ["b"], "{typed:?}");
        }
    }

    #[test]
    fn a_line_indented_with_a_tab_hides_nothing_else() {
        // Python refuses the file (TabError); tree-sitter read the tab as eight columns, out of
        // the `if` it was typed in, and took the class below into its error (a black-box find
        // on rich's `pretty.py`).
        let src = "def install():\n    try:\n        ip = 1\n    except NameError:\n        class RichFormatter:\n                if self.pprint:\n\treturn f(\n                    )\n                else:\n                    return repr(value)\n        rich_formatter = RichFormatter()\n\n\nclass Pretty:\n    def __init__(self):\n        self.h = 1\n\n    def render(self):\n        return 1\n\n\ndef after():\n    pass\n";
        let syn = lower(src);
        assert!(syn.parse_errors > 0, "still flagged");
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(
            paths,
            ["install", "install.RichFormatter", "Pretty", "Pretty.__init__", "Pretty.render", "Pretty.h", "after"],
            "{paths:?}"
        );
        // Spans in the file's own text.
        let pretty = &syn.defs[2];
        assert!(src[pretty.start_byte as usize..].starts_with("class Pretty:"), "{}", pretty.start_byte);
        // A method typed with a tab after a blank line: tree-sitter reads it nested in the method
        // above, without an error; Python refuses the file (TabError). It is flagged, and stays
        // a method of the class.
        let src = "class A:\n    def f(self):\n        return 1\n\n\tdef g(self):\n        return 2\n";
        let syn = lower(src);
        assert!(syn.parse_errors > 0, "flagged");
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["A", "A.f", "A.g"]);
        // A class docstring typed with a tab: the methods below stay the class's.
        let src = "class Console:\n\t\"\"\"Doc.\"\"\"\n\n    def a(self):\n        return 1\n\n    def b(self):\n        return 2\n";
        let paths: Vec<String> = lower(src).defs.iter().map(|d| d.path.to_string()).collect();
        assert_eq!(paths, ["Console", "Console.a", "Console.b"]);
    }

    #[test]
    fn a_nul_byte_is_the_error_the_file_is_flagged_with() {
        let src = "def f0():\n    return 0\n\n\ns = 'a\0b'\n\n\ndef f1():\n    return 1\n";
        let syn = lower(src);
        assert!(syn.parse_errors > 0);
        assert_eq!(syn.first_error.as_ref().map(|(at, _)| *at as usize), src.find('\0'), "{:?}", syn.first_error);
        // The definitions around it stay (the statement holding it is tree-sitter's error).
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["f0", "f1"]);
    }

    #[test]
    fn a_docstring_being_typed_hides_nothing_else() {
        // The opening quotes of `links` pair with `after`'s: without the repair, `links`'s body
        // and `after` vanish into one string and `after`'s docstring is read as code.
        let src = "def before():\n    \"\"\"Doc.\"\"\"\n    return 1\n\n\ndef links(value):\n    \"\"\"Return the links\n\n    return parse(value)\n\n\ndef after():\n    \"\"\"Call links.\"\"\"\n    return links(before())\n";
        let syn = lower(src);
        assert!(syn.parse_errors > 0, "still flagged with the file's own errors");
        let units: Vec<(&str, u32, u32, Option<String>)> =
            syn.defs.iter().map(|d| (d.path.as_str(), d.start_line, d.end_line, d.docstring(src))).collect();
        assert_eq!(
            units,
            [
                ("before", 1, 3, Some("Doc.".to_string())),
                ("links", 6, 9, Some("Return the links".to_string())),
                ("after", 12, 14, Some("Call links.".to_string())),
            ]
        );
        let calls = |i: usize| -> Vec<String> {
            let body = syn.defs[i].body.unwrap_or(0) as usize;
            syn.scopes[body].calls.iter().map(|c| callee_text(src, c.callee_span)).collect()
        };
        assert_eq!(calls(1), ["parse"], "the body below the docstring is code");
        assert_eq!(calls(2), ["before", "links"]);
    }

    #[test]
    fn a_clause_not_at_its_statements_column_is_a_parse_error() {
        let valid = "def f(x):\n    if x: a()\n    elif y:\n        b()\n    else: c()\n    try:\n        d()\n    except E:\n        pass\n    else:\n        e()\n    finally:\n        g()\n    for i in x:\n        pass\n    else:\n        h()\n";
        assert_eq!(lower(valid).parse_errors, 0);
        let dedented = valid.replace("    else: c()", "  else: c()");
        let syntax = lower(&dedented);
        assert_eq!(syntax.parse_errors, 1, "Python: unindent does not match any outer indentation level");
        assert_eq!(syntax.defs.len(), 1, "the function keeps its body");
    }

    #[test]
    fn old_mac_line_endings_are_line_breaks() {
        let syn = lower("def f():\r    return 1\r\rdef g():\r    return f()\r");
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["f", "g"], "g is not nested in f");
        assert_eq!(syn.parse_errors, 0);
        assert_eq!(syn.defs[1].start_line, 4);
    }

    #[test]
    fn edits_are_the_span_between_common_prefix_and_suffix() {
        let e = edit_between("ab\ncd\nef", "ab\ncXd\nef");
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (4, 4, 5));
        assert_eq!(e.start_position, tree_sitter::Point { row: 1, column: 1 });
        // A text that only grows at the end, and one that is emptied.
        let e = edit_between("abc", "abcd");
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (3, 3, 4));
        let e = edit_between("abc", "");
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (0, 3, 0));
    }

    #[test]
    fn a_shebang_and_a_coding_declaration_are_not_a_definitions_leading_comment() {
        let src = "#!/usr/bin/env python\n# -*- coding: utf-8 -*-\n# Greets.\ndef f():\n    return 1\n";
        let syn = lower(src);
        assert_eq!(syn.defs[0].start_line, 3, "the comment about f, not the file's header");
        let src = "# -*- coding: latin-1 -*-\ndef f():\n    return 1\n";
        assert_eq!(lower(src).defs[0].start_line, 2);
        let src = "# Greets.\ndef f():\n    return 1\n";
        assert_eq!(lower(src).defs[0].start_line, 1, "an ordinary comment on line 1 still leads");
        let src = "x = 1\n# coding: latin-1\ndef f():\n    return 1\n";
        assert_eq!(lower(src).defs[1].start_line, 2, "after code, line 2 declares nothing: a comment");
    }

    /// What Python's `ast` says of each (an oracle run over six corpora found the differences:
    /// a signature with the comment after its colon, escapes left undecoded, an f-string read as
    /// a docstring, a span ending on the comments after its body).
    #[test]
    fn signatures_docstrings_and_spans_agree_with_python() {
        let src = "def f(x):  # why\n    # explain\n    return x\n    # about g, below\n\n\ndef g():\n    f\"not {1} a docstring\"\n\n\nclass C:  # c\n    (\"joined \"  # part\n     r'\\raw')\n\n\nclass D:\n    b\"bytes\"\n    '''Esc\\taped \\u00e9.'''\n";
        let syn = lower(src);
        assert_eq!(syn.parse_errors, 0);
        let found: Vec<(&str, u32, u32, Option<String>, Option<String>)> = syn
            .defs
            .iter()
            .map(|d| (d.path.as_str(), d.start_line, d.end_line, d.signature(src), d.docstring(src)))
            .collect();
        assert_eq!(
            found,
            vec![
                ("f", 1, 3, Some("def f(x)".to_string()), None),
                ("g", 7, 8, Some("def g()".to_string()), None),
                ("C", 11, 13, Some("class C".to_string()), Some("joined \\raw".to_string())),
                ("D", 16, 18, Some("class D".to_string()), None),
            ]
        );
        // A `#` that starts a line of a string is no comment leading the definition below, nor
        // the first one of a block below a header holding that string.
        let src = "x = \"\"\"\n# not a comment\"\"\"\ndef g():\n    pass\n";
        let syn = lower(src);
        assert_eq!(syn.defs.iter().map(|d| (d.path.as_str(), d.start_line)).collect::<Vec<_>>(), [("x", 1), ("g", 3)]);
        let src = "class C(doc=\"\"\"\n    # fake\"\"\"):\n    def m(self):\n        pass\n";
        let syn = lower(src);
        assert_eq!(
            syn.defs.iter().map(|d| (d.path.as_str(), d.start_line)).collect::<Vec<_>>(),
            [("C", 1), ("C.m", 3)]
        );
        // A docstring in parentheses nested deeper than the stack would allow recursing.
        let src = format!("{}\"doc\"{}\n", "(".repeat(30_000), ")".repeat(30_000));
        assert_eq!(lower(&src).docstring.map(|r| docstring_text(&src, r)).as_deref(), Some("doc"));
        // A static method's first parameter is not the instance: no attribute of the class.
        let src = "class S:\n    @staticmethod\n    def make(obj):\n        obj.name = 1\n\n    def set(self):\n        self.kept = 1\n";
        let syn = lower(src);
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["S", "S.make", "S.set", "S.kept"]);
        // `global G` in a class body makes `G = 1` there the module's `G`, not the class's.
        let src = "class K:\n    global G\n    G = 1\n    own = 2\n";
        let syn = lower(src);
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, ["K", "K.own", "G"]);
        // A method's docstring with escapes reads as `__doc__` does.
        let src = "class E:\n    def m(self):\n        '''Esc\\taped \\u00e9.'''\n";
        assert_eq!(
            lower(src).defs[1].docstring(src).as_deref(),
            Some("Esc     aped \u{e9}."),
            "a tab expands, as in cleandoc"
        );
    }

    #[test]
    fn lowers_units_with_paths_spans_and_docstrings() {
        let src = "\"\"\"Mod doc.\"\"\"\nimport os\n\n# leading\n@dec\ndef f(a, b=g()):\n    \"\"\"Doc.\"\"\"\n    return a\n\nclass C(Base):\n    x = 1\n    def m(self):\n        self.y = os.path.join()\n";
        let syn = lower(src);
        assert_eq!(syn.parse_errors, 0);
        assert_eq!(syn.docstring.map(|r| docstring_text(src, r)).as_deref(), Some("Mod doc."));
        let paths: Vec<(&str, DefKind)> = syn.defs.iter().map(|d| (d.path.as_str(), d.kind)).collect();
        assert_eq!(
            paths,
            vec![
                ("f", DefKind::Function),
                ("C", DefKind::Class),
                ("C.x", DefKind::Variable),
                ("C.m", DefKind::Method),
                ("C.y", DefKind::Variable)
            ]
        );
        let f = &syn.defs[0];
        assert_eq!(f.start_line, 4, "leading comment belongs to the unit");
        assert_eq!(f.end_line, 8);
        assert_eq!(f.signature(src).as_deref(), Some("@dec\ndef f(a, b=g())"));
        assert_eq!(f.docstring(src).as_deref(), Some("Doc."));
        // `g()` in the default is called by the module; `dec` too.
        let module_calls: Vec<String> = syn.scopes[0].calls.iter().map(|c| callee_text(src, c.callee_span)).collect();
        assert_eq!(module_calls, vec!["dec", "g"]);
    }

    #[test]
    fn broken_files_are_lowered_as_far_as_they_parse() {
        let syn = lower("def ok():\n    pass\n\ndef broken(:\n    x = \n\nclass Fine:\n    pass\n");
        assert!(syn.parse_errors > 0);
        assert!(syn.defs.iter().any(|d| d.path == "ok"));
        assert!(syn.defs.iter().any(|d| d.path == "Fine"));
    }

    #[test]
    fn the_first_parse_error_is_located_in_the_files_own_text() {
        let first = |text: &str| lower(text).first_error.map(|(at, why)| (text[..at as usize].to_string(), why));
        assert_eq!(first("def ok():\n    return 1\n"), None);
        // tree-sitter's missing and error nodes.
        assert_eq!(first("def f(:\n    pass\n"), Some(("def f(".into(), "missing \")\"".into())));
        let (before, why) = first("x = 1\nif x == 1\n    y = 2\n").expect("an error");
        assert_eq!((before.as_str(), why.as_str()), ("x = 1\n", "does not parse: \"if x == 1\""));
        // What the lowering refuses, at the refused statement.
        let (before, why) = first("def g():\n  x = 1\n   y = 2\n").expect("an error");
        assert_eq!(
            (before.as_str(), why.as_str()),
            ("def g():\n  x = 1\n   ", "a statement not at its block's indentation")
        );
        let (before, why) = first("x = 1\nprint 'hi'\n").expect("an error");
        assert_eq!((before.as_str(), why.as_str()), ("x = 1\n", "a Python 2 print or exec statement"));
        // Python 3's grammar where tree-sitter's is looser (see `grammar.rs`), at the offending
        // parameter, and the earliest of two.
        let (before, why) = first("def f(a=1, b):\n    del g()\n").expect("an error");
        assert_eq!(
            (before.as_str(), why.as_str()),
            ("def f(a=1, ", "a parameter without a default after one with a default")
        );
        // Half-typed, the header's bracket is what is wrong, not its parameters.
        let (before, why) = first("def f(a=1, b\n").expect("an error");
        assert!(!why.contains("parameter"), "{before:?}: {why}");
        // Behind a repair (the erring line blanked to lower the rest), tree-sitter's error,
        // not the empty body the repair leaves.
        let (before, why) = first("def h():\n    return (1 +\n\ndef later():\n    pass\n").expect("an error");
        assert_eq!((before.as_str(), why.as_str()), ("def h():\n    ", "does not parse: \"return (1 +\""));
        // An unclosed bracket tree-sitter's recovery wraps from the docstring on (requests'
        // hooks.py, half-typed): the bracket, as Python says, not the docstring's first line.
        let text = r#""""
app.hooks
~~~~~~~~~

The hooks system.

Known hooks:

``response``:
    The response made from a request.
"""
HOOKS = ["response"]


def default_hooks():
    x = foo(1, 
    return {event: [] for event in HOOKS}


# NOTE: one hook only


def dispatch_hook(key, hooks, data, **kwargs):
    """Runs the hooks of `key` on data."""
    hooks = hooks or {}
    hooks = hooks.get(key)
    if hooks:
        if hasattr(hooks, "__call__"):
            hooks = [hooks]
        for hook in hooks:
            changed = hook(data, **kwargs)
            if changed is not None:
                data = changed
    return data
"#;
        let (before, why) = first(text).expect("an error");
        assert_eq!((before.lines().count(), why.as_str()), (16, "'(' was never closed"), "{before:?}");
        assert!(before.ends_with("x = foo"), "{before:?}");
        // A header without its colon before that bracket is the first error, as Python says.
        let with_colon_missing =
            text.replacen("HOOKS = [\"response\"]\n", "HOOKS = [\"response\"]\n\n\ndef early()\n    return 1\n", 1);
        let (before, why) = first(&with_colon_missing).expect("an error");
        assert_eq!((before.lines().count(), why.as_str()), (15, "expected ':'"), "{before:?}");
        assert!(before.ends_with("def early()"), "{before:?}");
    }

    #[test]
    fn python_2_forms_are_flagged_and_python_3_look_alikes_are_not() {
        // Each refused by Python 3's `ast.parse`, accepted by tree-sitter.
        for python2 in [
            "raise E, 'message'\n",
            "x = `y`\n",
            "x = 1 <> 2\n",
            "x = 0777\n",
            "x = -0777\n",
            "x = -10L\n",
            "x = 09\n",
            "x = 0_7\n",
            "def f(a, (b, c)=(1, 2)):\n    pass\n",
            "x = 10L\n",
            "x = ur'a'\n",
            "def f((a, b)):\n    pass\n",
            "f = lambda (x, y): x\n",
            "print x\n",
            "exec code\n",
        ] {
            assert!(lower(python2).parse_errors > 0, "{python2:?}");
        }
        // Each accepted by Python 3.
        for python3 in [
            "try:\n    pass\nexcept (A, B) as e:\n    pass\n",
            "raise E('message') from None\n",
            "x = 00 + 0_0 + 0x1F + 0o17 + 0.5\n",
            "x = b'' + rb'' + Rb'' + u'' + r''\n",
            // A tuple of `print >> f` and `x`.
            "print >>f, x\n",
            // A form feed starts the indentation count again.
            "\u{c}def f():\n    pass\n",
            "def g():\n    x = 1\n\u{c}    y = 2\n",
            "if x:\n    pass\n\u{c}else:\n    pass\n",
            // Imaginary literals with leading zeros.
            "x = 0777j + 09J + 00j\n",
            // Python 3.14 (PEP 758) reads it as `except (E, e):`.
            "try:\n    pass\nexcept E, e:\n    pass\n",
        ] {
            assert_eq!(lower(python3).parse_errors, 0, "{python3:?}");
        }
    }

    #[test]
    fn redefinitions_get_suffixed_paths() {
        let syn = lower("def f(): pass\ndef f(): pass\n");
        let paths: Vec<&str> = syn.defs.iter().map(|d| d.path.as_str()).collect();
        assert_eq!(paths, vec!["f", "f#2"]);
    }
}
