//! The interpreter of bundle programs: class definitions, guards, and
//! strings that depend on facts (LANGUAGE.md section 7, step 2).
//!
//! Programs are straight lines checked by the verifier, so evaluation is one
//! pass over the instructions with a small stack; `each` (format 2.2) runs a
//! program of a lower index per element of a list, so it recurses at most
//! [`MAX_EACH_DEPTH`] deep and always ends. A value may be missing (an
//! `index` out of range): the stack holds `Option<Val>`, every instruction
//! passes a missing operand on as a missing result, and only `coalesce`
//! replaces it. The built-in functions of `func` are in [`functions`].
//!
//! It never indexes blindly nor panics: a body that somehow did not match
//! what the verifier promised gives an [`EvalError`], not a crash, and so
//! does a program run over one of its budgets ([`MAX_EVAL_BYTES`],
//! [`MAX_EVAL_STEPS`], [`MAX_RUN_STEPS`]) or with arguments a function
//! refuses (an empty separator): the promise that needed it fails with the
//! reason.

mod disjunction;
mod functions;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap, HashSet};

use zeroize::Zeroizing;

use crate::bundle::format::{Body, Constant};
use crate::bundle::functions::function_by_id;
use crate::bundle::instr::Instr;
use crate::bundle::limits::{RegexCache, MAX_EACH_DEPTH};
use crate::facts::{unknown_class, FactSource, FactValue};
use crate::schema::fact_by_id;
use crate::secret::SecretText;
use crate::sources::{NoProbes, NoSecrets, ProbeFacts, Secrets};
pub use disjunction::Disjunctions;
use disjunction::Outcome;
use functions::{Applied, FuncError};

/// The most bytes of text one program run may produce, counting every string
/// and list it pushes. The verifier bounds a program's length and stack
/// depth, but a validly signed hostile bundle could still push a large
/// constant thousands of times or concatenate it into gigabytes; this
/// budget makes such a program fail its promise instead of exhausting memory
/// (THREATS.md T14). Four times the largest file the VM edits (64 MiB, its
/// `rootfs::MAX_READ`, which the VM asserts) leaves room for any content a
/// real policy builds.
pub const MAX_EVAL_BYTES: usize = 4 * (64 << 20);

/// The most instructions one program run may execute, counting those of the
/// programs its `each` instructions run. A program is at most 65,536
/// instructions, but `each` over a 65,536-element list constant, nested
/// sixteen deep, would run for ever; real templates execute a few thousand.
/// Past it the promise (or class) fails with the reason.
pub const MAX_EVAL_STEPS: u64 = 1 << 24;

/// A value on the stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Val {
    Bool(bool),
    Str(String),
    Int(i64),
    List(Vec<String>),
}

impl Val {
    /// The bytes this value holds, for [`MAX_EVAL_BYTES`]: its text, and
    /// for a list the memory of each element's string too, so a list of a
    /// million empty strings is not free.
    fn bytes(&self) -> usize {
        match self {
            Val::Bool(_) | Val::Int(_) => 0,
            Val::Str(s) => s.len(),
            Val::List(l) => list_bytes(l),
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

/// The bytes a list of strings counts toward [`MAX_EVAL_BYTES`]: its text
/// plus one string header (24 bytes) per element.
fn list_bytes(items: &[String]) -> usize {
    items
        .iter()
        .map(|s| s.len().saturating_add(std::mem::size_of::<String>()))
        .fold(0, usize::saturating_add)
}

/// A value on the stack while a program runs: `None` is *missing* (an
/// `index` out of range), which only `coalesce` replaces.
type Slot = Option<Val>;

/// What one program run has used of its budgets, shared with the programs
/// its `each` instructions run.
#[derive(Debug)]
struct RunState<'r> {
    /// The program the run started with, for the reasons of its failures.
    program: u32,
    classes: &'r BTreeSet<String>,
    loop_values: &'r [String],
    /// The current element of each enclosing `each`, outermost first.
    elems: Vec<String>,
    /// Bytes pushed so far, of [`MAX_EVAL_BYTES`].
    produced: usize,
    /// Instructions executed so far, of [`MAX_EVAL_STEPS`].
    executed: u64,
    /// The secrets this run pushed (issue 20): everything it computes is
    /// computed from them, so its result is secret (taint by run, not by
    /// value: the verifier lets only a `file` content or template or a
    /// `user` password read a secret, and such a program is a whole value).
    secrets: BTreeSet<String>,
    /// Set when a secret could not be opened: that failure's message names
    /// the secret and why, never a value, so it is shown as it is.
    unopened: bool,
}

impl RunState<'_> {
    fn over_bytes(&self) -> EvalError {
        EvalError(format!(
            "program {} produces more than {} MiB of text",
            self.program,
            MAX_EVAL_BYTES >> 20
        ))
    }
}

/// A program that could not be evaluated: over a budget, arguments a
/// function refuses, or (only if the verifier was bypassed) a body of the
/// wrong shape; the promise that needed it fails with this message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalError(pub String);

impl std::fmt::Display for EvalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cannot evaluate: {}", self.0)
    }
}

