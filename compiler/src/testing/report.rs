//! The output of `policyc test`: one line per test for people, a JSON
//! document for tools (`docs/schemas/converge-test-1.schema.json`), and
//! JUnit XML for CI servers.

use std::fmt::Write as _;

use serde_json::json;

use super::verdict::{Failure, TestResult};

/// `ok     name (file:line)` per test, the failures under the test that has
/// them, then the summary line.
pub fn human(results: &[TestResult]) -> String {
    let mut out = String::new();
    for r in results {
        let status = if r.passed() { "ok    " } else { "FAILED" };
        let _ = writeln!(out, "{status} {} ({})", r.name, r.location());
        for f in &r.failures {
            let _ = writeln!(out, "  {} ({}): {}", f.expectation, f.location, f.message);
            match &f.diff {
                Some(diff) => {
                    for line in diff.lines() {
                        let _ = writeln!(out, "    {line}");
                    }
                }
                None => {
                    if let Some(e) = &f.expected {
                        let _ = writeln!(out, "    expected: {}", indent(e));
                    }
                    if let Some(a) = &f.actual {
                        let _ = writeln!(out, "    actual:   {}", indent(a));
                    }
                }
            }
        }
        for note in &r.notes {
            let _ = writeln!(out, "  note: {note}");
        }
    }
    let _ = writeln!(out, "\n{}", summary(results));
    out
}

/// Later lines of a multi-line value, indented under the first.
fn indent(text: &str) -> String {
    text.trim_end_matches('\n')
        .replace('\n', "\n              ")
}

/// `test result: ok. 12 passed; 0 failed`.
pub fn summary(results: &[TestResult]) -> String {
    let failed = results.iter().filter(|r| !r.passed()).count();
    let passed = results.len().saturating_sub(failed);
    format!(
        "test result: {}. {passed} passed; {failed} failed",
        if failed == 0 { "ok" } else { "FAILED" }
    )
}

/// The JSON document (`converge-test/1`,
/// `docs/schemas/converge-test-1.schema.json`).
pub fn json(results: &[TestResult]) -> String {
    let failed = results.iter().filter(|r| !r.passed()).count();
    let tests: Vec<serde_json::Value> = results
        .iter()
        .map(|r| {
            json!({
                "name": r.name,
                "file": r.file,
                "line": r.line,
                "status": if r.passed() { "passed" } else { "failed" },
                "duration_ms": duration_ms(r),
                "failures": r.failures.iter().map(failure_json).collect::<Vec<_>>(),
                "notes": r.notes,
            })
        })
        .collect();
    let doc = json!({
        "format": "converge-test/1",
        "tests": tests,
        "summary": {
            "total": results.len(),
            "passed": results.len().saturating_sub(failed),
            "failed": failed,
        },
    });
    let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
    text.push('\n');
    text
}

fn failure_json(f: &Failure) -> serde_json::Value {
    json!({
        "expectation": f.expectation,
        "location": f.location,
        "message": f.message,
        "expected": f.expected,
        "actual": f.actual,
        "diff": f.diff,
    })
}

fn duration_ms(r: &TestResult) -> u64 {
    u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX)
}

/// JUnit XML: one `<testsuite>` per test file, one `<testcase>` per test
/// (its `classname` the file), a `<failure>` per failed test holding
/// every failed expectation.
pub fn junit(results: &[TestResult]) -> String {
    let mut files: Vec<&str> = Vec::new();
    for r in results {
        if !files.contains(&r.file.as_str()) {
            files.push(&r.file);
        }
    }
    let failed = results.iter().filter(|r| !r.passed()).count();
    let seconds = |d: std::time::Duration| format!("{:.3}", d.as_secs_f64());
    let total: std::time::Duration = results.iter().map(|r| r.duration).sum();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"policyc test\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" time=\"{}\">",
        results.len(),
        seconds(total)
    );
    for file in files {
        let in_file: Vec<&TestResult> = results.iter().filter(|r| r.file == file).collect();
        let failed = in_file.iter().filter(|r| !r.passed()).count();
        let time: std::time::Duration = in_file.iter().map(|r| r.duration).sum();
        let _ = writeln!(
            out,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\" errors=\"0\" skipped=\"0\" time=\"{}\">",
            escape(file),
            in_file.len(),
            seconds(time)
        );
        for r in in_file {
            let _ = write!(
                out,
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\" line=\"{}\" time=\"{}\"",
                escape(&r.name),
                escape(file),
                escape(file),
                r.line,
                seconds(r.duration)
            );
            if r.passed() && r.notes.is_empty() {
                out.push_str("/>\n");
                continue;
            }
            out.push_str(">\n");
            if let Some(first) = r.failures.first() {
                let mut text = String::new();
                for f in &r.failures {
                    let _ = writeln!(text, "{} ({}): {}", f.expectation, f.location, f.message);
                    if let Some(d) = &f.diff {
                        text.push_str(d);
                    } else {
                        if let Some(e) = &f.expected {
                            let _ = writeln!(text, "  expected: {e}");
                        }
                        if let Some(a) = &f.actual {
                            let _ = writeln!(text, "  actual:   {a}");
                        }
                    }
                }
                let _ = writeln!(
                    out,
                    "      <failure message=\"{}\" type=\"expectation\">{}</failure>",
                    escape(&format!("{}: {}", first.expectation, first.message)),
                    escape(&text)
                );
            }
            if !r.notes.is_empty() {
                let _ = writeln!(
                    out,
                    "      <system-out>{}</system-out>",
                    escape(&r.notes.join("\n"))
                );
            }
            out.push_str("    </testcase>\n");
        }
        out.push_str("  </testsuite>\n");
    }
    out.push_str("</testsuites>\n");
    out
}

/// Text as XML character data or an attribute value: the five markup
/// characters escaped, and the characters XML 1.0 cannot hold at all
/// (control characters but tab and newlines) replaced by U+FFFD, so a
/// rendered file holding any byte still gives a document parsers accept.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' => out.push(c),
            '\r' => out.push_str("&#13;"),
            c if (c as u32) < 0x20 || c == '\u{FFFE}' || c == '\u{FFFF}' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping_keeps_the_document_well_formed() {
        assert_eq!(escape("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c&apos;");
        assert_eq!(escape("x\u{1}y\tz\n"), "x\u{FFFD}y\tz\n");
    }
}
