//! The systemd service manager, through `systemctl`.
//!
//! On the real system (`--root /`): `is-active` and `is-enabled` read the
//! state; `start`, `stop`, `restart`, `reload`, `enable` and `disable`
//! change it. Under `--root DIR` no systemd runs inside the root, and
//! `systemctl --root` only knows unit files: `enabled` is converged with
//! `systemctl --root=DIR is-enabled / enable / disable` (the symlinks of
//! an image), while `state` and notifications cannot be checked there and
//! are reported as not applied.

use std::path::Path;
use std::time::Duration;

use super::process::{self, Cmd};
use super::service::Wanted;
use super::{applied, change, perform, sandbox, Step};
use crate::outcome::{Applied, Outcome};
use crate::rootfs::RootFs;

/// The deadline of one `systemctl` call (systemd's default stop timeout is
/// 90 s).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// `systemctl [--root=DIR] VERB -- NAME`.
pub fn systemctl(verb: &str, name: &str, root: Option<&Path>) -> Cmd {
    let mut argv = vec!["systemctl".to_owned()];
    if let Some(r) = root {
        argv.push(format!("--root={}", r.display()));
    }
    argv.extend([verb.to_owned(), "--".to_owned(), name.to_owned()]);
    Cmd::new(&argv, TIMEOUT)
}

/// Whether the unit runs, from `systemctl is-active` output. `activating`
/// and `reloading` count as running (starting it again would only wait);
/// `deactivating`, `inactive` and `failed` as stopped.
pub fn parse_active(stdout: &str) -> Result<bool, String> {
    match stdout.lines().next().unwrap_or("").trim() {
        "active" | "activating" | "reloading" | "refreshing" => Ok(true),
        "inactive" | "failed" | "deactivating" | "unknown" | "maintenance" => Ok(false),
        other => Err(format!("unexpected `systemctl is-active` output {other:?}")),
    }
}

/// A unit's boot-time state, from `systemctl is-enabled`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Enablement {
    Enabled,
    Disabled,
    /// `static`, `indirect`, `generated`, `transient`, `alias`: started by
    /// something else; `enable`/`disable` do not change it.
    Fixed(String),
    Masked,
    NotFound,
}

pub fn parse_enabled(stdout: &str, stderr: &str) -> Result<Enablement, String> {
    Ok(match stdout.lines().next().unwrap_or("").trim() {
        "enabled" | "enabled-runtime" => Enablement::Enabled,
        "disabled" | "linked" | "linked-runtime" => Enablement::Disabled,
        word @ ("static" | "indirect" | "generated" | "transient" | "alias") => {
            Enablement::Fixed(word.to_owned())
        }
        "masked" | "masked-runtime" => Enablement::Masked,
        "not-found" => Enablement::NotFound,
        "" if stderr.contains("No such file") || stderr.contains("not found") => {
            Enablement::NotFound
        }
        other => {
            return Err(format!(
                "unexpected `systemctl is-enabled` output {other:?} {}",
                stderr.trim()
            ))
        }
    })
}

/// The steps from the current state to the wanted one. `running` is `None`
/// when the state cannot be read (under `--root`).
pub fn plan(
    name: &str,
    root: Option<&Path>,
    running: Option<bool>,
    enabled: &Enablement,
    wanted: Wanted,
) -> Result<Vec<Step>, String> {
    let mut steps = Vec::new();
    if let Some(want) = wanted.enabled {
        match (enabled, want) {
            (Enablement::NotFound, _) => return Err(format!("there is no unit `{name}`")),
            (Enablement::Masked, true) => {
                return Err(format!("`{name}` is masked; unmask it to enable it"))
            }
            (Enablement::Fixed(how), false) => {
                return Err(format!(
                    "`{name}` is {how}: `systemctl disable` cannot turn it off (mask it instead)"
                ))
            }
            (Enablement::Enabled, false) => steps.push(Step::new(
                "enabled",
                "true",
                "false",
                systemctl("disable", name, root),
            )),
            (Enablement::Disabled, true) => steps.push(Step::new(
                "enabled",
                "false",
                "true",
                systemctl("enable", name, root),
            )),
            _ => {}
        }
    }
    let mut started = false;
    if let (Some(want), Some(now)) = (wanted.running, running) {
        if want != now {
            let (verb, before, after) = if want {
                ("start", "stopped", "running")
            } else {
                ("stop", "running", "stopped")
            };
            started = want;
            steps.push(Step::new(
                "state",
                before,
                after,
                systemctl(verb, name, root),
            ));
        }
    }
    if let (Some(how), Some(true)) = (wanted.notified, running) {
        if !started && wanted.running != Some(false) {
            steps.push(Step::new(
                how.verb(),
                "",
                "notified",
                systemctl(how.verb(), name, root),
            ));
        }
    }
    Ok(steps)
}

