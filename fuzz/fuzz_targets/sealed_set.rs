//! A sealed set's plaintext (`SealedSet::decode_plaintext`), as the VM
//! reads it after age decrypted it: a builder holding the hub's key could
//! put anything there, so decoding must never panic, and what it accepts
//! survives a round trip through the builder's encoder unchanged.
#![no_main]

use converge_format::bundle::format::SealedSet;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(entries) = SealedSet::decode_plaintext(data) {
        let encoded = SealedSet::encode_plaintext(&entries).expect("decoded entries encode");
        let again = SealedSet::decode_plaintext(&encoded).expect("encoded entries decode");
        assert_eq!(again, entries);
    }
});
