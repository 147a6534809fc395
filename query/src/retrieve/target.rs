//! The target of a `context` request: which unit a name or a text stands for, where a function
//! not written yet will live, and how the header of a `def` reads (its parameters, its return
//! annotation, its decorators).
//!
//! Kept apart because it is the only part that reads the request: everything after it works
//! from a resolved [`Target`].

use fresco_graph::{Snapshot, UnitKind};

use super::class_guess::{ClassGuess, guess_class, module_classes};
use super::ids::{dir_of, function_ids, in_a_function, last_name, owner_of};
use crate::ast::{ContextTarget, Symbol};
use crate::exec::QueryError;

/// What a context is assembled for, resolved against the snapshot.
pub struct Target {
    /// The unit, when it exists.
    pub id: Option<String>,
    /// Its module (the file's module for a new function).
    pub module: String,
    /// The file it lives in.
    pub file: String,
    /// Its class, for methods.
    pub class: Option<String>,
    /// For a function not written yet, the line of its file it will be written at, when the
    /// request gave one (`FILE:LINE`): its source-order neighbours are the functions around it.
    pub line: Option<u32>,
    /// Text describing it: signature and docstring (what a retrieval lane is asked with).
    pub text: String,
    /// The same without the names of its module and class (which every neighbour shares).
    pub own_text: String,
    /// What the answer should say about how it was chosen, when the request named several
    /// units: which definition of a name defined more than once, the first of a glob's matches,
    /// or that a function given as text matched none or several same-named functions of FILE.
    pub note: Option<String>,
}

pub fn resolve_target(snapshot: &Snapshot, target: &ContextTarget) -> Result<Target, QueryError> {
    match target {
        ContextTarget::Unit(symbol) => {
            let mut ids = crate::exec::resolve_symbol(snapshot, symbol)?;
            // A glob matching a name's plain id (`BaseCommand.mai?`) stands for the name, as the
            // name written out does: its other definitions (`main#2`, `main#3`) join it, so that
            // the definition chosen is the one Python binds, not the first `@overload`.
            // A match of one definition (`get#?`) stands for the name too.
            if matches!(symbol, Symbol::Glob(_)) {
                // A set, not a scan of what was kept: a glob may match every unit of a repository.
                let mut seen: rustc_hash::FxHashSet<String> = rustc_hash::FxHashSet::default();
                let mut expanded: Vec<String> = Vec::with_capacity(ids.len());
                for id in &ids {
                    for d in crate::exec::definitions_of(snapshot, name_of_definition(id)) {
                        if seen.insert(d.clone()) {
                            expanded.push(d);
                        }
                    }
                }
                ids = expanded;
            }
            let asked_name = ids.first().cloned().unwrap_or_default();
            // Several names: the first one's definitions, chosen among as for one name.
            let first_name: Vec<String> =
                ids.iter().filter(|id| name_of_definition(id) == name_of_definition(&asked_name)).cloned().collect();
            let one_name = first_name.len() == ids.len();
            // Counted by name: a name's definitions are one of the units the request named.
            let count = if one_name {
                ids.len()
            } else {
                let mut names: Vec<&str> = ids.iter().map(|id| name_of_definition(id)).collect();
                names.sort_unstable();
                names.dedup();
                names.len()
            };
            let id = context_definition(snapshot, first_name)
                .ok_or_else(|| QueryError::Invalid("no unit to assemble context for".into()))?;
            let note = (count > 1).then(|| {
                if one_name {
                    format!(
                        "{count} definitions of {asked_name}: the context is for {id}, the last that is neither an @overload \
                         declaration nor a property's setter or deleter (name another with its #N suffix)"
                    )
                } else {
                    let written = match symbol {
                        Symbol::Name(name) | Symbol::Glob(name) => name.clone(),
                        Symbol::Location { file, line } => format!("{file}:{line}"),
                    };
                    format!("{written} names {count} units: the context is for the first, {id}; name one to choose")
                }
            });
            let unit = snapshot.unit(&id).ok_or_else(|| {
                let written = match symbol {
                    Symbol::Name(name) | Symbol::Glob(name) => name.clone(),
                    Symbol::Location { file, line } => format!("{file}:{line}"),
                };
                QueryError::Invalid(format!("'{id}' is external: there is no code to assemble context for"))
                    .about_place(&written)
            })?;
            let class = match unit.unit.kind {
                UnitKind::Method => owner_of(&id).map(str::to_string),
                _ => None,
            };
            // Where it lives helps the text lanes: its class and module names, split into words.
            let mut own_text = unit.unit.signature.as_deref().unwrap_or(&unit.unit.name).to_string();
            if let Some(doc) = &unit.unit.docstring {
                own_text.push('\n');
                own_text.push_str(doc);
            }
            // Where it lives helps the text lanes: its class and module names, split into words
            // (measured: without them BM25 finds 0.44 of the needed units in its top 50, with
            // them 0.61). The graph lane's word affinity uses `own_text`: every neighbour shares
            // those names.
            let mut text =
                unit.unit.name.rsplit_once('.').map(|(owner, _)| owner.replace(['.', '_'], " ")).unwrap_or_default();
            text.push('\n');
            text.push_str(&own_text);
            Ok(Target {
                module: unit.file.graph.module.clone(),
                file: unit.file.graph.path.clone(),
                class,
                text,
                own_text,
                id: Some(id),
                line: None,
                note,
            })
        }
        ContextTarget::New { text, file, line } => {
            let written = match line {
                Some(line) => format!("{file}:{line}"),
                None => file.clone(),
            };
            new_function_target(snapshot, text, file, *line).map_err(|e| e.about_place(&written))
        }
    }
}

