//! Expansion: from the `policy` block, instantiate every bundle call with
//! its arguments, unroll `for` loops over compile-time lists, splice `use`d
//! bodies, and collect the resulting promises into a flat [`ir::Program`],
//! each with its full guard and call chain.
//!
//! Runs only on a program that type-checked, so it reports only what needs
//! real argument values: a promiser that turns out relative, a word passed
//! for an enum, a mode out of range, a missing map key, recursive bundles,
//! and `after`/`notify` references to promises the policy does not make.

mod functions;
mod lookups;
mod neighbours;

pub(crate) use lookups::{kind as value_kind, Kind as ValueKind};
mod split;
mod templates;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::rc::Rc;
use std::sync::Arc;

use converge_format::schema::{promise_type, AttrType, PromiserKind};
use converge_grammar::ast::{self, ClassDef, Expr, ExprKind, PolicyDef, SmolStr, Stmt};
use converge_grammar::token::{StrLit, StrPart};
use converge_grammar::Span;

use super::check::{bind_arguments, promiser_problem, relative_path, Checker};
use super::names::{DefId, DefKind};
use super::secrets;
use super::symbols::Symbols;
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, CallSite, Guard, RuntimeLoop, TemplatePart, Value};
use crate::suggest::{did_you_mean, one_of};
use lookups::Indexed;

#[derive(Debug)]
pub struct Expansion {
    pub program: ir::Program,
    pub diagnostics: Vec<Diagnostic>,
}

/// Bundle calls nest at most this deep (recursion is reported before it);
/// a deeper call is an error (E0601), never a silent drop: 70 nested calls
/// used to print "64 promises: no errors" and lose the deepest six (issue
/// 14, item 23).
pub const MAX_CALL_DEPTH: usize = 64;

/// The least instance budget of one expansion: promises, bundle calls and
/// iterations of compile-time loops together. A policy past its budget is
/// an error (E0601) naming the call chain and loops where it ran out:
/// bundles that call the next one twice double at every level, and ten
/// nested loops over ten items make ten billion promises, from a few
/// hundred bytes of source (issue 14, item 11). The 100,000-promise
/// benchmark policy uses 160,000.
pub const MAX_INSTANCES: usize = 500_000;

/// Past [`MAX_INSTANCES`], a program gets one instance per this many bytes
/// of its policy files (see [`instance_budget`]). The 1,000,000-promise
/// benchmark policy (127 MB) uses 1,600,000 instances, one per 79 bytes,
/// and gets a budget of 3,960,000.
pub const SOURCE_BYTES_PER_INSTANCE: usize = 32;

/// The instance budget of a program whose policy files hold
/// `source_bytes` bytes: [`MAX_INSTANCES`], or one instance per
/// [`SOURCE_BYTES_PER_INSTANCE`] bytes if that is more. The budget protects
/// the compiler from source that multiplies (a blow-up is many instances
/// from little text), so it scales with the text: a large policy written
/// out promise by promise is not a blow-up, and its memory stays a fixed
/// multiple of its size (issue 22, item 4).
pub fn instance_budget(source_bytes: usize) -> usize {
    MAX_INSTANCES.max(source_bytes / SOURCE_BYTES_PER_INSTANCE)
}

/// The capacity expansion reserves for the promises of a program of
/// `statements` promise statements: twice as many (loops and bundles
/// called more than once make more), at most the instance budget. A list
/// that doubled its way up to 1,200,000 promises copied them and wrote
/// fresh pages at every step (the allocator moves a large block to grow
/// it); pages of the reserve that are never written are never resident,
/// so a reserve larger than the program costs address space only.
fn room_for_promises(statements: usize, budget: usize) -> usize {
    statements.saturating_mul(2).min(budget)
}

/// Expands the `policy` block of a program whose policy files hold
/// `source_bytes` bytes (which sets its [`instance_budget`]).
pub fn expand<'a>(
    db: &crate::source::SourceDb,
    symbols: &'a Symbols<'a>,
    checker: &mut Checker<'a>,
    bodies: super::bodies::Bodies,
    policy: &'a PolicyDef,
    source_bytes: usize,
) -> Expansion {
    // The policy block has no defaults.
    checker.defaults = super::check::defaults::Defaults::default();
    let budget = instance_budget(source_bytes);
    let room = room_for_promises(checker.promise_statements, budget);
    let mut ex = Expander {
        db,
        default_origins: HashMap::default(),
        symbols,
        checker,
        bodies,
        diagnostics: Vec::new(),
        promises: Vec::with_capacity(room),
        lets: HashMap::default(),
        chain: Vec::new(),
        loops: Vec::new(),
        shared_chain: Arc::from(Vec::new()),
        shared_loops: Arc::from(Vec::new()),
        reported_recursion: HashSet::default(),
        instances: 0,
        budget,
        exhausted: false,
        compile_loops: Vec::new(),
        name_hint: 0,
        optional: 0,
        guard_missing: None,
        by_name: false,
        assumed: Vec::new(),
    };
    ex.stmts(&policy.body, &mut Vec::new(), &Arc::new(Guard::Const(true)));
    let mut classes: Vec<ir::ClassDecl> = symbols
        .classes
        .defs
        .iter()
        .map(|(name, def)| ex.class_decl(name, def))
        .collect();
    // The inventory's groups, as classes over their members' host classes.
    if let Some(inventory) = &symbols.inventory {
        classes.extend(inventory.class_decls());
    }
    let mut exclusive: Vec<Vec<String>> = symbols
        .exclusives
        .iter()
        .map(|g| g.classes.iter().map(|c| c.name.to_string()).collect())
        .collect();
    if let Some(inventory) = &symbols.inventory {
        let hosts = inventory.exclusive_hosts(&ex.checker.names);
        if hosts.len() > 1 {
            exclusive.push(hosts);
        }
    }
    // A program cut short by the instance budget is not analysed: its
    // error says why, and contradictions found in an arbitrary part of it
    // would only add noise (and the work the budget exists to avoid).
    if ex.exhausted {
        ex.promises.clear();
    }
    let program = ir::Program {
        promises: std::mem::take(&mut ex.promises),
        classes,
        exclusive,
        probes: ex
            .checker
            .facts
            .iter()
            .map(|(_, f)| f.probe.clone())
            .collect(),
        ..ir::Program::default()
    };
    Expansion {
        program,
        diagnostics: ex.diagnostics,
    }
}

/// A defaulted `notify`/`after` list without the references to the
/// promise itself (by type and promiser, or by its own `id`).
fn without_self(value: Value, kind: &str, promiser: &Value, own: &[ir::Attr]) -> Value {
    let Value::List(items) = value else {
        return value;
    };
    let id = own.iter().find(|a| a.name == "id").map(|a| &a.value);
    Value::List(
        items
            .into_iter()
            .filter(|item| match item {
                Value::Ref { kind: k, target } if &**k == "id" => id != Some(&**target),
                Value::Ref { kind: k, target } => !(&**k == kind && **target == *promiser),
                _ => true,
            })
            .collect(),
    )
}

/// The values of the variables in scope, by their definition in the
/// checker's name table (and by name, for templates).
type Env = Vec<(DefId, SmolStr, Value)>;

