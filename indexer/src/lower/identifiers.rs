//! Identifiers as Python reads them: NFKC-normalised (PEP 3131). `def ﬁnd():` defines `find`,
//! and a call `find()` reaches it; `café` typed decomposed (as some editors and file systems
//! write it) is the `café` typed composed. Only identifiers are normalised: strings, comments
//! and the file's text, which spans and signatures point into, are kept as written.

use rustc_hash::FxHashMap;
use tree_sitter::Node;
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};

/// The identifiers of a text whose NFKC form differs from how they are written, by their byte
/// range (start, end). Empty for most files: an ASCII text has none to look for.
pub(super) type NormalizedIdentifiers = FxHashMap<(u32, u32), Box<str>>;

/// Finds them without walking the whole tree: from each character outside ASCII to the token
/// that holds it (a string's or comment's characters are passed over a token at a time). The
/// expressions around such an identifier, up to its statement, are recorded too, with each of
/// their identifiers normalised: an annotation, an `isinstance` argument, a dotted name or a
/// `case` class is read as a whole (`pkg.mod.Ｔhing` is `pkg.mod.Thing`).
pub(super) fn normalized_identifiers(text: &str, root: Node) -> NormalizedIdentifiers {
    let mut out = NormalizedIdentifiers::default();
    if text.is_ascii() {
        return out;
    }
    let mut enclosing: Vec<(u32, u32)> = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while let Some(offset) = bytes.get(at..).and_then(|rest| rest.iter().position(|b| !b.is_ascii())) {
        let start = at + offset;
        let char_len = text.get(start..).and_then(|rest| rest.chars().next()).map_or(1, char::len_utf8);
        let Some(node) = root.descendant_for_byte_range(start, start + char_len) else { break };
        // Past the token, or past the character alone when no token holds it (a space outside
        // ASCII between tokens finds the node around them).
        at = if node.child_count() == 0 { node.end_byte().max(start + char_len) } else { start + char_len };
        if node.kind() != "identifier" {
            continue;
        }
        let Some(written) = text.get(node.start_byte()..node.end_byte()) else { continue };
        if is_nfkc_quick(written.chars()) == IsNormalized::Yes {
            continue;
        }
        let normal: String = written.nfkc().collect();
        if normal != written {
            out.insert((node.start_byte() as u32, node.end_byte() as u32), normal.into_boxed_str());
            let mut parent = node.parent();
            while let Some(p) = parent.filter(|p| !ends_expressions(p.kind())) {
                enclosing.push((p.start_byte() as u32, p.end_byte() as u32));
                parent = p.parent();
            }
        }
    }
    if out.is_empty() {
        return out;
    }
    // Each enclosing expression's text with the identifiers inside it normalised.
    let mut identifiers: Vec<((u32, u32), Box<str>)> = out.iter().map(|(r, n)| (*r, n.clone())).collect();
    identifiers.sort_unstable_by_key(|(r, _)| *r);
    enclosing.sort_unstable();
    enclosing.dedup();
    for (start, end) in enclosing {
        if out.contains_key(&(start, end)) {
            continue;
        }
        let mut normal = String::new();
        let mut at = start;
        let first = identifiers.partition_point(|((s, _), _)| *s < start);
        for ((s, e), name) in identifiers[first..].iter().take_while(|((_, e), _)| *e <= end) {
            normal.push_str(text.get(at as usize..*s as usize).unwrap_or(""));
            normal.push_str(name);
            at = *e;
        }
        normal.push_str(text.get(at as usize..end as usize).unwrap_or(""));
        out.insert((start, end), normal.into_boxed_str());
    }
    out
}

/// Node kinds the walk up from an identifier stops at: statements and what holds them, whose
/// text is never read as a name.
fn ends_expressions(kind: &str) -> bool {
    kind.ends_with("statement")
        || kind.ends_with("definition")
        || matches!(kind, "module" | "block" | "ERROR" | "case_clause" | "decorator" | "parameters" | "argument_list")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<(String, String)> {
        let tree = crate::lower::parse(text).expect("parse");
        let mut out: Vec<(String, String)> = normalized_identifiers(text, tree.root_node())
            .into_iter()
            .map(|((s, e), n)| (text[s as usize..e as usize].to_string(), n.to_string()))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn identifiers_are_found_and_normalised_and_nothing_else_is() {
        // A ligature, a decomposed accent, fullwidth letters; in a string and a comment they stay.
        let text =
            "def \u{fb01}nd(cafe\u{301}):\n    \"\u{fb01}\"  # \u{fb01}\n    return \u{ff41}\u{ff42} + caf\u{e9}\n";
        assert_eq!(
            found(text),
            [
                ("cafe\u{301}".to_string(), "caf\u{e9}".to_string()),
                ("\u{fb01}nd".to_string(), "find".to_string()),
                ("\u{ff41}\u{ff42}".to_string(), "ab".to_string()),
                // The expression around it, read whole.
                ("\u{ff41}\u{ff42} + caf\u{e9}".to_string(), "ab + caf\u{e9}".to_string()),
            ]
        );
        // Already normal: nothing to record.
        assert!(found("caf\u{e9} = '\u{fb01}'\n").is_empty());
        assert!(found("x = 1\n").is_empty());
        // A space outside ASCII between tokens does not hide the identifier after it.
        assert!(found("x =\u{a0}\u{fb01}\n").contains(&("\u{fb01}".to_string(), "fi".to_string())));
        // The expressions around one are read whole: a dotted annotation, an isinstance argument.
        let text = "def f(x: pkg.\u{ff34}hing):\n    return isinstance(x, (pkg.\u{ff34}hing, int))\n";
        let found = found(text);
        assert!(found.contains(&("pkg.\u{ff34}hing".to_string(), "pkg.Thing".to_string())), "{found:?}");
        assert!(found.contains(&("(pkg.\u{ff34}hing, int)".to_string(), "(pkg.Thing, int)".to_string())), "{found:?}");
    }
}
