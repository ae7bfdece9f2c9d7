//! The body of a bundle: everything the VM needs to run a policy, encoded
//! with postcard between the envelope's header and its signature.
//!
//! The types are deliberately not recursive (a list holds items, never other
//! lists of lists of ...), so decoding a hostile body cannot recurse deeply,
//! and every variable-length field is a [`List`], whose decoder never
//! reserves memory for elements it has not read.

use std::cell::Cell;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::instr::Instr;
use super::limits::{DECODE_SLACK, MAX_DECODE_FACTOR};
use super::probe::Probe;
use super::wire::{read_payload, read_tag, refuse, write_tagged, TAGGED_LEN};
use crate::ids::{constant_kind, item_kind, operand_kind};

thread_local! {
    /// Bytes of list structure the body being decoded on this thread may
    /// still take ([`with_decode_budget`]); `None` outside of it.
    static DECODE_BUDGET: Cell<Option<usize>> = const { Cell::new(None) };
}

/// Takes `bytes` from the decode budget; false when it is spent.
fn charge_decode(bytes: usize) -> bool {
    DECODE_BUDGET.with(|budget| match budget.get() {
        None => true,
        Some(left) => match left.checked_sub(bytes) {
            Some(left) => {
                budget.set(Some(left));
                true
            }
            None => false,
        },
    })
}

/// Runs `decode` (of a body of `len` bytes) with a budget on the memory its
/// lists take: [`MAX_DECODE_FACTOR`] bytes per byte of the body, plus
/// [`DECODE_SLACK`]. Each list element is charged its in-memory size as it
/// is read, so a body over the budget is refused before the memory is
/// taken: an empty list is one byte on the wire and 24 in memory, and a body
/// of them decoded to 25 times its size (issue 14, item 4). Strings and
/// blobs decode to their own length.
pub(crate) fn with_decode_budget<T>(len: usize, decode: impl FnOnce() -> T) -> T {
    /// Clears the budget however decoding ends.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            DECODE_BUDGET.with(|b| b.set(None));
        }
    }
    let budget = len
        .saturating_mul(MAX_DECODE_FACTOR)
        .saturating_add(DECODE_SLACK);
    DECODE_BUDGET.with(|b| b.set(Some(budget)));
    let _reset = Reset;
    decode()
}

/// A `Vec` whose decoder grows with the elements actually read instead of
/// trusting the length prefix: a 10-byte body claiming a billion elements
/// fails after reading what is there, having allocated nothing for the rest.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct List<T>(pub Vec<T>);

impl<T> List<T> {
    pub fn iter(&self) -> std::slice::Iter<'_, T> {
        self.0.iter()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn get(&self, i: usize) -> Option<&T> {
        self.0.get(i)
    }
}

impl<T> From<Vec<T>> for List<T> {
    fn from(v: Vec<T>) -> Self {
        List(v)
    }
}

impl<T: Serialize> Serialize for List<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for List<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ListVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ListVisitor<T> {
            type Value = List<T>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    if !charge_decode(std::mem::size_of::<T>()) {
                        return Err(refuse(format!(
                            "it decodes to more than {MAX_DECODE_FACTOR} times its size (docs/bytecode.md, Limits)"
                        )));
                    }
                    items.push(item);
                }
                // Growth by doubling leaves up to half unused; a bundle is
                // kept for the whole run.
                items.shrink_to_fit();
                Ok(List(items))
            }
        }
        deserializer.deserialize_seq(ListVisitor(PhantomData))
    }
}

/// A list that never changes once built, as the lists of a [`Promise`]
/// are: a boxed slice, 16 bytes where a [`List`] is 24 (no capacity), and
/// no allocation when empty. A body holds a few of them per promise, so
/// the 8 bytes and the slack count (issue 22, item 3). On the wire and in
/// its decoder (budget and all) it is a [`List`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FixedList<T>(pub Box<[T]>);

/// Empty, for any `T` (a derived `Default` would ask `T: Default`).
impl<T> Default for FixedList<T> {
    fn default() -> Self {
        FixedList(Box::new([]))
    }
}

impl<T> std::ops::Deref for FixedList<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.0
    }
}

