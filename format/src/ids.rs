//! Every numeric id of the bundle format, in one place: the opcode of each
//! instruction, the tag of each kind of constant, item and operand, the id
//! of each built-in function (from [`functions::FUNCTIONS`]), and —
//! gathered from the schema, where each id sits beside its entry — the id of
//! each promise type, attribute and fact.
//!
//! The writer (`policyc`), the reader and verifier, and the disassembler all
//! go through these ids; nothing in a bundle is numbered by its position in
//! a Rust array or enum. An id is never reused or renumbered: a new entry
//! takes a new id and the format's minor version is bumped, and
//! `format/tests/ids.rs` fails when [`render`] changes without a new
//! version (see "Compatibility" in `docs/bytecode.md`, where the same
//! tables are printed and checked against these).

use crate::bundle::functions;
use crate::bundle::instr::Instr;
use crate::schema;

/// Instruction opcodes: the first byte of every instruction.
pub mod opcode {
    pub const CONST: u8 = 0x01;
    pub const FACT: u8 = 0x02;
    pub const LOOPVAR: u8 = 0x03;
    pub const CLASS: u8 = 0x04;
    pub const NOT: u8 = 0x05;
    pub const AND: u8 = 0x06;
    pub const OR: u8 = 0x07;
    pub const EQ: u8 = 0x08;
    pub const NE: u8 = 0x09;
    pub const MATCH: u8 = 0x0a;
    pub const IN: u8 = 0x0b;
    pub const CONCAT: u8 = 0x0c;
    // Format 2.2: logic and functions over host facts (templates, issue 16).
    pub const SELECT: u8 = 0x0d;
    pub const FUNC: u8 = 0x0e;
    pub const COALESCE: u8 = 0x0f;
    pub const EACH: u8 = 0x10;
    pub const ELEM: u8 = 0x11;
    // Format 2.3: probe facts (issue 18). 0x12 is left to the lookup
    // table opcode of the same version.
    pub const PROBE: u8 = 0x13;
    // Format 2.3: host-side lookups in a table (issue 16, merged splits).
    pub const LOOKUP: u8 = 0x12;
}

/// Tags of the kinds of constant in the pool.
pub mod constant_kind {
    pub const STR: u8 = 1;
    pub const WORD: u8 = 2;
    pub const INT: u8 = 3;
    pub const BOOL: u8 = 4;
    pub const DURATION: u8 = 5;
    pub const BLOB: u8 = 6;
    /// A list of strings (format 2.2).
    pub const LIST: u8 = 7;
    /// A probe declaration (format 2.3, `bundle/probe.rs`).
    pub const PROBE: u8 = 8;
    /// A table from string keys to values, read by `lookup` (2.3).
    pub const TABLE: u8 = 9;
    /// A secret: its name and its entry in a sealed set (2.4, issue 20).
    pub const SECRET: u8 = 10;
    /// The secrets of one set of hosts, sealed to them (2.4, issue 20).
    pub const SEALED_SET: u8 = 11;
    /// A file stored beside the bundle, named by its SHA-256 (2.6, issue
    /// 22 item 5).
    pub const BLOB_REF: u8 = 12;
    /// Each tag with its name, for the id tables.
    pub const ALL: &[(u8, &str)] = &[
        (STR, "str"),
        (WORD, "word"),
        (INT, "int"),
        (BOOL, "bool"),
        (DURATION, "duration"),
        (BLOB, "blob"),
        (LIST, "list"),
        (PROBE, "probe"),
        (TABLE, "table"),
        (SECRET, "secret"),
        (SEALED_SET, "sealed_set"),
        (BLOB_REF, "blob_ref"),
    ];
}

/// Tags of where a probe's value comes from (format 2.3).
pub mod probe_source {
    pub const PROGRAM: u8 = 1;
    pub const FILE: u8 = 2;
    pub const ALL: &[(u8, &str)] = &[(PROGRAM, "program"), (FILE, "file")];
}

/// Tags of an item: a value known at compile time, or computed on the host.
pub mod item_kind {
    pub const CONST: u8 = 1;
    pub const CODE: u8 = 2;
    pub const ALL: &[(u8, &str)] = &[(CONST, "const"), (CODE, "code")];
}

/// Tags of an attribute's operand: one item or a list of items.
pub mod operand_kind {
    pub const ITEM: u8 = 1;
    pub const LIST: u8 = 2;
    pub const ALL: &[(u8, &str)] = &[(ITEM, "item"), (LIST, "list")];
}

/// One id table: what it numbers and its `(id, name)` rows, by id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdTable {
    /// The heading it has in `docs/bytecode.md` ("Opcodes", "Facts" ...).
    pub title: &'static str,
    pub rows: Vec<(u32, &'static str)>,
}

fn table(title: &'static str, mut rows: Vec<(u32, &'static str)>) -> IdTable {
    rows.sort_unstable();
    IdTable { title, rows }
}

/// Every id table of the format.
pub fn tables() -> Vec<IdTable> {
    let tags =
        |all: &[(u8, &'static str)]| all.iter().map(|(id, n)| (u32::from(*id), *n)).collect();
    vec![
        table(
            "Opcodes",
            Instr::ONE_OF_EACH
                .iter()
                .map(|i| (u32::from(i.opcode()), i.mnemonic()))
                .collect(),
        ),
        table("Constant kinds", tags(constant_kind::ALL)),
        table("Item kinds", tags(item_kind::ALL)),
        table("Operand kinds", tags(operand_kind::ALL)),
        table("Probe sources", tags(probe_source::ALL)),
        table(
            "Promise types",
            schema::PROMISE_TYPES
                .iter()
                .map(|t| (u32::from(t.id), t.name))
                .collect(),
        ),
        table(
            "Attributes",
            schema::attributes()
                .iter()
                .map(|a| (u32::from(a.id), a.name))
                .collect(),
        ),
        table(
            "Functions",
            functions::FUNCTIONS
                .iter()
                .map(|f| (f.id, f.name))
                .collect(),
        ),
        table(
            "Facts",
            schema::FACTS
                .iter()
                .map(|f| (u32::from(f.id), f.name))
                .collect(),
        ),
    ]
}

/// The tables as text, one `table id name` line per row: what the format
/// version is pinned to (`format/tests/ids/*.txt`).
pub fn render() -> String {
    let mut out = String::new();
    for t in tables() {
        for (id, name) in &t.rows {
            out.push_str(&format!("{}\t{id}\t{name}\n", t.title));
        }
    }
    out
}
