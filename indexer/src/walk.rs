//! Finding and reading the files of a repository.
//!
//! The walk is gitignore-aware (also outside a git checkout), skips version-control, virtualenv,
//! cache and build directories by default, and never fails as a whole because one entry
//! misbehaves: problems are collected as [`WalkIssue`]s.
//!
//! Symbolic links are not followed. The watcher sees changes under the root only, so a linked
//! file's or directory's target could change without the index knowing, and the freshness gate
//! would then vouch for stale facts. A linked `.py` file is listed and recorded as skipped with
//! that reason; a linked directory is reported as a walk issue.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fresco_graph::{FileStamp, Revision, SkipReason};

use crate::source_encoding::{DecodeError, decode_source};

/// Directory names skipped by default, wherever they are.
pub const DEFAULT_EXCLUDED_DIRS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".fresco",
    "__pycache__",
    "node_modules",
    "build",
    "dist",
    ".venv",
    "venv",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".eggs",
    "site-packages",
];

/// Of [`DEFAULT_EXCLUDED_DIRS`], the names that usually hold build output or a virtualenv
/// (`setup.py build`, `python -m build`, `python -m venv venv`) but are also the names of real
/// packages (pip's `_internal/operations/build`, pypa/build's `src/build`, CPython's
/// `Lib/venv`): such a directory is skipped only when it is not a package (no `__init__.py`).
pub const OUTPUT_DIR_NAMES: &[&str] = &["build", "dist", "venv"];

/// Whether the directory `dir`, named `name`, is left out by the exclusions of `options` (not
/// by gitignore rules): an excluded name, unless it is one of [`OUTPUT_DIR_NAMES`] and the
/// directory is a package.
pub fn is_excluded_dir(dir: &Path, name: &str, options: &WalkOptions) -> bool {
    options.excluded_dirs.iter().any(|e| e == name)
        && !(OUTPUT_DIR_NAMES.contains(&name) && dir.join("__init__.py").is_file())
}

/// Whether some directory on the relative path `rel` (a file's: its last part is not looked
/// at) is excluded ([`is_excluded_dir`]) or hidden.
pub fn in_excluded_dir(root: &Path, rel: &str, options: &WalkOptions) -> bool {
    let mut parts: Vec<&str> = rel.split('/').collect();
    parts.pop();
    let mut dir = root.to_path_buf();
    parts.iter().any(|p| {
        dir.push(p);
        (p.starts_with('.') && !p.is_empty()) || is_excluded_dir(&dir, p, options)
    })
}

/// Whether the directory at the relative path `rel` is itself left out by its name (hidden, or
/// excluded): an event naming it changes nothing the walk reads. A directory that no longer
/// exists cannot say whether it was a package, so a name of [`OUTPUT_DIR_NAMES`] counts only
/// while the directory is there (`mv build/ elsewhere` of a package named `build` is a change).
pub fn is_left_out_dir(root: &Path, rel: &str, options: &WalkOptions) -> bool {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if name.starts_with('.') && name != "." && name != ".." {
        return true;
    }
    if !options.excluded_dirs.iter().any(|e| e == name) {
        return false;
    }
    let dir = root.join(rel);
    !OUTPUT_DIR_NAMES.contains(&name) || (dir.is_dir() && is_excluded_dir(&dir, name, options))
}

/// Files larger than this are skipped, with the reason recorded, unless `--max-file-size` says
/// otherwise. Indexing one file peaks at about 100 to 300 bytes of memory per source byte,
/// depending on its shape (a generated 9.4 MB file of small functions: 1.0 GB), so a default of
/// 10 MiB let one file take a gigabyte or more; at 2 MiB the peak of the whole `fresco index`
/// process is 280 MB for 2 MB of small functions, and 550 to 650 MB for the densest shapes a
/// review found (2 MB of `x = [1,1,...]`: 564 MB; 520,000 lines of `f()`: 648 MB). Real source
/// is far smaller: django 5.1.4's largest file is 373 KB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 2 * 1024 * 1024;

#[derive(Clone, Debug)]
pub struct WalkOptions {
    pub excluded_dirs: Vec<String>,
    pub max_file_size: u64,
    /// Respect .gitignore, .ignore and git's global excludes.
    pub gitignore: bool,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            excluded_dirs: DEFAULT_EXCLUDED_DIRS.iter().map(|s| s.to_string()).collect(),
            max_file_size: DEFAULT_MAX_FILE_SIZE,
            gitignore: true,
        }
    }
}