impl<T> From<Vec<T>> for FixedList<T> {
    fn from(v: Vec<T>) -> Self {
        FixedList(v.into_boxed_slice())
    }
}

impl<'a, T> IntoIterator for &'a FixedList<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<T: Serialize> Serialize for FixedList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for FixedList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        List::<T>::deserialize(deserializer).map(|list| FixedList::from(list.0))
    }
}

pub use super::text::Text;

/// Bytes that decode without trusting their length prefix either.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Bytes(pub Vec<u8>);

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_bytes(&self.0)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct BytesVisitor;
        impl<'de> Visitor<'de> for BytesVisitor {
            type Value = Bytes;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("bytes")
            }
            // postcard hands out a slice of the input it has checked is
            // there; copying it allocates exactly what was read.
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Bytes, E> {
                Ok(Bytes(v.to_vec()))
            }
        }
        deserializer.deserialize_bytes(BytesVisitor)
    }
}

/// The decoded body of a bundle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    pub header: Header,
    /// Deduplicated constants: strings, words, numbers, embedded files.
    pub constants: List<Constant>,
    /// Straight-line programs: guards, class definitions, templates.
    pub programs: List<Program>,
    /// Class definitions and declarations, in dependency order: a class's
    /// program only reads classes defined before it.
    pub classes: List<ClassEntry>,
    /// `exclusive` groups (constant indices of class names).
    pub exclusive: List<List<u32>>,
    pub promises: List<Promise>,
    /// Promise indices in the order the VM applies them.
    pub order: List<u32>,
    /// Where each promise was written.
    pub sources: List<SourceLoc>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Header {
    /// The bundle's name (`site`): a host pulls a bundle by name, and the
    /// name is signed so one role's bundle cannot be swapped for another's.
    pub name: String,
    /// The key id of the signing key (also in the envelope, unsigned there).
    pub key_id: [u8; 8],
    /// Monotonically increasing; a host refuses a serial older than the last
    /// one it accepted.
    pub serial: u64,
    /// How many passes the VM may make before it reports "not converged".
    pub pass_limit: u32,
    /// The `policyc` version that built it.
    pub compiler_version: String,
    /// SHA-256 over the policy sources (see `docs/bytecode.md`).
    pub source_digest: [u8; 32],
}

/// On the wire: its kind's tag ([`constant_kind`]), then its value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Constant {
    Str(Text),
    /// An enum value or class name.
    Word(Text),
    Int(i64),
    Bool(bool),
    /// Seconds.
    Duration(u64),
    /// An embedded file (`source = "..."`).
    Blob(Bytes),
    /// A list of strings, pushed by `const` (format 2.2): at most
    /// [`MAX_CONST_LIST`](super::limits::MAX_CONST_LIST) elements.
    List(List<String>),
    /// A probe declaration (format 2.3): the probe table of a bundle is
    /// every constant of this kind, in pool order. Never pushed by `const`;
    /// `probe` reads its value.
    Probe(Box<Probe>),
    /// A map from strings to scalar constants, read by `lookup` (format
    /// 2.3): one promise's values per host key, where the writer merged
    /// the instances of a lookup split per key back into one promise.
    /// Boxed: it is four times the size of the other kinds, and every
    /// constant of a body would take its size (issue 22, item 3).
    Table(Box<Table>),
    /// A secret (format 2.4, LANGUAGE.md section 14): its name, and where
    /// its value is, an entry of the sealed set of the hosts entitled to
    /// it. Pushed by `const` as a string the VM decrypts in memory at apply
    /// time; every output shows it as `<secret NAME>`.
    Secret(Box<Sealed>),
    /// The secrets of one set of hosts (format 2.4): one age file,
    /// encrypted to the recipients (`identity/age.key`) of exactly those
    /// hosts, whose plaintext is every secret that goes to that set
    /// ([`SealedSet::encode_plaintext`]). Secrets that go to the same hosts
    /// share one, so a build pays one X25519 per host per set and a run one
    /// per set, not one per secret. Never pushed by `const`; only a
    /// [`Sealed::set`] names it.
    SealedSet(Box<SealedSet>),
    /// A file stored beside the bundle as a blob named by its SHA-256
    /// (format 2.6, issue 22 item 5): a `source` over
    /// [`INLINE_MAX`](super::limits::INLINE_MAX) bytes, and every such
    /// file of a `directory source` tree (whose entry names this
    /// constant's digest). The signature over the bundle covers the digest
    /// and the size, so a host trusts the bytes it fetches only once they
    /// hash to it; a cached blob costs no download.
    /// Boxed: 40 bytes inline made every constant of a body 48 bytes, not
    /// 32 (issue 22, item 3).
    BlobRef(Box<BlobRef>),
}

