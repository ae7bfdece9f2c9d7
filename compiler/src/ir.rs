//! The expanded program: every promise after bundle calls, compile-time
//! `for` loops and `use` splicing, each with its full guard, its resolved
//! attribute values and where it came from. Contradiction analysis, the
//! ordering graph and code generation all work on this flat list.

use std::sync::Arc;

pub use converge_grammar::ast::CompareOp;
use converge_grammar::Span;

#[derive(Clone, Debug, Default)]
pub struct Program {
    pub promises: Vec<Promise>,
    /// Class definitions and declarations, in definition order.
    pub classes: Vec<ClassDecl>,
    /// `exclusive` groups.
    pub exclusive: Vec<Vec<String>>,
    /// The ordering graph (filled in by the ordering analysis).
    pub edges: Vec<Edge>,
    /// Promise indices in the order the VM applies them.
    pub order: Vec<usize>,
    /// How many passes the VM may make before it declares the run not
    /// converged (the longest outcome-class chain plus 2, capped).
    pub pass_limit: u32,
    /// The longest chain of outcome-class edges (promise indices), which
    /// sets the pass limit; empty without feedback.
    pub feedback_chain: Vec<usize>,
    /// The probe facts the VM gathers before classes (LANGUAGE.md section
    /// 15), in declaration order, as the bundle records them.
    pub probes: Vec<converge_format::bundle::probe::Probe>,
}

/// An edge of the ordering graph: promise `from` is applied before `to`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    pub kind: EdgeKind,
    /// Where the edge comes from in the source (the `after` list, the
    /// `notify` list, the `on_*` attribute, or the contained promise).
    pub span: Span,
    /// For outcome edges, the class that links the two promises.
    pub class: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// `after = [...]` on `to`.
    After,
    /// `notify = [...]` on `from`.
    Notify,
    /// `from` sets an outcome class that `to`'s guard depends on.
    Outcome,
    /// `from` is a directory containing `to`, or the file a `line` edits.
    Contains,
    /// Accounts: `from` is a `group` that user `to` has as its primary
    /// (`group`) or supplementary (`groups`) group, or `from` is a user
    /// that group `to` lists in `members`: the tools need it to exist.
    Account,
}

#[derive(Clone, Debug)]
pub struct ClassDecl {
    pub name: String,
    /// `None` for a class declared for outcomes or `--define`.
    pub expr: Option<Guard>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Promise {
    /// The promise type (`file`, `package`, ...).
    pub kind: &'static str,
    pub promiser: Value,
    /// Attributes in the order they were written (the promise's own, then
    /// those spliced from bodies), with the span of each value.
    pub attrs: Vec<Attr>,
    /// The conjunction of every enclosing `when` and call-site guard
    /// (shared by the promises of one block).
    pub guard: Arc<Guard>,
    /// The promise type and promiser as written.
    pub span: Span,
    /// The bundle calls that led here, outermost first (shared by the
    /// promises of one call).
    pub chain: Arc<[CallSite]>,
    /// What few promises have, boxed so that the others do not carry its
    /// 56 bytes (an expanded program has millions of promises; issue 22,
    /// item 4): read it through [`runtime_loops`](Self::runtime_loops),
    /// [`missing`](Self::missing) and [`lookups`](Self::lookups). `None`
    /// when all three are empty.
    pub rare: Option<Box<Rare>>,
}

/// The rarely set fields of a [`Promise`].
#[derive(Clone, Debug, Default)]
pub struct Rare {
    /// Loops over run-time lists (`for ip in sys.ipv4`) enclosing the
    /// promise, outermost first: the VM repeats the promise per element.
    pub runtime_loops: Arc<[RuntimeLoop]>,
    /// Set when a lookup without `??` finds nothing in this instance (the
    /// span of the lookup): an error if a host can make its guard true
    /// (`analysis::missing`), never compiled.
    pub missing: Option<Span>,
    /// The lookups keyed by a fact this instance was split on
    /// (`sema::expand::split`), in the order they were split: which keys it
    /// stands for, or that it is the case of every other host. `policyc
    /// explain` shows them.
    pub lookups: Vec<LookupCase>,
}

impl Rare {
    /// The fields of a promise in no run-time loop, without missing
    /// lookups or lookup cases, as `None` (see [`Promise::rare`]).
    pub fn boxed_unless_empty(self) -> Option<Box<Rare>> {
        let empty =
            self.runtime_loops.is_empty() && self.missing.is_none() && self.lookups.is_empty();
        (!empty).then(|| Box::new(self))
    }
}

impl Promise {
    /// See [`Rare::runtime_loops`].
    pub fn runtime_loops(&self) -> &[RuntimeLoop] {
        self.rare.as_ref().map_or(&[], |r| &r.runtime_loops)
    }

