//! Incremental later passes (issue 22, item 2): which promise instances a
//! pass after the first must check again, and which it may count as kept
//! without reading anything.
//!
//! LANGUAGE.md §7 step 5 says what a pass *finds* ("repeat passes while a
//! pass repaired something or defined a new class"), not how it finds it.
//! A pass after the first finds, for an instance that was `kept` the last
//! time it was checked, exactly what that check found, unless something
//! that instance's check reads may have changed since. What a check reads
//! is bounded for the promise types that only look at the files of one path
//! (`file`, `line`, `setting`, `block`, `link`, `directory`):
//! - its **instance**: the same as last pass when the classes are the same
//!   (guards and values are a pure function of the facts, the probes, the
//!   classes and the loop element: the evaluator reads no file), and
//!   compared value by value when they are not;
//! - the **files at its path**: the path itself, what is above it (a parent
//!   created, a tree copied over it) and what is below it (a directory's
//!   entries);
//! - for a `directory`, the **other instances** of the pass (what a tree or
//!   a purge leaves to more specific promises): a `directory` is checked
//!   again whenever the set of instances changed.
//!
//! So an instance is counted as kept without a check when it was kept
//! (with no change reported) at its last check, its instance is unchanged,
//! and since that check no promise has changed (or may have changed) a
//! path equal to, above or below its own, and nothing has run whose
//! effects the VM cannot bound: a repaired, failed or changed `command`,
//! `service`, `package`, `user`, `group`, `mount`, `sysctl`, `process`,
//! `kernel_module`, `watch` or `neighbours` promise, a file repair that
//! `notify`s or ran a `validate` command. Everything else is checked as in
//! a full pass: an instance repaired last time (its repair is confirmed by
//! checking it again, as a full pass does), failed or skipped, and every
//! instance of a type not listed above. `tests/incremental_passes.rs`
//! compares whole runs with and without this rule
//! (`CONVERGE_FULL_PASSES=1`) on generated policies.
//!
//! A skip is only ever taken in a real run: a dry run reports the same
//! repairs in every pass, an interactive one asks about them.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use super::operators::{Applied, Outcome};
use super::pass::Held;
use super::resolve::{Instance, Value};

/// The promise types whose check reads only the files at and around their
/// path (their promiser) and their own instance.
const PATH_BOUND: [&str; 6] = ["file", "line", "setting", "block", "link", "directory"];

/// Set to `1` to make every pass a full pass (the differential tests'
/// reference, and a way out should the rule ever be doubted on a host).
pub const FULL_PASSES_ENV: &str = "CONVERGE_FULL_PASSES";

/// What the run knows of the last check of one instance: when (the clock,
/// which starts at 1) and whether it was kept with no change reported,
/// packed in one non-zero word so that a pass's record of checks is 8
/// bytes an instance, `None` included (issue 22, item 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Check(std::num::NonZeroU64);

impl Check {
    fn new(at: u64, kept: bool) -> Self {
        let packed = (at << 1) | u64::from(kept);
        // The clock starts at 1, so `at << 1` is never 0; a clock past
        // 2^63 ticks (never reached) saturates instead of wrapping to 0.
        Check(std::num::NonZeroU64::new(packed).unwrap_or(std::num::NonZeroU64::MAX))
    }

    /// The clock when it was checked.
    fn at(self) -> u64 {
        self.0.get() >> 1
    }

    /// Kept, with no change reported.
    fn kept(self) -> bool {
        self.0.get() & 1 == 1
    }
}

/// The run's record of checks and changes, on one clock that ticks at
/// every check and every change.
#[derive(Debug, Default)]
pub(super) struct Dirty {
    enabled: bool,
    clock: u64,
    /// The last check of each instance, by its position in the pass.
    checks: Vec<Option<Check>>,
    /// When a path was last changed.
    changed: FxHashMap<String, u64>,
    /// When something below a path was last changed.
    below: FxHashMap<String, u64>,
    /// When a change the VM cannot bound last happened.
    unbounded: u64,
    /// Instances counted as kept without a check over the run.
    skipped: u64,
}

impl Dirty {
    /// `enabled`: a real, non-interactive run that was not asked for full
    /// passes.
    pub fn new(enabled: bool) -> Self {
        Dirty {
            enabled,
            ..Dirty::default()
        }
    }

    /// Whether a real run's later passes may be incremental: not when
    /// [`FULL_PASSES_ENV`] is `1`.
    pub fn allowed() -> bool {
        std::env::var_os(FULL_PASSES_ENV).is_none_or(|v| v != "1")
    }

