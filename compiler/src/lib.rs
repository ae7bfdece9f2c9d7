//! `policyc`: the Converge compiler. Reads policy source, reports problems as
//! [`diagnostic::Diagnostic`]s, and (in later stages) analyses, compiles and
//! signs it.
//!
//! Layout: [`source`] holds the files of a compilation; [`syntax`] words
//! the parser's errors; [`diagnostic`] is the data every phase produces and
//! [`render`] draws it; [`cli`] is the command line.

pub mod check;
pub mod cli;
pub mod diagnostic;
pub mod render;
pub mod source;
pub mod syntax;
