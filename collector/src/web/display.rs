//! How values read on a page: ages in words, report values as text, and
//! very long report strings shortened (a hostile host can send a 4 MB
//! promiser; the page shows its start and says how much was left out, the
//! JSON API has all of it). Escaping is not done here: the templates
//! escape every value they print.

use serde_json::Value;

/// The longest report string a page shows whole, in characters.
pub(super) const SHOWN_CHARS: usize = 400;

/// `age_seconds` as a person reads it: `42 s ago`, `5 min ago`,
/// `3 h 5 min ago`, `2 d 4 h ago`, or `never` when there was no report.
pub(super) fn age(age_seconds: Option<i64>) -> String {
    let Some(s) = age_seconds else {
        return "never".to_owned();
    };
    let s = s.max(0);
    let (d, h, m) = (s / 86_400, s % 86_400 / 3_600, s % 3_600 / 60);
    if d > 0 {
        format!("{d} d {h} h ago")
    } else if h > 0 {
        format!("{h} h {m} min ago")
    } else if m > 0 {
        format!("{m} min ago")
    } else {
        format!("{s} s ago")
    }
}

/// `text` whole when it is short, else its first [`SHOWN_CHARS`]
/// characters and how many were left out.
pub(super) fn shorten(text: &str) -> String {
    let total = text.chars().count();
    if total <= SHOWN_CHARS {
        return text.to_owned();
    }
    let start: String = text.chars().take(SHOWN_CHARS).collect();
    format!("{start}… ({} more characters)", total - SHOWN_CHARS)
}

/// A fact's value as text: a string as itself, anything else as compact
/// JSON; shortened.
pub(super) fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => shorten(s),
        Value::Null => "(unknown)".to_owned(),
        other => shorten(&other.to_string()),
    }
}

/// The `(key, value)` pairs of a JSON object, values as text; nothing for
/// anything else (`null`: never reported).
pub(super) fn object_rows(value: &Value) -> Vec<(String, String)> {
    value
        .as_object()
        .map(|map| {
            map.iter()
                .map(|(k, v)| (shorten(k), value_text(v)))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_read_in_the_largest_units() {
        assert_eq!(age(None), "never");
        assert_eq!(age(Some(42)), "42 s ago");
        assert_eq!(age(Some(300)), "5 min ago");
        assert_eq!(age(Some(3 * 3_600 + 5 * 60 + 9)), "3 h 5 min ago");
        assert_eq!(age(Some(2 * 86_400 + 4 * 3_600)), "2 d 4 h ago");
        assert_eq!(age(Some(-5)), "0 s ago");
    }

    #[test]
    fn long_strings_are_shortened_on_a_character_boundary() {
        assert_eq!(shorten("short"), "short");
        let long = "é".repeat(SHOWN_CHARS + 10);
        let shown = shorten(&long);
        assert!(shown.starts_with(&"é".repeat(SHOWN_CHARS)));
        assert!(shown.ends_with("… (10 more characters)"), "{shown}");
    }

    #[test]
    fn values_read_as_text() {
        assert_eq!(value_text(&Value::from("debian")), "debian");
        assert_eq!(value_text(&Value::from(4)), "4");
        assert_eq!(value_text(&serde_json::json!(["a", 1])), r#"["a",1]"#);
        assert_eq!(value_text(&Value::Null), "(unknown)");
        let rows = object_rows(&serde_json::json!({"os": "linux", "cpus": 2}));
        assert_eq!(
            rows,
            vec![("cpus".into(), "2".into()), ("os".into(), "linux".into())]
        );
        assert!(object_rows(&Value::Null).is_empty());
    }
}
