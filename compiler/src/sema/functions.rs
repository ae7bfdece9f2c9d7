//! The built-in functions of the policy language (LANGUAGE.md section 11,
//! decided points in section 18): one table of names, signatures and doc
//! strings read by the checker (argument types, the help of an error), the
//! language server (hover, completion) and expansion (what each computes).
//!
//! Every function is pure. Expansion computes it when its arguments are
//! known at compile time; over values only the host knows (facts, run-time
//! loop variables) it becomes an instruction the VM runs (the `func`
//! opcode, `converge_format::bundle::functions`).

use super::types::Type;

/// One built-in function.
#[derive(Debug)]
pub struct Function {
    pub name: &'static str,
    /// As the help and hover show it.
    pub signature: &'static str,
    pub doc: &'static str,
    /// How many arguments it takes.
    pub arity: usize,
}

pub const FUNCTIONS: &[Function] = &[
    Function {
        name: "join",
        signature: "join(list<string>, string) -> string",
        doc: "The elements of a list with the separator between them.",
        arity: 2,
    },
    Function {
        name: "split",
        signature: "split(string, string) -> list<string>",
        doc: "The fields of a string between separators; empty fields are kept (`split(\"a,,b\", \",\")` is `[\"a\", \"\", \"b\"]`).",
        arity: 2,
    },
    Function {
        name: "keys",
        signature: "keys(map<string, T>) -> list<string>",
        doc: "The keys of a map, sorted.",
        arity: 1,
    },
    Function {
        name: "values",
        signature: "values(map<string, T>) -> list<T>",
        doc: "The values of a map, in the order of their sorted keys.",
        arity: 1,
    },
    Function {
        name: "len",
        signature: "len(list<T> | map<string, T> | string) -> int",
        doc: "The number of elements of a list, entries of a map, or characters of a string.",
        arity: 1,
    },
    Function {
        name: "contains",
        signature: "contains(list<T>, T) | contains(string, string) | contains(map<string, T>, string) -> bool",
        doc: "Whether a list has the element, a string the substring, or a map the key.",
        arity: 2,
    },
    Function {
        name: "upper",
        signature: "upper(string) -> string",
        doc: "The string in upper case.",
        arity: 1,
    },
    Function {
        name: "lower",
        signature: "lower(string) -> string",
        doc: "The string in lower case.",
        arity: 1,
    },
    Function {
        name: "trim",
        signature: "trim(string) -> string",
        doc: "The string without white space at either end.",
        arity: 1,
    },
    Function {
        name: "replace",
        signature: "replace(string, string, string) -> string",
        doc: "The string with every occurrence of the second argument (literal text, not a regex) replaced by the third.",
        arity: 3,
    },
    Function {
        name: "concat",
        signature: "concat(list<T>, list<T>) -> list<T>",
        doc: "The elements of the first list, then those of the second.",
        arity: 2,
    },
    Function {
        name: "merge",
        signature: "merge(map<string, T>, map<string, T>) -> map<string, T>",
        doc: "The entries of both maps; where both have a key, the second map's value wins (shallow).",
        arity: 2,
    },
    Function {
        name: "sort",
        signature: "sort(list<T>) -> list<T>",
        doc: "The list sorted (strings by their bytes, numbers by value).",
        arity: 1,
    },
    Function {
        name: "unique",
        signature: "unique(list<T>) -> list<T>",
        doc: "The list without repeated elements, keeping the first occurrence of each, in order.",
        arity: 1,
    },
    Function {
        name: "data",
        signature: "data(string) -> T",
        doc: "A data file (.toml, .json, .yaml or .yml) read at compile time and checked against the declared type of the `let` it is the whole value of.",
        arity: 1,
    },
];

pub fn function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.iter().find(|f| f.name == name)
}

