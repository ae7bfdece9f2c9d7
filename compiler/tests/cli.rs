//! The `policyc` command line as a user sees it: exit codes, output formats
//! and one-line errors for bad input.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn policyc() -> Command {
    Command::cargo_bin("policyc").unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

const CLEAN: &str =
    "bundle motd {\n  file \"/etc/motd\" { content = \"hi\\n\"; mode = 0o644; }\n}\npolicy { motd(); }\n";
const BROKEN: &str = "bundle motd {\n  file \"/etc/motd\" { content = ; }\n}\n";

#[test]
fn clean_file_prints_only_a_summary_and_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "ok.policy", CLEAN);
    let out = policyc().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "checked 1 file, 1 promise: no errors\n"
    );
    assert!(out.stderr.is_empty());
}

#[test]
fn errors_exit_1_with_located_diagnostics() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad.policy", BROKEN);
    let out = policyc().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[E0001]"), "{stdout}");
    assert!(stdout.contains("bad.policy:2:32"), "{stdout}");
    assert!(
        stdout.ends_with("checked 1 file, 0 promises: 1 error\n"),
        "{stdout}"
    );
    // Not a terminal: no colour escapes.
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
}

#[test]
fn json_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad.policy", BROKEN);
    let out = policyc()
        .args(["check", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let diags = json["diagnostics"].as_array().unwrap();
    assert_eq!(diags.len(), 1);
    let d = &diags[0];
    assert_eq!(d["code"], "E0001");
    assert_eq!(d["severity"], "error");
    assert!(d["help"].is_string());
    assert!(d["notes"].is_array());
    let label = &d["labels"][0];
    assert_eq!(label["line"], 2);
    assert_eq!(label["column"], 32);
    assert_eq!(label["end_line"], 2);
    assert_eq!(label["end_column"], 33);
    assert_eq!(label["primary"], true);
    assert!(label["file"].as_str().unwrap().ends_with("bad.policy"));
}

#[test]
fn json_format_when_clean_is_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "ok.policy", CLEAN);
    let out = policyc()
        .args(["check", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!({ "format": "converge-check/1", "diagnostics": [] })
    );
}

#[test]
fn sarif_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "bad file.policy", BROKEN);
    let out = policyc()
        .args(["check", "--format", "sarif"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let sarif: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let run = &sarif["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "policyc");
    assert_eq!(run["columnKind"], "unicodeCodePoints");
    let result = &run["results"][0];
    assert_eq!(result["ruleId"], "E0001");
    assert_eq!(result["level"], "error");
    let rule_index = result["ruleIndex"].as_u64().unwrap() as usize;
    assert_eq!(run["tool"]["driver"]["rules"][rule_index]["id"], "E0001");
    let loc = &result["locations"][0]["physicalLocation"];
    assert!(loc["artifactLocation"]["uri"]
        .as_str()
        .unwrap()
        .ends_with("bad%20file.policy"));
    assert_eq!(loc["region"]["startLine"], 2);
    assert_eq!(loc["region"]["startColumn"], 32);
}

#[test]
fn missing_file_is_a_one_line_error_exit_66() {
    let out = policyc()
        .args(["check", "/nonexistent/dir/site.policy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: cannot read `/nonexistent/dir/site.policy`"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn non_utf8_file_is_refused_exit_66() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.policy");
    std::fs::write(&path, b"bundle caf\xe9 {}\n").unwrap();
    let out = policyc().arg("check").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(66));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("not valid UTF-8 (first bad byte at offset 10)"),
        "{stderr}"
    );
}

#[test]
fn directories_are_searched_for_policy_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("roles")).unwrap();
    write(dir.path(), "site.policy", CLEAN);
    write(&dir.path().join("roles"), "web.policy", "bundle web { }\n");
    write(dir.path(), "README.md", "not policy");
    let out = policyc().arg("check").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "checked 2 files, 1 promise: no errors\n"
    );

    let empty = tempfile::tempdir().unwrap();
    let out = policyc().arg("check").arg(empty.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&out.stderr).contains("contains no `.policy` files"));
}

#[test]
fn usage_errors_exit_64_as_in_policyvm() {
    let out = policyc().arg("check").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = policyc()
        .args(["check", "--format", "xml", "a.policy"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64));
    let out = policyc().arg("frobnicate").output().unwrap();
    assert_eq!(out.status.code(), Some(64));
}

#[test]
fn version_and_help() {
    let out = policyc().arg("--version").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("policyc {}\n", env!("CARGO_PKG_VERSION"))
    );
    let out = policyc().arg("help").output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("check"), "{help}");
    assert!(help.contains("Usage: policyc"), "{help}");
}

