//! The parser's public face: `parse(file, source) -> (Module, errors)`.
//!
//! It never fails and never panics: whatever the input, it returns a tree
//! (with `Error` nodes where it recovered) and every syntax error it found.
//! The lalrpop types stay inside this module so the generated parser can be
//! replaced without touching callers.

use lalrpop_util::{ErrorRecovery, ParseError};

use crate::ast::{AttrStmt, Defaults, Expr, ExprKind, Ident, Module, Promise, Stmt, TestModule};
use crate::grammar::{ExpressionParser, ModuleParser, TestModuleParser};
use crate::lexer::{Lexer, Triple};
use crate::span::{FileId, Span};
use crate::token::{LexError, LexErrorKind, Number, Token};

/// A syntax error: what went wrong and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub kind: SyntaxErrorKind,
    pub span: Span,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SyntaxErrorKind {
    /// A malformed token (unterminated string, bad escape, bad number...).
    Lex(LexErrorKind),
    /// A token that cannot appear here. `expected` lists what could, in the
    /// words the renderers show (`` `;` ``, `identifier`, `string`).
    UnexpectedToken {
        found: String,
        expected: Vec<String>,
    },
    /// The file ended in the middle of something.
    UnexpectedEof { expected: Vec<String> },
    /// A `;` is missing at the end of the preceding text; the span is the
    /// empty position right after it (where the `;` belongs), and `found` is
    /// the token that came instead.
    MissingSemicolon { found: String },
    /// A template tag word that is none of `for`, `if`, `elif`, `else`,
    /// `endfor`, `endif` (`{% while x %}`); empty when the tag is empty.
    UnknownTag { word: String },
    /// `{% for %}` or `{% if %}` (`opened`) never closed by `{% endfor %}`
    /// or `{% endif %}`; the span is the opening tag.
    UnclosedTag { opened: &'static str },
    /// `{% endif %}`, `{% else %}`, `{% elif %}` or `{% endfor %}` with no
    /// open block it could belong to. `open` is the innermost open block
    /// (`for` or `if`), if any.
    StrayTag {
        word: &'static str,
        open: Option<&'static str>,
    },
    /// A second `{% else %}` in one `{% if %}`.
    ElseTwice,
    /// `{% elif %}` after the `{% else %}` of its `{% if %}`.
    ElifAfterElse,
}

/// Parses one file. Syntax errors come back sorted by position.
///
/// A large file is parsed in pieces on several threads when every piece
/// parses cleanly ([`crate::split`]); otherwise, and for every small file,
/// in one piece: the tree and the errors are the same either way.
pub fn parse(file: FileId, src: &str) -> (Module, Vec<SyntaxError>) {
    if let Some(items) = crate::split::parse_in_parallel(file, src) {
        return (Module { file, items }, Vec::new());
    }
    parse_whole(file, src)
}

/// [`parse`] in one piece on this thread.
pub fn parse_whole(file: FileId, src: &str) -> (Module, Vec<SyntaxError>) {
    let mut lexer = Lexer::for_file(src, file);
    let mut recovered = Vec::new();
    let result = ModuleParser::new().parse(file, &mut recovered, lexer.by_ref());
    let (items, errors) = finish(file, src, lexer, result, recovered);
    (Module { file, items }, errors)
}

/// Parses one `*.test.policy` file (LANGUAGE.md section 16): imports and
/// `test` blocks, with the same recovery and error words as [`parse`].
pub fn parse_tests(file: FileId, src: &str) -> (TestModule, Vec<SyntaxError>) {
    let mut lexer = Lexer::for_file(src, file);
    let mut recovered = Vec::new();
    let result = TestModuleParser::new().parse(file, &mut recovered, lexer.by_ref());
    let (items, errors) = finish(file, src, lexer, result, recovered);
    (TestModule { file, items }, errors)
}

/// The items of a parse and every error it found, lexer's and recovered
/// ones included, sorted by position.
fn finish<T>(
    file: FileId,
    src: &str,
    lexer: Lexer<'_>,
    result: Result<Vec<T>, ParseError<u32, Token, LexError>>,
    recovered: Vec<ErrorRecovery<u32, Token, LexError>>,
) -> (Vec<T>, Vec<SyntaxError>) {
    let mut errors: Vec<SyntaxError> = Vec::new();
    let items = match result {
        Ok(items) => items,
        Err(err) => {
            errors.push(convert(file, src, err));
            Vec::new()
        }
    };
    errors.extend(
        recovered
            .into_iter()
            .map(|ErrorRecovery { error, .. }| convert(file, src, error)),
    );
    errors.extend(lexer.errors.into_iter().map(|e| SyntaxError {
        kind: SyntaxErrorKind::Lex(e.kind),
        span: Span::new(file, e.start, e.end),
    }));
    errors.sort_by_key(|e| (e.span.start, e.span.end));
    errors.dedup();
    let mut errors = drop_cascades(src, errors);
    // Errors inside strings were already filtered by their own parse.
    errors.extend(lexer.nested);
    errors.sort_by_key(|e| (e.span.start, e.span.end));
    (items, errors)
}

/// Where an embedded expression ends: the `}` of `${...}` or the `%}` of a
/// tag, as the token a user would see there.
#[derive(Clone, Debug)]
pub(crate) struct Closer {
    pub text: &'static str,
    pub at: u32,
}

/// Parses the tokens of one embedded expression (inside `${...}` or a tag),
/// already lexed with absolute positions. `None` when it is not an
/// expression; the errors say why.
pub(crate) fn parse_embedded_expr(
    file: FileId,
    src: &str,
    tokens: Vec<Triple>,
    closer: &Closer,
) -> (Option<Expr>, Vec<SyntaxError>) {
    // Most interpolations name a variable or fact (`${port}`,
    // `${sys.hostname}`): the tree the grammar makes of those, without
    // starting a parser for each.
    if let Some(path) = plain_path(file, &tokens) {
        return (Some(path), Vec::new());
    }
    let mut recovered = Vec::new();
    let result = ExpressionParser::new().parse(file, &mut recovered, tokens.into_iter().map(Ok));
    let mut errors: Vec<SyntaxError> = recovered
        .into_iter()
        .map(|ErrorRecovery { error, .. }| convert(file, src, error))
        .collect();
    let expr = match result {
        Ok(expr) => Some(expr),
        // The embedded text ended early: what was found there is the closer.
        Err(ParseError::UnrecognizedEof { expected, .. }) => {
            errors.push(SyntaxError {
                kind: SyntaxErrorKind::UnexpectedToken {
                    found: format!("`{}`", closer.text),
                    expected: describe_expected(expected),
                },
                span: Span::new(file, closer.at, closer.at + closer.text.len() as u32),
            });
            None
        }
        Err(err) => {
            errors.push(convert(file, src, err));
            None
        }
    };
    (expr, errors)
}

/// `a` or `a.b.c` (identifiers joined by dots, nothing else): the `Path`
/// the grammar's `Primary` and `Postfix` rules make of it (one path, each
/// name with its own span, the whole span from the first to the last).
fn plain_path(file: FileId, tokens: &[Triple]) -> Option<Expr> {
    let mut path: Vec<Ident> = Vec::with_capacity(tokens.len() / 2 + 1);
    for (n, (start, token, end)) in tokens.iter().enumerate() {
        match (n % 2, token) {
            (0, Token::Ident(name)) => path.push(Ident {
                name: name.clone(),
                span: sp(file, *start, *end),
            }),
            (1, Token::Dot) => {}
            _ => return None,
        }
    }
    let (first, _, _) = tokens.first()?;
    let (_, last, end) = tokens.last()?;
    if !matches!(last, Token::Ident(_)) {
        return None;
    }
    Some(Expr {
        kind: ExprKind::Path(path),
        span: sp(file, *first, *end),
    })
}

/// Drops parse errors that are only echoes of an earlier error:
/// - after recovering, the parser sometimes trips over the very next token
///   (in `bad bad;` both `bad` and `;` are "unexpected"): a parse error
///   separated from the previous parse error by whitespace alone is dropped;
/// - an unterminated string swallows the rest of its line, often including
///   the `;` or `}` that ended the statement: a parse error before the next
///   `;`, `{` or `}` after an unterminated string is dropped;
/// - an unterminated string, comment or heredoc swallows text that may have
///   closed a block, so "unexpected end of file" in a file that has one is
///   dropped (fixing the string is the first step anyway).
///
/// Lexical errors are always kept.
fn drop_cascades(src: &str, errors: Vec<SyntaxError>) -> Vec<SyntaxError> {
    let mut kept: Vec<SyntaxError> = Vec::with_capacity(errors.len());
    let mut last_parse_end: Option<u32> = None;
    let mut last_unterminated_end: Option<u32> = None;
    let swallowed_rest = errors.iter().any(|e| {
        matches!(
            e.kind,
            SyntaxErrorKind::Lex(
                LexErrorKind::UnterminatedString
                    | LexErrorKind::UnterminatedRawString
                    | LexErrorKind::UnterminatedBlockComment
                    | LexErrorKind::UnterminatedHeredoc
                    | LexErrorKind::NestingTooDeep
            )
        )
    });
    let between = |from: u32, to: u32| src.get(from as usize..to as usize);
    for err in errors {
        match &err.kind {
            SyntaxErrorKind::Lex(kind) => {
                if matches!(
                    kind,
                    LexErrorKind::UnterminatedString
                        | LexErrorKind::UnterminatedRawString
                        | LexErrorKind::UnterminatedHeredoc
                ) {
                    last_unterminated_end = Some(err.span.end);
                }
                kept.push(err);
            }
            _ => {
                let start = err.span.start;
                let echo_of_parse = last_parse_end.is_some_and(|end| {
                    between(end, start).is_some_and(|t| t.chars().all(char::is_whitespace))
                });
                let echo_of_string = last_unterminated_end.is_some_and(|end| {
                    between(end, start).is_some_and(|t| !t.contains([';', '{', '}']))
                });
                let echo_of_eof =
                    swallowed_rest && matches!(err.kind, SyntaxErrorKind::UnexpectedEof { .. });
                last_parse_end = Some(err.span.end);
                if !(echo_of_parse || echo_of_string || echo_of_eof) {
                    kept.push(err);
                }
            }
        }
    }
    kept
}

fn convert(file: FileId, src: &str, err: ParseError<u32, Token, LexError>) -> SyntaxError {
    let eof = src.len() as u32;
    match err {
        ParseError::InvalidToken { location } => {
            // One character, never ending inside a multi-byte one.
            let start = location.min(eof);
            let width = src
                .get(start as usize..)
                .and_then(|rest| rest.chars().next())
                .map_or(0, |c| c.len_utf8() as u32);
            SyntaxError {
                kind: SyntaxErrorKind::Lex(LexErrorKind::UnexpectedChar),
                span: Span::new(file, start, start + width),
            }
        }
        // Points at the very end of the file, where something is missing.
        ParseError::UnrecognizedEof { expected, .. } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedEof {
                expected: describe_expected(expected),
            },
            span: Span::new(file, eof, eof),
        },
        ParseError::UnrecognizedToken {
            token: (start, token, _),
            expected,
        } if only_semicolon_fits(&expected) => {
            let at = end_of_previous_token(src, start);
            SyntaxError {
                kind: SyntaxErrorKind::MissingSemicolon {
                    found: token.describe(),
                },
                span: Span::new(file, at, at),
            }
        }
        ParseError::UnrecognizedToken {
            token: (start, token, end),
            expected,
        } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedToken {
                found: token.describe(),
                expected: describe_expected(expected),
            },
            span: Span::new(file, start, end),
        },
        ParseError::ExtraToken {
            token: (start, token, end),
        } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedToken {
                found: token.describe(),
                expected: Vec::new(),
            },
            span: Span::new(file, start, end),
        },
        ParseError::User { error } => {
            let (start, end) = error.at.unwrap_or((0, 0));
            SyntaxError {
                kind: SyntaxErrorKind::Lex(error.kind),
                span: Span::new(file, start, end),
            }
        }
    }
}

