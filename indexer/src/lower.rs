//! The tree-sitter frontend: parses a Python file and lowers the tree to [`FileSyntax`].
//!
//! One walk over the tree records, per scope, what binds which name, what is called, what is read
//! and which attributes are stored, as small [`Expr`] trees. Nothing here resolves a name: that
//! needs other files and is done by [`crate::resolve`].

use std::cell::RefCell;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use tree_sitter::{Node, Parser, Tree};

use crate::syntax::*;

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
    Entered,
    Exception,
    Group,
}

impl Caught {
    fn binding(self, value: Expr) -> Binding {
        match self {
            Caught::Entered => Binding::Enter(value),
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
        | Expr::Decorated(e, _) => mentions_name(e, bound),
        Expr::Container(_, es) | Expr::Added(es) | Expr::Union(es) => es.iter().any(|e| mentions_name(e, bound)),
        Expr::Keyed(items) => items.iter().any(|(_, e)| mentions_name(e, bound)),
        Expr::ItemAt(a, b) | Expr::Declared(a, b) => mentions_name(a, bound) || mentions_name(b, bound),
        Expr::Property(getter, setter) => {
            mentions_name(getter, bound) || setter.as_deref().is_some_and(|s| mentions_name(s, bound))
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
    if refused > 0
        && let Some((indented, spaces)) = crate::repair::indent_stray_dedents(text)
        && let Some(indented_tree) = parse(&indented)
        && error_extent(indented_tree.root_node()) <= error_extent(root)
    {
        let (mended, still_refused) = lower_text(original, &indented, indented_tree.root_node(), repaired.is_some());
        if still_refused < refused {
            syntax = mended;
            inserted.push(spaces);
        }
    }
    syntax.parse_errors = parse_errors;
    // The last stage's insertions first: each stage's offsets are in its own output.
    for stage in inserted.iter().rev() {
        syntax.remove_insertions(stage);
    }
    syntax.first_error = first_error;
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
            let kind = node.kind();
            let what =
                if kind.chars().any(|c| c.is_alphanumeric()) { kind.replace('_', " ") } else { format!("\"{kind}\"") };
            return Some((node.start_byte() as u32, format!("missing {what}")));
        }
        // tree-sitter does not say what is wrong in the text an error node holds (a header
        // without its colon, an unclosed bracket, a stray token): quote its first line.
        if node.is_error() {
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

/// Lowers `text` (`original` itself, or a repair of it) from its tree's `root`. The syntax's
/// `parse_errors` counts what the lowering itself refuses or cuts (tree-sitter's errors are the
/// caller's); the second value is the statements refused for their indentation or layout.
///
/// `repaired`: `text` is a repair of the file, whose blanked lines may leave a body empty; such
/// a body is still counted, but not taken for where the file's first error is.
fn lower_text(original: &str, text: &str, root: Node, repaired: bool) -> (FileSyntax, u32) {
    let line_starts = line_starts(text);
    let line_count = line_starts.len() as u32;
    let mut lowerer = Lowerer {
        src: text,
        line_starts,
        scopes: vec![ScopeB::new(ScopeKind::Module, None, None)],
        defs: Vec::new(),
        path_counts: FxHashMap::default(),
        dunder_all: None,
        module_variables: FxHashMap::default(),
        conditional_depth: 0,
        narrowings: Vec::new(),
        match_subjects: Vec::new(),
        rebound_builtins: rebound_value_builtins(root, text),
        first_refusal: None,
        statement_start: 0,
        repaired,
        dunder_all_dynamic: false,
        nesting: 0,
        too_deep: 0,
        empty_bodies: 0,
        refused_statements: 0,
        global_writes: Vec::new(),
    };
    lowerer.block(root, 0);
    // Only over a tree that parsed whole: beside tree-sitter's own errors (or a repair of them) a
    // half-typed header (`def f(a=1, b`) would be reported for its parameters, not its bracket.
    if !repaired && !root.has_error() {
        for (at, why) in crate::grammar::grammar_refusals(root) {
            lowerer.refused_statements += 1;
            lowerer.refusal(at, why);
        }
    }
    lowerer.define_global_writes();
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
    (syntax, lowerer.refused_statements)
}

/// A repaired text of a file with errors, its tree, and the offsets of the bytes the repair
/// inserted, by stage: each stage's offsets are in the text after that stage (see `repair`).
struct Repair {
    text: String,
    tree: Tree,
    inserted: Vec<Vec<u32>>,
}

/// How many of a file's triple-quoted strings that hold code are tried as the one never closed.
const STRING_CANDIDATES: usize = 3;

/// The best repair of `text` (whose tree is `tree`): a triple-quoted string that was never
/// closed closed; a dot ending a statement blanked; brackets closed (by either rule of
/// `repair::Closing`, mended either way of `repair::Mending`), the missing colons inserted, or
/// both; then statements dedented between two levels put back into their block. Kept only when it leaves less of the file in error
/// than the text itself (see [`error_extent`]).
fn repair(text: &str, tree: &Tree) -> Option<Repair> {
    use crate::repair::StringEnd;
    let original = error_extent(tree.root_node());
    let mut best: Option<(Repair, (u32, u32))> = None;
    // An open triple-quoted string turns the rest of the file inside out (strings become code
    // and code strings): it is mended first, and the other repairs are tried on top of the best
    // such mending as well as on the text itself. Of mendings that leave as much in error, the
    // earlier is kept: strings ended before the first line that reads as code (a docstring typed
    // above the body it documents keeps the body), then before the next definition; the first
    // string that holds such a line first.
    let mut strings: Vec<(String, Vec<u32>)> = Vec::new();
    for when in [StringEnd::BeforeCode, StringEnd::BeforeDefinition] {
        for nth in 0..STRING_CANDIDATES {
            let Some(closed) = crate::repair::close_unclosed_triple_string(text, nth, when) else { break };
            if !strings.iter().any(|(seen, _)| *seen == closed.0) {
                strings.push(closed);
            }
        }
    }
    for (closed, inserted) in strings {
        if consider(&mut best, original, closed, vec![inserted]) {
            return best.map(|(fix, _)| fix);
        }
    }
    let string_mended = best.as_ref().map(|(fix, _)| (fix.text.clone(), fix.inserted.clone()));
    if let Some((base, stages)) = string_mended
        && mend(&base, &stages, original, &mut best)
    {
        return best.map(|(fix, _)| fix);
    }
    // A statement ending with a dot (`x = self.` while an attribute is picked): the dot blanked,
    // alone and under the other repairs. Blanking moves nothing: no insertions to map back.
    if let Some(undotted) = crate::repair::blank_trailing_dots(text)
        && (consider(&mut best, original, undotted.clone(), Vec::new()) || mend(&undotted, &[], original, &mut best))
    {
        return best.map(|(fix, _)| fix);
    }
    // A `def` or `class` header typed above the next statement, with neither colon nor body
    // yet: blanked, alone and under the other repairs. Blanking moves nothing either.
    if let Some(headless) = crate::repair::blank_bodiless_headers(text)
        && (consider(&mut best, original, headless.clone(), Vec::new()) || mend(&headless, &[], original, &mut best))
    {
        return best.map(|(fix, _)| fix);
    }
    if mend(text, &[], original, &mut best) {
        return best.map(|(fix, _)| fix);
    }
    // Last, a half-typed statement none of the above knows (`if x == 1` with no colon yet,
    // `x = a +`, `x = 1 + \`) above a definition: tree-sitter may fold the definition into its
    // error. The first line where an erring statement begins is blanked, then the next, a few
    // times, each kept if it leaves less in error, on the best repair so far (its insertions
    // kept) or the text itself. Blanking moves nothing.
    // If blanking one line at a time leaves errors, every such line at once is tried too
    // (on flask, click and requests' `newstatement` edits: every line alone kept 120 files of
    // 126 whole, the first line alone 114, the first line then every line 121; the first line
    // alone keeps `return a()` below `x = 1; y =`, which every line at once blanked).
    let start = match best.as_ref() {
        Some((fix, _)) => (fix.text.clone(), fix.inserted.clone()),
        None => (text.to_string(), Vec::new()),
    };
    for every_line in [false, true] {
        let (mut base, stages) = start.clone();
        let mut tree = parse(&base);
        for _ in 0..MAX_BLANKING_ROUNDS {
            let Some(current) = tree.as_ref() else { break };
            let Some(blanked) = blank_error_lines(&base, current.root_node(), every_line) else { break };
            let Some(extent) = offer(&mut best, original, blanked.clone(), stages.clone()) else { break };
            if extent == (0, 0) {
                return best.map(|(fix, _)| fix);
            }
            tree = parse(&blanked);
            base = blanked;
        }
    }
    best.map(|(fix, _)| fix)
}

/// How many times [`blank_error_lines`] is applied to what it left (a line each time).
const MAX_BLANKING_ROUNDS: usize = 4;

/// `text` with the first line where a statement holding an error of `root` begins blanked
/// (every byte but the newline a space), or with `every_line` each such line, unless it begins
/// a definition (`def`, `class`, a decorator: the unit is what the
/// blanking must keep); `None` when no line qualifies.
fn blank_error_lines(text: &str, root: Node, every_line: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut lines: Vec<usize> = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            // The statement the error is in: `def f` read as part of `if x == 1`'s condition
            // is the `if`'s error, and that line is the one to blank.
            let mut statement = node;
            while let Some(parent) = statement.parent() {
                if matches!(parent.kind(), "module" | "block" | "ERROR") {
                    break;
                }
                statement = parent;
            }
            let at = statement.start_byte().min(bytes.len());
            lines.push(bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
        }
        if node.has_error() || node.is_error() {
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    lines.sort_unstable();
    lines.dedup();
    // The first such line only: the errors after it are often its consequences (`return a()`
    // read into `y = ` above it), and blanking them too lost correct code. The next round
    // blanks the next line still in error.
    let mut out = bytes.to_vec();
    let mut blanked = false;
    for start in lines {
        let end = bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| start + i);
        let line = text.get(start..end).unwrap_or("").trim_start();
        let defines = ["def ", "class ", "async def ", "@"].iter().any(|k| line.starts_with(k));
        if defines || line.is_empty() {
            continue;
        }
        for b in &mut out[start..end] {
            if *b != b'\r' {
                *b = b' ';
            }
        }
        blanked = true;
        if !every_line {
            break;
        }
    }
    // Only ASCII bytes of whole lines were replaced by spaces: still UTF-8.
    if blanked { String::from_utf8(out).ok() } else { None }
}

/// Keeps a candidate text if it leaves less in error than the best so far; says whether
/// nothing is left to improve on.
fn consider(
    best: &mut Option<(Repair, (u32, u32))>,
    original: (u32, u32),
    text: String,
    inserted: Vec<Vec<u32>>,
) -> bool {
    offer(best, original, text, inserted);
    best.as_ref().is_some_and(|(_, extent)| *extent == (0, 0))
}

/// [`consider`], returning what the candidate leaves in error (`None`: it did not parse).
fn offer(
    best: &mut Option<(Repair, (u32, u32))>,
    original: (u32, u32),
    text: String,
    inserted: Vec<Vec<u32>>,
) -> Option<(u32, u32)> {
    let tree = parse(&text)?;
    let extent = error_extent(tree.root_node());
    if extent < best.as_ref().map_or(original, |(_, e)| *e) {
        *best = Some((Repair { text, tree, inserted }, extent));
    }
    Some(extent)
}

/// The bracket, colon and indentation repairs of `text` (itself a repair when `stages` is not
/// empty: the insertions that made it), offered to `best`; says whether nothing is left to
/// improve on.
fn mend(text: &str, stages: &[Vec<u32>], original: (u32, u32), best: &mut Option<(Repair, (u32, u32))>) -> bool {
    use crate::repair::{Closing, Mending};
    let staged = |more: &[&Vec<u32>]| -> Vec<Vec<u32>> {
        stages.iter().cloned().chain(more.iter().map(|stage| (*stage).clone())).collect()
    };
    // The best of this text's own repairs (not of another base's), for the last step.
    let mut own: Option<(String, Vec<Vec<u32>>, (u32, u32))> = None;
    let mut try_one = |best: &mut Option<(Repair, (u32, u32))>, text: String, inserted: Vec<Vec<u32>>| -> bool {
        if let Some(extent) = offer(best, original, text.clone(), inserted.clone())
            && own.as_ref().is_none_or(|(.., e)| extent < *e)
        {
            own = Some((text, inserted, extent));
        }
        best.as_ref().is_some_and(|(_, extent)| *extent == (0, 0))
    };
    // The bracket repairs in order of preference (of repairs that leave as much in error, the
    // first is kept): a line at its statement's indentation is a new statement far more often
    // than a continuation, and a closed bracket keeps a call a call. Each is also tried with
    // the missing colons inserted, as is the text itself: a header typed without its colon
    // above a body with an open bracket needs both.
    let mut bases: Vec<(String, Vec<u32>)> = Vec::new();
    for (rule, mending) in [
        (Closing::ByIndentation, Mending::Close),
        (Closing::ByKeyword, Mending::Close),
        (Closing::ByIndentation, Mending::Blank),
        (Closing::ByKeyword, Mending::Blank),
    ] {
        if let Some(closed) = crate::repair::close_unclosed_brackets(text, rule, mending)
            && !bases.iter().any(|(seen, _)| *seen == closed.0)
        {
            bases.push(closed);
        }
    }
    for (closed, inserted) in bases {
        let with_colons = crate::repair::insert_missing_colons(&closed);
        if try_one(best, closed, staged(&[&inserted])) {
            return true;
        }
        if let Some((with_colons, colons)) = with_colons
            && try_one(best, with_colons, staged(&[&inserted, &colons]))
        {
            return true;
        }
    }
    if let Some((with_colons, colons)) = crate::repair::insert_missing_colons(text)
        && try_one(best, with_colons, staged(&[&colons]))
    {
        return true;
    }
    // Last, statements dedented between two levels, on top of the best of the above (or of
    // the text itself when none did better).
    let (base, mut stages) = match own {
        Some((text, inserted, extent)) if extent < original => (text, inserted),
        _ => (text.to_string(), stages.to_vec()),
    };
    match crate::repair::indent_stray_dedents(&base) {
        Some((indented, spaces)) => {
            stages.push(spaces);
            consider(best, original, indented, stages)
        }
        None => false,
    }
}

/// A [`Scope`] while it is being lowered: growable, frozen into exact-size slices at the end.
struct ScopeB {
    kind: ScopeKind,
    parent: Option<ScopeId>,
    def: Option<DefId>,
    params: Vec<Param>,
    bindings: Vec<(Name, Binding)>,
    replacing: Vec<(u32, u32)>,
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
    bases: Vec<(Expr, u32)>,
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
            replacing: Vec::new(),
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
            bases: Vec::new(),
            imports: Vec::new(),
        }
    }

    fn finish(self) -> Scope {
        Scope {
            kind: self.kind,
            parent: self.parent,
            def: self.def,
            params: self.params.into_boxed_slice(),
            bindings: self.bindings.into_boxed_slice(),
            replacing: self.replacing.into_boxed_slice(),
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
            bases: self.bases.into_boxed_slice(),
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
    /// How many expressions enclose the one being lowered (see [`MAX_NESTING`]).
    nesting: u32,
    /// Expressions left unlowered because they were nested deeper than that.
    too_deep: u32,
    /// `def`s and classes without a statement in their body (see [`Lowerer::check_body`]).
    empty_bodies: u32,
    /// Statements Python refuses and tree-sitter accepts (see [`Lowerer::check_statements`]).
    refused_statements: u32,
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
    fn text(&self, node: Node) -> &'a str {
        self.src.get(node.start_byte()..node.end_byte()).unwrap_or("")
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
        self.scope(scope).bindings.push((Name::new(name), binding));
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
        while row > 0 {
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
        let parent = self.owner_def(scope);
        self.defs.push(Def {
            kind,
            name: Name::new(name),
            path,
            parent,
            body: None,
            start_line,
            end_line: outer.end_position().row as u32 + 1,
            start_byte,
            end_byte: outer.end_byte() as u32,
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
        self.block(body, scope);
        self.conditional_depth = saved;
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
                .filter(|a| !matches!(&a.expr, Expr::Name(n) if !a.write && locals.contains(n.as_str())))
                .cloned()
                .collect();
            scope.accesses = keep;
        }
    }

    // ---- statements ------------------------------------------------------------------------

    fn block(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        self.check_statements(node, &children);
        let narrowed_before = self.narrowings.len();
        for child in children {
            // A loop that binds the name anywhere (its target, or its body for the next
            // iteration) ends the test before its body runs; so does `with ... as name`.
            if matches!(child.kind(), "for_statement" | "while_statement" | "with_statement") {
                self.end_rebound_narrowings(child, scope);
            }
            self.statement(child, scope);
            self.end_rebound_narrowings(child, scope);
            // `if not isinstance(x, T): raise ...`: the rest of the block runs only for a T.
            for (name, ty) in self.exit_unless_instance(child) {
                self.narrowings.push(Narrowing { scope, name, ty: Some(ty) });
            }
        }
        self.narrowings.truncate(narrowed_before);
    }

    /// Lowers `if`/`elif` with the `isinstance` tests its condition makes in force over its
    /// body. Python runs the body only when they hold, so `x.close()` under
    /// `if isinstance(x, Conn):` calls `Conn.close` (and an override, if what `x` holds is a
    /// subclass); what `x` holds otherwise that is not a `Conn` is not looked at there. The
    /// children are lowered in their order, as the other compound statements' are. A name
    /// bound again inside the body loses the narrowing after that statement (see
    /// [`Self::end_rebound_narrowings`]).
    fn if_clause(&mut self, node: Node, scope: ScopeId) {
        let condition = node.field("condition");
        let tests = condition.map(|c| self.instance_tests(c)).unwrap_or_default();
        // `if (x := make()) is not None:` binds `x` before the body runs.
        if let Some(condition) = condition {
            self.end_rebound_narrowings(condition, scope);
        }
        let consequence = node.field("consequence");
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            if Some(child) == consequence && !tests.is_empty() {
                let before = self.narrowings.len();
                for (name, ty) in &tests {
                    self.narrowings.push(Narrowing { scope, name: name.clone(), ty: Some(ty.clone()) });
                }
                self.statement(child, scope);
                self.narrowings.truncate(before);
            } else if is_statement_like(child.kind()) {
                self.statement(child, scope);
            } else {
                self.expr(child, scope);
            }
        }
    }

    /// The `isinstance(name, T)` tests that hold when `condition` is true: the test itself, or
    /// any operand of an `and` (parenthesised or not). Only names other than `self` and `cls`
    /// and attribute chains on names (`self.conn`), and classes written as names, attribute
    /// chains or a tuple of them.
    fn instance_tests(&self, condition: Node) -> Vec<(Name, Expr)> {
        let mut out = Vec::new();
        self.collect_instance_tests(condition, &mut out, 0);
        out
    }

    fn collect_instance_tests(&self, node: Node, out: &mut Vec<(Name, Expr)>, depth: u32) {
        if depth > MAX_NESTING {
            return;
        }
        match node.kind() {
            "parenthesized_expression" => {
                if let Some(inner) = node.named_child(0) {
                    self.collect_instance_tests(inner, out, depth + 1);
                }
            }
            "boolean_operator" if node.child_by_field_name("operator").is_some_and(|o| o.kind() == "and") => {
                for side in [node.field("left"), node.field("right")].into_iter().flatten() {
                    self.collect_instance_tests(side, out, depth + 1);
                }
            }
            "call" => out.extend(self.instance_test(node)),
            _ => {}
        }
    }

    /// `isinstance(name, T)` as the name and the instance type T names.
    fn instance_test(&self, call: Node) -> Option<(Name, Expr)> {
        let function = call.field("function")?;
        if function.kind() != "identifier" || self.text(function) != "isinstance" {
            return None;
        }
        let arguments = call.field("arguments")?;
        let mut cursor = arguments.walk();
        let args: Vec<Node> = arguments.named_children(&mut cursor).filter(|a| a.kind() != "comment").collect();
        let [subject, class] = args.as_slice() else { return None };
        let name = self.subject_key(*subject, 0)?;
        if name == "self" || name == "cls" {
            return None;
        }
        let is_class_name = |n: &Node| matches!(n.kind(), "identifier" | "attribute");
        let classes: Vec<&str> = match class.kind() {
            "tuple" => {
                let mut cursor = class.walk();
                let items: Vec<Node> = class.named_children(&mut cursor).filter(|a| a.kind() != "comment").collect();
                if items.is_empty() || !items.iter().all(is_class_name) {
                    return None;
                }
                items.iter().map(|i| self.text(*i)).collect()
            }
            _ if is_class_name(class) => vec![self.text(*class)],
            _ => return None,
        };
        let ty = crate::annotation::type_expr(&classes.join(" | "));
        (ty != Expr::Unknown).then(|| (Name::new(&name), ty))
    }

    /// What an `isinstance` test narrows, as written: a name, or an attribute chain on one
    /// (`self.conn`, `node.parent`), dots between the parts whatever the spacing; `None` for
    /// anything else (a call, a subscript: the next evaluation may give another value).
    fn subject_key(&self, node: Node, depth: u32) -> Option<String> {
        if depth > MAX_NESTING {
            return None;
        }
        match node.kind() {
            "identifier" => Some(self.text(node).to_string()),
            "attribute" => {
                let object = self.subject_key(node.field("object")?, depth + 1)?;
                Some(format!("{object}.{}", self.text(node.field("attribute")?)))
            }
            _ => None,
        }
    }

    /// The narrowings `statement` puts in force for the rest of its block: an `if` with no
    /// `elif`/`else` whose condition is `not isinstance(name, T)` and whose body always leaves
    /// the block (its last statement is `raise`, `return`, `continue` or `break`).
    fn exit_unless_instance(&self, statement: Node) -> Vec<(Name, Expr)> {
        if statement.kind() != "if_statement" || statement.child_by_field_name("alternative").is_some() {
            return Vec::new();
        }
        let Some(condition) = statement.field("condition") else { return Vec::new() };
        let condition = if condition.kind() == "parenthesized_expression" {
            match condition.named_child(0) {
                Some(inner) => inner,
                None => return Vec::new(),
            }
        } else {
            condition
        };
        if condition.kind() != "not_operator" {
            return Vec::new();
        }
        let leaves = statement
            .field("consequence")
            .and_then(|b| b.named_children(&mut b.walk()).filter(|c| !c.is_extra()).last());
        let always_leaves = leaves.is_some_and(|last| {
            matches!(last.kind(), "raise_statement" | "return_statement" | "continue_statement" | "break_statement")
        });
        match condition.field("argument") {
            Some(test) if always_leaves && test.kind() == "call" => self.instance_test(test).into_iter().collect(),
            _ => Vec::new(),
        }
    }

    /// Ends, for the rest of the block, the narrowings in force in `scope` whose name
    /// `statement` binds again anywhere in it (`x = make()`, `x += 1`, `for x in ...`,
    /// `with ... as x`, `(x := ...)`, `except E as x`, `del x`, a `def` or `class` of the name,
    /// an import of it), or whose attribute chain it binds a prefix of (`self.conn = ...` and
    /// `self = ...` end `self.conn`'s). A binding inside a nested `if` may or may not have run:
    /// either way the test no longer says what the name holds.
    fn end_rebound_narrowings(&mut self, statement: Node, scope: ScopeId) {
        if !self.narrowings.iter().any(|n| n.scope == scope && n.ty.is_some()) {
            return;
        }
        let mut bound = Vec::new();
        self.bound_keys(statement, &mut bound, 0);
        if bound.is_empty() {
            return;
        }
        let rebinds = |name: &str| {
            bound.iter().any(|b| name == b || name.strip_prefix(b.as_str()).is_some_and(|rest| rest.starts_with('.')))
        };
        let ended: Vec<Name> = self
            .narrowings
            .iter()
            .filter(|n| n.scope == scope && n.ty.is_some() && rebinds(n.name.as_str()))
            .map(|n| n.name.clone())
            .collect();
        for name in ended {
            self.narrowings.push(Narrowing { scope, name, ty: None });
        }
    }

    /// The names and attribute chains `node` binds in the scope it runs in (not in nested
    /// functions, classes, lambdas or comprehensions, which have scopes of their own; a `def`
    /// or `class` binds its own name).
    fn bound_keys(&self, node: Node, out: &mut Vec<String>, depth: u32) {
        if depth > MAX_NESTING {
            return;
        }
        match node.kind() {
            "function_definition" | "class_definition" => {
                out.extend(node.field("name").map(|n| self.text(n).to_string()));
                return;
            }
            "lambda"
            | "list_comprehension"
            | "set_comprehension"
            | "dictionary_comprehension"
            | "generator_expression" => return,
            "assignment" if self.rebinds_to_own_method_result(node) => {}
            "assignment" | "augmented_assignment" | "for_statement" => {
                if let Some(left) = node.field("left") {
                    self.target_keys(left, out, depth + 1);
                }
            }
            "named_expression" => {
                if let Some(name) = node.field("name") {
                    self.target_keys(name, out, depth + 1);
                }
            }
            "as_pattern" => {
                if let Some(alias) = node.field("alias") {
                    self.target_keys(alias, out, depth + 1);
                }
            }
            "delete_statement" => {
                let mut cursor = node.walk();
                for target in node.named_children(&mut cursor) {
                    self.target_keys(target, out, depth + 1);
                }
            }
            "dotted_name"
                if node.parent().is_some_and(|p| matches!(p.kind(), "import_statement" | "import_from_statement")) =>
            {
                // `import a.b` binds `a`; `from m import x` binds `x` (the module's name is no
                // binding: it is the `module_name` field, skipped below).
                if let Some(first) = node.named_child(0) {
                    out.push(self.text(first).to_string());
                }
            }
            "aliased_import" => {
                out.extend(node.field("alias").map(|a| self.text(a).to_string()));
                return;
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            if node.kind() == "import_from_statement" && node.field("module_name") == Some(child) {
                continue;
            }
            self.bound_keys(child, out, depth + 1);
        }
    }

    /// `x = x.copy()`, `field = field.asc()`: a name rebound to what a method of its own value
    /// returns. Such methods most often return the same kind of object (a copy, a fluent
    /// builder's next step), so the `isinstance` test is kept: in django, ending it there lost
    /// eight edges that were right (`child = child.copy()` then `child.name` on an `F`) and
    /// gained none.
    fn rebinds_to_own_method_result(&self, assignment: Node) -> bool {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right")) else { return false };
        let Some(target) = self.subject_key(left, 0) else { return false };
        right.kind() == "call"
            && right.field("function").is_some_and(|f| {
                f.kind() == "attribute"
                    && f.field("object").and_then(|o| self.subject_key(o, 0)).as_deref() == Some(&*target)
            })
    }

    /// The names and attribute chains a binding target binds: `x`, `self.conn`, each name of
    /// `a, (b, *c)`; a subscript (`x[0] = ...`) binds none.
    fn target_keys(&self, target: Node, out: &mut Vec<String>, depth: u32) {
        if depth > MAX_NESTING {
            return;
        }
        match target.kind() {
            "identifier" | "attribute" => out.extend(self.subject_key(target, 0)),
            "subscript" => {}
            _ => {
                let mut cursor = target.walk();
                for child in target.named_children(&mut cursor) {
                    self.target_keys(child, out, depth + 1);
                }
            }
        }
    }

    /// The name `object` reads as the object of an attribute (`x` of `x.close()`), as the
    /// `isinstance` tests in force narrow it, if one does.
    fn narrowed_object(&mut self, object: Node, scope: ScopeId) -> Option<Expr> {
        if self.narrowings.is_empty() {
            return None;
        }
        let key = self.subject_key(object, 0)?;
        let ty = self.narrowings.iter().rev().find(|n| n.scope == scope && n.name == key)?.ty.clone()?;
        let read = self.chain(object, scope);
        Some(Expr::Declared(Box::new(ty), Box::new(read)))
    }

    /// The column a node starts at as Python's tokenizer counts indentation: past a byte order
    /// mark, and from the last form feed before it.
    fn indentation_column(&self, node: Node) -> usize {
        let position = node.start_position();
        let mut column = position.column;
        if position.row == 0 && self.src.starts_with('\u{feff}') {
            column -= '\u{feff}'.len_utf8().min(column);
        }
        let indentation = self.src.get(node.start_byte() - column..node.start_byte()).unwrap_or("");
        match indentation.rfind('\u{c}') {
            Some(feed) => indentation.len() - feed - 1,
            None => column,
        }
    }

    /// Counts a Python 2 form Python 3 refuses and tree-sitter accepts (`raise E, message`, `0777`).
    fn refuse_python2(&mut self, node: Node, why: &'static str) {
        self.refused_statements += 1;
        self.refusal(node.start_byte(), why);
    }

    /// Records a refusal at byte `at` of the text being lowered, when it is the first so far.
    fn refusal(&mut self, at: usize, why: &'static str) {
        let at = at as u32;
        if self.first_refusal.is_none_or(|(first, _)| at < first) {
            self.first_refusal = Some((at, why));
        }
    }

    /// Counts the statements of a block (or the module) that tree-sitter accepts and Python
    /// refuses, so that such a file is flagged:
    /// - a statement not at the block's indentation: tree-sitter reads a method indented by
    ///   three spaces among methods indented by four as a function of the module; Python raises
    ///   `IndentationError` (or `TabError`, for tabs and spaces mixed);
    /// - two statements on one line without a `;` between them (`1abc` is `1` then `abc` to
    ///   tree-sitter, an invalid literal to Python);
    /// - Python 2's `print x` and `exec code` statements (not `print >>f, x`, a tuple to Python 3).
    fn check_statements(&mut self, block: Node, statements: &[Node]) {
        let mut expected = (block.kind() == "module").then_some(0);
        let mut last: Option<Node> = None;
        for statement in statements {
            // Comments and line continuations (`\`) are extras, not statements.
            if statement.is_extra() || statement.is_error() {
                continue;
            }
            // `print >>f, x` is a tuple to Python 3 (of `print >> f` and `x`), not refused.
            let chevron = statement.named_child(0).is_some_and(|c| c.kind() == "chevron");
            if matches!(statement.kind(), "print_statement" | "exec_statement") && !chevron {
                self.refused_statements += 1;
                self.refusal(statement.start_byte(), "a Python 2 print or exec statement");
            }
            let mut start = statement.start_position();
            start.column = self.indentation_column(*statement);
            let previous = last.replace(*statement);
            // A statement after `;` shares its line with the one before.
            if let Some(previous) = previous.filter(|p| p.end_position().row == start.row) {
                let between = self.src.get(previous.end_byte()..statement.start_byte()).unwrap_or("");
                if !between.contains(';') {
                    self.refused_statements += 1;
                    self.refusal(statement.start_byte(), "two statements on one line without \";\" between them");
                }
                continue;
            }
            match expected {
                None => expected = Some(start.column),
                Some(column) if column != start.column => {
                    self.refused_statements += 1;
                    self.refusal(statement.start_byte(), "a statement not at its block's indentation");
                }
                Some(_) => {}
            }
            // An `elif`/`else`/`except`/`finally` clause belongs at its statement's column;
            // tree-sitter attaches one typed elsewhere to the statement all the same.
            let mut cursor = statement.walk();
            let misplaced = statement
                .named_children(&mut cursor)
                .filter(|c| {
                    matches!(
                        c.kind(),
                        "elif_clause" | "else_clause" | "except_clause" | "except_group_clause" | "finally_clause"
                    )
                })
                .filter(|c| self.indentation_column(*c) != start.column)
                .map(|c| c.start_byte())
                .collect::<Vec<_>>();
            self.refused_statements += misplaced.len() as u32;
            if let Some(&at) = misplaced.first() {
                self.refusal(at, "a clause not at its statement's indentation");
            }
        }
    }

    fn statement(&mut self, node: Node, scope: ScopeId) {
        self.statement_start = node.start_byte();
        let conditional = matches!(
            node.kind(),
            "if_statement"
                | "for_statement"
                | "while_statement"
                | "try_statement"
                | "with_statement"
                | "match_statement"
        );
        if conditional {
            self.conditional_depth += 1;
        }
        self.nested((), |l| l.statement_inner(node, scope));
        if conditional {
            self.conditional_depth -= 1;
        }
    }

    fn statement_inner(&mut self, node: Node, scope: ScopeId) {
        match node.kind() {
            "comment" => {}
            "function_definition" => self.function(node, node, scope, Vec::new()),
            "class_definition" => self.class(node, node, scope, Vec::new()),
            "decorated_definition" => self.decorated(node, scope),
            "expression_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind() {
                        "assignment" => {
                            self.assignment(child, node, scope);
                        }
                        "augmented_assignment" => self.augmented(child, node, scope),
                        _ => {
                            self.expr(child, scope);
                        }
                    }
                }
            }
            "return_statement" => {
                let values = self.named_exprs(node, scope);
                let value = match values.len() {
                    0 => Expr::Literal("NoneType"),
                    1 => values.into_iter().next().unwrap_or(Expr::Unknown),
                    _ => Expr::Container(ContainerKind::Tuple, values),
                };
                self.scope(scope).returns.push(value);
            }
            "raise_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                if children.first().is_some_and(|c| c.kind() == "expression_list") {
                    self.refuse_python2(node, "a Python 2 `raise E, message`");
                }
                for (i, child) in children.into_iter().enumerate() {
                    let e = self.expr(child, scope);
                    if i == 0 {
                        self.scope(scope).raises.push((e, line(node)));
                    }
                }
            }
            "type_alias_statement" => self.type_alias(node, scope),
            "import_statement" => self.import(node, scope),
            "import_from_statement" => self.import_from(node, scope),
            "future_import_statement" => {}
            "global_statement" | "nonlocal_statement" => {
                let mut cursor = node.walk();
                let names: Vec<Name> = node.named_children(&mut cursor).map(|n| Name::new(self.text(n))).collect();
                if node.kind() == "global_statement" {
                    self.scope(scope).globals.extend(names);
                } else {
                    self.scope(scope).nonlocals.extend(names);
                }
            }
            "for_statement" => {
                let right = node.field("right");
                let iter = right.map(|r| self.expr(r, scope)).unwrap_or(Expr::Unknown);
                if let Some(r) = right {
                    let is_async = node.child(0).is_some_and(|c| c.kind() == "async");
                    self.scope(scope).iterations.push((iter.clone(), line(r), is_async));
                }
                if let Some(left) = node.field("left") {
                    self.bind_target(left, Binding::Iter(iter), scope, None);
                }
                for field in ["body", "alternative"] {
                    if let Some(b) = node.field(field) {
                        self.statement(b, scope);
                    }
                }
            }
            "with_statement" => {
                let is_async = node.child(0).is_some_and(|c| c.kind() == "async");
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    if child.kind() == "with_clause" {
                        let mut c2 = child.walk();
                        let items: Vec<Node> = child.named_children(&mut c2).collect();
                        for item in items {
                            self.with_item(item, scope, is_async);
                        }
                    } else {
                        self.statement(child, scope);
                    }
                }
            }
            "except_clause" => {
                let value = node.field("value");
                let alias = node.field("alias");
                // `except* E as eg`: `eg` is an ExceptionGroup holding E's, not an E.
                let caught = if node.children(&mut node.walk()).any(|c| c.kind() == "*") {
                    Caught::Group
                } else {
                    Caught::Exception
                };
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut exc = Expr::Unknown;
                for child in children {
                    if Some(child) == value && child.kind() == "as_pattern" {
                        // `except E as e`: tree-sitter-python 0.25 puts both in one as_pattern.
                        self.with_item_pattern(child, scope, caught);
                    } else if Some(child) == value {
                        exc = self.expr(child, scope);
                    } else if Some(child) == alias {
                        continue;
                    } else if child.kind() == "as_pattern" {
                        // Older layouts: `except E as e` as one as_pattern.
                        self.with_item_pattern(child, scope, caught);
                    } else if child.kind() == "block" {
                        if let Some(alias) = alias {
                            let binding = caught.binding(exc.clone());
                            self.bind_target(alias, binding, scope, None);
                        }
                        self.block(child, scope);
                    } else {
                        exc = self.expr(child, scope);
                    }
                }
            }
            "block" => self.block(node, scope),
            "if_statement" | "elif_clause" => self.if_clause(node, scope),
            "match_statement" => {
                // What the `case` class patterns narrow: the subject, when it is a name or an
                // attribute chain (`match shape:`, `match self.node:`).
                let subject = node.field("subject").and_then(|s| self.subject_key(s, 0)).map(|k| Name::new(&k));
                self.match_subjects.push(subject);
                self.children_in_order(node, scope);
                self.match_subjects.pop();
            }
            "else_clause"
            | "while_statement"
            | "try_statement"
            | "finally_clause"
            | "except_group_clause"
            | "ERROR" => self.children_in_order(node, scope),
            "case_clause" => {
                // `case Circle():` holds only for a Circle: the subject is one in the body, as
                // under `if isinstance(shape, Circle):`.
                let narrowed_before = self.narrowings.len();
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind() {
                        "case_pattern" => {
                            self.pattern(child, scope);
                            let classes = case_classes(child, self.src);
                            if let (Some(Some(subject)), false) = (self.match_subjects.last(), classes.is_empty()) {
                                let ty = crate::annotation::type_expr(&classes.join(" | "));
                                if ty != Expr::Unknown {
                                    self.narrowings.push(Narrowing { scope, name: subject.clone(), ty: Some(ty) });
                                }
                            }
                        }
                        kind if is_statement_like(kind) => self.statement(child, scope),
                        _ => {
                            self.expr(child, scope);
                        }
                    }
                }
                self.narrowings.truncate(narrowed_before);
            }
            "pass_statement" | "break_statement" | "continue_statement" => {}
            // `del x` in a function makes `x` local to it, as an assignment does (Python's compiler
            // counts it as a binding): it reads no module-level `x`. Attributes and items still
            // read their object.
            "delete_statement" if self.scopes[scope as usize].kind == ScopeKind::Function => {
                let mut targets = vec![node];
                while let Some(target) = targets.pop() {
                    let mut cursor = target.walk();
                    let children: Vec<Node> = target.named_children(&mut cursor).collect();
                    for child in children.into_iter().rev() {
                        match child.kind() {
                            "identifier" => {
                                let name = Name::new(self.text(child));
                                let sc = &self.scopes[scope as usize];
                                // `global x; del x` deletes the module's `x`: no local binding.
                                // A name the function bound already is local: the deletion
                                // adds nothing (its `class` or `def` stays what it reads).
                                let bound = sc.bindings.iter().any(|(n, _)| *n == name);
                                if !bound && !sc.globals.contains(&name) && !sc.nonlocals.contains(&name) {
                                    self.scope(scope).bindings.push((name, Binding::Value(Expr::Unknown)));
                                }
                            }
                            "expression_list" | "tuple" | "list" | "parenthesized_expression" => targets.push(child),
                            "comment" => {}
                            _ => {
                                self.expr(child, scope);
                            }
                        }
                    }
                }
            }
            // delete, assert, print, exec, type alias and anything new: their expressions still
            // read names and call things.
            _ => self.children_in_order(node, scope),
        }
    }

    /// Lowers the named children of `node` in their order, as statements or as expressions.
    fn children_in_order(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            if is_statement_like(child.kind()) {
                self.statement(child, scope);
            } else {
                self.expr(child, scope);
            }
        }
    }

    /// One item of a `with` statement: the context manager is entered and exited there
    /// (`__enter__`/`__exit__`, `__aenter__`/`__aexit__` for `async with`).
    fn with_item(&mut self, item: Node, scope: ScopeId, is_async: bool) {
        let Some(value) = item.field("value") else {
            return;
        };
        let manager = if value.kind() == "as_pattern" {
            self.with_item_pattern(value, scope, Caught::Entered)
        } else {
            self.expr(value, scope)
        };
        if manager != Expr::Unknown {
            self.scope(scope).contexts.push((manager, line(value), is_async));
        }
    }

    /// Where a slice `[start:stop:step]` starts, when that is a known position: the start is
    /// left out or a non-negative integer literal, and there is no step (`[::-1]` reverses).
    fn slice_start(&self, slice: Node) -> Option<u32> {
        let mut cursor = slice.walk();
        let mut start = None;
        let mut colons = 0;
        for child in slice.children(&mut cursor) {
            match child.kind() {
                ":" => colons += 1,
                "comment" => {}
                _ if colons == 0 => start = Some(child),
                _ if colons >= 2 => return None,
                _ => {}
            }
        }
        match start {
            None => Some(0),
            Some(n) if n.kind() == "integer" => self.text(n).replace('_', "").parse().ok(),
            Some(_) => None,
        }
    }

    /// Binds `E as name` and returns what `E` is.
    fn with_item_pattern(&mut self, pattern: Node, scope: ScopeId, caught: Caught) -> Expr {
        let alias = pattern.field("alias");
        let mut cursor = pattern.walk();
        let children: Vec<Node> = pattern.named_children(&mut cursor).collect();
        let mut value = Expr::Unknown;
        for child in children {
            if Some(child) == alias {
                continue;
            }
            value = self.expr(child, scope);
            break;
        }
        if let Some(alias) = alias {
            let target = alias.named_child(0).unwrap_or(alias);
            let binding = caught.binding(value.clone());
            self.bind_target(target, binding, scope, None);
        }
        value
    }

    fn named_exprs(&mut self, node: Node, scope: ScopeId) -> Vec<Expr> {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut out = Vec::new();
        for child in children {
            if child.kind() == "expression_list" {
                out.push(self.value(child, scope));
            } else if child.kind() != "comment" {
                out.push(self.expr(child, scope));
            }
        }
        out
    }

    fn decorated(&mut self, node: Node, scope: ScopeId) {
        let mut decorators = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let decorator_count = children.iter().filter(|c| c.kind() == "decorator").count();
        for child in &children {
            if child.kind() == "decorator"
                && let Some(expr_node) = child.named_child(0)
            {
                // Decorators run in the enclosing scope: the module or class calls them.
                let e = self.chain_or_value(expr_node, scope);
                let callee_span = span(expr_node);
                // The decorator receives the decorated function (or class) as the decorators
                // below it made it (they apply innermost first).
                let below = (decorator_count - decorators.len() - 1) as u32;
                let decorated = node
                    .field("definition")
                    .and_then(|d| d.field("name"))
                    .map(|n| Expr::Name(Name::new(self.text(n))))
                    .map(|name| Expr::Decorated(Box::new(name), below));
                self.scope(scope).calls.push(CallSite {
                    callee: e.clone(),
                    callee_span,
                    line: line(*child),
                    args: decorated.into_iter().collect(),
                    keywords: Box::default(),
                });
                decorators.push(e);
            }
        }
        if let Some(def) = node.field("definition") {
            match def.kind() {
                "function_definition" => self.function(def, node, scope, decorators),
                "class_definition" => self.class(def, node, scope, decorators),
                _ => self.statement(def, scope),
            }
        }
    }

    /// The byte range of a def's header: from the decorators to the colon, both trimmed.
    fn header_range(&self, outer: Node, body: Option<Node>) -> (u32, u32) {
        let end = body.map(|b| b.start_byte()).unwrap_or(outer.end_byte());
        let raw = self.src.get(outer.start_byte()..end).unwrap_or("");
        let trimmed = raw.trim_end();
        let header = trimmed.strip_suffix(':').unwrap_or(trimmed).trim_end();
        (outer.start_byte() as u32, (outer.start_byte() + header.len()) as u32)
    }

    fn function(&mut self, node: Node, outer: Node, scope: ScopeId, decorators: Vec<Expr>) {
        let Some(name_node) = node.field("name") else {
            return;
        };
        let name = self.text(name_node);
        let body = node.field("body");
        self.check_body(node, body);
        let kind =
            if self.scopes[scope as usize].kind == ScopeKind::Class { DefKind::Method } else { DefKind::Function };
        let signature = Some(self.header_range(outer, body));
        let docstring = body.and_then(|b| self.docstring(b));
        let def = self.push_def(scope, kind, name, outer, signature, docstring, decorators);
        self.bind(scope, name, Binding::Def(def));
        self.def_replaces_earlier(node, outer, name, scope);
        if matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class) {
            self.module_variables.insert((scope, Name::new(name)), def);
        }
        let inner = self.new_scope(ScopeKind::Function, scope, Some(def));
        self.defs[def as usize].body = Some(inner);
        if let Some(params) = node.field("parameters") {
            self.parameters(params, scope, inner);
        }
        if let Some(ret) = node.field("return_type") {
            let ty = self.annotation(ret, inner);
            if ty != Expr::Unknown {
                self.defs[def as usize].return_type = Some(ty);
            }
        }
        if let Some(body) = body {
            self.body(body, inner);
        }
    }

    /// Lowers a parameter list: defaults are evaluated in `outer`, annotations are read by `inner`.
    fn parameters(&mut self, params: Node, outer: ScopeId, inner: ScopeId) {
        let mut cursor = params.walk();
        let children: Vec<Node> = params.named_children(&mut cursor).collect();
        for p in children {
            let tuple = p.kind() == "tuple_pattern"
                || (p.kind() == "default_parameter" && p.field("name").is_some_and(|n| n.kind() == "tuple_pattern"));
            if tuple {
                self.refuse_python2(p, "a Python 2 tuple parameter (`def f((a, b))`)");
            }
            let keywords = p.kind() == "dictionary_splat_pattern"
                || (p.kind() == "typed_parameter"
                    && p.named_child(0).is_some_and(|f| f.kind() == "dictionary_splat_pattern"));
            let (name_node, default, annotation, variadic) = match p.kind() {
                "identifier" => (Some(p), None, None, false),
                "default_parameter" => (p.field("name"), p.field("value"), None, false),
                "typed_default_parameter" => (p.field("name"), p.field("value"), p.field("type"), false),
                "typed_parameter" => {
                    let first = p.named_child(0);
                    let variadic = first.is_some_and(|f| f.kind() != "identifier");
                    let name = first.map(|f| if f.kind() == "identifier" { f } else { f.named_child(0).unwrap_or(f) });
                    (name, None, p.field("type"), variadic)
                }
                "list_splat_pattern" | "dictionary_splat_pattern" => (p.named_child(0), None, None, true),
                _ => continue,
            };
            let Some(name_node) = name_node else { continue };
            if name_node.kind() != "identifier" {
                continue;
            }
            let default = default.map(|d| self.expr(d, outer));
            let annotation = annotation.map(|a| self.annotation(a, inner));
            let name = Name::new(self.text(name_node));
            let index = self.scopes[inner as usize].params.len() as u32;
            self.scope(inner).params.push(Param { name: name.clone(), default, annotation, variadic, keywords });
            self.scope(inner).bindings.push((name, Binding::Param(index)));
        }
    }

    /// Lowers a type annotation: every class it names is read by `scope`; the result is what
    /// the annotation promises (see [`crate::annotation`]).
    fn annotation(&mut self, node: Node, scope: ScopeId) -> Expr {
        self.annotation_reads(node, scope);
        crate::annotation::type_expr(self.text(node))
    }

    fn annotation_reads(&mut self, node: Node, scope: ScopeId) {
        match node.kind() {
            "type" => {
                if let Some(inner) = node.named_child(0) {
                    self.annotation_reads(inner, scope);
                }
            }
            "identifier" | "attribute" => {
                self.expr(node, scope);
            }
            // A forward reference reads what it names, as the unquoted annotation would.
            "string" => {
                if let Some(text) = self.constant_string(node) {
                    for name in crate::annotation::names_in(text.as_str()) {
                        self.access(scope, name, line(node), false);
                    }
                }
            }
            _ => {
                let mut cursor = node.walk();
                let mut children: Vec<Node> = node.named_children(&mut cursor).collect();
                // `Literal['a']` holds values, not names; `Annotated[T, meta]` holds one type.
                let generic = match node.kind() {
                    "generic_type" => children.first().copied(),
                    "subscript" => node.field("value"),
                    _ => None,
                };
                match generic.map(|g| self.text(g).rsplit('.').next().unwrap_or_default()) {
                    Some("Literal") => children.truncate(1),
                    Some("Annotated") if node.kind() == "generic_type" => {
                        // `Annotated` `[T, meta]`: the parameter list's first type only.
                        let first_type = children.get(1).and_then(|params| params.named_child(0));
                        children.truncate(1);
                        children.extend(first_type);
                    }
                    Some("Annotated") => children.truncate(2),
                    _ => {}
                }
                for child in children {
                    self.annotation_reads(child, scope);
                }
            }
        }
    }

    fn class(&mut self, node: Node, outer: Node, scope: ScopeId, decorators: Vec<Expr>) {
        let Some(name_node) = node.field("name") else {
            return;
        };
        let name = self.text(name_node);
        let body = node.field("body");
        self.check_body(node, body);
        let signature = Some(self.header_range(outer, body));
        let docstring = body.and_then(|b| self.docstring(b));
        let def = self.push_def(scope, DefKind::Class, name, outer, signature, docstring, decorators);
        let inner = self.new_scope(ScopeKind::Class, scope, Some(def));
        self.defs[def as usize].body = Some(inner);
        if let Some(args) = node.field("superclasses") {
            let mut cursor = args.walk();
            let children: Vec<Node> = args.named_children(&mut cursor).collect();
            for arg in children {
                match arg.kind() {
                    "keyword_argument" => {
                        if let Some(v) = arg.field("value") {
                            self.expr(v, scope);
                        }
                    }
                    "comment" => {}
                    "subscript" if arg.field("value").is_some() => {
                        // `Base[str]`: a generic base; the class inherits from `Base`.
                        let mut cursor = arg.walk();
                        let subs: Vec<Node> = arg.children_by_field_name("subscript", &mut cursor).collect();
                        for sub in subs {
                            self.expr(sub, scope);
                        }
                        if let Some(value) = arg.field("value") {
                            let base = self.chain_or_value(value, scope);
                            self.scope(inner).bases.push((base, line(arg)));
                        }
                    }
                    _ => {
                        let base = self.chain_or_value(arg, scope);
                        self.scope(inner).bases.push((base, line(arg)));
                    }
                }
            }
        }
        self.bind(scope, name, Binding::Def(def));
        self.def_replaces_earlier(node, outer, name, scope);
        if matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class) {
            self.module_variables.insert((scope, Name::new(name)), def);
        }
        if let Some(body) = body {
            self.body(body, inner);
        }
        self.instance_attributes(inner);
    }

    /// A global a function creates (`global CONFIG` then `CONFIG = load()`) is a module variable
    /// like one assigned at the top level: it gets a unit (at its first such assignment) and a
    /// module binding of unknown value, so that other functions' reads and other modules'
    /// imports of it resolve. Names the module binds itself keep their own binding and unit.
    fn define_global_writes(&mut self) {
        for write in std::mem::take(&mut self.global_writes) {
            let key = (0, write.name.clone());
            if self.module_variables.contains_key(&key) || self.scopes[0].bindings.iter().any(|(n, _)| *n == write.name)
            {
                continue;
            }
            let path = self.unique_path(0, &write.name);
            let parent = self.owner_def(0);
            self.defs.push(Def {
                kind: DefKind::Variable,
                name: write.name.clone(),
                path,
                parent,
                body: None,
                start_line: write.start_line,
                end_line: write.end_line,
                start_byte: write.start_byte,
                end_byte: write.end_byte,
                header: None,
                docstring: None,
                decorators: Box::default(),
                return_type: None,
                // It exists only once the function ran.
                conditional: true,
            });
            self.module_variables.insert(key, (self.defs.len() - 1) as DefId);
            self.scopes[0].bindings.push((write.name, Binding::Value(Expr::Unknown)));
        }
    }

    /// Turns `self.x = ...` in the methods of a class into variable units of the class, unless
    /// the class body already defines `x`.
    fn instance_attributes(&mut self, class_scope: ScopeId) {
        let method_scopes: Vec<ScopeId> = (0..self.scopes.len() as ScopeId)
            .filter(|&s| {
                let sc = &self.scopes[s as usize];
                sc.kind == ScopeKind::Function && sc.parent == Some(class_scope)
            })
            .collect();
        for ms in method_scopes {
            let Some(self_name) = self.scopes[ms as usize].params.first().map(|p| p.name.clone()) else {
                continue;
            };
            let stores: Vec<AttrStore> = self.scopes[ms as usize]
                .attr_stores
                .iter()
                .filter(|s| s.base == Expr::Name(self_name.clone()) && !s.element_only)
                .cloned()
                .collect();
            for store in stores {
                let key = (class_scope, store.attr.clone());
                if self.module_variables.contains_key(&key) {
                    continue;
                }
                let path = self.unique_path(class_scope, &store.attr);
                let parent = self.scopes[class_scope as usize].def;
                self.defs.push(Def {
                    kind: DefKind::Variable,
                    name: store.attr.clone(),
                    path,
                    parent,
                    body: None,
                    start_line: store.start_line,
                    end_line: store.end_line,
                    start_byte: store.start_byte,
                    end_byte: store.end_byte,
                    header: None,
                    docstring: None,
                    decorators: Box::default(),
                    return_type: None,
                    conditional: false,
                });
                let id = (self.defs.len() - 1) as DefId;
                self.module_variables.insert(key, id);
            }
        }
    }

    /// The byte range of the docstring literal of a body, if it has one.
    fn docstring(&self, body: Node) -> Option<(u32, u32)> {
        let mut cursor = body.walk();
        let first = body.named_children(&mut cursor).find(|n| n.kind() != "comment")?;
        if first.kind() != "expression_statement" {
            return None;
        }
        let string = first.named_child(0)?;
        if string.kind() != "string" || first.named_child_count() != 1 {
            return None;
        }
        Some(span(string))
    }

    // ---- assignments -----------------------------------------------------------------------

    /// The rest of lowering a call, once its callee and arguments are lowered: the call site,
    /// and the call's value. Kept out of [`Lowerer::expr`], whose stack frame bounds how deep
    /// expressions nest (a debug build's frame holds every arm's locals).
    #[inline(never)]
    fn finish_call(
        &mut self,
        node: Node,
        callee: Expr,
        callee_span: (u32, u32),
        mut args: Vec<Expr>,
        keywords: Vec<(Name, Expr)>,
        scope: ScopeId,
    ) -> Expr {
        // Trailing arguments that cannot flow anywhere need no position.
        while args.last() == Some(&Expr::Unknown) {
            args.pop();
        }
        // `staticmethod(f)` and `classmethod(f)` (in a class body: `handler =
        // staticmethod(f)`) and `functools.partial(f, ...)` are, as values, the function
        // they wrap: calling them calls it. (The wrapping call itself is still a call site.)
        let wrapped = match (&callee, args.as_slice(), keywords.is_empty()) {
            (Expr::Name(n), [only], true) if n == "staticmethod" || n == "classmethod" => Some(only.clone()),
            // `partial(f, ...)`: calling it calls `f`.
            (Expr::Name(n), [f, ..], _) if n == "partial" && *f != Expr::Unknown => Some(f.clone()),
            (Expr::Attr(m, n), [f, ..], _)
                if n == "partial" && matches!(m.as_ref(), Expr::Name(m) if m == "functools") && *f != Expr::Unknown =>
            {
                Some(f.clone())
            }
            // `update_wrapper(wrapper, wrapped)` returns `wrapper` (as `@wraps(wrapped)` on it
            // does): flask's `setupmethod` returns `t.cast(F, update_wrapper(wrapper_func, f))`.
            _ if is_update_wrapper(&callee) => args
                .first()
                .or_else(|| keywords.iter().find(|(k, _)| k == "wrapper").map(|(_, e)| e))
                .filter(|w| **w != Expr::Unknown)
                .cloned(),
            _ => None,
        };
        // `super(C, self)` with C not the class its code is in skips past C: not the
        // `super()` it is read as (evaluation takes the enclosing class), so its value is
        // left unknown. `super(Enclosing, self)`, the Python 2 spelling, is `super()`.
        let explicit_super = matches!(&callee, Expr::Name(n) if n == "super")
            && node.field("arguments").is_some_and(|arguments| {
                let mut cursor = arguments.walk();
                let first = arguments.named_children(&mut cursor).find(|a| a.kind() != "comment");
                first.is_some_and(|first| Some(self.text(first)) != self.enclosing_class_name(scope).as_deref())
            });
        self.container_mutation(&callee, &args, scope);
        let special = self
            .special_call_value(&callee, node, &args, &keywords, scope)
            .or_else(|| self.property_value(&callee, &args, &keywords));
        self.scope(scope).calls.push(CallSite {
            callee: callee.clone(),
            callee_span,
            line: line(node),
            args: args.into_boxed_slice(),
            keywords: keywords.into_boxed_slice(),
        });
        if explicit_super {
            return Expr::Unknown;
        }
        if let Some(special) = special {
            return special;
        }
        wrapped.unwrap_or_else(|| Expr::Call(Box::new(callee)))
    }

    /// The value of a call whose callee says more than a call's result: `typing.cast` and the
    /// builtins that iterate over their arguments (see [`iteration_view`]). Kept out of
    /// [`Lowerer::expr`], whose stack frame bounds how deep expressions nest.
    #[inline(never)]
    fn special_call_value(
        &mut self,
        callee: &Expr,
        call: Node,
        args: &[Expr],
        keywords: &[(Name, Expr)],
        scope: ScopeId,
    ) -> Option<Expr> {
        if let Some(cast) = self.typing_cast(callee, call, args, scope) {
            return Some(cast);
        }
        if let Expr::Name(name) = callee
            && self.rebound_builtins.contains(name.as_str())
        {
            return None;
        }
        // `type(obj)` is the class of `obj`: `type(self)(...)` constructs the class its code is
        // in (or a subclass). Not `obj.__class__`, which a class may define otherwise.
        if let ([obj], true) = (args, keywords.is_empty())
            && matches!(callee, Expr::Name(n) if n == "type")
            && *obj != Expr::Unknown
        {
            return Some(Expr::Attr(Box::new(obj.clone()), Name::new(TYPE_OF)));
        }
        let view = iteration_view(callee, args, keywords.iter().any(|(k, _)| k == "key"))?;
        Some(Expr::Union(vec![Expr::Call(Box::new(callee.clone())), view]))
    }

    /// `property(fget, fset, ...)` (the builtin, not a name the file binds): the getter and the
    /// setter it is made of, positional or by keyword. Without a getter it is a plain call.
    fn property_value(&self, callee: &Expr, args: &[Expr], keywords: &[(Name, Expr)]) -> Option<Expr> {
        if !matches!(callee, Expr::Name(n) if n == "property") || self.rebound_builtins.contains("property") {
            return None;
        }
        let argument = |position: usize, keyword: &str| {
            args.get(position)
                .or_else(|| keywords.iter().find(|(k, _)| k == keyword).map(|(_, e)| e))
                .filter(|e| **e != Expr::Unknown)
                .cloned()
        };
        let getter = argument(0, "fget")?;
        Some(Expr::Property(Box::new(getter), argument(1, "fset").map(Box::new)))
    }

    /// `typing.cast(T, value)` (also `cast(...)`, `t.cast(...)`): the value declared as a `T`, as
    /// `x: T = value` declares it (a forward reference in quotes too).
    fn typing_cast(&mut self, callee: &Expr, call: Node, args: &[Expr], scope: ScopeId) -> Option<Expr> {
        // Only `cast` as imported from `typing` (a module's own `cast(value, dtype)` helper keeps
        // its own result); imports are read from the module's top level, where they are written.
        let is_typing = |m: &ModuleRef| m.level == 0 && matches!(m.name.as_str(), "typing" | "typing_extensions");
        let imported = |name: &str, what: &dyn Fn(&Import) -> bool| {
            self.scopes[0].bindings.iter().any(|(n, b)| n == name && matches!(b, Binding::Import(i) if what(i)))
        };
        let is_cast = match callee {
            Expr::Name(n) if n == "cast" => {
                imported("cast", &|i| matches!(i, Import::Name { module, name } if name == "cast" && is_typing(module)))
            }
            Expr::Attr(base, n) if n == "cast" => match base.as_ref() {
                Expr::Name(m) => imported(m, &|i| matches!(i, Import::Module { module } if is_typing(module))),
                _ => false,
            },
            _ => false,
        };
        if !is_cast {
            return None;
        }
        let arguments = call.field("arguments")?;
        let mut cursor = arguments.walk();
        let positional: Vec<Node> = arguments
            .named_children(&mut cursor)
            .filter(|a| a.kind() != "comment" && a.kind() != "keyword_argument")
            .collect();
        let [ty, _] = positional.as_slice() else { return None };
        // A quoted type's names are read here; an unquoted one was read as an argument.
        let declared = if ty.kind() == "string" {
            self.annotation(*ty, scope)
        } else {
            crate::annotation::type_expr(self.text(*ty))
        };
        let value = args.get(1).cloned().unwrap_or(Expr::Unknown);
        Some(Expr::Declared(Box::new(declared), Box::new(value)))
    }

    /// Lowers `left = right` (or `left: T = right`); returns the assigned value.
    fn assignment(&mut self, node: Node, stmt: Node, scope: ScopeId) -> Expr {
        self.nested(Expr::Unknown, |l| l.assignment_inner(node, stmt, scope))
    }

    fn assignment_inner(&mut self, node: Node, stmt: Node, scope: ScopeId) -> Expr {
        let value = match node.field("right") {
            Some(right) if right.kind() == "assignment" => self.assignment(right, stmt, scope),
            Some(right) if right.kind() == "augmented_assignment" => {
                self.augmented(right, stmt, scope);
                Expr::Unknown
            }
            Some(right) if right.kind() == "expression_list" || right.kind() == "pattern_list" => {
                self.value(right, scope)
            }
            Some(right) => self.expr(right, scope),
            None => Expr::Unknown,
        };
        let declared = match node.field("type") {
            Some(t) => self.annotation(t, scope),
            None => Expr::Unknown,
        };
        if let Some(left) = node.field("left") {
            if scope == 0 && self.text(left) == "__all__" {
                match all_names(self, node.field("right")) {
                    Some(names) => self.dunder_all = Some(names),
                    None => self.dunder_all_dynamic = true,
                }
            }
            let annotated_only = node.field("right").is_none();
            let assigned = if annotated_only { Expr::Unknown } else { value.clone() };
            let binding = if declared == Expr::Unknown {
                Binding::Value(assigned)
            } else {
                Binding::Value(Expr::Declared(Box::new(declared), Box::new(assigned)))
            };
            self.bind_target(left, binding, scope, Some(stmt));
            if !annotated_only && left.kind() == "identifier" && self.replaces_earlier(left, node, scope) {
                let sc = self.scope(scope);
                if let Some(last) = sc.bindings.len().checked_sub(1) {
                    sc.replacing.push((last as u32, line(node)));
                }
            }
        }
        value
    }

    /// Whether `name = value` (assignment `node`) replaces every earlier binding of `name` once
    /// the scope ran: it runs unconditionally in a module or class body, and its value does not
    /// read the name (`f = wrap(f)` keeps what `f` was in view). Function bodies are left out:
    /// their own code reads names while the body runs, before later assignments.
    fn replaces_earlier(&self, name: Node, node: Node, scope: ScopeId) -> bool {
        if self.conditional_depth > 0
            || !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class)
        {
            return false;
        }
        let Some(right) = node.field("right") else { return false };
        !mentions_identifier(right, self.text(name), self.src)
    }

    /// Marks the binding an import statement just made as replacing the earlier bindings of its
    /// name, as an assignment does ([`Self::replaces_earlier`]): of `from .x import f` and then
    /// `from .y import f` only the second is in force afterwards, and a call of `f` reached both.
    /// An import under `if`/`try` (`except ImportError:` fallbacks, `TYPE_CHECKING`) may not
    /// have run, and one in a function is read with all of the function's bindings: neither
    /// replaces.
    fn import_replaces_earlier(&mut self, node: Node, scope: ScopeId) {
        if self.conditional_depth > 0
            || !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class)
        {
            return;
        }
        let sc = self.scope(scope);
        if let Some(last) = sc.bindings.len().checked_sub(1) {
            sc.replacing.push((last as u32, line(node)));
        }
    }

    /// Marks the binding a `def` or `class` statement just made as replacing the earlier
    /// bindings of its name, as an assignment or an import does ([`Self::replaces_earlier`]):
    /// of `from .compat import g` and then `def g(): ...` only the function is in force
    /// afterwards. Not under `if`/`try`, not in a function body, and not when a decorator reads
    /// the name (`@x.setter`, `@f.register`): what it makes is built from the earlier binding.
    fn def_replaces_earlier(&mut self, node: Node, outer: Node, name: &str, scope: ScopeId) {
        if self.conditional_depth > 0
            || !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class)
        {
            return;
        }
        let mut cursor = outer.walk();
        let decorator_reads_name = outer
            .named_children(&mut cursor)
            .filter(|c| c.kind() == "decorator")
            .any(|d| mentions_identifier(d, name, self.src));
        // `from ..lookups import Transform`, `class IsEmpty(Transform)`, then `class
        // Transform(...)` (django's gis functions): the body's own code read the earlier binding
        // while it ran, and the class summaries read bases as the module ends, so that earlier
        // binding stays in view (both are, as before).
        if decorator_reads_name || self.scope_code_read(scope, name) {
            return;
        }
        // The name is bound once the statement ran: a class body's own code (`backend =
        // Templates` in `class Templates`) still reads the earlier binding.
        let bound_at = node.end_position().row as u32 + 1;
        let sc = self.scope(scope);
        if let Some(last) = sc.bindings.len().checked_sub(1) {
            sc.replacing.push((last as u32, bound_at));
        }
    }

    /// Whether the code of `scope` lowered so far (not that of functions in it) read `name`:
    /// called it, read it or an attribute of it, or named it as a class's base.
    fn scope_code_read(&self, scope: ScopeId, name: &str) -> bool {
        let sc = &self.scopes[scope as usize];
        let named = |e: &Expr| root_name(e).is_some_and(|n| n.as_str() == name);
        sc.accesses.iter().any(|a| !a.write && named(&a.expr))
            || sc.calls.iter().any(|c| named(&c.callee))
            || self
                .scopes
                .iter()
                .any(|c| c.kind == ScopeKind::Class && c.parent == Some(scope) && c.bases.iter().any(|(b, _)| named(b)))
    }

    /// `type Alias = expr` (Python 3.12; also `type Alias[T] = ...`): binds `Alias` as an
    /// assignment would, to the type it names, so a module-level alias is a variable unit and the
    /// type expression's names are read like an annotation's.
    fn type_alias(&mut self, node: Node, scope: ScopeId) {
        let value = match node.field("right") {
            Some(right) => self.annotation(right, scope),
            None => Expr::Unknown,
        };
        let Some(left) = node.field("left") else { return };
        // `left` is a `type` node around the name, or around `Alias[T]` (a generic type).
        let mut name = left;
        while name.kind() != "identifier" {
            match name.named_child(0) {
                Some(child) => name = child,
                None => return,
            }
        }
        self.bind_target(name, Binding::Value(value), scope, Some(node));
    }

    fn augmented(&mut self, node: Node, stmt: Node, scope: ScopeId) {
        let value = node.field("right").map(|r| self.expr(r, scope)).unwrap_or(Expr::Unknown);
        if let Some(left) = node.field("left") {
            if scope == 0 && self.text(left) == "__all__" {
                match all_names(self, node.field("right")) {
                    Some(extra) => self.dunder_all.get_or_insert_with(Vec::new).extend(extra),
                    None => self.dunder_all_dynamic = true,
                }
            }
            // `x += y` reads x too.
            if left.kind() == "identifier" || left.kind() == "attribute" {
                let read = self.chain(left, scope);
                self.access(scope, read, line(left), false);
            }
            let _ = value;
            self.bind_target(left, Binding::Value(Expr::Unknown), scope, Some(stmt));
        }
    }

    /// Binds an assignment target. `stmt` is the statement, when the target can define a unit.
    fn bind_target(&mut self, target: Node, binding: Binding, scope: ScopeId, stmt: Option<Node>) {
        self.nested((), |l| l.bind_target_inner(target, binding, scope, stmt))
    }

    fn bind_target_inner(&mut self, target: Node, binding: Binding, scope: ScopeId, stmt: Option<Node>) {
        match target.kind() {
            "identifier" => {
                let name = Name::new(self.text(target));
                self.define_variable(scope, &name, stmt);
                self.scope(scope).bindings.push((name.clone(), binding));
                if self.scopes[scope as usize].globals.contains(&name) {
                    if self.scopes[scope as usize].kind != ScopeKind::Module {
                        let at = stmt.unwrap_or(target);
                        self.global_writes.push(GlobalWrite {
                            name: name.clone(),
                            start_line: line(at),
                            end_line: at.end_position().row as u32 + 1,
                            start_byte: at.start_byte() as u32,
                            end_byte: at.end_byte() as u32,
                        });
                    }
                    self.access(scope, Expr::Name(name), line(target), true);
                }
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" | "expression_list" => {
                let mut cursor = target.walk();
                let children: Vec<Node> =
                    target.named_children(&mut cursor).filter(|c| c.kind() != "comment").collect();
                // What is unpacked: a nested pattern (`a, (b, c) = ...`) unpacks an element of it.
                let whole = match binding {
                    Binding::Value(e) => Some(e),
                    Binding::Unpack(e, i) => Some(Expr::Element(Box::new(e), i)),
                    // `for k, v in pairs`: each element of what is iterated is unpacked.
                    Binding::Iter(e) => Some(Expr::Subscript(Box::new(e))),
                    _ => None,
                };
                let star = children.iter().position(|c| matches!(c.kind(), "list_splat_pattern" | "list_splat"));
                let count = children.len();
                for (i, child) in children.into_iter().enumerate() {
                    let Some(whole) = &whole else {
                        self.bind_target(child, Binding::Value(Expr::Unknown), scope, stmt);
                        continue;
                    };
                    match star {
                        Some(s) if i == s => {
                            // `*rest`: a list of the elements it takes.
                            let rest = match whole {
                                Expr::Container(ContainerKind::Tuple | ContainerKind::List, items)
                                    if items.len() + 1 >= count =>
                                {
                                    items[s..items.len() + 1 + s - count].to_vec()
                                }
                                _ => vec![Expr::Subscript(Box::new(whole.clone()))],
                            };
                            if let Some(inner) = child.named_child(0) {
                                let rest = Binding::Value(Expr::Container(ContainerKind::List, rest));
                                self.bind_target(inner, rest, scope, stmt);
                            }
                        }
                        // After `*rest`, positions count from the end.
                        Some(s) if i > s => {
                            let element = match whole {
                                Expr::Container(ContainerKind::Tuple | ContainerKind::List, items)
                                    if items.len() + 1 >= count =>
                                {
                                    Binding::Unpack(whole.clone(), (items.len() + i - count) as u32)
                                }
                                _ => Binding::Value(Expr::Subscript(Box::new(whole.clone()))),
                            };
                            self.bind_target(child, element, scope, stmt);
                        }
                        _ => self.bind_target(child, Binding::Unpack(whole.clone(), i as u32), scope, stmt),
                    }
                }
            }
            "list_splat_pattern" | "parenthesized_expression" => {
                if let Some(inner) = target.named_child(0) {
                    let b = if target.kind() == "list_splat_pattern" { Binding::Value(Expr::Unknown) } else { binding };
                    self.bind_target(inner, b, scope, stmt);
                }
            }
            "attribute" => {
                let Some(object) = target.field("object") else {
                    return;
                };
                let Some(attr) = target.field("attribute") else {
                    return;
                };
                let base = self.chain(object, scope);
                let attr = Name::new(self.text(attr));
                let value = match binding {
                    Binding::Value(e) => e,
                    _ => Expr::Unknown,
                };
                let full = Expr::Attr(Box::new(base.clone()), attr.clone());
                self.access(scope, full, line(target), true);
                self.attr_store(scope, base, attr, value, false, target, stmt);
            }
            "subscript" => {
                // `registry[key] = func` makes `func` an element of `registry`.
                let object = target.field("value");
                let key = target.field("subscript").and_then(|k| self.constant_key(k));
                if let Some(index) = target.field("subscript") {
                    self.expr(index, scope);
                }
                if let Some(object) = object {
                    self.expr(object, scope);
                    let Binding::Value(v) = binding else { return };
                    let wrap = |key: Option<Name>, inner: Expr| match key {
                        Some(key) => Expr::Keyed(vec![(key, inner)]),
                        None => Expr::Container(ContainerKind::Dict, vec![inner]),
                    };
                    // `table["a"]["b"] = f` stores `{"a": {"b": f}}` into `table`: one level per
                    // subscript, down to the name.
                    // The constant keys from the name inwards (`None` once one is not constant).
                    let mut path: Option<Vec<Name>> = key.clone().map(|k| vec![k]);
                    let mut element = wrap(key, v);
                    let mut container = object;
                    while container.kind() == "subscript" {
                        let key = container.field("subscript").and_then(|k| self.constant_key(k));
                        path = match (path, &key) {
                            (Some(mut p), Some(k)) => {
                                p.insert(0, k.clone());
                                Some(p)
                            }
                            _ => None,
                        };
                        element = wrap(key, element);
                        let Some(inner) = container.field("value") else { break };
                        container = inner;
                    }
                    if container.kind() == "identifier" {
                        // The element joins the container wherever the container lives (often a
                        // module-level registry mutated from a function).
                        let name = Name::new(self.text(container));
                        let owner = self.container_scope(&name, scope);
                        if let Some(path) = path {
                            self.overwrite_keys(owner, scope, &name, &[path]);
                        }
                        self.bind(owner, &name, Binding::Value(element));
                    } else if container.kind() == "attribute" {
                        // `self.adapters[prefix] = adapter`: an element of the attribute.
                        let object = container.field("object");
                        let attr = container.field("attribute");
                        if let (Some(object), Some(attr)) = (object, attr)
                            && object.kind() == "identifier"
                        {
                            let base = Expr::Name(Name::new(self.text(object)));
                            let attr = Name::new(self.text(attr));
                            self.attr_store(scope, base, attr, element, true, target, stmt);
                        }
                    }
                }
            }
            _ => {
                self.expr(target, scope);
            }
        }
    }

    /// Records a store into `base.attr` made by assignment target `target` of statement `stmt`.
    #[allow(clippy::too_many_arguments)]
    fn attr_store(
        &mut self,
        scope: ScopeId,
        base: Expr,
        attr: Name,
        value: Expr,
        element_only: bool,
        target: Node,
        stmt: Option<Node>,
    ) {
        let stmt = stmt.unwrap_or(target);
        self.scope(scope).attr_stores.push(AttrStore {
            base,
            attr,
            value,
            element_only,
            line: line(target),
            start_line: line(stmt),
            end_line: stmt.end_position().row as u32 + 1,
            start_byte: stmt.start_byte() as u32,
            end_byte: stmt.end_byte() as u32,
        });
    }

    /// `items.append(f)` (and `add`, `appendleft`, `insert(i, f)`, `extend([f, g])`) makes what
    /// it adds an element of `items`, as `items[k] = f` does: callbacks collected in a list and
    /// called in a loop. Only a container named by a plain name that is bound somewhere visible.
    fn container_mutation(&mut self, callee: &Expr, args: &[Expr], scope: ScopeId) {
        let Expr::Attr(base, method) = callee else { return };
        let Expr::Name(name) = base.as_ref() else { return };
        if scope == 0 && name == "__all__" {
            // `__all__.append("x")`, `__all__.extend(["x", "y"])`: literal names are followed.
            let names: Option<Vec<Name>> = match (method.as_str(), args) {
                ("append", [Expr::Constant(k)]) if !k.starts_with(INTEGER_KEY) => Some(vec![k.clone()]),
                ("extend", [Expr::Container(_, items)]) => items
                    .iter()
                    .map(|e| match e {
                        Expr::Constant(k) if !k.starts_with(INTEGER_KEY) => Some(k.clone()),
                        _ => None,
                    })
                    .collect(),
                ("append" | "extend" | "insert" | "remove" | "__iadd__", _) => None,
                _ => Some(Vec::new()),
            };
            match names {
                Some(names) => self.dunder_all.get_or_insert_with(Vec::new).extend(names),
                None => self.dunder_all_dynamic = true,
            }
            return;
        }
        // `handlers.update({"error": on_error})` stores under those keys, as
        // `handlers["error"] = on_error` does.
        if let ("update", [Expr::Keyed(items)]) = (method.as_str(), args) {
            let is_dict = |e: &Expr| match e {
                Expr::Keyed(_) | Expr::Container(ContainerKind::Dict, _) => true,
                Expr::Call(c) => matches!(c.as_ref(), Expr::Name(n) | Expr::Attr(_, n)
                    if matches!(n.as_str(), "dict" | "defaultdict" | "OrderedDict")),
                _ => false,
            };
            let owner = self.container_scope(name, scope);
            if self.bound_to(owner, name, is_dict) {
                let keys: Vec<Vec<Name>> = items.iter().map(|(k, _)| vec![k.clone()]).collect();
                self.overwrite_keys(owner, scope, &name.clone(), &keys);
                self.bind(owner, &name.clone(), Binding::Value(Expr::Keyed(items.clone())));
            }
            return;
        }
        // Calls that move, drop or replace what sits under a key or an index (`pop`, `sort`,
        // `update` with anything but a dict literal, ...): the items are no longer the ones the
        // literals wrote where they wrote them, so an item read by key or index falls back to any
        // element. An empty `Added` says so and adds no element.
        if matches!(
            method.as_str(),
            "pop"
                | "popitem"
                | "clear"
                | "setdefault"
                | "update"
                | "remove"
                | "reverse"
                | "sort"
                | "__setitem__"
                | "__delitem__"
        ) {
            let owner = self.container_scope(name, scope);
            let is_literal = |e: &Expr| matches!(e, Expr::Keyed(_) | Expr::Container(..));
            if self.bound_to(owner, name, is_literal) {
                self.bind(owner, &name.clone(), Binding::Value(Expr::Added(Vec::new())));
            }
            return;
        }
        let added = match (method.as_str(), args) {
            ("append" | "add" | "appendleft", [v]) => vec![v.clone()],
            ("insert", [_, v]) => vec![v.clone()],
            ("extend", [Expr::Container(_, items)]) => items.clone(),
            ("extend", [other]) => vec![Expr::Subscript(Box::new(other.clone()))],
            _ => return,
        };
        let added: Vec<Expr> = added.into_iter().filter(|e| *e != Expr::Unknown).collect();
        if added.is_empty() {
            return;
        }
        // Only a name bound to a container (`[]`, `set()`, `deque()`, ...): `group.add(cmd)` on
        // some other object must not make it a list.
        let owner = self.container_scope(name, scope);
        let is_container = |e: &Expr| match e {
            Expr::Container(..) => true,
            Expr::Call(c) => matches!(c.as_ref(), Expr::Name(n) | Expr::Attr(_, n)
                if matches!(n.as_str(), "list" | "set" | "deque" | "defaultdict" | "OrderedDict")),
            _ => false,
        };
        if !self.bound_to(owner, name, is_container) {
            return;
        }
        self.bind(owner, &name.clone(), Binding::Value(Expr::Added(added)));
    }

    /// Whether `scope` binds `name` to a value `is_kind` accepts (as far as lowered).
    fn bound_to(&self, scope: ScopeId, name: &Name, is_kind: impl Fn(&Expr) -> bool) -> bool {
        self.scopes[scope as usize]
            .bindings
            .iter()
            .any(|(n, b)| n == name && matches!(b, Binding::Value(e) if is_kind(e)))
    }

    /// A store under constant keys of the dict `name`, made unconditionally by the code of the
    /// scope the dict lives in (not from a function that may or may not run, not in a branch or
    /// loop), replaces what earlier literals of that scope put under those keys: `d["a"] = g`
    /// after `d = {"a": f}` leaves `g` only (what functions called later see). Not
    /// flow-sensitive beyond that: a use between the two statements sees `g` as well.
    /// Each of `paths` is a chain of constant keys (`["a", "b"]` for `d["a"]["b"] = g`).
    fn overwrite_keys(&mut self, owner: ScopeId, scope: ScopeId, name: &Name, paths: &[Vec<Name>]) {
        fn remove(expr: &mut Expr, path: &[Name]) {
            let (Expr::Keyed(items), Some((first, rest))) = (expr, path.split_first()) else { return };
            if rest.is_empty() {
                items.retain(|(k, _)| k != first);
            } else {
                for (k, inner) in items.iter_mut() {
                    if k == first {
                        remove(inner, rest);
                    }
                }
            }
        }
        if owner != scope || self.conditional_depth > 0 {
            return;
        }
        for (n, b) in self.scopes[owner as usize].bindings.iter_mut() {
            if n == name
                && let Binding::Value(e) = b
            {
                for path in paths {
                    remove(e, path);
                }
            }
        }
    }

    /// The scope whose binding of `name` (as far as lowered) a store into `name[...]` mutates.
    fn container_scope(&self, name: &str, scope: ScopeId) -> ScopeId {
        let mut s = scope;
        loop {
            let sc = &self.scopes[s as usize];
            if sc.globals.iter().any(|g| g == name) {
                return 0;
            }
            if (s == scope || sc.kind != ScopeKind::Class) && sc.bindings.iter().any(|(n, _)| n == name) {
                return s;
            }
            match sc.parent {
                Some(p) => s = p,
                None => return 0,
            }
        }
    }

    /// Module-level and class-level assignments define variable units (once per name).
    fn define_variable(&mut self, scope: ScopeId, name: &str, stmt: Option<Node>) {
        let Some(stmt) = stmt else { return };
        if !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class) {
            return;
        }
        let key = (scope, Name::new(name));
        if self.module_variables.contains_key(&key) {
            return;
        }
        let def = self.push_def(scope, DefKind::Variable, name, stmt, None, None, Vec::new());
        self.module_variables.insert(key, def);
    }

    // ---- imports ---------------------------------------------------------------------------

    /// A name clause of an import statement (`a.b` or `a.b as c`): the dotted name, normalised,
    /// and the alias if any.
    fn imported_name(&self, n: Node) -> (String, Option<&'a str>) {
        let (name, alias) = match n.kind() {
            "aliased_import" => {
                (n.field("name").map(|x| self.text(x)).unwrap_or(""), n.field("alias").map(|x| self.text(x)))
            }
            _ => (self.text(n), None),
        };
        (normalise_dotted(name), alias)
    }

    fn import(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let names: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        for n in names {
            let (module, alias) = self.imported_name(n);
            if module.is_empty() {
                continue;
            }
            match alias {
                Some(alias) => self.bind(
                    scope,
                    alias,
                    Binding::Import(Import::Module { module: ModuleRef { level: 0, name: Name::new(&module) } }),
                ),
                None => {
                    let first = Name::new(module.split('.').next().unwrap_or(&module));
                    self.scope(scope).bindings.push((
                        first.clone(),
                        Binding::Import(Import::Module { module: ModuleRef { level: 0, name: first } }),
                    ));
                }
            }
            self.import_replaces_earlier(node, scope);
            self.scope(scope).imports.push(ImportStmt {
                line: line(node),
                module: ModuleRef { level: 0, name: Name::new(&module) },
                names: Box::default(),
                is_from: false,
            });
        }
    }

    fn import_from(&mut self, node: Node, scope: ScopeId) {
        let Some(module_node) = node.field("module_name") else {
            return;
        };
        let module = if module_node.kind() == "relative_import" {
            let mut level = 0;
            let mut name = String::new();
            let mut cursor = module_node.walk();
            for child in module_node.named_children(&mut cursor) {
                match child.kind() {
                    "import_prefix" => level = self.text(child).chars().filter(|&c| c == '.').count() as u32,
                    "dotted_name" => name = normalise_dotted(self.text(child)),
                    _ => {}
                }
            }
            ModuleRef { level, name: Name::new(&name) }
        } else {
            ModuleRef { level: 0, name: Name::new(&normalise_dotted(self.text(module_node))) }
        };
        let mut names = Vec::new();
        let mut cursor = node.walk();
        let name_nodes: Vec<Node> = node.children_by_field_name("name", &mut cursor).collect();
        for n in name_nodes {
            let (name, alias) = self.imported_name(n);
            if name.is_empty() {
                continue;
            }
            let name = Name::new(&name);
            let local = alias.map(Name::new).unwrap_or_else(|| name.clone());
            self.scope(scope)
                .bindings
                .push((local, Binding::Import(Import::Name { module: module.clone(), name: name.clone() })));
            self.import_replaces_earlier(node, scope);
            names.push(name);
        }
        let mut cursor = node.walk();
        if node.named_children(&mut cursor).any(|c| c.kind() == "wildcard_import") {
            names.push(Name::new("*"));
        }
        let names = names.into_boxed_slice();
        self.scope(scope).imports.push(ImportStmt { line: line(node), module, names, is_from: true });
    }

    // ---- expressions -----------------------------------------------------------------------

    fn access(&mut self, scope: ScopeId, expr: Expr, line: u32, write: bool) {
        self.scope(scope).accesses.push(Access { expr, line, write });
    }

    /// Lowers an expression that is read: names and attribute chains are recorded as accesses.
    fn expr(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind() {
            "identifier" | "attribute" => {
                let e = self.chain(node, scope);
                self.access(scope, e.clone(), line(node), false);
                e
            }
            _ => self.value(node, scope),
        }
    }

    /// Lowers a name or attribute chain without recording the chain itself as an access (the
    /// caller records it as a call, a base class, a store target, ...).
    fn chain(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind() {
            "identifier" => Expr::Name(Name::new(self.text(node))),
            "attribute" => self.nested(Expr::Unknown, |l| l.attribute_chain(node, scope)),
            _ => self.value(node, scope),
        }
    }

    fn attribute_chain(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind() {
            "attribute" => {
                let object = node.field("object");
                let attr = node.field("attribute").map(|a| Name::new(self.text(a)));
                match (object, attr) {
                    (Some(object), Some(attr)) => {
                        let object = match self.narrowed_object(object, scope) {
                            Some(narrowed) => narrowed,
                            None => self.chain(object, scope),
                        };
                        Expr::Attr(Box::new(object), attr)
                    }
                    _ => Expr::Unknown,
                }
            }
            _ => self.value(node, scope),
        }
    }

    fn chain_or_value(&mut self, node: Node, scope: ScopeId) -> Expr {
        self.chain(node, scope)
    }

    /// A constant dict key: a plain string literal as its text, an integer literal as its value
    /// marked apart (`1` and `0x1` are one key, `"1"` another).
    fn constant_key(&self, node: Node) -> Option<Name> {
        if node.kind() != "integer" {
            return self.constant_string(node);
        }
        let digits = self.text(node).replace('_', "");
        let lower = digits.to_ascii_lowercase();
        let value = if let Some(hex) = lower.strip_prefix("0x") {
            i128::from_str_radix(hex, 16)
        } else if let Some(oct) = lower.strip_prefix("0o") {
            i128::from_str_radix(oct, 8)
        } else if let Some(bin) = lower.strip_prefix("0b") {
            i128::from_str_radix(bin, 2)
        } else {
            lower.parse::<i128>()
        };
        value.ok().map(|v| Name::new(&format!("{INTEGER_KEY}{v}")))
    }

    /// The value of a plain string literal (no interpolation, no concatenation).
    fn constant_string(&self, node: Node) -> Option<Name> {
        if node.kind() != "string" {
            return None;
        }
        let mut cursor = node.walk();
        if node.named_children(&mut cursor).any(|c| c.kind() == "interpolation" || c.kind() == "escape_sequence") {
            return None;
        }
        let text = self.text(node);
        let body = text.trim_start_matches(|c: char| c.is_ascii_alphabetic());
        ["\"\"\"", "'''", "\"", "'"]
            .iter()
            .find_map(|q| body.strip_prefix(q).and_then(|b| b.strip_suffix(q)))
            .map(Name::new)
    }

    fn value(&mut self, node: Node, scope: ScopeId) -> Expr {
        self.nested(Expr::Unknown, |l| l.value_inner(node, scope))
    }

    /// Runs `lower` one level deeper, or, past [`MAX_NESTING`] levels, counts the cut and gives
    /// `cut` instead. Every recursion of lowering goes through here (expressions, attribute
    /// chains, chained assignments, nested targets, statements), so that no file can exhaust the
    /// stack: tree-sitter parses any depth, and a file of 10,000 chained assignment targets or
    /// attribute links (`v0 = v1 = ... = 1`) used to overflow it and kill the process.
    fn nested<R>(&mut self, cut: R, lower: impl FnOnce(&mut Self) -> R) -> R {
        if self.nesting >= MAX_NESTING {
            self.too_deep += 1;
            self.refusal(self.statement_start, "nested too deeply to index");
            return cut;
        }
        self.nesting += 1;
        let lowered = lower(self);
        self.nesting -= 1;
        lowered
    }

    fn value_inner(&mut self, node: Node, scope: ScopeId) -> Expr {
        match node.kind() {
            "identifier" | "attribute" => self.expr(node, scope),
            "call" => {
                let callee_node = node.field("function");
                let callee = callee_node.map(|f| self.chain(f, scope)).unwrap_or(Expr::Unknown);
                let callee_span = callee_node.map(span).unwrap_or((0, 0));
                let mut args = Vec::new();
                let mut keywords = Vec::new();
                if let Some(arguments) = node.field("arguments") {
                    if arguments.kind() == "generator_expression" {
                        args.push(flow_only(self.value(arguments, scope)));
                    } else {
                        args.reserve_exact(arguments.named_child_count());
                        let mut cursor = arguments.walk();
                        let children: Vec<Node> = arguments.named_children(&mut cursor).collect();
                        // After `*rest` the positions of later arguments are unknown.
                        let mut positions_known = true;
                        for arg in children {
                            match arg.kind() {
                                "keyword_argument" => {
                                    let name = arg.field("name").map(|n| Name::new(self.text(n)));
                                    let value = arg.field("value").map(|v| self.expr(v, scope));
                                    if let (Some(name), Some(value)) = (name, value) {
                                        // Only what can carry a callable or an instance flows.
                                        if is_flow_worthy(&value) {
                                            keywords.push((name, value));
                                        }
                                    }
                                }
                                "comment" => {}
                                "list_splat" | "dictionary_splat" => {
                                    // Read (the names in it are used), but it has no position:
                                    // `f(*pre, cb)` does not pass `cb` second, nor `f(**kw)` first.
                                    self.expr(arg, scope);
                                    positions_known &= arg.kind() == "dictionary_splat";
                                }
                                _ => {
                                    let value = self.expr(arg, scope);
                                    if positions_known {
                                        args.push(flow_only(value));
                                    }
                                }
                            }
                        }
                    }
                }
                self.finish_call(node, callee, callee_span, args, keywords, scope)
            }
            "subscript" => {
                let value = node.field("value").map(|v| self.expr(v, scope));
                let mut cursor = node.walk();
                let subs: Vec<Node> = node.children_by_field_name("subscript", &mut cursor).collect();
                let key = if subs.len() == 1 { self.constant_key(subs[0]) } else { None };
                let named_key = match subs.as_slice() {
                    [only] if only.kind() == "identifier" => Some(Expr::Name(Name::new(self.text(*only)))),
                    _ => None,
                };
                // `seq[a:b]`: a slice (see `Expr::Slice`).
                let slice_start = match subs.as_slice() {
                    [only] if only.kind() == "slice" => Some(self.slice_start(*only)),
                    _ => None,
                };
                for s in subs {
                    self.expr(s, scope);
                }
                if let Some(start) = slice_start {
                    return match value {
                        Some(v) => Expr::Slice(Box::new(v), start),
                        None => Expr::Unknown,
                    };
                }
                match (value, key, named_key) {
                    (Some(v), Some(key), _) => Expr::Item(Box::new(v), key),
                    (Some(v), None, Some(name)) => Expr::ItemAt(Box::new(v), Box::new(name)),
                    // A key that is neither a constant nor a name (`t[i + 1]`, `t[h.k]`): an
                    // item under a key nothing knows. Not `Subscript`, which stands for an
                    // element of what iterating gives (`for a, b in x`, `*rest`, `yield from`).
                    (Some(v), None, None) => Expr::ItemAt(Box::new(v), Box::new(Expr::Unknown)),
                    (None, ..) => Expr::Unknown,
                }
            }
            "parenthesized_expression" => match node.named_child(0) {
                Some(inner) => self.expr(inner, scope),
                None => Expr::Unknown,
            },
            "list" | "tuple" | "set" | "expression_list" | "pattern_list" => {
                let kind = match node.kind() {
                    "list" => ContainerKind::List,
                    "set" => ContainerKind::Set,
                    _ => ContainerKind::Tuple,
                };
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let elements =
                    children.into_iter().filter(|c| c.kind() != "comment").map(|c| self.expr(c, scope)).collect();
                Expr::Container(kind, elements)
            }
            "dictionary" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut values = Vec::new();
                let mut keyed = Vec::new();
                let mut all_constant = true;
                for child in children {
                    if child.kind() == "pair" {
                        let key = child.field("key").and_then(|k| self.constant_key(k));
                        if let Some(k) = child.field("key") {
                            self.expr(k, scope);
                        }
                        if let Some(v) = child.field("value") {
                            let value = self.expr(v, scope);
                            match key {
                                Some(key) => keyed.push((key, value.clone())),
                                None => all_constant = false,
                            }
                            values.push(value);
                        }
                    } else if child.kind() != "comment" {
                        all_constant = false;
                        self.expr(child, scope);
                    }
                }
                if all_constant && !keyed.is_empty() {
                    Expr::Keyed(keyed)
                } else {
                    Expr::Container(ContainerKind::Dict, values)
                }
            }
            "lambda" => {
                let parent = self.owner_def(scope);
                let header_end = node
                    .field("parameters")
                    .map_or(node.start_byte() + "lambda".len(), |p| p.end_byte())
                    .min(node.end_byte());
                self.defs.push(Def {
                    kind: DefKind::Lambda,
                    // Named once all lambdas are known (`name_lambdas`).
                    name: Name::new("<lambda>"),
                    path: Name::new("<lambda>"),
                    parent,
                    body: None,
                    start_line: node.start_position().row as u32 + 1,
                    end_line: node.end_position().row as u32 + 1,
                    start_byte: node.start_byte() as u32,
                    end_byte: node.end_byte() as u32,
                    header: Some((node.start_byte() as u32, header_end as u32)),
                    docstring: None,
                    decorators: Box::default(),
                    return_type: None,
                    conditional: self.conditional_depth > 0,
                });
                let def = (self.defs.len() - 1) as DefId;
                let inner = self.new_scope(ScopeKind::Anonymous, scope, Some(def));
                self.defs[def as usize].body = Some(inner);
                if let Some(params) = node.field("parameters") {
                    self.parameters(params, scope, inner);
                }
                if let Some(body) = node.field("body") {
                    let ret = self.expr(body, inner);
                    self.scope(inner).returns.push(ret);
                }
                Expr::Lambda(inner)
            }
            "conditional_expression" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut options = Vec::new();
                for (i, child) in children.into_iter().enumerate() {
                    let e = self.expr(child, scope);
                    if i != 1 {
                        options.push(e);
                    }
                }
                Expr::Union(options)
            }
            // Chains of one operator are nested one level per operator, leftmost deepest:
            // walked down their left spine, not recursively (generated code has thousands).
            "boolean_operator" | "binary_operator" => {
                let kind = node.kind();
                let mut operands = Vec::new();
                let mut all_plus = true;
                let mut current = Some(node);
                while let Some(n) = current {
                    if n.kind() != kind {
                        operands.push(n);
                        break;
                    }
                    all_plus &= n.field("operator").is_some_and(|o| o.kind() == "+");
                    operands.extend(n.field("right"));
                    current = n.field("left");
                }
                operands.reverse();
                let values: Vec<Expr> = operands.into_iter().map(|n| self.expr(n, scope)).collect();
                if kind == "boolean_operator" {
                    // `a or b` is one of them.
                    return Expr::Union(values);
                }
                // `steps + [f]`: with a literal list or tuple among the operands, `+` joins
                // sequences; the result has every operand's elements. Otherwise `a + b` is a new
                // value of unknown type (a number, a string, ...).
                let joined = values.iter().find_map(|v| match v {
                    Expr::Container(kind @ (ContainerKind::List | ContainerKind::Tuple), _) => Some(*kind),
                    _ => None,
                });
                match joined {
                    Some(kind) if all_plus => {
                        Expr::Container(kind, values.into_iter().map(|v| Expr::Subscript(Box::new(v))).collect())
                    }
                    _ => Expr::Unknown,
                }
            }
            "await" => match node.named_child(0) {
                Some(inner) => self.expr(inner, scope),
                None => Expr::Unknown,
            },
            "string" | "concatenated_string" => {
                self.walk_children(node, scope);
                let text = self.text(node);
                let prefix: String = text.chars().take_while(|c| c.is_ascii_alphabetic()).collect();
                if text.starts_with('`') {
                    self.refuse_python2(node, "Python 2 backquotes");
                } else if prefix.to_ascii_lowercase().contains("ur") {
                    self.refuse_python2(node, "a Python 2 `ur` string prefix");
                }
                if prefix.contains(['b', 'B']) {
                    Expr::Literal("bytes")
                } else {
                    self.constant_key(node).map(Expr::Constant).unwrap_or(Expr::Literal("str"))
                }
            }
            "integer" => {
                let text = self.text(node);
                if text.ends_with(['l', 'L']) {
                    self.refuse_python2(node, "a Python 2 long integer (`10L`)");
                } else if text.ends_with(['j', 'J']) {
                    // An imaginary literal: `0777j` is Python 3.
                } else if text.len() > 1
                    && text.starts_with('0')
                    && text[1..].trim_start_matches('_').starts_with(|c: char| c.is_ascii_digit())
                {
                    // `00` and `0_0` are zero; `0777`, `0_7` and `09` are Python 2 octal (or no
                    // number at all).
                    if text.bytes().any(|b| b != b'0' && b != b'_') {
                        self.refuse_python2(node, "a Python 2 octal integer (`0777`)");
                    }
                }
                self.constant_key(node).map(Expr::Constant).unwrap_or(Expr::Literal("int"))
            }
            "float" => Expr::Literal("float"),
            "true" | "false" => Expr::Literal("bool"),
            "none" => Expr::Literal("NoneType"),
            "list_comprehension" | "set_comprehension" | "dictionary_comprehension" | "generator_expression" => {
                self.comprehension(node, scope)
            }
            "named_expression" => {
                let value = node.field("value").map(|v| self.expr(v, scope)).unwrap_or(Expr::Unknown);
                if let Some(name) = node.field("name") {
                    // `:=` in a comprehension binds in the scope around it (PEP 572); at module
                    // or class level it defines a variable unit like any assignment.
                    let mut target_scope = scope;
                    while self.scopes[target_scope as usize].kind == ScopeKind::Anonymous
                        && self.scopes[target_scope as usize].def.is_none()
                    {
                        match self.scopes[target_scope as usize].parent {
                            Some(p) => target_scope = p,
                            None => break,
                        }
                    }
                    // What the value reads through the comprehension's own names means nothing
                    // outside it.
                    let bound_inside = |n: &str| {
                        let mut s = scope;
                        while s != target_scope {
                            if self.scopes[s as usize].bindings.iter().any(|(b, _)| b.as_str() == n) {
                                return true;
                            }
                            match self.scopes[s as usize].parent {
                                Some(p) => s = p,
                                None => break,
                            }
                        }
                        false
                    };
                    let kept = if target_scope != scope && mentions_name(&value, &bound_inside) {
                        Expr::Unknown
                    } else {
                        value.clone()
                    };
                    self.bind_target(name, Binding::Value(kept), target_scope, Some(node));
                }
                value
            }
            "yield" => {
                let values = self.named_exprs(node, scope);
                let is_from = {
                    let mut cursor = node.walk();
                    node.children(&mut cursor).any(|c| c.kind() == "from")
                };
                for v in values {
                    let v = if is_from { Expr::Subscript(Box::new(v)) } else { v };
                    self.scope(scope).yields.push(v);
                }
                Expr::Unknown
            }
            "interpolation" => {
                self.walk_children(node, scope);
                Expr::Unknown
            }
            "comparison_operator" => {
                if node.children(&mut node.walk()).any(|c| c.kind() == "<>") {
                    self.refuse_python2(node, "the Python 2 operator `<>`");
                }
                self.walk_children(node, scope);
                Expr::Unknown
            }
            _ => {
                self.walk_children(node, scope);
                Expr::Unknown
            }
        }
    }

    /// A `case` pattern: names it captures are bound (`case [x, *rest]`, `case {"k": v}`,
    /// `case Point() as p`: `p` is a `Point`), dotted names are values it reads (`case
    /// Color.RED`), and a class pattern's class is read (`case Point(x=0)`).
    fn pattern(&mut self, node: Node, scope: ScopeId) {
        match node.kind() {
            "dotted_name" => {
                let chain = self.dotted(node);
                match &chain {
                    Expr::Name(n) if n == "_" => {}
                    Expr::Name(n) => {
                        let name = n.to_string();
                        self.bind(scope, &name, Binding::Value(Expr::Unknown));
                    }
                    _ => self.access(scope, chain, line(node), false),
                }
            }
            "class_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for (i, child) in children.into_iter().enumerate() {
                    if i == 0 && child.kind() == "dotted_name" {
                        let class = self.dotted(child);
                        self.access(scope, class, line(child), false);
                    } else {
                        self.pattern(child, scope);
                    }
                }
            }
            "as_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut value = Expr::Unknown;
                for child in children {
                    if matches!(child.kind(), "identifier" | "as_pattern_target") {
                        let alias = child.named_child(0).filter(|c| c.kind() == "identifier").unwrap_or(child);
                        let name = self.text(alias).to_string();
                        self.bind(scope, &name, Binding::Value(value.clone()));
                    } else {
                        // `case Point() as p`: `p` is an instance of the class matched.
                        value = match child.kind() {
                            "case_pattern" => child
                                .named_child(0)
                                .filter(|c| c.kind() == "class_pattern")
                                .and_then(|c| c.named_child(0))
                                .filter(|c| c.kind() == "dotted_name")
                                .map(|c| Expr::Instance(Box::new(self.dotted(c))))
                                .unwrap_or(Expr::Unknown),
                            _ => Expr::Unknown,
                        };
                        self.pattern(child, scope);
                    }
                }
            }
            "splat_pattern" => {
                if let Some(name) = node.named_child(0).filter(|c| c.kind() == "identifier") {
                    let name = self.text(name).to_string();
                    if name != "_" {
                        self.bind(scope, &name, Binding::Value(Expr::Unknown));
                    }
                }
            }
            // `Point(x=px)`: the keyword names an attribute, the pattern after it may capture.
            "keyword_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children.into_iter().skip(1) {
                    self.pattern(child, scope);
                }
            }
            "case_pattern" | "list_pattern" | "tuple_pattern" | "union_pattern" | "dict_pattern" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    self.pattern(child, scope);
                }
            }
            // Literals, `None`, strings: nothing to bind or read.
            _ => {}
        }
    }

    /// A `def` or `class` without a statement in its body (`def a():` followed by `def b():`
    /// at the same indentation, half-typed): Python rejects it, tree-sitter accepts it without an
    /// error node. It counts as a parse error of the file.
    fn check_body(&mut self, definition: Node, body: Option<Node>) {
        // Already counted by tree-sitter's own error and missing nodes.
        if definition.has_error() {
            return;
        }
        let has_statement = body.is_some_and(|b| {
            let mut cursor = b.walk();

            b.named_children(&mut cursor).any(|c| c.kind() != "comment")
        });
        if !has_statement {
            self.empty_bodies += 1;
            if !self.repaired {
                self.refusal(definition.start_byte(), "a block with no statement");
            }
        }
    }

    /// `a.b.c` written as a `dotted_name` node, as the attribute chain it reads.
    fn dotted(&self, node: Node) -> Expr {
        let mut cursor = node.walk();
        let mut chain: Option<Expr> = None;
        for part in node.named_children(&mut cursor).filter(|c| c.kind() == "identifier") {
            let name = Name::new(self.text(part));
            chain = Some(match chain {
                None => Expr::Name(name),
                Some(base) => Expr::Attr(Box::new(base), name),
            });
        }
        chain.unwrap_or(Expr::Unknown)
    }

    fn walk_children(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        for child in children {
            match child.kind() {
                "comment" | "string_start" | "string_content" | "string_end" | "escape_sequence" => {}
                kind if is_statement_like(kind) => self.statement(child, scope),
                _ => {
                    self.expr(child, scope);
                }
            }
        }
    }

    fn comprehension(&mut self, node: Node, scope: ScopeId) -> Expr {
        let inner = self.new_scope(ScopeKind::Anonymous, scope, None);
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut first_clause = true;
        for child in &children {
            match child.kind() {
                "for_in_clause" => {
                    // The first iterable is evaluated in the enclosing scope.
                    let eval_scope = if first_clause { scope } else { inner };
                    first_clause = false;
                    let mut c2 = child.walk();
                    let rights: Vec<Node> = child.children_by_field_name("right", &mut c2).collect();
                    let mut iter = Expr::Unknown;
                    for r in rights {
                        iter = self.expr(r, eval_scope);
                        let is_async = child.child(0).is_some_and(|c| c.kind() == "async");
                        self.scope(eval_scope).iterations.push((iter.clone(), line(r), is_async));
                    }
                    if let Some(left) = child.field("left") {
                        self.bind_target(left, Binding::Iter(iter), inner, None);
                    }
                }
                "if_clause" => {
                    let mut c2 = child.walk();
                    let conds: Vec<Node> = child.named_children(&mut c2).collect();
                    for c in conds {
                        self.expr(c, inner);
                    }
                }
                _ => {}
            }
        }
        let body = node.field("body");
        let element = match body {
            Some(b) if b.kind() == "pair" => {
                if let Some(k) = b.field("key") {
                    self.expr(k, inner);
                }
                b.field("value").map(|v| self.expr(v, inner)).unwrap_or(Expr::Unknown)
            }
            Some(b) => self.expr(b, inner),
            None => Expr::Unknown,
        };
        let kind = match node.kind() {
            "set_comprehension" => ContainerKind::Set,
            "dictionary_comprehension" => ContainerKind::Dict,
            _ => ContainerKind::List,
        };
        Expr::Container(kind, vec![element])
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

/// The attribute `type(obj)` is lowered to: not an identifier, so no source names it.
pub(crate) const TYPE_OF: &str = "type()";

/// The builtins whose calls lowering reads a value from: those [`iteration_view`] reads,
/// `property` (see [`Lowerer::property_value`]) and `type` (`type(obj)`, see [`TYPE_OF`]).
const VALUE_BUILTINS: [&str; 10] =
    ["sorted", "reversed", "iter", "tuple", "frozenset", "filter", "enumerate", "zip", "property", "type"];

/// Those of [`VALUE_BUILTINS`] the file binds a name to, anywhere: a function or class
/// definition (not a method), an assignment or loop target, an import, a parameter, a walrus, a
/// `global`. A call of such a name may be the file's own function, so it is not read as the
/// builtin's (coarse on purpose: the file's calls of that name keep only their own value). Using
/// the builtin as a value (`isinstance(x, tuple)`) binds nothing.
fn rebound_value_builtins(root: Node, src: &str) -> FxHashSet<&'static str> {
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = FxHashSet::default();
    // Each occurrence of the word in the text, looked up in the tree, instead of a walk over
    // every node (django's cold index read 2.58 s either way, medians of five).
    for builtin in VALUE_BUILTINS {
        for (at, _) in src.match_indices(builtin) {
            let end = at + builtin.len();
            let whole_word = !src[..at].ends_with(is_word) && !src[end..].starts_with(is_word);
            let Some(node) = root.descendant_for_byte_range(at, end).filter(|_| whole_word) else { continue };
            if node.kind() == "identifier" && node.start_byte() == at && node.end_byte() == end && binds_name(node) {
                out.insert(builtin);
                break;
            }
        }
    }
    out
}

