//! `process` promises: processes whose command line matches a regex.
//!
//! **Reading.** The process table is `ROOT/proc`, read through
//! [`crate::rootfs`]: every numeric directory's `cmdline` (arguments
//! joined by single spaces; processes with an empty one — kernel threads,
//! zombies — are skipped) and `stat` (parent and start time). On the real
//! system that is the kernel's `/proc`; under `--root DIR` it is whatever
//! `DIR/proc` holds: the kernel's when a proc filesystem is mounted there
//! (a container's root), or a fixture of `PID/cmdline` files (tests).
//!
//! **Never the VM.** The VM's own process and its ancestors (read from the
//! kernel's `/proc`, up to pid 1) are never counted and never signalled. A
//! regex that matches one of them, where a signal would be sent, fails the
//! promise naming the process, and nothing is signalled at all.
//!
//! **Signalling** (`state = absent`, or a surplus over `count`, newest
//! first). Each pid read from `ROOT/proc` is opened as a pidfd on this
//! kernel, its command line read again from the kernel's `/proc` and
//! compared with what `ROOT/proc` said; only then is the signal sent
//! through the pidfd, so a pid that was reused in between, or a fixture
//! that does not describe this kernel's processes, is never signalled.
//! The VM then waits up to `timeout` for each to exit (the pidfd becomes
//! readable).
//!
//! **Starting** (`state = running`, fewer than wanted): `start` is run
//! through [`process::run_detached`] as `setsid --fork -- ARGV` — a new
//! session, stdin/stdout/stderr on `/dev/null`, no other descriptor (the
//! VM opens every one close-on-exec), the fixed environment — and under
//! `--root DIR` as `setsid --fork -- chroot -- DIR ARGV`, so the program
//! and everything it opens are the root's. There is no way to start on the
//! host instead under `--root`: a `process` promise is about the root's
//! processes. The VM then waits up to `timeout` for the process to appear
//! in `ROOT/proc`.

use std::os::fd::OwnedFd;
use std::path::Path;
use std::time::{Duration, Instant};

use regex::Regex;
use rustix::process::{Pid, PidfdFlags, Signal};

use super::process::{self, Cmd};
use super::{change, sandbox};
use crate::instance::Instance;
use crate::outcome::{Applied, Change};
use crate::rootfs::RootFs;

/// The most processes one promise may ask for (`count`) or start at once.
pub const MAX_COUNT: i64 = 256;

/// One process of a process table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub ppid: u32,
    /// Clock ticks since boot: a larger one started later.
    pub start_time: u64,
    /// The arguments joined by single spaces.
    pub cmdline: String,
}

/// `ROOT/proc/PID/cmdline` as one line: NUL-separated arguments joined by
/// spaces (a trailing NUL dropped).
pub fn parse_cmdline(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    text.trim_end_matches('\0')
        .split('\0')
        .collect::<Vec<_>>()
        .join(" ")
}

/// The parent pid and start time of a `/proc/PID/stat` line (fields 4 and
/// 22, counted after the command name, which may hold blanks and
/// parentheses: it ends at the last `)`).
pub fn parse_stat(text: &str) -> Option<(u32, u64)> {
    let (_, rest) = text.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((ppid, start))
}

