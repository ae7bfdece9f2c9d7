//! The one checker of data files against the declared type, for all three
//! formats: it walks the data tree and the [`Type`] together and builds the
//! [`Value`] the policy sees, or says at the exact place in the data file
//! what does not fit.

use converge_grammar::Span;

use super::tree::{DataKind, DataValue, Entry};
use crate::diagnostic::{with_article, Code, Diagnostic};
use crate::ir::Value;
use crate::sema::types::{RecordType, Type};

/// After this many errors in one file the rest are not reported (a
/// systematic mistake in a 10,000-record file is one fix, not 10,000
/// messages).
pub const MAX_ERRORS: usize = 50;

/// Checks a data tree against `ty`. `text` is the data file's text (to
/// mark the first character of a record that lacks a field).
pub fn check(tree: &DataValue, ty: &Type, text: &str) -> Result<Value, Vec<Diagnostic>> {
    let mut checker = Checker {
        text,
        errors: Vec::new(),
        truncated: false,
    };
    let holder = checker.first_char(tree.span);
    let value = checker.value(tree, ty, holder);
    match value {
        Some(value) if checker.errors.is_empty() => Ok(value),
        _ => {
            if checker.truncated {
                if let Some(last) = checker.errors.last_mut() {
                    last.notes.push(format!(
                        "only the first {MAX_ERRORS} errors of this file are shown"
                    ));
                }
            }
            Err(checker.errors)
        }
    }
}

struct Checker<'t> {
    text: &'t str,
    errors: Vec<Diagnostic>,
    truncated: bool,
}

