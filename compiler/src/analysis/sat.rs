//! Exact satisfiability of class guards, with a witness.
//!
//! Promises are guarded by boolean class expressions such as `web && !debian`.
//! The compiler asks two questions about them, and both need an exact answer,
//! never a guess: can a single guard ever hold (if not, its promise is dead),
//! and can two guards hold together (the precondition of a contradiction)?
//! When the answer is yes, it shows a *witness*, one set of classes that makes
//! the guard true, so the user sees the concrete case being talked about.
//!
//! # Model
//!
//! A [`Formula`] is built over [`Atom`]s, opaque numbers that the caller maps
//! to class names or fact tests. Atoms are independent booleans except for the
//! [`Constraints`]: groups of atoms of which at most one may be true (the OS
//! families, the weekdays, `sys.os_family == "debian"` and `== "alpine"` on
//! the same fact). An assignment is the set of atoms that are true; every other
//! atom is false. All-false satisfies every group, so a group alone never makes
//! a formula unsatisfiable, and a group's atoms that the formula does not
//! mention play no part at all.
//!
//! # Algorithm
//!
//! [`solve`] works in three steps.
//!
//! 1. **Tseitin encoding.** The formula's atoms become variables `0..n` in
//!    first-appearance order ([`Formula::atoms`]). Each And/Or with two or more
//!    children gets a fresh variable that clauses make *equivalent* to it (both
//!    directions); Not is just a negated literal. Constants, empty lists,
//!    duplicate children and `x`/`!x` pairs are folded away on the way. The
//!    result is a set of clauses of size linear in the formula that is
//!    satisfiable exactly when the formula is, and whose extra variables are
//!    functions of the atoms.
//! 2. **Groups.** Each at-most-one group, restricted to the formula's atoms,
//!    becomes the clauses `!a || !b` for each pair of its atoms. Under unit
//!    propagation they do just what a group means: once one atom of the group
//!    is true the others become false, and a branch that makes two of them
//!    true is a conflict and is pruned. (Pairs are quadratic in the size of a
//!    group, but only in the part of it that one formula mentions, which is a
//!    handful of atoms.)
//! 3. **Search.** DPLL with unit propagation (two watched literals per
//!    clause) and conflict-driven clause learning: on a conflict the solver
//!    learns the first-UIP clause, which the clauses imply, and backjumps to
//!    where that clause forces a value. It branches on the lowest-numbered
//!    unassigned variable, trying `false` first, and never restarts.
//!    Learning is what keeps it from thrashing when a formula has many
//!    independent parts: a contradiction between two atoms mentioned late is
//!    found once, not again under every combination of the unrelated atoms
//!    decided before them.
//!
//! # The witness
//!
//! Because the search decides atoms in the order of [`Formula::atoms`] and
//! always tries `false` first, the witness is the **lexicographically least**
//! satisfying assignment of the formula's atoms in that order, false before
//! true: an atom is true only if no solution has it false while agreeing on
//! the atoms before it. (Every value the search sets without deciding it is
//! implied by the clauses and by decisions taken earlier, and those were all
//! `false` on earlier atoms, so any smaller solution would have forced the
//! same value.) As a consequence the witness is
//!
//! - *inclusion-minimal*: no proper subset of it is also a solution, so every
//!   class it names is needed;
//! - made only of atoms of the formula;
//! - deterministic: the same formula and groups always give the same witness.
//!
//! It is not always the smallest in number: `a || (b && c)` gives `{b, c}`,
//! not `{a}`, because `a = false` is tried first.
//!
//! # Cost and recursion
//!
//! Satisfiability is NP-complete, so no exact solver is fast on every input,
//! but guards are small and mostly conjunctions and disjunctions, which unit
//! propagation settles with few decisions or none (a conjunction of sixty
//! atoms needs none). The search is a loop over an explicit trail, so its
//! memory grows with the number of variables, not the call stack. Only walking
//! the formula's own tree (encoding it, [`eval`]) recurses, as deep as its
//! nesting of Not/And/Or and never along the length of an And or Or list;
//! the constructors flatten nested lists, so a long chain `a && b && c && ...`
//! stays one level deep.

// No `[]` indexing outside the tests: a solver bug must not take the compiler
// down with it, so every access goes through `get`.
#![deny(clippy::indexing_slicing)]

use std::cmp::Reverse;
use std::collections::{HashMap, HashSet};

/// A propositional atom: an index the caller maps to a class name or fact test.
///
/// The solver never needs to know what an atom stands for, which keeps it
/// independent of the syntax tree and lets one atom table serve every guard
/// of a compilation.
pub type Atom = u32;

/// A boolean expression over [`Atom`]s: a guard, or two guards joined to ask
/// whether they can hold together.
///
/// The variants may be built directly, in any shape: the solver accepts
/// constants inside lists, empty lists and nested lists alike. The
/// constructors [`Formula::and`], [`Formula::or`] and [`Formula::not`]
/// additionally fold constants and flatten nested lists, which keeps formulas
/// built from long chains shallow and easy to read in debug output.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Formula {
    /// A fixed value, for guards such as `any` or parts already decided.
    Const(bool),
    /// True exactly when the atom is in the assignment.
    Atom(Atom),
    /// Negation.
    Not(Box<Formula>),
    /// True when every child is; the empty `And` is true.
    And(Vec<Formula>),
    /// True when some child is; the empty `Or` is false.
    Or(Vec<Formula>),
}

impl Formula {
    /// `a && b`, with constants folded (`true && b` is `b`, `false && b` is
    /// `false`) and nested conjunctions flattened into one list, so that
    /// folding a long chain with this costs linear time and stays shallow.
    pub fn and(a: Formula, b: Formula) -> Formula {
        join(a, b, true)
    }

    /// `a || b`, with constants folded (`false || b` is `b`, `true || b` is
    /// `true`) and nested disjunctions flattened, like [`Formula::and`].
    pub fn or(a: Formula, b: Formula) -> Formula {
        join(a, b, false)
    }

    /// `!f`, with constants folded and double negation removed.
    ///
    /// Inherent so that `Formula::not(f)` works without importing
    /// [`std::ops::Not`]; that trait is implemented too and calls this.
    #[allow(clippy::should_implement_trait)]
    pub fn not(f: Formula) -> Formula {
        match f {
            Formula::Const(value) => Formula::Const(!value),
            Formula::Not(inner) => *inner,
            other => Formula::Not(Box::new(other)),
        }
    }

    /// The conjunction of all `items` (`true` for none), for guards built
    /// from lists; see [`Formula::and`].
    pub fn all(items: impl IntoIterator<Item = Formula>) -> Formula {
        items.into_iter().fold(Formula::Const(true), Formula::and)
    }

