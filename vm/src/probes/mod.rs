//! Probes (LANGUAGE.md section 15, format 2.3): the typed host facts a
//! bundle declares (`fact NAME: TYPE from [argv]` or `from file "PATH"`),
//! gathered once per run before classes are evaluated.
//!
//! A program runs through [`process::run`] like every external program:
//! argv only (no shell), stdin closed, the fixed environment, its own
//! process group killed at the deadline, output bounded. Under `--root` it
//! runs chrooted into the root, as a `command` does (so only root can run
//! program probes there). Its path is checked first inside the root, and a
//! fact file is read through [`RootFs`]: both must pass [`trust`]
//! (THREATS.md T32). What it printed must fit [`MAX_PROBE_OUTPUT`] and
//! parse as the declared type ([`parse`]).
//!
//! Any failure makes the fact **unknown**, with the reason: every program
//! that reads it fails with that reason, and the run skips the promises
//! (and leaves unset the classes) that need it; nothing silently takes a
//! default. Values and failures go into the run report.

pub mod parse;
mod trust;

use std::path::Path;
use std::time::{Duration, Instant};

use crate::backend::process::{self, Cmd};
use crate::bundle::format::Body;
use crate::bundle::probe::{
    Probe, ProbeSource, ProbeType, MAX_PROBES_TOTAL_SECS, MAX_PROBE_OUTPUT,
};
use crate::eval::Val;
use crate::rootfs::RootFs;
pub use parse::ProbeValue;

// A probe's output is captured by `process::run`, which keeps this much
// and says whether there was more.
const _: () = assert!(process::MAX_OUTPUT == MAX_PROBE_OUTPUT);

/// The most of a failing probe's standard error kept in its reason.
const MAX_REASON_OUTPUT: usize = 512;

/// What one probe gave on this host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeOutcome {
    pub name: String,
    /// The value, or why the fact is unknown.
    pub result: Result<ProbeValue, String>,
    pub duration_ms: u64,
}

/// The probe facts of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    outcomes: Vec<ProbeOutcome>,
}

/// No probes: what a bundle without `fact` declarations reads.
pub static NONE: Probes = Probes {
    outcomes: Vec::new(),
};

impl Probes {
    /// Runs every probe of the bundle, in table order, for the root that
    /// `fs` opens; `chroot` is where programs run chrooted (the root, under
    /// `--root`), `None` to run them as they are (the root is `/`).
    pub fn gather(body: &Body, fs: &RootFs, chroot: Option<&Path>) -> Probes {
        Probes::gather_within(body, fs, chroot, Duration::from_secs(MAX_PROBES_TOTAL_SECS))
    }

    /// [`Probes::gather`] with `budget` for all the probes together.
    fn gather_within(body: &Body, fs: &RootFs, chroot: Option<&Path>, budget: Duration) -> Probes {
        let euid = rustix::process::geteuid().as_raw();
        let all_started = Instant::now();
        let outcomes = body
            .probes()
            .map(|(_, probe)| {
                let started = Instant::now();
                let left = budget.saturating_sub(all_started.elapsed());
                let result = if left.is_zero() {
                    Err(format!(
                        "not run: the probes of this run already took {}s, the limit (docs/bytecode.md, Limits)",
                        budget.as_secs()
                    ))
                } else {
                    run_one(probe, fs, chroot, euid, left)
                };
                ProbeOutcome {
                    name: probe.name.clone(),
                    result,
                    duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                }
            })
            .collect();
        Probes { outcomes }
    }

    /// Probes with these outcomes (what [`Probes::gather`] would give),
    /// for tests of what reads them.
    pub fn from_outcomes(outcomes: Vec<ProbeOutcome>) -> Probes {
        Probes { outcomes }
    }

    /// Every probe's outcome, in table order.
    pub fn outcomes(&self) -> &[ProbeOutcome] {
        &self.outcomes
    }

    /// The value a `probe` instruction reads: `path` is the probe's name,
    /// then fields and keys (`hw.cpus`). `Err` is the reason the fact is
    /// unknown on this host.
    pub fn read(&self, path: &str) -> Result<Val, String> {
        let mut steps = path.split('.');
        let name = steps.next().unwrap_or_default();
        let outcome = self
            .outcomes
            .iter()
            .find(|o| o.name == name)
            .ok_or_else(|| format!("probe {name:?} was not run"))?;
        let value = outcome
            .result
            .as_ref()
            .map_err(|why| format!("probe {name:?} failed: {why}"))?;
        let steps: Vec<&str> = steps.collect();
        let value = value
            .at(&steps)
            .map_err(|why| format!("probe fact `facts.{path}` is unknown: {why}"))?;
        match value {
            ProbeValue::Str(s) => Ok(Val::Str(s.clone())),
            ProbeValue::Int(i) => Ok(Val::Int(*i)),
            ProbeValue::Bool(b) => Ok(Val::Bool(*b)),
            ProbeValue::List(l) => Ok(Val::List(l.clone())),
            ProbeValue::Map(_) => Err(format!("probe fact `facts.{path}` is a map, not a value")),
        }
    }
}

/// The evaluator's `probe` instructions read the probes of the run.
impl converge_eval::sources::ProbeFacts for Probes {
    fn read(&self, path: &str) -> Result<Val, String> {
        Probes::read(self, path)
    }
}

