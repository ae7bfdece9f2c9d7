//! Lexing of the three string forms (`"..."`, `r"..."`, `"""` heredocs) and
//! the scanner they share with template files.
//!
//! The scanner walks a string's text once: it resolves escapes, and at
//! `${`, `{%` and `{#` it hands over to a nested [`Lexer`] that lexes the
//! embedded expression up to its closing `}` or `%}`. Finding the closer by
//! lexing, not by searching, is what lets `${join(xs, "}")}` hold a string
//! with a brace in it. The tokens are parsed right there
//! ([`crate::parse`]'s `Expression` entry point), so a string token reaches
//! the parser finished, with every embedded expression already a tree whose
//! spans are absolute in the file.
//!
//! Errors inside a string are recorded (in the lexer's [`LexContext`]) and
//! the string becomes an empty stand-in, so the parser goes on and later
//! phases never see half a string.
//!
//! Decisions where LANGUAGE.md is silent (recorded in docs/language.md):
//! - `"..."` and `r"..."` end at the end of their line, and so does
//!   everything inside them; a multi-line text is written as a heredoc.
//!   This keeps one missing quote from swallowing the rest of the file.
//! - `$` not followed by `{` is a literal dollar, so `"$${x}"` is a `$`
//!   followed by the interpolation of `x`; `"\${x}"` is the literal `${x}`,
//!   and `"\{%"`, `"\{#"` are the literal `{%`, `{#`.
//! - Heredocs: the line break right after the opening `"""` and the
//!   whitespace-only line before the closing `"""` are dropped, the smallest
//!   indentation of the non-blank lines is removed from every line, a `\r`
//!   before each line break is dropped, and the text ends with a newline when
//!   the closing `"""` stands on its own line. Escapes, interpolation and
//!   tags apply.
//! - Template files have no escapes but `\${`, `\{%` and `\{#`; a backslash
//!   before anything else is kept.

use logos::Lexer as LogosLexer;

use crate::ast::{Expr, Tag};
use crate::lexer::{Lexer, MAX_INTERP_NESTING};
use crate::parse::{parse_embedded_expr, Closer, SyntaxError, SyntaxErrorKind};
use crate::span::{FileId, Span};
use crate::template::{apply_line_rule, nodes, parse_tag};
use crate::token::{LexContext, LexError, LexErrorKind, StrLit, StrPart, Token};

/// `"..."`: called with the opening quote already consumed.
pub(crate) fn lex_string(lex: &mut LogosLexer<'_, Token>) -> Result<StrLit, LexError> {
    let open = lex.span().start;
    let body_start = lex.span().end;
    let source = lex.source();
    let line_end = source
        .get(body_start..)
        .and_then(|rest| rest.find('\n'))
        .map_or(source.len(), |n| body_start + n);
    // Plain text up to the closing quote (no escape, interpolation, tag or
    // comment can start before it) is the string's one part: the scan
    // would make the same.
    let plain = source.get(body_start..line_end).and_then(|rest| {
        rest.bytes()
            .position(|b| matches!(b, b'"' | b'\\' | b'$' | b'{' | b'\r'))
            .filter(|&n| rest.as_bytes().get(n) == Some(&b'"'))
            .and_then(|n| rest.get(..n))
    });
    if let Some(text) = plain {
        lex.bump(text.len() + 1);
        let parts = if text.is_empty() {
            Vec::new()
        } else {
            vec![StrPart::Lit(text.into())]
        };
        return Ok(StrLit { parts, raw: false });
    }
    let line = source.get(..line_end).unwrap_or(source);
    let mut scanner = Scanner::new(line, Mode::Str, context_of(&lex.extras));
    let Some(close) = scanner.scan(body_start, line_end) else {
        lex.bump(line_end - body_start);
        return Err(LexError::at(
            LexErrorKind::UnterminatedString,
            open,
            line_end,
        ));
    };
    lex.bump(close + 1 - body_start);
    Ok(scanner.finish(&mut lex.extras))
}

