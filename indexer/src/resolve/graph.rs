//! The file's graph: its units, and the edges and unresolved call sites found by evaluating
//! every site once argument flow into this file's functions has settled; the callables passed
//! to other modules' parameters.

use super::*;

impl<'a> Resolver<'a> {
    pub(super) fn unit_of_scope(&self, scope: ScopeId) -> String {
        let mut s = scope;
        loop {
            let sc = self.syntax.scope(s);
            // Comprehensions belong to their enclosing unit; a lambda is a unit of its own.
            if sc.kind != ScopeKind::Anonymous || sc.def.is_some() {
                return match sc.def {
                    Some(d) => format!("{}.{}", self.module, self.syntax.def(d).path),
                    None => self.module.to_string(),
                };
            }
            match sc.parent {
                Some(p) => s = p,
                None => return self.module.to_string(),
            }
        }
    }

    /// The targets a call of `values` reaches: functions, classes with their `__init__`,
    /// `__call__` of instances, externals. `None` when nothing is known.
    pub(super) fn call_targets(&self, values: &[Value]) -> (Vec<String>, bool) {
        let mut targets = Vec::new();
        let mut resolved = false;
        for v in values {
            match v {
                Value::Function(t) => {
                    resolved = true;
                    targets.push(t.id());
                    // A decorated function is still called by name, and its wrapper runs first.
                    targets.extend(self.wrappers(t).iter().map(Target::id));
                }
                Value::Undecorated(t) => {
                    resolved = true;
                    targets.push(t.id());
                }
                Value::Class(t) => {
                    resolved = true;
                    targets.push(t.id());
                    // The `__init__` the MRO finds first: the code's own, or an external base's
                    // (`class A(ext.Base)` without one of its own runs `ext.Base.__init__`).
                    if let Some(dataclass) = self.generated_init(t, 0) {
                        // The `__init__` `@dataclass` wrote (no unit) runs, and calls
                        // `__post_init__`.
                        for post in self.post_init(t, &dataclass, 0) {
                            if let Value::Function(p) = post {
                                targets.push(p.id());
                            }
                        }
                    } else {
                        for init in self.deref(self.class_attr(t, "__init__", None, 0), 0) {
                            match init {
                                Value::Function(i) => targets.push(i.id()),
                                Value::External(x) if runs_external_init(&x) => targets.push(x.to_string()),
                                _ => {}
                            }
                        }
                    }
                }
                Value::Instance(t) => {
                    for call in self.deref(self.instance_attr(t, "__call__", 0), 0) {
                        match call {
                            Value::Function(c) => {
                                resolved = true;
                                targets.push(c.id());
                            }
                            Value::External(x) => {
                                resolved = true;
                                targets.push(x.to_string());
                            }
                            _ => {}
                        }
                    }
                }
                Value::External(x) => {
                    resolved = true;
                    targets.push(x.to_string());
                }
                Value::Lambda(scope) => {
                    resolved = true;
                    if let Some(def) = self.syntax.scope(*scope).def {
                        targets.push(format!("{}.{}", self.module, self.syntax.def(def).path));
                    }
                }
                Value::ExternalInstance(_)
                | Value::Module(_)
                | Value::Var(_)
                | Value::Super(..)
                | Value::Property(..) => {}
            }
        }
        (targets, resolved)
    }

