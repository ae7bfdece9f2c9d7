//! Writing the values of a merged lookup (`bundle::merge`): each value
//! that differs between the instances becomes `<key>; lookup t` over a
//! table constant from every key to its instance's constant, the default
//! instance's constant as the table's default (format 2.3).

use converge_format::bundle::format::{Constant, FixedList, Item, Operand, Table};
use converge_format::bundle::instr::Instr;
use converge_format::ids::constant_kind;

use super::{constant_of, Lowerer};
use crate::bundle::merge::{self, list_item, Joint, Leaf, Merge};
use crate::ir::{self, TemplatePart, Value};

impl Lowerer<'_> {
    /// Attribute `j` of the members of `m`, which differs as `joint` says.
    pub(super) fn joint_operand(
        &mut self,
        m: &Merge,
        program: &ir::Program,
        j: usize,
        joint: &Joint,
        loops: &[ir::RuntimeLoop],
    ) -> Operand {
        let values: Vec<&Value> = m
            .members
            .iter()
            .filter_map(|&i| program.promises.get(i))
            .filter_map(|p| p.attrs.get(j).map(|a| &a.value))
            .collect();
        match joint {
            Joint::List(items) => Operand::List(FixedList::from(
                items
                    .iter()
                    .enumerate()
                    .map(|(k, joint)| {
                        let column: Vec<&Value> =
                            values.iter().filter_map(|v| list_item(v, k)).collect();
                        self.joint_item(m, &column, joint.as_ref(), loops)
                    })
                    .collect::<Vec<_>>(),
            )),
            other => Operand::Item(self.joint_item(m, &values, Some(other), loops)),
        }
    }

    /// One value per member (in member order) as one item.
    fn joint_item(
        &mut self,
        m: &Merge,
        values: &[&Value],
        joint: Option<&Joint>,
        loops: &[ir::RuntimeLoop],
    ) -> Item {
        if values.len() != m.members.len() {
            self.internal("a merged lookup lost one of its values".to_owned());
        }
        let mut code = Vec::new();
        match joint {
            None => match values.first() {
                Some(v) => return self.item(v, loops),
                None => self.internal("a merged lookup has no instance".to_owned()),
            },
            Some(Joint::Scalar) => {
                let constants = values.iter().map(|v| constant_of(v)).collect();
                let pushed = self.lookup(m, constants, loops, &mut code);
                if pushed > 1 {
                    code.push(Instr::Concat(pushed));
                }
            }
            Some(Joint::Template(differs)) => {
                let parts: Vec<&[TemplatePart]> = values
                    .iter()
                    .filter_map(|v| match v {
                        Value::Template(parts) => Some(parts.as_slice()),
                        _ => None,
                    })
                    .collect();
                let mut pushed = 0u32;
                for (k, &differs) in differs.iter().enumerate() {
                    pushed = pushed.saturating_add(1);
                    let column: Vec<Option<&TemplatePart>> =
                        parts.iter().map(|p| p.get(k)).collect();
                    match column.first().copied().flatten() {
                        Some(_) if differs => {
                            let constants = column
                                .iter()
                                .map(|part| match part {
                                    Some(TemplatePart::Lit(text)) => {
                                        Some(Constant::Str(text.clone().into()))
                                    }
                                    _ => None,
                                })
                                .collect();
                            let n = self.lookup(m, constants, loops, &mut code);
                            pushed = pushed.saturating_add(n).saturating_sub(1);
                        }
                        Some(TemplatePart::Lit(text)) => {
                            let c = self.constant(Constant::Str(text.clone().into()));
                            code.push(Instr::Const(c));
                        }
                        Some(TemplatePart::Fact(name)) => {
                            self.scalar(&Value::Fact(name.clone()), loops, &mut code)
                        }
                        Some(TemplatePart::LoopVar(var)) => {
                            self.scalar(&Value::LoopVar(var.clone()), loops, &mut code)
                        }
                        Some(TemplatePart::Host(v)) => self.scalar(v, loops, &mut code),
                        None => self.internal("a merged template lost a part".to_owned()),
                    }
                }
                code.push(Instr::Concat(pushed.max(1)));
            }
            Some(Joint::Deep) => {
                // Member 0's value is lowered as usual, but at each place
                // where the members differ the lookup is written instead
                // (by the address of member 0's node there).
                let mut leaves = Vec::new();
                if !merge::leaves(values, &mut leaves) {
                    self.internal("a merged lookup's values lost their shape".to_owned());
                }
                for leaf in leaves {
                    let mut snippet = Vec::new();
                    match leaf {
                        Leaf::Value(vs) => {
                            let constants = vs.iter().map(|v| constant_of(v)).collect();
                            self.table_lookup(m, constants, loops, &mut snippet);
                            if let Some(v) = vs.first() {
                                self.overrides.values.insert(address(*v), snippet);
                            }
                        }
                        Leaf::Lit(parts) => {
                            let constants = parts
                                .iter()
                                .map(|p| match p {
                                    TemplatePart::Lit(text) => {
                                        Some(Constant::Str(text.clone().into()))
                                    }
                                    _ => None,
                                })
                                .collect();
                            self.table_lookup(m, constants, loops, &mut snippet);
                            if let Some(p) = parts.first() {
                                self.overrides.lits.insert(address(*p), snippet);
                            }
                        }
                    }
                }
                if let Some(v) = values.first() {
                    self.scalar(v, loops, &mut code);
                }
                self.overrides = Overrides::default();
            }
            Some(Joint::List(_)) => self.internal("a list inside a list attribute".to_owned()),
        }
        Item::Code(self.program(code))
    }

    /// Pushes `<key>; lookup t`, `t` the table from each member's keys to
    /// its constant (the default member's as the default), and returns how
    /// many values it pushed: strings that all begin or end alike (a
    /// rendered file per host) keep only what differs in the table, and
    /// the common text around it is pushed once, as constants, for the
    /// caller to `concat` (a bundle of 10,000 hosts carries each host's
    /// part of the file, not the whole file 10,000 times).
    fn lookup(
        &mut self,
        m: &Merge,
        constants: Vec<Option<Constant>>,
        loops: &[ir::RuntimeLoop],
        code: &mut Vec<Instr>,
    ) -> u32 {
        let texts: Option<Vec<&str>> = constants
            .iter()
            .map(|c| match c {
                Some(Constant::Str(s)) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        let (prefix, suffix) = match texts.as_deref().map(common_ends) {
            Some((p, s)) if p + s >= MIN_COMMON_ENDS => (p, s),
            _ => (0, 0),
        };
        let ends = texts
            .as_deref()
            .and_then(|t| t.first())
            .map(|first| {
                (
                    first.get(..prefix).unwrap_or_default().to_owned(),
                    first
                        .get(first.len().saturating_sub(suffix)..)
                        .unwrap_or_default()
                        .to_owned(),
                )
            })
            .unwrap_or_default();
        let constants: Vec<Option<Constant>> = if prefix + suffix == 0 {
            constants
        } else {
            constants
                .into_iter()
                .map(|c| match c {
                    Some(Constant::Str(s)) => s
                        .get(prefix..s.len().saturating_sub(suffix))
                        .map(|middle| Constant::Str(middle.to_owned().into())),
                    other => other,
                })
                .collect()
        };
        let mut pushed = 1;
        if !ends.0.is_empty() {
            let c = self.constant(Constant::Str(ends.0.into()));
            code.push(Instr::Const(c));
            pushed += 1;
        }
        self.table_lookup(m, constants, loops, code);
        if !ends.1.is_empty() {
            let c = self.constant(Constant::Str(ends.1.into()));
            code.push(Instr::Const(c));
            pushed += 1;
        }
        pushed
    }

    /// Pushes `<key>; lookup t` over the constants as they are, all
    /// scalars of one stack type (`merge` checked it).
    fn table_lookup(
        &mut self,
        m: &Merge,
        constants: Vec<Option<Constant>>,
        loops: &[ir::RuntimeLoop],
        code: &mut Vec<Instr>,
    ) {
        let mut entries = Vec::new();
        let mut default = None;
        let mut kind = None;
        for (keys, constant) in m.keys.iter().zip(constants) {
            let Some((k, text)) = constant.as_ref().and_then(table_text) else {
                self.internal("a merged lookup has a value that is not a scalar".to_owned());
                continue;
            };
            if kind.is_some_and(|kind| kind != k) {
                self.internal("a merged lookup mixes values of two types".to_owned());
            }
            kind = Some(k);
            if keys.is_empty() {
                default = Some(text.clone());
            }
            entries.extend(keys.iter().map(|key| (key.clone(), text.clone())));
        }
        let kind = kind.unwrap_or(constant_kind::STR);
        let table = self.constant(Constant::Table(Box::new(Table::new(
            kind, entries, default,
        ))));
        self.scalar(&m.on, loops, code);
        code.push(Instr::Lookup(table));
    }
}

/// The code written in place of nodes of the value being lowered (a
/// merged lookup's differing leaves, [`Joint::Deep`]), by the node's
/// address: constant values, and literal parts of strings.
#[derive(Debug, Default)]
pub(super) struct Overrides {
    pub values: std::collections::HashMap<usize, Vec<Instr>>,
    pub lits: std::collections::HashMap<usize, Vec<Instr>>,
}

/// A node's address, the key of [`Overrides`].
pub(super) fn address<T>(node: &T) -> usize {
    node as *const T as usize
}

/// A scalar constant as a table holds it: its kind and its text.
fn table_text(c: &Constant) -> Option<(u8, String)> {
    Some(match c {
        Constant::Str(s) | Constant::Word(s) => (constant_kind::STR, s.to_string()),
        Constant::Int(i) => (constant_kind::INT, i.to_string()),
        Constant::Duration(d) => (constant_kind::INT, d.to_string()),
        Constant::Bool(b) => (constant_kind::BOOL, b.to_string()),
        _ => return None,
    })
}

/// The least common text around the differing part of looked-up strings
/// that is factored out of a table: shorter ends cost more instructions
/// than the bytes they save.
const MIN_COMMON_ENDS: usize = 32;

/// The lengths in bytes of the longest prefix and suffix all `texts`
/// share, on character boundaries and not overlapping in any of them.
fn common_ends(texts: &[&str]) -> (usize, usize) {
    let Some((first, rest)) = texts.split_first() else {
        return (0, 0);
    };
    let shortest = texts.iter().map(|t| t.len()).min().unwrap_or(0);
    let mut prefix = rest.iter().fold(first.len(), |n, t| {
        first
            .bytes()
            .zip(t.bytes())
            .take(n)
            .take_while(|(a, b)| a == b)
            .count()
    });
    while !first.is_char_boundary(prefix) {
        prefix -= 1;
    }
    let room = shortest - prefix;
    let mut suffix = rest.iter().fold(room, |n, t| {
        first
            .bytes()
            .rev()
            .zip(t.bytes().rev())
            .take(n)
            .take_while(|(a, b)| a == b)
            .count()
    });
    while !first.is_char_boundary(first.len() - suffix) {
        suffix -= 1;
    }
    (prefix, suffix)
}

#[cfg(test)]
mod tests {
    use super::common_ends;

    #[test]
    fn common_ends_never_overlap_nor_split_a_character() {
        assert_eq!(common_ends(&["ab-1-yz", "ab-22-yz"]), (3, 3));
        assert_eq!(common_ends(&["aXa", "aa"]), (1, 1));
        assert_eq!(common_ends(&["aaa", "aaa", "aa"]), (2, 0));
        assert_eq!(common_ends(&["", "x"]), (0, 0));
        assert_eq!(common_ends(&["é1é", "é2é"]), (2, 2));
        // "é" and "è" share their first byte only.
        assert_eq!(common_ends(&["é", "è"]), (0, 0));
        assert_eq!(common_ends(&["only"]), (4, 0));
    }
}
