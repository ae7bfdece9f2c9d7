//! `policyc test [PATH]... [--format human|json|junit] [--run]`: runs the
//! `*.test.policy` files named (directories are searched for them) and
//! prints a line per test (docs/testing-policy.md).
//!
//! Exit codes: 0 every test passed, 1 a test failed or the tests or the
//! policy have errors, 64 usage, 66 a file cannot be read or no test file
//! was found, 69 `--run` cannot find `policyvm`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::{exit, fail, fail_with, out, use_color, EXIT_ERRORS};
use crate::render::render_human;
use crate::testing::{fixture, report, suite, verdict, TEST_SUFFIX};

#[derive(Debug, Args)]
pub struct TestArgs {
    /// Test files (`*.test.policy`) or directories to search for them;
    /// the current directory by default.
    paths: Vec<PathBuf>,
    /// How to print the results: a line per test, a JSON document
    /// (docs/schemas/converge-test-1.schema.json) or JUnit XML for CI.
    #[arg(long, value_enum, default_value_t = TestFormat::Human)]
    format: TestFormat,
    /// Also run `policyvm` on a copy of each test's `root` fixture and
    /// check the end state; a second run must repair nothing.
    #[arg(long)]
    run: bool,
    /// The `policyvm` binary `--run` runs (default: beside policyc, else
    /// on PATH).
    #[arg(long, value_name = "PATH", requires = "run")]
    policyvm: Option<PathBuf>,
    /// Run only the tests whose name contains this text.
    #[arg(long, value_name = "TEXT")]
    filter: Option<String>,
    /// The policy tree of every test file (default: each file's directory).
    #[arg(long, value_name = "DIR")]
    policy_root: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TestFormat {
    Human,
    Json,
    Junit,
}

pub fn run(args: TestArgs) -> ExitCode {
    let paths = if args.paths.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        args.paths.clone()
    };
    let files = match test_files(&paths) {
        Ok(files) => files,
        Err(e) => return fail(e),
    };
    let policyvm = if args.run {
        match fixture::find_policyvm(args.policyvm.as_deref()) {
            Ok(path) => Some(path),
            Err(e) => return fail_with(exit::UNAVAILABLE, e),
        }
    } else {
        None
    };
    let loaded = match suite::load(&files, args.policy_root.as_deref()) {
        Ok(loaded) => loaded,
        Err(e) => return fail(e),
    };
    let (suites, diagnostics) = suite::prepare(&loaded);
    if !diagnostics.is_empty() {
        eprint!("{}", render_human(&loaded.ws.db, &diagnostics, use_color()));
    }
    let errors = diagnostics.iter().filter(|d| d.is_error()).count();
    if errors > 0 {
        eprintln!(
            "error: {errors} error{} in the tests or the policy they test; no test was run",
            if errors == 1 { "" } else { "s" }
        );
        return ExitCode::from(EXIT_ERRORS);
    }
    let mut results = Vec::new();
    for s in &suites {
        for case in &s.cases {
            if args
                .filter
                .as_deref()
                .is_some_and(|f| !case.name.contains(f))
            {
                continue;
            }
            let mut result = verdict::run(&s.body, case);
            if let (Some(vm), Some(root)) = (&policyvm, &case.root) {
                let started = std::time::Instant::now();
                result
                    .failures
                    .extend(fixture::run(&s.body, case, root, vm));
                result.duration += started.elapsed();
            }
            results.push(result);
        }
    }
    let text = match args.format {
        TestFormat::Human => report::human(&results),
        TestFormat::Json => report::json(&results),
        TestFormat::Junit => report::junit(&results),
    };
    out(text);
    if results.iter().all(verdict::TestResult::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::ERRORS)
    }
}

/// The test files named, directories replaced by the `*.test.policy` files
/// under them (recursively, sorted; links to directories not followed).
fn test_files(paths: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    let mut files = Vec::new();
    for path in paths {
        if !path.is_dir() {
            if !path.exists() {
                return Err(format!(
                    "cannot read `{}`: no such file or directory",
                    path.display()
                ));
            }
            files.push(path.clone());
            continue;
        }
        let before = files.len();
        let mut pending = vec![path.clone()];
        while let Some(dir) = pending.pop() {
            let entries = std::fs::read_dir(&dir)
                .map_err(|e| format!("cannot read directory `{}`: {e}", dir.display()))?;
            let mut found: Vec<(PathBuf, bool)> = Vec::new();
            for entry in entries {
                let entry =
                    entry.map_err(|e| format!("cannot read directory `{}`: {e}", dir.display()))?;
                let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
                found.push((entry.path(), is_dir));
            }
            for (p, is_dir) in found {
                if is_dir {
                    pending.push(p);
                } else if crate::testing::is_test_file(&p) {
                    // `./web.test.policy` is named `web.test.policy`.
                    files.push(p.strip_prefix(".").map(PathBuf::from).unwrap_or(p));
                }
            }
        }
        if files.len() == before {
            return Err(format!(
                "`{}` contains no `*{TEST_SUFFIX}` files",
                path.display()
            ));
        }
    }
    files.sort();
    files.dedup();
    Ok(files)
}
