//! Owed notifications (LANGUAGE.md §13, issue 17 item 6): when a promise
//! that notifies a service or a command is about to change something, the
//! debt is written here (atomically, fsynced) *before* the change; it is
//! paid (removed) only when the notified promise's restart, reload or run
//! succeeds. A failed restart, a kill -9 between the change and the
//! restart, or a run that never got there leaves it owed, and every later
//! run delivers it (even when nothing else changes) and reports it until
//! then. A crash after the debt is written but before the change costs at
//! most one restart too many, never one too few.
//!
//! `owed.json` holds `{"owed": [{"kind", "promiser", "by"}]}`: the notified
//! promise (its type and resolved promiser, which stay the same from one
//! bundle to the next) and the promise that notified it (for the report).

use serde_json::{json, Value};

use super::StateDir;

/// The file of owed notifications in the state directory.
pub const OWED: &str = "owed.json";

/// The largest `owed.json` read (1 MiB).
const MAX_OWED: usize = 1 << 20;

/// One notification owed to a promise.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Debt {
    /// The notified promise's type (`service`, `command`).
    pub kind: String,
    /// Its promiser, resolved on this host.
    pub promiser: String,
    /// The notifying promise, as the report shows it.
    pub by: String,
}

impl Debt {
    pub fn is_for(&self, kind: &str, promiser: &str) -> bool {
        self.kind == kind && self.promiser == promiser
    }
}

impl std::fmt::Display for Debt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {:?} (notified by {})",
            self.kind, self.promiser, self.by
        )
    }
}

impl StateDir {
    /// The notifications owed; none when the file does not exist. A file
    /// that cannot be read or parsed is an error (never "nothing owed").
    pub fn owed(&self) -> std::io::Result<Vec<Debt>> {
        let Some(bytes) = self.read(OWED, MAX_OWED)? else {
            return Ok(Vec::new());
        };
        let value: Value = serde_json::from_slice(&bytes).map_err(|e| {
            std::io::Error::other(format!("`{}` is not valid: {e}", self.path(OWED).display()))
        })?;
        let text = |d: &Value, k: &str| d.get(k).and_then(Value::as_str).map(str::to_owned);
        value
            .get("owed")
            .and_then(Value::as_array)
            .and_then(|list| {
                list.iter()
                    .map(|d| {
                        Some(Debt {
                            kind: text(d, "kind")?,
                            promiser: text(d, "promiser")?,
                            by: text(d, "by").unwrap_or_default(),
                        })
                    })
                    .collect::<Option<Vec<Debt>>>()
            })
            .ok_or_else(|| {
                std::io::Error::other(format!(
                    "`{}` is not a list of owed notifications",
                    self.path(OWED).display()
                ))
            })
    }

    /// Replaces the owed notifications, durably.
    pub fn set_owed(&self, debts: &[Debt]) -> std::io::Result<()> {
        let list: Vec<Value> = debts
            .iter()
            .map(|d| json!({ "kind": d.kind, "promiser": d.promiser, "by": d.by }))
            .collect();
        let text = serde_json::to_string_pretty(&json!({ "owed": list })).unwrap_or_default();
        self.write(OWED, text.as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debts_survive_a_reopen_and_a_corrupt_file_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(dir.path()).unwrap();
        assert_eq!(state.owed().unwrap(), []);
        let debt = Debt {
            kind: "service".into(),
            promiser: "sshd".into(),
            by: "file \"/etc/ssh/sshd_config\" (main.policy:3)".into(),
        };
        state.set_owed(std::slice::from_ref(&debt)).unwrap();
        let again = StateDir::open(dir.path()).unwrap();
        assert_eq!(again.owed().unwrap(), [debt]);
        again.write(OWED, b"{\"owed\": 3}").unwrap();
        assert!(again.owed().is_err());
    }
}
