//! Connections, the schema and maintenance: the pool every session comes
//! from (its timeouts and plan mode set at start-up, no round trip of
//! their own, or as a pooler allows: `pooler`), the embedded migrations and the check that the database holds
//! the schema this binary was built for, and the ledger partitions of the
//! dedup window (docs/design.md#the-dedup-window).

use std::time::Duration;

use chrono::NaiveDate;
use sqlx::postgres::PgConnectOptions;
use sqlx::{Connection as _, Row};

use crate::window::DedupWindow;

use super::maintenance_runs::{self, MaintainReport, MaintenanceTrigger};
use super::pooler::{DbPool, Limits, Pooler};
use super::StoreError;

const WINDOW_DAYS: &str = include_str!("../../sql/window_days.sql");
const MAINTAIN: &str = include_str!("../../sql/maintain.sql");
/// Closes the days over by the clock; sent alone (see the function).
pub(super) const CLOSE_DAYS: &str = "SELECT inbox_ledger_filter_close()";
/// Finds the first day of reservations that may hold a row, which the batch
/// looks its orders up from (docs/design.md#the-dedup-window).
const RESERVATIONS_CLOSE: &str = "SELECT inbox_reservations_close()";
const DROP_EXPIRED: &str = include_str!("../../sql/drop_expired.sql");
const PRUNE_PARKED: &str = include_str!("../../sql/prune_parked.sql");
const RETENTION: &str = include_str!("../../sql/retention.sql");
const SET_RETENTION: &str = include_str!("../../sql/set_retention.sql");
const COMPACT_CANDIDATES: &str = include_str!("../../sql/compact_candidates.sql");
const COMPACTED: &str = include_str!("../../sql/compacted.sql");

/// Parked rows deleted (or payloads cleared) per transaction of maintenance.
const PRUNE_STEP: i32 = 10_000;
/// Steps of parked-row pruning per maintenance run: a backlog larger than
/// this many steps is worked off over the next runs.
const PRUNE_STEPS_PER_RUN: usize = 100;

/// Days of ledger partitions made ahead of today (docs/design.md#the-dedup-window).
pub const PREMAKE_DAYS: i32 = 2;

/// Where the database is, what stands between (a pooler), and the limits
/// of every session.
#[derive(Debug, Clone, Copy)]
pub struct Connection<'a> {
    pub url: &'a str,
    /// `statement_timeout`; zero: none.
    pub statement_timeout: Duration,
    /// `lock_timeout`; zero: none.
    pub lock_timeout: Duration,
    /// `INBOX_DB_POOLER`.
    pub pooler: Pooler,
}

/// A pool of connections to the inventory database with one connection
/// made: a command run once fails at once, with one line saying why, when
/// the database cannot be reached or refuses it (see [`connect_lazy`]).
pub async fn connect(connection: Connection<'_>, lanes: u32) -> Result<DbPool, StoreError> {
    let pool = connect_lazy(connection, lanes)?;
    pool.reachable().await?;
    Ok(pool)
}

/// A pool of connections to the inventory database: one for each of `lanes`
/// concurrent batches (each keeps its own, see [`super::Inbox`]) and one more for
/// everything else (the window, maintenance). Nothing is connected yet:
/// `run` waits for a database that is down at its start.
pub fn connect_lazy(connection: Connection<'_>, lanes: u32) -> Result<DbPool, StoreError> {
    let options: PgConnectOptions = connection.url.parse().map_err(|_| StoreError::Rejected {
        sqlstate: String::new(),
        message: "DATABASE_URL is not a valid PostgreSQL URL".into(),
    })?;
    let limits = Limits {
        statement_timeout: connection.statement_timeout,
        lock_timeout: connection.lock_timeout,
    };
    let options = options.application_name("inventory-inbox");
    let options = match connection.pooler {
        // The limits go in the start-up packet: no round trip of their own.
        Pooler::None => options.options(limits.options()),
        // A pooler refuses start-up parameters it does not know, PgBouncer
        // `extra_float_digits` too unless told to ignore it (no statement
        // of the service reads a float as text).
        Pooler::Session | Pooler::Transaction => options.extra_float_digits(None),
    };
    Ok(DbPool::new(options, connection.pooler, limits, lanes + 1))
}

