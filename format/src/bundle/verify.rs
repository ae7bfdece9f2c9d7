//! Structural verification of a decoded body, before anything runs: every
//! index in range, every program's stack effect and types consistent and
//! bounded, every value of the type its attribute expects, the order a
//! permutation that respects `after`, class definitions free of cycles.
//! After this, the interpreter can trust the body's shape.

use super::error::BundleError;
use super::format::{AttrValue, Body, Constant, Item, Operand, Program, Promise, Table};
use super::functions::function_by_id;
use super::instr::Instr;
use super::limits::{
    RegexCache, MAX_BLOB, MAX_CONST_LIST, MAX_EACH_DEPTH, MAX_LOOP_DEPTH, MAX_PROMISES,
};
use super::probe::{ProbeType, MAX_PROBES};
use crate::schema::{attribute_by_id, fact_by_id, promise_type, promise_type_by_id, AttrType};

/// The longest program accepted.
pub const MAX_CODE: usize = 1 << 16;
/// The deepest value stack a program may need.
pub const MAX_STACK: usize = 256;
/// The largest pass limit accepted.
pub const MAX_PASS_LIMIT: u32 = 1000;

/// The type of a value on the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ty {
    Bool,
    Str,
    Int,
    List,
}

impl Ty {
    /// As `docs/bytecode.md` writes it.
    pub fn name(self) -> &'static str {
        match self {
            Ty::Bool => "bool",
            Ty::Str => "string",
            Ty::Int => "int",
            Ty::List => "list",
        }
    }
}

/// What the simulation knows of one stack slot: its type, and whether the
/// value may be missing at run time ("optional T", format 2.2). Missing
/// comes from a failed index on the host; every instruction that consumes
/// an optional operand gives an optional result, and only `coalesce`
/// removes optionality.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    ty: Ty,
    optional: bool,
}

/// What verifying a program establishes, including what it inherits from
/// the programs its `each` instructions run (all of a lower index, so
/// already verified).
#[derive(Clone, Copy, Debug)]
struct ProgramInfo {
    result: Ty,
    /// Whether the result may be missing.
    optional: bool,
    /// One more than the highest `loopvar` index used (0 if none).
    loop_vars: u32,
    /// How many enclosing `each` levels it needs for every `elem` to find
    /// its element: the largest `d + 1` of its `elem d`, and `need - 1` of
    /// each program it runs by `each`. A program used directly (guard,
    /// class, promiser, attribute) must need none.
    elem_need: u32,
    /// The longest chain of `each` it starts: 0 without `each`, else one
    /// more than the deepest program it runs. At most [`MAX_EACH_DEPTH`].
    each_depth: u32,
    /// The first secret constant it pushes, itself or through the programs
    /// its `each` runs (format 2.4): its value is then secret, and may only
    /// be a value [`is_secret_sink`] allows.
    secret: Option<u32>,
}

/// Whether attribute `attr` of promise type `kind` may hold a secret
/// (LANGUAGE.md section 14): the content or template of a `file`, the
/// password of a `user`. Every other use of a secret (a guard, a class, a
/// promiser, any other attribute, a list element) would print it or pass
/// it to a command, and is refused here as it is by the compiler; the VM
/// checks it again when it resolves a promise.
pub fn is_secret_sink(kind: u16, attr: u16) -> bool {
    let (Some(pt), Some(spec)) = (promise_type_by_id(kind), attribute_by_id(attr)) else {
        return false;
    };
    matches!(
        (pt.name, spec.name),
        ("file", "content" | "template") | ("user", "password")
    )
}

fn corrupt(reason: impl Into<String>) -> BundleError {
    BundleError::Corrupt {
        reason: reason.into(),
    }
}

pub fn verify_body(body: &Body) -> Result<(), BundleError> {
    let mut v = Verifier {
        body,
        probe_reads: std::collections::HashMap::new(),
        tables: Vec::new(),
    };
    v.header()?;
    static_limits(body)?;
    probes(body)?;
    v.resolve_probe_reads();
    v.tables = table_types(body)?;
    // In index order: `each` runs only programs of a lower index, whose
    // facts are known by then.
    let mut programs: Vec<ProgramInfo> = Vec::with_capacity(body.programs.len());
    for (i, p) in body.programs.iter().enumerate() {
        let info = v
            .program(i, p, &programs)
            .map_err(|e| corrupt(format!("program {i}: {e}")))?;
        programs.push(info);
    }
    v.classes(&programs)?;
    for (g, group) in body.exclusive.iter().enumerate() {
        for &c in group.iter() {
            v.name_const(c)
                .map_err(|e| corrupt(format!("exclusive group {g}: {e}")))?;
        }
    }
    for (i, p) in body.promises.iter().enumerate() {
        v.promise(i, p, &programs)
            .map_err(|e| corrupt(format!("promise {i}: {e}")))?;
    }
    v.order()?;
    regexes(body)?;
    for (i, s) in body.sources.iter().enumerate() {
        match body.constants.get(s.file as usize) {
            Some(Constant::Str(_)) => {}
            _ => {
                return Err(corrupt(format!(
                    "source {i}: file name is not a string constant"
                )))
            }
        }
    }
    Ok(())
}

/// The limits of `docs/bytecode.md` ("Limits") that a body's shape alone
/// decides, checked before any per-item work.
fn static_limits(body: &Body) -> Result<(), BundleError> {
    if body.promises.len() > MAX_PROMISES {
        return Err(corrupt(format!(
            "{} promises, more than the limit of {MAX_PROMISES}",
            body.promises.len()
        )));
    }
    for (c, constant) in body.constants.iter().enumerate() {
        let (what, len) = match constant {
            Constant::List(items) => ("a list", items.len()),
            Constant::Table(table) => ("a table", table.ends.len()),
            Constant::Secret(sealed) => {
                sealed_problem(body, sealed).map_err(|e| corrupt(format!("constant {c}: {e}")))?;
                continue;
            }
            Constant::SealedSet(set) => {
                if !set.ciphertext.0.starts_with(AGE_VERSION_LINE) {
                    return Err(corrupt(format!(
                        "constant {c}: a sealed set that is not an age file"
                    )));
                }
                continue;
            }
            Constant::BlobRef(blob) => {
                if blob.size > MAX_BLOB {
                    return Err(corrupt(format!(
                        "constant {c}: a blob of {} bytes, more than the limit of {MAX_BLOB}",
                        blob.size
                    )));
                }
                continue;
            }
            _ => continue,
        };
        if len > MAX_CONST_LIST {
            return Err(corrupt(format!(
                "constant {c}: {what} of {len} elements, more than the limit of {MAX_CONST_LIST}"
            )));
        }
    }
    for (i, p) in body.promises.iter().enumerate() {
        if p.loops().len() > MAX_LOOP_DEPTH {
            return Err(corrupt(format!(
                "promise {i}: {} nested run-time loops, more than the limit of {MAX_LOOP_DEPTH}",
                p.loops().len()
            )));
        }
    }
    Ok(())
}

/// A blob stored beside the bundle (format 2.6) is only ever a file's
/// `source`: a `directory source` is its tree, inline (whose large files
/// name blobs), and a package file (`rpm`) stays inline.
fn blob_ref_only_as_file_source(
    constants: &super::format::List<Constant>,
    promise_type: &str,
    attr: &str,
    value: &Operand,
) -> Result<(), String> {
    let Operand::Item(Item::Const(c)) = value else {
        return Ok(());
    };
    match constants.get(*c as usize) {
        Some(Constant::BlobRef(_)) if !(promise_type == "file" && attr == "source") => Err(format!(
            "`{attr}` of a `{promise_type}` promise names a stored blob (constant {c}); only a file's `source` may"
        )),
        _ => Ok(()),
    }
}

/// The first line of every age file (binary format).
const AGE_VERSION_LINE: &[u8] = b"age-encryption.org/v1\n";

/// What is wrong with a secret constant (format 2.4), if anything: its
/// name is the only part of it any output prints, so it must be a plain
/// name; it must name a sealed set (which entry of the set it is, only
/// the host that opens the set can check).
fn sealed_problem(body: &Body, sealed: &super::format::Sealed) -> Result<(), String> {
    let name_ok = (1..=128).contains(&sealed.name.len())
        && sealed
            .name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !name_ok {
        return Err("a secret whose name is not 1-128 letters, digits, '_', '-' or '.'".into());
    }
    match body.constants.get(sealed.set as usize) {
        Some(Constant::SealedSet(_)) => Ok(()),
        _ => Err(format!(
            "secret {}: its set, constant {}, is not a sealed set",
            sealed.name, sealed.set
        )),
    }
}

