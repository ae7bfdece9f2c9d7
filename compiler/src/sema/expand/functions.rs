//! The built-in functions during expansion (`crate::sema::functions` has
//! their signatures): computed now when the arguments are known, lifted
//! over choices, and left to the VM (`Value::Call`, by the VM's function
//! name) over values only the host knows.

use super::lookups::{assume, kind, map_choice_keyed, text_of, Kind};
use crate::ir::Value;

/// Applies `name` to `args`; `Err` says why it cannot be computed (an
/// argument the host would have to give that the VM cannot use).
pub fn apply(name: &str, mut args: Vec<Value>) -> Result<Value, String> {
    if let Some(at) = args.iter().position(|a| matches!(a, Value::Choice(_))) {
        let Value::Choice(c) = args.remove(at) else {
            return Err("internal: not a choice".to_owned());
        };
        let mut failed = None;
        let v = map_choice_keyed(*c, &mut |on, key, outer, v| {
            let mut with: Vec<Value> = args.iter().map(|a| assume(a, on, key, outer)).collect();
            with.insert(at, v);
            match apply(name, with) {
                Ok(v) => v,
                Err(e) => {
                    failed = Some(e);
                    Value::Str(String::new())
                }
            }
        });
        return failed.map_or(Ok(v), Err);
    }
    if let Some(m) = args.iter().find(|a| matches!(a, Value::Missing(_))) {
        return Ok(m.clone());
    }
    if args.iter().all(Value::is_constant) {
        return constant(name, args);
    }
    host(name, args)
}

fn strings(v: &Value) -> Option<Vec<String>> {
    match v {
        Value::List(items) => items.iter().map(text_of).collect(),
        _ => None,
    }
}

fn constant(name: &str, args: Vec<Value>) -> Result<Value, String> {
    let mut it = args.into_iter();
    let mut next = || it.next().unwrap_or(Value::Str(String::new()));
    let text = |v: Value| text_of(&v).unwrap_or_default();
    Ok(match name {
        "join" => {
            let list = next();
            let sep = text(next());
            let items = strings(&list).unwrap_or_default();
            Value::Str(items.join(&sep))
        }
        "split" => {
            let s = text(next());
            let sep = text(next());
            if sep.is_empty() {
                return Err("`split` needs a separator that is not empty".to_owned());
            }
            Value::List(
                s.split(sep.as_str())
                    .map(|p| Value::Str(p.to_owned()))
                    .collect(),
            )
        }
        "keys" => match next() {
            Value::Map(entries) => {
                let mut keys: Vec<String> = entries.into_iter().map(|(k, _)| k).collect();
                keys.sort();
                Value::List(keys.into_iter().map(Value::Str).collect())
            }
            _ => Value::List(Vec::new()),
        },
        "values" => match next() {
            Value::Map(mut entries) => {
                entries.sort_by(|a, b| a.0.cmp(&b.0));
                Value::List(entries.into_iter().map(|(_, v)| v).collect())
            }
            _ => Value::List(Vec::new()),
        },
        "len" => Value::Int(match next() {
            Value::List(items) => items.len() as i64,
            Value::Map(entries) | Value::Record(entries) => entries.len() as i64,
            other => text(other).chars().count() as i64,
        }),
        "contains" => {
            let hay = next();
            let needle = next();
            Value::Bool(match hay {
                Value::List(items) => {
                    items.contains(&needle) || {
                        // A word and a string with one text are one value here.
                        let t = text_of(&needle);
                        t.is_some() && items.iter().any(|i| text_of(i) == t)
                    }
                }
                Value::Map(entries) => {
                    let key = text(needle);
                    entries.iter().any(|(k, _)| *k == key)
                }
                other => text(other).contains(&text(needle)),
            })
        }
        "upper" => Value::Str(text(next()).to_uppercase()),
        "lower" => Value::Str(text(next()).to_lowercase()),
        "trim" => Value::Str(text(next()).trim().to_owned()),
        "replace" => {
            let s = text(next());
            let from = text(next());
            let to = text(next());
            if from.is_empty() {
                return Err("`replace` needs text to replace that is not empty".to_owned());
            }
            Value::Str(s.replace(&from, &to))
        }
        "concat" => match (next(), next()) {
            (Value::List(mut a), Value::List(b)) => {
                a.extend(b);
                Value::List(a)
            }
            _ => Value::List(Vec::new()),
        },
        "merge" => match (next(), next()) {
            (Value::Map(a), Value::Map(b)) => {
                let mut out: Vec<(String, Value)> = a
                    .into_iter()
                    .filter(|(k, _)| !b.iter().any(|(bk, _)| bk == k))
                    .collect();
                out.extend(b);
                out.sort_by(|x, y| x.0.cmp(&y.0));
                Value::Map(out)
            }
            _ => Value::Map(Vec::new()),
        },
        "sort" => match next() {
            Value::List(mut items) => {
                items.sort_by(|a, b| match (a, b) {
                    (Value::Int(x), Value::Int(y)) => x.cmp(y),
                    (Value::Duration(x), Value::Duration(y)) => x.cmp(y),
                    _ => text(a.clone()).cmp(&text(b.clone())),
                });
                Value::List(items)
            }
            other => other,
        },
        "unique" => match next() {
            Value::List(items) => {
                let mut out: Vec<Value> = Vec::with_capacity(items.len());
                for item in items {
                    if !out.contains(&item) {
                        out.push(item);
                    }
                }
                Value::List(out)
            }
            other => other,
        },
        other => return Err(format!("`{other}` cannot be computed here")),
    })
}

