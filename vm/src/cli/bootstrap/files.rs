//! The files `policyvm bootstrap` writes: the hub's key in the trust
//! directory and `agent.toml` (`crate::agent::config`), each written only
//! when it changes, so a second run reports every step as unchanged.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use crate::agent::config::Config;
use crate::bundle::error::hex;
use crate::bundle::keys::{encode_key_file, PublicKey, PUBLIC_TAG};

/// What a step did, for the summary and the idempotency check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    Done,
    Unchanged,
}

/// The settings `agent.toml` gets.
#[derive(Debug)]
pub struct AgentSettings<'a> {
    pub hub: &'a str,
    pub name: &'a str,
    pub trust: &'a Path,
    /// `None` for `/` (the default); a sandbox root otherwise.
    pub root: Option<&'a Path>,
    pub collectors: &'a [String],
    pub ca_file: Option<&'a Path>,
}

/// A TOML basic string. JSON's escapes (`\"`, `\\`, `\n`, `\u0001`) are
/// all TOML escapes too.
fn toml_string(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| "\"\"".to_owned())
}

fn toml_path(path: &Path) -> String {
    toml_string(&path.to_string_lossy())
}

/// The text of `agent.toml` for `settings`, checked by the agent's own
/// parser: what bootstrap writes is what the agent reads.
pub fn agent_toml(s: &AgentSettings<'_>) -> Result<String, String> {
    let mut text = String::from(
        "# Written by `policyvm bootstrap` (docs/operations.md, \"Bringing a new host under\n\
         # management\"); every key is described in docs/operations.md, \"The agent\".\n",
    );
    text.push_str(&format!("hubs = [{}]\n", toml_string(s.hub)));
    text.push_str(&format!("name = {}\n", toml_string(s.name)));
    text.push_str(&format!("trust = {}\n", toml_path(s.trust)));
    if let Some(root) = s.root {
        text.push_str(&format!("root = {}\n", toml_path(root)));
    }
    if let Some(ca) = s.ca_file {
        text.push_str(&format!("ca_file = {}\n", toml_path(ca)));
    }
    if !s.collectors.is_empty() {
        let list: Vec<String> = s.collectors.iter().map(|c| toml_string(c)).collect();
        text.push_str(&format!("collectors = [{}]\n", list.join(", ")));
    }
    Config::parse(&text).map_err(|e| format!("the agent would not accept this setting: {e}"))?;
    Ok(text)
}

/// Whether an existing `agent.toml` sets nothing (only comments and blank
/// lines, like the package's placeholder): bootstrap may replace it.
pub fn sets_nothing(text: &str) -> bool {
    toml::from_str::<toml::Table>(text).is_ok_and(|t| t.is_empty())
}

/// Writes `agent.toml` at `path` (mode 0644, its directory 0755) unless it
/// already says exactly `text`. An existing file that sets something else
/// is refused unless `force`: it is another configuration, maybe made by
/// hand.
pub fn write_agent_toml(path: &Path, text: &str, force: bool) -> Result<Step, String> {
    match std::fs::read(path) {
        Ok(old) if old == text.as_bytes() => return Ok(Step::Unchanged),
        Ok(old) if !force && !sets_nothing(&String::from_utf8_lossy(&old)) => {
            return Err(format!(
                "`{}` already configures this host differently; nothing was changed. Compare \
                 it with what bootstrap would write:\n{text}Pass --force to replace it",
                path.display()
            ))
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot read `{}`: {e}", path.display())),
    }
    write_file(path, text.as_bytes(), 0o644)?;
    Ok(Step::Done)
}

/// The file name of `key` in the trust directory: its id, so keys of
/// several hubs (or a rotation) sit side by side and the same key always
/// lands on the same file.
pub fn key_file_name(key: &PublicKey) -> String {
    format!("hub-{}.pub", hex(&key.id))
}

/// Installs `key` in the trust directory `dir` (0755, created when missing;
/// the key file 0644), unless it is there already.
pub fn install_key(dir: &Path, key: &PublicKey) -> Result<Step, String> {
    let text = encode_key_file("public", PUBLIC_TAG, key.id, &key.key);
    let path = dir.join(key_file_name(key));
    if std::fs::read(&path).is_ok_and(|old| old == text.as_bytes()) {
        return Ok(Step::Unchanged);
    }
    write_file(&path, text.as_bytes(), 0o644)?;
    Ok(Step::Done)
}

/// Writes `path` atomically with `mode`, never through a link planted at
/// its name, creating its directory (0755) when missing.
fn write_file(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let dir = parent(path);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o755)
        .create(&dir)
        .map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // The VM's one atomic write: the mode is set on the new file itself
    // (no umask), then it is renamed over the name.
    crate::state::write_atomically_with_mode(&dir, &name, bytes, mode)
        .map_err(|e| format!("cannot write `{}`: {e}", path.display()))
}

