//! Running one test: the policy is previewed for the test's host
//! ([`converge_eval::preview`], the VM's own evaluator) and each
//! expectation is checked against the resolved promises.

use converge_eval::instance::{Instance, Value};
use converge_eval::preview::{Activity, Preview, PreviewPromise, Resolution};
use converge_format::bundle::format::Body;
use converge_format::schema::{self, AttrType};

use super::model::{Check, Expectation, Expected, TestCase};

/// What one test found.
#[derive(Debug)]
pub struct TestResult {
    pub name: String,
    pub file: String,
    pub line: usize,
    /// Every expectation that does not hold (empty: the test passed).
    pub failures: Vec<Failure>,
    /// What the test could not decide but did not fail on: an expectation
    /// met by a promise whose activity depends on outcome classes of the
    /// run.
    pub notes: Vec<String>,
    pub duration: std::time::Duration,
}

impl TestResult {
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    pub fn location(&self) -> String {
        format!("{}:{}", self.file, self.line)
    }
}

/// One expectation that does not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// What failed: `expect file "/etc/motd"`, `expect no file "/x"`,
    /// `the second run` (`--run`).
    pub expectation: String,
    /// `web.test.policy:14`: the `expect` statement.
    pub location: String,
    /// What is wrong, in one line.
    pub message: String,
    pub expected: Option<String>,
    pub actual: Option<String>,
    /// A unified diff of expected and actual text, when both are texts of
    /// several lines.
    pub diff: Option<String>,
}

/// Runs `case` against `body`.
pub fn run(body: &Body, case: &TestCase) -> TestResult {
    let started = std::time::Instant::now();
    let mut failures = Vec::new();
    let mut notes = Vec::new();
    match converge_eval::preview(body, &case.facts, &case.probes, &case.defines) {
        Ok(preview) => {
            for e in &case.expectations {
                check_expectation(&preview, e, &mut failures, &mut notes);
            }
        }
        Err(e) => failures.push(Failure {
            expectation: "the policy".to_owned(),
            location: case.location(),
            message: format!("cannot be evaluated: {e}"),
            expected: None,
            actual: None,
            diff: None,
        }),
    }
    TestResult {
        name: case.name.clone(),
        file: case.file.clone(),
        line: case.line,
        failures,
        notes,
        duration: started.elapsed(),
    }
}

fn check_expectation(
    preview: &Preview,
    e: &Expectation,
    failures: &mut Vec<Failure>,
    notes: &mut Vec<String>,
) {
    let matching: Vec<&PreviewPromise> = preview
        .promises
        .iter()
        .filter(|p| p.kind == e.kind && p.promiser() == Some(e.promiser.as_str()))
        .collect();
    let fail = |message: String| Failure {
        expectation: if e.absent {
            format!("expect no {}", e.describe())
        } else {
            format!("expect {}", e.describe())
        },
        location: e.location.clone(),
        message,
        expected: None,
        actual: None,
        diff: None,
    };
    if e.absent {
        for p in matching {
            let message = match (&p.activity, &p.resolution) {
                (_, Resolution::Unknown(why)) => {
                    format!("cannot tell whether it is active on this host: {why}")
                }
                (
                    Activity::Conditional {
                        outcome_classes, ..
                    },
                    _,
                ) => format!(
                    "it is active when the run sets {} ({}); a test cannot know the run's outcomes",
                    classes(outcome_classes),
                    p.source
                ),
                _ => format!("it is active on this host ({})", p.source),
            };
            failures.push(fail(message));
        }
        return;
    }
    if matching.is_empty() {
        failures.push(fail(absent_message(preview, e)));
        return;
    }
    for p in matching {
        let inst = match &p.resolution {
            Resolution::Resolved(inst) => inst,
            Resolution::Unknown(why) => {
                failures.push(fail(format!("unknown on this host ({}): {why}", p.source)));
                continue;
            }
            Resolution::Failed(why) => {
                failures.push(fail(format!("it fails on this host ({}): {why}", p.source)));
                continue;
            }
        };
        if let Activity::Conditional {
            active_at_start,
            outcome_classes,
        } = &p.activity
        {
            notes.push(format!(
                "{} ({}) is {}conditional on {}: a test cannot know the run's outcomes",
                e.describe(),
                p.source,
                if *active_at_start {
                    "active at the start but "
                } else {
                    ""
                },
                classes(outcome_classes)
            ));
        }
        for check in &e.checks {
            if let Some(mut f) = check_value(inst, check) {
                f.expectation = format!("expect {}", e.describe());
                f.location = e.location.clone();
                failures.push(f);
            }
        }
    }
}

