//! The value of string literals as Python reads them, and docstrings as `__doc__` and
//! `inspect.cleandoc` give them: prefixes and quotes stripped, escapes decoded (not in raw
//! literals), literals side by side joined, then tabs expanded and the common indentation
//! removed.

/// The value of the string literals in `text`: one literal, or several side by side (in
/// parentheses, with comments and line continuations between them), as Python joins them. A
/// literal still being typed (no closing quotes yet, see `repair`) runs to the end of `text`.
/// `\N{name}` escapes are kept as written (there is no table of character names here).
pub fn string_value(text: &str) -> String {
    let mut value = String::new();
    let mut rest = text;
    loop {
        rest = skip_between_literals(rest);
        let Some(quote_at) = rest.find(['"', '\'']) else { break };
        let prefix = &rest[..quote_at];
        if !prefix.chars().all(|c| c.is_ascii_alphabetic()) {
            break;
        }
        let raw = prefix.contains(['r', 'R']);
        let after_prefix = &rest[quote_at..];
        let quote = ["\"\"\"", "'''", "\"", "'"].into_iter().find(|q| after_prefix.starts_with(q)).unwrap_or("\"");
        let body_and_rest = &after_prefix[quote.len()..];
        let (body, after) = split_at_closing(body_and_rest, quote);
        // The tokenizer reads source lines with any line ending as `\n`.
        let body = body.replace("\r\n", "\n").replace('\r', "\n");
        if raw {
            value.push_str(&body);
        } else {
            decode_escapes(&body, &mut value);
        }
        rest = after;
    }
    value
}

/// A docstring literal's text (see [`string_value`]) as `inspect.cleandoc` leaves it.
pub fn clean_docstring(literal: &str) -> String {
    cleandoc(&string_value(literal))
}

/// What separates literals side by side: white space, parentheses, comments and backslashes
/// that continue a line.
fn skip_between_literals(mut rest: &str) -> &str {
    loop {
        let trimmed = rest.trim_start_matches(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == '\\');
        let trimmed = match trimmed.strip_prefix('#') {
            // A comment ends at a line break of any kind (a file may end its lines with `\r`).
            Some(comment) => comment.find(['\n', '\r']).map_or("", |end| &comment[end..]),
            None => trimmed,
        };
        if trimmed.len() == rest.len() {
            return rest;
        }
        rest = trimmed;
    }
}

/// The body of a literal opened with `quote`, and what follows its closing quote. A backslash
/// escapes the next character, raw literals included (`r"\""` does not end at `\"`).
fn split_at_closing<'a>(text: &'a str, quote: &str) -> (&'a str, &'a str) {
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        if c == '\\' {
            chars.next();
        } else if text[i..].starts_with(quote) {
            return (&text[..i], &text[i + quote.len()..]);
        }
    }
    (text, "")
}

/// Appends `body` with its escape sequences decoded, as Python decodes a non-raw `str` literal;
/// an escape Python does not know (or a malformed one) is kept as written.
fn decode_escapes(body: &str, out: &mut String) {
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(next) = chars.next() else {
            out.push('\\');
            break;
        };
        match next {
            '\n' => {}
            '\\' | '\'' | '"' => out.push(next),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '0'..='7' => {
                let mut code = next.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|d| d.to_digit(8)) {
                        Some(digit) => {
                            code = code * 8 + digit;
                            chars.next();
                        }
                        None => break,
                    }
                }
                out.extend(char::from_u32(code));
            }
            'x' | 'u' | 'U' => {
                let digits = match next {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = chars.clone().take(digits).collect();
                let decoded = (hex.len() == digits && hex.chars().all(|d| d.is_ascii_hexdigit()))
                    .then(|| u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32))
                    .flatten();
                match decoded {
                    Some(ch) => {
                        out.push(ch);
                        for _ in 0..digits {
                            chars.next();
                        }
                    }
                    None => {
                        out.push('\\');
                        out.push(next);
                    }
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
}

/// `inspect.cleandoc`: tabs expanded (every 8 columns), the first line's leading white space
/// and the other lines' common indentation removed, blank lines at both ends dropped.
fn cleandoc(doc: &str) -> String {
    let expanded = expand_tabs(doc);
    let lines: Vec<&str> = expanded.split('\n').collect();
    let margin = lines
        .iter()
        .skip(1)
        .filter_map(|line| {
            let content = line.trim_start_matches(is_python_space).chars().count();
            (content > 0).then(|| line.chars().count() - content)
        })
        .min();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        out.push(match (i, margin) {
            (0, _) => line.trim_start_matches(is_python_space).to_string(),
            (_, Some(margin)) => line.chars().skip(margin).collect(),
            (_, None) => line.to_string(),
        });
    }
    while out.last().is_some_and(String::is_empty) {
        out.pop();
    }
    let leading = out.iter().take_while(|line| line.is_empty()).count();
    out.drain(..leading);
    out.join("\n")
}

