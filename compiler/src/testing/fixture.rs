//! `policyc test --run`: a test with `root = "fixtures/web"` also runs the
//! real VM. The fixture root is copied to a temporary directory, the policy
//! is signed with a throwaway key, `policyvm run --root` converges the copy,
//! the end state on disk is checked against the test's `file` and
//! `directory` expectations, and a second run must repair nothing.
//!
//! The VM gathers the facts of the copy itself (`etc/hostname`,
//! `etc/os-release` of the fixture), as on a host: a fixture describes the
//! same host as the test's `facts`. `define` classes are passed as
//! `--define`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use converge_format::bundle::format::{Body, Constant};

use super::model::{Check, Expectation, Expected, TestCase};
use super::verdict::{diff, Failure};
use crate::bundle::keys::{keygen, read_secret_key};
use crate::bundle::seal;

/// Where `policyvm` is: `--policyvm PATH`, else beside this `policyc`,
/// else on `PATH`.
pub fn find_policyvm(explicit: Option<&Path>) -> Result<PathBuf, String> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(format!("`--policyvm {}`: no such file", path.display()))
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("policyvm")));
    if let Some(path) = beside.filter(|p| p.is_file()) {
        return Ok(path);
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("policyvm"))
            .find(|p| p.is_file())
    });
    on_path.ok_or_else(|| {
        "`policyc test --run` runs `policyvm`, which is neither beside policyc nor on PATH; install it (package converge-policyvm) or pass `--policyvm PATH`".to_owned()
    })
}

/// Runs `case` on a copy of its fixture root; every problem is a
/// [`Failure`] (none: the VM converged the copy to what the test expects,
/// and a second run repaired nothing).
pub fn run(body: &Body, case: &TestCase, fixture: &Path, policyvm: &Path) -> Vec<Failure> {
    match run_inner(body, case, fixture, policyvm) {
        Ok(failures) => failures,
        Err(message) => vec![failure(case, "the fixture run", message)],
    }
}

fn failure(case: &TestCase, what: &str, message: String) -> Failure {
    Failure {
        expectation: what.to_owned(),
        location: case.location(),
        message,
        expected: None,
        actual: None,
        diff: None,
    }
}

