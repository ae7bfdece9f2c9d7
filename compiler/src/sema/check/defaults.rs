//! Bundle defaults (LANGUAGE.md section 17): `defaults { ATTR = VALUE; }`
//! and `defaults TYPE { ... }` at the top of a bundle.
//!
//! The rules, decided here:
//! - the blocks come first in the bundle (else E0270); one untyped block
//!   and one block per type at most (E0274);
//! - `defaults TYPE` names a promise type (E0271) and sets only attributes
//!   it has (E0272);
//! - an untyped default applies to every promise of the bundle whose type
//!   has the attribute, and is an error (E0273) when no promise type used
//!   in the bundle has it;
//! - a promise's own value (written in it, or spliced by its `use`) wins,
//!   then the typed default, then the untyped one; a promise that sets one
//!   of a group of alternatives itself (a file's `content`, `source` or
//!   `template`) takes no default for the others;
//! - defaults reach the promises written in the bundle (inside its `when`
//!   and `for` too), never those of the bundles it calls.
//!
//! Values are checked once here, against the type of every promise type
//! they apply to, with the bundle's parameters in scope. The expanded
//! promises carry them like their own attributes (marked with where they
//! came from), so every analysis sees them: `promise_attrs` adds them.

use std::collections::HashSet;
use std::rc::Rc;

use converge_format::schema::{self, promise_type, AttrType, PromiseType, Rule};
use converge_grammar::ast::{self, AttrStmt, BundleDef, Stmt};
use converge_grammar::Span;

use super::{AttrSource, Checker, Scope};
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::names::DefKind;
use crate::suggest::{did_you_mean, one_of};

/// One attribute of a bundle's defaults. Owned (defaults are few), so that
/// the checked defaults of a bundle outlive its statements, which
/// expansion frees (`sema::bodies`).
#[derive(Clone, Debug)]
pub struct DefaultAttr {
    /// `Some("file")` in `defaults file { ... }`; `None` for every type
    /// that has the attribute.
    pub kind: Option<&'static str>,
    pub name: ast::Ident,
    pub value: ast::Expr,
    /// The `use` statement that brought it in, if it came from a body.
    pub via: Option<Span>,
    /// The head of its `defaults` block.
    pub block: Span,
}

impl DefaultAttr {
    /// The attribute as a promise takes it.
    pub fn source(&self) -> AttrSource<'_> {
        AttrSource {
            name: &self.name,
            value: &self.value,
            via: self.via,
            default: Some(self.block),
        }
    }
}

/// The checked defaults of one bundle, typed blocks first (they win over
/// the untyped one). Shared: expansion switches to it at every call.
pub type Defaults = Rc<[DefaultAttr]>;

impl<'a> Checker<'a> {
    /// Checks the `defaults` blocks at the top of `bundle`, whose
    /// statements are `body`, and records them as the bundle's defaults
    /// (and the current ones). Returns how many statements they are: the
    /// checker reads the rest as the body.
    pub(super) fn check_bundle_defaults(
        &mut self,
        bundle: &'a BundleDef,
        body: &[Stmt],
        scope: &Scope,
    ) -> usize {
        let leading = body
            .iter()
            .take_while(|s| matches!(s, Stmt::Defaults(_)))
            .count();
        let mut kinds: Vec<&str> = Vec::new();
        promise_kinds(body, &mut kinds);
        let mut seen: Vec<(Option<&str>, Span)> = Vec::new();
        let mut typed: Vec<DefaultAttr> = Vec::new();
        let mut untyped: Vec<DefaultAttr> = Vec::new();
        for stmt in body.iter().take(leading) {
            let Stmt::Defaults(block) = stmt else {
                continue;
            };
            let key = block.kind.as_ref().map(|k| k.name.as_str());
            if let Some((_, first)) = seen.iter().find(|(k, _)| *k == key) {
                let what = match key {
                    Some(kind) => format!("a second `defaults {kind}` block"),
                    None => "a second untyped `defaults` block".to_owned(),
                };
                self.push(
                    Diagnostic::new(
                        Code::RepeatedDefaults,
                        format!("{what} in bundle `{}`", bundle.name.name),
                        block.head(),
                        "repeated here",
                    )
                    .with_secondary(*first, "first written here")
                    .with_help("merge the two blocks into one"),
                );
                self.loose_values(block);
                continue;
            }
            seen.push((key, block.head()));
            let pt = match &block.kind {
                None => None,
                Some(kind) => match promise_type(&kind.name) {
                    Some(pt) => {
                        let id = self.names.builtin(DefKind::PromiseType, pt.name);
                        self.names.record(kind.span, id);
                        Some(pt)
                    }
                    None => {
                        self.unknown_defaults_type(kind);
                        self.loose_values(block);
                        continue;
                    }
                },
            };
            for source in self.block_attrs(block) {
                let checked = match pt {
                    Some(pt) => self.check_typed_default(pt, &source, scope),
                    None => self.check_untyped_default(bundle, &kinds, &source, scope),
                };
                if !checked {
                    continue;
                }
                let attr = DefaultAttr {
                    kind: pt.map(|t| t.name),
                    name: source.name.clone(),
                    value: source.value.clone(),
                    via: source.via,
                    block: block.head(),
                };
                match pt {
                    Some(_) => typed.push(attr),
                    None => untyped.push(attr),
                }
            }
        }
        typed.extend(untyped);
        let defaults: Defaults = Rc::from(typed);
        self.bundle_defaults
            .insert(&bundle.name.name, Rc::clone(&defaults));
        self.defaults = defaults;
        leading
    }

