//! Python's builtins and the external factories whose results are known: which builtins are
//! classes or functions, what calling them gives, which attributes builtin value types have,
//! and which arguments a builtin higher-order function calls.

use super::*;

/// The builtins that are classes: calling them makes an instance whose methods are known by name.
pub(super) const BUILTIN_CLASSES: &[&str] = &[
    "object",
    "int",
    "float",
    "complex",
    "bool",
    "str",
    "bytes",
    "bytearray",
    "list",
    "tuple",
    "dict",
    "set",
    "frozenset",
    "type",
    "range",
    "slice",
    "memoryview",
    "property",
    "staticmethod",
    "classmethod",
    "super",
    "Exception",
    "BaseException",
    "ValueError",
    "TypeError",
    "KeyError",
    "IndexError",
    "AttributeError",
    "RuntimeError",
    "NotImplementedError",
    "OSError",
    "IOError",
    "ImportError",
    "StopIteration",
    "AssertionError",
    "LookupError",
    "ArithmeticError",
    "ZeroDivisionError",
    "UnicodeError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "FileNotFoundError",
    "PermissionError",
    "TimeoutError",
    "ConnectionError",
    "DeprecationWarning",
    "UserWarning",
    "Warning",
    "RuntimeWarning",
    "PendingDeprecationWarning",
    "FutureWarning",
    "SyntaxError",
    "SyntaxWarning",
    "NameError",
    "RecursionError",
    "EOFError",
    "KeyboardInterrupt",
    "SystemExit",
    "GeneratorExit",
    "StopAsyncIteration",
    "BufferError",
    "MemoryError",
    "OverflowError",
    "ReferenceError",
    "EnvironmentError",
    "NotADirectoryError",
    "IsADirectoryError",
    "FileExistsError",
    "InterruptedError",
    "BlockingIOError",
    "ChildProcessError",
    "ProcessLookupError",
    "BrokenPipeError",
    "ConnectionAbortedError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "ModuleNotFoundError",
    "UnboundLocalError",
    "IndentationError",
    "TabError",
    "SystemError",
    "FloatingPointError",
    "ImportWarning",
    "UnicodeWarning",
    "BytesWarning",
    "ResourceWarning",
    "EncodingWarning",
    "UnicodeTranslateError",
    "ExceptionGroup",
    "BaseExceptionGroup",
];

pub(super) const BUILTIN_FUNCTIONS: &[&str] = &[
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "breakpoint",
    "callable",
    "chr",
    "compile",
    "delattr",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "filter",
    "format",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "locals",
    "map",
    "max",
    "min",
    "next",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "repr",
    "reversed",
    "round",
    "setattr",
    "sorted",
    "sum",
    "vars",
    "zip",
    "__import__",
    "NotImplemented",
    "Ellipsis",
    "__name__",
    "__file__",
    "__doc__",
    "__debug__",
    "__spec__",
    "__loader__",
    "__package__",
    "__builtins__",
    "__dict__",
    "__path__",
    "__all__",
    "__version__",
    "exit",
    "quit",
    "copyright",
    "credits",
    "license",
    "reload",
    "unicode",
    "basestring",
    "long",
    "xrange",
    "raw_input",
    "unichr",
    "execfile",
    "file",
    "cmp",
    "buffer",
    "apply",
    "intern",
    "coerce",
];

pub(super) fn builtin(name: &str) -> Option<Value> {
    builtin_name(name).map(Value::External)
}

/// `builtins.<name>` for a builtin class or function, shared: looked up by hash (this runs for
/// every name that is not bound in its module, and a scan of the lists was visible in profiles).
pub(super) fn builtin_name(name: &str) -> Option<Arc<str>> {
    static NAMES: std::sync::OnceLock<FxHashMap<&'static str, Arc<str>>> = std::sync::OnceLock::new();
    NAMES
        .get_or_init(|| {
            BUILTIN_CLASSES
                .iter()
                .chain(BUILTIN_FUNCTIONS)
                .map(|n| (*n, Arc::from(format!("builtins.{n}").as_str())))
                .collect()
        })
        .get(name)
        .cloned()
}

/// An instance of builtin type `name` (`str`, `list`, `NoneType`, ...).
pub(super) fn builtin_instance(name: &str) -> Value {
    static NONE_TYPE: std::sync::OnceLock<Arc<str>> = std::sync::OnceLock::new();
    let ty = match name {
        "NoneType" => Some(NONE_TYPE.get_or_init(|| Arc::from("builtins.NoneType")).clone()),
        _ => builtin_name(name),
    };
    Value::ExternalInstance(ty.unwrap_or_else(|| Arc::from(format!("builtins.{name}").as_str())))
}

