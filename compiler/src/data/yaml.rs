//! YAML data files, read with `saphyr-parser` (YAML 1.2). The parser's
//! events carry positions; the tree is built from them here, so repeated
//! keys are seen (a YAML loader would keep the last one silently) and
//! plain scalars are typed by the YAML 1.2 core schema: `yes`, `on` and
//! `0644` mean what YAML 1.2 says (a string, a string, the decimal 644), not
//! what YAML 1.1 tools guessed. Aliases are copied, within the value budget.

use std::collections::HashMap;

use converge_grammar::{FileId, Span};
use saphyr_parser::{Event, Marker, Parser, ScalarStyle, Tag};

use super::reader::{to_u32, MapBuilder, Reader};
use super::tree::{DataKind, DataValue};
use crate::diagnostic::Diagnostic;

/// Parses one YAML document into the data tree.
pub fn parse(file: FileId, text: &str) -> Result<DataValue, Vec<Diagnostic>> {
    let mut builder = Builder {
        reader: Reader::new(file, "YAML", text),
        offsets: Offsets::new(text),
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        documents: 0,
    };
    let mut parser = Parser::new_from_str(text);
    while let Some(next) = parser.next_event() {
        let (event, span) = match next {
            Ok(found) => found,
            Err(err) => {
                let at = builder.offsets.byte(err.marker());
                return Err(vec![builder.reader.syntax(
                    at,
                    at,
                    err.info(),
                    "fix the YAML at this place (indentation, a missing `:` or an unclosed quote or bracket)",
                )]);
            }
        };
        let start = builder.offsets.byte(&span.start);
        let end = builder.offsets.byte(&span.end);
        if let Err(d) = builder.event(event, start, end) {
            return Err(vec![d]);
        }
    }
    let root = builder.root.take().unwrap_or(DataValue {
        kind: DataKind::Null,
        span: Span::new(file, 0, 0),
    });
    builder.reader.finish(root)
}

/// A list or map whose end event has not come yet.
enum Frame {
    List {
        items: Vec<DataValue>,
        start: usize,
        anchor: usize,
    },
    Map {
        map: MapBuilder,
        /// The key read, waiting for its value.
        key: Option<(String, Span)>,
        start: usize,
        anchor: usize,
    },
}

struct Builder<'t> {
    reader: Reader<'t>,
    offsets: Offsets,
    stack: Vec<Frame>,
    /// Values with an anchor (`&name`), by the parser's anchor id.
    anchors: HashMap<usize, DataValue>,
    root: Option<DataValue>,
    documents: usize,
}

