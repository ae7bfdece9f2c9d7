//! Change detection end to end (issue 19, LANGUAGE.md §15,
//! docs/change-detection.md): policies built by the real `policyc`, run by
//! the real `policyvm` on sandbox roots, the history in the root's state
//! directory (`ROOT/var/lib/converge/watch/`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use converge::support::{policyc_build, PolicycBuild};
use converge_format::chain::{check, ChainReport, Verdict};
use serde_json::Value;

/// A sandbox root with a policy built for it.
struct Sandbox {
    root: tempfile::TempDir,
    built: PolicycBuild,
    _policy: tempfile::TempDir,
}

impl Sandbox {
    fn new(policy: &str) -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("site.policy");
        std::fs::write(&file, policy).unwrap();
        let built = policyc_build(&file, &[]);
        let root = tempfile::tempdir().unwrap();
        Sandbox {
            root,
            built,
            _policy: dir,
        }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.path().join(p.trim_start_matches('/'))
    }

    fn write(&self, p: &str, content: &str) {
        let path = self.path(p);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, content).unwrap();
    }

    fn watch_dir(&self) -> PathBuf {
        self.path("/var/lib/converge/watch")
    }

    /// `policyvm run --format json`: the report and the exit code.
    fn run(&self) -> (Value, i32) {
        let mut cmd = std::process::Command::new(converge::binary("policyvm"));
        cmd.arg("run")
            .arg(&self.built.bundle)
            .arg("--trust")
            .arg(&self.built.trust)
            .arg("--root")
            .arg(self.root.path())
            .arg("--format")
            .arg("json");
        let out = run_with_deadline(&mut cmd, Duration::from_secs(60));
        let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a JSON report ({e}):\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (report, out.status.code().unwrap_or(-1))
    }
}

/// Runs `cmd`, killed past `deadline`: a watch that opened a FIFO would
/// block forever, and the test must fail rather than hang.
fn run_with_deadline(cmd: &mut std::process::Command, deadline: Duration) -> std::process::Output {
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let id = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(deadline) {
        Ok(out) => out.unwrap(),
        Err(_) => {
            let _ = std::process::Command::new("kill")
                .arg("-9")
                .arg(id.to_string())
                .status();
            panic!("policyvm run did not finish within {deadline:?} (did it open a FIFO?)");
        }
    }
}

/// The promise of `kind` on `promiser` in a JSON report.
fn promise<'r>(r: &'r Value, kind: &str, promiser: &str) -> &'r Value {
    r["promises"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["type"] == kind && p["promiser"] == promiser)
        .unwrap_or_else(|| panic!("no {kind} {promiser} in {r:#}"))
}

