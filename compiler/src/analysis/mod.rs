//! The static analyses of the compiler: what can be proved about a policy
//! without running it on a host.
//!
//! - [`sat`]: whether a class guard, or two guards together, can ever be
//!   true, with a witness assignment of classes when they can. It is exact
//!   (never a false "satisfiable" or "unsatisfiable"), so diagnostics built
//!   on it are never guesses.
//!
//! Later analyses live here too and build on [`sat`]: dead promises (a guard
//! that can never hold), contradictions (two promises on the same resource
//! whose guards can hold together) and cycle detection in promise ordering.

pub mod contradictions;
pub mod dead;
pub mod defaults;
pub mod guards;
pub mod lines;
pub mod missing;
pub mod objects;
pub mod ordering;
pub mod sat;
pub mod unmanaged;