/// Whether `;` is the only thing that could end the statement here: it is
/// expected, and everything else expected would only extend an expression
/// (`x = 1 mode = 2` lacks a `;`, it does not lack an `==`).
fn only_semicolon_fits(expected: &[String]) -> bool {
    const CONTINUATIONS: [&str; 10] = ["in", "==", "!=", "=~", "&&", "||", "??", ".", "[", "("];
    let mut has_semicolon = false;
    for name in expected {
        let bare = name.trim_matches('"');
        if bare == ";" {
            has_semicolon = true;
        } else if !CONTINUATIONS.contains(&bare) {
            return false;
        }
    }
    has_semicolon
}

/// The offset just after the last non-blank character before `offset`,
/// skipping `//` line comments, so a "missing `;`" points at the end of the
/// line that lacks it rather than at the start of the next one.
fn end_of_previous_token(src: &str, offset: u32) -> u32 {
    let mut end = (offset as usize).min(src.len());
    while let Some(before) = src.get(..end) {
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let line = before.get(line_start..).unwrap_or("");
        // A `//` after a quote is probably inside a string (a URL): keep it.
        let code = match line.find("//") {
            Some(i) if !line.get(..i).unwrap_or("").contains('"') => line.get(..i).unwrap_or(""),
            _ => line,
        };
        let trimmed = code.trim_end();
        if !trimmed.is_empty() {
            return (line_start + trimmed.len()) as u32;
        }
        if line_start == 0 {
            break;
        }
        end = line_start - 1;
    }
    offset
}