    /// See [`Rare::missing`].
    pub fn missing(&self) -> Option<Span> {
        self.rare.as_ref().and_then(|r| r.missing)
    }

    /// See [`Rare::lookups`].
    pub fn lookups(&self) -> &[LookupCase] {
        self.rare.as_ref().map_or(&[], |r| &r.lookups)
    }

    /// The rare fields, to change (boxed on first use).
    pub fn rare_mut(&mut self) -> &mut Rare {
        self.rare.get_or_insert_with(Box::default)
    }
}

/// One case of a lookup keyed by a value only the host knows
/// (`sites[sys.hostname]`): the instance of a promise made for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LookupCase {
    /// The key, as in [`Choice::on`] (`sys.hostname`).
    pub on: Value,
    /// The keys this instance stands for (keys that give the promise the
    /// same values share one instance); empty: none of the keys, so the
    /// `??` default (or, without one, the lookup finds nothing).
    pub keys: Vec<String>,
    /// How many keys the lookup has in all.
    pub of: usize,
}

impl Promise {
    pub fn attr(&self, name: &str) -> Option<&Value> {
        self.attrs.iter().find(|a| a.name == name).map(|a| &a.value)
    }
}

impl Attr {
    /// `name = value` as a policy author would write it (modes in octal).
    pub fn display(&self) -> String {
        match (self.name, &self.value) {
            ("mode", Value::Int(m)) if *m >= 0 => format!("mode = 0o{m:o}"),
            (name, value) => format!("{name} = {}", value.display()),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Attr {
    /// The schema's name of the attribute (`converge_format::schema`): an
    /// expanded program has several attributes per promise, and a `String`
    /// each was a heap allocation apiece, a `SmolStr` 8 bytes more than
    /// this (issue 22, item 4).
    pub name: &'static str,
    pub value: Value,
    pub span: Span,
    /// Set when the promise does not set this attribute itself and takes
    /// it from its bundle's `defaults` (LANGUAGE.md section 17); `span` is
    /// then the value in the `defaults` block.
    pub default: Option<Arc<DefaultOrigin>>,
}

/// Where a defaulted attribute comes from: what a diagnostic about it adds
/// at the promise (`analysis::defaults`), and what hover shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DefaultOrigin {
    /// `defaults` or `defaults file` as written.
    pub block: Span,
    /// The block as `file:line:col`, for messages.
    pub at: String,
}

impl Promise {
    /// Where attribute `name` of this promise came from, if from defaults.
    pub fn default_origin(&self, name: &str) -> Option<&DefaultOrigin> {
        self.attrs
            .iter()
            .find(|a| a.name == name)
            .and_then(|a| a.default.as_deref())
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    pub bundle: String,
    /// The call statement.
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeLoop {
    pub var: String,
    /// The fact holding the list (`sys.ipv4`).
    pub fact: String,
}

/// A value known at compile time, or an expression over facts and run-time
/// loop variables that the VM evaluates.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    /// Seconds.
    Duration(u64),
    /// A bare word: an enum value (`installed`) or a class name.
    Word(String),
    List(Vec<Value>),
    /// A map, its entries sorted by key (keys are unique).
    Map(Vec<(String, Value)>),
    /// A record value: every field of its type, in declaration order
    /// (omitted fields already given their defaults).
    Record(Vec<(String, Value)>),
    /// A reference to a promise: `file "/x"` (kind `file`) or `id "h"`.
    /// `kind` is a `Box<str>` so that the variant fits the 24 bytes of a
    /// `Vec`: the largest variant sets the size of every value of an
    /// expanded program (32 bytes; issue 22, item 4).
    Ref {
        kind: Box<str>,
        target: Box<Value>,
    },
    /// A string with run-time parts.
    Template(Vec<TemplatePart>),
    /// The value of a fact (`sys.cpus`).
    Fact(String),
    /// The value of a probe fact (LANGUAGE.md section 15): `name` is the
    /// whole read, `facts.hw.cpus`, and `ty` what the VM pushes for it.
    /// One value per host like a fact, but one the host may not know (its
    /// probe failed): the promises that need it are then skipped.
    Probe {
        name: String,
        ty: converge_format::bundle::verify::Ty,
    },
    /// The current element of a run-time loop.
    LoopVar(String),
    /// A value looked up in a compile-time map by a value only the host
    /// knows (`sites[sys.hostname]`): one case per key, and what a host
    /// whose key is none of them gets. Expansion splits every promise that
    /// holds one into one promise per case (guarded by `on == key`), so no
    /// choice reaches the analyses or the bundle (LANGUAGE.md section 11,
    /// "Analysis stays exact").
    Choice(Box<Choice>),
    /// A lookup that found nothing, where no `??` gives a default: an error
    /// wherever a host can reach it. The span is the lookup.
    Missing(Span),
    /// A built-in function applied on the host to values only the host
    /// knows. Boxed, as [`Each`](Value::Each): a rare variant, which inline
    /// would make every value larger.
    Call(Box<Call>),
    /// `a ?? b ?? c` where the host decides which is present.
    Coalesce(Vec<Value>),
    /// `{% if c %}a{% else %}b{% endif %}` where the host decides `c`.
    Select {
        cond: Box<Guard>,
        then: Box<Value>,
        otherwise: Box<Value>,
    },
    /// `{% for x in LIST %}body{% endfor %}` over a list only the host
    /// knows (boxed, as [`Call`](Value::Call)).
    Each(Box<Each>),
    Elem(String),
    /// The value of `secret("x.age")` (LANGUAGE.md section 14): which file,
    /// never its plaintext, which only the bundle writer reads (and seals
    /// at once). Everything computed from a secret holds this value (the
    /// compiler never computes with it: it is not a constant), which is how
    /// the taint check (`sema::secrets`) sees every flow. It shows as
    /// `<secret NAME>` everywhere.
    Secret(Arc<SecretRef>),
}

/// See [`Value::Call`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Call {
    /// The VM's function name (`converge_format::bundle::functions`).
    pub func: &'static str,
    pub args: Vec<Value>,
}

/// See [`Value::Each`]: `body` once per element of `list`, concatenated;
/// inside it, `Elem(var)` is the current element.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Each {
    pub list: Value,
    pub var: String,
    pub body: Value,
}

impl Value {
    /// `func(args)`, computed on the host.
    pub fn call(func: &'static str, args: Vec<Value>) -> Value {
        Value::Call(Box::new(Call { func, args }))
    }
}

/// Where a secret comes from: see [`Value::Secret`].
#[derive(Clone, Debug)]
pub struct SecretRef {
    /// What every output shows: the file's stem (`db_password` for
    /// `secrets/db_password.age`), so that one file has one name however
    /// many `let`s hold it.
    pub name: String,
    /// The file, resolved inside the policy tree.
    pub path: std::path::PathBuf,
    /// The `secret(...)` call that read it (the first one, if several
    /// read the same file): where a flow starts, where a build that cannot
    /// decrypt it points.
    pub span: Span,
}

/// One secret is one file: two `secret(...)` calls of the same file are
/// the same value (a contradiction compares the file, not the plaintext).
impl PartialEq for SecretRef {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for SecretRef {}

impl std::hash::Hash for SecretRef {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.path.hash(state);
    }
}

/// See [`Value::Choice`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Choice {
    /// The key, a string only the host knows (usually a fact).
    pub on: Value,
    /// The value per key, sorted by key.
    pub cases: Vec<(String, Value)>,
    /// The value for any other key.
    pub default: Value,
}

