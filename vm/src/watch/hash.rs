//! Hashing a regular file the walk opened: read with a reusable buffer,
//! the metadata compared before and after. A file whose size or mtime
//! moved while it was read is read once more; if it moves again it is
//! recorded as unstable rather than with a digest of bytes that never
//! existed together.

use std::os::fd::OwnedFd;

use rustix::io::Errno;
use sha2::{Digest as _, Sha256};

use super::entry::Content;
use crate::rootfs::{meta_of, Meta};

/// The content of the open file `fd` (shown as `shown`), as a digest, or
/// why it could not be had.
pub fn content(fd: &OwnedFd, shown: &str, buffer: &mut [u8]) -> Content {
    for _ in 0..2 {
        let before = match meta_of(fd, shown) {
            Ok(m) => m,
            Err(e) => return Content::Unreadable(e.to_string()),
        };
        // Only the bytes the file had when this read started: a file
        // that grows as fast as it is read would otherwise never end.
        let digest = match digest(fd, buffer, before.len) {
            Ok(d) => d,
            Err(e) => return Content::Unreadable(format!("cannot read: {e}")),
        };
        let after = match meta_of(fd, shown) {
            Ok(m) => m,
            Err(e) => return Content::Unreadable(e.to_string()),
        };
        if steady(&before, &after) {
            return Content::Digest(digest);
        }
    }
    Content::Unstable
}

fn steady(a: &Meta, b: &Meta) -> bool {
    (a.len, a.mtime, a.mtime_nsec) == (b.len, b.mtime, b.mtime_nsec)
}

/// SHA-256 of the file's first `len` bytes (`pread`, so a second read
/// needs no seek). A file that shrank ends early; the metadata compared
/// after the read says so.
fn digest(fd: &OwnedFd, buffer: &mut [u8], len: u64) -> Result<[u8; 32], Errno> {
    let mut hasher = Sha256::new();
    let mut offset: u64 = 0;
    while offset < len {
        let want = usize::try_from(len.saturating_sub(offset))
            .unwrap_or(usize::MAX)
            .min(buffer.len());
        let chunk = buffer.get_mut(..want).unwrap_or_default();
        let n = match rustix::io::pread(fd, chunk, offset) {
            Ok(0) => break,
            Ok(n) => n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e),
        };
        hasher.update(buffer.get(..n).unwrap_or_default());
        offset = offset.saturating_add(n as u64);
    }
    Ok(hasher.finalize().into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn open(path: &std::path::Path) -> OwnedFd {
        OwnedFd::from(std::fs::File::open(path).unwrap())
    }

    #[test]
    fn a_steady_file_has_the_digest_of_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..1_000_000u32).map(|i| i as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let mut buffer = vec![0u8; 4096];
        let expected: [u8; 32] = Sha256::digest(&bytes).into();
        assert_eq!(
            content(&open(&path), "/f", &mut buffer),
            Content::Digest(expected)
        );
    }

    /// A file that keeps growing while it is read is read twice, then
    /// recorded as unstable, and the read ends (it never chases the
    /// writer).
    #[test]
    fn a_file_that_keeps_changing_is_unstable_and_the_read_ends() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 32 << 20]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = Arc::clone(&stop);
            let path = path.clone();
            std::thread::spawn(move || {
                let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    f.write_all(b"more").unwrap();
                }
            })
        };
        let mut buffer = vec![0u8; 4096];
        let found = content(&open(&path), "/f", &mut buffer);
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert_eq!(found, Content::Unstable);
    }
}
