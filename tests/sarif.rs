//! `policyc check --format sarif` as GitHub code scanning reads it: every log
//! the UI corpus produces validates against the OASIS SARIF 2.1.0 schema
//! (vendored in tests/sarif/) and breaks none of the rules the SARIF
//! Multitool applies for GitHub (checked here in Rust, and by the real
//! Multitool where it is installed). Locations are relative to the
//! repository (`%SRCROOT%`), a standard-library diagnostic is placed at the
//! user's call, and an unreadable input still gives a valid log.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use converge::{binary, repo_root};
use serde_json::Value;

fn schema() -> jsonschema::Validator {
    let text =
        std::fs::read_to_string(repo_root().join("tests/sarif/sarif-schema-2.1.0.json")).unwrap();
    jsonschema::validator_for(&serde_json::from_str(&text).unwrap()).unwrap()
}

fn schema_errors(validator: &jsonschema::Validator, log: &Value) -> Vec<String> {
    validator
        .iter_errors(log)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect()
}

/// Runs `policyc check --format sarif ARGS` in `dir`; the log and the exit
/// code.
fn sarif_in(dir: &Path, args: &[&str]) -> (Value, Option<i32>) {
    let out = Command::new(binary("policyc"))
        .current_dir(dir)
        .args(["check", "--format", "sarif"])
        .args(args)
        .output()
        .unwrap();
    let log = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (log, out.status.code())
}

/// Every `.policy` file of the UI corpus, relative to the repository root.
fn ui_files() -> Vec<String> {
    let mut files = Vec::new();
    let mut pending = vec![repo_root().join("tests/ui")];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "policy") {
                let relative = path.strip_prefix(repo_root()).unwrap();
                files.push(relative.to_string_lossy().into_owned());
            }
        }
    }
    files.sort();
    assert!(files.len() > 50, "the UI corpus is missing: {files:?}");
    files
}

/// The SARIF log of each UI case, checked from `tests/ui` (a subdirectory
/// of the repository, so `%SRCROOT%` is the git top level above it).
fn ui_logs() -> Vec<(String, Value)> {
    let ui = repo_root().join("tests/ui");
    ui_files()
        .into_iter()
        .map(|file| {
            let name = file.strip_prefix("tests/ui/").unwrap().to_owned();
            let (log, _) = sarif_in(&ui, &[&name]);
            (file, log)
        })
        .collect()
}

