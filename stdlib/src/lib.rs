//! The Converge standard library: policy source files embedded into the
//! binaries that need them.
//!
//! The standard library is written in the policy language itself and lives
//! in `stdlib/std/*.policy`. A policy imports it with a path that starts with
//! `std/` (`import "std/classes.policy";`). `policyc` resolves those imports
//! against this crate instead of the file system, so:
//!
//! - the compiler binary is self-contained: it needs no install prefix, no
//!   search path and no copy of the stdlib next to it;
//! - the stdlib a policy sees is exactly the one the compiler was built with,
//!   which keeps bundles deterministic across machines.
//!
//! Every file is embedded with [`include_str!`] at build time. A new file in
//! `stdlib/std/` must be added to [`FILES`]; a unit test walks the directory
//! and fails if one is missing.

/// Every standard library file as `(import path, source text)`, sorted by
/// path. The import path is the one a policy writes: `"std/classes.policy"`.
pub const FILES: &[(&str, &str)] = &[
    ("std/classes.policy", include_str!("../std/classes.policy")),
    ("std/files.policy", include_str!("../std/files.policy")),
    (
        "std/packages.policy",
        include_str!("../std/packages.policy"),
    ),
    (
        "std/services.policy",
        include_str!("../std/services.policy"),
    ),
];

/// The source text of the standard library file imported as `path`
/// (`"std/classes.policy"`), or `None` if there is no such file.
///
/// The path must be written exactly as in [`FILES`]: no `./`, no `..`, no
/// leading `/`, forward slashes only.
pub fn source(path: &str) -> Option<&'static str> {
    FILES
        .binary_search_by(|(p, _)| (*p).cmp(path))
        .ok()
        .and_then(|i| FILES.get(i))
        .map(|(_, text)| *text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every file under `stdlib/std` on disk (subdirectories included), as
    /// `std/...` import paths with their contents, sorted.
    fn files_on_disk() -> Vec<(String, String)> {
        fn walk(dir: &Path, prefix: &str, out: &mut Vec<(String, String)>) {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                let import = format!("{prefix}/{name}");
                if path.is_dir() {
                    walk(&path, &import, out);
                } else {
                    out.push((import, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        let mut found = Vec::new();
        walk(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("std"),
            "std",
            &mut found,
        );
        found.sort();
        found
    }

    #[test]
    fn every_file_on_disk_is_embedded() {
        let on_disk = files_on_disk();
        assert!(!on_disk.is_empty(), "stdlib/std is empty");
        for (path, text) in &on_disk {
            assert!(
                path.ends_with(".policy"),
                "{path}: only .policy files belong in stdlib/std"
            );
            assert_eq!(
                source(path),
                Some(text.as_str()),
                "{path} is on disk but not embedded in FILES (stdlib/src/lib.rs), or differs"
            );
        }
        assert_eq!(
            on_disk.len(),
            FILES.len(),
            "FILES lists a file that is not in stdlib/std"
        );
    }

    #[test]
    fn files_are_sorted_and_unique() {
        for pair in FILES.windows(2) {
            if let [(a, _), (b, _)] = pair {
                assert!(a < b, "FILES is not sorted: {a} before {b}");
            }
        }
    }

    #[test]
    fn paths_are_import_paths() {
        for (path, text) in FILES {
            assert!(path.starts_with("std/"), "{path}");
            assert!(path.ends_with(".policy"), "{path}");
            assert!(!path.contains('\\') && !path.contains(".."), "{path}");
            assert!(!text.trim().is_empty(), "{path} is empty");
        }
    }

    #[test]
    fn lookup() {
        assert_eq!(
            source("std/classes.policy"),
            Some(include_str!("../std/classes.policy"))
        );
        assert_eq!(source("std/nope.policy"), None);
        assert_eq!(source("classes.policy"), None);
        assert_eq!(source("./std/classes.policy"), None);
        assert_eq!(source(""), None);
    }
}
