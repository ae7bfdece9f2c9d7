//! The globs of a `watch` promise's `exclude` (LANGUAGE.md section 15) and
//! of an `unmanaged` promise's `ignore` (section 17, [`NameGlobs`]): one
//! grammar for the compiler, which refuses a bad glob at its
//! file:line:col, and the VM, which matches entries with it.
//!
//! A glob without `/` matches an entry's name at any depth (`*.log`); a
//! glob with `/` matches the entry's path below the watched directory
//! (`cache/**`, `var/*.tmp`), as `.gitignore` does. `*` and `?` never
//! cross a `/`; `**` does. Matching is on the bytes of the name, so a name
//! that is not UTF-8 is matched too.

use globset::{GlobBuilder, GlobMatcher};

/// The most globs one promise may list.
pub const MAX_GLOBS: usize = 256;

/// The longest glob, in bytes.
pub const MAX_GLOB_LEN: usize = 1024;

/// One compiled glob.
#[derive(Clone, Debug)]
struct Glob {
    matcher: GlobMatcher,
    /// Whether it names a path below the watched directory (has a `/`),
    /// or a name at any depth.
    by_path: bool,
}

/// The compiled `exclude` list of a promise.
#[derive(Clone, Debug, Default)]
pub struct Excludes {
    globs: Vec<Glob>,
}

/// Why a glob is refused: what is wrong with it.
pub fn glob_problem(glob: &str) -> Option<String> {
    compile_one(glob).err()
}

fn compile_one(glob: &str) -> Result<Glob, String> {
    if glob.is_empty() {
        return Err("an empty glob matches nothing".into());
    }
    if glob.len() > MAX_GLOB_LEN {
        return Err(format!("it is longer than {MAX_GLOB_LEN} bytes"));
    }
    if glob.starts_with('/') {
        return Err(
            "it starts with `/`; a glob names entries below the watched directory (`cache/**`)"
                .into(),
        );
    }
    if glob.contains('\0') {
        return Err("it contains a NUL byte".into());
    }
    let by_path = glob.contains('/');
    let matcher = GlobBuilder::new(glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| e.kind().to_string())?
        .compile_matcher();
    Ok(Glob { matcher, by_path })
}

impl Excludes {
    /// Compiles `globs`; the first bad one is refused with its index.
    pub fn new(globs: &[String]) -> Result<Excludes, (usize, String)> {
        if globs.len() > MAX_GLOBS {
            return Err((MAX_GLOBS, format!("more than {MAX_GLOBS} globs")));
        }
        let globs = globs
            .iter()
            .enumerate()
            .map(|(i, g)| compile_one(g).map_err(|e| (i, e)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Excludes { globs })
    }

    /// Whether nothing is excluded.
    pub fn is_empty(&self) -> bool {
        self.globs.is_empty()
    }

    /// Whether the entry whose path below the watched directory is
    /// `relative` (no leading `/`) and whose name is `name` is excluded.
    pub fn excludes(&self, relative: &[u8], name: &[u8]) -> bool {
        self.globs.iter().any(|g| {
            let subject = if g.by_path { relative } else { name };
            g.matcher.is_match(bytes_path(subject))
        })
    }
}

/// Why `glob` cannot be an `ignore` glob of an `unmanaged` promise, which
/// matches whole names (of packages, services, accounts), never paths: the
/// grammar of [`glob_problem`], and no `/` (no name has one).
pub fn name_glob_problem(glob: &str) -> Option<String> {
    if glob.contains('/') {
        return Some(
            "it contains `/`, which no package, service or account name has; a glob here matches a whole name (`linux-image-*`)"
                .into(),
        );
    }
    glob_problem(glob)
}

/// The compiled `ignore` list of an `unmanaged` promise: globs over whole
/// names.
#[derive(Clone, Debug, Default)]
pub struct NameGlobs {
    globs: Excludes,
}

impl NameGlobs {
    /// Compiles `globs`; the first bad one is refused with its index.
    pub fn new(globs: &[String]) -> Result<NameGlobs, (usize, String)> {
        if let Some((i, why)) = globs
            .iter()
            .enumerate()
            .find_map(|(i, g)| name_glob_problem(g).map(|why| (i, why)))
        {
            return Err((i, why));
        }
        Excludes::new(globs).map(|globs| NameGlobs { globs })
    }

    /// Whether some glob matches the whole of `name`.
    pub fn matches(&self, name: &str) -> bool {
        self.globs.excludes(name.as_bytes(), name.as_bytes())
    }
}

/// Bytes as a path for the matcher (which matches on raw bytes on Unix).
fn bytes_path(bytes: &[u8]) -> &std::path::Path {
    use std::os::unix::ffi::OsStrExt as _;
    std::path::Path::new(std::ffi::OsStr::from_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn excludes(globs: &[&str]) -> Excludes {
        let globs: Vec<String> = globs.iter().map(|g| (*g).to_owned()).collect();
        Excludes::new(&globs).unwrap_or_default()
    }

    #[test]
    fn a_glob_without_a_slash_matches_names_at_any_depth() {
        let e = excludes(&["*.log"]);
        assert!(e.excludes(b"a.log", b"a.log"));
        assert!(e.excludes(b"deep/er/b.log", b"b.log"));
        assert!(!e.excludes(b"a.log.d/x", b"x"));
    }

    #[test]
    fn a_glob_with_a_slash_matches_paths_below_the_top() {
        let e = excludes(&["cache/**", "var/*.tmp"]);
        assert!(e.excludes(b"cache/a/b", b"b"));
        assert!(e.excludes(b"var/x.tmp", b"x.tmp"));
        assert!(!e.excludes(b"var/sub/x.tmp", b"x.tmp"));
        assert!(!e.excludes(b"other/cache/a", b"a"));
    }

    #[test]
    fn names_that_are_not_utf8_are_matched() {
        let e = excludes(&["*.bin"]);
        assert!(e.excludes(b"\xff.bin", b"\xff.bin"));
    }

    #[test]
    fn name_globs_match_whole_names_and_refuse_slashes() {
        let globs = vec!["linux-image-*".to_owned(), "converge-?".to_owned()];
        let n = NameGlobs::new(&globs).unwrap_or_default();
        assert!(n.matches("linux-image-6.1.0-13-amd64"));
        assert!(n.matches("converge-a"));
        assert!(!n.matches("converge-ab"));
        assert!(!n.matches("xlinux-image-1"));
        assert!(name_glob_problem("a/b").is_some());
        assert!(name_glob_problem("[x").is_some());
        assert!(name_glob_problem("web-*").is_none());
        let bad = vec!["ok".to_owned(), "x/*".to_owned()];
        assert!(matches!(NameGlobs::new(&bad), Err((1, _))));
    }

    #[test]
    fn bad_globs_are_refused_with_a_reason() {
        assert!(glob_problem("[a-").is_some());
        assert!(glob_problem("").is_some());
        assert!(glob_problem("/etc/*").is_some());
        assert!(glob_problem("{a,b").is_some());
        assert!(glob_problem("*.log").is_none());
        let globs = vec!["ok".to_owned(), "[".to_owned()];
        assert!(matches!(Excludes::new(&globs), Err((1, _))));
    }
}
