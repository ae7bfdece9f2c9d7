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
            // A body is accepted only in its one canonical encoding: the
            // writer gives back exactly the bytes that were accepted.
            assert_eq!(
                converge_vm::bundle::wire::encode(&v.body).ok().as_deref(),
                Some(data),
                "an accepted body is not canonical"
            );
            // A body that verifies must also disassemble, and evaluate on a
            // host, without panicking.
            let _ = converge_vm::bundle::disasm::disassemble(&v.body, v.version);
            let facts = converge_vm::facts::Facts {
                hostname: "web01".into(),
                fqdn: "web01.example".into(),
                os: "linux".into(),
                os_family: "debian".into(),
                os_release: "12".into(),
                arch: "x86_64".into(),
                ipv4: converge_vm::facts::Gathered::known(vec![
                    "10.0.0.1".into(),
                    "10.0.0.2".into(),
                ]),
                cpus: converge_vm::facts::Gathered::known(2),
                memory_mb: converge_vm::facts::Gathered::known(1024),
                weekday: "monday".into(),
                hour: 3,
            };
            let mut eval = converge_vm::eval::Evaluator::new(&v.body, &facts);
            if let Ok(classes) = eval.classes(&[]) {
                for p in 0..v.body.programs.len() as u32 {
                    let _ = eval.run(p, &classes, &["10.0.0.1".to_owned(), "x".to_owned()]);
                }
            }
        }
    }
});
