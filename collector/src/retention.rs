//! Retention, run by `serve` every hour (and once at start) and by
//! `converge-collector prune`: reports older than `--retention-days` are
//! folded into daily summaries ([`crate::store::prune`]).

use std::time::Duration;

use crate::store::{PruneStats, Store, StoreError};

/// How often `serve` prunes.
pub const PRUNE_EVERY: Duration = Duration::from_secs(3_600);

/// The cutoff for `days` of retention at `now` (Unix seconds).
pub fn cutoff(now: i64, days: u32) -> i64 {
    now.saturating_sub(i64::from(days).saturating_mul(86_400))
}

/// One pass: deletes what is older than `days`.
pub async fn prune(store: &Store, days: u32) -> Result<PruneStats, StoreError> {
    store
        .prune(cutoff(jiff::Timestamp::now().as_second(), days))
        .await
}

/// Prunes forever, every [`PRUNE_EVERY`]; errors are logged and retried
/// at the next tick.
pub async fn run(store: Store, days: u32) {
    let mut ticks = tokio::time::interval(PRUNE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        match prune(&store, days).await {
            Ok(stats) if stats.reports_deleted > 0 => tracing::info!(
                deleted = stats.reports_deleted,
                summaries = stats.summaries_touched,
                "retention: pruned reports older than {days} days"
            ),
            Ok(_) => {}
            Err(e) => tracing::error!("retention: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_cutoff_is_whole_days_back() {
        assert_eq!(super::cutoff(10 * 86_400 + 5, 3), 7 * 86_400 + 5);
        assert_eq!(super::cutoff(0, u32::MAX), -(i64::from(u32::MAX) * 86_400));
    }
}
