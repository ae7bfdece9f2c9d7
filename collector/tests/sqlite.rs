//! The collector on SQLite (the default database): uploads, refusals,
//! hostile content and every query, through the HTTP API of a real
//! `converge-collector serve` process.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cases;

fn database() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = support::sqlite_url(dir.path());
    (dir, url)
}

#[test]
fn sqlite_upload_rules_and_refusals_by_reason() {
    let (_dir, url) = database();
    cases::upload_rules(&url);
}

#[test]
fn sqlite_hostile_report_content_is_stored_inert() {
    let (_dir, url) = database();
    cases::hostile_content(&url);
}

#[test]
fn sqlite_every_fleet_query() {
    let (_dir, url) = database();
    cases::queries(&url);
}

#[test]
fn sqlite_watch_histories_are_cross_checked_and_tampered_hosts_flagged() {
    let (_dir, url) = database();
    support::watch::tampered(&url);
}

#[test]
fn sqlite_a_neighbours_latest_report_needs_the_token_or_a_host_signature() {
    let (dir, url) = database();
    support::watch::latest_report_auth(&url, dir.path());
}
