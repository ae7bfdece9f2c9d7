//! Name resolution and type checking of one program (LANGUAGE.md sections
//! 3-4 and section 5 items 1-3 and 6).
//!
//! Checking is modular: every class, let, body and bundle is checked once,
//! on its own, with bundle parameters taken at their declared types. What
//! can only be known once bundles are called with real arguments (a
//! promiser that becomes a relative path, a word passed for an enum) is
//! checked by expansion (`expand.rs`).

use std::collections::{HashMap, HashSet};

use converge_grammar::ast::{
    Arg, AttrStmt, BodyDef, BundleDef, Call, CompareOp, Expr, ExprKind, Ident, LetDef, Promise,
    Stmt,
};
use converge_grammar::token::{StrLit, StrPart};
use converge_grammar::Span;
use converge_vm::schema::{
    self, is_hard_class, promise_type, AttrType, PromiseType, PromiserKind, Rule,
};

use super::symbols::Symbols;
use super::types::{self, Type};
use crate::diagnostic::{Code, Diagnostic};
use crate::suggest::{did_you_mean, one_of};

/// A variable in scope: a bundle parameter or a loop variable.
#[derive(Clone, Debug)]
pub struct Var<'a> {
    pub name: &'a str,
    pub ty: Type,
    pub span: Span,
}

pub type Scope<'a> = Vec<Var<'a>>;

#[derive(Clone, Debug)]
enum LetState {
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
}

#[derive(Debug)]
pub struct Checker<'a> {
    pub symbols: &'a Symbols<'a>,
    pub diagnostics: Vec<Diagnostic>,
    pub used_lets: HashSet<&'a str>,
    pub used_bodies: HashSet<&'a str>,
    pub used_bundles: HashSet<&'a str>,
    let_states: HashMap<&'a str, LetState>,
    param_types: HashMap<&'a str, Vec<Type>>,
    /// While checking a class definition: the classes its expression names.
    class_refs: Option<Vec<(&'a str, Span)>>,
    /// Number of promise statements checked (the summary line counts them
    /// when there is no `policy` block to expand).
    pub promise_statements: usize,
}

impl<'a> Checker<'a> {
    pub fn new(symbols: &'a Symbols<'a>) -> Self {
        Checker {
            symbols,
            diagnostics: Vec::new(),
            used_lets: HashSet::new(),
            used_bodies: HashSet::new(),
            used_bundles: HashSet::new(),
            let_states: HashMap::new(),
            param_types: HashMap::new(),
            class_refs: None,
            promise_statements: 0,
        }
    }

    /// Checks every definition of the program.
    pub fn check_program(&mut self) {
        self.check_classes();
        self.check_exclusives();
        for (name, _) in self.symbols.lets.defs.clone() {
            self.let_type(name);
        }
        for (_, body) in self.symbols.bodies.defs.clone() {
            self.check_body(body);
        }
        for (_, bundle) in self.symbols.bundles.defs.clone() {
            self.check_bundle(bundle);
        }
        if let Some(policy) = self.symbols.policy {
            self.check_stmts(&policy.body, &mut Vec::new());
        }
    }

    fn push(&mut self, d: Diagnostic) {
        self.diagnostics.push(d);
    }

    // ------------------------------------------------------------ classes

    fn check_classes(&mut self) {
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
                if let Some(&j) = index.get(name) {
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

    fn check_exclusives(&mut self) {
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
                if self.symbols.classes.get(&class.name).is_none() && !is_hard_class(&class.name) {
                    self.undefined_class(&class.name, class.span);
                }
            }
        }
    }

    fn undefined_class(&mut self, name: &str, span: Span) {
        let hard = schema::hard_class_names();
        let candidates = self
            .symbols
            .classes
            .names()
            .chain(hard.iter().map(String::as_str));
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
        self.push(d);
    }

    // ------------------------------------------------------------ lets

    /// The type of a global `let`, checking it on first use.
    pub fn let_type(&mut self, name: &'a str) -> Option<Type> {
        match self.let_states.get(name) {
            Some(LetState::Done(t)) => return Some(t.clone()),
            Some(LetState::InProgress) => return None,
            None => {}
        }
        let def: &'a LetDef = self.symbols.lets.get(name)?;
        self.let_states.insert(name, LetState::InProgress);
        let ty = match &def.ty {
            Some(written) => match self.resolve_type(written) {
                Some(t) => {
                    self.check_against(&def.value, &t, &Vec::new());
                    t
                }
                None => Type::Any,
            },
            None => self.value_type(&def.value, &Vec::new()),
        };
        self.let_states.insert(name, LetState::Done(ty.clone()));
        Some(ty)
    }

    fn resolve_type(&mut self, ty: &converge_grammar::ast::TypeExpr) -> Option<Type> {
        match types::resolve(ty) {
            Ok(t) => Some(t),
            Err((message, span)) => {
                let mut d = Diagnostic::new(Code::UnknownType, message, span, "not a type");
                d = match did_you_mean(&ty.name.name, types::TYPE_NAMES.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_note(
                        "the types are string, int, bool, mode, duration, list<T> and map<string, T>",
                    ),
                };
                self.push(d);
                None
            }
        }
    }

    // ------------------------------------------------------------ bodies

