//! Calls' values (the call site; `property(...)`, `typing.cast` and the other calls whose value
//! is known) and assignments: targets (unpacking, attributes, subscripts), what replaces an
//! earlier definition, type aliases, augmented assignments, container mutation, and module-
//! and class-level variables.

use super::*;

impl<'a> Lowerer<'a> {
    /// The rest of lowering a call, once its callee and arguments are lowered: the call site,
    /// and the call's value. Kept out of [`Lowerer::expr`], whose stack frame bounds how deep
    /// expressions nest (a debug build's frame holds every arm's locals).
    #[inline(never)]
    pub(super) fn finish_call(
        &mut self,
        node: Node,
        callee: Expr,
        callee_span: (u32, u32),
        arguments: CallArguments,
        scope: ScopeId,
    ) -> Expr {
        let CallArguments { mut args, keywords, written } = arguments;
        // Trailing arguments that cannot flow anywhere need no position.
        while args.last() == Some(&Expr::Unknown) {
            args.pop();
        }
        // `staticmethod(f)` and `classmethod(f)` (in a class body: `handler =
        // staticmethod(f)`) and `functools.partial(f, ...)` are, as values, the function
        // they wrap: calling them calls it. (The wrapping call itself is still a call site.)
        let wrapped = match (&callee, args.as_slice(), keywords.is_empty()) {
            (Expr::Name(n), [only], true) if n == "staticmethod" || n == "classmethod" => Some(only.clone()),
            // `partial(f, ...)`: calling it calls `f`.
            (Expr::Name(n), [f, ..], _) if n == "partial" && *f != Expr::Unknown => Some(f.clone()),
            (Expr::Attr(m, n), [f, ..], _)
                if n == "partial" && matches!(m.as_ref(), Expr::Name(m) if m == "functools") && *f != Expr::Unknown =>
            {
                Some(f.clone())
            }
            // `update_wrapper(wrapper, wrapped)` returns `wrapper` (as `@wraps(wrapped)` on it
            // does): flask's `setupmethod` returns `t.cast(F, update_wrapper(wrapper_func, f))`.
            _ if is_update_wrapper(&callee) => args
                .first()
                .or_else(|| keywords.iter().find(|(k, _)| k == "wrapper").map(|(_, e)| e))
                .filter(|w| **w != Expr::Unknown)
                .cloned(),
            _ => None,
        };
        // `super(C, self)` with C not the class its code is in skips past C: not the
        // `super()` it is read as (evaluation takes the enclosing class), so its value is
        // left unknown. `super(Enclosing, self)`, the Python 2 spelling, is `super()`.
        let explicit_super = matches!(&callee, Expr::Name(n) if n == "super")
            && node.field("arguments").is_some_and(|arguments| {
                let mut cursor = arguments.walk();
                let first = arguments.named_children(&mut cursor).find(|a| a.kind_str() != "comment");
                first.is_some_and(|first| Some(self.text(first)) != self.enclosing_class_name(scope).as_deref())
            });
        self.container_mutation(&callee, &args, scope);
        let special = self
            .special_call_value(&callee, node, &args, &keywords, scope)
            .or_else(|| self.property_value(&callee, &args, &keywords, scope));
        self.scope(scope).calls.push(CallSite {
            callee: callee.clone(),
            callee_span,
            line: line(node),
            args: args.into_boxed_slice(),
            keywords: keywords.into_boxed_slice(),
            written,
        });
        if explicit_super {
            return Expr::Unknown;
        }
        if let Some(special) = special {
            return special;
        }
        wrapped.unwrap_or_else(|| Expr::Call(Box::new(callee)))
    }

    /// The value of a call whose callee says more than a call's result: `typing.cast` and the
    /// builtins that iterate over their arguments (see [`iteration_view`]). Kept out of
    /// [`Lowerer::expr`], whose stack frame bounds how deep expressions nest.
    #[inline(never)]
    pub(super) fn special_call_value(
        &mut self,
        callee: &Expr,
        call: Node,
        args: &[Expr],
        keywords: &[(Name, Expr)],
        scope: ScopeId,
    ) -> Option<Expr> {
        if let Some(cast) = self.typing_cast(callee, call, args, scope) {
            return Some(cast);
        }
        // `copy.copy(x)`, `copy.deepcopy(x)`: another x (a class's `__copy__` may make something
        // else, and rarely does). The lowering cannot tell a repository's own top-level `copy`
        // module from the standard one (README, what is not resolved).
        if let [original, ..] = args
            && args.len() <= 2
            && *original != Expr::Unknown
            && ["copy", "deepcopy"].iter().any(|f| self.names_std_function(callee, scope, "copy", f))
        {
            return Some(original.clone());
        }
        if let Expr::Name(name) = callee
            && self.builtin_rebound(name, scope)
        {
            return None;
        }
        // `type(obj)` is the class of `obj`: `type(self)(...)` constructs the class its code is
        // in (or a subclass). Not `obj.__class__`, which a class may define otherwise.
        if let ([obj], true) = (args, keywords.is_empty())
            && matches!(callee, Expr::Name(n) if n == "type")
            && *obj != Expr::Unknown
        {
            return Some(Expr::Attr(Box::new(obj.clone()), Name::new(TYPE_OF)));
        }
        // A dict made into a list, set or tuple gives its keys, where its elements (see
        // `Expr::Container`) are its values: no view of those.
        if let (Expr::Name(n), [xs, ..]) = (callee, args)
            && matches!(n.as_str(), "list" | "set" | "tuple" | "frozenset")
            && self.is_dict_value(xs, scope)
        {
            return None;
        }
        let std_deque = self.names_std_function(callee, scope, "collections", "deque");
        let view = iteration_view(callee, args, keywords.iter().any(|(k, _)| k == "key"), std_deque)?;
        Some(Expr::Union(vec![Expr::Call(Box::new(callee.clone())), view]))
    }

