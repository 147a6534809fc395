//! Watching the tree: notify events to debounced batches for the indexer, and the bookkeeping
//! that lets a query know exactly what the index does not reflect yet.
//!
//! Every relevant event is registered in the [`Tracker`] the moment it arrives (so a query that
//! synchronises with the file system sees it as pending), and handed to the indexer in debounced
//! batches: a burst such as a branch switch becomes one batch and one version. Cookie files
//! (watchman's trick) let a query wait until every write that happened before it has been seen:
//! the query writes a uniquely named file, and once the watcher reports it, all earlier events
//! have been registered.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam::channel::{Receiver, Sender, select};
use notify::{EventKind, RecursiveMode, Watcher as _};

use crate::walk::{self, WalkOptions};

/// The prefix of cookie file names (never indexed: not `.py`).
pub const COOKIE_PREFIX: &str = ".fresco-cookie-";

/// How long the debouncer waits for quiet before dispatching a batch, and the longest it holds
/// a batch during a continuous burst.
#[derive(Clone, Copy, Debug)]
pub struct Debounce {
    pub quiet: Duration,
    pub max_hold: Duration,
}

impl Default for Debounce {
    fn default() -> Self {
        Debounce::quiet_for(Duration::from_millis(15))
    }
}

impl Debounce {
    /// The shortest of the longest holds: a continuous burst (a build writing for minutes) is
    /// applied at least this often.
    const MIN_HOLD: Duration = Duration::from_millis(1000);

    /// Waits for `quiet`, and holds a continuous burst for at most a second or twice `quiet`,
    /// whichever is longer: a hold shorter than the quiet asked for would apply a single edit
    /// before the quiet (`--debounce-ms 4000` applied edits after one second).
    pub fn quiet_for(quiet: Duration) -> Self {
        Debounce { quiet, max_hold: Self::MIN_HOLD.max(quiet.saturating_mul(2)) }
    }
}

/// A batch for the indexer: relative paths (a trailing `/` marks a directory whose whole
/// subtree must be re-examined) with the sequence number each was registered under.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub paths: Vec<(String, u64)>,
    /// Events were lost (queue overflow, watcher error, ignore rules changed): rescan all.
    pub rescan: Option<u64>,
}

#[derive(Default)]
struct TrackerState {
    /// Paths changed on disk and not yet reflected by a published version, with the sequence
    /// number of their latest change.
    pending: BTreeMap<String, u64>,
    /// Every change (sequence number, path) not yet reflected by a published version, oldest
    /// first: a query waits for the changes made before it, not for the tree to go quiet.
    unapplied: BTreeSet<(u64, String)>,
    next_seq: u64,
    /// A rescan is pending (sequence number).
    rescan: Option<u64>,
    cookies: HashSet<String>,
    events: u64,
    rescans: u64,
}

/// What the index does not reflect yet; shared by the watcher, the indexer and the queries.
#[derive(Default)]
pub struct Tracker {
    state: Mutex<TrackerState>,
    changed: Condvar,
}

