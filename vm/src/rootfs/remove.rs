//! Removing a directory tree of any depth: iteratively, never following a
//! link, with a bounded number of open descriptors.
//!
//! A recursive walk holding a descriptor per level overflowed the stack on
//! a planted 12,000-level chain (SIGABRT on every run) and ran out of
//! descriptors at a 1,024 limit. Here the levels are a list on the heap;
//! only the deepest [`OPEN_LEVELS`] hold a descriptor. Climbing back to a
//! level whose descriptor was closed reopens it through `..` of the level
//! below, and the device and inode must be the ones recorded on the way
//! down: if the tree was moved meanwhile, removal stops with an error
//! instead of continuing somewhere else.

use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::{escape_name, io, FsError};

/// Levels below the deepest that keep their descriptor open.
const OPEN_LEVELS: usize = 8;

const OPEN_DIR: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// One directory on the way down.
struct Level {
    /// Its name in the level above.
    name: Vec<u8>,
    dev: u64,
    ino: u64,
    fd: Option<OwnedFd>,
    /// Subdirectories not yet removed.
    pending: Vec<Vec<u8>>,
}

#[allow(
    clippy::useless_conversion,
    reason = "st_dev and st_ino are narrower than u64 on some targets"
)]
fn identity(st: &rfs::Stat) -> (u64, u64) {
    (u64::from(st.st_dev), u64::from(st.st_ino))
}

/// Removes the directory `name` in `parent` and everything in it. `shown`
/// is its policy path, for errors; a name inside is escaped.
pub(super) fn remove_tree(parent: &OwnedFd, name: &[u8], shown: &str) -> Result<(), FsError> {
    let inside = |entry: &[u8], depth: usize| -> String {
        if depth == 0 {
            format!("{shown}/{}", escape_name(entry))
        } else {
            format!("{shown}/.../{} ({depth} levels down)", escape_name(entry))
        }
    };
    let top = rfs::openat(parent, name, OPEN_DIR, Mode::empty()).map_err(io(shown, "open"))?;
    let mut levels = vec![enter(name.to_vec(), top, shown)?];
    loop {
        let depth = levels.len().saturating_sub(1);
        let Some(level) = levels.last_mut() else {
            break;
        };
        let Some(fd) = level.fd.as_ref() else {
            return Err(io(shown, "remove (lost a directory handle of)")(
                Errno::BADF,
            ));
        };
        if let Some(sub) = level.pending.pop() {
            let child = match rfs::openat(fd, sub.as_slice(), OPEN_DIR, Mode::empty()) {
                Ok(child) => child,
                Err(Errno::NOENT) => continue,
                Err(e) => return Err(io(&inside(&sub, depth), "open")(e)),
            };
            let next = enter(sub, child, shown)?;
            levels.push(next);
            // Only the deepest levels keep a descriptor.
            if let Some(far) = levels
                .len()
                .checked_sub(OPEN_LEVELS.saturating_add(1))
                .and_then(|i| levels.get_mut(i))
            {
                far.fd = None;
            }
            continue;
        }
        // Everything in this level is gone: remove it from the one above.
        let Some(done) = levels.pop() else {
            break;
        };
        let Some(done_fd) = done.fd else {
            return Err(io(shown, "remove (lost a directory handle of)")(
                Errno::BADF,
            ));
        };
        match levels.last_mut() {
            None => {
                return rfs::unlinkat(parent, name, AtFlags::REMOVEDIR)
                    .map_err(io(shown, "remove directory"));
            }
            Some(above) => {
                if above.fd.is_none() {
                    let up = rfs::openat(&done_fd, "..", OPEN_DIR, Mode::empty())
                        .map_err(io(shown, "reopen a directory of"))?;
                    let st = rfs::fstat(&up).map_err(io(shown, "stat"))?;
                    if identity(&st) != (above.dev, above.ino) {
                        return Err(io(shown, "remove (the tree moved while being removed)")(
                            Errno::STALE,
                        ));
                    }
                    above.fd = Some(up);
                }
                drop(done_fd);
                if let Some(above_fd) = above.fd.as_ref() {
                    rfs::unlinkat(above_fd, done.name.as_slice(), AtFlags::REMOVEDIR).map_err(
                        io(
                            &inside(&done.name, depth.saturating_sub(1)),
                            "remove directory",
                        ),
                    )?;
                }
            }
        }
    }
    Ok(())
}

/// A level entered: its files and links are removed at once, its
/// subdirectories listed for later.
fn enter(name: Vec<u8>, fd: OwnedFd, shown: &str) -> Result<Level, FsError> {
    let st = rfs::fstat(&fd).map_err(io(shown, "stat"))?;
    let (dev, ino) = identity(&st);
    let mut pending = Vec::new();
    let mut dir = rfs::Dir::read_from(&fd).map_err(io(shown, "list"))?;
    while let Some(entry) = dir.read() {
        let entry = entry.map_err(io(shown, "list"))?;
        let entry = entry.file_name().to_bytes();
        if entry == b"." || entry == b".." {
            continue;
        }
        let is_dir = match rfs::statat(&fd, entry, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => rfs::FileType::from_raw_mode(st.st_mode) == rfs::FileType::Directory,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(io(&format!("{shown}/{}", escape_name(entry)), "stat")(e)),
        };
        if is_dir {
            pending.push(entry.to_vec());
        } else {
            match rfs::unlinkat(&fd, entry, AtFlags::empty()) {
                Ok(()) | Err(Errno::NOENT) => {}
                Err(e) => return Err(io(&format!("{shown}/{}", escape_name(entry)), "remove")(e)),
            }
        }
    }
    Ok(Level {
        name,
        dev,
        ino,
        fd: Some(fd),
        pending,
    })
}
