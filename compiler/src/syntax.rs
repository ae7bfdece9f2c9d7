//! Wording of syntax errors: turns the parser's [`SyntaxError`] data into
//! [`Diagnostic`]s. The only place that decides what a syntax error says.

use converge_grammar::token::LexErrorKind;
use converge_grammar::{SyntaxError, SyntaxErrorKind};

use crate::diagnostic::{Code, Diagnostic};

pub fn to_diagnostic(err: &SyntaxError) -> Diagnostic {
    let span = err.span;
    match &err.kind {
        SyntaxErrorKind::UnexpectedToken { found, expected } => {
            let d = Diagnostic::new(
                Code::UnexpectedToken,
                format!("unexpected {found}"),
                span,
                expected_label(expected),
            );
            with_expected_help(d, expected)
        }
        SyntaxErrorKind::UnexpectedEof { expected } => {
            let d = Diagnostic::new(
                Code::UnexpectedEof,
                "unexpected end of file",
                span,
                "the file ends here",
            );
            let d = match expected.as_slice() {
                [] => d,
                [one] => d.with_note(format!("expected {one}")),
                many => d.with_note(format!("expected one of {}", many.join(", "))),
            };
            d.with_help("an item was still open when the file ended; add the missing `}` or `;`")
        }
        SyntaxErrorKind::MissingSemicolon { found } => Diagnostic::new(
            Code::UnexpectedToken,
            format!("missing `;` before {found}"),
            span,
            "expected `;` here",
        )
        .with_help("end the statement with `;`"),
        SyntaxErrorKind::Lex(kind) => lex_diagnostic(kind, err),
        SyntaxErrorKind::UnknownTag { word } if word.is_empty() => Diagnostic::new(
            Code::UnknownTag,
            "empty template tag",
            span,
            "this tag has no word",
        )
        .with_help(TAG_WORDS),
        SyntaxErrorKind::UnknownTag { word } => Diagnostic::new(
            Code::UnknownTag,
            format!("unknown template tag `{word}`"),
            span,
            "not a template tag",
        )
        .with_help(TAG_WORDS),
        SyntaxErrorKind::UnclosedTag { opened } => Diagnostic::new(
            Code::UnbalancedTags,
            format!("unclosed `{{% {opened} %}}`"),
            span,
            format!("this `{opened}` has no `{{% end{opened} %}}`"),
        )
        .with_help(format!("close the block with `{{% end{opened} %}}`")),
        SyntaxErrorKind::StrayTag { word, open } => {
            let d = Diagnostic::new(
                Code::UnbalancedTags,
                format!("`{{% {word} %}}` without a matching opening tag"),
                span,
                match word {
                    &"endfor" => "no `{% for %}` is open here",
                    _ => "no `{% if %}` is open here",
                },
            );
            match open {
                Some(open) => d.with_help(format!(
                    "the innermost open block is `{{% {open} %}}`: close it with `{{% end{open} %}}` first"
                )),
                None => d.with_help("remove the tag, or open the block it belongs to"),
            }
        }
        SyntaxErrorKind::ElseTwice => Diagnostic::new(
            Code::UnbalancedTags,
            "a second `{% else %}` in one `{% if %}`",
            span,
            "this `{% if %}` already has an `{% else %}`",
        )
        .with_help("an `{% if %}` has at most one `{% else %}`, after all `{% elif %}`s"),
        SyntaxErrorKind::ElifAfterElse => Diagnostic::new(
            Code::UnbalancedTags,
            "`{% elif %}` after `{% else %}`",
            span,
            "this `{% if %}` already reached its `{% else %}`",
        )
        .with_help("move the `{% elif %}` before the `{% else %}`"),
    }
}

const TAG_WORDS: &str = "the tags are `{% for x in LIST %}`, `{% for k, v in MAP %}`, `{% endfor %}`, `{% if COND %}`, `{% elif COND %}`, `{% else %}` and `{% endif %}`; write `\\{%` for a literal `{%`";

