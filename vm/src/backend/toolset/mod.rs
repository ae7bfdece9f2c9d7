//! Toolsets: the package managers behind `package` promises, one
//! implementation of [`Toolset`] per file. [`super::packages`] batches the
//! promises and decides what each needs; a toolset only knows its tools:
//! how to ask the state of a batch in one query, the repositories'
//! candidates, the one install transaction, the one removal, a local
//! package file, how its versions compare, and what was installed on
//! purpose. A third toolset (apk, pacman, zypper) is one more file here and
//! a line in [`select`].
//!
//! Which toolset a promise gets: its `manager` (`apt`, `dnf`, `rpm`), else
//! the root's `/etc/os-release` (`ID`, then each word of `ID_LIKE`): the
//! Debian family gets apt, the Red Hat family dnf. A root without
//! os-release gets apt, as every root did before there was a choice.

pub mod apt;
pub mod rpm;
pub mod rpmvercmp;

use std::collections::HashMap;
use std::path::Path;

use super::process::{self, Cmd};
use crate::outcome::Change;
use crate::rootfs::RootFs;

/// Why a toolset's query failed: the command and the tool's own message
/// (a missing tool is named: "no program `dnf` on the PATH").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError(pub String);

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for ToolError {
    fn from(s: String) -> ToolError {
        ToolError(s)
    }
}

/// What the package database says about one package.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Known {
    /// The status word: `installed`, `config-files`, `half-configured`,
    /// ... (dpkg's; rpm knows only `installed`).
    pub status: String,
    /// The installed version, as the toolset writes it (`2.36-9`,
    /// `2:3.0-1`).
    pub version: String,
}

impl Known {
    /// Installed and configured (pending triggers do not make it less so).
    pub fn installed(&self) -> bool {
        matches!(
            self.status.as_str(),
            "installed" | "triggers-pending" | "triggers-awaited"
        )
    }

    /// Anything of it on disk (a half-installed package too, but not the
    /// conffiles a removal leaves).
    pub fn present(&self) -> bool {
        !matches!(self.status.as_str(), "not-installed" | "config-files")
    }
}

/// What one package promise needs, as decided by `packages`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Need {
    Nothing,
    /// From the repositories: the toolset's spec (`name`, `name=1.0`,
    /// `name-1.0`).
    Repo(String),
    /// A local package file: its path on this host.
    File(String),
    Remove,
}

/// A package manager, its commands built as data.
pub trait Toolset {
    /// `apt`, `dnf` or `rpm`: the `manager` value that forces it.
    fn name(&self) -> &'static str;

    /// The attribute naming a local package file for this toolset (`deb`,
    /// `rpm`); the other toolsets' file attributes are refused.
    fn file_attr(&self) -> &'static str;

    /// Why `name` cannot be handed to this toolset's tools, beyond the
    /// general name grammar (`schema::name_problem`).
    fn name_problem(&self, name: &str) -> Option<&'static str>;

    /// Why `version` cannot be one of this toolset's versions.
    fn version_problem(&self, version: &str) -> Option<&'static str>;

    /// The state of every named package, from ONE query.
    fn query(
        &self,
        names: &[&str],
        root: Option<&Path>,
    ) -> Result<HashMap<String, Known>, ToolError>;

    /// The repositories' newest candidate of every named package that
    /// they know (`None`: known, but nothing installable), from ONE
    /// query. Unknown names are missing from the map.
    fn candidates(
        &self,
        names: &[&str],
        root: Option<&Path>,
    ) -> Result<HashMap<String, Option<String>>, ToolError>;

    /// The argument that asks the repositories for `name` (at `version`).
    fn spec(&self, name: &str, version: Option<&str>) -> String;

    /// The argument that upgrades an installed `name` to the
    /// repositories' `candidate` (`state = latest`).
    fn latest_spec(&self, name: &str, candidate: &str) -> String;

    /// ONE install/upgrade transaction from the repositories; `Err` when
    /// this toolset cannot fetch (plain `rpm`): the reason.
    fn install(&self, specs: &[String], root: Option<&Path>) -> Result<Cmd, String>;

