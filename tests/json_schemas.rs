//! Every JSON document Converge writes validates against its published
//! schema (docs/schemas/, JSON Schema 2020-12). The outputs are collected by
//! running the real binaries over the UI corpus, the examples and the
//! golden bundles. Adding a schema means adding a row to [`CASES`]: a
//! schema without a row, or a row without outputs, fails.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use converge::{binary, repo_root};
use serde_json::Value;

/// A JSON output and where it came from (for the failure message).
type Output = (String, Value);

/// What collects the outputs one schema must accept.
type Collector = fn() -> Vec<Output>;

/// Each schema file of docs/schemas/, and what collects its outputs.
const CASES: &[(&str, Collector)] = &[
    ("converge-check-1.schema.json", check_outputs),
    ("converge-run-1.schema.json", run_outputs),
    ("converge-facts-1.schema.json", facts_outputs),
    ("converge-report-1.schema.json", uploaded_reports),
    ("converge-plan-1.schema.json", plan_outputs),
    ("converge-test-1.schema.json", test_outputs),
];

fn schemas_dir() -> PathBuf {
    repo_root().join("docs/schemas")
}

fn validator(file: &str) -> jsonschema::Validator {
    let text = std::fs::read_to_string(schemas_dir().join(file)).unwrap();
    let schema: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        schema["$schema"], "https://json-schema.org/draft/2020-12/schema",
        "{file}"
    );
    jsonschema::draft202012::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{file} is not a valid schema: {e}"))
}

fn json_of(what: &str, stdout: &[u8]) -> Value {
    serde_json::from_slice(stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}",
            String::from_utf8_lossy(stdout)
        )
    })
}

/// `policyc check --format json` of every UI case and every example.
fn check_outputs() -> Vec<Output> {
    let mut files = policy_files(&repo_root().join("tests/ui"));
    files.extend(policy_files(&repo_root().join("examples")));
    files
        .into_iter()
        .map(|file| {
            let out = Command::new(binary("policyc"))
                .current_dir(repo_root())
                .args(["check", "--format", "json"])
                .arg(&file)
                .output()
                .unwrap();
            let name = file.display().to_string();
            let value = json_of(&name, &out.stdout);
            (name, value)
        })
        .collect()
}

fn policy_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "policy")
                && !path.to_string_lossy().ends_with(".test.policy")
            {
                files.push(path.strip_prefix(repo_root()).unwrap().to_path_buf());
            }
        }
    }
    files.sort();
    files
}

/// The golden bundles that have a fixture root.
fn goldens() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo_root().join("tests/golden"))
        .unwrap()
        .filter_map(|e| {
            let path = e.unwrap().path();
            let name = path.file_name()?.to_str()?.to_owned();
            path.join("root").is_dir().then_some(name)
        })
        .collect();
    names.sort();
    assert!(!names.is_empty());
    names
}

/// A copy of a golden's fixture root, to converge.
fn fixture_root(name: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let from = repo_root().join("tests/golden").join(name).join("root");
    let status = Command::new("cp")
        .arg("-a")
        .arg(format!("{}/.", from.display()))
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    dir
}

fn golden_bundle(name: &str) -> PathBuf {
    repo_root()
        .join("tests/golden")
        .join(format!("{name}.bundle"))
}

fn trust() -> PathBuf {
    repo_root().join("tests/golden/trust")
}

/// `policyvm run --format json` of every golden, real and `--dry-run`; a
/// refused bundle; the agent's reports (a run, and a cycle with no bundle).
fn run_outputs() -> Vec<Output> {
    let mut outputs = Vec::new();
    for name in goldens() {
        for dry in [true, false] {
            let root = fixture_root(&name);
            let mut cmd = Command::new(binary("policyvm"));
            cmd.arg("run")
                .arg(golden_bundle(&name))
                .arg("--trust")
                .arg(trust())
                .arg("--root")
                .arg(root.path())
                .args(["--format", "json"]);
            if dry {
                cmd.arg("--dry-run");
            }
            let out = cmd.output().unwrap();
            let what = format!("policyvm run {name}{}", if dry { " --dry-run" } else { "" });
            outputs.push((what.clone(), json_of(&what, &out.stdout)));
        }
    }
    outputs.push(refused_report());
    outputs.extend(agent_reports());
    outputs
}

