//! Checking the `test` blocks of a `*.test.policy` file against the policy
//! it imports: every fact is a `sys.` fact or a declared probe fact with a
//! value of its type, every class in `define` exists, every expectation
//! names a promise type and attributes it has, with values of their types
//! (diagnostics `E1101`..`E1110`, with did-you-mean). What passes becomes
//! a [`TestCase`].

use std::collections::{BTreeMap, HashSet};

use converge_eval::eval::Val;
use converge_eval::facts::FactValue;
use converge_format::bundle::probe::ProbeType;
use converge_format::schema::{self, AttrRole, AttrSpec, AttrType, DefaultValue};
use converge_grammar::ast::{AttrStmt, Expect, Expr, ExprKind, TestDef, TestFact, TestStmt};
use converge_grammar::Span;

use super::model::{Check, Expectation, Expected, TestCase};
use crate::diagnostic::{with_article, Code, Diagnostic};
use crate::ir;
use crate::source::SourceDb;
use crate::suggest::did_you_mean;

/// The two checks on content that are not attributes.
const CONTENT_CHECKS: &[&str] = &["contains", "matches"];

/// What a test may name, from the policy under test.
#[derive(Debug)]
pub struct Known<'p> {
    pub program: &'p ir::Program,
    /// The groups of the inventory (`group_NAME` classes).
    pub groups: Vec<String>,
}

/// Checks one test; `None` (with diagnostics) when it has errors.
pub fn check_test(
    db: &SourceDb,
    test: &TestDef,
    known: &Known<'_>,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<TestCase> {
    let errors_before = diagnostics.iter().filter(|d| d.is_error()).count();
    let name = test.name.as_plain().unwrap_or_else(|| {
        diagnostics.push(
            Diagnostic::new(
                Code::TestExpectationValue,
                "a test's name must be a plain string",
                test.name_span,
                "this name uses interpolation",
            )
            .with_help("write the name literally"),
        );
        String::new()
    });
    let mut case = TestCase {
        name,
        file: db.name(test.span.file).to_owned(),
        line: db
            .get(test.span.file)
            .map_or(0, |f| f.line_col(test.span.start).0),
        span: test.span,
        facts: Default::default(),
        probes: Default::default(),
        defines: Vec::new(),
        root: None,
        expectations: Vec::new(),
    };
    let mut facts_at: Option<Span> = None;
    // Where each fact was first given, by its full name.
    let mut fact_spans: BTreeMap<String, Span> = BTreeMap::new();
    let mut root_at: Option<Span> = None;
    for stmt in &test.stmts {
        match stmt {
            TestStmt::Facts { facts, span } => {
                if let Some(first) = facts_at.replace(*span) {
                    diagnostics.push(twice("`facts`", *span, first));
                }
                for fact in facts {
                    check_fact(fact, known, &mut case, &mut fact_spans, diagnostics);
                }
            }
            TestStmt::Define { classes, .. } => {
                for class in classes {
                    check_class(&class.name, class.span, known, diagnostics);
                    case.defines.push(class.name.to_string());
                }
            }
            TestStmt::Root { path, span } => {
                if let Some(first) = root_at.replace(*span) {
                    diagnostics.push(twice("`root`", *span, first));
                }
                case.root = check_root(db, path, diagnostics);
            }
            TestStmt::Expect(expect) => {
                if let Some(e) = check_expect(db, expect, diagnostics) {
                    case.expectations.push(e);
                }
            }
            TestStmt::Error(_) => {}
        }
    }
    if test.stmts.iter().all(|s| !matches!(s, TestStmt::Expect(_))) {
        diagnostics.push(
            Diagnostic::new(
                Code::TestExpectsNothing,
                format!("test {:?} expects nothing", case.name),
                test.name_span,
                "no `expect` in this test",
            )
            .with_help("add `expect TYPE \"PROMISER\" { ... };` or `expect no TYPE \"PROMISER\";`: a test that checks nothing can never fail"),
        );
    }
    let errors_after = diagnostics.iter().filter(|d| d.is_error()).count();
    (errors_after == errors_before).then_some(case)
}

