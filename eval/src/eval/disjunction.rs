//! Programs that are a disjunction of class names (`host_a || host_b ||
//! ...`, as the compiler lowers every inventory `group_` class), evaluated
//! by set membership instead of instruction by instruction.
//!
//! A group of the inventory is the disjunction of its members' `host_`
//! classes, so its program grows with the fleet. Run per instruction, every
//! host paid for every member of every group: `policyc plan` over 10,000
//! hosts spent most of its time there (O(hosts²); docs/performance.md,
//! "Plan"), and a host's `policyvm run` paid for the whole fleet in each
//! pass. Here each such program is indexed once per bundle ([`Disjunctions`]),
//! and a run asks the index only about the classes the host has, the
//! classes that failed and the facts that are not known: the cost follows
//! the host, not the fleet.
//!
//! The result is exactly the interpreter's: the same value, the same error
//! at the same term (the interpreter evaluates every term, in order, and
//! fails at the first class that failed or is unknown), the same steps
//! charged. `tests::equal_to_the_interpreter` runs both over a table of
//! cases.

use std::collections::{BTreeSet, HashMap};

use crate::bundle::format::{Body, Constant};
use crate::bundle::instr::Instr;
use crate::facts::{hard_class_fact, unknown_class, FactSource};

/// The disjunctions of class names among the programs of one bundle,
/// worked out once (the VM per run, a preview once per bundle for every
/// host it previews).
#[derive(Clone, Debug, Default)]
pub struct Disjunctions {
    /// By program index: its disjunction, if it is one.
    by_program: Vec<Option<Box<Disjunction>>>,
}

/// One program of only `class` and `or` instructions, as an index.
#[derive(Clone, Debug)]
struct Disjunction {
    /// Each class it names, with the index of its first `class`
    /// instruction.
    first: HashMap<String, usize>,
    /// The terms that are hard classes derived from a fact, by that fact:
    /// each term's first instruction and name, in program order.
    by_fact: Vec<(&'static str, Vec<(usize, String)>)>,
    /// How many instructions the program has (the steps it is charged).
    len: usize,
}

/// What the interpreter would find running a disjunction on one host.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Every term evaluated; whether any class is set.
    Holds(bool),
    /// The term at instruction `at` names class `name`, whose definition
    /// failed (its reason is in the evaluator's failed classes).
    Failed { at: usize, name: String },
    /// The term at instruction `at` is a hard class whose fact is not
    /// known here: `reason` says so.
    Unknown { at: usize, reason: String },
}

impl Outcome {
    /// The instruction the interpreter fails at, if it fails.
    fn failing_term(&self) -> Option<usize> {
        match self {
            Outcome::Holds(_) => None,
            Outcome::Failed { at, .. } | Outcome::Unknown { at, .. } => Some(*at),
        }
    }

    /// How many instructions of a program of `len` the interpreter
    /// executes to reach this outcome (all of them, or up to and including
    /// the failing term).
    pub(super) fn executed(&self, len: usize) -> usize {
        self.failing_term().map_or(len, |at| at.saturating_add(1))
    }
}

impl Disjunctions {
    /// Indexes every program of `body` that is a disjunction of two or
    /// more class names (a single `class` instruction is as fast run).
    pub fn of(body: &Body) -> Self {
        Disjunctions {
            by_program: body
                .programs
                .iter()
                .map(|p| Disjunction::of(body, &p.code.0).map(Box::new))
                .collect(),
        }
    }

    /// Program `program`'s length if it is an indexed disjunction.
    pub(super) fn len_of(&self, program: u32) -> Option<usize> {
        self.get(program).map(|d| d.len)
    }

    fn get(&self, program: u32) -> Option<&Disjunction> {
        self.by_program
            .get(program as usize)
            .and_then(|d| d.as_deref())
    }

    /// What program `program` gives on a host with `classes` set, the
    /// classes in `failed` failed, and `facts`; `None` if it is not an
    /// indexed disjunction.
    pub(super) fn evaluate(
        &self,
        program: u32,
        classes: &BTreeSet<String>,
        failed: &HashMap<String, String>,
        facts: &dyn FactSource,
    ) -> Option<Outcome> {
        self.get(program)
            .map(|d| d.evaluate(classes, failed, facts))
    }
}