    /// The attributes of one block: its own, then those of the bodies it
    /// `use`s (its own win), each marked as coming from the block.
    fn block_attrs<'b>(&mut self, block: &'b ast::Defaults) -> Vec<AttrSource<'b>>
    where
        'a: 'b,
    {
        let mut own: Vec<AttrSource<'b>> = Vec::new();
        let mut spliced: Vec<AttrSource<'b>> = Vec::new();
        for stmt in &block.attrs {
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
                        spliced.extend(self.body_attrs(body, u.span, &mut Vec::new()));
                    }
                }
                AttrStmt::Error(_) => {}
            }
        }
        for a in spliced {
            if !own.iter().any(|o| o.name.name == a.name.name) {
                own.push(a);
            }
        }
        let head = block.head();
        for a in &mut own {
            a.default = Some(head);
        }
        own
    }

    /// `defaults TYPE { ATTR = VALUE; }`: ATTR must be one of TYPE's.
    fn check_typed_default(
        &mut self,
        pt: &'static PromiseType,
        a: &AttrSource<'_>,
        scope: &Scope,
    ) -> bool {
        let Some(spec) = pt.attr(&a.name.name) else {
            let names: Vec<&str> = pt.all_attrs().map(|s| s.name).collect();
            let (span, message) = match a.via {
                None => (
                    a.name.span,
                    format!(
                        "`{}` promises have no attribute `{}` to default",
                        pt.name, a.name.name
                    ),
                ),
                Some(use_span) => (
                    use_span,
                    format!(
                        "this body sets `{}`, which `{}` promises do not have",
                        a.name.name, pt.name
                    ),
                ),
            };
            let mut d = Diagnostic::new(
                Code::DefaultsUnknownAttribute,
                message,
                span,
                "not an attribute of this type",
            );
            if a.via.is_some() {
                d = d.with_secondary(a.name.span, "set in the body here");
            }
            if let Some(s) = did_you_mean(&a.name.name, names.iter().copied()) {
                d = d.with_help(format!("did you mean `{s}`?"));
            }
            self.push(d.with_note(format!("`{}` promises have {}", pt.name, one_of(&names))));
            self.value_type_or_word(a.value, &Vec::new());
            return false;
        };
        if a.via.is_none() {
            let id = self.names.attribute(pt, spec);
            self.names.record(a.name.span, id);
        }
        self.check_default_value(&spec.ty, a, scope);
        true
    }

    /// `defaults { ATTR = VALUE; }`: ATTR must be had by a promise type the
    /// bundle uses; its value is checked against each such type's.
    fn check_untyped_default(
        &mut self,
        bundle: &'a BundleDef,
        kinds: &[&str],
        a: &AttrSource<'_>,
        scope: &Scope,
    ) -> bool {
        let types: Vec<&'static PromiseType> = kinds
            .iter()
            .filter_map(|k| promise_type(k))
            .filter(|t| t.attr(&a.name.name).is_some())
            .collect();
        if types.is_empty() {
            let span = a.via.unwrap_or(a.name.span);
            let used: Vec<&str> = kinds
                .iter()
                .copied()
                .filter(|k| promise_type(k).is_some())
                .collect();
            let mut d = Diagnostic::new(
                Code::DefaultAppliesToNothing,
                format!(
                    "no promise of bundle `{}` can take the default `{}`",
                    bundle.name.name, a.name.name
                ),
                span,
                "applies to no promise",
            );
            if a.via.is_some() {
                d = d.with_secondary(a.name.span, "set in the body here");
            }
            let candidates: Vec<&str> = used
                .iter()
                .filter_map(|k| promise_type(k))
                .flat_map(|t| t.all_attrs().map(|s| s.name))
                .collect();
            d = match did_you_mean(&a.name.name, candidates.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `{s}`?")),
                None => d.with_help(
                    "remove it, or write `defaults TYPE { ... }` for the promise type you mean",
                ),
            };
            d = if used.is_empty() {
                d.with_note("the bundle makes no promises of its own")
            } else {
                d.with_note(format!(
                    "the bundle's promises are of type {}",
                    one_of(&used)
                ))
            };
            self.push(d);
            self.value_type_or_word(a.value, &Vec::new());
            return false;
        }
        if a.via.is_none() {
            let id = self.names.builtin(DefKind::Attribute, &a.name.name);
            self.names.record(a.name.span, id);
        }
        let mut checked: Vec<&AttrType> = Vec::new();
        for t in types {
            if let Some(spec) = t.attr(&a.name.name) {
                if !checked.contains(&&spec.ty) {
                    checked.push(&spec.ty);
                    self.check_default_value(&spec.ty, a, scope);
                }
            }
        }
        true
    }

    /// A default's value, checked once where it is written: a body's
    /// values see the `let`s only, the block's own the bundle's parameters.
    fn check_default_value(&mut self, ty: &AttrType, a: &AttrSource<'_>, scope: &Scope) {
        let empty: Scope = Vec::new();
        let scope = if a.via.is_some() { &empty } else { scope };
        self.check_attr_value(ty, a.value, scope);
        match a.name.name.as_str() {
            "template" => self.check_template_attr(a.value, scope),
            "source" => self.check_source_path(a.value),
            _ => {}
        }
    }

    fn unknown_defaults_type(&mut self, kind: &ast::Ident) {
        let names: Vec<&str> = schema::PROMISE_TYPES.iter().map(|t| t.name).collect();
        let mut d = Diagnostic::new(
            Code::DefaultsUnknownType,
            format!(
                "`defaults {}`: there is no promise type `{}`",
                kind.name, kind.name
            ),
            kind.span,
            "not a promise type",
        );
        d = match did_you_mean(&kind.name, names.iter().copied()) {
            Some(s) => d.with_help(format!("did you mean `defaults {s}`?")),
            None => d.with_note(format!("the promise types are {}", one_of(&names))),
        };
        self.push(d);
    }

    /// The values of a block that is not used (reported already), read for
    /// the names they use only.
    fn loose_values(&mut self, block: &ast::Defaults) {
        for stmt in &block.attrs {
            if let AttrStmt::Set(attr) = stmt {
                self.value_type_or_word(&attr.value, &Vec::new());
            }
        }
    }

    /// A `defaults` block anywhere but at the top of a bundle.
    pub(super) fn misplaced_defaults(&mut self, block: &ast::Defaults) {
        self.push(
            Diagnostic::new(
                Code::MisplacedDefaults,
                "`defaults` must come first in a bundle",
                block.head(),
                "not at the top of a bundle",
            )
            .with_help("move this block before the bundle's first promise, call, `when` or `for`")
            .with_note("defaults apply to every promise of their bundle; inside `when`, `for` or the `policy` block they have no bundle to apply to"),
        );
        self.loose_values(block);
    }
}

