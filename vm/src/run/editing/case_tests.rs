//! The placement rules as data: every `tests/editing/*.case` file is one
//! input file, one promise and the exact expected output (or the start of
//! the expected error). Adding a rule's case is adding a file.
//!
//! Format: sections introduced by `=== promise`, `=== input`, `=== output`
//! or `=== error`. The promise section holds `name = JSON value` lines
//! (`type` is `line`, `setting` or `block`); the text sections are taken
//! verbatim, and a last line `\ No newline at end of file` (as in diff)
//! drops the section's final newline.

use super::{block, line, setting, settled, EditResult};
use std::collections::BTreeMap;

struct Case {
    promise: BTreeMap<String, serde_json::Value>,
    input: String,
    expected: Result<String, String>,
}

fn sections(src: &str) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for l in src.split_inclusive('\n') {
        if let Some(name) = l.strip_prefix("=== ") {
            current = Some(name.trim().to_owned());
            out.entry(name.trim().to_owned()).or_default();
        } else if let Some(name) = &current {
            out.entry(name.clone()).or_default().push_str(l);
        }
    }
    for text in out.values_mut() {
        if let Some(cut) = text.strip_suffix("\\ No newline at end of file\n") {
            *text = cut.strip_suffix('\n').unwrap_or(cut).to_owned();
        }
    }
    out
}

fn parse(src: &str) -> Case {
    let s = sections(src);
    let promise = s
        .get("promise")
        .expect("a case has `=== promise`")
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (k, v) = l
                .split_once(" = ")
                .expect("promise lines are `name = JSON`");
            (
                k.trim().to_owned(),
                serde_json::from_str(v).expect("a JSON value"),
            )
        })
        .collect();
    let expected = match (s.get("output"), s.get("error")) {
        (Some(out), None) => Ok(out.clone()),
        (None, Some(err)) => Err(err.trim().to_owned()),
        _ => panic!("a case has exactly one of `=== output` and `=== error`"),
    };
    Case {
        promise,
        input: s.get("input").cloned().unwrap_or_default(),
        expected,
    }
}

fn run(case: &Case) -> EditResult {
    let p = &case.promise;
    let str_of = |k: &str| p.get(k).and_then(|v| v.as_str());
    let re = |k: &str| str_of(k).map(|r| regex::Regex::new(r).expect("case regex"));
    match str_of("type").expect("`type`") {
        "line" => {
            if let Some(wanted) = str_of("present") {
                let anchor = match (re("insert_after"), re("insert_before"), str_of("at")) {
                    (Some(r), _, _) => line::Anchor::After(r),
                    (_, Some(r), _) => line::Anchor::Before(r),
                    (_, _, Some("top")) => line::Anchor::Top,
                    _ => line::Anchor::Bottom,
                };
                settled(&case.input, |t| line::present(t, wanted, &anchor))
            } else if let Some(unwanted) = str_of("absent") {
                settled(&case.input, |t| line::absent(t, unwanted))
            } else {
                let pattern = str_of("replace").expect("`replace`");
                let r = re("replace").expect("regex");
                let with = str_of("with").expect("`with`");
                let comments = p
                    .get("replace_comments")
                    .and_then(|v| v.as_bool())
                    .unwrap_or(false);
                settled(&case.input, |t| {
                    line::replace(t, pattern, &r, with, comments)
                })
            }
        }
        "setting" => {
            let s = setting::Setting {
                key: str_of("key").expect("`key`"),
                value: str_of("value").expect("`value`"),
                separator: str_of("separator").unwrap_or("="),
                section: str_of("section"),
                comment: str_of("comment").unwrap_or("#"),
            };
            settled(&case.input, |t| setting::apply(t, &s))
        }
        "block" => {
            let lines: Vec<String> = p
                .get("lines")
                .expect("`lines`")
                .as_array()
                .expect("`lines` is a list")
                .iter()
                .map(|v| v.as_str().expect("strings").to_owned())
                .collect();
            let marker = str_of("marker").expect("`marker`");
            settled(&case.input, |t| block::apply(t, marker, &lines))
        }
        other => panic!("unknown type {other}"),
    }
}

#[test]
fn every_case_converges_to_its_expected_output() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/editing");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("tests/editing exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    names.sort();
    assert!(
        names.len() >= 20,
        "the case directory lost its cases: {names:?}"
    );
    let mut failures = Vec::new();
    for path in &names {
        let case = parse(&std::fs::read_to_string(path).expect("readable case"));
        let got = run(&case);
        let ok = match (&got, &case.expected) {
            (Ok(Some(edit)), Ok(want)) => edit.text == *want,
            (Ok(None), Ok(want)) => case.input == *want,
            (Err(why), Err(want)) => why.starts_with(want.as_str()),
            _ => false,
        };
        if !ok {
            failures.push(format!(
                "{}: got {got:?}, want {:?}",
                path.display(),
                case.expected
            ));
        }
        // Idempotence: the output, edited again, stays as it is.
        if let (Ok(want), Ok(_)) = (&case.expected, &got) {
            let again = Case {
                input: want.clone(),
                expected: Ok(want.clone()),
                promise: case.promise.clone(),
            };
            if !matches!(run(&again), Ok(None)) {
                failures.push(format!("{}: the output is edited again", path.display()));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
