//! Turning a promise of the bundle into what one host must converge to:
//! its promiser and attribute values evaluated against the facts, the
//! classes and the current elements of its run-time loops.

use std::collections::BTreeSet;

use crate::bundle::format::{Body, Constant, Item, Operand, Promise};
use crate::eval::{EvalError, Evaluator, Val};
use crate::schema::promise_type_by_id;

/// A resolved attribute value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Int(i64),
    Bool(bool),
    Bytes(Vec<u8>),
    List(Vec<String>),
}

impl Value {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// How the value is shown in reports.
    pub fn display(&self) -> String {
        match self {
            Value::Str(s) => format!("{s:?}"),
            Value::Int(i) => i.to_string(),
            Value::Bool(b) => b.to_string(),
            Value::Bytes(b) => format!("<{} bytes>", b.len()),
            Value::List(l) => format!("{l:?}"),
        }
    }
}

/// One instance of a promise on this host (a promise inside a run-time
/// loop has one instance per element).
#[derive(Clone, Debug)]
pub struct Instance {
    /// Index of the promise in the bundle.
    pub index: usize,
    pub kind: &'static str,
    pub promiser: String,
    /// Attribute name and value, in the bundle's order.
    pub attrs: Vec<(&'static str, Value)>,
}

impl Instance {
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.attrs.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    pub fn str(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Value::as_str)
    }

    pub fn int(&self, name: &str) -> Option<i64> {
        match self.get(name) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        }
    }

    pub fn bool(&self, name: &str) -> Option<bool> {
        match self.get(name) {
            Some(Value::Bool(b)) => Some(*b),
            _ => None,
        }
    }

    pub fn list(&self, name: &str) -> Option<&[String]> {
        match self.get(name) {
            Some(Value::List(l)) => Some(l),
            _ => None,
        }
    }
}

/// The most instances one promise's run-time loops may expand to. Run-time
/// loops range over host facts such as `sys.ipv4`; a hostile but validly
/// signed bundle could nest dozens of them to ask for more instances than
/// there are atoms (THREATS.md T14). No real host comes near this many.
pub const MAX_LOOP_INSTANCES: usize = 1 << 16;

/// The element combinations of a promise's run-time loops (one empty
/// combination when there is no loop), or why there would be too many.
pub fn loop_combinations(facts_of: &[Vec<String>]) -> Result<Vec<Vec<String>>, String> {
    let count = facts_of
        .iter()
        .try_fold(1usize, |n, list| n.checked_mul(list.len()));
    match count {
        Some(n) if n <= MAX_LOOP_INSTANCES => {}
        _ => {
            return Err(format!(
                "its loops over host facts expand to more than {MAX_LOOP_INSTANCES} instances"
            ))
        }
    }
    let mut combos: Vec<Vec<String>> = vec![Vec::new()];
    for list in facts_of {
        let mut next = Vec::with_capacity(combos.len().saturating_mul(list.len()));
        for combo in &combos {
            for item in list {
                let mut c = combo.clone();
                c.push(item.clone());
                next.push(c);
            }
        }
        combos = next;
    }
    Ok(combos)
}

fn item(
    body: &Body,
    eval: &mut Evaluator<'_>,
    item: Item,
    classes: &BTreeSet<String>,
    loops: &[String],
) -> Result<Value, EvalError> {
    match item {
        Item::Const(c) => match body.constants.get(c as usize) {
            Some(Constant::Str(s) | Constant::Word(s)) => Ok(Value::Str(s.clone())),
            Some(Constant::Int(i)) => Ok(Value::Int(*i)),
            Some(Constant::Duration(s)) => Ok(Value::Int(i64::try_from(*s).unwrap_or(i64::MAX))),
            Some(Constant::Bool(b)) => Ok(Value::Bool(*b)),
            Some(Constant::Blob(b)) => Ok(Value::Bytes(b.0.clone())),
            None => Err(EvalError(format!("constant {c}"))),
        },
        Item::Code(p) => Ok(match eval.run(p, classes, loops)? {
            Val::Str(s) => Value::Str(s),
            Val::Int(i) => Value::Int(i),
            Val::Bool(b) => Value::Bool(b),
            Val::List(l) => Value::List(l),
        }),
    }
}

/// Resolves one instance of a promise.
pub fn resolve(
    body: &Body,
    eval: &mut Evaluator<'_>,
    index: usize,
    promise: &Promise,
    classes: &BTreeSet<String>,
    loops: &[String],
) -> Result<Instance, EvalError> {
    let pt = promise_type_by_id(promise.kind)
        .ok_or_else(|| EvalError(format!("promise type {}", promise.kind)))?;
    let promiser = match item(body, eval, promise.promiser, classes, loops)? {
        Value::Str(s) => s,
        other => other.display(),
    };
    let mut attrs = Vec::with_capacity(promise.attrs.len());
    for a in promise.attrs.iter() {
        let name = pt
            .attr_by_id(a.attr)
            .map(|s| s.name)
            .ok_or_else(|| EvalError(format!("attribute {}", a.attr)))?;
        let value = match &a.value {
            Operand::Item(i) => item(body, eval, *i, classes, loops)?,
            Operand::List(items) => {
                let mut list = Vec::with_capacity(items.len());
                for i in items.iter() {
                    list.push(match item(body, eval, *i, classes, loops)? {
                        Value::Str(s) => s,
                        other => other.display(),
                    });
                }
                Value::List(list)
            }
        };
        attrs.push((name, value));
    }
    Ok(Instance {
        index,
        kind: pt.name,
        promiser,
        attrs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loops_expand_to_every_combination_up_to_the_cap() {
        let two = vec!["a".to_owned(), "b".to_owned()];
        assert_eq!(loop_combinations(&[]), Ok(vec![Vec::new()]));
        assert_eq!(
            loop_combinations(&[two.clone(), vec!["x".to_owned()]]),
            Ok(vec![
                vec!["a".into(), "x".into()],
                vec!["b".into(), "x".into()]
            ])
        );
        assert_eq!(
            loop_combinations(&[two.clone(), Vec::new()]),
            Ok(Vec::new())
        );
        // 2^16 instances is the cap itself; one more loop is refused before
        // anything is allocated, and so is a count that overflows.
        assert_eq!(
            loop_combinations(&vec![two.clone(); 16]).map(|c| c.len()),
            Ok(1 << 16)
        );
        assert!(loop_combinations(&vec![two.clone(); 17]).is_err());
        let err = loop_combinations(&vec![two; 200]).unwrap_err();
        assert!(err.contains("more than 65536 instances"), "{err}");
    }
}
