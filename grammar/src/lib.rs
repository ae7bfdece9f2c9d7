//! The front end of the Converge policy language: tokens ([`token`]), the
//! spanned syntax tree ([`ast`]) and the error-recovering parser ([`parse`]).
//!
//! Nothing here resolves names or checks types; that is the compiler's job.
//! The crate is separate so that the generated LR tables are rebuilt only
//! when the grammar changes, and so the language server can parse without
//! linking the back end.

pub mod ast;
pub mod lexer;
pub mod parse;
pub mod span;
pub mod spanless;
pub mod split;
pub mod strings;
pub mod template;
pub mod token;
pub mod trivia;

lalrpop_util::lalrpop_mod!(
    #[allow(
        clippy::all,
        clippy::pedantic,
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::panic,
        missing_debug_implementations,
        unused_qualifications
    )]
    grammar
);

pub use parse::{parse, parse_tests, SyntaxError, SyntaxErrorKind};
pub use span::{FileId, Span};
pub use template::{nodes, parse_template, Node};
pub use trivia::{comments, Comment};