/// Turns lalrpop's terminal names (`"\";\""`, `"\"identifier\""`) into what
/// a user reads: punctuation and keywords in backticks, token classes plain.
fn describe_expected(expected: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(expected.len());
    for name in expected {
        let bare = name.trim_matches('"').replace("\\\"", "\"");
        let shown = match bare.as_str() {
            "identifier" | "number" | "string" | "raw string" | "heredoc" => bare,
            _ => format!("`{bare}`"),
        };
        if !out.contains(&shown) {
            out.push(shown);
        }
    }
    out
}

/// Records a syntax error unless `word` is the contextual keyword `want`
/// (`from`, `file`, `timeout` in a `fact`): those stay ordinary names
/// everywhere else, so the grammar takes an identifier and checks it here.
pub(crate) fn contextual(
    errors: &mut Vec<ErrorRecovery<u32, Token, LexError>>,
    word: &Ident,
    want: &str,
) {
    if word.name != want {
        errors.push(ErrorRecovery {
            error: ParseError::UnrecognizedToken {
                token: (
                    word.span.start,
                    Token::Ident(word.name.clone()),
                    word.span.end,
                ),
                expected: vec![format!("\"{want}\"")],
            },
            dropped_tokens: Vec::new(),
        });
    }
}

/// `WORD { ... }` is a `defaults` block when the word is `defaults`; after
/// any other word (`file { ... }`) the promiser is missing, and the error is
/// the one the parser gave before `defaults` existed: at the `{`, which
/// needed a promiser before it.
pub(crate) fn defaults_word(
    errors: &mut Vec<ErrorRecovery<u32, Token, LexError>>,
    word: &Ident,
    brace_start: u32,
    brace_end: u32,
) {
    if word.name != "defaults" {
        errors.push(ErrorRecovery {
            error: ParseError::UnrecognizedToken {
                token: (brace_start, Token::LBrace, brace_end),
                expected: vec!["\"string\"".to_owned(), "\"identifier\"".to_owned()],
            },
            dropped_tokens: Vec::new(),
        });
    }
}

