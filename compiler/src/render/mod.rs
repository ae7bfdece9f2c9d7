//! Renderers of [`Diagnostic`](crate::diagnostic::Diagnostic) data. Nothing
//! outside this module knows about ariadne, JSON or SARIF layouts.

mod human;
mod json;
mod location;
pub mod rule_docs;
mod sarif;
pub mod sarif_paths;

pub use human::render_human;
pub use json::render_json;
pub use sarif::{render_sarif, render_sarif_failure};
pub use sarif_paths::SarifRoot;

/// Output format of `policyc check` and friends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Annotated source snippets for people (colour only on a terminal).
    Human,
    /// `{"diagnostics": [...]}` for scripts.
    Json,
    /// SARIF 2.1.0 for code-scanning dashboards.
    Sarif,
}