/// `file.test.policy:12`.
pub fn location(db: &SourceDb, span: Span) -> String {
    let line = db.get(span.file).map_or(0, |f| f.line_col(span.start).0);
    format!("{}:{line}", db.name(span.file))
}

fn twice(what: &str, span: Span, first: Span) -> Diagnostic {
    Diagnostic::new(
        Code::TestGivenTwice,
        format!("{what} is given twice in this test"),
        span,
        "given again here",
    )
    .with_secondary(first, "first given here")
    .with_help("give it once")
}

/// A fact of `facts { ... }`: `hostname` or `sys.hostname` (a `sys.`
/// fact), `datacenter` or `facts.datacenter` (a declared probe fact).
fn check_fact(
    fact: &TestFact,
    known: &Known<'_>,
    case: &mut TestCase,
    first: &mut BTreeMap<String, Span>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    let mut given_twice =
        |name: String, span: Span, diagnostics: &mut Vec<Diagnostic>| match first.get(&name) {
            Some(at) => diagnostics.push(twice(&format!("fact `{name}`"), span, *at)),
            None => {
                first.insert(name, span);
            }
        };
    let written: Vec<&str> = fact.name.iter().map(|i| i.name.as_str()).collect();
    let written = written.join(".");
    let name_span = match (fact.name.first(), fact.name.last()) {
        (Some(a), Some(b)) => Span::new(a.span.file, a.span.start, b.span.end),
        _ => fact.span,
    };
    let sys = if written.starts_with("sys.") {
        Some(written.clone())
    } else if written.starts_with("facts.") {
        None
    } else {
        schema::fact(&format!("sys.{written}")).map(|f| f.name.to_owned())
    };
    if let Some(full) = sys {
        let Some(spec) = schema::fact(&full) else {
            diagnostics.push(unknown_fact(&written, name_span, known));
            return;
        };
        let value = match (&spec.ty, &fact.value.kind) {
            (AttrType::String, ExprKind::Str(s)) => s.as_plain().map(FactValue::Str),
            (AttrType::Int, ExprKind::Int { value, .. }) => Some(FactValue::Int(*value)),
            (AttrType::List(_), ExprKind::List(items)) => strings(items).map(FactValue::List),
            _ => None,
        };
        let Some(value) = value else {
            diagnostics.push(fact_type(spec.name, &spec.ty.describe(), &fact.value));
            return;
        };
        given_twice(spec.name.to_owned(), name_span, diagnostics);
        case.facts.0.insert(spec.name.to_owned(), value);
        return;
    }
    let path = written.strip_prefix("facts.").unwrap_or(&written);
    let root = path.split('.').next().unwrap_or_default();
    let Some(probe) = known.program.probes.iter().find(|p| p.name == root) else {
        diagnostics.push(unknown_fact(&written, name_span, known));
        return;
    };
    let Ok(ty) = ProbeType::parse(&probe.ty) else {
        return;
    };
    // A field of a record or map probe may be given alone.
    let mut ty = &ty;
    for step in path.split('.').skip(1) {
        ty = match ty {
            ProbeType::Record(fields) => match fields.iter().find(|(n, _)| n == step) {
                Some((_, t)) => t,
                None => {
                    let names = fields.iter().map(|(n, _)| n.as_str());
                    let hint = did_you_mean(step, names)
                        .map(|s| format!("did you mean `{root}.{s}`?"))
                        .unwrap_or_else(|| "give the record's fields".to_owned());
                    diagnostics.push(
                        Diagnostic::new(
                            Code::UnknownTestFact,
                            format!("probe fact `facts.{root}` has no field `{step}`"),
                            name_span,
                            "no such field",
                        )
                        .with_help(hint),
                    );
                    return;
                }
            },
            ProbeType::Map(inner) => inner,
            _ => {
                diagnostics.push(fact_type(&format!("facts.{root}"), &probe.ty, &fact.value));
                return;
            }
        };
    }
    let mut values: Vec<(String, Val)> = Vec::new();
    if !probe_values(path, ty, &fact.value, &mut values) {
        diagnostics.push(fact_type(
            &format!("facts.{path}"),
            &describe_probe(ty),
            &fact.value,
        ));
        return;
    }
    for (p, v) in values {
        given_twice(format!("facts.{p}"), name_span, diagnostics);
        case.probes.0.insert(p, v);
    }
}

