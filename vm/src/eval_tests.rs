//! Tests of the shared evaluator (`converge-eval`) with what only the VM
//! has: probe facts gathered on the host and secrets opened with the host's
//! age identity (the keyring). The evaluator's own tests live with it.
#![allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]

use std::collections::BTreeSet;

use crate::bundle::format::{Body, Constant, Item, Operand, Promise};
use crate::bundle::instr::Instr;
use crate::eval::{Evaluated, Evaluator, Val};
use crate::facts::{Facts, Gathered};
use crate::run::resolve::Resolver;
use crate::secrets::Keyring;

fn body(constants: Vec<Constant>, programs: Vec<Vec<Instr>>) -> Body {
    Body::with_programs(constants, programs)
}

fn facts() -> Facts {
    Facts {
        hostname: "web01".into(),
        fqdn: "web01.example".into(),
        os: "linux".into(),
        os_family: "debian".into(),
        os_release: "12".into(),
        arch: "x86_64".into(),
        ipv4: Gathered::known(vec!["10.0.0.1".into(), "10.0.0.2".into()]),
        cpus: Gathered::known(4),
        memory_mb: Gathered::known(2048),
        weekday: "monday".into(),
        hour: 3,
    }
}

fn func(name: &str) -> Instr {
    Instr::Func(crate::bundle::functions::function(name).unwrap().id)
}

/// A probe fact that is unknown on this host (format 2.3) fails the
/// program that reads it and a class defined from it with the probe's
/// reason, marked unknown (the run skips what needs it); a class read
/// of it is unknown too; a known probe fact is pushed with its type.
#[test]
fn an_unknown_probe_fact_makes_what_reads_it_unknown() {
    use crate::bundle::format::ClassEntry;
    use crate::probes::{ProbeOutcome, ProbeValue, Probes};
    let mut body = body(
        vec![
            Constant::Str("dc".into()),
            Constant::Str("rack".into()),
            Constant::Word("eu".into()),
            Constant::Int(3),
            Constant::Str("^eu".into()),
        ],
        vec![
            vec![Instr::Probe(0), Instr::Match(4)],
            vec![Instr::Class(2)],
            vec![Instr::Probe(1), Instr::Const(3), Instr::Eq],
        ],
    );
    body.classes.0 = vec![ClassEntry {
        name: 2,
        program: Some(0),
    }];
    let probes = Probes::from_outcomes(vec![
        ProbeOutcome {
            name: "dc".into(),
            result: Err("it exited with status 1".into()),
            duration_ms: 1,
        },
        ProbeOutcome {
            name: "rack".into(),
            result: Ok(ProbeValue::Int(3)),
            duration_ms: 1,
        },
    ]);
    let facts = facts();
    let mut eval = Evaluator::new(&body, &facts).with_probes(&probes);
    let classes = eval.classes(&[]).unwrap();
    assert!(!classes.contains("eu"));
    assert_eq!(
        eval.class_failures().get("eu").map(String::as_str),
        Some("class `eu` is unknown: probe \"dc\" failed: it exited with status 1")
    );
    let err = eval.run(1, &classes, &[]).unwrap_err();
    assert!(eval.failed_on_unknown());
    assert!(err.0.starts_with("class `eu` is unknown"), "{err}");
    let err = eval.run(0, &classes, &[]).unwrap_err();
    assert!(eval.failed_on_unknown());
    assert_eq!(err.0, "probe \"dc\" failed: it exited with status 1");
    assert_eq!(eval.run(2, &classes, &[]), Ok(Val::Bool(true)));
    assert!(!eval.failed_on_unknown());
    // Without probes, a failure is not "unknown".
    let mut plain = Evaluator::new(&body, &facts);
    assert!(plain.run(0, &classes, &[]).is_err());
    assert!(
        plain.failed_on_unknown(),
        "no probe table: the fact is unknown too"
    );
}

