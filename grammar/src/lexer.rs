//! Adapts the logos token stream to what the lalrpop parser consumes:
//! `(start, token, end)` triples with `u32` byte offsets.
//!
//! Lexical errors never reach the parser. They are recorded, and the bad
//! token is replaced by a harmless stand-in (an unterminated string still
//! becomes a string token, a malformed number becomes `0`, a stray character
//! is dropped), so the parser sees the structure the author meant and keeps
//! reporting real syntax errors further on instead of cascading.

use logos::Logos;

use crate::parse::{SyntaxError, SyntaxErrorKind};
use crate::span::FileId;
use crate::token::{LexContext, LexError, LexErrorKind, Number, StrLit, Token};

/// A lexical error with its absolute byte range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpannedLexError {
    pub kind: LexErrorKind,
    pub start: u32,
    pub end: u32,
}

pub type Triple = (u32, Token, u32);

/// The deepest nesting of `(`, `[`, `{` and `<` together, and the longest run
/// of `!`, that a file may have. Deeper input is refused with one error
/// instead of building a tree so deep that walking it overflows the stack.
pub const MAX_NESTING: u32 = 256;

/// How deeply `${...}` and template tags may nest inside strings inside
/// `${...}` (`"${f("${g("${x}")}")}"`). Each level lexes and parses its own
/// text, so this is kept far below [`MAX_NESTING`]; real templates use one
/// or two.
pub const MAX_INTERP_NESTING: u32 = 16;

pub struct Lexer<'src> {
    inner: logos::Lexer<'src, Token>,
    pub errors: Vec<SpannedLexError>,
    /// Syntax errors found inside string literals that are not lexical
    /// (an expression in `${...}` that does not parse, an unclosed
    /// `{% if %}`); already free of cascades.
    pub nested: Vec<SyntaxError>,
    depth: u32,
    bangs: u32,
    stopped: bool,
}

impl std::fmt::Debug for Lexer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lexer")
            .field("offset", &self.inner.span().end)
            .field("errors", &self.errors)
            .finish()
    }
}

impl<'src> Lexer<'src> {
    /// A lexer for a file whose id does not matter (tests, tools).
    pub fn new(src: &'src str) -> Self {
        Self::for_file(src, FileId::default())
    }

    /// A lexer for `src`, the text of `file`.
    pub fn for_file(src: &'src str, file: FileId) -> Self {
        let context = LexContext {
            file,
            ..LexContext::default()
        };
        Self::nested(src, 0, context)
    }

    /// A lexer that starts at byte `start` of `src` (the text inside a
    /// `${...}` or a tag), inside `context`'s nesting. Positions stay
    /// absolute in `src`, and the lexer never reads past the end of `src`.
    pub(crate) fn nested(src: &'src str, start: usize, context: LexContext) -> Self {
        let depth = context.depth;
        let mut inner = Token::lexer_with_extras(src, context);
        // The scanner passes the end of an ASCII `${` or `{%`, always a char
        // boundary inside `src`; anything else lexes nothing rather than
        // the wrong text.
        let start = if src.is_char_boundary(start) {
            start
        } else {
            src.len()
        };
        inner.bump(start);
        Lexer {
            inner,
            errors: Vec::new(),
            nested: Vec::new(),
            depth,
            bangs: 0,
            stopped: false,
        }
    }

    /// Moves the errors that strings left in the lexer's context to
    /// [`Self::errors`] (lexical ones) or [`Self::nested`].
    fn collect_string_errors(&mut self) {
        for err in std::mem::take(&mut self.inner.extras.errors) {
            match err.kind {
                SyntaxErrorKind::Lex(kind) => self.errors.push(SpannedLexError {
                    kind,
                    start: err.span.start,
                    end: err.span.end,
                }),
                _ => self.nested.push(err),
            }
        }
    }
}

impl Iterator for Lexer<'_> {
    type Item = Result<Triple, LexError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stopped {
            return None;
        }
        loop {
            self.inner.extras.depth = self.depth;
            let result = self.inner.next();
            self.collect_string_errors();
            let result = result?;
            let span = self.inner.span();
            let (start, end) = (span.start as u32, span.end as u32);
            match result {
                Ok(token) => {
                    if self.too_deep(&token) {
                        self.errors.push(SpannedLexError {
                            kind: LexErrorKind::NestingTooDeep,
                            start,
                            end,
                        });
                        self.stopped = true;
                        return None;
                    }
                    return Some(Ok((start, token, end)));
                }
                Err(err) => {
                    let (err_start, err_end) = err.at.unwrap_or((start, end));
                    self.errors.push(SpannedLexError {
                        kind: err.kind.clone(),
                        start: err_start,
                        end: err_end,
                    });
                    if let Some(stand_in) = stand_in(&err.kind) {
                        return Some(Ok((start, stand_in, end)));
                    }
                }
            }
        }
    }
}

impl Lexer<'_> {
    /// Tracks nesting; true when `token` goes past [`MAX_NESTING`].
    fn too_deep(&mut self, token: &Token) -> bool {
        match token {
            Token::LParen | Token::LBracket | Token::LBrace | Token::Lt => {
                self.depth += 1;
            }
            Token::RParen | Token::RBracket | Token::RBrace | Token::Gt => {
                self.depth = self.depth.saturating_sub(1);
            }
            _ => {}
        }
        if *token == Token::Bang {
            self.bangs += 1;
        } else {
            self.bangs = 0;
        }
        self.depth > MAX_NESTING || self.bangs > MAX_NESTING
    }
}

/// The token the parser sees in place of a malformed one, or `None` to drop it.
fn stand_in(kind: &LexErrorKind) -> Option<Token> {
    match kind {
        LexErrorKind::UnexpectedChar
        | LexErrorKind::UnterminatedBlockComment
        | LexErrorKind::NestingTooDeep => None,
        LexErrorKind::UnterminatedString
        | LexErrorKind::UnterminatedInterpolation
        | LexErrorKind::UnterminatedTag
        | LexErrorKind::UnterminatedTemplateComment
        | LexErrorKind::InvalidEscape(_) => Some(Token::Str(StrLit::default())),
        LexErrorKind::UnterminatedRawString => Some(Token::RawStr(StrLit {
            parts: Vec::new(),
            raw: true,
        })),
        LexErrorKind::UnterminatedHeredoc => Some(Token::Heredoc(StrLit::default())),
        LexErrorKind::NumberTooLarge | LexErrorKind::BadNumber | LexErrorKind::LeadingZero => {
            Some(Token::Number(Number::Int {
                value: 0,
                octal: false,
            }))
        }
        LexErrorKind::BadDurationUnit(_) => Some(Token::Number(Number::Duration(0))),
    }
}
