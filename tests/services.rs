//! `service` promises with the runit backend, against a real `runsvdir`
//! watching the service directory of a sandbox root (Debian's `runit`
//! package provides `runsvdir` and `sv`; `.ci/run` installs it). The
//! systemd backend is covered by the unit tests of its commands and of its
//! state parsing in `vm/src/backend/systemd.rs`, and here by
//! `systemctl --root` on unit files, which needs no running systemd.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use ::converge::binary;
use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;

use ::converge::support;
use support::{compile, converge, failed, repaired, verified, write_trust};

/// A `runsvdir` on `ROOT/etc/service`, in its own process group. Dropping
/// it (also when a test fails) stops every service, then kills the whole
/// group: runsvdir, each runsv and each service.
struct Runsvdir {
    child: Child,
    service_dir: PathBuf,
}

impl Runsvdir {
    fn start(root: &Path) -> Runsvdir {
        let service_dir = root.join("etc/service");
        let child = Command::new("runsvdir")
            .arg(&service_dir)
            .process_group(0)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("runsvdir (apt-get install runit)");
        Runsvdir { child, service_dir }
    }
}

impl Drop for Runsvdir {
    fn drop(&mut self) {
        if let Ok(entries) = std::fs::read_dir(&self.service_dir) {
            for e in entries.flatten() {
                let _ = Command::new("sv")
                    .args(["-w", "3", "force-stop"])
                    .arg(e.path())
                    .output();
                let _ = Command::new("sv").arg("exit").arg(e.path()).output();
            }
        }
        // The negative pid is the process group.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .output();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Fails the test unless runit's `runsvdir` and `sv` are installed (the
/// tests that call this are `#[ignore = "needs runit"]`).
fn require_runit() {
    support::require_tool("runsvdir", "runit");
    support::require_tool("sv", "runit");
}

/// A root with a runit service definition `/etc/sv/NAME` whose `run`
/// sleeps, and an empty `/etc/service`.
fn runit_root(name: &str) -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let sv = root.path().join("etc/sv").join(name);
    std::fs::create_dir_all(&sv).unwrap();
    std::fs::create_dir_all(root.path().join("etc/service")).unwrap();
    std::fs::write(root.path().join("etc/os-release"), "ID=debian\n").unwrap();
    std::fs::write(sv.join("run"), "#!/bin/sh\nexec sleep 1000\n").unwrap();
    std::fs::set_permissions(sv.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    root
}

/// The pid of the service, if it runs (`sv status`).
fn pid(root: &Path, name: &str) -> Option<u32> {
    let out = Command::new("sv")
        .arg("status")
        .arg(root.join("etc/service").join(name))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let rest = text.strip_prefix("run: ")?.split_once("(pid ")?.1;
    rest.split(')').next()?.parse().ok()
}

fn outcome<'r>(r: &'r RunReport, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {promiser}: {r:?}"))
        .outcome()
}

fn policy(state: &str, enabled: bool, conf: &str) -> String {
    format!(
        r#"bundle b {{
  file "/etc/cvgdemo.conf" {{ content = "{conf}\n"; notify = [service "cvgdemo"]; }}
  service "cvgdemo" {{ state = {state}; enabled = {enabled}; }}
}}
policy {{ b(); }}"#
    )
}

