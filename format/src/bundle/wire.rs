//! Putting a body on the wire and taking it off: postcard, with every
//! tagged value (instruction, constant, item, operand) written as its id
//! byte from [`crate::ids`] followed by its payload, and a decoder that
//! accepts only the one canonical encoding of a body.
//!
//! Postcard itself accepts more than it writes: bytes after the value, and
//! varints with redundant continuation bytes (`0x80 0x00` for 0). A signed
//! body has exactly one encoding, so [`decode`] refuses both — the body
//! must end where the value ends, and re-encoding the decoded value must
//! give back every byte (compared as it is produced, with no second copy).

use std::cell::RefCell;

use postcard::ser_flavors::Flavor;
use serde::de::{self, SeqAccess};
use serde::ser::{SerializeTuple, Serializer};
use serde::{Deserialize, Serialize};

use super::error::BundleError;
use super::format::Body;

thread_local! {
    /// Why the last tagged value failed to decode: postcard drops the
    /// message of a custom error, and "unknown opcode 0x2a" is what the
    /// person reading the refusal needs.
    static REFUSAL: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A decoding error that keeps its reason for [`decode`].
pub(crate) fn refuse<E: de::Error>(reason: String) -> E {
    let error = E::custom(&reason);
    REFUSAL.with(|r| *r.borrow_mut() = Some(reason));
    error
}

/// Writes a tagged value: its id byte, then its payload (if any).
pub(crate) fn write_tagged<S: Serializer, P: Serialize>(
    serializer: S,
    tag: u8,
    payload: Option<&P>,
) -> Result<S::Ok, S::Error> {
    let mut t = serializer.serialize_tuple(if payload.is_some() { 2 } else { 1 })?;
    t.serialize_element(&tag)?;
    if let Some(p) = payload {
        t.serialize_element(p)?;
    }
    t.end()
}

/// Reads the id byte of a tagged value.
pub(crate) fn read_tag<'de, A: SeqAccess<'de>>(seq: &mut A, what: &str) -> Result<u8, A::Error> {
    seq.next_element::<u8>()?
        .ok_or_else(|| refuse(format!("{what} has no tag")))
}

/// Reads the payload of a tagged value.
pub(crate) fn read_payload<'de, A: SeqAccess<'de>, T: Deserialize<'de>>(
    seq: &mut A,
    what: &str,
) -> Result<T, A::Error> {
    seq.next_element::<T>()?
        .ok_or_else(|| refuse(format!("{what} has no operand")))
}

/// The largest number of elements a tagged value has on the wire (tag and
/// payload): what its decoder asks postcard for.
pub(crate) const TAGGED_LEN: usize = 2;

/// Encodes a body: the bytes between a bundle's header and its signature.
pub fn encode(body: &Body) -> Result<Vec<u8>, String> {
    postcard::to_allocvec(body).map_err(|e| format!("cannot encode the bundle: {e}"))
}

/// Decodes a body, accepting only its canonical encoding.
pub fn decode(bytes: &[u8]) -> Result<Body, BundleError> {
    REFUSAL.with(|r| r.borrow_mut().take());
    let mut de = postcard::Deserializer::from_bytes(bytes);
    // Lists are charged their memory as they are read (format.rs).
    // Long texts share one buffer (text.rs), set before they are read.
    let decoded = super::text::with_text_pool(|| {
        super::format::with_decode_budget(bytes.len(), || Body::deserialize(&mut de))
    });
    let rest = de.finalize().map_or(0, |rest| rest.len());
    let at = bytes.len().saturating_sub(rest);
    let body = decoded.map_err(|e| {
        let reason = REFUSAL
            .with(|r| r.borrow_mut().take())
            .unwrap_or_else(|| e.to_string());
        corrupt(format!("the body does not decode at byte {at}: {reason}"))
    })?;
    if rest != 0 {
        return Err(corrupt(format!(
            "{rest} bytes follow the end of the body at byte {at}"
        )));
    }
    let mut compare = Compare {
        expected: bytes,
        at: 0,
        first_difference: None,
    };
    compare = postcard::serialize_with_flavor(&body, compare)
        .map_err(|e| corrupt(format!("the body does not re-encode: {e}")))?;
    if let Some(at) = compare.first_difference.or_else(|| {
        // Fewer bytes re-encoded than read: only possible with an
        // overlong varint at the end.
        (compare.at != bytes.len()).then_some(compare.at)
    }) {
        return Err(corrupt(format!(
            "the body is not in canonical form at byte {at} (an overlong varint)"
        )));
    }
    Ok(body)
}

