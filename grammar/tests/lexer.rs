//! Lexer tests, one group per token kind, through the public adapter that
//! the parser consumes (`Lexer` yields tokens and records errors).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge_grammar::ast::{Expr, ExprKind, Ident};
use converge_grammar::lexer::{Lexer, SpannedLexError};
use converge_grammar::token::{LexErrorKind, Number, StrLit, StrPart, Token};
use converge_grammar::{FileId, Span, SyntaxError};

fn lex(src: &str) -> (Vec<Token>, Vec<SpannedLexError>) {
    let (tokens, errors, nested) = lex_all(src);
    assert!(
        nested.is_empty(),
        "unexpected syntax errors in strings of {src:?}: {nested:?}"
    );
    (tokens, errors)
}

/// The tokens, the lexical errors and the other errors found inside strings.
fn lex_all(src: &str) -> (Vec<Token>, Vec<SpannedLexError>, Vec<SyntaxError>) {
    let mut lexer = Lexer::new(src);
    let tokens = lexer.by_ref().map(|t| t.unwrap().1).collect();
    (tokens, lexer.errors, lexer.nested)
}

fn tokens(src: &str) -> Vec<Token> {
    let (tokens, errors) = lex(src);
    assert!(
        errors.is_empty(),
        "unexpected lex errors in {src:?}: {errors:?}"
    );
    tokens
}

fn one_error(src: &str) -> SpannedLexError {
    let (_, errors) = lex(src);
    assert_eq!(errors.len(), 1, "expected one error in {src:?}: {errors:?}");
    errors.into_iter().next().unwrap()
}

fn string(src: &str) -> StrLit {
    match tokens(src).as_slice() {
        [Token::Str(s)] | [Token::RawStr(s)] | [Token::Heredoc(s)] => s.clone(),
        other => panic!("expected one string token for {src:?}, got {other:?}"),
    }
}

fn lit(s: &str) -> StrPart {
    StrPart::Lit(s.into())
}

/// `${a.b}` written at `start..end`: the names follow the `${`, one `.`
/// apart, and the expression is what lies between the braces.
fn interp(path: &[&str], start: u32, end: u32) -> StrPart {
    let mut at = start + 2;
    let idents = path
        .iter()
        .map(|s| {
            let ident = Ident {
                name: (*s).into(),
                span: Span::new(FileId(0), at, at + s.len() as u32),
            };
            at += s.len() as u32 + 1;
            ident
        })
        .collect();
    StrPart::Interp(Box::new(Expr {
        kind: ExprKind::Path(idents),
        span: Span::new(FileId(0), start + 2, end - 1),
    }))
}

fn int(value: i64, octal: bool) -> Token {
    Token::Number(Number::Int { value, octal })
}

// ---------------------------------------------------------------- keywords and names

#[test]
fn keywords_are_reserved_and_identifiers_are_not() {
    use Token::*;
    assert_eq!(
        tokens("import class exclusive let body bundle policy when for in use true false"),
        vec![Import, Class, Exclusive, Let, Body, Bundle, Policy, When, For, In, Use, True, False]
    );
    assert_eq!(
        tokens("classes _x web01 Policy"),
        vec![
            Ident("classes".into()),
            Ident("_x".into()),
            Ident("web01".into()),
            Ident("Policy".into())
        ]
    );
}

#[test]
fn punctuation() {
    use Token::*;
    assert_eq!(
        tokens("{ } ( ) [ ] ; , : . = == != =~ ! && || < >"),
        vec![
            LBrace, RBrace, LParen, RParen, LBracket, RBracket, Semi, Comma, Colon, Dot, Eq, EqEq,
            NotEq, Match, Bang, AndAnd, OrOr, Lt, Gt
        ]
    );
    // Longest match: `==` is one token, `= =` two.
    assert_eq!(
        tokens("a==b"),
        vec![Ident("a".into()), EqEq, Ident("b".into())]
    );
    assert_eq!(tokens("= ="), vec![Eq, Eq]);
}

// ---------------------------------------------------------------- numbers

#[test]
fn integers_in_every_base() {
    assert_eq!(tokens("42"), vec![int(42, false)]);
    assert_eq!(tokens("0o644"), vec![int(0o644, true)]);
    assert_eq!(tokens("0o7777"), vec![int(0o7777, true)]);
    assert_eq!(tokens("0xff"), vec![int(255, false)]);
    assert_eq!(tokens("1_000"), vec![int(1000, false)]);
    assert_eq!(tokens("0"), vec![int(0, false)]);
    assert_eq!(tokens("9223372036854775807"), vec![int(i64::MAX, false)]);
}

