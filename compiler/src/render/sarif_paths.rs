//! Where SARIF says a file is. GitHub code scanning matches a result to a
//! file of the repository only by a path relative to the checkout, so every
//! file under the SARIF root (`--sarif-root`, by default the top of the git
//! work tree) is a relative URI with `uriBaseId: "%SRCROOT%"`. A file outside
//! the root keeps its absolute path, as a `file://` URI without a base (no
//! `../` ever climbs out of the root). The embedded standard library is not
//! on disk: its files are relative to `%STDLIB%`.

use std::path::{Component, Path, PathBuf};

use serde_json::{json, Value};

/// The base of every file of the repository.
pub const SRCROOT: &str = "%SRCROOT%";
/// The base of the embedded standard library's files.
pub const STDLIB: &str = "%STDLIB%";

/// Resolves the names files have in diagnostics against the directory
/// `policyc` runs in and the SARIF root.
#[derive(Debug, Clone)]
pub struct SarifRoot {
    cwd: PathBuf,
    root: PathBuf,
}

impl SarifRoot {
    /// `root` (relative to `cwd`), or the git top level above `cwd`, or
    /// `cwd` itself.
    pub fn new(cwd: &Path, root: Option<&Path>) -> Self {
        let cwd = normalize(cwd);
        let root = match root {
            Some(dir) => normalize(&cwd.join(dir)),
            None => git_top_level(&cwd).unwrap_or_else(|| cwd.clone()),
        };
        SarifRoot { cwd, root }
    }

    /// The SARIF root in use.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `run.originalUriBaseIds`: where `%SRCROOT%` and `%STDLIB%` are.
    pub fn base_ids(&self) -> Value {
        json!({
            SRCROOT: {
                "uri": directory_uri(&self.root),
                "description": { "text": "The root of the repository (`policyc check --sarif-root`)." },
            },
            STDLIB: {
                "uri": format!("{}/stdlib/", env!("CARGO_PKG_REPOSITORY")),
                "description": { "text": "The standard library embedded in policyc (`import \"std/...\"`)." },
            },
        })
    }

    /// The `artifactLocation` of a file named `name` in diagnostics.
    /// `stdlib` says the file is the embedded standard library's.
    pub fn artifact(&self, name: &str, stdlib: bool) -> Value {
        if stdlib {
            return json!({ "uri": relative_uri(Path::new(name)), "uriBaseId": STDLIB });
        }
        let path = normalize(&self.cwd.join(name));
        match self.relative(&path) {
            Some(relative) => json!({ "uri": relative_uri(&relative), "uriBaseId": SRCROOT }),
            None => json!({ "uri": file_uri(&path) }),
        }
    }

    /// `path` relative to the root, if it is under it: compared as written,
    /// then with symbolic links resolved (`/tmp` may be a link).
    fn relative(&self, path: &Path) -> Option<PathBuf> {
        if let Ok(rest) = path.strip_prefix(&self.root) {
            return Some(rest.to_path_buf());
        }
        let real_path = path.canonicalize().ok()?;
        let real_root = self.root.canonicalize().ok()?;
        real_path
            .strip_prefix(real_root)
            .ok()
            .map(Path::to_path_buf)
    }
}

/// The nearest directory at or above `dir` that holds `.git` (a directory,
/// or the file a linked work tree or submodule has).
pub fn git_top_level(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

/// `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// A relative URI reference: the path's components percent-encoded and
/// joined with `/`.
fn relative_uri(path: &Path) -> String {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(part) => Some(escape(&part.to_string_lossy())),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// `file:///abs/path` for an absolute path.
fn file_uri(path: &Path) -> String {
    format!("file:///{}", relative_uri(path))
}

/// `file:///abs/dir/`: a base URI must end with a slash.
fn directory_uri(path: &Path) -> String {
    let uri = file_uri(path);
    if uri.ends_with('/') {
        uri
    } else {
        format!("{uri}/")
    }
}

/// Every byte that is not unreserved in a URI (RFC 3986) percent-encoded.
fn escape(part: &str) -> String {
    let mut out = String::with_capacity(part.len());
    for byte in part.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> SarifRoot {
        SarifRoot::new(Path::new("/repo/sub"), Some(Path::new("..")))
    }

    #[test]
    fn files_under_the_root_are_relative_to_srcroot() {
        assert_eq!(
            root().artifact("site.policy", false),
            json!({ "uri": "sub/site.policy", "uriBaseId": "%SRCROOT%" })
        );
        assert_eq!(
            root().artifact("../x.policy", false),
            json!({ "uri": "x.policy", "uriBaseId": "%SRCROOT%" })
        );
        assert_eq!(
            root().artifact("/repo/my dir/é.policy", false),
            json!({ "uri": "my%20dir/%C3%A9.policy", "uriBaseId": "%SRCROOT%" })
        );
    }

    #[test]
    fn files_outside_the_root_stay_absolute_file_uris() {
        assert_eq!(
            root().artifact("/tmp/a b.policy", false),
            json!({ "uri": "file:///tmp/a%20b.policy" })
        );
        assert_eq!(
            root().artifact("../../etc/x.policy", false),
            json!({ "uri": "file:///etc/x.policy" })
        );
    }

    #[test]
    fn stdlib_files_are_relative_to_stdlib() {
        assert_eq!(
            root().artifact("std/files.policy", true),
            json!({ "uri": "std/files.policy", "uriBaseId": "%STDLIB%" })
        );
    }

    #[test]
    fn the_default_root_is_the_git_top_level() {
        let dir = tempfile::tempdir().unwrap();
        let top = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(top.join("a/b")).unwrap();
        // A linked work tree has a `.git` file, not a directory.
        std::fs::write(top.join(".git"), "gitdir: elsewhere\n").unwrap();
        let sarif = SarifRoot::new(&top.join("a/b"), None);
        assert_eq!(sarif.root(), top);
        assert_eq!(
            sarif.artifact("../c.policy", false),
            json!({ "uri": "a/c.policy", "uriBaseId": "%SRCROOT%" })
        );
        let no_git = tempfile::tempdir().unwrap();
        let here = no_git.path().canonicalize().unwrap();
        if git_top_level(&here).is_none() {
            assert_eq!(SarifRoot::new(&here, None).root(), here);
        }
    }

    #[test]
    fn base_ids_are_directory_uris() {
        let ids = root().base_ids();
        assert_eq!(ids[SRCROOT]["uri"], "file:///repo/");
        assert!(ids[STDLIB]["uri"].as_str().unwrap().ends_with('/'));
    }
}
