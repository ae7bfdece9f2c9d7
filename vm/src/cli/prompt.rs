//! The question `policyvm run --interactive` asks before each repair
//! (LANGUAGE.md §17): the promise (`file:line`, type, promiser) and what
//! the repair would change, rendered as the dry-run report renders it (a
//! `secret` content shows as `<secret NAME>` changed, never its text).
//! Only "y" or "yes" applies it; anything else, or the end of the input,
//! declines.

use std::io::{BufRead, Write};

use crate::run::interactive::Proposal;
use crate::run::report::repair_lines;

/// Shows `proposal` on `out`, reads one answer from `input`.
pub fn ask(proposal: &Proposal<'_>, input: &mut dyn BufRead, out: &mut dyn Write) -> bool {
    let head = format!(
        "{} {:?} ({})",
        proposal.kind, proposal.promiser, proposal.source
    );
    let shown = repair_lines("would repair", &head, proposal.changes);
    // A prompt that cannot be shown is not answered.
    if out
        .write_all(format!("{shown}apply this repair? [y/N] ").as_bytes())
        .and_then(|()| out.flush())
        .is_err()
    {
        return false;
    }
    let mut answer = String::new();
    match input.read_line(&mut answer) {
        Ok(0) | Err(_) => {
            let _ = writeln!(out);
            false
        }
        Ok(_) => yes(&answer),
    }
}

/// Whether an answer is yes: "y" or "yes", in any case, around spaces.
fn yes(answer: &str) -> bool {
    let answer = answer.trim().to_ascii_lowercase();
    answer == "y" || answer == "yes"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::outcome::Change;

    fn proposal(changes: &[Change]) -> Proposal<'_> {
        Proposal {
            source: "site.policy:3",
            kind: "file",
            promiser: "/etc/motd",
            changes,
        }
    }

    #[test]
    fn only_y_or_yes_applies() {
        let changes = [Change {
            what: "content".into(),
            before: "sha256:aa".into(),
            after: "sha256:bb".into(),
            diff: Some("-old\n+new\n".into()),
        }];
        for (answer, applied) in [
            ("y\n", true),
            ("YES\n", true),
            (" yes \n", true),
            ("n\n", false),
            ("\n", false),
            ("yep\n", false),
            ("", false),
        ] {
            let mut out = Vec::new();
            let got = ask(&proposal(&changes), &mut answer.as_bytes(), &mut out);
            assert_eq!(got, applied, "{answer:?}");
            let shown = String::from_utf8(out).unwrap();
            assert!(
                shown.starts_with(
                    "would repair file \"/etc/motd\" (site.policy:3): content sha256:aa -> sha256:bb\n-old\n+new\napply this repair? [y/N] "
                ),
                "{shown}"
            );
        }
    }

    /// A name from the host cannot write a line of its own or a terminal
    /// escape into the question.
    #[test]
    fn control_characters_are_escaped() {
        let changes = [Change {
            what: "target".into(),
            before: "a\u{1b}[2J".into(),
            after: "b".into(),
            diff: None,
        }];
        let mut out = Vec::new();
        ask(&proposal(&changes), &mut "n\n".as_bytes(), &mut out);
        let shown = String::from_utf8(out).unwrap();
        assert!(!shown.contains('\u{1b}'), "{shown}");
    }
}
