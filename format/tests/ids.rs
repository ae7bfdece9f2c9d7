//! The id tables are the wire contract: a bundle names every opcode, kind,
//! promise type, attribute and fact by the ids of `converge_format::ids`.
//! These tests fail when the tables change without a deliberate format
//! version bump, when an id is reused or renumbered, and when
//! `docs/bytecode.md` and the code disagree.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use converge_format::bundle::envelope::{FORMAT_MAJOR, FORMAT_MINOR};
use converge_format::ids::{render, tables};

/// `format/tests/ids/MAJOR.MINOR.txt`: the tables as each format version
/// froze them ([`render`]).
fn pinned() -> BTreeMap<(u16, u16), String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ids");
    let mut out = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        let (major, minor) = stem.split_once('.').expect("MAJOR.MINOR.txt");
        let version = (major.parse().unwrap(), minor.parse().unwrap());
        out.insert(version, std::fs::read_to_string(&path).unwrap());
    }
    out
}

/// `(table, id) -> name` of a rendering.
fn rows(text: &str) -> BTreeMap<(String, u32), String> {
    text.lines()
        .map(|line| {
            let mut fields = line.split('\t');
            let (Some(table), Some(id), Some(name), None) =
                (fields.next(), fields.next(), fields.next(), fields.next())
            else {
                panic!("malformed id line {line:?}");
            };
            ((table.to_owned(), id.parse().unwrap()), name.to_owned())
        })
        .collect()
}

const HOW: &str = "\
The bundle format's id tables changed. Ids are the wire contract of every \
deployed bundle, so a change needs a deliberate format version:
  - only new entries (new ids, old ones untouched): bump FORMAT_MINOR in \
format/src/bundle/envelope.rs;
  - anything else (an id removed or its meaning changed): bump FORMAT_MAJOR \
and set FORMAT_MINOR to 0; never renumber or reuse an id even then;
then write the new tables to format/tests/ids/MAJOR.MINOR.txt (`cargo run -q \
-p converge-format --example print_ids > format/tests/ids/MAJOR.MINOR.txt`), keep \
every older file as it is, update the \
tables in docs/bytecode.md, and regenerate the golden bundles if they must \
change (tests/golden/README.md).";

#[test]
fn the_id_tables_are_pinned_to_the_format_version() {
    let pinned = pinned();
    let version = (FORMAT_MAJOR, FORMAT_MINOR);
    let current = render();
    let Some(frozen) = pinned.get(&version) else {
        panic!(
            "no format/tests/ids/{}.{}.txt: the format version changed without pinning its \
             tables. Write it with the text below.\n{HOW}\n\n{current}",
            version.0, version.1
        );
    };
    assert!(
        pinned.keys().next_back() == Some(&version),
        "format {}.{} is older than the newest pinned tables {:?}",
        version.0,
        version.1,
        pinned.keys().next_back()
    );
    if *frozen != current {
        panic!(
            "the id tables differ from format/tests/ids/{}.{}.txt, but FORMAT_MAJOR.FORMAT_MINOR \
             is still {}.{}.\n{HOW}\n\nNow:\n{current}",
            version.0, version.1, version.0, version.1
        );
    }
}

/// An id is never reused or renumbered; within a major version, minor
/// versions only add.
#[test]
fn ids_are_never_reused_renumbered_or_dropped_within_a_major_version() {
    let now = rows(&render());
    for ((major, minor), text) in pinned() {
        for ((table, id), name) in rows(&text) {
            match now.get(&(table.clone(), id)) {
                Some(current) => assert_eq!(
                    current, &name,
                    "{table} id {id} was `{name}` in format {major}.{minor} and is now \
                     `{current}`: ids are never reused"
                ),
                None => assert!(
                    major < FORMAT_MAJOR,
                    "{table} id {id} (`{name}`) of format {major}.{minor} is gone without a \
                     major version bump"
                ),
            }
        }
        for ((table, id), name) in rows(&text) {
            if let Some(((_, new_id), _)) =
                now.iter().find(|((t, _), n)| *t == table && **n == name)
            {
                assert_eq!(
                    *new_id, id,
                    "{table} `{name}` was id {id} in format {major}.{minor} and is now id \
                     {new_id}: ids are never renumbered"
                );
            }
        }
    }
}

