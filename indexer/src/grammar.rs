//! Python 3 grammar rules tree-sitter's grammar does not enforce.
//!
//! tree-sitter-python parses a superset of Python: it reads `def f(a=1, b)`, `f(**x, *y)` and
//! `del f()` without an error node, where Python's own parser raises `SyntaxError`. A file that
//! Python refuses must be flagged like any file that does not parse, so these rules are checked
//! here over the tree, apart from the lowering (which reads what the code means, not whether it
//! is allowed). Each rule names what Python refuses; the measure is `ast.parse` of Python 3.
//!
//! The walk is iterative: no input exhausts the stack.

use tree_sitter::Node;

use crate::lower::{NodeKind, kind_names};

/// The node kinds [`check`] has a rule for.
const CHECKED_KINDS: [&str; 14] = [
    "parameters",
    "lambda_parameters",
    "argument_list",
    "delete_statement",
    "with_item",
    "augmented_assignment",
    "for_in_clause",
    "list_comprehension",
    "set_comprehension",
    "generator_expression",
    "dictionary_comprehension",
    "tuple",
    "tuple_pattern",
    "parenthesized_expression",
];

/// The places where `root`'s tree breaks a rule of Python 3's grammar that tree-sitter accepts:
/// each node's start byte and what is wrong, in source order.
pub(crate) fn grammar_refusals(root: Node) -> Vec<(usize, &'static str)> {
    // The kinds `check` looks at, by id: every node of the tree is visited, most of them tokens.
    static CHECKED: std::sync::OnceLock<Vec<bool>> = std::sync::OnceLock::new();
    let checked = CHECKED.get_or_init(|| kind_names().iter().map(|kind| CHECKED_KINDS.contains(kind)).collect());
    let mut found = Vec::new();
    let mut cursor = root.walk();
    loop {
        let node = cursor.node();
        if checked.get(node.kind_id() as usize).copied().unwrap_or(true) {
            check(node, &mut found);
        }
        if cursor.goto_first_child() {
            continue;
        }
        loop {
            if cursor.goto_next_sibling() {
                break;
            }
            if !cursor.goto_parent() {
                found.sort_by_key(|(at, _)| *at);
                return found;
            }
        }
    }
}

/// The named children of `node` other than comments.
fn items(node: Node) -> Vec<Node> {
    let mut cursor = node.walk();
    node.named_children(&mut cursor).filter(|c| !c.is_extra()).collect()
}

fn has_comma(node: Node) -> bool {
    let mut cursor = node.walk();
    node.children(&mut cursor).any(|c| c.kind_str() == ",")
}

