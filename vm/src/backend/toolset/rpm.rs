//! The rpm toolset (the Red Hat family): `rpm` for the state, removals and
//! (with `manager = "rpm"`) local package files, `dnf` for the
//! repositories and local files with their dependencies.
//!
//! - state: ONE `rpm -qa --qf` (every installed package; a batch of 200
//!   names is one call, and no name is read as a pattern);
//! - candidates (for `latest`, and to fail an unknown package before the
//!   transaction): ONE `dnf repoquery --available --latest-limit=1`;
//! - install/upgrade from the repositories: ONE `dnf install`;
//! - local files (`rpm = "files/x.rpm"`): ONE `dnf install FILE...`
//!   (`rpm -U` with `manager = "rpm"`);
//! - removal: ONE `rpm -e`, which removes exactly what it is told and
//!   fails, with rpm's reason, when an installed package needs one of them
//!   (`dnf remove` would silently erase those too), as apt's `dpkg
//!   --remove` does;
//! - versions: `[EPOCH:]VERSION[-RELEASE]`, compared by rpm's rules
//!   ([`super::rpmvercmp`]).
//!
//! Under `--root DIR`: `rpm --root DIR --dbpath /var/lib/rpm` (the root's
//! database: Debian's rpm defaults to `~/.rpmdb`, a Red Hat host to
//! `/var/lib/rpm`), and `dnf --installroot=DIR --releasever=VERSION_ID`
//! (the root's os-release; the root has no release package), which reads
//! `DIR/etc/dnf/dnf.conf` and `DIR/etc/yum.repos.d` and keeps its cache,
//! logs and history in `DIR/var/{cache,log,lib}/dnf` (`cachedir` and
//! `logdir` are deliberately not set: set, they name host paths). dnf has
//! no option for rpm's database path, so every dnf call gets `HOME` set to
//! a private temporary directory whose `.rpmmacros` says `%_dbpath
//! /var/lib/rpm` (removed after the batch). libdnf itself creates and
//! removes a transient `/tmp/tmpdir.*` on the host. Scriptlets run
//! chrooted into the root: a package with scriptlets needs `/bin/sh`
//! there.

use std::cmp::Ordering;
use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use super::rpmvercmp::{compare_evr, matches, Evr};
use super::{IndexRefresh, Known, Need, OsRelease, ToolError, Toolset};
use crate::backend::process::{self, Cmd};
use crate::backend::sandbox;
use crate::outcome::Change;
use crate::rootfs::RootFs;

/// Reading state: `rpm -qa`, `dnf repoquery` (which may fetch metadata).
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(300);
/// Changing it: downloads and scriptlets may take a while, but not
/// forever.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(1800);

/// The root's rpm database, for rpm and dnf alike.
pub const DBPATH: &str = "/var/lib/rpm";

/// What `rpm -qa` prints per package.
const QUERY_FORMAT: &str = r"%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\n";

/// What `dnf repoquery` prints per package (dnf adds a newline).
const REPOQUERY_FORMAT: &str = r"%{name}\t%{epoch}\t%{version}\t%{release}";

/// The directories rpm and dnf write their own state into.
const ADMIN_DIRS: &[&str] = &[
    "/var/lib/rpm",
    "/var/lib/dnf",
    "/var/cache/dnf",
    "/var/log",
    "/etc/dnf",
    "/etc/yum.repos.d",
];

/// The rpm toolset: with dnf (`manager = "dnf"`, the Red Hat family's
/// default) or rpm alone (`manager = "rpm"`: local files and removals).
#[derive(Debug)]
pub struct Rpm {
    dnf: bool,
    /// dnf's `--releasever` under `--root`: the root's `VERSION_ID`.
    releasever: Option<String>,
    /// Why dnf cannot run under this root (no usable `VERSION_ID`): every
    /// dnf call fails with it, while rpm's own (the state query,
    /// removals) still run, so installed packages are kept.
    no_release: Option<String>,
    /// `update_cache_age`: dnf's `metadata_expire` for this batch.
    metadata_expire: Option<u64>,
    /// dnf's `HOME` (made on the first dnf call): its `.rpmmacros` names
    /// the root's database.
    home: OnceLock<Result<tempfile::TempDir, String>>,
}

