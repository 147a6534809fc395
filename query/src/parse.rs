//! The parser: text to [`Query`], with errors that point at a position and say what was expected.

use std::fmt;

use fresco_graph::{EdgeKind, UnitKind};

use crate::ast::*;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct ParseError {
    /// Byte offset in the query text.
    pub position: usize,
    /// Where that is, for people: 1-based line and 1-based column in characters (a query may
    /// span lines, and names may hold non-ASCII characters).
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line > 1 {
            write!(f, "at line {}, column {}: {}", self.line, self.column, self.message)
        } else {
            write!(f, "at column {}: {}", self.column, self.message)
        }
    }
}

/// A place in a query's text: byte offset, and 1-based line and column in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Place {
    pub position: usize,
    pub line: usize,
    pub column: usize,
}

impl Place {
    /// Byte `position` of `query` (moved back to a character boundary, and at most the end).
    pub fn of(query: &str, position: usize) -> Place {
        let mut position = position.min(query.len());
        while !query.is_char_boundary(position) {
            position -= 1;
        }
        let before = &query[..position];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        Place { position, line: before.matches('\n').count() + 1, column: before[line_start..].chars().count() + 1 }
    }
}

impl ParseError {
    /// An error at byte `position` of `query`.
    pub fn at(query: &str, position: usize, message: String) -> ParseError {
        let Place { position, line, column } = Place::of(query, position);
        ParseError { position, line, column, message }
    }

    /// The query line the error is on with a caret under the error position, then the message.
    /// The caret is placed by terminal columns: a tab before it is repeated, a wide (CJK) character
    /// takes two columns, a combining mark none.
    pub fn render(&self, query: &str) -> String {
        let line_text = query.lines().nth(self.line.saturating_sub(1)).unwrap_or("");
        let place = if query.contains('\n') { format!("line {}: ", self.line) } else { String::new() };
        // A long line (a name pasted by mistake) is shown around the place only: up to AROUND
        // terminal columns before it, 2 AROUND in all.
        const AROUND: usize = 60;
        let chars: Vec<char> = line_text.chars().collect();
        let at = self.column.saturating_sub(1).min(chars.len());
        let width = |c: char| if c == '\t' { 1 } else { terminal_width(c) };
        let (from, to) = if chars.iter().map(|&c| width(c)).sum::<usize>() > 3 * AROUND {
            let (mut from, mut before) = (at, 0);
            while from > 0 && before + width(chars[from - 1]) <= AROUND {
                from -= 1;
                before += width(chars[from]);
            }
            let (mut to, mut shown) = (from, 0);
            while to < chars.len() && (to <= at || shown + width(chars[to]) <= 2 * AROUND) {
                shown += width(chars[to]);
                to += 1;
            }
            (from, to)
        } else {
            (0, chars.len())
        };
        let cut_before = if from > 0 { "…" } else { "" };
        let cut_after = if to < chars.len() { "…" } else { "" };
        let shown: String = chars[from..to].iter().collect();
        let line_text = format!("{cut_before}{shown}{cut_after}");
        let mut indent = " ".repeat(place.chars().count() + cut_before.chars().count());
        for c in chars[from..at].iter().copied() {
            match c {
                '\t' => indent.push('\t'),
                c => indent.push_str(&" ".repeat(terminal_width(c))),
            }
        }
        format!("{place}{line_text}\n{indent}^\n{}", self.message)
    }
}

/// How many terminal columns a character takes: 2 for East Asian Wide and Fullwidth characters
/// (CJK ideographs, kana, Hangul, fullwidth forms, emoji), 0 for combining marks and format
/// characters, 1 otherwise (`width_table.rs`, generated from Unicode's data).
fn terminal_width(c: char) -> usize {
    let code = c as u32;
    let table = crate::width_table::WIDTHS;
    let at = table.partition_point(|&(_, last, _)| last < code);
    match table.get(at) {
        Some(&(first, _, width)) if first <= code => width as usize,
        _ => 1,
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Str(String),
    Pipe,
    Arrow,
    Comma,
    Op(&'static str),
    End,
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Word(w) => format!("'{}'", shown(w)),
            Tok::Str(s) => format!("\"{}\"", shown(s)),
            Tok::Pipe => "'|'".into(),
            Tok::Arrow => "'->'".into(),
            Tok::Comma => "','".into(),
            Tok::Op(o) => format!("'{o}'"),
            Tok::End => "the end of the query".into(),
        }
    }
}

/// A token as an error message shows it: a long one (a pasted file, a 100 KB word) is cut,
/// with its length said.
fn shown(token: &str) -> String {
    const SHOWN: usize = 80;
    match token.char_indices().nth(SHOWN) {
        Some((end, _)) => format!("{}… ({} characters)", &token[..end], token.chars().count()),
        None => token.to_string(),
    }
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        match c {
            b'|' => {
                out.push((Tok::Pipe, i));
                i += 1;
            }
            b',' => {
                out.push((Tok::Comma, i));
                i += 1;
            }
            b'-' if bytes.get(i + 1) == Some(&b'>') => {
                out.push((Tok::Arrow, i));
                i += 2;
            }
            b'"' | b'\'' => {
                let quote = c;
                let mut value = String::new();
                i += 1;
                let mut closed = false;
                while i < bytes.len() {
                    let ch = text[i..].chars().next().unwrap_or('\0');
                    if bytes[i] == b'\\' && i + 1 < bytes.len() {
                        let next = text[i + 1..].chars().next().unwrap_or('\0');
                        match next {
                            'n' => value.push('\n'),
                            't' => value.push('\t'),
                            '\\' | '"' | '\'' => value.push(next),
                            // As Python keeps `"\d"`: a backslash that escapes nothing is text
                            // (a regex's `\d`, a Windows path), not silently dropped.
                            other => {
                                value.push('\\');
                                value.push(other);
                            }
                        }
                        i += 1 + next.len_utf8();
                        continue;
                    }
                    if bytes[i] == quote {
                        closed = true;
                        i += 1;
                        break;
                    }
                    value.push(ch);
                    i += ch.len_utf8();
                }
                if !closed {
                    return Err(ParseError {
                        position: start,
                        line: 0,
                        column: 0,
                        message: "unterminated string: expected a closing quote".into(),
                    });
                }
                out.push((Tok::Str(value), start));
            }
            b'!' if bytes.get(i + 1) == Some(&b'=') => {
                out.push((Tok::Op("!="), i));
                i += 2;
            }
            // `<lambda1>` opening a word is a name (`find <lambda1>`), not a comparison.
            b'<' | b'>' if lambda_name_len(text, i).is_none() => {
                let op = match (c, bytes.get(i + 1)) {
                    (b'<', Some(b'=')) => "<=",
                    (b'>', Some(b'=')) => ">=",
                    (b'<', _) => "<",
                    _ => ">",
                };
                i += op.len();
                out.push((Tok::Op(op), start));
            }
            b'=' => {
                i += if bytes.get(i + 1) == Some(&b'=') { 2 } else { 1 };
                out.push((Tok::Op("="), start));
            }
            b'~' => {
                out.push((Tok::Op("~"), i));
                i += 1;
            }
            _ => {
                while i < bytes.len() {
                    let b = bytes[i];
                    // A lambda's name is part of a qualified name: `pkg.f.<lambda1>`.
                    if b == b'<'
                        && (i == start || bytes[i - 1] == b'.')
                        && let Some(len) = lambda_name_len(text, i)
                    {
                        i += len;
                        continue;
                    }
                    if b.is_ascii_whitespace()
                        || matches!(b, b'|' | b',' | b'"' | b'\'' | b'=' | b'<' | b'>' | b'!' | b'~')
                    {
                        break;
                    }
                    if b == b'-' && bytes.get(i + 1) == Some(&b'>') {
                        break;
                    }
                    i += 1;
                }
                if i == start {
                    return Err(ParseError {
                        position: start,
                        line: 0,
                        column: 0,
                        message: format!("unexpected character '{}'", text[start..].chars().next().unwrap_or('?')),
                    });
                }
                out.push((Tok::Word(text[start..i].to_string()), start));
            }
        }
    }
    out.push((Tok::End, text.len()));
    Ok(out)
}

