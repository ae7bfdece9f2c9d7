//! Probes (format 2.3, LANGUAGE.md section 15): the typed host facts a
//! policy declares with `fact NAME: TYPE from [argv] timeout 5s;` or
//! `fact NAME: TYPE from file "PATH";`, which the VM gathers before it
//! evaluates classes and programs read as `facts.NAME`.
//!
//! A bundle carries each declaration as a constant of kind `probe` (the
//! probe table is every such constant, in pool order) and reads a value
//! with the `probe` instruction, whose operand is a string constant naming
//! the probe and, for a record or map, the fields and keys down to a
//! scalar or a list: `datacenter`, `hw.cpus`, `labels.role`. Types are
//! written in one canonical text form ([`ProbeType`]), so that the bundle
//! stays a flat, non-recursive structure and the disassembler prints what
//! the verifier checked.
//!
//! The limits here are the format's (`docs/bytecode.md`, "Limits"); the
//! checks of T32 (ownership and modes of the program or file) are the VM's
//! (`vm/src/probes/`).

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::format::List;
use super::verify::Ty;
use super::wire::{read_payload, read_tag, refuse, write_tagged, TAGGED_LEN};
use crate::ids::probe_source;
use crate::paths::path_problem;

/// The deadline of a probe that declares none.
pub const DEFAULT_TIMEOUT_SECS: u64 = 10;
/// The longest deadline a probe may declare: probes run before every run,
/// one after the other, and a run must not wait minutes for its facts.
pub const MAX_TIMEOUT_SECS: u64 = 60;
/// The most a probe may print (or a fact file hold): more is refused, not
/// cut, since a cut value would be a wrong value.
pub const MAX_PROBE_OUTPUT: usize = 64 * 1024;
/// The most time all the probes of one run may take together: 256 probes
/// of 60s each would otherwise hold a run for hours (THREATS.md T14). A
/// probe is given what is left of it when less than its own timeout, and
/// one that would start with nothing left is not run (its fact unknown).
pub const MAX_PROBES_TOTAL_SECS: u64 = 120;
/// The most probes one bundle may declare.
pub const MAX_PROBES: usize = 256;
/// The most words of one probe's argv.
pub const MAX_ARGV: usize = 64;
/// The deepest nest of maps and records in a probe's type.
pub const MAX_TYPE_DEPTH: usize = 8;
/// The longest type text.
pub const MAX_TYPE_TEXT: usize = 4096;

/// One probe declaration: a constant of kind `probe`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Probe {
    /// The fact's name, read as `facts.NAME`: an identifier.
    pub name: String,
    /// Its type, in the canonical text of [`ProbeType`].
    pub ty: String,
    pub source: ProbeSource,
    /// The deadline, in seconds: `1..=MAX_TIMEOUT_SECS`.
    pub timeout_secs: u64,
}

/// Where a probe's value comes from. On the wire: its tag
/// ([`probe_source`]), then the argv or the path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProbeSource {
    /// A program and its arguments, run without a shell; its standard
    /// output is the value.
    Program(List<String>),
    /// A file whose content is the value.
    File(String),
}

impl Probe {
    /// Why this declaration cannot be run, if it cannot: the name, the
    /// type, the argv or path, and the deadline, each against its rule.
    pub fn problem(&self) -> Option<String> {
        if !is_identifier(&self.name) {
            return Some(format!("the name {:?} is not an identifier", self.name));
        }
        if let Err(e) = ProbeType::parse(&self.ty) {
            return Some(format!("the type {:?}: {e}", self.ty));
        }
        if self.timeout_secs == 0 || self.timeout_secs > MAX_TIMEOUT_SECS {
            return Some(format!(
                "a timeout of {}s is outside 1s..={MAX_TIMEOUT_SECS}s",
                self.timeout_secs
            ));
        }
        match &self.source {
            ProbeSource::Program(argv) => {
                let Some(program) = argv.get(0) else {
                    return Some("the argv is empty".to_owned());
                };
                if argv.len() > MAX_ARGV {
                    return Some(format!(
                        "{} words of argv, more than {MAX_ARGV}",
                        argv.len()
                    ));
                }
                if let Some(why) = path_problem(program) {
                    return Some(format!("the program {program:?}: {why}"));
                }
                if let Some(word) = argv.iter().find(|w| w.contains('\0')) {
                    return Some(format!("the argument {word:?} contains a NUL character"));
                }
                None
            }
            ProbeSource::File(path) => {
                path_problem(path).map(|why| format!("the file {path:?}: {why}"))
            }
        }
    }

    /// The program or file, as the disassembler and reports show it.
    pub fn describe_source(&self) -> String {
        match &self.source {
            ProbeSource::Program(argv) => format!("{:?}", argv.0),
            ProbeSource::File(path) => format!("file {path:?}"),
        }
    }
}

