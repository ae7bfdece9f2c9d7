//! Storing a verified report: one transaction of at most four statements.
//!
//! 1. The report row, `ON CONFLICT (host, run_id) DO NOTHING`: no row back
//!    means this run is stored already (`duplicate`). On PostgreSQL a
//!    second collector inserting the same run at the same time waits on
//!    the unique index and then gets nothing back.
//! 2. The host's row, updated only when this report's sequence is higher
//!    than the stored one (`WHERE hosts.last_sequence < excluded...`); no
//!    row back means a newer run is there (`older`), and the transaction
//!    is rolled back, report row included. Two collectors storing runs of
//!    one host serialize on this row: the second sees the first's
//!    sequence, never a lost update.
//! 3. The promise rows, 4. the facts, 5. the watch history's cross-check
//!    ([`super::watch`]).
//!
//! On SQLite the first statement is a write, so the transaction holds the
//! write lock from its start (no lock upgrade that could fail).

use converge_format::report::Report;
use sqlx::{Any, Transaction};

use super::{count, storable, IngestOutcome, Store, StoreError};

/// The `status` a dry run's report row is stored with: no real run's.
pub const DRY_RUN_STATUS: &str = "dry_run";

/// Rows per multi-row `INSERT` into `promise_results` (9 parameters each,
/// far under SQLite's 32,766-parameter limit).
const PROMISE_ROWS_PER_INSERT: usize = 200;

impl Store {
    /// Stores `report` (already verified), whose signed bytes are `raw`,
    /// received at `received_at` (Unix seconds).
    pub async fn ingest(
        &self,
        report: &Report,
        raw: &[u8],
        received_at: i64,
    ) -> Result<IngestOutcome, StoreError> {
        self.ingest_signed(report, raw, None, received_at).await
    }

    /// [`Store::ingest`], keeping the upload's `signature` (base64) so the
    /// report can be handed out again exactly as signed.
    pub async fn ingest_signed(
        &self,
        report: &Report,
        raw: &[u8],
        signature: Option<&str>,
        received_at: i64,
    ) -> Result<IngestOutcome, StoreError> {
        let sequence = i64::try_from(report.sequence).map_err(|_| {
            StoreError::Invalid(format!("sequence {} is past 2^63", report.sequence))
        })?;
        let mut tx = self.writer.begin().await?;
        let Some(id) =
            insert_report(&mut tx, report, sequence, raw, signature, received_at).await?
        else {
            tx.rollback().await?;
            return Ok(IngestOutcome::Duplicate);
        };
        // A dry run (`policyvm agent --dry-run`) is stored as a run of its
        // own status, `dry_run`, and is never the host's latest run: the
        // host's status, counts and watch history stay those of its real
        // runs.
        if report.is_dry_run() {
            insert_promises(&mut tx, report, id, received_at).await?;
            tx.commit().await?;
            return Ok(IngestOutcome::Stored);
        }
        if !claim_host(&mut tx, report, id, sequence, received_at).await? {
            tx.rollback().await?;
            return Ok(IngestOutcome::Older);
        }
        insert_promises(&mut tx, report, id, received_at).await?;
        upsert_facts(&mut tx, report, id, received_at).await?;
        let history = super::watch::check_history(&mut tx, report, id, received_at).await?;
        tx.commit().await?;
        if history.is_alarm() {
            tracing::warn!(
                host = report.host,
                run_id = report.run_id,
                verdict = history.word(),
                "the host's watch history does not extend the last head seen: flagged tampered"
            );
        }
        Ok(IngestOutcome::Stored)
    }
}

/// Makes report `id` the host's latest unless a report with this sequence
/// or a higher one is there; whether it did.
async fn claim_host(
    tx: &mut Transaction<'_, Any>,
    report: &Report,
    id: i64,
    sequence: i64,
    received_at: i64,
) -> Result<bool, sqlx::Error> {
    let bundle = report.bundle.as_ref();
    let row = sqlx::query(
        "INSERT INTO hosts (name, last_report_id, last_run_id, last_sequence, last_status, \
             last_seen, last_started_at, bundle_name, bundle_serial, kept, repaired, failed, \
             skipped, reports) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, 1) \
         ON CONFLICT (name) DO UPDATE SET last_report_id = excluded.last_report_id, \
             last_run_id = excluded.last_run_id, \
             last_sequence = excluded.last_sequence, last_status = excluded.last_status, \
             last_seen = excluded.last_seen, last_started_at = excluded.last_started_at, \
             bundle_name = excluded.bundle_name, bundle_serial = excluded.bundle_serial, \
             kept = excluded.kept, repaired = excluded.repaired, failed = excluded.failed, \
             skipped = excluded.skipped, reports = hosts.reports + 1 \
         WHERE hosts.last_sequence < excluded.last_sequence \
         RETURNING name",
    )
    .bind(&report.host)
    .bind(id)
    .bind(&report.run_id)
    .bind(sequence)
    .bind(report.status.as_str())
    .bind(received_at)
    .bind(storable(&report.started_at).as_ref())
    .bind(bundle.map(|b| storable(&b.name).into_owned()))
    .bind(bundle.map(|b| count(b.serial)))
    .bind(count(report.summary.kept))
    .bind(count(report.summary.repaired))
    .bind(count(report.summary.failed))
    .bind(count(report.summary.skipped))
    .fetch_optional(&mut **tx)
    .await?;
    Ok(row.is_some())
}

