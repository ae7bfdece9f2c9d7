//! `*.test.policy` files (LANGUAGE.md section 16): the `test` blocks parse
//! with spans, their words are contextual (not keywords), and mistakes are
//! recovered per statement.

#![allow(clippy::unwrap_used, clippy::panic)]

use converge_grammar::ast::{AttrStmt, ExprKind, TestItem, TestStmt};
use converge_grammar::{parse, parse_tests, FileId, SyntaxErrorKind};

const SRC: &str = r#"import "../site.policy";

test "shop web hosts serve TLS" {
  facts { hostname = "shop-web01"; sys.cpus = 4; datacenter = "eu-1"; }
  define [canary, web];
  root = "fixtures/web";
  expect file "/etc/nginx/shop.conf" { contains = "listen 443 ssl"; mode = 0o644; }
  expect package "nginx" { state = installed; }
  expect service "nginx";
  expect no file "/etc/motd.old";
}
"#;

#[test]
fn a_test_file_parses_with_every_statement() {
    let (module, errors) = parse_tests(FileId(0), SRC);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(module.items.len(), 2);
    assert!(matches!(&module.items[0], TestItem::Import(_)));
    let TestItem::Test(test) = &module.items[1] else {
        panic!("{:?}", module.items[1]);
    };
    assert_eq!(test.name.as_plain().unwrap(), "shop web hosts serve TLS");
    assert_eq!(&SRC[test.name_span.range()], "\"shop web hosts serve TLS\"");
    assert_eq!(test.stmts.len(), 7);
    let TestStmt::Facts { facts, .. } = &test.stmts[0] else {
        panic!("{:?}", test.stmts[0]);
    };
    let names: Vec<String> = facts
        .iter()
        .map(|f| {
            f.name
                .iter()
                .map(|i| i.name.as_str())
                .collect::<Vec<_>>()
                .join(".")
        })
        .collect();
    assert_eq!(names, ["hostname", "sys.cpus", "datacenter"]);
    let TestStmt::Define { classes, .. } = &test.stmts[1] else {
        panic!();
    };
    assert_eq!(classes.len(), 2);
    assert!(
        matches!(&test.stmts[2], TestStmt::Root { path, .. } if matches!(path.kind, ExprKind::Str(_)))
    );
    let TestStmt::Expect(file) = &test.stmts[3] else {
        panic!();
    };
    assert!(!file.absent);
    assert_eq!(file.kind.name, "file");
    assert_eq!(file.promiser.as_plain().unwrap(), "/etc/nginx/shop.conf");
    assert_eq!(file.attrs.len(), 2);
    assert!(matches!(&file.attrs[0], AttrStmt::Set(a) if a.name.name == "contains"));
    assert_eq!(
        &SRC[file.span.range()].lines().next().unwrap()[..11],
        "expect file"
    );
    let TestStmt::Expect(service) = &test.stmts[5] else {
        panic!();
    };
    assert!(service.attrs.is_empty() && !service.absent);
    let TestStmt::Expect(gone) = &test.stmts[6] else {
        panic!();
    };
    assert!(gone.absent);
    assert_eq!(gone.promiser.as_plain().unwrap(), "/etc/motd.old");
}

/// The words are contextual: a misspelt one is a syntax error naming the
/// word wanted, and a policy may still use them as names.
#[test]
fn misspelt_words_are_errors_and_words_stay_names() {
    let (_, errors) = parse_tests(
        FileId(0),
        "test \"t\" { fcats { hostname = \"a\"; } expect no file \"/x\"; exepct file \"/y\"; }",
    );
    let wanted: Vec<Vec<String>> = errors
        .iter()
        .map(|e| match &e.kind {
            SyntaxErrorKind::UnexpectedToken { expected, .. } => expected.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(wanted.len(), 2, "{errors:?}");
    assert!(wanted[0].iter().any(|w| w.contains("facts")), "{wanted:?}");
    assert!(wanted[1].iter().any(|w| w.contains("expect")), "{wanted:?}");
    let (_, errors) = parse(
        FileId(0),
        "let test = 1; let expect = 2; class facts; policy { file \"/x\" { content = \"${test}\"; } }",
    );
    assert!(errors.is_empty(), "{errors:?}");
}

/// A broken statement does not hide the next test's statements.
#[test]
fn a_broken_statement_is_recovered() {
    let (module, errors) = parse_tests(
        FileId(0),
        "test \"a\" { expect file { } }\ntest \"b\" { expect no file \"/x\"; }",
    );
    assert!(!errors.is_empty());
    let tests: Vec<String> = module
        .items
        .iter()
        .filter_map(|i| match i {
            TestItem::Test(t) => t.name.as_plain(),
            _ => None,
        })
        .collect();
    assert_eq!(tests, ["a", "b"]);
}