    /// How many instances were counted as kept without a check.
    pub fn skipped(&self) -> u64 {
        self.skipped
    }

    fn tick(&mut self) -> u64 {
        self.clock = self.clock.saturating_add(1);
        self.clock
    }

    /// A new pass whose instances are the last pass's, in the same order
    /// (the classes did not change).
    pub fn same_instances(&mut self, len: usize) {
        self.checks.resize(len, None);
    }

    /// A new pass whose instances were resolved again (the classes
    /// changed): each instance keeps its last check only if the last pass
    /// had the same instance (same promise, loop element and values); a
    /// `directory` keeps it only if every instance is the same.
    pub fn new_instances(
        &mut self,
        old: &[Held],
        new: &[Held],
        is_directory: impl Fn(usize) -> bool,
    ) {
        let mut at: HashMap<(usize, &[String]), usize> = HashMap::with_capacity(old.len());
        for (position, h) in old.iter().enumerate() {
            at.insert((h.index(), h.combo()), position);
        }
        let mut checks: Vec<Option<Check>> = Vec::with_capacity(new.len());
        for now in new {
            let carried = at.get(&(now.index(), now.combo())).and_then(|&position| {
                let before = old.get(position)?;
                // The same promise, loop element and digest: the same
                // instance ([`super::pass::resolved`]).
                match (before.resolved(), now.resolved()) {
                    (Ok(before), Ok(now)) if before == now => {
                        self.checks.get(position).copied().flatten()
                    }
                    _ => None,
                }
            });
            checks.push(carried);
        }
        let all_same = old.len() == new.len() && checks.iter().all(Option::is_some);
        if !all_same {
            for (check, h) in checks.iter_mut().zip(new) {
                if h.resolved().is_ok() && is_directory(h.index()) {
                    *check = None;
                }
            }
        }
        self.checks = checks;
    }

    /// Whether the instance at `position` may be counted as kept without a
    /// check (see the module's documentation); counts it if so.
    pub fn unchanged(&mut self, position: usize, inst: &Instance) -> bool {
        if !self.enabled || !PATH_BOUND.contains(&inst.kind) {
            return false;
        }
        let Some(Some(check)) = self.checks.get(position).copied() else {
            return false;
        };
        if !check.kept() {
            return false;
        }
        let at = check.at();
        if self.unbounded > at {
            return false;
        }
        let Some(path) = normal(&inst.promiser) else {
            return false;
        };
        let later = |t: Option<&u64>| t.is_some_and(|t| *t > at);
        if later(self.changed.get(path)) || later(self.below.get(path)) {
            return false;
        }
        if ancestors(path).any(|a| later(self.changed.get(a))) {
            return false;
        }
        self.skipped = self.skipped.saturating_add(1);
        // As good as a check now that found it kept.
        let now = self.tick();
        if let Some(slot) = self.checks.get_mut(position) {
            *slot = Some(Check::new(now, true));
        }
        true
    }

    /// The instance at `position` is being checked (applied) now.
    pub fn checked(&mut self, position: usize) {
        let at = self.tick();
        if let Some(slot) = self.checks.get_mut(position) {
            *slot = Some(Check::new(at, false));
        }
    }

    /// The instance at `position` is concluded with `applied` (its final
    /// outcome, after the flush of its staged writes). `far`: what it did
    /// may reach further than its path (its promise has a `notify` list, or
    /// a notification was delivered to it).
    pub fn concluded(&mut self, position: usize, inst: &Instance, applied: &Applied, far: bool) {
        let quiet = applied.changes.is_empty();
        let kept = quiet && applied.outcome == Outcome::Kept;
        match self.checks.get_mut(position) {
            Some(Some(check)) => *check = Check::new(check.at(), kept),
            // Concluded without being applied (blocked): not kept.
            Some(slot) => *slot = None,
            None => {}
        }
        if quiet && matches!(applied.outcome, Outcome::Kept | Outcome::Skipped(_)) {
            return;
        }
        let when = self.tick();
        let path = normal(&inst.promiser);
        match path {
            Some(path)
                if PATH_BOUND.contains(&inst.kind) && !far && inst.get("validate").is_none() =>
            {
                stamp(&mut self.changed, path, when);
                for a in ancestors(path) {
                    stamp(&mut self.below, a, when);
                }
                if confirmed(inst, applied) {
                    // As good as a check right after its own change.
                    if let Some(slot) = self.checks.get_mut(position) {
                        *slot = Some(Check::new(when, true));
                    }
                }
            }
            _ => self.unbounded = when,
        }
    }
}

