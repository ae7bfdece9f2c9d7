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