/// `r"..."`: no escapes, no interpolation (for regexes).
pub(crate) fn lex_raw_string(lex: &mut LogosLexer<'_, Token>) -> Result<StrLit, LexError> {
    let open = lex.span().start;
    let rest = lex.remainder();
    match rest.find(['"', '\n']) {
        Some(end) if rest.as_bytes().get(end) == Some(&b'"') => {
            let text = rest[..end].to_owned();
            lex.bump(end + 1);
            let parts = if text.is_empty() {
                Vec::new()
            } else {
                vec![crate::token::StrPart::Lit(text.into())]
            };
            Ok(StrLit { parts, raw: true })
        }
        other => {
            let line_len = other.unwrap_or(rest.len());
            lex.bump(line_len);
            Err(LexError::at(
                LexErrorKind::UnterminatedRawString,
                open,
                open + 2 + line_len,
            ))
        }
    }
}

/// `"""` ... `"""`, with indentation stripping (see the module docs).
pub(crate) fn lex_heredoc(lex: &mut LogosLexer<'_, Token>) -> Result<StrLit, LexError> {
    let open = lex.span().start;
    let rest = lex.remainder();
    let bytes = rest.as_bytes();
    let mut i = 0;
    let mut end = None;
    while i < bytes.len() {
        match bytes.get(i) {
            Some(b'\\') => i += 2,
            Some(b'"') if bytes.get(i..i + 3) == Some(b"\"\"\"") => {
                // The last three of a run of quotes close the heredoc, so
                // text may end with a quote: `"""say "hi""""`.
                let mut close = i;
                while bytes.get(close + 3) == Some(&b'"') {
                    close += 1;
                }
                end = Some(close);
                break;
            }
            _ => i += 1,
        }
    }
    let Some(end) = end else {
        lex.bump(rest.len());
        return Err(LexError::at(
            LexErrorKind::UnterminatedHeredoc,
            open,
            open + 3,
        ));
    };
    let body_start = lex.span().end;
    let body_end = body_start + end;
    let source = lex.source();
    let body = source.get(body_start..body_end).unwrap_or("");

    // Lines with where each starts in the file, to find the content range
    // and the common indentation.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut offset = 0;
    for line in body.split('\n') {
        lines.push((body_start + offset, line.strip_suffix('\r').unwrap_or(line)));
        offset += line.len() + 1;
    }
    if lines.len() > 1 && lines.first().is_some_and(|(_, l)| is_blank(l)) {
        lines.remove(0);
    }
    let mut content_end = body_end;
    if lines.len() > 1 && lines.last().is_some_and(|(_, l)| is_blank(l)) {
        if let Some((start, _)) = lines.pop() {
            content_end = start;
        }
    }
    let content_start = lines.first().map_or(body_start, |(start, _)| *start);
    let indent = lines
        .iter()
        .filter(|(_, l)| !is_blank(l))
        .map(|(_, l)| l.bytes().take_while(|b| *b == b' ' || *b == b'\t').count())
        .min()
        .unwrap_or(0);

    let prefix = source.get(..body_end).unwrap_or(source);
    let mut scanner = Scanner::new(prefix, Mode::Heredoc { indent }, context_of(&lex.extras));
    scanner.scan(content_start, content_end);
    lex.bump(end + 3);
    Ok(scanner.finish(&mut lex.extras))
}

fn is_blank(s: &str) -> bool {
    s.bytes().all(|b| b == b' ' || b == b'\t')
}

/// The part of a lexer's context a nested scan inherits.
fn context_of(context: &LexContext) -> LexContext {
    LexContext {
        file: context.file,
        depth: context.depth,
        interp_depth: context.interp_depth,
        errors: Vec::new(),
    }
}

/// Which text is being scanned: decides the escapes, how lines are cut and
/// where the text ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `"..."`: ends at `"`, all escapes.
    Str,
    /// The content of a heredoc: all escapes, `indent` bytes stripped at
    /// the start of each line, `\r\n` read as `\n`.
    Heredoc { indent: usize },
    /// A template file: only `\${`, `\{%`, `\{#` are escapes.
    Template,
}

