//! Running one external program for a backend or a `command` promise:
//! argv only (never a shell), stdin closed, output captured and bounded, a
//! deadline after which the whole process group is killed, and no wait on
//! a pipe that a stray grandchild keeps open. Every backend command goes
//! through [`run`], so "no shell, bounded time, exact command in the
//! report" holds in one place.
//!
//! Nothing of the VM's own environment reaches a program (it may hold an
//! operator's tokens, which would end up in reports): each gets exactly
//! [`ENVIRONMENT`] plus what its caller adds (`CONVERGE_ROOT`, apt's
//! `DEBIAN_FRONTEND`, ...). Which program a bare name like `systemctl`
//! means is still looked up on the VM's own `PATH` (the one its unit or
//! cron line gives it), then the program runs with the fixed `PATH`.

use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The most output kept per stream, for the report.
pub const MAX_OUTPUT: usize = 64 * 1024;

/// The most standard output kept from a read-only query whose output is
/// the answer ([`query`]): the package database of a large host (`rpm -qa`
/// of 2,000 packages is about 80 KiB) must not be cut at the report's
/// [`MAX_OUTPUT`], which made the packages past the cut look absent.
pub const MAX_QUERY_OUTPUT: usize = 64 * 1024 * 1024;

/// How long to wait for the output pipes to close once the program has
/// exited: a daemon it started may hold them open forever.
const DRAIN: Duration = Duration::from_secs(2);

/// The `PATH` every program runs with (docs/vm.md, "Programs the VM
/// runs"): the system directories, sbin first, so that a cron-started
/// agent still finds `useradd` and `dpkg`.
pub const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The whole environment a program starts with, before its caller's
/// additions: a fixed `PATH`, an untranslated UTF-8 locale (tools' output
/// is parsed), root's home (the VM runs as root). Nothing is inherited.
pub const ENVIRONMENT: &[(&str, &str)] = &[("PATH", PATH), ("LANG", "C.UTF-8"), ("HOME", "/root")];

/// A program to run, as data: tests check exactly what a backend would run
/// without running it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cmd {
    pub argv: Vec<String>,
    /// Environment variables on top of [`ENVIRONMENT`] (nothing is
    /// inherited).
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub timeout: Duration,
    /// Run chrooted into this directory (a `command` promise or a `file`'s
    /// `validate` under `--root`, LANGUAGE.md §13): `cwd` is then a path
    /// inside it, and the program is looked up on [`PATH`] inside it.
    pub chroot: Option<PathBuf>,
    /// What the program reads on its standard input (closed when `None`):
    /// data that must not be in the argv, which every local user can read
    /// in `/proc/PID/cmdline` (a password hash for `chpasswd -e`).
    pub stdin: Option<Input>,
    /// Kill the program (its process group) as soon as its standard output
    /// passes [`MAX_OUTPUT`]: for a probe, whose value must be whole, more
    /// output is refused anyway, and an endless flood must not hold the
    /// run until the deadline.
    pub stop_at_output_cap: bool,
}

/// The standard input of a [`Cmd`]; its `Debug` shows only its length, so
/// that no log of a command shows what it was fed, and it is wiped from
/// memory when dropped (a password hash, issue 20).
#[derive(Clone, PartialEq, Eq)]
pub struct Input(pub zeroize::Zeroizing<Vec<u8>>);

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<{} bytes>", self.0.len())
    }
}

impl Cmd {
    /// A command from its words, with the given deadline.
    pub fn new<S: AsRef<str>>(argv: &[S], timeout: Duration) -> Cmd {
        Cmd {
            argv: argv.iter().map(|s| s.as_ref().to_owned()).collect(),
            env: Vec::new(),
            cwd: None,
            timeout,
            chroot: None,
            stdin: None,
            stop_at_output_cap: false,
        }
    }

    /// Feeds `bytes` to the program's standard input.
    pub fn stdin(mut self, bytes: Vec<u8>) -> Cmd {
        self.stdin = Some(Input(zeroize::Zeroizing::new(bytes)));
        self
    }