    /// ONE installation of local package files.
    fn install_files(&self, files: &[String], root: Option<&Path>) -> Result<Cmd, String>;

    /// ONE removal that removes exactly these packages (a package that
    /// another installed one needs fails with the tool's reason).
    fn remove(&self, names: &[String], root: Option<&Path>) -> Cmd;

    /// Whether the installed version is the one a promise asks for.
    fn version_matches(&self, installed: &str, wanted: &str) -> bool;

    /// Whether the repositories' `candidate` is an upgrade of `installed`.
    fn upgrades(&self, candidate: &str, installed: &str) -> bool;

    /// The packages installed on purpose (not as a dependency), for
    /// `unmanaged "package"`.
    fn manual_packages(&self, root: Option<&Path>) -> Result<Vec<String>, ToolError>;

    /// Brings the repositories' index to at most `max_age` seconds old
    /// (`update_cache_age`) before the batch asks it anything. `Ok(Some)`:
    /// the change made (or, dry, that would be) and the tool's log.
    fn refresh(
        &mut self,
        fs: &RootFs,
        dry_run: bool,
        max_age: u64,
        done: &mut IndexRefresh,
    ) -> Result<Option<(Change, String)>, String>;

    /// Refuses (naming the link) a change for which the tools would
    /// follow a link planted in the root out of it. `file`: the local
    /// package file as the policy names it.
    fn contained(
        &self,
        fs: &RootFs,
        name: &str,
        need: &Need,
        file: Option<&str>,
    ) -> Result<(), String>;

    /// The failure of a package no repository offers.
    fn no_candidate(&self, name: &str) -> String;
}

/// A refresh of the repositories' index (`update_cache_age`), at most
/// once per run: after it ran (or failed, or a dry run said it would),
/// later batches of the run take that answer instead of running it again.
#[derive(Clone, Debug, Default)]
pub struct IndexRefresh {
    pub done: Option<Result<(), String>>,
}

/// The toolsets `manager` may name.
pub const MANAGERS: &[&str] = &["apt", "dnf", "rpm"];

/// The toolset named `manager` (a promise's, or the root's
/// [`OsRelease::family_manager`]), ready for one batch on `fs`.
pub fn select(fs: &RootFs, release: &OsRelease, manager: &str) -> Result<Box<dyn Toolset>, String> {
    match manager {
        "apt" => Ok(Box::new(apt::Apt)),
        "dnf" => Ok(Box::new(rpm::Rpm::new(fs.path(), release, true))),
        "rpm" => Ok(Box::new(rpm::Rpm::new(fs.path(), release, false))),
        other => Err(format!(
            "no package toolset `{}`: `manager` is one of {}",
            other.escape_debug(),
            MANAGERS.join(", ")
        )),
    }
}

/// The toolset of the root's own family ([`OsRelease::family_manager`]),
/// for what asks the package system without a promise to name a
/// `manager`: `unmanaged "package"` and `policyvm capture package`.
pub fn of_root(fs: &RootFs) -> Result<Box<dyn Toolset>, String> {
    let release = OsRelease::read(fs);
    let manager = release.family_manager()?;
    select(fs, &release, manager)
}

/// The toolset that reads the root's package database without changing
/// it (`policyvm capture package`): the root's own, except that a Red Hat
/// family root is read with plain rpm, which needs no repositories and no
/// `--releasever`.
pub fn reader_of_root(fs: &RootFs) -> Result<Box<dyn Toolset>, String> {
    let release = OsRelease::read(fs);
    let manager = match release.family_manager()? {
        "dnf" => "rpm",
        other => other,
    };
    select(fs, &release, manager)
}

/// The root's `/etc/os-release`, as far as choosing a toolset needs it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OsRelease {
    /// False when the root has no os-release at all.
    pub found: bool,
    pub id: String,
    pub id_like: Vec<String>,
    /// `VERSION_ID`: dnf's `--releasever` under `--root`.
    pub version_id: Option<String>,
}