#[test]
fn malformed_numbers_are_one_error_each() {
    assert_eq!(one_error("0o8").kind, LexErrorKind::BadNumber);
    assert_eq!(one_error("0600").kind, LexErrorKind::LeadingZero);
    assert_eq!(one_error("007").kind, LexErrorKind::LeadingZero);
    assert_eq!(one_error("05m").kind, LexErrorKind::LeadingZero);
    assert_eq!(one_error("0x").kind, LexErrorKind::BadNumber);
    assert_eq!(one_error("0xfg").kind, LexErrorKind::BadNumber);
    assert_eq!(
        one_error("9223372036854775808").kind,
        LexErrorKind::NumberTooLarge
    );
    let err = one_error("x = 12ab;");
    assert_eq!(err.kind, LexErrorKind::BadDurationUnit("ab".into()));
    assert_eq!((err.start, err.end), (4, 8));
    // The error token still reaches the parser as a number, so `x = 0o9;`
    // does not also produce a syntax error.
    let (toks, _) = lex("x = 0o9;");
    assert_eq!(toks.len(), 4);
}

#[test]
fn durations() {
    let d = |s| Token::Number(Number::Duration(s));
    assert_eq!(tokens("30s 5m 2h 0s"), vec![d(30), d(300), d(7200), d(0)]);
    assert_eq!(
        one_error("10d").kind,
        LexErrorKind::BadDurationUnit("d".into())
    );
    assert_eq!(
        one_error("10ms").kind,
        LexErrorKind::BadDurationUnit("ms".into())
    );
    assert_eq!(
        one_error("99999999999999999h").kind,
        LexErrorKind::NumberTooLarge
    );
}

// ---------------------------------------------------------------- strings

