//! A test of a `*.test.policy` file after checking ([`super::sema`]): the
//! facts and classes of the host it describes and what it expects, in the
//! terms the evaluator and the resolved promises use.

use std::path::PathBuf;

use converge_eval::facts::FactMap;
use converge_eval::sources::ProbeMap;
use converge_grammar::Span;

/// One `test "name" { ... }`.
#[derive(Debug)]
pub struct TestCase {
    pub name: String,
    /// The test file, as diagnostics name it (`tests/web.test.policy`).
    pub file: String,
    /// The line the test starts on.
    pub line: usize,
    pub span: Span,
    /// The `sys.` facts given (the others are unknown).
    pub facts: FactMap,
    /// The probe facts given (`facts.NAME`), by path.
    pub probes: ProbeMap,
    /// The classes of `define [...]`.
    pub defines: Vec<String>,
    /// `root = "fixtures/web"`, resolved against the test file's directory.
    pub root: Option<PathBuf>,
    pub expectations: Vec<Expectation>,
}

impl TestCase {
    /// `tests/web.test.policy:12`.
    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// One `expect` (or `expect no`) statement.
#[derive(Debug)]
pub struct Expectation {
    /// `expect no`: no active promise may match.
    pub absent: bool,
    pub kind: &'static str,
    pub promiser: String,
    pub checks: Vec<Check>,
    /// `file.test.policy:14`.
    pub location: String,
}

impl Expectation {
    /// `file "/etc/motd"`, as output names it.
    pub fn describe(&self) -> String {
        format!("{} {:?}", self.kind, self.promiser)
    }
}

/// One line of an expectation's block.
#[derive(Debug)]
pub enum Check {
    /// `attr = value;`: the resolved value (or the attribute's default when
    /// the promise does not set it) equals this.
    Equals {
        attr: &'static str,
        value: Expected,
        /// The attribute's default, compared when the promise does not set
        /// it; `None`: not set means not managed.
        default: Option<Expected>,
    },
    /// `contains = "...";`: the content (rendered template included)
    /// contains this text.
    Contains { attr: &'static str, text: String },
    /// `matches = r"...";`: the content matches this regular expression.
    Matches {
        attr: &'static str,
        pattern: String,
        regex: regex::Regex,
    },
}

/// A value an expectation compares with, as the resolved promise holds it:
/// words and strings are text, modes and durations numbers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    Text(String),
    Int(i64),
    Bool(bool),
    List(Vec<String>),
}

impl Expected {
    /// How the value is shown in a failure, as a policy would write it.
    pub fn show(&self) -> String {
        match self {
            Expected::Text(s) => format!("{s:?}"),
            Expected::Int(i) => i.to_string(),
            Expected::Bool(b) => b.to_string(),
            Expected::List(l) => format!("{l:?}"),
        }
    }
}