    /// The disjunction of all `items` (`false` for none); see [`Formula::or`].
    pub fn any(items: impl IntoIterator<Item = Formula>) -> Formula {
        items.into_iter().fold(Formula::Const(false), Formula::or)
    }

    /// Calls `f` on every atom occurrence (repeats included), without
    /// allocating a result: for walks over many small formulas.
    pub fn visit_atoms(&self, mut f: impl FnMut(Atom)) {
        let mut stack = vec![self];
        while let Some(formula) = stack.pop() {
            match formula {
                Formula::Const(_) => {}
                Formula::Atom(atom) => f(*atom),
                Formula::Not(inner) => stack.push(inner),
                Formula::And(children) | Formula::Or(children) => stack.extend(children.iter()),
            }
        }
    }

    /// The distinct atoms of the formula in order of first appearance
    /// (depth-first, left to right).
    ///
    /// This is the order in which [`solve`] decides atoms, so it determines
    /// which witness is found; it is also the natural order to list classes
    /// in a message.
    pub fn atoms(&self) -> Vec<Atom> {
        let mut seen = HashSet::new();
        let mut atoms = Vec::new();
        // An explicit stack: no recursion, however deep the formula.
        let mut stack = vec![self];
        while let Some(formula) = stack.pop() {
            match formula {
                Formula::Const(_) => {}
                Formula::Atom(atom) => {
                    if seen.insert(*atom) {
                        atoms.push(*atom);
                    }
                }
                Formula::Not(inner) => stack.push(inner),
                Formula::And(children) | Formula::Or(children) => {
                    stack.extend(children.iter().rev());
                }
            }
        }
        atoms
    }
}

/// `!f` as an operator; see [`Formula::not`].
impl std::ops::Not for Formula {
    type Output = Formula;

    fn not(self) -> Formula {
        Formula::not(self)
    }
}

/// Joins two formulas into a conjunction (`conjunction`) or disjunction,
/// folding constants and flattening lists of the same kind.
fn join(a: Formula, b: Formula, conjunction: bool) -> Formula {
    // `false` decides a conjunction and `true` a disjunction.
    let absorbing = !conjunction;
    if a == Formula::Const(absorbing) || b == Formula::Const(absorbing) {
        return Formula::Const(absorbing);
    }
    // Reuse `a`'s list when it has the same kind, so that folding a long
    // chain element by element stays linear.
    let mut parts = Vec::new();
    for part in [a, b] {
        match part {
            // The other constant is the neutral element: drop it.
            Formula::Const(_) => {}
            Formula::And(children) if conjunction => {
                if parts.is_empty() {
                    parts = children;
                } else {
                    parts.extend(children);
                }
            }
            Formula::Or(children) if !conjunction => {
                if parts.is_empty() {
                    parts = children;
                } else {
                    parts.extend(children);
                }
            }
            other => parts.push(other),
        }
    }
    match <[Formula; 1]>::try_from(parts) {
        Ok([only]) => only,
        Err(parts) if parts.is_empty() => Formula::Const(conjunction),
        Err(parts) if conjunction => Formula::And(parts),
        Err(parts) => Formula::Or(parts),
    }
}

/// Side constraints that hold between atoms whatever the formula says.
///
/// They exist because some classes exclude each other by nature: a host has
/// one OS family and one weekday at a time, and a fact has one value. Without
/// them, `debian && redhat` would be reported as satisfiable.
#[derive(Clone, Debug, Default)]
pub struct Constraints {
    /// Each group holds atoms of which at most one may be true. Duplicates
    /// within a group are harmless; atoms may belong to several groups.
    pub at_most_one: Vec<Vec<Atom>>,
    /// The groups each atom belongs to, when built by [`Constraints::new`]:
    /// a question then costs the size of its formula, not of every group (a
    /// fact compared with 10,000 host names makes one group of 10,000
    /// atoms, and the analyses ask one question per promise). Empty: every
    /// group is scanned.
    groups_of: HashMap<Atom, Vec<u32>>,
}

impl Constraints {
    /// Constraints with an index from atoms to their groups.
    pub fn new(at_most_one: Vec<Vec<Atom>>) -> Self {
        let mut groups_of: HashMap<Atom, Vec<u32>> = HashMap::new();
        for (g, group) in at_most_one.iter().enumerate() {
            for atom in group {
                let list = groups_of.entry(*atom).or_default();
                if list.last() != Some(&(g as u32)) {
                    list.push(g as u32);
                }
            }
        }
        Constraints {
            at_most_one,
            groups_of,
        }
    }

    /// Whether the assignment (the atoms that are true, in any order)
    /// respects every group: for callers and tests that double-check a
    /// witness.
    pub fn allows(&self, true_atoms: &[Atom]) -> bool {
        self.at_most_one.iter().all(|group| {
            let mut first_true = None;
            group
                .iter()
                .filter(|atom| true_atoms.contains(atom))
                .all(|&atom| *first_true.get_or_insert(atom) == atom)
        })
    }
}

/// The value of `formula` when exactly the atoms in `true_atoms` (in any
/// order) are true.
///
/// The reference semantics that [`solve`] is tested against, and a cheap way
/// for a caller to double-check a witness before printing it.
pub fn eval(formula: &Formula, true_atoms: &[Atom]) -> bool {
    match formula {
        Formula::Const(value) => *value,
        Formula::Atom(atom) => true_atoms.contains(atom),
        Formula::Not(inner) => !eval(inner, true_atoms),
        Formula::And(children) => children.iter().all(|child| eval(child, true_atoms)),
        Formula::Or(children) => children.iter().any(|child| eval(child, true_atoms)),
    }
}

/// A satisfying assignment: the atoms that are true (sorted, deduplicated);
/// every other atom is false. `None` exactly when no assignment satisfies
/// both the formula and the constraints.
///
/// The witness is the lexicographically least solution over
/// [`Formula::atoms`] (false before true), hence inclusion-minimal and
/// deterministic; see the module documentation for why.
///
/// The search stops after [`MAX_CONFLICTS`] conflicts with
/// [`TooComplex`]: guards such as a pigeonhole (ten classes that must each
/// hold, nine exclusive groups they share) are exponentially hard for any
/// resolution-based solver, and ran past 60 s before this bound. The caller
/// reports that the question could not be answered; it never guesses.
pub fn solve(
    formula: &Formula,
    constraints: &Constraints,
) -> Result<Option<Vec<Atom>>, TooComplex> {
    solve_within(formula, constraints, MAX_CONFLICTS)
}