/// `str.expandtabs()`: each tab to the next multiple of 8 columns, counted from the last line
/// break (`\n` or `\r`).
fn expand_tabs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut column = 0;
    for c in text.chars() {
        match c {
            '\t' => {
                let spaces = 8 - column % 8;
                out.extend(std::iter::repeat_n(' ', spaces));
                column += spaces;
            }
            '\n' | '\r' => {
                out.push(c);
                column = 0;
            }
            _ => {
                out.push(c);
                column += 1;
            }
        }
    }
    out
}

/// White space as Python's `str.strip` sees it: Unicode's, and the four separators
/// `\x1c` to `\x1f`.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each literal's value as Python 3.11 gives it (`ast.literal_eval`, and `ast.get_docstring`
    /// of a function whose docstring it is), checked when these cases were written.
    #[test]
    fn literals_read_as_python_reads_them() {
        let cases: &[(&str, &str)] = &[
            (r#""plain""#, "plain"),
            (r#"'single'"#, "single"),
            (r#""""triple""""#, "triple"),
            (r#"r"raw \n \" kept""#, r#"raw \n \" kept"#),
            (r#"u"\u00e9t\xe9 \N{BULLET} \q""#, "été \\N{BULLET} \\q"),
            (
                r#""tab\there, nl\n, cr\r, octal \101\0, quote \' \" back \\""#,
                "tab\there, nl\n, cr\r, octal A\0, quote ' \" back \\",
            ),
            ("\"\"\"a\\\ncontinued\"\"\"", "acontinued"),
            (
                r#"("one "  # why
   'two'
   r"\three")"#,
                "one two\\three",
            ),
            ("\"\"\"crlf\r\nline\"\"\"", "crlf\nline"),
            ("(\"a\"  # c\r     \"b\")", "ab"),
            (r#""\U0001F600 \x4 \u12""#, "\u{1F600} \\x4 \\u12"),
            // Being typed: no closing quotes yet.
            ("\"\"\"Still typing\n    more", "Still typing\n    more"),
        ];
        for (literal, value) in cases {
            assert_eq!(string_value(literal), *value, "{literal}");
        }
    }

    #[test]
    fn docstrings_are_cleaned_as_inspect_cleandoc_cleans_them() {
        let cases: &[(&str, &str)] = &[
            (
                "\"\"\"Summary.\n\n    Body line.\n        Indented.\n    \"\"\"",
                "Summary.\n\nBody line.\n    Indented.",
            ),
            // A `\n` escape is a line break for the dedent, as in Python.
            (r#""""First.\n    second\n    third""""#, "First.\nsecond\nthird"),
            // Tabs expand to 8 columns before the margin is found; trailing spaces stay.
            ("\"\"\"T.\n\tx  \n        y\"\"\"", "T.\nx  \ny"),
            ("\"\"\"\n\n  Leading blank lines go.\n\"\"\"", "Leading blank lines go."),
            ("\"\"\"One line.   \"\"\"", "One line.   "),
        ];
        for (literal, doc) in cases {
            assert_eq!(clean_docstring(literal), *doc, "{literal}");
        }
    }
}
