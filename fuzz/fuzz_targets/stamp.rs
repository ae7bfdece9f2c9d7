//! Stamp reading must never panic, and whatever it accepts must be the one
//! canonical spelling of what it read: re-encoding an accepted stamp gives
//! back the very bytes, so no two readers can disagree about one stamp.
#![no_main]

use converge_vm::bundle::keys::{key_id, PublicKey};
use converge_vm::stamp::Stamp;
use ed25519_dalek::SigningKey;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let signing = SigningKey::from_bytes(&[7u8; 32]);
    let public = signing.verifying_key().to_bytes();
    let trusted = [PublicKey { id: key_id(&public), key: public }];

    if let Ok((stamp, signature)) = Stamp::parse_unverified(data) {
        assert_eq!(stamp.encode(&signature).as_bytes(), data);
        assert!(stamp.expires > stamp.published);
        // A rollout always moves forward from its previous release, and
        // every host is given one of the two releases the stamp names.
        if let Some(rollout) = &stamp.rollout {
            assert!(rollout.previous.serial < stamp.serial);
            let (release, selected) = stamp.release_for("web-01");
            assert_eq!(selected == Some(true), release == stamp.release());
        }
    }
    let _ = Stamp::open(data, &trusted);
});
