//! `service` promises: which service manager handles one, and what a
//! promise asks of it. The managers are [`super::systemd`] and
//! [`super::runit`].

use std::path::Path;

use crate::instance::Instance;
use crate::outcome::Applied;
use crate::rootfs::RootFs;

/// What a notification does to a running service (`on_notify`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnNotify {
    Restart,
    Reload,
}

impl OnNotify {
    pub fn verb(self) -> &'static str {
        match self {
            OnNotify::Restart => "restart",
            OnNotify::Reload => "reload",
        }
    }
}

/// What one service promise wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// `Some(true)` for `state = running`, `Some(false)` for `stopped`.
    pub running: Option<bool>,
    pub enabled: Option<bool>,
    /// Set when a repaired promise notified this one since its last
    /// restart: restart (or reload) it if it runs and was not just started.
    pub notified: Option<OnNotify>,
}

impl Wanted {
    pub fn of(inst: &Instance, notified: bool) -> Wanted {
        Wanted {
            running: inst.str("state").map(|s| s == "running"),
            enabled: inst.bool("enabled"),
            notified: notified.then(|| match inst.str("on_notify") {
                Some("reload") => OnNotify::Reload,
                _ => OnNotify::Restart,
            }),
        }
    }
}

/// The manager of a promise: its `manager`, else the image's
/// ([`crate::facts::service_manager`]).
pub fn manager<'i>(inst: &'i Instance, root: &Path) -> &'i str {
    inst.str("manager")
        .unwrap_or_else(|| crate::facts::service_manager(root))
}

/// Whether a dry run would have created a path (a unit file, a service
/// definition) that the manager cannot see on disk yet
/// (a dry run's simulated state, issue 21); always false in a real run.
pub type WouldExist<'a> = &'a dyn Fn(&str) -> bool;

/// Converges a `service` promise through its manager.
pub fn service(
    fs: &RootFs,
    dry_run: bool,
    would_exist: WouldExist<'_>,
    inst: &Instance,
    notified: bool,
) -> Applied {
    let wanted = Wanted::of(inst, notified);
    match manager(inst, fs.path()) {
        "systemd" => super::systemd::converge(fs, dry_run, would_exist, &inst.promiser, wanted),
        "runit" => super::runit::converge(fs, dry_run, would_exist, inst, wanted),
        other => Applied::failed(format!(
            "no service backend for manager `{}` (this policyvm has `systemd` and `runit`)",
            other.escape_debug()
        )),
    }
}
