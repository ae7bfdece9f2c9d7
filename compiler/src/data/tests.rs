//! Every error kind in all three formats, with the exact line:col in the
//! data file, and the values the checker builds.

use std::sync::Arc;

use converge_grammar::{FileId, Span};

use super::{check_text, Format};
use crate::diagnostic::Diagnostic;
use crate::ir::Value;
use crate::sema::types::{FieldType, RecordType, Type};
use crate::source::SourceDb;

fn field(name: &str, ty: Type, default: Option<Value>) -> FieldType {
    FieldType {
        name: name.to_owned(),
        ty,
        default,
        span: Span::default(),
    }
}

/// `type Site = { server_name: string, port: int = 80, tls: bool = false,
/// backends: list<string>, mode: mode = 0o644, timeout: duration = 30s }`.
fn site() -> Type {
    Type::Record(Arc::new(RecordType {
        name: "Site".to_owned(),
        fields: vec![
            field("server_name", Type::String, None),
            field("port", Type::Int, Some(Value::Int(80))),
            field("tls", Type::Bool, Some(Value::Bool(false))),
            field("backends", Type::List(Box::new(Type::String)), None),
            field("mode", Type::Mode, Some(Value::Int(0o644))),
            field("timeout", Type::Duration, Some(Value::Duration(30))),
        ],
        span: Span::default(),
    }))
}

fn sites() -> Type {
    Type::Map(Box::new(site()))
}

/// The file id the data file gets in these tests (after the policy file).
const DATA: FileId = FileId(1);

fn db(text: &str) -> SourceDb {
    let mut db = SourceDb::new();
    db.add("site.policy", String::new());
    db.add("data", text.to_owned());
    db
}

/// Each error as `line:col CODE message`, its primary label in the data file.
fn errors(format: Format, text: &str, ty: &Type) -> Vec<String> {
    let db = db(text);
    let Err(diagnostics) = check_text(DATA, format, text, ty) else {
        panic!("expected errors for {format:?}:\n{text}");
    };
    diagnostics.iter().map(|d| line(&db, d)).collect()
}

fn line(db: &SourceDb, d: &Diagnostic) -> String {
    let span = d.primary_span().unwrap();
    assert_eq!(span.file, DATA, "{d:?}");
    let (l, c) = db.get(span.file).unwrap().line_col(span.start);
    format!("{l}:{c} {} {}", d.code, d.message)
}

fn one(format: Format, text: &str, ty: &Type) -> String {
    let all = errors(format, text, ty);
    assert_eq!(all.len(), 1, "{all:#?}");
    all.into_iter().next().unwrap()
}

fn ok(format: Format, text: &str, ty: &Type) -> Value {
    match check_text(DATA, format, text, ty) {
        Ok(v) => v,
        Err(d) => {
            let db = db(text);
            panic!("{:#?}", d.iter().map(|d| line(&db, d)).collect::<Vec<_>>())
        }
    }
}

fn s(text: &str) -> Value {
    Value::Str(text.to_owned())
}

/// The record the three `web` examples below describe.
fn web_record() -> Value {
    Value::Record(vec![
        ("server_name".to_owned(), s("example.org")),
        ("port".to_owned(), Value::Int(8080)),
        ("tls".to_owned(), Value::Bool(false)),
        ("backends".to_owned(), Value::List(vec![s("a:1"), s("b:2")])),
        ("mode".to_owned(), Value::Int(0o640)),
        ("timeout".to_owned(), Value::Duration(300)),
    ])
}

fn expected_sites() -> Value {
    Value::Map(vec![
        (
            "api".to_owned(),
            Value::Record(vec![
                ("server_name".to_owned(), s("api.example.org")),
                ("port".to_owned(), Value::Int(80)),
                ("tls".to_owned(), Value::Bool(true)),
                ("backends".to_owned(), Value::List(vec![])),
                ("mode".to_owned(), Value::Int(0o644)),
                ("timeout".to_owned(), Value::Duration(30)),
            ]),
        ),
        ("web".to_owned(), web_record()),
    ])
}

