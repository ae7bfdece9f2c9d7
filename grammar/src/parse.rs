//! The parser's public face: `parse(file, source) -> (Module, errors)`.
//!
//! It never fails and never panics: whatever the input, it returns a tree
//! (with `Error` nodes where it recovered) and every syntax error it found.
//! The lalrpop types stay inside this module so the generated parser can be
//! replaced without touching callers.

use lalrpop_util::{ErrorRecovery, ParseError};

use crate::ast::{Expr, ExprKind, Module};
use crate::grammar::{ExprParser, ModuleParser};
use crate::lexer::Lexer;
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
}

/// Parses one file. Syntax errors come back sorted by position.
pub fn parse(file: FileId, src: &str) -> (Module, Vec<SyntaxError>) {
    let mut lexer = Lexer::new(src);
    let mut recovered = Vec::new();
    let result = ModuleParser::new().parse(file, &mut recovered, lexer.by_ref());
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
    (Module { file, items }, drop_cascades(src, errors))
}

/// After recovering from one parse error, the parser sometimes trips over the
/// very next token (in `bad bad;` both `bad` and `;` are "unexpected"). A parse
/// error separated from the previous one by nothing but whitespace is such a
/// cascade and is dropped; lexical errors are always kept.
fn drop_cascades(src: &str, errors: Vec<SyntaxError>) -> Vec<SyntaxError> {
    let mut kept: Vec<SyntaxError> = Vec::with_capacity(errors.len());
    let mut last_parse_end: Option<u32> = None;
    for err in errors {
        let is_parse = !matches!(err.kind, SyntaxErrorKind::Lex(_));
        if is_parse {
            let cascade = last_parse_end.is_some_and(|end| {
                src.get(end as usize..err.span.start as usize)
                    .is_some_and(|between| between.chars().all(char::is_whitespace))
            });
            last_parse_end = Some(err.span.end);
            if cascade {
                continue;
            }
        }
        kept.push(err);
    }
    kept
}

/// Parses a single expression (used by tests and, later, by `--define`-style
/// command-line class expressions).
pub fn parse_expr(file: FileId, src: &str) -> Result<Expr, Vec<SyntaxError>> {
    let mut lexer = Lexer::new(src);
    let mut recovered = Vec::new();
    let result = ExprParser::new().parse(file, &mut recovered, lexer.by_ref());
    let mut errors: Vec<SyntaxError> = recovered
        .into_iter()
        .map(|r| convert(file, src, r.error))
        .collect();
    errors.extend(lexer.errors.into_iter().map(|e| SyntaxError {
        kind: SyntaxErrorKind::Lex(e.kind),
        span: Span::new(file, e.start, e.end),
    }));
    match result {
        Ok(expr) if errors.is_empty() => Ok(expr),
        Ok(_) => Err(errors),
        Err(err) => {
            errors.push(convert(file, src, err));
            Err(errors)
        }
    }
}

fn convert(file: FileId, src: &str, err: ParseError<u32, Token, LexError>) -> SyntaxError {
    let eof = src.len() as u32;
    match err {
        ParseError::InvalidToken { location } => SyntaxError {
            kind: SyntaxErrorKind::Lex(LexErrorKind::UnexpectedChar),
            span: Span::new(file, location, location.saturating_add(1).min(eof)),
        },
        ParseError::UnrecognizedEof { location, expected } => SyntaxError {
            kind: SyntaxErrorKind::UnexpectedEof {
                expected: describe_expected(expected),
            },
            span: Span::new(file, location, location),
        },
        ParseError::UnrecognizedToken {
            token: (start, token, _),
            expected,
        } if expected.len() == 1 && expected.first().is_some_and(|e| e == "\";\"") => {
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

/// Builds a span; used by the generated parser.
pub(crate) fn sp(file: FileId, start: u32, end: u32) -> Span {
    Span::new(file, start, end)
}

/// Turns a numeric token into an expression; used by the generated parser.
pub(crate) fn number_expr(n: Number, span: Span) -> Expr {
    let kind = match n {
        Number::Int { value, octal } => ExprKind::Int { value, octal },
        Number::Duration(secs) => ExprKind::Duration(secs),
    };
    Expr { kind, span }
}
