//! HTTP servers on 127.0.0.1 for the distribution tests: a real nginx
//! serving a publish directory, and a scripted server that misbehaves on
//! purpose (endless, trickling, lying responses). Both are started by the
//! test and stopped when dropped.
#![allow(
    clippy::panic,
    reason = "test support: a broken loopback ends the test"
)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A free port on 127.0.0.1 (free when asked; the caller retries if it is
/// taken in between).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Debian's nginx serving `root` on 127.0.0.1, logging every request.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    prefix: tempfile::TempDir,
    pub port: u16,
    scheme: &'static str,
}

/// One line of the access log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    pub path: String,
    pub status: u16,
    pub bytes: u64,
}

impl Nginx {
    /// Starts nginx on `root`. A missing nginx is an error: the tests that
    /// use it are `#[ignore = "needs nginx"]` and run only with
    /// `--include-ignored`, where nginx must be installed.
    pub fn start(root: &Path) -> Result<Nginx, String> {
        Nginx::start_with(root, None)
    }

    /// Starts nginx on `root` over HTTPS with this certificate chain and
    /// key (PEM files).
    pub fn start_tls(root: &Path, cert: &Path, key: &Path) -> Result<Nginx, String> {
        Nginx::start_with(root, Some((cert, key)))
    }

    fn start_with(root: &Path, tls: Option<(&Path, &Path)>) -> Result<Nginx, String> {
        let binary = crate::support::find_tool("nginx").ok_or(
            "nginx is not installed (apt-get install nginx-light); the tests that need it are \
             #[ignore]d by default: run them with `--include-ignored` only where nginx is",
        )?;
        let mut last = String::new();
        for _ in 0..5 {
            let prefix = tempfile::tempdir().map_err(|e| e.to_string())?;
            let port = free_port().map_err(|e| e.to_string())?;
            let p = prefix.path().display();
            let conf = format!(
                "daemon off;\nmaster_process off;\nworker_processes 1;\npid {p}/nginx.pid;\n\
                 error_log {p}/error.log;\nevents {{ worker_connections 512; }}\n\
                 http {{\n  log_format served '$uri $status $body_bytes_sent';\n\
                 access_log {p}/access.log served;\n\
                 client_body_temp_path {p}/body; proxy_temp_path {p}/proxy;\n\
                 fastcgi_temp_path {p}/fastcgi; uwsgi_temp_path {p}/uwsgi; scgi_temp_path {p}/scgi;\n\
                 types {{ text/plain stamp; application/octet-stream bundle; }}\n\
                 server {{ listen 127.0.0.1:{port}{}; root {}; {} }}\n}}\n",
                if tls.is_some() { " ssl" } else { "" },
                root.display(),
                tls.map_or(String::new(), |(cert, key)| format!(
                    "ssl_certificate {}; ssl_certificate_key {};",
                    cert.display(),
                    key.display()
                ))
            );
            std::fs::write(prefix.path().join("nginx.conf"), conf).map_err(|e| e.to_string())?;
            let mut child = Command::new(&binary)
                .arg("-p")
                .arg(prefix.path())
                .arg("-e")
                .arg(prefix.path().join("error.log"))
                .arg("-c")
                .arg(prefix.path().join("nginx.conf"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot start nginx: {e}"))?;
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Ok(Nginx {
                        child,
                        prefix,
                        port,
                        scheme: if tls.is_some() { "https" } else { "http" },
                    });
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            last = std::fs::read_to_string(prefix.path().join("error.log")).unwrap_or_default();
        }
        Err(format!("nginx did not start: {last}"))
    }

    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    /// Every request served so far.
    pub fn served(&self) -> Vec<Served> {
        let text =
            std::fs::read_to_string(self.prefix.path().join("access.log")).unwrap_or_default();
        text.lines()
            .filter_map(|line| {
                let mut parts = line.split(' ');
                Some(Served {
                    path: parts.next()?.to_owned(),
                    status: parts.next()?.parse().ok()?,
                    bytes: parts.next()?.parse().ok()?,
                })
            })
            .collect()
    }

    /// Stops the server now (the hub goes down).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

/// What the scripted server does with one request for `path`.
pub type Handler = dyn Fn(&str, &mut TcpStream) + Send + Sync + 'static;

/// A one-off HTTP server whose answers are code: it can stream forever,
/// trickle, or send headers that lie. Serves each connection on a thread
/// of its own until dropped.
pub struct Scripted {
    pub port: u16,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Scripted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scripted({})", self.port)
    }
}

impl Scripted {
    pub fn start(handler: impl Fn(&str, &mut TcpStream) + Send + Sync + 'static) -> Scripted {
        // Loopback is always there; anything else is the machine's
        // problem, and the test cannot go on.
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| panic!("cannot listen on 127.0.0.1: {e}"));
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let _ = listener.set_nonblocking(true);
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let accept = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match listener.accept() {
                        Ok((mut stream, _)) => {
                            let handler = Arc::clone(&handler);
                            std::thread::spawn(move || {
                                let _ = stream.set_nonblocking(false);
                                let _ = stream.set_write_timeout(Some(Duration::from_secs(30)));
                                if let Some(path) = request_path(&stream) {
                                    handler(&path, &mut stream);
                                }
                            });
                        }
                        Err(_) => std::thread::sleep(Duration::from_millis(5)),
                    }
                }
            })
        };
        Scripted {
            port,
            stop,
            accept: Some(accept),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// The path of a request, after reading its headers.
fn request_path(stream: &TcpStream) -> Option<String> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
    }
    first.split(' ').nth(1).map(str::to_owned)
}

/// Writes a complete `200 OK` response with `body`.
pub fn respond(stream: &mut TcpStream, headers: &str, body: &[u8]) {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
}

/// Sends `chunk` again and again, `pause` apart, for at most `limit`, or
/// until the client hangs up.
pub fn stream_forever(stream: &mut TcpStream, chunk: &[u8], pause: Duration, limit: Duration) {
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n");
    let start = Instant::now();
    while start.elapsed() < limit {
        if stream.write_all(chunk).is_err() {
            return;
        }
        if !pause.is_zero() {
            std::thread::sleep(pause);
        }
    }
}

/// A loopback server of the files under `dir` (a publish directory, as a
/// hub serves it), 404 for anything else; a path with `..` is never
/// served. For the tests that need a hub but not nginx.
pub fn serve_dir(dir: std::path::PathBuf) -> Scripted {
    Scripted::start(move |path, stream| {
        let name = path.trim_start_matches('/');
        let inside = !name.split('/').any(|part| part == ".." || part.is_empty());
        match std::fs::read(dir.join(name)) {
            Ok(body) if inside => respond(stream, "", &body),
            _ => {
                let _ = stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        }
    })
}