/// The changes of a `file` repair that the operator confirmed by reading
/// the file back (LANGUAGE.md §7 step 4: the content, from the staged
/// temporary, whose owner and mode were set before its content; the flush
/// that renames it fails the promise if it cannot).
const CONFIRMED_CHANGES: [&str; 3] = ["created", "content", "removed stale temporary"];

/// Whether `applied` is a repair of `inst` that a check right after it
/// would find kept: a `file` whose only changes were confirmed by reading
/// them back (not a stored blob's streamed copy, not a mode or owner set
/// after the content). Anything else repaired is checked again.
fn confirmed(inst: &Instance, applied: &Applied) -> bool {
    applied.outcome == Outcome::Repaired
        && inst.kind == "file"
        && !matches!(inst.get("source"), Some(Value::Blob(_)))
        && applied
            .changes
            .iter()
            .all(|c| CONFIRMED_CHANGES.contains(&c.what.as_str()))
}

/// The same instance: promise, type, promiser and every value.
/// `path` if it is absolute and in normal form (no empty, `.` or `..`
/// component, no trailing `/` but for `/` itself): only such a path can be
/// compared with others by its prefixes. Any other promiser is never
/// skipped, and a change to it counts as unbounded.
fn normal(path: &str) -> Option<&str> {
    if path == "/" {
        return Some(path);
    }
    let rest = path.strip_prefix('/')?;
    // By byte: asked three times per instance and pass.
    rest.as_bytes()
        .split(|b| *b == b'/')
        .all(|c| !matches!(c, b"" | b"." | b".."))
        .then_some(path)
}

/// The directories above a normal path, nearest first, `/` last.
fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    // Without allocating: every instance of a later pass asks, and every
    // change records its ancestors.
    let mut rest = Some(path);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.bytes().rposition(|b| b == b'/') {
            Some(at) if at > 0 => {
                rest = current.get(..at);
                rest
            }
            _ => {
                rest = None;
                (current != "/").then_some("/")
            }
        }
    })
}