#[test]
fn the_same_data_reads_alike_in_all_three_formats() {
    let yaml = "\
web:
  server_name: example.org
  port: 8080
  backends: [a:1, \"b:2\"]
  mode: \"0640\"
  timeout: 5m
api:
  server_name: api.example.org
  tls: true
  backends: []
";
    let toml = r#"
[web]
server_name = "example.org"
port = 8080
backends = ["a:1", "b:2"]
mode = 0o640
timeout = 300

[api]
server_name = "api.example.org"
tls = true
backends = []
"#;
    let json = r#"{
  "web": {"server_name": "example.org", "port": 8080, "backends": ["a:1", "b:2"],
          "mode": "0o640", "timeout": "5m"},
  "api": {"server_name": "api.example.org", "tls": true, "backends": []}
}"#;
    // Maps come out sorted by key, records in declaration order with
    // defaults, whatever the order in the file.
    assert_eq!(ok(Format::Yaml, yaml, &sites()), expected_sites());
    assert_eq!(ok(Format::Toml, toml, &sites()), expected_sites());
    assert_eq!(ok(Format::Json, json, &sites()), expected_sites());
}

#[test]
fn malformed_files_are_reported_where_the_parser_stops() {
    assert_eq!(
        one(Format::Yaml, "web:\n  port: [1, 2\n", &Type::Any),
        "3:1 E0701 invalid YAML: while parsing a flow sequence, expected ',' or ']'"
    );
    assert!(
        one(Format::Toml, "[web]\nport = = 1\n", &Type::Any).starts_with("2:8 E0701 invalid TOML")
    );
    assert!(one(Format::Json, "{\"a\": 1,}\n", &Type::Any)
        .starts_with("1:8 E0701 invalid JSON: Trailing commas"));
    // Strict JSON: no comments.
    assert!(one(Format::Json, "{\n  // hi\n  \"a\": 1}\n", &Type::Any)
        .starts_with("2:3 E0701 invalid JSON"));
    assert!(one(Format::Json, "", &Type::Any).starts_with("1:1 E0701 invalid JSON"));
}

#[test]
fn a_missing_field_is_reported_at_the_key_holding_the_record() {
    let yaml = "web:\n  server_name: x\n";
    assert_eq!(
        one(Format::Yaml, yaml, &sites()),
        "1:1 E0702 `Site` needs `backends` (list<string>)"
    );
    let toml = "[web]\nserver_name = \"x\"\n";
    assert_eq!(
        one(Format::Toml, toml, &sites()),
        "1:2 E0702 `Site` needs `backends` (list<string>)"
    );
    let json = "{\n  \"web\": {\"server_name\": \"x\"}\n}";
    assert_eq!(
        one(Format::Json, json, &sites()),
        "2:3 E0702 `Site` needs `backends` (list<string>)"
    );
    // A record in a list has no key: its first character is marked.
    let list = Type::List(Box::new(site()));
    assert_eq!(
        one(
            Format::Yaml,
            "- server_name: a\n  backends: []\n- server_name: b\n",
            &list
        ),
        "3:3 E0702 `Site` needs `backends` (list<string>)"
    );
    assert_eq!(
        one(Format::Json, "[{\"server_name\": \"a\"}]", &list),
        "1:2 E0702 `Site` needs `backends` (list<string>)"
    );
}

#[test]
fn an_unknown_field_is_reported_at_the_key_with_a_suggestion() {
    let ty = sites();
    for (format, text, at) in [
        (
            Format::Yaml,
            "web:\n  server_name: x\n  backends: []\n  prot: 1\n",
            "4:3",
        ),
        (
            Format::Toml,
            "[web]\nserver_name = \"x\"\nbackends = []\nprot = 1\n",
            "4:1",
        ),
        (
            Format::Json,
            "{\"web\": {\"server_name\": \"x\", \"backends\": [],\n \"prot\": 1}}",
            "2:2",
        ),
    ] {
        assert_eq!(
            one(format, text, &ty),
            format!("{at} E0703 `Site` has no field `prot`")
        );
        let Err(d) = check_text(DATA, format, text, &ty) else {
            unreachable!()
        };
        assert_eq!(d[0].help.as_deref(), Some("did you mean `port`?"));
    }
}

