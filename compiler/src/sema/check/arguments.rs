//! Binding the arguments of a bundle call to its parameters.

use converge_grammar::ast::{Arg, BundleDef, Call, Ident};

use crate::diagnostic::{Code, Diagnostic};
use crate::suggest::{did_you_mean, one_of};

/// What is wrong with the arguments of a call.
#[derive(Debug)]
pub enum ArgError<'a> {
    TooMany(&'a Arg),
    PositionalAfterNamed(&'a Arg),
    UnknownName(&'a Arg, &'a Ident),
    Twice(&'a Arg, usize),
    Missing(usize),
}

impl ArgError<'_> {
    pub(super) fn into_diagnostic(self, bundle: &BundleDef, call: &Call) -> Diagnostic {
        let signature = bundle.name.span;
        let count = bundle.params.len();
        match self {
            ArgError::TooMany(arg) => Diagnostic::new(
                Code::WrongArguments,
                format!(
                    "bundle `{}` takes {count} argument{}, but more were given",
                    bundle.name.name,
                    if count == 1 { "" } else { "s" }
                ),
                arg.span,
                "extra argument",
            )
            .with_secondary(signature, "bundle defined here"),
            ArgError::PositionalAfterNamed(arg) => Diagnostic::new(
                Code::WrongArguments,
                "a positional argument cannot follow a named one",
                arg.span,
                "positional argument",
            )
            .with_help("name this argument too: `name = value`"),
            ArgError::UnknownName(arg, name) => {
                let params: Vec<&str> =
                    bundle.params.iter().map(|p| p.name.name.as_str()).collect();
                let mut d = Diagnostic::new(
                    Code::UnknownParameter,
                    format!(
                        "bundle `{}` has no parameter `{}`",
                        bundle.name.name, name.name
                    ),
                    name.span,
                    "unknown parameter",
                )
                .with_secondary(signature, "bundle defined here");
                d = match did_you_mean(&name.name, params.iter().copied()) {
                    Some(s) => d.with_help(format!("did you mean `{s}`?")),
                    None if params.is_empty() => d.with_note("this bundle takes no parameters"),
                    None => d.with_note(format!("its parameters are {}", one_of(&params))),
                };
                let _ = arg;
                d
            }
            ArgError::Twice(arg, index) => {
                let name = bundle
                    .params
                    .get(index)
                    .map(|p| p.name.name.as_str())
                    .unwrap_or("?");
                Diagnostic::new(
                    Code::WrongArguments,
                    format!("argument `{name}` is given twice"),
                    arg.span,
                    "given again here",
                )
            }
            ArgError::Missing(index) => {
                let (name, span) = bundle
                    .params
                    .get(index)
                    .map(|p| (p.name.name.as_str(), p.span))
                    .unwrap_or(("?", signature));
                Diagnostic::new(
                    Code::WrongArguments,
                    format!(
                        "missing argument `{name}` in call of bundle `{}`",
                        bundle.name.name
                    ),
                    call.span,
                    format!("`{name}` is not given"),
                )
                .with_secondary(span, "parameter without a default")
                .with_help(format!("pass it: `{}({name} = ...)`", bundle.name.name))
            }
        }
    }
}

/// Matches call arguments to parameters: positional ones first, then named
/// ones. Returns, for each parameter, the argument bound to it (`None` where
/// the default applies).
pub fn bind_arguments<'a>(
    bundle: &BundleDef,
    args: &'a [Arg],
) -> Result<Vec<Option<&'a Arg>>, Vec<ArgError<'a>>> {
    let mut bound: Vec<Option<&'a Arg>> = vec![None; bundle.params.len()];
    let mut errors = Vec::new();
    let mut seen_named = false;
    let mut position = 0;
    for arg in args {
        match &arg.name {
            None => {
                if seen_named {
                    errors.push(ArgError::PositionalAfterNamed(arg));
                    continue;
                }
                match bound.get_mut(position) {
                    Some(slot) => *slot = Some(arg),
                    None => errors.push(ArgError::TooMany(arg)),
                }
                position += 1;
            }
            Some(name) => {
                seen_named = true;
                match bundle.params.iter().position(|p| p.name.name == name.name) {
                    Some(i) => match bound.get_mut(i) {
                        Some(slot @ None) => *slot = Some(arg),
                        _ => errors.push(ArgError::Twice(arg, i)),
                    },
                    None => errors.push(ArgError::UnknownName(arg, name)),
                }
            }
        }
    }
    for (i, (slot, param)) in bound.iter().zip(&bundle.params).enumerate() {
        if slot.is_none() && param.default.is_none() {
            errors.push(ArgError::Missing(i));
        }
    }
    if errors.is_empty() {
        Ok(bound)
    } else {
        Err(errors)
    }
}
