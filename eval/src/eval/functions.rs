//! The built-in functions of `func` on the host (format 2.2): what each id
//! of [`FUNCTIONS`](crate::bundle::functions::FUNCTIONS) computes.
//!
//! Every function that builds a string or a list works out the size of its
//! result before allocating it and refuses one larger than what is left of
//! the run's text budget ([`MAX_EVAL_BYTES`](super::MAX_EVAL_BYTES)), so a
//! `split` of 200 MB of commas fails its promise instead of allocating
//! gigabytes of empty strings. Errors of the arguments (an empty separator)
//! fail the run with the reason; nothing here panics.

use std::collections::HashSet;

use super::{list_bytes, Val};
use crate::bundle::functions::Function;

/// Why a function could not give a result.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum FuncError {
    /// The result would take more of the text budget than is left.
    OverBudget,
    /// The arguments are outside the function's domain (the reason).
    Invalid(String),
}

/// What applying a function gives: its result (`None` when missing: an
/// `index` out of range) and how many bytes it examined, for the step
/// budget.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Applied {
    pub value: Option<Val>,
    pub examined: usize,
}

fn done(value: Val, examined: usize) -> Result<Applied, FuncError> {
    Ok(Applied {
        value: Some(value),
        examined,
    })
}

fn invalid(f: &Function, args: &[Val]) -> FuncError {
    FuncError::Invalid(format!("`{}` applied to {args:?}", f.name))
}

/// Fails with [`FuncError::OverBudget`] when `bytes` (the size of a result
/// about to be built; `None` when that size overflows) exceeds `left`.
fn fits(bytes: Option<usize>, left: usize) -> Result<(), FuncError> {
    match bytes {
        Some(b) if b <= left => Ok(()),
        _ => Err(FuncError::OverBudget),
    }
}

/// Applies `f` to `args` (in order: the last was on top of the stack),
/// with `left` bytes of the text budget left to build its result in.
pub(super) fn apply(f: &Function, args: Vec<Val>, left: usize) -> Result<Applied, FuncError> {
    let examined: usize = args.iter().map(Val::bytes).fold(0, usize::saturating_add);
    match (f.name, args.as_slice()) {
        ("join", [Val::List(items), Val::Str(sep)]) => {
            let size = text_len(items)
                .checked_add(sep.len().saturating_mul(items.len().saturating_sub(1)));
            fits(size, left)?;
            done(Val::Str(items.join(sep)), examined)
        }
        ("split", [Val::Str(s), Val::Str(sep)]) => {
            if sep.is_empty() {
                return Err(FuncError::Invalid(
                    "`split` with an empty separator".to_owned(),
                ));
            }
            let pieces = s.matches(sep.as_str()).count().saturating_add(1);
            let size = pieces
                .checked_mul(std::mem::size_of::<String>())
                .and_then(|n| n.checked_add(s.len()));
            fits(size, left)?;
            done(
                Val::List(s.split(sep.as_str()).map(str::to_owned).collect()),
                examined,
            )
        }
        ("len_str", [Val::Str(s)]) => done(Val::Int(count(s.chars().count())), examined),
        ("len_list", [Val::List(items)]) => done(Val::Int(count(items.len())), examined),
        ("contains_list", [Val::List(items), Val::Str(s)]) => {
            done(Val::Bool(items.contains(s)), examined)
        }
        ("contains_str", [Val::Str(s), Val::Str(part)]) => {
            done(Val::Bool(s.contains(part.as_str())), examined)
        }
        ("upper", [Val::Str(s)]) => done(
            Val::Str(map_chars(s, left, |c, out| out.extend(c.to_uppercase()))?),
            examined,
        ),
        ("lower", [Val::Str(s)]) => done(
            Val::Str(map_chars(s, left, |c, out| out.extend(c.to_lowercase()))?),
            examined,
        ),
        ("trim", [Val::Str(s)]) => done(Val::Str(s.trim().to_owned()), examined),
        ("replace", [Val::Str(s), Val::Str(from), Val::Str(to)]) => {
            if from.is_empty() {
                return Err(FuncError::Invalid(
                    "`replace` of an empty string (there is nothing to find)".to_owned(),
                ));
            }
            let found = s.matches(from.as_str()).count();
            let size = found.checked_mul(to.len()).and_then(|added| {
                s.len()
                    .saturating_sub(found.saturating_mul(from.len()))
                    .checked_add(added)
            });
            fits(size, left)?;
            done(Val::Str(s.replace(from.as_str(), to)), examined)
        }
        ("concat", [Val::List(a), Val::List(b)]) => {
            fits(list_bytes(a).checked_add(list_bytes(b)), left)?;
            let mut joined = Vec::with_capacity(a.len().saturating_add(b.len()));
            joined.extend(a.iter().cloned());
            joined.extend(b.iter().cloned());
            done(Val::List(joined), examined)
        }
        ("sort", [Val::List(items)]) => {
            fits(Some(list_bytes(items)), left)?;
            let mut sorted = items.clone();
            sorted.sort_unstable();
            // A merge of n elements compares each about log2(n) times.
            let rounds = usize::try_from(items.len().max(1).ilog2()).unwrap_or(usize::MAX);
            done(
                Val::List(sorted),
                examined.saturating_mul(rounds.saturating_add(1)),
            )
        }
        ("unique", [Val::List(items)]) => {
            fits(Some(list_bytes(items)), left)?;
            let mut seen: HashSet<&str> = HashSet::with_capacity(items.len());
            let kept = items
                .iter()
                .filter(|s| seen.insert(s.as_str()))
                .cloned()
                .collect();
            done(Val::List(kept), examined)
        }
        ("index", [Val::List(items), Val::Int(i)]) => Ok(Applied {
            value: usize::try_from(*i)
                .ok()
                .and_then(|i| items.get(i))
                .map(|s| Val::Str(s.clone())),
            examined: 0,
        }),
        ("to_string", [v @ (Val::Str(_) | Val::Int(_) | Val::Bool(_))]) => {
            done(Val::Str(v.text()), examined)
        }
        _ => Err(invalid(f, &args)),
    }
}

