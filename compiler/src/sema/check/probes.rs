//! Probe facts (LANGUAGE.md section 15): `fact NAME: TYPE from [argv]
//! timeout 5s;` and `fact NAME: TYPE from file "PATH";` declarations, and
//! reads of them as `facts.NAME` (a record's fields and a map's keys
//! follow: `facts.hw.cpus`, `facts.labels.role`).
//!
//! A declaration is checked once, where it is written: its type must be
//! one the VM can parse from a probe's output ([`probe_type`]), its argv
//! plain strings whose program is an absolute policy path (as a file
//! promiser is), its file path likewise, its timeout a duration within the
//! format's cap. What it yields is the format's own [`Probe`] record,
//! which expansion hands to the bundle writer unchanged. A read resolves
//! like a `sys.*` fact, typed by the declaration; it must end at a scalar
//! or a list, the values the VM computes with.

use converge_format::bundle::probe::{
    Probe, ProbeSource, ProbeType, DEFAULT_TIMEOUT_SECS, MAX_TIMEOUT_SECS,
};
use converge_format::paths::path_problem;
use converge_grammar::ast::{ExprKind, FactDef, FactSource, Ident};
use converge_grammar::token::StrLit;
use converge_grammar::Span;

use super::Checker;
use crate::diagnostic::{with_article, Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::sema::types::Type;
use crate::suggest::did_you_mean;

/// A checked probe declaration: its type in the checker's terms (what
/// reads are typed by) and the bundle's record of it.
#[derive(Clone, Debug)]
pub struct CheckedFact {
    pub ty: Type,
    pub probe: Probe,
    /// The probe's type, as the VM parses it.
    pub probe_type: ProbeType,
}

impl<'a> Checker<'a> {
    /// Checks every `fact` declaration, in definition order.
    pub(super) fn check_facts(&mut self) {
        for (name, def) in self.symbols.facts.defs.clone() {
            if let Some(checked) = self.check_fact(def) {
                self.facts.push((name.to_owned(), checked));
            }
        }
    }

    fn check_fact(&mut self, def: &'a FactDef) -> Option<CheckedFact> {
        let ty = self.resolve_type(&def.ty);
        let probe_type = match ty.as_ref().map(probe_type) {
            Some(Ok(t)) => Some(t),
            Some(Err(why)) => {
                self.push(
                    Diagnostic::new(
                        Code::InvalidProbe,
                        format!("a probe fact cannot be {}", with_article(&why)),
                        def.ty.span,
                        "not a type a probe's output is parsed as",
                    )
                    .with_help("use string, int, bool, list<string>, map<string, T> or a record type whose fields are such types and have no default"),
                );
                None
            }
            None => None,
        };
        let timeout = self.fact_timeout(def);
        let source = match &def.source {
            FactSource::Program { argv, span } => self
                .fact_argv(argv, *span)
                .map(|argv| ProbeSource::Program(argv.into())),
            FactSource::File { path, .. } => self
                .fact_path(&path.0, path.1, "the file a fact is read from")
                .map(ProbeSource::File),
        };
        let (ty, probe_type, timeout_secs, source) = (ty?, probe_type?, timeout?, source?);
        Some(CheckedFact {
            ty,
            probe: Probe {
                name: def.name.name.to_string(),
                ty: probe_type.to_string(),
                source,
                timeout_secs,
            },
            probe_type,
        })
    }

    /// `timeout 5s`: a duration from 1 s to the format's cap; none is the
    /// default.
    fn fact_timeout(&mut self, def: &FactDef) -> Option<u64> {
        let Some(expr) = &def.timeout else {
            return Some(DEFAULT_TIMEOUT_SECS);
        };
        match expr.kind {
            ExprKind::Duration(secs) if (1..=MAX_TIMEOUT_SECS).contains(&secs) => Some(secs),
            ExprKind::Duration(secs) => {
                let mut d = Diagnostic::new(
                    Code::InvalidProbe,
                    format!("a probe timeout of {secs}s is outside 1s..{MAX_TIMEOUT_SECS}s"),
                    expr.span,
                    "out of range",
                );
                if secs > MAX_TIMEOUT_SECS {
                    d = d
                        .with_note("probes run before every run, one after the other")
                        .with_help(format!("a probe that needs more than {MAX_TIMEOUT_SECS}s should write a fact file from a timer, read with `from file`"));
                }
                self.push(d);
                None
            }
            _ => {
                self.push(
                    Diagnostic::new(
                        Code::InvalidProbe,
                        "a probe timeout must be a duration",
                        expr.span,
                        "not a duration",
                    )
                    .with_help("write it with its unit: `timeout 5s`"),
                );
                None
            }
        }
    }

    /// The argv of `from [...]`: plain strings, at least the program,
    /// which must be an absolute policy path.
    fn fact_argv(&mut self, argv: &[(StrLit, Span)], span: Span) -> Option<Vec<String>> {
        let Some(((program, program_span), args)) = argv.split_first() else {
            self.push(
                Diagnostic::new(
                    Code::InvalidProbe,
                    "a probe needs a program to run",
                    span,
                    "empty argv",
                )
                .with_help("name the program by its absolute path: `from [\"/usr/local/lib/converge/probes/datacenter\"]`"),
            );
            return None;
        };
        let mut words = vec![self.fact_path(program, *program_span, "a probe's program")?];
        for (word, word_span) in args {
            words.push(self.plain_word(word, *word_span)?);
        }
        Some(words)
    }

    /// A probe's program or file: a plain string and an absolute policy
    /// path (E0205, as a promiser path).
    fn fact_path(&mut self, lit: &StrLit, span: Span, what: &str) -> Option<String> {
        let path = self.plain_word(lit, span)?;
        if let Some(why) = path_problem(&path) {
            self.push(
                Diagnostic::new(
                    Code::RelativePath,
                    format!("{what} must be a plain absolute path: {why}"),
                    span,
                    "not a plain absolute path",
                )
                .with_note("a probe runs without a shell and without a search path")
                .with_help("write the full path, e.g. `/usr/local/lib/converge/probes/NAME`"),
            );
            return None;
        }
        Some(path)
    }

    /// A word of a declaration: a string without `${...}` (a probe runs
    /// before any fact is known).
    fn plain_word(&mut self, lit: &StrLit, span: Span) -> Option<String> {
        match lit.as_plain() {
            Some(text) => Some(text),
            None => {
                self.push(
                    Diagnostic::new(
                        Code::InvalidProbe,
                        "a probe's argv and path are plain strings",
                        span,
                        "holds `${...}` or a template tag",
                    )
                    .with_note("probes run before classes and facts are evaluated")
                    .with_help("write the value out; pass host-specific choices to the probe program itself"),
                );
                None
            }
        }
    }

    /// The type of `facts.NAME...`: the declaration's, through its fields
    /// and keys, ending at a scalar or a list.
    pub(super) fn probe_fact_type(&mut self, path: &[Ident], span: Span) -> Type {
        let Some(name) = path.get(1) else {
            self.push(
                Diagnostic::new(
                    Code::UnknownFact,
                    "`facts` alone is not a value",
                    span,
                    "name a fact",
                )
                .with_help("read one declared fact: `facts.NAME`"),
            );
            return Type::Any;
        };
        if self.symbols.facts.get(&name.name).is_none() {
            let mut d = Diagnostic::new(
                Code::UnknownFact,
                format!("unknown fact `facts.{}`", name.name),
                name.span,
                "no `fact` declares it",
            );
            d = match did_you_mean(&name.name, self.symbols.facts.names()) {
                Some(s) => d.with_help(format!("did you mean `facts.{s}`?")),
                None => d.with_help(format!(
                    "declare it: `fact {}: string from [\"/usr/local/lib/converge/probes/{}\"];`",
                    name.name, name.name
                )),
            };
            self.push(d);
            return Type::Any;
        }
        if let Some(id) = self.names.find(DefKind::ProbeFact, &name.name) {
            self.names.record(name.span, id);
        }
        let Some(mut ty) = self
            .facts
            .iter()
            .find(|(n, _)| *n == name.name)
            .map(|(_, c)| c.ty.clone())
        else {
            // The declaration itself is in error, already reported.
            return Type::Any;
        };
        for key in path.iter().skip(2) {
            ty = self.field_type(ty, key);
        }
        if matches!(ty, Type::Map(_) | Type::Record(_)) {
            self.push(
                Diagnostic::new(
                    Code::ProbeFactWhole,
                    format!(
                        "`{}` is {}: read one of its values",
                        dotted(path),
                        ty.with_article()
                    ),
                    span,
                    "a whole record or map",
                )
                .with_note("the VM computes with strings, ints, bools and lists; a probe's record or map is read a field or key at a time")
                .with_help(format!("read a field or key: `{}.NAME`", dotted(path))),
            );
            return Type::Any;
        }
        ty
    }
}

fn dotted(path: &[Ident]) -> String {
    let names: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
    names.join(".")
}

/// The probe type of a checked type, or what it is when no probe's output
/// can be parsed as it.
pub fn probe_type(ty: &Type) -> Result<ProbeType, String> {
    Ok(match ty {
        Type::String => ProbeType::Str,
        Type::Int => ProbeType::Int,
        Type::Bool => ProbeType::Bool,
        Type::List(inner) if **inner == Type::String => ProbeType::List,
        Type::List(inner) => return Err(format!("list of {}", inner.describe())),
        Type::Map(inner) => ProbeType::Map(Box::new(probe_type(inner)?)),
        Type::Record(record) => {
            let mut fields = Vec::with_capacity(record.fields.len());
            for f in &record.fields {
                if f.default.is_some() {
                    return Err(format!(
                        "record with a default (`{}.{}`)",
                        record.name, f.name
                    ));
                }
                fields.push((f.name.clone(), probe_type(&f.ty)?));
            }
            if fields.is_empty() {
                return Err(format!("record without fields (`{}`)", record.name));
            }
            ProbeType::Record(fields)
        }
        other => return Err(other.describe()),
    })
}