/// A call the VM makes: the VM's function for the kinds of the arguments.
fn host(name: &str, args: Vec<Value>) -> Result<Value, String> {
    let kinds: Vec<Kind> = args.iter().map(kind).collect();
    let func: &'static str = match (name, kinds.as_slice()) {
        ("join", _) => "join",
        ("split", _) => "split",
        ("len", [Kind::List]) => "len_list",
        ("len", [Kind::Str]) => "len_str",
        ("contains", [Kind::List, _]) => "contains_list",
        ("contains", [Kind::Str, _]) => "contains_str",
        // `contains(map, key)` with a key only the host knows: whether
        // the key is one of the map's keys.
        ("contains", [Kind::Other, _]) => {
            let mut args = args;
            let key = args.pop().unwrap_or(Value::Str(String::new()));
            let keys = match args.pop() {
                Some(Value::Map(entries)) => {
                    entries.into_iter().map(|(k, _)| Value::Str(k)).collect()
                }
                _ => Vec::new(),
            };
            return Ok(Value::call("contains_list", vec![Value::List(keys), key]));
        }
        ("upper", _) => "upper",
        ("lower", _) => "lower",
        ("trim", _) => "trim",
        ("replace", _) => "replace",
        ("concat", _) => "concat",
        ("sort", _) => "sort",
        ("unique", _) => "unique",
        _ => {
            return Err(format!(
                "`{name}` of a value only the host knows cannot be computed on the host"
            ))
        }
    };
    // The VM's lists hold strings: a compile-time list argument must be
    // one of strings.
    for a in &args {
        if let Value::List(items) = a {
            if strings(&Value::List(items.clone())).is_none()
                || items
                    .iter()
                    .any(|i| !matches!(i, Value::Str(_) | Value::Word(_)))
            {
                return Err(format!("`{name}` on the host takes lists of strings only"));
            }
        }
    }
    Ok(Value::call(func, args))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: &str) -> Value {
        Value::Str(t.to_owned())
    }

    fn list(items: &[&str]) -> Value {
        Value::List(items.iter().map(|t| s(t)).collect())
    }

    #[test]
    fn constant_functions_follow_the_decided_points() {
        assert_eq!(
            apply("split", vec![s("a,,b"), s(",")]),
            Ok(list(&["a", "", "b"]))
        );
        assert_eq!(
            apply("unique", vec![list(&["b", "a", "b", "c", "a"])]),
            Ok(list(&["b", "a", "c"]))
        );
        assert_eq!(apply("join", vec![list(&["a", "b"]), s(" ")]), Ok(s("a b")));
        let map = Value::Map(vec![
            ("b".into(), Value::Int(2)),
            ("a".into(), Value::Int(1)),
        ]);
        assert_eq!(apply("keys", vec![map.clone()]), Ok(list(&["a", "b"])));
        assert_eq!(
            apply("values", vec![map.clone()]),
            Ok(Value::List(vec![Value::Int(1), Value::Int(2)]))
        );
        assert_eq!(apply("contains", vec![map, s("a")]), Ok(Value::Bool(true)));
        assert_eq!(apply("len", vec![s("héllo")]), Ok(Value::Int(5)));
        assert_eq!(
            apply("replace", vec![s("a.b.c"), s("."), s("_")]),
            Ok(s("a_b_c"))
        );
        let right_wins = apply(
            "merge",
            vec![
                Value::Map(vec![
                    ("a".into(), Value::Int(1)),
                    ("b".into(), Value::Int(1)),
                ]),
                Value::Map(vec![("b".into(), Value::Int(2))]),
            ],
        );
        assert_eq!(
            right_wins,
            Ok(Value::Map(vec![
                ("a".into(), Value::Int(1)),
                ("b".into(), Value::Int(2))
            ]))
        );
    }

    #[test]
    fn host_values_become_vm_calls() {
        let host = Value::Fact("sys.hostname".into());
        assert_eq!(
            apply("upper", vec![host.clone()]),
            Ok(Value::call("upper", vec![host.clone()]))
        );
        assert_eq!(
            apply("len", vec![Value::Fact("sys.ipv4".into())]),
            Ok(Value::call(
                "len_list",
                vec![Value::Fact("sys.ipv4".into())]
            ))
        );
        assert!(apply("keys", vec![host]).is_err());
    }
}
