//! The registry of diagnostic codes. A code is stable forever: it is never
//! renumbered or reused, because CI configurations and SARIF baselines refer
//! to it. Ranges: `E00xx` syntax, `E01xx` names and imports, `E02xx` types,
//! `E03xx` contradictions and cycles, `W0xxx` warnings. Every code has a page
//! in `docs/src/diagnostics.md` (a test checks this).

use super::Severity;

macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $code:literal, $severity:ident, $title:literal; )*) => {
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in registry order.
            pub const ALL: &'static [Code] = &[$(Code::$variant),*];

            /// The stable code, e.g. `E0001`.
            pub fn as_str(self) -> &'static str {
                match self { $(Code::$variant => $code,)* }
            }

            /// The severity a diagnostic with this code has by default.
            pub fn severity(self) -> Severity {
                match self { $(Code::$variant => Severity::$severity,)* }
            }

            /// A short title for the whole class of problem (SARIF rule name,
            /// docs heading).
            pub fn title(self) -> &'static str {
                match self { $(Code::$variant => $title,)* }
            }
        }
    };
}

codes! {
    /// A token that the grammar does not allow at this point.
    UnexpectedToken = "E0001", Error, "unexpected token";
    /// The file ended inside an item.
    UnexpectedEof = "E0002", Error, "unexpected end of file";
    /// A character that starts no token.
    UnexpectedChar = "E0003", Error, "unexpected character";
    /// A string, raw string or heredoc without its closing quote.
    UnterminatedString = "E0004", Error, "unterminated string";
    /// A `/*` comment without `*/`.
    UnterminatedComment = "E0005", Error, "unterminated block comment";
    /// A backslash escape other than `\n \t \r \\ \" \$`.
    InvalidEscape = "E0006", Error, "invalid escape sequence";
    /// `${` without a closing `}` in the same string.
    UnterminatedInterpolation = "E0007", Error, "unterminated interpolation";
    /// `${...}` whose inside is not a dotted name.
    InvalidInterpolation = "E0008", Error, "invalid interpolation";
    /// A malformed integer literal (`0o9`, `0x`, `12ab`).
    InvalidNumber = "E0009", Error, "invalid number";
    /// An integer or duration that does not fit in 64 bits.
    NumberTooLarge = "E0010", Error, "number too large";
    /// A duration with a unit other than `s`, `m`, `h`.
    InvalidDurationUnit = "E0011", Error, "invalid duration unit";
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for code in Code::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "duplicate code {s}");
            assert_eq!(s.len(), 5, "{s}");
            let prefix_ok = match code.severity() {
                Severity::Error => s.starts_with('E'),
                Severity::Warning => s.starts_with('W'),
            };
            assert!(prefix_ok, "{s} has the wrong prefix for its severity");
            assert!(s[1..].bytes().all(|b| b.is_ascii_digit()), "{s}");
        }
    }
}