struct Expander<'a, 'c> {
    /// The sources, for the `file:line:col` of a `defaults` block.
    db: &'c crate::source::SourceDb,
    /// Where each `defaults` block is, by its head (made once per block).
    default_origins: HashMap<Span, Arc<ir::DefaultOrigin>>,
    symbols: &'a Symbols<'a>,
    checker: &'c mut Checker<'a>,
    /// The bundles' statements: taken for each call, freed after the last
    /// one when they were moved out of the trees (`sema::bodies`).
    bodies: super::bodies::Bodies,
    diagnostics: Vec<Diagnostic>,
    promises: Vec<ir::Promise>,
    lets: HashMap<&'a str, Value>,
    chain: Vec<CallSite>,
    loops: Vec<RuntimeLoop>,
    /// `chain` and `loops` as shared slices, rebuilt when they change, so
    /// that every promise of a call shares one allocation.
    shared_chain: Arc<[CallSite]>,
    shared_loops: Arc<[RuntimeLoop]>,
    reported_recursion: HashSet<Span>,
    /// Instances made so far.
    instances: usize,
    /// The most instances this expansion may make ([`instance_budget`]).
    budget: usize,
    /// Set once the budget is spent: expansion stops, with one error.
    exhausted: bool,
    /// The compile-time loops being unrolled (variable, list length), for
    /// the message when the budget runs out.
    compile_loops: Vec<(SmolStr, usize)>,
    /// Where in the checker's name table the last name was found (names
    /// are read mostly in source order).
    name_hint: usize,
    /// Inside the left side of a `??` (how deep): a lookup that finds
    /// nothing is a value the `??` replaces, not an error.
    optional: usize,
    /// While a `when` condition is evaluated: where each lookup in it finds
    /// nothing (its span, and the guard of the hosts where it is missing),
    /// for [`Expander::mark_missing_regions`]. `None` elsewhere: a missing
    /// lookup in a condition is reported at once.
    guard_missing: Option<Vec<(Span, Guard)>>,
    /// While rendering a template file: names are found by name in the
    /// environment (one template may serve several bundles, whose
    /// parameters are different definitions).
    by_name: bool,
    /// While rendering one case of a choice: the host's key value is that
    /// key (`templates.rs`, `assuming`).
    assumed: Vec<(Value, String)>,
}