/// A host enrolled in a temporary state directory, and a body whose
/// constants 0 and 1 are a sealed set for it and secret `db` in it.
fn secret_body(
    programs: Vec<Vec<Instr>>,
    hosts_recipient: bool,
) -> (tempfile::TempDir, crate::state::StateDir, Body) {
    use crate::secrets::sealing::sealed_set;
    let dir = tempfile::tempdir().unwrap();
    let state = crate::state::StateDir::open(&dir.path().join("state")).unwrap();
    let me = crate::identity::enroll(&state, Some("h"), "h", false).unwrap();
    let other = age::x25519::Identity::generate().to_public().to_string();
    let to = if hosts_recipient {
        me.age_recipient
    } else {
        other
    };
    let mut constants = sealed_set(0, &[&to], &[("db", "pa55-word")]);
    constants.extend([
        Constant::Str("password=".into()),
        Constant::List(crate::bundle::format::List(vec!["a".into(), "b".into()])),
        Constant::Str("x".into()),
        Constant::Str(String::new().into()),
    ]);
    let body = body(constants, programs);
    (dir, state, body)
}

/// Everything computed from a secret is secret, with its name: a
/// concatenation, a function of it, a template's `each`; a program that
/// reads none stays plain; `run` (guards, classes, promisers) refuses
/// a secret whatever was computed from it.
#[test]
fn values_computed_from_a_secret_stay_secret() {
    let upper = func("upper");
    let programs = vec![
        vec![Instr::Const(2), Instr::Const(1), Instr::Concat(2)],
        vec![Instr::Const(1), upper],
        vec![Instr::Elem(0), Instr::Const(1), Instr::Concat(2)],
        vec![Instr::Const(3), Instr::Each(2)],
        vec![Instr::Const(1), Instr::Const(4), Instr::Eq],
        vec![Instr::Const(2)],
    ];
    let (_dir, state, body) = secret_body(programs, true);
    let facts = facts();
    let mut eval = Evaluator::new(&body, &facts).with_secrets(Keyring::new(Some(&state)));
    let none = BTreeSet::new();
    let secret = |eval: &mut Evaluator<'_>, p: u32| match eval.run_sink(p, &none, &[]) {
        Ok(Evaluated::Secret(s)) => (s.expose().to_owned(), s.label()),
        other => panic!("program {p}: {other:?}"),
    };
    assert_eq!(
        secret(&mut eval, 0),
        ("password=pa55-word".into(), "<secret db>".into())
    );
    assert_eq!(
        secret(&mut eval, 1),
        ("PA55-WORD".into(), "<secret db>".into())
    );
    assert_eq!(
        secret(&mut eval, 3),
        ("apa55-wordbpa55-word".into(), "<secret db>".into())
    );
    assert_eq!(secret(&mut eval, 4), ("false".into(), "<secret db>".into()));
    assert_eq!(eval.sets_opened(), 1, "one sealed set, opened once");
    match eval.run_sink(5, &none, &[]) {
        Ok(Evaluated::Plain(Val::Str(s))) => assert_eq!(s, "password="),
        other => panic!("{other:?}"),
    }
    for p in [0, 3, 4] {
        let err = eval.run(p, &none, &[]).unwrap_err();
        assert!(
            err.0.contains("reads <secret db>, which only the content"),
            "{err}"
        );
        assert!(!err.0.contains("pa55"), "{err}");
    }
}

