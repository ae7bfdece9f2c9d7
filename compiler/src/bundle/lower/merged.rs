//! Writing the values of a merged lookup (`bundle::merge`): each value
//! that differs between the instances becomes `<key>; lookup t` over a
//! table constant from every key to its instance's constant, the default
//! instance's constant as the table's default (format 2.3).

use converge_format::bundle::format::{Constant, Item, List, Operand, Table, TableEntry};
use converge_format::bundle::instr::Instr;

use super::{constant_of, Lowerer};
use crate::bundle::merge::{list_item, Joint, Merge};
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
            Joint::List(items) => Operand::List(List(
                items
                    .iter()
                    .enumerate()
                    .map(|(k, joint)| {
                        let column: Vec<&Value> =
                            values.iter().filter_map(|v| list_item(v, k)).collect();
                        self.joint_item(m, &column, joint.as_ref(), loops)
                    })
                    .collect(),
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
                self.lookup(m, constants, loops, &mut code);
            }
            Some(Joint::Template(differs)) => {
                let parts: Vec<&[TemplatePart]> = values
                    .iter()
                    .filter_map(|v| match v {
                        Value::Template(parts) => Some(parts.as_slice()),
                        _ => None,
                    })
                    .collect();
                for (k, &differs) in differs.iter().enumerate() {
                    let column: Vec<Option<&TemplatePart>> =
                        parts.iter().map(|p| p.get(k)).collect();
                    match column.first().copied().flatten() {
                        Some(_) if differs => {
                            let constants = column
                                .iter()
                                .map(|part| match part {
                                    Some(TemplatePart::Lit(text)) => {
                                        Some(Constant::Str(text.clone()))
                                    }
                                    _ => None,
                                })
                                .collect();
                            self.lookup(m, constants, loops, &mut code);
                        }
                        Some(TemplatePart::Lit(text)) => {
                            let c = self.constant(Constant::Str(text.clone()));
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
                code.push(Instr::Concat(differs.len().max(1) as u32));
            }
            Some(Joint::List(_)) => self.internal("a list inside a list attribute".to_owned()),
        }
        Item::Code(self.program(code))
    }

    /// Pushes `<key>; lookup t`, `t` the table from each member's keys to
    /// its constant (the default member's as the default).
    fn lookup(
        &mut self,
        m: &Merge,
        constants: Vec<Option<Constant>>,
        loops: &[ir::RuntimeLoop],
        code: &mut Vec<Instr>,
    ) {
        let mut entries = Vec::new();
        let mut default = None;
        for (keys, constant) in m.keys.iter().zip(constants) {
            let Some(constant) = constant else {
                self.internal("a merged lookup has a value that is not a constant".to_owned());
                continue;
            };
            let value = self.constant(constant);
            if keys.is_empty() {
                default = Some(value);
            }
            entries.extend(keys.iter().map(|key| TableEntry {
                key: key.clone(),
                value,
            }));
        }
        entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let table = self.constant(Constant::Table(Table {
            entries: List(entries),
            default,
        }));
        self.scalar(&m.on, loops, code);
        code.push(Instr::Lookup(table));
    }
}