#[test]
#[ignore = "needs runit"]
fn runit_enable_stop_start_restart_on_notify_and_disable() {
    require_runit();
    let root = runit_root("cvgdemo");
    let r = root.path();
    let _runsvdir = Runsvdir::start(r);

    // Enabled and running from nothing: the link is relative, so it means
    // the same to this runsvdir and inside the root. The manager is runit
    // because the root has /etc/service and no /run/systemd/system.
    let running = verified(&compile(&policy("running", true, "one")));
    let first = converge(&running, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(outcome(&first, "cvgdemo"), &Outcome::Repaired);
    assert_eq!(
        std::fs::read_link(r.join("etc/service/cvgdemo")).unwrap(),
        Path::new("../sv/cvgdemo")
    );
    let started = pid(r, "cvgdemo").expect("the service runs");
    let second = converge(&running, r, false);
    assert_eq!(repaired(&second), 0, "{second:?}");
    assert_eq!(pid(r, "cvgdemo"), Some(started));

    // running -> stopped -> running.
    let stopped = verified(&compile(&policy("stopped", true, "one")));
    let dry = converge(&stopped, r, true);
    assert_eq!(outcome(&dry, "cvgdemo"), &Outcome::Repaired);
    assert_eq!(pid(r, "cvgdemo"), Some(started), "a dry run stopped it");
    let stop = converge(&stopped, r, false);
    assert!(failed(&stop).is_empty(), "{:?}", failed(&stop));
    assert_eq!(outcome(&stop, "cvgdemo"), &Outcome::Repaired);
    assert_eq!(pid(r, "cvgdemo"), None);
    let stop = stop
        .promises
        .iter()
        .find(|p| p.promiser == "cvgdemo")
        .unwrap();
    assert!(
        stop.output()
            .unwrap_or_default()
            .contains("$ sv -v -w 30 down /"),
        "{stop:?}"
    );
    assert_eq!(repaired(&converge(&stopped, r, false)), 0);
    let up = converge(&running, r, false);
    assert_eq!(outcome(&up, "cvgdemo"), &Outcome::Repaired, "{up:?}");
    let before = pid(r, "cvgdemo").expect("running again");
    assert_eq!(repaired(&converge(&running, r, false)), 0);

    // The configuration changes: the file notifies the service, which is
    // restarted once (a new pid), then left alone.
    let changed = verified(&compile(&policy("running", true, "two")));
    let restart = converge(&changed, r, false);
    assert!(failed(&restart).is_empty(), "{:?}", failed(&restart));
    assert_eq!(outcome(&restart, "/etc/cvgdemo.conf"), &Outcome::Repaired);
    assert_eq!(outcome(&restart, "cvgdemo"), &Outcome::Repaired);
    let after = pid(r, "cvgdemo").expect("running after the restart");
    assert_ne!(after, before, "restart on notify kept the old process");
    let again = converge(&changed, r, false);
    assert_eq!(repaired(&again), 0, "{again:?}");
    assert_eq!(pid(r, "cvgdemo"), Some(after));

    // Disabled and stopped: the link goes, the service stops.
    let off = verified(&compile(&policy("stopped", false, "two")));
    let disable = converge(&off, r, false);
    assert!(failed(&disable).is_empty(), "{:?}", failed(&disable));
    assert!(std::fs::symlink_metadata(r.join("etc/service/cvgdemo")).is_err());
    let start = Instant::now();
    while Command::new("pgrep")
        .args(["-f", "^sleep 1000$"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|p| p.trim() == after.to_string())
        })
    {
        assert!(start.elapsed() < Duration::from_secs(10), "still running");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(repaired(&converge(&off, r, false)), 0);
}

/// `on_notify = reload`: the notified service gets `sv reload` (a HUP),
/// and keeps its process.
#[test]
#[ignore = "needs runit"]
fn runit_reload_on_notify_keeps_the_process() {
    require_runit();
    let root = runit_root("cvgreload");
    let r = root.path();
    let reloads = r.join("reloads");
    std::fs::write(
        r.join("etc/sv/cvgreload/run"),
        format!(
            "#!/bin/sh\ntrap 'echo reloaded >> {}' HUP\nwhile :; do sleep 0.1; done\n",
            reloads.display()
        ),
    )
    .unwrap();
    let _runsvdir = Runsvdir::start(r);
    let policy = |conf: &str| {
        verified(&compile(&format!(
            r#"bundle b {{
  file "/etc/cvgreload.conf" {{ content = "{conf}\n"; notify = [service "cvgreload"]; }}
  service "cvgreload" {{ state = running; enabled = true; on_notify = reload; }}
}}
policy {{ b(); }}"#
        )))
    };
    let first = converge(&policy("one"), r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    let before = pid(r, "cvgreload").expect("running");
    assert!(
        !reloads.exists(),
        "enabled and started just now: no reload on top"
    );
    let second = converge(&policy("two"), r, false);
    assert!(failed(&second).is_empty(), "{:?}", failed(&second));
    assert_eq!(outcome(&second, "cvgreload"), &Outcome::Repaired);
    let start = Instant::now();
    while !reloads.exists() {
        assert!(start.elapsed() < Duration::from_secs(5), "no HUP arrived");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(pid(r, "cvgreload"), Some(before));
    assert_eq!(repaired(&converge(&policy("two"), r, false)), 0);
    assert_eq!(std::fs::read_to_string(&reloads).unwrap(), "reloaded\n");
}

#[test]
#[ignore = "needs runit"]
fn runit_failures_name_the_problem() {
    require_runit();
    let root = runit_root("cvgdemo");
    let r = root.path();
    // No runsvdir: a running state cannot be had, and the report says why.
    std::os::unix::fs::symlink("../sv/cvgdemo", r.join("etc/service/cvgdemo")).unwrap();
    let bundle = verified(&compile(
        r#"bundle b {
  service "cvgdemo" { manager = "runit"; state = running; }
  service "cvgnone" { manager = "runit"; enabled = true; }
  service "cvgoff" { manager = "runit"; state = running; }
  file "/etc/after" { content = "x\n"; }
}
policy { b(); }"#,
    ));
    let report = converge(&bundle, r, false);
    let failures = failed(&report);
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(
        failures[2].contains("`cvgoff` is not enabled (no `/etc/service/cvgoff`)"),
        "{failures:?}"
    );
    assert!(
        failures[0].contains("not supervised by runsv"),
        "{failures:?}"
    );
    assert!(
        failures[1].contains("no service definition `/etc/sv/cvgnone`"),
        "{failures:?}"
    );
    assert_eq!(outcome(&report, "/etc/after"), &Outcome::Repaired);
}