fn lex_diagnostic(kind: &LexErrorKind, err: &SyntaxError) -> Diagnostic {
    let span = err.span;
    match kind {
        LexErrorKind::UnexpectedChar => Diagnostic::new(
            Code::UnexpectedChar,
            "unexpected character",
            span,
            "no token starts with this character",
        )
        .with_help("remove it, or put it inside a string"),
        LexErrorKind::UnterminatedString => Diagnostic::new(
            Code::UnterminatedString,
            "unterminated string",
            span,
            "this string has no closing `\"` on its line",
        )
        .with_help("close the string with `\"`; for text over several lines use a `\"\"\"` heredoc"),
        LexErrorKind::UnterminatedRawString => Diagnostic::new(
            Code::UnterminatedString,
            "unterminated raw string",
            span,
            "this raw string has no closing `\"` on its line",
        )
        .with_help("close the raw string with `\"`; raw strings cannot contain `\"` or line breaks"),
        LexErrorKind::UnterminatedHeredoc => Diagnostic::new(
            Code::UnterminatedString,
            "unterminated heredoc",
            span,
            "this heredoc is never closed",
        )
        .with_help("end the text with `\"\"\"`"),
        LexErrorKind::UnterminatedBlockComment => Diagnostic::new(
            Code::UnterminatedComment,
            "unterminated block comment",
            span,
            "this comment is never closed",
        )
        .with_help("end the comment with `*/` (block comments do not nest)"),
        LexErrorKind::InvalidEscape(c) => {
            let shown = match c {
                '\n' => "a line break".to_owned(),
                c => format!("`\\{c}`"),
            };
            Diagnostic::new(
                Code::InvalidEscape,
                format!("invalid escape sequence {shown}"),
                span,
                "unknown escape",
            )
            .with_help(
                "the escapes are \\n \\t \\r \\\\ \\\" \\$, and \\{% \\{# for a literal tag opener; for regexes write a raw string r\"...\"",
            )
        }
        LexErrorKind::UnterminatedInterpolation => Diagnostic::new(
            Code::UnterminatedInterpolation,
            "unterminated interpolation",
            span,
            "this `${` has no closing `}`",
        )
        .with_help("close it with `}`, or write `\\${` for a literal `${`"),
        LexErrorKind::UnterminatedTag => Diagnostic::new(
            Code::UnterminatedTag,
            "unterminated template tag",
            span,
            "this `{%` has no closing `%}`",
        )
        .with_help("close it with `%}` (inside a `\"...\"` string, on the same line), or write `\\{%` for a literal `{%`"),
        LexErrorKind::UnterminatedTemplateComment => Diagnostic::new(
            Code::UnterminatedTag,
            "unterminated template comment",
            span,
            "this `{#` has no closing `#}`",
        )
        .with_help("close it with `#}`, or write `\\{#` for a literal `{#`"),
        LexErrorKind::BadNumber => Diagnostic::new(
            Code::InvalidNumber,
            "invalid number",
            span,
            "not a valid number",
        )
        .with_help("integers are decimal `42`, octal `0o644` or hex `0xff`; durations are `30s`, `5m`, `2h`"),
        LexErrorKind::LeadingZero => Diagnostic::new(
            Code::InvalidNumber,
            "a decimal number cannot start with `0`",
            span,
            "read as decimal, this would not be the octal number it looks like",
        )
        .with_help("write octal with `0o` (`mode = 0o600;`), or drop the leading zeros"),
        LexErrorKind::NumberTooLarge => Diagnostic::new(
            Code::NumberTooLarge,
            "number too large",
            span,
            "does not fit in a 64-bit integer",
        ),
        LexErrorKind::NestingTooDeep => Diagnostic::new(
            Code::NestingTooDeep,
            "nesting too deep",
            span,
            format!(
                "more than {} levels of brackets, braces or `!`",
                converge_grammar::lexer::MAX_NESTING
            ),
        )
        .with_help("flatten the expression: long `||`/`&&` chains need no parentheses, and lists need no nesting")
        .with_note("the rest of the file is not checked"),
        LexErrorKind::BadDurationUnit(unit) => Diagnostic::new(
            Code::InvalidDurationUnit,
            format!("unknown duration unit `{unit}`"),
            span,
            "not a duration unit",
        )
        .with_help("durations are written with `s` (seconds), `m` (minutes) or `h` (hours): `30s`, `5m`, `2h`"),
    }
}

/// Token classes that can start a value; when all of them are expected the
/// label says "expected a value" instead of listing eleven tokens.
const VALUE_STARTS: [&str; 4] = ["string", "number", "identifier", "`[`"];

fn expects_value(expected: &[String]) -> bool {
    VALUE_STARTS.iter().all(|v| expected.iter().any(|e| e == v))
}

fn expected_label(expected: &[String]) -> String {
    match expected {
        [] => "not expected here".to_owned(),
        [one] => format!("expected {one}"),
        _ if expects_value(expected) => "expected a value".to_owned(),
        _ => "not expected here".to_owned(),
    }
}

fn with_expected_help(d: Diagnostic, expected: &[String]) -> Diagnostic {
    if expects_value(expected) {
        d.with_help("write a value: a string, a number, a name, a list `[...]` or a map `{...}`")
    } else if expected.len() > 1 {
        d.with_note(format!("expected one of {}", expected.join(", ")))
    } else {
        d
    }
}