impl<'a> Expander<'a, '_> {
    /// Counts one instance made at `span`; false (with one error, the first
    /// time) once the budget is spent.
    /// Counts `n` instances (see [`spend`](Self::spend)).
    fn spend_many(&mut self, n: usize, span: Span) -> bool {
        (0..n).all(|_| self.spend(span))
    }

    fn spend(&mut self, span: Span) -> bool {
        if self.exhausted {
            return false;
        }
        self.instances += 1;
        if self.instances <= self.budget {
            return true;
        }
        self.exhausted = true;
        let mut d = Diagnostic::new(
            Code::ExpansionLimit,
            format!(
                "this policy expands to more than {} instances (promises, bundle calls and loop iterations)",
                self.budget
            ),
            span,
            "the budget ran out here",
        )
        .with_note(format!("call chain: {}", self.chain_text(None)));
        if !self.compile_loops.is_empty() {
            let loops: Vec<String> = self
                .compile_loops
                .iter()
                .map(|(var, len)| format!("`for {var}` over {len} items"))
                .collect();
            d = d.with_note(format!("inside {}", loops.join(", inside ")));
        }
        self.diagnostics.push(d.with_help(
            "a bundle that calls another twice doubles the work at every level, and nested loops multiply; expand less, or move the repetition into data the host iterates (`for x in sys....`)",
        ));
        false
    }

    /// `policy -> a -> b -> c`, shortened in the middle when long.
    fn chain_text(&self, next: Option<&str>) -> String {
        let mut names: Vec<&str> = vec!["policy"];
        names.extend(self.chain.iter().map(|c| c.bundle.as_str()));
        names.extend(next);
        if names.len() > 12 {
            let skipped = names.len() - 8;
            let head = names.get(..4).unwrap_or_default().join(" -> ");
            let tail = names
                .get(names.len() - 4..)
                .unwrap_or_default()
                .join(" -> ");
            return format!("{head} -> ... ({skipped} more) ... -> {tail}");
        }
        names.join(" -> ")
    }

    fn class_decl(&mut self, name: &str, def: &'a ClassDef) -> ir::ClassDecl {
        let expr = def
            .expr
            .as_ref()
            .map(|e| (e.span, self.guard(e, &Vec::new())));
        if let Some((span, guard)) = &expr {
            if let Some(secret) = secrets::secret_in_guard(guard) {
                let d = secrets::flow(secret, *span, &format!("the class `{name}`"));
                self.report_once(d);
            }
        }
        ir::ClassDecl {
            name: name.to_owned(),
            expr: expr.map(|(_, g)| g),
            span: def.name.span,
        }
    }

    /// When `expr` is the bare name of a `let`: its span, the span of the
    /// let's name, and the name.
    fn let_named(&mut self, expr: &Expr) -> Option<(Span, Span, String)> {
        let ExprKind::Path(path) = &expr.kind else {
            return None;
        };
        let [name] = path.as_slice() else {
            return None;
        };
        let id = self.resolve(name.span)?;
        let def = self.checker.names.definition(id)?;
        if def.kind != DefKind::Let {
            return None;
        }
        Some((expr.span, def.span?, name.name.to_string()))
    }

    /// Reports a diagnostic once, however many loop iterations or calls
    /// meet its place (a taint error is about the source, not the
    /// instance).
    fn report_once(&mut self, d: Diagnostic) {
        let seen = self.diagnostics.iter().any(|seen| {
            seen.code == d.code
                && seen.message == d.message
                && seen.primary_span() == d.primary_span()
        });
        if !seen {
            self.report(d);
        }
    }

    fn stmts(&mut self, stmts: &[Stmt], env: &mut Env, guard: &Arc<Guard>) {
        for stmt in stmts {
            if self.exhausted {
                return;
            }
            match stmt {
                Stmt::Promise(p) => self.promise(p, env, guard),
                Stmt::When(w) => {
                    let outer = self.guard_missing.replace(Vec::new());
                    let condition = self.guard(&w.guard, env);
                    if let Some(secret) = secrets::secret_in_guard(&condition) {
                        let d = secrets::flow(secret, w.guard.span, "a `when` condition");
                        self.report_once(d);
                    }
                    let regions = std::mem::replace(&mut self.guard_missing, outer);
                    let inner = Arc::new(Guard::clone(guard).and(condition));
                    let start = self.promises.len();
                    self.stmts(&w.body, env, &inner);
                    self.mark_missing_regions(regions.unwrap_or_default(), guard, start);
                }
                Stmt::For(f) => {
                    let list = self.eval(&f.list, env);
                    self.for_loop(f, list, env, guard);
                }
                Stmt::Call(call) => self.call(call, env, guard),
                // Applied to the promises by `promise_attrs`.
                Stmt::Defaults(_) | Stmt::Error(_) => {}
            }
        }
    }

    /// A `for` statement over `list`: unrolled over a compile-time list or
    /// map, repeated by the VM over a fact, and split per key over a list
    /// looked up by a value only the host knows.
    fn for_loop(&mut self, f: &ast::For, list: Value, env: &mut Env, guard: &Arc<Guard>) {
        match list {
            Value::List(items) => {
                let Some(def) = self.resolve(f.var.span) else {
                    self.unresolved(f.var.span, &f.var.name);
                    return;
                };
                self.compile_loops.push((f.var.name.clone(), items.len()));
                for item in items {
                    if !self.spend(f.span) {
                        break;
                    }
                    env.push((def, f.var.name.clone(), item));
                    self.stmts(&f.body, env, guard);
                    env.pop();
                }
                self.compile_loops.pop();
            }
            Value::Map(entries) => {
                let (Some(key), Some(def)) = (&f.key, self.resolve(f.var.span)) else {
                    self.unresolved(f.var.span, &f.var.name);
                    return;
                };
                let Some(key_def) = self.resolve(key.span) else {
                    self.unresolved(key.span, &key.name);
                    return;
                };
                self.compile_loops.push((f.var.name.clone(), entries.len()));
                // Maps are kept sorted by key: the loop runs in key order.
                for (k, v) in entries {
                    if !self.spend(f.span) {
                        break;
                    }
                    env.push((key_def, key.name.clone(), Value::Str(k)));
                    env.push((def, f.var.name.clone(), v));
                    self.stmts(&f.body, env, guard);
                    env.pop();
                    env.pop();
                }
                self.compile_loops.pop();
            }
            Value::Choice(c) => {
                // One loop per group of keys with the same list, each under
                // `on in [keys]`; the other hosts get the default.
                let mut groups: Vec<(Value, Vec<String>)> = Vec::new();
                for (k, v) in &c.cases {
                    match groups.iter_mut().find(|(gv, _)| gv == v) {
                        Some((_, keys)) => keys.push(k.clone()),
                        None => groups.push((v.clone(), vec![k.clone()])),
                    }
                }
                let all: Vec<Value> = c.cases.iter().map(|(k, _)| Value::Str(k.clone())).collect();
                for (value, keys) in groups {
                    let member = Guard::Compare {
                        op: ir::CompareOp::In,
                        lhs: c.on.clone(),
                        rhs: Value::List(keys.into_iter().map(Value::Str).collect()),
                    };
                    let inner = Arc::new(Guard::clone(guard).and(member));
                    self.for_loop(f, value, env, &inner);
                }
                let others = Guard::Not(Box::new(Guard::Compare {
                    op: ir::CompareOp::In,
                    lhs: c.on.clone(),
                    rhs: Value::List(all),
                }));
                let inner = Arc::new(Guard::clone(guard).and(others));
                self.for_loop(f, c.default, env, &inner);
            }
            Value::Missing(span) => self.maybe_missing_loop(span, guard),
            Value::Fact(fact) => {
                let Some(def) = self.resolve(f.var.span) else {
                    self.unresolved(f.var.span, &f.var.name);
                    return;
                };
                if self.loops.len() >= converge_format::bundle::limits::MAX_LOOP_DEPTH {
                    // The VM's verifier refuses a promise nested
                    // deeper: refuse it here, where it is written.
                    self.diagnostics.push(
                        Diagnostic::new(
                            Code::NestingTooDeep,
                            format!(
                                "more than {} nested run-time loops",
                                converge_format::bundle::limits::MAX_LOOP_DEPTH
                            ),
                            f.var.span,
                            "one loop too many",
                        )
                        .with_note("hosts refuse a bundle with a promise inside more run-time loops (`for x in sys....`) than that")
                        .with_help("loop over fewer facts at once; iterate over a combined list instead"),
                    );
                    return;
                }
                self.loops.push(RuntimeLoop {
                    var: f.var.name.to_string(),
                    fact,
                });
                self.shared_loops = Arc::from(self.loops.as_slice());
                env.push((
                    def,
                    f.var.name.clone(),
                    Value::LoopVar(f.var.name.to_string()),
                ));
                self.stmts(&f.body, env, guard);
                env.pop();
                self.loops.pop();
                self.shared_loops = Arc::from(self.loops.as_slice());
            }
            Value::Probe { name, .. } => {
                self.report(
                    Diagnostic::new(
                        Code::InvalidExpression,
                        format!("a promise-level loop cannot run over the probe fact `{name}`"),
                        f.list.span,
                        "a probe fact's list is only read in values",
                    )
                    .with_note("a bundle names the facts a promise repeats over by their ids in the schema; probe facts have none")
                    .with_help(format!("loop inside a value instead: `content = \"{{% for x in {name} %}}${{x}}\\n{{% endfor %}}\";`")),
                );
            }
            other => {
                self.report(
                    Diagnostic::new(
                        Code::InvalidExpression,
                        "a promise-level loop runs over a compile-time list or map, or over a fact",
                        f.list.span,
                        format!("this is computed on the host: {}", other.display()),
                    )
                    .with_help(
                        "loop over `sys.ipv4` directly, or compute the list at compile time",
                    ),
                );
            }
        }
    }

    /// A condition on a lookup that finds nothing on some host, with no
    /// `??` (`when hosts[sys.hostname].group == "web"`): the guard would be
    /// silently false there, so it is an error, as in a value.
    fn missing_in_guard(&mut self, value: &Value) {
        if let Some(span) = split::first_missing(value) {
            if let Some(regions) = &mut self.guard_missing {
                regions.push((span, missing_region(value)));
                return;
            }
            self.report(
                Diagnostic::new(
                    Code::MaybeMissing,
                    "this lookup may be missing on a host; add `?? default`",
                    span,
                    "no `??` default",
                )
                .with_help("write `(... ?? default)` in the condition: the host takes the default where the key is absent"),
            );
        }
    }

    /// A `when` whose condition looks up a key some hosts lack: the body's
    /// promises are guarded false there, which is only right if no host
    /// reaches it. A marked copy of the body's first promise, guarded by
    /// the `when`'s outer guard and the hosts where the lookup is missing,
    /// lets `analysis::missing` decide that exactly (and name a host).
    fn mark_missing_regions(
        &mut self,
        regions: Vec<(Span, Guard)>,
        outer: &Arc<Guard>,
        start: usize,
    ) {
        for (span, region) in regions {
            if region == Guard::Const(false) {
                continue;
            }
            if let Some(first) = self.promises.get(start) {
                let mut marked = first.clone();
                marked.guard = Arc::new(Guard::clone(outer).and(region));
                marked.rare_mut().missing = Some(span);
                self.promises.push(marked);
            }
        }
    }

    /// A `for` over a lookup that may find nothing on some host: the loop
    /// body is promised nowhere there, which is almost never meant.
    fn maybe_missing_loop(&mut self, span: Span, guard: &Arc<Guard>) {
        if matches!(**guard, Guard::Const(false)) {
            return;
        }
        self.report(
            Diagnostic::new(
                Code::MaybeMissing,
                "this lookup may be missing on a host",
                span,
                "no `??` default",
            )
            .with_help("add `?? []` (or another default) so every host knows what to loop over"),
        );
    }

    fn call(&mut self, call: &ast::Call, env: &mut Env, guard: &Arc<Guard>) {
        let Some(bundle) = self.symbols.bundles.get(&call.bundle.name) else {
            return;
        };
        if let Some(first) = self.chain.iter().position(|c| c.bundle == bundle.name.name) {
            if self.reported_recursion.insert(call.span) {
                let mut names: Vec<&str> = self
                    .chain
                    .iter()
                    .skip(first)
                    .map(|c| c.bundle.as_str())
                    .collect();
                names.push(&bundle.name.name);
                let mut d = Diagnostic::new(
                    Code::DefinitionCycle,
                    format!("bundle calls form a cycle: {}", names.join(" -> ")),
                    call.span,
                    format!("calls `{}` again", bundle.name.name),
                );
                for site in self.chain.iter().skip(first) {
                    d = d.with_secondary(site.span, format!("`{}` called here", site.bundle));
                }
                self.diagnostics
                    .push(d.with_help("a bundle cannot call itself, directly or through others"));
            }
            return;
        }
        if self.chain.len() >= MAX_CALL_DEPTH {
            if self.reported_recursion.insert(call.span) {
                let chain = self.chain_text(Some(&bundle.name.name));
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::ExpansionLimit,
                        format!("bundle calls nest deeper than {MAX_CALL_DEPTH} levels"),
                        call.span,
                        format!("call number {} of one chain", self.chain.len() + 1),
                    )
                    .with_note(format!("call chain: {chain}"))
                    .with_help(format!(
                        "at most {MAX_CALL_DEPTH} bundle calls may be open at once; flatten the chain (call the inner bundles from an outer one in sequence)"
                    )),
                );
            }
            return;
        }
        if !self.spend(call.span) {
            return;
        }
        let Ok(bound) = bind_arguments(bundle, &call.args) else {
            return;
        };
        let mut inner: Env = Vec::with_capacity(bundle.params.len());
        for (param, arg) in bundle.params.iter().zip(bound) {
            let value = match (arg, &param.default) {
                (Some(arg), _) => self.eval(&arg.value, env),
                (None, Some(default)) => self.eval(default, &Vec::new()),
                (None, None) => continue,
            };
            let Some(def) = self.resolve(param.name.span) else {
                self.unresolved(param.name.span, &param.name.name);
                continue;
            };
            inner.push((def, param.name.name.clone(), value));
        }
        self.chain.push(CallSite {
            bundle: bundle.name.name.to_string(),
            span: call.span,
        });
        self.shared_chain = Arc::from(self.chain.as_slice());
        // The callee's promises take its defaults, and only them.
        let callee = self
            .checker
            .bundle_defaults
            .get(bundle.name.name.as_str())
            .cloned()
            .unwrap_or_default();
        let caller = std::mem::replace(&mut self.checker.defaults, callee);
        match self.bodies.take(bundle) {
            Some(body) => {
                self.stmts(&body, &mut inner, guard);
                self.bodies.expanded(bundle, body);
            }
            None => self.diagnostics.push(
                Diagnostic::new(
                    Code::InternalError,
                    format!(
                        "internal error: bundle `{}` expanded again after its statements were freed",
                        bundle.name.name
                    ),
                    call.span,
                    "this call",
                )
                .with_note(
                    "this is a bug in policyc; please report it with the policy that triggers it",
                ),
            ),
        }
        self.checker.defaults = caller;
        self.chain.pop();
        self.shared_chain = Arc::from(self.chain.as_slice());
    }

    fn promise(&mut self, p: &ast::Promise, env: &mut Env, guard: &Arc<Guard>) {
        let Some(pt) = promise_type(&p.kind.name) else {
            return;
        };
        if !self.spend(p.span) {
            return;
        }
        let promiser = self.eval(&p.promiser, env);
        let span = p.kind.span.to(p.promiser.span);
        // A promiser computed from arguments is checked now that it is known
        // (a literal one was checked already).
        let computed = !matches!(&p.promiser.kind, ExprKind::Str(lit) if lit.as_plain().is_some());
        match &promiser {
            Value::Str(text) if computed => {
                if let Some(d) = promiser_problem(pt, p.promiser.span, text) {
                    self.report(d);
                }
            }
            Value::Template(parts) if pt.promiser == PromiserKind::AbsolutePath => {
                if let Some(TemplatePart::Lit(text)) = parts.first() {
                    if !text.starts_with('/') {
                        let d = relative_path(pt, p.promiser.span, text);
                        self.report(d);
                    }
                }
            }
            _ => {}
        }
        let defaults = Rc::clone(&self.checker.defaults);
        let sources = self.checker.promise_attrs(p, &defaults);
        let mut attrs = Vec::with_capacity(sources.len());
        // Values written as the name of a `let`: a taint error there names
        // the let too (the flow's intermediate step).
        let mut via_lets: Vec<(Span, Span, String)> = Vec::new();
        if let Some(via) = self.let_named(&p.promiser) {
            via_lets.push(via);
        }
        // A body's values see the `let`s only (as the checker resolved them).
        let body_env: Env = Vec::new();
        for source in sources {
            let Some(spec) = pt.attr(&source.name.name) else {
                continue;
            };
            let scope = if source.via.is_some() {
                &body_env
            } else {
                &*env
            };
            let mut value = if source.name.name == "template" {
                self.template_attr(source.value, scope)
            } else {
                self.attr_value(&spec.ty, source.value, scope)
            };
            self.check_value(&spec.ty, &value, source.value.span);
            if let Some(via) = self.let_named(source.value) {
                via_lets.push(via);
            }
            let default = source.default.map(|block| self.default_origin(block));
            if default.is_some() && matches!(&*source.name.name, "notify" | "after") {
                // `defaults { notify = [service "nginx"]; }`: the service
                // itself is one of the bundle's promises, and a promise
                // never notifies (or waits for) itself.
                value = without_self(value, pt.name, &promiser, &attrs);
                if matches!(&value, Value::List(items) if items.is_empty()) {
                    continue;
                }
            }
            attrs.push(ir::Attr {
                name: spec.name,
                value,
                span: source.value.span,
                default,
            });
        }
        let promise = ir::Promise {
            kind: pt.name,
            promiser,
            attrs,
            guard: Arc::clone(guard),
            span,
            chain: Arc::clone(&self.shared_chain),
            rare: ir::Rare {
                runtime_loops: Arc::clone(&self.shared_loops),
                ..ir::Rare::default()
            }
            .boxed_unless_empty(),
        };
        let taint = secrets::check_promise(&promise, p.promiser.span);
        let tainted = !taint.is_empty();
        for mut d in taint {
            let primary = d.primary_span();
            for (at, def, name) in &via_lets {
                if Some(*at) == primary {
                    d = d.with_secondary(
                        *def,
                        format!("`{name}` holds a value computed from the secret"),
                    );
                }
            }
            self.report_once(d);
        }
        // A lookup keyed by a secret that only the split meets (a `let`
        // map indexed by it) turns into guards comparing the secret.
        let outer_tainted = tainted || secrets::secret_in_guard(guard).is_some();
        let mut budget = self.budget.saturating_sub(self.instances);
        let mut spent = 0usize;
        let instances = split::split(promise, &mut || {
            spent += 1;
            budget = budget.saturating_sub(1);
            budget > 0
        });
        if spent > 0 && !self.spend_many(spent, p.span) {
            return;
        }
        if !outer_tainted {
            let keyed = instances
                .iter()
                .find_map(|i| secrets::secret_in_guard(&i.guard));
            if let Some(secret) = keyed {
                let d = secrets::flow(secret, span, "the key of a lookup in this promise");
                self.report_once(d);
            }
        }
        let mut instances = instances;
        if pt.name == "neighbours" {
            self.neighbour_keys(&mut instances);
        }
        self.promises.extend(instances);
    }

    /// The origin of the attributes a `defaults` block (head `block`)
    /// gives, made once per block.
    fn default_origin(&mut self, block: Span) -> Arc<ir::DefaultOrigin> {
        let db = self.db;
        Arc::clone(self.default_origins.entry(block).or_insert_with(|| {
            let (line, col) = db
                .get(block.file)
                .map_or((0, 0), |f| f.line_col(block.start));
            Arc::new(ir::DefaultOrigin {
                block,
                at: format!("{}:{line}:{col}", db.name(block.file)),
            })
        }))
    }

    /// Evaluates an attribute value; bare words stand for themselves where
    /// the attribute takes enum values or class names.
    fn attr_value(&mut self, ty: &AttrType, expr: &Expr, env: &Env) -> Value {
        match (ty, &expr.kind) {
            // A bare word, unless the checker resolved it to a variable.
            (AttrType::Enum(_) | AttrType::Class, ExprKind::Path(path)) if path.len() == 1 => {
                match path.first() {
                    Some(first) if self.is_variable(first.span) => self.eval(expr, env),
                    Some(first) => Value::Word(first.name.to_string()),
                    None => Value::Word(String::new()),
                }
            }
            (AttrType::Enum(_), ExprKind::Str(_)) => match self.eval(expr, env) {
                Value::Str(s) => Value::Word(s),
                other => other,
            },
            (AttrType::List(inner), ExprKind::List(items)) => Value::List(
                items
                    .iter()
                    .map(|i| self.attr_value(inner, i, env))
                    .collect(),
            ),
            _ => self.eval(expr, env),
        }
    }

    /// Checks a value that only expansion knows against its attribute type.
    fn check_value(&mut self, ty: &AttrType, value: &Value, span: Span) {
        match (ty, value) {
            (AttrType::Enum(words), Value::Word(w) | Value::Str(w))
                if !words.contains(&w.as_str()) =>
            {
                let mut d = Diagnostic::new(
                    Code::InvalidEnumValue,
                    format!("`{w}` is not a valid value here"),
                    span,
                    format!("expected {}", one_of(words)),
                );
                if let Some(s) = did_you_mean(w, words.iter().copied()) {
                    d = d.with_help(format!("did you mean `{s}`?"));
                }
                self.report(d);
            }
            (AttrType::Mode, Value::Int(m)) if !(0..=0o7777).contains(m) => {
                self.report(Diagnostic::new(
                    Code::ModeOutOfRange,
                    format!("mode {m} is out of range"),
                    span,
                    "modes are 0o0 to 0o7777",
                ));
            }
            _ => {}
        }
    }

    /// Reports a diagnostic found while expanding, naming the call chain
    /// that led to it.
    fn report(&mut self, mut d: Diagnostic) {
        if let Some(innermost) = self.chain.last() {
            let mut steps: Vec<String> = self
                .chain
                .iter()
                .rev()
                .map(|c| format!("bundle `{}`", c.bundle))
                .collect();
            steps.push("the policy block".to_owned());
            d = d.with_note(format!("in {}", steps.join(", called from ")));
            for site in self.chain.iter().rev() {
                d = d.with_secondary(site.span, format!("`{}` called here", site.bundle));
            }
            let _ = innermost;
        }
        self.diagnostics.push(d);
    }

    // ------------------------------------------------------------ values

    /// The value of a global `let`, computed on first use. The lets it
    /// reads are computed first, in dependency order, so that a long chain
    /// does not recurse (`super::let_order`).
    fn let_value(&mut self, name: &str) -> Value {
        if let Some(v) = self.lets.get(name) {
            return v.clone();
        }
        let first = super::let_order::pending(self.symbols, name, |n| self.lets.contains_key(n));
        for dep in first {
            self.compute_let(dep);
        }
        match self.lets.get(name) {
            Some(v) => v.clone(),
            None => self.compute_let(name),
        }
    }

    fn compute_let(&mut self, name: &str) -> Value {
        if let Some(v) = self.lets.get(name) {
            return v.clone();
        }
        let Some(def) = self.symbols.lets.get(name) else {
            return Value::Str(String::new());
        };
        let name: &'a str = &def.name.name;
        // Insert a placeholder first: a let cycle was already reported by
        // the checker, and this keeps evaluation finite.
        self.lets.insert(name, Value::Str(String::new()));
        let value = match self.checker.data_values.get(name) {
            Some(data) => data.clone(),
            None => self.eval(&def.value, &Vec::new()),
        };
        self.lets.insert(name, value.clone());
        value
    }

    /// What the checker resolved the name written at `span` to.
    fn resolve(&mut self, span: Span) -> Option<DefId> {
        self.checker.names.resolve_near(span, &mut self.name_hint)
    }

    /// Whether the checker resolved the name written at `span` to a
    /// variable.
    fn is_variable(&mut self, span: Span) -> bool {
        let id = self.resolve(span);
        id.and_then(|id| self.checker.names.definition(id))
            .is_some_and(|d| d.kind.is_variable())
    }

    /// The value of the variable named at `span`, as the checker resolved
    /// it: a parameter or loop variable from `env`, or a `let`. `None` when
    /// the name is not a variable (a class, a fact, a word).
    fn lookup(&mut self, name: &str, span: Span, env: &Env) -> Option<Value> {
        let value = self.lookup_unassumed(name, span, env)?;
        Some(self.under_assumptions(value))
    }

    /// `LET[key]` with a known key, read in place: a 10,000-host map is not
    /// copied to read one host (per key of a choice, that was quadratic).
    fn let_entry(&mut self, base: &Expr, index: &Value, env: &Env) -> Option<Value> {
        let ExprKind::Path(path) = &base.kind else {
            return None;
        };
        let [first] = path.as_slice() else {
            return None;
        };
        let name: &str = &first.name;
        let is_let = if self.by_name {
            !env.iter().any(|(_, n, _)| *n == name) && self.symbols.lets.get(name).is_some()
        } else {
            let id = self.resolve(first.span)?;
            self.checker
                .names
                .definition(id)
                .is_some_and(|d| d.kind == DefKind::Let)
        };
        if !is_let {
            return None;
        }
        if !self.lets.contains_key(name) {
            self.let_value(name);
        }
        let span = base.span;
        match (self.lets.get(name)?, index) {
            (Value::Map(entries), Value::Str(key) | Value::Word(key)) => Some(
                match entries.binary_search_by(|(k, _)| k.as_str().cmp(key)) {
                    Ok(i) => entries.get(i).map(|(_, v)| v.clone())?,
                    Err(_) => Value::Missing(span),
                },
            ),
            (Value::List(items), Value::Int(i)) => Some(
                usize::try_from(*i)
                    .ok()
                    .and_then(|i| items.get(i).cloned())
                    .unwrap_or(Value::Missing(span)),
            ),
            _ => None,
        }
    }

    /// `value` with every choice on an assumed key resolved.
    fn under_assumptions(&self, mut value: Value) -> Value {
        for (on, key) in &self.assumed {
            value = lookups::assume(&value, on, Some(key), &[]);
        }
        value
    }

    fn lookup_unassumed(&mut self, name: &str, span: Span, env: &Env) -> Option<Value> {
        if self.by_name {
            if let Some((_, _, v)) = env.iter().rev().find(|(_, n, _)| *n == name) {
                return Some(v.clone());
            }
            return self
                .symbols
                .lets
                .get(name)
                .map(|def| self.let_value(&def.name.name));
        }
        let id = self.resolve(span)?;
        let def = self.checker.names.definition(id)?;
        match def.kind {
            DefKind::Param | DefKind::LoopVar => {
                let found = env.iter().rev().find(|(d, _, _)| *d == id);
                match found {
                    Some((_, _, v)) => Some(v.clone()),
                    None => {
                        let name = def.name.clone();
                        self.unresolved(span, &name);
                        None
                    }
                }
            }
            DefKind::Let => Some(self.let_value(name)),
            _ => None,
        }
    }

    /// A name the checker did not resolve, or resolved to a variable that
    /// expansion has no value for: a compiler bug, reported rather than
    /// compiled into something silently wrong.
    fn unresolved(&mut self, span: Span, name: &str) {
        self.diagnostics.push(
            Diagnostic::new(
                Code::InternalError,
                format!("internal error: no value for `{name}` during expansion"),
                span,
                "the checker and expansion disagree about this name",
            )
            .with_note(
                "this is a bug in policyc; please report it with the policy that triggers it",
            ),
        );
    }

    fn eval(&mut self, expr: &Expr, env: &Env) -> Value {
        match &expr.kind {
            ExprKind::Str(lit) => self.string(lit, expr.span, env),
            ExprKind::Int { value, .. } => Value::Int(*value),
            ExprKind::Duration(secs) => Value::Duration(*secs),
            ExprKind::Bool(b) => Value::Bool(*b),
            ExprKind::Path(path) => self.path(path, env),
            ExprKind::List(items) => Value::List(items.iter().map(|i| self.eval(i, env)).collect()),
            // `{}` where a record stands: every field's default.
            ExprKind::Map(entries)
                if entries.is_empty() && self.checker.record_literals.contains_key(&expr.span) =>
            {
                self.record(&[], expr.span, env)
            }
            ExprKind::Map(entries) => {
                let mut entries: Vec<(String, Value)> = entries
                    .iter()
                    .map(|(k, v)| {
                        let key = match self.eval(k, env) {
                            Value::Str(s) => s,
                            other => other.display(),
                        };
                        (key, self.eval(v, env))
                    })
                    .collect();
                // A map is kept sorted by key (`for k, v` runs in key order,
                // lookups search it); of a key written twice the last wins.
                entries.reverse();
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                entries.dedup_by(|later, first| later.0 == first.0);
                Value::Map(entries)
            }
            ExprKind::Ref(r) => Value::Ref {
                kind: r.kind.name.as_str().into(),
                target: Box::new(self.string(&r.target, expr.span, env)),
            },
            ExprKind::Record(fields) => self.record(fields, expr.span, env),
            ExprKind::Field { base, name } => {
                let base = self.eval(base, env);
                let value = lookups::field(base, &name.name, name.span);
                self.present(value, name.span)
            }
            ExprKind::Index { base, index } => {
                let mut index_v = self.eval(index, env);
                if let Some((_, key)) = self.assumed.iter().rev().find(|(on, _)| *on == index_v) {
                    index_v = Value::Str(key.clone());
                }
                if let Some(entry) = self.let_entry(base, &index_v, env) {
                    let entry = self.under_assumptions(entry);
                    return self.present(entry, expr.span);
                }
                let base_v = self.eval(base, env);
                match lookups::index(base_v, index_v, expr.span) {
                    Indexed::Value(v) => self.present(v, expr.span),
                    Indexed::Unsupported => {
                        self.report(
                            Diagnostic::new(
                                Code::InvalidExpression,
                                "a list of records, lists or numbers cannot be indexed by a value only the host knows",
                                expr.span,
                                "the host would have to pick the element",
                            )
                            .with_help("use a map keyed by the fact instead (`m[sys.hostname]`)"),
                        );
                        Value::Str(String::new())
                    }
                }
            }
            ExprKind::Coalesce(items) => self.coalesce(items, env),
            ExprKind::Call { func, .. } if func.name == "secret" => {
                match self.checker.secrets.get(&expr.span) {
                    Some(secret) => Value::Secret(Arc::clone(secret)),
                    // Reported by the checker.
                    None => Value::Str(String::new()),
                }
            }
            ExprKind::Call { func, args } if func.name == super::neighbours::FUNCTION => {
                self.neighbours_call(args, env, expr.span)
            }
            ExprKind::Call { func, args } => {
                let args: Vec<Value> = args.iter().map(|a| self.eval(a, env)).collect();
                match functions::apply(&func.name, args) {
                    Ok(v) => v,
                    Err(why) => {
                        self.report(Diagnostic::new(
                            Code::BadArguments,
                            why,
                            expr.span,
                            "in this call",
                        ));
                        Value::Str(String::new())
                    }
                }
            }
            ExprKind::Not(_) | ExprKind::And(..) | ExprKind::Or(..) | ExprKind::Compare { .. } => {
                match self.guard(expr, env) {
                    Guard::Const(b) => Value::Bool(b),
                    g => Value::Select {
                        cond: Box::new(g),
                        then: Box::new(Value::Bool(true)),
                        otherwise: Box::new(Value::Bool(false)),
                    },
                }
            }
        }
    }

    /// A record literal: every field of its type, defaults filled in, in
    /// declaration order.
    fn record(
        &mut self,
        fields: &[(converge_grammar::ast::Ident, Expr)],
        span: Span,
        env: &Env,
    ) -> Value {
        let given: Vec<(&str, Value)> = fields
            .iter()
            .map(|(name, value)| (name.name.as_str(), self.eval(value, env)))
            .collect();
        match self.checker.record_literals.get(&span).cloned() {
            Some(record) => Value::Record(
                record
                    .fields
                    .iter()
                    .map(|f| {
                        let value = given
                            .iter()
                            .find(|(n, _)| *n == f.name)
                            .map(|(_, v)| v.clone())
                            .or_else(|| f.default.clone())
                            .unwrap_or(Value::Missing(span));
                        (f.name.clone(), value)
                    })
                    .collect(),
            ),
            None => Value::Record(given.into_iter().map(|(n, v)| (n.to_owned(), v)).collect()),
        }
    }

    /// `a ?? b ?? c`.
    fn coalesce(&mut self, items: &[Expr], env: &Env) -> Value {
        let Some((last, firsts)) = items.split_last() else {
            return Value::Str(String::new());
        };
        self.optional += 1;
        let mut acc: Option<Value> = None;
        for item in firsts {
            let v = self.eval(item, env);
            acc = Some(match acc {
                None => v,
                Some(a) => lookups::coalesce(a, v),
            });
        }
        self.optional -= 1;
        let last = self.eval(last, env);
        match acc {
            None => last,
            Some(a) => lookups::coalesce(a, last),
        }
    }

    /// A lookup's value where no `??` follows: a compile-time key that is
    /// not there is an error now; a lookup only the host can make must
    /// have a default.
    fn present(&mut self, value: Value, span: Span) -> Value {
        if self.optional > 0 {
            return value;
        }
        match &value {
            Value::Missing(_) => {
                self.report(
                    Diagnostic::new(Code::KeyNotFound, "no such key or index", span, "not found")
                        .with_help(
                            "add `?? default` for a value that may be absent, or fix the key",
                        ),
                );
                Value::Str(String::new())
            }
            v if split::needs_default(v) => {
                self.report(
                    Diagnostic::new(
                        Code::MaybeMissing,
                        "this lookup may be missing on a host; add `?? default`",
                        span,
                        "only the host knows whether it is there",
                    )
                    .with_help("write `... ?? \"default\"`: the host takes the default where the element is absent"),
                );
                value
            }
            _ => value,
        }
    }

    fn path(&mut self, path: &[ast::Ident], env: &Env) -> Value {
        let Some(first) = path.first() else {
            return Value::Str(String::new());
        };
        if first.name == "sys" {
            let name: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
            return Value::Fact(name.join("."));
        }
        if first.name == "facts" {
            return self.probe_read(path);
        }
        let Some(mut value) = self.lookup(&first.name, first.span, env) else {
            return Value::Word(first.name.to_string());
        };
        for key in path.iter().skip(1) {
            value = lookups::field(value, &key.name, key.span);
            value = self.present(value, key.span);
        }
        value
    }

    /// `facts.NAME...`: a probe fact's value, typed by what the VM pushes
    /// for the declared type at that path (the checker refused any other).
    fn probe_read(&mut self, path: &[ast::Ident]) -> Value {
        let names: Vec<&str> = path.iter().map(|i| i.name.as_str()).collect();
        let declared = names.get(1).and_then(|n| {
            self.checker
                .facts
                .iter()
                .find(|(name, _)| name == n)
                .map(|(_, f)| &f.probe_type)
        });
        let ty = declared
            .and_then(|t| t.at(names.get(2..).unwrap_or_default()).ok())
            .and_then(|t| t.stack_ty())
            .unwrap_or(converge_format::bundle::verify::Ty::Str);
        Value::Probe {
            name: names.join("."),
            ty,
        }
    }

    /// A string literal with its interpolations substituted: constants are
    /// spliced in as text, values only the host knows stay parts of a
    /// template, and a string with template tags is rendered
    /// (`templates.rs`).
    fn string(&mut self, lit: &StrLit, span: Span, env: &Env) -> Value {
        if lit.parts.iter().any(|p| matches!(p, StrPart::Tag(_))) {
            let nodes = self.symbols.ws.and_then(|ws| ws.string_nodes(span));
            return match nodes {
                Some(nodes) => {
                    let mut env = env.clone();
                    self.render(nodes, &mut env)
                }
                None => Value::Str(String::new()),
            };
        }
        // A plain string (one piece of text) is that text.
        if let [StrPart::Lit(text)] = lit.parts.as_slice() {
            return Value::Str(text.to_string());
        }
        let mut pieces = Vec::with_capacity(lit.parts.len());
        for part in &lit.parts {
            match part {
                StrPart::Lit(text) => pieces.push(Value::Str(text.to_string())),
                StrPart::Interp(expr) => pieces.push(self.eval(expr, env)),
                StrPart::Tag(_) => {}
            }
        }
        lookups::concat(pieces)
    }

    fn guard(&mut self, expr: &Expr, env: &Env) -> Guard {
        match &expr.kind {
            ExprKind::Bool(b) => Guard::Const(*b),
            // A class, or a `bool` variable, as the checker resolved it.
            ExprKind::Path(path) if path.len() == 1 => {
                let Some(first) = path.first() else {
                    return Guard::Const(false);
                };
                if let Some(Value::Bool(b)) = self.lookup(&first.name, first.span, env) {
                    return Guard::Const(b);
                }
                Guard::Class(first.name.to_string())
            }
            ExprKind::Not(inner) => match self.guard(inner, env) {
                Guard::Const(b) => Guard::Const(!b),
                g => Guard::Not(Box::new(g)),
            },
            ExprKind::And(items) => items
                .iter()
                .map(|e| self.guard(e, env))
                .fold(Guard::Const(true), Guard::and),
            ExprKind::Or(items) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items {
                    match self.guard(item, env) {
                        Guard::Const(true) => return Guard::Const(true),
                        Guard::Const(false) => {}
                        Guard::Or(inner) => parts.extend(inner),
                        g => parts.push(g),
                    }
                }
                match parts.len() {
                    0 => Guard::Const(false),
                    1 => parts.pop().unwrap_or(Guard::Const(false)),
                    _ => Guard::Or(parts),
                }
            }
            ExprKind::Compare { op, lhs, rhs } => {
                let op = *op;
                let lhs = self.eval(lhs, env);
                let rhs = self.eval(rhs, env);
                self.missing_in_guard(&lhs);
                self.missing_in_guard(&rhs);
                fold_compare(op, lhs, rhs)
            }
            // A bool value (a field, a lookup, a function call): known now,
            // chosen by a key only the host knows, or computed on the host.
            _ => {
                let value = self.eval(expr, env);
                self.missing_in_guard(&value);
                bool_guard(value)
            }
        }
    }
}

