//! Parser tests for the v0.2 forms (LANGUAGE.md sections 10-11): record
//! types and literals, lookups, `??`, function calls, `for k, v in`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge_grammar::ast::{Expr, ExprKind, FactSource, Item, Stmt};
use converge_grammar::{parse, FileId, SyntaxError, SyntaxErrorKind};

fn module(src: &str) -> Vec<Item> {
    let (module, errors) = parse(FileId(0), src);
    assert!(errors.is_empty(), "errors in {src:?}: {errors:?}");
    module.items
}

/// The value of `let x = EXPR;`.
fn expr(text: &str) -> Expr {
    let src = format!("let x = {text};");
    match module(&src).into_iter().next() {
        Some(Item::Let(l)) => l.value,
        other => panic!("{other:?}"),
    }
}

fn errors(src: &str) -> Vec<SyntaxError> {
    parse(FileId(0), src).1
}

/// A compact rendering of an expression's shape, to compare trees.
fn shape(e: &Expr) -> String {
    let list = |items: &[Expr]| items.iter().map(shape).collect::<Vec<_>>().join(", ");
    match &e.kind {
        ExprKind::Path(p) => p
            .iter()
            .map(|i| i.name.as_str())
            .collect::<Vec<_>>()
            .join("."),
        ExprKind::Int { value, .. } => value.to_string(),
        ExprKind::Str(s) => format!("{:?}", s.as_plain().unwrap_or_default()),
        ExprKind::Bool(b) => b.to_string(),
        ExprKind::List(items) => format!("[{}]", list(items)),
        ExprKind::Map(entries) => format!(
            "map{{{}}}",
            entries
                .iter()
                .map(|(k, v)| format!("{}: {}", shape(k), shape(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprKind::Record(fields) => format!(
            "rec{{{}}}",
            fields
                .iter()
                .map(|(k, v)| format!("{}: {}", k.name, shape(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ExprKind::Field { base, name } => format!("field({}, {})", shape(base), name.name),
        ExprKind::Index { base, index } => format!("index({}, {})", shape(base), shape(index)),
        ExprKind::Coalesce(items) => format!("coalesce({})", list(items)),
        ExprKind::Call { func, args } => format!("call {}({})", func.name, list(args)),
        ExprKind::Or(items) => format!("or({})", list(items)),
        ExprKind::And(items) => format!("and({})", list(items)),
        ExprKind::Not(inner) => format!("not({})", shape(inner)),
        ExprKind::Compare { op, lhs, rhs } => {
            format!("({} {} {})", shape(lhs), op.as_str(), shape(rhs))
        }
        other => format!("{other:?}"),
    }
}

#[test]
fn expression_shapes() {
    for (text, expected) in [
        // Plain dotted names stay one path; resolution decides.
        ("site.port", "site.port"),
        ("sys.hostname", "sys.hostname"),
        // `.name` after anything else is a field access.
        ("sites[k].port", "field(index(sites, k), port)"),
        ("f(x).y", "field(call f(x), y)"),
        ("(a ?? b).c", "field(coalesce(a, b), c)"),
        ("(a).b", "field(a, b)"),
        ("a.b[0]", "index(a.b, 0)"),
        ("a[x][y].z[0]", "index(field(index(index(a, x), y), z), 0)"),
        ("sites[sys.hostname]", "index(sites, sys.hostname)"),
        ("ports[\"https\"]", "index(ports, \"https\")"),
        ("[1, 2][0]", "index([1, 2], 0)"),
        // `??` is the loosest operator and chains flat.
        ("a ?? b ?? c", "coalesce(a, b, c)"),
        ("x ?? y || z", "coalesce(x, or(y, z))"),
        ("x || y ?? z", "coalesce(or(x, y), z)"),
        ("(a ?? b) ?? c", "coalesce(coalesce(a, b), c)"),
        (
            "hosts[sys.hostname].port ?? roles[role].port ?? 80",
            "coalesce(field(index(hosts, sys.hostname), port), field(index(roles, role), port), 80)",
        ),
        ("a == b ?? c", "coalesce((a == b), c)"),
        // Function calls anywhere a value is.
        ("join(xs, \",\")", "call join(xs, \",\")"),
        ("len(keys(m))", "call len(call keys(m))"),
        ("f()", "call f()"),
        ("data(\"data/sites.toml\")", "call data(\"data/sites.toml\")"),
        ("contains(xs, x) && !y", "and(call contains(xs, x), not(y))"),
        ("split(sys.hostname, \"-\")[1]", "index(call split(sys.hostname, \"-\"), 1)"),
        // Record and map literals.
        ("{ server_name: \"x\", port: 80 }", "rec{server_name: \"x\", port: 80}"),
        ("{ a: 1, }", "rec{a: 1}"),
        ("{ \"a\": 1 }", "map{\"a\": 1}"),
        ("{}", "map{}"),
        ("{ (a): 1 }", "map{a: 1}"),
        ("{ a.b: 1 }", "map{a.b: 1}"),
        ("{ a: 1, \"b\": 2 }", "map{a: 1, \"b\": 2}"),
        ("[{ a: { b: [1] } }]", "[rec{a: rec{b: [1]}}]"),
    ] {
        assert_eq!(shape(&expr(text)), expected, "{text}");
    }
}

#[test]
fn spans_of_new_expressions() {
    // 0         1         2
    // 0123456789012345678901234567
    // let x = sites[k].port ?? 80;
    let e = expr("sites[k].port ?? 80");
    assert_eq!((e.span.start, e.span.end), (8, 27));
    let ExprKind::Coalesce(items) = &e.kind else {
        panic!()
    };
    let field = &items[0];
    assert_eq!((field.span.start, field.span.end), (8, 21));
    let ExprKind::Field { base, name } = &field.kind else {
        panic!()
    };
    assert_eq!((base.span.start, base.span.end), (8, 16));
    assert_eq!((name.span.start, name.span.end), (17, 21));
    let e = expr("{ a: 1 }");
    let ExprKind::Record(fields) = &e.kind else {
        panic!()
    };
    assert_eq!((fields[0].0.span.start, fields[0].0.span.end), (10, 11));
}

#[test]
fn type_declarations() {
    let src = "type Site = {\n  server_name: string,\n  port: int = 80,   // default\n  backends: list<string>,\n};\ntype Empty = {};\ntype One = { a: map<string, int> };";
    let items = module(src);
    let [Item::Type(site), Item::Type(empty), Item::Type(one)] = items.as_slice() else {
        panic!("{items:?}")
    };
    assert_eq!(site.name.name, "Site");
    let names: Vec<&str> = site.fields.iter().map(|f| f.name.name.as_str()).collect();
    assert_eq!(names, ["server_name", "port", "backends"]);
    assert!(site.fields[0].default.is_none());
    assert_eq!(
        site.fields[1].default.as_ref().map(shape),
        Some("80".to_owned())
    );
    assert_eq!(site.fields[2].ty.name.name, "list");
    assert_eq!(site.fields[2].ty.args[0].name.name, "string");
    let port = &site.fields[1];
    assert_eq!(
        &src[port.span.start as usize..port.span.end as usize],
        "port: int = 80"
    );
    assert_eq!(
        (site.span.start, site.span.end),
        (0, src.find(";\ntype Empty").unwrap() as u32 + 1)
    );
    assert!(empty.fields.is_empty());
    assert_eq!(one.fields[0].ty.args.len(), 2);
}

#[test]
fn type_is_a_keyword() {
    let errs = errors("let type = 1;");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        matches!(&errs[0].kind, SyntaxErrorKind::UnexpectedToken { found, .. } if found == "`type`"),
        "{errs:?}"
    );
    assert!(converge_grammar::token::KEYWORDS.contains(&"type"));
}

#[test]
fn for_over_a_map_and_a_list() {
    let items =
        module("bundle b { for k, v in m { file \"/${k}\" { content = v; } } for x in xs { } }");
    let Some(Item::Bundle(b)) = items.first() else {
        panic!()
    };
    let [Stmt::For(map), Stmt::For(list)] = b.body.as_slice() else {
        panic!("{:?}", b.body)
    };
    assert_eq!(map.key.as_ref().map(|k| k.name.as_str()), Some("k"));
    assert_eq!(map.var.name, "v");
    assert!(list.key.is_none());
    assert_eq!(list.var.name, "x");
}

#[test]
fn a_call_as_a_statement_is_a_bundle_call_and_inside_an_expression_a_function() {
    let items = module("policy { web(port = len(xs), join(xs, \",\")); }");
    let Some(Item::Policy(p)) = items.first() else {
        panic!()
    };
    let [Stmt::Call(call)] = p.body.as_slice() else {
        panic!("{:?}", p.body)
    };
    assert_eq!(call.bundle.name, "web");
    assert_eq!(shape(&call.args[0].value), "call len(xs)");
    assert_eq!(shape(&call.args[1].value), "call join(xs, \",\")");
}

#[test]
fn malformed_new_forms_are_errors_at_the_right_place() {
    for (src, at) in [
        // A field without a type.
        ("type T = { a };", "}"),
        // `??` without a right operand.
        ("let x = a ?? ;", ";"),
        // An index without a closing bracket.
        ("let x = a[1;", ";"),
        // `for` with a key but no value name.
        ("bundle b { for k, in m { } }", "in"),
        // A single `?`.
        ("let x = a ? b;", "?"),
    ] {
        let errs = errors(src);
        assert!(!errs.is_empty(), "{src}");
        let first = &errs[0];
        let found = &src[first.span.start as usize..first.span.end as usize];
        assert_eq!(found, at, "{src}: {errs:?}");
    }
}

#[test]
fn a_missing_semicolon_after_a_lookup_is_reported_as_such() {
    let errs = errors("let x = a[0]\nlet y = 1;");
    assert!(
        matches!(
            errs.first().map(|e| &e.kind),
            Some(SyntaxErrorKind::MissingSemicolon { .. })
        ),
        "{errs:?}"
    );
}

/// Every prefix of a file using every new form parses without panicking
/// (the parser never fails; the `parse` fuzz target does this at scale).
#[test]
fn every_prefix_parses() {
    let src = r#"type Site = { name: string, port: int = 80, };
let sites: map<string, Site> = data("sites.toml");
let s = "${sites[sys.hostname].port ?? 80} {% if a %}x{% elif b %}y{% else %}z{% endif %}";
let h = """
  {% for k, v in m %}
  ${k}=${join(v, "}")}
  {% endfor %}{# c #}
  """;
bundle b(p: int) { for k, v in sites { file "/${k}" { content = "${v.port}"; } } }
policy { b(p = len(keys(sites)) ?? 1); }
"#;
    for end in 0..=src.len() {
        if src.is_char_boundary(end) {
            let _ = parse(FileId(0), &src[..end]);
        }
    }
    let _ = parse(FileId(0), src);
    assert!(errors(src).is_empty(), "{:?}", errors(src));
}

/// `fact` declarations (LANGUAGE.md section 15): a program with its
/// arguments and an optional timeout, or a file; `from`, `file` and
/// `timeout` stay ordinary names everywhere else.
#[test]
fn fact_declarations() {
    let src = r#"fact dc: string from ["/usr/lib/p", "--short"] timeout 5s;
fact rack: int from file "/etc/rack";
fact hw: map<string, int> from [];
bundle b { file "/etc/x" { timeout = 5s; } command "from" { run = ["/bin/true"]; } }
"#;
    let items = module(src);
    let facts: Vec<_> = items
        .iter()
        .filter_map(|i| match i {
            Item::Fact(f) => Some(f),
            _ => None,
        })
        .collect();
    assert_eq!(facts.len(), 3);
    let FactSource::Program { argv, .. } = &facts[0].source else {
        panic!("{:?}", facts[0].source)
    };
    let words: Vec<String> = argv.iter().map(|(w, _)| w.as_plain().unwrap()).collect();
    assert_eq!(words, ["/usr/lib/p", "--short"]);
    let (_, span) = &argv[1];
    assert_eq!(&src[span.start as usize..span.end as usize], "\"--short\"");
    assert!(matches!(
        facts[0].timeout.as_ref().map(|t| &t.kind),
        Some(ExprKind::Duration(5))
    ));
    let FactSource::File { path, .. } = &facts[1].source else {
        panic!("{:?}", facts[1].source)
    };
    assert_eq!(path.0.as_plain().unwrap(), "/etc/rack");
    assert!(facts[1].timeout.is_none());
    assert!(matches!(&facts[2].source, FactSource::Program { argv, .. } if argv.is_empty()));
    assert_eq!(facts[2].ty.args.len(), 2);
    // A misspelt contextual word is a syntax error on that word, and the
    // item is still built.
    for (src, at, want) in [
        ("fact a: int form [\"/p\"];", "form", "from"),
        ("fact a: int from fil \"/p\";", "fil", "file"),
        ("fact a: int from [\"/p\"] timout 5s;", "timout", "timeout"),
    ] {
        let (module, errs) = parse(FileId(0), src);
        assert!(matches!(module.items.as_slice(), [Item::Fact(_)]), "{src}");
        let first = &errs[0];
        assert_eq!(&src[first.span.start as usize..first.span.end as usize], at);
        assert!(
            matches!(&first.kind, SyntaxErrorKind::UnexpectedToken { expected, .. } if expected == &[format!("`{want}`")]),
            "{src}: {errs:?}"
        );
    }
    for end in 0..=src.len() {
        let _ = parse(FileId(0), &src[..end]);
    }
}

/// The statements of the first bundle of `src`.
fn bundle_body(src: &str) -> Vec<Stmt> {
    match module(src).into_iter().next() {
        Some(Item::Bundle(b)) => b.body,
        other => panic!("{other:?}"),
    }
}

#[test]
fn defaults_blocks_untyped_and_typed() {
    let src = r#"bundle web {
  defaults { notify = [service "nginx"]; use common; }
  defaults file { mode = 0o644; }
  file "/etc/x" { content = "x"; }
}"#;
    let body = bundle_body(src);
    let Stmt::Defaults(all) = &body[0] else {
        panic!("{:?}", body[0])
    };
    assert!(all.kind.is_none());
    assert_eq!(all.attrs.len(), 2);
    assert_eq!(
        &src[all.head().start as usize..all.head().end as usize],
        "defaults"
    );
    let Stmt::Defaults(files) = &body[1] else {
        panic!("{:?}", body[1])
    };
    assert_eq!(files.kind.as_ref().unwrap().name, "file");
    assert_eq!(
        &src[files.head().start as usize..files.head().end as usize],
        "defaults file"
    );
    assert_eq!(
        &src[files.span.start as usize..files.span.end as usize],
        "defaults file { mode = 0o644; }"
    );
    assert!(matches!(body[2], Stmt::Promise(_)));
}

#[test]
fn defaults_is_a_contextual_word() {
    // Still a name elsewhere: a variable, a bundle, a promiser.
    let body = bundle_body(
        "bundle b(defaults: string) { file \"/etc/x\" { content = defaults; } defaults(); package defaults { } }",
    );
    assert!(matches!(body[0], Stmt::Promise(_)));
    assert!(matches!(body[1], Stmt::Call(_)));
    assert!(matches!(body[2], Stmt::Promise(_)));
    // A quoted promiser is a promise of the (unknown) type `defaults`.
    let body = bundle_body("bundle b { defaults \"file\" { mode = 0o644; } }");
    assert!(matches!(body[0], Stmt::Promise(_)));
}

#[test]
fn a_block_after_another_word_is_a_syntax_error() {
    // The promiser is missing: the error is at the `{`, as before
    // `defaults` existed.
    let src = "bundle b { file { mode = 0o644; } }";
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!(
        &src[errs[0].span.start as usize..errs[0].span.end as usize],
        "{"
    );
    let SyntaxErrorKind::UnexpectedToken { expected, .. } = &errs[0].kind else {
        panic!("{errs:?}")
    };
    assert!(
        expected.iter().any(|e| e.contains("string")),
        "{expected:?}"
    );
}
