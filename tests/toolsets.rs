//! Issue 25 items 1 and 2: one policy, two toolsets. The same scenario
//! table (the same policy text at each step) runs on a Debian-like root
//! (dpkg/apt, a local `file:` repository of `.deb`s built with `dpkg-deb`)
//! and a Rocky-like root (rpm/dnf, a local repository of noarch `.rpm`s
//! built with `rpmbuild` and indexed with `createrepo_c`): install at a
//! pinned version with a dependency and an epoch, `installed` keeping what
//! is there, an upgrade to `latest`, a version pin below the installed
//! version (a downgrade), removal, a local package file with a scriptlet;
//! then packages installed by hand and local users planted in the root,
//! reported by `unmanaged "package"` and `unmanaged "user"` (never a
//! dependency, never an account outside the id range), their removal
//! refused when a package promise failed or more than `max_remove` would
//! go, and removed within the rules (`ignore` globs kept). After each step
//! a second run repairs nothing, starts no installer and asks the package
//! database once (and, with `unmanaged "package"`, lists the packages
//! installed on purpose once).
//!
//! Adding a toolset is adding a row: a [`Fixture`] in `tests/toolsets/` and
//! a three-line test below, not another scenario file.
//!
//! "Nothing written outside the root" is checked two ways on every run:
//! `policyvm` runs with `HOME` and `TMPDIR` set to empty directories of
//! the test, which must stay empty (Debian's rpm would put its database in
//! `~/.rpmdb`; the VM stages embedded package files and dnf's private
//! `HOME` under `TMPDIR`), and the host's own package state (the row's
//! `host_state` paths: `/var/lib/rpm`, `/var/lib/dnf`, `/var/cache/dnf`,
//! dpkg's status, ...) and the host's account files (`userdel -R ROOT`
//! must change only the root's) are the same, by listing, before and
//! after. libdnf's transient `/tmp/tmpdir.*` (hard-coded by libdnf,
//! removed by it) is not looked at.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use ::converge::{binary, host_changes, support};

#[path = "toolsets/apt.rs"]
mod apt;
#[path = "toolsets/rpm.rs"]
mod rpm;

/// A package the fixtures build, toolset-neutral: `version` is
/// `[EPOCH:]VERSION` (each toolset adds its own release if it has one).
#[derive(Clone, Copy, Debug)]
pub struct Pkg {
    pub name: &'static str,
    pub version: &'static str,
    pub requires: Option<&'static str>,
    /// A post-install script that writes `/var/lib/NAME.installed` (run
    /// chrooted into the root with its `/bin/sh`).
    pub script: bool,
}

const fn pkg(name: &'static str, version: &'static str) -> Pkg {
    Pkg {
        name,
        version,
        requires: None,
        script: false,
    }
}

const ALPHA_1: Pkg = Pkg {
    requires: Some("cvg-beta"),
    ..pkg("cvg-alpha", "1.0")
};
const ALPHA_2: Pkg = Pkg {
    requires: Some("cvg-beta"),
    ..pkg("cvg-alpha", "2.0")
};
const BETA: Pkg = pkg("cvg-beta", "1.0");
const GAMMA: Pkg = pkg("cvg-gamma", "2:3.0");
const DELTA: Pkg = Pkg {
    script: true,
    ..pkg("cvg-delta", "1.0")
};
/// Installed by hand, outside the policy.
const EPSILON: Pkg = pkg("cvg-epsilon", "1.0");
const ZETA: Pkg = pkg("cvg-zeta", "1.0");

/// The accounts planted in both roots: `alice` (a policy names her),
/// `mallory` and `keeper` (local users no policy names), `svc` (a system
/// account below the default id range) and `nobody` (above it).
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
alice:x:1000:1000::/home/alice:/bin/sh\n\
mallory:x:1001:1001::/home/mallory:/bin/sh\n\
keeper:x:1002:1002::/home/keeper:/bin/sh\n\
svc:x:998:998::/:/usr/sbin/nologin\n\
nobody:x:65534:65534::/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str =
    "root:x:0:\nalice:x:1000:\nmallory:x:1001:\nkeeper:x:1002:\nsvc:x:998:\nnogroup:x:65534:\n";