/// Whether `s` is a name of the language: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The type of a probe fact. Its canonical text, the only one the format
/// accepts: `string`, `int`, `bool`, `list<string>` (a list of strings,
/// one per line of output), `map<T>` (a JSON object of `T` by string key),
/// `{name:T,other:T}` (a JSON object with exactly those fields, in
/// declaration order), with no spaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeType {
    Str,
    Int,
    Bool,
    List,
    Map(Box<ProbeType>),
    Record(Vec<(String, ProbeType)>),
}

impl ProbeType {
    /// Parses the canonical text; anything else is refused with the reason.
    pub fn parse(text: &str) -> Result<ProbeType, String> {
        if text.len() > MAX_TYPE_TEXT {
            return Err(format!("longer than {MAX_TYPE_TEXT} bytes"));
        }
        let mut p = TypeParser { rest: text };
        let ty = p.ty(0)?;
        if !p.rest.is_empty() {
            return Err(format!("unexpected {:?} after the type", p.rest));
        }
        Ok(ty)
    }

    /// The stack type of a value of this type, for a scalar or a list; a
    /// map or record is never pushed whole.
    pub fn stack_ty(&self) -> Option<Ty> {
        match self {
            ProbeType::Str => Some(Ty::Str),
            ProbeType::Int => Some(Ty::Int),
            ProbeType::Bool => Some(Ty::Bool),
            ProbeType::List => Some(Ty::List),
            ProbeType::Map(_) | ProbeType::Record(_) => None,
        }
    }

    /// The type found by following `path` (fields of records, keys of
    /// maps) from this one.
    pub fn at(&self, path: &[&str]) -> Result<&ProbeType, String> {
        let mut ty = self;
        for step in path {
            ty = match ty {
                ProbeType::Map(inner) => inner,
                ProbeType::Record(fields) => fields
                    .iter()
                    .find(|(name, _)| name == step)
                    .map(|(_, t)| t)
                    .ok_or_else(|| format!("the record has no field `{step}`"))?,
                other => return Err(format!("a {other} has no field `{step}`")),
            };
        }
        Ok(ty)
    }
}

impl fmt::Display for ProbeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeType::Str => f.write_str("string"),
            ProbeType::Int => f.write_str("int"),
            ProbeType::Bool => f.write_str("bool"),
            ProbeType::List => f.write_str("list<string>"),
            ProbeType::Map(inner) => write!(f, "map<{inner}>"),
            ProbeType::Record(fields) => {
                f.write_str("{")?;
                for (i, (name, ty)) in fields.iter().enumerate() {
                    if i > 0 {
                        f.write_str(",")?;
                    }
                    write!(f, "{name}:{ty}")?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A recursive-descent parser of the canonical type text, at most
/// [`MAX_TYPE_DEPTH`] deep.
struct TypeParser<'t> {
    rest: &'t str,
}

impl TypeParser<'_> {
    fn eat(&mut self, s: &str) -> bool {
        match self.rest.strip_prefix(s) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn ty(&mut self, depth: usize) -> Result<ProbeType, String> {
        if depth > MAX_TYPE_DEPTH {
            return Err(format!("nested deeper than {MAX_TYPE_DEPTH}"));
        }
        if self.eat("string") {
            return Ok(ProbeType::Str);
        }
        if self.eat("int") {
            return Ok(ProbeType::Int);
        }
        if self.eat("bool") {
            return Ok(ProbeType::Bool);
        }
        if self.eat("list<string>") {
            return Ok(ProbeType::List);
        }
        if self.eat("map<") {
            let inner = self.ty(depth.saturating_add(1))?;
            if !self.eat(">") {
                return Err("`map<` without its `>`".to_owned());
            }
            return Ok(ProbeType::Map(Box::new(inner)));
        }
        if self.eat("{") {
            let mut fields: Vec<(String, ProbeType)> = Vec::new();
            loop {
                let end = self
                    .rest
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(self.rest.len());
                let name = self.rest.get(..end).unwrap_or_default().to_owned();
                self.rest = self.rest.get(end..).unwrap_or_default();
                if !is_identifier(&name) {
                    return Err("a record field without a name".to_owned());
                }
                if fields.iter().any(|(n, _)| *n == name) {
                    return Err(format!("the field `{name}` twice"));
                }
                if !self.eat(":") {
                    return Err(format!("the field `{name}` without `:`"));
                }
                let ty = self.ty(depth.saturating_add(1))?;
                fields.push((name, ty));
                if self.eat("}") {
                    return Ok(ProbeType::Record(fields));
                }
                if !self.eat(",") {
                    return Err("a record without its `}`".to_owned());
                }
            }
        }
        Err(format!("not a probe type: {:?}", self.rest))
    }
}

impl Serialize for ProbeSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            ProbeSource::Program(argv) => write_tagged(s, probe_source::PROGRAM, Some(argv)),
            ProbeSource::File(path) => write_tagged(s, probe_source::FILE, Some(path)),
        }
    }
}

