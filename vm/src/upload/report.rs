//! From an agent cycle to the uploaded report (`converge_format::report`,
//! `converge-report/1`): only what a fleet view needs (every promise not
//! kept, with its source location; owed notifications; `sys` facts, probe
//! facts (each value or why it is unknown) and classes; the bundle;
//! timings), cut to [`MAX_REPORT_BYTES`].

use std::collections::BTreeMap;

use converge_format::report::{
    BundleRef, Change, Facts as ReportFacts, OwedNotification, ProbeFact, PromiseResult, Report,
    Status, Summary, Timings, MAX_REPORT_BYTES, REPORT_FORMAT,
};
use serde_json::Value;

use crate::facts::Facts;
use crate::run::operators::Outcome;
use crate::run::RunReport;
use crate::stamp::time::format_utc;

/// What the agent knows of one cycle, besides the run itself.
#[derive(Debug)]
pub struct Cycle<'a> {
    /// The inventory name (`identity/name`).
    pub host: &'a str,
    pub run_id: String,
    pub sequence: u64,
    /// UNIX seconds.
    pub started: u64,
    pub finished: u64,
    pub timings: Timings,
    /// The run, or why nothing ran (the report's `status = refused`).
    pub run: Result<&'a RunReport, &'a str>,
    /// The host's facts when nothing ran (a run carries its own).
    pub facts: &'a Facts,
}

/// The status a run comes to: a failed promise or no fixed point is
/// `failed`, any repair `repaired`, else `kept`.
pub fn status(r: &RunReport) -> Status {
    let any = |f: fn(&Outcome) -> bool| r.promises.iter().any(|p| f(p.outcome()));
    if !r.converged || any(|o| matches!(o, Outcome::Failed(_))) {
        Status::Failed
    } else if any(|o| matches!(o, Outcome::Repaired)) {
        Status::Repaired
    } else {
        Status::Kept
    }
}

/// Builds the report of `cycle`, cut to [`MAX_REPORT_BYTES`].
pub fn build(cycle: &Cycle<'_>) -> Report {
    let mut report = Report {
        format: REPORT_FORMAT.to_owned(),
        host: cycle.host.to_owned(),
        run_id: cycle.run_id.clone(),
        sequence: cycle.sequence,
        started_at: format_utc(cycle.started),
        finished_at: format_utc(cycle.finished),
        status: Status::Refused,
        bundle: None,
        summary: Summary::default(),
        promises: Vec::new(),
        owed_notifications: Vec::new(),
        facts: ReportFacts {
            sys: sys_facts(cycle.facts),
            ..ReportFacts::default()
        },
        timings: cycle.timings.clone(),
        error: None,
        truncated: false,
        extensions: BTreeMap::new(),
    };
    match cycle.run {
        Err(why) => report.error = Some(why.to_owned()),
        Ok(r) => {
            report.status = status(r);
            report.bundle = Some(BundleRef {
                name: r.bundle_name.clone(),
                serial: r.serial,
                digest: r.digest.clone(),
            });
            report.summary = summary(r);
            if r.dry_run {
                report.extensions.insert(
                    converge_format::report::DRY_RUN_EXTENSION.to_owned(),
                    Value::Bool(true),
                );
            }
            if !r.neighbours.is_empty() {
                report.extensions.insert(
                    crate::neighbours::EXTENSION.to_owned(),
                    crate::neighbours::json(&r.neighbours),
                );
            }
            report.extensions.insert(
                converge_format::chain::EXTENSION.to_owned(),
                watch_extension(r),
            );
            if !r.extra.is_empty()
                || r.promises
                    .iter()
                    .any(|p| p.kind() == crate::unmanaged::KIND)
            {
                report.extensions.insert(
                    converge_format::report::EXTRA_EXTENSION.to_owned(),
                    extra_extension(r),
                );
            }
            report.promises = promises(r);
            report.owed_notifications = r
                .owed
                .iter()
                .map(|d| OwedNotification {
                    kind: d.kind.clone(),
                    promiser: d.promiser.clone(),
                    notified_by: d.by.clone(),
                })
                .collect();
            report.facts.sys = sys_facts(&r.facts);
            report.facts.classes = r.classes.clone();
            report.facts.probes = r
                .probes
                .outcomes()
                .iter()
                .map(|o| {
                    let fact = match &o.result {
                        Ok(v) => ProbeFact {
                            value: Some(v.to_json()),
                            error: None,
                        },
                        Err(e) => ProbeFact {
                            value: None,
                            error: Some(e.clone()),
                        },
                    };
                    (o.name.clone(), fact)
                })
                .collect();
            if !r.converged {
                report.error = Some(format!(
                    "not converged after {} passes{}",
                    r.passes,
                    if r.oscillating.is_empty() {
                        String::new()
                    } else {
                        format!("; oscillating: {}", r.oscillating.join(", "))
                    }
                ));
            }
        }
    }
    cut(&mut report, MAX_REPORT_BYTES);
    report
}

