//! Tiny noarch `.rpm` packages for the rpm tests (the rpm row of
//! `tests/toolsets.rs`, the Red Hat cases of `tests/capture.rs`), built
//! with the real `rpmbuild`, and their installation into a sandbox root's
//! own database with the real `rpm`. Every rpm tool run here gets a
//! private `HOME` and names its database explicitly, so nothing lands in
//! the host's `~/.rpmdb` (Debian's rpm default) or `/var/lib/rpm`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The database of a Red Hat family root, as the toolset names it
/// (`vm/src/backend/toolset/rpm.rs`).
pub const DBPATH: &str = "/var/lib/rpm";

/// One package to build: `NAME-VERSION-RELEASE.noarch.rpm`.
#[derive(Clone, Copy, Debug)]
pub struct RpmSpec<'a> {
    pub name: &'a str,
    /// `[EPOCH:]VERSION`: the epoch becomes the spec's `Epoch:`.
    pub version: &'a str,
    pub release: &'a str,
    pub requires: Option<&'a str>,
    pub provides: Option<&'a str>,
    /// The body of a `%post` scriptlet (run chrooted into the root, so the
    /// root needs `/bin/sh`).
    pub post: Option<&'a str>,
    /// Whether the package holds a file (`/usr/share/NAME/README`, holding
    /// `NAME VERSION`); without one it is a package of no files, like a
    /// base system's metadata package.
    pub files: bool,
}

impl<'a> RpmSpec<'a> {
    /// A package of release 1 with one file, no dependency, no scriptlet.
    pub const fn new(name: &'a str, version: &'a str) -> RpmSpec<'a> {
        RpmSpec {
            name,
            version,
            release: "1",
            requires: None,
            provides: None,
            post: None,
            files: true,
        }
    }

    /// The version without its epoch.
    fn bare_version(&self) -> &'a str {
        self.version
            .split_once(':')
            .map_or(self.version, |(_, v)| v)
    }

    /// The package's file name.
    pub fn file_name(&self) -> String {
        format!(
            "{}-{}-{}.noarch.rpm",
            self.name,
            self.bare_version(),
            self.release
        )
    }

    /// The spec file `rpmbuild` reads (no automatic `Requires(post):
    /// /bin/sh`: a test root's shell belongs to no package unless one
    /// provides it).
    fn spec_text(&self) -> String {
        let mut head = String::new();
        if let Some((epoch, _)) = self.version.split_once(':') {
            head.push_str(&format!("Epoch: {epoch}\n"));
        }
        if let Some(r) = self.requires {
            head.push_str(&format!("Requires: {r}\n"));
        }
        if let Some(p) = self.provides {
            head.push_str(&format!("Provides: {p}\n"));
        }
        let mut body = String::new();
        if self.files {
            body.push_str(&format!(
                "%install\nmkdir -p %{{buildroot}}/usr/share/{n}\necho '{n} {v}' > %{{buildroot}}/usr/share/{n}/README\n%files\n/usr/share/{n}/README\n",
                n = self.name,
                v = self.version
            ));
        } else {
            body.push_str("%files\n");
        }
        if let Some(post) = self.post {
            body.push_str(&format!("%post\n{post}\n"));
        }
        format!(
            "Name: {}\nVersion: {}\nRelease: {}\nSummary: test package\nLicense: MIT\nBuildArch: noarch\n{head}%description\ntest package\n{body}",
            self.name,
            self.bare_version(),
            self.release
        )
    }

    /// Builds the package with `rpmbuild` into `out` and returns its path.
    pub fn build(&self, out: &Path) -> PathBuf {
        let top = tempfile::tempdir().unwrap();
        let spec_path = top.path().join("p.spec");
        std::fs::write(&spec_path, self.spec_text()).unwrap();
        // rpmbuild's scripts go to `_tmppath` (`/var/tmp` by default):
        // inside the build's own directory, so the host is not written.
        std::fs::create_dir_all(top.path().join("tmp")).unwrap();
        let st = Command::new("rpmbuild")
            .env("HOME", top.path())
            .arg("--define")
            .arg(format!("_topdir {}", top.path().display()))
            .arg("--define")
            .arg(format!("_tmppath {}/tmp", top.path().display()))
            .arg("--define")
            .arg(format!("_dbpath {}/db", top.path().display()))
            .arg("-bb")
            .arg(&spec_path)
            .output()
            .unwrap();
        assert!(st.status.success(), "rpmbuild: {st:?}");
        let name = self.file_name();
        let to = out.join(&name);
        std::fs::copy(top.path().join("RPMS/noarch").join(&name), &to).unwrap();
        to
    }
}

/// `rpm --root ROOT --dbpath /var/lib/rpm`, with a private `HOME` (kept
/// alive by the returned directory) whose `.rpmmacros` names the root's
/// database too, as the toolset does for dnf.
pub fn rpm_in_root(root: &Path) -> (Command, tempfile::TempDir) {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join(".rpmmacros"),
        format!("%_dbpath {DBPATH}\n"),
    )
    .unwrap();
    let mut cmd = Command::new("rpm");
    cmd.env("HOME", home.path())
        .arg("--root")
        .arg(root)
        .args(["--dbpath", DBPATH]);
    (cmd, home)
}

/// Installs package files into the root's database with `rpm -i`, as an
/// administrator would by hand (dnf's history does not know them, so
/// `dnf repoquery --userinstalled` counts them as installed on purpose).
/// `justdb`: record them without unpacking (a base system whose files are
/// already there).
pub fn install(root: &Path, files: &[PathBuf], justdb: bool) {
    std::fs::create_dir_all(root.join(DBPATH.trim_start_matches('/'))).unwrap();
    let (mut cmd, _home) = rpm_in_root(root);
    cmd.arg("-i");
    if justdb {
        cmd.arg("--justdb");
    }
    let st = cmd.arg("--").args(files).output().unwrap();
    assert!(st.status.success(), "rpm -i: {st:?}");
}
