//! The rows the store hands out: what the database knows, before the fleet
//! view ([`crate::fleet`]) merges it with the inventory.

use serde::Serialize;

/// What became of an upload once its signature held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IngestOutcome {
    /// Stored; now the host's latest report.
    Stored,
    /// `(host, run_id)` was stored before.
    Duplicate,
    /// The host already has a report with this sequence or a higher one.
    Older,
}

impl IngestOutcome {
    /// The label for responses and metrics (`duplicate`, `older`).
    pub fn reason(self) -> Option<&'static str> {
        match self {
            IngestOutcome::Stored => None,
            IngestOutcome::Duplicate => Some("duplicate"),
            IngestOutcome::Older => Some("older"),
        }
    }
}

/// A host's latest report, as kept in `hosts`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct HostRow {
    pub name: String,
    pub last_report_id: Option<i64>,
    pub last_run_id: String,
    pub sequence: i64,
    pub status: String,
    /// Unix seconds the collector received the last report.
    pub last_seen: i64,
    pub started_at: String,
    pub bundle_name: Option<String>,
    pub bundle_serial: Option<i64>,
    pub kept: i64,
    pub repaired: i64,
    pub failed: i64,
    pub skipped: i64,
}

/// One stored report, without its body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReportRow {
    pub id: i64,
    pub run_id: String,
    pub sequence: i64,
    pub received_at: i64,
    pub started_at: String,
    pub status: String,
    pub kept: i64,
    pub repaired: i64,
    pub failed: i64,
    pub skipped: i64,
    pub bundle_serial: Option<i64>,
}

/// A promise that was not kept, from some host's report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PromiseRow {
    pub host: String,
    pub received_at: i64,
    pub started_at: String,
    pub kind: String,
    pub promiser: String,
    pub source: String,
    pub outcome: String,
    pub error: Option<String>,
    /// The report's `changes` array, as JSON text.
    pub changes: String,
}

/// The latest facts a host reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FactsRow {
    pub host: String,
    pub received_at: i64,
    /// JSON text of `facts.sys`, `facts.probes`, `facts.classes`.
    pub sys: String,
    pub probes: String,
    pub classes: String,
}

/// What retention keeps of a host's day once its reports are gone.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DailySummary {
    pub host: String,
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    pub reports: i64,
    pub kept_runs: i64,
    pub repaired_runs: i64,
    pub failed_runs: i64,
    pub refused_runs: i64,
    pub promises_repaired: i64,
    pub promises_failed: i64,
}

/// What a pruning pass did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PruneStats {
    pub reports_deleted: u64,
    pub summaries_touched: u64,
}
