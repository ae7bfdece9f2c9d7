//! Loading a `*.test.policy` file (LANGUAGE.md section 16) into the
//! workspace: it is read through its policy tree and its imports are
//! resolved like a policy file's, but it is parsed as tests
//! ([`converge_grammar::parse_tests`]) and its policy module stays empty.
//! It becomes a root, so its program is the policy it imports.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use converge_grammar::ast::{TestItem, TestModule};
use converge_grammar::FileId;

use super::{ImportEdge, ReadError, Workspace};
use crate::diagnostic::{Code, Diagnostic};
use crate::policy_tree::PolicyTree;
use crate::syntax;

impl Workspace {
    /// Loads the test file at `path` (its policy tree is `--policy-root`,
    /// else its own directory) and every policy file it imports. Failing
    /// to read the file itself is an error for the caller; its syntax
    /// errors and failed imports are diagnostics.
    pub fn add_test_file(
        &mut self,
        path: &Path,
    ) -> Result<(FileId, TestModule), (PathBuf, ReadError)> {
        let tree = match &self.policy_root {
            Some(tree) => Arc::clone(tree),
            None => Arc::new(PolicyTree::of_file(path)),
        };
        let key = self.fs.key(path);
        let text = self
            .fs
            .read(path, &tree)
            .map_err(|e| (path.to_path_buf(), e))?;
        let id = match self.by_key.get(&key) {
            Some(id) => *id,
            None => self.add_to_db(
                key,
                path.to_path_buf(),
                text.clone(),
                Some(Arc::clone(&tree)),
            ),
        };
        let (module, errors) = converge_grammar::parse_tests(id, &text);
        self.diagnostics
            .extend(errors.iter().map(syntax::to_diagnostic));
        let mut pending = Vec::new();
        for item in &module.items {
            let TestItem::Import(import) = item else {
                continue;
            };
            let Some(request) = import.path.as_plain() else {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::ImportNotPlain,
                        "import path must be a plain string",
                        import.path_span,
                        "this path uses interpolation",
                    )
                    .with_help("imports are resolved at compile time; write the path literally"),
                );
                continue;
            };
            if let Some(target) = self.resolve_import(id, &request, import.path_span, &mut pending)
            {
                if let Some(edges) = self.imports.get_mut(id.0 as usize) {
                    edges.push(ImportEdge {
                        target,
                        span: import.path_span,
                    });
                }
            }
        }
        while let Some(file) = pending.pop() {
            self.parse_and_import(file, &mut pending);
        }
        self.attach_inventory(id, &tree);
        if !self.roots.contains(&id) {
            self.roots.push(id);
        }
        Ok((id, module))
    }
}
