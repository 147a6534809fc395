//! Special methods Python calls without a call of them in the source: `obj[k]` calls the
//! `__getitem__` of `obj`'s class, `x in obj` its `__contains__`, `len(obj)` its `__len__`.
//! Changing such a method changes what those lines do, so they are its callers.
//! Operators too: `a + b` calls `__add__` (or `b`'s `__radd__`). (The iterator and
//! context-manager protocols of `for` and `with` are in `graph.rs`.)

use super::*;

/// The builtins that call one special method of their argument, how many positional arguments
/// the call must have for that, and the methods, the first the one called and the others what
/// Python falls back to when the class has none of the ones before (`str(obj)` of a class
/// without `__str__` calls its `__repr__`). `iter(f, sentinel)` calls `f`, and `str(b,
/// "utf-8")` decodes: only the one-argument forms of those.
const PROTOCOL_BUILTINS: &[(&str, usize, usize, &[&str])] = &[
    ("builtins.len", 1, 1, &["__len__"]),
    ("builtins.iter", 1, 1, &["__iter__"]),
    ("builtins.next", 1, 2, &["__next__"]),
    ("builtins.aiter", 1, 1, &["__aiter__"]),
    ("builtins.anext", 1, 2, &["__anext__"]),
    ("builtins.reversed", 1, 1, &["__reversed__", "__len__"]),
    ("builtins.hash", 1, 1, &["__hash__"]),
    ("builtins.repr", 1, 1, &["__repr__"]),
    ("builtins.str", 1, 1, &["__str__", "__repr__"]),
    ("builtins.bool", 1, 1, &["__bool__", "__len__"]),
    ("builtins.abs", 1, 1, &["__abs__"]),
    ("builtins.format", 1, 2, &["__format__"]),
    ("builtins.bytes", 1, 1, &["__bytes__"]),
    ("builtins.int", 1, 1, &["__int__", "__index__"]),
    ("builtins.float", 1, 1, &["__float__", "__index__"]),
    ("builtins.complex", 1, 1, &["__complex__", "__float__", "__index__"]),
    ("builtins.round", 1, 2, &["__round__"]),
    ("builtins.dir", 1, 1, &["__dir__"]),
];

/// When `values` (what a call's callee is) is one of [`PROTOCOL_BUILTINS`] called with the
/// arguments it needs: the special methods it calls and the argument they are called on.
pub(super) fn protocol_builtin<'c>(
    values: &[Value],
    call: &'c CallSite,
) -> Option<(&'static [&'static str], &'c Expr)> {
    let [Value::External(x)] = values else { return None };
    let &(_, min, max, methods) = PROTOCOL_BUILTINS.iter().find(|(name, ..)| *name == &**x)?;
    // Keyword arguments (`str(b, encoding="utf-8")`, `int(s, base=2)`) change what the call
    // does, and a `*splat` may pass any number of arguments.
    let (positional, keywords) = call.written?;
    let arity_known = keywords == 0 && (min..=max).contains(&usize::from(positional));
    arity_known.then(|| call.args.first()).flatten().map(|arg| (methods, arg))
}

/// How a builtin goes through an iterable argument.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Consumed {
    /// To its end: `__iter__`, then `__next__` (or, without `__iter__`, `__getitem__`), asking
    /// first for a length to size what it builds (`__len__`, else `__length_hint__`).
    Whole { length_hint: LengthHint },
    /// Lazily: only `__iter__` when called (`enumerate`, `zip`, `map`, `filter`).
    Lazily,
}

/// What a method's callee is read on (see [`iterated_arguments`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Receiver {
    Class,
    Instance,
    Unknown,
}

/// Whose length a builtin consuming an iterable asks for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum LengthHint {
    None,
    /// The argument's (`list(obj)`).
    OfArgument,
    /// The iterator's its `__iter__` returns (`", ".join(obj)`, which copies that iterator
    /// into a list, calling its `__iter__` as well).
    OfIterator,
}

