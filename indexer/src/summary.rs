//! The per-file summary: what other files can see of a module.
//!
//! This is fresco's ItemTree. It holds the module-level names and what they bind, the classes
//! with their bases and members, and what functions return, with every expression rewritten to be
//! meaningful at module level (function locals substituted, `self` made explicit). It carries no
//! positions and no bodies beyond that, so an edit inside a function body that does not change
//! what the function returns or which attributes it assigns yields an equal summary, and salsa
//! stops there: no other file re-resolves.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::syntax::*;

/// A binding of a module-level name or class member, closed over module scope.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum SumBinding {
    /// A unit of this module: its path (unit id relative to the module) and kind.
    Def { path: Name, kind: DefKind },
    /// `import a.b as x` binds x to module `a.b` (absolute).
    ImportModule(Name),
    /// `from m import n` (absolute module).
    ImportName { module: Name, name: Name },
    /// An assigned value (module-closed expression).
    Value(Expr),
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct MethodFlags {
    pub is_static: bool,
    pub is_class: bool,
    pub is_property: bool,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Member {
    /// The unit path of the member, when it is a unit (methods, nested classes, attributes).
    pub path: Option<Name>,
    pub kind: DefKind,
    pub flags: MethodFlags,
    /// For attributes: the values assigned (in the class body or through `self.x = ...`).
    pub values: Vec<Expr>,
    /// For a property: the unit path of its `@name.setter` method (assigning calls it).
    pub setter: Option<Name>,
    /// For a property: the unit path of its `@name.deleter` method (`del obj.name` calls it).
    pub deleter: Option<Name>,
    /// For a method: the class body assigned the name again after the `def` (`run = helper`),
    /// so the class holds that value, not the method.
    pub method_replaced: bool,
    /// A `property` (or its setter, getter, deleter): a data descriptor, which an instance
    /// attribute of the same name does not shadow (`self.content = x` calls the setter). A
    /// plain method or a `cached_property` is shadowed by one.
    pub data_descriptor: bool,
    /// Assigned in the class body itself (`RED = 1`), not only through `self` in a method:
    /// the members of an enumeration are these.
    pub class_body_value: bool,
    /// How many of `values`, from the first, the class body assigned (the rest were assigned
    /// through `self`): a descriptor is a class attribute, never an instance's.
    pub class_body_values: u32,
    /// Assigned through `self` in one of the class's methods, whatever the value (`self.x =
    /// None` too): an instance attribute then shadows a non-data descriptor of that name.
    pub assigned_through_self: bool,
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct ClassSummary {
    pub bases: Vec<Expr>,
    /// Sorted by name.
    pub members: Vec<(Name, Member)>,
    /// The class's decorators, outermost first, closed in the scope the class is written in
    /// (`@dataclass` makes the `__init__` that calls `__post_init__`).
    pub decorators: Vec<Expr>,
    /// The names the class body annotates, in order (see [`crate::syntax::Scope::fields`]).
    pub fields: Vec<Name>,
    /// The metaclass the class statement names (see [`crate::syntax::Scope::metaclass`]),
    /// closed in the scope the class is written in (`Unknown` where it is not known).
    pub metaclass: Option<Expr>,
}

impl ClassSummary {
    pub fn member(&self, name: &str) -> Option<&Member> {
        self.members.binary_search_by(|(n, _)| n.as_str().cmp(name)).ok().map(|i| &self.members[i].1)
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct FunctionSummary {
    pub returns: Vec<Expr>,
    /// The return annotation (closed in the scope the `def` is written in): what calls give when
    /// the returned values are not known.
    pub annotation: Option<Expr>,
    pub yields: Vec<Expr>,
    /// The decorators, outermost first (closed in the scope the `def` is written in; `Unknown`
    /// where they name nothing known). Attributes of the decorated name that a function does not
    /// have are looked up on what the outermost returns; calls of the name also reach the
    /// wrapper function the chain returns.
    pub decorators: Vec<Expr>,
    /// Whether it returns the first argument it is called with, as is (`def deco(f): ...;
    /// return f`; a bound `self` is not an argument): applied as a decorator, it leaves the
    /// decorated function what it was.
    pub returns_first_argument: bool,
    /// The parameters (position counting `self`, and name) its code calls, nested functions'
    /// code included (`func(*args)` in a decorator's wrapper): other files pass callables only
    /// where they will be called.
    pub called_params: Vec<(u32, Name)>,
    pub flags: MethodFlags,
    /// The annotated parameters by name, each annotation closed in the scope the `def` is written
    /// in: what an override that leaves the parameter unannotated receives (see
    /// `Resolver::inherited_annotation`).
    pub param_annotations: Vec<(Name, Expr)>,
}

impl FunctionSummary {
    pub fn outermost_decorator(&self) -> Option<&Expr> {
        self.decorators.first().filter(|d| **d != Expr::Unknown)
    }
}

#[derive(Clone, PartialEq, Eq, Hash, Debug, Default)]
pub struct ModuleSummary {
    /// Module-level names, sorted by name.
    pub names: Vec<(Name, Vec<SumBinding>)>,
    /// Absolute modules imported with `*`.
    pub star_imports: Vec<Name>,
    pub dunder_all: Option<Vec<Name>>,
    /// By unit path, sorted.
    pub classes: Vec<(Name, ClassSummary)>,
    pub functions: Vec<(Name, FunctionSummary)>,
}

fn find<'a, T>(items: &'a [(Name, T)], key: &str) -> Option<&'a T> {
    items.binary_search_by(|(n, _)| n.as_str().cmp(key)).ok().map(|i| &items[i].1)
}

impl ModuleSummary {
    pub fn name(&self, name: &str) -> Option<&[SumBinding]> {
        find(&self.names, name).map(Vec::as_slice)
    }
    pub fn class(&self, path: &str) -> Option<&ClassSummary> {
        find(&self.classes, path)
    }
    pub fn function(&self, path: &str) -> Option<&FunctionSummary> {
        find(&self.functions, path)
    }
    /// Whether `from m import *` brings in `name`.
    pub fn is_public(&self, name: &str) -> bool {
        match &self.dunder_all {
            Some(all) => all.iter().any(|n| n == name),
            None => !name.starts_with('_') && self.name(name).is_some(),
        }
    }
}

/// Turns a relative import into an absolute module name, given the importing module.
pub fn absolute_module(module: &ModuleRef, importer: &str, importer_is_package: bool) -> Option<Name> {
    if module.level == 0 {
        return Some(module.name.clone());
    }
    let mut parts: Vec<&str> = importer.split('.').filter(|p| !p.is_empty()).collect();
    if !importer_is_package {
        parts.pop();
    }
    // `.` is the importer's package, `..` its parent: a level above the top-level package is an
    // ImportError in Python (`from ..beyond import x` in a top-level package's module), not an
    // absolute import of `beyond`.
    if parts.len() < module.level as usize {
        return None;
    }
    for _ in 1..module.level {
        parts.pop()?;
    }
    if !module.name.is_empty() {
        parts.extend(module.name.split('.'));
    }
    if parts.is_empty() {
        return None;
    }
    Some(Name::new(&parts.join(".")))
}

pub fn method_flags(decorators: &[Expr]) -> MethodFlags {
    let mut flags = MethodFlags::default();
    for d in decorators {
        match d {
            Expr::Name(n) if n == "staticmethod" => flags.is_static = true,
            Expr::Name(n) if n == "classmethod" => flags.is_class = true,
            Expr::Name(n) if n == "property" || n == "cached_property" => flags.is_property = true,
            Expr::Attr(_, n) if n == "cached_property" || n == "setter" || n == "getter" || n == "deleter" => {
                flags.is_property = true
            }
            _ => {}
        }
    }
    flags
}

/// `expr` with its string and integer constants replaced by their types. Only module-level names
/// are read as constants by other files (`HANDLERS[START]`); elsewhere in a summary a constant
/// would make editing a literal (`return "a"`, `template_name = "..."`) an interface change that
/// re-resolves every file that looked the name up.
fn without_constants(expr: Expr) -> Expr {
    match expr {
        Expr::Constant(k) => Expr::Literal(constant_type(&k)),
        Expr::Container(kind, items) => Expr::Container(kind, items.into_iter().map(without_constants).collect()),
        Expr::Added(items) => Expr::Added(items.into_iter().map(without_constants).collect()),
        Expr::Keyed(items) => Expr::Keyed(items.into_iter().map(|(k, e)| (k, without_constants(e))).collect()),
        Expr::Union(items) => simplify_union(items.into_iter().map(without_constants).collect()),
        Expr::Declared(ty, value) => Expr::Declared(ty, Box::new(without_constants(*value))),
        Expr::Narrowed(ty, value) => Expr::Narrowed(ty, Box::new(without_constants(*value))),
        Expr::NotInstance(ty, value) => Expr::NotInstance(ty, Box::new(without_constants(*value))),
        other => other,
    }
}

/// How deep local substitution goes before giving up (`a = b; b = c; return a`).
const SUBSTITUTION_DEPTH: u32 = 4;

struct Summariser<'a> {
    syntax: &'a FileSyntax,
    module: &'a str,
    is_package: bool,
    /// Closed names, by (scope, name, depth). A name rebound from itself (`text =
    /// text.replace(..)`, 40 times over) otherwise closes each binding by closing every binding
    /// again, down to the substitution depth: 20 lines took 0.2 s to index, 40 lines 4 s.
    closed_names: std::cell::RefCell<FxHashMap<(ScopeId, Name, u32), Expr>>,
}

impl Summariser<'_> {
    /// Rewrites `expr`, written in `scope`, so that it means the same at module level.
    fn close(&self, expr: &Expr, scope: ScopeId, depth: u32) -> Expr {
        if depth > SUBSTITUTION_DEPTH {
            return Expr::Unknown;
        }
        match expr {
            Expr::Name(name) => self.close_name(name, scope, depth),
            Expr::Attr(base, attr) => match self.close(base, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::Attr(Box::new(b), attr.clone()),
            },
            Expr::Call(callee) => match self.close(callee, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                c => Expr::Call(Box::new(c)),
            },
            Expr::Subscript(base) => match self.close(base, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::Subscript(Box::new(b)),
            },
            Expr::Slice(base, start) => match self.close(base, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::Slice(Box::new(b), *start),
            },
            Expr::Container(kind, items) => {
                Expr::Container(*kind, items.iter().map(|e| self.close(e, scope, depth)).collect())
            }
            Expr::Added(items) => Expr::Added(items.iter().map(|e| self.close(e, scope, depth)).collect()),
            Expr::Keyed(items) => {
                Expr::Keyed(items.iter().map(|(k, e)| (k.clone(), self.close(e, scope, depth))).collect())
            }
            Expr::Element(base, index) => match self.close(base, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::Element(Box::new(b), *index),
            },
            Expr::Item(base, key) => match self.close(base, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::Item(Box::new(b), key.clone()),
            },
            Expr::Union(items) => simplify_union(items.iter().map(|e| self.close(e, scope, depth)).collect()),
            Expr::Instance(ty) => match self.close(ty, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                t => Expr::Instance(Box::new(t)),
            },
            Expr::Returning(ty) => match self.close(ty, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                t => Expr::Returning(Box::new(t)),
            },
            Expr::Decorated(name, count) => match self.close(name, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                n => Expr::Decorated(Box::new(n), *count),
            },
            Expr::Entered(manager, is_async) => match self.close(manager, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                m => Expr::Entered(Box::new(m), *is_async),
            },
            Expr::Property(getter, setter, deleter) => match self.close(getter, scope, depth) {
                Expr::Unknown => Expr::Call(Box::new(Expr::Name(Name::new("property")))),
                g => {
                    let accessor = |a: &Option<Box<Expr>>| {
                        a.as_deref().map(|a| self.close(a, scope, depth)).filter(|a| *a != Expr::Unknown).map(Box::new)
                    };
                    Expr::Property(Box::new(g), accessor(setter), accessor(deleter))
                }
            },
            Expr::Declared(ty, value) => match (self.close(ty, scope, depth), self.close(value, scope, depth)) {
                (Expr::Unknown, v) => v,
                (t, v) => Expr::Declared(Box::new(t), Box::new(v)),
            },
            Expr::Narrowed(ty, value) => match (self.close(ty, scope, depth), self.close(value, scope, depth)) {
                (Expr::Unknown, v) => v,
                (t, v) => Expr::Narrowed(Box::new(t), Box::new(v)),
            },
            Expr::NotInstance(ty, value) => match (self.close(ty, scope, depth), self.close(value, scope, depth)) {
                (Expr::Unknown, v) => v,
                (t, v) => Expr::NotInstance(Box::new(t), Box::new(v)),
            },
            // Lambdas are identified by scope numbers that shift with body edits: not visible.
            Expr::Lambda(_) => Expr::Unknown,
            Expr::Literal(_) | Expr::Constant(_) | Expr::SelfRef | Expr::ClsRef | Expr::DefPath(_) | Expr::Unknown => {
                expr.clone()
            }
            // Other modules see an item under a key they do not know: the key's constant is a
            // fact of this file's scopes. Still an item, not an element of iteration: a class's
            // `__getitem__` answers for it.
            Expr::ItemAt(base, _) => match self.close(base, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::ItemAt(Box::new(b), Box::new(Expr::Unknown)),
            },
        }
    }

    fn close_name(&self, name: &str, scope: ScopeId, depth: u32) -> Expr {
        let key = (scope, Name::new(name), depth);
        if let Some(closed) = self.closed_names.borrow().get(&key) {
            return closed.clone();
        }
        let closed = self.close_name_uncached(name, scope, depth);
        self.closed_names.borrow_mut().insert(key, closed.clone());
        closed
    }

    fn close_name_uncached(&self, name: &str, scope: ScopeId, depth: u32) -> Expr {
        let mut s = scope;
        let origin = scope;
        loop {
            let sc = self.syntax.scope(s);
            if s == 0 || sc.globals.iter().any(|g| g == name) {
                return Expr::Name(Name::new(name));
            }
            let skip = sc.kind == ScopeKind::Class && s != origin;
            if !skip {
                let bindings: Vec<&Binding> = sc.bindings.iter().filter(|(n, _)| n == name).map(|(_, b)| b).collect();
                if !bindings.is_empty() {
                    let options: Vec<Expr> =
                        bindings.into_iter().map(|b| self.close_binding(b, s, depth + 1)).collect();
                    return simplify_union(options);
                }
            }
            match sc.parent {
                Some(p) => s = p,
                None => return Expr::Name(Name::new(name)),
            }
        }
    }

    fn close_binding(&self, binding: &Binding, scope: ScopeId, depth: u32) -> Expr {
        let sc = self.syntax.scope(scope);
        match binding {
            Binding::Value(e) => self.close(e, scope, depth),
            Binding::Unpack(Expr::Container(_, items), i) => {
                items.get(*i as usize).map(|e| self.close(e, scope, depth)).unwrap_or(Expr::Unknown)
            }
            // `a, b = pair`: element i of what `pair` is (resolved when evaluated: at module
            // level `pair` stays a name).
            Binding::Unpack(e, i) => match self.close(e, scope, depth) {
                Expr::Container(ContainerKind::Tuple | ContainerKind::List, items) => {
                    items.get(*i as usize).cloned().unwrap_or(Expr::Unknown)
                }
                Expr::Unknown => Expr::Unknown,
                b => Expr::Element(Box::new(b), *i),
            },
            // `for x in values`: any element (for a generator function's call, what it yields).
            Binding::Iter(e) => match self.close(e, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                b => Expr::Subscript(Box::new(b)),
            },
            Binding::Param(0) if self.is_method_scope(scope) => {
                let flags = sc.def.map(|d| method_flags(&self.syntax.def(d).decorators)).unwrap_or_default();
                if flags.is_static {
                    Expr::Unknown
                } else if flags.is_class || self.is_metaclass_method(scope) {
                    Expr::ClsRef
                } else {
                    Expr::SelfRef
                }
            }
            Binding::Param(i) => {
                let param = &sc.params[*i as usize];
                let parent = sc.parent.unwrap_or(0);
                let mut options = Vec::new();
                if let Some(default) = &param.default {
                    options.push(self.close(default, parent, depth));
                }
                if let Some(annotation) = &param.annotation {
                    options.push(self.close(annotation, scope, depth));
                }
                simplify_union(options)
            }
            Binding::Def(d) => {
                let def = self.syntax.def(*d);
                Expr::DefPath(def.path.clone())
            }
            // `with cm as x` at module level: what entering `cm` gives, evaluated where the
            // summary is read (`Resolver::entered`, as for a function's own `with`).
            Binding::Enter(e, is_async) => match self.close(e, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                manager => Expr::Entered(Box::new(manager), *is_async),
            },
            // `except E as e`: an instance of E, or of each class of a tuple.
            Binding::Exception(e) => match self.close(e, scope, depth) {
                Expr::Unknown => Expr::Unknown,
                Expr::Container(ContainerKind::Tuple, classes) => {
                    simplify_union(classes.into_iter().map(|c| Expr::Call(Box::new(c))).collect())
                }
                class => Expr::Call(Box::new(class)),
            },
            _ => Expr::Unknown,
        }
    }

    /// Whether the function whose body is `body` returns its first argument by name.
    fn returns_first_argument(&self, body: ScopeId) -> bool {
        let sc = self.syntax.scope(body);
        let flags = sc.def.map(|d| method_flags(&self.syntax.def(d).decorators)).unwrap_or_default();
        let first = u32::from(self.is_method_scope(body) && !flags.is_static);
        sc.returns.iter().any(|r| {
            matches!(r, Expr::Name(n)
                if sc.bindings.iter().any(|(b, binding)| b == n && *binding == Binding::Param(first)))
        })
    }

    fn is_method_scope(&self, scope: ScopeId) -> bool {
        let sc = self.syntax.scope(scope);
        sc.kind == ScopeKind::Function && sc.parent.is_some_and(|p| self.syntax.scope(p).kind == ScopeKind::Class)
    }

    fn is_metaclass_method(&self, scope: ScopeId) -> bool {
        let Some(class_scope) = self.syntax.scope(scope).parent else {
            return false;
        };
        let sc = self.syntax.scope(class_scope);
        sc.bases.iter().any(|(b, _)| matches!(b, Expr::Name(n) if n == "type"))
            && self.syntax.scope(scope).def.is_some_and(|d| self.syntax.def(d).name == "__new__")
    }

    /// The summary of module-level binding `index`. A plain alias (`b = a`) of a name the module
    /// replaces later (`a = other`) stands for the bindings of that name in force when the alias
    /// was made, not for the final ones. `by_name`: each module-level name's binding indices.
    fn module_binding(&self, index: usize, by_name: &[(&str, Vec<usize>)], depth: u32) -> Vec<SumBinding> {
        let module_scope = self.syntax.scope(0);
        let binding = &module_scope.bindings[index].1;
        let alias_of = match binding {
            Binding::Value(Expr::Name(other)) if depth <= SUBSTITUTION_DEPTH => {
                by_name.binary_search_by(|(n, _)| (*n).cmp(other.as_str())).ok().map(|k| &by_name[k].1)
            }
            _ => None,
        };
        let Some(indices) = alias_of else {
            return vec![self.binding(binding)];
        };
        let replaced_later = indices.iter().any(|&j| j > index && module_scope.replacing_index(j));
        let before: Vec<usize> = indices.iter().copied().filter(|&j| j < index).collect();
        if !replaced_later || before.is_empty() {
            return vec![self.binding(binding)];
        }
        // From the last replacing assignment before the alias on (earlier ones were replaced).
        let from = before.iter().rposition(|&j| module_scope.replacing_index(j)).unwrap_or(0);
        before[from..].iter().flat_map(|&j| self.module_binding(j, by_name, depth + 1)).collect()
    }

    fn binding(&self, binding: &Binding) -> SumBinding {
        match binding {
            Binding::Def(d) => {
                let def = self.syntax.def(*d);
                SumBinding::Def { path: def.path.clone(), kind: def.kind }
            }
            Binding::Import(Import::Module { module }) => match absolute_module(module, self.module, self.is_package) {
                Some(m) => SumBinding::ImportModule(m),
                None => SumBinding::Value(Expr::Unknown),
            },
            Binding::Import(Import::Name { module, name }) => {
                match absolute_module(module, self.module, self.is_package) {
                    Some(m) => SumBinding::ImportName { module: m, name: name.clone() },
                    None => SumBinding::Value(Expr::Unknown),
                }
            }
            other => SumBinding::Value(self.close_binding(other, 0, 0)),
        }
    }
}

