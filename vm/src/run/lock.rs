//! One run at a time per root (THREATS.md T20): cron, a timer and an
//! operator may all start `policyvm run` at once, and two VMs converging one
//! tree would race each other's writes.
//!
//! The lock is an exclusive `flock` on the root directory itself: no lock
//! file to create, clean up or be tricked into following, and the kernel
//! drops it when the holder exits, however it exits (kill -9 included). The
//! descriptor is close-on-exec, so a command the VM starts (a daemon, say)
//! never inherits the lock and keeps it after the VM is gone.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{flock, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

/// Held for the whole run; dropping it releases the root.
#[derive(Debug)]
pub struct RunLock {
    _fd: OwnedFd,
}

/// Why the lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another run holds it: try again later.
    Busy,
    /// The root cannot be opened or locked at all.
    Io(std::io::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy => write!(f, "another policyvm run is converging this root"),
            LockError::Io(e) => write!(f, "cannot lock the root: {e}"),
        }
    }
}

impl RunLock {
    /// Takes the lock on `root` without waiting: a second run gives up at
    /// once rather than queue behind the first (the next scheduled run will
    /// converge whatever is left).
    pub fn acquire(root: &Path) -> Result<RunLock, LockError> {
        let fd = rustix::fs::open(
            root,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| LockError::Io(e.into()))?;
        match flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => Ok(RunLock { _fd: fd }),
            Err(Errno::WOULDBLOCK) => Err(LockError::Busy),
            Err(e) => Err(LockError::Io(e.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_one_root_is_busy_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        assert!(matches!(RunLock::acquire(dir.path()), Err(LockError::Busy)));
        let other = tempfile::tempdir().unwrap();
        RunLock::acquire(other.path()).unwrap();
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
        assert!(matches!(
            RunLock::acquire(&dir.path().join("missing")),
            Err(LockError::Io(_))
        ));
    }
}