fn run_inner(
    body: &Body,
    case: &TestCase,
    fixture: &Path,
    policyvm: &Path,
) -> Result<Vec<Failure>, String> {
    if body
        .constants
        .iter()
        .any(|c| matches!(c, Constant::Secret(_)))
    {
        return Err("the policy uses secrets, which `--run` cannot seal to a throwaway host; run it on a policy (or a test root) without them".to_owned());
    }
    let tmp = tempfile::Builder::new()
        .prefix("policyc-test-")
        .tempdir()
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    let root = tmp.path().join("root");
    copy_tree(fixture, &root)?;
    let keys = tmp.path().join("keys");
    let trust = tmp.path().join("trust");
    for dir in [&keys, &trust] {
        std::fs::create_dir(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    let (secret_path, public_path, _) = keygen(&keys.join("test"))?;
    std::fs::copy(&public_path, trust.join("test.pub"))
        .map_err(|e| format!("cannot write the trust directory: {e}"))?;
    let key = read_secret_key(&secret_path)?;
    let mut signed = body.clone();
    signed.header.key_id = key.id;
    let bundle = tmp.path().join("test.bundle");
    std::fs::write(&bundle, seal(&signed, &key)?)
        .map_err(|e| format!("cannot write the bundle: {e}"))?;
    let state = tmp.path().join("state");
    let vm = |pass: &str| -> Result<serde_json::Value, String> {
        let mut cmd = Command::new(policyvm);
        cmd.arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(&trust)
            .arg("--root")
            .arg(&root)
            .arg("--state")
            .arg(&state)
            .args(["--format", "json"]);
        for class in &case.defines {
            cmd.arg("--define").arg(class);
        }
        let output = cmd
            .output()
            .map_err(|e| format!("cannot run `{}`: {e}", policyvm.display()))?;
        let report: serde_json::Value = serde_json::from_slice(&output.stdout).map_err(|_| {
            format!(
                "the {pass} run of `{}` exited with {} and no report: {}",
                policyvm.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            )
        })?;
        Ok(report)
    };
    let mut failures = Vec::new();
    let first = vm("first")?;
    failures.extend(run_problems(case, "the first run", &first));
    for e in &case.expectations {
        failures.extend(check_on_disk(&root, e));
    }
    let second = vm("second")?;
    failures.extend(run_problems(case, "the second run", &second));
    let repaired: Vec<String> = promises_with(&second, "repaired");
    if !repaired.is_empty() {
        failures.push(failure(
            case,
            "the second run",
            format!(
                "repaired {} promise{} that the first run had converged: {}",
                repaired.len(),
                if repaired.len() == 1 { "" } else { "s" },
                repaired.join("; ")
            ),
        ));
    }
    Ok(failures)
}

/// A run that failed promises or did not converge.
fn run_problems(case: &TestCase, which: &str, report: &serde_json::Value) -> Vec<Failure> {
    let mut out = Vec::new();
    let failed = promises_with(report, "failed");
    if !failed.is_empty() {
        out.push(failure(
            case,
            which,
            format!("failed {}", failed.join("; ")),
        ));
    }
    if report["converged"] != serde_json::Value::Bool(true) {
        out.push(failure(
            case,
            which,
            format!(
                "did not converge within its pass limit (oscillating: {})",
                report["oscillating"]
            ),
        ));
    }
    out
}

/// `file "/etc/x" (site.policy:4)` of each promise of the report with
/// `outcome`, with its error.
fn promises_with(report: &serde_json::Value, outcome: &str) -> Vec<String> {
    report["promises"]
        .as_array()
        .map(|all| {
            all.iter()
                .filter(|p| p["outcome"] == outcome)
                .map(|p| {
                    let error = p["error"]
                        .as_str()
                        .map(|e| format!(": {e}"))
                        .unwrap_or_default();
                    format!(
                        "{} {} ({}){error}",
                        p["type"].as_str().unwrap_or("?"),
                        p["promiser"],
                        p["source"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The end state of a `file` or `directory` expectation on the copy: it
/// exists, and its content and mode are the expected ones. Other promise
/// types (packages, services, users) are checked by the preview only: a
/// sandbox root has no package manager or service manager of its own.
fn check_on_disk(root: &Path, e: &Expectation) -> Vec<Failure> {
    if e.absent || !matches!(e.kind, "file" | "directory") {
        return Vec::new();
    }
    let fail = |message: String| Failure {
        expectation: format!("expect {} on disk", e.describe()),
        location: e.location.clone(),
        message,
        expected: None,
        actual: None,
        diff: None,
    };
    let path = root.join(e.promiser.trim_start_matches('/'));
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(err) => return vec![fail(format!("not there after the run: {err}"))],
    };
    let wanted_dir = e.kind == "directory";
    if meta.is_dir() != wanted_dir || (!wanted_dir && !meta.is_file()) {
        return vec![fail(format!(
            "is not a {} after the run",
            if wanted_dir {
                "directory"
            } else {
                "regular file"
            }
        ))];
    }
    let mut out = Vec::new();
    let text = || std::fs::read(&path).map(|b| String::from_utf8_lossy(&b).into_owned());
    for check in &e.checks {
        match check {
            Check::Equals {
                attr: "mode",
                value: Expected::Int(mode),
                ..
            } => {
                let actual = i64::from(meta.permissions().mode() & 0o7777);
                if actual != *mode {
                    out.push(fail(format!(
                        "its mode is 0o{actual:o}, expected 0o{mode:o}"
                    )));
                }
            }
            Check::Equals {
                attr: "content",
                value: Expected::Text(want),
                ..
            } => match text() {
                Ok(have) if have == *want => {}
                Ok(have) => {
                    let mut f = fail("its content differs from the expected text".to_owned());
                    f.diff = diff(want, &have);
                    if f.diff.is_none() {
                        f.expected = Some(format!("{want:?}"));
                        f.actual = Some(format!("{have:?}"));
                    }
                    out.push(f);
                }
                Err(err) => out.push(fail(format!("cannot be read: {err}"))),
            },
            Check::Contains { text: want, .. } => match text() {
                Ok(have) if have.contains(want.as_str()) => {}
                Ok(_) => out.push(fail(format!("its content does not contain {want:?}"))),
                Err(err) => out.push(fail(format!("cannot be read: {err}"))),
            },
            Check::Matches { pattern, regex, .. } => match text() {
                Ok(have) if regex.is_match(&have) => {}
                Ok(_) => out.push(fail(format!("its content does not match {pattern:?}"))),
                Err(err) => out.push(fail(format!("cannot be read: {err}"))),
            },
            Check::Equals { .. } => {}
        }
    }
    out
}

/// Copies the fixture tree `from` to `to` (which must not exist): regular
/// files with their modes, directories, and symbolic links as links.
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    let err = |what: &Path, e: std::io::Error| {
        format!("cannot copy the fixture `{}`: {e}", what.display())
    };
    let mut pending = vec![(from.to_path_buf(), to.to_path_buf())];
    while let Some((src, dst)) = pending.pop() {
        let meta = std::fs::symlink_metadata(&src).map_err(|e| err(&src, e))?;
        if meta.file_type().is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| err(&src, e))?;
            std::os::unix::fs::symlink(target, &dst).map_err(|e| err(&src, e))?;
        } else if meta.is_dir() {
            std::fs::create_dir(&dst).map_err(|e| err(&src, e))?;
            std::fs::set_permissions(&dst, meta.permissions()).map_err(|e| err(&src, e))?;
            for entry in std::fs::read_dir(&src).map_err(|e| err(&src, e))? {
                let entry = entry.map_err(|e| err(&src, e))?;
                pending.push((entry.path(), dst.join(entry.file_name())));
            }
        } else if meta.is_file() {
            std::fs::copy(&src, &dst).map_err(|e| err(&src, e))?;
        }
        // Sockets, FIFOs and devices are not part of a fixture.
    }
    Ok(())
}