/// What maintenance keeps (docs/design.md#the-dedup-window): the database's
/// own settings (`inbox_settings`), written by `migrate` as the owner role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Days of ledger partitions behind today: the dedup window.
    pub ledger_days: i32,
    /// Days a parked row is kept.
    pub parked_days: i32,
    /// Days after which a parked row's payload is cleared; 0 keeps it.
    pub parked_payload_days: i32,
    /// Days of reservation partitions behind today (at least `ledger_days`).
    pub reservation_days: i32,
    /// An expired day of reservations is detached, not dropped.
    pub detach_reservations: bool,
}

/// Applies the embedded migrations, writes the retention into the database
/// (the owner's to set; it applies to every consumer of the database), then
/// creates the partitions of the window.
pub async fn migrate(pool: &DbPool, retention: Retention) -> Result<MaintainReport, StoreError> {
    if pool.pooler() == Pooler::Transaction {
        // The migrator holds a session's advisory lock across transactions.
        return Err(StoreError::Schema(
            "`migrate` cannot run through a transaction pooler (INBOX_DB_POOLER=transaction): run it against PostgreSQL directly, or through a session pool".into(),
        ));
    }
    // The retention is new to a database that had no settings: none
    // changed.
    let first: bool = sqlx::query_scalar("SELECT to_regclass('inbox_settings') IS NULL")
        .fetch_one(pool)
        .await?;
    MIGRATOR.run(pool.pg()).await?;
    let before = sqlx::query(SET_RETENTION)
        .bind(retention.ledger_days)
        .bind(PREMAKE_DAYS)
        .bind(retention.parked_days)
        .bind(retention.parked_payload_days)
        .bind(retention.reservation_days)
        .bind(if retention.detach_reservations {
            "detach"
        } else {
            "drop"
        })
        .fetch_one(pool)
        .await?;
    let before = retention_of(&before)?;
    if !first && before != retention {
        tracing::info!(?before, now = ?retention, "the database's retention changed");
    }
    maintain(pool, MaintenanceTrigger::Migrate).await
}

/// The retention the database holds (`inbox_settings`).
pub async fn retention(pool: &DbPool) -> Result<Retention, StoreError> {
    let row = sqlx::query(RETENTION).fetch_one(pool).await?;
    retention_of(&row)
}

fn retention_of(row: &sqlx::postgres::PgRow) -> Result<Retention, StoreError> {
    Ok(Retention {
        ledger_days: row.try_get("retention_days")?,
        parked_days: row.try_get("parked_retention_days")?,
        parked_payload_days: row.try_get("parked_payload_days")?,
        reservation_days: row.try_get("reservation_retention_days")?,
        detach_reservations: row.try_get::<String, _>("reservation_expiry")? == "detach",
    })
}

/// The migrations embedded in this binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Checks that the database holds the inbox schema this binary was built
/// for: applied by `inventory-inbox migrate`, neither older nor newer.
pub async fn check_schema(pool: &DbPool) -> Result<(), StoreError> {
    let expected = MIGRATOR.iter().map(|m| m.version).max().unwrap_or_default();
    let found: Option<i64> =
        match sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations WHERE success")
            .fetch_one(pool)
            .await
        {
            Ok(version) => version,
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42P01") => None,
            Err(sqlx::Error::Database(db)) if db.code().as_deref() == Some("42501") => {
                return Err(StoreError::Schema(format!(
                    "cannot read the schema version ({}): the inbox schema is older than this binary; run `inventory-inbox migrate` as the owner role",
                    db.message()
                )))
            }
            Err(other) => return Err(other.into()),
        };
    match found {
        None => Err(StoreError::Schema(
            "the database has no inbox schema: run `inventory-inbox migrate` as the owner role first"
                .into(),
        )),
        Some(version) if version < expected => Err(StoreError::Schema(format!(
            "the inbox schema is older than this binary (version {version}, this binary needs {expected}): run `inventory-inbox migrate` as the owner role"
        ))),
        Some(version) if version > expected => Err(StoreError::Schema(format!(
            "the inbox schema is newer than this binary (version {version}, this binary knows up to {expected}): run the inventory-inbox release that migrated it, or a newer one"
        ))),
        Some(_) => Ok(()),
    }
}

