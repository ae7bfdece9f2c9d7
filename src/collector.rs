//! A real `converge-collector serve` for the end-to-end tests: on a
//! loopback port the kernel picks, with an SQLite database in its own temp
//! directory, killed when dropped.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::binary;

#[derive(Debug)]
pub struct Collector {
    child: Child,
    /// `http://127.0.0.1:PORT`, as the collector printed it.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Collector {
    /// Starts one that trusts the hosts of `inventory`.
    ///
    /// # Panics
    /// When the collector cannot be started: the test cannot go on.
    #[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    pub fn start(inventory: &Path) -> Collector {
        let dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(binary("converge-collector"))
            .arg("serve")
            .arg("--inventory")
            .arg(inventory)
            .arg("--database")
            .arg(format!("sqlite://{}", dir.path().join("c.db").display()))
            .args(["--listen", "127.0.0.1:0"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("converge-collector: listening on ")
            .unwrap_or_else(|| panic!("the collector did not start: {line:?}"))
            .to_owned();
        Collector {
            child,
            url,
            _dir: dir,
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
