//! The fleet queries. Each reads what its endpoint needs and no more; the
//! merge with the inventory happens in [`crate::fleet`].
//!
//! Queries over the hosts' latest reports are written `hosts CROSS JOIN
//! promise_results WHERE p.report_id = h.last_report_id`: the same inner
//! join, but SQLite then walks the 10,000 hosts and looks each latest
//! report up by index, instead of walking every failed promise ever stored
//! (1.2 s against 1,000,000 reports); PostgreSQL plans both forms alike.

use sqlx::any::AnyRow;
use sqlx::Row as _;

use super::{DailySummary, FactsRow, HostRow, PromiseRow, ReportRow, Store, StoreError};

const HOST_COLUMNS: &str = "name, last_report_id, last_run_id, last_sequence, last_status, \
     last_seen, last_started_at, bundle_name, bundle_serial, kept, repaired, failed, skipped";

impl Store {
    /// Every host that ever reported, with its latest report's summary.
    pub async fn hosts(&self) -> Result<Vec<HostRow>, StoreError> {
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts ORDER BY name");
        let rows = sqlx::query(&sql).fetch_all(&self.reader).await?;
        rows.iter().map(host_row).collect()
    }

    /// One host's row, when it ever reported.
    pub async fn host(&self, name: &str) -> Result<Option<HostRow>, StoreError> {
        let sql = format!("SELECT {HOST_COLUMNS} FROM hosts WHERE name = $1");
        let row = sqlx::query(&sql)
            .bind(name)
            .fetch_optional(&self.reader)
            .await?;
        row.as_ref().map(host_row).transpose()
    }

    /// How many reports are stored (all hosts): a sum over the hosts'
    /// counters, which ingest and retention keep in step.
    pub async fn report_count(&self) -> Result<i64, StoreError> {
        let row = sqlx::query("SELECT CAST(COALESCE(SUM(reports), 0) AS BIGINT) FROM hosts")
            .fetch_one(&self.reader)
            .await?;
        Ok(row.try_get::<i64, _>(0)?)
    }

