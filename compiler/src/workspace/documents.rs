//! The files a policy reads besides policy source: data files named by
//! `data("...")` and templates named by `template = "..."` (LANGUAGE.md
//! sections 10 and 12). They are loaded with the policy, through the same
//! policy tree and overlay as imports, so that `policyc check` reads every
//! file `policyc build` would, the language server sees unsaved buffers,
//! and every diagnostic inside them has a file, a line and a column.

use std::path::Path;
use std::sync::Arc;

use converge_grammar::ast::{AttrStmt, Expr, ExprKind, Item, Module, Stmt};
use converge_grammar::template::Node;
use converge_grammar::{FileId, Span};

use super::{outside_tree, ReadError, Workspace};
use crate::diagnostic::{Code, Diagnostic};

/// What a document is read as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DocumentKind {
    /// `data("...")`: TOML, JSON or YAML, checked against a declared type.
    Data,
    /// `template = "..."`: template text (`grammar::template`).
    Template,
    /// `source = "..."`: embedded by `policyc build`; only its path is
    /// checked here (against the policy tree), so a path that leaves the
    /// tree is an error whatever else is wrong with the policy.
    Source,
    /// `inventory.toml` (or `--inventory`): the hosts of the site, read
    /// for every program of its tree (`inventory.rs`).
    Inventory,
}

impl DocumentKind {
    fn attribute(self) -> &'static str {
        match self {
            DocumentKind::Data => "data",
            DocumentKind::Template => "template",
            DocumentKind::Source => "source",
            DocumentKind::Inventory => "inventory",
        }
    }
}

/// Where a policy file names a document.
#[derive(Clone, Debug)]
pub struct DocumentRequest {
    pub kind: DocumentKind,
    pub path: String,
    pub span: Span,
}

/// Every document `module` names with a literal path: `let x: T =
/// data("...")` and `template = "..."` in promises and bodies.
pub fn requests(module: &Module) -> Vec<DocumentRequest> {
    let mut out = Vec::new();
    for item in &module.items {
        match item {
            Item::Let(def) => {
                if let ExprKind::Call { func, args } = &def.value.kind {
                    if func.name == "data" {
                        if let [arg] = &args[..] {
                            literal(DocumentKind::Data, arg, &mut out);
                        }
                    }
                }
            }
            Item::Body(def) => attrs(&def.attrs, &mut out),
            Item::Bundle(def) => stmts(&def.body, &mut out),
            Item::Policy(def) => stmts(&def.body, &mut out),
            _ => {}
        }
    }
    out
}

fn stmts(stmts: &[Stmt], out: &mut Vec<DocumentRequest>) {
    for stmt in stmts {
        match stmt {
            Stmt::Promise(p) => attrs(&p.attrs, out),
            Stmt::Defaults(d) => attrs(&d.attrs, out),
            Stmt::When(w) => self::stmts(&w.body, out),
            Stmt::For(f) => self::stmts(&f.body, out),
            Stmt::Call(_) | Stmt::Error(_) => {}
        }
    }
}

fn attrs(attrs: &[AttrStmt], out: &mut Vec<DocumentRequest>) {
    for attr in attrs {
        if let AttrStmt::Set(a) = attr {
            match a.name.name.as_str() {
                "template" => literal(DocumentKind::Template, &a.value, out),
                name if converge_format::schema::EMBEDDED_ATTRS.contains(&name) => {
                    literal(DocumentKind::Source, &a.value, out)
                }
                _ => {}
            }
        }
    }
}

fn literal(kind: DocumentKind, expr: &Expr, out: &mut Vec<DocumentRequest>) {
    if let ExprKind::Str(lit) = &expr.kind {
        if let Some(path) = lit.as_plain() {
            out.push(DocumentRequest {
                kind,
                path,
                span: expr.span,
            });
        }
    }
}

impl Workspace {
    /// Loads the documents `file` names (each file once, however many
    /// policies name it).
    pub(super) fn load_documents(&mut self, file: FileId, requests: Vec<DocumentRequest>) {
        for request in requests {
            if request.kind == DocumentKind::Source {
                if let Some(d) = self.check_source_path(file, &request) {
                    self.documents.insert((file, request.path.clone()), Err(d));
                }
                continue;
            }
            let result = self.load_document(file, &request);
            if let Ok(doc) = result {
                if let Some(docs) = self.document_edges.get_mut(file.0 as usize) {
                    if !docs.contains(&doc) {
                        docs.push(doc);
                    }
                }
            }
            self.documents.insert((file, request.path.clone()), result);
        }
    }

