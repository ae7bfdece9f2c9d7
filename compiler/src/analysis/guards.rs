//! From expanded guards ([`ir::Guard`]) to propositional formulas the
//! [`sat`](super::sat) solver decides, under the rules of LANGUAGE.md
//! section 5 item 4:
//!
//! - class names are independent booleans, except that
//! - class definitions hold: a defined class is an atom constrained to be
//!   equivalent to its expression (`web <-> sys.hostname =~ "^web"`), which
//!   decides exactly as substituting the expression would, and lets a
//!   witness name the class the policy wrote (`web`) rather than its body,
//! - `exclusive` groups become at-most-one constraints, and
//! - fact tests on the same fact with different literal values exclude each
//!   other (`sys.os_family == "debian"` and `== "alpine"`).
//!
//! Other tests (regex matches, `in`, comparisons of run-time values) are
//! opaque atoms: possibly true, possibly false. That keeps every answer
//! sound: "never true" is only said when no assignment of the atoms makes
//! the guard true.

use rustc_hash::FxHashMap as HashMap;

use super::sat::{self, Atom, Constraints, Formula, TooComplex};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, CompareOp, Guard, Value};
use converge_grammar::Span;

/// What an atom stands for, for witnesses and for grouping fact tests.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AtomKind {
    Class(String),
    /// `fact == "value"`
    FactEquals {
        fact: String,
        value: String,
    },
    /// Any other test, by its text.
    Opaque(String),
}

impl AtomKind {
    /// How the atom reads in a witness (`web`, `sys.os_family == "debian"`).
    pub fn describe(&self) -> String {
        match self {
            AtomKind::Class(name) => name.clone(),
            AtomKind::FactEquals { fact, value } => format!("{fact} == {value:?}"),
            AtomKind::Opaque(text) => text.clone(),
        }
    }
}

/// Every hard class that is exactly one fact test, with the fact and value.
fn hard_class_facts() -> Vec<(String, &'static str, String)> {
    use converge_format::schema::{ARCHITECTURES, OS_FAMILIES, WEEKDAYS};
    let mut out = Vec::new();
    for f in OS_FAMILIES {
        out.push(((*f).to_owned(), "sys.os_family", (*f).to_owned()));
    }
    for a in ARCHITECTURES {
        out.push(((*a).to_owned(), "sys.arch", (*a).to_owned()));
    }
    for d in WEEKDAYS {
        out.push(((*d).to_owned(), "sys.time.weekday", (*d).to_owned()));
    }
    for h in 0..24 {
        out.push((format!("hr{h:02}"), "sys.time.hour", h.to_string()));
    }
    out
}

/// Translates guards of one program, sharing atoms between them so that
/// two guards can be solved together.
#[derive(Debug)]
pub struct GuardSpace<'p> {
    exclusive: &'p [Vec<String>],
    atoms: Vec<AtomKind>,
    index: HashMap<AtomKind, Atom>,
    /// The expression of each defined class, by the class's atom.
    definitions: HashMap<Atom, Formula>,
}

/// The formulas of a program's promises ([`GuardSpace::promise_formulas`]):
/// one per distinct shared guard, and which one each promise has.
#[derive(Debug, Default)]
pub struct PromiseFormulas {
    unique: Vec<Formula>,
    of: Vec<u32>,
}

impl PromiseFormulas {
    /// The formula of promise `promise`'s guard.
    pub fn get(&self, promise: usize) -> Option<&Formula> {
        self.unique.get(*self.of.get(promise)? as usize)
    }

    /// Which distinct formula promise `promise` has: promises with the same
    /// slot have the same guard.
    pub fn slot(&self, promise: usize) -> Option<usize> {
        self.of.get(promise).map(|s| *s as usize)
    }

    /// How many distinct formulas there are.
    pub fn distinct(&self) -> usize {
        self.unique.len()
    }
}