/// One toolset's sandbox: a root of its family, a repository, and how to
/// look at them.
pub trait Fixture {
    /// The tools the row needs (checked with `support::require_tool`).
    fn require(&self);
    fn root(&self) -> &Path;
    /// Adds packages to the repository and refreshes the root's index.
    fn publish(&mut self, pkgs: &[Pkg]);
    /// Builds `pkg` as a local package file for the policy in `tree` and
    /// returns the attribute that names it (`deb = "/pkgs/x.deb"`,
    /// `rpm = "x.rpm"`).
    fn local_file(&self, tree: &Path, pkg: &Pkg) -> String;
    /// Installs packages by hand, outside any policy (as an administrator
    /// would, `dpkg --install` / `rpm -i`): installed on purpose, so
    /// `unmanaged "package"` counts them.
    fn plant(&self, pkgs: &[Pkg]);
    /// `name version` of every installed package, sorted, versions as
    /// [`Fixture::show`] writes them.
    fn installed(&self) -> Vec<String>;
    /// A toolset-neutral version as this toolset shows it.
    fn show(&self, version: &str) -> String;
    /// Host paths holding this toolset's own state, which a run in the
    /// sandbox must not change.
    fn host_state(&self) -> Vec<PathBuf>;
    /// The programs that change packages or ask the repositories (none of
    /// them may run when nothing changes), and the one that reads the
    /// database.
    fn installers(&self) -> &'static [&'static str];
    fn query_tool(&self) -> &'static str;
    /// The one call that lists the packages installed on purpose (for
    /// `unmanaged "package"`): its program and a word of its arguments.
    fn manual_query(&self) -> (&'static str, &'static str);
}

/// One step of the table: a policy (`{FILE}` stands for the local package
/// file's attribute), what the repository gains and what is planted by
/// hand first, the promises the first run repairs and fails, the extra
/// entries it reports, and what is installed after it.
struct Scenario {
    name: &'static str,
    publish: &'static [Pkg],
    policy: &'static str,
    repaired: usize,
    installed: &'static [(&'static str, &'static str)],
    /// The second run may ask the repositories (`latest`, a package no
    /// repository has).
    asks_repositories: bool,
    /// Packages installed by hand before the first run.
    plant: &'static [Pkg],
    /// Whether [`PASSWD`] and [`GROUP`] are planted before the first run.
    plant_accounts: bool,
    /// Promises that fail, on both runs.
    failed: usize,
    /// The first run's extra entries, `(type, name, action)`, sorted.
    extra: &'static [(&'static str, &'static str, &'static str)],
    /// The local users after the first run (empty: not looked at).
    users: &'static [&'static str],
}

/// The fields most steps leave alone.
const STEP: Scenario = Scenario {
    name: "",
    publish: &[],
    policy: "",
    repaired: 0,
    installed: &[],
    asks_repositories: false,
    plant: &[],
    plant_accounts: false,
    failed: 0,
    extra: &[],
    users: &[],
};

