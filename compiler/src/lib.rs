//! `policyc`: the Converge compiler. Reads policy source, reports problems as
//! [`diagnostic::Diagnostic`]s, analyses the expanded program ([`analysis`]),
//! compiles and signs it into a bundle ([`bundle`]), formats it ([`fmt`]) and
//! serves editors ([`lsp`]).
//!
//! Layout, in pipeline order: [`workspace`] loads files and follows imports;
//! [`syntax`] words the parser's errors; [`sema`] resolves names, checks
//! types and expands the program into the flat [`ir`]; [`check`] runs it
//! all. [`diagnostic`] is the data every phase produces and [`render`] draws
//! it; [`cli`] is the command line.

pub mod analysis;
pub mod bundle;
pub mod check;
pub mod cli;
pub mod data;
pub mod diagnostic;
pub mod dot;
pub mod explain;
pub mod explain_secrets;
pub mod fleet;
pub mod fmt;
#[cfg(test)]
mod goldens;
pub mod graph;
pub mod host_facts;
pub mod ir;
pub mod lsp;
pub mod plan;
pub mod policy_tree;
pub mod render;
pub mod sema;
pub mod source;
pub mod suggest;
pub mod syntax;
pub mod testing;
pub mod workspace;
