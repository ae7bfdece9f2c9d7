//! Loading policy: the files named by the user, and everything they import.
//!
//! A [`Workspace`] holds every file one invocation of `policyc` read, each
//! parsed once, with the import edges between them. `import "std/..."`
//! resolves to the standard library embedded in the binary; any other path
//! is relative to the importing file. Importing the same file twice (by any
//! path that leads to it) is a no-op. Import cycles and missing files are
//! diagnostics; only the files named on the command line are I/O errors.
//!
//! A *program* is one root file and the closure of its imports. When several
//! roots are given, a root that another root already imports is not checked
//! again on its own (`policyc check examples/` checks `site.policy`, which
//! imports the rest, as one program).

mod documents;
mod inventory;
mod test_files;

pub use documents::{DocumentKind, DocumentRequest};
pub use inventory::{inventory_fact_name, INVENTORY_FILE};

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use converge_grammar::ast::{Item, Module, Stmt};
use converge_grammar::{FileId, Span};

use crate::diagnostic::{Code, Diagnostic};
use crate::policy_tree::{normalize, PolicyTree, TreeError};
use crate::source::{SourceDb, MAX_FILE_BYTES};
use crate::syntax;

/// Where file contents come from: the disk, with an overlay of in-memory
/// texts (unsaved editor buffers, tests).
#[derive(Debug, Default)]
pub struct FileSystem {
    overlay: HashMap<PathBuf, String>,
}

impl FileSystem {
    pub fn new() -> Self {
        FileSystem::default()
    }

    /// Serves `text` for `path` instead of the disk's content.
    pub fn insert(&mut self, path: impl Into<PathBuf>, text: String) {
        self.overlay.insert(normalize(&path.into()), text);
    }

    /// The text of a file inside `tree`: the overlay's, or the disk's read
    /// through the tree (links leading out, FIFOs and devices refused).
    fn read(&self, path: &Path, tree: &PolicyTree) -> Result<String, ReadError> {
        tree.check(path).map_err(ReadError::from)?;
        if let Some(text) = self.overlay.get(&normalize(path)) {
            return Ok(text.clone());
        }
        let bytes = tree.read(path, MAX_FILE_BYTES).map_err(ReadError::from)?;
        String::from_utf8(bytes).map_err(|e| ReadError::NotUtf8 {
            offset: e.utf8_error().valid_up_to(),
        })
    }

    /// Whether a file is there: in the overlay, or on disk (a dangling
    /// link counts, so that reading it reports why it cannot be read).
    fn exists(&self, path: &Path) -> bool {
        self.overlay.contains_key(&normalize(path)) || path.symlink_metadata().is_ok()
    }

    /// The identity of a file: its canonical path when it exists on disk,
    /// else its lexically normalised path (overlay files).
    fn key(&self, path: &Path) -> PathBuf {
        let normal = normalize(path);
        if self.overlay.contains_key(&normal) {
            return normal;
        }
        std::fs::canonicalize(path).unwrap_or(normal)
    }
}

/// Why a file could not be read.
#[derive(Debug)]
pub enum ReadError {
    Io(std::io::Error),
    NotUtf8 {
        offset: usize,
    },
    TooLarge,
    /// Outside the policy tree, or not a regular file.
    Tree(TreeError),
}

impl From<TreeError> for ReadError {
    fn from(err: TreeError) -> Self {
        match err {
            TreeError::Io(err) => ReadError::Io(err),
            TreeError::TooLarge { .. } => ReadError::TooLarge,
            other => ReadError::Tree(other),
        }
    }
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(err) => write!(f, "{err}"),
            ReadError::NotUtf8 { offset } => write!(
                f,
                "not valid UTF-8 (first bad byte at offset {offset}); policy files must be UTF-8"
            ),
            ReadError::TooLarge => write!(f, "larger than 4 GiB"),
            ReadError::Tree(err) => write!(f, "refused: {err}"),
        }
    }
}

/// One `import` statement after resolution.
#[derive(Clone, Debug)]
pub struct ImportEdge {
    pub target: FileId,
    /// The path string of the import statement.
    pub span: Span,
}

