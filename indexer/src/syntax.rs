//! The lowered form of one Python file: what name resolution needs, without the syntax tree.
//!
//! tree-sitter trees are large and not comparable, so the frontend ([`crate::lower`]) walks each
//! tree once and keeps only this: the definitions (future units) with their spans, and for every
//! scope its bindings, calls, reads and attribute stores as small [`Expr`] trees. Keeping the IR
//! `Eq` lets salsa cut off propagation when a re-parse lowers to the same thing.

use std::sync::Arc;

/// An identifier (or another short string of the IR): up to [`Name::INLINE`] bytes are stored
/// inline, longer ones share one heap allocation between clones. Compares, orders and hashes
/// exactly like the `str` it holds, so it can key maps looked up by `&str`.
#[derive(Clone)]
pub struct Name(NameRepr);

#[derive(Clone)]
enum NameRepr {
    Inline(u8, [u8; Name::INLINE]),
    Heap(Arc<str>),
}

impl Name {
    pub const INLINE: usize = 22;

    pub fn new(text: &str) -> Name {
        if text.len() <= Name::INLINE {
            let mut buf = [0u8; Name::INLINE];
            buf[..text.len()].copy_from_slice(text.as_bytes());
            Name(NameRepr::Inline(text.len() as u8, buf))
        } else {
            Name(NameRepr::Heap(Arc::from(text)))
        }
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            // Resolution compares names constantly: validating UTF-8 on every look was 3 % of a
            // cold index.
            // SAFETY: `Inline` is only built by `Name::new`, from all `len` bytes of a `&str`
            // (the variant is private to this module), so `buf[..len]` is valid UTF-8.
            NameRepr::Inline(len, buf) => unsafe { std::str::from_utf8_unchecked(&buf[..*len as usize]) },
            NameRepr::Heap(s) => s,
        }
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl PartialEq for Name {
    fn eq(&self, other: &Name) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Name {}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialOrd for Name {
    fn partial_cmp(&self, other: &Name) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Name {
    fn cmp(&self, other: &Name) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

impl std::hash::Hash for Name {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Name {
    fn from(text: &str) -> Name {
        Name::new(text)
    }
}

impl From<String> for Name {
    fn from(text: String) -> Name {
        Name::new(&text)
    }
}

impl From<&String> for Name {
    fn from(text: &String) -> Name {
        Name::new(text)
    }
}

pub type ScopeId = u32;
pub type DefId = u32;

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum DefKind {
    Class,
    Function,
    Method,
    Variable,
    /// A `lambda` expression: a function unit named `<lambdaN>` (the N-th lambda of its owner,
    /// in source order). It binds no name, and it is not part of any summary: its identity is
    /// positional, so other files never see it.
    Lambda,
}

/// A definition that becomes a unit. The module itself is not a `Def`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Def {
    pub kind: DefKind,
    /// The simple name (`request`).
    pub name: Name,
    /// The unit id relative to the module: the dotted path (`Session.request`), with a `#N`
    /// suffix for the N-th redefinition of the same path in this file.
    pub path: Name,
    /// The def (or `None` for a top-level def) whose body contains this one.
    pub parent: Option<DefId>,
    /// The scope that is this definition's body (classes and functions).
    pub body: Option<ScopeId>,
    pub start_line: u32,
    pub end_line: u32,
    pub start_byte: u32,
    pub end_byte: u32,
    /// The byte range of the header (decorators through the parameters and return type, without
    /// the colon): the unit's signature, read from the file text when building units.
    pub header: Option<(u32, u32)>,
    /// The byte range of the docstring literal (see [`docstring_text`]).
    pub docstring: Option<(u32, u32)>,
    pub decorators: Box<[Expr]>,
    /// For functions: the return annotation, as the instances it promises (see [`Expr::Instance`]).
    pub return_type: Option<Expr>,
    /// Defined inside an `if`, `try`, loop, `with` or `match` of its scope: it may or may not
    /// be the definition in force.
    pub conditional: bool,
}

impl Def {
    /// `@x.setter` / `@x.deleter`: the same name as the getter, not what reading it gives.
    pub fn is_accessor(&self) -> bool {
        self.decorators.iter().any(|d| matches!(d, Expr::Attr(_, a) if a == "setter" || a == "deleter"))
    }

    /// The signature as written (`@dec\ndef f(a, b=g())`).
    pub fn signature(&self, source: &str) -> Option<String> {
        self.header.map(|(start, end)| source.get(start as usize..end as usize).unwrap_or("").to_string())
    }

    /// The cleaned docstring.
    pub fn docstring(&self, source: &str) -> Option<String> {
        self.docstring.map(|range| docstring_text(source, range))
    }
}

/// The cleaned text of the docstring literal at `range` of `source`.
pub fn docstring_text(source: &str, range: (u32, u32)) -> String {
    crate::lower::clean_docstring(source.get(range.0 as usize..range.1 as usize).unwrap_or(""))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ScopeKind {
    Module,
    Class,
    Function,
    /// Lambdas and comprehensions: they bind names but their code is attributed to the
    /// enclosing unit.
    Anonymous,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Param {
    pub name: Name,
    pub default: Option<Expr>,
    pub annotation: Option<Expr>,
    /// `*args` or `**kwargs`.
    pub variadic: bool,
    /// `**kwargs`: receives the keyword arguments no other parameter takes.
    pub keywords: bool,
}

/// A reference to code written in the file, as far as resolution cares.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Expr {
    Name(Name),
    Attr(Box<Expr>, Name),
    Call(Box<Expr>),
    /// An element of what iterating `value` gives: the target of `for x in value`, an element
    /// unpacked by `*rest`, added by `.extend(value)` or yielded by `yield from value`. Not a
    /// subscript written in the code (that is [`Expr::Item`] or [`Expr::ItemAt`]): for a class
    /// of the code the two differ (`__iter__` against `__getitem__`).
    Subscript(Box<Expr>),
    /// Literal containers: their elements (for dicts, the values).
    Container(ContainerKind, Vec<Expr>),
    /// A dict literal whose keys are all constant strings.
    Keyed(Vec<(Name, Expr)>),
    /// `value["key"]`: the item under a constant string key.
    Item(Box<Expr>, Name),
    /// `value[start:stop]`: a sequence of the same type holding some of its elements. When the
    /// start is a known non-negative integer (or left out), element `i` of the slice is element
    /// `start + i` of the value; otherwise positions are not known.
    Slice(Box<Expr>, Option<u32>),
    /// Elements added to a container by a method call (`items.append(f)`, `seen.add(f)`): it has
    /// these elements, and says nothing about the container's own type.
    Added(Vec<Expr>),
    /// Element `index` of a tuple or list (summaries only: `a, b = pair` at module level, where
    /// the element is taken when `pair` names a literal tuple, and any element otherwise).
    Element(Box<Expr>, u32),
    /// A lambda: the scope of its body.
    Lambda(ScopeId),
    /// `a if c else b`, `a or b`: any of these.
    Union(Vec<Expr>),
    /// A literal constant of a builtin type (`"x"`, `1`, `b""`, f-strings, ...).
    Literal(&'static str),
    /// A plain string or integer literal whose value is known, as a key (see [`constant_type`]):
    /// it is what a `Literal` of its type is, and it can select an item (`handlers[KEY]`).
    Constant(Name),
    /// `value[key]` where `key` is a name: the item under the constant the name holds, any item
    /// when it holds no single known constant. A key that is another expression (`t[i + 1]`),
    /// or a name closed into a summary, is [`Expr::Unknown`]: an item under a key nothing knows.
    ItemAt(Box<Expr>, Box<Expr>),
    /// `self` or `cls` inside a summary: the instance or class the method belongs to.
    SelfRef,
    ClsRef,
    /// A unit of the module, by path (summaries only: a local `def` returned or stored).
    DefPath(Name),
    /// An instance of the class(es) the inner expression names: what a type annotation
    /// (`x: T`, `-> T`) promises. Only classes (and builtin/external classes) count: an
    /// annotation naming anything else promises nothing.
    Instance(Box<Expr>),
    /// `x: T = value` (also `typing.cast(T, value)`): instances of T when T names a class of the
    /// repository (the value may be a proxy or come from outside), with the value's instances of
    /// T's subclasses; else whatever the value is.
    Declared(Box<Expr>, Box<Expr>),
    /// The value (second) read where `isinstance(value, T)` holds (T the first): instances of
    /// T, with the value's instances of T's subclasses. Unlike [`Expr::Declared`], a T outside
    /// the code (`dict`) narrows too: a test cannot be wrong where an annotation can.
    Narrowed(Box<Expr>, Box<Expr>),
    /// The value (second) read where `isinstance(value, T)` was found false (in the `elif` and
    /// `else` after it): the value's instances and classes other than T's and its subclasses'.
    NotInstance(Box<Expr>, Box<Expr>),
    /// `Callable[..., R]` in an annotation: something whose calls give R. It is no value by
    /// itself; what a decorator's annotation promises for the decorated name is read from it.
    Returning(Box<Expr>),
    /// The function the inner expression names as its `count` innermost decorators make it
    /// (the argument an outer decorator receives): the wrapper they return, or the function
    /// itself where they return it or what they return is not known.
    Decorated(Box<Expr>, u32),
    /// What entering the context manager gives (`with cm as x` at a module's top level, in a
    /// summary): `cm`'s `__enter__` (with `.1`, `__aenter__`) result. Only summaries make it;
    /// a function's own `with` is read from its binding.
    Entered(Box<Expr>, bool),
    /// `property(fget, fset, fdel, ...)` (or with `fget=`/`fset=`/`fdel=`): a property whose
    /// read on an instance calls the getter, whose assignment calls the setter and whose
    /// deletion the deleter, as `@property`, `@name.setter` and `@name.deleter` make one. Read
    /// any other way, it is the builtin property object.
    Property(Box<Expr>, Option<Box<Expr>>, Option<Box<Expr>>),
    Unknown,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ContainerKind {
    List,
    Tuple,
    Set,
    Dict,
}

impl ContainerKind {
    pub fn builtin(self) -> &'static str {
        match self {
            ContainerKind::List => "list",
            ContainerKind::Tuple => "tuple",
            ContainerKind::Set => "set",
            ContainerKind::Dict => "dict",
        }
    }
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Binding {
    /// `name = expr` (also annotated and augmented assignments, walrus, `global` writes).
    Value(Expr),
    /// `a, b = expr`: element `index` of `expr`.
    Unpack(Expr, u32),
    /// `for name in expr`, comprehension targets.
    Iter(Expr),
    /// `with expr as name`, and whether it is `async with` (which calls `__aenter__`).
    Enter(Expr, bool),
    /// A `def` or `class` statement.
    Def(DefId),
    Import(Import),
    /// The `index`-th parameter of the scope's function.
    Param(u32),
    /// `except E as name`: an instance of E.
    Exception(Expr),
}

/// What an import statement binds to one name.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum Import {
    /// `import a.b.c` binds `a` to module `a` (and makes `a.b.c` importable);
    /// `import a.b as x` binds `x` to module `a.b`.
    Module { module: ModuleRef },
    /// `from m import name [as x]`.
    Name { module: ModuleRef, name: Name },
}

/// A module as written in an import: absolute dotted name, or relative with its level.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ModuleRef {
    /// Number of leading dots (0 for absolute imports).
    pub level: u32,
    /// The dotted name after the dots (may be empty for `from . import x`).
    pub name: Name,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ImportStmt {
    pub line: u32,
    /// The modules named (`import a.b` names `a.b`, `from m import x` names `m`).
    pub module: ModuleRef,
    /// For `from m import a, b`: the names (`*` for a star import).
    pub names: Box<[Name]>,
    pub is_from: bool,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CallSite {
    pub callee: Expr,
    /// The byte range of the callee as written (for unresolved reports; see [`callee_text`]).
    pub callee_span: (u32, u32),
    pub line: u32,
    /// Positional arguments; those that cannot carry a callable or an instance (see
    /// [`is_flow_worthy`]) are kept as `Unknown`, to keep the positions of the others.
    pub args: Box<[Expr]>,
    /// Keyword arguments that can carry a callable or an instance.
    pub keywords: Box<[(Name, Expr)]>,
    /// How many positional and keyword arguments the call writes (`args` and `keywords` leave
    /// some out); `None` with a `*` or `**` argument, which passes any number.
    pub written: Option<(u16, u16)>,
}

/// A name or attribute chain read, written or deleted at a line.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Access {
    pub expr: Expr,
    pub line: u32,
    pub kind: AccessKind,
}

/// What an [`Access`] does with the last attribute of its chain (the attributes before it are
/// read either way).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AccessKind {
    Read,
    /// `obj.attr = v` (or a name bound): a property's setter runs, a descriptor's `__set__`.
    Write,
    /// `del obj.attr`: a property's deleter runs, a descriptor's `__delete__`; no getter.
    Delete,
}

/// `base.attr = value` (e.g. `self.timeout = timeout`).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct AttrStore {
    pub base: Expr,
    pub attr: Name,
    pub value: Expr,
    /// A store into the attribute's container (`self.adapters[prefix] = adapter`, `value` is
    /// the container's new elements): it adds to the attribute, and never defines it.
    pub element_only: bool,
    pub line: u32,
    /// The statement's span, used as the unit span when this store defines an instance attribute.
    pub start_line: u32,
    pub end_line: u32,
    pub start_byte: u32,
    pub end_byte: u32,
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Scope {
    pub kind: ScopeKind,
    pub parent: Option<ScopeId>,
    /// The def whose body this is (`None` for the module and anonymous scopes).
    pub def: Option<DefId>,
    pub params: Box<[Param]>,
    pub bindings: Box<[(Name, Binding)]>,
    /// Indices of the bindings that replace every earlier binding of their name once the scope
    /// ran (unconditional plain assignments in module and class bodies that do not read the
    /// name: `handler = first` then `handler = second`; unconditional imports there: `from .x
    /// import f` then `from .y import f`), with their lines.
    pub replacing: Box<[(u32, u32)]>,
    /// Indices, ascending, of the bindings a store through a subscript made (`d["k"] = v`,
    /// `table[k] = f`): they add items, and say what the name is only when nothing else does.
    pub item_stores: Box<[u32]>,
    pub globals: Box<[Name]>,
    pub nonlocals: Box<[Name]>,
    pub calls: Box<[CallSite]>,
    pub accesses: Box<[Access]>,
    pub attr_stores: Box<[AttrStore]>,
    pub returns: Box<[Expr]>,
    pub yields: Box<[Expr]>,
    pub raises: Box<[(Expr, u32)]>,
    /// What `for` statements and comprehensions iterate over, where, and whether asynchronously
    /// (`async for`): iterating an instance calls its class's `__iter__`, and `__next__` on what
    /// that returns (`__aiter__` and `__anext__`).
    pub iterations: Box<[(Expr, u32, bool)]>,
    /// The context managers `with` statements enter, where, and whether asynchronously
    /// (`async with`): entering an instance calls its class's `__enter__` and leaving it
    /// `__exit__` (`__aenter__` and `__aexit__`).
    pub contexts: Box<[(Expr, u32, bool)]>,
    /// Objects the scope's code subscripts (`obj[k]`, `obj[k] = v`, `del obj[k]`) or tests
    /// membership in (`x in obj`), where, and which: Python calls the special method of the
    /// object's class (see [`ImplicitCall`]).
    pub implicit_calls: Box<[(Expr, u32, ImplicitCall)]>,
    /// Operators applied (`a + b`, `a < b`, `-a`, `a += b`): Python calls a special method of
    /// an operand's class (see [`OperatorUse`]).
    pub operators: Box<[OperatorUse]>,
    /// For classes: the base class expressions (keyword arguments such as `metaclass=` excluded).
    pub bases: Box<[(Expr, u32)]>,
    /// For classes: the names the body annotates (`x: T`, `x: T = v`) in statements of its own,
    /// not under `if` or `try`, first annotation first: the fields of a `NamedTuple`, in their
    /// positional order.
    pub fields: Box<[Name]>,
    /// For classes: the metaclass the class statement names (`metaclass=M`): its methods are
    /// what `len(C)`, `C[k]` or `for x in C` call on the class object.
    pub metaclass: Option<Expr>,
    pub imports: Box<[ImportStmt]>,
}

impl Scope {
    /// The line of binding `index` if it is a replacing assignment (see [`Scope::replacing`]).
    pub fn replacing_line(&self, index: usize) -> Option<u32> {
        // In binding order, so sorted by index.
        let k = self.replacing.binary_search_by_key(&(index as u32), |&(i, _)| i).ok()?;
        Some(self.replacing[k].1)
    }

    /// Whether binding `index` is a replacing assignment.
    pub fn replacing_index(&self, index: usize) -> bool {
        self.replacing_line(index).is_some()
    }

    pub fn new(kind: ScopeKind, parent: Option<ScopeId>, def: Option<DefId>) -> Scope {
        Scope {
            kind,
            parent,
            def,
            params: Box::default(),
            bindings: Box::default(),
            replacing: Box::default(),
            item_stores: Box::default(),
            globals: Box::default(),
            nonlocals: Box::default(),
            calls: Box::default(),
            accesses: Box::default(),
            attr_stores: Box::default(),
            returns: Box::default(),
            yields: Box::default(),
            raises: Box::default(),
            iterations: Box::default(),
            contexts: Box::default(),
            implicit_calls: Box::default(),
            operators: Box::default(),
            bases: Box::default(),
            fields: Box::default(),
            metaclass: None,
            imports: Box::default(),
        }
    }
}

/// A special method Python calls on an object without a call in the source.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ImplicitCall {
    /// `obj[k]` read (also the read of `obj[k] += v`).
    GetItem,
    /// `obj[k] = v`, `obj[k] += v`, `for obj[k] in ...`.
    SetItem,
    /// `del obj[k]`.
    DelItem,
    /// `x in obj`, `x not in obj`.
    Contains,
    /// A truth test of `obj`: the condition of `if`, `elif`, `while`, `assert`, a conditional
    /// expression or a comprehension's `if`; the operand of `not`; an operand of `and` or `or`
    /// other than the last. `__bool__`, else `__len__`.
    Truth,
}

impl ImplicitCall {
    /// The special method called.
    pub fn method(self) -> &'static str {
        match self {
            ImplicitCall::GetItem => "__getitem__",
            ImplicitCall::SetItem => "__setitem__",
            ImplicitCall::DelItem => "__delitem__",
            ImplicitCall::Contains => "__contains__",
            ImplicitCall::Truth => "__bool__",
        }
    }
}

/// An operator applied at `line`: Python calls `method` of the left operand's class (`a + b`
/// calls `__add__`), and the reflected method of the right operand's class (`__radd__`; for
/// comparisons the mirrored one, `a < b` then `b.__gt__`) when the left's class has none (a
/// method returning `NotImplemented` is not seen), or first when the right's class is a
/// subclass of the left's overriding it. `a += b` is `__iadd__`, falling back to `__add__`. A
/// unary operator (`-a`: `__neg__`) has no right operand (`Unknown`). Only the leftmost operator
/// of a chain (`a + b + c`) has a left operand: the others' left is the result of the one
/// before, which nothing evaluates (`Unknown`, which takes no reflected method either).
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct OperatorUse {
    pub left: Expr,
    pub right: Expr,
    pub line: u32,
    pub method: &'static str,
}

/// The special method a binary operator (as tree-sitter spells it) calls.
pub fn binary_operator_method(op: &str) -> Option<&'static str> {
    Some(match op {
        "+" => "__add__",
        "-" => "__sub__",
        "*" => "__mul__",
        "@" => "__matmul__",
        "/" => "__truediv__",
        "//" => "__floordiv__",
        "%" => "__mod__",
        "**" => "__pow__",
        "<<" => "__lshift__",
        ">>" => "__rshift__",
        "&" => "__and__",
        "|" => "__or__",
        "^" => "__xor__",
        "<" => "__lt__",
        "<=" => "__le__",
        "==" => "__eq__",
        "!=" => "__ne__",
        ">" => "__gt__",
        ">=" => "__ge__",
        _ => return None,
    })
}

/// The special method an augmented assignment (`+=`) calls first.
pub fn inplace_operator_method(op: &str) -> Option<&'static str> {
    let binary = binary_operator_method(op.strip_suffix('=')?)?;
    // Comparisons have no augmented form (`<=` is one, not `<` assigned).
    Some(match binary {
        "__add__" => "__iadd__",
        "__sub__" => "__isub__",
        "__mul__" => "__imul__",
        "__matmul__" => "__imatmul__",
        "__truediv__" => "__itruediv__",
        "__floordiv__" => "__ifloordiv__",
        "__mod__" => "__imod__",
        "__pow__" => "__ipow__",
        "__lshift__" => "__ilshift__",
        "__rshift__" => "__irshift__",
        "__and__" => "__iand__",
        "__or__" => "__ior__",
        "__xor__" => "__ixor__",
        _ => return None,
    })
}

/// The special method a unary operator calls.
pub fn unary_operator_method(op: &str) -> Option<&'static str> {
    Some(match op {
        "-" => "__neg__",
        "+" => "__pos__",
        "~" => "__invert__",
        _ => return None,
    })
}

