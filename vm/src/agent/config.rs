//! The agent's configuration file (TOML), e.g. `/etc/converge/agent.toml`:
//!
//! ```toml
//! hubs = ["https://hub.example.com/policy", "https://mirror.example.com/policy"]
//! name = "site"                      # pulls site.stamp and site.bundle
//! trust = "/etc/converge/trusted"    # pinned *.pub keys
//! state = "/var/lib/converge"        # default: ROOT/var/lib/converge
//! root = "/"                         # default
//! splay = "5m"                       # the most a run waits; default 0s
//! timeout = "60s"                    # per request, default 60s
//! ca_file = "/etc/converge/hub-ca.pem"   # optional: a private hub's CA
//! proxy = "http://proxy.example.com:3128" # optional
//! keep_reports = 10                  # default
//! collectors = ["https://collector.example.com"] # report uploads; default none
//! upload_timeout = "5s"              # the whole upload, default 5s
//! spool_max_reports = 1000           # reports kept while no collector answers
//! spool_max_bytes = 67108864         # and their bytes (64 MiB)
//! metrics_dir = "/var/lib/converge/metrics" # default: ROOT/var/lib/converge/metrics
//! ```
//!
//! Uploads use the `ca_file` and `proxy` of pulls (one HTTP client builder,
//! [`crate::pull::fetch::http_agent`]) with their own, short, time budget.
//!
//! Unknown keys are errors: a misspelt `splay` must not silently mean none.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::pull::fetch::HttpOptions;
use crate::stamp::name_problem;
use crate::stamp::time::parse_duration;
use crate::upload::spool::Limits;
use crate::upload::UploadConfig;

/// The largest configuration file read.
const MAX_CONFIG_LEN: u64 = 64 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    hubs: Vec<String>,
    name: String,
    trust: PathBuf,
    state: Option<PathBuf>,
    root: Option<PathBuf>,
    splay: Option<String>,
    timeout: Option<String>,
    ca_file: Option<PathBuf>,
    proxy: Option<String>,
    keep_reports: Option<usize>,
    #[serde(default)]
    collectors: Vec<String>,
    upload_timeout: Option<String>,
    spool_max_reports: Option<usize>,
    spool_max_bytes: Option<u64>,
    metrics_dir: Option<PathBuf>,
}

/// A checked configuration.
#[derive(Clone, Debug)]
pub struct Config {
    /// Base URLs, tried in order: the hub, then its mirrors.
    pub hubs: Vec<String>,
    pub name: String,
    pub trust: PathBuf,
    pub state: PathBuf,
    pub root: PathBuf,
    /// The longest splay; each host waits its own fixed share of it.
    pub splay: Duration,
    pub http: HttpOptions,
    /// Reports kept in `reports/` besides `last.json`.
    pub keep_reports: usize,
    /// Where signed reports go (none: they are only spooled).
    pub upload: UploadConfig,
    /// The directory of the Prometheus textfile (`converge.prom`), 0755,
    /// for node_exporter's textfile collector.
    pub metrics_dir: PathBuf,
}

/// The default textfile directory under `root`.
pub fn default_metrics_dir(root: &Path) -> PathBuf {
    root.join("var/lib/converge/metrics")
}