/// The processes of `ROOT/proc` (a fresh walk: no directory handle of an
/// earlier read is reused for a new process with an old pid).
pub fn scan(root: &Path) -> Result<Vec<Proc>, String> {
    let fs = RootFs::open(root).map_err(|e| e.to_string())?;
    let names = match fs.lstat("/proc") {
        Ok(Some(_)) => fs.list_dir("/proc").map_err(|e| e.to_string())?,
        Ok(None) => {
            return Err(format!(
                "{} has no /proc, so its processes cannot be read (under --root, ROOT/proc must \
                 be the root's process table: a proc mount, or a fixture of PID/cmdline files)",
                root.display()
            ))
        }
        Err(e) => return Err(e.to_string()),
    };
    let mut procs = Vec::new();
    for name in names {
        let Some(pid) = std::str::from_utf8(&name)
            .ok()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        // A process may exit while it is read: it is then simply not there.
        let Ok(Some(cmdline)) = fs.read_file(&format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmdline = parse_cmdline(&cmdline);
        if cmdline.is_empty() {
            continue;
        }
        let (ppid, start_time) = fs
            .read_file(&format!("/proc/{pid}/stat"))
            .ok()
            .flatten()
            .and_then(|s| parse_stat(&String::from_utf8_lossy(&s)))
            .unwrap_or((0, 0));
        procs.push(Proc {
            pid,
            ppid,
            start_time,
            cmdline,
        });
    }
    procs.sort_by_key(|p| p.pid);
    Ok(procs)
}

/// The VM's own pid and its ancestors', from the kernel's `/proc`.
pub fn protected_pids() -> Vec<u32> {
    let mut pids = vec![rustix::process::getpid()
        .as_raw_nonzero()
        .get()
        .unsigned_abs()];
    let Ok(fs) = RootFs::open(Path::new("/")) else {
        return pids;
    };
    let mut pid = pids.first().copied().unwrap_or(1);
    while pid > 1 && pids.len() < 4096 {
        let parent = fs
            .read_file(&format!("/proc/{pid}/stat"))
            .ok()
            .flatten()
            .and_then(|s| parse_stat(&String::from_utf8_lossy(&s)))
            .map(|(ppid, _)| ppid);
        match parent {
            Some(p) if p > 0 && !pids.contains(&p) => {
                pids.push(p);
                pid = p;
            }
            _ => break,
        }
    }
    if !pids.contains(&1) {
        pids.push(1);
    }
    pids
}

/// A signal name of the schema (`TERM`) as a signal.
pub fn signal(name: &str) -> Option<Signal> {
    Some(match name {
        "TERM" => Signal::TERM,
        "INT" => Signal::INT,
        "QUIT" => Signal::QUIT,
        "HUP" => Signal::HUP,
        "KILL" => Signal::KILL,
        "USR1" => Signal::USR1,
        "USR2" => Signal::USR2,
        "ALRM" => Signal::ALARM,
        _ => return None,
    })
}

/// The command that starts `argv` detached, chrooted into a sandbox root.
pub fn start_command(root: &Path, argv: &[String], timeout: Duration) -> Cmd {
    let mut words: Vec<String> = vec!["setsid".into(), "--fork".into(), "--".into()];
    if let Some(root) = sandbox(root) {
        words.extend(["chroot".into(), "--".into(), root.display().to_string()]);
    }
    words.extend(argv.iter().cloned());
    Cmd {
        cwd: Some(std::path::PathBuf::from("/")),
        ..Cmd::new(&words, timeout)
    }
}

/// What a promise needs done, decided from the matching processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    Kept,
    /// Start this many.
    Start(usize),
    /// Signal these (newest first).
    Signal(Vec<Proc>),
}

/// Decides what to do: `matching` excludes the protected processes.
pub fn plan(state: &str, count: Option<usize>, mut matching: Vec<Proc>) -> Plan {
    let n = matching.len();
    if state == "absent" {
        return if n == 0 {
            Plan::Kept
        } else {
            Plan::Signal(matching)
        };
    }
    match count {
        None if n == 0 => Plan::Start(1),
        None => Plan::Kept,
        Some(c) if n < c => Plan::Start(c.saturating_sub(n)),
        Some(c) if n > c => {
            matching.sort_by_key(|p| std::cmp::Reverse((p.start_time, p.pid)));
            matching.truncate(n.saturating_sub(c));
            Plan::Signal(matching)
        }
        Some(_) => Plan::Kept,
    }
}

