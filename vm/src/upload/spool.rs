//! `STATE/spool/`: signed reports no collector has taken yet, one file per
//! report, named `SEQUENCE-RUNID.json` with the sequence zero-padded to 20
//! digits, so names sort in the order the runs happened and are sent in
//! that order. Each is written with the one atomic write: a crash leaves a
//! report whole or absent, never half.
//!
//! Bounded in count and bytes: when a new report would pass either bound,
//! the oldest go first (a host cut off for weeks keeps its latest
//! history), and how many went is counted
//! (`converge_report_spool_dropped_total`).

use crate::state::{StateDir, SubDir};

pub const SPOOL: &str = "spool";

/// The bounds of a spool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    pub max_reports: usize,
    pub max_bytes: u64,
}

impl Default for Limits {
    /// 1,000 reports or 64 MiB: at a run every 30 minutes, three weeks.
    fn default() -> Self {
        Limits {
            max_reports: 1000,
            max_bytes: 64 * 1024 * 1024,
        }
    }
}

/// The spool of a state directory.
#[derive(Debug)]
pub struct Spool {
    dir: SubDir,
    limits: Limits,
}

/// The name a report is spooled under.
pub fn file_name(sequence: u64, run_id: &str) -> String {
    format!("{sequence:020}-{run_id}.json")
}

fn is_spool_name(name: &str) -> bool {
    name.len() == 20 + 1 + 32 + 5
        && name.ends_with(".json")
        && name.as_bytes().get(20) == Some(&b'-')
}

impl Spool {
    pub fn open(state: &StateDir, limits: Limits) -> std::io::Result<Spool> {
        Ok(Spool {
            dir: state.subdir(SPOOL, 0o700)?,
            limits,
        })
    }

    /// The spooled reports, oldest first.
    pub fn pending(&self) -> std::io::Result<Vec<String>> {
        let mut names = self.dir.names()?;
        names.retain(|n| is_spool_name(n));
        Ok(names)
    }

    /// The body of a spooled report (`None`: gone, or larger than an
    /// envelope can be).
    pub fn read(&self, name: &str) -> std::io::Result<Option<Vec<u8>>> {
        self.dir
            .read(name, converge_format::report::MAX_ENVELOPE_BYTES)
    }

    pub fn remove(&self, name: &str) -> std::io::Result<()> {
        self.dir.remove(name)
    }

    /// Spools `body`, then drops the oldest reports until both bounds
    /// hold; returns how many were dropped (the new one is never dropped
    /// for another, only for being alone over the byte bound).
    pub fn add(&self, sequence: u64, run_id: &str, body: &[u8]) -> std::io::Result<u64> {
        let name = file_name(sequence, run_id);
        self.dir.write(&name, body, 0o600)?;
        let mut sizes = Vec::new();
        for n in self.pending()? {
            let len = self.dir.stat(&n)?.map_or(0, |i| i.len);
            sizes.push((n, len));
        }
        let mut count = sizes.len();
        let mut bytes: u64 = sizes.iter().map(|(_, l)| *l).sum();
        let mut dropped = 0u64;
        for (n, len) in &sizes {
            if count <= self.limits.max_reports && bytes <= self.limits.max_bytes {
                break;
            }
            self.dir.remove(n)?;
            count = count.saturating_sub(1);
            bytes = bytes.saturating_sub(*len);
            dropped = dropped.saturating_add(1);
        }
        Ok(dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(i: u64) -> String {
        format!("{i:032x}")
    }

    #[test]
    fn reports_come_out_in_sequence_order_and_the_oldest_go_first() {
        let dir = tempfile::tempdir().unwrap();
        let state = StateDir::open(&dir.path().join("state")).unwrap();
        let spool = Spool::open(
            &state,
            Limits {
                max_reports: 3,
                max_bytes: 1000,
            },
        )
        .unwrap();
        // Out of order on purpose, and past 9 -> 10 (padding keeps order).
        for seq in [10u64, 9, 11] {
            assert_eq!(spool.add(seq, &id(seq), b"{}").unwrap(), 0);
        }
        let names = spool.pending().unwrap();
        assert_eq!(
            names,
            vec![
                file_name(9, &id(9)),
                file_name(10, &id(10)),
                file_name(11, &id(11))
            ]
        );
        // A fourth: the oldest (9) is dropped.
        assert_eq!(spool.add(12, &id(12), b"{}").unwrap(), 1);
        assert_eq!(
            spool.pending().unwrap().first(),
            Some(&file_name(10, &id(10)))
        );

        // The byte bound: 3 x 400 > 1000, so the oldest two go.
        let big = vec![b' '; 400];
        spool.add(13, &id(13), &big).unwrap();
        spool.add(14, &id(14), &big).unwrap();
        let dropped = spool.add(15, &id(15), &big).unwrap();
        assert_eq!(
            spool.pending().unwrap(),
            vec![file_name(14, &id(14)), file_name(15, &id(15))]
        );
        assert_eq!(dropped, 2, "12 (the count) and 13 (the bytes) went");
        assert_eq!(spool.read(&file_name(15, &id(15))).unwrap().unwrap(), big);
        spool.remove(&file_name(15, &id(15))).unwrap();
        spool.remove(&file_name(15, &id(15))).unwrap();
        assert_eq!(spool.pending().unwrap().len(), 1);
    }
}