/// The `defaults` that apply to a promise of type `pt` whose own
/// attributes (written or spliced) are `own`, appended to it.
pub(super) fn add_defaults<'p>(
    defaults: &'p [DefaultAttr],
    pt: Option<&PromiseType>,
    own: &mut Vec<AttrSource<'p>>,
) {
    let Some(pt) = pt else { return };
    if defaults.is_empty() {
        return;
    }
    let mut taker = Taker::new(pt, own.iter().map(|a| a.name.name.as_str()));
    for d in defaults {
        if taker.take(d.kind, &d.name.name) {
            own.push(d.source());
        }
    }
}

/// Which defaults a promise takes: the one rule, shared by the checker and
/// the language server's hover ([`applied`]).
#[derive(Debug)]
pub struct Taker<'n> {
    pt: &'n PromiseType,
    taken: HashSet<&'n str>,
}

impl<'n> Taker<'n> {
    /// For a promise of type `pt` that sets `own` itself (written, or from
    /// the bodies it uses).
    pub fn new(pt: &'n PromiseType, own: impl IntoIterator<Item = &'n str>) -> Self {
        let mut taken: HashSet<&'n str> = own.into_iter().collect();
        // One of a group of alternatives set by the promise takes the
        // whole group: its own `source` wins over a default `content`.
        for rule in pt.rules {
            if let Rule::ExactlyOne(names) | Rule::AtMostOne(names) = rule {
                if names.iter().any(|n| taken.contains(n)) {
                    taken.extend(names.iter().copied());
                }
            }
        }
        Taker { pt, taken }
    }

