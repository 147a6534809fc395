//! A definition named by its public path, through the module that binds it by an import
//! (`httpx.Client` for `httpx._client.Client`): what users and LLM tools write. Found only where
//! Python would find it.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

/// `root` indexed in memory: the indexer (to index again) and its snapshot.
fn index(root: &std::path::Path) -> (Indexer, fresco_graph::Snapshot) {
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    (indexer, snapshot)
}

/// The names a query's rows give, in order.
fn names_of(snapshot: &fresco_graph::Snapshot, query: &str) -> Vec<String> {
    let out = fresco_query::run(&Context::new(snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}"));
    out.results.iter().map(|item| item.name.clone()).collect()
}

#[test]
fn a_public_path_through_a_reexport_names_the_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    let write = |path: &str, text: &str| {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "shop/__init__.py",
        "from ._impl.cart import Cart\nfrom ._impl import cart\nfrom ._impl.pay import *  # the public names\n\
         from ._impl.hidden import *\nfrom ._impl.other import Thing as _Thing\nimport shop._impl.deep\n\
         from ._impl.first import *\nfrom ._impl.second import *\nfrom ._impl.outer import *\n\
         from ._impl.typed import to_tuple\nimport json\nfrom collections.abc import Mapping as _Map\n\n\ndef lazy():\n    from ._impl.late import Late\n    return Late\n",
    );
    write("shop/_impl/__init__.py", "");
    write("shop/_impl/pay.py", "def pay(amount):\n    return amount\n\n\ndef _fee():\n    return 1\n");
    write("shop/_impl/hidden.py", "__all__ = [\"Public\"]\n\n\nclass Public:\n    pass\n\n\nclass Hidden:\n    pass\n");
    write("shop/_impl/other.py", "class Thing:\n    pass\n");
    write("shop/_impl/deep.py", "def g():\n    return 1\n");
    write("shop/_impl/first.py", "def twice():\n    return 1\n");
    write("shop/_impl/second.py", "def twice():\n    return 2\n");
    write("shop/_impl/late.py", "class Late:\n    pass\n");
    // A star import of a module that star-imports another, and binds a name by an import.
    write(
        "shop/_impl/outer.py",
        "from .inner import *\nfrom .other import Thing as Aliased\n\n__all__ = [\"Nested\", \"Aliased\"]\n",
    );
    write("shop/_impl/inner.py", "class Nested:\n    pass\n");
    // A name defined more than once (overloads, then the implementation): the import reaches the
    // last definition, `to_tuple#3`.
    write(
        "shop/_impl/typed.py",
        "from typing import overload\n\n\n@overload\ndef to_tuple(x: int) -> tuple: ...\n\n\n@overload\n\
         def to_tuple(x: str) -> tuple: ...\n\n\ndef to_tuple(x):\n    return (x,)\n",
    );
    write(
        "shop/_impl/cart.py",
        "class Cart:\n    def total(self):\n        return 0\n\n\ndef checkout(cart: Cart):\n    return cart.total()\n",
    );
    // `import a.b.c` binds the package `a`: its modules are reached through it.
    write("buyer.py", "import shop._impl.deep\nimport shop._impl.pay as paying\n");
    let (_, snapshot) = index(root);
    let names = |query: &str| names_of(&snapshot, query);
    let unknown = |query: &str| fresco_query::run(&Context::new(&snapshot), query).is_err();
    assert_eq!(names("show shop.Cart"), ["shop._impl.cart.Cart"]);
    assert_eq!(names("callers shop.Cart.total"), ["shop._impl.cart.checkout"]);
    // A module the package binds: its members by the package's path.
    assert_eq!(names("show shop.cart.checkout"), ["shop._impl.cart.checkout"]);
    // A star import binds the public names, or what `__all__` lists.
    assert_eq!(names("show shop.pay"), ["shop._impl.pay.pay"]);
    assert!(unknown("show shop._fee"), "not public");
    assert_eq!(names("show shop.Public"), ["shop._impl.hidden.Public"]);
    assert!(unknown("show shop.Hidden"), "not in __all__");
    // The name an import binds: `as` included.
    assert_eq!(names("show shop._Thing"), ["shop._impl.other.Thing"]);
    assert!(unknown("show shop.Thing"), "bound as _Thing");
    // `import shop._impl.deep` binds `shop`, not `deep`; an import in a function binds nothing
    // of the module.
    assert!(unknown("show shop.deep.g"));
    assert_eq!(names("show buyer.shop"), ["shop"]);
    assert_eq!(names("show buyer.shop._impl.deep.g"), ["shop._impl.deep.g"]);
    assert_eq!(names("show buyer.paying.pay"), ["shop._impl.pay.pay"]);
    assert!(unknown("show buyer.deep"), "bound as shop");
    assert!(unknown("show buyer.pay"), "bound as paying");
    assert!(unknown("show shop.Late"));
    // Two star imports of the same name: the last binds it.
    assert_eq!(names("show shop.twice"), ["shop._impl.second.twice"]);
    // Through a star import of a star import, and a name the star-imported module imports.
    assert_eq!(names("show shop.Nested"), ["shop._impl.inner.Nested"]);
    assert_eq!(names("show shop.Aliased"), ["shop._impl.other.Thing"]);
    // A name defined more than once: what the import binds, the last definition (the
    // implementation after its overloads), as calls through it resolve.
    assert_eq!(names("show shop.to_tuple"), ["shop._impl.typed.to_tuple#3"]);
    // A name bound to something outside the repository is that external node.
    assert_eq!(names("show shop.json"), ["json"]);
    assert_eq!(names("show shop._Map"), ["collections.abc.Mapping"]);
    assert!(unknown("show shop.Mapping"), "bound as _Map");
    assert!(unknown("show shop.json.loads"), "nothing inside an external module is known");
    // A name nothing binds is still unknown, with suggestions.
    let err = fresco_query::run(&Context::new(&snapshot), "show shop.Basket").expect_err("unknown");
    assert!(err.to_string().contains("shop.Basket"), "{err}");
}

