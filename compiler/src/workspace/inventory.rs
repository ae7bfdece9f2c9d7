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

/// The name a guard reads an inventory host's static fact by (its
/// `facts = { ... }` key): a key with a dot as written (`sys.os_family`,
/// `facts.datacenter`), a bare key as the `sys` fact of that name if there
/// is one (`os_family` is `sys.os_family`), else as a probe fact
/// (`datacenter` is `facts.datacenter`). Secrets' entitlement
/// (`bundle::entitle`) and `policyc plan` (`plan::facts`) both name them so.
pub fn inventory_fact_name(key: &str) -> String {
    if key.contains('.') {
        return key.to_owned();
    }
    let sys = format!("sys.{key}");
    if converge_format::schema::fact(&sys).is_some() {
        sys
    } else {
        format!("facts.{key}")
    }
}

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
        if let (Some(id), Some(docs)) = (inventory, self.document_edges.get_mut(root.0 as usize)) {
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
        self.document_kinds
            .entry(id)
            .or_insert(DocumentKind::Inventory);
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
    .with_help(
        "make it a regular UTF-8 file inside the policy tree, or name one with `--inventory FILE`",
    )
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::workspace::FileSystem;

    const KEY: &str = "ed25519:iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w=";

    fn entry(name: &str) -> String {
        format!("[[host]]\nname = \"{name}\"\nreport_key = \"{KEY}\"\n")
    }

    /// A workspace with `site.policy` in `dir` (from the overlay) and the
    /// given other files; the root and the inventory its program uses.
    fn load(dir: &Path, files: &[(&str, String)], explicit: Option<&Path>) -> (Workspace, FileId) {
        let mut fs = FileSystem::new();
        fs.insert(dir.join("site.policy"), "policy { }\n".to_owned());
        for (name, text) in files {
            fs.insert(dir.join(name), text.clone());
        }
        let mut ws = Workspace::new(fs);
        if let Some(path) = explicit {
            ws.set_inventory(path).unwrap();
        }
        let root = ws.add_root(&dir.join("site.policy")).unwrap();
        (ws, root)
    }

    fn hosts(ws: &Workspace, root: FileId) -> Option<Vec<String>> {
        let files = ws.closure(root);
        ws.inventory(&files).map(|(_, inventory)| {
            inventory
                .hosts
                .iter()
                .map(|h| h.name.get_ref().clone())
                .collect()
        })
    }

    #[test]
    fn inventory_fact_keys_are_named_as_guards_read_them() {
        assert_eq!(inventory_fact_name("os_family"), "sys.os_family");
        assert_eq!(inventory_fact_name("datacenter"), "facts.datacenter");
        assert_eq!(inventory_fact_name("sys.cpus"), "sys.cpus");
        assert_eq!(inventory_fact_name("facts.os_family"), "facts.os_family");
    }

    #[test]
    fn the_inventory_at_the_tree_root_is_a_document_of_the_program() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, root) = load(dir.path(), &[(INVENTORY_FILE, entry("web-01"))], None);
        assert_eq!(hosts(&ws, root), Some(vec!["web-01".to_owned()]));
        let files = ws.closure(root);
        let (id, _) = ws.inventory(&files).unwrap();
        assert_eq!(ws.document_kind(id), Some(DocumentKind::Inventory));
        assert!(ws.diagnostics.is_empty(), "{:?}", ws.diagnostics);
    }

    #[test]
    fn without_an_inventory_the_program_has_none() {
        let dir = tempfile::tempdir().unwrap();
        let (ws, root) = load(dir.path(), &[], None);
        assert_eq!(hosts(&ws, root), None);
        assert_eq!(ws.closure(root), vec![root]);
    }

    #[test]
    fn an_explicit_inventory_replaces_the_trees() {
        let dir = tempfile::tempdir().unwrap();
        let other = tempfile::tempdir().unwrap();
        let path = other.path().join("hosts.toml");
        std::fs::write(&path, entry("db-01")).unwrap();
        let (ws, root) = load(
            dir.path(),
            &[(INVENTORY_FILE, entry("web-01"))],
            Some(&path),
        );
        assert_eq!(hosts(&ws, root), Some(vec!["db-01".to_owned()]));
    }

    #[test]
    fn a_missing_explicit_inventory_is_an_input_error() {
        let mut ws = Workspace::new(FileSystem::new());
        let err = ws.set_inventory(Path::new("/nonexistent/hosts.toml"));
        assert!(matches!(err, Err(ReadError::Io(_))), "{err:?}");
    }

    #[test]
    fn an_inventory_with_errors_is_diagnosed_in_its_file_and_not_used() {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("{}{}", entry("web-01"), entry("web-01"));
        let (ws, root) = load(dir.path(), &[(INVENTORY_FILE, text)], None);
        assert_eq!(hosts(&ws, root), None);
        let codes: Vec<(Code, Option<FileId>)> = ws
            .diagnostics
            .iter()
            .map(|d| (d.code, d.primary_span().map(|s| s.file)))
            .collect();
        let inventory = *ws.closure(root).last().unwrap();
        assert_ne!(inventory, root);
        assert_eq!(codes, vec![(Code::InventoryDuplicateHost, Some(inventory))]);
    }

    #[test]
    fn an_inventory_that_is_not_a_file_is_an_error_without_a_place() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(INVENTORY_FILE)).unwrap();
        let (ws, root) = load(dir.path(), &[], None);
        assert_eq!(hosts(&ws, root), None);
        assert_eq!(ws.diagnostics.len(), 1, "{:?}", ws.diagnostics);
        assert_eq!(ws.diagnostics[0].code, Code::InventoryUnreadable);
        assert!(ws.diagnostics[0].message.contains("not a regular file"));
    }
}
