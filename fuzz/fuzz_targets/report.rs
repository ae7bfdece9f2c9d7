//! Feeds arbitrary bytes to what the collector reads from a host before and
//! after its signature: the upload envelope (`SignedReport::parse`), and a
//! report's extensions as the watch cross-check reads them (a host signs
//! whatever it likes: a compromised host's report is hostile input too).
//! Never a panic.
#![no_main]

use converge_format::chain::Head;
use converge_format::crosscheck::cross_check;
use converge_format::report::{Report, SignedReport};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = SignedReport::parse(data);
    if let Ok(report) = serde_json::from_slice::<Report>(data) {
        let seen = Head {
            length: 3,
            head: format!("sha256:{}", "0".repeat(64)),
        };
        let _ = cross_check(None, &report.extensions);
        let _ = cross_check(Some(&seen), &report.extensions);
    }
});
