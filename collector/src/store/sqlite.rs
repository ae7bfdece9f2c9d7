//! SQLite specifics: the URL (file created when missing), WAL mode, and
//! the SQLite migration set.

use sqlx::{AnyConnection, Executor as _};

use super::StoreError;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// Adds `mode=rwc` (create the file when missing) unless the URL says
/// otherwise, so `sqlite:///var/lib/converge/collector.db` just works.
pub(super) fn prepare_url(url: &str) -> Result<String, StoreError> {
    if url.contains("mode=") {
        return Ok(url.to_owned());
    }
    let separator = if url.contains('?') { '&' } else { '?' };
    Ok(format!("{url}{separator}mode=rwc"))
}

/// Per-connection settings: WAL (readers never block the writer), commits
/// that skip the fsync WAL makes safe to skip (a power cut may lose the
/// last reports; the agents re-send what was not acknowledged... and what
/// was is at worst re-sent as a duplicate), and a busy timeout for the
/// moments two processes share the file.
pub(super) async fn tune(conn: &mut AnyConnection) -> Result<(), sqlx::Error> {
    conn.execute("PRAGMA journal_mode = WAL").await?;
    conn.execute("PRAGMA synchronous = NORMAL").await?;
    conn.execute("PRAGMA busy_timeout = 10000").await?;
    conn.execute("PRAGMA foreign_keys = ON").await?;
    Ok(())
}

pub(super) async fn migrate(pool: &sqlx::AnyPool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await.map_err(StoreError::Migrate)
}
