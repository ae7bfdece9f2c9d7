//! Templates (LANGUAGE.md section 12): tags inside strings and template
//! files, the tag-only-line rule, and the nesting of tags into a tree.
//!
//! Strings and template files share one scanner ([`crate::strings`]); this
//! module holds what is particular to tags: reading a tag's words
//! ([`parse_tag`]), dropping the lines that hold only tags and comments
//! ([`apply_line_rule`]), and matching `for`/`endfor`, `if`/`elif`/`else`/
//! `endif` ([`nodes`]).

use crate::ast::{Expr, Ident, Tag, TagKind};
use crate::lexer::Triple;
use crate::parse::{parse_embedded_expr, Closer, SyntaxError, SyntaxErrorKind};
use crate::span::{FileId, Span};
use crate::strings::{Mode, Piece, Scanner};
use crate::token::{LexContext, StrPart, Token};

/// A template as a tree: text, interpolations, and the blocks the tags open.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Text(String),
    Interp(Expr),
    For {
        key: Option<Ident>,
        var: Ident,
        iter: Expr,
        body: Vec<Node>,
        span: Span,
    },
    /// `{% if %}` with its `{% elif %}`s (in order) and `{% else %}`.
    If {
        branches: Vec<(Expr, Vec<Node>)>,
        otherwise: Option<Vec<Node>>,
        span: Span,
    },
}

/// Parses a whole template file: its text is the template, with no quotes
/// and no escapes but `\${`, `\{%` and `\{#`. Spans are absolute in the
/// template file. The errors are those of scanning (unterminated `${`, `{%`
/// or `{#`, an expression that does not parse, an unknown tag); the
/// nesting of the tags is checked by [`nodes`].
pub fn parse_template(file: FileId, text: &str) -> (Vec<StrPart>, Vec<SyntaxError>) {
    let context = LexContext {
        file,
        ..LexContext::default()
    };
    let mut scanner = Scanner::new(text, Mode::Template, context);
    scanner.scan(0, text.len());
    let (parts, mut errors) = scanner.into_parts();
    errors.sort_by_key(|e| (e.span.start, e.span.end));
    (parts, errors)
}

/// Nests the flat parts of a string or template into blocks. Every
/// unbalanced tag is an error at that tag.
pub fn nodes(parts: &[StrPart]) -> Result<Vec<Node>, Vec<SyntaxError>> {
    let mut builder = Builder::default();
    for part in parts {
        match part {
            StrPart::Lit(text) => builder.push(Node::Text(text.to_string())),
            StrPart::Interp(expr) => builder.push(Node::Interp((**expr).clone())),
            StrPart::Tag(tag) => builder.tag(tag),
        }
    }
    builder.finish()
}

/// A block still open while nesting.
enum Open {
    For {
        key: Option<Ident>,
        var: Ident,
        iter: Expr,
        span: Span,
    },
    If {
        branches: Vec<(Expr, Vec<Node>)>,
        /// The condition of the branch being filled; `None` once in `else`.
        current: Option<Expr>,
        otherwise: Option<Vec<Node>>,
        span: Span,
    },
}

impl Open {
    fn word(&self) -> &'static str {
        match self {
            Open::For { .. } => "for",
            Open::If { .. } => "if",
        }
    }
}

#[derive(Default)]
struct Builder {
    /// The body being filled for each open block, the outermost first; the
    /// template's own body is the first.
    bodies: Vec<Vec<Node>>,
    open: Vec<Open>,
    errors: Vec<SyntaxError>,
}

impl Builder {
    fn push(&mut self, node: Node) {
        if self.bodies.is_empty() {
            self.bodies.push(Vec::new());
        }
        if let Some(body) = self.bodies.last_mut() {
            body.push(node);
        }
    }

    fn stray(&mut self, tag: &Tag) {
        let open = self.open.last().map(Open::word);
        self.errors.push(SyntaxError {
            kind: SyntaxErrorKind::StrayTag {
                word: tag.kind.word(),
                open,
            },
            span: tag.span,
        });
    }

