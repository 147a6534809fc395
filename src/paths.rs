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

/// The runtime directory: `$FRESCO_RUNTIME_DIR`, else `$XDG_RUNTIME_DIR/fresco`, else
/// `/tmp/fresco-UID`. Created with mode 0700; refused if another user owns it.
pub fn runtime_dir() -> Result<PathBuf> {
    let dir = if let Some(d) = std::env::var_os("FRESCO_RUNTIME_DIR") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR") {
        PathBuf::from(d).join("fresco")
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

pub fn daemon_paths(root: &Path) -> Result<DaemonPaths> {
    let dir = runtime_dir()?;
    let key = xxhash_rust::xxh3::xxh3_64(root.as_os_str().as_encoded_bytes());
    Ok(DaemonPaths { socket: dir.join(format!("{key:016x}.sock")), lock: dir.join(format!("{key:016x}.lock")) })
}