/// The target of `context for "TEXT" in FILE[:LINE]`: a function not written yet.
fn new_function_target(snapshot: &Snapshot, text: &str, file: &str, line: Option<u32>) -> Result<Target, QueryError> {
    let file = &crate::exec::relative_path(file)?;
    let Some(entry) = crate::exec::find_file(snapshot, file)? else {
        // A function of a module not written yet: placed by the files beside it.
        let Some((path, module)) = new_module(snapshot, file) else {
            let name = file.rsplit('/').next().unwrap_or(file);
            let why = match name.strip_suffix(".py") {
                None if is_indexed_directory(snapshot, file) => format!(
                    "'{}' is a directory: give the .py file the new function will live in",
                    if file.is_empty() { "." } else { file.as_str() }
                ),
                None => format!("'{file}' is not indexed and not a Python file: give a .py file"),
                Some("__init__") => format!(
                    "no indexed file '{file}': a new __init__.py would change its directory's modules, so \
                     a function is not placed in one"
                ),
                Some(stem) if stem.is_empty() || stem.contains('.') => {
                    format!("no indexed file '{file}', and '{name}' cannot be a module's file")
                }
                Some(_) => format!(
                    "no indexed file '{file}', and no indexed file in its directory to tell the module a \
                     new file would be"
                ),
            };
            return Err(QueryError::Invalid(why));
        };
        let mut note = format!(
            "{path} is not indexed (not written yet?): the context is for a function of a new module {module}, \
             which can reach its package's modules"
        );
        if let Some(line) = line {
            note.push_str(&format!("; line {line} says nothing in a file not indexed"));
        }
        return Ok(Target {
            id: None,
            text: format!("{}\n{text}", module.replace(['.', '_'], " ")),
            module,
            file: path,
            class: None,
            line: None,
            own_text: text.to_string(),
            note: Some(note),
        });
    };
    // A skipped file has no lines to place by (its note says why).
    let line = line.filter(|_| entry.graph.skipped.is_none());
    let line_count = entry.graph.units.first().map_or(0, |module| module.end_line);
    if let Some(line) = line.filter(|&l| l > line_count.saturating_add(1)) {
        return Err(QueryError::Invalid(format!(
            "line {line} of {}: the file has {line_count} line{} (the new function may be written at line \
             {} at the latest)",
            entry.graph.path,
            if line_count == 1 { "" } else { "s" },
            line_count.saturating_add(1)
        )));
    }
    let Placement { id, class, ambiguous, guessed, unplaced_among } =
        place_new_function(snapshot, &entry.graph, text, line);
    // A file skipped by the index (not UTF-8, too large, ...) has no code to see: not
    // the stub it may hold, nor what it imports.
    let skipped = entry.graph.skipped.as_ref().map(|reason| {
        format!(
            "{} is not indexed ({reason}): its code is not seen (nor a stub of this name in it), and the \
             context is for a new function",
            entry.graph.path
        )
    });
    let several = (ambiguous.len() > 1).then(|| {
        format!(
            "{file} defines {} {} times ({}) and the text repeats the signature of none or several of them: \
             the context is for a new function; name one (`context ID`) to choose",
            defined_name(text).unwrap_or("it"),
            ambiguous.len(),
            ambiguous.join(", ")
        )
    });
    // Text that is no `def` header cannot be placed: it only describes what is wanted.
    let no_header = defined_name(text)
        .is_none()
        .then(|| "the text has no `def` header: it is read as a description of a new function of the file".to_string());
    // A class chosen by evidence may be wrong: the answer says which and why.
    let guessed = guessed.map(|g| {
        format!(
            "{} has {} classes and no line was given: the method is placed in {} ({}); give FILE:LINE to place \
             it elsewhere",
            entry.graph.path,
            g.classes,
            g.class,
            g.reasons()
        )
    });
    let unplaced = (unplaced_among > 1).then(|| {
        format!(
            "{} has {unplaced_among} classes and no line was given: nothing in the text sets one apart, so the \
             method is placed in none (its file's code counts, not a class's); give FILE:LINE to place it",
            entry.graph.path
        )
    });
    let notes: Vec<String> = [skipped, several, no_header, guessed, unplaced].into_iter().flatten().collect();
    let note = (!notes.is_empty()).then(|| notes.join("; "));
    // The text lanes get the names of where it will live, as for an existing unit.
    let owner = class.as_deref().unwrap_or(&entry.graph.module).replace(['.', '_'], " ");
    Ok(Target {
        line: if id.is_none() { line } else { None },
        id,
        module: entry.graph.module.clone(),
        file: entry.graph.path.clone(),
        class,
        text: format!("{owner}\n{text}"),
        own_text: text.to_string(),
        note,
    })
}

