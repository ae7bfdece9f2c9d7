//! Annotated source snippets for people, drawn by ariadne.
//!
//! Spans are byte offsets; they are clamped to character boundaries and
//! handed to ariadne as character offsets (`IndexType::Char`): ariadne 0.6
//! panics on a byte offset inside a multi-byte character
//! (zesterer/ariadne#156), and in byte mode it heads a secondary snippet
//! with a character offset read as a byte offset (a wrong column after any
//! non-ASCII character).
//!
//! ariadne 0.6 heads every snippet of the primary label's file with the
//! primary's `file:line:col`, even a snippet that shows only another label
//! of that file. So each snippet gets its own source id ([`SnippetId`]: the
//! file name plus the number of the snippet): only the primary's snippet
//! shares the report's id, and every other one is headed by its first label.

use std::collections::HashMap;
use std::fmt;
use std::ops::Range;

use ariadne::{Color, Config, IndexType, Label, Report, ReportKind, Source};

use crate::diagnostic::{Diagnostic, Severity};
use crate::source::SourceDb;

/// A source id for ariadne: the file, and which snippet of the report it
/// heads. Displayed as the file name alone.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SnippetId {
    file: String,
    snippet: usize,
}

impl fmt::Display for SnippetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)
    }
}

type AriadneSpan = (SnippetId, Range<usize>);

/// The files the diagnostics mention, by name; the snippet number of a
/// [`SnippetId`] does not matter for fetching the text.
struct Files<'a> {
    by_name: HashMap<String, Source<&'a str>>,
}

impl<'a> ariadne::Cache<SnippetId> for Files<'a> {
    type Storage = &'a str;

    fn fetch(&mut self, id: &SnippetId) -> Result<&Source<&'a str>, impl fmt::Debug> {
        self.by_name
            .get(&id.file)
            .ok_or_else(|| format!("no source text for {}", id.file))
    }

    fn display<'b>(&self, id: &'b SnippetId) -> Option<impl fmt::Display + 'b> {
        Some(&id.file)
    }
}