    /// Whether a call of `name` in `scope` may not be the builtin's: the file binds the name
    /// (see [`rebound_value_builtins`]), or code right in a class body calls a name the class
    /// has bound above it. A class body's names (methods, nested classes, class attributes) are
    /// left out of the file's set (a method `list` or a model's `type = Column(...)` must not
    /// make every `list(x)` or `type(self)` of the file unknown), but the class body's own code
    /// reads them: `def list(xs)` then `for x in list(items)`, or a nested `class type` then
    /// `type(a).run(a)`, in the same class body.
    fn builtin_rebound(&self, name: &str, scope: ScopeId) -> bool {
        if self.rebound_builtins.contains(name) {
            return true;
        }
        let sc = &self.scopes[scope as usize];
        sc.kind == ScopeKind::Class && sc.binds(name)
    }

    /// `property(fget, fset, fdel, ...)` (the builtin, not a name the file binds): the getter,
    /// setter and deleter it is made of, positional or by keyword. Without a getter it is a
    /// plain call.
    pub(super) fn property_value(
        &self,
        callee: &Expr,
        args: &[Expr],
        keywords: &[(Name, Expr)],
        scope: ScopeId,
    ) -> Option<Expr> {
        if !matches!(callee, Expr::Name(n) if n == "property") || self.builtin_rebound("property", scope) {
            return None;
        }
        let argument = |position: usize, keyword: &str| {
            args.get(position)
                .or_else(|| keywords.iter().find(|(k, _)| k == keyword).map(|(_, e)| e))
                .filter(|e| **e != Expr::Unknown)
                .cloned()
        };
        let getter = argument(0, "fget")?;
        Some(Expr::Property(Box::new(getter), argument(1, "fset").map(Box::new), argument(2, "fdel").map(Box::new)))
    }

    /// `typing.cast(T, value)` (also `cast(...)`, `t.cast(...)`): the value declared as a `T`, as
    /// `x: T = value` declares it (a forward reference in quotes too).
    pub(super) fn typing_cast(&mut self, callee: &Expr, call: Node, args: &[Expr], scope: ScopeId) -> Option<Expr> {
        // Only `cast` as imported from `typing` (a module's own `cast(value, dtype)` helper keeps
        // its own result); imports are read from the module's top level, where they are written.
        let is_typing = |m: &ModuleRef| m.level == 0 && matches!(m.name.as_str(), "typing" | "typing_extensions");
        let imported = |name: &str, what: &dyn Fn(&Import) -> bool| {
            self.scopes[0].bindings_of(name).any(|b| matches!(b, Binding::Import(i) if what(i)))
        };
        let is_cast = match callee {
            Expr::Name(n) if n == "cast" => {
                imported("cast", &|i| matches!(i, Import::Name { module, name } if name == "cast" && is_typing(module)))
            }
            Expr::Attr(base, n) if n == "cast" => match base.as_ref() {
                Expr::Name(m) => imported(m, &|i| matches!(i, Import::Module { module } if is_typing(module))),
                _ => false,
            },
            _ => false,
        };
        if !is_cast {
            return None;
        }
        let arguments = call.field("arguments")?;
        let mut cursor = arguments.walk();
        let positional: Vec<Node> = arguments
            .named_children(&mut cursor)
            .filter(|a| a.kind_str() != "comment" && a.kind_str() != "keyword_argument")
            .collect();
        let [ty, _] = positional.as_slice() else { return None };
        // A quoted type's names are read here; an unquoted one was read as an argument.
        let declared =
            if ty.kind_str() == "string" { self.annotation(*ty, scope) } else { self.type_of(self.text(*ty), scope) };
        let value = args.get(1).cloned().unwrap_or(Expr::Unknown);
        Some(Expr::Declared(Box::new(declared), Box::new(value)))
    }

    /// Lowers `left = right` (or `left: T = right`); returns the assigned value.
    pub(super) fn assignment(&mut self, node: Node, stmt: Node, scope: ScopeId) -> Expr {
        self.nested(Expr::Unknown, |l| l.assignment_inner(node, stmt, scope))
    }

