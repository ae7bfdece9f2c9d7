//! Loads one data file against the benchmark's `Host` record type, as
//! `data(...)` does inside `policyc check`, and prints how many hosts it
//! read (bench/data.sh runs it under GNU time).
//!
//! Usage: data_load DIR FILE   (FILE relative to DIR, the policy tree)
//!
//! The type is `map<string, Host>` with
//! `type Host = { hostname: string, ip: string, port: int, tls: bool,
//! role: string, backends: list<string>, mode: mode, timeout: duration,
//! datacenter: string, weight: int = 1 };`.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use converge_compiler::data;
use converge_compiler::ir::Value;
use converge_compiler::policy_tree::PolicyTree;
use converge_compiler::render::render_human;
use converge_compiler::sema::types::{FieldType, RecordType, Type};
use converge_compiler::source::SourceDb;
use converge_grammar::Span;

fn host_type() -> Type {
    let field = |name: &str, ty: Type, default: Option<Value>| FieldType {
        name: name.to_owned(),
        ty,
        default,
        span: Span::default(),
    };
    Type::Map(Box::new(Type::Record(Arc::new(RecordType {
        name: "Host".to_owned(),
        fields: vec![
            field("hostname", Type::String, None),
            field("ip", Type::String, None),
            field("port", Type::Int, None),
            field("tls", Type::Bool, None),
            field("role", Type::String, None),
            field("backends", Type::List(Box::new(Type::String)), None),
            field("mode", Type::Mode, None),
            field("timeout", Type::Duration, None),
            field("datacenter", Type::String, None),
            field("weight", Type::Int, Some(Value::Int(1))),
        ],
        span: Span::default(),
    }))))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let (Some(dir), Some(file)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: data_load DIR FILE");
        return ExitCode::from(2);
    };
    let dir = Path::new(dir);
    let mut db = SourceDb::new();
    let from = db.add(dir.join("bench.policy"), String::new());
    db.set_tree(from, Arc::new(PolicyTree::new(dir)));
    match data::load(&mut db, from, file, Span::new(from, 0, 0), &host_type()) {
        Ok((_, Value::Map(hosts))) => {
            println!("loaded {} hosts", hosts.len());
            ExitCode::SUCCESS
        }
        Ok(_) => {
            eprintln!("not a map");
            ExitCode::FAILURE
        }
        Err(diagnostics) => {
            eprint!("{}", render_human(&db, &diagnostics, false));
            ExitCode::FAILURE
        }
    }
}
