//! `policyvm run` on sandbox roots: convergence, idempotence, drift, dry
//! runs, symlink attacks, feedback chains, run-time contradictions, crash
//! safety. Every run is confined to a temporary root.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::{symlink, PermissionsExt as _};
use std::path::{Path, PathBuf};

use ::converge::binary;
use converge_vm::run::operators::Outcome;
use proptest::prelude::*;

use ::converge::support;
use support::{compile, converge, failed, repaired, verified, write_trust};

/// Everything in a tree: kind, mode, content or link target, per path.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let what = if meta.file_type().is_symlink() {
                format!("link -> {}", std::fs::read_link(&path).unwrap().display())
            } else if meta.is_dir() {
                stack.push(path.clone());
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {:?}", std::fs::read(&path).unwrap())
            };
            out.insert(rel, what);
        }
    }
    out
}

fn root_with_etc() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("etc")).unwrap();
    std::fs::write(dir.path().join("etc/hostname"), "web01\n").unwrap();
    std::fs::write(
        dir.path().join("etc/os-release"),
        "ID=debian\nVERSION_ID=12\n",
    )
    .unwrap();
    dir
}

const SITE: &str = r#"
class changed;
bundle site(port: int = 8080) {
  directory "/srv/app" { mode = 0o750; }
  file "/srv/app/app.conf" { content = "port ${port}\nhost ${sys.hostname}\n"; mode = 0o640; on_repaired = changed; }
  file "/etc/motd" { ensure = present; mode = 0o644; }
  line "/etc/motd" { present = "managed by converge"; }
  link "/srv/app/current" { target = "releases/1"; }
  file "/srv/app/old.conf" { ensure = absent; }
  when changed { report "changed" { message = "app.conf changed"; } }
}
policy { site(); }
"#;

