//! The tokens of the policy language (LANGUAGE.md section 2), produced by a
//! logos-generated DFA.
//!
//! Strings are lexed whole by a callback rather than by a modal lexer: the
//! callback splits a string into literal, interpolation and tag parts
//! itself, lexing and parsing the expressions inside `${...}` and `{% %}`
//! on the way (see [`crate::strings`]), and hands the parser a single
//! finished token. Numbers are lexed as one greedy run
//! (`[0-9][0-9A-Za-z_]*`) and classified afterwards, so `0o64x`, `10q` and
//! `99999999999999999999` each get one precise error instead of being split
//! into surprising pieces.

use logos::{FilterResult, Lexer, Logos};
use smol_str::SmolStr;

use crate::ast::{Expr, Tag};
use crate::parse::SyntaxError;
use crate::span::FileId;
use crate::strings::{lex_heredoc, lex_raw_string, lex_string};

/// One piece of a string literal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StrPart {
    /// Text with escapes already resolved.
    Lit(SmolStr),
    /// `${expr}`: any expression, with spans absolute in the file that holds
    /// the string (or the template file), so later phases point into it.
    Interp(Box<Expr>),
    /// `{% for x in xs %}`, `{% if c %}`, `{% endif %}`...: a template tag.
    /// Tags are flat here; [`crate::template::nodes`] nests them.
    Tag(Box<Tag>),
}

/// A string literal after escapes, interpolation splitting and (for heredocs)
/// indentation stripping.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct StrLit {
    pub parts: Vec<StrPart>,
    /// Raw strings (`r"..."`) never interpolate; kept so diagnostics and the
    /// formatter can tell them apart.
    pub raw: bool,
}

impl StrLit {
    /// The text of a string without interpolation or template tags, or
    /// `None` if it has any.
    pub fn as_plain(&self) -> Option<String> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                StrPart::Lit(text) => out.push_str(text),
                StrPart::Interp(_) | StrPart::Tag(_) => return None,
            }
        }
        Some(out)
    }
}

/// A numeric literal: an integer (any base) or a duration in seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Number {
    /// `42`, `0o644`, `0xff`. `octal` is kept because modes must be written
    /// in octal and the type checker warns about a decimal mode.
    Int { value: i64, octal: bool },
    /// `30s`, `5m`, `2h`, as seconds.
    Duration(u64),
}

/// What went wrong while lexing, with the exact byte range when it is
/// narrower than the whole token (an invalid escape inside a long string).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct LexError {
    pub kind: LexErrorKind,
    /// Absolute byte range of the offending text, if narrower than the token.
    pub at: Option<(u32, u32)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum LexErrorKind {
    /// A character that starts no token.
    #[default]
    UnexpectedChar,
    UnterminatedString,
    UnterminatedRawString,
    UnterminatedHeredoc,
    UnterminatedBlockComment,
    /// `${` without a closing `}` before the string ends.
    UnterminatedInterpolation,
    /// `{%` without a closing `%}` (on its line, inside a `"..."` string).
    UnterminatedTag,
    /// `{#` without a closing `#}`.
    UnterminatedTemplateComment,
    /// `\q`: the escapes are `\n \t \r \\ \" \$`, and `\{` before `%` or `#`.
    InvalidEscape(char),
    /// A numeric literal that does not fit in 64 bits.
    NumberTooLarge,
    /// `0o8`, `0x`, `12ab`: malformed number.
    BadNumber,
    /// `0600`: a decimal number with a leading zero. Anyone who writes it
    /// means octal, and reading it as decimal 600 (mode `0o1130`) would be
    /// a wrong write, so it is refused, as Rust and Python 3 do.
    LeadingZero,
    /// `10y`: a duration unit other than `s`, `m`, `h`.
    BadDurationUnit(String),
    /// Brackets, braces, parentheses, type arguments or `!`s nested deeper
    /// than [`crate::lexer::MAX_NESTING`]. Lexing stops there: every later
    /// phase walks the tree recursively, and no real policy nests this deep.
    NestingTooDeep,
}

impl LexError {
    pub fn new(kind: LexErrorKind) -> Self {
        LexError { kind, at: None }
    }

    pub fn at(kind: LexErrorKind, start: usize, end: usize) -> Self {
        LexError {
            kind,
            at: Some((start as u32, end as u32)),
        }
    }

