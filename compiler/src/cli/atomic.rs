//! The one way `policyc` writes a file (bundles, stamps, keys, formatted
//! policy): a fresh temporary file in the target's directory, created
//! exclusively under a random name (`O_CREAT|O_EXCL`, which never follows a
//! link: the `tempfile` crate), written, given its mode, synced, then
//! renamed over the target (or linked to it, when an existing file must not
//! be replaced) and the directory synced. A reader sees the old file or the
//! new one, never half of one; a link planted at the temporary's name or at
//! the target is never written through (a rename replaces a link, it does
//! not follow it). Before, the temporary was `.NAME.tmpPID`, created with
//! `File::create`: a link planted at that name in a shared publish
//! directory made `policyc` overwrite the link's target.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// Whether an existing file at the target may be replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    Replace,
    /// Fail with `AlreadyExists` (a link at the target counts as a file).
    Keep,
}

/// Writes `bytes` to `path` atomically with permission bits `mode`.
pub fn write_atomically(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    existing: Existing,
) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if path.file_name().is_none() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the path names no file",
        ));
    }
    // A short fixed prefix, not the target's name: a 250-byte target name
    // must not make the temporary's name too long.
    let mut tmp = tempfile::Builder::new()
        .prefix(".policyc-")
        .suffix(".tmp")
        .tempfile_in(&dir)?;
    tmp.as_file()
        .set_permissions(std::fs::Permissions::from_mode(mode))?;
    tmp.write_all(bytes)?;
    tmp.as_file().sync_all()?;
    match existing {
        Existing::Replace => tmp.persist(path).map(drop).map_err(|e| e.error)?,
        Existing::Keep => tmp.persist_noclobber(path).map(drop).map_err(|e| e.error)?,
    }
    std::fs::File::open(&dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_a_link_instead_of_following_it() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious").unwrap();
        let target = dir.path().join("out");
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        write_atomically(&target, b"new", 0o640, Existing::Replace).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        let meta = std::fs::symlink_metadata(&target).unwrap();
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
        assert_eq!(std::fs::read(&target).unwrap(), b"new");
        // Nothing else is left in the directory.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn keep_refuses_an_existing_file_or_link() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("key");
        std::os::unix::fs::symlink(dir.path().join("nowhere"), &target).unwrap();
        let err = write_atomically(&target, b"k", 0o600, Existing::Keep).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert!(!dir.path().join("nowhere").exists());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
