//! What a host has of each type an `unmanaged` promise verifies: the
//! packages installed on purpose, the enabled services, the local accounts
//! in an id range. Each lister reads the root (through [`RootFs`], or the
//! package tool pointed at the root) and never changes it.

use std::collections::BTreeSet;

use crate::backend::passwd::AccountDb;
use crate::backend::{apt, process, runit, sandbox};
use crate::rootfs::{Kind, RootFs};

/// One entry the host has.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Found {
    /// The name as the tools know it (`nginx`, `alice`); `None` when it is
    /// not UTF-8, so no tool can be given it and no promise can name it.
    pub name: Option<String>,
    /// The name as every output shows it ([`crate::rootfs::escape_name`]):
    /// control characters and bytes that are not UTF-8 escaped.
    pub shown: String,
}

impl Found {
    fn from_bytes(bytes: &[u8]) -> Found {
        Found {
            name: std::str::from_utf8(bytes).ok().map(str::to_owned),
            shown: crate::rootfs::escape_name(bytes),
        }
    }
}

/// The OS families whose packages apt and dpkg manage.
const DEBIAN_FAMILIES: &[&str] = &["debian", "ubuntu"];

/// Packages installed on purpose (`apt-mark showmanual` on the root);
/// automatic dependencies are never listed. `os_family` is the root's
/// (`sys.os_family`).
pub fn packages(fs: &RootFs, os_family: &str) -> Result<Vec<Found>, String> {
    if !DEBIAN_FAMILIES.contains(&os_family) {
        return Err(format!(
            "no package toolset lists the packages installed on purpose on a `{}` root (this policyvm has apt's `apt-mark showmanual`)",
            os_family.escape_debug()
        ));
    }
    let cmd = apt::showmanual(sandbox(fs.path()));
    let ran = process::run(&cmd)?;
    if !ran.ok() {
        return Err(ran.failure());
    }
    Ok(apt::parse_showmanual(&ran.stdout)
        .iter()
        .map(|n| Found::from_bytes(n.as_bytes()))
        .collect())
}

/// Where systemd keeps the links of enabled units.
const SYSTEMD_UNITS: &str = "/etc/systemd/system";

/// Enabled services. systemd: every unit linked from a `*.wants` or
/// `*.requires` directory of `/etc/systemd/system` (what `systemctl
/// enable` makes), a `.service` shown without its suffix, as a `service`
/// promise names it. runit: every entry of the service directory
/// (`/etc/service`).
pub fn services(fs: &RootFs, manager: &str) -> Result<Vec<Found>, String> {
    match manager {
        "systemd" => systemd_enabled(fs),
        "runit" => runit_enabled(fs),
        other => Err(format!(
            "no service backend for manager `{}` (this policyvm has `systemd` and `runit`)",
            other.escape_debug()
        )),
    }
}

fn systemd_enabled(fs: &RootFs) -> Result<Vec<Found>, String> {
    let mut found: BTreeSet<Found> = BTreeSet::new();
    for dir in fs.list_dir(SYSTEMD_UNITS).map_err(|e| e.to_string())? {
        if !(dir.ends_with(b".wants") || dir.ends_with(b".requires")) {
            continue;
        }
        let Ok(dir) = String::from_utf8(dir) else {
            continue;
        };
        let path = format!("{SYSTEMD_UNITS}/{dir}");
        if fs.lstat(&path).map_err(|e| e.to_string())?.map(|m| m.kind) != Some(Kind::Dir) {
            continue;
        }
        for unit in fs.list_dir(&path).map_err(|e| e.to_string())? {
            let name = unit.strip_suffix(b".service").unwrap_or(&unit);
            found.insert(Found::from_bytes(name));
        }
    }
    Ok(found.into_iter().collect())
}

fn runit_enabled(fs: &RootFs) -> Result<Vec<Found>, String> {
    Ok(fs
        .list_dir(runit::DEFAULT_SERVICE_DIR)
        .map_err(|e| e.to_string())?
        .iter()
        .filter(|n| !n.starts_with(b"."))
        .map(|n| Found::from_bytes(n))
        .collect())
}

/// Users of `ROOT/etc/passwd` whose uid is in `ids`.
pub fn users(fs: &RootFs, ids: (u32, u32)) -> Result<Vec<Found>, String> {
    let db = AccountDb::read(fs).map_err(|e| e.to_string())?;
    Ok(in_range(
        db.users.iter().map(|u| (u.name.as_str(), u.uid)),
        ids,
    ))
}