/// Whether `path` is a directory holding indexed files, as written or as the end of one (as a
/// file may be named by a suffix: `requests` for `src/requests`); the root, written `.`, is one.
fn is_indexed_directory(snapshot: &Snapshot, path: &str) -> bool {
    let dir = path.trim_end_matches('/');
    let (prefix, inner) = (format!("{dir}/"), format!("/{dir}/"));
    dir.is_empty()
        || dir == "."
        || snapshot.files().any(|f| f.graph.path.starts_with(&prefix) || f.graph.path.contains(&inner))
}

/// The path and module of `file`, a Python file not indexed yet, from the indexed files in its
/// directory (given as written, else as a suffix naming one directory, as for an indexed file): a
/// sibling `pkg/util.py` of module `app.pkg.util`, or `pkg/__init__.py` of module `app.pkg`, makes
/// `pkg/new.py` module `app.pkg.new`; a sibling whose module name is not its file's (renamed to
/// avoid a clash, `tests.unit.conftest`) says nothing. A new `__init__.py` would change what its
/// siblings are: not placed.
fn new_module(snapshot: &Snapshot, file: &str) -> Option<(String, String)> {
    let (dir, name) = file.rsplit_once('/').unwrap_or(("", file));
    let stem = name.strip_suffix(".py")?;
    if stem.is_empty() || stem == "__init__" || stem.contains('.') {
        return None;
    }
    let mut siblings: Vec<&fresco_graph::FileEntry> =
        snapshot.files().filter(|f| dir_of(&f.graph.path) == dir).map(|f| &**f).collect();
    if siblings.is_empty() && !dir.is_empty() {
        let suffix = format!("/{dir}");
        siblings = snapshot.files().filter(|f| dir_of(&f.graph.path).ends_with(&suffix)).map(|f| &**f).collect();
        let first_dir = dir_of(&siblings.first()?.graph.path);
        if siblings.iter().any(|f| dir_of(&f.graph.path) != first_dir) {
            return None;
        }
    }
    let real_dir = dir_of(&siblings.first()?.graph.path).to_string();
    // The package the directory is: an `__init__.py`'s module, else what a sibling's module
    // name holds before its own file's name.
    let package = siblings.iter().find_map(|f| {
        let (own_name, module) = (f.graph.path.rsplit('/').next().unwrap_or(&f.graph.path), f.graph.module.as_str());
        let own_stem = own_name.strip_suffix(".py")?;
        if own_stem == "__init__" {
            return (module != "__init__" && !module.is_empty()).then(|| Some(module.to_string()));
        }
        if module == own_stem {
            return Some(None);
        }
        module.strip_suffix(own_stem)?.strip_suffix('.').map(|package| Some(package.to_string()))
    })?;
    let module = match package {
        Some(package) => format!("{package}.{stem}"),
        None => stem.to_string(),
    };
    let path = if real_dir.is_empty() { name.to_string() } else { format!("{real_dir}/{name}") };
    Some((path, module))
}

