//! Recovery from the syntax errors that hide the rest of a file: an unclosed bracket, a
//! compound statement's header typed without its colon, a triple-quoted string not yet closed,
//! and a statement dedented between two levels.
//!
//! A half-typed call (`x = foo(` while the user is still typing) makes tree-sitter read every
//! later line as part of the call: the file's later functions and classes vanish from its tree
//! until the bracket is closed. An editor saves such states all the time, and a graph that loses
//! half a file on every keystroke is of no use to anyone asking "who calls X" meanwhile.
//!
//! Python's own rule finds most such errors: inside brackets, a line can never start with a
//! keyword that only begins a statement (`def`, `class`, `return`, `import`, ...). Where one
//! does, the brackets still open there were never closed. So were those open where a line
//! starts as far left as the statement that opened them (the next assignment of a class body
//! after `name = models.CharField(`), and those open at the end of the file.
//! [`close_unclosed_brackets`] replaces each of them by a space. Offsets and lines are unchanged, so everything lowered from the repaired text points
//! at the original one. Only files whose tree has errors are looked at, and the repair is only
//! used when its tree has fewer errors (see `lower::lower_tree`).
//!
//! A header without its colon (`def load(path)` or `class Cache(Base)` above an indented body)
//! is as common while typing, and worse: tree-sitter folds the header into an error and may take
//! a later line's name for the definition's (`class Cache(Base)` then `    def get(self):` was
//! lowered as a class named `get`). [`insert_missing_colons`] inserts the colon where the
//! header's logical line ends. Unlike the bracket repair this shifts the rest of the text by a
//! byte per colon, so it says where it inserted, and the lowered offsets are mapped back
//! (`FileSyntax::remove_insertions`). Lines are unchanged: a colon is never a newline.
//!
//! A docstring being typed (`"""Return the` and no closing quotes yet) is the worst of all: its
//! quotes pair with the next docstring's, the code between becomes a string and the next
//! docstring's text code, to the end of the file (a blanked closing line lost 46 % of django's
//! units in `bench/robustness/half_typed.py`). [`close_unclosed_triple_string`] finds the string
//! by the code it holds, and closes it on the line where its text ends (same line: lines are
//! unchanged here too).

/// Keywords that only ever begin a statement, never continue an expression inside brackets.
/// (`if`, `else`, `for`, `async for`, `from`, `lambda`, ... can: `(a\n if b else c)`,
/// `[x\n for x in y]`, `(yield\n from g)`.)
const STATEMENT_ONLY: &[&str] = &[
    "def", "class", "return", "import", "raise", "pass", "del", "global", "nonlocal", "assert", "break", "continue",
    "try", "while", "with", "elif", "except", "finally",
];

/// Which lines inside brackets show that the brackets were never closed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Closing {
    /// Lines that start with a statement-only keyword: never valid inside brackets.
    ByKeyword,
    /// Those, and lines that start with a name no further right than the statement that opened
    /// the brackets. Usually the next statement, but code that continues its brackets at the
    /// statement's own indentation (sympy does) is valid: a repair by this rule is one candidate
    /// among others, kept when it leaves the least of the file in error.
    ByIndentation,
}

/// How a bracket that was never closed is mended (a `def`/`class`/`if`... header's own
/// brackets are always closed on the header's line, followed by its colon).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Mending {
    /// Replaced by a space: nothing after it moves.
    Blank,
    /// Closed where the code before the line that showed it unclosed ends: `x = foo(a` above
    /// the next statement becomes `x = foo(a)`.
    Close,
}

/// The text with the brackets that were never closed repaired, and the offsets (in the returned
/// text, ascending) of the bytes the repair inserted; `None` when there is nothing to repair.
///
/// A bracket was never closed when a line inside it starts with a statement-only keyword, or
/// when the file ends inside it. With [`Closing::ByIndentation`], also when a line inside it
/// starts with a name (not `and`, `if`, `for`, ...) or a compound statement's header at the
/// indentation of the line that opened the outermost open bracket, as the next statement of the
/// same block does after `x = foo(`,
/// or with any word further left (`else` after `return f(`); unless the code before that line
/// ends with a comma, which asks for the continuation the line is (`f(a,` then `b=1)` at the
/// statement's indentation, as sympy writes calls). Brackets a compound statement's
/// header opened on its own line (`def load(self, ` above its body) are closed where that
/// line's code ends, followed by the header's colon, so that the body stays the body; the
/// others as `mending` says.
///
/// A one-line string still open where its line ends is closed there: tree-sitter recovers from
/// an unterminated string as badly as from an unclosed bracket.
pub(crate) fn close_unclosed_brackets(text: &str, rule: Closing, mending: Mending) -> Option<(String, Vec<u32>)> {
    let bytes = text.as_bytes();
    let mut m = Mender {
        bytes,
        mending,
        open: Vec::new(),
        header: None,
        last_code_end: 0,
        blanked: Vec::new(),
        insertions: Vec::new(),
    };
    // The indentation of the line that opened the outermost open bracket: its statement's.
    let mut statement_indent = 0;
    let mut line_is_header = false;
    let mut at_line_start = true;
    let mut line_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if at_line_start {
            if matches!(c, b' ' | b'\t' | b'\x0c') {
                i += 1;
                continue;
            }
            at_line_start = false;
            let indent = i - line_start;
            if !m.open.is_empty()
                && (starts_statement(&bytes[i..])
                    || (rule == Closing::ByIndentation
                        && m.last_code_end > 0
                        && bytes[m.last_code_end - 1] != b','
                        && ((indent < statement_indent && starts_word(&bytes[i..]))
                            || (indent == statement_indent && (starts_name(&bytes[i..]) || opens_block(bytes, i))))))
            {
                m.close_all(i);
            }
            if m.open.is_empty() {
                statement_indent = indent;
            }
            line_is_header = starts_compound(&bytes[i..]);
        }
        match c {
            b'\n' | b'#' => {
                if let Some((start, code_end @ None)) = &mut m.header {
                    *code_end = Some(code_end_before(bytes, *start, i));
                }
                if c == b'#' {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                } else {
                    at_line_start = true;
                    i += 1;
                    line_start = i;
                }
            }
            b' ' | b'\t' | b'\r' | b'\x0c' => i += 1,
            // A line continuation, or a stray backslash: the next byte is not a token start.
            b'\\' => i += 2,
            b'(' | b'[' | b'{' => {
                if m.open.is_empty() && line_is_header {
                    m.header = Some((line_start, None));
                }
                m.open.push(i);
                i += 1;
                m.last_code_end = i;
            }
            b')' | b']' | b'}' => {
                m.open.pop();
                if m.open.is_empty() {
                    m.header = None;
                }
                i += 1;
                m.last_code_end = i;
            }
            b'"' | b'\'' => {
                let (end, unterminated) = string_extent(bytes, i);
                m.last_code_end = end;
                if unterminated {
                    // Closed where its line ends, before a `\r` of a `\r\n`; an f-string's
                    // replacement fields still open are closed first (`f"{name` while typing).
                    let at = if end > i + 1 && bytes[end - 1] == b'\r' { end - 1 } else { end };
                    let mut closing = vec![b'}'; open_replacement_fields(bytes, i, at)];
                    closing.push(c);
                    m.insertions.push((at, closing));
                    m.last_code_end = at;
                }
                i = end;
            }
            _ => {
                i += 1;
                m.last_code_end = i;
            }
        }
    }
    if !m.open.is_empty() {
        m.close_all(bytes.len());
    }
    m.finish()
}

