//! The collector's database: SQLite (one file, the default) or PostgreSQL
//! (several collectors share it), behind one [`Store`].
//!
//! Both backends run the same SQL through `sqlx::Any`: `$N` placeholders,
//! `INSERT … ON CONFLICT`, `RETURNING` and `BIGINT` columns mean the same
//! on SQLite (>= 3.35) and PostgreSQL, so the statements live once, in
//! [`write`], [`read`] and [`prune`]. Only connecting and the migration
//! directory differ ([`sqlite`], [`postgres`]). Every value is a bound
//! parameter; the only SQL text built at run time is a list of
//! placeholders for a multi-row insert.

mod postgres;
pub mod prune;
pub mod read;
pub mod schema;
mod sqlite;
pub mod watch;
pub mod write;

use sqlx::any::AnyPoolOptions;
use sqlx::AnyPool;

pub use schema::*;
pub use watch::TamperedRow;

/// Which database a [`Store`] talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend a `--database` URL names.
    pub fn of_url(url: &str) -> Result<Backend, StoreError> {
        if url.starts_with("sqlite:") {
            Ok(Backend::Sqlite)
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Backend::Postgres)
        } else {
            Err(StoreError::Url(format!(
                "{:?} is not a database URL this collector reads",
                redact(url)
            )))
        }
    }
}

/// A problem with the database.
#[derive(Debug)]
pub enum StoreError {
    /// The `--database` value cannot be used.
    Url(String),
    /// The migrations failed.
    Migrate(sqlx::migrate::MigrateError),
    /// A query failed.
    Sql(sqlx::Error),
    /// A value the database cannot hold.
    Invalid(String),
}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::Url(e) => f.write_str(e),
            StoreError::Migrate(e) => write!(f, "migrating the database schema: {e}"),
            StoreError::Sql(e) => write!(f, "database: {e}"),
            StoreError::Invalid(e) => f.write_str(e),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> StoreError {
        StoreError::Sql(e)
    }
}

/// The database. Cheap to clone (pools are shared).
#[derive(Clone, Debug)]
pub struct Store {
    backend: Backend,
    /// Ingest and pruning. One connection on SQLite (it has one writer
    /// anyway; a queue in the pool beats sleeping in SQLite's busy
    /// handler), several on PostgreSQL.
    writer: AnyPool,
    /// The fleet queries.
    reader: AnyPool,
}

impl Store {
    /// Connects (creating an SQLite file when missing) and brings the
    /// schema up to date. Several collectors may run this at once on one
    /// PostgreSQL database: the migrator takes an advisory lock.
    pub async fn open(url: &str) -> Result<Store, StoreError> {
        sqlx::any::install_default_drivers();
        let backend = Backend::of_url(url)?;
        let url = match backend {
            Backend::Sqlite => sqlite::prepare_url(url)?,
            Backend::Postgres => url.to_owned(),
        };
        let (writers, readers) = match backend {
            Backend::Sqlite => (1, 4),
            Backend::Postgres => (8, 8),
        };
        let writer = pool(backend, writers).connect(&url).await?;
        match backend {
            Backend::Sqlite => sqlite::migrate(&writer).await?,
            Backend::Postgres => postgres::migrate(&writer).await?,
        }
        let reader = pool(backend, readers).connect(&url).await?;
        Ok(Store {
            backend,
            writer,
            reader,
        })
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Closes both pools (tests reopen the same file).
    pub async fn close(&self) {
        self.writer.close().await;
        self.reader.close().await;
    }
}

fn pool(backend: Backend, size: u32) -> AnyPoolOptions {
    let options = AnyPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(std::time::Duration::from_secs(30));
    match backend {
        Backend::Sqlite => options.after_connect(|conn, _| Box::pin(sqlite::tune(conn))),
        Backend::Postgres => options,
    }
}

/// `url` without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = url.get(scheme + 3..at).unwrap_or_default();
            match userinfo.split_once(':') {
                Some((user, _)) => format!(
                    "{}{user}:***{}",
                    url.get(..scheme + 3).unwrap_or_default(),
                    url.get(at..).unwrap_or_default()
                ),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

/// Text derived from a report, made storable everywhere: PostgreSQL `TEXT`
/// cannot hold NUL, so a NUL becomes U+FFFD in the derived columns. The
/// signed bytes are kept verbatim in `reports.raw`.
pub fn storable(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains('\0') {
        std::borrow::Cow::Owned(text.replace('\0', "\u{FFFD}"))
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// A report's unsigned count as a database integer (saturating: a count
/// past 2^63 is a lie by the host, not worth refusing the run for).
pub fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            redact("postgres://app:secret@db:5432/fleet"),
            "postgres://app:***@db:5432/fleet"
        );
        assert_eq!(redact("sqlite://x.db"), "sqlite://x.db");
        assert_eq!(redact("postgres://app@db/fleet"), "postgres://app@db/fleet");
    }

    #[test]
    fn nul_is_replaced_only_where_present() {
        assert_eq!(storable("a\0b"), "a\u{FFFD}b");
        assert!(matches!(storable("ab"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn backends_are_told_by_scheme() {
        assert_eq!(Backend::of_url("sqlite://a.db").ok(), Some(Backend::Sqlite));
        assert_eq!(
            Backend::of_url("postgresql://h/db").ok(),
            Some(Backend::Postgres)
        );
        assert!(Backend::of_url("mysql://h/db").is_err());
    }
}
