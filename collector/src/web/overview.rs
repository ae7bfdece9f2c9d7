//! `/`: the fleet at a glance. Built from [`fleet::status`] (the counts),
//! [`fleet::hosts`] (the table, the silent hosts) and [`fleet::failures`]
//! (failing promises, linked to their promise pages). `?status=S` narrows
//! the table to one status (`silent`: the silent hosts); the table shows
//! [`PAGE_SIZE`] hosts a page (`?page=N`, from 1), so the page stays small
//! and quick with 10,000 hosts (docs/performance.md, "Dashboard").

use std::sync::Arc;

use askama::Template;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;

use super::display::{age, shorten};
use super::page::{error, html, store_error};
use crate::api::{App, DEFAULT_SILENT_INTERVALS};
use crate::fleet::{self, FailureGroup, HostView, StatusView, STATUSES};

#[derive(Debug, Deserialize)]
pub(super) struct OverviewQuery {
    status: Option<String>,
    page: Option<usize>,
}

/// Hosts per page of the table.
pub(super) const PAGE_SIZE: usize = 500;
/// Silent hosts listed by name; the rest are counted and linked.
pub(super) const SILENT_SHOWN: usize = 100;

/// One status and how many hosts have it.
pub(super) struct StatusCount {
    pub status: &'static str,
    pub hosts: u64,
}

/// A host as a table row shows it.
pub(super) struct HostLine {
    pub name: String,
    pub status: String,
    pub age: String,
    pub last_seen: String,
    pub bundle: String,
    pub failed: i64,
    pub repaired: i64,
    pub silent: bool,
    /// The host's watch history failed the cross-check (`/api/v1/tampered`).
    pub tampered: bool,
    pub note: &'static str,
}

impl HostLine {
    fn of(h: &HostView) -> HostLine {
        HostLine {
            name: h.name.clone(),
            status: h.status.clone(),
            age: age(h.age_seconds),
            last_seen: h.last_seen.clone().unwrap_or_default(),
            bundle: match (&h.bundle_name, h.bundle_serial) {
                (Some(name), Some(serial)) => format!("{} #{serial}", shorten(name)),
                (None, Some(serial)) => format!("#{serial}"),
                _ => String::new(),
            },
            failed: h.failed,
            repaired: h.repaired,
            silent: h.silent,
            tampered: false,
            note: if h.revoked {
                "revoked"
            } else if !h.in_inventory {
                "not in the inventory"
            } else {
                ""
            },
        }
    }
}

/// A failing promise as the overview lists it.
pub(super) struct FailureLine {
    pub kind: String,
    pub promiser: String,
    pub promiser_shown: String,
    pub source: String,
    pub hosts: usize,
    pub last_error: String,
}

