//! Lookups that may find nothing (LANGUAGE.md section 11): expansion
//! splits a promise that looks a value up by a key only the host knows
//! into one instance per key, and marks an instance where the lookup finds
//! nothing and no `??` gives a default. That is an error exactly when some
//! host can make the instance's guard true ("unless the compiler can prove
//! the key is always present"); the witness names such a host. Marked
//! instances are removed either way: they are never compiled.

use rustc_hash::FxHashSet as HashSet;

use converge_grammar::Span;

use super::guards::{too_complex, GuardSpace};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::Program;

/// Reports reachable missing lookups and removes every marked instance.
pub fn missing_lookups(program: &mut Program) -> Vec<Diagnostic> {
    if program.promises.iter().all(|p| p.missing().is_none()) {
        return Vec::new();
    }
    let mut out = Vec::new();
    {
        let mut space = GuardSpace::new(program);
        let marked: Vec<(usize, Span)> = program
            .promises
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.missing().map(|s| (i, s)))
            .collect();
        let formulas: Vec<_> = marked
            .iter()
            .filter_map(|(i, _)| program.promises.get(*i))
            .map(|p| space.formula(&p.guard))
            .collect();
        let constraints = space.constraints();
        let mut reported: HashSet<Span> = HashSet::default();
        for ((_, span), formula) in marked.iter().zip(&formulas) {
            if reported.contains(span) {
                continue;
            }
            match space.witness(formula, &constraints) {
                Ok(Some(witness)) => {
                    reported.insert(*span);
                    let mut d = Diagnostic::new(
                        Code::MaybeMissing,
                        "this lookup may be missing on a host; add `?? default`",
                        *span,
                        "no `??` default",
                    );
                    d = if witness.is_empty() {
                        d.with_note("for example on a host whose key is none of the map's keys")
                    } else {
                        d.with_note(format!("for example where {}", witness.join(" && ")))
                    };
                    out.push(d.with_help(
                        "write `... ?? default`, or guard the promise so that only hosts with a key reach it",
                    ));
                }
                Ok(None) => {}
                Err(err) => {
                    reported.insert(*span);
                    out.push(too_complex(
                        *span,
                        "whether this lookup can be missing",
                        err,
                    ));
                }
            }
        }
    }
    program.promises.retain(|p| p.missing().is_none());
    out
}