    fn check_body(&mut self, body: &'a BodyDef) {
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
                            self.check_attr_value(first, &attr.value, &Vec::new());
                        }
                        // The same name with different types on different
                        // promise types (`state`): checked where it is used.
                        _ => {
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

    fn lookup_body(&mut self, name: &'a Ident) -> Option<&'a BodyDef> {
        match self.symbols.bodies.get(&name.name) {
            Some(body) => {
                self.used_bodies.insert(&name.name);
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
    /// (a body that uses itself, directly or not, is reported once).
    pub fn body_attrs(
        &mut self,
        body: &'a BodyDef,
        via: Span,
        stack: &mut Vec<&'a str>,
    ) -> Vec<AttrSource<'a>> {
        if stack.contains(&body.name.name.as_str()) {
            let chain: Vec<&str> = stack
                .iter()
                .copied()
                .chain([body.name.name.as_str()])
                .collect();
            self.push(Diagnostic::new(
                Code::DefinitionCycle,
                format!("bodies use each other in a cycle: {}", chain.join(" -> ")),
                body.name.span,
                "this body is used inside itself",
            ));
            return Vec::new();
        }
        stack.push(&body.name.name);
        let mut out = Vec::new();
        for stmt in &body.attrs {
            match stmt {
                AttrStmt::Set(attr) => out.push(AttrSource {
                    name: &attr.name,
                    value: &attr.value,
                    via: Some(via),
                }),
                AttrStmt::Use(u) => {
                    if let Some(inner) = self.symbols.bodies.get(&u.body.name) {
                        for a in self.body_attrs(inner, via, stack) {
                            if !out.iter().any(|o: &AttrSource| o.name.name == a.name.name) {
                                out.push(a);
                            }
                        }
                    }
                }
                AttrStmt::Error(_) => {}
            }
        }
        stack.pop();
        out
    }

    fn duplicate_attr(&mut self, name: &Ident, first: Span) {
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

    // ------------------------------------------------------------ bundles

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

    fn check_bundle(&mut self, bundle: &'a BundleDef) {
        let types = self.param_types(bundle);
        let mut scope: Scope<'a> = Vec::new();
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
            scope.push(Var {
                name: &param.name.name,
                ty,
                span: param.name.span,
            });
        }
        self.check_stmts(&bundle.body, &mut scope);
    }

    // ------------------------------------------------------------ statements

    pub fn check_stmts(&mut self, stmts: &'a [Stmt], scope: &mut Scope<'a>) {
        for stmt in stmts {
            match stmt {
                Stmt::Promise(p) => self.check_promise(p, scope),
                Stmt::When(w) => {
                    self.check_guard(&w.guard, scope);
                    self.check_stmts(&w.body, scope);
                }
                Stmt::For(f) => {
                    let list_ty = self.value_type(&f.list, scope);
                    let elem = match list_ty.element() {
                        Some(e) => e.clone(),
                        None => {
                            self.push(
                                Diagnostic::new(
                                    Code::InvalidExpression,
                                    format!("cannot loop over a value of type {}", list_ty.describe()),
                                    f.list.span,
                                    "not a list",
                                )
                                .with_help("`for x in LIST` needs a list: a literal `[...]`, a list `let`, a list parameter or `sys.ipv4`"),
                            );
                            Type::Any
                        }
                    };
                    scope.push(Var {
                        name: &f.var.name,
                        ty: elem,
                        span: f.var.span,
                    });
                    self.check_stmts(&f.body, scope);
                    scope.pop();
                }
                Stmt::Call(call) => self.check_call(call, scope),
                Stmt::Error(_) => {}
            }
        }
    }

    fn check_call(&mut self, call: &'a Call, scope: &Scope<'a>) {
        let Some(bundle) = self.symbols.bundles.get(&call.bundle.name) else {
            let mut d = Diagnostic::new(
                Code::UndefinedBundle,
                format!("undefined bundle `{}`", call.bundle.name),
                call.bundle.span,
                "no bundle with this name",
            );
            d = match did_you_mean(&call.bundle.name, self.symbols.bundles.names()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(
                    "define it with `bundle NAME { ... }`, or import the file that does",
                ),
            };
            self.push(d);
            for arg in &call.args {
                self.value_type_or_word(&arg.value, scope);
            }
            return;
        };
        self.used_bundles.insert(&bundle.name.name);
        let types = self.param_types(bundle);
        match bind_arguments(bundle, &call.args) {
            Ok(bound) => {
                for (i, arg) in bound.iter().enumerate() {
                    let ty = types.get(i).cloned().unwrap_or(Type::Any);
                    if let Some(arg) = arg {
                        self.check_against(&arg.value, &ty, scope);
                    }
                }
            }
            Err(errors) => {
                for e in errors {
                    self.push(e.into_diagnostic(bundle, call));
                }
                for arg in &call.args {
                    self.value_type_or_word(&arg.value, scope);
                }
            }
        }
    }

    fn check_promise(&mut self, p: &'a Promise, scope: &Scope<'a>) {
        self.promise_statements += 1;
        let Some(pt) = promise_type(&p.kind.name) else {
            let names: Vec<&str> = schema::PROMISE_TYPES.iter().map(|t| t.name).collect();
            let mut d = Diagnostic::new(
                Code::UnknownPromiseType,
                format!("unknown promise type `{}`", p.kind.name),
                p.kind.span,
                "not a promise type",
            );
            d = match did_you_mean(&p.kind.name, names.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_note(format!("the promise types are {}", one_of(&names))),
            };
            self.push(d);
            self.value_type(&p.promiser, scope);
            return;
        };
        self.check_promiser(pt, &p.promiser, scope);
        let attrs = self.promise_attrs(p);
        for a in &attrs {
            match pt.attr(&a.name.name) {
                Some(spec) => self.check_attr_value(&spec.ty, a.value, scope),
                None => self.unknown_attr(pt, a),
            }
        }
        self.check_rules(pt, p, &attrs);
        if pt.name == "command"
            && !attrs
                .iter()
                .any(|a| matches!(a.name.name.as_str(), "unless" | "creates"))
        {
            self.push(
                Diagnostic::new(
                    Code::NonConvergentCommand,
                    format!("command `{}` runs on every pass", promiser_text(&p.promiser)),
                    p.kind.span.to(p.promiser.span),
                    "neither `unless` nor `creates` is set",
                )
                .with_help("add `creates = \"/path/it/makes\";` or `unless = [\"/usr/bin/test\", ...];` so the command is skipped once it has done its work")
                .with_note("the VM runs a non-convergent command at most once per run"),
            );
        }
    }

    /// The attributes of a promise: its own, then those of the bodies it
    /// `use`s (an attribute set by the promise itself wins over a body's).
    pub fn promise_attrs(&mut self, p: &'a Promise) -> Vec<AttrSource<'a>> {
        let mut own: Vec<AttrSource<'a>> = Vec::new();
        let mut spliced: Vec<AttrSource<'a>> = Vec::new();
        for stmt in &p.attrs {
            match stmt {
                AttrStmt::Set(attr) => {
                    if let Some(first) = own.iter().find(|a| a.name.name == attr.name.name) {
                        let first = first.name.span;
                        self.duplicate_attr(&attr.name, first);
                        continue;
                    }
                    own.push(AttrSource {
                        name: &attr.name,
                        value: &attr.value,
                        via: None,
                    });
                }
                AttrStmt::Use(u) => {
                    if let Some(body) = self.lookup_body(&u.body) {
                        let attrs = self.body_attrs(body, u.span, &mut Vec::new());
                        spliced.extend(attrs);
                    }
                }
                AttrStmt::Error(_) => {}
            }
        }
        for a in spliced {
            let taken = own.iter().any(|o| o.name.name == a.name.name);
            if !taken {
                own.push(a);
            }
        }
        own
    }

    fn unknown_attr(&mut self, pt: &PromiseType, a: &AttrSource<'a>) {
        let names: Vec<&str> = pt.all_attrs().map(|s| s.name).collect();
        let (span, message) = match a.via {
            None => (
                a.name.span,
                format!("`{}` promises have no attribute `{}`", pt.name, a.name.name),
            ),
            Some(use_span) => (
                use_span,
                format!(
                    "this body sets `{}`, which `{}` promises do not have",
                    a.name.name, pt.name
                ),
            ),
        };
        let mut d = Diagnostic::new(Code::UnknownAttribute, message, span, "unknown attribute");
        if a.via.is_some() {
            d = d.with_secondary(a.name.span, "set in the body here");
        }
        if let Some(s) = did_you_mean(&a.name.name, names.iter().copied()) {
            d = d.with_help(format!("did you mean `{s}`?"));
        }
        d = d.with_note(format!("`{}` promises have {}", pt.name, one_of(&names)));
        self.push(d);
        self.value_type_or_word(a.value, &Vec::new());
    }

    fn check_rules(&mut self, pt: &PromiseType, p: &Promise, attrs: &[AttrSource<'a>]) {
        let find = |name: &str| attrs.iter().find(|a| a.name.name == name);
        let head = p.kind.span.to(p.promiser.span);
        let absent = find("ensure").is_some_and(|a| is_word(a.value, "absent"));
        for rule in pt.rules {
            match *rule {
                Rule::Required(name) => {
                    if find(name).is_none() {
                        self.missing_attr(pt, head, name, "");
                    }
                }
                Rule::RequiredWhenPresent(name) => {
                    if find(name).is_none() && !absent {
                        self.missing_attr(pt, head, name, " unless `ensure = absent`");
                    }
                }
                Rule::ExactlyOne(names) | Rule::AtMostOne(names) => {
                    let set: Vec<&AttrSource> = names.iter().filter_map(|n| find(n)).collect();
                    if set.is_empty() && matches!(rule, Rule::ExactlyOne(_)) {
                        self.push(
                            Diagnostic::new(
                                Code::MissingAttribute,
                                format!("a `{}` promise needs one of {}", pt.name, one_of(names)),
                                head,
                                "none of them is set",
                            )
                            .with_help(format!("set exactly one of {}", one_of(names))),
                        );
                    }
                    if let [first, second, ..] = set.as_slice() {
                        let what = if pt.name == "file" {
                            "a file has one content source".to_owned()
                        } else {
                            format!("only one of {} may be set", one_of(names))
                        };
                        self.push(
                            Diagnostic::new(
                                Code::ConflictingAttributes,
                                format!(
                                    "`{}` and `{}` cannot both be set on a `{}` promise",
                                    first.name.name, second.name.name, pt.name
                                ),
                                second.name.span,
                                format!("`{}` set here", second.name.name),
                            )
                            .with_secondary(
                                first.name.span,
                                format!("`{}` set here", first.name.name),
                            )
                            .with_help(format!("{what}; remove one of them")),
                        );
                    }
                }
                Rule::Requires(name, needs) => {
                    if let Some(a) = find(name) {
                        if find(needs).is_none() {
                            self.push(
                                Diagnostic::new(
                                    Code::MissingAttribute,
                                    format!("`{name}` needs `{needs}` on a `{}` promise", pt.name),
                                    a.name.span,
                                    format!("`{needs}` is missing"),
                                )
                                .with_help(format!("add `{needs} = ...;`")),
                            );
                        }
                    }
                }
            }
        }
    }

    fn missing_attr(&mut self, pt: &PromiseType, head: Span, name: &str, condition: &str) {
        let doc = pt.attr(name).map(|a| a.doc).unwrap_or("");
        self.push(
            Diagnostic::new(
                Code::MissingAttribute,
                format!("a `{}` promise needs `{name}`{condition}", pt.name),
                head,
                format!("`{name}` is missing"),
            )
            .with_help(format!("add `{name} = ...;` ({doc})")),
        );
    }

    fn check_promiser(&mut self, pt: &PromiseType, promiser: &'a Expr, scope: &Scope<'a>) {
        let ty = self.value_type(promiser, scope);
        if !Type::String.accepts(&ty) {
            self.mismatch(promiser.span, &Type::String, &ty, "the promiser");
            return;
        }
        if pt.promiser != PromiserKind::AbsolutePath {
            return;
        }
        if let ExprKind::Str(lit) = &promiser.kind {
            let relative = match lit.parts.first() {
                None => Some(String::new()),
                Some(StrPart::Lit(text)) if !text.starts_with('/') => Some(text.clone()),
                _ => None,
            };
            if let Some(text) = relative {
                self.push(relative_path(pt, promiser.span, &text));
            }
        }
    }

    // ------------------------------------------------------------ values

    /// Checks a value against an attribute's type, with the special forms
    /// attributes allow (enum words, class names, octal modes, refs).
    pub fn check_attr_value(&mut self, ty: &AttrType, expr: &'a Expr, scope: &Scope<'a>) {
        match ty {
            AttrType::Enum(words) => self.check_enum(words, expr, scope),
            AttrType::Class => self.check_outcome_class(expr),
            AttrType::Mode => self.check_mode(expr, scope),
            AttrType::List(inner) => match &expr.kind {
                ExprKind::List(items) => {
                    for item in items {
                        self.check_attr_value(inner, item, scope);
                    }
                }
                _ => {
                    let actual = self.value_type(expr, scope);
                    let expected = Type::of_attr(ty);
                    if !expected.accepts(&actual) {
                        self.mismatch(expr.span, &expected, &actual, "this attribute");
                    }
                }
            },
            _ => {
                let expected = Type::of_attr(ty);
                self.check_against(expr, &expected, scope);
            }
        }
    }

    fn check_enum(&mut self, words: &[&str], expr: &'a Expr, scope: &Scope<'a>) {
        let word = match &expr.kind {
            ExprKind::Path(path)
                if path.len() == 1 && self.lookup_var(&path[0].name, scope).is_none() =>
            {
                path.first().map(|i| i.name.clone())
            }
            ExprKind::Str(lit) => lit.as_plain(),
            _ => None,
        };
        match word {
            Some(w) => {
                if !words.contains(&w.as_str()) {
                    let mut d = Diagnostic::new(
                        Code::InvalidEnumValue,
                        format!("`{w}` is not a valid value here"),
                        expr.span,
                        format!("expected {}", one_of(words)),
                    );
                    if let Some(s) = did_you_mean(&w, words.iter().copied()) {
                        d = d.with_help(format!("did you mean `{s}`?"));
                    }
                    self.push(d);
                }
            }
            None => {
                let actual = self.value_type(expr, scope);
                if !Type::String.accepts(&actual) {
                    self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!(
                            "expected one of {}, found a {}",
                            one_of(words),
                            actual.describe()
                        ),
                        expr.span,
                        format!("expected {}", one_of(words)),
                    ));
                }
            }
        }
    }

    fn check_outcome_class(&mut self, expr: &Expr) {
        let ExprKind::Path(path) = &expr.kind else {
            self.push(
                Diagnostic::new(
                    Code::TypeMismatch,
                    "expected a class name",
                    expr.span,
                    "not a class name",
                )
                .with_help("write the name of a declared class: `on_repaired = config_changed;` with `class config_changed;`"),
            );
            return;
        };
        let [name] = path.as_slice() else {
            self.push(Diagnostic::new(
                Code::TypeMismatch,
                "expected a class name",
                expr.span,
                "not a class name",
            ));
            return;
        };
        match self.symbols.classes.get(&name.name) {
            Some(def) if def.expr.is_some() => self.push(
                Diagnostic::new(
                    Code::NotAnOutcomeClass,
                    format!("class `{}` is defined by an expression and cannot be set by a promise outcome", name.name),
                    name.span,
                    "set by an outcome here",
                )
                .with_secondary(def.name.span, "defined by an expression here")
                .with_help(format!("declare a separate class for the outcome: `class {}_repaired;`", name.name)),
            ),
            Some(_) => {}
            None if is_hard_class(&name.name) => self.push(
                Diagnostic::new(
                    Code::NotAnOutcomeClass,
                    format!("`{}` is a hard class, defined by the VM from facts", name.name),
                    name.span,
                    "cannot be set by an outcome",
                )
                .with_help("declare a class of your own: `class NAME;`"),
            ),
            None => {
                let mut d = Diagnostic::new(
                    Code::UndefinedClass,
                    format!("undefined class `{}`", name.name),
                    name.span,
                    "not declared",
                );
                d = match did_you_mean(&name.name, self.symbols.classes.names()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_help(format!("declare it: `class {};`", name.name)),
                };
                self.push(d);
            }
        }
    }

    fn check_mode(&mut self, expr: &'a Expr, scope: &Scope<'a>) {
        if let ExprKind::Int { value, octal } = expr.kind {
            if !(0..=0o7777).contains(&value) {
                self.push(
                    Diagnostic::new(
                        Code::ModeOutOfRange,
                        format!("mode {} is out of range", format_mode(value, octal)),
                        expr.span,
                        "modes are 0o0 to 0o7777",
                    )
                    .with_help("write the permission bits in octal, e.g. `0o644` or `0o2755`"),
                );
            } else if !octal && value > 7 {
                let looks_octal = value
                    .to_string()
                    .bytes()
                    .all(|b| (b'0'..=b'7').contains(&b));
                let mut d = Diagnostic::new(
                    Code::DecimalMode,
                    format!("mode written in decimal: {value} is 0o{value:o}"),
                    expr.span,
                    "decimal number",
                );
                if looks_octal {
                    d = d.with_help(format!("if you meant octal, write `0o{value}`"));
                }
                self.push(d);
            }
            return;
        }
        self.check_against(expr, &Type::Mode, scope);
    }

    /// Checks that a value has (or is accepted as) the expected type.
    pub fn check_against(&mut self, expr: &'a Expr, expected: &Type, scope: &Scope<'a>) {
        match (&expr.kind, expected) {
            (ExprKind::Int { .. }, Type::Mode) => {
                if let Some(attr) = mode_attr() {
                    self.check_attr_value(attr, expr, scope);
                }
            }
            (ExprKind::List(items), Type::List(inner)) => {
                for item in items {
                    self.check_against(item, inner, scope);
                }
            }
            _ => {
                let actual = self.value_type(expr, scope);
                if !expected.accepts(&actual) {
                    self.mismatch(expr.span, expected, &actual, "this value");
                }
            }
        }
    }

    fn mismatch(&mut self, span: Span, expected: &Type, actual: &Type, what: &str) {
        self.push(Diagnostic::new(
            Code::TypeMismatch,
            format!(
                "expected {}, found {}",
                expected.describe(),
                actual.describe()
            ),
            span,
            format!("{what} must be a {}", expected.describe()),
        ));
    }

    /// Like [`value_type`](Self::value_type), but a bare word that is not a
    /// variable is accepted (its meaning depends on where it is used).
    fn value_type_or_word(&mut self, expr: &'a Expr, scope: &Scope<'a>) -> Type {
        if let ExprKind::Path(path) = &expr.kind {
            if let [one] = path.as_slice() {
                if self.lookup_var(&one.name, scope).is_none()
                    && self.symbols.lets.get(&one.name).is_none()
                {
                    return Type::String;
                }
            }
        }
        self.value_type(expr, scope)
    }

    /// The type of a value expression, reporting what is wrong inside it.
    pub fn value_type(&mut self, expr: &'a Expr, scope: &Scope<'a>) -> Type {
        match &expr.kind {
            ExprKind::Str(lit) => {
                self.check_interpolation(lit, expr.span, scope);
                Type::String
            }
            ExprKind::Int { .. } => Type::Int,
            ExprKind::Duration(_) => Type::Duration,
            ExprKind::Bool(_) => Type::Bool,
            ExprKind::Path(path) => self.path_type(path, expr.span, scope),
            ExprKind::List(items) => {
                let mut elem = Type::Any;
                for item in items {
                    let t = self.value_type(item, scope);
                    if elem == Type::Any {
                        elem = t;
                    } else if !elem.accepts(&t) {
                        self.push(Diagnostic::new(
                            Code::TypeMismatch,
                            format!(
                                "list elements must all have one type: expected {}, found {}",
                                elem.describe(),
                                t.describe()
                            ),
                            item.span,
                            format!("a {}", t.describe()),
                        ));
                    }
                }
                Type::List(Box::new(elem))
            }
            ExprKind::Map(entries) => {
                let mut elem = Type::Any;
                for (key, value) in entries {
                    match &key.kind {
                        ExprKind::Str(lit) if lit.as_plain().is_some() => {}
                        _ => self.push(
                            Diagnostic::new(
                                Code::InvalidExpression,
                                "map keys must be plain strings",
                                key.span,
                                "not a plain string",
                            )
                            .with_help("write the key in quotes: `{ \"http\": 80 }`"),
                        ),
                    }
                    let t = self.value_type(value, scope);
                    if elem == Type::Any {
                        elem = t;
                    } else if !elem.accepts(&t) {
                        self.push(Diagnostic::new(
                            Code::TypeMismatch,
                            format!(
                                "map values must all have one type: expected {}, found {}",
                                elem.describe(),
                                t.describe()
                            ),
                            value.span,
                            format!("a {}", t.describe()),
                        ));
                    }
                }
                Type::Map(Box::new(elem))
            }
            ExprKind::Ref { kind, target } => {
                if kind.name != "id" && promise_type(&kind.name).is_none() {
                    let mut names: Vec<&str> =
                        schema::PROMISE_TYPES.iter().map(|t| t.name).collect();
                    names.push("id");
                    let mut d = Diagnostic::new(
                        Code::UnknownPromiseType,
                        format!("`{}` is not a promise type", kind.name),
                        kind.span,
                        "a reference names a promise type or `id`",
                    );
                    if let Some(s) = did_you_mean(&kind.name, names.iter().copied()) {
                        d = d.with_help(format!("did you mean `{s}`?"));
                    }
                    self.push(d);
                }
                self.check_interpolation(target, expr.span, scope);
                Type::Ref
            }
            ExprKind::Not(_) | ExprKind::And(..) | ExprKind::Or(..) | ExprKind::Compare { .. } => {
                self.push(
                    Diagnostic::new(
                        Code::InvalidExpression,
                        "a class expression cannot be used as a value",
                        expr.span,
                        "class expression",
                    )
                    .with_help("define a class with it (`class x = ...;`) and guard promises with `when x { ... }`"),
                );
                Type::Any
            }
            ExprKind::Error => Type::Any,
        }
    }

    fn lookup_var<'s>(&self, name: &str, scope: &'s Scope<'a>) -> Option<&'s Var<'a>> {
        scope.iter().rev().find(|v| v.name == name)
    }

    /// The type of a name: a variable, a `let` (possibly indexed as a map:
    /// `ports.http`), or a fact `sys.x`.
    fn path_type(&mut self, path: &'a [Ident], span: Span, scope: &Scope<'a>) -> Type {
        let Some(first) = path.first() else {
            return Type::Any;
        };
        if first.name == "sys" {
            return self.fact_type(path, span);
        }
        let base = if let Some(var) = self.lookup_var(&first.name, scope) {
            var.ty.clone()
        } else if self.symbols.lets.get(&first.name).is_some() {
            self.used_lets.insert(&first.name);
            match self.let_type(&first.name) {
                Some(t) => t,
                None => {
                    let let_span = self.symbols.lets.get(&first.name).map(|l| l.name.span);
                    let mut d = Diagnostic::new(
                        Code::DefinitionCycle,
                        format!("`{}` is used in its own definition", first.name),
                        first.span,
                        "used here",
                    );
                    if let Some(s) = let_span {
                        d = d.with_secondary(s, "while defining this");
                    }
                    self.push(d);
                    Type::Any
                }
            }
        } else {
            self.undefined_variable(&first.name, first.span, scope);
            return Type::Any;
        };
        let mut ty = base;
        for key in path.iter().skip(1) {
            ty = match ty {
                Type::Map(inner) => *inner,
                Type::Any => Type::Any,
                other => {
                    self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!(
                            "`.{}` needs a map, but this is a {}",
                            key.name,
                            other.describe()
                        ),
                        key.span,
                        "not a map",
                    ));
                    return Type::Any;
                }
            };
        }
        ty
    }

    fn fact_type(&mut self, path: &[Ident], span: Span) -> Type {
        let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let name = name.join(".");
        match schema::fact(&name) {
            Some(f) => Type::of_attr(&f.ty),
            None => {
                let mut d = Diagnostic::new(
                    Code::UnknownFact,
                    format!("unknown fact `{name}`"),
                    span,
                    "not a fact the VM gathers",
                );
                let names: Vec<&str> = schema::FACTS.iter().map(|f| f.name).collect();
                d = match did_you_mean(&name, names.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None => d.with_note(format!("the facts are {}", names.join(", "))),
                };
                self.push(d);
                Type::Any
            }
        }
    }

    fn undefined_variable(&mut self, name: &str, span: Span, scope: &Scope<'a>) {
        let mut candidates: Vec<&str> = scope.iter().map(|v| v.name).collect();
        candidates.extend(self.symbols.lets.names());
        let mut d = Diagnostic::new(
            Code::UndefinedVariable,
            format!("undefined variable `{name}`"),
            span,
            "not a parameter, loop variable or let in scope",
        );
        d = match did_you_mean(name, candidates.iter().copied()) {
            Some(s) => d.with_help(format!("did you mean `{s}`?")),
            None => d.with_help(format!(
                "define it with `let {name} = ...;` or pass it as a bundle parameter"
            )),
        };
        self.push(d);
    }

    /// Every `${...}` of a string must name something in scope.
    fn check_interpolation(&mut self, lit: &StrLit, span: Span, scope: &Scope<'a>) {
        for part in &lit.parts {
            let StrPart::Interp { path, start, end } = part else {
                continue;
            };
            let part_span = Span::new(span.file, *start, *end);
            let Some(first) = path.first() else { continue };
            let ty = if first == "sys" {
                let idents: Vec<Ident> = path
                    .iter()
                    .map(|p| Ident {
                        name: p.clone(),
                        span: part_span,
                    })
                    .collect();
                self.fact_type(&idents, part_span)
            } else if let Some(var) = self.lookup_var(first, scope) {
                index_type(var.ty.clone(), path.len())
            } else if let Some((name, _)) = self.symbols.lets.defs.iter().find(|(n, _)| *n == first)
            {
                let name: &'a str = name;
                self.used_lets.insert(name);
                index_type(self.let_type(name).unwrap_or(Type::Any), path.len())
            } else {
                self.undefined_variable(first, part_span, scope);
                Type::Any
            };
            if !ty.is_scalar() {
                self.push(
                    Diagnostic::new(
                        Code::TypeMismatch,
                        format!("cannot interpolate a {} into a string", ty.describe()),
                        part_span,
                        "not a single value",
                    )
                    .with_help(
                        "loop over a list with `for x in LIST { ... }` and interpolate `${x}`",
                    ),
                );
            }
        }
    }

    // ------------------------------------------------------------ guards

    /// Checks a class expression (a `when` guard or a class definition).
    pub fn check_guard(&mut self, expr: &'a Expr, scope: &Scope<'a>) {
        match &expr.kind {
            ExprKind::Bool(_) | ExprKind::Error => {}
            ExprKind::Path(path) => match path.as_slice() {
                [one] => self.check_class_name(one, scope),
                [first, ..] if first.name == "sys" => self.push(
                    Diagnostic::new(
                        Code::InvalidExpression,
                        "a fact is not a class",
                        expr.span,
                        "compare it with a value",
                    )
                    .with_help("write a test such as `sys.os_family == \"debian\"`"),
                ),
                _ => {
                    let ty = self.value_type(expr, scope);
                    if !Type::Bool.accepts(&ty) {
                        self.mismatch(expr.span, &Type::Bool, &ty, "a guard");
                    }
                }
            },
            ExprKind::Not(inner) => self.check_guard(inner, scope),
            ExprKind::And(a, b) | ExprKind::Or(a, b) => {
                self.check_guard(a, scope);
                self.check_guard(b, scope);
            }
            ExprKind::Compare { op, lhs, rhs } => self.check_compare(*op, lhs, rhs, scope),
            _ => self.push(
                Diagnostic::new(
                    Code::InvalidExpression,
                    "not a class expression",
                    expr.span,
                    "a value, not a condition",
                )
                .with_help("a guard combines classes with `!`, `&&`, `||`, and tests facts with `==`, `!=`, `=~`, `in`"),
            ),
        }
    }

    fn check_class_name(&mut self, name: &'a Ident, scope: &Scope<'a>) {
        if let Some(refs) = &mut self.class_refs {
            refs.push((&name.name, name.span));
        }
        if self.symbols.classes.get(&name.name).is_some() || is_hard_class(&name.name) {
            return;
        }
        // A boolean parameter, loop variable or let may guard too.
        let var_ty = self.lookup_var(&name.name, scope).map(|v| v.ty.clone());
        let ty = match var_ty {
            Some(t) => Some(t),
            None if self.symbols.lets.get(&name.name).is_some() => {
                self.used_lets.insert(&name.name);
                self.let_type(&name.name)
            }
            None => None,
        };
        match ty {
            Some(t) if Type::Bool.accepts(&t) => {}
            Some(t) => self.push(Diagnostic::new(
                Code::TypeMismatch,
                format!(
                    "`{}` is a {}, not a class or a bool",
                    name.name,
                    t.describe()
                ),
                name.span,
                "cannot guard with this",
            )),
            None => self.undefined_class(&name.name, name.span),
        }
    }

    fn check_compare(&mut self, op: CompareOp, lhs: &'a Expr, rhs: &'a Expr, scope: &Scope<'a>) {
        match op {
            CompareOp::Eq | CompareOp::NotEq => {
                let l = self.value_type(lhs, scope);
                let r = self.value_type(rhs, scope);
                if !l.is_scalar() || !(l.accepts(&r) || r.accepts(&l)) {
                    self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!("cannot compare a {} with a {}", l.describe(), r.describe()),
                        lhs.span.to(rhs.span),
                        format!("`{}` needs two values of one type", op.as_str()),
                    ));
                }
            }
            CompareOp::Match => {
                let l = self.value_type(lhs, scope);
                if !Type::String.accepts(&l) {
                    self.mismatch(lhs.span, &Type::String, &l, "the left side of `=~`");
                }
                match &rhs.kind {
                    ExprKind::Str(lit) => match lit.as_plain() {
                        Some(pattern) => {
                            if let Err(err) = regex::Regex::new(&pattern) {
                                self.push(
                                    Diagnostic::new(
                                        Code::InvalidRegex,
                                        "invalid regular expression",
                                        rhs.span,
                                        "the regex engine rejects this pattern",
                                    )
                                    .with_note(regex_error_text(&err))
                                    .with_help("regexes follow the syntax of Rust's regex crate; write them as raw strings r\"...\""),
                                );
                            }
                        }
                        None => self.push(
                            Diagnostic::new(
                                Code::InvalidExpression,
                                "a regex must be a literal string",
                                rhs.span,
                                "uses interpolation",
                            )
                            .with_help("regexes are compiled and checked at compile time; write them as raw strings r\"...\""),
                        ),
                    },
                    _ => self.push(
                        Diagnostic::new(
                            Code::InvalidExpression,
                            "the right side of `=~` must be a regex literal",
                            rhs.span,
                            "not a string literal",
                        )
                        .with_help("write the pattern as a raw string: `sys.hostname =~ r\"^web[0-9]+$\"`"),
                    ),
                }
            }
            CompareOp::In => {
                let l = self.value_type(lhs, scope);
                let r = self.value_type(rhs, scope);
                match r.element() {
                    Some(elem) if elem.accepts(&l) => {}
                    Some(elem) => self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!(
                            "cannot look for a {} in a list of {}",
                            l.describe(),
                            elem.describe()
                        ),
                        lhs.span,
                        format!("a {}", l.describe()),
                    )),
                    None => self.push(Diagnostic::new(
                        Code::TypeMismatch,
                        format!("`in` needs a list on its right, found {}", r.describe()),
                        rhs.span,
                        "not a list",
                    )),
                }
            }
        }
    }
}

