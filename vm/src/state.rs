//! The state directory of a host (`--state DIR`, default
//! `/var/lib/converge`):
//!
//! ```text
//! current.bundle     the bundle in force
//! last-good.bundle   the one before it
//! stamp              the stamp `current.bundle` was accepted with
//! serial             the highest serial ever accepted (the rollback mark)
//! lock               flock'ed by `policyvm run`, `agent` and `pull`
//! reports/last.json  the last agent run (older ones beside it)
//! metrics.prom       Prometheus textfile metrics of the last agent run
//! owed.json          notifications owed until delivered ([`owed`])
//! backups/           `backup = true` copies, rotated ([`backups`])
//! sequence           the number of the last uploaded run report
//! identity/          the host's keys (`policyvm enroll`, [`crate::identity`])
//! spool/             signed reports no collector has taken yet
//!                    ([`crate::upload::spool`])
//! metrics/           default place of the Prometheus textfile (0755,
//!                    for node_exporter: [`crate::agent::metrics`])
//! ```
//!
//! The directory must belong to the user the VM runs as and not be
//! writable by group or others; every file is opened relative to a handle
//! on it, never through a link, never blocking on a FIFO, and read with a
//! bound. Every file is replaced atomically with the VM's one helper
//! ([`crate::rootfs::write_atomic_at`]: temporary file, fsync, rename, fsync
//! of the directory), so a crash leaves each one old or new. The install
//! order makes every crash point safe: `stamp`, then `serial`, then the
//! bundle. The rollback mark is durable before the bundle that raises it
//! can run (THREATS.md T3: high-water marks persisted before acting), and
//! a crash before the bundle is in place leaves the new stamp recorded, so
//! the next pull fetches that very bundle again as a repair. The mark is
//! the larger of `serial` and the serial of a verified `current.bundle`.

mod backups;
mod owed;
mod subdir;

pub use backups::{BACKUPS, KEEP_BACKUPS, MAX_BACKUP};
pub use owed::{Debt, OWED};
pub use subdir::{FileInfo, SubDir};

use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{self as rfs, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::bundle::envelope::MAX_BUNDLE_LEN;
use crate::bundle::keys::PublicKey;
use crate::bundle::{open, Verified};
use crate::rootfs::{is_live_temp, is_temp_name, read_at, write_atomic_at};
use crate::run::lock::{LockError, RunLock};
use crate::stamp::MAX_STAMP_LEN;

pub const CURRENT: &str = "current.bundle";
pub const LAST_GOOD: &str = "last-good.bundle";
pub const STAMP: &str = "stamp";
pub const SERIAL: &str = "serial";
pub const LOCK: &str = "lock";
pub const REPORTS: &str = "reports";
pub const METRICS: &str = "metrics.prom";

/// Where `policyvm run` and `policyvm agent` keep their state when no
/// `--state` is given: `ROOT/var/lib/converge` (`/var/lib/converge` on the
/// real system), so a sandbox root is self-contained (LANGUAGE.md §18).
pub fn default_dir(root: &Path) -> PathBuf {
    root.join("var/lib/converge")
}

/// A host's state directory, created (mode 0700) when missing, and held
/// open: every file in it is opened relative to this handle, without
/// following links.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
    fd: Arc<OwnedFd>,
}

/// Held while an agent, a pull or a run works on the state directory (the
/// run lock: [`crate::run::lock`]).
pub type StateLock = RunLock;

/// A bundle of the state directory, verified now (never trusted from an
/// earlier check: THREATS.md T23).
#[derive(Debug)]
pub struct Local {
    pub file: &'static str,
    pub bundle: Verified,
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

impl StateDir {
    /// Opens `dir`, creating it and `reports/` with mode 0700 (missing
    /// parents with 0755). The directory itself must not be a link, must be
    /// owned by the user the VM runs as, and must not be writable by group
    /// or others: whoever can write it can replace the bundle in force, the
    /// rollback mark, or hold the run lock (like the trust directory's
    /// `StrictModes` check).
    pub fn open(dir: &Path) -> std::io::Result<StateDir> {
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(parent)?;
        }
        match rfs::mkdir(dir, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        let fd = match rfs::open(dir, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::LOOP | Errno::NOTDIR) => {
                return Err(std::io::Error::other(format!(
                    "`{}` is not a directory (a symbolic link is not followed)",
                    dir.display()
                )))
            }
            Err(e) => return Err(e.into()),
        };
        StateDir::from_fd(dir, fd)
    }

