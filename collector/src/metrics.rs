//! The collector's Prometheus metrics, in the text exposition format
//! (version 0.0.4), written by hand: a few counters, gauges and one
//! histogram need no library, and the output is checked with `promtool`
//! in the tests.
//!
//! Counters live in [`METRICS`] (process-wide atomics: ingest, refusals,
//! inventory reloads and the listener all count into it). The fleet gauges
//! (hosts by status, silent hosts) are computed from the store at scrape
//! time, so they are right even when several collectors share a database.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Why an upload was refused (4xx) or not stored (200 `stored: false`).
/// The first five are [`converge_format::report::ReportError::reason`].
pub const REFUSAL_REASONS: [&str; 9] = [
    "too_large",
    "malformed",
    "bad_signature",
    "wrong_format",
    "host_mismatch",
    "unknown_host",
    "revoked",
    "sequence_out_of_range",
    "database_error",
];

/// Uploads answered 200 without storing.
pub const IGNORED_REASONS: [&str; 2] = ["duplicate", "older"];

/// Upper bounds of the ingest latency buckets, in seconds.
const LATENCY_BUCKETS: [f64; 11] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
];

/// The process-wide counters.
pub static METRICS: Metrics = Metrics::new();

#[derive(Debug)]
pub struct Metrics {
    ingested: AtomicU64,
    refused: [AtomicU64; REFUSAL_REASONS.len()],
    ignored: [AtomicU64; IGNORED_REASONS.len()],
    inventory_errors: AtomicU64,
    connections_refused: AtomicU64,
    latency_buckets: [AtomicU64; LATENCY_BUCKETS.len()],
    latency_count: AtomicU64,
    latency_sum_micros: AtomicU64,
}

#[allow(clippy::declare_interior_mutable_const)]
const ZERO: AtomicU64 = AtomicU64::new(0);

impl Metrics {
    const fn new() -> Metrics {
        Metrics {
            ingested: ZERO,
            refused: [ZERO; REFUSAL_REASONS.len()],
            ignored: [ZERO; IGNORED_REASONS.len()],
            inventory_errors: ZERO,
            connections_refused: ZERO,
            latency_buckets: [ZERO; LATENCY_BUCKETS.len()],
            latency_count: ZERO,
            latency_sum_micros: ZERO,
        }
    }

