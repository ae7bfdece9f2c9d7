//! `package` promises against the real `dpkg`, `dpkg-query`, `apt-get` and
//! `apt-cache`, inside sandbox roots: an empty dpkg database (and, for
//! apt, a local file repository) in a temporary directory. Nothing here
//! touches the packages of the machine; the one test that reads its dpkg
//! database does so in a dry run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::process::Command;

use ::converge::binary;
use converge_vm::run::operators::Outcome;
use converge_vm::run::RunReport;

use ::converge::debs::build_deb;
use ::converge::support;
use support::{compile, converge, failed, repaired, verified, write_trust};

/// A root with an empty dpkg database, as `dpkg --root` needs it.
fn dpkg_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    let p = root.path();
    for d in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
        "etc",
        "pkgs",
    ] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    std::fs::write(p.join("var/lib/dpkg/status"), "").unwrap();
    std::fs::write(p.join("var/lib/dpkg/available"), "").unwrap();
    std::fs::write(p.join("etc/os-release"), "ID=debian\nVERSION_ID=12\n").unwrap();
    root
}

/// `name version` of what the root's dpkg database says is installed
/// (selected for removal or not).
fn installed(root: &Path) -> Vec<String> {
    let out = Command::new("dpkg-query")
        .arg(format!("--root={}", root.display()))
        .args(["-W", "--showformat=${Package} ${Version} ${Status}\\n"])
        .output()
        .unwrap();
    let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.ends_with(" installed"))
        .map(|l| l.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect();
    v.sort();
    v
}

fn outcome<'r>(r: &'r RunReport, promiser: &str) -> &'r Outcome {
    r.promises
        .iter()
        .find(|p| p.promiser == promiser)
        .unwrap_or_else(|| panic!("no promise {promiser}: {r:?}"))
        .outcome()
}

fn host_has(name: &str) -> bool {
    Command::new("dpkg-query")
        .args(["-W", name])
        .output()
        .unwrap()
        .status
        .success()
}

#[test]
#[ignore = "needs root"]
fn debs_install_and_remove_inside_a_root_and_a_missing_one_fails_alone() {
    support::require_root("dpkg --root");
    let root = dpkg_root();
    let pkgs = root.path().join("pkgs");
    build_deb(&pkgs, "cvg-alpha", "2.0", Some("cvg-beta"), None);
    build_deb(&pkgs, "cvg-beta", "1.0", None, None);
    let install = verified(&compile(
        r#"bundle b {
  package "cvg-alpha" { deb = "/pkgs/cvg-alpha_2.0.deb"; version = "2.0"; }
  package "cvg-beta" { deb = "/pkgs/cvg-beta_1.0.deb"; }
  package "cvg-missing" { deb = "/pkgs/cvg-missing_1.0.deb"; }
  file "/etc/after-packages" { content = "the run went on\n"; }
}
policy { b(); }"#,
    ));

    // A dry run reports what it would do and changes nothing.
    let dry = converge(&install, root.path(), true);
    assert_eq!(outcome(&dry, "cvg-alpha"), &Outcome::Repaired, "{dry:?}");
    let alpha = dry
        .promises
        .iter()
        .find(|p| p.promiser == "cvg-alpha")
        .unwrap();
    assert!(
        alpha.changes()[0].after.contains("would run `dpkg --root="),
        "{:?}",
        alpha.changes()
    );
    assert!(installed(root.path()).is_empty());
    assert!(!root.path().join("etc/after-packages").exists());

    let first = converge(&install, root.path(), false);
    assert_eq!(
        outcome(&first, "cvg-alpha"),
        &Outcome::Repaired,
        "{first:?}"
    );
    assert_eq!(outcome(&first, "cvg-beta"), &Outcome::Repaired);
    assert_eq!(outcome(&first, "/etc/after-packages"), &Outcome::Repaired);
    let failures = failed(&first);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("cvg-missing") && failures[0].contains("does not exist in the root"),
        "{failures:?}"
    );
    assert_eq!(installed(root.path()), ["cvg-alpha 2.0", "cvg-beta 1.0"]);
    assert!(root.path().join("usr/share/cvg-alpha/README").exists());
    // Both .deb files went to one dpkg call, which the report shows.
    let alpha = first
        .promises
        .iter()
        .find(|p| p.promiser == "cvg-alpha")
        .unwrap();
    let log = alpha.output().unwrap_or_default();
    assert!(
        log.contains("--install -- ")
            && log.contains("cvg-alpha_2.0.deb")
            && log.contains("cvg-beta_1.0.deb"),
        "{log}"
    );
    assert_eq!(alpha.changes()[0].before, "absent");
    assert_eq!(alpha.changes()[0].after, "2.0");
    // The machine itself is untouched.
    assert!(!host_has("cvg-alpha") && !host_has("cvg-beta"));

    let second = converge(&install, root.path(), false);
    assert_eq!(repaired(&second), 0, "{second:?}");
    assert_eq!(outcome(&second, "cvg-alpha"), &Outcome::Kept);
    assert_eq!(outcome(&second, "cvg-beta"), &Outcome::Kept);
    assert_eq!(failed(&second).len(), 1);

    let remove = verified(&compile(
        r#"bundle b {
  package "cvg-alpha" { state = removed; }
  package "cvg-beta" { state = removed; }
}
policy { b(); }"#,
    ));
    let dry = converge(&remove, root.path(), true);
    assert_eq!(repaired(&dry), 2);
    assert_eq!(
        installed(root.path()).len(),
        2,
        "a dry run removed something"
    );
    let third = converge(&remove, root.path(), false);
    assert!(failed(&third).is_empty(), "{:?}", failed(&third));
    assert_eq!(repaired(&third), 2);
    assert!(installed(root.path()).is_empty());
    assert!(!root.path().join("usr/share/cvg-alpha/README").exists());
    let fourth = converge(&remove, root.path(), false);
    assert_eq!(repaired(&fourth), 0, "{fourth:?}");
    assert!(failed(&fourth).is_empty());
}

