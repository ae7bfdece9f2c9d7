//! Byte offsets (what spans hold) to LSP positions and back. LSP counts
//! columns in UTF-16 code units, so a line with `é` or an emoji before the
//! cursor has different byte, character and UTF-16 columns; getting this
//! wrong puts every squiggle after a non-ASCII character in the wrong place.
//!
//! The line index is the compiler's own ([`crate::source::LineIndex`]): one
//! index per text, for diagnostics' character columns and the editor's
//! UTF-16 ones alike. Files of an analysis use the index their source
//! database built when it read them.

use converge_grammar::Span;
use lsp_types::{Position, Range};

pub use crate::source::LineIndex;

use super::analysis::Analysis;

/// LSP positions from a [`LineIndex`] and the text it indexes.
pub trait LspPositions {
    /// The LSP position of a byte offset (clamped into the text, and back
    /// to the start of a character it falls inside).
    fn position(&self, text: &str, offset: u32) -> Position;

    /// The LSP range of a byte range.
    fn range(&self, text: &str, start: u32, end: u32) -> Range {
        Range::new(self.position(text, start), self.position(text, end))
    }

    /// The byte offset of an LSP position (see
    /// [`LineIndex::utf16_offset`] for positions outside the text).
    fn offset(&self, text: &str, pos: Position) -> u32;
}

impl LspPositions for LineIndex {
    fn position(&self, text: &str, offset: u32) -> Position {
        let (line, character) = self.utf16_line_col(text, offset);
        Position::new(line, character)
    }

    fn offset(&self, text: &str, pos: Position) -> u32 {
        self.utf16_offset(text, pos.line, pos.character)
    }
}

/// The LSP range of a span in one of an analysis's files, from the line
/// index its source database holds.
pub fn span_range(analysis: &Analysis, span: Span) -> Range {
    match analysis.ws.db.get(span.file) {
        Some(file) => file.lines.range(&file.text, span.start, span.end),
        None => Range::default(),
    }
}