    /// The signed JSON bytes of report `id`.
    pub async fn report_body(&self, id: i64) -> Result<Option<Vec<u8>>, StoreError> {
        let row = sqlx::query("SELECT raw FROM reports WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row.map(|r| r.try_get::<Vec<u8>, _>(0)).transpose()?)
    }

    /// A host's most recent reports, newest first.
    pub async fn recent_reports(
        &self,
        host: &str,
        limit: i64,
    ) -> Result<Vec<ReportRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT id, run_id, sequence, received_at, started_at, status, kept, repaired, \
                 failed, skipped, bundle_serial \
             FROM reports WHERE host = $1 ORDER BY sequence DESC LIMIT $2",
        )
        .bind(host)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(ReportRow {
                    id: r.try_get(0)?,
                    run_id: r.try_get(1)?,
                    sequence: r.try_get(2)?,
                    received_at: r.try_get(3)?,
                    started_at: r.try_get(4)?,
                    status: r.try_get(5)?,
                    kept: r.try_get(6)?,
                    repaired: r.try_get(7)?,
                    failed: r.try_get(8)?,
                    skipped: r.try_get(9)?,
                    bundle_serial: r.try_get(10)?,
                })
            })
            .collect()
    }

    /// The not-kept promises of each host's latest report with outcome
    /// `outcome` (`failed`, `repaired`, `skipped`).
    pub async fn latest_promises(&self, outcome: &str) -> Result<Vec<PromiseRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT p.host, p.received_at, h.last_started_at, p.kind, p.promiser, p.source, \
                 p.outcome, p.error, p.changes \
             FROM hosts h CROSS JOIN promise_results p \
             WHERE p.report_id = h.last_report_id AND p.outcome = $1 ORDER BY p.kind, p.promiser, p.source, p.host",
        )
        .bind(outcome)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(promise_row).collect()
    }

    /// What each host's latest report says of one promise (hosts where it
    /// was kept or is absent have no row).
    pub async fn promise_in_latest(
        &self,
        kind: &str,
        promiser: &str,
    ) -> Result<Vec<PromiseRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT p.host, p.received_at, h.last_started_at, p.kind, p.promiser, p.source, \
                 p.outcome, p.error, p.changes \
             FROM hosts h CROSS JOIN promise_results p \
             WHERE p.report_id = h.last_report_id AND p.kind = $1 AND p.promiser = $2 ORDER BY p.host",
        )
        .bind(kind)
        .bind(promiser)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(promise_row).collect()
    }

    /// Repaired promises received in `[since, until)`, newest first, at most
    /// `limit`, of one host or all.
    pub async fn changes(
        &self,
        since: i64,
        until: i64,
        host: Option<&str>,
        limit: i64,
    ) -> Result<Vec<PromiseRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT p.host, p.received_at, r.started_at, p.kind, p.promiser, p.source, \
                 p.outcome, p.error, p.changes \
             FROM promise_results p JOIN reports r ON r.id = p.report_id \
             WHERE p.outcome = 'repaired' AND p.received_at >= $1 AND p.received_at < $2 \
                 AND ($3 IS NULL OR p.host = $3) \
             ORDER BY p.received_at DESC, p.report_id DESC, p.kind, p.promiser LIMIT $4",
        )
        .bind(since)
        .bind(until)
        .bind(host)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(promise_row).collect()
    }

    /// The latest facts of one host or all.
    pub async fn facts(&self, host: Option<&str>) -> Result<Vec<FactsRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT host, received_at, sys, probes, classes FROM facts \
             WHERE ($1 IS NULL OR host = $1) ORDER BY host",
        )
        .bind(host)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(FactsRow {
                    host: r.try_get(0)?,
                    received_at: r.try_get(1)?,
                    sys: r.try_get(2)?,
                    probes: r.try_get(3)?,
                    classes: r.try_get(4)?,
                })
            })
            .collect()
    }

    /// What retention kept of a host's older days, newest first.
    pub async fn daily_summaries(
        &self,
        host: &str,
        limit: i64,
    ) -> Result<Vec<DailySummary>, StoreError> {
        let rows = sqlx::query(
            "SELECT host, day, reports, kept_runs, repaired_runs, failed_runs, refused_runs, \
                 promises_repaired, promises_failed \
             FROM daily_summaries WHERE host = $1 ORDER BY day DESC LIMIT $2",
        )
        .bind(host)
        .bind(limit)
        .fetch_all(&self.reader)
        .await?;
        rows.iter()
            .map(|r| {
                Ok(DailySummary {
                    host: r.try_get(0)?,
                    day: r.try_get(1)?,
                    reports: r.try_get(2)?,
                    kept_runs: r.try_get(3)?,
                    repaired_runs: r.try_get(4)?,
                    failed_runs: r.try_get(5)?,
                    refused_runs: r.try_get(6)?,
                    promises_repaired: r.try_get(7)?,
                    promises_failed: r.try_get(8)?,
                })
            })
            .collect()
    }
}

fn host_row(r: &AnyRow) -> Result<HostRow, StoreError> {
    Ok(HostRow {
        name: r.try_get(0)?,
        last_report_id: r.try_get(1)?,
        last_run_id: r.try_get(2)?,
        sequence: r.try_get(3)?,
        status: r.try_get(4)?,
        last_seen: r.try_get(5)?,
        started_at: r.try_get(6)?,
        bundle_name: r.try_get(7)?,
        bundle_serial: r.try_get(8)?,
        kept: r.try_get(9)?,
        repaired: r.try_get(10)?,
        failed: r.try_get(11)?,
        skipped: r.try_get(12)?,
    })
}

fn promise_row(r: &AnyRow) -> Result<PromiseRow, StoreError> {
    Ok(PromiseRow {
        host: r.try_get(0)?,
        received_at: r.try_get(1)?,
        started_at: r.try_get(2)?,
        kind: r.try_get(3)?,
        promiser: r.try_get(4)?,
        source: r.try_get(5)?,
        outcome: r.try_get(6)?,
        error: r.try_get(7)?,
        changes: r.try_get(8)?,
    })
}