/// `defaults TYPE { ... }` parses as a promise of type `defaults` whose
/// promiser is the bare name `TYPE`; this turns it into the
/// [`Defaults`] it is. Every other `KIND PROMISER { ... }` stays a promise
/// (`defaults "x" { ... }` too: the checker says `defaults` is no promise
/// type).
pub(crate) fn promise_or_defaults(
    kind: Ident,
    promiser: Expr,
    attrs: Vec<AttrStmt>,
    span: Span,
) -> Stmt {
    if kind.name == "defaults" {
        if let ExprKind::Path(path) = &promiser.kind {
            if let [ty] = path.as_slice() {
                return Stmt::Defaults(Defaults {
                    keyword: kind,
                    kind: Some(ty.clone()),
                    attrs,
                    span,
                });
            }
        }
    }
    Stmt::Promise(Promise {
        kind,
        promiser,
        attrs,
        span,
    })
}

/// A list the parser built by pushing, without its spare capacity: the
/// lists of statements and attributes are most of a large policy's tree,
/// and a `Vec` grown by doubling holds up to twice what it needs (a
/// bundle of nine statements kept room for sixteen; issue 22, item 4).
pub(crate) fn fit<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

/// Builds a span; used by the generated parser.
pub(crate) fn sp(file: FileId, start: u32, end: u32) -> Span {
    Span::new(file, start, end)
}

