//! Where a daemon's socket and lock live: a per-user directory only the user can read.

use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The numeric id of the current user (from /proc, to avoid a libc dependency).
fn uid() -> u32 {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("Uid:")).and_then(|l| l.split_whitespace().nth(1).map(str::to_string))
        })
        .and_then(|u| u.parse().ok())
        .unwrap_or(0)
}

/// `$FRESCO_RUNTIME_DIR` when set. Empty means unset, as for other variables of the kind; a
/// relative path is an error: it would name a different directory from each working directory
/// (and one inside the repository).
pub fn configured_runtime_dir() -> Result<Option<PathBuf>, String> {
    match std::env::var_os("FRESCO_RUNTIME_DIR").filter(|d| !d.is_empty()).map(PathBuf::from) {
        Some(d) if d.is_relative() => {
            Err(format!("FRESCO_RUNTIME_DIR must be an absolute path (it is {})", d.display()))
        }
        other => Ok(other),
    }
}

/// The runtime directory: `$FRESCO_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/fresco`, else
/// `/tmp/fresco-UID`. Created with mode 0700; refused if another user owns it.
pub fn runtime_dir() -> Result<PathBuf> {
    let set = |name: &str| std::env::var_os(name).filter(|d| !d.is_empty()).map(PathBuf::from);
    let dir = if let Some(d) = configured_runtime_dir().map_err(anyhow::Error::msg)? {
        d
    } else if let Some(d) = set("XDG_RUNTIME_DIR").filter(|d| d.is_absolute()) {
        d.join("fresco")
    } else {
        PathBuf::from(format!("/tmp/fresco-{}", uid()))
    };
    if !dir.exists() {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let meta = fs::metadata(&dir).with_context(|| format!("cannot stat {}", dir.display()))?;
    if meta.uid() != uid() {
        bail!("{} belongs to another user; refusing to put a socket there", dir.display());
    }
    if meta.permissions().mode() & 0o077 != 0 {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700))
            .with_context(|| format!("cannot restrict {} to mode 0700", dir.display()))?;
    }
    Ok(dir)
}

/// The socket and lock file of the daemon serving `root` (a canonical path).
pub struct DaemonPaths {
    pub socket: PathBuf,
    pub lock: PathBuf,
}

/// The file in an index directory that names the socket of the daemon holding that index,
/// while one runs: a client whose runtime directory differs from the daemon's (`XDG_RUNTIME_DIR`
/// set in the daemon's session but not in an ssh, cron or editor subprocess) still finds it.
pub const DAEMON_SOCKET_FILE: &str = "daemon-socket";

/// The socket a daemon of `root` recorded in `db` ([`DAEMON_SOCKET_FILE`]), if it names one
/// for this root (its name is the root's key: a copied `.fresco` names another root's daemon)
/// that exists.
pub fn recorded_socket(root: &Path, db: &Path) -> Option<PathBuf> {
    let recorded = PathBuf::from(fs::read_to_string(db.join(DAEMON_SOCKET_FILE)).ok()?.trim_end_matches('\n'));
    let name = format!("{}.sock", root_key(root));
    (recorded.file_name().is_some_and(|n| n == name.as_str()) && recorded.exists()).then_some(recorded)
}

/// The root's key in the runtime directory: the xxh3-64 hash of its path, 16 hex digits.
fn root_key(root: &Path) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(root.as_os_str().as_encoded_bytes()))
}

pub fn daemon_paths(root: &Path) -> Result<DaemonPaths> {
    let dir = runtime_dir()?;
    let key = root_key(root);
    Ok(DaemonPaths { socket: dir.join(format!("{key}.sock")), lock: dir.join(format!("{key}.lock")) })
}