impl<'p> GuardSpace<'p> {
    pub fn new(program: &'p ir::Program) -> Self {
        let mut space = GuardSpace {
            exclusive: &program.exclusive,
            atoms: Vec::new(),
            index: HashMap::default(),
            definitions: HashMap::default(),
        };
        for class in &program.classes {
            let Some(expr) = &class.expr else { continue };
            let Formula::Atom(atom) = space.atom(AtomKind::Class(class.name.clone())) else {
                continue;
            };
            let body = space.formula(expr);
            space.definitions.insert(atom, body);
        }
        // Hard classes the VM derives from one fact are that fact test:
        // `debian` is `sys.os_family == "debian"`, `hr03` is
        // `sys.time.hour == 3`. So `when debian` and
        // `when sys.os_family == "redhat"` exclude each other, with or
        // without an `exclusive` declaration.
        for (class, fact, value) in hard_class_facts() {
            if program.classes.iter().any(|c| c.name == class) {
                continue;
            }
            let Formula::Atom(atom) = space.atom(AtomKind::Class(class)) else {
                continue;
            };
            let body = space.atom(AtomKind::FactEquals {
                fact: fact.to_owned(),
                value,
            });
            space.definitions.insert(atom, body);
        }
        space
    }

    fn atom(&mut self, kind: AtomKind) -> Formula {
        if let Some(a) = self.index.get(&kind) {
            return Formula::Atom(*a);
        }
        let a = self.atoms.len() as Atom;
        self.atoms.push(kind.clone());
        self.index.insert(kind, a);
        Formula::Atom(a)
    }

    pub fn describe(&self, atom: Atom) -> String {
        self.atoms
            .get(atom as usize)
            .map(AtomKind::describe)
            .unwrap_or_default()
    }

    /// The formula of a guard. Classes are atoms; combine the result with
    /// [`with_definitions`](Self::with_definitions) before solving.
    pub fn formula(&mut self, guard: &Guard) -> Formula {
        match guard {
            Guard::Const(b) => Formula::Const(*b),
            Guard::Class(name) => self.atom(AtomKind::Class(name.clone())),
            Guard::Not(inner) => Formula::not(self.formula(inner)),
            Guard::And(items) => {
                let parts: Vec<Formula> = items.iter().map(|g| self.formula(g)).collect();
                Formula::all(parts)
            }
            Guard::Or(items) => {
                let parts: Vec<Formula> = items.iter().map(|g| self.formula(g)).collect();
                Formula::any(parts)
            }
            Guard::Compare { op, lhs, rhs } => self.compare(*op, lhs, rhs),
        }
    }

    /// The formula of every promise's guard, translated once per shared
    /// guard (the promises of one block share theirs) and in promise order,
    /// so atoms are numbered as translating each promise in turn would.
    pub fn promise_formulas(&mut self, program: &ir::Program) -> PromiseFormulas {
        let mut slots: HashMap<usize, u32> = HashMap::default();
        let mut unique: Vec<Formula> = Vec::new();
        let mut of: Vec<u32> = Vec::with_capacity(program.promises.len());
        let mut last: Option<(usize, u32)> = None;
        for p in &program.promises {
            let key = std::sync::Arc::as_ptr(&p.guard) as usize;
            let slot = match last {
                Some((k, slot)) if k == key => slot,
                _ => match slots.get(&key) {
                    Some(&slot) => slot,
                    None => {
                        let slot = unique.len() as u32;
                        unique.push(self.formula(&p.guard));
                        slots.insert(key, slot);
                        slot
                    }
                },
            };
            last = Some((key, slot));
            of.push(slot);
        }
        PromiseFormulas { unique, of }
    }

    /// `formula` and the definitions of every defined class it depends on
    /// (directly or through other definitions), as equivalences.
    pub fn with_definitions(&self, formula: Formula) -> Formula {
        // A set, not `Vec::contains`: a chain of 100,000 class definitions
        // must cost 100,000 steps, not their square (issue 14, item 22).
        let mut seen: rustc_hash::FxHashSet<Atom> = rustc_hash::FxHashSet::default();
        let mut needed: Vec<Atom> = Vec::new();
        let mut queue: Vec<Atom> = formula.atoms();
        while let Some(atom) = queue.pop() {
            if !seen.insert(atom) {
                continue;
            }
            if let Some(body) = self.definitions.get(&atom) {
                needed.push(atom);
                body.visit_atoms(|a| queue.push(a));
            }
        }
        needed.sort_unstable();
        let mut parts = vec![formula];
        for atom in needed {
            let Some(body) = self.definitions.get(&atom) else {
                continue;
            };
            let a = Formula::Atom(atom);
            parts.push(Formula::or(Formula::not(a.clone()), body.clone()));
            parts.push(Formula::or(a, Formula::not(body.clone())));
        }
        Formula::all(parts)
    }