fn check(node: Node, found: &mut Vec<(usize, &'static str)>) {
    match node.kind_str() {
        "parameters" | "lambda_parameters" => check_parameters(node, found),
        "argument_list" => check_arguments(node, found),
        "delete_statement" => {
            for target in items(node) {
                check_target(target, "a `del` of something that is not a name, attribute or item", false, found);
            }
        }
        "with_item" => {
            // `with a as b` or, parenthesized, `with (a as b)`.
            let value = node.child_by_field_name("value").map(|v| {
                let inner = items(v);
                match inner.as_slice() {
                    [one] if v.kind_str() == "parenthesized_expression" => *one,
                    _ => v,
                }
            });
            let alias = value.filter(|v| v.kind_str() == "as_pattern").and_then(|v| {
                let mut cursor = v.walk();
                v.named_children(&mut cursor).find(|c| c.kind_str() == "as_pattern_target")
            });
            if let Some(alias) = alias {
                for target in items(alias) {
                    check_target(target, "a `with ... as` target that cannot be assigned", true, found);
                }
            }
        }
        "augmented_assignment" => {
            if let Some(left) = node.child_by_field_name("left") {
                let mut left = left;
                // `(a) += 1` is `a += 1`; `(a,) += 1` is a tuple.
                while matches!(left.kind_str(), "tuple_pattern" | "tuple" | "parenthesized_expression")
                    && !has_comma(left)
                    && items(left).len() == 1
                {
                    left = items(left)[0];
                }
                if !matches!(left.kind_str(), "identifier" | "attribute" | "subscript") {
                    found.push((left.start_byte(), "an augmented assignment (`+=`) to more than one target"));
                }
            }
        }
        // `[x for x in 1, 2]`, `[x for x in a,]`, `f(x for x in y, 1)`: a tuple after a
        // comprehension's `in` without parentheses.
        "for_in_clause" if has_comma(node) => {
            found.push((node.start_byte(), "an unparenthesized tuple after a comprehension's `in`"));
        }
        // `[*a for a in b]`, `(*a for a in b)`: unpacking as what a comprehension makes.
        "list_comprehension" | "set_comprehension" | "generator_expression" | "dictionary_comprehension"
            if node
                .child_by_field_name("body")
                .is_some_and(|b| matches!(b.kind_str(), "list_splat" | "dictionary_splat")) =>
        {
            found.push((node.start_byte(), "unpacking (`*`) as a comprehension's element"));
        }
        // `(*a)`, `(*a) = b`: a starred value in parentheses without a comma.
        "tuple" | "tuple_pattern" | "parenthesized_expression"
            if !has_comma(node)
                && matches!(items(node).as_slice(), [one] if matches!(one.kind_str(), "list_splat" | "list_splat_pattern")) =>
        {
            found.push((node.start_byte(), "a starred value in parentheses without a comma"));
        }
        _ => {}
    }
}

/// Parameters: no parameter without a default after one with a default (before `*`), nothing
/// after `**kwargs`, one `*` at most, a bare `*` followed by a named parameter, and one `/` at
/// most, after a parameter and before any `*`.
fn check_parameters(node: Node, found: &mut Vec<(usize, &'static str)>) {
    let mut seen_default = false;
    let mut seen_star = false;
    let mut seen_double_star = false;
    let mut seen_slash = false;
    let mut seen_parameter = false;
    let mut bare_star: Option<Node> = None;
    for p in items(node) {
        if seen_double_star {
            found.push((p.start_byte(), "a parameter after `**kwargs`"));
            return;
        }
        let first = p.named_child(0);
        let splat = |kind: &str| {
            p.kind_str() == kind || (p.kind_str() == "typed_parameter" && first.is_some_and(|f| f.kind_str() == kind))
        };
        if splat("dictionary_splat_pattern") {
            seen_double_star = true;
            continue;
        }
        if splat("list_splat_pattern") || p.kind_str() == "keyword_separator" {
            if seen_star {
                found.push((p.start_byte(), "a second `*` in the parameters"));
                return;
            }
            seen_star = true;
            if p.kind_str() == "keyword_separator" {
                bare_star = Some(p);
            }
            continue;
        }
        if p.kind_str() == "positional_separator" {
            let why = if seen_slash {
                "a second `/` in the parameters"
            } else if seen_star {
                "a `/` after `*`"
            } else if !seen_parameter {
                "a `/` before any parameter"
            } else {
                seen_slash = true;
                continue;
            };
            found.push((p.start_byte(), why));
            return;
        }
        seen_parameter = true;
        match p.kind_str() {
            "default_parameter" | "typed_default_parameter" => {
                seen_default = true;
                bare_star = None;
            }
            _ => {
                if seen_default && !seen_star {
                    found.push((p.start_byte(), "a parameter without a default after one with a default"));
                    return;
                }
                bare_star = None;
            }
        }
    }
    if let Some(star) = bare_star {
        found.push((star.start_byte(), "a bare `*` with no named parameter after it"));
    }
}

/// Arguments: no positional argument after a keyword argument or `**`, no `*` after `**`.
fn check_arguments(node: Node, found: &mut Vec<(usize, &'static str)>) {
    let mut seen_keyword = false;
    let mut seen_double_star = false;
    for a in items(node) {
        match a.kind_str() {
            "keyword_argument" => seen_keyword = true,
            "dictionary_splat" => seen_double_star = true,
            "list_splat" if seen_double_star => {
                found.push((a.start_byte(), "a `*` argument after a `**` argument"));
                return;
            }
            "list_splat" => {}
            _ if seen_double_star => {
                found.push((a.start_byte(), "a positional argument after a `**` argument"));
                return;
            }
            _ if seen_keyword => {
                found.push((a.start_byte(), "a positional argument after a keyword argument"));
                return;
            }
            _ => {}
        }
    }
}

/// A `del` or `with ... as` target: a name, an attribute, an item, or a tuple or list of those
/// (with `starred`, also a starred one: `with a as (b, *c)`).
fn check_target(target: Node, why: &'static str, starred: bool, found: &mut Vec<(usize, &'static str)>) {
    let mut pending = vec![target];
    while let Some(node) = pending.pop() {
        match node.kind_str() {
            "identifier" | "attribute" | "subscript" => {}
            "tuple"
            | "list"
            | "parenthesized_expression"
            | "expression_list"
            | "pattern_list"
            | "tuple_pattern"
            | "list_pattern" => pending.extend(items(node)),
            // `with a as *b` is read by Python's parser (its compiler refuses it).
            "list_splat" | "list_splat_pattern" if starred => pending.extend(items(node)),
            _ => {
                found.push((node.start_byte(), why));
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{CHECKED_KINDS, grammar_refusals};
    use crate::lower::kind_names;

    #[test]
    fn every_checked_kind_is_a_kind_of_the_grammar() {
        // A misspelt kind would turn its rule off without a sound.
        for kind in CHECKED_KINDS {
            assert!(kind_names().contains(&kind), "{kind} is no node kind of tree-sitter-python");
        }
    }

    fn refusals(source: &str) -> Vec<&'static str> {
        let mut parser = tree_sitter::Parser::new();
        parser.set_language(&tree_sitter_python::LANGUAGE.into()).expect("the Python grammar loads");
        let tree = parser.parse(source, None).expect("a tree");
        assert!(!tree.root_node().has_error(), "tree-sitter accepts {source:?}");
        grammar_refusals(tree.root_node()).into_iter().map(|(_, why)| why).collect()
    }

    /// Each refused line was checked with Python 3.11's `ast.parse`, which raises `SyntaxError`
    /// for it and accepts every line of the accepted list.
    #[test]
    fn what_python_refuses_and_tree_sitter_accepts_is_found() {
        let refused = [
            "def f(a=1, b): pass",
            "def f(a, b=1, /, c): pass",
            "g = lambda a=1, b: 0",
            "def f(*, **k): pass",
            "def f(a, *): pass",
            "def f(**k, a): pass",
            "f(**x, *y)",
            "f(a=1, b)",
            "f(**k, a)",
            "f(a=1, *b, c)",
            "class A(metaclass=M, B): pass",
            "del f()",
            "del 1",
            "del [a, f()]",
            "del *a",
            "with a as f(): pass",
            "a, b += 1",
            "(a,) += 1",
            "f(x for x in y, 1)",
            "[x for x in 1, 2]",
            "x = (*a)",
            "print((*a))",
            "(*a) = b",
            "for (*a) in b: pass",
            "[a for a in b,]",
            "f(x for x in a,)",
            "with (a as f()): pass",
            "with (a as (b, f())): pass",
            "def f(*a, *b): pass",
            "def f(*, *b): pass",
            "def f(/, a): pass",
            "def f(*a, /): pass",
            "def f(a, /, /): pass",
            "g = lambda /: 0",
            "x = (*a for a in b)",
            "x = [*a for a in b]",
            "x = f(*a for a in b)",
        ];
        for source in refused {
            assert_eq!(refusals(source).len(), 1, "{source}");
        }
        let accepted = [
            "def f(a, b=1, *args, c, d=2, **k): pass",
            "def f(*args: int, b, **k: int): pass",
            "def f(a, /, b=1, *, c): pass",
            "lambda *, a: 0",
            "def f(a, a): pass",
            "f(b=1, *a)",
            "f(*a, b)",
            "f(**a, b=1)",
            "print(*a, sep='')",
            "f((x for x in y), 1)",
            "f(x for x in y)",
            "class A(B, metaclass=M): pass",
            "del a, b",
            "del (a, b), [c]",
            "del a.b, a[1]",
            "with open(x) as (a, b): pass",
            "with a as (b, *c): pass",
            "with a as *b: pass",
            "with (a as b, c as (d, e)): pass",
            "def f(a, /): pass",
            "g = lambda a, /, b=1, *c, d, **e: 0",
            "x = (a)",
            "(a) = b",
            "with a as b.c, d as e[0]: pass",
            "(a) += 1",
            "a.b += 1",
            "for x in 1, 2: pass",
            "x = (*a,)",
            "[*a] = b",
            "x = [a for a in (1, 2) if a]",
            "x = [[*a] for a in b]",
            "x = {**a, 'k': 1}",
        ];
        for source in accepted {
            assert_eq!(refusals(source), Vec::<&str>::new(), "{source}");
        }
    }
}
