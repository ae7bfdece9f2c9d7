//! `converge-collector`: receives the hosts' signed run reports
//! (`converge-report/1`), verifies them against the inventory, stores them
//! in SQLite or PostgreSQL, and answers fleet queries (docs/fleet.md).
//!
//! The pieces, in the order a report meets them: [`server`] (connections,
//! TLS, limits), [`api`] (routes, body cap, auth), [`ingest`] (envelope,
//! inventory, signature), [`store`] (the database), [`fleet`] (views for
//! the API and the dashboard), [`metrics`], [`retention`]; [`web`] renders the fleet views
//! as the dashboard's HTML pages.

pub mod api;
pub mod cli;
pub mod config;
pub mod fleet;
pub mod ingest;
pub mod inventory;
pub mod metrics;
pub mod retention;
pub mod rollout;
pub mod run;
pub mod server;
pub mod store;
pub mod tampered;
pub mod tls;
pub mod web;