/// Collapses a union: drops unknowns when something is known, flattens nested unions, dedups.
pub fn simplify_union(items: Vec<Expr>) -> Expr {
    let mut flat: Vec<Expr> = Vec::new();
    for item in items {
        match item {
            Expr::Union(inner) => flat.extend(inner),
            Expr::Unknown => {}
            other => flat.push(other),
        }
    }
    // Deduplicated in order; a set, not a scan of what was kept: a generated union of 20,000
    // distinct types took seconds.
    let mut kept = rustc_hash::FxHashSet::default();
    let mut seen = Vec::new();
    for e in flat {
        if kept.insert(e.clone()) {
            seen.push(e);
        }
    }
    match seen.len() {
        0 => Expr::Unknown,
        1 => seen.pop().unwrap_or(Expr::Unknown),
        _ => Expr::Union(seen),
    }
}

/// Builds the summary of a module from its syntax.
pub fn summarise(syntax: &FileSyntax, module: &str, is_package: bool) -> Arc<ModuleSummary> {
    let s = Summariser { syntax, module, is_package, closed_names: Default::default() };
    let called = called_params(syntax);
    let mut names: FxHashMap<Name, Vec<SumBinding>> = FxHashMap::default();
    // Module-level variables are units: a name bound to one resolves to the unit first.
    for def in &syntax.defs {
        if def.parent.is_none() && def.kind == DefKind::Variable {
            names.entry(def.name.clone()).or_default().push(SumBinding::Def { path: def.path.clone(), kind: def.kind });
        }
    }
    let module_scope = syntax.scope(0);
    let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
    for (i, (name, _)) in module_scope.bindings.iter().enumerate() {
        by_name.entry(name.as_str()).or_default().push(i);
    }
    let mut ordered: Vec<(&str, Vec<usize>)> = by_name.into_iter().collect();
    ordered.sort_unstable();
    for (name, indices) in &ordered {
        for i in syntax.live_bindings(0, indices) {
            let list = names.entry(Name::new(name)).or_default();
            for b in s.module_binding(i, &ordered, 0) {
                if !list.contains(&b) {
                    list.push(b);
                }
            }
        }
    }
    // Module-level names written from functions through `global`.
    for (i, scope) in syntax.scopes.iter().enumerate().skip(1) {
        for g in &scope.globals {
            for (name, binding) in &scope.bindings {
                if name == g {
                    let b = SumBinding::Value(s.close_binding(binding, i as ScopeId, 0));
                    let list = names.entry(name.clone()).or_default();
                    if !list.contains(&b) {
                        list.push(b);
                    }
                }
            }
        }
    }
    let mut star_imports = Vec::new();
    for import in &module_scope.imports {
        if import.names.iter().any(|n| n == "*")
            && let Some(m) = absolute_module(&import.module, module, is_package)
        {
            star_imports.push(m);
        }
    }

    let mut classes = Vec::new();
    let mut functions = Vec::new();
    let children = ClassChildren::of(syntax);
    for (id, def) in syntax.defs.iter().enumerate() {
        let Some(body) = def.body else { continue };
        match def.kind {
            DefKind::Class => classes.push((def.path.clone(), class_summary(&s, &children, id as DefId, body))),
            DefKind::Function | DefKind::Method => {
                let sc = syntax.scope(body);
                // What the body returns or yields, closed to module level, constants as types.
                let closed = |exprs: &[Expr]| -> Vec<Expr> {
                    exprs
                        .iter()
                        .map(|e| without_constants(s.close(e, body, 0)))
                        .filter(|e| *e != Expr::Unknown)
                        .collect()
                };
                functions.push((
                    def.path.clone(),
                    FunctionSummary {
                        returns: closed(&sc.returns),
                        yields: closed(&sc.yields),
                        annotation: def
                            .return_type
                            .as_ref()
                            .map(|t| s.close(t, sc.parent.unwrap_or(0), 0))
                            .filter(|t| *t != Expr::Unknown),
                        decorators: def.decorators.iter().map(|d| s.close(d, sc.parent.unwrap_or(0), 0)).collect(),
                        returns_first_argument: s.returns_first_argument(body),
                        called_params: called.get(&body).cloned().unwrap_or_default(),
                        flags: method_flags(&def.decorators),
                        param_annotations: sc
                            .params
                            .iter()
                            .filter(|p| !p.variadic)
                            .filter_map(|p| {
                                let closed = s.close(p.annotation.as_ref()?, sc.parent.unwrap_or(0), 0);
                                (closed != Expr::Unknown).then(|| (p.name.clone(), closed))
                            })
                            .collect(),
                    },
                ));
            }
            // Positional identity: not part of the interface other files see.
            DefKind::Variable | DefKind::Lambda => {}
        }
    }
    let mut names: Vec<(Name, Vec<SumBinding>)> = names.into_iter().collect();
    names.sort_by(|a, b| a.0.cmp(&b.0));
    classes.sort_by(|a, b| a.0.cmp(&b.0));
    functions.sort_by(|a, b| a.0.cmp(&b.0));
    Arc::new(ModuleSummary { names, star_imports, dunder_all: syntax.dunder_all.clone(), classes, functions })
}