/// Something the walk could not do, reported rather than fatal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WalkIssue {
    /// The path for display (a name that is not UTF-8 shown with replacement characters).
    pub path: String,
    pub message: String,
    /// The path as it is on disk, to check later whether the problem still applies.
    pub on_disk: PathBuf,
    pub kind: WalkIssueKind,
}

/// What kind of problem a [`WalkIssue`] is: how to tell whether it still applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WalkIssueKind {
    /// A symbolic link to a directory (not followed).
    LinkToDirectory,
    /// A path that is not valid UTF-8 or escapes the root.
    UnusableName,
    /// An error of the walk itself (a directory that cannot be read, a loop).
    WalkError,
}

impl WalkIssue {
    fn new(on_disk: &Path, kind: WalkIssueKind) -> WalkIssue {
        let message = match kind {
            WalkIssueKind::LinkToDirectory => {
                "a symbolic link to a directory: not followed (changes to its target could not be watched)"
            }
            WalkIssueKind::UnusableName => "path is not valid UTF-8 or escapes the root; skipped",
            WalkIssueKind::WalkError => "could not be walked",
        };
        WalkIssue {
            path: on_disk.display().to_string(),
            message: message.to_string(),
            on_disk: on_disk.to_path_buf(),
            kind,
        }
    }

    /// Whether the problem is still there: the path exists and is still the kind of thing that
    /// was not indexed (a FIFO replaced by a regular file is indexed now, and no longer listed).
    pub fn still_applies(&self) -> bool {
        let Ok(meta) = fs::symlink_metadata(&self.on_disk) else { return false };
        let file_type = meta.file_type();
        match self.kind {
            WalkIssueKind::LinkToDirectory => file_type.is_symlink() && self.on_disk.is_dir(),
            WalkIssueKind::UnusableName | WalkIssueKind::WalkError => true,
        }
    }
}

/// The problem a single path the watcher reported has, if the walk would have recorded one: a
/// link to a directory. (A FIFO, socket or device named like a source file is a skipped file of
/// the tree, as the walk lists it.)
pub fn issue_at(path: &Path) -> Option<WalkIssue> {
    let meta = fs::symlink_metadata(path).ok()?;
    (meta.file_type().is_symlink() && path.is_dir()).then(|| WalkIssue::new(path, WalkIssueKind::LinkToDirectory))
}

/// The path a walk error is about, when it names one.
fn error_path(err: &ignore::Error) -> PathBuf {
    match err {
        ignore::Error::WithPath { path, .. } => path.clone(),
        ignore::Error::Loop { child, .. } => child.clone(),
        ignore::Error::WithDepth { err, .. } | ignore::Error::WithLineNumber { err, .. } => error_path(err),
        _ => PathBuf::new(),
    }
}

/// Whether a directory is a virtualenv (it has `pyvenv.cfg`), whatever it is called.
fn is_virtualenv(dir: &Path) -> bool {
    dir.join("pyvenv.cfg").is_file()
}

/// The relative, `/`-separated path of `path` under `root`.
pub fn relative(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Vec<&str> = rel.components().map(|c| c.as_os_str().to_str()).collect::<Option<_>>()?;
    Some(parts.join("/"))
}

/// Whether a relative path is one fresco indexes (a `.py` file outside excluded directories).
/// The gitignore part of the decision is made by the walk and by the watcher's matcher.
pub fn is_candidate(root: &Path, rel: &str, options: &WalkOptions) -> bool {
    if !rel.ends_with(".py") {
        return false;
    }
    // Hidden files, like hidden directories, are left out (as the walk does).
    if rel.rsplit('/').next().is_some_and(|name| name.starts_with('.')) {
        return false;
    }
    !in_excluded_dir(root, rel, options)
}

/// The directory walk failed as a whole: what it would list is not known, so nothing may be
/// taken as deleted.
#[derive(Debug, thiserror::Error)]
#[error("the walk of {path} failed {attempts} times in a row (the tree kept changing under it): {message}")]
pub struct WalkFailed {
    pub path: String,
    pub attempts: u32,
    pub message: String,
}

/// How many times [`discover`] walks a tree whose walker fails before giving up.
const WALK_ATTEMPTS: u32 = 4;

