//! Staged writes (issue 22, items 1-2): durable first runs in batches.
//!
//! One atomic write costs two fsyncs in sequence (the temporary's data,
//! then its directory after the rename), so a first run of 10,000 files
//! waited for 20,000 flushes. A run instead *stages* each new content: the
//! temporary is created exactly as [`super::atomic`] creates it (exclusive,
//! no-follow, owner then mode then content, in the target's directory) but
//! is not synced nor renamed. The batch is then flushed at a barrier
//! ([`Batch::flush`]): one `syncfs` per file system holding temporaries
//! makes all their data durable together, each temporary is renamed over
//! its target in the order it was staged (the directory's identity checked
//! again first, as a single write checks it), and each directory that
//! received a rename is synced once (dpkg's fix, Ts'o's variant (c)).
//!
//! What stays true: at every instant each target is its old or its new
//! complete content (a rename is atomic; a kill leaves the staged
//! temporaries, which the next run removes like any stale temporary: they
//! have the same names, `.converge-tmp.TOKEN.N`), and no new content takes
//! its name before its data is durable. Killed runs leave a prefix of the
//! renames, in promise order, as before.
//!
//! Until the flush, the staged file is what the run sees at its path:
//! [`super::RootFs::lstat`] and the reads answer from the temporary, and a
//! change of its mode or owner is made to the temporary. What the run
//! (`crate::run`) must do is flush before any promise that could observe
//! the file from elsewhere (a command, a service, a package, a promise that
//! comes `after` a staged one, any promise on a staged path, below it or
//! above it) and at the end of each pass; outcomes of the promises that
//! staged are final only then. Every write of one flush gets a ticket; a
//! failure is reported by ticket ([`Batch::flush`]).

// The batch is looked up for every file operation of a run; its keys are
// the signed policy's own paths.
use rustc_hash::{FxHashMap, FxHashSet};
use std::os::fd::OwnedFd;
use std::rc::Rc;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use super::atomic::{stage_at, Temp};
use super::{kind_at, DirId, FsError, Kind, RootFs};

/// A batch is flushed once it holds this many files (each a name and a
/// few paths in memory: a 10,000-file first run peaked 2.6 MB higher
/// than with 4,096, about 260 bytes a write; it is now one flush, one
/// `syncfs`, as the durable floor's)...
pub const MAX_STAGED_FILES: usize = 16_384;
/// ... or this many bytes (they are on disk, in the temporaries, not in
/// memory: the bound keeps the one `syncfs` from growing without limit)...
pub const MAX_STAGED_BYTES: u64 = 256 << 20;
/// ... or holds open handles on this many directories. A staged write
/// keeps the handle of its directory until the flush renames it there;
/// the writes of one directory share one handle (while it is the same
/// directory), so a batch holds a few hundred descriptors at most, well
/// within the 1,024 a process may have open by default (`ulimit -n`):
/// with a handle per write, a first run of 10,000 files failed with
/// "Too many open files" under that limit.
pub const MAX_STAGED_DIRS: usize = 256;

/// One staged write: the temporary `temp` in `dir`, to be renamed to
/// `name`.
#[derive(Debug)]
pub(super) struct Staged {
    /// The policy path.
    pub path: String,
    /// The directory's components below the root, joined with `/`: where
    /// it is checked again before the rename.
    pub dir_key: String,
    pub dir: Rc<OwnedFd>,
    pub name: String,
    pub temp: Temp,
    /// The directory's identity (`st_dev`, `st_ino`) when it was walked.
    pub dir_id: DirId,
    /// The writes this one answers for (a path written twice before a
    /// flush keeps one temporary, the latest).
    pub tickets: Vec<u64>,
}

