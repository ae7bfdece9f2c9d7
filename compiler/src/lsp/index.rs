//! Every name in the loaded files, resolved to what it names: the one walk
//! over the syntax trees that hover, go to definition, find references and
//! rename all query.
//!
//! Resolution follows the language (LANGUAGE.md section 3): classes, lets,
//! bodies and bundles are global per kind; inside a bundle a name is first a
//! `for` variable, then a parameter, then a `let`. Guards (`when`, class
//! definitions, `exclusive`, `on_*` attributes) name classes; values name
//! variables. String interpolations (`"${port}"`) are references too, so a
//! rename reaches them.

use std::collections::HashMap;

use converge_grammar::ast::{AttrStmt, Expr, ExprKind, Item, Module, Stmt};
use converge_grammar::token::{StrLit, StrPart};
use converge_grammar::{FileId, Span};
use smol_str::SmolStr;

use crate::workspace::Workspace;

/// What a name refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    Bundle(SmolStr),
    Body(SmolStr),
    Class(SmolStr),
    Let(SmolStr),
    /// A parameter of the bundle whose definition has this span.
    Param {
        bundle: Span,
        name: SmolStr,
    },
    /// The variable of the `for` loop with this span.
    LoopVar {
        scope: Span,
        name: SmolStr,
    },
    /// A host fact, by its full dotted name (`sys.hostname`).
    Fact(String),
    /// An attribute name, with the promise type it is set on (`None` in a
    /// body, whose attributes are not tied to one type).
    Attr {
        kind: Option<SmolStr>,
        name: SmolStr,
    },
    /// The type word of a promise (`file`, `package`).
    PromiseType(SmolStr),
}

impl Key {
    /// Whether renaming is offered for this kind of name.
    pub fn renamable(&self) -> bool {
        matches!(
            self,
            Key::Bundle(_)
                | Key::Body(_)
                | Key::Class(_)
                | Key::Let(_)
                | Key::Param { .. }
                | Key::LoopVar { .. }
        )
    }
}

/// One place a name is written.
#[derive(Clone, Debug)]
pub struct Occurrence {
    pub key: Key,
    pub span: Span,
    /// Whether this is the definition (rather than a use).
    pub def: bool,
}

/// All occurrences of every file of a workspace.
#[derive(Debug, Default)]
pub struct Index {
    pub occurrences: Vec<Occurrence>,
}

impl Index {
    /// Walks every file of the workspace (the stdlib included, so uses of
    /// its bundles resolve) once; lookups are then plain scans.
    pub fn build(ws: &Workspace) -> Self {
        let mut bundles = HashMap::new();
        let mut lets = std::collections::HashSet::new();
        for module in &ws.modules {
            for item in &module.items {
                match item {
                    Item::Bundle(b) => {
                        bundles.insert(b.name.name.clone(), b.span);
                    }
                    Item::Let(l) => {
                        lets.insert(l.name.name.clone());
                    }
                    _ => {}
                }
            }
        }
        let mut walker = Walker {
            out: Vec::new(),
            bundles: &bundles,
            lets: &lets,
            scopes: Vec::new(),
        };
        for module in &ws.modules {
            walker.module(module);
        }
        Index {
            occurrences: walker.out,
        }
    }

    /// The occurrence under a byte offset of a file (the end of a name
    /// counts, so the cursor just after a word finds it).
    pub fn at(&self, file: FileId, offset: u32) -> Option<&Occurrence> {
        self.occurrences
            .iter()
            .filter(|o| o.span.file == file && o.span.start <= offset && offset <= o.span.end)
            .min_by_key(|o| o.span.len())
    }

    /// Every occurrence of a key.
    pub fn all<'a>(&'a self, key: &'a Key) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.occurrences.iter().filter(move |o| &o.key == key)
    }

    /// The definitions of a key.
    pub fn definitions<'a>(&'a self, key: &'a Key) -> impl Iterator<Item = &'a Occurrence> + 'a {
        self.all(key).filter(|o| o.def)
    }
}

/// Names visible inside a bundle: its parameters and the enclosing loops.
struct Scope {
    name: SmolStr,
    key: Key,
}

struct Walker<'a> {
    out: Vec<Occurrence>,
    bundles: &'a HashMap<SmolStr, Span>,
    lets: &'a std::collections::HashSet<SmolStr>,
    scopes: Vec<Scope>,
}

/// Attributes whose value names a class set by the promise's outcome.
const CLASS_ATTRS: &[&str] = &["on_repaired", "on_kept", "on_failed"];