/// The most conflicts one question may cost. Guards people write need a
/// handful; the budget leaves room for generated ones many times larger
/// and bounds the worst case to about a second.
pub const MAX_CONFLICTS: u64 = 5_000;

/// The solver gave up: the question took more than its conflict budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooComplex {
    /// The budget that was spent.
    pub conflicts: u64,
}

/// [`solve`] with an explicit conflict budget.
pub fn solve_within(
    formula: &Formula,
    constraints: &Constraints,
    max_conflicts: u64,
) -> Result<Option<Vec<Atom>>, TooComplex> {
    let atoms = formula.atoms();
    let mut encoder = Encoder::new(&atoms);
    let root = match encoder.encode(formula) {
        Encoded::Const(false) => return Ok(None),
        // All atoms false: satisfies every group.
        Encoded::Const(true) => return Ok(Some(Vec::new())),
        Encoded::Lit(root) => root,
    };
    encoder.add_groups(constraints);

    let mut solver = Solver::new(encoder.num_vars, max_conflicts);
    let mut units = vec![root];
    for clause in encoder.clauses {
        match clause.len() {
            0 => return Ok(None),
            1 => units.extend(clause),
            _ => {
                solver.add_clause(clause);
            }
        }
    }
    if !solver.run(&units)? {
        return Ok(None);
    }
    let mut witness: Vec<Atom> = encoder
        .atom_vars
        .iter()
        .filter(|&(_, &var)| solver.is_true(var))
        .map(|(&atom, _)| atom)
        .collect();
    witness.sort_unstable();
    Ok(Some(witness))
}

/// Whether any assignment satisfies both the formula and the constraints;
/// [`solve`] without the witness.
pub fn satisfiable(formula: &Formula, constraints: &Constraints) -> Result<bool, TooComplex> {
    solve(formula, constraints).map(|found| found.is_some())
}

/// A variable or its negation, packed as `2 * var + negated` so that a
/// literal can index the watch lists directly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Lit(usize);

impl Lit {
    fn positive(var: usize) -> Lit {
        Lit(var << 1)
    }

    fn negative(var: usize) -> Lit {
        Lit((var << 1) | 1)
    }

    fn var(self) -> usize {
        self.0 >> 1
    }

    fn is_positive(self) -> bool {
        self.0 & 1 == 0
    }

    fn negated(self) -> Lit {
        Lit(self.0 ^ 1)
    }

    fn code(self) -> usize {
        self.0
    }
}

/// What a subformula became: a constant, or a literal equivalent to it.
#[derive(Clone, Copy, Debug)]
enum Encoded {
    Const(bool),
    Lit(Lit),
}

/// Turns a formula into clauses (Tseitin), and groups into at-most-one
/// clauses.
#[derive(Debug)]
struct Encoder {
    /// The variable of each atom of the formula, numbered in
    /// first-appearance order so that the search decides them in that order.
    atom_vars: HashMap<Atom, usize>,
    num_vars: usize,
    clauses: Vec<Vec<Lit>>,
}

impl Encoder {
    fn new(atoms: &[Atom]) -> Encoder {
        let atom_vars: HashMap<Atom, usize> = atoms
            .iter()
            .enumerate()
            .map(|(var, &atom)| (atom, var))
            .collect();
        Encoder {
            num_vars: atom_vars.len(),
            atom_vars,
            clauses: Vec::new(),
        }
    }

    fn fresh_var(&mut self) -> usize {
        let var = self.num_vars;
        self.num_vars += 1;
        var
    }

    fn encode(&mut self, formula: &Formula) -> Encoded {
        match formula {
            Formula::Const(value) => Encoded::Const(*value),
            Formula::Atom(atom) => {
                let var = match self.atom_vars.get(atom) {
                    Some(&var) => var,
                    // Not reached: `Encoder::new` registers every atom.
                    None => {
                        let var = self.fresh_var();
                        self.atom_vars.insert(*atom, var);
                        var
                    }
                };
                Encoded::Lit(Lit::positive(var))
            }
            Formula::Not(inner) => match self.encode(inner) {
                Encoded::Const(value) => Encoded::Const(!value),
                Encoded::Lit(lit) => Encoded::Lit(lit.negated()),
            },
            Formula::And(children) => self.encode_gate(children, true),
            Formula::Or(children) => self.encode_gate(children, false),
        }
    }

    /// Encodes an And (`conjunction`) or Or of `children`.
    fn encode_gate(&mut self, children: &[Formula], conjunction: bool) -> Encoded {
        let mut inputs = Vec::with_capacity(children.len());
        for child in children {
            match self.encode(child) {
                // The neutral element: `true` in an And, `false` in an Or.
                Encoded::Const(value) if value == conjunction => {}
                // The absorbing one decides the gate.
                Encoded::Const(value) => return Encoded::Const(value),
                Encoded::Lit(lit) => inputs.push(lit),
            }
        }
        inputs.sort_unstable();
        inputs.dedup();
        // `x` and `!x` sort next to each other: `x && !x` is false and
        // `x || !x` true.
        if inputs
            .windows(2)
            .any(|pair| matches!(pair, [x, y] if x.var() == y.var()))
        {
            return Encoded::Const(!conjunction);
        }
        match inputs.as_slice() {
            [] => return Encoded::Const(conjunction),
            [only] => return Encoded::Lit(*only),
            _ => {}
        }
        let gate = Lit::positive(self.fresh_var());
        // `g <-> (l1 && ... && ln)` is the clauses `!g || li` for each i and
        // `g || !l1 || ... || !ln`. An Or is the same by De Morgan:
        // `!g <-> (!l1 && ... && !ln)`.
        let (output, flip) = if conjunction {
            (gate, false)
        } else {
            (gate.negated(), true)
        };
        let input = |lit: Lit| if flip { lit.negated() } else { lit };
        // The output goes first in the long clause: when the gate is true (an
        // And the formula requires) that clause is satisfied by its first
        // watched literal and never looked at again.
        let mut long = Vec::with_capacity(inputs.len() + 1);
        long.push(output);
        for &lit in &inputs {
            self.clauses.push(vec![output.negated(), input(lit)]);
            long.push(input(lit).negated());
        }
        self.clauses.push(long);
        Encoded::Lit(gate)
    }