/// The type of `x.a.b` given the type of `x` and the path length.
fn index_type(mut ty: Type, len: usize) -> Type {
    for _ in 1..len {
        ty = match ty {
            Type::Map(inner) => *inner,
            _ => return Type::Any,
        };
    }
    ty
}

fn mode_attr() -> Option<&'static AttrType> {
    promise_type("file")
        .and_then(|f| f.attr("mode"))
        .map(|a| &a.ty)
}

fn format_mode(value: i64, octal: bool) -> String {
    if octal && value >= 0 {
        format!("0o{value:o}")
    } else {
        value.to_string()
    }
}

fn is_word(expr: &Expr, word: &str) -> bool {
    match &expr.kind {
        ExprKind::Path(path) => path.len() == 1 && path.first().is_some_and(|i| i.name == word),
        ExprKind::Str(lit) => lit.as_plain().as_deref() == Some(word),
        _ => false,
    }
}

/// The promiser as written, for messages.
pub fn promiser_text(expr: &Expr) -> String {
    match &expr.kind {
        ExprKind::Str(lit) => lit
            .parts
            .iter()
            .map(|p| match p {
                StrPart::Lit(t) => t.clone(),
                StrPart::Interp { path, .. } => format!("${{{}}}", path.join(".")),
            })
            .collect(),
        ExprKind::Path(path) => path
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join("."),
        _ => String::new(),
    }
}