/// The rules the SARIF Multitool applies for GitHub code scanning
/// (`--rule-kind Gh;Ghas`: GH1001-GH1007, GH2012 and the GHAS ones), plus
/// the project's own: no absolute `/...` URI, no `../` out of the root.
fn github_rule_violations(log: &Value) -> Vec<String> {
    let mut bad = Vec::new();
    let runs = log["runs"].as_array().cloned().unwrap_or_default();
    // GH1004: default limits of code scanning.
    if runs.len() > 5 {
        bad.push(format!("GH1004: {} runs", runs.len()));
    }
    for run in &runs {
        let driver = &run["tool"]["driver"];
        // GH1018 / SARIF2005: the tool names itself and where to learn more.
        for key in ["name", "version", "informationUri"] {
            if driver[key].as_str().is_none_or(str::is_empty) {
                bad.push(format!("GH1018: driver has no {key}"));
            }
        }
        if !is_absolute_uri(driver["informationUri"].as_str().unwrap_or("")) {
            bad.push(format!(
                "driver.informationUri {}",
                driver["informationUri"]
            ));
        }
        let rules = driver["rules"].as_array().cloned().unwrap_or_default();
        if rules.len() > 1000 {
            bad.push(format!("GH1004: {} rules", rules.len()));
        }
        for rule in &rules {
            let id = rule["id"].as_str().unwrap_or("?");
            // GH2012: what code scanning shows for a rule.
            for key in ["shortDescription", "fullDescription", "help"] {
                if rule[key]["text"]
                    .as_str()
                    .is_none_or(|t| t.trim().is_empty())
                {
                    bad.push(format!("GH2012: rule {id} has no {key}.text"));
                }
            }
            if rule["help"]["markdown"]
                .as_str()
                .is_none_or(|t| t.trim().is_empty())
            {
                bad.push(format!("rule {id} has no help.markdown"));
            }
            if !is_absolute_uri(rule["helpUri"].as_str().unwrap_or("")) {
                bad.push(format!("rule {id}: helpUri {}", rule["helpUri"]));
            }
        }
        let base_ids = &run["originalUriBaseIds"];
        let results = run["results"].as_array().cloned().unwrap_or_default();
        if results.len() > 1000 {
            bad.push(format!("GH1004: {} results", results.len()));
        }
        for (i, result) in results.iter().enumerate() {
            // GH1007: a flattened message.
            if result["message"]["text"].as_str().is_none_or(str::is_empty) {
                bad.push(format!("GH1007: result {i} has no message.text"));
            }
            // GH1001: at least one location; GH1004: at most 10.
            let locations = result["locations"].as_array().cloned().unwrap_or_default();
            if locations.is_empty() {
                bad.push(format!("GH1001: result {i} has no location"));
            }
            if locations.len() > 10 {
                bad.push(format!(
                    "GH1004: result {i} has {} locations",
                    locations.len()
                ));
            }
            // GH1002: no thread flows (none are written, so none by index).
            if !result["codeFlows"].is_null() {
                bad.push(format!("GH1002: result {i} has code flows"));
            }
            let related = result["relatedLocations"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            for (where_, location) in locations
                .iter()
                .map(|l| ("location", l))
                .chain(related.iter().map(|l| ("related location", l)))
            {
                let physical = &location["physicalLocation"];
                let artifact = &physical["artifactLocation"];
                let uri = artifact["uri"].as_str().unwrap_or("");
                // GH1001/GH1003: a file and a region with a start line.
                if uri.is_empty() {
                    bad.push(format!("GH1001: result {i} {where_} has no uri"));
                }
                if physical["region"]["startLine"]
                    .as_u64()
                    .is_none_or(|l| l == 0)
                {
                    bad.push(format!("GH1003: result {i} {where_} has no startLine"));
                }
                // GH1005/GH1006: a relative reference, or a file path.
                if is_absolute_uri(uri) && !uri.starts_with("file:///") {
                    bad.push(format!("GH1005: result {i} {where_} uri {uri}"));
                }
                if uri.starts_with('/') || uri.split('/').any(|part| part == "..") {
                    bad.push(format!("result {i} {where_}: uri {uri} leaves the root"));
                }
                match artifact["uriBaseId"].as_str() {
                    Some(base) if base_ids[base]["uri"].is_string() => {}
                    Some(base) => {
                        bad.push(format!("uriBaseId {base} is not in originalUriBaseIds"))
                    }
                    None if uri.starts_with("file:///") => {}
                    None => bad.push(format!(
                        "result {i} {where_}: relative {uri} without uriBaseId"
                    )),
                }
            }
        }
    }
    bad
}

/// `scheme:...` with an RFC 3986 scheme.
fn is_absolute_uri(uri: &str) -> bool {
    match uri.split_once(':') {
        Some((scheme, rest)) => {
            !rest.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

#[test]
fn every_ui_log_is_valid_sarif_that_github_accepts() {
    let validator = schema();
    let mut problems = Vec::new();
    let mut results = 0;
    for (file, log) in ui_logs() {
        for e in schema_errors(&validator, &log) {
            problems.push(format!("{file}: schema: {e}"));
        }
        for e in github_rule_violations(&log) {
            problems.push(format!("{file}: {e}"));
        }
        let run = &log["runs"][0];
        results += run["results"].as_array().unwrap().len();
        // Locations are relative to the repository, never to `tests/ui`.
        for result in run["results"].as_array().unwrap() {
            let uri = result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap();
            if uri != file && !uri.starts_with("tests/ui/") && !uri.starts_with("std/") {
                problems.push(format!("{file}: result at {uri}"));
            }
        }
    }
    assert!(results > 50, "the corpus gave only {results} results");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_rule_checks_catch_what_the_multitool_reported() {
    // The log policyc wrote before issue 23, in miniature: a rule without
    // descriptions, an absolute path, a `../` path, a result without a
    // location.
    let old: Value = serde_json::json!({
        "version": "2.1.0",
        "runs": [{
            "tool": { "driver": { "name": "policyc", "version": "0.1.0",
                "rules": [{ "id": "E0001", "shortDescription": { "text": "unexpected token" } }] } },
            "results": [
                { "ruleId": "E0001", "message": { "text": "x" }, "locations": [
                    { "physicalLocation": { "artifactLocation": { "uri": "/tmp/a.policy" }, "region": { "startLine": 1 } } }] },
                { "ruleId": "E0001", "message": { "text": "x" }, "locations": [
                    { "physicalLocation": { "artifactLocation": { "uri": "../x.policy" }, "region": { "startLine": 1 } } }] },
                { "ruleId": "E0001", "message": { "text": "" }, "locations": [] }
            ]
        }]
    });
    let found = github_rule_violations(&old).join("\n");
    for expected in [
        "GH1018: driver has no informationUri",
        "GH2012: rule E0001 has no fullDescription.text",
        "GH2012: rule E0001 has no help.text",
        "rule E0001: helpUri",
        "uri /tmp/a.policy leaves the root",
        "uri ../x.policy leaves the root",
        "GH1001: result 2 has no location",
        "GH1007: result 2 has no message.text",
    ] {
        assert!(found.contains(expected), "missing {expected:?} in\n{found}");
    }
}

/// A temporary "repository": a `.git` directory at the top.
fn repository() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let top = dir.path().canonicalize().unwrap();
    std::fs::create_dir(top.join(".git")).unwrap();
    std::fs::create_dir_all(top.join("policy/sub")).unwrap();
    (dir, top)
}

const BROKEN: &str = "policy {\n  file \"/etc/motd\" { content = 1; }\n}\n";

#[test]
fn locations_are_relative_to_the_git_top_level_from_a_subdirectory() {
    let (_dir, top) = repository();
    std::fs::write(top.join("policy/site.policy"), BROKEN).unwrap();
    let (log, code) = sarif_in(&top.join("policy/sub"), &["../site.policy"]);
    assert_eq!(code, Some(1));
    let run = &log["runs"][0];
    let artifact = &run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(artifact["uri"], "policy/site.policy");
    assert_eq!(artifact["uriBaseId"], "%SRCROOT%");
    let root_uri = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
        .as_str()
        .unwrap();
    assert_eq!(root_uri, format!("file://{}/", top.display()));
    assert!(
        github_rule_violations(&log).is_empty(),
        "{:?}",
        github_rule_violations(&log)
    );

    // An absolute path under the root is made relative too; `--sarif-root`
    // moves the root.
    let absolute = top.join("policy/site.policy");
    let (log, _) = sarif_in(
        &top,
        &[absolute.to_str().unwrap(), "--sarif-root", "policy"],
    );
    let artifact =
        &log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(artifact["uri"], "site.policy");
}

#[test]
fn a_file_outside_the_root_keeps_an_absolute_file_uri() {
    let (_dir, top) = repository();
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().canonicalize().unwrap().join("x.policy");
    std::fs::write(&file, BROKEN).unwrap();
    let (log, _) = sarif_in(&top, &[file.to_str().unwrap()]);
    let artifact =
        &log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"];
    assert_eq!(artifact["uri"], format!("file://{}", file.display()));
    assert!(artifact["uriBaseId"].is_null());
    assert!(schema_errors(&schema(), &log).is_empty());
}

#[test]
fn a_stdlib_diagnostic_is_placed_at_the_users_call() {
    let (_dir, top) = repository();
    std::fs::write(
        top.join("policy/site.policy"),
        "import \"std/services.policy\";\npolicy {\n  service_running(name = \"cron\");\n  service_stopped(name = \"cron\");\n}\n",
    )
    .unwrap();
    let (log, code) = sarif_in(&top, &["policy/site.policy"]);
    assert_eq!(code, Some(1));
    let result = &log["runs"][0]["results"][0];
    assert_eq!(result["ruleId"], "E0301");
    let location = &result["locations"][0]["physicalLocation"];
    assert_eq!(location["artifactLocation"]["uri"], "policy/site.policy");
    assert_eq!(location["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(location["region"]["startLine"], 3);
    let related = result["relatedLocations"].as_array().unwrap();
    let stdlib: Vec<&Value> = related
        .iter()
        .filter(|l| l["physicalLocation"]["artifactLocation"]["uri"] == "std/services.policy")
        .collect();
    assert_eq!(stdlib.len(), 2, "{related:?}");
    assert!(stdlib
        .iter()
        .all(|l| l["physicalLocation"]["artifactLocation"]["uriBaseId"] == "%STDLIB%"));
    assert!(schema_errors(&schema(), &log).is_empty());
    assert!(
        github_rule_violations(&log).is_empty(),
        "{:?}",
        github_rule_violations(&log)
    );
}

#[test]
fn an_unreadable_file_gives_a_valid_log_with_the_error() {
    let (_dir, top) = repository();
    let (log, code) = sarif_in(&top, &["policy/missing.policy"]);
    assert_eq!(code, Some(66));
    assert!(schema_errors(&schema(), &log).is_empty(), "{log}");
    let run = &log["runs"][0];
    assert_eq!(run["results"], serde_json::json!([]));
    let invocation = &run["invocations"][0];
    assert_eq!(invocation["executionSuccessful"], false);
    let notification = &invocation["toolExecutionNotifications"][0];
    assert_eq!(notification["level"], "error");
    let text = notification["message"]["text"].as_str().unwrap();
    assert!(text.contains("policy/missing.policy"), "{text}");
}

/// The real SARIF Multitool (`npm install -g @microsoft/sarif-multitool`,
/// as `.ci/run` does) with the GitHub rules, over the UI corpus's logs.
#[test]
#[ignore = "needs sarif-multitool"]
fn the_sarif_multitool_reports_no_github_errors() {
    let tool = converge::support::find_tool("sarif-multitool").unwrap_or_else(|| {
        panic!("this test needs `sarif-multitool` (npm install -g @microsoft/sarif-multitool)")
    });
    let dir = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for (i, (_, log)) in ui_logs().into_iter().enumerate() {
        let path = dir.path().join(format!("ui-{i:03}.sarif"));
        std::fs::write(&path, log.to_string()).unwrap();
        inputs.push(path);
    }
    let output = dir.path().join("validation.sarif");
    // The npm wrapper hands its arguments to a shell: the `;` of the rule
    // kinds must be quoted for it.
    let status = Command::new(tool)
        .args([
            "validate",
            "--rule-kind",
            "'Gh;Ghas;Sarif'",
            "--log",
            "ForceOverwrite",
            "-o",
        ])
        .arg(&output)
        .args(&inputs)
        .status()
        .unwrap();
    assert!(status.success(), "sarif-multitool failed: {status}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&output).unwrap()).unwrap();
    let findings: Vec<String> = report["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| format!("{} {}: {}", r["level"], r["ruleId"], r["message"]))
        .collect();
    assert!(findings.is_empty(), "{}", findings.join("\n"));
}
