//! Annotated source snippets for people, drawn by ariadne.
//!
//! Spans are byte offsets; ariadne is told so (`IndexType::Byte`) and every
//! span is clamped to character boundaries first, because ariadne 0.6 panics
//! on a byte offset inside a multi-byte character (zesterer/ariadne#156).

use std::ops::Range;

use ariadne::{Color, Config, IndexType, Label, Report, ReportKind};

use crate::diagnostic::{Diagnostic, Severity};
use crate::source::SourceDb;

type AriadneSpan = (String, Range<usize>);

/// Renders every diagnostic, separated by blank lines. `color` should be
/// true only when writing to a terminal.
pub fn render_human(db: &SourceDb, diagnostics: &[Diagnostic], color: bool) -> String {
    let mut out = Vec::new();
    // One cache of the files any diagnostic mentions, shared by all reports.
    let mut files: Vec<(String, &str)> = Vec::new();
    for label in diagnostics.iter().flat_map(|d| &d.labels) {
        let name = db.name(label.span.file);
        if files.iter().all(|(n, _)| n != name) {
            let text = db.get(label.span.file).map_or("", |f| f.text.as_str());
            files.push((name.to_owned(), text));
        }
    }
    let mut cache = ariadne::sources(files);
    for d in diagnostics {
        write_one(db, d, color, &mut cache, &mut out);
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn write_one(
    db: &SourceDb,
    d: &Diagnostic,
    color: bool,
    cache: &mut impl ariadne::Cache<String>,
    out: &mut Vec<u8>,
) {
    let kind = match d.severity {
        Severity::Error => ReportKind::Error,
        Severity::Warning => ReportKind::Warning,
    };
    let span = |s: converge_grammar::Span| -> AriadneSpan {
        let name = db.name(s.file).to_owned();
        match db.get(s.file) {
            Some(file) => {
                let start = file.clamp(s.start) as usize;
                let end = file.clamp(s.end.max(s.start)) as usize;
                (name, start..end)
            }
            None => (name, 0..0),
        }
    };
    let Some(primary) = d.primary_span() else {
        // A diagnostic without any location: print the message alone.
        out.extend_from_slice(
            format!("{}[{}]: {}\n", d.severity.as_str(), d.code, d.message).as_bytes(),
        );
        return;
    };
    let config = Config::default()
        .with_index_type(IndexType::Byte)
        .with_color(color);
    let mut builder = Report::build(kind, span(primary))
        .with_config(config)
        .with_code(d.code.as_str())
        .with_message(&d.message);
    for (order, label) in d.labels.iter().enumerate() {
        let mut l = Label::new(span(label.span))
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
