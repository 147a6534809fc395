//! What module- and class-level variables hold, read from module summaries: their expressions
//! evaluated closed over their module's scope, properties made with `property(...)`, and the
//! elements and items of containers, subscripts included; memoised where the same question recurs.

use super::*;

impl<'a> Resolver<'a> {
    /// Replaces variables by their values.
    pub(super) fn deref(&self, raw: Vec<Value>, depth: u32) -> Vec<Value> {
        if !raw.iter().any(|v| matches!(v, Value::Var(_))) {
            return raw;
        }
        let mut out = Vec::new();
        for v in raw {
            match v {
                Value::Var(t) => extend(&mut out, self.var_values(&t, depth + 1)),
                other => push(&mut out, other),
            }
        }
        out
    }

    /// What a variable is assigned, as its module's summary says (borrowed from it: variables
    /// are evaluated at nearly every site, and copying their expressions cost more than
    /// evaluating them).
    pub(super) fn var_exprs(&self, var: &Target) -> VarExprs {
        let Some(summary) = self.summary_for(&var.module, &var.path) else {
            return VarExprs { summary: None, var: var.clone(), member_of: None };
        };
        if summary.name(&var.path).is_some() {
            return VarExprs { summary: Some(summary), var: var.clone(), member_of: None };
        }
        let Some((summary, class)) = var.owner().and_then(|owner| self.class_summary(&owner)) else {
            return VarExprs { summary: None, var: var.clone(), member_of: None };
        };
        VarExprs { summary: Some(summary), var: var.clone(), member_of: Some(class) }
    }

    /// The getters and setters of the properties a class attribute is made as (`x =
    /// property(getter, setter)` in its class body): read from its own assignments, never from
    /// a property object that flowed into another attribute (`self.cache = self.x` in code read
    /// from a summary, where property reads are not evaluated). A descriptor made in the class
    /// body (`testing = ConfigAttribute("TESTING")`, of a class of the code defining `__get__`)
    /// is read the same way: its `__get__` is the getter, its `__set__` the setter, its
    /// `__delete__` the deleter.
    pub(super) fn made_properties(&self, var: &Target, depth: u32) -> Vec<MadeProperty> {
        // Only a class attribute is a descriptor: `self.p = property(g)` stores the property
        // object in the instance, whose reads never call `g`.
        let attr = own_name(&var.path);
        let in_class_body = var
            .owner()
            .and_then(|owner| self.with_class(&owner, |c| c.member(attr).is_some_and(|m| m.class_body_value)));
        if in_class_body != Some(true) {
            return Vec::new();
        }
        let self_class = var.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for e in self.var_exprs(var).iter() {
            let Expr::Property(_, _, deleter) = e else { continue };
            let deleter = deleter.as_deref().and_then(|d| {
                self.eval_closed(d, &var.module, self_class.as_ref(), depth + 1).into_iter().find_map(|v| match v {
                    Value::Function(t) => Some(t),
                    _ => None,
                })
            });
            for v in self.eval_closed(e, &var.module, self_class.as_ref(), depth + 1) {
                if let Value::Property(getter, setter) = v {
                    out.push(MadeProperty { getter, descriptor: None, setter, deleter: deleter.clone() });
                }
            }
        }
        // Descriptors. One without `__set__` and `__delete__` is shadowed by an attribute the
        // instance sets (`self.engine = ...`), and its `__get__` is then not called: left out
        // where the class's methods assign the name.
        let through_self = var
            .owner()
            .and_then(|owner| self.with_class(&owner, |c| c.member(attr).is_some_and(|m| m.assigned_through_self)))
            .unwrap_or(false);
        for made in self.class_body_descriptors(var, depth) {
            if made.setter.is_some() || made.deleter.is_some() || !through_self {
                out.push(made);
            }
        }
        out
    }

    /// The descriptors a class attribute holds, from what the class body itself assigned
    /// (instances of classes of the code defining `__get__`): read on the class, each calls its
    /// `__get__` whatever the instances set.
    pub(super) fn class_body_descriptors(&self, var: &Target, depth: u32) -> Vec<MadeProperty> {
        let attr = own_name(&var.path);
        let class_body = var
            .owner()
            .and_then(|owner| {
                self.with_class(&owner, |c| {
                    c.member(attr).filter(|m| m.class_body_value).map(|m| {
                        let own = m.values.get(..m.class_body_values as usize).unwrap_or_default();
                        own.iter().filter(|e| matches!(e, Expr::Call(_))).cloned().collect::<Vec<_>>()
                    })
                })
            })
            .flatten()
            .unwrap_or_default();
        let self_class = var.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for e in &class_body {
            for v in self.eval_closed(e, &var.module, self_class.as_ref(), depth + 1) {
                if let Value::Instance(class) = v
                    && let Some(made) = self.descriptor_methods(&class, depth + 1)
                {
                    out.push(made);
                }
            }
        }
        out
    }

