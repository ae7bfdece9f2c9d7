//! The fleet views as text for people: aligned tables and short ages.
//!
//! Everything in a view comes from hosts' reports, which a compromised
//! host writes: before it reaches a terminal, every control character
//! (escape sequences that move the cursor, rewrite the title, hide lines)
//! is shown escaped ([`clean`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::views::{
    ChangeList, FactsList, FailureList, HostDetail, HostList, PromiseAcross, RolloutView, Status,
    TamperedList,
};

/// `text` with control characters escaped (`\u{1b}`), so it prints as
/// what it is and never acts on the terminal.
pub fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// A table: a header row, then the rows, each column as wide as its
/// widest cell (in characters), separated by two spaces.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let cleaned: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| clean(c)).collect())
        .collect();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in &cleaned {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let header: Vec<String> = headers.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(&cleaned) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let width = widths.get(i).copied().unwrap_or(0);
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `42s`, `5m`, `3h`, `2d`: how long ago, at the coarsest unit that fits.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3_600 => format!("{}m", s / 60),
        3_600..86_400 => format!("{}h", s / 3_600),
        _ => format!("{}d", s / 86_400),
    }
}

fn plural(n: u64, word: &str) -> String {
    if n == 1 {
        format!("{n} {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// `policyc fleet rollout`: the failure rate of each serial, then each
/// host's serial and status.
pub fn rollout(view: &RolloutView) -> String {
    let serials: Vec<Vec<String>> = view
        .serials
        .iter()
        .map(|s| {
            vec![
                s.serial.to_string(),
                s.hosts.to_string(),
                s.failed.to_string(),
                format!("{:.1}%", s.failure_rate * 100.0),
            ]
        })
        .collect();
    let hosts: Vec<Vec<String>> = view
        .hosts
        .iter()
        .map(|h| {
            let mut status = h.status.clone();
            if h.silent {
                status.push_str(" (silent)");
            }
            vec![
                h.name.clone(),
                h.serial.map_or("-".to_owned(), |s| s.to_string()),
                status,
            ]
        })
        .collect();
    format!(
        "{} on {}, as of {}\n{}\n{}",
        plural(view.hosts.len() as u64, "host"),
        plural(view.serials.len() as u64, "serial"),
        clean(&view.generated_at),
        table(&["SERIAL", "HOSTS", "FAILED", "FAILURE RATE"], &serials),
        table(&["HOST", "SERIAL", "STATUS"], &hosts),
    )
}

/// `policyc fleet status`.
pub fn status(view: &Status) -> String {
    let mut rows: Vec<Vec<String>> = view
        .by_status
        .iter()
        .map(|(status, n)| vec![status.clone(), n.to_string()])
        .collect();
    // The collector's order (kept, repaired, failed, refused, never) reads
    // best; its map is sorted by name, so put the known ones first.
    let order = ["kept", "repaired", "failed", "refused", "never"];
    rows.sort_by_key(|r| {
        let name = r.first().map(String::as_str).unwrap_or_default();
        (
            order.iter().position(|o| *o == name).unwrap_or(order.len()),
            name.to_owned(),
        )
    });
    rows.push(vec!["silent".to_owned(), view.silent.to_string()]);
    format!(
        "{} ({} stored), as of {}\n{}silent: no report for more than {} ({} of {})\n",
        plural(view.hosts, "host"),
        plural(u64::try_from(view.reports).unwrap_or(0), "report"),
        clean(&view.generated_at),
        table(&["STATUS", "HOSTS"], &rows),
        age(view.silent_after_seconds),
        plural(
            u64::try_from(
                view.silent_after_seconds
                    .checked_div(view.interval_seconds)
                    .unwrap_or(0)
            )
            .unwrap_or(0),
            "interval"
        ),
        age(view.interval_seconds),
    )
}

/// `policyc fleet tampered`: each flagged host, its verdict, and the last
/// head of its history the collector still trusts.
pub fn tampered(view: &TamperedList) -> String {
    if view.hosts.is_empty() {
        return format!(
            "no tampered hosts: every watch history extends the last head seen, as of {}\n",
            clean(&view.generated_at)
        );
    }
    let head = |length: u64, head: &str| format!("{length} {head}");
    let rows: Vec<Vec<String>> = view
        .hosts
        .iter()
        .map(|h| {
            let verdict = match &h.detail {
                Some(d) => format!("{} ({d})", h.verdict),
                None => h.verdict.clone(),
            };
            vec![
                h.name.clone(),
                verdict,
                h.flagged_at.clone(),
                h.alarms.to_string(),
                head(h.last_consistent.length, &h.last_consistent.head),
                h.offending
                    .as_ref()
                    .map_or("-".to_owned(), |o| head(o.length, &o.head)),
            ]
        })
        .collect();
    format!(
        "{} tampered\n{}",
        plural(view.hosts.len() as u64, "host"),
        table(
            &[
                "HOST",
                "VERDICT",
                "FLAGGED",
                "ALARMS",
                "LAST CONSISTENT HEAD",
                "OFFENDING HEAD"
            ],
            &rows
        )
    )
}

/// `policyc fleet hosts` and `policyc fleet silent`.
pub fn hosts(view: &HostList) -> String {
    let rows: Vec<Vec<String>> = view
        .hosts
        .iter()
        .map(|h| {
            let mut status = h.status.clone();
            if h.revoked {
                status.push_str(" (revoked)");
            } else if !h.in_inventory {
                status.push_str(" (not in inventory)");
            }
            let seen = match h.age_seconds {
                Some(a) => format!("{} ago", age(a)),
                None => "never".to_owned(),
            };
            let seen = if h.silent {
                format!("{seen} (silent)")
            } else {
                seen
            };
            let serial = match (&h.bundle_name, h.bundle_serial) {
                (Some(name), Some(serial)) => format!("{name} {serial}"),
                (None, Some(serial)) => serial.to_string(),
                _ => "-".to_owned(),
            };
            vec![h.name.clone(), status, seen, serial]
        })
        .collect();
    if rows.is_empty() {
        return "no hosts\n".to_owned();
    }
    table(&["HOST", "STATUS", "LAST SEEN", "BUNDLE"], &rows)
}

/// `policyc fleet host NAME`: the host, its recent runs, and what its
/// last report did not keep.
pub fn host(view: &HostDetail) -> String {
    let h = &view.host;
    let seen = match h.age_seconds {
        Some(a) => format!("last seen {} ago", age(a)),
        None => "never reported".to_owned(),
    };
    let mut about = vec![h.status.clone(), seen];
    if h.silent {
        about.push("silent".to_owned());
    }
    if let (Some(name), Some(serial)) = (&h.bundle_name, h.bundle_serial) {
        about.push(format!("bundle {name} {serial}"));
    }
    if !h.groups.is_empty() {
        about.push(format!("groups: {}", h.groups.join(", ")));
    }
    if h.revoked {
        about.push("revoked".to_owned());
    }
    let mut out = format!(
        "{}: {}
",
        clean(&h.name),
        clean(&about.join(", "))
    );
    if !view.recent_reports.is_empty() {
        let rows: Vec<Vec<String>> = view
            .recent_reports
            .iter()
            .map(|r| {
                vec![
                    r.received_at.clone(),
                    r.sequence.to_string(),
                    r.status.clone(),
                    r.kept.to_string(),
                    r.repaired.to_string(),
                    r.failed.to_string(),
                    r.skipped.to_string(),
                    r.bundle_serial.map_or("-".to_owned(), |s| s.to_string()),
                ]
            })
            .collect();
        out.push_str(&table(
            &[
                "RECEIVED", "RUN", "STATUS", "KEPT", "REPAIRED", "FAILED", "SKIPPED", "SERIAL",
            ],
            &rows,
        ));
    }
    let promises = view
        .last_report
        .get("promises")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !promises.is_empty() {
        let field = |p: &Value, k: &str| p.get(k).map(value).unwrap_or_default();
        let rows: Vec<Vec<String>> = promises
            .iter()
            .map(|p| {
                vec![
                    format!("{} {}", field(p, "type"), field(p, "promiser")),
                    field(p, "outcome"),
                    field(p, "source"),
                    p.get("error")
                        .filter(|e| !e.is_null())
                        .map(value)
                        .unwrap_or_default(),
                ]
            })
            .collect();
        out.push_str("not kept in the last report:\n");
        out.push_str(&table(&["PROMISE", "OUTCOME", "SOURCE", "ERROR"], &rows));
    }
    out
}

/// `policyc fleet promise --type T --promiser P`: its outcome on every
/// host's last report.
pub fn promise(view: &PromiseAcross) -> String {
    let counts: Vec<String> = view
        .counts
        .iter()
        .map(|(outcome, n)| format!("{outcome} {n}"))
        .collect();
    let mut out = format!(
        "{} {}: {}\n",
        clean(&view.kind),
        clean(&view.promiser),
        clean(&counts.join(", "))
    );
    let rows: Vec<Vec<String>> = view
        .hosts
        .iter()
        .map(|h| {
            vec![
                h.host.clone(),
                h.outcome.clone(),
                h.source.clone().unwrap_or_else(|| "-".to_owned()),
                h.error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&table(&["HOST", "OUTCOME", "SOURCE", "ERROR"], &rows));
    out
}

/// At most this many host names in a cell; the rest are counted.
const NAMES_SHOWN: usize = 5;

fn names(names: &[&str]) -> String {
    let shown: Vec<&str> = names.iter().take(NAMES_SHOWN).copied().collect();
    let mut text = shown.join(", ");
    if names.len() > NAMES_SHOWN {
        let _ = write!(text, " and {} more", names.len() - NAMES_SHOWN);
    }
    text
}

/// `policyc fleet failures`.
pub fn failures(view: &FailureList) -> String {
    if view.failures.is_empty() {
        return "no failing promises in the hosts' last reports\n".to_owned();
    }
    let rows: Vec<Vec<String>> = view
        .failures
        .iter()
        .map(|f| {
            let hosts: Vec<&str> = f.hosts.iter().map(|h| h.host.as_str()).collect();
            vec![
                format!("{} {}", f.kind, f.promiser),
                f.source.clone(),
                hosts.len().to_string(),
                names(&hosts),
                f.last_error.clone().unwrap_or_default(),
            ]
        })
        .collect();
    table(
        &["PROMISE", "SOURCE", "HOSTS", "WHICH", "LAST ERROR"],
        &rows,
    )
}

/// `policyc fleet changes`.
pub fn changes(view: &ChangeList) -> String {
    let mut out = format!(
        "changes from {} to {}\n",
        clean(&view.since),
        clean(&view.until)
    );
    if view.changes.is_empty() {
        out.push_str("no changes\n");
        return out;
    }
    let rows: Vec<Vec<String>> = view
        .changes
        .iter()
        .map(|c| {
            vec![
                c.received_at.clone(),
                c.host.clone(),
                format!("{} {}", c.kind, c.promiser),
                c.source.clone(),
                c.what().join(", "),
            ]
        })
        .collect();
    out.push_str(&table(
        &["TIME", "HOST", "PROMISE", "SOURCE", "CHANGED"],
        &rows,
    ));
    if view.truncated {
        out.push_str("(more changes in this window: ask for a shorter one with --since)\n");
    }
    out
}

/// A fact value as one line: strings bare, the rest as JSON.
fn value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `policyc fleet facts`: one block per host.
pub fn facts(view: &FactsList) -> String {
    if view.hosts.is_empty() {
        return "no hosts\n".to_owned();
    }
    let mut out = String::new();
    for host in &view.hosts {
        let mut about = Vec::new();
        if !host.groups.is_empty() {
            about.push(format!("groups: {}", host.groups.join(", ")));
        }
        about.push(match &host.reported_at {
            Some(at) => format!("reported {at}"),
            None => "never reported".to_owned(),
        });
        if !host.in_inventory {
            about.push("not in inventory".to_owned());
        }
        let _ = writeln!(out, "{} ({})", clean(&host.host), clean(&about.join("; ")));
        let mut rows: Vec<Vec<String>> = Vec::new();
        for (k, v) in &host.inventory_facts {
            rows.push(vec!["inventory".to_owned(), k.clone(), value(v)]);
        }
        for (source, facts) in [("sys", &host.sys), ("probe", &host.probes)] {
            let map: BTreeMap<String, Value> = facts
                .as_object()
                .map(|o| o.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default();
            for (k, v) in map {
                // A probe is `{value, error}`: its value, or why it has none.
                let shown = match (source, v.get("value"), v.get("error")) {
                    ("probe", Some(val), _) if !val.is_null() => value(val),
                    ("probe", _, Some(Value::String(e))) => format!("unknown: {e}"),
                    _ => value(&v),
                };
                rows.push(vec![source.to_owned(), k, shown]);
            }
        }
        if let Some(classes) = host.classes.as_array() {
            let names: Vec<String> = classes.iter().map(value).collect();
            if !names.is_empty() {
                rows.push(vec!["classes".to_owned(), String::new(), names.join(", ")]);
            }
        }
        if !rows.is_empty() {
            for line in table(&["SOURCE", "FACT", "VALUE"], &rows).lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn columns_align_on_the_widest_cell() {
        let text = table(
            &["HOST", "STATUS"],
            &[
                vec!["web-01".into(), "kept".into()],
                vec!["a".into(), "failed".into()],
            ],
        );
        assert_eq!(text, "HOST    STATUS\nweb-01  kept\na       failed\n");
    }

    #[test]
    fn control_characters_never_reach_the_terminal() {
        assert_eq!(
            clean("ok\u{1b}]0;pwned\u{7}x\n"),
            "ok\\u{1b}]0;pwned\\u{7}x\\n"
        );
        let text = table(&["A"], &[vec!["\u{1b}[2J".into()]]);
        assert!(!text.contains('\u{1b}'), "{text:?}");
    }

    #[test]
    fn ages_use_the_coarsest_unit() {
        assert_eq!(age(42), "42s");
        assert_eq!(age(300), "5m");
        assert_eq!(age(7_200), "2h");
        assert_eq!(age(200_000), "2d");
        assert_eq!(age(-5), "0s");
    }

    #[test]
    fn long_host_lists_are_counted() {
        let many = ["a", "b", "c", "d", "e", "f", "g"];
        assert_eq!(names(&many), "a, b, c, d, e and 2 more");
    }

    #[test]
    fn the_rollout_table_shows_failure_rates_and_each_host_serial() {
        let view: RolloutView = super::super::views::parse(
            br#"{"format":"converge-fleet/1","generated_at":"2026-11-24T00:00:00Z",
                "serials":[{"serial":2,"hosts":2,"failed":1,"failure_rate":0.5},
                           {"serial":1,"hosts":38,"failed":0,"failure_rate":0.0}],
                "hosts":[{"name":"web-01","serial":2,"status":"failed","silent":false},
                         {"name":"web-02","serial":null,"status":"never","silent":true}],
                "without_serial":1}"#,
        )
        .unwrap();
        let text = rollout(&view);
        assert!(text.contains("SERIAL  HOSTS  FAILED  FAILURE RATE\n2       2      1       50.0%\n1       38     0       0.0%\n"), "{text}");
        assert!(text.contains("web-01  2       failed\n"), "{text}");
        assert!(text.contains("web-02  -       never (silent)\n"), "{text}");
    }
}
