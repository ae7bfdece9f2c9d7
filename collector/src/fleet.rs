//! The fleet as people ask about it: the store's rows merged with the
//! inventory (hosts that never reported, groups, static facts) and the
//! clock (age, silence). The JSON API serializes these views as they are;
//! the dashboard renders the same views, so both always agree.
//!
//! Every view carries `format: "converge-fleet/1"`; a field is only ever
//! added to this version, never renamed or removed.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::inventory::Hosts;
use crate::store::{DailySummary, HostRow, PromiseRow, ReportRow, Store, StoreError};

/// The `format` of every fleet view.
pub const FLEET_FORMAT: &str = "converge-fleet/1";

/// The status of an inventory host with no stored report.
pub const NEVER: &str = "never";

/// Every status, in the order views list them.
pub const STATUSES: [&str; 5] = ["kept", "repaired", "failed", "refused", NEVER];

/// "Now" and what counts as silent.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Unix seconds.
    pub now: i64,
    /// The agents' run interval in seconds (`--interval`).
    pub interval: i64,
    /// A host is silent when its last report is older than this many
    /// intervals (default 3; `/silent?intervals=N`).
    pub intervals: i64,
}

impl Clock {
    pub fn silent_after(&self) -> i64 {
        self.interval.saturating_mul(self.intervals)
    }
}

/// Unix seconds as RFC 3339 (UTC).
pub fn rfc3339(seconds: i64) -> String {
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// One host, as listed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HostView {
    pub name: String,
    /// `kept`, `repaired`, `failed`, `refused`, or `never`.
    pub status: String,
    pub last_seen: Option<String>,
    pub age_seconds: Option<i64>,
    pub sequence: Option<i64>,
    pub started_at: Option<String>,
    pub bundle_name: Option<String>,
    pub bundle_serial: Option<i64>,
    pub kept: i64,
    pub repaired: i64,
    pub failed: i64,
    pub skipped: i64,
    pub silent: bool,
    /// False for a host that reported but has since left the inventory.
    pub in_inventory: bool,
    pub revoked: bool,
    pub groups: Vec<String>,
}

fn host_view(hosts: &Hosts, name: &str, row: Option<&HostRow>, clock: &Clock) -> HostView {
    let entry = hosts.host(name);
    let age = row.map(|r| clock.now.saturating_sub(r.last_seen).max(0));
    HostView {
        name: name.to_owned(),
        status: row.map_or(NEVER.to_owned(), |r| r.status.clone()),
        last_seen: row.map(|r| rfc3339(r.last_seen)),
        age_seconds: age,
        sequence: row.map(|r| r.sequence),
        started_at: row.map(|r| r.started_at.clone()),
        bundle_name: row.and_then(|r| r.bundle_name.clone()),
        bundle_serial: row.and_then(|r| r.bundle_serial),
        kept: row.map_or(0, |r| r.kept),
        repaired: row.map_or(0, |r| r.repaired),
        failed: row.map_or(0, |r| r.failed),
        skipped: row.map_or(0, |r| r.skipped),
        silent: age.is_none_or(|a| a > clock.silent_after()),
        in_inventory: entry.is_some(),
        revoked: entry.is_some_and(|h| h.revoked),
        groups: entry
            .map(|h| h.groups.iter().map(|g| g.get_ref().clone()).collect())
            .unwrap_or_default(),
    }
}

/// Every inventory host and every host with stored reports, by name.
pub async fn hosts(
    store: &Store,
    inventory: &Hosts,
    clock: &Clock,
) -> Result<Vec<HostView>, StoreError> {
    let rows = store.hosts().await?;
    Ok(merge_hosts(inventory, &rows, clock))
}

fn merge_hosts(inventory: &Hosts, rows: &[HostRow], clock: &Clock) -> Vec<HostView> {
    let by_name: BTreeMap<&str, &HostRow> = rows.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut names: Vec<&str> = inventory
        .iter()
        .map(|h| h.name.get_ref().as_str())
        .collect();
    names.extend(by_name.keys().copied());
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| host_view(inventory, name, by_name.get(name).copied(), clock))
        .collect()
}

