//! The one atomic write of the workspace: `policyc` writing a bundle, a
//! stamp, a key or a formatted file, and `policyvm` writing a file of the
//! root or of its state directory all go through [`write_in`].
//!
//! The new content goes to a temporary file created exclusively
//! (`O_CREAT|O_EXCL|O_NOFOLLOW`: never over an existing name, never through
//! a link) in the target's directory; it is given its owner, then its mode
//! (`fchown` clears setuid and setgid bits, so the other order loses them),
//! written, synced, renamed over the target (or, when an existing file must
//! be kept, renamed only if the name is free) and the directory is synced.
//! Killed at any instant, the target is its old content or its new one, and
//! a link planted at the temporary's name or at the target is never written
//! through (a rename replaces a link, it does not follow it).
//!
//! How temporaries are named is the caller's: the VM keeps a registry of
//! its live temporaries (so that stale ones can be told apart), the
//! compiler only needs names nobody can guess in advance.

use std::io::Write as _;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, Gid, Mode, OFlags, RenameFlags, Uid};
use rustix::io::Errno;

/// Whether an existing file at the target may be replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    Replace,
    /// Fail with `EEXIST` (a link at the target counts as a file).
    Keep,
}

/// What to write, and with which owner and mode.
#[derive(Clone, Copy, Debug)]
pub struct NewFile<'a> {
    pub contents: &'a [u8],
    pub mode: u32,
    /// `(uid, gid)`; `None` keeps the writer's own.
    pub owner: Option<(u32, u32)>,
    pub existing: Existing,
}

/// Why a write did not happen: the step that failed (`"write"`, `"set the
/// mode of"`, ...) and its error, or the caller's own refusal just before
/// the rename.
#[derive(Debug)]
pub enum Failure<E> {
    Io { step: &'static str, errno: Errno },
    Refused(E),
}

/// How many temporary names are tried before giving up (each one is
/// created exclusively; a taken name is skipped).
const TRIES: usize = 16;

/// Replaces (or creates) `name` in the directory `dir` with `file`,
/// atomically (see the module comment). `temp_name` gives a fresh
/// temporary name each time it is called. `before_rename` runs last, just
/// before the new file takes the name, with the temporary's name (a staged
/// copy a `validate` command can check); when it refuses, nothing is
/// replaced and the temporary is removed.
pub fn write_in<E>(
    dir: &impl AsFd,
    name: &str,
    file: &NewFile<'_>,
    temp_name: impl FnMut() -> String,
    before_rename: impl FnOnce(&str) -> Result<(), E>,
) -> Result<(), Failure<E>> {
    write_in_with(
        dir,
        name,
        file,
        temp_name,
        before_rename,
        |handle, contents| handle.write_all(contents),
    )
}

/// [`write_in`] with the content streamed from `source` instead of
/// [`NewFile::contents`] (a file stored as a blob, issue 22 item 5: a 1 GB
/// file never in memory). An error of `source` (a blob whose bytes are not
/// the ones the bundle names) fails the write before the rename: the
/// target keeps its old content.
pub fn write_in_from<E>(
    dir: &impl AsFd,
    name: &str,
    file: &NewFile<'_>,
    source: &mut dyn std::io::Read,
    temp_name: impl FnMut() -> String,
    before_rename: impl FnOnce(&str) -> Result<(), E>,
) -> Result<(), Failure<E>> {
    write_in_with(dir, name, file, temp_name, before_rename, |handle, _| {
        std::io::copy(source, handle).map(|_| ())
    })
}

fn write_in_with<E>(
    dir: &impl AsFd,
    name: &str,
    file: &NewFile<'_>,
    mut temp_name: impl FnMut() -> String,
    before_rename: impl FnOnce(&str) -> Result<(), E>,
    write: impl FnOnce(&mut std::fs::File, &[u8]) -> std::io::Result<()>,
) -> Result<(), Failure<E>> {
    let io = |step| move |errno| Failure::Io { step, errno };
    let (temp, _) = create_temp_with(dir, file, &mut temp_name, Durable::Now, false, write)?;
    let result = before_rename(&temp)
        .map_err(Failure::Refused)
        .and_then(|()| {
            let flags = match file.existing {
                Existing::Replace => RenameFlags::empty(),
                Existing::Keep => RenameFlags::NOREPLACE,
            };
            rfs::renameat_with(dir, temp.as_str(), dir, name, flags)
                .map_err(io("rename into place"))
        });
    if result.is_err() {
        let _ = rfs::unlinkat(dir, temp.as_str(), AtFlags::empty());
        return result;
    }
    sync_dir(dir).map_err(io("sync the directory of"))
}

/// When a new temporary's content is made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durable {
    /// `fsync` before it is handed back ([`write_in`]).
    Now,
    /// By the caller, before the rename: a batch of temporaries is made
    /// durable together (one `syncfs`, `policyvm`'s staged writes).
    Later,
}

/// The first half of [`write_in`]: a new temporary in `dir` with `file`'s
/// owner, mode and content (synced or not, as `durable` says), its name,
/// and the handle it was written through, open for reading too (the
/// caller may read the new content back without opening it again). On
/// failure nothing is left behind.
pub fn create_temp<E>(
    dir: &impl AsFd,
    file: &NewFile<'_>,
    temp_name: impl FnMut() -> String,
    durable: Durable,
) -> Result<(String, std::fs::File), Failure<E>> {
    create_temp_with(dir, file, temp_name, durable, true, |handle, contents| {
        handle.write_all(contents)
    })
}

