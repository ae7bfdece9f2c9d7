//! The instruction set: what a host decides at run time (class expressions
//! over facts, interpolation of facts and run-time loop variables).
//!
//! A program is a straight line of instructions over a value stack: there
//! are no jumps at all, so every program terminates after exactly as many
//! steps as it has instructions (an [`Instr::Each`] runs a program of a lower
//! index per element, so evaluation is bounded by the list lengths and the
//! nesting the verifier allows). `&&` and `||` evaluate both sides (nothing
//! has side effects). Loops over run-time lists (`for ip in sys.ipv4`) are
//! not in the code: a promise names the facts it iterates over, the VM
//! repeats it per element, and [`Instr::LoopVar`] reads the current element.
//!
//! Values are booleans, strings, integers and lists of strings; since
//! format 2.2 a value may also be *missing* (a failed index on the host),
//! which every instruction propagates and only [`Instr::Coalesce`]
//! replaces. Functions over values are [`Instr::Func`] with an id of the
//! one function table (`functions.rs`), and [`Instr::Each`] renders a
//! list by running a lower-numbered program per element. The verifier (`verify.rs`) checks every program's stack
//! effect and types before anything runs.
//!
//! On the wire an instruction is its opcode byte ([`crate::ids::opcode`]),
//! then its operand as a varint if it has one; the order of the variants
//! below means nothing. An opcode is never reused or renumbered; a new
//! instruction takes a new opcode and the format's minor version is bumped.
//! `docs/bytecode.md` documents each.

use std::fmt;