/// The length of a lambda's name (`<lambda1>`: `<lambda`, digits, `>`) starting at byte `i`.
fn lambda_name_len(text: &str, i: usize) -> Option<usize> {
    let rest = text.get(i..)?.strip_prefix("<lambda")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    (rest.as_bytes().get(digits) == Some(&b'>')).then_some("<lambda".len() + digits + 1)
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// Each symbol read, with the byte offset of its token (see [`Query::symbols`]).
    symbols: Vec<(String, usize)>,
}

const STAGE_KEYWORDS: &str = "callers, callees, deps, impact, path, imports, importers, supers, subs, members, find, \
show, search, context, unresolved, cycles, changes, where, limit, order by, count";

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos].0
    }
    fn at(&self) -> usize {
        self.toks[self.pos].1
    }
    fn bump(&mut self) -> Tok {
        let t = self.toks[self.pos].0.clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }
    fn error<T>(&self, message: String) -> Result<T, ParseError> {
        // Placed by `parse`, which knows the text.
        Err(ParseError { position: self.at(), line: 0, column: 0, message })
    }
    fn expected<T>(&self, what: &str) -> Result<T, ParseError> {
        self.error(format!("expected {what}, found {}", self.peek().describe()))
    }
    fn is_word(&self, w: &str) -> bool {
        matches!(self.peek(), Tok::Word(x) if x.eq_ignore_ascii_case(w))
    }
    fn eat_word(&mut self, w: &str) -> bool {
        if self.is_word(w) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn at_stage_end(&self) -> bool {
        matches!(self.peek(), Tok::Pipe | Tok::End)
    }

    fn query(&mut self) -> Result<Query, ParseError> {
        /// More steps than any query needs: what bounds a pipeline's work (each `where` and
        /// `order by` goes through all the rows it is given, whatever the time).
        const MAX_STEPS: usize = 32;
        let mut stages = Vec::new();
        loop {
            if matches!(stages.last(), Some(Stage::Count)) {
                // Here, not when it runs: the error then points at the step.
                return self.error("'count' must be the last step: nothing follows a number".into());
            }
            if matches!(stages.last(), Some(Stage::Context { .. })) {
                // A later step would filter the ranking and leave the text, assembled from all of
                // it, holding units the answer no longer lists.
                return self.error(
                    "'context' must be the last step: its text is assembled from its whole ranking (`k N` ranks fewer)"
                        .into(),
                );
            }
            if stages.len() == MAX_STEPS {
                // Every step may go through the rows of the one before it (up to 250,000).
                return self.error(format!("a query has at most {MAX_STEPS} steps"));
            }
            let (start, keyword) = (self.pos, self.peek().describe());
            let stage = self.stage(stages.is_empty())?;
            if !stages.is_empty() {
                // Run, such a step would drop the earlier steps' units without a word.
                let why = match &stage {
                    Stage::Traverse { symbol: Some(_), .. } => Some(format!(
                        "{keyword} names its own start, so the units of the steps before it would be dropped: leave \
                         the name out to work on them (`... | {}`), or ask it as a query of its own",
                        keyword.trim_matches('\'')
                    )),
                    Stage::Path { .. } | Stage::Show { .. } | Stage::Unresolved { scope: Some(_) } => Some(format!(
                        "{keyword} names what it works on and takes no units from the steps before it: ask it as a \
                         query of its own"
                    )),
                    Stage::Search { .. }
                    | Stage::Context { .. }
                    | Stage::Cycles { .. }
                    | Stage::Changes { .. }
                    | Stage::Unresolved { scope: None } => Some(format!(
                        "{keyword} takes no units from the steps before it (it needs none): ask it as a query of its \
                         own"
                    )),
                    _ => None,
                };
                if let Some(why) = why {
                    self.pos = start;
                    return self.error(why);
                }
            }
            stages.push(stage);
            match self.peek() {
                Tok::Pipe => {
                    self.bump();
                }
                Tok::End => break,
                _ => return self.expected("'|' or the end of the query"),
            }
        }
        Ok(Query { stages, symbols: std::mem::take(&mut self.symbols) })
    }

    fn stage(&mut self, first: bool) -> Result<Stage, ParseError> {
        let Tok::Word(word) = self.peek().clone() else {
            return self.expected(&format!("a query step ({STAGE_KEYWORDS})"));
        };
        let keyword = word.to_ascii_lowercase();
        let traversal = match keyword.as_str() {
            "callers" => Some(Traversal::Callers),
            "callees" => Some(Traversal::Callees),
            "deps" => Some(Traversal::Deps),
            "impact" => Some(Traversal::Impact),
            "supers" => Some(Traversal::Supers),
            "subs" => Some(Traversal::Subs),
            "imports" => Some(Traversal::Imports),
            "importers" => Some(Traversal::Importers),
            "members" => Some(Traversal::Members),
            _ => None,
        };
        if first && matches!(keyword.as_str(), "where" | "limit" | "order" | "count") {
            // Run first, they would filter or count nothing and answer "no results" or 0.
            return self.error(format!(
                "'{keyword}' works on the units of an earlier step: start with a step that finds units \
                 (find, callers, callees, search, ...), e.g. find \"*\" | {keyword} ..."
            ));
        }
        if let Some(traversal) = traversal {
            self.bump();
            let symbol = if self.at_stage_end() || self.is_word("depth") {
                if first {
                    return self.expected(&format!("a unit name after '{}'", traversal.keyword()));
                }
                None
            } else {
                Some(self.symbol()?)
            };
            let depth = if self.eat_word("depth") { Some(self.depth()?) } else { None };
            if self.is_word("depth") {
                self.once("depth", &depth)?;
            }
            return Ok(Stage::Traverse { traversal, symbol, depth });
        }
        match keyword.as_str() {
            "path" => {
                self.bump();
                let from = self.symbol()?;
                if !matches!(self.peek(), Tok::Arrow) {
                    return self.expected("'->' between the two ends of the path");
                }
                self.bump();
                let to = self.symbol()?;
                let mut via = Vec::new();
                if self.eat_word("via") {
                    loop {
                        // As for lanes: a kind named twice is an error at the second.
                        if let Tok::Word(word) = self.peek()
                            && let Some(kind) = EdgeKind::parse(&word.to_ascii_lowercase()).filter(|k| via.contains(k))
                        {
                            return self.error(format!("edge kind '{}' is named twice", kind.as_str()));
                        }
                        via.push(self.edge_kind()?);
                        if !matches!(self.peek(), Tok::Comma) {
                            break;
                        }
                        self.bump();
                    }
                    if self.is_word("via") {
                        self.once("via", &Some(()))?;
                    }
                }
                Ok(Stage::Path { from, to, via })
            }
            "find" => {
                self.bump();
                let mut pattern = None;
                let mut kind = None;
                let mut file = None;
                loop {
                    match self.peek().clone() {
                        Tok::Str(s) if pattern.is_none() => {
                            self.bump();
                            pattern = Some(s);
                        }
                        Tok::Word(w) if w.eq_ignore_ascii_case("kind") => {
                            self.once("kind", &kind)?;
                            self.bump();
                            kind = Some(self.unit_kind()?);
                        }
                        Tok::Word(w) if w.eq_ignore_ascii_case("in") => {
                            self.once("in", &file)?;
                            self.bump();
                            let before = self.pos;
                            match self.bump() {
                                Tok::Str(s) | Tok::Word(s) => {
                                    let glob = file_glob(s);
                                    self.symbols.push((glob.clone(), self.toks[before].1));
                                    file = Some(glob)
                                }
                                _ => {
                                    // At what was found (`bump` stays on the end of the query).
                                    self.pos = before;
                                    return self.expected("a quoted file glob after 'in'");
                                }
                            }
                        }
                        Tok::Word(w) if pattern.is_none() && !is_keyword(&w) => {
                            self.bump();
                            pattern = Some(w);
                        }
                        _ => break,
                    }
                }
                Ok(Stage::Find { pattern, kind, file })
            }
            "show" => {
                self.bump();
                Ok(Stage::Show { symbol: self.symbol()? })
            }
            "search" => {
                self.bump();
                let text = match self.peek().clone() {
                    // An empty text matches nothing in any lane: say so, rather than answer
                    // with whatever ranks first.
                    Tok::Str(s) if s.trim().is_empty() => {
                        return self.error("the text to search for is empty".to_string());
                    }
                    Tok::Str(s) => {
                        self.bump();
                        s
                    }
                    _ => return self.expected("the text to search for, in quotes"),
                };
                let (k, _, lanes) = self.retrieval_options(false)?;
                Ok(Stage::Search { text, k: k.unwrap_or(10), lanes })
            }
            "context" => {
                self.bump();
                let target = if self.eat_word("for") {
                    let text = match self.peek().clone() {
                        Tok::Str(s) if s.trim().is_empty() => {
                            return self
                                .error("the new function's text is empty: give its signature and docstring".into());
                        }
                        Tok::Str(s) => {
                            self.bump();
                            s
                        }
                        _ => return self.expected("the signature and docstring of the new function, in quotes"),
                    };
                    if !self.eat_word("in") {
                        return self.expected("'in FILE' after the new function's text");
                    }
                    let written = match self.peek().clone() {
                        // `in budget 100`: the file was left out, not named `budget`.
                        Tok::Word(s) if is_keyword(&s) => {
                            return self.expected("the file the new function will live in");
                        }
                        Tok::Str(s) | Tok::Word(s) => {
                            // Recorded as a name is: a file that is not there is pointed at.
                            self.symbols.push((s.clone(), self.at()));
                            self.bump();
                            s
                        }
                        _ => return self.expected("the file the new function will live in"),
                    };
                    // `FILE:LINE`: where in the file it will be written (its class, its neighbours).
                    let (file, line) = match written.rsplit_once(':') {
                        // A signed line (`a.py:-3`, `a.py:+3`) is a mistaken line, not part of a
                        // file name.
                        // So is anything but a number after a Python file's name (`utils.py:`,
                        // `utils.py:abc`).
                        Some((file, line))
                            if line.strip_prefix(['-', '+']).is_some_and(is_digits)
                                || (file.ends_with(".py") && !is_digits(line)) =>
                        {
                            self.pos -= 1;
                            return self.error(format!(
                                "'{line}' after {file}: expected a line number (lines count from 1, unsigned)"
                            ));
                        }
                        Some((file, line)) if is_digits(line) => match line.parse::<u32>() {
                            Ok(line) if line > 0 => (file.to_string(), Some(line)),
                            Ok(_) => {
                                self.pos -= 1;
                                return self.error(format!("line {line} of {file}: lines count from 1"));
                            }
                            Err(_) => {
                                self.pos -= 1;
                                return self.error(format!("line {line} of {file}: no file is that long"));
                            }
                        },
                        _ => (written, None),
                    };
                    ContextTarget::New { text, file, line }
                } else {
                    ContextTarget::Unit(self.symbol()?)
                };
                let (k, budget, lanes) = self.retrieval_options(true)?;
                Ok(Stage::Context { target, budget: budget.unwrap_or(2000), k: k.unwrap_or(50), lanes })
            }
            "unresolved" => {
                self.bump();
                let scope = if self.eat_word("in") { Some(self.symbol()?) } else { None };
                Ok(Stage::Unresolved { scope })
            }
            "cycles" => {
                self.bump();
                let kind = if self.at_stage_end() {
                    EdgeKind::Imports
                } else {
                    let named = match self.peek() {
                        Tok::Word(w) => EdgeKind::parse(&w.to_ascii_lowercase()),
                        _ => None,
                    };
                    match named {
                        Some(EdgeKind::Imports | EdgeKind::Calls | EdgeKind::Inherits) => self.edge_kind()?,
                        Some(_) => return self.error("cycles are computed over imports, calls or inherits".into()),
                        // Name the kinds `cycles` takes, not every edge kind.
                        None => return self.expected("imports, calls or inherits"),
                    }
                };
                Ok(Stage::Cycles { kind })
            }
            "changes" => {
                self.bump();
                if !self.eat_word("since") {
                    return self.expected("'since' after 'changes'");
                }
                let since = self.number()? as u64;
                // `until W` fixes the range's end and `skip N` passes over its first N changes:
                // together they page through a change larger than the result limit.
                let (mut until, mut until_at, mut skip) = (None, None, None);
                loop {
                    if self.is_word("until") {
                        self.once("until", &until)?;
                        self.bump();
                        until_at = Some(self.at());
                        until = Some(self.number()? as u64);
                    } else if self.is_word("skip") {
                        self.once("skip", &skip)?;
                        self.bump();
                        skip = Some(self.number()?);
                    } else {
                        break;
                    }
                }
                Ok(Stage::Changes { since, until, until_at, skip: skip.unwrap_or(0) })
            }
            "where" => {
                self.bump();
                let mut conditions = vec![self.condition()?];
                while self.eat_word("and") {
                    conditions.push(self.condition()?);
                }
                Ok(Stage::Where(conditions))
            }
            "limit" => {
                self.bump();
                // As `k 0` and a request's `limit: 0`: a query for nothing is a mistake.
                Ok(Stage::Limit(self.positive_number("limit")?))
            }
            "order" => {
                self.bump();
                if !self.eat_word("by") {
                    return self.expected("'by' after 'order'");
                }
                let field = match self.peek().clone() {
                    Tok::Word(w) => match Field::parse(&w.to_ascii_lowercase()) {
                        Some(f) => {
                            self.bump();
                            f
                        }
                        None => {
                            return self.expected("a field to order by (name, kind, file, line, depth)");
                        }
                    },
                    _ => {
                        return self.expected("a field to order by (name, kind, file, line, depth)");
                    }
                };
                let descending = if self.eat_word("desc") {
                    true
                } else {
                    self.eat_word("asc");
                    false
                };
                Ok(Stage::OrderBy { field, descending })
            }
            "count" => {
                self.bump();
                Ok(Stage::Count)
            }
            _ => self.error(format!("unknown query step '{word}': expected one of {STAGE_KEYWORDS}")),
        }
    }

    /// `[k N] [budget N] [lanes a,b,...]` in any order.
    fn retrieval_options(
        &mut self,
        allow_budget: bool,
    ) -> Result<(Option<usize>, Option<usize>, Vec<Lane>), ParseError> {
        let (mut k, mut budget, mut lanes) = (None, None, Vec::new());
        loop {
            if self.is_word("k") {
                self.once("k", &k)?;
                self.bump();
                k = Some(self.positive_number("k")?);
            } else if allow_budget && self.is_word("budget") {
                self.once("budget", &budget)?;
                self.bump();
                // As `k 0`: a context of no tokens is a mistake. (A budget too small for any
                // unit is not: the answer says what the smallest needed.)
                budget = Some(self.positive_number("budget")?);
            } else if self.is_word("lanes") {
                // A `lanes` option names at least one lane.
                self.once("lanes", &lanes.first())?;
                self.bump();
                loop {
                    let lane = match self.peek().clone() {
                        Tok::Word(w) => Lane::parse(&w.to_ascii_lowercase()),
                        _ => None,
                    };
                    let Some(lane) = lane else {
                        return self.expected(if allow_budget {
                            "a lane (bm25, dense, graph)"
                        } else {
                            "a lane (bm25, dense)"
                        });
                    };
                    if lane == Lane::Graph && !allow_budget {
                        // `search` has a text, not a target, to rank for.
                        return self.error("search has no graph lane: it ranks for a target (use context NAME)".into());
                    }
                    if lanes.contains(&lane) {
                        return self.error(format!("lane '{}' is named twice", lane.as_str()));
                    }
                    self.bump();
                    lanes.push(lane);
                    if !matches!(self.peek(), Tok::Comma) {
                        break;
                    }
                    self.bump();
                }
            } else {
                break;
            }
        }
        Ok((k, budget, lanes))
    }

    fn symbol(&mut self) -> Result<Symbol, ParseError> {
        let text = match self.peek().clone() {
            Tok::Word(w) if !is_keyword(&w) => w,
            Tok::Str(s) => s,
            _ => return self.expected("a unit: a qualified name, a glob, or file.py:LINE"),
        };
        self.symbols.push((text.clone(), self.at()));
        self.bump();
        if let Some((file, line)) = text.rsplit_once(':')
            && is_digits(line)
        {
            // As `context for ... in FILE:LINE` says them: a line 0 or past any file's length is
            // no location (and no name either).
            return match line.parse::<u32>() {
                Ok(0) => {
                    self.pos -= 1;
                    self.error(format!("line 0 of {file}: lines count from 1"))
                }
                Ok(line) => Ok(Symbol::Location { file: file.to_string(), line }),
                Err(_) => {
                    self.pos -= 1;
                    self.error(format!("line {line} of {file}: no file is that long"))
                }
            };
        }
        if text.contains(['*', '?', '[']) {
            return Ok(Symbol::Glob(text));
        }
        Ok(Symbol::Name(text))
    }

    fn depth(&mut self) -> Result<Depth, ParseError> {
        match self.peek().clone() {
            Tok::Word(w) if w == "*" => {
                self.bump();
                Ok(Depth::Unbounded)
            }
            // Digits only: Rust's parser would take `+2` too, where `-1` is refused.
            Tok::Word(w) if is_digits(&w) => match w.parse::<u32>() {
                Ok(n) if n > 0 => {
                    self.bump();
                    Ok(Depth::Limited(n))
                }
                // A number too large for a depth is still a number: say what the largest is
                // (and that `*` means no bound), not that a number was expected.
                _ => self.expected(&format!("a depth: a positive number up to {} or '*'", u32::MAX)),
            },
            _ => self.expected("a depth: a positive number or '*'"),
        }
    }

    fn number(&mut self) -> Result<usize, ParseError> {
        self.bounded_number(usize::MAX)
    }

    /// A number of at least 1 for `option`; a 0 is an error placed at the 0 (not after it).
    fn positive_number(&mut self, option: &str) -> Result<usize, ParseError> {
        let at = self.at();
        match self.number()? {
            0 => Err(ParseError { position: at, line: 0, column: 0, message: format!("{option} must be at least 1") }),
            n => Ok(n),
        }
    }

    /// A run of decimal digits up to `max`; a larger number is an error that names `max`, never
    /// a number cut to fit.
    fn bounded_number(&mut self, max: usize) -> Result<usize, ParseError> {
        match self.peek().clone() {
            // Digits only: Rust's parser would take `+5` too, where `-1` is refused.
            Tok::Word(w) if is_digits(&w) => match w.parse::<usize>() {
                Ok(n) if n <= max => {
                    self.bump();
                    Ok(n)
                }
                _ => self.expected(&format!("a number up to {max}")),
            },
            _ => self.expected("a number"),
        }
    }

    /// Fails with `option` named when it was given already (`k 5 k 7`): which one was meant is
    /// the user's to say.
    fn once<T>(&self, option: &str, value: &Option<T>) -> Result<(), ParseError> {
        if value.is_some() { self.error(format!("'{option}' is given twice")) } else { Ok(()) }
    }

    fn unit_kind(&mut self) -> Result<UnitKind, ParseError> {
        if let Tok::Word(w) = self.peek().clone()
            && let Some(k) = UnitKind::parse(&w.to_ascii_lowercase())
        {
            self.bump();
            return Ok(k);
        }
        self.expected("a unit kind (module, class, function, method, variable, external)")
    }

    fn edge_kind(&mut self) -> Result<EdgeKind, ParseError> {
        if let Tok::Word(w) = self.peek().clone()
            && let Some(k) = EdgeKind::parse(&w.to_ascii_lowercase())
        {
            self.bump();
            return Ok(k);
        }
        self.expected("an edge kind (contains, imports, inherits, calls, references)")
    }

    fn condition(&mut self) -> Result<Condition, ParseError> {
        let Tok::Word(field) = self.peek().clone() else {
            return self.expected("a condition on kind, name, file or depth");
        };
        self.bump();
        match field.to_ascii_lowercase().as_str() {
            "kind" => {
                let negated = match self.peek() {
                    Tok::Op("!=") => {
                        self.bump();
                        true
                    }
                    Tok::Op("=") => {
                        self.bump();
                        false
                    }
                    _ => self.eat_word("is") && self.eat_word("not"),
                };
                let mut kinds = vec![self.unit_kind()?];
                while matches!(self.peek(), Tok::Comma) {
                    self.bump();
                    kinds.push(self.unit_kind()?);
                }
                Ok(Condition::Kind { kinds, negated })
            }
            "name" => {
                let regex = match self.peek() {
                    Tok::Op("~") => {
                        self.bump();
                        true
                    }
                    Tok::Op("=") => {
                        self.bump();
                        false
                    }
                    _ => {
                        if self.eat_word("matches") {
                            true
                        } else {
                            self.eat_word("glob");
                            false
                        }
                    }
                };
                let pattern_at = self.at();
                let pattern = self.pattern()?;
                if regex {
                    // Ids are NFKC-normalised identifiers, so the pattern's identifier characters
                    // are read the same way (`~ "ﬁ"` would otherwise match nothing ever); others
                    // stay as written (`…` is no `...`, `﹙` no group), and it is checked as it will run.
                    let pattern = nfkc_identifier_chars(&pattern);
                    if let Err(e) = regex::Regex::new(&pattern) {
                        // At the pattern, not after it: the regex crate's own caret is relative
                        // to the pattern.
                        return Err(ParseError {
                            position: pattern_at,
                            line: 0,
                            column: 0,
                            message: format!("invalid regular expression: {e}"),
                        });
                    }
                    Ok(Condition::NameRegex(pattern))
                } else {
                    Ok(Condition::NameGlob(pattern))
                }
            }
            "file" => {
                if matches!(self.peek(), Tok::Op("=")) {
                    self.bump();
                }
                self.eat_word("glob");
                let at = self.at();
                let glob = file_glob(self.pattern()?);
                self.symbols.push((glob.clone(), at));
                Ok(Condition::FileGlob(glob))
            }
            "depth" => {
                let before = self.pos;
                let op = match self.bump() {
                    Tok::Op("=") => Comparison::Eq,
                    Tok::Op("!=") => Comparison::Ne,
                    Tok::Op("<") => Comparison::Lt,
                    Tok::Op("<=") => Comparison::Le,
                    Tok::Op(">") => Comparison::Gt,
                    Tok::Op(">=") => Comparison::Ge,
                    _ => {
                        // At what was found (`bump` stays on the end of the query).
                        self.pos = before;
                        return self.expected("a comparison (=, !=, <, <=, >, >=) after 'depth'");
                    }
                };
                let bound = self.bounded_number(u32::MAX as usize)?;
                Ok(Condition::Depth(op, u32::try_from(bound).unwrap_or(u32::MAX)))
            }
            other => {
                self.pos -= 1;
                self.error(format!("unknown condition '{other}': expected kind, name, file or depth"))
            }
        }
    }

    fn pattern(&mut self) -> Result<String, ParseError> {
        match self.peek().clone() {
            Tok::Str(s) | Tok::Word(s) => {
                self.bump();
                Ok(s)
            }
            _ => self.expected("a pattern (quote it if it has spaces)"),
        }
    }
}