    /// Whether the default `name` of a block for `kind` (`None`: untyped)
    /// applies; asked typed blocks first, so the first answer wins.
    pub fn take(&mut self, kind: Option<&str>, name: &'n str) -> bool {
        let applies = match kind {
            Some(kind) => kind == self.pt.name,
            None => self.pt.attr(name).is_some(),
        };
        applies && self.taken.insert(name)
    }
}

/// The defaults written in `bundle` that promise `p` (of that bundle)
/// takes, with their blocks, for hover. `body_attrs` gives the attribute
/// names a body sets (bodies the promise `use`s count as its own; bodies
/// used inside a `defaults` block are not listed).
pub fn applied<'a>(
    bundle: &'a BundleDef,
    p: &'a ast::Promise,
    body_attrs: &dyn Fn(&str) -> Vec<&'a str>,
) -> Vec<(&'a ast::Attr, &'a ast::Defaults)> {
    let Some(pt) = promise_type(&p.kind.name) else {
        return Vec::new();
    };
    let own = p.attrs.iter().flat_map(|a| match a {
        AttrStmt::Set(set) => vec![set.name.name.as_str()],
        AttrStmt::Use(u) => body_attrs(&u.body.name),
        AttrStmt::Error(_) => Vec::new(),
    });
    let mut taker = Taker::new(pt, own);
    let blocks: Vec<&ast::Defaults> = bundle
        .body
        .iter()
        .map_while(|s| match s {
            Stmt::Defaults(d) => Some(d),
            _ => None,
        })
        .collect();
    let typed = blocks.iter().filter(|b| b.kind.is_some());
    let untyped = blocks.iter().filter(|b| b.kind.is_none());
    let mut out = Vec::new();
    for block in typed.chain(untyped) {
        let kind = block.kind.as_ref().map(|k| k.name.as_str());
        for stmt in &block.attrs {
            if let AttrStmt::Set(attr) = stmt {
                if taker.take(kind, &attr.name.name) {
                    out.push((attr, *block));
                }
            }
        }
    }
    out
}

/// The promise types of the promises written in `stmts` (inside `when` and
/// `for` too; not those of called bundles), each once.
fn promise_kinds<'b>(stmts: &'b [Stmt], out: &mut Vec<&'b str>) {
    for stmt in stmts {
        match stmt {
            Stmt::Promise(p) => {
                if !out.contains(&p.kind.name.as_str()) {
                    out.push(&p.kind.name);
                }
            }
            Stmt::When(w) => promise_kinds(&w.body, out),
            Stmt::For(f) => promise_kinds(&f.body, out),
            Stmt::Call(_) | Stmt::Defaults(_) | Stmt::Error(_) => {}
        }
    }
}

/// A checker diagnostic about attributes some of which a promise takes
/// from its bundle's defaults: it is reported at the `defaults` block (the
/// attribute's own label) and at the promise.
pub(super) trait DefaultsLabel {
    fn pipe_defaults(self, attrs: &[&AttrSource<'_>], promise: Span) -> Self;
}

impl DefaultsLabel for Diagnostic {
    fn pipe_defaults(mut self, attrs: &[&AttrSource<'_>], promise: Span) -> Self {
        for a in attrs.iter().filter(|a| a.default.is_some()) {
            self = self.with_secondary(
                promise,
                format!(
                    "this promise takes `{}` from its bundle's defaults",
                    a.name.name
                ),
            );
        }
        self
    }
}