fn classes(names: &[String]) -> String {
    let quoted: Vec<String> = names.iter().map(|c| format!("`{c}`")).collect();
    format!(
        "outcome class{} {}",
        if names.len() == 1 { "" } else { "es" },
        quoted.join(", ")
    )
}

/// Why an expected promise is not there: nothing of that type and promiser
/// is active; with the closest promiser of that type, and the promises
/// whose promiser could not be resolved here.
fn absent_message(preview: &Preview, e: &Expectation) -> String {
    let same_kind: Vec<&str> = preview
        .promises
        .iter()
        .filter(|p| p.kind == e.kind)
        .filter_map(|p| p.promiser())
        .collect();
    let mut message = format!("no active {} on this host", e.describe());
    if let Some(close) = crate::suggest::did_you_mean(&e.promiser, same_kind.iter().copied()) {
        message.push_str(&format!("; did you mean {} {close:?}?", e.kind));
    }
    let unresolved: Vec<String> = preview
        .promises
        .iter()
        .filter(|p| p.kind == e.kind && p.promiser().is_none())
        .map(|p| match &p.resolution {
            Resolution::Unknown(why) | Resolution::Failed(why) => format!("{}: {why}", p.source),
            Resolution::Resolved(_) => p.source.to_string(),
        })
        .collect();
    if !unresolved.is_empty() {
        message.push_str(&format!(
            "; {} {} promise{} could not be resolved here ({})",
            unresolved.len(),
            e.kind,
            if unresolved.len() == 1 { "" } else { "s" },
            unresolved.join("; ")
        ));
    }
    message
}

/// The failure of one check on a resolved instance, if it fails.
fn check_value(inst: &Instance, check: &Check) -> Option<Failure> {
    let failure = |message: String, expected: Option<String>, actual: Option<String>| Failure {
        expectation: String::new(),
        location: String::new(),
        message,
        expected,
        actual,
        diff: None,
    };
    match check {
        Check::Equals {
            attr,
            value,
            default,
        } => {
            let ty = attr_type(inst.kind, attr);
            let actual = match get(inst, attr) {
                Some(v) => Actual::Set(v),
                None => match default {
                    Some(d) => Actual::Default(d),
                    None => Actual::Unset,
                },
            };
            let equal = match &actual {
                Actual::Set(v) => value_is(v, value),
                Actual::Default(d) => *d == value,
                Actual::Unset => false,
            };
            if equal {
                return None;
            }
            let shown_expected = show_expected(ty, value, attr);
            let shown_actual = match &actual {
                Actual::Set(v) => show_value(ty, v, attr),
                Actual::Default(d) => format!("{} (the default)", show_expected(ty, d, attr)),
                Actual::Unset => "not set (not managed)".to_owned(),
            };
            let mut f = failure(
                format!("`{attr}` is {shown_actual}, expected {shown_expected}"),
                Some(shown_expected),
                Some(shown_actual),
            );
            if let (Actual::Set(v), Expected::Text(want)) = (&actual, value) {
                if let Some(text) = text_of(v) {
                    f.diff = diff(want, &text);
                    if f.diff.is_some() {
                        f.message = format!("`{attr}` differs from the expected text");
                    }
                }
            }
            Some(f)
        }
        Check::Contains { attr, text } => {
            let Some(content) = get(inst, attr).and_then(text_of) else {
                return Some(failure(
                    format!("it sets no `{attr}` to look into"),
                    Some(format!("{attr} containing {text:?}")),
                    None,
                ));
            };
            if content.contains(text.as_str()) {
                return None;
            }
            Some(failure(
                format!("`{attr}` does not contain {text:?}"),
                Some(format!("contains {text:?}")),
                Some(content),
            ))
        }
        Check::Matches {
            attr,
            pattern,
            regex,
        } => {
            let Some(content) = get(inst, attr).and_then(text_of) else {
                return Some(failure(
                    format!("it sets no `{attr}` to look into"),
                    Some(format!("{attr} matching {pattern:?}")),
                    None,
                ));
            };
            if regex.is_match(&content) {
                return None;
            }
            Some(failure(
                format!("`{attr}` does not match {pattern:?}"),
                Some(format!("matches {pattern:?}")),
                Some(content),
            ))
        }
    }
}

