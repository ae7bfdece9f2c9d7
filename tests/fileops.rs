//! Issue 17 items 1, 6, 7 and 8, end to end on sandbox roots: `file`'s
//! `create = false` and `validate`, owed notifications (across failures and
//! a kill -9 of the VM), `backup = true` in the state directory, commands
//! chrooted into `--root` unless `host = true`, and the dry run's list of
//! the commands it would run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use converge::binary;
use converge::support::{
    compile, failed, repaired, require_root, root_with_a_shell, verified, write_trust,
};
use converge_vm::bundle::Verified;
use converge_vm::run::operators::Outcome;
use converge_vm::run::{report, run, RunOptions, RunReport};
use converge_vm::state::{StateDir, KEEP_BACKUPS};

/// A sandbox root with `/etc`, and its state directory (as `policyvm run`
/// uses by default: `ROOT/var/lib/converge`).
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Sandbox {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc")).unwrap();
        Sandbox { dir }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root().join(p.trim_start_matches('/'))
    }

    fn state(&self) -> StateDir {
        StateDir::open(&self.path("/var/lib/converge")).unwrap()
    }

    fn converge(&self, bundle: &Verified, dry_run: bool) -> RunReport {
        run(
            bundle,
            &RunOptions {
                root: self.root().to_path_buf(),
                dry_run,
                defines: Vec::new(),
                state: Some(self.state()),
                blobs: Vec::new(),
            },
        )
        .unwrap()
    }

    fn read(&self, p: &str) -> String {
        std::fs::read_to_string(self.path(p)).unwrap_or_default()
    }

    /// The entries of a directory of the root, sorted.
    fn list(&self, p: &str) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path(p))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

fn outcome<'r>(r: &'r RunReport, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {promiser:?} in {r:?}"))
        .outcome()
}

/// Item 1 (the empty private key): a permissions-only promise with
/// `create = false` skips a missing file with the spec's reason and creates
/// nothing; an existing one gets its mode. Before `create` existed the key
/// was created empty.
#[test]
fn create_false_never_creates_a_missing_key() {
    let s = Sandbox::new();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/ssl/private/app.key" { create = false; mode = 0o600; }
}
policy { b(); }"#,
    ));
    let dry = s.converge(&bundle, true);
    assert_eq!(
        outcome(&dry, "/etc/ssl/private/app.key"),
        &Outcome::Skipped("absent and create = false".into())
    );
    let r = s.converge(&bundle, false);
    assert_eq!(
        outcome(&r, "/etc/ssl/private/app.key"),
        &Outcome::Skipped("absent and create = false".into())
    );
    assert!(!s.path("/etc/ssl").exists(), "nothing was created");
    assert!(report::human(&r).contains("absent and create = false"));

    // The key exists: only its mode is managed, its content is left alone.
    std::fs::create_dir_all(s.path("/etc/ssl/private")).unwrap();
    std::fs::write(s.path("/etc/ssl/private/app.key"), "KEY\n").unwrap();
    let r = s.converge(&bundle, false);
    assert_eq!(outcome(&r, "/etc/ssl/private/app.key"), &Outcome::Repaired);
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(s.path("/etc/ssl/private/app.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert_eq!(s.read("/etc/ssl/private/app.key"), "KEY\n");
    let again = s.converge(&bundle, false);
    assert_eq!(repaired(&again), 0, "{again:?}");
}

/// Item 1 (validate, then restart): content that fails validation is
/// never installed, the restart it would notify never happens, and the
/// failure stays visible on every run until the policy is fixed; then the
/// file is installed and the command notified once. The validating command
/// sees the staged copy, with the new content, in the file's directory.
#[test]
fn failed_validation_leaves_the_file_and_notifies_nothing_on_every_run() {
    let s = Sandbox::new();
    std::fs::write(s.path("/etc/app.conf"), "good old\n").unwrap();
    let policy = |content: &str| {
        format!(
            r#"bundle b {{
  file "/etc/app.conf" {{
    content = "{content}\n";
    validate = ["/bin/sh", "-c", "cp \"$0\" \"$CONVERGE_ROOT/seen\"; grep -q '^good' \"$0\"", "%s"];
    host = true;
    notify = [command "restart"];
  }}
  command "restart" {{ run = ["/bin/sh", "-c", "echo restart >> \"$CONVERGE_ROOT/restarts\""]; creates = "/etc/app.conf"; host = true; }}
}}
policy {{ b(); }}"#
        )
    };
    let bad = verified(&compile(&policy("bad new")));
    for run in 1..=3 {
        let r = s.converge(&bad, false);
        let Outcome::Failed(why) = outcome(&r, "/etc/app.conf") else {
            panic!("run {run}: {r:?}");
        };
        assert!(why.contains("failed validation"), "{why}");
        assert!(why.contains("exited with status 1"), "{why}");
        assert_eq!(
            s.read("/etc/app.conf"),
            "good old\n",
            "run {run}: untouched"
        );
        assert_eq!(s.read("/seen"), "bad new\n", "the staged copy was checked");
        assert_eq!(s.read("/restarts"), "", "run {run}: nothing notified");
        assert_eq!(failed(&r).len(), 1, "run {run}: {r:?}");
        assert!(r.owed.is_empty(), "{:?}", r.owed);
        assert_eq!(s.list("/etc"), ["app.conf"], "no staged copy left");
    }
    let good = verified(&compile(&policy("good new")));
    let r = s.converge(&good, false);
    assert_eq!(failed(&r), Vec::<String>::new());
    assert_eq!(s.read("/etc/app.conf"), "good new\n");
    assert_eq!(s.read("/restarts"), "restart\n");
    assert!(r.owed.is_empty(), "{:?}", r.owed);
    let r = s.converge(&good, false);
    assert_eq!(repaired(&r), 0, "{r:?}");
    assert_eq!(s.read("/restarts"), "restart\n");
}