#[test]
fn a_wrong_type_deep_inside_is_reported_at_the_value() {
    let ty = sites();
    assert_eq!(
        one(
            Format::Yaml,
            "web:\n  server_name: x\n  port: \"80\"\n  backends: []\n",
            &ty
        ),
        "3:9 E0704 expected an int, found string \"80\""
    );
    assert_eq!(
        one(
            Format::Toml,
            "[web]\nserver_name = \"x\"\nbackends = [\"a\", 2]\n",
            &ty
        ),
        "3:18 E0704 expected a string, found int 2"
    );
    assert_eq!(
        one(
            Format::Json,
            "{\"web\": {\"server_name\": \"x\",\n  \"backends\": [\"a\", [\"b\"]]}}",
            &ty
        ),
        "2:21 E0704 expected a string, found a list"
    );
    // A record where a list stands.
    assert_eq!(
        one(Format::Json, "{\"web\": [1]}", &ty),
        "1:9 E0704 expected a Site (a map of its fields), found a list"
    );
    // YAML 1.2: `yes` is a string, not a bool.
    assert_eq!(
        one(
            Format::Yaml,
            "web:\n  server_name: x\n  tls: yes\n  backends: []\n",
            &ty
        ),
        "3:8 E0704 expected a bool, found string \"yes\""
    );
    // Floats are refused: there is no float type.
    assert_eq!(
        one(
            Format::Toml,
            "[web]\nserver_name = \"x\"\nport = 80.5\nbackends = []\n",
            &ty
        ),
        "3:8 E0704 expected an int, found float 80.5"
    );
    assert_eq!(
        one(Format::Yaml, "- 1.5\n", &Type::Any),
        "1:3 E0704 expected a string, int, bool, list or map, found float 1.5"
    );
}

#[test]
fn every_mistake_in_a_file_is_reported_in_one_pass() {
    let yaml = "a:\n  server_name: 1\n  backends: []\nb:\n  backends: [x]\n  porrt: 2\n";
    assert_eq!(
        errors(Format::Yaml, yaml, &sites()),
        [
            "2:16 E0704 expected a string, found int 1",
            "6:3 E0703 `Site` has no field `porrt`",
            "4:1 E0702 `Site` needs `server_name` (string)",
        ]
    );
}

#[test]
fn a_duplicate_key_is_reported_at_the_second_with_the_first() {
    for (format, text, again, first) in [
        (Format::Yaml, "a: 1\nb: 2\na: 3\n", "3:1", (1, 1)),
        (Format::Json, "{\"a\": 1,\n \"a\": 2}", "2:2", (1, 2)),
        (Format::Toml, "a = 1\nb = 2\na = 3\n", "3:1", (1, 1)),
        (
            Format::Toml,
            "[x]\na = 1\n[y]\na = 1\n[x]\nb = 2\n",
            "5:2",
            (1, 2),
        ),
        (
            Format::Toml,
            "[y]\na = 1\n[x]\na = 1\na = 2\n",
            "5:1",
            (4, 1),
        ),
        (Format::Toml, "t = {a = 1, b = 2, a = 3}\n", "1:20", (1, 6)),
    ] {
        let ty = Type::Map(Box::new(Type::Any));
        let Err(d) = check_text(DATA, format, text, &ty) else {
            panic!("{format:?} accepted a duplicate key")
        };
        let db = db(text);
        assert_eq!(d.len(), 1, "{d:#?}");
        let msg = line(&db, &d[0]);
        assert!(
            msg.starts_with(&format!("{again} E0705 duplicate key")),
            "{msg}"
        );
        let secondary = d[0].labels.iter().find(|l| !l.primary).unwrap();
        assert_eq!(
            db.get(DATA).unwrap().line_col(secondary.span.start),
            first,
            "{format:?}"
        );
    }
}