/// The function scope and position of the parameter a bare `name` called in `scope` calls,
/// if it calls one: looked up as Python does (`global` declarations; class bodies are not
/// visible from the functions inside them), in a function or method (not a lambda), and
/// neither `*args`/`**kwargs` nor a method's `self`/`cls`.
///
/// `binds(scope, name)` says whether a scope binds a name (callers keep an index: a scan per
/// call is quadratic in a large scope).
pub(crate) fn called_param(
    syntax: &FileSyntax,
    name: &str,
    scope: ScopeId,
    binds: &mut dyn FnMut(ScopeId, &str) -> bool,
) -> Option<(ScopeId, u32)> {
    let mut s = scope;
    let binder = loop {
        // The module body binds no parameters (and scanning its bindings for every bare call at
        // module level would be quadratic in a large generated module).
        if s == 0 {
            return None;
        }
        let sc = syntax.scope(s);
        if sc.globals.iter().any(|g| g == name) {
            return None;
        }
        let visible = sc.kind != ScopeKind::Class || s == scope;
        if visible && binds(s, name) {
            break s;
        }
        s = sc.parent?;
    };
    let sc = syntax.scope(binder);
    let def = syntax.def(sc.def?);
    if !matches!(def.kind, DefKind::Function | DefKind::Method) {
        return None;
    }
    let index = sc.bindings.iter().find_map(|(n, b)| match b {
        Binding::Param(p) if n == name => Some(*p),
        _ => None,
    })?;
    let is_receiver = index == 0 && def.kind == DefKind::Method && !method_flags(&def.decorators).is_static;
    if sc.params.get(index as usize)?.variadic || is_receiver {
        return None;
    }
    Some((binder, index))
}

