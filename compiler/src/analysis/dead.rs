//! Promises that can never be active (warning `W0005`): their guard is
//! unsatisfiable under the class rules of [`guards`](super::guards).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use converge_grammar::Span;

use super::guards::{too_complex, GuardSpace};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Guard, Program};

/// One warning per promise statement whose guard no host can make true in
/// any of its expansions (a bundle called twice may be dead in one call and
/// alive in the other: that is not reported). A guard that is simply
/// `false` — written so, or a `bool` parameter passed `false` — is a
/// deliberate switch, not a mistake, and is not reported either.
pub fn dead_promises(program: &Program) -> Vec<Diagnostic> {
    let mut space = GuardSpace::new(program);
    // Translate every guard first, so the constraints cover all atoms.
    let formulas = space.promise_formulas(program);
    let constraints = space.constraints();
    // What is known of each shared guard, and of each guard by its value
    // (equal guards of different blocks have the same answer).
    let mut known_by_slot: Vec<Option<bool>> = vec![None; formulas.distinct()];
    let mut alive: HashMap<&Guard, bool> = HashMap::default();
    let mut live_statements: HashSet<Span> = HashSet::default();
    let mut dead: Vec<&crate::ir::Promise> = Vec::new();
    let mut too_complex_spans = Vec::new();
    for (i, promise) in program.promises.iter().enumerate() {
        if matches!(*promise.guard, Guard::Const(_)) {
            live_statements.insert(promise.span);
            continue;
        }
        let (Some(formula), Some(slot)) = (formulas.get(i), formulas.slot(i)) else {
            continue;
        };
        let by_slot = known_by_slot.get(slot).copied().flatten();
        let is_alive = match by_slot.or_else(|| alive.get(&*promise.guard).copied()) {
            Some(known) => known,
            None => {
                let known = match space.witness(formula, &constraints) {
                    Ok(found) => found.is_some(),
                    Err(err) => {
                        // Unknown is not "dead": no W0005, but an error
                        // saying the guard could not be analysed.
                        too_complex_spans.push((promise.span, err));
                        true
                    }
                };
                alive.insert(&*promise.guard, known);
                known
            }
        };
        if let Some(entry) = known_by_slot.get_mut(slot) {
            *entry = Some(is_alive);
        }
        if is_alive {
            live_statements.insert(promise.span);
        } else {
            dead.push(promise);
        }
    }
    let mut reported: HashSet<Span> = HashSet::default();
    let mut out: Vec<Diagnostic> = too_complex_spans
        .into_iter()
        .map(|(span, err)| too_complex(span, "whether this promise's guard can ever hold", err))
        .collect();
    for promise in dead {
        if !live_statements.contains(&promise.span) && reported.insert(promise.span) {
            out.push(
                Diagnostic::new(
                    Code::GuardNeverTrue,
                    "this promise can never be active",
                    promise.span,
                    "no host makes its guard true",
                )
                .with_note(format!("its guard is `{}`", promise.guard.display()))
                .with_help("check for exclusive classes (OS families, weekdays, hours) or one fact compared with two values; remove the promise or fix the guard"),
            );
        }
    }
    out
}
