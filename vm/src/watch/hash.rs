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
        let digest = match digest(fd, buffer) {
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

/// SHA-256 of the file's bytes from offset 0 (`pread`, so a second read
/// needs no seek).
fn digest(fd: &OwnedFd, buffer: &mut [u8]) -> Result<[u8; 32], Errno> {
    let mut hasher = Sha256::new();
    let mut offset: u64 = 0;
    loop {
        let n = match rustix::io::pread(fd, &mut *buffer, offset) {
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
