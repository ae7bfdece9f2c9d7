//! Type checking `neighbours(inventory, k)` (`crate::sema::neighbours`):
//! the first argument is the word `inventory`, the second an int, and the
//! program has an inventory.

use converge_grammar::ast::{Expr, ExprKind};
use converge_grammar::Span;

use super::Checker;
use super::Scope;
use crate::diagnostic::{Code, Diagnostic};
use crate::sema::neighbours::without_inventory;
use crate::sema::types::Type;

impl<'a> Checker<'a> {
    pub(super) fn neighbours_call(&mut self, args: &[Expr], span: Span, scope: &Scope) -> Type {
        let result = Type::List(Box::new(Type::String));
        let [source, k] = args else {
            self.push(
                Diagnostic::new(
                    Code::BadArguments,
                    format!("`neighbours` takes 2 arguments, not {}", args.len()),
                    span,
                    "in this call",
                )
                .with_help(
                    "`neighbours(inventory, 3)`: the inventory, and how many hosts to watch",
                ),
            );
            return result;
        };
        let is_inventory = matches!(&source.kind, ExprKind::Path(path)
            if path.len() == 1 && path.first().is_some_and(|p| p.name == "inventory"));
        if !is_inventory {
            self.push(
                Diagnostic::new(
                    Code::BadArguments,
                    "the first argument of `neighbours` is the word `inventory`",
                    source.span,
                    "not `inventory`",
                )
                .with_help("`neighbours(inventory, 3)`: the hosts are chosen from the inventory"),
            );
        }
        let k_type = self.value_type(k, scope);
        if !matches!(k_type, Type::Int | Type::Any) {
            self.push(
                Diagnostic::new(
                    Code::BadArguments,
                    format!(
                        "the second argument of `neighbours` is an int, not {}",
                        k_type.describe()
                    ),
                    k.span,
                    "how many hosts to watch",
                )
                .with_help("`neighbours(inventory, 3)`"),
            );
        }
        if is_inventory && self.symbols.inventory.is_none() {
            self.push(without_inventory(span, "`neighbours(inventory, k)`"));
        }
        result
    }
}
