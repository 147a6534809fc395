//! Statements: a block's statements in order, each lowered by its kind; Python 2 code refused
//! (at the column Python's tokenizer counts); `with` items and walrus targets.

use super::*;

impl<'a> Lowerer<'a> {
    /// Lowers a block's statements in order, with the `isinstance` narrowings in force.
    pub(super) fn block(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        self.check_statements(node, &children);
        let narrowed_before = self.narrowings.len();
        for child in children {
            // A loop that binds the name anywhere (its target, or its body for the next
            // iteration) ends the test before its body runs; so does `with ... as name`.
            if matches!(child.kind_str(), "for_statement" | "while_statement" | "with_statement") {
                self.end_rebound_narrowings(child, scope);
            }
            self.statement(child, scope);
            self.end_rebound_narrowings(child, scope);
            // `if not isinstance(x, T): raise ...`: the rest of the block runs only for a T;
            // after `if isinstance(x, T): return ...`, only for what is not one.
            for (name, ty, negated) in self.exit_narrowings(child, scope) {
                self.narrowings.push(Narrowing { scope, name, ty: Some(ty), negated });
            }
        }
        self.narrowings.truncate(narrowed_before);
    }

    /// The column a node starts at as Python's tokenizer counts indentation: past a byte order
    /// mark, and from the last form feed before it.
    pub(super) fn indentation_column(&self, node: Node) -> usize {
        let position = node.start_position();
        let mut column = position.column;
        if position.row == 0 && self.src.starts_with('\u{feff}') {
            column -= '\u{feff}'.len_utf8().min(column);
        }
        let indentation = self.src.get(node.start_byte() - column..node.start_byte()).unwrap_or("");
        match indentation.rfind('\u{c}') {
            Some(feed) => indentation.len() - feed - 1,
            None => column,
        }
    }

    /// Counts a Python 2 form Python 3 refuses and tree-sitter accepts (`raise E, message`, `0777`).
    pub(super) fn refuse_python2(&mut self, node: Node, why: &'static str) {
        self.refused_statements += 1;
        self.refusal(node.start_byte(), why);
    }

    /// Records a refusal at byte `at` of the text being lowered, when it is the first so far.
    pub(super) fn refusal(&mut self, at: usize, why: &'static str) {
        let at = at as u32;
        if self.first_refusal.is_none_or(|(first, _)| at < first) {
            self.first_refusal = Some((at, why));
        }
    }

    /// Counts the statements of a block (or the module) that tree-sitter accepts and Python
    /// refuses, so that such a file is flagged:
    /// - a statement not at the block's indentation: tree-sitter reads a method indented by
    ///   three spaces among methods indented by four as a function of the module; Python raises
    ///   `IndentationError` (or `TabError`, for tabs and spaces mixed);
    /// - two statements on one line without a `;` between them (`1abc` is `1` then `abc` to
    ///   tree-sitter, an invalid literal to Python);
    /// - Python 2's `print x` and `exec code` statements (not `print >>f, x`, a tuple to Python 3).
    pub(super) fn check_statements(&mut self, block: Node, statements: &[Node]) {
        let mut expected = (block.kind_str() == "module").then_some(0);
        let mut last: Option<Node> = None;
        for statement in statements {
            // Comments and line continuations (`\`) are extras, not statements.
            if statement.is_extra() || statement.is_error() {
                continue;
            }
            // `print >>f, x` is a tuple to Python 3 (of `print >> f` and `x`), not refused.
            let chevron = statement.named_child(0).is_some_and(|c| c.kind_str() == "chevron");
            if matches!(statement.kind_str(), "print_statement" | "exec_statement") && !chevron {
                self.refused_statements += 1;
                self.refusal(statement.start_byte(), "a Python 2 print or exec statement");
            }
            let mut start = statement.start_position();
            start.column = self.indentation_column(*statement);
            let previous = last.replace(*statement);
            // A statement after `;` shares its line with the one before.
            if let Some(previous) = previous.filter(|p| p.end_position().row == start.row) {
                let between = self.src.get(previous.end_byte()..statement.start_byte()).unwrap_or("");
                if !between.contains(';') {
                    self.refused_statements += 1;
                    self.refusal(statement.start_byte(), "two statements on one line without \";\" between them");
                }
                continue;
            }
            match expected {
                None => expected = Some(start.column),
                Some(column) if column != start.column => {
                    self.refused_statements += 1;
                    self.refusal(statement.start_byte(), "a statement not at its block's indentation");
                }
                Some(_) => {}
            }
            // An `elif`/`else`/`except`/`finally` clause belongs at its statement's column;
            // tree-sitter attaches one typed elsewhere to the statement all the same.
            let mut cursor = statement.walk();
            let misplaced = statement
                .named_children(&mut cursor)
                .filter(|c| {
                    matches!(
                        c.kind_str(),
                        "elif_clause" | "else_clause" | "except_clause" | "except_group_clause" | "finally_clause"
                    )
                })
                .filter(|c| self.indentation_column(*c) != start.column)
                .map(|c| c.start_byte())
                .collect::<Vec<_>>();
            self.refused_statements += misplaced.len() as u32;
            if let Some(&at) = misplaced.first() {
                self.refusal(at, "a clause not at its statement's indentation");
            }
        }
    }

