//! `kernel_module` promises: a module loaded or not, now and at boot.
//!
//! - **Live** (only on the real system, `--root /`): loaded modules are read
//!   from `/proc/modules`, modules built into the kernel from
//!   `/lib/modules/RELEASE/modules.builtin`; `modprobe -- NAME` loads,
//!   `modprobe -r -- NAME` unloads, and the state is read again.
//! - **At boot** (`persistent`, the default): `loaded` writes
//!   `ROOT/etc/modules-load.d/converge-NAME.conf` (`NAME`), `absent` writes
//!   `ROOT/etc/modprobe.d/converge-blacklist-NAME.conf` (`blacklist NAME`
//!   against loading by alias, `install NAME /bin/false` against loading by
//!   name or as a dependency: the CIS benchmarks' pair); each removes the
//!   other file.
//! - **Under `--root DIR`** only those files are managed: the loaded
//!   modules are this machine's kernel's, not the root's.
//!
//! `modprobe` treats `-` and `_` in names as one: so does the comparison.

use std::time::Duration;

use converge_format::system::module_name_problem;

use super::process::Cmd;
use super::{applied, change, perform, sandbox, Step};
use crate::instance::Instance;
use crate::outcome::{Applied, Change, Outcome};
use crate::rootfs::RootFs;

const TIMEOUT: Duration = Duration::from_secs(60);

/// The boot-time file that loads `name`.
pub fn load_file(name: &str) -> String {
    format!("/etc/modules-load.d/converge-{name}.conf")
}

/// The boot-time file that keeps `name` from loading.
pub fn blacklist_file(name: &str) -> String {
    format!("/etc/modprobe.d/converge-blacklist-{name}.conf")
}

const HEADER: &str = "# Managed by Converge (kernel_module promise); edits are reverted.\n";

pub fn load_content(name: &str) -> String {
    format!("{HEADER}{name}\n")
}

pub fn blacklist_content(name: &str) -> String {
    format!("{HEADER}blacklist {name}\ninstall {name} /bin/false\n")
}

pub fn load_command(name: &str) -> Cmd {
    Cmd::new(&["modprobe", "--", name], TIMEOUT)
}

pub fn unload_command(name: &str) -> Cmd {
    Cmd::new(&["modprobe", "-r", "--", name], TIMEOUT)
}

/// The name as the kernel lists it (`-` is `_`).
fn kernel_name(name: &str) -> String {
    name.replace('-', "_")
}

/// The names of the modules in a `/proc/modules` text (the first field of
/// each line: `br_netfilter 32768 0 - Live 0x0000000000000000`).
pub fn parse_proc_modules(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The names of the modules in a `modules.builtin` text
/// (`kernel/net/ipv4/tcp_cubic.ko` per line).
pub fn parse_builtin(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().rsplit('/').next())
        .filter_map(|f| f.strip_suffix(".ko"))
        .map(kernel_name)
        .collect()
}

/// What the running kernel has of a module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    Loaded,
    Builtin,
    NotLoaded,
}

/// Reads the live state of `name` from `ROOT/proc/modules` and the
/// kernel's `modules.builtin`. `Err` when the kernel has no module support
/// (no `/proc/modules`) and the module is not built in.
pub fn live(fs: &RootFs, name: &str) -> Result<Live, String> {
    let want = kernel_name(name);
    let release = fs
        .read_file("/proc/sys/kernel/osrelease")
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    if !release.is_empty() && !release.contains('/') && release != ".." {
        let builtin = format!("/lib/modules/{release}/modules.builtin");
        if let Ok(Some(text)) = fs.read_file(&builtin) {
            if parse_builtin(&String::from_utf8_lossy(&text)).contains(&want) {
                return Ok(Live::Builtin);
            }
        }
    }
    match fs.read_file("/proc/modules") {
        Ok(Some(text)) => Ok(
            if parse_proc_modules(&String::from_utf8_lossy(&text)).contains(&want) {
                Live::Loaded
            } else {
                Live::NotLoaded
            },
        ),
        Ok(None) => Err(format!(
            "this kernel has no loadable module support (no /proc/modules), and `{name}` is not \
             built into it"
        )),
        Err(e) => Err(format!("cannot read /proc/modules: {e}")),
    }
}