#[test]
fn plain_strings_and_escapes() {
    assert_eq!(string(r#""""#).parts, vec![]);
    assert_eq!(string(r#""hello""#).parts, vec![lit("hello")]);
    assert_eq!(
        string(r#""a\nb\tc\\d\"e\$f\rg""#).parts,
        vec![lit("a\nb\tc\\d\"e$f\rg")]
    );
    assert_eq!(string("\"çé ✓\"").parts, vec![lit("çé ✓")]);
}

#[test]
fn interpolation_splits_parts_with_absolute_spans() {
    // 0123456789...
    // "a ${port} b ${sys.hostname}"
    let s = string(r#""a ${port} b ${sys.hostname}""#);
    assert_eq!(
        s.parts,
        vec![
            lit("a "),
            interp(&["port"], 3, 10),
            lit(" b "),
            interp(&["sys", "hostname"], 13, 28),
        ]
    );
    assert_eq!(string(r#""${x}""#).parts, vec![interp(&["x"], 1, 5)]);
    assert_eq!(s.as_plain(), None);
    assert_eq!(
        string(r#""no interp""#).as_plain(),
        Some("no interp".into())
    );
}

#[test]
fn dollar_edge_cases() {
    // `$` not followed by `{` is literal, so `$${x}` is `$` + interpolation.
    assert_eq!(
        string(r#""$${x}""#).parts,
        vec![lit("$"), interp(&["x"], 2, 6)]
    );
    // `\$` escapes: `\${x}` is the literal text `${x}`.
    assert_eq!(string(r#""\${x}""#).parts, vec![lit("${x}")]);
    assert_eq!(string(r#""cost: $5""#).parts, vec![lit("cost: $5")]);
    assert_eq!(string(r#""end$""#).parts, vec![lit("end$")]);
}

#[test]
fn unterminated_interpolation() {
    let err = one_error(r#"x = "a ${port b";"#);
    assert_eq!(err.kind, LexErrorKind::UnterminatedInterpolation);
    // Points at the `${`.
    assert_eq!((err.start, err.end), (7, 9));
    // The `"` ends the string even inside `${`.
    let err = one_error(r#""${x"; y"#);
    assert_eq!(err.kind, LexErrorKind::UnterminatedInterpolation);
}

#[test]
fn bad_interpolation_is_an_error_and_leaves_an_empty_string() {
    for src in [
        r#""${}""#,
        r#""${a-b}""#,
        r#""${a.}""#,
        r#""${1x}""#,
        r#""${a b}""#,
    ] {
        let (tokens, errors, nested) = lex_all(src);
        assert!(
            errors.len() + nested.len() >= 1,
            "{src}: {errors:?} {nested:?}"
        );
        assert_eq!(tokens, vec![Token::Str(StrLit::default())], "{src}");
    }
}

#[test]
fn interpolation_takes_any_expression() {
    // Spaces are allowed, and a string inside may hold the closing brace.
    let s = string(r#""${ x }""#);
    let x = Ident {
        name: "x".into(),
        span: Span::new(FileId(0), 4, 5),
    };
    let expected = Expr {
        kind: ExprKind::Path(vec![x]),
        span: Span::new(FileId(0), 4, 5),
    };
    assert_eq!(s.parts, vec![StrPart::Interp(Box::new(expected))]);
    let s = string(r#""a${join(xs, "}")}b""#);
    let [StrPart::Lit(a), StrPart::Interp(call), StrPart::Lit(b)] = s.parts.as_slice() else {
        panic!("{s:?}");
    };
    assert_eq!((a.as_str(), b.as_str()), ("a", "b"));
    let ExprKind::Call { func, args } = &call.kind else {
        panic!("{call:?}");
    };
    assert_eq!(func.name, "join");
    assert_eq!(args.len(), 2);
    assert_eq!((call.span.start, call.span.end), (4, 17));
    // Lookups and `??` inside.
    let s = string(r#""${sites[sys.hostname].port ?? 80}""#);
    let [StrPart::Interp(e)] = s.parts.as_slice() else {
        panic!("{s:?}");
    };
    assert!(matches!(e.kind, ExprKind::Coalesce(_)), "{e:?}");
}

#[test]
fn invalid_escape_points_at_the_escape() {
    let err = one_error(r#"x = "ab\qc";"#);
    assert_eq!(err.kind, LexErrorKind::InvalidEscape('q'));
    assert_eq!((err.start, err.end), (7, 9));
    // Lexing resumes after the string.
    let (toks, _) = lex(r#"x = "ab\qc"; y"#);
    assert_eq!(toks.last(), Some(&Token::Ident("y".into())));
}

#[test]
fn unterminated_string_stops_at_end_of_line() {
    let (toks, errors) = lex("a = \"oops;\nb = 1;");
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].kind, LexErrorKind::UnterminatedString);
    assert_eq!((errors[0].start, errors[0].end), (4, 10));
    // The next line is lexed normally.
    assert!(toks.contains(&Token::Ident("b".into())));
    assert_eq!(one_error("\"abc").kind, LexErrorKind::UnterminatedString);
    assert_eq!(one_error("\"abc\\").kind, LexErrorKind::UnterminatedString);
    // A backslash does not escape the line break.
    let (_, errors) = lex("\"a\\\nb");
    assert_eq!(errors[0].kind, LexErrorKind::UnterminatedString);
    assert_eq!((errors[0].start, errors[0].end), (0, 3));
}

#[test]
fn raw_strings_have_no_escapes_or_interpolation() {
    let s = string(r#"r"^web[0-9]+\.${x}$""#);
    assert!(s.raw);
    assert_eq!(s.parts, vec![lit(r"^web[0-9]+\.${x}$")]);
    assert_eq!(string(r#"r"""#).parts, vec![]);
    assert_eq!(
        one_error("r\"abc\n").kind,
        LexErrorKind::UnterminatedRawString
    );
    // An identifier ending in `r` is not a raw string prefix.
    assert_eq!(
        tokens(r#"for"x""#),
        vec![
            Token::For,
            Token::Str(StrLit {
                parts: vec![lit("x")],
                raw: false
            })
        ]
    );
}

#[test]
fn heredoc_strips_common_indentation() {
    let src = "\"\"\"\n    server {\n      listen 80;\n    }\n    \"\"\"";
    assert_eq!(string(src).parts, vec![lit("server {\n  listen 80;\n}\n")]);
}

#[test]
fn heredoc_on_one_line_and_without_final_newline() {
    assert_eq!(string("\"\"\"hello\"\"\"").parts, vec![lit("hello")]);
    assert_eq!(string("\"\"\"\n  a\n  b\"\"\"").parts, vec![lit("a\nb")]);
}

#[test]
fn heredoc_keeps_blank_lines_and_handles_crlf() {
    let src = "\"\"\"\r\n  a\r\n\r\n    b\r\n  \"\"\"";
    assert_eq!(string(src).parts, vec![lit("a\n\n  b\n")]);
}

#[test]
fn heredoc_interpolates_with_source_spans() {
    let src = "\"\"\"\n  host ${sys.hostname}\n  \"\"\"";
    // `${` is at byte 4 (after `"""\n`) + 2 (indent) + 5 ("host ") = 11.
    assert_eq!(
        string(src).parts,
        vec![
            lit("host "),
            interp(&["sys", "hostname"], 11, 26),
            lit("\n")
        ]
    );
}

#[test]
fn heredoc_may_contain_quotes_and_escaped_triple_quotes() {
    // Quotes right before the closing `"""` belong to the text.
    assert_eq!(string(r#""""say "hi"""""#).parts, vec![lit("say \"hi\"")]);
    assert_eq!(string(r#""""a \""" b""""#).parts, vec![lit("a \"\"\" b")]);
}

#[test]
fn unterminated_heredoc() {
    let err = one_error("x = \"\"\"\nabc\n");
    assert_eq!(err.kind, LexErrorKind::UnterminatedHeredoc);
    assert_eq!((err.start, err.end), (4, 7));
}

// ---------------------------------------------------------------- comments and stray input

#[test]
fn comments_are_skipped() {
    assert_eq!(
        tokens("a // line comment\n/* block\ncomment */ b /**/ c"),
        vec![
            Token::Ident("a".into()),
            Token::Ident("b".into()),
            Token::Ident("c".into())
        ]
    );
    // Block comments do not nest: the first `*/` ends it.
    assert_eq!(tokens("/* a /* b */ c"), vec![Token::Ident("c".into())]);
    // `//` inside a string is not a comment.
    assert_eq!(string(r#""http://x""#).parts, vec![lit("http://x")]);
}

#[test]
fn unterminated_block_comment() {
    let err = one_error("a /* never closed");
    assert_eq!(err.kind, LexErrorKind::UnterminatedBlockComment);
    assert_eq!((err.start, err.end), (2, 4));
}

#[test]
fn unexpected_characters_are_reported_and_skipped() {
    let (toks, errors) = lex("a @ b # é c");
    assert_eq!(
        toks,
        vec![
            Token::Ident("a".into()),
            Token::Ident("b".into()),
            Token::Ident("c".into())
        ]
    );
    assert_eq!(errors.len(), 3);
    assert!(errors
        .iter()
        .all(|e| e.kind == LexErrorKind::UnexpectedChar));
    // The multi-byte character is one error covering its two bytes.
    assert_eq!((errors[2].start, errors[2].end), (8, 10));
}

#[test]
fn keywords_lists_exactly_the_reserved_words() {
    use converge_grammar::token::KEYWORDS;
    for keyword in KEYWORDS {
        match tokens(keyword).as_slice() {
            [Token::Ident(_)] => panic!("`{keyword}` is listed but lexes as a name"),
            [_] => {}
            other => panic!("`{keyword}`: {other:?}"),
        }
    }
    // Every word the lexer reserves is listed: a word that is a keyword
    // token but missing from the list would lex as something other than a
    // name here.
    let words = "import class exclusive let body bundle policy when for in use true false \
                 file directory link line command report package service user group sys";
    for word in words.split(' ') {
        let is_keyword = !matches!(tokens(word).as_slice(), [Token::Ident(_)]);
        assert_eq!(is_keyword, KEYWORDS.contains(&word), "{word}");
    }
}

/// Every name of an interpolation points at its own text in the source,
/// in plain strings and in indented heredocs alike (rename edits there).
#[test]
fn interpolated_names_point_at_their_text() {
    let src = "x = \"a ${port}\" \"\"\"\n    b ${sys.hostname} ${cfg.http}\n    \"\"\"";
    let mut seen = Vec::new();
    for token in tokens(src) {
        let (Token::Str(s) | Token::Heredoc(s)) = token else {
            continue;
        };
        for part in s.parts {
            if let StrPart::Interp(expr) = part {
                let ExprKind::Path(path) = expr.kind else {
                    panic!("{expr:?}");
                };
                for name in path {
                    let at = name.span.start as usize;
                    assert_eq!(&src[at..name.span.end as usize], name.name.as_str());
                    seen.push(name.name.to_string());
                }
            }
        }
    }
    assert_eq!(seen, ["port", "sys", "hostname", "cfg", "http"]);
}
