//! Walking a directory tree of any depth to inspect and fix each entry
//! (`directory recurse`): iteratively, never following a link, with a
//! bounded number of open descriptors — the pattern of [`super::remove`].
//!
//! The levels are a list on the heap, and only the deepest [`OPEN_LEVELS`]
//! hold a descriptor; climbing back to a level whose descriptor was closed
//! reopens it through `..` of the level below and checks the device and
//! inode recorded on the way down, so a tree moved during the walk stops
//! it with an error instead of letting it continue elsewhere.
//!
//! Every entry is examined with `fstatat(AT_SYMLINK_NOFOLLOW)`: a link is
//! handed to the visitor as a link and never entered, and a change goes
//! through a descriptor opened with `O_NOFOLLOW` on the entry itself
//! ([`TreeEntry::set_mode`], [`TreeEntry::set_owner`]), so the target of a
//! link swapped in after the `stat` is never changed. A regular file with
//! other hard links is refused ([`FsError::HardLinked`]), as everywhere
//! in [`super`]. A tree that conforms costs one `getdents` per directory
//! and one `fstatat` per entry, what `find -printf '%m %u %g'` costs.

use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::{escape_name, io, meta, FsError, Kind, Meta};

/// Levels below the deepest that keep their descriptor open.
const OPEN_LEVELS: usize = 8;

const OPEN_DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// One entry of the tree, as the visitor sees it.
#[derive(Debug)]
pub struct TreeEntry<'a> {
    dir: &'a OwnedFd,
    /// The policy path of the directory holding the entry.
    parent: &'a str,
    name: &'a [u8],
    /// What the entry is (a link is a link: never its target).
    pub meta: Meta,
    /// 1 for the direct children of the top directory.
    pub depth: u32,
}

impl<'a> TreeEntry<'a> {
    pub(super) fn new(
        dir: &'a OwnedFd,
        parent: &'a str,
        name: &'a [u8],
        meta: Meta,
        depth: u32,
    ) -> TreeEntry<'a> {
        TreeEntry {
            dir,
            parent,
            name,
            meta,
            depth,
        }
    }

    /// The entry's policy path, its name escaped (for reports).
    pub fn path(&self) -> String {
        format!("{}/{}", self.parent, escape_name(self.name))
    }

    /// The entry's name, raw (it need not be UTF-8).
    pub fn name(&self) -> &[u8] {
        self.name
    }

    /// Opens the entry to read its content (`watch`): only a regular file,
    /// never through a link, never blocking (a FIFO swapped in since the
    /// walk saw a file is opened without waiting for a writer, then
    /// refused as [`FsError::NotAFile`] before a byte is read).
    pub fn open_to_read(&self) -> Result<OwnedFd, FsError> {
        let shown = || self.path();
        if self.meta.kind != Kind::File {
            return Err(FsError::NotAFile(shown()));
        }
        let fd = match rfs::openat(
            self.dir,
            self.name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(FsError::Symlink(shown())),
            Err(e) => return Err(io(&shown(), "open")(e)),
        };
        let now = meta(&rfs::fstat(&fd).map_err(io(&shown(), "stat"))?);
        if now.kind != Kind::File {
            return Err(FsError::NotAFile(shown()));
        }
        Ok(fd)
    }

    /// The target of the entry, a link, as its raw bytes (never followed).
    pub fn read_link(&self) -> Result<Vec<u8>, FsError> {
        rfs::readlinkat(self.dir, self.name, Vec::new())
            .map(|t| t.into_bytes())
            .map_err(io(&self.path(), "read the link"))
    }

    /// Opens the entry itself for a metadata change: never a link (a link
    /// swapped in since the walk saw the entry is refused, not followed),
    /// never a file with other hard links, never a device or FIFO.
    fn open(&self) -> Result<OwnedFd, FsError> {
        let shown = self.path();
        let fd = match rfs::openat(
            self.dir,
            self.name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(Errno::LOOP) => return Err(FsError::Symlink(shown)),
            Err(e) => return Err(io(&shown, "open")(e)),
        };
        let now = meta(&rfs::fstat(&fd).map_err(io(&shown, "stat"))?);
        if now.kind != self.meta.kind || !matches!(now.kind, Kind::File | Kind::Dir) {
            return Err(FsError::Moved(shown));
        }
        if now.kind == Kind::File && now.nlink > 1 {
            return Err(FsError::HardLinked(shown));
        }
        Ok(fd)
    }

    /// Sets the permission bits of the entry itself.
    pub fn set_mode(&self, mode: u32) -> Result<(), FsError> {
        let fd = self.open()?;
        rfs::fchmod(&fd, Mode::from_bits_truncate(mode))
            .map_err(io(&self.path(), "set the mode of"))
    }

    /// Sets owner and group of the entry itself. `chown` clears setuid
    /// and setgid bits: set the mode after this.
    pub fn set_owner(&self, uid: u32, gid: u32) -> Result<(), FsError> {
        let fd = self.open()?;
        rfs::fchown(
            &fd,
            Some(rfs::Uid::from_raw(uid)),
            Some(rfs::Gid::from_raw(gid)),
        )
        .map_err(io(&self.path(), "set the owner of"))
    }
}

