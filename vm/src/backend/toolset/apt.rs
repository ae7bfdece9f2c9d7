//! The apt toolset (the Debian family): the commands of dpkg and apt, as
//! data, the parsers of their output, and [`Apt`], their [`Toolset`].
//! [`crate::backend::packages`] decides which to run.
//!
//! - state: `dpkg-query -W` over every package of the pass at once;
//! - candidates (for `latest`, and to fail an unknown package before the
//!   batch): `apt-cache policy`;
//! - install from the configured repositories: `apt-get install`;
//! - install a `.deb` named by `deb`: `dpkg --install`;
//! - remove: `dpkg --remove`, which never removes anything but what it is
//!   told to (`apt-get remove` would also remove every package that
//!   depends on it);
//! - refresh the index (`update_cache_age`): `apt-get update`, when the
//!   newest file of `/var/lib/apt/lists` is older than asked ([`stale`]).
//!
//! Under `--root DIR` dpkg gets `--root=DIR` (maintainer scripts run
//! chrooted into the root, never on the host), and apt gets `Dir=DIR/`
//! and `DPkg::Options::=--root=DIR`, so it reads the root's sources,
//! lists, cache and dpkg database and hands the root to dpkg.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use super::{ask, IndexRefresh, Known, Need, ToolError, Toolset};
use crate::backend::process::{self, Cmd};
use crate::backend::{change, sandbox};
use crate::outcome::Change;
use crate::rootfs::{Kind, RootFs};

/// Reading state: `dpkg-query`, `apt-cache`.
pub const QUERY_TIMEOUT: Duration = Duration::from_secs(120);
/// Changing it: downloads and maintainer scripts may take a while, but not
/// forever.
pub const CHANGE_TIMEOUT: Duration = Duration::from_secs(1800);

/// The environment of every command that may change packages: no prompt,
/// no pager, no list of changes mailed or shown.
const QUIET_ENV: &[(&str, &str)] = &[
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("APT_LISTCHANGES_FRONTEND", "none"),
    ("APT_LISTBUGS_FRONTEND", "none"),
];

/// dpkg options for unattended runs: keep a locally changed conffile, take
/// the default answer otherwise, never ask.
const DPKG_QUIET: &[&str] = &["--force-confdef", "--force-confold"];

fn quiet(mut cmd: Cmd) -> Cmd {
    for (k, v) in QUIET_ENV {
        cmd = cmd.env(k, v);
    }
    cmd
}

fn dpkg_root(program: &str, root: Option<&Path>) -> Vec<String> {
    let mut argv = vec![program.to_owned()];
    if let Some(r) = root {
        argv.push(format!("--root={}", r.display()));
    }
    argv
}

/// `--log=ROOT/var/log/dpkg.log` under `--root`: dpkg reads its
/// configuration, and with it the `log` line of Debian's
/// `/etc/dpkg/dpkg.cfg`, from the host, so with `--root` alone it appends
/// the root's changes to the HOST's `/var/log/dpkg.log`. The root's own
/// log instead (dpkg creates the file; `/var/log` is checked with the
/// other state directories, [`ADMIN_DIRS`]).
fn dpkg_log(root: Option<&Path>) -> Option<String> {
    root.map(|r| format!("--log={}/var/log/dpkg.log", r.display()))
}

/// apt's options: unattended, and pointed at the root.
fn apt_options(root: Option<&Path>) -> Vec<String> {
    let mut opts: Vec<String> = Vec::new();
    let mut set = |o: String| {
        opts.push("-o".to_owned());
        opts.push(o);
    };
    if let Some(r) = root {
        let r = r.display();
        set(format!("Dir={r}/"));
        set(format!("Dir::State::status={r}/var/lib/dpkg/status"));
        set("Dir::Bin::dpkg=dpkg".to_owned());
        set(format!("DPkg::Options::=--root={r}"));
    }
    if let Some(log) = dpkg_log(root) {
        set(format!("DPkg::Options::={log}"));
    }
    for o in DPKG_QUIET {
        set(format!("DPkg::Options::={o}"));
    }
    set("DPkg::Use-Pty=0".to_owned());
    // Wait for another package manager to finish instead of failing.
    set("DPkg::Lock::Timeout=120".to_owned());
    opts
}