/// The payload of a [`Constant::BlobRef`] (format 2.6): what names a blob
/// (`blobs/<hex of sha256>` beside the bundle, on the hub and in the
/// host's cache) and bounds its download.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct BlobRef {
    pub sha256: [u8; 32],
    /// Its length in bytes: a fetch stops at one byte more.
    pub size: u64,
}

impl BlobRef {
    /// The blob's file name: 64 lowercase hex digits of its SHA-256.
    pub fn name(&self) -> String {
        crate::bundle::error::hex(&self.sha256)
    }

    /// The digest of a file name made by [`BlobRef::name`], or `None` for
    /// any other name (a temporary, a stray file).
    pub fn digest_of_name(name: &str) -> Option<[u8; 32]> {
        let bytes = name.as_bytes();
        if bytes.len() != 64 || !bytes.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut out = [0u8; 32];
        for (slot, pair) in out.iter_mut().zip(bytes.chunks_exact(2)) {
            let text = std::str::from_utf8(pair).ok()?;
            *slot = u8::from_str_radix(text, 16).ok()?;
        }
        Some(out)
    }
}

impl fmt::Debug for BlobRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<blob sha256:{} {} bytes>", self.name(), self.size)
    }
}

/// The payload of a [`Constant::Secret`] (format 2.4).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sealed {
    /// The secret's name in the policy (`db_password`), the only part of it
    /// any output shows: 1 to 128 ASCII letters, digits, `_`, `-` or `.`
    /// (checked by the verifier, so that a name never carries a line break
    /// or an escape into a log).
    pub name: String,
    /// The constant index of the [`Constant::SealedSet`] that holds it.
    pub set: u32,
    /// Its entry in that set's plaintext, whose name must be
    /// [`Sealed::name`] (checked when the set is opened: the verifier
    /// cannot read a sealed set).
    pub index: u32,
}

/// The payload of a [`Constant::SealedSet`] (format 2.4).
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SealedSet {
    /// The age file (binary format, not armored), with one X25519 stanza
    /// per entitled host. The verifier checks only that it starts with
    /// age's version line; age authenticates the rest.
    pub ciphertext: Bytes,
}

impl SealedSet {
    /// The plaintext of a set: its secrets as (name, value) pairs, in
    /// entry order, postcard-encoded into a buffer that is wiped when
    /// dropped (sized up front, so no reallocation leaves a copy behind).
    pub fn encode_plaintext(
        entries: &[(&str, &str)],
    ) -> Result<zeroize::Zeroizing<Vec<u8>>, String> {
        let size = entries.iter().fold(5usize, |n, (k, v)| {
            n.saturating_add(k.len())
                .saturating_add(v.len())
                .saturating_add(10)
        });
        postcard::to_extend(entries, Vec::with_capacity(size))
            .map(zeroize::Zeroizing::new)
            .map_err(|e| format!("cannot encode a sealed set: {e}"))
    }

    /// The (name, value) entries of a set's decrypted plaintext, borrowed
    /// from it (so the values are copied only into wiped buffers).
    pub fn decode_plaintext(plain: &[u8]) -> Result<Vec<(&str, &str)>, String> {
        match postcard::take_from_bytes::<Vec<(&str, &str)>>(plain) {
            Ok((entries, [])) => Ok(entries),
            Ok(_) => Err("a sealed set with bytes after its entries".to_owned()),
            Err(e) => Err(format!("a sealed set that is not a list of secrets: {e}")),
        }
    }
}

impl fmt::Debug for SealedSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<sealed set, {} bytes>", self.ciphertext.0.len())
    }
}

/// Never prints the ciphertext either: a log of a bundle shows the name.
impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "<secret {}>", self.name)
    }
}