/// The bytes of text of a list's elements.
fn text_len(items: &[String]) -> usize {
    items.iter().map(String::len).fold(0, usize::saturating_add)
}

/// A count as an int (saturating: no count on a host reaches `i64::MAX`).
fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `s` with each character replaced by what `map` appends (a case mapping
/// may lengthen the text, `ß` to `SS`), stopping past `left` bytes.
fn map_chars(s: &str, left: usize, map: impl Fn(char, &mut String)) -> Result<String, FuncError> {
    let mut out = String::with_capacity(s.len().min(left));
    for c in s.chars() {
        map(c, &mut out);
        if out.len() > left {
            return Err(FuncError::OverBudget);
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::indexing_slicing, clippy::arithmetic_side_effects)]
mod tests {
    use super::*;
    use crate::bundle::functions::function;

    const PLENTY: usize = 1 << 20;

    fn s(text: &str) -> Val {
        Val::Str(text.to_owned())
    }

    fn l(items: &[&str]) -> Val {
        Val::List(items.iter().map(|s| (*s).to_owned()).collect())
    }

    fn call(name: &str, args: Vec<Val>) -> Result<Option<Val>, FuncError> {
        apply(function(name).unwrap(), args, PLENTY).map(|a| a.value)
    }

    fn ok(name: &str, args: Vec<Val>) -> Val {
        call(name, args).unwrap().unwrap()
    }

    #[test]
    fn join_and_split() {
        assert_eq!(ok("join", vec![l(&["a", "b", "c"]), s(", ")]), s("a, b, c"));
        assert_eq!(ok("join", vec![l(&[]), s(",")]), s(""));
        assert_eq!(ok("join", vec![l(&["only"]), s(",")]), s("only"));
        assert_eq!(ok("split", vec![s("a,,b"), s(",")]), l(&["a", "", "b"]));
        assert_eq!(ok("split", vec![s(""), s(",")]), l(&[""]));
        assert_eq!(ok("split", vec![s("a::b::"), s("::")]), l(&["a", "b", ""]));
        assert_eq!(ok("split", vec![s("é,ü"), s(",")]), l(&["é", "ü"]));
        assert_eq!(
            call("split", vec![s("a,b"), s("")]),
            Err(FuncError::Invalid(
                "`split` with an empty separator".to_owned()
            ))
        );
    }

    #[test]
    fn lengths_count_characters_and_elements() {
        assert_eq!(ok("len_str", vec![s("")]), Val::Int(0));
        assert_eq!(ok("len_str", vec![s("héllo")]), Val::Int(5));
        assert_eq!(ok("len_str", vec![s("日本")]), Val::Int(2));
        assert_eq!(ok("len_list", vec![l(&[])]), Val::Int(0));
        assert_eq!(ok("len_list", vec![l(&["a", ""])]), Val::Int(2));
    }

    #[test]
    fn contains_of_lists_and_strings() {
        assert_eq!(
            ok("contains_list", vec![l(&["a", "b"]), s("b")]),
            Val::Bool(true)
        );
        assert_eq!(
            ok("contains_list", vec![l(&["ab"]), s("a")]),
            Val::Bool(false)
        );
        assert_eq!(ok("contains_list", vec![l(&[]), s("")]), Val::Bool(false));
        assert_eq!(
            ok("contains_str", vec![s("web01"), s("eb0")]),
            Val::Bool(true)
        );
        assert_eq!(ok("contains_str", vec![s("web01"), s("")]), Val::Bool(true));
        assert_eq!(ok("contains_str", vec![s("wéb"), s("e")]), Val::Bool(false));
    }

    #[test]
    fn case_and_white_space() {
        assert_eq!(ok("upper", vec![s("straße é")]), s("STRASSE É"));
        assert_eq!(ok("lower", vec![s("ÀB C")]), s("àb c"));
        assert_eq!(ok("upper", vec![s("")]), s(""));
        // Unicode white space, both ends only.
        assert_eq!(ok("trim", vec![s("\u{3000}\t a b \n\u{a0}")]), s("a b"));
        assert_eq!(ok("trim", vec![s("   ")]), s(""));
    }

    #[test]
    fn replace_is_literal_and_total() {
        assert_eq!(
            ok("replace", vec![s("a.b.c"), s("."), s("::")]),
            s("a::b::c")
        );
        assert_eq!(ok("replace", vec![s("aaa"), s("aa"), s("b")]), s("ba"));
        assert_eq!(ok("replace", vec![s("x"), s("y"), s("z")]), s("x"));
        assert_eq!(ok("replace", vec![s("é-é"), s("é"), s("")]), s("-"));
        assert!(matches!(
            call("replace", vec![s("x"), s(""), s("y")]),
            Err(FuncError::Invalid(why)) if why.contains("empty")
        ));
    }

    #[test]
    fn list_functions() {
        assert_eq!(
            ok("concat", vec![l(&["a"]), l(&["b", "a"])]),
            l(&["a", "b", "a"])
        );
        assert_eq!(ok("concat", vec![l(&[]), l(&[])]), l(&[]));
        // By bytes: upper case before lower case, `é` after `z`.
        assert_eq!(
            ok("sort", vec![l(&["b", "é", "a", "B", "z"])]),
            l(&["B", "a", "b", "z", "é"])
        );
        assert_eq!(ok("sort", vec![l(&[])]), l(&[]));
        assert_eq!(
            ok("unique", vec![l(&["b", "a", "b", "c", "a"])]),
            l(&["b", "a", "c"])
        );
        assert_eq!(ok("unique", vec![l(&[])]), l(&[]));
    }

    #[test]
    fn index_is_missing_out_of_range() {
        let list = || l(&["a", "b"]);
        assert_eq!(ok("index", vec![list(), Val::Int(1)]), s("b"));
        assert_eq!(call("index", vec![list(), Val::Int(2)]), Ok(None));
        assert_eq!(call("index", vec![list(), Val::Int(-1)]), Ok(None));
        assert_eq!(call("index", vec![list(), Val::Int(i64::MIN)]), Ok(None));
        assert_eq!(call("index", vec![l(&[]), Val::Int(0)]), Ok(None));
    }

    #[test]
    fn to_string_of_each_scalar() {
        assert_eq!(ok("to_string", vec![s("x")]), s("x"));
        assert_eq!(ok("to_string", vec![Val::Int(-42)]), s("-42"));
        assert_eq!(ok("to_string", vec![Val::Bool(false)]), s("false"));
    }

    /// Arguments of the wrong types (only a body that bypassed the
    /// verifier has them) are an error, never a panic.
    #[test]
    fn wrong_arguments_are_an_error() {
        for f in crate::bundle::functions::FUNCTIONS {
            for args in [vec![], vec![Val::Int(1); 3], vec![l(&["a"]); f.arity()]] {
                if let Ok(a) = apply(f, args.clone(), PLENTY) {
                    // `concat`, `sort`... take lists: a list of lists fits.
                    assert!(
                        f.params
                            .iter()
                            .all(|p| p.accepts(converge_format::bundle::verify::Ty::List)),
                        "{} accepted {args:?}: {a:?}",
                        f.name
                    );
                }
            }
        }
    }

    /// A result larger than the budget left is refused before it is built.
    #[test]
    fn results_past_the_budget_are_refused_before_they_are_built() {
        let commas = s(&",".repeat(1000));
        let f = |name| function(name).unwrap();
        // 1001 empty strings take 1001 string headers.
        assert_eq!(
            apply(f("split"), vec![commas.clone(), s(",")], 1000).map(|a| a.value),
            Err(FuncError::OverBudget)
        );
        assert!(apply(f("split"), vec![commas.clone(), s(",")], 1 << 16).is_ok());
        assert_eq!(
            apply(f("replace"), vec![commas.clone(), s(","), s("xx")], 1999).map(|a| a.value),
            Err(FuncError::OverBudget)
        );
        assert!(apply(f("replace"), vec![commas, s(","), s("xx")], 2000).is_ok());
        assert_eq!(
            apply(f("upper"), vec![s("ßßß")], 5).map(|a| a.value),
            Err(FuncError::OverBudget)
        );
        assert_eq!(
            apply(f("join"), vec![l(&["ab", "cd"]), s("--")], 5).map(|a| a.value),
            Err(FuncError::OverBudget)
        );
        assert_eq!(
            apply(f("concat"), vec![l(&["ab"]), l(&["cd"])], 10).map(|a| a.value),
            Err(FuncError::OverBudget)
        );
    }
}