    /// Adds the at-most-one constraint of each group over the atoms the
    /// formula mentions. The group's other atoms stay false, which respects
    /// the group whatever the rest is. Small groups get `!a || !b` for each
    /// pair; large ones (a fact compared with thousands of values) the
    /// sequential encoding of Sinz (2005), with one auxiliary variable per
    /// member instead of a quadratic number of clauses. Auxiliary variables
    /// are never atoms, so they never appear in a witness.
    fn add_groups(&mut self, constraints: &Constraints) {
        let mut selected: Vec<Vec<usize>> = Vec::new();
        if constraints.groups_of.is_empty() {
            for group in &constraints.at_most_one {
                selected.push(
                    group
                        .iter()
                        .filter_map(|atom| self.atom_vars.get(atom).copied())
                        .collect(),
                );
            }
        } else {
            // Only the groups of the formula's atoms, each with only those
            // atoms: the others stay false.
            let mut by_group: HashMap<u32, Vec<usize>> = HashMap::new();
            for (atom, var) in &self.atom_vars {
                for g in constraints.groups_of.get(atom).into_iter().flatten() {
                    by_group.entry(*g).or_default().push(*var);
                }
            }
            let mut groups: Vec<(u32, Vec<usize>)> = by_group.into_iter().collect();
            groups.sort_unstable_by_key(|(g, _)| *g);
            selected.extend(groups.into_iter().map(|(_, members)| members));
        }
        for mut members in selected {
            members.sort_unstable();
            members.dedup();
            if members.len() <= PAIRWISE_GROUP_LIMIT {
                for (position, &a) in members.iter().enumerate() {
                    for &b in members.iter().skip(position + 1) {
                        self.clauses.push(vec![Lit::negative(a), Lit::negative(b)]);
                    }
                }
                continue;
            }
            // s_i is true when one of x_1..x_i is true.
            let mut previous: Option<usize> = None;
            let last = members.len() - 1;
            for (i, &x) in members.iter().enumerate() {
                if let Some(s_prev) = previous {
                    // x_i cannot be true when an earlier member is.
                    self.clauses
                        .push(vec![Lit::negative(x), Lit::negative(s_prev)]);
                }
                if i == last {
                    break;
                }
                let s = self.fresh_var();
                self.clauses.push(vec![Lit::negative(x), Lit::positive(s)]);
                if let Some(s_prev) = previous {
                    self.clauses
                        .push(vec![Lit::negative(s_prev), Lit::positive(s)]);
                }
                previous = Some(s);
            }
        }
    }
}

/// Groups up to this size are encoded pairwise (at most 28 clauses, no
/// auxiliary variables); larger ones sequentially.
const PAIRWISE_GROUP_LIMIT: usize = 8;

/// The search state of one variable.
#[derive(Clone, Copy, Debug, Default)]
struct VarState {
    value: Option<bool>,
    /// The decision level at which `value` was set.
    level: usize,
    /// The clause that forced `value`, or `None` for a decision (and for the
    /// units assigned before the search).
    reason: Option<usize>,
}

/// What visiting a clause whose watched literal became false found.
#[derive(Clone, Copy, Debug)]
enum Visit {
    /// Another literal now watches the clause.
    Moved,
    /// The clause stays watched by the falsified literal; nothing to do.
    Keep,
    /// Every literal but this one is false: it must be true.
    Unit(Lit),
    /// Every literal is false.
    Conflict,
}

/// A CDCL solver over clauses of at least two literals: two watched literals,
/// first-UIP learning, decisions on the lowest unassigned variable with
/// `false` first, no restarts.
#[derive(Debug)]
struct Solver {
    clauses: Vec<Vec<Lit>>,
    /// For each literal code, the clauses watching that literal. Each clause
    /// of two or more literals is watched by its first two, and the search
    /// keeps them non-false while it can.
    watches: Vec<Vec<usize>>,
    vars: Vec<VarState>,
    /// The assigned literals in assignment order.
    trail: Vec<Lit>,
    /// Where each decision level starts in the trail; its length is the
    /// current decision level.
    level_starts: Vec<usize>,
    /// The first trail entry whose consequences are not yet propagated.
    queue_head: usize,
    /// Every variable below this one is assigned: where to look for the next
    /// decision.
    cursor: usize,
    /// For each clause, where in its unwatched literals the last search
    /// for a new watch stopped.
    search_from: Vec<usize>,
    /// Conflicts the search may still meet before it gives up.
    conflicts_left: u64,
    max_conflicts: u64,
}

/// The value of `lit` under the current assignment.
fn lit_value(vars: &[VarState], lit: Lit) -> Option<bool> {
    vars.get(lit.var())
        .and_then(|state| state.value)
        .map(|value| value == lit.is_positive())
}

impl Solver {
    fn new(num_vars: usize, max_conflicts: u64) -> Solver {
        Solver {
            search_from: Vec::new(),
            conflicts_left: max_conflicts,
            max_conflicts,
            clauses: Vec::new(),
            watches: vec![Vec::new(); num_vars.saturating_mul(2)],
            vars: vec![VarState::default(); num_vars],
            trail: Vec::new(),
            level_starts: Vec::new(),
            queue_head: 0,
            cursor: 0,
        }
    }

    /// Stores a clause and watches its first two literals (a unit learned
    /// clause needs no watch: it is assigned at level 0 for good).
    fn add_clause(&mut self, clause: Vec<Lit>) -> usize {
        let index = self.clauses.len();
        if let [first, second, ..] = clause.as_slice() {
            for lit in [*first, *second] {
                if let Some(list) = self.watches.get_mut(lit.code()) {
                    list.push(index);
                }
            }
        }
        self.clauses.push(clause);
        self.search_from.push(0);
        index
    }

    fn value(&self, lit: Lit) -> Option<bool> {
        lit_value(&self.vars, lit)
    }

    fn is_true(&self, var: usize) -> bool {
        self.value(Lit::positive(var)) == Some(true)
    }

    fn level_of(&self, lit: Lit) -> usize {
        self.vars.get(lit.var()).map_or(0, |state| state.level)
    }

    fn assign(&mut self, lit: Lit, reason: Option<usize>) {
        let level = self.level_starts.len();
        if let Some(state) = self.vars.get_mut(lit.var()) {
            *state = VarState {
                value: Some(lit.is_positive()),
                level,
                reason,
            };
        }
        self.trail.push(lit);
    }

