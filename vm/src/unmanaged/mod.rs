//! Two-way verification (LANGUAGE.md section 17, Bcfg2's "extra
//! entries"): `unmanaged "package" | "service" | "user" | "group"`.
//!
//! After the run's passes (so after every other promise of the type it
//! names, in whatever pass that promise became active), each `unmanaged`
//! promise lists what the host has of its type ([`list`]) and calls
//! *extra* every entry that no promise of the run named ([`Managed`]) and
//! no `ignore` glob matches. Every extra entry is in the run report
//! ([`Extra`]), the metrics and the uploaded report.
//!
//! With `action = remove` the extras are removed through the backends
//! ([`remove`]), each removal a change of the promise (a repair), unless a
//! rule refuses the whole removal (the promise fails and nothing is
//! removed): a promise of the type failed or was skipped in this run (what
//! the policy manages is then not known for sure), or more than
//! `max_remove` would go (an accidental empty policy never uninstalls a
//! host). A dry run lists what would be removed.
//!
//! An `unmanaged` promise is applied once per run, after the passes: its
//! outcome classes and notifications take effect in the next run.

pub mod list;
mod remove;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use converge_format::globs::NameGlobs;
use converge_format::schema::{
    UNMANAGED_MAX_ID, UNMANAGED_MAX_REMOVE, UNMANAGED_MIN_ID, UNMANAGED_TYPES,
};
use serde::Serialize;

use crate::instance::Instance;
use crate::outcome::{Applied, Change, Outcome};
use crate::rootfs::RootFs;
use list::Found;

/// The promise type of `unmanaged` promises.
pub const KIND: &str = "unmanaged";

/// One extra entry, as every report shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Extra {
    /// The type the entry is of: `package`, `service`, `user`, `group`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Its name, escaped ([`crate::rootfs::escape_name`]).
    pub name: String,
    /// What became of it ([`Action`]).
    pub action: Action,
    /// `file:line` of the `unmanaged` promise that found it.
    pub source: String,
}

/// What became of an extra entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// `action = report`: listed only.
    Reported,
    /// `action = remove`: removed.
    Removed,
    /// `action = remove` in a dry run.
    WouldRemove,
    /// `action = remove`, refused by a rule: nothing was removed.
    Refused,
    /// `action = remove`, and its removal failed.
    Failed,
}

impl Action {
    pub fn word(self) -> &'static str {
        match self {
            Action::Reported => "reported",
            Action::Removed => "removed",
            Action::WouldRemove => "would_remove",
            Action::Refused => "refused",
            Action::Failed => "failed",
        }
    }
}

/// The extra entries per type, in the order of
/// [`converge_format::schema::UNMANAGED_TYPES`] (the metrics' labels).
pub fn counts(extras: &[Extra]) -> [usize; 4] {
    let mut out = [0usize; 4];
    for (slot, kind) in out.iter_mut().zip(UNMANAGED_TYPES) {
        *slot = extras.iter().filter(|e| e.kind == *kind).count();
    }
    out
}

/// What the promises of a run name, per type, over every pass: an entry
/// any of them names is managed, never extra.
#[derive(Clone, Debug, Default)]
pub struct Managed {
    names: BTreeMap<&'static str, BTreeSet<String>>,
}

impl Managed {
    /// Notes what an active instance names. A `user` also names its
    /// primary group (`group`), its supplementary `groups` and its
    /// user-private group (the group of its own name that `useradd`
    /// makes).
    pub fn note(&mut self, inst: &Instance) {
        let Some(kind) = UNMANAGED_TYPES.iter().find(|k| **k == inst.kind) else {
            return;
        };
        self.add(kind, &inst.promiser);
        if *kind == "user" {
            self.add("group", &inst.promiser);
            if let Some(g) = inst.str("group") {
                self.add("group", g);
            }
            for g in inst.list("groups").unwrap_or_default() {
                self.add("group", g);
            }
        }
    }

    fn add(&mut self, kind: &'static str, name: &str) {
        self.names
            .entry(kind)
            .or_default()
            .insert(normal(kind, name).to_owned());
    }

    /// Whether a promise of the run names `name` of type `kind`.
    pub fn names(&self, kind: &str, name: &str) -> bool {
        self.names
            .get(kind)
            .is_some_and(|n| n.contains(normal(kind, name)))
    }
}

/// A name as promises and listings compare it: a systemd `.service` unit
/// by its bare name (`nginx` for `nginx.service`), a package without its
/// architecture (`libc6` for `libc6:i386`), others as they are.
fn normal<'n>(kind: &str, name: &'n str) -> &'n str {
    match kind {
        "service" => name.strip_suffix(".service").unwrap_or(name),
        "package" => name.split_once(':').map_or(name, |(n, _)| n),
        _ => name,
    }
}

/// An `unmanaged` promise's settings, checked.
struct Settings {
    kind: &'static str,
    remove: bool,
    ignore: NameGlobs,
    ids: (u32, u32),
    max_remove: usize,
}

