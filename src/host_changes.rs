//! What a test changed on the host outside its sandbox: every file,
//! directory and link below the host's system directories whose
//! modification or status-change time is at or after a moment (a
//! directory's times change when an entry is made or removed in it, so a
//! file made and removed again is seen too). The toolset tests list it to
//! show that converging sandbox roots (rpm's database, dnf's cache, logs
//! and history, `userdel -R`) wrote nothing outside them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The host's directories that a package or account tool could write:
/// configuration, state, caches, logs, programs, homes. `/tmp` is not
/// among them (every test's sandbox is there, and libdnf's transient
/// `/tmp/tmpdir.*` is documented), nor `/proc`, `/sys`, `/dev`, `/run`.
pub const SYSTEM_DIRS: &[&str] = &[
    "/etc", "/var", "/usr", "/opt", "/srv", "/home", "/root", "/boot",
];

/// Paths below [`SYSTEM_DIRS`] that are written while tests run by others
/// than the test: cargo's and rustup's homes (the harness), and the
/// system's own logging and timers (journald, rsyslog, which also record
/// that `userdel` ran, and systemd's timer stamps) on a machine that runs
/// them.
pub const NOISE: &[&str] = &[
    "/root/.cargo",
    "/root/.rustup",
    "/var/log/journal",
    "/var/log/syslog",
    "/var/log/auth.log",
    "/var/log/messages",
    "/var/log/secure",
    "/var/lib/systemd",
];

/// Every path below `dirs` (not below `skip`, not following links)
/// changed at or after `since`, sorted.
pub fn changed_since(dirs: &[&str], skip: &[&str], since: SystemTime) -> Vec<PathBuf> {
    let since = since.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    let at_or_after = |secs: i64, nanos: i64| {
        let t = Duration::new(
            u64::try_from(secs).unwrap_or(0),
            u32::try_from(nanos).unwrap_or(0),
        );
        t >= since
    };
    let mut out = Vec::new();
    let mut todo: Vec<PathBuf> = dirs.iter().map(PathBuf::from).collect();
    while let Some(p) = todo.pop() {
        if skip.iter().any(|s| p.starts_with(Path::new(s))) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if at_or_after(meta.mtime(), meta.mtime_nsec())
            || at_or_after(meta.ctime(), meta.ctime_nsec())
        {
            out.push(p.clone());
        }
        if meta.is_dir() {
            for e in std::fs::read_dir(&p).into_iter().flatten().flatten() {
                todo.push(e.path());
            }
        }
    }
    out.sort();
    out
}
