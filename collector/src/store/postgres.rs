//! PostgreSQL specifics: its migration set (`BIGSERIAL`, `BYTEA`). Several
//! collectors may migrate at once: sqlx's migrator holds an advisory lock.

use super::StoreError;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

pub(super) async fn migrate(pool: &sqlx::AnyPool) -> Result<(), StoreError> {
    MIGRATOR.run(pool).await.map_err(StoreError::Migrate)
}
