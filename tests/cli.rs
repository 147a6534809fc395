//! End-to-end tests of the `fresco` binary (in-process mode) on real and hand-made repositories.

mod common;

use std::collections::HashSet;

use common::*;

fn edges_of(export_dir: &std::path::Path) -> HashSet<(String, String, String)> {
    let text = std::fs::read_to_string(export_dir.join("edges.jsonl")).expect("edges.jsonl");
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).expect("edge line is JSON");
            (
                v["src"].as_str().expect("src").to_string(),
                v["dst"].as_str().expect("dst").to_string(),
                v["kind"].as_str().expect("kind").to_string(),
            )
        })
        .collect()
}

#[test]
fn indexes_and_exports_requests_with_known_edges() {
    let requests = corpus("requests");
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("requests");
    copy_tree(&requests, &repo);
    let repo_s = repo.to_str().expect("utf8");

    let out = run(&["index", repo_s, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let summary = json(&out);
    assert!(summary["files"].as_u64().unwrap_or(0) >= 30, "{summary}");
    assert!(summary["units"].as_u64().unwrap_or(0) > 500, "{summary}");
    assert!(summary["unresolved_calls"].as_u64().is_some());
    // The index keeps itself out of version control: git sees none of `.fresco/`.
    let ignore = std::fs::read_to_string(repo.join(".fresco/.gitignore")).expect(".fresco/.gitignore");
    assert!(ignore.lines().any(|l| l.trim() == "*"), "{ignore}");
    let git = |args: &[&str]| std::process::Command::new("git").arg("-C").arg(&repo).args(args).output();
    if git(&["init", "-q"]).is_ok_and(|o| o.status.success()) {
        let status = git(&["status", "--porcelain", "--untracked-files=all"]).expect("git status");
        let listed = String::from_utf8_lossy(&status.stdout);
        assert!(!listed.is_empty() && !listed.contains(".fresco"), "{listed}");
    }

    let export = work.path().join("export");
    let out = run(&["export", repo_s, "--out", export.to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let edges = edges_of(&export);
    for (src, dst, kind) in [
        ("requests.api.get", "requests.api.request", "calls"),
        ("requests.api.request", "requests.sessions.Session.request", "calls"),
        ("requests.api.request", "requests.sessions.Session", "calls"),
        ("requests.sessions.Session.request", "requests.sessions.Session.send", "calls"),
        ("requests.sessions.Session.request", "requests.sessions.Session.prepare_request", "calls"),
        ("requests.sessions.Session", "requests.sessions.SessionRedirectMixin", "inherits"),
        ("requests.adapters.HTTPAdapter", "requests.adapters.BaseAdapter", "inherits"),
        ("requests.sessions", "requests.sessions.Session", "contains"),
        ("requests.sessions.Session", "requests.sessions.Session.request", "contains"),
        ("requests", "requests.api.get", "imports"),
        ("requests.utils.get_netrc_auth", "os.path.expanduser", "calls"),
    ] {
        assert!(edges.contains(&(src.into(), dst.into(), kind.into())), "missing {kind} edge {src} -> {dst}");
    }

    // The node format is exactly the documented one.
    let nodes = std::fs::read_to_string(export.join("nodes.jsonl")).expect("nodes.jsonl");
    let first: serde_json::Value = serde_json::from_str(nodes.lines().next().expect("a node")).expect("JSON");
    let mut keys: Vec<&str> = first.as_object().expect("object").keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, vec!["end_line", "file", "id", "kind", "name", "revision", "start_line"]);
    let session_timeout = nodes
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .find(|v| v["id"] == "requests.sessions.Session.timeout");
    assert!(session_timeout.is_none() || session_timeout.as_ref().is_some_and(|v| v["kind"] == "variable"));
    assert!(nodes.contains("\"id\":\"requests.sessions.Session.adapters\""), "instance attribute unit");
    assert!(nodes.contains("\"kind\":\"external\""));
}

#[test]
fn queries_answer_in_json_and_tables_with_stable_errors() {
    let repo = repo(&[
        ("pkg/__init__.py", b"from .core import run\n"),
        (
            "pkg/core.py",
            b"def helper():\n    return 1\n\n\ndef run():\n    return helper()\n\n\ndef main():\n    run()\n",
        ),
    ]);
    let root = repo.path().to_str().expect("utf8");

    let out = run(&["query", root, "callers pkg.core.helper depth 2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    assert!(v["version"].as_u64().is_some());
    assert_eq!(v["truncated"], false);
    assert_eq!(v["stale"], serde_json::json!([]));
    let names: Vec<(&str, u64)> = v["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| (r["name"].as_str().expect("name"), r["depth"].as_u64().expect("depth")))
        .collect();
    assert_eq!(names, vec![("pkg.core.run", 1), ("pkg.core.main", 2)]);
    let first = &v["results"][0];
    assert_eq!(first["file"], "pkg/core.py");
    assert_eq!(first["kind"], "function");
    assert_eq!(first["line"], 6);
    assert_eq!(first["revision"].as_str().map(str::len), Some(16));

    // Unknown names are errors with suggestions, never an empty "no callers".
    let out = run(&["query", root, "callers pkg.core.helpr", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v = json(&out);
    assert_eq!(v["error"]["code"], "UNKNOWN_SYMBOL");
    assert!(v["error"]["suggestions"].as_array().expect("suggestions").iter().any(|s| s == "pkg.core.helper"));
    // It says where the query names it, and the picture points there as at a parse error.
    assert_eq!(
        (&v["error"]["position"], &v["error"]["line"], &v["error"]["column"]),
        (&8.into(), &1.into(), &9.into())
    );
    let out = run(&["query", root, "path pkg.core.run -> pkg.core.helpr"]);
    let err = stderr(&out);
    assert!(err.contains("path pkg.core.run -> pkg.core.helpr\n                     ^\nno unit named"), "{err}");
    // Nothing like it anywhere, but its module exists: what the module defines.
    let out = run(&["query", root, "callers pkg.core.nothing", "--json"]);
    let v = json(&out);
    assert_eq!(v["error"]["code"], "UNKNOWN_SYMBOL", "{v}");
    let suggested = v["error"]["suggestions"].as_array().expect("suggestions");
    assert!(
        !suggested.is_empty() && suggested.iter().all(|s| s.as_str().is_some_and(|s| s.starts_with("pkg.core."))),
        "{v}"
    );
    // A one-character name is not "close" to every short name; a name pasted by mistake is cut
    // in the message.
    let out = run(&["query", root, "show x", "--json"]);
    assert_eq!(json(&out)["error"]["suggestions"], serde_json::json!([]), "{}", stdout(&out));
    let long = format!("callers {}", "y".repeat(20_000));
    let out = run(&["query", root, &long]);
    let err = stderr(&out);
    assert!(err.contains("… (20000 characters)") && err.len() < 1_000, "{}", &err[..err.len().min(300)]);
    assert!(err.contains(&format!("callers {}…\n        ^", "y".repeat(112))), "{err}");

    // Parse errors point at the position.
    let out = run(&["query", root, "callers pkg.core.helper depth x"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(err.contains("callers pkg.core.helper depth x\n                              ^"), "{err}");

    // Usage errors exit 2.
    let out = run(&["query"]);
    assert_eq!(out.status.code(), Some(2));

    // Pipelines and counts.
    let out = run(&["query", root, "find \"*\" kind function | count", "--json"]);
    assert_eq!(json(&out)["count"], 3);

    // A subgraph renders as DOT and Mermaid.
    let out = run(&["query", root, "callees pkg.core.main depth 2", "--format", "dot"]);
    let dot = stdout(&out);
    assert!(dot.starts_with("digraph fresco {") && dot.contains("\"pkg.core.run\" -> \"pkg.core.helper\""), "{dot}");
    let out = run(&["query", root, "callees pkg.core.main depth 2", "--format", "mermaid"]);
    assert!(stdout(&out).starts_with("flowchart LR"));
    // What a drawing has no shape for stays in the output, as comments.
    let out = run(&["query", root, "find \"*\" kind function | count", "--format", "dot"]);
    assert!(stdout(&out).contains("// count: 3"), "{}", stdout(&out));
    let out = run(&["query", root, "find \"*\" kind function | count", "--format", "mermaid"]);
    assert!(stdout(&out).contains("%% count: 3"), "{}", stdout(&out));
    // Two formats asked for at once is a usage error, not a silent choice.
    let out = run(&["query", root, "callees pkg.core.main", "--format", "dot", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--json"), "{}", stderr(&out));

    // file.py:LINE names the innermost unit there; a leading ./ is the root.
    let out = run(&["query", root, "callees pkg/core.py:6", "--json"]);
    assert_eq!(json(&out)["results"][0]["name"], "pkg.core.helper");
    let out = run(&["query", root, "callees ./pkg/core.py:6", "--json"]);
    assert_eq!(json(&out)["results"][0]["name"], "pkg.core.helper");
    // The end of several paths is ambiguous, and the error lists them.
    std::fs::create_dir_all(repo.path().join("other")).expect("mkdir");
    std::fs::write(repo.path().join("other/core.py"), "def elsewhere():\n    return 0\n").expect("write");
    let out = run(&["query", root, "callees core.py:6", "--json"]);
    let message = json(&out)["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(
        message.contains("ambiguous") && message.contains("other/core.py") && message.contains("pkg/core.py"),
        "{message}"
    );
    // An absolute path (what an editor has) under the root names the file; one elsewhere is an
    // error that says where the root is.
    let canonical_root = std::fs::canonicalize(repo.path()).expect("canonical root");
    let absolute = format!("callees {}:6", canonical_root.join("pkg/core.py").display());
    let out = run(&["query", root, &absolute, "--json"]);
    assert_eq!(json(&out)["results"][0]["name"], "pkg.core.helper", "{}", stderr(&out));
    let out = run(&["query", root, "callees /elsewhere/pkg/core.py:6", "--json"]);
    let message = json(&out)["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(message.contains("not a file under the indexed root"), "{message}");
    // Through a symbolic link to the root (an editor that opened it by the link), and with `..`.
    let links = tempfile::tempdir().expect("tempdir");
    let link = links.path().join("link");
    std::os::unix::fs::symlink(&canonical_root, &link).expect("symlink");
    for path in [link.join("pkg/core.py"), canonical_root.join("pkg/../pkg/core.py")] {
        let out = run(&["query", root, &format!("callees {}:6", path.display()), "--json"]);
        assert_eq!(json(&out)["results"][0]["name"], "pkg.core.helper", "{}: {}", path.display(), stdout(&out));
    }
    // A file glob the same ways: by the link, and with `..`; one elsewhere is an error, not a
    // silent empty answer.
    // (pkg/*: the two modules and three functions; pkg/core.py: one module fewer; */core.py:
    // other/core.py's module and function more.)
    for (glob, expected) in
        [(link.join("pkg/*"), 5), (canonical_root.join("other/../pkg/c*.py"), 4), (link.join("*/core.py"), 6)]
    {
        let out = run(&["query", root, &format!("find \"*\" in \"{}\" | count", glob.display()), "--json"]);
        assert_eq!(json(&out)["count"], serde_json::json!(expected), "{}: {}", glob.display(), stdout(&out));
    }
    // The root itself, without a wildcard, names no file: nothing, not an error.
    for path in [canonical_root.clone(), link.clone()] {
        let out = run(&["query", root, &format!("find \"*\" | where file \"{}\" | count", path.display()), "--json"]);
        assert_eq!(json(&out)["count"], 0, "{}: {}", path.display(), stderr(&out));
    }
    let out = run(&["query", root, "find \"*\" in \"/elsewhere/*.py\"", "--json"]);
    let message = json(&out)["error"]["message"].as_str().unwrap_or("").to_string();
    assert!(message.contains("not under the indexed root"), "{message}");
    // Relative, through `..`: read from the root; above it, an error at the glob.
    let out = run(&["query", root, "find \"*\" in \"other/../pkg/c*.py\" | count", "--json"]);
    assert_eq!(json(&out)["count"], 4, "{}", stdout(&out));
    for query in ["find \"*\" in \"../*\"", "find \"*\" | where file \"/elsewhere/*\""] {
        let out = run(&["query", root, query, "--json"]);
        let error = &json(&out)["error"];
        assert!(error["message"].as_str().unwrap_or("").contains("not under the indexed root"), "{query}: {error}");
        let glob_at = query.find("\"/").or_else(|| query.find("\"..")).map(|quote| quote as u64);
        assert_eq!(error["position"].as_u64(), glob_at, "{query}: {error}");
    }
}

#[test]
fn bad_files_are_skipped_with_reasons_and_broken_python_is_indexed_as_far_as_it_parses() {
    let repo = repo(&[
        ("ok.py", b"def fine():\n    return 1\n"),
        ("broken.py", b"def good():\n    return 2\n\ndef bad(:\n    pass\n\nclass Later:\n    def m(self):\n        return good()\n"),
        ("binary.py", b"\x00\x01\x02 not python"),
        ("latin1.py", b"s = '\xe9t\xe9'\n"),
        ("big.py", &[b'#'; 5000]),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let out = run(&["index", root, "--json", "--max-file-size", "4096"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["files"], 5, "every file is accounted for: {v}");
    let skipped: Vec<(String, String)> = v["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| (s["file"].as_str().unwrap_or("").to_string(), s["reason"].as_str().unwrap_or("").to_string()))
        .collect();
    assert!(skipped.iter().any(|(f, r)| f == "binary.py" && r.contains("binary")), "{skipped:?}");
    assert!(skipped.iter().any(|(f, r)| f == "latin1.py" && r.contains("UTF-8")), "{skipped:?}");
    assert!(skipped.iter().any(|(f, r)| f == "big.py" && r.contains("too large")), "{skipped:?}");
    let errors = v["parse_errors"].as_array().expect("parse errors");
    assert_eq!((errors.len(), &v["parse_error_files"]), (1, &serde_json::json!(1)), "{v}");
    assert_eq!(errors[0]["file"], "broken.py");
    // Where the first error is: `def bad(:` lacks its closing parenthesis.
    assert_eq!(errors[0]["first"], serde_json::json!({"line": 4, "column": 9, "message": "missing \")\""}), "{v}");
    // `status` has the same keys with the same types.
    let status = json(&run(&["status", root, "--json"]));
    for key in
        ["parse_error_files", "parse_errors", "skipped_files", "skipped", "resolution_cut_files", "resolution_cut"]
    {
        assert_eq!(status[key], v[key], "{key}: index {v} status {status}");
    }

    let out = run(&["query", root, "callees broken.Later.m", "--json"]);
    let v = json(&out);
    assert_eq!(v["results"][0]["name"], "broken.good", "units after the error are still resolved");
    // Every answer says which units come from a file that does not parse as written.
    assert!(v["results"][0]["parse_errors"].as_u64().is_some_and(|n| n > 0), "{v}");
    let out = run(&["query", root, "show ok.fine", "--json"]);
    assert_eq!(json(&out)["results"][0]["parse_errors"], serde_json::Value::Null);
    // `find` lists the module of a skipped file, as `show` and the traversals do.
    for query in ["find \"big\" kind module", "find kind module in \"big.py\""] {
        let v = json(&run(&["query", root, query, "--json"]));
        let results = v["results"].as_array().cloned().unwrap_or_default();
        assert_eq!(results.len(), 1, "{query}: {v}");
        assert_eq!(
            (&results[0]["name"], &results[0]["kind"]),
            (&serde_json::json!("big"), &serde_json::json!("module"))
        );
        assert!(results[0]["skipped"].as_str().is_some_and(|r| r.contains("too large")), "{query}: {v}");
    }
    let out = run(&["query", root, "context broken.Later.m budget 500", "--json"]);
    let text = json(&out)["context"]["text"].as_str().unwrap_or("").to_string();
    assert!(text.contains("parse error"), "the context marks the broken file: {text}");

    // A file whose name is not UTF-8 cannot be a graph file, but it is listed as skipped, with
    // why, in the summary and in `status`: not only as a warning.
    use std::os::unix::ffi::OsStrExt;
    std::fs::write(repo.path().join(std::ffi::OsStr::from_bytes(b"caf\xe9.py")), "x = 1\n").expect("write");
    let out = run(&["index", root, "--json", "--max-file-size", "4096"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let named = |v: &serde_json::Value, key: &str| -> Vec<String> {
        v[key].as_array().into_iter().flatten().map(|s| format!("{} {}", s["file"], s["reason"])).collect()
    };
    let skipped = named(&v, "skipped");
    // Named with its bytes that are not UTF-8 escaped, so that it can be found.
    assert!(skipped.iter().any(|s| s.starts_with("\"caf\\\\xe9.py\"") && s.contains("UTF-8")), "{skipped:?}");
    assert_eq!((skipped.len(), &v["skipped_files"]), (4, &serde_json::json!(4)), "{skipped:?}");
    let out = run(&["status", root, "--json"]);
    let v = json(&out);
    assert_eq!(v["skipped_files"], 4, "{v}");
    assert_eq!(
        (&v["daemon"], &v["pid"]),
        (&serde_json::json!(false), &serde_json::Value::Null),
        "no daemon to name: {v}"
    );
    assert!(v["history_since"].as_u64().is_some(), "the stored index's history: {v}");
    assert!(named(&v, "skipped").iter().any(|s| s.contains("caf\\\\xe9.py")), "{v}");
    // Where a daemon for the root listens, for clients speaking the protocol themselves.
    assert!(v["socket"].as_str().is_some_and(|s| s.ends_with(".sock")), "{v}");
}

#[test]
fn files_declaring_their_encoding_are_decoded_as_python_reads_them() {
    let repo = repo(&[
        ("names.py", b"#!/usr/bin/env python\n# -*- coding: latin-1 -*-\n\ndef greet():\n    \"\"\"Dit bonjour \xe0 Jos\xe9.\"\"\"\n    return 'Jos\xe9'\n"),
        ("japan.py", b"# coding: shift_jis\nfrom names import greet\n\ndef hello():\n    return greet() + '\x93\xfa\x96\x7b'\n"),
        ("rot.py", b"# coding: rot13\nx = 1\n"),
        ("lying.py", b"# coding: ascii\ns = '\xe9'\n"),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let out = run(&["index", root, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    let skipped: Vec<String> =
        v["skipped"].as_array().into_iter().flatten().map(|s| format!("{} {}", s["file"], s["reason"])).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped.iter().any(|s| s.starts_with("\"rot.py\"") && s.contains("rot13")), "{skipped:?}");
    assert!(skipped.iter().any(|s| s.starts_with("\"lying.py\"") && s.contains("not valid ascii")), "{skipped:?}");

    let out = run(&["query", root, "callees japan.hello", "--json"]);
    assert_eq!(json(&out)["results"][0]["name"], "names.greet", "{}", stdout(&out));
    let out = run(&["query", root, "show names.greet", "--json"]);
    let v = json(&out);
    let source = v["results"][0]["source"].as_str().unwrap_or("");
    assert!(source.contains("\"\"\"Dit bonjour \u{e0} Jos\u{e9}.\"\"\""), "{v}");
    let out = run(&["query", root, "context japan.hello budget 500", "--json"]);
    let text = json(&out)["context"]["text"].as_str().unwrap_or("").to_string();
    assert!(text.contains("return 'Jos\u{e9}'"), "the decoded source: {text}");
}

#[test]
fn a_file_over_the_resolution_step_budget_is_flagged_and_keeps_what_it_did_not_reach_unresolved() {
    let repo = repo(&[
        ("a.py", b"import os\n\n\ndef helper():\n    return os.path.join('a', 'b')\n\n\ndef main():\n    helper()\n    return helper()\n"),
        ("b.py", b"from a import main\n\n\ndef run():\n    return main()\n"),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let with_budget = |steps: &str, args: &[&str]| {
        let out = fresco().env("FRESCO_RESOLUTION_STEPS", steps).args(args).output().expect("run fresco");
        assert!(out.status.success(), "{}", stderr(&out));
        json(&out)
    };
    // Twenty steps resolve b.py and part of a.py (measured: 6 of 9 edges).
    let v = with_budget("20", &["index", root, "--json"]);
    assert_eq!(
        (&v["resolution_cut_files"], &v["resolution_cut"]),
        (&serde_json::json!(1), &serde_json::json!(["a.py"])),
        "{v}"
    );
    let (cut_edges, cut_unresolved) = (v["edges"].as_u64().unwrap_or(0), v["unresolved_calls"].as_u64().unwrap_or(0));
    assert!(cut_unresolved > 0, "what was not reached is kept unresolved, not dropped: {v}");
    let v = with_budget("20", &["status", root, "--json"]);
    assert_eq!(
        (&v["resolution_cut_files"], &v["resolution_cut"]),
        (&serde_json::json!(1), &serde_json::json!(["a.py"])),
        "{v}"
    );
    let v = with_budget("20", &["query", root, "show a.main", "--json"]);
    assert_eq!(v["results"][0]["resolution_cut"], true, "{v}");
    let v = with_budget("20", &["query", root, "show b.run", "--json"]);
    assert_eq!(v["results"][0].get("resolution_cut"), None, "{v}");
    let v = with_budget("20", &["query", root, "context b.run budget 500", "--json"]);
    let text = v["context"]["text"].as_str().unwrap_or("");
    assert!(text.contains("# file: a.py") && text.contains("name resolution cut short"), "{text}");

    // The default budget: an index built under another one is rebuilt, and nothing is cut.
    let out = run(&["index", root, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(
        (&v["resolution_cut_files"], &v["resolution_cut"]),
        (&serde_json::json!(0), &serde_json::json!([])),
        "{v}"
    );
    assert!(v["edges"].as_u64().unwrap_or(0) > cut_edges, "{v}");
    assert_eq!(v["unresolved_calls"], 0, "{v}");
}

#[test]
fn count_counts_past_the_result_limit_which_bounds_answers_not_counts() {
    let source: String = (0..30).map(|i| format!("def f{i}():\n    return {i}\n\n\n")).collect();
    let repo = repo(&[("m.py", source.as_bytes())]);
    let root = repo.path().to_str().expect("utf8");
    let out = run(&["query", root, "find \"f*\" | count", "--json", "--limit", "5"]);
    let v = json(&out);
    assert_eq!((v["count"].clone(), v["truncated"].clone()), (serde_json::json!(30), serde_json::json!(false)), "{v}");
    let out = run(&["query", root, "find \"f*\"", "--json", "--limit", "5"]);
    let v = json(&out);
    assert_eq!(v["results"].as_array().map(Vec::len), Some(5), "{v}");
    assert_eq!(v["truncated"], true, "{v}");
}

#[test]
fn context_lists_dependencies_first_and_places_a_function_given_as_text() {
    let repo = repo(&[
        ("shop/__init__.py", b""),
        (
            "shop/models.py",
            b"TAX_RATE = 0.2\n\n\nclass Cart:\n    \"\"\"A shopping cart.\"\"\"\n\n    def __init__(self):\n        \
              self.items = []\n        self.discount = 0\n\n    def add(self, item, price):\n        \
              \"\"\"Add an item at a price.\"\"\"\n        self.items.append((item, price))\n\n    \
              def subtotal(self):\n        \"\"\"Sum of the prices.\"\"\"\n        return sum(p for _, p in self.items)\n\n    \
              def total(self):\n        \"\"\"The subtotal after the discount, with tax.\"\"\"\n        ...\n",
        ),
        (
            "shop/report.py",
            b"from .models import Cart\n\n\ndef render(cart):\n    \"\"\"Render a cart.\"\"\"\n    \
              return str(len(cart.items))\n",
        ),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let names_and_roles = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| (r["name"].as_str().unwrap_or("").to_string(), r["role"].as_str().unwrap_or("").to_string()))
            .collect()
    };

    // A stub method: what its class works with comes first, the lanes report their health.
    let out = run(&["query", root, "context shop.models.Cart.total budget 1000", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["lanes"]["graph"]["status"], "ready");
    assert_eq!(v["lanes"]["bm25"]["status"], "ready");
    assert_eq!(v["fusion"]["k"], 60, "the fusion constant is part of the answer: {}", v["fusion"]);
    assert_eq!(v["lanes"]["dense"]["status"], "unavailable", "{}", v["lanes"]);
    assert!(v["lanes"]["dense"]["reason"].as_str().is_some_and(|r| !r.is_empty()));
    let ranked = names_and_roles(&v);
    // The stub may call itself: the ranking may list it (a dependency), the text never holds it.
    assert!(
        ranked.iter().all(|(n, role)| n != "shop.models.Cart.total" || role == "dependency"),
        "the target ranks only as a call to itself: {ranked:?}"
    );
    let in_text: Vec<&str> =
        v["context"]["units"].as_array().into_iter().flatten().filter_map(|u| u["name"].as_str()).collect();
    assert!(!in_text.contains(&"shop.models.Cart.total"), "the target is not its own context: {in_text:?}");
    let first_example = ranked.iter().position(|(_, role)| role == "example").unwrap_or(ranked.len());
    assert!(ranked[first_example..].iter().all(|(_, role)| role == "example"), "dependencies first: {ranked:?}");
    let top5: Vec<&str> = ranked.iter().take(5).map(|(n, _)| n.as_str()).collect();
    for needed in ["shop.models.Cart.subtotal", "shop.models.Cart.discount", "shop.models.Cart.items"] {
        assert!(top5.contains(&needed), "{needed} not in the top 5: {ranked:?}");
    }
    let text = v["context"]["text"].as_str().expect("context text");
    assert!(text.contains("# file: shop/models.py (revision "), "{text}");
    assert!(text.contains("def subtotal(self):"), "{text}");
    assert!(v["context"]["tokens"].as_u64().is_some_and(|t| t <= 1000));

    // With k 1 the answer still ranks every unit of its text; units inside the target (the
    // attributes `__init__` assigns) are its own code, not its context.
    let out = run(&["query", root, "context shop.models.Cart.__init__ budget 1000 k 1", "--json"]);
    let v = json(&out);
    let ranked: Vec<String> = names_and_roles(&v).into_iter().map(|(n, _)| n).collect();
    let in_text: Vec<&str> =
        v["context"]["units"].as_array().into_iter().flatten().filter_map(|u| u["name"].as_str()).collect();
    assert!(in_text.len() > 1, "{v}");
    assert!(in_text.iter().all(|u| ranked.iter().any(|r| r == u)), "text {in_text:?}, ranking {ranked:?}");
    assert!(!ranked.iter().any(|r| r == "shop.models.Cart.items" || r == "shop.models.Cart.discount"), "{ranked:?}");

    // The same method given as text is placed on the existing unit (its class, not itself).
    let query = "context for \"def total(self):\\n    \\\"\\\"\\\"The subtotal after the discount, with tax.\\\"\\\"\\\"\" \
                 in shop/models.py budget 1000";
    let out = run(&["query", root, query, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out);
    assert_eq!(v["context"]["target"], "shop.models.Cart.total", "{v}");
    let ranked = names_and_roles(&v);
    assert!(ranked.iter().take(5).any(|(n, _)| n == "shop.models.Cart.subtotal"), "{ranked:?}");

    // A method not written yet, in a file with one class: that class's members are reachable.
    let query = "context for \"def tax(self):\\n    \\\"\\\"\\\"Tax on the subtotal at TAX_RATE.\\\"\\\"\\\"\" \
                 in shop/models.py budget 1000";
    let out = run(&["query", root, query, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ranked = names_and_roles(&json(&out));
    let deps: Vec<&str> = ranked.iter().filter(|(_, r)| r == "dependency").map(|(n, _)| n.as_str()).collect();
    assert!(deps.contains(&"shop.models.Cart.subtotal"), "{ranked:?}");
    assert!(deps.contains(&"shop.models.TAX_RATE"), "{ranked:?}");

    // Where it will be written: line 14, between `add` and `subtotal`, is inside Cart.
    let at = |line: u32| {
        format!(
            "context for \"def tax(self):\\n    \\\"\\\"\\\"Tax on the subtotal.\\\"\\\"\\\"\" in shop/models.py:{line} \
             budget 1000"
        )
    };
    let out = run(&["query", root, &at(14), "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ranked = names_and_roles(&json(&out));
    assert!(ranked.iter().take(5).any(|(n, r)| n == "shop.models.Cart.subtotal" && r == "dependency"), "{ranked:?}");
    // Past the file's end: a clear error, nothing answered.
    let out = run(&["query", root, &at(99)]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("line 99 of shop/models.py"), "{}", stderr(&out));
}

#[test]
fn lambdas_are_units_that_queries_and_the_export_name() {
    let repo = repo(&[(
        "app.py",
        b"def weight(item):\n    return 1\n\n\ndef ordered(items):\n    return sorted(items, key=lambda item: weight(item))\n",
    )]);
    let root = repo.path().to_str().expect("utf8");

    // Who calls `weight`: the lambda, which `sorted` (called by `ordered`) calls.
    let out = run(&["query", root, "callers app.weight depth 2", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let names: Vec<String> = json(&out)["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["name"].as_str().expect("name").to_string())
        .collect();
    assert_eq!(names, ["app.ordered.<lambda1>", "app.ordered"]);

    // The lambda is addressable by name, without quotes.
    let out = run(&["query", root, "callees app.ordered.<lambda1>", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out)["results"][0]["name"], "app.weight");

    // The export lists it as a function unit, contained by its owner.
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = run(&["export", root, "--out", out_dir.path().to_str().expect("utf8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    let nodes = std::fs::read_to_string(out_dir.path().join("nodes.jsonl")).expect("nodes");
    let lambda = nodes
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("json"))
        .find(|n| n["id"] == "app.ordered.<lambda1>")
        .expect("the lambda is a node");
    assert_eq!(lambda["kind"], "function");
    assert_eq!((lambda["start_line"].as_u64(), lambda["end_line"].as_u64()), (Some(6), Some(6)));
    let edges = edges_of(out_dir.path());
    assert!(edges.contains(&("app.ordered".into(), "app.ordered.<lambda1>".into(), "contains".into())), "{edges:?}");
    assert!(edges.contains(&("app.ordered".into(), "app.ordered.<lambda1>".into(), "calls".into())), "{edges:?}");
}

#[test]
fn a_reader_that_closes_the_pipe_early_ends_fresco_quietly() {
    // `fresco query ... | head -1`: the reader goes away after the first line.
    let files: Vec<(String, Vec<u8>)> =
        (0..300).map(|i| (format!("m{i}.py"), format!("def f{i}():\n    return {i}\n").into_bytes())).collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, c)| (p.as_str(), c.as_slice())).collect();
    let repo = repo(&files);
    let root = repo.path().to_str().expect("utf8");
    assert!(run(&["index", root]).status.success());
    for args in [vec!["query", root, "find \"*\""], vec!["query", root, "find \"*\"", "--json"]] {
        let mut child = fresco()
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn fresco");
        let mut stdout = child.stdout.take().expect("stdout");
        let mut first = [0u8; 16];
        std::io::Read::read_exact(&mut stdout, &mut first).expect("some output");
        drop(stdout);
        let out = child.wait_with_output().expect("wait");
        let err = stderr(&out);
        assert!(out.status.success(), "{args:?}: {:?}, stderr: {err}", out.status);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_command_run_in_a_subdirectory_answers_about_the_enclosing_indexed_repository() {
    let repo = repo(&[
        ("src/shop/__init__.py", b""),
        (
            "src/shop/orders.py",
            b"def total(items):\n    return sum(items)\n\n\ndef report(items):\n    return total(items)\n",
        ),
    ]);
    let root = repo.path().to_str().expect("utf8");
    assert!(run(&["index", root]).status.success());
    let sub = repo.path().join("src/shop");
    let out = fresco().args(["query", "callers shop.orders.total", "--json"]).current_dir(&sub).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(names(&json(&out)), vec!["shop.orders.report".to_string()]);
    assert!(!sub.join(".fresco").exists(), "no second index in the subdirectory");
}

#[test]
fn command_line_mistakes_are_usage_errors_and_a_nested_path_is_refused_not_indexed() {
    let repo =
        repo(&[("pkg/__init__.py", b""), ("pkg/a.py", b"def f():\n    return 1\n\n\ndef g():\n    return f()\n")]);
    let root = repo.path().to_str().expect("utf8");
    let out = run(&["index", root]);
    assert!(out.status.success(), "{}", stderr(&out));

    // An unquoted query reads its first word as PATH: a usage error that says how to quote.
    let out = run(&["query", "callers", "pkg.a.f"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("quoted"), "{}", stderr(&out));
    // The same with an option between the words (clap counts each run of words alone).
    let db = repo.path().join(".fresco");
    let out = run(&["query", root, "--db", db.to_str().expect("utf8"), "callers", "pkg.a.f"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("one quoted argument") && !stderr(&out).contains("panicked"), "{}", stderr(&out));
    // A query that does not parse indexes nothing: not the working directory (where a typo,
    // or a PATH taken for the query, used to leave an index), nor its PATH.
    let elsewhere = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(elsewhere.path().join("proj")).expect("mkdir");
    std::fs::write(elsewhere.path().join("proj/m.py"), "def f():\n    return 1\n").expect("write");
    let out = fresco().args(["query", "calers m.f"]).current_dir(elsewhere.path()).output().expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = fresco().args(["query", "proj"]).current_dir(elsewhere.path()).output().expect("run");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("'proj' is a directory"), "{}", stderr(&out));
    assert!(!elsewhere.path().join(".fresco").exists(), "a failed query left an index behind");
    let out = fresco().args(["query", "proj", "find \"*\""]).current_dir(elsewhere.path()).output().expect("run");
    assert!(out.status.success(), "the directory is not 'inside an indexed root': {}", stderr(&out));
    // PATH must be a directory.
    let out = run(&["status", repo.path().join("pkg/a.py").to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));

    // A subdirectory of an indexed root is not indexed as a second repository behind the
    // user's back: the command refuses, naming the root, and writes nothing there.
    let sub = repo.path().join("pkg");
    let sub_s = sub.to_str().expect("utf8");
    for args in [vec!["query", sub_s, "callers pkg.a.f"], vec!["status", sub_s]] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(root), "{}", stderr(&out));
    }
    // `serve` too: it would otherwise start a second daemon with its own index in there.
    let mut serve = fresco().args(["serve", sub_s]).stderr(std::process::Stdio::piped()).spawn().expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(status) = serve.try_wait().expect("wait") {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = serve.kill();
            panic!("`fresco serve` on a subdirectory of an indexed root kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(2));
    assert!(!sub.join(".fresco").exists());
    // The root itself answers.
    let out = run(&["query", root, "callers pkg.a.f", "--json"]);
    assert_eq!(json(&out)["results"][0]["name"], "pkg.a.g");

    // A result limit says so in JSON too, not only in the table.
    let out = run(&["query", root, "find \"*\"", "--json", "--limit", "1"]);
    let v = json(&out);
    assert_eq!(v["truncated"], true, "{v}");
    assert!(
        v["notes"].as_array().is_some_and(|n| n.iter().any(|n| n.as_str().is_some_and(|n| n.contains("limit")))),
        "{v}"
    );
}

#[test]
fn the_settings_that_choose_files_are_kept_by_the_index_for_later_commands() {
    let repo = repo(&[
        (".gitignore", b"generated.py\n"),
        ("kept.py", b"def f():\n    return 1\n"),
        ("generated.py", b"def g():\n    return 2\n"),
        ("big.py", &[b'#'; 5000]),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let files = |args: &[&str]| {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let v = json(&out);
        (v["files"].as_u64().unwrap_or(0), v["skipped_files"].clone())
    };
    let skipped_count = |v: &serde_json::Value| v.as_u64().unwrap_or(u64::MAX);
    // Given once, the settings hold for the commands after, which do not give them.
    let (n, skipped) = files(&["index", root, "--json", "--no-gitignore", "--max-file-size", "4096"]);
    assert_eq!((n, skipped_count(&skipped)), (3, 1), "{skipped}");
    let (n, skipped) = files(&["status", root, "--json"]);
    assert_eq!((n, skipped_count(&skipped)), (3, 1), "{skipped}");
    let out = run(&["query", root, "show generated.g", "--json"]);
    assert_eq!(json(&out)["results"][0]["name"], "generated.g");
    // Given again, other values replace them, for unchanged files too.
    let (n, skipped) = files(&["index", root, "--json", "--gitignore", "--max-file-size", "100000"]);
    assert_eq!((n, skipped_count(&skipped)), (2, 0), "{skipped}");
    let (n, _) = files(&["status", root, "--json"]);
    assert_eq!(n, 2);
    // A settings file that is not text is an error, as a line fresco does not know is: its
    // settings are not silently dropped (and the files they chose with them).
    std::fs::write(repo.path().join(".fresco/settings"), b"gitignore = false\n\xff\n").expect("write");
    let out = run(&["index", root]);
    assert!(!out.status.success(), "{}", stdout(&out));
    assert!(stderr(&out).contains("is not UTF-8 text (delete the file to reset)"), "{}", stderr(&out));
}

/// `index` says what it redid to catch up with the files: after a body edit, that file alone
/// (the facts other files resolved against did not change).
#[test]
fn index_says_what_catching_up_redid_and_a_body_edit_redoes_one_file() {
    let repo = repo(&[
        ("pkg/__init__.py", b""),
        ("pkg/a.py", b"def f():\n    return 1\n"),
        ("pkg/b.py", b"from pkg.a import f\n\n\ndef g():\n    return f()\n"),
        ("pkg/c.py", b"from pkg.b import g\n\n\ndef h():\n    return g()\n"),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let caught_up = || {
        let out = run(&["index", root, "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        json(&out)["caught_up"].clone()
    };
    let counts =
        |v: serde_json::Value| (v["changed_files"].clone(), v["removed_files"].clone(), v["resolved_files"].clone());
    assert_eq!(counts(caught_up()), (4.into(), 0.into(), 4.into()), "a first index reads every file");
    assert_eq!(counts(caught_up()), (0.into(), 0.into(), 0.into()), "nothing changed: everything reused");
    std::fs::write(repo.path().join("pkg/a.py"), "def f():\n    x = 2\n    return x\n").expect("write");
    assert_eq!(counts(caught_up()), (1.into(), 0.into(), 1.into()), "a body edit: that file alone");
    std::fs::remove_file(repo.path().join("pkg/c.py")).expect("remove");
    let (changed, removed, _) = counts(caught_up());
    assert_eq!((changed, removed), (0.into(), 1.into()), "a removed file");
    let out = run(&["index", root]);
    assert!(
        stdout(&out).contains("this run           0 changed, 0 removed, 0 resolved again; 3 reused as stored"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn every_exported_edge_has_both_ends_among_the_nodes_even_to_a_skipped_module() {
    let big = format!("def huge():\n    pass\n{}", "# pad\n".repeat(2000));
    let repo = repo(&[
        ("big.py", big.as_bytes()),
        ("blob.py", b"\x00\x01\x02\x03def x(): pass\n"),
        ("app.py", b"import big\nfrom big import huge\nimport blob\n\n\ndef use():\n    huge()\n    big.huge()\n"),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let out_dir = tempfile::tempdir().expect("tempdir");
    let out = run(&["export", root, "--out", out_dir.path().to_str().expect("utf8"), "--max-file-size", "4096"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let nodes: Vec<serde_json::Value> = std::fs::read_to_string(out_dir.path().join("nodes.jsonl"))
        .expect("nodes")
        .lines()
        .map(|l| serde_json::from_str(l).expect("json"))
        .collect();
    let ids: HashSet<&str> = nodes.iter().filter_map(|n| n["id"].as_str()).collect();
    let edges = edges_of(out_dir.path());
    assert!(edges.iter().any(|(src, dst, _)| src == "app" && dst == "big"), "{edges:?}");
    for (src, dst, kind) in &edges {
        assert!(ids.contains(src.as_str()) && ids.contains(dst.as_str()), "{kind} {src} -> {dst}: {ids:?}");
    }
    // The skipped modules are nodes that say why.
    for (module, why) in [("big", "too large"), ("blob", "binary")] {
        let node = nodes.iter().find(|n| n["id"] == module).expect("a node for the skipped module");
        assert_eq!(node["kind"], "module");
        assert!(node["skipped"].as_str().is_some_and(|s| s.contains(why)), "{node}");
    }
}

#[test]
fn a_search_without_a_daemon_reuses_the_stored_lexical_index_and_sees_edits() {
    let repo = repo(&[
        ("pkg/__init__.py", b""),
        ("pkg/net.py", b"def retry_connection(conn):\n    \"\"\"Open the connection again.\"\"\"\n    return conn\n"),
        ("pkg/disk.py", b"def flush_buffers(fd):\n    \"\"\"Write what is buffered.\"\"\"\n    return fd\n"),
    ]);
    let root = repo.path().to_str().expect("utf8");
    let top = |query: &str| -> Vec<String> {
        let out = run(&["query", root, query, "--json"]);
        assert!(out.status.success(), "{query}: {}", stderr(&out));
        let v = json(&out);
        v["results"].as_array().expect("results").iter().map(|r| r["name"].as_str().unwrap_or("").to_string()).collect()
    };
    assert_eq!(top("search \"zeppelin\" k 5 lanes bm25"), Vec::<String>::new());
    assert_eq!(top("search \"retry connection\" k 1 lanes bm25"), ["pkg.net.retry_connection"]);
    let meta = repo.path().join(".fresco/text/meta.json");
    let stored = std::fs::read(&meta).expect("the lexical index is stored beside the graph");
    // Unchanged files: reopened as stored, nothing committed.
    assert_eq!(top("search \"flush\" k 1 lanes bm25"), ["pkg.disk.flush_buffers"]);
    assert_eq!(std::fs::read(&meta).expect("meta"), stored);
    // An edit, a new file and a removed one between two queries: the next one sees all three.
    std::fs::write(repo.path().join("pkg/net.py"), "def retry_zeppelin(conn):\n    return conn\n").expect("write");
    std::fs::write(repo.path().join("pkg/more.py"), "def airship():\n    \"\"\"A zeppelin.\"\"\"\n").expect("write");
    std::fs::remove_file(repo.path().join("pkg/disk.py")).expect("remove");
    let mut found = top("search \"zeppelin\" k 5 lanes bm25");
    found.sort();
    assert_eq!(found, ["pkg.more.airship", "pkg.net.retry_zeppelin"]);
    assert_eq!(top("search \"flush buffers\" k 5 lanes bm25"), Vec::<String>::new());
    assert_ne!(std::fs::read(&meta).expect("meta"), stored);
}

#[test]
fn a_relative_runtime_directory_is_refused_by_every_command() {
    let repo = repo(&[("a.py", b"def f():\n    return 1\n")]);
    let root = repo.path().to_str().expect("utf8");
    for args in [vec!["status", root], vec!["query", root, "find \"f\""], vec!["index", root], vec!["stop", root]] {
        let out = fresco().args(&args).env("FRESCO_RUNTIME_DIR", "relative/dir").output().expect("run fresco");
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("FRESCO_RUNTIME_DIR must be an absolute path (it is relative/dir)"), "{args:?}");
    }
}

/// An index directory that is a symbolic link to nowhere is named as such, not reported as
/// "File exists" from deep in the store.
#[test]
fn an_index_directory_linked_to_nowhere_is_named() {
    let repo = repo(&[("a.py", b"A = 1\n")]);
    let root = repo.path().to_str().expect("utf8");
    let missing = repo.path().join("not-there");
    std::os::unix::fs::symlink(&missing, repo.path().join(".fresco")).expect("symlink");
    let out = run(&["index", root]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("is a symbolic link to") && err.contains("not-there"), "{err}");
    // A link to itself is a loop, not a directory to create.
    std::fs::remove_file(repo.path().join(".fresco")).expect("unlink");
    std::os::unix::fs::symlink(".fresco", repo.path().join(".fresco")).expect("symlink");
    let err = stderr(&run(&["index", root]));
    assert!(err.contains("leads back to the link"), "{err}");
    std::fs::remove_file(repo.path().join(".fresco")).expect("unlink");
    std::os::unix::fs::symlink(&missing, repo.path().join(".fresco")).expect("symlink");
    // Made, the link serves.
    std::fs::create_dir(&missing).expect("mkdir");
    let out = run(&["index", root]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(missing.join("graph").is_dir());
}

#[test]
fn status_names_the_index_directory_absolute_whatever_the_working_directory() {
    // A daemon's `status` names its `--db` for clients in other working directories to compare
    // with theirs; given relative, it named it relative (a review found a client matching the
    // wrong index).
    let repo = repo(&[("m.py", b"def f():\n    return 1\n")]);
    let out = fresco().args(["status", ".", "--db", "idx", "--json"]).current_dir(repo.path()).output().expect("run");
    assert!(out.status.success(), "{}", stderr(&out));
    let db = json(&out)["db"].as_str().map(std::path::PathBuf::from).expect("db");
    assert!(db.is_absolute(), "{db:?}");
    assert_eq!(db.canonicalize().expect("made"), repo.path().canonicalize().expect("canonical").join("idx"));
}

/// The opt-in retrieval trace: a JSON line per `search`/`context` query with the lanes' lists,
/// the fused ranking and what entered the context; a trace file that cannot be opened is said,
/// not silently skipped.
#[test]
fn the_retrieval_trace_records_each_retrieval_query() {
    let repo = repo(&[(
        "shop.py",
        b"RATE = 3\n\n\ndef retry_connection(n):\n    \"\"\"Retry a failed connection.\"\"\"\n    return n * RATE\n\n\n\
          def fetch(url):\n    return retry_connection(len(url))\n",
    )]);
    let root = repo.path().to_str().expect("utf8");
    let traces = tempfile::tempdir().expect("tempdir");
    let trace = traces.path().join("trace.jsonl");
    let asked = |query: &str, trace: &std::path::Path| {
        fresco().args(["query", root, "--no-daemon", query]).env("FRESCO_RETRIEVAL_TRACE", trace).output().expect("run")
    };
    let out = asked("search \"retry a failed connection\" k 3", &trace);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = asked("context shop.fetch budget 200", &trace);
    assert!(out.status.success(), "{}", stderr(&out));
    // Not a retrieval query: no line.
    assert!(asked("callers shop.retry_connection", &trace).status.success());
    let text = std::fs::read_to_string(&trace).expect("the trace");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert_eq!(lines[0]["query"], "search \"retry a failed connection\" k 3");
    assert_eq!(lines[0]["lane_results"]["bm25"][0]["name"], "shop.retry_connection", "{text}");
    assert_eq!(lines[0]["lanes"]["dense"]["status"], "unavailable", "{text}");
    assert!(lines[0]["version"].as_u64().is_some() && lines[0]["context"].is_null(), "{text}");
    let context = &lines[1]["context"];
    assert_eq!(context["target"], "shop.fetch", "{text}");
    assert!(
        context["units"].as_array().is_some_and(|u| u.iter().any(|u| u["name"] == "shop.retry_connection")),
        "{text}"
    );
    assert!(context["tokens"].as_u64().is_some_and(|t| t <= 200), "{text}");
    let fused = lines[1]["fused"].as_array().cloned().unwrap_or_default();
    assert!(!fused.is_empty(), "{text}");
    // The target's own module, its whole file, is no example.
    assert!(!fused.iter().any(|f| f["name"] == "shop"), "{text}");
    // A trace that cannot be written: the answer all the same, and a warning.
    let out = asked("search \"retry\" k 3", &traces.path().join("no/such/dir/trace.jsonl"));
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("cannot open the retrieval trace file"), "{}", stderr(&out));
}

#[test]
fn with_json_an_error_that_ends_the_command_is_json_on_standard_output_too() {
    let work = tempfile::tempdir().expect("tempdir");
    let missing = work.path().join("no-such-dir");
    let missing_s = missing.to_str().expect("utf8");
    for args in [vec!["query", missing_s, "callers x", "--json"], vec!["status", missing_s, "--json"]] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let error = &json(&out)["error"];
        assert_eq!(error["code"], "USAGE", "{args:?}: {error}");
        assert!(error["message"].as_str().is_some_and(|m| m.contains("no-such-dir")), "{error}");
        assert!(stderr(&out).contains("no-such-dir"), "and as text on standard error");
    }
    // A command line that is not UTF-8 is a usage error, not a crash.
    {
        use std::os::unix::ffi::OsStrExt;
        let out = fresco()
            .args([std::ffi::OsStr::new("query"), std::ffi::OsStr::from_bytes(b"\xff"), "--json".as_ref()])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    }
    // A missing argument is named.
    let out = run(&["query", "--json"]);
    assert!(
        json(&out)["error"]["message"].as_str().is_some_and(|m| m.contains("were not provided")),
        "{}",
        stdout(&out)
    );
    // Errors of the command line itself, and `--format json` as `--json`.
    let here = work.path().to_str().expect("utf8");
    for args in [
        vec!["query", here, "callers x", "--json", "--limit", "abc"],
        vec!["query", here, "callers x", "--json", "--format", "table"],
        vec!["query", here, "callers x", "extra", "--json"],
        vec!["query", missing_s, "callers x", "--format", "json"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert_eq!(json(&out)["error"]["code"], "USAGE", "{args:?}: {}", stdout(&out));
        assert_eq!(stdout(&out).lines().count(), 1, "one JSON document: {}", stdout(&out));
    }
    // Without `--json`, standard output stays empty.
    let out = run(&["query", missing_s, "callers x"]);
    assert_eq!((out.status.code(), stdout(&out)), (Some(2), String::new()));
}

#[test]
fn an_index_of_another_root_given_with_db_is_refused_not_rebuilt() {
    let work = tempfile::tempdir().expect("tempdir");
    let (a, b) = (work.path().join("a"), work.path().join("b"));
    for (dir, text) in [(&a, "def fa():\n    pass\n"), (&b, "def fb():\n    pass\n")] {
        std::fs::create_dir_all(dir).expect("mkdir");
        std::fs::write(dir.join("m.py"), text).expect("write");
    }
    let (a_s, b_s) = (a.to_str().expect("utf8"), b.to_str().expect("utf8"));
    let b_db = b.join(".fresco");
    let b_db_s = b_db.to_str().expect("utf8");
    assert!(run(&["index", b_s]).status.success());
    let out = run(&["query", a_s, "--db", b_db_s, "find \"fa\"", "--json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("holds the graph of"), "{}", stderr(&out));
    // b's index was left alone: its first version still answers.
    let out = run(&["query", b_s, "find \"fb\"", "--json"]);
    assert_eq!((json(&out)["version"].as_u64(), names(&json(&out))), (Some(1), vec!["m.fb".to_string()]));
    // `export --stored` does not export b's stored graph as a's.
    let out = run(&["export", a_s, "--db", b_db_s, "--stored", "--out", work.path().join("x").to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // A copy of b brings b's index along, inside it: the copy's own, with `--db` as without.
    let copy = work.path().join("b-copy");
    copy_tree(&b, &copy);
    let copy_db = copy.join(".fresco");
    let out =
        run(&["query", copy.to_str().expect("utf8"), "--db", copy_db.to_str().expect("utf8"), "find \"fb\"", "--json"]);
    assert_eq!(names(&json(&out)), vec!["m.fb".to_string()], "{}", stderr(&out));
    // A nested repository's index inside PATH is not PATH's.
    let inner = b.join("inner");
    std::fs::create_dir_all(&inner).expect("mkdir");
    std::fs::write(inner.join("i.py"), "def fi():\n    pass\n").expect("write");
    let inner_s = inner.to_str().expect("utf8");
    assert!(run(&["index", inner_s]).status.success());
    let inner_db = inner.join(".fresco");
    let out = run(&["index", b_s, "--db", inner_db.to_str().expect("utf8")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // An index whose root is gone (the repository moved) is taken over by the root given.
    let elsewhere = work.path().join("idx");
    let elsewhere_s = elsewhere.to_str().expect("utf8");
    assert!(run(&["index", a_s, "--db", elsewhere_s]).status.success());
    let moved = work.path().join("a-moved");
    std::fs::rename(&a, &moved).expect("move");
    let out = run(&["query", moved.to_str().expect("utf8"), "--db", elsewhere_s, "find \"fa\"", "--json"]);
    assert_eq!(names(&json(&out)), vec!["m.fa".to_string()], "{}", stderr(&out));
}

#[test]
fn no_daemon_commands_at_once_share_the_stored_index() {
    // `--no-daemon` queries that find the store held by another command wait for it instead of
    // indexing the repository again in memory (and saying a daemon held it). The store's lock
    // (sled's `flock` on `graph/db`) is held here for a set time, longer than opening the store
    // waits for it (2 s) and well within the commands' limit (10 s): held by a command indexing
    // a large repository instead, a loaded machine took longer than the limit.
    let work = tempfile::tempdir().expect("tempdir");
    let repo = work.path().join("repo");
    std::fs::create_dir_all(&repo).expect("mkdir");
    for i in 0..20 {
        std::fs::write(repo.join(format!("m{i}.py")), format!("def g{i}(x):\n    return x\n")).expect("write");
    }
    let repo_s = repo.to_str().expect("utf8").to_string();
    let first = run(&["query", &repo_s, "find \"g1*\" kind function | count", "--json", "--no-daemon"]);
    assert_eq!(json(&first)["count"], 11, "{}", stderr(&first));
    let store = std::fs::File::open(repo.join(".fresco/graph/db")).expect("the store's lock file");
    store.lock().expect("lock the store");
    let runs: Vec<_> = (0..2)
        .map(|_| {
            let repo_s = repo_s.clone();
            std::thread::spawn(move || {
                run(&["query", &repo_s, "find \"g1*\" kind function | count", "--json", "--no-daemon"])
            })
        })
        .collect();
    std::thread::sleep(std::time::Duration::from_secs(4));
    store.unlock().expect("unlock the store");
    for handle in runs {
        let out = handle.join().expect("thread");
        assert!(out.status.success(), "{}", stderr(&out));
        let answer = json(&out);
        assert_eq!(answer["count"], 11, "{answer}");
        assert!(!answer.to_string().contains("indexed in memory"), "{answer}");
        assert!(stderr(&out).contains("in use by another fresco command; waiting"), "{}", stderr(&out));
    }
}