#[derive(Clone, Debug, Serialize)]
pub struct HostList {
    pub format: &'static str,
    pub generated_at: String,
    pub silent_after_seconds: i64,
    pub hosts: Vec<HostView>,
}

pub fn host_list(hosts: Vec<HostView>, clock: &Clock) -> HostList {
    HostList {
        format: FLEET_FORMAT,
        generated_at: rfc3339(clock.now),
        silent_after_seconds: clock.silent_after(),
        hosts,
    }
}

/// `GET /api/v1/status`.
#[derive(Clone, Debug, Serialize)]
pub struct StatusView {
    pub format: &'static str,
    pub generated_at: String,
    pub hosts: usize,
    /// Every status, zero included.
    pub by_status: BTreeMap<String, u64>,
    pub silent: usize,
    pub reports: i64,
    pub interval_seconds: i64,
    pub silent_after_seconds: i64,
}

pub async fn status(
    store: &Store,
    inventory: &Hosts,
    clock: &Clock,
) -> Result<StatusView, StoreError> {
    let hosts = hosts(store, inventory, clock).await?;
    let reports = store.report_count().await?;
    Ok(status_of(&hosts, reports, clock))
}

/// The status view of `hosts` (what [`status`] answers), for a caller that
/// has the host list already (the dashboard's overview shows both).
pub fn status_of(hosts: &[HostView], reports: i64, clock: &Clock) -> StatusView {
    let mut by_status: BTreeMap<String, u64> =
        STATUSES.iter().map(|s| ((*s).to_owned(), 0)).collect();
    for h in hosts {
        *by_status.entry(h.status.clone()).or_default() += 1;
    }
    StatusView {
        format: FLEET_FORMAT,
        generated_at: rfc3339(clock.now),
        hosts: hosts.len(),
        silent: hosts.iter().filter(|h| h.silent).count(),
        by_status,
        reports,
        interval_seconds: clock.interval,
        silent_after_seconds: clock.silent_after(),
    }
}