pub(super) fn builtin_class_instance(external: &str) -> Option<Value> {
    let name = external.strip_prefix("builtins.")?;
    if BUILTIN_CLASSES.contains(&name) && !matches!(name, "super" | "property" | "staticmethod" | "classmethod") {
        Some(Value::ExternalInstance(Arc::from(external)))
    } else {
        None
    }
}

/// External factories whose result type is well known.
pub(super) const EXTERNAL_FACTORIES: &[(&str, &str)] = &[
    ("logging.getLogger", "logging.Logger"),
    ("re.compile", "re.Pattern"),
    ("re.match", "re.Match"),
    ("re.search", "re.Match"),
    ("re.fullmatch", "re.Match"),
    ("threading.Lock", "threading.Lock"),
    ("threading.RLock", "threading.RLock"),
    ("hmac.new", "hmac.HMAC"),
    // Methods of `str` and `bytes` that give the same type, or the other one.
    ("builtins.str.lower", "builtins.str"),
    ("builtins.str.upper", "builtins.str"),
    ("builtins.str.strip", "builtins.str"),
    ("builtins.str.lstrip", "builtins.str"),
    ("builtins.str.rstrip", "builtins.str"),
    ("builtins.str.replace", "builtins.str"),
    ("builtins.str.format", "builtins.str"),
    ("builtins.str.join", "builtins.str"),
    ("builtins.str.title", "builtins.str"),
    ("builtins.str.capitalize", "builtins.str"),
    ("builtins.str.casefold", "builtins.str"),
    ("builtins.str.removeprefix", "builtins.str"),
    ("builtins.str.removesuffix", "builtins.str"),
    ("builtins.str.encode", "builtins.bytes"),
    ("builtins.str.split", "builtins.list"),
    ("builtins.str.rsplit", "builtins.list"),
    ("builtins.str.splitlines", "builtins.list"),
    ("builtins.str.partition", "builtins.tuple"),
    ("builtins.str.rpartition", "builtins.tuple"),
    ("builtins.bytes.lower", "builtins.bytes"),
    ("builtins.bytes.upper", "builtins.bytes"),
    ("builtins.bytes.strip", "builtins.bytes"),
    ("builtins.bytes.lstrip", "builtins.bytes"),
    ("builtins.bytes.rstrip", "builtins.bytes"),
    ("builtins.bytes.replace", "builtins.bytes"),
    ("builtins.bytes.join", "builtins.bytes"),
    ("builtins.bytes.decode", "builtins.str"),
    ("builtins.bytes.split", "builtins.list"),
    ("builtins.bytes.rsplit", "builtins.list"),
    ("builtins.bytes.splitlines", "builtins.list"),
    ("builtins.bytes.partition", "builtins.tuple"),
    ("builtins.bytes.rpartition", "builtins.tuple"),
];

/// What iterating or unpacking the result of an external callable gives, when that is well
/// known: a `str` or `bytes` method that makes a list or tuple ([`EXTERNAL_FACTORIES`]) makes one
/// of its receiver's type (`text.split(":")`, `raw.partition(b";")`).
pub(super) fn external_call_element(external: &str) -> Option<Value> {
    let (_, product) = EXTERNAL_FACTORIES.iter().find(|(f, _)| *f == external)?;
    let (receiver, _) = external.rsplit_once('.')?;
    let sequence = matches!(*product, "builtins.list" | "builtins.tuple");
    (sequence && matches!(receiver, "builtins.str" | "builtins.bytes"))
        .then(|| Value::ExternalInstance(Arc::from(receiver)))
}

/// External classes whose names do not follow the CapWords convention (lowercase, or capitals).
pub(super) const LOWERCASE_EXTERNAL_CLASSES: &[&str] = &[
    "collections.defaultdict",
    "collections.deque",
    "collections.abc",
    "datetime.datetime",
    "datetime.date",
    "datetime.time",
    "datetime.timedelta",
    "datetime.timezone",
    "threading.local",
    "array.array",
    "io.open",
    // Classes of the standard library named in capitals, which no rule can tell from the
    // all-capitals functions and constants (`stat.S_IMODE`, `ctypes.POINTER`).
    "typing.IO",
    "smtplib.SMTP",
    "smtplib.SMTP_SSL",
    "smtplib.LMTP",
    "ftplib.FTP",
    "ftplib.FTP_TLS",
    "imaplib.IMAP4",
    "imaplib.IMAP4_SSL",
    "poplib.POP3",
    "poplib.POP3_SSL",
    "uuid.UUID",
    "hmac.HMAC",
    "ctypes.CDLL",
    "ctypes.PyDLL",
];

