//! Evaluation of this file's own code at a site: which binding of a name the site sees (LEGB;
//! the module body in its order), parameters (their annotations and the arguments this file
//! passes), constants, and the elements and items of local values.

use super::*;

/// How many overridden definitions an unannotated parameter's annotation is looked for in (see
/// `Resolver::inherited_annotation`).
const MAX_OVERRIDE_LEVELS: usize = 8;

impl<'a> Resolver<'a> {
    /// `evaluate()` at a site of `scope` at `line`: where that code runs with the module body,
    /// a module-level name is what it holds at that line (`t = T(); t["a"]; t = U()` reads the
    /// `T`).
    pub(super) fn at_line<R>(&self, scope: ScopeId, line: u32, evaluate: impl FnOnce() -> R) -> R {
        self.module_site_line.set(self.runs_with_module_body(scope).then_some(line));
        let out = evaluate();
        self.module_site_line.set(None);
        out
    }

    /// Whether the code of `scope` runs while the module body runs, at its lines: the module's
    /// own, and a class body's at module level (`class Renderer: backend = Templates` reads
    /// the `Templates` of that line, before a later `class Templates` rebinds it).
    pub(super) fn runs_with_module_body(&self, scope: ScopeId) -> bool {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            match (sc.kind, sc.parent) {
                (ScopeKind::Module, _) => return true,
                (ScopeKind::Class, Some(parent)) => s = parent,
                _ => return false,
            }
        }
    }

    /// The scope whose binding of `name` is visible from `scope` (LEGB; class bodies are not
    /// visible from nested functions). `None` means builtins.
    pub(super) fn binding_scope(&self, name: &str, scope: ScopeId) -> Option<ScopeId> {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            if sc.globals.iter().any(|g| g == name) {
                return Some(0);
            }
            // `nonlocal name`: the name is the enclosing function's, whatever this scope assigns.
            let nonlocal = sc.nonlocals.iter().any(|n| n == name);
            let visible = (sc.kind != ScopeKind::Class || s == scope) && !nonlocal;
            if visible && self.scope_bindings[s as usize].contains_key(name) {
                return Some(s);
            }
            match sc.parent {
                Some(p) => s = p,
                None => return None,
            }
        }
    }

    /// The paths of the `def`s and `class`es nested functions bind to `expr`'s head name through
    /// `nonlocal` (`nonlocal condition`, then `def condition(): ...`): named by this file's code
    /// even where the name is also a parameter.
    pub(super) fn nonlocal_defs(&self, expr: &Expr, scope: ScopeId) -> Vec<&'a str> {
        let mut head = expr;
        while let Expr::Attr(base, _) = head {
            head = base;
        }
        let Expr::Name(name) = head else { return Vec::new() };
        let Some(s) = self.binding_scope(name, scope) else { return Vec::new() };
        let mut out = Vec::new();
        for &writer in self.nonlocal_writers.get(&(s, name.as_str())).map(Vec::as_slice).unwrap_or(&[]) {
            for &i in self.scope_bindings[writer as usize].get(name.as_str()).map(Vec::as_slice).unwrap_or(&[]) {
                if let Binding::Def(d) = &self.syntax.scope(writer).bindings[i].1 {
                    out.push(self.syntax.def(*d).path.as_str());
                }
            }
        }
        out
    }

    pub(super) fn head_is_param(&self, expr: &Expr, scope: ScopeId) -> bool {
        let mut head = expr;
        while let Expr::Attr(base, _) = head {
            head = base;
        }
        let Expr::Name(name) = head else { return false };
        let Some(s) = self.binding_scope(name, scope) else {
            return false;
        };
        // Parameters are the only `Binding::Param`s: their list is short, where a name's bindings
        // may be many (100,000 lines of `x = list(x)` made this quadratic).
        self.syntax.scope(s).params.iter().any(|p| p.name == *name)
    }

    pub(super) fn enclosing_class(&self, scope: ScopeId) -> Option<(Target, ScopeId)> {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            if sc.kind == ScopeKind::Function {
                let parent = sc.parent?;
                let ps = self.syntax.scope(parent);
                if ps.kind == ScopeKind::Class {
                    let def = ps.def?;
                    return Some((Target::new(&self.module, &self.syntax.def(def).path), s));
                }
            }
            s = sc.parent?;
        }
    }

    /// A name the module body rebinds, read by the module body's own code at the site being
    /// resolved: its raw values at that line (the bindings in force there, not the final ones), and
    /// the variable unit it reads, if it is one. `None` for every other name or site.
    pub(super) fn module_body_values(
        &self,
        name: &str,
        scope: ScopeId,
        depth: u32,
    ) -> Option<(Vec<Value>, Option<Target>)> {
        let line = self.module_site_line.get()?;
        if scope != 0 && self.binding_scope(name, scope) != Some(0) {
            return None;
        }
        let indices = self.scope_bindings[0].get(name).map(Vec::as_slice).unwrap_or(&[]);
        let body = self.syntax.scope(0);
        if indices.len() < 2 || !indices.iter().any(|&i| body.replacing_index(i)) {
            return None;
        }
        // Memoised by name and line: the bindings in force there are evaluated at the same line,
        // so a name rebound from itself (`x = x.y`, over and over) read every binding again at
        // every level down to the depth bound (25 lines took 0.5 s, 50 lines 15 s).
        let values = self.memoised(&self.module_body_names, (Name::new(name), line), || {
            let mut values = Vec::new();
            // Raw, as `name_values` returns them: the site records the variables among them (an
            // imported list that `urlpatterns += [...]` reads) before they are replaced by their
            // values.
            for i in self.syntax.bindings_at_line(0, indices, line) {
                extend(&mut values, self.binding_values(&body.bindings[i].1, 0, depth + 1));
            }
            values
        });
        let variable = self
            .defs_by_path
            .get(name)
            .filter(|&&d| self.syntax.def(d).kind == DefKind::Variable)
            .map(|_| Target::new(&self.module, name));
        Some((values, variable))
    }

    /// The values of a name read in `scope`; raw (may contain `Var`).
    pub(super) fn name_values(&self, name: &str, scope: ScopeId, depth: u32) -> Vec<Value> {
        let Some(s) = self.binding_scope(name, scope) else {
            // Not bound by any statement of this file: a star import, else a builtin.
            let mut values = self.module_member(&self.module, name, depth + 1);
            if values.is_empty() {
                values.extend(builtin(name));
            }
            return values;
        };
        if s == 0 {
            let mut values = self.module_member(&self.module, name, depth + 1);
            // Lambdas at module level are not in the summary (their identity is positional).
            for &l in self.module_lambdas.get(name).map(Vec::as_slice).unwrap_or(&[]) {
                push(&mut values, Value::Lambda(l));
            }
            return values;
        }
        if self.syntax.scope(s).kind == ScopeKind::Class
            && let Some(&def) = self.scope_units.get(&(s, name))
        {
            let d = self.syntax.def(def);
            return vec![def_value(&self.module, &d.path, d.kind)];
        }
        self.memoised(&self.local_names, (s, Name::new(name)), || {
            let mut values = Vec::new();
            // A store through a subscript (`d["a"] = f`) makes the name a dict only when nothing
            // else says what it is, as for attributes (`Resolver::var_values`): `p = Plain()` then
            // `p["k"] = v` keeps `Plain`'s methods alone, and a parameter stored into is what
            // calls pass. A dict written out (`d = {}`) says so, as any other value does.
            let mut stored = Vec::new();
            let scope = self.syntax.scope(s);
            let indices = self.scope_bindings[s as usize].get(name).cloned().unwrap_or_default();
            for i in self.syntax.live_bindings(s, &indices) {
                let binding = &scope.bindings[i].1;
                let is_store = scope.item_stores.binary_search(&(i as u32)).is_ok();
                extend(if is_store { &mut stored } else { &mut values }, self.binding_values(binding, s, depth + 1));
            }
            // What nested functions assign to it through `nonlocal` (`nonlocal fn; fn = b`).
            for &writer in self.nonlocal_writers.get(&(s, name)).map(Vec::as_slice).unwrap_or(&[]) {
                for &i in self.scope_bindings[writer as usize].get(name).map(Vec::as_slice).unwrap_or(&[]) {
                    let binding = &self.syntax.scope(writer).bindings[i].1;
                    extend(&mut values, self.binding_values(binding, writer, depth + 1));
                }
            }
            if values.is_empty() {
                values = stored;
            }
            values
        })
    }

    pub(super) fn binding_values(&self, binding: &Binding, scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match binding {
            Binding::Value(e) => self.eval_local(e, scope, depth + 1),
            Binding::Unpack(Expr::Container(_, items), i) => {
                items.get(*i as usize).map(|e| self.eval_local(e, scope, depth + 1)).unwrap_or_default()
            }
            Binding::Unpack(e, i) => self.element_at(e, &[*i], scope, depth + 1),
            Binding::Iter(e) => self.elements_local(e, scope, depth + 1),
            Binding::Enter(e, is_async) => self.entered(e, *is_async, scope, depth + 1),
            Binding::Exception(e) => self
                .eval_local(e, scope, depth + 1)
                .into_iter()
                .filter_map(|v| match v {
                    Value::Class(t) => Some(Value::Instance(t)),
                    Value::External(x) => Some(Value::ExternalInstance(x)),
                    _ => None,
                })
                .collect(),
            Binding::Def(d) => {
                let def = self.syntax.def(*d);
                vec![def_value(&self.module, &def.path, def.kind)]
            }
            Binding::Import(Import::Module { module }) => {
                match absolute_module(module, &self.module, self.is_package) {
                    Some(m) => self.module_value(&m).into_iter().collect(),
                    None => Vec::new(),
                }
            }
            Binding::Import(Import::Name { module, name }) => {
                match absolute_module(module, &self.module, self.is_package) {
                    Some(m) => self.import_name(&m, name, depth + 1),
                    None => Vec::new(),
                }
            }
            Binding::Param(i) => self.param_values(scope, *i, depth + 1),
        }
    }

    /// `with expr as x`: x is what the manager's `__enter__` (`__aenter__` for `async with`)
    /// returns, for an instance of a repository class that defines one (`return self` gives
    /// the instance, of the subclass it is); for the external managers of [`EXTERNAL_ENTERED`]
    /// (and repository subclasses that define no `__enter__`), what that table says; the manager
    /// itself for other managers (an external one is taken to enter as itself, as files do) and
    /// where what `__enter__` returns is not known (an abstract one, `return
    /// super().__enter__()` of an external base); for calls of generator context managers
    /// (`@contextmanager def f() -> Iterator[X]: yield ...`), what they yield, which is not
    /// entered again.
    pub(super) fn entered(&self, expr: &Expr, is_async: bool, scope: ScopeId, depth: u32) -> Vec<Value> {
        // `cm = session(); with cm as x`: a function's local name bound only to calls is entered
        // as those calls are (a generator context manager's call has no value of its own).
        let eval = |e: &Expr, d| self.eval_local(e, scope, d);
        if let Expr::Name(n) = expr
            && let Some(calls) = self.local_call_bindings(n, scope)
        {
            let mut out = Vec::new();
            for call in &calls {
                extend(&mut out, self.entered_with(call, is_async, depth, &eval));
            }
            return out;
        }
        self.entered_with(expr, is_async, depth, &eval)
    }

    /// The calls a function's local `name` is bound to, when every binding of it in force is a
    /// call (`cm = session()`); None otherwise.
    fn local_call_bindings(&self, name: &str, scope: ScopeId) -> Option<Vec<Expr>> {
        let s = self.binding_scope(name, scope)?;
        if self.syntax.scope(s).kind != ScopeKind::Function || self.nonlocal_writers.contains_key(&(s, name)) {
            return None;
        }
        let indices = self.scope_bindings[s as usize].get(name)?;
        let mut calls = Vec::new();
        for i in self.syntax.live_bindings(s, indices) {
            match &self.syntax.scope(s).bindings[i].1 {
                Binding::Value(call @ Expr::Call(_)) => calls.push(call.clone()),
                _ => return None,
            }
        }
        (!calls.is_empty()).then_some(calls)
    }

    /// [`Resolver::entered`], with the manager's expression evaluated by `eval` (a function's
    /// own code, or a summary's closed expressions).
    pub(super) fn entered_with(
        &self,
        expr: &Expr,
        is_async: bool,
        depth: u32,
        eval: &dyn Fn(&Expr, u32) -> Vec<Value>,
    ) -> Vec<Value> {
        let Expr::Call(callee) = expr else {
            let managers = eval(expr, depth + 1);
            return self.enter_each(managers, is_async, depth);
        };
        let mut out = Vec::new();
        for c in eval(callee, depth + 1) {
            // `with localcontext() as ctx`: a factory no instance is made of here.
            if let Value::External(x) = &c
                && let Some(entered) = external_entered(x)
            {
                if let Some(v) = entered {
                    push(&mut out, v);
                }
                continue;
            }
            if let Value::Function(t) = &c {
                let is_context_manager = self
                    .summary_for(&t.module, &t.path)
                    .and_then(|s| s.function(&t.path).and_then(|f| f.outermost_decorator().cloned()))
                    .is_some_and(|d| is_contextmanager_decorator(&d));
                if is_context_manager {
                    extend(&mut out, self.call_elements(&c, depth + 1));
                    continue;
                }
            }
            let managers = self.call_result(&c, depth + 1);
            extend(&mut out, self.enter_each(managers, is_async, depth));
        }
        out
    }

    /// What entering each of `managers` gives (see [`Resolver::entered`]).
    fn enter_each(&self, managers: Vec<Value>, is_async: bool, depth: u32) -> Vec<Value> {
        let name = if is_async { "__aenter__" } else { "__enter__" };
        let mut out = Vec::new();
        for manager in managers {
            if let Value::ExternalInstance(x) = &manager
                && let Some(entered) = external_entered(x)
            {
                if let Some(v) = entered {
                    push(&mut out, v);
                }
                continue;
            }
            let Value::Instance(class) = &manager else {
                push(&mut out, manager);
                continue;
            };
            let defined = self
                .deref(self.class_attr(class, name, None, depth + 1), depth + 1)
                .iter()
                .any(|m| matches!(m, Value::Function(_)));
            let entered = if defined {
                self.method_call_result(std::slice::from_ref(&manager), name, false, None, depth + 1)
            } else {
                // A subclass of an external manager (`class Scratch(TemporaryDirectory)`) enters
                // as its base does.
                let inherited = self.mro(class, depth + 1).iter().find_map(|entry| match entry {
                    MroEntry::External(x) => external_entered(x),
                    MroEntry::Class(_) => None,
                });
                match inherited {
                    Some(Some(entered)) => vec![entered],
                    Some(None) => continue,
                    None => Vec::new(),
                }
            };
            if entered.is_empty() {
                push(&mut out, manager);
            } else {
                extend(&mut out, entered);
            }
        }
        out
    }

    pub(super) fn param_values(&self, scope: ScopeId, index: u32, depth: u32) -> Vec<Value> {
        let sc = self.syntax.scope(scope);
        let Some(param) = sc.params.get(index as usize) else {
            return Vec::new();
        };
        let mut values = Vec::new();
        if index == 0
            && sc.kind == ScopeKind::Function
            && let Some(parent) = sc.parent
        {
            let ps = self.syntax.scope(parent);
            if ps.kind == ScopeKind::Class
                && let (Some(class_def), Some(def)) = (ps.def, sc.def)
            {
                let flags = method_flags(&self.syntax.def(def).decorators);
                let class = Target::new(&self.module, &self.syntax.def(class_def).path);
                let name = &self.syntax.def(def).name;
                let is_meta_new = name == "__new__" || is_implicit_classmethod(name);
                // `self`/`cls` is the class, or whatever receivers calls in this file
                // were seen to pass (subclass instances calling inherited methods).
                let mut classes = vec![class.clone()];
                for receiver in self.receiver_flow.get(&scope).map(Vec::as_slice).unwrap_or(&[]) {
                    if !classes.contains(receiver) {
                        classes.push(receiver.clone());
                    }
                }
                if flags.is_class || is_meta_new {
                    return classes.into_iter().map(Value::Class).collect();
                } else if !flags.is_static {
                    return classes.into_iter().map(Value::Instance).collect();
                }
            }
        }
        if param.variadic {
            // `*args` is a tuple and `**kwargs` a dict, whatever is passed (their annotation,
            // which types their elements, is not read).
            return vec![builtin_instance(if param.keywords { "dict" } else { "tuple" })];
        }
        let parent = sc.parent.unwrap_or(0);
        if let Some(default) = &param.default {
            extend(&mut values, self.eval_local(default, parent, depth + 1));
        }
        if let Some(annotation) = &param.annotation {
            extend(&mut values, self.eval_local(annotation, scope, depth + 1));
        } else {
            extend(&mut values, self.inherited_annotation(scope, &param.name, depth + 1));
        }
        if let Some(flows) = self.param_flow.get(&(scope, index)) {
            for (caller_scope, arg) in flows {
                extend(&mut values, self.eval_local(arg, *caller_scope, depth + 1));
            }
        }
        values
    }

    /// What an unannotated parameter `name` of the method whose body is `scope` receives by the
    /// annotation of the parameter of that name in the method it overrides (the nearest
    /// definition of the method's name after its class in the MRO, or the one that overrides, up
    /// to [`MAX_OVERRIDE_LEVELS`], when it leaves the parameter unannotated as well): `def
    /// extendMarkdown(self, md)` overriding `def extendMarkdown(self, md: Markdown)`. Callers
    /// that keep to the base's signature pass what it promises.
    fn inherited_annotation(&self, scope: ScopeId, name: &Name, depth: u32) -> Vec<Value> {
        let sc = self.syntax.scope(scope);
        let (Some(def), Some(parent)) = (sc.def, sc.parent) else { return Vec::new() };
        let ps = self.syntax.scope(parent);
        let Some(class_def) = ps.def.filter(|_| ps.kind == ScopeKind::Class) else { return Vec::new() };
        if self.too_deep(depth) {
            return Vec::new();
        }
        let method = &self.syntax.def(def).name;
        // Up the overridden definitions while they leave it unannotated too (a few levels).
        let mut class = Target::new(&self.module, &self.syntax.def(class_def).path);
        for _ in 0..MAX_OVERRIDE_LEVELS {
            let overridden = self.class_attr(&class, method, Some(&class), depth + 1);
            let Some(next) = overridden.iter().find_map(|v| match v {
                Value::Function(t) => Some(t.clone()),
                _ => None,
            }) else {
                return Vec::new();
            };
            let annotation = self.with_function(&Value::Function(next.clone()), |t, f| {
                let (_, annotation) = f.param_annotations.iter().find(|(n, _)| n == name)?;
                let owner = t.owner().map(SelfClass::own);
                Some(self.eval_closed(annotation, &t.module, owner.as_ref(), depth + 1))
            });
            match (annotation, next.owner()) {
                (Some(Some(values)), _) => return values,
                (_, Some(owner)) => class = owner,
                (_, None) => return Vec::new(),
            }
        }
        Vec::new()
    }

    /// Evaluates an expression of this file written in `scope`; variables are replaced by values.
    pub(super) fn eval_local(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<Value> {
        self.eval_site(expr, scope, None, depth)
    }

    /// Evaluates an expression; when `hits` is given, records the variables and properties the
    /// name/attribute chain passes through (the site's references).
    pub(super) fn eval_site(
        &self,
        expr: &Expr,
        scope: ScopeId,
        mut hits: Option<&mut SiteHits>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let raw = match expr {
            Expr::Name(n) => {
                let values = match self.module_body_values(n, scope, depth + 1) {
                    Some((values, variable)) => {
                        if let (Some(h), Some(t)) = (hits.as_deref_mut(), variable) {
                            h.vars.push(t);
                        }
                        values
                    }
                    None => self.name_values(n, scope, depth + 1),
                };
                // A module handed over as an argument is not named by this code.
                if let Some(h) = hits.as_deref_mut()
                    && !self.head_is_param(expr, scope)
                {
                    self.note_modules(&values, h);
                }
                values
            }
            Expr::Attr(base, attr) => {
                let bases = self.eval_site(base, scope, hits.as_deref_mut(), depth + 1);
                let named_here = hits.is_some() && !self.head_is_param(expr, scope);
                let mut out = Vec::new();
                for b in &bases {
                    let values = self.attr_of(b, attr, depth + 1);
                    if let Some(h) = hits.as_deref_mut().filter(|_| named_here) {
                        // `pkg.mod.f()` reads `pkg.mod`: the package on the way is only the path
                        // to it (else everything written `pkg.…` would reference the package).
                        if let Value::Module(outer) = b
                            && values.iter().any(|v| matches!(v, Value::Module(_)))
                        {
                            h.modules.retain(|m| m != outer);
                        }
                        self.note_modules(&values, h);
                    }
                    let receiver = property_receiver(b);
                    for v in values {
                        if let (Value::Function(t), Some(receiver)) = (&v, &receiver)
                            && self.method_flags(t).is_property
                        {
                            if let Some(h) = hits.as_deref_mut() {
                                h.properties.push(t.clone());
                            }
                            extend(&mut out, self.result_on_instance(&v, receiver, depth + 1));
                            continue;
                        }
                        // A class attribute `x = property(getter, setter)`, read on an instance:
                        // the variable is read, and its getter called.
                        if let (Value::Var(var), Some(receiver)) = (&v, &receiver) {
                            let made = self.made_properties(var, depth + 1);
                            if !made.is_empty() {
                                if let Some(h) = hits.as_deref_mut() {
                                    h.vars.push(var.clone());
                                    for m in &made {
                                        h.push_made(m);
                                    }
                                }
                                for m in &made {
                                    extend(&mut out, self.made_property_value(m, receiver, depth + 1));
                                }
                                continue;
                            }
                        }
                        // A descriptor read on the class (`Model.objects`, `cls.field`) calls its
                        // `__get__` with no instance (see [`Resolver::class_read`]).
                        if let (Value::Var(var), Value::Class(_)) = (&v, b)
                            && let Some((getters, values)) = self.class_read(var, &v, depth + 1)
                        {
                            if let Some(h) = hits.as_deref_mut() {
                                h.vars.push(var.clone());
                                h.properties.extend(getters);
                            }
                            extend(&mut out, values);
                            continue;
                        }
                        push(&mut out, v);
                    }
                }
                out
            }
            Expr::Call(callee) => {
                if let Expr::Name(n) = callee.as_ref()
                    && n == "super"
                    && self.binding_scope("super", scope).is_none()
                {
                    let Some((class, method_scope)) = self.enclosing_class(scope) else {
                        return Vec::new();
                    };
                    let mut out = Vec::new();
                    for v in self.param_values(method_scope, 0, depth + 1) {
                        match v {
                            Value::Instance(k) => push(&mut out, Value::Super(class.clone(), k, false)),
                            Value::Class(k) => push(&mut out, Value::Super(class.clone(), k, true)),
                            _ => {}
                        }
                    }
                    if out.is_empty() {
                        out.push(Value::Super(class.clone(), class, false));
                    }
                    return out;
                }
                let mut out = match callee.as_ref() {
                    Expr::Attr(base, attr) => {
                        if self.too_deep(depth + 1) {
                            Vec::new()
                        } else {
                            let bases = self.eval_local(base, scope, depth + 2);
                            self.method_call_result(&bases, attr, true, None, depth)
                        }
                    }
                    _ => {
                        let mut out = Vec::new();
                        for c in self.eval_local(callee, scope, depth + 1) {
                            extend(&mut out, self.call_result(&c, depth + 1));
                        }
                        out
                    }
                };
                // `d.get(k)`, `d.pop(k)`, `d.setdefault(k, v)`: a value of the dict.
                for method in ["get", "pop", "setdefault"] {
                    if let Some(base) = self.dict_view(expr, method, scope, depth + 1) {
                        extend(&mut out, self.elements_local(base, scope, depth + 1));
                    }
                }
                // `todo.pop()`, `queue.popleft()`: an element of the list, set or deque.
                for method in ["pop", "popleft"] {
                    if let Some(base) = method_receiver(expr, method)
                        && !self.too_deep(depth + 1)
                        && is_builtin_sequence(&self.eval_local(base, scope, depth + 2))
                    {
                        extend(&mut out, self.elements_local(base, scope, depth + 1));
                    }
                }
                out
            }
            // Also an element of what iterating gives (see `eval_closed`): no `__getitem__`.
            Expr::Subscript(base) => self.elements_local(base, scope, depth + 1),
            // A slice is a sequence of the same type.
            Expr::Slice(base, _) => self.eval_site(base, scope, hits.as_deref_mut(), depth + 1),
            Expr::Element(base, index) => self.element_at(base, &[*index], scope, depth + 1),
            Expr::Item(base, key) => {
                let bases = self.eval_local(base, scope, depth + 1);
                self.subscript(bases, depth, || self.item_local(base, key, scope, depth + 1))
            }
            Expr::Container(kind, _) => {
                vec![builtin_instance(kind.builtin())]
            }
            Expr::Keyed(_) => vec![Value::ExternalInstance(Arc::from("builtins.dict"))],
            Expr::Lambda(l) => vec![Value::Lambda(*l)],
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Literal(t) => vec![builtin_instance(t)],
            Expr::Constant(k) => {
                vec![builtin_instance(constant_type(k))]
            }
            Expr::ItemAt(base, key) => {
                let bases = self.eval_local(base, scope, depth + 1);
                self.subscript(bases, depth, || {
                    let item = self.item_at(base, key, scope, depth + 1);
                    self.eval_site(&item, scope, hits.as_deref_mut(), depth + 1)
                })
            }
            Expr::Instance(ty) => instances(self.eval_local(ty, scope, depth + 1)),
            Expr::Declared(ty, value) => {
                let promised = self.eval_local(ty, scope, depth + 1);
                let assigned = || self.eval_site(value, scope, hits.as_deref_mut(), depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Narrowed(ty, value) => {
                let promised = self.eval_local(ty, scope, depth + 1);
                let assigned = || self.eval_site(value, scope, hits.as_deref_mut(), depth + 1);
                self.narrowed(promised, assigned, depth)
            }
            Expr::NotInstance(ty, value) => {
                let excluded = self.eval_local(ty, scope, depth + 1);
                self.not_instance(excluded, self.eval_site(value, scope, hits.as_deref_mut(), depth + 1), depth)
            }
            Expr::Entered(manager, is_async) => self.entered(manager, *is_async, scope, depth + 1),
            Expr::Decorated(inner, count) => {
                let mut out = Vec::new();
                for v in self.eval_local(inner, scope, depth + 1) {
                    match &v {
                        Value::Function(t) => extend(&mut out, self.decorated_arg(t, *count as usize, depth + 1)),
                        _ => push(&mut out, v),
                    }
                }
                out
            }
            // The getter and setter are read where `property(...)` is called, as its arguments.
            Expr::Property(getter, setter, _) => {
                let getters = self.eval_local(getter, scope, depth + 1);
                let setters = || setter.as_deref().map(|s| self.eval_local(s, scope, depth + 1));
                property_values(getters, setters)
            }
            Expr::SelfRef | Expr::ClsRef | Expr::DefPath(_) | Expr::Returning(_) | Expr::Added(_) | Expr::Unknown => {
                Vec::new()
            }
        };
        if let Some(h) = hits {
            for v in &raw {
                if let Value::Var(t) = v {
                    h.vars.push(t.clone());
                }
            }
        }
        self.deref(raw, depth)
    }

    /// Element `index` of `expr` when it is (bound to) a literal tuple or list of the right
    /// shape; otherwise any of its elements.
    pub(super) fn element_at(&self, expr: &Expr, path: &[u32], scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) || path.len() > MAX_ELEMENT_PATH {
            return Vec::new();
        }
        let Some((&index, rest)) = path.split_first() else {
            return self.eval_local(expr, scope, depth + 1);
        };
        // Not written out: any element, one level deep; deeper, nothing is known.
        let any_element =
            || if rest.is_empty() { self.unwritten_element(expr, index, scope, depth) } else { Vec::new() };
        match expr {
            // `a, b = f()` with `f` a function of the repository: its returned tuples' elements.
            Expr::Call(callee) => {
                let callees = self.eval_local(callee, scope, depth + 1);
                if !callees.is_empty() && callees.iter().all(|c| matches!(c, Value::Function(_))) {
                    let mut out = Vec::new();
                    for c in &callees {
                        extend(&mut out, self.call_element(c, path, depth + 1));
                    }
                    out
                } else {
                    any_element()
                }
            }
            Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => {
                items.get(index as usize).map(|e| self.element_at(e, rest, scope, depth + 1)).unwrap_or_default()
            }
            // Element `i` of `seq[start:]` is element `start + i` of `seq`.
            Expr::Slice(inner, Some(start)) => {
                self.element_at(inner, &shifted_path(index, *start, rest), scope, depth + 1)
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else {
                    return Vec::new();
                };
                // Memoised, as a name unpacked from itself (`rv, status = rv`) reads its own
                // bindings again at every level (see [`MAX_ELEMENT_PATH`]).
                let site_line = if s == 0 { self.module_site_line.get() } else { None };
                self.memoised(&self.local_element_paths, (s, n.clone(), path.to_vec(), site_line), || {
                    let indices = self.scope_bindings[s as usize].get(n.as_str()).cloned().unwrap_or_default();
                    let mut out = Vec::new();
                    for i in indices {
                        match &self.syntax.scope(s).bindings[i].1 {
                            Binding::Value(e) => extend(&mut out, self.element_at(e, path, s, depth + 1)),
                            Binding::Unpack(e, j) => {
                                let outer: Vec<u32> = std::iter::once(*j).chain(path.iter().copied()).collect();
                                extend(&mut out, self.element_at(e, &outer, s, depth + 1));
                            }
                            // `for p in pairs: a, b = p`, as `for a, b in pairs`.
                            Binding::Iter(e) => extend(
                                &mut out,
                                self.element_at(&Expr::Subscript(Box::new(e.clone())), path, s, depth + 1),
                            ),
                            Binding::Param(p) => {
                                // `def f(u: Tuple[Key, Val])`, then `c, d = u`: the annotation's
                                // positions (a `List[X]` has none: any element is an X).
                                match self.syntax.scope(s).params.get(*p as usize).and_then(|p| p.annotation.as_ref()) {
                                    // Read as an annotated variable is (see
                                    // [`Resolver::declared`]): a position naming a class of the
                                    // code, with the subclasses' instances callers pass; any
                                    // other (`Tuple[Any, X]`, `str`) is what any element is.
                                    Some(annotation @ Expr::Container(ContainerKind::Tuple, _)) => {
                                        let promised = self.element_at(annotation, path, s, depth + 1);
                                        extend(&mut out, self.declared_position(promised, any_element, depth))
                                    }
                                    _ => extend(&mut out, any_element()),
                                }
                            }
                            _ => extend(&mut out, any_element()),
                        }
                    }
                    out
                })
            }
            // `a, (b, c) = x`: element 0 of element 1 of `x`.
            Expr::Element(inner, j) => {
                let outer: Vec<u32> = std::iter::once(*j).chain(path.iter().copied()).collect();
                self.element_at(inner, &outer, scope, depth + 1)
            }
            // `u: Tuple[Key, Val] = make()`: the annotation's positions, as an annotated
            // variable's value is read (see [`Resolver::declared`]).
            Expr::Declared(ty, value) if matches!(ty.as_ref(), Expr::Container(ContainerKind::Tuple, _)) => {
                let promised = self.element_at(ty, path, scope, depth + 1);
                self.declared(promised, || self.element_at(value, path, scope, depth + 1), depth)
            }
            // A test on a tuple says nothing of its positions: those of the value.
            Expr::Narrowed(_, value) | Expr::NotInstance(_, value) => self.element_at(value, path, scope, depth + 1),
            Expr::Subscript(inner) => match inner.as_ref() {
                // Memoised by the name, as a name's own elements may be among what it is bound
                // to (`data = [d for d in data if ...]`, `data = list(data)`): unpacking them
                // read every binding again at every level, down to the depth bound.
                Expr::Name(n) => {
                    let site_line =
                        if self.binding_scope(n, scope) == Some(0) { self.module_site_line.get() } else { None };
                    let key: Vec<u32> = std::iter::once(ANY_ELEMENT).chain(path.iter().copied()).collect();
                    self.memoised(&self.local_element_paths, (scope, n.clone(), key, site_line), || {
                        self.element_of_element_at(expr, inner, path, scope, depth)
                    })
                }
                _ => self.element_of_element_at(expr, inner, path, scope, depth),
            },
            // `a, b = rows[i + 1]`: as `rows[0]` when the key is a known constant, else as any
            // element of `rows` is unpacked.
            Expr::ItemAt(base, key) => {
                let item = self.item_at(base, key, scope, depth + 1);
                self.element_at(&item, path, scope, depth + 1)
            }
            // `p = pairs[0]`, then `a, b = p`: element `i` of each item written out under the key.
            Expr::Item(base, key) => {
                let written = self.item_exprs(base, key, scope, depth + 1);
                if written.is_empty() {
                    return any_element();
                }
                let mut out = Vec::new();
                for (e, s) in written {
                    extend(&mut out, self.element_at(&e, path, s, depth + 1));
                }
                out
            }
            _ => any_element(),
        }
    }

    /// Element `index` of `expr` where no element of it is written out: any of its elements,
    /// and for an instance of a `NamedTuple` its field at that position (`text, style, control =
    /// segment` with `segment: Segment`). A slice of one is a plain tuple whose positions are not
    /// the fields' (`q[::2]`, `q[-1:]`; `q[1:]` is read as shifted before this).
    #[inline(never)]
    fn unwritten_element(&self, expr: &Expr, index: u32, scope: ScopeId, depth: u32) -> Vec<Value> {
        let mut out = self.elements_local(expr, scope, depth + 1);
        if matches!(expr, Expr::Slice(..)) {
            return out;
        }
        for v in self.eval_local(expr, scope, depth + 1) {
            if let Value::Instance(class) = &v
                && let Some(field) = self.named_tuple_field(class, index, depth + 1)
            {
                extend(&mut out, field);
            }
        }
        out
    }

    /// Element `path` of `whole`, an element of `inner` (`for a, b in pairs`: element `i` of
    /// each element of `pairs`); `path` is not empty.
    fn element_of_element_at(
        &self,
        whole: &Expr,
        inner: &Expr,
        path: &[u32],
        scope: ScopeId,
        depth: u32,
    ) -> Vec<Value> {
        let Some((&index, rest)) = path.split_first() else {
            return Vec::new();
        };
        let any_element =
            || if rest.is_empty() { self.unwritten_element(whole, index, scope, depth) } else { Vec::new() };
        // `for k, v in d.items()`: `v` is a value of `d` (keys are not tracked).
        if let Some(base) = self.dict_view(inner, "items", scope, depth + 1) {
            return if index == 1 && rest.is_empty() {
                self.elements_local(base, scope, depth + 1)
            } else {
                Vec::new()
            };
        }
        // `for a, b in pairs`: element `i` of each element written out in `pairs`.
        let written = self.element_exprs(inner, scope, depth + 1);
        if written.is_empty() {
            // `for name, command in visible_commands()`: element `i` of what a
            // repository function yields or declares it returns the elements of.
            if let Expr::Call(callee) = inner {
                let mut out = Vec::new();
                for c in self.eval_local(callee, scope, depth + 1) {
                    extend(&mut out, self.call_item_element(&c, path, depth + 1));
                }
                if !out.is_empty() {
                    return out;
                }
            }
            // `for _, key, value in self._list`: element `i` of each element of what
            // the attribute is assigned (or declared to hold), wherever that is written.
            if let Expr::Attr(base, attr) = inner {
                let mut out = Vec::new();
                for b in self.eval_local(base, scope, depth + 1) {
                    for v in self.attr_of(&b, attr, depth + 1) {
                        let Value::Var(t) = v else { continue };
                        let owner = t.owner().map(SelfClass::own);
                        for e in self.var_exprs(&t).iter() {
                            extend(&mut out, self.item_element_closed(e, path, &t.module, owner.as_ref(), depth + 1));
                        }
                    }
                }
                if !out.is_empty() {
                    return out;
                }
            }
            return any_element();
        }
        let mut out = Vec::new();
        for (e, s) in written {
            extend(&mut out, self.element_at(&e, path, s, depth + 1));
        }
        out
    }

    /// The element expressions written out in this file for the container `expr` is bound to
    /// (and the scope to read each in): literal items, through names, and what was added to it.
    pub(super) fn element_exprs(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<(Expr, ScopeId)> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::Container(_, items) | Expr::Added(items) => items.iter().map(|e| (e.clone(), scope)).collect(),
            Expr::Keyed(items) => items.iter().map(|(_, e)| (e.clone(), scope)).collect(),
            Expr::Slice(inner, _) => self.element_exprs(inner, scope, depth + 1),
            Expr::Name(n) => {
                let listing = (self.binding_scope(n, scope).unwrap_or(scope), n.clone());
                if self.listing_elements.borrow().contains(&listing) {
                    return Vec::new();
                }
                self.listing_elements.borrow_mut().push(listing);
                let mut out: Vec<(Expr, ScopeId)> = self
                    .bound_values(n, scope)
                    .into_iter()
                    .flat_map(|(e, s)| self.element_exprs(e, s, depth + 1))
                    .collect();
                // `def f(pairs: List[Tuple[A, B]])`: the elements its annotation promises.
                for (annotation, s) in self.param_annotations(n, scope) {
                    out.extend(self.element_exprs(annotation, s, depth + 1));
                }
                self.listing_elements.borrow_mut().pop();
                out
            }
            // `pairs: List[Tuple[A, B]] = []`: the elements the annotation promises when it
            // writes any out, else those of the value.
            Expr::Declared(ty, value) => {
                let promised = self.element_exprs(ty, scope, depth + 1);
                if promised.is_empty() { self.element_exprs(value, scope, depth + 1) } else { promised }
            }
            // `enumerate(xs)`: the call, and the list of pairs it iterates as (see
            // `lower::iteration_view`).
            Expr::Union(items) => items.iter().flat_map(|e| self.element_exprs(e, scope, depth + 1)).collect(),
            // A test on the container says nothing of its elements.
            Expr::Narrowed(_, value) | Expr::NotInstance(_, value) => self.element_exprs(value, scope, depth + 1),
            _ => Vec::new(),
        }
    }

    /// The expressions a name is bound to by plain assignment in the scope whose binding is
    /// visible from `scope` (and that scope).
    pub(super) fn bound_values(&self, name: &Name, scope: ScopeId) -> Vec<(&'a Expr, ScopeId)> {
        let Some(s) = self.binding_scope(name, scope) else { return Vec::new() };
        let Some(indices) = self.scope_bindings[s as usize].get(name.as_str()) else { return Vec::new() };
        let bindings = &self.syntax.scope(s).bindings;
        indices
            .iter()
            .filter_map(|&i| match &bindings[i].1 {
                Binding::Value(e) => Some((e, s)),
                _ => None,
            })
            .collect()
    }

    /// The annotations of the parameters a name is bound to in the scope whose binding is
    /// visible from `scope` (and that scope).
    pub(super) fn param_annotations(&self, name: &Name, scope: ScopeId) -> Vec<(&'a Expr, ScopeId)> {
        let Some(s) = self.binding_scope(name, scope) else { return Vec::new() };
        let Some(indices) = self.scope_bindings[s as usize].get(name.as_str()) else { return Vec::new() };
        let sc = self.syntax.scope(s);
        indices
            .iter()
            .filter_map(|&i| match &sc.bindings[i].1 {
                Binding::Param(p) => sc.params.get(*p as usize)?.annotation.as_ref().map(|a| (a, s)),
                _ => None,
            })
            .collect()
    }

    /// The expressions written out in this file under the constant key `key` of the dicts
    /// `expr` is bound to.
    pub(super) fn item_exprs(&self, expr: &Expr, key: &str, scope: ScopeId, depth: u32) -> Vec<(Expr, ScopeId)> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::Keyed(items) => items.iter().filter(|(k, _)| k == key).map(|(_, e)| (e.clone(), scope)).collect(),
            // `rows[0]` of a literal list or tuple: the element at that index when it is written
            // out there, any element otherwise (it may have been appended).
            Expr::Container(kind, items) => {
                let index = match kind {
                    ContainerKind::List | ContainerKind::Tuple => integer_key(key),
                    ContainerKind::Set | ContainerKind::Dict => None,
                };
                match index.and_then(|i| items.get(i)) {
                    Some(e) => vec![(e.clone(), scope)],
                    None => items.iter().map(|e| (e.clone(), scope)).collect(),
                }
            }
            Expr::Added(items) => items.iter().map(|e| (e.clone(), scope)).collect(),
            Expr::Slice(inner, start) => match (start, integer_key(key)) {
                (Some(start), Some(i)) => {
                    self.item_exprs(inner, &integer_key_of(i + *start as usize), scope, depth + 1)
                }
                _ => self.element_exprs(inner, scope, depth + 1),
            },
            Expr::Name(n) => {
                let mut out: Vec<(Expr, ScopeId)> = self
                    .bound_values(n, scope)
                    .into_iter()
                    .flat_map(|(e, s)| self.item_exprs(e, key, s, depth + 1))
                    .collect();
                // `def f(pairs: List[Tuple[A, B]])`, then `pairs[0]`: what the annotation promises.
                for (annotation, s) in self.param_annotations(n, scope) {
                    out.extend(self.item_exprs(annotation, key, s, depth + 1));
                }
                out
            }
            Expr::Narrowed(_, value) | Expr::NotInstance(_, value) => self.item_exprs(value, key, scope, depth + 1),
            _ => Vec::new(),
        }
    }

    /// The expression written at position `index` of the tuple or list `expr` is (and the scope
    /// to read it in), following names bound once and nested unpacking; `None` when it is not
    /// written out in this file.
    pub(super) fn element_expr(&self, expr: &Expr, index: u32, scope: ScopeId, depth: u32) -> Option<(Expr, ScopeId)> {
        if self.too_deep(depth) {
            return None;
        }
        match expr {
            Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => {
                items.get(index as usize).map(|e| (e.clone(), scope))
            }
            Expr::Element(inner, j) => {
                let (e, s) = self.element_expr(inner, *j, scope, depth + 1)?;
                self.element_expr(&e, index, s, depth + 1)
            }
            Expr::Slice(inner, Some(start)) => self.element_expr(inner, index.saturating_add(*start), scope, depth + 1),
            Expr::Name(n) => {
                let s = self.binding_scope(n, scope)?;
                let indices = self.scope_bindings[s as usize].get(n.as_str())?;
                let [only] = indices.as_slice() else { return None };
                match &self.syntax.scope(s).bindings[*only].1 {
                    Binding::Value(e) => self.element_expr(e, index, s, depth + 1),
                    Binding::Unpack(e, j) => {
                        let (e, s) = self.element_expr(e, *j, s, depth + 1)?;
                        self.element_expr(&e, index, s, depth + 1)
                    }
                    _ => None,
                }
            }
            Expr::Narrowed(_, value) | Expr::NotInstance(_, value) => self.element_expr(value, index, scope, depth + 1),
            _ => None,
        }
    }

    /// `base` when `expr` is `base.method()` and `base` is a dict of builtin type (a literal, or a
    /// `dict`, `OrderedDict`, `defaultdict`; not an instance of a class of the code, whose
    /// `method` may be anything).
    pub(super) fn dict_view<'e>(&self, expr: &'e Expr, method: &str, scope: ScopeId, depth: u32) -> Option<&'e Expr> {
        let base = method_receiver(expr, method)?;
        (!self.too_deep(depth) && is_builtin_dict(&self.eval_local(base, scope, depth + 1))).then_some(base)
    }

    /// [`Resolver::dict_view`] for a summary expression.
    pub(super) fn dict_view_closed<'e>(
        &self,
        expr: &'e Expr,
        method: &str,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Option<&'e Expr> {
        let base = method_receiver(expr, method)?;
        let values =
            if self.too_deep(depth) { Vec::new() } else { self.eval_closed(base, module, self_class, depth + 1) };
        is_builtin_dict(&values).then_some(base)
    }

    /// `base[key]` with `key` a name, as `base["the constant"]` when the name holds one known
    /// constant there, else as any item of `base`.
    pub(super) fn item_at(&self, base: &Expr, key: &Expr, scope: ScopeId, depth: u32) -> Expr {
        match self.constant_of(key, scope, depth + 1) {
            Some(k) => Expr::Item(Box::new(base.clone()), k),
            None => Expr::Subscript(Box::new(base.clone())),
        }
    }

    /// The one constant (see [`Expr::Constant`]) `expr` holds at every binding that reaches it:
    /// a literal, a name bound only to the same constant (through assignments, imports, and for
    /// a parameter its default and what this file's calls pass), else `None`.
    pub(super) fn constant_of(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Option<Name> {
        if self.too_deep(depth) {
            return None;
        }
        let Expr::Name(n) = expr else {
            return match expr {
                Expr::Constant(k) => Some(k.clone()),
                _ => None,
            };
        };
        let s = self.binding_scope(n, scope)?;
        let sc = self.syntax.scope(s);
        let indices = self.scope_bindings[s as usize].get(n.as_str())?;
        // A function that declares the name `global` and assigns it can change it to anything.
        let rebound_by_function = |name: &Name| {
            self.syntax.scopes.iter().any(|f| f.globals.contains(name) && f.bindings.iter().any(|(b, _)| b == name))
        };
        if s == 0 && rebound_by_function(n) {
            return None;
        }
        let mut found: Option<Name> = None;
        let mut agree = |k: Name| -> bool {
            match &found {
                Some(f) if *f != k => false,
                _ => {
                    found = Some(k);
                    true
                }
            }
        };
        for i in self.syntax.live_bindings(s, indices) {
            match &sc.bindings[i].1 {
                Binding::Value(e) => {
                    if !agree(self.constant_of(e, s, depth + 1)?) {
                        return None;
                    }
                }
                Binding::Param(p) => {
                    // Only this file's calls are known: a function other modules can call may
                    // receive any key from them. A nested function's callers are all here.
                    let nested = sc.parent.is_some_and(|parent| self.syntax.scope(parent).kind == ScopeKind::Function);
                    let flows = self.param_flow.get(&(s, *p)).map(Vec::as_slice).unwrap_or(&[]);
                    if !nested || flows.len() >= MAX_PARAM_FLOWS {
                        return None;
                    }
                    let param = sc.params.get(*p as usize)?;
                    if let Some(default) = &param.default
                        && !agree(self.constant_of(default, sc.parent.unwrap_or(0), depth + 1)?)
                    {
                        return None;
                    }
                    for (caller, arg) in flows {
                        if !agree(self.constant_of(arg, *caller, depth + 1)?) {
                            return None;
                        }
                    }
                }
                Binding::Import(Import::Name { module, name }) => {
                    let m = absolute_module(module, &self.module, self.is_package)?;
                    if !agree(self.imported_constant(&m, name, depth + 1)?) {
                        return None;
                    }
                }
                _ => return None,
            }
        }
        found
    }

    /// The constant module-level name `name` of `module` holds, if it holds one (re-exports
    /// followed).
    pub(super) fn imported_constant(&self, module: &str, name: &str, depth: u32) -> Option<Name> {
        if self.too_deep(depth) {
            return None;
        }
        let summary = self.summary_for(module, name)?;
        let bindings = summary.name(name)?;
        let mut found: Option<Name> = None;
        for b in bindings {
            let k = match b {
                SumBinding::Value(Expr::Constant(k)) => k.clone(),
                SumBinding::ImportName { module: m, name: n } => self.imported_constant(m, n, depth + 1)?,
                // The variable unit a module-level assignment defines: its values are the
                // `Value` bindings beside it.
                SumBinding::Def { kind: DefKind::Variable, .. } => continue,
                _ => return None,
            };
            if found.as_ref().is_some_and(|f| *f != k) {
                return None;
            }
            found = Some(k);
        }
        found
    }

    /// `base["key"]`: the value under that key when `base` is (bound to) dicts with constant
    /// keys; any element otherwise.
    pub(super) fn item_local(&self, base: &Expr, key: &str, scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match base {
            // `(f, g)[0]`: the element written at that index.
            Expr::Container(ContainerKind::List | ContainerKind::Tuple, items)
                if integer_key(key).is_some_and(|i| i < items.len()) =>
            {
                let i = integer_key(key).unwrap_or_default();
                items.get(i).map(|e| self.eval_local(e, scope, depth + 1)).unwrap_or_default()
            }
            // Item `i` of `seq[start:]` is item `start + i` of `seq`.
            Expr::Slice(inner, Some(start)) if integer_key(key).is_some() => {
                let i = integer_key(key).unwrap_or_default() + *start as usize;
                self.item_local(inner, &integer_key_of(i), scope, depth + 1)
            }
            // `table["a"]["b"]`: under "b" of what is written under "a".
            Expr::Item(inner, outer_key) => {
                let written = self.item_exprs(inner, outer_key, scope, depth + 1);
                if written.is_empty() {
                    return self.elements_local(base, scope, depth + 1);
                }
                let mut out = Vec::new();
                for (e, s) in written {
                    extend(&mut out, self.item_local(&e, key, s, depth + 1));
                }
                out
            }
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (k, e) in items {
                    if k == key {
                        extend(&mut out, self.eval_local(e, scope, depth + 1));
                    }
                }
                out
            }
            // `u: Tuple[Key, Val] = make()`, then `u[1]`: the annotation's position, as an
            // annotated variable's value is read (see [`Resolver::declared`]).
            Expr::Declared(ty, value) => {
                let promised = self.item_local(ty, key, scope, depth + 1);
                self.declared(promised, || self.item_local(value, key, scope, depth + 1), depth)
            }
            Expr::Narrowed(ty, value) => {
                let promised = self.item_local(ty, key, scope, depth + 1);
                self.narrowed(promised, || self.item_local(value, key, scope, depth + 1), depth)
            }
            Expr::NotInstance(_, value) => self.item_local(value, key, scope, depth + 1),
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else {
                    // Bound by no statement of this file: a star import, whose module's dict
                    // gives what it writes under the key.
                    let raw = self.name_values(n, scope, depth + 1);
                    return match self.variable_items(raw.clone(), key, depth + 1) {
                        Some(items) => items,
                        None => self.variable_elements(raw, depth + 1),
                    };
                };
                let indices = self.scope_bindings[s as usize].get(n.as_str()).cloned().unwrap_or_default();
                // `kwargs["key"]` in a function: the value each call passes under that key.
                if let [only] = indices.as_slice()
                    && let Binding::Param(p) = &self.syntax.scope(s).bindings[*only].1
                    && self.syntax.scope(s).params.get(*p as usize).is_some_and(|p| p.keywords)
                {
                    let mut out = Vec::new();
                    for (caller, arg) in self.param_flow.get(&(s, *p)).into_iter().flatten() {
                        extend(&mut out, self.item_local(arg, key, *caller, depth + 1));
                    }
                    return out;
                }
                let by_key = integer_key(key).is_some();
                // `u[1]` with `u: Tuple[Key, Val]` a parameter: the position its annotation gives.
                if by_key
                    && let [only] = indices.as_slice()
                    && let Binding::Param(p) = &self.syntax.scope(s).bindings[*only].1
                    && let Some(annotation @ Expr::Container(ContainerKind::Tuple, _)) =
                        self.syntax.scope(s).params.get(*p as usize).and_then(|p| p.annotation.as_ref())
                {
                    let promised = self.item_local(annotation, key, s, depth + 1);
                    return self.declared_position(promised, || self.elements_local(base, scope, depth + 1), depth);
                }
                // `u = make()`, `p = pairs[0]`, `for p in pairs`, then `p[1]`: the element at
                // that position, as unpacking `p` gives it.
                let positional = |b: &Binding| {
                    matches!(
                        b,
                        Binding::Iter(_)
                            | Binding::Unpack(..)
                            | Binding::Value(Expr::Item(..) | Expr::Call(_) | Expr::Element(..))
                    )
                };
                if let (true, Some(i)) = (!indices.is_empty(), integer_key(key))
                    && indices.iter().all(|&b| positional(&self.syntax.scope(s).bindings[b].1))
                    && let Ok(i) = u32::try_from(i)
                {
                    let element = self.element_at(base, &[i], scope, depth + 1);
                    return if element.is_empty() { self.elements_local(base, scope, depth + 1) } else { element };
                }
                // A dict written out with constant keys, or (for an integer key) a literal list or
                // tuple never added to (or a local annotated as a tuple): the item is the one
                // written there.
                let all_keyed = indices.iter().all(|&i| match &self.syntax.scope(s).bindings[i].1 {
                    Binding::Value(Expr::Keyed(_)) => true,
                    Binding::Value(Expr::Container(ContainerKind::List | ContainerKind::Tuple, _)) => by_key,
                    Binding::Value(Expr::Slice(_, Some(_))) => by_key,
                    Binding::Value(Expr::Declared(ty, _)) => {
                        by_key && matches!(ty.as_ref(), Expr::Container(ContainerKind::Tuple, _))
                    }
                    _ => false,
                });
                if !all_keyed {
                    // `TABLE["b"]` with `TABLE` imported: what its module writes under the key.
                    // Only a name this file binds by imports alone: the module's own names are
                    // read as they are at the site's line, which its summary (the final
                    // bindings) does not say.
                    let imported = !indices.is_empty()
                        && indices.iter().all(|&i| matches!(self.syntax.scope(s).bindings[i].1, Binding::Import(_)));
                    let raw = if s == 0 && imported { self.name_values(n, s, depth + 1) } else { Vec::new() };
                    return match self.variable_items(raw, key, depth + 1) {
                        Some(items) => items,
                        None => self.elements_local(base, scope, depth + 1),
                    };
                }
                let mut out = Vec::new();
                for i in indices {
                    if let Binding::Value(e) = &self.syntax.scope(s).bindings[i].1 {
                        extend(&mut out, self.item_local(e, key, s, depth + 1));
                    }
                }
                out
            }
            // `settings.TABLE["b"]`: what the module writes under the key.
            Expr::Attr(inner, attr) => {
                let mut raw = Vec::new();
                for v in self.eval_local(inner, scope, depth + 1) {
                    extend(&mut raw, self.attr_of(&v, attr, depth + 1));
                }
                match self.variable_items(raw, key, depth + 1) {
                    Some(items) => items,
                    None => self.elements_local(base, scope, depth + 1),
                }
            }
            _ => self.elements_local(base, scope, depth + 1),
        }
    }

    /// What iterating over `name`, bound in scope `s`, gives: the elements of what its
    /// bindings hold (see `elements_local`, which memoises this).
    pub(super) fn name_elements(&self, n: &Name, s: ScopeId, depth: u32) -> Vec<Value> {
        let mut out = Vec::new();
        let indices = self.scope_bindings[s as usize].get(n.as_str()).cloned().unwrap_or_default();
        for i in indices {
            match &self.syntax.scope(s).bindings[i].1 {
                Binding::Value(e) => extend(&mut out, self.elements_local(e, s, depth + 1)),
                Binding::Param(p) => {
                    let annotation = self.syntax.scope(s).params.get(*p as usize).and_then(|p| p.annotation.as_ref());
                    if let Some(annotation) = annotation {
                        extend(&mut out, self.elements_local(annotation, s, depth + 1));
                    }
                    if let Some(flows) = self.param_flow.get(&(s, *p)) {
                        for (caller, arg) in flows {
                            extend(&mut out, self.elements_local(arg, *caller, depth + 1));
                        }
                    }
                }
                // `for key, group in pairs: for item in group`: what an unpacked or iterated
                // instance's iterator protocol gives (and a string's characters).
                binding @ (Binding::Unpack(..) | Binding::Iter(_)) => {
                    extend(&mut out, self.value_elements(self.binding_values(binding, s, depth + 1), depth + 1));
                }
                // Looked up for what the lookup records (the other module is a dependency); the
                // elements of an imported container are not followed.
                Binding::Import(_) => {
                    let _ = self.binding_values(&self.syntax.scope(s).bindings[i].1, s, depth + 1);
                }
                _ => {}
            }
        }
        if out.is_empty() && s == 0 {
            for v in self.module_member(&self.module, n, depth + 1) {
                if let Value::Var(t) = v {
                    for e in self.var_exprs(&t).iter() {
                        extend(&mut out, self.elements_closed(e, &t.module, None, depth + 1));
                    }
                }
            }
        }
        out
    }

    /// What iterating over (or subscripting) `expr` yields.
    pub(super) fn elements_local(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::ItemAt(base, key) => {
                let item = self.item_at(base, key, scope, depth + 1);
                self.elements_local(&item, scope, depth + 1)
            }
            Expr::Element(inner, j) => match self.element_expr(inner, *j, scope, depth + 1) {
                Some((e, s)) => self.elements_local(&e, s, depth + 1),
                None => Vec::new(),
            },
            Expr::Slice(inner, _) => self.elements_local(inner, scope, depth + 1),
            // `table[i][j]`: the elements of the containers written out as `table`'s elements.
            Expr::Subscript(inner) => {
                let mut out = Vec::new();
                for (e, s) in self.element_exprs(inner, scope, depth + 1) {
                    extend(&mut out, self.elements_local(&e, s, depth + 1));
                }
                out
            }
            // `table["key"][i]`: the elements of the containers written out under that key.
            Expr::Item(inner, key) => {
                let mut out = Vec::new();
                for (e, s) in self.item_exprs(inner, key, scope, depth + 1) {
                    extend(&mut out, self.elements_local(&e, s, depth + 1));
                }
                out
            }
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (_, e) in items {
                    extend(&mut out, self.eval_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Container(_, items) | Expr::Added(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else {
                    return Vec::new();
                };
                self.memoised(&self.local_elements, (s, n.clone()), || self.name_elements(n, s, depth))
            }
            Expr::Attr(base, attr) => {
                let mut out = Vec::new();
                for b in self.eval_local(base, scope, depth + 1) {
                    extend(&mut out, self.variable_elements(self.attr_of(&b, attr, depth + 1), depth + 1));
                }
                out
            }
            Expr::Call(callee) => {
                let mut out = Vec::new();
                if let Expr::Attr(base, method) = callee.as_ref()
                    && is_element_preserving(method)
                {
                    extend(&mut out, self.elements_local(base, scope, depth + 1));
                }
                for c in self.eval_local(callee, scope, depth + 1) {
                    match &c {
                        Value::Lambda(l) => {
                            for r in &self.syntax.scope(*l).returns {
                                extend(&mut out, self.elements_local(r, *l, depth + 1));
                            }
                        }
                        _ => extend(&mut out, self.call_elements(&c, depth + 1)),
                    }
                }
                out
            }
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.elements_local(e, scope, depth + 1));
                }
                out
            }
            Expr::Declared(ty, value) => {
                let promised = self.elements_local(ty, scope, depth + 1);
                let assigned = || self.elements_local(value, scope, depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Narrowed(ty, value) => {
                let promised = self.elements_local(ty, scope, depth + 1);
                let assigned = || self.elements_local(value, scope, depth + 1);
                self.narrowed(promised, assigned, depth)
            }
            Expr::NotInstance(_, value) => self.elements_local(value, scope, depth + 1),
            // A string's characters are strings, a bytes object's items integers (`text[0]`
            // with `text = "..."` or `text: str`).
            Expr::Literal(_) | Expr::Constant(_) | Expr::Instance(_) => {
                self.value_elements(self.eval_local(expr, scope, depth + 1), depth)
            }
            _ => Vec::new(),
        }
    }
}