#[derive(Debug)]
pub struct Workspace {
    pub db: SourceDb,
    /// Parsed files, indexed by `FileId`.
    pub modules: Vec<Module>,
    /// Resolved imports of each file, indexed by `FileId`.
    pub imports: Vec<Vec<ImportEdge>>,
    /// Syntax and import diagnostics of every loaded file.
    pub diagnostics: Vec<Diagnostic>,
    /// Whether each file is part of the embedded standard library.
    pub is_stdlib: Vec<bool>,
    /// The data files and templates each file names, indexed by `FileId`
    /// (`documents.rs`).
    document_edges: Vec<Vec<FileId>>,
    /// Each document request by the file naming it and the path as
    /// written: the document, or why it could not be read.
    documents: HashMap<(FileId, String), Result<FileId, Diagnostic>>,
    document_kinds: HashMap<FileId, DocumentKind>,
    /// Every template file, nested (`grammar::template::nodes`).
    templates: HashMap<FileId, Vec<converge_grammar::template::Node>>,
    /// Every policy string with template tags, nested, by its span.
    string_nodes: HashMap<Span, Vec<converge_grammar::template::Node>>,
    roots: Vec<FileId>,
    by_key: HashMap<PathBuf, FileId>,
    fs: FileSystem,
    /// `--policy-root`: the tree of every root; without it, each root's
    /// tree is its own directory.
    policy_root: Option<Arc<PolicyTree>>,
    /// `--inventory`: the inventory of every root (`inventory.rs`).
    explicit_inventory: Option<FileId>,
    /// The inventory at the root of each policy tree, by the tree's
    /// directory (`None`: the tree has none).
    tree_inventories: HashMap<PathBuf, Option<FileId>>,
    /// Every file read as an inventory: what it parsed to (`None` when it
    /// has errors).
    inventories: HashMap<FileId, Option<converge_format::inventory::Inventory>>,
}

impl Workspace {
    pub fn new(fs: FileSystem) -> Self {
        Workspace {
            db: SourceDb::new(),
            modules: Vec::new(),
            imports: Vec::new(),
            diagnostics: Vec::new(),
            is_stdlib: Vec::new(),
            document_edges: Vec::new(),
            documents: HashMap::new(),
            document_kinds: HashMap::new(),
            templates: HashMap::new(),
            string_nodes: HashMap::new(),
            roots: Vec::new(),
            by_key: HashMap::new(),
            fs,
            policy_root: None,
            explicit_inventory: None,
            tree_inventories: HashMap::new(),
            inventories: HashMap::new(),
        }
    }

    /// Sets the policy tree of every root added from now on (`--policy-root`).
    pub fn set_policy_root(&mut self, dir: &Path) {
        self.policy_root = Some(Arc::new(PolicyTree::new(dir)));
    }

    /// The policy tree of a file (`None` for the standard library).
    pub fn tree(&self, file: FileId) -> Option<&Arc<PolicyTree>> {
        self.db.tree(file)
    }

    /// Loads a file named by the user, and everything it imports. Failing to
    /// read this file itself is an error for the caller; failing to read an
    /// import is a diagnostic.
    pub fn add_root(&mut self, path: &Path) -> Result<FileId, (PathBuf, ReadError)> {
        let tree = match &self.policy_root {
            Some(tree) => Arc::clone(tree),
            None => Arc::new(PolicyTree::of_file(path)),
        };
        self.add_root_in(path, tree)
    }

    /// Loads a root file whose policy tree is `tree` (a directory named on
    /// the command line, say). The file itself must be inside it.
    pub fn add_root_in(
        &mut self,
        path: &Path,
        tree: Arc<PolicyTree>,
    ) -> Result<FileId, (PathBuf, ReadError)> {
        let key = self.fs.key(path);
        let id = match self.by_key.get(&key) {
            Some(id) => *id,
            None => {
                let text = self
                    .fs
                    .read(path, &tree)
                    .map_err(|e| (path.to_path_buf(), e))?;
                self.add_file(key, path.to_path_buf(), text, Some(Arc::clone(&tree)))
            }
        };
        self.attach_inventory(id, &tree);
        if !self.roots.contains(&id) {
            self.roots.push(id);
        }
        Ok(id)
    }

