//! Lexing of the three string forms: `"..."`, `r"..."` and `"""` heredocs.
//!
//! Each callback first finds where the literal ends and moves the lexer past
//! it, and only then interprets the body. That order matters for recovery: an
//! invalid escape in one string is reported and lexing resumes right after
//! that string, so the rest of the file is still checked.
//!
//! Decisions where LANGUAGE.md is silent (recorded in docs/language.md):
//! - `"..."` and `r"..."` end at the end of their line; a multi-line text is
//!   written as a heredoc. This keeps one missing quote from swallowing the
//!   rest of the file.
//! - `$` not followed by `{` is a literal dollar, so `"$${x}"` is a `$`
//!   followed by the interpolation of `x`; `"\${x}"` is the literal `${x}`.
//! - Inside `${...}` only a dotted name is allowed, without spaces.
//! - Heredocs: the line break right after the opening `"""` and the
//!   whitespace-only line before the closing `"""` are dropped, the smallest
//!   indentation of the non-blank lines is removed from every line, a `\r`
//!   before each line break is dropped, and the text ends with a newline when
//!   the closing `"""` stands on its own line. Escapes and interpolation apply.

use logos::Lexer;

use crate::token::{InterpName, LexError, LexErrorKind, StrLit, StrPart, Token};

/// `"..."`: called with the opening quote already consumed.
pub(crate) fn lex_string(lex: &mut Lexer<'_, Token>) -> Result<StrLit, LexError> {
    let open = lex.span().start;
    let rest = lex.remainder();
    let mut end = None;
    let mut chars = rest.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                // Skip the escaped character, but never a line break: that
                // would let an unterminated string run on.
                if let Some((_, '\n')) | None = chars.next() {
                    break;
                }
            }
            '"' => {
                end = Some(i);
                break;
            }
            '\n' => break,
            _ => {}
        }
    }
    let Some(end) = end else {
        let line_len = rest.find('\n').unwrap_or(rest.len());
        lex.bump(line_len);
        return Err(LexError::at(
            LexErrorKind::UnterminatedString,
            open,
            open + 1 + line_len,
        ));
    };
    let body_start = lex.span().end;
    let body = &rest[..end];
    lex.bump(end + 1);
    let mut scanner = PartsBuilder::default();
    scanner.scan(body, body_start)?;
    Ok(scanner.finish(false))
}

/// `r"..."`: no escapes, no interpolation (for regexes).
pub(crate) fn lex_raw_string(lex: &mut Lexer<'_, Token>) -> Result<StrLit, LexError> {
    let open = lex.span().start;
    let rest = lex.remainder();
    match rest.find(['"', '\n']) {
        Some(end) if rest.as_bytes().get(end) == Some(&b'"') => {
            let text = rest[..end].to_owned();
            lex.bump(end + 1);
            let parts = if text.is_empty() {
                Vec::new()
            } else {
                vec![StrPart::Lit(text.into())]
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
pub(crate) fn lex_heredoc(lex: &mut Lexer<'_, Token>) -> Result<StrLit, LexError> {
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
    let body = &rest[..end];
    lex.bump(end + 3);

    // Split into lines, remembering where each starts in the file.
    let mut lines: Vec<(usize, &str)> = Vec::new();
    let mut offset = 0;
    for line in body.split('\n') {
        lines.push((body_start + offset, line.strip_suffix('\r').unwrap_or(line)));
        offset += line.len() + 1;
    }
    let is_blank = |s: &str| s.bytes().all(|b| b == b' ' || b == b'\t');
    if lines.len() > 1 && lines.first().is_some_and(|(_, l)| is_blank(l)) {
        lines.remove(0);
    }
    let mut trailing_newline = false;
    if lines.len() > 1 && lines.last().is_some_and(|(_, l)| is_blank(l)) {
        lines.pop();
        trailing_newline = true;
    }
    let indent = lines
        .iter()
        .filter(|(_, l)| !is_blank(l))
        .map(|(_, l)| l.bytes().take_while(|b| *b == b' ' || *b == b'\t').count())
        .min()
        .unwrap_or(0);

    let mut scanner = PartsBuilder::default();
    let count = lines.len();
    for (n, (start, line)) in lines.into_iter().enumerate() {
        if !is_blank(line) {
            let stripped = line.get(indent..).unwrap_or("");
            scanner.scan(stripped, start + indent)?;
        }
        if n + 1 < count || trailing_newline {
            scanner.buf.push('\n');
        }
    }
    Ok(scanner.finish(false))
}

/// Accumulates literal text and interpolations into [`StrPart`]s.
#[derive(Default)]
struct PartsBuilder {
    parts: Vec<StrPart>,
    buf: String,
}

impl PartsBuilder {
    /// Resolves escapes and splits out `${...}` in `text`, which starts at
    /// absolute byte offset `base` in the file.
    fn scan(&mut self, text: &str, base: usize) -> Result<(), LexError> {
        let mut chars = text.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => {
                    let (escaped, width) = match chars.next() {
                        Some((_, e)) => (e, e.len_utf8()),
                        None => ('\n', 0),
                    };
                    let resolved = match escaped {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        '\\' => '\\',
                        '"' => '"',
                        '$' => '$',
                        other => {
                            return Err(LexError::at(
                                LexErrorKind::InvalidEscape(other),
                                base + i,
                                base + i + 1 + width,
                            ))
                        }
                    };
                    self.buf.push(resolved);
                }
                '$' if matches!(chars.peek(), Some((_, '{'))) => {
                    chars.next();
                    let inner_start = i + 2;
                    let Some(close) = text.get(inner_start..).and_then(|r| r.find('}')) else {
                        return Err(LexError::at(
                            LexErrorKind::UnterminatedInterpolation,
                            base + i,
                            base + i + 2,
                        ));
                    };
                    let inner = text.get(inner_start..inner_start + close).unwrap_or("");
                    let end = inner_start + close + 1;
                    // Each name keeps its own position, so that resolution
                    // and rename can point at `port` in `${port}`.
                    let mut path: Vec<InterpName> = Vec::new();
                    let mut at = base + inner_start;
                    for segment in inner.split('.') {
                        path.push(InterpName {
                            name: smol_str::SmolStr::new(segment),
                            start: at as u32,
                        });
                        at += segment.len() + 1;
                    }
                    if !path.iter().all(|seg| is_identifier(&seg.name)) {
                        return Err(LexError::at(
                            LexErrorKind::BadInterpolation,
                            base + i,
                            base + end,
                        ));
                    }
                    // Skip the characters of the interpolation.
                    while chars.peek().is_some_and(|(j, _)| *j < end) {
                        chars.next();
                    }
                    self.flush();
                    self.parts.push(StrPart::Interp {
                        path,
                        start: (base + i) as u32,
                        end: (base + end) as u32,
                    });
                }
                other => self.buf.push(other),
            }
        }
        Ok(())
    }

    fn flush(&mut self) {
        if !self.buf.is_empty() {
            self.parts
                .push(StrPart::Lit(smol_str::SmolStr::new(std::mem::take(
                    &mut self.buf,
                ))));
        }
    }

    fn finish(mut self, raw: bool) -> StrLit {
        self.flush();
        StrLit {
            parts: self.parts,
            raw,
        }
    }
}

/// `[A-Za-z_][A-Za-z0-9_]*`
pub fn is_identifier(s: &str) -> bool {
    let mut bytes = s.bytes();
    matches!(bytes.next(), Some(b) if b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}