/// The value of a program that may read secrets ([`Evaluator::run_sink`]).
#[derive(Debug)]
pub enum Evaluated {
    Plain(Val),
    /// Computed from secrets: the text and their names.
    Secret(SecretText),
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
    facts: &'b dyn FactSource,
    regexes: RegexCache,
    /// Steps left of [`MAX_RUN_STEPS`].
    steps_left: u64,
    /// Classes whose definition could not be evaluated, with the reason:
    /// a program that reads one fails with it, so exactly the promises that
    /// depend on it fail (and the classes defined from it are not set).
    failed_classes: HashMap<String, String>,
    /// The probe facts of the run (format 2.3).
    probes: &'b dyn ProbeFacts,
    /// The classes left unset because a probe fact they need is unknown.
    unknown_classes: HashSet<String>,
    /// Set when the last [`Evaluator::run`] failed because a probe fact it
    /// needs is unknown on this host (directly or through a class): its
    /// promise is then skipped, not failed.
    unknown: bool,
    /// Opens the secrets `const` pushes (format 2.4), lazily.
    keyring: Box<dyn Secrets + 'b>,
    /// The programs that are disjunctions of classes, run by set
    /// membership ([`disjunction`]): the evaluator's own, or one shared by
    /// every host a preview resolves.
    disjunctions: Cow<'b, Disjunctions>,
}

impl<'b> Evaluator<'b> {
    /// An evaluator of `body` with `facts`, no probe facts and no way to
    /// open a secret (see [`Evaluator::with_probes`],
    /// [`Evaluator::with_secrets`]). It indexes the bundle's disjunctions
    /// of classes itself (one pass over the programs); to evaluate one
    /// bundle on many hosts, index it once: [`Evaluator::sharing`].
    pub fn new(body: &'b Body, facts: &'b dyn FactSource) -> Self {
        Self::with_index(body, facts, Cow::Owned(Disjunctions::of(body)))
    }

    /// [`Evaluator::new`] with `disjunctions`, the [`Disjunctions::of`]
    /// `body`, made once for every host.
    pub fn sharing(
        body: &'b Body,
        facts: &'b dyn FactSource,
        disjunctions: &'b Disjunctions,
    ) -> Self {
        Self::with_index(body, facts, Cow::Borrowed(disjunctions))
    }

    fn with_index(
        body: &'b Body,
        facts: &'b dyn FactSource,
        disjunctions: Cow<'b, Disjunctions>,
    ) -> Self {
        Evaluator {
            body,
            facts,
            regexes: RegexCache::default(),
            steps_left: MAX_RUN_STEPS,
            failed_classes: HashMap::new(),
            probes: &NoProbes,
            unknown_classes: HashSet::new(),
            unknown: false,
            keyring: Box::new(NoSecrets),
            disjunctions,
        }
    }

    /// Secrets are opened by `secrets` (the VM's keyring opens them with
    /// the host identity; none by default: a secret then fails its
    /// promise).
    pub fn with_secrets(mut self, secrets: impl Secrets + 'b) -> Self {
        self.keyring = Box::new(secrets);
        self
    }

    /// The plaintext of secret constant `c`, for a promise whose value is
    /// that constant itself.
    pub fn reveal(&mut self, c: u32) -> Result<std::sync::Arc<SecretText>, String> {
        self.keyring.reveal(self.body, c)
    }

    /// How many sealed keys this run has opened (each at most once).
    pub fn sets_opened(&self) -> usize {
        self.keyring.sets_opened()
    }

    /// The probe facts `probe` instructions read (none by default).
    pub fn with_probes(mut self, probes: &'b dyn ProbeFacts) -> Self {
        self.probes = probes;
        self
    }

