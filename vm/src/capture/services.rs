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
    if enabled == Enablement::NotFound {
        return Err(CaptureError::NotFound(format!(
            "there is no systemd unit `{name}` in the root"
        )));
    }
    // Under a root no systemd runs: only the host has a running state.
    let running = if root.is_some() {
        None
    } else {
        let active = process::run(&systemd::systemctl("is-active", name, None))
            .map_err(CaptureError::Unreadable)?;
        Some(
            systemd::parse_active(&active.stdout)
                .map_err(|e| CaptureError::Unreadable(format!("{e} {}", active.stderr.trim())))?,
        )
    };
    Ok(systemd_promise(name, &enabled, running))
}

/// The promise of a systemd unit in this state; `running` is `None` under
/// `--root`.
fn systemd_promise(name: &str, enabled: &Enablement, running: Option<bool>) -> Promise {
    let mut p = Promise::new("service", name);
    if let Some(running) = running {
        p.set(
            "state",
            Value::Word(if running { "running" } else { "stopped" }),
        );
    }
    match enabled {
        Enablement::Enabled => p.set("enabled", Value::Bool(true)),
        Enablement::Disabled => p.set("enabled", Value::Bool(false)),
        Enablement::Fixed(how) => p.note(format!(
            "enabled: not captured, the unit is {how} (enable and disable do not change it)"
        )),
        Enablement::Masked => p.note("enabled: not captured, the unit is masked"),
        Enablement::NotFound => {}
    }
    if running.is_none() {
        p.note("state: not captured under --root (no systemd runs inside the root)");
    }
    p
}

fn runit_service(fs: &RootFs, name: &str) -> Result<Promise, CaptureError> {
    let link = format!("{DEFAULT_SERVICE_DIR}/{name}");
    let definition = format!("{}/{name}", runit::DEFAULT_SERVICE_SRC);
    // As the runit backend reads them (the run would fail the same way).
    let look = |path: &str| {
        fs.lstat(path).map_err(|e| {
            CaptureError::Unreadable(format!(
                "runit service `{name}` (the service manager of this root): {e}"
            ))
        })
    };
    let enabled = look(&link)?.is_some();
    if !enabled && look(&definition)?.is_none() {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capture::print;

    fn text(p: Promise) -> String {
        print::policy(&[], &[p]).unwrap_or_default()
    }

    #[test]
    fn systemd_units_on_the_host_and_under_a_root() {
        let on_host = text(systemd_promise("nginx", &Enablement::Enabled, Some(true)));
        assert!(
            on_host.contains("    state   = running;\n    enabled = true;\n  }"),
            "{on_host}"
        );
        let stopped = text(systemd_promise("cron", &Enablement::Disabled, Some(false)));
        assert!(stopped.contains("state   = stopped;"), "{stopped}");
        assert!(stopped.contains("enabled = false;"), "{stopped}");
        let in_root = text(systemd_promise("nginx", &Enablement::Enabled, None));
        assert!(!in_root.contains("state ="), "{in_root}");
        assert!(
            in_root.contains("// state: not captured under --root"),
            "{in_root}"
        );
        let fixed = text(systemd_promise(
            "getty",
            &Enablement::Fixed("static".into()),
            Some(true),
        ));
        assert!(!fixed.contains("enabled ="), "{fixed}");
        assert!(fixed.contains("the unit is static"), "{fixed}");
        let masked = text(systemd_promise("x", &Enablement::Masked, Some(false)));
        assert!(masked.contains("the unit is masked"), "{masked}");
    }
}
