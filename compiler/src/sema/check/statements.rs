//! Statements: promises (attributes, rules between them, promisers),
//! `when`, `for` and bundle calls.

use std::rc::Rc;

use converge_format::schema::{self, promise_type, PromiseType, PromiserKind, Rule};
use converge_grammar::ast::{AttrStmt, Call, Expr, ExprKind, Promise, Stmt};
use converge_grammar::token::StrPart;
use converge_grammar::Span;

use super::defaults::{self, DefaultsLabel};
use super::*;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::sema::types::Type;
use crate::suggest::{did_you_mean, one_of};

impl<'a> Checker<'a> {
    pub fn check_stmts(&mut self, stmts: &[Stmt], scope: &mut Scope) {
        for stmt in stmts {
            match stmt {
                Stmt::Promise(p) => self.check_promise(p, scope),
                Stmt::When(w) => {
                    self.check_guard(&w.guard, scope);
                    self.check_stmts(&w.body, scope);
                }
                Stmt::For(f) => {
                    let list_ty = self.value_type(&f.list, scope);
                    let (key_ty, elem) = match (&list_ty, &f.key) {
                        (Type::Map(inner), Some(_)) => (Some(Type::String), (**inner).clone()),
                        (Type::Any, key) => (key.as_ref().map(|_| Type::Any), Type::Any),
                        (Type::List(inner), None) => (None, (**inner).clone()),
                        (ty, key) => {
                            let (message, help) = match (ty, key) {
                                (Type::Map(_), None) => (
                                    "a loop over a map needs a key and a value variable".to_owned(),
                                    format!("write `for key, {} in ...`", f.var.name),
                                ),
                                (Type::List(_), Some(_)) => (
                                    "a loop over a list has one variable".to_owned(),
                                    format!("write `for {} in ...`", f.var.name),
                                ),
                                _ => (
                                    format!("cannot loop over a value of type {}", ty.describe()),
                                    "`for x in LIST` needs a list (a literal `[...]`, a list `let`, a list parameter or `sys.ipv4`); `for k, v in MAP` a map".to_owned(),
                                ),
                            };
                            self.push(
                                Diagnostic::new(
                                    Code::InvalidExpression,
                                    message,
                                    f.list.span,
                                    "cannot loop over this",
                                )
                                .with_help(help),
                            );
                            (f.key.as_ref().map(|_| Type::Any), Type::Any)
                        }
                    };
                    let before = scope.len();
                    for (name, ty) in f.key.iter().zip(key_ty).chain([(&f.var, elem)]) {
                        self.loop_var(name, ty, f.span, scope);
                    }
                    self.check_stmts(&f.body, scope);
                    scope.truncate(before);
                }
                Stmt::Call(call) => self.check_call(call, scope),
                // The blocks at the top of a bundle are checked with it
                // (`check_bundle_defaults`); this one is anywhere else.
                Stmt::Defaults(block) => self.misplaced_defaults(block),
                Stmt::Error(_) => {}
            }
        }
    }