fn parent(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn settings<'a>(trust: &'a Path, collectors: &'a [String]) -> AgentSettings<'a> {
        AgentSettings {
            hub: "http://127.0.0.1:8080/policy",
            name: "site",
            trust,
            root: None,
            collectors,
            ca_file: None,
        }
    }

    #[test]
    fn the_agent_reads_what_bootstrap_writes() {
        let collectors = vec!["https://collector:8470".to_owned()];
        let text = agent_toml(&settings(Path::new("/etc/converge/trusted"), &collectors)).unwrap();
        let config = Config::parse(&text).unwrap();
        assert_eq!(config.hubs, vec!["http://127.0.0.1:8080/policy".to_owned()]);
        assert_eq!(config.trust, PathBuf::from("/etc/converge/trusted"));
        assert_eq!(config.upload.collectors, collectors);
        assert_eq!(config.root, PathBuf::from("/"));
        // A path TOML must escape.
        let odd = Path::new("/srv/a \"b\"\\c");
        let text = agent_toml(&settings(odd, &[])).unwrap();
        assert_eq!(Config::parse(&text).unwrap().trust, odd);
        // A setting the agent refuses is refused here, before writing.
        let bad = AgentSettings {
            hub: "ftp://x",
            ..settings(odd, &[])
        };
        assert!(agent_toml(&bad).unwrap_err().contains("not an http"));
    }

    #[test]
    fn an_existing_configuration_is_kept_unless_it_sets_nothing_or_force() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("etc/converge/agent.toml");
        assert_eq!(
            write_agent_toml(&path, "name = \"a\"\n", false),
            Ok(Step::Done)
        );
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
        assert_eq!(
            write_agent_toml(&path, "name = \"a\"\n", false),
            Ok(Step::Unchanged)
        );
        let err = write_agent_toml(&path, "name = \"b\"\n", false).unwrap_err();
        assert!(
            err.contains("already configures this host differently"),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "name = \"a\"\n");
        assert_eq!(
            write_agent_toml(&path, "name = \"b\"\n", true),
            Ok(Step::Done)
        );
        // The package's placeholder (comments only) is replaced.
        std::fs::write(&path, "# hubs = [\"https://hub/policy\"]\n\n").unwrap();
        assert_eq!(
            write_agent_toml(&path, "name = \"c\"\n", false),
            Ok(Step::Done)
        );
    }

    #[test]
    fn a_key_is_installed_once_under_its_id() {
        let dir = tempfile::tempdir().unwrap();
        let trust = dir.path().join("trusted");
        let key = PublicKey {
            id: [1, 2, 3, 4, 5, 6, 7, 8],
            key: [9; 32],
        };
        assert_eq!(install_key(&trust, &key), Ok(Step::Done));
        assert_eq!(install_key(&trust, &key), Ok(Step::Unchanged));
        let file = trust.join("hub-0102030405060708.pub");
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
        let mode = std::fs::metadata(&trust).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o755);
    }
}
