//! Neighbour watch (LANGUAGE.md section 15; docs/fleet.md "Neighbour
//! watch"): a `neighbours` promise checks that each named host's watch
//! history still extends the head this host saw last, from that host's
//! own signed report, so a rewrite is seen here even if the collector
//! that relayed the report hides it.
//!
//! The network stays out of the run. Before each run the agent fetches the
//! latest signed report of every host the previous run asked for
//! ([`fetch`]) into the state directory:
//!
//! ```text
//! neighbours/wanted         the hosts the last run watched, one a line
//! neighbours/NAME.report    NAME's latest report, as its host signed it
//! neighbours/seen/NAME.json the last consistent head of NAME's history
//! ```
//!
//! The operator ([`check`]) opens each stored report with the neighbour's
//! report keys (carried in the bundle, from the inventory: never from the
//! collector), reads its `watch` extension and runs the one cross-check
//! the collector runs too ([`converge_format::crosscheck`]). The seen head
//! moves only when the new one extends it, and is written atomically.

pub mod fetch;

use std::collections::BTreeMap;

use converge_format::chain::Head;
use converge_format::crosscheck::cross_check;
use converge_format::inventory::{is_host_name, parse_report_key};
use converge_format::report::{SignedReport, MAX_ENVELOPE_BYTES};
use ed25519_dalek::VerifyingKey;
use serde::{Deserialize, Serialize};

use crate::instance::Instance;
use crate::outcome::{Applied, Outcome};
use crate::state::{StateDir, SubDir};

/// The directory of the state directory neighbour watch keeps its files in.
pub const DIR: &str = "neighbours";
/// The hosts the last run watched (what the agent fetches next).
pub const WANTED: &str = "wanted";
/// The largest `seen` file read.
const MAX_SEEN_BYTES: usize = 4096;
/// The key of the run report and of the uploaded report's `extensions`.
pub const EXTENSION: &str = "neighbours";

/// What one run found about one neighbour.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Entry {
    /// The `neighbours` promise's index in the bundle.
    #[serde(skip)]
    pub promise: usize,
    pub host: String,
    /// `unavailable`, `no history`, `first`, `same`, `extends`,
    /// `rewritten`, `backwards`, `unverifiable`, `malformed`, `missing`,
    /// `bad signature`, `older report`, `unknown host`.
    pub verdict: String,
    /// Whether this is an alarm (sets `on_rewrite`, fails the promise).
    pub alarm: bool,
    pub detail: Option<String>,
    /// The head seen before this run.
    pub seen: Option<Head>,
    /// The head the neighbour's report shows now.
    pub new: Option<Head>,
}

/// The last consistent head of a neighbour, and the sequence of the report
/// that showed it (a report older than that is a replay).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    length: u64,
    head: String,
    sequence: u64,
}

impl Seen {
    fn head(&self) -> Head {
        Head {
            length: self.length,
            head: self.head.clone(),
        }
    }
}

/// The report keys of the inventory's hosts, as the compiler wrote them
/// into `report_keys`: `NAME KEY [KEY...]` per host.
fn keys(inst: &Instance) -> BTreeMap<&str, Vec<VerifyingKey>> {
    inst.list(converge_format::schema::NEIGHBOUR_KEYS_ATTR)
        .unwrap_or_default()
        .iter()
        .filter_map(|line| {
            let mut words = line.split(' ');
            let name = words.next()?;
            Some((
                name,
                words.filter_map(|k| parse_report_key(k).ok()).collect(),
            ))
        })
        .collect()
}

/// The `neighbours` operator: checks each host of `hosts`, records what it
/// found in `entries` (once per promise and run: a later pass reuses the
/// first pass's findings), and fails when any is an alarm.
pub fn check(
    state: Option<&StateDir>,
    dry_run: bool,
    inst: &Instance,
    entries: &mut Vec<Entry>,
) -> Applied {
    if !entries.iter().any(|e| e.promise == inst.index) {
        match state {
            Some(state) => match check_all(state, dry_run, inst) {
                Ok(found) => entries.extend(found),
                Err(e) => return Applied::failed(e),
            },
            None => {
                return Applied::failed(
                    "neighbour watch keeps what it saw in the state directory; this run has none",
                )
            }
        }
        if let (Some(state), false) = (state, dry_run) {
            if let Err(e) = write_wanted(state, entries) {
                return Applied::failed(e);
            }
        }
    }
    let alarms: Vec<String> = entries
        .iter()
        .filter(|e| e.promise == inst.index && e.alarm)
        .map(|e| match &e.detail {
            Some(d) => format!("{}: {} ({d})", e.host, e.verdict),
            None => format!("{}: {}", e.host, e.verdict),
        })
        .collect();
    if alarms.is_empty() {
        Applied::kept()
    } else {
        Applied {
            outcome: Outcome::Failed(format!(
                "a neighbour's watch history does not extend the head seen here: {}",
                alarms.join("; ")
            )),
            changes: Vec::new(),
            output: None,
        }
    }
}

/// Whether promise `index` raised an alarm this run (its `on_rewrite`).
pub fn alarmed(entries: &[Entry], index: usize) -> bool {
    entries.iter().any(|e| e.promise == index && e.alarm)
}