#[test]
fn deny_warnings_passes_a_clean_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "ok.policy", CLEAN);
    let out = policyc()
        .args(["check", "--deny-warnings"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn warnings_exit_0_unless_denied() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(
        dir.path(),
        "warn.policy",
        "bundle b {\n  command \"apt-update\" { run = [\"/usr/bin/apt-get\", \"update\"]; }\n}\npolicy { b(); }\n",
    );
    let out = policyc().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[W0001]"), "{stdout}");
    assert!(
        stdout.ends_with("checked 1 file, 1 promise: no errors, 1 warning\n"),
        "{stdout}"
    );
    let out = policyc()
        .args(["check", "--deny-warnings"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn imports_are_followed_and_the_stdlib_is_embedded() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("roles")).unwrap();
    write(
        &dir.path().join("roles"),
        "web.policy",
        "import \"std/files.policy\";\nbundle web { file \"/etc/web\" { content = \"w\\n\"; use public_file; } }\n",
    );
    let site = write(
        dir.path(),
        "site.policy",
        "import \"roles/web.policy\";\nimport \"std/classes.policy\";\npolicy { when weekday { web(); } }\n",
    );
    let out = policyc().arg("check").arg(&site).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("checked 4 files, 1 promise: no errors"),
        "{stdout}"
    );
}

#[test]
fn human_output_is_capped_but_the_summary_counts_everything() {
    let dir = tempfile::tempdir().unwrap();
    let terms: Vec<String> = (0..500).map(|i| format!("undefined{i}")).collect();
    let file = write(
        dir.path(),
        "many.policy",
        &format!("class many = {};\n", terms.join(" || ")),
    );
    let out = policyc().arg("check").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(stdout.matches("[E0105]").count(), 200);
    assert!(stdout.contains("... and 300 more diagnostics"), "{stdout}");
    assert!(stdout.ends_with("500 errors\n"), "{stdout}");
    let out = policyc()
        .args(["check", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["diagnostics"].as_array().unwrap().len(), 500);
}

const FEEDBACK: &str = r#"class changed;
class failed;
bundle app {
  file "/etc/app.conf" { content = "x\n"; on_repaired = changed; }
  when changed {
    command "reload" { run = ["/usr/bin/app", "reload"]; creates = "/run/app"; on_failed = failed; }
  }
  when failed { report "reload" { message = "reload failed"; } }
  directory "/etc/app.d" { mode = 0o755; }
  file "/etc/app.d/extra.conf" { content = "y\n"; after = [file "/etc/app.conf"]; }
}
policy { app(); }
"#;

#[test]
fn explain_shows_objects_order_and_pass_limit() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "app.policy", FEEDBACK);
    let out = policyc().arg("explain").arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("5 promises on 5 objects"), "{text}");
    assert!(text.contains("pass limit 4"), "{text}");
    assert!(text.contains("when changed"), "{text}");
    // The order respects every edge: the file before the command, the
    // directory before what is inside it.
    let position = |needle: &str| {
        let order = text.split("order (").nth(1).unwrap();
        order
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} not in order:\n{order}"))
    };
    assert!(position("file \"/etc/app.conf\"") < position("command \"reload\""));
    assert!(position("command \"reload\"") < position("report \"reload\""));
    assert!(position("directory \"/etc/app.d\"") < position("file \"/etc/app.d/extra.conf\""));
    assert!(
        text.contains("sets `changed` -> command \"reload\""),
        "{text}"
    );
    assert!(
        text.contains("sets `failed` -> report \"reload\""),
        "{text}"
    );
}

#[test]
fn graph_prints_dot() {
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "app.policy", FEEDBACK);
    let out = policyc()
        .args(["graph", "--format", "dot"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let dot = String::from_utf8_lossy(&out.stdout);
    assert!(dot.starts_with("digraph policy {"), "{dot}");
    assert!(
        dot.contains("p0 -> p1 [style=bold, color=red, label=\"changed\"];"),
        "{dot}"
    );
    assert!(
        dot.contains("p3 -> p4 [style=dotted, label=\"contains\"];"),
        "{dot}"
    );
    assert!(dot.contains("p0 -> p4 [label=\"after\"];"), "{dot}");
    assert!(dot.trim_end().ends_with('}'));
}

#[test]
fn explain_refuses_a_policy_with_errors_or_without_a_policy_block() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path(), "bad.policy", BROKEN);
    let out = policyc().arg("explain").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("[E0001]"));
    let library = write(dir.path(), "lib.policy", "bundle b { }\n");
    let out = policyc().arg("graph").arg(&library).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("has no `policy` block"));
}
