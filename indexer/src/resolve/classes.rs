//! Classes: their summaries, the C3 method resolution order, what an attribute of a class or
//! of its instances is (declared members, properties, enum members), and the flags of methods.

use super::*;

/// Builtin classes an instance of which is an instance of no other builtin of the list (but
/// `bool` of `int`) and of no class of the repository without a base outside it: what an
/// `isinstance` test naming one can rule out (see [`Resolver::narrowed`]).
pub(super) const CONCRETE_BUILTINS: [&str; 12] = [
    "builtins.str",
    "builtins.bytes",
    "builtins.bytearray",
    "builtins.int",
    "builtins.float",
    "builtins.complex",
    "builtins.bool",
    "builtins.list",
    "builtins.tuple",
    "builtins.dict",
    "builtins.set",
    "builtins.frozenset",
];

/// Classes outside the repository an instance of which nothing rules out by its bases:
/// abstract bases and protocols, which a class satisfies by defining methods (or by
/// registration), and `typing`'s names.
fn is_structural(class: &str) -> bool {
    ["collections.abc.", "typing.", "typing_extensions.", "abc.", "numbers."].iter().any(|p| class.starts_with(p))
        && generic_alias(class).is_none()
}

/// The builtin a `typing` generic alias stands for (`typing.Dict` for `dict`).
fn generic_alias(class: &str) -> Option<&'static str> {
    Some(match class {
        "typing.Dict" | "typing.DefaultDict" => "builtins.dict",
        "typing.List" => "builtins.list",
        "typing.Tuple" | "typing.NamedTuple" => "builtins.tuple",
        "typing.Set" => "builtins.set",
        "typing.FrozenSet" => "builtins.frozenset",
        "typing.Text" => "builtins.str",
        _ => return None,
    })
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum MroEntry {
    Class(Target),
    External(Arc<str>),
}

/// C3 linearisation (Python's MRO): `head`, then a merge of `lists` (each base's MRO, then the
/// direct bases in order). An inconsistent hierarchy, which CPython refuses, gets what was merged
/// so far and then the lists depth-first, left to right, without repeats.
///
/// Each list is consumed through a cursor and every entry's occurrences in the lists' tails are
/// counted, so a merge costs O(entries × lists) rather than O(entries² × lists): a chain of 1,600
/// subclasses took 27 s with the textbook merge.
pub(super) fn c3_merge(head: MroEntry, lists: &[Vec<MroEntry>]) -> Vec<MroEntry> {
    let mut result = vec![head];
    let mut cursors = vec![0usize; lists.len()];
    // How often each entry sits in a list after that list's cursor.
    let mut in_tails: FxHashMap<&MroEntry, usize> = FxHashMap::default();
    for list in lists {
        for entry in list.iter().skip(1) {
            *in_tails.entry(entry).or_default() += 1;
        }
    }
    loop {
        let heads = lists.iter().zip(&cursors).filter_map(|(list, &at)| list.get(at));
        let mut heads = heads.peekable();
        if heads.peek().is_none() {
            return result;
        }
        let candidate = heads.find(|head| in_tails.get(head).copied().unwrap_or(0) == 0).cloned();
        let Some(candidate) = candidate else {
            let mut seen: FxHashSet<&MroEntry> = result.iter().collect();
            let mut rest = Vec::new();
            for entry in lists.iter().flatten() {
                if seen.insert(entry) {
                    rest.push(entry.clone());
                }
            }
            result.extend(rest);
            return result;
        };
        for (list, at) in lists.iter().zip(cursors.iter_mut()) {
            if list.get(*at) == Some(&candidate) {
                *at += 1;
                if let Some(next_head) = list.get(*at)
                    && let Some(count) = in_tails.get_mut(next_head)
                {
                    *count -= 1;
                }
            }
        }
        result.push(candidate);
    }
}

impl<'a> Resolver<'a> {
    pub(super) fn class_summary(&self, class: &Target) -> Option<(Arc<ModuleSummary>, usize)> {
        let summary = self.summary_for(&class.module, &class.path)?;
        let index = summary.classes.binary_search_by(|(p, _)| p.as_str().cmp(&class.path)).ok()?;
        Some((summary, index))
    }

    pub(super) fn with_class<R>(&self, class: &Target, f: impl FnOnce(&ClassSummary) -> R) -> Option<R> {
        let (summary, index) = self.class_summary(class)?;
        Some(f(&summary.classes[index].1))
    }