#[test]
#[ignore = "needs root"]
fn removing_a_package_another_depends_on_fails_with_dpkgs_reason() {
    support::require_root("dpkg --root");
    let root = dpkg_root();
    let pkgs = root.path().join("pkgs");
    build_deb(&pkgs, "cvg-alpha", "2.0", Some("cvg-beta"), None);
    build_deb(&pkgs, "cvg-beta", "1.0", None, None);
    let install = verified(&compile(
        r#"bundle b {
  package "cvg-alpha" { deb = "/pkgs/cvg-alpha_2.0.deb"; }
  package "cvg-beta" { deb = "/pkgs/cvg-beta_1.0.deb"; }
}
policy { b(); }"#,
    ));
    assert!(failed(&converge(&install, root.path(), false)).is_empty());
    let remove = verified(&compile(
        r#"bundle b { package "cvg-beta" { state = removed; } }
policy { b(); }"#,
    ));
    let r = converge(&remove, root.path(), false);
    let failures = failed(&r);
    assert_eq!(failures.len(), 1, "{r:?}");
    assert!(
        failures[0].contains("dpkg --root=")
            && failures[0].contains("--remove -- cvg-beta")
            && failures[0].contains("cvg-alpha depends on cvg-beta"),
        "{failures:?}"
    );
    assert_eq!(installed(root.path()), ["cvg-alpha 2.0", "cvg-beta 1.0"]);
}

