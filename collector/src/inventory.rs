//! The inventory the collector verifies reports against, re-read when the
//! file changes.
//!
//! Reload rule (docs/fleet.md): before each use the file's modification
//! time and size are compared with those of the copy in memory (one
//! `stat`); when either differs the file is parsed again. A file that no
//! longer parses is reported in the log and the `inventory_errors` metric,
//! and the last good inventory stays in force, so a typo during an edit
//! never locks every host out.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

use converge_format::inventory::{Host, Inventory};

/// A parsed inventory with a by-name index.
#[derive(Debug, Default)]
pub struct Hosts {
    pub inventory: Inventory,
    index: HashMap<String, usize>,
}

impl Hosts {
    pub fn new(inventory: Inventory) -> Hosts {
        let index = inventory
            .hosts
            .iter()
            .enumerate()
            .map(|(i, h)| (h.name.get_ref().clone(), i))
            .collect();
        Hosts { inventory, index }
    }

    /// The entry for `name`.
    pub fn host(&self, name: &str) -> Option<&Host> {
        self.index
            .get(name)
            .and_then(|&i| self.inventory.hosts.get(i))
    }

    /// Every entry, in file order.
    pub fn iter(&self) -> impl Iterator<Item = &Host> {
        self.inventory.hosts.iter()
    }
}

/// The file's identity for change detection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

fn stamp(path: &Path) -> std::io::Result<Stamp> {
    let meta = std::fs::metadata(path)?;
    Ok(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

/// The inventory file and the copy in force.
#[derive(Debug)]
pub struct InventoryFile {
    path: PathBuf,
    current: RwLock<(Stamp, Arc<Hosts>)>,
}

impl InventoryFile {
    /// Reads and checks the inventory; an error says what is wrong where.
    pub fn load(path: &Path) -> Result<InventoryFile, String> {
        let (stamp, hosts) = read(path)?;
        Ok(InventoryFile {
            path: path.to_owned(),
            current: RwLock::new((stamp, Arc::new(hosts))),
        })
    }

    /// The inventory in force, re-read first when the file changed.
    pub fn current(&self) -> Arc<Hosts> {
        let known = {
            let guard = self.current.read().unwrap_or_else(|e| e.into_inner());
            (guard.0, Arc::clone(&guard.1))
        };
        match stamp(&self.path) {
            Ok(now) if now == known.0 => known.1,
            _ => self.reload(known.0).unwrap_or(known.1),
        }
    }

    fn reload(&self, old: Stamp) -> Option<Arc<Hosts>> {
        let mut guard = self.current.write().unwrap_or_else(|e| e.into_inner());
        if guard.0 != old {
            // Another request reloaded in the meantime.
            return Some(Arc::clone(&guard.1));
        }
        match read(&self.path) {
            Ok((stamp, hosts)) => {
                tracing::info!(
                    path = %self.path.display(),
                    hosts = hosts.inventory.hosts.len(),
                    "inventory reloaded"
                );
                *guard = (stamp, Arc::new(hosts));
                Some(Arc::clone(&guard.1))
            }
            Err(e) => {
                crate::metrics::METRICS.inventory_error();
                tracing::error!("{e}; the previous inventory stays in force");
                // Remember the broken file's stamp so it is not re-parsed
                // on every request; a fix changes the stamp again.
                if let Ok(stamp) = stamp(&self.path) {
                    guard.0 = stamp;
                }
                None
            }
        }
    }
}

fn read(path: &Path) -> Result<(Stamp, Hosts), String> {
    let before = stamp(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let inventory = Inventory::parse(&text).map_err(|errors| {
        let mut message = format!("{}: the inventory is not valid:", path.display());
        for e in errors {
            let at = e
                .span
                .as_ref()
                .map(|s| line_col(&text, s.start))
                .unwrap_or_default();
            message.push_str(&format!("\n  {at}{e}"));
        }
        message
    })?;
    Ok((before, Hosts::new(inventory)))
}

/// `line:col: ` of a byte offset, 1-based.
fn line_col(text: &str, offset: usize) -> String {
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("{line}:{col}: ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use converge_format::inventory::format_report_key;

    fn entry(name: &str, seed: u8) -> String {
        let key = ed25519_dalek::SigningKey::from_bytes(&[seed; 32]).verifying_key();
        format!(
            "[[host]]\nname = \"{name}\"\nreport_key = \"{}\"\n",
            format_report_key(&key)
        )
    }

    #[test]
    fn a_changed_file_is_reread_and_a_broken_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inventory.toml");
        std::fs::write(&path, entry("a", 1)).unwrap();
        let file = InventoryFile::load(&path).unwrap();
        assert!(file.current().host("a").is_some());
        std::fs::write(&path, entry("a", 1) + &entry("b", 2)).unwrap();
        assert!(file.current().host("b").is_some());
        std::fs::write(&path, "[[host]]\nname = 3\n").unwrap();
        let kept = file.current();
        assert!(kept.host("a").is_some() && kept.host("b").is_some());
    }

    #[test]
    fn a_bad_inventory_is_refused_at_start_with_a_location() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("inventory.toml");
        std::fs::write(&path, "[[host]]\nname = \"a\"\nreport_key = \"nope\"\n").unwrap();
        let e = InventoryFile::load(&path).unwrap_err();
        assert!(e.contains("3:14: a report key starts with"), "{e}");
    }
}