    fn load_document(
        &mut self,
        from: FileId,
        request: &DocumentRequest,
    ) -> Result<FileId, Diagnostic> {
        let what = request.kind.attribute();
        let from_path = self
            .db
            .get(from)
            .map(|f| f.path.clone())
            .unwrap_or_default();
        let Some(tree) = self.db.tree(from).map(Arc::clone) else {
            return Err(Diagnostic::new(
                Code::EmbedFailed,
                format!("the standard library cannot read `{}`", request.path),
                request.span,
                "named here",
            ));
        };
        let path = tree
            .resolve(&from_path, &request.path)
            .map_err(|err| outside_tree(what, &request.path, &err, &tree, request.span))?;
        let key = self.fs.key(&path);
        if let Some(id) = self.by_key.get(&key) {
            return Ok(*id);
        }
        let text = match self.fs.read(&path, &tree) {
            Ok(text) => text,
            Err(ReadError::Tree(err)) if err.is_escape() => {
                return Err(outside_tree(what, &request.path, &err, &tree, request.span))
            }
            Err(err) => return Err(read_failed(request, &path, &err)),
        };
        let id = self.add_to_db(key, path, text, Some(tree));
        self.document_kinds.insert(id, request.kind);
        if request.kind == DocumentKind::Template {
            let text = self.db.get(id).map(|f| f.text.clone()).unwrap_or_default();
            let (parts, errors) = converge_grammar::template::parse_template(id, &text);
            self.diagnostics
                .extend(errors.iter().map(crate::syntax::to_diagnostic));
            let nodes = if errors.is_empty() {
                self.nest(&parts)
            } else {
                Vec::new()
            };
            self.templates.insert(id, nodes);
        }
        Ok(id)
    }

    /// The nested form of template parts; what does not nest is a syntax
    /// error of the file.
    pub(super) fn nest(&mut self, parts: &[converge_grammar::token::StrPart]) -> Vec<Node> {
        match converge_grammar::template::nodes(parts) {
            Ok(nodes) => nodes,
            Err(errors) => {
                self.diagnostics
                    .extend(errors.iter().map(crate::syntax::to_diagnostic));
                Vec::new()
            }
        }
    }

    /// Nests the tagged strings of a freshly parsed module.
    pub(super) fn nest_strings(&mut self, module: &Module) {
        for (span, lit) in tagged_strings(module) {
            let nodes = self.nest(&lit.parts);
            self.string_nodes.insert(span, nodes);
        }
    }

    /// The nested form of a policy string with template tags, by the
    /// string's span.
    pub fn string_nodes(&self, span: Span) -> Option<&Vec<Node>> {
        self.string_nodes.get(&span)
    }

    /// The nested form of a template file.
    pub fn template_nodes(&self, file: FileId) -> Option<&Vec<Node>> {
        self.templates.get(&file)
    }

    /// A `source` path that leaves the policy tree (by name or through a
    /// link) is refused here; reading it is `policyc build`'s
    /// (`bundle::embed`).
    fn check_source_path(&self, from: FileId, request: &DocumentRequest) -> Option<Diagnostic> {
        let tree = self.db.tree(from).map(Arc::clone)?;
        let from_path = self
            .db
            .get(from)
            .map(|f| f.path.clone())
            .unwrap_or_default();
        let refused = match tree.resolve(&from_path, &request.path) {
            Err(err) => Some(err),
            Ok(path) => match tree.check(&path) {
                Err(err) if err.is_escape() => Some(err),
                _ => None,
            },
        };
        refused.map(|err| outside_tree("source", &request.path, &err, &tree, request.span))
    }

    /// The document `from` names as `path`: its file, or why it could not
    /// be read (reported where the checker meets the name). For a `source`,
    /// only a refused path is recorded.
    pub fn document(&self, from: FileId, path: &str) -> Option<&Result<FileId, Diagnostic>> {
        self.documents.get(&(from, path.to_owned()))
    }

    /// What a loaded file is, when it is a document rather than policy.
    pub fn document_kind(&self, file: FileId) -> Option<DocumentKind> {
        self.document_kinds.get(&file).copied()
    }
}

