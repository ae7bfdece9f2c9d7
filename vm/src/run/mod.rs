//! `policyvm run`: converging a host to a verified bundle (LANGUAGE.md
//! sections 6-7).
//!
//! A run gathers facts, evaluates classes, then makes passes. In each pass
//! every active promise (in the bundle's order) is resolved on this host and
//! applied by its convergent operator ([`operators`]); outcome classes are
//! set, and a promise whose `after` dependency failed is skipped. Passes
//! stop when one repairs nothing and sets no new class (quiescence), or at
//! the bundle's pass limit: then the run is *not converged*, and the
//! promises that were repaired in every pass are named as oscillating.

pub mod lock;
pub mod operators;
pub mod report;
pub mod resolve;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::time::Instant;

use operators::{Accounts, Applied, Change, Ctx, Outcome};
use resolve::{loop_combinations, resolve, Instance};

use crate::backend;
use crate::backend::packages::{Batcher, Entry};
use crate::bundle::format::Constant;
use crate::bundle::Verified;
use crate::eval::{Evaluator, Val};
use crate::facts::{FactValue, Facts};
use crate::rootfs::RootFs;
use crate::schema::{describes_state, fact_by_id, name_problem, promise_type, PromiserKind};

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Every path of the policy is resolved inside this directory.
    pub root: PathBuf,
    /// Check and report; change nothing.
    pub dry_run: bool,
    /// Classes set from the command line (`--define`).
    pub defines: Vec<String>,
}

/// The result of one promise instance over the whole run.
#[derive(Clone, Debug)]
pub struct PromiseResult {
    pub index: usize,
    pub kind: &'static str,
    pub promiser: String,
    pub outcome: Outcome,
    /// `file:line` of the promise.
    pub source: String,
    pub changes: Vec<Change>,
    pub output: Option<String>,
    /// In how many passes it repaired something.
    pub repaired_passes: u32,
}

#[derive(Clone, Debug)]
pub struct RunReport {
    pub bundle_name: String,
    pub serial: u64,
    pub digest: String,
    pub facts: Facts,
    pub classes: Vec<String>,
    pub passes: u32,
    pub converged: bool,
    pub dry_run: bool,
    pub duration_ms: u128,
    pub promises: Vec<PromiseResult>,
    /// Entries of promised directories that no promise manages.
    pub unmanaged: Vec<String>,
    /// Promises repaired in every pass of a run that did not converge.
    pub oscillating: Vec<String>,
}