/// `GET /api/v1/hosts/{name}`.
#[derive(Clone, Debug, Serialize)]
pub struct HostDetail {
    pub format: &'static str,
    pub host: HostView,
    /// The last stored report, as the host signed it (`converge-report/1`).
    pub last_report: Option<Value>,
    pub recent_reports: Vec<ReportView>,
    /// What retention kept of older days, newest first.
    pub daily_summaries: Vec<DayView>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReportView {
    pub run_id: String,
    pub sequence: i64,
    pub received_at: String,
    pub started_at: String,
    pub status: String,
    pub kept: i64,
    pub repaired: i64,
    pub failed: i64,
    pub skipped: i64,
    pub bundle_serial: Option<i64>,
}

impl From<ReportRow> for ReportView {
    fn from(r: ReportRow) -> ReportView {
        ReportView {
            run_id: r.run_id,
            sequence: r.sequence,
            received_at: rfc3339(r.received_at),
            started_at: r.started_at,
            status: r.status,
            kept: r.kept,
            repaired: r.repaired,
            failed: r.failed,
            skipped: r.skipped,
            bundle_serial: r.bundle_serial,
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct DayView {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    #[serde(flatten)]
    pub summary: DailySummary,
}

/// The host, or `None` when neither the inventory nor the store knows it.
pub async fn host_detail(
    store: &Store,
    inventory: &Hosts,
    name: &str,
    clock: &Clock,
    recent: i64,
) -> Result<Option<HostDetail>, StoreError> {
    let row = store.host(name).await?;
    if row.is_none() && inventory.host(name).is_none() {
        return Ok(None);
    }
    let last_report = match row.as_ref().and_then(|r| r.last_report_id) {
        Some(id) => store
            .report_body(id)
            .await?
            .and_then(|raw| serde_json::from_slice(&raw).ok()),
        None => None,
    };
    let recent_reports = store
        .recent_reports(name, recent)
        .await?
        .into_iter()
        .map(ReportView::from)
        .collect();
    let daily_summaries = store
        .daily_summaries(name, 90)
        .await?
        .into_iter()
        .map(|summary| DayView {
            date: rfc3339(summary.day.saturating_mul(86_400))
                .get(..10)
                .unwrap_or_default()
                .to_owned(),
            summary,
        })
        .collect();
    Ok(Some(HostDetail {
        format: FLEET_FORMAT,
        host: host_view(inventory, name, row.as_ref(), clock),
        last_report,
        recent_reports,
        daily_summaries,
    }))
}

/// `GET /api/v1/failures`: failing promises of each host's last report.
#[derive(Clone, Debug, Serialize)]
pub struct FailureList {
    pub format: &'static str,
    pub generated_at: String,
    pub failures: Vec<FailureGroup>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FailureGroup {
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    pub source: String,
    /// The error of the most recently received failure in this group.
    pub last_error: Option<String>,
    pub hosts: Vec<FailingHost>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FailingHost {
    pub host: String,
    pub error: Option<String>,
    pub received_at: String,
}

pub async fn failures(store: &Store, clock: &Clock) -> Result<FailureList, StoreError> {
    let rows = store.latest_promises("failed").await?;
    Ok(FailureList {
        format: FLEET_FORMAT,
        generated_at: rfc3339(clock.now),
        failures: group_failures(rows),
    })
}

fn group_failures(rows: Vec<PromiseRow>) -> Vec<FailureGroup> {
    let mut groups: BTreeMap<(String, String, String), (i64, FailureGroup)> = BTreeMap::new();
    for row in rows {
        let key = (row.kind.clone(), row.promiser.clone(), row.source.clone());
        let (latest, group) = groups.entry(key).or_insert_with(|| {
            (
                i64::MIN,
                FailureGroup {
                    kind: row.kind.clone(),
                    promiser: row.promiser.clone(),
                    source: row.source.clone(),
                    last_error: None,
                    hosts: Vec::new(),
                },
            )
        });
        if row.received_at >= *latest {
            *latest = row.received_at;
            group.last_error = row.error.clone();
        }
        group.hosts.push(FailingHost {
            host: row.host,
            error: row.error,
            received_at: rfc3339(row.received_at),
        });
    }
    let mut list: Vec<FailureGroup> = groups.into_values().map(|(_, g)| g).collect();
    // Most widespread first.
    list.sort_by_key(|g| std::cmp::Reverse(g.hosts.len()));
    list
}

/// `GET /api/v1/changes`.
#[derive(Clone, Debug, Serialize)]
pub struct ChangeList {
    pub format: &'static str,
    pub since: String,
    pub until: String,
    /// True when `limit` cut the list (ask for a narrower window).
    pub truncated: bool,
    pub changes: Vec<ChangeView>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ChangeView {
    pub host: String,
    pub received_at: String,
    pub started_at: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    pub source: String,
    pub changes: Value,
}

pub async fn changes(
    store: &Store,
    since: i64,
    until: i64,
    host: Option<&str>,
    limit: i64,
) -> Result<ChangeList, StoreError> {
    let rows = store
        .changes(since, until, host, limit.saturating_add(1))
        .await?;
    let truncated = i64::try_from(rows.len()).unwrap_or(i64::MAX) > limit;
    let changes = rows
        .into_iter()
        .take(usize::try_from(limit).unwrap_or(0))
        .map(|r| ChangeView {
            host: r.host,
            received_at: rfc3339(r.received_at),
            started_at: r.started_at,
            kind: r.kind,
            promiser: r.promiser,
            source: r.source,
            changes: serde_json::from_str(&r.changes).unwrap_or(Value::Null),
        })
        .collect();
    Ok(ChangeList {
        format: FLEET_FORMAT,
        since: rfc3339(since),
        until: rfc3339(until),
        truncated,
        changes,
    })
}

/// `GET /api/v1/facts`.
#[derive(Clone, Debug, Serialize)]
pub struct FactsList {
    pub format: &'static str,
    pub hosts: Vec<HostFacts>,
}

#[derive(Clone, Debug, Serialize)]
pub struct HostFacts {
    pub host: String,
    pub in_inventory: bool,
    pub groups: Vec<String>,
    /// The inventory's static facts.
    pub inventory_facts: BTreeMap<String, Value>,
    /// When the reported facts arrived; `None`: never reported.
    pub reported_at: Option<String>,
    pub sys: Value,
    pub probes: Value,
    pub classes: Value,
}

pub async fn facts(
    store: &Store,
    inventory: &Hosts,
    host: Option<&str>,
) -> Result<FactsList, StoreError> {
    use converge_format::inventory::FactValue;
    let rows = store.facts(host).await?;
    let by_name: BTreeMap<&str, _> = rows.iter().map(|r| (r.host.as_str(), r)).collect();
    let mut names: Vec<&str> = match host {
        Some(h) => vec![h],
        None => inventory
            .iter()
            .map(|h| h.name.get_ref().as_str())
            .collect(),
    };
    names.extend(by_name.keys().copied());
    names.sort_unstable();
    names.dedup();
    let parse = |text: &str| serde_json::from_str(text).unwrap_or(Value::Null);
    let hosts = names
        .into_iter()
        .filter(|name| inventory.host(name).is_some() || by_name.contains_key(name))
        .map(|name| {
            let entry = inventory.host(name);
            let row = by_name.get(name);
            HostFacts {
                host: name.to_owned(),
                in_inventory: entry.is_some(),
                groups: entry
                    .map(|h| h.groups.iter().map(|g| g.get_ref().clone()).collect())
                    .unwrap_or_default(),
                inventory_facts: entry
                    .map(|h| {
                        h.facts
                            .iter()
                            .map(|(k, v)| {
                                let value = match v.get_ref() {
                                    FactValue::Bool(b) => Value::from(*b),
                                    FactValue::Int(i) => Value::from(*i),
                                    FactValue::Str(s) => Value::from(s.clone()),
                                };
                                (k.clone(), value)
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                reported_at: row.map(|r| rfc3339(r.received_at)),
                sys: row.map_or(Value::Null, |r| parse(&r.sys)),
                probes: row.map_or(Value::Null, |r| parse(&r.probes)),
                classes: row.map_or(Value::Null, |r| parse(&r.classes)),
            }
        })
        .collect();
    Ok(FactsList {
        format: FLEET_FORMAT,
        hosts,
    })
}

/// `GET /api/v1/promises`: one promise across the fleet's last reports.
#[derive(Clone, Debug, Serialize)]
pub struct PromiseView {
    pub format: &'static str,
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    /// Hosts by outcome (`repaired`, `failed`, `skipped`,
    /// `kept_or_absent`, `never`), zero included.
    pub counts: BTreeMap<String, u64>,
    pub hosts: Vec<PromiseOnHost>,
}

/// The outcome of hosts whose last report does not list the promise:
/// reports list only promises that were not kept, so the promise was kept
/// there or that host's policy does not have it.
pub const KEPT_OR_ABSENT: &str = "kept_or_absent";

#[derive(Clone, Debug, Serialize)]
pub struct PromiseOnHost {
    pub host: String,
    pub outcome: String,
    pub source: Option<String>,
    pub error: Option<String>,
}

pub async fn promise(
    store: &Store,
    inventory: &Hosts,
    kind: &str,
    promiser: &str,
    clock: &Clock,
) -> Result<PromiseView, StoreError> {
    let rows = store.promise_in_latest(kind, promiser).await?;
    let hosts = hosts(store, inventory, clock).await?;
    let mut listed: BTreeMap<&str, &PromiseRow> = BTreeMap::new();
    for row in &rows {
        // A promiser can appear twice in one report (two sources); the
        // worse outcome stands for the host.
        let worse = listed
            .get(row.host.as_str())
            .is_none_or(|old| rank(&row.outcome) > rank(&old.outcome));
        if worse {
            listed.insert(row.host.as_str(), row);
        }
    }
    let mut counts: BTreeMap<String, u64> =
        ["repaired", "failed", "skipped", KEPT_OR_ABSENT, NEVER]
            .iter()
            .map(|s| ((*s).to_owned(), 0))
            .collect();
    let on_hosts: Vec<PromiseOnHost> = hosts
        .iter()
        .map(|h| match listed.get(h.name.as_str()) {
            Some(row) => PromiseOnHost {
                host: h.name.clone(),
                outcome: row.outcome.clone(),
                source: Some(row.source.clone()),
                error: row.error.clone(),
            },
            None => PromiseOnHost {
                host: h.name.clone(),
                outcome: if h.status == NEVER {
                    NEVER
                } else {
                    KEPT_OR_ABSENT
                }
                .to_owned(),
                source: None,
                error: None,
            },
        })
        .collect();
    for h in &on_hosts {
        *counts.entry(h.outcome.clone()).or_default() += 1;
    }
    Ok(PromiseView {
        format: FLEET_FORMAT,
        kind: kind.to_owned(),
        promiser: promiser.to_owned(),
        counts,
        hosts: on_hosts,
    })
}

fn rank(outcome: &str) -> u8 {
    match outcome {
        "failed" => 3,
        "repaired" => 2,
        "skipped" => 1,
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use converge_format::inventory::{format_report_key, Inventory};

    fn inventory(names: &[&str]) -> Hosts {
        let key =
            format_report_key(&ed25519_dalek::SigningKey::from_bytes(&[1; 32]).verifying_key());
        let text: String = names
            .iter()
            .map(|n| {
                format!("[[host]]\nname = \"{n}\"\nreport_key = \"{key}\"\ngroups = [\"web\"]\n")
            })
            .collect();
        Hosts::new(Inventory::parse(&text).unwrap())
    }

    fn row(name: &str, last_seen: i64, status: &str) -> HostRow {
        HostRow {
            name: name.into(),
            last_report_id: Some(1),
            last_run_id: "0".repeat(32),
            sequence: 4,
            status: status.into(),
            last_seen,
            started_at: "2026-11-24T00:00:00Z".into(),
            bundle_name: Some("site".into()),
            bundle_serial: Some(9),
            kept: 18,
            repaired: 1,
            failed: 1,
            skipped: 0,
        }
    }

    #[test]
    fn hosts_merge_inventory_and_store_with_silence_and_never() {
        let clock = Clock {
            now: 10_000,
            interval: 300,
            intervals: 3,
        };
        let views = merge_hosts(
            &inventory(&["a", "b", "c"]),
            &[
                row("a", 9_900, "failed"),
                row("b", 10_000 - 901, "kept"),
                row("gone", 9_999, "kept"),
            ],
            &clock,
        );
        let summary: Vec<(&str, &str, bool, bool)> = views
            .iter()
            .map(|v| (v.name.as_str(), v.status.as_str(), v.silent, v.in_inventory))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("a", "failed", false, true),
                ("b", "kept", true, true),
                ("c", "never", true, true),
                ("gone", "kept", false, false),
            ]
        );
        assert_eq!(views[0].age_seconds, Some(100));
        assert_eq!(views[0].groups, vec!["web".to_owned()]);
        assert_eq!(views[0].last_seen.as_deref(), Some("1970-01-01T02:45:00Z"));
    }

    #[test]
    fn failures_group_by_promise_with_the_latest_error() {
        let failing = |host: &str, at: i64, error: &str| PromiseRow {
            host: host.into(),
            received_at: at,
            started_at: String::new(),
            kind: "file".into(),
            promiser: "/etc/motd".into(),
            source: "site.policy:3:5".into(),
            outcome: "failed".into(),
            error: Some(error.into()),
            changes: "[]".into(),
        };
        let groups = group_failures(vec![
            failing("a", 5, "old"),
            failing("b", 9, "new"),
            PromiseRow {
                promiser: "/etc/issue".into(),
                ..failing("a", 5, "x")
            },
        ]);
        assert_eq!(groups.len(), 2);
        assert_eq!(groups[0].promiser, "/etc/motd");
        assert_eq!(groups[0].hosts.len(), 2);
        assert_eq!(groups[0].last_error.as_deref(), Some("new"));
    }
}
