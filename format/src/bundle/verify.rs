//! Structural verification of a decoded body, before anything runs: every
//! index in range, every program's stack effect and types consistent and
//! bounded, every value of the type its attribute expects, the order a
//! permutation that respects `after`, class definitions free of cycles.
//! After this, the interpreter can trust the body's shape.

use super::error::BundleError;
use super::format::{AttrValue, Body, Constant, Item, Operand, Program, Promise};
use super::instr::Instr;
use super::limits::{RegexCache, MAX_LOOP_DEPTH, MAX_PROMISES};
use crate::schema::{attribute_by_id, fact_by_id, promise_type, promise_type_by_id, AttrType};

/// The longest program accepted.
pub const MAX_CODE: usize = 1 << 16;
/// The deepest value stack a program may need.
pub const MAX_STACK: usize = 256;
/// The largest pass limit accepted.
pub const MAX_PASS_LIMIT: u32 = 1000;

/// The type of a value on the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ty {
    Bool,
    Str,
    Int,
    List,
}

/// What verifying a program on its own establishes.
#[derive(Clone, Copy, Debug)]
struct ProgramInfo {
    result: Ty,
    /// One more than the highest `loopvar` index used (0 if none).
    loop_vars: u32,
    /// Whether it reads classes.
    reads_classes: bool,
}

fn corrupt(reason: impl Into<String>) -> BundleError {
    BundleError::Corrupt {
        reason: reason.into(),
    }
}

