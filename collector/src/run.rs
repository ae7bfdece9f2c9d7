//! The subcommands, wired together.

use std::io::Write as _;
use std::sync::Arc;

use crate::api::{self, App, Limits};
use crate::cli::{PruneArgs, ServeArgs};
use crate::inventory::InventoryFile;
use crate::server::{self, ConnectionLimits};
use crate::store::{redact, Store};

/// `converge-collector serve`: runs until SIGTERM or SIGINT.
pub async fn serve(args: ServeArgs) -> Result<(), String> {
    let config = crate::config::check(&args)?;
    let inventory = InventoryFile::load(&args.inventory)?;
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(crate::tls::acceptor(cert, key)?),
        _ => None,
    };
    let store = Store::open(&args.database)
        .await
        .map_err(|e| format!("--database {}: {e}", redact(&args.database)))?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("--listen {}: {e}", args.listen))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("--listen {}: {e}", args.listen))?;
    if args.retention_days > 0 {
        tokio::spawn(crate::retention::run(store.clone(), args.retention_days));
    }
    let app = Arc::new(App {
        store,
        inventory,
        interval: config.interval,
        token: config.token,
    });
    let router = api::router(
        app,
        Limits {
            request_timeout: config.request_timeout,
            ..Limits::default()
        },
    );
    let scheme = if tls.is_some() { "https" } else { "http" };
    tracing::info!(database = %redact(&args.database), "listening on {scheme}://{address}");
    // Scripts and tests read the bound address (port 0) from this line.
    let mut stdout = std::io::stdout();
    let _ = writeln!(
        stdout,
        "converge-collector: listening on {scheme}://{address}"
    );
    let _ = stdout.flush();
    let limits = ConnectionLimits {
        max_connections: args.max_connections,
        header_timeout: config.header_timeout,
        ..ConnectionLimits::default()
    };
    server::serve(listener, router, tls, limits, shutdown_signal()).await;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// `converge-collector prune`: one retention pass; prints what it did.
pub async fn prune(args: PruneArgs) -> Result<(), String> {
    let store = Store::open(&args.database)
        .await
        .map_err(|e| format!("--database {}: {e}", redact(&args.database)))?;
    let stats = crate::retention::prune(&store, args.retention_days)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "converge-collector: pruned {} reports older than {} days into {} daily summaries",
        stats.reports_deleted, args.retention_days, stats.summaries_touched
    );
    Ok(())
}