impl FailureLine {
    fn of(g: &FailureGroup) -> FailureLine {
        FailureLine {
            kind: g.kind.clone(),
            promiser: g.promiser.clone(),
            promiser_shown: shorten(&g.promiser),
            source: shorten(&g.source),
            hosts: g.hosts.len(),
            last_error: g.last_error.as_deref().map(shorten).unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "overview.html")]
pub(super) struct OverviewPage {
    pub generated_at: String,
    pub total: usize,
    pub silent_count: usize,
    pub reports: i64,
    pub silent_after: String,
    pub counts: Vec<StatusCount>,
    /// The `?status=` the table is narrowed to, if any.
    pub filter: Option<String>,
    /// The table's first and last row (from 1), the rows of the table in
    /// all (every page), and the links to the neighbour pages.
    pub first: usize,
    pub last: usize,
    pub matching: usize,
    pub previous: String,
    pub next: String,
    pub hosts: Vec<HostLine>,
    pub silent: Vec<HostLine>,
    /// Silent hosts beyond [`SILENT_SHOWN`].
    pub silent_more: usize,
    pub failures: Vec<FailureLine>,
    /// The serials the hosts' last reports ran, when there are several (a
    /// staged rollout, docs/rollout.md); empty otherwise.
    pub serials: Vec<SerialLine>,
}

/// One serial as the overview's rollout section shows it.
pub(super) struct SerialLine {
    pub serial: i64,
    pub hosts: usize,
    pub failed: usize,
    pub rate: String,
}

/// What `?status=` accepts besides the statuses.
const SILENT: &str = "silent";

pub(super) async fn page(
    State(app): State<Arc<App>>,
    Query(query): Query<OverviewQuery>,
) -> Response {
    if let Some(s) = &query.status {
        if !STATUSES.contains(&s.as_str()) && s != SILENT {
            return error(
                StatusCode::BAD_REQUEST,
                "Unknown status",
                &format!(
                    "?status= takes one of {}, or {SILENT}.",
                    STATUSES.join(", ")
                ),
            );
        }
    }
    let page_number = query.page.unwrap_or(1);
    if page_number == 0 {
        return error(
            StatusCode::BAD_REQUEST,
            "Unknown page",
            "?page= counts from 1.",
        );
    }
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    let inventory = app.inventory.current();
    // The four reads are independent: run them at once.
    let (hosts, reports, failures, tampered) = tokio::join!(
        fleet::hosts(&app.store, &inventory, &clock),
        app.store.report_count(),
        fleet::failures(&app.store, &clock),
        app.store.tampered(),
    );
    let (hosts, reports, failures, tampered) = match (hosts, reports, failures, tampered) {
        (Ok(h), Ok(r), Ok(f), Ok(t)) => (h, r, f, t),
        (Err(e), _, _, _) | (_, Err(e), _, _) | (_, _, Err(e), _) | (_, _, _, Err(e)) => {
            return store_error(&e)
        }
    };
    let status = fleet::status_of(&hosts, reports, &clock);
    let mut page = overview(
        &status,
        &hosts,
        &failures.failures,
        query.status,
        page_number,
    );
    let tampered: std::collections::BTreeSet<&str> =
        tampered.iter().map(|t| t.host.as_str()).collect();
    for line in page.hosts.iter_mut().chain(page.silent.iter_mut()) {
        line.tampered = tampered.contains(line.name.as_str());
    }
    html(StatusCode::OK, &page)
}

/// The link to page `page` of the table narrowed to `filter`.
fn page_link(filter: Option<&str>, page: usize) -> String {
    match filter {
        Some(f) => format!("/?status={f}&page={page}"),
        None => format!("/?page={page}"),
    }
}

fn overview(
    status: &StatusView,
    hosts: &[HostView],
    failures: &[FailureGroup],
    filter: Option<String>,
    page: usize,
) -> OverviewPage {
    let shown = |h: &&HostView| match filter.as_deref() {
        None => true,
        Some(SILENT) => h.silent,
        Some(s) => h.status == s,
    };
    let matching = hosts.iter().filter(shown).count();
    let skip = page.saturating_sub(1).saturating_mul(PAGE_SIZE);
    let table: Vec<HostLine> = hosts
        .iter()
        .filter(shown)
        .skip(skip)
        .take(PAGE_SIZE)
        .map(HostLine::of)
        .collect();
    let silent_all = hosts.iter().filter(|h| h.silent);
    OverviewPage {
        generated_at: status.generated_at.clone(),
        total: status.hosts,
        silent_count: status.silent,
        reports: status.reports,
        silent_after: age(Some(status.silent_after_seconds))
            .trim_end_matches(" ago")
            .to_owned(),
        counts: STATUSES
            .iter()
            .map(|s| StatusCount {
                status: s,
                hosts: status.by_status.get(*s).copied().unwrap_or(0),
            })
            .collect(),
        first: if table.is_empty() { 0 } else { skip + 1 },
        last: skip + table.len(),
        matching,
        previous: if page > 1 {
            page_link(filter.as_deref(), page - 1)
        } else {
            String::new()
        },
        next: if skip + table.len() < matching {
            page_link(filter.as_deref(), page + 1)
        } else {
            String::new()
        },
        hosts: table,
        silent: silent_all
            .clone()
            .take(SILENT_SHOWN)
            .map(HostLine::of)
            .collect(),
        silent_more: silent_all.count().saturating_sub(SILENT_SHOWN),
        failures: failures.iter().map(FailureLine::of).collect(),
        serials: serial_lines(hosts),
        filter,
    }
}

/// The rollout section: every serial with its failure rate, shown only
/// while hosts run more than one.
fn serial_lines(hosts: &[HostView]) -> Vec<SerialLine> {
    let (serials, _) = crate::rollout::per_serial(hosts);
    if serials.len() < 2 {
        return Vec::new();
    }
    serials
        .iter()
        .map(|s| SerialLine {
            serial: s.serial,
            hosts: s.hosts,
            failed: s.failed,
            rate: format!("{:.1}%", s.failure_rate * 100.0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn host(name: &str, status: &str, silent: bool) -> HostView {
        HostView {
            name: name.into(),
            status: status.into(),
            last_seen: Some("2026-11-24T00:00:00Z".into()),
            age_seconds: Some(90),
            sequence: Some(3),
            started_at: None,
            bundle_name: Some("<b>site</b>".into()),
            bundle_serial: Some(7),
            kept: 1,
            repaired: 0,
            failed: 1,
            skipped: 0,
            silent,
            in_inventory: true,
            revoked: false,
            groups: vec![],
        }
    }

    fn status(hosts: &[HostView]) -> StatusView {
        let mut by_status = BTreeMap::new();
        for h in hosts {
            *by_status.entry(h.status.clone()).or_insert(0) += 1;
        }
        StatusView {
            format: fleet::FLEET_FORMAT,
            generated_at: "2026-11-24T00:01:30Z".into(),
            hosts: hosts.len(),
            by_status,
            silent: hosts.iter().filter(|h| h.silent).count(),
            reports: 5,
            interval_seconds: 300,
            silent_after_seconds: 900,
        }
    }

    #[test]
    fn report_strings_are_escaped_and_links_encoded() {
        let hosts = vec![host("web-1", "failed", false), host("db-1", "kept", true)];
        let failure = FailureGroup {
            kind: "file".into(),
            promiser: "<script>alert(1)</script>".into(),
            source: "site.policy:3:5".into(),
            last_error: Some("\"><img src=x onerror=alert(1)>".into()),
            hosts: vec![],
        };
        let text = overview(&status(&hosts), &hosts, &[failure], None, 1)
            .render()
            .unwrap();
        assert!(!text.contains("<script"), "{text}");
        assert!(!text.contains("<img"), "{text}");
        assert!(!text.contains("<b>site"), "{text}");
        assert!(
            text.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{text}"
        );
        assert!(
            text.contains("promiser=%3Cscript%3Ealert%281%29%3C%2Fscript%3E"),
            "{text}"
        );
        assert!(text.contains("href=\"/hosts/web-1\""));
    }

    #[test]
    fn the_serials_section_shows_while_hosts_run_several() {
        let mut hosts = vec![host("a", "failed", false), host("b", "kept", false)];
        let one = overview(&status(&hosts), &hosts, &[], None, 1);
        assert!(one.serials.is_empty());
        assert!(!one.render().unwrap().contains("id=\"serials\""));
        hosts[0].bundle_serial = Some(8);
        let page = overview(&status(&hosts), &hosts, &[], None, 1);
        let rows: Vec<(i64, usize, usize, &str)> = page
            .serials
            .iter()
            .map(|s| (s.serial, s.hosts, s.failed, s.rate.as_str()))
            .collect();
        assert_eq!(rows, [(8, 1, 1, "100.0%"), (7, 1, 0, "0.0%")]);
        let text = page.render().unwrap();
        assert!(text.contains("<td class=\"number\">8</td><td class=\"number\">1</td><td class=\"number\">1</td><td class=\"number\">100.0%</td>"), "{text}");
    }

    #[test]
    fn the_status_filter_narrows_the_table_not_the_counts() {
        let hosts = vec![host("a", "failed", false), host("b", "kept", true)];
        let page = overview(&status(&hosts), &hosts, &[], Some("failed".into()), 1);
        assert_eq!(page.hosts.len(), 1);
        assert_eq!(page.hosts[0].name, "a");
        assert_eq!(page.silent.len(), 1);
        let failed = page.counts.iter().find(|c| c.status == "failed").unwrap();
        assert_eq!(failed.hosts, 1);
        let page = overview(&status(&hosts), &hosts, &[], Some(SILENT.into()), 1);
        assert_eq!(page.hosts.len(), 1);
        assert_eq!(page.hosts[0].name, "b");
        assert_eq!(page.hosts[0].age, "1 min ago");
    }

    #[test]
    fn the_table_is_paged_and_the_silent_list_capped() {
        let hosts: Vec<HostView> = (0..PAGE_SIZE * 2 + 3)
            .map(|i| host(&format!("h{i:04}"), "kept", true))
            .collect();
        let first = overview(&status(&hosts), &hosts, &[], None, 1);
        assert_eq!(first.hosts.len(), PAGE_SIZE);
        assert_eq!(
            (first.first, first.last, first.matching),
            (1, PAGE_SIZE, hosts.len())
        );
        assert_eq!(
            (first.previous.as_str(), first.next.as_str()),
            ("", "/?page=2")
        );
        assert_eq!(first.silent.len(), SILENT_SHOWN);
        assert_eq!(first.silent_more, hosts.len() - SILENT_SHOWN);
        let last = overview(&status(&hosts), &hosts, &[], Some(SILENT.into()), 3);
        assert_eq!(last.hosts.len(), 3);
        assert_eq!(last.hosts[0].name, format!("h{:04}", PAGE_SIZE * 2));
        assert_eq!(last.previous, "/?status=silent&page=2");
        assert_eq!(last.next, "");
        let beyond = overview(&status(&hosts), &hosts, &[], None, 9);
        assert!(beyond.hosts.is_empty());
        assert_eq!((beyond.first, beyond.last), (0, PAGE_SIZE * 9 - PAGE_SIZE));
    }
}