/// Creates partitions ahead, then drops those older than the retention,
/// under an advisory lock, then prunes parked rows in bounded steps; each
/// step its own transaction, so that one that fails takes nothing of the
/// others back (docs/design.md#the-dedup-window); all as the database's
/// settings say. The run and its result are recorded
/// (`inbox_maintenance_run`, the console's overview); the record is for
/// people: a run that cannot be recorded is done all the same, and says
/// so in the log.
pub async fn maintain(pool: &DbPool, by: MaintenanceTrigger) -> Result<MaintainReport, StoreError> {
    let run = match maintenance_runs::begun(pool, by).await {
        Ok(run) => Some(run),
        Err(error) => {
            tracing::warn!(%error, "this maintenance run is not recorded");
            None
        }
    };
    let result = maintain_steps(pool).await;
    if let Some(run) = run {
        if let Err(error) = maintenance_runs::ended(pool, run, &result).await {
            tracing::warn!(%error, run, "the maintenance run's result was not recorded");
        }
    }
    result
}

async fn maintain_steps(pool: &DbPool) -> Result<MaintainReport, StoreError> {
    let created = sqlx::query(MAINTAIN).fetch_one(pool).await?;
    // The days over by the clock, closed for their filters: a statement of
    // its own (docs/design.md#the-filter-of-closed-days).
    sqlx::query(CLOSE_DAYS).execute(pool).await?;
    sqlx::query(RESERVATIONS_CLOSE).execute(pool).await?;
    let mut report = MaintainReport {
        locked: created.try_get("locked")?,
        created: created.try_get("created")?,
        dropped: 0,
        parked_deleted: 0,
        payloads_cleared: 0,
    };
    if report.locked {
        let dropped = sqlx::query(DROP_EXPIRED).fetch_one(pool).await?;
        report.dropped = dropped.try_get("dropped")?;
    }
    // The instance that held the lock prunes; the others leave it to it.
    let steps = if report.locked {
        PRUNE_STEPS_PER_RUN
    } else {
        0
    };
    for _ in 0..steps {
        let row = sqlx::query(PRUNE_PARKED)
            .bind(PRUNE_STEP)
            .fetch_one(pool)
            .await?;
        let deleted: i32 = row.try_get("deleted")?;
        let cleared: i32 = row.try_get("cleared")?;
        report.parked_deleted += deleted;
        report.payloads_cleared += cleared;
        if deleted < PRUNE_STEP && cleared < PRUNE_STEP {
            break;
        }
    }
    Ok(report)
}

/// What compaction did (docs/design.md#storage).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompactReport {
    /// False when this session does not own the tables: nothing was tried.
    pub owner: bool,
    /// Indexes rebuilt, and their bytes before and after.
    pub rebuilt: usize,
    pub bytes_before: i64,
    pub bytes_after: i64,
    /// Indexes whose rebuild failed (a lock not granted in time, say): tried
    /// again on the next run.
    pub failed: Vec<String>,
}