pub fn run(v: &Verified, opts: &RunOptions) -> Result<RunReport, String> {
    let started = Instant::now();
    let body = &v.body;
    // Absolute, so that commands (which run with the root as their working
    // directory and in `CONVERGE_ROOT`) see the same path from anywhere.
    let root = std::fs::canonicalize(&opts.root)
        .map_err(|e| format!("cannot open the root `{}`: {e}", opts.root.display()))?;
    let fs = RootFs::open(&root).map_err(|e| e.to_string())?;
    let facts = Facts::gather(&root);
    let accounts = Accounts::read(&fs);
    let ctx = Ctx {
        fs: &fs,
        accounts: &accounts,
        dry_run: opts.dry_run,
    };
    let mut eval = Evaluator::new(body, &facts);
    let mut outcome_classes: Vec<String> = opts.defines.clone();
    let mut classes = eval.classes(&outcome_classes).map_err(|e| e.to_string())?;

    let mut results: Vec<PromiseResult> = Vec::new();
    let mut slot: HashMap<(usize, Vec<String>), usize> = HashMap::new();
    let mut commands_run: HashSet<(usize, Vec<String>)> = HashSet::new();
    // Promises named in the `notify` of a repaired promise.
    let mut notified: HashSet<usize> = HashSet::new();
    // Services notified since they were last restarted.
    let mut restart: HashSet<usize> = HashSet::new();
    let mut unmanaged: BTreeSet<String> = BTreeSet::new();
    let limit = body.header.pass_limit.max(1);
    let mut passes = 0;
    let mut converged = false;

    for pass in 1..=limit {
        passes = pass;
        let mut repaired_any = false;
        let mut failed: HashSet<usize> = HashSet::new();

        // Every active instance of this pass, in order.
        let mut instances: Vec<(usize, Vec<String>, Result<Instance, String>)> = Vec::new();
        for &i in body.order.iter() {
            let i = i as usize;
            let Some(p) = body.promises.get(i) else {
                continue;
            };
            let active = match p.guard {
                None => true,
                Some(g) => eval
                    .run(g, &classes, &[])
                    .map(|v| v == Val::Bool(true))
                    .unwrap_or(false),
            };
            if !active {
                continue;
            }
            let lists: Vec<Vec<String>> = p
                .loops
                .iter()
                .map(|f| match fact_by_id(*f).and_then(|f| facts.get(f.name)) {
                    Some(FactValue::List(l)) => l,
                    _ => Vec::new(),
                })
                .collect();
            match loop_combinations(&lists) {
                Ok(combos) => {
                    for combo in combos {
                        let inst = resolve(body, &mut eval, i, p, &classes, &combo)
                            .map_err(|e| e.to_string());
                        instances.push((i, combo, inst));
                    }
                }
                Err(e) => instances.push((i, Vec::new(), Err(e))),
            }
        }
        let contradictions = runtime_contradictions(&instances);
        let mut packages = Batcher::default();

        for (position, (index, combo, inst)) in instances.iter().enumerate() {
            let inst = match inst {
                Ok(inst) => inst,
                Err(e) => {
                    // A promise over a run-time budget (the evaluator's text
                    // budget, the loop cap) or a body that somehow bypassed
                    // the verifier: the promise fails, the run goes on.
                    let placeholder = Instance {
                        index: *index,
                        kind: "?",
                        promiser: String::new(),
                        attrs: Vec::new(),
                    };
                    let applied = Applied {
                        outcome: Outcome::Failed(e.clone()),
                        changes: Vec::new(),
                        output: None,
                    };
                    failed.insert(*index);
                    record(
                        &mut results,
                        &mut slot,
                        (*index, combo.clone()),
                        &placeholder,
                        applied,
                        v,
                    );
                    continue;
                }
            };
            let key = (inst.index, combo.clone());
            let p = body.promises.get(inst.index);
            let applied = if let Some(reason) = contradictions.get(&key) {
                Applied {
                    outcome: Outcome::Failed(reason.clone()),
                    changes: Vec::new(),
                    output: None,
                }
            } else if p.is_some_and(|p| p.after.iter().any(|a| failed.contains(&(*a as usize)))) {
                Applied {
                    outcome: Outcome::Skipped("a promise it comes after failed".into()),
                    changes: Vec::new(),
                    output: None,
                }
            } else if inst.kind == "command" && commands_run.contains(&key) {
                // A command runs at most once per run; later passes keep
                // its first outcome.
                continue;
            } else if inst.kind == "command" {
                // A notified command runs even if `creates`/`unless` would
                // skip it: that is what notifying it means.
                operators::command(&ctx, inst, notified.contains(&inst.index))
            } else if inst.kind == "package" {
                // Every package promise of the batch this one starts is
                // converged now; the others take their outcome from it.
                packages.apply(&fs, opts.dry_run, position, || {
                    batch_entries(body, &instances, &failed, &contradictions)
                })
            } else {
                apply(&ctx, inst, restart.remove(&inst.index))
            };
            if inst.kind == "command"
                && matches!(applied.outcome, Outcome::Repaired | Outcome::Failed(_))
            {
                commands_run.insert(key.clone());
            }
            if applied.outcome == Outcome::Repaired {
                if let Some(p) = p {
                    notified.extend(p.notify.iter().map(|t| *t as usize));
                    restart.extend(p.notify.iter().map(|t| *t as usize));
                }
            }
            if inst.kind == "directory" && !matches!(applied.outcome, Outcome::Failed(_)) {
                purge(&ctx, inst, &instances, &mut unmanaged);
            }
            if matches!(applied.outcome, Outcome::Failed(_)) {
                failed.insert(inst.index);
            }
            if applied.outcome == Outcome::Repaired {
                repaired_any = true;
            }
            if let Some(p) = p {
                let set = match applied.outcome {
                    Outcome::Repaired => p.on_repaired,
                    Outcome::Kept => p.on_kept,
                    Outcome::Failed(_) => p.on_failed,
                    Outcome::Skipped(_) => None,
                };
                if let Some(Constant::Word(c) | Constant::Str(c)) =
                    set.and_then(|c| body.constants.get(c as usize))
                {
                    if !outcome_classes.contains(c) {
                        outcome_classes.push(c.clone());
                    }
                }
            }
            record(&mut results, &mut slot, key, inst, applied, v);
        }

        // Outcome classes may make other classes and promises active.
        let next = eval.classes(&outcome_classes).map_err(|e| e.to_string())?;
        let new_class = next != classes;
        classes = next;
        if !repaired_any && !new_class {
            converged = true;
            break;
        }
        if opts.dry_run && !new_class {
            // Nothing was changed, so another pass would see the same.
            converged = true;
            break;
        }
    }

    let oscillating = if converged {
        Vec::new()
    } else {
        results
            .iter()
            .filter(|r| r.repaired_passes >= passes)
            .map(|r| format!("{} {:?} ({})", r.kind, r.promiser, r.source))
            .collect()
    };
    Ok(RunReport {
        bundle_name: body.header.name.clone(),
        serial: body.header.serial,
        digest: crate::bundle::error::hex(&v.digest),
        facts: facts.clone(),
        classes: classes.into_iter().collect(),
        passes,
        converged,
        dry_run: opts.dry_run,
        duration_ms: started.elapsed().as_millis(),
        promises: results,
        unmanaged: unmanaged.into_iter().collect(),
        oscillating,
    })
}