async fn insert_report(
    tx: &mut Transaction<'_, Any>,
    report: &Report,
    sequence: i64,
    raw: &[u8],
    signature: Option<&str>,
    received_at: i64,
) -> Result<Option<i64>, sqlx::Error> {
    use sqlx::Row as _;
    let bundle = report.bundle.as_ref();
    let row = sqlx::query(
        "INSERT INTO reports (host, run_id, sequence, received_at, started_at, finished_at, \
             status, kept, repaired, failed, skipped, truncated, bundle_name, bundle_serial, \
             bundle_digest, error, raw, signature) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18) \
         ON CONFLICT (host, run_id) DO NOTHING \
         RETURNING id",
    )
    .bind(&report.host)
    .bind(&report.run_id)
    .bind(sequence)
    .bind(received_at)
    .bind(storable(&report.started_at).as_ref())
    .bind(storable(&report.finished_at).as_ref())
    .bind(if report.is_dry_run() {
        DRY_RUN_STATUS
    } else {
        report.status.as_str()
    })
    .bind(count(report.summary.kept))
    .bind(count(report.summary.repaired))
    .bind(count(report.summary.failed))
    .bind(count(report.summary.skipped))
    .bind(i64::from(report.truncated))
    .bind(bundle.map(|b| storable(&b.name).into_owned()))
    .bind(bundle.map(|b| count(b.serial)))
    .bind(bundle.map(|b| storable(&b.digest).into_owned()))
    .bind(report.error.as_deref().map(|e| storable(e).into_owned()))
    .bind(raw)
    .bind(signature)
    .fetch_optional(&mut **tx)
    .await?;
    row.map(|r| r.try_get::<i64, _>(0)).transpose()
}

/// The repaired, failed and skipped promises, for the failure, change and
/// promise queries (kept promises are only counted in reports).
async fn insert_promises(
    tx: &mut Transaction<'_, Any>,
    report: &Report,
    report_id: i64,
    received_at: i64,
) -> Result<(), sqlx::Error> {
    for chunk in report.promises.chunks(PROMISE_ROWS_PER_INSERT) {
        let sql = promise_insert_sql(chunk.len());
        let mut query = sqlx::query(&sql);
        for promise in chunk {
            let changes = serde_json::to_string(&promise.changes).unwrap_or_else(|_| "[]".into());
            query = query
                .bind(report_id)
                .bind(&report.host)
                .bind(received_at)
                .bind(storable(&promise.kind).into_owned())
                .bind(storable(&promise.promiser).into_owned())
                .bind(storable(&promise.source).into_owned())
                .bind(storable(&promise.outcome).into_owned())
                .bind(promise.error.as_deref().map(|e| storable(e).into_owned()))
                .bind(changes);
        }
        query.execute(&mut **tx).await?;
    }
    Ok(())
}

/// `INSERT INTO promise_results … VALUES ($1, …, $9), ($10, …)` for `rows`
/// rows: placeholders only, every value is bound.
fn promise_insert_sql(rows: usize) -> String {
    const COLUMNS: usize = 9;
    let mut sql = String::from(
        "INSERT INTO promise_results \
         (report_id, host, received_at, kind, promiser, source, outcome, error, changes) VALUES ",
    );
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..COLUMNS {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", row * COLUMNS + column + 1));
        }
        sql.push(')');
    }
    sql
}

async fn upsert_facts(
    tx: &mut Transaction<'_, Any>,
    report: &Report,
    report_id: i64,
    received_at: i64,
) -> Result<(), sqlx::Error> {
    let json = |v: Result<String, serde_json::Error>| v.unwrap_or_else(|_| "null".into());
    sqlx::query(
        "INSERT INTO facts (host, report_id, received_at, sys, probes, classes) \
         VALUES ($1, $2, $3, $4, $5, $6) \
         ON CONFLICT (host) DO UPDATE SET report_id = excluded.report_id, \
             received_at = excluded.received_at, sys = excluded.sys, \
             probes = excluded.probes, classes = excluded.classes",
    )
    .bind(&report.host)
    .bind(report_id)
    .bind(received_at)
    .bind(json(serde_json::to_string(&report.facts.sys)))
    .bind(json(serde_json::to_string(&report.facts.probes)))
    .bind(json(serde_json::to_string(&report.facts.classes)))
    .execute(&mut **tx)
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn multi_row_inserts_number_every_placeholder() {
        let sql = promise_insert_sql(2);
        assert!(sql.ends_with(
            "($1, $2, $3, $4, $5, $6, $7, $8, $9), ($10, $11, $12, $13, $14, $15, $16, $17, $18)"
        ));
    }
}