const SCENARIOS: &[Scenario] = &[
    Scenario {
        name: "install at a pinned version, with a dependency and an epoch",
        publish: &[ALPHA_1, ALPHA_2, BETA, GAMMA],
        policy: r#"package "cvg-alpha" { version = "1.0"; }
  package "cvg-gamma" { }"#,
        repaired: 2,
        installed: &[
            ("cvg-alpha", "1.0"),
            ("cvg-beta", "1.0"),
            ("cvg-gamma", "2:3.0"),
        ],
        ..STEP
    },
    Scenario {
        name: "installed keeps the version that is there",
        policy: r#"package "cvg-alpha" { }
  package "cvg-gamma" { state = installed; }"#,
        installed: &[
            ("cvg-alpha", "1.0"),
            ("cvg-beta", "1.0"),
            ("cvg-gamma", "2:3.0"),
        ],
        ..STEP
    },
    Scenario {
        name: "upgrade to latest",
        policy: r#"package "cvg-alpha" { state = latest; }
  package "cvg-gamma" { state = latest; }"#,
        repaired: 1,
        installed: &[
            ("cvg-alpha", "2.0"),
            ("cvg-beta", "1.0"),
            ("cvg-gamma", "2:3.0"),
        ],
        asks_repositories: true,
        ..STEP
    },
    Scenario {
        name: "a version pin below the installed one goes back to it",
        policy: r#"package "cvg-alpha" { version = "1.0"; }
  package "cvg-gamma" { version = "2:3.0"; }"#,
        repaired: 1,
        installed: &[
            ("cvg-alpha", "1.0"),
            ("cvg-beta", "1.0"),
            ("cvg-gamma", "2:3.0"),
        ],
        ..STEP
    },
    Scenario {
        name: "removal",
        policy: r#"package "cvg-alpha" { state = removed; }
  package "cvg-gamma" { state = removed; }
  package "cvg-never" { state = removed; }"#,
        repaired: 2,
        installed: &[("cvg-beta", "1.0")],
        ..STEP
    },
    Scenario {
        name: "a local package file, with a scriptlet",
        policy: r#"package "cvg-delta" { {FILE}; }"#,
        repaired: 1,
        installed: &[("cvg-beta", "1.0"), ("cvg-delta", "1.0")],
        ..STEP
    },
    Scenario {
        name: "packages and users installed by hand are reported",
        policy: r#"package "cvg-delta" { {FILE}; }
  user "alice" { uid = 1000; }
  unmanaged "package" { action = report; ignore = ["cvg-base"]; }
  unmanaged "user" { action = report; }"#,
        plant: &[EPSILON, ZETA],
        plant_accounts: true,
        installed: &[
            ("cvg-beta", "1.0"),
            ("cvg-delta", "1.0"),
            ("cvg-epsilon", "1.0"),
            ("cvg-zeta", "1.0"),
        ],
        // Not cvg-beta: a dependency is never extra. Not svc or nobody:
        // outside the id range.
        extra: &[
            ("package", "cvg-epsilon", "reported"),
            ("package", "cvg-zeta", "reported"),
            ("user", "keeper", "reported"),
            ("user", "mallory", "reported"),
        ],
        users: &["root", "alice", "mallory", "keeper", "svc", "nobody"],
        ..STEP
    },
    Scenario {
        name: "removal is refused when a package promise failed or more than max_remove would go",
        policy: r#"package "cvg-delta" { {FILE}; }
  package "cvg-nowhere" { }
  user "alice" { uid = 1000; }
  unmanaged "package" { action = remove; ignore = ["cvg-base"]; }
  unmanaged "user" { action = remove; max_remove = 1; }"#,
        installed: &[
            ("cvg-beta", "1.0"),
            ("cvg-delta", "1.0"),
            ("cvg-epsilon", "1.0"),
            ("cvg-zeta", "1.0"),
        ],
        asks_repositories: true,
        failed: 3,
        extra: &[
            ("package", "cvg-epsilon", "refused"),
            ("package", "cvg-zeta", "refused"),
            ("user", "keeper", "refused"),
            ("user", "mallory", "refused"),
        ],
        users: &["root", "alice", "mallory", "keeper", "svc", "nobody"],
        ..STEP
    },
    Scenario {
        name: "what the rules allow is removed, in one transaction",
        policy: r#"package "cvg-delta" { {FILE}; }
  user "alice" { uid = 1000; }
  unmanaged "package" { action = remove; ignore = ["cvg-base", "cvg-zeta"]; }
  unmanaged "user" { action = remove; ignore = ["keep*"]; }"#,
        repaired: 2,
        installed: &[
            ("cvg-beta", "1.0"),
            ("cvg-delta", "1.0"),
            ("cvg-zeta", "1.0"),
        ],
        extra: &[
            ("package", "cvg-epsilon", "removed"),
            ("user", "mallory", "removed"),
        ],
        users: &["root", "alice", "keeper", "svc", "nobody"],
        ..STEP
    },
];