/// Whether identifier `node` is where a statement binds its name.
fn binds_name(node: Node) -> bool {
    let Some(parent) = node.parent() else { return false };
    let is_field = |field: &str| parent.child_by_field_name(field) == Some(node);
    match parent.kind() {
        // A method binds a name of its class, not one the module's calls read.
        "function_definition" => {
            is_field("name") && parent.parent().and_then(|b| b.parent()).is_none_or(|c| c.kind() != "class_definition")
        }
        "class_definition" => is_field("name"),
        "assignment" | "augmented_assignment" | "for_statement" | "for_in_clause" => is_field("left"),
        "pattern_list" | "tuple_pattern" | "list_pattern" | "list_splat_pattern" | "dictionary_splat_pattern" => true,
        "parameters" | "lambda_parameters" | "typed_parameter" | "as_pattern_target" => true,
        "default_parameter" | "typed_default_parameter" | "named_expression" => is_field("name"),
        "aliased_import" => is_field("alias"),
        "global_statement" | "nonlocal_statement" => true,
        // `import zip` / `from m import zip`: a one-part dotted name of the statement.
        "dotted_name" => {
            parent.named_child_count() == 1
                && parent.parent().is_some_and(|statement| match statement.kind() {
                    "import_statement" => true,
                    "import_from_statement" => statement.child_by_field_name("module_name") != Some(parent),
                    _ => false,
                })
        }
        _ => false,
    }
}