    fn compare(&mut self, op: CompareOp, lhs: &Value, rhs: &Value) -> Formula {
        // `fact in ["a", "b"]`, which expansion writes for the keys of a
        // lookup (`sites[sys.hostname]`): one equality per key, so a
        // witness names the key.
        if let (CompareOp::In, Some(fact), Value::List(items)) = (op, host_term(lhs), rhs) {
            if items.iter().all(|i| i.as_str().is_some()) {
                let parts: Vec<Formula> = items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|value| {
                        self.atom(AtomKind::FactEquals {
                            fact: fact.clone(),
                            value: value.to_owned(),
                        })
                    })
                    .collect();
                return Formula::any(parts);
            }
        }
        let term = match (host_term(lhs), host_term(rhs)) {
            (Some(fact), None) if rhs.is_constant() => Some((fact, rhs)),
            (None, Some(fact)) if lhs.is_constant() => Some((fact, lhs)),
            _ => None,
        };
        let equality = term.map(|(fact, other)| {
            let value = match other {
                Value::Str(s) | Value::Word(s) => s.clone(),
                v => v.display(),
            };
            AtomKind::FactEquals { fact, value }
        });
        match (op, equality) {
            (CompareOp::Eq, Some(kind)) => self.atom(kind),
            (CompareOp::NotEq, Some(kind)) => Formula::not(self.atom(kind)),
            (op, _) => {
                let text = format!(
                    "{} {} {}",
                    lhs.display(),
                    match op {
                        CompareOp::Eq => "==",
                        CompareOp::NotEq => "!=",
                        CompareOp::Match => "=~",
                        CompareOp::In => "in",
                    },
                    rhs.display()
                );
                self.atom(AtomKind::Opaque(text))
            }
        }
    }

    /// The constraints between the atoms created so far: exclusive groups
    /// and equality tests of one fact against different values.
    pub fn constraints(&self) -> Constraints {
        let mut groups: Vec<Vec<Atom>> = Vec::new();
        for group in self.exclusive {
            let atoms: Vec<Atom> = group
                .iter()
                .filter_map(|c| self.index.get(&AtomKind::Class(c.clone())).copied())
                .collect();
            if atoms.len() > 1 {
                groups.push(atoms);
            }
        }
        let mut by_fact: HashMap<&str, Vec<Atom>> = HashMap::default();
        for (i, kind) in self.atoms.iter().enumerate() {
            if let AtomKind::FactEquals { fact, .. } = kind {
                by_fact.entry(fact).or_default().push(i as Atom);
            }
        }
        let mut facts: Vec<(&str, Vec<Atom>)> =
            by_fact.into_iter().filter(|(_, a)| a.len() > 1).collect();
        facts.sort();
        groups.extend(facts.into_iter().map(|(_, atoms)| atoms));
        Constraints::new(groups)
    }

    /// A witness for `formula` (definitions included): the atoms that are
    /// true in one satisfying assignment and that `formula` itself mentions,
    /// described; `Ok(None)` when it is unsatisfiable, `Err` when the solver
    /// ran out of its budget (the caller must say so, never assume).
    pub fn witness(
        &self,
        formula: &Formula,
        constraints: &Constraints,
    ) -> Result<Option<Vec<String>>, TooComplex> {
        let direct: rustc_hash::FxHashSet<Atom> = formula.atoms().into_iter().collect();
        let full = self.with_definitions(formula.clone());
        Ok(sat::solve(&full, constraints)?.map(|atoms| {
            atoms
                .iter()
                .filter(|a| direct.contains(a))
                .map(|a| self.describe(*a))
                .collect()
        }))
    }
}