#[test]
#[ignore = "needs root"]
fn a_package_after_a_failed_package_is_skipped_not_installed() {
    support::require_root("dpkg --root");
    let root = dpkg_root();
    let pkgs = root.path().join("pkgs");
    build_deb(&pkgs, "cvg-beta", "1.0", None, None);
    build_deb(&pkgs, "cvg-gamma", "1.0", None, None);
    let bundle = verified(&compile(
        r#"bundle b {
  package "cvg-missing" { deb = "/pkgs/cvg-missing_1.0.deb"; }
  package "cvg-beta" { deb = "/pkgs/cvg-beta_1.0.deb"; after = [package "cvg-missing"]; }
  package "cvg-gamma" { deb = "/pkgs/cvg-gamma_1.0.deb"; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    assert_eq!(failed(&r).len(), 1, "{r:?}");
    assert!(
        matches!(outcome(&r, "cvg-beta"), Outcome::Skipped(_)),
        "{r:?}"
    );
    assert_eq!(outcome(&r, "cvg-gamma"), &Outcome::Repaired);
    assert_eq!(installed(root.path()), ["cvg-gamma 1.0"]);
}

/// One `.deb` whose dependency is missing fails the batch's `dpkg
/// --install`; each package is then tried on its own, so the good one is
/// installed and only the bad one fails, with its own command and dpkg's
/// words. (A file that is not a `.deb` at all fails earlier and alone, at
/// `dpkg-deb --contents`, which lists where it would unpack.)
#[test]
#[ignore = "needs root"]
fn a_failing_batch_is_retried_one_by_one_so_one_bad_package_fails_alone() {
    support::require_root("dpkg --root");
    let root = dpkg_root();
    let pkgs = root.path().join("pkgs");
    build_deb(&pkgs, "cvg-gamma", "1.0", None, None);
    build_deb(&pkgs, "cvg-bad", "1.0", Some("cvg-missing"), None);
    let bundle = verified(&compile(
        r#"bundle b {
  package "cvg-bad" { deb = "/pkgs/cvg-bad_1.0.deb"; }
  package "cvg-gamma" { deb = "/pkgs/cvg-gamma_1.0.deb"; }
}
policy { b(); }"#,
    ));
    let r = converge(&bundle, root.path(), false);
    let failures = failed(&r);
    assert_eq!(failures.len(), 1, "{r:?}");
    assert!(
        failures[0].starts_with("package cvg-bad: `dpkg --root=")
            && failures[0].contains("--install -- ")
            && failures[0].contains("cvg-bad_1.0.deb` exited with status")
            && failures[0].contains("cvg-missing")
            && !failures[0].contains("cvg-gamma"),
        "{failures:?}"
    );
    assert_eq!(outcome(&r, "cvg-gamma"), &Outcome::Repaired);
    assert_eq!(installed(root.path()), ["cvg-gamma 1.0"]);
}

/// apt's options for the sandbox, as the backend passes them.
fn apt_opts(root: &Path) -> Vec<String> {
    let r = root.display();
    [
        format!("Dir={r}/"),
        format!("Dir::State::status={r}/var/lib/dpkg/status"),
        "Dir::Bin::dpkg=dpkg".to_owned(),
        format!("DPkg::Options::=--root={r}"),
    ]
    .into_iter()
    .flat_map(|o| ["-o".to_owned(), o])
    .collect()
}

/// Writes `Packages` for the `.deb` files of `repo` (a flat repository).
fn index(repo: &Path) {
    let mut packages = String::new();
    let mut debs: Vec<_> = std::fs::read_dir(repo)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "deb"))
        .collect();
    debs.sort();
    for deb in debs {
        let control = Command::new("dpkg-deb")
            .arg("-f")
            .arg(&deb)
            .output()
            .unwrap();
        packages.push_str(String::from_utf8_lossy(&control.stdout).trim_end());
        let sum = Command::new("sha256sum").arg(&deb).output().unwrap();
        let sum = String::from_utf8_lossy(&sum.stdout);
        packages.push_str(&format!(
            "\nFilename: ./{}\nSize: {}\nSHA256: {}\n\n",
            deb.file_name().unwrap().to_string_lossy(),
            std::fs::metadata(&deb).unwrap().len(),
            sum.split(' ').next().unwrap()
        ));
    }
    std::fs::write(repo.join("Packages"), packages).unwrap();
}