/// The state of [`close_unclosed_brackets`]'s scan that closing brackets changes.
struct Mender<'a> {
    bytes: &'a [u8],
    mending: Mending,
    /// The offsets of the open brackets, outermost first.
    open: Vec<usize>,
    /// When a compound statement's header line opened the outermost open bracket: where that
    /// line starts, and where its code ends once the line has been read.
    header: Option<(usize, Option<usize>)>,
    /// Where the last code byte read ends (blanks and comments are not code).
    last_code_end: usize,
    blanked: Vec<usize>,
    /// (offset in the text, bytes inserted before it), in the order found.
    insertions: Vec<(usize, Vec<u8>)>,
}

impl Mender<'_> {
    /// Mends every open bracket, found unclosed at offset `at`.
    fn close_all(&mut self, at: usize) {
        let mut header_brackets = 0;
        if let Some((header_start, code_end)) = self.header.take() {
            let code_end = code_end.unwrap_or_else(|| code_end_before(self.bytes, header_start, at));
            header_brackets = self.open.iter().take_while(|&&b| b < code_end).count();
            let mut closing: Vec<u8> = self.closers(&self.open[..header_brackets]);
            closing.push(b':');
            self.insertions.push((code_end, closing));
        }
        let rest = &self.open[header_brackets..];
        if !rest.is_empty() {
            match self.mending {
                Mending::Blank => self.blanked.extend_from_slice(rest),
                Mending::Close => {
                    let closing = self.closers(rest);
                    self.insertions.push((self.last_code_end, closing));
                }
            }
        }
        self.open.clear();
    }

    /// The brackets that close `open` (outermost first), innermost first.
    fn closers(&self, open: &[usize]) -> Vec<u8> {
        open.iter()
            .rev()
            .map(|&b| match self.bytes[b] {
                b'(' => b')',
                b'[' => b']',
                _ => b'}',
            })
            .collect()
    }

    fn finish(mut self) -> Option<(String, Vec<u32>)> {
        if self.blanked.is_empty() && self.insertions.is_empty() {
            return None;
        }
        let mut repaired = self.bytes.to_vec();
        for at in self.blanked {
            repaired[at] = b' ';
        }
        // A header's closers are found after the strings of the lines below it. The sort is
        // stable: what was found first at one offset (a string's quote) is inserted first.
        self.insertions.sort_by_key(|&(at, _)| at);
        with_insertions(&repaired, &self.insertions)
    }
}

/// `bytes` with each of `insertions` (offset in `bytes`, what goes before it; in offset order)
/// inserted, and the offsets of the inserted bytes in the result. Repairs only replace or
/// insert ASCII bytes, after ASCII bytes, so the result is still UTF-8 (checked, not assumed).
fn with_insertions(bytes: &[u8], insertions: &[(usize, Vec<u8>)]) -> Option<(String, Vec<u32>)> {
    let added: usize = insertions.iter().map(|(_, b)| b.len()).sum();
    let mut out: Vec<u8> = Vec::with_capacity(bytes.len() + added);
    let mut inserted = Vec::with_capacity(added);
    let mut from = 0;
    for (at, insertion) in insertions {
        out.extend_from_slice(bytes.get(from..*at)?);
        inserted.extend((out.len()..out.len() + insertion.len()).map(|offset| offset as u32));
        out.extend_from_slice(insertion);
        from = *at;
    }
    out.extend_from_slice(bytes.get(from..)?);
    String::from_utf8(out).ok().map(|text| (text, inserted))
}

/// A logical line read from its first code byte: brackets, strings and backslash continuations
/// make it span physical lines.
struct LogicalLine {
    /// The offset of the newline that ends it (or the end of the text).
    end: usize,
    /// The brackets still open at its end (the file ended inside them).
    depth: usize,
    /// Whether it has a colon outside brackets (not a `:=`).
    colon: bool,
    /// Where its last code byte ends (blanks and comments are not code).
    code_end: usize,
}

fn logical_line(bytes: &[u8], start: usize) -> LogicalLine {
    let mut line = LogicalLine { end: start, depth: 0, colon: false, code_end: start };
    let mut i = start;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' if line.depth == 0 => break,
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\\' => {
                i += 2;
                continue;
            }
            b'"' | b'\'' => {
                i = string_end(bytes, i);
                line.code_end = i;
                continue;
            }
            b'(' | b'[' | b'{' => line.depth += 1,
            b')' | b']' | b'}' => line.depth = line.depth.saturating_sub(1),
            b':' if line.depth == 0 && bytes.get(i + 1) != Some(&b'=') => line.colon = true,
            b' ' | b'\t' | b'\r' | b'\x0c' | b'\n' => {
                i += 1;
                continue;
            }
            _ => {}
        }
        i += 1;
        line.code_end = i;
    }
    line.end = i;
    line
}

/// Where the code of a line ends when its comment or newline is at `end`: before the blanks.
fn code_end_before(bytes: &[u8], line_start: usize, end: usize) -> usize {
    let mut end = end.min(bytes.len());
    while end > line_start && matches!(bytes[end - 1], b' ' | b'\t' | b'\r' | b'\x0c') {
        end -= 1;
    }
    end
}

/// Words that can continue an expression at the start of a line inside brackets.
const CONTINUING: &[&str] = &["and", "or", "not", "in", "is", "if", "else", "for", "async", "lambda", "from"];

/// Whether `line` (from its first non-blank byte) starts with a name or a decorator that cannot
/// continue an expression: what a new statement starts with far more often than an operand
/// continued at the statement's own indentation does. (A string can continue one there, as in
/// `raise E('...'` then `'...')` aligned with `raise`, so strings do not count.)
fn starts_name(line: &[u8]) -> bool {
    match line.first() {
        Some(b'@') => true,
        Some(c) if c.is_ascii_alphabetic() || *c == b'_' => {
            let word_end = line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(line.len());
            let word = &line[..word_end];
            // A prefixed string (`f"..."`, `rb'...'`) is a string.
            let prefixed_string = word.len() <= 2 && matches!(line.get(word_end), Some(b'"' | b'\''));
            !prefixed_string && !CONTINUING.iter().any(|k| k.as_bytes() == word)
        }
        _ => false,
    }
}

/// Whether the line from `start` (its first non-blank byte) is a compound statement's header:
/// it starts with one's keyword and its code ends with a colon (`for item in items:`, not the
/// `for y in z]` of a comprehension continued on its own line).
fn opens_block(bytes: &[u8], start: usize) -> bool {
    if !starts_compound(&bytes[start..]) {
        return false;
    }
    let line_end = bytes[start..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| start + p);
    // A `#` in a string on such a line is rare enough: the line is then simply not a header.
    let code_end = bytes[start..line_end].iter().position(|&c| c == b'#').map_or(line_end, |p| start + p);
    bytes[start..code_end].trim_ascii_end().ends_with(b":")
}

/// Whether `line` (from its first non-blank byte) starts with a word or a decorator: what a
/// line left of its statement's indentation starts with when it is the next block's statement
/// (`else` after `return f(`).
fn starts_word(line: &[u8]) -> bool {
    line.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_' || *c == b'@')
}

/// Keywords that begin a compound statement, whose header ends with a colon.
const COMPOUND: &[&str] = &["def", "class", "if", "elif", "else", "for", "while", "with", "try", "except", "finally"];