    /// Opens the state directory `dir` of a run on `root`. When `dir` lies
    /// inside a sandbox root (the default, `ROOT/var/lib/converge`), every
    /// component below the root is created and opened without following a
    /// link: a planted `ROOT/var/lib -> /elsewhere` would otherwise make
    /// the VM create and write its state outside the root. The root itself,
    /// and a `--state` outside it, are the operator's own paths
    /// ([`StateDir::open`]).
    pub fn open_under(root: &Path, dir: &Path) -> std::io::Result<StateDir> {
        let rel = match dir.strip_prefix(root) {
            Ok(rel) if root != Path::new("/") && !rel.as_os_str().is_empty() => rel,
            _ => return StateDir::open(dir),
        };
        let mut fd = rfs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let parts: Vec<Component<'_>> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            let Component::Normal(name) = part else {
                return Err(std::io::Error::other(format!(
                    "`{}`: a state directory inside the root is a plain path below it",
                    dir.display()
                )));
            };
            let depth = i.saturating_add(1);
            let mode = if depth == parts.len() { 0o700 } else { 0o755 };
            match rfs::mkdirat(&fd, *name, Mode::from_bits_truncate(mode)) {
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
            fd = match rfs::openat(&fd, *name, DIR_FLAGS, Mode::empty()) {
                Ok(next) => next,
                Err(Errno::LOOP | Errno::NOTDIR) => {
                    return Err(std::io::Error::other(format!(
                        "`{}` is not a directory inside the root (a symbolic link is not followed)",
                        root.join(parts.iter().take(depth).collect::<PathBuf>())
                            .display()
                    )))
                }
                Err(e) => return Err(e.into()),
            };
        }
        StateDir::from_fd(dir, fd)
    }

    /// The checks and the `reports/` directory of a state directory opened
    /// as `fd`.
    fn from_fd(dir: &Path, fd: OwnedFd) -> std::io::Result<StateDir> {
        guarded(&fd, dir)?;
        match rfs::mkdirat(&fd, REPORTS, Mode::from_bits_truncate(0o700)) {
            Ok(()) | Err(Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
        rfs::openat(&fd, REPORTS, DIR_FLAGS, Mode::empty()).map_err(|e| {
            std::io::Error::other(format!(
                "`{}` is not a directory: {e}",
                dir.join(REPORTS).display()
            ))
        })?;
        Ok(StateDir {
            dir: dir.to_path_buf(),
            fd: Arc::new(fd),
        })
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Takes the state directory's lock (`lock` in it) without waiting.
    /// With the lock held, temporaries a killed writer left behind are
    /// removed.
    pub fn lock(&self) -> Result<StateLock, LockError> {
        let lock = RunLock::acquire_in(&self.fd)?;
        self.clean_stale_temporaries();
        Ok(lock)
    }

    fn clean_stale_temporaries(&self) {
        let Ok(listing) = rfs::openat(&*self.fd, ".", DIR_FLAGS, Mode::empty()) else {
            return;
        };
        let Ok(mut dir) = rfs::Dir::read_from(&listing) else {
            return;
        };
        let mut stale = Vec::new();
        while let Some(Ok(entry)) = dir.read() {
            let name = entry.file_name().to_bytes();
            let legacy = name.starts_with(b".") && name.windows(4).any(|w| w == b".tmp");
            if (is_temp_name(name) || legacy) && !is_live_temp(name) {
                stale.push(name.to_vec());
            }
        }
        for name in stale {
            let _ = rfs::unlinkat(&*self.fd, name.as_slice(), AtFlags::empty());
        }
    }

    /// The bytes of a small state file, `None` when it does not exist. A
    /// link, a FIFO or anything but a regular file is refused (without
    /// blocking), and so is a file over `limit` bytes.
    pub fn read(&self, file: &str, limit: usize) -> std::io::Result<Option<Vec<u8>>> {
        read_at(
            &self.fd,
            file,
            limit as u64,
            &self.path(file).display().to_string(),
        )
        .map_err(std::io::Error::other)
    }

    /// The stamp `current.bundle` was accepted with.
    pub fn stamp(&self) -> Option<Vec<u8>> {
        self.read(STAMP, MAX_STAMP_LEN).ok().flatten()
    }

    /// The `serial` file; `None` when missing or unreadable (the bundle's
    /// own serial still bounds the mark, see [`StateDir::high_water`]).
    pub fn serial(&self) -> Option<u64> {
        let bytes = self.read(SERIAL, 32).ok().flatten()?;
        std::str::from_utf8(&bytes).ok()?.trim().parse().ok()
    }

    /// The highest serial this host has accepted.
    pub fn high_water(&self, current: Option<&Verified>) -> u64 {
        let own = current.map_or(0, |v| v.body.header.serial);
        self.serial().unwrap_or(0).max(own)
    }

    /// `file` (`current.bundle` or `last-good.bundle`), verified against
    /// the trusted keys: `Ok(None)` when it does not exist, `Err` with the
    /// reason when it is refused.
    pub fn load(&self, file: &'static str, trusted: &[PublicKey]) -> Result<Option<Local>, String> {
        let bytes = match self.read(file, MAX_BUNDLE_LEN) {
            Ok(Some(b)) => b,
            Ok(None) => return Ok(None),
            Err(e) => return Err(format!("cannot read `{}`: {e}", self.path(file).display())),
        };
        match open(&bytes, trusted) {
            Ok(bundle) => Ok(Some(Local { file, bundle })),
            Err(e) => Err(format!("`{}` is refused: {e}", self.path(file).display())),
        }
    }

    /// Installs a verified bundle: the current one becomes `last-good`,
    /// then its stamp, its serial and the new bytes are written, each
    /// atomically, in that order (see the module comment).
    pub fn install(&self, bundle: &[u8], serial: u64, stamp: &[u8]) -> std::io::Result<()> {
        let fd = &*self.fd;
        if rfs::statat(fd, CURRENT, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
            // A hard link keeps the old file whole under its new name while
            // `current.bundle` is replaced; a crash leaves both names valid.
            let tmp = format!(".{LAST_GOOD}.tmp{}", std::process::id());
            let _ = rfs::unlinkat(fd, tmp.as_str(), AtFlags::empty());
            rfs::linkat(fd, CURRENT, fd, tmp.as_str(), AtFlags::empty())?;
            if let Err(e) = rfs::renameat(fd, tmp.as_str(), fd, LAST_GOOD) {
                let _ = rfs::unlinkat(fd, tmp.as_str(), AtFlags::empty());
                return Err(e.into());
            }
        }
        self.write(STAMP, stamp)?;
        if self.serial() < Some(serial) {
            self.write(SERIAL, format!("{serial}\n").as_bytes())?;
        }
        self.write(CURRENT, bundle)
    }

    /// Records the stamp of the bundle already in force (a stamp republished
    /// for it, or the state of a host that pulled before this order was
    /// kept), raising the mark if it is behind. A stamp older than the mark
    /// is not recorded: the stamp on file may be one whose bundle a crash
    /// kept from being installed, and the next pull repairs from it.
    pub fn record(&self, serial: u64, stamp: &[u8]) -> std::io::Result<()> {
        let mark = self.serial();
        if mark > Some(serial) {
            return Ok(());
        }
        if mark < Some(serial) {
            self.write(SERIAL, format!("{serial}\n").as_bytes())?;
        }
        self.write(STAMP, stamp)
    }

    /// Whether `name` exists in the state directory (a link counts, and
    /// is not followed).
    pub fn has(&self, name: &str) -> bool {
        rfs::statat(&*self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// The directory `name` of the state directory, created with `mode`
    /// when missing ([`SubDir`]).
    pub fn subdir(&self, name: &str, mode: u32) -> std::io::Result<SubDir> {
        SubDir::open(&self.fd, &self.dir, name, mode)
    }

    /// Replaces `file` atomically and durably (mode 0600).
    pub fn write(&self, file: &str, bytes: &[u8]) -> std::io::Result<()> {
        let shown = self.path(file).display().to_string();
        write_atomic_at(&self.fd, file, bytes, 0o600, None, &shown, |_| Ok(()))
            .map_err(std::io::Error::other)
    }
}

/// The state directory's owner and mode (see [`StateDir::open`]).
fn guarded(fd: &OwnedFd, dir: &Path) -> std::io::Result<()> {
    let st = rfs::fstat(fd)?;
    let euid = rustix::process::geteuid().as_raw();
    if st.st_uid != euid {
        return Err(std::io::Error::other(format!(
            "the state directory `{}` is owned by uid {}, not by uid {euid} that runs \
             policyvm: that user could replace the bundle in force or hold the run lock; \
             `chown` it",
            dir.display(),
            st.st_uid
        )));
    }
    if st.st_mode & 0o022 != 0 {
        return Err(std::io::Error::other(format!(
            "the state directory `{}` is writable by group or others (mode {:o}): anyone \
             who can write it can replace the bundle in force or hold the run lock; \
             `chmod 0700` it",
            dir.display(),
            st.st_mode & 0o7777
        )));
    }
    Ok(())
}

/// Replaces `file` in the directory `dir` (a directory of the state, such
/// as `reports/`) atomically and durably, with the VM's one atomic-write
/// helper ([`crate::rootfs::write_atomic_at`]).
pub fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> std::io::Result<()> {
    write_atomically_with_mode(dir, file, bytes, 0o600)
}

/// [`write_atomically`] with another mode (the metrics textfile is 0644,
/// for node_exporter).
pub fn write_atomically_with_mode(
    dir: &Path,
    file: &str,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let fd = rfs::open(dir, DIR_FLAGS, Mode::empty())?;
    let shown = dir.join(file).display().to_string();
    write_atomic_at(&fd, file, bytes, mode, None, &shown, |_| Ok(())).map_err(std::io::Error::other)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_is_busy_and_files_are_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        let held = state.lock().unwrap();
        assert!(matches!(state.lock(), Err(LockError::Busy)));
        drop(held);
        state.lock().unwrap();

        assert_eq!(state.serial(), None);
        state.write(SERIAL, b"41\n").unwrap();
        assert_eq!(state.serial(), Some(41));
        state.record(40, b"old stamp").unwrap();
        assert_eq!(state.serial(), Some(41), "the mark never goes down");
        assert_eq!(state.stamp(), None, "an older stamp is not recorded");
        state.record(42, b"stamp").unwrap();
        assert_eq!(state.serial(), Some(42));
        assert_eq!(state.stamp().unwrap(), b"stamp");
        let leftovers: Vec<_> = std::fs::read_dir(state.path(""))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().contains(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }

    #[test]
    fn a_state_file_over_its_limit_is_an_error_not_a_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        state.write(SERIAL, &[b'9'; 40]).unwrap();
        assert!(state.read(SERIAL, 32).is_err());
        assert_eq!(state.serial(), None);
    }

    /// A review of issue 14: the default state directory of a sandbox run,
    /// `ROOT/var/lib/converge`, was created through `std::fs` following
    /// links, so a planted `ROOT/var/lib -> /elsewhere` put the VM's state
    /// (lock, owed notifications, backups) outside the root.
    #[test]
    fn a_link_planted_on_the_way_to_the_state_directory_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(root.join("var")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("var/lib")).unwrap();
        let err = StateDir::open_under(&root, &default_dir(&root))
            .unwrap_err()
            .to_string();
        assert!(err.contains("symbolic link is not followed"), "{err}");
        assert!(
            !outside.join("converge").exists(),
            "state created outside the root"
        );

        // Without the link, every missing component is created, the last 0700.
        std::fs::remove_file(root.join("var/lib")).unwrap();
        let state = StateDir::open_under(&root, &default_dir(&root)).unwrap();
        state.write(SERIAL, b"1\n").unwrap();
        assert!(root.join("var/lib/converge/serial").is_file());
        // A `--state` outside the root is the operator's own path.
        StateDir::open_under(&root, &dir.path().join("elsewhere")).unwrap();
    }

    /// Issue 14 item 19: the state directory's mode and owner were never
    /// checked, and its files were opened following links and blocking on
    /// FIFOs.
    #[test]
    fn links_fifos_and_unsafe_modes_are_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let state_dir = dir.path().join("state");
        let state = StateDir::open(&state_dir).unwrap();
        let mode = std::fs::metadata(&state_dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);

        // A link in place of a state file is not followed.
        let secret = dir.path().join("secret");
        std::fs::write(&secret, "41\n").unwrap();
        std::os::unix::fs::symlink(&secret, state.path(SERIAL)).unwrap();
        assert!(state.read(SERIAL, 32).is_err());
        assert_eq!(state.serial(), None);
        std::fs::remove_file(state.path(SERIAL)).unwrap();

        // A FIFO is refused at once (the test would hang otherwise).
        rustix::fs::mknodat(
            rustix::fs::CWD,
            state.path(STAMP),
            rustix::fs::FileType::Fifo,
            Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
        assert!(state.read(STAMP, 1024).is_err());
        assert_eq!(state.stamp(), None);

        // Writable by group or others: refused; a link as the directory too.
        std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o770)).unwrap();
        let err = StateDir::open(&state_dir).unwrap_err().to_string();
        assert!(err.contains("writable by group or others"), "{err}");
        std::fs::set_permissions(&state_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&state_dir, &link).unwrap();
        let err = StateDir::open(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
    }
}
