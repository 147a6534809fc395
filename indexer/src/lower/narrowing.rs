//! `isinstance` narrowing: what an `if isinstance(x, C)` (or an early exit unless it holds)
//! tells about a name or an attribute in the code it guards, until the name is bound again.

use super::*;

/// The modules `TYPE_CHECKING` is taken from.
fn is_typing_module(module: &ModuleRef) -> bool {
    module.level == 0 && matches!(module.name.as_str(), "typing" | "typing_extensions")
}

/// How many tests found false on its names an `elif`/`else` chain carries (see
/// [`Lowerer::if_clause`]): each clause after them holds them all, so a chain of thousands cost
/// quadratic memory.
const MAX_TESTS_FOUND_FALSE: usize = 16;

impl<'a> Lowerer<'a> {
    /// Lowers `if`/`elif` with the `isinstance` tests its condition makes in force over its
    /// body. Python runs the body only when they hold, so `x.close()` under
    /// `if isinstance(x, Conn):` calls `Conn.close` (and an override, if what `x` holds is a
    /// subclass); what `x` holds otherwise that is not a `Conn` is not looked at there. The
    /// children are lowered in their order, as the other compound statements' are. A name
    /// bound again inside the body loses the narrowing after that statement (see
    /// [`Self::end_rebound_narrowings`]).
    /// The clause of `if` statement `node` that always runs when the program runs: the `else`
    /// of `if TYPE_CHECKING:` (with no `elif`), the body of `if not TYPE_CHECKING:` (with no
    /// other clause: the type checker's bindings would come after the program's, and nothing
    /// drops a later binding).
    fn clause_run_time_always_runs<'n>(
        &self,
        node: Node<'n>,
        children: &[Node<'n>],
        scope: ScopeId,
    ) -> Option<Node<'n>> {
        if node.kind_str() != "if_statement" {
            return None;
        }
        let condition = node.field("condition")?;
        if self.is_type_checking(condition, scope) {
            let mut clauses = children.iter().filter(|c| matches!(c.kind_str(), "elif_clause" | "else_clause"));
            return match (clauses.next(), clauses.next()) {
                (Some(only), None) if only.kind_str() == "else_clause" => Some(*only),
                _ => None,
            };
        }
        let negated = condition.kind_str() == "not_operator"
            && condition.field("argument").is_some_and(|a| self.is_type_checking(a, scope))
            && !children.iter().any(|c| matches!(c.kind_str(), "elif_clause" | "else_clause"));
        if negated { node.field("consequence") } else { None }
    }

    /// Whether `condition` is `TYPE_CHECKING` as `typing` (or `typing_extensions`) defines it:
    /// the name imported from there (`from typing import TYPE_CHECKING [as TC]`), or read from
    /// the module (`typing.TYPE_CHECKING`, `import typing as t` then `t.TYPE_CHECKING`); every
    /// binding of the name in view is such an import, or a boolean the module gives a name
    /// `TYPE_CHECKING` itself (`= False`: a `= True` is not told apart). A class's attribute of
    /// that name is not it. True for type checkers only, false whenever the program runs.
    fn is_type_checking(&self, condition: Node, scope: ScopeId) -> bool {
        let only = |name: &str, is: &dyn Fn(&Binding) -> bool| {
            let mut s = scope;
            loop {
                let sc = &self.scopes[s as usize];
                if sc.binds(name) {
                    return sc.bindings_of(name).all(is);
                }
                match sc.parent {
                    Some(p) => s = p,
                    None => return false,
                }
            }
        };
        let imported = |b: &Binding| {
            matches!(b, Binding::Import(Import::Name { module, name })
                if is_typing_module(module) && name == "TYPE_CHECKING")
        };
        match condition.kind_str() {
            // Imported under any name (`as TC`); or a flag of that name the module sets to a
            // boolean itself (`TYPE_CHECKING = False`, also as the fallback of a `try` importing
            // it), which only a type checker reads as true.
            "identifier" => {
                let name = self.text(condition);
                only(name, &imported)
                    || (name == "TYPE_CHECKING"
                        && only(name, &|b| imported(b) || matches!(b, Binding::Value(Expr::Literal("bool")))))
            }
            "attribute" => {
                let (Some(object), Some(attribute)) = (condition.field("object"), condition.field("attribute")) else {
                    return false;
                };
                object.kind_str() == "identifier"
                    && self.text(attribute) == "TYPE_CHECKING"
                    && only(
                        self.text(object),
                        &|b| matches!(b, Binding::Import(Import::Module { module }) if is_typing_module(module)),
                    )
            }
            _ => false,
        }
    }

    pub(super) fn if_clause(&mut self, node: Node, scope: ScopeId) {
        let condition = node.field("condition");
        let tests = condition.map(|c| self.instance_tests(c, scope)).unwrap_or_default();
        // `if (x := make()) is not None:` binds `x` before the body runs.
        if let Some(condition) = condition {
            self.end_rebound_narrowings(condition, scope);
        }
        let consequence = node.field("consequence");
        // What the `elif` and `else` clauses after it know: that the conditions before them were
        // false. Only a condition that is one test says something then (`isinstance(x, A) and
        // ready` may be false with `x` an `A`).
        let mut found_false: Vec<(Name, Expr, bool)> = Vec::new();
        if node.kind_str() == "if_statement" {
            found_false.extend(condition.and_then(|c| self.sole_instance_test(c, scope)));
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let always_at_run_time = self.clause_run_time_always_runs(node, &children, scope);
        for child in children {
            if Some(child) == always_at_run_time {
                // Not conditional where the program runs: its bindings replace earlier ones as
                // the statement's own would (`if TYPE_CHECKING: from .real import helper`, `else:
                // def helper(): ...`: a call reaches the `def`, never the import).
                self.conditional_depth = self.conditional_depth.saturating_sub(1);
                let outer = std::mem::replace(&mut self.in_run_time_alternative, true);
                self.statement(child, scope);
                self.in_run_time_alternative = outer;
                self.conditional_depth += 1;
                continue;
            }
            if Some(child) == consequence && !tests.is_empty() {
                let before = self.narrowings.len();
                for (name, ty) in &tests {
                    self.narrowings.push(Narrowing { scope, name: name.clone(), ty: Some(ty.clone()), negated: false });
                }
                self.statement(child, scope);
                self.narrowings.truncate(before);
            } else if matches!(child.kind_str(), "elif_clause" | "else_clause") {
                // Every clause adds what its condition says when found false, whether the
                // conditions before it said anything (`if x is None: ... elif isinstance(x, A):
                // ... else:`).
                let before = self.narrowings.len();
                self.push_found_false(&found_false, scope);
                self.statement(child, scope);
                self.narrowings.truncate(before);
                if let Some(condition) = child.field("condition") {
                    // A name the condition binds again (`elif (x := make()) is None:`) is what it
                    // was bound to in the clauses after it: neither the narrowings in force (the
                    // end the condition put on them was dropped with the clause's own) nor this
                    // chain's tests say anything of it there.
                    self.end_rebound_narrowings(condition, scope);
                    let mut bound = Vec::new();
                    self.bound_keys(condition, &mut bound, 0);
                    found_false.retain(|(name, _, _)| !binds_again(&bound, name.as_str()));
                    found_false.extend(self.sole_instance_test(condition, scope));
                    // A long chain of tests on one name (generated code) says "none of these" about
                    // it after too many to be worth carrying: the last clauses see the name as it is.
                    if found_false.len() > MAX_TESTS_FOUND_FALSE {
                        found_false.clear();
                    }
                }
            } else if is_statement_like(child.kind_str()) {
                self.statement(child, scope);
            } else if Some(child) == condition {
                self.condition(child, scope);
            } else {
                self.expr(child, scope);
            }
        }
    }

    /// Puts in force what the false conditions `found_false` say (see [`Self::sole_instance_test`]):
    /// per name, the classes it is not an instance of (all the tests found false), or the class
    /// it is one of (a `not isinstance` found false).
    fn push_found_false(&mut self, found_false: &[(Name, Expr, bool)], scope: ScopeId) {
        let mut names: Vec<&Name> = Vec::new();
        for (name, _, _) in found_false {
            if !names.contains(&name) {
                names.push(name);
            }
        }
        for name in names {
            let excluded: Vec<Expr> =
                found_false.iter().filter(|(n, _, holds)| n == name && !holds).map(|(_, ty, _)| ty.clone()).collect();
            if !excluded.is_empty() {
                let ty = if excluded.len() == 1 { excluded[0].clone() } else { Expr::Union(excluded) };
                self.narrowings.push(Narrowing { scope, name: name.clone(), ty: Some(ty), negated: true });
            }
            // `if not isinstance(x, T): ... else:` (the last such test, as for an `if`).
            if let Some((_, ty, _)) = found_false.iter().rev().find(|(n, _, holds)| n == name && *holds) {
                self.narrowings.push(Narrowing { scope, name: name.clone(), ty: Some(ty.clone()), negated: false });
            }
        }
    }

    /// A condition that is one `isinstance(name, T)` test, or `not` one (parenthesised or not):
    /// the name, T, and whether the test holds when the condition is false (`not isinstance`).
    /// Only a T written with names the code of `scope` does not bind itself (a class of the
    /// module or one it imports): `isinstance(obj, kind)` with `kind` a parameter may test any
    /// class its callers pass, and found false it rules out none of them in particular.
    pub(super) fn sole_instance_test(&self, condition: Node, scope: ScopeId) -> Option<(Name, Expr, bool)> {
        let (call, negated) = sole_call(condition)?;
        if self.names_a_local(tested_class(call)?, scope) {
            return None;
        }
        self.instance_test(call, scope).map(|(name, ty)| (name, ty, negated))
    }

    /// Whether a class expression of an `isinstance` test (a name, an attribute chain, a tuple of
    /// them) starts with a name a function around `scope` binds (a parameter, a local).
    fn names_a_local(&self, class: Node, scope: ScopeId) -> bool {
        let mut leftmost = class;
        while leftmost.kind_str() == "attribute" {
            match leftmost.field("object") {
                Some(object) => leftmost = object,
                None => return true,
            }
        }
        match leftmost.kind_str() {
            "identifier" => {
                let name = self.text(leftmost);
                let mut s = scope;
                while s != 0 {
                    let sc = &self.scopes[s as usize];
                    if sc.kind != ScopeKind::Class && sc.binds(name) {
                        return true;
                    }
                    let Some(parent) = sc.parent else { return false };
                    s = parent;
                }
                false
            }
            "tuple" | "parenthesized_expression" => {
                let mut cursor = leftmost.walk();
                let items: Vec<Node> = leftmost.named_children(&mut cursor).collect();
                items.into_iter().any(|item| item.kind_str() != "comment" && self.names_a_local(item, scope))
            }
            // Anything else is not a test `instance_test` takes.
            _ => true,
        }
    }

    /// The `isinstance(name, T)` tests that hold when `condition` is true: the test itself, or
    /// any operand of an `and` (parenthesised or not). Only names other than `self` and `cls`
    /// and attribute chains on names (`self.conn`), and classes written as names, attribute
    /// chains or a tuple of them.
    pub(super) fn instance_tests(&self, condition: Node, scope: ScopeId) -> Vec<(Name, Expr)> {
        let mut out = Vec::new();
        self.collect_instance_tests(condition, scope, &mut out, 0);
        out
    }

    pub(super) fn collect_instance_tests(&self, node: Node, scope: ScopeId, out: &mut Vec<(Name, Expr)>, depth: u32) {
        if depth > MAX_NESTING {
            return;
        }
        match node.kind_str() {
            "parenthesized_expression" => {
                if let Some(inner) = node.named_child(0) {
                    self.collect_instance_tests(inner, scope, out, depth + 1);
                }
            }
            "boolean_operator" if node.child_by_field_name("operator").is_some_and(|o| o.kind_str() == "and") => {
                for side in [node.field("left"), node.field("right")].into_iter().flatten() {
                    self.collect_instance_tests(side, scope, out, depth + 1);
                }
            }
            "call" => out.extend(self.instance_test(node, scope)),
            _ => {}
        }
    }

    /// `isinstance(name, T)` as the name and the instance type T names.
    pub(super) fn instance_test(&self, call: Node, scope: ScopeId) -> Option<(Name, Expr)> {
        let function = call.field("function")?;
        if function.kind_str() != "identifier" || self.text(function) != "isinstance" {
            return None;
        }
        let arguments = call.field("arguments")?;
        let mut cursor = arguments.walk();
        let args: Vec<Node> = arguments.named_children(&mut cursor).filter(|a| a.kind_str() != "comment").collect();
        let [subject, class] = args.as_slice() else { return None };
        let name = self.subject_key(*subject, 0)?;
        if name == "self" || name == "cls" {
            return None;
        }
        let is_class_name = |n: &Node| matches!(n.kind_str(), "identifier" | "attribute");
        let classes: Vec<&str> = match class.kind_str() {
            "tuple" => {
                let mut cursor = class.walk();
                let items: Vec<Node> =
                    class.named_children(&mut cursor).filter(|a| a.kind_str() != "comment").collect();
                if items.is_empty() || !items.iter().all(is_class_name) {
                    return None;
                }
                items.iter().map(|i| self.text(*i)).collect()
            }
            _ if is_class_name(class) => vec![self.text(*class)],
            _ => return None,
        };
        let ty = self.type_of(&classes.join(" | "), scope);
        (ty != Expr::Unknown).then(|| (Name::new(&name), ty))
    }

    /// What an `isinstance` test narrows, as written: a name, or an attribute chain on one
    /// (`self.conn`, `node.parent`), dots between the parts whatever the spacing; `None` for
    /// anything else (a call, a subscript: the next evaluation may give another value).
    pub(super) fn subject_key(&self, node: Node, depth: u32) -> Option<String> {
        if depth > MAX_NESTING {
            return None;
        }
        match node.kind_str() {
            "identifier" => Some(self.text(node).to_string()),
            "attribute" => {
                let object = self.subject_key(node.field("object")?, depth + 1)?;
                Some(format!("{object}.{}", self.text(node.field("attribute")?)))
            }
            _ => None,
        }
    }

    /// The narrowings `statement` puts in force for the rest of its block: an `if` with no
    /// `elif`/`else` whose body always leaves the block (its last statement is `raise`,
    /// `return`, `continue` or `break`) and whose condition is `not isinstance(name, T)` (the
    /// rest runs for a T) or `isinstance(name, T)` alone (the rest runs for anything else, as an
    /// `else` would; see [`Self::sole_instance_test`]). Each with whether it is negated.
    pub(super) fn exit_narrowings(&self, statement: Node, scope: ScopeId) -> Vec<(Name, Expr, bool)> {
        if statement.kind_str() != "if_statement" || statement.child_by_field_name("alternative").is_some() {
            return Vec::new();
        }
        let Some((call, negated)) = statement.field("condition").and_then(sole_call) else { return Vec::new() };
        let leaves = statement
            .field("consequence")
            .and_then(|b| b.named_children(&mut b.walk()).filter(|c| !c.is_extra()).last());
        let always_leaves = leaves.is_some_and(|last| {
            matches!(last.kind_str(), "raise_statement" | "return_statement" | "continue_statement" | "break_statement")
        });
        if !always_leaves {
            return Vec::new();
        }
        if negated {
            // `if not isinstance(x, kind): raise`: the rest runs for what `kind` holds, whatever
            // it is (a parameter too).
            self.instance_test(call, scope).into_iter().map(|(name, ty)| (name, ty, false)).collect()
        } else {
            self.sole_instance_test(call, scope).map(|(name, ty, _)| (name, ty, true)).into_iter().collect()
        }
    }

    /// Ends, for the rest of the block, the narrowings in force in `scope` whose name
    /// `statement` binds again anywhere in it (`x = make()`, `x += 1`, `for x in ...`,
    /// `with ... as x`, `(x := ...)`, `except E as x`, `del x`, a `def` or `class` of the name,
    /// an import of it), or whose attribute chain it binds a prefix of (`self.conn = ...` and
    /// `self = ...` end `self.conn`'s). A binding inside a nested `if` may or may not have run:
    /// either way the test no longer says what the name holds.
    pub(super) fn end_rebound_narrowings(&mut self, statement: Node, scope: ScopeId) {
        if !self.narrowings.iter().any(|n| n.scope == scope && n.ty.is_some()) {
            return;
        }
        let mut bound = Vec::new();
        self.bound_keys(statement, &mut bound, 0);
        if bound.is_empty() {
            return;
        }
        let rebinds = |name: &str| binds_again(&bound, name);
        let ended: Vec<Name> = self
            .narrowings
            .iter()
            .filter(|n| n.scope == scope && n.ty.is_some() && rebinds(n.name.as_str()))
            .map(|n| n.name.clone())
            .collect();
        for name in ended {
            self.narrowings.push(Narrowing { scope, name, ty: None, negated: false });
        }
    }

    /// The names and attribute chains `node` binds in the scope it runs in (not in nested
    /// functions, classes, lambdas or comprehensions, which have scopes of their own; a `def`
    /// or `class` binds its own name).
    pub(super) fn bound_keys(&self, node: Node, out: &mut Vec<String>, depth: u32) {
        if depth > MAX_NESTING {
            return;
        }
        match node.kind_str() {
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
                if node
                    .parent()
                    .is_some_and(|p| matches!(p.kind_str(), "import_statement" | "import_from_statement")) =>
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
            if node.kind_str() == "import_from_statement" && node.field("module_name") == Some(child) {
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
    pub(super) fn rebinds_to_own_method_result(&self, assignment: Node) -> bool {
        let (Some(left), Some(right)) = (assignment.field("left"), assignment.field("right")) else { return false };
        let Some(target) = self.subject_key(left, 0) else { return false };
        right.kind_str() == "call"
            && right.field("function").is_some_and(|f| {
                f.kind_str() == "attribute"
                    && f.field("object").and_then(|o| self.subject_key(o, 0)).as_deref() == Some(&*target)
            })
    }

    /// The names and attribute chains a binding target binds: `x`, `self.conn`, each name of
    /// `a, (b, *c)`; a subscript (`x[0] = ...`) binds none.
    pub(super) fn target_keys(&self, target: Node, out: &mut Vec<String>, depth: u32) {
        if depth > MAX_NESTING {
            return;
        }
        match target.kind_str() {
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
    pub(super) fn narrowed_object(&mut self, object: Node, scope: ScopeId) -> Option<Expr> {
        let (holds, found_false) = self.narrowing_of(object, scope)?;
        let read = self.chain(object, scope);
        Some(narrowed(holds, found_false, read))
    }

    /// `read`, the value of the name or attribute chain `node`, as the `isinstance` tests in
    /// force narrow it: what `for item in x` iterates and `f(x)` passes under
    /// `if isinstance(x, T):`.
    pub(super) fn narrowed_read(&self, node: Node, scope: ScopeId, read: Expr) -> Expr {
        match self.narrowing_of(node, scope) {
            Some((holds, found_false)) => narrowed(holds, found_false, read),
            None => read,
        }
    }

    /// The `isinstance` tests in force on the name or attribute chain `node` in `scope`, back to
    /// the statement that last bound it: the innermost test that holds, if any, and the types of
    /// the tests found false (`elif isinstance(x, Mapping):` after `if isinstance(x, Headers):`
    /// holds a `Mapping` that is no `Headers`).
    fn narrowing_of(&self, node: Node, scope: ScopeId) -> Option<(Option<Expr>, Vec<Expr>)> {
        if self.narrowings.is_empty() {
            return None;
        }
        let key = self.subject_key(node, 0)?;
        let (mut holds, mut found_false) = (None, Vec::new());
        for narrowing in self.narrowings.iter().rev().filter(|n| n.scope == scope && n.name == key) {
            let Some(ty) = &narrowing.ty else { break };
            if narrowing.negated {
                found_false.push(ty.clone());
            } else if holds.is_none() {
                holds = Some(ty.clone());
            }
        }
        (holds.is_some() || !found_false.is_empty()).then_some((holds, found_false))
    }
}

/// Whether binding the names and attribute chains `bound` binds `key` again: `key` itself, or a
/// prefix of its chain (`self = ...` and `self.conn = ...` both end `self.conn`'s narrowing).
pub(super) fn binds_again(bound: &[String], key: &str) -> bool {
    bound.iter().any(|b| key == b || key.strip_prefix(b.as_str()).is_some_and(|rest| rest.starts_with('.')))
}

/// The call of a condition that is one call, under any parentheses and `not`s: the call and
/// whether the `not`s negate it.
fn sole_call(condition: Node) -> Option<(Node, bool)> {
    let mut node = condition;
    let mut negated = false;
    for _ in 0..MAX_NESTING {
        match node.kind_str() {
            "parenthesized_expression" => node = node.named_child(0)?,
            "not_operator" => {
                negated = !negated;
                node = node.field("argument")?;
            }
            "call" => return Some((node, negated)),
            _ => return None,
        }
    }
    None
}

/// The class argument of an `isinstance(value, class)` call (its second argument).
fn tested_class(call: Node) -> Option<Node> {
    let arguments = call.field("arguments")?;
    let mut cursor = arguments.walk();
    arguments.named_children(&mut cursor).filter(|c| c.kind_str() != "comment").nth(1)
}

/// `read` where the `isinstance` test `holds` holds and those of `found_false` were found false.
fn narrowed(holds: Option<Expr>, mut found_false: Vec<Expr>, read: Expr) -> Expr {
    let read = match found_false.len() {
        0 => read,
        1 => Expr::NotInstance(Box::new(found_false.remove(0)), Box::new(read)),
        _ => Expr::NotInstance(Box::new(Expr::Union(found_false)), Box::new(read)),
    };
    match holds {
        Some(ty) => Expr::Narrowed(Box::new(ty), Box::new(read)),
        None => read,
    }
}