fn read_failed(request: &DocumentRequest, path: &Path, err: &ReadError) -> Diagnostic {
    let what = request.kind.attribute();
    // A data file has its own code (docs/diagnostics.md, E0708); a
    // template or a `source` file is embedded in the bundle.
    let code = match request.kind {
        DocumentKind::Data => Code::DataUnreadable,
        DocumentKind::Template | DocumentKind::Source | DocumentKind::Inventory => {
            Code::EmbedFailed
        }
    };
    Diagnostic::new(
        code,
        format!("cannot read the {what} file `{}`: {err}", request.path),
        request.span,
        format!("looked for {}", path.display()),
    )
    .with_help(format!(
        "{what} paths are relative to the policy file that names them, inside the policy tree"
    ))
}

/// Every string of `module` that holds template tags (`{% ... %}`), with
/// the span of the string: the checker and expansion read their nested
/// form ([`Workspace::string_nodes`]).
pub fn tagged_strings(module: &Module) -> Vec<(Span, &converge_grammar::token::StrLit)> {
    let mut out = Vec::new();
    let mut walker = Walker { out: &mut out };
    for item in &module.items {
        match item {
            Item::Let(def) => walker.expr(&def.value),
            Item::Body(def) => walker.attrs(&def.attrs),
            Item::Bundle(def) => {
                for param in &def.params {
                    if let Some(d) = &param.default {
                        walker.expr(d);
                    }
                }
                walker.stmts(&def.body);
            }
            Item::Policy(def) => walker.stmts(&def.body),
            Item::Type(def) => {
                for field in &def.fields {
                    if let Some(d) = &field.default {
                        walker.expr(d);
                    }
                }
            }
            _ => {}
        }
    }
    out
}

struct Walker<'m, 'o> {
    out: &'o mut Vec<(Span, &'m converge_grammar::token::StrLit)>,
}

impl<'m> Walker<'m, '_> {
    fn stmts(&mut self, stmts: &'m [Stmt]) {
        for stmt in stmts {
            match stmt {
                Stmt::Promise(p) => {
                    self.expr(&p.promiser);
                    self.attrs(&p.attrs);
                }
                Stmt::Defaults(d) => self.attrs(&d.attrs),
                Stmt::When(w) => self.stmts(&w.body),
                Stmt::For(f) => {
                    self.expr(&f.list);
                    self.stmts(&f.body);
                }
                Stmt::Call(call) => {
                    for arg in &call.args {
                        self.expr(&arg.value);
                    }
                }
                Stmt::Error(_) => {}
            }
        }
    }

    fn attrs(&mut self, attrs: &'m [AttrStmt]) {
        for attr in attrs {
            if let AttrStmt::Set(a) = attr {
                self.expr(&a.value);
            }
        }
    }

    fn expr(&mut self, expr: &'m Expr) {
        match &expr.kind {
            ExprKind::Str(lit) => {
                if lit
                    .parts
                    .iter()
                    .any(|p| matches!(p, converge_grammar::token::StrPart::Tag(_)))
                {
                    self.out.push((expr.span, lit));
                }
            }
            ExprKind::List(items) | ExprKind::And(items) | ExprKind::Or(items) => {
                for i in items {
                    self.expr(i);
                }
            }
            ExprKind::Coalesce(items) => {
                for i in items {
                    self.expr(i);
                }
            }
            ExprKind::Call { args, .. } => {
                for i in args {
                    self.expr(i);
                }
            }
            ExprKind::Map(entries) => {
                for (k, v) in entries {
                    self.expr(k);
                    self.expr(v);
                }
            }
            ExprKind::Record(fields) => {
                for (_, v) in fields {
                    self.expr(v);
                }
            }
            ExprKind::Field { base, .. } => self.expr(base),
            ExprKind::Index { base, index } => {
                self.expr(base);
                self.expr(index);
            }
            ExprKind::Not(inner) => self.expr(inner),
            ExprKind::Compare { lhs, rhs, .. } => {
                self.expr(lhs);
                self.expr(rhs);
            }
            ExprKind::Int { .. }
            | ExprKind::Duration(_)
            | ExprKind::Bool(_)
            | ExprKind::Path(_)
            | ExprKind::Ref(_) => {}
        }
    }
}
