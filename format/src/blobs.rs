//! Content-addressed files (format 2.6, issue 22 item 5): the directory
//! `blobs/` beside a bundle, on the hub beside `NAME.bundle`, and in a
//! host's state directory, holding each file a bundle names by a
//! [`BlobRef`] as `blobs/<64 hex digits of its SHA-256>`.
//!
//! A blob is written once: streamed to an exclusive temporary in the
//! directory while its SHA-256 is computed, synced, and renamed to its name
//! only if the name is free (a blob is never rewritten: same name, same
//! bytes). Whoever writes one from untrusted bytes (the agent, from a hub)
//! passes the [`BlobRef`] the signed bundle gives: the copy stops at one
//! byte past its size and is refused unless its digest matches, so no file
//! with a blob's name ever holds other bytes than the bundle signed. The
//! compiler (`policyc build`, `policyc publish`) and the VM (the agent's
//! cache, `policyvm run` beside a local bundle) share this module.

use std::io::{Read, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags, RenameFlags};
use rustix::io::Errno;
use sha2::{Digest, Sha256};

use crate::bundle::format::BlobRef;

/// The directory of blobs, beside the bundle (and on the hub, and in the
/// host's state directory).
pub const DIR: &str = "blobs";

/// The prefix of a temporary being written in a blob directory.
pub const TEMP_PREFIX: &str = ".blob-";

/// Bytes copied per read: enough to keep a disk busy, small enough that a
/// 1 GB blob costs the VM nothing it would notice (issue 22, target 3).
const CHUNK: usize = 64 << 10;

/// The blob directory beside a bundle file (`site.bundle` -> `blobs/`).
pub fn dir_beside(bundle: &Path) -> PathBuf {
    match bundle.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.join(DIR),
        _ => PathBuf::from(DIR),
    }
}

/// Why a blob could not be stored.
#[derive(Debug)]
pub enum StoreError {
    /// Reading the source failed (the network, the build machine's file).
    Read(std::io::Error),
    /// The blob directory could not be written.
    Write { step: &'static str, errno: Errno },
    /// More bytes than the bundle's size: stopped at one byte past it.
    TooLong { limit: u64 },
    /// The bytes are not the blob the bundle names.
    Mismatch {
        expected: BlobRef,
        size: u64,
        sha256: [u8; 32],
    },
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Read(e) => write!(f, "cannot read it: {e}"),
            StoreError::Write { step, errno } => write!(f, "cannot {step} it: {errno}"),
            StoreError::TooLong { limit } => write!(
                f,
                "more than the {limit} bytes the bundle names; stopped reading there"
            ),
            StoreError::Mismatch {
                expected,
                size,
                sha256,
            } => write!(
                f,
                "the bytes received ({size} bytes, sha256:{}) are not the blob the bundle names ({} bytes, sha256:{})",
                crate::bundle::error::hex(sha256),
                expected.size,
                expected.name()
            ),
        }
    }
}

impl std::error::Error for StoreError {}

/// Streams `source` into the blob directory `dir` (created with `mode`
/// if missing), at most `limit` bytes. With `expected`, the bytes must be
/// that blob (size and digest) or nothing is kept. Returns the blob and
/// whether it was new (`false`: a file of that name was there already and
/// was left as it is).
pub fn store(
    dir: &Path,
    mut source: impl Read,
    limit: u64,
    expected: Option<&BlobRef>,
) -> Result<(BlobRef, bool), StoreError> {
    let write = |step| move |errno| StoreError::Write { step, errno };
    create_dir(dir).map_err(write("create the blob directory for"))?;
    let dir_fd = rfs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(write("open the blob directory for"))?;
    let (temp, fd) = create_temp(&dir_fd).map_err(write("create a temporary for"))?;
    let removed = |e: StoreError| {
        let _ = rfs::unlinkat(&dir_fd, temp.as_str(), AtFlags::empty());
        e
    };
    let mut file = std::fs::File::from(fd);
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(removed(StoreError::Read(e))),
        };
        size = size.saturating_add(n as u64);
        if size > limit {
            return Err(removed(StoreError::TooLong { limit }));
        }
        let chunk = buf.get(..n).unwrap_or_default();
        hasher.update(chunk);
        if let Err(e) = file.write_all(chunk) {
            let errno = Errno::from_io_error(&e).unwrap_or(Errno::IO);
            return Err(removed(write("write")(errno)));
        }
    }
    let blob = BlobRef {
        sha256: hasher.finalize().into(),
        size,
    };
    if let Some(expected) = expected {
        if *expected != blob {
            return Err(removed(StoreError::Mismatch {
                expected: *expected,
                size,
                sha256: blob.sha256,
            }));
        }
    }
    if let Err(errno) = rfs::fsync(&file) {
        return Err(removed(write("sync")(errno)));
    }
    drop(file);
    let name = blob.name();
    match rfs::renameat_with(
        &dir_fd,
        temp.as_str(),
        &dir_fd,
        name.as_str(),
        RenameFlags::NOREPLACE,
    ) {
        Ok(()) => {}
        // Same name, same bytes: the blob is there already.
        Err(Errno::EXIST) => {
            let _ = rfs::unlinkat(&dir_fd, temp.as_str(), AtFlags::empty());
            return Ok((blob, false));
        }
        Err(errno) => return Err(removed(write("rename into place")(errno))),
    }
    crate::atomic::sync_dir(&dir_fd).map_err(write("sync the directory of"))?;
    Ok((blob, true))
}

