//! Value expressions and attribute values: types, enum words, outcome
//! classes, modes, names and facts, interpolation.

use converge_format::schema::{self, is_hard_class, promise_type, AttrType};
use converge_grammar::ast::{Expr, ExprKind, Ident};
use converge_grammar::Span;

use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::sema::types::Type;
use crate::suggest::{did_you_mean, one_of};

impl<'a> Checker<'a> {
    /// Checks a value against an attribute's type, with the special forms
    /// attributes allow (enum words, class names, octal modes, refs).
    pub fn check_attr_value(&mut self, ty: &AttrType, expr: &Expr, scope: &Scope) {
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

    pub(super) fn check_enum(&mut self, words: &[&str], expr: &Expr, scope: &Scope) {
        let word = match &expr.kind {
            ExprKind::Path(path) if path.len() == 1 && !self.is_variable(&path[0].name, scope) => {
                path.first().map(|i| i.name.to_string())
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
                            "expected one of {}, found {}",
                            one_of(words),
                            actual.with_article()
                        ),
                        expr.span,
                        format!("expected {}", one_of(words)),
                    ));
                }
            }
        }
    }

    pub(super) fn check_outcome_class(&mut self, expr: &Expr) {
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
        if let Some(id) = self.names.find(DefKind::Class, &name.name) {
            self.names.record(name.span, id);
        }
        let inventory_class = self.names.find(DefKind::InventoryClass, &name.name);
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
            None if inventory_class.is_some() => {
                if let Some(id) = inventory_class {
                    self.names.record(name.span, id);
                }
                self.push(
                    Diagnostic::new(
                        Code::NotAnOutcomeClass,
                        format!("`{}` is defined by the inventory", name.name),
                        name.span,
                        "cannot be set by an outcome",
                    )
                    .with_help("declare a class of your own: `class NAME;`"),
                );
            }
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

    pub(super) fn check_mode(&mut self, expr: &Expr, scope: &Scope) {
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
    pub fn check_against(&mut self, expr: &Expr, expected: &Type, scope: &Scope) {
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
            (ExprKind::Record(fields), Type::Record(record)) => {
                self.check_record_literal(fields, record, expr.span, scope);
            }
            (ExprKind::Map(entries), Type::Record(record)) if entries.is_empty() => {
                self.check_record_literal(&[], record, expr.span, scope);
            }
            (ExprKind::Map(entries), Type::Map(inner)) => {
                self.check_map_keys(entries);
                for (_, value) in entries {
                    self.check_against(value, inner, scope);
                }
            }
            (ExprKind::Coalesce(items), _) => {
                for item in items {
                    self.check_against(item, expected, scope);
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

    pub(super) fn mismatch(&mut self, span: Span, expected: &Type, actual: &Type, what: &str) {
        self.push(Diagnostic::new(
            Code::TypeMismatch,
            format!(
                "expected {}, found {}",
                expected.describe(),
                actual.describe()
            ),
            span,
            format!("{what} must be {}", expected.with_article()),
        ));
    }

    /// Like [`value_type`](Self::value_type), but a bare word that is not a
    /// variable is accepted (its meaning depends on where it is used).
    pub(super) fn value_type_or_word(&mut self, expr: &Expr, scope: &Scope) -> Type {
        if let ExprKind::Path(path) = &expr.kind {
            if let [one] = path.as_slice() {
                if !self.is_variable(&one.name, scope) {
                    return Type::String;
                }
            }
        }
        self.value_type(expr, scope)
    }

    /// The type of a value expression, reporting what is wrong inside it.
    pub fn value_type(&mut self, expr: &Expr, scope: &Scope) -> Type {
        match &expr.kind {
            ExprKind::Str(lit) => {
                self.check_string(lit, expr.span, scope);
                Type::String
            }
            ExprKind::Record(_) => {
                self.push(
                    Diagnostic::new(
                        Code::RecordNeedsType,
                        "a record literal needs a type",
                        expr.span,
                        "which record type is this?",
                    )
                    .with_help("give the `let` a type (`let local: Site = { ... };`), or write the literal where a record is expected: a typed parameter, field, list or map"),
                );
                Type::Any
            }
            ExprKind::Field { base, name } => {
                let base = self.value_type(base, scope);
                self.field_type(base, name)
            }
            ExprKind::Index { base, index } => self.index_type(base, index, scope),
            ExprKind::Coalesce(items) => self.coalesce_type(items, scope),
            ExprKind::Call { func, args } => self.call_type(func, args, expr.span, scope),
            ExprKind::Int { .. } => Type::Int,
            ExprKind::Duration(_) => Type::Duration,
            ExprKind::Bool(_) => Type::Bool,
            ExprKind::Path(path) => self.path_type(path, expr.span, scope),
            ExprKind::List(items) => {
                let mut elem = Type::Any;
                for item in items {
                    let t = self.value_type(item, scope);
                    self.unify(&mut elem, t, item.span, "list elements");
                }
                Type::List(Box::new(elem))
            }
            ExprKind::Map(entries) => {
                let mut elem = Type::Any;
                self.check_map_keys(entries);
                for (_, value) in entries {
                    let t = self.value_type(value, scope);
                    self.unify(&mut elem, t, value.span, "map values");
                }
                Type::Map(Box::new(elem))
            }
            ExprKind::Ref(r) => {
                let (kind, target) = (&r.kind, &r.target);
                if promise_type(&kind.name).is_some() {
                    let id = self.names.builtin(DefKind::PromiseType, &kind.name);
                    self.names.record(kind.span, id);
                } else if kind.name != "id" {
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
                self.check_string(target, expr.span, scope);
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
        }
    }

    /// Folds one more element type into the element type of a list or map
    /// literal, reporting an element of another type.
    fn unify(&mut self, elem: &mut Type, t: Type, span: Span, what: &str) {
        if *elem == Type::Any {
            *elem = t;
        } else if !elem.accepts(&t) {
            self.push(Diagnostic::new(
                Code::TypeMismatch,
                format!(
                    "{what} must all have one type: expected {}, found {}",
                    elem.describe(),
                    t.describe()
                ),
                span,
                t.with_article(),
            ));
        }
    }

    pub(super) fn lookup_var<'s>(&self, name: &str, scope: &'s Scope) -> Option<&'s Var> {
        scope.iter().rev().find(|v| v.name == name)
    }

    /// Whether `name` is a variable here: a loop variable, a parameter or a
    /// `let` (where a bare word could also be an enum word).
    pub(super) fn is_variable(&self, name: &str, scope: &Scope) -> bool {
        self.lookup_var(name, scope).is_some() || self.symbols.lets.get(name).is_some()
    }

    /// Records the `let` named at `span`.
    pub(super) fn record_let(&mut self, name: &str, span: Span) {
        if let Some(id) = self.names.find(DefKind::Let, name) {
            self.names.record(span, id);
        }
    }

    /// Records the fact a path names, over the whole path.
    fn record_fact(&mut self, name: &str, span: Span) {
        let id = self.names.builtin(DefKind::Fact, name);
        self.names.record(span, id);
    }

    /// The type of a name: a variable, a `let` (possibly indexed as a map:
    /// `ports.http`), or a fact `sys.x`.
    /// The type of a `let` read at `span`, marking it used; reading a let
    /// inside its own definition is a cycle.
    fn let_reference(&mut self, name: &str, span: Span) -> Type {
        // The let's own name: the checker's tables outlive the statements
        // that read it.
        let Some(name) = self.symbols.lets.key(name) else {
            return Type::Any;
        };
        self.used_lets.insert(name);
        if let Some(t) = self.let_type(name) {
            return t;
        }
        let mut d = Diagnostic::new(
            Code::DefinitionCycle,
            format!("`{name}` is used in its own definition"),
            span,
            "used here",
        );
        if let Some(def) = self.symbols.lets.get(name) {
            d = d.with_secondary(def.name.span, "while defining this");
        }
        self.push(d.with_help("a let cannot depend on itself, directly or through other lets"));
        Type::Any
    }

    pub(super) fn path_type(&mut self, path: &[Ident], span: Span, scope: &Scope) -> Type {
        let Some(first) = path.first() else {
            return Type::Any;
        };
        if first.name == "sys" {
            return self.fact_type(path, span);
        }
        if first.name == "facts" {
            return self.probe_fact_type(path, span);
        }
        let base = if let Some(var) = self.lookup_var(&first.name, scope) {
            self.names.record(first.span, var.def);
            var.ty.clone()
        } else if self.symbols.lets.get(&first.name).is_some() {
            self.record_let(&first.name, first.span);
            self.let_reference(&first.name, first.span)
        } else {
            self.undefined_variable(&first.name, first.span, scope);
            return Type::Any;
        };
        let mut ty = base;
        for key in path.iter().skip(1) {
            ty = self.field_type(ty, key);
        }
        ty
    }

    /// Map literal keys: plain strings, each once (a second one would
    /// silently replace the first, as in a data file: E0705 there).
    fn check_map_keys(&mut self, entries: &[(Expr, Expr)]) {
        let mut seen: Vec<(String, Span)> = Vec::new();
        for (key, _) in entries {
            match &key.kind {
                ExprKind::Str(lit) if lit.as_plain().is_some() => {
                    let text = lit.as_plain().unwrap_or_default();
                    if let Some((_, first)) = seen.iter().find(|(k, _)| *k == text) {
                        self.push(
                            Diagnostic::new(
                                Code::DuplicateDefinition,
                                format!("key {text:?} is given twice in this map"),
                                key.span,
                                "given again here",
                            )
                            .with_secondary(*first, "first given here")
                            .with_help("keep one entry per key"),
                        );
                    } else {
                        seen.push((text, key.span));
                    }
                }
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
        }
    }

    pub(super) fn fact_type(&mut self, path: &[Ident], span: Span) -> Type {
        let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let name = name.join(".");
        match schema::fact(&name) {
            Some(f) => {
                if let (Some(first), Some(last)) = (path.first(), path.last()) {
                    self.record_fact(f.name, first.span.to(last.span));
                }
                Type::of_attr(&f.ty)
            }
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

    pub(super) fn undefined_variable(&mut self, name: &str, span: Span, scope: &Scope) {
        let mut candidates: Vec<&str> = scope.iter().map(|v| v.name.as_str()).collect();
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
