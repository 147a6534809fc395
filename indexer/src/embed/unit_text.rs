//! What is embedded for a unit: kind, name words, signature, docstring and the start of its body.

use fresco_graph::{Unit, UnitKind};

/// At most this many bytes of text per unit (the model sees at most 256 tokens anyway; code
/// averages about 3 bytes per token).
const MAX_TEXT_BYTES: usize = 700;

/// The text embedded for `unit`; `source` is the unit's own source
/// ([`fresco_graph::FileEntry::source_of`]).
///
/// - every unit: its kind and its qualified name split into words
///   (`requests.sessions.Session.merge_environment_settings` → `requests sessions session merge
///   environment settings`);
/// - modules: the docstring;
/// - classes: the header (decorators, bases), the docstring and the names of the methods;
/// - functions and methods: the signature, the docstring and the beginning of the body;
/// - variables: the beginning of the assignment.
///
/// Capped at 1200 bytes. Only the text matters to the store: a unit whose text did not change is
/// never embedded again.
pub fn unit_text(unit: &Unit, source: &str) -> String {
    let mut out = String::with_capacity(256);
    out.push_str(unit.kind.as_str());
    out.push(' ');
    out.push_str(&name_words(&unit.id));
    let doc = unit.docstring.as_deref().map(str::trim).filter(|d| !d.is_empty());
    let sig = unit.signature.as_deref().map(str::trim).filter(|s| !s.is_empty());
    match unit.kind {
        UnitKind::Module | UnitKind::External => {
            if let Some(doc) = doc {
                push_line(&mut out, doc);
            }
        }
        UnitKind::Class => {
            let (header, body) = split_header(source);
            push_line(&mut out, sig.unwrap_or(header.trim()));
            if let Some(doc) = doc {
                push_line(&mut out, doc);
            }
            let methods = method_names(body);
            if !methods.is_empty() {
                push_line(&mut out, "methods: ");
                out.push_str(&methods.join(", "));
            }
        }
        UnitKind::Function | UnitKind::Method => {
            let (header, body) = split_header(source);
            push_line(&mut out, sig.unwrap_or(header.trim()));
            if let Some(doc) = doc {
                push_line(&mut out, doc);
            }
            let body = skip_docstring(body).trim();
            if !body.is_empty() {
                push_line(&mut out, body);
            }
        }
        UnitKind::Variable => {
            let src = source.trim();
            if !src.is_empty() {
                push_line(&mut out, src);
            }
        }
    }
    if out.len() > MAX_TEXT_BYTES {
        let mut end = MAX_TEXT_BYTES;
        while !out.is_char_boundary(end) {
            end -= 1;
        }
        out.truncate(end);
    }
    out
}

fn push_line(out: &mut String, text: &str) {
    out.push('\n');
    // Nobody needs more than the cap; do not copy megabytes of a huge body.
    let room = MAX_TEXT_BYTES.saturating_sub(out.len()) + 4;
    if text.len() <= room {
        out.push_str(text);
    } else {
        let mut end = room;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        out.push_str(&text[..end]);
    }
}

/// `pkg.sub.HTTPAdapter.send_request#2` → `pkg sub http adapter send request`.
pub fn name_words(id: &str) -> String {
    let id = id.split('#').next().unwrap_or(id);
    let mut words: Vec<String> = Vec::new();
    for part in id.split(['.', '_']).filter(|p| !p.is_empty()) {
        let chars: Vec<char> = part.chars().collect();
        let mut word = String::new();
        for (i, &c) in chars.iter().enumerate() {
            let boundary = i > 0
                && c.is_uppercase()
                && (chars[i - 1].is_lowercase()
                    || chars[i - 1].is_ascii_digit()
                    || (chars[i - 1].is_uppercase() && chars.get(i + 1).is_some_and(|n| n.is_lowercase())));
            if boundary && !word.is_empty() {
                words.push(std::mem::take(&mut word));
            }
            word.extend(c.to_lowercase());
        }
        if !word.is_empty() {
            words.push(word);
        }
    }
    words.join(" ")
}

/// Splits a `def`/`class` source at the `:` ending its header (decorators and leading comments
/// included in the header). Without a header, everything is body.
fn split_header(source: &str) -> (&str, &str) {
    let mut start = None;
    let mut offset = 0;
    for line in source.split_inclusive('\n') {
        let t = line.trim_start();
        if t.starts_with("def ") || t.starts_with("async ") || t.starts_with("class ") {
            start = Some(offset);
            break;
        }
        offset += line.len();
    }
    let Some(start) = start else {
        return ("", source);
    };
    let mut depth = 0i32;
    let mut quote: Option<u8> = None;
    let bytes = source.as_bytes();
    let mut i = start;
    while i < bytes.len() {
        let c = bytes[i];
        match quote {
            Some(q) => {
                if c == b'\\' {
                    i += 1;
                } else if c == q {
                    quote = None;
                }
            }
            None => match c {
                b'\'' | b'"' => quote = Some(c),
                b'(' | b'[' | b'{' => depth += 1,
                b')' | b']' | b'}' => depth -= 1,
                b'#' => {
                    while i < bytes.len() && bytes[i] != b'\n' {
                        i += 1;
                    }
                    continue;
                }
                b':' if depth <= 0 => return (&source[..i + 1], &source[i + 1..]),
                _ => {}
            },
        }
        i += 1;
    }
    (source, "")
}

/// The body without its leading string literal (the docstring, which is embedded separately).
fn skip_docstring(body: &str) -> &str {
    let t = body.trim_start();
    let rest = t.trim_start_matches(['r', 'R', 'u', 'U', 'b', 'B']);
    if rest.len() == t.len() && !t.starts_with(['"', '\'']) {
        return body;
    }
    for quote in ["\"\"\"", "'''", "\"", "'"] {
        if let Some(inner) = rest.strip_prefix(quote) {
            let mut i = 0;
            let b = inner.as_bytes();
            while i < b.len() {
                if b[i] == b'\\' {
                    i += 2;
                    continue;
                }
                // Compare bytes (quotes are ASCII), so `i` may sit inside a multi-byte
                // character without slicing the str there.
                if b[i..].starts_with(quote.as_bytes()) {
                    return inner.get(i + quote.len()..).unwrap_or("");
                }
                i += 1;
            }
            return "";
        }
    }
    body
}

/// The names of the methods defined directly in a class body (the least indented `def`s).
fn method_names(body: &str) -> Vec<&str> {
    let mut found: Vec<(usize, &str)> = Vec::new();
    for line in body.lines() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        let t = t.strip_prefix("async ").map_or(t, str::trim_start);
        if let Some(rest) = t.strip_prefix("def ") {
            let name = rest.trim_start().split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("");
            if !name.is_empty() {
                found.push((indent, name));
            }
        }
    }
    let Some(min) = found.iter().map(|(i, _)| *i).min() else {
        return Vec::new();
    };
    let mut names: Vec<&str> = Vec::new();
    for (indent, name) in found {
        if indent == min && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}
