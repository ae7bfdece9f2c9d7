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

pub mod editing;
pub mod interactive;
pub mod lock;
pub mod operators;
pub mod owed;
pub mod report;
pub use converge_eval::resolve;
pub use result::PromiseResult;
mod dirty;
mod pass;
mod recorded;
mod result;
pub mod simulated;
mod slots;
pub mod source;
mod staged;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::Instant;

use interactive::{Ask, Confirm};
use operators::{Accounts, Applied, Change, Ctx, Outcome};
use recorded::Recorded;
use resolve::{loop_combinations, Instance, Resolver};
use slots::{InstanceKey, Slots};

use crate::backend;
use crate::backend::packages::{Batcher, Entry};
use crate::bundle::format::{Body, Constant, Item};
use crate::bundle::limits::MAX_PASS_INSTANCES;
use crate::bundle::Verified;
use crate::eval::{Evaluator, Val};
use crate::facts::{FactValue, Facts};
use crate::probes::Probes;
use crate::rootfs::RootFs;
use crate::schema::{
    describes_state_in, fact_by_id, hides_value, name_problem, promise_type, PromiserKind,
    HIDDEN_VALUE,
};
use crate::state::{Debt, StateDir};

#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Every path of the policy is resolved inside this directory.
    pub root: PathBuf,
    /// Check and report; change nothing.
    pub dry_run: bool,
    /// Classes set from the command line (`--define`).
    pub defines: Vec<String>,
    /// The state directory: owed notifications and `backup = true` copies
    /// live there. `None` (a dry run without one, a library caller):
    /// nothing is owed from earlier runs, and `backup = true` fails.
    pub state: Option<StateDir>,
    /// Where the files the bundle stores beside itself are (format 2.6,
    /// [`crate::blobs`]), looked in in order: the agent's cache, or the
    /// `blobs/` beside a bundle run from a file. Empty: a promise whose
    /// file is stored fails, saying so.
    pub blobs: Vec<PathBuf>,
}

/// A command a dry run would run (issue 17 item 8): its argv, and the
/// root it would be chrooted into (`None`: on the host).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedCommand {
    /// `file:line` of the promise.
    pub source: String,
    /// What the command is for: `run`, `validate`.
    pub role: &'static str,
    pub argv: Vec<String>,
    pub chroot: Option<String>,
}

/// Why a promise instance could not be resolved on this host.
#[derive(Clone, Debug, PartialEq)]
enum Unresolved {
    /// Over a budget, or a body that bypassed the verifier: it fails.
    Failed(String),
    /// A probe fact its guard or values need is unknown here (LANGUAGE.md
    /// section 15): it is skipped with the reason.
    Unknown(String),
}

#[derive(Clone, Debug)]
pub struct RunReport {
    pub bundle_name: String,
    pub serial: u64,
    pub digest: String,
    pub facts: Facts,
    /// The probe facts gathered before classes (LANGUAGE.md section 15):
    /// each value, or why it is unknown.
    pub probes: Probes,
    pub classes: Vec<String>,
    pub passes: u32,
    /// The one definition of "converged" (docs/vm.md, "How a run
    /// works"): the passes reached a fixed point, one of them repairing
    /// nothing and setting no new class. A failed promise does not keep a
    /// run from converging: failures are counted apart (exit 1, the
    /// report's `summary.failed`, `converge_promises{outcome="failed"}`).
    /// The report's `converged` and the metric `converge_run_converged`
    /// are both this field.
    pub converged: bool,
    pub dry_run: bool,
    pub duration_ms: u128,
    pub promises: Vec<PromiseResult>,
    /// Entries of promised directories that no promise manages.
    pub unmanaged: Vec<String>,
    /// Promises repaired in every pass of a run that did not converge.
    pub oscillating: Vec<String>,
    /// Notifications still owed at the end of the run (LANGUAGE.md §13).
    pub owed: Vec<Debt>,
    /// In a dry run: every command a real run would run.
    pub planned: Vec<PlannedCommand>,
    /// What `neighbours` promises found about each neighbour's history.
    pub neighbours: Vec<crate::neighbours::Entry>,
    /// Change detection: the history's chain after the run, a break found
    /// at its start, and this run's changes (`crate::watch`).
    pub watch: crate::watch::WatchReport,
    /// Two-way verification: what the `unmanaged` promises found that no
    /// promise names, and what became of each (`crate::unmanaged`).
    pub extra: Vec<crate::unmanaged::Extra>,
    /// Instances later passes counted as kept without checking them again
    /// (the incremental rule, docs/vm.md "Later passes"); 0 with full
    /// passes.
    pub checks_skipped: u64,
}

pub fn run(v: &Verified, opts: &RunOptions) -> Result<RunReport, String> {
    run_with(v, opts, None, !dirty::Dirty::allowed()).map(|passed| passed.report(v))
}

/// [`run`] of a bundle the caller gives up (`policyvm run`): the decoded
/// promises are let go before the report's results are made, which are
/// the run's largest allocation after the passes (a converged run's peak
/// memory was the body and the results together; issue 22, item 3). What
/// is left of the bundle (its constants, sources and header) is handed
/// back, for the caller to drop or leave to the process's exit.
pub fn run_owned(mut v: Verified, opts: &RunOptions) -> (Result<RunReport, String>, Verified) {
    let passed = match run_with(&v, opts, None, !dirty::Dirty::allowed()) {
        Ok(passed) => passed,
        Err(e) => return (Err(e), v),
    };
    // What the report still reads of the body: the constants (promisers,
    // file names), the sources and the header; the promises' heads were
    // taken by `run_with`.
    v.body.promises = crate::bundle::format::List(Vec::new());
    v.body.programs = crate::bundle::format::List(Vec::new());
    (Ok(passed.report(&v)), v)
}

/// What the passes leave for the report: the report without its results,
/// the run's results, and what the results read of each promise.
struct Passed {
    report: RunReport,
    results: Vec<recorded::Recorded>,
    heads: Vec<recorded::Head>,
}

impl Passed {
    /// The report, with its results.
    fn report(self, v: &Verified) -> RunReport {
        let Passed {
            mut report,
            results,
            heads,
        } = self;
        let mut results = recorded::finish_all(results, v, &heads);
        drop(heads);
        if !report.converged {
            report.oscillating = results
                .iter()
                .filter(|r| r.repaired_passes() >= report.passes)
                .map(|r| format!("{} {:?} ({})", r.kind(), r.promiser, r.source))
                .collect();
        }
        if let Some(e) = &report.watch.error {
            // The run's record could not be written: what the watches saw
            // is not recorded, so none of them may claim it was.
            for r in results.iter_mut().filter(|r| r.kind() == "watch") {
                if !matches!(r.outcome(), Outcome::Failed(_) | Outcome::Skipped(_)) {
                    r.set_outcome(Outcome::Failed(e.clone()));
                }
            }
        }
        report.promises = results;
        report
    }
}

/// [`run`] with every pass a full pass: each active promise checked in
/// every pass, none counted as kept by the incremental rule of later
/// passes ([`dirty`]). The reference the rule is tested against; `run`
/// does the same when `CONVERGE_FULL_PASSES=1`.
pub fn run_full_passes(v: &Verified, opts: &RunOptions) -> Result<RunReport, String> {
    run_with(v, opts, None, true).map(|passed| passed.report(v))
}

