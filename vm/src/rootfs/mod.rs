//! The only way the VM touches files: paths resolved inside a root, one
//! component at a time, never following a symbolic link.
//!
//! A policy path (`/etc/motd`) is walked from a directory handle on the root
//! with `openat(O_NOFOLLOW)`, so a link planted anywhere along it — `ROOT/etc`
//! pointing at `/etc`, or `ROOT/etc/motd` pointing at `/etc/shadow` — stops
//! the walk with [`FsError::Symlink`] instead of leading out of the root.
//! Nothing here can name a file outside the root: there is no `..`, and no
//! absolute path is ever handed to the kernel past the root itself.
//!
//! Writes are atomic ([`atomic`]); a tree is removed iteratively with a
//! bounded number of descriptors ([`remove`]); a name read from a directory
//! is escaped before it is shown ([`names`]). This module and those are the
//! only code of the VM that opens files (`tests/architecture.rs` checks it):
//! the state directory ([`crate::state`]) goes through the same helpers.

mod atomic;
mod batch;
mod names;
mod remove;
mod tree;

use rustc_hash::{FxHashMap, FxHashSet};
use std::cell::{Cell, RefCell};
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, ResolveFlags};
use rustix::io::Errno;

pub use atomic::{
    is_live_temp, is_temp_name, symlink_atomic_at, sync_dir, write_atomic_at, TEMP_PREFIX,
};
pub use batch::{MAX_STAGED_BYTES, MAX_STAGED_DIRS, MAX_STAGED_FILES};

pub use names::{escape_name, printable};
pub use tree::{TreeEntry, Visit};

/// Which directory a handle is open on: its file system and inode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirId {
    pub dev: u64,
    pub ino: u64,
}

/// Why a filesystem operation was refused or failed, with the policy path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FsError {
    /// The path is not absolute, or has `..` in it.
    BadPath(String),
    /// A component of the path, or the object itself, is a symbolic link
    /// that the promise did not ask to follow.
    Symlink(String),
    /// A component of the path is not a directory.
    NotADirectory(String),
    /// A regular file with other hard links: changing its mode or owner in
    /// place would change those other names too (possibly outside the root).
    HardLinked(String),
    /// The file is larger than [`MAX_READ`]: not read (a 2 GB sparse file
    /// planted as an edit target must not exhaust memory).
    TooLarge { path: String, len: u64 },
    /// The object is directly in a world-writable directory (like `/tmp`),
    /// where any local user can race a change (THREATS.md case 35).
    SharedDirectory { path: String, dir: String },
    /// A directory on the path was moved or replaced since the run walked
    /// it (out of the root, say): nothing is written through it.
    Moved(String),
    /// Not a regular file where one is read (a FIFO would block the run, a
    /// device would never end).
    NotAFile(String),
    /// The staged new content was refused before it took the file's name
    /// (a `validate` command failed): the file is untouched.
    Rejected(String),
    /// The operating system refused.
    Io {
        path: String,
        op: &'static str,
        errno: Errno,
    },
}

impl std::fmt::Display for FsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FsError::BadPath(p) => write!(
                f,
                "`{}` is not a plain absolute path (no `..`, `.`, `//` or NUL, at most 4096 bytes)",
                p.escape_debug()
            ),
            FsError::Symlink(p) => write!(
                f,
                "`{}` is a symbolic link; refusing to follow it",
                printable(p)
            ),
            FsError::NotADirectory(p) => write!(f, "`{}` is not a directory", printable(p)),
            FsError::HardLinked(p) => write!(
                f,
                "`{}` has other hard links; refusing to change it in place (its content can be replaced)",
                printable(p)
            ),
            FsError::TooLarge { path, len } => write!(
                f,
                "`{}` is {len} bytes; Converge reads and edits files of at most {} MiB",
                printable(path),
                MAX_READ >> 20
            ),
            FsError::SharedDirectory { path, dir } => write!(
                f,
                "`{}` is directly in `{}`, a world-writable directory where any local \
                 user can race a change; Converge changes nothing there: manage it in a \
                 directory that only its owner can write to",
                printable(path),
                printable(dir)
            ),
            FsError::Moved(p) => write!(
                f,
                "a directory of `{}` was moved or replaced during the run; nothing was \
                 written through it (the next run walks the path again)",
                printable(p)
            ),
            FsError::NotAFile(p) => write!(
                f,
                "`{}` is not a regular file (a FIFO, device or socket is never read)",
                printable(p)
            ),
            FsError::Rejected(why) => f.write_str(why),
            FsError::Io { path, op, errno } => {
                write!(f, "cannot {op} `{}`: {errno}", printable(path))
            }
        }
    }
}

impl std::error::Error for FsError {}

/// What an object is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    File,
    Dir,
    Symlink,
    Other,
}

/// The metadata a promise compares (of the object itself, never a link's
/// target).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    pub kind: Kind,
    /// Permission bits (`0o7777`).
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
    pub len: u64,
    /// Number of hard links.
    pub nlink: u64,
    /// Last modification, in seconds since the epoch (how old apt's index
    /// is, for `update_cache_age`).
    pub mtime: i64,
    /// The nanoseconds of the last modification (`watch` compares both).
    pub mtime_nsec: u32,
    /// The object's type in full: [`Kind::Other`] is a FIFO, a socket or
    /// a device, which `watch` records by type without opening it.
    pub file_type: rfs::FileType,
}

/// A root directory, and every operation relative to it.
///
/// Reads reuse directory handles once walked (`/data/d1` opens `data` and
/// `d1` once per run, not once per file in it): a handle names the
/// directory itself, so a link planted later at its path does not redirect
/// it. A change walks the path again from the root, and checks just before
/// a new file takes its name that its directory is still the one at that
/// path: a managed directory moved out of the root mid-run (its handle
/// would follow it) receives no write. Removing a directory through this
/// type forgets its handles.
#[derive(Debug)]
pub struct RootFs {
    root: OwnedFd,
    path: PathBuf,
    dirs: RefCell<FxHashMap<String, Rc<OwnedFd>>>,
    /// Directories whose stale temporaries this run has removed.
    cleaned: RefCell<FxHashSet<String>>,
    /// Whether [`RootFs::write_file`] stages ([`batch`]) instead of
    /// writing through at once.
    staging: Cell<bool>,
    batch: RefCell<batch::Batch>,
    /// Whether the kernel walks a path in one call ([`RootFs::walk_at_once`]).
    at_once: Cell<bool>,
    /// The last path [`RootFs::split`] found valid.
    valid: RefCell<String>,
}