/// What iterating the result of a builtin that iterates over its arguments gives, as a list of
/// those elements: `enumerate(xs)` pairs of an `int` and an element of `xs`, `zip(a, b)` pairs of
/// their elements, `sorted(xs)`, `reversed(xs)`, `iter(xs)`, `tuple(xs)`, `frozenset(xs)` and
/// `filter(f, xs)` the elements of `xs`. The call keeps its own value beside it (the builtin's
/// result type), so `for i, x in enumerate(self.items)` gives `x` what `self.items` holds. (`list`
/// and `set` are containers of their own: see [`Lowerer::container_mutation`].) `sorted` counts
/// only with a `key=`: a container's elements are, for a dict, its values, where iterating it
/// gives its keys, and `sorted(commands)` of a dict is how its keys are listed in order, while
/// objects are sorted by a key. A function of the same name defined in the file would only add
/// the argument's elements.
fn iteration_view(callee: &Expr, args: &[Expr], sorted_by_key: bool) -> Option<Expr> {
    let Expr::Name(name) = callee else { return None };
    let element = |xs: &Expr| (*xs != Expr::Unknown).then(|| Expr::Subscript(Box::new(xs.clone())));
    let list_of = |item: Expr| Expr::Container(ContainerKind::List, vec![item]);
    match (name.as_str(), args) {
        ("sorted", [xs, ..]) if sorted_by_key => element(xs).map(list_of),
        ("reversed" | "iter" | "tuple" | "frozenset", [xs, ..]) => element(xs).map(list_of),
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
fn case_classes<'s>(pattern: Node, src: &'s str) -> Vec<&'s str> {
    let mut node = pattern;
    loop {
        match node.kind() {
            "case_pattern" | "as_pattern" => match node.named_child(0) {
                Some(inner) => node = inner,
                None => return Vec::new(),
            },
            "class_pattern" => {
                return node
                    .named_child(0)
                    .filter(|n| n.kind() == "dotted_name")
                    .and_then(|n| src.get(n.byte_range()))
                    .into_iter()
                    .collect();
            }
            "union_pattern" => {
                let mut cursor = node.walk();
                let mut out = Vec::new();
                for alternative in node.named_children(&mut cursor) {
                    let classes = case_classes(alternative, src);
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
        if n.kind() == "identifier" && src.get(n.start_byte()..n.end_byte()) == Some(name) {
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
    match node.kind() {
        "list" | "tuple" | "parenthesized_expression" => {
            let mut out = Vec::new();
            let mut cursor = node.walk();
            for child in node.named_children(&mut cursor) {
                match child.kind() {
                    "string" => {
                        let s = clean_docstring(lowerer.text(child));
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

/// Strips a string literal's prefix and quotes and dedents it like `inspect.cleandoc`.
pub fn clean_docstring(literal: &str) -> String {
    let body = literal.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    // A literal still being typed has no closing quotes yet (see `repair`).
    let body = ["\"\"\"", "'''", "\"", "'"]
        .iter()
        .find_map(|q| body.strip_prefix(q).map(|b| b.strip_suffix(q).unwrap_or(b)))
        .unwrap_or(body);
    let mut lines = body.lines();
    let first = lines.next().unwrap_or("").trim().to_string();
    let rest: Vec<&str> = lines.collect();
    let indent =
        rest.iter().filter(|l| !l.trim().is_empty()).map(|l| l.len() - l.trim_start().len()).min().unwrap_or(0);
    let mut out = vec![first];
    out.extend(rest.iter().map(|l| l.get(indent..).unwrap_or("").trim_end().to_string()));
    while out.last().is_some_and(|l| l.is_empty()) {
        out.pop();
    }
    while out.first().is_some_and(|l| l.is_empty()) {
        out.remove(0);
    }
    out.join("\n")
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
        // assignment recursed per target, an attribute chain per link, a nested target per level).
        let cases = [
            format!("{}1\n", (0..10_000).map(|i| format!("v{i} = ")).collect::<String>()),
            format!("x = a{}\n", ".b".repeat(10_000)),
            format!("{}a,{}) = b\n", "(".repeat(10_000), "),".repeat(9_999)),
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
    }

    #[test]
    fn python_2_forms_are_flagged_and_python_3_look_alikes_are_not() {
        // Each refused by Python 3's `ast.parse`, accepted by tree-sitter.
        for python2 in [
            "raise E, 'message'\n",
            "x = `y`\n",
            "x = 1 <> 2\n",
            "x = 0777\n",
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