/// A `validate` without a whole `%s` element is refused at compile time
/// (E0230).
#[test]
fn validate_without_the_staged_path_is_a_compile_error() {
    let outcome = converge::support::check_text(
        r#"bundle b {
  file "/etc/sudoers.d/app" {
    content = "x\n";
    validate = ["/usr/sbin/visudo", "-cf%s"];
  }
}
policy { b(); }"#,
    );
    assert!(
        outcome
            .diagnostics
            .iter()
            .any(|d| d.code.to_string() == "E0230" && d.message.contains("`%s`")),
        "{:?}",
        outcome.diagnostics
    );
    // Its line (4) is checked by tests/ui/types/validate_without_staged_path.policy.
}

/// Item 7: backups go to `STATE/backups/<escaped path>/`, rotated to the
/// newest few, never beside the file (`nginx-blog.converge-backup` inside
/// /etc/logrotate.d was read by logrotate). Without a state directory a
/// backup cannot be kept, and the file is not rewritten.
#[test]
fn backups_are_kept_in_the_state_directory_and_rotated() {
    let s = Sandbox::new();
    std::fs::create_dir_all(s.path("/etc/logrotate.d")).unwrap();
    std::fs::write(s.path("/etc/logrotate.d/nginx-blog"), "v0\n").unwrap();
    let policy = |n: usize| {
        verified(&compile(&format!(
            r#"bundle b {{
  file "/etc/logrotate.d/nginx-blog" {{ content = "v{n}\n"; backup = true; }}
}}
policy {{ b(); }}"#
        )))
    };
    for n in 1..=7 {
        let r = s.converge(&policy(n), false);
        assert_eq!(failed(&r), Vec::<String>::new());
        assert_eq!(
            s.list("/etc/logrotate.d"),
            ["nginx-blog"],
            "nothing beside it"
        );
    }
    let kept = s.state().backups_of("/etc/logrotate.d/nginx-blog").unwrap();
    let kept: Vec<String> = kept
        .into_iter()
        .map(|b| String::from_utf8(b).unwrap())
        .collect();
    assert_eq!(kept.len(), KEEP_BACKUPS);
    assert_eq!(kept, ["v2\n", "v3\n", "v4\n", "v5\n", "v6\n"]);
    assert!(s
        .path("/var/lib/converge/backups/etc%2Flogrotate.d%2Fnginx-blog")
        .is_dir());

    // A kept file makes no backup.
    s.converge(&policy(7), false);
    assert_eq!(
        s.state()
            .backups_of("/etc/logrotate.d/nginx-blog")
            .unwrap()
            .len(),
        KEEP_BACKUPS
    );

    // No state directory: refused, not rewritten.
    let r = converge::support::converge(&policy(8), s.root(), false);
    let Outcome::Failed(why) = outcome(&r, "/etc/logrotate.d/nginx-blog") else {
        panic!("{r:?}");
    };
    assert!(why.contains("state directory"), "{why}");
    assert_eq!(s.read("/etc/logrotate.d/nginx-blog"), "v7\n");
}