/// Lists the `.py` files under `root`, sorted, with the problems met on the way.
///
/// The walker (the `ignore` crate's) can panic when a directory is replaced or a symbolic link
/// to `.` made and removed while it reads the tree (its stack of ignore rules loses a level):
/// a walk that panics is made again, after a pause, up to [`WALK_ATTEMPTS`] times. The panic
/// is caught here so that the thread that asked (the daemon's indexer) lives on.
pub fn discover(root: &Path, options: &WalkOptions) -> Result<(Vec<String>, Vec<WalkIssue>), WalkFailed> {
    let mut message = String::new();
    for attempt in 0..WALK_ATTEMPTS {
        if attempt > 0 {
            std::thread::sleep(std::time::Duration::from_millis(20 << (2 * attempt)));
        }
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| discover_once(root, options))) {
            Ok(found) => return Ok(found),
            Err(panic) => {
                message = crate::process::panic_message(&*panic)
                    .unwrap_or_else(|| "the directory walker panicked".to_string());
            }
        }
    }
    Err(WalkFailed { path: root.display().to_string(), attempts: WALK_ATTEMPTS, message })
}

fn discover_once(root: &Path, options: &WalkOptions) -> (Vec<String>, Vec<WalkIssue>) {
    let exclusions = options.clone();
    let mut builder = ignore::WalkBuilder::new(root);
    builder
        .hidden(true)
        .follow_links(false)
        .require_git(false)
        .git_ignore(options.gitignore)
        .git_global(options.gitignore)
        .git_exclude(options.gitignore)
        .ignore(options.gitignore)
        .parents(options.gitignore)
        .filter_entry(move |entry| {
            let is_dir = entry.file_type().is_some_and(|t| t.is_dir());
            if !is_dir || entry.depth() == 0 {
                return true;
            }
            let name = entry.file_name().to_string_lossy();
            !is_excluded_dir(entry.path(), &name, &exclusions) && !is_virtualenv(entry.path())
        });
    // The parallel walker, on one thread: the sequential one loses a level of its stack of
    // ignore rules when a link to `.` comes and goes while it reads, and panics (ignore 0.4.35,
    // `walk.rs:1265`; 20 times in 5 s of such churn under the daemon, none since).
    let found: std::sync::Mutex<(Vec<String>, Vec<WalkIssue>)> = std::sync::Mutex::new((Vec::new(), Vec::new()));
    builder.threads(1).build_parallel().run(|| {
        Box::new(|result| {
            let mut found = found.lock().unwrap_or_else(|p| p.into_inner());
            let (files, issues) = &mut *found;
            visit(root, result, files, issues);
            ignore::WalkState::Continue
        })
    });
    let (mut files, mut issues) = found.into_inner().unwrap_or_else(|p| p.into_inner());
    // In the tree's order, whatever order the walker met them in.
    issues.sort_by(|a, b| a.on_disk.cmp(&b.on_disk).then_with(|| a.message.cmp(&b.message)));
    files.sort();
    files.dedup();
    (files, issues)
}

/// Records one entry of the walk: a `.py` file to index, or why it is not indexed.
fn visit(
    root: &Path,
    result: Result<ignore::DirEntry, ignore::Error>,
    files: &mut Vec<String>,
    issues: &mut Vec<WalkIssue>,
) {
    match result {
        Ok(entry) => {
            let is_link = entry.path_is_symlink();
            if is_link && entry.path().is_dir() {
                issues.push(WalkIssue::new(entry.path(), WalkIssueKind::LinkToDirectory));
                return;
            }
            // A FIFO, socket or device named like a source file: reading it could block or never
            // end, so it is not read (`read_source` records it as skipped), but it is a file of
            // the tree like a binary or too large one: its module stays, and the imports of it.
            if !is_link && entry.file_type().is_some_and(|t| t.is_dir()) {
                return;
            }
            let Some(rel) = relative(root, entry.path()) else {
                issues.push(WalkIssue::new(entry.path(), WalkIssueKind::UnusableName));
                return;
            };
            if rel.ends_with(".py") {
                files.push(rel);
            }
        }
        Err(err) => {
            let issue = WalkIssue::new(&error_path(&err), WalkIssueKind::WalkError);
            // The issue is shown after its path: the I/O error alone (`Permission denied`), not
            // the walker's message, which named the path twice more.
            let message = match err.io_error() {
                Some(io) if !matches!(err, ignore::Error::Loop { .. }) => io.to_string(),
                _ => err.to_string(),
            };
            issues.push(WalkIssue { message, ..issue });
        }
    }
}