/// For an in-place method, the binary one Python falls back to (`__iadd__` → `__add__`).
pub fn binary_of_inplace(method: &str) -> Option<&'static str> {
    const PAIRS: [(&str, &str); 13] = [
        ("__iadd__", "__add__"),
        ("__isub__", "__sub__"),
        ("__imul__", "__mul__"),
        ("__imatmul__", "__matmul__"),
        ("__itruediv__", "__truediv__"),
        ("__ifloordiv__", "__floordiv__"),
        ("__imod__", "__mod__"),
        ("__ipow__", "__pow__"),
        ("__ilshift__", "__lshift__"),
        ("__irshift__", "__rshift__"),
        ("__iand__", "__and__"),
        ("__ior__", "__or__"),
        ("__ixor__", "__xor__"),
    ];
    PAIRS.iter().find(|(i, _)| *i == method).map(|(_, b)| *b)
}

/// The method Python tries on the right operand when the left one's does not answer: the
/// reflected arithmetic method (`__add__` → `__radd__`), the mirrored comparison (`__lt__` →
/// `__gt__`, `__eq__` → `__eq__`). `None` for unary methods.
pub fn reflected_operator_method(method: &str) -> Option<&'static str> {
    Some(match method {
        "__add__" => "__radd__",
        "__sub__" => "__rsub__",
        "__mul__" => "__rmul__",
        "__matmul__" => "__rmatmul__",
        "__truediv__" => "__rtruediv__",
        "__floordiv__" => "__rfloordiv__",
        "__mod__" => "__rmod__",
        "__pow__" => "__rpow__",
        "__lshift__" => "__rlshift__",
        "__rshift__" => "__rrshift__",
        "__and__" => "__rand__",
        "__or__" => "__ror__",
        "__xor__" => "__rxor__",
        "__lt__" => "__gt__",
        "__le__" => "__ge__",
        "__gt__" => "__lt__",
        "__ge__" => "__le__",
        "__eq__" => "__eq__",
        "__ne__" => "__ne__",
        _ => return None,
    })
}

