//! The collector on PostgreSQL: the same cases as on SQLite, then two
//! collectors sharing one database. Each test starts its own cluster
//! (support::postgres) and stops it at the end.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;

use support::postgres::Postgres;
use support::{cases, key, report, signed, Collector};

#[test]
#[ignore = "needs postgresql"]
fn postgres_upload_rules_and_refusals_by_reason() {
    let pg = Postgres::start();
    cases::upload_rules(&pg.database("fleet"));
}

#[test]
#[ignore = "needs postgresql"]
fn postgres_hostile_report_content_is_stored_inert() {
    let pg = Postgres::start();
    cases::hostile_content(&pg.database("fleet"));
}

#[test]
#[ignore = "needs postgresql"]
fn postgres_every_fleet_query() {
    let pg = Postgres::start();
    cases::queries(&pg.database("fleet"));
}

#[test]
#[ignore = "needs postgresql"]
fn postgres_watch_histories_are_cross_checked_and_tampered_hosts_flagged() {
    let pg = Postgres::start();
    support::watch::tampered(&pg.database("fleet"));
}

#[test]
#[ignore = "needs postgresql"]
fn postgres_a_neighbours_latest_report_needs_the_token_or_a_host_signature() {
    let pg = Postgres::start();
    let dir = tempfile::tempdir().unwrap();
    support::watch::latest_report_auth(&pg.database("fleet"), dir.path());
}

/// Two collectors on one database, as behind a load balancer: both start
/// (and migrate) at once, uploads are spread over both from several
/// threads, every report is also re-sent to the other collector, and runs
/// arrive out of order. Each run is stored once, and each host's status is
/// its highest sequence's, whichever collector is asked.
#[test]
#[ignore = "needs postgresql"]
fn postgres_two_collectors_share_one_database() {
    let pg = Postgres::start();
    let url = pg.database("fleet");
    let hosts: Vec<(String, u8)> = (0..8u8).map(|i| (format!("h-{i:02}"), 10 + i)).collect();
    let entries: Vec<(String, ed25519_dalek::SigningKey)> =
        hosts.iter().map(|(n, s)| (n.clone(), key(*s))).collect();
    let inventory = support::inventory_text(
        &entries
            .iter()
            .map(|(name, key)| support::Entry {
                name,
                key,
                extra: "",
            })
            .collect::<Vec<_>>(),
    );
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| Collector::start(&url, &inventory, &[]));
        let b = s.spawn(|| Collector::start(&url, &inventory, &[]));
        (a.join().unwrap(), b.join().unwrap())
    });
    const RUNS: u64 = 12;
    let outcomes: Vec<BTreeMap<String, u32>> = std::thread::scope(|s| {
        let workers: Vec<_> = entries
            .iter()
            .enumerate()
            .map(|(i, (name, key))| {
                let (a, b) = (&a, &b);
                s.spawn(move || {
                    let mut outcomes = BTreeMap::new();
                    // Sequences 1..=RUNS, pairs swapped so an older run
                    // often arrives after a newer one.
                    let mut order: Vec<u64> = (1..=RUNS).collect();
                    for pair in order.chunks_mut(2) {
                        pair.reverse();
                    }
                    for (n, sequence) in order.into_iter().enumerate() {
                        let body = signed(&report(name, sequence, sequence % 3 == 0), key);
                        let (first, second) = if (n + i) % 2 == 0 { (a, b) } else { (b, a) };
                        for c in [first, second] {
                            let answer = c.post(&body);
                            let json = answer.json();
                            let label = json["reason"].as_str().unwrap_or("stored").to_owned();
                            *outcomes.entry(label).or_insert(0) += 1;
                        }
                    }
                    outcomes
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let mut total: BTreeMap<String, u32> = BTreeMap::new();
    for o in outcomes {
        for (k, v) in o {
            *total.entry(k).or_insert(0) += v;
        }
    }
    let uploads = u32::try_from(hosts.len() as u64 * RUNS * 2).unwrap();
    assert_eq!(total.values().sum::<u32>(), uploads, "{total:?}");
    // Swapped pairs: the first run of each pair is stored (and its
    // re-send to the other collector is a duplicate); the second is older
    // than the first, on both collectors.
    assert_eq!(total["stored"], uploads / 4, "{total:?}");
    assert_eq!(total["duplicate"], uploads / 4, "{total:?}");
    assert_eq!(total["older"], uploads / 2, "{total:?}");

    // The same run sent to both at the same instant: one stores it, the
    // other answers duplicate (the host row serializes them).
    for (name, key) in &entries {
        let body = signed(&report(name, RUNS + 1, false), key);
        let barrier = std::sync::Barrier::new(2);
        let labels: Vec<String> = std::thread::scope(|s| {
            let sends: Vec<_> = [&a, &b]
                .into_iter()
                .map(|c| {
                    let (body, barrier) = (&body, &barrier);
                    s.spawn(move || {
                        barrier.wait();
                        let json = c.post(body).json();
                        json["reason"].as_str().unwrap_or("stored").to_owned()
                    })
                })
                .collect();
            sends.into_iter().map(|t| t.join().unwrap()).collect()
        });
        let mut labels = labels;
        labels.sort();
        assert_eq!(labels, ["duplicate", "stored"], "{name}");
        *total.get_mut("stored").unwrap() += 1;
    }

    for c in [&a, &b] {
        let status = c.json("/api/v1/status");
        assert_eq!(status["reports"], u64::from(total["stored"]), "{status}");
        for h in c.json("/api/v1/hosts")["hosts"].as_array().unwrap() {
            assert_eq!(h["sequence"], RUNS + 1, "{h}");
            assert_eq!(h["status"], "repaired", "{h}");
        }
    }
}
