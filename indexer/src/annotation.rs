//! Type annotations as values: what `x: T`, `def f(p: T)` and `-> T` promise.
//!
//! An annotation is read from its source text (a string annotation is the same text in quotes,
//! so both go through one small parser) and turned into a value-form [`Expr`]:
//!
//! - a class name `C` or `m.C` becomes [`Expr::Instance`] of that name (resolved later, in the
//!   scope the annotation is written in; only names that resolve to classes give anything);
//! - `Optional[X]`, `Union[X, Y]`, `X | Y` become the union of their members (`None` dropped);
//! - containers and iterables (`List[X]`, `Sequence[X]`, `Iterator[X]`, `tuple[X, Y]`, ...)
//!   become a literal container of their element types, so iterating them yields X;
//! - wrappers whose value is their argument (`Annotated`, `ClassVar`, `Final`, `Awaitable`,
//!   `ContextManager`, ...) become their argument; `Type[X]` is the class X itself;
//! - `Callable[..., R]` becomes [`Expr::Returning`] R (read only for decorated names);
//! - anything else (`Any`, `Literal[...]`, type variables used as generics'
//!   arguments aside) promises nothing that resolution can use and is `Unknown` where it cannot
//!   name a class.
//!
//! The typing constructs are recognised by their last dotted component (`Optional`,
//! `typing.Optional`, `t.Optional`): that matches how they are imported in practice, and it never
//! creates an edge by itself (the classes inside still have to resolve).

use crate::summary::simplify_union;
use crate::syntax::{ContainerKind, Expr, Name};

/// How deep annotations nest before the parser gives up (pathological inputs only).
const MAX_NESTING: u32 = 16;

/// The most dots a dotted name of an annotation may have, as many as lowering follows in an
/// attribute chain ([`crate::lower::MAX_NESTING`]).
const MAX_DOTTED_PARTS: usize = crate::lower::MAX_NESTING as usize;

/// The value-form of the annotation written as `text` (without surrounding quotes, or with them:
/// a quoted annotation is a forward reference to the same text).
pub fn type_expr(text: &str) -> Expr {
    parse(text).map(|ty| instance_of(&ty, 0)).unwrap_or(Expr::Unknown)
}

/// How many parts (names, unions, arguments) a type alias may have once the aliases it names are
/// written out: `X1 = X0 | X0 | X0`, then `X2 = X1 | X1 | X1`, ... doubles or triples at each
/// level, and a file of a few lines would make an annotation of millions.
const MAX_ALIAS_PARTS: usize = 256;

/// The type aliases of a module, as far as it has been read: each alias's annotation with the
/// aliases it names (those recorded before it) already written out, so that reading an
/// annotation replaces each alias once and never recurses.
#[derive(Default)]
pub struct TypeAliases {
    aliases: rustc_hash::FxHashMap<String, Ty>,
}

impl TypeAliases {
    /// Records `name` as standing for the annotation `text` (an alias it names itself is left as
    /// written: `Node = Leaf | list["Node"]`). One that does not parse, or that would be too
    /// large written out, is no alias.
    pub fn record(&mut self, name: &str, text: &str) {
        // Too large already as written: not written out, and not read at length.
        let parsed = parse(text).filter(|ty| parts(ty, 0) <= MAX_ALIAS_PARTS);
        let expanded = parsed.map(|ty| self.expand(ty)).filter(|ty| parts(ty, 0) <= MAX_ALIAS_PARTS);
        match expanded {
            Some(ty) => {
                self.aliases.insert(name.to_string(), ty);
            }
            None => {
                self.aliases.remove(name);
            }
        }
    }

    /// Forgets `name` as an alias (it was bound to something else).
    pub fn remove(&mut self, name: &str) {
        self.aliases.remove(name);
    }

    /// [`type_expr`] with the aliases `usable` accepts written out where the annotation names
    /// them by a plain name (`p: Pair` after `Pair = tuple[Lo, Hi]`: a tuple of a `Lo` and a
    /// `Hi`); the names of those written out are added to `used`.
    pub fn type_expr(&self, text: &str, usable: &dyn Fn(&str) -> bool, used: &mut Vec<String>) -> Expr {
        let Some(ty) = parse(text) else {
            return Expr::Unknown;
        };
        if self.aliases.is_empty() {
            return instance_of(&ty, 0);
        }
        let ty = self.substitute(ty, usable, used);
        instance_of(&ty, 0)
    }