#[derive(Clone, PartialEq, Eq, Debug)]
pub struct FileSyntax {
    pub parse_errors: u32,
    pub line_count: u32,
    pub byte_len: u32,
    /// The byte range of the module docstring literal (see [`docstring_text`]).
    pub docstring: Option<(u32, u32)>,
    /// Scope 0 is the module.
    pub scopes: Vec<Scope>,
    pub defs: Vec<Def>,
    /// `__all__`, when the module assigns a literal list or tuple of strings to it.
    pub dunder_all: Option<Vec<Name>>,
    /// Where the file first fails to parse, as a byte offset of its own text, and why: the
    /// first of tree-sitter's error and missing nodes and of the statements the lowering refuses.
    pub first_error: Option<(u32, String)>,
}

impl FileSyntax {
    /// Maps every byte offset of a syntax lowered from a repaired text back to the file's own
    /// text, where the repair inserted one byte at each of `inserted` (offsets in the repaired
    /// text, ascending; see `repair`). An offset at an inserted byte maps to where it was
    /// inserted, so a header ends before its missing colon.
    pub(crate) fn remove_insertions(&mut self, inserted: &[u32]) {
        if inserted.is_empty() {
            return;
        }
        let back = |offset: u32| offset - inserted.partition_point(|&at| at < offset) as u32;
        let range = |(start, end): (u32, u32)| (back(start), back(end));
        self.docstring = self.docstring.map(range);
        for def in &mut self.defs {
            def.start_byte = back(def.start_byte);
            def.end_byte = back(def.end_byte);
            def.header = def.header.map(range);
            def.docstring = def.docstring.map(range);
        }
        for scope in &mut self.scopes {
            for call in scope.calls.iter_mut() {
                call.callee_span = range(call.callee_span);
            }
            for store in scope.attr_stores.iter_mut() {
                store.start_byte = back(store.start_byte);
                store.end_byte = back(store.end_byte);
            }
        }
    }