    /// Searches for an assignment satisfying the clauses and `units`,
    /// within the conflict budget.
    fn run(&mut self, units: &[Lit]) -> Result<bool, TooComplex> {
        for &unit in units {
            match self.value(unit) {
                Some(true) => {}
                Some(false) => return Ok(false),
                None => self.assign(unit, None),
            }
        }
        loop {
            if let Some(conflict) = self.propagate() {
                if self.level_starts.is_empty() {
                    // A conflict that no decision caused.
                    return Ok(false);
                }
                if self.conflicts_left == 0 {
                    return Err(TooComplex {
                        conflicts: self.max_conflicts,
                    });
                }
                self.conflicts_left -= 1;
                let (learned, level) = self
                    .analyze(conflict)
                    .unwrap_or_else(|| self.decision_clause());
                self.backjump(level);
                let asserting = learned.first().copied();
                let reason = self.add_clause(learned);
                if let Some(lit) = asserting {
                    self.assign(lit, Some(reason));
                }
            } else if let Some(var) = self.next_unassigned() {
                self.level_starts.push(self.trail.len());
                self.assign(Lit::negative(var), None);
            } else {
                return Ok(true);
            }
        }
    }

    /// Unit propagation: assigns every literal the clauses force, returning
    /// a clause whose literals are all false if there is one.
    fn propagate(&mut self) -> Option<usize> {
        while let Some(&lit) = self.trail.get(self.queue_head) {
            self.queue_head += 1;
            let falsified = lit.negated();
            let Some(list) = self.watches.get_mut(falsified.code()) else {
                continue;
            };
            let watching = std::mem::take(list);
            let mut keep = Vec::with_capacity(watching.len());
            let mut conflict = None;
            let mut pending = watching.into_iter();
            for clause in pending.by_ref() {
                match self.visit(clause, falsified) {
                    Visit::Moved => {}
                    Visit::Keep => keep.push(clause),
                    Visit::Unit(unit) => {
                        keep.push(clause);
                        self.assign(unit, Some(clause));
                    }
                    Visit::Conflict => {
                        keep.push(clause);
                        conflict = Some(clause);
                        break;
                    }
                }
            }
            keep.extend(pending);
            if let Some(list) = self.watches.get_mut(falsified.code()) {
                // Nothing moves a watch onto a false literal, so `list` is
                // still empty; append rather than overwrite all the same.
                keep.append(list);
                *list = keep;
            }
            if conflict.is_some() {
                return conflict;
            }
        }
        None
    }

    /// Visits clause `index`, one of whose two watched literals, `falsified`,
    /// just became false: finds it another watch, or reports it unit or
    /// conflicting.
    fn visit(&mut self, index: usize, falsified: Lit) -> Visit {
        let vars = &self.vars;
        let Some(clause) = self.clauses.get_mut(index) else {
            return Visit::Moved;
        };
        let [first, second, rest @ ..] = clause.as_mut_slice() else {
            return Visit::Keep;
        };
        // Keep the falsified watch second and the other one first.
        if *first == falsified {
            std::mem::swap(first, second);
        }
        let other = *first;
        if lit_value(vars, other) == Some(true) {
            return Visit::Keep;
        }
        // Search on from where the last search of this clause stopped,
        // wrapping around: the literals before it were false then, and
        // restarting at the front every time made a guard of 100,000
        // classes cost their square (issue 14, item 11). Circular search
        // keeps the total linear (Gent, "Optimal implementation of watched
        // literals and more general techniques", JAIR 2013).
        let len = rest.len();
        let start = self.search_from.get(index).copied().unwrap_or(0).min(len);
        let found = (start..len).chain(0..start).find(|&k| {
            rest.get(k)
                .is_some_and(|lit| lit_value(vars, *lit) != Some(false))
        });
        if let Some(replacement) = found.and_then(|k| {
            if let Some(slot) = self.search_from.get_mut(index) {
                *slot = k;
            }
            rest.get_mut(k)
        }) {
            std::mem::swap(second, replacement);
            let watch = *second;
            if let Some(list) = self.watches.get_mut(watch.code()) {
                list.push(index);
            }
            return Visit::Moved;
        }
        match lit_value(vars, other) {
            Some(false) => Visit::Conflict,
            _ => Visit::Unit(other),
        }
    }

    /// First-UIP conflict analysis: resolves the conflicting clause with the
    /// reasons of the current level's literals, latest first, until one
    /// literal of the current level is left. Returns the learned clause,
    /// asserting literal first and the literal of the next-highest level
    /// second (so that the two watches are right), and the level to
    /// backjump to. `None` only if the search state were inconsistent.
    fn analyze(&self, conflict: usize) -> Option<(Vec<Lit>, usize)> {
        let current = self.level_starts.len();
        let mut seen = vec![false; self.vars.len()];
        // Literals of earlier levels that go into the learned clause.
        let mut lower = Vec::new();
        // Literals of the current level seen and not yet resolved.
        let mut open = 0usize;
        let mut clause = self.clauses.get(conflict)?;
        let mut index = self.trail.len();
        loop {
            for &lit in clause {
                let level = self.vars.get(lit.var())?.level;
                let mark = seen.get_mut(lit.var())?;
                // Level 0 holds for good: such literals are left out.
                if *mark || level == 0 {
                    continue;
                }
                *mark = true;
                if level == current {
                    open += 1;
                } else {
                    lower.push(lit);
                }
            }
            // The latest assigned literal still to resolve.
            let resolved = loop {
                index = index.checked_sub(1)?;
                let lit = *self.trail.get(index)?;
                if seen.get(lit.var()).copied().unwrap_or(false) {
                    break lit;
                }
            };
            open = open.checked_sub(1)?;
            if open == 0 {
                lower.sort_by_key(|lit| Reverse(self.level_of(*lit)));
                let level = lower.first().map_or(0, |lit| self.level_of(*lit));
                let mut learned = Vec::with_capacity(lower.len() + 1);
                learned.push(resolved.negated());
                learned.extend(lower);
                return Some((learned, level));
            }
            let reason = self.vars.get(resolved.var())?.reason?;
            clause = self.clauses.get(reason)?;
        }
    }

    /// The clause "not all of the current decisions", which any conflict
    /// implies: plain chronological backtracking, the fallback should
    /// [`Solver::analyze`] ever fail.
    fn decision_clause(&self) -> (Vec<Lit>, usize) {
        let learned = self
            .level_starts
            .iter()
            .rev()
            .filter_map(|&start| self.trail.get(start))
            .map(|decision| decision.negated())
            .collect();
        (learned, self.level_starts.len().saturating_sub(1))
    }

    /// Undoes every assignment above `level`.
    fn backjump(&mut self, level: usize) {
        let Some(&start) = self.level_starts.get(level) else {
            return;
        };
        while self.trail.len() > start {
            let Some(lit) = self.trail.pop() else {
                break;
            };
            if let Some(state) = self.vars.get_mut(lit.var()) {
                state.value = None;
            }
            self.cursor = self.cursor.min(lit.var());
        }
        self.level_starts.truncate(level);
        self.queue_head = self.trail.len();
    }