fn check_all(state: &StateDir, dry_run: bool, inst: &Instance) -> Result<Vec<Entry>, String> {
    let dir = state
        .subdir(DIR, 0o700)
        .map_err(|e| format!("`{}`: {e}", state.path(DIR).display()))?;
    let seen_dir = dir
        .subdir("seen", 0o700)
        .map_err(|e| format!("`{}`: {e}", dir.path("seen").display()))?;
    let keys = keys(inst);
    let mut out = Vec::new();
    for host in inst.list("hosts").unwrap_or_default() {
        let entry = match keys.get(host.as_str()) {
            Some(keys) if is_host_name(host) => one(&dir, &seen_dir, dry_run, host, keys),
            _ => Entry::alarm(
                host,
                "unknown host",
                Some("not in the inventory the bundle was built with".to_owned()),
                None,
            ),
        };
        out.push(Entry {
            promise: inst.index,
            ..entry
        });
    }
    Ok(out)
}

impl Entry {
    fn alarm(host: &str, verdict: &str, detail: Option<String>, seen: Option<Head>) -> Entry {
        Entry {
            promise: 0,
            host: host.to_owned(),
            verdict: verdict.to_owned(),
            alarm: true,
            detail,
            seen,
            new: None,
        }
    }
}

/// Checks one neighbour's stored report against the head seen last.
fn one(dir: &SubDir, seen_dir: &SubDir, dry_run: bool, host: &str, keys: &[VerifyingKey]) -> Entry {
    let seen_file = format!("{host}.json");
    let seen: Option<Seen> = match seen_dir.read(&seen_file, MAX_SEEN_BYTES) {
        Ok(Some(bytes)) => match serde_json::from_slice(&bytes) {
            Ok(seen) => Some(seen),
            Err(e) => {
                return Entry::alarm(
                    host,
                    "malformed",
                    Some(format!(
                        "the seen head `{}` is unreadable: {e}",
                        seen_dir.path(&seen_file).display()
                    )),
                    None,
                )
            }
        },
        Ok(None) => None,
        Err(e) => {
            return Entry::alarm(host, "malformed", Some(e.to_string()), None);
        }
    };
    let seen_head = seen.as_ref().map(Seen::head);
    let bytes = match dir.read(&format!("{host}.report"), MAX_ENVELOPE_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => {
            return Entry {
                promise: 0,
                host: host.to_owned(),
                verdict: "unavailable".to_owned(),
                alarm: false,
                detail: Some("no report of this host was fetched yet".to_owned()),
                seen: seen_head,
                new: None,
            }
        }
        Err(e) => return Entry::alarm(host, "bad report", Some(e.to_string()), seen_head),
    };
    let report = match SignedReport::parse(&bytes).and_then(|envelope| {
        if envelope.host != host {
            return Err(converge_format::report::ReportError::HostMismatch {
                envelope: envelope.host,
                report: host.to_owned(),
            });
        }
        open(&envelope, keys)
    }) {
        Ok(report) => report,
        Err(e) => {
            let verdict = match e {
                converge_format::report::ReportError::BadSignature => "bad signature",
                _ => "bad report",
            };
            return Entry::alarm(host, verdict, Some(e.to_string()), seen_head);
        }
    };
    if let Some(seen) = &seen {
        if report.sequence < seen.sequence {
            return Entry::alarm(
                host,
                "older report",
                Some(format!(
                    "run {} is older than run {} seen before: a replayed report",
                    report.sequence, seen.sequence
                )),
                seen_head,
            );
        }
    }
    let result = cross_check(seen_head.as_ref(), &report.extensions);
    if let (Some(next), false) = (result.next_seen(), dry_run) {
        let record = Seen {
            length: next.length,
            head: next.head.clone(),
            sequence: report.sequence,
        };
        let written = serde_json::to_vec(&record)
            .map_err(|e| e.to_string())
            .and_then(|bytes| {
                seen_dir
                    .write(&seen_file, &bytes, 0o600)
                    .map_err(|e| e.to_string())
            });
        if let Err(e) = written {
            return Entry::alarm(
                host,
                "unavailable",
                Some(format!("cannot keep the seen head: {e}")),
                seen_head,
            );
        }
    }
    Entry {
        promise: 0,
        host: host.to_owned(),
        verdict: result.word().to_owned(),
        alarm: result.is_alarm(),
        detail: result.detail(),
        seen: seen_head,
        new: result.shown().cloned(),
    }
}

/// Opens `envelope` with the first of `keys` whose signature holds.
fn open(
    envelope: &SignedReport,
    keys: &[VerifyingKey],
) -> Result<converge_format::report::Report, converge_format::report::ReportError> {
    let mut last = converge_format::report::ReportError::BadSignature;
    for key in keys {
        match envelope.open(key) {
            Ok(report) => return Ok(report),
            Err(converge_format::report::ReportError::BadSignature) => {}
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Records which hosts this run watched, for the agent's next fetch.
fn write_wanted(state: &StateDir, entries: &[Entry]) -> Result<(), String> {
    let mut hosts: Vec<&str> = entries
        .iter()
        .map(|e| e.host.as_str())
        .filter(|h| is_host_name(h))
        .collect();
    hosts.sort_unstable();
    hosts.dedup();
    let mut text = hosts.join("\n");
    text.push('\n');
    state
        .subdir(DIR, 0o700)
        .and_then(|dir| dir.write(WANTED, text.as_bytes(), 0o600))
        .map_err(|e| format!("`{}`: {e}", state.path(DIR).display()))
}

/// The entries as JSON, for the run report and the uploaded report.
pub fn json(entries: &[Entry]) -> serde_json::Value {
    serde_json::to_value(entries).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests;
