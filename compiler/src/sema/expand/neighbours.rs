//! Expanding neighbour watch (`crate::sema::neighbours`): the value of
//! `neighbours(inventory, k)`, and the report keys of each instance of a
//! `neighbours` promise.

use converge_grammar::ast::Expr;
use converge_grammar::Span;

use super::{Env, Expander};
use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{self, Value};
use crate::sema::neighbours;

/// The largest `k`: more neighbours than this is a typo, not a policy.
const MAX_K: i64 = 64;

impl<'a> Expander<'a, '_> {
    /// `neighbours(inventory, k)`; the checker reported a wrong call or a
    /// missing inventory already, so those expand to an empty list.
    pub(super) fn neighbours_call(&mut self, args: &[Expr], env: &Env, span: Span) -> Value {
        let empty = Value::List(Vec::new());
        let (Some(inventory), [_, k]) = (&self.symbols.inventory, args) else {
            return empty;
        };
        match self.eval(k, env) {
            Value::Int(k) if (1..=MAX_K).contains(&k) => {
                neighbours::value(inventory, usize::try_from(k).unwrap_or(0))
            }
            Value::Int(k) => {
                self.report(
                    Diagnostic::new(
                        Code::BadArguments,
                        format!("`neighbours` watches between 1 and {MAX_K} hosts, not {k}"),
                        span,
                        "in this call",
                    )
                    .with_help("3 or 4 is usual: each host is then watched by as many others"),
                );
                empty
            }
            _ => {
                self.report(
                    Diagnostic::new(
                        Code::BadArguments,
                        "how many neighbours to watch must be known when compiling",
                        span,
                        "in this call",
                    )
                    .with_help("write a number: `neighbours(inventory, 3)`"),
                );
                empty
            }
        }
    }

    /// Gives each instance of a `neighbours` promise the report keys of
    /// the hosts it watches.
    pub(super) fn neighbour_keys(&mut self, instances: &mut [ir::Promise]) {
        let inventory = self.symbols.inventory.as_ref();
        let mut reported = false;
        for promise in instances {
            for d in neighbours::report_keys(inventory, promise) {
                // The same missing inventory or written attribute once per
                // promise, not once per instance.
                if reported
                    && matches!(
                        d.code,
                        Code::NeighboursWithoutInventory | Code::NeighbourKeysWritten
                    )
                {
                    continue;
                }
                reported |= matches!(
                    d.code,
                    Code::NeighboursWithoutInventory | Code::NeighbourKeysWritten
                );
                self.report(d);
            }
        }
    }
}