/// The probe table (format 2.3): at most [`MAX_PROBES`] declarations, each
/// by the rules of [`Probe::problem`](super::probe::Probe::problem), no
/// name declared twice.
fn probes(body: &Body) -> Result<(), BundleError> {
    let mut seen: Vec<&str> = Vec::new();
    for (c, p) in body.probes() {
        if seen.len() >= MAX_PROBES {
            return Err(corrupt(format!(
                "more than the limit of {MAX_PROBES} probes"
            )));
        }
        if let Some(why) = p.problem() {
            return Err(corrupt(format!("probe constant {c}: {why}")));
        }
        if seen.contains(&p.name.as_str()) {
            return Err(corrupt(format!(
                "probe constant {c}: the fact `{}` is declared twice",
                p.name
            )));
        }
        seen.push(&p.name);
    }
    Ok(())
}

/// Every regex — of a `match` instruction, or the constant `replace` of a
/// `line` promise — compiles within the size limit; each distinct constant
/// is compiled once, however many instructions or promises name it, and
/// there are at most [`MAX_REGEXES`](super::limits::MAX_REGEXES) of them.
fn regexes(body: &Body) -> Result<(), BundleError> {
    let mut cache = RegexCache::default();
    for (i, p) in body.programs.iter().enumerate() {
        for (pc, instr) in p.code.iter().enumerate() {
            let Instr::Match(c) = *instr else { continue };
            let Some(Constant::Str(pattern)) = body.constants.get(c as usize) else {
                continue; // refused by `program` already
            };
            cache
                .get(&c, pattern)
                .map_err(|e| corrupt(format!("program {i}: invalid regex at {pc}: {e}")))?;
        }
    }
    let line = promise_type("line");
    let replace = line.and_then(|t| t.all_attrs().find(|a| a.name == "replace"));
    for (i, p) in body.promises.iter().enumerate() {
        if Some(p.kind) != line.map(|t| t.id) {
            continue;
        }
        for a in p.attrs.iter() {
            let (Some(attr), Operand::Item(Item::Const(c))) = (replace, &a.value) else {
                continue;
            };
            if a.attr != attr.id {
                continue;
            }
            let Some(Constant::Str(pattern)) = body.constants.get(*c as usize) else {
                continue; // refused by `promise` already
            };
            cache
                .get(c, pattern)
                .map_err(|e| corrupt(format!("promise {i}: invalid regex in `replace`: {e}")))?;
        }
    }
    Ok(())
}

/// The type of the values of every table constant (format 2.3), by
/// constant index (`None` for other constants), checked once here so that
/// each `lookup` costs nothing more: the ends cut the key and value texts
/// exactly, keys sorted and unique, every value and the default a value of
/// the table's kind (an int in canonical decimal, a bool `true`/`false`).
fn table_types(body: &Body) -> Result<Vec<Option<Ty>>, BundleError> {
    body.constants
        .iter()
        .enumerate()
        .map(|(c, constant)| match constant {
            Constant::Table(table) => table_type(table)
                .map(Some)
                .map_err(|e| corrupt(format!("constant {c}: table {e}"))),
            _ => Ok(None),
        })
        .collect()
}

fn table_type(table: &Table) -> Result<Ty, String> {
    use crate::ids::constant_kind;
    let ty = match table.kind {
        constant_kind::STR => Ty::Str,
        constant_kind::INT => Ty::Int,
        constant_kind::BOOL => Ty::Bool,
        other => {
            return Err(format!(
                "values of constant kind {other}, not str, int or bool"
            ))
        }
    };
    let value_ok = |v: &str| match ty {
        Ty::Int => v.parse::<i64>().is_ok_and(|n| n.to_string() == v),
        Ty::Bool => v == "true" || v == "false",
        _ => true,
    };
    let mut previous: Option<&str> = None;
    for i in 0..table.ends.len() {
        let (key, value) = table
            .entry(i)
            .ok_or_else(|| format!("entry {i} ends outside its text or inside a character"))?;
        if let Some(before) = previous {
            if key <= before {
                return Err(format!(
                    "keys are not sorted and unique: {key:?} after {before:?}"
                ));
            }
        }
        previous = Some(key);
        if !value_ok(value) {
            return Err(format!("value {value:?} of {key:?} is not {}", ty.name()));
        }
    }
    let last = table.ends.0.last().copied();
    let (keys_end, values_end) = last.map_or((0, 0), |e| (e.key as usize, e.value as usize));
    if keys_end != table.keys.len() || values_end != table.values.len() {
        return Err("has text after its last entry".to_owned());
    }
    match &table.default {
        Some(d) if !value_ok(d) => Err(format!("default {d:?} is not {}", ty.name())),
        None if table.ends.is_empty() => Err("has no entries and no default".to_owned()),
        _ => Ok(ty),
    }
}

struct Verifier<'b> {
    body: &'b Body,
    /// The stack type (or why there is none) of each constant a `probe`
    /// instruction names, worked out once per constant: a type text and a
    /// path are parsed once however many instructions read them.
    probe_reads: std::collections::HashMap<u32, Result<Ty, String>>,
    /// [`table_types`].
    tables: Vec<Option<Ty>>,
}