fn apt_update(root: &Path) {
    let out = Command::new("apt-get")
        .args(apt_opts(root))
        .args(["-q", "update"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

#[test]
#[ignore = "needs root"]
fn apt_installs_from_a_repository_into_a_root_and_latest_upgrades() {
    support::require_root("dpkg --root");
    let root = dpkg_root();
    let p = root.path();
    for d in [
        "etc/apt/sources.list.d",
        "etc/apt/apt.conf.d",
        "etc/apt/preferences.d",
        "var/lib/apt/lists/partial",
        "var/cache/apt/archives/partial",
        "var/log/apt",
    ] {
        std::fs::create_dir_all(p.join(d)).unwrap();
    }
    let repo = tempfile::tempdir().unwrap();
    // apt reads file: repositories as its sandbox user.
    std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    build_deb(repo.path(), "cvg-alpha", "2.0", Some("cvg-beta"), None);
    build_deb(repo.path(), "cvg-beta", "1.0", None, None);
    index(repo.path());
    std::fs::write(
        p.join("etc/apt/sources.list"),
        format!("deb [trusted=yes] file:{} ./\n", repo.path().display()),
    )
    .unwrap();
    apt_update(p);

    let policy = |alpha_state: &str| {
        verified(&compile(&format!(
            r#"bundle b {{
  package "cvg-alpha" {{ state = {alpha_state}; }}
  package "cvg-nosuch" {{ }}
  file "/etc/after-packages" {{ content = "the run went on\n"; }}
}}
policy {{ b(); }}"#
        )))
    };
    let install = policy("installed");
    let first = converge(&install, p, false);
    assert_eq!(
        outcome(&first, "cvg-alpha"),
        &Outcome::Repaired,
        "{first:?}"
    );
    assert_eq!(outcome(&first, "/etc/after-packages"), &Outcome::Repaired);
    let failures = failed(&first);
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].contains("no installation candidate for package `cvg-nosuch`"),
        "{failures:?}"
    );
    // apt pulled in the dependency.
    assert_eq!(installed(p), ["cvg-alpha 2.0", "cvg-beta 1.0"]);
    assert!(!host_has("cvg-alpha"));
    let alpha = first
        .promises
        .iter()
        .find(|x| x.promiser == "cvg-alpha")
        .unwrap();
    assert!(
        alpha
            .output()
            .unwrap_or_default()
            .contains("apt-get -o Dir="),
        "{alpha:?}"
    );

    let second = converge(&install, p, false);
    assert_eq!(repaired(&second), 0, "{second:?}");

    // Names apt would misread never reach apt-get: `cvg-beta-` would mean
    // "remove cvg-beta", and `cvg.alpha` is a regular expression to apt
    // that matches cvg-alpha (with a version, too).
    let misread = verified(&compile(
        r#"bundle b {
  package "cvg-beta-" { }
  package "cvg.alpha" { }
  package "cvg.beta" { version = "1.0"; }
}
policy { b(); }"#,
    ));
    let r = converge(&misread, p, false);
    let failures = failed(&r);
    assert_eq!(failures.len(), 3, "{failures:?}");
    assert!(
        failures[0].contains("ends with `-`, which apt-get reads as \"remove\""),
        "{failures:?}"
    );
    assert!(
        failures[1].contains("no installation candidate for package `cvg.alpha`"),
        "{failures:?}"
    );
    assert!(
        failures[2].contains("no installation candidate for package `cvg.beta`"),
        "{failures:?}"
    );
    assert_eq!(installed(p), ["cvg-alpha 2.0", "cvg-beta 1.0"]);

    // A newer version in the repository: `installed` keeps 2.0, `latest`
    // upgrades to 2.1, then keeps it.
    build_deb(repo.path(), "cvg-alpha", "2.1", Some("cvg-beta"), None);
    index(repo.path());
    apt_update(p);
    assert_eq!(repaired(&converge(&install, p, false)), 0);
    let latest = policy("latest");
    let up = converge(&latest, p, false);
    assert_eq!(outcome(&up, "cvg-alpha"), &Outcome::Repaired, "{up:?}");
    assert_eq!(installed(p), ["cvg-alpha 2.1", "cvg-beta 1.0"]);
    assert_eq!(repaired(&converge(&latest, p, false)), 0);
}