/// Per function body scope, the parameters that calls anywhere under it call by name.
fn called_params(syntax: &FileSyntax) -> FxHashMap<ScopeId, Vec<(u32, Name)>> {
    let mut out: FxHashMap<ScopeId, Vec<(u32, Name)>> = FxHashMap::default();
    // The names a scope with many bindings binds, made on first use: each bare call looks up
    // every scope around it, and a scan of a class body of 30,000 attributes per call of one
    // of them was quadratic (20 s).
    let mut names: FxHashMap<ScopeId, FxHashSet<&str>> = FxHashMap::default();
    let mut binds = |s: ScopeId, name: &str| {
        let bindings = &syntax.scope(s).bindings;
        if bindings.len() < crate::lower::INDEXED_FROM {
            return bindings.iter().any(|(n, _)| n == name);
        }
        names.entry(s).or_insert_with(|| bindings.iter().map(|(n, _)| n.as_str()).collect()).contains(name)
    };
    for (id, scope) in syntax.scopes.iter().enumerate() {
        for call in scope.calls.iter() {
            let Expr::Name(name) = &call.callee else { continue };
            if let Some((function, index)) = called_param(syntax, name, id as ScopeId, &mut binds) {
                let list = out.entry(function).or_default();
                if !list.iter().any(|(j, _)| *j == index) {
                    list.push((index, name.clone()));
                }
            }
        }
    }
    for list in out.values_mut() {
        list.sort();
    }
    out
}