    /// Of the bindings `indices` of one name in one scope, those that can be in force when the
    /// name is used after the scope ran: a replacing assignment (see [`Scope::replacing`])
    /// replaces every earlier binding, an unconditional `def`/`class` every earlier
    /// unconditional one, and property setters/deleters never stand for the property.
    pub fn live_bindings(&self, scope: ScopeId, indices: &[usize]) -> Vec<usize> {
        let sc = self.scope(scope);
        let from = indices.iter().rposition(|&i| sc.replacing_index(i)).unwrap_or(0);
        self.latest_defs(scope, &indices[from..])
    }

    /// Of the bindings `indices` of one name in one scope, in binding order: an unconditional
    /// `def`/`class` stands for every earlier unconditional one, and property setters/deleters
    /// never stand for the property.
    fn latest_defs(&self, scope: ScopeId, indices: &[usize]) -> Vec<usize> {
        let sc = self.scope(scope);
        let def_of = |i: usize| match &sc.bindings[i].1 {
            Binding::Def(d) => Some(self.def(*d)),
            _ => None,
        };
        let has_plain_def = indices.iter().any(|&i| def_of(i).is_some_and(|d| !d.is_accessor()));
        let last_unconditional =
            indices.iter().rev().find(|&&i| def_of(i).is_some_and(|d| !d.conditional && !d.is_accessor())).copied();
        indices
            .iter()
            .copied()
            .filter(|&i| match def_of(i) {
                Some(d) if d.is_accessor() && has_plain_def => false,
                Some(d) if !d.conditional && !d.is_accessor() => Some(i) == last_unconditional,
                _ => true,
            })
            .collect()
    }