/// What the walk does after the visitor saw a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit {
    /// Enter it (within the depth bound).
    Enter,
    /// Leave what is inside it alone (another promise manages that tree).
    Skip,
}

/// One directory on the way down.
struct Level {
    /// Its policy path.
    path: String,
    depth: u32,
    dev: u64,
    ino: u64,
    fd: Option<OwnedFd>,
    /// Subdirectories still to enter.
    pending: Vec<Vec<u8>>,
}

#[allow(
    clippy::useless_conversion,
    reason = "st_dev and st_ino are narrower than u64 on some targets"
)]
fn identity(st: &rfs::Stat) -> (u64, u64) {
    (u64::from(st.st_dev), u64::from(st.st_ino))
}

/// Visits every entry below the directory `top` (whose policy path is
/// `shown`), down to `max_depth` levels (`None`: all). The visitor sees a
/// directory before what is in it, so a directory it makes readable is
/// then entered, and says whether to enter it. An error of the visitor stops the walk.
pub(super) fn walk_tree(
    top: OwnedFd,
    shown: &str,
    max_depth: Option<u32>,
    visit: &mut dyn FnMut(&TreeEntry<'_>) -> Result<Visit, FsError>,
) -> Result<(), FsError> {
    walk(top, shown, max_depth, visit, None)
}

/// [`walk_tree`] that hands a directory or entry it cannot open, list or
/// examine to `unreadable` and goes on without it (`watch` records it).
pub(super) fn walk_tree_tolerant(
    top: OwnedFd,
    shown: &str,
    max_depth: Option<u32>,
    visit: &mut dyn FnMut(&TreeEntry<'_>) -> Result<Visit, FsError>,
    unreadable: &mut dyn FnMut(String, FsError) -> Result<(), FsError>,
) -> Result<(), FsError> {
    walk(top, shown, max_depth, visit, Some(unreadable))
}

/// What to do with an entry that cannot be read: stop the walk (`None`),
/// or tell the caller and go on.
type Unreadable<'u> = Option<&'u mut dyn FnMut(String, FsError) -> Result<(), FsError>>;

fn walk(
    top: OwnedFd,
    shown: &str,
    max_depth: Option<u32>,
    visit: &mut dyn FnMut(&TreeEntry<'_>) -> Result<Visit, FsError>,
    mut unreadable: Unreadable<'_>,
) -> Result<(), FsError> {
    let mut levels = vec![enter(
        shown.to_owned(),
        0,
        top,
        max_depth,
        visit,
        &mut unreadable,
    )?];
    while let Some(level) = levels.last_mut() {
        let Some(fd) = level.fd.as_ref() else {
            return Err(io(shown, "walk (lost a directory handle of)")(Errno::BADF));
        };
        if let Some(sub) = level.pending.pop() {
            let path = format!("{}/{}", level.path, escape_name(&sub));
            let child = match rfs::openat(fd, sub.as_slice(), OPEN_DIR, Mode::empty()) {
                Ok(child) => child,
                // Gone (or replaced by a link) since it was listed.
                Err(Errno::NOENT | Errno::LOOP | Errno::NOTDIR) => continue,
                Err(e) => match unreadable.as_mut() {
                    Some(tell) => {
                        tell(path.clone(), io(&path, "open")(e))?;
                        continue;
                    }
                    None => return Err(io(&path, "open")(e)),
                },
            };
            let depth = level.depth.saturating_add(1);
            let next = enter(path, depth, child, max_depth, visit, &mut unreadable)?;
            levels.push(next);
            if let Some(far) = levels
                .len()
                .checked_sub(OPEN_LEVELS.saturating_add(1))
                .and_then(|i| levels.get_mut(i))
            {
                far.fd = None;
            }
            continue;
        }
        let Some(done) = levels.pop() else {
            break;
        };
        let Some(above) = levels.last_mut() else {
            break;
        };
        if above.fd.is_none() {
            let Some(done_fd) = done.fd.as_ref() else {
                return Err(io(shown, "walk (lost a directory handle of)")(Errno::BADF));
            };
            let up = rfs::openat(done_fd, "..", OPEN_DIR, Mode::empty())
                .map_err(io(&done.path, "reopen the directory above"))?;
            let st = rfs::fstat(&up).map_err(io(&above.path, "stat"))?;
            if identity(&st) != (above.dev, above.ino) {
                return Err(FsError::Moved(above.path.clone()));
            }
            above.fd = Some(up);
        }
    }
    Ok(())
}

/// A level entered: each of its entries is visited now, and its
/// subdirectories (not links to them) kept for later if the depth allows.
fn enter(
    path: String,
    depth: u32,
    fd: OwnedFd,
    max_depth: Option<u32>,
    visit: &mut dyn FnMut(&TreeEntry<'_>) -> Result<Visit, FsError>,
    unreadable: &mut Unreadable<'_>,
) -> Result<Level, FsError> {
    let st = rfs::fstat(&fd).map_err(io(&path, "stat"))?;
    let (dev, ino) = identity(&st);
    let child_depth = depth.saturating_add(1);
    let descend = max_depth.is_none_or(|max| child_depth < max);
    let mut pending = Vec::new();
    if max_depth.is_none_or(|max| child_depth <= max) {
        let listed = rfs::Dir::read_from(&fd).map_err(io(&path, "list"));
        let mut dir = match (listed, unreadable.as_mut()) {
            (Ok(dir), _) => Some(dir),
            (Err(e), Some(tell)) => {
                tell(path.clone(), e)?;
                None
            }
            (Err(e), None) => return Err(e),
        };
        while let Some(entry) = dir.as_mut().and_then(|d| d.read()) {
            let entry = match (entry.map_err(io(&path, "list")), unreadable.as_mut()) {
                (Ok(entry), _) => entry,
                (Err(e), Some(tell)) => {
                    tell(path.clone(), e)?;
                    break;
                }
                (Err(e), None) => return Err(e),
            };
            let entry = entry.file_name().to_bytes();
            if entry == b"." || entry == b".." {
                continue;
            }
            let m = match rfs::statat(&fd, entry, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => meta(&st),
                Err(Errno::NOENT) => continue,
                Err(e) => {
                    let shown = format!("{path}/{}", escape_name(entry));
                    match unreadable.as_mut() {
                        Some(tell) => {
                            tell(shown.clone(), io(&shown, "stat")(e))?;
                            continue;
                        }
                        None => return Err(io(&shown, "stat")(e)),
                    }
                }
            };
            let then = visit(&TreeEntry {
                dir: &fd,
                parent: &path,
                name: entry,
                meta: m,
                depth: child_depth,
            })?;
            if m.kind == Kind::Dir && descend && then == Visit::Enter {
                pending.push(entry.to_vec());
            }
        }
    }
    Ok(Level {
        path,
        depth,
        dev,
        ino,
        fd: Some(fd),
        pending,
    })
}