#[test]
fn first_run_converges_and_the_second_repairs_nothing() {
    let root = root_with_etc();
    let bundle = verified(&compile(SITE));
    std::fs::create_dir_all(root.path().join("srv/app")).unwrap();
    std::fs::write(root.path().join("srv/app/old.conf"), "stale").unwrap();
    let first = converge(&bundle, root.path(), false);
    assert!(first.converged, "{first:?}");
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(
        std::fs::read_to_string(root.path().join("srv/app/app.conf")).unwrap(),
        "port 8080\nhost web01\n"
    );
    assert_eq!(
        std::fs::metadata(root.path().join("srv/app/app.conf"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o640
    );
    assert_eq!(
        std::fs::metadata(root.path().join("srv/app"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o750
    );
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/motd")).unwrap(),
        "managed by converge\n"
    );
    assert_eq!(
        std::fs::read_link(root.path().join("srv/app/current")).unwrap(),
        Path::new("releases/1")
    );
    assert!(!root.path().join("srv/app/old.conf").exists());
    let after_first = snapshot(root.path());

    let second = converge(&bundle, root.path(), false);
    assert_eq!(repaired(&second), 0, "{second:?}");
    assert_eq!(second.passes, 1);
    assert_eq!(snapshot(root.path()), after_first);
}

#[test]
fn drift_is_repaired_exactly_and_unmanaged_files_reported() {
    let root = root_with_etc();
    let bundle = verified(&compile(SITE));
    converge(&bundle, root.path(), false);
    // Drift: content, mode, a deleted link, and a stranger in the directory.
    std::fs::write(root.path().join("srv/app/app.conf"), "port 1\n").unwrap();
    std::fs::set_permissions(
        root.path().join("etc/motd"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    std::fs::remove_file(root.path().join("srv/app/current")).unwrap();
    std::fs::write(root.path().join("srv/app/stranger"), "?").unwrap();
    let r = converge(&bundle, root.path(), false);
    let fixed: Vec<String> = r
        .promises
        .iter()
        .filter(|p| *p.outcome() == Outcome::Repaired)
        .map(|p| format!("{} {}", p.kind(), p.promiser))
        .collect();
    assert_eq!(
        fixed,
        vec![
            "file /srv/app/app.conf",
            "file /etc/motd",
            "link /srv/app/current"
        ],
        "{r:?}"
    );
    assert_eq!(r.unmanaged, vec!["/srv/app/stranger".to_owned()]);
    assert_eq!(repaired(&converge(&bundle, root.path(), false)), 0);
}

#[test]
fn a_dry_run_changes_nothing() {
    let root = root_with_etc();
    let bundle = verified(&compile(SITE));
    let before = snapshot(root.path());
    let r = converge(&bundle, root.path(), true);
    assert!(repaired(&r) > 0, "a dry run reports what it would repair");
    assert!(
        r.promises
            .iter()
            .flat_map(|p| p.changes())
            .any(|c| c.diff.is_some()),
        "text content comes with a diff"
    );
    assert_eq!(snapshot(root.path()), before);
}

#[test]
fn links_planted_by_an_attacker_are_not_written_through() {
    let sandbox = tempfile::tempdir().unwrap();
    let root = sandbox.path().join("root");
    let outside = sandbox.path().join("outside");
    std::fs::create_dir_all(root.join("srv")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("shadow"), "secret\n").unwrap();
    // In place of a promised file, and in place of a parent directory.
    symlink(outside.join("shadow"), root.join("srv/app.conf")).unwrap();
    symlink(&outside, root.join("etc")).unwrap();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/srv/app.conf" { content = "pwned\n"; mode = 0o666; }
  file "/etc/shadow" { content = "pwned\n"; }
  file "/etc/new" { content = "pwned\n"; }
}
policy { b(); }"#,
    ));
    let before = snapshot(&outside);
    let r = converge(&bundle, &root, false);
    assert_eq!(failed(&r).len(), 3, "{r:?}");
    assert!(
        failed(&r).iter().all(|f| f.contains("symbolic link")),
        "{:?}",
        failed(&r)
    );
    assert_eq!(snapshot(&outside), before);
    assert_eq!(
        std::fs::read_to_string(outside.join("shadow")).unwrap(),
        "secret\n"
    );
}

#[test]
fn a_feedback_chain_converges_in_one_run() {
    let root = root_with_etc();
    let bundle = verified(&compile(
        r#"class a_done;
class b_done;
bundle chain {
  file "/a" { content = "a\n"; on_repaired = a_done; }
  when a_done { file "/b" { content = "b\n"; on_repaired = b_done; } }
  when b_done { file "/c" { content = "c\n"; } }
}
policy { chain(); }"#,
    ));
    assert_eq!(bundle.body.header.pass_limit, 4);
    let r = converge(&bundle, root.path(), false);
    assert!(r.converged, "{r:?}");
    assert!(r.passes <= 4);
    for f in ["a", "b", "c"] {
        assert!(root.path().join(f).exists(), "/{f} was not created");
    }
}

#[test]
fn a_run_time_contradiction_fails_both_promises() {
    let root = root_with_etc();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/role" { content = "static\n"; }
  file "/etc/role" { content = "${sys.hostname}\n"; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    let f = failed(&r);
    assert_eq!(f.len(), 2, "{r:?}");
    assert!(
        f.iter().all(|m| m.contains("contradiction at run time")),
        "{f:?}"
    );
    assert!(!root.path().join("etc/role").exists());
}

#[test]
fn commands_run_in_the_root_once_and_respect_creates() {
    let root = root_with_etc();
    let bundle = verified(&compile(
        r#"bundle b {
  command "stamp" { run = ["/bin/sh", "-c", "echo ran >> \"$CONVERGE_ROOT/stamp\""]; creates = "/stamp"; host = true; }
  command "fails" { run = ["/bin/sh", "-c", "exit 3"]; creates = "/never"; host = true; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert_eq!(
        std::fs::read_to_string(root.path().join("stamp")).unwrap(),
        "ran\n"
    );
    assert_eq!(failed(&r).len(), 1);
    assert!(failed(&r)[0].contains("status 3"), "{:?}", failed(&r));
    let again = converge(&bundle, root.path(), false);
    assert_eq!(
        std::fs::read_to_string(root.path().join("stamp")).unwrap(),
        "ran\n"
    );
    assert_eq!(repaired(&again), 0);
}

// ---------------------------------------------------------------- idempotence

#[derive(Clone, Debug)]
struct Tree {
    files: Vec<(usize, u8, u32)>,
    dirs: Vec<u32>,
    lines: Vec<u8>,
    links: Vec<usize>,
}

fn tree() -> impl Strategy<Value = Tree> {
    let mode = prop_oneof![Just(0o600u32), Just(0o640), Just(0o644), Just(0o755)];
    (
        prop::collection::vec((0usize..3, 0u8..4, mode.clone()), 1..8),
        prop::collection::vec(prop_oneof![Just(0o700u32), Just(0o750), Just(0o755)], 3),
        prop::collection::vec(0u8..5, 0..4),
        prop::collection::vec(0usize..8, 0..3),
    )
        .prop_map(|(files, dirs, lines, links)| Tree {
            files,
            dirs,
            lines,
            links,
        })
}

impl Tree {
    fn policy(&self) -> String {
        let mut p = String::from("bundle t {\n");
        for (d, mode) in self.dirs.iter().enumerate() {
            p.push_str(&format!(
                "  directory \"/data/d{d}\" {{ mode = 0o{mode:o}; }}\n"
            ));
        }
        for (i, (dir, content, mode)) in self.files.iter().enumerate() {
            p.push_str(&format!(
                "  file \"/data/d{dir}/f{i}\" {{ content = \"content {content}\\n\"; mode = 0o{mode:o}; }}\n"
            ));
        }
        if !self.lines.is_empty() {
            p.push_str("  file \"/data/lines\" { ensure = present; }\n");
            let mut seen = Vec::new();
            for l in &self.lines {
                if !seen.contains(l) {
                    seen.push(*l);
                    p.push_str(&format!(
                        "  line \"/data/lines\" {{ present = \"line {l}\"; }}\n"
                    ));
                }
            }
        }
        for (k, target) in self.links.iter().enumerate() {
            p.push_str(&format!(
                "  link \"/data/link{k}\" {{ target = \"d0/f{target}\"; }}\n"
            ));
        }
        p.push_str("}\npolicy { t(); }\n");
        p
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the tree, the first run converges, and the second repairs
    /// nothing and leaves every byte and mode as it was.
    #[test]
    fn runs_are_idempotent(tree in tree()) {
        let root = root_with_etc();
        let bundle = verified(&compile(&tree.policy()));
        let first = converge(&bundle, root.path(), false);
        prop_assert!(first.converged);
        prop_assert!(failed(&first).is_empty(), "{:?}", failed(&first));
        let after_first = snapshot(root.path());
        let second = converge(&bundle, root.path(), false);
        prop_assert_eq!(repaired(&second), 0, "{:?}", second);
        prop_assert_eq!(snapshot(root.path()), after_first);
    }
}

// ---------------------------------------------------------------- the CLI and crashes

#[test]
fn cli_exit_codes() {
    let work = tempfile::tempdir().unwrap();
    let trust = work.path().join("trust");
    write_trust(&trust);
    let root = root_with_etc();
    let good = work.path().join("good.bundle");
    std::fs::write(&good, compile(SITE)).unwrap();
    let run = |bundle: &Path, extra: &[&str]| {
        std::process::Command::new(binary("policyvm"))
            .arg("run")
            .arg(bundle)
            .arg("--trust")
            .arg(&trust)
            .arg("--root")
            .arg(root.path())
            .args(extra)
            .output()
            .unwrap()
    };
    let out = run(&good, &["--format", "json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["converged"], true);
    assert_eq!(json["bundle"]["name"], "test");
    assert!(json["summary"]["repaired"].as_u64().unwrap() > 0);
    assert!(json["promises"][0]["source"]
        .as_str()
        .unwrap()
        .contains("policy.policy:"));
    let out = run(&good, &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.trim_end().ends_with("ms"), "{text}");
    assert!(text.contains(" 0 repaired"), "{text}");

    let mut forged = std::fs::read(&good).unwrap();
    let n = forged.len();
    forged[n - 1] ^= 1;
    let bad = work.path().join("forged.bundle");
    std::fs::write(&bad, forged).unwrap();
    let out = run(&bad, &[]);
    assert_eq!(out.status.code(), Some(3));

    let failing = work.path().join("failing.bundle");
    std::fs::write(&failing, compile("bundle b { command \"x\" { run = [\"/bin/false\"]; creates = \"/nope\"; host = true; } }\npolicy { b(); }\n")).unwrap();
    assert_eq!(run(&failing, &[]).status.code(), Some(1));
}

/// Killing the VM at random moments leaves every managed file either absent
/// (never written) or complete; the next run converges.
#[test]
fn kill_9_at_random_moments_never_leaves_a_partial_file() {
    let work = tempfile::tempdir().unwrap();
    let trust = work.path().join("trust");
    write_trust(&trust);
    let n = 5000;
    let content = "x".repeat(2000);
    let mut policy = String::from("bundle many {\n");
    for i in 0..n {
        policy.push_str(&format!(
            "  file \"/data/d{}/f{i}\" {{ content = \"{content}{i}\\n\"; }}\n",
            i % 50
        ));
    }
    policy.push_str("}\npolicy { many(); }\n");
    let bundle = work.path().join("many.bundle");
    std::fs::write(&bundle, compile(&policy)).unwrap();
    let root = root_with_etc();
    let expected = |i: usize| format!("{content}{i}\n");
    let mut seed: u64 = 0x2545F4914F6CDD1D;
    for _ in 0..20 {
        let mut child = std::process::Command::new(binary("policyvm"))
            .arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(&trust)
            .arg("--root")
            .arg(root.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(std::time::Duration::from_millis(seed % 400));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        for i in 0..n {
            let path = root.path().join(format!("data/d{}/f{i}", i % 50));
            if let Ok(text) = std::fs::read_to_string(&path) {
                assert_eq!(text, expected(i), "{} is partial", path.display());
            }
        }
    }
    let out = std::process::Command::new(binary("policyvm"))
        .arg("run")
        .arg(&bundle)
        .arg("--trust")
        .arg(&trust)
        .arg("--root")
        .arg(root.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    for i in 0..n {
        let path = root.path().join(format!("data/d{}/f{i}", i % 50));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected(i));
    }
}

#[test]
fn a_repaired_promise_runs_the_commands_it_notifies() {
    let root = root_with_etc();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/app.conf" { content = "v1\n"; notify = [command "reload"]; }
  command "reload" { run = ["/bin/sh", "-c", "echo reload >> \"$CONVERGE_ROOT/reloads\""]; creates = "/etc/app.conf"; host = true; }
}
policy { b(); }"#,
    ));
    // First run: the file is created and notifies the command, which runs
    // although its `creates` path now exists.
    converge(&bundle, root.path(), false);
    assert_eq!(
        std::fs::read_to_string(root.path().join("reloads")).unwrap(),
        "reload\n"
    );
    // Nothing changed: no notification, `creates` holds, no reload.
    converge(&bundle, root.path(), false);
    assert_eq!(
        std::fs::read_to_string(root.path().join("reloads")).unwrap(),
        "reload\n"
    );
    // Drift: the file is repaired, the command runs again.
    std::fs::write(root.path().join("etc/app.conf"), "edited\n").unwrap();
    converge(&bundle, root.path(), false);
    assert_eq!(
        std::fs::read_to_string(root.path().join("reloads")).unwrap(),
        "reload\nreload\n"
    );
}

#[test]
fn promises_that_undo_each_other_are_reported_not_converged() {
    let root = root_with_etc();
    // The file wants the host name; the line edit rewrites it: each pass
    // repairs both, forever. (With constant content the compiler refuses
    // this, E0303; a fact-dependent content is only known on the host.)
    // The run stops at the pass limit and names them.
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/flip" { content = "${sys.hostname}\n"; }
  line "/etc/flip" { replace = r"^web01$"; with = r"b"; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert!(!r.converged, "{r:?}");
    assert_eq!(r.passes, bundle.body.header.pass_limit);
    assert_eq!(r.oscillating.len(), 2, "{:?}", r.oscillating);
    let json = converge_vm::run::report::json(&r);
    assert_eq!(json["converged"], false);
    let human = converge_vm::run::report::human(&r);
    assert!(human.contains("NOT CONVERGED"), "{human}");
}

#[test]
fn operators_in_detail() {
    use std::os::unix::fs::MetadataExt as _;
    let root = root_with_etc();
    std::fs::write(
        root.path().join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\napp:x:1234:1234::/srv:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(root.path().join("etc/group"), "root:x:0:\napp:x:1234:\n").unwrap();
    std::fs::create_dir_all(root.path().join("srv/purged")).unwrap();
    std::fs::write(root.path().join("srv/purged/stray"), "x").unwrap();
    std::fs::write(
        root.path().join("etc/ssh_config"),
        "PermitRootLogin yes\nX11Forwarding yes\nUseDNS yes\n",
    )
    .unwrap();
    std::fs::write(root.path().join("etc/app.conf"), "old\n").unwrap();
    let bundle = verified(&compile(
        r#"bundle b {
  directory "/srv/purged" { purge = true; }
  file "/srv/purged/kept" { content = "k\n"; }
  file "/etc/app.conf" { content = "new on ${sys.hostname}\n"; owner = "app"; group = "app"; backup = true; }
  line "/etc/ssh_config" { replace = r"^PermitRootLogin\s+\w+$"; with = r"PermitRootLogin no"; }
  line "/etc/ssh_config" { absent = "X11Forwarding yes"; }
  command "chatty" { run = ["/bin/sh", "-c", "echo to-stdout; echo to-stderr >&2"]; creates = "/never"; host = true; }
  command "slow" { run = ["/bin/sleep", "5"]; creates = "/never"; timeout = 1s; host = true; }
}
policy { b(); }"#,
    ));
    let state = converge_vm::state::StateDir::open(&root.path().join("var/lib/converge")).unwrap();
    let r = converge_vm::run::run(
        &bundle,
        &converge_vm::run::RunOptions {
            root: root.path().to_path_buf(),
            state: Some(state.clone()),
            blobs: Vec::new(),
            ..Default::default()
        },
    )
    .unwrap();
    // purge = true removes what no promise manages.
    assert!(!root.path().join("srv/purged/stray").exists());
    assert!(root.path().join("srv/purged/kept").exists());
    // Content from facts, owner and group from the root's account files,
    // and the previous content kept as a backup.
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/app.conf")).unwrap(),
        "new on web01\n"
    );
    let meta = std::fs::metadata(root.path().join("etc/app.conf")).unwrap();
    assert_eq!((meta.uid(), meta.gid()), (1234, 1234));
    // The backup is in the state directory, never beside the file (issue 17).
    assert_eq!(
        state.backups_of("/etc/app.conf").unwrap(),
        [b"old\n".to_vec()]
    );
    assert!(!root.path().join("etc/app.conf.converge-backup").exists());
    // Line replacement and removal.
    assert_eq!(
        std::fs::read_to_string(root.path().join("etc/ssh_config")).unwrap(),
        "PermitRootLogin no\nUseDNS yes\n"
    );
    // Output captured, timeouts enforced.
    let chatty = r.promises.iter().find(|p| p.promiser == "chatty").unwrap();
    let output = chatty.output().unwrap();
    assert!(
        output.contains("to-stdout") && output.contains("to-stderr"),
        "{output}"
    );
    let slow = r.promises.iter().find(|p| p.promiser == "slow").unwrap();
    // Killed at its timeout (the message says so), not left running.
    assert!(
        matches!(slow.outcome(), Outcome::Failed(e) if e.contains("timeout")),
        "{:?}",
        slow.outcome()
    );
}

/// Special files in place of promised ones: a FIFO is refused without
/// blocking, a 2 GB sparse file is refused by the size cap, not read.
#[test]
fn fifos_and_huge_files_are_refused_without_blocking() {
    let root = root_with_etc();
    let fifo = root.path().join("etc/fifo");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(status.success());
    let sparse = std::fs::File::create(root.path().join("etc/huge")).unwrap();
    sparse.set_len(2 << 30).unwrap();
    drop(sparse);
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/fifo" { content = "x\n"; }
  line "/etc/fifo" { present = "x"; }
  line "/etc/huge" { present = "x"; }
  file "/etc/huge" { ensure = present; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    let f = failed(&r);
    assert_eq!(f.len(), 2, "{f:?}");
    assert!(
        f.iter()
            .any(|m| m.contains("/etc/huge") && m.contains("MiB")),
        "{f:?}"
    );
    assert!(
        f.iter()
            .any(|m| m.contains("/etc/fifo") && m.contains("not a regular file")),
        "{f:?}"
    );
    // The line on the FIFO comes after the failed file promise: skipped.
    let line = r
        .promises
        .iter()
        .find(|p| p.kind() == "line" && p.promiser == "/etc/fifo")
        .unwrap();
    assert!(
        matches!(line.outcome(), Outcome::Skipped(_)),
        "{:?}",
        line.outcome()
    );
    assert_eq!(
        std::fs::metadata(root.path().join("etc/huge"))
            .unwrap()
            .len(),
        2 << 30
    );
}

/// The JSON report written as it is serialized (`policyvm run --format
/// json`, `--report`) is byte for byte the pretty-printed tree of
/// `report::json`: with changes, an error, a skip reason and output.
#[test]
fn the_streamed_json_report_is_the_tree_byte_for_byte() {
    let root = root_with_etc();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/motd" { content = "hello \"world\"\n"; mode = 0o600; }
  report "greeting" { message = "say\thi"; }
  file "/etc/absent" { content = "x\n"; create = false; }
  file "/etc/owned" { content = "x\n"; owner = "no-such-user"; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    let outcomes: Vec<&str> = r
        .promises
        .iter()
        .map(|p| match p.outcome() {
            Outcome::Failed(_) => "failed",
            Outcome::Skipped(_) => "skipped",
            Outcome::Repaired => "repaired",
            _ => "other",
        })
        .collect();
    assert_eq!(
        outcomes,
        ["repaired", "other", "skipped", "failed"],
        "{r:?}"
    );
    assert!(r.promises.iter().any(|p| p.output().is_some()), "{r:?}");
    let tree = serde_json::to_string_pretty(&converge_vm::run::report::json(&r)).unwrap();
    let mut streamed = Vec::new();
    converge_vm::run::report::write_json(&r, &mut streamed).unwrap();
    assert_eq!(String::from_utf8(streamed).unwrap(), tree);
    // `file:line` as the report has always written it.
    let source = &r.promises[0].source;
    assert_eq!(source.line(), 2);
    assert!(
        tree.contains(&format!("\"source\": \"{}:2\"", source.file())),
        "{tree}"
    );
}