impl Checker<'_> {
    fn report(&mut self, diagnostic: Diagnostic) {
        if self.errors.len() < MAX_ERRORS {
            self.errors.push(diagnostic);
        } else {
            self.truncated = true;
        }
    }

    /// The first character of a span: where a record that lacks a field
    /// is marked when no key holds it (a list element, the document).
    fn first_char(&self, span: Span) -> Span {
        let start = span.start as usize;
        let len = self
            .text
            .get(start..)
            .and_then(|rest| rest.chars().next())
            .map_or(0, char::len_utf8);
        Span::new(span.file, span.start, span.start + len as u32)
    }

    /// The value of `data` as type `ty`. `holder` is where the value is
    /// held: its key in a map, else its own first character.
    fn value(&mut self, data: &DataValue, ty: &Type, holder: Span) -> Option<Value> {
        if let DataKind::Null = data.kind {
            self.report(missing_value(data.span, ty));
            return None;
        }
        match ty {
            Type::String => match &data.kind {
                DataKind::Str(s) => Some(Value::Str(s.clone())),
                _ => self.mismatch(data, ty, scalar_help_for_string(&data.kind)),
            },
            Type::Int => match &data.kind {
                DataKind::Int { value: Some(v), .. } => Some(Value::Int(*v)),
                DataKind::Int { value: None, .. } => self.invalid(
                    data.span,
                    "integer out of range",
                    "does not fit in 64 bits",
                    "ints are 64-bit: from -9223372036854775808 to 9223372036854775807",
                ),
                DataKind::Str(s) if s.trim().parse::<i64>().is_ok() => self.mismatch(
                    data,
                    ty,
                    Some(format!(
                        "remove the quotes to write the number {}",
                        s.trim()
                    )),
                ),
                DataKind::Float(_) => self.mismatch(
                    data,
                    ty,
                    Some("ints have no fraction or exponent; write a whole number".to_owned()),
                ),
                _ => self.mismatch(data, ty, None),
            },
            Type::Bool => match &data.kind {
                DataKind::Bool(b) => Some(Value::Bool(*b)),
                DataKind::Str(s) => {
                    let help = match s.as_str() {
                        "true" | "false" => format!("remove the quotes: {s}"),
                        _ => "write `true` or `false` (YAML 1.2 reads `yes`, `no`, `on` and `off` as strings)".to_owned(),
                    };
                    self.mismatch(data, ty, Some(help))
                }
                _ => self.mismatch(data, ty, Some("write `true` or `false`".to_owned())),
            },
            Type::Mode => self.mode(data),
            Type::Duration => self.duration(data),
            Type::List(inner) => match &data.kind {
                DataKind::List(items) => {
                    let mut out = Vec::with_capacity(items.len());
                    let mut ok = true;
                    for item in items {
                        let at = self.first_char(item.span);
                        match self.value(item, inner, at) {
                            Some(v) => out.push(v),
                            None => ok = false,
                        }
                    }
                    ok.then_some(Value::List(out))
                }
                _ => self.mismatch(data, ty, None),
            },
            Type::Map(inner) => match &data.kind {
                DataKind::Map(entries) => {
                    let mut out = Vec::with_capacity(entries.len());
                    let mut ok = true;
                    for entry in entries {
                        match self.value(&entry.value, inner, entry.key_span) {
                            Some(v) => out.push((entry.key.clone(), v)),
                            None => ok = false,
                        }
                    }
                    out.sort_by(|a, b| a.0.cmp(&b.0));
                    ok.then_some(Value::Map(out))
                }
                _ => self.mismatch(data, ty, None),
            },
            Type::Record(record) => match &data.kind {
                DataKind::Map(entries) => self.record(record, entries, holder),
                _ => self.mismatch(data, ty, None),
            },
            Type::Any => self.any(data),
            Type::Ref => self.mismatch(
                data,
                ty,
                Some("a data file cannot name a promise; declare the field as a string".to_owned()),
            ),
        }
    }

    /// A record from a map: every declared field, in declaration order,
    /// omitted ones given their defaults.
    fn record(&mut self, record: &RecordType, entries: &[Entry], holder: Span) -> Option<Value> {
        let mut ok = true;
        let mut found: Vec<Option<Value>> = vec![None; record.fields.len()];
        for entry in entries {
            let Some(index) = record.fields.iter().position(|f| f.name == entry.key) else {
                self.report(unknown_field(record, entry));
                ok = false;
                continue;
            };
            let field_ty = record.fields.get(index).map_or(&Type::Any, |f| &f.ty);
            match self.value(&entry.value, field_ty, entry.key_span) {
                Some(v) => {
                    if let Some(slot) = found.get_mut(index) {
                        *slot = Some(v);
                    }
                }
                None => ok = false,
            }
        }
        let mut fields = Vec::with_capacity(record.fields.len());
        for (field, value) in record.fields.iter().zip(found) {
            let present = entries.iter().any(|e| e.key == field.name);
            match value.or_else(|| field.default.clone()) {
                Some(v) => fields.push((field.name.clone(), v)),
                None if present => {}
                None => {
                    ok = false;
                    let mut d = Diagnostic::new(
                        Code::DataMissingField,
                        format!(
                            "`{}` needs `{}` ({})",
                            record.name,
                            field.name,
                            field.ty.describe()
                        ),
                        holder,
                        format!("this {} has no `{}`", record.name, field.name),
                    );
                    // A field built without a declaration (no span) has
                    // nothing to show.
                    if field.span != Span::default() {
                        d = d.with_secondary(field.span, "declared here, without a default");
                    }
                    self.report(d.with_help(format!(
                        "add the key `{}` with {} value to this record, or give the field a default in the type",
                        field.name,
                        field.ty.with_article()
                    )));
                }
            }
        }
        ok.then_some(Value::Record(fields))
    }

    /// A mode: a string of octal digits (`"0644"`, `"644"`, `"0o644"`) or
    /// an integer written in octal (`0o644`); at most `0o7777`.
    fn mode(&mut self, data: &DataValue) -> Option<Value> {
        let help = "write the mode as an octal string in quotes, e.g. \"0644\" (or unquoted 0o644 in YAML and TOML)";
        let value = match &data.kind {
            DataKind::Str(s) => {
                let digits = s.strip_prefix("0o").unwrap_or(s);
                if digits.is_empty() || !digits.chars().all(|c| c.is_digit(8)) {
                    return self.invalid(
                        data.span,
                        &format!("{:?} is not a mode", s),
                        "not octal digits",
                        help,
                    );
                }
                i64::from_str_radix(digits, 8).ok()
            }
            DataKind::Int {
                value: Some(v),
                octal,
            } if *octal || (0..8).contains(v) => Some(*v),
            DataKind::Int { value: Some(v), .. } => {
                return self.invalid(
                    data.span,
                    &format!("the mode {v} is written as a decimal number"),
                    &format!("read as the decimal {v}, which is 0o{v:o}"),
                    "write the mode as an octal string in quotes, e.g. \"0644\": unquoted, YAML 1.2 and JSON read 0644 as the decimal 644",
                );
            }
            DataKind::Int { value: None, .. } => None,
            _ => return self.mismatch(data, &Type::Mode, Some(help.to_owned())),
        };
        match value {
            Some(m) if (0..=0o7777).contains(&m) => Some(Value::Int(m)),
            _ => self.invalid(
                data.span,
                "mode out of range",
                "larger than 0o7777",
                "a mode is at most 0o7777 (four octal digits: special bits, user, group, other)",
            ),
        }
    }

    /// A duration: a string `30s`, `5m`, `2h`, or an integer number of
    /// seconds.
    fn duration(&mut self, data: &DataValue) -> Option<Value> {
        let help = "write a number with the unit s, m or h, e.g. \"30s\", \"5m\", \"2h\", or a number of seconds";
        match &data.kind {
            DataKind::Int { value: Some(v), .. } if *v >= 0 => Some(Value::Duration(*v as u64)),
            DataKind::Int { .. } => self.invalid(
                data.span,
                "invalid duration",
                "not a number of seconds from 0 up",
                help,
            ),
            DataKind::Str(s) => match parse_duration(s) {
                Some(secs) => Some(Value::Duration(secs)),
                None => self.invalid(
                    data.span,
                    &format!("{s:?} is not a duration"),
                    "not a number followed by s, m or h",
                    help,
                ),
            },
            _ => self.mismatch(data, &Type::Duration, Some(help.to_owned())),
        }
    }

    /// A value of no declared type, converted as written (`any`).
    fn any(&mut self, data: &DataValue) -> Option<Value> {
        match &data.kind {
            DataKind::Str(s) => Some(Value::Str(s.clone())),
            DataKind::Int { value: Some(v), .. } => Some(Value::Int(*v)),
            DataKind::Bool(b) => Some(Value::Bool(*b)),
            DataKind::List(items) => {
                let mut out = Vec::with_capacity(items.len());
                let mut ok = true;
                for item in items {
                    let at = self.first_char(item.span);
                    match self.value(item, &Type::Any, at) {
                        Some(v) => out.push(v),
                        None => ok = false,
                    }
                }
                ok.then_some(Value::List(out))
            }
            DataKind::Map(entries) => {
                let mut out = Vec::with_capacity(entries.len());
                let mut ok = true;
                for entry in entries {
                    match self.value(&entry.value, &Type::Any, entry.key_span) {
                        Some(v) => out.push((entry.key.clone(), v)),
                        None => ok = false,
                    }
                }
                out.sort_by(|a, b| a.0.cmp(&b.0));
                ok.then_some(Value::Map(out))
            }
            DataKind::Int { value: None, .. } => self.invalid(
                data.span,
                "integer out of range",
                "does not fit in 64 bits",
                "ints are 64-bit: from -9223372036854775808 to 9223372036854775807",
            ),
            DataKind::Float(_) | DataKind::Datetime(_) | DataKind::Null => self.mismatch(
                data,
                &Type::Any,
                Some("policy values have no floats or dates; write it in quotes to keep it as a string".to_owned()),
            ),
        }
    }

    fn mismatch(&mut self, data: &DataValue, ty: &Type, help: Option<String>) -> Option<Value> {
        let expected = match ty {
            Type::Any => "a string, int, bool, list or map".to_owned(),
            Type::Record(r) => format!("{} (a map of its fields)", with_article(&r.name)),
            other => other.with_article(),
        };
        let found = data.kind.describe();
        let mut d = Diagnostic::new(
            Code::DataTypeMismatch,
            format!("expected {expected}, found {found}"),
            data.span,
            format!("expected {expected}"),
        );
        d = d.with_help(help.unwrap_or_else(|| format!("write {expected} here")));
        self.report(d);
        None
    }

    fn invalid(&mut self, span: Span, message: &str, label: &str, help: &str) -> Option<Value> {
        self.report(
            Diagnostic::new(
                Code::DataInvalidValue,
                message.to_owned(),
                span,
                label.to_owned(),
            )
            .with_help(help.to_owned()),
        );
        None
    }
}