/// Where the code of the line starting at `start` begins: after its spaces, tabs and form feeds.
fn after_indentation(bytes: &[u8], start: usize) -> usize {
    start + bytes[start.min(bytes.len())..].iter().take_while(|c| matches!(c, b' ' | b'\t' | b'\x0c')).count()
}

/// The text with a colon inserted at the end of every compound statement header that lacks one
/// and is followed by a more indented line, and where the colons went (their offsets in the
/// returned text, ascending); `None` when no header lacks its colon.
pub(crate) fn insert_missing_colons(text: &str) -> Option<(String, Vec<u32>)> {
    let bytes = text.as_bytes();
    let mut missing: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // The start of a logical line: its indentation, then its first token.
        let line_start = i;
        i = after_indentation(bytes, i);
        let indent = i - line_start;
        let compound = starts_compound(&bytes[i..]) || starts_match_header(&bytes[i..]);
        let line = logical_line(bytes, i);
        i = line.end + 1;
        if compound && !line.colon && line.depth == 0 && next_code_indent(bytes, i).is_some_and(|next| next > indent) {
            missing.push((line.code_end.min(bytes.len()), vec![b':']));
        }
    }
    if missing.is_empty() {
        return None;
    }
    with_insertions(bytes, &missing)
}

/// The text with every `def` or `class` header that has neither its colon nor a body blanked
/// (replaced by spaces, newlines kept), or `None` when there is none. Such a header is being
/// typed above the next statement (`def ty`, or `def f(x) -> int` before its colon, above
/// `def b(x):`), and tree-sitter read the next definition as its body: the next function lost
/// its unit until the colon was typed (16 of 102 keystrokes of a new function typed above one of
/// httpx's lost it). A header with no body yet defines nothing Python could call; blanking it
/// moves no offset; so are the decorators above it, which would otherwise decorate the next
/// definition. A header followed by a more indented line is
/// [`insert_missing_colons`]'s; one with its brackets still open, [`close_unclosed_brackets`]'s.
pub(crate) fn blank_bodiless_headers(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut headers: Vec<(usize, usize)> = Vec::new();
    // The decorators just above the current line, with their indentation: they go with the
    // header (blanked alone, they would decorate the next definition).
    let mut decorators: Vec<(usize, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let line_start = i;
        i = after_indentation(bytes, i);
        let indent = i - line_start;
        if matches!(bytes.get(i), None | Some(b'\n' | b'\r' | b'#')) {
            // A blank or comment line: decorators may stand above it.
            i = bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| i + p + 1);
            continue;
        }
        let definition = starts_definition(&bytes[i..]);
        let decorator = bytes[i] == b'@';
        let line = logical_line(bytes, i);
        let start = i;
        i = line.end + 1;
        if decorator {
            decorators.push((start, line.code_end.min(bytes.len()), indent));
            continue;
        }
        if definition && !line.colon && line.depth == 0 && next_code_indent(bytes, i).is_none_or(|next| next <= indent)
        {
            headers.extend(decorators.iter().filter(|d| d.2 == indent).map(|&(s, e, _)| (s, e)));
            headers.push((start, line.code_end.min(bytes.len())));
        }
        decorators.clear();
    }
    if headers.is_empty() {
        return None;
    }
    let mut out = bytes.to_vec();
    for (start, end) in headers {
        for byte in &mut out[start..end] {
            if !matches!(*byte, b'\n' | b'\r') {
                *byte = b' ';
            }
        }
    }
    String::from_utf8(out).ok()
}

/// Whether `line` (from its first non-blank byte) starts a `def`, `async def` or `class`.
fn starts_definition(line: &[u8]) -> bool {
    let word_end = line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(line.len());
    match &line[..word_end] {
        b"def" | b"class" => true,
        b"async" => {
            let rest = line[word_end..].trim_ascii_start();
            rest.starts_with(b"def") && !rest.get(3).is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        }
        _ => false,
    }
}

/// The text with the dot that ends a statement replaced by a space (`x = self.` while an
/// attribute is being picked from a completion list), or `None` when no statement ends so.
/// tree-sitter reads the next line as the attribute (`self.` then `managed = False` became one
/// assignment), and the next line's unit vanished. Offsets are unchanged. A number's dot
/// (`x = 1.`), an ellipsis and a dot inside brackets (where the line is simply continued) are
/// left alone.
pub(crate) fn blank_trailing_dots(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut dots = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        i = after_indentation(bytes, i);
        let line = logical_line(bytes, i);
        let end = line.code_end.min(bytes.len());
        if line.depth == 0 && end > i + 1 && bytes[end - 1] == b'.' {
            let before = bytes[end - 2];
            let word_start =
                bytes[..end - 1].iter().rposition(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).map_or(0, |p| p + 1);
            let number = bytes[word_start].is_ascii_digit();
            let attribute = before.is_ascii_alphanumeric() || matches!(before, b'_' | b')' | b']');
            if attribute && !number {
                dots.push(end - 1);
            }
        }
        i = line.end + 1;
    }
    if dots.is_empty() {
        return None;
    }
    let mut out = bytes.to_vec();
    for at in dots {
        out[at] = b' ';
    }
    String::from_utf8(out).ok()
}

/// The text with every statement that dedents to no enclosing block's indentation (`unindent
/// does not match any outer indentation level`) indented to the nearest enclosing level deeper
/// than its own (6 spaces between 4 and 8 become 8; 3 between 0 and 4 become 4), and where the
/// spaces went (offsets in the returned text, ascending); `None` when there is no such
/// statement. Such a line is read as part of the block it was typed in, not as a statement of
/// the outer block: tree-sitter otherwise made it, and the rest of the body, part of the class
/// or module around it. Only indentation made of spaces is looked at.
pub(crate) fn indent_stray_dedents(text: &str) -> Option<(String, Vec<u32>)> {
    let bytes = text.as_bytes();
    // (offset of the line's first code byte, the spaces inserted before it)
    let mut fixes: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut levels: Vec<usize> = vec![0];
    let mut i = 0;
    while i < bytes.len() {
        let line_start = i;
        while i < bytes.len() && bytes[i] == b' ' {
            i += 1;
        }
        let indent = i - line_start;
        let blank = matches!(bytes.get(i), None | Some(b'\n' | b'\r' | b'#'));
        let tabbed = matches!(bytes.get(i), Some(b'\t' | b'\x0c'));
        if !blank && !tabbed {
            let top = levels.last().copied().unwrap_or(0);
            if indent > top {
                levels.push(indent);
            } else if indent < top {
                let mut left = top;
                while levels.last().is_some_and(|&level| level > indent) {
                    left = levels.pop().unwrap_or(0);
                }
                if levels.last() != Some(&indent) {
                    // Between two levels: back into the block it left.
                    fixes.push((i, vec![b' '; left - indent]));
                    levels.push(left);
                }
            }
        }
        i = logical_line(bytes, i).end + 1;
    }
    if fixes.is_empty() {
        return None;
    }
    with_insertions(bytes, &fixes)
}