/// One piece of scanned text, before the tag-only-line rule.
#[derive(Clone, Debug)]
pub(crate) enum Piece {
    Text(String),
    Interp(Expr),
    /// Boxed: a tag is several times the size of the other pieces.
    Tag(Box<Tag>),
    /// `{# ... #}`: produces nothing, but a line holding only comments and
    /// tags disappears.
    Comment,
}

/// Walks the text of one string or template (see the module docs).
pub(crate) struct Scanner<'s> {
    /// The file's text up to where the scan may read (nested lexers stop
    /// there), with positions absolute in the file.
    src: &'s str,
    mode: Mode,
    context: LexContext,
    pieces: Vec<Piece>,
    buf: String,
    pub(crate) errors: Vec<SyntaxError>,
}

/// What stopped an embedded expression or comment from being read.
struct Unclosed;

impl<'s> Scanner<'s> {
    pub(crate) fn new(src: &'s str, mode: Mode, context: LexContext) -> Self {
        Scanner {
            src,
            mode,
            context,
            pieces: Vec::new(),
            buf: String::new(),
            errors: Vec::new(),
        }
    }

    fn file(&self) -> FileId {
        self.context.file
    }

    fn error(&mut self, kind: SyntaxErrorKind, start: usize, end: usize) {
        let span = Span::new(self.file(), start as u32, end as u32);
        self.errors.push(SyntaxError { kind, span });
    }

    fn at(&self, i: usize) -> Option<char> {
        self.src.get(i..).and_then(|rest| rest.chars().next())
    }

    fn starts_with(&self, i: usize, text: &str) -> bool {
        self.src.get(i..).is_some_and(|rest| rest.starts_with(text))
    }

    /// Scans `start..end`. In [`Mode::Str`] returns the position of the
    /// closing `"`, or `None` if the line ends first; in the other modes
    /// scans to `end` and returns it.
    pub(crate) fn scan(&mut self, start: usize, end: usize) -> Option<usize> {
        let mut i = self.line_start(start, end);
        while i < end {
            let c = self.at(i)?;
            match c {
                '\\' => i = self.escape(i, end)?,
                '"' if self.mode == Mode::Str => {
                    return Some(i);
                }
                '\r' if matches!(self.mode, Mode::Heredoc { .. })
                    && self.starts_with(i, "\r\n") =>
                {
                    i += 1;
                }
                '\n' if matches!(self.mode, Mode::Heredoc { .. }) => {
                    self.buf.push('\n');
                    i = self.line_start(i + 1, end);
                }
                '$' if self.starts_with(i, "${") => match self.embedded(i, end, false) {
                    Ok(next) => i = next,
                    Err(Unclosed) => return self.give_up(i, end),
                },
                '{' if self.starts_with(i, "{%") => match self.embedded(i, end, true) {
                    Ok(next) => i = next,
                    Err(Unclosed) => return self.give_up(i, end),
                },
                '{' if self.starts_with(i, "{#") => match self.comment(i, end) {
                    Ok(next) => i = next,
                    Err(Unclosed) => return self.give_up(i, end),
                },
                other => {
                    // Plain text runs to the next byte that may start one of
                    // the cases above (all ASCII, so a char boundary).
                    let run = self.src.get(i..end).and_then(|rest| {
                        rest.bytes()
                            .position(|b| matches!(b, b'\\' | b'"' | b'\r' | b'\n' | b'$' | b'{'))
                    });
                    let run_end = run.map_or(end, |n| i + n);
                    match self.src.get(i..run_end) {
                        Some(text) if run_end > i => {
                            self.buf.push_str(text);
                            i = run_end;
                        }
                        _ => {
                            self.buf.push(other);
                            i += other.len_utf8();
                        }
                    }
                }
            }
        }
        match self.mode {
            Mode::Str => None,
            Mode::Heredoc { .. } | Mode::Template => Some(end),
        }
    }

