//! Feeds arbitrary text to the inventory parser (`inventory.toml`,
//! LANGUAGE.md section 16), which `policyc` and the collector both read:
//! never a panic, and an accepted inventory names only valid hosts.
#![no_main]

use converge_format::inventory::{is_host_name, Inventory};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(inventory) = Inventory::parse(text) {
        for host in &inventory.hosts {
            assert!(is_host_name(host.name.get_ref()), "accepted host name {:?}", host.name);
        }
    }
});
