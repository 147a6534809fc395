//! What calls and attributes give: a function's result (declared or inferred), decorators and
//! wrappers, methods (dispatched on the receiver's class), generators and iteration over
//! instances, and the attribute of any value.

use super::*;

impl<'a> Resolver<'a> {
    /// `with`'s result for the repository function `callee` and its summary (`None` for other
    /// values, or without a summary).
    pub(super) fn with_function<R>(
        &self,
        callee: &Value,
        with: impl FnOnce(&Target, &FunctionSummary) -> R,
    ) -> Option<R> {
        let (Value::Function(t) | Value::Undecorated(t)) = callee else { return None };
        let summary = self.summary_for(&t.module, &t.path)?;
        summary.function(&t.path).map(|f| with(t, f))
    }

    /// What the function `t` (summarised as `f`) yields.
    pub(super) fn yielded(&self, t: &Target, f: &FunctionSummary, depth: u32) -> Vec<Value> {
        let owner = t.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for y in &f.yields {
            extend(&mut out, self.eval_closed(y, &t.module, owner.as_ref(), depth + 1));
        }
        out
    }

    /// The iterator protocol on the instances among `values`: the repository methods iterating
    /// them calls (`__iter__`, then `__next__` on what `__iter__` returns; `__aiter__` and
    /// `__anext__` for `async for`) and the elements it yields (what `__next__` returns, or what a
    /// generator `__iter__` yields).
    pub(super) fn iterate_instances(&self, values: &[Value], is_async: bool, depth: u32) -> (Vec<Value>, Vec<Value>) {
        let (iter_name, next_name) = if is_async { ("__aiter__", "__anext__") } else { ("__iter__", "__next__") };
        let mut methods = Vec::new();
        let mut elements = Vec::new();
        if self.too_deep(depth) {
            return (methods, elements);
        }
        for v in values {
            let Value::Instance(t) = v else { continue };
            let iters = self.deref(self.class_attr(t, iter_name, None, depth + 1), depth);
            // No `__iter__` but a `__getitem__`: Python iterates by calling it with 0, 1, ...
            // until `IndexError` (django's gdal `DataSource`, rich's `Palette`). An external base
            // (`dict`, `CookieJar`) answers for `__iter__` by name: it may define one.
            if !is_async
                && iters.is_empty()
                && self.class_attr(t, "__aiter__", None, depth + 1).is_empty()
                && self.bases_all_known(t, depth + 1)
            {
                for getitem in self.deref(self.class_attr(t, "__getitem__", None, depth + 1), depth) {
                    if matches!(getitem, Value::Function(_)) {
                        extend(&mut elements, self.call_result(&getitem, depth + 1));
                        push(&mut methods, getitem);
                    }
                }
            }
            for iter in iters {
                if !matches!(iter, Value::Function(_)) {
                    continue;
                }
                push(&mut methods, iter.clone());
                // A generator `__iter__` yields the elements itself. (What `async for` binds is
                // what awaiting `__anext__`'s result gives: not followed.)
                let known = elements.len();
                if !is_async {
                    extend(&mut elements, self.call_generated(&iter, depth + 1));
                }
                // `def __iter__(self) -> Iterator[Item]: return iter(self._items)`: the
                // annotation says what the elements are when nothing it yields does (rich's
                // `Lines`; the annotation reads as a list of `Item`).
                if !is_async && elements.len() == known {
                    let annotated = self
                        .with_function(&iter, |t, f| match &f.annotation {
                            Some(Expr::Container(_, items)) => {
                                let owner = t.owner().map(SelfClass::own);
                                let mut out = Vec::new();
                                for item in items {
                                    extend(&mut out, self.eval_closed(item, &t.module, owner.as_ref(), depth + 1));
                                }
                                // A type variable (`Iterator[T]`, `T = TypeVar("T")`) says
                                // nothing of the elements: `typing.TypeVar.strip` would be
                                // invented. (`AnyStr` reads as `str | bytes`, see
                                // [`instances`].)
                                out.retain(|v| {
                                    !matches!(v, Value::ExternalInstance(x) | Value::External(x) if x.starts_with("typing."))
                                });
                                out
                            }
                            _ => Vec::new(),
                        })
                        .unwrap_or_default();
                    extend(&mut elements, annotated);
                }
                for iterator in self.result_on_instance(&iter, v, depth + 1) {
                    let Value::Instance(k) = &iterator else { continue };
                    for next in self.deref(self.class_attr(k, next_name, None, depth + 1), depth) {
                        if matches!(next, Value::Function(_)) {
                            push(&mut methods, next.clone());
                            if !is_async {
                                extend(&mut elements, self.call_result(&next, depth + 1));
                            }
                        }
                    }
                }
            }
        }
        (methods, elements)
    }