fn create_temp_with<E>(
    dir: &impl AsFd,
    file: &NewFile<'_>,
    mut temp_name: impl FnMut() -> String,
    durable: Durable,
    readable: bool,
    write: impl FnOnce(&mut std::fs::File, &[u8]) -> std::io::Result<()>,
) -> Result<(String, std::fs::File), Failure<E>> {
    let io = |step| move |errno| Failure::Io { step, errno };
    let access = if readable {
        OFlags::RDWR
    } else {
        OFlags::WRONLY
    };
    let mut created = None;
    for _ in 0..TRIES {
        let temp = temp_name();
        match rfs::openat(
            dir,
            temp.as_str(),
            access | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o600),
        ) {
            Ok(fd) => {
                created = Some((temp, fd));
                break;
            }
            Err(Errno::EXIST) => {}
            Err(e) => return Err(io("create a temporary file for")(e)),
        }
    }
    let Some((temp, fd)) = created else {
        return Err(io("create a temporary file for")(Errno::EXIST));
    };
    let filled = fill_with(fd, file, write).and_then(|handle| match durable {
        Durable::Now => rfs::fsync(&handle).map_err(io("sync")).map(|()| handle),
        Durable::Later => Ok(handle),
    });
    match filled {
        Ok(handle) => Ok((temp, handle)),
        Err(e) => {
            let _ = rfs::unlinkat(dir, temp.as_str(), AtFlags::empty());
            Err(e)
        }
    }
}

/// Owner, mode and content (written by `write`) of a new temporary, and
/// its handle (the caller syncs it): owner and mode are set
/// before a byte is written, so a secret (issue 20) is never in a file
/// with the wrong owner or mode, even for an instant; the test of this
/// order observes the temporary as `write` finds it.
fn fill_with<E>(
    fd: OwnedFd,
    file: &NewFile<'_>,
    write: impl FnOnce(&mut std::fs::File, &[u8]) -> std::io::Result<()>,
) -> Result<std::fs::File, Failure<E>> {
    let io = |step| move |errno| Failure::Io { step, errno };
    if let Some((uid, gid)) = file.owner {
        rfs::fchown(&fd, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
            .map_err(io("set the owner of"))?;
    }
    rfs::fchmod(&fd, Mode::from_bits_truncate(file.mode)).map_err(io("set the mode of"))?;
    let mut handle = std::fs::File::from(fd);
    write(&mut handle, file.contents)
        .map_err(|e| io("write")(Errno::from_io_error(&e).unwrap_or(Errno::IO)))?;
    Ok(handle)
}

/// `fsync` of a directory, so that a rename in it is durable.
pub fn sync_dir(dir: &impl AsFd) -> Result<(), Errno> {
    let fd = rfs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    rfs::fsync(&fd)
}

/// [`write_in`] for a path the operator named (the directory part is the
/// operator's own and is followed like any path they type; the file name
/// itself is never written through). Temporaries are `.policyc-` plus the
/// process id, the time in nanoseconds and a counter: unknown in advance,
/// and created exclusively anyway.
pub fn write_path(
    path: &Path,
    contents: &[u8],
    mode: u32,
    existing: Existing,
) -> std::io::Result<()> {
    let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path names no file (or a name that is not UTF-8)",
        ));
    };
    let parent = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let dir = rfs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let temp_name = || {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        format!(".policyc-{}-{nanos:x}-{n}.tmp", std::process::id())
    };
    let file = NewFile {
        contents,
        mode,
        owner: None,
        existing,
    };
    write_in(&dir, name, &file, temp_name, |_| Ok::<(), Errno>(())).map_err(|f| match f {
        Failure::Io { errno, .. } | Failure::Refused(errno) => std::io::Error::from(errno),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_at_the_target_is_replaced_not_followed_and_keep_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let target = dir.path().join("out");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        let err = write_path(&target, b"new", 0o644, Existing::Keep).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        write_path(&target, b"new", 0o640, Existing::Replace).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new");
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::symlink_metadata(&target)
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o640);
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 2, "no temporary left behind");
    }

    #[test]
    fn a_refusal_before_the_rename_replaces_nothing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "old").unwrap();
        let fd = rfs::open(
            dir.path(),
            OFlags::RDONLY | OFlags::DIRECTORY,
            Mode::empty(),
        )
        .unwrap();
        let file = NewFile {
            contents: b"new",
            mode: 0o644,
            owner: None,
            existing: Existing::Replace,
        };
        let r = write_in(
            &fd,
            "f",
            &file,
            || ".t".to_owned(),
            |staged| Err(staged.to_owned()),
        );
        assert!(matches!(r, Err(Failure::Refused(ref s)) if s == ".t"));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("f")).unwrap(),
            "old"
        );
        assert!(!dir.path().join(".t").exists());
    }

    /// The temporary already has the promised mode (and owner) when its
    /// content is written: a secret file is never readable by others, not
    /// even between the write and a later `chmod`.
    #[test]
    fn mode_and_owner_are_set_before_the_content_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t");
        let fd = rfs::open(
            &path,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL,
            Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let (uid, gid) = (rustix::process::geteuid(), rustix::process::getegid());
        let file = NewFile {
            contents: b"secret",
            mode: 0o600,
            owner: Some((uid.as_raw(), gid.as_raw())),
            existing: Existing::Replace,
        };
        let mut seen = None;
        fill_with::<()>(fd, &file, |handle, contents| {
            let st = rfs::fstat(&*handle).map_err(std::io::Error::from)?;
            seen = Some((st.st_mode & 0o7777, st.st_size, st.st_uid));
            handle.write_all(contents)
        })
        .unwrap();
        assert_eq!(seen, Some((0o600, 0, uid.as_raw())));
        assert_eq!(std::fs::read(&path).unwrap(), b"secret");
    }
}