/// A member a class inherits, named through the class (`flask.Flask.route` for
/// `Scaffold.route`): the first class of the method resolution order that defines it, as Python
/// finds it.
#[test]
fn an_inherited_member_is_named_through_the_class() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("pkg")).expect("mkdir");
    std::fs::write(root.join("pkg/__init__.py"), "from .m import Both\n").expect("write");
    std::fs::write(
        root.join("pkg/m.py"),
        "class Base:\n    def run(self):\n        return 0\n\n    def stop(self):\n        return 0\n\n\n\
         class Left(Base):\n    def run(self):\n        return 1\n\n\n\
         class Right(Base):\n    def run(self):\n        return 2\n\n    def stop(self):\n        return 2\n\n\n\
         class Both(Left, Right):\n    pass\n\n\nclass Error(ValueError):\n    pass\n\n\n\
         import json\n\n\nclass HasEncode:\n    def encode(self, o):\n        return o\n\n\n\
         class E2(json.JSONEncoder, HasEncode):\n    pass\n\n\ndef caller():\n    return E2().encode(1)\n\n\n\
         import abc\n\n\nclass Plain(object):\n    pass\n\n\nclass Mixin:\n    def mixed(self):\n        return 1\n\n\n\
         class WithMixin(Plain, Mixin):\n    pass\n\n\nclass Abstract(abc.ABC, Mixin):\n    pass\n",
    )
    .expect("write");
    let (mut indexer, snapshot) = index(root);
    let names = |query: &str| names_of(&snapshot, query);
    let unknown = |query: &str| fresco_query::run(&Context::new(&snapshot), query).is_err();
    // Both's MRO is Both, Left, Right, Base: `stop` is Right's (depth first would say Base's).
    assert_eq!(names("show pkg.m.Both.run"), ["pkg.m.Left.run"]);
    assert_eq!(names("show pkg.m.Both.stop"), ["pkg.m.Right.stop"]);
    assert_eq!(names("show pkg.m.Left.stop"), ["pkg.m.Base.stop"]);
    // Through the class's public path too.
    assert_eq!(names("show pkg.Both.stop"), ["pkg.m.Right.stop"]);
    assert!(unknown("show pkg.m.Both.missing"));
    // A base outside the repository takes its place in the order: its member, where the graph
    // knows it (the call in `caller` resolved to it), else nothing rather than a later class's.
    assert_eq!(names("show pkg.m.E2.encode"), ["json.JSONEncoder.encode"]);
    // An explicit `object` base does not hide the mixins after it, nor does a marker base.
    assert_eq!(names("show pkg.m.WithMixin.mixed"), ["pkg.m.Mixin.mixed"]);
    assert_eq!(names("show pkg.m.Abstract.mixed"), ["pkg.m.Mixin.mixed"]);
    assert!(unknown("show pkg.m.Error.args"));
    // A long chain is linearised as Python does, not by depth first (Right overrides Base).
    let mut chain = String::from("class Base:\n    def stop(self):\n        return 0\n\n\n");
    chain.push_str("class Left(Base):\n    pass\n\n\nclass Right(Base):\n    def stop(self):\n        return 1\n\n\n");
    chain.push_str("class C0(Left, Right):\n    pass\n\n\n");
    for n in 1..300 {
        chain.push_str(&format!("class C{n}(C{}):\n    pass\n\n\n", n - 1));
    }
    std::fs::write(root.join("pkg/chain.py"), chain).expect("write");
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let out = fresco_query::run(&Context::new(&snapshot), "show pkg.chain.C299.stop").expect("found");
    assert_eq!(out.results[0].name, "pkg.chain.Right.stop");
}