    /// Whether the last [`Evaluator::run`] failed because a probe fact it
    /// needs is unknown on this host (LANGUAGE.md section 15): what needs
    /// it is skipped with the reason, never taken as false.
    pub fn failed_on_unknown(&self) -> bool {
        self.unknown
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
        self.unknown_classes.clear();
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
                        set.insert(name.to_string());
                    }
                }
                Err(e) => {
                    // A class defined from a failed class carries the first
                    // reason, not a chain of them.
                    let reason = match e.0.strip_prefix("class `") {
                        Some(_) => e.0,
                        None if self.unknown => format!("class `{name}` is unknown: {}", e.0),
                        None => format!("class `{name}` cannot be evaluated: {}", e.0),
                    };
                    if self.unknown {
                        self.unknown_classes.insert(name.to_string());
                    }
                    self.failed_classes.insert(name.to_string(), reason);
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

    /// Steps left of [`MAX_RUN_STEPS`], to be put back by
    /// [`Evaluator::restore_steps`]: work done again that was charged once.
    pub(crate) fn steps_left(&self) -> u64 {
        self.steps_left
    }

    pub(crate) fn restore_steps(&mut self, left: u64) {
        self.steps_left = left;
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
    /// elements of the promise's run-time loops. A program that reads a
    /// secret fails here: guards, classes, promisers and every attribute
    /// but the few that may hold a secret use this (the verifier refuses
    /// such bundles; this is the second line).
    pub fn run(
        &mut self,
        program: u32,
        classes: &BTreeSet<String>,
        loop_values: &[String],
    ) -> Result<Val, EvalError> {
        match self.run_sink(program, classes, loop_values)? {
            Evaluated::Plain(v) => Ok(v),
            Evaluated::Secret(text) => Err(EvalError(format!(
                "program {program} reads {}, which only the content of a file or a user's password may hold",
                text.label()
            ))),
        }
    }

    /// [`Evaluator::run`] of a value that may hold a secret (`file`
    /// content or template, `user` password): the result of a program that
    /// pushed one is [`Evaluated::Secret`]. When such a program fails, its
    /// reason is not shown (a function's message may quote its argument),
    /// unless it is that a secret could not be opened.
    pub fn run_sink(
        &mut self,
        program: u32,
        classes: &BTreeSet<String>,
        loop_values: &[String],
    ) -> Result<Evaluated, EvalError> {
        self.unknown = false;
        let mut state = RunState {
            program,
            classes,
            loop_values,
            elems: Vec::new(),
            produced: 0,
            executed: 0,
            secrets: BTreeSet::new(),
            unopened: false,
        };
        let result = self.exec(program, &mut state).and_then(|v| {
            v.ok_or_else(|| {
                EvalError(format!(
                    "program {program} gives a missing value (an index that fails on this host)"
                ))
            })
        });
        if state.secrets.is_empty() {
            return result.map(Evaluated::Plain);
        }
        let label = format!(
            "<secret {}>",
            Vec::from_iter(state.secrets.iter().cloned()).join(", ")
        );
        match result {
            Ok(value) => {
                let text = match value {
                    Val::Str(s) => Zeroizing::new(s),
                    other => Zeroizing::new(other.text()),
                };
                Ok(Evaluated::Secret(SecretText::new(state.secrets, text)))
            }
            Err(e) if state.unopened => Err(e),
            Err(_) => Err(EvalError(format!(
                "program {program} fails on a value computed from {label}; the reason is not shown, as it could quote the secret"
            ))),
        }
    }

    /// Executes one program within the run `st`: the program `run` was
    /// called with, or one an `each` runs per element.
    fn exec(&mut self, program: u32, st: &mut RunState<'_>) -> Result<Slot, EvalError> {
        let body = self.body;
        let code = &body
            .programs
            .get(program as usize)
            .ok_or_else(|| EvalError(format!("program {program}")))?
            .code;
        if let Some(result) = self.disjunction(program, st) {
            return result;
        }
        let mut stack: Vec<Slot> = Vec::with_capacity(8);
        for instr in code.iter() {
            self.charge(INSTR_STEPS)?;
            st.executed = st.executed.saturating_add(1);
            if st.executed > MAX_EVAL_STEPS {
                return Err(EvalError(format!(
                    "program {} executes more than {MAX_EVAL_STEPS} instructions (`each` over long lists; docs/bytecode.md, Limits)",
                    st.program
                )));
            }
            // Bytes an instruction reads without pushing them (compared,
            // searched): charged on top of what it pushes.
            let mut examined = 0usize;
            let value: Slot = match *instr {
                Instr::Const(c) => Some(match body.constants.get(c as usize) {
                    Some(Constant::Secret(sealed)) => {
                        let text = self.keyring.reveal(body, c).map_err(|e| {
                            st.unopened = true;
                            EvalError(e)
                        })?;
                        st.secrets.insert(sealed.name.clone());
                        Val::Str(text.expose().to_owned())
                    }
                    Some(Constant::List(l)) => {
                        // Checked before the copy is made.
                        if list_bytes(&l.0) > MAX_EVAL_BYTES.saturating_sub(st.produced) {
                            return Err(st.over_bytes());
                        }
                        Val::List(l.0.clone())
                    }
                    _ => scalar_constant(body, c)?,
                }),
                Instr::Fact(f) => {
                    let Some(spec) = fact_by_id(f) else {
                        return Err(EvalError(format!("fact {f}")));
                    };
                    Some(match self.facts.get(spec.name) {
                        Some(FactValue::Str(s)) => Val::Str(s),
                        Some(FactValue::Int(i)) => Val::Int(i),
                        Some(FactValue::List(l)) => Val::List(l),
                        // A real host knows every fact; a preview may not
                        // be given one: what needs it is unknown.
                        None => {
                            self.unknown = true;
                            return Err(EvalError(format!("fact `{}` is not given", spec.name)));
                        }
                    })
                }
                Instr::Probe(c) => {
                    let Some(Constant::Str(path)) = body.constants.get(c as usize) else {
                        return Err(EvalError(format!("probe constant {c}")));
                    };
                    // The path is walked (and its keys compared) per read.
                    self.charge(u64::try_from(path.len()).unwrap_or(u64::MAX))?;
                    match self.probes.read(path) {
                        Ok(v) if v.bytes() > MAX_EVAL_BYTES.saturating_sub(st.produced) => {
                            return Err(st.over_bytes())
                        }
                        Ok(v) => Some(v),
                        Err(reason) => {
                            self.unknown = true;
                            return Err(EvalError(reason));
                        }
                    }
                }
                Instr::LoopVar(i) => Some(Val::Str(
                    st.loop_values
                        .get(i as usize)
                        .cloned()
                        .ok_or_else(|| EvalError(format!("loop variable {i}")))?,
                )),
                Instr::Class(c) => match body.constants.get(c as usize) {
                    Some(Constant::Word(n) | Constant::Str(n)) => {
                        if let Some(reason) = self.failed_classes.get(n.as_str()) {
                            self.unknown = self.unknown_classes.contains(n.as_str());
                            return Err(EvalError(reason.clone()));
                        }
                        let set = st.classes.contains(n.as_str());
                        if !set {
                            // A hard class from a fact not given (a
                            // preview): neither true nor false.
                            if let Some(reason) = unknown_class(self.facts, n) {
                                self.unknown = true;
                                return Err(EvalError(reason));
                            }
                        }
                        Some(Val::Bool(set))
                    }
                    _ => return Err(EvalError(format!("class constant {c}"))),
                },
                Instr::Elem(d) => {
                    let at = st.elems.len().checked_sub((d as usize).saturating_add(1));
                    Some(Val::Str(
                        at.and_then(|at| st.elems.get(at))
                            .cloned()
                            .ok_or_else(|| EvalError(format!("elem {d} outside `each`")))?,
                    ))
                }
                Instr::Not => match take::<1>(&mut stack)? {
                    None => None,
                    Some([Val::Bool(b)]) => Some(Val::Bool(!b)),
                    Some(other) => return Err(EvalError(format!("not of {other:?}"))),
                },
                Instr::And | Instr::Or => match take::<2>(&mut stack)? {
                    None => None,
                    Some([Val::Bool(a), Val::Bool(b)]) => {
                        Some(Val::Bool(if *instr == Instr::And {
                            a && b
                        } else {
                            a || b
                        }))
                    }
                    Some(other) => return Err(EvalError(format!("boolean operator on {other:?}"))),
                },
                Instr::Eq | Instr::Ne => match take::<2>(&mut stack)? {
                    None => None,
                    Some([a, b]) => {
                        examined = a.bytes().min(b.bytes());
                        Some(Val::Bool((a == b) == (*instr == Instr::Eq)))
                    }
                },
                Instr::Match(c) => match take::<1>(&mut stack)? {
                    None => None,
                    Some([Val::Str(text)]) => {
                        self.charge(text.len() as u64)?;
                        Some(Val::Bool(self.regex(c)?.is_match(&text)))
                    }
                    Some(other) => return Err(EvalError(format!("match on {other:?}"))),
                },
                Instr::In => match take::<2>(&mut stack)? {
                    None => None,
                    Some([Val::Str(v), Val::List(items)]) => {
                        examined = list_bytes(&items);
                        Some(Val::Bool(items.contains(&v)))
                    }
                    Some(other) => return Err(EvalError(format!("in of {other:?}"))),
                },
                Instr::Concat(n) => concat(&mut stack, n as usize)?,
                Instr::Select => match take::<3>(&mut stack)? {
                    None => None,
                    Some([Val::Bool(c), a, b]) => Some(if c { a } else { b }),
                    Some(other) => return Err(EvalError(format!("select on {other:?}"))),
                },
                Instr::Coalesce => {
                    let b = stack.pop().ok_or_else(underflow)?;
                    let a = stack.pop().ok_or_else(underflow)?;
                    a.or(b)
                }
                Instr::Func(f) => {
                    let func = function_by_id(f)
                        .ok_or_else(|| EvalError(format!("unknown function id {f}")))?;
                    match take_n(&mut stack, func.arity())? {
                        None => None,
                        Some(args) => {
                            let left = MAX_EVAL_BYTES.saturating_sub(st.produced);
                            match functions::apply(func, args, left) {
                                Ok(Applied { value, examined: e }) => {
                                    examined = e;
                                    value
                                }
                                Err(FuncError::OverBudget) => return Err(st.over_bytes()),
                                Err(FuncError::Invalid(why)) => return Err(EvalError(why)),
                            }
                        }
                    }
                }
                Instr::Lookup(t) => match take::<1>(&mut stack)? {
                    None => None,
                    Some([Val::Str(key)]) => {
                        let Some(Constant::Table(table)) = body.constants.get(t as usize) else {
                            return Err(EvalError(format!("table constant {t}")));
                        };
                        // A binary search compares the key about log2(n) times.
                        examined = key.len().saturating_mul(
                            (usize::BITS.saturating_sub(table.ends.len().leading_zeros())) as usize,
                        );
                        match table.get(&key) {
                            Some(text) => Some(table_value(table.kind, text)?),
                            None => {
                                return Err(EvalError(format!(
                                    "the key {key:?} is not in table {t}, which has no default"
                                )))
                            }
                        }
                    }
                    Some(other) => return Err(EvalError(format!("lookup of {other:?}"))),
                },
                Instr::Each(q) => match take::<1>(&mut stack)? {
                    None => None,
                    Some([Val::List(items)]) => Some(Val::Str(self.each(program, q, items, st)?)),
                    Some(other) => return Err(EvalError(format!("each over {other:?}"))),
                },
            };
            let bytes = value.as_ref().map_or(0, Val::bytes);
            self.charge((bytes as u64).saturating_add(examined as u64))?;
            st.produced = st.produced.saturating_add(bytes);
            if st.produced > MAX_EVAL_BYTES {
                return Err(st.over_bytes());
            }
            stack.push(value);
        }
        match (stack.pop(), stack.is_empty()) {
            (Some(v), true) => Ok(v),
            _ => Err(EvalError("the program does not leave one value".to_owned())),
        }
    }

    /// Program `program` if it is a disjunction of classes, by set
    /// membership: exactly what the instructions below would give, with the
    /// same steps charged. `None`: run it instruction by instruction (it is
    /// not one, or the run's budgets end within it, where the interpreter
    /// says so at the exact instruction).
    fn disjunction(
        &mut self,
        program: u32,
        st: &mut RunState<'_>,
    ) -> Option<Result<Slot, EvalError>> {
        let len = self.disjunctions.len_of(program)?;
        let within = INSTR_STEPS
            .checked_mul(len as u64)
            .is_some_and(|steps| steps <= self.steps_left)
            && st
                .executed
                .checked_add(len as u64)
                .is_some_and(|n| n <= MAX_EVAL_STEPS);
        if !within {
            return None;
        }
        let outcome =
            self.disjunctions
                .evaluate(program, st.classes, &self.failed_classes, self.facts)?;
        let executed = outcome.executed(len) as u64;
        st.executed = st.executed.saturating_add(executed);
        if let Err(e) = self.charge(INSTR_STEPS.saturating_mul(executed)) {
            return Some(Err(e));
        }
        Some(match outcome {
            Outcome::Holds(b) => Ok(Some(Val::Bool(b))),
            Outcome::Failed { name, .. } => {
                self.unknown = self.unknown_classes.contains(&name);
                let reason = self.failed_classes.get(&name).cloned().unwrap_or_default();
                Err(EvalError(reason))
            }
            Outcome::Unknown { reason, .. } => {
                self.unknown = true;
                Err(EvalError(reason))
            }
        })
    }

    /// `each`: runs program `q` once per element of `items`, with the
    /// element readable by `elem`, and gives the concatenation of the
    /// results. `q` is lower than `caller` (the verifier's rule, checked
    /// again here so that a bypassed verifier cannot make it recurse for
    /// ever), and every result was counted toward the text budget when
    /// the body pushed it, so the concatenation is within it too.
    fn each(
        &mut self,
        caller: u32,
        q: u32,
        items: Vec<String>,
        st: &mut RunState<'_>,
    ) -> Result<String, EvalError> {
        if q >= caller || st.elems.len() >= MAX_EACH_DEPTH {
            return Err(EvalError(format!(
                "each of program {q} from program {caller} at depth {}",
                st.elems.len()
            )));
        }
        let mut out = String::new();
        for item in items {
            st.elems.push(item);
            let result = self.exec(q, st);
            st.elems.pop();
            match result? {
                Some(v @ (Val::Str(_) | Val::Int(_) | Val::Bool(_))) => out.push_str(&v.text()),
                other => {
                    return Err(EvalError(format!(
                        "program {q} run by each gives {other:?}, not a scalar"
                    )))
                }
            }
        }
        Ok(out)
    }

    fn regex(&mut self, c: u32) -> Result<&regex::Regex, EvalError> {
        let Some(Constant::Str(pattern)) = self.body.constants.get(c as usize) else {
            return Err(EvalError(format!("regex constant {c}")));
        };
        self.regexes.get(&c, pattern).map_err(EvalError)
    }
}

/// Constant `c` as a value on the stack: a string, word, int, duration (in
/// seconds) or bool; anything else is not a scalar.
fn scalar_constant(body: &Body, c: u32) -> Result<Val, EvalError> {
    Ok(match body.constants.get(c as usize) {
        Some(Constant::Str(s) | Constant::Word(s)) => Val::Str(s.to_string()),
        Some(Constant::Int(i)) => Val::Int(*i),
        Some(Constant::Duration(s)) => Val::Int(i64::try_from(*s).unwrap_or(i64::MAX)),
        Some(Constant::Bool(b)) => Val::Bool(*b),
        _ => return Err(EvalError(format!("constant {c}"))),
    })
}

/// A value of a table (format 2.3) from its text: a string as it is, an
/// int in decimal, a bool `true`/`false` (the verifier checked each).
fn table_value(kind: u8, text: &str) -> Result<Val, EvalError> {
    use crate::ids::constant_kind;
    match kind {
        constant_kind::STR => Ok(Val::Str(text.to_owned())),
        constant_kind::INT => text
            .parse()
            .map(Val::Int)
            .map_err(|_| EvalError(format!("table int {text:?}"))),
        constant_kind::BOOL => Ok(Val::Bool(text == "true")),
        other => Err(EvalError(format!("table of constant kind {other}"))),
    }
}

fn underflow() -> EvalError {
    EvalError("stack underflow".to_owned())
}

/// Pops the top `n` slots, in stack order; `None` when any is missing (the
/// instruction then pushes missing).
fn take_n(stack: &mut Vec<Slot>, n: usize) -> Result<Option<Vec<Val>>, EvalError> {
    let from = stack.len().checked_sub(n).ok_or_else(underflow)?;
    Ok(stack.split_off(from).into_iter().collect())
}

/// [`take_n`] of a fixed count, as an array to match on, without
/// allocating (most instructions take one or two operands).
fn take<const N: usize>(stack: &mut Vec<Slot>) -> Result<Option<[Val; N]>, EvalError> {
    let from = stack.len().checked_sub(N).ok_or_else(underflow)?;
    let mut slots: [Slot; N] = std::array::from_fn(|_| None);
    for (slot, value) in slots.iter_mut().zip(stack.drain(from..)) {
        *slot = value;
    }
    if slots.iter().any(Option::is_none) {
        return Ok(None);
    }
    // Every slot holds a value (checked above): the default is never used.
    Ok(Some(slots.map(|v| v.unwrap_or(Val::Bool(false)))))
}

/// `concat` of the top `n` slots: their text joined into one string made
/// at its final size, read in place (no copy of each part); missing when
/// any is missing.
fn concat(stack: &mut Vec<Slot>, n: usize) -> Result<Slot, EvalError> {
    let from = stack.len().checked_sub(n).ok_or_else(underflow)?;
    let parts = stack.get(from..).unwrap_or_default();
    let joined = if parts.iter().any(Option::is_none) {
        None
    } else {
        let size = parts
            .iter()
            .flatten()
            .map(|p| match p {
                Val::Str(s) => s.len(),
                _ => 0,
            })
            .fold(0usize, usize::saturating_add);
        let mut out = String::with_capacity(size);
        for part in parts.iter().flatten() {
            match part {
                Val::Str(s) => out.push_str(s),
                other => out.push_str(&other.text()),
            }
        }
        Some(Val::Str(out))
    };
    stack.truncate(from);
    Ok(joined)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    fn body(constants: Vec<Constant>, programs: Vec<Vec<Instr>>) -> Body {
        Body::with_programs(constants, programs)
    }

    fn facts() -> crate::facts::FactMap {
        crate::facts::web01()
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
        let body = body(vec![Constant::Str(mib.into())], vec![bomb, fine]);
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
                Constant::Str("x".repeat(1 << 20).into()),
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

    fn func(name: &str) -> Instr {
        Instr::Func(crate::bundle::functions::function(name).unwrap().id)
    }

    fn list(items: &[&str]) -> Constant {
        Constant::List(
            items
                .iter()
                .map(|s| (*s).to_owned())
                .collect::<Vec<_>>()
                .into(),
        )
    }

    /// Verifies `programs` and runs each, with the test facts, no classes
    /// and loop variable 0 set to `lo`.
    fn run_all(constants: Vec<Constant>, programs: Vec<Vec<Instr>>) -> Vec<Result<Val, EvalError>> {
        let body = body(constants, programs);
        crate::bundle::verify::verify_body(&body).unwrap();
        let facts = facts();
        let mut eval = Evaluator::new(&body, &facts);
        (0..body.programs.len() as u32)
            .map(|p| eval.run(p, &BTreeSet::new(), &["lo".to_owned()]))
            .collect()
    }

    fn str_val(s: &str) -> Result<Val, EvalError> {
        Ok(Val::Str(s.to_owned()))
    }

    /// `select` both ways and over every type; `coalesce` of a present and
    /// of a missing value; a missing `index` propagated through `upper`,
    /// `eq`, `not` and `concat` until `coalesce` replaces it.
    #[test]
    fn select_coalesce_and_missing_values() {
        use Instr::*;
        let constants = vec![
            Constant::Bool(true),
            Constant::Bool(false),
            Constant::Str("yes".into()),
            Constant::Str("no".into()),
            list(&["a", "b"]),
            Constant::Int(5),
            Constant::Int(-1),
            Constant::Str("FALLBACK".into()),
            Constant::Int(0),
        ];
        let results = run_all(
            constants,
            vec![
                vec![Const(0), Const(2), Const(3), Select],
                vec![Const(1), Const(2), Const(3), Select],
                vec![
                    Const(1),
                    Const(4),
                    Const(4),
                    Select,
                    Const(2),
                    func("contains_list"),
                ],
                vec![Const(0), Const(5), Const(6), Select],
                // index 5 of ["a","b"]: missing, through upper, to the fallback.
                vec![
                    Const(4),
                    Const(5),
                    func("index"),
                    func("upper"),
                    Const(7),
                    Coalesce,
                ],
                // index 1: present, upper-cased; the fallback is not used.
                vec![
                    Const(4),
                    Const(0),
                    Const(5),
                    Const(8),
                    Select,
                    func("index"),
                    Const(7),
                    Coalesce,
                ],
                vec![Const(4), Const(8), func("index"), Const(7), Coalesce],
                // missing through eq and not: coalesced to true.
                vec![
                    Const(4),
                    Const(6),
                    func("index"),
                    Const(2),
                    Eq,
                    Not,
                    Const(0),
                    Coalesce,
                ],
                // missing through concat and the condition of select.
                vec![
                    Const(2),
                    Const(4),
                    Const(6),
                    func("index"),
                    Concat(2),
                    Const(3),
                    Coalesce,
                ],
            ],
        );
        assert_eq!(
            results,
            vec![
                str_val("yes"),
                str_val("no"),
                Ok(Val::Bool(false)),
                Ok(Val::Int(5)),
                str_val("FALLBACK"),
                str_val("FALLBACK"),
                str_val("a"),
                Ok(Val::Bool(true)),
                str_val("no"),
            ]
        );
    }

    /// `index` with a computed index, into a list made on the host.
    #[test]
    fn functions_compose_over_facts() {
        use Instr::*;
        let results = run_all(
            vec![
                Constant::Str(" | ".into()),
                Constant::Str(".".into()),
                Constant::Int(0),
                list(&["10.0.0.2", "192.168.1.1"]),
            ],
            vec![
                vec![
                    Fact(fact("sys.ipv4")),
                    Const(3),
                    func("concat"),
                    func("sort"),
                    func("unique"),
                    Const(0),
                    func("join"),
                ],
                vec![
                    Fact(fact("sys.fqdn")),
                    Const(1),
                    func("split"),
                    Const(2),
                    func("index"),
                    Const(1),
                    Coalesce,
                    func("upper"),
                ],
                vec![
                    Fact(fact("sys.ipv4")),
                    Const(3),
                    func("concat"),
                    func("len_list"),
                    func("to_string"),
                ],
                vec![Fact(fact("sys.hostname")), Const(3), In],
            ],
        );
        assert_eq!(
            results,
            vec![
                str_val("10.0.0.1 | 10.0.0.2 | 192.168.1.1"),
                str_val("WEB01"),
                str_val("4"),
                Ok(Val::Bool(false)),
            ]
        );
    }

    /// `each` renders a list through a lower program; nested `each` reads
    /// the outer element with `elem 1`; an empty list renders nothing; a
    /// body sees the promise's loop variables; a missing list is missing.
    #[test]
    fn each_and_elem() {
        use Instr::*;
        let constants = vec![
            list(&["x", "y"]),
            list(&["1", "2"]),
            Constant::Str(";".into()),
            list(&[]),
            Constant::Str("empty".into()),
            Constant::Int(9),
            Constant::Str("=".into()),
        ];
        let results = run_all(
            constants,
            vec![
                // p0: elem 1 + elem 0 + ";"
                vec![Elem(1), Elem(0), Const(2), Concat(3)],
                // p1: each p0 over ["1","2"]
                vec![Const(1), Each(0)],
                // p2: the body of a one-level each, with the loop variable.
                vec![LoopVar(0), Const(6), Elem(0), Const(2), Concat(4)],
                // p3: nested: for a in [x,y] { for b in [1,2] { a b ; } }
                vec![Const(0), Each(1)],
                // p4: each over an empty list gives "".
                vec![Const(3), Each(2)],
                // p5: each over a fact.
                vec![Fact(fact("sys.ipv4")), Each(2)],
                // p6: each over a missing list (the split of index 9) is
                // missing; coalesced.
                vec![
                    Const(0),
                    Const(5),
                    func("index"),
                    Const(2),
                    func("split"),
                    Each(2),
                    Const(4),
                    Coalesce,
                ],
            ],
        );
        assert!(results[0].is_err() && results[1].is_err() && results[2].is_err());
        assert_eq!(
            results[3..].to_vec(),
            vec![
                str_val("x1;x2;y1;y2;"),
                str_val(""),
                str_val("lo=10.0.0.1;lo=10.0.0.2;"),
                str_val("empty"),
            ]
        );
    }

    /// `each` nested as deep as the verifier allows (16) runs, and the
    /// innermost body reads the outermost element with `elem 15`.
    #[test]
    fn each_at_the_nesting_limit_reads_every_level() {
        use Instr::*;
        let mut constants: Vec<Constant> = (0..16).map(|k| list(&[&format!("L{k}")])).collect();
        constants.push(Constant::Str("/".into()));
        let mut programs = vec![vec![
            Elem(15),
            Const(16),
            Elem(7),
            Const(16),
            Elem(0),
            Concat(5),
        ]];
        // p(k+1) runs p(k) over the list of level 15 - k: p16 is outermost.
        for k in 0..16u32 {
            programs.push(vec![Const(15 - k), Each(k)]);
        }
        let results = run_all(constants, programs);
        assert_eq!(results.last().unwrap(), &str_val("L0/L8/L15"));
    }

    /// Errors of a program run are the reason, never a panic.
    #[test]
    fn function_errors_fail_the_run_with_their_reason() {
        use Instr::*;
        let results = run_all(
            vec![Constant::Str("a,b".into()), Constant::Str("".into())],
            vec![
                vec![Const(0), Const(1), func("split"), Const(1), func("join")],
                vec![Const(0), Const(1), Const(0), func("replace")],
            ],
        );
        let reasons: Vec<String> = results
            .into_iter()
            .map(|r| r.unwrap_err().to_string())
            .collect();
        assert_eq!(
            reasons[0],
            "cannot evaluate: `split` with an empty separator"
        );
        assert!(
            reasons[1].contains("`replace` of an empty string"),
            "{}",
            reasons[1]
        );
    }

    /// What `each` produces counts toward the text budget: each result as
    /// its body pushes it, and their concatenation (like `concat`).
    #[test]
    fn each_output_counts_toward_the_text_budget() {
        use Instr::*;
        let items = vec![""; 300];
        let results = run_all(
            vec![
                Constant::Str("x".repeat(1 << 20).into()),
                list(&items),
                list(&items[..100]),
            ],
            vec![
                vec![Const(0)],
                vec![Const(1), Each(0)],
                vec![Const(2), Each(0)],
            ],
        );
        let err = results[1].clone().unwrap_err();
        assert!(
            err.0.contains("program 1 produces more than 256 MiB"),
            "{err}"
        );
        assert!(matches!(&results[2], Ok(Val::Str(s)) if s.len() == 100 << 20));
    }

    /// Nested `each` over lists of a thousand elements asks for a hundred
    /// million instructions; the run stops at [`MAX_EVAL_STEPS`].
    #[test]
    fn nested_each_stops_at_the_instruction_budget() {
        use Instr::*;
        let items = vec![""; 1024];
        let mut inner = vec![Const(1)];
        inner.extend(std::iter::repeat_n(Not, 98));
        inner.push(func("to_string"));
        let results = run_all(
            vec![list(&items), Constant::Bool(true), list(&items[..16])],
            vec![
                inner,
                vec![Const(0), Each(0)],
                vec![Const(0), Each(1)],
                // 16 x 1024 x 100 instructions: within the budget.
                vec![Const(2), Each(1)],
            ],
        );
        let err = results[2].clone().unwrap_err();
        assert!(
            err.0
                .contains("program 2 executes more than 16777216 instructions"),
            "{err}"
        );
        assert!(matches!(&results[3], Ok(Val::Str(s)) if s.len() == 16 * 1024 * 4));
    }

    /// A table (format 2.3) of kind `kind`: `(key, value text)` entries.
    fn table(kind: u8, entries: &[(&str, &str)], default: Option<&str>) -> Constant {
        Constant::Table(Box::new(crate::bundle::format::Table::new(
            kind,
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            default.map(str::to_owned),
        )))
    }

    /// `lookup` (format 2.3): the entry of the host's key, found by binary
    /// search among many; the default for another key; a string, an int, a
    /// bool; without a default, another key fails the
    /// program with the key named; a missing key stays missing.
    #[test]
    fn lookup_finds_the_key_or_the_default() {
        use Instr::*;
        let host = Fact(fact("sys.hostname"));
        // 4 a table of 1,000 keys around "web01" (the test host); 5 the
        // same keys without "web01"; 6 no default; 7 ints; 8 bools; 9 a
        // list, 10 the fallback string.
        let mut keys: Vec<String> = (0..1000).map(|i| format!("host{i:04}")).collect();
        keys.push("web01".into());
        keys.push("web010".into());
        keys.sort();
        use crate::ids::constant_kind::{BOOL, INT, STR};
        let entries: Vec<(&str, &str)> = keys
            .iter()
            .map(|k| (k.as_str(), if k == "web01" { "mine" } else { "theirs" }))
            .collect();
        let without: Vec<(&str, &str)> = entries
            .iter()
            .copied()
            .filter(|(k, _)| *k != "web01")
            .collect();
        let constants = vec![
            Constant::Str("mine".into()),
            Constant::Word("theirs".into()),
            Constant::Int(8080),
            Constant::Bool(true),
            table(STR, &entries, Some("theirs")),
            table(STR, &without, Some("theirs")),
            table(STR, &without, None),
            table(INT, &[("a", "1"), ("web01", "8080")], Some("2")),
            table(BOOL, &[("web01", "true")], Some("false")),
            list(&["a", "b"]),
            Constant::Str("FALLBACK".into()),
        ];
        let results = run_all(
            constants,
            vec![
                vec![host, Lookup(4)],
                vec![host, Lookup(5)],
                vec![host, Lookup(6)],
                vec![host, Lookup(7)],
                vec![host, Lookup(8)],
                // index 8080 of a two-element list: missing, looked up
                // (missing), coalesced.
                vec![
                    Const(9),
                    Const(2),
                    func("index"),
                    Lookup(4),
                    Const(10),
                    Coalesce,
                ],
            ],
        );
        assert_eq!(
            results,
            vec![
                str_val("mine"),
                str_val("theirs"),
                Err(EvalError(
                    "the key \"web01\" is not in table 6, which has no default".into()
                )),
                Ok(Val::Int(8080)),
                Ok(Val::Bool(true)),
                str_val("FALLBACK"),
            ]
        );
    }

    /// A lookup is charged for the comparisons of its binary search: the
    /// key's length times the search's depth, on top of the instruction.
    #[test]
    fn lookup_is_charged_for_its_search() {
        use Instr::*;
        let keys: Vec<String> = (0..1023).map(|i| format!("h{i:04}")).collect();
        let entries: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "v")).collect();
        let body = body(
            vec![
                Constant::Str("v".into()),
                table(crate::ids::constant_kind::STR, &entries, Some("v")),
            ],
            vec![vec![Fact(fact("sys.hostname")), Lookup(1)]],
        );
        crate::bundle::verify::verify_body(&body).unwrap();
        let facts = facts();
        let mut eval = Evaluator::new(&body, &facts);
        assert_eq!(eval.run(0, &BTreeSet::new(), &[]), Ok(Val::Str("v".into())));
        // 2 instructions; "web01" pushed (5), 5 bytes times 10 levels
        // examined, "v" pushed (1).
        assert_eq!(eval.steps_used(), 2 * INSTR_STEPS + 5 + 50 + 1);
    }
}