#[test]
fn modes_are_octal_strings_or_octal_integers() {
    let ty = Type::List(Box::new(Type::Mode));
    assert_eq!(
        ok(
            Format::Yaml,
            "[\"0644\", \"644\", \"0o755\", 0o600, 0, \"4755\"]",
            &ty
        ),
        Value::List(
            [0o644, 0o644, 0o755, 0o600, 0, 0o4755]
                .into_iter()
                .map(Value::Int)
                .collect()
        )
    );
    assert_eq!(
        ok(Format::Toml, "m = 0o640", &Type::Map(Box::new(Type::Mode))),
        Value::Map(vec![("m".to_owned(), Value::Int(0o640))])
    );
    // Unquoted 0644 is the decimal 644 in YAML 1.2: refused, not guessed.
    assert_eq!(
        one(Format::Yaml, "- 0644\n", &ty),
        "1:3 E0706 the mode 644 is written as a decimal number"
    );
    assert_eq!(
        one(Format::Json, "[420]", &ty),
        "1:2 E0706 the mode 420 is written as a decimal number"
    );
    assert_eq!(
        one(Format::Yaml, "- \"0o17777\"\n", &ty),
        "1:3 E0706 mode out of range"
    );
    assert_eq!(
        one(Format::Toml, "m = [0o10000]", &ty.clone()).as_str(),
        "1:1 E0704 expected a list<mode>, found a map"
    );
    assert_eq!(
        one(Format::Json, "[\"rw-r--r--\"]", &ty),
        "1:2 E0706 \"rw-r--r--\" is not a mode"
    );
    assert_eq!(
        one(Format::Json, "[true]", &ty),
        "1:2 E0704 expected a mode, found bool true"
    );
}

#[test]
fn durations_are_unit_strings_or_seconds() {
    let ty = Type::List(Box::new(Type::Duration));
    assert_eq!(
        ok(Format::Yaml, "[30s, \"5m\", 2h, 45]", &ty),
        Value::List(
            [30, 300, 7200, 45]
                .into_iter()
                .map(Value::Duration)
                .collect()
        )
    );
    assert_eq!(
        one(Format::Yaml, "[30s, 1d]", &ty),
        "1:7 E0706 \"1d\" is not a duration"
    );
    assert_eq!(one(Format::Json, "[-5]", &ty), "1:2 E0706 invalid duration");
    assert_eq!(
        one(Format::Toml, "d = [\"1h30m\"]", &Type::Map(Box::new(ty))),
        "1:6 E0706 \"1h30m\" is not a duration"
    );
}

#[test]
fn ints_outside_64_bits_are_refused() {
    let ty = Type::List(Box::new(Type::Int));
    assert_eq!(
        one(Format::Json, "[1,\n 99999999999999999999]", &ty),
        "2:2 E0706 integer out of range"
    );
    assert_eq!(
        one(Format::Yaml, "- 99999999999999999999\n", &ty),
        "1:3 E0706 integer out of range"
    );
    assert_eq!(
        ok(
            Format::Json,
            "[-9223372036854775808, 9223372036854775807]",
            &ty
        ),
        Value::List(vec![Value::Int(i64::MIN), Value::Int(i64::MAX)])
    );
    assert_eq!(
        one(Format::Toml, "i = [99999999999999999999]", &Type::Any),
        "1:6 E0706 integer out of range"
    );
}

#[test]
fn a_null_or_empty_value_is_reported_where_a_value_is_required() {
    assert_eq!(
        one(
            Format::Yaml,
            "web:\n  server_name:\n  backends: []\n",
            &sites()
        ),
        "2:14 E0707 expected string, found no value"
    );
    assert_eq!(
        one(
            Format::Json,
            "{\"web\": {\"server_name\": null, \"backends\": []}}",
            &sites()
        ),
        "1:25 E0707 expected string, found no value"
    );
    // An empty YAML file is no value at all.
    assert_eq!(
        one(Format::Yaml, "", &sites()),
        "1:1 E0707 expected map<string, Site>, found no value"
    );
}