    /// What calling the generator function `callee` yields (nothing for other functions).
    pub(super) fn call_generated(&self, callee: &Value, depth: u32) -> Vec<Value> {
        self.with_function(callee, |t, f| self.yielded(t, f, depth)).unwrap_or_default()
    }

    /// `value.attr`; raw (may contain `Var`).
    pub(super) fn attr_of(&self, value: &Value, attr: &str, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        // `type(obj)` (lowered to this attribute, which no source can name) is the instance's
        // class whatever the class says its `__class__` is; a class's is its metaclass, not
        // known here.
        if attr == TYPE_OF {
            return match value {
                Value::Instance(t) => vec![Value::Class(t.clone())],
                Value::ExternalInstance(x) => vec![Value::External(x.clone())],
                _ => Vec::new(),
            };
        }
        match value {
            Value::Module(m) => {
                let mut v = self.module_member(m, attr, depth + 1);
                if v.is_empty() {
                    let sub = format!("{m}.{attr}");
                    if self.lookup(&sub).0 != ModuleLookup::Missing {
                        v.extend(self.module_value(&sub));
                    }
                }
                v
            }
            // A class's class is its metaclass: not known here.
            Value::Class(_) if attr == "__class__" => Vec::new(),
            Value::Class(t) => self.class_attr(t, attr, None, depth + 1),
            // `obj.__class__` is the instance's class, unless the code defines `__class__`
            // itself (django's `LazyObject` makes it a property; some classes assign
            // `self.__class__`).
            Value::Instance(t) if attr == "__class__" => {
                let own = self.class_attr(t, attr, None, depth + 1);
                if own.iter().any(|v| !matches!(v, Value::External(_))) { own } else { vec![Value::Class(t.clone())] }
            }
            Value::Instance(t) => self.instance_attr(t, attr, depth + 1),
            Value::Super(written_in, self_class, _) => self.class_attr(self_class, attr, Some(written_in), depth + 1),
            // A function has no attributes of its own here: `cli.command` on `@click.group()
            // def cli()` is an attribute of what the decorator made of it.
            Value::Function(t) => {
                let mut out = Vec::new();
                for v in self.decorated_result(t, depth + 1) {
                    if let Value::Instance(c) = v {
                        extend(&mut out, self.class_attr(&c, attr, None, depth + 1));
                    }
                }
                // `@value.setter` on a `@property`: the builtin property's method.
                if out.is_empty() && matches!(attr, "setter" | "getter" | "deleter") && self.method_flags(t).is_property
                {
                    out.push(Value::External(Arc::from(format!("builtins.property.{attr}").as_str())));
                }
                out
            }
            // `yaml = None` as the fallback of an optional import: code reads attributes on the
            // name's other values, never on `None` (which has none worth an edge).
            Value::ExternalInstance(x) if &**x == "builtins.NoneType" => Vec::new(),
            // `d.save()` where `d` may be a dict (among other values): a dict has no `save`, so
            // that value gives no edge (an invented `builtins.dict.save` would be one).
            Value::ExternalInstance(x) if !builtin_has_attr(x, attr) => Vec::new(),
            // `value.__class__` (and `type(value)`) of an instance is its type (`list`, not
            // `list.__class__`); of a class, its metaclass, which is not known here (naming
            // `unittest.TestCase.__class__` would invent a target).
            Value::ExternalInstance(x) if attr == "__class__" => vec![Value::External(x.clone())],
            Value::External(_) if attr == "__class__" => Vec::new(),
            Value::External(x) if !builtin_has_attr(x, attr) => Vec::new(),
            Value::External(x) | Value::ExternalInstance(x) => {
                vec![Value::External(Arc::from(format!("{x}.{attr}").as_str()))]
            }
            _ => Vec::new(),
        }
    }

