//! Names from the filesystem, made safe to print. An entry planted in a
//! managed directory can be called anything but `/` and NUL: a newline and
//! a forged `repaired ...` line, a terminal escape sequence, bytes that are
//! not UTF-8 (`/etc/sudoers.d/\xff`, which sudo reads). Every name the VM
//! reads from a directory is shown through [`escape_name`] in every output
//! (human report, JSON report, errors), so no two names look alike and none
//! can write a line of its own.

use std::borrow::Cow;

/// `bytes` as printable text: valid UTF-8 as itself, except a backslash
/// (`\\`), control characters (`\n`, `\t`, `\r`, `\u{1b}`) and the
/// invisible direction controls that reorder a line (`\u{202e}`); a byte
/// that is not UTF-8 as `\xNN`. Distinct names stay distinct.
pub fn escape_name(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c == '\\' {
                out.push_str("\\\\");
            } else {
                push_char(&mut out, c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// `text` (a policy path, a message) with control and direction characters
/// escaped; backslashes are left as they are, so text that went through
/// [`escape_name`] is unchanged.
pub fn printable(text: &str) -> Cow<'_, str> {
    // Printable ASCII (nearly every path, hash and message) needs nothing:
    // seen a byte at a time, without decoding characters.
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) || !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        push_char(&mut out, c);
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn push_char(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\r' => out.push_str("\\r"),
        c if needs_escape(c) => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_escaped_and_stay_distinct() {
        assert_eq!(escape_name(b"plain.conf"), "plain.conf");
        assert_eq!(escape_name(b"\xff"), "\\xff");
        assert_eq!(escape_name(b"\\xff"), "\\\\xff");
        assert_eq!(
            escape_name(b"x\nrepaired file \"/etc/shadow\""),
            "x\\nrepaired file \"/etc/shadow\""
        );
        assert_eq!(
            escape_name("\u{1b}[2Jz\u{202e}".as_bytes()),
            "\\u{1b}[2Jz\\u{202e}"
        );
        assert_eq!(printable("a\\xff"), "a\\xff");
        assert_eq!(printable("a\nb"), "a\\nb");
        assert_eq!(printable(&escape_name(b"q\n\xfe")), escape_name(b"q\n\xfe"));
    }
}