/// Creates `dir` (and its parents) if missing; mode 0755, the directory a
/// web server serves on a hub (a host's is inside its 0700 state
/// directory).
fn create_dir(dir: &Path) -> Result<(), Errno> {
    std::fs::create_dir_all(dir).map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO))
}

/// An exclusive temporary in `dir`: a name nobody can guess in advance,
/// created with `O_EXCL|O_NOFOLLOW`, mode 0644.
fn create_temp(dir: &impl AsFd) -> Result<(String, OwnedFd), Errno> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut last = Errno::EXIST;
    for _ in 0..16 {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = format!("{TEMP_PREFIX}{}-{nanos}-{n}", std::process::id());
        match rfs::openat(
            dir,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => return Ok((temp, fd)),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Why a stored blob cannot be read.
#[derive(Debug, PartialEq, Eq)]
pub enum OpenError {
    /// No file of that name in any blob directory.
    Missing,
    /// A file of that name that is not the blob: another size, or not a
    /// regular file.
    Corrupt(String),
    Io(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::Missing => f.write_str("it is missing"),
            OpenError::Corrupt(why) | OpenError::Io(why) => f.write_str(why),
        }
    }
}

/// Opens blob `blob` in `dir` for reading: a regular file (no link
/// followed) of exactly its size. Its digest is checked by whoever reads
/// it, while reading ([`Verifier`]): a blob is read whole only to be
/// copied, so checking costs no second pass.
pub fn open(dir: &Path, blob: &BlobRef) -> Result<std::fs::File, OpenError> {
    let path = dir.join(blob.name());
    let fd = match rfs::open(
        &path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(OpenError::Missing),
        Err(Errno::LOOP) => {
            return Err(OpenError::Corrupt(format!(
                "{} is a symbolic link",
                path.display()
            )))
        }
        Err(e) => {
            return Err(OpenError::Io(format!(
                "cannot open {}: {e}",
                path.display()
            )))
        }
    };
    let file = std::fs::File::from(fd);
    let meta = file
        .metadata()
        .map_err(|e| OpenError::Io(format!("cannot read {}: {e}", path.display())))?;
    if !meta.is_file() {
        return Err(OpenError::Corrupt(format!(
            "{} is not a regular file",
            path.display()
        )));
    }
    if meta.len() != blob.size {
        return Err(OpenError::Corrupt(format!(
            "{} holds {} bytes, the bundle names {} (a damaged copy: remove it and pull again)",
            path.display(),
            meta.len(),
            blob.size
        )));
    }
    Ok(file)
}

/// A reader over a blob's bytes that hashes what passes through it and
/// refuses more bytes than its size: [`Verifier::finish`] says whether
/// they were the blob.
#[derive(Debug)]
pub struct Verifier<R> {
    inner: R,
    blob: BlobRef,
    hasher: Sha256,
    seen: u64,
}

impl<R: Read> Verifier<R> {
    pub fn new(inner: R, blob: BlobRef) -> Verifier<R> {
        Verifier {
            inner,
            blob,
            hasher: Sha256::new(),
            seen: 0,
        }
    }

    /// `Ok` if exactly the blob's bytes were read.
    pub fn finish(self) -> Result<(), String> {
        let digest: [u8; 32] = self.hasher.finalize().into();
        if self.seen != self.blob.size || digest != self.blob.sha256 {
            return Err(format!(
                "blob sha256:{} is damaged: its bytes ({} bytes, sha256:{}) are not the ones the bundle names; remove it and pull again",
                self.blob.name(),
                self.seen,
                crate::bundle::error::hex(&digest)
            ));
        }
        Ok(())
    }
}

impl<R: Read> Read for Verifier<R> {
    /// At the end of the bytes, an error unless they were the blob: a
    /// copy made with `std::io::copy` fails before its file takes a name.
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n == 0 && !buf.is_empty() {
            let digest: [u8; 32] = self.hasher.clone().finalize().into();
            if self.seen != self.blob.size || digest != self.blob.sha256 {
                return Err(std::io::Error::other(format!(
                    "blob sha256:{} is damaged",
                    self.blob.name()
                )));
            }
        }
        self.seen = self.seen.saturating_add(n as u64);
        if self.seen > self.blob.size {
            return Err(std::io::Error::other(format!(
                "blob sha256:{} holds more than its {} bytes",
                self.blob.name(),
                self.blob.size
            )));
        }
        self.hasher.update(buf.get(..n).unwrap_or_default());
        Ok(n)
    }
}