// ------------------------------------------------------------ references

/// Every `after`/`notify` reference with a compile-time target must name a
/// promise of the program; `id`s must be unique. Part of expansion's
/// diagnostics (they follow its own), run by the caller, which may run it
/// beside the analyses since it only reads the program.
pub fn check_references(program: &ir::Program) -> Vec<Diagnostic> {
    check_references_with(program, None)
}

/// [`check_references`] reading the promises grouped by object
/// (`analysis::objects`) when the analyses have grouped them.
pub fn check_references_with(
    program: &ir::Program,
    objects: Option<&crate::analysis::objects::Objects<'_>>,
) -> Vec<Diagnostic> {
    // A reference names a promise by the text of its promiser: the groups
    // by promiser value are the same thing while no promiser is a bare
    // word (whose text a string could also spell).
    let promised = match objects {
        Some(objects)
            if !program
                .promises
                .iter()
                .any(|p| matches!(p.promiser, Value::Word(_))) =>
        {
            Promised::Grouped(objects)
        }
        _ => {
            let mut set: HashSet<(&str, &str)> =
                HashSet::with_capacity_and_hasher(program.promises.len(), Default::default());
            for p in &program.promises {
                if let Some(text) = p.promiser.as_str() {
                    set.insert((p.kind, text));
                }
            }
            Promised::Texts(set)
        }
    };
    let mut checker = References {
        diagnostics: Vec::new(),
    };
    checker.check_references(program, &promised);
    checker.diagnostics
}