/// What calling an external name gives: an instance when the name is a class (a builtin class,
/// a CapWords name by PEP 8, or a known class named otherwise), a known factory's product; else
/// nothing is known. Other all-capitals names are left unknown: as many are functions, factories
/// or callable constants (`stat.S_IMODE`, `ctypes.POINTER`, `click.STRING`) as classes.
pub(super) fn external_call_result(external: &str) -> Option<Value> {
    if let Some(v) = builtin_class_instance(external) {
        return Some(v);
    }
    if let Some((_, product)) = EXTERNAL_FACTORIES.iter().find(|(f, _)| *f == external) {
        return Some(Value::ExternalInstance(Arc::from(*product)));
    }
    if external.starts_with("builtins.") {
        return None;
    }
    let last = external.rsplit('.').next().unwrap_or(external);
    let capwords =
        last.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && last.chars().any(|c| c.is_ascii_lowercase());
    if capwords || LOWERCASE_EXTERNAL_CLASSES.contains(&external) {
        Some(Value::ExternalInstance(Arc::from(external)))
    } else {
        None
    }
}

/// Whether an instance of external type `ty` can have attribute `attr`: false only for the
/// builtin value types and exceptions (`builtins.str`, `builtins.dict`, `builtins.KeyError`, ...)
/// that do not define it.
pub(super) fn builtin_has_attr(ty: &str, attr: &str) -> bool {
    match ty.strip_prefix("builtins.").and_then(crate::builtin_members::members) {
        Some(members) => members.binary_search(&attr).is_ok(),
        None => true,
    }
}

/// The arguments a builtin higher-order function calls, when `values` (what the call site's
/// callee is) include it: every positional argument of `map` and `filter` (whichever position
/// the function is in, the iterables are not callable), the first of `functools.reduce` and the
/// `itertools` filters, the `key=` of `sorted`, `min`, `max` and `list.sort`.
pub(super) fn builtin_callbacks<'c>(values: &[Value], call: &'c CallSite) -> Vec<&'c Expr> {
    let mut out: Vec<&Expr> = Vec::new();
    for v in values {
        let Value::External(x) = v else { continue };
        match &**x {
            "builtins.map" | "builtins.filter" => out.extend(call.args.iter()),
            "functools.reduce"
            | "itertools.starmap"
            | "itertools.filterfalse"
            | "itertools.takewhile"
            | "itertools.dropwhile" => out.extend(call.args.first()),
            "builtins.sorted" | "builtins.min" | "builtins.max" | "builtins.list.sort" => {
                out.extend(call.keywords.iter().filter(|(k, _)| k == "key").map(|(_, e)| e))
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod builtin_attr_tests {
    use super::builtin_has_attr;

    #[test]
    fn builtin_value_types_have_only_their_own_attributes() {
        assert!(builtin_has_attr("builtins.dict", "items"));
        assert!(builtin_has_attr("builtins.str", "removeprefix"));
        assert!(builtin_has_attr("builtins.int", "is_integer"));
        assert!(!builtin_has_attr("builtins.dict", "append"));
        assert!(!builtin_has_attr("builtins.str", "items"));
        // The builtin exceptions have theirs (`e.show()` on a caught `KeyError` is no edge).
        assert!(builtin_has_attr("builtins.ValueError", "args"));
        assert!(builtin_has_attr("builtins.OSError", "errno"));
        assert!(builtin_has_attr("builtins.KeyError", "__notes__"));
        assert!(!builtin_has_attr("builtins.KeyError", "show"));
        // Types without a member list keep every attribute.
        assert!(builtin_has_attr("builtins.zip", "anything"));
        assert!(builtin_has_attr("requests.Session", "anything"));
    }

    #[test]
    fn member_lists_are_sorted_for_binary_search() {
        for ty in ["object", "type", "int", "bool", "float", "str", "bytes", "list", "tuple", "dict", "set"] {
            let names = crate::builtin_members::members(ty).expect("a builtin type");
            assert!(names.windows(2).all(|w| w[0] < w[1]), "{ty}");
        }
    }
}