    /// Of the bindings `indices` of one name in a module body, those in force at `line` of the
    /// body's own code while it runs: from the last replacing assignment before the line up to
    /// the first one after it (an assignment on a later line has not run yet), without the
    /// unconditional `def`s and `class`es that end on or after the line (not run yet either),
    /// and of the others the last (see [`Self::live_bindings`]).
    pub fn bindings_at_line(&self, scope: ScopeId, indices: &[usize], line: u32) -> Vec<usize> {
        let sc = self.scope(scope);
        let from = indices.iter().rposition(|&i| sc.replacing_line(i).is_some_and(|l| l < line)).unwrap_or(0);
        let to = indices.iter().position(|&i| sc.replacing_line(i).is_some_and(|l| l >= line)).unwrap_or(indices.len());
        let not_run_yet = |i: usize| match &sc.bindings[i].1 {
            Binding::Def(d) => {
                let d = self.def(*d);
                !d.conditional && d.end_line >= line
            }
            _ => false,
        };
        let run: Vec<usize> =
            indices.get(from..to.max(from)).unwrap_or_default().iter().copied().filter(|&i| !not_run_yet(i)).collect();
        self.latest_defs(scope, &run)
    }

    pub fn scope(&self, id: ScopeId) -> &Scope {
        &self.scopes[id as usize]
    }

