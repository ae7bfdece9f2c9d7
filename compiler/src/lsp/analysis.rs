//! Checking an open document the way `policyc check` would, with the
//! editor's unsaved texts in place of the files on disk.
//!
//! Each open document is checked as the root of a program (it and
//! everything it imports). The result keeps the loaded workspace, so that
//! navigation can look into imported files, and the diagnostics, which the
//! server merges over all open documents: a contradiction between a library
//! and the file that calls it shows in both.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use converge_grammar::FileId;

use crate::check::check;
use crate::diagnostic::Diagnostic;
use crate::workspace::{FileSystem, Workspace};

use super::index::Index;

/// One checked program, rooted at an open document.
#[derive(Debug)]
pub struct Analysis {
    pub ws: Workspace,
    pub root: FileId,
    pub diagnostics: Vec<Diagnostic>,
    pub index: Index,
}

impl Analysis {
    /// Checks `root` with `open` (path to text) overriding the disk.
    /// `None` only when the root itself cannot be read.
    pub fn run(root: &Path, open: &HashMap<PathBuf, String>) -> Option<Analysis> {
        let mut fs = FileSystem::new();
        for (path, text) in open {
            fs.insert(path.clone(), text.clone());
        }
        let mut ws = Workspace::new(fs);
        let root = ws.add_root(root).ok()?;
        let mut outcome = check(&ws);
        let index = Index::new(std::mem::take(&mut outcome.names));
        Some(Analysis {
            diagnostics: outcome.diagnostics,
            ws,
            root,
            index,
        })
    }

    /// Whether the program read the file at `path` (the root or an import).
    pub fn reads(&self, path: &Path) -> bool {
        self.file_id(path).is_some()
    }

    /// The id of a file of this program by its path (stdlib files have
    /// pseudo paths and never match a real one).
    pub fn file_id(&self, path: &Path) -> Option<FileId> {
        self.ws
            .db
            .iter()
            .find(|(id, f)| !self.is_stdlib(*id) && f.path == path)
            .map(|(id, _)| id)
    }

    /// Whether a file is the embedded standard library (it has no path an
    /// editor can open, and is never renamed into).
    pub fn is_stdlib(&self, file: FileId) -> bool {
        self.ws
            .is_stdlib
            .get(file.0 as usize)
            .copied()
            .unwrap_or(true)
    }

    /// The path of a file of the program on disk (`None` for the stdlib).
    pub fn path(&self, file: FileId) -> Option<&Path> {
        if self.is_stdlib(file) {
            return None;
        }
        self.ws.db.get(file).map(|f| f.path.as_path())
    }

    /// The text the program was checked with (the editor's, for open
    /// documents), which every span of this analysis points into.
    pub fn text(&self, file: FileId) -> &str {
        self.ws.db.get(file).map_or("", |f| f.text.as_str())
    }
}
