//! TOML data files, read with the `toml` crate's spanned document tree
//! (`toml::de::DeTable`), which keeps the byte range of every key and
//! value. TOML itself forbids a key written twice; the parser reports it,
//! and it is worded here like the other formats' duplicate keys, with the
//! first occurrence found in the partly read tree.

use std::ops::Range;

use converge_grammar::{FileId, Span};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::reader::{duplicate_key, to_u32, MapBuilder, Reader};
use super::tree::{DataKind, DataValue};
use crate::diagnostic::Diagnostic;

/// Parses a TOML document into the data tree (its root is a map).
pub fn parse(file: FileId, text: &str) -> Result<DataValue, Vec<Diagnostic>> {
    let mut reader = Reader::new(file, "TOML", text);
    let (document, errors) = DeTable::parse_recoverable(text);
    if let Some(err) = errors.first() {
        let range = err.span().unwrap_or(0..0);
        let message = err.message().trim_end().to_owned();
        if message == "duplicate key" {
            let span = Span::new(file, to_u32(range.start), to_u32(range.end));
            let key = key_text(text.get(range.clone()).unwrap_or(""));
            // The recovered tree holds the second occurrence; the text
            // before it holds the first.
            let before = text.get(..range.start).unwrap_or("");
            let (prefix, _) = DeTable::parse_recoverable(before);
            if let Some(first) = first_key(prefix.get_ref(), &key) {
                return Err(vec![duplicate_key(
                    &key,
                    span,
                    Span::new(file, to_u32(first.start), to_u32(first.end)),
                )]);
            }
        }
        return Err(vec![reader.syntax(
            range.start,
            range.end,
            &message,
            "fix the TOML at this place (a value needs `key = value`; strings are quoted)",
        )]);
    }
    let range = document.span();
    let root = table(&mut reader, document.into_inner(), range, 0);
    reader.finish(root)
}

fn table(
    reader: &mut Reader<'_>,
    table: DeTable<'_>,
    range: Range<usize>,
    depth: usize,
) -> DataValue {
    let mut map = MapBuilder::default();
    if reader.enter(depth, range.start, range.end) {
        for (key, value) in table {
            let key_span = span(reader.file, key.span());
            let value = convert(reader, value, depth + 1);
            reader.push_entry(&mut map, key.into_inner().into_owned(), key_span, value);
        }
    }
    DataValue {
        kind: DataKind::Map(map.into_entries()),
        span: span(reader.file, range),
    }
}

fn convert(reader: &mut Reader<'_>, value: Spanned<DeValue<'_>>, depth: usize) -> DataValue {
    let range = value.span();
    let at = span(reader.file, range.clone());
    reader.charge(1, at);
    let kind = match value.into_inner() {
        DeValue::String(s) => DataKind::Str(s.into_owned()),
        DeValue::Integer(i) => DataKind::Int {
            value: i64::from_str_radix(i.as_str(), i.radix()).ok(),
            octal: i.radix() == 8,
        },
        DeValue::Float(f) => DataKind::Float(f.as_str().to_owned()),
        DeValue::Boolean(b) => DataKind::Bool(b),
        DeValue::Datetime(d) => DataKind::Datetime(d.to_string()),
        DeValue::Array(items) => {
            let items = if reader.enter(depth, range.start, range.end) {
                items
                    .into_iter()
                    .map(|v| convert(reader, v, depth + 1))
                    .collect()
            } else {
                Vec::new()
            };
            DataKind::List(items)
        }
        DeValue::Table(t) => return table(reader, t, range, depth),
    };
    DataValue { kind, span: at }
}

/// The name a key is written as: a bare key, or a quoted one without its
/// quotes (escapes are rare in keys and left as written).
fn key_text(written: &str) -> String {
    let last = written.rsplit('.').next().unwrap_or(written).trim();
    last.trim_matches(|c| c == '"' || c == '\'').to_owned()
}

/// Where `key` was last written in a document (the text before a
/// duplicate): the closest earlier key of that name.
fn first_key(table: &DeTable<'_>, key: &str) -> Option<Range<usize>> {
    let mut best: Option<Range<usize>> = None;
    let mut stack: Vec<&DeTable<'_>> = vec![table];
    while let Some(t) = stack.pop() {
        for (k, v) in t {
            let at = k.span();
            if k.get_ref() == key && best.as_ref().is_none_or(|b| b.start < at.start) {
                best = Some(at);
            }
            tables_in(v.get_ref(), &mut stack);
        }
    }
    best
}

/// The tables a value holds directly: itself, or an array's tables.
fn tables_in<'a, 'i>(value: &'a DeValue<'i>, stack: &mut Vec<&'a DeTable<'i>>) {
    match value {
        DeValue::Table(t) => stack.push(t),
        DeValue::Array(items) => {
            for item in items {
                tables_in(item.get_ref(), stack);
            }
        }
        _ => {}
    }
}

fn span(file: FileId, range: Range<usize>) -> Span {
    Span::new(file, to_u32(range.start), to_u32(range.end))
}
