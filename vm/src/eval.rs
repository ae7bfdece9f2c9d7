//! The interpreter of bundle programs: class definitions, guards, and
//! strings that depend on facts (LANGUAGE.md section 7, step 2).
//!
//! Programs are straight lines checked by the verifier, so evaluation is one
//! pass over the instructions with a small stack. It still never indexes
//! blindly nor panics: a body that somehow did not match what the verifier
//! promised gives an [`EvalError`], not a crash.

use std::collections::{BTreeSet, HashMap};

use crate::bundle::format::{Body, Constant};
use crate::bundle::instr::Instr;
use crate::bundle::limits::RegexCache;
use crate::facts::{FactValue, Facts};
use crate::schema::fact_by_id;

/// The most bytes of text one program run may produce, counting every string
/// and list it pushes. The verifier bounds a program's length and stack
/// depth, but a validly signed hostile bundle could still push a large
/// constant thousands of times or concatenate it into gigabytes; this
/// budget makes such a program fail its promise instead of exhausting memory
/// (THREATS.md T14). Four times the largest file the VM edits leaves room for
/// any content a real policy builds.
pub const MAX_EVAL_BYTES: usize = 4 * (crate::rootfs::MAX_READ as usize);

/// A value on the stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Bool(bool),
    Str(String),
    Int(i64),
    List(Vec<String>),
}

impl Val {
    /// The bytes of text this value holds, for [`MAX_EVAL_BYTES`].
    fn bytes(&self) -> usize {
        match self {
            Val::Bool(_) | Val::Int(_) => 0,
            Val::Str(s) => s.len(),
            Val::List(l) => l.iter().map(String::len).sum(),
        }
    }

    /// The text of a scalar, as `concat` and string attributes use it.
    pub fn text(&self) -> String {
        match self {
            Val::Bool(b) => b.to_string(),
            Val::Str(s) => s.clone(),
            Val::Int(i) => i.to_string(),
            Val::List(items) => items.join(" "),
        }
    }
}

/// A program that could not be evaluated (only possible if the verifier was
/// bypassed); the promise that needed it fails with this message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError(pub String);

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot evaluate: {}", self.0)
    }
}

/// How much work all the programs of one run may do together, in steps: a
/// step is one byte of text an instruction pushes, compares, searches or
/// joins, and every instruction costs at least [`INSTR_STEPS`]. The verifier
/// bounds each program and [`MAX_EVAL_BYTES`] each program run, but a
/// bundle may hold a hundred thousand programs and the run evaluates its
/// classes again in each pass: without this budget a 1 MB bundle kept the
/// evaluator busy for 18 s (issue 14, item 4). Past it, every program still
/// to run fails its promise with the reason; the rest of the run goes on.
/// About a second or two of work; a real run uses well under a thousandth.
pub const MAX_RUN_STEPS: u64 = 1 << 32;
/// The steps one instruction costs before the bytes it handles.
pub const INSTR_STEPS: u64 = 64;

/// Evaluates the programs of one bundle on one host. Regexes are compiled
/// once per run, and all evaluation of the run shares [`MAX_RUN_STEPS`].
#[derive(Debug)]
pub struct Evaluator<'b> {
    body: &'b Body,
    facts: &'b Facts,
    regexes: RegexCache,
    /// Steps left of [`MAX_RUN_STEPS`].
    steps_left: u64,
    /// Classes whose definition could not be evaluated, with the reason:
    /// a program that reads one fails with it, so exactly the promises that
    /// depend on it fail (and the classes defined from it are not set).
    failed_classes: HashMap<String, String>,
}

impl<'b> Evaluator<'b> {
    pub fn new(body: &'b Body, facts: &'b Facts) -> Self {
        Evaluator {
            body,
            facts,
            regexes: RegexCache::default(),
            steps_left: MAX_RUN_STEPS,
            failed_classes: HashMap::new(),
        }
    }

    /// The classes set on this host: the hard classes, the classes given on
    /// the command line, and every defined class whose program is true, in
    /// the bundle's (dependency) order. A definition that cannot be
    /// evaluated (over a budget) leaves its class unset and is remembered in
    /// [`Evaluator::class_failures`]; it never stops the others.
    pub fn classes(&mut self, defined: &[String]) -> Result<BTreeSet<String>, EvalError> {
        let mut set: BTreeSet<String> = self.facts.hard_classes().into_iter().collect();
        set.extend(defined.iter().cloned());
        self.failed_classes.clear();
        for class in self.body.classes.iter() {
            let Some(program) = class.program else {
                continue;
            };
            let name = match self.body.constants.get(class.name as usize) {
                Some(Constant::Word(n) | Constant::Str(n)) => n.clone(),
                _ => return Err(EvalError(format!("class name constant {}", class.name))),
            };
            match self.run(program, &set, &[]) {
                Ok(value) => {
                    if value == Val::Bool(true) {
                        set.insert(name);
                    }
                }
                Err(e) => {
                    // A class defined from a failed class carries the first
                    // reason, not a chain of them.
                    let reason = match e.0.strip_prefix("class `") {
                        Some(_) => e.0,
                        None => format!("class `{name}` cannot be evaluated: {}", e.0),
                    };
                    self.failed_classes.insert(name, reason);
                }
            }
        }
        Ok(set)
    }

