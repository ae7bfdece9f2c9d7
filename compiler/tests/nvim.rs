//! A real editor: headless Neovim with its built-in LSP client attached to
//! `policyc lsp` on an example file (with one typo added) must show the
//! server's diagnostics. `#[ignore = "needs nvim"]`: plain `cargo test`
//! lists it as ignored; `--include-ignored` (`.ci/run`, which installs
//! Debian's `neovim`) runs it, and there a missing `nvim` fails it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Works with Neovim 0.7 (Debian 12: `vim.lsp.start_client`) and later
/// (`vim.lsp.start`).
const SCRIPT: &str = r#"
local policyc, file, out = os.getenv("POLICYC"), os.getenv("POLICY_FILE"), os.getenv("RESULT")
vim.cmd("edit " .. vim.fn.fnameescape(file))
local buf = vim.api.nvim_get_current_buf()
local config = { name = "policyc", cmd = { policyc, "lsp" }, root_dir = vim.fn.fnamemodify(file, ":h") }
if vim.lsp.start then
  vim.lsp.start(config)
else
  local id = vim.lsp.start_client(config)
  vim.lsp.buf_attach_client(buf, id)
end
local arrived = vim.wait(20000, function() return #vim.diagnostic.get(buf) > 0 end, 50)
local lines = {}
for _, d in ipairs(vim.diagnostic.get(buf)) do
  local lsp = d.user_data and d.user_data.lsp or {}
  local code = d.code or lsp.code or "?"
  table.insert(lines, string.format("%s %d:%d %s", code, d.lnum + 1, d.col + 1, (d.message:gsub("\n", " "))))
end
if not arrived then lines = { "TIMEOUT" } end
vim.fn.writefile(lines, out)
vim.cmd("qa!")
"#;

#[test]
#[ignore = "needs nvim"]
fn neovim_shows_the_servers_diagnostics() {
    assert!(
        Command::new("nvim")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok(),
        "this test needs `nvim` (apt-get install neovim); it is #[ignore]d by default: run it \
         with `--include-ignored` only where Neovim is installed"
    );
    let dir = tempfile::tempdir().unwrap();
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/motd.policy");
    let text = std::fs::read_to_string(example).unwrap();
    assert!(text.contains("comment = "));
    let file = dir.path().join("motd.policy");
    std::fs::write(&file, text.replace("comment = ", "coment = ")).unwrap();
    let script = dir.path().join("attach.lua");
    std::fs::write(&script, SCRIPT).unwrap();
    let result = dir.path().join("result.txt");

    let mut nvim = Command::new("nvim")
        .args(["--headless", "--clean", "-n", "-c"])
        .arg(format!("luafile {}", script.display()))
        .env("POLICYC", env!("CARGO_BIN_EXE_policyc"))
        .env("POLICY_FILE", &file)
        .env("RESULT", &result)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = nvim.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = nvim.kill();
            let _ = nvim.wait();
            panic!("nvim did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "nvim exited with {status}");
    let shown = std::fs::read_to_string(&result).unwrap();
    assert_ne!(shown.trim(), "TIMEOUT", "no diagnostics reached Neovim");
    assert!(
        shown
            .lines()
            .any(|l| l.contains("coment") && l.starts_with('E')),
        "the unknown attribute is reported: {shown}"
    );
}