    /// What the outermost decorator of function `t` makes of it, as far as it is an instance of a
    /// class of the code: the decorator is a class (`@C`), a function returning instances (by
    /// its returned values or its annotation), or a call whose result is such a function
    /// (`@d(...)` with `d` annotated `-> Callable[..., C]`, or returning such a function).
    pub(super) fn decorated_result(&self, t: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        let Some(summary) = self.summary_for(&t.module, &t.path) else {
            return Vec::new();
        };
        let Some(decorator) = summary.function(&t.path).and_then(|f| f.outermost_decorator().cloned()) else {
            return Vec::new();
        };
        // Decorators are closed over the scope the `def` is in: no `self` to bind.
        let mut out = Vec::new();
        if let Expr::Call(callee) = &decorator {
            for d in self.eval_closed(callee, &t.module, None, depth + 1) {
                if let Value::Function(g) = &d {
                    extend(&mut out, self.promised_by_callable(g, depth + 1));
                }
            }
        }
        if out.is_empty() {
            let mut decorators = self.eval_closed(&decorator, &t.module, None, depth + 1);
            if let Expr::Call(factory) = &decorator {
                let not_returned = self.bare_only_results(&self.eval_closed(factory, &t.module, None, depth + 1));
                decorators.retain(|v| !not_returned.contains(v));
            }
            for d in decorators {
                extend(&mut out, self.applied(&d, depth + 1));
            }
        }
        out.retain(|v| matches!(v, Value::Instance(_)));
        out
    }

    /// Function `t` as its `count` innermost decorators make it (all of them with `usize::MAX`),
    /// applied innermost first: a decorator returning a function of the code (a wrapper it
    /// defines, say) replaces it by that; one returning its argument, or whose result is not
    /// known (external decorators, classes, anything else), leaves it what it was, so that the
    /// decorated name still resolves.
    pub(super) fn decorated_chain(&self, t: &Target, count: usize, depth: u32) -> Vec<Value> {
        let mut current = vec![Value::Function(t.clone())];
        if self.too_deep(depth) {
            return current;
        }
        let Some(decorators) =
            self.summary_for(&t.module, &t.path).and_then(|s| s.function(&t.path).map(|f| f.decorators.clone()))
        else {
            return current;
        };
        for decorator in decorators.iter().rev().take(count) {
            // Decorators are closed over the scope the `def` is in: no `self` to bind.
            let mut next = Vec::new();
            for d in self.eval_closed(decorator, &t.module, None, depth + 1) {
                let Value::Function(g) = &d else { continue };
                let Some(g_summary) = self.summary_for(&g.module, &g.path).and_then(|s| s.function(&g.path).cloned())
                else {
                    continue;
                };
                if g_summary.returns_first_argument {
                    extend(&mut next, current.clone());
                }
                let owner = g.owner().map(SelfClass::own);
                // A decorator usable bare and called (`@deco` and `@deco("msg")`: `if
                // callable(arg): return decorator(arg)` then `return decorator`): applied bare, it
                // returns what its inner decorator makes, not the inner decorator itself (37 calls
                // in django reached `async_unsafe.decorator` as well as its `inner`).
                let bare = !matches!(decorator, Expr::Call(_));
                let dual_use = bare && g_summary.returns.iter().any(|r| matches!(r, Expr::Call(_)));
                for r in &g_summary.returns {
                    if dual_use
                        && !matches!(r, Expr::Call(_))
                        && (self.is_inner_decorator(r, g, owner.as_ref(), depth)
                            || self.returns_it_and_its_call(&g_summary, g, owner.as_ref(), r))
                    {
                        continue;
                    }
                    for v in self.eval_closed(r, &g.module, owner.as_ref(), depth + 1) {
                        if matches!(v, Value::Function(_)) {
                            push(&mut next, v);
                        }
                    }
                }
            }
            if !next.is_empty() {
                current = next;
            }
        }
        current
    }