/// A program that fails after reading a secret does not say why (a
/// function's message may quote its argument); one that cannot open
/// the secret says exactly that, and no value.
#[test]
fn failures_never_quote_a_secret() {
    let split = func("split");
    let programs = vec![
        // split(secret, "") is refused with a message about its arguments.
        vec![Instr::Const(1), Instr::Const(5), split],
        vec![Instr::Const(1)],
    ];
    let (_dir, state, body) = secret_body(programs, true);
    let facts = facts();
    let mut eval = Evaluator::new(&body, &facts).with_secrets(Keyring::new(Some(&state)));
    let none = BTreeSet::new();
    let e = eval.run_sink(0, &none, &[]).unwrap_err();
    assert!(
        e.0.contains("fails on a value computed from <secret db>"),
        "{e}"
    );
    assert!(!e.0.contains("pa55"), "{e}");
    let (_dir, state, body) = secret_body(vec![vec![Instr::Const(1)]], false);
    let mut eval = Evaluator::new(&body, &facts).with_secrets(Keyring::new(Some(&state)));
    let err = eval.run_sink(0, &none, &[]).unwrap_err();
    assert_eq!(err.0, "this host is not a recipient of secret db");
    let mut eval = Evaluator::new(&body, &facts).with_secrets(Keyring::new(None));
    let err = eval.run_sink(0, &none, &[]).unwrap_err();
    assert!(
        err.0
            .starts_with("secret db: no identity: run `policyvm enroll`"),
        "{err}"
    );
}

/// A secret resolves to [`Value::Secret`] where it may be (a file's
/// content), and is refused, naming only the secret, as a promiser or
/// another attribute (a body that bypassed the verifier).
#[test]
fn a_secret_resolves_only_where_it_may_be() {
    use crate::bundle::format::{AttrValue, FixedList, List, SourceLoc};
    use crate::secrets::sealing::sealed_set;
    let dir = tempfile::tempdir().unwrap();
    let state = crate::state::StateDir::open(&dir.path().join("s")).unwrap();
    let me = crate::identity::enroll(&state, Some("h"), "h", false).unwrap();
    let mut constants = sealed_set(0, &[&me.age_recipient], &[("tls_key", "KEY-MATERIAL")]);
    constants.push(Constant::Str("/f".into()));
    let mut body = Body::with_programs(constants, Vec::new());
    body.sources = List(vec![SourceLoc { file: 2, line: 1 }]);
    let file = crate::schema::promise_type("file").unwrap();
    let attr = |name: &str| file.all_attrs().find(|a| a.name == name).unwrap().id;
    let promise = |promiser: u32, name: &str| {
        Promise::from(converge_format::bundle::format::PromiseParts {
            attrs: FixedList::from(vec![AttrValue {
                attr: attr(name),
                value: Operand::Item(Item::Const(1)),
            }]),
            ..converge_format::bundle::format::PromiseParts::new(file.id, Item::Const(promiser))
        })
    };
    let facts = Facts {
        hostname: "h".into(),
        fqdn: "h".into(),
        os: "linux".into(),
        os_family: "debian".into(),
        os_release: "12".into(),
        arch: "x86_64".into(),
        ipv4: Gathered::known(Vec::new()),
        cpus: Gathered::known(1),
        memory_mb: Gathered::known(1),
        weekday: "monday".into(),
        hour: 0,
    };
    let mut eval = Evaluator::new(&body, &facts).with_secrets(Keyring::new(Some(&state)));
    let mut resolver = Resolver::new(&body);
    let none = BTreeSet::new();
    let inst = resolver
        .resolve(&mut eval, 0, &promise(2, "content"), &none, &[])
        .unwrap();
    let content = inst.secret("content").unwrap();
    assert_eq!(content.expose(), "KEY-MATERIAL");
    assert_eq!(inst.get("content").unwrap().display(), "<secret tls_key>");
    assert_eq!(inst.str("content"), None, "a secret is never plain text");
    assert!(!format!("{inst:?}").contains("KEY-MATERIAL"));
    for (p, what) in [
        (promise(1, "content"), "promiser"),
        (promise(2, "owner"), "owner"),
    ] {
        let err = resolver.resolve(&mut eval, 0, &p, &none, &[]).unwrap_err();
        assert!(
            err.starts_with("<secret tls_key> may only be the content"),
            "{what}: {err}"
        );
    }
    assert_eq!(eval.sets_opened(), 1);
}
