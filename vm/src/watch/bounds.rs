//! The bounds of change detection (docs/change-detection.md, "Bounds").
//! Over one, the promise fails with the reason and nothing of it is
//! recorded: half a database would report the other half as removed on
//! the next run.

/// Entries one `watch` promise may record.
pub const MAX_ENTRIES_PER_WATCH: usize = 1_000_000;

/// Entries all the `watch` promises of one run may record together.
pub const MAX_ENTRIES_PER_RUN: usize = 4_000_000;

/// Levels below a watched directory (deeper trees are refused, not cut).
pub const MAX_DEPTH: u32 = 256;

/// The longest path of an entry, in bytes (escaped as it is shown).
pub const MAX_PATH_LEN: usize = 4096;

/// Changes one history record lists; past that, the record holds their
/// count and the digest of the full list.
pub const MAX_RECORD_CHANGES: usize = 256;

/// Changes one promise lists in the run report (and the uploaded report
/// carries at most this many for the whole run).
pub const MAX_REPORTED_CHANGES: usize = 200;

/// The largest entries database read back (a million entries fit).
pub const MAX_DATABASE_BYTES: usize = 512 << 20;

/// The largest history read back.
pub const MAX_HISTORY_BYTES: usize = 256 << 20;

/// Files being hashed at once (each holds an open descriptor).
pub const MAX_IN_FLIGHT: usize = 64;

/// Hashing threads at most.
pub const MAX_WORKERS: usize = 4;

/// The read buffer of each hashing thread.
pub const READ_BUFFER: usize = 256 << 10;
