//! The one way `policyc` writes a file (bundles, stamps, keys, formatted
//! policy): the workspace's one atomic write, [`converge_format::atomic`],
//! which the VM uses too. A fresh temporary in the target's directory,
//! created exclusively (`O_CREAT|O_EXCL|O_NOFOLLOW`), given its mode,
//! written, synced, then renamed over the target (or renamed only if the
//! name is free, when an existing file must not be replaced) and the
//! directory synced. A reader sees the old file or the new one, never half
//! of one; a link planted at the temporary's name or at the target is never
//! written through. Before, the temporary was `.NAME.tmpPID`, created with
//! `File::create`: a link planted at that name in a shared publish
//! directory made `policyc` overwrite the link's target.

use std::path::Path;

pub use converge_format::atomic::Existing;

/// Writes `bytes` to `path` atomically with permission bits `mode`.
pub fn write_atomically(
    path: &Path,
    bytes: &[u8],
    mode: u32,
    existing: Existing,
) -> std::io::Result<()> {
    converge_format::atomic::write_path(path, bytes, mode, existing)
}
#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

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
