//! What the three format readers share while they build the data tree:
//! the nesting and size limits, duplicate-key detection, and the wording of
//! syntax errors. Each limit is reported once, at the place it is reached.

use std::collections::HashMap;

use converge_grammar::{FileId, Span};

use super::tree::{DataValue, Entry, MAX_DEPTH, MAX_VALUES};
use crate::diagnostic::{Code, Diagnostic};

#[derive(Debug)]
pub struct Reader<'t> {
    pub file: FileId,
    /// The data file's text (to keep every span on it).
    text: &'t str,
    /// `TOML`, `YAML` or `JSON`, for messages.
    format: &'static str,
    errors: Vec<Diagnostic>,
    values: usize,
    too_deep: bool,
    too_many: bool,
}

impl<'t> Reader<'t> {
    pub fn new(file: FileId, format: &'static str, text: &'t str) -> Self {
        Reader {
            file,
            text,
            format,
            errors: Vec::new(),
            values: 0,
            too_deep: false,
            too_many: false,
        }
    }

    /// A malformed-file error at `start..end` (byte offsets, brought onto
    /// the text's character boundaries).
    pub fn syntax(&self, start: usize, end: usize, message: &str, help: &str) -> Diagnostic {
        let start = self.boundary(start);
        let end = self.boundary(end.max(start));
        let span = Span::new(self.file, to_u32(start), to_u32(end));
        Diagnostic::new(
            Code::DataSyntax,
            format!("invalid {}: {message}", self.format),
            span,
            message.to_owned(),
        )
        .with_help(help.to_owned())
    }

    /// The nearest character boundary at or after `offset`, within the
    /// text.
    fn boundary(&self, offset: usize) -> usize {
        let mut offset = offset.min(self.text.len());
        while !self.text.is_char_boundary(offset) {
            offset += 1;
        }
        offset
    }

    /// Records an error found while building the tree; the build goes on,
    /// so one pass reports every such error.
    pub fn report(&mut self, diagnostic: Diagnostic) {
        self.errors.push(diagnostic);
    }

    /// Whether a list or map at nesting `depth` may be entered; the first
    /// one too deep is reported, and its contents are dropped.
    pub fn enter(&mut self, depth: usize, start: usize, end: usize) -> bool {
        if depth < MAX_DEPTH {
            return true;
        }
        if !self.too_deep {
            self.too_deep = true;
            let d = self.syntax(
                start,
                end.min(start + 1),
                &format!("lists and maps nest deeper than {MAX_DEPTH} levels"),
                "flatten the data; no policy type nests this deeply",
            );
            self.errors.push(d);
        }
        false
    }

    /// Counts `n` more values; reports once, at `span`, when the file
    /// holds more than [`MAX_VALUES`]. Returns whether the budget still
    /// holds (a reader stops copying values once it does not).
    pub fn charge(&mut self, n: usize, span: Span) -> bool {
        self.values = self.values.saturating_add(n);
        if self.values <= MAX_VALUES {
            return true;
        }
        if !self.too_many {
            self.too_many = true;
            self.errors.push(
                Diagnostic::new(
                    Code::DataSyntax,
                    format!(
                        "invalid {}: the file holds more than {MAX_VALUES} values",
                        self.format
                    ),
                    span,
                    "the limit is reached here",
                )
                .with_help(
                    "split the data, or use fewer YAML aliases (each use of an alias copies its value)",
                ),
            );
        }
        false
    }

    /// The tree, or every error found while building it.
    pub fn finish(self, tree: DataValue) -> Result<DataValue, Vec<Diagnostic>> {
        if self.errors.is_empty() {
            Ok(tree)
        } else {
            Err(self.errors)
        }
    }

    /// Adds an entry to a map under construction, reporting a repeated key
    /// at the second occurrence with the first as a secondary label.
    pub fn push_entry(
        &mut self,
        map: &mut MapBuilder,
        key: String,
        key_span: Span,
        value: DataValue,
    ) {
        if let Some(first) = map.seen.get(&key) {
            self.errors.push(duplicate_key(&key, key_span, *first));
            return;
        }
        map.seen.insert(key.clone(), key_span);
        map.entries.push(Entry {
            key,
            key_span,
            value,
        });
    }
}

/// The entries of one map being read, with the keys seen so far.
#[derive(Debug, Default)]
pub struct MapBuilder {
    entries: Vec<Entry>,
    seen: HashMap<String, Span>,
}

impl MapBuilder {
    pub fn into_entries(self) -> Vec<Entry> {
        self.entries
    }
}

/// The error for a key written twice in one map.
pub fn duplicate_key(key: &str, again: Span, first: Span) -> Diagnostic {
    Diagnostic::new(
        Code::DataDuplicateKey,
        format!("duplicate key `{key}`"),
        again,
        "written again here",
    )
    .with_secondary(first, "first written here")
    .with_help("remove one of the two; a key may appear only once in a map")
}

/// A byte offset as a span offset (files are at most 64 MiB, so it fits).
pub fn to_u32(offset: usize) -> u32 {
    u32::try_from(offset).unwrap_or(u32::MAX)
}
