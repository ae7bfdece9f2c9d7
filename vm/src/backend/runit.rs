//! The runit service manager.
//!
//! A service is *enabled* when `SERVICE_DIR/NAME` (the directory
//! `runsvdir` watches, `service_dir`, `/etc/service` by default) exists;
//! enabling links it to the definition `SERVICE_SRC/NAME` (`service_src`,
//! `/etc/sv` by default) with a *relative* target, so that the link means
//! the same inside the root and, for a sandbox, to a `runsvdir` running on
//! the host. Both directories are inside `--root`. The link is made and
//! removed through [`RootFs`].
//!
//! Running state is `sv status`, changed with `sv -v -w 30 up|down`
//! (which wait for the change and fail if it does not happen), `sv
//! restart` or `sv reload` on notification. `sv` is given the absolute
//! path of the service directory, never a bare name: a path starting with
//! `/` cannot be read as an option, and `sv` knows no `--`. Before any
//! `sv`, the service directory is checked for links leading out of the
//! root ([`super::contain`]).

use std::path::Path;
use std::time::{Duration, Instant};

use super::process::{self, Cmd};
use super::service::{OnNotify, Wanted};
use super::{applied, change, host_path, perform, Step};
use crate::instance::Instance;
use crate::outcome::{Applied, Outcome};
use crate::rootfs::{Kind, RootFs};

/// The deadline of one `sv` call; `sv` itself waits at most 30 s.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// How long a newly enabled service may take to get its `runsv`
/// (`runsvdir` looks at its directory every 5 s).
const SUPERVISE_WAIT: Duration = Duration::from_secs(12);

pub const DEFAULT_SERVICE_DIR: &str = "/etc/service";
pub const DEFAULT_SERVICE_SRC: &str = "/etc/sv";

/// `sv status` of one service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Run {
        pid: u32,
    },
    Down,
    /// No `runsv` supervises it (yet): the first line of `sv`'s complaint.
    Unsupervised(String),
}

pub fn parse_status(stdout: &str) -> Result<Status, String> {
    let line = stdout.lines().next().unwrap_or("").trim();
    let pid = |l: &str| -> Option<u32> {
        let rest = l.split_once("(pid ")?.1;
        rest.split(')').next()?.parse().ok()
    };
    if line.starts_with("run: ") {
        pid(line)
            .map(|pid| Status::Run { pid })
            .ok_or_else(|| format!("unexpected `sv status` output {line:?}"))
    } else if line.starts_with("down: ") || line.starts_with("finish: ") {
        Ok(Status::Down)
    } else if line.starts_with("fail: ") || line.starts_with("warning: ") {
        Ok(Status::Unsupervised(line.to_owned()))
    } else {
        Err(format!("unexpected `sv status` output {line:?}"))
    }
}

/// `sv [-v -w 30] VERB /abs/service/dir`.
pub fn sv(verb: &str, dir: &Path) -> Cmd {
    let mut argv = vec!["sv".to_owned()];
    if matches!(verb, "up" | "down" | "restart") {
        argv.extend(["-v".to_owned(), "-w".to_owned(), "30".to_owned()]);
    }
    argv.extend([verb.to_owned(), dir.display().to_string()]);
    Cmd::new(&argv, TIMEOUT)
}

/// The link target from directory `from` to `to` (both absolute policy
/// paths): `/etc/service` to `/etc/sv/web` is `../sv/web`.
pub fn relative(from: &str, to: &str) -> String {
    let f: Vec<&str> = from.split('/').filter(|c| !c.is_empty()).collect();
    let t: Vec<&str> = to.split('/').filter(|c| !c.is_empty()).collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<&str> = vec![".."; f.len().saturating_sub(common)];
    parts.extend(t.iter().skip(common));
    parts.join("/")
}

struct Paths {
    /// `SERVICE_DIR/NAME`, a policy path inside the root.
    link: String,
    /// `SERVICE_SRC/NAME`.
    definition: String,
    /// The link's target, relative.
    target: String,
    /// `SERVICE_DIR/NAME` on this host, for `sv`.
    host: std::path::PathBuf,
}

fn paths(fs: &RootFs, inst: &Instance) -> Result<Paths, Applied> {
    let dir = inst.str("service_dir").unwrap_or(DEFAULT_SERVICE_DIR);
    let src = inst.str("service_src").unwrap_or(DEFAULT_SERVICE_SRC);
    for (attr, path) in [("service_dir", dir), ("service_src", src)] {
        super::check_path(attr, path)?;
    }
    let dir = dir.trim_end_matches('/');
    let src = src.trim_end_matches('/');
    let name = &inst.promiser;
    let link = format!("{dir}/{name}");
    let definition = format!("{src}/{name}");
    Ok(Paths {
        target: relative(dir, &definition),
        host: host_path(fs.path(), &link),
        link,
        definition,
    })
}