/// The payload of a [`Constant::Table`] (format 2.3): entries sorted by
/// key, keys unique, every value of one type. Keys and values are each one
/// string, cut by [`Table::ends`], so that a table of 10,000 hosts decodes
/// as a few allocations, not 20,000 strings. At most
/// [`MAX_CONST_LIST`](super::limits::MAX_CONST_LIST) entries.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Table {
    /// The type of every value, as a constant kind: `str` (1), `int` (3) or
    /// `bool` (4).
    pub kind: u8,
    /// Every key, concatenated in order (sorted bytewise, unique).
    pub keys: String,
    /// Every value as text, concatenated in the order of the keys: a
    /// string as it is, an int in decimal, a bool `true` or `false`.
    pub values: String,
    /// Per entry, where its key ends in `keys` and its value in `values`
    /// (each starts where the previous one ends).
    pub ends: List<TableEnd>,
    /// The value (as text) of every key not in the table; `None`: `lookup`
    /// of such a key fails the program (the writer guards the promise so
    /// that it never happens).
    pub default: Option<String>,
}

/// The end of one entry of a [`Table`], in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TableEnd {
    pub key: u32,
    pub value: u32,
}

impl Table {
    /// A table of `(key, value text)` entries, sorted here.
    pub fn new(kind: u8, mut entries: Vec<(String, String)>, default: Option<String>) -> Table {
        entries.sort_unstable();
        let mut table = Table {
            kind,
            keys: String::new(),
            values: String::new(),
            ends: List(Vec::with_capacity(entries.len())),
            default,
        };
        for (key, value) in entries {
            table.keys.push_str(&key);
            table.values.push_str(&value);
            table.ends.0.push(TableEnd {
                key: u32::try_from(table.keys.len()).unwrap_or(u32::MAX),
                value: u32::try_from(table.values.len()).unwrap_or(u32::MAX),
            });
        }
        table
    }

    /// The key and value text of entry `i`; `None` past the end or where
    /// the ends do not cut the strings (the verifier refuses such a table).
    pub fn entry(&self, i: usize) -> Option<(&str, &str)> {
        let end = self.ends.get(i)?;
        let start = match i.checked_sub(1) {
            Some(before) => *self.ends.get(before)?,
            None => TableEnd { key: 0, value: 0 },
        };
        Some((
            self.keys.get(start.key as usize..end.key as usize)?,
            self.values.get(start.value as usize..end.value as usize)?,
        ))
    }

    /// Every entry, in order (stopping at the first the ends do not cut).
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str)> {
        (0..self.ends.len()).map_while(|i| self.entry(i))
    }

    /// The value text of `key`: its entry's, else the default (a binary
    /// search; the verifier checked the keys are sorted).
    pub fn get(&self, key: &str) -> Option<&str> {
        let (mut low, mut high) = (0usize, self.ends.len());
        while low < high {
            let mid = low.saturating_add(high.saturating_sub(low).checked_div(2).unwrap_or(0));
            let (k, v) = self.entry(mid)?;
            match k.cmp(key) {
                std::cmp::Ordering::Equal => return Some(v),
                std::cmp::Ordering::Less => low = mid.saturating_add(1),
                std::cmp::Ordering::Greater => high = mid,
            }
        }
        self.default.as_deref()
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Program {
    pub code: List<Instr>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClassEntry {
    /// Constant index of the class name.
    pub name: u32,
    /// The program that computes it; `None` for a declared class (set by
    /// outcomes or `--define`).
    pub program: Option<u32>,
}

/// A value known at compile time, or computed on the host. On the wire: its
/// tag ([`item_kind`]), then the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item {
    Const(u32),
    /// A program whose result is the value (a string with facts in it).
    Code(u32),
}

/// On the wire: its tag ([`operand_kind`]), then the item or the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Operand {
    Item(Item),
    /// A [`FixedList`], so that an operand is 16 bytes, not 24.
    List(FixedList<Item>),
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttrValue {
    /// The attribute's id ([`AttrSpec::id`](crate::schema::AttrSpec::id)),
    /// one of the promise type's attributes.
    pub attr: u16,
    pub value: Operand,
}

/// A promise of the body. What most promises do not have (run-time loops,
/// `after`, `notify`, outcome classes) is held in one boxed block, absent
/// when all of it is empty: 48 bytes a promise where the eleven fields
/// inline were 112 (issue 22, item 3). On the wire it is its
/// [`PromiseParts`], field by field, unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(from = "PromiseParts")]
pub struct Promise {
    /// The promise type's id
    /// ([`PromiseType::id`](crate::schema::PromiseType::id)).
    pub kind: u16,
    pub promiser: Item,
    pub attrs: FixedList<AttrValue>,
    /// The guard program; `None` means always active.
    pub guard: Option<u32>,
    /// Index into [`Body::sources`].
    pub source: u32,
    rare: Option<Box<Rare>>,
}

/// The fields of a [`Promise`] most promises leave empty.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Rare {
    loops: FixedList<u32>,
    after: FixedList<u32>,
    notify: FixedList<u32>,
    on_repaired: Option<u32>,
    on_kept: Option<u32>,
    on_failed: Option<u32>,
}

