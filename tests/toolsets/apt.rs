//! The apt row of the scenario table (`tests/toolsets.rs`): a Debian-like
//! root (empty dpkg database, apt's directories, `ID=debian`) whose only
//! source is a flat `file:` repository of `.deb`s built with `dpkg-deb` and
//! indexed with `dpkg-scanpackages`, as in `tests/packages.rs` and
//! `tests/apt_update.rs`.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use ::converge::{debs, support};

use super::{Fixture, Pkg};

pub struct AptFixture {
    root: tempfile::TempDir,
    repo: tempfile::TempDir,
}

/// One package of the scenario table as a `.deb` in `out` (its postinst
/// writes `/var/lib/NAME.installed`).
fn build_deb(out: &Path, p: &Pkg) -> PathBuf {
    let script = format!("echo installed > /var/lib/{}.installed", p.name);
    debs::build_deb(
        out,
        p.name,
        p.version,
        p.requires,
        p.script.then_some(script.as_str()),
    )
}

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

impl AptFixture {
    pub fn new() -> AptFixture {
        let root = tempfile::tempdir().unwrap();
        let p = root.path();
        for d in [
            "var/lib/dpkg/info",
            "var/lib/dpkg/updates",
            "var/lib/dpkg/triggers",
            "etc/apt/sources.list.d",
            "etc/apt/apt.conf.d",
            "etc/apt/preferences.d",
            "var/lib/apt/lists/partial",
            "var/cache/apt/archives/partial",
            "var/log/apt",
            "pkgs",
        ] {
            std::fs::create_dir_all(p.join(d)).unwrap();
        }
        std::fs::write(p.join("var/lib/dpkg/status"), "").unwrap();
        std::fs::write(p.join("var/lib/dpkg/available"), "").unwrap();
        std::fs::write(p.join("etc/os-release"), "ID=debian\nVERSION_ID=12\n").unwrap();
        support::root_with_a_shell(p);
        let repo = tempfile::tempdir().unwrap();
        // apt reads file: repositories as its sandbox user.
        std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            p.join("etc/apt/sources.list"),
            format!("deb [trusted=yes] file:{} ./\n", repo.path().display()),
        )
        .unwrap();
        AptFixture { root, repo }
    }
}

impl Fixture for AptFixture {
    fn require(&self) {
        support::require_root("dpkg --root, userdel -R");
        support::require_tool("userdel", "passwd");
        support::require_tool("dpkg-scanpackages", "dpkg-dev");
    }

    fn root(&self) -> &Path {
        self.root.path()
    }

    fn publish(&mut self, pkgs: &[Pkg]) {
        for p in pkgs {
            build_deb(self.repo.path(), p);
        }
        let scan = Command::new("dpkg-scanpackages")
            .args(["--multiversion", "."])
            .current_dir(self.repo.path())
            .output()
            .unwrap();
        assert!(scan.status.success(), "{scan:?}");
        std::fs::write(self.repo.path().join("Packages"), scan.stdout).unwrap();
        let out = Command::new("apt-get")
            .args(apt_opts(self.root.path()))
            .args(["-q", "update"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    fn local_file(&self, _tree: &Path, p: &Pkg) -> String {
        let deb = build_deb(&self.root.path().join("pkgs"), p);
        format!(
            "deb = \"/pkgs/{}\"",
            deb.file_name().unwrap().to_string_lossy()
        )
    }

    /// `dpkg --install` by hand: apt never marked them automatic, so
    /// `apt-mark showmanual` lists them.
    fn plant(&self, pkgs: &[Pkg]) {
        let dir = tempfile::tempdir().unwrap();
        let debs: Vec<PathBuf> = pkgs.iter().map(|p| build_deb(dir.path(), p)).collect();
        let out = debs::dpkg_in_root(self.root.path())
            .arg("--install")
            .args(&debs)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    fn installed(&self) -> Vec<String> {
        let out = Command::new("dpkg-query")
            .arg(format!("--root={}", self.root.path().display()))
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

    fn show(&self, version: &str) -> String {
        version.to_owned()
    }

    fn host_state(&self) -> Vec<PathBuf> {
        [
            "/var/lib/dpkg/status",
            "/var/lib/apt/extended_states",
            "/var/log/apt",
            "/var/cache/apt/archives",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect()
    }

    fn installers(&self) -> &'static [&'static str] {
        &["apt-get", "apt-cache", "dpkg"]
    }

    fn query_tool(&self) -> &'static str {
        "dpkg-query"
    }

    fn manual_query(&self) -> (&'static str, &'static str) {
        ("apt-mark", "showmanual")
    }
}