    pub(super) fn check_call(&mut self, call: &Call, scope: &Scope) {
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
        if let Some(id) = self.names.find(DefKind::Bundle, &bundle.name.name) {
            self.names.record(call.bundle.span, id);
        }
        for name in call.args.iter().filter_map(|a| a.name.as_ref()) {
            if let Some(id) = param_def(&self.names, bundle, &name.name) {
                self.names.record(name.span, id);
            }
        }
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

    pub(super) fn check_promise(&mut self, p: &Promise, scope: &Scope) {
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
        let id = self.names.builtin(DefKind::PromiseType, pt.name);
        self.names.record(p.kind.span, id);
        self.check_promiser(pt, &p.promiser, scope);
        let defaults = Rc::clone(&self.defaults);
        let attrs = self.promise_attrs(p, &defaults);
        // A body's values are read where the body is written: they see the
        // `let`s, never the variables of the bundle that uses the body.
        let body_scope: Scope = Vec::new();
        for a in attrs.iter().filter(|a| a.default.is_none()) {
            // A default's value was checked once, where it is written.
            match pt.attr(&a.name.name) {
                Some(spec) => {
                    let scope = if a.via.is_some() { &body_scope } else { scope };
                    if a.via.is_none() {
                        let id = self.names.attribute(pt, spec);
                        self.names.record(a.name.span, id);
                    }
                    self.check_attr_value(&spec.ty, a.value, scope);
                    if a.name.name == "template" {
                        self.check_template_attr(a.value, scope);
                    }
                    if schema::EMBEDDED_ATTRS.contains(&a.name.name.as_str()) {
                        self.check_source_path(a.value);
                    }
                }
                None => self.unknown_attr(pt, a),
            }
        }
        self.check_rules(pt, p, &attrs);
        self.check_system_promise(pt, p, &attrs);
        if let Some(cwd) = attrs.iter().find(|a| a.name.name == "cwd") {
            if pt.name == "command" {
                self.check_cwd(cwd.value);
            }
        }
        if pt.name == "line" {
            if let Some(replace) = attrs.iter().find(|a| a.name.name == "replace") {
                if let ExprKind::Str(lit) = &replace.value.kind {
                    if let Some(pattern) = lit.as_plain() {
                        self.check_regex(&pattern, replace.value.span);
                    }
                }
            }
        }
        if pt.name == "watch" {
            if let Some(exclude) = attrs.iter().find(|a| a.name.name == "exclude") {
                self.check_globs(exclude.value);
            }
        }
        if let Some(validate) = attrs.iter().find(|a| a.name.name == "validate") {
            self.check_validate(validate.value);
        }
        if pt.name == "directory" {
            let has = |n: &str| attrs.iter().any(|a| a.name.name == n);
            for a in attrs
                .iter()
                .filter(|a| matches!(a.name.name.as_str(), "mode_files" | "mode_dirs"))
            {
                if !has("recurse") && !has("source") {
                    self.push(
                        Diagnostic::new(
                            Code::MissingAttribute,
                            format!(
                                "`{}` needs `recurse` or `source` on a `directory` promise",
                                a.name.name
                            ),
                            a.name.span,
                            "applies to no tree",
                        )
                        .with_help("add `recurse = true;` to apply it to the whole tree"),
                    );
                }
            }
        }
        if let Some(depth) = attrs.iter().find(|a| a.name.name == "depth") {
            if pt.name == "directory" {
                self.check_depth(depth.value);
            }
        }
        if pt.name == "command"
            && !attrs
                .iter()
                .any(|a| matches!(a.name.name.as_str(), "unless" | "creates"))
        {
            self.push(
                Diagnostic::new(
                    Code::NonConvergentCommand,
                    format!("command `{}` runs every time the agent runs", promiser_text(&p.promiser)),
                    p.kind.span.to(p.promiser.span),
                    "neither `unless` nor `creates` is set",
                )
                .with_help("add `creates = \"/path/it/makes\";` or `unless = [\"/usr/bin/test\", ...];` so the command is skipped once it has done its work")
                .with_note("the VM runs a non-convergent command at most once per run"),
            );
        }
    }

    /// `depth` of a recursed directory counts levels below it: 1 is its
    /// direct children, and 0 or less would manage nothing (the VM refuses
    /// it too).
    fn check_depth(&mut self, value: &Expr) {
        let ExprKind::Int { value: depth, .. } = &value.kind else {
            return;
        };
        if *depth < 1 {
            self.push(
                Diagnostic::new(
                    Code::InvalidEnumValue,
                    format!("`depth = {depth}` manages no level of the tree"),
                    value.span,
                    "must be at least 1",
                )
                .with_help("`depth = 1` is the direct children of the directory; leave `depth` out for the whole tree"),
            );
        }
    }

    /// Each glob of a `watch`'s `exclude` that is known now follows the
    /// glob grammar the VM matches with (`converge_format::globs`).
    fn check_globs(&mut self, value: &Expr) {
        let ExprKind::List(items) = &value.kind else {
            return;
        };
        for item in items {
            let ExprKind::Str(lit) = &item.kind else {
                continue;
            };
            let Some(glob) = lit.as_plain() else { continue };
            if let Some(why) = converge_format::globs::glob_problem(&glob) {
                self.push(
                    Diagnostic::new(
                        Code::InvalidGlob,
                        format!("`{}` is not a valid glob: {why}", glob.escape_debug()),
                        item.span,
                        "invalid glob",
                    )
                    .with_help("`*.log` excludes a name at any depth, `cache/**` a path below the watched directory"),
                );
            }
        }
    }

    /// A command's `cwd` follows the path grammar of promisers (the VM
    /// refuses it too): `/../../etc` would be outside the root.
    fn check_cwd(&mut self, value: &Expr) {
        let ExprKind::Str(lit) = &value.kind else {
            return;
        };
        let Some(text) = lit.as_plain() else { return };
        if let Some(why) = converge_format::paths::path_problem(&text) {
            self.push(
                Diagnostic::new(
                    Code::RelativePath,
                    format!("`cwd = {}` is not a valid working directory: {why}", text.escape_debug()),
                    value.span,
                    "invalid path",
                )
                .with_help("write the directory in its plain absolute form inside the root, e.g. `/srv/app`"),
            );
        }
    }

    /// The attributes of a promise: its own, then those of the bodies it
    /// `use`s (an attribute set by the promise itself wins over a body's),
    /// then its bundle's defaults for what neither sets.
    /// `defaults` are those of the promise's bundle ([`Checker::defaults`]
    /// while the bundle is checked or expanded).
    pub fn promise_attrs<'p>(
        &mut self,
        p: &'p Promise,
        defaults: &'p [defaults::DefaultAttr],
    ) -> Vec<AttrSource<'p>>
    where
        'a: 'p,
    {
        let mut own: Vec<AttrSource<'p>> = Vec::new();
        let mut spliced: Vec<AttrSource<'p>> = Vec::new();
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
                        default: None,
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
        defaults::add_defaults(defaults, promise_type(&p.kind.name), &mut own);
        own
    }

