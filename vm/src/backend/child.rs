//! Waiting for a started program and reading its two output pipes, on the
//! calling thread: one `poll(2)` loop over the pipes and a pidfd of the
//! child (which becomes readable when it exits).
//!
//! It replaced three threads per program (one per pipe, one waiting for the
//! exit): each thread cost a stack mapping, a malloc arena and their
//! teardown, and a converged run of 200 packages spent about a sixth of
//! its own CPU time on the threads of its one `rpm -qa`
//! (docs/performance.md, "Toolsets (issue 25)"). What it guarantees is
//! unchanged ([`super::process`]): at the deadline the whole process group
//! is killed; once the program has exited, its pipes are read for at most
//! the drain time (a daemon it started may hold them open forever); each
//! stream keeps at most its limit and says when it held more.
//!
//! Without pidfds (Linux before 5.3) the exit is looked for every
//! [`EXIT_TICK`] instead.

use std::io::Read as _;
use std::os::fd::AsFd;
use std::process::Child;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// How often the exit is checked for when the kernel gives no pidfd.
const EXIT_TICK: Duration = Duration::from_millis(5);

/// How much is read from a pipe at a time.
const CHUNK: usize = 32 * 1024;

/// What to wait for and keep.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// After this, the process group is killed.
    pub timeout: Duration,
    /// How long the pipes are read once the program has exited (or, killed,
    /// how long its exit is waited for).
    pub drain: Duration,
    /// The most of standard output kept.
    pub stdout: usize,
    /// The most of standard error kept.
    pub stderr: usize,
    /// Kill the process group as soon as standard output passes its limit
    /// (a query whose answer would be refused anyway).
    pub stop_at_stdout_limit: bool,
}

/// What a program did.
#[derive(Debug, Default)]
pub struct Collected {
    /// The exit status; `None` when it was killed (deadline or signal) or
    /// did not exit after being killed.
    pub code: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// Standard output held more than its limit.
    pub stdout_overflowed: bool,
}

/// One output pipe and what was kept of it.
struct Stream<R> {
    pipe: Option<R>,
    kept: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl<R: std::io::Read + AsFd> Stream<R> {
    fn new(pipe: Option<R>, limit: usize) -> Stream<R> {
        Stream {
            pipe,
            kept: Vec::new(),
            limit,
            overflowed: false,
        }
    }

    fn open(&self) -> bool {
        self.pipe.is_some()
    }

    /// One read (the pipe was reported ready, so it does not block); the
    /// end of the stream, or an error, closes it.
    fn read_once(&mut self, buf: &mut [u8]) {
        let Some(pipe) = self.pipe.as_mut() else {
            return;
        };
        match pipe.read(buf) {
            Ok(0) => self.pipe = None,
            Ok(n) => {
                let room = self.limit.saturating_sub(self.kept.len());
                if n > room {
                    self.overflowed = true;
                }
                self.kept
                    .extend_from_slice(buf.get(..n.min(room)).unwrap_or_default());
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => self.pipe = None,
        }
    }
}

/// Where the program is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Running,
    /// Killed at the deadline; its exit is awaited for the drain time.
    Killed,
    /// Exited (and reaped); its pipes are read for the drain time.
    Exited,
}

/// Waits for `child` (started with its stdout and stderr piped, or not)
/// and reads both pipes until it has exited and they are closed, within
/// the limits.
pub fn collect(mut child: Child, limits: Limits) -> Collected {
    let pid = child.id();
    let mut out = Stream::new(child.stdout.take(), limits.stdout);
    let mut err = Stream::new(child.stderr.take(), limits.stderr);
    let exit_fd = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    let mut buf = vec![0u8; CHUNK];
    let mut phase = Phase::Running;
    let mut code = None;
    let mut until = deadline_after(limits.timeout);
    let mut stopped = false;
    // Without a pidfd, or once it said so, the exit is asked for.
    let mut look_for_exit = true;
    loop {
        if phase != Phase::Exited && look_for_exit {
            if let Ok(Some(status)) = child.try_wait() {
                code = if phase == Phase::Killed {
                    None
                } else {
                    status.code()
                };
                phase = Phase::Exited;
                until = deadline_after(limits.drain);
            }
        }
        if phase == Phase::Exited && !out.open() && !err.open() {
            break;
        }
        let now = Instant::now();
        if now >= until {
            match phase {
                Phase::Running => {
                    super::process::kill_group(pid);
                    phase = Phase::Killed;
                    until = deadline_after(limits.drain);
                    continue;
                }
                Phase::Killed => {
                    // Not gone even after SIGKILL (stuck in the kernel):
                    // reaped whenever it goes, without holding the run.
                    std::thread::spawn(move || {
                        let _ = child.wait();
                    });
                    break;
                }
                Phase::Exited => break,
            }
        }
        let mut wait = until.saturating_duration_since(now);
        if exit_fd.is_none() && phase != Phase::Exited {
            wait = wait.min(EXIT_TICK);
        }
        let (out_ready, err_ready, exited) = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
            let ready = PollFlags::IN | PollFlags::HUP | PollFlags::ERR;
            if let Some(p) = out.pipe.as_ref() {
                fds.push(PollFd::new(p, PollFlags::IN));
            }
            if let Some(p) = err.pipe.as_ref() {
                fds.push(PollFd::new(p, PollFlags::IN));
            }
            let exit_slot = match (&exit_fd, phase) {
                (Some(fd), Phase::Running | Phase::Killed) => {
                    fds.push(PollFd::new(fd, PollFlags::IN));
                    true
                }
                _ => false,
            };
            let timeout = Timespec::try_from(wait).ok();
            if poll(&mut fds, timeout.as_ref()).is_err() {
                // EINTR, or no memory for the poll: look again shortly.
                std::thread::sleep(wait.min(EXIT_TICK));
            }
            let mut revents = fds.iter().map(|f| f.revents().intersects(ready));
            let out_ready = out.open() && revents.next().unwrap_or(false);
            let err_ready = err.open() && revents.next().unwrap_or(false);
            let exited = exit_slot && revents.next().unwrap_or(false);
            (out_ready, err_ready, exited)
        };
        if out_ready {
            out.read_once(&mut buf);
            if out.overflowed && limits.stop_at_stdout_limit && !stopped {
                stopped = true;
                super::process::kill_group(pid);
            }
        }
        if err_ready {
            err.read_once(&mut buf);
        }
        look_for_exit = exit_fd.is_none() || exited;
    }
    Collected {
        code,
        stdout: out.kept,
        stderr: err.kept,
        stdout_overflowed: out.overflowed,
    }
}

/// Now plus `d`, or far in the future when that overflows.
fn deadline_after(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d)
        .or_else(|| now.checked_add(Duration::from_secs(u64::from(u32::MAX))))
        .unwrap_or(now)
}
