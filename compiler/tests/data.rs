//! Data files (`data("...")`, LANGUAGE.md §10) end to end: each case in
//! `tests/data_cases/<case>/` is a policy directory with one data file
//! under `data/` and a `type.txt` holding the declared type; the snapshot
//! is what `policyc` prints for it (the human renderer, so it shows
//! `data/sites.yaml:LINE:COL`) or the value it loads. Add a case by adding
//! a directory; `cargo insta review` accepts its snapshot.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;

use converge_compiler::data;
use converge_compiler::ir::Value;
use converge_compiler::policy_tree::PolicyTree;
use converge_compiler::render::render_human;
use converge_compiler::sema::types::{FieldType, RecordType, Type};
use converge_compiler::source::SourceDb;
use converge_grammar::Span;

fn field(name: &str, ty: Type, default: Option<Value>) -> FieldType {
    FieldType {
        name: name.to_owned(),
        ty,
        default,
        span: Span::default(),
    }
}

/// The record types the cases may name.
fn record(name: &str) -> Type {
    let fields = match name {
        // type Site = { server_name: string, port: int = 80, tls: bool = false,
        //               backends: list<string>, mode: mode = 0o644,
        //               timeout: duration = 30s };
        "Site" => vec![
            field("server_name", Type::String, None),
            field("port", Type::Int, Some(Value::Int(80))),
            field("tls", Type::Bool, Some(Value::Bool(false))),
            field("backends", Type::List(Box::new(Type::String)), None),
            field("mode", Type::Mode, Some(Value::Int(0o644))),
            field("timeout", Type::Duration, Some(Value::Duration(30))),
        ],
        // type Upstream = { host: string, weight: int = 1 };
        // type Pool = { upstreams: list<Upstream>, tags: map<string, string> = {} };
        "Upstream" => vec![
            field("host", Type::String, None),
            field("weight", Type::Int, Some(Value::Int(1))),
        ],
        "Pool" => vec![
            field("upstreams", Type::List(Box::new(record("Upstream"))), None),
            field(
                "tags",
                Type::Map(Box::new(Type::String)),
                Some(Value::Map(Vec::new())),
            ),
        ],
        other => panic!("no record type {other} in tests/data.rs"),
    };
    Type::Record(Arc::new(RecordType {
        name: name.to_owned(),
        fields,
        span: Span::default(),
    }))
}

/// A type as written in policy: `map<string, list<Site>>`.
fn parse_type(text: &str) -> Type {
    let text = text.trim();
    if let Some(inner) = text.strip_prefix("list<").and_then(|t| t.strip_suffix('>')) {
        return Type::List(Box::new(parse_type(inner)));
    }
    if let Some(inner) = text
        .strip_prefix("map<string,")
        .and_then(|t| t.strip_suffix('>'))
    {
        return Type::Map(Box::new(parse_type(inner)));
    }
    match text {
        "string" => Type::String,
        "int" => Type::Int,
        "bool" => Type::Bool,
        "mode" => Type::Mode,
        "duration" => Type::Duration,
        "any" => Type::Any,
        name => record(name),
    }
}

#[test]
fn each_case() {
    insta::glob!("data_cases/*/type.txt", |type_file| {
        let case = type_file.parent().unwrap();
        let ty = parse_type(&std::fs::read_to_string(type_file).unwrap());
        let mut files: Vec<_> = std::fs::read_dir(case.join("data"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(files.len(), 1, "{}: one data file", case.display());
        let request = format!("data/{}", files[0]);

        // The policy file need not exist: the tree and the path are what
        // `load` uses. It is named relative to the case, as `policyc`
        // names files relative to where it runs.
        let mut db = SourceDb::new();
        let policy = case.join("site.policy");
        let line = format!("let x: {} = data({request:?});\n", ty_text(type_file));
        let from = db.add(&policy, line.clone());
        db.set_tree(from, Arc::new(PolicyTree::new(case)));
        let start = line.find("\"data/").unwrap() as u32;
        let span = Span::new(from, start, start + request.len() as u32 + 2);

        let shown = match data::load(&mut db, from, &request, span, &ty) {
            Ok((_, value)) => format!("ok: {}\n", value.display()),
            Err(diagnostics) => render_human(&db, &diagnostics, false),
        };
        // Shown relative to the case directory, as if run there.
        let prefix = format!("{}/", case.display());
        insta::assert_snapshot!(shown.replace(&prefix, ""));
    });
}

fn ty_text(type_file: &Path) -> String {
    std::fs::read_to_string(type_file)
        .unwrap()
        .trim()
        .to_owned()
}
