//! Data files, lookups, functions and templates end to end (LANGUAGE.md
//! §10-§12): every case in `tests/data_templates/<case>/` is a policy tree
//! (`site.policy`, `data/`, `templates/`) and the exact end state of one
//! sandbox root per host, `expect/<hostname>/<path>`. Add a case by adding
//! a directory.
//!
//! For each case the real binaries build a signed bundle (`policyc keygen`,
//! `policyc build`), and for each host `policyvm run --root` converges a
//! fresh root holding only `etc/hostname` and `etc/os-release`. Then:
//! - the root holds exactly the expected files, byte for byte (nothing
//!   more: `etc/hostname`, `etc/os-release` and the state directory
//!   `var/lib/converge` aside);
//! - the files named in `modes/<hostname>` (`PATH MODE` lines) have those
//!   permission bits;
//! - a second run repairs nothing (idempotence);
//! - a dry run on a fresh root changes nothing, and one on the converged
//!   root has nothing to repair.
//!
//! `sys.ipv4` comes from the running kernel, not from the root; an expected
//! file writes the host's addresses as `@IPV4_LINES:<prefix>@<suffix>` (a
//! whole line: one line `<prefix><address><suffix>` per address) or `@IPV4_JOINED:<sep>@`
//! (inline), filled from `policyvm facts --root`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ::converge::support::{policyc_build, PolicycBuild};
use ::converge::{binary, repo_root};

/// Every regular file below `dir`, relative to it, with its bytes; symbolic
/// links and directories are named too so that nothing unexpected hides.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(dir).unwrap().to_path_buf();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                out.insert(rel, std::fs::read(&path).unwrap());
            } else {
                out.insert(rel, b"<not a regular file>".to_vec());
            }
        }
    }
    out
}

/// What the policy made in a root: its tree without the files the test
/// wrote and the run's state directory.
fn managed(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = tree(root);
    files.retain(|path, _| {
        path != Path::new("etc/hostname")
            && path != Path::new("etc/os-release")
            && !path.starts_with("var/lib/converge")
    });
    files
}

fn fresh_root(host: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(root.path().join("etc/hostname"), format!("{host}\n")).unwrap();
    std::fs::write(
        root.path().join("etc/os-release"),
        "ID=debian\nVERSION_ID=12\n",
    )
    .unwrap();
    root
}

fn ok(out: &std::process::Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A case's bundle, built by the real `policyc` (after `policyc check`
/// says it is clean: check == build minus signing), and the trust
/// directory holding its key.
fn build(case: &Path) -> PolicycBuild {
    let out = Command::new(binary("policyc"))
        .arg("check")
        .arg(case.join("site.policy"))
        .output()
        .unwrap();
    ok(&out, "policyc check");
    policyc_build(&case.join("site.policy"), &[])
}

/// `policyvm run --format json` on `root`; the report.
fn run(built: &PolicycBuild, root: &Path, dry_run: bool) -> serde_json::Value {
    let mut cmd = Command::new(binary("policyvm"));
    cmd.arg("run")
        .arg(&built.bundle)
        .arg("--trust")
        .arg(&built.trust)
        .arg("--root")
        .arg(root)
        .arg("--format")
        .arg("json");
    if dry_run {
        cmd.arg("--dry-run");
    }
    let out = cmd.output().unwrap();
    ok(&out, "policyvm run");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["converged"], true, "{report:#}");
    assert_eq!(report["summary"]["failed"], 0, "{report:#}");
    report
}