/// [`run`], asking `confirm` before each repair (`policyvm run
/// --interactive`, LANGUAGE.md §17): a promise that would repair is first
/// applied as a dry run would apply it; the repair is made only if
/// `confirm` says yes, and is otherwise skipped (`declined`), in this pass
/// and the later ones, and the promises that come after it are skipped
/// too. Packages are then converged one promise at a time, so that each
/// is asked about.
pub fn run_interactive(
    v: &Verified,
    opts: &RunOptions,
    confirm: Confirm<'_>,
) -> Result<RunReport, String> {
    if opts.dry_run {
        return Err(
            "an interactive run cannot be a dry run: a dry run changes nothing to ask about".into(),
        );
    }
    run_with(v, opts, Some(confirm), true).map(|passed| passed.report(v))
}

fn run_with(
    v: &Verified,
    opts: &RunOptions,
    mut confirm: Option<Confirm<'_>>,
    full_passes: bool,
) -> Result<Passed, String> {
    let started = Instant::now();
    let body = &v.body;
    // Absolute, so that commands (which run with the root as their working
    // directory and in `CONVERGE_ROOT`) see the same path from anywhere.
    let root = std::fs::canonicalize(&opts.root)
        .map_err(|e| format!("cannot open the root `{}`: {e}", opts.root.display()))?;
    let fs = RootFs::open(&root).map_err(|e| e.to_string())?;
    let facts = Facts::gather(&root);
    let accounts = Accounts::read(&fs);
    // A dry run changes nothing; what it would change goes to this
    // overlay, which later promises of the same run see (issue 21).
    let simulated = opts.dry_run.then(|| simulated::Simulated::new(&fs));
    // Under `--root`, commands run chrooted into it (LANGUAGE.md §13). A
    // bundle of format 2.0 could not say `host = true` (added in 2.1), and
    // a minor version only adds: its commands keep running on the host, as
    // they did when it was built (docs/bytecode.md, "Compatibility").
    let chroot = (root != std::path::Path::new("/") && v.version >= (2, 1)).then(|| root.clone());
    let ctx = Ctx {
        fs: &fs,
        accounts: &accounts,
        dry_run: opts.dry_run,
        sim: simulated.as_ref(),
        state: opts.state.as_ref(),
        chroot: chroot.as_deref(),
        line_regexes: Default::default(),
        neighbours: Default::default(),
        blobs: &opts.blobs,
    };
    // A real run stages its file writes and flushes them in batches
    // ([`staged`]); an interactive one writes each repair as it is
    // confirmed.
    fs.set_staging(!opts.dry_run && confirm.is_none());
    let mut ledger = owed::Ledger::load(opts.state.as_ref(), opts.dry_run)?;
    // Change detection: the history is checked before any promise runs.
    let mut watch = crate::watch::Session::open(opts.state.as_ref(), opts.dry_run);
    let mut watches_run: HashSet<(usize, Vec<String>)> = HashSet::new();
    let mut planned: Vec<PlannedCommand> = Vec::new();
    // Probes run before classes are evaluated; under `--root` their
    // programs run chrooted into it, as commands do.
    let probe_chroot = (root != std::path::Path::new("/")).then_some(root.as_path());
    let probes = Probes::gather(body, &fs, probe_chroot);
    // Secrets are opened with the host identity of the state directory,
    // lazily: only when an active promise needs one.
    let mut eval = Evaluator::new(body, &facts)
        .with_probes(&probes)
        .with_secrets(crate::secrets::Keyring::new(opts.state.as_ref()));
    let mut resolver = Resolver::new(body);
    let mut outcome_classes: Vec<String> = opts.defines.clone();
    let mut classes = eval.classes(&outcome_classes).map_err(|e| e.to_string())?;

    // One instance per promise is the common case: sized for it, the
    // vectors of a pass never double past it (growth by doubling held up
    // to twice the memory during each copy; issue 22, item 3).
    let expected = body.order.len().min(MAX_PASS_INSTANCES);
    // Each instance's result, without what the body says: made a
    // [`PromiseResult`] after the passes ([`recorded`]).
    let mut results: Vec<Recorded> = Vec::with_capacity(expected);
    let mut slot = Slots::new(body.promises.len());
    let mut commands_run: HashSet<(usize, Vec<String>)> = HashSet::new();
    // Promises named in the `notify` of a repaired promise.
    let mut notified: HashSet<usize> = HashSet::new();
    // Services notified since they were last restarted.
    let mut restart: HashSet<usize> = HashSet::new();
    let mut unmanaged: BTreeSet<String> = BTreeSet::new();
    // `unmanaged` promises run after the passes (`crate::unmanaged`): the
    // instances of the last pass, and what every pass's promises named.
    let mut deferred: Vec<(InstanceKey, Instance)> = Vec::new();
    let mut managed = crate::unmanaged::Managed::default();
    let limit = body.header.pass_limit.max(1);
    let mut passes = 0;
    let mut converged = false;

    // Package batches; it also keeps apt's index refresh to once a run.
    let mut packages = Batcher::default();
    // Interactive: the repairs declined so far, by instance and by promise.
    let mut declined: HashSet<InstanceKey> = HashSet::new();
    let mut declined_promises: HashSet<usize> = HashSet::new();
    // Later passes check again only what could have changed ([`dirty`]):
    // in a real, non-interactive run.
    let mut dirty = dirty::Dirty::new(!opts.dry_run && confirm.is_none() && !full_passes);
    // The instances of the last pass: the same in the next one unless the
    // classes changed (guards and values read no file). Held compactly
    // ([`pass`]): each is resolved again to be applied.
    let mut instances: Vec<pass::Held> = Vec::new();
    // Every instance of the pass resolved, for the operators that read
    // them all (a `directory`, a package batch): made when one comes up.
    let mut full: Option<Vec<pass::Full>> = None;
    let mut contradictions = HashMap::new();
    let mut notify_targets = NotifyTargets::default();
    let mut classes_changed = true;
    for pass in 1..=limit {
        passes = pass;
        let mut repaired_any = false;
        let mut failed: HashSet<usize> = HashSet::new();

        // Every active instance of this pass, in order. A guard is
        // evaluated per element of the promise's run-time loops (it may
        // read them: `for ip in sys.ipv4 { when ip == ... }`). A guard that
        // cannot be evaluated (a class over a budget) fails its promise
        // with the reason; it is neither silently inactive nor the end of
        // the run.
        if classes_changed || full_passes {
            let mut fresh: Vec<pass::Held> = Vec::with_capacity(expected);
            let mut gathered = pass::Gathered::with_capacity(expected);
            resolver.start_pass();
            for &i in body.order.iter() {
                let i = i as usize;
                let Some(p) = body.promises.get(i) else {
                    continue;
                };
                let kind = crate::schema::promise_type_by_id(p.kind).map_or("?", |t| t.name);
                let lists: Vec<Vec<String>> = p
                    .loops()
                    .iter()
                    .map(|f| match fact_by_id(*f).and_then(|f| facts.get(f.name)) {
                        Some(FactValue::List(l)) => l,
                        _ => Vec::new(),
                    })
                    .collect();
                let combos = match loop_combinations(&lists) {
                    Ok(combos) => combos,
                    Err(e) => {
                        fresh.push(pass::Held::new(i, Vec::new(), Err(Unresolved::Failed(e))));
                        continue;
                    }
                };
                for combo in combos {
                    // A guard that needs a probe fact unknown on this host
                    // skips its promise with the reason: it is neither active
                    // nor silently false.
                    let active = match p.guard {
                        None => Ok(true),
                        Some(g) => match eval.run(g, &classes, &combo) {
                            Ok(v) => Ok(v == Val::Bool(true)),
                            Err(e) if eval.failed_on_unknown() => Err(Unresolved::Unknown(e.0)),
                            Err(e) => Err(Unresolved::Failed(format!(
                                "its guard could not be evaluated: {}",
                                e.0
                            ))),
                        },
                    };
                    let inst = match active {
                        Ok(false) => continue,
                        Err(e) => Err(e),
                        Ok(true) if fresh.len() >= MAX_PASS_INSTANCES => {
                            fresh.push(pass::Held::new(
                                i,
                                combo,
                                Err(Unresolved::Failed(format!(
                                    "the pass already holds {MAX_PASS_INSTANCES} promise instances, the limit (docs/bytecode.md, Limits)"
                                ))),
                            ));
                            break;
                        }
                        Ok(true) if pass::light(body, p, kind) => {
                            // Held by its promise, resolved to be applied.
                            match resolver.charge_constants(p) {
                                Ok(()) => {
                                    gathered.note_constants(fresh.len(), body, p, kind);
                                    fresh.push(pass::Held::new(i, combo, Ok(None)));
                                }
                                Err(e) => fresh.push(pass::Held::new(
                                    i,
                                    combo,
                                    Err(Unresolved::Failed(e)),
                                )),
                            }
                            continue;
                        }
                        Ok(true) => {
                            resolver
                                .resolve(&mut eval, i, p, &classes, &combo)
                                .map_err(|e| {
                                    if eval.failed_on_unknown() {
                                        Unresolved::Unknown(e)
                                    } else {
                                        Unresolved::Failed(e)
                                    }
                                })
                        }
                    };
                    let resolved = inst.map(|inst| {
                        gathered.note(fresh.len(), &inst);
                        managed.note(&inst);
                        pass::resolved(&inst, Some(p))
                    });
                    fresh.push(pass::Held::new(i, combo, resolved));
                }
            }
            dirty.new_instances(&instances, &fresh, |i| {
                body.promises
                    .get(i)
                    .and_then(|p| crate::schema::promise_type_by_id(p.kind))
                    .is_some_and(|t| t.name == "directory")
            });
            instances = fresh;
            full = None;
            // Only the instances that may contradict another are resolved
            // again to be compared.
            let candidates = gathered.may_contradict(&instances);
            let mut again = pass::Resolving {
                body,
                resolver: &mut resolver,
                eval: &mut eval,
                classes: &classes,
            };
            contradictions = runtime_contradictions(&again.some(&instances, &candidates));
            notify_targets = NotifyTargets(gathered.targets);
        } else {
            dirty.same_instances(instances.len());
        }
        deferred.clear();
        // Debts incurred for the package promises of this pass (the batch
        // converges them all when its first one comes up).
        let mut package_debts: Option<HashMap<InstanceKey, Vec<Debt>>> = None;
        packages.next_pass();
        // Promises whose new content is staged ([`staged`]).
        let mut pending: Vec<staged::Pending> = Vec::new();
        // What concluding a promise updates (see [`Books`]).
        macro_rules! books {
            () => {
                Books {
                    v,
                    dry_run: opts.dry_run,
                    ledger: &mut ledger,
                    planned: &mut planned,
                    notified: &mut notified,
                    restart: &mut restart,
                    failed: &mut failed,
                    repaired_any: &mut repaired_any,
                    outcome_classes: &mut outcome_classes,
                    results: &mut results,
                    slot: &mut slot,
                }
            };
        }

        // Flushes the staged writes and concludes their promises (in
        // promise order, before whatever comes next is recorded).
        macro_rules! settle_pending {
            () => {
                for done in staged::settle(&fs, &mut pending) {
                    let staged::Pending {
                        key,
                        inst,
                        applied,
                        incurred,
                        position,
                        ..
                    } = done;
                    let far = body
                        .promises
                        .get(inst.index)
                        .is_some_and(|p| !p.notify().is_empty());
                    dirty.concluded(position, &inst, &applied, far);
                    conclude(&mut books!(), &ctx, key, &inst, applied, &incurred, false);
                }
            };
        }

        for (position, held) in instances.iter().enumerate() {
            let (index, combo) = (&held.index(), held.combo());
            let mut again = pass::Resolving {
                body,
                resolver: &mut resolver,
                eval: &mut eval,
                classes: &classes,
            };
            let inst = match again.instance(held) {
                Ok(inst) => inst,
                Err(e) => {
                    // A promise over a run-time budget (the evaluator's text
                    // budget, the loop cap) or a body that somehow bypassed
                    // the verifier: the promise fails, the run goes on. One
                    // that needs a probe fact unknown here is skipped; what
                    // comes after it is skipped too (it was not applied).
                    // Recorded after the staged writes before it, so the
                    // report keeps promise order.
                    settle_pending!();
                    let placeholder = unresolved(body, *index);
                    let outcome = match e {
                        Unresolved::Failed(e) => Outcome::Failed(e),
                        Unresolved::Unknown(e) => Outcome::Skipped(e),
                    };
                    let applied = Applied {
                        outcome,
                        changes: Vec::new(),
                        output: None,
                    };
                    failed.insert(*index);
                    record(
                        &mut results,
                        &mut slot,
                        (*index, combo.to_vec()),
                        &placeholder,
                        applied,
                        v,
                    );
                    continue;
                }
            };
            let key = (inst.index, combo.to_vec());
            if inst.kind == crate::unmanaged::KIND && !contradictions.contains_key(&key) {
                deferred.push((key, inst));
                continue;
            }
            // What reads every instance of the pass gets them resolved,
            // once per pass.
            if matches!(inst.kind, "directory" | "package") && full.is_none() {
                full = Some(pass::materialize(&mut again, &instances));
            }
            let everything: &[pass::Full] = full.as_deref().unwrap_or_default();
            let p = body.promises.get(inst.index);
            if staged::flush_before(&fs, &inst, p, &pending) {
                settle_pending!();
            }
            let blocked = contradictions.contains_key(&key)
                || p.is_some_and(|p| p.after().iter().any(|a| failed.contains(&(*a as usize))))
                || (inst.kind == "command" && commands_run.contains(&key));
            // Owed notifications are recorded before the change is made.
            let mut incurred: Vec<Debt> = Vec::new();
            let mut not_recorded: Option<String> = None;
            if !blocked && !opts.dry_run {
                if inst.kind == "package" {
                    if package_debts.is_none() {
                        let mut all = HashMap::new();
                        for (i, c, other) in everything {
                            let Ok(other) = other else { continue };
                            if other.kind != "package" {
                                continue;
                            }
                            let debts = debts_of(v, &notify_targets, other);
                            match ledger.incur(debts) {
                                Ok(added) => {
                                    all.insert((*i, c.clone()), added);
                                }
                                Err(e) => not_recorded = Some(e),
                            }
                        }
                        package_debts = Some(all);
                    }
                    incurred = package_debts
                        .as_mut()
                        .and_then(|all| all.remove(&key))
                        .unwrap_or_default();
                } else {
                    match ledger.incur(debts_of(v, &notify_targets, &inst)) {
                        Ok(added) => incurred = added,
                        Err(e) => not_recorded = Some(e),
                    }
                }
            }
            let mut delivered = false;
            let before = fs.next_ticket();
            let applied = if let Some(e) = not_recorded {
                Applied::failed(e)
            } else if let Some(reason) = contradictions.get(&key) {
                Applied {
                    outcome: Outcome::Failed(reason.clone()),
                    changes: Vec::new(),
                    output: None,
                }
            } else if p.is_some_and(|p| p.after().iter().any(|a| failed.contains(&(*a as usize)))) {
                Applied {
                    outcome: Outcome::Skipped("a promise it comes after failed".into()),
                    changes: Vec::new(),
                    output: None,
                }
            } else if p.is_some_and(|p| {
                p.after()
                    .iter()
                    .any(|a| declined_promises.contains(&(*a as usize)))
            }) {
                Applied {
                    outcome: Outcome::Skipped(
                        "a promise it comes after was not applied (declined)".into(),
                    ),
                    changes: Vec::new(),
                    output: None,
                }
            } else if let Some(declined_now) = confirm.as_mut().and_then(|confirm| {
                if inst.kind == "command" && commands_run.contains(&key) {
                    return None;
                }
                let others = if inst.kind == "directory" {
                    operators::Others::below(
                        &inst,
                        everything.iter().filter_map(|(_, _, i)| i.as_ref().ok()),
                    )
                } else {
                    operators::Others::default()
                };
                let ask = Ask {
                    ctx: &ctx,
                    inst: &inst,
                    others: &others,
                    notified: notified.contains(&inst.index) || restart.contains(&inst.index),
                    source: source_of(v, inst.index),
                };
                ask.declined(&mut **confirm, declined.contains(&key))
            }) {
                declined.insert(key.clone());
                declined_promises.insert(inst.index);
                declined_now
            } else if inst.kind == "watch" && watches_run.contains(&key) {
                // A watch reads its path once per run; later passes keep
                // its first outcome (a second read would see no change).
                continue;
            } else if inst.kind == "watch" {
                watches_run.insert(key.clone());
                watch.apply(&fs, &inst)
            } else if inst.kind == "command" && commands_run.contains(&key) {
                // A command runs at most once per run; later passes keep
                // its first outcome.
                continue;
            } else if inst.kind == "command" {
                // A notified command runs even if `creates`/`unless` would
                // skip it: that is what notifying it means. So does one an
                // earlier run still owes a notification.
                let owed = ledger.deliver_now("command", &inst.promiser);
                delivered = notified.contains(&inst.index) || owed;
                operators::command(&ctx, &inst, delivered)
            } else if inst.kind == "directory"
                && (inst.bool("recurse") == Some(true) || inst.get("source").is_some())
            {
                if dirty.unchanged(position, &inst) {
                    Applied::kept()
                } else {
                    dirty.checked(position);
                    // The tree leaves alone what more specific promises manage.
                    let others = operators::Others::below(
                        &inst,
                        everything.iter().filter_map(|(_, _, i)| i.as_ref().ok()),
                    );
                    operators::directory(&ctx, &inst, &others)
                }
            } else if inst.kind == "package" && confirm.is_none() {
                // Every package promise of the batch this one starts is
                // converged now; the others take their outcome from it.
                packages.apply(&fs, opts.dry_run, position, || {
                    batch_entries(body, everything, &failed, &contradictions)
                })
            } else {
                let owed = inst.kind == "service" && ledger.deliver_now("service", &inst.promiser);
                // (Not hashed when nothing is to be restarted: most runs.)
                delivered = (!restart.is_empty() && restart.remove(&inst.index)) || owed;
                if !delivered && dirty.unchanged(position, &inst) {
                    Applied::kept()
                } else {
                    dirty.checked(position);
                    apply(&ctx, &inst, delivered)
                }
            };
            let applied =
                if inst.kind == "directory" && !matches!(applied.outcome, Outcome::Failed(_)) {
                    purge(&ctx, &inst, everything, &mut unmanaged, applied)
                } else {
                    applied
                };
            if inst.kind == "command"
                && matches!(applied.outcome, Outcome::Repaired | Outcome::Failed(_))
            {
                commands_run.insert(key.clone());
            }
            let tickets = before..fs.next_ticket();
            if !tickets.is_empty() || !pending.is_empty() {
                // Its new content is staged: final at the flush. One that
                // staged nothing waits behind those that did, so that the
                // report keeps the order of the promises.
                pending.push(staged::Pending {
                    key,
                    inst,
                    applied,
                    incurred,
                    tickets,
                    position,
                });
                continue;
            }
            let far = delivered || p.is_some_and(|p| !p.notify().is_empty());
            dirty.concluded(position, &inst, &applied, far);
            conclude(
                &mut books!(),
                &ctx,
                key,
                &inst,
                applied,
                &incurred,
                delivered,
            );
        }
        // The end of the pass is a barrier: every staged write is flushed
        // before the outcome classes are evaluated.
        settle_pending!();

        // Outcome classes may make other classes and promises active.
        let next = eval.classes(&outcome_classes).map_err(|e| e.to_string())?;
        let new_class = next != classes;
        classes = next;
        classes_changed = new_class;
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

    let extra = verify_both_ways(
        v,
        &crate::unmanaged::Run {
            fs: &fs,
            dry_run: opts.dry_run,
            managed: &managed,
            troubled: &troubled(&results, v),
        },
        &deferred,
        &mut results,
        &mut slot,
    );
    // The report's results, made now that the pass's instances are gone:
    // the last pass's instances, what the passes kept of them and the
    // resolver are dropped first, so that the results and the report's
    // copies of them are never all held at once (the run's peak memory;
    // issue 22, item 3).
    let checks_skipped = dirty.skipped();
    drop(dirty);
    drop(instances);
    drop(full);
    drop(deferred);
    drop(contradictions);
    drop(notify_targets);
    drop(managed);
    drop(resolver);
    let watch = watch.finish(body.header.serial);
    Ok(Passed {
        results,
        heads: recorded::heads(body),
        report: RunReport {
            bundle_name: body.header.name.clone(),
            serial: body.header.serial,
            digest: crate::bundle::error::hex(&v.digest),
            facts: facts.clone(),
            probes: probes.clone(),
            classes: classes.into_iter().collect(),
            passes,
            converged,
            dry_run: opts.dry_run,
            duration_ms: started.elapsed().as_millis(),
            promises: Vec::new(),
            unmanaged: unmanaged.into_iter().collect(),
            oscillating: Vec::new(),
            owed: ledger.owed().to_vec(),
            planned,
            neighbours: ctx.neighbours.take(),
            watch,
            extra,
            checks_skipped,
        },
    })
}

/// What concluding a promise updates: the run's ledger of owed
/// notifications, the commands a dry run plans, who was notified, this
/// pass's failures and repairs, the outcome classes and the report.
struct Books<'b, 'l> {
    v: &'b Verified,
    dry_run: bool,
    ledger: &'b mut owed::Ledger<'l>,
    planned: &'b mut Vec<PlannedCommand>,
    notified: &'b mut HashSet<usize>,
    restart: &'b mut HashSet<usize>,
    failed: &'b mut HashSet<usize>,
    repaired_any: &'b mut bool,
    outcome_classes: &'b mut Vec<String>,
    results: &'b mut Vec<Recorded>,
    slot: &'b mut Slots,
}

/// Concludes a promise once its outcome is final (at once, or at the flush
/// of its staged writes): owed notifications confirmed or retracted, a
/// delivered one paid, notifications and outcome classes set, the result
/// recorded.
fn conclude(
    books: &mut Books<'_, '_>,
    ctx: &Ctx<'_>,
    key: InstanceKey,
    inst: &Instance,
    applied: Applied,
    incurred: &[Debt],
    delivered: bool,
) {
    let v = books.v;
    let body = &v.body;
    let p = body.promises.get(inst.index);
    if applied.outcome == Outcome::Repaired {
        books.ledger.confirm(incurred);
    } else {
        books.ledger.retract(incurred);
    }
    let paid = matches!(
        (&applied.outcome, inst.kind),
        (Outcome::Repaired, "command") | (Outcome::Repaired | Outcome::Kept, "service")
    );
    let applied = if delivered && paid {
        match books.ledger.pay(inst.kind, &inst.promiser) {
            Ok(()) => applied,
            Err(e) => Applied {
                outcome: Outcome::Failed(e),
                ..applied
            },
        }
    } else {
        applied
    };
    if books.dry_run {
        books
            .planned
            .extend(planned_commands(v, ctx, inst, &applied));
    }
    if applied.outcome == Outcome::Repaired {
        if let Some(p) = p {
            books
                .notified
                .extend(p.notify().iter().map(|t| *t as usize));
            books.restart.extend(p.notify().iter().map(|t| *t as usize));
        }
    }
    if matches!(applied.outcome, Outcome::Failed(_)) {
        books.failed.insert(inst.index);
    }
    if applied.outcome == Outcome::Repaired {
        *books.repaired_any = true;
    }
    let outcome_classes = &mut *books.outcome_classes;
    if let Some(p) = p {
        let set = match applied.outcome {
            Outcome::Repaired => p.on_repaired(),
            Outcome::Kept => p.on_kept(),
            Outcome::Failed(_) => p.on_failed(),
            Outcome::Skipped(_) | Outcome::Changed => None,
        };
        if let Some(Constant::Word(c) | Constant::Str(c)) =
            set.and_then(|c| body.constants.get(c as usize))
        {
            if !outcome_classes.iter().any(|o| o == c) {
                outcome_classes.push(c.to_string());
            }
        }
        // `on_changed` is carried as an attribute value.
        if applied.outcome == Outcome::Changed {
            if let Some(c) = inst.str("on_changed") {
                if !outcome_classes.iter().any(|o| o == c) {
                    outcome_classes.push(c.to_owned());
                }
            }
        }
    }
    // A neighbour's history that fails the check sets `on_rewrite`.
    if inst.kind == "neighbours" && crate::neighbours::alarmed(&ctx.neighbours.borrow(), inst.index)
    {
        if let Some(c) = inst.str("on_rewrite") {
            if !outcome_classes.iter().any(|o| o == c) {
                outcome_classes.push(c.to_owned());
            }
        }
    }
    record(books.results, books.slot, key, inst, applied, v);
}

/// Per type, the promises of the run that failed or were skipped: an
/// `unmanaged` promise of that type must not remove anything.
fn troubled(results: &[Recorded], v: &Verified) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in results {
        if matches!(r.outcome(), Outcome::Failed(_) | Outcome::Skipped(_)) {
            out.entry(r.kind().to_owned()).or_default().push(format!(
                "{} {:?} ({})",
                r.kind(),
                r.promiser(&v.body),
                source_of(v, r.index())
            ));
        }
    }
    out
}