impl Config {
    /// Reads and checks `path`. The error names the file and what to fix.
    pub fn load(path: &Path) -> Result<Config, String> {
        use std::io::Read as _;
        crate::bundle::keys::guarded(path).map_err(|e| format!("`{}`: {e}", path.display()))?;
        let mut text = String::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(MAX_CONFIG_LEN).read_to_string(&mut text))
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
        let config = Config::parse(&text).map_err(|e| format!("`{}`: {e}", path.display()))?;
        // The CA file and proxy are part of the configuration: one that
        // cannot be used is an error here (exit 66), not a warning per hub
        // followed by "no bundle to run".
        crate::pull::fetch::http_agent(&config.http)
            .map_err(|e| format!("`{}`: {e}", path.display()))?;
        Ok(config)
    }

    pub fn parse(text: &str) -> Result<Config, String> {
        if toml::from_str::<toml::Table>(text).is_ok_and(|t| t.is_empty()) {
            // The package's placeholder: only comments.
            return Err(
                "sets nothing yet: `policyvm bootstrap --hub URL --trust-fingerprint \
                        FINGERPRINT` writes it (docs/operations.md, \"Bringing a new host under \
                        management\")"
                    .into(),
            );
        }
        let file: File = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.hubs.is_empty() {
            return Err("`hubs` is empty: give the base URL of at least one hub".into());
        }
        for hub in &file.hubs {
            if !(hub.starts_with("http://") || hub.starts_with("https://")) {
                return Err(format!("hub `{hub}` is not an http:// or https:// URL"));
            }
        }
        if let Some(why) = name_problem(&file.name) {
            return Err(format!(
                "`name = {:?}` cannot name a bundle: {why}",
                file.name
            ));
        }
        let duration = |key: &str, value: Option<&String>, default: u64| match value {
            None => Ok(Duration::from_secs(default)),
            Some(text) => parse_duration(text)
                .map(Duration::from_secs)
                .map_err(|e| format!("`{key}`: {e}")),
        };
        let timeout = duration("timeout", file.timeout.as_ref(), 60)?;
        if timeout.is_zero() {
            return Err("`timeout` must be more than 0s".into());
        }
        for collector in &file.collectors {
            if !(collector.starts_with("http://") || collector.starts_with("https://")) {
                return Err(format!(
                    "collector `{collector}` is not an http:// or https:// URL"
                ));
            }
        }
        let upload_timeout = duration("upload_timeout", file.upload_timeout.as_ref(), 5)?;
        if upload_timeout.is_zero() || upload_timeout > Duration::from_secs(300) {
            return Err(
                "`upload_timeout` must be more than 0s and at most 5m: it bounds what a slow \
                 collector can add to every cycle"
                    .into(),
            );
        }
        let defaults = Limits::default();
        let limits = Limits {
            max_reports: file.spool_max_reports.unwrap_or(defaults.max_reports),
            max_bytes: file.spool_max_bytes.unwrap_or(defaults.max_bytes),
        };
        if limits.max_reports == 0 || limits.max_bytes == 0 {
            return Err("`spool_max_reports` and `spool_max_bytes` must be more than 0".into());
        }
        let root = file.root.clone().unwrap_or_else(|| PathBuf::from("/"));
        let http = HttpOptions {
            timeout,
            ca_file: file.ca_file,
            proxy: file.proxy,
            ..HttpOptions::default()
        };
        let metrics_dir = file
            .metrics_dir
            .unwrap_or_else(|| default_metrics_dir(&root));
        Ok(Config {
            hubs: file.hubs,
            name: file.name,
            trust: file.trust,
            // LANGUAGE.md §18: `ROOT/var/lib/converge` unless given.
            state: file.state.unwrap_or_else(|| {
                crate::state::default_dir(file.root.as_deref().unwrap_or(Path::new("/")))
            }),
            root,
            splay: duration("splay", file.splay.as_ref(), 0)?,
            upload: UploadConfig {
                collectors: file.collectors,
                http: HttpOptions {
                    timeout: upload_timeout,
                    ..http.clone()
                },
                limits,
            },
            http,
            keep_reports: file.keep_reports.unwrap_or(10),
            metrics_dir,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_file_takes_the_documented_defaults() {
        let c = Config::parse(
            "hubs = [\"http://127.0.0.1:8080/policy\"]\nname = \"site\"\ntrust = \"/etc/converge/trusted\"\n",
        )
        .unwrap();
        assert_eq!(c.state, PathBuf::from("/var/lib/converge"));
        assert_eq!(c.root, PathBuf::from("/"));
        assert_eq!(c.splay, Duration::ZERO);
        assert_eq!(c.http.timeout, Duration::from_secs(60));
        assert_eq!(c.keep_reports, 10);
        assert!(c.upload.collectors.is_empty());
        assert_eq!(c.upload.http.timeout, Duration::from_secs(5));
        assert_eq!(c.upload.limits, Limits::default());
        assert_eq!(c.metrics_dir, PathBuf::from("/var/lib/converge/metrics"));
    }

    #[test]
    fn uploads_share_the_ca_and_proxy_of_pulls_with_their_own_timeout() {
        let c = Config::parse(
            "hubs = [\"http://h\"]\nname = \"site\"\ntrust = \"/t\"\nroot = \"/r\"\n\
             ca_file = \"/ca.pem\"\nproxy = \"http://p:3128\"\ncollectors = [\"https://c\"]\n\
             upload_timeout = \"2s\"\nspool_max_reports = 7\n",
        )
        .unwrap();
        assert_eq!(c.upload.collectors, vec!["https://c".to_owned()]);
        assert_eq!(c.upload.http.ca_file, Some(PathBuf::from("/ca.pem")));
        assert_eq!(c.upload.http.proxy.as_deref(), Some("http://p:3128"));
        assert_eq!(c.upload.http.timeout, Duration::from_secs(2));
        assert_eq!(c.http.timeout, Duration::from_secs(60));
        assert_eq!(c.upload.limits.max_reports, 7);
        assert_eq!(c.metrics_dir, PathBuf::from("/r/var/lib/converge/metrics"));
    }

    #[test]
    fn a_configuration_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        std::fs::write(
            &path,
            "hubs = [\"http://x\"]\nname = \"site\"\ntrust = \"/t\"\n",
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        Config::load(&path).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(err.contains("writable by group or others"), "{err}");
    }

    #[test]
    fn an_unreadable_ca_file_is_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.toml");
        let ca = dir.path().join("hub-ca.pem");
        std::fs::write(
            &path,
            format!(
                "hubs = [\"https://x\"]\nname = \"site\"\ntrust = \"/t\"\nca_file = {:?}\n",
                ca.display().to_string()
            ),
        )
        .unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(err.contains("cannot read the CA file"), "{err}");
        assert!(err.contains("agent.toml"), "{err}");
        std::fs::write(&ca, "not a certificate\n").unwrap();
        let err = Config::load(&path).unwrap_err();
        assert!(err.contains("holds no PEM certificate"), "{err}");
    }

    #[test]
    fn mistakes_are_named() {
        let base = "name = \"site\"\ntrust = \"/t\"\n";
        for (text, expected) in [
            (format!("{base}hubs = []"), "`hubs` is empty"),
            (
                format!("{base}hubs = [\"ftp://x\"]"),
                "not an http:// or https:// URL",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\nsplai = \"5m\""),
                "unknown field `splai`",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\nsplay = \"5 min\""),
                "`splay`",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\ntimeout = \"0s\""),
                "more than 0s",
            ),
            (
                "hubs = [\"http://x\"]\nname = \"../etc\"\ntrust = \"/t\"".to_owned(),
                "cannot name a bundle",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\ncollectors = [\"collector:80\"]"),
                "collector `collector:80` is not an http",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\nupload_timeout = \"0s\""),
                "`upload_timeout` must be more than 0s",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\nupload_timeout = \"1h\""),
                "at most 5m",
            ),
            (
                format!("{base}hubs = [\"http://x\"]\nspool_max_reports = 0"),
                "must be more than 0",
            ),
            (
                "# hubs = [\"https://hub/policy\"]\n\n".to_owned(),
                "sets nothing yet: `policyvm bootstrap",
            ),
        ] {
            let err = Config::parse(&text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
