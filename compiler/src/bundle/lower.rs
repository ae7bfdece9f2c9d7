//! Lowering: from the analysed program ([`ir::Program`]) to a bundle body
//! ([`Body`]): constants deduplicated into one pool, guards, class
//! definitions and fact-dependent strings compiled to straight-line
//! programs, `source` files embedded, `template` files embedded as programs,
//! edges resolved to promise indices, and a source map.
//!
//! Everything is deterministic: pools are filled in the order the program
//! is walked, and nothing depends on hash order.
//!
//! Promise types, attributes and facts are written as their ids from the
//! schema. Anything the checker should have refused (an unknown fact,
//! loop variable, promise type or attribute) is an internal error
//! (`E0900`), never a default: a signed bundle must mean exactly what the
//! policy says.

use std::collections::HashMap;

use rustc_hash::FxHashMap;

use converge_format::bundle::format::{
    AttrValue, Body, Bytes, ClassEntry, Constant, FixedList, Header, Item, List, Operand, Program,
    PromiseParts, Sealed, SourceLoc,
};
use converge_format::bundle::functions;
use converge_format::bundle::instr::Instr;
use converge_format::schema::{self, AttrRole, AttrType};
use converge_grammar::Span;
use sha2::{Digest, Sha256};

use super::merge::{self, Merge};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, CompareOp, Guard, TemplatePart, Value};

mod merged;
mod parts;
mod sources;
use crate::sema::expand::{value_kind, ValueKind};
use crate::source::SourceDb;

/// What identifies a build besides the policy.
#[derive(Clone, Debug)]
pub struct BuildInfo {
    pub name: String,
    pub key_id: [u8; 8],
    pub serial: u64,
}

pub fn lower(
    db: &SourceDb,
    files: &[converge_grammar::FileId],
    program: &ir::Program,
    info: &BuildInfo,
) -> Result<Body, Vec<Diagnostic>> {
    lower_storing(db, files, program, info, None)
}

/// [`lower`], storing files over 4 KiB into `blobs` (format 2.6, issue
/// 22 item 5; `super::embed_blob`) instead of embedding them: what
/// `policyc build` does. Without a sink (`policyc test`, `plan`) every
/// file is inline.
pub fn lower_storing(
    db: &SourceDb,
    files: &[converge_grammar::FileId],
    program: &ir::Program,
    info: &BuildInfo,
    blobs: Option<&super::embed_blob::BlobSink>,
) -> Result<Body, Vec<Diagnostic>> {
    lower_in(db, files, program, info, blobs, None)
}

/// [`lower_storing`], with the promises lowered in `parts` parts on as
/// many threads (`None`: [`parts::by_cores`]). The body is the same
/// whatever the number.
fn lower_in(
    db: &SourceDb,
    files: &[converge_grammar::FileId],
    program: &ir::Program,
    info: &BuildInfo,
    blobs: Option<&super::embed_blob::BlobSink>,
    parts: Option<usize>,
) -> Result<Body, Vec<Diagnostic>> {
    let mut l = Lowerer::new(db, blobs);
    // The probe table first (format 2.3): declared facts run on every host
    // whether or not a promise reads them, so reports carry them all.
    for probe in &program.probes {
        l.constant(Constant::Probe(Box::new(probe.clone())));
    }
    let classes = l.classes(program);
    let exclusive: Vec<List<u32>> = program
        .exclusive
        .iter()
        .map(|g| {
            List(
                g.iter()
                    .map(|c| l.constant(Constant::Word(c.clone().into())))
                    .collect(),
            )
        })
        .collect();
    // The instances of a lookup split per key become one promise again
    // (`merge`); edges and the order are renumbered to match.
    let settled = merge::layout(program);
    let (promises, source_digest) = std::thread::scope(|scope| {
        // The digest reads every byte of the policy: it runs beside the
        // lowering instead of after it.
        let digest = scope.spawn(|| source_digest(db, files));
        let parts = parts.unwrap_or_else(|| parts::by_cores(settled.promises.len()));
        let promises = parts::lower_in_parts(&mut l, program, &settled, parts);
        let digest = digest
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (promises, digest)
    });
    if !l.diagnostics.is_empty() {
        return Err(l.diagnostics);
    }
    Ok(Body {
        header: Header {
            name: info.name.clone(),
            key_id: info.key_id,
            serial: info.serial,
            pass_limit: program.pass_limit.max(2),
            compiler_version: env!("CARGO_PKG_VERSION").to_owned(),
            source_digest,
        },
        constants: List(l.constants),
        programs: List(l.programs),
        classes: List(classes),
        exclusive: List(exclusive),
        promises: List(promises),
        order: List(settled.order),
        sources: List(l.sources.into_entries()),
    })
}

