//! Reading a watched path into its entries: the walk of
//! [`crate::rootfs`] (never following a link, a FIFO or device recorded
//! by type and never opened, what cannot be read recorded as such), with
//! the content of regular files hashed by a small pool of threads while
//! the walk goes on.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rustix::fs::FileType;

use super::bounds::{MAX_DEPTH, MAX_IN_FLIGHT, MAX_PATH_LEN, MAX_WORKERS, READ_BUFFER};
use super::entry::{Content, Entry, EntryKind};
use super::hash;
use crate::rootfs::{FsError, Kind, Meta, RootFs, TreeEntry, Visit};
use converge_format::globs::Excludes;

/// What to read of a watched path.
#[derive(Debug)]
pub struct Selection<'a> {
    pub path: &'a str,
    pub recurse: bool,
    /// Hash regular files (`content` is among the attributes).
    pub content: bool,
    pub excludes: &'a Excludes,
    /// Entries this scan may record (what is left of the run's bound).
    pub max_entries: usize,
}

/// The entries of the watched path, sorted by path; `None` if it does not
/// exist. Over a bound: an error saying which.
pub fn scan(fs: &RootFs, sel: &Selection<'_>) -> Result<Option<Vec<Entry>>, String> {
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_WORKERS);
    let (jobs_tx, jobs_rx) = mpsc::sync_channel::<(usize, OwnedFd, String)>(MAX_IN_FLIGHT);
    let jobs_rx = Arc::new(Mutex::new(jobs_rx));
    let (done_tx, done_rx) = mpsc::channel::<(usize, Content)>();
    std::thread::scope(|scope| {
        for _ in 0..workers {
            let jobs = Arc::clone(&jobs_rx);
            let done = done_tx.clone();
            scope.spawn(move || {
                let mut buffer = vec![0u8; READ_BUFFER];
                loop {
                    let job = match jobs.lock() {
                        Ok(rx) => rx.recv(),
                        Err(_) => return,
                    };
                    let Ok((index, fd, shown)) = job else { return };
                    let content = hash::content(&fd, &shown, &mut buffer);
                    drop(fd);
                    if done.send((index, content)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(done_tx);
        let walked = walk(fs, sel, &jobs_tx);
        // Closing the queue ends the workers once it is drained.
        drop(jobs_tx);
        let mut entries = match walked {
            Ok(Some(entries)) => entries,
            Ok(None) => return Ok(None),
            Err(e) => return Err(e),
        };
        for (index, content) in done_rx.iter() {
            if let Some(e) = entries.get_mut(index) {
                e.content = content;
            }
        }
        entries.sort_unstable_by(|a, b| a.path.cmp(&b.path));
        Ok(Some(entries))
    })
}

/// The walk itself: entries in the order seen, regular files sent to the
/// hashing threads.
fn walk(
    fs: &RootFs,
    sel: &Selection<'_>,
    jobs: &mpsc::SyncSender<(usize, OwnedFd, String)>,
) -> Result<Option<Vec<Entry>>, String> {
    let mut entries: Vec<Entry> = Vec::new();
    let mut over: Option<String> = None;
    let top = fs
        .visit_object(sel.path, |e| record(e, sel, jobs, &mut entries))
        .map_err(|e| e.to_string())?;
    let Some(top_kind) = top else {
        return Ok(None);
    };
    if !(sel.recurse && top_kind == Kind::Dir) {
        return Ok(Some(entries));
    }
    let top_len = sel.path.trim_end_matches('/').len().saturating_add(1);
    let mut index_of: HashMap<String, usize> = HashMap::new();
    let mut visit = |e: &TreeEntry<'_>| -> Result<Visit, FsError> {
        let path = e.path();
        let relative = path.get(top_len..).unwrap_or_default();
        if !sel.excludes.is_empty() && sel.excludes.excludes(relative.as_bytes(), e.name()) {
            return Ok(Visit::Skip);
        }
        let problem = if entries.len() >= sel.max_entries {
            Some(format!(
                "`{}` holds more than {} entries, the bound (docs/change-detection.md, Bounds); nothing was recorded",
                sel.path, sel.max_entries
            ))
        } else if path.len() > MAX_PATH_LEN {
            Some(format!(
                "an entry's path is longer than {MAX_PATH_LEN} bytes: {}...; nothing was recorded",
                path.get(..120).unwrap_or_default()
            ))
        } else if e.depth > MAX_DEPTH {
            Some(format!(
                "`{}` is more than {MAX_DEPTH} levels deep, the bound; nothing was recorded",
                crate::rootfs::printable(&path)
            ))
        } else {
            None
        };
        if let Some(problem) = problem {
            over = Some(problem);
            // Stop the walk: an error the caller replaces with `over`.
            return Err(FsError::Rejected(String::new()));
        }
        if e.meta.kind == Kind::Dir {
            index_of.insert(path, entries.len());
        }
        record(e, sel, jobs, &mut entries);
        Ok(Visit::Enter)
    };
    let mut cannot: Vec<(String, String)> = Vec::new();
    let mut unreadable = |path: String, why: FsError| -> Result<(), FsError> {
        cannot.push((path, why.to_string()));
        Ok(())
    };
    let walked = fs.walk_tree_to_read(
        sel.path,
        Some(MAX_DEPTH.saturating_add(1)),
        &mut visit,
        &mut unreadable,
    );
    if let Some(problem) = over {
        return Err(problem);
    }
    walked.map_err(|e| e.to_string())?;
    for (path, why) in cannot {
        match index_of.get(&path).and_then(|&i| entries.get_mut(i)) {
            Some(dir) => dir.content = Content::Unreadable(why),
            None => entries.push(unknown(path, why)),
        }
    }
    Ok(Some(entries))
}

/// Records one entry; a regular file's content goes to the hashing
/// threads. Returns what the entry is.
fn record(
    e: &TreeEntry<'_>,
    sel: &Selection<'_>,
    jobs: &mpsc::SyncSender<(usize, OwnedFd, String)>,
    entries: &mut Vec<Entry>,
) -> Kind {
    let path = if e.depth == 0 {
        sel.path.trim_end_matches('/').to_owned()
    } else {
        e.path()
    };
    let path = if path.is_empty() {
        "/".to_owned()
    } else {
        path
    };
    let kind = kind_of(&e.meta);
    let content = match kind {
        EntryKind::Link => match e.read_link() {
            Ok(target) => Content::Target(crate::rootfs::escape_name(&target)),
            Err(why) => Content::Unreadable(why.to_string()),
        },
        EntryKind::File if sel.content => match e.open_to_read() {
            Ok(fd) => {
                let index = entries.len();
                match jobs.send((index, fd, path.clone())) {
                    // Filled in when the hash comes back.
                    Ok(()) => Content::None,
                    Err(_) => Content::Unreadable("the hashing threads stopped".to_owned()),
                }
            }
            Err(why) => Content::Unreadable(why.to_string()),
        },
        _ => Content::None,
    };
    entries.push(Entry {
        path,
        kind,
        mode: e.meta.mode,
        uid: e.meta.uid,
        gid: e.meta.gid,
        nlink: e.meta.nlink,
        size: e.meta.len,
        mtime: e.meta.mtime,
        mtime_nsec: e.meta.mtime_nsec,
        content,
    });
    e.meta.kind
}

fn kind_of(m: &Meta) -> EntryKind {
    match m.file_type {
        FileType::RegularFile => EntryKind::File,
        FileType::Directory => EntryKind::Dir,
        FileType::Symlink => EntryKind::Link,
        FileType::Fifo => EntryKind::Fifo,
        FileType::Socket => EntryKind::Socket,
        FileType::CharacterDevice => EntryKind::CharDevice,
        FileType::BlockDevice => EntryKind::BlockDevice,
        FileType::Unknown => EntryKind::Unknown,
    }
}

/// An entry whose metadata could not be read.
fn unknown(path: String, why: String) -> Entry {
    Entry {
        path,
        kind: EntryKind::Unknown,
        mode: 0,
        uid: 0,
        gid: 0,
        nlink: 0,
        size: 0,
        mtime: 0,
        mtime_nsec: 0,
        content: Content::Unreadable(why),
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use sha2::{Digest as _, Sha256};

    fn root() -> (tempfile::TempDir, RootFs) {
        let dir = tempfile::tempdir().unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        (dir, fs)
    }

    fn sel<'a>(path: &'a str, excludes: &'a Excludes, max: usize) -> Selection<'a> {
        Selection {
            path,
            recurse: true,
            content: true,
            excludes,
            max_entries: max,
        }
    }

    #[test]
    fn every_entry_is_recorded_with_its_digest_sorted() {
        let (dir, fs) = root();
        std::fs::create_dir_all(dir.path().join("t/sub")).unwrap();
        std::fs::write(dir.path().join("t/a"), "a").unwrap();
        std::fs::write(dir.path().join("t/sub/b"), "b").unwrap();
        let none = Excludes::default();
        let entries = scan(&fs, &sel("/t", &none, 100)).unwrap().unwrap();
        let paths: Vec<&str> = entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(paths, ["/t", "/t/a", "/t/sub", "/t/sub/b"]);
        let expected: [u8; 32] = Sha256::digest(b"a").into();
        assert_eq!(entries[1].content, Content::Digest(expected));
    }

    #[test]
    fn more_entries_than_the_bound_fail_and_record_nothing() {
        let (dir, fs) = root();
        std::fs::create_dir_all(dir.path().join("t")).unwrap();
        for i in 0..5 {
            std::fs::write(dir.path().join(format!("t/f{i}")), "x").unwrap();
        }
        let none = Excludes::default();
        let err = scan(&fs, &sel("/t", &none, 3)).unwrap_err();
        assert!(err.contains("more than 3 entries"), "{err}");
        assert!(scan(&fs, &sel("/t", &none, 6)).unwrap().is_some());
    }

    #[test]
    fn a_tree_deeper_than_the_bound_fails() {
        let (dir, fs) = root();
        let mut deep = dir.path().join("t");
        for _ in 0..=MAX_DEPTH {
            deep.push("d");
        }
        std::fs::create_dir_all(&deep).unwrap();
        let none = Excludes::default();
        let err = scan(&fs, &sel("/t", &none, 10_000)).unwrap_err();
        assert!(err.contains("levels deep"), "{err}");
    }

    #[test]
    fn a_missing_path_is_none_and_a_link_is_its_target() {
        let (dir, fs) = root();
        let none = Excludes::default();
        assert_eq!(scan(&fs, &sel("/nothing", &none, 10)).unwrap(), None);
        std::os::unix::fs::symlink("/etc/shadow", dir.path().join("l")).unwrap();
        let entries = scan(&fs, &sel("/l", &none, 10)).unwrap().unwrap();
        assert_eq!(entries[0].kind, EntryKind::Link);
        assert_eq!(entries[0].content, Content::Target("/etc/shadow".into()));
    }
}