impl<'de> Deserialize<'de> for ProbeSource {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct SourceVisitor;
        impl<'de> Visitor<'de> for SourceVisitor {
            type Value = ProbeSource;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a probe source")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<ProbeSource, A::Error> {
                const WHAT: &str = "a probe source";
                Ok(match read_tag(&mut seq, WHAT)? {
                    probe_source::PROGRAM => ProbeSource::Program(read_payload(&mut seq, WHAT)?),
                    probe_source::FILE => ProbeSource::File(read_payload(&mut seq, WHAT)?),
                    other => return Err(refuse(format!("unknown probe source kind {other}"))),
                })
            }
        }
        deserializer.deserialize_tuple(TAGGED_LEN, SourceVisitor)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    fn probe(source: ProbeSource) -> Probe {
        Probe {
            name: "dc".into(),
            ty: "string".into(),
            source,
            timeout_secs: 5,
        }
    }

    #[test]
    fn types_round_trip_through_their_canonical_text() {
        for text in [
            "string",
            "int",
            "bool",
            "list<string>",
            "map<int>",
            "map<list<string>>",
            "{cpus:int,model:string,tags:map<string>}",
            "{a:{b:{c:bool}}}",
        ] {
            let ty = ProbeType::parse(text).unwrap();
            assert_eq!(ty.to_string(), text);
        }
    }

    #[test]
    fn malformed_types_are_refused_with_the_reason() {
        for (text, why) in [
            ("", "not a probe type"),
            ("list<int>", "not a probe type"),
            ("map<int", "without its `>`"),
            ("{}", "without a name"),
            ("{a:int,a:int}", "the field `a` twice"),
            ("{a int}", "without `:`"),
            ("{a:int", "without its `}`"),
            ("string ", "after the type"),
            (&"map<".repeat(20), "nested deeper"),
        ] {
            let err = ProbeType::parse(text).unwrap_err();
            assert!(err.contains(why), "{text:?}: {err}");
        }
    }

    #[test]
    fn paths_follow_records_and_maps_to_their_leaves() {
        let ty = ProbeType::parse("{hw:{cpus:int},labels:map<string>}").unwrap();
        assert_eq!(ty.at(&["hw", "cpus"]).unwrap(), &ProbeType::Int);
        assert_eq!(ty.at(&["labels", "anything"]).unwrap(), &ProbeType::Str);
        assert!(ty
            .at(&["hw", "ram"])
            .unwrap_err()
            .contains("no field `ram`"));
        assert!(ty
            .at(&["hw", "cpus", "x"])
            .unwrap_err()
            .contains("a int has no field"));
        assert_eq!(ty.at(&["hw"]).unwrap().stack_ty(), None);
    }

    #[test]
    fn declarations_are_checked_against_every_rule() {
        let ok = probe(ProbeSource::Program(vec!["/usr/lib/p".to_owned()].into()));
        assert_eq!(ok.problem(), None);
        let cases: Vec<(Probe, &str)> = vec![
            (
                Probe {
                    name: "1x".into(),
                    ..ok.clone()
                },
                "not an identifier",
            ),
            (
                Probe {
                    ty: "float".into(),
                    ..ok.clone()
                },
                "not a probe type",
            ),
            (
                Probe {
                    timeout_secs: 0,
                    ..ok.clone()
                },
                "outside 1s..=60s",
            ),
            (
                Probe {
                    timeout_secs: MAX_TIMEOUT_SECS + 1,
                    ..ok.clone()
                },
                "outside",
            ),
            (
                probe(ProbeSource::Program(Vec::new().into())),
                "argv is empty",
            ),
            (
                probe(ProbeSource::Program(vec!["sh".to_owned()].into())),
                "not absolute",
            ),
            (
                probe(ProbeSource::Program(
                    vec!["/bin/p".to_owned(), "a\0b".to_owned()].into(),
                )),
                "NUL",
            ),
            (
                probe(ProbeSource::Program(
                    vec!["/bin/p".to_owned(); MAX_ARGV + 1].into(),
                )),
                "words of argv",
            ),
            (probe(ProbeSource::File("/etc/../x".into())), "`..`"),
        ];
        for (p, why) in cases {
            let problem = p.problem().unwrap_or_default();
            assert!(problem.contains(why), "{p:?}: {problem}");
        }
    }
}