/// Lists the `.py` files under the directory `rel_dir` (relative to `root`), as paths relative
/// to `root`, applying the same rules as [`discover`] (including parent gitignores).
pub fn discover_under(
    root: &Path,
    rel_dir: &str,
    options: &WalkOptions,
) -> Result<(Vec<String>, Vec<WalkIssue>), WalkFailed> {
    let dir = root.join(rel_dir);
    if !dir.is_dir() || !is_candidate(root, &format!("{rel_dir}/x.py"), options) {
        return Ok((Vec::new(), Vec::new()));
    }
    if fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Ok((Vec::new(), vec![WalkIssue::new(&dir, WalkIssueKind::LinkToDirectory)]));
    }
    let name = rel_dir.rsplit('/').next().unwrap_or(rel_dir);
    if is_excluded_dir(&dir, name, options) || is_virtualenv(&dir) {
        return Ok((Vec::new(), Vec::new()));
    }
    let (files, issues) = discover(&dir, options)?;
    Ok((files.into_iter().map(|f| format!("{rel_dir}/{f}")).collect(), issues))
}

/// A file as read from disk.
#[derive(Clone, Debug)]
pub struct SourceRead {
    pub text: Arc<str>,
    pub revision: Revision,
    pub stamp: FileStamp,
    pub skipped: Option<SkipReason>,
}

pub fn stamp_of(meta: &fs::Metadata) -> FileStamp {
    let mtime_ns = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_nanos() as i128)
        .unwrap_or(0);
    #[cfg(unix)]
    let (ctime_ns, inode) = {
        use std::os::unix::fs::MetadataExt;
        (meta.ctime() as i128 * 1_000_000_000 + meta.ctime_nsec() as i128, meta.ino())
    };
    #[cfg(not(unix))]
    let (ctime_ns, inode) = (0, 0);
    FileStamp { size: meta.len(), mtime_ns, ctime_ns, inode }
}

/// Whether reading a path failed because nothing is there: not found, or a directory on the
/// way is now a file (`x.py/inner.py` after the directory `x.py` was replaced by a file; it
/// was listed as unreadable, "Not a directory", until a rescan).
fn is_gone(error: &std::io::Error) -> bool {
    matches!(error.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory)
}

/// Whether a directory between `root` and the file `rel` is a symbolic link (or no longer a
/// directory).
fn under_linked_dir(root: &Path, rel: &str) -> bool {
    let mut dir = root.to_path_buf();
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_none() {
            return false;
        }
        dir.push(part);
        match fs::symlink_metadata(&dir) {
            Ok(meta) if meta.is_dir() => {}
            _ => return true,
        }
    }
    false
}

/// Whether the directory holding `path` cannot be listed (no permission): a walk does not see
/// what it holds.
fn in_unlistable_dir(path: &Path) -> bool {
    path.parent().is_some_and(|dir| fs::read_dir(dir).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied))
}