/// A bundle that is not one, with `--format json` and `--report FILE`:
/// exit 3, and the same report in both places.
fn refused_report() -> Output {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bad.bundle");
    std::fs::write(&bundle, "not a bundle\n").unwrap();
    let report = dir.path().join("report.json");
    let out = Command::new(binary("policyvm"))
        .arg("run")
        .arg(&bundle)
        .arg("--trust")
        .arg(trust())
        .arg("--root")
        .arg(dir.path())
        .args(["--format", "json", "--report"])
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(3),
        "refused: exit 3 (docs/exit-codes.md)"
    );
    let printed = json_of("refused run", &out.stdout);
    let written = json_of("refused run --report", &std::fs::read(&report).unwrap());
    assert_eq!(printed, written);
    assert_eq!(printed["converged"], false);
    assert!(
        printed["refused"]["reason"]
            .as_str()
            .unwrap()
            .contains("bad magic"),
        "{printed}"
    );
    ("policyvm run (refused bundle)".to_owned(), printed)
}

/// The agent's `reports/last.json` with no hub reachable: first with no
/// bundle at all (the error alone), then with a last-good bundle (a run
/// report with the agent's section).
fn agent_reports() -> Vec<Output> {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    let state = root.join("var/lib/converge");
    std::fs::create_dir_all(&state).unwrap();
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = dir.path().join("agent.toml");
    std::fs::write(
        &config,
        format!(
            "hubs = [\"http://127.0.0.1:{port}\"]\nname = \"files\"\ntrust = {:?}\nroot = {:?}\ntimeout = \"2s\"\n",
            trust(),
            root
        ),
    )
    .unwrap();
    let mut outputs = Vec::new();
    for (what, bundle) in [
        ("agent without a bundle", None),
        ("agent with last-good", Some("files")),
    ] {
        if let Some(name) = bundle {
            std::fs::copy(golden_bundle(name), state.join("last-good.bundle")).unwrap();
        }
        let out = Command::new(binary("policyvm"))
            .args(["agent", "--no-splay", "--config"])
            .arg(&config)
            .output()
            .unwrap();
        let last = std::fs::read(state.join("reports/last.json")).unwrap_or_else(|e| {
            panic!(
                "{what}: no report ({e}): {}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
        let value = json_of(what, &last);
        assert_eq!(
            value["agent"]["bundle_file"].is_string(),
            bundle.is_some(),
            "{value}"
        );
        outputs.push((what.to_owned(), value));
    }
    outputs
}

/// `policyvm facts --format json` on each golden's root.
fn facts_outputs() -> Vec<Output> {
    goldens()
        .into_iter()
        .map(|name| {
            let root = fixture_root(&name);
            let out = Command::new(binary("policyvm"))
                .args(["facts", "--format", "json", "--root"])
                .arg(root.path())
                .output()
                .unwrap();
            let what = format!("policyvm facts ({name})");
            let value = json_of(&what, &out.stdout);
            (what, value)
        })
        .collect()
}

/// `policyc plan --format json` of a change with every kind of change
/// (added, removed, changed with a diff, a secret, unknown for want of a
/// fact, conditional on an outcome class), of no change, and with a note.
fn plan_outputs() -> Vec<Output> {
    let dir = tempfile::tempdir().unwrap();
    let key = "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=";
    let recipient = "age1zvkyg2lqzraa2lnjvqej32nkuu0ues2s82hzrye869xeexvn73equnujwj";
    std::fs::write(
        dir.path().join("inventory.toml"),
        format!(
            "[[host]]\nname = \"web-01\"\nreport_key = \"{key}\"\nage_recipient = \"{recipient}\"\ngroups = [\"web\"]\nfacts = {{ dc = \"eu-1\" }}\n\
             [[host]]\nname = \"web-02\"\nreport_key = \"{key}\"\nage_recipient = \"{recipient}\"\ngroups = [\"web\"]\n"
        ),
    )
    .unwrap();
    let policy = |motd: &str, extra: &str| {
        format!(
            "class curl_new;\nfact dc: string from file \"/etc/dc\";\nlet pw: secret = secret(\"secrets/pw.age\");\n\
             bundle b {{\n  file \"/etc/motd\" {{ content = \"{motd}\"; mode = 0o644; }}\n\
             file \"/etc/dc\" {{ content = \"${{facts.dc}}\\n\"; }}\n\
             file \"/etc/pw\" {{ content = \"pw=${{pw}}\\n\"; mode = 0o600; }}\n\
             package \"curl\" {{ state = installed; on_repaired = curl_new; }}\n\
             when curl_new {{ command \"reload\" {{ run = [\"/bin/true\"]; }} }}\n{extra}}}\npolicy {{ b(); }}\n"
        )
    };
    for (side, text, armor) in [
        (
            "old",
            policy("a\\nb\\n", "  file \"/etc/old\" { content = \"x\"; }\n"),
            "1",
        ),
        (
            "new",
            policy("a\\nc\\n", "  package \"nginx\" { state = installed; }\n"),
            "2",
        ),
    ] {
        let root = dir.path().join(side);
        std::fs::create_dir_all(root.join("secrets")).unwrap();
        std::fs::write(
            root.join("secrets/pw.age"),
            format!(
                "-----BEGIN AGE ENCRYPTED FILE-----\n{armor}\n-----END AGE ENCRYPTED FILE-----\n"
            ),
        )
        .unwrap();
        std::fs::write(root.join("site.policy"), text).unwrap();
    }
    let facts = dir.path().join("facts");
    std::fs::create_dir(&facts).unwrap();
    std::fs::write(
        facts.join("stranger.json"),
        r#"{"format":"converge-facts/1","facts":{},"classes":[]}"#,
    )
    .unwrap();
    [("old", "new"), ("old", "old")]
        .into_iter()
        .map(|(a, b)| {
            let out = Command::new(binary("policyc"))
                .current_dir(dir.path())
                .args(["plan", a, b, "--format", "json", "--facts-from", "facts"])
                .args(["--inventory", "inventory.toml"])
                .output()
                .unwrap();
            let what = format!("policyc plan {a} {b}");
            assert!(
                matches!(out.status.code(), Some(0 | 2)),
                "{what}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let value = json_of(&what, &out.stdout);
            (what, value)
        })
        .collect()
}

/// The `converge-report/1` an agent would upload for each golden's run, and
/// for a cycle where nothing ran.
fn uploaded_reports() -> Vec<Output> {
    use converge_format::report::Timings;
    use converge_vm::bundle::keys::load_trust_dir;
    use converge_vm::bundle::open;
    use converge_vm::run::{run, RunOptions};
    use converge_vm::upload::report::{build, Cycle};

    let keys = load_trust_dir(&trust()).unwrap();
    let mut outputs = Vec::new();
    for name in goldens() {
        let root = fixture_root(&name);
        let bytes = std::fs::read(golden_bundle(&name)).unwrap();
        let verified = open(&bytes, &keys).unwrap();
        let opts = RunOptions {
            root: root.path().to_path_buf(),
            dry_run: false,
            defines: Vec::new(),
            state: None,
            blobs: Vec::new(),
        };
        let report = run(&verified, &opts).unwrap();
        for ran in [true, false] {
            let cycle = Cycle {
                host: "web-01",
                run_id: "0123456789abcdef0123456789abcdef".to_owned(),
                sequence: 7,
                started: 1_795_309_000,
                finished: 1_795_309_001,
                timings: Timings {
                    pull_ms: 1,
                    run_ms: 2,
                    total_ms: 3,
                },
                run: if ran {
                    Ok(&report)
                } else {
                    Err("no bundle to run")
                },
                facts: &report.facts,
            };
            let value = serde_json::to_value(build(&cycle)).unwrap();
            let what = format!(
                "uploaded report ({name}{})",
                if ran { "" } else { ", refused" }
            );
            outputs.push((what, value));
        }
    }
    outputs
}

/// `policyc test --format json` of the passing and the failing tests of
/// the `policyc test` corpus (tests/policy_test.rs).
fn test_outputs() -> Vec<Output> {
    ["tests", "failing"]
        .iter()
        .map(|dir| {
            let out = Command::new(binary("policyc"))
                .current_dir(repo_root())
                .args([
                    "test",
                    "--format",
                    "json",
                    "--policy-root",
                    "tests/policy_test/site",
                ])
                .arg(format!("tests/policy_test/site/{dir}"))
                .output()
                .unwrap();
            let name = format!("policyc test tests/policy_test/site/{dir}");
            let value = json_of(&name, &out.stdout);
            (name, value)
        })
        .collect()
}

#[test]
fn every_json_output_validates_against_its_schema() {
    let mut problems = Vec::new();
    for (file, collect) in CASES {
        let validator = validator(file);
        let outputs = collect();
        assert!(!outputs.is_empty(), "{file}: no outputs collected");
        for (what, value) in outputs {
            assert!(value["format"].is_string(), "{what}: no `format`: {value}");
            for error in validator.iter_errors(&value) {
                problems.push(format!(
                    "{file}: {what}: {}: {error}",
                    error.instance_path()
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_schema_has_outputs_and_the_book_links_it() {
    let chapter = std::fs::read_to_string(repo_root().join("docs/schemas.md")).unwrap();
    for entry in std::fs::read_dir(schemas_dir()).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if !name.ends_with(".schema.json") {
            continue;
        }
        assert!(
            CASES.iter().any(|(file, _)| *file == name),
            "docs/schemas/{name} has no row in CASES"
        );
        assert!(
            chapter.contains(&format!("schemas/{name}")),
            "docs/schemas.md does not link {name}"
        );
    }
}

/// The schemas are not vacuous: what they must refuse, they refuse.
#[test]
fn the_schemas_refuse_what_they_must() {
    let check = validator("converge-check-1.schema.json");
    assert!(
        !check.is_valid(&serde_json::json!({ "diagnostics": [] })),
        "no format"
    );
    assert!(
        !check.is_valid(&serde_json::json!({ "format": "converge-check/2", "diagnostics": [] }))
    );
    assert!(check.is_valid(&serde_json::json!({ "format": "converge-check/1", "diagnostics": [] })));
    let test = validator("converge-test-1.schema.json");
    let summary = serde_json::json!({ "total": 1, "passed": 0, "failed": 1 });
    let failed = |failures: serde_json::Value| {
        serde_json::json!({
            "format": "converge-test/1",
            "tests": [{ "name": "t", "file": "f", "line": 1, "status": "failed",
                        "duration_ms": 0, "failures": failures, "notes": [] }],
            "summary": summary,
        })
    };
    assert!(
        !test.is_valid(&failed(serde_json::json!([]))),
        "failed with no failure"
    );
    assert!(test.is_valid(&failed(serde_json::json!([{
        "expectation": "expect file \"/x\"", "location": "f:2", "message": "m",
        "expected": null, "actual": null, "diff": null
    }]))));
    let run = validator("converge-run-1.schema.json");
    assert!(!run.is_valid(&serde_json::json!({ "format": "converge-run/1" })));
    assert!(!run.is_valid(&serde_json::json!({
        "format": "converge-run/1", "converged": true,
        "refused": { "bundle": "b", "reason": "r" }
    })));
}
