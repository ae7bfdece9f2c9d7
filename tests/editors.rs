//! The editor integrations of editors/ with the real tools (issue 23, item
//! 6): the VS Code extension packages into a `.vsix` with `@vscode/vsce`,
//! and the Neovim plugin says when Neovim is too old for it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use ::converge::repo_root;
use ::converge::support::require_tool;

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            if entry.file_name() != "node_modules" {
                copy_tree(&entry.path(), &target);
            }
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// `npm install --omit=dev` and `npx @vscode/vsce package` on a copy of
/// editors/vscode (as .ci/run does), then the archive's list: the
/// extension's files, its runtime dependency, the license, and nothing of
/// the packaging itself. vsce refuses (or asks, which fails without a
/// terminal) when `repository` or the LICENSE is missing.
#[test]
#[ignore = "needs npm"]
fn the_vscode_extension_packages_into_a_vsix() {
    let npm = require_tool("npm", "npm");
    let npx = require_tool("npx", "npm");
    let unzip = require_tool("unzip", "unzip");
    let work = tempfile::tempdir().unwrap();
    let ext = work.path().join("vscode");
    copy_tree(&repo_root().join("editors/vscode"), &ext);
    let install = Command::new(npm)
        .args(["install", "--omit=dev", "--no-audit", "--no-fund"])
        .current_dir(&ext)
        .output()
        .unwrap();
    assert!(install.status.success(), "{}", text(&install));
    let vsix = work.path().join("converge-policy.vsix");
    let package = Command::new(npx)
        .args(["--yes", "@vscode/vsce", "package", "--out"])
        .arg(&vsix)
        .current_dir(&ext)
        .output()
        .unwrap();
    assert!(package.status.success(), "{}", text(&package));
    let list = Command::new(unzip).arg("-Z1").arg(&vsix).output().unwrap();
    assert!(list.status.success(), "{}", text(&list));
    let files = String::from_utf8_lossy(&list.stdout);
    let files: Vec<&str> = files.lines().collect();
    for expected in [
        "extension.vsixmanifest",
        "extension/package.json",
        "extension/extension.js",
        "extension/language-configuration.json",
        "extension/syntaxes/policy.tmLanguage.json",
        "extension/readme.md",
        "extension/LICENSE.txt",
        "extension/node_modules/vscode-languageclient/package.json",
    ] {
        assert!(
            files.contains(&expected),
            "{expected} missing from {files:?}"
        );
    }
    for unwanted in [".vscodeignore", "package-lock.json"] {
        assert!(
            !files.iter().any(|f| f.ends_with(unwanted)),
            "{unwanted} is in the .vsix: {files:?}"
        );
    }
}

/// The Neovim version the plugin needs at least (`vim.fs`, `vim.lsp.start`).
const NVIM_MINIMUM: (u32, u32) = (0, 8);

/// Loads editors/neovim/policy.lua in headless Neovim with `vim.notify`
/// recorded; `pretend_old` makes `has("nvim-0.8")` false whatever the
/// version. Returns the recorded `LEVEL MESSAGE` lines and whether the
/// plugin registered its FileType autocommand.
fn load_plugin(nvim: &Path, pretend_old: bool) -> (Vec<String>, bool) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("notified.txt");
    let setup = format!(
        r#"
_G.notified = {{}}
vim.notify = function(msg, level) table.insert(_G.notified, tostring(level) .. " " .. msg) end
if {pretend_old} then
  local has = vim.fn.has
  vim.fn.has = function(what) if what == "nvim-0.8" then return 0 end return has(what) end
end
"#
    );
    let report = format!(
        r#"
local autocmds = vim.api.nvim_get_autocmds({{ event = "FileType", pattern = "policy" }})
table.insert(_G.notified, "autocmds " .. #autocmds)
vim.fn.writefile(_G.notified, {:?})
"#,
        out.display().to_string()
    );
    let setup_file = dir.path().join("setup.lua");
    let report_file = dir.path().join("report.lua");
    std::fs::write(&setup_file, setup).unwrap();
    std::fs::write(&report_file, report).unwrap();
    let run = Command::new(nvim)
        .args(["--headless", "--clean", "-u", "NONE", "-c"])
        .arg(format!("luafile {}", setup_file.display()))
        .arg("-c")
        .arg(format!(
            "luafile {}",
            repo_root().join("editors/neovim/policy.lua").display()
        ))
        .arg("-c")
        .arg(format!("luafile {}", report_file.display()))
        .args(["-c", "qa!"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", text(&run));
    let lines: Vec<String> = std::fs::read_to_string(&out)
        .unwrap_or_else(|e| panic!("no report ({e}): {}", text(&run)))
        .lines()
        .map(str::to_owned)
        .collect();
    let (last, notified) = lines.split_last().unwrap();
    (notified.to_vec(), last != "autocmds 0")
}

fn nvim_version(nvim: &Path) -> (u32, u32) {
    let out = Command::new(nvim).arg("--version").output().unwrap();
    let first = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned();
    let numbers: Vec<u32> = first
        .trim_start_matches("NVIM v")
        .split(['.', '-'])
        .filter_map(|n| n.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

#[test]
#[ignore = "needs nvim"]
fn the_neovim_plugin_warns_on_a_neovim_older_than_it_supports() {
    let nvim = require_tool("nvim", "neovim");
    // WARN is 3 in vim.log.levels.
    let warned = |notified: &[String]| {
        notified.len() == 1
            && notified[0].starts_with("3 ")
            && notified[0].contains("needs Neovim 0.8 or later")
    };
    let (notified, started) = load_plugin(&nvim, true);
    assert!(warned(&notified), "{notified:?}");
    assert!(!started, "an old Neovim gets no half-working setup");

    // And the Neovim installed here, as it is.
    let (notified, started) = load_plugin(&nvim, false);
    if nvim_version(&nvim) < NVIM_MINIMUM {
        assert!(warned(&notified), "{notified:?}");
        assert!(!started);
    } else {
        assert!(notified.is_empty(), "{notified:?}");
        assert!(started, "the plugin set up nothing");
    }
}