/// The builtins that iterate an argument, checked against CPython 3.11: `list(obj)` calls
/// `obj`'s `__iter__`, `__len__` and `__next__` (`", ".join(obj)` asks the iterator's length),
/// `set(obj)` `__iter__` and `__next__`, `enumerate(obj)` only `__iter__`. With a `*` or `**`
/// argument the positions are not known. `receiver`: for a method (`",".join`, `str.join`),
/// asked only then, whether it is called on a class (the unbound form, whose first argument is
/// the receiver), on an instance, or is not known (an alias `j = str.join`: nothing is taken).
pub(super) fn iterated_arguments<'c>(
    values: &[Value],
    call: &'c CallSite,
    receiver: impl FnOnce() -> Receiver,
) -> Vec<(&'c Expr, Consumed, bool)> {
    let [Value::External(x)] = values else { return Vec::new() };
    let Some((positional, _)) = call.written else { return Vec::new() };
    let mut args = &call.args[..usize::from(positional).min(call.args.len())];
    // `dict.fromkeys` is a class method: it has no receiver among its arguments.
    let is_method = x.strip_prefix("builtins.").is_some_and(|m| m.contains('.')) && &**x != "builtins.dict.fromkeys";
    if is_method {
        match receiver() {
            Receiver::Class => args = args.get(1..).unwrap_or_default(),
            Receiver::Instance => {}
            Receiver::Unknown => return Vec::new(),
        }
    }
    let first = args.get(..1).unwrap_or_default();
    let whole = |length_hint| Consumed::Whole { length_hint };
    // The last: whether the consumer copies a set or frozenset (of a subclass too) without
    // iterating it, as CPython's `set()`, `frozenset()` and `set.update` do (`dict.fromkeys`
    // only an exact set).
    let (chosen, how, copies_sets): (&[Expr], Consumed, bool) = match &**x {
        "builtins.list" | "builtins.tuple" | "builtins.sorted" | "builtins.list.extend" => {
            (first, whole(LengthHint::OfArgument), false)
        }
        "builtins.str.join" | "builtins.bytes.join" => (first, whole(LengthHint::OfIterator), false),
        "builtins.set" | "builtins.frozenset" => (first, whole(LengthHint::None), true),
        "builtins.set.update" => (args, whole(LengthHint::None), true),
        "builtins.sum" | "builtins.any" | "builtins.all" | "builtins.dict.fromkeys" | "collections.deque" => {
            (first, whole(LengthHint::None), false)
        }
        // `min(a, b)` compares its arguments; `min(items)` iterates.
        "builtins.min" | "builtins.max" if args.len() == 1 => (args, whole(LengthHint::None), false),
        "builtins.enumerate" => (first, Consumed::Lazily, false),
        "builtins.zip" => (args, Consumed::Lazily, false),
        "builtins.map" => (args.get(1..).unwrap_or_default(), Consumed::Lazily, false),
        "builtins.filter" => (args.get(1..2).unwrap_or_default(), Consumed::Lazily, false),
        _ => return Vec::new(),
    };
    chosen.iter().map(|a| (a, how, copies_sets)).collect()
}

impl<'a> Resolver<'a> {
    /// What a call's callee is read on: `",".join` an instance, `str.join` a class; a callee
    /// that is no attribute (an alias) is not known.
    pub(super) fn callee_receiver(&self, callee: &Expr, scope: ScopeId) -> Receiver {
        let Expr::Attr(base, _) = callee else { return Receiver::Unknown };
        let values = self.eval_local(base, scope, 0);
        if values.is_empty() {
            Receiver::Unknown
        } else if values.iter().all(|v| matches!(v, Value::Class(_) | Value::External(_) | Value::Super(_, _, true))) {
            Receiver::Class
        } else if values
            .iter()
            .all(|v| matches!(v, Value::Instance(_) | Value::ExternalInstance(_) | Value::Super(_, _, false)))
        {
            Receiver::Instance
        } else {
            Receiver::Unknown
        }
    }

    /// The repository methods consuming `values` calls (see [`Consumed`]); with `copies_sets`,
    /// none of a set's or frozenset's (see [`iterated_arguments`]).
    pub(super) fn consuming_calls(&self, values: &[Value], how: Consumed, copies_sets: bool) -> Vec<Value> {
        let mut values = self.classes_as_metaclass_instances(values, 0);
        if copies_sets {
            values.retain(|v| {
                !matches!(v, Value::Instance(t) if self.mro(t, 1).iter().any(|e| {
                    matches!(e, MroEntry::External(x) if matches!(&**x,
                        "builtins.set" | "builtins.frozenset" | "typing.Set" | "typing.FrozenSet"))
                }))
            });
        }
        let functions = |targets: Vec<Target>| targets.into_iter().map(Value::Function).collect::<Vec<_>>();
        let hinted = ["__len__", "__length_hint__"];
        let mut out = Vec::new();
        match how {
            Consumed::Lazily => return functions(self.special_methods(&values, &["__iter__"])),
            Consumed::Whole { length_hint: LengthHint::None } => {}
            Consumed::Whole { length_hint: LengthHint::OfArgument } => {
                out = functions(self.special_methods(&values, &hinted))
            }
            Consumed::Whole { length_hint: LengthHint::OfIterator } => {
                for v in &values {
                    let Value::Instance(t) = v else { continue };
                    for iter in self.deref(self.class_attr(t, "__iter__", None, 1), 1) {
                        if !matches!(iter, Value::Function(_)) {
                            continue;
                        }
                        let iterators = self.result_on_instance(&iter, v, 1);
                        // The join copies the iterator into a list: its `__iter__` too.
                        extend(&mut out, functions(self.special_methods(&iterators, &["__iter__"])));
                        extend(&mut out, functions(self.special_methods(&iterators, &hinted)));
                    }
                }
            }
        }
        extend(&mut out, self.iterate_instances(&values, false, 0).0);
        out
    }