use serde::de::{SeqAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::wire::{read_payload, read_tag, refuse, write_tagged, TAGGED_LEN};
use crate::ids::opcode;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instr {
    /// `[] -> [c]`: push constant `c` (a string, word, int or bool).
    Const(u32),
    /// `[] -> [v]`: push the value of fact `f` (index into
    /// [`FACTS`](crate::schema::FACTS)): a string, an int or a list.
    Fact(u32),
    /// `[] -> [s]`: push the current element of the enclosing run-time loop
    /// `i` (0 is the outermost loop of the promise).
    LoopVar(u32),
    /// `[] -> [b]`: push whether the class named by constant `c` is set.
    Class(u32),
    /// `[b] -> [!b]`
    Not,
    /// `[a, b] -> [a && b]`
    And,
    /// `[a, b] -> [a || b]`
    Or,
    /// `[a, b] -> [a == b]`: two scalars of one type.
    Eq,
    /// `[a, b] -> [a != b]`
    Ne,
    /// `[s] -> [b]`: whether the regex of constant `c` matches string `s`.
    Match(u32),
    /// `[v, list] -> [b]`: whether `v` is an element of `list`.
    In,
    /// `[v1 .. vn] -> [s]`: the concatenation of `n` scalars as text (ints
    /// in decimal, booleans as `true`/`false`).
    Concat(u32),
    /// `[c, a, b] -> [a if c else b]`: `a` and `b` of one type (format 2.2).
    Select,
    /// `[a1 .. an] -> [r]`: built-in function `f` (an id of
    /// [`FUNCTIONS`](super::functions::FUNCTIONS)) applied to its `n`
    /// arguments, the last on top (format 2.2).
    Func(u32),
    /// `[a, b] -> [a unless it is missing, else b]`: the only instruction
    /// that removes a missing value (a failed index on the host; 2.2).
    Coalesce,
    /// `[list] -> [s]`: runs program `p` once per element of the list, in
    /// order, and pushes the concatenation of the results; `p` reads the
    /// element with [`Instr::Elem`] and has a lower index than the program
    /// that runs it, so there is no recursion (format 2.2).
    Each(u32),
    /// `[] -> [s]`: the current element of the `d`-th innermost enclosing
    /// [`Instr::Each`] (0 = innermost; format 2.2).
    Elem(u32),
    /// `[] -> [v]`: the value of a probe fact (format 2.3): constant `c` is
    /// a string naming the probe and, through records and maps, the field
    /// or key to read (`hw.cpus`); `v` is a string, int, bool or list. A
    /// probe that failed on this host makes the program fail with its
    /// reason, and the promise that needed it is skipped.
    Probe(u32),
    /// `[key] -> [v]`: the value of string `key` in the table constant `t`
    /// (a binary search), else the table's default; a key with neither
    /// fails the program run (format 2.3).
    Lookup(u32),
}

impl Instr {
    /// One instruction of each kind (operands 0): the opcode table is
    /// built from it, and a test checks it misses none.
    pub const ONE_OF_EACH: [Instr; 19] = [
        Instr::Const(0),
        Instr::Fact(0),
        Instr::LoopVar(0),
        Instr::Class(0),
        Instr::Not,
        Instr::And,
        Instr::Or,
        Instr::Eq,
        Instr::Ne,
        Instr::Match(0),
        Instr::In,
        Instr::Concat(0),
        Instr::Select,
        Instr::Func(0),
        Instr::Coalesce,
        Instr::Each(0),
        Instr::Elem(0),
        Instr::Probe(0),
        Instr::Lookup(0),
    ];

    /// The opcode byte that starts the instruction on the wire.
    pub fn opcode(self) -> u8 {
        match self {
            Instr::Const(_) => opcode::CONST,
            Instr::Fact(_) => opcode::FACT,
            Instr::LoopVar(_) => opcode::LOOPVAR,
            Instr::Class(_) => opcode::CLASS,
            Instr::Not => opcode::NOT,
            Instr::And => opcode::AND,
            Instr::Or => opcode::OR,
            Instr::Eq => opcode::EQ,
            Instr::Ne => opcode::NE,
            Instr::Match(_) => opcode::MATCH,
            Instr::In => opcode::IN,
            Instr::Concat(_) => opcode::CONCAT,
            Instr::Select => opcode::SELECT,
            Instr::Func(_) => opcode::FUNC,
            Instr::Coalesce => opcode::COALESCE,
            Instr::Each(_) => opcode::EACH,
            Instr::Elem(_) => opcode::ELEM,
            Instr::Probe(_) => opcode::PROBE,
            Instr::Lookup(_) => opcode::LOOKUP,
        }
    }

    /// The operand, for the instructions that have one.
    pub fn operand(self) -> Option<u32> {
        match self {
            Instr::Const(x)
            | Instr::Fact(x)
            | Instr::LoopVar(x)
            | Instr::Class(x)
            | Instr::Match(x)
            | Instr::Concat(x)
            | Instr::Func(x)
            | Instr::Each(x)
            | Instr::Elem(x)
            | Instr::Probe(x) => Some(x),
            Instr::Lookup(x) => Some(x),
            Instr::Not
            | Instr::And
            | Instr::Or
            | Instr::Eq
            | Instr::Ne
            | Instr::In
            | Instr::Select
            | Instr::Coalesce => None,
        }
    }

    /// Whether instructions with this opcode have an operand; `None` for
    /// an opcode this format does not define.
    pub fn has_operand(op: u8) -> Option<bool> {
        match op {
            opcode::CONST
            | opcode::FACT
            | opcode::LOOPVAR
            | opcode::CLASS
            | opcode::MATCH
            | opcode::CONCAT
            | opcode::FUNC
            | opcode::EACH
            | opcode::ELEM
            | opcode::PROBE => Some(true),
            opcode::LOOKUP => Some(true),
            opcode::NOT
            | opcode::AND
            | opcode::OR
            | opcode::EQ
            | opcode::NE
            | opcode::IN
            | opcode::SELECT
            | opcode::COALESCE => Some(false),
            _ => None,
        }
    }

    /// The instruction with this opcode and operand (ignored by
    /// instructions without one); `None` for an unknown opcode.
    pub fn from_opcode(op: u8, x: u32) -> Option<Instr> {
        Some(match op {
            opcode::CONST => Instr::Const(x),
            opcode::FACT => Instr::Fact(x),
            opcode::LOOPVAR => Instr::LoopVar(x),
            opcode::CLASS => Instr::Class(x),
            opcode::NOT => Instr::Not,
            opcode::AND => Instr::And,
            opcode::OR => Instr::Or,
            opcode::EQ => Instr::Eq,
            opcode::NE => Instr::Ne,
            opcode::MATCH => Instr::Match(x),
            opcode::IN => Instr::In,
            opcode::CONCAT => Instr::Concat(x),
            opcode::SELECT => Instr::Select,
            opcode::FUNC => Instr::Func(x),
            opcode::COALESCE => Instr::Coalesce,
            opcode::EACH => Instr::Each(x),
            opcode::ELEM => Instr::Elem(x),
            opcode::PROBE => Instr::Probe(x),
            opcode::LOOKUP => Instr::Lookup(x),
            _ => return None,
        })
    }

    /// The mnemonic used by the disassembler and the docs.
    pub fn mnemonic(self) -> &'static str {
        match self {
            Instr::Const(_) => "const",
            Instr::Fact(_) => "fact",
            Instr::LoopVar(_) => "loopvar",
            Instr::Class(_) => "class",
            Instr::Not => "not",
            Instr::And => "and",
            Instr::Or => "or",
            Instr::Eq => "eq",
            Instr::Ne => "ne",
            Instr::Match(_) => "match",
            Instr::In => "in",
            Instr::Concat(_) => "concat",
            Instr::Select => "select",
            Instr::Func(_) => "func",
            Instr::Coalesce => "coalesce",
            Instr::Each(_) => "each",
            Instr::Elem(_) => "elem",
            Instr::Probe(_) => "probe",
            Instr::Lookup(_) => "lookup",
        }
    }
}