/// Every field of a [`Promise`], in its order on the wire: what a promise
/// is made from ([`Promise::from`]) and encoded as.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromiseParts {
    pub kind: u16,
    pub promiser: Item,
    pub attrs: FixedList<AttrValue>,
    pub guard: Option<u32>,
    /// The facts (their [ids](crate::schema::FactSpec::id)) of the
    /// run-time loops around the promise, outermost first.
    pub loops: FixedList<u32>,
    /// Promises that must be applied before this one (`after` and
    /// containment); when one fails, this one is skipped.
    pub after: FixedList<u32>,
    /// Promises to run when this one is repaired.
    pub notify: FixedList<u32>,
    /// Class names (constant indices) set by the outcome.
    pub on_repaired: Option<u32>,
    pub on_kept: Option<u32>,
    pub on_failed: Option<u32>,
    pub source: u32,
}

impl PromiseParts {
    /// A promise of type `kind` naming `promiser`, with nothing else: no
    /// attribute, guard, loop, order, notification or outcome class, and
    /// the body's first source.
    pub fn new(kind: u16, promiser: Item) -> Self {
        PromiseParts {
            kind,
            promiser,
            attrs: FixedList::default(),
            guard: None,
            loops: FixedList::default(),
            after: FixedList::default(),
            notify: FixedList::default(),
            on_repaired: None,
            on_kept: None,
            on_failed: None,
            source: 0,
        }
    }
}

impl From<PromiseParts> for Promise {
    fn from(p: PromiseParts) -> Self {
        let rare = Rare {
            loops: p.loops,
            after: p.after,
            notify: p.notify,
            on_repaired: p.on_repaired,
            on_kept: p.on_kept,
            on_failed: p.on_failed,
        };
        Promise {
            kind: p.kind,
            promiser: p.promiser,
            attrs: p.attrs,
            guard: p.guard,
            source: p.source,
            rare: (rare != Rare::default()).then(|| Box::new(rare)),
        }
    }
}

/// As its [`PromiseParts`], field by field, without copying them (the
/// verifier encodes the whole body again to check it is canonical).
impl Serialize for Promise {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = serializer.serialize_struct("PromiseParts", 11)?;
        st.serialize_field("kind", &self.kind)?;
        st.serialize_field("promiser", &self.promiser)?;
        st.serialize_field("attrs", &self.attrs)?;
        st.serialize_field("guard", &self.guard)?;
        st.serialize_field("loops", self.loops())?;
        st.serialize_field("after", self.after())?;
        st.serialize_field("notify", self.notify())?;
        st.serialize_field("on_repaired", &self.on_repaired())?;
        st.serialize_field("on_kept", &self.on_kept())?;
        st.serialize_field("on_failed", &self.on_failed())?;
        st.serialize_field("source", &self.source)?;
        st.end()
    }
}

impl From<Promise> for PromiseParts {
    fn from(p: Promise) -> Self {
        let rare = p.rare.map(|r| *r).unwrap_or_default();
        PromiseParts {
            kind: p.kind,
            promiser: p.promiser,
            attrs: p.attrs,
            guard: p.guard,
            loops: rare.loops,
            after: rare.after,
            notify: rare.notify,
            on_repaired: rare.on_repaired,
            on_kept: rare.on_kept,
            on_failed: rare.on_failed,
            source: p.source,
        }
    }
}

