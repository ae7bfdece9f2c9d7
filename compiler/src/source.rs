//! The source database: every file a compilation read, by [`FileId`], with
//! its text and its [`LineIndex`], the one place byte offsets become lines
//! and columns.
//!
//! Columns are counted in Unicode scalar values (characters), 1-based, in
//! every machine-readable output (JSON, SARIF with `columnKind:
//! unicodeCodePoints`); the language server asks the same index for UTF-16
//! columns (`lsp/position.rs`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use converge_grammar::{FileId, Span};

use crate::policy_tree::PolicyTree;

/// Files larger than this are refused: spans are 32-bit byte offsets, and no
/// real policy file comes near it.
pub const MAX_FILE_BYTES: usize = u32::MAX as usize;

#[derive(Debug)]
pub struct SourceFile {
    /// Where the file was read from (or a pseudo path like `std/classes.policy`).
    pub path: PathBuf,
    /// How the file is named in diagnostics.
    pub name: String,
    pub text: String,
    /// The policy tree the file's own relative paths (`import`, `source`,
    /// `template`) must stay in; `None` for the embedded standard library.
    pub tree: Option<Arc<PolicyTree>>,
    pub lines: LineIndex,
}

impl SourceFile {
    fn new(path: PathBuf, name: String, text: String) -> Self {
        let lines = LineIndex::new(&text);
        SourceFile {
            path,
            name,
            text,
            tree: None,
            lines,
        }
    }

    /// 1-based line and 1-based column (in characters) of a byte offset.
    /// Offsets past the end or inside a character are clamped.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        self.lines.line_col(&self.text, offset)
    }

    /// The nearest character boundary at or before `offset`, within the text.
    pub fn clamp(&self, offset: u32) -> u32 {
        clamp(&self.text, offset)
    }

    /// The text a span covers (empty if the span is out of range).
    pub fn slice(&self, span: Span) -> &str {
        let start = self.clamp(span.start) as usize;
        let end = self.clamp(span.end.max(span.start)) as usize;
        self.text.get(start..end).unwrap_or("")
    }
}

/// Where every line of a text starts: byte offsets to lines and columns,
/// in characters (diagnostics) or in UTF-16 code units (the language
/// server), and back. Built once per text; each conversion is a binary
/// search plus a walk over one line.
#[derive(Clone, Debug)]
pub struct LineIndex {
    line_starts: Vec<u32>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut line_starts = vec![0];
        // `match_indices` finds the breaks with memchr, not byte by byte.
        line_starts.extend(text.match_indices('\n').map(|(i, _)| i as u32 + 1));
        LineIndex { line_starts }
    }

    /// The 0-based line of a byte offset and the text from the line's
    /// start to the offset (clamped into the text, and back to the start of
    /// a character it falls inside).
    fn line_before<'t>(&self, text: &'t str, offset: u32) -> (usize, &'t str) {
        let offset = clamp(text, offset);
        let line = self
            .line_starts
            .partition_point(|start| *start <= offset)
            .saturating_sub(1);
        let start = self.line_starts.get(line).copied().unwrap_or(0);
        let before = text.get(start as usize..offset as usize).unwrap_or("");
        (line, before)
    }

    /// 1-based line and 1-based column, in characters, of a byte offset.
    pub fn line_col(&self, text: &str, offset: u32) -> (usize, usize) {
        let (line, before) = self.line_before(text, offset);
        (line + 1, before.chars().count() + 1)
    }

    /// 0-based line and 0-based column, in UTF-16 code units (what the
    /// language server protocol counts), of a byte offset.
    pub fn utf16_line_col(&self, text: &str, offset: u32) -> (u32, u32) {
        let (line, before) = self.line_before(text, offset);
        (line as u32, before.encode_utf16().count() as u32)
    }

    /// The byte offset of a 0-based line and UTF-16 column. A column past
    /// the end of its line means the end of the line, a line past the end
    /// the end of the text (editors send both while the text is changing);
    /// a column inside a surrogate pair means the character's start.
    pub fn utf16_offset(&self, text: &str, line: u32, column: u32) -> u32 {
        let Some(start) = self.line_starts.get(line as usize).map(|s| *s as usize) else {
            return text.len() as u32;
        };
        let rest = text.get(start..).unwrap_or("");
        let rest = rest.split('\n').next().unwrap_or("");
        let mut units = 0u32;
        for (i, c) in rest.char_indices() {
            units += c.len_utf16() as u32;
            if units > column {
                return (start + i) as u32;
            }
        }
        (start + rest.len()) as u32
    }
}

