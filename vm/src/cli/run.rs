//! `policyvm run BUNDLE --trust DIR [--root DIR] [--state DIR] [--dry-run |
//! --interactive] [--define CLASS]... [--report FILE] [--format human|json]`
//!
//! Exit codes: 0 converged without failures, 1 some promise failed, 2 not
//! converged within the pass limit, 3 the bundle was refused (the reason is
//! printed as by `policyvm verify`), 64 usage error (also `--interactive`
//! without a terminal on standard input), 66 unreadable input,
//! 73 the state directory cannot be created or is unsafe, 75 another run
//! holds the state directory's lock (try again later).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::exit::{
    BUSY as EXIT_BUSY, CANT_CREATE as EXIT_STATE, FAILED as EXIT_FAILED,
    NOT_CONVERGED as EXIT_NOT_CONVERGED, NO_INPUT as EXIT_NO_INPUT, REFUSED as EXIT_REFUSED,
    USAGE as EXIT_USAGE,
};
use super::{out, prompt};
use crate::bundle::keys::load_trust_dir;
use crate::bundle::open;
use crate::run::interactive::Proposal;
use crate::run::lock::{LockError, RunLock};
use crate::run::operators::Outcome;
use crate::run::{report, run_interactive, run_owned as converge, RunOptions};
use crate::state::{default_dir, StateDir};
use std::io::IsTerminal as _;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The bundle to run.
    bundle: PathBuf,
    /// The directory of trusted public keys (`*.pub`).
    #[arg(long, value_name = "DIR")]
    trust: PathBuf,
    /// Resolve every path of the policy inside this directory (a sandbox,
    /// an image, a container root).
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Where the run keeps its state and takes its lock (one run at a time
    /// per state directory); by default `ROOT/var/lib/converge`. It must
    /// belong to the user running policyvm and not be writable by others.
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Check everything and report what would change; change nothing.
    #[arg(long, conflicts_with = "interactive")]
    dry_run: bool,
    /// Show each repair (the promise and its diff) before making it, and
    /// make it only when answered "y" or "yes"; a declined repair is
    /// skipped (`declined`). Standard input must be a terminal.
    #[arg(long)]
    interactive: bool,
    /// Set a class for this run (it must be declared in the policy).
    #[arg(long = "define", value_name = "CLASS")]
    defines: Vec<String>,
    /// Also write the JSON report to this file.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// How to print the report.
    #[arg(long, value_enum, default_value_t = RunFormat::Human)]
    format: RunFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum RunFormat {
    Human,
    Json,
}

pub fn run(args: RunArgs) -> ExitCode {
    if args.interactive && !std::io::stdin().is_terminal() {
        eprintln!(
            "error: --interactive asks before each repair and needs a terminal on standard \
             input; run it from a terminal, or without --interactive (--dry-run shows what \
             would change)"
        );
        return ExitCode::from(EXIT_USAGE);
    }
    let keys = match load_trust_dir(&args.trust) {
        Ok(k) => k,
        Err(e) => {
            eprintln!("error: cannot load trusted keys: {e}");
            return ExitCode::from(EXIT_NO_INPUT);
        }
    };
    let bytes = match std::fs::read(&args.bundle) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("error: cannot read `{}`: {e}", args.bundle.display());
            return ExitCode::from(EXIT_NO_INPUT);
        }
    };
    let verified = match open(&bytes, &keys) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("refused {}: {e}", args.bundle.display());
            // Whoever reads the JSON (stdout or `--report`) learns why
            // there is no run, instead of finding nothing.
            if args.report.is_some() || args.format == RunFormat::Json {
                let reason = e.to_string();
                let value = report::refused_json(&args.bundle.display().to_string(), &reason);
                emit_json(&args, |out| serde_json::to_writer_pretty(out, &value));
            }
            return ExitCode::from(EXIT_REFUSED);
        }
    };
    give_back(bytes);
    // Taken after the bundle is verified (a refused bundle never waits on
    // nor blocks anyone) and held until the report is out.
    let (_lock, state) = match lock(&args) {
        Ok(Some((lock, state))) => (Some(lock), Some(state)),
        Ok(None) => (None, None),
        Err(code) => return ExitCode::from(code),
    };
    // Files stored beside the bundle (format 2.6): `blobs/` next to it,
    // then the state directory's cache (where the agent keeps them).
    let mut blobs = vec![converge_format::blobs::dir_beside(&args.bundle)];
    blobs.extend(state.as_ref().map(crate::blobs::cache_dir));
    let opts = RunOptions {
        root: args.root.clone(),
        dry_run: args.dry_run,
        defines: args.defines.clone(),
        state,
        blobs,
    };
    let result = if args.interactive {
        let mut input = std::io::stdin().lock();
        let mut confirm = |p: &Proposal<'_>| prompt::ask(p, &mut input, &mut std::io::stderr());
        let result = run_interactive(&verified, &opts, &mut confirm);
        // Left to the exit, as the report is below.
        std::mem::forget(verified);
        result
    } else {
        let (result, rest) = converge(verified, &opts);
        // Left to the exit, as the report is below.
        std::mem::forget(rest);
        result
    };
    let result = match result {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(EXIT_NO_INPUT);
        }
    };
    // The JSON document is only written when asked for, and written as it
    // is serialized: as a tree (or a string) it would be most of the VM's
    // memory on a large policy.
    if args.report.is_some() || args.format == RunFormat::Json {
        emit_json(&args, |out| report::write_json(&result, out));
    }
    if args.format == RunFormat::Human {
        let streams = report::human_streams(&result);
        out(streams.out);
        eprint!("{}", streams.problems);
    }
    let code = if !result.converged {
        ExitCode::from(EXIT_NOT_CONVERGED)
    } else if result.count(|o| matches!(o, Outcome::Failed(_))) > 0 {
        ExitCode::from(EXIT_FAILED)
    } else {
        ExitCode::SUCCESS
    };
    // The process ends now: the report and the decoded bundle are left to
    // the exit instead of being freed piece by piece (an allocation or more
    // per promise; a tenth of a converged run's own time at 10,000 files).
    // They hold no file, lock or secret (secrets are opened per use and
    // zeroized there); the state lock is released as before.
    std::mem::forget(result);
    code
}