impl Promise {
    /// The facts (their [ids](crate::schema::FactSpec::id)) of the
    /// run-time loops around the promise, outermost first.
    pub fn loops(&self) -> &[u32] {
        self.rare.as_ref().map_or(&[], |r| &r.loops)
    }

    /// Promises that must be applied before this one (`after` and
    /// containment); when one fails, this one is skipped.
    pub fn after(&self) -> &[u32] {
        self.rare.as_ref().map_or(&[], |r| &r.after)
    }

    /// Promises to run when this one is repaired.
    pub fn notify(&self) -> &[u32] {
        self.rare.as_ref().map_or(&[], |r| &r.notify)
    }

    /// The class (a constant index) set when it is repaired.
    pub fn on_repaired(&self) -> Option<u32> {
        self.rare.as_ref().and_then(|r| r.on_repaired)
    }

    /// The class (a constant index) set when it is kept.
    pub fn on_kept(&self) -> Option<u32> {
        self.rare.as_ref().and_then(|r| r.on_kept)
    }

    /// The class (a constant index) set when it fails.
    pub fn on_failed(&self) -> Option<u32> {
        self.rare.as_ref().and_then(|r| r.on_failed)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceLoc {
    /// Constant index of the file name.
    pub file: u32,
    pub line: u32,
}

impl Constant {
    /// The tag of its kind on the wire.
    pub fn kind(&self) -> u8 {
        match self {
            Constant::Str(_) => constant_kind::STR,
            Constant::Word(_) => constant_kind::WORD,
            Constant::Int(_) => constant_kind::INT,
            Constant::Bool(_) => constant_kind::BOOL,
            Constant::Duration(_) => constant_kind::DURATION,
            Constant::Blob(_) => constant_kind::BLOB,
            Constant::List(_) => constant_kind::LIST,
            Constant::Probe(_) => constant_kind::PROBE,
            Constant::Table(_) => constant_kind::TABLE,
            Constant::Secret(_) => constant_kind::SECRET,
            Constant::SealedSet(_) => constant_kind::SEALED_SET,
            Constant::BlobRef(_) => constant_kind::BLOB_REF,
        }
    }
}

impl Serialize for Constant {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let tag = self.kind();
        match self {
            Constant::Str(v) | Constant::Word(v) => write_tagged(s, tag, Some(v)),
            Constant::Int(v) => write_tagged(s, tag, Some(v)),
            Constant::Bool(v) => write_tagged(s, tag, Some(v)),
            Constant::Duration(v) => write_tagged(s, tag, Some(v)),
            Constant::Blob(v) => write_tagged(s, tag, Some(v)),
            Constant::List(v) => write_tagged(s, tag, Some(v)),
            Constant::Probe(v) => write_tagged(s, tag, Some(v)),
            Constant::Table(v) => write_tagged(s, tag, Some(v)),
            Constant::Secret(v) => write_tagged(s, tag, Some(v)),
            Constant::SealedSet(v) => write_tagged(s, tag, Some(v)),
            Constant::BlobRef(v) => write_tagged(s, tag, Some(v)),
        }
    }
}

impl<'de> Deserialize<'de> for Constant {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ConstantVisitor;
        impl<'de> Visitor<'de> for ConstantVisitor {
            type Value = Constant;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a constant")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Constant, A::Error> {
                const WHAT: &str = "a constant";
                Ok(match read_tag(&mut seq, WHAT)? {
                    constant_kind::STR => Constant::Str(read_payload(&mut seq, WHAT)?),
                    constant_kind::WORD => Constant::Word(read_payload(&mut seq, WHAT)?),
                    constant_kind::INT => Constant::Int(read_payload(&mut seq, WHAT)?),
                    constant_kind::BOOL => Constant::Bool(read_payload(&mut seq, WHAT)?),
                    constant_kind::DURATION => Constant::Duration(read_payload(&mut seq, WHAT)?),
                    constant_kind::BLOB => Constant::Blob(read_payload(&mut seq, WHAT)?),
                    constant_kind::LIST => Constant::List(read_payload(&mut seq, WHAT)?),
                    constant_kind::PROBE => Constant::Probe(read_payload(&mut seq, WHAT)?),
                    constant_kind::TABLE => Constant::Table(read_payload(&mut seq, WHAT)?),
                    constant_kind::SECRET => Constant::Secret(read_payload(&mut seq, WHAT)?),
                    constant_kind::SEALED_SET => Constant::SealedSet(read_payload(&mut seq, WHAT)?),
                    constant_kind::BLOB_REF => Constant::BlobRef(read_payload(&mut seq, WHAT)?),
                    other => return Err(refuse(format!("unknown constant kind {other}"))),
                })
            }
        }
        deserializer.deserialize_tuple(TAGGED_LEN, ConstantVisitor)
    }
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Item::Const(c) => write_tagged(s, item_kind::CONST, Some(c)),
            Item::Code(p) => write_tagged(s, item_kind::CODE, Some(p)),
        }
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ItemVisitor;
        impl<'de> Visitor<'de> for ItemVisitor {
            type Value = Item;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an item")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
                const WHAT: &str = "an item";
                Ok(match read_tag(&mut seq, WHAT)? {
                    item_kind::CONST => Item::Const(read_payload(&mut seq, WHAT)?),
                    item_kind::CODE => Item::Code(read_payload(&mut seq, WHAT)?),
                    other => return Err(refuse(format!("unknown item kind {other}"))),
                })
            }
        }
        deserializer.deserialize_tuple(TAGGED_LEN, ItemVisitor)
    }
}