impl Rpm {
    /// The toolset for a batch on `root`. dnf under a sandbox root needs
    /// the root's `VERSION_ID`; without one, only what needs dnf fails.
    pub fn new(root: &Path, release: &OsRelease, dnf: bool) -> Rpm {
        let (releasever, no_release) = match (sandbox(root), &release.version_id) {
            (Some(_), Some(v)) if version_id_ok(v) => (Some(v.clone()), None),
            (Some(_), _) if dnf => (
                None,
                Some(format!(
                    "dnf under --root needs the root's release (`--releasever`): {}/etc/os-release has no usable VERSION_ID",
                    root.display()
                )),
            ),
            _ => (None, None),
        };
        Rpm {
            dnf,
            releasever,
            no_release,
            metadata_expire: None,
            home: OnceLock::new(),
        }
    }

    /// A toolset whose commands can be built without a root (unit tests).
    pub fn for_tests(dnf: bool) -> Rpm {
        Rpm {
            dnf,
            releasever: None,
            no_release: None,
            metadata_expire: None,
            home: OnceLock::new(),
        }
    }

    /// `rpm [--root DIR] --dbpath /var/lib/rpm`.
    fn rpm(&self, root: Option<&Path>) -> Vec<String> {
        let mut argv = vec!["rpm".to_owned()];
        if let Some(r) = root {
            argv.push("--root".to_owned());
            argv.push(r.display().to_string());
        }
        argv.push("--dbpath".to_owned());
        argv.push(DBPATH.to_owned());
        argv
    }

    /// The private `HOME` of dnf calls, made once per batch. Every dnf
    /// call asks for it first, so a root dnf cannot run under fails here.
    fn home(&self) -> Result<PathBuf, String> {
        if let Some(why) = &self.no_release {
            return Err(why.clone());
        }
        let made = self.home.get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("converge-dnf-")
                .tempdir()
                .map_err(|e| format!("cannot make dnf's private HOME: {e}"))?;
            std::fs::write(dir.path().join(".rpmmacros"), macros())
                .map_err(|e| format!("cannot write dnf's .rpmmacros: {e}"))?;
            Ok(dir)
        });
        match made {
            Ok(dir) => Ok(dir.path().to_path_buf()),
            Err(e) => Err(e.clone()),
        }
    }

    /// `dnf --assumeyes [--installroot=DIR --releasever=V]
    /// [--setopt=metadata_expire=N] WORDS...`, with `HOME` at `home`.
    fn dnf_cmd(&self, root: Option<&Path>, home: &Path, words: &[&str], names: &[String]) -> Cmd {
        let mut argv = vec!["dnf".to_owned(), "--assumeyes".to_owned()];
        if let Some(r) = root {
            argv.push(format!("--installroot={}", r.display()));
        }
        if let Some(v) = &self.releasever {
            argv.push(format!("--releasever={v}"));
        }
        if let Some(age) = self.metadata_expire {
            argv.push(format!("--setopt=metadata_expire={age}"));
        }
        argv.extend(words.iter().map(|w| (*w).to_owned()));
        argv.push("--".to_owned());
        argv.extend(names.iter().cloned());
        let timeout = if words.first() == Some(&"repoquery") {
            QUERY_TIMEOUT
        } else {
            CHANGE_TIMEOUT
        };
        Cmd::new(&argv, timeout).env("HOME", &home.display().to_string())
    }

    /// `rpm -qa --qf ...`: every installed package, one call.
    pub fn query_cmd(&self, root: Option<&Path>) -> Cmd {
        let mut argv = self.rpm(root);
        argv.extend(["-qa", "--qf", QUERY_FORMAT].map(str::to_owned));
        Cmd::new(&argv, QUERY_TIMEOUT)
    }

    /// `dnf repoquery --available --latest-limit=1 -- NAME...`.
    pub fn repoquery_cmd(&self, names: &[String], root: Option<&Path>, home: &Path) -> Cmd {
        let format = format!("--queryformat={REPOQUERY_FORMAT}");
        self.dnf_cmd(
            root,
            home,
            &[
                "repoquery",
                "--quiet",
                "--available",
                "--latest-limit=1",
                &format,
            ],
            names,
        )
    }

    /// `rpm -e -- NAME...`.
    pub fn erase_cmd(&self, names: &[String], root: Option<&Path>) -> Cmd {
        let mut argv = self.rpm(root);
        argv.extend(["-e", "--"].map(str::to_owned));
        argv.extend(names.iter().cloned());
        Cmd::new(&argv, CHANGE_TIMEOUT)
    }

    /// `rpm -ql -- NAME` / `rpm -qlp -- FILE`: the files of an installed
    /// package or of a package file (read only).
    fn list_cmd(&self, what: &str, package_file: bool, root: Option<&Path>) -> Cmd {
        let mut argv = self.rpm(root);
        argv.push(if package_file { "-qlp" } else { "-ql" }.to_owned());
        argv.push("--".to_owned());
        argv.push(what.to_owned());
        Cmd::new(&argv, QUERY_TIMEOUT)
    }
}