/// The instances of a pass as the package batcher sees them.
fn batch_entries<'a>(
    body: &'a crate::bundle::format::Body,
    instances: &'a [(usize, Vec<String>, Result<Instance, String>)],
    failed: &HashSet<usize>,
    contradictions: &HashMap<(usize, Vec<String>), String>,
) -> Vec<Entry<'a>> {
    instances
        .iter()
        .map(|(index, combo, inst)| {
            let after: &[u32] = body.promises.get(*index).map_or(&[], |p| &p.after.0[..]);
            Entry {
                index: *index,
                inst: inst.as_ref().ok(),
                after,
                blocked: contradictions.contains_key(&(*index, combo.clone()))
                    || after.iter().any(|a| failed.contains(&(*a as usize))),
            }
        })
        .collect()
}

/// Applies one promise by its operator; `notified` tells a service that a
/// repaired promise asked for its restart.
fn apply(ctx: &Ctx<'_>, inst: &Instance, notified: bool) -> Applied {
    let named = promise_type(inst.kind).is_some_and(|t| t.promiser == PromiserKind::Name);
    if let Some(why) = named.then(|| name_problem(&inst.promiser)).flatten() {
        return Applied {
            outcome: Outcome::Failed(format!(
                "`{}` is not a valid {} name: {why}; it is passed to no tool",
                inst.promiser.escape_debug(),
                inst.kind
            )),
            changes: Vec::new(),
            output: None,
        };
    }
    match inst.kind {
        "file" => operators::file(ctx, inst),
        "directory" => operators::directory(ctx, inst),
        "link" => operators::link(ctx, inst),
        "line" => operators::line(ctx, inst),
        "command" => operators::command(ctx, inst, false),
        "report" => Applied {
            outcome: Outcome::Kept,
            changes: Vec::new(),
            output: inst.str("message").map(str::to_owned),
        },
        "package" => backend::packages::converge(ctx.fs, ctx.dry_run, &[inst])
            .pop()
            .unwrap_or_else(|| Applied::failed("no outcome for this package")),
        "service" => backend::service::service(ctx.fs, ctx.dry_run, inst, notified),
        "process" => backend::processes::converge(ctx.fs, ctx.dry_run, inst),
        "mount" => backend::mount::converge(ctx.fs, ctx.dry_run, inst),
        "kernel_module" => backend::kmod::converge(ctx.fs, ctx.dry_run, inst),
        "sysctl" => backend::sysctl::converge(ctx.fs, ctx.dry_run, inst),
        "user" | "group" => {
            let applied = if inst.kind == "user" {
                backend::accounts::user(ctx.fs, ctx.dry_run, inst)
            } else {
                backend::accounts::group(ctx.fs, ctx.dry_run, inst)
            };
            if applied.outcome == Outcome::Repaired && !ctx.dry_run {
                ctx.accounts.reload(ctx.fs);
            }
            applied
        }
        kind => Applied {
            outcome: Outcome::Failed(format!("unknown promise type `{kind}`")),
            changes: Vec::new(),
            output: None,
        },
    }
}