    /// `ty` with the aliases it names written out (for recording a new alias).
    fn expand(&self, ty: Ty) -> Ty {
        self.substitute(ty, &|_| true, &mut Vec::new())
    }

    fn substitute(&self, ty: Ty, usable: &dyn Fn(&str) -> bool, used: &mut Vec<String>) -> Ty {
        match ty {
            Ty::Name(name, args) if args.is_empty() => match self.aliases.get(&name).filter(|_| usable(&name)) {
                Some(aliased) => {
                    if !used.contains(&name) {
                        used.push(name);
                    }
                    aliased.clone()
                }
                None => Ty::Name(name, args),
            },
            Ty::Name(name, args) => {
                Ty::Name(name, args.into_iter().map(|a| self.substitute(a, usable, used)).collect())
            }
            Ty::Or(items) => {
                let mut members: Vec<Ty> = Vec::new();
                let mut seen: rustc_hash::FxHashSet<Ty> = rustc_hash::FxHashSet::default();
                for item in items {
                    // `A | B` written out inside `X | A`: a union of unions is one union, each
                    // member once (a set: an annotation may be a union of thousands).
                    let expanded = match self.substitute(item, usable, used) {
                        Ty::Or(inner) => inner,
                        other => vec![other],
                    };
                    for member in expanded {
                        if seen.insert(member.clone()) {
                            members.push(member);
                        }
                    }
                }
                if members.len() == 1 { members.pop().unwrap_or(Ty::Nothing) } else { Ty::Or(members) }
            }
            other => other,
        }
    }
}

/// How many parts `ty` has (names, unions, arguments), counting no further than past
/// [`MAX_ALIAS_PARTS`].
fn parts(ty: &Ty, counted: usize) -> usize {
    if counted > MAX_ALIAS_PARTS {
        return counted;
    }
    match ty {
        Ty::Name(_, args) => args.iter().fold(counted + 1, |n, a| parts(a, n)),
        Ty::Or(items) => items.iter().fold(counted + 1, |n, t| parts(t, n)),
        _ => counted + 1,
    }
}

/// The whole of `text` as an annotation.
fn parse(text: &str) -> Option<Ty> {
    // Names as Python reads them, NFKC-normalised: a quoted annotation (`"Ｆoo"`) is compiled
    // like code when it is evaluated. Only the runs of identifier characters: NFKC also makes
    // quotes, operators and digits of other characters (`＂`, `｜`, `²`), which Python does not
    // read as such.
    let normal: std::borrow::Cow<str> =
        if text.is_ascii() { std::borrow::Cow::Borrowed(text) } else { std::borrow::Cow::Owned(nfkc_names(text)) };
    let mut p = Parser { s: normal.as_bytes(), i: 0 };
    let ast = p.union(0)?;
    p.skip_ws();
    (p.i == p.s.len()).then_some(ast)
}

/// `text` with each run of identifier characters (XID_Continue) NFKC-normalised, the rest as
/// it is.
fn nfkc_names(text: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    for c in text.chars() {
        if c == '_' || unicode_ident::is_xid_continue(c) {
            run.push(c);
            continue;
        }
        out.extend(run.nfkc());
        run.clear();
        out.push(c);
    }
    out.extend(run.nfkc());
    out
}

/// The character whose UTF-8 starts at `bytes[0]`, if it does.
fn char_at(bytes: &[u8]) -> Option<char> {
    let width = match bytes.first()? {
        0x00..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    };
    std::str::from_utf8(bytes.get(..width)?).ok()?.chars().next()
}