    fn from_lexer(_: &mut Lexer<'_, Token>) -> Self {
        LexError::new(LexErrorKind::UnexpectedChar)
    }
}

/// Every keyword, as written: names the language reserves (the language
/// server refuses them as new names; editors highlight them).
pub const KEYWORDS: &[&str] = &[
    "import",
    "class",
    "exclusive",
    "let",
    "body",
    "bundle",
    "policy",
    "when",
    "for",
    "in",
    "use",
    "true",
    "false",
    "type",
    "fact",
];

/// What a lexer knows besides the text: the file (strings parse the
/// expressions inside `${...}` and tags while lexing, and those carry
/// spans), how deeply the text being lexed is nested, and the syntax errors
/// found inside strings, which the [`crate::lexer::Lexer`] adapter collects.
#[derive(Clone, Debug, Default)]
pub struct LexContext {
    pub file: FileId,
    /// Bracket depth around the current token (see [`crate::lexer::MAX_NESTING`]).
    pub depth: u32,
    /// How many `${...}`/tags the text being lexed sits inside.
    pub interp_depth: u32,
    /// Errors found inside string literals (bad escapes, errors in `${...}`
    /// and tags, unbalanced tags); the string itself becomes an empty stand-in.
    pub errors: Vec<SyntaxError>,
}

#[derive(Logos, Clone, Debug, PartialEq)]
#[logos(extras = LexContext)]
#[logos(error(LexError, LexError::from_lexer))]
#[logos(skip r"[ \t\r\n\f]+")]
#[logos(skip(r"//[^\n]*", allow_greedy = true))]
pub enum Token {
    // Keywords.
    #[token("import")]
    Import,
    #[token("class")]
    Class,
    #[token("exclusive")]
    Exclusive,
    #[token("let")]
    Let,
    #[token("body")]
    Body,
    #[token("bundle")]
    Bundle,
    #[token("policy")]
    Policy,
    #[token("when")]
    When,
    #[token("for")]
    For,
    #[token("in")]
    In,
    #[token("use")]
    Use,
    #[token("true")]
    True,
    #[token("false")]
    False,
    #[token("type")]
    Type,
    #[token("fact")]
    Fact,

    #[regex("[A-Za-z_][A-Za-z0-9_]*", |lex| SmolStr::new(lex.slice()))]
    Ident(SmolStr),

    #[regex("[0-9][0-9A-Za-z_]*", lex_number)]
    Number(Number),

    #[token("\"", lex_string)]
    Str(StrLit),
    #[token("r\"", lex_raw_string)]
    RawStr(StrLit),
    #[token("\"\"\"", lex_heredoc)]
    Heredoc(StrLit),

    #[token("/*", skip_block_comment)]
    BlockComment,

    // Punctuation.
    #[token("{")]
    LBrace,
    #[token("}")]
    RBrace,
    #[token("(")]
    LParen,
    #[token(")")]
    RParen,
    #[token("[")]
    LBracket,
    #[token("]")]
    RBracket,
    #[token(";")]
    Semi,
    #[token(",")]
    Comma,
    #[token(":")]
    Colon,
    #[token(".")]
    Dot,
    #[token("=")]
    Eq,
    #[token("==")]
    EqEq,
    #[token("!=")]
    NotEq,
    #[token("=~")]
    Match,
    #[token("!")]
    Bang,
    #[token("&&")]
    AndAnd,
    #[token("||")]
    OrOr,
    #[token("??")]
    Coalesce,
    /// `%}`: closes a template tag inside a string; nothing else.
    #[token("%}")]
    TagClose,
    #[token("<")]
    Lt,
    #[token(">")]
    Gt,
}

impl Token {
    /// How the token is shown in "expected one of ..." lists and messages.
    pub fn describe(&self) -> String {
        match self {
            Token::Ident(name) => format!("identifier `{name}`"),
            Token::Number(Number::Int { .. }) => "integer".to_owned(),
            Token::Number(Number::Duration(_)) => "duration".to_owned(),
            Token::Str(_) => "string".to_owned(),
            Token::RawStr(_) => "raw string".to_owned(),
            Token::Heredoc(_) => "heredoc string".to_owned(),
            other => format!("`{}`", other.text()),
        }
    }

