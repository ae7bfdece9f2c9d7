//! Name resolution and type checking of one program (LANGUAGE.md sections
//! 3-4 and section 5 items 1-3 and 6).
//!
//! Checking is modular: every class, let, body and bundle is checked once,
//! on its own, with bundle parameters taken at their declared types. What
//! can only be known once bundles are called with real arguments (a
//! promiser that becomes a relative path, a word passed for an enum) is
//! checked by expansion (`expand.rs`).
//!
//! The checker is split by what it checks: [`definitions`] (classes, lets,
//! bodies, bundle signatures), [`statements`] (promises, `when`, `for`,
//! calls), [`values`] (value expressions and attribute values), [`guards`]
//! (class expressions) and [`arguments`] (binding call arguments).

mod arguments;
mod data_lets;
pub mod defaults;
mod definitions;
mod exprs;
mod guards;
mod neighbours;
pub mod probes;
mod secrets;
pub use secrets::{is_secret_name, looks_like_age, MAX_SECRET_BYTES};
mod statements;
mod system;
mod templates;
mod validate;
mod values;

pub use arguments::{bind_arguments, ArgError};
pub use statements::{promiser_problem, promiser_text, relative_path};

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use converge_grammar::ast::{BundleDef, Expr, Ident, SmolStr};
use converge_grammar::Span;

use super::bodies::Bodies;
use super::names::{DefId, DefKind, Definition, Names};
use super::symbols::Symbols;
use super::types::Type;
use crate::diagnostic::Diagnostic;

/// A variable in scope: a bundle parameter or a loop variable.
#[derive(Clone, Debug)]
pub struct Var {
    /// Owned (inline when short), so that a scope does not borrow the
    /// statements that declare its loop variables: expansion frees a
    /// bundle's statements once its last call is expanded (`sema::bodies`).
    pub name: SmolStr,
    pub ty: Type,
    pub span: Span,
    /// Its definition in the name table.
    pub def: DefId,
}

pub type Scope = Vec<Var>;

#[derive(Clone, Debug)]
pub(super) enum LetState {
    InProgress,
    Done(Type),
}

/// An attribute as it applies to a promise: set in the promise itself or
/// spliced from a body by `use`.
#[derive(Clone, Copy, Debug)]
pub struct AttrSource<'a> {
    pub name: &'a Ident,
    pub value: &'a Expr,
    /// The `use` statement that brought it in, if it came from a body.
    pub via: Option<Span>,
    /// The `defaults` block (its head) it comes from, if the promise does
    /// not set it itself (LANGUAGE.md section 17).
    pub default: Option<Span>,
}

#[derive(Debug)]
pub struct Checker<'a> {
    pub symbols: &'a Symbols<'a>,
    pub diagnostics: Vec<Diagnostic>,
    pub used_lets: HashSet<&'a str>,
    pub used_bodies: HashSet<&'a str>,
    pub used_bundles: HashSet<&'a str>,
    pub(super) let_states: HashMap<&'a str, LetState>,
    pub(super) param_types: HashMap<&'a str, Vec<Type>>,
    /// While checking a class definition: the classes its expression names.
    pub(super) class_refs: Option<Vec<(SmolStr, Span)>>,
    /// Number of promise statements checked (the summary line counts them
    /// when there is no `policy` block to expand).
    pub promise_statements: usize,
    /// What every name refers to, filled as names are resolved.
    pub names: Names,
    /// Record types built so far (`exprs::RecordSlot`).
    pub(super) records: HashMap<&'a str, exprs::RecordSlot>,
    /// The values of `let`s read from data files, checked against their
    /// types (expansion uses them).
    pub data_values: HashMap<&'a str, crate::ir::Value>,
    /// The record type of every record literal, by its span (expansion
    /// fills in defaults in declaration order).
    pub record_literals: HashMap<Span, std::sync::Arc<super::types::RecordType>>,
    /// The probe facts whose declarations check, in definition order
    /// (`probes.rs`); expansion puts them in the program.
    pub facts: Vec<(String, probes::CheckedFact)>,
    /// The file every `secret("...")` call reads, by the call's span
    /// (`secrets.rs`); expansion turns the call into
    /// [`Value::Secret`](crate::ir::Value::Secret).
    pub secrets: HashMap<Span, std::sync::Arc<crate::ir::SecretRef>>,
    /// The checked defaults of every bundle, by bundle name
    /// ([`defaults`]); expansion switches [`Checker::defaults`] to a
    /// bundle's set when it enters a call of it.
    pub bundle_defaults: HashMap<&'a str, defaults::Defaults>,
    /// The defaults of the bundle being checked or expanded: what
    /// [`Checker::promise_attrs`] adds to a promise.
    pub defaults: defaults::Defaults,
}