/// Item 6: a notified command that fails leaves its notification owed; the
/// next runs, where nothing else changes, deliver it again until it
/// succeeds, and say so in the human and JSON reports. Once paid, it is
/// not delivered again.
#[test]
fn a_failed_notification_stays_owed_until_delivered() {
    let s = Sandbox::new();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/app.conf" { content = "v1\n"; notify = [command "reload"]; }
  command "reload" {
    run = ["/bin/sh", "-c", "echo try >> \"$CONVERGE_ROOT/tries\"; test -e \"$CONVERGE_ROOT/ok\""];
    creates = "/etc/app.conf"; host = true;
  }
}
policy { b(); }"#,
    ));
    let r = s.converge(&bundle, false);
    assert!(matches!(outcome(&r, "reload"), Outcome::Failed(_)), "{r:?}");
    assert_eq!(r.owed.len(), 1, "{:?}", r.owed);
    assert_eq!(r.owed[0].kind, "command");
    assert_eq!(r.owed[0].promiser, "reload");
    assert!(r.owed[0].by.contains("/etc/app.conf"), "{:?}", r.owed);
    let human = report::human(&r);
    assert!(human.contains("OWED     command \"reload\""), "{human}");
    assert!(human.contains("1 notification(s) owed"), "{human}");
    let json = report::json(&r);
    assert_eq!(json["summary"]["owed_notifications"], 1);
    assert_eq!(json["owed_notifications"][0]["promiser"], "reload");

    // Nothing changes, the debt is still delivered (and fails again).
    let r = s.converge(&bundle, false);
    assert_eq!(outcome(&r, "/etc/app.conf"), &Outcome::Kept);
    assert!(matches!(outcome(&r, "reload"), Outcome::Failed(_)), "{r:?}");
    assert_eq!(s.read("/tries"), "try\ntry\n");
    assert_eq!(r.owed.len(), 1);

    // The dry run reports the debt and pays nothing.
    let dry = s.converge(&bundle, true);
    assert_eq!(dry.owed.len(), 1);
    assert_eq!(s.read("/tries"), "try\ntry\n");

    std::fs::write(s.path("/ok"), "").unwrap();
    let r = s.converge(&bundle, false);
    assert_eq!(outcome(&r, "reload"), &Outcome::Repaired);
    assert!(r.owed.is_empty(), "{:?}", r.owed);
    assert_eq!(s.read("/tries"), "try\ntry\ntry\n");
    let r = s.converge(&bundle, false);
    assert_eq!(repaired(&r), 0, "{r:?}");
    assert_eq!(
        s.read("/tries"),
        "try\ntry\ntry\n",
        "paid: not delivered again"
    );
}