/// Whether `text`, the value of a module's `X = text`, reads as a type alias: a union of types
/// (`Lo | Hi`, `Lo | None`) or a typing construct or builtin generic given its arguments
/// (`tuple[Lo, Hi]`, `Optional[Lo]`, `list[Lo]`). A subscript of anything else (`CONFIG["x"]`,
/// a generic class of the code) is not taken for one.
pub fn is_type_alias_value(text: &str) -> bool {
    let constructs = |name: &str| {
        let last = name.rsplit('.').next().unwrap_or(name);
        matches!(last, "Optional" | "Union" | "Callable" | "Type" | "type" | "Tuple" | "tuple")
            || [TRANSPARENT, AWAITABLE, ITERABLES, SETS, MAPPINGS].iter().any(|set| set.contains(&last))
    };
    // A string is a string unless declared a `TypeAlias`.
    if text.trim_start().starts_with(['"', '\'']) {
        return false;
    }
    match parse(text) {
        Some(Ty::Name(name, args)) => !args.is_empty() && constructs(&name),
        Some(Ty::Or(items)) => {
            items.iter().any(|t| matches!(t, Ty::Name(..)))
                && items.iter().all(|t| match t {
                    Ty::Name(name, args) => args.is_empty() || constructs(name),
                    Ty::NoneType => true,
                    _ => false,
                })
        }
        _ => false,
    }
}

/// The names a string annotation refers to (`"Optional[Console]"` refers to `Optional` and
/// `Console`), as name/attribute chains, so that a forward reference reads what it names like an
/// unquoted annotation does. Literal values (`Literal['a']`) and `Annotated` metadata are not
/// names. Text that is not an annotation refers to nothing.
pub fn names_in(text: &str) -> Vec<Expr> {
    let Some(ast) = parse(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    collect_names(&ast, &mut out);
    out
}

fn collect_names(ty: &Ty, out: &mut Vec<Expr>) {
    match ty {
        Ty::Nothing | Ty::NoneType | Ty::Ellipsis | Ty::List => {}
        Ty::Or(items) => items.iter().for_each(|t| collect_names(t, out)),
        Ty::Name(name, args) => {
            out.push(chain(name));
            let args: &[Ty] = match name.rsplit('.').next() {
                Some("Literal") => &[],
                Some("Annotated") => &args[..args.len().min(1)],
                _ => args,
            };
            args.iter().for_each(|t| collect_names(t, out));
        }
    }
}

/// The parsed shape of an annotation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Ty {
    /// A dotted name, possibly subscripted.
    Name(String, Vec<Ty>),
    /// `A | B`.
    Or(Vec<Ty>),
    /// `[A, B]` (the parameter list of `Callable`): parsed, never a value.
    List,
    /// Literals: nothing to resolve.
    Nothing,
    /// `None`: nothing to resolve either (kept apart from literals: `Lo | None` is a type,
    /// `a | 1` is not).
    NoneType,
    /// `...`: nothing to resolve either, but `Tuple[X, ...]` reads it as "any number of X".
    Ellipsis,
}

struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn skip_ws(&mut self) {
        while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
            self.i += 1;
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.s.get(self.i) == Some(&c) {
            self.i += 1;
            true
        } else {
            false
        }
    }

    fn union(&mut self, depth: u32) -> Option<Ty> {
        let mut items = vec![self.atom(depth)?];
        while self.eat(b'|') {
            items.push(self.atom(depth)?);
        }
        Some(if items.len() == 1 { items.pop()? } else { Ty::Or(items) })
    }

    fn atom(&mut self, depth: u32) -> Option<Ty> {
        if depth > MAX_NESTING {
            return None;
        }
        self.skip_ws();
        let c = *self.s.get(self.i)?;
        if c == b'"' || c == b'\'' {
            // A forward reference: the quoted text is itself an annotation.
            let quote = c;
            let start = self.i + 1;
            let end = start + self.s[start..].iter().position(|&b| b == quote)?;
            self.i = end + 1;
            let inner = std::str::from_utf8(&self.s[start..end]).ok()?;
            let mut p = Parser { s: inner.as_bytes(), i: 0 };
            // Quoted text that is no annotation is a value (`Literal["°C"]`, `Annotated[T, "→
            // meta"]`): it says nothing, and the rest of the annotation still stands.
            let ty = p.union(depth + 1);
            p.skip_ws();
            return Some(match ty {
                Some(ty) if p.i == p.s.len() => ty,
                _ => Ty::Nothing,
            });
        }
        if c == b'[' {
            self.i += 1;
            self.list(b']', depth)?;
            return Some(Ty::List);
        }
        if c == b'(' {
            self.i += 1;
            let ty = self.union(depth + 1)?;
            return if self.eat(b')') { Some(ty) } else { None };
        }
        if c == b'.' || c.is_ascii_digit() || c == b'-' {
            // `...` and numeric literals (in `Literal[1]`, `Tuple[int, ...]`).
            let start = self.i;
            while self.i < self.s.len() && matches!(self.s[self.i], b'.' | b'-' | b'0'..=b'9' | b'e' | b'x' | b'_') {
                self.i += 1;
            }
            return Some(if &self.s[start..self.i] == b"..." { Ty::Ellipsis } else { Ty::Nothing });
        }
        let start = self.i;
        // Letters beyond ASCII too (`Straße`): identifier characters (XID_Continue), each read
        // whole.
        while self.i < self.s.len() {
            let b = self.s[self.i];
            if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.') {
                self.i += 1;
                continue;
            }
            match char_at(&self.s[self.i..]) {
                Some(c) if !c.is_ascii() && unicode_ident::is_xid_continue(c) => self.i += c.len_utf8(),
                _ => break,
            }
        }
        if self.i == start {
            return None;
        }
        let name = std::str::from_utf8(&self.s[start..self.i]).ok()?.to_string();
        if name == "None" {
            return Some(Ty::NoneType);
        }
        // A dotted name longer than lowering follows says nothing (lowering cuts it too): as an
        // attribute chain 20,000 links deep, every walk over it overflowed the stack.
        if name.ends_with('.') || name.contains("..") || name.matches('.').count() > MAX_DOTTED_PARTS {
            return Some(Ty::Nothing);
        }
        let mut args = Vec::new();
        if self.eat(b'[') {
            args = self.list(b']', depth)?;
        }
        Some(Ty::Name(name, args))
    }

    /// Comma-separated annotations up to `close` (which is consumed).
    fn list(&mut self, close: u8, depth: u32) -> Option<Vec<Ty>> {
        let mut items = Vec::new();
        if self.eat(close) {
            return Some(items);
        }
        loop {
            items.push(self.union(depth + 1)?);
            if self.eat(b',') {
                if self.eat(close) {
                    return Some(items);
                }
                continue;
            }
            return if self.eat(close) { Some(items) } else { None };
        }
    }
}

/// A dotted name as a name/attribute chain.
fn chain(name: &str) -> Expr {
    let mut parts = name.split('.');
    let mut e = Expr::Name(Name::new(parts.next().unwrap_or(name)));
    for part in parts {
        e = Expr::Attr(Box::new(e), Name::new(part));
    }
    e
}

/// Typing constructs that say nothing resolution can use.
const OPAQUE: &[&str] = &[
    "Any",
    "Literal",
    "LiteralString",
    "TypeVar",
    "ParamSpec",
    "Concatenate",
    "NoReturn",
    "Never",
    "Self",
    "TypeAlias",
    "TypeGuard",
    "TypeIs",
    "Unpack",
    "object",
];

/// Constructs whose value is (an instance of) their first argument.
const TRANSPARENT: &[&str] =
    &["Annotated", "ClassVar", "Final", "Required", "NotRequired", "ReadOnly", "ContextManager", "AsyncContextManager"];

/// Constructs whose value is an instance of their last argument (`Coroutine[Y, S, R]` awaits to R).
const AWAITABLE: &[&str] = &["Awaitable", "Coroutine"];

/// Iterables whose elements are their first argument.
const ITERABLES: &[&str] = &[
    "List",
    "list",
    "Sequence",
    "MutableSequence",
    "Iterable",
    "Iterator",
    "Collection",
    "Reversible",
    "Generator",
    "AsyncIterator",
    "AsyncIterable",
    "AsyncGenerator",
    "Deque",
    "deque",
    "KeysView",
    "ValuesView",
];

const SETS: &[&str] = &["Set", "set", "FrozenSet", "frozenset", "AbstractSet", "MutableSet"];

/// Mappings: iterating yields keys, which are rarely instances worth following; only the mapping
/// itself is kept (no elements, so no key/value confusion).
const MAPPINGS: &[&str] =
    &["Dict", "dict", "Mapping", "MutableMapping", "DefaultDict", "defaultdict", "OrderedDict", "Counter", "ChainMap"];