    /// The C3 linearisation of a class (itself first); falls back to depth-first order when the
    /// hierarchy is inconsistent.
    pub(super) fn mro(&self, class: &Target, depth: u32) -> Arc<Vec<MroEntry>> {
        if let Some(hit) = self.mros.borrow().get(class) {
            return hit.clone();
        }
        self.mros.borrow_mut().insert(class.clone(), Arc::new(vec![MroEntry::Class(class.clone())]));
        let cuts_before = self.cuts.get();
        let bases = self.with_class(class, |c| c.bases.clone()).unwrap_or_default();
        let mut base_lists: Vec<Vec<MroEntry>> = Vec::new();
        let mut direct: Vec<MroEntry> = Vec::new();
        if !self.too_deep(depth + 1) {
            for base in &bases {
                for v in self.eval_closed(base, &class.module, None, depth + 1) {
                    match v {
                        Value::Class(t) if t != *class => {
                            base_lists.push(self.mro(&t, depth + 1).as_ref().clone());
                            direct.push(MroEntry::Class(t));
                        }
                        Value::External(x) if &*x != "builtins.object" => {
                            base_lists.push(vec![MroEntry::External(x.clone())]);
                            direct.push(MroEntry::External(x));
                        }
                        _ => {}
                    }
                }
            }
        }
        base_lists.push(direct);
        let result = c3_merge(MroEntry::Class(class.clone()), &base_lists);
        let result = Arc::new(result);
        if self.cuts.get() == cuts_before {
            self.mros.borrow_mut().insert(class.clone(), result.clone());
        } else {
            self.mros.borrow_mut().remove(class);
        }
        result
    }

    /// What a name declared with an annotation holds (`iface: Base = Derived()`): what the
    /// annotation promises, and where that names a repository class, also the assigned values
    /// that are instances (classes, for `type[Base]`) of a subclass of a promised class: calls
    /// then reach `Derived`'s methods, which are what runs, as well as `Base`'s, which other
    /// assignments of any `Base` may run. An annotation naming no repository class (a proxy's
    /// `LocalProxy`, `int`) gives way to the assigned values, and fills in when they say
    /// nothing (`x: bytes = d["k"]`: `x.decode()` is `bytes.decode`).
    pub(super) fn declared(
        &self,
        promised: Vec<Value>,
        assigned: impl FnOnce() -> Vec<Value>,
        depth: u32,
    ) -> Vec<Value> {
        if !names_repo_class(&promised) {
            let values = assigned();
            return if values.is_empty() { promised } else { values };
        }
        let mut out = promised;
        let promised_classes: Vec<(Target, bool)> = out
            .iter()
            .filter_map(|v| match v {
                Value::Instance(t) => Some((t.clone(), true)),
                Value::Class(t) => Some((t.clone(), false)),
                _ => None,
            })
            .collect();
        for v in assigned() {
            let (t, instance) = match &v {
                Value::Instance(t) => (t, true),
                Value::Class(t) => (t, false),
                _ => continue,
            };
            let refines = promised_classes
                .iter()
                .any(|(p, p_instance)| *p_instance == instance && p != t && self.is_subclass(t, p, depth));
            if refines {
                push(&mut out, v);
            }
        }
        out
    }

    /// What a value read where `isinstance(value, T)` holds is ([`Expr::Narrowed`]). For a T of
    /// the repository: the instances (classes) T's evaluation `promised`, with the values that
    /// are instances of T's subclasses (as an annotation's, see [`Resolver::declared`]). A T
    /// outside the repository is known by name only, not by its bases, so a value is left out
    /// only when it cannot be a T (see [`Resolver::may_be_instance`]), and `None` always. T's own
    /// instance is added unless a class of the repository that may be one is among what is left:
    /// a method its subclass defines is not looked for on T (`builtins.Exception.detail` would
    /// be invented). A tuple of both kinds (`(str, Token)`) is the union of both. A T nothing
    /// resolves leaves the values as they are.
    pub(super) fn narrowed(
        &self,
        promised: Vec<Value>,
        assigned: impl FnOnce() -> Vec<Value>,
        depth: u32,
    ) -> Vec<Value> {
        if promised.is_empty() {
            return assigned();
        }
        let (repo, outside): (Vec<Value>, Vec<Value>) =
            promised.into_iter().partition(|p| matches!(p, Value::Instance(_) | Value::Class(_)));
        let values = assigned();
        let mut out = if repo.is_empty() { Vec::new() } else { self.declared(repo, || values.clone(), depth) };
        if outside.is_empty() {
            return out;
        }
        let is_none = |v: &Value| matches!(v, Value::ExternalInstance(x) if &**x == "builtins.NoneType");
        for v in values {
            if !is_none(&v) && outside.iter().any(|p| self.may_be_instance(&v, p, depth)) {
                push(&mut out, v);
            }
        }
        if !out.iter().any(|v| matches!(v, Value::Instance(_) | Value::Class(_))) {
            for p in outside {
                push(&mut out, p);
            }
        }
        out
    }

