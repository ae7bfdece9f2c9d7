//! `policyvm facts [--root DIR] [--format human|json]`

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use super::out;
use crate::facts::{FactValue, Facts};
use crate::schema::FACTS;

#[derive(Debug, Args)]
pub struct FactsArgs {
    /// The system image to describe (its `etc/os-release`, `etc/hostname`,
    /// `etc/hosts`); the machine facts come from the running kernel.
    #[arg(long, value_name = "DIR", default_value = "/")]
    root: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value_t = FactsFormat::Human)]
    format: FactsFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FactsFormat {
    Human,
    Json,
}

pub fn facts(args: FactsArgs) -> ExitCode {
    let facts = Facts::gather(&args.root);
    let classes = facts.hard_classes();
    match args.format {
        FactsFormat::Human => {
            let mut text = String::new();
            for spec in FACTS {
                let value = match facts.get(spec.name) {
                    Some(FactValue::Str(s)) => format!("{s:?}"),
                    Some(FactValue::Int(i)) => i.to_string(),
                    Some(FactValue::List(l)) => format!("{l:?}"),
                    None => String::new(),
                };
                text.push_str(&format!("{:<18} {value}\n", spec.name));
            }
            text.push_str(&format!("hard classes:      {}\n", classes.join(" ")));
            out(text);
        }
        FactsFormat::Json => {
            let mut map = serde_json::Map::new();
            for spec in FACTS {
                let value = match facts.get(spec.name) {
                    Some(FactValue::Str(s)) => serde_json::Value::from(s),
                    Some(FactValue::Int(i)) => serde_json::Value::from(i),
                    Some(FactValue::List(l)) => serde_json::Value::from(l),
                    None => serde_json::Value::Null,
                };
                map.insert(spec.name.to_owned(), value);
            }
            let doc = serde_json::json!({ "format": "converge-facts/1", "facts": map, "classes": classes });
            out(format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            ));
        }
    }
    ExitCode::SUCCESS
}