/// The objects promised, by promise type and promiser text.
enum Promised<'p, 'o> {
    Grouped(&'o crate::analysis::objects::Objects<'p>),
    Texts(HashSet<(&'p str, &'p str)>),
}

impl<'p> Promised<'p, '_> {
    fn contains(&self, kind: &str, text: &str) -> bool {
        match self {
            Promised::Grouped(objects) => {
                objects.find(kind, &Value::Str(text.to_owned())).is_some()
            }
            Promised::Texts(set) => set.contains(&(kind, text)),
        }
    }

    /// The promiser texts of every promise of type `kind`, each once.
    fn texts(&self, kind: &str) -> Vec<&'p str> {
        match self {
            Promised::Grouped(objects) => objects
                .iter()
                .filter(|((k, _), _)| *k == kind)
                .filter_map(|((_, promiser), _)| promiser.as_str())
                .collect(),
            Promised::Texts(set) => set
                .iter()
                .filter(|(k, _)| *k == kind)
                .map(|(_, t)| *t)
                .collect(),
        }
    }
}

struct References {
    diagnostics: Vec<Diagnostic>,
}

impl References {
    fn check_references(&mut self, program: &ir::Program, objects: &Promised<'_, '_>) {
        let mut ids: HashMap<&str, Span> = HashMap::default();
        for p in &program.promises {
            if let Some(id) = p.attr("id").and_then(Value::as_str) {
                let span = p
                    .attrs
                    .iter()
                    .find(|a| a.name == "id")
                    .map_or(p.span, |a| a.span);
                match ids.get(id) {
                    Some(first) if *first != span => self.diagnostics.push(
                        Diagnostic::new(
                            Code::DuplicateDefinition,
                            format!("two promises have the id `{id}`"),
                            span,
                            "used again here",
                        )
                        .with_secondary(*first, "first used here")
                        .with_help("ids name one promise each; rename one of them"),
                    ),
                    _ => {
                        ids.insert(id, span);
                    }
                }
            }
        }
        for p in &program.promises {
            for attr in p
                .attrs
                .iter()
                .filter(|a| a.name == "after" || a.name == "notify")
            {
                let Value::List(refs) = &attr.value else {
                    continue;
                };
                for r in refs {
                    let Value::Ref { kind, target } = r else {
                        continue;
                    };
                    let Some(target) = target.as_str() else {
                        self.diagnostics.push(
                            Diagnostic::new(
                                Code::RuntimeReference,
                                format!(
                                    "this `{}` reference is computed from host facts, so it orders nothing",
                                    attr.name
                                ),
                                attr.span,
                                "the promise it names is only known on the host",
                            )
                            .with_help(
                                "name the promise with constant text (`file \"/etc/app.conf\"`) or give it an `id` and refer to that",
                            ),
                        );
                        continue;
                    };
                    let found = if &**kind == "id" {
                        ids.contains_key(target)
                    } else {
                        objects.contains(kind, target)
                    };
                    if !found {
                        let candidates: Vec<&str> = if &**kind == "id" {
                            ids.keys().copied().collect()
                        } else {
                            objects.texts(kind)
                        };
                        let mut d = Diagnostic::new(
                            Code::UnknownReference,
                            format!("no promise `{kind} {target:?}` in this policy"),
                            attr.span,
                            format!("`{}` names it", attr.name),
                        );
                        let mut sorted = candidates;
                        sorted.sort_unstable();
                        d = match did_you_mean(target, sorted.iter().copied()) {
                            Some(s) => d.with_help(format!("did you mean `{kind} {s:?}`?")),
                            None => d.with_help("a reference names a promise the policy makes: `TYPE \"promiser\"` or `id \"handle\"`"),
                        };
                        self.diagnostics.push(d);
                    }
                }
            }
        }
    }
}