/// The error for a guard question the solver could not answer within its
/// budget (E0602). An analysis that cannot prove a property says so: it
/// never reports "no contradiction" or "alive" on a guess.
pub fn too_complex(span: Span, question: &str, err: TooComplex) -> Diagnostic {
    Diagnostic::new(
        Code::TooComplexToProve,
        format!("too complex to prove: {question}"),
        span,
        format!(
            "the guard solver gave up after {} conflicts",
            err.conflicts
        ),
    )
    .with_note("the compiler refuses what it cannot prove free of contradictions (docs/analysis.md, \"When the solver gives up\")")
    .with_help("simplify the guard: fewer classes that must hold together over shared exclusive groups, or split the promise into cases")
}

/// The name of a value that is one string per host: a fact, or a function
/// of facts (`lower(sys.hostname)`, `split(sys.hostname, "-")[0] ?? "x"`,
/// the keys expansion splits a lookup on). Tests of one such value against
/// different constants exclude one another, like tests of one fact. A loop
/// variable is not one value per host, so nothing holding one is.
fn host_term(v: &Value) -> Option<String> {
    fn per_host(v: &Value) -> bool {
        match v {
            Value::Fact(_) | Value::Probe { .. } => true,
            Value::Call(call) => call.args.iter().all(|a| per_host(a) || a.is_constant()),
            Value::Coalesce(items) => items.iter().all(|a| per_host(a) || a.is_constant()),
            _ => false,
        }
    }
    match v {
        Value::Fact(fact) | Value::Probe { name: fact, .. } => Some(fact.clone()),
        v if per_host(v) => Some(v.display()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{ClassDecl, Program};
    use converge_grammar::Span;

    fn class(name: &str) -> Guard {
        Guard::Class(name.to_owned())
    }

    fn fact_eq(fact: &str, value: &str) -> Guard {
        Guard::Compare {
            op: CompareOp::Eq,
            lhs: Value::Fact(fact.to_owned()),
            rhs: Value::Str(value.to_owned()),
        }
    }

    fn program() -> Program {
        Program {
            promises: Vec::new(),
            classes: vec![ClassDecl {
                name: "web".into(),
                expr: Some(Guard::Or(vec![class("nginx_host"), class("apache_host")])),
                span: Span::default(),
            }],
            exclusive: vec![vec!["debian".into(), "redhat".into(), "alpine".into()]],
            ..Program::default()
        }
    }

    #[test]
    fn exclusive_classes_cannot_both_hold() {
        let p = program();
        let mut space = GuardSpace::new(&p);
        let both = Guard::And(vec![class("debian"), class("redhat")]);
        let f = space.formula(&both);
        assert_eq!(space.witness(&f, &space.constraints()).unwrap(), None);
        let one = Guard::And(vec![class("debian"), Guard::Not(Box::new(class("redhat")))]);
        let f = space.formula(&one);
        assert_eq!(
            space.witness(&f, &space.constraints()).unwrap(),
            Some(vec!["debian".to_owned()])
        );
    }

    #[test]
    fn different_values_of_one_fact_exclude_each_other() {
        let p = program();
        let mut space = GuardSpace::new(&p);
        let g = Guard::And(vec![
            fact_eq("sys.os_family", "debian"),
            fact_eq("sys.os_family", "alpine"),
        ]);
        let f = space.formula(&g);
        assert_eq!(space.witness(&f, &space.constraints()).unwrap(), None);
        let g = Guard::And(vec![
            fact_eq("sys.os_family", "debian"),
            fact_eq("sys.arch", "x86_64"),
        ]);
        let f = space.formula(&g);
        assert!(space.witness(&f, &space.constraints()).unwrap().is_some());
    }

    #[test]
    fn definitions_are_expanded() {
        let p = program();
        let mut space = GuardSpace::new(&p);
        // web && !nginx_host && !apache_host is impossible given web's definition.
        let g = Guard::And(vec![
            class("web"),
            Guard::Not(Box::new(class("nginx_host"))),
            Guard::Not(Box::new(class("apache_host"))),
        ]);
        let f = space.formula(&g);
        assert_eq!(space.witness(&f, &space.constraints()).unwrap(), None);
    }
}
