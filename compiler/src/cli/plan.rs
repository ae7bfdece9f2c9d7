//! `policyc plan OLD NEW [--inventory FILE] [--facts-from DIR|URL] [--format json]`

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::{exit, fail_with, out, use_color};
use crate::fleet::curl::{Client, FetchError};
use crate::fleet::views::{self, FactsList};
use crate::plan::build::{build, BuildError, Built};
use crate::plan::facts;

#[derive(Debug, Args)]
pub struct PlanArgs {
    /// The policy as it is now: its entry file (the one with the `policy`
    /// block, as `policyc build` takes it) or its tree (a directory holding
    /// one program).
    old: PathBuf,
    /// The policy as it would be, in the same form.
    new: PathBuf,
    /// The hosts to plan for (docs/fleet.md). Both policies are checked
    /// against it. Default: the `inventory.toml` at the root of NEW's tree.
    #[arg(long, value_name = "FILE")]
    inventory: Option<PathBuf>,
    /// What the hosts reported, over the inventory's static facts: a
    /// directory of `HOST.json` files (`policyvm facts --format json` on
    /// each host), or the collector's URL (`https://collector:8470`).
    #[arg(long = "facts-from", value_name = "DIR|URL")]
    facts_from: Option<String>,
    /// With a collector: the CA certificate (PEM) that signed its
    /// certificate, when the system's CAs did not.
    #[arg(long, value_name = "FILE")]
    ca_file: Option<PathBuf>,
    /// With a collector: a file holding its read token.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// With a collector: seconds the request may take.
    #[arg(long, default_value_t = 30, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    timeout: u64,
    /// Text for people, or `converge-plan/1` JSON for tools.
    #[arg(long, value_enum, default_value_t = PlanFormat::Human)]
    format: PlanFormat,
    /// How many host names each group shows before "and N more" (the JSON
    /// names every host).
    #[arg(long, default_value_t = 10, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    hosts_shown: u64,
    /// Threads resolving hosts (default: one per core).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1024))]
    jobs: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlanFormat {
    Human,
    Json,
}

pub fn run(args: PlanArgs) -> ExitCode {
    match plan(&args) {
        Ok(code) => code,
        Err(code) => code,
    }
}

fn plan(args: &PlanArgs) -> Result<ExitCode, ExitCode> {
    if let Some(path) = &args.inventory {
        if let Err(e) = std::fs::metadata(path) {
            return Err(fail_with(
                exit::NO_INPUT,
                format!("cannot read the inventory `{}`: {e}", path.display()),
            ));
        }
    }
    let color = use_color();
    let old = side("old", &args.old, args.inventory.as_deref(), color)?;
    let new = side("new", &args.new, args.inventory.as_deref(), color)?;
    let Some(inventory) = new.inventory.as_ref() else {
        return Err(fail_with(
            exit::USAGE,
            format!(
                "there are no hosts to plan for: `{}` has no `inventory.toml` at its root; pass `--inventory FILE`",
                args.new.display()
            ),
        ));
    };
    let mut hosts = facts::from_inventory(inventory).map_err(|e| fail_with(exit::NO_INPUT, e))?;
    let notes = match &args.facts_from {
        None => Vec::new(),
        Some(from) if from.starts_with("http://") || from.starts_with("https://") => {
            let view = fleet_facts(args, from)?;
            facts::overlay_fleet(&mut hosts, &view).map_err(|e| fail_with(exit::PROTOCOL, e))?;
            Vec::new()
        }
        Some(dir) => facts::overlay_dir(&mut hosts, Path::new(dir))
            .map_err(|e| fail_with(exit::NO_INPUT, e))?,
    };
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| usize::try_from(n).unwrap_or(1),
    );
    let mut plan = crate::plan::plan(&old, &new, &hosts, jobs);
    plan.notes = notes;
    match args.format {
        PlanFormat::Human => out(crate::plan::render::human(
            &plan,
            usize::try_from(args.hosts_shown).unwrap_or(usize::MAX),
        )),
        PlanFormat::Json => out(format!("{:#}\n", crate::plan::json::plan_json(&plan))),
    }
    Ok(ExitCode::from(if plan.changes_anything() {
        exit::CHANGES
    } else {
        exit::OK
    }))
}

/// Builds one side; its errors are printed, saying which side.
fn side(
    label: &str,
    path: &Path,
    inventory: Option<&Path>,
    color: bool,
) -> Result<Built, ExitCode> {
    build(path, inventory, color).map_err(|e| match e {
        BuildError::Input(message) => fail_with(exit::NO_INPUT, message),
        BuildError::Errors(rendered) => {
            eprint!("{rendered}");
            fail_with(
                exit::ERRORS,
                format!(
                    "the {label} policy `{}` has errors; nothing was planned",
                    path.display()
                ),
            )
        }
    })
}

/// The collector's facts of every host, through curl as `policyc fleet
/// facts` asks for them.
fn fleet_facts(args: &PlanArgs, url: &str) -> Result<FactsList, ExitCode> {
    let base = super::fleet::collector_url(url).map_err(|e| fail_with(exit::USAGE, e))?;
    if let Some(ca) = &args.ca_file {
        if let Err(e) = std::fs::File::open(ca) {
            return Err(fail_with(
                exit::NO_INPUT,
                format!("cannot read the CA file `{}`: {e}", ca.display()),
            ));
        }
    }
    let token = match &args.token_file {
        Some(path) => {
            Some(super::fleet::read_token(path).map_err(|e| fail_with(exit::NO_INPUT, e))?)
        }
        None => None,
    };
    let client = Client {
        base,
        ca_file: args.ca_file.clone(),
        token,
        timeout: args.timeout,
        program: "curl".into(),
    };
    let (path, params) = crate::fleet::Query::Facts { host: None }.request();
    let body = client.get(&path, &params).map_err(|e| {
        let code = match e {
            FetchError::Garbled { .. } => exit::PROTOCOL,
            _ => exit::UNAVAILABLE,
        };
        fail_with(code, format!("--facts-from: {e}"))
    })?;
    views::parse(&body).map_err(|e| {
        fail_with(
            exit::PROTOCOL,
            format!("--facts-from: {}: {}", client.url(&path), e.0),
        )
    })
}
