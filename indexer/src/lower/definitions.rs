//! Definitions: decorated functions and classes, their parameters and annotations, the
//! attributes a class's methods store on `self`, the module variables a `global` statement
//! writes, and docstrings.

use super::*;

impl<'a> Lowerer<'a> {
    pub(super) fn decorated(&mut self, node: Node, scope: ScopeId) {
        let mut decorators = Vec::new();
        let mut cursor = node.walk();
        let children: Vec<Node> = node.named_children(&mut cursor).collect();
        let decorator_count = children.iter().filter(|c| c.kind_str() == "decorator").count();
        for child in &children {
            if child.kind_str() == "decorator"
                && let Some(expr_node) = child.named_child(0)
            {
                // Decorators run in the enclosing scope: the module or class calls them.
                let e = self.chain_or_value(expr_node, scope);
                let callee_span = span(expr_node);
                // The decorator receives the decorated function (or class) as the decorators
                // below it made it (they apply innermost first).
                let below = (decorator_count - decorators.len() - 1) as u32;
                let decorated = node
                    .field("definition")
                    .and_then(|d| d.field("name"))
                    .map(|n| Expr::Name(Name::new(self.text(n))))
                    .map(|name| Expr::Decorated(Box::new(name), below));
                self.scope(scope).calls.push(CallSite {
                    callee: e.clone(),
                    callee_span,
                    line: line(*child),
                    args: decorated.into_iter().collect(),
                    keywords: Box::default(),
                    written: Some((1, 0)),
                });
                // `@dataclass(init=False)` writes no `__init__`: the class keeps its bases'. A
                // call's arguments are not kept in its expression, so the class is told here.
                let of_class = node.field("definition").is_some_and(|d| d.kind_str() == "class_definition");
                decorators.push(if of_class && self.passes_init_false(expr_node) { Expr::Unknown } else { e });
            }
        }
        if let Some(def) = node.field("definition") {
            match def.kind_str() {
                "function_definition" => self.function(def, node, scope, decorators),
                "class_definition" => self.class(def, node, scope, decorators),
                _ => self.statement(def, scope),
            }
        }
    }

    /// Whether `call` passes the keyword argument `init=False`.
    fn passes_init_false(&self, call: Node) -> bool {
        let Some(arguments) = call.field("arguments").filter(|_| call.kind_str() == "call") else { return false };
        let mut cursor = arguments.walk();
        arguments.named_children(&mut cursor).any(|arg| {
            arg.kind_str() == "keyword_argument"
                && arg.field("name").is_some_and(|n| self.text(n) == "init")
                && arg.field("value").is_some_and(|v| v.kind_str() == "false")
        })
    }

    /// The byte range of a def's header: from the decorators to the colon that ends it (not
    /// the comments after it, which tree-sitter puts before the body), trimmed.
    pub(super) fn header_range(&self, outer: Node, def: Node, body: Option<Node>) -> (u32, u32) {
        let body_start = body.map(|b| b.start_byte()).unwrap_or(def.end_byte());
        let mut cursor = def.walk();
        let colon = def.children(&mut cursor).filter(|c| c.kind_str() == ":" && c.end_byte() <= body_start).last();
        let end = colon.map(|c| c.start_byte()).unwrap_or(body_start);
        let raw = self.src.get(outer.start_byte()..end).unwrap_or("");
        let trimmed = raw.trim_end();
        // Without its colon (a header still being typed) the body's start ends it.
        let header = if colon.is_some() { trimmed } else { trimmed.strip_suffix(':').unwrap_or(trimmed).trim_end() };
        (outer.start_byte() as u32, (outer.start_byte() + header.len()) as u32)
    }

