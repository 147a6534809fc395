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

/// Found in one walk of the tree, and only for a text whose characters are not all already
/// NFKC-normal (accented letters, CJK and the like are: such a file costs one scan of its
/// characters). The expressions around such an identifier that the lowering reads as a whole
/// ([`READ_WHOLE`]: an annotation, an `isinstance` argument, a dotted name, a `case` class) are
/// recorded too, with each of their identifiers normalised (`pkg.mod.Ｔhing` is
/// `pkg.mod.Thing`). The walk keeps its own path of ancestors: tree-sitter finds a node's
/// parent by walking down from the root, which made a long chain of operators cost the cube of
/// its length.
pub(super) fn normalized_identifiers(text: &str, root: Node) -> NormalizedIdentifiers {
    let mut out = NormalizedIdentifiers::default();
    if text.is_ascii() || is_nfkc_quick(text.chars()) == IsNormalized::Yes {
        return out;
    }
    let mut recorded: rustc_hash::FxHashSet<(u32, u32)> = Default::default();
    // How much text the enclosing expressions' copies may hold: a few times the file's (a file
    // of long chains of such names would otherwise hold a copy of each chain's every prefix).
    let mut budget = (4 * text.len()).max(1 << 16);
    // The ancestors of the node the cursor is on: kind and byte range.
    let mut path: Vec<(&str, std::ops::Range<usize>)> = Vec::new();
    let mut cursor = root.walk();
    'walk: loop {
        let node = cursor.node();
        if node.kind() == "identifier"
            && let Some(written) = text.get(node.byte_range())
            && !written.is_ascii()
            && is_nfkc_quick(written.chars()) != IsNormalized::Yes
        {
            let normal: String = written.nfkc().collect();
            if normal != written {
                out.insert((node.start_byte() as u32, node.end_byte() as u32), normal.into_boxed_str());
                // Up through what is read whole, however deep (`Optional[Optional[Ｆoo]]`), and
                // through operators (a union `A | Ｂ` in an annotation) without keeping a copy
                // of each: a long sum of such names kept one per term.
                // Each expression once (the walk up stops at one already recorded: what is
                // above it was recorded with it), none longer than ENCLOSING_BYTES (those above
                // are longer still), and within a budget of text for the whole file.
                // (A node and its parent can span the same bytes: `type` around a generic.)
                let mut last = (node.start_byte() as u32, node.end_byte() as u32);
                for (kind, range) in path.iter().rev() {
                    let key = (range.start as u32, range.end as u32);
                    let whole = READ_WHOLE.contains(kind);
                    if range.len() > ENCLOSING_BYTES
                        || (!whole && *kind != "binary_operator")
                        || (key != last && recorded.contains(&key))
                    {
                        break;
                    }
                    if whole && !recorded.contains(&key) && budget >= range.len() {
                        budget -= range.len();
                        recorded.insert(key);
                    }
                    last = key;
                }
            }
        }
        if cursor.goto_first_child() {
            path.push((node.kind(), node.byte_range()));
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                break 'walk;
            }
            path.pop();
        }
    }
    if out.is_empty() {
        return out;
    }
    // Each enclosing expression's text with the identifiers inside it normalised.
    let mut identifiers: Vec<((u32, u32), Box<str>)> = out.iter().map(|(r, n)| (*r, n.clone())).collect();
    identifiers.sort_unstable_by_key(|(r, _)| *r);
    let mut enclosing: Vec<(u32, u32)> = recorded.into_iter().collect();
    enclosing.sort_unstable();
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

/// The expressions whose text the lowering reads as a whole name or type: dotted names and
/// attributes, annotations (`type`, generics, subscripts, unions, `Callable`'s list), the tuple
/// of an `isinstance`, a `case` class pattern's name.
const READ_WHOLE: &[&str] = &[
    "attribute",
    "dotted_name",
    "type",
    "generic_type",
    "subscript",
    "tuple",
    "parenthesized_expression",
    "list",
    "union_type",
    "type_parameter",
    "class_pattern",
];

/// The longest enclosing expression recorded (a longer one is no name or type a reader needs).
const ENCLOSING_BYTES: usize = 2048;

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
            ]
        );
        // Already normal: nothing to record.
        assert!(found("caf\u{e9} = '\u{fb01}'\n").is_empty());
        assert!(found("x = 1\n").is_empty());
        // A space outside ASCII between tokens does not hide the identifier after it.
        assert!(found("x =\u{a0}\u{fb01}\n").contains(&("\u{fb01}".to_string(), "fi".to_string())));
        // The expressions around one are read whole: a dotted annotation, an isinstance argument.
        let text = "def f(x: pkg.\u{ff34}hing):\n    return isinstance(x, (pkg.\u{ff34}hing, int))\n";
        let dotted = found(text);
        assert!(dotted.contains(&("pkg.\u{ff34}hing".to_string(), "pkg.Thing".to_string())), "{dotted:?}");
        assert!(
            dotted.contains(&("(pkg.\u{ff34}hing, int)".to_string(), "(pkg.Thing, int)".to_string())),
            "{dotted:?}"
        );
        // However deep, and through a union's operator.
        let text = "def g(x: Optional[Optional[Optional[\u{ff26}oo]]], y: int | \u{ff26}oo):\n    pass\n";
        let deep = found(text);
        for whole in ["Optional[Optional[Optional[Foo]]]", "int | Foo"] {
            assert!(deep.iter().any(|(_, normal)| normal == whole), "{whole}: {deep:?}");
        }
    }
}