/// The name a definition's id is of: `m.C.get` for `m.C.get#2` (only a final `#N`: `m.f#2.inner`
/// is a name of its own).
fn name_of_definition(id: &str) -> &str {
    match id.rsplit_once('#') {
        Some((name, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => id,
    }
}

/// The definition Python binds `id`'s name to (see [`context_definition`]): `m.f#3` for each of
/// `m.f`, `m.f#2` and `m.f#3` when the first two are `@overload` declarations; the getter `m.C.x`
/// for a property's setter `m.C.x#2`. A name defined once stands for itself.
pub(super) fn bound_definition(snapshot: &Snapshot, id: &str) -> String {
    let name = name_of_definition(id);
    if name == id && !snapshot.contains_unit(&format!("{id}#2")) {
        return id.to_string();
    }
    context_definition(snapshot, crate::exec::definitions_of_name(snapshot, name)).unwrap_or_else(|| id.to_string())
}

/// Which of the definitions of one name (`ids`, see [`crate::exec::definitions_of`]) `context`
/// assembles for: the last, the one Python binds the name to and calls resolve to, passing over
/// `@overload` declarations (the implementation comes after them) and a property's setter and
/// deleter (the getter is what readers of the property run).
fn context_definition(snapshot: &Snapshot, ids: Vec<String>) -> Option<String> {
    let first = ids.first()?.clone();
    let name = last_name(&first);
    let is_declaration_or_accessor = |id: &str| {
        snapshot.unit(id).and_then(|u| u.unit.signature.clone()).is_some_and(|signature| {
            decorator_names(&signature).any(|d| {
                d.rsplit('.').next() == Some("overload")
                    || d == format!("{name}.setter")
                    || d == format!("{name}.deleter")
            })
        })
    };
    ids.iter().rev().find(|id| !is_declaration_or_accessor(id)).cloned().or(Some(first))
}

/// `signature` from its `def` line on, without the decorators heading it (which may span lines).
fn undecorated(signature: &str) -> &str {
    def_line(signature).map_or(signature, |(line, _)| &signature[line..])
}

/// The dotted names of the decorators heading `signature` (`t.overload` for `@t.overload`,
/// `app.route` for `@app.route("/")`).
fn decorator_names(signature: &str) -> impl Iterator<Item = &str> {
    signature
        .lines()
        .map(str::trim)
        .take_while(|line| line.starts_with('@'))
        .map(|line| line.trim_start_matches('@').split('(').next().unwrap_or("").trim())
}

/// Where a function given as text will live in `file`: the unit of the same name already there
/// (a stub, or the function being rewritten: its class and what it uses then count; among
/// several, the one whose signature the text repeats, else the one at `line`). If there is none:
/// with `line`, the innermost class whose lines after its first hold it, or, when the first
/// parameter is `self` or `cls`, the class ending last above it; without, when the first
/// parameter is `self` or `cls`, the file's class when there is only one at its top level, else
/// the one [`guess_class`] chooses, if any. Returns the unit's id and its class.
fn place_new_function(snapshot: &Snapshot, file: &fresco_graph::FileGraph, text: &str, line: Option<u32>) -> Placement {
    let mut placed = Placement { id: None, class: None, ambiguous: Vec::new(), guessed: None, unplaced_among: 0 };
    let name = defined_name(text);
    let same_name: Vec<&fresco_graph::Unit> = file
        .units
        .iter()
        .filter(|u| matches!(u.kind, UnitKind::Function | UnitKind::Method) && Some(last_name(&u.name)) == name)
        .collect();
    let holds = |u: &fresco_graph::Unit, line: u32| u.start_line <= line && line <= u.end_line;
    let chosen = match (line, same_name.as_slice()) {
        // Where it will be written decides: the function of that name there is the one being
        // rewritten; none there, it is new (a namesake elsewhere in the file is another function).
        (Some(line), _) => same_name.iter().filter(|u| holds(u, line)).max_by_key(|u| u.start_line).copied(),
        (None, [one]) => Some(*one),
        (None, []) => None,
        (None, many) => {
            // Several (methods of different classes): the one whose signature the text repeats.
            // A signature starts at its decorators, which the text need not repeat: the `def`
            // line decides, and the decorators only between definitions whose `def` lines are
            // the same.
            let header = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
            let given = header(text);
            let fits = |u: &&&fresco_graph::Unit, whole: bool| {
                u.signature.as_deref().is_some_and(|s| given.contains(&header(if whole { s } else { undecorated(s) })))
            };
            let by_def: Vec<&&fresco_graph::Unit> = many.iter().filter(|u| fits(u, false)).collect();
            let by_whole: Vec<&&fresco_graph::Unit> = by_def.iter().copied().filter(|u| fits(u, true)).collect();
            match (by_def.as_slice(), by_whole.as_slice()) {
                ([u], _) | (_, [u]) => Some(**u),
                _ => {
                    placed.ambiguous = many.iter().map(|u| u.id.clone()).collect();
                    None
                }
            }
        }
    };
    if let Some(u) = chosen {
        placed.class = (u.kind == UnitKind::Method).then(|| owner_of(&u.id).map(str::to_string)).flatten();
        placed.id = Some(u.id.clone());
        return placed;
    }
    let is_method = name.is_some() && first_parameter(text).is_some_and(|p| p == "self" || p == "cls");
    let classes = || file.units.iter().filter(|u| u.kind == UnitKind::Class && !u.is_lambda());
    if let Some(line) = line {
        // Of the classes holding the line, the innermost starts last.
        let holding = classes().filter(|c| c.start_line < line && line <= c.end_line).max_by_key(|c| c.start_line);
        // A method typed below a class's last line (a blank line after it) goes on that class;
        // not on a class local to a function that ended above: the line is outside the function.
        let functions = function_ids(file);
        let above = || {
            classes()
                .filter(|c| c.end_line < line && !in_a_function(&functions, &c.id))
                .max_by_key(|c| (c.end_line, std::cmp::Reverse(c.start_line)))
        };
        placed.class = holding.or_else(|| if is_method { above() } else { None }).map(|c| c.id.clone());
    } else if is_method {
        // The classes at the file's top level: a nested `Meta` or a class local to a function
        // is not where a method goes without a line.
        let top_level = module_classes(file);
        if let [only] = top_level.as_slice() {
            placed.class = Some(only.id.clone());
        } else if let Some(guess) = name.and_then(|name| guess_class(snapshot, file, text, name)) {
            placed.class = Some(guess.class.clone());
            placed.guessed = Some(guess);
        } else if top_level.len() > 1 {
            placed.unplaced_among = top_level.len();
        }
    }
    placed
}

/// Where [`place_new_function`] puts a function given as text.
struct Placement {
    /// The unit of that name already in the file, when one is it.
    id: Option<String>,
    /// Its class.
    class: Option<String>,
    /// The same-named functions of the file when the text matched none or several of them.
    ambiguous: Vec<String>,
    /// How the class was chosen for a method given with a file alone, in a file of several
    /// classes.
    guessed: Option<ClassGuess>,
    /// For a method given with a file alone that no class was chosen for: how many classes the
    /// file has at its top level (0 otherwise).
    unplaced_among: usize,
}

/// The name a `def` in `text` defines (`async def` too).
fn defined_name(text: &str) -> Option<&str> {
    let at = def_keyword(text)?;
    let rest = text[at + 4..].trim_start();
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    // An identifier starts with a letter or `_`: `def 123():` defines nothing.
    let name = &rest[..end];
    name.starts_with(|c: char| c.is_alphabetic() || c == '_').then_some(name)
}

/// Where the `def` keyword of the text's `def` line is.
fn def_keyword(text: &str) -> Option<usize> {
    def_line(text).map(|(_, def)| def)
}

/// The text's `def` line: the first line that starts with `def ` or `async def ` (past
/// decorators, whose arguments may say `def` too). Where its code starts, and where its `def`
/// keyword is.
fn def_line(text: &str) -> Option<(usize, usize)> {
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let code = line.trim_start();
        let code_at = at + (line.len() - code.len());
        if code.starts_with("def ") {
            return Some((code_at, code_at));
        }
        if let Some(rest) = code.strip_prefix("async")
            && rest.starts_with([' ', '\t'])
            && rest.trim_start().starts_with("def ")
        {
            return Some((code_at, code_at + "async".len() + (rest.len() - rest.trim_start().len())));
        }
        at += line.len();
    }
    None
}

/// Where the parameter list of the `def` in `text` opens (its `(`, past the decorators'
/// parentheses).
fn parameters_start(text: &str) -> Option<usize> {
    let def = def_keyword(text)?;
    Some(def + text[def..].find('(')?)
}

/// The first parameter's name of the `def` in `text`.
fn first_parameter(text: &str) -> Option<&str> {
    let open = parameters_start(text)?;
    let rest = text[open + 1..].trim_start();
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    (end > 0).then(|| &rest[..end])
}

/// Where the parameter list of the `def` in `text` ends (just past its `)`). Brackets and
/// string literals in the parameters are skipped, so a default like `sep="->"` or `(a, b)` does
/// not end it early.
fn parameters_end(text: &str) -> Option<usize> {
    let open = parameters_start(text)?;
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut chars = text[open..].char_indices();
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            (Some(_), '\\') => {
                chars.next();
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '(' | '[' | '{') => depth += 1,
            (None, ')' | ']' | '}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return Some(open + i + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// Where the return annotation of the `def` in `text` lies (`Response` in
/// `def send(self) -> Response:`), as a byte range, when it has one.
fn return_annotation_range(text: &str) -> Option<(usize, usize)> {
    let close = parameters_end(text)?;
    let after = text[close..].trim_start();
    let rest = after.strip_prefix("->")?;
    let start = text.len() - rest.len();
    // The annotation ends at the colon that ends the header, or at the end of its line (a unit's
    // stored signature has no colon, and its docstring follows on the next line): one outside
    // brackets.
    let mut depth = 0usize;
    let mut end = text.len();
    for (i, c) in rest.char_indices() {
        match c {
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            ':' | '\n' if depth == 0 => {
                end = start + i;
                break;
            }
            _ => {}
        }
    }
    Some((start, end))
}

/// The return annotation of the `def` in `text`, trimmed.
pub(super) fn return_annotation(text: &str) -> Option<&str> {
    return_annotation_range(text).map(|(start, end)| text[start..end].trim())
}

/// The header of the `def` in `text`: its decorators, name, parameters and return annotation,
/// without the docstring that follows.
pub(super) fn def_header(text: &str) -> Option<&str> {
    let end = match return_annotation_range(text) {
        Some((_, end)) => end,
        None => parameters_end(text)?,
    };
    Some(&text[..end])
}

/// The class or module a target is defined in (for a new function: where it will live).
pub(super) fn target_owner(target: &Target) -> &str {
    match &target.id {
        Some(id) => id.rsplit_once('.').map_or(id.as_str(), |(owner, _)| owner),
        None => target.class.as_deref().unwrap_or(&target.module),
    }
}

/// Whether the target is a method with no instance: a `classmethod` or `staticmethod` (by its
/// decorators, or a first parameter named `cls` when a text leaves the decorator out), or one of
/// the methods Python calls on the class (`__new__`, `__init_subclass__`, `__class_getitem__`).
/// What only an instance holds (`self.x = ...` in a method) is out of its reach, except through
/// an instance it makes.
pub(super) fn has_no_instance(target: &Target) -> bool {
    target.class.is_some() && takes_no_instance(&target.own_text, target_name(target))
}

/// Whether the method headed by `header` (decorators and `def` line) and named `name` takes no
/// instance (see [`has_no_instance`]).
pub(super) fn takes_no_instance(header: &str, name: Option<&str>) -> bool {
    is_class_or_static(header)
        // The special methods Python calls on a class: `__new__` is a static method, the other
        // two implicit class methods.
        || name.is_some_and(|n| matches!(n, "__new__" | "__init_subclass__" | "__class_getitem__"))
        || first_parameter(header) == Some("cls")
}

/// Whether the `def` in `text` is decorated `classmethod` or `staticmethod` (`@classmethod`,
/// `@builtins.staticmethod`, `@classmethod  # noqa`): any decorator line before the `def` line,
/// past comments and decorators whose arguments span lines.
fn is_class_or_static(text: &str) -> bool {
    let Some((def_at, _)) = def_line(text) else { return false };
    text[..def_at].lines().map(str::trim).filter_map(|line| line.strip_prefix('@')).any(|decorator| {
        let name = decorator.split(['(', '#']).next().unwrap_or("").trim();
        matches!(name.rsplit('.').next(), Some("classmethod" | "staticmethod"))
    })
}

/// Whether the target is an ordinary method working on an instance that already exists: a method
/// of a class with an instance (see [`has_no_instance`]), other than `__init__`, which sets it up.
pub(super) fn works_on_an_initialised_instance(target: &Target) -> bool {
    target.class.is_some() && !has_no_instance(target) && target_name(target) != Some("__init__")
}

/// The name the target has or will have (`send` for `pkg.Session.send`).
pub(super) fn target_name(target: &Target) -> Option<&str> {
    match &target.id {
        Some(id) => Some(last_name(id)),
        None => defined_name(&target.own_text),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_ends_before_the_docstring() {
        assert_eq!(def_header("def f(a: A) -> B:\n    \"\"\"Uses C.\"\"\""), Some("def f(a: A) -> B"));
        assert_eq!(def_header("@d(x)\ndef f(a=\")\"):\n    \"\"\"Doc (C).\"\"\""), Some("@d(x)\ndef f(a=\")\")"));
        assert_eq!(def_header("class C:"), None);
        // A unit's stored signature has no colon; its docstring follows.
        assert_eq!(def_header("def f(a: A) -> B\nUses C."), Some("def f(a: A) -> B"));
        assert_eq!(return_annotation("def f() -> Dict[\n    str, B\n]\nReturns C."), Some("Dict[\n    str, B\n]"));
    }

    #[test]
    fn the_first_parameter_is_the_defs_not_a_decorators() {
        assert_eq!(first_parameter("def f(self, x):"), Some("self"));
        assert_eq!(first_parameter("@app.route(\"/\")\ndef index(cls):"), Some("cls"));
        assert_eq!(first_parameter("async def f(\n    self,\n):"), Some("self"));
        assert_eq!(first_parameter("def f():"), None);
        assert_eq!(first_parameter("x = (1, 2)"), None);
        assert_eq!(first_parameter("@register(\"undef \")\ndef f(cls):"), Some("cls"));
    }

    #[test]
    fn the_defined_name_is_an_identifier_on_the_def_line() {
        assert_eq!(defined_name("def f(x):"), Some("f"));
        assert_eq!(defined_name("async  def _g():"), Some("_g"));
        assert_eq!(defined_name("@app.route(\"/undef x\")\ndef index():"), Some("index"));
        assert_eq!(defined_name("    def m(self):"), Some("m"));
        assert_eq!(defined_name("def 123():"), None);
        assert_eq!(defined_name("Parse the rules; undef them."), None);
        assert_eq!(defined_name("x = 'def y'"), None);
        assert_eq!(defined_name("asyncdef f():"), None);
    }

    #[test]
    fn the_return_annotation_is_read_past_brackets_and_strings_in_the_parameters() {
        assert_eq!(return_annotation("def send(self, r: Request) -> Response:"), Some("Response"));
        assert_eq!(
            return_annotation("async def f(sep=\"->\", p=(1, 2)) -> t.Optional[\"Style\"]"),
            Some("t.Optional[\"Style\"]")
        );
        assert_eq!(
            return_annotation("@property\ndef f(\n    self,\n) -> dict[str, t.Any]:\n    \"\"\"Doc: -> X.\"\"\""),
            Some("dict[str, t.Any]")
        );
        assert_eq!(return_annotation("def f(self):\n    \"\"\"Returns -> Response.\"\"\""), None);
        assert_eq!(return_annotation("def f(s='a)b') -> int"), Some("int"));
        assert_eq!(return_annotation("no function here"), None);
    }
}
