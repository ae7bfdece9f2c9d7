//! The result of one promise instance while the run goes on, before it is
//! a [`PromiseResult`] of the report.
//!
//! A run holds one result per instance from the first pass to the report,
//! beside the bundle's body and each pass's instances: as a
//! [`PromiseResult`] that was 160 bytes and a copy of the promiser (about
//! 190 bytes a promise; issue 22, item 3). What the body already says (the
//! promiser when it is a constant, `file:line`) is left out here, and what
//! most results do not have (changes, output, a computed promiser, an
//! outcome with a reason, repairs) is boxed: a kept promise is 16 bytes.
//! The report's results are made once, after the passes, when the pass's
//! instances are gone.

use std::borrow::Cow;

use super::operators::{Applied, Change, Outcome};
use super::result::{kind_id, kind_name, Mark};
use super::source::SourceFiles;
use super::PromiseResult;
use crate::bundle::format::{Body, Constant, Item, Text};
use crate::bundle::Verified;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Recorded {
    /// The promise's index (a body holds far fewer than `u32::MAX`).
    index: u32,
    /// Its promise type's id ([`kind_id`]).
    kind: u16,
    /// Its outcome, when that is all there is to it.
    mark: Mark,
    /// Everything else, absent for a kept promise of the body's constant
    /// promiser: with it, a result is 16 bytes.
    more: Option<Box<More>>,
}

/// What a result has beyond its outcome; most have none of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct More {
    /// The promiser, when it is not the promise's constant (computed on
    /// the host, or shortened for a report).
    promiser: Option<String>,
    changes: Vec<Change>,
    output: Option<String>,
    /// The outcome of [`Mark::Other`]: one with a reason.
    outcome: Option<Outcome>,
    /// In how many passes it repaired something (at most the bundle's
    /// pass limit, [`MAX_PASS_LIMIT`](crate::bundle::verify::MAX_PASS_LIMIT)).
    repaired_passes: u16,
}

/// The promiser promise `index` names as a constant, if it does.
fn constant_promiser(body: &Body, index: usize) -> Option<&str> {
    match body.promises.get(index).map(|p| p.promiser) {
        Some(Item::Const(c)) => match body.constants.get(c as usize) {
            Some(Constant::Str(s) | Constant::Word(s)) => Some(s),
            _ => None,
        },
        _ => None,
    }
}

/// The report's results, in order, made from the run's: taken from the end
/// a slice at a time, the run's vector shrinking as the report's grows, so
/// that the two are never both whole (the report's are 160 bytes a
/// promise, the run's 64: a converged run's peak memory; issue 22, item 3).
pub(crate) fn finish_all(
    mut results: Vec<Recorded>,
    v: &Verified,
    heads: &[Head],
) -> Vec<PromiseResult> {
    /// Results per slice: each slice's freed space is given back before
    /// the next is made.
    const SLICE: usize = 4096;
    let mut files = SourceFiles::default();
    let mut out: Vec<PromiseResult> = Vec::with_capacity(results.len());
    while !results.is_empty() {
        let from = results.len().saturating_sub(SLICE);
        out.extend(
            results
                .drain(from..)
                .rev()
                .map(|r| r.finish(v, heads, &mut files)),
        );
        results.shrink_to_fit();
    }
    out.reverse();
    out
}

/// What a report reads of a promise: its promiser and where it was
/// written. Taken from the body before the report's results are made, so
/// that a run that owns its bundle can let the decoded promises go first
/// ([`super::run_owned`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Head {
    promiser: Item,
    source: u32,
}

/// The [`Head`] of every promise of `body`, by index.
pub(crate) fn heads(body: &Body) -> Vec<Head> {
    body.promises
        .iter()
        .map(|p| Head {
            promiser: p.promiser,
            source: p.source,
        })
        .collect()
}

impl Recorded {
    /// The first result of an instance of promise `index` named `promiser`.
    pub(crate) fn new(
        body: &Body,
        index: usize,
        kind: &'static str,
        promiser: &str,
        applied: Applied,
    ) -> Self {
        let repaired = applied.outcome == Outcome::Repaired;
        let own = (constant_promiser(body, index) != Some(promiser)).then(|| promiser.to_owned());
        let more =
            (own.is_some() || repaired || !applied.changes.is_empty() || applied.output.is_some())
                .then(|| {
                    Box::new(More {
                        promiser: own,
                        changes: applied.changes,
                        output: applied.output,
                        outcome: None,
                        repaired_passes: u16::from(repaired),
                    })
                });
        let mut recorded = Recorded {
            index: u32::try_from(index).unwrap_or(u32::MAX),
            kind: kind_id(kind),
            mark: Mark::Kept,
            more,
        };
        recorded.set_outcome(applied.outcome);
        recorded
    }

    /// What a later pass did to the same instance.
    pub(crate) fn update(&mut self, applied: Applied) {
        if applied.outcome == Outcome::Repaired {
            let more = self.more.get_or_insert_with(Box::default);
            more.repaired_passes = more.repaired_passes.saturating_add(1);
        }
        // The final outcome: a failure stands; a repair in any pass makes
        // the promise repaired; otherwise the latest outcome.
        let outcome = match (self.outcome(), applied.outcome) {
            (_, Outcome::Failed(e)) => Outcome::Failed(e),
            (Outcome::Repaired, _) => Outcome::Repaired,
            (_, o) => o,
        };
        self.set_outcome(outcome);
        if applied.changes.is_empty() && applied.output.is_none() {
            return;
        }
        let more = self.more.get_or_insert_with(Box::default);
        // A dry run sees the same state in every pass: report a change once.
        for change in applied.changes {
            if !more.changes.contains(&change) {
                more.changes.push(change);
            }
        }
        if applied.output.is_some() {
            more.output = applied.output;
        }
    }