/// Two active promises on one object that resolve to different values for
/// one attribute: both fail, neither is applied (LANGUAGE.md section 7.6).
fn runtime_contradictions(
    instances: &[(usize, Vec<String>, Result<Instance, String>)],
) -> HashMap<(usize, Vec<String>), String> {
    type Members<'i> = Vec<(&'i Vec<String>, &'i Instance)>;
    let mut by_object: HashMap<(&str, &str), Members<'_>> = HashMap::new();
    for (_, combo, inst) in instances {
        if let Ok(inst) = inst {
            if inst.kind != "line" {
                by_object
                    .entry((inst.kind, inst.promiser.as_str()))
                    .or_default()
                    .push((combo, inst));
            }
        }
    }
    let mut out = HashMap::new();
    for ((kind, promiser), members) in by_object {
        for (a_combo, a) in &members {
            for (b_combo, b) in &members {
                if a.index >= b.index {
                    continue;
                }
                let clash = a.attrs.iter().find_map(|(name, value)| {
                    // Relations and annotations never contradict (the
                    // schema's roles); `ensure` has its own rule.
                    if !describes_state(name) || *name == "ensure" {
                        return None;
                    }
                    let other = b.get(name)?;
                    // Some mount states agree though they differ
                    // (`present` with `mounted`): the schema's one rule.
                    let agree = kind == "mount"
                        && *name == "state"
                        && value.as_str().zip(other.as_str()).is_some_and(|(x, y)| {
                            converge_format::system::mount_states_agree(x, y)
                        });
                    (other != value && !agree).then_some((*name, value, other))
                });
                if let Some((name, va, vb)) = clash {
                    let reason = format!(
                        "contradiction at run time: {kind} {promiser:?} gets {name} = {} and {name} = {}",
                        va.display(),
                        vb.display()
                    );
                    out.insert((a.index, (*a_combo).clone()), reason.clone());
                    out.insert((b.index, (*b_combo).clone()), reason);
                }
            }
        }
    }
    out
}

/// Entries of a promised directory that no active promise manages: removed
/// with `purge = true`, reported otherwise.
fn purge(
    ctx: &Ctx<'_>,
    dir: &Instance,
    instances: &[(usize, Vec<String>, Result<Instance, String>)],
    unmanaged: &mut BTreeSet<String>,
) {
    if dir.str("ensure") == Some("absent") {
        return;
    }
    let base = dir.promiser.trim_end_matches('/');
    let managed: HashSet<&str> = instances
        .iter()
        .filter_map(|(_, _, i)| i.as_ref().ok())
        .filter_map(|i| {
            let rest = i.promiser.strip_prefix(base)?.strip_prefix('/')?;
            rest.split('/').next()
        })
        .collect();
    let Ok(entries) = ctx.fs.list_dir(&dir.promiser) else {
        return;
    };
    for entry in entries {
        if managed.contains(entry.as_str()) || entry.ends_with(crate::rootfs::TEMP_SUFFIX) {
            continue;
        }
        let path = format!("{base}/{entry}");
        if dir.bool("purge") == Some(true) && !ctx.dry_run {
            let _ = ctx.fs.remove(&path);
        } else {
            unmanaged.insert(path);
        }
    }
}

fn record(
    results: &mut Vec<PromiseResult>,
    slot: &mut HashMap<(usize, Vec<String>), usize>,
    key: (usize, Vec<String>),
    inst: &Instance,
    applied: Applied,
    v: &Verified,
) {
    let repaired = applied.outcome == Outcome::Repaired;
    match slot.get(&key).and_then(|i| results.get_mut(*i)) {
        Some(existing) => {
            // A dry run sees the same state in every pass: report a change once.
            for change in applied.changes {
                if !existing.changes.contains(&change) {
                    existing.changes.push(change);
                }
            }
            if repaired {
                existing.repaired_passes = existing.repaired_passes.saturating_add(1);
            }
            // The final outcome: a failure stands; a repair in any pass
            // makes the promise repaired; otherwise the latest outcome.
            existing.outcome = match (&existing.outcome, applied.outcome) {
                (_, Outcome::Failed(e)) => Outcome::Failed(e),
                (Outcome::Repaired, _) => Outcome::Repaired,
                (_, o) => o,
            };
            if applied.output.is_some() {
                existing.output = applied.output;
            }
        }
        None => {
            let source = v
                .body
                .promises
                .get(inst.index)
                .and_then(|p| v.body.sources.get(p.source as usize))
                .map(|s| {
                    let file = match v.body.constants.get(s.file as usize) {
                        Some(Constant::Str(f)) => f.clone(),
                        _ => String::new(),
                    };
                    format!("{file}:{}", s.line)
                })
                .unwrap_or_default();
            slot.insert(key, results.len());
            results.push(PromiseResult {
                index: inst.index,
                kind: inst.kind,
                promiser: inst.promiser.clone(),
                outcome: applied.outcome,
                source,
                changes: applied.changes,
                output: applied.output,
                repaired_passes: u32::from(repaired),
            });
        }
    }
}

impl RunReport {
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.promises.iter().filter(|p| pred(&p.outcome)).count()
    }
}