pub fn converge(fs: &RootFs, dry_run: bool, inst: &Instance) -> Applied {
    let Some(pattern) = inst.str("match") else {
        return Applied::failed("a process promise needs `match`");
    };
    let re = match Regex::new(pattern) {
        Ok(re) => re,
        Err(e) => return Applied::failed(format!("`match` is not a valid regex: {e}")),
    };
    let state = inst.str("state").unwrap_or("running");
    let count = match inst.int("count") {
        None => None,
        Some(c) if (0..=MAX_COUNT).contains(&c) => usize::try_from(c).ok(),
        Some(c) => {
            return Applied::failed(format!("`count = {c}` is out of range 0..={MAX_COUNT}"))
        }
    };
    let timeout = Duration::from_secs(
        inst.int("timeout")
            .and_then(|t| u64::try_from(t).ok())
            .unwrap_or(10),
    );
    let signal_name = inst.str("signal").unwrap_or("TERM");
    let Some(sig) = signal(signal_name) else {
        return Applied::failed(format!(
            "`signal = {signal_name:?}` is not a signal the VM sends"
        ));
    };
    let table = match scan(fs.path()) {
        Ok(t) => t,
        Err(e) => return Applied::failed(e),
    };
    let protected = protected_pids();
    let (mine, matching): (Vec<Proc>, Vec<Proc>) = table
        .into_iter()
        .filter(|p| re.is_match(&p.cmdline))
        .partition(|p| protected.contains(&p.pid));
    match plan(state, count, matching) {
        Plan::Kept => Applied::kept(),
        Plan::Signal(targets) => {
            if let Some(me) = mine.first() {
                return Applied::failed(format!(
                    "`match = {pattern:?}` matches the VM itself or one of its ancestors (pid {}: \
                     `{}`); refusing to signal anything: make the regex match only the processes \
                     meant (anchor it, e.g. `^/usr/sbin/nginx`)",
                    me.pid, me.cmdline
                ));
            }
            terminate(dry_run, &targets, sig, signal_name, timeout)
        }
        Plan::Start(n) => {
            let Some(argv) = inst.list("start").filter(|a| !a.is_empty()) else {
                return Applied::failed(format!(
                    "no process matches {pattern:?} and the promise has no `start` argv to start one"
                ));
            };
            start(
                fs.path(),
                dry_run,
                argv,
                n,
                &re,
                count.unwrap_or(1),
                timeout,
            )
        }
    }
}

