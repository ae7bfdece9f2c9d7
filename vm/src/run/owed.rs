//! The run's side of owed notifications ([`crate::state::owed`]): which
//! notifications are owed, recorded before a notifying promise changes
//! anything, and paid when the notified promise succeeds.

use std::collections::HashSet;

use crate::state::{Debt, StateDir};

/// The notifications owed during a run, mirrored durably in the state
/// directory when the run has one (a library caller without one keeps
/// them in memory: they are then delivered within the run only).
#[derive(Debug)]
pub struct Ledger<'s> {
    state: Option<&'s StateDir>,
    dry_run: bool,
    debts: Vec<Debt>,
    /// Debts a repair confirmed in this run: never retracted.
    confirmed: HashSet<(String, String)>,
    /// Owed notifications already tried in this run (once per run each).
    attempted: HashSet<(String, String)>,
}

impl<'s> Ledger<'s> {
    /// The debts left by earlier runs.
    pub fn load(state: Option<&'s StateDir>, dry_run: bool) -> Result<Ledger<'s>, String> {
        let debts = match state {
            Some(s) => s
                .owed()
                .map_err(|e| format!("cannot read the owed notifications: {e}"))?,
            None => Vec::new(),
        };
        Ok(Ledger {
            state,
            dry_run,
            debts,
            confirmed: HashSet::new(),
            attempted: HashSet::new(),
        })
    }

    /// Whether a notification is owed to this promise and not yet tried in
    /// this run; asking counts as the try.
    pub fn deliver_now(&mut self, kind: &str, promiser: &str) -> bool {
        let owed = self.debts.iter().any(|d| d.is_for(kind, promiser));
        owed && self
            .attempted
            .insert((kind.to_owned(), promiser.to_owned()))
    }

    /// Records `debts` durably before the change that causes them; returns
    /// those that were not owed yet (to retract if nothing changes). `Err`
    /// means they could not be recorded: the change must not be made.
    pub fn incur(&mut self, debts: Vec<Debt>) -> Result<Vec<Debt>, String> {
        if self.dry_run {
            return Ok(Vec::new());
        }
        let new: Vec<Debt> = debts
            .into_iter()
            .filter(|d| !self.debts.iter().any(|o| o.is_for(&d.kind, &d.promiser)))
            .collect();
        if new.is_empty() {
            return Ok(new);
        }
        self.debts.extend(new.iter().cloned());
        self.save().map_err(|e| {
            format!("the notification it owes could not be recorded, so nothing was changed: {e}")
        })?;
        Ok(new)
    }

    /// The promise that incurred `added` changed nothing after all (kept,
    /// failed or skipped): those debts are dropped again, unless a repair
    /// confirmed them meanwhile.
    pub fn retract(&mut self, added: &[Debt]) {
        if added.is_empty() {
            return;
        }
        let before = self.debts.len();
        self.debts.retain(|d| {
            self.confirmed
                .contains(&(d.kind.clone(), d.promiser.clone()))
                || !added.iter().any(|a| a.is_for(&d.kind, &d.promiser))
        });
        if self.debts.len() != before {
            // Keeping a debt that is not owed costs one restart too many at
            // worst; a failed write is not worth failing the promise for.
            let _ = self.save();
        }
    }

    /// A repair confirmed these debts.
    pub fn confirm(&mut self, debts: &[Debt]) {
        for d in debts {
            self.confirmed.insert((d.kind.clone(), d.promiser.clone()));
        }
    }

    /// The notified promise succeeded: its debt is paid.
    /// A dry run pays nothing: it delivered nothing.
    pub fn pay(&mut self, kind: &str, promiser: &str) -> Result<(), String> {
        if self.dry_run {
            return Ok(());
        }
        let before = self.debts.len();
        self.debts.retain(|d| !d.is_for(kind, promiser));
        if self.debts.len() == before {
            return Ok(());
        }
        self.confirmed
            .remove(&(kind.to_owned(), promiser.to_owned()));
        self.save().map_err(|e| {
            format!(
                "it was delivered, but the paid notification could not be recorded \
                 (the next run delivers it again): {e}"
            )
        })
    }

    /// What is still owed.
    pub fn owed(&self) -> &[Debt] {
        &self.debts
    }

    fn save(&self) -> std::io::Result<()> {
        match self.state {
            Some(s) => s.set_owed(&self.debts),
            None => Ok(()),
        }
    }
}
