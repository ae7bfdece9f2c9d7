//! Services, read through the manager the run would choose for them
//! ([`crate::facts::service_manager`]: systemd, or runit), with the same
//! commands and parsers as the service backends.
//!
//! - systemd: `systemctl [--root=R] is-enabled` gives `enabled`; on the
//!   host (`--root /`) `systemctl is-active` gives `state`. Under a root no
//!   systemd runs, and the run does not check `state` there, so it is left
//!   out (with a comment). A unit that is `static`, `indirect`, ... or
//!   masked cannot be enabled or disabled by `enabled`: left out, with a
//!   comment naming its state.
//! - runit: `enabled` is whether `/etc/service/NAME` exists in the root;
//!   `state` comes from `sv status` when the service is enabled and a
//!   `runsv` supervises it (the run only starts and stops enabled ones).

use super::print::{Promise, Value};
use super::{checked_name, CaptureError};
use crate::backend::runit::{self, Status, DEFAULT_SERVICE_DIR};
use crate::backend::systemd::{self, Enablement};
use crate::backend::{host_path, process, sandbox};
use crate::rootfs::RootFs;

pub fn capture(fs: &RootFs, names: &[String]) -> Result<Vec<Promise>, CaptureError> {
    for name in names {
        checked_name("service", name)?;
    }
    let manager = crate::facts::service_manager(fs.path());
    names
        .iter()
        .map(|name| match manager {
            "runit" => runit_service(fs, name),
            _ => systemd_service(fs, name),
        })
        .collect()
}

fn systemd_service(fs: &RootFs, name: &str) -> Result<Promise, CaptureError> {
    let root = sandbox(fs.path());
    let ran = process::run(&systemd::systemctl("is-enabled", name, root))
        .map_err(CaptureError::Unreadable)?;
    let enabled =
        systemd::parse_enabled(&ran.stdout, &ran.stderr).map_err(CaptureError::Unreadable)?;
    let mut p = Promise::new("service", name);
    match enabled {
        Enablement::NotFound => {
            return Err(CaptureError::NotFound(format!(
                "there is no systemd unit `{name}` in the root"
            )))
        }
        Enablement::Enabled => p.set("enabled", Value::Bool(true)),
        Enablement::Disabled => p.set("enabled", Value::Bool(false)),
        Enablement::Fixed(how) => p.note(format!(
            "enabled: not captured, the unit is {how} (enable and disable do not change it)"
        )),
        Enablement::Masked => p.note("enabled: not captured, the unit is masked"),
    }
    if root.is_some() {
        p.note("state: not captured under --root (no systemd runs inside the root)");
        return Ok(p);
    }
    let active = process::run(&systemd::systemctl("is-active", name, None))
        .map_err(CaptureError::Unreadable)?;
    let running = systemd::parse_active(&active.stdout)
        .map_err(|e| CaptureError::Unreadable(format!("{e} {}", active.stderr.trim())))?;
    // `state` comes first, as people write it.
    p.attrs.insert(
        0,
        (
            "state",
            Value::Word(if running { "running" } else { "stopped" }),
        ),
    );
    Ok(p)
}

fn runit_service(fs: &RootFs, name: &str) -> Result<Promise, CaptureError> {
    let link = format!("{DEFAULT_SERVICE_DIR}/{name}");
    let definition = format!("{}/{name}", runit::DEFAULT_SERVICE_SRC);
    let enabled = fs.lstat(&link)?.is_some();
    if !enabled && fs.lstat(&definition)?.is_none() {
        return Err(CaptureError::NotFound(format!(
            "there is no runit service `{name}` in the root (neither `{link}` nor `{definition}`)"
        )));
    }
    let mut p = Promise::new("service", name);
    if enabled {
        // `sv` follows the service link: never one that leads out of the root.
        crate::backend::contain::check(fs, &format!("{link}/supervise/control"), "`sv`")
            .map_err(CaptureError::Unreadable)?;
        let host = host_path(fs.path(), &link);
        let ran = process::run(&runit::sv("status", &host)).map_err(CaptureError::Unreadable)?;
        match runit::parse_status(&ran.stdout) {
            Ok(Status::Run { .. }) => p.set("state", Value::Word("running")),
            Ok(Status::Down) => p.set("state", Value::Word("stopped")),
            Ok(Status::Unsupervised(why)) => p.note(format!(
                "state: not captured, no runsv supervises it ({why})"
            )),
            Err(e) => p.note(format!("state: not captured ({e})")),
        }
    }
    p.set("enabled", Value::Bool(enabled));
    Ok(p)
}
