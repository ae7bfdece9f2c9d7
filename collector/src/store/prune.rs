//! Retention: reports older than the cutoff are deleted and folded into one
//! `daily_summaries` row per host and day. A host's latest report is never
//! deleted (its status, failures and facts stay answerable however long it
//! has been silent).
//!
//! The summaries are built from the rows the `DELETE … RETURNING` hands
//! back, so two collectors pruning one PostgreSQL database at once cannot
//! count a report twice: a row is returned by the one `DELETE` that removed
//! it. `promise_results` go with their report (`ON DELETE CASCADE`).

use std::collections::BTreeMap;

use sqlx::Row as _;

use super::{DailySummary, PruneStats, Store, StoreError};

/// Reports deleted per transaction (keeps ingest flowing on SQLite).
const BATCH: i64 = 5_000;

const SECONDS_PER_DAY: i64 = 86_400;

impl Store {
    /// Deletes reports received before `cutoff` (Unix seconds), except each
    /// host's latest, keeping daily summaries.
    pub async fn prune(&self, cutoff: i64) -> Result<PruneStats, StoreError> {
        let mut stats = PruneStats::default();
        loop {
            let (deleted, touched) = self.prune_batch(cutoff).await?;
            stats.reports_deleted += deleted;
            stats.summaries_touched += touched;
            if deleted < BATCH.unsigned_abs() {
                return Ok(stats);
            }
        }
    }

    async fn prune_batch(&self, cutoff: i64) -> Result<(u64, u64), StoreError> {
        let mut tx = self.writer.begin().await?;
        let rows = sqlx::query(
            "DELETE FROM reports WHERE id IN ( \
                 SELECT id FROM reports WHERE received_at < $1 \
                 AND id NOT IN (SELECT last_report_id FROM hosts WHERE last_report_id IS NOT NULL) \
                 ORDER BY id LIMIT $2) \
             RETURNING host, received_at, status, repaired, failed",
        )
        .bind(cutoff)
        .bind(BATCH)
        .fetch_all(&mut *tx)
        .await?;
        let mut days: BTreeMap<(String, i64), DailySummary> = BTreeMap::new();
        for row in &rows {
            let host: String = row.try_get(0)?;
            let received_at: i64 = row.try_get(1)?;
            let status: String = row.try_get(2)?;
            if status == super::write::DRY_RUN_STATUS {
                // A dry run changed nothing: no run of the day's summary.
                continue;
            }
            let day = received_at.div_euclid(SECONDS_PER_DAY);
            let summary = days
                .entry((host.clone(), day))
                .or_insert_with(|| DailySummary {
                    host,
                    day,
                    ..DailySummary::default()
                });
            summary.reports += 1;
            match status.as_str() {
                "kept" => summary.kept_runs += 1,
                "repaired" => summary.repaired_runs += 1,
                "failed" => summary.failed_runs += 1,
                _ => summary.refused_runs += 1,
            }
            summary.promises_repaired = summary
                .promises_repaired
                .saturating_add(row.try_get::<i64, _>(3)?);
            summary.promises_failed = summary
                .promises_failed
                .saturating_add(row.try_get::<i64, _>(4)?);
        }
        let mut per_host: BTreeMap<&str, i64> = BTreeMap::new();
        for summary in days.values() {
            add_summary(&mut tx, summary).await?;
            *per_host.entry(summary.host.as_str()).or_default() += summary.reports;
        }
        for (host, deleted) in per_host {
            sqlx::query("UPDATE hosts SET reports = reports - $1 WHERE name = $2")
                .bind(deleted)
                .bind(host)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok((rows.len() as u64, days.len() as u64))
    }
}

async fn add_summary(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    s: &DailySummary,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO daily_summaries (host, day, reports, kept_runs, repaired_runs, failed_runs, \
             refused_runs, promises_repaired, promises_failed) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) \
         ON CONFLICT (host, day) DO UPDATE SET \
             reports = daily_summaries.reports + excluded.reports, \
             kept_runs = daily_summaries.kept_runs + excluded.kept_runs, \
             repaired_runs = daily_summaries.repaired_runs + excluded.repaired_runs, \
             failed_runs = daily_summaries.failed_runs + excluded.failed_runs, \
             refused_runs = daily_summaries.refused_runs + excluded.refused_runs, \
             promises_repaired = daily_summaries.promises_repaired + excluded.promises_repaired, \
             promises_failed = daily_summaries.promises_failed + excluded.promises_failed",
    )
    .bind(&s.host)
    .bind(s.day)
    .bind(s.reports)
    .bind(s.kept_runs)
    .bind(s.repaired_runs)
    .bind(s.failed_runs)
    .bind(s.refused_runs)
    .bind(s.promises_repaired)
    .bind(s.promises_failed)
    .execute(&mut **tx)
    .await?;
    Ok(())
}
