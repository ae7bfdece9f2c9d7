//! `GET /api/v1/tampered`: the hosts whose watch history did not extend
//! the last head the collector saw (rewritten, backwards, unverifiable,
//! malformed, or missing after a head was seen), with the head the
//! collector still trusts. A `converge-fleet/1` view like those of
//! [`crate::fleet`]; `policyc fleet tampered` prints it.

use converge_format::chain::Head;
use serde::Serialize;

use crate::fleet::{rfc3339, Clock, FLEET_FORMAT};
use crate::store::{Store, StoreError, TamperedRow};

#[derive(Clone, Debug, Serialize)]
pub struct TamperedList {
    pub format: &'static str,
    pub generated_at: String,
    pub hosts: Vec<TamperedHost>,
}

/// One flagged host.
#[derive(Clone, Debug, Serialize)]
pub struct TamperedHost {
    pub name: String,
    /// The latest alarm's verdict: `rewritten`, `backwards`,
    /// `unverifiable`, `malformed` or `missing`.
    pub verdict: String,
    pub detail: Option<String>,
    /// When the latest alarm's report was received (RFC 3339), and its run.
    pub flagged_at: String,
    pub run_id: String,
    pub first_flagged_at: String,
    /// How many reports raised an alarm.
    pub alarms: i64,
    /// The last head that extended every head seen before it.
    pub last_consistent: Head,
    /// The head the latest offending report showed (absent when it showed
    /// none or no readable one).
    pub offending: Option<Head>,
}

impl From<TamperedRow> for TamperedHost {
    fn from(r: TamperedRow) -> TamperedHost {
        TamperedHost {
            name: r.host,
            verdict: r.verdict,
            detail: r.detail,
            flagged_at: rfc3339(r.received_at),
            run_id: r.run_id,
            first_flagged_at: rfc3339(r.first_received_at),
            alarms: r.alarms,
            last_consistent: r.seen,
            offending: r.offending,
        }
    }
}

pub async fn tampered(store: &Store, clock: &Clock) -> Result<TamperedList, StoreError> {
    let rows = store.tampered().await?;
    Ok(TamperedList {
        format: FLEET_FORMAT,
        generated_at: rfc3339(clock.now),
        hosts: rows.into_iter().map(TamperedHost::from).collect(),
    })
}
