//! `policyc test` (LANGUAGE.md section 16) on the corpus of
//! `tests/policy_test/`:
//!
//! - `site/`: a policy with a per-host lookup, a rendered template, a probe
//!   fact, a run-time loop and an outcome class; `site/tests/` passes,
//!   `site/failing/` holds planted failures whose output is snapshotted;
//! - `ui/`: bad test files, each with its diagnostics (first line
//!   `// expect: CODE@LINE ...`, asserted apart from the snapshot);
//! - `run/`: a files-only policy with fixture roots for `--run`, which
//!   runs the real `policyvm` on a copy.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::{Command, Output};

use converge::{binary, repo_root};
use converge_compiler::render::{render_human, render_json};
use converge_compiler::testing::suite;

fn policyc(args: &[&str]) -> Output {
    Command::new(binary("policyc"))
        .current_dir(repo_root())
        .arg("test")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const SITE: &str = "tests/policy_test/site";

#[test]
fn the_passing_tests_pass() {
    let out = policyc(&["--policy-root", SITE, "tests/policy_test/site/tests"]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    let lines: Vec<&str> = text.lines().filter(|l| l.starts_with("ok ")).collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        text.contains(
            "ok     a web host gets its port from the lookup and a rendered template (tests/policy_test/site/tests/passing.test.policy:4)"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("test result: ok. 5 passed; 0 failed\n"),
        "{text}"
    );
    // The outcome-class promise passes, said to be conditional.
    assert!(
        text.contains("is conditional on outcome class `app_changed`"),
        "{text}"
    );
}

/// Each planted failure fails with the expected output: expected and
/// actual values, a diff of the rendered template, the closest promiser,
/// the reason a promise is unknown.
#[test]
fn planted_failures_fail_with_their_expected_output() {
    let dir = repo_root().join("tests/policy_test/site/failing");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), 3);
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let relative = format!("tests/policy_test/site/failing/{name}");
        let out = policyc(&["--policy-root", SITE, &relative]);
        assert_eq!(out.status.code(), Some(1), "{name}: {}", stderr(&out));
        let text = stdout(&out);
        assert!(text.contains("FAILED"), "{text}");
        // The JSON document has the same failures as the text.
        let json = policyc(&["--policy-root", SITE, "--format", "json", &relative]);
        assert_eq!(json.status.code(), Some(1));
        let doc: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        let failures: usize = doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["failures"].as_array().unwrap().len())
            .sum();
        let shown = text.lines().filter(|l| l.starts_with("  expect ")).count();
        assert_eq!(failures, shown, "{name}: {text}");
        assert_eq!(doc["summary"]["failed"], doc["summary"]["total"], "{name}");
        insta::assert_snapshot!(format!("policy_test_failing_{name}"), text);
    }
}

#[test]
fn the_failures_name_what_differs() {
    let out = policyc(&[
        "--policy-root",
        SITE,
        "tests/policy_test/site/failing/wrong_values.test.policy",
    ]);
    let text = stdout(&out);
    for wanted in [
        "-port = 9090",
        "+port = 8080",
        "`mode` is 0o640, expected 0o600",
        "`state` is installed, expected removed",
        "`content` does not contain \"port = 8080\"",
    ] {
        assert!(text.contains(wanted), "{wanted:?} in\n{text}");
    }
    let out = policyc(&[
        "--policy-root",
        SITE,
        "tests/policy_test/site/failing/presence.test.policy",
    ]);
    let text = stdout(&out);
    assert!(text.contains("did you mean file \"/etc/motd\"?"), "{text}");
    let out = policyc(&[
        "--policy-root",
        SITE,
        "tests/policy_test/site/failing/unknown.test.policy",
    ]);
    let text = stdout(&out);
    assert!(
        text.contains("class `europe` is unknown: probe fact `facts.datacenter` is not given"),
        "{text}"
    );
}

/// `--format junit` is XML a CI parser accepts: one `<testcase>` per
/// test, a `<failure>` in each failed one.
#[test]
fn junit_output_is_well_formed_xml_with_a_case_per_test() {
    use quick_xml::events::Event;
    let out = policyc(&[
        "--policy-root",
        SITE,
        "--format",
        "junit",
        "tests/policy_test/site/tests",
        "tests/policy_test/site/failing",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let mut reader = quick_xml::Reader::from_reader(out.stdout.as_slice());
    let mut buf = Vec::new();
    let (mut suites, mut cases, mut failures) = (0, 0, 0);
    let mut names = Vec::new();
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Start(e)) | Ok(Event::Empty(e)) if e.name().as_ref() == b"testcase" => {
                cases += 1;
                let name = e
                    .try_get_attribute("name")
                    .unwrap()
                    .unwrap()
                    .normalized_value(quick_xml::XmlVersion::Implicit1_0)
                    .unwrap()
                    .into_owned();
                assert!(e.try_get_attribute("classname").unwrap().is_some());
                names.push(name);
            }
            Ok(Event::Start(e)) if e.name().as_ref() == b"testsuite" => suites += 1,
            Ok(Event::Start(e)) if e.name().as_ref() == b"failure" => failures += 1,
            Ok(Event::Eof) => break,
            Err(e) => panic!("not XML at {}: {e}", reader.buffer_position()),
            _ => {}
        }
        buf.clear();
    }
    assert_eq!(suites, 4, "one suite per test file");
    assert_eq!(cases, 11, "{names:?}");
    assert_eq!(failures, 6);
    assert!(names
        .iter()
        .any(|n| n == "canary hosts get the canary file"));
}

