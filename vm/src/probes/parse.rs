//! What a probe printed (or its fact file holds), parsed as the declared
//! type and nothing else (THREATS.md T32): scalars are the whole text
//! trimmed, a `list<string>` is one item per line, maps and records are
//! JSON. Anything that does not fit is refused with the reason; no value
//! is guessed or defaulted.

use std::collections::BTreeMap;

use crate::bundle::probe::ProbeType;

/// A probe fact's value. A record is a map whose keys are exactly its
/// fields (checked when parsed), so one shape serves both.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProbeValue {
    Str(String),
    Int(i64),
    Bool(bool),
    List(Vec<String>),
    Map(BTreeMap<String, ProbeValue>),
}

impl ProbeValue {
    /// The value at `path` (fields and keys), or why there is none.
    pub fn at(&self, path: &[&str]) -> Result<&ProbeValue, String> {
        let mut value = self;
        for key in path {
            value = match value {
                ProbeValue::Map(entries) => entries
                    .get(*key)
                    .ok_or_else(|| format!("it has no key {key:?}"))?,
                _ => return Err(format!("{key:?} is read from a value without keys")),
            };
        }
        Ok(value)
    }

    /// As JSON, for the run report.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            ProbeValue::Str(s) => serde_json::Value::from(s.as_str()),
            ProbeValue::Int(i) => serde_json::Value::from(*i),
            ProbeValue::Bool(b) => serde_json::Value::from(*b),
            ProbeValue::List(items) => serde_json::Value::from(items.clone()),
            ProbeValue::Map(entries) => serde_json::Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

/// Parses `text` as a value of type `ty`.
pub fn parse(ty: &ProbeType, text: &str) -> Result<ProbeValue, String> {
    match ty {
        ProbeType::Str => Ok(ProbeValue::Str(text.trim().to_owned())),
        ProbeType::Int => {
            let t = text.trim();
            t.parse::<i64>()
                .map(ProbeValue::Int)
                .map_err(|_| format!("expected an int, got {}", shown(t)))
        }
        ProbeType::Bool => match text.trim() {
            "true" => Ok(ProbeValue::Bool(true)),
            "false" => Ok(ProbeValue::Bool(false)),
            other => Err(format!("expected `true` or `false`, got {}", shown(other))),
        },
        ProbeType::List => Ok(ProbeValue::List(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_owned)
                .collect(),
        )),
        ProbeType::Map(_) | ProbeType::Record(_) => {
            let json: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("expected JSON for a {ty}: {e}"))?;
            from_json(ty, &json, "")
        }
    }
}

/// A JSON value as type `ty`; `at` is where it is, for messages (`.hw`).
fn from_json(ty: &ProbeType, json: &serde_json::Value, at: &str) -> Result<ProbeValue, String> {
    use serde_json::Value as J;
    let wrong = |what: &str| {
        let place = if at.is_empty() {
            String::new()
        } else {
            format!(" at `{at}`")
        };
        Err(format!("expected {what}{place}, got {}", kind(json)))
    };
    match (ty, json) {
        (ProbeType::Str, J::String(s)) => Ok(ProbeValue::Str(s.clone())),
        (ProbeType::Str, _) => wrong("a string"),
        (ProbeType::Int, J::Number(n)) => match n.as_i64() {
            Some(i) => Ok(ProbeValue::Int(i)),
            None => wrong("an int"),
        },
        (ProbeType::Int, _) => wrong("an int"),
        (ProbeType::Bool, J::Bool(b)) => Ok(ProbeValue::Bool(*b)),
        (ProbeType::Bool, _) => wrong("a bool"),
        (ProbeType::List, J::Array(items)) => items
            .iter()
            .map(|i| match i {
                J::String(s) => Ok(s.clone()),
                _ => Err(()),
            })
            .collect::<Result<Vec<_>, ()>>()
            .map(ProbeValue::List)
            .or_else(|()| wrong("a list of strings")),
        (ProbeType::List, _) => wrong("a list of strings"),
        (ProbeType::Map(inner), J::Object(entries)) => {
            let mut out = BTreeMap::new();
            for (k, v) in entries {
                out.insert(k.clone(), from_json(inner, v, &format!("{at}.{k}"))?);
            }
            Ok(ProbeValue::Map(out))
        }
        (ProbeType::Record(fields), J::Object(entries)) => {
            if let Some(extra) = entries
                .keys()
                .find(|k| !fields.iter().any(|(f, _)| f == *k))
            {
                return Err(format!("unknown field `{at}.{extra}`"));
            }
            let mut out = BTreeMap::new();
            for (name, fty) in fields {
                let value = entries
                    .get(name)
                    .ok_or_else(|| format!("missing field `{at}.{name}`"))?;
                out.insert(
                    name.clone(),
                    from_json(fty, value, &format!("{at}.{name}"))?,
                );
            }
            Ok(ProbeValue::Map(out))
        }
        (ProbeType::Map(_) | ProbeType::Record(_), _) => wrong("an object"),
    }
}

