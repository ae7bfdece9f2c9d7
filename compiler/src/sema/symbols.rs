//! The global names of one program. Names are global per kind (classes,
//! lets, bodies, bundles) across every file of the program; a second
//! definition is an error pointing at both.

use rustc_hash::FxHashMap as HashMap;

use converge_grammar::ast::{
    BodyDef, BundleDef, ClassDef, Exclusive, FactDef, Item, LetDef, PolicyDef, TypeDef,
};
use converge_grammar::{FileId, Span};

use crate::diagnostic::{Code, Diagnostic};
use crate::workspace::Workspace;

/// Definitions of one kind, in definition order, with a name index.
#[derive(Debug)]
pub struct Table<'a, T> {
    pub defs: Vec<(&'a str, &'a T)>,
    index: HashMap<&'a str, usize>,
}

impl<T> Default for Table<'_, T> {
    fn default() -> Self {
        Table {
            defs: Vec::new(),
            index: HashMap::default(),
        }
    }
}

impl<'a, T> Table<'a, T> {
    pub fn get(&self, name: &str) -> Option<&'a T> {
        self.index
            .get(name)
            .and_then(|i| self.defs.get(*i))
            .map(|(_, def)| *def)
    }

    /// The name of the definition `name`, as the table holds it (it lives
    /// as long as the definitions).
    pub fn key(&self, name: &str) -> Option<&'a str> {
        self.index
            .get(name)
            .and_then(|i| self.defs.get(*i))
            .map(|(key, _)| *key)
    }

    pub fn names(&self) -> impl Iterator<Item = &'a str> + '_ {
        self.defs.iter().map(|(name, _)| *name)
    }

    /// Adds a definition; returns the earlier one if the name is taken.
    fn insert(&mut self, name: &'a str, def: &'a T) -> Option<&'a T> {
        if let Some(existing) = self.get(name) {
            return Some(existing);
        }
        self.index.insert(name, self.defs.len());
        self.defs.push((name, def));
        None
    }
}

#[derive(Debug, Default)]
pub struct Symbols<'a> {
    pub classes: Table<'a, ClassDef>,
    pub lets: Table<'a, LetDef>,
    pub bodies: Table<'a, BodyDef>,
    pub bundles: Table<'a, BundleDef>,
    /// Record types (`type NAME = { ... };`).
    pub types: Table<'a, TypeDef>,
    /// Probe facts (`fact NAME: T from ...;`), read as `facts.NAME`.
    pub facts: Table<'a, FactDef>,
    pub exclusives: Vec<&'a Exclusive>,
    pub policy: Option<&'a PolicyDef>,
    /// Files of the embedded standard library (their definitions are never
    /// reported as unused).
    stdlib_files: Vec<FileId>,
    /// The workspace the program was loaded into: its data files and
    /// templates (`workspace::documents`).
    pub ws: Option<&'a Workspace>,
    /// The classes the program's inventory defines, when it has one
    /// (`sema::inventory`).
    pub inventory: Option<super::inventory::InventoryClasses>,
}

impl<'a> Symbols<'a> {
    pub fn collect(ws: &'a Workspace, files: &[FileId], diagnostics: &mut Vec<Diagnostic>) -> Self {
        let mut symbols = Symbols {
            ws: Some(ws),
            inventory: ws.inventory(files).map(|(file, inventory)| {
                super::inventory::InventoryClasses::new(file, ws.db.name(file), inventory)
            }),
            ..Symbols::default()
        };
        for &file in files {
            if ws.is_stdlib.get(file.0 as usize).copied().unwrap_or(false) {
                symbols.stdlib_files.push(file);
            }
            let Some(module) = ws.module(file) else {
                continue;
            };
            for item in &module.items {
                let clash = match item {
                    Item::Class(def) => symbols
                        .classes
                        .insert(&def.name.name, def)
                        .map(|old| ("class", &def.name.name, def.name.span, old.name.span)),
                    Item::Let(def) => symbols
                        .lets
                        .insert(&def.name.name, def)
                        .map(|old| ("let", &def.name.name, def.name.span, old.name.span)),
                    Item::Body(def) => symbols
                        .bodies
                        .insert(&def.name.name, def)
                        .map(|old| ("body", &def.name.name, def.name.span, old.name.span)),
                    Item::Bundle(def) => symbols
                        .bundles
                        .insert(&def.name.name, def)
                        .map(|old| ("bundle", &def.name.name, def.name.span, old.name.span)),
                    Item::Type(def) => symbols
                        .types
                        .insert(&def.name.name, def)
                        .map(|old| ("type", &def.name.name, def.name.span, old.name.span)),
                    Item::Fact(def) => symbols
                        .facts
                        .insert(&def.name.name, def)
                        .map(|old| ("fact", &def.name.name, def.name.span, old.name.span)),
                    Item::Exclusive(def) => {
                        symbols.exclusives.push(def);
                        None
                    }
                    Item::Policy(def) => match symbols.policy {
                        Some(old) => {
                            diagnostics.push(
                                Diagnostic::new(
                                    Code::DuplicateDefinition,
                                    "more than one `policy` block",
                                    keyword_span(def.span, "policy"),
                                    "second `policy` block",
                                )
                                .with_secondary(
                                    keyword_span(old.span, "policy"),
                                    "first `policy` block",
                                )
                                .with_help(
                                    "a program has exactly one entry point; merge the blocks",
                                ),
                            );
                            None
                        }
                        None => {
                            symbols.policy = Some(def);
                            None
                        }
                    },
                    Item::Import(_) | Item::Error(_) => None,
                };
                if let Some((kind, name, new, old)) = clash {
                    diagnostics.push(
                        Diagnostic::new(
                            Code::DuplicateDefinition,
                            format!("{kind} `{name}` is defined twice"),
                            new,
                            "defined again here",
                        )
                        .with_secondary(old, "first defined here")
                        .with_help(format!(
                            "{kind} names are global across all imported files; rename one of them"
                        )),
                    );
                }
            }
        }
        symbols
    }

    pub fn is_stdlib(&self, span: Span) -> bool {
        self.stdlib_files.contains(&span.file)
    }
}

/// The span of the keyword that starts an item (`policy`), for labels that
/// should not underline a whole block.
fn keyword_span(item: Span, keyword: &str) -> Span {
    Span::new(item.file, item.start, item.start + keyword.len() as u32)
}