    /// Whether `value` may be an instance of `class`, a class outside the repository (an
    /// `isinstance` test's, as an instance `Value::ExternalInstance`): always for `object` and
    /// for abstract bases and protocols (`collections.abc.Iterable` holds any class defining
    /// `__iter__`); for `type`, any class. Otherwise a repository class may be one when a base
    /// of it outside the repository is `class`, or may be a subclass of it: not another
    /// concrete builtin (Python allows no class two builtin layouts), not a builtin other than
    /// `class` when `class` is a concrete builtin, not an abstract base or a `typing` generic
    /// other than `class`'s alias (`typing.Dict` is `dict`). An instance of a class outside the
    /// repository may be one when it is of `class` (or `bool` for `int`), or, for a `class`
    /// that is no concrete builtin, when it is not of one.
    pub(super) fn may_be_instance(&self, value: &Value, class: &Value, depth: u32) -> bool {
        let (Value::ExternalInstance(class) | Value::External(class)) = class else { return false };
        let class: &str = class;
        if class == "builtins.object" || is_structural(class) {
            return true;
        }
        if class == "builtins.type" {
            return matches!(value, Value::Class(_) | Value::External(_));
        }
        let concrete = CONCRETE_BUILTINS.contains(&class);
        let same = |x: &str| {
            x == class || (x == "builtins.bool" && class == "builtins.int") || generic_alias(x) == Some(class)
        };
        match value {
            Value::Instance(t) => self.mro(t, depth + 1).iter().any(|e| match e {
                MroEntry::External(base) => {
                    let base: &str = base;
                    same(base)
                        || !(CONCRETE_BUILTINS.contains(&base)
                            || (concrete && base.starts_with("builtins."))
                            || is_structural(base)
                            || generic_alias(base).is_some()
                            || base == "builtins.object")
                }
                MroEntry::Class(_) => false,
            }),
            Value::ExternalInstance(x) => same(x) || !(concrete || CONCRETE_BUILTINS.contains(&&**x)),
            _ => false,
        }
    }

    /// What a value read where `isinstance(value, T)` was found false is ([`Expr::NotInstance`]):
    /// the values less the instances (classes) of T and its subclasses. A T nothing resolves
    /// removes nothing.
    pub(super) fn not_instance(&self, excluded: Vec<Value>, values: Vec<Value>, depth: u32) -> Vec<Value> {
        if excluded.is_empty() {
            return values;
        }
        values
            .into_iter()
            .filter(|v| {
                !excluded.iter().any(|x| match (x, v) {
                    (Value::Instance(base), Value::Instance(t)) | (Value::Class(base), Value::Class(t)) => {
                        self.is_subclass(t, base, depth)
                    }
                    (Value::ExternalInstance(name), Value::ExternalInstance(other))
                    | (Value::External(name), Value::External(other)) => name == other,
                    (Value::ExternalInstance(name), Value::Instance(t)) | (Value::External(name), Value::Class(t)) => {
                        self.mro(t, depth + 1).iter().any(|e| matches!(e, MroEntry::External(base) if base == name))
                    }
                    _ => false,
                })
            })
            .collect()
    }

    /// A position of an annotated tuple (`pair: Tuple[Base, str]`), given what any element of
    /// what callers pass is: a class of the code with the subclasses' instances among them (see
    /// [`Resolver::declared`]); a type outside the code (`str`) as it is, since the other
    /// positions' values are no evidence for this one; a position that says nothing (`Any`) is
    /// what any element is.
    pub(super) fn declared_position(
        &self,
        promised: Vec<Value>,
        any: impl FnOnce() -> Vec<Value>,
        depth: u32,
    ) -> Vec<Value> {
        if promised.is_empty() {
            any()
        } else if names_repo_class(&promised) {
            self.declared(promised, any, depth)
        } else {
            promised
        }
    }