    /// What a decorator factory usable bare and called (`if func is not None: return
    /// decorator(func)`, then `return decorator`) does *not* return when it is called in a
    /// decorator's place (`@command(...)`, `@cli.command()`): the values of its returns that call
    /// the function it defines. Called there, it is given no function, and returns that inner
    /// decorator itself; Python then calls the decorator, not what the decorator makes (click's
    /// `@click.command()` "called" the `Command` it makes, reaching `BaseCommand.__call__`,
    /// at every one of 330 decorated lines). `factories` are the values of the expression called.
    pub(super) fn bare_only_results(&self, factories: &[Value]) -> Vec<Value> {
        let mut dropped = Vec::new();
        let mut kept = Vec::new();
        for g in factories {
            let Value::Function(g) = g else { continue };
            let Some(summary) = self.summary_for(&g.module, &g.path).and_then(|s| s.function(&g.path).cloned()) else {
                continue;
            };
            let owner = g.owner().map(SelfClass::own);
            for r in summary.returns.iter() {
                let values = self.eval_closed(r, &g.module, owner.as_ref(), 1);
                match r {
                    Expr::Call(callee) if self.returns_it_and_its_call(&summary, g, owner.as_ref(), callee) => {
                        extend(&mut dropped, values)
                    }
                    _ => extend(&mut kept, values),
                }
            }
        }
        dropped.retain(|v| !kept.contains(v));
        dropped
    }

    /// Whether `inner`, which `g` returns, is a function defined in `g` that `g` also returns
    /// called (`return decorator(func)` and `return decorator`): `g` is a decorator usable bare
    /// (given the function, it returns what `decorator` makes of it) and called (given none, it
    /// returns `decorator`).
    pub(super) fn returns_it_and_its_call(
        &self,
        summary: &FunctionSummary,
        g: &Target,
        owner: Option<&SelfClass>,
        inner: &Expr,
    ) -> bool {
        summary.returns.iter().any(|r| r == inner)
            && summary.returns.iter().any(|r| matches!(r, Expr::Call(c) if **c == *inner))
            && self.eval_closed(inner, &g.module, owner, 1).iter().any(|v| {
                matches!(v, Value::Function(w) if w.module == g.module
                    && w.path.strip_prefix(&*g.path).is_some_and(|rest| rest.starts_with('.')))
            })
    }

    /// Whether `r`, returned by `g`, names a function defined in `g` that itself returns a
    /// function defined in it: a decorator `g` makes (`decorator` in `def deco(arg): def
    /// decorator(func): def inner(...): ...; return inner`).
    pub(super) fn is_inner_decorator(&self, r: &Expr, g: &Target, owner: Option<&SelfClass>, depth: u32) -> bool {
        let nested_in = |outer: &Target, inner: &Target| {
            inner.module == outer.module
                && inner.path.strip_prefix(&*outer.path).is_some_and(|rest| rest.starts_with('.'))
        };
        self.eval_closed(r, &g.module, owner, depth + 1).iter().any(|v| {
            let Value::Function(w) = v else { return false };
            if !nested_in(g, w) {
                return false;
            }
            let Some(returns) =
                self.summary_for(&w.module, &w.path).and_then(|s| s.function(&w.path).map(|f| f.returns.clone()))
            else {
                return false;
            };
            returns.iter().any(|r2| {
                self.eval_closed(r2, &w.module, owner, depth + 1)
                    .iter()
                    .any(|x| matches!(x, Value::Function(x) if nested_in(w, x)))
            })
        })
    }

    /// What a decorator with `count` decorators below it receives: the wrapper they return, or
    /// the function itself, undecorated.
    pub(super) fn decorated_arg(&self, t: &Target, count: usize, depth: u32) -> Vec<Value> {
        self.decorated_chain(t, count, depth)
            .into_iter()
            .map(|v| match v {
                Value::Function(w) if w == *t => Value::Undecorated(w),
                other => other,
            })
            .collect()
    }

    /// The wrappers a call of decorated function `t` also reaches: functions of the code its
    /// decorators return in its place.
    pub(super) fn wrappers(&self, t: &Target) -> Vec<Target> {
        self.decorated_chain(t, usize::MAX, 0)
            .into_iter()
            .filter_map(|v| match v {
                Value::Function(w) if w != *t => Some(w),
                _ => None,
            })
            .collect()
    }

    /// What calling `g`'s result gives, by `g`'s return annotation `Callable[..., R]`.
    pub(super) fn promised_by_callable(&self, g: &Target, depth: u32) -> Vec<Value> {
        let Some(summary) = self.summary_for(&g.module, &g.path) else {
            return Vec::new();
        };
        let Some(annotation) = summary.function(&g.path).and_then(|f| f.annotation.clone()) else {
            return Vec::new();
        };
        let mut returning = Vec::new();
        collect_returning(&annotation, &mut returning);
        let owner = g.owner().map(SelfClass::own);
        let mut out = Vec::new();
        for r in returning {
            extend(&mut out, self.eval_closed(r, &g.module, owner.as_ref(), depth + 1));
        }
        out
    }

