//! Template tests (LANGUAGE.md sections 12 and 18): tags and comments in
//! strings and template files, the tag-only-line rule, nesting, and every
//! template error with its exact span.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge_grammar::ast::{ExprKind, Item, TagKind};
use converge_grammar::lexer::MAX_INTERP_NESTING;
use converge_grammar::token::{LexErrorKind, StrLit, StrPart};
use converge_grammar::{nodes, parse, parse_template, FileId, Node, SyntaxError, SyntaxErrorKind};

/// The string value of `let x = STRING;`, and the syntax errors.
fn string_with_errors(lit: &str) -> (StrLit, Vec<SyntaxError>) {
    let src = format!("let x = {lit};");
    let (module, errors) = parse(FileId(0), &src);
    let value = match module.items.into_iter().next() {
        Some(Item::Let(l)) => match l.value.kind {
            ExprKind::Str(s) => s,
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    (value, errors)
}

fn string(lit: &str) -> StrLit {
    let (s, errors) = string_with_errors(lit);
    assert!(errors.is_empty(), "{lit}: {errors:?}");
    s
}

/// Parts as short text: literal text quoted, `${..}` and tags by kind.
fn show(parts: &[StrPart]) -> Vec<String> {
    parts
        .iter()
        .map(|p| match p {
            StrPart::Lit(t) => format!("{t:?}"),
            StrPart::Interp(_) => "${}".to_owned(),
            StrPart::Tag(t) => format!("{{% {} %}}", t.kind.word()),
        })
        .collect()
}

fn template(text: &str) -> Vec<StrPart> {
    let (parts, errors) = parse_template(FileId(3), text);
    assert!(errors.is_empty(), "{text:?}: {errors:?}");
    parts
}

/// The one error of a template file (scanning or nesting) and the text it
/// points at.
fn template_error(text: &str) -> (SyntaxErrorKind, String) {
    let (parts, mut errors) = parse_template(FileId(3), text);
    if errors.is_empty() {
        errors = nodes(&parts).err().unwrap_or_default();
    }
    assert_eq!(errors.len(), 1, "{text:?}: {errors:?}");
    let e = errors.remove(0);
    assert_eq!(e.span.file, FileId(3));
    let at = text[e.span.start as usize..e.span.end as usize].to_owned();
    (e.kind, at)
}

#[test]
fn tags_in_a_string_are_parts_with_spans() {
    // 0         1         2         3
    // 0123456789012345678901234567890123456
    // let x = "a{% if web %}b{% endif %}c";
    let s = string(r#""a{% if web %}b{% endif %}c""#);
    assert_eq!(
        show(&s.parts),
        ["\"a\"", "{% if %}", "\"b\"", "{% endif %}", "\"c\""]
    );
    let StrPart::Tag(tag) = &s.parts[1] else {
        panic!()
    };
    assert_eq!((tag.span.start, tag.span.end), (10, 22));
    let TagKind::If(cond) = &tag.kind else {
        panic!()
    };
    assert_eq!((cond.span.start, cond.span.end), (16, 19));
    assert_eq!(s.as_plain(), None);
}

#[test]
fn for_tags_with_one_or_two_names() {
    let parts =
        template("{% for k, v in sites %}{% endfor %}{% for b in site.backends %}{% endfor %}");
    let names: Vec<(Option<String>, String)> = parts
        .iter()
        .filter_map(|p| match p {
            StrPart::Tag(t) => match &t.kind {
                TagKind::For { key, var, .. } => Some((
                    key.as_ref().map(|k| k.name.to_string()),
                    var.name.to_string(),
                )),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(names, [(Some("k".into()), "v".into()), (None, "b".into())]);
}

#[test]
fn comments_produce_nothing_and_may_span_lines() {
    let s = string(r#""a{# note #}b""#);
    assert_eq!(show(&s.parts), ["\"ab\""]);
    let parts = template("a{# one\ntwo #}b\n");
    assert_eq!(show(&parts), ["\"ab\\n\""]);
}

#[test]
fn escapes_write_the_openers_literally() {
    let s = string(r#""\${x} \{% y %} \{# z #}""#);
    assert_eq!(show(&s.parts), ["\"${x} {% y %} {# z #}\""]);
    // In a template file only these three are escapes.
    let parts = template(r"\${x} \{% y %} \{# z #} C:\dir \n");
    assert_eq!(show(&parts), ["\"${x} {% y %} {# z #} C:\\\\dir \\\\n\""]);
}

#[test]
fn a_line_holding_only_tags_produces_no_line() {
    let text =
        "upstream {\n{% for b in backends %}\n    server ${b};\n  {% endfor %}  {# done #}\n}\n";
    let parts = template(text);
    assert_eq!(
        show(&parts),
        [
            "\"upstream {\\n\"",
            "{% for %}",
            "\"    server \"",
            "${}",
            "\";\\n\"",
            "{% endfor %}",
            "\"}\\n\""
        ]
    );
    // A tag inside a line of text keeps the line.
    let parts = template("listen 80{% if tls %} ssl{% endif %};\n");
    assert_eq!(
        show(&parts),
        [
            "\"listen 80\"",
            "{% if %}",
            "\" ssl\"",
            "{% endif %}",
            "\";\\n\""
        ]
    );
    // A line with only a comment disappears, a blank line stays.
    assert_eq!(show(&template("a\n{# c #}\n\nb")), ["\"a\\n\\nb\""]);
    // The last line, without a line break.
    assert_eq!(
        show(&template("a\n{% if x %}{% endif %}")),
        ["\"a\\n\"", "{% if %}", "{% endif %}"]
    );
    // A line holding an interpolation is output even if it is only that.
    assert_eq!(
        show(&template("{% if x %}${y}\n{% endif %}")),
        ["{% if %}", "${}", "\"\\n\"", "{% endif %}"]
    );
}

#[test]
fn heredoc_tags_follow_the_line_rule_after_indentation_stripping() {
    let src = "\"\"\"\n    # ${header}\n    {% for b in bs %}\n      server ${b};\n    {% endfor %}\n    {# multi\n       line #}\n    end\n    \"\"\"";
    let s = string(src);
    assert_eq!(
        show(&s.parts),
        [
            "\"# \"",
            "${}",
            "\"\\n\"",
            "{% for %}",
            "\"  server \"",
            "${}",
            "\";\\n\"",
            "{% endfor %}",
            "\"end\\n\""
        ]
    );
    // The spans stay absolute in the file (`let x = ` is 8 bytes).
    let StrPart::Interp(header) = &s.parts[1] else {
        panic!()
    };
    let file = format!("let x = {src};");
    assert_eq!(
        &file[header.span.start as usize..header.span.end as usize],
        "header"
    );
}

#[test]
fn template_file_spans_are_absolute_and_expressions_may_hold_braces() {
    let text = "a\n  ${join(xs, \"}\")} ${sites[sys.hostname].port ?? 80}\n";
    let parts = template(text);
    let exprs: Vec<&str> = parts
        .iter()
        .filter_map(|p| match p {
            StrPart::Interp(e) => Some(&text[e.span.start as usize..e.span.end as usize]),
            _ => None,
        })
        .collect();
    assert_eq!(exprs, ["join(xs, \"}\")", "sites[sys.hostname].port ?? 80"]);
}

#[test]
fn nodes_nest_blocks() {
    let text =
        "{% for b in bs %}{% if b == \"x\" %}X{% elif c %}C{% else %}O{% endif %}${b}{% endfor %}";
    let tree = nodes(&template(text)).unwrap();
    let [Node::For {
        var, body, span, ..
    }] = tree.as_slice()
    else {
        panic!("{tree:?}")
    };
    assert_eq!(var.name, "b");
    assert_eq!((span.start, span.end), (0, text.len() as u32));
    let [Node::If {
        branches,
        otherwise,
        ..
    }, Node::Interp(_)] = body.as_slice()
    else {
        panic!("{body:?}")
    };
    assert_eq!(branches.len(), 2);
    assert_eq!(branches[0].1, vec![Node::Text("X".into())]);
    assert_eq!(branches[1].1, vec![Node::Text("C".into())]);
    assert_eq!(otherwise.as_deref(), Some(&[Node::Text("O".into())][..]));
    // No else: `otherwise` is None; an empty else is Some(empty).
    let tree = nodes(&template(
        "{% if a %}{% endif %}{% if b %}{% else %}{% endif %}",
    ))
    .unwrap();
    let [Node::If {
        otherwise: none, ..
    }, Node::If {
        otherwise: empty, ..
    }] = tree.as_slice()
    else {
        panic!("{tree:?}")
    };
    assert_eq!((none, empty), (&None, &Some(Vec::new())));
}

#[test]
fn template_errors_point_at_the_tag() {
    use SyntaxErrorKind::*;
    for (text, kind, at) in [
        (
            "a{% for x in xs %}b",
            UnclosedTag { opened: "for" },
            "{% for x in xs %}",
        ),
        (
            "{% if a %}{% for x in xs %}{% endfor %}",
            UnclosedTag { opened: "if" },
            "{% if a %}",
        ),
        (
            "a{% endif %}",
            StrayTag {
                word: "endif",
                open: None,
            },
            "{% endif %}",
        ),
        (
            "{% else %}",
            StrayTag {
                word: "else",
                open: None,
            },
            "{% else %}",
        ),
        (
            "{% elif x %}",
            StrayTag {
                word: "elif",
                open: None,
            },
            "{% elif x %}",
        ),
        (
            "{% endfor %}",
            StrayTag {
                word: "endfor",
                open: None,
            },
            "{% endfor %}",
        ),
        (
            "{% for x in xs %}{% endif %}{% endfor %}",
            StrayTag {
                word: "endif",
                open: Some("for"),
            },
            "{% endif %}",
        ),
        (
            "{% if a %}{% endfor %}{% endif %}",
            StrayTag {
                word: "endfor",
                open: Some("if"),
            },
            "{% endfor %}",
        ),
        (
            "{% if a %}{% else %}{% else %}{% endif %}",
            ElseTwice,
            "{% else %}",
        ),
        (
            "{% if a %}{% else %}{% elif b %}{% endif %}",
            ElifAfterElse,
            "{% elif b %}",
        ),
        (
            "{% while x %}",
            UnknownTag {
                word: "while".into(),
            },
            "while",
        ),
        (
            "{% %}",
            UnknownTag {
                word: String::new(),
            },
            "{% %}",
        ),
        ("a ${x", Lex(LexErrorKind::UnterminatedInterpolation), "${"),
        ("a {% if x", Lex(LexErrorKind::UnterminatedTag), "{%"),
        (
            "a {# note",
            Lex(LexErrorKind::UnterminatedTemplateComment),
            "{#",
        ),
        (
            "{% else x %}",
            UnexpectedToken {
                found: "identifier `x`".into(),
                expected: vec!["`%}`".into()],
            },
            "x",
        ),
        (
            "{% for %}",
            UnexpectedToken {
                found: "`%}`".into(),
                expected: vec!["identifier".into()],
            },
            "%}",
        ),
        (
            "{% for x xs %}",
            UnexpectedToken {
                found: "identifier `xs`".into(),
                expected: vec!["`in`".into(), "`,`".into()],
            },
            "xs",
        ),
    ] {
        let (found, span_text) = template_error(text);
        assert_eq!(found, kind, "{text}");
        assert_eq!(span_text, at, "{text}");
    }
    // An expression error inside a tag or `${}` points into it.
    let (kind, at) = template_error("{% if a && %}");
    assert!(matches!(kind, UnexpectedToken { .. }), "{kind:?}");
    assert_eq!(at, "%}");
    let (kind, at) = template_error("x ${a b} y");
    assert!(matches!(kind, UnexpectedToken { .. }), "{kind:?}");
    assert_eq!(at, "b");
}

#[test]
fn template_errors_in_strings_are_syntax_errors_and_leave_an_empty_string() {
    // 0         1         2
    // 0123456789012345678901234567
    // let x = "a{% if b %}c";
    let (s, errors) = string_with_errors(r#""a{% if b %}c""#);
    assert_eq!(s, StrLit::default());
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].kind,
        SyntaxErrorKind::UnclosedTag { opened: "if" }
    );
    assert_eq!((errors[0].span.start, errors[0].span.end), (10, 20));
    // An unterminated tag in a `"..."` string: the string still ends at its
    // quote, so the `let` parses.
    let (_, errors) = string_with_errors(r#""a{% if b""#);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(
        errors[0].kind,
        SyntaxErrorKind::Lex(LexErrorKind::UnterminatedTag)
    );
    assert_eq!((errors[0].span.start, errors[0].span.end), (10, 12));
    // Raw strings have no tags.
    let s = string(r#"r"{% if %}""#);
    assert_eq!(s.as_plain().as_deref(), Some("{% if %}"));
}

#[test]
fn interpolation_nesting_is_limited_without_overflowing() {
    let depth = MAX_INTERP_NESTING as usize + 4;
    let mut lit = "x".to_owned();
    for _ in 0..depth {
        lit = format!("\"${{f({lit})}}\"");
    }
    let src = format!("let x = {lit};");
    let (_, errors) = parse(FileId(0), &src);
    assert!(
        errors
            .iter()
            .any(|e| e.kind == SyntaxErrorKind::Lex(LexErrorKind::NestingTooDeep)),
        "{errors:?}"
    );
    // Within the limit it parses.
    let mut lit = "x".to_owned();
    for _ in 0..4 {
        lit = format!("\"${{f({lit})}}\"");
    }
    let _ = string(&lit);
}

/// Every prefix of a template with every construct scans and nests without
/// panicking (the `template` fuzz target does this at scale).
#[test]
fn every_prefix_of_a_template_is_handled() {
    let text = "# ${comment_header}\nupstream ${name}_app {\n{% for b in site.backends %}\n    server ${b};\n{% endfor %}\n}\n    listen ${site.port}{% if site.tls %} ssl{% endif %};\n{% if web && !canary %}\n x \"${sys.hostname}\";\n{% elif canary %}\n{% else %}\n{% endif %}\n{# c #} \\${ \\{% é\n";
    for end in 0..=text.len() {
        if text.is_char_boundary(end) {
            let (parts, _) = parse_template(FileId(1), &text[..end]);
            let _ = nodes(&parts);
        }
    }
    assert!(nodes(&template(text)).is_ok());
}

#[test]
fn brackets_inside_an_interpolation_count_towards_the_nesting_limit() {
    let depth = converge_grammar::lexer::MAX_NESTING as usize + 10;
    let src = format!(
        "let x = \"${{{}x{}}}\";",
        "(".repeat(depth),
        ")".repeat(depth)
    );
    let (_, errors) = parse(FileId(0), &src);
    assert_eq!(
        errors.iter().map(|e| &e.kind).collect::<Vec<_>>(),
        [&SyntaxErrorKind::Lex(LexErrorKind::NestingTooDeep)],
        "{errors:?}"
    );
}

/// A small deterministic fuzz run: random splices of template and
/// expression syntax into a template, parsed both as a template file and
/// inside a heredoc and a string. Nothing panics and every error span is a
/// char-boundary range of the input (the fuzz targets do this at scale).
#[test]
fn random_splices_never_panic_and_spans_stay_in_bounds() {
    const PIECES: [&str; 24] = [
        "${", "}", "{%", "%}", "{#", "#}", "\"", "\\", "\n", " for ", " in ", ",", "if ", "endif",
        "else", "elif ", "endfor", "(", ")", "[", "??", "é", "\"\"\"", "x",
    ];
    let base = "a ${b} {% for k, v in m %}${k}{% if c %}x{% endif %}{% endfor %}{# z #}\n";
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    };
    let in_bounds = |src: &str, errors: &[SyntaxError]| {
        for e in errors {
            let (s, t) = (e.span.start as usize, e.span.end as usize);
            assert!(s <= t && t <= src.len(), "{src:?}: {e:?}");
            assert!(
                src.is_char_boundary(s) && src.is_char_boundary(t),
                "{src:?}: {e:?}"
            );
        }
    };
    for _ in 0..2000 {
        let mut text = base.to_owned();
        for _ in 0..1 + next(4) {
            let mut at = next(text.len() + 1);
            while !text.is_char_boundary(at) {
                at -= 1;
            }
            text.insert_str(at, PIECES[next(PIECES.len())]);
        }
        let (parts, errors) = parse_template(FileId(3), &text);
        in_bounds(&text, &errors);
        if let Err(errors) = nodes(&parts) {
            in_bounds(&text, &errors);
        }
        for src in [
            format!("let x = \"\"\"\n{text}\"\"\";"),
            format!("let x = \"{text}\";"),
        ] {
            let (_, errors) = parse(FileId(0), &src);
            in_bounds(&src, &errors);
        }
    }
}
