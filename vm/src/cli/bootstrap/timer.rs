//! Enabling the agent's systemd timer (`converge-agent.timer`, shipped by
//! the converge-policyvm package): on this host with `systemctl enable
//! --now`, run like every program the VM runs
//! ([`crate::backend::process`]); under a sandbox root, by making the link
//! `systemctl --root ROOT enable` makes (the timer's `[Install]` section
//! says `WantedBy=timers.target`), without running anything.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::files::Step;
use crate::backend::process::{run, Cmd};

pub const TIMER: &str = "converge-agent.timer";

/// Where systemd looks for a unit, most local first (as `systemctl`
/// resolves a name).
const UNIT_DIRS: &[&str] = &[
    "/etc/systemd/system",
    "/usr/lib/systemd/system",
    "/lib/systemd/system",
];

/// The directory of the links that make `timers.target` start a timer.
pub const WANTS: &str = "etc/systemd/system/timers.target.wants";

/// The timer's unit file as the system under `root` sees it.
fn installed_unit(root: &Path) -> Option<PathBuf> {
    UNIT_DIRS
        .iter()
        .map(|dir| Path::new(dir).join(TIMER))
        .find(|unit| root.join(unit.strip_prefix("/").unwrap_or(unit)).is_file())
}

/// `systemctl --root ROOT enable converge-agent.timer`: the link
/// `ROOT/etc/systemd/system/timers.target.wants/converge-agent.timer` to
/// the unit file (an absolute path inside the root, as systemctl makes it).
pub fn enable_under(root: &Path) -> Result<Step, String> {
    let unit = installed_unit(root).ok_or_else(|| {
        format!(
            "{TIMER} is not installed under `{}` (looked in {}): install the \
             converge-policyvm package there first, or pass --no-timer and run the agent \
             from cron",
            root.display(),
            UNIT_DIRS.join(", ")
        )
    })?;
    let wants = root.join(WANTS);
    let link = wants.join(TIMER);
    match std::fs::symlink_metadata(&link) {
        Ok(meta) if meta.file_type().is_symlink() => {
            if std::fs::read_link(&link).is_ok_and(|target| target == unit) {
                return Ok(Step::Unchanged);
            }
            std::fs::remove_file(&link)
                .map_err(|e| format!("cannot replace `{}`: {e}", link.display()))?;
        }
        Ok(_) => {
            return Err(format!(
                "`{}` is there and is not a link; move it away (systemd would not know what \
                 it is either)",
                link.display()
            ))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot inspect `{}`: {e}", link.display())),
    }
    std::fs::create_dir_all(&wants)
        .map_err(|e| format!("cannot create `{}`: {e}", wants.display()))?;
    std::os::unix::fs::symlink(&unit, &link)
        .map_err(|e| format!("cannot link `{}`: {e}", link.display()))?;
    Ok(Step::Done)
}

/// `systemctl enable --now converge-agent.timer` on this host, unless it
/// is enabled and active already.
pub fn enable_now() -> Result<Step, String> {
    let systemctl = |args: &[&str]| {
        let argv: Vec<&str> = std::iter::once("systemctl")
            .chain(args.iter().copied())
            .collect();
        run(&Cmd::new(&argv, Duration::from_secs(60)))
    };
    let enabled = systemctl(&["is-enabled", "--quiet", TIMER]).is_ok_and(|r| r.ok());
    let active = systemctl(&["is-active", "--quiet", TIMER]).is_ok_and(|r| r.ok());
    if enabled && active {
        return Ok(Step::Unchanged);
    }
    let ran = systemctl(&["enable", "--now", TIMER])?;
    if ran.ok() {
        Ok(Step::Done)
    } else {
        Err(format!(
            "{}; is the converge-policyvm package installed? (pass --no-timer to run the agent \
             from cron instead)",
            ran.failure()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_a_root_the_link_is_what_systemctl_makes_once() {
        let root = tempfile::tempdir().unwrap();
        let err = enable_under(root.path()).unwrap_err();
        assert!(err.contains("is not installed"), "{err}");
        let units = root.path().join("usr/lib/systemd/system");
        std::fs::create_dir_all(&units).unwrap();
        std::fs::write(units.join(TIMER), "[Timer]\n").unwrap();
        assert_eq!(enable_under(root.path()), Ok(Step::Done));
        let link = root.path().join(WANTS).join(TIMER);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("/usr/lib/systemd/system").join(TIMER)
        );
        assert_eq!(enable_under(root.path()), Ok(Step::Unchanged));
        // A local override in /etc wins, as in systemctl.
        let local = root.path().join("etc/systemd/system");
        std::fs::write(local.join(TIMER), "[Timer]\n").unwrap();
        assert_eq!(enable_under(root.path()), Ok(Step::Done));
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            PathBuf::from("/etc/systemd/system").join(TIMER)
        );
    }
}