/// An attribute of a resolved instance. A file's `content` is what the
/// VM writes: its `content`, else its rendered `template`, else its
/// embedded `source`.
fn get<'i>(inst: &'i Instance, attr: &str) -> Option<&'i Value> {
    match (inst.kind, attr) {
        ("file", "content") => inst
            .get("content")
            .or_else(|| inst.get("template"))
            .or_else(|| inst.get("source")),
        _ => inst.get(attr),
    }
}

/// What an instance has for an attribute.
enum Actual<'a> {
    Set(&'a Value),
    /// Not set: the attribute's default applies.
    Default(&'a Expected),
    Unset,
}

fn attr_type(kind: &str, attr: &str) -> Option<&'static AttrType> {
    schema::promise_type(kind)
        .and_then(|t| t.attr(attr))
        .map(|a| &a.ty)
}

/// Whether a resolved value is the expected one. A secret is compared as
/// it is shown (`<secret NAME>` in place of each secret's text: the test
/// never holds the plaintext).
fn value_is(v: &Value, e: &Expected) -> bool {
    match (v, e) {
        (Value::Int(a), Expected::Int(b)) => a == b,
        (Value::Bool(a), Expected::Bool(b)) => a == b,
        (Value::List(a), Expected::List(b)) => a == b,
        (v, Expected::Text(t)) => text_of(v).is_some_and(|s| s == *t),
        _ => false,
    }
}

/// The text of a value: a string, an embedded file (as UTF-8), a secret as
/// the preview shows it.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::Str(s) => Some(s.to_string()),
        Value::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::Secret(s) => Some(s.expose().to_owned()),
        Value::Int(_) | Value::Bool(_) | Value::List(_) | Value::Blob(_) => None,
    }
}

/// A value as a policy writes it: a mode in octal, a hidden attribute
/// (`password`) never shown.
fn show_value(ty: Option<&AttrType>, v: &Value, attr: &str) -> String {
    if schema::hides_value(attr) {
        return schema::HIDDEN_VALUE.to_owned();
    }
    match (ty, v) {
        (Some(AttrType::Mode), Value::Int(m)) => format!("0o{m:o}"),
        (Some(AttrType::Duration), Value::Int(s)) => format!("{s}s"),
        (Some(AttrType::Enum(_)), Value::Str(s)) => s.to_string(),
        (_, Value::Secret(s)) => s.label(),
        _ => v.display(),
    }
}

fn show_expected(ty: Option<&AttrType>, e: &Expected, attr: &str) -> String {
    if schema::hides_value(attr) {
        return schema::HIDDEN_VALUE.to_owned();
    }
    match (ty, e) {
        (Some(AttrType::Mode), Expected::Int(m)) => format!("0o{m:o}"),
        (Some(AttrType::Duration), Expected::Int(s)) => format!("{s}s"),
        (Some(AttrType::Enum(_)), Expected::Text(s)) => s.clone(),
        _ => e.show(),
    }
}

/// A unified diff of two texts when either has several lines.
pub fn diff(expected: &str, actual: &str) -> Option<String> {
    if !expected.contains('\n') && !actual.contains('\n') {
        return None;
    }
    Some(
        similar::TextDiff::from_lines(expected, actual)
            .unified_diff()
            .context_radius(3)
            .header("expected", "actual")
            .to_string(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_compare_by_their_shown_form() {
        assert!(value_is(&Value::Int(0o644), &Expected::Int(420)));
        assert!(value_is(
            &Value::Str("installed".into()),
            &Expected::Text("installed".into())
        ));
        assert!(value_is(
            &Value::Bytes(b"hi\n".as_slice().into()),
            &Expected::Text("hi\n".into())
        ));
        assert!(!value_is(&Value::Str("1".into()), &Expected::Int(1)));
        assert_eq!(
            show_value(Some(&AttrType::Mode), &Value::Int(0o600), "mode"),
            "0o600"
        );
        assert_eq!(
            show_value(Some(&AttrType::String), &Value::Str("x".into()), "password"),
            "<password>"
        );
    }

    #[test]
    fn a_diff_is_made_only_for_texts_of_several_lines() {
        assert_eq!(diff("a", "b"), None);
        let d = diff("a\nb\n", "a\nc\n").unwrap_or_default();
        assert!(d.contains("-b") && d.contains("+c"), "{d}");
    }
}
