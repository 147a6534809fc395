//! Module names: which dotted name each file is imported as.
//!
//! The package root is found per file: walk up from the file's directory while the directory has
//! an `__init__.py`; the first directory without one is a root (so `src/requests/api.py` is
//! `requests.api` and `tests/test_api.py`, in a directory without `__init__.py`, is `test_api`).
//! Files whose names collide get their full dotted path instead, so every module name is unique.
//! Every file is also reachable under its full dotted path from the repository root (with and
//! without a leading `src.`), which is how namespace packages (directories without
//! `__init__.py`) are imported.

use rustc_hash::{FxHashMap, FxHashSet};

#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct ModuleInfo {
    pub name: String,
    pub is_package: bool,
}

#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct ModuleTable {
    /// Per input path, in input order.
    pub modules: Vec<ModuleInfo>,
    canonical: FxHashMap<String, usize>,
    aliases: FxHashMap<String, usize>,
    /// Dotted names of directories that hold modules (packages and namespace packages).
    packages: FxHashSet<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Lookup {
    File(usize),
    /// A directory that is a package without `__init__.py` (or whose `__init__` is not indexed).
    Namespace,
    Missing,
}

/// Top-level modules of CPython 3.11's standard library (`sys.stdlib_module_names`, without the
/// private `_` ones).
const STDLIB_MODULES: &[&str] = &[
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

fn is_stdlib_module(name: &str) -> bool {
    STDLIB_MODULES.binary_search(&name).is_ok()
}

fn dotted(parts: &[&str]) -> String {
    parts.join(".")
}

impl ModuleTable {
    /// Builds the table for `/`-separated relative paths of `.py` files.
    pub fn build(paths: &[&str]) -> ModuleTable {
        let dirs_with_init: FxHashSet<&str> = paths
            .iter()
            .filter_map(|p| p.strip_suffix("/__init__.py").or(if *p == "__init__.py" { Some("") } else { None }))
            .collect();

        // (name, is a package, full dotted path, importable by that name, outside any package)
        let mut proposed: Vec<(String, bool, String, bool, bool)> = Vec::with_capacity(paths.len());
        for path in paths {
            let without_ext = path.strip_suffix(".py").unwrap_or(path);
            let parts: Vec<&str> = without_ext.split('/').collect();
            let (dirs, stem) = parts.split_at(parts.len() - 1);
            let stem = stem[0];
            // The package root is above the topmost directory with an `__init__.py`; directories
            // without one below it are namespace portions of the package (`flask/sansio/app.py`
            // is `flask.sansio.app`). With no `__init__.py` at all, the file is a top-level module.
            let first_in_package =
                (0..dirs.len()).find(|&i| dirs_with_init.contains(dirs[..=i].join("/").as_str())).unwrap_or(dirs.len());
            let package = &dirs[first_in_package..];
            let is_package = stem == "__init__";
            let name = if is_package {
                if package.is_empty() { "__init__".to_string() } else { dotted(package) }
            } else {
                let mut all = package.to_vec();
                all.push(stem);
                dotted(&all)
            };
            let full = if is_package { dotted(dirs) } else { dotted(&parts) };
            // A script in a plain directory (no package above it) named like a standard-library
            // module (`tools/logging.py`) does not take that name from the standard library: only
            // scripts run from its own directory would import it, every other file gets the
            // standard module. It keeps its full dotted path.
            let outside_packages = first_in_package == dirs.len() && !dirs.is_empty();
            let name = if !is_package && outside_packages && is_stdlib_module(stem) { full.clone() } else { name };
            // `pkg/a.b.py` is no module Python can import as `pkg.a.b` (that is `pkg/a/b.py`).
            let importable = !stem.contains('.') && package.iter().all(|d| !d.contains('.'));
            proposed.push((name, is_package, full, importable, outside_packages));
        }

        // Resolve collisions: the shortest path keeps the short name; the others take their
        // full dotted path (and, in the worst case, the path itself).
        let mut by_name: FxHashMap<&str, Vec<usize>> = FxHashMap::default();
        for (i, (name, ..)) in proposed.iter().enumerate() {
            by_name.entry(name.as_str()).or_default().push(i);
        }
        let mut final_names: Vec<String> = proposed.iter().map(|p| p.0.clone()).collect();
        for (_, mut group) in by_name.into_iter().filter(|(_, g)| g.len() > 1) {
            // A package wins over a module of the same name (`p/dup/__init__.py` over
            // `p/dup.py`), as in Python's import system; then a file importable by the name
            // over one that is not (`pkg/a/b.py` over `pkg/a.b.py`); then the shallowest path.
            let rank = |i: usize| (!proposed[i].1, !proposed[i].3, paths[i].matches('/').count());
            group.sort_by_key(|&i| (rank(i), paths[i]));
            // Files outside any package, equally deep (`plugins/alpha/util.py` and
            // `plugins/beta/util.py`, imported as `plugins.alpha.util`): neither is more `util`
            // than the other, and the first by path took the short name. All keep their paths.
            let tied = rank(group[0]) == rank(group[1]) && proposed[group[0]].4 && proposed[group[1]].4;
            if tied {
                final_names[group[0]] = proposed[group[0]].2.clone();
            }
            for &i in &group[1..] {
                // The full dotted path, unless that is the very name the winner keeps.
                final_names[i] = if proposed[i].2 == final_names[group[0]] {
                    format!("{}[{}]", proposed[i].2, paths[i])
                } else {
                    proposed[i].2.clone()
                };
            }
        }
        let mut canonical = FxHashMap::default();
        for (i, name) in final_names.iter_mut().enumerate() {
            if canonical.contains_key(name.as_str()) {
                *name = format!("{name}[{}]", paths[i]);
            }
            canonical.insert(name.clone(), i);
        }
        let mut aliases = FxHashMap::default();
        let mut packages = FxHashSet::default();
        for (i, (_, _, full, ..)) in proposed.iter().enumerate() {
            for alias in [Some(full.as_str()), full.strip_prefix("src.")].into_iter().flatten() {
                if !alias.is_empty() && !canonical.contains_key(alias) {
                    aliases.entry(alias.to_string()).or_insert(i);
                }
            }
        }
        for name in canonical.keys().chain(aliases.keys()) {
            let mut prefix = name.as_str();
            while let Some(dot) = prefix.rfind('.') {
                prefix = &prefix[..dot];
                if !packages.insert(prefix.to_string()) {
                    break;
                }
            }
        }
        let modules = final_names
            .into_iter()
            .zip(proposed)
            .map(|(name, (_, is_package, ..))| ModuleInfo { name, is_package })
            .collect();
        ModuleTable { modules, canonical, aliases, packages }
    }

    pub fn lookup(&self, name: &str) -> Lookup {
        if let Some(&i) = self.canonical.get(name).or_else(|| self.aliases.get(name)) {
            return Lookup::File(i);
        }
        if self.packages.contains(name) {
            return Lookup::Namespace;
        }
        Lookup::Missing
    }

    /// Whether `name` is in the repository at all (as a module or a package directory).
    pub fn is_internal_root(&self, name: &str) -> bool {
        self.lookup(name) != Lookup::Missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_package_wins_over_a_module_of_the_same_name() {
        let table = ModuleTable::build(&["p/__init__.py", "p/dup.py", "p/dup/__init__.py"]);
        let names: Vec<&str> = table.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names[2], "p.dup", "{names:?}");
        assert_eq!(table.lookup("p.dup"), Lookup::File(2));
    }

    #[test]
    fn a_file_python_cannot_import_by_the_name_never_takes_it() {
        // `pkg/a.b.py` is no `pkg.a.b`: `pkg/a/b.py` is, though its path is deeper.
        let table = ModuleTable::build(&["pkg/__init__.py", "pkg/a.b.py", "pkg/a/__init__.py", "pkg/a/b.py"]);
        let names: Vec<&str> = table.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names[3], "pkg.a.b", "{names:?}");
        assert_eq!(table.lookup("pkg.a.b"), Lookup::File(3));
    }

    #[test]
    fn files_outside_packages_equally_placed_keep_their_paths() {
        // Namespace portions `plugins.alpha.util` and `plugins.beta.util`: neither is `util`.
        let table = ModuleTable::build(&["plugins/alpha/util.py", "plugins/beta/util.py", "tools/util2.py"]);
        let names: Vec<&str> = table.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["plugins.alpha.util", "plugins.beta.util", "util2"]);
        assert_eq!(table.lookup("util"), Lookup::Missing);
    }

    #[test]
    fn scripts_in_plain_directories_do_not_take_standard_library_names() {
        let paths = ["tools/logging.py", "tools/deploy.py", "pkg/__init__.py", "pkg/log.py", "json.py"];
        let table = ModuleTable::build(&paths);
        let names: Vec<&str> = table.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["tools.logging", "deploy", "pkg", "pkg.log", "json"]);
        assert_eq!(table.lookup("logging"), Lookup::Missing, "import logging is the standard library's");
        assert_eq!(table.lookup("tools.logging"), Lookup::File(0));
        assert!(STDLIB_MODULES.windows(2).all(|w| w[0] < w[1]), "sorted, for the binary search");
    }

    #[test]
    fn names_follow_package_roots() {
        let paths = [
            "src/requests/__init__.py",
            "src/requests/api.py",
            "src/requests/packages/__init__.py",
            "tests/test_api.py",
            "tests/unit/conftest.py",
            "tests/conftest.py",
            "setup.py",
            "ns/plugin.py",
            "src/requests/sansio/app.py",
        ];
        let t = ModuleTable::build(&paths);
        let names: Vec<&str> = t.modules.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "requests",
                "requests.api",
                "requests.packages",
                "test_api",
                "tests.unit.conftest",
                "conftest",
                "setup",
                "plugin",
                "requests.sansio.app"
            ]
        );
        assert!(t.modules[0].is_package);
        assert_eq!(t.lookup("requests.api"), Lookup::File(1));
        assert_eq!(t.lookup("ns.plugin"), Lookup::File(7), "namespace package path");
        assert_eq!(t.lookup("ns"), Lookup::Namespace);
        assert_eq!(t.lookup("json"), Lookup::Missing);
    }
}
