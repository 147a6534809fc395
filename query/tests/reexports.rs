//! A definition named by its public path, through the module that re-exports it (`httpx.Client`
//! for `httpx._client.Client`): what users and LLM tools write.

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

#[test]
fn a_public_path_through_a_reexport_names_the_definition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("shop/_impl")).expect("mkdir");
    std::fs::write(
        root.join("shop/__init__.py"),
        "from ._impl.cart import Cart\nfrom ._impl import cart\nfrom ._impl.pay import *  # the public names\n",
    )
    .expect("write");
    std::fs::write(root.join("shop/_impl/__init__.py"), "").expect("write");
    std::fs::write(
        root.join("shop/_impl/pay.py"),
        "def pay(amount):\n    return amount\n\n\ndef _fee():\n    return 1\n",
    )
    .expect("write");
    std::fs::write(
        root.join("shop/_impl/cart.py"),
        "class Cart:\n    def total(self):\n        return 0\n\n\ndef checkout(cart: Cart):\n    return cart.total()\n",
    )
    .expect("write");
    let mut indexer = Indexer::in_memory(root, IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    let names = |query: &str| -> Vec<String> {
        let out = fresco_query::run(&Context::new(&snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}"));
        out.results.iter().map(|item| item.name.clone()).collect()
    };
    assert_eq!(names("show shop.Cart"), ["shop._impl.cart.Cart"]);
    assert_eq!(names("callers shop.Cart.total"), ["shop._impl.cart.checkout"]);
    // A module imported by the package: its members by the package's path.
    assert_eq!(names("show shop.cart.checkout"), ["shop._impl.cart.checkout"]);
    // A star import's public names.
    assert_eq!(names("show shop.pay"), ["shop._impl.pay.pay"]);
    assert!(fresco_query::run(&Context::new(&snapshot), "show shop._fee").is_err(), "not public");
    // A name nothing imports is still unknown, with suggestions.
    let err = fresco_query::run(&Context::new(&snapshot), "show shop.Basket").expect_err("unknown");
    assert!(err.to_string().contains("shop.Basket"), "{err}");
}