#[test]
fn positions_count_characters_after_non_ascii_text() {
    // `é` and `ü` are two bytes each; the label must still land on `80`.
    let yaml = "# café\nwéb:\n  server_name: \"ü\"\n  port: \"80\"\n  backends: []\n";
    assert_eq!(
        one(Format::Yaml, yaml, &sites()),
        "4:9 E0704 expected an int, found string \"80\""
    );
    let json = "{\"wéb\": {\"server_name\": \"ü\", \"port\": \"80\", \"backends\": []}}";
    assert_eq!(
        one(Format::Json, json, &sites()),
        "1:38 E0704 expected an int, found string \"80\""
    );
    let toml = "[\"wéb\"]\nserver_name = \"ü\"\nport = \"80\"\nbackends = []\n";
    assert_eq!(
        one(Format::Toml, toml, &sites()),
        "3:8 E0704 expected an int, found string \"80\""
    );
}

#[test]
fn any_converts_values_as_written() {
    assert_eq!(
        ok(Format::Yaml, "b: [1, x, true]\na: {c: d}\n", &Type::Any),
        Value::Map(vec![
            ("a".to_owned(), Value::Map(vec![("c".to_owned(), s("d"))])),
            (
                "b".to_owned(),
                Value::List(vec![Value::Int(1), s("x"), Value::Bool(true)])
            ),
        ])
    );
}

#[test]
fn yaml_aliases_are_copied_within_the_value_budget() {
    let ty = Type::Map(Box::new(Type::List(Box::new(Type::String))));
    assert_eq!(
        ok(Format::Yaml, "a: &x [p, q]\nb: *x\n", &ty),
        Value::Map(vec![
            ("a".to_owned(), Value::List(vec![s("p"), s("q")])),
            ("b".to_owned(), Value::List(vec![s("p"), s("q")])),
        ])
    );
    // The "billion laughs": nine levels of ten aliases each.
    let mut laughs = String::from("l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..10 {
        let refs = vec![format!("*l{}", i - 1); 10].join(", ");
        laughs.push_str(&format!("l{i}: &l{i} [{refs}]\n"));
    }
    let all = errors(Format::Yaml, &laughs, &Type::Any);
    assert_eq!(all.len(), 1, "{all:?}");
    assert!(
        all[0].contains("E0701 invalid YAML: the file holds more than 2000000 values"),
        "{all:?}"
    );
}

#[test]
fn nesting_is_bounded_in_every_format() {
    let deep =
        |open: &str, close: &str| format!("{}{}", open.repeat(100_000), close.repeat(100_000));
    for (format, text) in [
        (Format::Json, deep("[", "]")),
        (Format::Yaml, deep("[", "]")),
        (Format::Toml, format!("a = {}", deep("[", "]"))),
    ] {
        let all = errors(format, &text, &Type::Any);
        assert!(
            all.iter().all(|e| e.contains("E0701")),
            "{format:?}: {all:?}"
        );
    }
}

#[test]
fn yaml_refuses_what_a_data_file_cannot_mean() {
    assert!(one(Format::Yaml, "a: 1\n---\nb: 2\n", &Type::Any)
        .starts_with("2:1 E0701 invalid YAML: a second document"));
    assert!(one(Format::Yaml, "? [a]\n: 1\n", &Type::Any)
        .contains("E0701 invalid YAML: a list or map used as a map key"));
    assert!(one(Format::Yaml, "a: !secret x\n", &Type::Any)
        .contains("the tag `!secret` is not supported"));
    // `!!str` keeps a scalar a string.
    assert_eq!(
        ok(
            Format::Yaml,
            "- !!str 80\n",
            &Type::List(Box::new(Type::String))
        ),
        Value::List(vec![s("80")])
    );
}

