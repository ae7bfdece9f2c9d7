//! What `watch` reads back from the host's state directory: the history
//! (a hash chain, one record per line) and each entries database. Both sit
//! on a disk an intruder may have edited, which is exactly what `watch` is
//! there to notice, so reading them must never panic: a bad history is a
//! broken chain, reported; a bad database is an error, rebuilt.
#![no_main]

use converge_vm::watch::entry::Database;
use converge_vm::watch::history::{chain_report, parse};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (records, _broken) = parse(data);
    let _ = chain_report(&records);
    let _ = Database::decode(data);
});