fn settings(inst: &Instance) -> Result<Settings, String> {
    let kind = UNMANAGED_TYPES
        .iter()
        .copied()
        .find(|k| *k == inst.promiser)
        .ok_or_else(|| {
            format!(
                "`unmanaged` cannot verify `{}`: it verifies {}",
                crate::rootfs::printable(&inst.promiser),
                UNMANAGED_TYPES.join(", ")
            )
        })?;
    let globs = inst.list("ignore").unwrap_or_default();
    let ignore = NameGlobs::new(globs).map_err(|(i, why)| {
        format!(
            "`ignore` glob `{}` is not valid: {why}",
            crate::rootfs::printable(globs.get(i).map_or("", String::as_str))
        )
    })?;
    let id = |name: &str, default: i64| {
        let n = inst.int(name).unwrap_or(default);
        u32::try_from(n).map_err(|_| format!("`{name} = {n}` is not an id (0 to 4294967295)"))
    };
    let ids = (
        id("min_id", UNMANAGED_MIN_ID)?,
        id("max_id", UNMANAGED_MAX_ID)?,
    );
    if ids.0 > ids.1 {
        return Err(format!(
            "the id range holds no id: min_id = {} is above max_id = {}",
            ids.0, ids.1
        ));
    }
    let max_remove = inst.int("max_remove").unwrap_or(UNMANAGED_MAX_REMOVE);
    let max_remove = usize::try_from(max_remove)
        .map_err(|_| format!("`max_remove = {max_remove}` is below 0"))?;
    Ok(Settings {
        kind,
        remove: inst.str("action") == Some("remove"),
        ignore,
        ids,
        max_remove,
    })
}

/// What an `unmanaged` promise needs from the run.
#[derive(Debug)]
pub struct Run<'a> {
    pub fs: &'a RootFs,
    pub dry_run: bool,
    /// The root's OS family (`sys.os_family`): which package toolset.
    pub os_family: &'a str,
    /// What the run's promises named.
    pub managed: &'a Managed,
    /// Per type, why removal is refused: a promise of the type that failed
    /// or was skipped in this run (`type "promiser" (file:line)`).
    pub troubled: &'a BTreeMap<String, Vec<String>>,
}

/// Applies one `unmanaged` promise: its outcome, and its extra entries
/// (appended to `extras`, found by the promise at `source`).
pub fn apply(run: &Run<'_>, inst: &Instance, source: &str, extras: &mut Vec<Extra>) -> Applied {
    let s = match settings(inst) {
        Ok(s) => s,
        Err(e) => return Applied::failed(e),
    };
    let found = match find(run, &s) {
        Ok(found) => found,
        Err(e) => return Applied::failed(format!("cannot list the {}s of this host: {e}", s.kind)),
    };
    let extra: Vec<Found> = found
        .into_iter()
        .filter(|f| match &f.name {
            Some(name) => !run.managed.names(s.kind, name) && !s.ignore.matches(name),
            // A name that is not UTF-8: no promise names it, and a glob
            // matches it only as shown.
            None => !s.ignore.matches(&f.shown),
        })
        .collect();
    let entry = |f: &Found, action: Action| Extra {
        kind: s.kind.to_owned(),
        name: f.shown.clone(),
        action,
        source: source.to_owned(),
    };
    // `3 unmanaged users`
    let head = format!(
        "{} unmanaged {}{}",
        extra.len(),
        s.kind,
        if extra.len() == 1 { "" } else { "s" }
    );
    let summary = |what: &str| {
        let names: Vec<&str> = extra.iter().map(|f| f.shown.as_str()).collect();
        format!("{head} {what}: {}", names.join(", "))
    };
    if extra.is_empty() {
        return Applied::kept();
    }
    if !s.remove {
        extras.extend(extra.iter().map(|f| entry(f, Action::Reported)));
        return Applied {
            outcome: Outcome::Kept,
            changes: Vec::new(),
            output: Some(summary("reported")),
        };
    }
    let refusal = match run.troubled.get(s.kind).filter(|t| !t.is_empty()) {
        Some(troubled) => Some(format!(
            "refusing to remove {}: {} of this run failed or was skipped ({}), so what the policy manages is not known for sure; nothing was removed",
            head,
            if troubled.len() == 1 { "a promise of the type" } else { "promises of the type" },
            troubled.join("; ")
        )),
        None if extra.len() > s.max_remove => Some(format!(
            "refusing to remove {}: more than max_remove = {} would go; nothing was removed (raise `max_remove`, or add the entries to the policy or to `ignore`)",
            head,
            s.max_remove
        )),
        None => None,
    };
    if let Some(why) = refusal {
        extras.extend(extra.iter().map(|f| entry(f, Action::Refused)));
        return Applied {
            outcome: Outcome::Failed(why),
            changes: Vec::new(),
            output: Some(summary("found")),
        };
    }
    let done = remove::remove(run, s.kind, &extra);
    for (f, result) in extra.iter().zip(&done.per_entry) {
        let action = match (result, run.dry_run) {
            (Err(_), _) => Action::Failed,
            (Ok(()), true) => Action::WouldRemove,
            (Ok(()), false) => Action::Removed,
        };
        extras.push(entry(f, action));
    }
    let failures: Vec<String> = done
        .per_entry
        .iter()
        .filter_map(|r| r.as_ref().err().cloned())
        .collect();
    let changes: Vec<Change> = done.changes;
    Applied {
        outcome: if !failures.is_empty() {
            Outcome::Failed(failures.join("; "))
        } else if changes.is_empty() {
            Outcome::Kept
        } else {
            Outcome::Repaired
        },
        changes,
        output: (!done.log.is_empty()).then_some(done.log),
    }
}

/// The entries of the promise's type on this host.
fn find(run: &Run<'_>, s: &Settings) -> Result<Vec<Found>, String> {
    match s.kind {
        "package" => list::packages(run.fs, run.os_family),
        "service" => list::services(run.fs, crate::facts::service_manager(run.fs.path())),
        "user" => list::users(run.fs, s.ids),
        _ => list::groups(run.fs, s.ids),
    }
}

/// Whether `root` is the real system (services are then stopped as well
/// as disabled).
fn is_real_root(root: &Path) -> bool {
    crate::backend::sandbox(root).is_none()
}

#[cfg(test)]
mod tests;