/// Reads a file for indexing. `Ok(None)` means the file no longer exists (deleted between being
/// listed and being read); every other problem becomes a recorded skip reason.
pub fn read_source(root: &Path, rel: &str, max_size: u64) -> Option<SourceRead> {
    let path: PathBuf = root.join(rel);
    // Not `metadata`: a symbolic link is not followed (see the module documentation).
    let meta = match fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if is_gone(&e) => return None,
        // A directory on the way that may no longer be read: a walk cannot list the file, so
        // it is not there for the index either (the walk reports the directory).
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied && in_unlistable_dir(&path) => return None,
        Err(e) => {
            return Some(skipped(SkipReason::Unreadable { error: e.to_string() }, FileStamp::default(), &[]));
        }
    };
    // A directory on the way that is now a symbolic link (a branch switch replacing `pkg/` by a
    // link): the walk never enters one, so the file is not in the tree, whatever the link
    // leads to (a re-read of a known path would otherwise go through it).
    if under_linked_dir(root, rel) {
        return None;
    }
    if meta.file_type().is_symlink() {
        let error = "a symbolic link: not followed (changes to its target could not be watched)".to_string();
        return Some(skipped(SkipReason::Unreadable { error }, stamp_of(&meta), &[]));
    }
    if meta.is_dir() {
        return None;
    }
    if !meta.is_file() {
        let error = "not a regular file (a FIFO, socket or device)".to_string();
        return Some(skipped(SkipReason::Unreadable { error }, stamp_of(&meta), &[]));
    }
    let stamp = stamp_of(&meta);
    if meta.len() > max_size {
        return Some(skipped(SkipReason::TooLarge { size: meta.len(), limit: max_size }, stamp, &[]));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    match fs::File::open(&path).and_then(|mut f| f.read_to_end(&mut bytes)) {
        Ok(_) => {}
        Err(e) if is_gone(&e) => return None,
        Err(e) => {
            return Some(skipped(SkipReason::Unreadable { error: e.to_string() }, stamp, &[]));
        }
    }
    if bytes.len() as u64 > max_size {
        return Some(skipped(SkipReason::TooLarge { size: bytes.len() as u64, limit: max_size }, stamp, &bytes));
    }
    // Only a start with NUL bytes or a UTF-16 byte order mark can be wide text: source is not
    // looked at twice.
    let has_nul = bytes.iter().take(SNIFF_BYTES).any(|&b| b == 0);
    if (has_nul || bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]))
        && let Some(encoding) = wide_encoding(&bytes)
    {
        return Some(skipped(SkipReason::WideEncoding { encoding: encoding.to_string() }, stamp, &bytes));
    }
    // Binary: NUL bytes in a start that is not text. A text start with a stray NUL is source
    // with a fault Python refuses (as it refuses one further in): indexed as far as it parses and
    // flagged, as a NUL after the start always was, rather than every unit dropped.
    if has_nul && !looks_like_text(&bytes[..bytes.len().min(SNIFF_BYTES)], bytes.len() > SNIFF_BYTES) {
        return Some(skipped(SkipReason::Binary, stamp, &bytes));
    }
    // The revision is the hash of the bytes on disk, whatever their encoding: the freshness gate
    // compares it with what is there.
    let revision = Revision::of(&bytes);
    match decode_source(&bytes) {
        Ok(text) => Some(SourceRead { text: Arc::from(text), revision, stamp, skipped: None }),
        Err(DecodeError::NotUtf8) => Some(skipped(SkipReason::NotUtf8, stamp, &bytes)),
        Err(DecodeError::NotValidIn { encoding }) => Some(skipped(SkipReason::NotValidIn { encoding }, stamp, &bytes)),
        Err(DecodeError::UnknownEncoding { encoding }) => {
            Some(skipped(SkipReason::UnknownEncoding { encoding }, stamp, &bytes))
        }
    }
}

/// Whether a file's start (`cut`: it stops short of the file's end) reads as text with a few
/// stray NUL bytes: valid UTF-8 (a character cut in two at the end aside), or any bytes under a
/// coding declaration (PEP 263, which Python reads in the first two lines), with no control
/// characters text does not hold and NUL bytes at most one in a hundred (one, in a start shorter
/// than that). A compiled file, an image or an archive fails at once.
fn looks_like_text(start: &[u8], cut: bool) -> bool {
    let valid = match std::str::from_utf8(start) {
        Ok(_) => true,
        Err(e) => cut && e.error_len().is_none(),
    };
    let declared = start.split(|&b| b == b'\n').take(2).any(|line| {
        let line = String::from_utf8_lossy(line);
        line.trim_start().starts_with('#') && (line.contains("coding:") || line.contains("coding="))
    });
    let nuls = start.iter().filter(|&&b| b == 0).count();
    // Control characters text does not hold (tab, line breaks, form feed, vertical tab and the
    // escape of terminal colours aside).
    let controls = start.iter().any(|&b| b < 0x20 && !matches!(b, 0 | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c | 0x1b));
    (valid || declared) && !controls && nuls <= (start.len() / 100).max(1)
}

/// How much of a file's start is read to tell binary and wide-encoded text from source.
const SNIFF_BYTES: usize = 8192;