/// Rebuilds, once, the indexes of the ledger's and the reservations' closed
/// days (`REINDEX INDEX CONCURRENTLY`: writes go on), which fill in arrival
/// order and close about half empty. Only the tables' owner may: as another
/// role it does nothing. Each rebuild runs without the statement timeout
/// (it may take minutes), on one connection.
pub async fn compact(pool: &DbPool) -> Result<CompactReport, StoreError> {
    let candidates = sqlx::query(COMPACT_CANDIDATES).fetch_all(pool).await?;
    let mut report = CompactReport {
        owner: true,
        ..CompactReport::default()
    };
    if let Some(first) = candidates.first() {
        report.owner = first.try_get("owner")?;
    }
    if !report.owner {
        return Ok(report);
    }
    // A connection of its own, without sqlx's slow-statement warning: a
    // rebuild takes seconds to minutes by design (the statement timeout is
    // lifted for it alike). REINDEX CONCURRENTLY cannot run in a
    // transaction, so the lift is the session's: not through a transaction
    // pooler, where it would outlive the session on a server connection
    // others get, and a rebuild runs under the server's own default there.
    let mut connection = pool.connect_own().await?;
    if lifts_statement_timeout(pool.pooler()) {
        sqlx::raw_sql("SET statement_timeout = 0")
            .execute(&mut connection)
            .await?;
    }
    for row in candidates {
        let index: String = row.try_get("index_name")?;
        let before: i64 = row.try_get("bytes")?;
        let quoted = format!("\"{}\"", index.replace('"', "\"\""));
        // A closed day takes few inserts more (late events): its pages are
        // rebuilt full. REINDEX CONCURRENTLY runs outside a transaction, so
        // the two are separate statements.
        let full = format!("ALTER INDEX {quoted} SET (fillfactor = 100)");
        let rebuild = format!("REINDEX INDEX CONCURRENTLY {quoted}");
        let rebuilt = match sqlx::raw_sql(&full).execute(&mut connection).await {
            Ok(_) => sqlx::raw_sql(&rebuild).execute(&mut connection).await,
            Err(error) => Err(error),
        };
        if let Err(error) = rebuilt {
            tracing::warn!(%index, %error, "an index of a closed day was not rebuilt; tried again next time");
            report.failed.push(index);
            continue;
        }
        let after: i64 = sqlx::query_scalar(COMPACTED)
            .bind(&index)
            .bind(before)
            .fetch_one(pool)
            .await?;
        report.rebuilt += 1;
        report.bytes_before += before;
        report.bytes_after += after;
    }
    connection.close().await?;
    Ok(report)
}

/// Whether compaction's own connection lifts the statement timeout for its
/// rebuilds: not through a transaction pooler, where the session's `SET`
/// would outlive it on a server connection others get.
pub(super) fn lifts_statement_timeout(pooler: Pooler) -> bool {
    pooler != Pooler::Transaction
}

/// Makes the codes the ledger keeps for a consumer name and its topics
/// (`inbox_consumer`, `inbox_topic`), each statement its own transaction,
/// before the first batch. A batch that made one would hold it uncommitted
/// while it waits for its SKUs' locks, and every other lane's batch would
/// wait on it, to fail in turn when the wait times out.
pub async fn register_codes(
    pool: &DbPool,
    consumer: &str,
    topics: &[String],
) -> Result<(), StoreError> {
    // The consumer's code first, then the topics' by name: the order the
    // batch statement makes them in (apply_batch.sql).
    sqlx::query("SELECT inbox_consumer_code($1)")
        .bind(consumer)
        .execute(pool)
        .await?;
    sqlx::query(
        "SELECT count(inbox_topic_code(t))
         FROM (SELECT t FROM unnest($1::text[]) AS t ORDER BY t) AS topics",
    )
    .bind(topics)
    .execute(pool)
    .await?;
    Ok(())
}

/// Reads the dedup window: the days that have a ledger partition.
pub async fn load_window(pool: &DbPool) -> Result<DedupWindow, StoreError> {
    let days: Vec<NaiveDate> = sqlx::query_scalar(WINDOW_DAYS).fetch_all(pool).await?;
    Ok(DedupWindow::new(days))
}