impl Serialize for Operand {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Operand::Item(i) => write_tagged(s, operand_kind::ITEM, Some(i)),
            Operand::List(l) => write_tagged(s, operand_kind::LIST, Some(l)),
        }
    }
}

impl<'de> Deserialize<'de> for Operand {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct OperandVisitor;
        impl<'de> Visitor<'de> for OperandVisitor {
            type Value = Operand;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an operand")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Operand, A::Error> {
                const WHAT: &str = "an operand";
                Ok(match read_tag(&mut seq, WHAT)? {
                    operand_kind::ITEM => Operand::Item(read_payload(&mut seq, WHAT)?),
                    operand_kind::LIST => Operand::List(read_payload(&mut seq, WHAT)?),
                    other => return Err(refuse(format!("unknown operand kind {other}"))),
                })
            }
        }
        deserializer.deserialize_tuple(TAGGED_LEN, OperandVisitor)
    }
}

impl Body {
    /// The probe table: every probe declaration, with its constant index
    /// (what `probe` instructions name), in pool order.
    pub fn probes(&self) -> impl Iterator<Item = (u32, &Probe)> {
        self.constants
            .iter()
            .enumerate()
            .filter_map(|(i, c)| match c {
                Constant::Probe(p) => Some((i as u32, &**p)),
                _ => None,
            })
    }

    /// Every blob the bundle names ([`Constant::BlobRef`]), in pool order:
    /// what a host fetches and keeps, and a hub keeps for it.
    pub fn blobs(&self) -> impl Iterator<Item = &BlobRef> {
        self.constants.iter().filter_map(|c| match c {
            Constant::BlobRef(b) => Some(&**b),
            _ => None,
        })
    }

