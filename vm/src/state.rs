//! The state directory of a host (`--state DIR`, default
//! `/var/lib/converge`):
//!
//! ```text
//! current.bundle     the bundle in force
//! last-good.bundle   the one before it
//! stamp              the stamp `current.bundle` was accepted with
//! serial             the highest serial ever accepted (the rollback mark)
//! lock               flock'ed by `policyvm agent` and `policyvm pull`
//! reports/last.json  the last agent run (older ones beside it)
//! metrics.prom       Prometheus textfile metrics of the last agent run
//! ```
//!
//! Every file is replaced atomically (temporary file, fsync, rename, fsync
//! of the directory), so a crash leaves each one old or new. The install
//! order makes every crash point safe: `stamp`, then `serial`, then the
//! bundle. The rollback mark is durable before the bundle that raises it
//! can run (THREATS.md T3: high-water marks persisted before acting), and
//! a crash before the bundle is in place leaves the new stamp recorded, so
//! the next pull fetches that very bundle again as a repair. The mark is
//! the larger of `serial` and the serial of a verified `current.bundle`.

use std::io::Write as _;
use std::os::fd::OwnedFd;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use rustix::fs::{flock, FlockOperation};
use rustix::io::Errno;

use crate::bundle::envelope::MAX_BUNDLE_LEN;
use crate::bundle::keys::PublicKey;
use crate::bundle::{open, Verified};
use crate::run::lock::LockError;
use crate::stamp::MAX_STAMP_LEN;

pub const CURRENT: &str = "current.bundle";
pub const LAST_GOOD: &str = "last-good.bundle";
pub const STAMP: &str = "stamp";
pub const SERIAL: &str = "serial";
pub const LOCK: &str = "lock";
pub const REPORTS: &str = "reports";
pub const METRICS: &str = "metrics.prom";

/// A host's state directory, created (mode 0700) when missing.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

/// Held while an agent or a pull works on the state directory.
#[derive(Debug)]
pub struct StateLock {
    _fd: OwnedFd,
}

/// A bundle of the state directory, verified now (never trusted from an
/// earlier check: THREATS.md T23).
#[derive(Debug)]
pub struct Local {
    pub file: &'static str,
    pub bundle: Verified,
}

impl StateDir {
    /// Opens `dir`, creating it and `reports/` with mode 0700.
    pub fn open(dir: &Path) -> std::io::Result<StateDir> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join(REPORTS))?;
        Ok(StateDir {
            dir: dir.to_path_buf(),
        })
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    /// Takes the state directory's lock without waiting.
    pub fn lock(&self) -> Result<StateLock, LockError> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(self.path(LOCK))
            .map_err(LockError::Io)?;
        let fd = OwnedFd::from(file);
        match flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(StateLock { _fd: fd }),
            Err(Errno::WOULDBLOCK) => Err(LockError::Busy),
            Err(e) => Err(LockError::Io(e.into())),
        }
    }

    /// The bytes of a small state file, `None` when it does not exist.
    pub fn read(&self, file: &str, limit: usize) -> std::io::Result<Option<Vec<u8>>> {
        use std::io::Read as _;
        let f = match std::fs::File::open(self.path(file)) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut bytes = Vec::new();
        f.take((limit as u64).saturating_add(1))
            .read_to_end(&mut bytes)?;
        if bytes.len() > limit {
            return Err(std::io::Error::other(format!(
                "`{}` is larger than {limit} bytes",
                self.path(file).display()
            )));
        }
        Ok(Some(bytes))
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
        let current = self.path(CURRENT);
        if current.exists() {
            // A hard link keeps the old file whole under its new name while
            // `current.bundle` is replaced; a crash leaves both names valid.
            let tmp = self.path(&format!(".{LAST_GOOD}.tmp{}", std::process::id()));
            let _ = std::fs::remove_file(&tmp);
            std::fs::hard_link(&current, &tmp)?;
            if let Err(e) = std::fs::rename(&tmp, self.path(LAST_GOOD)) {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
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

    /// Replaces `file` atomically and durably.
    pub fn write(&self, file: &str, bytes: &[u8]) -> std::io::Result<()> {
        write_atomically(&self.dir, file, bytes)
    }
}

/// Temporary file (never an existing name: `create_new`, no links
/// followed), fsync, rename over `file`, fsync of the directory.
pub fn write_atomically(dir: &Path, file: &str, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{file}.tmp{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, dir.join(file))?;
        std::fs::File::open(dir)?.sync_all()
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
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
}