    /// Applying decorator value `d` to a function: an instance of a decorator class, or what a
    /// decorator function returns (its returned instances, else its annotation's).
    pub(super) fn applied(&self, d: &Value, depth: u32) -> Vec<Value> {
        match d {
            Value::Class(c) => vec![Value::Instance(c.clone())],
            Value::Function(g) => {
                let mut out: Vec<Value> =
                    self.call_result(d, depth + 1).into_iter().filter(|v| matches!(v, Value::Instance(_))).collect();
                if out.is_empty()
                    && let Some(annotation) =
                        self.summary_for(&g.module, &g.path).and_then(|s| s.function(&g.path)?.annotation.clone())
                {
                    out = self.eval_closed(&annotation, &g.module, g.owner().map(SelfClass::own).as_ref(), depth + 1);
                }
                out
            }
            _ => Vec::new(),
        }
    }

    /// What a call of function `t` returns: what its summary's returns evaluate to, lambdas it
    /// returns (this file), else what its return annotation promises.
    pub(super) fn function_result(&self, t: &Target, depth: u32) -> Vec<Value> {
        self.function_result_as(t, None, depth)
    }

    /// What the function or method `t` returns; with `receiver`, called on that class (or an
    /// instance of it), which inherits it: `self` and `cls` are then the receiver's, as at run
    /// time (a returned `cls()` or `self`, and `self.m()` dispatched to the receiver's override),
    /// while `super()` and private `__names` stay the defining class's (see [`SelfClass`]).
    pub(super) fn function_result_as(&self, t: &Target, receiver: Option<&Target>, depth: u32) -> Vec<Value> {
        let Some(summary) = self.summary_for(&t.module, &t.path) else {
            return Vec::new();
        };
        let Some(f) = summary.function(&t.path) else {
            return Vec::new();
        };
        let self_class = t.owner().map(|owner| SelfClass {
            receiver: receiver.cloned().unwrap_or_else(|| owner.clone()),
            defined_in: owner,
            on_class: receives_class(own_name(&t.path), self.method_flags(t)),
        });
        let mut out = Vec::new();
        for r in &f.returns {
            extend(&mut out, self.eval_closed(r, &t.module, self_class.as_ref(), depth + 1));
        }
        // A lambda returned by a function of this file (summaries leave lambdas out).
        if *t.module == *self.module
            && let Some(body) = self.defs_by_path.get(&*t.path).and_then(|&d| self.syntax.def(d).body)
        {
            for r in self.syntax.scope(body).returns.iter() {
                if let Expr::Lambda(l) = r {
                    push(&mut out, Value::Lambda(*l));
                }
            }
        }
        // The inferred values win when they say something about the code; the return
        // annotation fills in when they do not (`return unknown_ext()`, `return None`).
        if let Some(annotation) = &f.annotation {
            let promised = self.eval_closed(annotation, &t.module, self_class.as_ref(), depth + 1);
            if !names_repo_value(&out) {
                prefer_promised(&mut out, promised);
            } else {
                // A promised class no inferred instance belongs to (`-> Group` where the values
                // seen are `Command`s: the `Group` passed in as `cls` came from another file) is
                // added: the values found are not all there is.
                for p in promised {
                    if let Value::Instance(class) = &p
                        && !out.iter().any(|v| matches!(v, Value::Instance(t) if self.is_subclass(t, class, depth)))
                    {
                        push(&mut out, p);
                    }
                }
            }
        }
        out
    }

    /// Whether `class` is `base` or inherits from it.
    pub(super) fn is_subclass(&self, class: &Target, base: &Target, depth: u32) -> bool {
        class == base || self.mro(class, depth + 1).iter().any(|e| matches!(e, MroEntry::Class(c) if c == base))
    }

