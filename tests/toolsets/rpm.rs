//! The rpm row of the scenario table (`tests/toolsets.rs`): a Rocky-like
//! root (`/etc/os-release` a link to `/usr/lib/os-release`: `ID="rocky"`, `ID_LIKE="rhel centos fedora"`, `VERSION_ID="9.3"`,
//! an empty `/var/lib/rpm`, `/bin/sh` for scriptlets) whose only
//! repository is a local one (`file://` baseurl in
//! `ROOT/etc/yum.repos.d`) of noarch packages built with `rpmbuild` at test
//! time and indexed with `createrepo_c`. Every rpm tool the fixture runs
//! gets a private `HOME`, so that nothing of it lands in the host's
//! `~/.rpmdb`.

use std::path::{Path, PathBuf};
use std::process::Command;

use ::converge::rpms::{self, RpmSpec};
use ::converge::support;

use super::{Fixture, Pkg};

pub struct RpmFixture {
    root: tempfile::TempDir,
    repo: tempfile::TempDir,
    /// HOME of the fixture's own dnf, its `.rpmmacros` naming the root's
    /// database (as the toolset does for dnf).
    home: tempfile::TempDir,
}

/// The script of a package with a scriptlet: it writes
/// `/var/lib/NAME.installed` inside the root.
fn post(p: &Pkg) -> String {
    format!("echo installed > /var/lib/{}.installed", p.name)
}

/// Builds `pkg` with `rpmbuild` into `out`: release 1, noarch, one file
/// under `/usr/share/NAME`, a `Requires`, an epoch, a `%post` scriptlet.
pub fn build_rpm(out: &Path, p: &Pkg) -> PathBuf {
    let script = post(p);
    RpmSpec {
        requires: p.requires,
        post: p.script.then_some(script.as_str()),
        ..RpmSpec::new(p.name, p.version)
    }
    .build(out)
}

/// The package of the root's base system (filtered out of `installed`).
const BASE: &str = "cvg-base";

impl RpmFixture {
    pub fn new() -> RpmFixture {
        let root = tempfile::tempdir().unwrap();
        let p = root.path();
        for d in ["etc/yum.repos.d", "var/lib/rpm", "usr/lib"] {
            std::fs::create_dir_all(p.join(d)).unwrap();
        }
        // As on Rocky: /etc/os-release is a link into /usr/lib.
        std::os::unix::fs::symlink("../usr/lib/os-release", p.join("etc/os-release")).unwrap();
        std::fs::write(
            p.join("usr/lib/os-release"),
            "NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.3\"\n",
        )
        .unwrap();
        support::root_with_a_shell(p);
        let repo = tempfile::tempdir().unwrap();
        std::fs::write(
            p.join("etc/yum.repos.d/local.repo"),
            format!(
                "[local]\nname=local\nbaseurl=file://{}\nenabled=1\ngpgcheck=0\n",
                repo.path().display()
            ),
        )
        .unwrap();
        let home = tempfile::tempdir().unwrap();
        std::fs::write(
            home.path().join(".rpmmacros"),
            format!("%_dbpath {}\n", rpms::DBPATH),
        )
        .unwrap();
        // The root's base system: the shell copied in above, as the
        // package that provides it (scriptlets require `/bin/sh`).
        let base = tempfile::tempdir().unwrap();
        let file = RpmSpec {
            provides: Some("/bin/sh"),
            files: false,
            ..RpmSpec::new(BASE, "1.0")
        }
        .build(base.path());
        rpms::install(p, &[file], true);
        RpmFixture { root, repo, home }
    }
}

impl Fixture for RpmFixture {
    fn require(&self) {
        support::require_root("rpm --root runs scriptlets chrooted; userdel -R");
        support::require_tool("userdel", "passwd");
        support::require_tool("rpm", "rpm");
        support::require_tool("rpmbuild", "rpm");
        support::require_tool("dnf", "dnf");
        support::require_tool("createrepo_c", "createrepo-c");
    }

    fn root(&self) -> &Path {
        self.root.path()
    }

    fn publish(&mut self, pkgs: &[Pkg]) {
        for p in pkgs {
            build_rpm(self.repo.path(), p);
        }
        let st = Command::new("createrepo_c")
            .arg("--quiet")
            .arg(self.repo.path())
            .output()
            .unwrap();
        assert!(st.status.success(), "{st:?}");
        let st = Command::new("dnf")
            .env("HOME", self.home.path())
            .arg(format!("--installroot={}", self.root.path().display()))
            .args(["--releasever=9.3", "--quiet", "makecache", "--refresh"])
            .output()
            .unwrap();
        assert!(st.status.success(), "{st:?}");
    }

    fn local_file(&self, tree: &Path, p: &Pkg) -> String {
        let file = build_rpm(tree, p);
        format!("rpm = \"{}\"", file.file_name().unwrap().to_string_lossy())
    }

    fn plant(&self, pkgs: &[Pkg]) {
        let dir = tempfile::tempdir().unwrap();
        let files: Vec<PathBuf> = pkgs.iter().map(|p| build_rpm(dir.path(), p)).collect();
        rpms::install(self.root.path(), &files, false);
    }

    fn installed(&self) -> Vec<String> {
        let (mut rpm, _home) = rpms::rpm_in_root(self.root.path());
        let out = rpm
            .args(["-qa", "--qf"])
            .arg("%{NAME} %|EPOCH?{%{EPOCH}:}:{}|%{VERSION}-%{RELEASE}\\n")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let mut v: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.starts_with(&format!("{BASE} ")))
            .map(str::to_owned)
            .collect();
        v.sort();
        v
    }

    fn show(&self, version: &str) -> String {
        format!("{version}-1")
    }

    fn host_state(&self) -> Vec<PathBuf> {
        // The tools' HOME under policyvm is /root (vm/src/backend/process.rs).
        [
            "/root/.rpmdb",
            "/var/lib/rpm",
            "/var/lib/dnf",
            "/var/cache/dnf",
            "/var/log/dnf.log",
            "/var/log/dnf.rpm.log",
            "/var/log/dnf.librepo.log",
            "/var/log/hawkey.log",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect()
    }

    fn installers(&self) -> &'static [&'static str] {
        &["dnf"]
    }

    fn query_tool(&self) -> &'static str {
        "rpm"
    }

    fn manual_query(&self) -> (&'static str, &'static str) {
        ("dnf", "--userinstalled")
    }
}