/// Identifiers are NFKC-normalised, as Python reads them (PEP 3131): `def ﬁnd()` defines
/// `find`, which a call `find()` reaches, and a name in a query is read the same way.
#[test]
fn identifiers_are_one_name_in_every_unicode_spelling() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::write(
        root.join("norm.py"),
        "from typing import Optional\n\n\ndef \u{fb01}nd():\n    return 1\n\n\ndef user():\n    return find()\n\n\n\
         class Caf\u{e9}:\n    pass\n\n\ndef make():\n    return Cafe\u{301}()\n\n\n\
         class Stra\u{df}e:\n    def run(self):\n        return 1\n\n\n\
         def annotated(x: Stra\u{df}e):\n    return x.run()\n\n\n\
         def deep(y: Optional[Optional[\u{ff33}tra\u{df}e]]):\n    return y.run()\n",
    )
    .expect("write");
    std::fs::write(root.join("other.py"), "from norm import \u{ff46}ind as f\n\n\ndef call():\n    return f()\n")
        .expect("write");
    let (_, snapshot) = index(root);
    let names = |query: &str| names_of(&snapshot, query);
    assert_eq!(names("callees norm.user"), ["norm.find"]);
    assert_eq!(names("callees norm.make"), ["norm.Caf\u{e9}"]);
    assert_eq!(names("callees other.call"), ["norm.find"]);
    // A name beyond ASCII in an annotation, however deep in it.
    assert_eq!(names("callees norm.annotated"), ["norm.Stra\u{df}e.run"]);
    assert_eq!(names("callees norm.deep"), ["norm.Stra\u{df}e.run"]);
    // Typed in any spelling, in names and in patterns.
    assert_eq!(names("show norm.\u{fb01}nd"), ["norm.find"]);
    assert_eq!(names("show norm.Cafe\u{301}"), ["norm.Caf\u{e9}"]);
    assert_eq!(names("find \"\u{fb01}nd\""), ["norm.find"]);
    assert_eq!(names("find \"\u{fb01}*\" kind function"), ["norm.find"]);
    assert_eq!(names("callers \"norm.\u{fb01}*\""), ["norm.user", "other.call"]);
    assert_eq!(names("find \"*\" kind function | where name = \"\u{fb01}nd\""), ["norm.find"]);
}
