//! `textDocument/formatting`: the same code as `policyc fmt`, as one edit
//! replacing the whole document (or none when it is already formatted).

use lsp_types::{Position, Range, TextEdit};

use super::position::LspPositions;
use super::server::Document;
use crate::fmt;

/// The edits that format a document, or why it cannot be formatted.
pub fn edits(doc: &Document) -> Result<Vec<TextEdit>, String> {
    let formatted = fmt::format(&doc.text).map_err(|e| format!("not formatted: the file {e}"))?;
    if formatted == doc.text {
        return Ok(Vec::new());
    }
    let end = doc.lines.position(&doc.text, doc.text.len() as u32);
    Ok(vec![TextEdit::new(
        Range::new(Position::new(0, 0), end),
        formatted,
    )])
}
