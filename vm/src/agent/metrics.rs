//! `converge.prom`: the last agent run in the Prometheus text exposition
//! format, for node_exporter's textfile collector. It lives in its own
//! directory, `metrics_dir` (default `ROOT/var/lib/converge/metrics`),
//! mode 0755 with the file 0644: Debian's node_exporter runs as user
//! `prometheus`, which must read it, while the rest of the state
//! directory stays private (see [`write`]). Written atomically, so the
//! collector never reads half a file.
//!
//! Values that carry over from run to run are read back from the previous
//! file: the time of the last successful run and the counters.

use std::fmt::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use crate::state::StateDir;

/// The textfile's name in `metrics_dir` (node_exporter reads `*.prom`).
pub const TEXTFILE: &str = "converge.prom";

/// The largest previous textfile read back.
const MAX_TEXTFILE: u64 = 64 * 1024;

/// What one agent run contributes to the metrics.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    pub kept: usize,
    pub repaired: usize,
    pub failed: usize,
    pub skipped: usize,
    /// `watch` promises that saw a change (outcome `changed`).
    pub changed: usize,
    /// Entries the `watch` promises reported changed.
    pub watch_changed_entries: u64,
    /// Records in the `watch` history after the run.
    pub watch_history_length: u64,
    /// Whether the run found the `watch` history broken.
    pub watch_history_broken: bool,
    /// Extra entries the `unmanaged` promises found, per type (package,
    /// service, user, group, in that order).
    pub unmanaged_entries: [usize; 4],
    /// Whether a bundle ran at all.
    pub ran: bool,
    pub converged: bool,
    pub duration_seconds: f64,
    /// The serial of the bundle that ran (0 when none did).
    pub serial: u64,
    /// When this run started (UNIX seconds).
    pub now: u64,
    /// The last run that converged without a failure.
    pub last_success: Option<u64>,
    /// Pulls that failed or were refused, over the life of the state dir.
    pub pull_failures_total: u64,
    /// The stamp in force has expired: the source may be frozen.
    pub stale: bool,
    /// Expiry of the stamp in force.
    pub stamp_expires: Option<u64>,
    /// Notifications still owed after the run (a restart that failed or
    /// never came: LANGUAGE.md §13).
    pub owed_notifications: usize,
    /// Whether this host has an identity to sign reports with.
    pub enrolled: bool,
    /// Reports a collector took, over the life of the state directory.
    pub reports_sent_total: u64,
    /// Reports a collector refused for good (4xx) and that were dropped.
    pub reports_refused_total: u64,
    /// Reports dropped from a full spool.
    pub reports_dropped_total: u64,
    /// Reports waiting in the spool after this cycle.
    pub reports_spooled: u64,
    /// Wall time of this cycle's upload step (signing, sending, spooling).
    pub upload_seconds: f64,
}

/// The value of an unlabelled sample in a previous file.
pub fn previous(text: &str, metric: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.strip_prefix(metric)?.strip_prefix(' ')?;
        rest.trim().parse().ok()
    })
}