/// The host's `sys.ipv4`, as the VM sees it.
fn ipv4(root: &Path) -> Vec<String> {
    let out = Command::new(binary("policyvm"))
        .arg("facts")
        .arg("--root")
        .arg(root)
        .arg("--format")
        .arg("json")
        .output()
        .unwrap();
    ok(&out, "policyvm facts");
    let facts: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    facts["facts"]["sys.ipv4"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

/// An expected file with the `@IPV4_...@` placeholders filled.
fn expected_text(text: &[u8], addresses: &[String]) -> Vec<u8> {
    let Ok(text) = std::str::from_utf8(text) else {
        return text.to_vec();
    };
    let mut out = String::new();
    for line in text.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        if let Some((prefix, suffix)) = body
            .strip_prefix("@IPV4_LINES:")
            .and_then(|r| r.split_once('@'))
        {
            for a in addresses {
                out.push_str(&format!("{prefix}{a}{suffix}\n"));
            }
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find("@IPV4_JOINED:") {
            out.push_str(&rest[..start]);
            let after = &rest[start + "@IPV4_JOINED:".len()..];
            let end = after.find('@').expect("unterminated @IPV4_JOINED:");
            out.push_str(&addresses.join(&after[..end]));
            rest = &after[end + 1..];
        }
        out.push_str(rest);
    }
    out.into_bytes()
}

fn cases() -> Vec<PathBuf> {
    let dir = repo_root().join("tests/data_templates");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("site.policy").is_file())
        .collect();
    cases.sort();
    assert!(cases.len() >= 5, "the corpus lost its cases: {cases:?}");
    cases
}

fn hosts(case: &Path) -> Vec<String> {
    let mut hosts: Vec<String> = std::fs::read_dir(case.join("expect"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    hosts.sort();
    assert!(!hosts.is_empty(), "{} has no expect/<host>", case.display());
    hosts
}

fn converge_case(case: &Path) {
    let name = case.file_name().unwrap().to_string_lossy().into_owned();
    let built = build(case);
    for host in hosts(case) {
        let what = format!("case {name}, host {host}");
        let root = fresh_root(&host);
        let addresses = ipv4(root.path());

        // A dry run on a fresh root changes nothing.
        let before = tree(root.path());
        run(&built, root.path(), true);
        let mut after = tree(root.path());
        after.retain(|p, _| !p.starts_with("var/lib/converge"));
        assert_eq!(after, before, "{what}: the dry run changed the root");

        let first = run(&built, root.path(), false);
        let expected: BTreeMap<PathBuf, Vec<u8>> = tree(&case.join("expect").join(&host))
            .into_iter()
            .map(|(p, t)| (p, expected_text(&t, &addresses)))
            .collect();
        let found = managed(root.path());
        let show = |m: &BTreeMap<PathBuf, Vec<u8>>| -> String {
            m.iter()
                .map(|(p, t)| format!("--- {}\n{}", p.display(), String::from_utf8_lossy(t)))
                .collect()
        };
        assert!(
            found == expected,
            "{what}: the end state differs\n===== expected\n{}===== found\n{}===== report\n{first:#}",
            show(&expected),
            show(&found)
        );

        check_modes(case, &host, root.path(), &what);

        let second = run(&built, root.path(), false);
        assert_eq!(
            second["summary"]["repaired"], 0,
            "{what}: the second run repaired something\n{second:#}"
        );
        assert_eq!(managed(root.path()), expected, "{what}: the second run");
        let dry = run(&built, root.path(), true);
        assert_eq!(
            dry["summary"]["repaired"], 0,
            "{what}: a dry run on the converged root would repair\n{dry:#}"
        );
    }
}

/// `modes/<host>` of a case, when present: one `PATH MODE` (octal) per
/// line, each the permission bits the file must have.
fn check_modes(case: &Path, host: &str, root: &Path, what: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let Ok(text) = std::fs::read_to_string(case.join("modes").join(host)) else {
        return;
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (path, mode) = line.split_once(' ').unwrap();
        let want = u32::from_str_radix(mode.trim(), 8).unwrap();
        let meta = std::fs::metadata(root.join(path.trim_start_matches('/'))).unwrap();
        assert_eq!(
            meta.permissions().mode() & 0o7777,
            want,
            "{what}: the mode of {path}"
        );
    }
}

#[test]
fn every_case_converges_each_host_to_its_exact_end_state() {
    for case in cases() {
        converge_case(&case);
    }
}

/// Every `.policy` file below `dir`, sorted.
fn policy_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            policy_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "policy") {
            out.push(path);
        }
    }
    out.sort();
}

/// `policyc check == policyc build` minus signing (issue 16): on every
/// valid case above and every file of the diagnostic corpus (`tests/ui`),
/// check and build succeed together or fail together, with the same
/// diagnostics. A build that refused what check passed (a template
/// variable, a lookup that reached the writer unsplit) fails here.
#[test]
fn check_and_build_agree_on_every_case_and_every_ui_file() {
    let work = tempfile::tempdir().unwrap();
    let key = work.path().join("site");
    ok(
        &Command::new(binary("policyc"))
            .arg("keygen")
            .arg("--out")
            .arg(&key)
            .output()
            .unwrap(),
        "policyc keygen",
    );
    let mut files: Vec<PathBuf> = cases().iter().map(|c| c.join("site.policy")).collect();
    policy_files(&repo_root().join("tests/ui"), &mut files);
    // A policy using secrets builds only with the builder's identity and
    // an inventory of enrolled hosts (docs/secrets.md), which `check`
    // needs neither of: tests/secrets_compile.rs builds those.
    let secrets = repo_root().join("tests/ui/secrets");
    files.retain(|f| !f.starts_with(&secrets));
    let mut checked_errors = 0;
    for file in files {
        let check = Command::new(binary("policyc"))
            .current_dir(repo_root())
            .arg("check")
            .arg(&file)
            .output()
            .unwrap();
        let build = Command::new(binary("policyc"))
            .current_dir(repo_root())
            .arg("build")
            .arg("--output")
            .arg(work.path().join("out.bundle"))
            .arg("--key")
            .arg(key.with_extension("key"))
            .arg("--serial")
            .arg("1")
            .arg(&file)
            .output()
            .unwrap();
        let what = file.display();
        let check_text = String::from_utf8_lossy(&check.stdout).into_owned();
        let build_text = String::from_utf8_lossy(&build.stderr).into_owned();
        assert_eq!(
            check.status.success(),
            build.status.success(),
            "{what}: check and build disagree\n--- check\n{check_text}\n--- build\n{build_text}"
        );
        if check.status.success() {
            continue;
        }
        checked_errors += 1;
        // check prints the diagnostics and a summary on stdout; build
        // prints the same diagnostics and summary, then its refusal, on
        // stderr.
        let refusal = "error: not building a bundle from a policy with errors\n";
        assert!(
            build_text.ends_with(refusal),
            "{what}: build did not refuse\n{build_text}"
        );
        assert_eq!(
            check_text,
            build_text.trim_end_matches(refusal),
            "{what}: check and build report differently"
        );
    }
    assert!(checked_errors >= 20, "the corpus lost its invalid files");
}
