//! The policy tree: the one directory every file the compiler reads must
//! stay inside (LANGUAGE.md §10, last rule).
//!
//! A policy change is untrusted input to the build machine: before this
//! rule, `source = "../../keys/hub.key"` embedded the signing key into a
//! signed bundle, and `import "/etc/shadow"` printed its lines as syntax
//! errors. The tree is the directory of the root policy file, or the one
//! given with `--policy-root`. A path that is absolute, that `..` takes out
//! of the tree, or that resolves (through any symbolic link, inside the tree
//! or not) to a place outside it is refused before a byte of it is read;
//! the error names the path, never the content.
//!
//! Containment is checked twice: lexically (so an editor buffer that exists
//! only in memory obeys the rule too) and on the canonical path (so links
//! are followed to where they really lead). The file is then opened by its
//! canonical path without following a final link and without blocking (a
//! FIFO planted in the tree cannot hang the build), and must be a regular
//! file of bounded size.

use std::fmt;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Component, Path, PathBuf};

/// Why a path may not be read.
#[derive(Debug)]
pub enum TreeError {
    /// The path is absolute.
    Absolute,
    /// `..` takes the path out of the tree.
    Leaves,
    /// The path is in the tree by name, but a symbolic link takes it out.
    LinkLeaves,
    /// A directory, FIFO, socket or device.
    NotRegular,
    /// Larger than the limit given.
    TooLarge { limit: usize },
    /// Missing, unreadable, or a link at the last step.
    Io(std::io::Error),
}

impl TreeError {
    /// Whether this is a containment violation (as opposed to a file that
    /// is simply missing or unreadable).
    pub fn is_escape(&self) -> bool {
        matches!(
            self,
            TreeError::Absolute | TreeError::Leaves | TreeError::LinkLeaves
        )
    }
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::Absolute => write!(f, "an absolute path is outside the policy tree"),
            TreeError::Leaves => write!(f, "`..` leads out of the policy tree"),
            TreeError::LinkLeaves => {
                write!(f, "a symbolic link leads out of the policy tree")
            }
            TreeError::NotRegular => write!(f, "not a regular file"),
            TreeError::TooLarge { limit } => write!(f, "larger than {limit} bytes"),
            TreeError::Io(err) => write!(f, "{err}"),
        }
    }
}

/// A directory that bounds what the compiler reads.
#[derive(Clone, Debug)]
pub struct PolicyTree {
    /// As the user named it (for messages).
    shown: PathBuf,
    /// Absolute and lexically normalised.
    lexical: PathBuf,
    /// With every link resolved, when the directory exists on disk.
    canonical: Option<PathBuf>,
}

impl PolicyTree {
    /// The tree rooted at `dir` (which need not exist: editor buffers and
    /// tests live in memory).
    pub fn new(dir: &Path) -> PolicyTree {
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        PolicyTree {
            shown: dir.to_path_buf(),
            lexical: absolute(dir),
            canonical: std::fs::canonicalize(dir).ok(),
        }
    }

    /// The tree of a root file named without `--policy-root`: its directory.
    pub fn of_file(file: &Path) -> PolicyTree {
        PolicyTree::new(file.parent().unwrap_or(Path::new(".")))
    }

    /// The directory, as the user named it.
    pub fn root(&self) -> &Path {
        &self.shown
    }

    /// The path `request`, written in the file at `from`, names: refused if
    /// absolute or if `..` leaves the tree. The result is lexically
    /// normalised and relative to the same place `from` is.
    pub fn resolve(&self, from: &Path, request: &str) -> Result<PathBuf, TreeError> {
        if Path::new(request).has_root() {
            return Err(TreeError::Absolute);
        }
        let base = from.parent().unwrap_or(Path::new(""));
        let path = normalize(&base.join(request));
        self.check(&path)?;
        Ok(path)
    }

    /// Checks that `path` lies inside the tree, by name and after resolving
    /// links. A path that does not exist (yet) is only checked by name.
    pub fn check(&self, path: &Path) -> Result<(), TreeError> {
        if !absolute(path).starts_with(&self.lexical) {
            return Err(TreeError::Leaves);
        }
        if let (Some(root), Ok(real)) = (&self.canonical, std::fs::canonicalize(path)) {
            if !real.starts_with(root) {
                return Err(TreeError::LinkLeaves);
            }
        }
        Ok(())
    }

    /// Reads a file inside the tree: containment checked, opened by its
    /// canonical path without following a last link or blocking, a regular
    /// file, at most `limit` bytes.
    pub fn read(&self, path: &Path, limit: usize) -> Result<Vec<u8>, TreeError> {
        let file = self.open(path)?;
        let mut bytes = Vec::new();
        file.take(limit as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(TreeError::Io)?;
        if bytes.len() > limit {
            return Err(TreeError::TooLarge { limit });
        }
        Ok(bytes)
    }

    /// Opens a regular file inside the tree for streaming (a file stored
    /// as a blob, issue 22 item 5), with the checks of [`PolicyTree::read`].
    pub fn open(&self, path: &Path) -> Result<std::fs::File, TreeError> {
        self.check(path)?;
        let real = std::fs::canonicalize(path).map_err(TreeError::Io)?;
        let flags = rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::NONBLOCK;
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(flags.bits() as i32)
            .open(&real)
            .map_err(TreeError::Io)?;
        let meta = file.metadata().map_err(TreeError::Io)?;
        if !meta.is_file() {
            return Err(TreeError::NotRegular);
        }
        Ok(file)
    }
}

/// `path` made absolute against the working directory, lexically
/// normalised (no `.`, `..` resolved by name).
fn absolute(path: &Path) -> PathBuf {
    if path.has_root() {
        normalize(path)
    } else {
        let cwd = std::env::current_dir().unwrap_or_default();
        normalize(&cwd.join(path))
    }
}

/// Removes `.` and resolves `..` lexically (without touching the disk).
/// A `..` that would climb above the start of a relative path is kept.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                let climbable = matches!(out.components().next_back(), Some(Component::Normal(_)));
                if climbable {
                    out.pop();
                } else if !out.has_root() {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexical_rules() {
        let tree = PolicyTree::new(Path::new("/srv/policy"));
        let from = Path::new("/srv/policy/site.policy");
        assert!(tree.resolve(from, "lib/x.policy").is_ok());
        assert!(tree.resolve(from, "lib/../x.policy").is_ok());
        assert!(matches!(
            tree.resolve(from, "../x.policy"),
            Err(TreeError::Leaves)
        ));
        assert!(matches!(
            tree.resolve(from, "lib/../../x"),
            Err(TreeError::Leaves)
        ));
        assert!(matches!(
            tree.resolve(from, "/etc/shadow"),
            Err(TreeError::Absolute)
        ));
        // A sibling whose name starts like the tree's is outside it.
        assert!(matches!(
            tree.resolve(from, "../policy2/x"),
            Err(TreeError::Leaves)
        ));
    }

    #[test]
    fn normalize_keeps_leading_parents_of_relative_paths() {
        assert_eq!(normalize(Path::new("a/../../b")), PathBuf::from("../b"));
        assert_eq!(normalize(Path::new("/../b")), PathBuf::from("/b"));
        assert_eq!(normalize(Path::new("./a/./b/..")), PathBuf::from("a"));
    }
}