impl Value {
    /// Whether the value is fully known at compile time.
    pub fn is_constant(&self) -> bool {
        match self {
            Value::Template(_)
            | Value::Fact(_)
            | Value::Probe { .. }
            | Value::LoopVar(_)
            | Value::Choice(_)
            | Value::Missing(_)
            | Value::Call(_)
            | Value::Coalesce(_)
            | Value::Select { .. }
            | Value::Each(_)
            | Value::Elem(_)
            | Value::Secret(_) => false,
            Value::List(items) => items.iter().all(Value::is_constant),
            Value::Map(entries) | Value::Record(entries) => {
                entries.iter().all(|(_, v)| v.is_constant())
            }
            Value::Ref { target, .. } => target.is_constant(),
            _ => true,
        }
    }

    /// The values directly inside this one (elements, entries, fields,
    /// cases and default, arguments, template parts, branches), for the
    /// walks that look for something anywhere in a value. A choice's key
    /// expression is not among them.
    pub fn children(&self) -> Vec<&Value> {
        match self {
            Value::List(items) | Value::Coalesce(items) => items.iter().collect(),
            Value::Map(e) | Value::Record(e) => e.iter().map(|(_, v)| v).collect(),
            Value::Choice(c) => c
                .cases
                .iter()
                .map(|(_, v)| v)
                .chain(std::iter::once(&c.default))
                .collect(),
            Value::Call(call) => call.args.iter().collect(),
            Value::Template(parts) => parts
                .iter()
                .filter_map(|p| match p {
                    TemplatePart::Host(v) => Some(v),
                    _ => None,
                })
                .collect(),
            Value::Select {
                then, otherwise, ..
            } => vec![then, otherwise],
            Value::Each(each) => vec![&each.list, &each.body],
            Value::Ref { target, .. } => vec![target],
            _ => Vec::new(),
        }
    }