    pub(super) fn function(&mut self, node: Node, outer: Node, scope: ScopeId, decorators: Vec<Expr>) {
        let Some(name_node) = node.field("name") else {
            return;
        };
        let name = self.text(name_node);
        let body = node.field("body");
        self.check_body(node, body);
        let kind =
            if self.scopes[scope as usize].kind == ScopeKind::Class { DefKind::Method } else { DefKind::Function };
        let signature = Some(self.header_range(outer, node, body));
        let docstring = body.and_then(|b| self.docstring(b));
        let def = self.push_def(scope, kind, name, outer, signature, docstring, decorators);
        self.bind(scope, name, Binding::Def(def));
        self.def_replaces_earlier(node, outer, name, scope);
        if matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class) {
            self.module_variables.insert((scope, Name::new(name)), def);
        }
        let inner = self.new_scope(ScopeKind::Function, scope, Some(def));
        self.defs[def as usize].body = Some(inner);
        if let Some(params) = node.field("parameters") {
            self.parameters(params, scope, inner);
        }
        if let Some(ret) = node.field("return_type") {
            let ty = self.annotation(ret, inner);
            if ty != Expr::Unknown {
                self.defs[def as usize].return_type = Some(ty);
            }
        }
        if let Some(body) = body {
            self.body(body, inner);
        }
    }

    /// Lowers a parameter list: defaults are evaluated in `outer`, annotations are read by `inner`.
    pub(super) fn parameters(&mut self, params: Node, outer: ScopeId, inner: ScopeId) {
        let mut cursor = params.walk();
        let children: Vec<Node> = params.named_children(&mut cursor).collect();
        for p in children {
            let tuple = p.kind_str() == "tuple_pattern"
                || (p.kind_str() == "default_parameter"
                    && p.field("name").is_some_and(|n| n.kind_str() == "tuple_pattern"));
            if tuple {
                self.refuse_python2(p, "a Python 2 tuple parameter (`def f((a, b))`)");
            }
            let keywords = p.kind_str() == "dictionary_splat_pattern"
                || (p.kind_str() == "typed_parameter"
                    && p.named_child(0).is_some_and(|f| f.kind_str() == "dictionary_splat_pattern"));
            let (name_node, default, annotation, variadic) = match p.kind_str() {
                "identifier" => (Some(p), None, None, false),
                "default_parameter" => (p.field("name"), p.field("value"), None, false),
                "typed_default_parameter" => (p.field("name"), p.field("value"), p.field("type"), false),
                "typed_parameter" => {
                    let first = p.named_child(0);
                    let variadic = first.is_some_and(|f| f.kind_str() != "identifier");
                    let name =
                        first.map(|f| if f.kind_str() == "identifier" { f } else { f.named_child(0).unwrap_or(f) });
                    (name, None, p.field("type"), variadic)
                }
                "list_splat_pattern" | "dictionary_splat_pattern" => (p.named_child(0), None, None, true),
                _ => continue,
            };
            let Some(name_node) = name_node else { continue };
            if name_node.kind_str() != "identifier" {
                continue;
            }
            let default = default.map(|d| self.expr(d, outer));
            let annotation = annotation.map(|a| self.annotation(a, inner));
            let name = Name::new(self.text(name_node));
            let index = self.scopes[inner as usize].params.len() as u32;
            self.scope(inner).params.push(Param { name: name.clone(), default, annotation, variadic, keywords });
            self.scope(inner).push_binding(name, Binding::Param(index));
        }
    }

    /// Lowers a type annotation: every class it names is read by `scope`; the result is what
    /// the annotation promises (see [`crate::annotation`]).
    pub(super) fn annotation(&mut self, node: Node, scope: ScopeId) -> Expr {
        self.annotation_reads(node, scope);
        self.type_of(self.text(node), scope)
    }

    /// What the annotation text read by `scope` promises, the module's type aliases in force
    /// written out (see [`crate::annotation::TypeAliases`]); whether the name means the alias
    /// there is checked once the whole file is read (see [`Lowerer::conflicting_aliases`]).
    pub(super) fn type_of(&self, text: &str, scope: ScopeId) -> Expr {
        let mut used = Vec::new();
        let usable = |name: &str| {
            let name = Name::new(name);
            !self.unusable_aliases.contains(&(None, name.clone()))
                && !self.unusable_aliases.contains(&(Some(scope), name))
        };
        let ty = self.type_aliases.type_expr(text, &usable, &mut used);
        if !used.is_empty() {
            self.alias_uses.borrow_mut().extend(used.into_iter().map(|name| (scope, Name::new(&name))));
        }
        ty
    }

    /// The scopes between `scope` and the module whose bindings an annotation read by `scope`
    /// sees: `scope` itself, the functions around it, and a class only where its own body or
    /// its methods' signatures read the annotation (not a class further out: neither a
    /// method's body, a nested class nor a comprehension sees it). A function's own names
    /// count for its signature too, which Python reads where the `def` is: its body's
    /// annotations and `isinstance` tests share its scope, and there they do hide the alias.
    fn scopes_seen(&self, scope: ScopeId) -> Vec<ScopeId> {
        let reader = &self.scopes[scope as usize];
        let mut seen = Vec::new();
        let mut s = Some(scope);
        while let Some(id) = s.filter(|&id| id != 0) {
            let sc = &self.scopes[id as usize];
            let counts = match sc.kind {
                ScopeKind::Class => id == scope || (reader.kind == ScopeKind::Function && reader.parent == Some(id)),
                _ => true,
            };
            if counts {
                seen.push(id);
            }
            s = sc.parent;
        }
        seen
    }

    /// The aliases written out where the whole file shows their name bound otherwise too: more
    /// than once in the module (a use before a later binding reads it as the alias only where
    /// annotations are evaluated at once), or in a scope whose names the annotation sees (see
    /// [`lower_text`]).
    pub(super) fn conflicting_aliases(&self) -> Vec<AliasUse> {
        let uses = self.alias_uses.borrow();
        if uses.is_empty() {
            return Vec::new();
        }
        let mut module_bindings: FxHashMap<&Name, usize> = FxHashMap::default();
        for (name, _) in self.scopes[0].bindings.iter() {
            *module_bindings.entry(name).or_default() += 1;
        }
        // Each scope's bound names, gathered once (a class of thousands of annotated attributes
        // reads as many aliases).
        let mut names_of: FxHashMap<ScopeId, FxHashSet<&Name>> = FxHashMap::default();
        let mut out: FxHashSet<AliasUse> = FxHashSet::default();
        for (scope, name) in uses.iter() {
            // Bound more than once: even two alias definitions (under a version test, or one
            // replacing the other below a function that reads the name when it runs) leave
            // which one an annotation means to the reader.
            if module_bindings.get(name) != Some(&1) {
                out.insert((None, name.clone()));
                continue;
            }
            let shadowed = self.scopes_seen(*scope).into_iter().any(|s| {
                names_of
                    .entry(s)
                    .or_insert_with(|| self.scopes[s as usize].bindings.iter().map(|(n, _)| n).collect())
                    .contains(name)
            });
            if shadowed {
                out.insert((Some(*scope), name.clone()));
            }
        }
        out.into_iter().collect()
    }

    pub(super) fn annotation_reads(&mut self, node: Node, scope: ScopeId) {
        match node.kind_str() {
            "type" => {
                if let Some(inner) = node.named_child(0) {
                    self.nested((), |l| l.annotation_reads(inner, scope));
                }
            }
            "identifier" | "attribute" => {
                self.expr(node, scope);
            }
            // A forward reference reads what it names, as the unquoted annotation would.
            "string" => {
                if let Some(text) = self.constant_string(node) {
                    for name in crate::annotation::names_in(text.as_str()) {
                        self.access(scope, name, line(node), AccessKind::Read);
                    }
                }
            }
            // `A | B | ...`: nested one level per operator, leftmost deepest; walked down its
            // left spine, not recursively (a generated union of 20,000 types overflowed the stack).
            "binary_operator" => {
                let mut operands = Vec::new();
                let mut current = Some(node);
                while let Some(n) = current {
                    if n.kind_str() != "binary_operator" {
                        operands.push(n);
                        break;
                    }
                    operands.extend(n.field("right"));
                    current = n.field("left");
                }
                for operand in operands.into_iter().rev() {
                    self.nested((), |l| l.annotation_reads(operand, scope));
                }
            }
            _ => {
                let mut cursor = node.walk();
                let mut children: Vec<Node> = node.named_children(&mut cursor).collect();
                // `Literal['a']` holds values, not names; `Annotated[T, meta]` holds one type.
                let generic = match node.kind_str() {
                    "generic_type" => children.first().copied(),
                    "subscript" => node.field("value"),
                    _ => None,
                };
                match generic.map(|g| self.text(g).rsplit('.').next().unwrap_or_default()) {
                    Some("Literal") => children.truncate(1),
                    Some("Annotated") if node.kind_str() == "generic_type" => {
                        // `Annotated` `[T, meta]`: the parameter list's first type only.
                        let first_type = children.get(1).and_then(|params| params.named_child(0));
                        children.truncate(1);
                        children.extend(first_type);
                    }
                    Some("Annotated") => children.truncate(2),
                    _ => {}
                }
                for child in children {
                    self.nested((), |l| l.annotation_reads(child, scope));
                }
            }
        }
    }

    pub(super) fn class(&mut self, node: Node, outer: Node, scope: ScopeId, decorators: Vec<Expr>) {
        let Some(name_node) = node.field("name") else {
            return;
        };
        let name = self.text(name_node);
        let body = node.field("body");
        self.check_body(node, body);
        let signature = Some(self.header_range(outer, node, body));
        let docstring = body.and_then(|b| self.docstring(b));
        let def = self.push_def(scope, DefKind::Class, name, outer, signature, docstring, decorators);
        let inner = self.new_scope(ScopeKind::Class, scope, Some(def));
        self.defs[def as usize].body = Some(inner);
        if let Some(args) = node.field("superclasses") {
            let mut cursor = args.walk();
            let children: Vec<Node> = args.named_children(&mut cursor).collect();
            for arg in children {
                match arg.kind_str() {
                    "keyword_argument" => {
                        if let Some(v) = arg.field("value") {
                            let value = self.expr(v, scope);
                            if arg.field("name").is_some_and(|n| self.text(n) == "metaclass") {
                                self.scope(inner).metaclass = Some(value);
                            }
                        }
                    }
                    "comment" => {}
                    "subscript" if arg.field("value").is_some() => {
                        // `Base[str]`: a generic base; the class inherits from `Base`.
                        let mut cursor = arg.walk();
                        let subs: Vec<Node> = arg.children_by_field_name("subscript", &mut cursor).collect();
                        for sub in subs {
                            self.expr(sub, scope);
                        }
                        if let Some(value) = arg.field("value") {
                            let base = self.chain_or_value(value, scope);
                            self.scope(inner).bases.push((base, line(arg)));
                        }
                    }
                    _ => {
                        let base = self.chain_or_value(arg, scope);
                        self.scope(inner).bases.push((base, line(arg)));
                    }
                }
            }
        }
        self.bind(scope, name, Binding::Def(def));
        self.def_replaces_earlier(node, outer, name, scope);
        if matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class) {
            self.module_variables.insert((scope, Name::new(name)), def);
        }
        if let Some(body) = body {
            self.body(body, inner);
        }
        self.instance_attributes(inner);
    }

    /// A global a function creates (`global CONFIG` then `CONFIG = load()`) is a module variable
    /// like one assigned at the top level: it gets a unit (at its first such assignment) and a
    /// module binding of unknown value, so that other functions' reads and other modules'
    /// imports of it resolve. Names the module binds itself keep their own binding and unit.
    pub(super) fn define_global_writes(&mut self) {
        for write in std::mem::take(&mut self.global_writes) {
            let key = (0, write.name.clone());
            if self.module_variables.contains_key(&key) || self.scopes[0].binds(&write.name) {
                continue;
            }
            let path = self.unique_path(0, &write.name);
            let parent = self.owner_def(0);
            self.defs.push(Def {
                kind: DefKind::Variable,
                name: write.name.clone(),
                path,
                parent,
                body: None,
                start_line: write.start_line,
                end_line: write.end_line,
                start_byte: write.start_byte,
                end_byte: write.end_byte,
                header: None,
                docstring: None,
                decorators: Box::default(),
                return_type: None,
                // It exists only once the function ran.
                conditional: true,
            });
            self.module_variables.insert(key, (self.defs.len() - 1) as DefId);
            self.scopes[0].push_binding(write.name, Binding::Value(Expr::Unknown));
        }
    }

    /// Turns `self.x = ...` in the methods of a class (not its static methods) into variable
    /// units of the class, unless the class body already defines `x`.
    pub(super) fn instance_attributes(&mut self, class_scope: ScopeId) {
        let method_scopes: Vec<ScopeId> = (0..self.scopes.len() as ScopeId)
            .filter(|&s| {
                let sc = &self.scopes[s as usize];
                sc.kind == ScopeKind::Function && sc.parent == Some(class_scope)
            })
            .collect();
        for ms in method_scopes {
            // A static method's first parameter is whatever it is passed, not the instance.
            let is_static = self.scopes[ms as usize].def.is_some_and(|def| {
                self.defs[def as usize].decorators.iter().any(|d| matches!(d, Expr::Name(n) if n == "staticmethod"))
            });
            if is_static {
                continue;
            }
            let Some(self_name) = self.scopes[ms as usize].params.first().map(|p| p.name.clone()) else {
                continue;
            };
            let stores: Vec<AttrStore> = self.scopes[ms as usize]
                .attr_stores
                .iter()
                .filter(|s| s.base == Expr::Name(self_name.clone()) && !s.element_only)
                .cloned()
                .collect();
            for store in stores {
                let key = (class_scope, store.attr.clone());
                if self.module_variables.contains_key(&key) {
                    continue;
                }
                let path = self.unique_path(class_scope, &store.attr);
                let parent = self.scopes[class_scope as usize].def;
                self.defs.push(Def {
                    kind: DefKind::Variable,
                    name: store.attr.clone(),
                    path,
                    parent,
                    body: None,
                    start_line: store.start_line,
                    end_line: store.end_line,
                    start_byte: store.start_byte,
                    end_byte: store.end_byte,
                    header: None,
                    docstring: None,
                    decorators: Box::default(),
                    return_type: None,
                    conditional: false,
                });
                let id = (self.defs.len() - 1) as DefId;
                self.module_variables.insert(key, id);
            }
        }
    }

    /// The byte range of the docstring literal of a body, if it has one.
    pub(super) fn docstring(&self, body: Node) -> Option<(u32, u32)> {
        let mut cursor = body.walk();
        let first = body.named_children(&mut cursor).find(|n| n.kind_str() != "comment")?;
        if first.kind_str() != "expression_statement" || first.named_child_count() != 1 {
            return None;
        }
        let literal = first.named_child(0)?;
        self.is_docstring_literal(literal).then(|| span(literal))
    }

    /// Whether `node` makes a `str` constant, as a docstring must: a string literal, literals
    /// side by side (`"a" "b"`), either in parentheses; not an f-string, a t-string nor bytes.
    fn is_docstring_literal(&self, node: Node) -> bool {
        // Parentheses unwrapped in a loop: a generated file nested 30,000 deep overflowed the
        // stack when this recursed.
        let mut node = node;
        while node.kind_str() == "parenthesized_expression" {
            let mut cursor = node.walk();
            let mut inner = node.named_children(&mut cursor).filter(|part| part.kind_str() != "comment");
            match (inner.next(), inner.next()) {
                (Some(only), None) => node = only,
                _ => return false,
            }
        }
        let is_str = |string: Node| {
            string.kind_str() == "string"
                && string.child(0).is_some_and(|start| {
                    let prefix = self.text(start).trim_end_matches(['"', '\'']);
                    prefix.chars().all(|c| matches!(c, 'r' | 'R' | 'u' | 'U'))
                })
        };
        let mut cursor = node.walk();
        match node.kind_str() {
            "string" => is_str(node),
            "concatenated_string" => {
                node.named_children(&mut cursor).filter(|part| part.kind_str() != "comment").all(is_str)
            }
            _ => false,
        }
    }
}
