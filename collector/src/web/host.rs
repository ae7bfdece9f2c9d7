//! `/hosts/{name}`: one host. Built from [`fleet::host_detail`] (the host,
//! its last report as signed, recent reports, daily summaries),
//! [`fleet::changes`] (what was repaired over the last week) and
//! [`fleet::facts`] (sys, probes, classes, the inventory's groups and
//! static facts).

use std::sync::Arc;

use askama::Template;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use converge_format::report::{Change, PromiseResult, Report};
use serde_json::Value;

use super::display::{age, object_rows, shorten, value_text};
use super::page::{error, html, store_error};
use crate::api::{App, DEFAULT_SILENT_INTERVALS};
use crate::fleet::{self, ChangeView, DayView, HostDetail, HostFacts, ReportView};

/// Recent reports the page lists.
const RECENT_REPORTS: i64 = 20;
/// The window of "changes over time".
const CHANGES_WINDOW_SECONDS: i64 = 7 * 86_400;
/// Changes the page lists at most (newest first).
const CHANGES_SHOWN: i64 = 200;

/// A promise of the last report that was not kept.
pub(super) struct PromiseLine {
    pub kind: String,
    pub promiser: String,
    pub promiser_shown: String,
    pub outcome: String,
    pub source: String,
    pub error: String,
    pub changes: Vec<ChangeLine>,
}

pub(super) struct ChangeLine {
    pub what: String,
    pub before: String,
    pub after: String,
}

impl ChangeLine {
    fn of(c: &Change) -> ChangeLine {
        ChangeLine {
            what: shorten(&c.what),
            before: shorten(&c.before),
            after: shorten(&c.after),
        }
    }
}

impl PromiseLine {
    fn of(p: &PromiseResult) -> PromiseLine {
        PromiseLine {
            kind: p.kind.clone(),
            promiser: p.promiser.clone(),
            promiser_shown: shorten(&p.promiser),
            outcome: p.outcome.clone(),
            source: shorten(&p.source),
            error: p.error.as_deref().map(shorten).unwrap_or_default(),
            changes: p.changes.iter().map(ChangeLine::of).collect(),
        }
    }

    fn of_change(c: &ChangeView) -> (String, PromiseLine) {
        let changes: Vec<Change> = serde_json::from_value(c.changes.clone()).unwrap_or_default();
        (
            c.received_at.clone(),
            PromiseLine {
                kind: c.kind.clone(),
                promiser: c.promiser.clone(),
                promiser_shown: shorten(&c.promiser),
                outcome: "repaired".to_owned(),
                source: shorten(&c.source),
                error: String::new(),
                changes: changes.iter().map(ChangeLine::of).collect(),
            },
        )
    }
}

/// The last report, as the page shows it.
pub(super) struct LastReport {
    pub status: String,
    pub started_at: String,
    pub finished_at: String,
    pub sequence: u64,
    pub bundle: String,
    pub digest: String,
    pub kept: u64,
    pub repaired: u64,
    pub failed: u64,
    pub skipped: u64,
    pub converged: bool,
    pub error: String,
    pub truncated: bool,
    pub failures: Vec<PromiseLine>,
    pub others: Vec<PromiseLine>,
    /// Extra entries (two-way verification): what the host has that no
    /// promise names, from the report's `extra` extension.
    pub extra: Vec<ExtraLine>,
    /// How many extra entries the host counted (the list may have been cut).
    pub extra_count: u64,
}

/// One extra entry of the last report.
pub(super) struct ExtraLine {
    pub kind: String,
    pub name: String,
    pub action: String,
}