    /// Source text of a fixed token (keywords and punctuation).
    pub fn text(&self) -> &'static str {
        match self {
            Token::Import => "import",
            Token::Class => "class",
            Token::Exclusive => "exclusive",
            Token::Let => "let",
            Token::Body => "body",
            Token::Bundle => "bundle",
            Token::Policy => "policy",
            Token::When => "when",
            Token::For => "for",
            Token::In => "in",
            Token::Use => "use",
            Token::True => "true",
            Token::False => "false",
            Token::Type => "type",
            Token::Fact => "fact",
            Token::LBrace => "{",
            Token::RBrace => "}",
            Token::LParen => "(",
            Token::RParen => ")",
            Token::LBracket => "[",
            Token::RBracket => "]",
            Token::Semi => ";",
            Token::Comma => ",",
            Token::Colon => ":",
            Token::Dot => ".",
            Token::Eq => "=",
            Token::EqEq => "==",
            Token::NotEq => "!=",
            Token::Match => "=~",
            Token::Bang => "!",
            Token::AndAnd => "&&",
            Token::OrOr => "||",
            Token::Coalesce => "??",
            Token::TagClose => "%}",
            Token::Lt => "<",
            Token::Gt => ">",
            Token::Ident(_)
            | Token::Number(_)
            | Token::Str(_)
            | Token::RawStr(_)
            | Token::Heredoc(_)
            | Token::BlockComment => "",
        }
    }
}

/// `/* ... */`, not nested. Skipped; an unterminated one is an error that
/// covers the rest of the file (there is nothing after it to lex).
fn skip_block_comment(lex: &mut Lexer<'_, Token>) -> FilterResult<(), LexError> {
    match lex.remainder().find("*/") {
        Some(end) => {
            lex.bump(end + 2);
            FilterResult::Skip
        }
        None => {
            let start = lex.span().start;
            lex.bump(lex.remainder().len());
            FilterResult::Error(LexError::at(
                LexErrorKind::UnterminatedBlockComment,
                start,
                start + 2,
            ))
        }
    }
}

fn lex_number(lex: &mut Lexer<'_, Token>) -> Result<Number, LexError> {
    parse_number(lex.slice()).map_err(LexError::new)
}

/// Classifies one greedy numeric run. Underscores are digit separators.
pub(crate) fn parse_number(text: &str) -> Result<Number, LexErrorKind> {
    let (digits, radix, octal) = if let Some(rest) = text.strip_prefix("0o") {
        (rest, 8, true)
    } else if let Some(rest) = text.strip_prefix("0x") {
        (rest, 16, false)
    } else {
        // Decimal, possibly followed by a duration unit.
        let split = text
            .find(|c: char| c.is_ascii_alphabetic())
            .unwrap_or(text.len());
        let (digits, unit) = text.split_at(split);
        if digits.len() > 1 && digits.starts_with('0') {
            return Err(LexErrorKind::LeadingZero);
        }
        let value = parse_digits(digits, 10)?;
        if unit.is_empty() {
            return Ok(Number::Int {
                value,
                octal: false,
            });
        }
        let scale: u64 = match unit {
            "s" => 1,
            "m" => 60,
            "h" => 3600,
            _ if unit.bytes().all(|b| b.is_ascii_alphabetic()) => {
                return Err(LexErrorKind::BadDurationUnit(unit.to_owned()))
            }
            _ => return Err(LexErrorKind::BadNumber),
        };
        let secs = (value as u64)
            .checked_mul(scale)
            .ok_or(LexErrorKind::NumberTooLarge)?;
        return Ok(Number::Duration(secs));
    };
    let value = parse_digits(digits, radix)?;
    Ok(Number::Int { value, octal })
}

fn parse_digits(digits: &str, radix: u32) -> Result<i64, LexErrorKind> {
    let mut value: i64 = 0;
    let mut any = false;
    for c in digits.chars() {
        if c == '_' {
            continue;
        }
        let digit = c.to_digit(radix).ok_or(LexErrorKind::BadNumber)?;
        any = true;
        value = value
            .checked_mul(i64::from(radix))
            .and_then(|v| v.checked_add(i64::from(digit)))
            .ok_or(LexErrorKind::NumberTooLarge)?;
    }
    if any {
        Ok(value)
    } else {
        Err(LexErrorKind::BadNumber)
    }
}
