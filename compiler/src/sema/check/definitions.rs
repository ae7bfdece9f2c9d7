//! Definitions: classes (and their cycles), exclusive groups, lets, bodies
//! and bundle signatures.

use std::collections::{HashMap, HashSet};

use converge_format::schema::{self, is_hard_class, AttrType};
use converge_grammar::ast::{AttrStmt, BodyDef, BundleDef, Expr, ExprKind, Ident, LetDef, Stmt};
use converge_grammar::Span;

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::sema::types::Type;
use crate::suggest::did_you_mean;

impl<'a> Checker<'a> {
    pub(super) fn check_classes(&mut self) {
        let defs = self.symbols.classes.defs.clone();
        let index: HashMap<&str, usize> =
            defs.iter().enumerate().map(|(i, (n, _))| (*n, i)).collect();
        let mut graph: Vec<Vec<usize>> = vec![Vec::new(); defs.len()];
        let mut edge_spans: HashMap<(usize, usize), Span> = HashMap::new();
        for (i, (_, def)) in defs.iter().enumerate() {
            let Some(expr) = &def.expr else { continue };
            self.class_refs = Some(Vec::new());
            self.check_guard(expr, &Vec::new());
            let refs = self.class_refs.take().unwrap_or_default();
            for (name, span) in refs {
                if let Some(&j) = index.get(name.as_str()) {
                    if let Some(edges) = graph.get_mut(i) {
                        edges.push(j);
                    }
                    edge_spans.entry((i, j)).or_insert(span);
                }
            }
        }
        for cycle in crate::graph::cycles(&graph) {
            let names: Vec<&str> = cycle
                .iter()
                .chain(cycle.first())
                .filter_map(|i| defs.get(*i).map(|(n, _)| *n))
                .collect();
            let mut labels = cycle.iter().enumerate().filter_map(|(k, from)| {
                let to = cycle.get((k + 1) % cycle.len())?;
                let span = edge_spans.get(&(*from, *to))?;
                let to_name = defs.get(*to).map(|(n, _)| *n)?;
                Some((*span, to_name))
            });
            let Some((first_span, first_to)) = labels.next() else {
                continue;
            };
            let mut d = Diagnostic::new(
                Code::DefinitionCycle,
                format!("class definitions form a cycle: {}", names.join(" -> ")),
                first_span,
                format!("uses `{first_to}`"),
            );
            for (span, to) in labels {
                d = d.with_secondary(span, format!("which uses `{to}`"));
            }
            self.push(d.with_help("a class cannot depend on itself; break the loop"));
        }
    }