/// The SHA-256 and size of what `source` yields, streamed.
pub fn digest_of(mut source: impl Read) -> std::io::Result<BlobRef> {
    let mut hasher = Sha256::new();
    let mut size: u64 = 0;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = match source.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        size = size.saturating_add(n as u64);
        hasher.update(buf.get(..n).unwrap_or_default());
    }
    Ok(BlobRef {
        sha256: hasher.finalize().into(),
        size,
    })
}

/// Removes from `dir` every blob not in `keep`, and temporaries older
/// than an hour (a writer killed half-way; a live one is younger).
/// Returns the names removed. A missing directory has nothing to remove.
pub fn collect_garbage(
    dir: &Path,
    keep: &std::collections::HashSet<[u8; 32]>,
) -> std::io::Result<Vec<String>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let mut removed = Vec::new();
    for entry in entries {
        let entry = entry?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let stale = match BlobRef::digest_of_name(name) {
            Some(digest) => !keep.contains(&digest),
            None if name.starts_with(TEMP_PREFIX) => entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age.as_secs() > 3600),
            None => false,
        };
        if stale {
            std::fs::remove_file(entry.path())?;
            removed.push(name.to_owned());
        }
    }
    removed.sort();
    Ok(removed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn blob_of(bytes: &[u8]) -> BlobRef {
        digest_of(bytes).unwrap()
    }

    #[test]
    fn a_blob_is_stored_under_its_digest_once() {
        let dir = tempfile::tempdir().unwrap();
        let blobs = dir.path().join("blobs");
        let (blob, new) = store(&blobs, &b"hello"[..], 10, None).unwrap();
        assert!(new);
        assert_eq!(blob, blob_of(b"hello"));
        assert_eq!(std::fs::read(blobs.join(blob.name())).unwrap(), b"hello");
        let (again, new) = store(&blobs, &b"hello"[..], 10, Some(&blob)).unwrap();
        assert_eq!((again, new), (blob, false));
        let names: Vec<_> = std::fs::read_dir(&blobs).unwrap().collect();
        assert_eq!(names.len(), 1, "no temporary left behind");
    }

    #[test]
    fn wrong_or_too_many_bytes_leave_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let want = blob_of(b"right");
        let err = store(dir.path(), &b"wrong"[..], 5, Some(&want)).unwrap_err();
        assert!(matches!(err, StoreError::Mismatch { .. }), "{err}");
        let err = store(dir.path(), &b"right and more"[..], 5, Some(&want)).unwrap_err();
        assert!(matches!(err, StoreError::TooLong { limit: 5 }), "{err}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn open_checks_the_size_and_the_verifier_the_digest() {
        let dir = tempfile::tempdir().unwrap();
        let blob = blob_of(b"content");
        assert_eq!(open(dir.path(), &blob).unwrap_err(), OpenError::Missing);
        std::fs::write(dir.path().join(blob.name()), b"CONTENT").unwrap();
        let mut v = Verifier::new(open(dir.path(), &blob).unwrap(), blob);
        let copied = std::io::copy(&mut v, &mut std::io::sink());
        assert!(copied.unwrap_err().to_string().contains("damaged"));
        assert!(v.finish().unwrap_err().contains("damaged"));
        let mut right = Verifier::new(&b"content"[..], blob);
        std::io::copy(&mut right, &mut std::io::sink()).unwrap();
        right.finish().unwrap();
        std::fs::write(dir.path().join(blob.name()), b"longer content").unwrap();
        assert!(matches!(
            open(dir.path(), &blob),
            Err(OpenError::Corrupt(_))
        ));
    }

    #[test]
    fn garbage_is_every_blob_not_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = store(dir.path(), &b"a"[..], 1, None).unwrap();
        let (b, _) = store(dir.path(), &b"b"[..], 1, None).unwrap();
        std::fs::write(dir.path().join("README"), "not a blob").unwrap();
        let keep = [a.sha256].into_iter().collect();
        assert_eq!(collect_garbage(dir.path(), &keep).unwrap(), [b.name()]);
        assert!(dir.path().join(a.name()).exists());
        assert!(dir.path().join("README").exists());
    }

    #[test]
    fn names_round_trip_and_strangers_are_not_blobs() {
        let blob = blob_of(b"x");
        assert_eq!(BlobRef::digest_of_name(&blob.name()), Some(blob.sha256));
        assert_eq!(BlobRef::digest_of_name("README"), None);
        assert_eq!(BlobRef::digest_of_name(&blob.name().to_uppercase()), None);
    }
}
