//! The VM's side of the one atomic write (`converge_format::atomic`),
//! used for files of the root
//! ([`super::RootFs::write_file`]) and of the state directory
//! ([`crate::state`]) alike: the new content goes to a temporary file
//! created exclusively (`O_EXCL|O_NOFOLLOW`) in the target's directory, is
//! given its owner and then its mode, synced, renamed over the target, and
//! the directory is synced. Killed at any instant, a file is either its old
//! content or its new one.
//!
//! Temporary names are `.converge-tmp.TOKEN.N`: `TOKEN` is this process's
//! (its pid and start time), `N` a counter. They are at most 51 bytes, so a
//! target of any length up to `NAME_MAX` (255) has one (a name built from
//! the target's own, `.NAME.converge-tmp`, did not fit for names of 242
//! bytes and more). A temporary that is in none of this process's writes
//! right now is stale (left by a run killed with SIGKILL): purge deletes
//! it like any unmanaged entry, and a run cleans those of every directory
//! it manages ([`super::RootFs::clean_stale_temporaries`]).

use std::collections::HashSet;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags};
use rustix::io::Errno;

use converge_format::atomic::{write_in, Existing, Failure, NewFile};

use super::{io, FsError};

/// Starts the name of every temporary file or link the VM creates.
pub const TEMP_PREFIX: &str = ".converge-tmp.";

/// Ends the names temporaries had before (`.NAME.converge-tmp`); a run
/// killed by an older VM may have left one, so they are stale too.
const LEGACY_SUFFIX: &str = ".converge-tmp";

/// This process's part of its temporary names.
fn token() -> &'static str {
    static TOKEN: OnceLock<String> = OnceLock::new();
    TOKEN.get_or_init(|| {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        format!("{:x}{nanos:08x}", std::process::id())
    })
}

/// The temporaries this process has created and not yet renamed or removed.
fn live() -> &'static Mutex<HashSet<String>> {
    static LIVE: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(HashSet::new()))
}

/// Whether `name` is one of the VM's temporary names (this process's or
/// another's, current or legacy pattern).
pub fn is_temp_name(name: &[u8]) -> bool {
    name.starts_with(TEMP_PREFIX.as_bytes())
        || (name.starts_with(b".") && name.ends_with(LEGACY_SUFFIX.as_bytes()))
}

/// Whether `name` is a temporary this process is writing right now: the
/// only entry purge and the stale-temporary cleaning leave alone.
pub fn is_live_temp(name: &[u8]) -> bool {
    let Ok(name) = std::str::from_utf8(name) else {
        return false;
    };
    live().lock().is_ok_and(|set| set.contains(name))
}

/// A temporary name in use; forgotten when dropped.
pub(super) struct Temp {
    pub name: String,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Ok(mut set) = live().lock() {
            set.remove(&self.name);
        }
    }
}

/// A fresh temporary name, registered as live.
fn next_temp() -> Temp {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let name = format!("{TEMP_PREFIX}{}.{n}", token());
    if let Ok(mut set) = live().lock() {
        set.insert(name.clone());
    }
    Temp { name }
}

/// Replaces (or creates) `name` in `dir` with `contents`, atomically (see
/// the module comment). The owner is set before the mode: `fchown` clears
/// the setuid and setgid bits, so the other order loses them.
/// `before_rename` runs last, just before the new file takes the name,
/// with the temporary's name (the staged copy a `validate` command checks):
/// it may refuse (the directory was moved out of the root, the new content
/// failed validation), and then nothing is replaced.
pub fn write_atomic_at(
    dir: &OwnedFd,
    name: &str,
    contents: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    shown: &str,
    before_rename: impl FnOnce(&str) -> Result<(), FsError>,
) -> Result<(), FsError> {
    // The temporaries stay registered as live until the write is over.
    let mut temps: Vec<Temp> = Vec::new();
    let file = NewFile {
        contents,
        mode,
        owner,
        existing: Existing::Replace,
    };
    let result = write_in(
        dir,
        name,
        &file,
        || {
            let temp = next_temp();
            let name = temp.name.clone();
            temps.push(temp);
            name
        },
        before_rename,
    );
    match result {
        Ok(()) => Ok(()),
        Err(Failure::Refused(e)) => Err(e),
        Err(Failure::Io { step, errno }) => Err(io(shown, step)(errno)),
    }
}

/// [`write_atomic_at`] with the content streamed from `source` (a file
/// stored as a blob, issue 22 item 5).
pub fn write_atomic_from_at(
    dir: &OwnedFd,
    name: &str,
    source: &mut dyn std::io::Read,
    mode: u32,
    owner: Option<(u32, u32)>,
    shown: &str,
    before_rename: impl FnOnce(&str) -> Result<(), FsError>,
) -> Result<(), FsError> {
    let mut temps: Vec<Temp> = Vec::new();
    let file = NewFile {
        contents: &[],
        mode,
        owner,
        existing: Existing::Replace,
    };
    let result = converge_format::atomic::write_in_from(
        dir,
        name,
        &file,
        source,
        || {
            let temp = next_temp();
            let name = temp.name.clone();
            temps.push(temp);
            name
        },
        before_rename,
    );
    match result {
        Ok(()) => Ok(()),
        Err(Failure::Refused(e)) => Err(e),
        Err(Failure::Io { step, errno }) => Err(io(shown, step)(errno)),
    }
}

/// Makes `name` in `dir` a link to `target`, replacing what is there
/// atomically (through a temporary link and a rename).
pub fn symlink_atomic_at(
    dir: &OwnedFd,
    name: &str,
    target: &str,
    shown: &str,
) -> Result<(), FsError> {
    let mut made = None;
    for _ in 0..16 {
        let temp = next_temp();
        match rfs::symlinkat(target, dir, temp.name.as_str()) {
            Ok(()) => {
                made = Some(temp);
                break;
            }
            Err(Errno::EXIST) => {}
            Err(e) => return Err(io(shown, "create link")(e)),
        }
    }
    let Some(temp) = made else {
        return Err(io(shown, "create link")(Errno::EXIST));
    };
    if let Err(e) = rfs::renameat(dir, temp.name.as_str(), dir, name) {
        let _ = rfs::unlinkat(dir, temp.name.as_str(), AtFlags::empty());
        return Err(io(shown, "rename link into place")(e));
    }
    sync_dir(dir, shown)
}

/// `fsync` of a directory, so that a rename in it is durable.
pub fn sync_dir(dir: &OwnedFd, shown: &str) -> Result<(), FsError> {
    converge_format::atomic::sync_dir(dir).map_err(io(shown, "sync the directory of"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temporary_names_fit_any_target_and_are_recognised() {
        let temp = next_temp();
        assert!(temp.name.len() <= 51, "{}", temp.name);
        assert!(is_temp_name(temp.name.as_bytes()));
        assert!(is_live_temp(temp.name.as_bytes()));
        let name = temp.name.clone();
        drop(temp);
        assert!(!is_live_temp(name.as_bytes()), "a finished write is stale");
        assert!(is_temp_name(b".motd.converge-tmp"), "legacy pattern");
        assert!(!is_temp_name(b"motd"));
        assert!(!is_temp_name(b"converge-tmp"));
    }
}