/// The values a probe fact of type `ty` given as `value` holds, by path
/// (a record or map flattened to `name.field`); `false` when it is not of
/// that type.
fn probe_values(path: &str, ty: &ProbeType, value: &Expr, out: &mut Vec<(String, Val)>) -> bool {
    match (ty, &value.kind) {
        (ProbeType::Str, ExprKind::Str(s)) => match s.as_plain() {
            Some(s) => out.push((path.to_owned(), Val::Str(s))),
            None => return false,
        },
        (ProbeType::Int, ExprKind::Int { value, .. }) => {
            out.push((path.to_owned(), Val::Int(*value)))
        }
        (ProbeType::Bool, ExprKind::Bool(b)) => out.push((path.to_owned(), Val::Bool(*b))),
        (ProbeType::List, ExprKind::List(items)) => match strings(items) {
            Some(l) => out.push((path.to_owned(), Val::List(l))),
            None => return false,
        },
        (ProbeType::Record(fields), ExprKind::Record(given)) => {
            for (name, v) in given {
                let Some((_, t)) = fields
                    .iter()
                    .find(|(n, _)| n.as_str() == name.name.as_str())
                else {
                    return false;
                };
                if !probe_values(&format!("{path}.{}", name.name), t, v, out) {
                    return false;
                }
            }
        }
        (ProbeType::Map(inner), ExprKind::Map(entries)) => {
            for (k, v) in entries {
                let Some(key) = plain(k) else { return false };
                if !probe_values(&format!("{path}.{key}"), inner, v, out) {
                    return false;
                }
            }
        }
        (ProbeType::Map(_), ExprKind::Record(given)) if given.is_empty() => {}
        _ => return false,
    }
    true
}

fn describe_probe(ty: &ProbeType) -> String {
    match ty {
        ProbeType::Str => "string".into(),
        ProbeType::Int => "int".into(),
        ProbeType::Bool => "bool".into(),
        ProbeType::List => "list<string>".into(),
        ProbeType::Map(inner) => format!("map<string, {}>", describe_probe(inner)),
        ProbeType::Record(_) => "a record".into(),
    }
}

