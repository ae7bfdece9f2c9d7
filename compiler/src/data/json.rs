//! JSON data files, read with `jsonc-parser` in strict mode: no comments,
//! trailing commas, single quotes or other JSON5 extensions, so a file that
//! loads here loads in every other JSON tool. The parser keeps byte ranges
//! of every value and every property name, and keeps repeated names, so a
//! duplicate key is reported here (at the second key, with the first).

use converge_grammar::{FileId, Span};
use jsonc_parser::ast;
use jsonc_parser::common::Range;
use jsonc_parser::{CollectOptions, CommentCollectionStrategy, ParseOptions};

use super::reader::{MapBuilder, Reader};
use super::tree::{DataKind, DataValue};
use crate::diagnostic::Diagnostic;

/// Parses strict JSON into the data tree.
pub fn parse(file: FileId, text: &str) -> Result<DataValue, Vec<Diagnostic>> {
    let options = ParseOptions {
        allow_comments: false,
        allow_loose_object_property_names: false,
        allow_trailing_commas: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        allow_bare_decimal_point_numbers: false,
        allow_non_finite_numbers: false,
        allow_extended_string_escapes: false,
    };
    let collect = CollectOptions {
        comments: CommentCollectionStrategy::Off,
        tokens: false,
    };
    let mut reader = Reader::new(file, "JSON", text);
    let parsed = match jsonc_parser::parse_to_ast(text, &collect, &options) {
        Ok(parsed) => parsed,
        Err(err) => {
            let range = err.range();
            let message = err.kind().to_string();
            return Err(vec![reader.syntax(
                range.start,
                range.end,
                &message,
                &syntax_help(&message),
            )]);
        }
    };
    let Some(value) = parsed.value else {
        return Err(vec![reader.syntax(
            0,
            0,
            "the file holds no JSON value",
            "write one value: an object `{ ... }`, a list `[ ... ]` or a scalar",
        )]);
    };
    let tree = convert(&mut reader, text, value, 0);
    reader.finish(tree)
}

fn convert(reader: &mut Reader<'_>, text: &str, value: ast::Value<'_>, depth: usize) -> DataValue {
    let (kind, range) = match value {
        ast::Value::StringLit(s) => {
            raw_control(reader, text, s.range);
            (DataKind::Str(s.value.into_owned()), s.range)
        }
        ast::Value::NumberLit(n) => (number(n.value), n.range),
        ast::Value::BooleanLit(b) => (DataKind::Bool(b.value), b.range),
        ast::Value::NullKeyword(n) => (DataKind::Null, n.range),
        ast::Value::Array(array) => {
            let items = if reader.enter(depth, array.range.start, array.range.end) {
                array
                    .elements
                    .into_iter()
                    .map(|v| convert(reader, text, v, depth + 1))
                    .collect()
            } else {
                Vec::new()
            };
            (DataKind::List(items), array.range)
        }
        ast::Value::Object(object) => {
            let mut entries = MapBuilder::default();
            if reader.enter(depth, object.range.start, object.range.end) {
                for prop in object.properties {
                    let (key, key_range) = match prop.name {
                        ast::ObjectPropName::String(s) => {
                            raw_control(reader, text, s.range);
                            (s.value.into_owned(), s.range)
                        }
                        ast::ObjectPropName::Word(w) => (w.value.to_owned(), w.range),
                    };
                    let key_span = span(reader.file, key_range);
                    let value = convert(reader, text, prop.value, depth + 1);
                    reader.push_entry(&mut entries, key, key_span, value);
                }
            }
            (DataKind::Map(entries.into_entries()), object.range)
        }
    };
    let span = span(reader.file, range);
    reader.charge(1, span);
    DataValue { kind, span }
}

/// Reports a raw control character (U+0000 to U+001F) inside a string
/// literal, which strict JSON forbids (it must be escaped, `\u0001`) and
/// the parser lets through.
fn raw_control(reader: &mut Reader<'_>, text: &str, range: Range) {
    let literal = text.get(range.start..range.end).unwrap_or("");
    if let Some(i) = literal.bytes().position(|b| b < 0x20) {
        let at = range.start + i;
        let d = reader.syntax(
            at,
            at + 1,
            "a control character inside a string",
            "write it as an escape (`\\n`, `\\t`, `\\u0001`); JSON strings hold no raw control characters",
        );
        reader.report(d);
    }
}

/// A JSON number: an int when written without fraction or exponent.
fn number(text: &str) -> DataKind {
    if text.contains(['.', 'e', 'E']) {
        DataKind::Float(text.to_owned())
    } else {
        DataKind::Int {
            value: text.parse::<i64>().ok(),
            octal: false,
        }
    }
}

fn span(file: FileId, range: Range) -> Span {
    Span::new(file, range.start as u32, range.end as u32)
}

/// What to do about the JSON parser's complaints people meet most.
fn syntax_help(message: &str) -> String {
    let lower = message.to_lowercase();
    if lower.contains("comment") {
        "JSON has no comments; remove it (or use a `.yaml` or `.toml` file, which have them)"
            .to_owned()
    } else if lower.contains("trailing comma") {
        "remove the comma after the last element".to_owned()
    } else if lower.contains("single") {
        "JSON strings use double quotes".to_owned()
    } else {
        "fix the JSON at this place (data files are strict JSON, RFC 8259)".to_owned()
    }
}