/// Applies the `unmanaged` promises active in the last pass, after every
/// other promise of the run, and returns the extra entries they found.
/// Two of one type active together (the compiler refuses a policy where
/// that can happen, E0264) both fail: neither knows what the other
/// ignores.
fn verify_both_ways(
    v: &Verified,
    run: &crate::unmanaged::Run<'_>,
    deferred: &[(InstanceKey, Instance)],
    results: &mut Vec<Recorded>,
    slot: &mut Slots,
) -> Vec<crate::unmanaged::Extra> {
    let mut extra = Vec::new();
    for (key, inst) in deferred {
        let twins = deferred
            .iter()
            .filter(|(_, other)| other.promiser == inst.promiser)
            .count();
        let applied = if twins > 1 {
            Applied::failed(format!(
                "{twins} `unmanaged {:?}` promises are active together; keep one per type",
                inst.promiser
            ))
        } else {
            crate::unmanaged::apply(run, inst, &source_of(v, inst.index), &mut extra)
        };
        record(results, slot, key.clone(), inst, applied, v);
    }
    extra
}

/// The services and commands of a pass, by promise: `(kind, promiser)` of
/// each instance, in pass order ([`pass::Gathered`]).
#[derive(Debug, Default)]
struct NotifyTargets(rustc_hash::FxHashMap<usize, Vec<(&'static str, String)>>);

impl NotifyTargets {
    /// The instances of promise `index`, if it is a service or a command.
    fn of(&self, index: usize) -> &[(&'static str, String)] {
        self.0.get(&index).map_or(&[], Vec::as_slice)
    }
}

/// The notifications a promise would owe if it changed something: one per
/// service or command it notifies that is active in this pass.
fn debts_of(v: &Verified, targets: &NotifyTargets, inst: &Instance) -> Vec<Debt> {
    let Some(p) = v.body.promises.get(inst.index) else {
        return Vec::new();
    };
    if p.notify().is_empty() {
        return Vec::new();
    }
    let by = format!(
        "{} {:?} ({})",
        inst.kind,
        inst.promiser,
        source_of(v, inst.index)
    );
    let mut debts: Vec<Debt> = Vec::new();
    for target in p.notify().iter().map(|t| *t as usize) {
        for (kind, promiser) in targets.of(target) {
            if !debts.iter().any(|d| d.is_for(kind, promiser)) {
                debts.push(Debt {
                    kind: (*kind).to_owned(),
                    promiser: promiser.clone(),
                    by: by.clone(),
                });
            }
        }
    }
    debts
}

/// The commands a dry run found a promise would run: a `command`'s argv,
/// a `file`'s `validate` (with the staged copy's path left as `%s`).
fn planned_commands(
    v: &Verified,
    ctx: &Ctx<'_>,
    inst: &Instance,
    applied: &Applied,
) -> Vec<PlannedCommand> {
    let role = match inst.kind {
        "command" if applied.changes.iter().any(|c| c.what == "run") => "run",
        "file"
            if applied
                .changes
                .iter()
                .any(|c| c.what == "content" || c.what == "created") =>
        {
            "validate"
        }
        _ => return Vec::new(),
    };
    let Some(argv) = inst.list(role).filter(|a| !a.is_empty()) else {
        return Vec::new();
    };
    let chroot = ctx
        .chroot
        .filter(|_| inst.bool("host") != Some(true))
        .map(|r| r.display().to_string());
    vec![PlannedCommand {
        source: source_of(v, inst.index),
        role,
        argv: argv.to_vec(),
        chroot,
    }]
}

/// `file:line` of a promise.
fn source_of(v: &Verified, index: usize) -> String {
    v.body
        .promises
        .get(index)
        .and_then(|p| v.body.sources.get(p.source as usize))
        .map(|s| {
            let file = match v.body.constants.get(s.file as usize) {
                Some(Constant::Str(f)) => f.clone(),
                _ => String::new().into(),
            };
            format!("{file}:{}", s.line)
        })
        .unwrap_or_default()
}

/// The instances of a pass as the package batcher sees them.
fn batch_entries<'a>(
    body: &'a crate::bundle::format::Body,
    instances: &'a [(usize, Vec<String>, Result<Instance, Unresolved>)],
    failed: &HashSet<usize>,
    contradictions: &HashMap<(usize, Vec<String>), String>,
) -> Vec<Entry<'a>> {
    instances
        .iter()
        .map(|(index, combo, inst)| {
            let after: &[u32] = body.promises.get(*index).map_or(&[], |p| p.after());
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

/// What a report can say about a promise that could not be resolved: its
/// type, and its promiser when it is a constant.
fn unresolved(body: &Body, index: usize) -> Instance {
    let p = body.promises.get(index);
    let kind = p
        .and_then(|p| crate::schema::promise_type_by_id(p.kind))
        .map_or("?", |t| t.name);
    let promiser = match p.map(|p| p.promiser) {
        Some(Item::Const(c)) => match body.constants.get(c as usize) {
            Some(Constant::Str(s) | Constant::Word(s)) => s.chars().take(200).collect(),
            _ => String::new(),
        },
        _ => String::new(),
    };
    Instance {
        index,
        kind,
        promiser,
        attrs: Vec::new(),
    }
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
        "directory" => operators::directory(ctx, inst, &operators::Others::default()),
        "link" => operators::link(ctx, inst),
        "line" => operators::line(ctx, inst),
        "setting" => operators::setting(ctx, inst),
        "block" => operators::block(ctx, inst),
        "command" => operators::command(ctx, inst, false),
        "report" => Applied {
            outcome: Outcome::Kept,
            changes: Vec::new(),
            output: inst.str("message").map(str::to_owned),
        },
        "package" => backend::packages::converge(
            ctx.fs,
            ctx.dry_run,
            &[inst],
            &mut backend::packages::IndexRefresh::default(),
        )
        .pop()
        .unwrap_or_else(|| Applied::failed("no outcome for this package")),
        "service" => {
            let would_exist = |path: &str| ctx.sim.is_some_and(|s| s.has_file(&[path.to_owned()]));
            backend::service::service(ctx.fs, ctx.dry_run, &would_exist, inst, notified)
        }
        "process" => backend::processes::converge(ctx.fs, ctx.dry_run, inst),
        "mount" => backend::mount::converge(ctx.fs, ctx.dry_run, inst),
        "kernel_module" => backend::kmod::converge(ctx.fs, ctx.dry_run, inst),
        "sysctl" => backend::sysctl::converge(ctx.fs, ctx.dry_run, inst),
        "neighbours" => crate::neighbours::check(
            ctx.state,
            ctx.dry_run,
            inst,
            &mut ctx.neighbours.borrow_mut(),
        ),
        "user" | "group" => {
            // A dry run plans from the tables as it would have left them.
            let real = ctx.sim.map(|_| ctx.accounts.tables());
            let tables = ctx.sim.zip(real.as_ref()).map(|(s, r)| s.accounts(r));
            let applied = if inst.kind == "user" {
                backend::accounts::user(ctx.fs, ctx.dry_run, tables.as_ref(), inst)
            } else {
                backend::accounts::group(ctx.fs, ctx.dry_run, tables.as_ref(), inst)
            };
            if applied.outcome == Outcome::Repaired {
                match (ctx.sim, &real) {
                    (Some(sim), Some(real)) => sim.account_changed(real, inst),
                    _ => ctx.accounts.reload(ctx.fs),
                }
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
/// Instances of one promise (its loop elements) never contradict each other.
///
/// Linear in the number of attribute values: instances are bucketed by
/// object and attribute, and each is compared with at most five witnesses
/// of its bucket, never with every other instance (the pairwise check took
/// 26 s on a 1.1 MB bundle; issue 14, item 4). Objects are grouped by
/// sorting the instances' positions, not by a map of every object: almost
/// every object has one promise, and a map of 10,000 of them with their
/// attributes was the peak of a converged run's memory (7.6 MB of 24;
/// issue 22, item 3). Buckets are built only for an object that more than
/// one promise names.
fn runtime_contradictions(
    instances: &[(usize, Vec<String>, Result<Instance, Unresolved>)],
) -> HashMap<(usize, Vec<String>), String> {
    let mut out = HashMap::new();
    let objects = ObjectGroups::of(instances);
    for group in objects.groups() {
        // Instances of one promise never contradict each other: most
        // objects have one instance, and need nothing more.
        let promises = || group.iter().filter_map(|at| objects.instance(*at));
        let first = promises().next().map(|(_, _, inst)| inst.index);
        if promises().any(|(_, _, inst)| Some(inst.index) != first) {
            contradictions_of_object(&promises().collect::<Vec<_>>(), &mut out);
        }
    }
    mount_states(instances, &mut out);
    out
}

/// One resolved instance of a pass: its position, loop elements and value.
type Positioned<'i> = (usize, &'i Vec<String>, &'i Instance);

/// The instances of a pass that name an object (a `line` names none),
/// grouped by sorting their positions by object: `(kind, promiser, part)`,
/// where the part of the file a `setting` or `block` edits is part of its
/// object (settings of different keys never contradict).
struct ObjectGroups<'i> {
    instances: &'i [(usize, Vec<String>, Result<Instance, Unresolved>)],
    /// Positions in `instances`, sorted by object; in instance order within
    /// one object (the sort is stable).
    sorted: Vec<u32>,
}

impl<'i> ObjectGroups<'i> {
    fn of(instances: &'i [(usize, Vec<String>, Result<Instance, Unresolved>)]) -> Self {
        let mut groups = ObjectGroups {
            instances,
            // A pass holds at most MAX_PASS_INSTANCES, far below u32::MAX.
            sorted: (0..instances.len())
                .filter_map(|at| u32::try_from(at).ok())
                .filter(|at| {
                    instances
                        .get(*at as usize)
                        .and_then(|(_, _, inst)| inst.as_ref().ok())
                        .is_some_and(|inst| inst.kind != "line")
                })
                .collect(),
        };
        let mut sorted = std::mem::take(&mut groups.sorted);
        sorted.sort_by(|a, b| groups.compare(*a, *b));
        groups.sorted = sorted;
        groups
    }

    fn instance(&self, at: u32) -> Option<Positioned<'i>> {
        let (_, combo, inst) = self.instances.get(at as usize)?;
        Some((at as usize, combo, inst.as_ref().ok()?))
    }

    /// The order of two instances' objects (compared without allocating).
    fn compare(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let (Some((_, _, a)), Some((_, _, b))) = (self.instance(a), self.instance(b)) else {
            return std::cmp::Ordering::Equal;
        };
        let part = |inst: &'i Instance| {
            crate::schema::part_identity(inst.kind)
                .iter()
                .map(move |name| inst.str(name))
        };
        (a.kind, a.promiser.as_str())
            .cmp(&(b.kind, b.promiser.as_str()))
            .then_with(|| part(a).cmp(part(b)))
    }

    /// The positions of each object's instances, in instance order.
    fn groups(&self) -> impl Iterator<Item = &[u32]> + '_ {
        self.sorted.chunk_by(|a, b| self.compare(*a, *b).is_eq())
    }
}

/// The contradictions between the instances of one object (of more than
/// one promise), into `out`: per attribute that describes state, each
/// instance is compared with the bucket's [`witnesses`].
fn contradictions_of_object(
    group: &[Positioned<'_>],
    out: &mut HashMap<(usize, Vec<String>), String>,
) {
    let mut attrs: BTreeMap<&'static str, Vec<Member<'_>>> = BTreeMap::new();
    for (_, combo, inst) in group {
        for (name, value) in &inst.attrs {
            // Relations and annotations never contradict (the schema's
            // roles); `ensure` has its own rule.
            if !describes_state_in(inst.kind, name) || *name == "ensure" {
                continue;
            }
            // Mount states are not all exclusive: `mount_states`.
            if inst.kind == "mount" && *name == "state" {
                continue;
            }
            attrs.entry(name).or_default().push(Member {
                index: inst.index,
                combo,
                value,
            });
        }
    }
    let Some((_, _, object)) = group.first() else {
        return;
    };
    let (kind, promiser) = (object.kind, &object.promiser);
    for (name, members) in attrs {
        let witnesses = witnesses(&members);
        for m in &members {
            let Some(w) = witnesses
                .iter()
                .find(|w| w.index != m.index && w.value != m.value)
            else {
                continue;
            };
            let (first, second) = if m.index < w.index { (m, w) } else { (w, m) };
            // A password hash is never shown (THREATS.md T24).
            let shown = |v: &crate::run::resolve::Value| {
                if hides_value(name) {
                    HIDDEN_VALUE.to_owned()
                } else {
                    v.display()
                }
            };
            let reason = format!(
                "contradiction at run time: {kind} {promiser:?} gets {name} = {} and {name} = {}",
                shown(first.value),
                shown(second.value)
            );
            out.entry((m.index, m.combo.clone())).or_insert(reason);
        }
    }
}

/// Mount states that exclude each other on one mount point
/// (`converge_format::system::mount_states_agree`: `present` agrees with
/// `mounted`). Each instance is compared with at most two instances per
/// state (the first two of different promises), so this stays linear.
fn mount_states(
    instances: &[(usize, Vec<String>, Result<Instance, Unresolved>)],
    out: &mut HashMap<(usize, Vec<String>), String>,
) {
    // mount point -> (promise index, loop elements, state) of each instance.
    type States<'i> = Vec<(usize, &'i Vec<String>, &'i str)>;
    let mut by_point: HashMap<&str, States<'_>> = HashMap::new();
    for (_, combo, inst) in instances {
        let Ok(inst) = inst else { continue };
        if inst.kind == "mount" {
            let state = inst.str("state").unwrap_or("mounted");
            by_point
                .entry(inst.promiser.as_str())
                .or_default()
                .push((inst.index, combo, state));
        }
    }
    for (point, members) in by_point {
        let mut witnesses: Vec<(usize, &str)> = Vec::new();
        for (index, _, state) in &members {
            let same_state = witnesses.iter().filter(|(_, s)| s == state).count();
            if same_state < 2 && !witnesses.contains(&(*index, *state)) {
                witnesses.push((*index, state));
            }
        }
        for (index, combo, state) in &members {
            let clash = witnesses.iter().find(|(i, s)| {
                i != index && !converge_format::system::mount_states_agree(state, s)
            });
            if let Some((_, other)) = clash {
                out.entry((*index, (*combo).clone())).or_insert(format!(
                    "contradiction at run time: mount {point:?} gets state = {state} and state = {other}"
                ));
            }
        }
    }
}

/// One instance's value for one attribute of one object.
#[derive(Clone, Copy, Debug)]
struct Member<'i> {
    index: usize,
    combo: &'i Vec<String>,
    value: &'i resolve::Value,
}

/// At most five members of a bucket such that every member `m` that
/// contradicts some member (of another promise, with another value) also
/// contradicts one of them: `c1` the first; `c2` the first with another
/// value than `c1`; `c3` the first of another promise than `c1`; `c4` the
/// first with another value than `c1` and of another promise than `c2`;
/// `c5` the first of another promise than `c1` and with another value than
/// `c3`. (If `c1` does not contradict `m`, `m` shares `c1`'s value or its
/// promise. Sharing the value, `c2` contradicts `m` unless it is of `m`'s
/// promise, and then `c4` is exactly a member of another promise with
/// another value; sharing the promise, `c3` does unless it has `m`'s value,
/// and then `c5` is.)
fn witnesses<'i>(members: &[Member<'i>]) -> Vec<Member<'i>> {
    let Some(c1) = members.first().copied() else {
        return Vec::new();
    };
    let first = |pred: &dyn Fn(&Member<'i>) -> bool| members.iter().find(|m| pred(m)).copied();
    let c2 = first(&|m| m.value != c1.value);
    let c3 = first(&|m| m.index != c1.index);
    let c4 = c2.and_then(|c2| first(&|m| m.value != c1.value && m.index != c2.index));
    let c5 = c3.and_then(|c3| first(&|m| m.index != c1.index && m.value != c3.value));
    [Some(c1), c2, c3, c4, c5].into_iter().flatten().collect()
}

/// Entries of a promised directory that no active promise manages: with
/// `purge = true` each is removed and reported as a change of the directory
/// promise (a repair), and a removal that fails makes the promise fail;
/// otherwise they are listed as unmanaged. Every entry counts, whatever its
/// name: one that is not UTF-8 (`\xff`, which no promise can name) or that
/// looks like a temporary file; only a temporary this run is writing right
/// now is left alone. Names are shown escaped
/// ([`crate::rootfs::escape_name`]).
fn purge(
    ctx: &Ctx<'_>,
    dir: &Instance,
    instances: &[(usize, Vec<String>, Result<Instance, Unresolved>)],
    unmanaged: &mut BTreeSet<String>,
    mut applied: Applied,
) -> Applied {
    if dir.str("ensure") == Some("absent") {
        return applied;
    }
    // The promised directory, and with a `source` every directory of the
    // copied tree, each with the names its source has.
    let mut dirs = operators::source_dirs(dir);
    if dirs.is_empty() {
        dirs.push((
            dir.promiser.trim_end_matches('/').to_owned(),
            HashSet::new(),
        ));
    }
    let purging = dir.bool("purge") == Some(true);
    let mut failures: Vec<String> = Vec::new();
    for (at, copied) in &dirs {
        purge_one(
            ctx,
            at,
            copied,
            instances,
            purging,
            unmanaged,
            &mut applied,
            &mut failures,
        );
    }
    if !failures.is_empty() {
        applied.outcome = Outcome::Failed(failures.join("; "));
    } else if applied.outcome == Outcome::Kept && !applied.changes.is_empty() {
        applied.outcome = Outcome::Repaired;
    }
    applied
}

/// [`purge`] of one directory `base`: `copied` are the names its `source`
/// has there.
#[allow(clippy::too_many_arguments, reason = "the state of one purge")]
/// The state directory as a policy path, when it lies inside the root: a
/// purge must never delete the run's own lock, owed notifications and
/// backups (a `directory "/var/lib" { purge = true; }` in a sandbox would).
fn state_in_root(ctx: &Ctx<'_>) -> Option<String> {
    let root = ctx.chroot.unwrap_or(Path::new("/"));
    let state = ctx.state?.path("");
    let rel = state.strip_prefix(root).ok()?;
    let rel = rel.to_str()?.trim_end_matches('/');
    (!rel.is_empty()).then(|| format!("/{rel}"))
}

// The purge of one directory reads the run's context and writes three
// accumulators of its caller; a struct for them would only rename them.
#[allow(clippy::too_many_arguments)]
fn purge_one(
    ctx: &Ctx<'_>,
    base: &str,
    copied: &HashSet<Vec<u8>>,
    instances: &[(usize, Vec<String>, Result<Instance, Unresolved>)],
    purging: bool,
    unmanaged: &mut BTreeSet<String>,
    applied: &mut Applied,
    failures: &mut Vec<String>,
) {
    let managed: HashSet<&[u8]> = instances
        .iter()
        .filter_map(|(_, _, i)| i.as_ref().ok())
        .filter_map(|i| {
            let rest = i.promiser.strip_prefix(base)?.strip_prefix('/')?;
            rest.split('/').next().map(str::as_bytes)
        })
        .collect();
    let entries = match ctx.fs.list_dir(base) {
        Ok(entries) => entries,
        Err(e) => {
            failures.push(format!("cannot list `{base}` for unmanaged entries: {e}"));
            return;
        }
    };
    let state = state_in_root(ctx);
    for entry in entries {
        if managed.contains(entry.as_slice())
            || copied.contains(&entry)
            || crate::rootfs::is_live_temp(&entry)
        {
            continue;
        }
        if let Some(state) = &state {
            let below = format!("{}/", state);
            let entry_path = format!("{base}/{}", String::from_utf8_lossy(&entry));
            if *state == entry_path || below.starts_with(&format!("{entry_path}/")) {
                // The run's own state directory (lock, owed notifications,
                // backups), or a directory holding it: never purged.
                unmanaged.insert(format!("{entry_path} (the VM's state directory: kept)"));
                continue;
            }
        }
        let path = format!("{base}/{}", crate::rootfs::escape_name(&entry));
        if !purging {
            unmanaged.insert(path);
            continue;
        }
        if let Err(e) = ctx.remove_entry(base, &entry) {
            failures.push(format!("cannot purge `{path}`: {e}"));
            continue;
        }
        applied.changes.push(Change {
            what: "purged".into(),
            before: path,
            after: "absent".into(),
            diff: None,
        });
    }
}

fn record(
    results: &mut Vec<Recorded>,
    slot: &mut Slots,
    key: (usize, Vec<String>),
    inst: &Instance,
    applied: Applied,
    v: &Verified,
) {
    match slot.get(&key).and_then(|i| results.get_mut(i)) {
        Some(existing) => existing.update(applied),
        None => {
            slot.insert(key, results.len());
            results.push(Recorded::new(
                &v.body,
                inst.index,
                inst.kind,
                &inst.promiser,
                applied,
            ));
        }
    }
}

impl RunReport {
    pub fn count(&self, pred: impl Fn(&Outcome) -> bool) -> usize {
        self.promises.iter().filter(|p| pred(p.outcome())).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use resolve::Value;

    /// The linear contradiction check finds exactly the instances the
    /// pairwise definition does, on every assignment of four instances to
    /// three promises and three values (and instances of one promise never
    /// contradict each other).
    #[test]
    fn contradictions_match_the_pairwise_definition() {
        let n = 4u32;
        for code in 0..9u32.pow(n) {
            let members: Vec<(usize, i64)> = (0..n)
                .map(|k| {
                    let digit = code / 9u32.pow(k) % 9;
                    ((digit / 3) as usize, i64::from(digit % 3))
                })
                .collect();
            let instances: Vec<(usize, Vec<String>, Result<Instance, Unresolved>)> = members
                .iter()
                .enumerate()
                .map(|(k, &(index, mode))| {
                    let inst = Instance {
                        index,
                        kind: "file",
                        promiser: "/x".into(),
                        attrs: vec![
                            ("mode", Value::Int(mode)),
                            ("comment", Value::Int(k as i64)),
                        ],
                    };
                    (index, vec![k.to_string()], Ok(inst))
                })
                .collect();
            let found = runtime_contradictions(&instances);
            for (k, &(index, mode)) in members.iter().enumerate() {
                let expected = members.iter().any(|&(i, m)| i != index && m != mode);
                let key = (index, vec![k.to_string()]);
                assert_eq!(
                    found.contains_key(&key),
                    expected,
                    "{members:?}, member {k}"
                );
            }
        }
    }

    /// Grouping by sorting finds exactly the pairwise contradictions when
    /// instances name several objects: every assignment of four instances
    /// to two promises, two files and two modes. Instances of different
    /// files never contradict; each instance's reason names its own file.
    #[test]
    fn contradictions_are_found_per_object_across_objects() {
        let n = 4u32;
        for code in 0..8u32.pow(n) {
            let members: Vec<(usize, &str, i64)> = (0..n)
                .map(|k| {
                    let digit = code / 8u32.pow(k) % 8;
                    let file = if digit & 2 == 0 { "/a" } else { "/b" };
                    ((digit & 1) as usize, file, i64::from(digit >> 2))
                })
                .collect();
            let instances: Vec<(usize, Vec<String>, Result<Instance, Unresolved>)> = members
                .iter()
                .enumerate()
                .map(|(k, &(index, file, mode))| {
                    let inst = Instance {
                        index,
                        kind: "file",
                        promiser: file.into(),
                        attrs: vec![("mode", Value::Int(mode))],
                    };
                    (index, vec![k.to_string()], Ok(inst))
                })
                .collect();
            let found = runtime_contradictions(&instances);
            for (k, &(index, file, mode)) in members.iter().enumerate() {
                let expected = members
                    .iter()
                    .any(|&(i, f, m)| i != index && f == file && m != mode);
                let reason = found.get(&(index, vec![k.to_string()]));
                assert_eq!(reason.is_some(), expected, "{members:?}, member {k}");
                if let Some(reason) = reason {
                    assert!(reason.contains(&format!("file {file:?}")), "{reason}");
                }
            }
        }
    }

    /// Settings of different keys of one file are different objects; of
    /// one key, they contradict.
    #[test]
    fn settings_contradict_only_on_one_key() {
        let setting = |index: usize, key: &str, value: &str| {
            let inst = Instance {
                index,
                kind: "setting",
                promiser: "/etc/app.conf".into(),
                attrs: vec![
                    ("key", Value::Str(key.into())),
                    ("value", Value::Str(value.into())),
                ],
            };
            (index, Vec::new(), Ok(inst))
        };
        let apart = vec![setting(0, "a", "1"), setting(1, "b", "2")];
        assert!(runtime_contradictions(&apart).is_empty());
        let clash = vec![
            setting(0, "a", "1"),
            setting(1, "b", "2"),
            setting(2, "a", "3"),
        ];
        let found = runtime_contradictions(&clash);
        assert_eq!(
            found.keys().map(|(i, _)| *i).collect::<BTreeSet<_>>(),
            BTreeSet::from([0, 2])
        );
    }

    /// Two promises giving one file different secrets contradict each
    /// other; the message names the secrets, never their values.
    #[test]
    fn a_contradiction_between_secrets_names_them_only() {
        use crate::secrets::SecretText;
        let secret = |name: &str, text: &str| {
            Value::Secret(std::sync::Arc::new(SecretText::new(
                BTreeSet::from([name.to_owned()]),
                zeroize::Zeroizing::new(text.to_owned()),
            )))
        };
        let instances: Vec<(usize, Vec<String>, Result<Instance, Unresolved>)> = [
            (0, secret("old_token", "value-one-xyz")),
            (1, secret("new_token", "value-two-xyz")),
        ]
        .into_iter()
        .map(|(index, content)| {
            let inst = Instance {
                index,
                kind: "file",
                promiser: "/etc/token".into(),
                attrs: vec![("content", content)],
            };
            (index, Vec::new(), Ok(inst))
        })
        .collect();
        let found = runtime_contradictions(&instances);
        let reason = found.get(&(0, Vec::new())).unwrap();
        assert!(
            reason.contains("content = <secret old_token> and content = <secret new_token>"),
            "{reason}"
        );
        assert!(!reason.contains("xyz"), "{reason}");
    }

    /// Mount states against the pairwise definition: an instance
    /// contradicts when another promise's state does not agree with its
    /// own (`mount_states_agree`), over every assignment of four instances
    /// to three promises and four states.
    #[test]
    fn mount_state_contradictions_match_the_pairwise_definition() {
        const STATES: [&str; 4] = ["mounted", "present", "unmounted", "absent"];
        let n = 4u32;
        for code in 0..12u32.pow(n) {
            let members: Vec<(usize, &str)> = (0..n)
                .map(|k| {
                    let digit = code / 12u32.pow(k) % 12;
                    (
                        (digit / 4) as usize,
                        *STATES.get((digit % 4) as usize).unwrap(),
                    )
                })
                .collect();
            let instances: Vec<(usize, Vec<String>, Result<Instance, Unresolved>)> = members
                .iter()
                .enumerate()
                .map(|(k, &(index, state))| {
                    let inst = Instance {
                        index,
                        kind: "mount",
                        promiser: "/srv".into(),
                        attrs: vec![("state", Value::Str(state.into()))],
                    };
                    (index, vec![k.to_string()], Ok(inst))
                })
                .collect();
            let found = runtime_contradictions(&instances);
            for (k, &(index, state)) in members.iter().enumerate() {
                let expected = members.iter().any(|&(i, s)| {
                    i != index && !converge_format::system::mount_states_agree(state, s)
                });
                let key = (index, vec![k.to_string()]);
                assert_eq!(
                    found.contains_key(&key),
                    expected,
                    "{members:?}, member {k}"
                );
            }
        }
    }
}
