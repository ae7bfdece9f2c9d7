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
    if path.contains('\0') {
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
    // the system calls' own user time.
    rest.as_bytes().split(|b| *b == b'/').find_map(|c| match c {
        b"" => Some("it has an empty component (`//`)"),
        b"." => Some("it has a `.` component"),
        b".." => Some("it has a `..` component"),
        _ => None,
    })
}