    /// What `base.attr(...)` returns, where `bases` are the values of `base` (evaluated at
    /// `depth + 2`, as the callee's evaluation would), `call_properties` says whether a
    /// property read on an instance gives its getter's result (as in this file's code), and
    /// `lookup_in` is the class to look a private `__name` up on (the one whose code calls it).
    ///
    /// A method defined by a base and looked up on a subclass (or its instance, or through
    /// `super()` in one) returns what it returns for the subclass: `Engine.build()`, with `build`
    /// a base's classmethod returning `cls()`, is an `Engine`, `engine.configure()` returning
    /// `self` is the engine, and a base's `return self.request()` reaches the subclass's
    /// `request`. They were the base's, so the next call reached the base's method, not the
    /// subclass's override. Only for a method the
    /// lookup found in a class body (not a callable an instance attribute or a property holds,
    /// whose `self` is another object), a classmethod when the receiver is a class (an instance
    /// method called on a class gets its `self` as an argument), never a staticmethod.
    pub(super) fn method_call_result(
        &self,
        bases: &[Value],
        attr: &str,
        call_properties: bool,
        lookup_in: Option<&Target>,
        depth: u32,
    ) -> Vec<Value> {
        let mut out = Vec::new();
        for b in bases {
            let (receiver, on_class) = match b {
                Value::Class(k) => (Some(k), true),
                Value::Instance(k) | Value::Super(_, k, false) => (Some(k), false),
                Value::Super(_, k, true) => (Some(k), true),
                _ => (None, false),
            };
            // A private name is looked up on the class whose code reads it (`lookup_in`).
            let looked_up = match (b, lookup_in) {
                (Value::Class(_), Some(class)) => Value::Class(class.clone()),
                (Value::Instance(_), Some(class)) => Value::Instance(class.clone()),
                _ => b.clone(),
            };
            let property_receiver = property_receiver(b).filter(|_| call_properties);
            for raw in self.attr_of(&looked_up, attr, depth + 2) {
                if let (Value::Var(var), Some(receiver)) = (&raw, &property_receiver) {
                    let made = self.made_properties(var, depth + 2);
                    if !made.is_empty() {
                        for m in made {
                            for c in self.made_property_value(&m, receiver, depth + 2) {
                                extend(&mut out, self.call_result(&c, depth + 1));
                            }
                        }
                        continue;
                    }
                }
                // A method of a class body is a `Function`; an attribute's value comes as `Var`.
                let from_class_body = matches!(raw, Value::Function(_));
                for v in self.deref(vec![raw], depth + 1) {
                    let property = match (&v, &property_receiver) {
                        (Value::Function(t), Some(receiver)) if self.method_flags(t).is_property => Some(receiver),
                        _ => None,
                    };
                    if let Some(receiver) = property {
                        for c in self.result_on_instance(&v, receiver, depth + 2) {
                            extend(&mut out, self.call_result(&c, depth + 1));
                        }
                        continue;
                    }
                    match (&v, receiver) {
                        (Value::Function(t), Some(k))
                            if from_class_body && self.dispatches_on(t, k, on_class, depth + 1) =>
                        {
                            extend(&mut out, self.call_result_on(t, k, depth + 1));
                        }
                        _ => extend(&mut out, self.call_result(&v, depth + 1)),
                    }
                }
            }
        }
        out
    }

    /// Whether the method `t`, looked up on `class` (itself, or an instance of it when
    /// `!on_class`), runs with `self` or `cls` the receiver's: `t` is inherited (defined by a
    /// class `class` inherits from) and binds its first parameter to the receiver (a
    /// classmethod, or an instance method on an instance; not a staticmethod or a property).
    pub(super) fn dispatches_on(&self, t: &Target, class: &Target, on_class: bool, depth: u32) -> bool {
        let flags = self.method_flags(t);
        !(flags.is_static || flags.is_property || (on_class && !flags.is_class)) && self.is_inherited(t, class, depth)
    }

    /// What calling `method` on `instance` returns (a property's getter, `__iter__`): its result,
    /// evaluated for the instance's class when that class inherits the method (`@property def
    /// form(self): return self.get_form()` reaches the subclass's `get_form`; an inherited
    /// `__iter__` returning `self` gives the subclass's instance).
    pub(super) fn result_on_instance(&self, method: &Value, instance: &Value, depth: u32) -> Vec<Value> {
        match (method, instance) {
            (Value::Function(t), Value::Instance(k)) if self.is_inherited(t, k, depth) => {
                self.call_result_on(t, k, depth)
            }
            _ => self.call_result(method, depth),
        }
    }