/// `(what, before, after)` of a promise's changes.
fn changes(p: &Value) -> Vec<(String, String, String)> {
    p["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["what"].as_str().unwrap().to_owned(),
                c["before"].as_str().unwrap().to_owned(),
                c["after"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn chain(r: &Value) -> ChainReport {
    serde_json::from_value(r["watch"]["chain"].clone()).unwrap()
}

const TREE: &str = r#"
class intruded;
bundle b {
  watch "/srv" { recurse = true; on_changed = intruded; }
  when intruded { file "/alarm" { content = "intruded\n"; } }
}
policy { b(); }
"#;

fn tree() -> Sandbox {
    let s = Sandbox::new(TREE);
    s.write("/srv/a.txt", "alpha\n");
    s.write("/srv/sub/b.txt", "beta\n");
    std::os::unix::fs::symlink("a.txt", s.path("/srv/link")).unwrap();
    s
}

#[test]
fn a_baseline_then_every_kind_of_change_is_reported_with_old_and_new() {
    let s = tree();
    let (first, code) = s.run();
    assert_eq!(code, 0, "{first:#}");
    let w = promise(&first, "watch", "/srv");
    assert_eq!(w["outcome"], "kept", "{w:#}");
    assert!(
        w["output"].as_str().unwrap().contains("baseline recorded"),
        "{w:#}"
    );
    assert_eq!(chain(&first).length, 1);
    assert!(!s.path("/alarm").exists());

    // Nothing changed: nothing reported, the history does not grow.
    let (again, _) = s.run();
    assert_eq!(promise(&again, "watch", "/srv")["outcome"], "kept");
    assert_eq!(chain(&again), chain(&first));

    // Content, mode, added, removed, link retargeted.
    s.write("/srv/a.txt", "ALPHA\n");
    std::fs::set_permissions(
        s.path("/srv/sub/b.txt"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    s.write("/srv/new.txt", "new\n");
    std::fs::remove_file(s.path("/srv/sub/b.txt")).unwrap();
    s.write("/srv/sub/c.txt", "gamma\n");
    std::fs::remove_file(s.path("/srv/link")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", s.path("/srv/link")).unwrap();
    let (changed, code) = s.run();
    assert_eq!(code, 0, "a change is not a failure: {changed:#}");
    let w = promise(&changed, "watch", "/srv");
    assert_eq!(w["outcome"], "changed", "{w:#}");
    let found = changes(w);
    let has = |what: &str| found.iter().find(|(w, _, _)| w == what).cloned();
    let (_, before, after) = has("/srv/a.txt content").unwrap_or_else(|| panic!("{found:?}"));
    assert!(before.starts_with("sha256:") && after.starts_with("sha256:") && before != after);
    assert!(has("/srv/new.txt added").is_some(), "{found:?}");
    assert!(has("/srv/sub/b.txt removed").is_some(), "{found:?}");
    assert!(has("/srv/sub/c.txt added").is_some(), "{found:?}");
    assert_eq!(
        has("/srv/link target"),
        Some((
            "/srv/link target".into(),
            "a.txt".into(),
            "/etc/shadow".into()
        ))
    );
    // `on_changed` drove another promise in the same run.
    assert_eq!(
        std::fs::read_to_string(s.path("/alarm")).unwrap(),
        "intruded\n"
    );
    assert_eq!(changed["summary"]["changed"], 1);
    // The chain grew by one record and extends what was seen before.
    let now = chain(&changed);
    assert_eq!(now.length, 2);
    assert_eq!(check(&chain(&first).head(), &now), Verdict::Extends);
    // The link was recorded, never followed: /etc/shadow of the host was
    // not read (it would be unreadable or a digest, not a target).
    assert!(changed["watch"]["changes"].as_array().unwrap().len() >= 5);
}

#[test]
fn a_mode_change_and_an_owner_change_are_reported() {
    let s = tree();
    s.run();
    std::fs::set_permissions(s.path("/srv/a.txt"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let (r, _) = s.run();
    let found = changes(promise(&r, "watch", "/srv"));
    assert!(
        found.contains(&("/srv/a.txt mode".into(), "0644".into(), "0640".into())),
        "{found:?}"
    );
}

#[test]
#[ignore = "needs root"]
fn an_owner_change_is_reported() {
    converge::support::require_root("chown to another user");
    let s = tree();
    s.run();
    std::os::unix::fs::chown(s.path("/srv/a.txt"), Some(65534), Some(65534)).unwrap();
    let (r, _) = s.run();
    let found = changes(promise(&r, "watch", "/srv"));
    assert!(
        found
            .iter()
            .any(|(w, _, a)| w == "/srv/a.txt owner" && a == "65534"),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(w, _, a)| w == "/srv/a.txt group" && a == "65534"),
        "{found:?}"
    );
}

#[test]
fn a_fifo_in_the_tree_is_recorded_and_never_opened() {
    let s = tree();
    let fifo = s.path("/srv/sub/pipe");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    // With no writer, opening it for reading would block the run.
    let (r, code) = s.run();
    assert_eq!(code, 0, "{r:#}");
    std::fs::remove_file(&fifo).unwrap();
    let (r, _) = s.run();
    let found = changes(promise(&r, "watch", "/srv"));
    let (_, before, _) = found
        .iter()
        .find(|(w, _, _)| w == "/srv/sub/pipe removed")
        .unwrap_or_else(|| panic!("{found:?}"));
    assert!(before.starts_with("fifo "), "{before}");
}

#[test]
#[ignore = "needs setpriv (util-linux) when run as root"]
fn an_unreadable_file_is_recorded_as_unreadable_not_a_crash() {
    // As root every file is readable; run the VM as nobody instead.
    let as_root = std::process::Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n");
    let s = tree();
    s.write("/srv/secret", "s3cret\n");
    std::fs::set_permissions(
        s.path("/srv/secret"),
        std::fs::Permissions::from_mode(0o000),
    )
    .unwrap();
    let mut cmd = if as_root {
        let setpriv = converge::support::require_tool("setpriv", "util-linux");
        // Everything the unprivileged VM must write belongs to nobody.
        for p in [s.root.path().to_path_buf(), s.path("/srv")] {
            std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        }
        for p in [&s.built.bundle, &s.built.trust] {
            std::fs::set_permissions(p.parent().unwrap(), std::fs::Permissions::from_mode(0o755))
                .unwrap();
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        for f in std::fs::read_dir(&s.built.trust).unwrap() {
            std::fs::set_permissions(f.unwrap().path(), std::fs::Permissions::from_mode(0o644))
                .unwrap();
        }
        std::fs::set_permissions(&s.built.bundle, std::fs::Permissions::from_mode(0o644)).unwrap();
        let mut c = std::process::Command::new(setpriv);
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(converge::binary("policyvm"));
        c
    } else {
        std::process::Command::new(converge::binary("policyvm"))
    };
    cmd.arg("run")
        .arg(&s.built.bundle)
        .arg("--trust")
        .arg(&s.built.trust)
        .arg("--root")
        .arg(s.root.path())
        .arg("--format")
        .arg("json");
    let out = run_with_deadline(&mut cmd, Duration::from_secs(60));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let w = promise(&r, "watch", "/srv");
    assert_eq!(w["outcome"], "kept", "{w:#}");
    let output = w["output"].as_str().unwrap();
    assert!(output.contains("unreadable: /srv/secret"), "{output}");
}

/// Edits the `time` of the first record of the history (its digests left
/// alone): the record's digest no longer matches its content.
fn edit_first_record(history: &Path) {
    let text = std::fs::read_to_string(history).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let first = lines.first_mut().unwrap();
    let at = first.find("\"time\":").unwrap() + "\"time\":".len();
    first.insert(at, '1');
    std::fs::write(history, lines.join("\n") + "\n").unwrap();
}

#[test]
fn an_edited_history_is_detected_reported_and_rebuilt_and_no_longer_extends() {
    let s = tree();
    s.run();
    s.write("/srv/a.txt", "changed\n");
    let (before, _) = s.run();
    let seen = chain(&before);
    assert_eq!(seen.length, 2);
    edit_first_record(&s.watch_dir().join("history"));
    let (r, code) = s.run();
    assert_ne!(code, 0, "a broken history fails its watches: {r:#}");
    let w = promise(&r, "watch", "/srv");
    assert_eq!(w["outcome"], "failed");
    let error = w["error"].as_str().unwrap();
    assert!(error.contains("history broken at record 1"), "{error}");
    assert!(r["watch"]["broken"].as_str().unwrap().contains("record 1"));
    // Rebuilt: the evidence kept, the break is a record, the next run is
    // clean again.
    assert!(s.watch_dir().join("history.broken").exists());
    let now = chain(&r);
    assert_eq!(now.length, 1, "the good records (none) and the break");
    assert!(
        !check(&seen.head(), &now).is_consistent(),
        "{:?}",
        check(&seen.head(), &now)
    );
    let (next, code) = s.run();
    assert_eq!(code, 0, "{next:#}");
    assert_eq!(promise(&next, "watch", "/srv")["outcome"], "kept");
    assert_eq!(chain(&next), now);
}

#[test]
fn a_truncated_history_is_detected() {
    let s = tree();
    s.run();
    s.write("/srv/a.txt", "one\n");
    s.run();
    s.write("/srv/a.txt", "two\n");
    let (before, _) = s.run();
    let seen = chain(&before);
    assert_eq!(seen.length, 3);
    let history = s.watch_dir().join("history");
    let text = std::fs::read_to_string(&history).unwrap();
    let kept: Vec<&str> = text.lines().take(2).collect();
    std::fs::write(&history, kept.join("\n") + "\n").unwrap();
    let (r, _) = s.run();
    let error = promise(&r, "watch", "/srv")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("history broken at record 3"), "{error}");
    assert!(error.contains("records were removed"), "{error}");
    assert!(!check(&seen.head(), &chain(&r)).is_consistent());
}

#[test]
fn a_deleted_entries_database_is_detected() {
    let s = tree();
    s.run();
    for f in std::fs::read_dir(s.watch_dir()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap().to_str().unwrap().starts_with("db-") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let (r, _) = s.run();
    let error = promise(&r, "watch", "/srv")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("history broken at record 1"), "{error}");
    assert!(error.contains("is missing"), "{error}");
}

#[test]
fn an_edited_entries_database_is_detected() {
    let s = tree();
    s.run();
    for f in std::fs::read_dir(s.watch_dir()).unwrap() {
        let f = f.unwrap().path();
        if f.file_name().unwrap().to_str().unwrap().starts_with("db-") {
            let mut bytes = std::fs::read(&f).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 1;
            std::fs::write(&f, bytes).unwrap();
        }
    }
    let (r, _) = s.run();
    let error = promise(&r, "watch", "/srv")["error"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(error.contains("history broken"), "{error}");
}

#[test]
fn a_single_file_with_metadata_only_attributes() {
    let s = Sandbox::new(
        r#"bundle b { watch "/etc/passwd" { attributes = [size, mode]; } } policy { b(); }"#,
    );
    s.write("/etc/passwd", "root:x:0:0::/root:/bin/sh\n");
    s.run();
    // Same size, different content: metadata-only does not read content.
    s.write("/etc/passwd", "ROOT:x:0:0::/root:/bin/sh\n");
    let (r, _) = s.run();
    assert_eq!(promise(&r, "watch", "/etc/passwd")["outcome"], "kept");
    s.write("/etc/passwd", "root:x:0:0::/root:/bin/bash\n");
    let (r, _) = s.run();
    let found = changes(promise(&r, "watch", "/etc/passwd"));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "/etc/passwd size");
}

#[test]
fn excluded_entries_are_not_recorded() {
    let s = Sandbox::new(
        r#"bundle b { watch "/srv" { recurse = true; exclude = ["*.log", "cache/**"]; } } policy { b(); }"#,
    );
    s.write("/srv/keep", "k\n");
    s.write("/srv/x.log", "1\n");
    s.write("/srv/cache/y", "1\n");
    s.write("/srv/sub/k", "k\n");
    s.run();
    s.write("/srv/x.log", "2\n");
    s.write("/srv/cache/y", "2\n");
    s.write("/srv/sub/z.log", "2\n");
    let (r, _) = s.run();
    assert_eq!(promise(&r, "watch", "/srv")["outcome"], "kept", "{r:#}");
}

#[test]
fn the_human_report_shows_changes_and_the_head() {
    let s = tree();
    s.run();
    s.write("/srv/a.txt", "x\n");
    let out = std::process::Command::new(converge::binary("policyvm"))
        .arg("run")
        .arg(&s.built.bundle)
        .arg("--trust")
        .arg(&s.built.trust)
        .arg("--root")
        .arg(s.root.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("CHANGED  watch \"/srv\""), "{text}");
    assert!(text.contains("/srv/a.txt content sha256:"), "{text}");
    assert!(
        text.contains("watch history: 2 records, head sha256:"),
        "{text}"
    );
    assert!(text.contains(", 1 changed"), "{text}");
}

#[test]
fn a_dry_run_reports_changes_and_writes_nothing() {
    let s = tree();
    let mut dry = std::process::Command::new(converge::binary("policyvm"));
    dry.arg("run")
        .arg(&s.built.bundle)
        .arg("--trust")
        .arg(&s.built.trust)
        .arg("--root")
        .arg(s.root.path())
        .arg("--dry-run")
        .arg("--format")
        .arg("json");
    let out = run_with_deadline(&mut dry, Duration::from_secs(60));
    assert!(
        out.status.success(),
        "{:?} {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!s.watch_dir().exists(), "a dry run created the watch state");
    let (first, _) = s.run();
    s.write("/srv/a.txt", "edited\n");
    let out = run_with_deadline(&mut dry, Duration::from_secs(60));
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(promise(&r, "watch", "/srv")["outcome"], "changed", "{r:#}");
    // Nothing recorded: the real run still sees the change.
    assert_eq!(chain(&r), chain(&first));
    let (real, _) = s.run();
    assert_eq!(promise(&real, "watch", "/srv")["outcome"], "changed");
}

#[test]
fn a_run_without_watches_leaves_no_watch_state() {
    let s = Sandbox::new(r#"bundle b { file "/etc/motd" { content = "hi\n"; } } policy { b(); }"#);
    let (r, code) = s.run();
    assert_eq!(code, 0, "{r:#}");
    assert!(!s.watch_dir().exists());
    assert_eq!(r["watch"]["chain"]["length"], 0);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

        /// Whatever the tree, a second run with no change reports nothing
        /// changed and appends nothing.
        #[test]
        fn a_second_run_without_change_reports_nothing_and_appends_nothing(
            files in proptest::collection::btree_map("[a-z]{1,6}(/[a-z]{1,6}){0,2}", "[ -~]{0,40}", 0..12)
        ) {
            let s = Sandbox::new(TREE);
            std::fs::create_dir_all(s.path("/srv")).unwrap();
            for (name, content) in &files {
                let p = s.path(&format!("/srv/{name}"));
                if std::fs::create_dir_all(p.parent().unwrap()).is_err() || p.is_dir() {
                    continue;
                }
                let _ = std::fs::write(&p, content);
            }
            let (first, _) = s.run();
            let (second, code) = s.run();
            prop_assert_eq!(code, 0);
            prop_assert_eq!(&promise(&second, "watch", "/srv")["outcome"], "kept");
            prop_assert_eq!(chain(&second), chain(&first));
            prop_assert_eq!(second["watch"]["changed_entries"].as_u64(), Some(0));
        }
    }
}