/// Item 6, the crash: `policyvm run` is killed with SIGKILL after the file
/// was written, while the command it notified runs. The next run, with
/// nothing left to change, delivers the notification exactly once. (Before
/// owed notifications, the restart was lost for good.)
#[test]
fn a_notification_survives_a_kill_9_between_the_write_and_the_restart() {
    let s = Sandbox::new();
    let work = tempfile::tempdir().unwrap();
    let trust = work.path().join("trust");
    write_trust(&trust);
    let bundle_path = work.path().join("b.bundle");
    std::fs::write(
        &bundle_path,
        compile(
            r#"bundle b {
  file "/etc/app.conf" { content = "v1\n"; notify = [command "reload"]; }
  command "reload" {
    run = ["/bin/sh", "-c", "echo $$ > \"$CONVERGE_ROOT/pid\"; if [ -e \"$CONVERGE_ROOT/slow\" ]; then sleep 60; fi; echo delivered >> \"$CONVERGE_ROOT/log\""];
    creates = "/etc/app.conf"; host = true;
  }
}
policy { b(); }"#,
        ),
    )
    .unwrap();
    let policyvm = |extra: &[&str]| {
        let mut cmd = Command::new(binary("policyvm"));
        cmd.arg("run")
            .arg(&bundle_path)
            .arg("--trust")
            .arg(&trust)
            .arg("--root")
            .arg(s.root())
            .args(extra);
        cmd
    };
    std::fs::write(s.path("/slow"), "").unwrap();
    let mut vm = policyvm(&[])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let pid = loop {
        if let Ok(pid) = std::fs::read_to_string(s.path("/pid")) {
            if let Ok(pid) = pid.trim().parse::<i32>() {
                break pid;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    vm.kill().unwrap(); // SIGKILL
    vm.wait().unwrap();
    // The command leads its own process group: end it too.
    let _ = Command::new("kill")
        .args(["-9", "--", &format!("-{pid}")])
        .status();
    assert_eq!(s.read("/etc/app.conf"), "v1\n", "the file was written");
    assert_eq!(s.read("/log"), "", "the notification was not delivered");
    let owed = s.read("/var/lib/converge/owed.json");
    assert!(owed.contains("\"reload\""), "{owed}");

    std::fs::remove_file(s.path("/slow")).unwrap();
    let out = policyvm(&["--format", "json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["summary"]["owed_notifications"], 0, "{json}");
    assert_eq!(s.read("/log"), "delivered\n");
    let out = policyvm(&[]).output().unwrap();
    assert!(out.status.success());
    assert_eq!(s.read("/log"), "delivered\n", "delivered exactly once");
}

/// Item 8: the dry run names every command it would run, with its argv and
/// where (chrooted into the root, or on the host).
#[test]
fn the_dry_run_lists_every_command_with_its_argv() {
    let s = Sandbox::new();
    let bundle = verified(&compile(
        r#"bundle b {
  file "/etc/app.conf" { content = "v1\n"; validate = ["/usr/bin/app", "--check", "%s"]; }
  command "migrate" { run = ["/usr/bin/app", "migrate", "--to", "v 2"]; creates = "/etc/migrated"; }
  command "on host" { run = ["/bin/true"]; creates = "/etc/done"; host = true; }
}
policy { b(); }"#,
    ));
    let r = s.converge(&bundle, true);
    let root = std::fs::canonicalize(s.root())
        .unwrap()
        .display()
        .to_string();
    let planned: Vec<(&str, Vec<&str>, Option<&str>)> = r
        .planned
        .iter()
        .map(|c| {
            (
                c.role,
                c.argv.iter().map(String::as_str).collect(),
                c.chroot.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        planned,
        [
            (
                "validate",
                vec!["/usr/bin/app", "--check", "%s"],
                Some(root.as_str())
            ),
            (
                "run",
                vec!["/usr/bin/app", "migrate", "--to", "v 2"],
                Some(root.as_str())
            ),
            ("run", vec!["/bin/true"], None),
        ]
    );
    let human = report::human(&r);
    assert!(
        human.contains(r#"would run (run, <policy>:3, chrooted into "#)
            || human.contains(r#"["/usr/bin/app", "migrate", "--to", "v 2"]"#),
        "{human}"
    );
    assert!(human.contains("on the host): [\"/bin/true\"]"), "{human}");
    let json = report::json(&r);
    assert_eq!(json["commands"][1]["argv"][3], "v 2");
    assert_eq!(json["commands"][2]["chroot"], serde_json::Value::Null);
    assert!(
        !s.path("/etc/app.conf").exists(),
        "a dry run changes nothing"
    );
}

/// Item 8 and §18: under `--root`, a command and a `validate` run chrooted
/// into the root (`/` is the root, `%s` is the staged copy's path inside
/// it); `host = true` runs on the host. Before, every command ran on the
/// host, where a policy meant for an image could change the build machine.
#[test]
#[ignore = "needs root"]
fn commands_and_validate_run_chrooted_unless_host() {
    require_root("chroot(2), through `unshare --root`");
    let s = Sandbox::new();
    root_with_a_shell(s.root());
    let bundle = verified(&compile(
        r#"bundle b {
  command "inside" { run = ["/bin/sh", "-c", "pwd > where; echo \"$CONVERGE_ROOT\" >> where"]; creates = "/where"; }
  command "outside" { run = ["/bin/sh", "-c", "pwd > host-where"]; creates = "/host-where"; host = true; }
  file "/etc/app.conf" { content = "good\n"; validate = ["/bin/sh", "-c", "read l < \"$0\" && [ \"$l\" = good ] && echo \"$0\" > seen", "%s"]; }
}
policy { b(); }"#,
    ));
    let r = s.converge(&bundle, false);
    assert_eq!(failed(&r), Vec::<String>::new());
    assert_eq!(s.read("/where"), "/\n/\n", "chrooted: the root is /");
    let real = std::fs::canonicalize(s.root()).unwrap();
    assert_eq!(s.read("/host-where"), format!("{}\n", real.display()));
    let seen = s.read("/seen");
    assert!(seen.starts_with("/etc/.converge-tmp."), "{seen}");
    assert_eq!(s.read("/etc/app.conf"), "good\n");
    let again = s.converge(&bundle, false);
    assert_eq!(repaired(&again), 0, "{again:?}");
}

/// Item 7 through the stdlib: `std/files.policy`'s `config_file` backs up
/// into the state directory (nothing lands beside the file), and
/// `existing_secret` never creates a missing key. Built and run with the
/// real `policyc` and `policyvm`.
#[test]
#[ignore = "needs root"]
fn the_stdlib_test_policy_backs_up_into_the_state_directory() {
    require_root("the stdlib bodies give files to root");
    let work = tempfile::tempdir().unwrap();
    let s = Sandbox::new();
    let key = work.path().join("k");
    let ok = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    ok(Command::new(binary("policyc"))
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .unwrap());
    let trust = work.path().join("trust");
    std::fs::create_dir_all(&trust).unwrap();
    std::fs::copy(work.path().join("k.pub"), trust.join("k.pub")).unwrap();
    let bundle = work.path().join("files.bundle");
    ok(Command::new(binary("policyc"))
        .current_dir(converge::repo_root())
        .args(["build", "stdlib/tests/files_test.policy", "-o"])
        .arg(&bundle)
        .arg("--key")
        .arg(work.path().join("k.key"))
        .output()
        .unwrap());
    std::fs::write(s.path("/etc/passwd"), "root:x:0:0::/root:/bin/sh\n").unwrap();
    std::fs::write(s.path("/etc/group"), "root:x:0:\n").unwrap();
    std::fs::create_dir_all(s.path("/var/lib/converge-test")).unwrap();
    std::fs::write(s.path("/var/lib/converge-test/app.conf"), "old\n").unwrap();
    let run = || {
        ok(Command::new(binary("policyvm"))
            .arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(&trust)
            .arg("--root")
            .arg(s.root())
            .output()
            .unwrap())
    };
    let out = run();
    let human = String::from_utf8_lossy(&out.stdout);
    assert!(human.contains("absent and create = false"), "{human}");
    assert_eq!(
        s.read("/var/lib/converge-test/app.conf"),
        "listen = 127.0.0.1:9000\n"
    );
    assert_eq!(
        s.list("/var/lib/converge-test"),
        ["README", "app.conf", "private", "root-only", "run.sh"],
        "no backup beside the file"
    );
    assert!(!s.path("/var/lib/converge-test/private/tls.key").exists());
    assert_eq!(
        s.state()
            .backups_of("/var/lib/converge-test/app.conf")
            .unwrap(),
        [b"old\n".to_vec()]
    );
    let again = run();
    let human = String::from_utf8_lossy(&again.stdout);
    assert!(human.contains(" 0 repaired"), "{human}");
}
