//! What depends on a module: `importers M` and `impact M` count the modules that import names
//! from it (`from m import f`), not only those that import the module object (`from . import m`).

use fresco_indexer::{Indexer, IndexerOptions};
use fresco_query::Context;

/// Indexes a tree of `files` (path, text) and returns a function answering a query with the
/// sorted names of its results.
fn tree(files: &[(&str, &str)]) -> impl Fn(&str) -> Vec<String> {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let mut indexer = Indexer::in_memory(dir.path(), IndexerOptions { threads: 1, ..IndexerOptions::default() });
    indexer.refresh().expect("index");
    let snapshot = indexer.snapshot().clone();
    move |query: &str| {
        let _tree = &dir;
        let out = fresco_query::run(&Context::new(&snapshot), query).unwrap_or_else(|e| panic!("{query}: {e}"));
        let mut names: Vec<String> = out.results.iter().map(|item| item.name.clone()).collect();
        names.sort();
        names
    }
}

#[test]
fn impact_of_a_module_reaches_the_modules_that_import_names_from_it() {
    let names = tree(&[
        ("pkg/__init__.py", "from .core import CODES\n"),
        ("pkg/core.py", "CODES = {'a': 1}\n\n\ndef lookup(name):\n    return CODES[name]\n"),
        // Imports a name of `core`; read by `app`, which imports from `names`.
        ("pkg/names.py", "from .core import lookup\n\n\ndef code_of(name):\n    return lookup(name)\n"),
        ("pkg/app.py", "from .names import code_of\n\n\ndef main():\n    return code_of('a')\n"),
        // Imports the module object.
        ("pkg/whole.py", "from . import core\n\n\ndef first():\n    return core.lookup('a')\n"),
        // Imports nothing of it.
        ("pkg/unrelated.py", "def alone():\n    return 0\n"),
    ]);
    assert_eq!(names("importers pkg.core"), ["pkg", "pkg.names", "pkg.whole"]);
    let impact = names("impact pkg.core");
    for expected in ["pkg", "pkg.names", "pkg.whole", "pkg.app"] {
        assert!(impact.contains(&expected.to_string()), "impact of pkg.core lacks {expected}: {impact:?}");
    }
    assert!(!impact.iter().any(|n| n.starts_with("pkg.unrelated")), "{impact:?}");
    // Depth 1: the importers themselves and what reads the module (`core.lookup(...)`), not what
    // imports them in turn.
    assert_eq!(names("impact pkg.core depth 1"), ["pkg", "pkg.names", "pkg.whole", "pkg.whole.first"]);
}

#[test]
fn a_module_that_only_re_exports_a_name_is_imported_by_the_statements_naming_it() {
    // `compat` defines nothing of what it is asked for: one name comes from the standard
    // library, one from a sibling module.
    let names = tree(&[
        ("pkg/__init__.py", ""),
        ("pkg/compat.py", "from urllib.parse import urlparse\nfrom .impl import quote\n"),
        ("pkg/impl.py", "def quote(s):\n    return s\n"),
        ("pkg/uses_stdlib.py", "from .compat import urlparse\n"),
        ("pkg/uses_sibling.py", "from .compat import quote\n"),
        // Imports `quote` from where it is defined: depends on `impl`, not on `compat`.
        ("pkg/direct.py", "from .impl import quote\n"),
        // A submodule imported from its package is found through the submodule, not the package.
        ("pkg/whole.py", "from . import impl\n"),
    ]);
    assert_eq!(names("importers pkg.compat"), ["pkg.uses_sibling", "pkg.uses_stdlib"]);
    assert_eq!(names("importers pkg.impl"), ["pkg.compat", "pkg.direct", "pkg.uses_sibling", "pkg.whole"]);
    assert_eq!(names("importers pkg"), Vec::<String>::new());
    // The statement reaches the definition as before.
    assert_eq!(names("imports pkg.uses_sibling"), ["pkg.compat", "pkg.impl.quote"]);
}
