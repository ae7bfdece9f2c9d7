//! Issue 14 item 18: what the decoder and verifier accept from a signed
//! body. Each case is a body a signer could produce that a VM used to take:
//! bytes after the body, an overlong varint (so one body had many encodings
//! and many digests), and a bundle name that is no bundle name.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use converge_format::bundle::envelope::{signed_prefix, signing_digest};
use converge_format::bundle::format::{Body, Constant, FixedList};
use converge_format::bundle::keys::{key_id, PublicKey};
use converge_format::bundle::wire::encode;
use converge_format::bundle::{open, BundleError};
use ed25519_dalek::{Signer, SigningKey};

fn signer() -> (SigningKey, PublicKey) {
    let signing = SigningKey::from_bytes(&[9; 32]);
    let key = signing.verifying_key().to_bytes();
    let public = PublicKey {
        id: key_id(&key),
        key,
    };
    (signing, public)
}

fn body(name: &str, key: [u8; 8]) -> Body {
    let mut body = Body::with_programs(vec![Constant::Str("x".into())], Vec::new());
    body.header.name = name.into();
    body.header.key_id = key;
    body
}

/// Signs `encoded` as a body: a validly signed bundle.
fn sealed(encoded: &[u8]) -> (Vec<u8>, PublicKey) {
    let (signing, public) = signer();
    let mut bytes = signed_prefix(public.id, encoded).unwrap();
    let signature = signing.sign(&signing_digest(&bytes));
    bytes.extend_from_slice(&signature.to_bytes());
    (bytes, public)
}

fn refusal(encoded: &[u8]) -> String {
    let (bytes, public) = sealed(encoded);
    match open(&bytes, &[public]) {
        Err(BundleError::Corrupt { reason }) => reason,
        other => panic!("accepted or refused for another reason: {other:?}"),
    }
}

#[test]
fn a_good_body_opens() {
    let (_, public) = signer();
    let (bytes, public) = sealed(&encode(&body("site", public.id)).unwrap());
    let opened = open(&bytes, &[public]).unwrap();
    assert_eq!(opened.body.header.name, "site");
    // The digest of the whole file, computed in the same pass as the signed
    // digest: the SHA-256 of every byte, signature included.
    use sha2::Digest;
    let whole: [u8; 32] = sha2::Sha256::digest(&bytes).into();
    assert_eq!(opened.digest, whole);
}

#[test]
fn bytes_after_the_signed_body_are_refused() {
    let (_, public) = signer();
    let mut encoded = encode(&body("site", public.id)).unwrap();
    let end = encoded.len();
    encoded.push(0);
    assert_eq!(
        refusal(&encoded),
        format!("1 bytes follow the end of the body at byte {end}")
    );
}

#[test]
fn an_overlong_varint_in_the_signed_body_is_refused() {
    let (_, public) = signer();
    let encoded = encode(&body("site", public.id)).unwrap();
    // The serial (1) follows the name (1 + 4 bytes) and the key id (8).
    let at = 1 + 4 + 8;
    assert_eq!(encoded[at], 1);
    let mut overlong = encoded.clone();
    overlong.splice(at..=at, [0x81, 0x80, 0x00]);
    assert_eq!(
        refusal(&overlong),
        format!("the body is not in canonical form at byte {at} (an overlong varint)")
    );
}

#[test]
fn a_bundle_name_outside_the_grammar_is_refused() {
    let (_, public) = signer();
    for (name, why) in [
        ("", "it is empty"),
        ("../etc", "it must start with a lowercase letter or a digit"),
        ("Site", "it must start with a lowercase letter or a digit"),
        (
            "site/../x",
            "only `a-z`, `0-9`, `.`, `_` and `-` are allowed",
        ),
        (
            "site\nserial 9",
            "only `a-z`, `0-9`, `.`, `_` and `-` are allowed",
        ),
    ] {
        let reason = refusal(&encode(&body(name, public.id)).unwrap());
        assert_eq!(
            reason,
            format!("the bundle name {name:?} is invalid: {why}"),
            "{name:?}"
        );
    }
}