/// Programs first on the VM's `PATH` that log each call and run the real
/// one.
struct Shims {
    dir: tempfile::TempDir,
    log: PathBuf,
}

impl Shims {
    fn new(tools: &[&str]) -> Shims {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.log");
        for tool in tools {
            let real = support::find_tool(tool).unwrap_or_else(|| panic!("no {tool}"));
            let shim = dir.path().join(tool);
            std::fs::write(
                &shim,
                format!(
                    "#!/bin/sh\necho \"{tool} $*\" >> {}\nexec {} \"$@\"\n",
                    log.display(),
                    real.display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        Shims { dir, log }
    }

    /// The calls logged since the last take.
    fn take(&self) -> Vec<String> {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let _ = std::fs::remove_file(&self.log);
        text.lines().map(str::to_owned).collect()
    }
}

/// A listing of `paths` (each file and directory below them with size and
/// modification time), to compare before and after.
fn snapshot(paths: &[PathBuf]) -> BTreeMap<PathBuf, Option<(u64, std::time::SystemTime)>> {
    let mut out = BTreeMap::new();
    let mut todo: Vec<PathBuf> = paths.to_vec();
    while let Some(p) = todo.pop() {
        let meta = std::fs::symlink_metadata(&p).ok();
        if let Some(m) = &meta {
            if m.is_dir() {
                for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                    todo.push(e.path());
                }
            }
        }
        out.insert(p, meta.map(|m| (m.len(), m.modified().unwrap())));
    }
    out
}

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Runs `policyvm run` (`--dry-run` when `dry`) on the fixture's root with
/// the shims first on its `PATH` and `HOME`/`TMPDIR` in empty directories
/// that must stay so.
fn run(
    f: &dyn Fixture,
    shims: &Shims,
    build: &support::PolicycBuild,
    dry: bool,
) -> serde_json::Value {
    let home = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let out = support::output_when_unlocked(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&build.bundle)
            .arg("--trust")
            .arg(&build.trust)
            .arg("--root")
            .arg(f.root())
            .args(["--format", "json"])
            .args(dry.then_some("--dry-run"))
            .env(
                "PATH",
                format!(
                    "{}:{}",
                    shims.dir.path().display(),
                    std::env::var("PATH").unwrap_or_default()
                ),
            )
            .env("HOME", home.path())
            .env("TMPDIR", tmp.path()),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        entries(home.path()).is_empty(),
        "HOME written: {:?}",
        entries(home.path())
    );
    assert!(
        entries(tmp.path()).is_empty(),
        "TMPDIR left: {:?}",
        entries(tmp.path())
    );
    report
}

/// The host's account files, which removing a root's accounts (`userdel
/// -R ROOT`) must not change.
const HOST_ACCOUNTS: &[&str] = &[
    "/etc/passwd",
    "/etc/group",
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/subuid",
    "/etc/subgid",
    "/var/mail",
];

/// Writes [`PASSWD`] and [`GROUP`] (and shadow files for them) into the
/// root, as if the accounts were made by hand.
fn plant_accounts(root: &Path) {
    let etc = root.join("etc");
    let shadow: String = PASSWD
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(|n| format!("{n}:*:19000:0:99999:7:::\n"))
        .collect();
    let gshadow: String = GROUP
        .lines()
        .filter_map(|l| l.split(':').next())
        .map(|n| format!("{n}:*::\n"))
        .collect();
    for (name, text) in [
        ("passwd", PASSWD),
        ("group", GROUP),
        ("shadow", shadow.as_str()),
        ("gshadow", gshadow.as_str()),
    ] {
        std::fs::write(etc.join(name), text).unwrap();
    }
}

/// The users of the root's `/etc/passwd`, in file order.
fn users(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("etc/passwd"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(':').next().map(str::to_owned))
        .collect()
}

/// A run report's extra entries as `(type, name, action)`, sorted.
fn extras(report: &serde_json::Value) -> Vec<(String, String, String)> {
    let mut v: Vec<(String, String, String)> = report["extra"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let field = |k: &str| e[k].as_str().unwrap_or_default().to_owned();
            (field("type"), field("name"), field("action"))
        })
        .collect();
    v.sort();
    v
}