/// The fields `dpkg-query` prints per package: name, name with
/// architecture, status (`install ok installed`), version.
const QUERY_FORMAT: &str = r"${Package}\t${binary:Package}\t${Status}\t${Version}\n";

/// `dpkg-query [--root=DIR] -W --showformat=... -- NAME...`: one call for
/// every package. Exit status 1 only means some name is not known.
pub fn query(names: &[&str], root: Option<&Path>) -> Cmd {
    let mut argv = dpkg_root("dpkg-query", root);
    argv.push("-W".to_owned());
    argv.push(format!("--showformat={QUERY_FORMAT}"));
    argv.push("--".to_owned());
    argv.extend(names.iter().map(|n| (*n).to_owned()));
    Cmd::new(&argv, QUERY_TIMEOUT)
}

/// Parses `dpkg-query` output into the state of each package, under both
/// its name and its `name:arch`. A package known in several architectures
/// counts as installed when one of them is.
pub fn parse_query(stdout: &str) -> HashMap<String, Known> {
    let mut out: HashMap<String, Known> = HashMap::new();
    for line in stdout.lines() {
        let mut f = line.split('\t');
        let (Some(name), Some(arch_name), Some(status), Some(version)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let known = Known {
            status: status.split(' ').nth(2).unwrap_or("").to_owned(),
            version: version.to_owned(),
        };
        for key in [name, arch_name] {
            let better = out
                .get(key)
                .is_none_or(|k| !k.installed() && known.installed());
            if better {
                out.insert(key.to_owned(), known.clone());
            }
        }
    }
    out
}

/// `apt-cache policy -- NAME...`: the candidate version of each name.
pub fn policy(names: &[&str], root: Option<&Path>) -> Cmd {
    let mut argv = vec!["apt-cache".to_owned()];
    argv.extend(apt_options(root));
    argv.push("policy".to_owned());
    argv.push("--".to_owned());
    argv.extend(names.iter().map(|n| (*n).to_owned()));
    Cmd::new(&argv, QUERY_TIMEOUT)
}

/// Parses `apt-cache policy` output: each known package and its candidate
/// (`None` for `(none)`). Unknown packages are not listed at all.
pub fn parse_policy(stdout: &str) -> HashMap<String, Option<String>> {
    let mut out = HashMap::new();
    let mut current: Option<String> = None;
    for line in stdout.lines() {
        if !line.starts_with(' ') {
            current = line.strip_suffix(':').map(str::to_owned);
            continue;
        }
        if let (Some(name), Some(candidate)) = (&current, line.trim().strip_prefix("Candidate: ")) {
            let candidate = (candidate != "(none)").then(|| candidate.to_owned());
            out.insert(name.clone(), candidate);
        }
    }
    out
}

/// `apt-get install -- NAME[=VERSION]...`, unattended. A version pin
/// below the installed version is a downgrade the policy asks for, which
/// `-y` alone refuses ("Packages were downgraded and -y was used without
/// --allow-downgrades"); `latest` never asks for one.
pub fn apt_install(specs: &[String], root: Option<&Path>) -> Cmd {
    let mut argv = vec!["apt-get".to_owned()];
    argv.extend(apt_options(root));
    argv.extend(["-y", "-q", "--allow-downgrades", "install", "--"].map(str::to_owned));
    argv.extend(specs.iter().cloned());
    quiet(Cmd::new(&argv, CHANGE_TIMEOUT))
}

/// `dpkg --install -- FILE.deb...`, unattended.
pub fn dpkg_install(files: &[String], root: Option<&Path>) -> Cmd {
    let mut argv = dpkg_root("dpkg", root);
    argv.extend(DPKG_QUIET.iter().map(|s| (*s).to_owned()));
    argv.extend(dpkg_log(root));
    argv.extend(["--install", "--"].map(str::to_owned));
    argv.extend(files.iter().cloned());
    quiet(Cmd::new(&argv, CHANGE_TIMEOUT))
}

/// `dpkg-deb --contents -- FILE.deb`: the files a `.deb` holds (read
/// only, to check where it would unpack).
pub fn contents(file: &str) -> Cmd {
    Cmd::new(&["dpkg-deb", "--contents", "--", file], QUERY_TIMEOUT)
}

/// The directories a `.deb` unpacks into, from `dpkg-deb --contents`
/// (`tar -tv` lines: mode, owner, size, date, time, then `./path`, with
/// ` -> target` after a symbolic link and ` link to target` after a hard
/// link): every directory entry and the directory of every other entry, as
/// absolute paths, sorted, each once.
pub fn listed_dirs(listing: &str) -> Vec<String> {
    let mut dirs = std::collections::BTreeSet::new();
    for line in listing.lines() {
        let mut rest = line;
        for _ in 0..5 {
            rest = match rest.trim_start().split_once(char::is_whitespace) {
                Some((_, r)) => r,
                None => "",
            };
        }
        let name = rest.trim_start();
        let name = match line.chars().next() {
            Some('l') => name.split_once(" -> ").map_or(name, |(n, _)| n),
            Some('h') => name.split_once(" link to ").map_or(name, |(n, _)| n),
            _ => name,
        };
        let name = name.strip_prefix('.').unwrap_or(name).trim_matches('/');
        if name.is_empty() {
            continue;
        }
        let dir = if line.starts_with('d') {
            Some(name)
        } else {
            name.rsplit_once('/').map(|(d, _)| d)
        };
        if let Some(d) = dir.filter(|d| !d.is_empty()) {
            dirs.insert(format!("/{d}"));
        }
    }
    dirs.into_iter().collect()
}

/// `apt-get update`, unattended, pointed at the root like every apt
/// command: it reads the root's sources and writes the root's lists.
pub fn apt_update(root: Option<&Path>) -> Cmd {
    let mut argv = vec!["apt-get".to_owned()];
    argv.extend(apt_options(root));
    argv.extend(["-q", "update"].map(str::to_owned));
    quiet(Cmd::new(&argv, CHANGE_TIMEOUT))
}

/// Where apt keeps its index, inside the root.
pub const LISTS: &str = "/var/lib/apt/lists";

/// The newest modification time (seconds since the epoch) of the index
/// files in `files` (name, kind, mtime), `None` when there is none. apt's
/// `lock` and its `partial` directory are not index files.
pub fn newest_index(files: impl IntoIterator<Item = (String, bool, i64)>) -> Option<i64> {
    files
        .into_iter()
        .filter(|(name, is_file, _)| *is_file && name != "lock")
        .map(|(_, _, mtime)| mtime)
        .max()
}

/// Whether an index last written at `newest` (`None`: no index at all) is
/// older than `max_age` seconds at `now`. A time in the future (a clock
/// set back) counts as fresh, as apt itself would not refetch.
pub fn stale(newest: Option<i64>, now: i64, max_age: u64) -> bool {
    match newest {
        None => true,
        Some(t) => {
            let age = now.saturating_sub(t);
            age > 0 && u64::try_from(age).is_ok_and(|a| a > max_age)
        }
    }
}

/// How old the index is, for the report: `missing`, `2h 5m old`.
pub fn describe_age(newest: Option<i64>, now: i64) -> String {
    let Some(t) = newest else {
        return "missing".to_owned();
    };
    let secs = u64::try_from(now.saturating_sub(t)).unwrap_or(0);
    let (d, h, m) = (secs / 86_400, secs / 3600 % 24, secs / 60 % 60);
    let text = match (d, h, m) {
        (0, 0, 0) => format!("{secs}s"),
        (0, 0, m) => format!("{m}m"),
        (0, h, m) => format!("{h}h {m}m"),
        (d, h, _) => format!("{d}d {h}h"),
    };
    format!("{text} old")
}

/// `apt-mark [-o Dir=ROOT/ ...] showmanual`: the installed packages that
/// were installed on purpose (not marked automatic), one name per line,
/// from the root's dpkg database and apt's `extended_states`: the
/// packages an `unmanaged "package"` promise may call extra (automatic
/// dependencies never are).
pub fn showmanual(root: Option<&Path>) -> Cmd {
    let mut argv = vec!["apt-mark".to_owned()];
    if let Some(r) = root {
        let r = r.display();
        argv.extend([
            "-o".to_owned(),
            format!("Dir={r}/"),
            "-o".to_owned(),
            format!("Dir::State::status={r}/var/lib/dpkg/status"),
        ]);
    }
    argv.push("showmanual".to_owned());
    Cmd::new(&argv, QUERY_TIMEOUT)
}

/// The names `apt-mark showmanual` printed (`name` or `name:arch` for a
/// foreign architecture).
pub fn parse_showmanual(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

/// `dpkg --remove -- NAME...`, unattended.
pub fn dpkg_remove(names: &[String], root: Option<&Path>) -> Cmd {
    let mut argv = dpkg_root("dpkg", root);
    argv.extend(DPKG_QUIET.iter().map(|s| (*s).to_owned()));
    argv.extend(dpkg_log(root));
    argv.extend(["--remove", "--"].map(str::to_owned));
    argv.extend(names.iter().cloned());
    quiet(Cmd::new(&argv, CHANGE_TIMEOUT))
}

/// Why `name` cannot be handed to apt and dpkg as a package name, beyond
/// the general name grammar (`schema::name_problem`): Debian names are
/// lower case (`[a-z0-9][a-z0-9+.-]+`, with an optional `:arch`), and one
/// ending in `-` would be read by `apt-get install` as "remove the package
/// named without it" (`apt-get install bash-` removes bash).
pub fn name_problem(name: &str) -> Option<&'static str> {
    let (pkg, arch) = match name.split_once(':') {
        Some((p, a)) => (p, Some(a)),
        None => (name, None),
    };
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    if pkg.len() < 2
        || !pkg.starts_with(lower)
        || !pkg.chars().all(|c| lower(c) || "+.-".contains(c))
    {
        Some("Debian package names are at least two characters of `a-z0-9+.-`, starting with a letter or digit")
    } else if pkg.ends_with('-') {
        Some("it ends with `-`, which apt-get reads as \"remove\"")
    } else if arch.is_some_and(|a| a.is_empty() || !a.chars().all(|c| lower(c) || c == '-')) {
        Some("the architecture after `:` is not one (`amd64`, `i386`, `all`, ...)")
    } else {
        None
    }
}

/// Why `version` cannot be a Debian version, if it cannot (it becomes part
/// of an `apt-get` argument, `name=version`).
pub fn version_problem(version: &str) -> Option<&'static str> {
    if version.is_empty() || version.len() > 255 {
        Some("it is empty or longer than 255 bytes")
    } else if !version.starts_with(|c: char| c.is_ascii_digit()) {
        Some("a Debian version starts with a digit")
    } else if !version
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || ".+~:-".contains(c))
    {
        Some("only letters, digits and `.+~:-` are allowed")
    } else {
        None
    }
}