/// The `watch` extension: the history's [`ChainReport`] (what the
/// collector and neighbour hosts check with `format::chain::check`) and
/// this run's changes, their list bounded by the run
/// (`crate::watch::bounds::MAX_REPORTED_CHANGES`) and cut first when the
/// report is too large ([`cut`]).
///
/// [`ChainReport`]: converge_format::chain::ChainReport
pub fn watch_extension(r: &RunReport) -> Value {
    let mut value = serde_json::to_value(&r.watch.chain).unwrap_or(Value::Null);
    if let Value::Object(map) = &mut value {
        map.insert(
            "changed_entries".into(),
            Value::from(r.watch.changed_entries),
        );
        map.insert(
            "changes".into(),
            serde_json::to_value(&r.watch.changes).unwrap_or(Value::Null),
        );
        map.insert(
            "broken".into(),
            r.watch.broken.clone().map_or(Value::Null, Value::from),
        );
    }
    value
}

fn summary(r: &RunReport) -> Summary {
    let count =
        |f: fn(&Outcome) -> bool| r.promises.iter().filter(|p| f(p.outcome())).count() as u64;
    Summary {
        kept: count(|o| matches!(o, Outcome::Kept)),
        repaired: count(|o| matches!(o, Outcome::Repaired)),
        failed: count(|o| matches!(o, Outcome::Failed(_))),
        skipped: count(|o| matches!(o, Outcome::Skipped(_))),
        unmanaged: r.unmanaged.len() as u64,
        owed_notifications: r.owed.len() as u64,
        passes: r.passes,
        converged: r.converged,
    }
}