/// A file glob as paths are matched against it, relative to the root without a leading `./`
/// (`./src/*.py` is `src/*.py`, as `FILE:LINE` takes `./src/a.py`).
fn file_glob(glob: String) -> String {
    let mut rest = glob.as_str();
    while let Some(after) = rest.strip_prefix("./") {
        rest = after.trim_start_matches('/');
    }
    if rest.len() == glob.len() { glob } else { rest.to_string() }
}

/// Whether `word` is a plain run of decimal digits (a number, however large).
fn is_digits(word: &str) -> bool {
    !word.is_empty() && word.bytes().all(|b| b.is_ascii_digit())
}

fn is_keyword(word: &str) -> bool {
    matches!(
        word.to_ascii_lowercase().as_str(),
        "depth" | "kind" | "in" | "via" | "where" | "and" | "limit" | "order" | "by" | "count" | "budget" | "lanes"
    )
}

pub fn parse(text: &str) -> Result<Query, ParseError> {
    parse_at_bytes(text).map_err(|e| ParseError::at(text, e.position, e.message))
}

/// The parse, with errors placed by byte offset only (`parse` adds the line and column).
fn parse_at_bytes(text: &str) -> Result<Query, ParseError> {
    let toks = lex(text)?;
    let mut parser = Parser { toks, pos: 0, symbols: Vec::new() };
    if matches!(parser.peek(), Tok::End) {
        return parser.expected(&format!("a query step ({STAGE_KEYWORDS})"));
    }
    parser.query()
}