/// The `extra` extension of a report (`converge_format::report::
/// EXTRA_EXTENSION`): its entries and the total of its counts. A host that
/// sent something else under the key shows nothing.
fn extra_of(r: &Report) -> (Vec<ExtraLine>, u64) {
    let Some(extra) = r.extensions.get(converge_format::report::EXTRA_EXTENSION) else {
        return (Vec::new(), 0);
    };
    let field = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).map(shorten);
    let lines = extra
        .get("entries")
        .and_then(Value::as_array)
        .map(|entries| {
            entries
                .iter()
                .filter_map(|e| {
                    Some(ExtraLine {
                        kind: field(e, "type")?,
                        name: field(e, "name")?,
                        action: field(e, "action")?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let count = extra
        .get("counts")
        .and_then(Value::as_object)
        .map(|c| {
            c.values()
                .filter_map(Value::as_u64)
                .fold(0u64, u64::saturating_add)
        })
        .unwrap_or(0);
    (lines, count)
}

impl LastReport {
    fn of(r: &Report) -> LastReport {
        let (failures, others): (Vec<&PromiseResult>, Vec<&PromiseResult>) =
            r.promises.iter().partition(|p| p.outcome == "failed");
        let (extra, extra_count) = extra_of(r);
        LastReport {
            status: r.status.as_str().to_owned(),
            started_at: shorten(&r.started_at),
            finished_at: shorten(&r.finished_at),
            sequence: r.sequence,
            bundle: r
                .bundle
                .as_ref()
                .map(|b| format!("{} #{}", shorten(&b.name), b.serial))
                .unwrap_or_else(|| "(none)".to_owned()),
            digest: r
                .bundle
                .as_ref()
                .map(|b| shorten(&b.digest))
                .unwrap_or_default(),
            kept: r.summary.kept,
            repaired: r.summary.repaired,
            failed: r.summary.failed,
            skipped: r.summary.skipped,
            converged: r.summary.converged,
            error: r.error.as_deref().map(shorten).unwrap_or_default(),
            truncated: r.truncated,
            failures: failures.into_iter().map(PromiseLine::of).collect(),
            others: others.into_iter().map(PromiseLine::of).collect(),
            extra,
            extra_count,
        }
    }
}

pub(super) struct ProbeLine {
    pub name: String,
    pub value: String,
    pub error: String,
}

/// The facts section.
#[derive(Default)]
pub(super) struct FactsSection {
    pub reported_at: String,
    pub inventory: Vec<(String, String)>,
    pub sys: Vec<(String, String)>,
    pub probes: Vec<ProbeLine>,
    pub classes: Vec<String>,
}

impl FactsSection {
    fn of(f: &HostFacts) -> FactsSection {
        FactsSection {
            reported_at: f.reported_at.clone().unwrap_or_default(),
            inventory: f
                .inventory_facts
                .iter()
                .map(|(k, v)| (k.clone(), value_text(v)))
                .collect(),
            sys: object_rows(&f.sys),
            probes: f
                .probes
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(name, p)| ProbeLine {
                            name: shorten(name),
                            value: p.get("value").map(value_text).unwrap_or_default(),
                            error: p
                                .get("error")
                                .and_then(Value::as_str)
                                .map(shorten)
                                .unwrap_or_default(),
                        })
                        .collect()
                })
                .unwrap_or_default(),
            classes: f
                .classes
                .as_array()
                .map(|a| a.iter().map(value_text).collect())
                .unwrap_or_default(),
        }
    }
}

#[derive(Template)]
#[template(path = "host.html")]
pub(super) struct HostPage {
    pub name: String,
    pub status: String,
    pub age: String,
    pub last_seen: String,
    pub silent: bool,
    pub in_inventory: bool,
    pub revoked: bool,
    pub groups: Vec<String>,
    /// `None`: never reported, or unreadable (then `unreadable` says why).
    pub last: Option<LastReport>,
    pub unreadable: String,
    pub recent: Vec<ReportView>,
    pub days: Vec<DayView>,
    /// `(received at, repaired promise)`, newest first.
    pub changes: Vec<(String, PromiseLine)>,
    pub changes_truncated: bool,
    pub facts: FactsSection,
}

pub(super) async fn page(State(app): State<Arc<App>>, Path(name): Path<String>) -> Response {
    let clock = app.clock(DEFAULT_SILENT_INTERVALS);
    let inventory = app.inventory.current();
    let detail =
        match fleet::host_detail(&app.store, &inventory, &name, &clock, RECENT_REPORTS).await {
            Ok(Some(d)) => d,
            Ok(None) => {
                return error(
                    StatusCode::NOT_FOUND,
                    "No such host",
                    &format!(
                        "Neither the inventory nor the stored reports know a host named {:?}.",
                        shorten(&name)
                    ),
                )
            }
            Err(e) => return store_error(&e),
        };
    let changes = match fleet::changes(
        &app.store,
        clock.now.saturating_sub(CHANGES_WINDOW_SECONDS),
        clock.now.saturating_add(1),
        Some(&name),
        CHANGES_SHOWN,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => return store_error(&e),
    };
    let facts = match fleet::facts(&app.store, &inventory, Some(&name)).await {
        Ok(f) => f,
        Err(e) => return store_error(&e),
    };
    let facts = facts
        .hosts
        .first()
        .map(FactsSection::of)
        .unwrap_or_default();
    html(
        StatusCode::OK,
        &host_page(detail, &changes.changes, changes.truncated, facts),
    )
}

fn host_page(
    detail: HostDetail,
    changes: &[ChangeView],
    changes_truncated: bool,
    facts: FactsSection,
) -> HostPage {
    let h = &detail.host;
    let (last, unreadable) = match detail.last_report.map(serde_json::from_value::<Report>) {
        None => (None, String::new()),
        Some(Ok(report)) => (Some(LastReport::of(&report)), String::new()),
        Some(Err(e)) => (None, format!("The stored report cannot be read: {e}.")),
    };
    HostPage {
        name: h.name.clone(),
        status: h.status.clone(),
        age: age(h.age_seconds),
        last_seen: h.last_seen.clone().unwrap_or_default(),
        silent: h.silent,
        in_inventory: h.in_inventory,
        revoked: h.revoked,
        groups: h.groups.clone(),
        last,
        unreadable,
        recent: detail.recent_reports,
        days: detail.daily_summaries,
        changes: changes.iter().map(PromiseLine::of_change).collect(),
        changes_truncated,
        facts,
    }
}