    /// The `__get__` of a descriptor class of the code, with its `__set__` and `__delete__` if it
    /// has them.
    fn descriptor_methods(&self, class: &Target, depth: u32) -> Option<MadeProperty> {
        let method = |name: &str| {
            self.deref(self.class_attr(class, name, None, depth + 1), depth + 1).into_iter().find_map(|v| match v {
                Value::Function(t) => Some(t),
                _ => None,
            })
        };
        Some(MadeProperty {
            getter: method("__get__")?,
            descriptor: Some(class.clone()),
            setter: method("__set__"),
            deleter: method("__delete__"),
        })
    }

    pub(super) fn var_values(&self, var: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        // Memoised: a variable assigned from itself (`x = x.y`, over and over) otherwise re-read
        // every assignment at every level down to the depth bound, exponential in the number of
        // assignments (50 of them took 15 s to index; 100, minutes).
        self.memoised(&self.variables, var.clone(), || self.var_values_uncached(var, depth))
    }

    pub(super) fn var_values_uncached(&self, var: &Target, depth: u32) -> Vec<Value> {
        let self_class = if self.summary_for(&var.module, &var.path).is_some_and(|s| s.name(&var.path).is_some()) {
            None
        } else {
            var.owner().map(SelfClass::own)
        };
        // `Color.RED` of `class Color(Enum): RED = 1` is a Color, not 1.
        let attr = own_name(&var.path);
        if self_class.is_some()
            && is_enum_member_name(attr)
            && let Some(owner) = var.owner()
            && self.with_class(&owner, |c| {
                c.member(attr).is_some_and(|m| m.kind == DefKind::Variable && m.class_body_value)
            }) == Some(true)
            && self.is_enum(&owner, depth + 1)
        {
            return vec![Value::Instance(owner)];
        }
        let mut out = Vec::new();
        // Key-value stores (`self.adapters[prefix] = adapter`, or a dict written out) make the
        // value a dict only when nothing else says what it is: an attribute assigned
        // `Registry()` and filled by subscript keeps `Registry`'s methods.
        let mut keyed = Vec::new();
        for e in self.var_exprs(var).iter() {
            let values = match e {
                // `str = str` (a compat module re-exporting a builtin): the right side is read
                // before the name is bound, so it is the builtin. Evaluated as the variable, it is
                // the variable itself: a cycle, which gives nothing.
                Expr::Name(n) if self_class.is_none() && **n == *var.path => builtin(n).into_iter().collect(),
                _ => self.eval_closed(e, &var.module, self_class.as_ref(), depth + 1),
            };
            let is_keyed = matches!(e, Expr::Keyed(_) | Expr::Container(ContainerKind::Dict, _));
            extend(if is_keyed { &mut keyed } else { &mut out }, values);
        }
        // A default (`on_hover=None`) says little: what calls pass counts too.
        extend(&mut out, self.attribute_from_arguments(var, depth + 1));
        if out.is_empty() {
            out = keyed;
        }
        out
    }