/// The guard that holds where a bool value is true. A value chosen by a
/// key becomes `on in [keys that give true]`, so the analyses see the key.
fn bool_guard(value: Value) -> Guard {
    match value {
        Value::Bool(b) => Guard::Const(b),
        Value::Choice(c) => {
            let mut parts = Vec::new();
            let all: Vec<Value> = c.cases.iter().map(|(k, _)| Value::Str(k.clone())).collect();
            let mut true_keys = Vec::new();
            for (k, v) in c.cases {
                match bool_guard(v) {
                    Guard::Const(true) => true_keys.push(Value::Str(k)),
                    Guard::Const(false) => {}
                    g => parts.push(
                        Guard::Compare {
                            op: ir::CompareOp::Eq,
                            lhs: c.on.clone(),
                            rhs: Value::Str(k),
                        }
                        .and(g),
                    ),
                }
            }
            if !true_keys.is_empty() {
                parts.push(Guard::Compare {
                    op: ir::CompareOp::In,
                    lhs: c.on.clone(),
                    rhs: Value::List(true_keys),
                });
            }
            match bool_guard(c.default) {
                Guard::Const(false) => {}
                g => parts.push(
                    Guard::Not(Box::new(Guard::Compare {
                        op: ir::CompareOp::In,
                        lhs: c.on.clone(),
                        rhs: Value::List(all),
                    }))
                    .and(g),
                ),
            }
            match parts.len() {
                0 => Guard::Const(false),
                1 => parts.pop().unwrap_or(Guard::Const(false)),
                _ => Guard::Or(parts),
            }
        }
        // A missing value was reported where it was looked up.
        Value::Missing(_) => Guard::Const(false),
        Value::Select {
            cond,
            then,
            otherwise,
        } if *then == Value::Bool(true) && *otherwise == Value::Bool(false) => *cond,
        other => Guard::Compare {
            op: ir::CompareOp::Eq,
            lhs: other,
            rhs: Value::Bool(true),
        },
    }
}

