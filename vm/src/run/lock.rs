//! One run at a time per state directory (THREATS.md T20): cron, a timer,
//! an agent and an operator may all start a run at once, and two VMs
//! converging one tree would race each other's writes.
//!
//! The lock is an exclusive `flock` on the file `lock` of the state
//! directory ([`crate::state`]: `--state DIR`, by default
//! `ROOT/var/lib/converge`), which belongs to the user the VM runs as and
//! is writable by no one else. It used to be taken on the root directory
//! itself, which any local user can open: on a real host that is `/`, and
//! while `nobody` held it every run and agent cycle exited 75 having
//! changed nothing. The lock file is opened relative to the checked
//! directory, with `O_NOFOLLOW` and `O_NONBLOCK`, and must be a regular
//! file. The kernel drops the lock when the holder exits, however it exits
//! (kill -9 included). The descriptor is close-on-exec, so a command the
//! VM starts (a daemon, say) never inherits the lock and keeps it after the
//! VM is gone.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{flock, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::state::{default_dir, StateDir, LOCK};

/// Held for the whole run; dropping it releases the state directory.
#[derive(Debug)]
pub struct RunLock {
    _fd: OwnedFd,
}

/// Why the lock was not taken.
#[derive(Debug)]
pub enum LockError {
    /// Another run holds it: try again later.
    Busy,
    /// The state directory or its lock file cannot be opened or locked.
    Io(std::io::Error),
}

impl std::fmt::Display for LockError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockError::Busy => write!(f, "another policyvm run holds the state directory's lock"),
            LockError::Io(e) => write!(f, "cannot lock the state directory: {e}"),
        }
    }
}

impl RunLock {
    /// The lock a `policyvm run --root ROOT` without `--state` takes: that
    /// of `ROOT/var/lib/converge` (created if missing).
    pub fn acquire(root: &Path) -> Result<RunLock, LockError> {
        StateDir::open_under(root, &default_dir(root))
            .map_err(LockError::Io)?
            .lock()
    }

    /// Takes the lock of the state directory `dir` (a handle on it, checked
    /// by [`StateDir::open`]) without waiting: a second run gives up at
    /// once rather than queue behind the first (the next scheduled run will
    /// converge whatever is left).
    pub(crate) fn acquire_in(dir: &OwnedFd) -> Result<RunLock, LockError> {
        let fd = rustix::fs::openat(
            dir,
            LOCK,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o600),
        )
        .map_err(|e| LockError::Io(e.into()))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| LockError::Io(e.into()))?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(LockError::Io(std::io::Error::other(
                "`lock` in the state directory is not a regular file",
            )));
        }
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
    fn a_second_lock_on_one_state_is_busy_until_the_first_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        assert!(matches!(RunLock::acquire(dir.path()), Err(LockError::Busy)));
        let other = tempfile::tempdir().unwrap();
        RunLock::acquire(other.path()).unwrap();
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
    }

    /// Issue 14 item 1: any user can open the root directory (`/`) and
    /// `flock` it; that must not stop a run.
    #[test]
    fn a_lock_held_on_the_root_directory_itself_does_not_block_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::File::open(dir.path()).unwrap();
        flock(&root, FlockOperation::NonBlockingLockExclusive).unwrap();
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_link_or_fifo_in_place_of_the_lock_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = default_dir(dir.path());
        std::fs::create_dir_all(&state).unwrap();
        std::os::unix::fs::symlink(dir.path().join("elsewhere"), state.join(LOCK)).unwrap();
        assert!(matches!(
            RunLock::acquire(dir.path()),
            Err(LockError::Io(_))
        ));
        assert!(!dir.path().join("elsewhere").exists());
        std::fs::remove_file(state.join(LOCK)).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            state.join(LOCK),
            rustix::fs::FileType::Fifo,
            Mode::from_bits_truncate(0o600),
            0,
        )
        .unwrap();
        assert!(matches!(
            RunLock::acquire(dir.path()),
            Err(LockError::Io(_))
        ));
    }
}
