//! What the file operator does differently when a file's content is
//! secret (issue 20, LANGUAGE.md section 14): the promised mode may give
//! others nothing, no output shows the content or anything computed from
//! it (no diff, no digest, no validation output), and no backup of it is
//! kept in the state directory (`docs/secrets-on-hosts.md`).

use crate::outcome::Change;
use crate::secrets::SecretText;

/// Why a file holding `secret` may not have `mode`: any permission bit
/// for others (defence in depth: the compiler refuses it too). A mode
/// that was not promised counts as well: the file's current mode, or 0644
/// for a new file.
pub(super) fn mode_problem(path: &str, secret: &SecretText, mode: u32) -> Option<String> {
    (mode & 0o007 != 0).then(|| {
        format!(
            "`{path}` would hold {} with mode 0o{mode:o}, which gives others access: a file whose content is secret must have no permission bits for others (promise `mode = 0o600`, or 0o640 with a `group`); not written",
            secret.label()
        )
    })
}

/// What a dry run shows instead of a diff.
pub(super) fn dry_run_note(path: &str) -> String {
    format!("{path}: would change (content is secret)\n")
}

/// The change a rewrite reports: neither content nor digest (a digest of a
/// short password is as good as the password to a dictionary).
pub(super) fn content_change(secret: &SecretText, diff: Option<String>) -> Change {
    Change {
        what: "content".into(),
        before: "(not shown: the file holds a secret)".into(),
        after: secret.label(),
        diff,
    }
}

/// Why the current content of a file is not backed up: the new content is
/// secret (the old one is an earlier value of it), or the file gives
/// others no access (it may hold a secret written by an earlier policy:
/// the VM writes secrets only to such files). `None`: it may be.
pub(super) fn no_backup(secret: Option<&SecretText>, current_mode: u32) -> Option<Change> {
    let why = match secret {
        Some(s) => format!("the new content is {}", s.label()),
        None if current_mode & 0o007 == 0 => {
            format!("mode 0o{current_mode:o} gives others no access, so it may hold a secret")
        }
        None => return None,
    };
    Some(Change {
        what: "backup".into(),
        before: "requested".into(),
        after: format!("not kept in the state directory: {why}"),
        diff: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;
    use zeroize::Zeroizing;

    fn secret() -> SecretText {
        SecretText::new(
            BTreeSet::from(["db".to_owned()]),
            Zeroizing::new("plain-value".to_owned()),
        )
    }

    #[test]
    fn modes_with_bits_for_others_are_refused() {
        let s = secret();
        for ok in [0o600, 0o640, 0o400, 0o660, 0o700, 0o4750] {
            assert_eq!(mode_problem("/f", &s, ok), None, "{ok:o}");
        }
        for bad in [0o644, 0o604, 0o601, 0o602, 0o666, 0o755] {
            let err = mode_problem("/f", &s, bad).unwrap();
            assert!(err.contains("<secret db> with mode 0o"), "{err}");
            assert!(!err.contains("plain-value"), "{err}");
        }
    }

    #[test]
    fn nothing_of_the_content_is_shown_and_no_backup_is_kept() {
        let s = secret();
        let change = content_change(&s, Some(dry_run_note("/f")));
        let shown = format!("{change:?}");
        assert!(
            !shown.contains("plain-value") && !shown.contains("sha256"),
            "{shown}"
        );
        assert!(
            shown.contains("would change (content is secret)"),
            "{shown}"
        );
        assert!(no_backup(Some(&s), 0o644).is_some());
        assert!(no_backup(None, 0o600).is_some());
        assert!(no_backup(None, 0o640).is_some());
        assert_eq!(no_backup(None, 0o644), None);
    }
}
