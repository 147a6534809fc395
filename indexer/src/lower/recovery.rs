//! A file with syntax errors: the repairs of `repair.rs` tried on it (an unclosed string or
//! bracket, missing colons, stray dedents), and the best kept when it leaves less of the file
//! in error than the text itself.

use super::*;

/// A repaired text of a file with errors, its tree, and the offsets of the bytes the repair
/// inserted, by stage: each stage's offsets are in the text after that stage (see `repair`).
pub(super) struct Repair {
    pub(super) text: String,
    pub(super) tree: Tree,
    pub(super) inserted: Vec<Vec<u32>>,
}

/// How many of a file's triple-quoted strings that hold code are tried as the one never closed.
pub(super) const STRING_CANDIDATES: usize = 3;

/// The best repair of `text` (whose tree is `tree`): a triple-quoted string that was never
/// closed closed; a dot ending a statement blanked; brackets closed (by either rule of
/// `repair::Closing`, mended either way of `repair::Mending`), the missing colons inserted, or
/// both; then statements dedented between two levels put back into their block. Kept only when it leaves less of the file in error
/// than the text itself (see [`error_extent`]).
pub(super) fn repair(text: &str, tree: &Tree) -> Option<Repair> {
    use crate::repair::StringEnd;
    let original = error_extent(tree.root_node());
    let mut best: Option<(Repair, (u32, u32))> = None;
    // An open triple-quoted string turns the rest of the file inside out (strings become code
    // and code strings): it is mended first, and the other repairs are tried on top of the best
    // such mending as well as on the text itself. Of mendings that leave as much in error, the
    // earlier is kept: strings ended before the first line that reads as code (a docstring typed
    // above the body it documents keeps the body), then before the next definition; the first
    // string that holds such a line first.
    let mut strings: Vec<(String, Vec<u32>)> = Vec::new();
    for when in [StringEnd::BeforeCode, StringEnd::BeforeDefinition] {
        for nth in 0..STRING_CANDIDATES {
            let Some(closed) = crate::repair::close_unclosed_triple_string(text, nth, when) else { break };
            if !strings.iter().any(|(seen, _)| *seen == closed.0) {
                strings.push(closed);
            }
        }
    }
    for (closed, inserted) in strings {
        if consider(&mut best, original, closed, vec![inserted]) {
            return best.map(|(fix, _)| fix);
        }
    }
    let string_mended = best.as_ref().map(|(fix, _)| (fix.text.clone(), fix.inserted.clone()));
    if let Some((base, stages)) = string_mended
        && mend(&base, &stages, original, &mut best)
    {
        return best.map(|(fix, _)| fix);
    }
    // A statement ending with a dot (`x = self.` while an attribute is picked): the dot blanked,
    // alone and under the other repairs. Blanking moves nothing: no insertions to map back.
    if let Some(undotted) = crate::repair::blank_trailing_dots(text)
        && (consider(&mut best, original, undotted.clone(), Vec::new()) || mend(&undotted, &[], original, &mut best))
    {
        return best.map(|(fix, _)| fix);
    }
    // A `def` or `class` header typed above the next statement, with neither colon nor body
    // yet: blanked, alone and under the other repairs. Blanking moves nothing either.
    if let Some(headless) = crate::repair::blank_bodiless_headers(text)
        && (consider(&mut best, original, headless.clone(), Vec::new()) || mend(&headless, &[], original, &mut best))
    {
        return best.map(|(fix, _)| fix);
    }
    // A line indented with a tab among lines indented with spaces: indented with spaces where
    // the line before it says, alone and under the other repairs.
    if let Some((untabbed, inserted)) = crate::repair::indent_tabbed_lines(text)
        && (consider(&mut best, original, untabbed.clone(), vec![inserted.clone()])
            || mend(&untabbed, std::slice::from_ref(&inserted), original, &mut best))
    {
        return best.map(|(fix, _)| fix);
    }
    if mend(text, &[], original, &mut best) {
        return best.map(|(fix, _)| fix);
    }
    // Last, a half-typed statement none of the above knows (`if x == 1` with no colon yet,
    // `x = a +`, `x = 1 + \`) above a definition: tree-sitter may fold the definition into its
    // error. The first line where an erring statement begins is blanked, then the next, a few
    // times, each kept if it leaves less in error, on the best repair so far (its insertions
    // kept) or the text itself. Blanking moves nothing.
    // If blanking one line at a time leaves errors, every such line at once is tried too
    // (on flask, click and requests' `newstatement` edits: every line alone kept 120 files of
    // 126 whole, the first line alone 114, the first line then every line 121; the first line
    // alone keeps `return a()` below `x = 1; y =`, which every line at once blanked).
    let start = match best.as_ref() {
        Some((fix, _)) => (fix.text.clone(), fix.inserted.clone()),
        None => (text.to_string(), Vec::new()),
    };
    for every_line in [false, true] {
        let (mut base, stages) = start.clone();
        let mut tree = parse(&base);
        for _ in 0..MAX_BLANKING_ROUNDS {
            let Some(current) = tree.as_ref() else { break };
            let Some(blanked) = blank_error_lines(&base, current.root_node(), every_line) else { break };
            let Some(extent) = offer(&mut best, original, blanked.clone(), stages.clone()) else { break };
            if extent == (0, 0) {
                return best.map(|(fix, _)| fix);
            }
            tree = parse(&blanked);
            base = blanked;
        }
    }
    best.map(|(fix, _)| fix)
}