    /// After an unclosed `${`, `{%` or `{#` (already reported): a `"`
    /// string ends at the next quote of its line as if the text were plain
    /// (so the statement around it still parses); other texts end here.
    fn give_up(&mut self, from: usize, end: usize) -> Option<usize> {
        match self.mode {
            Mode::Str => self
                .src
                .get(from..end)
                .and_then(|rest| rest.find('"'))
                .map(|n| from + n),
            Mode::Heredoc { .. } | Mode::Template => Some(end),
        }
    }

    /// At the start of a heredoc line: skips the common indentation, or
    /// the whole line if it is blank. Other modes keep lines as written.
    fn line_start(&self, i: usize, end: usize) -> usize {
        let Mode::Heredoc { indent } = self.mode else {
            return i;
        };
        let line_end = self
            .src
            .get(i..end)
            .and_then(|rest| rest.find('\n'))
            .map_or(end, |n| i + n);
        let line = self.src.get(i..line_end).unwrap_or("");
        let blank_len = line
            .bytes()
            .take_while(|b| matches!(b, b' ' | b'\t' | b'\r'))
            .count();
        if blank_len == line.len() {
            line_end
        } else {
            let leading = line
                .bytes()
                .take_while(|b| matches!(b, b' ' | b'\t'))
                .count();
            i + leading.min(indent)
        }
    }

    /// A backslash at `i`; returns where scanning goes on.
    fn escape(&mut self, i: usize, end: usize) -> Option<usize> {
        let next = if i + 1 < end { self.at(i + 1) } else { None };
        if self.mode == Mode::Template {
            for literal in ["${", "{%", "{#"] {
                if self.starts_with(i + 1, literal) {
                    self.buf.push_str(literal);
                    return Some(i + 3);
                }
            }
            self.buf.push('\\');
            return Some(i + 1);
        }
        let Some(escaped) = next else {
            // A backslash at the end of a `"..."` line escapes the line
            // break: the string is unterminated.
            return match self.mode {
                Mode::Str => None,
                _ => {
                    self.error(
                        SyntaxErrorKind::Lex(LexErrorKind::InvalidEscape('\n')),
                        i,
                        i + 1,
                    );
                    Some(i + 1)
                }
            };
        };
        let width = escaped.len_utf8();
        let resolved = match escaped {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            '\\' => Some('\\'),
            '"' => Some('"'),
            '$' => Some('$'),
            '{' if self.starts_with(i + 2, "%") || self.starts_with(i + 2, "#") => Some('{'),
            _ => None,
        };
        match resolved {
            Some(c) => self.buf.push(c),
            None => self.error(
                SyntaxErrorKind::Lex(LexErrorKind::InvalidEscape(escaped)),
                i,
                i + 1 + width,
            ),
        }
        if escaped == '\n' {
            // Keep the heredoc's line handling for the next line.
            return Some(i + 1);
        }
        Some(i + 1 + width)
    }