    /// A body with only constants and programs, for crafted-program tests
    /// (here and in the VM's evaluator); never used to build a real bundle.
    #[doc(hidden)]
    pub fn with_programs(constants: Vec<Constant>, programs: Vec<Vec<Instr>>) -> Body {
        Body {
            header: Header {
                name: "t".into(),
                key_id: [0; 8],
                serial: 1,
                pass_limit: 2,
                compiler_version: "test".into(),
                source_digest: [0; 32],
            },
            constants: List(constants),
            programs: List(
                programs
                    .into_iter()
                    .map(|c| Program { code: List(c) })
                    .collect(),
            ),
            classes: List(Vec::new()),
            exclusive: List(Vec::new()),
            promises: List(Vec::new()),
            order: List(Vec::new()),
            sources: List(Vec::new()),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use std::mem::size_of;

    /// The decoded body holds one `Promise`, its attribute list and a few
    /// constants per promise for the whole run (issue 22, item 3): these
    /// sizes are its memory per promise, so a field that grows one of them
    /// must be boxed or made a [`FixedList`].
    #[test]
    fn the_decoded_body_is_compact_per_promise() {
        assert_eq!(size_of::<FixedList<u32>>(), 16);
        assert_eq!(size_of::<Operand>(), 16, "an operand");
        assert_eq!(size_of::<AttrValue>(), 24, "an attribute value");
        assert!(size_of::<Promise>() <= 48, "{}", size_of::<Promise>());
        assert!(size_of::<Constant>() <= 32, "{}", size_of::<Constant>());
    }

    /// A string or word constant is a string on the wire, as when it was a
    /// `String`; decoded, a text of up to 24 bytes (a path, a name, a
    /// word) is held inline, without a heap block of its own.
    #[test]
    fn a_short_text_constant_decodes_inline_and_encodes_as_a_string() {
        for (text, inline) in [
            ("/etc/motd", true),
            ("x".repeat(24).as_str(), true),
            ("y".repeat(25).as_str(), false),
        ] {
            let constant = Constant::Str(text.into());
            let wire = postcard::to_allocvec(&constant).unwrap();
            let as_string = postcard::to_allocvec(&(constant_kind::STR, text.to_owned())).unwrap();
            assert_eq!(wire, as_string);
            let Constant::Str(back) = postcard::from_bytes(&wire).unwrap() else {
                panic!("not a string constant");
            };
            assert_eq!(back, text);
            assert_eq!(back.is_inline(), inline, "{text}");
        }
    }

    /// A promise is its parts on the wire, field by field: with and without
    /// the rarely set fields, the bytes are those of the eleven fields, and
    /// decoding them gives the promise back.
    #[test]
    fn a_promise_is_its_parts_on_the_wire() {
        let plain = PromiseParts {
            attrs: vec![AttrValue {
                attr: 2,
                value: Operand::Item(Item::Code(4)),
            }]
            .into(),
            guard: Some(9),
            source: 5,
            ..PromiseParts::new(3, Item::Const(1))
        };
        let mut rare = plain.clone();
        rare.loops = vec![1].into();
        rare.after = vec![0, 2].into();
        rare.notify = vec![7].into();
        rare.on_failed = Some(11);
        for parts in [plain, rare] {
            let promise = Promise::from(parts.clone());
            let wire = postcard::to_allocvec(&promise).unwrap();
            assert_eq!(wire, postcard::to_allocvec(&parts).unwrap());
            let back: Promise = postcard::from_bytes(&wire).unwrap();
            assert_eq!(back, promise);
            assert_eq!(back.loops(), &*parts.loops);
            assert_eq!(back.after(), &*parts.after);
            assert_eq!(back.notify(), &*parts.notify);
            assert_eq!(back.on_failed(), parts.on_failed);
        }
    }

    /// A `FixedList` is a `List` on the wire: the same bytes both ways, so
    /// the format did not change.
    #[test]
    fn a_fixed_list_is_a_list_on_the_wire() {
        for items in [vec![], vec![7u32], vec![1, 300, 70_000]] {
            let fixed = FixedList::from(items.clone());
            let wire = postcard::to_allocvec(&fixed).unwrap();
            assert_eq!(wire, postcard::to_allocvec(&List(items.clone())).unwrap());
            let back: FixedList<u32> = postcard::from_bytes(&wire).unwrap();
            assert_eq!(&*back, items.as_slice());
        }
    }

    /// It decodes through `List`'s decoder, so it is charged against the
    /// body's decode budget like any list: 150,000 items (1.2 MB decoded)
    /// are over the budget of a 1-byte body (its slack, 1 MiB), and within
    /// that of their own bytes.
    #[test]
    fn a_fixed_list_is_charged_to_the_decode_budget() {
        let many: Vec<Item> = (0..150_000).map(Item::Const).collect();
        let wire = postcard::to_allocvec(&FixedList::from(many)).unwrap();
        let decoded = with_decode_budget(1, || postcard::from_bytes::<FixedList<Item>>(&wire));
        assert!(decoded.is_err());
        let decoded = with_decode_budget(wire.len(), || {
            postcard::from_bytes::<FixedList<Item>>(&wire)
        });
        assert_eq!(decoded.unwrap().len(), 150_000);
    }
}