/// SHA-256 over the program's files, sorted by name: for each, its name, a
/// zero byte, its length as 8 little-endian bytes, and its text.
pub fn source_digest(db: &SourceDb, files: &[converge_grammar::FileId]) -> [u8; 32] {
    let mut named: Vec<(&str, &str)> = files
        .iter()
        .filter_map(|f| db.get(*f).map(|s| (s.name.as_str(), s.text.as_str())))
        .collect();
    named.sort();
    let mut hasher = Sha256::new();
    for (name, text) in named {
        hasher.update(name.as_bytes());
        hasher.update([0]);
        hasher.update((text.len() as u64).to_le_bytes());
        hasher.update(text.as_bytes());
    }
    hasher.finalize().into()
}

/// The Fx hash of an interned value (see [`Lowerer::constant`]).
fn fx_hash<T: std::hash::Hash + ?Sized>(value: &T) -> u64 {
    use std::hash::BuildHasher;
    std::hash::BuildHasherDefault::<rustc_hash::FxHasher>::default().hash_one(value)
}

struct Lowerer<'a> {
    db: &'a SourceDb,
    /// Where files over 4 KiB are stored (`policyc build`); `None`: inline.
    blobs: Option<&'a super::embed_blob::BlobSink>,
    constants: Vec<Constant>,
    /// Interning indexes (lookups only: the tables' order is the `Vec`s'
    /// push order, so the hasher never shows in the bundle). Fx, not
    /// SipHash: every promise interns several constants and programs, and
    /// the keys are the compiler's own values, not an attacker's choice of
    /// colliding keys in a long-running process.
    ///
    /// Keyed by the value's hash, with the other values of one hash
    /// chained (`*_next`): the tables hold every value once, in the `Vec`,
    /// instead of a copy in the index too (issue 22, item 4).
    constant_index: FxHashMap<u64, u32>,
    constant_next: Vec<Option<u32>>,
    programs: Vec<Program>,
    program_index: FxHashMap<u64, u32>,
    program_next: Vec<Option<u32>>,
    /// The constant of each source file's name met so far.
    source_files: Vec<(converge_grammar::FileId, u32)>,
    /// The `file:line` of each promise lowered.
    sources: sources::SourceTable,
    diagnostics: Vec<Diagnostic>,
    /// What is being lowered (a class or a promise), for internal errors.
    at: Span,
    /// The variables of the `each` loops around the code being lowered,
    /// innermost last (an `elem` reads one by depth).
    elems: Vec<String>,
    /// Lookups written in place of the nodes of a merged value
    /// (`merged`); empty otherwise.
    overrides: merged::Overrides,
}

impl<'a> Lowerer<'a> {
    /// A lowerer with empty pools.
    fn new(db: &'a SourceDb, blobs: Option<&'a super::embed_blob::BlobSink>) -> Self {
        Lowerer {
            db,
            blobs,
            constants: Vec::new(),
            constant_index: FxHashMap::default(),
            constant_next: Vec::new(),
            programs: Vec::new(),
            program_index: FxHashMap::default(),
            program_next: Vec::new(),
            source_files: Vec::new(),
            sources: sources::SourceTable::default(),
            diagnostics: Vec::new(),
            at: Span::default(),
            elems: Vec::new(),
            overrides: merged::Overrides::default(),
        }
    }

    /// The promises `range` of the layout, lowered in order (dropping any
    /// that had an error, which is in [`Lowerer::diagnostics`]).
    fn promises(
        &mut self,
        program: &ir::Program,
        settled: &merge::Settled,
        range: std::ops::Range<usize>,
    ) -> Vec<PromiseParts> {
        let mut promises = Vec::with_capacity(range.len());
        for j in range {
            let Some(&(i, m)) = settled.promises.get(j) else {
                continue;
            };
            let Some(p) = program.promises.get(i) else {
                continue;
            };
            let a = settled.after.get(j).cloned().unwrap_or_default();
            let n = settled.notify.get(j).cloned().unwrap_or_default();
            let source = self.source_loc(p.span);
            let merged = m.and_then(|m| settled.merges.get(m));
            if let Some(lowered) = self.promise(p, a, n, source, merged.map(|m| (m, program))) {
                promises.push(lowered);
            }
        }
        promises
    }

    /// Something the checker should have refused reached the writer: no
    /// bundle is written (`E0900`).
    fn internal(&mut self, message: String) {
        self.diagnostics.push(
            Diagnostic::new(
                Code::InternalError,
                format!("internal error: {message}"),
                self.at,
                "while writing the bundle for this",
            )
            .with_note(
                "this is a bug in policyc; please report it with the policy that triggers it",
            ),
        );
    }

