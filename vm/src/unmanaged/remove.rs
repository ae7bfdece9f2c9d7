//! Removing extra entries through the backends, as a promise of their type
//! with `ensure = absent` would: packages in ONE `dpkg --remove`
//! transaction, services disabled (and stopped, on the real system), users
//! and groups with `userdel`/`groupdel`. Every name is checked with the
//! one name grammar ([`crate::schema::name_problem`]) before any tool
//! sees it: a name with control characters or a leading `-` is never
//! passed on, its removal fails with the reason.

use std::sync::Arc;

use super::list::Found;
use super::Run;
use crate::backend::toolset::{self, Toolset};
use crate::backend::{accounts, perform, sandbox, service, Step};
use crate::instance::{Instance, Value};
use crate::outcome::{Applied, Change, Outcome};
use crate::schema::name_problem;

/// What the removal of the extras did.
#[derive(Debug, Default)]
pub struct Done {
    /// Per extra entry (in order): removed (or would be), or why not.
    pub per_entry: Vec<Result<(), String>>,
    /// One change per entry removed (or that would be).
    pub changes: Vec<Change>,
    /// What the tools printed (`$ command` then its output).
    pub log: String,
}

/// Removes `extra`, entries of type `kind`.
pub fn remove(run: &Run<'_>, kind: &str, extra: &[Found]) -> Done {
    if kind == "package" {
        return match toolset::of_root(run.fs) {
            Ok(toolset) => packages(run, toolset.as_ref(), extra),
            Err(why) => Done {
                per_entry: extra.iter().map(|_| Err(why.clone())).collect(),
                ..Done::default()
            },
        };
    }
    let names: Vec<Result<&str, String>> = extra.iter().map(|f| usable(kind, f, None)).collect();
    let mut done = Done::default();
    for (f, name) in extra.iter().zip(names) {
        let result = name.and_then(|name| {
            let applied = one(run, kind, name);
            if let Some(out) = &applied.output {
                done.log.push_str(out);
            }
            match applied.outcome {
                Outcome::Failed(why) | Outcome::Skipped(why) => {
                    Err(format!("cannot remove {kind} `{}`: {why}", f.shown))
                }
                Outcome::Kept | Outcome::Repaired | Outcome::Changed => {
                    let how: Vec<String> = applied
                        .changes
                        .iter()
                        .filter(|c| c.what != "note")
                        .map(|c| format!("{} {}", c.what, c.after))
                        .collect();
                    done.changes.push(removed(kind, f, &how.join(", ")));
                    Ok(())
                }
            }
        });
        done.per_entry.push(result);
    }
    done
}

/// The name of `f` as a tool may be given it, or why it may not (for a
/// package, by the rules of the `toolset` that would remove it).
fn usable<'f>(kind: &str, f: &'f Found, toolset: Option<&dyn Toolset>) -> Result<&'f str, String> {
    let Some(name) = f.name.as_deref() else {
        return Err(format!(
            "`{}` is not UTF-8: no {kind} tool is given it; remove it by hand",
            f.shown
        ));
    };
    let why = name_problem(name).or_else(|| toolset.and_then(|t| t.name_problem(name)));
    match why {
        Some(why) => Err(format!(
            "`{}` is not a valid {kind} name: {why}; it is passed to no tool, remove it by hand",
            f.shown
        )),
        None => Ok(name),
    }
}

fn removed(kind: &str, f: &Found, how: &str) -> Change {
    Change {
        what: format!("removed {kind}"),
        before: f.shown.clone(),
        after: if how.is_empty() {
            "absent".to_owned()
        } else {
            format!("absent ({how})")
        },
        diff: None,
    }
}

