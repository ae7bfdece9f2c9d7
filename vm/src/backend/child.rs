//! Waiting for a started program and reading its two output pipes, on the
//! calling thread: one `poll(2)` loop over the pipes and a pidfd of the
//! child (which becomes readable when it exits).
//!
//! It replaced three threads per program (one per pipe, one waiting for the
//! exit): each thread cost a stack mapping, a malloc arena and their
//! teardown, for every program a run starts (docs/performance.md,
//! "Toolsets (issue 25)"). What it guarantees is
//! unchanged ([`super::process`]): at the deadline the whole process group
//! is killed; once the program has exited, its pipes are read for at most
//! the drain time (a daemon it started may hold them open forever); each
//! stream keeps at most its limit and says when it held more.
//!
//! While the program runs, a pipe that gave less than a full read is left
//! alone for [`COALESCE`] (its exit still ends the wait at once): `rpm
//! -qa` writes each package with a write of its own, and waking for each
//! of 200 lines cost more CPU than all the rest of the VM's package work
//! (docs/performance.md, "Toolsets (issue 25)"). A program that writes
//! fast fills whole reads and is read without pause; once it has exited,
//! the pipes are read without pause.
//!
//! Without pidfds (Linux before 5.3) the exit is looked for every
//! [`EXIT_TICK`] instead.

use std::os::fd::{AsFd, OwnedFd};
use std::process::Child;
use std::time::{Duration, Instant};

use rustix::event::{poll, PollFd, PollFlags, Timespec};
use rustix::process::{pidfd_open, Pid, PidfdFlags};

/// How often the exit is checked for when the kernel gives no pidfd.
const EXIT_TICK: Duration = Duration::from_millis(5);

/// How much is read from a pipe at a time.
const CHUNK: usize = 32 * 1024;