/// Records `when` for `path` in `map`, copying the path only the first
/// time (the paths are the policy's, from the signed bundle: Fx-hashed).
fn stamp(map: &mut FxHashMap<String, u64>, path: &str, when: u64) {
    match map.get_mut(path) {
        Some(at) => *at = when,
        None => {
            map.insert(path.to_owned(), when);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::operators::Change;

    fn inst(index: usize, kind: &'static str, path: &str) -> Instance {
        Instance {
            index,
            kind,
            promiser: path.into(),
            attrs: Vec::new(),
        }
    }

    fn kept() -> Applied {
        Applied::kept()
    }

    /// A check is one word, and its absence costs nothing more.
    #[test]
    fn a_check_packs_its_clock_and_outcome_in_8_bytes() {
        assert_eq!(std::mem::size_of::<Option<Check>>(), 8);
        for at in [1, 2, 41, u64::MAX >> 1] {
            for kept in [false, true] {
                let check = Check::new(at, kept);
                assert_eq!((check.at(), check.kept()), (at, kept));
            }
        }
    }

    fn repaired() -> Applied {
        Applied {
            outcome: Outcome::Repaired,
            changes: vec![Change {
                what: "content".into(),
                before: "a".into(),
                after: "b".into(),
                diff: None,
            }],
            output: None,
        }
    }

    /// One pass over `insts`, each concluded with the outcome `outcome`
    /// gives it; returns which were counted as kept without a check.
    fn pass(
        dirty: &mut Dirty,
        insts: &[Instance],
        outcome: impl Fn(usize) -> Applied,
    ) -> Vec<bool> {
        dirty.same_instances(insts.len());
        insts
            .iter()
            .enumerate()
            .map(|(position, i)| {
                if dirty.unchanged(position, i) {
                    return true;
                }
                dirty.checked(position);
                dirty.concluded(position, i, &outcome(position), false);
                false
            })
            .collect()
    }

    #[test]
    fn normal_paths_and_their_ancestors() {
        assert_eq!(normal("/a/b"), Some("/a/b"));
        assert_eq!(normal("/"), Some("/"));
        for odd in ["a/b", "/a//b", "/a/./b", "/a/../b", "/a/", ""] {
            assert_eq!(normal(odd), None, "{odd}");
        }
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), ["/a/b", "/a", "/"]);
        assert_eq!(ancestors("/").count(), 0);
    }

    #[test]
    fn only_a_kept_instance_untouched_since_is_skipped() {
        let insts = [
            inst(0, "file", "/d/a"),
            inst(1, "file", "/d/b"),
            inst(2, "file", "/e/c"),
        ];
        let mut dirty = Dirty::new(true);
        // Pass 1: the first is repaired, the others kept.
        let skipped = pass(
            &mut dirty,
            &insts,
            |p| if p == 0 { repaired() } else { kept() },
        );
        assert_eq!(skipped, [false, false, false]);
        // Pass 2: a file whose new content was read back counts as kept
        // too; the others were kept and nothing at their paths changed.
        let skipped = pass(&mut dirty, &insts, |_| kept());
        assert_eq!(skipped, [true, true, true]);
        assert_eq!(pass(&mut dirty, &insts, |_| kept()), [true, true, true]);
    }

    #[test]
    fn a_repair_not_read_back_is_checked_again() {
        let mut moded = repaired();
        moded.changes.push(Change {
            what: "mode".into(),
            before: "0o600".into(),
            after: "0o644".into(),
            diff: None,
        });
        let mut blob = inst(0, "file", "/d/a");
        blob.attrs.push((
            "source",
            Value::Blob(Box::new(crate::bundle::format::BlobRef {
                sha256: [0; 32],
                size: 1,
            })),
        ));
        for (repaired_inst, applied) in [
            (inst(0, "line", "/d/a"), repaired()),
            (inst(0, "file", "/d/a"), moded),
            (blob, repaired()),
        ] {
            let insts = [repaired_inst, inst(1, "file", "/d/b")];
            let mut dirty = Dirty::new(true);
            pass(&mut dirty, &insts, |p| {
                if p == 0 {
                    applied.clone()
                } else {
                    kept()
                }
            });
            assert_eq!(
                pass(&mut dirty, &insts, |_| kept()),
                [false, true],
                "{:?}",
                insts.first()
            );
        }
    }

    #[test]
    fn a_change_above_at_or_below_a_path_makes_it_checked_again() {
        // The last instance changes in pass 1, after every other was kept.
        for (changed, expect) in [
            ("/d", [false, false, false, false]),
            ("/d/a", [false, false, true, false]),
            ("/d/a/x", [false, false, true, false]),
            ("/", [false, false, false, false]),
            ("/e", [true, true, true, false]),
        ] {
            let insts = [
                inst(0, "directory", "/d"),
                inst(1, "file", "/d/a"),
                inst(2, "line", "/d/b"),
                inst(3, "directory", changed),
            ];
            let mut dirty = Dirty::new(true);
            pass(
                &mut dirty,
                &insts,
                |p| if p == 3 { repaired() } else { kept() },
            );
            let skipped = pass(&mut dirty, &insts, |_| kept());
            assert_eq!(skipped, expect, "a change at {changed}");
        }
    }

    #[test]
    fn an_unbounded_change_makes_every_instance_checked_again() {
        for (kind, notifies, validate) in [
            ("command", false, false),
            ("service", false, false),
            ("user", false, false),
            ("file", true, false),
            ("file", false, true),
        ] {
            let mut other = inst(2, kind, "/elsewhere/x");
            if validate {
                other
                    .attrs
                    .push(("validate", resolve_list(&["/bin/true", "%s"])));
            }
            let insts = [inst(0, "file", "/d/a"), inst(1, "file", "/d/b"), other];
            let mut dirty = Dirty::new(true);
            dirty.same_instances(insts.len());
            for (position, i) in insts.iter().enumerate() {
                dirty.checked(position);
                let applied = if position == 2 { repaired() } else { kept() };
                dirty.concluded(position, i, &applied, position == 2 && notifies);
            }
            let skipped = pass(&mut dirty, &insts, |_| kept());
            assert_eq!(
                skipped,
                [false, false, false],
                "{kind} {notifies} {validate}"
            );
        }
    }

    fn resolve_list(items: &[&str]) -> crate::run::resolve::Value {
        crate::run::resolve::Value::List(items.iter().map(|s| (*s).into()).collect())
    }

    #[test]
    fn a_failure_or_a_kept_with_changes_counts_as_a_change() {
        let failed = Applied::failed("no");
        let mut stale = kept();
        stale.changes = repaired().changes;
        for concluded in [failed, stale] {
            // The second changes what is above the first, after the first
            // was checked.
            let insts = [inst(0, "file", "/d/a/b"), inst(1, "file", "/d/a")];
            let mut dirty = Dirty::new(true);
            pass(&mut dirty, &insts, |p| {
                if p == 1 {
                    concluded.clone()
                } else {
                    kept()
                }
            });
            assert_eq!(pass(&mut dirty, &insts, |_| kept()), [false, false]);
        }
    }

    #[test]
    fn other_types_odd_paths_and_disabled_runs_are_always_checked() {
        let insts = [
            inst(0, "package", "nginx"),
            inst(1, "file", "/d/../a"),
            inst(2, "file", "/d/a"),
        ];
        let mut dirty = Dirty::new(true);
        pass(&mut dirty, &insts, |_| kept());
        assert_eq!(pass(&mut dirty, &insts, |_| kept()), [false, false, true]);
        let mut full = Dirty::new(false);
        pass(&mut full, &insts, |_| kept());
        assert_eq!(pass(&mut full, &insts, |_| kept()), [false, false, false]);
    }

    #[test]
    fn resolved_again_an_instance_keeps_its_check_only_if_unchanged() {
        type Row = (usize, Vec<String>, Result<Instance, ()>);
        let row = |i: Instance| -> Row { (i.index, Vec::new(), Ok(i)) };
        let held = |rows: &[Row]| -> Vec<Held> {
            rows.iter()
                .map(|(index, combo, i)| {
                    let digest = i.as_ref().map_or([0; 16], super::super::pass::digest);
                    Held::new(*index, combo.clone(), Ok(Some(digest)))
                })
                .collect()
        };
        let kinds = |rows: &[Row]| -> Vec<&'static str> {
            rows.iter()
                .map(|(_, _, i)| i.as_ref().map_or("", |i| i.kind))
                .collect()
        };
        let old: Vec<Row> = vec![
            row(inst(0, "file", "/a")),
            row(inst(1, "file", "/b")),
            row(inst(2, "directory", "/c")),
        ];
        let mut dirty = Dirty::new(true);
        dirty.same_instances(old.len());
        for (position, (_, _, i)) in old.iter().enumerate() {
            let Ok(i) = i else { continue };
            dirty.checked(position);
            dirty.concluded(position, i, &kept(), false);
        }
        // Promise 1 now resolves to another path, a new promise 3 comes
        // first: only promise 0 keeps its check (the directory does not,
        // the set of instances changed).
        let new: Vec<Row> = vec![
            row(inst(3, "file", "/z")),
            row(inst(0, "file", "/a")),
            row(inst(1, "file", "/b2")),
            row(inst(2, "directory", "/c")),
        ];
        let new_kinds = kinds(&new);
        dirty.new_instances(&held(&old), &held(&new), |i| {
            new.iter()
                .zip(&new_kinds)
                .any(|((at, _, _), k)| *at == i && *k == "directory")
        });
        let skipped: Vec<bool> = new
            .iter()
            .enumerate()
            .map(|(p, (_, _, i))| i.as_ref().is_ok_and(|i| dirty.unchanged(p, i)))
            .collect();
        assert_eq!(skipped, [false, true, false, false]);
        // The same instances again: the directory keeps its check too.
        let mut dirty = Dirty::new(true);
        dirty.same_instances(old.len());
        for (position, (_, _, i)) in old.iter().enumerate() {
            let Ok(i) = i else { continue };
            dirty.checked(position);
            dirty.concluded(position, i, &kept(), false);
        }
        let old_kinds = kinds(&old);
        dirty.new_instances(&held(&old), &held(&old), |i| {
            old.iter()
                .zip(&old_kinds)
                .any(|((at, _, _), k)| *at == i && *k == "directory")
        });
        assert!(dirty.unchanged(2, &inst(2, "directory", "/c")));
    }

    /// The ancestors as the prefixes ending before each `/` but the first,
    /// longest first, then `/` (the definition the iterator replaced).
    #[test]
    fn ancestors_are_the_prefixes_before_each_slash() {
        let by_prefixes = |path: &str| -> Vec<String> {
            let mut out: Vec<String> = path
                .char_indices()
                .filter(|(i, c)| *c == '/' && *i > 0)
                .filter_map(|(i, _)| path.get(..i).map(str::to_owned))
                .collect();
            out.reverse();
            if path != "/" {
                out.push("/".to_owned());
            }
            out
        };
        for path in [
            "/",
            "/a",
            "/a/",
            "/a/b",
            "/a/b/c",
            "/data/d12/f1234",
            "/é/ü",
        ] {
            let got: Vec<String> = ancestors(path).map(str::to_owned).collect();
            assert_eq!(got, by_prefixes(path), "{path}");
        }
    }
}
