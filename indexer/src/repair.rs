//! Recovery from the syntax errors that hide the rest of a file: an unclosed bracket, and a
//! compound statement's header typed without its colon.
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
                    // Closed where its line ends, before a `\r` of a `\r\n`.
                    let at = if end > i + 1 && bytes[end - 1] == b'\r' { end - 1 } else { end };
                    m.insertions.push((at, vec![c]));
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
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\x0c') {
            i += 1;
        }
        let indent = i - line_start;
        let compound = starts_compound(&bytes[i..]);
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
        let mut i = start;
        while i < bytes.len() && matches!(bytes[i], b' ' | b'\t' | b'\x0c') {
            i += 1;
        }
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
    use super::{Closing, Mending, close_unclosed_brackets, indent_stray_dedents, insert_missing_colons};

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
}