fn instance_of(ty: &Ty, depth: u32) -> Expr {
    if depth > MAX_NESTING {
        return Expr::Unknown;
    }
    match ty {
        Ty::Nothing | Ty::NoneType | Ty::Ellipsis | Ty::List => Expr::Unknown,
        Ty::Or(items) => simplify_union(items.iter().map(|t| instance_of(t, depth + 1)).collect()),
        Ty::Name(name, args) => {
            let last = name.rsplit('.').next().unwrap_or(name);
            if OPAQUE.contains(&last) {
                return Expr::Unknown;
            }
            // A bare name: an instance of what it names (a bare qualifier, `x: Final`, is known
            // for one only once resolved: see the resolver's `instances`).
            if args.is_empty() {
                return Expr::Instance(Box::new(chain(name)));
            }
            let first = || args.first().map(|a| instance_of(a, depth + 1)).unwrap_or(Expr::Unknown);
            match last {
                "Optional" | "Union" => simplify_union(args.iter().map(|t| instance_of(t, depth + 1)).collect()),
                "Callable" => match args.get(1).map(|r| instance_of(r, depth + 1)) {
                    Some(Expr::Unknown) | None => Expr::Unknown,
                    Some(r) => Expr::Returning(Box::new(r)),
                },
                "Type" | "type" => args.first().map(|a| class_of(a, depth + 1)).unwrap_or(Expr::Unknown),
                _ if TRANSPARENT.contains(&last) => first(),
                _ if AWAITABLE.contains(&last) => {
                    args.last().map(|a| instance_of(a, depth + 1)).unwrap_or(Expr::Unknown)
                }
                _ if ITERABLES.contains(&last) => elements(ContainerKind::List, vec![first()]),
                _ if SETS.contains(&last) => elements(ContainerKind::Set, vec![first()]),
                // `Tuple[X, ...]`: any number of X, read as a list of X.
                "Tuple" | "tuple" if matches!(args.as_slice(), [_, Ty::Ellipsis]) => {
                    elements(ContainerKind::List, vec![first()])
                }
                // A fixed-size tuple keeps every position, known or not: `a, b` unpacked from a
                // `Tuple[Any, X]` is element 1, an X.
                "Tuple" | "tuple" => {
                    Expr::Container(ContainerKind::Tuple, args.iter().map(|a| instance_of(a, depth + 1)).collect())
                }
                _ if MAPPINGS.contains(&last) => Expr::Container(ContainerKind::Dict, Vec::new()),
                // A generic class of the code (`Base[str]`, `Queue[Job]`): an instance of it.
                _ => Expr::Instance(Box::new(chain(name))),
            }
        }
    }
}

/// A literal container of `items` (unknown ones dropped).
fn elements(kind: ContainerKind, items: Vec<Expr>) -> Expr {
    Expr::Container(kind, items.into_iter().filter(|e| *e != Expr::Unknown).collect())
}