/// One service, user or group, removed as a promise of its type would.
fn one(run: &Run<'_>, kind: &str, name: &str) -> Applied {
    let str_value = |s: &str| Value::Str(Arc::from(s));
    match kind {
        "service" => {
            let mut attrs = vec![("enabled", Value::Bool(false))];
            if super::is_real_root(run.fs.path()) {
                attrs.push(("state", str_value("stopped")));
            }
            let inst = Instance {
                index: 0,
                kind: "service",
                promiser: name.to_owned(),
                attrs,
            };
            // A removal needs no simulated state (LANGUAGE.md §17): what it
            // removes is on the host now, and it creates nothing.
            service::service(run.fs, run.dry_run, &|_: &str| false, &inst, false)
        }
        "user" | "group" => {
            let inst = Instance {
                index: 0,
                kind: if kind == "user" { "user" } else { "group" },
                promiser: name.to_owned(),
                attrs: vec![("ensure", str_value("absent"))],
            };
            if kind == "user" {
                accounts::user(run.fs, run.dry_run, None, &inst)
            } else {
                accounts::group(run.fs, run.dry_run, None, &inst)
            }
        }
        other => Applied::failed(format!("no removal for type `{other}`")),
    }
}

/// Every usable package in one removal of the root's toolset (`dpkg
/// --remove`, `rpm -e`), then the listing again: a package still
/// installed on purpose was not removed.
fn packages(run: &Run<'_>, toolset: &dyn Toolset, extra: &[Found]) -> Done {
    let names: Vec<Result<&str, String>> = extra
        .iter()
        .map(|f| usable("package", f, Some(toolset)))
        // No tool is handed a root where a planted link leads out of it, as
        // for a `package` promise's removal (backend/packages.rs).
        .map(|n| {
            let name = n?;
            if sandbox(run.fs.path()).is_some() {
                toolset.contained(run.fs, name, &toolset::Need::Remove, None)?;
            }
            Ok(name)
        })
        .collect();
    let good: Vec<String> = names
        .iter()
        .filter_map(|n| n.as_ref().ok().map(|n| (*n).to_owned()))
        .collect();
    let mut done = Done::default();
    let mut per_entry: Vec<Result<(), String>> = names
        .iter()
        .map(|n| n.as_ref().map(|_| ()).map_err(Clone::clone))
        .collect();
    if good.is_empty() {
        done.per_entry = per_entry;
        return done;
    }
    let cmd = toolset.remove(&good, sandbox(run.fs.path()));
    let steps: Vec<Step> = extra
        .iter()
        .zip(&names)
        .filter(|(_, n)| n.is_ok())
        .enumerate()
        .map(|(i, (f, _))| Step {
            change: removed("package", f, ""),
            cmd: (i == 0).then(|| cmd.clone()),
        })
        .collect();
    match perform(run.dry_run, &steps) {
        Ok((changes, log)) => {
            done.changes = changes;
            done.log = log;
        }
        Err(failed) => {
            let why = match failed.outcome {
                Outcome::Failed(why) => why,
                _ => "the removal failed".to_owned(),
            };
            done.log = failed.output.unwrap_or_default();
            for r in per_entry.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(why.clone());
            }
            done.per_entry = per_entry;
            return done;
        }
    }
    if !run.dry_run {
        // A repair is only a repair if it stuck.
        match super::list::packages(run.fs) {
            Ok(now) => {
                for (f, r) in extra.iter().zip(per_entry.iter_mut()) {
                    if r.is_ok() && now.iter().any(|n| n.shown == f.shown) {
                        *r = Err(format!(
                            "package `{}` is still installed after `{}`",
                            f.shown,
                            cmd.shown()
                        ));
                    }
                }
            }
            Err(e) => {
                for r in per_entry.iter_mut().filter(|r| r.is_ok()) {
                    *r = Err(format!("cannot read the packages again: {e}"));
                }
            }
        }
        done.changes.retain(|c| {
            extra
                .iter()
                .zip(&per_entry)
                .any(|(f, r)| r.is_ok() && f.shown == c.before)
        });
    }
    done.per_entry = per_entry;
    done
}