    /// The lowest-numbered unassigned variable: atoms in first-appearance
    /// order, then gate variables (which propagation has always set by then).
    fn next_unassigned(&mut self) -> Option<usize> {
        while let Some(state) = self.vars.get(self.cursor) {
            if state.value.is_none() {
                return Some(self.cursor);
            }
            self.cursor += 1;
        }
        None
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const DEBIAN: Atom = 0;
    const REDHAT: Atom = 1;
    const ALPINE: Atom = 2;
    const WEB: Atom = 3;
    const DB: Atom = 4;

    fn atom(a: Atom) -> Formula {
        Formula::Atom(a)
    }

    fn no_constraints() -> Constraints {
        Constraints::default()
    }

    fn os_families() -> Constraints {
        Constraints::new(vec![vec![DEBIAN, REDHAT, ALPINE]])
    }

    /// `solve`, with the witness checked against the formula and the groups.
    fn witness(formula: &Formula, constraints: &Constraints) -> Option<Vec<Atom>> {
        let found = solve(formula, constraints).unwrap();
        if let Some(atoms) = &found {
            assert!(
                eval(formula, atoms),
                "witness {atoms:?} falsifies {formula:?}"
            );
            assert!(
                constraints.allows(atoms),
                "witness {atoms:?} breaks a group"
            );
            assert!(
                atoms.windows(2).all(|w| w[0] < w[1]),
                "not sorted: {atoms:?}"
            );
            assert!(satisfiable(formula, constraints).unwrap());
        } else {
            assert!(!satisfiable(formula, constraints).unwrap());
        }
        found
    }

    #[test]
    fn constants() {
        assert_eq!(
            witness(&Formula::Const(true), &no_constraints()),
            Some(vec![])
        );
        assert_eq!(witness(&Formula::Const(false), &no_constraints()), None);
        assert_eq!(witness(&Formula::Const(true), &os_families()), Some(vec![]));
    }

    #[test]
    fn single_atom() {
        assert_eq!(witness(&atom(7), &no_constraints()), Some(vec![7]));
        assert_eq!(
            witness(&Formula::not(atom(7)), &no_constraints()),
            Some(vec![])
        );
        assert_eq!(witness(&atom(DEBIAN), &os_families()), Some(vec![DEBIAN]));
    }

    #[test]
    fn atom_and_its_negation_is_unsatisfiable() {
        let a = atom(5);
        let through_constructors = Formula::and(a.clone(), Formula::not(a.clone()));
        assert_eq!(witness(&through_constructors, &no_constraints()), None);
        let raw = Formula::And(vec![a.clone(), Formula::Not(Box::new(a))]);
        assert_eq!(witness(&raw, &no_constraints()), None);
    }

    #[test]
    fn exclusive_group_members_cannot_both_hold() {
        let both = Formula::and(atom(DEBIAN), atom(REDHAT));
        assert_eq!(witness(&both, &os_families()), None);
        // Without the group they are independent classes.
        assert_eq!(
            witness(&both, &no_constraints()),
            Some(vec![DEBIAN, REDHAT])
        );
    }

    #[test]
    fn group_member_with_another_negated() {
        let f = Formula::and(atom(DEBIAN), Formula::not(atom(REDHAT)));
        assert_eq!(witness(&f, &os_families()), Some(vec![DEBIAN]));
    }

    #[test]
    fn groups_over_other_atoms_do_not_matter() {
        let f = Formula::and(atom(WEB), Formula::not(atom(DB)));
        assert_eq!(witness(&f, &os_families()), Some(vec![WEB]));
        // A group sharing one atom with the formula only pins the others false.
        let c = Constraints::new(vec![
            vec![WEB, DEBIAN, REDHAT],
            vec![WEB, WEB],
            vec![],
            vec![DB],
        ]);
        assert_eq!(witness(&f, &c), Some(vec![WEB]));
    }

    #[test]
    fn disjunction_witness_is_a_single_atom() {
        let f = Formula::or(atom(WEB), atom(DB));
        let found = witness(&f, &no_constraints()).unwrap();
        assert_eq!(found.len(), 1);
        assert!(found == vec![WEB] || found == vec![DB]);
        // `false` first: `web` is tried false, so `db` carries it.
        assert_eq!(found, vec![DB]);
    }

    #[test]
    fn nested_formulas() {
        // web && (debian || redhat) && !(debian && web)
        let f = Formula::all([
            atom(WEB),
            Formula::or(atom(DEBIAN), atom(REDHAT)),
            Formula::not(Formula::and(atom(DEBIAN), atom(WEB))),
        ]);
        assert_eq!(witness(&f, &os_families()), Some(vec![REDHAT, WEB]));

        // (debian || redhat || alpine) && !debian && !redhat
        let g = Formula::all([
            Formula::any([atom(DEBIAN), atom(REDHAT), atom(ALPINE)]),
            Formula::not(atom(DEBIAN)),
            Formula::not(atom(REDHAT)),
        ]);
        assert_eq!(witness(&g, &os_families()), Some(vec![ALPINE]));

        // (debian && web) || (redhat && db), and not web: needs redhat && db.
        let h = Formula::all([
            Formula::or(
                Formula::and(atom(DEBIAN), atom(WEB)),
                Formula::and(atom(REDHAT), atom(DB)),
            ),
            Formula::not(atom(WEB)),
        ]);
        assert_eq!(witness(&h, &os_families()), Some(vec![REDHAT, DB]));

        // Two guards that exclude each other only through the group.
        let g1 = Formula::and(atom(WEB), Formula::or(atom(DEBIAN), atom(REDHAT)));
        let g2 = Formula::and(atom(ALPINE), Formula::not(atom(DB)));
        let both = Formula::and(g1, g2);
        assert_eq!(witness(&both, &os_families()), None);
        assert!(witness(&both, &no_constraints()).is_some());
        // Double negation and a tautology inside.
        let t = Formula::Not(Box::new(Formula::Not(Box::new(Formula::Or(vec![
            atom(WEB),
            Formula::Not(Box::new(atom(WEB))),
        ])))));
        assert_eq!(witness(&t, &no_constraints()), Some(vec![]));
    }

    #[test]
    fn empty_lists() {
        assert_eq!(
            witness(&Formula::And(vec![]), &no_constraints()),
            Some(vec![])
        );
        assert_eq!(witness(&Formula::Or(vec![]), &no_constraints()), None);
        let not_empty_and = Formula::Not(Box::new(Formula::And(vec![])));
        assert_eq!(witness(&not_empty_and, &no_constraints()), None);
        let with_empty_or = Formula::And(vec![atom(WEB), Formula::Or(vec![])]);
        assert_eq!(witness(&with_empty_or, &no_constraints()), None);
        let with_empty_and = Formula::Or(vec![Formula::And(vec![]), atom(WEB)]);
        assert_eq!(witness(&with_empty_and, &no_constraints()), Some(vec![]));
        assert!(eval(&Formula::And(vec![]), &[]));
        assert!(!eval(&Formula::Or(vec![]), &[]));
    }

    #[test]
    fn witness_is_lexicographically_least_not_always_smallest() {
        // a || (b && c): `a = false` is tried first.
        let f = Formula::or(atom(0), Formula::and(atom(1), atom(2)));
        assert_eq!(witness(&f, &no_constraints()), Some(vec![1, 2]));
        // The order is first appearance, not atom number.
        let g = Formula::or(Formula::and(atom(1), atom(2)), atom(0));
        assert_eq!(witness(&g, &no_constraints()), Some(vec![0]));
    }

    #[test]
    fn sixty_atom_conjunction_is_fast() {
        let f = Formula::all((0..60).map(atom));
        assert_eq!(witness(&f, &no_constraints()), Some((0..60).collect()));
        let pair = Constraints::new(vec![vec![17, 42]]);
        assert_eq!(witness(&f, &pair), None);
    }

    #[test]
    fn sixty_atom_disjunction_under_one_group() {
        let f = Formula::any((0..60).map(atom));
        let group = Constraints::new(vec![(0..60).collect()]);
        assert_eq!(witness(&f, &group), Some(vec![59]));
        let two = Formula::and(f, Formula::and(atom(3), atom(30)));
        assert_eq!(witness(&two, &group), None);
    }

    #[test]
    fn a_group_of_thousands_of_atoms() {
        // One fact compared with many values: the sequential encoding keeps
        // this linear (pairwise clauses would number in the tens of millions).
        let n = 20_000;
        let f = Formula::any((0..n).map(atom));
        let group = Constraints::new(vec![(0..n).collect()]);
        assert_eq!(witness(&f, &group), Some(vec![n - 1]));
        let two = Formula::and(f, Formula::and(atom(3), atom(n - 3)));
        assert_eq!(witness(&two, &group), None);
    }

    #[test]
    fn independent_parts_do_not_make_the_search_thrash() {
        // Thirty independent choices, then `x xor y` and `x == y` together:
        // unsatisfiable, but only after deciding `x`. Plain backtracking
        // would retry it under some 3^30 combinations of the choices.
        let choices = (0..30).map(|i| Formula::or(atom(2 * i), atom(2 * i + 1)));
        let (x, y) = (atom(100), atom(101));
        let xor = Formula::or(
            Formula::and(x.clone(), Formula::not(y.clone())),
            Formula::and(Formula::not(x.clone()), y.clone()),
        );
        let same = Formula::or(
            Formula::and(x.clone(), y.clone()),
            Formula::and(Formula::not(x), Formula::not(y)),
        );
        let f = Formula::all(choices.clone().chain([xor.clone(), same]));
        assert_eq!(witness(&f, &no_constraints()), None);
        // Satisfiable variant: each choice takes its second atom.
        let g = Formula::all(choices.chain([xor]));
        let expected: Vec<Atom> = (0..30).map(|i| 2 * i + 1).chain([101]).collect();
        assert_eq!(witness(&g, &no_constraints()), Some(expected));
    }

    #[test]
    fn long_lists_do_not_recurse() {
        let n = 20_000;
        let all = Formula::all((0..n).map(atom));
        assert!(matches!(&all, Formula::And(children) if children.len() == n as usize));
        assert_eq!(witness(&all, &no_constraints()), Some((0..n).collect()));
        let any = Formula::any((0..2_000).map(atom));
        assert_eq!(witness(&any, &no_constraints()), Some(vec![1_999]));
    }

    #[test]
    fn large_atom_numbers() {
        let f = Formula::and(atom(u32::MAX), Formula::not(atom(1_000_000)));
        assert_eq!(witness(&f, &no_constraints()), Some(vec![u32::MAX]));
        let c = Constraints::new(vec![vec![u32::MAX, 1_000_000]]);
        let g = Formula::and(atom(u32::MAX), atom(1_000_000));
        assert_eq!(witness(&g, &c), None);
    }

    #[test]
    fn atoms_in_first_appearance_order() {
        // (b && (a || !c)) || a
        let f = Formula::or(
            Formula::and(atom(2), Formula::or(atom(1), Formula::not(atom(3)))),
            atom(1),
        );
        assert_eq!(f.atoms(), vec![2, 1, 3]);
        assert_eq!(Formula::Const(true).atoms(), Vec::<Atom>::new());
    }

    #[test]
    fn constructors_fold_and_flatten() {
        let (a, b, c, d) = (atom(0), atom(1), atom(2), atom(3));
        assert_eq!(Formula::and(Formula::Const(true), a.clone()), a);
        assert_eq!(
            Formula::and(a.clone(), Formula::Const(false)),
            Formula::Const(false)
        );
        assert_eq!(Formula::or(a.clone(), Formula::Const(false)), a);
        assert_eq!(
            Formula::or(Formula::Const(true), a.clone()),
            Formula::Const(true)
        );
        assert_eq!(
            Formula::and(Formula::and(a.clone(), b.clone()), c.clone()),
            Formula::And(vec![a.clone(), b.clone(), c.clone()])
        );
        assert_eq!(
            Formula::or(
                Formula::or(a.clone(), b.clone()),
                Formula::or(c.clone(), d.clone())
            ),
            Formula::Or(vec![a.clone(), b.clone(), c.clone(), d.clone()])
        );
        // Only lists of the same kind merge.
        assert_eq!(
            Formula::and(Formula::or(a.clone(), b.clone()), c.clone()),
            Formula::And(vec![Formula::Or(vec![a.clone(), b.clone()]), c.clone()])
        );
        assert_eq!(Formula::and(Formula::And(vec![]), a.clone()), a);
        assert_eq!(Formula::not(Formula::not(a.clone())), a);
        assert_eq!(Formula::not(Formula::Const(true)), Formula::Const(false));
        assert_eq!(!!a.clone(), a);
        assert_eq!(!a.clone(), Formula::Not(Box::new(a.clone())));
        assert_eq!(Formula::all([]), Formula::Const(true));
        assert_eq!(Formula::any([]), Formula::Const(false));
        assert_eq!(Formula::all([a.clone()]), a);
    }

    #[test]
    fn eval_and_allows() {
        let f = Formula::and(atom(WEB), Formula::not(atom(DEBIAN)));
        assert!(eval(&f, &[WEB]));
        assert!(eval(&f, &[REDHAT, WEB]));
        assert!(!eval(&f, &[WEB, DEBIAN]));
        assert!(!eval(&f, &[]));
        assert!(os_families().allows(&[WEB, DEBIAN]));
        assert!(!os_families().allows(&[ALPINE, WEB, DEBIAN]));
        assert!(os_families().allows(&[]));
    }

    // ---- property test against brute force ----

    /// Random formulas over atoms `0..num_atoms`, built from the raw variants
    /// so that constants, empty and nested lists reach the solver.
    fn formula(num_atoms: u32) -> impl Strategy<Value = Formula> {
        let leaf = prop_oneof![
            1 => any::<bool>().prop_map(Formula::Const),
            6 => (0..num_atoms).prop_map(Formula::Atom),
        ];
        leaf.prop_recursive(5, 64, 4, |inner| {
            prop_oneof![
                inner.clone().prop_map(|f| Formula::Not(Box::new(f))),
                prop::collection::vec(inner.clone(), 0..5).prop_map(Formula::And),
                prop::collection::vec(inner, 0..5).prop_map(Formula::Or),
            ]
        })
    }

    /// Up to 12 atoms, a formula over them, and 0-3 groups of 2-12 of them
    /// (groups above `PAIRWISE_GROUP_LIMIT` exercise the sequential
    /// encoding).
    fn problem() -> impl Strategy<Value = (u32, Formula, Vec<Vec<Atom>>)> {
        (1u32..=12).prop_flat_map(|n| {
            (
                Just(n),
                formula(n),
                prop::collection::vec(prop::collection::vec(0..n, 2..=12), 0..=3),
            )
        })
    }

    /// Random 3-CNF over 6-10 atoms with 4-5 clauses per atom, the region
    /// where random instances are hardest: about half are unsatisfiable and
    /// many need conflicts and backjumps, which the nested formulas above
    /// (mostly settled by unit propagation) rarely reach.
    fn hard_problem() -> impl Strategy<Value = (u32, Formula, Vec<Vec<Atom>>)> {
        (6u32..=10).prop_flat_map(|n| {
            let literal = (0..n, any::<bool>()).prop_map(|(a, positive)| {
                if positive {
                    Formula::Atom(a)
                } else {
                    Formula::Not(Box::new(Formula::Atom(a)))
                }
            });
            let clause = prop::collection::vec(literal, 3).prop_map(Formula::Or);
            let clauses = 4 * n as usize..=5 * n as usize;
            (
                Just(n),
                prop::collection::vec(clause, clauses).prop_map(Formula::And),
                prop::collection::vec(prop::collection::vec(0..n, 2..=10), 0..=3),
            )
        })
    }

    /// At most one true atom per group, counted independently of `allows`.
    fn groups_hold(groups: &[Vec<Atom>], true_atoms: &[Atom]) -> bool {
        groups.iter().all(|group| {
            let mut hit: Vec<Atom> = group
                .iter()
                .copied()
                .filter(|a| true_atoms.contains(a))
                .collect();
            hit.sort_unstable();
            hit.dedup();
            hit.len() <= 1
        })
    }

    /// The atoms of `atoms` whose bit is set, most significant bit first.
    fn subset(atoms: &[Atom], mask: u32) -> Vec<Atom> {
        let k = atoms.len();
        let mut chosen: Vec<Atom> = atoms
            .iter()
            .enumerate()
            .filter(|&(i, _)| mask & (1 << (k - 1 - i)) != 0)
            .map(|(_, &a)| a)
            .collect();
        chosen.sort_unstable();
        chosen
    }

    /// Checks `solve` against brute force: satisfiable exactly when some
    /// assignment of atoms `0..n` respecting the groups satisfies `f`, and
    /// the witness is a genuine solution and the documented one, the
    /// lexicographically least over `f.atoms()`.
    fn check_against_brute_force(
        n: u32,
        f: &Formula,
        groups: &[Vec<Atom>],
    ) -> Result<(), TestCaseError> {
        let constraints = Constraints::new(groups.to_vec());
        let result = solve(f, &constraints).unwrap();

        // Every assignment of all n atoms that respects the groups.
        let universe: Vec<Atom> = (0..n).collect();
        let exists = (0u32..1 << n).any(|mask| {
            let true_atoms = subset(&universe, mask);
            groups_hold(groups, &true_atoms) && eval(f, &true_atoms)
        });
        prop_assert_eq!(
            result.is_some(),
            exists,
            "formula {:?} groups {:?}",
            f,
            groups
        );
        prop_assert_eq!(satisfiable(f, &constraints).unwrap(), exists);

        // Solutions over the formula's atoms alone, in lexicographic order.
        let atoms = f.atoms();
        let least = (0u32..1 << atoms.len())
            .map(|mask| subset(&atoms, mask))
            .find(|true_atoms| groups_hold(groups, true_atoms) && eval(f, true_atoms));
        prop_assert_eq!(least.is_some(), exists);
        if let Some(witness) = &result {
            prop_assert!(eval(f, witness));
            prop_assert!(groups_hold(groups, witness));
            prop_assert!(constraints.allows(witness));
            prop_assert!(witness.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(witness.iter().all(|a| atoms.contains(a)));
            prop_assert_eq!(Some(witness), least.as_ref());
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn solve_agrees_with_brute_force((n, f, groups) in problem()) {
            check_against_brute_force(n, &f, &groups)?;
        }

        #[test]
        fn solve_agrees_with_brute_force_on_hard_cnf((n, f, groups) in hard_problem()) {
            check_against_brute_force(n, &f, &groups)?;
        }

        #[test]
        fn constructors_keep_the_meaning(a in formula(6), b in formula(6), mask in 0u32..64) {
            let true_atoms = subset(&(0..6).collect::<Vec<_>>(), mask);
            let (va, vb) = (eval(&a, &true_atoms), eval(&b, &true_atoms));
            prop_assert_eq!(eval(&Formula::and(a.clone(), b.clone()), &true_atoms), va && vb);
            prop_assert_eq!(eval(&Formula::or(a.clone(), b.clone()), &true_atoms), va || vb);
            prop_assert_eq!(eval(&Formula::not(a.clone()), &true_atoms), !va);
            prop_assert_eq!(eval(&Formula::all([a.clone(), b.clone(), a.clone()]), &true_atoms), va && vb);
            prop_assert_eq!(eval(&Formula::any([b, a]), &true_atoms), va || vb);
        }
    }
}