    /// The classes of the last [`Evaluator::classes`] whose definition could
    /// not be evaluated, with the reason.
    pub fn class_failures(&self) -> &HashMap<String, String> {
        &self.failed_classes
    }

    /// Steps used so far of [`MAX_RUN_STEPS`].
    pub fn steps_used(&self) -> u64 {
        MAX_RUN_STEPS.saturating_sub(self.steps_left)
    }

    /// Takes `n` steps from the run's budget, or says it is spent.
    fn charge(&mut self, n: u64) -> Result<(), EvalError> {
        match self.steps_left.checked_sub(n) {
            Some(left) => {
                self.steps_left = left;
                Ok(())
            }
            None => {
                self.steps_left = 0;
                Err(EvalError(format!(
                    "the run's evaluation budget of {MAX_RUN_STEPS} steps is spent (a bundle may ask for at most that much work; docs/bytecode.md, Limits)"
                )))
            }
        }
    }

    /// Runs a program with the classes currently set and the current
    /// elements of the promise's run-time loops.
    pub fn run(
        &mut self,
        program: u32,
        classes: &BTreeSet<String>,
        loop_values: &[String],
    ) -> Result<Val, EvalError> {
        let body = self.body;
        let code = &body
            .programs
            .get(program as usize)
            .ok_or_else(|| EvalError(format!("program {program}")))?
            .code;
        let mut stack: Vec<Val> = Vec::with_capacity(8);
        let mut produced = 0usize;
        let underflow = || EvalError("stack underflow".to_owned());
        for instr in code.iter() {
            self.charge(INSTR_STEPS)?;
            // Bytes an instruction reads without pushing them (compared,
            // searched): charged on top of what it pushes.
            let mut examined = 0usize;
            let value = match *instr {
                Instr::Const(c) => match body.constants.get(c as usize) {
                    Some(Constant::Str(s) | Constant::Word(s)) => Val::Str(s.clone()),
                    Some(Constant::Int(i)) => Val::Int(*i),
                    Some(Constant::Duration(s)) => Val::Int(i64::try_from(*s).unwrap_or(i64::MAX)),
                    Some(Constant::Bool(b)) => Val::Bool(*b),
                    _ => return Err(EvalError(format!("constant {c}"))),
                },
                Instr::Fact(f) => {
                    let name = fact_by_id(f).map(|f| f.name).unwrap_or("");
                    match self.facts.get(name) {
                        Some(FactValue::Str(s)) => Val::Str(s),
                        Some(FactValue::Int(i)) => Val::Int(i),
                        Some(FactValue::List(l)) => Val::List(l),
                        None => return Err(EvalError(format!("fact {f}"))),
                    }
                }
                Instr::LoopVar(i) => Val::Str(
                    loop_values
                        .get(i as usize)
                        .cloned()
                        .ok_or_else(|| EvalError(format!("loop variable {i}")))?,
                ),
                Instr::Class(c) => match body.constants.get(c as usize) {
                    Some(Constant::Word(n) | Constant::Str(n)) => {
                        if let Some(reason) = self.failed_classes.get(n) {
                            return Err(EvalError(reason.clone()));
                        }
                        Val::Bool(classes.contains(n))
                    }
                    _ => return Err(EvalError(format!("class constant {c}"))),
                },
                Instr::Not => match stack.pop().ok_or_else(underflow)? {
                    Val::Bool(b) => Val::Bool(!b),
                    other => return Err(EvalError(format!("not of {other:?}"))),
                },
                Instr::And | Instr::Or => {
                    let b = stack.pop().ok_or_else(underflow)?;
                    let a = stack.pop().ok_or_else(underflow)?;
                    match (a, b) {
                        (Val::Bool(a), Val::Bool(b)) => {
                            Val::Bool(if *instr == Instr::And { a && b } else { a || b })
                        }
                        (a, b) => {
                            return Err(EvalError(format!("boolean operator on {a:?} and {b:?}")))
                        }
                    }
                }
                Instr::Eq | Instr::Ne => {
                    let b = stack.pop().ok_or_else(underflow)?;
                    let a = stack.pop().ok_or_else(underflow)?;
                    examined = a.bytes().min(b.bytes());
                    Val::Bool((a == b) == (*instr == Instr::Eq))
                }
                Instr::Match(c) => {
                    let text = match stack.pop().ok_or_else(underflow)? {
                        Val::Str(s) => s,
                        other => return Err(EvalError(format!("match on {other:?}"))),
                    };
                    self.charge(text.len() as u64)?;
                    Val::Bool(self.regex(c)?.is_match(&text))
                }
                Instr::In => {
                    let list = stack.pop().ok_or_else(underflow)?;
                    let value = stack.pop().ok_or_else(underflow)?;
                    examined = list.bytes();
                    match (value, list) {
                        (Val::Str(v), Val::List(items)) => Val::Bool(items.contains(&v)),
                        (v, l) => return Err(EvalError(format!("{v:?} in {l:?}"))),
                    }
                }
                Instr::Concat(n) => {
                    let n = n as usize;
                    if n > stack.len() {
                        return Err(underflow());
                    }
                    let parts = stack.split_off(stack.len().saturating_sub(n));
                    Val::Str(parts.iter().map(Val::text).collect())
                }
            };
            let bytes = value.bytes();
            self.charge((bytes as u64).saturating_add(examined as u64))?;
            produced = produced.saturating_add(bytes);
            if produced > MAX_EVAL_BYTES {
                return Err(EvalError(format!(
                    "program {program} produces more than {} MiB of text",
                    MAX_EVAL_BYTES >> 20
                )));
            }
            stack.push(value);
        }
        match (stack.pop(), stack.is_empty()) {
            (Some(v), true) => Ok(v),
            _ => Err(EvalError("the program does not leave one value".to_owned())),
        }
    }