fn io<'p>(path: &'p str, op: &'static str) -> impl FnOnce(Errno) -> FsError + 'p {
    move |errno| FsError::Io {
        path: path.to_owned(),
        op,
        errno,
    }
}

pub use converge_format::paths::{path_problem, MAX_PATH};

/// The components of a policy path (see [`path_problem`]).
fn components(path: &str) -> Result<Vec<&str>, FsError> {
    if path_problem(path).is_some() {
        return Err(FsError::BadPath(path.to_owned()));
    }
    let rest = path.strip_prefix('/').unwrap_or(path);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    Ok(rest.split('/').filter(|c| !c.is_empty()).collect())
}

/// A policy path's parent directory below the root, as the key of the
/// handle cache (its components joined by `/`, empty for a path directly
/// below the root), and its last component; `None` for the root itself.
/// The same split as [`components`] (a valid path has no empty, `.` or
/// `..` component), without allocating: every file promise looks its
/// directory up several times per pass.
#[cfg(test)]
fn split_parent(path: &str) -> Result<Option<(&str, &str)>, FsError> {
    if path_problem(path).is_some() {
        return Err(FsError::BadPath(path.to_owned()));
    }
    Ok(split_valid(path))
}

/// [`split_parent`] of a path [`path_problem`] found nothing wrong with.
fn split_valid(path: &str) -> Option<(&str, &str)> {
    let rest = path.strip_prefix('/').unwrap_or(path);
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return None;
    }
    // By byte: `/` is one byte in UTF-8, so both sides are `str`s.
    Some(match rest.bytes().rposition(|b| b == b'/') {
        Some(at) => (
            rest.get(..at).unwrap_or_default(),
            rest.get(at.saturating_add(1)..).unwrap_or_default(),
        ),
        None => ("", rest),
    })
}

/// The largest file the VM reads (to compare or edit it): 64 MiB.
pub const MAX_READ: u64 = 64 << 20;

