//! Taint checking of secrets (LANGUAGE.md section 14).
//!
//! The compiler never computes with a secret: `secret("x.age")` expands to
//! [`Value::Secret`], which is not a constant, so interpolation, functions,
//! records, lists, lookups and templates keep it inside whatever they build
//! (a template part, a host call, a field). A value is therefore secret
//! exactly when a [`Value::Secret`] occurs in it, and expansion asks
//! [`secret_in`] of every promiser, attribute, guard and class it builds.
//!
//! A secret may flow only into a sink: `file` `content` (or a `template`
//! rendered into it) and `user` `password`. Anything else would put it
//! where the VM prints, logs, compares or passes it on (a path, a guard, a
//! `report` message, a command's argv, a comment): an error (`E1001`)
//! with the flow, where it went (primary) and where it was read (secondary).
//! A file holding a secret must say its `mode`, with no bit for others
//! (`E1002`), so the VM creates it private before writing the content.

use std::sync::Arc;

use converge_grammar::Span;

use crate::diagnostic::{Code, Diagnostic};
use crate::ir::{Guard, Promise, SecretRef, TemplatePart, Value};

/// The attributes a secret may flow into, by promise type.
pub const SINKS: &[(&str, &str)] = &[
    ("file", "content"),
    ("file", "template"),
    ("user", "password"),
];

/// Whether attribute `attr` of a `kind` promise may hold a secret.
pub fn is_sink(kind: &str, attr: &str) -> bool {
    SINKS.iter().any(|(k, a)| *k == kind && *a == attr)
}

/// The first secret anywhere in `value`: in its elements, fields, template
/// parts, function arguments, branches and their conditions, and in the key
/// a lookup is made by.
pub fn secret_in(value: &Value) -> Option<&Arc<SecretRef>> {
    match value {
        Value::Secret(secret) => Some(secret),
        Value::Choice(c) => secret_in(&c.on).or_else(|| value.find_child(secret_in)),
        Value::Select { cond, .. } => secret_in_guard(cond).or_else(|| value.find_child(secret_in)),
        Value::Template(parts) => parts.iter().find_map(|p| match p {
            TemplatePart::Host(v) => secret_in(v),
            _ => None,
        }),
        _ => value.find_child(secret_in),
    }
}

/// The first secret a guard compares.
pub fn secret_in_guard(guard: &Guard) -> Option<&Arc<SecretRef>> {
    match guard {
        Guard::Const(_) | Guard::Class(_) => None,
        Guard::Compare { lhs, rhs, .. } => secret_in(lhs).or_else(|| secret_in(rhs)),
        Guard::Not(inner) => secret_in_guard(inner),
        Guard::And(items) | Guard::Or(items) => items.iter().find_map(secret_in_guard),
    }
}

/// The first secret used as the key of a lookup anywhere in `value`
/// (`passwords[db_password]`): expansion would split the promise on it,
/// one instance guarded by `secret == key` per key, so even in a sink it
/// would become a guard.
pub fn secret_lookup_key(value: &Value) -> Option<&Arc<SecretRef>> {
    if let Value::Choice(c) = value {
        if let Some(secret) = secret_in(&c.on) {
            return Some(secret);
        }
    }
    value.find_child(secret_lookup_key)
}

/// Every distinct secret in `value`, in the order met.
pub fn secrets_in<'v>(value: &'v Value, out: &mut Vec<&'v Arc<SecretRef>>) {
    match value {
        Value::Secret(secret) if !out.iter().any(|s| s == &secret) => out.push(secret),
        Value::Choice(c) => secrets_in(&c.on, out),
        _ => {}
    }
    for child in value.children() {
        secrets_in(child, out);
    }
}

/// The diagnostic for a secret that reaches `to`, a place described by
/// `place` ("the promiser of this `file`").
pub fn flow(secret: &SecretRef, to: Span, place: &str) -> Diagnostic {
    Diagnostic::new(
        Code::SecretFlow,
        format!("the secret `{}` flows into {place}", secret.name),
        to,
        "a value computed from a secret reaches here",
    )
    .with_secondary(secret.span, format!("the secret `{}` is read here", secret.name))
    .with_note(
        "a secret may flow only into `file` `content` (or a `template`) and `user` `password`: anywhere else the VM would print, log, compare or pass it on",
    )
    .with_help("keep the secret in the file's content (`content = \"password=${db_password}\\n\";`), or use a value that is not secret here")
}

/// The taint errors of one expanded promise: its promiser and every
/// attribute that is not a sink, then the mode of a file with secret
/// content. `promiser` is the span of the promiser expression.
pub fn check_promise(p: &Promise, promiser: Span) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    if let Some(secret) = secret_in(&p.promiser) {
        out.push(flow(
            secret,
            promiser,
            &format!("the promiser of this `{}`", p.kind),
        ));
    }
    let mut secret_content = None;
    for attr in &p.attrs {
        let Some(secret) = secret_in(&attr.value) else {
            continue;
        };
        if let Some(key) = secret_lookup_key(&attr.value) {
            out.push(flow(key, attr.span, "the key of a lookup"));
            continue;
        }
        if is_sink(p.kind, attr.name) {
            if p.kind == "file" {
                secret_content.get_or_insert(secret);
            }
            continue;
        }
        out.push(flow(
            secret,
            attr.span,
            &format!("`{}` of this `{}`", attr.name, p.kind),
        ));
    }
    if let Some(secret) = secret_content {
        out.extend(file_mode(p, secret));
    }
    out
}