    /// The id of fact `name`; an internal error if there is no such fact.
    fn fact_id(&mut self, name: &str) -> u32 {
        match schema::fact(name) {
            Some(f) => u32::from(f.id),
            None => {
                self.internal(format!("unknown fact `{name}`"));
                0
            }
        }
    }

    fn constant(&mut self, c: Constant) -> u32 {
        let hash = constant_hash(&c);
        if let Some(i) = self.find_constant(hash, |known| *known == c) {
            return i;
        }
        self.push_constant(hash, c)
    }

    /// The index of the constant of hash `hash` that `is` accepts.
    fn find_constant(&self, hash: u64, is: impl Fn(&Constant) -> bool) -> Option<u32> {
        let mut at = self.constant_index.get(&hash).copied();
        while let Some(i) = at {
            if self.constants.get(i as usize).is_some_and(&is) {
                return Some(i);
            }
            at = self.constant_next.get(i as usize).copied().flatten();
        }
        None
    }

    fn push_constant(&mut self, hash: u64, c: Constant) -> u32 {
        let i = self.constants.len() as u32;
        let previous = self.constant_index.insert(hash, i);
        self.constant_next.push(previous);
        self.constants.push(c);
        i
    }

    /// The constant index of a compile-time scalar; an internal error for a
    /// value that is not one (the checker gives every attribute its type).
    /// Looked up through a borrow: most values are constants met before,
    /// and copying each text to look it up was a tenth of the lowering.
    fn constant_value(&mut self, v: &Value) -> u32 {
        let Some(scalar) = Scalar::of(v) else {
            self.internal(format!("`{}` is not a single value", v.display()));
            return self.constant(Constant::Str(String::new().into()));
        };
        let hash = fx_hash(&scalar);
        if let Some(i) = self.find_constant(hash, |known| scalar.is(known)) {
            return i;
        }
        self.push_constant(hash, scalar.to_constant())
    }

    fn program(&mut self, code: Vec<Instr>) -> u32 {
        let hash = fx_hash(&code);
        let mut at = self.program_index.get(&hash).copied();
        while let Some(i) = at {
            if self.programs.get(i as usize).map(|p| &p.code.0) == Some(&code) {
                return i;
            }
            at = self.program_next.get(i as usize).copied().flatten();
        }
        let i = self.programs.len() as u32;
        let previous = self.program_index.insert(hash, i);
        self.program_next.push(previous);
        self.programs.push(Program { code: List(code) });
        i
    }

    fn source_loc(&mut self, span: Span) -> u32 {
        let line = match self.db.get(span.file) {
            Some(f) => f.line_col(span.start).0 as u32,
            None => {
                self.diagnostics.push(Diagnostic::unlocated(
                    Code::InternalError,
                    format!("internal error: a promise in unknown file {}", span.file.0),
                ));
                0
            }
        };
        // The name's constant is made where the file is first met, as
        // before; later promises of the file reuse it without copying and
        // hashing the name again.
        let file = match self.source_files.iter().find(|(f, _)| *f == span.file) {
            Some((_, constant)) => *constant,
            None => {
                let name = self.db.name(span.file).to_owned();
                let constant = self.constant(Constant::Str(name.into()));
                self.source_files.push((span.file, constant));
                constant
            }
        };
        self.sources.intern(SourceLoc { file, line })
    }

    /// Classes in dependency order: a definition after everything it reads.
    fn classes(&mut self, program: &ir::Program) -> Vec<ClassEntry> {
        let defined: HashMap<&str, &ir::ClassDecl> = program
            .classes
            .iter()
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut done: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for class in &program.classes {
            self.class_in_order(class, &defined, &mut done, &mut out, 0);
        }
        out
    }

