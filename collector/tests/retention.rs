//! Retention: reports older than --retention-days become daily summaries;
//! each host's latest report stays; the promise rows of a deleted report
//! go with it. Run by `converge-collector prune` and by `serve`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use converge_collector::store::{IngestOutcome, Store};
use support::postgres::Postgres;
use support::{key, report, Collector};

const DAY: i64 = 86_400;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn prune_cli(database: &str, days: &str) -> String {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_converge-collector"))
        .args(["prune", "--database", database, "--retention-days", days])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn retention(database: &str) {
    let rt = runtime();
    let now = jiff::Timestamp::now().as_second();
    rt.block_on(async {
        let store = Store::open(database).await.unwrap();
        for (host, sequence, failing, age_days) in [
            ("web-01", 1, true, 40),
            ("web-01", 2, false, 40),
            ("web-01", 3, true, 35),
            ("web-01", 4, false, 1),
            ("web-02", 1, true, 50),
        ] {
            let r = report(host, sequence, failing);
            let outcome = store
                .ingest(&r, &r.to_bytes(), now - age_days * DAY)
                .await
                .unwrap();
            assert_eq!(outcome, IngestOutcome::Stored);
        }
        store.close().await;
    });
    let said = prune_cli(database, "30");
    assert!(
        said.contains("pruned 3 reports older than 30 days into 2 daily summaries"),
        "{said}"
    );
    assert!(prune_cli(database, "30").contains("pruned 0 reports"));

    rt.block_on(async {
        let store = Store::open(database).await.unwrap();
        let recent: Vec<i64> = store
            .recent_reports("web-01", 10)
            .await
            .unwrap()
            .iter()
            .map(|r| r.sequence)
            .collect();
        assert_eq!(recent, [4]);
        // The fleet total follows the deletions.
        assert_eq!(store.report_count().await.unwrap(), 2);
        // web-02's only report is its latest: kept however old.
        assert_eq!(store.recent_reports("web-02", 10).await.unwrap().len(), 1);
        let days = store.daily_summaries("web-01", 10).await.unwrap();
        assert_eq!(days.len(), 2);
        assert_eq!(days[0].day, (now - 35 * DAY).div_euclid(DAY));
        assert_eq!((days[0].reports, days[0].failed_runs), (1, 1));
        assert_eq!(
            (days[1].reports, days[1].failed_runs, days[1].repaired_runs),
            (2, 1, 1)
        );
        assert_eq!((days[1].promises_repaired, days[1].promises_failed), (2, 1));
        // Only the kept reports' promises remain.
        let changes = store.changes(0, now + 1, None, 100).await.unwrap();
        let hosts: Vec<&str> = changes.iter().map(|c| c.host.as_str()).collect();
        assert_eq!(hosts, ["web-01", "web-02"]);
        // An old report arrives again after pruning: its sequence is below
        // the latest, so it is not stored again.
        let again = report("web-01", 2, false);
        assert_eq!(
            store.ingest(&again, &again.to_bytes(), now).await.unwrap(),
            IngestOutcome::Older
        );
        let r = report("web-01", 5, false);
        store
            .ingest(&r, &r.to_bytes(), now - 31 * DAY)
            .await
            .unwrap();
        let r = report("web-01", 6, false);
        store.ingest(&r, &r.to_bytes(), now).await.unwrap();
        store.close().await;
    });

    // `serve` prunes at start (and every hour).
    let inventory = support::inventory_text(&[support::Entry {
        name: "web-01",
        key: &key(1),
        extra: "",
    }]);
    let c = Collector::start(database, &inventory, &["--retention-days", "30"]);
    let mut seen = Vec::new();
    for _ in 0..50 {
        let detail = c.json("/api/v1/hosts/web-01");
        seen = detail["recent_reports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["sequence"].as_i64().unwrap())
            .collect();
        if seen == [6, 4] {
            let days = detail["daily_summaries"].as_array().unwrap();
            assert_eq!(days.len(), 3, "{detail}");
            assert_eq!(days[0]["reports"], 1);
            assert_eq!(days[0]["date"].as_str().unwrap().len(), 10);
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("serve did not prune: {seen:?}");
}

#[test]
fn sqlite_retention_keeps_daily_summaries_and_latest_reports() {
    let dir = tempfile::tempdir().unwrap();
    retention(&support::sqlite_url(dir.path()));
}

#[test]
#[ignore = "needs postgresql"]
fn postgres_retention_keeps_daily_summaries_and_latest_reports() {
    let pg = Postgres::start();
    retention(&pg.database("fleet"));
}
