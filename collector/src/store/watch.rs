//! The hosts' watch histories as the collector saw them (docs/fleet.md,
//! "Tampered hosts"): each host's last consistent head (`watch_heads`)
//! and every report whose history did not extend it (`watch_verdicts`).
//!
//! The check runs inside the ingest transaction, after the host's row was
//! claimed: two collectors storing runs of one host serialize on that row
//! (see [`super::write`]), so each report is checked against the head the
//! previous run left, never against a head another collector is writing.
//! A flagged report is stored all the same (it is the evidence) and the
//! upload is answered as any other.

use converge_format::chain::{format_digest, Head, GENESIS};
use converge_format::crosscheck::{cross_check, CrossCheck};
use converge_format::report::Report;
use sqlx::any::AnyRow;
use sqlx::{Any, Row as _, Transaction};

use super::{count, storable, Store, StoreError};

/// A flagged host: its latest alarm, how many there were, and the head
/// the collector still trusts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TamperedRow {
    pub host: String,
    pub verdict: String,
    pub detail: Option<String>,
    pub run_id: String,
    pub received_at: i64,
    /// The first alarm's time.
    pub first_received_at: i64,
    pub alarms: i64,
    /// The head checked against (the last consistent one).
    pub seen: Head,
    /// The head the offending report showed, if any.
    pub offending: Option<Head>,
}

/// Checks `report`'s history against the host's last consistent head and
/// records the result; the verdict, for logs.
pub(super) async fn check_history(
    tx: &mut Transaction<'_, Any>,
    report: &Report,
    report_id: i64,
    received_at: i64,
) -> Result<CrossCheck, sqlx::Error> {
    let seen = seen_head(tx, &report.host).await?;
    let result = cross_check(seen.as_ref(), &report.extensions);
    if let Some(next) = result.next_seen() {
        if seen.as_ref() != Some(next) {
            sqlx::query(
                "INSERT INTO watch_heads (host, length, head, report_id, received_at, \
                     previous_length, previous_head) \
                 VALUES ($1, $2, $3, $4, $5, NULL, NULL) \
                 ON CONFLICT (host) DO UPDATE SET previous_length = watch_heads.length, \
                     previous_head = watch_heads.head, length = excluded.length, \
                     head = excluded.head, report_id = excluded.report_id, \
                     received_at = excluded.received_at",
            )
            .bind(&report.host)
            .bind(count(next.length))
            .bind(storable(&next.head).as_ref())
            .bind(report_id)
            .bind(received_at)
            .execute(&mut **tx)
            .await?;
        }
    }
    if result.is_alarm() {
        // Checked against the empty history when no head was seen yet (a
        // first report whose chain is malformed).
        let against = seen.unwrap_or_else(|| Head {
            length: 0,
            head: format_digest(&GENESIS),
        });
        let shown = result.shown();
        sqlx::query(
            "INSERT INTO watch_verdicts (host, report_id, run_id, received_at, verdict, detail, \
                 seen_length, seen_head, new_length, new_head) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&report.host)
        .bind(report_id)
        .bind(&report.run_id)
        .bind(received_at)
        .bind(result.word())
        .bind(result.detail().map(|d| storable(&d).into_owned()))
        .bind(count(against.length))
        .bind(storable(&against.head).into_owned())
        .bind(shown.map(|h| count(h.length)))
        .bind(shown.map(|h| storable(&h.head).into_owned()))
        .execute(&mut **tx)
        .await?;
    }
    Ok(result)
}

async fn seen_head(tx: &mut Transaction<'_, Any>, host: &str) -> Result<Option<Head>, sqlx::Error> {
    let row = sqlx::query("SELECT length, head FROM watch_heads WHERE host = $1")
        .bind(host)
        .fetch_optional(&mut **tx)
        .await?;
    row.map(|r| {
        Ok(Head {
            length: u64::try_from(r.try_get::<i64, _>(0)?).unwrap_or(0),
            head: r.try_get(1)?,
        })
    })
    .transpose()
}

impl Store {
    /// Every host with at least one alarm, by name: its latest alarm, the
    /// count and the first one's time.
    pub async fn tampered(&self) -> Result<Vec<TamperedRow>, StoreError> {
        let rows = sqlx::query(
            "SELECT v.host, v.verdict, v.detail, v.run_id, v.received_at, s.first_at, s.alarms, \
                 v.seen_length, v.seen_head, v.new_length, v.new_head \
             FROM watch_verdicts v JOIN ( \
                 SELECT host, MAX(id) AS last_id, MIN(received_at) AS first_at, \
                     COUNT(*) AS alarms \
                 FROM watch_verdicts GROUP BY host) s ON v.id = s.last_id \
             ORDER BY v.host",
        )
        .fetch_all(&self.reader)
        .await?;
        rows.iter().map(tampered_row).collect()
    }

    /// The host's last consistent head, when it ever showed one.
    pub async fn watch_head(&self, host: &str) -> Result<Option<Head>, StoreError> {
        let row = sqlx::query("SELECT length, head FROM watch_heads WHERE host = $1")
            .bind(host)
            .fetch_optional(&self.reader)
            .await?;
        Ok(row
            .map(|r| {
                Ok::<_, sqlx::Error>(Head {
                    length: u64::try_from(r.try_get::<i64, _>(0)?).unwrap_or(0),
                    head: r.try_get(1)?,
                })
            })
            .transpose()?)
    }

    /// The host's latest stored report as it was uploaded: the signed
    /// bytes and their signature (`None` when the host has no report, or
    /// its latest was stored before signatures were kept).
    pub async fn latest_signed(&self, host: &str) -> Result<Option<(Vec<u8>, String)>, StoreError> {
        let row = sqlx::query(
            "SELECT r.raw, r.signature FROM hosts h JOIN reports r ON r.id = h.last_report_id \
             WHERE h.name = $1",
        )
        .bind(host)
        .fetch_optional(&self.reader)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let raw: Vec<u8> = row.try_get(0)?;
        let signature: Option<String> = row.try_get(1)?;
        Ok(signature.map(|s| (raw, s)))
    }
}

fn tampered_row(r: &AnyRow) -> Result<TamperedRow, StoreError> {
    let length = |v: i64| u64::try_from(v).unwrap_or(0);
    let new_length: Option<i64> = r.try_get(9)?;
    let new_head: Option<String> = r.try_get(10)?;
    Ok(TamperedRow {
        host: r.try_get(0)?,
        verdict: r.try_get(1)?,
        detail: r.try_get(2)?,
        run_id: r.try_get(3)?,
        received_at: r.try_get(4)?,
        first_received_at: r.try_get(5)?,
        alarms: r.try_get(6)?,
        seen: Head {
            length: length(r.try_get(7)?),
            head: r.try_get(8)?,
        },
        offending: match (new_length, new_head) {
            (Some(l), Some(head)) => Some(Head {
                length: length(l),
                head,
            }),
            _ => None,
        },
    })
}