#[test]
fn too_many_errors_are_cut_with_a_note() {
    let yaml: String = (0..200).map(|i| format!("k{i}: x\n")).collect();
    let Err(d) = check_text(DATA, Format::Yaml, &yaml, &Type::Map(Box::new(Type::Int))) else {
        panic!()
    };
    assert_eq!(d.len(), super::MAX_ERRORS);
    assert!(d.last().unwrap().notes[0].contains("only the first 50 errors"));
}

mod load {
    //! `load`: reading from inside the policy tree, by path.

    use std::path::Path;
    use std::sync::Arc;

    use converge_grammar::{FileId, Span};

    use super::super::{load, MAX_DATA_BYTES};
    use super::{s, site};
    use crate::diagnostic::Code;
    use crate::ir::Value;
    use crate::policy_tree::PolicyTree;
    use crate::sema::types::Type;
    use crate::source::SourceDb;

    /// A policy file `site.policy` in a temp dir, the tree's root.
    fn setup() -> (tempfile::TempDir, SourceDb, FileId) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let mut db = SourceDb::new();
        let policy = dir.path().join("site.policy");
        let from = db.add(&policy, "let x: any = data(\"...\");\n".to_owned());
        db.set_tree(from, Arc::new(PolicyTree::new(dir.path())));
        (dir, db, from)
    }

    fn path_span(from: FileId) -> Span {
        Span::new(from, 18, 23)
    }

    fn write(dir: &Path, name: &str, text: &[u8]) {
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn code(
        result: Result<(FileId, Value), Vec<crate::diagnostic::Diagnostic>>,
    ) -> (Code, String, Span) {
        let d = result.unwrap_err();
        assert_eq!(d.len(), 1, "{d:#?}");
        let label = d[0].labels[0].clone();
        (d[0].code, d[0].message.clone(), label.span)
    }

    #[test]
    fn a_data_file_is_read_relative_to_the_policy_and_added_once() {
        let (dir, mut db, from) = setup();
        write(
            dir.path(),
            "data/sites.yaml",
            b"web:\n  server_name: w\n  backends: []\n",
        );
        let ty = Type::Map(Box::new(site()));
        let (file, value) = load(&mut db, from, "data/sites.yaml", path_span(from), &ty).unwrap();
        assert!(db.name(file).ends_with("data/sites.yaml"));
        let Value::Map(entries) = value else { panic!() };
        assert_eq!(entries[0].0, "web");
        // Again, by another path to the same file, with another type: the
        // same FileId, checked against the new type.
        let again = load(
            &mut db,
            from,
            "./data/../data/sites.yaml",
            path_span(from),
            &Type::Any,
        )
        .unwrap();
        assert_eq!(again.0, file);
        assert_eq!(db.len(), 2);
        // Errors inside the file are labelled in the file.
        write(
            dir.path(),
            "data/bad.json",
            b"{\"web\": {\"server_name\": 1, \"backends\": []}}",
        );
        let (c, _, span) = code(load(&mut db, from, "data/bad.json", path_span(from), &ty));
        assert_eq!(c, Code::DataTypeMismatch);
        assert_ne!(span.file, from);
        assert_eq!(db.get(span.file).unwrap().line_col(span.start), (1, 25));
    }

    #[test]
    fn paths_leaving_the_policy_tree_are_refused_before_reading() {
        let (dir, mut db, from) = setup();
        let outside = tempfile::tempdir().unwrap();
        write(outside.path(), "secret.yaml", b"key: hunter2\n");
        std::os::unix::fs::symlink(
            outside.path().join("secret.yaml"),
            dir.path().join("data/link.yaml"),
        )
        .unwrap();
        let abs = outside
            .path()
            .join("secret.yaml")
            .to_string_lossy()
            .into_owned();
        for request in [
            "../secret.yaml",
            "data/../../x.yaml",
            abs.as_str(),
            "data/link.yaml",
        ] {
            let (c, message, span) =
                code(load(&mut db, from, request, path_span(from), &Type::Any));
            assert_eq!(c, Code::OutsidePolicyTree, "{request}");
            assert!(!message.contains("hunter2"));
            assert_eq!(span, path_span(from));
        }
        assert_eq!(db.len(), 1, "nothing from outside was added");
    }

    #[test]
    fn files_that_cannot_be_read_are_reported_at_the_path() {
        let (dir, mut db, from) = setup();
        write(dir.path(), "data/x.ini", b"a=1\n");
        write(dir.path(), "data/latin1.yaml", b"name: caf\xe9\n");
        let big = vec![b' '; MAX_DATA_BYTES + 1];
        write(dir.path(), "data/big.json", &big);
        std::fs::create_dir(dir.path().join("data/dir.toml")).unwrap();
        for (request, why) in [
            ("data/x.ini", "unsupported extension"),
            ("data/missing.yaml", "No such file"),
            (
                "data/latin1.yaml",
                "not valid UTF-8 (first bad byte at offset 9)",
            ),
            ("data/big.json", "larger than 16 MiB"),
            ("data/dir.toml", "not a regular file"),
        ] {
            let (c, message, span) =
                code(load(&mut db, from, request, path_span(from), &Type::Any));
            assert_eq!(c, Code::DataUnreadable, "{request}");
            assert!(message.contains(why), "{request}: {message}");
            assert_eq!(span, path_span(from));
        }
    }

    #[test]
    fn uppercase_and_yml_extensions_are_formats_too() {
        let (dir, mut db, from) = setup();
        write(dir.path(), "data/a.YML", b"- x\n");
        let (_, value) = load(&mut db, from, "data/a.YML", path_span(from), &Type::Any).unwrap();
        assert_eq!(value, Value::List(vec![s("x")]));
    }
}

