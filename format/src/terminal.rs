//! When the binaries colour what they print: one rule for policyc's
//! diagnostics and for clap's usage messages in all three binaries
//! (docs/operations.md, "Command-line conventions").
//!
//! clap's own choice (anstream) also colours on a terminal when `CI` is set,
//! whatever `TERM` says; a CI log viewer or an Emacs shell that sets
//! `TERM=dumb` would then show raw escape sequences. So the binaries decide
//! from the environment first and hand clap `never` when colour is unwanted.

use std::ffi::OsStr;

/// Whether the environment allows colour at all: `NO_COLOR` unset or empty
/// (no-color.org), and a `TERM` that is set and not `dumb`.
pub fn env_allows_colour() -> bool {
    env_rule(
        std::env::var_os("NO_COLOR").as_deref(),
        std::env::var_os("TERM").as_deref(),
    )
}

/// The whole rule: a terminal, and an environment that allows colour.
pub fn colour_wanted(terminal: bool, no_color: Option<&OsStr>, term: Option<&OsStr>) -> bool {
    terminal && env_rule(no_color, term)
}

fn env_rule(no_color: Option<&OsStr>, term: Option<&OsStr>) -> bool {
    let no_color = no_color.is_some_and(|v| !v.is_empty());
    let dumb = term.is_none_or(|t| t.is_empty() || t == "dumb");
    !no_color && !dumb
}

#[cfg(test)]
mod tests {
    use super::colour_wanted;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_that_shows_it() {
        let xterm = Some(OsStr::new("xterm-256color"));
        assert!(colour_wanted(true, None, xterm));
        assert!(colour_wanted(true, Some(OsStr::new("")), xterm));
        assert!(!colour_wanted(false, None, xterm), "not a terminal");
        assert!(
            !colour_wanted(true, Some(OsStr::new("1")), xterm),
            "NO_COLOR"
        );
        assert!(
            !colour_wanted(true, None, Some(OsStr::new("dumb"))),
            "TERM=dumb"
        );
        assert!(
            !colour_wanted(true, None, Some(OsStr::new(""))),
            "empty TERM"
        );
        assert!(!colour_wanted(true, None, None), "no TERM");
    }
}
