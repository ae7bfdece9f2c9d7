//! Feeds arbitrary text to each data-file reader (TOML, YAML, JSON) and the
//! checker, against a fixed record type (`map<string, Site>`) and against
//! `any`. Reading a data file promises never to panic, and every diagnostic
//! must be renderable: each label is an in-bounds, ordered byte range of
//! the data file whose ends are char boundaries.
#![no_main]

use std::sync::Arc;

use converge_compiler::data::{check_text, Format};
use converge_compiler::ir::Value;
use converge_compiler::sema::types::{FieldType, RecordType, Type};
use converge_grammar::{FileId, Span};
use libfuzzer_sys::fuzz_target;

fn site() -> Type {
    let field = |name: &str, ty: Type, default: Option<Value>| FieldType {
        name: name.to_owned(),
        ty,
        default,
        span: Span::default(),
    };
    Type::Map(Box::new(Type::Record(Arc::new(RecordType {
        name: "Site".to_owned(),
        fields: vec![
            field("server_name", Type::String, None),
            field("port", Type::Int, Some(Value::Int(80))),
            field("tls", Type::Bool, Some(Value::Bool(false))),
            field("backends", Type::List(Box::new(Type::String)), None),
            field("mode", Type::Mode, Some(Value::Int(0o644))),
            field("timeout", Type::Duration, Some(Value::Duration(30))),
            field("tags", Type::Map(Box::new(Type::Any)), Some(Value::Map(Vec::new()))),
        ],
        span: Span::default(),
    }))))
}

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let file = FileId(1);
    for format in [Format::Toml, Format::Yaml, Format::Json] {
        for ty in [site(), Type::Any] {
            let Err(diagnostics) = check_text(file, format, src, &ty) else {
                continue;
            };
            assert!(!diagnostics.is_empty());
            for d in &diagnostics {
                for label in &d.labels {
                    // Labels in the policy (the record's declaration) have
                    // no span here; everything else is in the data file.
                    if label.span == Span::default() {
                        continue;
                    }
                    let (start, end) = (label.span.start as usize, label.span.end as usize);
                    assert_eq!(label.span.file, file, "{format:?}: {d:?}");
                    assert!(
                        start <= end && end <= src.len(),
                        "{format:?}: span {start}..{end} out of bounds (len {}): {d:?}",
                        src.len()
                    );
                    assert!(
                        src.is_char_boundary(start) && src.is_char_boundary(end),
                        "{format:?}: span {start}..{end} not on char boundaries: {d:?}"
                    );
                }
            }
        }
    }
});