/// `30s`, `5m`, `2h` (a whole number and one unit) in seconds.
pub fn parse_duration(text: &str) -> Option<u64> {
    let split = text.len().checked_sub(1)?;
    let (digits, unit) = (text.get(..split)?, text.get(split..)?);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let scale: u64 = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        _ => return None,
    };
    let secs = digits.parse::<u64>().ok()?.checked_mul(scale)?;
    (secs <= i64::MAX as u64).then_some(secs)
}

/// The help when a scalar stands where a string is expected.
fn scalar_help_for_string(kind: &DataKind) -> Option<String> {
    let written = match kind {
        DataKind::Int { value: Some(v), .. } => v.to_string(),
        DataKind::Bool(b) => b.to_string(),
        DataKind::Float(f) | DataKind::Datetime(f) => f.clone(),
        _ => return None,
    };
    Some(format!(
        "write it in quotes to make it a string: \"{written}\""
    ))
}

fn missing_value(span: Span, ty: &Type) -> Diagnostic {
    Diagnostic::new(
        Code::DataMissingValue,
        format!("expected {}, found no value", ty.describe()),
        span,
        "null or empty",
    )
    .with_help(
        "write a value here; to use a record field's default, leave the key out instead of leaving it empty",
    )
}

fn unknown_field(record: &RecordType, entry: &Entry) -> Diagnostic {
    let names: Vec<&str> = record.fields.iter().map(|f| f.name.as_str()).collect();
    let d = Diagnostic::new(
        Code::DataUnknownField,
        format!("`{}` has no field `{}`", record.name, entry.key),
        entry.key_span,
        "unknown field",
    );
    if entry.key == "<<" {
        return d.with_help(
            "YAML merge keys (`<<: *anchor`) are YAML 1.1, not 1.2: write the fields out, or give the shared ones defaults in the type",
        );
    }
    match crate::suggest::did_you_mean(&entry.key, names.iter().copied()) {
        Some(s) => d.with_help(format!("did you mean `{s}`?")),
        None => {
            let listed: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            d.with_help(format!(
                "remove it, or declare it in the type; the fields of `{}` are {}",
                record.name,
                listed.join(", ")
            ))
        }
    }
}