/// A body with one `report` promise whose message is constant 0.
fn with_promise(name_key: [u8; 8]) -> Body {
    use converge_format::bundle::format::{AttrValue, Item, List, Operand, Promise, SourceLoc};
    let mut b = body("site", name_key);
    b.constants = List(vec![Constant::Str("r".into()), Constant::Str("f".into())]);
    b.promises = List(vec![Promise::from(
        converge_format::bundle::format::PromiseParts {
            attrs: FixedList::from(vec![AttrValue {
                attr: 40,
                value: Operand::Item(Item::Const(0)),
            }]),
            ..converge_format::bundle::format::PromiseParts::new(
                converge_format::schema::promise_type("report").unwrap().id,
                Item::Const(0),
            )
        },
    )]);
    b.order = List(vec![0]);
    b.sources = List(vec![SourceLoc { file: 1, line: 1 }]);
    b
}

/// Ids a VM does not know are refused by name, never read as something
/// else (before format 2.0, positions: a reordered table changed meaning).
#[test]
fn unknown_ids_are_refused_by_name() {
    let (_, public) = signer();
    let good = with_promise(public.id);
    let (bytes, key) = sealed(&encode(&good).unwrap());
    open(&bytes, &[key]).unwrap();

    let mut unknown_type = good.clone();
    unknown_type.promises.0[0].kind = 99;
    let mut unknown_attr = good.clone();
    unknown_attr.promises.0[0].attrs.0[0].attr = 999;
    let mut foreign_attr = good.clone();
    foreign_attr.promises.0[0].attrs.0[0].attr = 16; // purge, of directories
    let mut unknown_loop = good.clone();
    let mut parts =
        converge_format::bundle::format::PromiseParts::from(unknown_loop.promises.0[0].clone());
    parts.loops = vec![77].into();
    unknown_loop.promises.0[0] = parts.into();
    let mut zero_type = good.clone();
    zero_type.promises.0[0].kind = 0;
    for (body, reason) in [
        (unknown_type, "promise 0: unknown promise type id 99"),
        (unknown_attr, "promise 0: unknown attribute id 999"),
        (
            foreign_attr,
            "promise 0: `purge` is not an attribute of `report`",
        ),
        (unknown_loop, "promise 0: loop over unknown fact id 77"),
        (zero_type, "promise 0: unknown promise type id 0"),
    ] {
        assert_eq!(refusal(&encode(&body).unwrap()), reason);
    }

    // An opcode no format defines, in place of `const` (0x01): the
    // program list of a body with one one-instruction program.
    let mut b = body("site", public.id);
    b.programs =
        converge_format::bundle::format::List(vec![converge_format::bundle::format::Program {
            code: converge_format::bundle::format::List(vec![
                converge_format::bundle::instr::Instr::Const(0),
            ]),
        }]);
    let mut encoded = encode(&b).unwrap();
    let at = encoded
        .windows(4)
        .position(|w| w == [1, 1, 0x01, 0])
        .expect("programs: 1, code: 1, const 0");
    encoded[at + 2] = 0x2a;
    let reason = refusal(&encoded);
    assert!(
        reason.starts_with("the body does not decode at byte")
            && reason.ends_with("unknown opcode 0x2a"),
        "{reason}"
    );
}

/// Format 2.3: the body of the `lookups` golden (tables and `lookup`),
/// every byte replaced by a few others and the body signed again: each
/// variant is refused or verifies (and then disassembles), never a panic.
#[test]
fn every_byte_of_a_body_with_tables_mutated_never_panics() {
    let bundle = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/golden/lookups.bundle"),
    )
    .unwrap();
    // The header names the test signer's key: the name's length and
    // "lookups", then the key id.
    let mut body = bundle[24..bundle.len() - 64].to_vec();
    let (_, public) = signer();
    assert_eq!(&body[..8], b"\x07lookups");
    body[8..16].copy_from_slice(&public.id);
    let (bytes, key) = sealed(&body);
    open(&bytes, &[key]).expect("the unmutated body verifies");
    let mut accepted = 0;
    for at in 0..body.len() {
        for value in [0x00, 0x01, 0x08, 0x12, 0x7f, 0xff, body[at].wrapping_add(1)] {
            let mut mutated = body.clone();
            mutated[at] = value;
            let (bytes, key) = sealed(&mutated);
            if let Ok(v) = open(&bytes, &[key]) {
                accepted += 1;
                let _ = converge_format::bundle::disasm::disassemble(&v.body, v.version);
            }
        }
    }
    // Most mutations are refused; a few (a different but valid string) are not.
    assert!(accepted < body.len() * 7, "{accepted}");
}
