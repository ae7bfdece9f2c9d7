//! `policyvm agent`: what cron or a systemd timer runs on every host
//! (ARCHITECTURE.md "Distribution"), in order:
//!
//! 1. lock the state directory (a second agent gives up at once, 75);
//! 2. sleep this host's splay, so a fleet does not hit the hub at once;
//! 3. pull from each hub in turn until one answers ([`crate::pull`]);
//! 4. fetch the latest signed reports of the neighbours the last run
//!    watched, from the collectors ([`crate::neighbours::fetch`]);
//! 4. run `current.bundle` (or `last-good.bundle` if `current` is refused
//!    locally), verified again from disk: the host enforces its policy
//!    whether or not a hub answered;
//! 5. write `reports/last.json` (and keep older ones);
//! 6. when collectors are configured and the host is enrolled, sign the
//!    cycle's report and upload it, with what the spool holds
//!    ([`crate::upload`]); a collector down or slow costs a warning and at
//!    most `upload_timeout`, never the run or the exit code;
//! 7. write the Prometheus textfile ([`metrics`]).
//!
//! The agent opens no listening socket: nothing can be pushed to it.

pub mod config;
pub mod metrics;

use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::bundle::keys::load_trust_dir;
use crate::pull::fetch::HttpSource;
use crate::pull::{pull, PullError, Pulled};
use crate::run::lock::LockError;
use crate::run::operators::Outcome;
use crate::run::{report, run, RunOptions, RunReport};
use crate::stamp::time::format_utc;
use crate::stamp::Stamp;
use crate::state::{Local, StateDir, CURRENT, LAST_GOOD, METRICS, REPORTS};
use crate::upload::report::Cycle;
use crate::upload::{deliver, Delivery};
use config::Config;
use converge_format::report::{SignedReport, Timings};
use metrics::Metrics;

// Exit codes of `policyvm agent`: those of `policyvm run` (converged; a
// promise failed; not converged), then its own (docs/exit-codes.md).
use crate::cli::exit::{
    BUSY as EXIT_BUSY, CANT_CREATE as EXIT_STATE, FAILED as EXIT_FAILED,
    NOT_CONVERGED as EXIT_NOT_CONVERGED, NO_BUNDLE as EXIT_NO_BUNDLE, NO_INPUT as EXIT_CONFIG,
};

/// What an agent run printed and how it ended.
#[derive(Debug, Default)]
pub struct AgentRun {
    pub code: u8,
    /// The human report and the pull's outcome, for standard output.
    pub out: String,
    /// Warnings and errors, one per line, for standard error.
    pub warnings: Vec<String>,
}

/// How long this host waits before pulling: a fixed share of `max`
/// derived from the host and bundle names, so every host of a fleet has
/// its own and keeps it from run to run.
pub fn splay(hostname: &str, name: &str, max: Duration) -> Duration {
    let digest = Sha256::digest(format!("{hostname}\0{name}").as_bytes());
    let first = digest.first_chunk::<8>().copied().unwrap_or_default();
    let millis = u64::try_from(max.as_millis()).unwrap_or(u64::MAX);
    let offset = u64::from_be_bytes(first)
        .checked_rem(millis.saturating_add(1))
        .unwrap_or(0);
    Duration::from_millis(offset)
}

/// How one agent cycle runs, from the command line.
#[derive(Clone, Debug, Default)]
pub struct AgentOptions {
    /// Skip the splay (a run by hand).
    pub no_splay: bool,
    /// An audit (issue 21 item 5): pull and verify as usual, then run the
    /// bundle as a dry run and report what would change. Nothing on the
    /// host changes, nor the run's own records: no owed notifications, no
    /// watch history, no Prometheus textfile, and `reports/last.json`
    /// keeps the last real run (the dry run's report is
    /// `reports/dry-run.json`). The pulled bundle is installed as by any
    /// pull, and the report is uploaded like any other, marked
    /// `dry_run: true`.
    pub dry_run: bool,
    /// Classes set for this run, as `policyvm run --define`.
    pub defines: Vec<String>,
}

/// Where an audit (`--dry-run`) writes its report, beside `last.json`.
pub const DRY_RUN_REPORT: &str = "dry-run.json";