    /// The repository methods Python calls for the special method `methods[0]` on the
    /// instances among `values`: the class's own or inherited one, or else the first of the
    /// fallbacks in `methods[1..]` it has. A fallback counts only when every base of the class
    /// is known (an external base may define the method itself).
    pub(super) fn special_methods(&self, values: &[Value], methods: &[&str]) -> Vec<Target> {
        let mut out: Vec<Target> = Vec::new();
        for v in &self.classes_as_metaclass_instances(values, 1) {
            let Value::Instance(t) = v else { continue };
            if methods.first() == Some(&"__hash__") && self.hash_disabled(t) {
                continue;
            }
            for (i, name) in methods.iter().enumerate() {
                // `reversed(obj)` without `__reversed__` needs `__len__` and `__getitem__` both.
                let usable = !(i > 0
                    && methods[0] == "__reversed__"
                    && self.deref(self.class_attr(t, "__getitem__", None, 1), 1).is_empty());
                let found = if usable { self.deref(self.class_attr(t, name, None, 1), 1) } else { Vec::new() };
                if found.is_empty() {
                    if i == 0 && !self.bases_all_known(t, 1) {
                        break;
                    }
                    continue;
                }
                for m in found {
                    if let Value::Function(f) = m
                        && !out.contains(&f)
                    {
                        out.push(f);
                    }
                }
                break;
            }
        }
        out
    }

    /// Whether instances of `class` are unhashable because a class of its MRO defines `__eq__`
    /// without `__hash__` before any defines `__hash__` (Python sets `__hash__ = None` there).
    fn hash_disabled(&self, class: &Target) -> bool {
        for entry in self.mro(class, 1).iter() {
            let MroEntry::Class(c) = entry else { return false };
            let (eq, hash) = self
                .with_class(c, |k| (k.member("__eq__").is_some(), k.member("__hash__").is_some()))
                .unwrap_or((false, false));
            if hash {
                return false;
            }
            if eq {
                return true;
            }
        }
        false
    }