/// The nearest character boundary at or before `offset`, within `text`.
fn clamp(text: &str, offset: u32) -> u32 {
    let mut offset = (offset as usize).min(text.len());
    while offset > 0 && !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset as u32
}

/// All files of one compilation.
#[derive(Debug, Default)]
pub struct SourceDb {
    files: Vec<SourceFile>,
}

impl SourceDb {
    pub fn new() -> Self {
        SourceDb::default()
    }

    /// Adds a file and returns its id. The caller has checked the size
    /// against [`MAX_FILE_BYTES`].
    pub fn add(&mut self, path: impl Into<PathBuf>, text: String) -> FileId {
        let path = path.into();
        let name = display_name(&path);
        let id = FileId(self.files.len() as u32);
        self.files.push(SourceFile::new(path, name, text));
        id
    }

    /// Records the policy tree a file was loaded in.
    pub fn set_tree(&mut self, id: FileId, tree: Arc<PolicyTree>) {
        if let Some(file) = self.files.get_mut(id.0 as usize) {
            file.tree = Some(tree);
        }
    }

    /// The policy tree of a file (`None` for the standard library).
    pub fn tree(&self, id: FileId) -> Option<&Arc<PolicyTree>> {
        self.get(id).and_then(|f| f.tree.as_ref())
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn iter(&self) -> impl Iterator<Item = (FileId, &SourceFile)> {
        self.files
            .iter()
            .enumerate()
            .map(|(i, f)| (FileId(i as u32), f))
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The name a diagnostic shows for a file.
    pub fn name(&self, id: FileId) -> &str {
        self.get(id).map_or("<unknown>", |f| f.name.as_str())
    }
}

/// Paths are shown as given on the command line (relative stays relative),
/// so that output is stable across machines and snapshot tests.
fn display_name(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters_not_bytes() {
        let mut db = SourceDb::new();
        let id = db.add("a.policy", "ab\nçé x\n".to_owned());
        let file = db.get(id).unwrap();
        assert_eq!(file.line_col(0), (1, 1));
        assert_eq!(file.line_col(3), (2, 1));
        // 'x' is at byte 3 + 2 + 2 + 1 = 8, the 4th character of line 2.
        assert_eq!(file.line_col(8), (2, 4));
        // Inside 'ç' clamps back to its start.
        assert_eq!(file.line_col(4), (2, 1));
        // Past the end clamps to the end.
        assert_eq!(file.line_col(100), (3, 1));
    }

    #[test]
    fn utf16_columns_from_the_same_index() {
        // `é` is 2 bytes and 1 UTF-16 unit; `😀` is 4 bytes and 2 units.
        let text = "a\nxé😀y = 1;\n";
        let index = LineIndex::new(text);
        let y = text.find('y').unwrap() as u32;
        assert_eq!(index.utf16_line_col(text, y), (1, 4));
        assert_eq!(index.line_col(text, y), (2, 4), "characters, 1-based");
        assert_eq!(index.utf16_offset(text, 1, 4), y);
        // Inside the emoji's surrogate pair: its start.
        let emoji = text.find('😀').unwrap() as u32;
        assert_eq!(index.utf16_offset(text, 1, 3), emoji);
        // Past the end of a line: its end; past the last line: the text end.
        assert_eq!(index.utf16_offset(text, 0, 99), 1);
        assert_eq!(index.utf16_offset(text, 9, 0), text.len() as u32);
        // An offset inside a character maps to its start.
        assert_eq!(index.utf16_line_col(text, emoji + 1), (1, 2));
    }
}