/// The definitions and function scopes directly inside each class, in source order, found in
/// one pass: each class looked through all of the file's (20,000 classes of 19 attributes took
/// 46 s).
struct ClassChildren {
    defs: FxHashMap<DefId, Vec<DefId>>,
    function_scopes: FxHashMap<ScopeId, Vec<ScopeId>>,
}

impl ClassChildren {
    fn of(syntax: &FileSyntax) -> ClassChildren {
        let mut defs: FxHashMap<DefId, Vec<DefId>> = FxHashMap::default();
        for (id, def) in syntax.defs.iter().enumerate() {
            if let Some(parent) = def.parent
                && def.kind != DefKind::Lambda
                && syntax.def(parent).kind == DefKind::Class
            {
                defs.entry(parent).or_default().push(id as DefId);
            }
        }
        let mut function_scopes: FxHashMap<ScopeId, Vec<ScopeId>> = FxHashMap::default();
        for id in 0..syntax.scopes.len() as ScopeId {
            let sc = syntax.scope(id);
            if let (ScopeKind::Function, Some(parent)) = (sc.kind, sc.parent)
                && syntax.scope(parent).kind == ScopeKind::Class
            {
                function_scopes.entry(parent).or_default().push(id);
            }
        }
        ClassChildren { defs, function_scopes }
    }
}

