//! Shared helpers for the end-to-end tests: the real binary, real corpora, temporary repos.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn fresco() -> Command {
    Command::new(env!("CARGO_BIN_EXE_fresco"))
}

pub fn run(args: &[&str]) -> Output {
    fresco().args(args).output().expect("run fresco")
}

pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A pinned real project from the shared corpus (downloaded on first use by the corpus script).
pub fn corpus(name: &str) -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus/fetch");
    let out = Command::new("bash").arg(&script).arg(name).output().unwrap_or_else(|e| {
        panic!("cannot run {}: {e}", script.display());
    });
    assert!(out.status.success(), "corpus fetch failed: {}", String::from_utf8_lossy(&out.stderr));
    let root = String::from_utf8_lossy(&out.stdout).lines().last().unwrap_or("").trim().to_string();
    assert!(!root.is_empty(), "corpus fetch printed no path");
    PathBuf::from(root)
}

/// Copies a tree (Python files and directories only matter, but everything is copied).
pub fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            copy_tree(&entry.path(), &target);
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// Writes `files` (relative path, content) under a new temporary directory.
pub fn repo(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for (path, content) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().expect("parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }
    dir
}

pub fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", stdout(out), stderr(out)))
}