    pub fn ingested(&self) {
        self.ingested.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refusal; `reason` is one of [`REFUSAL_REASONS`].
    pub fn refused(&self, reason: &str) {
        count_by(&REFUSAL_REASONS, &self.refused, reason);
    }

    /// Counts an upload not stored; `reason` is one of [`IGNORED_REASONS`].
    pub fn ignored(&self, reason: &str) {
        count_by(&IGNORED_REASONS, &self.ignored, reason);
    }

    pub fn inventory_error(&self) {
        self.inventory_errors.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_refused(&self) {
        self.connections_refused.fetch_add(1, Ordering::Relaxed);
    }

    /// Records how long one upload took, from the request to the answer.
    pub fn observe_ingest(&self, took: Duration) {
        let seconds = took.as_secs_f64();
        for (bound, bucket) in LATENCY_BUCKETS.iter().zip(&self.latency_buckets) {
            if seconds <= *bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.latency_count.fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        self.latency_sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

fn count_by<const N: usize>(labels: &[&str; N], counters: &[AtomicU64; N], label: &str) {
    if let Some(i) = labels.iter().position(|l| *l == label) {
        if let Some(c) = counters.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The fleet gauges, computed per scrape.
#[derive(Clone, Debug, Default)]
pub struct FleetGauges {
    /// Hosts by last status (`kept`, …, `never`).
    pub hosts_by_status: Vec<(String, u64)>,
    pub silent_hosts: u64,
    /// Hosts whose watch history failed a cross-check (`/api/v1/tampered`).
    pub tampered_hosts: u64,
}

impl Metrics {
    /// The exposition text for `/metrics`.
    pub fn render(&self, fleet: &FleetGauges) -> String {
        let mut out = String::new();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        header(
            &mut out,
            "converge_collector_reports_ingested_total",
            "counter",
            "Reports verified and stored.",
        );
        let _ = writeln!(
            out,
            "converge_collector_reports_ingested_total {}",
            load(&self.ingested)
        );
        header(
            &mut out,
            "converge_collector_reports_refused_total",
            "counter",
            "Uploads refused, by reason; nothing of them was stored.",
        );
        for (reason, c) in REFUSAL_REASONS.iter().zip(&self.refused) {
            let _ = writeln!(
                out,
                "converge_collector_reports_refused_total{{reason=\"{reason}\"}} {}",
                load(c)
            );
        }
        header(
            &mut out,
            "converge_collector_reports_ignored_total",
            "counter",
            "Valid uploads not stored: a duplicate (host, run id) or an older sequence.",
        );
        for (reason, c) in IGNORED_REASONS.iter().zip(&self.ignored) {
            let _ = writeln!(
                out,
                "converge_collector_reports_ignored_total{{reason=\"{reason}\"}} {}",
                load(c)
            );
        }
        header(
            &mut out,
            "converge_collector_inventory_errors_total",
            "counter",
            "Inventory reloads that failed (the previous inventory stayed in force).",
        );
        let _ = writeln!(
            out,
            "converge_collector_inventory_errors_total {}",
            load(&self.inventory_errors)
        );
        header(
            &mut out,
            "converge_collector_connections_refused_total",
            "counter",
            "Connections closed at once because the connection limit was reached.",
        );
        let _ = writeln!(
            out,
            "converge_collector_connections_refused_total {}",
            load(&self.connections_refused)
        );
        header(
            &mut out,
            "converge_collector_hosts",
            "gauge",
            "Hosts by the status of their last report (never: in the inventory, no report yet).",
        );
        for (status, n) in &fleet.hosts_by_status {
            let _ = writeln!(out, "converge_collector_hosts{{status=\"{status}\"}} {n}");
        }
        header(
            &mut out,
            "converge_collector_silent_hosts",
            "gauge",
            "Hosts whose last report is older than the silence threshold, or that never reported.",
        );
        let _ = writeln!(
            out,
            "converge_collector_silent_hosts {}",
            fleet.silent_hosts
        );
        header(
            &mut out,
            "converge_fleet_tampered_hosts",
            "gauge",
            "Hosts whose watch history did not extend the last head the collector saw (rewritten, backwards, unverifiable, malformed or missing).",
        );
        let _ = writeln!(
            out,
            "converge_fleet_tampered_hosts {}",
            fleet.tampered_hosts
        );
        self.render_latency(&mut out);
        out
    }

    fn render_latency(&self, out: &mut String) {
        let name = "converge_collector_ingest_duration_seconds";
        header(
            out,
            name,
            "histogram",
            "Time from an upload's request to its answer.",
        );
        for (bound, c) in LATENCY_BUCKETS.iter().zip(&self.latency_buckets) {
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{bound}\"}} {}",
                c.load(Ordering::Relaxed)
            );
        }
        let count = self.latency_count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.latency_sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "{name}_sum {sum}");
        let _ = writeln!(out, "{name}_count {count}");
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_are_counted_by_reason_and_latency_lands_in_buckets() {
        let m = Metrics::new();
        m.refused("bad_signature");
        m.refused("bad_signature");
        m.refused("no_such_reason");
        m.ignored("older");
        m.observe_ingest(Duration::from_millis(3));
        let text = m.render(&FleetGauges {
            hosts_by_status: vec![("failed".into(), 2)],
            silent_hosts: 1,
            tampered_hosts: 3,
        });
        assert!(
            text.contains("converge_collector_reports_refused_total{reason=\"bad_signature\"} 2\n")
        );
        assert!(text.contains("converge_collector_reports_ignored_total{reason=\"older\"} 1\n"));
        assert!(
            text.contains("converge_collector_ingest_duration_seconds_bucket{le=\"0.0025\"} 0\n")
        );
        assert!(
            text.contains("converge_collector_ingest_duration_seconds_bucket{le=\"0.005\"} 1\n")
        );
        assert!(text.contains("converge_collector_ingest_duration_seconds_count 1\n"));
        assert!(text.contains("converge_collector_hosts{status=\"failed\"} 2\n"));
        assert!(text.contains("converge_collector_silent_hosts 1\n"));
        assert!(text.contains("converge_fleet_tampered_hosts 3\n"));
    }
}
