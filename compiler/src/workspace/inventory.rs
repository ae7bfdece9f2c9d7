//! The inventory (`inventory.toml`, LANGUAGE.md section 16): the hosts of
//! the site, loaded with the policy as a document of each root file, so
//! that its problems are diagnostics at `inventory.toml:line:col`, the
//! language server publishes them on the file's URI, and it counts in the
//! bundle's source digest like every file the program reads.
//!
//! Which inventory a program uses: the one given with `--inventory FILE`
//! (any path: it is named explicitly), else `inventory.toml` at the root
//! of the root file's policy tree (the file's directory, the directory
//! named on the command line, or `--policy-root`). Without one, nothing
//! changes: `host_` classes are free and `group_` classes undefined.
//! What the checker does with it is `sema::inventory`.

use std::path::Path;
use std::sync::Arc;

use converge_format::inventory::{Inventory, InventoryError, InventoryErrorKind};
use converge_grammar::{FileId, Span};

use super::{DocumentKind, ReadError, Workspace};
use crate::diagnostic::{Code, Diagnostic};
use crate::policy_tree::{normalize, PolicyTree};

/// The name of the inventory at the root of a policy tree.
pub const INVENTORY_FILE: &str = "inventory.toml";

impl Workspace {
    /// `--inventory FILE`: the inventory of every root, instead of the
    /// trees' own. Read now, so a missing file is an input error of the
    /// command (exit 66) rather than a diagnostic.
    pub fn set_inventory(&mut self, path: &Path) -> Result<(), ReadError> {
        // Named explicitly, it may be a link to anywhere: it is read where
        // it leads (still only as a regular file of bounded size).
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let tree = Arc::new(PolicyTree::of_file(&real));
        let key = self.fs.key(path);
        let id = match self.by_key.get(&key) {
            Some(id) => *id,
            None => {
                let text = self.fs.read(&real, &tree)?;
                self.add_to_db(key, path.to_path_buf(), text, Some(tree))
            }
        };
        self.parse_inventory(id);
        self.explicit_inventory = Some(id);
        Ok(())
    }

    /// Makes the inventory of `root`'s program one of its documents.
    pub(super) fn attach_inventory(&mut self, root: FileId, tree: &Arc<PolicyTree>) {
        let inventory = match self.explicit_inventory {
            Some(id) => Some(id),
            None => self.tree_inventory(tree),
        };
        if let (Some(id), Some(docs)) = (inventory, self.document_edges.get_mut(root.0 as usize))
        {
            if !docs.contains(&id) {
                docs.push(id);
            }
        }
    }

    /// The inventory at the root of `tree`, loaded once per tree.
    fn tree_inventory(&mut self, tree: &Arc<PolicyTree>) -> Option<FileId> {
        let dir = tree.root().to_path_buf();
        if let Some(found) = self.tree_inventories.get(&dir) {
            return *found;
        }
        let path = normalize(&dir.join(INVENTORY_FILE));
        let found = self.load_tree_inventory(&path, tree);
        self.tree_inventories.insert(dir, found);
        found
    }

    fn load_tree_inventory(&mut self, path: &Path, tree: &Arc<PolicyTree>) -> Option<FileId> {
        if !self.fs.exists(path) {
            return None;
        }
        let key = self.fs.key(path);
        if let Some(id) = self.by_key.get(&key).copied() {
            self.parse_inventory(id);
            return Some(id);
        }
        match self.fs.read(path, tree) {
            Ok(text) => {
                let id = self.add_to_db(key, path.to_path_buf(), text, Some(Arc::clone(tree)));
                self.parse_inventory(id);
                Some(id)
            }
            Err(err) => {
                self.diagnostics.push(unreadable(path, &err));
                None
            }
        }
    }

    /// Parses a loaded file as the inventory (once): the result is kept for
    /// the checker, each problem becomes a diagnostic in the file.
    fn parse_inventory(&mut self, id: FileId) {
        if self.inventories.contains_key(&id) {
            return;
        }
        self.document_kinds.entry(id).or_insert(DocumentKind::Inventory);
        let text = self.db.get(id).map(|f| f.text.clone()).unwrap_or_default();
        match Inventory::parse(&text) {
            Ok(inventory) => {
                self.inventories.insert(id, Some(inventory));
            }
            Err(errors) => {
                self.inventories.insert(id, None);
                self.diagnostics
                    .extend(errors.iter().map(|e| to_diagnostic(id, &text, e)));
            }
        }
    }

    /// The inventory of the program made of `files`, when it has one that
    /// parsed. (One with errors has its diagnostics, and the program is not
    /// analysed further: `check::check` skips programs with errors in any
    /// of their files.)
    pub fn inventory(&self, files: &[FileId]) -> Option<(FileId, &Inventory)> {
        files.iter().find_map(|f| match self.inventories.get(f) {
            Some(Some(inventory)) => Some((*f, inventory)),
            _ => None,
        })
    }
}

/// An inventory that exists but cannot be read (a link out of the tree, a
/// FIFO, not UTF-8): the program is checked without it, with this error.
fn unreadable(path: &Path, err: &ReadError) -> Diagnostic {
    Diagnostic::unlocated(
        Code::InventoryUnreadable,
        format!("cannot read the inventory `{}`: {err}", path.display()),
    )
    .with_help("make it a regular UTF-8 file inside the policy tree, or name one with `--inventory FILE`")
}

/// An error of [`Inventory::parse`] as a diagnostic at its place in the
/// file (the start of the file when the parser gave no place).
fn to_diagnostic(file: FileId, text: &str, err: &InventoryError) -> Diagnostic {
    let (code, label) = match err.kind {
        InventoryErrorKind::Syntax => (Code::InventorySyntax, "not valid TOML"),
        InventoryErrorKind::Shape => (Code::InventoryShape, "not an inventory entry"),
        InventoryErrorKind::Name => (Code::InventoryName, "invalid name"),
        InventoryErrorKind::Duplicate => (Code::InventoryDuplicateHost, "listed again here"),
        InventoryErrorKind::Key => (Code::InventoryBadKey, "not a key"),
        _ => (Code::InventoryShape, "here"),
    };
    let range = err.span.clone().unwrap_or(0..0);
    let clamp = |n: usize| u32::try_from(n.min(text.len())).unwrap_or(u32::MAX);
    let span = Span::new(file, clamp(range.start), clamp(range.end.max(range.start)));
    let mut d = Diagnostic::new(code, format!("inventory: {}", err.message), span, label);
    if let Some(help) = &err.help {
        d = d.with_help(help.clone());
    } else if code == Code::InventoryShape {
        d = d.with_help(
            "each `[[host]]` has `name` and `report_key`, and may have `age_recipient`, `groups`, `facts`, `previous_report_keys` and `revoked` (docs/fleet.md)",
        );
    }
    d
}
