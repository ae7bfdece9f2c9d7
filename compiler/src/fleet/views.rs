//! The collector's fleet views as `policyc fleet` reads them: the JSON the
//! collector's API answers (`converge-fleet/1`, docs/fleet.md), with the
//! fields the tables show. Fields are only ever added to a version, so
//! unknown ones are ignored; a missing `format` or another version is
//! refused, so a table is never drawn from something else.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// The version of the views this `policyc` reads.
pub const FLEET_FORMAT: &str = "converge-fleet/1";

/// Why an answer is not a view.
#[derive(Debug, PartialEq, Eq)]
pub struct NotAView(pub String);

/// Reads `body` as a view of type `T`, checking its `format` first (so an
/// answer of another version says so, rather than a missing field).
pub fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, NotAView> {
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| NotAView(format!("the answer is not JSON ({e})")))?;
    match value.get("format").and_then(Value::as_str) {
        Some(FLEET_FORMAT) => {}
        Some(other) => {
            return Err(NotAView(format!(
                "the answer is `{other}`, this policyc reads `{FLEET_FORMAT}` (update policyc or the collector)"
            )))
        }
        None => {
            return Err(NotAView(format!(
                "the answer has no `format` (not a `{FLEET_FORMAT}` view: is this URL a converge-collector?)"
            )))
        }
    }
    serde_json::from_value(value).map_err(|e| NotAView(format!("the answer is malformed ({e})")))
}

/// `GET /api/v1/status`.
#[derive(Clone, Debug, Deserialize)]
pub struct Status {
    pub generated_at: String,
    pub hosts: u64,
    pub by_status: BTreeMap<String, u64>,
    pub silent: u64,
    pub reports: i64,
    pub interval_seconds: i64,
    pub silent_after_seconds: i64,
}