#[test]
fn json_is_strict() {
    for text in [
        "[01]",
        "[1.]",
        "[+1]",
        "{a: 1}",
        "['a']",
        "[0x10]",
        "[NaN]",
        "[1] [2]",
        "[\"\\x41\"]",
    ] {
        assert!(
            one(Format::Json, text, &Type::Any).contains("E0701 invalid JSON"),
            "{text}"
        );
    }
    // A raw control character inside a string (RFC 8259 wants `\u0001`).
    assert_eq!(
        one(Format::Json, "{\"a\": \"x\u{1}y\"}", &Type::Any),
        "1:9 E0701 invalid JSON: a control character inside a string"
    );
    assert_eq!(
        ok(Format::Json, "[\"x\\u0001y\"]", &Type::Any),
        Value::List(vec![s("x\u{1}y")])
    );
}

#[test]
fn spans_stay_inside_the_text_at_its_end() {
    // A second document that starts at the very end, after a non-ASCII
    // character: the label must not run past the text or into a character.
    for text in ["a: 1\n...\né", "a: 1\n---", "[", "{\"é\": ", "a = \"é"] {
        for format in [Format::Yaml, Format::Json, Format::Toml] {
            if let Err(d) = check_text(DATA, format, text, &Type::Any) {
                for label in &d[0].labels {
                    let (start, end) = (label.span.start as usize, label.span.end as usize);
                    assert!(
                        start <= end && end <= text.len(),
                        "{format:?} {text:?}: {d:?}"
                    );
                    assert!(text.is_char_boundary(start) && text.is_char_boundary(end));
                }
            }
        }
    }
}

#[test]
fn a_yaml_merge_key_gets_its_own_help() {
    let yaml = "base: &b\n  server_name: x\n  backends: []\nweb:\n  <<: *b\n  port: 1\n";
    let Err(d) = check_text(DATA, Format::Yaml, yaml, &sites()) else {
        panic!()
    };
    let merge = d.iter().find(|d| d.message.contains("`<<`")).unwrap();
    assert!(merge.help.as_deref().unwrap().contains("YAML merge keys"));
}