    /// Records a file, then parses it and loads its imports (iteratively,
    /// so a long import chain cannot overflow the stack).
    fn add_file(
        &mut self,
        key: PathBuf,
        path: PathBuf,
        text: String,
        tree: Option<Arc<PolicyTree>>,
    ) -> FileId {
        let mut pending = Vec::new();
        let id = self.register(key, path, text, tree, &mut pending);
        while let Some(file) = pending.pop() {
            self.parse_and_import(file, &mut pending);
        }
        id
    }

    fn parse_and_import(&mut self, file: FileId, pending: &mut Vec<FileId>) {
        let Some(source) = self.db.get(file) else {
            return;
        };
        let (module, errors) = converge_grammar::parse(file, &source.text);
        self.diagnostics
            .extend(errors.iter().map(syntax::to_diagnostic));
        let mut requests: Vec<(String, Span)> = Vec::new();
        for item in &module.items {
            let Item::Import(import) = item else { continue };
            match import.path.as_plain() {
                Some(p) => requests.push((p, import.path_span)),
                None => self.diagnostics.push(
                    Diagnostic::new(
                        Code::ImportNotPlain,
                        "import path must be a plain string",
                        import.path_span,
                        "this path uses interpolation",
                    )
                    .with_help("imports are resolved at compile time; write the path literally"),
                ),
            }
        }
        let documents = documents::requests(&module);
        self.nest_strings(&module);
        if let Some(slot) = self.modules.get_mut(file.0 as usize) {
            *slot = module;
        }
        self.load_documents(file, documents);
        for (request, span) in requests {
            if let Some(target) = self.resolve_import(file, &request, span, pending) {
                if let Some(edges) = self.imports.get_mut(file.0 as usize) {
                    edges.push(ImportEdge { target, span });
                }
            }
        }
    }