pub fn converge(fs: &RootFs, dry_run: bool, inst: &Instance) -> Applied {
    let name = inst.promiser.as_str();
    if let Some(why) = module_name_problem(name) {
        return Applied::failed(format!(
            "`{}` is not a kernel module name: {why}; it is passed to no tool",
            name.escape_debug()
        ));
    }
    let loaded = inst.str("state").unwrap_or("loaded") == "loaded";
    let mut changes: Vec<Change> = Vec::new();
    if inst.bool("persistent").unwrap_or(true) {
        let (keep, keep_content, drop) = if loaded {
            (load_file(name), load_content(name), blacklist_file(name))
        } else {
            (
                blacklist_file(name),
                blacklist_content(name),
                load_file(name),
            )
        };
        match persist(fs, dry_run, &keep, &keep_content, &drop) {
            Ok(mut c) => changes.append(&mut c),
            Err(failed) => return failed,
        }
    }
    if sandbox(fs.path()).is_some() {
        if changes.is_empty() && inst.bool("persistent") == Some(false) {
            return Applied {
                outcome: Outcome::Skipped(
                    "under --root only the boot-time files are managed, and `persistent = false`"
                        .to_owned(),
                ),
                changes,
                output: None,
            };
        }
        return Applied::from_changes(changes);
    }
    let now = match live(fs, name) {
        Ok(now) => now,
        // No module support at all: nothing can be loaded.
        Err(_) if !loaded => return Applied::from_changes(changes),
        Err(e) => {
            return Applied {
                changes,
                ..Applied::failed(e)
            }
        }
    };
    let step = match (loaded, now) {
        (true, Live::Loaded | Live::Builtin) | (false, Live::NotLoaded) => {
            return Applied::from_changes(changes)
        }
        (false, Live::Builtin) => {
            return Applied {
                changes,
                ..Applied::failed(format!(
                    "`{name}` is built into the kernel and cannot be unloaded"
                ))
            }
        }
        (true, Live::NotLoaded) => Step::new("module", "not loaded", "loaded", load_command(name)),
        (false, Live::Loaded) => Step::new("module", "loaded", "not loaded", unload_command(name)),
    };
    let (done, log) = match perform(dry_run, &[step]) {
        Ok(done) => done,
        Err(mut failed) => {
            changes.append(&mut failed.changes);
            return Applied { changes, ..failed };
        }
    };
    changes.extend(done);
    if !dry_run {
        let stuck = match live(fs, name) {
            Ok(l) => (l != Live::NotLoaded) == loaded,
            Err(_) => !loaded,
        };
        if !stuck {
            return Applied {
                changes,
                ..Applied::failed(format!(
                    "`{name}` is still {} after modprobe",
                    if loaded { "not loaded" } else { "loaded" }
                ))
            };
        }
    }
    applied(changes, log)
}

/// Writes `keep` with `content` and removes `drop`, where they differ.
fn persist(
    fs: &RootFs,
    dry_run: bool,
    keep: &str,
    content: &str,
    drop: &str,
) -> Result<Vec<Change>, Applied> {
    let failed = |e: crate::rootfs::FsError| Applied::failed(e.to_string());
    let mut changes = Vec::new();
    let current = fs.read_file(keep).map_err(failed)?;
    if current.as_deref() != Some(content.as_bytes()) {
        if !dry_run {
            fs.write_file(keep, content.as_bytes(), 0o644, None)
                .map_err(failed)?;
        }
        let before = if current.is_some() {
            "other content"
        } else {
            "absent"
        };
        changes.push(change(
            keep,
            before,
            content.lines().skip(1).collect::<Vec<_>>().join("; "),
        ));
    }
    if fs.lstat(drop).map_err(failed)?.is_some() {
        if !dry_run {
            fs.remove(drop).map_err(failed)?;
        }
        changes.push(change(drop, "present", "absent"));
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_commands_and_files_it_would_use() {
        assert_eq!(
            load_command("br_netfilter").argv,
            ["modprobe", "--", "br_netfilter"]
        );
        assert_eq!(
            unload_command("cramfs").argv,
            ["modprobe", "-r", "--", "cramfs"]
        );
        assert_eq!(
            load_file("br_netfilter"),
            "/etc/modules-load.d/converge-br_netfilter.conf"
        );
        assert_eq!(
            blacklist_file("cramfs"),
            "/etc/modprobe.d/converge-blacklist-cramfs.conf"
        );
        assert!(blacklist_content("cramfs")
            .ends_with("\nblacklist cramfs\ninstall cramfs /bin/false\n"));
        assert!(load_content("dummy").ends_with("\ndummy\n"));
    }

    #[test]
    fn proc_modules_and_modules_builtin_are_parsed() {
        let text = "br_netfilter 32768 0 - Live 0x0000000000000000\n\
                    bridge 311296 1 br_netfilter, Live 0x0000000000000000\n";
        assert_eq!(parse_proc_modules(text), ["br_netfilter", "bridge"]);
        assert_eq!(parse_proc_modules(""), Vec::<String>::new());
        let builtin = "kernel/net/ipv4/tcp_cubic.ko\nkernel/drivers/block/loop.ko\nkernel/fs/nls/nls-base.ko\n";
        assert_eq!(parse_builtin(builtin), ["tcp_cubic", "loop", "nls_base"]);
    }

    /// Read-only, against this machine's kernel: every module named in the
    /// real /proc/modules reads as loaded; where the kernel has no module
    /// support (as on some CI virtual machines), that is said clearly.
    #[test]
    fn the_live_state_is_read_from_the_real_proc_modules() {
        let fs = RootFs::open(std::path::Path::new("/")).unwrap();
        match fs.read_file("/proc/modules").unwrap() {
            Some(text) => {
                let names = parse_proc_modules(&String::from_utf8_lossy(&text));
                for name in &names {
                    assert_eq!(live(&fs, name).unwrap(), Live::Loaded, "{name}");
                }
                assert_eq!(live(&fs, "no_such_module_here").unwrap(), Live::NotLoaded);
            }
            None => {
                let err = live(&fs, "no_such_module_here").unwrap_err();
                assert!(err.contains("no loadable module support"), "{err}");
            }
        }
    }
}
