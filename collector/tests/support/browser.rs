//! Debian's headless Chromium driven through chromedriver (WebDriver) with
//! `fantoccini`: chromedriver runs as a child in its own process group on a
//! free loopback port, with a throw-away profile, and the whole group
//! (chromedriver and the browsers it started) is killed at the end.

use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};

/// Where a program is on `PATH`.
fn find(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// The browser and its driver, or a failure saying what to install (the
/// tests that call this are `#[ignore = "needs chromium"]`, and run with
/// `--include-ignored` only where both are installed, as in `.ci/run`).
pub fn require_chromium() -> (PathBuf, PathBuf) {
    let tool = |program: &str, package: &str| {
        find(program).unwrap_or_else(|| {
            panic!(
                "this test needs `{program}` (apt-get install {package}); it is #[ignore]d by \
                 default: run it with `--include-ignored` only where it is installed"
            )
        })
    };
    (
        tool("chromium", "chromium"),
        tool("chromedriver", "chromium-driver"),
    )
}

pub struct Browser {
    _driver: Driver,
    pub client: Client,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        let (chromium, chromedriver) = require_chromium();
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap()
            .port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map(Driver)
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on port {port}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let profile = tempfile::tempdir().unwrap();
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".to_owned(),
            serde_json::json!({
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,1000",
                    format!("--user-data-dir={}", profile.path().display()),
                ],
            }),
        );
        // chromedriver speaks plain HTTP on loopback: no TLS connector.
        let http = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(http)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_or_else(|e| panic!("chromedriver did not start a session: {e}"));
        Browser {
            _driver: driver,
            client,
            _profile: profile,
        }
    }

    /// The text of the element `css` selects (it must exist).
    pub async fn text(&self, css: &str) -> String {
        match self.client.find(Locator::Css(css)).await {
            Ok(e) => e.text().await.unwrap(),
            Err(e) => panic!("no element {css:?} on {}: {e}", self.url().await),
        }
    }

    /// The texts of every element `css` selects.
    pub async fn texts(&self, css: &str) -> Vec<String> {
        let mut texts = Vec::new();
        for e in self.client.find_all(Locator::Css(css)).await.unwrap() {
            texts.push(e.text().await.unwrap());
        }
        texts
    }

    pub async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.unwrap().len()
    }

    pub async fn url(&self) -> String {
        self.client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_default()
    }

    /// Clicks the link whose visible text is `text` among the elements
    /// `css` selects, and waits for the next page.
    pub async fn click_link(&self, css: &str, text: &str) {
        let before = self.url().await;
        let mut found = None;
        for e in self.client.find_all(Locator::Css(css)).await.unwrap() {
            if e.text().await.unwrap().contains(text) {
                found = Some(e);
                break;
            }
        }
        let link =
            found.unwrap_or_else(|| panic!("no link {css:?} with text {text:?} on {before}"));
        link.click().await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while self.url().await == before {
            assert!(
                Instant::now() < deadline,
                "clicking {text:?} did not leave {before}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Asserts no report content ran or became markup: no alert dialog is
    /// open, and the page has no `<script>` or `<img>` element (the pages
    /// themselves have none).
    pub async fn assert_inert(&self) {
        let alert = self.client.get_alert_text().await;
        assert!(
            alert.is_err(),
            "an alert is open on {}: {alert:?}",
            self.url().await
        );
        assert_eq!(
            self.count("script").await,
            0,
            "a <script> element on {}",
            self.url().await
        );
        assert_eq!(
            self.count("img").await,
            0,
            "an <img> element on {}",
            self.url().await
        );
    }

    /// Saves a screenshot as `target/test-artefacts/web/NAME.png`.
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let dir = artefacts_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Ends the session (the browser exits); dropping kills the driver.
    pub async fn finish(self) {
        let _ = self.client.clone().close().await;
    }
}

/// `target/test-artefacts/web/`, next to the build's `debug/` (this test
/// runs as `target/debug/deps/web-HASH`).
pub fn artefacts_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe
        .ancestors()
        .nth(3)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"));
    target.join("test-artefacts/web")
}

/// chromedriver, whose process group (with the browsers it started) is
/// killed when dropped, even when the test fails half-way.
struct Driver(Child);

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.0.id())])
            .output();
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