/// The text with each line indented with a tab, in a file indented with spaces, indented with
/// spaces where the line before it says (Python refuses such a file: `TabError`): as deep as
/// that line, or a level (4) deeper when it opens a block; and where the spaces went (offsets in
/// the returned text, ascending). tree-sitter reads a tab as eight columns, which put a line
/// typed in a deeply indented block into an outer one, and its recovery then took a top-level
/// class further down into its error (a tab put in one line of rich's `pretty.py` lost
/// `Pretty` and six more units). `None` when no line qualifies, or when tabs indent as many
/// lines as spaces do (a file indented with tabs is read as it is written).
pub(crate) fn indent_tabbed_lines(text: &str) -> Option<(String, Vec<u32>)> {
    let bytes = text.as_bytes();
    // The code lines: where each starts, where its code starts, whether it opens a block, and
    // whether a blank line came before it.
    let mut lines: Vec<(usize, usize, bool, bool)> = Vec::new();
    let mut after_blank = false;
    let mut i = 0;
    while i < bytes.len() {
        let code = after_indentation(bytes, i);
        let line = logical_line(bytes, code);
        match bytes.get(code) {
            None | Some(b'\n' | b'\r') => after_blank = true,
            Some(b'#') => {}
            Some(_) => {
                let opens = line.code_end > code && bytes[line.code_end - 1] == b':';
                lines.push((i, code, opens, after_blank));
                after_blank = false;
            }
        }
        i = line.end + 1;
    }
    let lead = |n: usize| lines.get(n).map(|&(start, code, _, _)| &bytes[start..code]);
    let tabbed = lines.iter().filter(|&&(start, code, _, _)| bytes[start..code].contains(&b'\t')).count();
    let spaced =
        lines.iter().filter(|&&(start, code, _, _)| code > start && !bytes[start..code].contains(&b'\t')).count();
    if tabbed == 0 || tabbed >= spaced {
        return None;
    }
    let mut out = bytes.to_vec();
    let mut fixes: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut levels = TabLevels::new();
    // The lines so far: the indentation each ends up with (in columns), its first word, and
    // whether it opens a block.
    let mut previous: Vec<(usize, &[u8], bool)> = Vec::new();
    for (n, &(line_start, code, opens, after_blank)) in lines.iter().enumerate() {
        let this = &bytes[line_start..code];
        let word = first_word(&bytes[code..]);
        let (mut col, mut alt) = measure(this);
        // A line Python refuses for its tabs, or a tabbed line the next line leaves for
        // spaces: one typed with a tab among lines indented with spaces. Tabs that indent a
        // block consistently (the same at any tab width) are left as they are.
        let next_spaced = lead(n + 1).is_some_and(|next| !next.is_empty() && !next.contains(&b'\t'));
        if this.contains(&b'\t')
            && (!levels.consistent(col, alt) || next_spaced)
            && let Some(&(before, _, header)) = previous.last()
        {
            // As deep as the line before, or a level deeper below a header; a clause that
            // continues a statement (`else`, `except`) where that statement begins; a
            // definition after a blank line beside the definition before it (the next method
            // of a class, not one nested in the last method's body). The tab and the spaces
            // with it become spaces, and more are inserted where that is not enough.
            let opener = clause_opener(word).and_then(|openers| {
                previous.iter().rev().find(|(at, w, _)| *at < before && openers.contains(w)).map(|(at, _, _)| *at)
            });
            let sibling = (after_blank && !header && DEFINES.contains(&word))
                .then(|| previous.iter().rev().find(|(at, w, _)| *at <= before && DEFINES.contains(w)).map(|p| p.0))
                .flatten();
            let wanted = opener.or(sibling).unwrap_or(before + if header { 4 } else { 0 });
            if wanted >= this.len() {
                for b in &mut out[line_start..code] {
                    *b = b' ';
                }
                if wanted > this.len() {
                    fixes.push((code, vec![b' '; wanted - this.len()]));
                }
                (col, alt) = (wanted, wanted);
            }
        }
        levels.take(col, alt);
        previous.push((col, word, opens));
    }
    if fixes.is_empty() && out == bytes {
        return None;
    }
    with_insertions(&out, &fixes)
}

/// A line's indentation measured as CPython's tokenizer measures it: with tabs to the next
/// multiple of 8, and with tabs of width 1 (a form feed starts over).
fn measure(lead: &[u8]) -> (usize, usize) {
    let (mut col, mut alt) = (0usize, 0usize);
    for &b in lead {
        match b {
            b'\t' => {
                col = (col / 8 + 1) * 8;
                alt += 1;
            }
            b'\x0c' => (col, alt) = (0, 0),
            _ => {
                col += 1;
                alt += 1;
            }
        }
    }
    (col, alt)
}

/// The indentation levels open at a line, by both of [`measure`]'s measures.
struct TabLevels {
    levels: Vec<(usize, usize)>,
}

impl TabLevels {
    fn new() -> TabLevels {
        TabLevels { levels: vec![(0, 0)] }
    }

    /// Whether a line indented `(col, alt)` means the same whatever a tab's width: both measures
    /// agree on whether it indents, stays at, or dedents to a level. (A dedent to no level is
    /// another error, the lowering's own.)
    fn consistent(&self, col: usize, alt: usize) -> bool {
        let &(top, alt_top) = self.levels.last().unwrap_or(&(0, 0));
        if col == top {
            return alt == alt_top;
        }
        if col > top {
            return alt > alt_top;
        }
        match self.levels.iter().rev().find(|(level, _)| *level <= col) {
            Some(&(level, alt_level)) if level == col => alt == alt_level,
            _ => true,
        }
    }

    /// The levels after a line indented `(col, alt)`.
    fn take(&mut self, col: usize, alt: usize) {
        while self.levels.len() > 1 && self.levels.last().is_some_and(|(level, _)| col < *level) {
            self.levels.pop();
        }
        if self.levels.last().is_some_and(|(level, _)| col > *level) {
            self.levels.push((col, alt));
        }
    }
}

/// Where the first line is that Python refuses for mixing tabs and spaces in a way whose
/// meaning depends on a tab's width (`TabError`), as CPython's tokenizer decides it: each
/// logical line's indentation is measured with tabs of width 8 and of width 1, and the two
/// measures must agree on whether it indents, dedents to, or stays at each level. The offset of
/// that line's first code byte; `None` for a file without such a line (most have no tab).
pub(crate) fn inconsistent_tab_line(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    if !bytes.contains(&b'\t') {
        return None;
    }
    let mut levels = TabLevels::new();
    let mut i = 0;
    while i < bytes.len() {
        let code = after_indentation(bytes, i);
        let line = logical_line(bytes, code);
        if !matches!(bytes.get(code), None | Some(b'\n' | b'\r' | b'#')) {
            let (col, alt) = measure(&bytes[i..code]);
            if !levels.consistent(col, alt) {
                return Some(code);
            }
            levels.take(col, alt);
        }
        i = line.end + 1;
    }
    None
}

/// The first word of a line (from its first code byte): letters, digits and underscores.
fn first_word(line: &[u8]) -> &[u8] {
    let end = line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(line.len());
    &line[..end]
}

/// The first words of a line that begins a definition (`@` of a decorator is no word: the line
/// after it is the definition).
const DEFINES: &[&[u8]] = &[b"def", b"class", b"async"];

/// The statements a clause continues, by the clause's keyword: `else` an `if`, `for`, `while`
/// or `try`; `except` a `try`.
fn clause_opener(word: &[u8]) -> Option<&'static [&'static [u8]]> {
    match word {
        b"elif" => Some(&[b"if", b"elif"]),
        b"else" => Some(&[b"if", b"elif", b"for", b"while", b"try", b"except"]),
        b"except" => Some(&[b"try", b"except"]),
        b"finally" => Some(&[b"try", b"except", b"else"]),
        _ => None,
    }
}