    pub(super) fn statement(&mut self, node: Node, scope: ScopeId) {
        self.statement_start = node.start_byte();
        let conditional = matches!(
            node.kind_str(),
            "if_statement"
                | "for_statement"
                | "while_statement"
                | "try_statement"
                | "with_statement"
                | "match_statement"
        );
        if conditional {
            self.conditional_depth += 1;
        }
        self.nested((), |l| l.statement_inner(node, scope));
        if conditional {
            self.conditional_depth -= 1;
        }
    }

    pub(super) fn statement_inner(&mut self, node: Node, scope: ScopeId) {
        match node.kind_str() {
            "comment" => {}
            "function_definition" => self.function(node, node, scope, Vec::new()),
            "class_definition" => self.class(node, node, scope, Vec::new()),
            "decorated_definition" => self.decorated(node, scope),
            "expression_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind_str() {
                        "assignment" => {
                            self.assignment(child, node, scope);
                        }
                        "augmented_assignment" => self.augmented(child, node, scope),
                        _ => {
                            self.expr(child, scope);
                        }
                    }
                }
            }
            "return_statement" => {
                let values = self.named_exprs(node, scope);
                let value = match values.len() {
                    0 => Expr::Literal("NoneType"),
                    1 => values.into_iter().next().unwrap_or(Expr::Unknown),
                    _ => Expr::Container(ContainerKind::Tuple, values),
                };
                self.scope(scope).returns.push(value);
            }
            "raise_statement" => {
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                if children.first().is_some_and(|c| c.kind_str() == "expression_list") {
                    self.refuse_python2(node, "a Python 2 `raise E, message`");
                }
                for (i, child) in children.into_iter().enumerate() {
                    let e = self.expr(child, scope);
                    if i == 0 {
                        self.scope(scope).raises.push((e, line(node)));
                    }
                }
            }
            "type_alias_statement" => self.type_alias(node, scope),
            "import_statement" => self.import(node, scope),
            "import_from_statement" => self.import_from(node, scope),
            "future_import_statement" => {}
            "global_statement" | "nonlocal_statement" => {
                let mut cursor = node.walk();
                let names: Vec<Name> = node.named_children(&mut cursor).map(|n| Name::new(self.text(n))).collect();
                if node.kind_str() == "global_statement" {
                    self.scope(scope).globals.extend(names);
                } else {
                    self.scope(scope).nonlocals.extend(names);
                }
            }
            "for_statement" => {
                let right = node.field("right");
                let iter = right.map(|r| self.expr(r, scope)).unwrap_or(Expr::Unknown);
                if let Some(r) = right {
                    let is_async = node.child(0).is_some_and(|c| c.kind_str() == "async");
                    self.scope(scope).iterations.push((iter.clone(), line(r), is_async));
                }
                if let Some(left) = node.field("left") {
                    self.bind_target(left, Binding::Iter(iter), scope, None);
                }
                for field in ["body", "alternative"] {
                    if let Some(b) = node.field(field) {
                        self.statement(b, scope);
                    }
                }
            }
            "with_statement" => {
                let is_async = node.child(0).is_some_and(|c| c.kind_str() == "async");
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    if child.kind_str() == "with_clause" {
                        let mut c2 = child.walk();
                        let items: Vec<Node> = child.named_children(&mut c2).collect();
                        for item in items {
                            self.with_item(item, scope, is_async);
                        }
                    } else {
                        self.statement(child, scope);
                    }
                }
            }
            "except_clause" => {
                let value = node.field("value");
                let alias = node.field("alias");
                // `except* E as eg`: `eg` is an ExceptionGroup holding E's, not an E.
                let caught = if node.children(&mut node.walk()).any(|c| c.kind_str() == "*") {
                    Caught::Group
                } else {
                    Caught::Exception
                };
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                let mut exc = Expr::Unknown;
                for child in children {
                    if Some(child) == value && child.kind_str() == "as_pattern" {
                        // `except E as e`: tree-sitter-python 0.25 puts both in one as_pattern.
                        self.with_item_pattern(child, scope, caught);
                    } else if Some(child) == value {
                        exc = self.expr(child, scope);
                    } else if Some(child) == alias {
                        continue;
                    } else if child.kind_str() == "as_pattern" {
                        // Older layouts: `except E as e` as one as_pattern.
                        self.with_item_pattern(child, scope, caught);
                    } else if child.kind_str() == "block" {
                        if let Some(alias) = alias {
                            let binding = caught.binding(exc.clone());
                            self.bind_target(alias, binding, scope, None);
                        }
                        self.block(child, scope);
                    } else {
                        exc = self.expr(child, scope);
                    }
                }
            }
            "block" => self.block(node, scope),
            "if_statement" | "elif_clause" => self.if_clause(node, scope),
            "match_statement" => {
                // What the `case` class patterns narrow: the subject, when it is a name or an
                // attribute chain (`match shape:`, `match self.node:`).
                let subject = node.field("subject").and_then(|s| self.subject_key(s, 0)).map(|k| Name::new(&k));
                self.match_subjects.push(subject);
                self.children_in_order(node, scope);
                self.match_subjects.pop();
            }
            "else_clause"
            | "while_statement"
            | "try_statement"
            | "finally_clause"
            | "except_group_clause"
            | "ERROR" => self.children_in_order(node, scope),
            "case_clause" => {
                // `case Circle():` holds only for a Circle: the subject is one in the body, as
                // under `if isinstance(shape, Circle):`.
                let narrowed_before = self.narrowings.len();
                let mut cursor = node.walk();
                let children: Vec<Node> = node.named_children(&mut cursor).collect();
                for child in children {
                    match child.kind_str() {
                        "case_pattern" => {
                            self.pattern(child, scope);
                            let classes = case_classes(child, &|n| self.text(n));
                            if let (Some(Some(subject)), false) = (self.match_subjects.last(), classes.is_empty()) {
                                let ty = crate::annotation::type_expr(&classes.join(" | "));
                                if ty != Expr::Unknown {
                                    let name = subject.clone();
                                    self.narrowings.push(Narrowing { scope, name, ty: Some(ty), negated: false });
                                }
                            }
                        }
                        kind if is_statement_like(kind) => self.statement(child, scope),
                        // `case x if ready:`: the guard is tested for truth.
                        "if_clause" => {
                            let mut guard_cursor = child.walk();
                            let conditions: Vec<Node> = child.named_children(&mut guard_cursor).collect();
                            for condition in conditions {
                                self.condition(condition, scope);
                            }
                        }
                        _ => {
                            self.expr(child, scope);
                        }
                    }
                }
                self.narrowings.truncate(narrowed_before);
            }
            "pass_statement" | "break_statement" | "continue_statement" => {}
            // `del x` in a function makes `x` local to it, as an assignment does (Python's compiler
            // counts it as a binding): it reads no module-level `x`. Attributes and items still
            // read their object.
            // `del obj[k]` calls `obj`'s `__delitem__` (at any level), `del obj.attr` a property's
            // deleter or a descriptor's `__delete__` (never a getter).
            "delete_statement" => {
                let in_function = self.scopes[scope as usize].kind == ScopeKind::Function;
                let mut targets = vec![node];
                while let Some(target) = targets.pop() {
                    let mut cursor = target.walk();
                    let children: Vec<Node> = target.named_children(&mut cursor).collect();
                    for child in children.into_iter().rev() {
                        match child.kind_str() {
                            "identifier" if in_function => {
                                let name = Name::new(self.text(child));
                                let sc = &self.scopes[scope as usize];
                                // `global x; del x` deletes the module's `x`: no local binding.
                                // A name the function bound already is local: the deletion
                                // adds nothing (its `class` or `def` stays what it reads).
                                let bound = sc.binds(&name);
                                if !bound && !sc.globals.contains(&name) && !sc.nonlocals.contains(&name) {
                                    self.scope(scope).push_binding(name, Binding::Value(Expr::Unknown));
                                }
                            }
                            "expression_list" | "tuple" | "list" | "parenthesized_expression" => targets.push(child),
                            "comment" => {}
                            "subscript" => self.deleted_item(child, scope),
                            "attribute" => self.deleted_attribute(child, scope),
                            _ => {
                                self.expr(child, scope);
                            }
                        }
                    }
                }
            }
            // delete, assert, print, exec, type alias and anything new: their expressions still
            // read names and call things.
            _ => self.children_in_order(node, scope),
        }
    }

    /// Lowers the named children of `node` in their order, as statements or as expressions.
    pub(super) fn children_in_order(&mut self, node: Node, scope: ScopeId) {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        // What `while` and `assert` test for truth.
        let tested = match node.kind_str() {
            "while_statement" => node.field("condition"),
            "assert_statement" => children.first().copied(),
            _ => None,
        };
        for child in children {
            if Some(child) == tested {
                self.condition(child, scope);
            } else if is_statement_like(child.kind_str()) {
                self.statement(child, scope);
            } else {
                self.expr(child, scope);
            }
        }
    }

    /// One item of a `with` statement: the context manager is entered and exited there
    /// (`__enter__`/`__exit__`, `__aenter__`/`__aexit__` for `async with`).
    pub(super) fn with_item(&mut self, item: Node, scope: ScopeId, is_async: bool) {
        let Some(value) = item.field("value") else {
            return;
        };
        let manager = if value.kind_str() == "as_pattern" {
            self.with_item_pattern(value, scope, Caught::Entered(is_async))
        } else {
            self.expr(value, scope)
        };
        if manager != Expr::Unknown {
            self.scope(scope).contexts.push((manager, line(value), is_async));
        }
    }

    /// Where a slice `[start:stop:step]` starts, when that is a known position: the start is
    /// left out or a non-negative integer literal, and there is no step (`[::-1]` reverses).
    pub(super) fn slice_start(&self, slice: Node) -> Option<u32> {
        let mut cursor = slice.walk();
        let mut start = None;
        let mut colons = 0;
        for child in slice.children(&mut cursor) {
            match child.kind_str() {
                ":" => colons += 1,
                "comment" => {}
                _ if colons == 0 => start = Some(child),
                _ if colons >= 2 => return None,
                _ => {}
            }
        }
        match start {
            None => Some(0),
            Some(n) if n.kind_str() == "integer" => self.text(n).replace('_', "").parse().ok(),
            Some(_) => None,
        }
    }

    /// Binds `E as name` and returns what `E` is.
    pub(super) fn with_item_pattern(&mut self, pattern: Node, scope: ScopeId, caught: Caught) -> Expr {
        let alias = pattern.field("alias");
        let mut cursor = pattern.walk();
        let children: Vec<Node> = pattern.named_children(&mut cursor).collect();
        let mut value = Expr::Unknown;
        for child in children {
            if Some(child) == alias {
                continue;
            }
            value = self.expr(child, scope);
            break;
        }
        if let Some(alias) = alias {
            let target = alias.named_child(0).unwrap_or(alias);
            let binding = caught.binding(value.clone());
            self.bind_target(target, binding, scope, None);
        }
        value
    }

    pub(super) fn named_exprs(&mut self, node: Node, scope: ScopeId) -> Vec<Expr> {
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let mut out = Vec::new();
        for child in children {
            if child.kind_str() == "expression_list" {
                out.push(self.value(child, scope));
            } else if child.kind_str() != "comment" {
                out.push(self.expr(child, scope));
            }
        }
        out
    }
}
