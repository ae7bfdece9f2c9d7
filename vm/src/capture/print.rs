//! Captured promises as policy text, in exactly the layout `policyc fmt`
//! writes (the VM links neither the grammar nor the formatter, so this is
//! a small printer of its own; `tests/capture.rs` runs `policyc fmt
//! --check` on what it prints).
//!
//! The layout: a header comment, then `bundle captured { ... }` with one
//! promise per block, attributes one per line with their `=` aligned, a
//! blank line between promises, notes as `//` lines at the end of their
//! promise, and `policy { captured(); }`. A list stays on one line when it
//! fits in [`WIDTH`] columns and is broken one element per line otherwise,
//! as the formatter does.
//!
//! Strings follow LANGUAGE.md section 2 ([`literal`]): every `"..."`
//! escape the lexer knows, and a raw string `r"..."` where that reads
//! better; text no literal can hold (control characters other than line
//! feed, tab and carriage return) is refused, and the caller decides what
//! to do instead (a `source` file for content, an error for a name).

/// The formatter's line width (`compiler/src/fmt/layout.rs`).
pub const WIDTH: usize = 100;

const INDENT: &str = "  ";

/// The bundle every capture is wrapped in.
pub const BUNDLE: &str = "captured";

/// One attribute value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Str(String),
    Int(i64),
    Mode(u32),
    Bool(bool),
    /// An enum word (`installed`, `running`).
    Word(&'static str),
    List(Vec<String>),
}

/// One promise to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Promise {
    pub kind: &'static str,
    pub promiser: String,
    pub attrs: Vec<(&'static str, Value)>,
    /// Lines written as `// ...` comments at the end of the block: what was
    /// not captured, and why.
    pub notes: Vec<String>,
}

impl Promise {
    pub fn new(kind: &'static str, promiser: impl Into<String>) -> Promise {
        Promise {
            kind,
            promiser: promiser.into(),
            attrs: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn set(&mut self, name: &'static str, value: Value) {
        self.attrs.push((name, value));
    }

    pub fn note(&mut self, text: impl Into<String>) {
        self.notes.push(text.into());
    }
}

/// Why a text cannot be written as a policy string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unwritable {
    /// The first character no literal can hold.
    pub ch: char,
}

impl std::fmt::Display for Unwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "it contains the control character U+{:04X}, which no policy string can hold",
            u32::from(self.ch)
        )
    }
}

/// Whether a policy string literal can hold `c`: the lexer has escapes
/// for line feed, tab and carriage return only (no `\x` or `\u`), and a
/// line of source text ends at a line break, so every other control
/// character (and the Unicode line and paragraph separators, which
/// editors break lines at) is refused.
fn writable(c: char) -> bool {
    matches!(c, '\n' | '\t' | '\r') || !(c.is_control() || c == '\u{2028}' || c == '\u{2029}')
}

/// Whether `text` can be written as a policy string.
pub fn check(text: &str) -> Result<(), Unwritable> {
    match text.chars().find(|c| !writable(*c)) {
        Some(ch) => Err(Unwritable { ch }),
        None => Ok(()),
    }
}

/// `text` as a policy string literal that means exactly `text`: no
/// interpolation, no template tag.
///
/// A raw string `r"..."` when the text has a backslash or something that
/// would otherwise need escaping (`${`, `{%`, `{#`) and neither a `"` nor
/// a line break (raw strings have no escapes and end at the line); else
/// `"..."` with the escapes `\\ \" \n \t \r`, `\$` before `{`, and `\{`
/// before `%` and `#`.
pub fn literal(text: &str) -> Result<String, Unwritable> {
    check(text)?;
    let special =
        text.contains('\\') || text.contains("${") || text.contains("{%") || text.contains("{#");
    let raw_ok = !text.contains(['"', '\n', '\r', '\t']);
    if special && raw_ok {
        return Ok(format!("r\"{text}\""));
    }
    let mut out = String::with_capacity(text.len().saturating_add(2));
    out.push('"');
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        let next = chars.peek().copied();
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '$' if next == Some('{') => out.push_str("\\$"),
            '{' if matches!(next, Some('%' | '#')) => out.push_str("\\{"),
            c => out.push(c),
        }
    }
    out.push('"');
    Ok(out)
}

/// A value as policy text on one line.
fn flat(value: &Value) -> Result<String, Unwritable> {
    Ok(match value {
        Value::Str(s) => literal(s)?,
        Value::Int(i) => i.to_string(),
        Value::Mode(m) => format!("0o{m:o}"),
        Value::Bool(b) => b.to_string(),
        Value::Word(w) => (*w).to_owned(),
        Value::List(items) => {
            let items: Result<Vec<String>, Unwritable> = items.iter().map(|i| literal(i)).collect();
            format!("[{}]", items?.join(", "))
        }
    })
}

/// The policy file of `promises`: a header comment, the bundle and the
/// `policy` block. Every string was checked by the capture; one that
/// cannot be written still fails here rather than printing broken policy.
pub fn policy(header: &[String], promises: &[Promise]) -> Result<String, Unwritable> {
    let mut out = String::new();
    for line in header {
        out.push_str(&comment(line));
        out.push('\n');
    }
    if promises.is_empty() {
        out.push_str(&format!("bundle {BUNDLE} {{}}\n"));
    } else {
        out.push_str(&format!("bundle {BUNDLE} {{\n"));
        for (i, p) in promises.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            promise(&mut out, p)?;
        }
        out.push_str("}\n");
    }
    out.push_str(&format!("\npolicy {{ {BUNDLE}(); }}\n"));
    Ok(out)
}