    /// Looks `attr` up on a class through its MRO, skipping entries up to and including `after`.
    /// The dataclass whose generated `__init__` constructing `class` runs: the first class along
    /// its MRO with an `__init__` of its own is a dataclass without one in its body (external
    /// bases without an `__init__` of their own, `Generic` or `ABC`, are passed over).
    /// `@dataclass(init=False)` writes no `__init__`: lowering keeps that decorator as unknown, so
    /// such a class is no dataclass here.
    pub(super) fn generated_init(&self, class: &Target, depth: u32) -> Option<Target> {
        if self.too_deep(depth) {
            return None;
        }
        let mro = self.mro(class, depth + 1);
        for entry in mro.iter() {
            match entry {
                MroEntry::External(x) if !super::runs_external_init(&format!("{x}.__init__")) => continue,
                MroEntry::External(_) => return None,
                MroEntry::Class(c) => {
                    let (own_init, decorators) =
                        self.with_class(c, |cs| (cs.member("__init__").is_some(), cs.decorators.clone()))?;
                    if own_init {
                        return None;
                    }
                    if self.is_dataclass_decorator(&decorators, &c.module, depth + 1) {
                        return Some(c.clone());
                    }
                }
            }
        }
        None
    }

    /// The `__post_init__` constructing `class` calls: the generated `__init__` of `dataclass`
    /// calls it when the dataclass had one (its own or a base's) as it was decorated, on the
    /// instance made (a subclass's override runs).
    pub(super) fn post_init(&self, class: &Target, dataclass: &Target, depth: u32) -> Vec<Value> {
        if self.class_attr(dataclass, "__post_init__", None, depth + 1).is_empty() {
            return Vec::new();
        }
        self.deref(self.class_attr(class, "__post_init__", None, depth + 1), depth + 1)
    }

    /// Whether one of `decorators` (closed in `module`) is `dataclasses.dataclass`, bare or
    /// called (`@dataclass(frozen=True)`): every value the name may hold is it (a module that
    /// also defines its own `dataclass` leaves it unknown).
    fn is_dataclass_decorator(&self, decorators: &[Expr], module: &Arc<str>, depth: u32) -> bool {
        decorators.iter().any(|d| {
            let callee = match d {
                Expr::Call(callee) => callee.as_ref(),
                other => other,
            };
            let values = self.eval_closed(callee, module, None, depth + 1);
            !values.is_empty()
                && values.iter().all(|v| matches!(v, Value::External(x) if &**x == "dataclasses.dataclass"))
        })
    }

    /// Field `index` of an instance of `class` when it is a `typing.NamedTuple` class or derives
    /// from one: what unpacking the instance gives at that position (`text, style, control =
    /// segment`). The fields are the annotated names of the first class of the MRO with the
    /// named tuple base itself, and read there: a subclass's attribute of the same name is no
    /// field. `None` for any other class (or past the last field).
    pub(super) fn named_tuple_field(&self, class: &Target, index: u32, depth: u32) -> Option<Vec<Value>> {
        for entry in self.mro(class, depth + 1).iter() {
            let MroEntry::Class(c) = entry else { continue };
            let (bases, field) =
                self.with_class(c, |k| (k.bases.clone(), k.fields.get(index as usize).cloned())).unwrap_or_default();
            let is_named_tuple = bases.iter().any(|b| {
                self.eval_closed(b, &c.module, None, depth + 1)
                    .iter()
                    .any(|v| matches!(v, Value::External(x) if NAMED_TUPLE_BASES.contains(&&**x)))
            });
            if is_named_tuple {
                let field = field?;
                return Some(self.deref(self.class_attr(c, &field, None, depth + 1), depth + 1));
            }
        }
        None
    }

    /// Attribute `attr` of the class `class`, looked up along its MRO (after `after`, for
    /// `super()`): what reading it on the class object gives.
    pub(super) fn class_attr(&self, class: &Target, attr: &str, after: Option<&Target>, depth: u32) -> Vec<Value> {
        self.attr_along_mro(class, attr, after, false, depth)
    }