/// The staged writes of a run, in order, and the failures of flushes not
/// yet collected.
#[derive(Debug, Default)]
pub(super) struct Batch {
    entries: Vec<Staged>,
    /// Policy path -> index in `entries`.
    by_path: FxHashMap<String, usize>,
    /// Every directory above a staged path (its policy path, without a
    /// trailing `/`).
    dirs: FxHashSet<String>,
    bytes: u64,
    next_ticket: u64,
    failures: Vec<(u64, FsError)>,
    /// The latest staged write's content as read back through the handle
    /// it was written with, by ticket: the read that confirms the write
    /// (`run::operators`, `confirm`) takes it instead of opening the
    /// temporary again. One at most, so it costs one file's bytes.
    read_back: Option<(u64, Vec<u8>)>,
    /// The directory handle staged writes share, by directory key: a
    /// fresh walk that finds the same directory (same identity) keeps
    /// this one instead of its own.
    handles: FxHashMap<String, (DirId, Rc<OwnedFd>)>,
    /// How many distinct directory handles the staged writes hold.
    open_dirs: usize,
}

/// The directories above a policy path (`/a/b/c` -> `/a`, `/a/b`).
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    // By byte (`/` is one byte in UTF-8): asked for every file promise
    // while anything is staged.
    path.bytes()
        .enumerate()
        .filter(|(i, b)| *b == b'/' && *i > 0)
        .filter_map(|(i, _)| path.get(..i))
}

