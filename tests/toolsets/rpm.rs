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

use ::converge::support;

use super::{Fixture, Pkg};

/// A package's name and version, for [`build_rpm_spec`].
struct Named {
    name: &'static str,
    version: &'static str,
}

impl From<Pkg> for Named {
    fn from(p: Pkg) -> Named {
        Named {
            name: p.name,
            version: p.version,
        }
    }
}

impl From<&'static str> for Named {
    fn from(name: &'static str) -> Named {
        Named {
            name,
            version: "1.0",
        }
    }
}

pub struct RpmFixture {
    root: tempfile::TempDir,
    repo: tempfile::TempDir,
    /// HOME of the fixture's own rpm tools, its `.rpmmacros` naming the
    /// root's database (as the toolset does for dnf).
    home: tempfile::TempDir,
}

/// Builds `pkg` with `rpmbuild` into `out`: release 1, noarch, one file
/// under `/usr/share/NAME`, a `Requires`, an epoch, a `%post` scriptlet
/// (no automatic `Requires(post): /bin/sh`: the root's shell belongs to no
/// package).
pub fn build_rpm(out: &Path, p: &Pkg) -> PathBuf {
    let epoch = p.version.split_once(':').map(|(e, _)| e);
    let mut head = String::new();
    if let Some(e) = epoch {
        head.push_str(&format!("Epoch: {e}\n"));
    }
    if let Some(r) = p.requires {
        head.push_str(&format!("Requires: {r}\n"));
    }
    let mut body = format!(
        "%install\nmkdir -p %{{buildroot}}/usr/share/{n}\necho '{n} {v}' > %{{buildroot}}/usr/share/{n}/README\n%files\n/usr/share/{n}/README\n",
        n = p.name,
        v = p.version
    );
    if p.script {
        body.push_str(&format!(
            "%post\necho installed > /var/lib/{}.installed\n",
            p.name
        ));
    }
    build_rpm_spec(out, *p, &head, &body)
}

/// The package of the root's base system (filtered out of `installed`).
const BASE: &str = "cvg-base";

/// Builds `NAME-VERSION-1.noarch.rpm` from the spec's header lines `head`
/// and sections `body` (none: a package of no files).
fn build_rpm_spec(out: &Path, p: impl Into<Named>, head: &str, body: &str) -> PathBuf {
    let p: Named = p.into();
    let top = tempfile::tempdir().unwrap();
    let version = p.version.split_once(':').map_or(p.version, |(_, v)| v);
    let mut spec = format!(
        "Name: {}\nVersion: {version}\nRelease: 1\nSummary: test package\nLicense: MIT\nBuildArch: noarch\n{head}%description\ntest package\n{body}",
        p.name
    );
    if body.is_empty() {
        spec.push_str("%files\n");
    }
    let spec_path = top.path().join("p.spec");
    std::fs::write(&spec_path, spec).unwrap();
    let st = Command::new("rpmbuild")
        .env("HOME", top.path())
        .arg("--define")
        .arg(format!("_topdir {}", top.path().display()))
        .arg("--define")
        .arg(format!("_dbpath {}/db", top.path().display()))
        .arg("-bb")
        .arg(&spec_path)
        .output()
        .unwrap();
    assert!(st.status.success(), "{st:?}");
    let name = format!("{}-{version}-1.noarch.rpm", p.name);
    let to = out.join(&name);
    std::fs::copy(top.path().join("RPMS/noarch").join(&name), &to).unwrap();
    to
}

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
        std::fs::write(home.path().join(".rpmmacros"), "%_dbpath /var/lib/rpm\n").unwrap();
        // The root's base system: the shell copied in above, as the
        // package that provides it (scriptlets require `/bin/sh`).
        let base = tempfile::tempdir().unwrap();
        let file = build_rpm_spec(base.path(), BASE, "Provides: /bin/sh\n", "");
        let st = Command::new("rpm")
            .env("HOME", home.path())
            .arg("--root")
            .arg(p)
            .args(["--dbpath", "/var/lib/rpm", "-i", "--justdb", "--"])
            .arg(&file)
            .output()
            .unwrap();
        assert!(st.status.success(), "{st:?}");
        RpmFixture { root, repo, home }
    }
}

impl Fixture for RpmFixture {
    fn require(&self) {
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

    fn installed(&self) -> Vec<String> {
        let out = Command::new("rpm")
            .env("HOME", self.home.path())
            .arg("--root")
            .arg(self.root.path())
            .args(["--dbpath", "/var/lib/rpm", "-qa", "--qf"])
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

    fn converged_queries(&self) -> usize {
        1
    }
}