/// The wide encoding a file's start is in, if any: UTF-32 or UTF-16 by its byte order mark (when
/// what follows decodes as such), or UTF-16 without one when NUL bytes fill nearly every other
/// position and almost none of the rest (ASCII text in UTF-16, as Windows tools write it; UTF-32
/// without a mark stays binary). Text like this holds NUL bytes and would otherwise be called
/// binary.
fn wide_encoding(bytes: &[u8]) -> Option<&'static str> {
    let start = &bytes[..bytes.len().min(SNIFF_BYTES)];
    // The start stops short of the file's end: its last character may be cut in two.
    let cut = bytes.len() > SNIFF_BYTES;
    const MARKS: [(&[u8], &str); 4] = [
        (&[0xFF, 0xFE, 0, 0], "UTF-32LE"),
        (&[0, 0, 0xFE, 0xFF], "UTF-32BE"),
        (&[0xFF, 0xFE], "UTF-16LE"),
        (&[0xFE, 0xFF], "UTF-16BE"),
    ];
    for (mark, encoding) in MARKS {
        let Some(body) = start.strip_prefix(mark) else { continue };
        let big_endian = encoding.ends_with("BE");
        let valid = if encoding.starts_with("UTF-32") {
            body.chunks_exact(4).all(|c| {
                let bytes = [c[0], c[1], c[2], c[3]];
                char::from_u32(if big_endian { u32::from_be_bytes(bytes) } else { u32::from_le_bytes(bytes) }).is_some()
            })
        } else {
            is_utf16(body, big_endian, cut)
        };
        if valid {
            return Some(encoding);
        }
    }
    // Without a mark: ASCII in UTF-16 puts a NUL in every high byte. Short starts say too little.
    if start.len() < 16 {
        return None;
    }
    let zeros_at = |parity: usize| start.iter().skip(parity).step_by(2).filter(|&&b| b == 0).count();
    let pairs = start.len() / 2;
    let (even, odd) = (zeros_at(0), zeros_at(1));
    let mostly = |n: usize| n * 10 >= pairs * 9;
    let hardly = |n: usize| n * 20 <= pairs;
    if mostly(odd) && hardly(even) && is_utf16(start, false, cut) {
        Some("UTF-16LE")
    } else if mostly(even) && hardly(odd) && is_utf16(start, true, cut) {
        Some("UTF-16BE")
    } else {
        None
    }
}

/// Whether `body` is valid UTF-16, but for the first half of a surrogate pair as its last unit
/// when the start was `cut` from a longer file (the pair's second half lies past the cut).
fn is_utf16(body: &[u8], big_endian: bool, cut: bool) -> bool {
    let units: Vec<u16> = body
        .chunks_exact(2)
        .map(|pair| {
            let pair = [pair[0], pair[1]];
            if big_endian { u16::from_be_bytes(pair) } else { u16::from_le_bytes(pair) }
        })
        .collect();
    let whole = match units.last() {
        Some(&last) if cut && (0xD800..0xDC00).contains(&last) => &units[..units.len() - 1],
        _ => &units[..],
    };
    char::decode_utf16(whole.iter().copied()).all(|c| c.is_ok())
}

