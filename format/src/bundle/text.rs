//! The text of a string or word constant, and the one buffer a decoded
//! body's long texts share.
//!
//! A body of 10,000 file promises holds 20,000 texts (paths and contents)
//! for the whole run. Short ones (up to 24 bytes: most names and words)
//! are held inline ([`CompactString`]), without an allocation of their
//! own. A longer text decoded from a bundle is a range of one buffer that
//! every long text of the body shares ([`with_text_pool`]): a heap block
//! of its own cost it the allocator's header and rounding, 20-30 bytes on
//! top of a 30-60-byte path or content, and a copy of it in every result
//! of the report that names the promise (issue 22, item 3). Cloning a
//! pooled text shares the buffer. A text made any other way (by the
//! compiler, or decoded outside a body) holds its own string, as before.
//!
//! On the wire a text is a string, byte for byte as before; it compares,
//! orders and hashes as its `str`.

use std::borrow::Borrow;
use std::cell::RefCell;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, OnceLock};

use compact_str::CompactString;
use serde::de::{Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// The text of a string or word constant (see the module's docs).
#[derive(Clone)]
pub struct Text(Repr);

#[derive(Clone)]
enum Repr {
    Own(CompactString),
    /// `len` bytes at `start` of a decoded body's shared buffer.
    Pooled {
        pool: Pool,
        start: u32,
        len: u32,
    },
}

/// The buffer a body's long texts share. It is set once, when the body is
/// decoded ([`with_text_pool`]); a pooled text is only read after that.
type Pool = Arc<OnceLock<Box<str>>>;

/// Texts longer than this go to the pool when a body is decoded; shorter
/// ones are inline in a [`CompactString`] anyway.
const INLINE: usize = std::mem::size_of::<CompactString>();

thread_local! {
    /// The pool of the body being decoded on this thread, and its text so
    /// far; `None` outside [`with_text_pool`].
    static DECODING: RefCell<Option<(Pool, String)>> = const { RefCell::new(None) };
}

/// Runs `decode` (of a body) with a pool for its long texts, and sets the
/// pool's text when `decode` returns, before anything reads it.
pub(crate) fn with_text_pool<T>(decode: impl FnOnce() -> T) -> T {
    /// Ends the pool however decoding ends, restoring an outer one (none
    /// is expected: decoding does not nest).
    struct Finish(Option<(Pool, String)>);
    impl Drop for Finish {
        fn drop(&mut self) {
            let outer = self.0.take();
            if let Some((pool, text)) = DECODING.with(|d| d.replace(outer)) {
                // Only this function sets a pool, once: it cannot be full.
                let _ = pool.set(text.into_boxed_str());
            }
        }
    }
    let outer = DECODING.with(|d| d.replace(Some((Arc::new(OnceLock::new()), String::new()))));
    let _finish = Finish(outer);
    decode()
}

impl Text {
    pub fn new(text: &str) -> Text {
        Text(Repr::Own(CompactString::from(text)))
    }

    pub fn as_str(&self) -> &str {
        match &self.0 {
            Repr::Own(s) => s,
            Repr::Pooled { pool, start, len } => {
                let start = *start as usize;
                pool.get()
                    .and_then(|text| text.get(start..start.saturating_add(*len as usize)))
                    .unwrap_or_default()
            }
        }
    }

    /// Held in the text itself, without an allocation or a pool.
    pub fn is_inline(&self) -> bool {
        matches!(&self.0, Repr::Own(s) if !s.is_heap_allocated())
    }

    /// A range of a decoded body's shared buffer.
    #[cfg(test)]
    pub(crate) fn is_pooled(&self) -> bool {
        matches!(self.0, Repr::Pooled { .. })
    }

    /// `text` as decoded from a body: in the pool when one is being filled
    /// and the text is long.
    fn decoded(text: &str) -> Text {
        if text.len() <= INLINE {
            return Text::new(text);
        }
        DECODING
            .with(|d| {
                let mut d = d.borrow_mut();
                let (pool, buffer) = d.as_mut()?;
                let start = u32::try_from(buffer.len()).ok()?;
                let len = u32::try_from(text.len()).ok()?;
                start.checked_add(len)?;
                buffer.push_str(text);
                Some(Text(Repr::Pooled {
                    pool: Arc::clone(pool),
                    start,
                    len,
                }))
            })
            .unwrap_or_else(|| Text::new(text))
    }
}

impl Default for Text {
    fn default() -> Text {
        Text::new("")
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Borrow<str> for Text {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Text {
        Text::new(text)
    }
}

impl From<&String> for Text {
    fn from(text: &String) -> Text {
        Text::new(text)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Text {
        Text(Repr::Own(CompactString::from(text)))
    }
}

impl From<Text> for String {
    fn from(text: Text) -> String {
        text.as_str().to_owned()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Text> for str {
    fn eq(&self, other: &Text) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Text> for String {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl PartialEq<Text> for &str {
    fn eq(&self, other: &Text) -> bool {
        *self == other.as_str()
    }
}

impl PartialOrd for Text {
    fn partial_cmp(&self, other: &Text) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Text {
    fn cmp(&self, other: &Text) -> std::cmp::Ordering {
        self.as_str().cmp(other.as_str())
    }
}

/// As its `str`, so that a map keyed by texts is looked up by `&str`.
impl Hash for Text {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Text, D::Error> {
        struct TextVisitor;
        impl Visitor<'_> for TextVisitor {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E>(self, text: &str) -> Result<Text, E> {
                Ok(Text::decoded(text))
            }
        }
        deserializer.deserialize_str(TextVisitor)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing)]
mod tests {
    use super::*;

    const LONG: &str = "/srv/www/site12/conf/file-01234.conf";

    /// A text is no larger than the `CompactString` it replaced: a
    /// constant stays 32 bytes.
    #[test]
    fn a_text_is_24_bytes() {
        assert_eq!(std::mem::size_of::<Text>(), 24);
    }

    #[test]
    fn long_texts_decoded_in_a_pool_share_one_buffer() {
        let texts: Vec<Text> = with_text_pool(|| {
            ["short", LONG, "", "é-long-enough-to-go-to-the-pool-ü"]
                .iter()
                .map(|t| Text::decoded(t))
                .collect()
        });
        let shown: Vec<&str> = texts.iter().map(Text::as_str).collect();
        assert_eq!(
            shown,
            ["short", LONG, "", "é-long-enough-to-go-to-the-pool-ü"]
        );
        assert!(matches!(texts[0].0, Repr::Own(_)));
        let (Repr::Pooled { pool: a, .. }, Repr::Pooled { pool: b, .. }) =
            (&texts[1].0, &texts[3].0)
        else {
            panic!("long texts are not pooled");
        };
        assert!(Arc::ptr_eq(a, b));
        // A clone shares the buffer and compares equal to an owned text.
        let clone = texts[1].clone();
        assert_eq!(clone, Text::new(LONG));
        assert_eq!(clone, LONG);
        // Outside a pool, a long text owns its string.
        assert!(matches!(Text::decoded(LONG).0, Repr::Own(_)));
    }

    #[test]
    fn a_text_hashes_and_orders_as_its_str() {
        use std::collections::hash_map::DefaultHasher;
        let pooled = with_text_pool(|| Text::decoded(LONG));
        let hash = |h: &dyn Fn(&mut DefaultHasher)| {
            let mut s = DefaultHasher::new();
            h(&mut s);
            s.finish()
        };
        assert_eq!(hash(&|s| pooled.hash(s)), hash(&|s| LONG.hash(s)));
        assert!(Text::new("/a") < pooled && pooled < Text::new("a"));
        assert_eq!(format!("{pooled:?}"), format!("{LONG:?}"));
        assert_eq!(pooled.to_string(), LONG);
    }

    /// On the wire a text is the string it was, pooled or not.
    #[test]
    fn a_text_round_trips_as_a_string() {
        let wire = postcard::to_allocvec(LONG).unwrap();
        let pooled: Text = with_text_pool(|| postcard::from_bytes(&wire).unwrap());
        assert_eq!(postcard::to_allocvec(&pooled).unwrap(), wire);
        assert_eq!(postcard::to_allocvec(&Text::new(LONG)).unwrap(), wire);
    }
}