fn class_summary(s: &Summariser, children: &ClassChildren, class: DefId, body: ScopeId) -> ClassSummary {
    let syntax = s.syntax;
    let scope = syntax.scope(body);
    let parent = scope.parent.unwrap_or(0);
    let bases = scope.bases.iter().map(|(b, _)| s.close(b, parent, 0)).collect();
    let decorators = syntax.def(class).decorators.iter().map(|d| s.close(d, parent, 0)).collect();
    let mut members: FxHashMap<Name, Member> = FxHashMap::default();
    // Units that live directly in the class: methods, nested classes, class attributes and the
    // instance attributes the frontend derived from `self.x = ...`.
    for &id in children.defs.get(&class).map_or(&[][..], Vec::as_slice) {
        let def = syntax.def(id);
        let entry = members.entry(def.name.clone()).or_insert_with(|| Member {
            path: Some(def.path.clone()),
            kind: def.kind,
            flags: MethodFlags::default(),
            values: Vec::new(),
            setter: None,
            deleter: None,
            method_replaced: false,
            data_descriptor: false,
            class_body_value: false,
            class_body_values: 0,
            assigned_through_self: false,
        });
        if def.decorators.iter().any(|d| matches!(d, Expr::Attr(_, a) if a == "setter")) {
            entry.setter = Some(def.path.clone());
        }
        if def.decorators.iter().any(|d| matches!(d, Expr::Attr(_, a) if a == "deleter")) {
            entry.deleter = Some(def.path.clone());
        }
        // A later method definition replaces an earlier one; property setters never do.
        if entry.path.as_deref() != Some(def.path.as_str()) && def.kind != DefKind::Variable && !def.is_accessor() {
            entry.path = Some(def.path.clone());
            entry.kind = def.kind;
        }
        entry.data_descriptor |= def.decorators.iter().any(|d| match d {
            Expr::Name(n) => n == "property",
            Expr::Attr(_, a) => a == "setter" || a == "getter" || a == "deleter",
            _ => false,
        });
        if matches!(def.kind, DefKind::Method) {
            let flags = method_flags(&def.decorators);
            entry.flags.is_static |= flags.is_static;
            entry.flags.is_class |= flags.is_class;
            entry.flags.is_property |= flags.is_property;
        }
    }
    for (i, (name, binding)) in scope.bindings.iter().enumerate() {
        // A `def` after an assignment of its name replaces it, as an assignment after a `def`
        // replaces the method.
        if let (Binding::Def(d), Some(m)) = (binding, members.get_mut(name.as_str()))
            && !syntax.def(*d).is_accessor()
        {
            m.method_replaced = false;
            m.values.clear();
        }
        if let Binding::Value(_) | Binding::Unpack(..) = binding {
            let value = without_constants(s.close_binding(binding, body, 0));
            if let Some(m) = members.get_mut(name.as_str()) {
                m.class_body_value = true;
                // Once the class body ran, a replacing assignment is all that is left of earlier ones.
                if scope.replacing_index(i) {
                    m.values.clear();
                    m.method_replaced = matches!(m.kind, DefKind::Method);
                }
                if value != Expr::Unknown && !m.values.contains(&value) {
                    m.values.push(value);
                }
            }
        }
    }
    for m in members.values_mut() {
        m.class_body_values = m.values.len() as u32;
    }
    // Attribute values assigned through the first parameter of the class's methods.
    for &sc_id in children.function_scopes.get(&body).map_or(&[][..], Vec::as_slice) {
        let sc = syntax.scope(sc_id);
        let Some(first) = sc.params.first() else {
            continue;
        };
        for store in &sc.attr_stores {
            if store.base != Expr::Name(first.name.clone()) {
                continue;
            }
            let value = without_constants(s.close(&store.value, sc_id, 0));
            if let Some(m) = members.get_mut(store.attr.as_str()) {
                m.assigned_through_self = true;
                if value != Expr::Unknown && !m.values.contains(&value) {
                    m.values.push(value);
                }
            }
        }
    }
    let mut members: Vec<(Name, Member)> = members.into_iter().collect();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    // An unknown metaclass is still one: its `__getitem__` answers before `__class_getitem__`.
    let metaclass = scope.metaclass.as_ref().map(|m| s.close(m, parent, 0));
    ClassSummary { bases, members, decorators, fields: scope.fields.to_vec(), metaclass }
}