    pub(super) fn unknown_attr(&mut self, pt: &PromiseType, a: &AttrSource<'_>) {
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

    pub(super) fn check_rules(&mut self, pt: &PromiseType, p: &Promise, attrs: &[AttrSource<'_>]) {
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
                        } else if pt.name == "user" {
                            "a user has one primary group: `gid` names it by id, `group` by name"
                                .to_owned()
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
                            .with_help(format!("{what}; remove one of them"))
                            .pipe_defaults(&[*first, *second], head),
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
                                .with_help(format!("add `{needs} = ...;`"))
                                .pipe_defaults(&[a], head),
                            );
                        }
                    }
                }
            }
        }
    }

    pub(super) fn missing_attr(
        &mut self,
        pt: &PromiseType,
        head: Span,
        name: &str,
        condition: &str,
    ) {
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

    pub(super) fn check_promiser(&mut self, pt: &PromiseType, promiser: &Expr, scope: &Scope) {
        let ty = self.value_type(promiser, scope);
        if !Type::String.accepts(&ty) {
            self.mismatch(promiser.span, &Type::String, &ty, "the promiser");
            return;
        }
        let ExprKind::Str(lit) = &promiser.kind else {
            return;
        };
        if let Some(text) = lit.as_plain() {
            // Fully known: the whole promiser can be checked now.
            if let Some(d) = promiser_problem(pt, promiser.span, &text) {
                self.push(d);
            }
            return;
        }
        if pt.promiser == PromiserKind::AbsolutePath {
            let relative = match lit.parts.first() {
                None => Some(String::new()),
                Some(StrPart::Lit(text)) if !text.starts_with('/') => Some(text.to_string()),
                _ => None,
            };
            if let Some(text) = relative {
                self.push(relative_path(pt, promiser.span, &text));
            }
        }
    }
}