    fn class_in_order<'p>(
        &mut self,
        class: &'p ir::ClassDecl,
        defined: &HashMap<&str, &'p ir::ClassDecl>,
        done: &mut Vec<&'p str>,
        out: &mut Vec<ClassEntry>,
        depth: usize,
    ) {
        // The checker refused cycles; the depth bound only keeps this finite.
        if done.contains(&class.name.as_str()) || depth > defined.len() {
            return;
        }
        done.push(&class.name);
        if let Some(expr) = &class.expr {
            let mut deps = Vec::new();
            guard_classes(expr, &mut deps);
            for dep in deps {
                if let Some(d) = defined.get(dep) {
                    self.class_in_order(d, defined, done, out, depth + 1);
                }
            }
        }
        self.at = class.span;
        let name = self.constant(Constant::Word(class.name.clone().into()));
        let program = class.expr.as_ref().map(|g| {
            let mut code = Vec::new();
            self.guard(g, &[], &mut code);
            self.program(code)
        });
        out.push(ClassEntry { name, program });
    }

    fn guard(&mut self, g: &Guard, loops: &[ir::RuntimeLoop], code: &mut Vec<Instr>) {
        match g {
            Guard::Const(b) => {
                let c = self.constant(Constant::Bool(*b));
                code.push(Instr::Const(c));
            }
            Guard::Class(name) => {
                let c = self.constant(Constant::Word(name.clone().into()));
                code.push(Instr::Class(c));
            }
            Guard::Not(inner) => {
                self.guard(inner, loops, code);
                code.push(Instr::Not);
            }
            Guard::And(items) | Guard::Or(items) => {
                let op = if matches!(g, Guard::And(_)) {
                    Instr::And
                } else {
                    Instr::Or
                };
                for (k, item) in items.iter().enumerate() {
                    self.guard(item, loops, code);
                    if k > 0 {
                        code.push(op);
                    }
                }
                if items.is_empty() {
                    let c = self.constant(Constant::Bool(matches!(g, Guard::And(_))));
                    code.push(Instr::Const(c));
                }
            }
            Guard::Compare { op, lhs, rhs } => match op {
                CompareOp::Eq | CompareOp::NotEq => {
                    self.scalar(lhs, loops, code);
                    self.scalar(rhs, loops, code);
                    code.push(if *op == CompareOp::Eq {
                        Instr::Eq
                    } else {
                        Instr::Ne
                    });
                }
                CompareOp::Match => {
                    self.scalar(lhs, loops, code);
                    let pattern = match rhs.as_str() {
                        Some(p) => p.to_owned(),
                        None => {
                            self.internal(format!(
                                "the regex of `=~` is not a constant string: {}",
                                rhs.display()
                            ));
                            String::new()
                        }
                    };
                    let c = self.constant(Constant::Str(pattern.into()));
                    code.push(Instr::Match(c));
                }
                CompareOp::In => match rhs {
                    // A long list of strings (the keys of a lookup) is one
                    // list constant (format 2.2).
                    Value::List(items)
                        if items.len() > SHORT_LIST && string_list(items).is_some() =>
                    {
                        self.scalar(lhs, loops, code);
                        let c = self
                            .constant(Constant::List(List(string_list(items).unwrap_or_default())));
                        code.push(Instr::Const(c));
                        code.push(Instr::In);
                    }
                    // `x in ["a", "b"]` is `x == "a" || x == "b"`.
                    Value::List(items) => {
                        for (k, item) in items.iter().enumerate() {
                            self.scalar(lhs, loops, code);
                            self.scalar(item, loops, code);
                            code.push(Instr::Eq);
                            if k > 0 {
                                code.push(Instr::Or);
                            }
                        }
                        if items.is_empty() {
                            let c = self.constant(Constant::Bool(false));
                            code.push(Instr::Const(c));
                        }
                    }
                    list => {
                        self.scalar(lhs, loops, code);
                        self.scalar(list, loops, code);
                        code.push(Instr::In);
                    }
                },
            },
        }
    }

    /// Pushes one value (a fact may push a list).
    fn scalar(&mut self, v: &Value, loops: &[ir::RuntimeLoop], code: &mut Vec<Instr>) {
        if let Some(snippet) = self.overrides.values.get(&merged::address(v)) {
            code.extend_from_slice(snippet);
            return;
        }
        match v {
            Value::Fact(name) => {
                let f = self.fact_id(name);
                code.push(Instr::Fact(f));
            }
            Value::Probe { name, .. } => {
                let path = name.strip_prefix("facts.").unwrap_or(name).to_owned();
                let c = self.constant(Constant::Str(path.into()));
                code.push(Instr::Probe(c));
            }
            Value::LoopVar(var) => {
                let i = match loops.iter().rposition(|l| l.var == *var) {
                    Some(i) => i as u32,
                    None => {
                        self.internal(format!("`{var}` is not a run-time loop variable here"));
                        0
                    }
                };
                code.push(Instr::LoopVar(i));
            }
            // One number or truth value only the host knows, as text.
            Value::Template(parts)
                if matches!(
                    parts.as_slice(),
                    [TemplatePart::Host(v)] if matches!(value_kind(v), ValueKind::Int | ValueKind::Bool)
                ) || matches!(
                    parts.as_slice(),
                    [TemplatePart::Fact(f)] if value_kind(&Value::Fact(f.clone())) == ValueKind::Int
                ) =>
            {
                match parts.first() {
                    Some(TemplatePart::Host(v)) => self.scalar(v, loops, code),
                    Some(TemplatePart::Fact(f)) => {
                        self.scalar(&Value::Fact(f.clone()), loops, code)
                    }
                    _ => {}
                }
                match functions::function("to_string") {
                    Some(f) => code.push(Instr::Func(f.id)),
                    None => self.internal("the VM has no function `to_string`".to_owned()),
                }
            }
            Value::Template(parts) => {
                for part in parts {
                    if let Some(snippet) = self.overrides.lits.get(&merged::address(part)) {
                        code.extend_from_slice(snippet);
                        continue;
                    }
                    match part {
                        TemplatePart::Lit(text) => {
                            let c = self.constant(Constant::Str(text.clone().into()));
                            code.push(Instr::Const(c));
                        }
                        TemplatePart::Fact(name) => {
                            self.scalar(&Value::Fact(name.clone()), loops, code)
                        }
                        TemplatePart::LoopVar(var) => {
                            self.scalar(&Value::LoopVar(var.clone()), loops, code)
                        }
                        TemplatePart::Host(v) => self.scalar(v, loops, code),
                    }
                }
                code.push(Instr::Concat(parts.len().max(1) as u32));
                if parts.is_empty() {
                    let c = self.constant(Constant::Str(String::new().into()));
                    code.insert(code.len() - 1, Instr::Const(c));
                }
            }
            Value::List(items) => match string_list(items) {
                Some(strings) => {
                    let c = self.constant(Constant::List(List(strings)));
                    code.push(Instr::Const(c));
                }
                None => self.internal(format!(
                    "a list of values only the host knows reached the VM: {}",
                    v.display()
                )),
            },
            Value::Call(call) => {
                for arg in &call.args {
                    self.scalar(arg, loops, code);
                }
                match functions::function(call.func) {
                    Some(f) => code.push(Instr::Func(f.id)),
                    None => self.internal(format!("the VM has no function `{}`", call.func)),
                }
            }
            Value::Coalesce(items) => {
                for (k, item) in items.iter().enumerate() {
                    self.scalar(item, loops, code);
                    if k > 0 {
                        code.push(Instr::Coalesce);
                    }
                }
            }
            Value::Select {
                cond,
                then,
                otherwise,
            } => {
                self.guard(cond, loops, code);
                self.scalar(then, loops, code);
                self.scalar(otherwise, loops, code);
                code.push(Instr::Select);
            }
            Value::Each(each) => {
                self.scalar(&each.list, loops, code);
                self.elems.push(each.var.clone());
                let mut inner = Vec::new();
                self.scalar(&each.body, loops, &mut inner);
                self.elems.pop();
                let p = self.program(inner);
                code.push(Instr::Each(p));
            }
            Value::Elem(var) => match self.elems.iter().rev().position(|v| v == var) {
                Some(depth) => code.push(Instr::Elem(depth as u32)),
                None => self.internal(format!("`{var}` is not the variable of a host loop here")),
            },
            // A placeholder, sealed to its hosts by `super::secrets`.
            Value::Secret(secret) => {
                let c = self.constant(Constant::Secret(Box::new(Sealed {
                    name: secret.name.clone(),
                    set: super::secrets::UNSEALED,
                    index: 0,
                })));
                code.push(Instr::Const(c));
            }
            Value::Choice(_) | Value::Missing(_) => self.internal(format!(
                "an unsplit lookup reached the writer: {}",
                v.display()
            )),
            other => {
                let c = self.constant_value(other);
                code.push(Instr::Const(c));
            }
        }
    }

    /// A value as an operand item: a constant, or a program computing it.
    fn item(&mut self, v: &Value, loops: &[ir::RuntimeLoop]) -> Item {
        if v.is_constant() {
            return Item::Const(self.constant_value(v));
        }
        let mut code = Vec::new();
        self.scalar(v, loops, &mut code);
        // A lone fact that is a string or int is its own value; anything
        // else already ends in a concat.
        Item::Code(self.program(code))
    }

    /// One bundle promise: `p`, or, with `merged`, the instances of a split
    /// lookup of which `p` is the first (`merge`).
    fn promise(
        &mut self,
        p: &ir::Promise,
        after: Vec<u32>,
        notify: Vec<u32>,
        source: u32,
        merged: Option<(&Merge, &ir::Program)>,
    ) -> Option<PromiseParts> {
        self.at = p.span;
        let Some(pt) = schema::promise_type(p.kind) else {
            self.internal(format!("unknown promise type `{}`", p.kind));
            return None;
        };
        let loops: Vec<ir::RuntimeLoop> = p.runtime_loops().to_vec();
        let promiser = self.item(&p.promiser, &loops);
        let mut attrs = Vec::new();
        let mut classes = [None, None, None];
        for (j, attr) in p.attrs.iter().enumerate() {
            let Some(spec) = pt.attr(attr.name) else {
                self.internal(format!(
                    "`{}` is not an attribute of `{}`",
                    attr.name, pt.name
                ));
                continue;
            };
            if spec.role == AttrRole::Relation && !schema::CLASS_ATTRIBUTES.contains(&attr.name) {
                // `after` and `notify` are the promise's edges; the outcome
                // classes are fields of their own.
                let slot = ["on_repaired", "on_kept", "on_failed"]
                    .iter()
                    .position(|n| *n == attr.name);
                if let Some(slot) = slot {
                    match (attr.value.as_str(), classes.get_mut(slot)) {
                        (Some(name), Some(s)) => {
                            *s = Some(self.constant(Constant::Word(name.to_owned().into())))
                        }
                        _ => self.internal(format!(
                            "`{}` does not name a class: {}",
                            attr.name,
                            attr.value.display()
                        )),
                    }
                }
                continue;
            }
            let joint = merged.and_then(|(m, program)| {
                m.attrs
                    .get(j)
                    .and_then(Option::as_ref)
                    .map(|joint| (m, program, joint))
            });
            let value = match (attr.name, &spec.ty) {
                _ if joint.is_some() => {
                    let (m, program, joint) = joint?;
                    self.joint_operand(m, program, j, joint, &loops)
                }
                ("source", _) if pt.name == "directory" => self.embed_tree(p, attr)?,
                ("source", _) => self.embed_source(p, attr)?,
                ("rpm", _) if pt.name == "package" => self.embed_package_file(p, attr)?,
                (_, AttrType::List(_)) => match &attr.value {
                    Value::List(items) => Operand::List(FixedList::from(
                        items
                            .iter()
                            .map(|i| self.item(i, &loops))
                            .collect::<Vec<_>>(),
                    )),
                    other => Operand::List(FixedList::from(vec![self.item(other, &loops)])),
                },
                (_, AttrType::Class) => match attr.value.as_str() {
                    // `on_changed`: the class name as a word.
                    Some(name) => Operand::Item(Item::Const(
                        self.constant(Constant::Word(name.to_owned().into())),
                    )),
                    None => {
                        self.internal(format!(
                            "`{}` does not name a class: {}",
                            attr.name,
                            attr.value.display()
                        ));
                        continue;
                    }
                },
                _ => Operand::Item(self.item(&attr.value, &loops)),
            };
            attrs.push(AttrValue {
                attr: spec.id,
                value,
            });
        }
        let merged_guard = merged.map(|(m, _)| m.guard());
        let guard = match merged_guard.as_ref().unwrap_or(&p.guard) {
            Guard::Const(true) => None,
            g => {
                let mut code = Vec::new();
                self.guard(g, &loops, &mut code);
                Some(self.program(code))
            }
        };
        let facts: Vec<u32> = loops.iter().map(|l| self.fact_id(&l.fact)).collect();
        let [on_repaired, on_kept, on_failed] = classes;
        Some(PromiseParts {
            kind: pt.id,
            promiser,
            attrs: FixedList::from(attrs),
            guard,
            loops: FixedList::from(facts),
            after: FixedList::from(after),
            notify: FixedList::from(notify),
            on_repaired,
            on_kept,
            on_failed,
            source,
        })
    }

    /// Reads a file named relative to the policy file that names it, from
    /// inside its policy tree (`super::embed`).
    fn read_beside(&mut self, p: &ir::Promise, attr: &ir::Attr) -> Option<Vec<u8>> {
        match super::embed::read(self.db, p, attr) {
            Ok(bytes) => Some(bytes),
            Err(d) => {
                self.diagnostics.push(d);
                None
            }
        }
    }

    /// A `directory source`: the tree, read inside the policy tree, as one
    /// blob ([`converge_format::tree`]).
    fn embed_tree(&mut self, p: &ir::Promise, attr: &ir::Attr) -> Option<Operand> {
        let (top, tree) = match super::embed::resolve(self.db, p, attr) {
            Ok(found) => found,
            Err(d) => {
                self.diagnostics.push(d);
                return None;
            }
        };
        let name = attr.value.as_str().unwrap_or_default();
        match super::embed_tree::read_source_tree(&tree, &top, self.blobs) {
            Ok(entries) => {
                // Every stored file is also a constant: the bundle's
                // `blob_ref` constants list all the blobs it needs.
                for e in &entries {
                    if let Some(converge_format::tree::Content::Blob(blob)) = &e.content {
                        self.constant(Constant::BlobRef(Box::new(*blob)));
                    }
                }
                Some(Operand::Item(Item::Const(self.constant(Constant::Blob(
                    Bytes(converge_format::tree::encode(&entries)),
                )))))
            }
            Err(why) => {
                self.diagnostics.push(
                    Diagnostic::new(
                        Code::EmbedFailed,
                        format!("cannot embed the directory `{name}`: {why}"),
                        attr.span,
                        "this source",
                    )
                    .with_help(format!(
                        "a `directory source` is read at build time, relative to the policy file, inside the policy tree; at most {} entries and {} MiB",
                        converge_format::tree::MAX_ENTRIES,
                        converge_format::tree::MAX_BYTES >> 20
                    )),
                );
                None
            }
        }
    }

    /// A package file (`package rpm`): embedded like a `source`, once its
    /// content is checked to be a package of that kind.
    fn embed_package_file(&mut self, p: &ir::Promise, attr: &ir::Attr) -> Option<Operand> {
        let bytes = self.read_beside(p, attr)?;
        if let Some(d) = super::embed::package_file_diagnostic(attr, &bytes) {
            self.diagnostics.push(d);
            return None;
        }
        Some(Operand::Item(Item::Const(
            self.constant(Constant::Blob(Bytes(bytes))),
        )))
    }

    /// A file's `source`: inline, or stored beside the bundle when it is
    /// over 4 KiB and the build has a blob directory.
    fn embed_source(&mut self, p: &ir::Promise, attr: &ir::Attr) -> Option<Operand> {
        let constant = match super::embed::embed(self.db, p, attr, self.blobs) {
            Ok(super::embed_blob::Embedded::Inline(bytes)) => Constant::Blob(Bytes(bytes)),
            Ok(super::embed_blob::Embedded::Stored(blob)) => Constant::BlobRef(Box::new(blob)),
            Err(d) => {
                self.diagnostics.push(d);
                return None;
            }
        };
        Some(Operand::Item(Item::Const(self.constant(constant))))
    }
}