    /// The first `Some` that `f` gives for the values directly inside this
    /// one, in the order of [`children`](Self::children), without
    /// collecting them first (the walks over every value of an expanded
    /// program use it).
    pub fn find_child<'v, T>(&'v self, mut f: impl FnMut(&'v Value) -> Option<T>) -> Option<T> {
        match self {
            Value::List(items) | Value::Coalesce(items) => items.iter().find_map(f),
            Value::Map(e) | Value::Record(e) => e.iter().find_map(|(_, v)| f(v)),
            Value::Choice(c) => c
                .cases
                .iter()
                .find_map(|(_, v)| f(v))
                .or_else(|| f(&c.default)),
            Value::Call(call) => call.args.iter().find_map(f),
            Value::Template(parts) => parts.iter().find_map(|p| match p {
                TemplatePart::Host(v) => f(v),
                _ => None,
            }),
            Value::Select {
                then, otherwise, ..
            } => f(then).or_else(|| f(otherwise)),
            Value::Each(each) => f(&each.list).or_else(|| f(&each.body)),
            Value::Ref { target, .. } => f(target),
            _ => None,
        }
    }

    /// The name of the host fact this value is (`sys.hostname`,
    /// `facts.datacenter`): the analyses treat both kinds alike.
    pub fn host_fact(&self) -> Option<&str> {
        match self {
            Value::Fact(name) | Value::Probe { name, .. } => Some(name),
            _ => None,
        }
    }

