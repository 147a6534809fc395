//! Recovery from the one syntax error that hides the rest of a file: an unclosed bracket.
//!
//! A half-typed call (`x = foo(` while the user is still typing) makes tree-sitter read every
//! later line as part of the call: the file's later functions and classes vanish from its tree
//! until the bracket is closed. An editor saves such states all the time, and a graph that loses
//! half a file on every keystroke is of no use to anyone asking "who calls X" meanwhile.
//!
//! Python's own rule finds the error: inside brackets, a line can never start with a keyword that
//! only begins a statement (`def`, `class`, `return`, `import`, ...). Where one does, the brackets
//! still open there were never closed; [`close_unclosed_brackets`] replaces each of them by a
//! space. Offsets and lines are unchanged, so everything lowered from the repaired text points
//! at the original one. Only files whose tree has errors are looked at, and the repair is only
//! used when its tree has fewer errors (see `lower::lower_tree`).

/// Keywords that only ever begin a statement, never continue an expression inside brackets.
/// (`if`, `else`, `for`, `async for`, `from`, `lambda`, ... can: `(a\n if b else c)`,
/// `[x\n for x in y]`, `(yield\n from g)`.)
const STATEMENT_ONLY: &[&str] = &[
    "def", "class", "return", "import", "raise", "pass", "del", "global", "nonlocal", "assert", "break", "continue",
    "try", "while", "with", "elif", "except", "finally",
];

/// The text with every bracket that is still open where a statement-only keyword starts a line
/// replaced by a space; `None` when there is none.
pub(crate) fn close_unclosed_brackets(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut repaired: Option<Vec<u8>> = None;
    let mut open: Vec<usize> = Vec::new();
    let mut at_line_start = true;
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if at_line_start {
            if matches!(c, b' ' | b'\t' | b'\x0c') {
                i += 1;
                continue;
            }
            at_line_start = false;
            if !open.is_empty() && starts_statement(&bytes[i..]) {
                let buf = repaired.get_or_insert_with(|| bytes.to_vec());
                for &at in &open {
                    buf[at] = b' ';
                }
                open.clear();
            }
        }
        match c {
            b'\n' => {
                at_line_start = true;
                i += 1;
            }
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
            }
            // A line continuation, or a stray backslash: the next byte is not a token start.
            b'\\' => i += 2,
            b'(' | b'[' | b'{' => {
                open.push(i);
                i += 1;
            }
            b')' | b']' | b'}' => {
                open.pop();
                i += 1;
            }
            b'"' | b'\'' => i = string_end(bytes, i),
            _ => i += 1,
        }
    }
    // Only ASCII brackets were replaced by ASCII spaces: still UTF-8.
    repaired.and_then(|bytes| String::from_utf8(bytes).ok())
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
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = if triple { start + 3 } else { start + 1 };
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'\n' if !triple => return i,
            q if q == quote => {
                if !triple {
                    return i + 1;
                }
                if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                    return i + 3;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::close_unclosed_brackets;

    #[test]
    fn a_bracket_open_where_a_def_starts_is_closed() {
        let text = "def a():\n    x = foo(\n\n\ndef b():\n    return 1\n";
        let repaired = close_unclosed_brackets(text).expect("repaired");
        assert_eq!(repaired, "def a():\n    x = foo \n\n\ndef b():\n    return 1\n");
        assert_eq!(repaired.len(), text.len());
    }

    #[test]
    fn a_bracket_open_where_a_statement_of_the_same_body_starts_is_closed() {
        let text = "def a():\n    x = [1, 2,\n    return x\n";
        assert_eq!(
            close_unclosed_brackets(text).as_deref(),
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
        ] {
            assert_eq!(close_unclosed_brackets(text), None, "{text}");
        }
    }

    #[test]
    fn an_unterminated_one_line_string_ends_at_its_line() {
        let text = "x = foo('abc\n\ndef b():\n    pass\n";
        assert_eq!(close_unclosed_brackets(text).as_deref(), Some("x = foo 'abc\n\ndef b():\n    pass\n"));
    }
}