/// How many times [`blank_error_lines`] is applied to what it left (a line each time).
pub(super) const MAX_BLANKING_ROUNDS: usize = 4;

/// `text` with the first line where a statement holding an error of `root` begins blanked
/// (every byte but the newline a space), or with `every_line` each such line, unless it begins
/// a definition (`def`, `class`, a decorator: the unit is what the
/// blanking must keep); `None` when no line qualifies.
pub(super) fn blank_error_lines(text: &str, root: Node, every_line: bool) -> Option<String> {
    let bytes = text.as_bytes();
    let mut lines: Vec<usize> = Vec::new();
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            // The statement the error is in: `def f` read as part of `if x == 1`'s condition
            // is the `if`'s error, and that line is the one to blank.
            let mut statement = node;
            while let Some(parent) = statement.parent() {
                if matches!(parent.kind_str(), "module" | "block" | "ERROR") {
                    break;
                }
                statement = parent;
            }
            let at = statement.start_byte().min(bytes.len());
            lines.push(bytes[..at].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1));
        }
        if node.has_error() || node.is_error() {
            let mut cursor = node.walk();
            stack.extend(node.children(&mut cursor));
        }
    }
    lines.sort_unstable();
    lines.dedup();
    // The first such line only: the errors after it are often its consequences (`return a()`
    // read into `y = ` above it), and blanking them too lost correct code. The next round
    // blanks the next line still in error.
    let mut out = bytes.to_vec();
    let mut blanked = false;
    for start in lines {
        let end = bytes[start..].iter().position(|&b| b == b'\n').map_or(bytes.len(), |i| start + i);
        let line = text.get(start..end).unwrap_or("").trim_start();
        let defines = ["def ", "class ", "async def ", "@"].iter().any(|k| line.starts_with(k));
        if defines || line.is_empty() {
            continue;
        }
        for b in &mut out[start..end] {
            if *b != b'\r' {
                *b = b' ';
            }
        }
        blanked = true;
        if !every_line {
            break;
        }
    }
    // Only ASCII bytes of whole lines were replaced by spaces: still UTF-8.
    if blanked { String::from_utf8(out).ok() } else { None }
}

