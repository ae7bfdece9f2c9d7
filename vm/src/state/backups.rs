//! `backup = true` (LANGUAGE.md §13, issue 17 item 7): the previous content
//! of a rewritten file is kept in the state directory, never beside the
//! file, where a `name.converge-backup` in `/etc/logrotate.d` or
//! `/etc/sudoers.d` is read as configuration.
//!
//! ```text
//! backups/<escaped path>/000001   oldest kept
//! backups/<escaped path>/000007   newest
//! ```
//!
//! `<escaped path>` is the file's path without its leading `/`, with `%`
//! written `%25` and `/` written `%2F` (`etc%2Flogrotate.d%2Fnginx-blog`);
//! a name that would be over 200 bytes is cut and ends with a digest of the
//! whole path. Backups are numbered upwards; the newest [`KEEP_BACKUPS`]
//! are kept, older ones are removed when a new one is written. A content
//! over [`MAX_BACKUP`] bytes is not backed up: the promise fails and the
//! file is not rewritten (a backup that was asked for is never skipped
//! silently). Each backup is written with the VM's one atomic-write helper
//! (mode 0600: a backup of a key is as secret as the key).

use std::os::fd::OwnedFd;

use rustix::fs::{self as rfs, AtFlags, Mode};
use rustix::io::Errno;
use sha2::{Digest as _, Sha256};

use super::{StateDir, DIR_FLAGS};
use crate::rootfs::write_atomic_at;

/// The directory of the state directory that holds backups.
pub const BACKUPS: &str = "backups";

/// How many backups of one file are kept.
pub const KEEP_BACKUPS: usize = 5;

/// The largest content that is backed up (16 MiB).
pub const MAX_BACKUP: usize = 16 << 20;

/// The directory name of `path`'s backups (see the module comment).
pub fn escaped(path: &str) -> String {
    let plain = path
        .trim_start_matches('/')
        .replace('%', "%25")
        .replace('/', "%2F");
    if plain.len() <= 200 {
        return plain;
    }
    let digest =
        crate::bundle::error::hex(Sha256::digest(path.as_bytes()).get(..8).unwrap_or_default());
    let mut cut = 150;
    while !plain.is_char_boundary(cut) {
        cut = cut.saturating_sub(1);
    }
    format!("{}~{digest}", plain.get(..cut).unwrap_or_default())
}

impl StateDir {
    /// Keeps `content` as the newest backup of the root's file `path`, and
    /// removes the oldest beyond [`KEEP_BACKUPS`]. Returns the backup's
    /// path, for the report.
    pub fn backup(&self, path: &str, content: &[u8]) -> std::io::Result<String> {
        if content.len() > MAX_BACKUP {
            return Err(std::io::Error::other(format!(
                "its current content is {} bytes, over the {} MiB a backup may hold; \
                 not rewritten (remove `backup = true` to replace it without one)",
                content.len(),
                MAX_BACKUP >> 20
            )));
        }
        let backups = subdir(&self.fd, BACKUPS)?;
        let name = escaped(path);
        let dir = subdir(&backups, &name)?;
        let mut numbers = numbered(&dir)?;
        let next = numbers.iter().max().map_or(1, |n| n.saturating_add(1));
        let file = format!("{next:06}");
        let shown = self
            .path(BACKUPS)
            .join(&name)
            .join(&file)
            .display()
            .to_string();
        write_atomic_at(&dir, &file, content, 0o600, None, &shown, |_| Ok(()))
            .map_err(std::io::Error::other)?;
        numbers.push(next);
        numbers.sort_unstable_by(|a, b| b.cmp(a));
        for old in numbers.iter().skip(KEEP_BACKUPS) {
            let _ = rfs::unlinkat(&dir, format!("{old:06}").as_str(), AtFlags::empty());
        }
        Ok(shown)
    }

    /// The backups of `path`, oldest first (tests and operators).
    pub fn backups_of(&self, path: &str) -> std::io::Result<Vec<Vec<u8>>> {
        let dir_name = format!("{BACKUPS}/{}", escaped(path));
        let dir = match rfs::openat(&*self.fd, dir_name.as_str(), DIR_FLAGS, Mode::empty()) {
            Ok(dir) => dir,
            Err(Errno::NOENT) => return Ok(Vec::new()),
            Err(e) => return Err(e.into()),
        };
        let mut numbers = numbered(&dir)?;
        numbers.sort_unstable();
        numbers
            .iter()
            .map(|n| {
                let file = format!("{dir_name}/{n:06}");
                self.read(&file, MAX_BACKUP).map(Option::unwrap_or_default)
            })
            .collect()
    }
}

/// Opens the directory `name` in `dir`, creating it (mode 0700) if missing;
/// never through a link.
fn subdir(dir: &OwnedFd, name: &str) -> std::io::Result<OwnedFd> {
    match rfs::mkdirat(dir, name, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(Errno::EXIST) => {}
        Err(e) => return Err(e.into()),
    }
    rfs::openat(dir, name, DIR_FLAGS, Mode::empty()).map_err(Into::into)
}

/// The numbers of the backups in `dir` (other names are ignored).
fn numbered(dir: &OwnedFd) -> std::io::Result<Vec<u64>> {
    let listing = rfs::openat(dir, ".", DIR_FLAGS, Mode::empty())?;
    let mut entries = rfs::Dir::read_from(&listing)?;
    let mut numbers = Vec::new();
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name = entry.file_name().to_bytes();
        if !name.is_empty() && name.iter().all(u8::is_ascii_digit) {
            if let Some(n) = std::str::from_utf8(name).ok().and_then(|n| n.parse().ok()) {
                numbers.push(n);
            }
        }
    }
    Ok(numbers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backups_are_rotated_and_named_by_escaped_path() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        assert_eq!(escaped("/etc/logrotate.d/a%b"), "etc%2Flogrotate.d%2Fa%25b");
        let long = format!("/{}", "x/".repeat(200));
        assert!(escaped(&long).len() <= 200);
        assert_ne!(escaped(&long), escaped(&format!("{long}y")));
        for i in 0..8 {
            state
                .backup("/etc/logrotate.d/nginx", format!("v{i}").as_bytes())
                .unwrap();
        }
        let kept = state.backups_of("/etc/logrotate.d/nginx").unwrap();
        assert_eq!(kept, [b"v3", b"v4", b"v5", b"v6", b"v7"]);
        let too_big = vec![0u8; MAX_BACKUP + 1];
        let err = state.backup("/big", &too_big).unwrap_err().to_string();
        assert!(err.contains("over the 16 MiB"), "{err}");
    }
}