/// A `//` comment line; a line break or control character in the note is
/// shown as `?` (a comment ends at the line).
fn comment(text: &str) -> String {
    let clean: String = text
        .chars()
        .map(|c| {
            if c.is_control() || !writable(c) {
                '?'
            } else {
                c
            }
        })
        .collect();
    let clean = clean.trim_end();
    if clean.is_empty() {
        "//".to_owned()
    } else {
        format!("// {clean}")
    }
}

/// One promise at depth 1 (inside the bundle).
fn promise(out: &mut String, p: &Promise) -> Result<(), Unwritable> {
    let head = format!("{INDENT}{} {}", p.kind, literal(&p.promiser)?);
    out.push_str(&head);
    if p.attrs.is_empty() && p.notes.is_empty() {
        out.push_str(" {}\n");
        return Ok(());
    }
    out.push_str(" {\n");
    let width = p
        .attrs
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0);
    let indent = INDENT.repeat(2);
    for (name, value) in &p.attrs {
        let mut line = format!("{indent}{name}");
        for _ in name.chars().count()..width {
            line.push(' ');
        }
        line.push_str(" = ");
        let text = flat(value)?;
        let column = line.chars().count();
        match value {
            // The formatter's rule: a list that does not fit (with its `;`)
            // is broken, one element per line, each with a comma.
            Value::List(items)
                if !items.is_empty()
                    && column
                        .saturating_add(text.chars().count())
                        .saturating_add(1)
                        > WIDTH =>
            {
                line.push_str("[\n");
                for item in items {
                    line.push_str(&indent);
                    line.push_str(INDENT);
                    line.push_str(&literal(item)?);
                    line.push_str(",\n");
                }
                line.push_str(&indent);
                line.push(']');
            }
            _ => line.push_str(&text),
        }
        line.push_str(";\n");
        out.push_str(&line);
    }
    for note in &p.notes {
        out.push_str(&indent);
        out.push_str(&comment(note));
        out.push('\n');
    }
    out.push_str(INDENT);
    out.push_str("}\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn strings_are_escaped_or_raw() {
        let cases = [
            ("plain", r#""plain""#),
            ("a \"quoted\" word", r#""a \"quoted\" word""#),
            ("line\nnext\ttab\rcr", r#""line\nnext\ttab\rcr""#),
            ("cost $5 and $${x}", r#"r"cost $5 and $${x}""#),
            ("say \"$${x}\"", r#""say \"$\${x}\"""#),
            ("{% if %} {# c #} { x }", r#"r"{% if %} {# c #} { x }""#),
            (r"C:\dir", r#"r"C:\dir""#),
            (
                "back\\slash \"and quote\"",
                r#""back\\slash \"and quote\"""#,
            ),
            ("tag {%\nline", r#""tag \{%\nline""#),
            ("${x}\n", r#""\${x}\n""#),
            ("", r#""""#),
            ("ünïcödé ✓", r#""ünïcödé ✓""#),
        ];
        for (text, want) in cases {
            assert_eq!(literal(text).unwrap(), want, "{text:?}");
        }
    }

    #[test]
    fn text_no_literal_holds_is_refused() {
        assert_eq!(literal("a\u{1}b"), Err(Unwritable { ch: '\u{1}' }));
        assert_eq!(literal("del\u{7f}"), Err(Unwritable { ch: '\u{7f}' }));
        assert_eq!(literal("sep\u{2028}"), Err(Unwritable { ch: '\u{2028}' }));
        assert!(literal("nul\0").is_err());
        assert!(check("tab\tand\nlines\r\n").is_ok());
    }

    #[test]
    fn the_layout_is_the_formatters() {
        let mut f = Promise::new("file", "/etc/motd");
        f.set("content", Value::Str("hello\n".into()));
        f.set("mode", Value::Mode(0o644));
        f.set("owner", Value::Str("root".into()));
        let mut u = Promise::new("user", "alice");
        u.set("uid", Value::Int(1000));
        u.set("groups", Value::List(vec!["adm".into(), "sudo".into()]));
        u.note("password: not captured");
        let empty = Promise::new("package", "curl");
        let text = policy(&["Captured.".into()], &[f, u, empty]).unwrap();
        assert_eq!(
            text,
            "// Captured.\nbundle captured {\n  file \"/etc/motd\" {\n    content = \"hello\\n\";\n    mode    = 0o644;\n    owner   = \"root\";\n  }\n\n  user \"alice\" {\n    uid    = 1000;\n    groups = [\"adm\", \"sudo\"];\n    // password: not captured\n  }\n\n  package \"curl\" {}\n}\n\npolicy { captured(); }\n"
        );
    }

    #[test]
    fn a_long_list_is_broken_one_element_per_line() {
        let mut u = Promise::new("user", "bob");
        let groups: Vec<String> = (0..12).map(|i| format!("group-number-{i}")).collect();
        u.set("groups", Value::List(groups));
        let text = policy(&[], &[u]).unwrap();
        assert!(
            text.contains("    groups = [\n      \"group-number-0\",\n"),
            "{text}"
        );
        assert!(
            text.contains("      \"group-number-11\",\n    ];\n"),
            "{text}"
        );
        // Exactly at the width it stays on one line: 4 + "groups = " + list + ";".
        let fits = "x".repeat(WIDTH - 4 - 9 - 1 - 4);
        let mut u = Promise::new("user", "carol");
        u.set("groups", Value::List(vec![fits.clone()]));
        let text = policy(&[], &[u]).unwrap();
        assert!(text.contains(&format!("groups = [\"{fits}\"];")), "{text}");
    }

    #[test]
    fn comments_never_span_lines() {
        assert_eq!(comment("a\nb"), "// a?b");
        assert_eq!(comment(""), "//");
    }
}