/// Starts `n` copies and waits until `want` match.
fn start(
    root: &Path,
    dry_run: bool,
    argv: &[String],
    n: usize,
    re: &Regex,
    want: usize,
    timeout: Duration,
) -> Applied {
    let cmd = start_command(root, argv, timeout);
    let what = |i: usize| {
        change(
            "started",
            "not running",
            format!("copy {} of {n}", i.saturating_add(1)),
        )
    };
    if dry_run {
        let changes = (0..n)
            .map(|i| {
                let mut c = what(i);
                c.after = format!("{} (would run `{}`)", c.after, cmd.shown());
                c
            })
            .collect();
        return Applied::from_changes(changes);
    }
    let mut changes: Vec<Change> = Vec::new();
    let mut log = String::new();
    for i in 0..n {
        let ran = match process::run_detached(&cmd) {
            Ok(r) => r,
            Err(e) => {
                return Applied {
                    changes,
                    ..Applied::failed(e)
                }
            }
        };
        log.push_str(&format!("$ {}\n", ran.shown));
        if !ran.ok() {
            return Applied {
                changes,
                output: Some(log),
                ..Applied::failed(ran.failure())
            };
        }
        changes.push(what(i));
    }
    let protected = protected_pids();
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(Instant::now);
    loop {
        let seen = scan(root)
            .map(|t| {
                t.iter()
                    .filter(|p| re.is_match(&p.cmdline) && !protected.contains(&p.pid))
                    .count()
            })
            .unwrap_or(0);
        if seen >= want {
            return Applied {
                output: Some(log),
                ..Applied::from_changes(changes)
            };
        }
        if Instant::now() >= deadline {
            return Applied {
                changes,
                output: Some(log),
                ..Applied::failed(format!(
                    "started `{}`, but only {seen} of {want} processes matching {:?} are in \
                     {}/proc after {}s (it exited at once, or ROOT/proc is not this kernel's \
                     process table)",
                    cmd.shown(),
                    re.as_str(),
                    root.display().to_string().trim_end_matches('/'),
                    timeout.as_secs()
                ))
            };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Signals each target (after checking it is the process this kernel has
/// under that pid) and waits for it to exit.
fn terminate(
    dry_run: bool,
    targets: &[Proc],
    sig: Signal,
    name: &str,
    timeout: Duration,
) -> Applied {
    let mut changes = Vec::new();
    for p in targets {
        let what = change(
            &format!("pid {}", p.pid),
            format!("running `{}`", p.cmdline),
            format!("sent SIG{name}, exited"),
        );
        if dry_run {
            changes.push(Change {
                after: format!("would send SIG{name}"),
                ..what
            });
            continue;
        }
        match signal_and_wait(p, sig, timeout) {
            Ok(true) => changes.push(what),
            Ok(false) => {}
            Err(e) => {
                return Applied {
                    changes,
                    ..Applied::failed(format!("pid {} (`{}`): {e}", p.pid, p.cmdline))
                }
            }
        }
    }
    Applied::from_changes(changes)
}

/// Sends `sig` to the process `p` describes — only if this kernel's
/// process with that pid has the same command line — and waits up to
/// `timeout` for it to exit. `Ok(false)`: it had already exited (no such
/// pid on this kernel, or a zombie), nothing was sent.
pub fn signal_and_wait(p: &Proc, sig: Signal, timeout: Duration) -> Result<bool, String> {
    let pid = i32::try_from(p.pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or("not a valid pid")?;
    let pidfd: OwnedFd = match rustix::process::pidfd_open(pid, PidfdFlags::empty()) {
        Ok(fd) => fd,
        // Exited since the table was read (or never ran on this kernel).
        Err(rustix::io::Errno::SRCH) => return Ok(false),
        Err(e) => return Err(format!("cannot open the process: {e}")),
    };
    // Read after the pidfd pins the process: if that one exits and the pid
    // is reused, the signal below goes to nobody (ESRCH), never to the new one.
    let host = RootFs::open(Path::new("/")).map_err(|e| e.to_string())?;
    let state = host
        .read_file(&format!("/proc/{}/stat", p.pid))
        .ok()
        .flatten()
        .and_then(|s| {
            let text = String::from_utf8_lossy(&s).into_owned();
            let (_, rest) = text.rsplit_once(')')?;
            rest.split_whitespace().next().map(str::to_owned)
        });
    if matches!(state.as_deref(), Some("Z" | "X")) {
        // It has exited; only its parent has not reaped it yet.
        return Ok(false);
    }
    let now = match host.read_file(&format!("/proc/{}/cmdline", p.pid)) {
        Ok(bytes) => parse_cmdline(&bytes.unwrap_or_default()),
        Err(e) => return Err(format!("cannot read its command line on this kernel: {e}")),
    };
    if now != p.cmdline {
        return Err(format!(
            "this kernel's process {} is `{now}`, not the one read from the process table; \
             nothing was signalled",
            p.pid
        ));
    }
    match rustix::process::pidfd_send_signal(&pidfd, sig) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => return Err(format!("cannot send the signal: {e}")),
    }
    let deadline = Instant::now()
        .checked_add(timeout)
        .unwrap_or_else(Instant::now);
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let wait = rustix::event::Timespec {
            tv_sec: i64::try_from(left.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(left.subsec_nanos()),
        };
        let mut fds = [rustix::event::PollFd::new(
            &pidfd,
            rustix::event::PollFlags::IN,
        )];
        match rustix::event::poll(&mut fds, Some(&wait)) {
            Ok(n) if n > 0 => return Ok(true),
            Ok(_) => {
                return Err(format!(
                    "still running {}s after the signal (a stronger `signal`, such as KILL, \
                     ends a process that ignores it)",
                    timeout.as_secs()
                ))
            }
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(format!("cannot wait for it to exit: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, start: u64) -> Proc {
        Proc {
            pid,
            ppid: 1,
            start_time: start,
            cmdline: format!("worker {pid}"),
        }
    }

    #[test]
    fn cmdline_and_stat_are_parsed() {
        assert_eq!(
            parse_cmdline(b"/usr/sbin/nginx\0-g\0daemon off;\0"),
            "/usr/sbin/nginx -g daemon off;"
        );
        assert_eq!(parse_cmdline(b""), "");
        let stat = "4242 (a (weird) name) S 17 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
        assert_eq!(parse_stat(stat), Some((17, 987654)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn what_a_promise_does_with_the_matching_processes() {
        assert_eq!(plan("running", None, vec![]), Plan::Start(1));
        assert_eq!(plan("running", None, vec![proc(5, 1)]), Plan::Kept);
        assert_eq!(plan("running", Some(3), vec![proc(5, 1)]), Plan::Start(2));
        assert_eq!(
            plan(
                "running",
                Some(1),
                vec![proc(5, 10), proc(6, 30), proc(7, 20)]
            ),
            Plan::Signal(vec![proc(6, 30), proc(7, 20)]),
            "the newest surplus goes"
        );
        assert_eq!(plan("absent", None, vec![]), Plan::Kept);
        assert_eq!(
            plan("absent", None, vec![proc(5, 1)]),
            Plan::Signal(vec![proc(5, 1)])
        );
    }

    #[test]
    fn the_start_command_is_detached_and_chrooted_into_a_root() {
        let argv = vec!["/usr/sbin/app".to_owned(), "-f".to_owned()];
        let t = Duration::from_secs(5);
        assert_eq!(
            start_command(Path::new("/"), &argv, t).argv,
            ["setsid", "--fork", "--", "/usr/sbin/app", "-f"]
        );
        assert_eq!(
            start_command(Path::new("/srv/img"), &argv, t).argv,
            [
                "setsid",
                "--fork",
                "--",
                "chroot",
                "--",
                "/srv/img",
                "/usr/sbin/app",
                "-f"
            ]
        );
    }

    /// Read-only, against this machine's real /proc: this test process is
    /// in the table with its real command line, and it and its ancestors
    /// are protected.
    #[test]
    fn the_real_proc_is_read_and_the_vm_is_protected() {
        let me = std::process::id();
        let table = scan(Path::new("/")).unwrap();
        let found = table.iter().find(|p| p.pid == me).unwrap();
        let exe = std::env::args().next().unwrap();
        assert!(found.cmdline.starts_with(&exe), "{found:?}");
        let protected = protected_pids();
        assert_eq!(protected.first(), Some(&me));
        assert!(
            protected.contains(&found.ppid) && protected.contains(&1),
            "{protected:?}"
        );
    }

    /// The signal step against a real child of this test: refused while
    /// the command line read differs from the kernel's, then sent, and the
    /// exit is seen.
    #[test]
    fn the_signal_step_checks_the_process_and_waits_for_its_exit() {
        let mut child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        let pid = child.id();
        // Until its exec is done, a child shows its parent's command line.
        while std::fs::read(format!("/proc/{pid}/cmdline")).unwrap() != b"sleep\x00300\x00" {
            std::thread::sleep(Duration::from_millis(10));
        }
        let wrong = Proc {
            pid,
            ppid: 0,
            start_time: 0,
            cmdline: "something else".into(),
        };
        let err = signal_and_wait(&wrong, Signal::TERM, Duration::from_secs(5)).unwrap_err();
        assert!(err.contains("nothing was signalled"), "{err}");
        assert!(child.try_wait().unwrap().is_none(), "still running");
        let right = Proc {
            cmdline: "sleep 300".into(),
            ..wrong
        };
        assert_eq!(
            signal_and_wait(&right, Signal::TERM, Duration::from_secs(5)),
            Ok(true)
        );
        // Exited, not yet reaped: nothing more to send.
        assert_eq!(
            signal_and_wait(&right, Signal::TERM, Duration::from_secs(5)),
            Ok(false)
        );
        let status = child.wait().unwrap();
        let gone = Proc {
            pid: 4_194_400,
            ..right
        };
        assert_eq!(
            signal_and_wait(&gone, Signal::TERM, Duration::from_secs(1)),
            Ok(false)
        );
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(status.signal(), Some(libc_sigterm()));
    }

    fn libc_sigterm() -> i32 {
        Signal::TERM.as_raw()
    }
}
