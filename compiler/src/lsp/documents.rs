//! Data files and templates open in the editor (LANGUAGE.md sections 10 and
//! 12). They are not policy: the server never parses them as such. Their
//! diagnostics come from checking a policy program that reads them, with
//! the editor's unsaved text in place of the disk's: first every open
//! policy document whose program reads the file; when none does, a policy
//! file found near it ([`find_host`]).
//!
//! Which editor documents are policy is decided by the file name alone
//! ([`is_policy`]): a template may have any name, and a data file is named
//! by its format, so anything not ending in `.policy` is a document.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::analysis::{Analysis, Settings};

/// How many directories [`find_host`] looks in without `--policy-root`: the
/// document's own and its parents, up to this many in all.
pub const HOST_SEARCH_DEPTH: usize = 4;

/// How many policy files [`find_host`] checks at most, so opening a data
/// file in a large directory does not check every policy in it.
pub const HOST_SEARCH_FILES: usize = 16;

/// Whether an editor document is policy source (`*.policy`); anything else
/// (`.toml`, `.json`, `.yaml`, `.yml`, a template) is a document a policy
/// reads.
pub fn is_policy(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "policy")
}

/// A policy program that reads the document at `path`, for a document no
/// open policy reads. The rule: look in the document's directory, then its
/// parents, one directory at a time; in each, check the `*.policy` files in
/// name order and take the first whose program (its imports included)
/// reads the document. The search stops at the policy tree: at
/// `--policy-root` when the document is inside it, else after
/// [`HOST_SEARCH_DEPTH`] directories; it checks at most
/// [`HOST_SEARCH_FILES`] policy files. `None` when nothing is found: the
/// document then shows no diagnostics.
pub fn find_host(
    path: &Path,
    open: &HashMap<PathBuf, String>,
    settings: &Settings,
) -> Option<Analysis> {
    let top = settings
        .policy_root
        .as_deref()
        .filter(|root| path.starts_with(root));
    let mut checked = 0;
    let mut dir = path.parent();
    let mut depth = 0;
    while let Some(current) = dir {
        if top.is_none() && depth >= HOST_SEARCH_DEPTH {
            break;
        }
        for candidate in policy_files(current) {
            if checked >= HOST_SEARCH_FILES {
                return None;
            }
            checked += 1;
            if let Some(analysis) = Analysis::run(&candidate, open, settings) {
                if analysis.file_id(path).is_some() {
                    return Some(analysis);
                }
            }
        }
        if top.is_some_and(|top| current == top) {
            break;
        }
        dir = current.parent();
        depth += 1;
    }
    None
}

/// The `*.policy` files directly in `dir`, by name; test files
/// (`*.test.policy`) are not policy and host nothing.
fn policy_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| is_policy(p) && !crate::testing::is_test_file(p) && p.is_file())
        .collect();
    files.sort();
    files
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    const SITE: &str = "type Site = { port: int };\n\
        let sites: map<string, Site> = data(\"data/sites.yaml\");\n\
        bundle b { file \"/etc/port\" { content = \"${sites[\\\"a\\\"].port ?? 80}\"; } }\n\
        policy { b(); }\n";

    #[test]
    fn only_policy_files_are_parsed_as_policy() {
        assert!(is_policy(Path::new("/p/site.policy")));
        for doc in [
            "sites.yaml",
            "sites.yml",
            "a.toml",
            "a.json",
            "nginx.conf.tmpl",
            "x",
        ] {
            assert!(!is_policy(&Path::new("/p").join(doc)), "{doc}");
        }
    }

    #[test]
    fn the_host_is_the_first_policy_above_that_reads_the_document() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("data")).unwrap();
        // `a.policy` reads nothing; `site.policy` reads the data file.
        std::fs::write(dir.path().join("a.policy"), "class x;\n").unwrap();
        std::fs::write(dir.path().join("site.policy"), SITE).unwrap();
        let yaml = dir.path().join("data/sites.yaml");
        std::fs::write(&yaml, "a:\n  port: 1\n").unwrap();
        let host = find_host(&yaml, &HashMap::new(), &Settings::default()).unwrap();
        assert_eq!(
            host.path(host.root),
            Some(dir.path().join("site.policy").as_path())
        );
    }

    #[test]
    fn no_host_when_no_policy_reads_the_document() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.policy"), "class x;\n").unwrap();
        let yaml = dir.path().join("other.yaml");
        std::fs::write(&yaml, "a: 1\n").unwrap();
        // The temporary directory is the policy root, so that the search
        // never reaches the policy files other programs left in /tmp.
        let settings = Settings {
            policy_root: Some(dir.path().to_path_buf()),
            ..Settings::default()
        };
        assert!(find_host(&yaml, &HashMap::new(), &settings).is_none());
    }

    #[test]
    fn the_search_stops_at_the_policy_root() {
        let dir = tempfile::tempdir().unwrap();
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("data")).unwrap();
        // Above the policy root: never a host.
        std::fs::write(
            dir.path().join("site.policy"),
            SITE.replace("data/", "tree/data/"),
        )
        .unwrap();
        let yaml = tree.join("data/sites.yaml");
        std::fs::write(&yaml, "a:\n  port: 1\n").unwrap();
        let settings = Settings {
            policy_root: Some(tree.clone()),
            ..Settings::default()
        };
        assert!(find_host(&yaml, &HashMap::new(), &settings).is_none());
        let found = find_host(&yaml, &HashMap::new(), &Settings::default());
        assert!(found.is_some(), "without the root, the parent is searched");
    }
}
