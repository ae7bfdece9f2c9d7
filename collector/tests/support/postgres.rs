//! A throwaway PostgreSQL cluster for one test: `initdb` in a temp dir,
//! `pg_ctl start` on a Unix socket in that dir (no TCP port, so no clash
//! with anything else on the machine), stopped and deleted on drop.
//!
//! PostgreSQL refuses to run as root. When the tests run as root (CI here
//! does), the cluster runs as `nobody` (`setpriv --reuid=nobody
//! --regid=nogroup --clear-groups`) in a directory chowned to it; root still
//! connects through the socket (trust authentication, the socket dir is
//! the temp dir).
//!
//! Tests that use it are `#[ignore = "needs postgresql"]` and call
//! [`Postgres::start`], which fails (never passes empty-handed) when the
//! binaries are missing: `.ci/run` installs Debian's `postgresql` and runs
//! the ignored tests.

use std::path::PathBuf;
use std::process::Command;

pub struct Postgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    as_nobody: bool,
}

/// The directory of Debian's server binaries (`/usr/lib/postgresql/N/bin`,
/// the newest N), or wherever `initdb` is on `PATH`.
pub fn binaries() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    versions.pop().or_else(|| {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path).find(|dir| dir.join("initdb").is_file())
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout == b"0\n")
}

impl Postgres {
    /// Creates and starts a cluster; panics (test failure) with the reason
    /// when it cannot.
    pub fn start() -> Postgres {
        let bin = binaries().unwrap_or_else(|| {
            panic!(
                "this test needs PostgreSQL's initdb and pg_ctl (apt-get install postgresql); \
                 it is #[ignore]d by default: run it with `--include-ignored` only where \
                 PostgreSQL is installed"
            )
        });
        let dir = tempfile::Builder::new().prefix("pg-").tempdir().unwrap();
        let as_nobody = is_root();
        if as_nobody {
            let status = Command::new("chown")
                .args(["nobody:nogroup"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success(), "chown nobody {}", dir.path().display());
        }
        let pg = Postgres {
            dir,
            bin,
            as_nobody,
        };
        let data = pg.dir.path().join("data");
        pg.run(
            "initdb",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-U".as_ref(),
                "postgres".as_ref(),
                "--auth=trust".as_ref(),
                "--no-sync".as_ref(),
                "-E".as_ref(),
                "UTF8".as_ref(),
                "--locale=C".as_ref(),
            ],
        );
        let options = format!(
            "-c listen_addresses='' -c unix_socket_directories='{}' -c fsync=off \
             -c synchronous_commit=off -c full_page_writes=off -c max_connections=100",
            pg.dir.path().display()
        );
        let log = pg.dir.path().join("postgres.log");
        pg.run(
            "pg_ctl",
            &[
                "-D".as_ref(),
                data.as_os_str(),
                "-l".as_ref(),
                log.as_os_str(),
                "-o".as_ref(),
                options.as_ref(),
                "-w".as_ref(),
                "start".as_ref(),
            ],
        );
        pg
    }

    fn command(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_nobody {
            let mut c = Command::new("setpriv");
            c.args(["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--"])
                .arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn run(&self, program: &str, args: &[&std::ffi::OsStr]) {
        let output = self
            .command(program)
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{program} failed: {}\n{}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
        );
    }

    /// Creates database `name` and returns its URL.
    pub fn database(&self, name: &str) -> String {
        let socket = self.dir.path().as_os_str().to_owned();
        self.run(
            "createdb",
            &[
                "-h".as_ref(),
                &socket,
                "-U".as_ref(),
                "postgres".as_ref(),
                name.as_ref(),
            ],
        );
        format!(
            "postgres://postgres@localhost/{name}?host={}",
            self.dir.path().display()
        )
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self
            .command("pg_ctl")
            .args([
                "-D".as_ref(),
                data.as_os_str(),
                "-m".as_ref(),
                "immediate".as_ref(),
                "stop".as_ref(),
            ])
            .output();
    }
}