    /// What reading a made property or a descriptor on an instance gives: what its getter
    /// returns, a descriptor's `__get__` called on the descriptor (of its own class when the
    /// method is inherited).
    pub(super) fn made_property_value(&self, made: &MadeProperty, receiver: &Value, depth: u32) -> Vec<Value> {
        let on = made.descriptor.clone().map_or_else(|| receiver.clone(), Value::Instance);
        self.result_on_instance(&Value::Function(made.getter.clone()), &on, depth)
    }

    /// What reading the class attribute `var` (the value `raw`) on the class object gives when it
    /// holds descriptors: their `__get__`s, called, and the value: the descriptor itself (the
    /// instance, not the attribute's other values) when a `__get__` may return it (`if obj is
    /// None: return self`, its instance branches not being told apart), else what they return
    /// (`ManagerDescriptor.__get__` returns the manager). None for other attributes.
    pub(super) fn class_read(&self, var: &Target, raw: &Value, depth: u32) -> Option<(Vec<Target>, Vec<Value>)> {
        let descriptors = self.class_body_descriptors(var, depth + 1);
        if descriptors.is_empty() {
            return None;
        }
        let mut values = Vec::new();
        for m in &descriptors {
            let result = self.made_property_value(m, raw, depth + 1);
            // `self` of an inherited `__get__` reads as its defining class once a method has
            // been evaluated for too many receivers (see `call_result_on`).
            let own = m.getter.owner();
            let returns_itself = result.iter().any(
                |r| matches!(r, Value::Instance(c) if m.descriptor.as_ref() == Some(c) || own.as_ref() == Some(c)),
            );
            match (&m.descriptor, returns_itself) {
                (Some(d), true) => push(&mut values, Value::Instance(d.clone())),
                _ => extend(&mut values, result),
            }
        }
        Some((descriptors.into_iter().map(|m| m.getter).collect(), values))
    }

    /// Whether the method `t` is defined by a class that `class` inherits from (not `class`).
    pub(super) fn is_inherited(&self, t: &Target, class: &Target, depth: u32) -> bool {
        let Some(owner) = t.owner() else { return false };
        owner != *class
            && self.mro(class, depth + 1).iter().any(|entry| matches!(entry, MroEntry::Class(c) if *c == owner))
    }

    /// What the method `t`, inherited by `class`, returns when called on it (or its instance).
    pub(super) fn call_result_on(&self, t: &Target, class: &Target, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        // Past a few receivers, the method's own result: a base whose methods call each other
        // was walked again for every subclass (50 subclasses of a 7-method base took 1.8 s and
        // hit the step budget, where the method's own result takes 0.03 s).
        {
            let mut receivers = self.receivers_of.borrow_mut();
            let seen = receivers.entry(t.clone()).or_default();
            if !seen.contains(class) {
                if seen.len() >= MAX_RECEIVERS {
                    drop(receivers);
                    return self.call_result(&Value::Function(t.clone()), depth);
                }
                seen.insert(class.clone());
            }
        }
        self.memoised(&self.call_results, CallKey::ResultOn(t.clone(), class.clone()), || {
            self.function_result_as(t, Some(class), depth)
        })
    }

    /// The values a call of `callee` returns.
    pub(super) fn call_result(&self, callee: &Value, depth: u32) -> Vec<Value> {
        if self.too_deep(depth) {
            return Vec::new();
        }
        match callee {
            Value::Class(t) => vec![Value::Instance(t.clone())],
            Value::Function(t) | Value::Undecorated(t) => {
                self.memoised(&self.call_results, CallKey::Result(t.clone()), || self.function_result(t, depth))
            }
            Value::Instance(t) => {
                let mut out = Vec::new();
                for c in self.deref(self.instance_attr(t, "__call__", depth + 1), depth) {
                    extend(&mut out, self.call_result(&c, depth + 1));
                }
                out
            }
            Value::External(x) => external_call_result(x).into_iter().collect(),
            Value::Lambda(scope) => {
                let mut out = Vec::new();
                for r in &self.syntax.scope(*scope).returns {
                    extend(&mut out, self.eval_local(r, *scope, depth + 1));
                }
                out
            }
            _ => Vec::new(),
        }
    }
}
