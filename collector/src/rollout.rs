//! `GET /api/v1/rollout`: during a staged rollout (docs/rollout.md), the
//! serial each host runs (from its last report) and, per serial, how many
//! hosts run it and how many of those failed: whether the canaries do
//! worse than the rest. A `converge-fleet/1` view like those of
//! [`crate::fleet`]; `policyc fleet rollout` prints it.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::fleet::{rfc3339, Clock, HostView, FLEET_FORMAT, NEVER};

#[derive(Clone, Debug, Serialize)]
pub struct RolloutView {
    pub format: &'static str,
    pub generated_at: String,
    /// One entry per serial some host's last report ran, newest first.
    pub serials: Vec<SerialView>,
    /// Every host, by name.
    pub hosts: Vec<RolloutHost>,
    /// Hosts whose last report ran no bundle (refused) or that never
    /// reported: they count towards no serial.
    pub without_serial: usize,
}

/// The hosts whose last report ran one serial.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SerialView {
    pub serial: i64,
    pub hosts: usize,
    /// Hosts whose last run on this serial failed (a promise failed, or no
    /// fixed point).
    pub failed: usize,
    /// `failed / hosts`, from 0 to 1.
    pub failure_rate: f64,
    /// Hosts by status (`kept`, `repaired`, `failed`).
    pub by_status: BTreeMap<String, usize>,
}

/// One host: the serial and status of its last report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RolloutHost {
    pub name: String,
    pub serial: Option<i64>,
    pub status: String,
    pub silent: bool,
}

/// The serials of `hosts`' last reports, newest first, and how many
/// hosts count towards none (never reported, or ran no bundle).
pub fn per_serial(hosts: &[HostView]) -> (Vec<SerialView>, usize) {
    let mut serials: BTreeMap<i64, SerialView> = BTreeMap::new();
    let mut without_serial = 0;
    for host in hosts {
        let serial = host.bundle_serial.filter(|_| host.status != NEVER);
        let Some(serial) = serial else {
            without_serial += 1;
            continue;
        };
        let entry = serials.entry(serial).or_insert_with(|| SerialView {
            serial,
            hosts: 0,
            failed: 0,
            failure_rate: 0.0,
            by_status: BTreeMap::new(),
        });
        entry.hosts += 1;
        entry.failed += usize::from(host.status == "failed");
        *entry.by_status.entry(host.status.clone()).or_default() += 1;
    }
    let mut serials: Vec<SerialView> = serials.into_values().rev().collect();
    for s in &mut serials {
        s.failure_rate = s.failed as f64 / s.hosts.max(1) as f64;
    }
    (serials, without_serial)
}

/// The rollout view of `hosts` (the fleet's host list).
pub fn rollout(hosts: &[HostView], clock: &Clock) -> RolloutView {
    let (serials, without_serial) = per_serial(hosts);
    RolloutView {
        format: FLEET_FORMAT,
        generated_at: rfc3339(clock.now),
        serials,
        hosts: hosts
            .iter()
            .map(|h| RolloutHost {
                name: h.name.clone(),
                serial: h.bundle_serial,
                status: h.status.clone(),
                silent: h.silent,
            })
            .collect(),
        without_serial,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::float_cmp)]

    use super::*;

    fn host(name: &str, serial: Option<i64>, status: &str) -> HostView {
        HostView {
            name: name.into(),
            status: status.into(),
            last_seen: None,
            age_seconds: None,
            sequence: None,
            started_at: None,
            bundle_name: serial.map(|_| "site".into()),
            bundle_serial: serial,
            kept: 0,
            repaired: 0,
            failed: 0,
            skipped: 0,
            silent: false,
            in_inventory: true,
            revoked: false,
            groups: Vec::new(),
        }
    }

    #[test]
    fn failure_rates_are_per_serial_newest_first() {
        let clock = Clock {
            now: 0,
            interval: 300,
            intervals: 3,
        };
        let view = rollout(
            &[
                host("a", Some(2), "failed"),
                host("b", Some(2), "kept"),
                host("c", Some(1), "kept"),
                host("d", Some(1), "repaired"),
                host("e", Some(1), "kept"),
                host("f", Some(1), "failed"),
                host("g", None, "refused"),
                host("h", None, NEVER),
            ],
            &clock,
        );
        let rows: Vec<(i64, usize, usize, f64)> = view
            .serials
            .iter()
            .map(|s| (s.serial, s.hosts, s.failed, s.failure_rate))
            .collect();
        assert_eq!(rows, [(2, 2, 1, 0.5), (1, 4, 1, 0.25)]);
        assert_eq!(view.serials[1].by_status["kept"], 2);
        assert_eq!(view.without_serial, 2);
        assert_eq!(view.hosts.len(), 8);
        assert_eq!(view.hosts[0].serial, Some(2));
    }
}