    pub(super) fn assignment_inner(&mut self, node: Node, stmt: Node, scope: ScopeId) -> Expr {
        let value = match node.field("right") {
            Some(right) if right.kind_str() == "assignment" => self.assignment(right, stmt, scope),
            Some(right) if right.kind_str() == "augmented_assignment" => {
                self.augmented(right, stmt, scope);
                Expr::Unknown
            }
            Some(right) if right.kind_str() == "expression_list" || right.kind_str() == "pattern_list" => {
                self.value(right, scope)
            }
            Some(right) => self.expr(right, scope),
            None => Expr::Unknown,
        };
        let declared = match node.field("type") {
            Some(t) => self.annotation(t, scope),
            None => Expr::Unknown,
        };
        if let Some(left) = node.field("left") {
            if scope == 0 && self.text(left) == "__all__" {
                match all_names(self, node.field("right")) {
                    Some(names) => self.dunder_all = Some(names),
                    None => self.dunder_all_dynamic = true,
                }
            }
            let annotated_only = node.field("right").is_none();
            let assigned = if annotated_only { Expr::Unknown } else { value.clone() };
            let binding = if declared == Expr::Unknown {
                Binding::Value(assigned)
            } else {
                Binding::Value(Expr::Declared(Box::new(declared), Box::new(assigned)))
            };
            self.bind_target(left, binding, scope, Some(stmt));
            // A field of the class: annotated directly in its body (not under `if TYPE_CHECKING:`).
            let in_class_body = stmt
                .parent()
                .filter(|b| b.kind_str() == "block")
                .and_then(|b| b.parent())
                .is_some_and(|c| c.kind_str() == "class_definition");
            if node.field("type").is_some() && left.kind_str() == "identifier" && in_class_body {
                let name = Name::new(self.text(left));
                let sc = self.scope(scope);
                if sc.kind == ScopeKind::Class && !sc.fields.contains(&name) {
                    sc.fields.push(name);
                }
            }
            // After binding the name, which ends an alias of it: this assignment may make one.
            if scope == 0 && left.kind_str() == "identifier" {
                self.record_type_alias(left, node);
            }
            if !annotated_only && left.kind_str() == "identifier" && self.replaces_earlier(left, node, scope) {
                let sc = self.scope(scope);
                if let Some(last) = sc.bindings.len().checked_sub(1) {
                    sc.replacing.push((last as u32, line(node)));
                }
            }
        }
        value
    }

    /// Records `left = right` of the module's top level (assignment `node`), just bound, as a
    /// type alias when it is declared one (`X: TypeAlias = ...`), its value reads as one (see
    /// [`crate::annotation::is_type_alias_value`]) or it makes a `TypeVar` (binding the name
    /// ended any alias it was).
    fn record_type_alias(&mut self, left: Node, node: Node) {
        let name = Name::new(self.text(left));
        let declared = node.field("type").is_some_and(|t| self.text(t).rsplit('.').next() == Some("TypeAlias"));
        let alias = node.field("right").and_then(|right| {
            if let Some(bound) = self.type_variable_bound(right) {
                Some(bound)
            } else if declared
                || (matches!(right.kind_str(), "subscript" | "binary_operator")
                    && crate::annotation::is_type_alias_value(self.text(right)))
            {
                Some(self.text(right).to_string())
            } else {
                None
            }
        });
        if let Some(text) = alias {
            self.type_aliases.record(name.as_str(), &text);
        }
    }

    /// For `TypeVar("T", bound=B)`, `TypeVar("T", A, B)` or `TypeVar("T")` (also `ParamSpec`,
    /// `TypeVarTuple`): what an annotation naming the variable promises, as annotation text: its
    /// bound, its constraints as a union, or `Any` (never the `TypeVar` object the name holds at
    /// run time: `target_type: type[T]` is a class, not a `TypeVar`).
    fn type_variable_bound(&self, value: Node) -> Option<String> {
        if value.kind_str() != "call" {
            return None;
        }
        let callee = self.text(value.field("function")?);
        let last = callee.rsplit('.').next().unwrap_or(callee);
        if !matches!(last, "TypeVar" | "ParamSpec" | "TypeVarTuple") {
            return None;
        }
        let arguments = value.field("arguments")?;
        let mut cursor = arguments.walk();
        let mut constraints = Vec::new();
        let mut bound = None;
        for (i, argument) in arguments.named_children(&mut cursor).filter(|a| a.kind_str() != "comment").enumerate() {
            match argument.kind_str() {
                "keyword_argument" if argument.field("name").is_some_and(|n| self.text(n) == "bound") => {
                    bound = argument.field("value").map(|v| self.text(v));
                }
                "keyword_argument" => {}
                _ if i > 0 => constraints.push(self.text(argument)),
                _ => {}
            }
        }
        Some(match (last, bound) {
            ("TypeVar", Some(bound)) => bound.to_string(),
            ("TypeVar", None) if !constraints.is_empty() => constraints.join(" | "),
            _ => "Any".to_string(),
        })
    }

