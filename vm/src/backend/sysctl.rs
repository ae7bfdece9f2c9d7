//! `sysctl` promises: a kernel parameter's live value and its value at boot.
//!
//! - **Live** (only on the real system, `--root /`): read from
//!   `/proc/sys/PATH`, set with `sysctl -w KEY=VALUE`, read again.
//! - **At boot** (`persistent`, the default): the key's own file
//!   `ROOT/etc/sysctl.d/60-converge-KEY.conf` holding exactly
//!   `KEY = VALUE`, written atomically through [`crate::rootfs`]. One file
//!   per key, so two promises never edit one file and removing a promise's
//!   file removes exactly its key.
//! - **Under `--root DIR`** only the file is managed: the live values are
//!   this machine's kernel, not the root's.
//!
//! Values are compared with blanks normalised (`32768\t60999` is
//! `32768 60999`), as `sysctl` itself prints them differently from how
//! people write them.

use std::time::Duration;

use super::process::Cmd;
use super::{applied, change, perform, sandbox, Step};
use crate::instance::Instance;
use crate::outcome::{Applied, Change};
use crate::rootfs::RootFs;
use converge_format::system::{
    sysctl_key_problem, sysctl_normalised, sysctl_path, sysctl_value_problem,
};

/// How long `sysctl -w` may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The directory of the boot-time files.
pub const DIR: &str = "/etc/sysctl.d";

/// The file that holds `key` at boot.
pub fn file_for(key: &str) -> String {
    format!("{DIR}/60-converge-{}.conf", key.replace('/', "."))
}

/// The exact content of that file.
pub fn file_content(key: &str, value: &str) -> String {
    format!("# Managed by Converge (sysctl promise); edits are reverted.\n{key} = {value}\n")
}

/// The command that sets the live value.
pub fn set_command(key: &str, value: &str) -> Cmd {
    Cmd::new(
        &[
            "sysctl".to_owned(),
            "-w".to_owned(),
            format!("{key}={value}"),
        ],
        TIMEOUT,
    )
}

/// The live value of `key` from `ROOT/proc/sys`, blanks normalised; `Err`
/// when the kernel has no such parameter.
pub fn live_value(fs: &RootFs, key: &str) -> Result<String, String> {
    let path = format!("/proc/sys/{}", sysctl_path(key));
    match fs.read_file(&path) {
        Ok(Some(bytes)) => Ok(sysctl_normalised(&String::from_utf8_lossy(&bytes))),
        Ok(None) => Err(format!(
            "the kernel has no parameter `{key}` (no {path}); check the key's spelling, or load \
             the module that provides it first"
        )),
        Err(e) => Err(format!("cannot read the live value of `{key}`: {e}")),
    }
}

pub fn converge(fs: &RootFs, dry_run: bool, inst: &Instance) -> Applied {
    let key = inst.promiser.as_str();
    if let Some(why) = sysctl_key_problem(key) {
        return Applied::failed(format!(
            "`{}` is not a sysctl key: {why}",
            key.escape_debug()
        ));
    }
    let Some(value) = inst.str("value") else {
        return Applied::failed("a sysctl promise needs a `value`");
    };
    if let Some(why) = sysctl_value_problem(value) {
        return Applied::failed(format!("`value = {value:?}` is not usable: {why}"));
    }
    let want = sysctl_normalised(value);
    let mut changes: Vec<Change> = Vec::new();
    if inst.bool("persistent").unwrap_or(true) {
        match persist(fs, dry_run, key, &want) {
            Ok(Some(c)) => changes.push(c),
            Ok(None) => {}
            Err(failed) => return failed,
        }
    }
    if sandbox(fs.path()).is_some() {
        // Under --root the live values are this machine's, not the root's.
        return Applied::from_changes(changes);
    }
    let current = match live_value(fs, key) {
        Ok(v) => v,
        Err(e) => {
            return Applied {
                changes,
                ..Applied::failed(e)
            }
        }
    };
    if current == want {
        return Applied::from_changes(changes);
    }
    let step = Step::new("live value", current, want.clone(), set_command(key, &want));
    let (done, log) = match perform(dry_run, &[step]) {
        Ok(done) => done,
        Err(mut failed) => {
            changes.append(&mut failed.changes);
            return Applied { changes, ..failed };
        }
    };
    changes.extend(done);
    if !dry_run {
        match live_value(fs, key) {
            Ok(now) if now == want => {}
            Ok(now) => {
                return Applied {
                    changes,
                    ..Applied::failed(format!(
                        "`{key}` is {now:?} after `sysctl -w`, not {want:?} (the kernel \
                         refused or rounded the value)"
                    ))
                }
            }
            Err(e) => {
                return Applied {
                    changes,
                    ..Applied::failed(e)
                }
            }
        }
    }
    applied(changes, log)
}

/// Writes the key's boot-time file if it differs.
fn persist(fs: &RootFs, dry_run: bool, key: &str, value: &str) -> Result<Option<Change>, Applied> {
    let path = file_for(key);
    let content = file_content(key, value);
    let current = fs
        .read_file(&path)
        .map_err(|e| Applied::failed(e.to_string()))?;
    if current.as_deref() == Some(content.as_bytes()) {
        return Ok(None);
    }
    if !dry_run {
        fs.write_file(&path, content.as_bytes(), 0o644, None)
            .map_err(|e| Applied::failed(e.to_string()))?;
    }
    let before = match current {
        None => "absent".to_owned(),
        Some(_) => "other content".to_owned(),
    };
    Ok(Some(change(&path, before, format!("{key} = {value}"))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_and_files_it_would_use() {
        assert_eq!(
            set_command("net.ipv4.ip_local_port_range", "32768 60999").argv,
            ["sysctl", "-w", "net.ipv4.ip_local_port_range=32768 60999"]
        );
        assert_eq!(
            file_for("net.ipv4.ip_forward"),
            "/etc/sysctl.d/60-converge-net.ipv4.ip_forward.conf"
        );
        assert_eq!(
            file_for("net/ipv4/conf/eth0.1/rp_filter"),
            "/etc/sysctl.d/60-converge-net.ipv4.conf.eth0.1.rp_filter.conf"
        );
        assert!(file_content("vm.swappiness", "10").ends_with("\nvm.swappiness = 10\n"));
    }

    /// Read-only, against this machine's real kernel interface.
    #[test]
    fn the_live_value_is_read_from_the_real_proc_sys() {
        let fs = RootFs::open(std::path::Path::new("/")).unwrap();
        assert_eq!(live_value(&fs, "kernel.ostype").unwrap(), "Linux");
        assert_eq!(live_value(&fs, "kernel/ostype").unwrap(), "Linux");
        let err = live_value(&fs, "kernel.no_such_parameter").unwrap_err();
        assert!(
            err.contains("no parameter `kernel.no_such_parameter`"),
            "{err}"
        );
    }
}