    pub fn def(&self, id: DefId) -> &Def {
        &self.defs[id as usize]
    }
}

/// Arguments worth tracking into parameters: names, attributes, lambdas and containers of them
/// (what can carry a callable or an instance), and plain constants (not other literals).
pub fn is_flow_worthy(arg: &Expr) -> bool {
    // A constant argument flows too: an index or key the callee selects with (`ls[key]` in
    // `f(key)`). Inside containers constants do not count: a dict of strings carries nothing a
    // call could reach, and would crowd out the arguments that do.
    matches!(arg, Expr::Constant(_)) || carries_values(arg)
}

/// Whether `e` can carry a callable or an instance.
fn carries_values(e: &Expr) -> bool {
    match e {
        Expr::Name(_)
        | Expr::Attr(..)
        | Expr::Lambda(_)
        | Expr::Call(_)
        | Expr::Subscript(_)
        | Expr::Item(..)
        | Expr::ItemAt(..)
        | Expr::Decorated(..)
        | Expr::Entered(..)
        | Expr::Property(..) => true,
        Expr::Keyed(items) => items.iter().any(|(_, e)| carries_values(e)),
        Expr::Container(_, items) | Expr::Union(items) => items.iter().any(carries_values),
        Expr::Narrowed(_, value) | Expr::NotInstance(_, value) => carries_values(value),
        _ => false,
    }
}

pub type SharedSyntax = Arc<FileSyntax>;

/// Marks an integer key: integer keys are kept apart from string keys (`d[1]` is not `d["1"]`),
/// and a string key never starts with this control character.
pub const INTEGER_KEY: char = '\u{1}';

/// The builtin type of a constant's key (see [`Expr::Constant`]).
pub fn constant_type(key: &str) -> &'static str {
    if key.starts_with(INTEGER_KEY) { "int" } else { "str" }
}

const MAX_CALLEE_TEXT: usize = 120;

/// The callee of a call site as written, with whitespace runs folded and long text shortened.
pub fn callee_text(source: &str, span: (u32, u32)) -> String {
    let raw = source.get(span.0 as usize..span.1 as usize).unwrap_or("");
    let mut out = String::with_capacity(raw.len().min(MAX_CALLEE_TEXT));
    let mut last_space = false;
    for ch in raw.chars() {
        let ch = if ch.is_whitespace() { ' ' } else { ch };
        if ch == ' ' && last_space {
            continue;
        }
        last_space = ch == ' ';
        out.push(ch);
        if out.len() >= MAX_CALLEE_TEXT {
            out.push('…');
            break;
        }
    }
    out
}