    /// Whether `name = value` (assignment `node`) replaces every earlier binding of `name` once
    /// the scope ran: it runs unconditionally in a module or class body, and its value does not
    /// read the name (`f = wrap(f)` keeps what `f` was in view). Function bodies are left out:
    /// their own code reads names while the body runs, before later assignments.
    pub(super) fn replaces_earlier(&self, name: Node, node: Node, scope: ScopeId) -> bool {
        // In the run-time alternative to `if TYPE_CHECKING:` an assignment is most often a
        // placeholder (`Client = object`, `= Any`) for what annotations name: the type checker's
        // import stays in view beside it.
        if self.conditional_depth > 0
            || self.in_run_time_alternative
            || !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class)
        {
            return false;
        }
        let Some(right) = node.field("right") else { return false };
        !mentions_identifier(right, self.text(name), self.src)
    }

    /// Marks the binding an import statement just made as replacing the earlier bindings of its
    /// name, as an assignment does ([`Self::replaces_earlier`]): of `from .x import f` and then
    /// `from .y import f` only the second is in force afterwards, and a call of `f` reached both.
    /// An import under `if`/`try` (`except ImportError:` fallbacks, `TYPE_CHECKING`) may not
    /// have run, and one in a function is read with all of the function's bindings: neither
    /// replaces.
    pub(super) fn import_replaces_earlier(&mut self, node: Node, scope: ScopeId) {
        if self.conditional_depth > 0
            || !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class)
        {
            return;
        }
        let sc = self.scope(scope);
        if let Some(last) = sc.bindings.len().checked_sub(1) {
            sc.replacing.push((last as u32, line(node)));
        }
    }

    /// Marks the binding a `def` or `class` statement just made as replacing the earlier
    /// bindings of its name, as an assignment or an import does ([`Self::replaces_earlier`]):
    /// of `from .compat import g` and then `def g(): ...` only the function is in force
    /// afterwards. Not under `if`/`try`, not in a function body, and not when a decorator reads
    /// the name (`@x.setter`, `@f.register`): what it makes is built from the earlier binding.
    pub(super) fn def_replaces_earlier(&mut self, node: Node, outer: Node, name: &str, scope: ScopeId) {
        if self.conditional_depth > 0
            || !matches!(self.scopes[scope as usize].kind, ScopeKind::Module | ScopeKind::Class)
        {
            return;
        }
        let mut cursor = outer.walk();
        let decorator_reads_name = outer
            .named_children(&mut cursor)
            .filter(|c| c.kind_str() == "decorator")
            .any(|d| mentions_identifier(d, name, self.src));
        // `from ..lookups import Transform`, `class IsEmpty(Transform)`, then `class
        // Transform(...)` (django's gis functions): the body's own code read the earlier binding
        // while it ran, and the class summaries read bases as the module ends, so that earlier
        // binding stays in view (both are, as before).
        if decorator_reads_name || self.scope_code_read(scope, name) {
            return;
        }
        // The name is bound once the statement ran: a class body's own code (`backend =
        // Templates` in `class Templates`) still reads the earlier binding.
        let bound_at = node.end_position().row as u32 + 1;
        let sc = self.scope(scope);
        if let Some(last) = sc.bindings.len().checked_sub(1) {
            sc.replacing.push((last as u32, bound_at));
        }
    }

    /// Whether the code of `scope` lowered so far (not that of functions in it) read `name`:
    /// called it, read it or an attribute of it, or named it as a class's base.
    pub(super) fn scope_code_read(&self, scope: ScopeId, name: &str) -> bool {
        let sc = &self.scopes[scope as usize];
        let named = |e: &Expr| root_name(e).is_some_and(|n| n.as_str() == name);
        sc.accesses.iter().any(|a| a.kind != AccessKind::Write && named(&a.expr))
            || sc.calls.iter().any(|c| named(&c.callee))
            || self
                .scopes
                .iter()
                .any(|c| c.kind == ScopeKind::Class && c.parent == Some(scope) && c.bases.iter().any(|(b, _)| named(b)))
    }

    /// `type Alias = expr` (Python 3.12; also `type Alias[T] = ...`): binds `Alias` as an
    /// assignment would, to the type it names, so a module-level alias is a variable unit and the
    /// type expression's names are read like an annotation's.
    pub(super) fn type_alias(&mut self, node: Node, scope: ScopeId) {
        let value = match node.field("right") {
            Some(right) => self.annotation(right, scope),
            None => Expr::Unknown,
        };
        let Some(left) = node.field("left") else { return };
        // `left` is a `type` node around the name, or around `Alias[T]` (a generic type).
        let mut name = left;
        while name.kind_str() != "identifier" {
            match name.named_child(0) {
                Some(child) => name = child,
                None => return,
            }
        }
        self.bind_target(name, Binding::Value(value), scope, Some(node));
        if scope == 0
            && let Some(right) = node.field("right")
        {
            self.type_aliases.record(self.text(name), self.text(right));
        }
    }

    pub(super) fn augmented(&mut self, node: Node, stmt: Node, scope: ScopeId) {
        let value = node.field("right").map(|r| self.expr(r, scope)).unwrap_or(Expr::Unknown);
        if let Some(left) = node.field("left") {
            if scope == 0 && self.text(left) == "__all__" {
                match all_names(self, node.field("right")) {
                    Some(extra) => self.dunder_all.get_or_insert_with(Vec::new).extend(extra),
                    None => self.dunder_all_dynamic = true,
                }
            }
            // `x += y` reads x too, and calls `__iadd__` of its class (or `__add__`).
            let method = node.field("operator").and_then(|o| inplace_operator_method(o.kind_str()));
            if left.kind_str() == "identifier" || left.kind_str() == "attribute" {
                let read = self.chain(left, scope);
                self.access(scope, read.clone(), line(left), AccessKind::Read);
                if let Some(method) = method {
                    self.operator_use(scope, read, value, line(node), method);
                }
            } else if let Some(method) = method {
                // `t[k] += v`: the item's operator, once the target's subscript is lowered.
                self.inplace_item = Some((value, method, line(node)));
            }
            self.bind_target(left, Binding::Value(Expr::Unknown), scope, Some(stmt));
            self.inplace_item = None;
        }
    }

    /// Binds an assignment target. `stmt` is the statement, when the target can define a unit.
    pub(super) fn bind_target(&mut self, target: Node, binding: Binding, scope: ScopeId, stmt: Option<Node>) {
        self.nested((), |l| l.bind_target_inner(target, binding, scope, stmt))
    }

    pub(super) fn bind_target_inner(&mut self, target: Node, binding: Binding, scope: ScopeId, stmt: Option<Node>) {
        match target.kind_str() {
            "identifier" => {
                let name = Name::new(self.text(target));
                self.define_variable(scope, &name, stmt);
                self.scope(scope).push_binding(name.clone(), binding);
                self.module_binds(scope, &name);
                if self.scopes[scope as usize].globals.contains(&name) {
                    if self.scopes[scope as usize].kind != ScopeKind::Module {
                        let at = stmt.unwrap_or(target);
                        self.global_writes.push(GlobalWrite {
                            name: name.clone(),
                            start_line: line(at),
                            end_line: at.end_position().row as u32 + 1,
                            start_byte: at.start_byte() as u32,
                            end_byte: at.end_byte() as u32,
                        });
                    }
                    self.access(scope, Expr::Name(name), line(target), AccessKind::Write);
                }
            }
            "pattern_list" | "tuple_pattern" | "list_pattern" | "tuple" | "list" | "expression_list" => {
                let mut cursor = target.walk();
                let children: Vec<Node> =
                    target.named_children(&mut cursor).filter(|c| c.kind_str() != "comment").collect();
                // What is unpacked: a nested pattern (`a, (b, c) = ...`) unpacks an element of it.
                let unpacks_loop_element = matches!(binding, Binding::Iter(_));
                let whole = match binding {
                    Binding::Value(e) => Some(e),
                    Binding::Unpack(e, i) => Some(Expr::Element(Box::new(e), i)),
                    // `for k, v in pairs`: each element of what is iterated is unpacked.
                    Binding::Iter(e) => Some(Expr::Subscript(Box::new(e))),
                    _ => None,
                };
                // Unpacking iterates what is unpacked. Not each element of a `for` loop (a dict's
                // elements are read as its values, where Python unpacks its keys), nor a value that
                // names what the target binds (`rv, status = rv`: the name's values include the
                // tuple this very statement unpacks).
                if let Some(whole) = &whole
                    && !unpacks_loop_element
                {
                    let bound = pattern_names(self, target);
                    if !mentions_name(whole, &|n| bound.iter().any(|b| b == n)) {
                        self.iterated(scope, whole, line(target));
                    }
                }
                let star = children.iter().position(|c| matches!(c.kind_str(), "list_splat_pattern" | "list_splat"));
                let count = children.len();
                for (i, child) in children.into_iter().enumerate() {
                    let Some(whole) = &whole else {
                        self.bind_target(child, Binding::Value(Expr::Unknown), scope, stmt);
                        continue;
                    };
                    match star {
                        Some(s) if i == s => {
                            // `*rest`: a list of the elements it takes.
                            let rest = match whole {
                                Expr::Container(ContainerKind::Tuple | ContainerKind::List, items)
                                    if items.len() + 1 >= count =>
                                {
                                    items[s..items.len() + 1 + s - count].to_vec()
                                }
                                _ => vec![Expr::Subscript(Box::new(whole.clone()))],
                            };
                            if let Some(inner) = child.named_child(0) {
                                let rest = Binding::Value(Expr::Container(ContainerKind::List, rest));
                                self.bind_target(inner, rest, scope, stmt);
                            }
                        }
                        // After `*rest`, positions count from the end.
                        Some(s) if i > s => {
                            let element = match whole {
                                Expr::Container(ContainerKind::Tuple | ContainerKind::List, items)
                                    if items.len() + 1 >= count =>
                                {
                                    Binding::Unpack(whole.clone(), (items.len() + i - count) as u32)
                                }
                                _ => Binding::Value(Expr::Subscript(Box::new(whole.clone()))),
                            };
                            self.bind_target(child, element, scope, stmt);
                        }
                        _ => self.bind_target(child, Binding::Unpack(whole.clone(), i as u32), scope, stmt),
                    }
                }
            }
            "list_splat_pattern" | "parenthesized_expression" => {
                if let Some(inner) = target.named_child(0) {
                    let b =
                        if target.kind_str() == "list_splat_pattern" { Binding::Value(Expr::Unknown) } else { binding };
                    self.bind_target(inner, b, scope, stmt);
                }
            }
            "attribute" => {
                let Some(object) = target.field("object") else {
                    return;
                };
                let Some(attr) = target.field("attribute") else {
                    return;
                };
                let base = self.chain(object, scope);
                let attr = Name::new(self.text(attr));
                let value = match binding {
                    Binding::Value(e) => e,
                    _ => Expr::Unknown,
                };
                let full = Expr::Attr(Box::new(base.clone()), attr.clone());
                self.access(scope, full, line(target), AccessKind::Write);
                self.attr_store(scope, base, attr, value, false, target, stmt);
            }
            "subscript" => {
                // `registry[key] = func` makes `func` an element of `registry`.
                let object = target.field("value");
                let key = target.field("subscript").and_then(|k| self.constant_key(k));
                if let Some(index) = target.field("subscript") {
                    self.expr(index, scope);
                }
                if let Some(object) = object {
                    let lowered = self.expr(object, scope);
                    // `obj[k] = v` calls `obj`'s `__setitem__`; `obj[k] += v` (also written
                    // `(obj[k]) += v`) its `__getitem__` first; `obj[k]: int` alone neither.
                    let mut holder = target.parent();
                    // (tree-sitter reads `(t[0]) += 1`'s target as a tuple pattern.)
                    while let Some(p) =
                        holder.filter(|p| matches!(p.kind_str(), "parenthesized_expression" | "tuple_pattern"))
                    {
                        holder = p.parent();
                    }
                    let holder_kind = holder.map(|h| h.kind_str());
                    let annotated_only =
                        holder.is_some_and(|h| h.kind_str() == "assignment" && h.field("right").is_none());
                    if holder_kind == Some("augmented_assignment") {
                        self.implicit_call(scope, &lowered, line(target), ImplicitCall::GetItem);
                        // The item read calls its own class's in-place method (`t[k] += v`:
                        // `t.__getitem__(k).__iadd__(v)`, then `t.__setitem__`).
                        let mut cursor = target.walk();
                        let subs: Vec<Node> = target.children_by_field_name("subscript", &mut cursor).collect();
                        // (A slice's item is another sequence, and `t[i, j]` has no one key.)
                        let one_key = matches!(subs.as_slice(), [k] if k.kind_str() != "slice");
                        if let Some((right, method, at)) = self.inplace_item.take().filter(|_| one_key) {
                            let item = self.item_of(lowered.clone(), &subs);
                            self.operator_use(scope, item, right, at, method);
                        }
                    }
                    if !annotated_only {
                        self.implicit_call(scope, &lowered, line(target), ImplicitCall::SetItem);
                    }
                    // `t[k] += v` stores back what the item's in-place method gave, which is not
                    // known: storing nothing under `k` keeps the item read in the same statement
                    // what it was.
                    if holder_kind == Some("augmented_assignment") {
                        return;
                    }
                    let Binding::Value(v) = binding else { return };
                    let wrap = |key: Option<Name>, inner: Expr| match key {
                        Some(key) => Expr::Keyed(vec![(key, inner)]),
                        None => Expr::Container(ContainerKind::Dict, vec![inner]),
                    };
                    // `table["a"]["b"] = f` stores `{"a": {"b": f}}` into `table`: one level per
                    // subscript, down to the name.
                    // The constant keys from the name inwards (`None` once one is not constant).
                    let mut path: Option<Vec<Name>> = key.clone().map(|k| vec![k]);
                    let mut element = wrap(key, v);
                    let mut container = object;
                    while container.kind_str() == "subscript" {
                        let key = container.field("subscript").and_then(|k| self.constant_key(k));
                        path = match (path, &key) {
                            (Some(mut p), Some(k)) => {
                                p.insert(0, k.clone());
                                Some(p)
                            }
                            _ => None,
                        };
                        element = wrap(key, element);
                        let Some(inner) = container.field("value") else { break };
                        container = inner;
                    }
                    if container.kind_str() == "identifier" {
                        // The element joins the container wherever the container lives (often a
                        // module-level registry mutated from a function).
                        let name = Name::new(self.text(container));
                        let owner = self.container_scope(&name, scope);
                        if let Some(path) = path {
                            self.overwrite_keys(owner, scope, &name, &[path]);
                        }
                        let at = self.scope(owner).bindings.len() as u32;
                        self.bind(owner, &name, Binding::Value(element));
                        self.scope(owner).item_stores.push(at);
                    } else if container.kind_str() == "attribute" {
                        // `self.adapters[prefix] = adapter`: an element of the attribute.
                        let object = container.field("object");
                        let attr = container.field("attribute");
                        if let (Some(object), Some(attr)) = (object, attr)
                            && object.kind_str() == "identifier"
                        {
                            let base = Expr::Name(Name::new(self.text(object)));
                            let attr = Name::new(self.text(attr));
                            self.attr_store(scope, base, attr, element, true, target, stmt);
                        }
                    }
                }
            }
            _ => {
                self.expr(target, scope);
            }
        }
    }

    /// Records a store into `base.attr` made by assignment target `target` of statement `stmt`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attr_store(
        &mut self,
        scope: ScopeId,
        base: Expr,
        attr: Name,
        value: Expr,
        element_only: bool,
        target: Node,
        stmt: Option<Node>,
    ) {
        let stmt = stmt.unwrap_or(target);
        self.scope(scope).attr_stores.push(AttrStore {
            base,
            attr,
            value,
            element_only,
            line: line(target),
            start_line: line(stmt),
            end_line: stmt.end_position().row as u32 + 1,
            start_byte: stmt.start_byte() as u32,
            end_byte: stmt.end_byte() as u32,
        });
    }

    /// `items.append(f)` (and `add`, `appendleft`, `insert(i, f)`, `extend([f, g])`) makes what
    /// it adds an element of `items`, as `items[k] = f` does: callbacks collected in a list and
    /// called in a loop. Only a container named by a plain name that is bound somewhere visible.
    pub(super) fn container_mutation(&mut self, callee: &Expr, args: &[Expr], scope: ScopeId) {
        let Expr::Attr(base, method) = callee else { return };
        let Expr::Name(name) = base.as_ref() else { return };
        if scope == 0 && name == "__all__" {
            // `__all__.append("x")`, `__all__.extend(["x", "y"])`: literal names are followed.
            let names: Option<Vec<Name>> = match (method.as_str(), args) {
                ("append", [Expr::Constant(k)]) if !k.starts_with(INTEGER_KEY) => Some(vec![k.clone()]),
                ("extend", [Expr::Container(_, items)]) => items
                    .iter()
                    .map(|e| match e {
                        Expr::Constant(k) if !k.starts_with(INTEGER_KEY) => Some(k.clone()),
                        _ => None,
                    })
                    .collect(),
                ("append" | "extend" | "insert" | "remove" | "__iadd__", _) => None,
                _ => Some(Vec::new()),
            };
            match names {
                Some(names) => self.dunder_all.get_or_insert_with(Vec::new).extend(names),
                None => self.dunder_all_dynamic = true,
            }
            return;
        }
        // `handlers.update({"error": on_error})` stores under those keys, as
        // `handlers["error"] = on_error` does.
        if let ("update", [Expr::Keyed(items)]) = (method.as_str(), args) {
            let owner = self.container_scope(name, scope);
            if self.bound_to(owner, name, makes_dict) {
                let keys: Vec<Vec<Name>> = items.iter().map(|(k, _)| vec![k.clone()]).collect();
                self.overwrite_keys(owner, scope, &name.clone(), &keys);
                self.bind(owner, &name.clone(), Binding::Value(Expr::Keyed(items.clone())));
            }
            return;
        }
        // Calls that move, drop or replace what sits under a key or an index (`pop`, `sort`,
        // `update` with anything but a dict literal, ...): the items are no longer the ones the
        // literals wrote where they wrote them, so an item read by key or index falls back to any
        // element. An empty `Added` says so and adds no element.
        if matches!(
            method.as_str(),
            "pop"
                | "popitem"
                | "clear"
                | "setdefault"
                | "update"
                | "remove"
                | "reverse"
                | "sort"
                | "__setitem__"
                | "__delitem__"
        ) {
            let owner = self.container_scope(name, scope);
            let is_literal = |e: &Expr| matches!(e, Expr::Keyed(_) | Expr::Container(..));
            if self.bound_to(owner, name, is_literal) {
                self.bind(owner, &name.clone(), Binding::Value(Expr::Added(Vec::new())));
            }
            return;
        }
        let added = match (method.as_str(), args) {
            ("append" | "add" | "appendleft", [v]) => vec![v.clone()],
            ("insert", [_, v]) => vec![v.clone()],
            ("extend", [Expr::Container(_, items)]) => items.clone(),
            ("extend", [other]) => vec![Expr::Subscript(Box::new(other.clone()))],
            _ => return,
        };
        let added: Vec<Expr> = added.into_iter().filter(|e| *e != Expr::Unknown).collect();
        if added.is_empty() {
            return;
        }
        // Only a name bound to a container (`[]`, `set()`, `deque()`, ...): `group.add(cmd)` on
        // some other object must not make it a list.
        let owner = self.container_scope(name, scope);
        if !self.bound_to(owner, name, is_container) {
            return;
        }
        self.bind(owner, &name.clone(), Binding::Value(Expr::Added(added)));
    }

    /// Whether `value` is a dict: a literal, a `dict(...)` call, or a name bound (where `scope`
    /// sees it) to those alone.
    fn is_dict_value(&self, value: &Expr, scope: ScopeId) -> bool {
        match value {
            // Every binding of the name: `xs = [item]`, then `xs = {}` in a branch, may be a list.
            Expr::Name(name) => {
                let owner = self.container_scope(name, scope);
                self.bound_only_to(owner, name, |b| matches!(b, Binding::Value(e) if makes_dict(e)))
            }
            other => makes_dict(other),
        }
    }

    /// Whether `callee` names `function` of the standard library's module `module`
    /// (`collections.deque`, `copy.copy`): `function` imported from `module` under any name, or
    /// `function` of `module` imported under any name, in the module or the function (where the
    /// name is bound by those imports alone: a file's own `deque`, or a method of that name, is
    /// not it).
    fn names_std_function(&self, callee: &Expr, scope: ScopeId, module: &str, function: &str) -> bool {
        let only = |name: &Name, is: &dyn Fn(&Import) -> bool| {
            let owner = self.container_scope(name, scope);
            self.bound_only_to(owner, name, |b| matches!(b, Binding::Import(i) if is(i)))
        };
        let is_module = |m: &ModuleRef| m.level == 0 && m.name == module;
        match callee {
            Expr::Name(n) => {
                only(n, &|i| matches!(i, Import::Name { module, name } if is_module(module) && name == function))
            }
            Expr::Attr(base, attr) if attr == function => match base.as_ref() {
                Expr::Name(m) => only(m, &|i| matches!(i, Import::Module { module } if is_module(module))),
                _ => false,
            },
            _ => false,
        }
    }

    /// Whether `scope` binds `name`, and only by bindings `is_kind` accepts (as far as lowered).
    fn bound_only_to(&self, scope: ScopeId, name: &Name, is_kind: impl Fn(&Binding) -> bool) -> bool {
        let mut bindings = self.scopes[scope as usize].bindings_of(name).peekable();
        bindings.peek().is_some() && bindings.all(is_kind)
    }

    /// Whether `scope` binds `name` to a value `is_kind` accepts (as far as lowered).
    pub(super) fn bound_to(&self, scope: ScopeId, name: &Name, is_kind: impl Fn(&Expr) -> bool) -> bool {
        self.scopes[scope as usize].bindings_of(name).any(|b| matches!(b, Binding::Value(e) if is_kind(e)))
    }

    /// A store under constant keys of the dict `name`, made unconditionally by the code of the
    /// scope the dict lives in (not from a function that may or may not run, not in a branch or
    /// loop), replaces what earlier literals of that scope put under those keys: `d["a"] = g`
    /// after `d = {"a": f}` leaves `g` only (what functions called later see). Not
    /// flow-sensitive beyond that: a use between the two statements sees `g` as well.
    /// Each of `paths` is a chain of constant keys (`["a", "b"]` for `d["a"]["b"] = g`).
    pub(super) fn overwrite_keys(&mut self, owner: ScopeId, scope: ScopeId, name: &Name, paths: &[Vec<Name>]) {
        fn remove(expr: &mut Expr, path: &[Name]) {
            let (Expr::Keyed(items), Some((first, rest))) = (expr, path.split_first()) else { return };
            if rest.is_empty() {
                items.retain(|(k, _)| k != first);
            } else {
                for (k, inner) in items.iter_mut() {
                    if k == first {
                        remove(inner, rest);
                    }
                }
            }
        }
        if owner != scope || self.conditional_depth > 0 {
            return;
        }
        for (n, b) in self.scopes[owner as usize].bindings.iter_mut() {
            if n == name
                && let Binding::Value(e) = b
            {
                for path in paths {
                    remove(e, path);
                }
            }
        }
    }

    /// The scope whose binding of `name` (as far as lowered) a store into `name[...]` mutates.
    pub(super) fn container_scope(&self, name: &str, scope: ScopeId) -> ScopeId {
        let mut s = scope;
        loop {
            let sc = &self.scopes[s as usize];
            if sc.globals.iter().any(|g| g == name) {
                return 0;
            }
            if (s == scope || sc.kind != ScopeKind::Class) && sc.binds(name) {
                return s;
            }
            match sc.parent {
                Some(p) => s = p,
                None => return 0,
            }
        }
    }

    /// Module-level and class-level assignments define variable units (once per name).
    pub(super) fn define_variable(&mut self, scope: ScopeId, name: &str, stmt: Option<Node>) {
        let Some(stmt) = stmt else { return };
        let sc = &self.scopes[scope as usize];
        if !matches!(sc.kind, ScopeKind::Module | ScopeKind::Class) {
            return;
        }
        // `global G` in a class body: `G = 1` there binds the module's `G` (a global write).
        if sc.kind == ScopeKind::Class && sc.globals.iter().any(|g| g == name) {
            return;
        }
        let key = (scope, Name::new(name));
        if self.module_variables.contains_key(&key) {
            return;
        }
        let def = self.push_def(scope, DefKind::Variable, name, stmt, None, None, Vec::new());
        self.module_variables.insert(key, def);
    }
}