/// Runs or reads one probe and parses what it gave; a program gets its
/// timeout, or `left` of the run's probe budget when that is less.
fn run_one(
    probe: &Probe,
    fs: &RootFs,
    chroot: Option<&Path>,
    euid: u32,
    left: Duration,
) -> Result<ProbeValue, String> {
    let ty = ProbeType::parse(&probe.ty)?;
    let text = match &probe.source {
        ProbeSource::Program(argv) => {
            let program = argv.get(0).ok_or("the argv is empty")?;
            if let Some(why) = trust::untrusted(fs, program, euid) {
                return Err(format!("refused to run it: {why}"));
            }
            let timeout = Duration::from_secs(probe.timeout_secs).min(left);
            let mut cmd = Cmd::new(&argv.0, timeout);
            cmd.chroot = chroot.map(Path::to_path_buf);
            cmd.stop_at_output_cap = true;
            output_of(&cmd)?
        }
        ProbeSource::File(path) => {
            if let Some(why) = trust::untrusted(fs, path, euid) {
                return Err(format!("refused to read it: {why}"));
            }
            let limit = u64::try_from(MAX_PROBE_OUTPUT)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            let bytes = fs
                .read_file_limited(path, limit)
                .map_err(|e| e.to_string())?
                .ok_or_else(|| format!("`{path}` does not exist"))?;
            if bytes.len() > MAX_PROBE_OUTPUT {
                return Err(format!(
                    "`{path}` holds more than {} KiB",
                    MAX_PROBE_OUTPUT / 1024
                ));
            }
            String::from_utf8(bytes).map_err(|_| format!("`{path}` is not UTF-8 text"))?
        }
    };
    parse::parse(&ty, &text)
}

/// The standard output of a probe program that ran to a clean exit.
fn output_of(cmd: &Cmd) -> Result<String, String> {
    let started = Instant::now();
    let ran = process::run(cmd)?;
    // Output past the cap is the reason, even when the flood only ended
    // at the deadline.
    if ran.stdout_overflowed {
        return Err(format!(
            "it printed more than {} KiB",
            MAX_PROBE_OUTPUT / 1024
        ));
    }
    match ran.code {
        None if started.elapsed() >= cmd.timeout => {
            // In whole seconds, rounded up (a budget's remainder is not).
            let secs = cmd.timeout.as_millis().div_ceil(1000);
            return Err(format!("timed out after {secs}s"));
        }
        None => return Err("it was killed by a signal".to_owned()),
        Some(0) => {}
        Some(code) => {
            let err: String = ran.stderr.trim().chars().take(MAX_REASON_OUTPUT).collect();
            return Err(if err.is_empty() {
                format!("it exited with status {code}")
            } else {
                format!("it exited with status {code}: {err}")
            });
        }
    }
    Ok(ran.stdout)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn probes() -> Probes {
        let hw = parse::parse(
            &ProbeType::parse("{cpus:int,tags:map<string>}").unwrap(),
            r#"{"cpus": 8, "tags": {"role": "db"}}"#,
        )
        .unwrap();
        Probes::from_outcomes(vec![
            ProbeOutcome {
                name: "hw".into(),
                result: Ok(hw),
                duration_ms: 3,
            },
            ProbeOutcome {
                name: "dc".into(),
                result: Err("timed out after 5s".into()),
                duration_ms: 5000,
            },
        ])
    }

    /// All probes of a run share one time budget: a probe gets what is left
    /// when that is less than its timeout, and none starts once it is
    /// spent. Run on `/` (the VM's own root): `/usr/bin/sleep` is only
    /// stat-ed and run.
    #[test]
    fn the_probes_of_a_run_share_one_time_budget() {
        use crate::bundle::format::Constant;
        use crate::bundle::probe::Probe;
        let sleep = |name: &str| {
            Constant::Probe(Box::new(Probe {
                name: name.into(),
                ty: "string".into(),
                source: ProbeSource::Program(vec!["/usr/bin/sleep".into(), "5".into()].into()),
                timeout_secs: 5,
            }))
        };
        let body = Body::with_programs(vec![sleep("a"), sleep("b"), sleep("c")], Vec::new());
        let fs = RootFs::open(Path::new("/")).unwrap();
        let started = Instant::now();
        let probes = Probes::gather_within(&body, &fs, None, Duration::from_secs(1));
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "{:?}",
            started.elapsed()
        );
        let reasons: Vec<String> = probes
            .outcomes()
            .iter()
            .map(|o| o.result.clone().unwrap_err())
            .collect();
        assert_eq!(reasons[0], "timed out after 1s");
        for r in &reasons[1..] {
            assert!(
                r.starts_with("not run: the probes of this run already took 1s"),
                "{r}"
            );
        }
    }

    #[test]
    fn reads_follow_fields_and_keys_and_say_why_a_fact_is_unknown() {
        let p = probes();
        assert_eq!(p.read("hw.cpus"), Ok(Val::Int(8)));
        assert_eq!(p.read("hw.tags.role"), Ok(Val::Str("db".into())));
        assert_eq!(
            p.read("dc"),
            Err("probe \"dc\" failed: timed out after 5s".into())
        );
        assert_eq!(
            p.read("hw.tags.zone"),
            Err("probe fact `facts.hw.tags.zone` is unknown: it has no key \"zone\"".into())
        );
        assert!(p.read("hw.tags").unwrap_err().contains("is a map"));
        assert!(p.read("nope").unwrap_err().contains("was not run"));
    }
}
