//! Feeds arbitrary bytes, as a root's `/var/lib/dpkg/status`, to the VM's
//! dpkg status reader (`converge_vm::backend::toolset::dpkg_status`),
//! which answers a converged run's package query without `dpkg-query`:
//! never a panic, and every answer is a state dpkg has, with a version
//! dpkg prints unchanged.
#![no_main]

use converge_vm::backend::toolset::dpkg_status::{answer, canonical};
use libfuzzer_sys::fuzz_target;

const STATES: &[&str] = &[
    "not-installed",
    "config-files",
    "half-installed",
    "unpacked",
    "half-configured",
    "triggers-awaited",
    "triggers-pending",
    "installed",
];

fuzz_target!(|data: &[u8]| {
    let names = ["cvg-a", "libc6", "a0"];
    if let Some(known) = answer(data, &names) {
        for (name, k) in &known {
            assert!(names.contains(&name.as_str()), "answered for {name:?}");
            assert!(STATES.contains(&k.status.as_str()), "state {:?}", k.status);
            assert!(k.version.is_empty() || canonical(&k.version), "version {:?}", k.version);
        }
    }
});