impl Walker<'_> {
    fn push(&mut self, key: Key, span: Span, def: bool) {
        self.out.push(Occurrence { key, span, def });
    }

    fn module(&mut self, module: &Module) {
        for item in &module.items {
            match item {
                Item::Class(c) => {
                    self.push(Key::Class(c.name.name.clone()), c.name.span, true);
                    if let Some(e) = &c.expr {
                        self.guard(e);
                    }
                }
                Item::Exclusive(x) => {
                    for c in &x.classes {
                        self.push(Key::Class(c.name.clone()), c.span, false);
                    }
                }
                Item::Let(l) => {
                    self.push(Key::Let(l.name.name.clone()), l.name.span, true);
                    self.value(&l.value);
                }
                Item::Body(b) => {
                    self.push(Key::Body(b.name.name.clone()), b.name.span, true);
                    self.attrs(None, &b.attrs);
                }
                Item::Bundle(b) => {
                    self.push(Key::Bundle(b.name.name.clone()), b.name.span, true);
                    for p in &b.params {
                        if let Some(d) = &p.default {
                            self.value(d);
                        }
                    }
                    let depth = self.scopes.len();
                    for p in &b.params {
                        let key = Key::Param {
                            bundle: b.span,
                            name: p.name.name.clone(),
                        };
                        self.push(key.clone(), p.name.span, true);
                        self.scopes.push(Scope {
                            name: p.name.name.clone(),
                            key,
                        });
                    }
                    self.stmts(&b.body);
                    self.scopes.truncate(depth);
                }
                Item::Policy(p) => self.stmts(&p.body),
                Item::Import(_) | Item::Error(_) => {}
            }
        }
    }

    fn stmts(&mut self, body: &[Stmt]) {
        for s in body {
            match s {
                Stmt::Promise(p) => {
                    self.push(Key::PromiseType(p.kind.name.clone()), p.kind.span, false);
                    self.value(&p.promiser);
                    self.attrs(Some(&p.kind.name), &p.attrs);
                }
                Stmt::When(w) => {
                    self.guard(&w.guard);
                    self.stmts(&w.body);
                }
                Stmt::For(f) => {
                    self.value(&f.list);
                    let key = Key::LoopVar {
                        scope: f.span,
                        name: f.var.name.clone(),
                    };
                    self.push(key.clone(), f.var.span, true);
                    self.scopes.push(Scope {
                        name: f.var.name.clone(),
                        key,
                    });
                    self.stmts(&f.body);
                    self.scopes.pop();
                }
                Stmt::Call(c) => {
                    self.push(Key::Bundle(c.bundle.name.clone()), c.bundle.span, false);
                    let callee = self.bundles.get(&c.bundle.name).copied();
                    for a in &c.args {
                        if let (Some(name), Some(bundle)) = (&a.name, callee) {
                            let key = Key::Param {
                                bundle,
                                name: name.name.clone(),
                            };
                            self.push(key, name.span, false);
                        }
                        self.value(&a.value);
                    }
                }
                Stmt::Error(_) => {}
            }
        }
    }

    fn attrs(&mut self, kind: Option<&SmolStr>, attrs: &[AttrStmt]) {
        for a in attrs {
            match a {
                AttrStmt::Set(set) => {
                    let key = Key::Attr {
                        kind: kind.cloned(),
                        name: set.name.name.clone(),
                    };
                    self.push(key, set.name.span, false);
                    if CLASS_ATTRS.contains(&set.name.name.as_str()) {
                        self.guard(&set.value);
                    } else {
                        self.value(&set.value);
                    }
                }
                AttrStmt::Use(u) => self.push(Key::Body(u.body.name.clone()), u.body.span, false),
                AttrStmt::Error(_) => {}
            }
        }
    }

    /// A class expression: bare names are classes, fact tests hold values.
    fn guard(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Path(parts) if parts.len() == 1 => {
                if let Some(first) = parts.first() {
                    self.push(Key::Class(first.name.clone()), first.span, false);
                }
            }
            ExprKind::Not(inner) => self.guard(inner),
            ExprKind::And(items) | ExprKind::Or(items) => {
                for i in items {
                    self.guard(i);
                }
            }
            _ => self.value(e),
        }
    }

    /// A value: names are variables (or facts, or enum words that resolve to
    /// nothing here).
    fn value(&mut self, e: &Expr) {
        match &e.kind {
            ExprKind::Path(parts) => {
                let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
                if let (Some(first), Some(last)) = (parts.first(), parts.last()) {
                    let span = first.span.to(last.span);
                    self.variable(&names, first.span, span);
                }
            }
            ExprKind::Str(s) => self.interpolations(s, e.span.file),
            ExprKind::List(items) | ExprKind::And(items) | ExprKind::Or(items) => {
                for i in items {
                    self.value(i);
                }
            }
            ExprKind::Map(entries) => {
                for (k, v) in entries {
                    self.value(k);
                    self.value(v);
                }
            }
            ExprKind::Not(inner) => self.value(inner),
            ExprKind::Compare { lhs, rhs, .. } => {
                self.value(lhs);
                self.value(rhs);
            }
            ExprKind::Ref(_)
            | ExprKind::Int { .. }
            | ExprKind::Duration(_)
            | ExprKind::Bool(_)
            | ExprKind::Error => {}
        }
    }

    fn interpolations(&mut self, s: &StrLit, file: FileId) {
        for part in &s.parts {
            let StrPart::Interp { path, start, .. } = part else {
                continue;
            };
            let names: Vec<&str> = path.iter().map(SmolStr::as_str).collect();
            let first_start = start + 2;
            let first_len = names.first().map_or(0, |n| n.len() as u32);
            let total = names
                .iter()
                .map(|n| n.len() as u32 + 1)
                .sum::<u32>()
                .saturating_sub(1);
            self.variable(
                &names,
                Span::new(file, first_start, first_start + first_len),
                Span::new(file, first_start, first_start + total),
            );
        }
    }

    /// A dotted name in a value: `first` is the span of its first part,
    /// `whole` of all of it.
    fn variable(&mut self, names: &[&str], first: Span, whole: Span) {
        let Some(head) = names.first() else { return };
        if *head == "sys" {
            self.push(Key::Fact(names.join(".")), whole, false);
            return;
        }
        if let Some(scope) = self.scopes.iter().rev().find(|s| s.name == *head) {
            let key = scope.key.clone();
            self.push(key, first, false);
        } else if self.lets.contains(*head) {
            self.push(Key::Let(SmolStr::new(head)), first, false);
        }
    }
}