/// Folds a comparison whose two sides are known. A side chosen by a key
/// only the host knows (`name == (hosts[sys.hostname].group ?? "web")`)
/// compares case by case, so the guard names the keys (`sys.hostname in
/// [...]`) and no choice is left inside it for the writer.
fn fold_compare(op: ir::CompareOp, lhs: Value, rhs: Value) -> Guard {
    if let Value::Choice(c) = lhs {
        return bool_guard(lookups::map_choice(*c, &mut |case| {
            compare_value(op, case, rhs.clone())
        }));
    }
    if let Value::Choice(c) = rhs {
        return bool_guard(lookups::map_choice(*c, &mut |case| {
            compare_value(op, lhs.clone(), case)
        }));
    }
    if lhs.is_constant() && rhs.is_constant() {
        let result = match op {
            ir::CompareOp::Eq => Some(lhs == rhs),
            ir::CompareOp::NotEq => Some(lhs != rhs),
            ir::CompareOp::In => match &rhs {
                Value::List(items) => Some(items.contains(&lhs)),
                _ => None,
            },
            ir::CompareOp::Match => match (lhs.as_str(), rhs.as_str()) {
                (Some(text), Some(pattern)) => {
                    regex::Regex::new(pattern).ok().map(|re| re.is_match(text))
                }
                _ => None,
            },
        };
        if let Some(b) = result {
            return Guard::Const(b);
        }
    }
    Guard::Compare { op, lhs, rhs }
}

