//! Records which fresco sources the benchmark binary was built from, for the reports.
use std::process::Command;

fn git(args: &[&str]) -> String {
    Command::new("git")
        .args(args)
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim_end().to_string())
        .unwrap_or_default()
}

fn main() {
    for dir in
        ["../graph/src", "../indexer/src", "../query/src", "../src", "../.git/HEAD", "../.git/refs", "../.git/index"]
    {
        println!("cargo:rerun-if-changed={dir}");
    }
    let commit = git(&["rev-parse", "--short", "HEAD"]);
    let dirty: Vec<String> = git(&["status", "--porcelain", "--untracked-files=no"])
        .lines()
        .filter_map(|l| l.get(3..).map(|p| p.trim().to_string())) // "XY path"
        .filter(|p| !p.starts_with("bench/"))
        .collect();
    println!("cargo:rustc-env=FRESCO_BENCH_COMMIT={commit}");
    println!("cargo:rustc-env=FRESCO_BENCH_DIRTY={}", dirty.join(", "));
}