impl Serialize for Instr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        write_tagged(serializer, self.opcode(), self.operand().as_ref())
    }
}

impl<'de> Deserialize<'de> for Instr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct InstrVisitor;
        impl<'de> Visitor<'de> for InstrVisitor {
            type Value = Instr;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an instruction")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Instr, A::Error> {
                let op = read_tag(&mut seq, "an instruction")?;
                let operand = match Instr::has_operand(op) {
                    Some(true) => read_payload(&mut seq, "an instruction")?,
                    Some(false) => 0,
                    None => return Err(refuse(format!("unknown opcode {op:#04x}"))),
                };
                Instr::from_opcode(op, operand)
                    .ok_or_else(|| refuse(format!("unknown opcode {op:#04x}")))
            }
        }
        deserializer.deserialize_tuple(TAGGED_LEN, InstrVisitor)
    }
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// The opcode table misses no instruction and every opcode byte means
    /// one instruction: a byte decodes exactly when it is in the table.
    #[test]
    fn every_opcode_is_in_the_table_once() {
        let table: Vec<u8> = Instr::ONE_OF_EACH.iter().map(|i| i.opcode()).collect();
        for op in 0..=u8::MAX {
            let known = table.iter().filter(|&&t| t == op).count();
            assert!(known <= 1, "opcode {op:#04x} is used twice");
            match Instr::from_opcode(op, 7) {
                Some(i) => {
                    assert_eq!(known, 1, "{i:?} is missing from ONE_OF_EACH");
                    assert_eq!(i.opcode(), op);
                    assert_eq!(Instr::has_operand(op), Some(i.operand().is_some()));
                    let bytes = postcard::to_allocvec(&i).unwrap();
                    assert_eq!(bytes[0], op);
                    assert_eq!(postcard::from_bytes::<Instr>(&bytes).unwrap(), i);
                }
                None => {
                    assert_eq!(known, 0);
                    assert_eq!(Instr::has_operand(op), None);
                }
            }
        }
    }
}
