//! "Did you mean" suggestions for unknown names.

/// The candidate closest to `name`, if it is close enough to be a plausible
/// typo: a Damerau-Levenshtein distance of at most a third of the longer
/// name (at least 1), or a case-insensitive match.
pub fn did_you_mean<'a, I>(name: &str, candidates: I) -> Option<String>
where
    I: IntoIterator<Item = &'a str>,
{
    let limit = (name.chars().count() / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    for candidate in candidates {
        if candidate == name {
            continue;
        }
        let distance = if candidate.eq_ignore_ascii_case(name) {
            0
        } else {
            strsim::damerau_levenshtein(name, candidate)
        };
        let allowed = limit.max(candidate.chars().count() / 3);
        if distance <= allowed && best.is_none_or(|(d, c)| (distance, candidate) < (d, c)) {
            best = Some((distance, candidate));
        }
    }
    best.map(|(_, c)| c.to_owned())
}

/// `a`, `a` or `b`, `a`, `b` or `c`: for listing a small set of choices.
pub fn one_of(choices: &[&str]) -> String {
    let quoted: Vec<String> = choices.iter().map(|c| format!("`{c}`")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_names_are_suggested() {
        let names = ["webserver", "database", "base"];
        assert_eq!(did_you_mean("webservr", names), Some("webserver".into()));
        assert_eq!(did_you_mean("bsae", names), Some("base".into()));
        assert_eq!(did_you_mean("Base", names), Some("base".into()));
        assert_eq!(did_you_mean("frobnicate", names), None);
        assert_eq!(
            did_you_mean("base", names),
            None,
            "an exact match is not a suggestion"
        );
    }

    #[test]
    fn choices() {
        assert_eq!(one_of(&["a"]), "`a`");
        assert_eq!(one_of(&["a", "b", "c"]), "`a`, `b` or `c`");
    }
}