/// Where a triple-quoted string that was never closed is taken to end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum StringEnd {
    /// Before the first line of it, no further right than the line that opened it, that reads
    /// as code: a statement keyword, a block header, a decorator, an assignment or a call (a
    /// docstring typed above the body it documents).
    BeforeCode,
    /// Before the first line of it further left than the line that opened it, or as far left
    /// and starting a `def`, `class` or decorator: the next definition.
    BeforeDefinition,
}

/// The text with one triple-quoted string that was never closed closed, and where the closing
/// quotes went (offsets in the returned text, ascending); `None` when no such string is found.
///
/// A docstring being typed (`"""Return the` with no closing quotes yet) pairs its opening
/// quotes with the next docstring's: tree-sitter reads the code between them as one string and
/// the next docstring's text as code, and so on to the end of the file; most of the file's
/// definitions vanish. Such a string shows itself by what it holds: lines that read as code no
/// further right than the line that opened it (`when`). The `nth` such string (counting from
/// 0) is closed where its text ends before that line; later strings pair up again from there.
/// A legitimate string can hold code too (a test's source snippet): which string, and which
/// rule, is for the caller to decide by parsing each candidate.
pub(crate) fn close_unclosed_triple_string(text: &str, nth: usize, when: StringEnd) -> Option<(String, Vec<u32>)> {
    let bytes = text.as_bytes();
    let mut seen = 0;
    let mut line_start = 0;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => {
                i += 1;
                line_start = i;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            b'\\' => i += 2,
            quote @ (b'"' | b'\'') => {
                let triple = bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote);
                let (end, _) = string_extent(bytes, i);
                if !triple {
                    i = end;
                    continue;
                }
                let closed = end >= i + 6 && bytes[end - 3..end].iter().all(|&c| c == quote);
                let content_end = if closed { end - 3 } else { end };
                let opening_indent = bytes[line_start..i].iter().take_while(|&&c| matches!(c, b' ' | b'\t')).count();
                let stop = code_line_inside(bytes, i + 3, content_end, opening_indent, when);
                // Still open at the end of the file: closed where its text ends.
                let Some(close_at) = stop.or((!closed).then_some(bytes.len())) else {
                    i = end;
                    continue;
                };
                if seen < nth {
                    seen += 1;
                    i = end;
                    continue;
                }
                // After the last non-blank byte before that line (but not before the quotes).
                let mut at = close_at;
                while at > i + 3 && matches!(bytes[at - 1], b' ' | b'\t' | b'\r' | b'\n' | b'\x0c') {
                    at -= 1;
                }
                // A text ending in a quote or a backslash would swallow or escape the closing
                // quotes: a space goes between.
                let mut closing = Vec::with_capacity(4);
                if at > i + 3 && matches!(bytes[at - 1], b'\\' | b'"' | b'\'') {
                    closing.push(b' ');
                }
                closing.extend_from_slice(&[quote; 3]);
                return with_insertions(bytes, &[(at, closing)]);
            }
            _ => i += 1,
        }
    }
    None
}

/// The start of the first line in `bytes[from..to]` (a string's text, its first line excluded)
/// that `when` says the string never meant to hold, for a string opened on a line indented by
/// `indent`.
fn code_line_inside(bytes: &[u8], from: usize, to: usize, indent: usize, when: StringEnd) -> Option<usize> {
    let mut line = bytes[from..to].iter().position(|&c| c == b'\n').map(|p| from + p + 1)?;
    while line < to {
        let first = line + bytes[line..to].iter().take_while(|&&c| matches!(c, b' ' | b'\t')).count();
        let this_indent = first - line;
        let rest = &bytes[first..to];
        let blank = matches!(rest.first(), None | Some(b'\n' | b'\r'));
        if !blank {
            let defines = rest.starts_with(b"def ")
                || rest.starts_with(b"class ")
                || rest.starts_with(b"async def ")
                || (rest.starts_with(b"@") && reads_as_code(bytes, first, to));
            let hit = match when {
                StringEnd::BeforeCode => this_indent <= indent && reads_as_code(bytes, first, to),
                StringEnd::BeforeDefinition => {
                    (this_indent < indent && starts_word(rest)) || (this_indent <= indent && defines)
                }
            };
            if hit {
                return Some(line);
            }
        }
        line = match bytes[line..to].iter().position(|&c| c == b'\n') {
            Some(p) => line + p + 1,
            None => to,
        };
    }
    None
}

/// Whether the line from `start` (its first non-blank byte, before `to`) reads as a statement
/// rather than prose: a statement keyword, a block header, a decorator, or a dotted name followed
/// by an assignment, a call or a subscript (`self.x = x`, `return f(x)`, `logger.info(`).
fn reads_as_code(bytes: &[u8], start: usize, to: usize) -> bool {
    let line = &bytes[start..to];
    let line_end = line.iter().position(|&c| c == b'\n').unwrap_or(line.len());
    let this_line = line[..line_end].trim_ascii_end();
    // Where the line's code ends: prose that names a call (`validate() raises an error if`)
    // goes on in words, a call or subscript statement ends with a bracket or continues one.
    let ends_like_code = matches!(this_line.last(), Some(b')' | b']' | b'}' | b'(' | b'[' | b'{' | b',' | b'\\'));
    if let Some(decorated) = this_line.strip_prefix(b"@") {
        // `@cached_property` alone on its line, or `@override_settings(DEBUG=True)`; not
        // `@xframe_options_exempt instructs the middleware ...`.
        let name_end = decorated.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.'));
        return name_end.is_none_or(|end| end > 0 && decorated[end] == b'(' && ends_like_code);
    }
    // Prose ends its sentences with a period (`return True.`, `name='+' is kept.`); code does
    // not.
    if this_line.ends_with(b".") {
        return false;
    }
    let opens_bracket = matches!(this_line.last(), Some(b'(' | b'[' | b'{' | b'\\'));
    if starts_statement(line) || opens_block(&bytes[..to], start) || (starts_compound(line) && opens_bracket) {
        return true;
    }
    if this_line.starts_with(b"from ") && this_line.windows(8).any(|w| w == b" import ") {
        return true;
    }
    let name_end =
        line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_' || *c == b'.')).unwrap_or(line.len());
    if name_end == 0 || !(line[0].is_ascii_alphabetic() || line[0] == b'_') {
        return false;
    }
    let after = line[name_end..].trim_ascii_start();
    match after.first() {
        Some(b'(' | b'[') => name_end == line.len() - after.len() && ends_like_code,
        Some(b'=') => after.get(1) != Some(&b'='),
        // An annotated name: `_color: Optional[Color]`, `size: int = 0`; not `Note: this is`.
        Some(b':') if name_end == line.len() - after.len() => {
            let annotation = this_line.get(name_end..).unwrap_or_default();
            let annotation = annotation.trim_ascii_start().strip_prefix(b":").unwrap_or_default();
            let annotation = annotation.split(|&c| c == b'=').next().unwrap_or_default().trim_ascii();
            reads_as_type(annotation)
        }
        Some(b'+' | b'-' | b'*' | b'/' | b'|' | b'&') => after.get(1) == Some(&b'='),
        _ => false,
    }
}