/// os-release `ID`s of the Debian family.
const DEBIAN_FAMILY: &[&str] = &["debian", "ubuntu"];
/// os-release `ID`s of the Red Hat family.
const RED_HAT_FAMILY: &[&str] = &["rhel", "fedora", "centos", "rocky", "almalinux"];

impl OsRelease {
    /// Reads `ROOT/etc/os-release`, else `ROOT/usr/lib/os-release` (as
    /// os-release(5) says, and as the `sys.os_family` fact does), through
    /// the root's confinement: `/etc/os-release` is usually a link to the
    /// other, which the root never follows.
    pub fn read(fs: &RootFs) -> OsRelease {
        ["/etc/os-release", "/usr/lib/os-release"]
            .into_iter()
            .find_map(|path| fs.read_file_limited(path, 64 * 1024).ok().flatten())
            .map_or_else(OsRelease::default, |bytes| {
                OsRelease::parse(&String::from_utf8_lossy(&bytes))
            })
    }

    /// Parses os-release text: `KEY=value` lines, values optionally
    /// quoted.
    pub fn parse(text: &str) -> OsRelease {
        let mut out = OsRelease {
            found: true,
            ..OsRelease::default()
        };
        for line in text.lines() {
            let Some((key, value)) = line.trim().split_once('=') else {
                continue;
            };
            let value = value.trim();
            let value = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .or_else(|| value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')))
                .unwrap_or(value);
            match key.trim() {
                "ID" => out.id = value.to_ascii_lowercase(),
                "ID_LIKE" => {
                    out.id_like = value
                        .split_whitespace()
                        .map(str::to_ascii_lowercase)
                        .collect()
                }
                "VERSION_ID" => out.version_id = Some(value.to_owned()),
                _ => {}
            }
        }
        out
    }

    /// The toolset of this family: `ID` first, then `ID_LIKE` in order.
    pub fn family_manager(&self) -> Result<&'static str, String> {
        if !self.found {
            return Ok("apt");
        }
        for id in std::iter::once(&self.id).chain(&self.id_like) {
            if DEBIAN_FAMILY.contains(&id.as_str()) {
                return Ok("apt");
            }
            if RED_HAT_FAMILY.contains(&id.as_str()) {
                return Ok("dnf");
            }
        }
        Err(format!(
            "no package toolset for this system (os-release ID `{}`, ID_LIKE `{}`): set `manager` to one of {}",
            self.id.escape_debug(),
            self.id_like.join(" ").escape_debug(),
            MANAGERS.join(", ")
        ))
    }
}

/// Runs a read-only query; exit status 0 or 1 (some name unknown) is an
/// answer, anything else a failure naming the command.
pub fn ask(cmd: &Cmd) -> Result<String, ToolError> {
    let ran = process::run(cmd)?;
    match ran.code {
        Some(0 | 1) => Ok(ran.stdout),
        _ => Err(ToolError(ran.failure())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_family_comes_from_id_then_id_like() {
        let rocky = OsRelease::parse(
            "NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\nVERSION_ID=\"9.3\"\n",
        );
        assert_eq!(rocky.family_manager(), Ok("dnf"));
        assert_eq!(rocky.version_id.as_deref(), Some("9.3"));
        let mint = OsRelease::parse("ID=linuxmint\nID_LIKE='ubuntu debian'\n");
        assert_eq!(mint.family_manager(), Ok("apt"));
        let alma = OsRelease::parse("ID=almalinux\n");
        assert_eq!(alma.family_manager(), Ok("dnf"));
        assert_eq!(OsRelease::parse("ID=debian\n").family_manager(), Ok("apt"));
        // No os-release at all: apt, as before toolsets.
        assert_eq!(OsRelease::default().family_manager(), Ok("apt"));
        let arch = OsRelease::parse("ID=arch\n").family_manager().unwrap_err();
        assert!(
            arch.contains("`arch`") && arch.contains("set `manager`"),
            "{arch}"
        );
    }
}