/// The converged check of many packages asks `dpkg-query` at most once,
/// not once per package (never, when the VM reads the status file itself:
/// `dpkg_status`): a `dpkg-query` first in `PATH` counts its calls and
/// hands over to the real one. Read-only: the machine's own database, in a
/// dry run, with packages that are installed.
#[test]
fn a_converged_check_of_many_packages_is_at_most_one_dpkg_query() {
    let out = Command::new("dpkg-query")
        .args(["-W", "--showformat=${Package} ${db:Status-Abbrev}\\n"])
        .output()
        .unwrap();
    let names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.trim_end().ends_with("ii"))
        .map(|l| l.split(' ').next().unwrap().to_owned())
        .filter(|n| converge_vm::schema::name_problem(n).is_none())
        .take(200)
        .collect();
    assert!(names.len() >= 20, "too few installed packages: {names:?}");
    let mut policy = String::from("bundle b {\n");
    for n in &names {
        policy.push_str(&format!("  package \"{n}\" {{ state = installed; }}\n"));
    }
    policy.push_str("}\npolicy { b(); }\n");
    let work = tempfile::tempdir().unwrap();
    let bundle = work.path().join("p.bundle");
    std::fs::write(&bundle, compile(&policy)).unwrap();
    write_trust(&work.path().join("trust"));
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let count = work.path().join("count");
    let real = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v dpkg-query"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    std::fs::write(
        bin.join("dpkg-query"),
        format!(
            "#!/bin/sh\necho call >> {}\nexec {} \"$@\"\n",
            count.display(),
            real.trim()
        ),
    )
    .unwrap();
    std::fs::set_permissions(
        bin.join("dpkg-query"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = support::output_when_unlocked(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(work.path().join("trust"))
            .args(["--dry-run", "--format", "json"])
            .env("PATH", path),
    );
    let report: serde_json::Value = serde_json::from_slice(&run.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&run.stderr)));
    assert_eq!(report["summary"]["kept"], names.len(), "{report}");
    let calls = std::fs::read_to_string(&count).unwrap_or_default();
    assert!(calls.is_empty() || calls == "call\n", "{calls:?}");
}

/// A dry run asks (`dpkg-query`, `apt-cache`) and never runs a tool that
/// changes anything: stand-ins for `dpkg`, `apt-get` and the shadow tools,
/// first in `PATH`, log any call; the log stays empty, while the report
/// says what would run.
#[test]
fn a_dry_run_runs_no_tool_that_changes_packages_or_accounts() {
    let root = dpkg_root();
    let r = root.path();
    build_deb(&r.join("pkgs"), "cvg-gamma", "1.0", None, None);
    std::fs::write(
        r.join("etc/passwd"),
        "root:x:0:0::/root:/bin/sh\nold:x:1300:100::/home/old:/bin/sh\n",
    )
    .unwrap();
    std::fs::write(r.join("etc/group"), "root:x:0:\nusers:x:100:\n").unwrap();
    let work = tempfile::tempdir().unwrap();
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = work.path().join("log");
    for tool in [
        "dpkg", "apt-get", "useradd", "usermod", "userdel", "groupadd", "groupmod", "groupdel",
    ] {
        std::fs::write(
            bin.join(tool),
            format!(
                "#!/bin/sh\necho \"{tool} $*\" >> {}\nexit 1\n",
                log.display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(bin.join(tool), std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let bundle = work.path().join("p.bundle");
    std::fs::write(
        &bundle,
        compile(
            r#"bundle b {
  package "cvg-gamma" { deb = "/pkgs/cvg-gamma_1.0.deb"; }
  package "cvg-delta" { state = removed; }
  group "web" { gid = 1500; }
  user "carol" { uid = 1600; groups = ["users"]; }
  user "old" { ensure = absent; }
}
policy { b(); }"#,
        ),
    )
    .unwrap();
    write_trust(&work.path().join("trust"));
    let out = support::output_when_unlocked(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(work.path().join("trust"))
            .arg("--root")
            .arg(r)
            .args(["--dry-run", "--format", "json"])
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert!(!log.exists(), "{}", std::fs::read_to_string(&log).unwrap());
    assert_eq!(report["summary"]["failed"], 0, "{report}");
    // gamma, the group, carol and old would change; delta is not there.
    assert_eq!(report["summary"]["repaired"], 4, "{report}");
    let text = report.to_string();
    for would in [
        "would run `dpkg --root=",
        "would run `groupadd -R ",
        "would run `useradd -R ",
        "would run `userdel -R ",
    ] {
        assert!(text.contains(would), "{would} in {report}");
    }
    assert!(installed(r).is_empty());
    // The stand-ins are the ones a real run calls: the same run without
    // `--dry-run` reaches them (and they refuse).
    support::output_when_unlocked(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&bundle)
            .arg("--trust")
            .arg(work.path().join("trust"))
            .arg("--root")
            .arg(r)
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    bin.display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            ),
    );
    let called = std::fs::read_to_string(&log).unwrap_or_default();
    for tool in ["dpkg --root=", "groupadd -R ", "useradd -R ", "userdel -R "] {
        assert!(called.contains(tool), "{tool} in {called}");
    }
}