pub fn relative_path(pt: &PromiseType, span: Span, text: &str) -> Diagnostic {
    let shown = if text.is_empty() {
        "an empty path".to_owned()
    } else {
        format!("`{text}`")
    };
    Diagnostic::new(
        Code::RelativePath,
        format!(
            "a `{}` promise needs an absolute path, found {shown}",
            pt.name
        ),
        span,
        "not an absolute path",
    )
    .with_help(format!(
        "start the path with `/`, e.g. `/{}`",
        text.trim_start_matches("./")
    ))
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

/// The regex engine's own message, on one line per line of its text.
fn regex_error_text(err: &regex::Error) -> String {
    let text = err.to_string();
    let text = text.trim();
    format!(
        "regex error: {}",
        text.lines().last().unwrap_or(text).trim()
    )
}

/// What is wrong with the arguments of a call.
#[derive(Debug)]
pub enum ArgError<'a> {
    TooMany(&'a Arg),
    PositionalAfterNamed(&'a Arg),
    UnknownName(&'a Arg, &'a Ident),
    Twice(&'a Arg, usize),
    Missing(usize),
}

impl ArgError<'_> {
    fn into_diagnostic(self, bundle: &BundleDef, call: &Call) -> Diagnostic {
        let signature = bundle.name.span;
        let count = bundle.params.len();
        match self {
            ArgError::TooMany(arg) => Diagnostic::new(
                Code::WrongArguments,
                format!(
                    "bundle `{}` takes {count} argument{}, but more were given",
                    bundle.name.name,
                    if count == 1 { "" } else { "s" }
                ),
                arg.span,
                "extra argument",
            )
            .with_secondary(signature, "bundle defined here"),
            ArgError::PositionalAfterNamed(arg) => Diagnostic::new(
                Code::WrongArguments,
                "a positional argument cannot follow a named one",
                arg.span,
                "positional argument",
            )
            .with_help("name this argument too: `name = value`"),
            ArgError::UnknownName(arg, name) => {
                let params: Vec<&str> =
                    bundle.params.iter().map(|p| p.name.name.as_str()).collect();
                let mut d = Diagnostic::new(
                    Code::UnknownParameter,
                    format!(
                        "bundle `{}` has no parameter `{}`",
                        bundle.name.name, name.name
                    ),
                    name.span,
                    "unknown parameter",
                )
                .with_secondary(signature, "bundle defined here");
                d = match did_you_mean(&name.name, params.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None if params.is_empty() => d.with_note("this bundle takes no parameters"),
                    None => d.with_note(format!("its parameters are {}", one_of(&params))),
                };
                let _ = arg;
                d
            }
            ArgError::Twice(arg, index) => {
                let name = bundle
                    .params
                    .get(index)
                    .map(|p| p.name.name.as_str())
                    .unwrap_or("?");
                Diagnostic::new(
                    Code::WrongArguments,
                    format!("argument `{name}` is given twice"),
                    arg.span,
                    "given again here",
                )
            }
            ArgError::Missing(index) => {
                let (name, span) = bundle
                    .params
                    .get(index)
                    .map(|p| (p.name.name.as_str(), p.span))
                    .unwrap_or(("?", signature));
                Diagnostic::new(
                    Code::WrongArguments,
                    format!(
                        "missing argument `{name}` in call of bundle `{}`",
                        bundle.name.name
                    ),
                    call.span,
                    format!("`{name}` is not given"),
                )
                .with_secondary(span, "parameter without a default")
                .with_help(format!("pass it: `{}({name} = ...)`", bundle.name.name))
            }
        }
    }
}

/// Matches call arguments to parameters: positional ones first, then named
/// ones. Returns, for each parameter, the argument bound to it (`None` where
/// the default applies).
pub fn bind_arguments<'a>(
    bundle: &BundleDef,
    args: &'a [Arg],
) -> Result<Vec<Option<&'a Arg>>, Vec<ArgError<'a>>> {
    let mut bound: Vec<Option<&'a Arg>> = vec![None; bundle.params.len()];
    let mut errors = Vec::new();
    let mut seen_named = false;
    let mut position = 0;
    for arg in args {
        match &arg.name {
            None => {
                if seen_named {
                    errors.push(ArgError::PositionalAfterNamed(arg));
                    continue;
                }
                match bound.get_mut(position) {
                    Some(slot) => *slot = Some(arg),
                    None => errors.push(ArgError::TooMany(arg)),
                }
                position += 1;
            }
            Some(name) => {
                seen_named = true;
                match bundle.params.iter().position(|p| p.name.name == name.name) {
                    Some(i) => match bound.get_mut(i) {
                        Some(slot @ None) => *slot = Some(arg),
                        _ => errors.push(ArgError::Twice(arg, i)),
                    },
                    None => errors.push(ArgError::UnknownName(arg, name)),
                }
            }
        }
    }
    for (i, (slot, param)) in bound.iter().zip(&bundle.params).enumerate() {
        if slot.is_none() && param.default.is_none() {
            errors.push(ArgError::Missing(i));
        }
    }
    if errors.is_empty() {
        Ok(bound)
    } else {
        Err(errors)
    }
}
