//! `STATE/sequence`: the number of this host's last run report. Each
//! cycle raises it by one and writes it back atomically before the report
//! is built, so two reports of a host never share a number and a restart
//! never goes back (the collector never lets a lower sequence overwrite a
//! higher one).

use crate::state::StateDir;

pub const SEQUENCE: &str = "sequence";

/// Raises the counter and returns the new value (1 for a host's first
/// report). An unreadable counter is an error, not a restart from 1: the
/// collector would take the reports that follow for replays.
pub fn next(state: &StateDir) -> Result<u64, String> {
    let shown = state.path(SEQUENCE).display().to_string();
    let last = match state.read(SEQUENCE, 32) {
        Ok(None) => 0,
        Ok(Some(bytes)) => std::str::from_utf8(&bytes)
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                format!("`{shown}` is not a number; fix or remove it (the next report is then 1)")
            })?,
        Err(e) => return Err(format!("cannot read `{shown}`: {e}")),
    };
    let next = last.saturating_add(1);
    state
        .write(SEQUENCE, format!("{next}\n").as_bytes())
        .map_err(|e| format!("cannot write `{shown}`: {e}"))?;
    Ok(next)
}

/// A new run id: 16 random bytes as 32 lowercase hex digits.
pub fn run_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a run id: {e}"))?;
    Ok(crate::bundle::error::hex(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sequence_goes_up_by_one_and_survives_reopening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state");
        let state = StateDir::open(&path).unwrap();
        assert_eq!(next(&state), Ok(1));
        assert_eq!(next(&state), Ok(2));
        let state = StateDir::open(&path).unwrap();
        assert_eq!(next(&state), Ok(3));
        state.write(SEQUENCE, b"garbage").unwrap();
        assert!(next(&state).unwrap_err().contains("not a number"));
        let id = run_id().unwrap();
        assert!(converge_format::report::is_run_id(&id), "{id}");
        assert_ne!(id, run_id().unwrap());
    }
}