/// `E1002` for a file whose content is secret: its mode must be given and
/// give others nothing.
fn file_mode(p: &Promise, secret: &SecretRef) -> Option<Diagnostic> {
    let help =
        "give it a private mode, e.g. `mode = 0o600;` (or `0o640` with a group that may read it)";
    let Some(mode) = p.attrs.iter().find(|a| a.name == "mode") else {
        return Some(
            Diagnostic::new(
                Code::SecretFileMode,
                format!(
                    "this file holds the secret `{}` but says no `mode`",
                    secret.name
                ),
                p.span,
                "no `mode`: the file would keep or get a mode others may read",
            )
            .with_secondary(
                secret.span,
                format!("the secret `{}` is read here", secret.name),
            )
            .with_help(help),
        );
    };
    match mode.value {
        Value::Int(m) if m & 0o007 == 0 => None,
        Value::Int(m) => Some(
            Diagnostic::new(
                Code::SecretFileMode,
                format!(
                    "this file holds the secret `{}` but its mode 0o{m:o} lets others read or use it",
                    secret.name
                ),
                mode.span,
                format!("0o{m:o} gives others 0o{:o}", m & 0o007),
            )
            .with_secondary(secret.span, format!("the secret `{}` is read here", secret.name))
            .with_help(help),
        ),
        _ => Some(
            Diagnostic::new(
                Code::SecretFileMode,
                format!(
                    "this file holds the secret `{}` but its mode is not known at compile time",
                    secret.name
                ),
                mode.span,
                "a mode the compiler cannot check",
            )
            .with_help(help),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Attr, Choice, CompareOp};

    fn secret() -> Value {
        Value::Secret(Arc::new(SecretRef {
            name: "db".into(),
            path: "secrets/db.age".into(),
            span: Span::default(),
        }))
    }

    fn promise(kind: &'static str, attrs: Vec<(&'static str, Value)>) -> Promise {
        Promise {
            kind,
            promiser: Value::Str("/etc/x".into()),
            attrs: attrs
                .into_iter()
                .map(|(name, value)| Attr {
                    name,
                    value,
                    span: Span::default(),
                    default: None,
                })
                .collect(),
            guard: Arc::new(Guard::Const(true)),
            span: Span::default(),
            chain: Arc::from(Vec::new()),
            rare: None,
        }
    }

    #[test]
    fn a_secret_is_found_anywhere_a_value_can_hold_it() {
        let upper = Value::call("upper", vec![secret()]);
        let in_template = Value::Template(vec![
            TemplatePart::Lit("pw=".into()),
            TemplatePart::Host(upper),
        ]);
        assert!(secret_in(&Value::List(vec![Value::Int(1), in_template])).is_some());
        let select = Value::Select {
            cond: Box::new(Guard::Compare {
                op: CompareOp::Eq,
                lhs: secret(),
                rhs: Value::Str("x".into()),
            }),
            then: Box::new(Value::Str("a".into())),
            otherwise: Box::new(Value::Str("b".into())),
        };
        assert!(secret_in(&select).is_some());
        let keyed = Value::Choice(Box::new(Choice {
            on: secret(),
            cases: vec![("k".into(), Value::Str("v".into()))],
            default: Value::Str("d".into()),
        }));
        assert!(secret_in(&keyed).is_some());
        assert!(secret_lookup_key(&keyed).is_some());
        assert!(secret_lookup_key(&secret()).is_none());
        assert!(secret_in(&Value::Str("plain".into())).is_none());
    }

    #[test]
    fn only_content_and_password_are_sinks_and_a_secret_file_is_private() {
        let private = promise(
            "file",
            vec![("content", secret()), ("mode", Value::Int(0o640))],
        );
        assert!(check_promise(&private, Span::default()).is_empty());
        let user = promise("user", vec![("password", secret())]);
        assert!(check_promise(&user, Span::default()).is_empty());
        let leak = promise(
            "file",
            vec![
                ("content", Value::Str("x".into())),
                ("mode", Value::Int(0o600)),
                ("owner", secret()),
            ],
        );
        let codes: Vec<Code> = check_promise(&leak, Span::default())
            .iter()
            .map(|d| d.code)
            .collect();
        assert_eq!(codes, [Code::SecretFlow]);
        for mode in [0o644, 0o601, 0o602] {
            let open = promise(
                "file",
                vec![("content", secret()), ("mode", Value::Int(mode))],
            );
            let codes: Vec<Code> = check_promise(&open, Span::default())
                .iter()
                .map(|d| d.code)
                .collect();
            assert_eq!(codes, [Code::SecretFileMode], "{mode:o}");
        }
        let no_mode = promise("file", vec![("content", secret())]);
        assert_eq!(check_promise(&no_mode, Span::default()).len(), 1);
        let line = promise("line", vec![("content", secret())]);
        assert_eq!(
            check_promise(&line, Span::default())
                .first()
                .map(|d| d.code),
            Some(Code::SecretFlow)
        );
    }
}