    pub(super) fn check_exclusives(&mut self) {
        for group in self.symbols.exclusives.clone() {
            let mut seen: Vec<&str> = Vec::new();
            for class in &group.classes {
                if seen.contains(&class.name.as_str()) {
                    self.push(Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("`{}` is listed twice in this exclusive group", class.name),
                        class.span,
                        "listed again here",
                    ));
                }
                seen.push(&class.name);
                if let Some(id) = self.names.find(DefKind::Class, &class.name) {
                    self.names.record(class.span, id);
                } else if self.inventory_class(&class.name, class.span) {
                    // The inventory's: recorded, or reported as unknown.
                } else if is_hard_class(&class.name) {
                    let id = self.names.builtin(DefKind::HardClass, &class.name);
                    self.names.record(class.span, id);
                } else {
                    self.undefined_class(&class.name, class.span);
                }
            }
        }
    }

    pub(super) fn undefined_class(&mut self, name: &str, span: Span) {
        let hard = schema::hard_class_names();
        let inventory = self.inventory_class_names();
        let candidates = self
            .symbols
            .classes
            .names()
            .chain(hard.iter().map(String::as_str))
            .chain(inventory.iter().copied());
        let mut d = Diagnostic::new(
            Code::UndefinedClass,
            format!("undefined class `{name}`"),
            span,
            "not a defined, declared or hard class",
        );
        d = match did_you_mean(name, candidates) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(format!(
                "define it (`class {name} = ...;`), or declare it for outcomes and --define (`class {name};`)"
            )),
        };
        if name.starts_with(crate::sema::inventory::GROUP_PREFIX)
            && self.symbols.inventory.is_none()
        {
            d = d.with_note("`group_` classes come from the inventory (`inventory.toml` at the root of the policy tree, or `--inventory FILE`), and this program has none");
        }
        self.push(d);
    }

    /// The type of a global `let`, checking it on first use. The lets it
    /// reads are checked first, in dependency order, so that a long chain
    /// of lets does not recurse (`crate::sema::let_order`).
    pub fn let_type(&mut self, name: &'a str) -> Option<Type> {
        match self.let_states.get(name) {
            Some(LetState::Done(t)) => return Some(t.clone()),
            Some(LetState::InProgress) => return None,
            None => {}
        }
        let first = crate::sema::let_order::pending(self.symbols, name, |n| {
            self.let_states.contains_key(n)
        });
        for dep in first {
            self.check_let(dep);
        }
        match self.let_states.get(name) {
            Some(LetState::Done(t)) => Some(t.clone()),
            _ => self.check_let(name),
        }
    }

    fn check_let(&mut self, name: &'a str) -> Option<Type> {
        if self.let_states.contains_key(name) {
            return None;
        }
        let def: &'a LetDef = self.symbols.lets.get(name)?;
        self.let_states.insert(name, LetState::InProgress);
        let ty = match (&def.ty, data_path(&def.value)) {
            (Some(written), Some(path)) => match self.resolve_type(written) {
                Some(t) => {
                    self.load_data(name, &def.value, path, &t);
                    t
                }
                None => Type::Any,
            },
            (None, Some(_)) => {
                self.push(
                    Diagnostic::new(
                        Code::DataOutsideLet,
                        "a `let` whose value is `data(...)` needs a declared type",
                        def.name.span,
                        "no type",
                    )
                    .with_help(format!(
                        "write `let {}: TYPE = data(...);`: the file is checked against TYPE",
                        def.name.name
                    )),
                );
                Type::Any
            }
            (Some(written), None) => match self.resolve_type(written) {
                Some(t) => {
                    self.check_against(&def.value, &t, &Vec::new());
                    t
                }
                None => Type::Any,
            },
            (None, None) => self.value_type(&def.value, &Vec::new()),
        };
        self.let_states.insert(name, LetState::Done(ty.clone()));
        if let Some(id) = self.names.find(DefKind::Let, name) {
            self.names.set_type(id, ty.clone());
        }
        Some(ty)
    }

    pub(super) fn check_body(&mut self, body: &'a BodyDef) {
        let mut seen: Vec<&'a Ident> = Vec::new();
        for stmt in &body.attrs {
            match stmt {
                AttrStmt::Set(attr) => {
                    if let Some(first) = seen.iter().find(|i| i.name == attr.name.name) {
                        self.duplicate_attr(&attr.name, first.span);
                    }
                    seen.push(&attr.name);
                    let specs: Vec<&AttrType> = schema::PROMISE_TYPES
                        .iter()
                        .filter_map(|t| t.attr(&attr.name.name))
                        .map(|a| &a.ty)
                        .collect();
                    match specs.as_slice() {
                        [] => {
                            let all: Vec<&str> = all_attribute_names();
                            let mut d = Diagnostic::new(
                                Code::UnknownAttribute,
                                format!("no promise type has an attribute `{}`", attr.name.name),
                                attr.name.span,
                                "unknown attribute",
                            );
                            if let Some(s) = did_you_mean(&attr.name.name, all.iter().copied()) {
                                d = d.with_help(format!("did you mean `{s}`?"));
                            }
                            self.push(d);
                            self.value_type(&attr.value, &Vec::new());
                        }
                        [first, rest @ ..] if rest.iter().all(|t| t == first) => {
                            self.record_body_attr(&attr.name);
                            self.check_attr_value(first, &attr.value, &Vec::new());
                        }
                        // The same name with different types on different
                        // promise types (`state`): checked where it is used.
                        _ => {
                            self.record_body_attr(&attr.name);
                            self.value_type_or_word(&attr.value, &Vec::new());
                        }
                    }
                }
                AttrStmt::Use(u) => {
                    self.lookup_body(&u.body);
                }
                AttrStmt::Error(_) => {}
            }
        }
    }

    /// Records an attribute set in a body (not tied to one promise type).
    fn record_body_attr(&mut self, name: &Ident) {
        let id = self.names.builtin(DefKind::Attribute, &name.name);
        self.names.record(name.span, id);
    }

    pub(super) fn lookup_body(&mut self, name: &Ident) -> Option<&'a BodyDef> {
        match self.symbols.bodies.get(&name.name) {
            Some(body) => {
                self.used_bodies.insert(&body.name.name);
                if let Some(id) = self.names.find(DefKind::Body, &name.name) {
                    self.names.record(name.span, id);
                }
                Some(body)
            }
            None => {
                let mut d = Diagnostic::new(
                    Code::UndefinedBody,
                    format!("undefined body `{}`", name.name),
                    name.span,
                    "no body with this name",
                );
                d = match did_you_mean(&name.name, self.symbols.bodies.names()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help("define it with `body NAME { attribute = value; ... }`, or import the file that does (std/files.policy has common ones)"),
                };
                self.push(d);
                None
            }
        }
    }

    /// The attributes a body contributes, with nested `use`s flattened
    /// (a body that uses itself, directly or not, is reported once). The
    /// first setting of a name wins, in the order the statements read.
    /// Iterative, so a chain of 100,000 bodies neither overflows the stack
    /// nor checks its path quadratically (issue 14, item 21).
    pub fn body_attrs(
        &mut self,
        body: &'a BodyDef,
        via: Span,
        stack: &mut Vec<&'a str>,
    ) -> Vec<AttrSource<'a>> {
        let mut out: Vec<AttrSource<'a>> = Vec::new();
        let mut names: HashSet<&'a str> = HashSet::new();
        let mut on_path: HashSet<&'a str> = stack.iter().copied().collect();
        // (body, next statement)
        let mut work: Vec<(&'a BodyDef, usize)> = Vec::new();
        let enter = |this: &mut Self,
                     body: &'a BodyDef,
                     stack: &mut Vec<&'a str>,
                     on_path: &mut HashSet<&'a str>,
                     work: &mut Vec<(&'a BodyDef, usize)>| {
            let name: &'a str = &body.name.name;
            if !on_path.insert(name) {
                let chain: Vec<&str> = stack.iter().copied().chain([name]).collect();
                this.push(Diagnostic::new(
                    Code::DefinitionCycle,
                    format!("bodies use each other in a cycle: {}", chain.join(" -> ")),
                    body.name.span,
                    "this body is used inside itself",
                ));
                return false;
            }
            stack.push(name);
            work.push((body, 0));
            true
        };
        if !enter(self, body, stack, &mut on_path, &mut work) {
            return out;
        }
        while let Some((current, next)) = work.last_mut() {
            let Some(stmt) = current.attrs.get(*next) else {
                work.pop();
                if let Some(name) = stack.pop() {
                    on_path.remove(name);
                }
                continue;
            };
            *next += 1;
            match stmt {
                AttrStmt::Set(attr) => {
                    if names.insert(&attr.name.name) {
                        out.push(AttrSource {
                            name: &attr.name,
                            value: &attr.value,
                            via: Some(via),
                            default: None,
                        });
                    }
                }
                AttrStmt::Use(u) => {
                    if let Some(inner) = self.symbols.bodies.get(&u.body.name) {
                        enter(self, inner, stack, &mut on_path, &mut work);
                    }
                }
                AttrStmt::Error(_) => {}
            }
        }
        out
    }

    pub(super) fn duplicate_attr(&mut self, name: &Ident, first: Span) {
        self.push(
            Diagnostic::new(
                Code::DuplicateAttribute,
                format!("attribute `{}` is set twice", name.name),
                name.span,
                "set again here",
            )
            .with_secondary(first, "first set here")
            .with_help("remove one of them"),
        );
    }

    /// The declared parameter types of a bundle (reported once, cached).
    pub fn param_types(&mut self, bundle: &'a BundleDef) -> Vec<Type> {
        if let Some(types) = self.param_types.get(bundle.name.name.as_str()) {
            return types.clone();
        }
        let types: Vec<Type> = bundle
            .params
            .iter()
            .map(|p| self.resolve_type(&p.ty).unwrap_or(Type::Any))
            .collect();
        self.param_types.insert(&bundle.name.name, types.clone());
        types
    }

    /// Checks `bundle`, whose statements are `body`.
    pub(super) fn check_bundle(&mut self, bundle: &'a BundleDef, body: &[Stmt]) {
        let types = self.param_types(bundle);
        let mut scope: Scope = Vec::new();
        for (param, ty) in bundle.params.iter().zip(types) {
            if let Some(prev) = scope.iter().find(|v| v.name == param.name.name) {
                self.push(
                    Diagnostic::new(
                        Code::DuplicateDefinition,
                        format!("parameter `{}` is declared twice", param.name.name),
                        param.name.span,
                        "declared again here",
                    )
                    .with_secondary(prev.span, "first declared here"),
                );
            }
            if let Some(default) = &param.default {
                self.check_against(default, &ty, &Vec::new());
            }
            // A second parameter of one name (reported above) resolves to
            // the first.
            let Some(def) = param_def(&self.names, bundle, &param.name.name) else {
                continue;
            };
            self.names.set_type(def, ty.clone());
            scope.push(Var {
                name: param.name.name.clone(),
                ty,
                span: param.name.span,
                def,
            });
        }
        let leading = self.check_bundle_defaults(bundle, body, &scope);
        self.check_stmts(body.get(leading..).unwrap_or_default(), &mut scope);
        self.defaults = defaults::Defaults::default();
    }
}

fn all_attribute_names() -> Vec<&'static str> {
    let mut names: Vec<&'static str> = schema::PROMISE_TYPES
        .iter()
        .flat_map(|t| t.all_attrs().map(|a| a.name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The literal path of `data("...")`, when that is the whole value.
fn data_path(value: &Expr) -> Option<Option<String>> {
    let ExprKind::Call { func, args } = &value.kind else {
        return None;
    };
    if func.name != "data" {
        return None;
    }
    Some(match &args[..] {
        [Expr {
            kind: ExprKind::Str(lit),
            ..
        }] => lit.as_plain(),
        _ => None,
    })
}