/// What is wrong with a promiser known in full, if anything: a path that is
/// not absolute, has `..`, `.`, `//` or a NUL byte, or is over-long (the
/// VM's own path grammar, [`converge_format::paths::path_problem`]); a package,
/// service, user or group name that is empty, starts with `-` (it would be
/// read as an option by the tools behind it) or has characters such names
/// never have (`;`, `$`, spaces...).
pub fn promiser_problem(pt: &PromiseType, span: Span, text: &str) -> Option<Diagnostic> {
    match pt.promiser {
        PromiserKind::AbsolutePath => {
            if !text.starts_with('/') {
                return Some(relative_path(pt, span, text));
            }
            converge_format::paths::path_problem(text).map(|why| {
                Diagnostic::new(
                    Code::RelativePath,
                    format!(
                        "`{}` is not a valid path for a `{}` promise: {why}",
                        text.escape_debug(),
                        pt.name
                    ),
                    span,
                    "invalid path",
                )
                .with_help("write the path in its plain absolute form, e.g. `/etc/app/app.conf`")
            })
        }
        PromiserKind::Name => converge_format::schema::name_problem(text).map(|why| {
            Diagnostic::new(
                Code::InvalidName,
                format!(
                    "`{}` is not a valid {} name: {why}",
                    text.escape_debug(),
                    pt.name
                ),
                span,
                "invalid name",
            )
            .with_help("names are letters, digits and `._+@:-`, and do not start with `-` (the tools behind the promise would read it as an option)")
        }),
        PromiserKind::Label => None,
    }
    .or_else(|| kernel_name_problem(pt, span, text))
}

/// A `kernel_module` or `sysctl` promiser that the kernel's grammar
/// refuses (`converge_format::system`; the VM checks it again).
fn kernel_name_problem(pt: &PromiseType, span: Span, text: &str) -> Option<Diagnostic> {
    let (why, what, example) = match pt.name {
        "kernel_module" => (
            converge_format::system::module_name_problem(text)?,
            "kernel module name",
            "br_netfilter",
        ),
        "sysctl" => (
            converge_format::system::sysctl_key_problem(text)?,
            "sysctl key",
            "net.ipv4.ip_forward",
        ),
        _ => return None,
    };
    Some(
        Diagnostic::new(
            Code::InvalidName,
            format!("`{}` is not a valid {what}: {why}", text.escape_debug()),
            span,
            "invalid name",
        )
        .with_help(format!("for example `{example}`")),
    )
}

fn is_word(expr: &Expr, word: &str) -> bool {
    match &expr.kind {
        ExprKind::Path(path) => path.len() == 1 && path.first().is_some_and(|i| i.name == word),
        ExprKind::Str(lit) => lit.as_plain().as_deref() == Some(word),
        _ => false,
    }
}

pub fn promiser_text(expr: &Expr) -> String {
    match &expr.kind {
        ExprKind::Str(lit) => lit
            .parts
            .iter()
            .map(|p| match p {
                StrPart::Lit(t) => t.to_string(),
                StrPart::Interp(inner) => match &inner.kind {
                    ExprKind::Path(path) => format!("${{{}}}", dotted(path)),
                    // Messages show other expressions by their shape only.
                    _ => "${...}".to_owned(),
                },
                StrPart::Tag(t) => format!("{{% {} %}}", t.kind.word()),
            })
            .collect(),
        ExprKind::Path(path) => dotted(path),
        _ => String::new(),
    }
}

/// `a.b.c` as written.
fn dotted(path: &[converge_grammar::ast::Ident]) -> String {
    path.iter()
        .map(|i| i.name.as_str())
        .collect::<Vec<_>>()
        .join(".")
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
