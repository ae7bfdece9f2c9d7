//! System backends: the operators of `package`, `service`, `user` and
//! `group` promises, which change the host through its own tools (`dpkg`,
//! `apt-get`, `systemctl`, `sv`, `useradd`, ...) instead of through
//! [`crate::rootfs`].
//!
//! Every backend follows the same rules (THREATS.md T21, issue 7):
//! - it builds each command as data ([`process::Cmd`]): an argv, never a
//!   shell line, with `--` before names where the tool accepts it, so tests
//!   can check exactly what would run;
//! - it re-checks every name with [`crate::schema::name_problem`] before
//!   any command sees it;
//! - every command has a deadline and runs through [`process::run`];
//! - a dry run runs only the commands that read state, and reports the
//!   commands it would run to change it;
//! - a failing command fails the promise with the exact command line and
//!   its output; the rest of the run goes on;
//! - after a change the state is read again: a repair is only a repair if
//!   it stuck.
//!
//! With `--root DIR` other than `/`, the tools are pointed at the root
//! (`dpkg --root`, apt's `Dir` options, `useradd -R`, `systemctl --root`,
//! runit's service directory inside the root).

pub mod accounts;
mod child;
pub mod contain;
pub mod fstab;
pub mod kmod;
pub mod mount;
pub mod packages;
pub mod passwd;
pub mod process;
pub mod processes;
pub mod runit;
pub mod service;
pub mod sysctl;
pub mod systemd;
pub mod toolset;

/// The apt toolset's commands, where the other backends name them.
pub use toolset::apt;

use std::path::Path;

use process::Cmd;

use crate::outcome::{Applied, Change, Outcome};
use crate::schema::name_problem;

/// One planned change and the command that makes it (`None` when the
/// change is made through [`crate::rootfs`], like a runit link).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub change: Change,
    pub cmd: Option<Cmd>,
}

impl Step {
    pub fn new(what: &str, before: impl Into<String>, after: impl Into<String>, cmd: Cmd) -> Step {
        Step {
            change: change(what, before, after),
            cmd: Some(cmd),
        }
    }
}

pub fn change(what: &str, before: impl Into<String>, after: impl Into<String>) -> Change {
    Change {
        what: what.to_owned(),
        before: before.into(),
        after: after.into(),
        diff: None,
    }
}

/// The root as the tools are told about it: `None` for the real system
/// (`/`), so that no `--root` option is passed there at all.
pub fn sandbox(root: &Path) -> Option<&Path> {
    (root != Path::new("/")).then_some(root)
}

/// A root-relative policy path as a path on this host.
pub fn host_path(root: &Path, path: &str) -> std::path::PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Runs the commands of `steps` in order (none in a dry run). Returns the
/// changes and a log of what ran (`$ command` then its output), or the
/// failed outcome naming the command that failed and its output.
pub fn perform(dry_run: bool, steps: &[Step]) -> Result<(Vec<Change>, String), Applied> {
    let mut log = String::new();
    let mut changes = Vec::new();
    for step in steps {
        if let Some(cmd) = &step.cmd {
            if dry_run {
                let mut c = step.change.clone();
                c.after = format!("{} (would run `{}`)", c.after, cmd.shown());
                changes.push(c);
                continue;
            }
            let ran = process::run(cmd).map_err(Applied::failed)?;
            log.push_str(&format!("$ {}\n{}", ran.shown, ran.output()));
            if !ran.ok() {
                return Err(Applied {
                    outcome: Outcome::Failed(ran.failure()),
                    changes,
                    output: Some(log),
                });
            }
        }
        changes.push(step.change.clone());
    }
    Ok((changes, log))
}

/// The outcome of a promise whose steps were performed.
pub fn applied(changes: Vec<Change>, log: String) -> Applied {
    Applied {
        output: (!log.is_empty()).then_some(log),
        ..Applied::from_changes(changes)
    }
}

/// Refuses a name no tool may see (THREATS.md T21): the promiser was
/// checked by the caller; this checks names inside attribute values, such
/// as the groups of a user.
pub fn check_name(kind: &str, name: &str) -> Result<(), Applied> {
    match name_problem(name) {
        Some(why) => Err(Applied::failed(format!(
            "`{}` is not a valid {kind} name: {why}; it is passed to no tool",
            name.escape_debug()
        ))),
        None => Ok(()),
    }
}

/// Why a path attribute (a home directory, a shell, a `.deb`) cannot be
/// used, if it cannot: it must be a plain absolute path, and no `:` or
/// control character (they would corrupt `/etc/passwd`).
pub fn check_path(attr: &str, path: &str) -> Result<(), Applied> {
    let why = crate::rootfs::path_problem(path).or_else(|| {
        path.chars()
            .any(|c| c == ':' || c.is_control())
            .then_some("it contains `:` or a control character")
    });
    match why {
        Some(why) => Err(Applied::failed(format!(
            "`{attr} = {}` is not usable: {why}",
            path.escape_debug()
        ))),
        None => Ok(()),
    }
}