/// Reads a unit's state: running (none under a root) and enablement.
/// `is-enabled` runs only when `enabled` is promised (otherwise the
/// answer is unused, and stands in as `Enabled`).
fn read(
    name: &str,
    root: Option<&Path>,
    need_enabled: bool,
    need_active: bool,
) -> Result<(Option<bool>, Enablement), String> {
    let enabled = if need_enabled {
        let ran = process::run(&systemctl("is-enabled", name, root))?;
        parse_enabled(&ran.stdout, &ran.stderr)?
    } else {
        Enablement::Enabled
    };
    let running = if root.is_none() && need_active {
        let active = process::run(&systemctl("is-active", name, None))?;
        Some(parse_active(&active.stdout).map_err(|e| format!("{e} {}", active.stderr.trim()))?)
    } else {
        None
    };
    Ok((running, enabled))
}

/// Where `systemctl --root` writes the links of `enable` and `disable`.
/// It resolves links inside the root itself; this is checked anyway
/// ([`super::contain`]), so no planted link can widen what it touches.
const UNIT_DIR: &str = "/etc/systemd/system";

pub fn converge(
    fs: &RootFs,
    dry_run: bool,
    would_exist: super::service::WouldExist<'_>,
    name: &str,
    wanted: Wanted,
) -> Applied {
    let root = sandbox(fs.path());
    if let Err(why) = super::contain::check(fs, UNIT_DIR, "`systemctl --root`") {
        return Applied::failed(why);
    }
    let need_active = wanted.running.is_some() || wanted.notified.is_some();
    let need_enabled = wanted.enabled.is_some();
    if root.is_some() && !need_enabled {
        return Applied {
            outcome: Outcome::Skipped(UNDER_ROOT.to_owned()),
            changes: Vec::new(),
            output: None,
        };
    }
    let planned = read(name, root, need_enabled, need_active).and_then(|(running, enabled)| {
        // A unit file the dry run would have written is a unit that is
        // not enabled yet (systemctl reads the disk, where it is not).
        let enabled = match enabled {
            Enablement::NotFound if unit_files(name).iter().any(|p| would_exist(p)) => {
                Enablement::Disabled
            }
            other => other,
        };
        plan(name, root, running, &enabled, wanted)
    });
    let steps = match planned {
        Ok(s) => s,
        Err(e) => return Applied::failed(e),
    };
    let (changes, log) = match perform(dry_run, &steps) {
        Ok(done) => done,
        Err(failed) => return failed,
    };
    if !dry_run && !steps.is_empty() {
        let again = Wanted {
            notified: None,
            ..wanted
        };
        match read(name, root, need_enabled, need_active)
            .and_then(|(r, e)| plan(name, root, r, &e, again))
        {
            Ok(left) if left.is_empty() => {}
            Ok(left) => {
                let what: Vec<String> = left.iter().map(|s| s.change.what.clone()).collect();
                return Applied {
                    outcome: Outcome::Failed(format!(
                        "`{name}` still differs after the change ({})",
                        what.join(", ")
                    )),
                    changes,
                    output: Some(log),
                };
            }
            Err(e) => return Applied::failed(e),
        }
    }
    let mut done = applied(changes, log);
    if root.is_some() && need_active && done.outcome == Outcome::Repaired {
        done.changes.push(change("note", "", UNDER_ROOT));
    }
    done
}

/// Where a unit file of `name` may be (a name without a suffix is a
/// `.service`).
fn unit_files(name: &str) -> Vec<String> {
    let unit = if name.contains('.') {
        name.to_owned()
    } else {
        format!("{name}.service")
    };
    [
        "/etc/systemd/system",
        "/lib/systemd/system",
        "/usr/lib/systemd/system",
    ]
    .iter()
    .map(|dir| format!("{dir}/{unit}"))
    .collect()
}

