//! The source database: every file a compilation read, by [`FileId`], with
//! its text and a line index for turning byte offsets into line:column.
//!
//! Columns are counted in Unicode scalar values (characters), 1-based, in
//! every machine-readable output (JSON, SARIF with `columnKind:
//! unicodeCodePoints`); the language server converts to UTF-16 itself.

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
    /// Byte offset of the start of every line.
    line_starts: Vec<u32>,
}

impl SourceFile {
    fn new(path: PathBuf, name: String, text: String) -> Self {
        let mut line_starts = vec![0];
        line_starts.extend(
            text.bytes()
                .enumerate()
                .filter(|(_, b)| *b == b'\n')
                .map(|(i, _)| i as u32 + 1),
        );
        SourceFile {
            path,
            name,
            text,
            tree: None,
            line_starts,
        }
    }

    /// 1-based line and 1-based column (in characters) of a byte offset.
    /// Offsets past the end or inside a character are clamped.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let offset = self.clamp(offset);
        let line = self
            .line_starts
            .partition_point(|start| *start <= offset)
            .saturating_sub(1);
        let line_start = self.line_starts.get(line).copied().unwrap_or(0) as usize;
        let col = self
            .text
            .get(line_start..offset as usize)
            .map_or(0, |s| s.chars().count());
        (line + 1, col + 1)
    }

    /// The nearest character boundary at or before `offset`, within the text.
    pub fn clamp(&self, offset: u32) -> u32 {
        let mut offset = (offset as usize).min(self.text.len());
        while offset > 0 && !self.text.is_char_boundary(offset) {
            offset -= 1;
        }
        offset as u32
    }

    /// The text a span covers (empty if the span is out of range).
    pub fn slice(&self, span: Span) -> &str {
        let start = self.clamp(span.start) as usize;
        let end = self.clamp(span.end.max(span.start)) as usize;
        self.text.get(start..end).unwrap_or("")
    }
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
}