impl<'a> Checker<'a> {
    pub fn new(symbols: &'a Symbols<'a>) -> Self {
        Checker {
            symbols,
            diagnostics: Vec::new(),
            used_lets: HashSet::default(),
            used_bodies: HashSet::default(),
            used_bundles: HashSet::default(),
            let_states: HashMap::default(),
            param_types: HashMap::default(),
            class_refs: None,
            promise_statements: 0,
            names: global_names(symbols),
            records: HashMap::default(),
            data_values: HashMap::default(),
            record_literals: HashMap::default(),
            facts: Vec::new(),
            secrets: HashMap::default(),
            bundle_defaults: HashMap::default(),
            defaults: defaults::Defaults::default(),
        }
    }

    /// Checks every definition of the program, and completes the name
    /// table. The bundles' statements are read in `bodies`.
    pub fn check_program(&mut self, bodies: &Bodies) {
        self.check_definitions(bodies);
        self.names.finish();
    }

    fn check_definitions(&mut self, bodies: &Bodies) {
        // First: classes, lets and promises read them.
        self.check_facts();
        self.check_classes();
        self.check_inventory_clashes();
        self.check_exclusives();
        // Every declared type, used or not: a recursive or malformed type
        // is an error where it is declared.
        for (_, def) in self.symbols.types.defs.clone() {
            self.record_type(def);
        }
        for (name, _) in self.symbols.lets.defs.clone() {
            self.let_type(name);
        }
        for (_, body) in self.symbols.bodies.defs.clone() {
            self.check_body(body);
        }
        for (_, bundle) in self.symbols.bundles.defs.clone() {
            self.check_bundle(bundle, bodies.get(bundle));
        }
        if let Some(policy) = self.symbols.policy {
            self.check_stmts(&policy.body, &mut Vec::new());
        }
    }

    pub(super) fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }
}

/// The name table with the program's global definitions (classes, lets,
/// bodies, bundles and the bundles' parameters), so that a use can be
/// recorded whatever order definitions are checked in. A bundle's
/// parameters follow it, in order (see [`param_def`]).
fn global_names(symbols: &Symbols<'_>) -> Names {
    let mut names = Names::default();
    let mut global = |kind: DefKind, name: &converge_grammar::ast::Ident, item: Span| {
        names.define(
            Definition {
                kind,
                name: name.name.clone(),
                span: Some(name.span),
                item: Some(item),
                parent: None,
            },
            true,
        )
    };
    for (_, def) in &symbols.classes.defs {
        global(DefKind::Class, &def.name, def.span);
    }
    for (_, def) in &symbols.lets.defs {
        global(DefKind::Let, &def.name, def.span);
    }
    for (_, def) in &symbols.bodies.defs {
        global(DefKind::Body, &def.name, def.span);
    }
    for (_, def) in &symbols.facts.defs {
        global(DefKind::ProbeFact, &def.name, def.span);
    }
    if let Some(inventory) = &symbols.inventory {
        for (class, span) in inventory.classes() {
            names.define(
                Definition {
                    kind: DefKind::InventoryClass,
                    name: class.into(),
                    span: Some(span),
                    item: Some(span),
                    parent: None,
                },
                true,
            );
        }
    }
    for (_, def) in &symbols.types.defs {
        let ty = names.define(
            Definition {
                kind: DefKind::Type,
                name: def.name.name.clone(),
                span: Some(def.name.span),
                item: Some(def.span),
                parent: None,
            },
            true,
        );
        for field in &def.fields {
            names.define_field(
                ty,
                Definition {
                    kind: DefKind::Field,
                    name: field.name.name.clone(),
                    span: Some(field.name.span),
                    item: Some(field.span),
                    parent: Some(ty),
                },
            );
        }
    }
    for (_, bundle) in &symbols.bundles.defs {
        let bundle_id = names.define(
            Definition {
                kind: DefKind::Bundle,
                name: bundle.name.name.clone(),
                span: Some(bundle.name.span),
                item: Some(bundle.span),
                parent: None,
            },
            true,
        );
        for param in &bundle.params {
            names.define(
                Definition {
                    kind: DefKind::Param,
                    name: param.name.name.clone(),
                    span: Some(param.name.span),
                    item: Some(param.span),
                    parent: Some(bundle_id),
                },
                false,
            );
        }
    }
    names
}

/// The definition of the parameter `name` of `bundle` (the first, if two
/// have that name): parameters are defined right after their bundle.
pub(super) fn param_def(names: &Names, bundle: &BundleDef, name: &str) -> Option<DefId> {
    let bundle_id = names.find(DefKind::Bundle, &bundle.name.name)?;
    let index = bundle.params.iter().position(|p| p.name.name == name)?;
    Some(bundle_id.offset(index + 1))
}