    fn regex(&mut self, c: u32) -> Result<&regex::Regex, EvalError> {
        let Some(Constant::Str(pattern)) = self.body.constants.get(c as usize) else {
            return Err(EvalError(format!("regex constant {c}")));
        };
        self.regexes.get(&c, pattern).map_err(EvalError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(constants: Vec<Constant>, programs: Vec<Vec<Instr>>) -> Body {
        Body::with_programs(constants, programs)
    }

    fn facts() -> Facts {
        Facts {
            hostname: "web01".into(),
            fqdn: "web01.example".into(),
            os: "linux".into(),
            os_family: "debian".into(),
            os_release: "12".into(),
            arch: "x86_64".into(),
            ipv4: vec!["10.0.0.1".into(), "10.0.0.2".into()],
            cpus: 4,
            memory_mb: 2048,
            weekday: "monday".into(),
            hour: 3,
        }
    }

    fn fact(name: &str) -> u32 {
        u32::from(crate::schema::fact(name).unwrap().id)
    }

    #[test]
    fn every_instruction() {
        let constants = vec![
            Constant::Str("10.0.0.2".into()),
            Constant::Str("^web".into()),
            Constant::Word("monday".into()),
            Constant::Int(4),
            Constant::Str("ip=".into()),
        ];
        let programs = vec![
            // "10.0.0.2" in sys.ipv4 && sys.hostname =~ "^web"
            vec![
                Instr::Const(0),
                Instr::Fact(fact("sys.ipv4")),
                Instr::In,
                Instr::Fact(fact("sys.hostname")),
                Instr::Match(1),
                Instr::And,
            ],
            // monday && !(sys.cpus != 4) || false
            vec![
                Instr::Class(2),
                Instr::Fact(fact("sys.cpus")),
                Instr::Const(3),
                Instr::Ne,
                Instr::Not,
                Instr::And,
            ],
            // "ip=" + loop variable 0 + cpus
            vec![
                Instr::Const(4),
                Instr::LoopVar(0),
                Instr::Fact(fact("sys.cpus")),
                Instr::Concat(3),
            ],
            // sys.hostname == "10.0.0.2" || monday
            vec![
                Instr::Fact(fact("sys.hostname")),
                Instr::Const(0),
                Instr::Eq,
                Instr::Class(2),
                Instr::Or,
            ],
        ];
        let body = body(constants, programs);
        let facts = facts();
        let mut eval = Evaluator::new(&body, &facts);
        let classes = eval.classes(&[]).unwrap();
        assert!(classes.contains("monday") && classes.contains("hr03"));
        assert_eq!(eval.run(0, &classes, &[]), Ok(Val::Bool(true)));
        assert_eq!(eval.run(1, &classes, &[]), Ok(Val::Bool(true)));
        assert_eq!(
            eval.run(2, &classes, &["10.0.0.1".into()]),
            Ok(Val::Str("ip=10.0.0.14".into()))
        );
        assert_eq!(eval.run(3, &classes, &[]), Ok(Val::Bool(true)));
        // A program that reads a loop variable outside a loop fails cleanly.
        assert!(eval.run(2, &classes, &[]).is_err());
        assert!(eval.run(99, &classes, &[]).is_err());
    }

    /// A validly shaped program that doubles a 1 MiB constant again and
    /// again: the verifier accepts it (its stack is two deep), and without a
    /// budget it would ask for 300 MiB of live text and quadratically more
    /// work. It must fail cleanly, long before that.
    #[test]
    fn a_concatenation_bomb_stops_at_the_text_budget() {
        let mib = "x".repeat(1 << 20);
        let mut bomb = vec![Instr::Const(0)];
        for _ in 0..300 {
            bomb.extend([Instr::Const(0), Instr::Concat(2)]);
        }
        // The same shape, small enough for a real policy.
        let mut fine = vec![Instr::Const(0)];
        for _ in 0..9 {
            fine.extend([Instr::Const(0), Instr::Concat(2)]);
        }
        let body = body(vec![Constant::Str(mib)], vec![bomb, fine]);
        crate::bundle::verify::verify_body(&body).unwrap();
        let facts = facts();
        let mut eval = Evaluator::new(&body, &facts);
        let err = eval.run(0, &BTreeSet::new(), &[]).unwrap_err();
        assert!(err.0.contains("more than 256 MiB"), "{err}");
        match eval.run(1, &BTreeSet::new(), &[]) {
            Ok(Val::Str(s)) => assert_eq!(s.len(), 10 << 20),
            other => panic!("{other:?}"),
        }
    }

    /// Every instruction costs [`INSTR_STEPS`] plus the bytes it pushes or
    /// examines; the count is exact, so the budget is work, not time.
    #[test]
    fn steps_count_instructions_and_bytes() {
        let body = body(
            vec![
                Constant::Str("abcdefghij".into()),
                Constant::Str("^a".into()),
            ],
            vec![vec![
                Instr::Const(0),
                Instr::Const(0),
                Instr::Eq,
                Instr::Const(0),
                Instr::Match(1),
                Instr::And,
            ]],
        );
        let facts = facts();
        let mut eval = Evaluator::new(&body, &facts);
        assert_eq!(eval.run(0, &BTreeSet::new(), &[]), Ok(Val::Bool(true)));
        // 6 instructions; three pushes of 10 bytes, 10 compared, 10 searched.
        assert_eq!(eval.steps_used(), 6 * INSTR_STEPS + 30 + 10 + 10);
    }

    /// A class over the text budget is unset and remembered; a program that
    /// reads it, and a class defined from it, fail with its reason; the
    /// other classes are evaluated as usual.
    #[test]
    fn a_class_that_cannot_be_evaluated_fails_only_what_reads_it() {
        use crate::bundle::format::ClassEntry;
        let mut bomb = vec![Instr::Const(0)];
        for _ in 0..300 {
            bomb.extend([Instr::Const(0), Instr::Concat(2)]);
        }
        bomb.extend([Instr::Const(0), Instr::Eq]);
        let mut body = body(
            vec![
                Constant::Str("x".repeat(1 << 20)),
                Constant::Word("big".into()),
                Constant::Word("dep".into()),
                Constant::Word("fine".into()),
                Constant::Bool(true),
            ],
            vec![
                bomb,
                vec![Instr::Class(1), Instr::Not],
                vec![Instr::Const(4)],
                vec![Instr::Class(2)],
            ],
        );
        body.classes.0 = [(1, 0), (2, 1), (3, 2)]
            .into_iter()
            .map(|(name, program)| ClassEntry {
                name,
                program: Some(program),
            })
            .collect();
        let facts = facts();
        let mut eval = Evaluator::new(&body, &facts);
        let classes = eval.classes(&[]).unwrap();
        assert!(classes.contains("fine") && !classes.contains("big") && !classes.contains("dep"));
        let failures = eval.class_failures();
        for class in ["big", "dep"] {
            let why = failures.get(class).unwrap();
            assert!(
                why.starts_with("class `big` cannot be evaluated") && why.contains("256 MiB"),
                "{why}"
            );
        }
        let err = eval.run(3, &classes, &[]).unwrap_err();
        assert!(
            err.0.starts_with("class `big` cannot be evaluated"),
            "{err}"
        );
    }
}
