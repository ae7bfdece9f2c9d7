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

impl TreeEntry<'_> {
    /// The entry's policy path, its name escaped (for reports).
    pub fn path(&self) -> String {
        format!("{}/{}", self.parent, escape_name(self.name))
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
    let mut levels = vec![enter(shown.to_owned(), 0, top, max_depth, visit)?];
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
                Err(e) => return Err(io(&path, "open")(e)),
            };
            let depth = level.depth.saturating_add(1);
            let next = enter(path, depth, child, max_depth, visit)?;
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
) -> Result<Level, FsError> {
    let st = rfs::fstat(&fd).map_err(io(&path, "stat"))?;
    let (dev, ino) = identity(&st);
    let child_depth = depth.saturating_add(1);
    let descend = max_depth.is_none_or(|max| child_depth < max);
    let mut pending = Vec::new();
    if max_depth.is_none_or(|max| child_depth <= max) {
        let mut dir = rfs::Dir::read_from(&fd).map_err(io(&path, "list"))?;
        while let Some(entry) = dir.read() {
            let entry = entry.map_err(io(&path, "list"))?;
            let entry = entry.file_name().to_bytes();
            if entry == b"." || entry == b".." {
                continue;
            }
            let m = match rfs::statat(&fd, entry, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => meta(&st),
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(io(&format!("{path}/{}", escape_name(entry)), "stat")(e)),
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
