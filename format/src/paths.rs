//! The grammar of the paths a policy names, shared by the compiler (which
//! refuses them with E0205) and the VM (which refuses them again).

/// The longest path a promise may name (Linux's `PATH_MAX`).
pub const MAX_PATH: usize = 4096;

/// Why `path` is not a plain policy path, if it is not: it must be
/// absolute, at most [`MAX_PATH`] bytes, without NUL and without `..`, `.` or
/// empty (`//`) components; one trailing `/` is allowed. This one function is
/// the grammar: the compiler refuses the same paths with it (E0205), so only
/// a hand-made bundle reaches the VM with one, and the VM refuses it again.
pub fn path_problem(path: &str) -> Option<&'static str> {
    let Some(rest) = path.strip_prefix('/') else {
        return Some("it is not absolute");
    };
    if path.as_bytes().contains(&0) {
        return Some("it contains a NUL character");
    }
    if path.len() > MAX_PATH {
        return Some("it is longer than 4096 bytes");
    }
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.is_empty() {
        return None;
    }
    // Split as bytes (`/` is one byte in UTF-8): the VM asks this of every
    // path of every file operation, and the `char` splitter cost more than
    // the system calls' own user time (a hand-written one-pass loop was
    // slower still: it branches on every byte).
    rest.as_bytes().split(|b| *b == b'/').find_map(|c| match c {
        b"" => Some("it has an empty component (`//`)"),
        b"." => Some("it has a `.` component"),
        b".." => Some("it has a `..` component"),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The grammar as it reads, component by component, on `str`s: the
    /// byte-wise [`path_problem`] must give the same answer for every string.
    fn by_components(path: &str) -> Option<&'static str> {
        let rest = path.strip_prefix('/')?;
        let rest = rest.strip_suffix('/').unwrap_or(rest);
        if rest.is_empty() {
            return None;
        }
        rest.split('/').find_map(|c| match c {
            "" => Some("it has an empty component (`//`)"),
            "." => Some("it has a `.` component"),
            ".." => Some("it has a `..` component"),
            _ => None,
        })
    }

    #[test]
    fn each_problem_is_named() {
        for (path, problem) in [
            ("/", None),
            ("/etc/motd", None),
            ("/etc/", None),
            ("/a/.b/..c/...", None),
            ("etc", Some("it is not absolute")),
            ("/a//b", Some("it has an empty component (`//`)")),
            ("/a//", Some("it has an empty component (`//`)")),
            ("/a/./b", Some("it has a `.` component")),
            ("/a/..", Some("it has a `..` component")),
            ("/../.", Some("it has a `..` component")),
            ("/a\0", Some("it contains a NUL character")),
        ] {
            assert_eq!(path_problem(path), problem, "{path:?}");
        }
        assert_eq!(
            path_problem(&format!("/{}", "a".repeat(MAX_PATH))),
            Some("it is longer than 4096 bytes")
        );
    }

    proptest! {
        #[test]
        fn bytes_split_as_the_component_grammar(path in "/?[/.a\u{e9}]{0,12}") {
            if path.starts_with('/') {
                prop_assert_eq!(path_problem(&path), by_components(&path));
            } else {
                prop_assert_eq!(path_problem(&path), Some("it is not absolute"));
            }
        }
    }
}