const DIR_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl RootFs {
    /// Opens the root (`/` for the real system). The root itself may be
    /// reached through links: the operator chose it.
    pub fn open(path: &Path) -> Result<RootFs, FsError> {
        let shown = path.display().to_string();
        let root = rfs::open(
            path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io(&shown, "open the root"))?;
        Ok(RootFs {
            root,
            path: path.to_path_buf(),
            dirs: RefCell::default(),
            cleaned: RefCell::default(),
            staging: Cell::new(false),
            batch: RefCell::new(batch::Batch::default()),
            at_once: Cell::new(true),
            valid: RefCell::default(),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// [`split_parent`], remembering the last path found valid: a file
    /// promise asks it of the same path three or four times in a row
    /// (cleaning, `lstat`, read, write), and a byte comparison costs less
    /// than checking every component again.
    fn split<'p>(&self, path: &'p str) -> Result<Option<(&'p str, &'p str)>, FsError> {
        let mut valid = self.valid.borrow_mut();
        if *valid != path {
            if path_problem(path).is_some() {
                return Err(FsError::BadPath(path.to_owned()));
            }
            valid.clear();
            valid.push_str(path);
        }
        Ok(split_valid(path))
    }

    /// Walks to the directory holding `path`'s last component. With
    /// `create`, missing directories are made with that mode.
    fn parent<'p>(
        &self,
        path: &'p str,
        create: Option<u32>,
    ) -> Result<Option<(Rc<OwnedFd>, &'p str)>, FsError> {
        // A directory walked before: its handle, without splitting the path.
        if let Some((key, name)) = self.split(path)? {
            if !key.is_empty() {
                if let Some(fd) = self.dirs.borrow().get(key) {
                    return Ok(Some((Rc::clone(fd), name)));
                }
            }
        }
        let comps = components(path)?;
        let Some((name, dirs)) = comps.split_last() else {
            return Err(FsError::BadPath(path.to_owned()));
        };
        Ok(self
            .walk(path, dirs, create, Walk::Cached)?
            .map(|fd| (fd, *name)))
    }

    /// The directory `dirs` (components below the root), opened one
    /// component at a time without following links. [`Walk::Cached`] reuses
    /// handles; [`Walk::Fresh`] opens every component again (and refreshes
    /// the cache); [`Walk::Check`] opens them again and leaves the cache
    /// alone. A fresh or checking walk of two components or more is made in
    /// one call when the kernel can ([`RootFs::walk_at_once`]: only the
    /// directory itself is then refreshed in the cache).
    fn walk(
        &self,
        path: &str,
        dirs: &[&str],
        create: Option<u32>,
        how: Walk,
    ) -> Result<Option<Rc<OwnedFd>>, FsError> {
        if how == Walk::Cached {
            if let Some(fd) = self.dirs.borrow().get(&dirs.join("/")) {
                return Ok(Some(Rc::clone(fd)));
            }
        } else if dirs.len() >= 2 {
            // A walk again from the root in one system call: every write
            // of a run walks its directory afresh.
            if let Some(fd) = self.walk_at_once(&dirs.join("/"), how) {
                return Ok(Some(fd));
            }
        }
        self.walk_components(path, dirs, create, how)
    }

    /// [`RootFs::walk`] one component at a time.
    fn walk_components(
        &self,
        path: &str,
        dirs: &[&str],
        create: Option<u32>,
        how: Walk,
    ) -> Result<Option<Rc<OwnedFd>>, FsError> {
        // The first component is opened from the root's own handle: a
        // handle of the root itself is opened only for a path directly
        // below it (one `openat` and `close` less for every other walk).
        let mut walked: Option<Rc<OwnedFd>> = None;
        for (i, dir) in dirs.iter().enumerate() {
            let prefix = dirs.get(..=i).unwrap_or_default().join("/");
            if how == Walk::Cached {
                if let Some(fd) = self.dirs.borrow().get(&prefix) {
                    walked = Some(Rc::clone(fd));
                    continue;
                }
            }
            let current: &OwnedFd = walked.as_deref().unwrap_or(&self.root);
            let shown = || format!("/{prefix}");
            let fd = match rfs::openat(current, *dir, DIR_FLAGS, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => match create {
                    Some(mode) => {
                        match rfs::mkdirat(current, *dir, Mode::from_bits_truncate(mode)) {
                            Ok(()) | Err(Errno::EXIST) => {}
                            Err(e) => return Err(io(&shown(), "create directory")(e)),
                        }
                        let fd = rfs::openat(current, *dir, DIR_FLAGS, Mode::empty())
                            .map_err(io(&shown(), "open"))?;
                        // mkdir is subject to the umask; the promise's mode is not.
                        set_mode_at(current, dir, mode, &shown())?;
                        fd
                    }
                    None => return Ok(None),
                },
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    return Err(match kind_at(current, dir) {
                        Some(Kind::Symlink) => FsError::Symlink(shown()),
                        _ => FsError::NotADirectory(shown()),
                    })
                }
                Err(e) => return Err(io(&shown(), "open")(e)),
            };
            let fd = Rc::new(fd);
            if how != Walk::Check {
                self.dirs.borrow_mut().insert(prefix, Rc::clone(&fd));
            }
            walked = Some(fd);
        }
        match walked {
            Some(dir) => Ok(Some(dir)),
            None => Ok(Some(Rc::new(
                rfs::openat(&self.root, ".", DIR_FLAGS, Mode::empty()).map_err(io(path, "open"))?,
            ))),
        }
    }

    /// The directory `dirs` (two components or more) opened from the root
    /// in one `openat2`, with the walk's own rules: no link followed on any
    /// component (`RESOLVE_NO_SYMLINKS`, as `O_NOFOLLOW` on each), nothing
    /// above the root (`RESOLVE_BENEATH`; a valid policy path has no `..`
    /// anyway), a directory at the end. `None` for anything else: a
    /// missing component (to create), a link or a file on the path (the
    /// component walk says which), a kernel without `openat2` (before 5.6,
    /// or refused by a sandbox: remembered, not asked again) or a rename
    /// racing the lookup; the component walk then does it as before. A
    /// path of one component gains nothing from it.
    ///
    /// `key` is the directory's components joined by `/`; [`Walk::Fresh`]
    /// puts the handle in the cache under it, [`Walk::Check`] does not.
    fn walk_at_once(&self, key: &str, how: Walk) -> Option<Rc<OwnedFd>> {
        if !self.at_once.get() {
            return None;
        }
        let resolve =
            ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS | ResolveFlags::BENEATH;
        let fd = match rfs::openat2(&self.root, key, DIR_FLAGS, Mode::empty(), resolve) {
            Ok(fd) => Rc::new(fd),
            Err(Errno::NOSYS | Errno::PERM | Errno::INVAL | Errno::TOOBIG) => {
                self.at_once.set(false);
                return None;
            }
            Err(_) => return None,
        };
        if how == Walk::Fresh {
            let mut dirs = self.dirs.borrow_mut();
            match dirs.get_mut(key) {
                Some(held) => *held = Rc::clone(&fd),
                None => {
                    dirs.insert(key.to_owned(), Rc::clone(&fd));
                }
            }
        }
        Some(fd)
    }

    /// Whether `dir` is still the directory at `dirs` below the root (same
    /// device and inode, reached without links): [`FsError::Moved`] if not.
    fn still_at(&self, path: &str, dirs: &[&str], dir: &OwnedFd) -> Result<(), FsError> {
        let now = self.walk(path, dirs, None, Walk::Check)?;
        let held = rfs::fstat(dir).map_err(io(path, "stat the directory of"))?;
        match now {
            Some(now) => {
                let st = rfs::fstat(&*now).map_err(io(path, "stat the directory of"))?;
                if (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino) {
                    return Ok(());
                }
                Err(FsError::Moved(path.to_owned()))
            }
            None => Err(FsError::Moved(path.to_owned())),
        }
    }

    /// [`RootFs::parent`] for a change: refuses a parent directory that is
    /// world-writable (`/tmp`, sticky or not), where another user could
    /// plant, swap or delete names between the VM's steps.
    ///
    /// The path is walked again from the root (never through a handle
    /// cached earlier in the run, which follows its directory wherever it
    /// was moved).
    fn parent_to_change<'p>(
        &self,
        path: &'p str,
        create: Option<u32>,
    ) -> Result<Option<(Rc<OwnedFd>, &'p str)>, FsError> {
        Ok(self
            .parent_to_change_on(path, create)?
            .map(|(dir, name, _)| (dir, name)))
    }

    /// [`RootFs::parent_to_change`], with the identity of the directory
    /// (`st_dev`, `st_ino`), from the same `fstat` that found it not
    /// shared.
    #[allow(clippy::type_complexity)]
    fn parent_to_change_on<'p>(
        &self,
        path: &'p str,
        create: Option<u32>,
    ) -> Result<Option<(Rc<OwnedFd>, &'p str, DirId)>, FsError> {
        let Some((key, name)) = self.split(path)? else {
            return Err(FsError::BadPath(path.to_owned()));
        };
        // Two components or more: walked in one call when the kernel can.
        let at_once = if key.contains('/') {
            self.walk_at_once(key, Walk::Fresh)
        } else {
            None
        };
        let dir = match at_once {
            Some(dir) => dir,
            None => {
                let comps = components(path)?;
                let dirs = comps.split_last().map_or(&[][..], |(_, dirs)| dirs);
                match self.walk_components(path, dirs, create, Walk::Fresh)? {
                    Some(dir) => dir,
                    None => return Ok(None),
                }
            }
        };
        let st = rfs::fstat(&*dir).map_err(io(path, "inspect the directory of"))?;
        if st.st_mode & 0o002 != 0 {
            let parent = path.rsplit_once('/').map_or("/", |(d, _)| d);
            return Err(FsError::SharedDirectory {
                path: path.to_owned(),
                dir: if parent.is_empty() { "/" } else { parent }.to_owned(),
            });
        }
        #[allow(clippy::useless_conversion, reason = "st_dev is u32 on some targets")]
        let id = DirId {
            dev: u64::from(st.st_dev),
            ino: st.st_ino,
        };
        Ok(Some((dir, name, id)))
    }

    /// The checks [`RootFs::parent_to_change`] makes before a change,
    /// without making it: what a dry run asks so that it refuses what a
    /// real run would refuse (issue 21: a link or a non-directory on the
    /// path, a world-writable parent). A parent that does not exist yet
    /// passes: the change would create it with mode 0755.
    pub fn check_change(&self, path: &str) -> Result<(), FsError> {
        let comps = components(path)?;
        let Some((_, dirs)) = comps.split_last() else {
            return Err(FsError::BadPath(path.to_owned()));
        };
        let Some(dir) = self.walk(path, dirs, None, Walk::Check)? else {
            return Ok(());
        };
        if shared(&dir, path)? {
            let parent = path.rsplit_once('/').map_or("/", |(d, _)| d);
            return Err(FsError::SharedDirectory {
                path: path.to_owned(),
                dir: if parent.is_empty() { "/" } else { parent }.to_owned(),
            });
        }
        Ok(())
    }

    /// Forgets the handles of `path` and everything under it (after the
    /// directory was removed).
    fn forget(&self, path: &str) {
        let Ok(comps) = components(path) else { return };
        let key = comps.join("/");
        let below = format!("{key}/");
        self.dirs
            .borrow_mut()
            .retain(|k, _| *k != key && !k.starts_with(&below));
    }

    /// The metadata of the object at `path` itself (a link is reported as a
    /// link), or `None` if it does not exist.
    pub fn lstat(&self, path: &str) -> Result<Option<Meta>, FsError> {
        if let Some((dir, temp)) = self.staged(path) {
            return rfs::statat(&*dir, temp.as_str(), AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| Some(meta(&st)))
                .map_err(io(path, "stat"));
        }
        let Some((dir, name)) = self.parent(path, None)? else {
            return Ok(None);
        };
        match rfs::statat(&dir, name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(meta(&st))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io(path, "stat")(e)),
        }
    }

    /// The content of the regular file at `path`, or `None` if there is
    /// none. A link there is refused, not followed.
    pub fn read_file(&self, path: &str) -> Result<Option<Vec<u8>>, FsError> {
        self.read_file_limited(path, MAX_READ)
    }

    /// [`RootFs::read_file`] with a smaller bound (facts read at most a
    /// few KiB of `/etc/hostname`).
    pub fn read_file_limited(&self, path: &str, limit: u64) -> Result<Option<Vec<u8>>, FsError> {
        // A staged write just made: its content as read back through the
        // handle that wrote it.
        if let Some(bytes) = self
            .batch
            .borrow_mut()
            .take_read_back(path.trim_end_matches('/'), limit.min(MAX_READ))
        {
            return Ok(Some(bytes));
        }
        if let Some((dir, temp)) = self.staged(path) {
            return read_at(&dir, &temp, limit.min(MAX_READ), path);
        }
        let Some((dir, name)) = self.parent(path, None)? else {
            return Ok(None);
        };
        read_at(&dir, name, limit.min(MAX_READ), path)
    }

    /// The regular file at `path`, open for streaming (a file whose
    /// `source` is a stored blob, issue 22 item 5), or `None` if there is
    /// none. A link there is refused, not followed; nothing blocks.
    pub fn open_file(&self, path: &str) -> Result<Option<std::fs::File>, FsError> {
        let staged = self.staged(path);
        let (dir, name) = match &staged {
            Some((dir, temp)) => (Rc::clone(dir), temp.as_str()),
            None => match self.parent(path, None)? {
                Some(found) => found,
                None => return Ok(None),
            },
        };
        let fd = match rfs::openat(
            &*dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(None),
            Err(Errno::LOOP) => return Err(FsError::Symlink(path.to_owned())),
            Err(e) => return Err(io(path, "open")(e)),
        };
        let st = rfs::fstat(&fd).map_err(io(path, "stat"))?;
        if meta(&st).kind != Kind::File {
            return Err(FsError::NotAFile(path.to_owned()));
        }
        Ok(Some(std::fs::File::from(fd)))
    }

    /// Where the regular file `path` is about to be written: its parent
    /// directory (missing ones created 0755), its name, its components and
    /// its parent's policy path. A link or a directory at `path` is refused.
    #[allow(clippy::type_complexity)]
    fn file_to_replace<'p>(
        &self,
        path: &'p str,
    ) -> Result<(Rc<OwnedFd>, &'p str, Vec<&'p str>, &'p str), FsError> {
        let Some((dir, name)) = self.parent_to_change(path, Some(0o755))? else {
            return Err(io(path, "write")(Errno::NOENT));
        };
        match kind_at(&dir, name) {
            Some(Kind::Symlink) => return Err(FsError::Symlink(path.to_owned())),
            Some(Kind::Dir) => {
                return Err(io(path, "replace a directory with a file at")(Errno::ISDIR))
            }
            _ => {}
        }
        let comps = components(path)?;
        let parent = path.rsplit_once('/').map_or("", |(p, _)| p);
        Ok((dir, name, comps, parent))
    }

    /// [`RootFs::write_file_checked`] with the content streamed from
    /// `source` (a stored blob: never whole in memory). An error reading
    /// `source` fails the write before the rename; the file keeps its old
    /// content.
    pub fn write_file_from(
        &self,
        path: &str,
        source: &mut dyn std::io::Read,
        mode: u32,
        owner: Option<(u32, u32)>,
        check: impl FnOnce(&str) -> Result<(), String>,
    ) -> Result<(), FsError> {
        // Written through at once, after the staged writes before it.
        self.flush_staged();
        let (dir, name, comps, parent) = self.file_to_replace(path)?;
        let dirs = comps.split_last().map_or(&[][..], |(_, dirs)| dirs);
        atomic::write_atomic_from_at(&dir, name, source, mode, owner, path, |temp| {
            self.still_at(path, dirs, &dir)?;
            check(&format!("{parent}/{temp}")).map_err(FsError::Rejected)
        })
    }

    /// Replaces (or creates) the regular file at `path` with `contents`,
    /// atomically, with `mode` and, if given, owner and group. Missing
    /// parent directories are created with mode 0755. An existing link or
    /// directory at `path` is refused. While staging ([`batch`]), the new
    /// content takes the name at the next flush.
    pub fn write_file(
        &self,
        path: &str,
        contents: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(), FsError> {
        if self.staging.get() {
            return self.stage_file(path, contents, mode, owner);
        }
        self.write_file_checked(path, contents, mode, owner, |_| Ok(()))
    }

    /// [`RootFs::write_file`], with `check` run on the staged copy (given
    /// its policy path: a temporary in the file's own directory, with the
    /// final content, owner and mode) just before it replaces the file; a
    /// refusal leaves the file untouched and the copy removed.
    pub fn write_file_checked(
        &self,
        path: &str,
        contents: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
        check: impl FnOnce(&str) -> Result<(), String>,
    ) -> Result<(), FsError> {
        // Written through at once: the staged writes before it first, so
        // that renames keep the order of the promises.
        self.flush_staged();
        let (dir, name, comps, parent) = self.file_to_replace(path)?;
        let dirs = comps.split_last().map_or(&[][..], |(_, dirs)| dirs);
        write_atomic_at(&dir, name, contents, mode, owner, path, |temp| {
            self.still_at(path, dirs, &dir)?;
            check(&format!("{parent}/{temp}")).map_err(FsError::Rejected)
        })
    }

    /// Creates the directory at `path` (and missing parents) with `mode`.
    pub fn create_dir(&self, path: &str, mode: u32) -> Result<(), FsError> {
        self.flush_if_touched(path);
        let Some((dir, name)) = self.parent_to_change(path, Some(0o755))? else {
            return Err(io(path, "create")(Errno::NOENT));
        };
        match rfs::mkdirat(&dir, name, Mode::from_bits_truncate(mode)) {
            Ok(()) => {}
            Err(Errno::EXIST) => {
                if kind_at(&dir, name) == Some(Kind::Symlink) {
                    return Err(FsError::Symlink(path.to_owned()));
                }
            }
            Err(e) => return Err(io(path, "create directory")(e)),
        }
        set_mode_at(&dir, name, mode, path)?;
        sync_dir(&dir, path)
    }

    /// Sets the permission bits of the object itself (never a link's target).
    pub fn set_mode(&self, path: &str, mode: u32) -> Result<(), FsError> {
        if let Some((dir, temp)) = self.staged(path) {
            return set_mode_at(&dir, &temp, mode, path);
        }
        let Some((dir, name)) = self.parent_to_change(path, None)? else {
            return Err(io(path, "set the mode of")(Errno::NOENT));
        };
        set_mode_at(&dir, name, mode, path)
    }

    /// Sets owner and group of the object itself (never a link's target,
    /// never a file with other hard links).
    ///
    /// `chown` clears the setuid and setgid bits: a caller that sets both
    /// owner and mode sets the owner first.
    pub fn set_owner(&self, path: &str, uid: u32, gid: u32) -> Result<(), FsError> {
        let staged = self.staged(path);
        let fd = match &staged {
            Some((dir, temp)) => open_object(dir, temp, path)?,
            None => {
                let Some((dir, name)) = self.parent_to_change(path, None)? else {
                    return Err(io(path, "set the owner of")(Errno::NOENT));
                };
                open_object(&dir, name, path)?
            }
        };
        rfs::fchown(&fd, Some(uid_of(uid)), Some(gid_of(gid))).map_err(io(path, "set the owner of"))
    }

    /// The target of the link at `path`, or `None` if it is not a link.
    pub fn read_link(&self, path: &str) -> Result<Option<String>, FsError> {
        if self.staged(path).is_some() {
            // A regular file until the flush.
            return Ok(None);
        }
        let Some((dir, name)) = self.parent(path, None)? else {
            return Ok(None);
        };
        match rfs::readlinkat(&dir, name, Vec::new()) {
            Ok(target) => Ok(Some(target.to_string_lossy().into_owned())),
            Err(Errno::NOENT | Errno::INVAL) => Ok(None),
            Err(e) => Err(io(path, "read link")(e)),
        }
    }

    /// Makes `path` a link to `target` (written verbatim), replacing an
    /// existing link or file atomically; a directory there is refused.
    pub fn symlink(&self, path: &str, target: &str) -> Result<(), FsError> {
        self.flush_if_touched(path);
        let Some((dir, name)) = self.parent_to_change(path, Some(0o755))? else {
            return Err(io(path, "link")(Errno::NOENT));
        };
        if kind_at(&dir, name) == Some(Kind::Dir) {
            return Err(io(path, "replace a directory with a link at")(Errno::ISDIR));
        }
        symlink_atomic_at(&dir, name, target, path)
    }

    /// Removes the object at `path`: a file or link is unlinked, a directory
    /// removed with everything in it (iteratively, whatever its depth),
    /// links inside never followed.
    pub fn remove(&self, path: &str) -> Result<(), FsError> {
        self.flush_if_touched(path);
        let Some((dir, name)) = self.parent_to_change(path, None)? else {
            return Ok(());
        };
        remove_object(&dir, name.as_bytes(), path)?;
        self.forget(path);
        sync_dir(&dir, path)
    }

    /// Removes the entry `name` (raw bytes, as [`RootFs::list_dir`] gives
    /// them: not necessarily UTF-8) of the directory at `dir`.
    pub fn remove_entry(&self, dir: &str, name: &[u8]) -> Result<(), FsError> {
        let shown = format!("{}/{}", dir.trim_end_matches('/'), escape_name(name));
        self.flush_if_touched(&format!(
            "{}/{}",
            dir.trim_end_matches('/'),
            String::from_utf8_lossy(name)
        ));
        let handle = self.dir_to_change(dir)?;
        remove_object(&handle, name, &shown)?;
        if let Ok(name) = std::str::from_utf8(name) {
            self.forget(&format!("{}/{name}", dir.trim_end_matches('/')));
        }
        sync_dir(&handle, &shown)
    }

    /// Visits every entry below the directory at `path` (down to
    /// `max_depth` levels; `None`: all of them) without following links,
    /// holding a bounded number of descriptors ([`tree`]). The visitor may
    /// change each entry's mode and owner through [`TreeEntry`]. The
    /// directory itself is walked afresh and refused if it is
    /// world-writable, as for any change.
    pub fn walk_tree(
        &self,
        path: &str,
        max_depth: Option<u32>,
        visit: &mut dyn FnMut(&TreeEntry<'_>) -> Result<Visit, FsError>,
    ) -> Result<(), FsError> {
        self.flush_if_touched(path);
        let handle = self.dir_to_change(path)?;
        let top = rfs::openat(
            &*handle,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io(path, "open"))?;
        tree::walk_tree(top, path.trim_end_matches('/'), max_depth, visit)
    }

    /// [`RootFs::walk_tree`] to read, not to change (`watch`): the
    /// directory may be world-writable, and a directory or entry that
    /// cannot be opened, listed or examined is handed to `unreadable` with
    /// the reason, and the walk goes on without it.
    pub fn walk_tree_to_read(
        &self,
        path: &str,
        max_depth: Option<u32>,
        visit: &mut dyn FnMut(&TreeEntry<'_>) -> Result<Visit, FsError>,
        unreadable: &mut dyn FnMut(String, FsError) -> Result<(), FsError>,
    ) -> Result<(), FsError> {
        self.flush_if_touched(path);
        let comps = components(path)?;
        let handle = self
            .walk(path, &comps, None, Walk::Fresh)?
            .ok_or_else(|| io(path, "open")(Errno::NOENT))?;
        let top = rfs::openat(
            &*handle,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io(path, "open"))?;
        tree::walk_tree_tolerant(
            top,
            path.trim_end_matches('/'),
            max_depth,
            visit,
            unreadable,
        )
    }

    /// Hands the object at `path` itself (not following a link) to
    /// `visit`, as the walk hands each entry (depth 0); `None` when it
    /// does not exist.
    pub fn visit_object<T>(
        &self,
        path: &str,
        visit: impl FnOnce(&TreeEntry<'_>) -> T,
    ) -> Result<Option<T>, FsError> {
        self.flush_if_touched(path);
        let comps = components(path)?;
        let Some((name, dirs)) = comps.split_last() else {
            // The root itself: its metadata through its own handle.
            let st = rfs::statat(&self.root, ".", AtFlags::empty()).map_err(io(path, "stat"))?;
            let parent =
                rfs::openat(&self.root, ".", DIR_FLAGS, Mode::empty()).map_err(io(path, "open"))?;
            return Ok(Some(visit(&TreeEntry::new(
                &parent,
                "",
                b".",
                meta(&st),
                0,
            ))));
        };
        let Some(dir) = self.walk(path, dirs, None, Walk::Fresh)? else {
            return Ok(None);
        };
        let parent = format!("/{}", dirs.join("/"));
        let parent = if dirs.is_empty() {
            String::new()
        } else {
            parent
        };
        match rfs::statat(&*dir, *name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => Ok(Some(visit(&TreeEntry::new(
                &dir,
                &parent,
                name.as_bytes(),
                meta(&st),
                0,
            )))),
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(io(path, "stat")(e)),
        }
    }

    /// A handle on the directory at `path` itself, walked afresh, for a
    /// change in it (refused if it is world-writable).
    fn dir_to_change(&self, path: &str) -> Result<Rc<OwnedFd>, FsError> {
        let comps = components(path)?;
        let dir = self
            .walk(path, &comps, None, Walk::Fresh)?
            .ok_or_else(|| io(path, "open")(Errno::NOENT))?;
        if shared(&dir, path)? {
            return Err(FsError::SharedDirectory {
                path: path.to_owned(),
                dir: path.to_owned(),
            });
        }
        Ok(dir)
    }

    /// The names in the directory at `path`, sorted (empty if it is not
    /// there), as raw bytes: a name need not be UTF-8. Show one with
    /// [`escape_name`].
    pub fn list_dir(&self, path: &str) -> Result<Vec<Vec<u8>>, FsError> {
        let fd = if components(path)?.is_empty() {
            rfs::openat(
                &self.root,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(io(path, "open"))?
        } else {
            let Some((dir, name)) = self.parent(path, None)? else {
                return Ok(Vec::new());
            };
            match rfs::openat(
                &dir,
                name,
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(fd) => fd,
                Err(Errno::NOENT) => return Ok(Vec::new()),
                Err(Errno::LOOP | Errno::NOTDIR) if kind_at(&dir, name) == Some(Kind::Symlink) => {
                    return Err(FsError::Symlink(path.trim_end_matches('/').to_owned()))
                }
                Err(e) => return Err(io(path, "open")(e)),
            }
        };
        let mut names = entries(&fd, path)?;
        names.sort();
        Ok(names)
    }

    /// Removes the stale temporaries (see [`atomic`]) of the directory
    /// holding `path`, once per run and directory, and returns their
    /// escaped names. A temporary left by a run killed with SIGKILL would
    /// otherwise stay for good when the target it was for ends unchanged.
    /// Nothing is done in a world-writable directory (nothing is changed
    /// there) or one that does not exist.
    pub fn clean_stale_temporaries(&self, path: &str) -> Result<Vec<String>, FsError> {
        // Once per directory: every later file of it costs a lookup.
        match self.split(path)? {
            None => return Ok(Vec::new()),
            Some((key, _)) if self.cleaned.borrow().contains(key) => return Ok(Vec::new()),
            Some(_) => {}
        }
        let comps = components(path)?;
        let Some((_, dirs)) = comps.split_last() else {
            return Ok(Vec::new());
        };
        if !self.cleaned.borrow_mut().insert(dirs.join("/")) {
            return Ok(Vec::new());
        }
        let dir = match self.walk(path, dirs, None, Walk::Fresh) {
            Ok(Some(dir)) => dir,
            Ok(None) => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        if shared(&dir, path)? {
            return Ok(Vec::new());
        }
        let listing = rfs::openat(
            &*dir,
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(io(path, "open the directory of"))?;
        let mut removed = Vec::new();
        for name in entries_where(&listing, path, is_temp_name)? {
            if !is_live_temp(&name) {
                let shown = format!("/{}/{}", dirs.join("/"), escape_name(&name));
                remove_object(&dir, &name, &shown)?;
                removed.push(shown);
            }
        }
        if !removed.is_empty() {
            sync_dir(&dir, path)?;
        }
        Ok(removed)
    }
}

/// How [`RootFs::walk`] uses the cache of directory handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Walk {
    Cached,
    Fresh,
    Check,
}

/// Whether the directory `dir` is world-writable.
fn shared(dir: &OwnedFd, path: &str) -> Result<bool, FsError> {
    let st = rfs::fstat(dir).map_err(io(path, "inspect the directory of"))?;
    Ok(st.st_mode & 0o002 != 0)
}

/// The content of the regular file `name` in `dir`, at most `limit` bytes
/// (`None` if it does not exist). A link is refused, not followed; a FIFO,
/// device or socket is refused without blocking on it (`O_NONBLOCK`); a
/// file that grows past the bound while it is read is refused too. The
/// state directory reads its files with this as well.
pub fn read_at(
    dir: &OwnedFd,
    name: &str,
    limit: u64,
    shown: &str,
) -> Result<Option<Vec<u8>>, FsError> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    let open = |flags| rfs::openat(dir, name, flags, Mode::empty());
    // A read to compare leaves the file's access time alone (O_NOATIME):
    // the first run after a change would otherwise write the inode of
    // every file it checks (15 ms of a 10,000-file converged run), and an
    // administrator reading access times would see every managed file as
    // used. Only the owner or a process with CAP_FOWNER may ask; anyone
    // else reads as before.
    let opened = match open(flags | OFlags::NOATIME) {
        Err(Errno::PERM) => open(flags),
        other => other,
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(Errno::LOOP) => return Err(FsError::Symlink(shown.to_owned())),
        Err(e) => return Err(io(shown, "open")(e)),
    };
    read_regular(fd, limit, shown).map(Some)
}

/// A file of the running kernel (`/proc/meminfo`), not of the root: read
/// with the same care (regular files only, never blocking, bounded), links
/// followed (`/proc/net` is one). `None` if it cannot be read.
pub fn read_system_file(path: &Path, limit: u64) -> Option<Vec<u8>> {
    let fd = rfs::open(
        path,
        OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .ok()?;
    read_regular(fd, limit, &path.display().to_string()).ok()
}

fn read_regular(fd: OwnedFd, limit: u64, shown: &str) -> Result<Vec<u8>, FsError> {
    let st = rfs::fstat(&fd).map_err(io(shown, "stat"))?;
    let m = meta(&st);
    if m.kind != Kind::File {
        return Err(FsError::NotAFile(shown.to_owned()));
    }
    if m.len > limit {
        return Err(FsError::TooLarge {
            path: shown.to_owned(),
            len: m.len,
        });
    }
    // Bounded even if the file grows after the size check.
    let bytes = read_sized(
        std::fs::File::from(fd).take(limit.saturating_add(1)),
        m.len,
        limit,
    )
    .map_err(|e| io(shown, "read")(Errno::from_io_error(&e).unwrap_or(Errno::IO)))?;
    if bytes.len() as u64 > limit {
        return Err(FsError::TooLarge {
            path: shown.to_owned(),
            len: bytes.len() as u64,
        });
    }
    Ok(bytes)
}

/// Reads a regular file whose `fstat` gave `len` bytes, into a buffer of
/// that size and one byte more: one `read` when the file is as the stat
/// said (a read that stops short exactly at the stated size is the file's
/// end, so no second `read` is made to see 0), and on to the end, within
/// `limit` and one byte, if it grew. `read_to_end` made two `read`s for
/// every file, the first into a 32-byte probe buffer (issue 22, item 2).
///
/// A stated size of 0 is read into a page first: the pseudo-files of
/// `/proc` and `/sys` say 0 whatever they hold, and a `/proc/sys` file
/// answers only the first `read` (one past offset 0 sees its end), so a
/// one-byte first read would cut `sysctl` values to their first byte.
fn read_sized(mut file: impl Read, len: u64, limit: u64) -> std::io::Result<Vec<u8>> {
    /// What a file that says it is empty is first read into.
    const PSEUDO_FILE_READ: usize = 4096;
    let bound = usize::try_from(limit.saturating_add(1)).unwrap_or(usize::MAX);
    let first = match len {
        0 => PSEUDO_FILE_READ,
        _ => usize::try_from(len).unwrap_or(usize::MAX).saturating_add(1),
    }
    .min(bound);
    let mut buf = vec![0u8; first];
    let mut filled = 0usize;
    while let Some(space) = buf.get_mut(filled..) {
        if space.is_empty() {
            if filled >= bound {
                break;
            }
            // It grew past its stated size: read on, doubling.
            let grown = filled.saturating_add(filled.max(4096)).min(bound);
            buf.resize(grown, 0);
            continue;
        }
        let asked = space.len();
        let n = match file.read(space) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if n == 0 {
            break;
        }
        filled = filled.saturating_add(n);
        if n < asked && filled as u64 == len {
            break;
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// The names in the directory `fd` (opened for reading), raw.
fn entries(fd: &OwnedFd, path: &str) -> Result<Vec<Vec<u8>>, FsError> {
    entries_where(fd, path, |_| true)
}

/// The names [`entries`] lists for which `keep` holds: only those are
/// copied (the stale-temporary cleaning lists every directory a run
/// touches, and keeps almost nothing of it).
fn entries_where(
    fd: &OwnedFd,
    path: &str,
    keep: impl Fn(&[u8]) -> bool,
) -> Result<Vec<Vec<u8>>, FsError> {
    let mut dir = rfs::Dir::read_from(fd).map_err(io(path, "list"))?;
    let mut names = Vec::new();
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(io(path, "list"))?;
        let name = entry.file_name().to_bytes();
        if name != b"." && name != b".." && keep(name) {
            names.push(name.to_vec());
        }
    }
    Ok(names)
}

/// Removes `name` in `dir`: a directory with everything in it, anything
/// else unlinked; nothing there is not an error.
fn remove_object(dir: &OwnedFd, name: &[u8], shown: &str) -> Result<(), FsError> {
    match rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).map(|st| meta(&st).kind) {
        Err(Errno::NOENT) => Ok(()),
        Err(e) => Err(io(shown, "stat")(e)),
        Ok(Kind::Dir) => remove::remove_tree(dir, name, shown),
        Ok(_) => match rfs::unlinkat(dir, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(io(shown, "remove")(e)),
        },
    }
}

fn kind_at(dir: &OwnedFd, name: &str) -> Option<Kind> {
    rfs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| meta(&st).kind)
}

/// Opens the object itself for a metadata change: a link is refused, and so
/// is a regular file with other hard links (its mode and owner are shared
/// with names the policy does not manage).
fn open_object(dir: &OwnedFd, name: &str, shown: &str) -> Result<OwnedFd, FsError> {
    let fd = match rfs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::LOOP) => return Err(FsError::Symlink(shown.to_owned())),
        Err(e) => return Err(io(shown, "open")(e)),
    };
    let m = meta(&rfs::fstat(&fd).map_err(io(shown, "stat"))?);
    if m.kind == Kind::File && m.nlink > 1 {
        return Err(FsError::HardLinked(shown.to_owned()));
    }
    Ok(fd)
}

/// `chmod` without following a link: open the object itself, then `fchmod`.
fn set_mode_at(dir: &OwnedFd, name: &str, mode: u32, shown: &str) -> Result<(), FsError> {
    let fd = open_object(dir, name, shown)?;
    rfs::fchmod(&fd, Mode::from_bits_truncate(mode)).map_err(io(shown, "set the mode of"))
}

fn meta(st: &rfs::Stat) -> Meta {
    let file_type = rfs::FileType::from_raw_mode(st.st_mode);
    let kind = match file_type {
        rfs::FileType::RegularFile => Kind::File,
        rfs::FileType::Directory => Kind::Dir,
        rfs::FileType::Symlink => Kind::Symlink,
        _ => Kind::Other,
    };
    Meta {
        kind,
        mode: st.st_mode & 0o7777,
        uid: st.st_uid,
        gid: st.st_gid,
        len: u64::try_from(st.st_size).unwrap_or(0),
        nlink: nlink(st),
        #[allow(clippy::useless_conversion, reason = "st_mtime is i32 on some targets")]
        mtime: i64::from(st.st_mtime),
        mtime_nsec: u32::try_from(st.st_mtime_nsec).unwrap_or(0),
        file_type,
    }
}

/// The metadata of an open file (`watch` compares it before and after
/// reading the content).
pub fn meta_of(fd: &OwnedFd, shown: &str) -> Result<Meta, FsError> {
    rfs::fstat(fd)
        .map(|st| meta(&st))
        .map_err(io(shown, "stat"))
}

#[allow(
    clippy::useless_conversion,
    reason = "st_nlink is narrower than u64 on some targets"
)]
fn nlink(st: &rfs::Stat) -> u64 {
    u64::from(st.st_nlink)
}

fn uid_of(uid: u32) -> rfs::Uid {
    rfs::Uid::from_raw(uid)
}

fn gid_of(gid: u32) -> rfs::Gid {
    rfs::Gid::from_raw(gid)
}

#[cfg(test)]
mod read_tests {
    use super::*;

    /// A reader that hands out at most `step` bytes per call and counts
    /// its calls.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        calls: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.calls = self.calls.saturating_add(1);
            let n = buf.len().min(self.step).min(self.data.len());
            let (now, rest) = self.data.split_at(n);
            if let Some(into) = buf.get_mut(..n) {
                into.copy_from_slice(now);
            }
            self.data = rest;
            Ok(n)
        }
    }

    /// `/proc/sys` files state a size of 0 and answer only a read at
    /// offset 0: the whole value must come in the first read.
    #[test]
    fn a_proc_sys_file_that_says_it_is_empty_is_read_whole() {
        let file = std::fs::File::open("/proc/sys/net/ipv4/ip_local_port_range").unwrap();
        assert_eq!(file.metadata().unwrap().len(), 0);
        let bytes = read_sized(file, 0, 1 << 20).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let fields: Vec<&str> = text.split_whitespace().collect();
        assert_eq!(fields.len(), 2, "{text:?}");
        assert!(text.ends_with('\n'), "{text:?}");
    }

    #[test]
    fn a_file_as_stated_is_read_in_one_call() {
        let mut file = Trickle {
            data: b"content of file 7\n",
            step: usize::MAX,
            calls: 0,
        };
        let bytes = read_sized(&mut file, 18, MAX_READ).unwrap();
        assert_eq!(bytes, b"content of file 7\n");
        assert_eq!(file.calls, 1);
    }

    #[test]
    fn short_reads_grown_and_shrunk_files_are_read_whole() {
        let data: Vec<u8> = (0..10_000u32)
            .map(|i| u8::try_from(i & 0x7f).unwrap())
            .collect();
        for (stated, step) in [
            (10_000, 7),
            (10_000, 4096),
            (100, 10_000),
            (100, 33),
            (20_000, 10_000),
            (0, 1),
        ] {
            let bytes = read_sized(
                Trickle {
                    data: &data,
                    step,
                    calls: 0,
                },
                stated,
                MAX_READ,
            )
            .unwrap();
            assert_eq!(bytes, data, "stated {stated}, {step} a read");
        }
    }

    #[test]
    fn a_file_grown_past_the_limit_is_read_to_one_byte_more() {
        let data = vec![1u8; 50_000];
        let bytes = read_sized(
            Trickle {
                data: &data,
                step: 1000,
                calls: 0,
            }
            .take(10_001),
            10,
            10_000,
        )
        .unwrap();
        assert_eq!(bytes.len(), 10_001);
    }

    #[test]
    fn a_read_to_compare_leaves_the_access_time_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "content\n").unwrap();
        // An access time older than the modification: `relatime` (and
        // `strictatime`) would update it at the next read.
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_times(std::fs::FileTimes::new().set_accessed(old))
            .unwrap();
        drop(file);
        let fs = RootFs::open(dir.path()).unwrap();
        assert_eq!(fs.read_file("/f").unwrap().unwrap(), b"content\n");
        let accessed = std::fs::metadata(&path).unwrap().accessed().unwrap();
        assert_eq!(accessed, old, "the read updated the access time");
    }

    #[test]
    fn a_real_file_reads_back_with_its_content() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x".repeat(70_000)).unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        assert_eq!(fs.read_file("/f").unwrap().unwrap().len(), 70_000);
        assert_eq!(fs.read_file("/missing").unwrap(), None);
        assert!(matches!(
            fs.read_file_limited("/f", 100),
            Err(FsError::TooLarge { .. })
        ));
    }
}

#[cfg(test)]
mod split_tests {
    use super::*;

    /// `split_parent` is the split of `components`: the handle cache's key
    /// is the directories joined, the name the last component.
    #[test]
    fn split_parent_agrees_with_components() {
        for path in [
            "/a",
            "/a/",
            "/a/b",
            "/a/b/",
            "/a/b/c",
            "/data/d1/f1",
            "/",
            "a/b",
            "/a//b",
            "/a/./b",
            "/a/../b",
            "/a/b/..",
        ] {
            let split = split_parent(path).ok();
            let by_components = components(path).ok().map(|comps| {
                comps
                    .split_last()
                    .map(|(name, dirs)| (dirs.join("/"), name.to_string()))
            });
            let split = split.map(|s| s.map(|(key, name)| (key.to_owned(), name.to_owned())));
            assert_eq!(split, by_components, "{path}");
        }
    }
}
