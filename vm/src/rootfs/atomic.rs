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

use rustc_hash::FxHashSet;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags};
use rustix::io::Errno;

use converge_format::atomic::{create_temp, write_in, Durable, Existing, Failure, NewFile};

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

/// The temporaries this process has created and not yet renamed or
/// removed, by their counter (`N` of `.converge-tmp.TOKEN.N`: the rest of
/// the name is this process's [`token`]). A first run of 10,000 files
/// makes 10,000 of them: a number is hashed and compared for less than a
/// name.
fn live() -> &'static Mutex<FxHashSet<u64>> {
    static LIVE: OnceLock<Mutex<FxHashSet<u64>>> = OnceLock::new();
    LIVE.get_or_init(|| Mutex::new(FxHashSet::default()))
}

/// The counter of one of this process's temporary names, if `name` is one
/// exactly as [`next_temp`] writes it (the number in decimal, without a
/// leading zero).
fn own_counter(name: &[u8]) -> Option<u64> {
    let n = name
        .strip_prefix(TEMP_PREFIX.as_bytes())?
        .strip_prefix(token().as_bytes())?
        .strip_prefix(b".")?;
    let canonical = match n {
        [] => false,
        [b'0'] => true,
        [first, ..] => *first != b'0' && n.iter().all(u8::is_ascii_digit),
    };
    if !canonical {
        return None;
    }
    std::str::from_utf8(n).ok()?.parse().ok()
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
    let Some(n) = own_counter(name) else {
        return false;
    };
    live().lock().is_ok_and(|set| set.contains(&n))
}

/// A temporary name in use; forgotten when dropped.
#[derive(Debug)]
pub(super) struct Temp {
    pub name: String,
    /// Its counter, the key of [`live`].
    n: u64,
}

impl Drop for Temp {
    fn drop(&mut self) {
        if let Ok(mut set) = live().lock() {
            set.remove(&self.n);
        }
    }
}

/// A fresh temporary name, registered as live.
fn next_temp() -> Temp {
    use std::fmt::Write as _;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    // At most 51 bytes (see the module comment); one allocation, no
    // `format!` of the whole.
    let mut name = String::with_capacity(64);
    name.push_str(TEMP_PREFIX);
    name.push_str(token());
    // Writing into a String cannot fail.
    let _ = write!(name, ".{n}");
    if let Ok(mut set) = live().lock() {
        set.insert(n);
    }
    Temp { name, n }
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

/// The first half of [`write_atomic_at`] for a staged write
/// ([`super::batch`]): a new temporary in `dir` with `contents`, owner and
/// mode, not yet synced; it stays registered as live (and so is neither
/// purged nor cleaned as stale) until the returned [`Temp`] is dropped.
/// With it, the temporary's content read back through the handle it was
/// written with (`None` if that read failed or found more than was
/// written: the caller reads it again by name).
pub(super) fn stage_at(
    dir: &OwnedFd,
    contents: &[u8],
    mode: u32,
    owner: Option<(u32, u32)>,
    shown: &str,
) -> Result<(Temp, Option<Vec<u8>>), FsError> {
    let mut temps: Vec<Temp> = Vec::new();
    let file = NewFile {
        contents,
        mode,
        owner,
        existing: Existing::Replace,
    };
    let created = create_temp::<FsError>(
        dir,
        &file,
        || {
            let temp = next_temp();
            let name = temp.name.clone();
            temps.push(temp);
            name
        },
        Durable::Later,
    );
    match created {
        Ok((name, handle)) => {
            let read = read_back(&handle, contents.len());
            drop(handle);
            temps
                .into_iter()
                .find(|t| t.name == name)
                .map(|t| (t, read))
                .ok_or_else(|| io(shown, "create a temporary file for")(Errno::NOENT))
        }
        Err(Failure::Refused(e)) => Err(e),
        Err(Failure::Io { step, errno }) => Err(io(shown, step)(errno)),
    }
}

/// The content of a file just written with `len` bytes, read from the
/// start through `file` (`pread`: no `open`, `fstat` or `close` of its
/// own); `None` if a read fails or the file turns out longer than `len`.
fn read_back(file: &std::fs::File, len: usize) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt as _;
    let mut buf = vec![0u8; len.checked_add(1)?];
    let mut got = 0usize;
    loop {
        let rest = buf.get_mut(got..)?;
        if rest.is_empty() {
            // One byte more than was written: it grew.
            return None;
        }
        match file.read_at(rest, got as u64) {
            Ok(0) => break,
            // The size written read whole: as `read_sized`, a short read
            // at the known size is the end (one `pread`, not two).
            Ok(n) if got.checked_add(n)? == len => {
                got = len;
                break;
            }
            Ok(n) => got = got.checked_add(n)?,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
    }
    buf.truncate(got);
    Some(buf)
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

    fn temp_counter(name: &str) -> u64 {
        name.rsplit('.').next().unwrap().parse().unwrap()
    }

    #[test]
    fn counters_are_read_back_from_names_as_written() {
        for n in [0, 7, 10, 99, 100, 12345, u64::MAX] {
            assert_eq!(
                own_counter(format!("{TEMP_PREFIX}{}.{n}", token()).as_bytes()),
                Some(n)
            );
        }
        assert_eq!(
            own_counter(format!("{TEMP_PREFIX}{}.", token()).as_bytes()),
            None
        );
        assert_eq!(
            own_counter(format!("{TEMP_PREFIX}{}.00", token()).as_bytes()),
            None
        );
        assert_eq!(
            own_counter(format!("{TEMP_PREFIX}{}.1a", token()).as_bytes()),
            None
        );
        assert_eq!(own_counter(b".converge-tmp.other.1"), None);
    }

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
        // Only the name exactly as written is this process's.
        let padded = format!("{TEMP_PREFIX}{}.0{}", token(), temp_counter(&name));
        let live = next_temp();
        assert!(is_live_temp(live.name.as_bytes()));
        assert!(!is_live_temp(format!("{}x", live.name).as_bytes()));
        assert!(!is_live_temp(padded.as_bytes()));
        assert!(!is_live_temp(
            format!("{TEMP_PREFIX}{}x.{}", token(), live.n).as_bytes()
        ));
        assert!(!is_temp_name(b"motd"));
        assert!(!is_temp_name(b"converge-tmp"));
    }
}