    /// The repository methods an operator (see [`OperatorUse`]) calls: the left operand's
    /// method (for `+=`, `__iadd__`, else `__add__`); when the left operand gives none, the right
    /// operand's reflected one. `"..." % obj` formats: `str` and `bytes` answer `%` for any
    /// right operand, whose `__rmod__` is not called unless its class is a subclass of the
    /// left's with one of its own.
    pub(super) fn operator_targets(&self, op: &OperatorUse, scope: ScopeId) -> Vec<Target> {
        // The result of an operator before (`a + b` in `a + b + c`): what it is is not known,
        // and nothing says its class lacks the method; no reflected method is taken for it.
        if op.left == Expr::Unknown {
            return Vec::new();
        }
        let left = self.eval_local(&op.left, scope, 0);
        let binary = binary_of_inplace(op.method);
        let mut methods = vec![op.method];
        methods.extend(binary);
        // `a != b` of a class with `__eq__` and no `__ne__`: `object.__ne__` calls `__eq__`.
        if op.method == "__ne__" {
            methods.push("__eq__");
        }
        // Each value the left operand may be answers or not: an instance whose class has the
        // method (for `a += b`, `__iadd__` answers alone: only its `NotImplemented` would lead
        // on), or anything else, which leaves the right operand's reflected method to Python.
        let mut found: Vec<Target> = Vec::new();
        let mut some_left_silent = left.is_empty();
        // Whether every value answered with its in-place method (nothing reflected then).
        let mut all_inplace = binary.is_some() && !left.is_empty();
        for v in &left {
            let answered = match binary {
                // Answered by a builtin in-place method: no repository method, nothing reflected
                // (`all_inplace` stays as it is).
                Some(_) if self.builtin_inplace_answers(v, op.method) => continue,
                Some(_) => {
                    let inplace = self.special_methods(std::slice::from_ref(v), &[op.method]);
                    all_inplace &= !inplace.is_empty();
                    if inplace.is_empty() {
                        let fallback = self.special_methods(std::slice::from_ref(v), &methods[1..]);
                        some_left_silent |= fallback.is_empty();
                        fallback
                    } else {
                        inplace
                    }
                }
                None => {
                    let m = self.special_methods(std::slice::from_ref(v), &methods);
                    some_left_silent |= m.is_empty();
                    m
                }
            };
            for m in answered {
                if !found.contains(&m) {
                    found.push(m);
                }
            }
        }
        if all_inplace {
            return found;
        }
        let Some(reflected) = reflected_operator_method(binary.unwrap_or(op.method)) else { return found };
        if op.right == Expr::Unknown {
            return found;
        }
        const FORMATTING: &[&str] = &["builtins.str", "builtins.bytes", "builtins.bytearray"];
        let formats = reflected == "__rmod__"
            && left.iter().any(|v| match v {
                Value::ExternalInstance(x) => FORMATTING.contains(&&**x),
                // A subclass of `str` without a `__mod__` of its own formats as `str` does.
                Value::Instance(class) => self.deref(self.class_attr(class, "__mod__", None, 1), 1).iter().any(
                    |m| matches!(m, Value::External(x) if x.strip_suffix(".__mod__").is_some_and(|t| FORMATTING.contains(&t))),
                ),
                _ => false,
            });
        let left_classes: Vec<&Target> =
            left.iter().filter_map(|v| if let Value::Instance(t) = v { Some(t) } else { None }).collect();
        let comparison = matches!(op.method, "__lt__" | "__le__" | "__gt__" | "__ge__" | "__eq__" | "__ne__");
        let right = self.eval_local(&op.right, scope, 0);
        let mut reflected_methods = vec![reflected];
        if reflected == "__ne__" {
            reflected_methods.push("__eq__");
        }
        // Whether every value of the left operand answered, before any reflected method is
        // added. A string formats whatever the right operand is.
        let left_found = !some_left_silent || formats;
        let only_class = |class: &Target| left.iter().all(|v| matches!(v, Value::Instance(l) if l == class));
        for r in &right {
            let Value::Instance(r_class) = r else { continue };
            // Arithmetic between two instances of one class never reflects (`r + r` with
            // only `__radd__` is a TypeError); comparisons do.
            if !comparison && !left.is_empty() && only_class(r_class) {
                continue;
            }
            // A subclass of the left's class goes first: for arithmetic when it overrides the
            // reflected method (`"%s" % Markup(...)` with `Markup(str)`'s own `__rmod__`), for
            // comparisons always.
            let subclass = left.iter().any(|l| match l {
                Value::Instance(l_class) => l_class != r_class && self.is_subclass(r_class, l_class, 1),
                Value::ExternalInstance(x) => {
                    self.mro(r_class, 1).iter().any(|e| matches!(e, MroEntry::External(b) if b == x))
                }
                _ => false,
            });
            if left_found && !subclass {
                continue;
            }
            for m in self.special_methods(std::slice::from_ref(r), &reflected_methods) {
                let inherited_from_left =
                    m.owner().is_some_and(|o| left_classes.iter().any(|l| self.is_subclass(l, &o, 1)));
                if (!left_found || comparison || !inherited_from_left) && !found.contains(&m) {
                    found.push(m);
                }
            }
        }
        found
    }

    /// Whether `value` answers the in-place operator `method` with a builtin method that takes
    /// any right operand: `l += v` of a `list` subclass runs `list.__iadd__`, which extends by any
    /// iterable or raises, and never leaves `v.__radd__` to Python; so does `dict.__ior__`, of a
    /// plain `dict` too. (On a plain `list`, CPython tries the numeric slots first, so
    /// `v.__radd__` does answer.)
    fn builtin_inplace_answers(&self, value: &Value, method: &str) -> bool {
        const ANSWER_ALONE: &[&str] =
            &["builtins.list.__iadd__", "builtins.dict.__ior__", "builtins.bytearray.__iadd__"];
        match value {
            Value::Instance(class) => self
                .deref(self.class_attr(class, method, None, 1), 1)
                .iter()
                .any(|m| matches!(m, Value::External(x) if ANSWER_ALONE.contains(&&**x))),
            // A plain `dict`'s `|=` updates from any mapping or raises, as a subclass's does.
            Value::ExternalInstance(x) => &**x == "builtins.dict" && method == "__ior__",
            _ => false,
        }
    }

    /// The repository methods an implicit call (see [`ImplicitCall`]) on `values` reaches. A
    /// class without `__contains__` answers `in` by iterating (`__iter__`, or `__getitem__`); one
    /// without `__bool__` answers a truth test with `__len__`.
    pub(super) fn implicit_call_targets(&self, values: &[Value], call: ImplicitCall) -> Vec<Target> {
        if call == ImplicitCall::Truth {
            return self.special_methods(values, &["__bool__", "__len__"]);
        }
        let mut out = self.special_methods(values, &[call.method()]);
        if call != ImplicitCall::Contains {
            return out;
        }
        for v in values {
            let Value::Instance(t) = v else { continue };
            if !self.class_attr(t, "__contains__", None, 1).is_empty() || !self.bases_all_known(t, 1) {
                continue;
            }
            let (methods, _) = self.iterate_instances(std::slice::from_ref(v), false, 0);
            for m in methods {
                if let Value::Function(f) = m
                    && !out.contains(&f)
                {
                    out.push(f);
                }
            }
        }
        out
    }
}