    /// An instance attribute of a class of this file that a method sets from one of its
    /// parameters (`self.callback = callback` in `__init__`): what this file's calls pass for
    /// that parameter (`Button(on_click)`). Only this file's own calls count, as for every
    /// argument flow: the summary other files see does not change.
    pub(super) fn attribute_from_arguments(&self, var: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) || *var.module != *self.module {
            return Vec::new();
        }
        let mut out = Vec::new();
        for store in self.attributes_from_params.get(&*var.path).into_iter().flatten() {
            // `self.adapters[prefix] = adapter` adds elements; it does not make the attribute a dict.
            if !store.element_only {
                extend(&mut out, self.eval_local(&store.value, store.scope, depth + 1));
            }
        }
        out
    }

    /// Evaluates a summary expression (closed over module scope) in `module`.
    pub(super) fn eval_closed(
        &self,
        expr: &Expr,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let raw = match expr {
            Expr::Name(n) => {
                let mut v = self.module_member(module, n, depth + 1);
                if v.is_empty() {
                    v.extend(builtin(n));
                }
                v
            }
            Expr::DefPath(p) => {
                let summary = self.summary_for(module, p);
                match summary {
                    Some(s) if s.class(p).is_some() => vec![Value::Class(Target::new(module, p))],
                    Some(s) if s.function(p).is_some() => {
                        vec![Value::Function(Target::new(module, p))]
                    }
                    _ => Vec::new(),
                }
            }
            Expr::Attr(base, attr) => {
                let own = private_lookup(attr, self_class);
                let mut out = Vec::new();
                for b in self.eval_closed(base, module, own.as_ref().or(self_class), depth + 1) {
                    let values = self.attr_of(&b, attr, depth + 1);
                    let Some(receiver) = property_receiver(&b) else {
                        // A descriptor read on the class (see [`Resolver::class_read`]).
                        for v in values {
                            let read = match (&v, &b) {
                                (Value::Var(var), Value::Class(_)) => self.class_read(var, &v, depth + 1),
                                _ => None,
                            };
                            match read {
                                Some((_, read)) => extend(&mut out, read),
                                None => push(&mut out, v),
                            }
                        }
                        continue;
                    };
                    // A property read on an instance gives its getter's result, never the getter
                    // itself: `return self.b`, with `b` a property, is what `b` returns (the
                    // function `b` leaked into callers as a value, and `r.a` then "referenced"
                    // it). An instance never holds the property object either: `self.cache =
                    // self.made` (with `made = property(getter)`) gives the attribute nothing.
                    for v in values {
                        match &v {
                            Value::Function(t) if self.method_flags(t).is_property => {
                                extend(&mut out, self.result_on_instance(&v, &receiver, depth + 1));
                            }
                            Value::Var(var) if !self.made_properties(var, depth + 1).is_empty() => {}
                            _ => push(&mut out, v),
                        }
                    }
                }
                out
            }
            // `super()` in a method read from its summary (`return super().filter()`): the
            // receiver, looked up from the class after the one defining the method in the
            // receiver's MRO.
            Expr::Call(callee)
                if matches!(callee.as_ref(), Expr::Name(n) if n == "super")
                    && self_class.is_some()
                    && self.module_member(module, "super", depth + 1).is_empty() =>
            {
                self_class
                    .map(|c| vec![Value::Super(c.defined_in.clone(), c.receiver.clone(), c.on_class)])
                    .unwrap_or_default()
            }
            Expr::Call(callee) => {
                if let Expr::Attr(base, attr) = callee.as_ref() {
                    // As evaluating the callee would: its depth checked, then its base's.
                    if self.too_deep(depth + 1) {
                        Vec::new()
                    } else {
                        // `self.__make()`: looked up as `_Base__make` on the defining class,
                        // called with `self` still the receiver.
                        let bases = self.eval_closed(base, module, self_class, depth + 2);
                        let lookup_in = private_lookup(attr, self_class)
                            .filter(|_| matches!(base.as_ref(), Expr::SelfRef | Expr::ClsRef))
                            .map(|own| own.defined_in);
                        self.method_call_result(&bases, attr, true, lookup_in.as_ref(), depth)
                    }
                } else {
                    let mut out = Vec::new();
                    for c in self.eval_closed(callee, module, self_class, depth + 1) {
                        extend(&mut out, self.call_result(&c, depth + 1));
                    }
                    out
                }
            }
            // `Subscript` is also what lowering writes for an element of what iterating gives
            // (`for a, b in x`, `*rest`, `yield from x`): only a subscript written with a key
            // (`Item`) asks `__getitem__`.
            Expr::Subscript(base) => self.elements_closed(base, module, self_class, depth + 1),
            // At this depth: its fallback, any element, is evaluated as deep as it always was (one
            // more level would make more evaluations meet the depth bound).
            Expr::Item(base, key) => {
                let bases = self.eval_closed(base, module, self_class, depth + 1);
                self.subscript(bases, depth, || self.item_closed(base, key, module, self_class, depth))
            }
            // A slice is a sequence of the same type.
            Expr::Slice(base, _) => self.eval_closed(base, module, self_class, depth + 1),
            Expr::Element(base, index) => self.element_closed(base, &[*index], module, self_class, depth + 1),
            Expr::Container(kind, _) => {
                vec![builtin_instance(kind.builtin())]
            }
            Expr::Keyed(_) => vec![Value::ExternalInstance(Arc::from("builtins.dict"))],
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Literal(t) => vec![builtin_instance(t)],
            Expr::Constant(k) => {
                vec![builtin_instance(constant_type(k))]
            }
            Expr::ItemAt(base, _) => {
                let bases = self.eval_closed(base, module, self_class, depth + 1);
                self.subscript(bases, depth, || self.elements_closed(base, module, self_class, depth + 1))
            }
            Expr::SelfRef => self_class.map(|c| vec![Value::Instance(c.receiver.clone())]).unwrap_or_default(),
            Expr::ClsRef => self_class.map(|c| vec![Value::Class(c.receiver.clone())]).unwrap_or_default(),
            Expr::Instance(ty) => instances(self.eval_closed(ty, module, self_class, depth + 1)),
            Expr::Declared(ty, value) => {
                let promised = self.eval_closed(ty, module, self_class, depth + 1);
                let assigned = || self.eval_closed(value, module, self_class, depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Narrowed(ty, value) => {
                let promised = self.eval_closed(ty, module, self_class, depth + 1);
                let assigned = || self.eval_closed(value, module, self_class, depth + 1);
                self.narrowed(promised, assigned, depth)
            }
            Expr::NotInstance(ty, value) => {
                let excluded = self.eval_closed(ty, module, self_class, depth + 1);
                self.not_instance(excluded, self.eval_closed(value, module, self_class, depth + 1), depth)
            }
            Expr::Entered(manager, is_async) => {
                self.entered_with(manager, *is_async, depth + 1, &|e, d| self.eval_closed(e, module, self_class, d))
            }
            Expr::Decorated(inner, count) => {
                let mut out = Vec::new();
                for v in self.eval_closed(inner, module, self_class, depth + 1) {
                    match &v {
                        Value::Function(t) => extend(&mut out, self.decorated_arg(t, *count as usize, depth + 1)),
                        _ => push(&mut out, v),
                    }
                }
                out
            }
            Expr::Property(getter, setter, _) => {
                let getters = self.eval_closed(getter, module, self_class, depth + 1);
                let setters = || setter.as_deref().map(|s| self.eval_closed(s, module, self_class, depth + 1));
                property_values(getters, setters)
            }
            Expr::Lambda(_) | Expr::Returning(_) | Expr::Added(_) | Expr::Unknown => Vec::new(),
        };
        self.deref(raw, depth)
    }

    pub(super) fn elements_closed(
        &self,
        expr: &Expr,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            Expr::Container(_, items) | Expr::Added(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (_, e) in items {
                    extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Slice(inner, _) => self.elements_closed(inner, module, self_class, depth + 1),
            Expr::Name(_) | Expr::Attr(..) => {
                let mut out = Vec::new();
                let raw = match expr {
                    Expr::Name(n) => self.module_member(module, n, depth + 1),
                    Expr::Attr(base, attr) => {
                        let own = private_lookup(attr, self_class);
                        let mut r = Vec::new();
                        for b in self.eval_closed(base, module, own.as_ref().or(self_class), depth + 1) {
                            extend(&mut r, self.attr_of(&b, attr, depth + 1));
                        }
                        r
                    }
                    _ => Vec::new(),
                };
                extend(&mut out, self.variable_elements(raw, depth + 1));
                out
            }
            Expr::Call(callee) => {
                let mut out = Vec::new();
                // `d.values()`, `d.copy()`: the elements of `d`, as in `elements_local`.
                if let Expr::Attr(base, method) = callee.as_ref()
                    && is_element_preserving(method)
                {
                    extend(&mut out, self.elements_closed(base, module, self_class, depth + 1));
                }
                for c in self.eval_closed(callee, module, self_class, depth + 1) {
                    extend(&mut out, self.call_elements(&c, depth + 1));
                }
                out
            }
            Expr::Declared(ty, value) => {
                let promised = self.elements_closed(ty, module, self_class, depth + 1);
                let assigned = || self.elements_closed(value, module, self_class, depth + 1);
                self.declared(promised, assigned, depth)
            }
            Expr::Narrowed(ty, value) => {
                let promised = self.elements_closed(ty, module, self_class, depth + 1);
                let assigned = || self.elements_closed(value, module, self_class, depth + 1);
                self.narrowed(promised, assigned, depth)
            }
            // What is left of the value has the elements it has.
            Expr::NotInstance(_, value) => self.elements_closed(value, module, self_class, depth + 1),
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.elements_closed(e, module, self_class, depth + 1));
                }
                out
            }
            Expr::Literal(_) | Expr::Constant(_) | Expr::Instance(_) => {
                self.value_elements(self.eval_closed(expr, module, self_class, depth + 1), depth)
            }
            _ => Vec::new(),
        }
    }

    /// `base["key"]` in a summary expression: the value written under that key when `base` is a
    /// dict with constant keys (or a module-level variable holding only such dicts, see
    /// [`Resolver::variable_items`]); any element otherwise.
    pub(super) fn item_closed(
        &self,
        base: &Expr,
        key: &str,
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match base {
            Expr::Keyed(items) => {
                let mut out = Vec::new();
                for (k, e) in items {
                    if k == key {
                        extend(&mut out, self.eval_closed(e, module, self_class, depth + 1));
                    }
                }
                out
            }
            Expr::Container(ContainerKind::List | ContainerKind::Tuple, items)
                if integer_key(key).is_some_and(|i| i < items.len()) =>
            {
                let i = integer_key(key).unwrap_or_default();
                items.get(i).map(|e| self.eval_closed(e, module, self_class, depth + 1)).unwrap_or_default()
            }
            Expr::Name(n) => match self.variable_items(self.module_member(module, n, depth + 1), key, depth + 1) {
                Some(items) => items,
                None => self.elements_closed(base, module, self_class, depth + 1),
            },
            // `settings.TABLE["b"]`, as in `item_local`.
            Expr::Attr(inner, attr) => {
                let mut raw = Vec::new();
                for v in self.eval_closed(inner, module, self_class, depth + 1) {
                    extend(&mut raw, self.attr_of(&v, attr, depth + 1));
                }
                match self.variable_items(raw, key, depth + 1) {
                    Some(items) => items,
                    None => self.elements_closed(base, module, self_class, depth + 1),
                }
            }
            _ => self.elements_closed(base, module, self_class, depth + 1),
        }
    }

    /// The items under `key` of the module-level variables `raw` names (`TABLE["b"]` with
    /// `TABLE` imported from another module, or read as `settings.TABLE`), read from their
    /// modules' summaries. `None` unless `raw` names only module-level variables, each assigned
    /// only dicts with constant keys (or, for an integer key, literal lists or tuples): then the
    /// item is what is written under the key (by literals, `d["k"] = v` and `d.update({...})`
    /// in the module, as for the module's own reads), and nothing else.
    pub(super) fn variable_items(&self, raw: Vec<Value>, key: &str, depth: u32) -> Option<Vec<Value>> {
        if self.too_deep(depth) || raw.is_empty() {
            return None;
        }
        let by_index = integer_key(key).is_some();
        let mut out = Vec::new();
        for v in raw {
            let Value::Var(t) = v else { return None };
            let exprs = self.var_exprs(&t);
            // An attribute's dict is filled from anywhere (`self.r2.update(...)` in a method,
            // `obj.table[k] = f` elsewhere), which its class's summary does not record.
            if exprs.member_of.is_some() {
                return None;
            }
            let keyed = |e: &Expr| match e {
                Expr::Keyed(_) => true,
                Expr::Container(ContainerKind::List | ContainerKind::Tuple, _) => by_index,
                _ => false,
            };
            if exprs.iter().next().is_none() || !exprs.iter().all(keyed) {
                return None;
            }
            for e in exprs.iter() {
                extend(
                    &mut out,
                    self.item_closed(e, key, &t.module, t.owner().map(SelfClass::own).as_ref(), depth + 1),
                );
            }
        }
        Some(out)
    }

    /// The element at `path` (`[1, 0]`: element 0 of element 1, for `a, (b, c) = ...`) of a
    /// summary expression: of literal tuples and lists, of those a module-level variable is
    /// assigned, of those a function returns; any element otherwise (one level only: deeper,
    /// nothing is known).
    pub(super) fn element_closed(
        &self,
        expr: &Expr,
        path: &[u32],
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) || path.len() > MAX_ELEMENT_PATH {
            return Vec::new();
        }
        let Some((&index, rest)) = path.split_first() else {
            return self.eval_closed(expr, module, self_class, depth + 1);
        };
        match expr {
            Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => items
                .get(index as usize)
                .map(|e| self.element_closed(e, rest, module, self_class, depth + 1))
                .unwrap_or_default(),
            // Memoised, as a variable unpacked from itself reads its own assignments again at
            // every level (see [`MAX_ELEMENT_PATH`]).
            Expr::Name(n) => {
                self.memoised(&self.module_element_paths, (module.clone(), n.clone(), path.to_vec()), || {
                    let mut out = Vec::new();
                    for v in self.module_member(module, n, depth + 1) {
                        if let Value::Var(t) = v {
                            for e in self.var_exprs(&t).iter() {
                                extend(
                                    &mut out,
                                    self.element_closed(
                                        e,
                                        path,
                                        &t.module,
                                        t.owner().map(SelfClass::own).as_ref(),
                                        depth + 1,
                                    ),
                                );
                            }
                        }
                    }
                    out
                })
            }
            Expr::Call(callee) => {
                let mut out = Vec::new();
                for c in self.eval_closed(callee, module, self_class, depth + 1) {
                    extend(&mut out, self.call_element(&c, path, depth + 1));
                }
                out
            }
            Expr::Element(inner, j) => {
                let outer: Vec<u32> = std::iter::once(*j).chain(path.iter().copied()).collect();
                self.element_closed(inner, &outer, module, self_class, depth + 1)
            }
            Expr::Slice(inner, Some(start)) => {
                self.element_closed(inner, &shifted_path(index, *start, rest), module, self_class, depth + 1)
            }
            // `for k, v in d.items()` at module level: `v` is a value of `d`.
            Expr::Subscript(inner) => match self.dict_view_closed(inner, "items", module, self_class, depth + 1) {
                Some(base) if index == 1 && rest.is_empty() => {
                    self.elements_closed(base, module, self_class, depth + 1)
                }
                Some(_) => Vec::new(),
                None if rest.is_empty() => self.elements_closed(expr, module, self_class, depth + 1),
                None => Vec::new(),
            },
            _ if rest.is_empty() => self.elements_closed(expr, module, self_class, depth + 1),
            _ => Vec::new(),
        }
    }

    /// The element at `path` of what calling `callee` gives: of each tuple or list its function
    /// returns (`return headers, stream`), or any element when that is not how it returns.
    pub(super) fn call_element(&self, callee: &Value, path: &[u32], depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        if let Value::Function(t) = callee {
            let summary = self.summary_for(&t.module, &t.path);
            let function = summary.as_ref().and_then(|s| s.function(&t.path));
            if let Some(f) = function.filter(|f| f.yields.is_empty() && !f.returns.is_empty()) {
                return self.memoised(&self.call_results, CallKey::Element(t.clone(), path.to_vec()), || {
                    let owner = t.owner().map(SelfClass::own);
                    let mut out = Vec::new();
                    for r in &f.returns {
                        extend(&mut out, self.element_closed(r, path, &t.module, owner.as_ref(), depth + 1));
                    }
                    out
                });
            }
        }
        if path.len() == 1 { self.call_elements(callee, depth + 1) } else { Vec::new() }
    }

    /// Element `path` of each element of the summary expression `expr` (a container written
    /// out, or an annotation's element type): the tuples of `self._list = [(k, v), ...]`, or of
    /// `self.pairs: List[Tuple[A, B]]`. Nothing for other expressions.
    pub(super) fn item_element_closed(
        &self,
        expr: &Expr,
        path: &[u32],
        module: &Arc<str>,
        self_class: Option<&SelfClass>,
        depth: u32,
    ) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match expr {
            // A dict's items are its values, but iterating it gives its keys (not tracked).
            Expr::Container(ContainerKind::List | ContainerKind::Tuple | ContainerKind::Set, items)
            | Expr::Added(items) => {
                let mut out = Vec::new();
                for item in items {
                    extend(&mut out, self.element_closed(item, path, module, self_class, depth + 1));
                }
                out
            }
            Expr::Declared(ty, value) => {
                let promised = self.item_element_closed(ty, path, module, self_class, depth + 1);
                self.declared(promised, || self.item_element_closed(value, path, module, self_class, depth + 1), depth)
            }
            Expr::Narrowed(ty, value) => {
                let promised = self.item_element_closed(ty, path, module, self_class, depth + 1);
                self.narrowed(promised, || self.item_element_closed(value, path, module, self_class, depth + 1), depth)
            }
            Expr::NotInstance(_, value) => self.item_element_closed(value, path, module, self_class, depth + 1),
            Expr::Union(items) => {
                let mut out = Vec::new();
                for e in items {
                    extend(&mut out, self.item_element_closed(e, path, module, self_class, depth + 1));
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// Element `path` of each element the repository function `callee` produces when iterated:
    /// of the tuples it yields (`yield name, command`), else of the element type its return
    /// annotation declares (`-> Iterator[Tuple[str, Command]]`). Nothing for other values.
    pub(super) fn call_item_element(&self, callee: &Value, path: &[u32], depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        self.with_function(callee, |t, f| {
            let owner = t.owner().map(SelfClass::own);
            let mut out = Vec::new();
            for y in &f.yields {
                extend(&mut out, self.element_closed(y, path, &t.module, owner.as_ref(), depth + 1));
            }
            if out.is_empty()
                && let Some(Expr::Container(ContainerKind::List | ContainerKind::Set, items)) = &f.annotation
            {
                for item in items {
                    extend(&mut out, self.element_closed(item, path, &t.module, owner.as_ref(), depth + 1));
                }
            }
            out
        })
        .unwrap_or_default()
    }

    /// `compute()`, memoised under `key` in `memo` for the file being resolved.
    ///
    /// While it runs, `key` reads as nothing: a value that reaches itself (`terms = terms +
    /// [...]`, a function returning its own result through others) adds nothing more, and the
    /// walk stays linear instead of exponential in the number of such paths. A result is kept
    /// only when it is complete: nothing in it was cut short by the depth bound, and it did not
    /// read a computation still running further out (that one's values were not known yet;
    /// reading its own key is fine, as the values are a union that cannot grow from itself).
    pub(super) fn memoised<K: std::hash::Hash + Eq + Clone>(
        &self,
        memo: &RefCell<FxHashMap<K, Memo>>,
        key: K,
        compute: impl FnOnce() -> Vec<Value>,
    ) -> Vec<Value> {
        match memo.borrow().get(&key) {
            Some(Memo::Done(values)) => return values.clone(),
            Some(Memo::Running(level)) => {
                self.lowest_cycle_hit.set(self.lowest_cycle_hit.get().min(*level));
                return Vec::new();
            }
            None => {}
        }
        let level = self.memo_level.get() + 1;
        self.memo_level.set(level);
        memo.borrow_mut().insert(key.clone(), Memo::Running(level));
        let outer_hit = self.lowest_cycle_hit.replace(u32::MAX);
        let cuts_before = self.cuts.get();
        let values = compute();
        let hit = self.lowest_cycle_hit.get();
        self.lowest_cycle_hit.set(outer_hit.min(hit));
        self.memo_level.set(level - 1);
        if self.cuts.get() == cuts_before && hit >= level {
            memo.borrow_mut().insert(key, Memo::Done(values.clone()));
        } else {
            memo.borrow_mut().remove(&key);
        }
        values
    }

    /// What iterating over the variables among `raw` yields (their assigned containers).
    pub(super) fn variable_elements(&self, raw: Vec<Value>, depth: u32) -> Vec<Value> {
        let mut out = Vec::new();
        for v in raw {
            if let Value::Var(t) = v {
                for e in self.var_exprs(&t).iter() {
                    extend(
                        &mut out,
                        self.elements_closed(e, &t.module, t.owner().map(SelfClass::own).as_ref(), depth + 1),
                    );
                }
                // Elements a method of this file stores from its parameters
                // (`self.adapters[prefix] = adapter`): what this file's calls pass.
                if *t.module == *self.module && !self.too_deep(depth) {
                    for store in self.attributes_from_params.get(&*t.path).into_iter().flatten() {
                        if !matches!(store.value, Expr::Name(_)) {
                            extend(&mut out, self.elements_local(&store.value, store.scope, depth + 1));
                        }
                    }
                }
            }
        }
        out
    }

    /// What iterating over the values of a literal, a constant or an annotation (`x: T`) yields:
    /// a string's characters, a bytes object's integers, and for an instance of a class of the
    /// repository what its iterator protocol gives (`lines: LineList` iterates as
    /// `LineList(...)` does).
    pub(super) fn value_elements(&self, values: Vec<Value>, depth: u32) -> Vec<Value> {
        let instances: Vec<Value> = values.iter().filter(|v| matches!(v, Value::Instance(_))).cloned().collect();
        let mut out = string_items(values);
        if !instances.is_empty() {
            extend(&mut out, self.iterate_instances(&instances, false, depth + 1).1);
        }
        out
    }

    /// A subscript of `bases`: what `__getitem__` returns when every base is an instance of a
    /// class of the code defining it (see [`Resolver::getitem_results`]), else that with what
    /// `items` reads (the containers' items written out, or any element).
    pub(super) fn subscript(&self, bases: Vec<Value>, depth: u32, items: impl FnOnce() -> Vec<Value>) -> Vec<Value> {
        let (got, only) = self.getitem_results(bases, depth);
        if only {
            return got;
        }
        let mut out = items();
        extend(&mut out, got);
        out
    }

    /// What subscripting instances of repository classes that define `__getitem__` gives: what
    /// it returns (`table["x"]` is `Table.__getitem__`'s result, not what iterating `table`
    /// yields), and whether that is all the subscript can give: every value is such an instance
    /// and some result is known. Otherwise the caller adds what the other values' items are
    /// (`w = Wrap() if flag else {"a": v}`: both).
    pub(super) fn getitem_results(&self, values: Vec<Value>, depth: u32) -> (Vec<Value>, bool) {
        let mut out = Vec::new();
        let mut all_instances = !values.is_empty();
        for v in values {
            let Value::Instance(class) = &v else {
                all_instances = false;
                if let Value::Class(class) = &v {
                    extend(&mut out, self.class_subscript(class, depth));
                }
                continue;
            };
            let mut defined = false;
            for m in self.deref(self.class_attr(class, "__getitem__", None, depth + 1), depth + 1) {
                if let Value::Function(_) = m {
                    defined = true;
                    extend(&mut out, self.call_result(&m, depth + 1));
                }
            }
            all_instances &= defined;
        }
        let only = all_instances && !out.is_empty();
        (out, only)
    }

    /// What subscripting the class object `class` gives: an enumeration's member by name
    /// (`Color["RED"]`), else a generic alias (`Setting[bool]`, `Box[int]`), which constructs
    /// and reads attributes as the class does. Nothing when the class defines its own
    /// `__class_getitem__`, or it or a base names a metaclass, whose `__getitem__` would answer
    /// first: neither result is followed.
    fn class_subscript(&self, class: &Target, depth: u32) -> Vec<Value> {
        let own = self.deref(self.class_attr(class, "__class_getitem__", None, depth + 1), depth + 1);
        if own.iter().any(|m| matches!(m, Value::Function(_))) {
            return Vec::new();
        }
        let metaclass = self.mro(class, depth + 1).iter().any(|entry| match entry {
            MroEntry::Class(c) => self.with_class(c, |k| k.metaclass.is_some()).unwrap_or(false),
            MroEntry::External(_) => false,
        });
        if metaclass {
            return Vec::new();
        }
        if self.is_enum(class, depth + 1) {
            return vec![Value::Instance(class.clone())];
        }
        vec![Value::Class(class.clone())]
    }

    /// Whether every base of `class` and of its repository ancestors evaluates to a class: a
    /// base nothing resolves (`namedtuple(...)`, an import that is missing) may define anything,
    /// `__iter__` included.
    pub(super) fn bases_all_known(&self, class: &Target, depth: u32) -> bool {
        self.mro(class, depth).iter().all(|entry| {
            let MroEntry::Class(c) = entry else { return true };
            let bases = self.with_class(c, |k| k.bases.clone()).unwrap_or_default();
            bases.iter().all(|b| {
                self.eval_closed(b, &c.module, None, depth + 1)
                    .iter()
                    .any(|v| matches!(v, Value::Class(_) | Value::External(_)))
            })
        })
    }

    /// What iterating over the result of calling `callee` yields (generators, returned containers).
    pub(super) fn call_elements(&self, callee: &Value, depth: u32) -> Vec<Value> {
        if let Value::External(x) = callee
            && let Some(element) = external_call_element(x)
        {
            return vec![element];
        }
        if let Value::Class(t) = callee {
            // Iterating a new instance: what its class's `__next__` returns.
            return self.iterate_instances(&[Value::Instance(t.clone())], false, depth + 1).1;
        }
        self.with_function(callee, |t, f| {
            self.memoised(&self.call_results, CallKey::Elements(t.clone()), || {
                let owner = t.owner().map(SelfClass::own);
                let mut out = self.yielded(t, f, depth);
                for r in &f.returns {
                    extend(&mut out, self.elements_closed(r, &t.module, owner.as_ref(), depth + 1));
                }
                if let Some(annotation) = &f.annotation
                    && !names_repo_value(&out)
                {
                    let promised = self.elements_closed(annotation, &t.module, owner.as_ref(), depth + 1);
                    prefer_promised(&mut out, promised);
                }
                out
            })
        })
        .unwrap_or_default()
    }
}