/// Whether `text` reads as a type annotation (`Optional[Color]`, `Dict[str, int]`, `int | None`):
/// a name, dotted names, brackets and commas, with no two words side by side as in prose.
fn reads_as_type(text: &[u8]) -> bool {
    let starts_name = text.first().is_some_and(|c| c.is_ascii_alphabetic() || *c == b'_');
    // Blanks only around `|` and after commas.
    let blank_fits = |i: usize| {
        let before = text[..i].trim_ascii_end().last();
        let after = text[i..].trim_ascii_start().first();
        matches!(before, Some(b',' | b'|')) || after == Some(&b'|')
    };
    starts_name
        && text.iter().enumerate().all(|(i, &c)| {
            c.is_ascii_alphanumeric()
                || matches!(c, b'_' | b'.' | b'[' | b']' | b',' | b'|' | b'"' | b'\'')
                || (c == b' ' && blank_fits(i))
        })
}

/// Whether `line` (from its first non-blank byte) may be a `match` or `case` header: the soft
/// keyword, then a subject or pattern, which may start with a bracket, or after a blank with
/// anything an expression may start with (a name in any script, a number, a string, `-`, `+`,
/// `~`, `*`), not `=`, `.`, `,`, `:`, a comment or a binary operator, which make the word a name.
/// Only missing colons use this: a line of prose or code starting with these words is taken for
/// a header only when a more indented line follows it, which no statement allows.
fn starts_match_header(line: &[u8]) -> bool {
    let word_end = line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(line.len());
    if !matches!(&line[..word_end], b"match" | b"case") {
        return false;
    }
    let rest = &line[word_end..];
    let spaces = rest.iter().take_while(|c| matches!(c, b' ' | b'\t')).count();
    let (subject, spaced) = (&rest[spaces..], spaces > 0);
    match subject.first() {
        Some(b'(' | b'[' | b'{') => true,
        Some(c) if spaced => !c.is_ascii() || c.is_ascii_alphanumeric() || b"_\"'-+~*".contains(c),
        _ => false,
    }
}

/// Whether `line` (from its first non-blank byte) starts with a compound statement's keyword.
fn starts_compound(line: &[u8]) -> bool {
    let word_end = line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(line.len());
    let word = &line[..word_end];
    if word == b"async" {
        let rest = line[word_end..].trim_ascii_start();
        return rest.starts_with(b"def") || rest.starts_with(b"with") || rest.starts_with(b"for");
    }
    COMPOUND.iter().any(|k| k.as_bytes() == word)
}

/// The indentation of the first line from `start` on that holds code (not blank, not only a
/// comment); `None` at the end of the text.
fn next_code_indent(bytes: &[u8], mut start: usize) -> Option<usize> {
    while start < bytes.len() {
        let i = after_indentation(bytes, start);
        match bytes.get(i) {
            None => return None,
            Some(b'\n' | b'\r' | b'#') => {
                start = bytes[i..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |p| i + p + 1);
            }
            Some(_) => return Some(i - start),
        }
    }
    None
}

/// Whether `line` (from its first non-blank byte) starts with a statement-only keyword.
fn starts_statement(line: &[u8]) -> bool {
    let word_end = line.iter().position(|c| !(c.is_ascii_alphanumeric() || *c == b'_')).unwrap_or(line.len());
    let word = &line[..word_end];
    if word == b"async" {
        // `async def` and `async with` are statements; `async for` continues a comprehension.
        let rest = line[word_end..].trim_ascii_start();
        return rest.starts_with(b"def") || rest.starts_with(b"with");
    }
    STATEMENT_ONLY.iter().any(|k| k.as_bytes() == word)
}