/// One agent run with `config`.
pub fn agent(config: &Config, options: &AgentOptions) -> AgentRun {
    let no_splay = options.no_splay;
    let mut a = AgentRun::default();
    let started = Instant::now();
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let now = since_epoch.as_secs();
    let state = match StateDir::open_under(&config.root, &config.state) {
        Ok(s) => s,
        Err(e) => {
            return a.fail(
                EXIT_STATE,
                format!(
                    "error: cannot create the state directory `{}`: {e}",
                    config.state.display()
                ),
            )
        }
    };
    let _lock = match state.lock() {
        Ok(l) => l,
        Err(LockError::Busy) => {
            return a.fail(
                EXIT_BUSY,
                format!(
                    "busy: another policyvm agent holds `{}`; this one did nothing",
                    state.path(crate::state::LOCK).display()
                ),
            )
        }
        Err(LockError::Io(e)) => {
            return a.fail(
                EXIT_STATE,
                format!("error: cannot lock `{}`: {e}", config.state.display()),
            )
        }
    };
    if !no_splay && !config.splay.is_zero() {
        let hostname = crate::facts::hostname(&config.root);
        std::thread::sleep(splay(&hostname, &config.name, config.splay));
    }
    let trusted = match load_trust_dir(&config.trust) {
        Ok(k) => k,
        Err(e) => return a.fail(EXIT_CONFIG, format!("error: cannot load trusted keys: {e}")),
    };
    // The name a staged rollout's stamp selects this host by.
    let host = crate::pull::rollout::host_name(&state, &config.root);

    // Pull: each hub in order until one gives an answer this host accepts.
    let pull_started = Instant::now();
    let current = state.load(CURRENT, &trusted);
    let mut failures = Vec::new();
    let mut pulled = None;
    let mut expired_offer = false;
    for hub in &config.hubs {
        let source = match HttpSource::new(hub, &config.http) {
            Ok(s) => s,
            Err(e) => {
                failures.push(format!("configuration: {e}"));
                continue;
            }
        };
        let in_force = current.as_ref().ok().and_then(Option::as_ref);
        match pull(
            &source,
            &config.name,
            &host,
            &trusted,
            &state,
            in_force,
            now,
        ) {
            Ok(p) => {
                pulled = Some((hub.clone(), p));
                break;
            }
            Err(e) => {
                expired_offer |= matches!(e, PullError::Expired { .. });
                failures.push(describe(&e));
            }
        }
    }
    let pull_ms = millis(pull_started.elapsed());
    let mut pull_value = pull_json(pulled.as_ref(), &failures);
    match &pulled {
        Some((
            hub,
            Pulled::Installed {
                serial, previous, ..
            },
        )) => a.out.push_str(&format!(
            "pull: installed serial {serial} from {hub}{}\n",
            previous.map_or(String::new(), |p| format!(" (was {p})"))
        )),
        Some((hub, Pulled::Unchanged { serial, .. })) => a
            .out
            .push_str(&format!("pull: serial {serial} is current at {hub}\n")),
        None => {}
    }
    for f in &failures {
        a.warnings.push(format!("warning: {f}"));
    }

    // What this host enforces: the bundle in force, as verified above when
    // the pull changed nothing, else verified again from disk.
    let in_force = match (&pulled, current) {
        (Some((_, Pulled::Unchanged { .. })), Ok(Some(local))) => Ok(Some(local)),
        (None, current) => current,
        _ => state.load(CURRENT, &trusted),
    };
    let chosen = match in_force {
        Ok(Some(local)) => Ok(local),
        other => {
            let why = match other {
                Err(e) => e,
                _ => "no bundle has been installed yet".to_owned(),
            };
            match state.load(LAST_GOOD, &trusted) {
                Ok(Some(local)) => {
                    a.warnings.push(format!(
                        "warning: running last-good.bundle (serial {}): {why}",
                        local.bundle.body.header.serial
                    ));
                    Ok(local)
                }
                Ok(None) => Err(why),
                Err(e) => Err(format!("{why}; {e}")),
            }
        }
    };
    // Files the bundle stores beside itself (format 2.6) that the cache
    // lacks: from the hub that answered first, then the others.
    let blob_fetch = match &chosen {
        Ok(local) => fetch_blobs(config, &state, &local.bundle.body, pulled.as_ref()),
        Err(_) => crate::blobs::fetch::Fetched::default(),
    };
    if blob_fetch.blobs > 0 {
        a.out.push_str(&format!(
            "blobs: fetched {} ({} bytes)\n",
            blob_fetch.blobs, blob_fetch.bytes
        ));
    }
    for why in &blob_fetch.problems {
        a.warnings.push(format!("warning: {why}"));
    }
    if let Some(object) = pull_value.as_object_mut() {
        object.insert(
            "blobs".into(),
            json!({
                "fetched": blob_fetch.blobs,
                "bytes": blob_fetch.bytes,
                "failures": blob_fetch.problems,
            }),
        );
    }
    // The stamp in force: the one the pull just checked, else the one on
    // file (the hub gave no usable answer).
    let local_stamp = match &pulled {
        Some((_, p)) => Some(p.stamp().clone()),
        None => state
            .stamp()
            .and_then(|bytes| Stamp::open(&bytes, &trusted).ok()),
    };
    // Stale is about the stamp in force only (docs/operations.md,
    // "Metrics"): a hub serving an expired stamp while the one in force is
    // valid is a failed pull, warned about and counted as such.
    let stale = local_stamp.as_ref().is_some_and(|s| s.expires <= now);
    // A staged rollout in force: which serial this host is given and
    // whether it is in the rollout, for both reports.
    let rollout = local_stamp
        .as_ref()
        .and_then(|s| crate::pull::rollout::report(s, &host));
    if let (Some(r), Some(object)) = (&rollout, pull_value.as_object_mut()) {
        object.insert(crate::pull::rollout::EXTENSION.to_owned(), r.clone());
    }
    if expired_offer && pulled.is_none() && !stale {
        a.warnings.push(
            "warning: a hub serves an expired stamp (a frozen mirror?); the stamp in force is \
             still valid"
                .to_owned(),
        );
    }
    if stale {
        a.warnings.push(format!(
            "warning: STALE policy source: the stamp in force {}; the hub or a mirror may be \
             frozen, check that publishing works",
            local_stamp.as_ref().map_or_else(
                || "is missing".to_owned(),
                |s| format!("expired at {}", format_utc(s.expires))
            )
        ));
    }
    if !failures.is_empty() && pulled.is_none() {
        if let Ok(local) = &chosen {
            a.warnings.push(format!(
                "warning: no hub gave a usable answer; enforcing {} (serial {})",
                local.file, local.bundle.body.header.serial
            ));
        }
    }

    let mut previous_metrics = metrics::read_previous(&config.metrics_dir);
    if previous_metrics.is_empty() {
        // Before the textfile had its own directory it was STATE/metrics.prom.
        previous_metrics = state
            .read(METRICS, 64 * 1024)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default();
    }
    let mut m = Metrics {
        now,
        stale,
        stamp_expires: local_stamp.as_ref().map(|s| s.expires),
        last_success: metrics::previous(
            &previous_metrics,
            "converge_last_success_timestamp_seconds",
        )
        .filter(|t| *t > 0),
        pull_failures_total: metrics::previous(&previous_metrics, "converge_pull_failures_total")
            .unwrap_or(0)
            .saturating_add(u64::from(pulled.is_none())),
        ..Metrics::default()
    };

    // Neighbour watch: the reports the last run asked for, fetched now so
    // the run itself stays off the network (`crate::neighbours::fetch`).
    if let Ok(Some(identity)) = crate::identity::load(&state) {
        let fetched = crate::neighbours::fetch::fetch(&config.upload, &state, &identity);
        for why in fetched.unavailable {
            a.warnings
                .push(format!("warning: neighbour report unavailable: {why}"));
        }
    }
    // The blobs of the bundle about to run, kept by the cache's garbage
    // collection below (digests only: the body is not copied).
    let ran_blobs = chosen
        .as_ref()
        .ok()
        .map(|local| crate::blobs::named_by([&local.bundle.body]));
    let (result, report_value) = match chosen {
        Ok(local) => match converge(config, options, &local, &state) {
            Ok(r) => {
                let value = agent_report(report::json(&r), &local, pull_value, stale);
                (Ok(r), value)
            }
            Err((code, message)) => (
                Err((code, message.clone())),
                json!({
                    "format": report::FORMAT,
                    "agent": { "pull": pull_value, "stale": stale, "error": message },
                }),
            ),
        },
        Err(why) => {
            let message = format!(
                "error: no bundle to run: {why}, and no hub delivered one; install the trusted \
                 key and make a hub reachable (`policyvm pull` says why)"
            );
            (
                Err((EXIT_NO_BUNDLE, message.clone())),
                json!({
                    "format": report::FORMAT,
                    "agent": { "pull": pull_value, "stale": stale, "error": message },
                }),
            )
        }
    };
    // The cache keeps the blobs of the bundles this host may run; the
    // others go after a run that completed (an audit changes nothing).
    let succeeded = result
        .as_ref()
        .is_ok_and(|r| r.count(|o| matches!(o, Outcome::Failed(_))) == 0);
    if let (Some(keep), true, false) = (ran_blobs, succeeded, options.dry_run) {
        if let Err(e) = crate::blobs::collect_garbage(&state, &trusted, keep) {
            a.warnings
                .push(format!("warning: cannot remove unused blobs: {e}"));
        }
    }
    match &result {
        Ok(r) => {
            m.ran = true;
            m.converged = r.converged;
            m.kept = r.count(|o| matches!(o, Outcome::Kept));
            m.repaired = r.count(|o| matches!(o, Outcome::Repaired));
            m.failed = r.count(|o| matches!(o, Outcome::Failed(_)));
            m.skipped = r.count(|o| matches!(o, Outcome::Skipped(_)));
            m.changed = r.count(|o| matches!(o, Outcome::Changed));
            m.watch_changed_entries = r.watch.changed_entries;
            m.watch_history_length = r.watch.chain.length;
            m.watch_history_broken = r.watch.broken.is_some();
            m.unmanaged_entries = crate::unmanaged::counts(&r.extra);
            m.owed_notifications = r.owed.len();
            m.serial = r.serial;
            m.duration_seconds = r.duration_ms as f64 / 1000.0;
            let streams = report::human_streams(r);
            a.out.push_str(&streams.out);
            a.warnings
                .extend(streams.problems.lines().map(str::to_owned));
            a.code = if !r.converged {
                EXIT_NOT_CONVERGED
            } else if m.failed > 0 {
                EXIT_FAILED
            } else {
                m.last_success = Some(now);
                0
            };
        }
        Err((code, message)) => {
            a.code = *code;
            a.warnings.push(message.clone());
        }
    }
    let written = if options.dry_run {
        crate::state::write_atomically(
            &state.path(REPORTS),
            DRY_RUN_REPORT,
            serde_json::to_string_pretty(&report_value)
                .unwrap_or_default()
                .as_bytes(),
        )
    } else {
        write_report(&state, &report_value, since_epoch, config.keep_reports)
    };
    if let Err(e) = written {
        a.warnings
            .push(format!("warning: cannot write the report: {e}"));
    }
    let run_ms = match &result {
        Ok(r) => u64::try_from(r.duration_ms).unwrap_or(u64::MAX),
        Err(_) => 0,
    };
    let run = match &result {
        Ok(r) => Ok(r),
        Err((_, message)) => Err(message.as_str()),
    };
    let upload_started = Instant::now();
    let delivery = upload(
        config,
        &state,
        &mut a,
        run,
        since_epoch.as_secs(),
        started,
        pull_ms,
        run_ms,
        rollout,
    );
    let carried = |name: &str| metrics::previous(&previous_metrics, name).unwrap_or(0);
    // Without collectors nothing is loaded; whether keys exist is enough.
    m.enrolled = delivery
        .as_ref()
        .map_or_else(|| crate::identity::exists(&state), |d| d.1);
    let d = delivery.map(|d| d.0).unwrap_or_else(|| Delivery {
        spooled: carried("converge_report_spooled"),
        ..Delivery::default()
    });
    m.reports_sent_total = carried("converge_report_uploads_total").saturating_add(d.sent);
    m.reports_refused_total = carried("converge_report_refused_total").saturating_add(d.refused);
    m.reports_dropped_total =
        carried("converge_report_spool_dropped_total").saturating_add(d.dropped);
    m.reports_spooled = d.spooled;
    m.upload_seconds = upload_started.elapsed().as_secs_f64();
    a.warnings.extend(d.warnings);
    // The textfile describes the host's real runs: an audit leaves it.
    if options.dry_run {
        return a;
    }
    if let Err(e) = metrics::write(&config.metrics_dir, &state, &m.render()) {
        a.warnings.push(format!(
            "warning: cannot write `{}`: {e}",
            config.metrics_dir.join(metrics::TEXTFILE).display()
        ));
    }
    a
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Signs this cycle's report and delivers it ([`crate::upload`]). `None`
/// when nothing was attempted (no collector configured); otherwise what
/// happened and whether the host is enrolled. Every problem is a warning:
/// the run and its exit code are decided already.
#[allow(clippy::too_many_arguments)]
fn upload(
    config: &Config,
    state: &StateDir,
    a: &mut AgentRun,
    run: Result<&RunReport, &str>,
    started_at: u64,
    started: Instant,
    pull_ms: u64,
    run_ms: u64,
    rollout: Option<Value>,
) -> Option<(Delivery, bool)> {
    if config.upload.collectors.is_empty() {
        return None;
    }
    let identity = match crate::identity::load(state) {
        Ok(Some(identity)) => identity,
        Ok(None) => {
            a.warnings.push(
                "warning: not enrolled: run `policyvm enroll` (and add the entry it prints to \
                 the inventory); no report was uploaded"
                    .to_owned(),
            );
            return Some((Delivery::default(), false));
        }
        Err(e) => {
            a.warnings
                .push(format!("warning: no report was uploaded: {e}"));
            return Some((Delivery::default(), false));
        }
    };
    let numbers = crate::upload::sequence::next(state)
        .and_then(|seq| crate::upload::sequence::run_id().map(|id| (seq, id)));
    let (sequence, run_id) = match numbers {
        Ok(n) => n,
        Err(e) => {
            a.warnings
                .push(format!("warning: no report was uploaded: {e}"));
            return Some((Delivery::default(), true));
        }
    };
    let gathered;
    let facts = match run {
        Ok(r) => &r.facts,
        Err(_) => {
            gathered = crate::facts::Facts::gather(&config.root);
            &gathered
        }
    };
    let finished = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(started_at, |d| d.as_secs());
    let mut report = crate::upload::report::build(&Cycle {
        host: &identity.name,
        run_id: run_id.clone(),
        sequence,
        started: started_at,
        finished,
        timings: Timings {
            pull_ms,
            run_ms,
            total_ms: millis(started.elapsed()),
        },
        run,
        facts,
    });
    if let Some(r) = rollout {
        report
            .extensions
            .insert(crate::pull::rollout::EXTENSION.to_owned(), r);
    }
    let signed = SignedReport::sign(&report, &identity.report_key);
    let body = serde_json::to_vec(&signed).unwrap_or_default();
    Some((
        deliver(&config.upload, state, sequence, &run_id, &body),
        true,
    ))
}

impl AgentRun {
    fn fail(mut self, code: u8, message: String) -> AgentRun {
        self.code = code;
        self.warnings.push(message);
        self
    }
}

/// A pull error with its class first, so logs can be grepped by class.
fn describe(e: &PullError) -> String {
    let class = match e {
        PullError::Fetch(_) => "hub unreachable",
        PullError::State(_) => "state",
        PullError::Expired { .. } => "stale",
        _ => "refused",
    };
    format!("{class}: {e}")
}

/// Fetches the blobs `body` names that the cache lacks
/// ([`crate::blobs::fetch`]), from `pulled`'s hub first, then every other
/// hub in order.
fn fetch_blobs(
    config: &Config,
    state: &StateDir,
    body: &crate::bundle::format::Body,
    pulled: Option<&(String, Pulled)>,
) -> crate::blobs::fetch::Fetched {
    if body.blobs().next().is_none() {
        return crate::blobs::fetch::Fetched::default();
    }
    let first = pulled.map(|(hub, _)| hub.as_str());
    let order = first.into_iter().chain(
        config
            .hubs
            .iter()
            .map(String::as_str)
            .filter(|h| Some(*h) != first),
    );
    let sources: Vec<HttpSource> = order
        .filter_map(|hub| HttpSource::new(hub, &config.http).ok())
        .collect();
    let sources: Vec<&dyn crate::pull::fetch::Source> = sources
        .iter()
        .map(|s| s as &dyn crate::pull::fetch::Source)
        .collect();
    crate::blobs::fetch::fetch_missing(&crate::blobs::cache_dir(state), body, &sources)
}

/// Converges the root (the caller holds the state directory's lock, which
/// is the run lock: [`crate::run::lock`]).
fn converge(
    config: &Config,
    options: &AgentOptions,
    local: &Local,
    state: &StateDir,
) -> Result<RunReport, (u8, String)> {
    let opts = RunOptions {
        root: config.root.clone(),
        dry_run: options.dry_run,
        defines: options.defines.clone(),
        state: Some(state.clone()),
        blobs: vec![crate::blobs::cache_dir(state)],
    };
    run(&local.bundle, &opts).map_err(|e| (EXIT_CONFIG, format!("error: {e}")))
}

fn pull_json(pulled: Option<&(String, Pulled)>, failures: &[String]) -> Value {
    let (outcome, hub, stamp) = match pulled {
        Some((hub, p @ Pulled::Installed { stamp, .. })) => {
            ("installed", Some(hub), Some((stamp, p.serial())))
        }
        Some((hub, p @ Pulled::Unchanged { stamp, .. })) => {
            ("unchanged", Some(hub), Some((stamp, p.serial())))
        }
        None => ("failed", None, None),
    };
    json!({
        "outcome": outcome,
        "hub": hub,
        "serial": stamp.map(|(_, serial)| serial),
        "stamp_expires": stamp.map(|(s, _)| format_utc(s.expires)),
        "failures": failures,
    })
}

fn agent_report(mut run: Value, local: &Local, pull: Value, stale: bool) -> Value {
    if let Some(object) = run.as_object_mut() {
        object.insert(
            "agent".into(),
            json!({ "pull": pull, "stale": stale, "bundle_file": local.file }),
        );
    }
    run
}

/// `reports/last.json`, and a copy named after the run's start time
/// (`20261122T014559.123Z.json`: names sort by time); only the newest
/// `keep` copies stay.
fn write_report(
    state: &StateDir,
    value: &Value,
    started: Duration,
    keep: usize,
) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    let dir = state.path(REPORTS);
    let seconds: String = format_utc(started.as_secs())
        .chars()
        .filter(|c| *c != '-' && *c != ':' && *c != 'Z')
        .collect();
    let name = format!("{seconds}.{:03}Z.json", started.subsec_millis());
    if keep > 0 {
        crate::state::write_atomically(&dir, &name, text.as_bytes())?;
    }
    crate::state::write_atomically(&dir, "last.json", text.as_bytes())?;
    prune(&dir, keep)
}

fn prune(dir: &Path, keep: usize) -> std::io::Result<()> {
    let mut dated: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("Z.json"))
        .collect();
    dated.sort();
    let excess = dated.len().saturating_sub(keep);
    for name in dated.iter().take(excess) {
        std::fs::remove_file(dir.join(name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_splay_is_fixed_per_host_within_the_maximum_and_spreads_a_fleet() {
        let max = Duration::from_secs(300);
        assert_eq!(splay("web01", "site", max), splay("web01", "site", max));
        assert_eq!(splay("web01", "site", Duration::ZERO), Duration::ZERO);
        let mut minutes = [0u32; 5];
        for i in 0..1000 {
            let s = splay(&format!("web{i:03}"), "site", max);
            assert!(s <= max);
            if let Some(m) = minutes.get_mut((s.as_secs() / 60).min(4) as usize) {
                *m += 1;
            }
        }
        // Roughly uniform: each minute gets 200 +/- 60 of the 1000 hosts.
        assert!(
            minutes.iter().all(|m| (140..=260).contains(m)),
            "{minutes:?}"
        );
    }
}
