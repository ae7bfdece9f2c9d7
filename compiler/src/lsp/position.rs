//! Byte offsets (what spans hold) to LSP positions and back. LSP counts
//! columns in UTF-16 code units, so a line with `é` or an emoji before the
//! cursor has different byte, character and UTF-16 columns; getting this
//! wrong puts every squiggle after a non-ASCII character in the wrong place.

use lsp_types::{Position, Range};

/// The start of every line of one text, for converting positions.
#[derive(Debug, Clone)]
pub struct LineIndex {
    line_starts: Vec<usize>,
}

impl LineIndex {
    /// Indexes `text` once per version; every conversion then is a binary
    /// search plus a walk over one line.
    pub fn new(text: &str) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i + 1),
        );
        LineIndex { line_starts }
    }

    /// The LSP position of a byte offset (clamped into the text, and back to
    /// the start of a character it falls inside).
    pub fn position(&self, text: &str, offset: u32) -> Position {
        let mut offset = (offset as usize).min(text.len());
        while offset > 0 && !text.is_char_boundary(offset) {
            offset -= 1;
        }
        let line = self
            .line_starts
            .partition_point(|start| *start <= offset)
            .saturating_sub(1);
        let start = self.line_starts.get(line).copied().unwrap_or(0);
        let character = text
            .get(start..offset)
            .map_or(0, |s| s.encode_utf16().count());
        Position::new(line as u32, character as u32)
    }

    /// The LSP range of a byte range.
    pub fn range(&self, text: &str, start: u32, end: u32) -> Range {
        Range::new(self.position(text, start), self.position(text, end))
    }

    /// The byte offset of an LSP position. A column past the end of its
    /// line means the end of the line, a line past the end the end of the
    /// text (editors send both while the text is changing); a column inside
    /// a surrogate pair means the character's start.
    pub fn offset(&self, text: &str, pos: Position) -> u32 {
        let Some(start) = self.line_starts.get(pos.line as usize).copied() else {
            return text.len() as u32;
        };
        let line = text.get(start..).unwrap_or("");
        let line = line.split('\n').next().unwrap_or("");
        let mut units = 0u32;
        for (i, c) in line.char_indices() {
            if units >= pos.character {
                return (start + i) as u32;
            }
            units += c.len_utf16() as u32;
            if units > pos.character {
                return (start + i) as u32;
            }
        }
        (start + line.len()) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utf16_columns_for_non_ascii_text() {
        // `é` is 2 bytes and 1 UTF-16 unit; `😀` is 4 bytes and 2 units.
        let text = "a\nxé😀y = 1;\n";
        let index = LineIndex::new(text);
        let y = text.find('y').unwrap() as u32;
        assert_eq!(index.position(text, y), Position::new(1, 4));
        assert_eq!(index.offset(text, Position::new(1, 4)), y);
        // Inside the emoji's surrogate pair: its start.
        let emoji = text.find('😀').unwrap() as u32;
        assert_eq!(index.offset(text, Position::new(1, 3)), emoji);
        // Past the end of a line: its end; past the last line: the text end.
        assert_eq!(index.offset(text, Position::new(0, 99)), 1);
        assert_eq!(index.offset(text, Position::new(9, 0)), text.len() as u32);
        // An offset inside a character maps to its start.
        assert_eq!(index.position(text, emoji + 1), Position::new(1, 2));
    }
}
