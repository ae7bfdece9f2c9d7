//! Line/column resolution shared by the machine-readable renderers.

use converge_grammar::Span;

use crate::source::SourceDb;

/// A span as 1-based lines and character columns (end exclusive).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Location {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub end_line: usize,
    pub end_column: usize,
}

pub(super) fn locate(db: &SourceDb, span: Span) -> Location {
    let (line, column, end_line, end_column) = match db.get(span.file) {
        Some(file) => {
            let (l, c) = file.line_col(span.start);
            let (el, ec) = file.line_col(span.end.max(span.start));
            (l, c, el, ec)
        }
        None => (1, 1, 1, 1),
    };
    Location {
        file: db.name(span.file).to_owned(),
        line,
        column,
        end_line,
        end_column,
    }
}