/// Renders every diagnostic, separated by blank lines. `color` should be
/// true only when writing to a terminal.
pub fn render_human(db: &SourceDb, diagnostics: &[Diagnostic], color: bool) -> String {
    let mut out = Vec::new();
    // One cache of the files any diagnostic mentions, shared by all reports.
    let mut files = Files {
        by_name: HashMap::new(),
    };
    for label in diagnostics.iter().flat_map(|d| &d.labels) {
        let name = db.name(label.span.file);
        if !files.by_name.contains_key(name) {
            let text = db.get(label.span.file).map_or("", |f| f.text.as_str());
            files.by_name.insert(name.to_owned(), Source::from(text));
        }
    }
    for d in diagnostics {
        write_one(db, d, color, &mut files, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A label's place: its file, its range in characters and the line its last
/// character is on (0-based), which is what ariadne groups snippets by.
struct Placed {
    file: String,
    range: Range<usize>,
    last_line: usize,
}

fn place(db: &SourceDb, s: converge_grammar::Span) -> Placed {
    let file = db.name(s.file).to_owned();
    match db.get(s.file) {
        Some(source) => {
            let start = source.clamp(s.start);
            let end = source.clamp(s.end.max(s.start));
            let last = if end > start {
                source.clamp(end - 1)
            } else {
                start
            };
            let (line, _) = source.line_col(last);
            let chars = |byte: u32| {
                let before = source.text.get(..byte as usize).unwrap_or_default();
                before.chars().count()
            };
            Placed {
                file,
                range: chars(start)..chars(end),
                last_line: line,
            }
        }
        None => Placed {
            file,
            range: 0..0,
            last_line: 0,
        },
    }
}

/// The snippet number of each label, in label order, by ariadne's own rule:
/// a label joins the previous label's snippet when it is in the same file
/// and does not end on an earlier line; otherwise it starts a new snippet.
fn snippets(placed: &[Placed]) -> Vec<usize> {
    let mut numbers = Vec::with_capacity(placed.len());
    let mut current = 0;
    for (i, label) in placed.iter().enumerate() {
        if let Some(previous) = i.checked_sub(1).and_then(|p| placed.get(p)) {
            if previous.file != label.file || previous.last_line > label.last_line {
                current += 1;
            }
        }
        numbers.push(current);
    }
    numbers
}

fn write_one(db: &SourceDb, d: &Diagnostic, color: bool, cache: &mut Files<'_>, out: &mut Vec<u8>) {
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    // As `Diagnostic::primary_span`: the primary label, else the first one.
    let first = if d.labels.is_empty() { None } else { Some(0) };
    let Some(primary_index) = d.labels.iter().position(|l| l.primary).or(first) else {
        // A diagnostic without any location: print the message alone.
        out.extend_from_slice(
            format!("{}[{}]: {}\n", d.severity.as_str(), d.code, d.message).as_bytes(),
        );
        return;
    };
    let placed: Vec<Placed> = d.labels.iter().map(|l| place(db, l.span)).collect();
    let numbers = snippets(&placed);
    let span = |i: usize| -> Option<AriadneSpan> {
        let p = placed.get(i)?;
        let snippet = *numbers.get(i)?;
        Some((
            SnippetId {
                file: p.file.clone(),
                snippet,
            },
            p.range.clone(),
        ))
    };
    let Some(primary) = span(primary_index) else {
        return;
    };
    let config = Config::default()
        .with_index_type(IndexType::Char)
        .with_color(color);
    let mut builder = Report::build(kind, primary)
        .with_config(config)
        .with_code(d.code.as_str())
        .with_message(&d.message);
    for (order, label) in d.labels.iter().enumerate() {
        let Some(s) = span(order) else { continue };
        let mut l = Label::new(s)
            .with_message(&label.message)
            .with_order(order as i32);
        if color {
            l = l.with_color(if label.primary {
                match d.severity {
                    Severity::Error => Color::Red,
                    Severity::Warning => Color::Yellow,
                }
            } else {
                Color::Blue
            });
        }
        builder.add_label(l);
    }
    for note in &d.notes {
        builder.add_note(note);
    }
    if let Some(help) = &d.help {
        builder.add_help(help);
    }
    // Writing into a Vec cannot fail.
    let _ = builder.finish().write(cache, &mut *out);
}

#[cfg(test)]
mod tests {
    use converge_grammar::Span;

    use super::render_human;
    use crate::diagnostic::{Code, Diagnostic};
    use crate::source::SourceDb;

    /// The primary on line 3 and a secondary label of the same file on line
    /// 2 (after a multi-byte character), then one in another file: every
    /// snippet is headed by its own label's `file:line:col`.
    #[test]
    fn each_snippet_is_headed_by_its_own_label() {
        let mut db = SourceDb::new();
        let text = "// — a comment\nx = 1;\nx = 2;\n";
        let main = db.add("main.policy", text.to_owned());
        let other = db.add("other.policy", "y = 3;\n".to_owned());
        let at = |needle: &str| {
            let start = text.find(needle).unwrap() as u32;
            Span::new(main, start, start + needle.len() as u32)
        };
        let d = Diagnostic::new(Code::UnexpectedToken, "two values", at("x = 2"), "second")
            .with_secondary(at("x = 1"), "first")
            .with_secondary(Span::new(other, 0, 5), "elsewhere");
        let out = render_human(&db, &[d], false);
        let headers: Vec<&str> = out
            .lines()
            .filter(|l| l.contains("─[ "))
            .map(|l| l.split("─[ ").nth(1).unwrap().trim_end_matches(" ]"))
            .collect();
        assert_eq!(
            headers,
            ["main.policy:3:1", "main.policy:2:1", "other.policy:1:1"],
            "{out}"
        );
        insta::assert_snapshot!(out);
    }
}