impl Verifier<'_> {
    fn header(&self) -> Result<(), BundleError> {
        let h = &self.body.header;
        if let Some(why) = crate::stamp::name_problem(&h.name) {
            return Err(corrupt(format!(
                "the bundle name {:?} is invalid: {why}",
                h.name
            )));
        }
        if h.pass_limit == 0 || h.pass_limit > MAX_PASS_LIMIT {
            return Err(corrupt(format!(
                "pass limit {} is out of range",
                h.pass_limit
            )));
        }
        Ok(())
    }

    fn constant(&self, c: u32) -> Result<&Constant, String> {
        self.body
            .constants
            .get(c as usize)
            .ok_or_else(|| format!("constant {c} does not exist"))
    }

    /// A constant that names something (a class): a word or a string.
    fn name_const(&self, c: u32) -> Result<&str, String> {
        match self.constant(c)? {
            Constant::Word(s) | Constant::Str(s) => Ok(s),
            _ => Err(format!("constant {c} is not a name")),
        }
    }

    /// The type of constant `c` when pushed (a blob is never a value).
    fn constant_ty(&self, c: u32) -> Result<Ty, String> {
        Ok(match self.constant(c)? {
            Constant::Str(_) | Constant::Word(_) => Ty::Str,
            Constant::Int(_) | Constant::Duration(_) => Ty::Int,
            Constant::Bool(_) => Ty::Bool,
            Constant::List(_) => Ty::List,
            Constant::Blob(_) => return Err(format!("constant {c} is a blob")),
            Constant::Probe(_) => return Err(format!("constant {c} is a probe declaration")),
            Constant::Table(_) => return Err(format!("constant {c} is a table")),
            Constant::Secret(_) => Ty::Str,
            Constant::SealedSet(_) => return Err(format!("constant {c} is a sealed set")),
            Constant::BlobRef(_) => return Err(format!("constant {c} is a blob")),
        })
    }

    /// Resolves every constant a `probe` instruction names, once each.
    fn resolve_probe_reads(&mut self) {
        let types: std::collections::HashMap<&str, Result<ProbeType, String>> = self
            .body
            .probes()
            .map(|(_, p)| (p.name.as_str(), ProbeType::parse(&p.ty)))
            .collect();
        for program in self.body.programs.iter() {
            for instr in program.code.iter() {
                if let Instr::Probe(c) = *instr {
                    if !self.probe_reads.contains_key(&c) {
                        let read = self.probe_read(c, &types);
                        self.probe_reads.insert(c, read);
                    }
                }
            }
        }
    }

    /// The stack type of `probe c`: constant `c` names a declared probe
    /// and the fields or keys down to a scalar or a list (format 2.3).
    fn probe_read(
        &self,
        c: u32,
        types: &std::collections::HashMap<&str, Result<ProbeType, String>>,
    ) -> Result<Ty, String> {
        let Constant::Str(path) = self.constant(c)? else {
            return Err(format!("probe constant {c} is not a string"));
        };
        let mut steps = path.split('.');
        let name = steps.next().unwrap_or_default();
        let ty = types
            .get(name)
            .ok_or_else(|| format!("no probe `{name}` is declared"))?
            .as_ref()
            .map_err(|e| format!("probe `{name}`: {e}"))?;
        let steps: Vec<&str> = steps.collect();
        let leaf = ty.at(&steps).map_err(|e| format!("`facts.{path}`: {e}"))?;
        leaf.stack_ty()
            .ok_or_else(|| format!("`facts.{path}` is a {leaf}: only a scalar or a list is read"))
    }

    /// Simulates program `index` on a stack of types. `earlier` holds what
    /// verifying programs `0 .. index` established.
    fn program(
        &self,
        index: usize,
        p: &Program,
        earlier: &[ProgramInfo],
    ) -> Result<ProgramInfo, String> {
        if p.code.is_empty() {
            return Err("empty program".to_owned());
        }
        if p.code.len() > MAX_CODE {
            return Err(format!(
                "{} instructions, more than {MAX_CODE}",
                p.code.len()
            ));
        }
        let mut stack: Vec<Slot> = Vec::new();
        let mut loop_vars = 0u32;
        let mut elem_need = 0u32;
        let mut each_depth = 0u32;
        let mut secret: Option<u32> = None;
        for (pc, instr) in p.code.iter().enumerate() {
            let pop = |stack: &mut Vec<Slot>| stack.pop().ok_or(format!("stack underflow at {pc}"));
            // The type pushed, and whether an operand may be missing.
            let (ty, optional) = match *instr {
                Instr::Const(c) => {
                    if matches!(self.constant(c), Ok(Constant::Secret(_))) {
                        secret = secret.or(Some(c));
                    }
                    (
                        self.constant_ty(c).map_err(|e| format!("{e} at {pc}"))?,
                        false,
                    )
                }
                Instr::Fact(f) => match fact_by_id(f).map(|f| f.ty) {
                    Some(AttrType::String) => (Ty::Str, false),
                    Some(AttrType::Int) => (Ty::Int, false),
                    Some(AttrType::List(_)) => (Ty::List, false),
                    Some(_) => return Err(format!("fact {f} at {pc} has no stack type")),
                    None => return Err(format!("unknown fact id {f} at {pc}")),
                },
                Instr::LoopVar(i) => {
                    loop_vars = loop_vars.max(i.saturating_add(1));
                    (Ty::Str, false)
                }
                Instr::Class(c) => {
                    self.name_const(c)?;
                    (Ty::Bool, false)
                }
                Instr::Not => {
                    let a = pop(&mut stack)?;
                    expect(a.ty, Ty::Bool, pc)?;
                    (Ty::Bool, a.optional)
                }
                Instr::And | Instr::Or => {
                    let b = pop(&mut stack)?;
                    let a = pop(&mut stack)?;
                    expect(b.ty, Ty::Bool, pc)?;
                    expect(a.ty, Ty::Bool, pc)?;
                    (Ty::Bool, a.optional || b.optional)
                }
                Instr::Eq | Instr::Ne => {
                    let b = pop(&mut stack)?;
                    let a = pop(&mut stack)?;
                    if a.ty != b.ty || a.ty == Ty::List {
                        return Err(format!("comparison of {:?} with {:?} at {pc}", a.ty, b.ty));
                    }
                    (Ty::Bool, a.optional || b.optional)
                }
                Instr::Match(c) => {
                    // Compiled once per constant by `regexes`, below.
                    let Constant::Str(_) = self.constant(c)? else {
                        return Err(format!("regex constant {c} at {pc} is not a string"));
                    };
                    let a = pop(&mut stack)?;
                    expect(a.ty, Ty::Str, pc)?;
                    (Ty::Bool, a.optional)
                }
                Instr::In => {
                    // Any list: a fact, a list constant, a function's result.
                    let list = pop(&mut stack)?;
                    let v = pop(&mut stack)?;
                    expect(list.ty, Ty::List, pc)?;
                    expect(v.ty, Ty::Str, pc)?;
                    (Ty::Bool, list.optional || v.optional)
                }
                Instr::Concat(n) => {
                    if n == 0 || n as usize > stack.len() {
                        return Err(format!("concat of {n} values at {pc}"));
                    }
                    let mut optional = false;
                    for _ in 0..n {
                        let v = pop(&mut stack)?;
                        if v.ty == Ty::List {
                            return Err(format!("concat of a list at {pc}"));
                        }
                        optional |= v.optional;
                    }
                    (Ty::Str, optional)
                }
                Instr::Select => {
                    let b = pop(&mut stack)?;
                    let a = pop(&mut stack)?;
                    let c = pop(&mut stack)?;
                    expect(c.ty, Ty::Bool, pc)?;
                    if a.ty != b.ty {
                        return Err(format!("select between {:?} and {:?} at {pc}", a.ty, b.ty));
                    }
                    (a.ty, c.optional || a.optional || b.optional)
                }
                Instr::Func(f) => {
                    let func = function_by_id(f)
                        .ok_or_else(|| format!("unknown function id {f} at {pc}"))?;
                    if func.arity() > stack.len() {
                        return Err(format!(
                            "stack underflow at {pc}: `{}` takes {} arguments",
                            func.name,
                            func.arity()
                        ));
                    }
                    let args = stack.split_off(stack.len().saturating_sub(func.arity()));
                    let mut optional = func.may_be_missing;
                    for (at, (param, arg)) in func.params.iter().zip(&args).enumerate() {
                        if !param.accepts(arg.ty) {
                            return Err(format!(
                                "`{}` at {pc} takes ({}): argument {} is {:?}",
                                func.name,
                                func.describe_params(),
                                at.saturating_add(1),
                                arg.ty
                            ));
                        }
                        optional |= arg.optional;
                    }
                    (func.result, optional)
                }
                Instr::Coalesce => {
                    let b = pop(&mut stack)?;
                    let a = pop(&mut stack)?;
                    if a.ty != b.ty {
                        return Err(format!("coalesce of {:?} with {:?} at {pc}", a.ty, b.ty));
                    }
                    (a.ty, a.optional && b.optional)
                }
                Instr::Each(q) => {
                    if q as usize >= index {
                        return Err(format!(
                            "each of program {q} at {pc}: only a program of a lower index may be run by each (no recursion)"
                        ));
                    }
                    let info = earlier
                        .get(q as usize)
                        .ok_or_else(|| format!("each of program {q} at {pc}: no such program"))?;
                    if info.result == Ty::List || info.optional {
                        return Err(format!(
                            "each of program {q} at {pc}: it gives {}{:?}, not a scalar that is never missing",
                            if info.optional { "optional " } else { "" },
                            info.result
                        ));
                    }
                    each_depth = each_depth.max(info.each_depth.saturating_add(1));
                    if each_depth as usize > MAX_EACH_DEPTH {
                        return Err(format!(
                            "each at {pc} nests deeper than the limit of {MAX_EACH_DEPTH} levels"
                        ));
                    }
                    elem_need = elem_need.max(info.elem_need.saturating_sub(1));
                    loop_vars = loop_vars.max(info.loop_vars);
                    secret = secret.or(info.secret);
                    let list = pop(&mut stack)?;
                    expect(list.ty, Ty::List, pc)?;
                    (Ty::Str, list.optional)
                }
                Instr::Probe(c) => (
                    self.probe_reads
                        .get(&c)
                        .cloned()
                        .unwrap_or_else(|| Err(format!("probe constant {c}")))
                        .map_err(|e| format!("{e} at {pc}"))?,
                    false,
                ),
                Instr::Lookup(t) => {
                    let ty = self
                        .tables
                        .get(t as usize)
                        .copied()
                        .flatten()
                        .ok_or_else(|| format!("lookup in constant {t} at {pc}, not a table"))?;
                    let key = pop(&mut stack)?;
                    expect(key.ty, Ty::Str, pc)?;
                    (ty, key.optional)
                }
                Instr::Elem(d) => {
                    if d as usize >= MAX_EACH_DEPTH {
                        return Err(format!(
                            "elem {d} at {pc}: more than the limit of {MAX_EACH_DEPTH} levels of each"
                        ));
                    }
                    elem_need = elem_need.max(d.saturating_add(1));
                    (Ty::Str, false)
                }
            };
            stack.push(Slot { ty, optional });
            if stack.len() > MAX_STACK {
                return Err(format!("stack deeper than {MAX_STACK}"));
            }
        }
        match stack.as_slice() {
            [result] => Ok(ProgramInfo {
                result: result.ty,
                optional: result.optional,
                loop_vars,
                elem_need,
                each_depth,
                secret,
            }),
            _ => Err(format!(
                "ends with {} values on the stack, not 1",
                stack.len()
            )),
        }
    }

    fn program_use(
        &self,
        programs: &[ProgramInfo],
        p: u32,
        ty: Ty,
        loops: u32,
    ) -> Result<ProgramInfo, String> {
        let info = *programs
            .get(p as usize)
            .ok_or_else(|| format!("program {p} does not exist"))?;
        if info.result != ty {
            return Err(format!(
                "program {p} gives {:?}, {ty:?} expected",
                info.result
            ));
        }
        if info.optional {
            return Err(format!(
                "program {p} may give a missing value (an index that fails on the host, with no `coalesce`)"
            ));
        }
        if info.elem_need > 0 {
            return Err(format!("program {p} reads `elem` outside any `each`"));
        }
        if info.loop_vars > loops {
            return Err(format!(
                "program {p} reads a loop variable outside any loop"
            ));
        }
        Ok(info)
    }

    fn classes(&self, programs: &[ProgramInfo]) -> Result<(), BundleError> {
        // A class program may only read classes defined before it: that
        // rules out cycles and fixes the evaluation order.
        let mut defined_at: std::collections::HashMap<&str, usize> =
            std::collections::HashMap::new();
        for (i, class) in self.body.classes.iter().enumerate() {
            let name = self
                .name_const(class.name)
                .map_err(|e| corrupt(format!("class {i}: {e}")))?;
            if class.program.is_some() && defined_at.insert(name, i).is_some() {
                return Err(corrupt(format!("class `{name}` is defined twice")));
            }
        }
        let latest = self.latest_class_read(&defined_at).map_err(corrupt)?;
        for (i, class) in self.body.classes.iter().enumerate() {
            let Some(p) = class.program else { continue };
            self.program_use(programs, p, Ty::Bool, 0)
                .map_err(|e| corrupt(format!("class {i}: {e}")))?;
            self.no_secret(programs, Item::Code(p), &"a class definition")
                .map_err(|e| corrupt(format!("class {i}: {e}")))?;
            if let Some(&Some((j, name))) = latest.get(p as usize) {
                if j >= i {
                    return Err(corrupt(format!(
                        "class {i} reads class `{name}`, which is not defined before it"
                    )));
                }
            }
        }
        Ok(())
    }

    /// For each program, the defined class it reads (directly, or through
    /// the programs its `each` runs) whose definition comes last, with that
    /// definition's index: one walk over all the code, in program order.
    fn latest_class_read<'n>(
        &'n self,
        defined_at: &std::collections::HashMap<&'n str, usize>,
    ) -> Result<Vec<Option<(usize, &'n str)>>, String> {
        let mut latest: Vec<Option<(usize, &str)>> = Vec::with_capacity(self.body.programs.len());
        for program in self.body.programs.iter() {
            let mut last: Option<(usize, &str)> = None;
            for instr in program.code.iter() {
                let read = match *instr {
                    Instr::Class(c) => {
                        let name = self.name_const(c)?;
                        defined_at.get(name).map(|&j| (j, name))
                    }
                    Instr::Each(q) => latest.get(q as usize).copied().flatten(),
                    _ => None,
                };
                if read.is_some_and(|(j, _)| last.is_none_or(|(k, _)| j > k)) {
                    last = read;
                }
            }
            latest.push(last);
        }
        Ok(latest)
    }

    /// The secret constant `item` is or pushes, if any.
    fn secret_in(&self, programs: &[ProgramInfo], item: Item) -> Option<u32> {
        match item {
            Item::Const(c) => matches!(self.constant(c), Ok(Constant::Secret(_))).then_some(c),
            Item::Code(p) => programs.get(p as usize).and_then(|info| info.secret),
        }
    }

    /// Refuses `item` as `what` if it reads a secret, naming the secret.
    /// `what` names the item in the error; it is formatted only then (a
    /// `format!` per attribute was a tenth of a converged run's decoding).
    fn no_secret(
        &self,
        programs: &[ProgramInfo],
        item: Item,
        what: &dyn std::fmt::Display,
    ) -> Result<(), String> {
        let Some(c) = self.secret_in(programs, item) else {
            return Ok(());
        };
        let name = match self.constant(c) {
            Ok(Constant::Secret(sealed)) => sealed.name.as_str(),
            _ => "?",
        };
        Err(format!(
            "{what} reads secret {name} (constant {c}), which may only be the content or template of a file or the password of a user"
        ))
    }

    fn item(&self, programs: &[ProgramInfo], item: Item, ty: Ty, loops: u32) -> Result<(), String> {
        match item {
            Item::Const(c) => {
                let actual = self.constant_ty(c)?;
                if actual != ty {
                    return Err(format!("constant {c} is {actual:?}, {ty:?} expected"));
                }
                Ok(())
            }
            Item::Code(p) => self.program_use(programs, p, ty, loops).map(|_| ()),
        }
    }

    fn attr(
        &self,
        programs: &[ProgramInfo],
        ty: &AttrType,
        name: &str,
        value: &Operand,
        loops: u32,
    ) -> Result<(), String> {
        let single = |v: &Operand| match v {
            Operand::Item(item) => Ok(*item),
            Operand::List(_) => Err(format!("`{name}` takes one value, not a list")),
        };
        match ty {
            AttrType::List(inner) => {
                let Operand::List(items) = value else {
                    return Err(format!("`{name}` takes a list"));
                };
                let elem = scalar(inner)
                    .ok_or_else(|| format!("`{name}` cannot be carried in a bundle"))?;
                for item in items.iter() {
                    self.item(programs, *item, elem, loops)?;
                }
                Ok(())
            }
            AttrType::Mode => match single(value)? {
                Item::Const(c) => match self.constant(c)? {
                    Constant::Int(m) if (0..=0o7777).contains(m) => Ok(()),
                    _ => Err(format!("`{name}` is not a mode in 0..0o7777")),
                },
                Item::Code(_) => Err(format!("`{name}` must be known at compile time")),
            },
            AttrType::Duration => match single(value)? {
                Item::Const(c) => match self.constant(c)? {
                    Constant::Duration(_) => Ok(()),
                    _ => Err(format!("`{name}` is not a duration")),
                },
                Item::Code(_) => Err(format!("`{name}` must be known at compile time")),
            },
            AttrType::Enum(words) => match single(value)? {
                Item::Const(c) => match self.constant(c)? {
                    Constant::Word(w) if words.contains(&w.as_str()) => Ok(()),
                    _ => Err(format!("`{name}` is not one of {}", words.join(", "))),
                },
                item @ Item::Code(_) => self.item(programs, item, Ty::Str, loops),
            },
            AttrType::String if crate::schema::EMBEDDED_ATTRS.contains(&name) => {
                match single(value)? {
                    Item::Const(c) => match self.constant(c)? {
                        Constant::Blob(_) | Constant::BlobRef(_) => Ok(()),
                        _ => Err(format!("`{name}` is not an embedded file")),
                    },
                    Item::Code(_) => Err(format!("`{name}` must be embedded")),
                }
            }
            // An outcome class carried as an attribute value (`watch`'s
            // `on_changed`): one constant word that names the class.
            AttrType::Class if crate::schema::CLASS_ATTRIBUTES.contains(&name) => {
                match single(value)? {
                    Item::Const(c) => match self.constant(c)? {
                        Constant::Word(w) if !w.is_empty() => Ok(()),
                        _ => Err(format!("`{name}` does not name a class")),
                    },
                    Item::Code(_) => Err(format!("`{name}` must be known at compile time")),
                }
            }
            // A class a promise sets by its own rule (`on_rewrite`, format
            // 2.4): a constant name, like the `on_*` fields.
            AttrType::Class
                if crate::schema::attr_role(name) != Some(crate::schema::AttrRole::Relation) =>
            {
                match single(value)? {
                    Item::Const(c) => self.name_const(c).map(|_| ()),
                    Item::Code(_) => Err(format!("`{name}` must be a class name")),
                }
            }
            AttrType::Ref | AttrType::Class => {
                Err(format!("`{name}` is not carried as an attribute"))
            }
            other => {
                let ty = scalar(other)
                    .ok_or_else(|| format!("`{name}` cannot be carried in a bundle"))?;
                self.item(programs, single(value)?, ty, loops)
            }
        }
    }

    fn promise(&self, index: usize, p: &Promise, programs: &[ProgramInfo]) -> Result<(), String> {
        let pt = promise_type_by_id(p.kind)
            .ok_or_else(|| format!("unknown promise type id {}", p.kind))?;
        for &f in p.loops().iter() {
            match fact_by_id(f).map(|f| f.ty) {
                Some(AttrType::List(_)) => {}
                Some(_) => return Err(format!("loop over fact {f}, which is not a list")),
                None => return Err(format!("loop over unknown fact id {f}")),
            }
        }
        let loops = u32::try_from(p.loops().len()).map_err(|_| "too many loops".to_owned())?;
        self.item(programs, p.promiser, Ty::Str, loops)?;
        self.no_secret(programs, p.promiser, &"the promiser")?;
        for (at, AttrValue { attr, value }) in p.attrs.iter().enumerate() {
            let spec = pt
                .attr_by_id(*attr)
                .ok_or_else(|| match attribute_by_id(*attr) {
                    Some(other) => format!("`{}` is not an attribute of `{}`", other.name, pt.name),
                    None => format!("unknown attribute id {attr}"),
                })?;
            // Each earlier attribute was a distinct attribute of this type,
            // so this looks at most at the type's attributes, without an
            // allocation per promise.
            let earlier = p.attrs.get(..at).unwrap_or_default();
            if earlier.iter().any(|a| a.attr == *attr) {
                return Err(format!("attribute `{}` appears twice", spec.name));
            }
            self.attr(programs, &spec.ty, spec.name, value, loops)?;
            blob_ref_only_as_file_source(&self.body.constants, pt.name, spec.name, value)?;
            let what = format_args!("attribute `{}`", spec.name);
            match value {
                Operand::Item(item) if !is_secret_sink(p.kind, *attr) => {
                    self.no_secret(programs, *item, &what)?
                }
                Operand::Item(_) => {}
                Operand::List(items) => {
                    for item in items.iter() {
                        self.no_secret(programs, *item, &format_args!("an element of {what}"))?;
                    }
                }
            }
        }
        if let Some(g) = p.guard {
            self.program_use(programs, g, Ty::Bool, loops)?;
            self.no_secret(programs, Item::Code(g), &"the guard")?;
        }
        let n = self.body.promises.len();
        for &other in p.after().iter().chain(p.notify().iter()) {
            if other as usize >= n || other as usize == index {
                return Err(format!("reference to promise {other}"));
            }
        }
        for class in [p.on_repaired(), p.on_kept(), p.on_failed()]
            .into_iter()
            .flatten()
        {
            self.name_const(class)?;
        }
        if p.source as usize >= self.body.sources.len() {
            return Err(format!("source {} does not exist", p.source));
        }
        Ok(())
    }

    /// The order is a permutation of the promises that puts every promise
    /// after the ones it names in `after`.
    fn order(&self) -> Result<(), BundleError> {
        let n = self.body.promises.len();
        if self.body.order.len() != n {
            return Err(corrupt("the order does not list every promise once"));
        }
        let mut position = vec![usize::MAX; n];
        for (at, &p) in self.body.order.iter().enumerate() {
            match position.get_mut(p as usize) {
                Some(slot) if *slot == usize::MAX => *slot = at,
                _ => return Err(corrupt("the order does not list every promise once")),
            }
        }
        for (i, p) in self.body.promises.iter().enumerate() {
            let mine = position.get(i).copied().unwrap_or(usize::MAX);
            for &before in p.after().iter() {
                if position.get(before as usize).copied().unwrap_or(usize::MAX) >= mine {
                    return Err(corrupt(format!(
                        "promise {i} is ordered before promise {before}, which it comes after"
                    )));
                }
            }
        }
        Ok(())
    }
}