    /// Records argument flow into this file's functions; returns whether anything new flowed.
    pub(super) fn flow_arguments(&mut self, call: &CallSite, scope: ScopeId, values: &[Value]) -> bool {
        let mut changed = false;
        // The receiver of a method call flows into the method's `self`/`cls`.
        if let Expr::Attr(base, attr) = &call.callee {
            // Each receiver class, with the class a `super()` lookup starts after.
            let receivers: Vec<(Target, Option<Target>)> = self
                .eval_local(base, scope, 0)
                .into_iter()
                .filter_map(|v| match v {
                    Value::Instance(k) | Value::Class(k) => Some((k, None)),
                    Value::Super(written_in, k, _) => Some((k, Some(written_in))),
                    _ => None,
                })
                .collect();
            for v in values {
                let Value::Function(t) = v else { continue };
                if *t.module != *self.module {
                    continue;
                }
                let Some(body) = self.defs_by_path.get(&*t.path).and_then(|&d| self.syntax.def(d).body) else {
                    continue;
                };
                // A receiver reaches this method only if its class's lookup finds this one (with
                // `element_class.create()` over several classes, each has its own `create`).
                let reaching: Vec<Target> = receivers
                    .iter()
                    .filter(|(k, after)| {
                        self.deref(self.class_attr(k, attr, after.as_ref(), 0), 0)
                            .iter()
                            .any(|m| matches!(m, Value::Function(f) if f == t))
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in &reaching {
                    let entry = self.receiver_flow.entry(body).or_default();
                    if entry.len() < 16 && !entry.contains(k) {
                        entry.push(k.clone());
                        changed = true;
                    }
                }
            }
        }
        for v in values {
            // A lambda's parameters take the arguments as a function's do.
            if let Value::Lambda(l) = v {
                changed |= self.flow_into(call, scope, *l, 0);
                continue;
            }
            let (target, bound) = match v {
                Value::Function(t) | Value::Undecorated(t) => (t.clone(), self.callee_is_bound(&call.callee, scope, 0)),
                Value::Class(t) => {
                    let init = self
                        .deref(self.class_attr(t, "__init__", None, 0), 0)
                        .into_iter()
                        .find_map(|i| if let Value::Function(f) = i { Some(f) } else { None });
                    match init {
                        Some(f) => (f, true),
                        None => continue,
                    }
                }
                _ => continue,
            };
            if *target.module != *self.module {
                continue;
            }
            let Some(&def) = self.defs_by_path.get(&*target.path) else {
                continue;
            };
            let def = self.syntax.def(def);
            let Some(body) = def.body else { continue };
            let flags = method_flags(&def.decorators);
            let offset = usize::from(def.kind == DefKind::Method && !flags.is_static && (bound || flags.is_class));
            changed |= self.flow_into(call, scope, body, offset);
        }
        changed
    }

    /// Whether calling `callee` calls a method bound to an instance (its first parameter is
    /// taken): `obj.method(...)`, or a name holding `obj.method` (assigned, or passed in as an
    /// argument by a call in this file). `Cls.method(obj, ...)` is not bound.
    pub(super) fn callee_is_bound(&self, callee: &Expr, scope: ScopeId, depth: u32) -> bool {
        if self.too_deep(depth) {
            return false;
        }
        match callee {
            Expr::Attr(base, _) => {
                let receivers = self.eval_local(base, scope, depth + 1);
                receivers.is_empty() || receivers.iter().any(|v| !matches!(v, Value::Class(_)))
            }
            Expr::Name(n) => {
                let Some(s) = self.binding_scope(n, scope) else { return false };
                let Some(indices) = self.scope_bindings[s as usize].get(n.as_str()) else { return false };
                indices.iter().any(|&i| match &self.syntax.scope(s).bindings[i].1 {
                    Binding::Value(e) => self.callee_is_bound(e, s, depth + 1),
                    Binding::Param(p) => self.param_flow.get(&(s, *p)).is_some_and(|flows| {
                        flows.iter().any(|(caller, arg)| self.callee_is_bound(arg, *caller, depth + 1))
                    }),
                    _ => false,
                })
            }
            _ => false,
        }
    }

    /// Records the flow of `call`'s arguments (made in `scope`) into the parameters of the
    /// function or lambda whose body is `body`; `offset` skips a bound `self`/`cls`.
    pub(super) fn flow_into(&mut self, call: &CallSite, scope: ScopeId, body: ScopeId, offset: usize) -> bool {
        let mut changed = false;
        let sc = self.syntax.scope(body);
        let mut flows: Vec<(u32, Expr)> = Vec::new();
        for (i, arg) in call.args.iter().enumerate() {
            let p = i + offset;
            if let Some(param) = sc.params.get(p)
                && !param.variadic
            {
                flows.push((p as u32, arg.clone()));
            }
        }
        // Keywords no named parameter takes go to `**kwargs`, as the dict they arrive in.
        let mut unclaimed: Vec<(Name, Expr)> = Vec::new();
        for (name, arg) in &call.keywords {
            match sc.params.iter().position(|p| &p.name == name && !p.variadic) {
                Some(p) => flows.push((p as u32, arg.clone())),
                None => unclaimed.push((name.clone(), arg.clone())),
            }
        }
        if let (Some(p), false) = (sc.params.iter().position(|p| p.keywords), unclaimed.is_empty()) {
            flows.push((p as u32, Expr::Keyed(unclaimed)));
        }
        for (p, arg) in flows {
            if !is_flow_worthy(&arg) {
                continue;
            }
            let entry = self.param_flow.entry((body, p)).or_default();
            if entry.len() < MAX_PARAM_FLOWS && !entry.iter().any(|(s, e)| *s == scope && *e == arg) {
                entry.push((scope, arg));
                changed = true;
            }
        }
        changed
    }

    pub(super) fn run(&mut self, path: String, revision: fresco_graph::Revision) -> FileGraph {
        // Argument and receiver flow into this file's functions, to a small fixpoint: each round
        // follows values one call further.
        for _ in 0..3 {
            let mut changed = false;
            for scope in 0..self.syntax.scopes.len() as ScopeId {
                for call in &self.syntax.scope(scope).calls {
                    let values = self.eval_local(&call.callee, scope, 0);
                    changed |= self.flow_arguments(call, scope, &values);
                }
            }
            if !changed {
                break;
            }
            self.local_names.borrow_mut().clear();
            self.local_elements.borrow_mut().clear();
            self.call_results.borrow_mut().clear();
            self.variables.borrow_mut().clear();
            self.local_element_paths.borrow_mut().clear();
            self.module_element_paths.borrow_mut().clear();
            self.module_body_names.borrow_mut().clear();
        }

        let mut edges: Vec<Edge> = Vec::new();
        // Edges already added, by hash (indices into `edges`): the first of equal edges is kept.
        let mut seen: FxHashMap<u64, Vec<u32>> = FxHashMap::default();
        let mut ids = crate::edge_ids::EdgeIds::default();
        let mut add = |edges: &mut Vec<Edge>, src: &str, dst: String, kind: EdgeKind, line: Option<u32>| {
            if src == dst && kind != EdgeKind::Calls {
                return;
            }
            let hash = {
                use std::hash::BuildHasher;

                rustc_hash::FxBuildHasher.hash_one((src, dst.as_str(), kind, line))
            };
            let same = seen.entry(hash).or_default();
            if same.iter().any(|&i| {
                let e = &edges[i as usize];
                *e.src == *src && *e.dst == *dst && e.kind == kind && e.line == line
            }) {
                return;
            }
            same.push(edges.len() as u32);
            edges.push(Edge { src: ids.get(src), dst: ids.get(&dst), kind, line });
        };
        let mut unresolved = Vec::new();
        let mut arg_flows: Vec<fresco_graph::ArgFlow> = Vec::new();
        let mut param_calls: Vec<fresco_graph::ParamCall> = Vec::new();
        let module_id = self.module.to_string();

        // Attributes a base's property takes the place of are no units (computed once: each
        // needs the class's MRO).
        let shadowed: Vec<bool> = self.syntax.defs.iter().map(|d| self.shadowed_by_property(d)).collect();
        let kept_defs = || self.syntax.defs.iter().zip(&shadowed).filter(|(_, s)| !**s).map(|(d, _)| d);

        // contains
        for def in kept_defs() {
            let parent = match def.parent {
                Some(p) => format!("{}.{}", self.module, self.syntax.def(p).path),
                None => module_id.clone(),
            };
            add(&mut edges, &parent, format!("{}.{}", self.module, def.path), EdgeKind::Contains, None);
        }

        for scope_id in 0..self.syntax.scopes.len() as ScopeId {
            let scope = self.syntax.scope(scope_id);
            let unit = self.unit_of_scope(scope_id);

            // imports
            for import in &scope.imports {
                let Some(module) = absolute_module(&import.module, &self.module, self.is_package) else {
                    unresolved.push(Unresolved {
                        caller: module_id.clone(),
                        callee: format!("import {}{}", ".".repeat(import.module.level as usize), import.module.name),
                        line: import.line,
                    });
                    continue;
                };
                let line = Some(import.line);
                if !import.is_from || import.names.iter().any(|n| n == "*") {
                    match self.module_value(&module) {
                        Some(Value::Module(m)) if matches!(self.lookup(&m).0, ModuleLookup::File(_)) => {
                            add(&mut edges, &module_id, m.to_string(), EdgeKind::Imports, line)
                        }
                        Some(Value::External(x)) => add(&mut edges, &module_id, x.to_string(), EdgeKind::Imports, line),
                        Some(_) => {}
                        None => unresolved.push(Unresolved {
                            caller: module_id.clone(),
                            callee: format!("import {module}"),
                            line: import.line,
                        }),
                    }
                }
                // The module's own name, where the statement names it by another (a path through
                // `src.` or through directories that are not packages): edges name units.
                let named_file = match self.lookup(&module) {
                    (ModuleLookup::File(_), canonical) => Some(canonical.unwrap_or_else(|| Arc::from(&*module))),
                    _ => None,
                };
                for name in import.names.iter().filter(|n| *n != "*") {
                    let values = self.import_name(&module, name, 0);
                    if values.is_empty() {
                        unresolved.push(Unresolved {
                            caller: module_id.clone(),
                            callee: format!("from {module} import {name}"),
                            line: import.line,
                        });
                        // The name is not found, but the module is a file of the repository (one
                        // skipped as too large or not UTF-8, or one that makes the name at run
                        // time): the statement still imports from it.
                        if let Some(file_module) = &named_file {
                            add(&mut edges, &module_id, file_module.to_string(), EdgeKind::Imports, line);
                        }
                    }
                    // A name the module only re-exports (`from .compat import urlparse`, where
                    // `compat` imports it from `urllib.parse`) reaches its definition, but the
                    // statement still runs and depends on the module it names: removing the
                    // re-export breaks it. So it imports that module too, and `importers` and
                    // `impact` of the module find it. A name defined in the module, or one of its
                    // submodules, is found through the definition already.
                    if let Some(file_module) = &named_file {
                        let from_elsewhere = values.iter().any(|v| match v {
                            Value::Class(t) | Value::Function(t) | Value::Var(t) => *t.module != **file_module,
                            Value::Module(m) => {
                                m.strip_prefix(&**file_module).is_none_or(|rest| !rest.starts_with('.'))
                            }
                            Value::External(_) => true,
                            _ => false,
                        });
                        if from_elsewhere {
                            add(&mut edges, &module_id, file_module.to_string(), EdgeKind::Imports, line);
                        }
                    }
                    for v in values {
                        let dst = match v {
                            Value::Module(m) => {
                                if matches!(self.lookup(&m).0, ModuleLookup::File(_)) {
                                    Some(m.to_string())
                                } else {
                                    None
                                }
                            }
                            Value::Class(t) | Value::Function(t) | Value::Var(t) => Some(t.id()),
                            Value::External(x) => Some(x.to_string()),
                            _ => None,
                        };
                        if let Some(dst) = dst {
                            add(&mut edges, &module_id, dst, EdgeKind::Imports, line);
                        }
                    }
                }
            }

            // inherits
            if scope.kind == ScopeKind::Class {
                let parent = scope.parent.unwrap_or(0);
                for (base, line) in &scope.bases {
                    // A base is read as the class statement runs, at its line.
                    let bases = self.at_line(parent, *line, || self.eval_local(base, parent, 0));
                    for v in bases {
                        match v {
                            Value::Class(t) => add(&mut edges, &unit, t.id(), EdgeKind::Inherits, Some(*line)),
                            Value::External(x) => {
                                add(&mut edges, &unit, x.to_string(), EdgeKind::Inherits, Some(*line))
                            }
                            _ => {}
                        }
                    }
                }
            }

            // calls
            for call in &scope.calls {
                let mut hits = SiteHits::default();
                let mut values =
                    self.at_line(scope_id, call.line, || self.eval_site(&call.callee, scope_id, Some(&mut hits), 0));
                if let (Expr::Call(factory), Some(Expr::Decorated(..))) = (&call.callee, call.args.first()) {
                    let not_returned = self.bare_only_results(&self.eval_local(factory, scope_id, 0));
                    values.retain(|v| !not_returned.contains(v));
                }
                let (targets, resolved) = self.call_targets(&values);
                for t in targets {
                    add(&mut edges, &unit, t, EdgeKind::Calls, Some(call.line));
                }
                self.export_arg_flows(call, scope_id, &values, &mut arg_flows);
                if let Some(pc) = self.param_call(call, scope_id, &unit) {
                    param_calls.push(pc);
                }
                self.add_hits(&mut edges, &mut add, &unit, &hits, call.line);
                // `len(obj)`, `str(obj)`, `next(it)`: the builtin calls a special method of the
                // argument's class.
                if let Some((methods, arg)) = protocol_builtin(&values, call) {
                    let instances = self.at_line(scope_id, call.line, || self.eval_local(arg, scope_id, 0));
                    for t in self.special_methods(&instances, methods) {
                        add(&mut edges, &unit, t.id(), EdgeKind::Calls, Some(call.line));
                    }
                }
                // `list(obj)`, `", ".join(obj)`, `enumerate(obj)`: the builtin iterates `obj`.
                let receiver = || self.at_line(scope_id, call.line, || self.callee_receiver(&call.callee, scope_id));
                for (arg, how, copies_sets) in iterated_arguments(&values, call, receiver) {
                    let instances = self.at_line(scope_id, call.line, || self.eval_local(arg, scope_id, 0));
                    for m in self.consuming_calls(&instances, how, copies_sets) {
                        if let Value::Function(t) = m {
                            add(&mut edges, &unit, t.id(), EdgeKind::Calls, Some(call.line));
                        }
                    }
                }
                // `map(f, items)`, `sorted(items, key=f)`: the builtin calls `f`.
                for callback in builtin_callbacks(&values, call) {
                    let callables: Vec<Value> = self
                        .eval_local(callback, scope_id, 0)
                        .into_iter()
                        .filter(|v| {
                            matches!(v, Value::Function(_) | Value::Undecorated(_) | Value::Class(_) | Value::Lambda(_))
                        })
                        .collect();
                    for t in self.call_targets(&callables).0 {
                        add(&mut edges, &unit, t, EdgeKind::Calls, Some(call.line));
                    }
                }
                if !resolved {
                    unresolved.push(Unresolved {
                        caller: unit.clone(),
                        callee: callee_text(&self.source, call.callee_span),
                        line: call.line,
                    });
                }
            }

            // raise E (without a call): E is instantiated.
            for (expr, line) in &scope.raises {
                if matches!(expr, Expr::Call(_)) {
                    continue;
                }
                let values = self.eval_local(expr, scope_id, 0);
                let classes: Vec<Value> = values.into_iter().filter(|v| matches!(v, Value::Class(_))).collect();
                let (targets, _) = self.call_targets(&classes);
                for t in targets {
                    add(&mut edges, &unit, t, EdgeKind::Calls, Some(*line));
                }
            }

            // `for x in obj`: the iterator protocol's methods are called, on the iterable's line.
            // `with` statements: the context manager's `__enter__` and `__exit__` run there.
            for (expr, line, is_async) in &scope.contexts {
                let (enter, exit) = if *is_async { ("__aenter__", "__aexit__") } else { ("__enter__", "__exit__") };
                // At module level, the manager a name holds at this line.
                let managers = self.at_line(scope_id, *line, || self.eval_local(expr, scope_id, 0));
                for value in managers {
                    let Value::Instance(t) = &value else { continue };
                    for name in [enter, exit] {
                        for m in self.deref(self.class_attr(t, name, None, 1), 1) {
                            if let Value::Function(f) = m {
                                add(&mut edges, &unit, f.id(), EdgeKind::Calls, Some(*line));
                            }
                        }
                    }
                }
            }
            for (expr, line, is_async) in &scope.iterations {
                let values = self.at_line(scope_id, *line, || self.eval_local(expr, scope_id, 0));
                let values = self.classes_as_metaclass_instances(&values, 0);
                let (methods, _) = self.iterate_instances(&values, *is_async, 0);
                for m in methods {
                    if let Value::Function(t) = m {
                        add(&mut edges, &unit, t.id(), EdgeKind::Calls, Some(*line));
                    }
                }
            }
            // `obj[k]`, `obj[k] = v`, `del obj[k]`, `x in obj`: the special method of `obj`'s
            // class runs there.
            for (expr, line, call) in &scope.implicit_calls {
                let values = self.at_line(scope_id, *line, || self.eval_local(expr, scope_id, 0));
                for t in self.implicit_call_targets(&values, *call) {
                    add(&mut edges, &unit, t.id(), EdgeKind::Calls, Some(*line));
                }
            }
            // `a + b`, `a < b`, `-a`, `a += b`: the operand's special method runs there.
            for op in &scope.operators {
                let targets = self.at_line(scope_id, op.line, || self.operator_targets(op, scope_id));
                for t in targets {
                    add(&mut edges, &unit, t.id(), EdgeKind::Calls, Some(op.line));
                }
            }

            // references
            for access in &scope.accesses {
                let mut hits = SiteHits::default();
                let (values, read_on_the_way) = self.at_line(scope_id, access.line, || {
                    let values = self.eval_site(&access.expr, scope_id, Some(&mut hits), 0);
                    // The properties read on the way to the attribute assigned (`self.a` in
                    // `self.a.b = v`) are read: their getters run. The evaluation records them
                    // first.
                    let read_on_the_way = match &access.expr {
                        Expr::Attr(base, _) if access.kind != AccessKind::Read && !hits.properties.is_empty() => {
                            let mut base_hits = SiteHits::default();
                            self.eval_site(base, scope_id, Some(&mut base_hits), 0);
                            base_hits.properties.len().min(hits.properties.len())
                        }
                        _ => hits.properties.len(),
                    };
                    (values, read_on_the_way)
                });
                // Assigning through a property calls its setter, deleting its deleter (a
                // descriptor's `__set__`, `__delete__`). Without one nothing is called: a
                // `cached_property`'s value is stored in or removed from the instance, and a
                // property without one refuses (its getter does not run). A `super()` object
                // refuses both whatever the attribute is.
                if access.kind != AccessKind::Read {
                    let on_super = matches!(&access.expr, Expr::Attr(base, _) if is_super_call(base));
                    let accessed = hits.properties.split_off(read_on_the_way);
                    for (offset, p) in accessed.into_iter().enumerate() {
                        let at = read_on_the_way + offset;
                        let writes = access.kind == AccessKind::Write;
                        let made = if writes { &hits.setters } else { &hits.deleters };
                        let made = made.iter().find(|(i, _)| *i == at).map(|(_, a)| a.clone());
                        let accessor =
                            made.or_else(|| if writes { self.property_setter(&p) } else { self.property_deleter(&p) });
                        if let Some(accessor) = accessor.filter(|_| !on_super) {
                            hits.properties.push(accessor);
                        }
                    }
                }
                self.add_hits(&mut edges, &mut add, &unit, &hits, access.line);
                // A class or function *named* here is referenced; one that merely flowed in
                // through a parameter is not named by this code.
                if access.kind != AccessKind::Write {
                    // A parameter's own values flowed in; those nested functions bound to it
                    // through `nonlocal` were named here.
                    let from_param = self.head_is_param(&access.expr, scope_id);
                    let named = if from_param { self.nonlocal_defs(&access.expr, scope_id) } else { Vec::new() };
                    for v in values {
                        match v {
                            Value::Class(t) | Value::Function(t)
                                if !from_param || (*t.module == *self.module && named.contains(&&*t.path)) =>
                            {
                                add(&mut edges, &unit, t.id(), EdgeKind::References, Some(access.line))
                            }
                            _ => {}
                        }
                    }
                }
            }
        }

        let mut units = Vec::with_capacity(self.syntax.defs.len() + 1);
        units.push(Unit {
            id: module_id.clone(),
            name: module_id.clone(),
            kind: UnitKind::Module,
            start_line: 1,
            end_line: self.syntax.line_count.max(1),
            start_byte: 0,
            end_byte: self.syntax.byte_len,
            signature: None,
            docstring: self.syntax.docstring.map(|range| docstring_text(&self.source, range)),
        });
        let mut defs: Vec<&Def> = kept_defs().collect();
        defs.sort_by_key(|d| (d.start_byte, std::cmp::Reverse(d.end_byte)));
        for def in defs {
            units.push(Unit {
                id: format!("{}.{}", self.module, def.path),
                name: format!("{}.{}", self.module, strip_suffixes(&def.path)),
                kind: match def.kind {
                    DefKind::Class => UnitKind::Class,
                    DefKind::Function | DefKind::Lambda => UnitKind::Function,
                    DefKind::Method => UnitKind::Method,
                    DefKind::Variable => UnitKind::Variable,
                },
                start_line: def.start_line,
                end_line: def.end_line,
                start_byte: def.start_byte,
                end_byte: def.end_byte,
                signature: def.signature(&self.source),
                docstring: def.docstring(&self.source),
            });
        }
        unresolved.sort_by(|a: &Unresolved, b| (a.line, &a.callee).cmp(&(b.line, &b.callee)));
        unresolved.dedup();
        FileGraph {
            path,
            revision,
            module: module_id,
            parse_errors: self.syntax.parse_errors,
            first_parse_error: self.syntax.first_error.as_ref().map(|(at, why)| parse_error_at(&self.source, *at, why)),
            skipped: None,
            units,
            edges,
            unresolved,
            arg_flows,
            param_calls,
            resolution_cut: self.steps.get() > self.step_budget,
        }
    }

    /// Records the callables `call` passes to functions of other modules (see
    /// [`fresco_graph::ArgFlow`]): what calling each argument reaches, by the parameter it binds.
    pub(super) fn export_arg_flows(
        &self,
        call: &CallSite,
        scope: ScopeId,
        callees: &[Value],
        out: &mut Vec<fresco_graph::ArgFlow>,
    ) {
        if call.args.is_empty() && call.keywords.is_empty() {
            return;
        }
        // The functions of other modules this call reaches, with the position its first
        // argument takes there and the parameters their code calls (only those are worth an
        // export: most calls pass nothing that will be called).
        let mut receivers: Vec<(Target, u32, Vec<(u32, Name)>)> = Vec::new();
        let mut add = |t: Target, first: Option<u32>| {
            let called = self.called_params(&t);
            if !called.is_empty() {
                let first = first.unwrap_or_else(|| {
                    let bound = self.callee_is_bound(&call.callee, scope, 0);
                    self.first_argument_position(&t, bound)
                });
                receivers.push((t, first, called));
            }
        };
        for v in callees {
            match v {
                Value::Function(t) | Value::Undecorated(t) if *t.module != *self.module => add(t.clone(), None),
                Value::Class(c) => {
                    for init in self.deref(self.class_attr(c, "__init__", None, 0), 0) {
                        if let Value::Function(i) = init
                            && *i.module != *self.module
                        {
                            add(i, Some(1));
                        }
                    }
                }
                _ => {}
            }
        }
        if receivers.is_empty() {
            return;
        }
        let reached = |arg: &Expr| -> Vec<String> {
            let callables: Vec<Value> = self
                .eval_local(arg, scope, 0)
                .into_iter()
                .filter(|v| {
                    matches!(
                        v,
                        Value::Function(_)
                            | Value::Undecorated(_)
                            | Value::Class(_)
                            | Value::Lambda(_)
                            | Value::External(_)
                    )
                })
                .collect();
            self.call_targets(&callables).0
        };
        for (callee, first, called) in &receivers {
            for (i, arg) in call.args.iter().enumerate() {
                let position = i as u32 + first;
                if !is_flow_worthy(arg) || !called.iter().any(|(p, _)| *p == position) {
                    continue;
                }
                let targets = reached(arg);
                if !targets.is_empty() {
                    let slot = fresco_graph::ArgSlot::Position(position);
                    out.push(fresco_graph::ArgFlow { callee: callee.id(), slot, targets });
                }
            }
            for (name, arg) in call.keywords.iter() {
                if !called.iter().any(|(_, n)| n == name) {
                    continue;
                }
                let targets = reached(arg);
                if !targets.is_empty() {
                    let slot = fresco_graph::ArgSlot::Keyword(name.to_string());
                    out.push(fresco_graph::ArgFlow { callee: callee.id(), slot, targets });
                }
            }
        }
    }

    /// The parameters function `t`'s code calls (see `FunctionSummary::called_params`).
    pub(super) fn called_params(&self, t: &Target) -> Vec<(u32, Name)> {
        self.summary_for(&t.module, &t.path)
            .and_then(|s| s.function(&t.path).map(|f| f.called_params.clone()))
            .unwrap_or_default()
    }

    /// The parameter position a call's first argument binds in function `t` of another module: 1
    /// for a method called on an instance (or a classmethod), else 0.
    pub(super) fn first_argument_position(&self, t: &Target, bound: bool) -> u32 {
        let Some(owner) = t.owner() else { return 0 };
        let is_method = self.summary_for(&owner.module, &owner.path).is_some_and(|s| s.class(&owner.path).is_some());
        if !is_method {
            return 0;
        }
        let flags = self.method_flags(t);
        u32::from(!flags.is_static && (flags.is_class || bound))
    }

    /// `call` as a call of a parameter (`func(...)` where `func` is a parameter of the enclosing
    /// function or of one enclosing it), for the join with other files' argument flows.
    pub(super) fn param_call(&self, call: &CallSite, scope: ScopeId, unit: &str) -> Option<fresco_graph::ParamCall> {
        let Expr::Name(name) = &call.callee else { return None };
        let binds = &mut |s: ScopeId, name: &str| self.scope_bindings[s as usize].contains_key(name);
        let (function, index) = crate::summary::called_param(self.syntax, name, scope, binds)?;
        let def = self.syntax.def(self.syntax.scope(function).def?);
        Some(fresco_graph::ParamCall {
            caller: unit.to_string(),
            function: format!("{}.{}", self.module, def.path),
            param: index,
            name: name.to_string(),
            line: call.line,
        })
    }

    /// Records the repository's modules among `values` (a file of this repository, not a
    /// namespace package or an external module) as read.
    pub(super) fn note_modules(&self, values: &[Value], hits: &mut SiteHits) {
        for v in values {
            if let Value::Module(m) = v
                && matches!(self.lookup(m).0, ModuleLookup::File(_))
                && !hits.modules.contains(m)
            {
                hits.modules.push(m.clone());
            }
        }
    }

    pub(super) fn add_hits(
        &self,
        edges: &mut Vec<Edge>,
        add: &mut impl FnMut(&mut Vec<Edge>, &str, String, EdgeKind, Option<u32>),
        unit: &str,
        hits: &SiteHits,
        line: u32,
    ) {
        for v in &hits.vars {
            add(edges, unit, v.id(), EdgeKind::References, Some(line));
        }
        for p in &hits.properties {
            add(edges, unit, p.id(), EdgeKind::Calls, Some(line));
        }
        // A module read through the name an import bound is a module-level name read, as a
        // variable is.
        for m in &hits.modules {
            // Code inside a module reading that module by name (`pkg` in `pkg/__init__.py`)
            // references nothing outside itself.
            let inside = unit.strip_prefix(&**m).is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
            if !inside {
                add(edges, unit, m.to_string(), EdgeKind::References, Some(line));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{Indexer, IndexerOptions};

    #[test]
    fn a_files_edges_share_one_allocation_per_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let text = "def helper():\n    pass\n\n\ndef caller():\n    helper()\n    helper()\n    helper()\n";
        std::fs::write(dir.path().join("m.py"), text).expect("write");
        let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
        indexer.refresh().expect("index");
        let snapshot = indexer.snapshot();
        let edges = &snapshot.file("m.py").expect("indexed").graph.edges;
        let calls: Vec<_> = edges.iter().filter(|e| &*e.src == "m.caller" && &*e.dst == "m.helper").collect();
        assert_eq!(calls.len(), 3, "{edges:?}");
        assert!(calls.iter().all(|e| Arc::ptr_eq(&e.src, &calls[0].src) && Arc::ptr_eq(&e.dst, &calls[0].dst)));
        // The module's `contains` edge to `helper` holds the same `m.helper` as the calls.
        let contains = edges.iter().find(|e| &*e.src == "m" && &*e.dst == "m.helper").expect("contains edge");
        assert!(Arc::ptr_eq(&contains.dst, &calls[0].dst));
    }
}