/// The toolset of the Debian family: dpkg for the state, local `.deb`
/// files and removals, apt for the repositories.
#[derive(Clone, Copy, Debug, Default)]
pub struct Apt;

/// The top-level directories of the root a package may write into, from
/// the Filesystem Hierarchy Standard: what `apt-get install` unpacks and
/// `dpkg --remove` deletes cannot be known before it runs, but it is
/// under these. (The rpm toolset uses the same list.)
pub const PACKAGE_TOPS: &[&str] = &[
    "/bin", "/boot", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sbin", "/srv",
    "/usr", "/var",
];

/// The directories dpkg and apt write their own state into.
const ADMIN_DIRS: &[&str] = &[
    "/var/lib/dpkg/info",
    "/var/lib/dpkg/updates",
    "/var/lib/dpkg/triggers",
    "/var/cache/apt/archives/partial",
    "/var/lib/apt/lists/partial",
    "/etc/apt",
    "/var/log/apt",
    "/var/log/dpkg.log",
];

impl Toolset for Apt {
    fn name(&self) -> &'static str {
        "apt"
    }

    fn file_attr(&self) -> &'static str {
        "deb"
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
        ask(&query(names, root)).map(|out| parse_query(&out))
    }

    fn candidates(
        &self,
        names: &[&str],
        root: Option<&Path>,
    ) -> Result<HashMap<String, Option<String>>, ToolError> {
        ask(&policy(names, root)).map(|out| parse_policy(&out))
    }

    fn spec(&self, name: &str, version: Option<&str>) -> String {
        match version {
            Some(v) => format!("{name}={v}"),
            None => name.to_owned(),
        }
    }

    /// `apt-get install NAME` installs the candidate.
    fn latest_spec(&self, name: &str, _candidate: &str) -> String {
        name.to_owned()
    }

    fn install(&self, specs: &[String], root: Option<&Path>) -> Result<Cmd, String> {
        Ok(apt_install(specs, root))
    }

    fn install_files(&self, files: &[String], root: Option<&Path>) -> Result<Cmd, String> {
        Ok(dpkg_install(files, root))
    }

    fn remove(&self, names: &[String], root: Option<&Path>) -> Cmd {
        dpkg_remove(names, root)
    }

    /// apt's candidate and dpkg's version are compared as written: apt
    /// installs exactly `name=version`.
    fn version_matches(&self, installed: &str, wanted: &str) -> bool {
        installed == wanted
    }

    /// apt's candidate is what `apt-get install` would install (pins
    /// included): any other installed version is to be replaced by it.
    fn upgrades(&self, candidate: &str, installed: &str) -> bool {
        candidate != installed
    }

    fn manual_packages(&self, root: Option<&Path>) -> Result<Vec<String>, ToolError> {
        let ran = process::run(&showmanual(root))?;
        if !ran.ok() {
            return Err(ToolError(ran.failure()));
        }
        Ok(parse_showmanual(&ran.stdout))
    }

    fn refresh(
        &mut self,
        fs: &RootFs,
        dry_run: bool,
        max_age: u64,
        done: &mut IndexRefresh,
    ) -> Result<Option<(Change, String)>, String> {
        if let Some(done) = &done.done {
            return done.clone().map(|()| None);
        }
        // Names that are not UTF-8 are no index apt wrote.
        let entries: Vec<String> = fs
            .list_dir(LISTS)
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter_map(|name| String::from_utf8(name).ok())
            .collect();
        let mut files = Vec::with_capacity(entries.len());
        for name in entries {
            let path = format!("{LISTS}/{name}");
            if let Some(meta) = fs.lstat(&path).map_err(|e| e.to_string())? {
                files.push((name, meta.kind == Kind::File, meta.mtime));
            }
        }
        let newest = newest_index(files);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        if !stale(newest, now, max_age) {
            return Ok(None);
        }
        let cmd = apt_update(sandbox(fs.path()));
        let before = describe_age(newest, now);
        if dry_run {
            done.done = Some(Ok(()));
            let after = format!("refreshed (would run `{}`)", cmd.shown());
            return Ok(Some((change("index", before, after), String::new())));
        }
        let ran = process::run(&cmd).and_then(|r| if r.ok() { Ok(r) } else { Err(r.failure()) });
        match ran {
            Ok(r) => {
                done.done = Some(Ok(()));
                let log = format!("$ {}\n{}", r.shown, r.output());
                Ok(Some((change("index", before, "refreshed"), log)))
            }
            Err(why) => {
                let why = format!("refreshing the apt index failed: {why}");
                done.done = Some(Err(why.clone()));
                Err(why)
            }
        }
    }

    /// Refuses (with the link named) a change for which `dpkg` or
    /// `apt-get` would follow a link planted in the root out of it
    /// ([`crate::backend::contain`]): their state directories, the
    /// top-level directories packages go to and, for a `.deb`, every
    /// directory of its file list (`dpkg-deb --contents`); for a removal,
    /// every directory of the installed package's file list
    /// (`/var/lib/dpkg/info/NAME.list`).
    fn contained(
        &self,
        fs: &RootFs,
        name: &str,
        need: &Need,
        file: Option<&str>,
    ) -> Result<(), String> {
        let tool = match need {
            Need::Repo(_) => "`apt-get`",
            _ => "`dpkg`",
        };
        crate::backend::contain::check_all(
            fs,
            ADMIN_DIRS.iter().chain(PACKAGE_TOPS).copied(),
            tool,
        )?;
        if *need == Need::Remove {
            // What dpkg will delete: the file lists of the installed package
            // (`NAME.list`, or `NAME:ARCH.list` for a multi-arch one).
            let info = "/var/lib/dpkg/info";
            // Names that are not UTF-8 name no package.
            let lists: Vec<String> = fs
                .list_dir(info)
                .map_err(|e| e.to_string())?
                .into_iter()
                .filter_map(|name| String::from_utf8(name).ok())
                .collect();
            for list in lists.iter().filter(|l| {
                l.strip_suffix(".list").is_some_and(|stem| {
                    stem == name
                        || stem
                            .strip_prefix(name)
                            .is_some_and(|arch| arch.starts_with(':'))
                })
            }) {
                let path = format!("{info}/{list}");
                let text = fs
                    .read_file(&path)
                    .map_err(|e| e.to_string())?
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default();
                let dirs: std::collections::BTreeSet<&str> = text
                    .lines()
                    .filter_map(|f| f.rsplit_once('/').map(|(d, _)| d))
                    .filter(|d| !d.is_empty())
                    .collect();
                crate::backend::contain::check_all(fs, dirs, tool)
                    .map_err(|why| format!("{why} (it holds files of `{name}`)"))?;
            }
        }
        if let (Need::File(path), Some(file)) = (need, file) {
            let ran = process::run(&contents(path))?;
            if !ran.ok() {
                return Err(ran.failure());
            }
            let dirs = listed_dirs(&ran.stdout);
            crate::backend::contain::check_all(fs, dirs.iter().map(String::as_str), tool)
                .map_err(|why| format!("{why} (it is in the file list of `{file}`)"))?;
        }
        Ok(())
    }

    fn no_candidate(&self, name: &str) -> String {
        format!(
            "no installation candidate for package `{name}`: it is in none of the configured apt repositories (`apt-cache policy` lists none); give a `deb` file or add the repository"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_is_argv_with_the_root_options() {
        let cmd = apt_update(Some(Path::new("/tmp/r")));
        let shown = cmd.shown();
        assert!(
            shown.starts_with(
                "apt-get -o Dir=/tmp/r/ -o Dir::State::status=/tmp/r/var/lib/dpkg/status "
            ),
            "{shown}"
        );
        assert!(shown.ends_with(" -q update"), "{shown}");
        assert!(cmd
            .env
            .iter()
            .any(|(k, v)| k == "DEBIAN_FRONTEND" && v == "noninteractive"));
        assert_eq!(
            apt_update(None)
                .argv
                .iter()
                .filter(|w| w.starts_with("Dir="))
                .count(),
            0
        );
    }

    #[test]
    fn the_index_age_decides_the_update() {
        let files = vec![
            ("lock".to_owned(), true, 5000),
            ("partial".to_owned(), false, 4000),
            ("deb.example_dists_x_InRelease".to_owned(), true, 1000),
            (
                "deb.example_dists_x_main_binary-amd64_Packages".to_owned(),
                true,
                2000,
            ),
        ];
        let newest = newest_index(files);
        assert_eq!(newest, Some(2000));
        assert_eq!(newest_index(vec![("lock".to_owned(), true, 9)]), None);
        // Older than the age: stale; exactly the age or younger: fresh.
        assert!(stale(newest, 2000 + 3601, 3600));
        assert!(!stale(newest, 2000 + 3600, 3600));
        assert!(!stale(newest, 2000, 0));
        assert!(stale(newest, 2001, 0));
        assert!(stale(None, 0, u64::MAX));
        // A clock set back: fresh, never an overflow.
        assert!(!stale(Some(i64::MAX), i64::MIN, 0));
        assert_eq!(describe_age(Some(0), 7500), "2h 5m old");
        assert_eq!(describe_age(Some(0), 90_000), "1d 1h old");
        assert_eq!(describe_age(Some(10), 40), "30s old");
        assert_eq!(describe_age(None, 40), "missing");
    }

    #[test]
    fn the_directories_of_a_deb_come_from_its_file_list() {
        let listing = "\
drwxr-xr-x root/root         0 2024-01-01 00:00 ./
drwxr-xr-x root/root         0 2024-01-01 00:00 ./opt/
drwxr-xr-x root/root         0 2024-01-01 00:00 ./opt/app/
-rw-r--r-- root/root        12 2024-01-01 00:00 ./opt/app/a file with spaces
lrwxrwxrwx root/root         0 2024-01-01 00:00 ./usr/bin/app -> /opt/app/run
hrw-r--r-- root/root         0 2024-01-01 00:00 ./srv/x/hard link to ./opt/app/y
-rw-r--r-- root/root         1 2024-01-01 00:00 ./top
";
        assert_eq!(
            listed_dirs(listing),
            ["/opt", "/opt/app", "/srv/x", "/usr/bin"]
        );
    }

    #[test]
    fn query_is_one_argv_with_double_dash() {
        let cmd = query(&["alpha", "beta"], Some(Path::new("/r")));
        assert_eq!(
            cmd.argv,
            [
                "dpkg-query",
                "--root=/r",
                "-W",
                r"--showformat=${Package}\t${binary:Package}\t${Status}\t${Version}\n",
                "--",
                "alpha",
                "beta"
            ]
        );
        assert_eq!(
            query(&["a"], None).argv.get(1).map(String::as_str),
            Some("-W")
        );
    }

    #[test]
    fn query_parsing() {
        let out = "alpha\talpha\tinstall ok installed\t2.0\n\
                   beta\tbeta\tdeinstall ok config-files\t1.0\n\
                   libc6\tlibc6:amd64\tinstall ok installed\t2.36-9\n\
                   libc6\tlibc6:i386\tdeinstall ok not-installed\t\n\
                   gamma\tgamma\tinstall ok half-configured\t3\n";
        let k = parse_query(out);
        assert!(k.get("alpha").unwrap().installed());
        assert_eq!(k.get("alpha").unwrap().version, "2.0");
        assert!(!k.get("beta").unwrap().installed() && !k.get("beta").unwrap().present());
        assert!(k.get("libc6").unwrap().installed());
        assert!(k.get("libc6:amd64").unwrap().installed());
        assert!(!k.get("libc6:i386").unwrap().installed());
        assert!(!k.get("gamma").unwrap().installed() && k.get("gamma").unwrap().present());
        assert!(!k.contains_key("delta"));
    }

    #[test]
    fn policy_parsing() {
        let out = "alpha:\n  Installed: 2.0\n  Candidate: 2.1\n  Version table:\n     2.1 500\n        500 file:/repo ./ Packages\n\
                   beta:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n";
        let p = parse_policy(out);
        assert_eq!(*p.get("alpha").unwrap(), Some("2.1".to_owned()));
        assert_eq!(*p.get("beta").unwrap(), None);
        assert!(!p.contains_key("gamma"));
    }

    #[test]
    fn changes_are_unattended_and_confined_to_the_root() {
        let root = Some(Path::new("/r"));
        let install = apt_install(&["alpha".into(), "beta=1.0".into()], root);
        let shown = install.shown();
        for part in [
            "apt-get -o Dir=/r/ -o Dir::State::status=/r/var/lib/dpkg/status",
            "-o DPkg::Options::=--root=/r",
            "-o DPkg::Options::=--force-confold",
            "-o DPkg::Options::=--log=/r/var/log/dpkg.log",
            "-y -q --allow-downgrades install -- alpha beta=1.0",
        ] {
            assert!(shown.contains(part), "{part} in {shown}");
        }
        assert!(install
            .env
            .contains(&("DEBIAN_FRONTEND".into(), "noninteractive".into())));
        assert_eq!(
            dpkg_install(&["/r/p/a.deb".into()], root).shown(),
            "dpkg --root=/r --force-confdef --force-confold --log=/r/var/log/dpkg.log --install -- /r/p/a.deb"
        );
        assert_eq!(
            dpkg_remove(&["alpha".into()], None).shown(),
            "dpkg --force-confdef --force-confold --remove -- alpha"
        );
        // The root's changes go to the root's dpkg log, never the host's.
        assert!(dpkg_remove(&["alpha".into()], root).shown().contains(
            "--root=/r --force-confdef --force-confold --log=/r/var/log/dpkg.log --remove"
        ));
        assert!(!apt_install(&["a".into()], None).shown().contains("Dir="));
    }

    #[test]
    fn showmanual_reads_the_roots_database() {
        assert_eq!(
            showmanual(Some(Path::new("/r"))).shown(),
            "apt-mark -o Dir=/r/ -o Dir::State::status=/r/var/lib/dpkg/status showmanual"
        );
        assert_eq!(showmanual(None).shown(), "apt-mark showmanual");
        assert_eq!(
            parse_showmanual("bash\nlibfoo:i386\n\n  vim \n"),
            ["bash", "libfoo:i386", "vim"]
        );
    }

    #[test]
    fn debian_names() {
        for ok in ["nginx", "g++", "libc6:amd64", "python3.11", "0ad"] {
            assert_eq!(name_problem(ok), None, "{ok}");
        }
        for bad in ["bash-", "Nginx", "a", "x:", "x:AMD64", "x@y", "+x"] {
            assert!(name_problem(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn versions() {
        assert_eq!(version_problem("1:2.36-9+deb12u4"), None);
        assert_eq!(version_problem("1.0~rc1"), None);
        for bad in ["", "-1", "1 2", "1;id", "1=2", "a1"] {
            assert!(version_problem(bad).is_some(), "{bad}");
        }
    }
}