/// Lists up to this long are tested with one comparison per element;
/// longer ones with one list constant.
const SHORT_LIST: usize = 8;

/// The texts of a list of string constants.
fn string_list(items: &[Value]) -> Option<Vec<String>> {
    items
        .iter()
        .map(|i| match i {
            Value::Str(s) | Value::Word(s) => Some(s.clone()),
            _ => None,
        })
        .collect()
}

/// A scalar constant seen through a borrow of its value: what
/// [`Lowerer::constant_value`] looks up before it copies anything. The
/// interning index hashes scalar constants as this ([`constant_hash`]), so
/// a borrowed value finds its constant.
#[derive(Hash)]
enum Scalar<'v> {
    Str(&'v str),
    Word(&'v str),
    Int(i64),
    Bool(bool),
    Duration(u64),
}

impl<'v> Scalar<'v> {
    fn of(v: &'v Value) -> Option<Self> {
        Some(match v {
            Value::Str(s) => Scalar::Str(s),
            Value::Word(w) => Scalar::Word(w),
            Value::Int(i) => Scalar::Int(*i),
            Value::Bool(b) => Scalar::Bool(*b),
            Value::Duration(s) => Scalar::Duration(*s),
            _ => return None,
        })
    }

    fn of_constant(c: &'v Constant) -> Option<Self> {
        Some(match c {
            Constant::Str(s) => Scalar::Str(s),
            Constant::Word(w) => Scalar::Word(w),
            Constant::Int(i) => Scalar::Int(*i),
            Constant::Bool(b) => Scalar::Bool(*b),
            Constant::Duration(s) => Scalar::Duration(*s),
            _ => return None,
        })
    }

    /// Whether `c` is this scalar.
    fn is(&self, c: &Constant) -> bool {
        match (self, c) {
            (Scalar::Str(a), Constant::Str(b)) | (Scalar::Word(a), Constant::Word(b)) => {
                *a == b.as_str()
            }
            (Scalar::Int(a), Constant::Int(b)) => a == b,
            (Scalar::Bool(a), Constant::Bool(b)) => a == b,
            (Scalar::Duration(a), Constant::Duration(b)) => a == b,
            _ => false,
        }
    }

    fn to_constant(&self) -> Constant {
        match *self {
            Scalar::Str(s) => Constant::Str(s.into()),
            Scalar::Word(w) => Constant::Word(w.into()),
            Scalar::Int(i) => Constant::Int(i),
            Scalar::Bool(b) => Constant::Bool(b),
            Scalar::Duration(s) => Constant::Duration(s),
        }
    }
}

/// The interning hash of a constant: a scalar's as [`Scalar`], any other
/// constant's own.
fn constant_hash(c: &Constant) -> u64 {
    match Scalar::of_constant(c) {
        Some(scalar) => fx_hash(&scalar),
        None => fx_hash(c),
    }
}

/// The constant of a compile-time scalar; `None` for a list, map or
/// reference, which are never one value.
fn constant_of(v: &Value) -> Option<Constant> {
    Scalar::of(v).map(|scalar| scalar.to_constant())
}

fn guard_classes<'g>(g: &'g Guard, out: &mut Vec<&'g str>) {
    match g {
        Guard::Class(name) => out.push(name),
        Guard::Not(inner) => guard_classes(inner, out),
        Guard::And(items) | Guard::Or(items) => {
            for item in items {
                guard_classes(item, out);
            }
        }
        Guard::Const(_) | Guard::Compare { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::diagnostic::Severity;
    use crate::render::render_human;

    fn db() -> SourceDb {
        let mut db = SourceDb::new();
        db.add(
            "site.policy",
            "bundle b {\n  report \"r\" { message = \"x\"; }\n}\n".to_owned(),
        );
        db
    }

    fn promise(
        kind: &'static str,
        attrs: Vec<(&'static str, Value)>,
        loops: &[(&str, &str)],
    ) -> ir::Promise {
        let span = Span {
            file: converge_grammar::FileId(0),
            start: 13,
            end: 23,
        };
        ir::Promise {
            kind,
            promiser: Value::Str("r".into()),
            attrs: attrs
                .into_iter()
                .map(|(name, value)| ir::Attr {
                    name,
                    value,
                    span,
                    default: None,
                })
                .collect(),
            guard: Arc::new(Guard::Const(true)),
            span,
            chain: Arc::from(Vec::new()),
            rare: ir::Rare {
                runtime_loops: loops
                    .iter()
                    .map(|(var, fact)| ir::RuntimeLoop {
                        var: (*var).into(),
                        fact: (*fact).into(),
                    })
                    .collect(),
                ..ir::Rare::default()
            }
            .boxed_unless_empty(),
        }
    }

    /// Lowers promises the checker should have refused; each must be an
    /// E0900 at the promise, never a bundle with a default in its place.
    fn internal_errors(promises: Vec<ir::Promise>) -> Vec<String> {
        let db = db();
        let program = ir::Program {
            order: (0..promises.len()).collect(),
            promises,
            ..ir::Program::default()
        };
        let info = BuildInfo {
            name: "t".into(),
            key_id: [0; 8],
            serial: 1,
        };
        let diagnostics = lower(&db, &[], &program, &info).expect_err("refused");
        let text = render_human(&db, &diagnostics, false);
        assert!(text.contains("site.policy:2:3"), "{text}");
        diagnostics
            .iter()
            .map(|d| {
                assert_eq!(d.code, Code::InternalError);
                assert_eq!(d.severity, Severity::Error);
                d.message.clone()
            })
            .collect()
    }

    #[test]
    fn an_unknown_fact_is_an_internal_error_not_fact_zero() {
        let message = Value::Template(vec![TemplatePart::Fact("sys.nope".into())]);
        assert_eq!(
            internal_errors(vec![promise("report", vec![("message", message)], &[])]),
            ["internal error: unknown fact `sys.nope`"]
        );
        assert_eq!(
            internal_errors(vec![promise("report", vec![], &[("ip", "sys.nope")])]),
            ["internal error: unknown fact `sys.nope`"]
        );
    }

    #[test]
    fn an_unknown_loop_variable_is_an_internal_error_not_loop_zero() {
        let message = Value::Template(vec![TemplatePart::LoopVar("ip".into())]);
        assert_eq!(
            internal_errors(vec![promise(
                "report",
                vec![("message", message)],
                &[("addr", "sys.ipv4")]
            )]),
            ["internal error: `ip` is not a run-time loop variable here"]
        );
    }

    #[test]
    fn a_list_where_one_value_belongs_is_an_internal_error_not_its_text() {
        let list = Value::List(vec![Value::Str("a".into()), Value::Str("b".into())]);
        assert_eq!(
            internal_errors(vec![promise("report", vec![("message", list)], &[])]),
            ["internal error: `[\"a\", \"b\"]` is not a single value"]
        );
    }

    #[test]
    fn an_unknown_promise_type_or_attribute_is_an_internal_error_not_a_drop() {
        assert_eq!(
            internal_errors(vec![
                promise("teapot", vec![], &[]),
                promise("report", vec![("colour", Value::Str("x".into()))], &[]),
            ]),
            [
                "internal error: unknown promise type `teapot`",
                "internal error: `colour` is not an attribute of `report`"
            ]
        );
    }

    /// A diagnostic with no place is printed without one, not at the first
    /// byte of the first file.
    #[test]
    fn an_unlocated_diagnostic_points_nowhere() {
        let d = Diagnostic::unlocated(Code::InternalError, "internal error: an analysis failed");
        let text = render_human(&db(), &[d], false);
        assert_eq!(text, "error[E0900]: internal error: an analysis failed\n");
    }
}