    fn tag(&mut self, tag: &Tag) {
        if self.bodies.is_empty() {
            self.bodies.push(Vec::new());
        }
        match &tag.kind {
            TagKind::For { key, var, iter } => {
                self.open.push(Open::For {
                    key: key.clone(),
                    var: var.clone(),
                    iter: iter.clone(),
                    span: tag.span,
                });
                self.bodies.push(Vec::new());
            }
            TagKind::If(cond) => {
                self.open.push(Open::If {
                    branches: Vec::new(),
                    current: Some(cond.clone()),
                    otherwise: None,
                    span: tag.span,
                });
                self.bodies.push(Vec::new());
            }
            TagKind::Elif(_) | TagKind::Else => {
                let Some(Open::If {
                    branches,
                    current,
                    otherwise,
                    ..
                }) = self.open.last_mut()
                else {
                    return self.stray(tag);
                };
                let else_seen = current.is_none();
                if else_seen {
                    let kind = match tag.kind {
                        TagKind::Else => SyntaxErrorKind::ElseTwice,
                        _ => SyntaxErrorKind::ElifAfterElse,
                    };
                    self.errors.push(SyntaxError {
                        kind,
                        span: tag.span,
                    });
                    return;
                }
                let body = self.bodies.pop().unwrap_or_default();
                if let Some(cond_done) = current.take() {
                    branches.push((cond_done, body));
                }
                match &tag.kind {
                    TagKind::Elif(next) => *current = Some(next.clone()),
                    _ => *otherwise = Some(Vec::new()),
                }
                self.bodies.push(Vec::new());
            }
            TagKind::EndFor => {
                if !matches!(self.open.last(), Some(Open::For { .. })) {
                    return self.stray(tag);
                }
                let body = self.bodies.pop().unwrap_or_default();
                if let Some(Open::For {
                    key,
                    var,
                    iter,
                    span,
                }) = self.open.pop()
                {
                    self.push(Node::For {
                        key,
                        var,
                        iter,
                        body,
                        span: span.to(tag.span),
                    });
                }
            }
            TagKind::EndIf => {
                if !matches!(self.open.last(), Some(Open::If { .. })) {
                    return self.stray(tag);
                }
                let body = self.bodies.pop().unwrap_or_default();
                if let Some(Open::If {
                    mut branches,
                    current,
                    otherwise,
                    span,
                }) = self.open.pop()
                {
                    let otherwise = match current {
                        Some(cond) => {
                            branches.push((cond, body));
                            otherwise
                        }
                        None => Some(body),
                    };
                    self.push(Node::If {
                        branches,
                        otherwise,
                        span: span.to(tag.span),
                    });
                }
            }
        }
    }

    fn finish(mut self) -> Result<Vec<Node>, Vec<SyntaxError>> {
        for open in std::mem::take(&mut self.open) {
            let span = match &open {
                Open::For { span, .. } | Open::If { span, .. } => *span,
            };
            self.errors.push(SyntaxError {
                kind: SyntaxErrorKind::UnclosedTag {
                    opened: open.word(),
                },
                span,
            });
        }
        if self.errors.is_empty() {
            Ok(self.bodies.into_iter().next().unwrap_or_default())
        } else {
            self.errors.sort_by_key(|e| (e.span.start, e.span.end));
            Err(self.errors)
        }
    }
}

/// Reads the tokens between `{%` and `%}` (`span` covers both).
pub(crate) fn parse_tag(
    file: FileId,
    src: &str,
    tokens: Vec<Triple>,
    closer: &Closer,
    span: Span,
) -> Result<Tag, Vec<SyntaxError>> {
    let mut rest = tokens.into_iter().peekable();
    let Some((start, first, end)) = rest.next() else {
        return Err(vec![SyntaxError {
            kind: SyntaxErrorKind::UnknownTag {
                word: String::new(),
            },
            span,
        }]);
    };
    let word = match &first {
        Token::For => "for",
        Token::Ident(name) => name.as_str(),
        other => other.text(),
    };
    let unexpected = |found: &Triple, expected: &[&str]| SyntaxError {
        kind: SyntaxErrorKind::UnexpectedToken {
            found: found.1.describe(),
            expected: expected.iter().map(|e| (*e).to_owned()).collect(),
        },
        span: Span::new(file, found.0, found.2),
    };
    let at_close = |expected: &[&str]| SyntaxError {
        kind: SyntaxErrorKind::UnexpectedToken {
            found: format!("`{}`", closer.text),
            expected: expected.iter().map(|e| (*e).to_owned()).collect(),
        },
        span: Span::new(file, closer.at, closer.at + closer.text.len() as u32),
    };
    let expr = |tokens: Vec<Triple>| match parse_embedded_expr(file, src, tokens, closer) {
        (Some(expr), errors) if errors.is_empty() => Ok(expr),
        (_, errors) => Err(errors),
    };
    let ident = |item: Option<Triple>| match item {
        Some((s, Token::Ident(name), e)) => Ok(Ident {
            name,
            span: Span::new(file, s, e),
        }),
        Some(other) => Err(vec![unexpected(&other, &["identifier"])]),
        None => Err(vec![at_close(&["identifier"])]),
    };
    let kind = match word {
        "for" if first == Token::For => {
            let first_name = ident(rest.next())?;
            let (key, var) = if rest.peek().is_some_and(|t| t.1 == Token::Comma) {
                rest.next();
                (Some(first_name), ident(rest.next())?)
            } else {
                (None, first_name)
            };
            match rest.next() {
                Some((_, Token::In, _)) => {}
                Some(other) => return Err(vec![unexpected(&other, &["`in`", "`,`"])]),
                None => return Err(vec![at_close(&["`in`"])]),
            }
            let iter = expr(rest.collect())?;
            TagKind::For { key, var, iter }
        }
        "if" if matches!(first, Token::Ident(_)) => TagKind::If(expr(rest.collect())?),
        "elif" if matches!(first, Token::Ident(_)) => TagKind::Elif(expr(rest.collect())?),
        "else" | "endfor" | "endif" if matches!(first, Token::Ident(_)) => {
            if let Some(extra) = rest.next() {
                return Err(vec![unexpected(&extra, &["`%}`"])]);
            }
            match word {
                "else" => TagKind::Else,
                "endfor" => TagKind::EndFor,
                _ => TagKind::EndIf,
            }
        }
        _ => {
            let word = if word.is_empty() {
                first.describe()
            } else {
                word.to_owned()
            };
            return Err(vec![SyntaxError {
                kind: SyntaxErrorKind::UnknownTag { word },
                span: Span::new(file, start, end),
            }]);
        }
    };
    Ok(Tag { kind, span })
}