impl Batch {
    /// The ticket the next staged write gets: the writes a promise staged
    /// are the tickets between this before and after it.
    pub fn next_ticket(&self) -> u64 {
        self.next_ticket
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the batch is at its bound ([`MAX_STAGED_FILES`],
    /// [`MAX_STAGED_BYTES`], [`MAX_STAGED_DIRS`]).
    pub fn full(&self) -> bool {
        self.entries.len() >= MAX_STAGED_FILES
            || self.bytes >= MAX_STAGED_BYTES
            || self.open_dirs >= MAX_STAGED_DIRS
    }

    /// The handle a staged write in directory `key` keeps: the one the
    /// batch already holds for it if `fresh` (just walked) is open on the
    /// same directory, else `fresh`, which then becomes the shared one.
    pub fn share_dir(&mut self, key: &str, id: DirId, fresh: Rc<OwnedFd>) -> Rc<OwnedFd> {
        if let Some((held, dir)) = self.handles.get(key) {
            if *held == id {
                return Rc::clone(dir);
            }
        }
        self.open_dirs = self.open_dirs.saturating_add(1);
        self.handles.insert(key.to_owned(), (id, Rc::clone(&fresh)));
        fresh
    }

    /// The staged temporary of `path`, if any: its directory and name.
    pub fn staged(&self, path: &str) -> Option<(&Rc<OwnedFd>, &str)> {
        // Asked of every path a converged run reads: nothing to hash then.
        if self.entries.is_empty() {
            return None;
        }
        let entry = self.entries.get(*self.by_path.get(path)?)?;
        Some((&entry.dir, entry.temp.name.as_str()))
    }

    /// The read-back content of `path`'s staged temporary, if it is the
    /// latest staged write and holds at most `limit` bytes: taken, so a
    /// second read opens the temporary.
    pub fn take_read_back(&mut self, path: &str, limit: u64) -> Option<Vec<u8>> {
        self.read_back.as_ref()?;
        let latest = self
            .entries
            .get(*self.by_path.get(path)?)?
            .tickets
            .last()
            .copied();
        match self.read_back.take() {
            Some((ticket, bytes)) if Some(ticket) == latest && bytes.len() as u64 <= limit => {
                Some(bytes)
            }
            other => {
                self.read_back = other;
                None
            }
        }
    }

    /// Whether a change at `path` could see or disturb a staged write:
    /// `path` is staged, is a directory above a staged path, or lies below
    /// a staged path.
    pub fn touches(&self, path: &str) -> bool {
        if self.entries.is_empty() {
            return false;
        }
        let path = path.trim_end_matches('/');
        self.by_path.contains_key(path)
            || self.dirs.contains(path)
            || ancestors(path).any(|a| self.by_path.contains_key(a))
    }

    /// Adds a staged write; returns its ticket. A path already staged
    /// gives up its older temporary (removed now) and keeps its tickets.
    pub fn add(&mut self, mut staged: Staged, len: u64, read_back: Option<Vec<u8>>) -> u64 {
        let ticket = self.next_ticket;
        self.read_back = read_back.map(|bytes| (ticket, bytes));
        self.next_ticket = self.next_ticket.saturating_add(1);
        staged.tickets.push(ticket);
        self.bytes = self.bytes.saturating_add(len);
        if let Some(slot) = self
            .by_path
            .get(&staged.path)
            .and_then(|i| self.entries.get_mut(*i))
        {
            let old = std::mem::replace(slot, staged);
            let _ = rfs::unlinkat(&*old.dir, old.temp.name.as_str(), AtFlags::empty());
            let mut tickets = old.tickets;
            tickets.append(&mut slot.tickets);
            slot.tickets = tickets;
            return ticket;
        }
        for dir in ancestors(&staged.path) {
            // Copied once per directory, not once per file in it.
            if !self.dirs.contains(dir) {
                self.dirs.insert(dir.to_owned());
            }
        }
        self.by_path.insert(staged.path.clone(), self.entries.len());
        self.entries.push(staged);
        ticket
    }

    /// Takes every staged write out of the batch, in staging order.
    pub fn take(&mut self) -> Vec<Staged> {
        self.by_path.clear();
        self.dirs.clear();
        self.handles.clear();
        self.open_dirs = 0;
        self.bytes = 0;
        self.read_back = None;
        std::mem::take(&mut self.entries)
    }

    /// Records that the write with `ticket` failed.
    pub fn fail(&mut self, tickets: &[u64], error: &FsError) {
        self.failures
            .extend(tickets.iter().map(|t| (*t, error.clone())));
    }

    /// The failures recorded since the last call.
    pub fn take_failures(&mut self) -> Vec<(u64, FsError)> {
        std::mem::take(&mut self.failures)
    }
}

impl Drop for Batch {
    /// A run that ends without flushing (an error returned early) leaves
    /// no temporary behind: nothing staged was renamed.
    fn drop(&mut self) {
        for e in &self.entries {
            let _ = rfs::unlinkat(&*e.dir, e.temp.name.as_str(), AtFlags::empty());
        }
    }
}

fn io_error(path: &str, op: &'static str, errno: Errno) -> FsError {
    FsError::Io {
        path: path.to_owned(),
        op,
        errno,
    }
}

/// A handle on `dir` that `fsync` and `syncfs` accept (the cached ones are
/// `O_PATH`).
fn readable(dir: &OwnedFd) -> Result<OwnedFd, Errno> {
    rfs::openat(
        dir,
        ".",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Makes every temporary of `entries` durable: one `syncfs` per file
/// system. Returns the file systems that could not be synced, with why.
pub(super) fn make_durable(entries: &[Staged]) -> FxHashMap<u64, Errno> {
    let mut done: FxHashMap<u64, Option<Errno>> = FxHashMap::default();
    for e in entries {
        if done.contains_key(&e.dir_id.dev) {
            continue;
        }
        let result = readable(&e.dir).and_then(rfs::syncfs);
        done.insert(e.dir_id.dev, result.err());
    }
    done.into_iter()
        .filter_map(|(dev, e)| e.map(|e| (dev, e)))
        .collect()
}

/// Renames one staged temporary over its target. On failure the temporary
/// is removed and the target is untouched.
pub(super) fn rename(e: &Staged) -> Result<(), FsError> {
    match rfs::renameat(&*e.dir, e.temp.name.as_str(), &*e.dir, e.name.as_str()) {
        Ok(()) => Ok(()),
        Err(errno) => {
            discard(e);
            Err(io_error(&e.path, "rename into place", errno))
        }
    }
}

/// Removes a staged temporary that will not be renamed.
pub(super) fn discard(e: &Staged) {
    let _ = rfs::unlinkat(&*e.dir, e.temp.name.as_str(), AtFlags::empty());
}

/// `fsync` of a directory that received renames.
pub(super) fn sync_dir(dir: &OwnedFd) -> Result<(), Errno> {
    readable(dir).and_then(rfs::fsync)
}

/// Why a staged write whose file system could not be synced failed.
pub(super) fn not_durable(path: &str, errno: Errno) -> FsError {
    io_error(path, "make durable (syncfs) the new content of", errno)
}

/// Why a staged write whose directory could not be synced failed.
pub(super) fn dir_not_durable(path: &str, errno: Errno) -> FsError {
    io_error(path, "sync the directory of", errno)
}

impl RootFs {
    /// Makes [`RootFs::write_file`] stage its writes (a real run that is
    /// not interactive) or write through at once (the default). Turning it
    /// off flushes what is staged.
    pub fn set_staging(&self, on: bool) {
        if !on {
            self.flush_staged();
        }
        self.staging.set(on);
    }

    /// The ticket the next staged write will get (see [`Batch`]).
    pub fn next_ticket(&self) -> u64 {
        self.batch.borrow().next_ticket()
    }

    /// Whether anything is staged.
    pub fn has_staged(&self) -> bool {
        !self.batch.borrow().is_empty()
    }

    /// Whether a promise on `path` could observe a staged write (see
    /// [`Batch::touches`]): the run flushes first.
    pub fn touches_staged(&self, path: &str) -> bool {
        self.batch.borrow().touches(path)
    }

    /// Flushes every staged write and returns the failures, by ticket, of
    /// this flush and of the earlier ones not yet collected (a change that
    /// needed the batch flushed first, a batch that reached its bound).
    pub fn flush(&self) -> Vec<(u64, FsError)> {
        self.flush_staged();
        self.batch.borrow_mut().take_failures()
    }

    /// The staged temporary of `path`, if any.
    pub(super) fn staged(&self, path: &str) -> Option<(Rc<OwnedFd>, String)> {
        let batch = self.batch.borrow();
        let (dir, temp) = batch.staged(path.trim_end_matches('/'))?;
        Some((Rc::clone(dir), temp.to_owned()))
    }

    /// Flushes first if a change at `path` could see or disturb a staged
    /// write.
    pub(super) fn flush_if_touched(&self, path: &str) {
        if self.touches_staged(path) {
            self.flush_staged();
        }
    }

    /// [`RootFs::write_file`] while staging: the same walk and checks as a
    /// write through, then a temporary with the new content, owner and
    /// mode that takes the name at the next flush.
    pub(super) fn stage_file(
        &self,
        path: &str,
        contents: &[u8],
        mode: u32,
        owner: Option<(u32, u32)>,
    ) -> Result<(), FsError> {
        let Some((dir, name, dir_id)) = self.parent_to_change_on(path, Some(0o755))? else {
            return Err(io_error(path, "write", Errno::NOENT));
        };
        match kind_at(&dir, name) {
            Some(Kind::Symlink) => return Err(FsError::Symlink(path.to_owned())),
            Some(Kind::Dir) => {
                return Err(io_error(
                    path,
                    "replace a directory with a file at",
                    Errno::ISDIR,
                ))
            }
            _ => {}
        }
        let dir_key = self.split(path)?.map_or("", |(key, _)| key).to_owned();
        let (temp, read_back) = stage_at(&dir, contents, mode, owner, path)?;
        let dir = self.batch.borrow_mut().share_dir(&dir_key, dir_id, dir);
        let staged = Staged {
            path: path.trim_end_matches('/').to_owned(),
            dir_key,
            name: name.to_owned(),
            dir,
            temp,
            dir_id,
            tickets: Vec::new(),
        };
        let full = {
            let mut batch = self.batch.borrow_mut();
            batch.add(staged, contents.len() as u64, read_back);
            batch.full()
        };
        if full {
            self.flush_staged();
        }
        Ok(())
    }

    /// The flush (see the module comment): durability, then renames in
    /// staging order, each directory's identity checked again before its
    /// renames, then one `fsync` per directory. Failures are recorded in
    /// the batch by ticket.
    pub(super) fn flush_staged(&self) {
        let entries = self.batch.borrow_mut().take();
        if entries.is_empty() {
            return;
        }
        let mut failures: Vec<(&Staged, FsError)> = Vec::new();
        let unsynced = make_durable(&entries);
        // The directory of the previous rename and whether it is still at
        // its path: checked again whenever the directory changes.
        let mut checked: Option<(&str, bool)> = None;
        let mut renamed: Vec<(&Staged, Vec<&Staged>)> = Vec::new();
        let mut slot_of: FxHashMap<&str, usize> = FxHashMap::default();
        for e in &entries {
            if let Some(errno) = unsynced.get(&e.dir_id.dev) {
                discard(e);
                failures.push((e, not_durable(&e.path, *errno)));
                continue;
            }
            let still = match checked {
                Some((key, still)) if key == e.dir_key => still,
                _ => {
                    let dirs: Vec<&str> = e.dir_key.split('/').filter(|c| !c.is_empty()).collect();
                    let still = self.still_at(&e.path, &dirs, &e.dir).is_ok();
                    checked = Some((e.dir_key.as_str(), still));
                    still
                }
            };
            if !still {
                discard(e);
                failures.push((e, FsError::Moved(e.path.clone())));
                continue;
            }
            if let Err(err) = rename(e) {
                failures.push((e, err));
                continue;
            }
            match slot_of
                .get(e.dir_key.as_str())
                .and_then(|i| renamed.get_mut(*i))
            {
                Some((_, members)) => members.push(e),
                None => {
                    slot_of.insert(e.dir_key.as_str(), renamed.len());
                    renamed.push((e, vec![e]));
                }
            }
        }
        for (first, members) in &renamed {
            if let Err(errno) = sync_dir(&first.dir) {
                for e in members {
                    failures.push((e, dir_not_durable(&e.path, errno)));
                }
            }
        }
        let mut batch = self.batch.borrow_mut();
        for (e, err) in &failures {
            batch.fail(&e.tickets, err);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The read that confirms a staged write gets the content read back
    /// through the handle that wrote it, once; later reads, and reads of
    /// an older write of the same path, open the temporary; a flush ends
    /// it.
    #[test]
    fn a_staged_write_is_read_back_once_then_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        fs.set_staging(true);
        fs.write_file("/etc/a", b"one\n", 0o644, None).unwrap();
        assert!(fs.batch.borrow().read_back.is_some());
        fs.write_file("/etc/b", b"two\n", 0o644, None).unwrap();
        // Only the latest write's read-back is kept.
        assert_eq!(
            fs.batch
                .borrow_mut()
                .take_read_back("/etc/a", MAX_READ_TEST),
            None
        );
        assert_eq!(
            fs.read_file("/etc/a").unwrap().as_deref(),
            Some(&b"one\n"[..])
        );
        assert_eq!(
            fs.read_file("/etc/b").unwrap().as_deref(),
            Some(&b"two\n"[..])
        );
        assert!(fs.batch.borrow().read_back.is_none(), "taken");
        assert_eq!(
            fs.read_file("/etc/b").unwrap().as_deref(),
            Some(&b"two\n"[..])
        );
        // Written again: the new content, from its read-back.
        fs.write_file("/etc/b", b"three\n", 0o644, None).unwrap();
        assert_eq!(
            fs.read_file("/etc/b/").unwrap().as_deref(),
            Some(&b"three\n"[..])
        );
        // Bigger than the read asks for: read by name, refused as before.
        fs.write_file("/etc/c", b"four\n", 0o644, None).unwrap();
        assert!(fs.read_file_limited("/etc/c", 2).is_err());
        fs.write_file("/etc/d", b"five\n", 0o644, None).unwrap();
        fs.flush();
        assert!(fs.batch.borrow().read_back.is_none(), "a flush ends it");
        assert_eq!(std::fs::read(dir.path().join("etc/d")).unwrap(), b"five\n");
        assert_eq!(
            fs.read_file("/etc/d").unwrap().as_deref(),
            Some(&b"five\n"[..])
        );
    }

    const MAX_READ_TEST: u64 = 1 << 20;

    #[test]
    fn ancestors_are_the_directories_above() {
        let a: Vec<&str> = ancestors("/a/b/c").collect();
        assert_eq!(a, ["/a", "/a/b"]);
        assert_eq!(ancestors("/a").count(), 0);
    }
}