    /// The argv actually executed: the promised one, or, chrooted, the
    /// promised one behind util-linux `unshare --root=DIR --wd=CWD --`
    /// (which chroots, changes to `CWD` inside the new root, and looks the
    /// program up there; no namespace is created). The VM forbids unsafe
    /// code, so it does not call chroot(2) itself between fork and exec.
    pub fn executed_argv(&self) -> Vec<String> {
        let Some(root) = &self.chroot else {
            return self.argv.clone();
        };
        let wd = self
            .cwd
            .as_ref()
            .map_or_else(|| "/".to_owned(), |c| c.display().to_string());
        let mut argv = vec![
            "unshare".to_owned(),
            format!("--root={}", root.display()),
            format!("--wd={wd}"),
            "--".to_owned(),
        ];
        argv.extend(self.argv.iter().cloned());
        argv
    }

    /// Adds an environment variable.
    pub fn env(mut self, key: &str, value: &str) -> Cmd {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The command line as shown in reports: words separated by spaces,
    /// quoted when they hold anything but plain characters.
    pub fn shown(&self) -> String {
        self.argv
            .iter()
            .map(|w| {
                if !w.is_empty()
                    && w.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./=:+,@%".contains(c))
                {
                    w.clone()
                } else {
                    format!("'{}'", w.replace('\'', r"'\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// What a finished command did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ran {
    /// The command line, as [`Cmd::shown`].
    pub shown: String,
    /// The exit status; `None` when it was killed (deadline or signal).
    pub code: Option<i32>,
    /// Standard output, then standard error (each bounded).
    pub stdout: String,
    pub stderr: String,
    pub timeout: Duration,
    /// Whether the program wrote more than [`MAX_OUTPUT`] to its standard
    /// output: `stdout` is then only its start (a probe's value must be
    /// whole, so a probe refuses it).
    pub stdout_overflowed: bool,
}

impl Ran {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Both streams, as one text for the report.
    pub fn output(&self) -> String {
        let mut out = self.stdout.clone();
        if !out.is_empty() && !out.ends_with('\n') && !self.stderr.is_empty() {
            out.push('\n');
        }
        out.push_str(&self.stderr);
        out
    }

    /// Why it failed, naming the exact command: `` `dpkg ...` exited with
    /// status 1: <output> ``.
    pub fn failure(&self) -> String {
        let how = match self.code {
            Some(c) => format!("exited with status {c}"),
            None => format!(
                "was killed (timeout of {}s, or a signal)",
                self.timeout.as_secs()
            ),
        };
        let output = self.output();
        let output = output.trim_end();
        if output.is_empty() {
            format!("`{}` {how}", self.shown)
        } else {
            format!("`{}` {how}: {output}", self.shown)
        }
    }
}

/// Runs `cmd` to completion or to its deadline. `Err` only when it could
/// not be started at all (no such program, ...), with the command named.
pub fn run(cmd: &Cmd) -> Result<Ran, String> {
    run_with(cmd, true, MAX_OUTPUT)
}

/// Runs a read-only query whose standard output is its answer (a package
/// database listing, a file list): like [`run`], but its standard output is
/// kept up to [`MAX_QUERY_OUTPUT`], and an answer longer than that is an
/// error naming the command, never a list silently cut short.
pub fn query(cmd: &Cmd) -> Result<Ran, String> {
    let ran = run_with(cmd, true, MAX_QUERY_OUTPUT)?;
    if ran.stdout_overflowed {
        return Err(format!(
            "`{}` printed more than {} MiB: its answer is not read in part",
            ran.shown,
            MAX_QUERY_OUTPUT / (1024 * 1024)
        ));
    }
    Ok(ran)
}

/// Runs `cmd` like [`run`], but with stdout and stderr on `/dev/null`
/// instead of captured: for a command that leaves a daemon behind
/// (`setsid --fork ...`, `process` promises), which must not inherit a pipe
/// the VM stops reading (its first write would kill it with SIGPIPE).
pub fn run_detached(cmd: &Cmd) -> Result<Ran, String> {
    run_with(cmd, false, MAX_OUTPUT)
}

/// `limit`: the most of standard output kept (standard error keeps
/// [`MAX_OUTPUT`]).
fn run_with(cmd: &Cmd, capture: bool, limit: usize) -> Result<Ran, String> {
    let output = || {
        if capture {
            Stdio::piped()
        } else {
            Stdio::null()
        }
    };
    let shown = cmd.shown();
    if cmd.argv.is_empty() {
        return Err("empty command".to_owned());
    }
    if let Some(root) = &cmd.chroot {
        chroot_problem(root, cmd.argv.first().map_or("", String::as_str)).map_or(
            Ok(()),
            |why| {
                Err(format!(
                    "cannot run `{shown}` chrooted into `{}`: {why}",
                    root.display()
                ))
            },
        )?;
    }
    let argv = cmd.executed_argv();
    let Some((program, args)) = argv.split_first() else {
        return Err("empty command".to_owned());
    };
    let path = locate(program).ok_or_else(|| {
        format!("cannot run `{shown}`: no program `{program}` on the PATH of policyvm")
    })?;
    let mut command = Command::new(path);
    command
        .arg0(program)
        .args(args)
        .env_clear()
        .envs(ENVIRONMENT.iter().copied())
        .stdin(if cmd.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(output())
        .stderr(output())
        // Its own process group, so that a deadline kills what it started
        // too (apt-get's dpkg, a shell's children).
        .process_group(0);
    for (k, v) in &cmd.env {
        command.env(k, v);
    }
    if let Some(cwd) = cmd.cwd.as_ref().filter(|_| cmd.chroot.is_none()) {
        command.current_dir(cwd);
    }
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot run `{shown}`: {e}"))?;
    if let (Some(mut pipe), Some(Input(bytes))) = (child.stdin.take(), cmd.stdin.clone()) {
        // On its own thread: a program that does not read its input must
        // not block us; the pipe closes when the thread ends.
        std::thread::spawn(move || {
            use std::io::Write as _;
            let _ = pipe.write_all(&bytes);
        });
    }
    // Its exit and both pipes are awaited on this thread ([`super::child`]).
    let done = super::child::collect(
        child,
        super::child::Limits {
            timeout: cmd.timeout,
            drain: DRAIN,
            stdout: limit,
            stderr: MAX_OUTPUT,
            stop_at_stdout_limit: cmd.stop_at_output_cap,
        },
    );
    Ok(Ran {
        shown,
        code: done.code,
        stdout: String::from_utf8_lossy(&done.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&done.stderr).into_owned(),
        timeout: cmd.timeout,
        stdout_overflowed: done.stdout_overflowed,
    })
}

/// Why a program cannot run chrooted into `root`, checked before anything
/// runs so that the reason is the same on every machine: only root may
/// chroot, and the program must be inside the root (a bare name on
/// [`PATH`] there). A link is taken as present (it is resolved inside the
/// root when the program starts).
fn chroot_problem(root: &std::path::Path, program: &str) -> Option<String> {
    let present = |path: &str| {
        let host = root.join(path.trim_start_matches('/'));
        rustix::fs::lstat(&host).is_ok()
    };
    let found = if program.contains('/') {
        present(program)
    } else {
        PATH.split(':')
            .any(|dir| present(&format!("{dir}/{program}")))
    };
    if !found {
        return Some(format!(
            "there is no program `{program}` inside the root (under `--root`, commands run chrooted into it: install it there, or say `host = true` to run it on the host)"
        ));
    }
    if !rustix::process::geteuid().is_root() {
        return Some(
            "only root can chroot (under `--root`, commands run chrooted into it: run policyvm as root, or say `host = true` to run it on the host)"
                .to_owned(),
        );
    }
    None
}

/// The program a word names: itself when it holds a `/`, else the first
/// executable `DIR/word` over the VM's own `PATH` (or [`PATH`] when it
/// has none), as a shell would find it. Looked up here because the child's
/// `PATH` is not the VM's.
fn locate(program: &str) -> Option<PathBuf> {
    if program.contains('/') {
        return Some(PathBuf::from(program));
    }
    if program.is_empty() {
        return None;
    }
    let search = std::env::var_os("PATH").unwrap_or_else(|| PATH.into());
    std::env::split_paths(&search)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| {
            rustix::fs::access(candidate, rustix::fs::Access::EXEC_OK).is_ok()
                && rustix::fs::stat(candidate)
                    .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_file())
        })
}

/// Kills the process group the command leads, and the command itself in
/// case it left that group. Called only before the command is reaped
/// ([`super::child::collect`] reaps it), so its pid (a zombie's, if it
/// exited in that instant) cannot belong to another process yet.
pub(super) fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn shown_quotes_what_a_shell_would_split() {
        let cmd = Cmd::new(
            &["dpkg", "--root=/tmp/r", "-i", "--", "a b", "x'y", ""],
            Duration::ZERO,
        );
        assert_eq!(cmd.shown(), r"dpkg --root=/tmp/r -i -- 'a b' 'x'\''y' ''");
    }

    #[test]
    fn stdin_reaches_the_program_and_is_never_shown() {
        let cmd = Cmd::new(&["cat"], Duration::from_secs(10)).stdin(b"bob:$6$s$h\n".to_vec());
        assert_eq!(cmd.shown(), "cat");
        assert!(!format!("{cmd:?}").contains("$6$"));
        let ran = run(&cmd).unwrap();
        assert_eq!(ran.stdout, "bob:$6$s$h\n");
        // A program that never reads its input still finishes.
        let ran =
            run(&Cmd::new(&["true"], Duration::from_secs(10)).stdin(vec![b'x'; 1 << 20])).unwrap();
        assert!(ran.ok());
    }

    #[test]
    fn output_past_the_cap_is_cut_and_said_so() {
        let exact = format!("head -c {MAX_OUTPUT} /dev/zero");
        let ran = run(&Cmd::new(&["sh", "-c", &exact], Duration::from_secs(10))).unwrap();
        assert_eq!(
            (ran.stdout.len(), ran.stdout_overflowed),
            (MAX_OUTPUT, false)
        );
        let more = format!("head -c {} /dev/zero", MAX_OUTPUT + 1);
        let ran = run(&Cmd::new(&["sh", "-c", &more], Duration::from_secs(10))).unwrap();
        assert_eq!(
            (ran.stdout.len(), ran.stdout_overflowed),
            (MAX_OUTPUT, true)
        );
    }

    #[test]
    fn a_query_keeps_its_whole_answer_or_fails() {
        // Past the report's cap, a query's answer is still whole.
        let big = format!("head -c {} /dev/zero", MAX_OUTPUT * 2);
        let ran = query(&Cmd::new(&["sh", "-c", &big], Duration::from_secs(10))).unwrap();
        assert_eq!(
            (ran.stdout.len(), ran.stdout_overflowed),
            (MAX_OUTPUT * 2, false)
        );
        // Past its own, it is an error naming the command, not a part.
        let flood = format!("head -c {} /dev/zero", MAX_QUERY_OUTPUT + 1);
        let why = query(&Cmd::new(&["sh", "-c", &flood], Duration::from_secs(60))).unwrap_err();
        assert!(
            why.contains("head -c") && why.contains("more than 64 MiB"),
            "{why}"
        );
    }

    #[test]
    fn output_status_and_failure_name_the_command() {
        let ran = run(&Cmd::new(
            &["sh", "-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(10),
        ))
        .unwrap();
        assert_eq!(ran.code, Some(3));
        assert_eq!(ran.stdout, "out\n");
        assert_eq!(ran.stderr, "err\n");
        assert!(!ran.ok());
        assert_eq!(
            ran.failure(),
            "`sh -c 'echo out; echo err >&2; exit 3'` exited with status 3: out\nerr"
        );
    }

    #[test]
    fn the_deadline_kills_the_whole_group_and_a_held_pipe_does_not_hang() {
        let start = Instant::now();
        // The shell's background child keeps stdout open after the shell
        // is killed; the run must still end promptly.
        let ran = run(&Cmd::new(
            &["sh", "-c", "sleep 30 & sleep 30"],
            Duration::from_millis(200),
        ))
        .unwrap();
        assert_eq!(ran.code, None);
        assert!(
            ran.failure().contains("was killed (timeout of 0s"),
            "{}",
            ran.failure()
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        let ran = run(&Cmd::new(
            &["sh", "-c", "sleep 6 & echo started"],
            Duration::from_secs(10),
        ))
        .unwrap();
        // The shell exited; its `sleep` holds the pipe for 6 s more: the
        // output is given up after the drain time.
        assert!(ran.ok());
        assert_eq!(ran.stdout, "started\n");
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    /// Issue 14, item 20: the VM's environment (an operator's token, say)
    /// never reaches a program; it gets the documented one.
    #[test]
    fn programs_get_the_documented_environment_and_nothing_else() {
        let ran = run(&Cmd::new(&["env"], Duration::from_secs(10)).env("EXTRA", "1")).unwrap();
        let mut lines: Vec<&str> = ran.stdout.lines().collect();
        lines.sort_unstable();
        assert_eq!(
            lines,
            [
                "EXTRA=1",
                "HOME=/root",
                "LANG=C.UTF-8",
                &format!("PATH={PATH}"),
            ],
            "{}",
            ran.stdout
        );
    }

    /// Issue 17 item 8: a chrooted command is the promised argv behind
    /// `unshare --root`, with its working directory inside the root.
    #[test]
    fn a_chrooted_command_runs_behind_unshare_root() {
        let mut cmd = Cmd::new(&["/bin/sh", "-c", "pwd"], Duration::from_secs(1));
        assert_eq!(cmd.executed_argv(), ["/bin/sh", "-c", "pwd"]);
        cmd.chroot = Some(PathBuf::from("/srv/root"));
        assert_eq!(
            cmd.executed_argv(),
            [
                "unshare",
                "--root=/srv/root",
                "--wd=/",
                "--",
                "/bin/sh",
                "-c",
                "pwd"
            ]
        );
        cmd.cwd = Some(PathBuf::from("/var/lib/app"));
        assert_eq!(
            cmd.executed_argv(),
            [
                "unshare",
                "--root=/srv/root",
                "--wd=/var/lib/app",
                "--",
                "/bin/sh",
                "-c",
                "pwd"
            ]
        );
        assert_eq!(
            cmd.shown(),
            "/bin/sh -c pwd",
            "reports show the promised argv"
        );
        // A program missing from the root is refused before anything runs.
        let empty = tempfile::tempdir().unwrap();
        cmd.chroot = Some(empty.path().to_path_buf());
        let err = run(&cmd).unwrap_err();
        assert!(
            err.contains("there is no program `/bin/sh` inside the root"),
            "{err}"
        );
        assert!(err.contains("host = true"), "{err}");
    }

    #[test]
    fn a_missing_program_is_an_error_naming_it() {
        let err = run(&Cmd::new(
            &["no-such-tool-here", "x"],
            Duration::from_secs(1),
        ))
        .unwrap_err();
        assert!(
            err.starts_with("cannot run `no-such-tool-here x`: no program"),
            "{err}"
        );
        let err = run(&Cmd::new(
            &["/nonexistent/tool", "x"],
            Duration::from_secs(1),
        ))
        .unwrap_err();
        assert!(err.starts_with("cannot run `/nonexistent/tool x`"), "{err}");
    }
}
