//! Issue 25 item 1: one policy, two toolsets. The same scenario table runs
//! on a Debian-like root (dpkg/apt, a local `file:` repository of `.deb`s
//! built with `dpkg-deb`) and a Rocky-like root (rpm/dnf, a local
//! repository of noarch `.rpm`s built with `rpmbuild` and indexed with
//! `createrepo_c`): install at a pinned version with a dependency and an
//! epoch, `installed` keeping what is there, an upgrade to `latest`,
//! removal, a local package file with a scriptlet. After each step a second
//! run repairs nothing, starts no installer and asks the package database
//! at most once (`rpm -qa`; on apt, the VM reads dpkg's status file
//! itself and starts no `dpkg-query`).
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
//! dpkg's status, ...) is the same, by listing, before and after. libdnf's
//! transient `/tmp/tmpdir.*` (hard-coded by libdnf, removed by it) is not
//! looked at.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use ::converge::{binary, support};

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
    /// How many times a converged run starts [`Fixture::query_tool`]: at
    /// most once (apt: never, the VM reads dpkg's status file itself).
    fn converged_queries(&self) -> usize;
}

/// One step of the table: a policy (`{FILE}` stands for the local package
/// file's attribute), what the repository gains first, the promises the
/// first run repairs, and what is installed after it.
struct Scenario {
    name: &'static str,
    publish: &'static [Pkg],
    policy: &'static str,
    repaired: usize,
    installed: &'static [(&'static str, &'static str)],
    /// The second run may ask the repositories (`latest`).
    asks_repositories: bool,
}

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
        asks_repositories: false,
    },
    Scenario {
        name: "installed keeps the version that is there",
        publish: &[],
        policy: r#"package "cvg-alpha" { }
  package "cvg-gamma" { state = installed; }"#,
        repaired: 0,
        installed: &[
            ("cvg-alpha", "1.0"),
            ("cvg-beta", "1.0"),
            ("cvg-gamma", "2:3.0"),
        ],
        asks_repositories: false,
    },
    Scenario {
        name: "upgrade to latest",
        publish: &[],
        policy: r#"package "cvg-alpha" { state = latest; }
  package "cvg-gamma" { state = latest; }"#,
        repaired: 1,
        installed: &[
            ("cvg-alpha", "2.0"),
            ("cvg-beta", "1.0"),
            ("cvg-gamma", "2:3.0"),
        ],
        asks_repositories: true,
    },
    Scenario {
        name: "removal",
        publish: &[],
        policy: r#"package "cvg-alpha" { state = removed; }
  package "cvg-gamma" { state = removed; }
  package "cvg-never" { state = removed; }"#,
        repaired: 2,
        installed: &[("cvg-beta", "1.0")],
        asks_repositories: false,
    },
    Scenario {
        name: "a local package file, with a scriptlet",
        publish: &[],
        policy: r#"package "cvg-delta" { {FILE}; }"#,
        repaired: 1,
        installed: &[("cvg-beta", "1.0"), ("cvg-delta", "1.0")],
        asks_repositories: false,
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

/// Runs `policyvm run` on the fixture's root with the shims first on its
/// `PATH` and `HOME`/`TMPDIR` in empty directories that must stay so.
fn run(f: &dyn Fixture, shims: &Shims, build: &support::PolicycBuild) -> serde_json::Value {
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

/// Runs every scenario of the table on one toolset's fixture.
fn scenarios(mut f: Box<dyn Fixture>) {
    f.require();
    let host_before = snapshot(&f.host_state());
    let mut tools: Vec<&str> = f.installers().to_vec();
    tools.push(f.query_tool());
    let shims = Shims::new(&tools);
    for s in SCENARIOS {
        if !s.publish.is_empty() {
            f.publish(s.publish);
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
        let first = run(f.as_ref(), &shims, &build);
        assert_eq!(first["summary"]["failed"], 0, "{}: {first:#}", s.name);
        assert_eq!(
            first["summary"]["repaired"], s.repaired,
            "{}: {first:#}",
            s.name
        );
        let expected: Vec<String> = s
            .installed
            .iter()
            .map(|(n, v)| format!("{n} {}", f.show(v)))
            .collect();
        assert_eq!(f.installed(), expected, "{}: {first:#}", s.name);
        shims.take();
        // Converged: nothing to repair, no installer, at most one query.
        let second = run(f.as_ref(), &shims, &build);
        assert_eq!(
            second["summary"]["repaired"], 0,
            "{} (second run): {second:#}",
            s.name
        );
        assert_eq!(
            second["summary"]["failed"], 0,
            "{} (second run): {second:#}",
            s.name
        );
        let calls = shims.take();
        let queries = calls
            .iter()
            .filter(|c| c.starts_with(&format!("{} ", f.query_tool())))
            .count();
        assert_eq!(queries, f.converged_queries(), "{}: {calls:#?}", s.name);
        let installers: Vec<&String> = calls
            .iter()
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
    assert_eq!(
        snapshot(&f.host_state()),
        host_before,
        "host package state changed"
    );
}

#[test]
#[ignore = "needs root, dpkg, apt"]
fn the_apt_toolset_passes_the_scenario_table() {
    scenarios(Box::new(apt::AptFixture::new()));
}

#[test]
#[ignore = "needs rpm, dnf, createrepo_c, rpmbuild"]
fn the_rpm_toolset_passes_the_scenario_table() {
    scenarios(Box::new(rpm::RpmFixture::new()));
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

/// The dpkg status reader (`vm/src/backend/toolset/dpkg_status`), which
/// spares a converged run its `dpkg-query`, gives `dpkg-query`'s answer:
/// for each database of the table, written as a root's status file,
/// wherever the reader answers, the state and version of every name are
/// the ones the real `dpkg-query -W` prints (as the apt toolset parses
/// them). Where it does not answer, the toolset asks `dpkg-query`. The
/// well-formed databases must be answered, so the comparison is never
/// empty.
#[test]
#[ignore = "needs dpkg-query"]
fn the_dpkg_status_reader_agrees_with_dpkg_query() {
    use converge_vm::backend::process;
    use converge_vm::backend::toolset::{apt, dpkg_status};
    support::require_tool("dpkg-query", "dpkg");
    let stanza = |name: &str, status: &str, version: &str, extra: &str| {
        format!(
            "Package: {name}\nStatus: {status}\n{version}Architecture: all\nMaintainer: m <m@example.invalid>\nDescription: d\n long\n .\n more\n{extra}\n"
        )
    };
    let answered = [
        stanza("cvg-a", "install ok installed", "Version: 1.0-1\n", ""),
        stanza("cvg-a", "install ok installed", "Version: 2:3.0~rc1-1+b2\n", "Depends: cvg-b (>= 1), cvg-virtual\n"),
        stanza("cvg-a", "deinstall ok config-files", "Version: 1.0\n", "Conffiles:\n /etc/a 0123\n"),
        stanza("cvg-a", "purge ok not-installed", "", ""),
        stanza("cvg-a", "install reinstreq half-installed", "Version: 1.0\n", ""),
        stanza("cvg-a", "install ok unpacked", "Version: 1.0\n", ""),
        stanza("cvg-a", "install ok half-configured", "Version: 1.0\n", "Config-Version: 0.9\n"),
        stanza("cvg-a", "install ok triggers-pending", "Version: 1.0\n", "Triggers-Pending: ldconfig\n"),
        stanza("cvg-a", "hold ok installed", "Version: 0:1:2-3\n", ""),
        format!(
            "{}{}",
            stanza("cvg-b", "install ok installed", "Version: 1\n", "Depends: cvg-virtual\n"),
            stanza("cvg-a", "install ok installed", "Version: 1\n", "")
        ),
        String::new(),
    ];
    let refused = [
        stanza("cvg-a", "install ok installed", "Version: 0:1.0\n", ""),
        stanza("cvg-a", "install ok installed", "", ""),
        stanza("cvg-a", "install ok triggers-pending", "Version: 1.0\n", ""),
        stanza("cvg-a", "bogus ok installed", "Version: 1.0\n", ""),
        "Package: cvg-a\nStatus: install ok installed\nVersion: 1.0".to_owned(),
    ];
    // Names: one with an entry, one only depended on, one unknown.
    let names = ["cvg-a", "cvg-virtual", "cvg-zzz"];
    let mut compared = 0;
    for (i, status) in answered.iter().chain(refused.iter()).enumerate() {
        let root = tempfile::tempdir().unwrap();
        let db = root.path().join("var/lib/dpkg");
        std::fs::create_dir_all(db.join("updates")).unwrap();
        std::fs::write(db.join("status"), status).unwrap();
        let fs = converge_vm::rootfs::RootFs::open(root.path()).unwrap();
        let ours = dpkg_status::read(&fs, &names);
        if i < answered.len() {
            assert!(ours.is_some(), "not answered:\n{status}");
        } else {
            assert!(ours.is_none(), "answered:\n{status}");
            continue;
        }
        let ran = process::query(&apt::query(&names, Some(root.path()))).unwrap();
        assert!(matches!(ran.code, Some(0 | 1)), "{status}\n{ran:?}");
        let theirs = apt::parse_query(&ran.stdout);
        let ours = ours.unwrap();
        for name in names {
            let view = |k: Option<&converge_vm::backend::toolset::Known>| {
                k.map(|k| (k.installed(), k.present(), k.status.clone(), k.version.clone()))
                    .filter(|(_, present, status, _)| *present || status != "not-installed")
            };
            assert_eq!(
                view(ours.get(name)),
                view(theirs.get(name)),
                "{name} in:\n{status}\ndpkg-query: {}",
                ran.stdout
            );
            compared += 1;
        }
    }
    assert!(compared >= answered.len() * names.len());
}