/// Runs every scenario of the table on one toolset's fixture, made at
/// `since`.
fn scenarios(since: SystemTime, mut f: Box<dyn Fixture>) {
    f.require();
    let mut host: Vec<PathBuf> = f.host_state();
    host.extend(HOST_ACCOUNTS.iter().map(PathBuf::from));
    let host_before = snapshot(&host);
    let (manual_tool, manual_word) = f.manual_query();
    let mut tools: Vec<&str> = f.installers().to_vec();
    tools.push(f.query_tool());
    if !tools.contains(&manual_tool) {
        tools.push(manual_tool);
    }
    let shims = Shims::new(&tools);
    for s in SCENARIOS {
        if !s.publish.is_empty() {
            f.publish(s.publish);
        }
        if !s.plant.is_empty() {
            f.plant(s.plant);
        }
        if s.plant_accounts {
            plant_accounts(f.root());
        }
        let tree = tempfile::tempdir().unwrap();
        let policy = s
            .policy
            .replace("{FILE}", &f.local_file(tree.path(), &DELTA));
        let path = tree.path().join("site.policy");
        std::fs::write(
            &path,
            format!("bundle b {{\n  {policy}\n}}\npolicy {{ b(); }}\n"),
        )
        .unwrap();
        let build = support::policyc_build(&path, &[]);
        let want_extra: Vec<(String, String, String)> = s
            .extra
            .iter()
            .map(|(t, n, a)| ((*t).to_owned(), (*n).to_owned(), (*a).to_owned()))
            .collect();
        if want_extra.iter().any(|(_, _, a)| a == "removed") {
            // `--dry-run` first: it lists what would be removed and
            // removes nothing.
            let installed = f.installed();
            let accounts = users(f.root());
            let dry = run(f.as_ref(), &shims, &build, true);
            let would: Vec<(String, String, String)> = want_extra
                .iter()
                .map(|(t, n, a)| {
                    let a = if a == "removed" { "would_remove" } else { a };
                    (t.clone(), n.clone(), a.to_owned())
                })
                .collect();
            assert_eq!(extras(&dry), would, "{} (dry run): {dry:#}", s.name);
            assert_eq!(f.installed(), installed, "{} (dry run)", s.name);
            assert_eq!(users(f.root()), accounts, "{} (dry run)", s.name);
        }
        let first = run(f.as_ref(), &shims, &build, false);
        assert_eq!(
            first["summary"]["failed"], s.failed,
            "{}: {first:#}",
            s.name
        );
        assert_eq!(
            first["summary"]["repaired"], s.repaired,
            "{}: {first:#}",
            s.name
        );
        assert_eq!(extras(&first), want_extra, "{}: {first:#}", s.name);
        let expected: Vec<String> = s
            .installed
            .iter()
            .map(|(n, v)| format!("{n} {}", f.show(v)))
            .collect();
        assert_eq!(f.installed(), expected, "{}: {first:#}", s.name);
        if !s.users.is_empty() {
            assert_eq!(users(f.root()), s.users, "{}: {first:#}", s.name);
        }
        shims.take();
        // Converged: nothing to repair, no installer, one query (and one
        // listing of what was installed on purpose for `unmanaged
        // "package"`); what was removed is no longer extra, the rest is
        // reported as before.
        let second = run(f.as_ref(), &shims, &build, false);
        assert_eq!(
            second["summary"]["repaired"], 0,
            "{} (second run): {second:#}",
            s.name
        );
        assert_eq!(
            second["summary"]["failed"], s.failed,
            "{} (second run): {second:#}",
            s.name
        );
        let still: Vec<(String, String, String)> = want_extra
            .into_iter()
            .filter(|(_, _, a)| a != "removed")
            .collect();
        assert_eq!(extras(&second), still, "{} (second run)", s.name);
        let calls = shims.take();
        let queries = calls
            .iter()
            .filter(|c| c.starts_with(&format!("{} ", f.query_tool())))
            .count();
        assert_eq!(queries, 1, "{}: {calls:#?}", s.name);
        let is_manual =
            |c: &String| c.starts_with(&format!("{manual_tool} ")) && c.contains(manual_word);
        let manual = calls.iter().filter(|c| is_manual(c)).count();
        let lists_manual = s.policy.contains("unmanaged \"package\"");
        assert_eq!(manual, usize::from(lists_manual), "{}: {calls:#?}", s.name);
        let installers: Vec<&String> = calls
            .iter()
            .filter(|c| !is_manual(c))
            .filter(|c| {
                f.installers()
                    .iter()
                    .any(|t| c.starts_with(&format!("{t} ")))
            })
            .collect();
        if s.asks_repositories {
            assert!(
                installers.iter().all(|c| !c.contains(" install ")),
                "{}: {installers:#?}",
                s.name
            );
        } else {
            assert!(installers.is_empty(), "{}: {installers:#?}", s.name);
        }
    }
    // The scriptlet ran inside the root.
    assert!(f.root().join("var/lib/cvg-delta.installed").exists());
    assert_eq!(snapshot(&host), host_before, "host state changed");
    // And nothing else of the host's system directories either.
    let changed =
        host_changes::changed_since(host_changes::SYSTEM_DIRS, host_changes::NOISE, since);
    assert!(
        changed.is_empty(),
        "written outside the roots: {changed:#?}"
    );
}