/// The result type of `name` applied to arguments of types `args`, or what
/// is wrong with the arguments (the caller adds the signature as help).
/// `Type::Any` arguments (earlier errors) are accepted.
pub fn result_type(name: &str, args: &[Type]) -> Result<Type, String> {
    use Type::{Any, Bool, Int, List, Map};
    let list_of = |t: &Type| -> Option<Type> {
        match t {
            List(inner) => Some((**inner).clone()),
            Any => Some(Any),
            _ => None,
        }
    };
    let map_of = |t: &Type| -> Option<Type> {
        match t {
            Map(inner) => Some((**inner).clone()),
            Any => Some(Any),
            _ => None,
        }
    };
    let want = |i: usize, expected: &Type| -> Result<(), String> {
        match args.get(i) {
            Some(actual) if expected.accepts(actual) => Ok(()),
            Some(actual) => Err(format!(
                "argument {} must be `{}`, found `{}`",
                i + 1,
                expected.describe(),
                actual.describe()
            )),
            None => Err(format!("argument {} is missing", i + 1)),
        }
    };
    let list_arg = |i: usize| -> Result<Type, String> {
        match args.get(i) {
            Some(t) => list_of(t).ok_or_else(|| {
                format!(
                    "argument {} must be a list, found {}",
                    i + 1,
                    t.with_article()
                )
            }),
            None => Err(format!("argument {} is missing", i + 1)),
        }
    };
    let map_arg = |i: usize| -> Result<Type, String> {
        match args.get(i) {
            Some(t) => map_of(t).ok_or_else(|| {
                format!(
                    "argument {} must be a map, found {}",
                    i + 1,
                    t.with_article()
                )
            }),
            None => Err(format!("argument {} is missing", i + 1)),
        }
    };
    let Some(f) = function(name) else {
        return Err(format!("unknown function `{name}`"));
    };
    if args.len() != f.arity {
        return Err(format!(
            "`{name}` takes {} argument{}, found {}",
            f.arity,
            if f.arity == 1 { "" } else { "s" },
            args.len()
        ));
    }
    match name {
        "join" => {
            want(0, &List(Box::new(Type::String)))?;
            want(1, &Type::String)?;
            Ok(Type::String)
        }
        "split" => {
            want(0, &Type::String)?;
            want(1, &Type::String)?;
            Ok(List(Box::new(Type::String)))
        }
        "keys" => {
            map_arg(0)?;
            Ok(List(Box::new(Type::String)))
        }
        "values" => Ok(List(Box::new(map_arg(0)?))),
        "len" => match args.first() {
            Some(List(_) | Map(_) | Type::String | Any) => Ok(Int),
            Some(other) => Err(format!(
                "argument 1 must be a list, a map or a string, found {}",
                other.with_article()
            )),
            None => Err("argument 1 is missing".to_owned()),
        },
        "contains" => match args.first() {
            Some(Type::String) => {
                want(1, &Type::String)?;
                Ok(Bool)
            }
            Some(Map(_)) => {
                want(1, &Type::String)?;
                Ok(Bool)
            }
            Some(List(inner)) => {
                want(1, inner)?;
                Ok(Bool)
            }
            Some(Any) => Ok(Bool),
            Some(other) => Err(format!(
                "argument 1 must be a list, a string or a map, found {}",
                other.with_article()
            )),
            None => Err("argument 1 is missing".to_owned()),
        },
        "upper" | "lower" | "trim" => {
            want(0, &Type::String)?;
            Ok(Type::String)
        }
        "replace" => {
            for i in 0..3 {
                want(i, &Type::String)?;
            }
            Ok(Type::String)
        }
        "concat" => {
            let a = list_arg(0)?;
            let b = list_arg(1)?;
            if !a.accepts(&b) {
                return Err(format!(
                    "both lists must have one element type: {} and {}",
                    a.describe(),
                    b.describe()
                ));
            }
            Ok(List(Box::new(if a == Any { b } else { a })))
        }
        "merge" => {
            let a = map_arg(0)?;
            let b = map_arg(1)?;
            if !a.accepts(&b) {
                return Err(format!(
                    "both maps must have one value type: {} and {}",
                    a.describe(),
                    b.describe()
                ));
            }
            Ok(Map(Box::new(if a == Any { b } else { a })))
        }
        "sort" | "unique" => {
            let inner = list_arg(0)?;
            if name == "sort" && !inner.is_scalar() {
                return Err(format!(
                    "`sort` sorts lists of single values, not of {}",
                    inner.describe()
                ));
            }
            Ok(List(Box::new(inner)))
        }
        // `data` takes its type from the `let` (the checker handles it).
        "data" => {
            want(0, &Type::String)?;
            Ok(Any)
        }
        _ => Err(format!("unknown function `{name}`")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }

    #[test]
    fn every_function_has_a_signature_rule() {
        for f in FUNCTIONS {
            let args = vec![Type::Any; f.arity];
            assert!(result_type(f.name, &args).is_ok(), "{}", f.name);
            assert!(f.signature.starts_with(f.name), "{}", f.name);
        }
    }

    #[test]
    fn argument_types_are_checked() {
        assert_eq!(
            result_type("join", &[list(Type::String), Type::String]),
            Ok(Type::String)
        );
        assert_eq!(
            result_type("join", &[Type::String, Type::String]),
            Err("argument 1 must be `list<string>`, found `string`".to_owned())
        );
        assert_eq!(
            result_type("upper", &[]),
            Err("`upper` takes 1 argument, found 0".to_owned())
        );
        assert_eq!(
            result_type("contains", &[list(Type::Int), Type::String]),
            Err("argument 2 must be `int`, found `string`".to_owned())
        );
        assert_eq!(
            result_type("values", &[Type::Map(Box::new(Type::Int))]),
            Ok(list(Type::Int))
        );
        assert!(result_type("nope", &[]).is_err());
    }
}