/// Why `state` and notifications are left alone under `--root`.
const UNDER_ROOT: &str =
    "state and notifications are not checked under --root: no systemd runs inside the root";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::service::OnNotify;

    fn shown(steps: &[Step]) -> Vec<String> {
        steps
            .iter()
            .filter_map(|s| s.cmd.as_ref().map(Cmd::shown))
            .collect()
    }

    fn want(running: Option<bool>, enabled: Option<bool>, notified: Option<OnNotify>) -> Wanted {
        Wanted {
            running,
            enabled,
            notified,
        }
    }

    #[test]
    fn state_parsing() {
        assert_eq!(parse_active("active\n"), Ok(true));
        assert_eq!(parse_active("activating\n"), Ok(true));
        assert_eq!(parse_active("inactive\n"), Ok(false));
        assert_eq!(parse_active("failed\n"), Ok(false));
        assert!(parse_active("").is_err());
        assert!(parse_active("System has not been booted with systemd").is_err());
        assert_eq!(parse_enabled("enabled\n", ""), Ok(Enablement::Enabled));
        assert_eq!(parse_enabled("disabled\n", ""), Ok(Enablement::Disabled));
        assert_eq!(
            parse_enabled("static\n", ""),
            Ok(Enablement::Fixed("static".into()))
        );
        assert_eq!(parse_enabled("masked\n", ""), Ok(Enablement::Masked));
        assert_eq!(parse_enabled("not-found\n", ""), Ok(Enablement::NotFound));
        assert_eq!(
            parse_enabled(
                "",
                "Failed to get unit file state for x.service: No such file or directory\n"
            ),
            Ok(Enablement::NotFound)
        );
        assert!(parse_enabled("", "Failed to connect to bus").is_err());
    }

    #[test]
    fn commands_on_the_host() {
        let steps = plan(
            "nginx",
            None,
            Some(false),
            &Enablement::Disabled,
            want(Some(true), Some(true), None),
        )
        .unwrap();
        assert_eq!(
            shown(&steps),
            ["systemctl enable -- nginx", "systemctl start -- nginx"]
        );
        let steps = plan(
            "nginx",
            None,
            Some(true),
            &Enablement::Enabled,
            want(Some(false), Some(false), None),
        )
        .unwrap();
        assert_eq!(
            shown(&steps),
            ["systemctl disable -- nginx", "systemctl stop -- nginx"]
        );
        assert!(plan(
            "nginx",
            None,
            Some(true),
            &Enablement::Enabled,
            want(Some(true), Some(true), None)
        )
        .unwrap()
        .is_empty());
    }

    #[test]
    fn notifications_restart_or_reload_a_running_service_once() {
        let r = Some(OnNotify::Restart);
        assert_eq!(
            shown(
                &plan(
                    "nginx",
                    None,
                    Some(true),
                    &Enablement::Enabled,
                    want(Some(true), None, r)
                )
                .unwrap()
            ),
            ["systemctl restart -- nginx"]
        );
        assert_eq!(
            shown(
                &plan(
                    "nginx",
                    None,
                    Some(true),
                    &Enablement::Enabled,
                    want(None, None, Some(OnNotify::Reload))
                )
                .unwrap()
            ),
            ["systemctl reload -- nginx"]
        );
        // Just started: no restart on top. Stopped and meant to be: none.
        assert_eq!(
            shown(
                &plan(
                    "nginx",
                    None,
                    Some(false),
                    &Enablement::Enabled,
                    want(Some(true), None, r)
                )
                .unwrap()
            ),
            ["systemctl start -- nginx"]
        );
        assert!(plan(
            "nginx",
            None,
            Some(false),
            &Enablement::Enabled,
            want(None, None, r)
        )
        .unwrap()
        .is_empty());
    }

    #[test]
    fn under_a_root_only_unit_files_are_touched() {
        let root = Some(Path::new("/img"));
        let steps = plan(
            "nginx",
            root,
            None,
            &Enablement::Disabled,
            want(Some(true), Some(true), None),
        )
        .unwrap();
        assert_eq!(shown(&steps), ["systemctl --root=/img enable -- nginx"]);
    }

    #[test]
    fn impossible_requests_fail_with_the_reason() {
        let err = plan(
            "x",
            None,
            None,
            &Enablement::Fixed("static".into()),
            want(None, Some(false), None),
        )
        .unwrap_err();
        assert!(err.contains("static"), "{err}");
        assert!(plan(
            "x",
            None,
            None,
            &Enablement::Masked,
            want(None, Some(true), None)
        )
        .unwrap_err()
        .contains("masked"));
        assert!(plan(
            "x",
            None,
            None,
            &Enablement::NotFound,
            want(None, Some(true), None)
        )
        .unwrap_err()
        .contains("no unit"));
        // A static unit promised enabled is kept.
        assert!(plan(
            "x",
            None,
            None,
            &Enablement::Fixed("static".into()),
            want(None, Some(true), None)
        )
        .unwrap()
        .is_empty());
    }
}