#[test]
#[ignore = "needs root, dpkg, apt"]
fn the_apt_toolset_passes_the_scenario_table() {
    scenarios(SystemTime::now(), Box::new(apt::AptFixture::new()));
}

#[test]
#[ignore = "needs root, rpm, dnf, createrepo_c, rpmbuild"]
fn the_rpm_toolset_passes_the_scenario_table() {
    scenarios(SystemTime::now(), Box::new(rpm::RpmFixture::new()));
}

/// What `policyc check` says about a policy tree holding `policy` and a
/// file `not.rpm` that is no rpm (exit status and output).
fn check_tree(policy: &str) -> (bool, String) {
    let tree = tempfile::tempdir().unwrap();
    std::fs::write(
        tree.path().join("not.rpm"),
        "#!/bin/sh\necho not a package\n",
    )
    .unwrap();
    let path = tree.path().join("site.policy");
    std::fs::write(&path, policy).unwrap();
    let out = Command::new(binary("policyc"))
        .arg("check")
        .arg(&path)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// Bad package input is refused at compile time, at its line: an `rpm`
/// file that is not an rpm (its lead magic), a `manager` that is no
/// toolset, names with shell characters or a leading `-`. The same policy
/// with a real package name and no file checks clean.
#[test]
fn policyc_refuses_bad_package_input() {
    let cases = [
        (
            "bundle b {\n  package \"cvg-x\" {\n    rpm = \"not.rpm\";\n  }\n}\npolicy { b(); }\n",
            &["E0501", "not an rpm package", "site.policy:3"][..],
        ),
        (
            "bundle b {\n  package \"cvg-x\" { manager = \"yum\"; }\n}\npolicy { b(); }\n",
            &["E0203", "yum", "site.policy:2"][..],
        ),
        (
            "bundle b {\n  package \"-oAPT::x\" { }\n}\npolicy { b(); }\n",
            &["E0213", "site.policy:2"][..],
        ),
        (
            "bundle b {\n  package \"cvg;id\" { manager = \"dnf\"; }\n}\npolicy { b(); }\n",
            &["E0213", "site.policy:2"][..],
        ),
        (
            "bundle b {\n  package \"cvg-x\" { deb = \"/x.deb\"; rpm = \"not.rpm\"; }\n}\npolicy { b(); }\n",
            &["deb", "rpm"][..],
        ),
    ];
    for (policy, wanted) in cases {
        let (ok, text) = check_tree(policy);
        assert!(!ok, "{policy}\n{text}");
        for w in wanted {
            assert!(text.contains(w), "{w} in:\n{text}");
        }
    }
    let (ok, text) = check_tree(
        "bundle b {\n  package \"cvg-x\" { manager = \"rpm\"; }\n  package \"cvg-y\" { manager = \"dnf\"; version = \"2:1.0-1\"; }\n}\npolicy { b(); }\n",
    );
    assert!(ok, "{text}");
}

/// rpm's own rpmvercmp test vectors (`vm/src/backend/toolset/rpmvercmp.txt`,
/// which the Rust implementation's unit test runs) agree with the real
/// rpm's `rpm.vercmp`.
#[test]
#[ignore = "needs rpm"]
fn the_rpmvercmp_vectors_agree_with_the_real_rpm() {
    support::require_tool("rpm", "rpm");
    let home = tempfile::tempdir().unwrap();
    let vectors = include_str!("../vm/src/backend/toolset/rpmvercmp.txt");
    let mut lua = String::from("%{lua:");
    let mut expected = String::new();
    for line in vectors.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        lua.push_str(&format!(
            "print(rpm.vercmp('{}', '{}')) print(' ') ",
            f[0], f[1]
        ));
        expected.push_str(f[2]);
        expected.push(' ');
    }
    lua.push('}');
    let out = Command::new("rpm")
        .env("HOME", home.path())
        .args(["--eval", &lua])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let got = String::from_utf8_lossy(&out.stdout);
    assert_eq!(got.trim(), expected.trim());
}