fn expect(actual: Ty, wanted: Ty, pc: usize) -> Result<(), String> {
    if actual == wanted {
        Ok(())
    } else {
        Err(format!("{wanted:?} expected at {pc}, found {actual:?}"))
    }
}

/// The stack type of a scalar attribute type.
fn scalar(ty: &AttrType) -> Option<Ty> {
    match ty {
        AttrType::String | AttrType::Enum(_) => Some(Ty::Str),
        AttrType::Int | AttrType::Mode | AttrType::Duration => Some(Ty::Int),
        AttrType::Bool => Some(Ty::Bool),
        AttrType::List(_) | AttrType::Ref | AttrType::Class => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bundle::format::{Bytes, FixedList};

    fn fact(name: &str) -> Instr {
        Instr::Fact(u32::from(crate::schema::fact(name).unwrap().id))
    }

    /// Crafted programs, each with the reason the verifier must give for
    /// refusing it. Every one would otherwise reach the interpreter with a
    /// shape it does not expect, or ask it for unbounded work.
    #[test]
    fn crafted_programs_are_refused_with_their_reason() {
        use Instr::*;
        let constants = vec![
            Constant::Str("text".into()),
            Constant::Str("(unclosed".into()),
            Constant::Blob(Bytes(vec![1, 2, 3])),
            Constant::Int(1),
        ];
        let deep: Vec<Instr> = std::iter::repeat_n(Const(0), MAX_STACK + 1)
            .chain([Concat(MAX_STACK as u32 + 1)])
            .collect();
        let long: Vec<Instr> = std::iter::once(Const(3))
            .chain(std::iter::repeat_n(Not, MAX_CODE))
            .collect();
        let cases: Vec<(Vec<Instr>, &str)> = vec![
            (vec![], "empty program"),
            (long, "more than 65536"),
            (deep, "stack deeper than 256"),
            (vec![Not], "stack underflow at 0"),
            (vec![Const(0), Const(0), And], "Str"),
            (vec![Const(0), Const(3), Eq], "comparison of Str with Int"),
            (
                vec![fact("sys.ipv4"), fact("sys.ipv4"), Eq],
                "comparison of List",
            ),
            (vec![Const(9)], "constant 9"),
            (vec![Const(2)], "is a blob"),
            (
                vec![Instr::Fact(u32::MAX)],
                "unknown fact id 4294967295 at 0",
            ),
            (vec![Instr::Fact(0)], "unknown fact id 0 at 0"),
            (vec![Const(0), Match(1)], "invalid regex"),
            (vec![Const(0), Match(3)], "is not a string"),
            (vec![Const(0), Concat(0)], "concat of 0 values"),
            (vec![fact("sys.ipv4"), Concat(1)], "concat of a list"),
            (vec![Const(0), Const(0)], "ends with 2 values"),
        ];
        for (code, reason) in cases {
            let shown = format!("{:?}", code.get(..4.min(code.len())));
            let body = Body::with_programs(constants.clone(), vec![code]);
            match verify_body(&body) {
                Err(BundleError::Corrupt { reason: got }) => {
                    assert!(got.contains(reason), "{shown}: {got:?} lacks {reason:?}")
                }
                other => panic!("{shown} was not refused: {other:?}"),
            }
        }
    }

    /// A probe declaration for the format 2.3 cases.
    fn probe(name: &str, ty: &str, source: crate::bundle::probe::ProbeSource) -> Constant {
        Constant::Probe(Box::new(crate::bundle::probe::Probe {
            name: name.into(),
            ty: ty.into(),
            source,
            timeout_secs: 5,
        }))
    }

    /// Format 2.3: the probe table and `probe` reads, each crafted case
    /// with the reason it is refused; the well-formed reads are accepted
    /// with their stack types.
    #[test]
    fn crafted_probe_tables_and_reads_are_refused_with_their_reason() {
        use crate::bundle::probe::ProbeSource::{File, Program};
        let program = || Program(vec!["/usr/lib/converge/hw".to_owned()].into());
        let table = vec![
            probe(
                "hw",
                "{cpus:int,tags:map<string>,ips:list<string>}",
                program(),
            ),
            probe("rack", "int", File("/etc/rack".into())),
            Constant::Str("hw.cpus".into()),
            Constant::Str("hw.tags.role".into()),
            Constant::Str("hw.ips".into()),
            Constant::Str("rack".into()),
            Constant::Str("hw".into()),
            Constant::Str("hw.ram".into()),
            Constant::Str("nope".into()),
            Constant::Int(1),
            Constant::Str("hw.tags".into()),
        ];
        // Well-formed: each read has the type of its leaf.
        for (code, ty) in [
            (vec![Instr::Probe(2), Instr::Const(9), Instr::Eq], Ty::Bool),
            (vec![Instr::Probe(3)], Ty::Str),
            (vec![Instr::Probe(4)], Ty::List),
            (vec![Instr::Probe(5)], Ty::Int),
        ] {
            let body = Body::with_programs(table.clone(), vec![code.clone()]);
            assert_eq!(verify_body(&body).map_err(|e| e.to_string()), Ok(()));
            let mut v = Verifier {
                body: &body,
                probe_reads: std::collections::HashMap::new(),
                tables: Vec::new(),
            };
            v.resolve_probe_reads();
            let info = v.program(0, body.programs.get(0).unwrap(), &[]).unwrap();
            assert_eq!(info.result, ty, "{code:?}");
        }
        let read = |c: u32| vec![Instr::Probe(c)];
        let cases: Vec<(Vec<Constant>, Vec<Instr>, &str)> = vec![
            (table.clone(), read(6), "`facts.hw` is a {cpus:int"),
            (table.clone(), read(10), "is a map<string>: only a scalar"),
            (table.clone(), read(7), "the record has no field `ram` at 0"),
            (table.clone(), read(8), "no probe `nope` is declared"),
            (table.clone(), read(9), "probe constant 9 is not a string"),
            (
                table.clone(),
                vec![Instr::Const(0)],
                "is a probe declaration",
            ),
            (
                vec![probe("x", "int", program()), probe("x", "int", program())],
                vec![Instr::Const(0)],
                "the fact `x` is declared twice",
            ),
            (
                vec![probe("x", "float", program())],
                vec![Instr::Const(0)],
                "not a probe type",
            ),
            (
                vec![probe("x", "int", Program(vec!["probe".to_owned()].into()))],
                vec![Instr::Const(0)],
                "it is not absolute",
            ),
            (
                vec![probe("x", "int", File("rel/x".into()))],
                vec![Instr::Const(0)],
                "the file \"rel/x\": it is not absolute",
            ),
            (
                (0..=crate::bundle::probe::MAX_PROBES)
                    .map(|i| probe(&format!("p{i}"), "int", program()))
                    .collect(),
                vec![Instr::Const(0)],
                "more than the limit of 256 probes",
            ),
        ];
        for (constants, code, reason) in cases {
            let body = Body::with_programs(constants, vec![code]);
            match verify_body(&body) {
                Err(BundleError::Corrupt { reason: got }) => {
                    assert!(got.contains(reason), "{got:?} lacks {reason:?}")
                }
                other => panic!("{reason}: not refused: {other:?}"),
            }
        }
        // A timeout past the cap.
        let mut long = table.clone();
        if let Some(Constant::Probe(p)) = long.get_mut(1) {
            p.timeout_secs = crate::bundle::probe::MAX_TIMEOUT_SECS + 1;
        }
        let body = Body::with_programs(long, vec![read(5)]);
        assert!(verify_body(&body)
            .unwrap_err()
            .to_string()
            .contains("a timeout of 61s is outside 1s..=60s"));
    }

    /// Verifies `programs` (with `constants`), where `direct` programs are
    /// used directly as the definitions of classes `c0`, `c1` ...
    fn verify_used(
        constants: Vec<Constant>,
        programs: Vec<Vec<Instr>>,
        direct: &[u32],
    ) -> Result<(), BundleError> {
        use crate::bundle::format::{ClassEntry, List};
        let mut constants = constants;
        let mut classes = Vec::new();
        for (n, &p) in direct.iter().enumerate() {
            classes.push(ClassEntry {
                name: constants.len() as u32,
                program: Some(p),
            });
            constants.push(Constant::Word(format!("c{n}").into()));
        }
        let mut body = Body::with_programs(constants, programs);
        body.classes = List(classes);
        verify_body(&body)
    }

    /// The constants of the format 2.2 cases: 0 a string, 1 a list, 2 an
    /// int, 3 a bool.
    fn constants_2_2() -> Vec<Constant> {
        vec![
            Constant::Str("a".into()),
            Constant::List(vec!["x".to_owned(), "y".to_owned()].into()),
            Constant::Int(1),
            Constant::Bool(true),
        ]
    }

    fn func(name: &str) -> Instr {
        Instr::Func(crate::bundle::functions::function(name).unwrap().id)
    }

    /// Format 2.2: crafted uses of `select`, `func`, `coalesce`, `each`,
    /// `elem` and list constants, each with the reason the verifier must
    /// give. The last program of each case is used as a class definition.
    #[test]
    fn crafted_2_2_programs_are_refused_with_their_reason() {
        use Instr::*;
        let index_a = vec![Const(1), Const(2), func("index")];
        let cases: Vec<(Vec<Vec<Instr>>, &str)> = vec![
            // `each` of itself, and of a later program: recursion.
            (
                vec![vec![Const(1), Each(0), Const(0), Eq]],
                "each of program 0 at 1: only a program of a lower index",
            ),
            (
                vec![vec![Const(1), Each(1), Const(0), Eq], vec![Elem(0)]],
                "each of program 1 at 1: only a program of a lower index",
            ),
            // `elem` with no `each` around it.
            (
                vec![vec![Elem(0), Const(0), Eq]],
                "reads `elem` outside any `each`",
            ),
            // `elem 1` in a body run by only one `each`.
            (
                vec![vec![Elem(1)], vec![Const(1), Each(0), Const(0), Eq]],
                "reads `elem` outside any `each`",
            ),
            (
                vec![vec![Elem(16)]],
                "elem 16 at 0: more than the limit of 16",
            ),
            // An index that may fail, used as a guard without `coalesce`.
            (
                vec![[index_a.clone(), vec![Const(0), Eq]].concat()],
                "may give a missing value",
            ),
            // ... and as the body of `each`.
            (
                vec![index_a.clone(), vec![Const(1), Each(0), Const(0), Eq]],
                "each of program 0 at 1: it gives optional Str",
            ),
            // `each` of a program that gives a list.
            (
                vec![vec![Const(1)], vec![Const(1), Each(0), Const(0), Eq]],
                "it gives List, not a scalar",
            ),
            // `each` of something not a list.
            (
                vec![vec![Elem(0)], vec![Const(0), Each(0), Const(0), Eq]],
                "List expected at 1, found Str",
            ),
            (
                vec![vec![Const(3), Const(0), Const(2), Select, Const(0), Eq]],
                "select between Str and Int at 3",
            ),
            (
                vec![vec![Const(0), Const(0), Const(0), Select, Const(0), Eq]],
                "Bool expected at 3, found Str",
            ),
            (
                vec![vec![Const(0), Const(0), func("join"), Const(0), Eq]],
                "`join` at 2 takes (list, string): argument 1 is Str",
            ),
            (
                vec![vec![Const(1), func("to_string"), Const(0), Eq]],
                "`to_string` at 1 takes (string|int|bool): argument 1 is List",
            ),
            (
                vec![vec![Const(1), func("join")]],
                "stack underflow at 1: `join` takes 2 arguments",
            ),
            (
                vec![vec![Const(0), Func(99)]],
                "unknown function id 99 at 1",
            ),
            (vec![vec![Const(0), Func(0)]], "unknown function id 0 at 1"),
            (
                vec![[index_a.clone(), vec![Const(2), Coalesce]].concat()],
                "coalesce of Str with Int at 4",
            ),
            // A missing operand makes every result optional, up to the end.
            (
                vec![[index_a.clone(), vec![func("upper"), Const(0), Eq, Not]].concat()],
                "may give a missing value",
            ),
            // Both sides of `coalesce` optional: still optional.
            (
                vec![[
                    index_a.clone(),
                    index_a.clone(),
                    vec![Coalesce, Const(0), Eq],
                ]
                .concat()],
                "may give a missing value",
            ),
            // A list constant is a list, nothing else.
            (
                vec![vec![Const(1), Const(0), Eq]],
                "comparison of List with Str",
            ),
            (vec![vec![Const(1), Concat(1)]], "concat of a list"),
        ];
        for (programs, reason) in cases {
            let shown = format!("{programs:?}");
            let last = programs.len() as u32 - 1;
            match verify_used(constants_2_2(), programs, &[last]) {
                Err(BundleError::Corrupt { reason: got }) => {
                    assert!(got.contains(reason), "{shown}: {got:?} lacks {reason:?}")
                }
                other => panic!("{shown} was not refused: {other:?}"),
            }
        }
    }

    /// A class that reads, through the program its `each` runs, a class
    /// defined after it (or itself): the order of evaluation would not hold.
    #[test]
    fn a_class_read_through_each_must_be_defined_before() {
        use Instr::*;
        // Class names: constant 4 is `c0`, 5 is `c1` (see `verify_used`).
        let reading = |class: u32| {
            vec![
                vec![Class(class), func("to_string")],
                vec![Const(1), Each(0), Const(0), Eq],
                vec![Const(3)],
            ]
        };
        // c0 = p1, which reads c1 through p0; c1 = p2.
        let err = verify_used(constants_2_2(), reading(5), &[1, 2]).unwrap_err();
        assert!(
            err.to_string()
                .contains("class 0 reads class `c1`, which is not defined before it"),
            "{err}"
        );
        // c1 = p1 reads itself through p0.
        let err = verify_used(constants_2_2(), reading(5), &[2, 1]).unwrap_err();
        assert!(
            err.to_string().contains("class 1 reads class `c1`"),
            "{err}"
        );
        // c1 = p1 reads c0, defined before it: fine.
        verify_used(constants_2_2(), reading(4), &[2, 1]).unwrap();
    }

    /// One level of `each` past [`MAX_EACH_DEPTH`], and a list constant one
    /// element past [`MAX_CONST_LIST`], are refused with the limit.
    #[test]
    fn each_nesting_and_list_constants_past_their_limits_are_refused() {
        use Instr::*;
        let mut programs = vec![vec![Elem(0)]];
        for k in 0..=MAX_EACH_DEPTH as u32 {
            programs.push(vec![Const(1), Each(k)]);
        }
        let err = verify_used(constants_2_2(), programs, &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("program 17: each at 1 nests deeper than the limit of 16 levels"),
            "{err}"
        );
        let mut constants = constants_2_2();
        constants.push(Constant::List(
            vec![String::new(); MAX_CONST_LIST + 1].into(),
        ));
        let err = verify_used(constants, vec![vec![Const(4)]], &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("constant 4: a list of 65537 elements, more than the limit of 65536"),
            "{err}"
        );
    }

    /// The format 2.2 programs just inside every rule and limit: `each`
    /// nested 16 deep with `elem 15` at the bottom, `select` of lists, every
    /// function with arguments of its types, `coalesce` of a missing index,
    /// `in` over a list constant, and a list constant of the largest size.
    #[test]
    fn programs_2_2_at_the_limits_are_accepted() {
        use crate::bundle::functions::FUNCTIONS;
        use Instr::*;
        let biggest = Constant::List(vec![String::new(); MAX_CONST_LIST].into());
        let mut constants = constants_2_2();
        constants.push(biggest);
        // p0 reads the element of the outermost of 16 levels; each p(k+1)
        // runs p(k); p16 is used directly.
        let mut programs = vec![vec![Elem(15), Elem(0), Concat(2)]];
        for k in 0..16u32 {
            programs.push(vec![Const(1), Each(k)]);
        }
        let nested = programs.len() as u32 - 1;
        programs.push(vec![Const(nested), Const(0), Eq]);
        let mut direct = vec![programs.len() as u32 - 1];
        // Every function, applied to arguments of its parameter types.
        for f in FUNCTIONS {
            let mut code: Vec<Instr> = f
                .params
                .iter()
                .map(|p| match p {
                    crate::bundle::functions::Param::Is(Ty::List) => Const(1),
                    crate::bundle::functions::Param::Is(Ty::Int) => Const(2),
                    crate::bundle::functions::Param::Is(Ty::Bool) => Const(3),
                    _ => Const(0),
                })
                .collect();
            code.push(Func(f.id));
            let fallback = match f.result {
                Ty::Str => Const(0),
                Ty::List => Const(1),
                Ty::Int => Const(2),
                Ty::Bool => Const(3),
            };
            code.extend([fallback, Coalesce]);
            code.extend(match f.result {
                Ty::List => vec![Const(0), func("contains_list")],
                Ty::Bool => vec![],
                _ => vec![fallback, Eq],
            });
            direct.push(programs.len() as u32);
            programs.push(code);
        }
        // `select` of two lists, then `in` over the result; the biggest list.
        direct.push(programs.len() as u32);
        programs.push(vec![Const(0), Const(3), Const(1), Const(4), Select, In]);
        // `coalesce` of a value that is never missing is just that value.
        direct.push(programs.len() as u32);
        programs.push(vec![Const(3), Const(3), Coalesce]);
        verify_used(constants, programs, &direct).unwrap();
    }

    #[test]
    fn programs_at_the_limits_are_accepted() {
        use Instr::*;
        let deepest: Vec<Instr> = std::iter::repeat_n(Const(0), MAX_STACK)
            .chain([Concat(MAX_STACK as u32)])
            .collect();
        let longest: Vec<Instr> = std::iter::once(Const(1))
            .chain(std::iter::repeat_n(Not, MAX_CODE - 1))
            .collect();
        let body = Body::with_programs(
            vec![Constant::Str("text".into()), Constant::Bool(true)],
            vec![deepest, longest],
        );
        verify_body(&body).unwrap();
    }

    /// A table of kind `kind` with `(key, value text)` entries exactly as
    /// given (unsorted if so), and a default.
    fn table_of(kind: u8, entries: &[(&str, &str)], default: Option<&str>) -> Constant {
        use crate::bundle::format::{List, Table, TableEnd};
        let mut t = Table {
            kind,
            keys: String::new(),
            values: String::new(),
            ends: List(Vec::new()),
            default: default.map(str::to_owned),
        };
        for (k, v) in entries {
            t.keys.push_str(k);
            t.values.push_str(v);
            t.ends.0.push(TableEnd {
                key: t.keys.len() as u32,
                value: t.values.len() as u32,
            });
        }
        Constant::Table(Box::new(t))
    }

    fn table(entries: &[(&str, &str)], default: Option<&str>) -> Constant {
        table_of(crate::ids::constant_kind::STR, entries, default)
    }

    /// Format 2.3: tables and `lookup`. Constants 0-3 as in
    /// [`constants_2_2`]; the table under test is 4.
    fn verify_table(t: Constant, code: Vec<Instr>) -> Result<(), BundleError> {
        let mut constants = constants_2_2();
        constants.push(t);
        verify_used(constants, vec![code], &[0])
    }

    #[test]
    fn bad_tables_and_lookups_are_refused_with_their_reason() {
        use crate::bundle::format::TableEnd;
        use crate::ids::constant_kind::{BLOB, BOOL, INT};
        use Instr::*;
        let host = fact("sys.hostname");
        let as_bool = || vec![fact("sys.hostname"), Lookup(4), Const(0), Eq];
        let cut = |mut t: Constant, ends: Vec<(u32, u32)>| {
            if let Constant::Table(table) = &mut t {
                table.ends.0 = ends
                    .into_iter()
                    .map(|(key, value)| TableEnd { key, value })
                    .collect();
            }
            t
        };
        let cases: Vec<(Constant, Vec<Instr>, &str)> = vec![
            (
                table(&[("b", "x"), ("a", "x")], None),
                as_bool(),
                "constant 4: table keys are not sorted and unique: \"a\" after \"b\"",
            ),
            (
                table(&[("a", "x"), ("a", "y")], None),
                as_bool(),
                "keys are not sorted and unique: \"a\" after \"a\"",
            ),
            (
                table_of(BLOB, &[("a", "x")], None),
                as_bool(),
                "values of constant kind 6, not str, int or bool",
            ),
            (
                table_of(INT, &[("a", "80"), ("b", "08")], None),
                as_bool(),
                "value \"08\" of \"b\" is not int",
            ),
            (
                table_of(INT, &[("a", "80")], Some("x")),
                as_bool(),
                "default \"x\" is not int",
            ),
            (
                table_of(BOOL, &[("a", "yes")], None),
                as_bool(),
                "value \"yes\" of \"a\" is not bool",
            ),
            (table(&[], None), as_bool(), "has no entries and no default"),
            // Ends that run past the text, go backwards, cut a character,
            // or leave text after the last entry.
            (
                cut(table(&[("ab", "x")], None), vec![(3, 1)]),
                as_bool(),
                "entry 0 ends outside its text or inside a character",
            ),
            (
                cut(table(&[("ab", "xy")], None), vec![(2, 2), (1, 2)]),
                as_bool(),
                "entry 1 ends outside its text",
            ),
            (
                cut(table(&[("é", "x")], None), vec![(1, 1)]),
                as_bool(),
                "entry 0 ends outside its text or inside a character",
            ),
            (
                cut(table(&[("ab", "xy")], None), vec![(1, 1)]),
                as_bool(),
                "has text after its last entry",
            ),
            // `lookup` of something that is not a table, of a missing
            // constant, with no key, with a key that is not a string.
            (
                table(&[("a", "x")], None),
                vec![host, Lookup(0), Const(0), Eq],
                "lookup in constant 0 at 1, not a table",
            ),
            (
                table(&[("a", "x")], None),
                vec![host, Lookup(70), Const(0), Eq],
                "lookup in constant 70 at 1, not a table",
            ),
            (
                table(&[("a", "x")], None),
                vec![Lookup(4)],
                "stack underflow at 0",
            ),
            (
                table(&[("a", "x")], None),
                vec![Const(2), Lookup(4), Const(0), Eq],
                "Str expected at 1, found Int",
            ),
            // The value's type is the table's: a string is not a guard.
            (
                table(&[("a", "x")], None),
                vec![host, Lookup(4)],
                "gives Str, Bool expected",
            ),
            // A table is never pushed whole.
            (
                table(&[("a", "x")], None),
                vec![Const(4)],
                "constant 4 is a table",
            ),
        ];
        for (t, code, reason) in cases {
            let shown = format!("{t:?} {code:?}");
            match verify_table(t, code) {
                Err(BundleError::Corrupt { reason: got }) => {
                    assert!(got.contains(reason), "{shown}: {got:?} lacks {reason:?}")
                }
                other => panic!("{shown} was not refused: {other:?}"),
            }
        }
        // Too many entries: the limit of list constants.
        let keys: Vec<String> = (0..=MAX_CONST_LIST).map(|i| format!("{i:08}")).collect();
        let entries: Vec<(&str, &str)> = keys.iter().map(|k| (k.as_str(), "")).collect();
        match verify_table(table(&entries, None), as_bool()) {
            Err(BundleError::Corrupt { reason }) => assert!(
                reason.contains("a table of 65537 elements, more than the limit of 65536"),
                "{reason}"
            ),
            other => panic!("an oversized table was not refused: {other:?}"),
        }
    }

    #[test]
    fn good_tables_and_lookups_are_accepted() {
        use crate::ids::constant_kind::{BOOL, INT};
        use Instr::*;
        let host = fact("sys.hostname");
        // Strings (empty ones too), an int default, bool values, a default
        // alone; an optional key (an index) gives an optional value.
        let ok: Vec<(Constant, Vec<Instr>)> = vec![
            (
                table(&[("a", ""), ("b", "w")], Some("")),
                vec![host, Lookup(4), Const(0), Eq],
            ),
            (
                table_of(INT, &[("a", "-3")], Some("0")),
                vec![host, Lookup(4), Const(2), Eq],
            ),
            (
                table_of(BOOL, &[("a", "true"), ("ab", "false")], None),
                vec![host, Lookup(4)],
            ),
            (table_of(BOOL, &[], Some("true")), vec![host, Lookup(4)]),
            (
                table_of(BOOL, &[("x", "true")], None),
                vec![
                    Const(1),
                    Const(2),
                    func("index"),
                    Lookup(4),
                    Const(3),
                    Coalesce,
                ],
            ),
        ];
        for (t, code) in ok {
            let shown = format!("{t:?} {code:?}");
            verify_table(t, code).unwrap_or_else(|e| panic!("{shown}: {e}"));
        }
        // Without the coalesce, the optional key makes the guard optional.
        let optional = verify_table(
            table_of(BOOL, &[("x", "true")], None),
            vec![Const(1), Const(2), func("index"), Lookup(4)],
        );
        assert!(
            matches!(&optional, Err(BundleError::Corrupt { reason }) if reason.contains("may give a missing value")),
            "{optional:?}"
        );
    }

    /// `Table::get` finds every key by binary search, and the default for
    /// keys before, between and after them.
    #[test]
    fn table_get_finds_every_key() {
        use crate::bundle::format::Table;
        let keys: Vec<String> = (0..100).map(|i| format!("k{:03}", i * 2)).collect();
        let t = Table::new(
            crate::ids::constant_kind::STR,
            keys.iter()
                .rev()
                .map(|k| (k.clone(), format!("v{k}")))
                .collect(),
            Some("none".into()),
        );
        for k in &keys {
            assert_eq!(t.get(k), Some(format!("v{k}").as_str()));
        }
        for other in ["", "a", "k001", "k199", "z"] {
            assert_eq!(t.get(other), Some("none"));
        }
        let Constant::Table(bare) = table(&[("a", "1")], None) else {
            unreachable!()
        };
        assert_eq!(bare.get("b"), None);
    }

    /// A promise of type `kind` with the given attributes (by name), a
    /// promiser and a guard, for the secret sink cases.
    fn promise_of(
        kind: &str,
        promiser: Item,
        attrs: &[(&str, Operand)],
        guard: Option<u32>,
    ) -> Promise {
        use super::super::format::FixedList;
        let pt = promise_type(kind).unwrap();
        Promise::from(crate::bundle::format::PromiseParts {
            attrs: FixedList::from(
                attrs
                    .iter()
                    .map(|(name, value)| AttrValue {
                        attr: pt.all_attrs().find(|a| a.name == *name).unwrap().id,
                        value: value.clone(),
                    })
                    .collect::<Vec<_>>(),
            ),
            guard,
            ..crate::bundle::format::PromiseParts::new(pt.id, promiser)
        })
    }

    /// Format 2.4, defence in depth: a secret (pushed by a program, through
    /// `each`, or named directly) may only be the content or template of a
    /// file or the password of a user; as a guard, a class, a promiser,
    /// another attribute or a list element it is refused, naming it.
    #[test]
    fn a_secret_is_refused_anywhere_but_file_content_and_user_password() {
        use super::super::format::{Bytes, ClassEntry, List, Sealed, SealedSet, SourceLoc};
        use Instr::{Concat, Const, Each, Elem, Eq};
        let age = |rest: &[u8]| Bytes([AGE_VERSION_LINE, rest].concat());
        let constants = vec![
            Constant::SealedSet(Box::new(SealedSet {
                ciphertext: age(b"k"),
            })),
            Constant::Secret(Box::new(Sealed {
                name: "db_password".into(),
                set: 0,
                index: 0,
            })),
            Constant::Str("/etc/app.conf".into()),
            Constant::Str("password=".into()),
            Constant::List(List(vec!["a".into(), "b".into()])),
            Constant::Str("app".into()),
            Constant::Word("dbhost".into()),
        ];
        let programs = vec![
            // 0: "password=" + secret
            vec![Const(3), Const(1), Concat(2)],
            // 1: elem + secret, run by each in 2
            vec![Elem(0), Const(1), Concat(2)],
            // 2: each over a list: reads the secret through program 1
            vec![Const(4), Each(1)],
            // 3: secret == "x": a bool computed from a secret
            vec![Const(1), Const(3), Eq],
            // 4: a plain string
            vec![Const(2)],
        ];
        let body_with = |promises: Vec<Promise>, classes: Vec<ClassEntry>| {
            let mut body = Body::with_programs(constants.clone(), programs.clone());
            body.order = List((0..promises.len() as u32).collect());
            body.promises = List(promises);
            body.classes = List(classes);
            body.sources = List(vec![SourceLoc { file: 2, line: 1 }]);
            body
        };
        let file =
            |attrs: &[(&str, Operand)], guard| promise_of("file", Item::Const(2), attrs, guard);
        let code = |p| Operand::Item(Item::Code(p));
        let secret = Operand::Item(Item::Const(1));
        // Accepted: each sink, by program, through each, and directly.
        for p in [
            file(&[("content", code(0))], None),
            file(&[("content", code(2))], None),
            file(&[("template", code(0))], None),
            file(&[("content", secret.clone())], None),
            file(&[("content", code(4))], None),
            promise_of(
                "user",
                Item::Const(5),
                &[("password", secret.clone())],
                None,
            ),
            promise_of("user", Item::Const(5), &[("password", code(0))], None),
        ] {
            let body = body_with(vec![p.clone()], Vec::new());
            assert_eq!(
                verify_body(&body).map_err(|e| e.to_string()),
                Ok(()),
                "{p:?}"
            );
        }
        let refused: Vec<(Vec<Promise>, Vec<ClassEntry>, &str)> = vec![
            (
                vec![file(&[("content", code(4))], Some(3))],
                Vec::new(),
                "promise 0: the guard reads secret db_password (constant 1)",
            ),
            (
                vec![promise_of("file", Item::Code(0), &[], None)],
                Vec::new(),
                "promise 0: the promiser reads secret db_password (constant 1)",
            ),
            (
                vec![promise_of("file", Item::Const(1), &[], None)],
                Vec::new(),
                "the promiser reads secret db_password",
            ),
            (
                vec![file(&[("owner", code(0))], None)],
                Vec::new(),
                "attribute `owner` reads secret db_password",
            ),
            (
                vec![file(&[("owner", code(2))], None)],
                Vec::new(),
                "attribute `owner` reads secret db_password",
            ),
            (
                vec![promise_of(
                    "user",
                    Item::Const(5),
                    &[("comment", secret.clone())],
                    None,
                )],
                Vec::new(),
                "attribute `comment` reads secret db_password",
            ),
            (
                vec![promise_of(
                    "report",
                    Item::Const(5),
                    &[("message", code(0))],
                    None,
                )],
                Vec::new(),
                "attribute `message` reads secret db_password",
            ),
            (
                vec![promise_of(
                    "command",
                    Item::Const(2),
                    &[("run", Operand::List(FixedList::from(vec![Item::Code(0)])))],
                    None,
                )],
                Vec::new(),
                "an element of attribute `run` reads secret db_password",
            ),
            (
                vec![file(&[("content", code(4))], None)],
                vec![ClassEntry {
                    name: 6,
                    program: Some(3),
                }],
                "class 0: a class definition reads secret db_password",
            ),
        ];
        for (promises, classes, reason) in refused {
            let shown = format!("{promises:?}");
            match verify_body(&body_with(promises, classes)) {
                Err(BundleError::Corrupt { reason: got }) => {
                    assert!(got.contains(reason), "{shown}: {got:?} lacks {reason:?}")
                }
                other => panic!("{shown} was not refused: {other:?}"),
            }
        }
    }

    #[test]
    fn secret_sinks_are_file_content_and_template_and_user_password() {
        let id = |kind: &str, attr: &str| {
            let pt = promise_type(kind).unwrap();
            (pt.id, pt.all_attrs().find(|a| a.name == attr).unwrap().id)
        };
        for (kind, attr, sink) in [
            ("file", "content", true),
            ("file", "template", true),
            ("user", "password", true),
            ("file", "owner", false),
            ("file", "source", false),
            ("user", "comment", false),
            ("command", "run", false),
        ] {
            let (k, a) = id(kind, attr);
            assert_eq!(is_secret_sink(k, a), sink, "{kind}.{attr}");
        }
        assert!(!is_secret_sink(u16::MAX, u16::MAX));
    }
}