/// The `.rpmmacros` of dnf's private `HOME`.
pub fn macros() -> String {
    format!("%_dbpath {DBPATH}\n")
}

/// A `VERSION_ID` dnf may take as `--releasever` (it becomes part of an
/// argument and of repository URLs).
fn version_id_ok(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
}

/// `E:V-R`, the epoch left out when it is 0 (as dnf writes it).
fn evr_text(epoch: &str, version: &str, release: &str) -> String {
    match epoch {
        "" | "0" | "(none)" => format!("{version}-{release}"),
        e => format!("{e}:{version}-{release}"),
    }
}

/// Whether `a` is newer than `b` (both `E:V-R` text).
fn newer(a: &str, b: &str) -> bool {
    match (Evr::parse(a), Evr::parse(b)) {
        (Some(x), Some(y)) => compare_evr(&x, &y) == Ordering::Greater,
        _ => false,
    }
}

/// Parses `rpm -qa --qf` (or `dnf repoquery`) lines, `NAME\tEPOCH\tVERSION
/// \tRELEASE`: each package of `wanted` (all when `None`) at its newest
/// version (a name may be installed in several versions, like kernels).
pub fn parse_versions(stdout: &str, wanted: Option<&[&str]>) -> HashMap<String, String> {
    let mut out: HashMap<String, String> = HashMap::new();
    for line in stdout.lines() {
        let mut f = line.split('\t');
        let (Some(name), Some(epoch), Some(version), Some(release)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if wanted.is_some_and(|w| !w.contains(&name)) {
            continue;
        }
        let evr = evr_text(epoch, version, release);
        let better = out.get(name).is_none_or(|old| newer(&evr, old));
        if better {
            out.insert(name.to_owned(), evr);
        }
    }
    out
}

/// Why `name` cannot be an rpm package name handed to rpm and dnf: rpm
/// names are letters, digits and `._+-`, starting with a letter or digit;
/// dnf reads `@name` as a group or module.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if !name.starts_with(|c: char| c.is_ascii_alphanumeric()) {
        Some("rpm package names start with a letter or digit")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c))
    {
        Some("rpm package names are letters, digits and `._+-` (dnf reads `@` and `:` as groups and epochs)")
    } else {
        None
    }
}

/// Why `version` cannot be an rpm `[EPOCH:]VERSION[-RELEASE]`.
pub fn version_problem(version: &str) -> Option<&'static str> {
    let part_ok = |p: &str| {
        p.starts_with(|c: char| c.is_ascii_alphanumeric())
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._+~^".contains(c))
    };
    if version.is_empty() || version.len() > 255 {
        return Some("it is empty or longer than 255 bytes");
    }
    match Evr::parse(version) {
        None => Some("the epoch before `:` is not a number"),
        Some(e) if !part_ok(e.version) || !e.release.is_none_or(part_ok) => Some(
            "an rpm version is `[EPOCH:]VERSION[-RELEASE]`, each part letters, digits and `._+~^`, starting with a letter or digit",
        ),
        Some(_) => None,
    }
}