/// Writes a JSON report (`write` serializes it into a writer) to
/// `--report FILE` and, with `--format json`, to standard output,
/// followed by a newline there.
fn emit_json(args: &RunArgs, write: impl Fn(&mut dyn std::io::Write) -> serde_json::Result<()>) {
    use std::io::Write as _;
    if let Some(path) = &args.report {
        if let Err(e) = write_report(path, &write) {
            eprintln!(
                "error: cannot write the report to `{}`: {e}",
                path.display()
            );
        }
    }
    if args.format == RunFormat::Json {
        let mut stdout = std::io::BufWriter::new(std::io::stdout().lock());
        // Standard output closed early (`| head`): nothing more to say.
        let _ = write(&mut stdout)
            .map_err(std::io::Error::from)
            .and_then(|()| stdout.write_all(b"\n"))
            .and_then(|()| stdout.flush());
    }
}

/// Takes the lock of the run's state directory, and returns it with the
/// directory (owed notifications and backups live there). A dry run
/// changes nothing, not even the state directory: where there is none
/// yet, it runs without the lock (and nothing is owed).
fn lock(args: &RunArgs) -> Result<Option<(RunLock, StateDir)>, u8> {
    let dir = args
        .state
        .clone()
        .unwrap_or_else(|| default_dir(&args.root));
    if args.dry_run && std::fs::symlink_metadata(&dir).is_err() {
        return Ok(None);
    }
    let state = StateDir::open_under(&args.root, &dir).map_err(|e| {
        eprintln!("error: state directory `{}`: {e}", dir.display());
        EXIT_STATE
    })?;
    match state.lock() {
        Ok(lock) => Ok(Some((lock, state))),
        Err(e @ LockError::Busy) => {
            eprintln!(
                "busy: {e} (`{}`); this run did nothing, the next one will converge",
                dir.display()
            );
            Err(EXIT_BUSY)
        }
        Err(e) => {
            eprintln!("error: `{}`: {e}", dir.display());
            Err(EXIT_STATE)
        }
    }
}

/// Writes the `--report` file atomically, never through a link: the text
/// goes to a new temporary file in the same directory (created with
/// `O_EXCL`, mode 0600: a report holds command output), which is then
/// renamed over `path`. A link planted at `path` is replaced, not followed
/// (issue 14, item 20); a reader never sees half a report.
fn write_report(
    path: &std::path::Path,
    write: impl Fn(&mut dyn std::io::Write) -> serde_json::Result<()>,
) -> std::io::Result<()> {
    use std::io::Write as _;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    let mut file = tempfile::Builder::new()
        .prefix(".report.")
        .tempfile_in(dir)?;
    {
        let mut buffered = std::io::BufWriter::new(file.as_file_mut());
        write(&mut buffered)?;
        buffered.flush()?;
    }
    file.as_file().sync_all()?;
    file.persist(path).map_err(|e| e.error)?;
    Ok(())
}

/// Gives the bundle's bytes back to the system without freeing them:
/// shrunk to one byte, the block a large file was read into is made one
/// page (glibc `realloc`s a mapped block with `mremap`). A `free` of it
/// would make glibc's malloc raise its mapping threshold to the bundle's
/// size, and then hold every later block below that size (the pass's
/// vectors, the report's results) in its heap, where what is freed stays
/// resident: 0.7 MB more at the peak of a 10,000-file run (issue 22, item
/// 3; docs/performance.md, "Session 11").
fn give_back(mut bytes: Vec<u8>) {
    bytes.clear();
    bytes.shrink_to(1);
    std::mem::forget(bytes);
}