    /// `${...}` (or, when `tag`, `{% ... %}`) starting at `i`: lexes up to
    /// the closer, parses what is inside, and returns the position after
    /// the closer.
    fn embedded(&mut self, i: usize, end: usize, tag: bool) -> Result<usize, Unclosed> {
        let unterminated = if tag {
            LexErrorKind::UnterminatedTag
        } else {
            LexErrorKind::UnterminatedInterpolation
        };
        if self.context.interp_depth >= MAX_INTERP_NESTING {
            self.error(SyntaxErrorKind::Lex(LexErrorKind::NestingTooDeep), i, i + 2);
            return Err(Unclosed);
        }
        let bound = self.src.get(..end).unwrap_or(self.src);
        let inner = LexContext {
            file: self.file(),
            depth: self.context.depth + 1,
            interp_depth: self.context.interp_depth + 1,
            errors: Vec::new(),
        };
        let mut lexer = Lexer::nested(bound, i + 2, inner);
        let mut tokens = Vec::new();
        let mut depth: u32 = 0;
        let mut close = None;
        for item in lexer.by_ref() {
            let Ok((start, token, stop)) = item else {
                continue;
            };
            match token {
                Token::RBrace if !tag && depth == 0 => {
                    close = Some((start, stop));
                    break;
                }
                Token::TagClose if tag && depth == 0 => {
                    close = Some((start, stop));
                    break;
                }
                Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
                Token::RParen | Token::RBracket | Token::RBrace => {
                    depth = depth.saturating_sub(1);
                }
                _ => {}
            }
            tokens.push((start, token, stop));
        }
        let Some((close_start, close_end)) = close else {
            // Too deep a nesting is why no closer was found; any other
            // error inside is an echo of the missing closer.
            match lexer
                .errors
                .iter()
                .find(|e| e.kind == LexErrorKind::NestingTooDeep)
            {
                Some(deep) => self.error(
                    SyntaxErrorKind::Lex(LexErrorKind::NestingTooDeep),
                    deep.start as usize,
                    deep.end as usize,
                ),
                None => self.error(SyntaxErrorKind::Lex(unterminated), i, i + 2),
            }
            return Err(Unclosed);
        };
        for err in lexer.errors {
            let kind = SyntaxErrorKind::Lex(err.kind);
            self.error(kind, err.start as usize, err.end as usize);
        }
        self.errors.extend(lexer.nested);
        let closer = Closer {
            text: if tag { "%}" } else { "}" },
            at: close_start,
        };
        if tag {
            let span = Span::new(self.file(), i as u32, close_end);
            match parse_tag(self.file(), self.src, tokens, &closer, span) {
                Ok(tag) => self.push(Piece::Tag(Box::new(tag))),
                Err(errors) => self.errors.extend(errors),
            }
        } else {
            let (expr, errors) = parse_embedded_expr(self.file(), self.src, tokens, &closer);
            self.errors.extend(errors);
            if let Some(expr) = expr {
                self.push(Piece::Interp(expr));
            }
        }
        Ok(close_end as usize)
    }

    /// `{# ... #}` starting at `i`; returns the position after `#}`.
    fn comment(&mut self, i: usize, end: usize) -> Result<usize, Unclosed> {
        let close = self
            .src
            .get(i + 2..end)
            .and_then(|rest| rest.find("#}"))
            .map(|n| i + 2 + n + 2);
        match close {
            Some(next) => {
                self.push(Piece::Comment);
                Ok(next)
            }
            None => {
                self.error(
                    SyntaxErrorKind::Lex(LexErrorKind::UnterminatedTemplateComment),
                    i,
                    i + 2,
                );
                Err(Unclosed)
            }
        }
    }

    fn push(&mut self, piece: Piece) {
        if !self.buf.is_empty() {
            self.pieces.push(Piece::Text(std::mem::take(&mut self.buf)));
        }
        self.pieces.push(piece);
    }

    /// The scanned pieces after the tag-only-line rule, and the errors.
    pub(crate) fn into_parts(mut self) -> (Vec<crate::token::StrPart>, Vec<SyntaxError>) {
        if !self.buf.is_empty() {
            self.pieces.push(Piece::Text(std::mem::take(&mut self.buf)));
        }
        (apply_line_rule(self.pieces), self.errors)
    }

    /// Finishes a string literal: its parts, or, when anything inside it was
    /// wrong (including unbalanced tags), an empty stand-in, with the errors
    /// handed to the lexer's context.
    fn finish(self, context: &mut LexContext) -> StrLit {
        let (parts, mut errors) = self.into_parts();
        // Only tags can be unbalanced: a string without any nests.
        if errors.is_empty() && parts.iter().any(|p| matches!(p, StrPart::Tag(_))) {
            if let Err(structure) = nodes(&parts) {
                errors = structure;
            }
        }
        if errors.is_empty() {
            StrLit { parts, raw: false }
        } else {
            context.errors.extend(errors);
            StrLit::default()
        }
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`
pub fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