/// How many replacement fields (`{...}`) of the f-string whose quote is at `quote` are still
/// open at `end`; 0 for a string that is not an f-string. `{{` is a literal brace.
fn open_replacement_fields(bytes: &[u8], quote: usize, end: usize) -> usize {
    let prefix_start = bytes[..quote].iter().rposition(|c| !c.is_ascii_alphabetic()).map_or(0, |p| p + 1);
    let prefix = &bytes[prefix_start..quote];
    if prefix.len() > 2 || !prefix.iter().any(|c| matches!(c, b'f' | b'F')) {
        return 0;
    }
    let mut depth = 0usize;
    let mut i = quote + 1;
    while i < end {
        match bytes[i] {
            b'{' if depth == 0 && bytes.get(i + 1) == Some(&b'{') => i += 1,
            b'{' => depth += 1,
            b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    depth
}

/// Where the string literal opening at `start` (a quote) ends: after its closing quote, or at
/// the end of the line for an unterminated one-line string (as Python's tokenizer stops there).
fn string_end(bytes: &[u8], start: usize) -> usize {
    string_extent(bytes, start).0
}

/// [`string_end`], and whether the string is a one-line string that its line ends before it
/// is closed (`x = 'abc` while typing).
fn string_extent(bytes: &[u8], start: usize) -> (usize, bool) {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = if triple { start + 3 } else { start + 1 };
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' if !triple => return (i, true),
            q if q == quote => {
                if !triple {
                    return (i + 1, false);
                }
                if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                    return (i + 3, false);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    (bytes.len(), !triple)
}

#[cfg(test)]
mod tests {
    use super::{
        Closing, Mending, StringEnd, blank_bodiless_headers, blank_trailing_dots, close_unclosed_brackets,
        close_unclosed_triple_string, inconsistent_tab_line, indent_stray_dedents, indent_tabbed_lines,
        insert_missing_colons, reads_as_code,
    };

    #[test]
    fn a_docstring_typed_above_its_body_is_closed_before_the_body() {
        let text = "def f(x):\n    \"\"\"Return the links\n    of a header\n\n    return parse(x)\n\n\ndef g():\n    \"\"\"Doc.\"\"\"\n    return 1\n";
        let (repaired, inserted) = close_unclosed_triple_string(text, 0, StringEnd::BeforeCode).expect("repaired");
        assert_eq!(repaired, text.replace("of a header\n", "of a header\"\"\"\n"));
        let at = text.find("of a header").expect("in the text") + "of a header".len();
        assert_eq!(inserted, vec![at as u32, at as u32 + 1, at as u32 + 2]);
        // The other rule ends it before the next definition, body and all.
        let (repaired, _) = close_unclosed_triple_string(text, 0, StringEnd::BeforeDefinition).expect("repaired");
        assert_eq!(repaired, text.replace("return parse(x)\n", "return parse(x)\"\"\"\n"));
    }

    #[test]
    fn a_string_open_at_the_end_of_the_file_is_closed_where_its_text_ends() {
        let text = "x = 1\n\ndef f():\n    '''Started typing\n\n  ";
        let (repaired, _) = close_unclosed_triple_string(text, 0, StringEnd::BeforeCode).expect("repaired");
        assert_eq!(repaired, "x = 1\n\ndef f():\n    '''Started typing'''\n\n  ");
        // Text that ends in a quote or a backslash is kept apart from the closing quotes.
        let (repaired, _) = close_unclosed_triple_string("s = '''it's \"", 0, StringEnd::BeforeCode).expect("repaired");
        assert_eq!(repaired, "s = '''it's \" '''");
    }

    #[test]
    fn closed_strings_are_left_alone_unless_they_hold_code_left_of_their_start() {
        let prose = "def f():\n    \"\"\"\n    validate() raises an error if the node is missing.\n    Note: this is slow\n    return True.\n    @decorator is applied too\n    \"\"\"\n    return 1\n";
        for when in [StringEnd::BeforeCode, StringEnd::BeforeDefinition] {
            assert_eq!(close_unclosed_triple_string(prose, 0, when), None, "{when:?}");
        }
        // A test's code snippet, indented deeper than the line that opened it, is not code left of it.
        let snippet = "def test():\n    src = '''\n        def g():\n            return h()\n    '''\n";
        assert_eq!(close_unclosed_triple_string(snippet, 0, StringEnd::BeforeDefinition), None);
    }

    #[test]
    fn lines_that_read_as_code_and_lines_of_prose() {
        let code = [
            "return parse(x)",
            "self.timeout = timeout",
            "_color: Optional[Color]",
            "size: int | None = None",
            "from .models import User",
            "import os",
            "@cached_property",
            "@override_settings(DEBUG=True)",
            "if (",
            "for item in items:",
            "logger.info(",
            "total += 1",
        ];
        for line in code {
            assert!(reads_as_code(line.as_bytes(), 0, line.len()), "{line}");
        }
        let prose = [
            "Return the links of a header",
            "validate() raises an error if there's a dummy node",
            "related_name='+' should be retrieved correctly.",
            "return True.",
            "Note: this is slow",
            "@xframe_options_exempt instructs the middleware",
            "Args:",
            ">>> f(1)",
        ];
        for line in prose {
            assert!(!reads_as_code(line.as_bytes(), 0, line.len()), "{line}");
        }
    }

    #[test]
    fn a_line_indented_with_a_tab_among_spaces_goes_where_the_line_before_it_says() {
        // Below a header, a level deeper; below a body line, as deep; a clause where its
        // statement begins.
        let text = "def f(x):\n    if x:\n\treturn g(\n            )\n    else:\n        y = 1\n\tz = 2\n\telse_ = 3\n    try:\n        pass\n\texcept E:\n        pass\n";
        let (repaired, inserted) = indent_tabbed_lines(text).expect("repaired");
        assert_eq!(
            repaired,
            "def f(x):\n    if x:\n        return g(\n            )\n    else:\n        y = 1\n        z = 2\n        else_ = 3\n    try:\n        pass\n    except E:\n        pass\n"
        );
        // Seven spaces after each of the first three tabs (made a space), three after the last.
        assert_eq!(inserted.len(), 7 * 3 + 3, "{inserted:?}");
        // A block indented with tabs consistently (the same at any tab width) is left as it is.
        let block = "class A:\n    def x(self):\n        return 1\n\n\nclass T:\n\tdef a(self):\n\t\treturn 1\n\n\tdef b(self):\n\t\treturn 2\n\n\ndef broken()\n    return 3\n";
        assert_eq!(indent_tabbed_lines(block), None);
        // A definition after a blank line goes beside the one before it, not into its body.
        let text = "class A:\n    def f(self):\n        return 1\n\n\tdef g(self):\n        return 2\n";
        let (repaired, _) = indent_tabbed_lines(text).expect("repaired");
        assert_eq!(repaired, text.replace("\tdef g", "    def g"));
        // A file indented with tabs is read as written; so is one without tabs.
        for left in ["def f():\n\tif x:\n\t\tpass\n\treturn 1\n", "def f():\n    pass\n"] {
            assert_eq!(indent_tabbed_lines(left), None, "{left}");
        }
    }

    /// As CPython's tokenizer decides `TabError` (checked against `compile` on 93 files: every
    /// indentation turned into tabs, one line's eight spaces into a tab, four into four spaces
    /// and a tab).
    #[test]
    fn tabs_and_spaces_whose_meaning_depends_on_a_tabs_width_are_found() {
        // A tab where eight spaces indent the line before: the same column at width 8 only.
        let text = "class A:\n    def f(self):\n        x = 1\n\ty = 2\n";
        assert_eq!(inconsistent_tab_line(text), text.find("y = 2"));
        // Spaces then a tab: deeper by both measures is fine, by one only is not.
        assert!(inconsistent_tab_line("if a:\n        b = 1\n        if c:\n            \td = 2\n").is_none());
        assert!(inconsistent_tab_line("if a:\n    \tb = 1\n        c = 2\n").is_some());
        // Consistent files: tabs throughout, spaces throughout, tabs inside strings and brackets.
        for fine in [
            "def f():\n\tif x:\n\t\treturn 1\n\treturn 2\n",
            "def f():\n    return 1\n",
            "def f():\n    s = '''\n\tnot indentation\n'''\n    g(1,\n\t2)\n",
        ] {
            assert_eq!(inconsistent_tab_line(fine), None, "{fine:?}");
        }
    }

    #[test]
    fn a_statement_dedented_between_two_levels_goes_back_into_its_block() {
        let text = "class A:\n    def m(self):\n        x = (1,\n  2)\n      y = 2\n        return x\n\n    def n(self):\n        pass\n";
        let (repaired, inserted) = indent_stray_dedents(text).expect("repaired");
        assert_eq!(repaired, text.replace("\n      y = 2", "\n        y = 2"));
        assert_eq!(inserted, vec![53, 54]);
        for valid in ["if a:\n    b()\nelse:\n    c()\n", "def f():\n\tpass\n", "x = (\n  1)\n", "s = '''\n  a\n'''\n"]
        {
            assert_eq!(indent_stray_dedents(valid), None, "{valid}");
        }
    }

    /// The repaired text of a repair that inserts nothing.
    fn closed(text: &str) -> Option<String> {
        close_unclosed_brackets(text, Closing::ByIndentation, Mending::Blank).map(|(repaired, inserted)| {
            assert_eq!(inserted, Vec::<u32>::new());
            repaired
        })
    }

    #[test]
    fn a_bracket_a_header_left_open_above_its_body_is_closed_with_the_colon_on_its_line() {
        let text = "class K(Base\n    def load(self, path  # typing\n        x = [1,\n        return x\n";
        let (repaired, inserted) =
            close_unclosed_brackets(text, Closing::ByIndentation, Mending::Blank).expect("repaired");
        // The list opened in the body is not the header's: it is blanked.
        assert_eq!(
            repaired,
            "class K(Base):\n    def load(self, path):  # typing\n        x =  1,\n        return x\n"
        );
        assert_eq!(inserted, vec![12, 13, 38, 39]);
        // The header's brackets are closed innermost first.
        let text = "def f(a=g(1, [2\n    y = 1\n";
        let (repaired, _) = close_unclosed_brackets(text, Closing::ByIndentation, Mending::Blank).expect("repaired");
        assert_eq!(repaired, "def f(a=g(1, [2])):\n    y = 1\n");
    }

    #[test]
    fn brackets_can_be_closed_where_the_code_before_the_next_statement_ends() {
        let text = "x = foo(a, [b\n\n# note\ny = 1\nif f(y, \"z\n    pass\n";
        let (repaired, inserted) =
            close_unclosed_brackets(text, Closing::ByIndentation, Mending::Close).expect("repaired");
        assert_eq!(repaired, "x = foo(a, [b])\n\n# note\ny = 1\nif f(y, \"z\"):\n    pass\n");
        assert_eq!(inserted, vec![13, 14, 40, 41, 42]);
    }

    #[test]
    fn a_header_without_its_colon_gets_one_where_its_logical_line_ends() {
        let text = "def a(x) -> int  # note\n    return x\n\nclass C(\n    Base)\n\n    y = 1\n";
        let (repaired, inserted) = insert_missing_colons(text).expect("repaired");
        assert_eq!(repaired, "def a(x) -> int:  # note\n    return x\n\nclass C(\n    Base):\n\n    y = 1\n");
        assert_eq!(inserted, vec![15, 57]);
    }

    #[test]
    fn a_match_or_case_header_without_its_colon_gets_one() {
        let text = "match command.split()\n    case [\"go\", d]\n        go(d)\n    case -1 | 2\n        pass\n";
        let (repaired, inserted) = insert_missing_colons(text).expect("repaired");
        assert_eq!(
            repaired,
            "match command.split():\n    case [\"go\", d]:\n        go(d)\n    case -1 | 2:\n        pass\n"
        );
        assert_eq!(inserted, vec![21, 41, 72]);
        for subject in ["ñ", "~x", "+x", "*xs, y", "'s'"] {
            let text = format!("match {subject}\n    case 1:\n        pass\n");
            let (repaired, _) = insert_missing_colons(&text).expect("repaired");
            assert!(repaired.starts_with(&format!("match {subject}:\n")), "{repaired}");
        }
        // The words as names are not headers, even above an indented line.
        for text in ["match = re.match(p, s)\n    x = 1\n", "case.run()\n    x\n", "match\n    x\n"] {
            assert_eq!(insert_missing_colons(text), None, "{text}");
        }
    }

    #[test]
    fn headers_with_their_colon_and_lines_that_are_not_headers_are_left_alone() {
        for text in [
            "def a(x: int = {'k': 1}[\"k\"]) -> int:\n    return x\n",
            "if x: y()\nelse: z()\n",
            "for i in range(3):  # c\n    pass\n",
            "definitely = 1\n    indented_error = 2\n",
            "class C: pass\n",
            "x = '''\ndef a()\n    pass\n'''\n",
            "with open(p) as f, \\\n        open(q) as g:\n    pass\n",
            "try\n",
        ] {
            assert_eq!(insert_missing_colons(text), None, "{text}");
        }
    }

    #[test]
    fn a_bracket_open_where_a_def_starts_is_closed() {
        let text = "def a():\n    x = foo(\n\n\ndef b():\n    return 1\n";
        let repaired = closed(text).expect("repaired");
        assert_eq!(repaired, "def a():\n    x = foo \n\n\ndef b():\n    return 1\n");
        assert_eq!(repaired.len(), text.len());
    }

    #[test]
    fn a_bracket_open_where_a_statement_of_the_same_body_starts_is_closed() {
        let text = "def a():\n    x = [1, 2,\n    return x\n";
        assert_eq!(
            closed(text).as_deref(),
            Some("def a():\n    x = [1, 2,\n    return x\n".replace('[', " ").as_str())
        );
    }

    #[test]
    fn valid_continuations_are_left_alone() {
        for text in [
            "x = (a\n     if b else c)\n",
            "y = [v\n     for v in w]\n",
            "z = [v\n     async for v in w]\n",
            "def g():\n    return (yield\n            from h())\n",
            "call(\n    a,\n)\n",
            "s = '''(\ndef not_code():\n'''\n",
            "t = '(' # ( comment\ndef f():\n    pass\n",
            "u = foo(definitely,\n        classes)\n",
            "class K:\n    v = foo(\n# a comment at the left edge\n\n        a,\n    )\n    w = 1\n",
            "raise E('a'\n'b')\nx = (y\nif z else w)\nv = (p\nand q)\ns = f(1,\nf'{s}')\n",
            "sys = System(kane, constants = {m: 1.0},\nspecifieds={o: 2},\ntimes = 3)\n",
            "x = [y\nfor y in z]\nw = (a\nif b else c)\n",
        ] {
            assert_eq!(closed(text), None, "{text}");
        }
    }

    #[test]
    fn a_bracket_open_where_the_next_statement_of_its_block_starts_is_closed() {
        let text = "def k():\n    grid = Table(\n\n    for row in rows:\n        pass\n";
        assert_eq!(
            closed(text).as_deref(),
            Some("def k():\n    grid = Table \n\n    for row in rows:\n        pass\n")
        );
        let text = "class K:\n    a = f(\n    b = g(1)\n    c = h(\n";
        assert_eq!(closed(text).as_deref(), Some("class K:\n    a = f \n    b = g(1)\n    c = h \n"));
        // Only by indentation: by keyword, the bracket is closed where its closer is.
        let text = "x = f(\ny = g(1)\nz = 2)\n";
        assert_eq!(close_unclosed_brackets(text, Closing::ByKeyword, Mending::Blank), None);
        assert!(close_unclosed_brackets(text, Closing::ByIndentation, Mending::Blank).is_some());
    }

    #[test]
    fn an_unterminated_one_line_string_ends_at_its_line_and_is_closed_there() {
        let text = "x = foo('abc\n\ndef b(s=\"q\r\n    pass\n";
        let (repaired, inserted) = close_unclosed_brackets(text, Closing::ByKeyword, Mending::Blank).expect("repaired");
        assert_eq!(repaired, "x = foo 'abc'\n\ndef b(s=\"q\"):\r\n    pass\n");
        assert_eq!(inserted, vec![12, 25, 26, 27]);
    }

    #[test]
    fn a_definition_header_with_neither_colon_nor_body_is_blanked() {
        let text =
            "def ty\ndef b(x) -> int:\n    return 1\nclass C:\n    async def g(self) -> (\n        int)\n    x = 1\n";
        let blanked = blank_bodiless_headers(text).expect("blanked");
        assert_eq!(
            blanked,
            "      \ndef b(x) -> int:\n    return 1\nclass C:\n                          \n            \n    x = 1\n"
        );
        assert_eq!(blanked.len(), text.len(), "offsets are kept");
        // Headers with a colon, or with a body below (the colon repair's), and names that only
        // start like a keyword are left alone.
        assert_eq!(blank_bodiless_headers("def f(x)\n    return x\ndefine = 1\nclass_ = 2\ndef g(): pass\n"), None);
        // Its decorators go with it (else `b` would become a property); the next one's stay.
        let text = "class C:\n    @property\n\n    def na\n    @staticmethod\n    def b():\n        return 1\n";
        let blanked = blank_bodiless_headers(text).expect("blanked");
        assert_eq!(
            blanked,
            "class C:\n             \n\n          \n    @staticmethod\n    def b():\n        return 1\n"
        );
    }

    #[test]
    fn a_statement_ending_with_a_dot_loses_the_dot() {
        let text = "class M:\n    x = self.\n    managed = False\n    y = 1.\n    z = f(a).\n    w = ...\n    v = (a.\n         b)\n";
        let repaired = blank_trailing_dots(text).expect("repaired");
        assert_eq!(repaired, text.replace("self.\n", "self \n").replace("f(a).\n", "f(a) \n"));
        assert_eq!(blank_trailing_dots("x = 1.\ny = ...\nz = (a.\n  b)\n# self.\ns = 'a.'\n"), None);
    }

    #[test]
    fn an_unterminated_f_string_has_its_open_replacement_fields_closed_too() {
        let text = "def f(name):\n    log(f\"{{literal}} {name.upper(\n    return name\n";
        let (repaired, inserted) = close_unclosed_brackets(text, Closing::ByKeyword, Mending::Close).expect("repaired");
        // The field is closed before the quote (`{{...}}` is literal text), then the call.
        assert_eq!(repaired, "def f(name):\n    log(f\"{{literal}} {name.upper(}\")\n    return name\n");
        assert_eq!(inserted.len(), 3);
        // Not an f-string: its braces are text.
        let (repaired, _) = close_unclosed_brackets("x = '{a\n", Closing::ByKeyword, Mending::Close).expect("repaired");
        assert_eq!(repaired, "x = '{a'\n");
        let (repaired, _) =
            close_unclosed_brackets("x = rf'{a{b\n", Closing::ByKeyword, Mending::Close).expect("repaired");
        assert_eq!(repaired, "x = rf'{a{b}}'\n");
    }
}