/// `systemctl --root` works on unit files without a running systemd: the
/// symlinks of an image. `state` is not checked there (no systemd runs in
/// the root) and the promise says so.
#[test]
#[ignore = "needs systemctl"]
fn systemd_enables_units_inside_a_root() {
    support::require_tool("systemctl", "systemd");
    let root = tempfile::tempdir().unwrap();
    let r = root.path();
    let units = r.join("etc/systemd/system");
    std::fs::create_dir_all(&units).unwrap();
    std::fs::write(
        units.join("cvgweb.service"),
        "[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    )
    .unwrap();
    let on = verified(&compile(
        r#"bundle b { service "cvgweb" { manager = "systemd"; enabled = true; state = running; } }
policy { b(); }"#,
    ));
    let first = converge(&on, r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    assert_eq!(outcome(&first, "cvgweb"), &Outcome::Repaired);
    assert!(
        std::fs::symlink_metadata(units.join("multi-user.target.wants/cvgweb.service")).is_ok()
    );
    let web = first
        .promises
        .iter()
        .find(|p| p.promiser == "cvgweb")
        .unwrap();
    assert!(
        web.changes()
            .iter()
            .any(|c| c.after.contains("not checked under --root")),
        "{web:?}"
    );
    assert_eq!(repaired(&converge(&on, r, false)), 0);
    let off = verified(&compile(
        r#"bundle b { service "cvgweb" { manager = "systemd"; enabled = false; } }
policy { b(); }"#,
    ));
    assert_eq!(repaired(&converge(&off, r, false)), 1);
    assert!(
        std::fs::symlink_metadata(units.join("multi-user.target.wants/cvgweb.service")).is_err()
    );
    assert_eq!(repaired(&converge(&off, r, false)), 0);
}

/// The systemd backend on the host (`--root /`) is driven through a
/// stand-in `systemctl` first in `PATH`, which logs its arguments and keeps
/// the unit's state in two files: the real one would act on this machine.
/// The policy has only a service and a harmless notifying command, so the
/// run touches nothing else of the host.
#[test]
fn systemd_on_the_host_runs_the_commands_it_should() {
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let bin = w.join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(w.join("active"), "inactive\n").unwrap();
    std::fs::write(w.join("enabled"), "disabled\n").unwrap();
    let d = w.display();
    std::fs::write(
        bin.join("systemctl"),
        format!(
            r#"#!/bin/sh
echo "$*" >> {d}/log
[ "$2" = "--" ] || exit 64
case "$1" in
  is-active) cat {d}/active; grep -qx active {d}/active ;;
  is-enabled) cat {d}/enabled; grep -qx enabled {d}/enabled ;;
  start|restart) echo active > {d}/active ;;
  stop) echo inactive > {d}/active ;;
  enable) echo enabled > {d}/enabled ;;
  disable) echo disabled > {d}/enabled ;;
  *) exit 64 ;;