/// The directories of a file list (`rpm -ql` output: absolute paths),
/// sorted, each once.
pub fn listed_dirs(listing: &str) -> Vec<String> {
    let dirs: BTreeSet<String> = listing
        .lines()
        .filter(|l| l.starts_with('/'))
        .filter_map(|f| f.rsplit_once('/').map(|(d, _)| d.to_owned()))
        .filter(|d| !d.is_empty())
        .collect();
    dirs.into_iter().collect()
}

fn run_ok(cmd: &Cmd) -> Result<String, ToolError> {
    let ran = process::run(cmd)?;
    if ran.ok() {
        Ok(ran.stdout)
    } else {
        Err(ToolError(ran.failure()))
    }
}

impl Toolset for Rpm {
    fn name(&self) -> &'static str {
        if self.dnf {
            "dnf"
        } else {
            "rpm"
        }
    }

    fn file_attr(&self) -> &'static str {
        "rpm"
    }

    fn name_problem(&self, name: &str) -> Option<&'static str> {
        name_problem(name)
    }

    fn version_problem(&self, version: &str) -> Option<&'static str> {
        version_problem(version)
    }

    fn query(
        &self,
        names: &[&str],
        root: Option<&Path>,
    ) -> Result<HashMap<String, Known>, ToolError> {
        if names.is_empty() {
            return Ok(HashMap::new());
        }
        let out = run_ok(&self.query_cmd(root))?;
        Ok(parse_versions(&out, Some(names))
            .into_iter()
            .map(|(name, version)| {
                let known = Known {
                    status: "installed".to_owned(),
                    version,
                };
                (name, known)
            })
            .collect())
    }

    fn candidates(
        &self,
        names: &[&str],
        root: Option<&Path>,
    ) -> Result<HashMap<String, Option<String>>, ToolError> {
        if !self.dnf {
            // rpm alone has no repositories: nothing is a candidate.
            return Ok(HashMap::new());
        }
        let home = self.home()?;
        let names: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
        let out = run_ok(&self.repoquery_cmd(&names, root, &home))?;
        let wanted: Vec<&str> = names.iter().map(String::as_str).collect();
        Ok(parse_versions(&out, Some(&wanted))
            .into_iter()
            .map(|(name, evr)| (name, Some(evr)))
            .collect())
    }

    fn spec(&self, name: &str, version: Option<&str>) -> String {
        match version {
            Some(v) => format!("{name}-{v}"),
            None => name.to_owned(),
        }
    }

    /// `dnf install NAME` leaves an installed package alone: the
    /// candidate is named exactly (`NAME-E:V-R`).
    fn latest_spec(&self, name: &str, candidate: &str) -> String {
        format!("{name}-{candidate}")
    }

    fn install(&self, specs: &[String], root: Option<&Path>) -> Result<Cmd, String> {
        if !self.dnf {
            return Err(
                "`manager = \"rpm\"` installs only package files (`rpm = \"files/x.rpm\"`): rpm alone has no repositories; use `manager = \"dnf\"`".to_owned(),
            );
        }
        Ok(self.dnf_cmd(root, &self.home()?, &["install"], specs))
    }

    fn install_files(&self, files: &[String], root: Option<&Path>) -> Result<Cmd, String> {
        if self.dnf {
            return Ok(self.dnf_cmd(root, &self.home()?, &["install"], files));
        }
        let mut argv = self.rpm(root);
        argv.extend(["-U", "--"].map(str::to_owned));
        argv.extend(files.iter().cloned());
        Ok(Cmd::new(&argv, CHANGE_TIMEOUT))
    }

    fn remove(&self, names: &[String], root: Option<&Path>) -> Cmd {
        self.erase_cmd(names, root)
    }

    fn version_matches(&self, installed: &str, wanted: &str) -> bool {
        match (Evr::parse(installed), Evr::parse(wanted)) {
            (Some(i), Some(w)) => matches(&i, &w),
            _ => false,
        }
    }

    fn upgrades(&self, candidate: &str, installed: &str) -> bool {
        newer(candidate, installed)
    }

    /// dnf: `dnf repoquery --userinstalled` (its history database's
    /// reasons); rpm alone records no reason: every installed package.
    fn manual_packages(&self, root: Option<&Path>) -> Result<Vec<String>, ToolError> {
        let out = if self.dnf {
            let home = self.home()?;
            let format = "--queryformat=%{name}".to_owned();
            run_ok(&self.dnf_cmd(
                root,
                &home,
                &["repoquery", "--quiet", "--userinstalled", &format],
                &[],
            ))?
        } else {
            let mut argv = self.rpm(root);
            argv.extend(["-qa", "--qf", r"%{NAME}\n"].map(str::to_owned));
            run_ok(&Cmd::new(&argv, QUERY_TIMEOUT))?
        };
        let names: BTreeSet<String> = out
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect();
        Ok(names.into_iter().collect())
    }

    /// dnf refreshes its metadata itself when it is older than
    /// `metadata_expire`: every dnf call of the batch gets the age.
    fn refresh(
        &mut self,
        _fs: &RootFs,
        _dry_run: bool,
        max_age: u64,
        _done: &mut IndexRefresh,
    ) -> Result<Option<(Change, String)>, String> {
        self.metadata_expire = Some(max_age);
        Ok(None)
    }

    /// rpm's and dnf's state directories, the top-level directories
    /// packages go to and, for a package file or a removal, every
    /// directory of its file list (`rpm -qlp`, `rpm -ql`).
    fn contained(
        &self,
        fs: &RootFs,
        name: &str,
        need: &Need,
        file: Option<&str>,
    ) -> Result<(), String> {
        let tool = if self.dnf && matches!(need, Need::Repo(_) | Need::File(_)) {
            "`dnf`"
        } else {
            "`rpm`"
        };
        let root = sandbox(fs.path());
        crate::backend::contain::check_all(
            fs,
            ADMIN_DIRS.iter().chain(super::apt::PACKAGE_TOPS).copied(),
            tool,
        )?;
        let (list, whose) = match need {
            Need::Remove => (
                self.list_cmd(name, false, root),
                format!("it holds files of `{name}`"),
            ),
            Need::File(path) => (
                self.list_cmd(path, true, root),
                format!("it is in the file list of {}", file.unwrap_or(path)),
            ),
            _ => return Ok(()),
        };
        let listing = run_ok(&list).map_err(|e| e.0)?;
        let dirs = listed_dirs(&listing);
        crate::backend::contain::check_all(fs, dirs.iter().map(String::as_str), tool)
            .map_err(|why| format!("{why} ({whose})"))
    }

    fn no_candidate(&self, name: &str) -> String {
        if self.dnf {
            format!(
                "no installation candidate for package `{name}`: it is in none of the enabled dnf repositories (`dnf repoquery --available` lists none); give an `rpm` file or add the repository"
            )
        } else {
            format!(
                "package `{name}` is not installed and `manager = \"rpm\"` has no repositories: give an `rpm` file or use `manager = \"dnf\"`"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rpm_commands_name_the_roots_database() {
        let t = Rpm::for_tests(true);
        let root = Some(Path::new("/r"));
        assert_eq!(
            t.query_cmd(root).shown(),
            r"rpm --root /r --dbpath /var/lib/rpm -qa --qf '%{NAME}\t%{EPOCHNUM}\t%{VERSION}\t%{RELEASE}\n'"
        );
        assert_eq!(
            t.erase_cmd(&["a".into(), "b".into()], None).argv,
            ["rpm", "--dbpath", "/var/lib/rpm", "-e", "--", "a", "b"]
        );
        let plain = Rpm::for_tests(false);
        let file = plain.install_files(&["/tmp/x.rpm".into()], root).unwrap();
        assert_eq!(
            file.argv,
            [
                "rpm",
                "--root",
                "/r",
                "--dbpath",
                "/var/lib/rpm",
                "-U",
                "--",
                "/tmp/x.rpm"
            ]
        );
        assert!(plain
            .install(&["a".into()], root)
            .unwrap_err()
            .contains("no repositories"));
    }

    #[test]
    fn dnf_commands_get_the_root_the_release_and_a_private_home() {
        let mut t = Rpm::new(
            Path::new("/r"),
            &OsRelease::parse("ID=rocky\nVERSION_ID=\"9.3\"\n"),
            true,
        );
        t.metadata_expire = Some(60);
        let cmd = t
            .install(&["alpha".into(), "beta-1.0".into()], Some(Path::new("/r")))
            .unwrap();
        assert_eq!(
            cmd.argv,
            [
                "dnf",
                "--assumeyes",
                "--installroot=/r",
                "--releasever=9.3",
                "--setopt=metadata_expire=60",
                "install",
                "--",
                "alpha",
                "beta-1.0"
            ]
        );
        // No cachedir or logdir: set, they would name host paths.
        assert!(!cmd.shown().contains("cachedir") && !cmd.shown().contains("logdir"));
        let home = cmd
            .env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(home.join(".rpmmacros")).unwrap(),
            "%_dbpath /var/lib/rpm\n"
        );
        let q = t.repoquery_cmd(&["alpha".into()], Some(Path::new("/r")), &home);
        assert!(
            q.shown()
                .contains("repoquery --quiet --available --latest-limit=1"),
            "{}",
            q.shown()
        );
        // Without VERSION_ID, dnf cannot run under a root; rpm's own
        // query still can.
        let bare = Rpm::new(Path::new("/r"), &OsRelease::parse("ID=rocky\n"), true);
        let err = bare
            .install(&["a".into()], Some(Path::new("/r")))
            .unwrap_err();
        assert!(err.contains("VERSION_ID"), "{err}");
        assert!(bare.candidates(&["a"], Some(Path::new("/r"))).is_err());
        assert!(bare.manual_packages(Some(Path::new("/r"))).is_err());
        assert!(bare
            .query_cmd(Some(Path::new("/r")))
            .shown()
            .starts_with("rpm --root /r"));
        let host = Rpm::new(Path::new("/"), &OsRelease::parse("ID=rocky\n"), true);
        assert!(host.home().is_ok());
    }

    #[test]
    fn versions_are_parsed_and_the_newest_kept() {
        let out = "kernel\t0\t5.14.0\t362.el9\nkernel\t0\t5.14.0\t70.el9\n\
                   gamma\t2\t3.0\t1\nother\t0\t1\t1\n\n";
        let v = parse_versions(out, Some(&["kernel", "gamma"]));
        assert_eq!(v.get("kernel").map(String::as_str), Some("5.14.0-362.el9"));
        assert_eq!(v.get("gamma").map(String::as_str), Some("2:3.0-1"));
        assert!(!v.contains_key("other"));
        let t = Rpm::for_tests(true);
        assert!(t.version_matches("2:3.0-1", "3.0"));
        assert!(t.version_matches("2:3.0-1", "2:3.0-1"));
        assert!(!t.version_matches("2:3.0-1", "3.0-2"));
        assert!(t.upgrades("1:0.1-1", "9.0-1"));
        assert!(!t.upgrades("1.0-1", "1.0-1"));
    }

    #[test]
    fn names_and_versions() {
        for ok in [
            "bash",
            "python3.11",
            "gcc-c++",
            "NetworkManager",
            "perl-Foo_Bar",
        ] {
            assert_eq!(name_problem(ok), None, "{ok}");
        }
        for bad in ["@core", "-x", ".x", "a:b", "a b"] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
        for ok in ["1.0", "2:3.0-1.el9", "1.0~rc1^git2-0.1"] {
            assert_eq!(version_problem(ok), None, "{ok}");
        }
        for bad in ["", "x:1.0", "1.0-", "1 0", "1.0;id", "-1"] {
            assert!(version_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn file_lists_give_directories() {
        assert_eq!(
            listed_dirs("/usr/share/a/README\n/etc/a.conf\n(contains no files)\n"),
            ["/etc", "/usr/share/a"]
        );
    }
}