/// Extends a `&&` (`and`) or `||` chain with one more operand; used by the
/// generated parser. A parenthesised chain stays its own node, since its
/// span no longer matches the one being built.
pub(crate) fn chain(left: Expr, right: Expr, and: bool, span: Span) -> Expr {
    let operands = match left.kind {
        ExprKind::And(mut items) if and && left.span.start == span.start => {
            items.push(right);
            items
        }
        ExprKind::Or(mut items) if !and && left.span.start == span.start => {
            items.push(right);
            items
        }
        kind => vec![
            Expr {
                kind,
                span: left.span,
            },
            right,
        ],
    };
    let kind = if and {
        ExprKind::And(operands)
    } else {
        ExprKind::Or(operands)
    };
    Expr { kind, span }
}

/// Extends a `??` chain with one more operand, flat like [`chain`].
pub(crate) fn coalesce(left: Expr, right: Expr, span: Span) -> Expr {
    let operands = match left.kind {
        ExprKind::Coalesce(mut items) if left.span.start == span.start => {
            items.push(right);
            items
        }
        kind => vec![
            Expr {
                kind,
                span: left.span,
            },
            right,
        ],
    };
    Expr {
        kind: ExprKind::Coalesce(operands),
        span,
    }
}

/// `base.name`: a plain dotted name grows its `Path` (resolution decides
/// what `a.b` is); after anything else, or a parenthesised name, it is a
/// field access.
pub(crate) fn dot(base: Expr, name: Ident, span: Span) -> Expr {
    match base.kind {
        ExprKind::Path(mut path) if base.span.start == span.start => {
            // One name more, not room for twice as many (issue 22, item 4).
            path.reserve_exact(1);
            path.push(name);
            Expr {
                kind: ExprKind::Path(path),
                span,
            }
        }
        kind => Expr {
            kind: ExprKind::Field {
                base: Box::new(Expr {
                    kind,
                    span: base.span,
                }),
                name: Box::new(name),
            },
            span,
        },
    }
}

/// `{ ... }`: a record literal when every key is a bare identifier (not
/// parenthesised, not dotted), otherwise a map literal. `{}` is a map.
pub(crate) fn map_or_record(entries: Vec<(u32, Expr, Expr)>, span: Span) -> Expr {
    let is_field = |(start, key, _): &(u32, Expr, Expr)| {
        matches!(&key.kind, ExprKind::Path(path) if path.len() == 1) && key.span.start == *start
    };
    let kind = if !entries.is_empty() && entries.iter().all(is_field) {
        ExprKind::Record(
            entries
                .into_iter()
                .filter_map(|(_, key, value)| match key.kind {
                    ExprKind::Path(path) => path.into_iter().next().map(|name| (name, value)),
                    _ => None,
                })
                .collect(),
        )
    } else {
        ExprKind::Map(
            entries
                .into_iter()
                .map(|(_, key, value)| (key, value))
                .collect(),
        )
    };
    Expr { kind, span }
}

/// Turns a numeric token into an expression; used by the generated parser.
pub(crate) fn number_expr(n: Number, span: Span) -> Expr {
    let kind = match n {
        Number::Int { value, octal } => ExprKind::Int { value, octal },
        Number::Duration(secs) => ExprKind::Duration(secs),
    };
    Expr { kind, span }
}

#[cfg(test)]
mod plain_path_tests {
    use super::*;

    /// The shortcut for `${a.b}` makes exactly the parser's tree, and takes
    /// nothing else.
    #[test]
    fn a_plain_path_is_what_the_expression_parser_makes() {
        let file = FileId::default();
        for src in [
            "a",
            "sys.hostname",
            "a.b.c.d",
            "a.b[0]",
            "a.",
            ".a",
            "a b",
            "f(x)",
            "file \"x\"",
            "a == b",
            "true",
            "",
        ] {
            let tokens: Vec<Triple> = Lexer::new(src).filter_map(Result::ok).collect();
            let shortcut = plain_path(file, &tokens);
            let mut recovered = Vec::new();
            let parsed = ExpressionParser::new()
                .parse(file, &mut recovered, tokens.into_iter().map(Ok))
                .ok()
                .filter(|_| recovered.is_empty());
            match shortcut {
                Some(expr) => assert_eq!(Some(expr), parsed, "{src:?}"),
                None => assert!(
                    !matches!(
                        &parsed,
                        Some(Expr {
                            kind: ExprKind::Path(_),
                            ..
                        })
                    ),
                    "{src:?} is a path the shortcut missed"
                ),
            }
        }
    }
}
