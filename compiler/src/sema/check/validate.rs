//! A `file` promise's `validate` argv must name the staged copy: an argv
//! element that is exactly `%s` (LANGUAGE.md §18). Without one the command
//! would check something else (the file in place, which still holds the
//! old content) and bless content it never saw.

use converge_grammar::ast::{Expr, ExprKind};

use super::*;
use crate::diagnostic::{Code, Diagnostic};

impl<'a> Checker<'a> {
    /// Checks a `validate` list written as a list literal; an argv built
    /// otherwise is checked by the VM, which fails the promise the same way.
    pub(super) fn check_validate(&mut self, value: &Expr) {
        let ExprKind::List(items) = &value.kind else {
            return;
        };
        let plain: Vec<Option<String>> = items
            .iter()
            .map(|item| match &item.kind {
                ExprKind::Str(lit) => lit.as_plain(),
                _ => None,
            })
            .collect();
        if plain.iter().any(|p| p.as_deref() == Some("%s")) {
            return;
        }
        // An element built at run time might be `%s`; only a list of
        // known strings is known to lack it.
        if plain.iter().any(Option::is_none) {
            return;
        }
        let embedded = plain.iter().flatten().any(|p| p.contains("%s"));
        let mut d = Diagnostic::new(
            Code::ValidateWithoutStagedPath,
            "`validate` has no `%s` argument: it would not check the new content",
            value.span,
            "no element is exactly `%s`",
        )
        .with_help("put the staged copy's path as its own argument, e.g. `validate = [\"/usr/sbin/sshd\", \"-t\", \"-f\", \"%s\"];`");
        if embedded {
            d = d.with_note(
                "`%s` must be a whole argument: `-f%s` is not replaced (split it into `-f`, `%s`)",
            );
        }
        self.push(d);
    }
}
