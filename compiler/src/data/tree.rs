//! The one representation of a parsed data file: a small tree of values,
//! each with its span in the data file. The TOML, YAML and JSON readers each
//! build it; one checker (`check.rs`) compares it with the declared type.

use converge_grammar::Span;

/// A value read from a data file, with where it was written.
#[derive(Clone, Debug, PartialEq)]
pub struct DataValue {
    pub kind: DataKind,
    pub span: Span,
}

/// One entry of a map: the key, where the key was written, and the value.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub key: String,
    pub key_span: Span,
    pub value: DataValue,
}

/// What a value is, independent of the format it came from.
#[derive(Clone, Debug, PartialEq)]
pub enum DataKind {
    Str(String),
    /// An integer; `None` when it does not fit in 64 bits (reported by the
    /// checker, where the expected type is known). `octal` when it was
    /// written `0o...` (what a `mode` accepts without quotes).
    Int {
        value: Option<i64>,
        octal: bool,
    },
    /// Refused by the checker (the language has no float type); kept as
    /// written for the message.
    Float(String),
    Bool(bool),
    /// YAML `~`/`null`/an empty value, JSON `null`.
    Null,
    /// A TOML date or time, kept as written (refused like floats).
    Datetime(String),
    List(Vec<DataValue>),
    /// Entries in file order; keys are unique (each reader reports a
    /// duplicate key before building the map).
    Map(Vec<Entry>),
}

impl DataKind {
    /// How a value is named in "expected X, found Y".
    pub fn describe(&self) -> String {
        match self {
            DataKind::Str(s) => format!("string {}", quote_short(s)),
            DataKind::Int { value: Some(v), .. } => format!("int {v}"),
            DataKind::Int { value: None, .. } => "an integer outside the 64-bit range".to_owned(),
            DataKind::Float(f) => format!("float {f}"),
            DataKind::Bool(b) => format!("bool {b}"),
            DataKind::Null => "null".to_owned(),
            DataKind::Datetime(d) => format!("date/time {d}"),
            DataKind::List(_) => "a list".to_owned(),
            DataKind::Map(_) => "a map".to_owned(),
        }
    }
}

/// A string quoted for a message, cut after 40 characters.
fn quote_short(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        format!("{s:?}")
    } else {
        let head: String = s.chars().take(MAX).collect();
        format!("{:?}...", head)
    }
}

/// How deeply lists and maps may nest in a data file. Deeper input is a
/// syntax error rather than a tree whose walk could exhaust the stack.
pub const MAX_DEPTH: usize = 128;

/// How many values one data file may hold, counting every copy a YAML alias
/// makes: a few kilobytes of nested aliases (the "billion laughs") would
/// otherwise expand to billions of values.
pub const MAX_VALUES: usize = 2_000_000;
