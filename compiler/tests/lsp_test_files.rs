//! `policyc lsp` on a test file (`*.test.policy`, LANGUAGE.md section
//! 16): it is checked as `policyc test` checks it, with the test grammar and
//! the test checks (E1101-E1110), not parsed as policy, which reported
//! every `test` block as a syntax error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use common::{codes, Client};

const POLICY: &str = r#"class web = sys.hostname =~ r"^web[0-9]+$";

policy {
  when web {
    file "/etc/motd" { content = "web\n"; mode = 0o644; }
  }
}
"#;

const GOOD: &str = r#"import "site.policy";

test "a web host gets the motd" {
  facts { sys.hostname = "web01"; }
  expect file "/etc/motd" { content = "web\n"; };
}
"#;

/// `canary` is declared nowhere: E1104 at the `define` (line 3, 0-based).
const UNKNOWN_CLASS: &str = r#"import "site.policy";

test "a class nobody declares" {
  define [canary];
  expect no file "/etc/motd";
}
"#;

#[test]
fn a_test_file_is_checked_as_tests_not_as_policy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("site.policy"), POLICY).unwrap();
    let path = dir.path().join("web.test.policy");
    std::fs::write(&path, GOOD).unwrap();
    let mut client = Client::start();
    client.initialize(dir.path());
    let uri = client.open(&path, GOOD);
    let diagnostics = client.diagnostics(&uri, 1);
    assert!(
        diagnostics.is_empty(),
        "a valid test file has no diagnostics: {diagnostics:#?}"
    );
    client.change(&uri, 2, UNKNOWN_CLASS);
    let diagnostics = client.diagnostics(&uri, 2);
    let found = codes(&diagnostics);
    assert!(
        found
            .iter()
            .any(|(code, line, _)| code == "E1104" && *line == 3),
        "E1104 at the define: {found:?}"
    );
    assert!(
        found.iter().all(|(code, _, _)| code.starts_with("E11")),
        "only the test checks speak, no syntax errors of the policy grammar: {found:?}"
    );
    assert!(client.shutdown().success());
}