/// `pattern` with its runs of identifier characters NFKC-normalised, each run whole (`e` and a
/// combining acute accent compose to `é`), and every other character, regex syntax among them,
/// kept. A character counts as an identifier character when it is a letter, a digit, `_` or a
/// combining mark, or when NFKC makes it one (`ﬁ` into `fi`).
fn nfkc_identifier_chars(pattern: &str) -> String {
    if pattern.is_ascii() {
        return pattern.to_string();
    }
    let is_identifier = |c: char| {
        c.is_alphanumeric()
            || c == '_'
            || unicode_normalization::char::is_combining_mark(c)
            || crate::exec::names::nfkc(c.encode_utf8(&mut [0; 4])).chars().all(|n| n.is_alphanumeric() || n == '_')
    };
    let mut out = String::with_capacity(pattern.len());
    let mut run = String::new();
    for c in pattern.chars() {
        if is_identifier(c) {
            run.push(c);
        } else {
            out.push_str(&crate::exec::names::nfkc(&run));
            run.clear();
            out.push(c);
        }
    }
    out.push_str(&crate::exec::names::nfkc(&run));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        for q in [
            "callers requests.api.request",
            "callers requests.api.request depth 3",
            "callees requests.api.get depth 2",
            "deps requests.sessions.Session.request",
            "impact requests.utils.to_key_val_list",
            "path requests.api.get -> requests.adapters.HTTPAdapter.send",
            "imports requests.sessions",
            "importers requests.utils",
            "supers requests.sessions.Session",
            "subs requests.adapters.BaseAdapter",
            "members requests.sessions.Session",
            "find \"to_key*\" kind function",
            "unresolved in requests.sessions",
            "cycles imports",
            "changes since 42",
            "search \"retry a failed connection\" k 10",
            "search \"retry a failed connection\" k 10 lanes bm25,dense",
            "context requests.sessions.Session.request budget 2000",
            r#"context for "def parse_link_header(value):\n    \"\"\"Return the links of a Link header as dicts.\"\"\"" in src/requests/utils.py budget 4000"#,
            "find kind class in \"django/db/*\" | subs depth * | count",
            "callers x | where kind = method and name ~ \"^a.*\" | order by name desc | limit 5",
        ] {
            parse(q).unwrap_or_else(|e| panic!("{q}: {}", e.render(q)));
        }
        let q = parse("path a.b -> c.d").unwrap();
        assert_eq!(
            q.stages,
            vec![Stage::Path { from: Symbol::Name("a.b".into()), to: Symbol::Name("c.d".into()), via: vec![] }]
        );
        assert_eq!(
            parse("callers src/x.py:12").unwrap().stages[0],
            Stage::Traverse {
                traversal: Traversal::Callers,
                symbol: Some(Symbol::Location { file: "src/x.py".into(), line: 12 }),
                depth: None
            }
        );
    }

    /// A long line is windowed by terminal columns: wide characters count twice.
    #[test]
    fn a_long_line_is_shown_around_the_place_by_terminal_columns() {
        let query = format!("callers {}", "名".repeat(300));
        let rendered = ParseError::at(&query, 8, "no unit".into()).render(&query);
        let shown = rendered.lines().next().expect("the line");
        let columns: usize = shown.chars().map(terminal_width).sum();
        assert!((100..=122).contains(&columns), "{columns} columns: {shown}");
        assert!(shown.starts_with("callers 名") && shown.ends_with('…'), "{shown}");
        assert_eq!(rendered.lines().nth(1), Some("        ^"));
    }

    #[test]
    fn file_globs_drop_a_leading_dot_slash() {
        let find = |q: &str| match parse(q).unwrap().stages.remove(0) {
            Stage::Find { file, .. } => file,
            other => panic!("{other:?}"),
        };
        assert_eq!(find("find \"*\" in \"./src/*.py\"").as_deref(), Some("src/*.py"));
        assert_eq!(find("find \"*\" in \".//./src/a.py\"").as_deref(), Some("src/a.py"));
        assert_eq!(find("find \"*\" in \".hidden/*.py\"").as_deref(), Some(".hidden/*.py"));
        match &parse("find \"*\" | where file \"./tests/*\"").unwrap().stages[1] {
            Stage::Where(conditions) => {
                assert!(format!("{conditions:?}").contains("FileGlob(\"tests/*\")"), "{conditions:?}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn lambda_units_are_names() {
        for (q, name) in [
            ("callers pkg.f.<lambda1>", "pkg.f.<lambda1>"),
            ("callees pkg.<lambda2>.<lambda1> depth 2", "pkg.<lambda2>.<lambda1>"),
            ("callers \"pkg.<lambda1>\"", "pkg.<lambda1>"),
        ] {
            let parsed = parse(q).unwrap_or_else(|e| panic!("{q}: {}", e.render(q)));
            let Stage::Traverse { symbol: Some(Symbol::Name(n)), .. } = &parsed.stages[0] else {
                panic!("{q}: {:?}", parsed.stages)
            };
            assert_eq!(n, name);
        }
        // `<` is still a comparison elsewhere.
        assert!(parse("callers pkg.f | where depth < 3").is_ok());
        assert!(parse("callers pkg.f | where depth <3").is_ok());
        // A lambda's name alone, opening a word.
        for q in ["find <lambda1>", "find \"*\" | where name = <lambda12>", "callers <lambda1>"] {
            let parsed = parse(q).unwrap_or_else(|e| panic!("{q}: {}", e.render(q)));
            assert!(format!("{:?}", parsed.stages).contains("<lambda1"), "{q}: {:?}", parsed.stages);
        }
    }

    #[test]
    fn search_refuses_the_graph_lane_and_context_for_an_empty_text_at_their_place() {
        let q = "search \"get\" lanes bm25,graph";
        let err = parse(q).expect_err("graph lane in search");
        assert_eq!(err.position, q.find("graph").expect("graph"), "{err:?}");
        assert!(err.message.contains("no graph lane"), "{err:?}");
        let q = "context for \"  \" in pkg/a.py";
        let err = parse(q).expect_err("empty new function");
        assert_eq!(err.position, q.find('"').expect("quote"), "{err:?}");
        assert!(err.message.contains("empty"), "{err:?}");
        assert!(parse("context pkg.f lanes graph").is_ok());
        // `FILE:LINE` says where the new function will be written; line 0 does not exist.
        assert_eq!(
            parse("context for \"def f(self):\" in pkg/a.py:12").unwrap().stages[0],
            Stage::Context {
                target: ContextTarget::New { text: "def f(self):".into(), file: "pkg/a.py".into(), line: Some(12) },
                budget: 2000,
                k: 50,
                lanes: vec![]
            }
        );
        let q = "context for \"def f():\" in pkg/a.py:0 budget 100";
        let err = parse(q).expect_err("line 0");
        assert_eq!(err.position, q.find("pkg").expect("file"), "{err:?}");
        assert!(err.message.contains("count from 1"), "{err:?}");
    }

    #[test]
    fn numbers_are_plain_digits_within_their_bounds() {
        // A depth bound beyond 32 bits is an error naming the largest, never wrapped to a small one.
        let q = "callers a.b depth * | where depth = 4294967297";
        let err = parse(q).expect_err("too large");
        assert_eq!(err.position, q.find("4294967297").expect("number"), "{err:?}");
        assert!(err.message.contains("up to 4294967295"), "{err:?}");
        assert!(parse("callers a.b depth * | where depth < 4294967295").is_ok());
        // A sign is refused as `-1` is.
        for q in ["callers a.b depth +2", "search \"x\" k +5", "find \"*\" | limit +1", "changes since +1"] {
            assert!(parse(q).is_err(), "{q}");
        }
        // `file.py:+21` is not a location: it is a name (and no unit is called that).
        assert!(matches!(parse_symbol("callers \"a.py:+21\""), Symbol::Name(_)));
        assert!(matches!(parse_symbol("callers \"a.py:21\""), Symbol::Location { line: 21, .. }));
        let q = "context for \"def f():\" in pkg/a.py:-3";
        let err = parse(q).expect_err("signed line");
        assert_eq!(err.position, q.find("pkg").expect("file"), "{err:?}");
        assert!(err.message.contains("lines count from 1"), "{err:?}");
        for bad in ["pkg/a.py:", "pkg/a.py:abc", "pkg/a.py:+3"] {
            let q = format!("context for \"def f():\" in {bad}");
            let err = parse(&q).expect_err(bad);
            assert_eq!(err.position, q.find("pkg").expect("file"), "{err:?}");
            assert!(err.message.contains("expected a line number"), "{err:?}");
        }
    }

    fn parse_symbol(q: &str) -> Symbol {
        match parse(q).expect("parses").stages.into_iter().next() {
            Some(Stage::Traverse { symbol: Some(symbol), .. }) => symbol,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_option_given_twice_is_an_error_at_the_second() {
        for (q, option) in [
            ("search \"x\" k 5 k 7", "k"),
            ("context f budget 1 budget 2", "budget"),
            ("context f lanes bm25 k 3 lanes dense", "lanes"),
            ("find kind class kind function", "kind"),
            ("find \"x\" in \"a/*\" in \"b/*\"", "in"),
            ("callers x depth 2 depth 3", "depth"),
            ("path a -> b via calls via references", "via"),
        ] {
            let err = parse(q).expect_err(q);
            assert_eq!(err.position, q.rfind(&format!(" {option} ")).expect("option") + 1, "{q}: {err:?}");
            assert!(err.message.contains(&format!("'{option}' is given twice")), "{q}: {err:?}");
        }
        assert!(parse("search \"x\" k 5 lanes bm25,dense").is_ok());
        // A lane named twice in one list, at the second.
        let q = "context f lanes bm25,dense,bm25";
        let err = parse(q).expect_err(q);
        assert_eq!(err.position, q.rfind("bm25").expect("lane"), "{err:?}");
        assert!(err.message.contains("lane 'bm25' is named twice"), "{err:?}");
        // An edge kind named twice in `via`, likewise.
        let q = "path a.b -> c.d via calls,references,CALLS";
        let err = parse(q).expect_err(q);
        assert_eq!(err.position, q.rfind("CALLS").expect("kind"), "{err:?}");
        assert!(err.message.contains("edge kind 'calls' is named twice"), "{err:?}");
        assert!(parse("path a.b -> c.d via calls,references").is_ok());
    }

    #[test]
    fn a_later_step_that_would_drop_its_input_is_an_error_at_the_step() {
        for q in [
            "find \"get\" kind function | callers requests.api.request",
            "find \"get\" | search \"retry\"",
            "find \"get\" | show requests.api.put",
            "callers a.b | context requests.api.get",
            "find \"x\" | path a -> b",
            "find \"x\" | cycles imports",
            "find \"x\" | unresolved",
            "find \"x\" | changes since 1",
        ] {
            let err = parse(q).expect_err(q);
            assert_eq!(err.position, q.find("| ").expect("pipe") + 2, "{q}: {err:?}");
            assert!(err.message.contains("the steps before it"), "{q}: {err:?}");
        }
        let err = parse("find \"get\" | callers a.b").expect_err("named start");
        assert!(
            err.message.contains("'callers' names its own start") && err.message.contains("`... | callers`"),
            "{err:?}"
        );
        let err = parse("find \"get\" | search \"x\"").expect_err("no start");
        assert!(err.message.contains("'search' takes no units from the steps before it (it needs none)"), "{err:?}");
        for q in [
            "find \"get\" | callers",
            "callers a.b | callees depth 2 | where kind = function | count",
            "find \"x\" | find kind class",
        ] {
            assert!(parse(q).is_ok(), "{q}");
        }
    }

    #[test]
    fn a_missing_file_or_lane_is_found_at_the_end_of_the_query() {
        let q = "context for \"def f(): pass\" in";
        let err = parse(q).expect_err(q);
        assert_eq!(err.position, q.len(), "{err:?}");
        assert!(err.message.contains("expected the file the new function will live in, found the end"), "{err:?}");
        // A keyword where the file should be: the file was left out.
        let q = "context for \"def f(): pass\" in budget 100";
        let err = parse(q).expect_err(q);
        assert_eq!(err.position, q.find("budget").expect("budget"), "{err:?}");
        assert!(err.message.contains("expected the file the new function will live in, found 'budget'"), "{err:?}");
        // `search` offers the lanes it takes.
        let err = parse("search \"x\" k 3 lanes").expect_err("no lane");
        assert!(err.message.contains("expected a lane (bm25, dense), found the end"), "{err:?}");
        let err = parse("context f lanes").expect_err("no lane");
        assert!(err.message.contains("expected a lane (bm25, dense, graph)"), "{err:?}");
    }

    #[test]
    fn a_backslash_escapes_quotes_backslashes_and_n_t_and_is_kept_before_anything_else() {
        let text = |q: &str| match parse(q).expect("parses").stages.into_iter().next() {
            Some(Stage::Search { text, .. }) => text,
            other => panic!("{other:?}"),
        };
        assert_eq!(text(r#"search "a\"b\\c\nd\te""#), "a\"b\\c\nd\te");
        assert_eq!(text(r#"search 'it\'s'"#), "it's");
        assert_eq!(text(r#"search "\d+ C:\path \x41""#), r"\d+ C:\path \x41");
    }

    #[test]
    fn a_lambda_name_ends_at_its_digits() {
        // An unclosed `<lambda` is not a word reaching to the next `>` of the query.
        let q = "callers pkg.f.<lambda1 | where depth > 1";
        let err = parse(q).expect_err("unclosed lambda");
        assert_eq!(err.position, q.find('<').expect("lambda"), "{err:?}");
        assert!(matches!(parse_symbol("callers pkg.f.<lambda12>"), Symbol::Name(n) if n == "pkg.f.<lambda12>"));
    }

    #[test]
    fn an_empty_search_is_an_error_at_its_text() {
        let err = parse("search \"  \" k 5").unwrap_err();
        assert_eq!(err.position, 7, "{err:?}");
        assert!(err.message.contains("empty"), "{err:?}");
    }

    #[test]
    fn errors_point_at_the_problem() {
        let q = "callers requests.api.get depth x";
        let err = parse(q).unwrap_err();
        assert_eq!(err.position, 31);
        assert!(err.message.contains("expected a depth"));
        assert_eq!(err.render(q).lines().nth(1), Some(&*format!("{}^", " ".repeat(31))));

        // A query that ends where an argument was expected: the end is pointed at, and named.
        for q in ["find \"*\" | where depth", "find \"*\" in"] {
            let err = parse(q).unwrap_err();
            assert_eq!(err.position, q.len(), "{q}: {err:?}");
            assert!(err.message.contains("found the end of the query"), "{q}: {err:?}");
        }
        // An option given twice: at the second, as for `k` and `budget`.
        let q = "changes since 1 until 1 until 1";
        let err = parse(q).unwrap_err();
        assert_eq!(err.position, q.rfind("until").expect("until"), "{err:?}");
        let q = "changes since 1 skip 2 skip 3";
        assert_eq!(parse(q).unwrap_err().position, q.rfind("skip").expect("skip"));
        // A line 0, or past any file's length, is an error at the location, as in `context for`.
        for (q, says) in [("show app.py:0", "lines count from 1"), ("show a/app.py:4294967296", "no file is that long")]
        {
            let err = parse(q).unwrap_err();
            assert_eq!(err.position, 5, "{q}: {err:?}");
            assert!(err.message.contains(says), "{q}: {err:?}");
        }

        // Too large: the message gives the largest, at the number.
        let q = "callers a.b depth 4294967296";
        let err = parse(q).unwrap_err();
        assert_eq!(err.position, q.find("4294967296").expect("number"), "{err:?}");
        assert!(err.message.contains("up to 4294967295"), "{err:?}");
        assert!(parse("callers a.b depth 4294967295").is_ok());
        let err = parse("search \"x\" k 99999999999999999999999").unwrap_err();
        assert!(err.message.contains(&format!("a number up to {}", usize::MAX)), "{err:?}");

        let q = "callers a.b | where name ~ \"[a-\" depth 2";
        let err = parse(q).unwrap_err();
        assert_eq!(err.position, q.find('"').expect("quote"), "{err:?}");
        assert!(err.message.contains("invalid regular expression"), "{err:?}");

        let err = parse("callerz foo").unwrap_err();
        assert_eq!(err.position, 0);
        assert!(err.message.contains("unknown query step 'callerz'"));

        let err = parse("path a ->").unwrap_err();
        assert!(err.message.contains("expected a unit"), "{}", err.message);
        assert!(parse("find \"abc").unwrap_err().message.contains("unterminated"));
        assert!(parse("").is_err());
        assert!(parse("callers").unwrap_err().message.contains("unit name"));
        assert!(parse("find \"*\" | limit 0").unwrap_err().message.contains("limit must be at least 1"));
        assert!(parse("context f budget 0").unwrap_err().message.contains("budget must be at least 1"));
        // Placed at the 0, as a number too large is.
        for (text, at) in [("context f budget 0", 17), ("search \"retry\" k 0", 17), ("find \"*\" | limit 0 ", 17)] {
            let err = parse(text).unwrap_err();
            assert_eq!((err.position, &text[err.position..err.position + 1]), (at, "0"), "{text}");
        }
        let text = "context a.b | where kind = variable";
        let err = parse(text).unwrap_err();
        assert!(err.message.contains("'context' must be the last step"), "{}", err.message);
        assert_eq!(err.position, text.find("where").unwrap_or(0));
        let text = "callers x | count | limit 3";
        let err = parse(text).unwrap_err();
        assert!(err.message.contains("'count' must be the last step"), "{}", err.message);
        assert_eq!(err.position, text.find("limit").unwrap_or(0), "the error points at the step after count");
        assert!(parse("find \"*\" | limit 1").is_ok());

        // `cycles` names the kinds it takes, at the word that is not one of them.
        let err = parse("cycles foo").unwrap_err();
        assert_eq!(err.position, 7, "{err:?}");
        assert!(err.message.contains("expected imports, calls or inherits"), "{}", err.message);
        let err = parse("cycles contains").unwrap_err();
        assert_eq!(err.position, 7, "{err:?}");
        assert!(err.message.contains("cycles are computed over imports, calls or inherits"), "{}", err.message);
        assert!(parse("cycles 3").unwrap_err().message.contains("expected imports, calls or inherits"));
        for kind in ["imports", "calls", "inherits", "CALLS"] {
            assert!(parse(&format!("cycles {kind}")).is_ok(), "{kind}");
        }
    }

    #[test]
    fn a_huge_token_is_cut_in_the_error() {
        let word = "x".repeat(100_000);
        let err = parse(&format!("callers a.b depth {word}")).expect_err("bad depth");
        assert!(err.message.len() < 300, "{} bytes", err.message.len());
        assert!(err.message.contains("(100000 characters)"), "{}", err.message);
    }

    #[test]
    fn errors_are_placed_by_line_and_character() {
        let err = parse("callers a.b\ndepth x").expect_err("bad depth");
        assert_eq!((err.position, err.line, err.column), (18, 2, 7));
        assert_eq!(
            err.render("callers a.b\ndepth x"),
            format!("line 2: depth x\n{}^\n{}", " ".repeat(14), err.message)
        );
        let query = "find \"été日本語\" kind klass";
        let err = parse(query).expect_err("bad kind");
        assert_eq!((err.line, err.column), (1, 20));
        assert!(err.to_string().starts_with("at column 20: "), "{err}");
        // The caret sits under `klass` in a terminal: the three ideographs take two columns each.
        assert_eq!(err.render(query).lines().nth(1), Some(&*format!("{}^", " ".repeat(22))));
        let query = "find\t\"x\"\tkind klass";
        let err = parse(query).expect_err("bad kind");
        assert_eq!(err.render(query).lines().nth(1), Some("    \t   \t     ^"));
        // Emoji take two columns, combining marks and format characters none.
        for (text, columns) in [("🚀☕", 4), ("e\u{301}", 1), ("\u{628}\u{64e}", 1), ("a\u{ad}\u{2060}b", 2)] {
            let query = format!("find \"{text}\" kind klass");
            let err = parse(&query).expect_err("bad kind");
            let caret = err.render(&query).lines().nth(1).map(|l| l.len() - 1);
            assert_eq!(caret, Some("find \"".len() + columns + "\" kind ".len()), "{text}: {}", err.render(&query));
        }
        let err = parse("find é | ü").expect_err("unexpected character");
        assert!(err.message.contains("'ü'"), "{}", err.message);
    }

    #[test]
    fn a_filter_cannot_come_first() {
        for q in ["where kind = method", "count", "limit 3", "order by name"] {
            let err = parse(q).expect_err(q);
            assert_eq!(err.position, 0, "{q}");
            assert!(err.message.contains("works on the units of an earlier step"), "{q}: {}", err.message);
        }
        assert!(parse("find \"*\" | where kind = method | count").is_ok());
    }
}