    /// Its outcome so far.
    pub(crate) fn outcome(&self) -> &Outcome {
        self.mark
            .outcome(self.more.as_ref().and_then(|m| m.outcome.as_ref()))
    }

    /// Sets its outcome: a mark, and one with a reason in [`More`].
    fn set_outcome(&mut self, outcome: Outcome) {
        self.mark = Mark::store(outcome, &mut self.more, |m| &mut m.outcome);
    }

    /// In how many passes it repaired something.
    #[cfg(test)]
    fn repaired_passes(&self) -> u16 {
        self.more.as_ref().map_or(0, |m| m.repaired_passes)
    }

    /// Its promise type (`?` when not known, as the report says).
    pub(crate) fn kind(&self) -> &'static str {
        kind_name(self.kind)
    }

    /// The index of its promise.
    pub(crate) fn index(&self) -> usize {
        self.index as usize
    }

    /// Its promiser.
    pub(crate) fn promiser<'b>(&'b self, body: &'b Body) -> Cow<'b, str> {
        match self.more.as_ref().and_then(|m| m.promiser.as_deref()) {
            Some(own) => Cow::Borrowed(own),
            None => Cow::Borrowed(constant_promiser(body, self.index()).unwrap_or_default()),
        }
    }

    /// The result as the report has it (`heads` are its body's promises').
    pub(crate) fn finish(
        self,
        v: &Verified,
        heads: &[Head],
        files: &mut SourceFiles,
    ) -> PromiseResult {
        let index = self.index();
        let head = heads.get(index);
        let promiser = match self.more.as_ref().and_then(|m| m.promiser.as_deref()) {
            Some(own) => Text::from(own),
            // The body's text, shared, not copied (format's `text.rs`).
            None => match head.map(|h| h.promiser) {
                Some(Item::Const(c)) => match v.body.constants.get(c as usize) {
                    Some(Constant::Str(s) | Constant::Word(s)) => s.clone(),
                    _ => Text::default(),
                },
                _ => Text::default(),
            },
        };
        let kind = self.kind;
        let source = files.of(v, head.map(|h| h.source));
        let mark = self.mark;
        let More {
            changes,
            output,
            outcome,
            repaired_passes,
            ..
        } = self.more.map(|m| *m).unwrap_or_default();
        let outcome = outcome.unwrap_or_else(|| mark.outcome(None).clone());
        let mut result =
            PromiseResult::of_kind(index, kind, promiser, outcome, source, changes, output);
        result.set_repaired_passes(u32::from(repaired_passes));
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::format::{List, Promise};

    fn body() -> Body {
        let mut body = Body::with_programs(
            vec![Constant::Str("/etc/motd".into()), Constant::Int(3)],
            Vec::new(),
        );
        let promise = |promiser| {
            Promise::from(converge_format::bundle::format::PromiseParts {
                ..converge_format::bundle::format::PromiseParts::new(
                    crate::schema::promise_type("file").map_or(0, |t| t.id),
                    promiser,
                )
            })
        };
        body.promises = List(vec![promise(Item::Const(0)), promise(Item::Code(0))]);
        body
    }

    fn change(what: &str) -> Change {
        Change {
            what: what.into(),
            before: "a".into(),
            after: "b".into(),
            diff: None,
        }
    }

    /// A kept promise whose promiser is the body's constant holds nothing
    /// but its outcome; one with a computed promiser keeps it.
    #[test]
    fn a_kept_constant_promise_holds_nothing_the_body_says() {
        let body = body();
        let kept = Recorded::new(&body, 0, "file", "/etc/motd", Applied::kept());
        assert!(kept.more.is_none());
        assert_eq!(kept.promiser(&body), "/etc/motd");
        let computed = Recorded::new(&body, 1, "file", "/etc/web01", Applied::kept());
        assert_eq!(computed.promiser(&body), "/etc/web01");
        // A shortened promiser is not the constant's.
        let short = Recorded::new(&body, 0, "file", "/etc", Applied::kept());
        assert_eq!(short.promiser(&body), "/etc");
        assert_eq!(std::mem::size_of::<Recorded>(), 16);
    }

    /// Passes merge as the report always said: a failure stands, a repair
    /// in any pass makes it repaired, a change is reported once, the latest
    /// output is kept.
    #[test]
    fn later_passes_merge_into_one_result() {
        let body = body();
        let mut r = Recorded::new(
            &body,
            0,
            "file",
            "/etc/motd",
            Applied::from_changes(vec![change("content")]),
        );
        r.update(Applied {
            outcome: Outcome::Kept,
            changes: vec![change("content"), change("mode")],
            output: Some("out".into()),
        });
        assert_eq!(*r.outcome(), Outcome::Repaired);
        assert_eq!(r.repaired_passes(), 1);
        r.update(Applied::failed("no"));
        r.update(Applied::kept());
        assert_eq!(*r.outcome(), Outcome::Kept);
        r.update(Applied::failed("no"));
        let mut files = SourceFiles::default();
        let v = Verified {
            body,
            key_id: [0; 8],
            version: (2, 6),
            digest: [0; 32],
            len: 0,
        };
        let done = r.finish(&v, &heads(&v.body), &mut files);
        assert_eq!(*done.outcome(), Outcome::Failed("no".into()));
        assert_eq!(done.promiser, "/etc/motd");
        assert_eq!(
            done.changes()
                .iter()
                .map(|c| c.what.as_str())
                .collect::<Vec<_>>(),
            ["content", "mode"]
        );
        assert_eq!(done.output(), Some("out"));
    }
}
