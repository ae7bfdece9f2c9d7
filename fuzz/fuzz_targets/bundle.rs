//! Bundle decoding and verification must never panic, whatever the bytes.
//!
//! Two paths per input: the input as a whole bundle file (framing, key
//! lookup, signature, decode, verify), and the input as a bundle *body*
//! wrapped in a correctly signed envelope, so that the fuzzer reaches the
//! postcard decoder and the structural verifier behind the signature check.
#![no_main]

use converge_vm::bundle::envelope::{signed_prefix, signing_digest};
use converge_vm::bundle::keys::{key_id, PublicKey};
use converge_vm::bundle::{open, open_unsigned};
use ed25519_dalek::{Signer, SigningKey};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let signing = SigningKey::from_bytes(&[7u8; 32]);
    let public = signing.verifying_key().to_bytes();
    let trusted = [PublicKey { id: key_id(&public), key: public }];

    let _ = open(data, &trusted);
    let _ = open_unsigned(data);

    if let Ok(mut bundle) = signed_prefix(trusted[0].id, data) {
        let signature = signing.sign(&signing_digest(&bundle));
        bundle.extend_from_slice(&signature.to_bytes());
        if let Ok(v) = open(&bundle, &trusted) {
            // A body that verifies must also disassemble without panicking.
            let _ = converge_vm::bundle::disasm::disassemble(&v.body, v.version);
        }
    }
});