/// Whether `e` makes a dict: a literal, or a `dict(...)`, `defaultdict(...)` or `OrderedDict(...)`.
fn makes_dict(e: &Expr) -> bool {
    match e {
        Expr::Keyed(_) | Expr::Container(ContainerKind::Dict, _) => true,
        Expr::Call(c) => matches!(c.as_ref(), Expr::Name(n) | Expr::Attr(_, n)
            if matches!(n.as_str(), "dict" | "defaultdict" | "OrderedDict")),
        _ => false,
    }
}

/// Whether `e` makes a container (`[]`, `set()`, `deque()`, `list(xs)`, ...): one whose
/// `append` and `add` add elements.
fn is_container(e: &Expr) -> bool {
    match e {
        Expr::Container(..) => true,
        Expr::Call(c) => matches!(c.as_ref(), Expr::Name(n) | Expr::Attr(_, n)
            if matches!(n.as_str(), "list" | "set" | "deque" | "defaultdict" | "OrderedDict")),
        // `list(xs)` is lowered to the call and a list of `xs`'s elements (see `iteration_view`).
        Expr::Union(items) => items.iter().any(is_container),
        _ => false,
    }
}

/// The names a target pattern binds (`a`, `b` and `rest` in `a, (b, *rest) = ...`).
fn pattern_names(lowerer: &Lowerer, target: Node) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![target];
    while let Some(node) = stack.pop() {
        if node.kind_str() == "identifier" {
            names.push(lowerer.text(node).to_string());
            continue;
        }
        // An attribute or subscript target binds no name (`self.a, t[0] = ...`).
        if matches!(node.kind_str(), "attribute" | "subscript") {
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.named_children(&mut cursor));
    }
    names
}