/// How long the pipes are left alone after a read that did not fill
/// [`CHUNK`], while the program runs: output is gathered in fewer, larger
/// reads, and a program never waits on a full pipe longer than this.
const COALESCE: Duration = Duration::from_millis(1);

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
    /// end of the stream, or an error, closes it. Whether it filled `buf`.
    fn read_once(&mut self, buf: &mut [u8]) -> bool {
        let Some(pipe) = self.pipe.as_mut() else {
            return false;
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
                return n == buf.len();
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => self.pipe = None,
        }
        false
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
pub fn collect(child: Child, limits: Limits) -> Collected {
    let exit_fd = i32::try_from(child.id())
        .ok()
        .and_then(Pid::from_raw)
        .and_then(|p| pidfd_open(p, PidfdFlags::empty()).ok());
    collect_with(child, limits, exit_fd)
}

/// [`collect`], with the pidfd that tells the exit, if the kernel gave one.
fn collect_with(mut child: Child, limits: Limits, exit_fd: Option<OwnedFd>) -> Collected {
    let pid = child.id();
    let mut out = Stream::new(child.stdout.take(), limits.stdout);
    let mut err = Stream::new(child.stderr.take(), limits.stderr);
    let mut buf = vec![0u8; CHUNK];
    let mut phase = Phase::Running;
    let mut code = None;
    let mut until = deadline_after(limits.timeout);
    let mut stopped = false;
    // Without a pidfd, or once it said so, the exit is asked for.
    let mut look_for_exit = true;
    // While the program runs, the pipes are not watched before this.
    let mut quiet_until: Option<Instant> = None;
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
        let quiet = match quiet_until {
            Some(t) if phase != Phase::Exited && t > now => {
                wait = wait.min(t.saturating_duration_since(now));
                true
            }
            _ => false,
        };
        let (out_ready, err_ready, exited) = {
            let mut fds: Vec<PollFd<'_>> = Vec::with_capacity(3);
            let ready = PollFlags::IN | PollFlags::HUP | PollFlags::ERR;
            if !quiet {
                for p in out.pipe.iter() {
                    fds.push(PollFd::new(p, PollFlags::IN));
                }
                for p in err.pipe.iter() {
                    fds.push(PollFd::new(p, PollFlags::IN));
                }
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
            let out_ready = out.open() && !quiet && revents.next().unwrap_or(false);
            let err_ready = err.open() && !quiet && revents.next().unwrap_or(false);
            let exited = exit_slot && revents.next().unwrap_or(false);
            (out_ready, err_ready, exited)
        };
        let mut filled = false;
        if out_ready {
            filled |= out.read_once(&mut buf);
            if out.overflowed && limits.stop_at_stdout_limit && !stopped {
                stopped = true;
                super::process::kill_group(pid);
            }
        }
        if err_ready {
            filled |= err.read_once(&mut buf);
        }
        if (out_ready || err_ready) && !filled {
            quiet_until = Instant::now().checked_add(COALESCE);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn limits() -> Limits {
        Limits {
            timeout: Duration::from_secs(20),
            drain: Duration::from_secs(2),
            stdout: 8 << 20,
            stderr: 8 << 20,
            stop_at_stdout_limit: false,
        }
    }

    fn sh(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Output written line by line (as `rpm -qa` does), on both streams,
    /// is kept whole and in order although it is read in batches.
    #[test]
    fn many_small_writes_are_kept_whole_and_in_order() {
        let done = collect(
            sh("i=0; while [ $i -lt 500 ]; do echo out$i; echo err$i >&2; i=$((i+1)); done; exit 7"),
            limits(),
        );
        let want = |tag: &str| (0..500).map(|i| format!("{tag}{i}\n")).collect::<String>();
        assert_eq!(String::from_utf8(done.stdout).unwrap(), want("out"));
        assert_eq!(String::from_utf8(done.stderr).unwrap(), want("err"));
        assert_eq!(done.code, Some(7));
        assert!(!done.stdout_overflowed);
    }

    /// A fast writer of more than a pipe holds is read without pause, and
    /// the end of a program is seen at once, not after a drain time.
    #[test]
    fn a_large_output_is_read_whole_and_the_exit_is_seen_at_once() {
        let start = Instant::now();
        let done = collect(sh("head -c 3000000 /dev/zero"), limits());
        assert_eq!(done.stdout.len(), 3_000_000);
        assert_eq!(done.code, Some(0));
        let done = collect(sh("echo one; exit 0"), limits());
        assert_eq!(done.stdout, b"one\n");
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}",
            start.elapsed()
        );
    }

    /// Past its limit a stream keeps its start and says so; with the stop
    /// asked for, the writer is killed instead of being read to its end.
    #[test]
    fn a_stream_past_its_limit_is_cut_and_the_writer_stopped_if_asked() {
        let small = Limits {
            stdout: 1000,
            ..limits()
        };
        let done = collect(sh("head -c 5000 /dev/zero; echo done >&2"), small);
        assert_eq!((done.stdout.len(), done.stdout_overflowed), (1000, true));
        assert_eq!(done.stderr, b"done\n");
        assert_eq!(done.code, Some(0));
        let stop = Limits {
            stop_at_stdout_limit: true,
            ..small
        };
        let start = Instant::now();
        let done = collect(sh("exec cat /dev/zero"), stop);
        assert!(done.stdout_overflowed);
        assert_eq!(done.code, None, "killed, not exited");
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    /// Without a pidfd (Linux before 5.3) the exit is looked for on a
    /// tick: the output, the status, the deadline and the drain time are
    /// the same.
    #[test]
    fn without_a_pidfd_the_exit_is_found_by_looking() {
        let done = collect_with(
            sh("i=0; while [ $i -lt 100 ]; do echo $i; i=$((i+1)); done; exit 4"),
            limits(),
            None,
        );
        let want: String = (0..100).map(|i| format!("{i}\n")).collect();
        assert_eq!(String::from_utf8(done.stdout).unwrap(), want);
        assert_eq!(done.code, Some(4));
        let start = Instant::now();
        let short = Limits {
            timeout: Duration::from_millis(100),
            ..limits()
        };
        let mut group = Command::new("sh");
        group
            .args(["-c", "sleep 30"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        std::os::unix::process::CommandExt::process_group(&mut group, 0);
        let done = collect_with(group.spawn().unwrap(), short, None);
        assert_eq!(done.code, None);
        assert!(start.elapsed() < Duration::from_secs(5));
    }

    /// A program with no pipes at all (a detached command) is waited for
    /// until it exits, and killed at its deadline.
    #[test]
    fn without_pipes_the_exit_or_the_deadline_ends_the_wait() {
        use std::os::unix::process::CommandExt as _;
        let quiet = |script: &str| {
            Command::new("sh")
                .args(["-c", script])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .unwrap()
        };
        assert_eq!(collect(quiet("exit 3"), limits()).code, Some(3));
        let start = Instant::now();
        let short = Limits {
            timeout: Duration::from_millis(100),
            ..limits()
        };
        assert_eq!(collect(quiet("sleep 30"), short).code, None);
        assert!(start.elapsed() < Duration::from_secs(5));
    }
}
