//! A directory inside the state directory (`identity/`, `spool/`): created
//! with its own mode, opened without following a link, and every file in
//! it read and written relative to that handle, like the state directory's
//! own files (bounded reads, the one atomic write).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::rootfs::{is_temp_name, read_at, write_atomic_at};

/// A subdirectory of a [`super::StateDir`], held open.
#[derive(Debug)]
pub struct SubDir {
    dir: PathBuf,
    fd: OwnedFd,
}

/// What [`SubDir::stat`] tells of a file: enough to guard a secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileInfo {
    pub mode: u32,
    pub uid: u32,
    pub len: u64,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl SubDir {
    /// Opens `name` in the directory `parent` (shown as `shown`), creating
    /// it with `mode` when missing. A link in its place is refused.
    pub(super) fn open(
        parent: &OwnedFd,
        shown: &Path,
        name: &str,
        mode: u32,
    ) -> std::io::Result<SubDir> {
        match rfs::mkdirat(parent, name, Mode::from_bits_truncate(mode)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let dir = shown.join(name);
        let fd = rfs::openat(parent, name, DIR_FLAGS, Mode::empty()).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => std::io::Error::other(format!(
                "`{}` is not a directory (a symbolic link is not followed)",
                dir.display()
            )),
            e => e.into(),
        })?;
        Ok(SubDir { dir, fd })
    }

    /// The directory `name` inside this one, created with `mode` when
    /// missing, opened without following a link.
    pub fn subdir(&self, name: &str, mode: u32) -> std::io::Result<SubDir> {
        SubDir::open(&self.fd, &self.dir, name, mode)
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// The directory's own mode and owner.
    pub fn info(&self) -> std::io::Result<FileInfo> {
        let st = rfs::fstat(&self.fd)?;
        Ok(FileInfo {
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            len: 0,
        })
    }

    /// Mode, owner and size of `file` (not following a link); `None` when
    /// it does not exist.
    pub fn stat(&self, file: &str) -> std::io::Result<Option<FileInfo>> {
        match rfs::statat(&self.fd, file, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(FileInfo {
                mode: st.st_mode & 0o7777,
                uid: st.st_uid,
                len: u64::try_from(st.st_size).unwrap_or(0),
            })),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The bytes of `file`, `None` when it does not exist; a link, a FIFO
    /// or a file over `limit` bytes is an error.
    pub fn read(&self, file: &str, limit: usize) -> std::io::Result<Option<Vec<u8>>> {
        read_at(
            &self.fd,
            file,
            limit as u64,
            &self.path(file).display().to_string(),
        )
        .map_err(std::io::Error::other)
    }

    /// Replaces `file` atomically and durably, with `mode`.
    pub fn write(&self, file: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let shown = self.path(file).display().to_string();
        write_atomic_at(&self.fd, file, bytes, mode, None, &shown, |_| Ok(()))
            .map_err(std::io::Error::other)
    }

    /// Appends `bytes` to `file` (created with `mode` when missing, never
    /// through a link) and syncs it: for append-only logs (the `watch`
    /// history), where rewriting the whole file on every append would
    /// cost its size each time.
    pub fn append(&self, file: &str, bytes: &[u8], mode: u32) -> std::io::Result<()> {
        let fd = rfs::openat(
            &self.fd,
            file,
            OFlags::WRONLY
                | OFlags::APPEND
                | OFlags::CREATE
                | OFlags::NOFOLLOW
                | OFlags::NONBLOCK
                | OFlags::CLOEXEC,
            Mode::from_bits_truncate(mode),
        )?;
        let st = rfs::fstat(&fd)?;
        if rfs::FileType::from_raw_mode(st.st_mode) != rfs::FileType::RegularFile {
            return Err(std::io::Error::other(format!(
                "`{}` is not a regular file",
                self.path(file).display()
            )));
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = rustix::io::write(&fd, rest)?;
            rest = rest.get(n..).unwrap_or_default();
        }
        rfs::fsync(&fd)?;
        Ok(())
    }

    /// Removes `file`; a file already gone is not an error.
    pub fn remove(&self, file: &str) -> std::io::Result<()> {
        match rfs::unlinkat(&self.fd, file, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// The names in the directory, sorted, without `.`, `..` and the
    /// temporaries of atomic writes.
    pub fn names(&self) -> std::io::Result<Vec<String>> {
        let listing = rfs::openat(&self.fd, ".", DIR_FLAGS, Mode::empty())?;
        let mut dir = rfs::Dir::read_from(&listing)?;
        let mut names = Vec::new();
        while let Some(entry) = dir.read() {
            let entry = entry?;
            let name = entry.file_name().to_bytes();
            if name == b"." || name == b".." || is_temp_name(name) {
                continue;
            }
            if let Ok(name) = std::str::from_utf8(name) {
                names.push(name.to_owned());
            }
        }
        names.sort();
        Ok(names)
    }
}
