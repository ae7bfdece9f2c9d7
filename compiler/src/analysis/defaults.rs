//! Diagnostics caused by bundle defaults (LANGUAGE.md section 17).
//!
//! The analyses see the expanded promises, defaults applied. An attribute a
//! promise takes from its bundle's `defaults` keeps the span of its value in
//! the `defaults` block, so a diagnostic about it points there; this adds
//! the promise that took it, with where the defaults are, so the problem is
//! reported at both.

use crate::diagnostic::Diagnostic;
use crate::ir::Promise;

/// For every attribute of `p` taken from defaults that `d` labels, a
/// secondary label at `p` naming the `defaults` block.
pub fn at_promise(mut d: Diagnostic, p: &Promise) -> Diagnostic {
    for attr in &p.attrs {
        let Some(origin) = &attr.default else {
            continue;
        };
        if !d.labels.iter().any(|l| l.span == attr.span) {
            continue;
        }
        let message = format!(
            "`{}` of this promise: this value comes from the defaults at {}",
            attr.name, origin.at
        );
        if !d
            .labels
            .iter()
            .any(|l| l.span == p.span && l.message == message)
        {
            d = d.with_secondary(p.span, message);
        }
    }
    d
}