fn docs() -> (PathBuf, String) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/bytecode.md");
    let text = std::fs::read_to_string(&path).unwrap();
    (path, text)
}

/// The rows `(id, name)` of the first table after the heading `### title`:
/// the first column is the id (decimal or `0x` hex), the second the name
/// (in backticks or not).
fn doc_table(doc: &str, title: &str) -> Option<Vec<(u32, String)>> {
    let heading = format!("### {title}");
    let mut lines = doc.lines().skip_while(|l| l.trim() != heading).skip(1);
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in lines.by_ref() {
        let line = line.trim();
        if line.starts_with("##") {
            break;
        }
        if !line.starts_with('|') {
            if in_table {
                break;
            }
            continue;
        }
        in_table = true;
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let (Some(id), Some(name)) = (cells.first(), cells.get(1)) else {
            continue;
        };
        let id = match id.strip_prefix("0x") {
            Some(hex) => u32::from_str_radix(hex, 16).ok(),
            None => id.parse().ok(),
        };
        if let Some(id) = id {
            rows.push((id, name.trim_matches('`').to_owned()));
        }
    }
    in_table.then_some(rows)
}

/// `docs/bytecode.md` prints every id table; a reader with only the docs
/// must get the same numbers as the code, both ways.
#[test]
fn the_docs_print_exactly_the_id_tables() {
    let (path, doc) = docs();
    for table in tables() {
        let Some(documented) = doc_table(&doc, table.title) else {
            panic!(
                "{} has no `### {}` section with a table",
                path.display(),
                table.title
            );
        };
        let code: Vec<(u32, String)> = table
            .rows
            .iter()
            .map(|(id, name)| (*id, (*name).to_owned()))
            .collect();
        let missing: Vec<_> = code.iter().filter(|r| !documented.contains(r)).collect();
        let extra: Vec<_> = documented.iter().filter(|r| !code.contains(r)).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "`### {}` in docs/bytecode.md disagrees with converge_format::ids: \
             not documented {missing:?}, documented but not in the code {extra:?}",
            table.title
        );
    }
}

/// The documented row of a promise type: its id, name, and the attributes
/// of its own (the common ones are valid on every type) as
/// `name` (id): `type`.
fn promise_type_row(t: &converge_format::schema::PromiseType) -> String {
    let attrs: Vec<String> = t
        .attrs
        .iter()
        .map(|a| format!("`{}` ({}): `{}`", a.name, a.id, a.ty.describe()))
        .collect();
    format!(
        "| {} | `{}` | {} |",
        t.id,
        t.name,
        attrs.join(", ").replace('|', "\\|")
    )
}

/// The documented row of an attribute: id, name, role.
fn attribute_row(a: &converge_format::schema::AttrSpec) -> String {
    let role = match a.role {
        converge_format::schema::AttrRole::State => "state",
        converge_format::schema::AttrRole::Relation
            if converge_format::schema::CLASS_ATTRIBUTES.contains(&a.name) =>
        {
            "relation (a class name carried as a `word` attribute value)"
        }
        converge_format::schema::AttrRole::Relation => {
            "relation (a promise field, never an attribute value)"
        }
        converge_format::schema::AttrRole::Annotation => "annotation",
    };
    format!("| {} | `{}` | {role} |", a.id, a.name)
}

/// The documented row of a fact: id, name, type.
fn fact_row(f: &converge_format::schema::FactSpec) -> String {
    format!("| {} | `{}` | `{}` |", f.id, f.name, f.ty.describe())
}

