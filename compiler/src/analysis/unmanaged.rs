//! The checks of `unmanaged` promises (LANGUAGE.md section 17) that the
//! schema cannot say: which type the promiser names, `max_remove` not
//! below 0, `ignore` globs that compile, and an id range that holds an id.
//! They run on the expanded program, so a value from a `let` or a bundle
//! parameter is checked like a literal one. Two `unmanaged` promises of
//! one type that can be active together are a contradiction
//! ([`super::contradictions`], E0264).

use rustc_hash::FxHashSet as HashSet;

use converge_format::globs::name_glob_problem;
use converge_format::schema::{UNMANAGED_MAX_ID, UNMANAGED_MIN_ID, UNMANAGED_TYPES};
use converge_grammar::Span;

use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Program, Promise, Value};
use crate::suggest::{did_you_mean, one_of};

/// The types whose entries have ids (`min_id`, `max_id`).
const ID_TYPES: &[&str] = &["user", "group"];

/// Every problem of every `unmanaged` promise, each reported once however
/// many times its bundle is called.
pub fn unmanaged(program: &Program) -> Vec<Diagnostic> {
    let mut seen: HashSet<(Code, Span, String)> = HashSet::default();
    let mut out = Vec::new();
    for p in program.promises.iter().filter(|p| p.kind == "unmanaged") {
        for d in promise_problems(p) {
            let span = d.labels.first().map_or(p.span, |l| l.span);
            if seen.insert((d.code, span, d.message.clone())) {
                out.push(d);
            }
        }
    }
    out
}

fn promise_problems(p: &Promise) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    let kind = match &p.promiser {
        Value::Str(kind) => Some(kind.as_str()),
        _ => None,
    };
    match kind {
        Some(kind) if UNMANAGED_TYPES.contains(&kind) => {}
        Some(kind) => {
            let mut d = Diagnostic::new(
                Code::UnmanagedType,
                format!(
                    "`unmanaged` cannot verify `{}`: it verifies {}",
                    kind.escape_debug(),
                    one_of(UNMANAGED_TYPES)
                ),
                p.span,
                "unknown type",
            );
            d = match did_you_mean(kind, UNMANAGED_TYPES.iter().copied()) {
                Some(s) => d.with_help(format!("did you mean `unmanaged \"{s}\"`?")),
                None => d.with_help(
                    "the promiser names the type of entries to verify: `unmanaged \"package\" { ... }`",
                ),
            };
            out.push(d);
        }
        None => out.push(
            Diagnostic::new(
                Code::UnmanagedType,
                "the type an `unmanaged` promise verifies must be known at compile time",
                p.span,
                "computed on the host",
            )
            .with_help(format!(
                "write the type as a literal: {}",
                one_of(UNMANAGED_TYPES)
            )),
        ),
    }
    for attr in &p.attrs {
        match (attr.name, &attr.value) {
            ("max_remove", Value::Int(n)) if *n < 0 => out.push(
                Diagnostic::new(
                    Code::UnmanagedMaxRemove,
                    format!("`max_remove = {n}` is below 0"),
                    attr.span,
                    "a count of entries",
                )
                .with_help("`max_remove = 0` removes nothing; the default is 10"),
            ),
            ("ignore", Value::List(globs)) => {
                for glob in globs {
                    let Value::Str(glob) = glob else { continue };
                    if let Some(why) = name_glob_problem(glob) {
                        out.push(
                            Diagnostic::new(
                                Code::UnmanagedGlob,
                                format!("`{}` is not a valid glob: {why}", glob.escape_debug()),
                                attr.span,
                                "invalid glob",
                            )
                            .with_help("a glob matches a whole name: `linux-image-*`, `app-?`, `{a,b}-tools`"),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    out.extend(id_range_problem(p, kind));
    out
}

/// `min_id` above `max_id` (either possibly its default), an id outside
/// what `/etc/passwd` can hold, or an id range on a type without ids.
fn id_range_problem(p: &Promise, kind: Option<&str>) -> Option<Diagnostic> {
    let bound = |name: &str| {
        p.attrs
            .iter()
            .find(|a| a.name == name)
            .map(|a| (a.span, a.value.clone()))
    };
    let (min, max) = (bound("min_id"), bound("max_id"));
    if let Some(kind) = kind.filter(|k| UNMANAGED_TYPES.contains(k) && !ID_TYPES.contains(k)) {
        let (span, name) = match (&min, &max) {
            (Some((span, _)), _) => (*span, "min_id"),
            (None, Some((span, _))) => (*span, "max_id"),
            (None, None) => return None,
        };
        return Some(
            Diagnostic::new(
                Code::UnmanagedIdRange,
                format!("`{name}` means nothing for `unmanaged \"{kind}\"`: only users and groups have ids"),
                span,
                "no ids here",
            )
            .with_help("remove it; use `ignore` globs to leave entries out"),
        );
    }
    let int = |b: &Option<(Span, Value)>, default: i64| match b {
        Some((span, Value::Int(n))) => Some((Some(*span), *n)),
        Some(_) => None,
        None => Some((None, default)),
    };
    let (min_span, lo) = int(&min, UNMANAGED_MIN_ID)?;
    let (max_span, hi) = int(&max, UNMANAGED_MAX_ID)?;
    for (span, id) in [(min_span, lo), (max_span, hi)] {
        if let (Some(span), true) = (span, u32::try_from(id).is_err()) {
            return Some(
                Diagnostic::new(
                    Code::UnmanagedIdRange,
                    format!("{id} is not an id: uids and gids go from 0 to 4294967295"),
                    span,
                    "out of range",
                )
                .with_help("local accounts usually have ids from 1000 to 59999 (the defaults)"),
            );
        }
    }
    if lo <= hi {
        return None;
    }
    let (span, label) = match (min_span, max_span) {
        (_, Some(span)) => (span, "below `min_id`"),
        (Some(span), None) => (span, "above `max_id`"),
        (None, None) => return None,
    };
    let shown = |s: Option<Span>, v: i64, name: &str| match s {
        Some(_) => format!("{name} = {v}"),
        None => format!("{name} = {v} (its default)"),
    };
    let mut d = Diagnostic::new(
        Code::UnmanagedIdRange,
        format!(
            "the id range holds no id: {} is above {}",
            shown(min_span, lo, "min_id"),
            shown(max_span, hi, "max_id")
        ),
        span,
        label,
    )
    .with_help("`min_id` is the lowest id considered and `max_id` the highest: swap them, or widen the range");
    if let (Some(min), Some(_)) = (min_span, max_span) {
        d = d.with_secondary(min, "min_id");
    }
    Some(d)
}
