//! `policyvm run --interactive` (issue 25 item 5, LANGUAGE.md §17): on a
//! terminal, each repair is shown with its diff and made only on "y" or
//! "yes"; a declined one is `skipped (declined)` in the report, and what
//! comes after it is skipped too. Driven through a pseudo-terminal
//! (util-linux's `script`); without a terminal the run refuses.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

use ::converge::binary;
use ::converge::support::{compile, require_tool, write_trust};

const POLICY: &str = r#"
bundle b {
  file "/etc/accepted" { content = "new accepted\n"; }
  file "/etc/declined" { content = "new declined\n"; }
  file "/etc/after-declined" { content = "new after\n"; after = [file "/etc/declined"]; }
}
policy { b(); }
"#;

/// A root with the three files at their old content, the bundle and the
/// trust directory.
fn setup(dir: &Path) {
    let root = dir.join("root/etc");
    std::fs::create_dir_all(&root).unwrap();
    for name in ["accepted", "declined", "after-declined"] {
        std::fs::write(root.join(name), "old\n").unwrap();
    }
    std::fs::write(dir.join("b.bundle"), compile(POLICY)).unwrap();
    write_trust(&dir.join("trust"));
}

fn policyvm_run(dir: &Path, extra: &[&str]) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        binary("policyvm").display().to_string(),
        "run".into(),
        dir.join("b.bundle").display().to_string(),
        "--trust".into(),
        dir.join("trust").display().to_string(),
        "--root".into(),
        dir.join("root").display().to_string(),
        "--state".into(),
        dir.join("state").display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| (*s).to_owned()));
    argv
}

/// Runs `argv` on a pseudo-terminal, typing `answers`; what the terminal
/// showed, and the exit code.
fn on_a_terminal(argv: &[String], answers: &str) -> (String, Option<i32>) {
    let script = require_tool("script", "bsdutils");
    let line = argv
        .iter()
        .map(|w| format!("'{}'", w.replace('\'', r"'\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let mut child = Command::new(script)
        .args(["-qec", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .as_mut()
        .unwrap()
        .write_all(answers.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        out.status.code(),
    )
}

#[test]
fn yes_applies_a_repair_no_declines_it_and_what_comes_after() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let report = d.join("report.json");
    let argv = policyvm_run(
        d,
        &["--interactive", "--report", &report.display().to_string()],
    );
    let (shown, code) = on_a_terminal(&argv, "y\nno\n");

    // Each question names the promise and shows its diff.
    assert!(
        shown.contains(r#"would repair file "/etc/accepted" (<input>:3)"#)
            || shown.contains(r#"would repair file "/etc/accepted" ("#),
        "{shown}"
    );
    assert!(shown.contains("+new accepted"), "{shown}");
    assert!(shown.contains("-old"), "{shown}");
    assert!(shown.contains("+new declined"), "{shown}");
    assert_eq!(
        shown.matches("apply this repair? [y/N]").count(),
        2,
        "asked once per repair, never about what comes after a declined one: {shown}"
    );
    assert_eq!(code, Some(0), "{shown}");

    let root = d.join("root/etc");
    let read = |n: &str| std::fs::read_to_string(root.join(n)).unwrap();
    assert_eq!(read("accepted"), "new accepted\n");
    assert_eq!(read("declined"), "old\n");
    assert_eq!(read("after-declined"), "old\n");

    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let promise = |p: &str| {
        report["promises"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["promiser"] == p)
            .unwrap_or_else(|| panic!("no {p} in {report:#}"))
            .clone()
    };
    assert_eq!(promise("/etc/accepted")["outcome"], "repaired");
    let declined = promise("/etc/declined");
    assert_eq!(declined["outcome"], "skipped", "{declined:#}");
    assert_eq!(declined["error"], "declined", "{declined:#}");
    let after = promise("/etc/after-declined");
    assert_eq!(after["outcome"], "skipped", "{after:#}");
    assert!(
        after["error"].as_str().unwrap().contains("declined"),
        "{after:#}"
    );
}

/// The end of the input (or any other answer) declines.
#[test]
fn no_answer_declines_everything() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let (shown, code) = on_a_terminal(&policyvm_run(d, &["--interactive"]), "\n\n");
    assert_eq!(code, Some(0), "{shown}");
    for name in ["accepted", "declined", "after-declined"] {
        assert_eq!(
            std::fs::read_to_string(d.join("root/etc").join(name)).unwrap(),
            "old\n"
        );
    }
}

/// Without a terminal on standard input: a clear refusal, exit 64, and
/// nothing changed; with `--dry-run`: a usage error.
#[test]
fn without_a_terminal_or_with_dry_run_it_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    setup(d);
    let argv = policyvm_run(d, &["--interactive"]);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("needs a terminal"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(d.join("root/etc/accepted")).unwrap(),
        "old\n"
    );

    let argv = policyvm_run(d, &["--interactive", "--dry-run"]);
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "{stderr}");
    assert!(stderr.contains("--dry-run"), "{stderr}");
}