/// The dependency key of a module-level name (`*` stands for the module's star-import surface).
pub fn name_key(module: &str, name: &str) -> String {
    format!("{module}\u{1}{name}")
}

/// A hash per module-level name of everything the summary says under it (its bindings, and the
/// classes and functions whose path starts with it), plus `*` (the module's star imports) and
/// `__all__`. Comparing two versions name by name tells which names changed, so that only the
/// files that looked those names up are re-resolved.
pub fn name_hashes(summary: &ModuleSummary) -> Vec<(String, u64)> {
    use std::hash::{Hash, Hasher};
    let mut hashers: std::collections::BTreeMap<&str, std::hash::DefaultHasher> = std::collections::BTreeMap::new();
    let top = |path: &str| path.split('.').next().unwrap_or(path).to_string();
    let mut tops: Vec<(String, u64)> = Vec::new();
    for (name, bindings) in &summary.names {
        let h = hashers.entry(name.as_str()).or_default();
        bindings.hash(h);
    }
    for (path, class) in &summary.classes {
        let mut h = std::hash::DefaultHasher::new();
        path.hash(&mut h);
        class.hash(&mut h);
        tops.push((top(path), h.finish()));
    }
    for (path, function) in &summary.functions {
        let mut h = std::hash::DefaultHasher::new();
        path.hash(&mut h);
        function.hash(&mut h);
        tops.push((top(path), h.finish()));
    }
    let mut out: std::collections::BTreeMap<String, u64> =
        hashers.into_iter().map(|(name, h)| (name.to_string(), h.finish())).collect();
    for (name, h) in tops {
        let entry = out.entry(name).or_insert(0);
        *entry = entry.rotate_left(5) ^ h;
    }
    // `*`: the module's own star imports (where names not defined here are looked for);
    // `__all__`: which of its names a star import of it exports (without `__all__`, that depends
    // only on the name itself, which its own entry covers).
    let mut star = std::hash::DefaultHasher::new();
    summary.star_imports.hash(&mut star);
    out.insert("*".to_string(), star.finish());
    let mut all = std::hash::DefaultHasher::new();
    summary.dunder_all.hash(&mut all);
    out.insert("__all__".to_string(), all.finish());
    out.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::lower;

    #[test]
    fn relative_imports_become_absolute() {
        let m = |level, name: &str| ModuleRef { level, name: name.into() };
        assert_eq!(absolute_module(&m(1, "models"), "requests.api", false).as_deref(), Some("requests.models"));
        assert_eq!(absolute_module(&m(1, "models"), "requests", true).as_deref(), Some("requests.models"));
        assert_eq!(absolute_module(&m(2, ""), "a.b.c", false).as_deref(), Some("a"));
        assert_eq!(absolute_module(&m(3, "x"), "a.b", false), None);
        // Above the top-level package: not an absolute import of the name.
        assert_eq!(absolute_module(&m(2, "beyond"), "pkg.mod", false), None);
        assert_eq!(absolute_module(&m(1, "sibling"), "script", false), None);
        assert_eq!(absolute_module(&m(2, "up"), "pkg.sub", true).as_deref(), Some("pkg.up"));
    }

    #[test]
    fn editing_a_literal_a_function_returns_or_a_class_holds_keeps_the_summary() {
        let before = lower("class A:\n    name = 'a'\n    def m(self):\n        return 'x'\nKEY = 'k'\n");
        let after = lower("class A:\n    name = 'b'\n    def m(self):\n        return 'y'\nKEY = 'k'\n");
        assert_eq!(summarise(&before, "m", false), summarise(&after, "m", false));
        // A module-level constant is part of the interface: other files select items by it.
        let renamed_key = lower("class A:\n    name = 'a'\n    def m(self):\n        return 'x'\nKEY = 'j'\n");
        assert_ne!(summarise(&before, "m", false), summarise(&renamed_key, "m", false));
    }

    #[test]
    fn body_edits_that_keep_the_interface_keep_the_summary() {
        let before = lower(
            "import os\nclass A:\n    def __init__(self):\n        self.x = B()\n    def m(self):\n        return 1\n",
        );
        let after = lower(
            "import os\nclass A:\n    def __init__(self):\n        print('hi')\n        self.x = B()\n    def m(self):\n        y = 2\n        return 1\n",
        );
        assert_eq!(summarise(&before, "m", false), summarise(&after, "m", false));
        let changed = lower(
            "import os\nclass A:\n    def __init__(self):\n        self.x = C()\n    def m(self):\n        return 1\n",
        );
        assert_ne!(summarise(&before, "m", false), summarise(&changed, "m", false));
    }

    #[test]
    fn half_typed_body_lines_keep_the_summary() {
        // The states an editor saves while a body line is typed: other files' facts must not be
        // re-derived on each keystroke, so the repaired file's summary is the finished one's.
        let finished = "import os\nclass A(Base):\n    def __init__(self):\n        self.x = B()\n        log('ready', self.x)\n    def m(self, k):\n        if k:\n            return 1\n        return 2\n\ndef f():\n    return A()\n";
        let expected = summarise(&lower(finished), "m", false);
        for typing in [
            ("        log('ready', self.x)\n", "        log(\n"),
            ("        log('ready', self.x)\n", "        log('rea\n"),
            ("        if k:\n", "        if k\n"),
            ("        if k:\n", "        if is_ready(k\n"),
            ("        log('ready', self.x)\n", "      log('ready', self.x)\n"),
        ] {
            let text = finished.replacen(typing.0, typing.1, 1);
            let syntax = lower(&text);
            assert!(syntax.parse_errors > 0, "{text}");
            assert_eq!(summarise(&syntax, "m", false), expected, "{text}");
        }
    }

    #[test]
    fn instance_attributes_carry_their_values() {
        let syn = lower(
            "class S:\n    def __init__(self, adapter=None):\n        a = HTTPAdapter()\n        self.adapter = a\n",
        );
        let sum = summarise(&syn, "m", false);
        let class = sum.class("S").unwrap();
        let member = class.member("adapter").unwrap();
        assert_eq!(member.values, vec![Expr::Call(Box::new(Expr::Name("HTTPAdapter".into())))]);
    }
}