fn corrupt(reason: String) -> BundleError {
    BundleError::Corrupt { reason }
}

/// A postcard output that compares what is written with the bytes read,
/// remembering the first difference.
struct Compare<'b> {
    expected: &'b [u8],
    at: usize,
    first_difference: Option<usize>,
}

impl Flavor for Compare<'_> {
    type Output = Self;

    fn try_push(&mut self, byte: u8) -> postcard::Result<()> {
        if self.first_difference.is_none() && self.expected.get(self.at) != Some(&byte) {
            self.first_difference = Some(self.at);
        }
        self.at = self.at.saturating_add(1);
        Ok(())
    }

    /// A string or blob at once (one `memcmp`, not a call per byte: the
    /// texts of a 10,000-host table are most of a bundle).
    fn try_extend(&mut self, data: &[u8]) -> postcard::Result<()> {
        let end = self.at.saturating_add(data.len());
        // A varint or a short string is compared in place: a `memcmp` call
        // per field was the largest single cost of decoding a bundle.
        let same = match self.expected.get(self.at..end) {
            Some(expected) if data.len() <= 16 => expected.iter().zip(data).all(|(a, b)| a == b),
            Some(expected) => expected == data,
            None => false,
        };
        if self.first_difference.is_none() && !same {
            let same = self
                .expected
                .get(self.at..)
                .unwrap_or_default()
                .iter()
                .zip(data)
                .take_while(|(a, b)| a == b)
                .count();
            self.first_difference = Some(self.at.saturating_add(same));
        }
        self.at = end;
        Ok(())
    }

    fn finalize(self) -> postcard::Result<Self> {
        Ok(self)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::bundle::format::{Constant, List};
    use crate::bundle::instr::Instr;

    fn body() -> Body {
        Body::with_programs(
            vec![Constant::Str("x".into()), Constant::Int(-3)],
            vec![vec![Instr::Const(0), Instr::Const(1), Instr::Concat(2)]],
        )
    }

    fn reason(bytes: &[u8]) -> String {
        match decode(bytes) {
            Err(BundleError::Corrupt { reason }) => reason,
            other => panic!("not refused as corrupt: {other:?}"),
        }
    }

    #[test]
    fn a_body_round_trips() {
        let bytes = encode(&body()).unwrap();
        assert_eq!(decode(&bytes).unwrap(), body());
    }

    /// A body's texts over 24 bytes decode into its shared buffer (and
    /// read back as they were; the canonical check re-encodes them); a
    /// text decoded outside a body, or a short one, owns its string.
    #[test]
    fn long_texts_of_a_body_decode_into_its_shared_buffer() {
        let long = "/srv/www/site12/conf/file-01234.conf";
        let content = "listen 127.0.0.1:8234; server_name www01234.example.org;\n";
        let mut b = body();
        b.constants.0.push(Constant::Str(long.into()));
        b.constants.0.push(Constant::Word(content.into()));
        let decoded = decode(&encode(&b).unwrap()).unwrap();
        assert_eq!(decoded, b);
        let texts: Vec<_> = decoded
            .constants
            .iter()
            .filter_map(|c| match c {
                Constant::Str(t) | Constant::Word(t) => Some(t),
                _ => None,
            })
            .collect();
        assert_eq!(texts.len(), 3);
        assert!(texts[0].is_inline(), "{:?}", texts[0]);
        assert!(texts[1].is_pooled() && texts[2].is_pooled());
        assert_eq!((texts[1].as_str(), texts[2].as_str()), (long, content));
        let alone: Constant =
            postcard::from_bytes(&postcard::to_allocvec(&b.constants.0[2]).unwrap()).unwrap();
        assert!(matches!(alone, Constant::Str(t) if !t.is_pooled()));
    }

    /// A list constant (format 2.2) is its tag 7, a count, then that many
    /// strings, and it round-trips, empty strings and all.
    #[test]
    fn a_list_constant_round_trips() {
        let list = Constant::List(vec!["ab".to_owned(), String::new()].into());
        assert_eq!(
            postcard::to_allocvec(&list).unwrap(),
            [crate::ids::constant_kind::LIST, 2, 2, b'a', b'b', 0]
        );
        let mut b = body();
        b.constants.0.push(list);
        b.constants.0.push(Constant::List(Vec::new().into()));
        let bytes = encode(&b).unwrap();
        assert_eq!(decode(&bytes).unwrap(), b);
    }

    /// A table constant (format 2.3) is its tag 8, the kind, the keys and
    /// values texts, the ends, then the default as an option; it
    /// round-trips, and a truncated one is refused, not a panic.
    #[test]
    fn a_table_constant_round_trips() {
        use crate::bundle::format::Table;
        use crate::ids::constant_kind::{STR, TABLE};
        let table = Constant::Table(Box::new(Table::new(
            STR,
            vec![("h1".into(), "x".into())],
            Some("d".into()),
        )));
        let wire = postcard::to_allocvec(&table).unwrap();
        assert_eq!(
            wire,
            [TABLE, STR, 2, b'h', b'1', 1, b'x', 1, 2, 1, 1, 1, b'd']
        );
        let mut b = body();
        b.constants.0.push(table);
        b.programs.0.push(crate::bundle::format::Program {
            code: vec![Instr::Const(0), Instr::Lookup(2)].into(),
        });
        let bytes = encode(&b).unwrap();
        assert_eq!(decode(&bytes).unwrap(), b);
        for cut in 1..bytes.len() {
            assert!(
                decode(&bytes[..cut]).is_err(),
                "a prefix of {cut} bytes decoded"
            );
        }
        // An option tag other than 0 or 1 for the default.
        let mut bad = wire.clone();
        if let Some(tag) = bad.get_mut(10) {
            *tag = 2;
        }
        assert!(postcard::from_bytes::<Constant>(&bad).is_err());
    }

    /// Issue 14 item 18: bytes after the body were ignored.
    #[test]
    fn trailing_bytes_after_the_body_are_refused() {
        let mut bytes = encode(&body()).unwrap();
        let end = bytes.len();
        bytes.extend_from_slice(&[0, 0]);
        assert_eq!(
            reason(&bytes),
            format!("2 bytes follow the end of the body at byte {end}")
        );
    }

    /// Issue 14 item 18: `0x80 0x00` decoded as 0, so one signed body had
    /// many encodings.
    #[test]
    fn overlong_varints_are_refused() {
        let bytes = encode(&body()).unwrap();
        // The serial (1) is the first varint after the name and key id:
        // name length, "t", 8 key-id bytes, then the serial.
        let at = 1 + 1 + 8;
        assert_eq!(bytes[at], 1);
        let mut overlong = bytes.clone();
        overlong.splice(at..=at, [0x81, 0x00]);
        assert_eq!(
            reason(&overlong),
            format!("the body is not in canonical form at byte {at} (an overlong varint)")
        );
        // At the very end too: the last list length (sources, 0) as 0x80 0x00.
        let mut last = bytes.clone();
        assert_eq!(last.pop(), Some(0));
        last.extend_from_slice(&[0x80, 0x00]);
        assert!(reason(&last).contains("not in canonical form"));
    }

    #[test]
    fn unknown_tags_are_refused_with_what_they_are() {
        let mut b = body();
        b.programs = List(Vec::new());
        let good = encode(&b).unwrap();
        // The constant pool follows the header: its length, then the first
        // constant's tag.
        let at = 1 + 1 + 8 + 1 + 1 + 1 + 4 + 32 + 1;
        assert_eq!(good[at], crate::ids::constant_kind::STR);
        let mut bad = good.clone();
        bad[at] = 0x77;
        assert!(
            reason(&bad).ends_with("unknown constant kind 119"),
            "{}",
            reason(&bad)
        );
    }
}