    /// Finds (loading if needed) the file an import names.
    fn resolve_import(
        &mut self,
        from: FileId,
        request: &str,
        span: Span,
        pending: &mut Vec<FileId>,
    ) -> Option<FileId> {
        let from_path = self
            .db
            .get(from)
            .map(|f| f.path.clone())
            .unwrap_or_default();
        let from_stdlib = self
            .is_stdlib
            .get(from.0 as usize)
            .copied()
            .unwrap_or(false);
        // `std/...` always means the embedded library; inside the library,
        // relative paths stay inside it.
        let stdlib_path = if let Some(rest) = request.strip_prefix("std/") {
            Some(format!("std/{rest}"))
        } else if from_stdlib && !request.starts_with('/') {
            let dir = from_path.parent().unwrap_or(Path::new(STDLIB_ROOT));
            Some(
                normalize(&dir.join(request))
                    .to_string_lossy()
                    .replace('\\', "/"),
            )
        } else {
            None
        };
        if let Some(std_path) = stdlib_path {
            let key = PathBuf::from(format!("<stdlib>/{std_path}"));
            if let Some(id) = self.by_key.get(&key) {
                return Some(*id);
            }
            let Some(text) = converge_stdlib::source(&std_path) else {
                let known: Vec<&str> = converge_stdlib::FILES.iter().map(|(p, _)| *p).collect();
                let mut d = Diagnostic::new(
                    Code::ImportNotFound,
                    format!("the standard library has no file `{std_path}`"),
                    span,
                    "imported here",
                );
                d = match crate::suggest::did_you_mean(&std_path, known.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_note(format!(
                        "the standard library files are {}",
                        known.join(", ")
                    )),
                };
                self.diagnostics.push(d);
                return None;
            };
            return Some(self.register(
                key,
                PathBuf::from(std_path),
                text.to_owned(),
                None,
                pending,
            ));
        }
        // Everything else is a file of the importer's policy tree, and only a
        // policy file: a key or `/etc/shadow` is refused before it is read,
        // so its content can never show up in a syntax error.
        let tree = self.db.tree(from).map(Arc::clone)?;
        let path = match tree.resolve(&from_path, request) {
            Ok(path) => path,
            Err(err) => {
                self.diagnostics
                    .push(outside_tree("import", request, &err, &tree, span));
                return None;
            }
        };
        if Path::new(request).extension().is_none_or(|e| e != "policy") {
            self.diagnostics.push(
                Diagnostic::new(
                    Code::ImportNotPolicy,
                    format!("cannot import `{request}`: only `.policy` files can be imported"),
                    span,
                    "not a `.policy` file",
                )
                .with_help(
                    "`import` reads policy source; embed other files with `source` or `template`",
                ),
            );
            return None;
        }
        let key = self.fs.key(&path);
        if let Some(id) = self.by_key.get(&key) {
            return Some(*id);
        }
        match self.fs.read(&path, &tree) {
            Ok(text) => Some(self.register(key, path, text, Some(tree), pending)),
            Err(ReadError::Tree(err)) if err.is_escape() => {
                self.diagnostics
                    .push(outside_tree("import", request, &err, &tree, span));
                None
            }
            Err(err) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::ImportNotFound,
                        format!("cannot import `{request}`: {err}"),
                        span,
                        format!("looked for {}", path.display()),
                    )
                    .with_help("import paths are relative to the importing file; `std/...` names the standard library"),
                );
                None
            }
        }
    }

    /// Adds a file to the database with an empty module (filled in when it
    /// is parsed) and queues it for parsing.
    fn register(
        &mut self,
        key: PathBuf,
        path: PathBuf,
        text: String,
        tree: Option<Arc<PolicyTree>>,
        pending: &mut Vec<FileId>,
    ) -> FileId {
        let id = self.add_to_db(key, path, text, tree);
        pending.push(id);
        id
    }

    /// Adds a file (policy or document) to the database, with the empty
    /// per-file slots every file has (module, imports, documents).
    fn add_to_db(
        &mut self,
        key: PathBuf,
        path: PathBuf,
        text: String,
        tree: Option<Arc<PolicyTree>>,
    ) -> FileId {
        let id = self.db.add(path, text);
        let stdlib = tree.is_none();
        if let Some(tree) = tree {
            self.db.set_tree(id, tree);
        }
        self.by_key.insert(key, id);
        self.modules.push(Module {
            file: id,
            items: Vec::new(),
        });
        self.imports.push(Vec::new());
        self.document_edges.push(Vec::new());
        self.is_stdlib.push(stdlib);
        id
    }

    /// The files named by the user, in order.
    pub fn roots(&self) -> &[FileId] {
        &self.roots
    }

    /// Takes every file's syntax tree out, leaving its module empty: for a
    /// caller that needs only the expanded programs from here on
    /// (`check::check_releasing_syntax`). The files, imports and
    /// documents stay.
    pub fn take_syntax(&mut self) -> Vec<Vec<Item>> {
        self.modules
            .iter_mut()
            .map(|module| std::mem::take(&mut module.items))
            .collect()
    }

    /// Moves the statements of every bundle defined in `files` out of the
    /// syntax trees, each with its bundle's span (the bundles stay, with
    /// empty bodies): for `check::check_releasing_syntax`, whose expansion
    /// frees them as it goes (`sema::bodies`).
    pub fn take_bundle_bodies(&mut self, files: &[FileId]) -> Vec<(Span, Vec<Stmt>)> {
        let mut bodies = Vec::new();
        for file in files {
            let Some(module) = self.modules.get_mut(file.0 as usize) else {
                continue;
            };
            for item in &mut module.items {
                if let Item::Bundle(def) = item {
                    bodies.push((def.span, std::mem::take(&mut def.body)));
                }
            }
        }
        bodies
    }

    pub fn module(&self, file: FileId) -> Option<&Module> {
        self.modules.get(file.0 as usize)
    }

    /// Every file reachable from `root` through imports, root first, each
    /// once, then the documents (data files, templates) they name.
    pub fn closure(&self, root: FileId) -> Vec<FileId> {
        let mut files = self.policy_closure(root);
        let mut docs: Vec<FileId> = Vec::new();
        for file in &files {
            for doc in self
                .document_edges
                .get(file.0 as usize)
                .into_iter()
                .flatten()
            {
                if !docs.contains(doc) {
                    docs.push(*doc);
                }
            }
        }
        files.extend(docs);
        files
    }

    /// The policy files of [`closure`](Self::closure).
    fn policy_closure(&self, root: FileId) -> Vec<FileId> {
        let mut seen = vec![false; self.modules.len()];
        let mut order = Vec::new();
        let mut stack = vec![root];
        while let Some(file) = stack.pop() {
            match seen.get_mut(file.0 as usize) {
                Some(flag) if !*flag => *flag = true,
                _ => continue,
            }
            order.push(file);
            if let Some(edges) = self.imports.get(file.0 as usize) {
                stack.extend(edges.iter().rev().map(|e| e.target));
            }
        }
        order
    }

    /// The programs to check: one per root, except that a root another
    /// root already imports is checked as part of that one (of two roots
    /// that import each other, the first named is kept).
    pub fn programs(&self) -> Vec<Vec<FileId>> {
        let closures: Vec<(FileId, Vec<FileId>)> =
            self.roots.iter().map(|r| (*r, self.closure(*r))).collect();
        closures
            .iter()
            .enumerate()
            .filter(|(i, (root, files))| {
                !closures
                    .iter()
                    .enumerate()
                    .any(|(j, (other, other_files))| {
                        j != *i && other_files.contains(root) && (!files.contains(other) || j < *i)
                    })
            })
            .map(|(_, (_, files))| files.clone())
            .collect()
    }

    /// One diagnostic per import cycle, listing every step.
    pub fn import_cycles(&self) -> Vec<Diagnostic> {
        let graph: Vec<Vec<usize>> = self
            .imports
            .iter()
            .map(|edges| edges.iter().map(|e| e.target.0 as usize).collect())
            .collect();
        crate::graph::cycles(&graph)
            .into_iter()
            .map(|cycle| self.cycle_diagnostic(&cycle))
            .collect()
    }

    fn cycle_diagnostic(&self, cycle: &[usize]) -> Diagnostic {
        // Each step: the import statement in file i that leads to file i+1.
        let steps: Vec<&ImportEdge> = cycle
            .iter()
            .enumerate()
            .filter_map(|(i, from)| {
                let to = cycle.get((i + 1) % cycle.len())?;
                self.imports
                    .get(*from)?
                    .iter()
                    .find(|e| e.target.0 as usize == *to)
            })
            .collect();
        let names: Vec<&str> = cycle
            .iter()
            .chain(cycle.first())
            .map(|f| self.db.name(FileId(*f as u32)))
            .collect();
        let chain = names.join(" -> ");
        let mut steps = steps.into_iter();
        let Some(first) = steps.next() else {
            return Diagnostic::unlocated(Code::ImportCycle, format!("import cycle: {chain}"));
        };
        let mut d = Diagnostic::new(
            Code::ImportCycle,
            format!("import cycle: {chain}"),
            first.span,
            format!("imports {}", self.db.name(first.target)),
        );
        for step in steps {
            d = d.with_secondary(
                step.span,
                format!("which imports {}", self.db.name(step.target)),
            );
        }
        d.with_help("remove one of these imports; a file may import another only if that one does not import it back")
    }
}

/// Pseudo directory of the embedded standard library in file paths.
pub const STDLIB_ROOT: &str = "std";

/// The error for a path (`import`, `source`, `template`) that leaves the
/// policy tree. It names the path as written and the tree, never anything
/// read from the file.
pub fn outside_tree(
    what: &str,
    request: &str,
    err: &TreeError,
    tree: &PolicyTree,
    span: Span,
) -> Diagnostic {
    Diagnostic::new(
        Code::OutsidePolicyTree,
        format!("`{what}` path `{request}` is outside the policy tree"),
        span,
        err.to_string(),
    )
    .with_note(format!(
        "the policy tree is `{}`; the compiler reads no file outside it",
        tree.root().display()
    ))
    .with_help("move the file into the policy tree and name it relative to this file, or pass `--policy-root DIR` to make a larger tree")
}
