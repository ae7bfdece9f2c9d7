//! `policyvm run --interactive` (LANGUAGE.md §17): before each repair,
//! the promise is applied as a dry run would apply it, over the state the
//! run has made so far, and the person at the terminal is shown what
//! would change; the repair is made only on yes. The question itself is
//! asked by the command line (`crate::cli::prompt`).

use super::operators::{self, Applied, Change, Ctx, Outcome};
use super::resolve::Instance;
use super::{apply, simulated};

/// A repair `policyvm run --interactive` asks about: the promise, and
/// what the repair would change (as a dry run describes it).
#[derive(Clone, Copy, Debug)]
pub struct Proposal<'a> {
    /// `file:line` of the promise.
    pub source: &'a str,
    pub kind: &'a str,
    pub promiser: &'a str,
    pub changes: &'a [Change],
}

/// Answers whether to make a proposed repair.
pub type Confirm<'a> = &'a mut dyn FnMut(&Proposal<'_>) -> bool;

/// Why a repair that was not made is skipped.
pub const DECLINED: &str = "declined";

/// One question of an interactive run: a promise about to be applied.
pub(super) struct Ask<'a, 'c> {
    pub(super) ctx: &'a Ctx<'c>,
    pub(super) inst: &'a Instance,
    pub(super) others: &'a operators::Others,
    /// Whether it was notified (a command then runs, a service restarts).
    pub(super) notified: bool,
    pub(super) source: String,
}

impl Ask<'_, '_> {
    /// `Some(skipped, declined)` when the promise would repair and the
    /// person declines (or declined it in an earlier pass); `None` to
    /// apply it.
    pub(super) fn declined(
        &self,
        confirm: &mut dyn FnMut(&Proposal<'_>) -> bool,
        before: bool,
    ) -> Option<Applied> {
        let skipped = || Applied {
            outcome: Outcome::Skipped(DECLINED.into()),
            changes: Vec::new(),
            output: None,
        };
        if before {
            return Some(skipped());
        }
        let preview = self.preview();
        if preview.outcome != Outcome::Repaired {
            return None;
        }
        let proposal = Proposal {
            source: &self.source,
            kind: self.inst.kind,
            promiser: &self.inst.promiser,
            changes: &preview.changes,
        };
        (!confirm(&proposal)).then(skipped)
    }

    /// The promise applied as a dry run applies it, over the state the run
    /// has made so far (a fresh overlay: nothing is changed).
    fn preview(&self) -> Applied {
        let sim = simulated::Simulated::new(self.ctx.fs);
        let dry = Ctx {
            fs: self.ctx.fs,
            accounts: self.ctx.accounts,
            dry_run: true,
            sim: Some(&sim),
            state: self.ctx.state,
            chroot: self.ctx.chroot,
            line_regexes: Default::default(),
            neighbours: Default::default(),
            blobs: self.ctx.blobs,
        };
        let inst = self.inst;
        match inst.kind {
            // These change nothing on the host that a person could decline.
            "watch" | "neighbours" | "report" => Applied::kept(),
            "command" => operators::command(&dry, inst, self.notified),
            "directory" => operators::directory(&dry, inst, self.others),
            _ => apply(&dry, inst, self.notified),
        }
    }
}
