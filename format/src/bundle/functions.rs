//! The built-in functions of [`Instr::Func`](super::instr::Instr::Func)
//! (format 2.2): the one table of their ids, names and signatures.
//!
//! The compiler looks a function up here by name to emit its id, the
//! verifier checks each `func` against its signature, the VM dispatches on
//! the id, the disassembler prints the name, and `docs/bytecode.md`
//! ("Functions") prints the table, checked against this one by
//! `format/tests/ids.rs`. Like every id, a function's id is never reused or
//! renumbered; a new function takes a new id and the minor version is
//! bumped.
//!
//! Functions are pure and total over well-typed arguments, except where a
//! row says otherwise: `index` gives a *missing* value when out of range,
//! and `split` and `replace` with an empty separator fail the program run
//! (and so the promise that needed it), never the VM.

use super::verify::Ty;

/// The type one parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Param {
    /// A value of exactly this type.
    Is(Ty),
    /// Any scalar: a string, an int or a bool.
    Scalar,
}

impl Param {
    /// Whether a value of type `ty` fits.
    pub fn accepts(self, ty: Ty) -> bool {
        match self {
            Param::Is(want) => want == ty,
            Param::Scalar => ty != Ty::List,
        }
    }

    /// As `docs/bytecode.md` writes it.
    pub fn describe(self) -> &'static str {
        match self {
            Param::Is(ty) => ty.name(),
            Param::Scalar => "string|int|bool",
        }
    }
}

/// One built-in function: its id on the wire, its name in policies, and
/// its signature.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Function {
    pub id: u32,
    pub name: &'static str,
    /// In order: the last parameter is on top of the stack.
    pub params: &'static [Param],
    pub result: Ty,
    /// Whether the result may be missing even when no argument is
    /// (`index` out of range): the verifier types it optional.
    pub may_be_missing: bool,
}

impl Function {
    /// The parameter types as `docs/bytecode.md` writes them: `list, string`.
    pub fn describe_params(&self) -> String {
        let params: Vec<&str> = self.params.iter().map(|p| p.describe()).collect();
        params.join(", ")
    }

    /// The result type as `docs/bytecode.md` writes it: `string`, or
    /// `optional string` for a result that may be missing.
    pub fn describe_result(&self) -> String {
        if self.may_be_missing {
            format!("optional {}", self.result.name())
        } else {
            self.result.name().to_owned()
        }
    }

    /// How many arguments it pops.
    pub fn arity(&self) -> usize {
        self.params.len()
    }
}

const S: Param = Param::Is(Ty::Str);
const I: Param = Param::Is(Ty::Int);
const L: Param = Param::Is(Ty::List);

const fn f(
    id: u32,
    name: &'static str,
    params: &'static [Param],
    result: Ty,
    may_be_missing: bool,
) -> Function {
    Function {
        id,
        name,
        params,
        result,
        may_be_missing,
    }
}

/// Every built-in function, by id.
pub const FUNCTIONS: &[Function] = &[
    f(1, "join", &[L, S], Ty::Str, false),
    f(2, "split", &[S, S], Ty::List, false),
    f(3, "len_str", &[S], Ty::Int, false),
    f(4, "len_list", &[L], Ty::Int, false),
    f(5, "contains_list", &[L, S], Ty::Bool, false),
    f(6, "contains_str", &[S, S], Ty::Bool, false),
    f(7, "upper", &[S], Ty::Str, false),
    f(8, "lower", &[S], Ty::Str, false),
    f(9, "trim", &[S], Ty::Str, false),
    f(10, "replace", &[S, S, S], Ty::Str, false),
    f(11, "concat", &[L, L], Ty::List, false),
    f(12, "sort", &[L], Ty::List, false),
    f(13, "unique", &[L], Ty::List, false),
    f(14, "index", &[L, I], Ty::Str, true),
    f(15, "to_string", &[Param::Scalar], Ty::Str, false),
];

/// The function with this id, if the format defines one.
pub fn function_by_id(id: u32) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.id == id)
}

/// The function with this name (what the compiler emits `func` for).
pub fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

#[cfg(test)]
#[allow(clippy::arithmetic_side_effects)]
mod tests {
    use super::*;

    /// Ids and names are unique, ids start at 1 (0 is never assigned), and
    /// both lookups find every row.
    #[test]
    fn the_function_table_is_consistent() {
        for (i, a) in FUNCTIONS.iter().enumerate() {
            assert_ne!(a.id, 0, "{} has id 0", a.name);
            assert!(!a.params.is_empty(), "{} takes no argument", a.name);
            for b in FUNCTIONS.iter().skip(i + 1) {
                assert_ne!(a.id, b.id, "{} and {} share an id", a.name, b.name);
                assert_ne!(a.name, b.name, "two functions are named {}", a.name);
            }
            assert_eq!(function_by_id(a.id), Some(a));
            assert_eq!(function(a.name), Some(a));
        }
        assert_eq!(function_by_id(0), None);
        assert_eq!(function("eval"), None);
        let index = function("index").unwrap();
        assert_eq!(index.describe_params(), "list, int");
        assert_eq!(index.describe_result(), "optional string");
        assert_eq!(
            function("to_string").unwrap().describe_params(),
            "string|int|bool"
        );
    }
}