    /// Attribute `attr` of an instance of `class`, as far as its class says: as
    /// [`Resolver::class_attr`], but what a builtin base's class object has from `type` (`L.mro`,
    /// `L.__name__`, `L.__call__`) is no attribute of its instances, and the lookup goes on past
    /// it (to a mixin's `mro`, or to nothing).
    pub(super) fn instance_attr(&self, class: &Target, attr: &str, depth: u32) -> Vec<Value> {
        self.attr_along_mro(class, attr, None, true, depth)
    }

    fn attr_along_mro(
        &self,
        class: &Target,
        attr: &str,
        after: Option<&Target>,
        of_instance: bool,
        depth: u32,
    ) -> Vec<Value> {
        let mro = self.mro(class, depth + 1);
        let mut skipping = after.is_some();
        for entry in mro.iter() {
            match entry {
                MroEntry::Class(t) => {
                    if skipping {
                        if Some(t) == after {
                            skipping = false;
                        }
                        continue;
                    }
                    // The member's value, not the member: cloning it copied its value expressions.
                    let found = self.with_class(t, |c| {
                        c.member(attr).map(|m| {
                            let assigned = matches!(m.kind, DefKind::Method)
                                && !m.values.is_empty()
                                && (m.method_replaced || !m.data_descriptor);
                            (member_value(t, m), assigned, m.method_replaced, set_only_through_self(m))
                        })
                    });
                    if let Some((mut value, assigned, replaced, instance_only)) = found.flatten() {
                        // An attribute only ever set through `self` is in the instance's dict,
                        // which a property further along the MRO takes precedence over: reads
                        // call its getter and `self.x = v` its setter (`self.debug = True` in a
                        // subclass of a class with a `debug` property; flask's `Flask.debug`).
                        if instance_only && let Some(property) = self.property_after(&mro, t, attr) {
                            return property;
                        }
                        // A method whose name the class body assigns again after it (`run =
                        // helper`) is that value; one a method assigns on `self` (`self.send =
                        // fast_send` in `__init__`) is shadowed by it on instances, where it
                        // is set: both are in view.
                        if assigned {
                            let var = Target::new(&t.module, &format!("{}.{attr}", t.path));
                            if replaced {
                                value.clear();
                            }
                            extend(&mut value, self.var_values(&var, depth + 1));
                        }
                        return value;
                    }
                }
                MroEntry::External(x) => {
                    // A marker base (`ABC`, `Generic[T]`, `Protocol`) supplies no attribute a
                    // subclass's code reads: `column.format` on an `ABC` subclass is no
                    // `abc.ABC.format`. Lookup goes on past it, as it would past `object`.
                    if skipping || MARKER_BASES.contains(&&**x) {
                        continue;
                    }
                    // A named tuple's instances are tuples: `typing.NamedTuple` adds `_replace`,
                    // `_asdict` and the like, and the rest is `tuple`'s, looked up as a `tuple`
                    // base's would be (its constructor is a generated `__new__`: no `__init__`
                    // runs).
                    let x: &str = if NAMED_TUPLE_BASES.contains(&&**x) && !NAMED_TUPLE_MEMBERS.contains(&attr) {
                        if attr == "__init__" {
                            continue;
                        }
                        "builtins.tuple"
                    } else {
                        x
                    };
                    // A builtin base without the attribute (`class L(list)`, `L().frobnicate`)
                    // supplies nothing either: the lookup goes on, to no `builtins.list.frobnicate`.
                    // What every subclass has is kept: its instances' `__dict__` and
                    // `__weakref__`, and its class object's attributes, which come from `type`
                    // (`D.__subclasses__()`, `D.__name__`).
                    if !builtin_has_attr(x, attr)
                        && !matches!(attr, "__dict__" | "__weakref__")
                        && !builtin_has_attr("builtins.type", attr)
                    {
                        continue;
                    }
                    let member = format!("{x}.{attr}");
                    if of_instance && is_class_object_attr(&member) {
                        continue;
                    }
                    // The `__str__` a builtin type has from `object` (`int`, `list`, ...) is
                    // `object.__str__`, which comes last in the MRO: a mixin after the builtin
                    // base may define its own (`class L(list, Mixin)`), and without one `str()`
                    // falls back to the class's `__repr__`.
                    if is_object_str(&member) {
                        continue;
                    }
                    // `abc.ABC` and the like define no `__init__` (`super().__init__()` in their
                    // subclass runs the next one's): naming theirs would invent a target.
                    if attr == "__init__" && !runs_external_init(&member) && !member.starts_with("builtins.object.") {
                        continue;
                    }
                    return vec![Value::External(Arc::from(member.as_str()))];
                }
            }
        }
        Vec::new()
    }