impl Disjunction {
    /// The index of `code` if it is `class c0, class c1, or, ...` (any
    /// order the stack allows: the verifier checked the shape, checked
    /// again here) over word constants, with at least two terms.
    fn of(body: &Body, code: &[Instr]) -> Option<Disjunction> {
        let mut first: HashMap<String, usize> = HashMap::new();
        let mut by_fact: Vec<(&'static str, Vec<(usize, String)>)> = Vec::new();
        let mut depth = 0usize;
        for (at, instr) in code.iter().enumerate() {
            match instr {
                Instr::Class(c) => {
                    let (Constant::Word(name) | Constant::Str(name)) =
                        body.constants.get(*c as usize)?
                    else {
                        return None;
                    };
                    depth = depth.checked_add(1)?;
                    if first.contains_key(name.as_str()) {
                        continue;
                    }
                    first.insert(name.to_string(), at);
                    if let Some(fact) = hard_class_fact(name) {
                        match by_fact.iter_mut().find(|(f, _)| *f == fact) {
                            Some((_, terms)) => terms.push((at, name.to_string())),
                            None => by_fact.push((fact, vec![(at, name.to_string())])),
                        }
                    }
                }
                Instr::Or => depth = depth.checked_sub(2)?.checked_add(1)?,
                _ => return None,
            }
        }
        let terms = code.len().checked_add(1)? / 2;
        (depth == 1 && terms >= 2).then_some(Disjunction {
            first,
            by_fact,
            len: code.len(),
        })
    }

    fn evaluate(
        &self,
        classes: &BTreeSet<String>,
        failed: &HashMap<String, String>,
        facts: &dyn FactSource,
    ) -> Outcome {
        // The interpreter stops at the first term that fails: a class whose
        // definition failed, or one not set whose fact is unknown. At one
        // term, a failed class is reported before the set is looked at.
        let failed_at = failed
            .keys()
            .filter_map(|name| self.first.get(name).map(|at| (*at, name)))
            .min()
            .map(|(at, name)| Outcome::Failed {
                at,
                name: name.clone(),
            });
        let unknown_at = self
            .by_fact
            .iter()
            .filter(|(fact, _)| !facts.knows(fact))
            .filter_map(|(_, terms)| terms.iter().find(|(_, name)| !classes.contains(name)))
            .min()
            .and_then(|(at, name)| {
                unknown_class(facts, name).map(|reason| Outcome::Unknown { at: *at, reason })
            });
        let first_failure = match (failed_at, unknown_at) {
            (Some(f), Some(u)) if u.failing_term() < f.failing_term() => Some(u),
            (Some(f), _) => Some(f),
            (None, u) => u,
        };
        first_failure.unwrap_or_else(|| {
            // Whichever side is smaller is iterated: usually the host's
            // classes, never a fleet's hosts.
            Outcome::Holds(if classes.len() < self.first.len() {
                classes.iter().any(|c| self.first.contains_key(c))
            } else {
                self.first.keys().any(|c| classes.contains(c))
            })
        })
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::bundle::format::ClassEntry;
    use crate::eval::{EvalError, Evaluator, Val, INSTR_STEPS};
    use crate::facts::{FactMap, FactValue};

    /// Constants: class names by index, then a 1 MiB string and `true`
    /// for a class whose definition fails (over the text budget).
    const NAMES: [&str; 8] = [
        "host_web01",
        "host_db01",
        "host_cache01",
        "debian",
        "redhat",
        "big",
        "group_web",
        "flag",
    ];
    const MIB: u32 = NAMES.len() as u32;

    fn class(name: &str) -> Instr {
        Instr::Class(NAMES.iter().position(|n| *n == name).unwrap() as u32)
    }

    /// `a || b || ...` as the compiler lowers it (left to right).
    fn any_of(names: &[&str]) -> Vec<Instr> {
        let mut code = vec![class(names[0])];
        for n in &names[1..] {
            code.extend([class(n), Instr::Or]);
        }
        code
    }

    /// A bundle whose programs are the table's cases; class `big` is
    /// defined by a program over the text budget, `group_web` is the
    /// disjunction of program 0.
    fn bundle() -> Body {
        use Instr::*;
        let mut constants: Vec<Constant> =
            NAMES.iter().map(|n| Constant::Word((*n).into())).collect();
        constants.push(Constant::Str("x".repeat(1 << 20).into()));
        let mut bomb = vec![Const(MIB)];
        for _ in 0..300 {
            bomb.extend([Const(MIB), Concat(2)]);
        }
        bomb.extend([Const(MIB), Eq]);
        let programs = vec![
            // 0: a group of two hosts.
            any_of(&["host_web01", "host_db01"]),
            // 1: a group the test host is not in.
            any_of(&["host_db01", "host_cache01"]),
            // 2: the same terms nested the other way (a || (b || c)).
            vec![
                class("host_db01"),
                class("host_cache01"),
                class("host_web01"),
                Or,
                Or,
            ],
            // 3: a term twice, and hard classes of two facts.
            any_of(&["redhat", "host_db01", "redhat", "debian"]),
            // 4: a class whose definition failed, after a host.
            any_of(&["host_db01", "big", "host_web01"]),
            // 5: the failed class after an unknown-able hard class.
            any_of(&["flag", "redhat", "big"]),
            // 6: a group class and a flag, not hard classes.
            any_of(&["group_web", "flag"]),
            // 7: not a disjunction: read instruction by instruction.
            vec![class("host_web01"), class("debian"), And],
            // 8: one term: not indexed, as fast run.
            vec![class("host_web01")],
            // 9: the definition of `big`.
            bomb,
        ];
        let mut body = Body::with_programs(constants, programs);
        body.classes.0 = vec![
            ClassEntry {
                name: 5,
                program: Some(9),
            },
            ClassEntry {
                name: 6,
                program: Some(0),
            },
        ];
        crate::bundle::verify::verify_body(&body).unwrap();
        body
    }

    fn facts(without: &[&str]) -> FactMap {
        let s = |v: &str| FactValue::Str(v.to_owned());
        let all = [
            ("sys.hostname", s("web01")),
            ("sys.os", s("linux")),
            ("sys.os_family", s("debian")),
        ];
        FactMap(BTreeMap::from_iter(
            all.into_iter()
                .filter(|(n, _)| !without.contains(n))
                .map(|(n, v)| (n.to_owned(), v)),
        ))
    }

    /// What a run of `program` gives: its value or error, whether it was
    /// unknown, and the steps it took.
    type Run = (Result<Val, EvalError>, bool, u64);

    /// Runs every program with the classes of `defines`, through the index
    /// and instruction by instruction.
    fn both_ways(body: &Body, facts: &FactMap, defines: &[&str]) -> (Vec<Run>, Vec<Run>) {
        let defines: Vec<String> = defines.iter().map(|d| (*d).to_owned()).collect();
        let index = Disjunctions::of(body);
        let none = Disjunctions::default();
        let run = |index: &Disjunctions| {
            let mut eval = Evaluator::sharing(body, facts, index);
            let classes = eval.classes(&defines).unwrap();
            let mut runs = vec![(Ok(Val::List(classes.iter().cloned().collect())), false, 0)];
            let mut failures: Vec<_> = eval.class_failures().clone().into_iter().collect();
            failures.sort();
            runs.push((
                Ok(Val::List(
                    failures.into_iter().map(|(c, w)| c + &w).collect(),
                )),
                false,
                eval.steps_used(),
            ));
            for p in 0..9 {
                let before = eval.steps_used();
                let value = eval.run(p, &classes, &[]);
                runs.push((value, eval.failed_on_unknown(), eval.steps_used() - before));
            }
            runs
        };
        (run(&index), run(&none))
    }

    /// A table of hosts (facts given or not, classes defined) over a table
    /// of programs: through the index, every value, error, unknown flag
    /// and step count is the interpreter's.
    #[test]
    fn equal_to_the_interpreter() {
        let body = bundle();
        let index = Disjunctions::of(&body);
        let indexed: Vec<bool> = (0..10).map(|p| index.len_of(p).is_some()).collect();
        assert_eq!(
            indexed,
            [true, true, true, true, true, true, true, false, false, false]
        );
        let hosts: [(&[&str], &[&str]); 7] = [
            (&[], &[]),
            (&[], &["flag"]),
            (&["sys.hostname"], &[]),
            (&["sys.hostname"], &["host_db01"]),
            (&["sys.hostname", "sys.os_family"], &["flag"]),
            (&["sys.os_family"], &["big", "redhat"]),
            (
                &["sys.os_family", "sys.hostname"],
                &["host_db01", "host_cache01"],
            ),
        ];
        for (without, defines) in hosts {
            let (fast, slow) = both_ways(&body, &facts(without), defines);
            for (p, (f, s)) in fast.iter().zip(&slow).enumerate() {
                assert_eq!(f, s, "without {without:?}, defines {defines:?}, case {p}");
            }
        }
    }

    /// A group class holds by membership: on web01 the group of web01 and
    /// db01 holds, the group of db01 and cache01 does not; each costs the
    /// steps of its instructions.
    #[test]
    fn a_group_holds_by_membership() {
        let body = bundle();
        let facts = facts(&[]);
        let mut eval = Evaluator::new(&body, &facts);
        let classes = eval.classes(&[]).unwrap();
        assert!(classes.contains("group_web"), "{classes:?}");
        for (program, holds) in [(0, true), (1, false), (2, true)] {
            let before = eval.steps_used();
            assert_eq!(eval.run(program, &classes, &[]), Ok(Val::Bool(holds)));
            let len = body.programs.0[program as usize].code.0.len() as u64;
            assert_eq!(eval.steps_used() - before, len * INSTR_STEPS);
        }
        let index = Disjunctions::of(&body);
        let failed = HashMap::new();
        assert_eq!(
            index.evaluate(0, &classes, &failed, &facts),
            Some(Outcome::Holds(true))
        );
        assert_eq!(
            index.evaluate(1, &classes, &failed, &facts),
            Some(Outcome::Holds(false))
        );
        assert_eq!(index.evaluate(7, &classes, &failed, &facts), None);
    }

    /// A host whose name is not given: the first `host_` term not set is
    /// unknown, at its instruction; a class that failed before it is
    /// reported first.
    #[test]
    fn the_first_failing_term_is_reported() {
        let body = bundle();
        let index = Disjunctions::of(&body);
        let no_name = facts(&["sys.hostname"]);
        let set: BTreeSet<String> = ["host_db01".to_owned()].into();
        let failed = HashMap::from([("big".to_owned(), "too big".to_owned())]);
        assert_eq!(
            index.evaluate(1, &set, &HashMap::new(), &no_name),
            Some(Outcome::Unknown {
                at: 1,
                reason: "class `host_cache01` is unknown: it is derived from fact `sys.hostname`, which is not given".into()
            })
        );
        assert_eq!(
            index.evaluate(4, &set, &failed, &no_name),
            Some(Outcome::Failed {
                at: 1,
                name: "big".into()
            })
        );
        // A term that failed and is unknown too: the interpreter looks at
        // the failed classes first.
        let no_family = facts(&["sys.os_family"]);
        let failed = HashMap::from([("redhat".to_owned(), "failed".to_owned())]);
        assert_eq!(
            index.evaluate(5, &BTreeSet::new(), &failed, &no_family),
            Some(Outcome::Failed {
                at: 1,
                name: "redhat".into()
            })
        );
    }

    /// Where the run's budget ends inside a disjunction, the interpreter
    /// runs it and fails at the exact instruction, as without the index.
    #[test]
    fn a_spent_budget_fails_as_the_interpreter_does() {
        let body = bundle();
        let facts = facts(&[]);
        let index = Disjunctions::of(&body);
        let none = Disjunctions::default();
        let run = |index: &Disjunctions| {
            let mut eval = Evaluator::sharing(&body, &facts, index);
            let classes = eval.classes(&[]).unwrap();
            eval.steps_left = 2 * INSTR_STEPS;
            let value = eval.run(3, &classes, &[]);
            (value, eval.steps_used())
        };
        let (fast, slow) = (run(&index), run(&none));
        assert!(
            fast.0.as_ref().is_err_and(|e| e.0.contains("budget")),
            "{fast:?}"
        );
        assert_eq!(fast, slow);
    }
}