impl Builder<'_> {
    fn span(&self, start: usize, end: usize) -> Span {
        Span::new(self.reader.file, to_u32(start), to_u32(end))
    }

    fn event(&mut self, event: Event<'_>, start: usize, end: usize) -> Result<(), Diagnostic> {
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(self.reader.syntax(
                        start,
                        end.max(start + 3),
                        "a second document",
                        "a data file holds one YAML document; remove the `---` and what follows, or move it to its own file",
                    ));
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let kind = resolve(&text, style, tag.as_deref()).map_err(|message| {
                    self.reader
                        .syntax(start, end, &message, "write the value without the tag")
                })?;
                let value = DataValue {
                    kind,
                    span: self.span(start, end),
                };
                self.reader.charge(1, value.span);
                self.add(value, anchor, Some(text.into_owned()))?;
            }
            Event::SequenceStart(anchor, _) => {
                self.open(start, end)?;
                self.stack.push(Frame::List {
                    items: Vec::new(),
                    start,
                    anchor,
                });
            }
            Event::MappingStart(anchor, _) => {
                self.open(start, end)?;
                self.stack.push(Frame::Map {
                    map: MapBuilder::default(),
                    key: None,
                    start,
                    anchor,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (kind, start, anchor) = match self.stack.pop() {
                    Some(Frame::List {
                        items,
                        start,
                        anchor,
                    }) => (DataKind::List(items), start, anchor),
                    Some(Frame::Map {
                        map, start, anchor, ..
                    }) => (DataKind::Map(map.into_entries()), start, anchor),
                    None => return Ok(()),
                };
                let value = DataValue {
                    kind,
                    span: self.span(start, end.max(start)),
                };
                self.reader.charge(1, value.span);
                self.add(value, anchor, None)?;
            }
            Event::Alias(id) => {
                let span = self.span(start, end);
                let Some(value) = self.anchors.get(&id).cloned() else {
                    return Err(self.reader.syntax(
                        start,
                        end,
                        "an alias to no anchor",
                        "define the anchor (`&name`) before the alias (`*name`)",
                    ));
                };
                if !self.reader.charge(size(&value), span) {
                    return Ok(());
                }
                let text = match &value.kind {
                    DataKind::Str(s) => Some(s.clone()),
                    _ => None,
                };
                self.add(value, 0, text)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    /// Checks that a list or map may open here: not as a map key, and not
    /// deeper than the limit.
    fn open(&mut self, start: usize, end: usize) -> Result<(), Diagnostic> {
        if let Some(Frame::Map { key: None, .. }) = self.stack.last() {
            return Err(self.reader.syntax(
                start,
                end.max(start + 1),
                "a list or map used as a map key",
                "map keys are strings; write the key as a plain word or a quoted string",
            ));
        }
        if self.stack.len() < super::tree::MAX_DEPTH {
            Ok(())
        } else {
            Err(self.reader.syntax(
                start,
                start + 1,
                &format!(
                    "lists and maps nest deeper than {} levels",
                    super::tree::MAX_DEPTH
                ),
                "flatten the data; no policy type nests this deeply",
            ))
        }
    }

    /// Puts a finished value where it belongs: as a map's key (when `key`
    /// text is given and the map waits for one), a map's value, a list's
    /// element or the document.
    fn add(
        &mut self,
        value: DataValue,
        anchor: usize,
        key: Option<String>,
    ) -> Result<(), Diagnostic> {
        if anchor != 0 {
            self.anchors.insert(anchor, value.clone());
        }
        let reader = &mut self.reader;
        match self.stack.last_mut() {
            None => self.root = Some(value),
            Some(Frame::List { items, .. }) => items.push(value),
            Some(Frame::Map { map, key: slot, .. }) => match slot.take() {
                Some((name, key_span)) => reader.push_entry(map, name, key_span, value),
                None => match key {
                    Some(text) => *slot = Some((text, value.span)),
                    None => return Err(reader.syntax(
                        value.span.start as usize,
                        value.span.end as usize,
                        "a list or map used as a map key",
                        "map keys are strings; write the key as a plain word or a quoted string",
                    )),
                },
            },
        }
        Ok(())
    }
}

/// How many values a tree holds (what copying it for an alias costs).
fn size(value: &DataValue) -> usize {
    match &value.kind {
        DataKind::List(items) => 1 + items.iter().map(size).sum::<usize>(),
        DataKind::Map(entries) => 1 + entries.iter().map(|e| size(&e.value)).sum::<usize>(),
        _ => 1,
    }
}

/// The type of a scalar: quoted and block scalars are strings; plain ones
/// follow the YAML 1.2 core schema. A `!!str` tag makes any scalar a
/// string; other core tags leave the schema's reading; other tags are
/// refused.
fn resolve(text: &str, style: ScalarStyle, tag: Option<&Tag>) -> Result<DataKind, String> {
    if let Some(tag) = tag {
        if !tag.is_yaml_core_schema() {
            return Err(format!("the tag `{tag}` is not supported"));
        }
        if tag.suffix == "str" {
            return Ok(DataKind::Str(text.to_owned()));
        }
    }
    if style != ScalarStyle::Plain {
        return Ok(DataKind::Str(text.to_owned()));
    }
    Ok(core_schema(text))
}

/// The YAML 1.2 core schema's reading of a plain scalar.
pub fn core_schema(text: &str) -> DataKind {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return DataKind::Null,
        "true" | "True" | "TRUE" => return DataKind::Bool(true),
        "false" | "False" | "FALSE" => return DataKind::Bool(false),
        _ => {}
    }
    if let Some(digits) = text.strip_prefix("0o") {
        if is_digits(digits, 8) {
            return DataKind::Int {
                value: i64::from_str_radix(digits, 8).ok(),
                octal: true,
            };
        }
    }
    if let Some(digits) = text.strip_prefix("0x") {
        if is_digits(digits, 16) {
            return DataKind::Int {
                value: i64::from_str_radix(digits, 16).ok(),
                octal: false,
            };
        }
    }
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if is_digits(unsigned, 10) {
        return DataKind::Int {
            value: text.parse::<i64>().ok(),
            octal: false,
        };
    }
    if is_float(unsigned) {
        return DataKind::Float(text.to_owned());
    }
    DataKind::Str(text.to_owned())
}

fn is_digits(text: &str, radix: u32) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_digit(radix))
}

/// `[0-9]*(.[0-9]*)?([eE][-+]?[0-9]+)?` with at least one digit, or
/// `.inf`/`.nan` (sign already removed).
fn is_float(text: &str) -> bool {
    if matches!(text, ".inf" | ".Inf" | ".INF" | ".nan" | ".NaN" | ".NAN") {
        return true;
    }
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(i) => (text.get(..i).unwrap_or(""), text.get(i + 1..)),
        None => (text, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, f),
        None => (mantissa, ""),
    };
    let digits_ok = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok =
        digits_ok(whole) && digits_ok(fraction) && !(whole.is_empty() && fraction.is_empty());
    let exponent_ok =
        exponent.is_none_or(|e| is_digits(e.strip_prefix(['-', '+']).unwrap_or(e), 10));
    mantissa_ok && exponent_ok
}

/// Turns the parser's markers (character positions) into byte offsets.
struct Offsets {
    /// Byte offset of each character, when the text is not all ASCII (in
    /// ASCII text a character index is a byte offset).
    chars: Option<Vec<u32>>,
    len: usize,
}

impl Offsets {
    fn new(text: &str) -> Self {
        let chars = (!text.is_ascii()).then(|| {
            text.char_indices()
                .map(|(i, _)| to_u32(i))
                .collect::<Vec<u32>>()
        });
        Offsets {
            chars,
            len: text.len(),
        }
    }

    fn byte(&self, marker: &Marker) -> usize {
        let index = marker.index();
        match &self.chars {
            None => index.min(self.len),
            Some(chars) => chars.get(index).map_or(self.len, |b| *b as usize),
        }
    }
}