fn promises(r: &RunReport) -> Vec<PromiseResult> {
    r.promises
        .iter()
        .filter_map(|p| {
            let (outcome, error) = match p.outcome() {
                Outcome::Kept => return None,
                Outcome::Repaired => ("repaired", None),
                Outcome::Failed(e) => ("failed", Some(e.clone())),
                Outcome::Skipped(e) => ("skipped", Some(e.clone())),
                Outcome::Changed => ("changed", None),
            };
            Some(PromiseResult {
                kind: p.kind().to_owned(),
                promiser: p.promiser.to_string(),
                outcome: outcome.to_owned(),
                source: p.source.to_string(),
                error,
                changes: p
                    .changes()
                    .iter()
                    .map(|c| Change {
                        what: c.what.clone(),
                        before: c.before.clone(),
                        after: c.after.clone(),
                        diff: c.diff.clone(),
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The `sys.*` facts by name without the prefix.
fn sys_facts(f: &Facts) -> BTreeMap<String, Value> {
    let mut sys = BTreeMap::new();
    for (name, value) in [
        ("hostname", Value::from(f.hostname.clone())),
        ("fqdn", Value::from(f.fqdn.clone())),
        ("os", Value::from(f.os.clone())),
        ("os_family", Value::from(f.os_family.clone())),
        ("os_release", Value::from(f.os_release.clone())),
        ("arch", Value::from(f.arch.clone())),
        ("ipv4", Value::from(f.ipv4.get().clone())),
        ("cpus", Value::from(*f.cpus.get())),
        ("memory_mb", Value::from(*f.memory_mb.get())),
    ] {
        sys.insert(name.to_owned(), value);
    }
    sys
}

/// The `extra` extension (two-way verification, Bcfg2's "extra entries"):
/// the count per type, and each entry (type, escaped name, what became
/// of it, the `unmanaged` promise), the entries cut first when the report
/// is too large ([`cut`]).
pub fn extra_extension(r: &RunReport) -> Value {
    let mut counts = serde_json::Map::new();
    for e in &r.extra {
        let n = counts.get(&e.kind).and_then(Value::as_u64).unwrap_or(0);
        counts.insert(e.kind.clone(), Value::from(n.saturating_add(1)));
    }
    serde_json::json!({
        "counts": counts,
        "entries": serde_json::to_value(&r.extra).unwrap_or(Value::Null),
    })
}

/// Keeps `report` within `limit` bytes of JSON: first every diff goes,
/// then promises from the end; the summary still counts everything and
/// `truncated` says something was cut.
pub fn cut(report: &mut Report, limit: usize) {
    let mut size = report.to_bytes().len();
    if size <= limit {
        return;
    }
    report.truncated = true;
    // The watch changes go first (their count stays; the chain must stay
    // whole: it is what others check).
    if let Some(Value::Object(watch)) = report.extensions.get_mut(converge_format::chain::EXTENSION)
    {
        watch.insert("changes".into(), Value::Array(Vec::new()));
    }
    // So do the extra entries (their counts stay).
    if let Some(Value::Object(extra)) = report
        .extensions
        .get_mut(converge_format::report::EXTRA_EXTENSION)
    {
        extra.insert("entries".into(), Value::Array(Vec::new()));
    }
    for change in report
        .promises
        .iter_mut()
        .flat_map(|p| p.changes.iter_mut())
    {
        change.diff = None;
    }
    size = report.to_bytes().len();
    // Each promise's share of the JSON (with its comma), measured once.
    let mut shares: Vec<usize> = report
        .promises
        .iter()
        .map(|p| serde_json::to_vec(p).map_or(0, |b| b.len().saturating_add(1)))
        .collect();
    while size > limit {
        let Some(share) = shares.pop() else { break };
        report.promises.pop();
        size = size.saturating_sub(share);
    }
    // The estimate is exact but for a comma; make sure.
    while report.to_bytes().len() > limit && report.promises.pop().is_some() {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report_with(promises: usize, diff: usize) -> Report {
        let root = tempfile::tempdir().unwrap();
        let mut r = build(&Cycle {
            host: "h",
            run_id: "0".repeat(32),
            sequence: 1,
            started: 0,
            finished: 1,
            timings: Timings::default(),
            run: Err("nothing ran"),
            facts: &Facts::gather(root.path()),
        });
        r.promises = (0..promises)
            .map(|i| PromiseResult {
                kind: "file".to_owned(),
                promiser: format!("/etc/f{i}"),
                outcome: "repaired".to_owned(),
                source: "site.policy:1:1".to_owned(),
                error: None,
                changes: vec![Change {
                    what: "content".to_owned(),
                    before: String::new(),
                    after: "x".to_owned(),
                    diff: Some("d".repeat(diff)),
                }],
            })
            .collect();
        r
    }

    #[test]
    fn diffs_go_first_then_promises_from_the_end() {
        let mut r = report_with(10, 1000);
        let full = r.to_bytes().len();
        cut(&mut r, full);
        assert!(!r.truncated, "a report at the limit is not cut");

        let mut r = report_with(10, 1000);
        cut(&mut r, full - 100);
        assert!(r.truncated);
        assert_eq!(r.promises.len(), 10, "dropping diffs was enough");
        assert!(r
            .promises
            .iter()
            .all(|p| p.changes.iter().all(|c| c.diff.is_none())));

        let mut r = report_with(10, 1000);
        let without_diffs = {
            let mut t = r.clone();
            cut(&mut t, full - 100);
            t.to_bytes().len()
        };
        cut(&mut r, without_diffs - 50);
        assert!(r.truncated);
        assert_eq!(r.promises.len(), 9);
        assert_eq!(
            r.promises.last().map(|p| p.promiser.as_str()),
            Some("/etc/f8")
        );
        assert!(r.to_bytes().len() <= without_diffs - 50);
    }

    #[test]
    fn nothing_ran_is_refused_with_the_reason() {
        let r = report_with(0, 0);
        assert_eq!(r.status, Status::Refused);
        assert_eq!(r.error.as_deref(), Some("nothing ran"));
        assert!(r.bundle.is_none());
        assert_eq!(r.started_at, "1970-01-01T00:00:00Z");
    }

    #[test]
    #[allow(clippy::indexing_slicing)]
    fn the_watch_changes_go_first_and_the_chain_stays_whole() {
        let mut r = report_with(3, 10);
        let chain = converge_format::chain::ChainReport {
            length: 1,
            head: "sha256:".to_owned() + &"ab".repeat(32),
            tail: vec!["sha256:".to_owned() + &"cd".repeat(32)],
        };
        let mut ext = serde_json::to_value(&chain).unwrap();
        let changes: Vec<Value> = (0..200)
            .map(|i| serde_json::json!({ "path": format!("/srv/f{i}"), "what": "added", "before": "", "after": "x".repeat(100) }))
            .collect();
        ext["changes"] = Value::Array(changes);
        r.extensions
            .insert(converge_format::chain::EXTENSION.to_owned(), ext);
        let limit = r.to_bytes().len() - 1000;
        cut(&mut r, limit);
        assert!(r.truncated);
        let ext = &r.extensions[converge_format::chain::EXTENSION];
        assert_eq!(ext["changes"], Value::Array(Vec::new()));
        let kept: converge_format::chain::ChainReport =
            serde_json::from_value(ext.clone()).unwrap();
        assert_eq!(kept, chain);
        assert_eq!(
            r.promises.len(),
            3,
            "the promises stay when the changes were enough"
        );
    }

    #[test]
    #[allow(clippy::indexing_slicing)]
    fn the_extra_entries_go_first_and_their_counts_stay() {
        let mut r = report_with(3, 10);
        let entries: Vec<Value> = (0..300)
            .map(|i| serde_json::json!({ "type": "package", "name": format!("pkg-{i}-{}", "x".repeat(40)), "action": "reported", "source": "site.policy:3" }))
            .collect();
        r.extensions.insert(
            converge_format::report::EXTRA_EXTENSION.to_owned(),
            serde_json::json!({ "counts": { "package": 300 }, "entries": entries }),
        );
        let limit = r.to_bytes().len() - 1000;
        cut(&mut r, limit);
        assert!(r.truncated);
        let ext = &r.extensions[converge_format::report::EXTRA_EXTENSION];
        assert_eq!(ext["entries"], Value::Array(Vec::new()));
        assert_eq!(ext["counts"]["package"], 300);
        assert_eq!(r.promises.len(), 3);
    }
}