impl Metrics {
    pub fn render(&self) -> String {
        let mut out = String::new();
        let mut gauge = |name: &str, help: &str, samples: &[(&str, String)]| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(
                out,
                "# TYPE {name} {}",
                if name.ends_with("_total") {
                    "counter"
                } else {
                    "gauge"
                }
            );
            for (labels, value) in samples {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        gauge(
            "converge_promises",
            "Promises of the last agent run, by outcome.",
            &[
                ("{outcome=\"kept\"}", self.kept.to_string()),
                ("{outcome=\"repaired\"}", self.repaired.to_string()),
                ("{outcome=\"failed\"}", self.failed.to_string()),
                ("{outcome=\"skipped\"}", self.skipped.to_string()),
                ("{outcome=\"changed\"}", self.changed.to_string()),
            ],
        );
        let flag = |b: bool| u8::from(b).to_string();
        let per_type: Vec<(String, String)> = converge_format::schema::UNMANAGED_TYPES
            .iter()
            .zip(self.unmanaged_entries)
            .map(|(t, n)| (format!("{{type=\"{t}\"}}"), n.to_string()))
            .collect();
        let per_type: Vec<(&str, String)> = per_type
            .iter()
            .map(|(l, n)| (l.as_str(), n.clone()))
            .collect();
        gauge(
            "converge_unmanaged_entries",
            "Extra entries of the last run: what the host has that no promise names (unmanaged promises), by type.",
            &per_type,
        );
        gauge(
            "converge_watch_changed_entries",
            "Entries the watch promises of the last run reported added, removed or modified.",
            &[("", self.watch_changed_entries.to_string())],
        );
        gauge(
            "converge_watch_history_length",
            "Records in the tamper-evident watch history after the last run.",
            &[("", self.watch_history_length.to_string())],
        );
        gauge(
            "converge_watch_history_broken",
            "1 when the last run found the watch history or a database broken (and rebuilt it).",
            &[("", flag(self.watch_history_broken))],
        );
        gauge(
            "converge_run_converged",
            "1 when the last run converged: a pass repaired nothing and set no new class (failed promises are counted in converge_promises).",
            &[("", flag(self.ran && self.converged))],
        );
        gauge(
            "converge_run_duration_seconds",
            "Wall time of the last run's passes.",
            &[("", format!("{:.6}", self.duration_seconds))],
        );
        gauge(
            "converge_bundle_serial",
            "Serial of the bundle the last run enforced (0: none).",
            &[("", self.serial.to_string())],
        );
        gauge(
            "converge_last_run_timestamp_seconds",
            "When the last agent run started.",
            &[("", self.now.to_string())],
        );
        gauge(
            "converge_last_success_timestamp_seconds",
            "When the last run that converged without a failure started (0: never).",
            &[("", self.last_success.unwrap_or(0).to_string())],
        );
        gauge(
            "converge_pull_failures_total",
            "Pulls that could not reach any hub or were refused.",
            &[("", self.pull_failures_total.to_string())],
        );
        gauge(
            "converge_policy_stale",
            "1 when the stamp in force has expired: the hub or a mirror may be frozen.",
            &[("", flag(self.stale))],
        );
        gauge(
            "converge_stamp_expiry_timestamp_seconds",
            "Expiry of the stamp in force (0: none).",
            &[("", self.stamp_expires.unwrap_or(0).to_string())],
        );
        gauge(
            "converge_owed_notifications",
            "Notifications (restarts, reloads, notified commands) still owed after the last run.",
            &[("", self.owed_notifications.to_string())],
        );
        gauge(
            "converge_enrolled",
            "1 when this host has an identity to sign its reports (`policyvm enroll`).",
            &[("", flag(self.enrolled))],
        );
        gauge(
            "converge_report_uploads_total",
            "Run reports a collector took.",
            &[("", self.reports_sent_total.to_string())],
        );
        gauge(
            "converge_report_refused_total",
            "Run reports a collector refused for good (unknown or revoked host, bad signature); dropped.",
            &[("", self.reports_refused_total.to_string())],
        );
        gauge(
            "converge_report_spool_dropped_total",
            "Run reports dropped, oldest first, from a full spool.",
            &[("", self.reports_dropped_total.to_string())],
        );
        gauge(
            "converge_report_spooled",
            "Run reports waiting in the spool for a collector.",
            &[("", self.reports_spooled.to_string())],
        );
        gauge(
            "converge_report_upload_duration_seconds",
            "Wall time of the last cycle's report upload (signing, sending, spooling).",
            &[("", format!("{:.6}", self.upload_seconds))],
        );
        out
    }
}

/// The previous textfile in `dir` (empty when there is none).
pub fn read_previous(dir: &Path) -> String {
    let Ok(fd) = rustix::fs::open(
        dir,
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECTORY | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) else {
        return String::new();
    };
    crate::rootfs::read_at(&fd, TEXTFILE, MAX_TEXTFILE, TEXTFILE)
        .ok()
        .flatten()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Writes `text` as `dir/converge.prom` (0644), atomically. A missing
/// `dir` is created 0755. When `dir` is inside the state directory (the
/// default), the state directory is given search permission for others
/// (0711: they can reach `metrics/` but list nothing, and every other file
/// in it is 0600), without which node_exporter could not open the file.
///
/// The default directory (`metrics/` of the state directory, which may be
/// inside a `--root`) is opened through the state directory's handle
/// without following a link, like `identity/` and `spool/`: a link planted
/// in the root cannot send the textfile elsewhere. A directory configured
/// elsewhere is the operator's own path and is created as given.
pub fn write(dir: &Path, state: &StateDir, text: &str) -> std::io::Result<()> {
    let state_dir = state.path("");
    let state_dir = state_dir.components().as_path();
    if let Ok(rel) = dir.strip_prefix(state_dir) {
        let meta = std::fs::metadata(state_dir)?;
        let mode = meta.permissions().mode() & 0o7777;
        if mode & 0o011 != 0o011 {
            std::fs::set_permissions(state_dir, std::fs::Permissions::from_mode(mode | 0o011))?;
        }
        if let Some(name) = rel.to_str().filter(|n| !n.is_empty() && !n.contains('/')) {
            let sub = state.subdir(name, 0o755)?;
            // mkdir's mode is cut by the umask; node_exporter needs 0755.
            if sub.info()?.mode & 0o755 != 0o755 {
                std::fs::set_permissions(sub.path(""), std::fs::Permissions::from_mode(0o755))?;
            }
            return sub.write(TEXTFILE, text.as_bytes(), 0o644);
        }
    }
    if std::fs::symlink_metadata(dir).is_err() {
        std::fs::DirBuilder::new().recursive(true).create(dir)?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    crate::state::write_atomically_with_mode(dir, TEXTFILE, text.as_bytes(), 0o644)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rendered_text_is_valid_exposition_format_and_reads_back() {
        let m = Metrics {
            kept: 1000,
            repaired: 2,
            ran: true,
            converged: true,
            duration_seconds: 0.0125,
            serial: 1_795_308_900,
            now: 1_795_309_000,
            last_success: Some(1_795_309_000),
            pull_failures_total: 3,
            stamp_expires: Some(1_795_900_000),
            owed_notifications: 1,
            unmanaged_entries: [2, 0, 1, 0],
            ..Metrics::default()
        };
        let text = m.render();
        assert!(text.contains("converge_unmanaged_entries{type=\"package\"} 2\n"));
        assert!(text.contains("converge_unmanaged_entries{type=\"user\"} 1\n"));
        assert!(text.contains("converge_unmanaged_entries{type=\"group\"} 0\n"));
        insta::assert_snapshot!(text);
        assert_eq!(previous(&text, "converge_pull_failures_total"), Some(3));
        assert_eq!(
            previous(&text, "converge_last_success_timestamp_seconds"),
            Some(1_795_309_000)
        );
        assert_eq!(previous(&text, "converge_bundle"), None);
        assert_eq!(previous(&text, "converge_owed_notifications"), Some(1));
        assert_eq!(previous(&text, "converge_report_uploads_total"), Some(0));
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(name.starts_with("converge_"), "{line}");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