/// `GET /api/v1/hosts` and `GET /api/v1/silent`.
#[derive(Clone, Debug, Deserialize)]
pub struct HostList {
    pub generated_at: String,
    pub silent_after_seconds: i64,
    pub hosts: Vec<Host>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Host {
    pub name: String,
    pub status: String,
    #[serde(default)]
    pub last_seen: Option<String>,
    #[serde(default)]
    pub age_seconds: Option<i64>,
    #[serde(default)]
    pub bundle_name: Option<String>,
    #[serde(default)]
    pub bundle_serial: Option<i64>,
    #[serde(default)]
    pub silent: bool,
    #[serde(default = "yes")]
    pub in_inventory: bool,
    #[serde(default)]
    pub revoked: bool,
    #[serde(default)]
    pub groups: Vec<String>,
}

fn yes() -> bool {
    true
}

/// `GET /api/v1/hosts/NAME`.
#[derive(Clone, Debug, Deserialize)]
pub struct HostDetail {
    pub host: Host,
    /// The last report as the host signed it (`converge-report/1`).
    #[serde(default)]
    pub last_report: Value,
    #[serde(default)]
    pub recent_reports: Vec<ReportSummary>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct ReportSummary {
    pub received_at: String,
    pub status: String,
    #[serde(default)]
    pub sequence: i64,
    #[serde(default)]
    pub kept: i64,
    #[serde(default)]
    pub repaired: i64,
    #[serde(default)]
    pub failed: i64,
    #[serde(default)]
    pub skipped: i64,
    #[serde(default)]
    pub bundle_serial: Option<i64>,
}

/// `GET /api/v1/promises?type=&promiser=`.
#[derive(Clone, Debug, Deserialize)]
pub struct PromiseAcross {
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    pub counts: BTreeMap<String, u64>,
    pub hosts: Vec<PromiseOnHost>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct PromiseOnHost {
    pub host: String,
    pub outcome: String,
    #[serde(default)]
    pub source: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// `GET /api/v1/failures`.
#[derive(Clone, Debug, Deserialize)]
pub struct FailureList {
    pub failures: Vec<Failure>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Failure {
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    pub source: String,
    #[serde(default)]
    pub last_error: Option<String>,
    pub hosts: Vec<FailingHost>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct FailingHost {
    pub host: String,
}

/// `GET /api/v1/changes`.
#[derive(Clone, Debug, Deserialize)]
pub struct ChangeList {
    pub since: String,
    pub until: String,
    #[serde(default)]
    pub truncated: bool,
    pub changes: Vec<Change>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct Change {
    pub host: String,
    pub received_at: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub promiser: String,
    pub source: String,
    /// What changed: a list of `{what, before, after, diff}`.
    #[serde(default)]
    pub changes: Value,
}

impl Change {
    /// The `what` of each change (`content`, `mode`), in order.
    pub fn what(&self) -> Vec<String> {
        self.changes
            .as_array()
            .map(|list| {
                list.iter()
                    .filter_map(|c| c.get("what").and_then(Value::as_str))
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// `GET /api/v1/facts`.
#[derive(Clone, Debug, Deserialize)]
pub struct FactsList {
    pub hosts: Vec<HostFacts>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct HostFacts {
    pub host: String,
    #[serde(default = "yes")]
    pub in_inventory: bool,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub inventory_facts: BTreeMap<String, Value>,
    #[serde(default)]
    pub reported_at: Option<String>,
    #[serde(default)]
    pub sys: Value,
    #[serde(default)]
    pub probes: Value,
    #[serde(default)]
    pub classes: Value,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn a_view_of_this_version_parses_and_ignores_new_fields() {
        let body = br#"{"format":"converge-fleet/1","generated_at":"2026-11-24T01:00:00Z",
            "hosts":3,"by_status":{"kept":2,"never":1},"silent":1,"reports":9,
            "interval_seconds":300,"silent_after_seconds":900,"added_later":true}"#;
        let status: Status = parse(body).unwrap();
        assert_eq!(status.hosts, 3);
        assert_eq!(status.by_status.get("never"), Some(&1));
    }

    #[test]
    fn anything_else_is_refused_with_the_reason() {
        let refused = |body: &[u8]| parse::<Status>(body).unwrap_err().0;
        assert!(refused(b"<html>").contains("not JSON"));
        assert!(refused(br#"{"hosts":3}"#).contains("no `format`"));
        assert!(refused(br#"{"format":"converge-fleet/2"}"#).contains("converge-fleet/2"));
        assert!(refused(br#"{"format":"converge-fleet/1","hosts":"x"}"#).contains("malformed"));
    }

    #[test]
    fn a_change_lists_what_changed() {
        let change: Change = serde_json::from_str(
            r#"{"host":"a","received_at":"t","type":"file","promiser":"/x","source":"s:1:1",
               "changes":[{"what":"content","before":"a","after":"b"},{"what":"mode"}]}"#,
        )
        .unwrap();
        assert_eq!(change.what(), vec!["content", "mode"]);
    }
}

/// `GET /api/v1/tampered`: hosts whose watch history failed the
/// collector's cross-check.
#[derive(Clone, Debug, Deserialize)]
pub struct TamperedList {
    pub generated_at: String,
    pub hosts: Vec<TamperedHost>,
}

#[derive(Clone, Debug, Deserialize)]
pub struct TamperedHost {
    pub name: String,
    /// `rewritten`, `backwards`, `unverifiable`, `malformed`, `missing`.
    pub verdict: String,
    #[serde(default)]
    pub detail: Option<String>,
    pub flagged_at: String,
    #[serde(default)]
    pub alarms: i64,
    pub last_consistent: ChainHead,
    #[serde(default)]
    pub offending: Option<ChainHead>,
}

/// A point in a host's watch history.
#[derive(Clone, Debug, Deserialize)]
pub struct ChainHead {
    pub length: u64,
    pub head: String,
}

/// `GET /api/v1/rollout`: the serial of every host and the failure rate
/// per serial (docs/rollout.md).
#[derive(Clone, Debug, Deserialize)]
pub struct RolloutView {
    pub generated_at: String,
    pub serials: Vec<SerialRow>,
    pub hosts: Vec<RolloutHost>,
    #[serde(default)]
    pub without_serial: u64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct SerialRow {
    pub serial: i64,
    pub hosts: u64,
    pub failed: u64,
    pub failure_rate: f64,
}

#[derive(Clone, Debug, Deserialize)]
pub struct RolloutHost {
    pub name: String,
    #[serde(default)]
    pub serial: Option<i64>,
    pub status: String,
    #[serde(default)]
    pub silent: bool,
}