    /// The text of a constant string or word.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) | Value::Word(s) => Some(s),
            _ => None,
        }
    }

    /// How the value reads in messages and `policyc explain`.
    pub fn display(&self) -> String {
        match self {
            Value::Str(s) => format!("{s:?}"),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Duration(s) => format!("{s}s"),
            Value::Word(w) => w.clone(),
            Value::List(items) => {
                let items: Vec<String> = items.iter().map(Value::display).collect();
                format!("[{}]", items.join(", "))
            }
            Value::Map(entries) => {
                let items: Vec<String> = entries
                    .iter()
                    .map(|(k, v)| format!("{k:?}: {}", v.display()))
                    .collect();
                format!("{{{}}}", items.join(", "))
            }
            Value::Record(fields) => {
                let items: Vec<String> = fields
                    .iter()
                    .map(|(k, v)| format!("{k}: {}", v.display()))
                    .collect();
                format!("{{ {} }}", items.join(", "))
            }
            Value::Ref { kind, target } => format!("{kind} {}", target.display()),
            Value::Template(parts) => {
                let text: String = parts
                    .iter()
                    .map(|p| match p {
                        TemplatePart::Lit(t) => t.replace('$', "\\$"),
                        TemplatePart::Fact(f) => format!("${{{f}}}"),
                        TemplatePart::LoopVar(v) => format!("${{{v}}}"),
                        TemplatePart::Host(v) => format!("${{{}}}", v.display()),
                    })
                    .collect();
                format!("{text:?}")
            }
            Value::Fact(f) | Value::Probe { name: f, .. } => f.clone(),
            Value::LoopVar(v) | Value::Elem(v) => v.clone(),
            Value::Choice(c) => {
                let cases: Vec<String> = c
                    .cases
                    .iter()
                    .map(|(k, v)| format!("{k:?}: {}", v.display()))
                    .collect();
                format!(
                    "({} one of {{{}}}, else {})",
                    c.on.display(),
                    cases.join(", "),
                    c.default.display()
                )
            }
            Value::Missing(_) => "(missing)".to_owned(),
            Value::Secret(secret) => format!("<secret {}>", secret.name),
            Value::Call(call) => {
                let args: Vec<String> = call.args.iter().map(Value::display).collect();
                format!("{}({})", call.func, args.join(", "))
            }
            Value::Coalesce(items) => {
                let items: Vec<String> = items.iter().map(Value::display).collect();
                items.join(" ?? ")
            }
            Value::Select {
                cond,
                then,
                otherwise,
            } => format!(
                "(if {} then {} else {})",
                cond.display(),
                then.display(),
                otherwise.display()
            ),
            Value::Each(each) => {
                format!(
                    "(for {} in {}: {})",
                    each.var,
                    each.list.display(),
                    each.body.display()
                )
            }
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TemplatePart {
    Lit(String),
    Fact(String),
    LoopVar(String),
    /// Any other single value only the host knows (a function call, a
    /// `??`, an `{% if %}`, a loop over a host list).
    Host(Value),
}

/// A class expression after expansion: bundle parameters and compile-time
/// loop variables are substituted, comparisons of constants are folded.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Guard {
    Const(bool),
    Class(String),
    Compare {
        op: CompareOp,
        lhs: Value,
        rhs: Value,
    },
    Not(Box<Guard>),
    And(Vec<Guard>),
    Or(Vec<Guard>),
}

impl Guard {
    /// The guard in policy syntax, for messages (`web && !debian`).
    pub fn display(&self) -> String {
        self.display_in(0)
    }

    /// `level`: 0 top, 1 inside `||`, 2 inside `&&`, 3 inside `!`.
    fn display_in(&self, level: u8) -> String {
        let (text, own) = match self {
            Guard::Const(b) => (b.to_string(), 4),
            Guard::Class(name) => (name.clone(), 4),
            Guard::Compare { op, lhs, rhs } => (
                format!("{} {} {}", lhs.display(), op.as_str(), rhs.display()),
                3,
            ),
            Guard::Not(inner) => (format!("!{}", inner.display_in(3)), 3),
            Guard::And(items) => {
                let parts: Vec<String> = items.iter().map(|g| g.display_in(2)).collect();
                (parts.join(" && "), 2)
            }
            Guard::Or(items) => {
                let parts: Vec<String> = items.iter().map(|g| g.display_in(1)).collect();
                (parts.join(" || "), 1)
            }
        };
        if own < level || (own == 3 && level == 3 && !matches!(self, Guard::Not(_))) {
            format!("({text})")
        } else {
            text
        }
    }

    /// `a && b`, simplifying constants and flattening.
    pub fn and(self, other: Guard) -> Guard {
        match (self, other) {
            (Guard::Const(true), g) | (g, Guard::Const(true)) => g,
            (Guard::Const(false), _) | (_, Guard::Const(false)) => Guard::Const(false),
            (Guard::And(mut a), Guard::And(b)) => {
                a.extend(b);
                Guard::And(a)
            }
            (Guard::And(mut a), g) => {
                a.push(g);
                Guard::And(a)
            }
            (g, Guard::And(mut b)) => {
                b.insert(0, g);
                Guard::And(b)
            }
            (a, b) => Guard::And(vec![a, b]),
        }
    }
}

#[cfg(all(test, target_pointer_width = "64"))]
mod tests {
    use super::*;

    /// An expanded program holds millions of values, attributes and
    /// promises: a variant or field that makes them larger costs its size
    /// times millions (issue 22, item 4).
    #[test]
    fn the_types_of_an_expanded_program_stay_small() {
        assert_eq!(std::mem::size_of::<Value>(), 32);
        assert_eq!(std::mem::size_of::<Attr>(), 72);
        assert_eq!(std::mem::size_of::<Promise>(), 120);
    }
}