fn kind(json: &serde_json::Value) -> &'static str {
    match json {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a bool",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A short quotation of what was printed, for a reason.
fn shown(text: &str) -> String {
    let cut: String = text.chars().take(40).collect();
    if cut.len() < text.len() {
        format!("{cut:?}...")
    } else {
        format!("{cut:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ty(text: &str) -> ProbeType {
        ProbeType::parse(text).unwrap()
    }

    #[test]
    fn scalars_are_the_trimmed_text() {
        assert_eq!(
            parse(&ty("string"), "  eu-west-1\n"),
            Ok(ProbeValue::Str("eu-west-1".into()))
        );
        assert_eq!(parse(&ty("int"), "42\n"), Ok(ProbeValue::Int(42)));
        assert_eq!(parse(&ty("int"), "-7"), Ok(ProbeValue::Int(-7)));
        assert_eq!(parse(&ty("bool"), "true\n"), Ok(ProbeValue::Bool(true)));
        assert_eq!(parse(&ty("bool"), "false"), Ok(ProbeValue::Bool(false)));
    }

    #[test]
    fn lists_are_one_item_per_line_blank_lines_skipped() {
        assert_eq!(
            parse(&ty("list<string>"), "a\n b \n\nc\r\n"),
            Ok(ProbeValue::List(vec!["a".into(), "b".into(), "c".into()]))
        );
        assert_eq!(parse(&ty("list<string>"), ""), Ok(ProbeValue::List(vec![])));
    }

    #[test]
    fn maps_and_records_are_json_of_exactly_their_type() {
        let hw = ty("{cpus:int,tags:map<string>,ips:list<string>}");
        let v = parse(
            &hw,
            r#"{"cpus": 8, "tags": {"role": "db"}, "ips": ["10.0.0.1"]}"#,
        )
        .unwrap();
        assert_eq!(v.at(&["cpus"]), Ok(&ProbeValue::Int(8)));
        assert_eq!(v.at(&["tags", "role"]), Ok(&ProbeValue::Str("db".into())));
        assert!(v
            .at(&["tags", "zone"])
            .unwrap_err()
            .contains("no key \"zone\""));
        assert_eq!(
            v.to_json(),
            serde_json::json!({"cpus": 8, "tags": {"role": "db"}, "ips": ["10.0.0.1"]})
        );
        let m = parse(&ty("map<int>"), r#"{"a": 1, "b": 2}"#).unwrap();
        assert_eq!(m.at(&["b"]), Ok(&ProbeValue::Int(2)));
    }

    #[test]
    fn output_of_another_type_is_refused_with_the_reason() {
        let hw = ty("{cpus:int,tags:map<string>}");
        for (t, text, why) in [
            (ty("int"), "eight", "expected an int, got \"eight\""),
            (ty("int"), "99999999999999999999", "expected an int"),
            (ty("bool"), "yes", "expected `true` or `false`, got \"yes\""),
            (hw.clone(), "cpus=8", "expected JSON"),
            (
                hw.clone(),
                r#"{"cpus": "8", "tags": {}}"#,
                "expected an int at `.cpus`, got a string",
            ),
            (hw.clone(), r#"{"cpus": 8}"#, "missing field `.tags`"),
            (
                hw.clone(),
                r#"{"cpus": 8, "tags": {}, "x": 1}"#,
                "unknown field `.x`",
            ),
            (
                hw.clone(),
                r#"{"cpus": 8, "tags": {"a": 1}}"#,
                "expected a string at `.tags.a`, got a number",
            ),
            (hw, "[]", "expected an object, got a list"),
            (
                ty("map<list<string>>"),
                r#"{"a": [1]}"#,
                "expected a list of strings at `.a`",
            ),
            (ty("map<int>"), r#"{"a": 1.5}"#, "expected an int at `.a`"),
        ] {
            let err = parse(&t, text).unwrap_err();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