    /// Whether `def` is an attribute only ever set through `self` whose name a base class
    /// defines as a property: no attribute of the instance is made (`self.debug = True` calls
    /// the base's setter), so it is no unit.
    pub(super) fn shadowed_by_property(&self, def: &Def) -> bool {
        let Some(parent) = def.parent.map(|p| self.syntax.def(p)) else { return false };
        if def.kind != DefKind::Variable || parent.kind != DefKind::Class {
            return false;
        }
        let class = Target::new(&self.module, &parent.path);
        let instance_only =
            self.with_class(&class, |c| c.member(&def.name).is_some_and(set_only_through_self)).unwrap_or(false);
        instance_only && self.property_after(&self.mro(&class, 0), &class, &def.name).is_some()
    }

    /// What the classes after `class` on `mro` have in their own namespace as `attr`, when the
    /// first of them to have it has a data descriptor (a property): Python's attribute lookup
    /// takes that over an instance's own attribute. Attributes only set through `self` are in no
    /// class's namespace and are passed over.
    pub(super) fn property_after(&self, mro: &[MroEntry], class: &Target, attr: &str) -> Option<Vec<Value>> {
        let start = mro.iter().position(|e| matches!(e, MroEntry::Class(t) if t == class))? + 1;
        for entry in &mro[start..] {
            let MroEntry::Class(t) = entry else { return None };
            let found = self.with_class(t, |c| {
                c.member(attr).filter(|m| !set_only_through_self(m)).map(|m| {
                    // `x = property(getter, setter)` in the class body is one too.
                    let made = m.values.iter().any(|v| matches!(v, Expr::Property(..)));
                    (m.data_descriptor || made).then(|| member_value(t, m))
                })
            });
            if let Some(Some(first)) = found {
                return first;
            }
        }
        None
    }

    /// Whether `class` is an enumeration: `enum.Enum` (or another of the module's bases) is on
    /// its method resolution order.
    pub(super) fn is_enum(&self, class: &Target, depth: u32) -> bool {
        self.mro(class, depth + 1).iter().any(|e| matches!(e, MroEntry::External(x) if ENUM_BASES.contains(&&**x)))
    }

    /// The metaclass of `class`, when it is a class of the repository: of the metaclasses the
    /// classes of its MRO name, the most derived, as Python takes it (the one whose MRO holds
    /// every other; a class naming `Meta` whose base names `SubMeta(Meta)` gets `SubMeta`).
    /// None when that is not a class of the code (`ABCMeta`), cannot be told, or none is named
    /// (`type`).
    pub(super) fn metaclass_of(&self, class: &Target, depth: u32) -> Option<Target> {
        let mut ours: Vec<Target> = Vec::new();
        let mut external: Vec<Arc<str>> = Vec::new();
        for entry in self.mro(class, depth + 1).iter() {
            let MroEntry::Class(c) = entry else { continue };
            let Some(named) = self.with_class(c, |k| k.metaclass.clone()).flatten() else { continue };
            let values = self.eval_closed(&named, &c.module, None, depth + 1);
            match values.as_slice() {
                [Value::Class(m)] => ours.push(m.clone()),
                [Value::External(x)] if &**x == "builtins.type" => {}
                [Value::External(x)] => external.push(x.clone()),
                _ => return None,
            }
        }
        let holds = |m: &Target, other: &MroEntry| self.mro(m, depth + 1).iter().any(|e| e == other);
        let most_derived =
            ours.iter().find(|m| ours.iter().all(|o| o == *m || holds(m, &MroEntry::Class(o.clone()))))?.clone();
        external.iter().all(|x| holds(&most_derived, &MroEntry::External(x.clone()))).then_some(most_derived)
    }