fn unknown_fact(written: &str, span: Span, known: &Known<'_>) -> Diagnostic {
    let mut names: Vec<String> = schema::FACTS
        .iter()
        .map(|f| f.name.trim_start_matches("sys.").to_owned())
        .collect();
    names.extend(known.program.probes.iter().map(|p| p.name.clone()));
    let bare = written
        .strip_prefix("sys.")
        .or_else(|| written.strip_prefix("facts."))
        .unwrap_or(written);
    let hint = match did_you_mean(bare, names.iter().map(String::as_str)) {
        Some(s) => format!("did you mean `{s}`?"),
        None => format!(
            "the facts are {}, and the `fact` declarations of the policy",
            schema::FACTS
                .iter()
                .map(|f| f.name.trim_start_matches("sys."))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    Diagnostic::new(
        Code::UnknownTestFact,
        format!("there is no fact `{written}`"),
        span,
        "not a `sys.` fact nor a `fact` the policy declares",
    )
    .with_help(hint)
}

fn fact_type(name: &str, ty: &str, value: &Expr) -> Diagnostic {
    Diagnostic::new(
        Code::TestFactType,
        format!("fact `{name}` is {}", with_article(ty)),
        value.span,
        format!("not {}", with_article(ty)),
    )
    .with_help("give a literal of the fact's type (`\"text\"`, `4`, `[\"a\", \"b\"]`)")
}

/// A class of `define`: declared or defined by the policy, a hard class,
/// or a group of the inventory.
fn check_class(name: &str, span: Span, known: &Known<'_>, diagnostics: &mut Vec<Diagnostic>) {
    let declared = known.program.classes.iter().any(|c| c.name == name);
    let group = name
        .strip_prefix("group_")
        .is_some_and(|g| known.groups.iter().any(|k| k == g));
    if declared || group || schema::is_hard_class(name) {
        return;
    }
    let mut names: Vec<String> = known
        .program
        .classes
        .iter()
        .map(|c| c.name.clone())
        .collect();
    names.extend(schema::hard_class_names());
    names.extend(known.groups.iter().map(|g| format!("group_{g}")));
    let hint = did_you_mean(name, names.iter().map(String::as_str))
        .map(|s| format!("did you mean `{s}`?"))
        .unwrap_or_else(|| {
            "declare it in the policy (`class NAME;`) if a promise outcome or `--define` sets it"
                .to_owned()
        });
    diagnostics.push(
        Diagnostic::new(
            Code::UnknownTestClass,
            format!("there is no class `{name}`"),
            span,
            "not declared or defined by the policy, and no hard class",
        )
        .with_help(hint),
    );
}

/// `root = "fixtures/web"`: a plain relative path, resolved against the
/// test file's directory.
fn check_root(
    db: &SourceDb,
    path: &Expr,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<std::path::PathBuf> {
    let bad = |why: &str| {
        Diagnostic::new(
            Code::TestFixtureRoot,
            format!("a test's `root` must be {why}"),
            path.span,
            "this root",
        )
        .with_help("write `root = \"fixtures/NAME\";`, a directory next to the test file that `policyc test --run` copies and runs the VM on")
    };
    let Some(text) = plain(path) else {
        diagnostics.push(bad("a plain string"));
        return None;
    };
    let relative = std::path::Path::new(&text);
    if text.is_empty()
        || relative.is_absolute()
        || relative
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        diagnostics.push(bad("a relative path inside the policy tree, without `..`"));
        return None;
    }
    let file = db.get(path.span.file)?;
    let dir = file.path.parent().unwrap_or(std::path::Path::new("."));
    let full = dir.join(relative);
    if !full.is_dir() {
        diagnostics.push(bad(&format!(
            "a directory; `{}` is not one",
            full.display()
        )));
        return None;
    }
    Some(full)
}

fn check_expect(
    db: &SourceDb,
    expect: &Expect,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Expectation> {
    let Some(pt) = schema::promise_type(&expect.kind.name) else {
        let names = schema::PROMISE_TYPES.iter().map(|t| t.name);
        let hint = did_you_mean(&expect.kind.name, names)
            .map(|s| format!("did you mean `{s}`?"))
            .unwrap_or_else(|| {
                format!(
                    "the promise types are {}",
                    schema::PROMISE_TYPES
                        .iter()
                        .map(|t| t.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            });
        diagnostics.push(
            Diagnostic::new(
                Code::UnknownTestPromiseType,
                format!("there is no promise type `{}`", expect.kind.name),
                expect.kind.span,
                "unknown promise type",
            )
            .with_help(hint),
        );
        return None;
    };
    let Some(promiser) = expect.promiser.as_plain() else {
        diagnostics.push(
            Diagnostic::new(
                Code::TestExpectationValue,
                "an expected promiser must be a plain string",
                expect.promiser_span,
                "this promiser uses interpolation",
            )
            .with_help("write the promiser as the resolved promise has it, literally"),
        );
        return None;
    };
    let mut checks = Vec::new();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut first_at: BTreeMap<&str, Span> = BTreeMap::new();
    for stmt in &expect.attrs {
        let attr = match stmt {
            AttrStmt::Set(attr) => attr,
            AttrStmt::Use(u) => {
                diagnostics.push(
                    Diagnostic::new(
                        Code::TestExpectationValue,
                        "`use` cannot appear in an expectation",
                        u.span,
                        "a body is not a value to compare",
                    )
                    .with_help("write each expected attribute"),
                );
                continue;
            }
            AttrStmt::Error(_) => continue,
        };
        let name = attr.name.name.as_str();
        if !seen.insert(name) {
            let first = first_at.get(name).copied().unwrap_or(attr.name.span);
            diagnostics.push(twice(&format!("`{name}`"), attr.name.span, first));
            continue;
        }
        first_at.insert(name, attr.name.span);
        if CONTENT_CHECKS.contains(&name) {
            if let Some(check) = content_check(pt, name, &attr.value, diagnostics) {
                checks.push(check);
            }
            continue;
        }
        let Some(spec) = pt.attr(name) else {
            let mut names: Vec<&str> = pt.all_attrs().map(|a| a.name).collect();
            names.extend(CONTENT_CHECKS);
            let hint = did_you_mean(name, names.iter().copied())
                .map(|s| format!("did you mean `{s}`?"))
                .unwrap_or_else(|| format!("`{}` promises have {}", pt.name, names.join(", ")));
            diagnostics.push(
                Diagnostic::new(
                    Code::UnknownTestAttribute,
                    format!("`{}` promises have no attribute `{name}`", pt.name),
                    attr.name.span,
                    "unknown attribute",
                )
                .with_help(hint),
            );
            continue;
        };
        if pt.name == "file" && matches!(name, "template" | "source") {
            diagnostics.push(
                Diagnostic::new(
                    Code::UnknownTestAttribute,
                    format!("a test checks what a file's `{name}` renders, not its path"),
                    attr.name.span,
                    "checked as the file's content",
                )
                .with_help("check the content the VM writes with `content = \"...\";`, `contains` or `matches`"),
            );
            continue;
        }
        if spec.role == AttrRole::Relation || matches!(spec.ty, AttrType::Ref) {
            diagnostics.push(
                Diagnostic::new(
                    Code::UnknownTestAttribute,
                    format!("`{name}` cannot be checked by a test"),
                    attr.name.span,
                    "not a value of the resolved promise",
                )
                .with_help("a test checks what a promise converges to; `policyc explain` shows the order and the outcome classes"),
            );
            continue;
        }
        match expected(spec, &attr.value) {
            Ok(value) => checks.push(Check::Equals {
                attr: spec.name,
                value,
                default: default_of(spec),
            }),
            Err(d) => diagnostics.push(d),
        }
    }
    Some(Expectation {
        absent: expect.absent,
        kind: pt.name,
        promiser,
        checks,
        location: location(db, expect.span),
    })
}

/// The attribute `contains` and `matches` look into: a promise type's
/// `content`.
fn content_check(
    pt: &schema::PromiseType,
    check: &str,
    value: &Expr,
    diagnostics: &mut Vec<Diagnostic>,
) -> Option<Check> {
    let Some(content) = pt.attr("content") else {
        diagnostics.push(
            Diagnostic::new(
                Code::UnknownTestAttribute,
                format!(
                    "`{check}` checks a content, and `{}` promises have none",
                    pt.name
                ),
                value.span,
                "no content to look into",
            )
            .with_help("compare an attribute with `NAME = VALUE;`"),
        );
        return None;
    };
    let Some(text) = plain(value) else {
        diagnostics.push(
            Diagnostic::new(
                Code::TestExpectationValue,
                format!("`{check}` takes a plain string"),
                value.span,
                "not a plain string",
            )
            .with_help("write the text literally; a raw string `r\"...\"` keeps backslashes"),
        );
        return None;
    };
    if check == "contains" {
        return Some(Check::Contains {
            attr: content.name,
            text,
        });
    }
    match converge_format::bundle::limits::compile_regex(&text) {
        Ok(regex) => Some(Check::Matches {
            attr: content.name,
            pattern: text,
            regex,
        }),
        Err(e) => {
            diagnostics.push(
                Diagnostic::new(
                    Code::TestExpectationValue,
                    "`matches` takes a regular expression",
                    value.span,
                    "not a regular expression",
                )
                .with_note(e)
                .with_help(
                    "the syntax is that of the `regex` crate; write it as a raw string `r\"...\"`",
                ),
            );
            None
        }
    }
}

/// The expected value of attribute `spec` written as `value`.
fn expected(spec: &AttrSpec, value: &Expr) -> Result<Expected, Diagnostic> {
    let wrong = |why: String| {
        Diagnostic::new(
            Code::TestExpectationValue,
            format!("`{}` is {}", spec.name, with_article(&spec.ty.describe())),
            value.span,
            why,
        )
        .with_help("write a literal of the attribute's type, as the policy would")
    };
    let got = || format!("not {}", with_article(&spec.ty.describe()));
    match &spec.ty {
        AttrType::String => plain(value).map(Expected::Text).ok_or_else(|| wrong(got())),
        AttrType::Int | AttrType::Mode => match value.kind {
            ExprKind::Int { value, .. } => Ok(Expected::Int(value)),
            _ => Err(wrong(got())),
        },
        AttrType::Duration => match value.kind {
            ExprKind::Duration(secs) => Ok(Expected::Int(i64::try_from(secs).unwrap_or(i64::MAX))),
            ExprKind::Int { value, .. } => Ok(Expected::Int(value)),
            _ => Err(wrong(got())),
        },
        AttrType::Bool => match value.kind {
            ExprKind::Bool(b) => Ok(Expected::Bool(b)),
            _ => Err(wrong(got())),
        },
        AttrType::Class => word(value).map(Expected::Text).ok_or_else(|| wrong(got())),
        AttrType::Enum(words) => {
            let w = word(value).ok_or_else(|| wrong(got()))?;
            check_word(spec, words, &w, value.span)?;
            Ok(Expected::Text(w))
        }
        AttrType::List(inner) => {
            let ExprKind::List(items) = &value.kind else {
                return Err(wrong(got()));
            };
            let mut out = Vec::new();
            for item in items {
                let w = word(item).ok_or_else(|| wrong(got()))?;
                if let AttrType::Enum(words) = inner {
                    check_word(spec, words, &w, item.span)?;
                }
                out.push(w);
            }
            Ok(Expected::List(out))
        }
        AttrType::Ref => Err(wrong(got())),
    }
}

fn check_word(spec: &AttrSpec, words: &[&str], w: &str, span: Span) -> Result<(), Diagnostic> {
    if words.contains(&w) {
        return Ok(());
    }
    let hint = did_you_mean(w, words.iter().copied())
        .map(|s| format!("did you mean `{s}`?"))
        .unwrap_or_else(|| format!("write one of {}", words.join(", ")));
    Err(Diagnostic::new(
        Code::TestExpectationValue,
        format!("`{w}` is not a value of `{}`", spec.name),
        span,
        format!("not one of {}", words.join(", ")),
    )
    .with_help(hint))
}

/// The value an attribute has when a promise does not set it, if it has
/// one (not set otherwise means "not managed").
fn default_of(spec: &AttrSpec) -> Option<Expected> {
    Some(match spec.default {
        DefaultValue::Unmanaged => return None,
        DefaultValue::Str(s) | DefaultValue::Word(s) => Expected::Text(s.to_owned()),
        DefaultValue::Int(i) => Expected::Int(i),
        DefaultValue::Bool(b) => Expected::Bool(b),
        DefaultValue::Mode(m) => Expected::Int(i64::from(m)),
        DefaultValue::Duration(d) => Expected::Int(i64::try_from(d).unwrap_or(i64::MAX)),
        DefaultValue::EmptyList => Expected::List(Vec::new()),
        DefaultValue::Words(w) => Expected::List(w.iter().map(|s| (*s).to_owned()).collect()),
    })
}

/// A plain string literal's text.
fn plain(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Str(s) => s.as_plain(),
        _ => None,
    }
}

/// A bare word (`installed`) or a plain string.
fn word(e: &Expr) -> Option<String> {
    match &e.kind {
        ExprKind::Path(p) if p.len() == 1 => p.first().map(|i| i.name.to_string()),
        _ => plain(e),
    }
}

fn strings(items: &[Expr]) -> Option<Vec<String>> {
    items.iter().map(plain).collect()
}