/// Groups of `ROOT/etc/group` whose gid is in `ids`.
pub fn groups(fs: &RootFs, ids: (u32, u32)) -> Result<Vec<Found>, String> {
    let db = AccountDb::read(fs).map_err(|e| e.to_string())?;
    Ok(in_range(
        db.groups.iter().map(|g| (g.name.as_str(), g.gid)),
        ids,
    ))
}

/// The names whose id is in `lo..=hi`, each once.
fn in_range<'a>(entries: impl Iterator<Item = (&'a str, u32)>, (lo, hi): (u32, u32)) -> Vec<Found> {
    let found: BTreeSet<Found> = entries
        .filter(|(_, id)| (lo..=hi).contains(id))
        .map(|(name, _)| Found::from_bytes(name.as_bytes()))
        .collect();
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn root(files: &[(&str, &str)], links: &[(&str, &str)]) -> (tempfile::TempDir, RootFs) {
        let dir = tempfile::tempdir().unwrap();
        for (path, text) in files {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        for (path, target) in links {
            let p = dir.path().join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::os::unix::fs::symlink(target, p).unwrap();
        }
        let fs = RootFs::open(dir.path()).unwrap();
        (dir, fs)
    }

    fn shown(found: &[Found]) -> Vec<&str> {
        found.iter().map(|f| f.shown.as_str()).collect()
    }

    #[test]
    fn accounts_in_the_id_range_only() {
        let (_d, fs) = root(
            &[
                (
                    "etc/passwd",
                    "root:x:0:0::/root:/bin/sh\nalice:x:1000:1000::/home/alice:/bin/sh\nbob:x:1500:1500::/:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n",
                ),
                ("etc/group", "root:x:0:\nalice:x:1000:\nops:x:2000:alice\n"),
            ],
            &[],
        );
        assert_eq!(shown(&users(&fs, (1000, 59999)).unwrap()), ["alice", "bob"]);
        assert_eq!(shown(&users(&fs, (1001, 1500)).unwrap()), ["bob"]);
        assert_eq!(shown(&groups(&fs, (1000, 1999)).unwrap()), ["alice"]);
    }

    #[test]
    fn a_name_with_control_characters_is_shown_escaped() {
        let (_d, fs) = root(
            &[
                ("etc/passwd", "ev\u{1b}[31mil\nx:x:1200:1200::/:/bin/sh\n"),
                ("etc/group", ""),
            ],
            &[],
        );
        // The newline ends the passwd line: `ev\e[31mil` has no fields and
        // is no account; `x` is one.
        assert_eq!(shown(&users(&fs, (1000, 59999)).unwrap()), ["x"]);
        let (_d, fs) = root(
            &[
                ("etc/passwd", "ev\u{1b}[31mil:x:1200:1200::/:/bin/sh\n"),
                ("etc/group", ""),
            ],
            &[],
        );
        let found = users(&fs, (1000, 59999)).unwrap();
        assert_eq!(shown(&found), ["ev\\u{1b}[31mil"]);
        assert_eq!(
            found.first().unwrap().name.as_deref(),
            Some("ev\u{1b}[31mil")
        );
    }

    #[test]
    fn systemd_units_linked_from_wants_directories() {
        let (_d, fs) = root(
            &[("lib/systemd/system/a.service", "")],
            &[
                (
                    "etc/systemd/system/multi-user.target.wants/nginx.service",
                    "/lib/systemd/system/nginx.service",
                ),
                (
                    "etc/systemd/system/timers.target.wants/apt-daily.timer",
                    "/lib/systemd/system/apt-daily.timer",
                ),
                (
                    "etc/systemd/system/sockets.target.requires/nginx.service",
                    "/lib/systemd/system/nginx.service",
                ),
                ("etc/systemd/system/masked.service", "/dev/null"),
            ],
        );
        assert_eq!(
            shown(&services(&fs, "systemd").unwrap()),
            ["apt-daily.timer", "nginx"]
        );
    }

    #[test]
    fn runit_services_are_the_entries_of_the_service_directory() {
        let (_d, fs) = root(
            &[],
            &[
                ("etc/service/web", "../sv/web"),
                ("etc/service/db", "../sv/db"),
            ],
        );
        assert_eq!(shown(&services(&fs, "runit").unwrap()), ["db", "web"]);
        assert!(services(&fs, "upstart").is_err());
    }

    #[test]
    fn packages_on_a_root_without_an_apt_toolset_fail_with_the_reason() {
        let (_d, fs) = root(&[], &[]);
        let e = packages(&fs, "rhel").unwrap_err();
        assert!(e.contains("`rhel`"), "{e}");
    }
}
