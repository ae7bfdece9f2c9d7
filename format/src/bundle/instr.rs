//! The instruction set: what a host decides at run time (class expressions
//! over facts, interpolation of facts and run-time loop variables).
//!
//! A program is a straight line of instructions over a value stack: there
//! are no jumps at all, so every program terminates after exactly as many
//! steps as it has instructions. `&&` and `||` evaluate both sides (nothing
//! has side effects). Loops over run-time lists (`for ip in sys.ipv4`) are
//! not in the code: a promise names the facts it iterates over, the VM
//! repeats it per element, and [`Instr::LoopVar`] reads the current element.
//!
//! Values are booleans, strings, integers and lists of strings (only facts
//! produce lists). The verifier (`verify.rs`) checks every program's stack
//! effect and types before anything runs.
//!
//! Wire stability: postcard encodes a variant by its position in this enum.
//! Variants are never reordered or removed; a new one is appended and the
//! format's minor version is bumped. `docs/bytecode.md` documents each.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
}

impl Instr {
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
        }
    }
}