/// A comparison as a bool value, a [`ir::Choice`] of them where a side is
/// chosen by a key (a missing case stays missing).
fn compare_choice(op: ir::CompareOp, lhs: Value, rhs: Value) -> Value {
    if let Value::Choice(c) = lhs {
        return lookups::map_choice(*c, &mut |case| compare_choice(op, case, rhs.clone()));
    }
    if let Value::Choice(c) = rhs {
        return lookups::map_choice(*c, &mut |case| compare_choice(op, lhs.clone(), case));
    }
    compare_value(op, lhs, rhs)
}

/// One case of a comparison chosen by a key, as a bool value; a missing
/// side stays missing (reported where it was looked up).
fn compare_value(op: ir::CompareOp, lhs: Value, rhs: Value) -> Value {
    if let Value::Missing(span) = lhs {
        return Value::Missing(span);
    }
    if let Value::Missing(span) = rhs {
        return Value::Missing(span);
    }
    match fold_compare(op, lhs, rhs) {
        Guard::Const(b) => Value::Bool(b),
        g => Value::Select {
            cond: Box::new(g),
            then: Box::new(Value::Bool(true)),
            otherwise: Box::new(Value::Bool(false)),
        },
    }
}

/// The hosts on which `value` (a condition's operand) is missing.
fn missing_region(value: &Value) -> Guard {
    match value {
        Value::Missing(_) => Guard::Const(true),
        Value::Choice(c) => {
            bool_guard(lookups::map_choice(
                ir::Choice::clone(c),
                &mut |case| match missing_region(&case) {
                    Guard::Const(b) => Value::Bool(b),
                    g => Value::Select {
                        cond: Box::new(g),
                        then: Box::new(Value::Bool(true)),
                        otherwise: Box::new(Value::Bool(false)),
                    },
                },
            ))
        }
        v if !lookups::has_missing(v) => Guard::Const(false),
        // Missing somewhere inside a value the host computes: anywhere.
        _ => Guard::Const(true),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_program_gets_the_fixed_budget() {
        assert_eq!(instance_budget(0), MAX_INSTANCES);
        assert_eq!(instance_budget(4_000), MAX_INSTANCES);
        // Up to 16 MB of source the floor is the larger.
        assert_eq!(instance_budget(16_000_000), MAX_INSTANCES);
    }

    #[test]
    fn a_large_program_gets_a_budget_proportional_to_its_source() {
        // The 1,000,000-promise benchmark policy: 126,856,145 bytes, which
        // needs 1,600,000 instances.
        let budget = instance_budget(126_856_145);
        assert_eq!(budget, 126_856_145 / SOURCE_BYTES_PER_INSTANCE);
        assert!(budget > 1_600_000, "{budget}");
        // Twice the text, twice the budget: memory stays a fixed multiple
        // of the input.
        assert_eq!(instance_budget(64_000_000), 2 * instance_budget(32_000_000));
    }
}