/// `Type[X]`: the class X itself (or the union of classes).
fn class_of(ty: &Ty, depth: u32) -> Expr {
    if depth > MAX_NESTING {
        return Expr::Unknown;
    }
    match ty {
        Ty::Name(name, args) if args.is_empty() => {
            let last = name.rsplit('.').next().unwrap_or(name);
            if OPAQUE.contains(&last) { Expr::Unknown } else { chain(name) }
        }
        Ty::Name(name, args) if matches!(name.rsplit('.').next(), Some("Union" | "Optional")) => {
            simplify_union(args.iter().map(|t| class_of(t, depth + 1)).collect())
        }
        Ty::Or(items) => simplify_union(items.iter().map(|t| class_of(t, depth + 1)).collect()),
        _ => Expr::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(name: &str) -> Expr {
        Expr::Instance(Box::new(chain(name)))
    }

    #[test]
    fn names_and_forward_references() {
        assert_eq!(type_expr("Console"), inst("Console"));
        assert_eq!(type_expr("\"Console\""), inst("Console"));
        assert_eq!(type_expr("'rich.console.Console'"), inst("rich.console.Console"));
        assert_eq!(type_expr("None"), Expr::Unknown);
        assert_eq!(type_expr("Any"), Expr::Unknown);
    }

    #[test]
    fn optionals_and_unions_unwrap() {
        for text in
            ["Optional[X]", "typing.Optional[X]", "t.Optional[X]", "X | None", "Union[X, None]", "\"Optional[X]\""]
        {
            assert_eq!(type_expr(text), inst("X"), "{text}");
        }
        assert_eq!(type_expr("Union[A, B]"), Expr::Union(vec![inst("A"), inst("B")]));
        assert_eq!(type_expr("Optional['A | B']"), Expr::Union(vec![inst("A"), inst("B")]));
    }

    #[test]
    fn qualifiers_are_their_argument() {
        for text in ["Final[X]", "typing.ClassVar[X]", "t.Required[X]", "Annotated[X, 'meta']"] {
            assert_eq!(type_expr(text), inst("X"), "{text}");
        }
        // Alone, only resolution tells `typing.Final` from a class of the code named so.
        assert_eq!(type_expr("Final"), inst("Final"));
    }

    #[test]
    fn containers_carry_their_elements() {
        let list = |e| Expr::Container(ContainerKind::List, vec![e]);
        assert_eq!(type_expr("List[Parameter]"), list(inst("Parameter")));
        assert_eq!(type_expr("t.Sequence[\"Parameter\"]"), list(inst("Parameter")));
        assert_eq!(type_expr("Iterator[X]"), list(inst("X")));
        assert_eq!(type_expr("Generator[X, None, None]"), list(inst("X")));
        assert_eq!(type_expr("Dict[str, X]"), Expr::Container(ContainerKind::Dict, vec![]));
        assert_eq!(type_expr("Type[X]"), chain("X"));
        assert_eq!(type_expr("Callable[[X], Y]"), Expr::Returning(Box::new(inst("Y"))));
        assert_eq!(type_expr("Callable[..., Any]"), Expr::Unknown);
        assert_eq!(type_expr("Literal['a', 'b']"), Expr::Unknown);
        assert_eq!(type_expr("Base[str]"), inst("Base"));
        assert_eq!(type_expr("ContextManager[X]"), inst("X"));
    }

    #[test]
    fn tuples_keep_their_positions() {
        let tuple = |items| Expr::Container(ContainerKind::Tuple, items);
        assert_eq!(type_expr("Tuple[A, B]"), tuple(vec![inst("A"), inst("B")]));
        assert_eq!(type_expr("Tuple[Any, B]"), tuple(vec![Expr::Unknown, inst("B")]));
        assert_eq!(type_expr("tuple[None, B]"), tuple(vec![Expr::Unknown, inst("B")]));
        assert_eq!(type_expr("Tuple[A, ...]"), Expr::Container(ContainerKind::List, vec![inst("A")]));
        assert_eq!(
            type_expr("List[Tuple[A, B]]"),
            Expr::Container(ContainerKind::List, vec![tuple(vec![inst("A"), inst("B")])])
        );
    }

    #[test]
    fn string_annotations_name_what_they_refer_to() {
        assert_eq!(names_in("Console"), vec![chain("Console")]);
        assert_eq!(names_in("Optional[rich.console.Console]"), vec![chain("Optional"), chain("rich.console.Console")]);
        assert_eq!(names_in("Literal['a', 'b']"), vec![chain("Literal")]);
        assert_eq!(names_in("Annotated[X, 'meta data']"), vec![chain("Annotated"), chain("X")]);
        // Names beyond ASCII, NFKC-normalised as Python reads them; nothing else is: a fullwidth
        // quote stays inside the string, a superscript is no digit of a name, a fullwidth bar
        // no operator.
        assert_eq!(names_in("Stra\u{df}e"), vec![chain("Stra\u{df}e")]);
        assert_eq!(names_in("\u{ff26}oo"), vec![chain("Foo")]);
        assert_eq!(names_in("Literal[\"a\u{ff02}] | Bar | Literal[\u{ff02}b\"]"), vec![chain("Literal")]);
        assert!(!names_in("Bar\u{b2}").contains(&chain("Bar2")));
        assert!(names_in("Bar\u{ff5c}Foo").is_empty());
        // A quoted value that is no annotation leaves the rest of it standing.
        assert_eq!(type_expr("Annotated[Foo, \"\u{2192} meta\"]"), inst("Foo"));
        assert_eq!(type_expr("Optional[Annotated[Foo, \"\u{ab}meta\u{bb}\"]]"), type_expr("Optional[Foo]"));
        for text in
            ["Annotated[Foo, \"\u{2192} the target\"]", "Foo | Literal[\"\u{20ac}\"]", "Annotated[Foo, \"! ok\"]"]
        {
            assert!(names_in(text).contains(&chain("Foo")), "{text}");
        }
        assert_eq!(names_in("A | 'B'"), vec![chain("A"), chain("B")]);
        assert!(names_in("not an annotation").is_empty());
        assert!(names_in("").is_empty());
    }

    #[test]
    fn aliases_are_written_out_where_named() {
        let mut aliases = TypeAliases::default();
        aliases.record("Pair", "tuple[Lo, Hi]");
        aliases.record("Either", "Lo | Hi");
        aliases.record("Quoted", "\"Lo | Hi\"");
        aliases.record("Node", "Leaf | list[Node]");
        aliases.record("Loop", "Loop");
        aliases.record("Maybe", "Either | None | Lo");
        let read = |text: &str| aliases.type_expr(text, &|_| true, &mut Vec::new());
        let tuple = |items| Expr::Container(ContainerKind::Tuple, items);
        let list = |e| Expr::Container(ContainerKind::List, vec![e]);
        let either = Expr::Union(vec![inst("Lo"), inst("Hi")]);
        assert_eq!(read("Pair"), tuple(vec![inst("Lo"), inst("Hi")]));
        assert_eq!(read("Either"), either);
        assert_eq!(read("Quoted"), either);
        assert_eq!(read("Optional[Either]"), either);
        assert_eq!(read("list['Either']"), list(either.clone()));
        // An alias written out in another is one union, each member once.
        assert_eq!(read("Maybe"), either);
        // An alias naming itself stops at itself.
        assert_eq!(read("Node"), Expr::Union(vec![inst("Leaf"), list(inst("Node"))]));
        assert_eq!(read("Loop"), inst("Loop"));
        // A subscripted name is a generic, not the alias.
        assert_eq!(read("Pair[int]"), inst("Pair"));
        assert_eq!(type_expr("Pair"), inst("Pair"));
        // What the caller rules out is not written out, and what is written out is reported.
        let mut used = Vec::new();
        assert_eq!(
            aliases.type_expr("Pair | Either", &|name| name != "Pair", &mut used),
            Expr::Union(vec![inst("Pair"), inst("Lo"), inst("Hi")])
        );
        assert_eq!(used, vec!["Either".to_string()]);
    }

    #[test]
    fn aliases_stay_small_however_they_are_built() {
        let mut aliases = TypeAliases::default();
        aliases.record("X0", "A0 | None");
        for level in 1..40 {
            let below = format!("X{}", level - 1);
            aliases.record(&format!("X{level}"), &format!("{below} | {below} | {below}"));
        }
        assert_eq!(aliases.type_expr("X39", &|_| true, &mut Vec::new()), inst("A0"));
        // Without repeats to merge: recorded while it stays under the bound, then no alias.
        aliases.record("T0", "A0");
        for level in 1..40 {
            let below = format!("T{}", level - 1);
            aliases.record(&format!("T{level}"), &format!("tuple[{below}, {below}]"));
        }
        assert_ne!(aliases.type_expr("T7", &|_| true, &mut Vec::new()), inst("T7"));
        assert_eq!(aliases.type_expr("T8", &|_| true, &mut Vec::new()), inst("T8"));
    }

    #[test]
    fn what_reads_as_a_type_alias() {
        for text in
            ["tuple[Lo, Hi]", "Lo | Hi", "Lo | None", "t.Optional[Lo]", "list[Lo]", "dict[str, Lo]", "Callable[[], Lo]"]
        {
            assert!(is_type_alias_value(text), "{text}");
        }
        for text in ["CONFIG['x']", "Base[str]", "Lo", "None", "a | 1", "'Lo | Hi'", "f(x)", "[Lo]"] {
            assert!(!is_type_alias_value(text), "{text}");
        }
    }

    #[test]
    fn malformed_text_is_unknown() {
        assert_eq!(type_expr("List[X"), Expr::Unknown);
        assert_eq!(type_expr("a b"), Expr::Unknown);
        assert_eq!(type_expr(""), Expr::Unknown);
    }
}
