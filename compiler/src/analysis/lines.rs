//! `line` promises that can never settle (error E0305), decided from their
//! constant text: each run would change the file again, and the file grows
//! or churns forever (issue 14, item 13: a file grew 4x per run).
//!
//! - `present` or `absent` text with a line break: the VM compares whole
//!   lines, which never contain one, so a `present` line is appended on
//!   every run (and an `absent` one is never found).
//! - `replace` whose `with` text (constant, without `$` capture references)
//!   is itself rewritten by the same replacement: the replaced text matches
//!   the pattern again, so every run rewrites what the last one wrote
//!   (`replace = "a"; with = "aa";`). A pattern that does not match its own
//!   output (`^a$`, or a `with` without the matched text) settles.
//!
//! What depends on facts or capture groups is left to the VM, which stops
//! a rewrite that does not settle at run time.

use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Program, Promise, Value};

/// One E0305 per `line` promise statement that can never settle.
pub fn never_settling(program: &Program) -> Vec<Diagnostic> {
    let mut out: Vec<Diagnostic> = Vec::new();
    for p in program.promises.iter().filter(|p| p.kind == "line") {
        let Some(d) = problem(p) else { continue };
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out
}

fn problem(p: &Promise) -> Option<Diagnostic> {
    let attr = |name: &str| p.attrs.iter().find(|a| a.name == name);
    for name in ["present", "absent"] {
        let Some(a) = attr(name) else { continue };
        let Value::Str(text) = &a.value else { continue };
        if text.contains(['\n', '\r']) {
            return Some(
                Diagnostic::new(
                    Code::LineNeverSettles,
                    format!("a `{name}` line cannot contain a line break"),
                    a.span,
                    "this text spans several lines",
                )
                .with_note("the VM compares whole lines, and a line never contains a line break: the promise would append this text again on every run")
                .with_help("promise each line on its own (one `line` promise per line), or manage the lines as a `block`"),
            );
        }
    }
    let replace = attr("replace")?;
    let with = attr("with")?;
    let (Value::Str(pattern), Value::Str(replacement)) = (&replace.value, &with.value) else {
        return None;
    };
    if replacement.contains('$') {
        return None;
    }
    let re = regex::Regex::new(pattern).ok()?;
    let again = re.replace_all(replacement, replacement.as_str());
    if again == replacement.as_str() {
        return None;
    }
    Some(
        Diagnostic::new(
            Code::LineNeverSettles,
            "this replacement never settles: its output matches the pattern again",
            with.span,
            format!("{replacement:?} becomes {again:?}, and so on at every run"),
        )
        .with_secondary(replace.span, "the pattern")
        .with_help("make the pattern match only the text being replaced, not what it is replaced with (anchor it: `^old$`)"),
    )
}