/// Keeps a candidate text if it leaves less in error than the best so far; says whether
/// nothing is left to improve on.
pub(super) fn consider(
    best: &mut Option<(Repair, (u32, u32))>,
    original: (u32, u32),
    text: String,
    inserted: Vec<Vec<u32>>,
) -> bool {
    offer(best, original, text, inserted);
    best.as_ref().is_some_and(|(_, extent)| *extent == (0, 0))
}

/// [`consider`], returning what the candidate leaves in error (`None`: it did not parse).
pub(super) fn offer(
    best: &mut Option<(Repair, (u32, u32))>,
    original: (u32, u32),
    text: String,
    inserted: Vec<Vec<u32>>,
) -> Option<(u32, u32)> {
    let tree = parse(&text)?;
    let extent = error_extent(tree.root_node());
    if extent < best.as_ref().map_or(original, |(_, e)| *e) {
        *best = Some((Repair { text, tree, inserted }, extent));
    }
    Some(extent)
}

/// The bracket, colon and indentation repairs of `text` (itself a repair when `stages` is not
/// empty: the insertions that made it), offered to `best`; says whether nothing is left to
/// improve on.
pub(super) fn mend(
    text: &str,
    stages: &[Vec<u32>],
    original: (u32, u32),
    best: &mut Option<(Repair, (u32, u32))>,
) -> bool {
    use crate::repair::{Closing, Mending};
    let staged = |more: &[&Vec<u32>]| -> Vec<Vec<u32>> {
        stages.iter().cloned().chain(more.iter().map(|stage| (*stage).clone())).collect()
    };
    // The best of this text's own repairs (not of another base's), for the last step.
    let mut own: Option<(String, Vec<Vec<u32>>, (u32, u32))> = None;
    let mut try_one = |best: &mut Option<(Repair, (u32, u32))>, text: String, inserted: Vec<Vec<u32>>| -> bool {
        if let Some(extent) = offer(best, original, text.clone(), inserted.clone())
            && own.as_ref().is_none_or(|(.., e)| extent < *e)
        {
            own = Some((text, inserted, extent));
        }
        best.as_ref().is_some_and(|(_, extent)| *extent == (0, 0))
    };
    // The bracket repairs in order of preference (of repairs that leave as much in error, the
    // first is kept): a line at its statement's indentation is a new statement far more often
    // than a continuation, and a closed bracket keeps a call a call. Each is also tried with
    // the missing colons inserted, as is the text itself: a header typed without its colon
    // above a body with an open bracket needs both.
    let mut bases: Vec<(String, Vec<u32>)> = Vec::new();
    for (rule, mending) in [
        (Closing::ByIndentation, Mending::Close),
        (Closing::ByKeyword, Mending::Close),
        (Closing::ByIndentation, Mending::Blank),
        (Closing::ByKeyword, Mending::Blank),
    ] {
        if let Some(closed) = crate::repair::close_unclosed_brackets(text, rule, mending)
            && !bases.iter().any(|(seen, _)| *seen == closed.0)
        {
            bases.push(closed);
        }
    }
    for (closed, inserted) in bases {
        let with_colons = crate::repair::insert_missing_colons(&closed);
        if try_one(best, closed, staged(&[&inserted])) {
            return true;
        }
        if let Some((with_colons, colons)) = with_colons
            && try_one(best, with_colons, staged(&[&inserted, &colons]))
        {
            return true;
        }
    }
    if let Some((with_colons, colons)) = crate::repair::insert_missing_colons(text)
        && try_one(best, with_colons, staged(&[&colons]))
    {
        return true;
    }
    // Last, statements dedented between two levels, on top of the best of the above (or of
    // the text itself when none did better).
    let (base, mut stages) = match own {
        Some((text, inserted, extent)) if extent < original => (text, inserted),
        _ => (text.to_string(), stages.to_vec()),
    };
    match crate::repair::indent_stray_dedents(&base) {
        Some((indented, spaces)) => {
            stages.push(spaces);
            consider(best, original, indented, stages)
        }
        None => false,
    }
}
