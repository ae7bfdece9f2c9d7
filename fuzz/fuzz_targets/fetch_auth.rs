//! The host signature header (`format::fetch_auth`) is read by the
//! collector from any client on the network before it knows who is asking:
//! parsing and verifying whatever arrives must never panic, and a parsed
//! header signed by nobody must never verify.
#![no_main]

use converge_format::fetch_auth::HostSignature;
use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = std::str::from_utf8(data) else {
        return;
    };
    if let Some(parsed) = HostSignature::parse(value) {
        let key = SigningKey::from_bytes(&[9u8; 32]).verifying_key();
        assert!(!parsed.verify(&[key], "/api/v1/reports/web-01", parsed.time));
    }
});