/// A Rocky-like root on a host without rpm (here: a `PATH` without it):
/// the package promise fails naming the missing tool; the run goes on.
#[test]
fn a_missing_tool_is_a_failed_promise_naming_it() {
    let root = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(root.path().join("etc")).unwrap();
    std::fs::write(
        root.path().join("etc/os-release"),
        "ID=\"rocky\"\nVERSION_ID=\"9.3\"\n",
    )
    .unwrap();
    let tree = tempfile::tempdir().unwrap();
    let path = tree.path().join("site.policy");
    std::fs::write(
        &path,
        "bundle b {\n  package \"cvg-alpha\" { }\n  file \"/etc/after\" { content = \"went on\\n\"; }\n}\npolicy { b(); }\n",
    )
    .unwrap();
    let build = support::policyc_build(&path, &[]);
    let empty = tempfile::tempdir().unwrap();
    let out = support::output_when_unlocked(
        Command::new(binary("policyvm"))
            .arg("run")
            .arg(&build.bundle)
            .arg("--trust")
            .arg(&build.trust)
            .arg("--root")
            .arg(root.path())
            .args(["--format", "json"])
            .env("PATH", empty.path()),
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let promises = report["promises"].as_array().unwrap();
    let pkg = promises
        .iter()
        .find(|p| p["promiser"] == "cvg-alpha")
        .unwrap();
    assert_eq!(pkg["outcome"], "failed", "{report:#}");
    assert!(
        pkg["error"].as_str().unwrap().contains("no program `rpm`"),
        "{report:#}"
    );
    assert_eq!(report["summary"]["repaired"], 1, "{report:#}");
}