/// One output line while applying the line rule.
#[derive(Default)]
struct Line {
    pieces: Vec<Piece>,
    /// Whether a line break ends it (the last line may have none).
    newline: bool,
}

impl Line {
    /// Holds a tag or comment, no interpolation, and only white space.
    fn only_tags(&self) -> bool {
        let mut any_tag = false;
        for piece in &self.pieces {
            match piece {
                Piece::Tag(_) | Piece::Comment => any_tag = true,
                Piece::Interp(_) => return false,
                Piece::Text(text) => {
                    if !text.chars().all(|c| matches!(c, ' ' | '\t' | '\r')) {
                        return false;
                    }
                }
            }
        }
        any_tag
    }
}

/// The rule of LANGUAGE.md sections 12 and 18: a line that holds only tags
/// and comments (one or more) and white space produces no line, its line
/// break included. Applied to the text as it is output (after escapes and
/// heredoc indentation stripping). Comments disappear; adjacent text is
/// joined.
pub(crate) fn apply_line_rule(pieces: Vec<Piece>) -> Vec<StrPart> {
    // Without tags and comments no line holds only tags: the rule changes
    // nothing, and the text between interpolations is output as it is (the
    // common case, which does not need the pieces cut into lines).
    if !pieces
        .iter()
        .any(|p| matches!(p, Piece::Tag(_) | Piece::Comment))
    {
        return without_tags(pieces);
    }
    let mut lines: Vec<Line> = vec![Line::default()];
    for piece in pieces {
        match piece {
            Piece::Text(text) => {
                let mut segments = text.split('\n').peekable();
                while let Some(segment) = segments.next() {
                    if let Some(line) = lines.last_mut() {
                        if !segment.is_empty() {
                            line.pieces.push(Piece::Text(segment.to_owned()));
                        }
                        if segments.peek().is_some() {
                            line.newline = true;
                        }
                    }
                    if segments.peek().is_some() {
                        lines.push(Line::default());
                    }
                }
            }
            other => {
                if let Some(line) = lines.last_mut() {
                    line.pieces.push(other);
                }
            }
        }
    }
    let mut parts: Vec<StrPart> = Vec::new();
    let mut text = String::new();
    for line in lines {
        let drop_text = line.only_tags();
        for piece in line.pieces {
            match piece {
                Piece::Text(t) => {
                    if !drop_text {
                        text.push_str(&t);
                    }
                }
                Piece::Comment => {}
                Piece::Interp(expr) => {
                    flush(&mut text, &mut parts);
                    parts.push(StrPart::Interp(Box::new(expr)));
                }
                Piece::Tag(tag) => {
                    flush(&mut text, &mut parts);
                    parts.push(StrPart::Tag(tag));
                }
            }
        }
        if line.newline && !drop_text {
            text.push('\n');
        }
    }
    flush(&mut text, &mut parts);
    // Every string literal of the tree keeps this list: without its spare
    // capacity (most strings have one or two parts).
    parts.shrink_to_fit();
    parts
}

/// [`apply_line_rule`] for pieces that hold no tag and no comment.
fn without_tags(pieces: Vec<Piece>) -> Vec<StrPart> {
    let mut parts: Vec<StrPart> = Vec::with_capacity(pieces.len());
    let mut text = String::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) if text.is_empty() => text = t,
            Piece::Text(t) => text.push_str(&t),
            Piece::Interp(expr) => {
                flush(&mut text, &mut parts);
                parts.push(StrPart::Interp(Box::new(expr)));
            }
            Piece::Tag(tag) => {
                flush(&mut text, &mut parts);
                parts.push(StrPart::Tag(tag));
            }
            Piece::Comment => {}
        }
    }
    flush(&mut text, &mut parts);
    parts.shrink_to_fit();
    parts
}

fn flush(text: &mut String, parts: &mut Vec<StrPart>) {
    if !text.is_empty() {
        parts.push(StrPart::Lit(std::mem::take(text).into()));
    }
}