fn skipped(reason: SkipReason, stamp: FileStamp, bytes: &[u8]) -> SourceRead {
    SourceRead { text: Arc::from(""), revision: Revision::of(bytes), stamp, skipped: Some(reason) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifo_named_like_a_source_file_is_listed_and_skipped_not_read() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("ok.py"), "x = 1\n").unwrap();
        let fifo = dir.path().join("pipe.py");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let (mut files, issues) = discover(dir.path(), &WalkOptions::default()).unwrap();
        files.sort();
        assert_eq!(files, ["ok.py", "pipe.py"]);
        assert!(issues.is_empty(), "{issues:?}");
        // Reading it neither blocks nor reads: a skip with why.
        let read = read_source(dir.path(), "pipe.py", 1 << 20).expect("still there");
        let why = read.skipped.map(|s| s.to_string()).unwrap_or_default();
        assert!(why.contains("not a regular file"), "{why}");
    }

    #[test]
    fn discovers_python_files_and_skips_what_it_should() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "a.py",
            "pkg/__init__.py",
            "pkg/b.py",
            "build/x.py",
            "venv2/lib/y.py",
            "ignored/z.py",
            "notes.txt",
            // A package named like build output is a package: indexed.
            "pkg/build/__init__.py",
            "pkg/build/env.py",
            "dist/lib/w.py",
        ] {
            let p = root.join(f);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(&p, "x = 1\n").unwrap();
        }
        fs::write(root.join("venv2/pyvenv.cfg"), "home = /usr\n").unwrap();
        fs::write(root.join(".gitignore"), "ignored/\n").unwrap();
        let (files, issues) = discover(root, &WalkOptions::default()).unwrap();
        assert_eq!(files, vec!["a.py", "pkg/__init__.py", "pkg/b.py", "pkg/build/__init__.py", "pkg/build/env.py"]);
        assert!(issues.is_empty(), "{issues:?}");
        // The watcher's by-name decision agrees with the walk.
        let options = WalkOptions::default();
        for (rel, expected) in [("pkg/build/env.py", true), ("build/x.py", false), ("dist/lib/w.py", false)] {
            assert_eq!(is_candidate(root, rel, &options), expected, "{rel}");
        }
    }

    #[test]
    fn reads_with_skip_reasons() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("bin.py"), b"x = 1\0\0\xff\xfe\n").unwrap();
        fs::write(root.join("latin1.py"), b"s = '\xe9'\n").unwrap();
        fs::write(root.join("declared.py"), b"# -*- coding: latin-1 -*-\ns = '\xe9'\n").unwrap();
        fs::write(root.join("big.py"), "x = 1\n".repeat(100)).unwrap();
        fs::write(root.join("ok.py"), "x = 1\n").unwrap();
        assert_eq!(read_source(root, "bin.py", 1000).unwrap().skipped, Some(SkipReason::Binary));
        // A stray NUL in text, near the start as further in: read (and flagged when parsed),
        // not taken for binary. Bytes that are no text with it are.
        let stray = format!("def g():\n    pass\n# \0\n{}", "x = 1\n".repeat(100));
        fs::write(root.join("stray.py"), &stray).unwrap();
        assert_eq!(read_source(root, "stray.py", 100_000).unwrap().skipped, None);
        // In a short file, with an escape character, and under a coding declaration too.
        fs::write(root.join("short.py"), b"x = 1\0\ndef h():\n    pass\n").unwrap();
        fs::write(root.join("esc.py"), b"s = '\x1b[0m'\n# \0\n").unwrap();
        fs::write(root.join("cookie.py"), b"# -*- coding: latin-1 -*-\ns = '\xe9'\n# \0\n").unwrap();
        for name in ["short.py", "esc.py", "cookie.py"] {
            assert_eq!(read_source(root, name, 100_000).unwrap().skipped, None, "{name}");
        }
        // A compiled module's header: magic number, flags, modification time, size, code object.
        let header = b"\x6f\x0d\x0d\x0a\0\0\0\0\x8e\x53\x12\x65\x20\0\0\0\xe3\0\0\0";
        let compiled: Vec<u8> = [&header[..], &"x = 1\n".repeat(100).into_bytes()].concat();
        fs::write(root.join("compiled.py"), compiled).unwrap();
        assert_eq!(read_source(root, "compiled.py", 100_000).unwrap().skipped, Some(SkipReason::Binary));
        let wide = |name: &str| match read_source(root, name, 1000).unwrap().skipped {
            Some(SkipReason::WideEncoding { encoding }) => encoding,
            other => panic!("{name}: {other:?}"),
        };
        let text = "def f(x):\n    return 'caf\u{e9} \u{1F600}'\n";
        let utf16 = |big: bool| -> Vec<u8> {
            text.encode_utf16().flat_map(|u| if big { u.to_be_bytes() } else { u.to_le_bytes() }).collect()
        };
        fs::write(root.join("le_bom.py"), [&[0xFF, 0xFE][..], &utf16(false)].concat()).unwrap();
        fs::write(root.join("be_bom.py"), [&[0xFE, 0xFF][..], &utf16(true)].concat()).unwrap();
        fs::write(root.join("le.py"), utf16(false)).unwrap();
        fs::write(root.join("be.py"), utf16(true)).unwrap();
        let utf32: Vec<u8> = text.chars().flat_map(|c| (c as u32).to_le_bytes()).collect();
        fs::write(root.join("le32.py"), [&[0xFF, 0xFE, 0, 0][..], &utf32].concat()).unwrap();
        assert_eq!(
            ["le_bom.py", "be_bom.py", "le.py", "be.py", "le32.py"].map(wide),
            ["UTF-16LE", "UTF-16BE", "UTF-16LE", "UTF-16BE", "UTF-32LE"]
        );
        // Longer than the sniffed start, with a character outside the BMP before the cut and
        // one cut in two by it; a file of exactly the sniffed size ending in half a pair is not
        // cut, and stays binary.
        let long = |cut_pair: bool| -> Vec<u8> {
            let mut units: Vec<u16> = "# \u{1F600}\n".encode_utf16().collect();
            while units.len() < SNIFF_BYTES / 2 - 1 {
                units.push(u16::from(b'x'));
            }
            if cut_pair {
                units.extend("\u{1F600}\n".encode_utf16());
            } else {
                units.push(0xD83D);
            }
            units.iter().flat_map(|u| u.to_le_bytes()).collect()
        };
        fs::write(root.join("long.py"), long(true)).unwrap();
        fs::write(root.join("exact.py"), long(false)).unwrap();
        assert_eq!(long(false).len(), SNIFF_BYTES);
        assert_eq!(
            read_source(root, "long.py", 100_000).unwrap().skipped,
            Some(SkipReason::WideEncoding { encoding: "UTF-16LE".into() })
        );
        assert_eq!(read_source(root, "exact.py", 100_000).unwrap().skipped, Some(SkipReason::Binary));
        // A NUL in every other byte around an unpaired surrogate, and a mark followed by one,
        // stay binary.
        let mut surrogates: Vec<u8> = "a".repeat(64).encode_utf16().flat_map(u16::to_le_bytes).collect();
        surrogates[64..66].copy_from_slice(&0xDC00u16.to_le_bytes());
        fs::write(root.join("surrogates.py"), surrogates).unwrap();
        fs::write(root.join("mark.py"), [0xFF, 0xFE, 0x00, 0xD8, 0x00, 0x00, 0x00]).unwrap();
        assert_eq!(read_source(root, "surrogates.py", 1000).unwrap().skipped, Some(SkipReason::Binary));
        assert_eq!(read_source(root, "mark.py", 1000).unwrap().skipped, Some(SkipReason::Binary));
        assert_eq!(read_source(root, "latin1.py", 1000).unwrap().skipped, Some(SkipReason::NotUtf8));
        let declared = read_source(root, "declared.py", 1000).unwrap();
        assert_eq!((declared.skipped, &*declared.text), (None, "# -*- coding: latin-1 -*-\ns = '\u{e9}'\n"));
        assert_eq!(declared.revision, Revision::of(b"# -*- coding: latin-1 -*-\ns = '\xe9'\n"), "the bytes' hash");
        assert!(matches!(read_source(root, "big.py", 100).unwrap().skipped, Some(SkipReason::TooLarge { .. })));
        assert!(read_source(root, "ok.py", 1000).unwrap().skipped.is_none());
        assert!(read_source(root, "gone.py", 1000).is_none());
        // Under what is now a file: gone as well, not unreadable.
        assert!(read_source(root, "ok.py/inner.py", 1000).is_none());
    }

    #[cfg(unix)]
    #[test]
    fn survives_symlink_loops() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::create_dir_all(root.join("a")).unwrap();
        fs::write(root.join("a/m.py"), "x = 1\n").unwrap();
        std::os::unix::fs::symlink(root.join("a"), root.join("a/loop")).unwrap();
        let (files, issues) = discover(root, &WalkOptions::default()).unwrap();
        assert_eq!(files, vec!["a/m.py"]);
        assert!(issues.iter().any(|i| i.message.contains("not followed") && i.path.ends_with("loop")), "{issues:?}");
    }

    #[cfg(unix)]
    #[test]
    fn linked_files_are_listed_and_skipped_with_a_reason() {
        let outside = tempfile::tempdir().unwrap();
        fs::write(outside.path().join("shared.py"), "x = 1\n").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        fs::write(root.join("own.py"), "y = 2\n").unwrap();
        std::os::unix::fs::symlink(outside.path().join("shared.py"), root.join("linked.py")).unwrap();
        let (files, _) = discover(root, &WalkOptions::default()).unwrap();
        assert_eq!(files, vec!["linked.py", "own.py"]);
        let read = read_source(root, "linked.py", 1000).unwrap();
        assert!(
            matches!(&read.skipped, Some(SkipReason::Unreadable { error }) if error.contains("symbolic link")),
            "{:?}",
            read.skipped
        );
    }
}