impl Tracker {
    fn lock(&self) -> std::sync::MutexGuard<'_, TrackerState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub fn note_path(&self, rel: String) -> u64 {
        let mut s = self.lock();
        s.next_seq += 1;
        s.events += 1;
        let seq = s.next_seq;
        s.unapplied.insert((seq, rel.clone()));
        s.pending.insert(rel, seq);
        seq
    }

    pub fn note_rescan(&self) -> u64 {
        let mut s = self.lock();
        s.next_seq += 1;
        s.rescans += 1;
        let seq = s.next_seq;
        s.rescan = Some(seq);
        seq
    }

    fn note_cookie(&self, name: String) {
        let mut s = self.lock();
        s.cookies.insert(name);
        self.changed.notify_all();
    }

    /// A cookie file was removed: whoever wrote it no longer waits for it, so a report of it
    /// that came too late is dropped rather than kept for good.
    fn forget_cookie(&self, name: &str) {
        self.lock().cookies.remove(name);
    }

    /// Waits until the watcher has reported one of the cookies `names`; forgets those reported.
    pub fn wait_cookie(&self, names: &[String], timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            let before = s.cookies.len();
            for name in names {
                s.cookies.remove(name);
            }
            if s.cookies.len() < before {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            s = match self.changed.wait_timeout(s, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Marks a batch as reflected by a published version (entries changed again since keep
    /// their newer sequence number and stay pending).
    pub fn applied(&self, batch: &Batch) {
        let mut s = self.lock();
        for (path, seq) in &batch.paths {
            if s.pending.get(path) == Some(seq) {
                s.pending.remove(path);
            }
            s.unapplied.remove(&(*seq, path.clone()));
        }
        if batch.rescan.is_some() && s.rescan == batch.rescan {
            s.rescan = None;
        }
        self.changed.notify_all();
    }

    /// What is pending: paths (directories end with `/`) and whether a full rescan is.
    pub fn pending(&self) -> (Vec<String>, bool) {
        let s = self.lock();
        (s.pending.keys().cloned().collect(), s.rescan.is_some())
    }

    /// Whether no path and no rescan is pending: [`Tracker::is_stale`] is then false for every
    /// file, and a query need not find which file an item is in to ask.
    pub fn nothing_pending(&self) -> bool {
        let s = self.lock();
        s.rescan.is_none() && s.pending.is_empty()
    }

    /// Whether `file` (relative) may have changed since the current version.
    pub fn is_stale(&self, file: &str) -> bool {
        let s = self.lock();
        s.rescan.is_some()
            || s.pending.contains_key(file)
            || s.pending.keys().any(|p| p.ends_with('/') && file.starts_with(p.as_str()))
    }

    /// The sequence number of the latest change registered so far.
    pub fn watermark(&self) -> u64 {
        self.lock().next_seq
    }

    /// The paths with a change numbered `upto` or earlier that no published version reflects
    /// yet, and whether such a rescan is pending.
    pub fn pending_upto(&self, upto: u64) -> (Vec<String>, bool) {
        let s = self.lock();
        Self::left_upto(&s, upto)
    }

    fn left_upto(s: &TrackerState, upto: u64) -> (Vec<String>, bool) {
        let paths: BTreeSet<&String> = s.unapplied.iter().take_while(|(seq, _)| *seq <= upto).map(|(_, p)| p).collect();
        (paths.into_iter().cloned().collect(), s.rescan.is_some_and(|r| r <= upto))
    }

    /// Waits until every change numbered `upto` or earlier is reflected by a published version
    /// (later changes may still be pending: under a continuous stream of writes the tree never
    /// goes quiet, but the changes a query must see do get applied). Returns what is still
    /// missing at the deadline.
    pub fn wait_applied(&self, upto: u64, timeout: Duration) -> Result<(), Vec<String>> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            let (mut left, rescan) = Self::left_upto(&s, upto);
            if left.is_empty() && !rescan {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                if rescan {
                    left.push("(full rescan)".into());
                }
                return Err(left);
            }
            s = match self.changed.wait_timeout(s, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits until nothing is pending. Returns what is still pending at the deadline.
    pub fn wait_idle(&self, timeout: Duration) -> Result<(), Vec<String>> {
        let deadline = Instant::now() + timeout;
        let mut s = self.lock();
        loop {
            if s.pending.is_empty() && s.rescan.is_none() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                let mut left: Vec<String> = s.pending.keys().cloned().collect();
                if s.rescan.is_some() {
                    left.push("(full rescan)".into());
                }
                return Err(left);
            }
            s = match self.changed.wait_timeout(s, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// (events seen, rescans) since start.
    pub fn counters(&self) -> (u64, u64) {
        let s = self.lock();
        (s.events, s.rescans)
    }
}

/// The repository's gitignore rules, for single paths reported by the watcher.
pub struct IgnoreRules {
    matchers: Vec<ignore::gitignore::Gitignore>,
    enabled: bool,
    /// The user's global excludes file (git's `core.excludesFile`, else
    /// `$XDG_CONFIG_HOME/git/ignore`), whether it exists or not: an edit of it changes the rules.
    global_excludes: Option<PathBuf>,
}

impl IgnoreRules {
    pub fn load(root: &Path, options: &WalkOptions) -> IgnoreRules {
        let mut matchers = Vec::new();
        if options.gitignore {
            let exclusions = options.clone();
            let walker = ignore::WalkBuilder::new(root)
                .hidden(false)
                .git_ignore(false)
                .git_global(false)
                .git_exclude(false)
                .ignore(false)
                .parents(false)
                .filter_entry(move |e| {
                    let name = e.file_name().to_string_lossy();
                    let is_dir = e.file_type().is_some_and(|t| t.is_dir());
                    !is_dir
                        || e.depth() == 0
                        || !(walk::is_excluded_dir(e.path(), &name, &exclusions) || name.starts_with('.'))
                })
                .build();
            for entry in walker.flatten() {
                if entry.file_name() == ".gitignore" || entry.file_name() == ".ignore" {
                    let (matcher, _) = ignore::gitignore::Gitignore::new(entry.path());
                    matchers.push(matcher);
                }
                // A repository nested in the tree (a vendored checkout) has its own
                // `.git/info/exclude`; the root's is added below.
                let exclude = entry.path().join(".git/info/exclude");
                if entry.depth() > 0 && entry.file_type().is_some_and(|t| t.is_dir()) && exclude.is_file() {
                    let mut builder = ignore::gitignore::GitignoreBuilder::new(entry.path());
                    builder.add(&exclude);
                    if let Ok(matcher) = builder.build() {
                        matchers.push(matcher);
                    }
                }
            }
            // The rest of what the walk applies (see `walk::discover`), so that the daemon and
            // an in-process index see the same files: ignore files of the directories above the
            // root, `.git/info/exclude`, and the user's global excludes file.
            for ancestor in root.ancestors().skip(1) {
                for name in [".gitignore", ".ignore"] {
                    let file = ancestor.join(name);
                    if file.is_file() {
                        matchers.push(ignore::gitignore::Gitignore::new(&file).0);
                    }
                }
            }
            let exclude = root.join(".git/info/exclude");
            if exclude.is_file() {
                let mut builder = ignore::gitignore::GitignoreBuilder::new(root);
                builder.add(&exclude);
                if let Ok(matcher) = builder.build() {
                    matchers.push(matcher);
                }
            }
            let (global, _) = ignore::gitignore::GitignoreBuilder::new(root).build_global();
            if !global.is_empty() {
                matchers.push(global);
            }
        }
        let global_excludes = options.gitignore.then(ignore::gitignore::gitconfig_excludes_path).flatten();
        IgnoreRules { matchers, enabled: options.gitignore, global_excludes }
    }

    /// The user's global excludes file, when the rules read it.
    pub fn global_excludes(&self) -> Option<&Path> {
        self.global_excludes.as_deref()
    }

    /// Whether a directory that arrived, left or moved at `dir` may change the rules: it held
    /// ignore files the rules were read from, or it holds some now (a directory with its own
    /// `.gitignore` renamed or moved in). The rules are then read again: kept as they were, a
    /// renamed directory's rule went on applying to its old path, hiding later edits there,
    /// and its new path's files were taken in although its rule hides them.
    pub fn touched_by(&self, dir: &Path, options: &WalkOptions) -> bool {
        self.enabled && (self.matchers.iter().any(|m| m.path().starts_with(dir)) || holds_ignore_files(dir, options))
    }

    pub fn is_ignored(&self, abs: &Path, is_dir: bool) -> bool {
        self.enabled
            && self
                .matchers
                .iter()
                .any(|m| abs.starts_with(m.path()) && m.matched_path_or_any_parents(abs, is_dir).is_ignore())
    }
}

/// Whether the tree under `dir` has an ignore file the rules read (`.gitignore`, `.ignore`, a
/// nested clone's `.git/info/exclude`), in the directories [`IgnoreRules::load`] walks. A tree
/// too large to look through in full is taken to have one.
fn holds_ignore_files(dir: &Path, options: &WalkOptions) -> bool {
    const MOST_ENTRIES: usize = 200_000;
    let mut seen = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        if current.join(".git/info/exclude").is_file() {
            return true;
        }
        let Ok(entries) = std::fs::read_dir(&current) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MOST_ENTRIES {
                return true;
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name == ".gitignore" || name == ".ignore" {
                return true;
            }
            // Symbolic links are not followed, as the walk does not follow them.
            if entry.file_type().is_ok_and(|t| t.is_dir())
                && !name.starts_with('.')
                && !walk::is_excluded_dir(&entry.path(), &name, options)
            {
                stack.push(entry.path());
            }
        }
    }
    false
}

/// The running watcher. Dropping it stops watching.
pub struct Watcher {
    _notify: Arc<Mutex<notify::RecommendedWatcher>>,
    _thread: JoinHandle<()>,
    /// Directories under the root that could not be watched at start (no permission to read
    /// them) and that the ignore rules do not hide: changes inside them go unseen until one can
    /// be watched (any event on it tries again).
    pub unwatched: Vec<PathBuf>,
}

/// Where the tree could not be watched recursively from the root: the directories watched
/// alone (above a directory that cannot be watched; a directory created in one is watched when
/// its event arrives) and those not watched at all.
#[derive(Debug, Default)]
struct Holes {
    shallow: HashSet<PathBuf>,
    unwatched: HashSet<PathBuf>,
}

/// Whether a watch failed at the system's limit on watches (inotify's `max_user_watches`).
pub fn is_watch_limit(e: &notify::Error) -> bool {
    matches!(e.kind, notify::ErrorKind::MaxFilesWatch)
}

/// Whether a watch failed for want of permission (a directory the user may not read).
fn is_permission_error(e: &notify::Error) -> bool {
    matches!(&e.kind, notify::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Watches `dir` and everything under it. inotify refuses a directory the user may not read,
/// and notify's recursive watch then fails as a whole: the subtree is watched again one level
/// down, around the directory that failed, so that one unreadable directory (a database's data
/// volume, owned by another user) costs its own changes and not the daemon. Other errors (the
/// inotify limit) fail the watch.
fn watch_tree(watcher: &mut impl notify::Watcher, dir: &Path, holes: &mut Holes) -> Result<(), notify::Error> {
    let error = match watcher.watch(dir, RecursiveMode::Recursive) {
        Ok(()) => {
            holes.unwatched.remove(dir);
            return Ok(());
        }
        Err(e) if is_permission_error(&e) => e,
        Err(e) => return Err(e),
    };
    // The watches added before the failure stay: start this subtree over.
    let _ = watcher.unwatch(dir);
    if error.paths.iter().any(|p| p == dir) {
        holes.unwatched.insert(dir.to_path_buf());
        return Ok(());
    }
    if let Err(e) = watcher.watch(dir, RecursiveMode::NonRecursive) {
        if is_permission_error(&e) {
            holes.unwatched.insert(dir.to_path_buf());
            return Ok(());
        }
        return Err(e);
    }
    holes.unwatched.remove(dir);
    holes.shallow.insert(dir.to_path_buf());
    let Ok(entries) = std::fs::read_dir(dir) else { return Ok(()) };
    for entry in entries.flatten() {
        // Symbolic links are not followed (the walk records them as skipped).
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            watch_tree(watcher, &entry.path(), holes)?;
        }
    }
    Ok(())
}

enum Raw {
    Event(notify::Event),
    Error,
}

/// The debounce loop's channels: notify's raw events in, batches out, and the flush requests
/// of waiting queries.
struct Channels {
    raw: Receiver<Raw>,
    out: Sender<Batch>,
    flush: Receiver<()>,
}

/// Starts watching `root`. Relevant changes are registered in `tracker` at once and sent to
/// `out` in debounced batches; a message on `flush` dispatches the current batch immediately
/// (a query is waiting for it).
pub fn start(
    root: PathBuf,
    options: WalkOptions,
    debounce: Debounce,
    tracker: Arc<Tracker>,
    out: Sender<Batch>,
    flush: Receiver<()>,
) -> Result<Watcher, notify::Error> {
    let (raw_tx, raw_rx) = crossbeam::channel::unbounded::<Raw>();
    let mut watcher = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
        let _ = raw_tx.send(match res {
            Ok(event) => Raw::Event(event),
            Err(_) => Raw::Error,
        });
    })?;
    let mut holes = Holes::default();
    watch_tree(&mut watcher, &root, &mut holes)?;
    if holes.unwatched.contains(&root) {
        return Err(notify::Error::generic(&format!("no permission to watch {}", root.display())).add_path(root));
    }
    // The ignore files of the directories above the root apply too (`IgnoreRules::load`): their
    // directories are watched, not recursively, for those files alone. A directory that cannot
    // be watched (permissions) keeps its rules until a restart.
    if options.gitignore {
        for ancestor in root.ancestors().skip(1) {
            let _ = watcher.watch(ancestor, RecursiveMode::NonRecursive);
        }
        // So is the user's global excludes file, through its directory (the file may not exist
        // yet; a directory that does not exist at start is not watched, and its rules wait for a
        // restart).
        if let Some(dir) = ignore::gitignore::gitconfig_excludes_path().as_deref().and_then(Path::parent)
            && !dir.starts_with(&root)
        {
            let _ = watcher.watch(dir, RecursiveMode::NonRecursive);
        }
    }
    let rules = IgnoreRules::load(&root, &options);
    let mut unwatched: Vec<PathBuf> = holes.unwatched.iter().filter(|d| !rules.is_ignored(d, true)).cloned().collect();
    unwatched.sort();
    let watcher = Arc::new(Mutex::new(watcher));
    let rewatch = Rewatch { watcher: watcher.clone(), holes };
    let thread = std::thread::Builder::new()
        .name("fresco-watch".into())
        .spawn(move || debounce_loop(root, options, debounce, tracker, Channels { raw: raw_rx, out, flush }, rewatch))
        .map_err(|e| notify::Error::generic(&e.to_string()))?;
    Ok(Watcher { _notify: watcher, _thread: thread, unwatched })
}

/// Keeps the holes of a watch ([`Holes`]) closing: a directory created in a directory watched
/// alone is watched (recursively, as notify would have), and one that could not be watched is
/// tried again when an event names it (its permissions changed, say).
struct Rewatch {
    watcher: Arc<Mutex<notify::RecommendedWatcher>>,
    holes: Holes,
}

impl Rewatch {
    /// After lost events (a queue overflow): the directories made meanwhile sent no event, so
    /// no watch was added for them, and changes in them would go unseen for good. Watching the
    /// tree again adds the missing watches (those there already stay as they are).
    fn rewatch_all(&mut self, root: &Path) {
        if let Ok(mut watcher) = self.watcher.lock() {
            // An error (the inotify limit) leaves what could not be watched as it was.
            let _ = watch_tree(&mut *watcher, root, &mut self.holes);
        }
    }

    fn on_event(&mut self, event: &notify::Event) {
        if self.holes.shallow.is_empty() && self.holes.unwatched.is_empty() {
            return;
        }
        // Only a directory arriving (made, or moved in) or changing its permissions: reading a
        // directory, as watching it does, reports an access, and reacting to those would loop.
        let arrives_or_changes = matches!(
            event.kind,
            EventKind::Create(_)
                | EventKind::Modify(notify::event::ModifyKind::Name(_))
                | EventKind::Modify(notify::event::ModifyKind::Metadata(_))
        );
        if !arrives_or_changes {
            return;
        }
        for path in &event.paths {
            let in_shallow = path.parent().is_some_and(|p| self.holes.shallow.contains(p));
            let retry = self.holes.unwatched.contains(path);
            if (in_shallow || retry)
                && !self.holes.shallow.contains(path)
                && path.is_dir()
                && let Ok(mut watcher) = self.watcher.lock()
            {
                // An error here (the inotify limit) leaves the directory unwatched, as a failing
                // recursive watch of notify's own would.
                let _ = watch_tree(&mut *watcher, path, &mut self.holes);
            }
        }
    }
}

fn debounce_loop(
    root: PathBuf,
    options: WalkOptions,
    debounce: Debounce,
    tracker: Arc<Tracker>,
    channels: Channels,
    mut rewatch: Rewatch,
) {
    let Channels { raw, out, flush } = channels;
    let mut rules = IgnoreRules::load(&root, &options);
    let mut batch = Batch::default();
    let mut batch_started: Option<Instant> = None;
    let mut last_event = Instant::now();
    loop {
        let timeout = match batch_started {
            None => Duration::from_secs(3600),
            Some(started) => {
                let quiet_end = last_event + debounce.quiet;
                let hold_end = started + debounce.max_hold;
                quiet_end.min(hold_end).saturating_duration_since(Instant::now())
            }
        };
        let mut dispatch = false;
        select! {
            recv(raw) -> msg => match msg {
                Ok(Raw::Event(event)) => {
                    // Lost events may have been an ignore file's: its rules are read again too.
                    if event.need_rescan() {
                        rewatch.rewatch_all(&root);
                        rules = IgnoreRules::load(&root, &options);
                    }
                    rewatch.on_event(&event);
                    if classify(&root, &options, &mut rules, &tracker, &event, &mut batch) {
                        batch_started.get_or_insert_with(Instant::now);
                        last_event = Instant::now();
                    }
                }
                Ok(Raw::Error) => {
                    rewatch.rewatch_all(&root);
                    rules = IgnoreRules::load(&root, &options);
                    batch.rescan = Some(tracker.note_rescan());
                    batch_started.get_or_insert_with(Instant::now);
                    last_event = Instant::now();
                }
                Err(_) => return,
            },
            recv(flush) -> msg => {
                if msg.is_err() {
                    return;
                }
                dispatch = batch_started.is_some();
            },
            default(timeout) => dispatch = batch_started.is_some(),
        }
        if dispatch {
            if out.send(std::mem::take(&mut batch)).is_err() {
                return;
            }
            batch_started = None;
        }
    }
}

/// Registers one notify event; returns whether it added anything to the batch.
fn classify(
    root: &Path,
    options: &WalkOptions,
    rules: &mut IgnoreRules,
    tracker: &Tracker,
    event: &notify::Event,
    batch: &mut Batch,
) -> bool {
    if event.need_rescan() {
        batch.rescan = Some(tracker.note_rescan());
        return true;
    }
    if matches!(event.kind, EventKind::Access(_)) {
        return false;
    }
    let mut added = false;
    for abs in &event.paths {
        if !abs.starts_with(root) {
            // An event of a directory above the root, or of the global excludes file's: only
            // ignore files matter.
            let name = abs.file_name().and_then(|n| n.to_str());
            if matches!(name, Some(".gitignore" | ".ignore")) || rules.global_excludes() == Some(abs.as_path()) {
                *rules = IgnoreRules::load(root, options);
                batch.rescan = Some(tracker.note_rescan());
                added = true;
            }
            continue;
        }
        let Some(rel) = walk::relative(root, abs) else {
            // A name that is not UTF-8 cannot be a graph file, but the walk lists such a file as
            // skipped, with why: a rescan records it (or forgets it once it is gone).
            let lossy = abs.strip_prefix(root).map(|r| r.to_string_lossy().replace('\\', "/"));
            if lossy.is_ok_and(|rel| !walk::in_excluded_dir(root, &rel, options))
                && abs.as_os_str().as_encoded_bytes().ends_with(b".py")
                && !rules.is_ignored(abs, false)
            {
                batch.rescan = Some(tracker.note_rescan());
                added = true;
            }
            continue;
        };
        if rel == ".git/info/exclude" || rel.ends_with("/.git/info/exclude") {
            // git's own ignore rules for this clone: they hide or reveal files as `.gitignore`
            // does (and the walk applies them), though they live in an excluded directory.
            *rules = IgnoreRules::load(root, options);
            batch.rescan = Some(tracker.note_rescan());
            added = true;
            continue;
        }
        let name = rel.rsplit('/').next().unwrap_or(&rel);
        if name.starts_with(COOKIE_PREFIX) {
            match event.kind {
                EventKind::Create(_) | EventKind::Modify(_) => tracker.note_cookie(name.to_string()),
                EventKind::Remove(_) => tracker.forget_cookie(name),
                _ => {}
            }
            continue;
        }
        if name == "__init__.py"
            && rel.rsplit('/').nth(1).is_some_and(|dir| walk::OUTPUT_DIR_NAMES.contains(&dir))
            && !walk::in_excluded_dir(root, rel.rsplit_once('/').map_or("", |(dir, _)| dir), options)
        {
            // `build/__init__.py` made or removed: the directory is walked as a package now, or
            // left out as build output; its other files come or go with it.
            batch.rescan = Some(tracker.note_rescan());
            added = true;
            continue;
        }
        if name == "pyvenv.cfg" {
            // A directory became a virtualenv (left out, whatever its name) or stopped being one:
            // its files go or come with it.
            // Not in a directory left out by its name or hidden (`.venv/`, `node_modules/`),
            // which no virtualenv marker brings in or out: `in_excluded_dir` of the marker's path
            // looks at every directory above it, its own included.
            let dir = rel.rsplit_once('/').map_or("", |(dir, _)| dir);
            if !dir.is_empty() && !walk::in_excluded_dir(root, &rel, options) {
                batch.rescan = Some(tracker.note_rescan());
                added = true;
            }
            continue;
        }
        if walk::in_excluded_dir(root, &rel, options) {
            continue;
        }
        if name == ".gitignore" || name == ".ignore" {
            // New rules can hide or reveal any file: reload them and rescan.
            *rules = IgnoreRules::load(root, options);
            batch.rescan = Some(tracker.note_rescan());
            added = true;
            continue;
        }
        if rel.ends_with(".py") {
            // A directory named like a module (`x.py/`, perhaps where the file `x.py` was): its
            // subtree is re-examined too, since files made in it before its watch was added
            // send no event of their own.
            let folder = matches!(
                event.kind,
                EventKind::Create(notify::event::CreateKind::Folder)
                    | EventKind::Remove(notify::event::RemoveKind::Folder)
            );
            if (folder || abs.is_dir()) && !rules.is_ignored(abs, true) {
                let key = format!("{rel}/");
                let seq = tracker.note_path(key.clone());
                batch.paths.push((key, seq));
                added = true;
            }
            if rules.is_ignored(abs, false) {
                continue;
            }
            let seq = tracker.note_path(rel.clone());
            batch.paths.push((rel, seq));
            added = true;
            continue;
        }
        // A directory created, removed or moved (or something we cannot tell): re-examine the
        // subtree. Plain files that are not Python are irrelevant.
        let is_dir_event = matches!(
            event.kind,
            EventKind::Create(notify::event::CreateKind::Folder)
                | EventKind::Remove(notify::event::RemoveKind::Folder)
                | EventKind::Modify(notify::event::ModifyKind::Name(_))
                | EventKind::Remove(notify::event::RemoveKind::Any)
                | EventKind::Create(notify::event::CreateKind::Any)
        );
        let is_dir_now = abs.is_dir();
        // `__pycache__/` made by a test run, `.tmp/` of an editor's atomic saves: nothing the
        // walk reads, and noting them would hold `strict` answers for a debounce.
        if (is_dir_now || is_dir_event) && !abs.is_file() && walk::is_left_out_dir(root, &rel, options) {
            continue;
        }
        if (is_dir_now || (is_dir_event && !abs.is_file())) && rules.touched_by(abs, options) {
            *rules = IgnoreRules::load(root, options);
        }
        if (is_dir_now || (is_dir_event && !abs.is_file())) && !rules.is_ignored(abs, true) {
            let key = format!("{rel}/");
            let seq = tracker.note_path(key.clone());
            batch.paths.push((key, seq));
            added = true;
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watcher that refuses what inotify refuses a user who may not read a directory: a
    /// recursive watch walks the subtree, adding watches until it meets such a directory, and
    /// fails there (the watches added so far stay); a single watch of such a directory fails.
    /// (Root reads every directory: a real refusal needs another user, which a test cannot count
    /// on; the daemon was checked by hand as `nobody`, see the commit.)
    struct Refusing {
        forbidden: Vec<PathBuf>,
        watched: BTreeMap<PathBuf, bool>,
    }

    impl Refusing {
        fn refused(&self, dir: &Path) -> notify::Error {
            let _ = self;
            notify::Error::io(std::io::Error::from(std::io::ErrorKind::PermissionDenied)).add_path(dir.to_path_buf())
        }

        fn subtree(dir: &Path) -> Vec<PathBuf> {
            let mut out = vec![dir.to_path_buf()];
            let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
                .map(|it| it.flatten().filter(|e| e.file_type().is_ok_and(|t| t.is_dir())).map(|e| e.path()).collect())
                .unwrap_or_default();
            entries.sort();
            for e in entries {
                out.extend(Self::subtree(&e));
            }
            out
        }

        /// Whether a change in `dir` is reported: watched itself, or under a recursive watch.
        fn covers(&self, dir: &Path) -> bool {
            self.watched.contains_key(dir)
                || dir.ancestors().skip(1).any(|a| self.watched.get(a).copied() == Some(true))
        }
    }

    impl notify::Watcher for Refusing {
        fn new<F: notify::EventHandler>(_: F, _: notify::Config) -> notify::Result<Self> {
            Ok(Refusing { forbidden: Vec::new(), watched: BTreeMap::new() })
        }

        fn watch(&mut self, path: &Path, mode: RecursiveMode) -> notify::Result<()> {
            let dirs = match mode {
                RecursiveMode::Recursive => Self::subtree(path),
                RecursiveMode::NonRecursive => vec![path.to_path_buf()],
            };
            for d in dirs {
                if self.forbidden.contains(&d) {
                    return Err(self.refused(&d));
                }
                self.watched.insert(d, mode == RecursiveMode::Recursive);
            }
            Ok(())
        }

        fn unwatch(&mut self, path: &Path) -> notify::Result<()> {
            self.watched.retain(|p, _| !p.starts_with(path));
            Ok(())
        }

        fn kind() -> notify::WatcherKind {
            notify::WatcherKind::NullWatcher
        }
    }

    #[test]
    fn a_directory_that_cannot_be_watched_leaves_the_rest_of_the_tree_watched() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path();
        for d in ["a/b/c", "a/secret/inner", "a/z", "pgdata", "src/pkg/deep", "zz"] {
            std::fs::create_dir_all(root.join(d)).expect("mkdir");
        }
        let forbidden = vec![root.join("a/secret"), root.join("pgdata")];
        let mut watcher = Refusing { forbidden: forbidden.clone(), watched: BTreeMap::new() };
        let mut holes = Holes::default();
        watch_tree(&mut watcher, root, &mut holes).expect("watched");
        let mut unwatched: Vec<&PathBuf> = holes.unwatched.iter().collect();
        unwatched.sort();
        assert_eq!(unwatched, forbidden.iter().collect::<Vec<_>>());
        // Only the directories above a refused one are watched alone.
        let mut shallow: Vec<&PathBuf> = holes.shallow.iter().collect();
        shallow.sort();
        assert_eq!(shallow, [&root.to_path_buf(), &root.join("a")]);
        for d in Refusing::subtree(root) {
            let refused = forbidden.iter().any(|f| d.starts_with(f));
            assert_eq!(watcher.covers(&d), !refused, "{}", d.display());
        }
        // Everything else is watched recursively: a directory made in it later is seen.
        for d in ["a/b", "a/z", "src", "zz"] {
            assert_eq!(watcher.watched.get(&root.join(d)), Some(&true), "{d}");
        }

        // Once readable, the directory is watched again when an event names it.
        watcher.forbidden.retain(|f| f != &root.join("pgdata"));
        let mut rewatch_holes = holes;
        watch_tree(&mut watcher, &root.join("pgdata"), &mut rewatch_holes).expect("watched");
        assert!(!rewatch_holes.unwatched.contains(&root.join("pgdata")));
        assert!(watcher.covers(&root.join("pgdata")));
        // A refusal of the root itself is the caller's error to report.
        let mut watcher = Refusing { forbidden: vec![root.to_path_buf()], watched: BTreeMap::new() };
        let mut holes = Holes::default();
        watch_tree(&mut watcher, root, &mut holes).expect("recorded");
        assert!(holes.unwatched.contains(root));
    }

    /// The watcher's rules for single paths agree with the walk: `.git/info/exclude` and ignore
    /// files above the root count, and hidden files are not candidates.
    #[test]
    fn single_path_rules_match_the_walk() {
        let outer = tempfile::tempdir().expect("tempdir");
        std::fs::write(outer.path().join(".gitignore"), "generated_*.py\n").expect("write");
        let root = outer.path().join("repo");
        std::fs::create_dir_all(root.join(".git/info")).expect("mkdir");
        std::fs::write(root.join(".git/info/exclude"), "excluded_one.py\n").expect("write");
        for name in ["kept.py", "excluded_one.py", "generated_x.py", ".hidden_mod.py"] {
            std::fs::write(root.join(name), "x = 1\n").expect("write");
        }
        let options = WalkOptions::default();
        let (walked, _) = crate::walk::discover(&root, &options).expect("walk");
        let rules = IgnoreRules::load(&root, &options);
        let seen: Vec<&str> = ["kept.py", "excluded_one.py", "generated_x.py", ".hidden_mod.py"]
            .into_iter()
            .filter(|rel| crate::walk::is_candidate(&root, rel, &options) && !rules.is_ignored(&root.join(rel), false))
            .collect();
        assert_eq!(walked, vec!["kept.py".to_string()]);
        assert_eq!(seen, vec!["kept.py"]);
    }

    fn event(kind: EventKind, path: PathBuf) -> notify::Event {
        notify::Event::new(kind).add_path(path)
    }

    /// An edit of `.git/info/exclude` reloads the rules and rescans, as one of `.gitignore` does;
    /// other files under `.git` stay irrelevant.
    #[test]
    fn an_edit_of_git_info_exclude_reloads_the_rules_and_rescans() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join(".git/info")).expect("mkdir");
        std::fs::write(root.join("burst.py"), "x = 1\n").expect("write");
        let options = WalkOptions::default();
        let mut rules = IgnoreRules::load(&root, &options);
        assert!(!rules.is_ignored(&root.join("burst.py"), false));
        let tracker = Tracker::default();
        let mut batch = Batch::default();
        let modify = EventKind::Modify(notify::event::ModifyKind::Any);
        assert!(!classify(&root, &options, &mut rules, &tracker, &event(modify, root.join(".git/index")), &mut batch));
        assert!(batch.rescan.is_none());

        std::fs::write(root.join(".git/info/exclude"), "burst.py\n").expect("write");
        let exclude = event(modify, root.join(".git/info/exclude"));
        assert!(classify(&root, &options, &mut rules, &tracker, &exclude, &mut batch));
        assert!(batch.rescan.is_some());
        assert!(rules.is_ignored(&root.join("burst.py"), false));
    }

    /// The gate waits for any of the cookies it wrote (a later one when an earlier one's event
    /// was lost); a report that came after the wait is dropped when the cookie is removed.
    #[test]
    fn a_wait_ends_at_any_of_its_cookies_and_a_late_report_is_dropped_with_the_file() {
        let tracker = Tracker::default();
        let names = vec!["c-1".to_string(), "c-2".to_string()];
        assert!(!tracker.wait_cookie(&names, Duration::ZERO));
        tracker.note_cookie("c-2".into());
        assert!(tracker.wait_cookie(&names, Duration::ZERO));
        assert!(!tracker.wait_cookie(&names, Duration::ZERO), "a report ends one wait");
        tracker.note_cookie("c-1".into());
        tracker.forget_cookie("c-1");
        assert!(tracker.lock().cookies.is_empty());
    }

    #[test]
    fn nothing_is_pending_until_a_path_or_a_rescan_is_noted_and_again_once_applied() {
        let tracker = Tracker::default();
        assert!(tracker.nothing_pending());
        let seq = tracker.note_path("m.py".to_string());
        assert!(!tracker.nothing_pending() && tracker.is_stale("m.py"));
        tracker.applied(&Batch { paths: vec![("m.py".to_string(), seq)], rescan: None });
        assert!(tracker.nothing_pending());
        let seq = tracker.note_rescan();
        assert!(!tracker.nothing_pending());
        tracker.applied(&Batch { paths: vec![], rescan: Some(seq) });
        assert!(tracker.nothing_pending());
    }

    /// An edit of the user's global excludes file reloads the rules and rescans; another file
    /// beside it does not.
    #[test]
    fn an_edit_of_the_global_excludes_file_reloads_the_rules_and_rescans() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("repo");
        std::fs::create_dir_all(&root).expect("mkdir");
        let options = WalkOptions::default();
        let mut rules = IgnoreRules::load(&root, &options);
        // Where git's configuration puts it on this machine; here, a file outside the root.
        let global = dir.path().join("config/git/ignore");
        rules.global_excludes = Some(global.clone());
        let tracker = Tracker::default();
        let mut batch = Batch::default();
        let modify = EventKind::Modify(notify::event::ModifyKind::Any);
        let beside = event(modify, dir.path().join("config/git/config"));
        assert!(!classify(&root, &options, &mut rules, &tracker, &beside, &mut batch));
        assert!(batch.rescan.is_none());
        assert!(classify(&root, &options, &mut rules, &tracker, &event(modify, global), &mut batch));
        assert!(batch.rescan.is_some());
    }

    /// A directory that gains or loses `pyvenv.cfg` becomes or stops being a virtualenv, which the
    /// walk leaves out: a rescan; one inside a virtualenv already changes nothing.
    #[test]
    fn a_virtualenv_marker_made_or_removed_asks_for_a_rescan() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("env/inner")).expect("mkdir");
        std::fs::create_dir_all(root.join("venv")).expect("mkdir");
        std::fs::write(root.join("venv/pyvenv.cfg"), "home = /usr\n").expect("write");
        let options = WalkOptions::default();
        let mut rules = IgnoreRules::load(&root, &options);
        let tracker = Tracker::default();
        let create = EventKind::Create(notify::event::CreateKind::File);
        let remove = EventKind::Remove(notify::event::RemoveKind::File);
        for (kind, path) in [(create, "env/pyvenv.cfg"), (remove, "env/pyvenv.cfg")] {
            if kind == create {
                std::fs::write(root.join(path), "home = /usr\n").expect("write");
            } else {
                std::fs::remove_file(root.join(path)).expect("rm");
            }
            let mut batch = Batch::default();
            assert!(classify(&root, &options, &mut rules, &tracker, &event(kind, root.join(path)), &mut batch));
            assert!(batch.rescan.is_some(), "{path}");
        }
        for left_out in ["venv/lib/pyvenv.cfg", ".venv/pyvenv.cfg", "node_modules/pyvenv.cfg"] {
            let mut batch = Batch::default();
            let marker = event(create, root.join(left_out));
            assert!(!classify(&root, &options, &mut rules, &tracker, &marker, &mut batch), "{left_out}");
            assert!(batch.rescan.is_none(), "{left_out}");
        }
    }

    /// A directory named like a module (`x.py/`, where the file was) has its subtree examined:
    /// a file written in it before its watch is added sends no event.
    #[test]
    fn a_directory_named_like_a_module_is_examined_as_a_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        std::fs::create_dir_all(root.join("pkg/x.py")).expect("mkdir");
        let options = WalkOptions::default();
        let mut rules = IgnoreRules::load(&root, &options);
        let tracker = Tracker::default();
        let mut batch = Batch::default();
        let create = EventKind::Create(notify::event::CreateKind::Folder);
        assert!(classify(&root, &options, &mut rules, &tracker, &event(create, root.join("pkg/x.py")), &mut batch));
        let paths: Vec<&str> = batch.paths.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, vec!["pkg/x.py/", "pkg/x.py"]);
    }

    /// A directory the walk leaves out by its name (`__pycache__`, a hidden one, `build/` that is
    /// no package) made or removed is no change; an output directory that was a package and is
    /// gone is one, and so is any other directory.
    #[test]
    fn a_directory_left_out_by_its_name_is_no_change() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().canonicalize().expect("canonical");
        for made in ["pkg/__pycache__", "pkg/.tmp", "build", "pkg/sub"] {
            std::fs::create_dir_all(root.join(made)).expect("mkdir");
        }
        let options = WalkOptions::default();
        let mut rules = IgnoreRules::load(&root, &options);
        let tracker = Tracker::default();
        let create = EventKind::Create(notify::event::CreateKind::Folder);
        let remove = EventKind::Remove(notify::event::RemoveKind::Folder);
        for (kind, path, noted) in [
            (create, "pkg/__pycache__", false),
            (create, "pkg/.tmp", false),
            (create, "build", false),
            (remove, "gone/__pycache__", false),
            (create, "pkg/sub", true),
            // Gone: it may have been a package, whose files go with it.
            (remove, "dist", true),
        ] {
            let mut batch = Batch::default();
            let noticed = classify(&root, &options, &mut rules, &tracker, &event(kind, root.join(path)), &mut batch);
            assert_eq!((noticed, !batch.paths.is_empty()), (noted, noted), "{path}");
        }
    }

    /// A Python file whose name is not UTF-8 asks for a rescan, which lists it as skipped.
    #[test]
    fn a_python_file_with_a_name_that_is_not_utf8_asks_for_a_rescan() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().to_path_buf();
        let options = WalkOptions::default();
        let mut rules = IgnoreRules::load(&root, &options);
        let tracker = Tracker::default();
        let mut batch = Batch::default();
        let create = EventKind::Create(notify::event::CreateKind::File);
        let other = root.join(std::ffi::OsStr::from_bytes(b"notes\xff.txt"));
        assert!(!classify(&root, &options, &mut rules, &tracker, &event(create, other), &mut batch));
        let python = root.join(std::ffi::OsStr::from_bytes(b"bad\xffname.py"));
        assert!(classify(&root, &options, &mut rules, &tracker, &event(create, python), &mut batch));
        assert!(batch.rescan.is_some());
    }
}