esac
"#
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("systemctl"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    write_trust(&w.join("trust"));
    let run_with = |policy: &str, extra: &[&str]| -> Vec<String> {
        let bundle = w.join("p.bundle");
        std::fs::write(&bundle, compile(policy)).unwrap();
        let _ = std::fs::remove_file(w.join("log"));
        let out = support::output_when_unlocked(
            Command::new(binary("policyvm"))
                .arg("run")
                .arg(&bundle)
                .arg("--trust")
                .arg(w.join("trust"))
                // Not the real /var/lib/converge: the state stays in the sandbox.
                .arg("--state")
                .arg(w.join("state"))
                .args(extra)
                .env(
                    "PATH",
                    format!(
                        "{}:{}",
                        bin.display(),
                        std::env::var("PATH").unwrap_or_default()
                    ),
                ),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::fs::write(w.join("stdout"), &out.stdout).unwrap();
        std::fs::read_to_string(w.join("log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    };
    let run = |policy: &str| run_with(policy, &[]);
    let up = r#"bundle b { service "cvgweb" { manager = "systemd"; state = running; enabled = true; } }
policy { b(); }"#;
    // A dry run only asks.
    assert_eq!(
        run_with(up, &["--dry-run"]),
        ["is-enabled -- cvgweb", "is-active -- cvgweb"]
    );
    assert_eq!(
        run(up),
        [
            "is-enabled -- cvgweb",
            "is-active -- cvgweb",
            "enable -- cvgweb",
            "start -- cvgweb",
            "is-enabled -- cvgweb",
            "is-active -- cvgweb",
            // The second pass, which finds nothing to do.
            "is-enabled -- cvgweb",
            "is-active -- cvgweb",
        ]
    );
    // The human report names the commands that made the change.
    let report = std::fs::read_to_string(w.join("stdout")).unwrap();
    assert!(
        report.contains("repaired service \"cvgweb\"")
            && report.contains(
                "\n         $ systemctl enable -- cvgweb\n         $ systemctl start -- cvgweb\n"
            ),
        "{report}"
    );
    // Converged: only the two questions.
    assert_eq!(run(up), ["is-enabled -- cvgweb", "is-active -- cvgweb"]);
    // A repaired promise notifies it: one restart, and in the next run none.
    let notified = r#"bundle b {
  command "poke" { run = ["true"]; notify = [service "cvgweb"]; host = true; }
  service "cvgweb" { manager = "systemd"; state = running; }
}
policy { b(); }"#;
    assert_eq!(
        run(notified),
        [
            "is-active -- cvgweb",
            "restart -- cvgweb",
            "is-active -- cvgweb",
            "is-active -- cvgweb",
        ]
    );
    let down = r#"bundle b { service "cvgweb" { manager = "systemd"; state = stopped; enabled = false; } }
policy { b(); }"#;
    assert_eq!(
        run(down),
        [
            "is-enabled -- cvgweb",
            "is-active -- cvgweb",
            "disable -- cvgweb",
            "stop -- cvgweb",
            "is-enabled -- cvgweb",
            "is-active -- cvgweb",
            "is-enabled -- cvgweb",
            "is-active -- cvgweb",
        ]
    );
    assert_eq!(
        std::fs::read_to_string(w.join("active")).unwrap(),
        "inactive\n"
    );
    assert_eq!(run(down), ["is-enabled -- cvgweb", "is-active -- cvgweb"]);
}

/// Bcfg2's "services of a modified bundle restart", written as bundle
/// defaults (LANGUAGE.md section 17): `defaults { notify = [service "x"]; }`
/// makes every file of the bundle notify the service (the service itself
/// excluded), so a change to any one of them restarts it, and a run that
/// changes nothing leaves it alone.
#[test]
#[ignore = "needs runit"]
fn bundle_defaults_restart_the_service_when_any_file_of_the_bundle_changes() {
    require_runit();
    let root = runit_root("cvgbundle");
    let r = root.path();
    let _runsvdir = Runsvdir::start(r);
    let policy = |a: &str, b: &str| {
        verified(&compile(&format!(
            r#"bundle web {{
  defaults {{ notify = [service "cvgbundle"]; }}
  file "/etc/cvgbundle-a.conf" {{ content = "{a}\n"; }}
  file "/etc/cvgbundle-b.conf" {{ content = "{b}\n"; mode = 0o640; }}
  service "cvgbundle" {{ state = running; enabled = true; }}
}}
policy {{ web(); }}"#
        )))
    };
    let first = converge(&policy("a1", "b1"), r, false);
    assert!(failed(&first).is_empty(), "{:?}", failed(&first));
    let started = pid(r, "cvgbundle").expect("the service runs");
    let quiet = converge(&policy("a1", "b1"), r, false);
    assert_eq!(repaired(&quiet), 0, "{quiet:?}");
    assert_eq!(pid(r, "cvgbundle"), Some(started));

    // Each file of the bundle, changed on its own, restarts the service.
    let mut before = started;
    for (a, b, changed) in [
        ("a2", "b1", "/etc/cvgbundle-a.conf"),
        ("a2", "b2", "/etc/cvgbundle-b.conf"),
    ] {
        let run = converge(&policy(a, b), r, false);
        assert!(failed(&run).is_empty(), "{:?}", failed(&run));
        assert_eq!(outcome(&run, changed), &Outcome::Repaired, "{run:?}");
        assert_eq!(outcome(&run, "cvgbundle"), &Outcome::Repaired, "{run:?}");
        let after = pid(r, "cvgbundle").expect("running after the restart");
        assert_ne!(
            after, before,
            "a change to {changed} did not restart the service"
        );
        let again = converge(&policy(a, b), r, false);
        assert_eq!(repaired(&again), 0, "{again:?}");
        assert_eq!(pid(r, "cvgbundle"), Some(after));
        before = after;
    }
}