    /// `values` with each class object whose metaclass is a class of the code (see
    /// [`Resolver::metaclass_of`]) as an instance of that metaclass: what `len(C)`, `C[k]`,
    /// `for x in C` or `if C:` call is the metaclass's special method, never the class's own.
    pub(super) fn classes_as_metaclass_instances(&self, values: &[Value], depth: u32) -> Vec<Value> {
        values
            .iter()
            .map(|v| match v {
                Value::Class(c) => self.metaclass_of(c, depth).map_or_else(|| v.clone(), Value::Instance),
                _ => v.clone(),
            })
            .collect()
    }

    /// The `@name.setter` method of property `getter`, when its class defines one.
    pub(super) fn property_setter(&self, getter: &Target) -> Option<Target> {
        self.property_accessor(getter, |m| m.setter.clone())
    }

    /// The `@name.deleter` method of property `getter`, when its class defines one.
    pub(super) fn property_deleter(&self, getter: &Target) -> Option<Target> {
        self.property_accessor(getter, |m| m.deleter.clone())
    }

    fn property_accessor(&self, getter: &Target, accessor: impl Fn(&Member) -> Option<Name>) -> Option<Target> {
        let class = getter.owner()?;
        let name = own_name(&getter.path);
        let path = self.with_class(&class, |c| c.member(name).and_then(&accessor)).flatten()?;
        Some(Target::new(&getter.module, &path))
    }

    pub(super) fn method_flags(&self, method: &Target) -> MethodFlags {
        let Some(summary) = self.summary_for(&method.module, &method.path) else {
            return MethodFlags::default();
        };
        summary.function(&method.path).map(|f| f.flags).unwrap_or_default()
    }
}

#[cfg(test)]
mod c3_tests {
    use super::{MroEntry, Target, c3_merge};

    fn class(name: &str) -> MroEntry {
        MroEntry::Class(Target::new("m", name))
    }

    /// What CPython's MRO is, given each class's bases (classes listed after their bases).
    fn linearise(classes: &[(&str, &[&str])]) -> std::collections::HashMap<String, Vec<MroEntry>> {
        let mut mros: std::collections::HashMap<String, Vec<MroEntry>> = std::collections::HashMap::new();
        for (name, bases) in classes {
            let mut lists: Vec<Vec<MroEntry>> = bases.iter().map(|b| mros[*b].clone()).collect();
            lists.push(bases.iter().map(|b| class(b)).collect());
            mros.insert(name.to_string(), c3_merge(class(name), &lists));
        }
        mros
    }

    fn names(mro: &[MroEntry]) -> Vec<String> {
        mro.iter()
            .map(|e| match e {
                MroEntry::Class(t) => t.path.to_string(),
                MroEntry::External(x) => x.to_string(),
            })
            .collect()
    }

    #[test]
    fn merges_as_cpython_does() {
        // The example of "The Python 2.3 Method Resolution Order"; CPython prints this MRO for Z.
        let mros = linearise(&[
            ("O", &[]),
            ("A", &["O"]),
            ("B", &["O"]),
            ("C", &["O"]),
            ("D", &["O"]),
            ("E", &["O"]),
            ("K1", &["A", "B", "C"]),
            ("K2", &["D", "B", "E"]),
            ("K3", &["D", "A"]),
            ("Z", &["K1", "K2", "K3"]),
        ]);
        assert_eq!(names(&mros["Z"]), ["Z", "K1", "K2", "K3", "D", "A", "B", "C", "E", "O"]);
        assert_eq!(names(&mros["K3"]), ["K3", "D", "A", "O"]);
    }

    #[test]
    fn an_inconsistent_hierarchy_falls_back_to_depth_first_without_repeats() {
        // class X(A, B) and class Y(B, A), then class Z(X, Y): CPython raises TypeError.
        let mros = linearise(&[
            ("O", &[]),
            ("A", &["O"]),
            ("B", &["O"]),
            ("X", &["A", "B"]),
            ("Y", &["B", "A"]),
            ("Z", &["X", "Y"]),
        ]);
        // Merged: Z, X, Y; then A and B are each in the other's tail.
        assert_eq!(names(&mros["Z"]), ["Z", "X", "Y", "A", "B", "O"]);
    }

    #[test]
    fn external_bases_keep_their_place() {
        let lists = vec![vec![class("A"), MroEntry::External("abc.ABC".into())], vec![class("A")]];
        assert_eq!(names(&c3_merge(class("B"), &lists)), ["B", "A", "abc.ABC"]);
    }
}
