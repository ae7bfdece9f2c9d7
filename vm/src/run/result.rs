//! The result of one promise instance over the whole run, as the report
//! has it.
//!
//! A report holds one per promise instance, and is made at the end of the
//! run, beside the bundle's body: a converged run's peak memory (issue 22,
//! item 3). So a result is 56 bytes: its promiser is the body's text,
//! shared, not copied ([`Text`]); its promise type is an id; its outcome a
//! one-byte mark; and what most results do not have (changes, output, an
//! outcome with a reason, repairs) is in one box. It was 112 bytes with
//! each of them a field, 160 with a copied promiser.

use super::operators::{Change, Outcome};
use super::source::Source;
use crate::bundle::format::Text;

#[derive(Clone, Debug)]
pub struct PromiseResult {
    /// The body's text when the promiser is a constant.
    pub promiser: Text,
    /// `file:line` of the promise.
    pub source: Source,
    details: Option<Box<Details>>,
    index: u32,
    /// Its promise type's id ([`kind_id`]).
    kind: u16,
    mark: Mark,
}

/// An outcome without a reason; one with a reason is [`Mark::Other`], kept
/// beside it (in a box a result or a run's record already has). Shared by
/// the report's results and the run's ([`super::recorded`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mark {
    Kept,
    Repaired,
    Changed,
    Other,
}

static KEPT: Outcome = Outcome::Kept;
static REPAIRED: Outcome = Outcome::Repaired;
static CHANGED: Outcome = Outcome::Changed;
/// What [`Mark::Other`] reads without its outcome (never made: the
/// outcome is set with the mark).
static UNRECORDED: Outcome = Outcome::Failed(String::new());

impl Mark {
    /// The mark of `outcome`, and the outcome itself when it has a reason.
    fn of(outcome: Outcome) -> (Mark, Option<Outcome>) {
        match outcome {
            Outcome::Kept => (Mark::Kept, None),
            Outcome::Repaired => (Mark::Repaired, None),
            Outcome::Changed => (Mark::Changed, None),
            other => (Mark::Other, Some(other)),
        }
    }

    /// Marks `outcome`: one with a reason goes to the `slot` of the box
    /// `boxed` (made when there is none), and a reason left from an
    /// earlier outcome is cleared.
    pub(super) fn store<B: Default>(
        outcome: Outcome,
        boxed: &mut Option<Box<B>>,
        slot: fn(&mut B) -> &mut Option<Outcome>,
    ) -> Mark {
        let (mark, reasoned) = Mark::of(outcome);
        if reasoned.is_some() {
            *slot(boxed.get_or_insert_with(Box::default)) = reasoned;
        } else if let Some(b) = boxed.as_mut() {
            *slot(b) = None;
        }
        mark
    }

    /// The outcome it marks; `reasoned` is the one kept beside
    /// [`Mark::Other`].
    pub(super) fn outcome(self, reasoned: Option<&Outcome>) -> &Outcome {
        match self {
            Mark::Kept => &KEPT,
            Mark::Repaired => &REPAIRED,
            Mark::Changed => &CHANGED,
            Mark::Other => reasoned.unwrap_or(&UNRECORDED),
        }
    }
}

/// The id of a promise type not known (shown as `?`).
const UNKNOWN_KIND: u16 = u16::MAX;

/// The id a result keeps for promise type `name`: results hold a type as
/// its id, not its name (here and in [`super::recorded`]).
pub(super) fn kind_id(name: &str) -> u16 {
    crate::schema::promise_type(name).map_or(UNKNOWN_KIND, |t| t.id)
}

/// The name of promise type `id`, `?` when it is not known.
pub(super) fn kind_name(id: u16) -> &'static str {
    crate::schema::promise_type_by_id(id).map_or("?", |t| t.name)
}

/// What a promise changed, the output of its command, an outcome with a
/// reason, and how often it repaired.
#[derive(Clone, Debug, Default)]
struct Details {
    changes: Vec<Change>,
    output: Option<String>,
    outcome: Option<Outcome>,
    repaired_passes: u32,
}

impl PromiseResult {
    pub fn new(
        index: usize,
        kind: &'static str,
        promiser: impl Into<Text>,
        outcome: Outcome,
        source: Source,
        changes: Vec<Change>,
        output: Option<String>,
    ) -> Self {
        PromiseResult::of_kind(
            index,
            kind_id(kind),
            promiser.into(),
            outcome,
            source,
            changes,
            output,
        )
    }

    /// [`PromiseResult::new`] of a promise type given by its id
    /// ([`kind_id`]), as the run records it.
    pub(super) fn of_kind(
        index: usize,
        kind: u16,
        promiser: Text,
        outcome: Outcome,
        source: Source,
        changes: Vec<Change>,
        output: Option<String>,
    ) -> Self {
        let details = (!changes.is_empty() || output.is_some()).then(|| {
            Box::new(Details {
                changes,
                output,
                ..Details::default()
            })
        });
        let mut result = PromiseResult {
            promiser,
            source,
            details,
            index: u32::try_from(index).unwrap_or(u32::MAX),
            kind,
            mark: Mark::Kept,
        };
        result.set_outcome(outcome);
        result
    }

    /// The index of its promise in the bundle.
    pub fn index(&self) -> usize {
        self.index as usize
    }

    /// Its promise type (`?` when the bundle's is not known).
    pub fn kind(&self) -> &'static str {
        kind_name(self.kind)
    }

    pub fn outcome(&self) -> &Outcome {
        self.mark
            .outcome(self.details.as_ref().and_then(|d| d.outcome.as_ref()))
    }

    pub fn set_outcome(&mut self, outcome: Outcome) {
        self.mark = Mark::store(outcome, &mut self.details, |d| &mut d.outcome);
    }

    /// In how many passes it repaired something.
    pub fn repaired_passes(&self) -> u32 {
        self.details.as_ref().map_or(0, |d| d.repaired_passes)
    }

    pub fn set_repaired_passes(&mut self, passes: u32) {
        if passes != 0 || self.details.is_some() {
            self.details
                .get_or_insert_with(Box::default)
                .repaired_passes = passes;
        }
    }

    /// What it changed, in order.
    pub fn changes(&self) -> &[Change] {
        self.details.as_ref().map_or(&[], |d| &d.changes)
    }

    /// The output of its command, if it ran one that printed.
    pub fn output(&self) -> Option<&str> {
        self.details.as_ref().and_then(|d| d.output.as_deref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_result_is_56_bytes() {
        assert_eq!(std::mem::size_of::<PromiseResult>(), 56);
    }

    #[test]
    fn a_result_keeps_its_kind_outcome_and_repairs() {
        let mut r = PromiseResult::new(
            7,
            "file",
            "/etc/motd",
            Outcome::Failed("no space".into()),
            Source::default(),
            Vec::new(),
            None,
        );
        assert_eq!(
            (r.index(), r.kind(), r.promiser.as_str()),
            (7, "file", "/etc/motd")
        );
        assert_eq!(r.outcome(), &Outcome::Failed("no space".into()));
        assert_eq!(r.repaired_passes(), 0);
        r.set_repaired_passes(3);
        r.set_outcome(Outcome::Repaired);
        assert_eq!((r.outcome(), r.repaired_passes()), (&Outcome::Repaired, 3));
        let unknown = PromiseResult::new(
            0,
            "nonesuch",
            "",
            Outcome::Kept,
            Source::default(),
            Vec::new(),
            None,
        );
        assert_eq!((unknown.kind(), unknown.outcome()), ("?", &Outcome::Kept));
    }
}