pub fn verify_body(body: &Body) -> Result<(), BundleError> {
    let v = Verifier { body };
    v.header()?;
    static_limits(body)?;
    let programs: Vec<ProgramInfo> = body
        .programs
        .iter()
        .enumerate()
        .map(|(i, p)| {
            v.program(p)
                .map_err(|e| corrupt(format!("program {i}: {e}")))
        })
        .collect::<Result<_, _>>()?;
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
    for (i, p) in body.promises.iter().enumerate() {
        if p.loops.len() > MAX_LOOP_DEPTH {
            return Err(corrupt(format!(
                "promise {i}: {} nested run-time loops, more than the limit of {MAX_LOOP_DEPTH}",
                p.loops.len()
            )));
        }
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

struct Verifier<'b> {
    body: &'b Body,
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

    fn program(&self, p: &Program) -> Result<ProgramInfo, String> {
        if p.code.is_empty() {
            return Err("empty program".to_owned());
        }
        if p.code.len() > MAX_CODE {
            return Err(format!(
                "{} instructions, more than {MAX_CODE}",
                p.code.len()
            ));
        }
        let mut stack: Vec<Ty> = Vec::new();
        let mut loop_vars = 0u32;
        let mut reads_classes = false;
        for (pc, instr) in p.code.iter().enumerate() {
            let pop = |stack: &mut Vec<Ty>| stack.pop().ok_or(format!("stack underflow at {pc}"));
            let push = match *instr {
                Instr::Const(c) => match self.constant(c)? {
                    Constant::Str(_) | Constant::Word(_) => Ty::Str,
                    Constant::Int(_) | Constant::Duration(_) => Ty::Int,
                    Constant::Bool(_) => Ty::Bool,
                    Constant::Blob(_) => return Err(format!("constant {c} at {pc} is a blob")),
                },
                Instr::Fact(f) => match fact_by_id(f).map(|f| f.ty) {
                    Some(AttrType::String) => Ty::Str,
                    Some(AttrType::Int) => Ty::Int,
                    Some(AttrType::List(_)) => Ty::List,
                    Some(_) => return Err(format!("fact {f} at {pc} has no stack type")),
                    None => return Err(format!("unknown fact id {f} at {pc}")),
                },
                Instr::LoopVar(i) => {
                    loop_vars = loop_vars.max(i.saturating_add(1));
                    Ty::Str
                }
                Instr::Class(c) => {
                    self.name_const(c)?;
                    reads_classes = true;
                    Ty::Bool
                }
                Instr::Not => {
                    expect(pop(&mut stack)?, Ty::Bool, pc)?;
                    Ty::Bool
                }
                Instr::And | Instr::Or => {
                    expect(pop(&mut stack)?, Ty::Bool, pc)?;
                    expect(pop(&mut stack)?, Ty::Bool, pc)?;
                    Ty::Bool
                }
                Instr::Eq | Instr::Ne => {
                    let b = pop(&mut stack)?;
                    let a = pop(&mut stack)?;
                    if a != b || a == Ty::List {
                        return Err(format!("comparison of {a:?} with {b:?} at {pc}"));
                    }
                    Ty::Bool
                }
                Instr::Match(c) => {
                    // Compiled once per constant by `regexes`, below.
                    let Constant::Str(_) = self.constant(c)? else {
                        return Err(format!("regex constant {c} at {pc} is not a string"));
                    };
                    expect(pop(&mut stack)?, Ty::Str, pc)?;
                    Ty::Bool
                }
                Instr::In => {
                    expect(pop(&mut stack)?, Ty::List, pc)?;
                    expect(pop(&mut stack)?, Ty::Str, pc)?;
                    Ty::Bool
                }
                Instr::Concat(n) => {
                    if n == 0 || n as usize > stack.len() {
                        return Err(format!("concat of {n} values at {pc}"));
                    }
                    for _ in 0..n {
                        if pop(&mut stack)? == Ty::List {
                            return Err(format!("concat of a list at {pc}"));
                        }
                    }
                    Ty::Str
                }
            };
            stack.push(push);
            if stack.len() > MAX_STACK {
                return Err(format!("stack deeper than {MAX_STACK}"));
            }
        }
        match stack.as_slice() {
            [result] => Ok(ProgramInfo {
                result: *result,
                loop_vars,
                reads_classes,
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
        for (i, class) in self.body.classes.iter().enumerate() {
            let Some(p) = class.program else { continue };
            let info = self
                .program_use(programs, p, Ty::Bool, 0)
                .map_err(|e| corrupt(format!("class {i}: {e}")))?;
            if !info.reads_classes {
                continue;
            }
            let code = self.body.programs.get(p as usize).map(|p| &p.code);
            for instr in code.into_iter().flat_map(|c| c.iter()) {
                if let Instr::Class(c) = instr {
                    let name = self.name_const(*c).map_err(corrupt)?;
                    if defined_at.get(name).is_some_and(|&j| j >= i) {
                        return Err(corrupt(format!(
                            "class {i} reads class `{name}`, which is not defined before it"
                        )));
                    }
                }
            }
        }
        Ok(())
    }

    fn item(&self, programs: &[ProgramInfo], item: Item, ty: Ty, loops: u32) -> Result<(), String> {
        match item {
            Item::Const(c) => {
                let actual = match self.constant(c)? {
                    Constant::Str(_) | Constant::Word(_) => Ty::Str,
                    Constant::Int(_) | Constant::Duration(_) => Ty::Int,
                    Constant::Bool(_) => Ty::Bool,
                    Constant::Blob(_) => return Err(format!("constant {c} is a blob")),
                };
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
            AttrType::String if name == "source" => match single(value)? {
                Item::Const(c) => match self.constant(c)? {
                    Constant::Blob(_) => Ok(()),
                    _ => Err("`source` is not an embedded file".to_owned()),
                },
                Item::Code(_) => Err("`source` must be embedded".to_owned()),
            },
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
        for &f in p.loops.iter() {
            match fact_by_id(f).map(|f| f.ty) {
                Some(AttrType::List(_)) => {}
                Some(_) => return Err(format!("loop over fact {f}, which is not a list")),
                None => return Err(format!("loop over unknown fact id {f}")),
            }
        }
        let loops = u32::try_from(p.loops.len()).map_err(|_| "too many loops".to_owned())?;
        self.item(programs, p.promiser, Ty::Str, loops)?;
        let mut seen: Vec<u16> = Vec::with_capacity(p.attrs.len());
        for AttrValue { attr, value } in p.attrs.iter() {
            let spec = pt
                .attr_by_id(*attr)
                .ok_or_else(|| match attribute_by_id(*attr) {
                    Some(other) => format!("`{}` is not an attribute of `{}`", other.name, pt.name),
                    None => format!("unknown attribute id {attr}"),
                })?;
            if seen.contains(attr) {
                return Err(format!("attribute `{}` appears twice", spec.name));
            }
            seen.push(*attr);
            self.attr(programs, &spec.ty, spec.name, value, loops)?;
        }
        if let Some(g) = p.guard {
            self.program_use(programs, g, Ty::Bool, loops)?;
        }
        let n = self.body.promises.len();
        for &other in p.after.iter().chain(p.notify.iter()) {
            if other as usize >= n || other as usize == index {
                return Err(format!("reference to promise {other}"));
            }
        }
        for class in [p.on_repaired, p.on_kept, p.on_failed]
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
            for &before in p.after.iter() {
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
    use crate::bundle::format::Bytes;

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
}