/// Beyond the ids, the docs give each promise type's attributes with their
/// types, each attribute's role and each fact's type, row for row as the
/// schema has them: what a verifier needs to check attribute values.
#[test]
fn the_docs_give_every_promise_type_attribute_and_fact_as_the_schema_does() {
    use converge_format::schema::{attributes, FACTS, PROMISE_TYPES};
    let (_, doc) = docs();
    let rows: Vec<String> = PROMISE_TYPES
        .iter()
        .map(promise_type_row)
        .chain(attributes().into_iter().map(attribute_row))
        .chain(FACTS.iter().map(fact_row))
        .collect();
    let missing: Vec<&String> = rows
        .iter()
        .filter(|r| !doc.lines().any(|l| l.trim() == r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/bytecode.md lacks these rows (or has them otherwise):\n{}",
        missing
            .iter()
            .map(|r| r.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The documented row of a built-in function: id, name, parameter types,
/// result type.
fn function_row(f: &converge_format::bundle::functions::Function) -> String {
    format!(
        "| {} | `{}` | `{}` | `{}` |",
        f.id,
        f.name,
        f.describe_params().replace('|', "\\|"),
        f.describe_result()
    )
}

/// The docs give every built-in function's signature as the table of
/// `functions.rs` has it, so a compiler or VM written from the docs types
/// `func` the same way.
#[test]
fn the_docs_give_every_function_signature_as_the_code_does() {
    use converge_format::bundle::functions::FUNCTIONS;
    let (_, doc) = docs();
    let missing: Vec<String> = FUNCTIONS
        .iter()
        .map(function_row)
        .filter(|r| !doc.lines().any(|l| l.trim() == r.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/bytecode.md (### Functions) lacks these rows (or has them otherwise):\n{}",
        missing.join("\n")
    );
}

/// The body of the worked example in `docs/bytecode.md` ("Example").
fn example_body() -> converge_format::bundle::format::Body {
    use converge_format::bundle::format::*;
    use converge_format::bundle::instr::Instr;
    let mut body = Body::with_programs(
        vec![
            Constant::Str("/x".into()),
            Constant::Word("web".into()),
            Constant::Int(-2),
            Constant::Str("hi".into()),
            Constant::Str("site.policy".into()),
        ],
        vec![vec![Instr::Class(1)]],
    );
    body.header = Header {
        name: "site".into(),
        key_id: [0x11; 8],
        serial: 300,
        pass_limit: 3,
        compiler_version: "0.1.0".into(),
        source_digest: [0; 32],
    };
    body.classes = List(vec![ClassEntry {
        name: 1,
        program: None,
    }]);
    body.promises = List(vec![Promise::from(
        converge_format::bundle::format::PromiseParts {
            attrs: FixedList::from(vec![AttrValue {
                attr: 12,
                value: Operand::Item(Item::Const(3)),
            }]),
            guard: Some(0),
            ..converge_format::bundle::format::PromiseParts::new(1, Item::Const(0))
        },
    )]);
    body.order = List(vec![0]);
    body.sources = List(vec![SourceLoc { file: 4, line: 3 }]);
    body
}

/// The hex bytes of the first code block after `### Example` (everything
/// after a `#` on a line is a comment).
fn doc_example_bytes(doc: &str) -> Vec<u8> {
    let mut lines = doc.lines().skip_while(|l| l.trim() != "### Example");
    let _ = lines.by_ref().find(|l| l.trim_start().starts_with("```"));
    let mut bytes = Vec::new();
    for line in lines {
        if line.trim_start().starts_with("```") {
            break;
        }
        let data = line.split('#').next().unwrap_or("");
        for word in data.split_whitespace() {
            bytes.push(
                u8::from_str_radix(word, 16).unwrap_or_else(|_| panic!("{word:?} in {line:?}")),
            );
        }
    }
    bytes
}

/// A reader of the docs can check their decoder against real bytes: the
/// worked example is exactly what the writer writes, and it verifies.
#[test]
fn the_documented_example_is_what_the_writer_writes() {
    let body = example_body();
    let encoded = converge_format::bundle::wire::encode(&body).unwrap();
    let (_, doc) = docs();
    let documented = doc_example_bytes(&doc);
    let hex = |b: &[u8]| {
        b.iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert_eq!(
        hex(&documented),
        hex(&encoded),
        "the example in docs/bytecode.md is not what the writer writes"
    );
    assert_eq!(
        converge_format::bundle::wire::decode(&encoded).unwrap(),
        body
    );
    converge_format::bundle::verify::verify_body(&body).unwrap();
}