/// The JSON document of a passing run.
#[test]
fn json_output_of_passing_tests() {
    let out = policyc(&[
        "--policy-root",
        SITE,
        "--format",
        "json",
        "tests/policy_test/site/tests",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format"], "converge-test/1");
    assert_eq!(doc["summary"]["passed"], 5);
    let first = &doc["tests"][0];
    assert_eq!(first["status"], "passed");
    assert_eq!(
        first["file"],
        "tests/policy_test/site/tests/passing.test.policy"
    );
    assert_eq!(first["line"], 4);
}

/// Every bad test file of `tests/policy_test/ui/` gives exactly the
/// diagnostics its first line names, rendered as the snapshot shows.
#[test]
fn bad_test_files_are_diagnosed() {
    let root = repo_root().join("tests/policy_test");
    let ui = root.join("ui");
    insta::glob!("policy_test/ui/*.test.policy", |path| {
        let src = std::fs::read_to_string(path).unwrap();
        let relative =
            std::path::Path::new("tests/policy_test/ui").join(path.strip_prefix(&ui).unwrap());
        let loaded = suite::load(
            std::slice::from_ref(&relative),
            Some(std::path::Path::new("tests/policy_test")),
        )
        .unwrap();
        let (suites, diagnostics) = suite::prepare(&loaded);
        assert!(
            suites.is_empty(),
            "{}: a file with errors gives no suite",
            relative.display()
        );
        let expected: Vec<String> = src
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("// expect:"))
            .unwrap_or_else(|| {
                panic!(
                    "{}: first line must be `// expect: ...`",
                    relative.display()
                )
            })
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let json: serde_json::Value =
            serde_json::from_str(&render_json(&loaded.ws.db, &diagnostics)).unwrap();
        let found: Vec<String> = json["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let line = d["labels"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|l| l["primary"] == true)
                    .map(|l| l["line"].to_string())
                    .unwrap_or_default();
                format!("{}@{line}", d["code"].as_str().unwrap())
            })
            .collect();
        assert_eq!(found, expected, "diagnostics of {}", relative.display());
        let human = render_human(&loaded.ws.db, &diagnostics, false);
        insta::assert_snapshot!(format!("----- SOURCE\n{src}----- HUMAN\n{human}"));
    });
}

/// Bad input on the command line gets the table's exit codes.
#[test]
fn bad_input_exit_codes() {
    let out = policyc(&[
        "--policy-root",
        "tests/policy_test",
        "tests/policy_test/ui/unknown_fact.test.policy",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("did you mean `hostname`?"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "no test runs");
    let empty = tempfile::tempdir().unwrap();
    let out = policyc(&[empty.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(66), "{}", stderr(&out));
    assert!(stderr(&out).contains("contains no `*.test.policy` files"));
    let out = policyc(&["tests/policy_test/nothing.test.policy"]);
    assert_eq!(out.status.code(), Some(66));
    let out = policyc(&["--format", "yaml", "tests/policy_test/site/tests"]);
    assert_eq!(out.status.code(), Some(64));
}

/// `check` and `build` of a directory leave its test files out: they are
/// not policy.
#[test]
fn check_of_a_directory_skips_test_files() {
    let out = Command::new(binary("policyc"))
        .current_dir(repo_root())
        .args(["check", SITE])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
}

/// `--run` converges a copy of each fixture root with the real VM, checks
/// the files on disk and runs again; the preview alone cannot see that a
/// directory stands where the page should be, the run does.
#[test]
fn run_converges_fixture_roots_with_the_vm() {
    let vm = binary("policyvm");
    let vm = vm.to_str().unwrap();
    let args = |dir: &str| {
        vec![
            "--run".to_owned(),
            "--policyvm".to_owned(),
            vm.to_owned(),
            "--policy-root".to_owned(),
            "tests/policy_test/run".to_owned(),
            dir.to_owned(),
        ]
    };
    let run = |dir: &str| {
        let a = args(dir);
        policyc(&a.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let out = run("tests/policy_test/run/tests");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stdout(&out).contains("2 passed; 0 failed"));
    // The fixture itself is left as it was.
    assert!(!repo_root()
        .join("tests/policy_test/run/tests/fixtures/web/etc/motd")
        .exists());

    let preview_only = policyc(&[
        "--policy-root",
        "tests/policy_test/run",
        "tests/policy_test/run/failing",
    ]);
    assert_eq!(
        preview_only.status.code(),
        Some(0),
        "{}",
        stdout(&preview_only)
    );
    let out = run("tests/policy_test/run/failing");
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    assert!(text.contains("the first run"), "{text}");
    assert!(
        text.contains("`/srv/www/index.html` is a directory, not a file"),
        "{text}"
    );
    assert!(
        text.contains("expect file \"/srv/www/index.html\" on disk"),
        "{text}"
    );
}

#[test]
fn run_without_policyvm_is_a_clear_error() {
    let out = policyc(&[
        "--run",
        "--policyvm",
        "/nonexistent/policyvm",
        "--policy-root",
        "tests/policy_test/run",
        "tests/policy_test/run/tests",
    ]);
    assert_eq!(out.status.code(), Some(69));
    assert!(
        stderr(&out).contains("--policyvm /nonexistent/policyvm"),
        "{}",
        stderr(&out)
    );
}