/// Refuses to run `sv` on a service directory that a link planted in the
/// root leads out of it ([`super::contain`]): `sv` follows
/// `SERVICE_DIR/NAME` and writes `supervise/control` under it.
fn contained(fs: &RootFs, p: &Paths) -> Result<(), Applied> {
    super::contain::check(fs, &format!("{}/supervise/control", p.link), "`sv`")
        .map_err(Applied::failed)
}

fn status(dir: &Path) -> Result<Status, String> {
    let ran = process::run(&sv("status", dir))?;
    parse_status(&ran.stdout).map_err(|e| format!("{e} {}", ran.stderr.trim()))
}

/// Polls `sv status` until a `runsv` supervises the service.
fn wait_supervised(dir: &Path) -> Result<Status, String> {
    let start = Instant::now();
    loop {
        let s = status(dir)?;
        if !matches!(s, Status::Unsupervised(_)) || start.elapsed() >= SUPERVISE_WAIT {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn converge(
    fs: &RootFs,
    dry_run: bool,
    would_exist: super::service::WouldExist<'_>,
    inst: &Instance,
    wanted: Wanted,
) -> Applied {
    let p = match paths(fs, inst) {
        Ok(p) => p,
        Err(failed) => return failed,
    };
    let mut changes = Vec::new();
    let mut log = String::new();
    let mut linked_now = false;
    if let Some(want) = wanted.enabled {
        let now = match fs.lstat(&p.link) {
            Ok(m) => m,
            Err(e) => return Applied::failed(e.to_string()),
        };
        match (now.map(|m| m.kind), want) {
            (None, true) => {
                match fs.lstat(&p.definition) {
                    Ok(Some(m)) if m.kind == Kind::Dir => {}
                    // A definition the dry run would have written.
                    Ok(None) if would_exist(&format!("{}/run", p.definition)) => {}
                    Ok(_) => {
                        return Applied::failed(format!(
                        "no service definition `{}` (a directory with a `run` script) to enable",
                        p.definition
                    ))
                    }
                    Err(e) => return Applied::failed(e.to_string()),
                }
                if !dry_run {
                    if let Err(e) = fs.symlink(&p.link, &p.target) {
                        return Applied::failed(e.to_string());
                    }
                }
                linked_now = true;
                changes.push(change(
                    "enabled",
                    "false",
                    format!("true (link {} -> {})", p.link, p.target),
                ));
            }
            (Some(Kind::Symlink), false) => {
                if let Err(failed) = contained(fs, &p) {
                    return failed;
                }
                if !dry_run {
                    // Stop it first, or its runsv keeps it running until
                    // runsvdir notices the link is gone.
                    if let Ok(Status::Run { .. }) = status(&p.host) {
                        let ran = match process::run(&sv("down", &p.host)) {
                            Ok(r) => r,
                            Err(e) => return Applied::failed(e),
                        };
                        log.push_str(&format!("$ {}\n{}", ran.shown, ran.output()));
                    }
                    if let Err(e) = fs.remove(&p.link) {
                        return Applied::failed(e.to_string());
                    }
                }
                changes.push(change("enabled", "true", "false"));
            }
            (Some(Kind::Symlink | Kind::Dir), true) | (None, false) => {}
            (Some(_), false) => {
                return Applied::failed(format!(
                    "`{}` is not a link; refusing to remove it to disable the service",
                    p.link
                ))
            }
            (Some(_), true) => {
                return Applied::failed(format!("`{}` is not a service directory", p.link))
            }
        }
    }
    if wanted.running.is_some() || wanted.notified.is_some() {
        if wanted.enabled == Some(false) && wanted.running != Some(true) {
            // Disabled: nothing supervises it any more.
            return done(changes, log);
        }
        if dry_run && linked_now {
            if wanted.running == Some(true) {
                changes.push(change(
                    "state",
                    "stopped",
                    format!("running (would run `{}`)", sv("up", &p.host).shown()),
                ));
            }
            return done(changes, log);
        }
        match fs.lstat(&p.link) {
            Ok(Some(_)) => {}
            Ok(None) if dry_run && linked_now => {}
            Ok(None) => {
                return Applied::failed(format!(
                    "`{}` is not enabled (no `{}`): runit only runs enabled services; promise `enabled = true`",
                    inst.promiser, p.link
                ))
            }
            Err(e) => return Applied::failed(e.to_string()),
        }
        if let Err(failed) = contained(fs, &p) {
            return failed;
        }
        let current = if linked_now {
            wait_supervised(&p.host)
        } else {
            status(&p.host)
        };
        let current = match current {
            Ok(Status::Unsupervised(why)) => {
                return Applied::failed(format!(
                    "`{}` is not supervised by runsv (is runsvdir running on {}?): {why}",
                    p.link,
                    host_path(
                        fs.path(),
                        inst.str("service_dir").unwrap_or(DEFAULT_SERVICE_DIR)
                    )
                    .display()
                ))
            }
            Ok(s) => s,
            Err(e) => return Applied::failed(e),
        };
        let running = matches!(current, Status::Run { .. });
        let mut steps = Vec::new();
        let mut restarting = false;
        // A service enabled just now was started by its new runsv: a
        // notification does not restart it on top.
        let mut started = linked_now;
        if let Some(want) = wanted.running.filter(|w| *w != running) {
            started = want;
            let (verb, before, after) = if want {
                ("up", "stopped", "running")
            } else {
                ("down", "running", "stopped")
            };
            steps.push(Step::new("state", before, after, sv(verb, &p.host)));
        }
        if let Some(how) = wanted.notified {
            if running && !started && wanted.running != Some(false) {
                let pid = match current {
                    Status::Run { pid } => pid.to_string(),
                    _ => String::new(),
                };
                steps.push(Step::new(
                    how.verb(),
                    format!("pid {pid}"),
                    "notified",
                    sv(how.verb(), &p.host),
                ));
                restarting = how == OnNotify::Restart;
            }
        }
        match perform(dry_run, &steps) {
            Ok((more, more_log)) => {
                changes.extend(more);
                log.push_str(&more_log);
            }
            Err(mut failed) => {
                failed.changes.splice(0..0, changes);
                return failed;
            }
        }
        if !dry_run && !steps.is_empty() {
            // `sv -v` waited for the change; read it again to be sure. A
            // restart may still be under way (`sv` can see the old process
            // before it takes the signal): wait for a new pid.
            let old = match current {
                Status::Run { pid } if restarting => Some(pid),
                _ => None,
            };
            match (settled(&p.host, wanted.running, old), wanted.running) {
                (Ok(Status::Run { pid }), Some(true) | None) if old == Some(pid) => {
                    return Applied {
                        outcome: Outcome::Failed(format!(
                            "`{}` still runs its old process (pid {pid}) 10 s after `sv restart`",
                            p.link
                        )),
                        changes,
                        output: Some(log),
                    }
                }
                (Ok(Status::Run { pid }), Some(true) | None) => {
                    if let Some(c) = changes.iter_mut().find(|c| c.what == "restart") {
                        c.after = format!("pid {pid}");
                    }
                }
                (Ok(Status::Down), Some(false)) => {}
                (Ok(s), _) => {
                    return Applied {
                        outcome: Outcome::Failed(format!("`{}` is {s:?} after the change", p.link)),
                        changes,
                        output: Some(log),
                    }
                }
                (Err(e), _) => return Applied::failed(e),
            }
        }
    }
    done(changes, log)
}

/// The status once it has settled: running (with a pid other than `old`,
/// after a restart) or down, as wanted; at most [`SETTLE`] of polling.
fn settled(dir: &Path, running: Option<bool>, old: Option<u32>) -> Result<Status, String> {
    let start = Instant::now();
    loop {
        let s = status(dir)?;
        let done = match (&s, running) {
            (Status::Run { pid }, Some(true) | None) => old != Some(*pid),
            (Status::Down, Some(false)) => true,
            _ => false,
        };
        if done || start.elapsed() >= SETTLE {
            return Ok(s);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// How long a service may take to show the state `sv` reported.
const SETTLE: Duration = Duration::from_secs(10);

fn done(changes: Vec<crate::outcome::Change>, log: String) -> Applied {
    applied(changes, log)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_parsing() {
        assert_eq!(
            parse_status("run: /r/etc/service/web: (pid 118998) 12s\n"),
            Ok(Status::Run { pid: 118998 })
        );
        assert_eq!(
            parse_status("run: /s/web: (pid 5) 0s, want down, got TERM\n"),
            Ok(Status::Run { pid: 5 })
        );
        assert_eq!(
            parse_status("down: /s/web: 3s, normally up\n"),
            Ok(Status::Down)
        );
        assert!(matches!(
            parse_status("warning: /s/web: unable to open supervise/ok: file does not exist\n"),
            Ok(Status::Unsupervised(_))
        ));
        assert!(matches!(
            parse_status("fail: /s/web: runsv not running\n"),
            Ok(Status::Unsupervised(_))
        ));
        assert!(parse_status("").is_err());
        assert!(parse_status("run: no pid").is_err());
    }

    #[test]
    fn commands_take_absolute_paths_and_wait() {
        let dir = Path::new("/r/etc/service/web");
        assert_eq!(sv("up", dir).shown(), "sv -v -w 30 up /r/etc/service/web");
        assert_eq!(sv("status", dir).shown(), "sv status /r/etc/service/web");
        assert_eq!(sv("reload", dir).shown(), "sv reload /r/etc/service/web");
    }

    #[test]
    fn links_are_relative() {
        assert_eq!(relative("/etc/service", "/etc/sv/web"), "../sv/web");
        assert_eq!(relative("/var/service", "/etc/sv/web"), "../../etc/sv/web");
        assert_eq!(relative("/", "/sv/web"), "sv/web");
        assert_eq!(relative("/etc/sv", "/etc/sv/web"), "web");
    }
}
