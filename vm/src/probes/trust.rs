//! Whether a probe's program or fact file may be trusted (THREATS.md T32):
//! the VM runs probes as root, so a probe that someone else can replace is
//! a local privilege escalation (CFEngine refuses a modules directory that
//! is not root-owned; Puppet's `facts.d` likewise).
//!
//! The file and every directory above it inside the root must be owned by
//! root or by the user the VM runs as, and writable by neither their group
//! nor others; the file must be a regular file, and no component may be a
//! symbolic link (the check goes through [`RootFs`], which never follows
//! one). The VM's own user is trusted because it adds no privilege: a VM
//! that is not root can only run probes as itself, and that is how tests
//! (and an unprivileged user converging a root of their own) run probes.
//! The root directory itself is not checked: `--root` is chosen by whoever
//! runs the VM. Nothing on the path can change between the check and the
//! use unless one of the trusted owners changes it.

use crate::rootfs::{Kind, Meta, RootFs};

/// Why the program or file at `path` (a policy path inside the root) must
/// not be used, or `None` when it may.
pub fn untrusted(fs: &RootFs, path: &str, euid: u32) -> Option<String> {
    let mut prefix = String::new();
    let components: Vec<&str> = path.split('/').filter(|c| !c.is_empty()).collect();
    let last = components.len().saturating_sub(1);
    for (i, component) in components.iter().enumerate() {
        prefix.push('/');
        prefix.push_str(component);
        let meta = match fs.lstat(&prefix) {
            Ok(Some(meta)) => meta,
            Ok(None) => return Some(format!("`{path}` does not exist")),
            Err(e) => return Some(e.to_string()),
        };
        let want = if i == last { Kind::File } else { Kind::Dir };
        if meta.kind != want {
            return Some(format!(
                "`{prefix}` is {}, not {}",
                describe(meta.kind),
                describe(want)
            ));
        }
        if let Some(why) = owner_problem(&meta, euid) {
            return Some(format!("`{prefix}` {why}"));
        }
    }
    None
}

/// What is wrong with who owns or may write an object, if anything.
fn owner_problem(meta: &Meta, euid: u32) -> Option<String> {
    if meta.uid != 0 && meta.uid != euid {
        return Some(format!(
            "is owned by uid {}, not root (a probe runs as root: only root may own what it runs)",
            meta.uid
        ));
    }
    if meta.mode & 0o022 != 0 {
        return Some(format!(
            "is writable by its group or others (mode {:#o}; remove their write bits: chmod go-w)",
            meta.mode
        ));
    }
    None
}

fn describe(kind: Kind) -> &'static str {
    match kind {
        Kind::File => "a regular file",
        Kind::Dir => "a directory",
        Kind::Symlink => "a symbolic link",
        Kind::Other => "a special file",
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    fn root_with_probe() -> (tempfile::TempDir, RootFs) {
        let dir = tempfile::tempdir().unwrap();
        let probes = dir.path().join("usr/lib/probes");
        std::fs::create_dir_all(&probes).unwrap();
        for d in ["usr", "usr/lib", "usr/lib/probes"] {
            std::fs::set_permissions(dir.path().join(d), std::fs::Permissions::from_mode(0o755))
                .unwrap();
        }
        std::fs::write(probes.join("p"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(probes.join("p"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        (dir, fs)
    }

    #[test]
    fn a_file_and_directories_of_a_trusted_owner_without_group_or_other_write_pass() {
        let (_dir, fs) = root_with_probe();
        assert_eq!(untrusted(&fs, "/usr/lib/probes/p", euid()), None);
    }

    #[test]
    fn group_or_other_writable_files_and_directories_are_refused() {
        let (dir, fs) = root_with_probe();
        let p = dir.path().join("usr/lib/probes/p");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o775)).unwrap();
        let why = untrusted(&fs, "/usr/lib/probes/p", euid()).unwrap();
        assert!(
            why.contains("`/usr/lib/probes/p` is writable by its group or others (mode 0o775"),
            "{why}"
        );
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let d = dir.path().join("usr/lib");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o757)).unwrap();
        let fs = RootFs::open(dir.path()).unwrap();
        let why = untrusted(&fs, "/usr/lib/probes/p", euid()).unwrap();
        assert!(
            why.contains("`/usr/lib` is writable by its group or others"),
            "{why}"
        );
    }

    #[test]
    fn another_owner_is_refused() {
        let (_dir, fs) = root_with_probe();
        // As if the VM ran as another user: the files are then someone
        // else's (unless the test runs as root, who owns them).
        let other = euid().wrapping_add(1);
        match untrusted(&fs, "/usr/lib/probes/p", other) {
            None => assert_eq!(euid(), 0, "only root's files pass for another user"),
            Some(why) => assert!(why.contains("not root"), "{why}"),
        }
    }

    #[test]
    fn links_missing_files_and_directories_are_refused() {
        let (dir, fs) = root_with_probe();
        std::os::unix::fs::symlink("/usr/lib/probes/p", dir.path().join("usr/lib/probes/l"))
            .unwrap();
        let why = untrusted(&fs, "/usr/lib/probes/l", euid()).unwrap();
        assert!(why.contains("symbolic link"), "{why}");
        let why = untrusted(&fs, "/usr/lib/probes/none", euid()).unwrap();
        assert!(
            why.contains("`/usr/lib/probes/none` does not exist"),
            "{why}"
        );
        let why = untrusted(&fs, "/opt/x/y", euid()).unwrap();
        assert!(why.contains("`/opt/x/y` does not exist"), "{why}");
        let why = untrusted(&fs, "/usr/lib/probes", euid()).unwrap();
        assert!(why.contains("is a directory, not a regular file"), "{why}");
    }
}
