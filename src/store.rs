//! The database side: one statement per batch (`sql/apply_batch.sql`), its
//! own transaction, so a batch costs one round trip to PostgreSQL.
//!
//! Invariants:
//! - A batch is applied atomically: ledger rows, reservations, the
//!   aggregated stock update, parked rows and the partitions' positions
//!   commit together or not at all, and the result is read only after the
//!   commit.
//! - The ledger's primary key is the only authority on duplicates; nothing
//!   in memory decides whether an event was applied before.
//! - Stock rows are locked in SKU order before anything else is written, so
//!   concurrent batches cannot deadlock on them.
//! - A batch the database refuses for a non-transient reason is split until
//!   the offending records are isolated and parked as `db_rejected`; every
//!   other record is applied exactly once. Transient errors are returned to
//!   the caller, which retries the whole batch.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions, PgRow};
use sqlx::{PgPool, Postgres, Row};
use uuid::Uuid;

use crate::batch::{self, Classified, Disposition, InboundRecord, PartitionKey};
use crate::event::{self, ParkReason, MAX_PAYLOAD_BYTES};
use crate::parked::{self, ParkedRow};
use crate::window::DedupWindow;

const APPLY_BATCH: &str = include_str!("../sql/apply_batch.sql");
const WINDOW_DAYS: &str = include_str!("../sql/window_days.sql");
const MAINTAIN: &str = include_str!("../sql/maintain.sql");
const LIST_PARKED: &str = include_str!("../sql/list_parked.sql");
const LOCK_PARKED: &str = include_str!("../sql/lock_parked.sql");
const MARK_REPLAYED: &str = include_str!("../sql/mark_replayed.sql");
const REPLAY_CANDIDATES: &str = include_str!("../sql/replay_candidates.sql");

/// The partitioned ledger, as PostgreSQL names it in errors.
const LEDGER_TABLE: &str = "processed_inbox";

/// How often the dedup window is re-read even when nothing failed.
const WINDOW_REFRESH: Duration = Duration::from_secs(60);

/// Timed round trips kept to estimate the distance to the database.
const ROUND_TRIP_SAMPLES: usize = 5;

/// Days of ledger partitions made ahead of today (docs/design.md#the-dedup-window).
pub const PREMAKE_DAYS: i32 = 2;

/// Errors of the database layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Worth retrying unchanged: connection lost, serialization failure,
    /// deadlock, shutdown, too many connections.
    #[error("database unavailable ({reason}): {message}")]
    Transient {
        reason: &'static str,
        message: String,
    },
    /// The database refused the data itself; retrying the same data fails
    /// again.
    #[error("database rejected the batch (SQLSTATE {sqlstate}): {message}")]
    Rejected { sqlstate: String, message: String },
    /// The database refused the statements themselves (privileges, a
    /// missing object...): every record would fail alike, so the batch is
    /// retried, never parked, until an operator fixes the cause.
    #[error("database error (SQLSTATE {sqlstate}): {message}")]
    Unexpected { sqlstate: String, message: String },
    /// A record's event day has no ledger partition (dropped or not made
    /// since the window was read): re-read the window and park those
    /// records, never blame the batch.
    #[error("no ledger partition for a record of the batch: {message}")]
    MissingPartition { message: String },
    /// The database's position of a partition is behind the one this
    /// consumer wrote (the database was restored, or failed over to a replica
    /// that lacked the last commits): nothing of the batch committed. The
    /// partitions behind, with the database's position (`None`: it has
    /// none); the consumer reads them again from there.
    #[error("the database went back: its positions are behind this consumer's for {} partition(s)", positions.len())]
    PositionBehind {
        positions: BTreeMap<PartitionKey, Option<i64>>,
    },
    /// The database does not hold the schema this binary needs.
    #[error("{0}")]
    Schema(String),
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

/// Every value of `inbox_db_retries_total{reason}` (those of
/// [`StoreError::retry_reason`]), so that each series exists from the first
/// scrape.
pub const RETRY_REASONS: [&str; 13] = [
    "serialization_failure",
    "deadlock",
    "too_many_connections",
    "lock_not_available",
    "query_canceled",
    "admin_shutdown",
    "connection",
    "insufficient_resources",
    "pool_timeout",
    "database_error",
    "rejected",
    "missing_partition",
    "position_behind",
];

impl StoreError {
    /// The label of `inbox_db_retries_total{reason}` for a batch that failed
    /// with this error: one of [`RETRY_REASONS`].
    pub fn retry_reason(&self) -> &'static str {
        match self {
            StoreError::Transient { reason, .. } => reason,
            StoreError::Unexpected { .. } | StoreError::Migrate(_) | StoreError::Schema(_) => {
                "database_error"
            }
            StoreError::Rejected { .. } => "rejected",
            StoreError::MissingPartition { .. } => "missing_partition",
            StoreError::PositionBehind { .. } => "position_behind",
        }
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(error: sqlx::Error) -> Self {
        let transient = |reason| StoreError::Transient {
            reason,
            message: error.to_string(),
        };
        match &error {
            sqlx::Error::Database(db) => {
                let sqlstate = db.code().map(|c| c.into_owned()).unwrap_or_default();
                match sqlstate.as_str() {
                    "40001" => transient("serialization_failure"),
                    "40P01" => transient("deadlock"),
                    "53300" => transient("too_many_connections"),
                    "55P03" => transient("lock_not_available"),
                    "57014" => transient("query_canceled"),
                    // inbox_position_behind: which partitions, the inbox finds out.
                    "IX001" => StoreError::PositionBehind {
                        positions: BTreeMap::new(),
                    },
                    // The partition routing of the ledger, whatever the
                    // language of the server's messages.
                    "23514" if db.table() == Some(LEDGER_TABLE) && db.constraint().is_none() => {
                        StoreError::MissingPartition {
                            message: db.message().to_owned(),
                        }
                    }
                    s if s.starts_with("57P") => transient("admin_shutdown"),
                    s if s.starts_with("08") => transient("connection"),
                    s if s.starts_with("53") => transient("insufficient_resources"),
                    // Data exceptions and integrity violations belong to the
                    // records: worth isolating.
                    s if s.starts_with("22") || s.starts_with("23") => StoreError::Rejected {
                        message: db.message().to_owned(),
                        sqlstate,
                    },
                    // Anything else (privileges, a missing object, a bug in a
                    // statement) would refuse every record alike: retried, never
                    // blamed on the records.
                    _ => StoreError::Unexpected {
                        message: db.message().to_owned(),
                        sqlstate,
                    },
                }
            }
            sqlx::Error::PoolTimedOut => transient("pool_timeout"),
            sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Protocol(_)
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => transient("connection"),
            _ => StoreError::Unexpected {
                sqlstate: String::new(),
                message: error.to_string(),
            },
        }
    }
}

/// What a batch did, for metrics, logs and the DLQ.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct BatchOutcome {
    /// Fresh events applied (including business duplicates).
    pub processed: u64,
    /// Fresh events whose every order line was already reserved.
    pub business_duplicates: u64,
    /// Records whose message id was already in the ledger or earlier in the
    /// batch: no effect.
    pub duplicates: u64,
    pub lines_reserved: u64,
    pub lines_rejected: u64,
    /// Rows parked by this batch (not those already parked by an earlier
    /// delivery of the same record).
    pub newly_parked: Vec<ParkedRow>,
    /// Event times of the fresh events, for end-to-end latency.
    pub fresh_event_times: Vec<DateTime<Utc>>,
}

impl BatchOutcome {
    /// Adds another batch's outcome to this one.
    pub fn absorb(&mut self, other: BatchOutcome) {
        self.processed += other.processed;
        self.business_duplicates += other.business_duplicates;
        self.duplicates += other.duplicates;
        self.lines_reserved += other.lines_reserved;
        self.lines_rejected += other.lines_rejected;
        self.newly_parked.extend(other.newly_parked);
        self.fresh_event_times.extend(other.fresh_event_times);
    }
}

/// Where the database is, and the limits of every session.
#[derive(Debug, Clone, Copy)]
pub struct Connection<'a> {
    pub url: &'a str,
    /// `statement_timeout`; zero: none.
    pub statement_timeout: Duration,
    /// `lock_timeout`; zero: none.
    pub lock_timeout: Duration,
}

/// A pool of connections to the inventory database: one for each of `lanes`
/// concurrent batches (each keeps its own, see [`Inbox`]) and one more for
/// everything else (the window, maintenance).
pub async fn connect(connection: Connection<'_>, lanes: u32) -> Result<PgPool, StoreError> {
    let options: PgConnectOptions = connection.url.parse().map_err(|_| StoreError::Rejected {
        sqlstate: String::new(),
        message: "DATABASE_URL is not a valid PostgreSQL URL".into(),
    })?;
    // Generic plans: every statement is set-based over arrays, so a plan
    // does not depend on the values, while a custom plan would re-plan the
    // partitioned ledger (every partition) on each execution.
    // The timeouts go in the start-up packet: no round trip of their own.
    let statement_timeout = connection.statement_timeout.as_millis().to_string();
    let lock_timeout = connection.lock_timeout.as_millis().to_string();
    let options = options.application_name("inventory-inbox").options([
        ("plan_cache_mode", "force_generic_plan"),
        ("statement_timeout", statement_timeout.as_str()),
        ("lock_timeout", lock_timeout.as_str()),
    ]);
    Ok(PgPoolOptions::new()
        .max_connections(lanes + 1)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(2))
        // No ping before each use: it would cost a round trip per batch. A
        // dead connection fails the batch, which is retried on a new one.
        .test_before_acquire(false)
        .connect_lazy_with(options))
}

/// What maintenance keeps (docs/design.md#the-dedup-window).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Days of ledger partitions behind today: the dedup window.
    pub ledger_days: i32,
    /// Days a parked row is kept.
    pub parked_days: i32,
    /// Days after which a parked row's payload is cleared; 0 keeps it.
    pub parked_payload_days: i32,
}

/// Applies the embedded migrations, then creates the partitions of the
/// window.
pub async fn migrate(pool: &PgPool, retention: Retention) -> Result<MaintainReport, StoreError> {
    MIGRATOR.run(pool).await?;
    maintain(pool, retention).await
}

/// The migrations embedded in this binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Checks that the database holds the inbox schema this binary was built
/// for: applied by `inventory-inbox migrate`, neither older nor newer.
pub async fn check_schema(pool: &PgPool) -> Result<(), StoreError> {
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

/// What one maintenance run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintainReport {
    /// False when another instance held the maintenance lock.
    pub locked: bool,
    pub created: i32,
    pub dropped: i32,
    pub parked_deleted: i32,
    pub payloads_cleared: i32,
}

/// Creates partitions ahead, drops those older than the retention and prunes
/// parked rows, under an advisory lock (docs/design.md#the-dedup-window).
pub async fn maintain(pool: &PgPool, retention: Retention) -> Result<MaintainReport, StoreError> {
    let row = sqlx::query(MAINTAIN)
        .bind(retention.ledger_days)
        .bind(PREMAKE_DAYS)
        .bind(retention.parked_days)
        .bind(retention.parked_payload_days)
        .fetch_one(pool)
        .await?;
    Ok(MaintainReport {
        locked: row.try_get("locked")?,
        created: row.try_get("created")?,
        dropped: row.try_get("dropped")?,
        parked_deleted: row.try_get("parked_deleted")?,
        payloads_cleared: row.try_get("payloads_cleared")?,
    })
}

/// Reads the dedup window: the days that have a ledger partition.
pub async fn load_window(pool: &PgPool) -> Result<DedupWindow, StoreError> {
    let days: Vec<NaiveDate> = sqlx::query_scalar(WINDOW_DAYS).fetch_all(pool).await?;
    Ok(DedupWindow::new(days))
}

/// The inbox of one logical consumer: applies batches exactly once. Shared
/// by concurrent batches (of distinct partitions): each takes its own
/// connection from the pool.
pub struct Inbox {
    pool: PgPool,
    /// The ledger's `consumer`: stable across pods and restarts, so a replay
    /// under a new group id is still recognised.
    consumer: String,
    /// The dedup window and when it was read.
    window: Mutex<(DedupWindow, Option<Instant>)>,
    /// Connections kept out of the pool between batches: sqlx checks a
    /// connection returned to its pool with a round trip (a Sync), which
    /// would double the cost of a batch. A batch takes one (or a new one
    /// from the pool) and puts it back unless the database failed on it.
    idle: Mutex<Vec<PoolConnection<Postgres>>>,
    /// The last few timed window reads, for [`Inbox::round_trip`].
    round_trips: Mutex<Vec<Duration>>,
    /// The position this inbox last wrote per partition: a database whose
    /// position is behind it went back, and the batch statement refuses to
    /// go on there (`PositionBehind`).
    written: Mutex<BTreeMap<PartitionKey, i64>>,
}

impl Inbox {
    pub fn new(pool: PgPool, consumer: String) -> Self {
        Inbox {
            pool,
            consumer,
            window: Mutex::new((DedupWindow::default(), None)),
            idle: Mutex::new(Vec::new()),
            round_trips: Mutex::new(Vec::new()),
            written: Mutex::new(BTreeMap::new()),
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies a batch of records (in poll order) exactly once. On `Err`
    /// nothing of the batch is committed that was not committed before, and
    /// retrying it is always safe.
    /// `trace_id`, the batch span's, is kept on the rows it parks.
    pub async fn apply(
        &self,
        records: &[InboundRecord],
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let window = match self.current_window() {
            Some(window) => window,
            None => self.refresh_window().await?,
        };
        let batch = batch::classify(records.to_vec(), &window);
        match self.apply_isolating(&batch, trace_id).await {
            // A partition dropped since the window was read: re-read it, so
            // the records of that day are parked instead of failing again.
            Err(StoreError::MissingPartition { .. }) => {
                let window = self.refresh_window().await?;
                let batch = batch::classify(records.to_vec(), &window);
                self.apply_isolating(&batch, trace_id).await
            }
            result => result,
        }
    }

    /// The window, unless it is older than the refresh period.
    fn current_window(&self) -> Option<DedupWindow> {
        let guard = self.window.lock().expect("window lock");
        match guard.1 {
            Some(read) if read.elapsed() <= WINDOW_REFRESH => Some(guard.0.clone()),
            _ => None,
        }
    }

    /// Re-reads the dedup window from the database.
    pub async fn refresh_window(&self) -> Result<DedupWindow, StoreError> {
        let window = load_window(&self.pool).await?;
        *self.window.lock().expect("window lock") = (window.clone(), Some(Instant::now()));
        self.time_round_trip().await?;
        Ok(window)
    }

    /// Times a statement that costs the database nothing (on a connection
    /// where it is prepared already): its time is the round trip.
    async fn time_round_trip(&self) -> Result<(), StoreError> {
        let mut connection = self.pool.acquire().await?;
        let mut took = Duration::MAX;
        for _ in 0..2 {
            let asked = Instant::now();
            sqlx::query("SELECT 1").execute(&mut *connection).await?;
            took = asked.elapsed();
        }
        tracing::debug!(round_trip_ms = took.as_secs_f64() * 1e3, "round trip timed");
        let mut trips = self.round_trips.lock().expect("round trips lock");
        if trips.len() == ROUND_TRIP_SAMPLES {
            trips.remove(0);
        }
        trips.push(took);
        Ok(())
    }

    /// The round trip to the database: the shortest of the last few timed
    /// (the shortest, so that one slow answer does not count).
    pub fn round_trip(&self) -> Option<Duration> {
        self.round_trips
            .lock()
            .expect("round trips lock")
            .iter()
            .min()
            .copied()
    }

    /// Replays one parked record through the normal path (decode, validate,
    /// the batch transaction), in one transaction with the parked row locked:
    /// exactly once even when replays run twice or concurrently.
    pub async fn replay(&self, id: i64) -> Result<ReplayOutcome, StoreError> {
        let window = self.refresh_window().await?;
        let mut tx = self.pool.begin().await?;
        let Some(row) = sqlx::query(LOCK_PARKED)
            .bind(id)
            .bind(&self.consumer)
            .fetch_optional(&mut *tx)
            .await?
        else {
            return Ok(ReplayOutcome::NotFound);
        };
        let replayed_at: Option<DateTime<Utc>> = row.try_get("replayed_at")?;
        if let Some(at) = replayed_at {
            return Ok(ReplayOutcome::AlreadyReplayed(at));
        }
        let headers_json: String = row.try_get("headers")?;
        let record = InboundRecord {
            topic: row.try_get("topic")?,
            partition: row.try_get("kafka_partition")?,
            offset: row.try_get("kafka_offset")?,
            timestamp: None,
            key: None,
            payload: row.try_get("payload")?,
            headers: crate::parked::headers_from_json(&headers_json),
        };
        let batch = batch::classify(vec![record], &window);
        let outcome = match &batch[0].disposition {
            Disposition::Parked(rejection) => {
                ReplayOutcome::StillParked(rejection.reason, rejection.detail.clone())
            }
            _ => {
                // A replay does not move positions: the record was read long ago.
                let done = self
                    .apply_in(&mut tx, &batch, &BTreeMap::new(), None)
                    .await?;
                if done.processed == 1 {
                    ReplayOutcome::Applied
                } else if done.duplicates == 1 {
                    ReplayOutcome::Duplicate
                } else {
                    ReplayOutcome::StillParked(
                        ParkReason::UnknownSku,
                        "an SKU of the order is still not in inventory_stock".into(),
                    )
                }
            }
        };
        sqlx::query(MARK_REPLAYED)
            .bind(id)
            .bind(outcome.to_string())
            .bind(outcome.reached_ledger())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(outcome)
    }

    /// Ids of the parked records of one reason not replayed yet.
    pub async fn replay_candidates(&self, reason: ParkReason) -> Result<Vec<i64>, StoreError> {
        Ok(sqlx::query_scalar(REPLAY_CANDIDATES)
            .bind(&self.consumer)
            .bind(reason.as_str())
            .fetch_all(&self.pool)
            .await?)
    }

    /// Parked records, oldest first.
    pub async fn list_parked(
        &self,
        reason: Option<ParkReason>,
        since: Option<DateTime<Utc>>,
        limit: i64,
    ) -> Result<Vec<ParkedEntry>, StoreError> {
        let rows = sqlx::query(LIST_PARKED)
            .bind(&self.consumer)
            .bind(reason.map(ParkReason::as_str))
            .bind(since)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|row| {
                Ok(ParkedEntry {
                    id: row.try_get("id")?,
                    parked_at: row.try_get("parked_at")?,
                    reason: row.try_get("reason")?,
                    error: row.try_get("error")?,
                    topic: row.try_get("topic")?,
                    partition: row.try_get("kafka_partition")?,
                    offset: row.try_get("kafka_offset")?,
                    message_id: row.try_get("message_id")?,
                    replayed_at: row.try_get("replayed_at")?,
                    replay_outcome: row.try_get("replay_outcome")?,
                    trace_id: row.try_get("trace_id")?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Applies the batch; when the database refuses it for a non-transient
    /// reason, splits it in halves (in order) until the refused records are
    /// isolated, and parks each of those as `db_rejected`.
    async fn apply_isolating(
        &self,
        batch: &[Classified],
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let mut outcome = BatchOutcome::default();
        // Work list of slices still to apply, in offset order.
        let mut pending: Vec<&[Classified]> = vec![batch];
        while let Some(part) = pending.pop() {
            match self.apply_once(part, trace_id).await {
                Ok(done) => outcome.absorb(done),
                Err(StoreError::Rejected { sqlstate, message }) => {
                    if part.len() == 1 {
                        let rejected = reject(&part[0], &sqlstate, &message);
                        match self
                            .apply_once(std::slice::from_ref(&rejected), trace_id)
                            .await
                        {
                            Ok(done) => outcome.absorb(done),
                            // Even its parked row was refused: what the record
                            // carries cannot be stored. Its position, the reason
                            // and the database's words are, and the partition
                            // moves on (a record never stops a partition).
                            Err(StoreError::Rejected {
                                sqlstate: refused, ..
                            }) => {
                                let minimal = reject_bare(&part[0], &sqlstate, &message, &refused);
                                outcome.absorb(
                                    self.apply_once(std::slice::from_ref(&minimal), trace_id)
                                        .await?,
                                );
                            }
                            Err(other) => return Err(other),
                        }
                    } else {
                        let (first, second) = part.split_at(part.len() / 2);
                        pending.push(second);
                        pending.push(first);
                    }
                }
                Err(other) => return Err(other),
            }
        }
        Ok(outcome)
    }

    /// The whole batch in one statement, its own transaction: one round
    /// trip. It also moves the batch's partitions' positions.
    async fn apply_once(
        &self,
        batch: &[Classified],
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let positions = batch::next_offsets(batch.iter().map(|c| &c.record));
        let idle = self.idle.lock().expect("idle lock").pop();
        let mut connection = match idle {
            Some(connection) => connection,
            None => self.pool.acquire().await?,
        };
        let result = self
            .apply_in(&mut connection, batch, &positions, trace_id)
            .await;
        let result = match result {
            Ok(outcome) => {
                let mut written = self.written.lock().expect("written lock");
                for (key, next) in &positions {
                    let entry = written.entry(key.clone()).or_insert(*next);
                    *entry = (*entry).max(*next);
                }
                Ok(outcome)
            }
            Err(StoreError::PositionBehind { .. }) => self.positions_behind(&positions).await,
            Err(other) => Err(other),
        };
        // After a refused statement the connection is as good as before;
        // after any other failure the pool checks it, or replaces it.
        if matches!(
            result,
            Ok(_)
                | Err(StoreError::Rejected { .. }
                    | StoreError::MissingPartition { .. }
                    | StoreError::PositionBehind { .. })
        ) {
            self.idle.lock().expect("idle lock").push(connection);
        }
        result
    }

    /// After the statement refused a batch for positions behind this
    /// inbox's: which partitions, and where the database is. They are
    /// forgotten as written, so that the batches read again from there go.
    async fn positions_behind(
        &self,
        positions: &BTreeMap<PartitionKey, i64>,
    ) -> Result<BatchOutcome, StoreError> {
        let keys: Vec<PartitionKey> = positions.keys().cloned().collect();
        let stored = crate::positions::read(&self.pool, &self.consumer, &keys).await?;
        let mut written = self.written.lock().expect("written lock");
        let mut behind = BTreeMap::new();
        for key in keys {
            let database = stored.get(&key).copied();
            if let Some(mine) = written.get(&key).copied() {
                if database.is_none_or(|d| d < mine) {
                    behind.insert(key.clone(), database);
                    match database {
                        Some(d) => written.insert(key, d),
                        None => written.remove(&key),
                    };
                }
            }
        }
        if behind.is_empty() {
            // Moved forward since (another member): simply try again.
            return Err(StoreError::Transient {
                reason: "position_behind",
                message: "the database's position moved while it was checked".into(),
            });
        }
        Err(StoreError::PositionBehind { positions: behind })
    }

    /// The batch statement, on the given connection: its own transaction
    /// when the connection has none open (the consumer's case: one round
    /// trip), or part of the caller's (a replay). `positions` are the next
    /// offsets the batch moves `inbox_position` to, per partition;
    /// `trace_id` goes on the rows it parks.
    async fn apply_in(
        &self,
        connection: &mut sqlx::PgConnection,
        batch: &[Classified],
        positions: &BTreeMap<PartitionKey, i64>,
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let arrays = BatchArrays::of(batch);
        let (position_topics, (position_partitions, next_offsets)): (
            Vec<&str>,
            (Vec<i32>, Vec<i64>),
        ) = positions
            .iter()
            .map(|((topic, partition), next)| (topic.as_str(), (*partition, *next)))
            .unzip();
        let expected: Vec<Option<i64>> = {
            let written = self.written.lock().expect("written lock");
            positions
                .keys()
                .map(|key| written.get(key).copied())
                .collect()
        };
        // fetch_one reads the response up to ReadyForQuery, which PostgreSQL
        // sends only after the implicit transaction committed: a commit that
        // fails is an error here, never a batch reported as applied.
        let row = sqlx::query(APPLY_BATCH)
            .bind(&self.consumer)
            .bind(&arrays.topic)
            .bind(&arrays.partition)
            .bind(&arrays.offset)
            .bind(&arrays.kind)
            .bind(&arrays.event_day)
            .bind(&arrays.message_id)
            .bind(&arrays.order_id)
            .bind(&arrays.payload_hash)
            .bind(&arrays.first_ord)
            .bind(&arrays.reason)
            .bind(&arrays.error)
            .bind(&arrays.payload)
            .bind(&arrays.headers)
            .bind(&arrays.line_record)
            .bind(&arrays.line_sku)
            .bind(&arrays.line_quantity)
            .bind(&arrays.line_shared)
            .bind(&position_topics)
            .bind(&position_partitions)
            .bind(&next_offsets)
            .bind(&expected)
            .bind(trace_id)
            .fetch_one(connection)
            .await?;
        batch_outcome(batch, &row, trace_id)
    }
}

/// The arrays of the batch statement (`sql/apply_batch.sql`): one element
/// per record, in poll order, and one per order line of the candidates.
#[derive(Default)]
struct BatchArrays<'a> {
    topic: Vec<&'a str>,
    partition: Vec<i32>,
    offset: Vec<i64>,
    kind: Vec<&'static str>,
    event_day: Vec<Option<NaiveDate>>,
    message_id: Vec<Option<Uuid>>,
    order_id: Vec<Option<&'a str>>,
    payload_hash: Vec<Option<i64>>,
    /// For a repeat, the ordinal of the first record with its id in this
    /// statement; the ledger's fingerprint otherwise.
    first_ord: Vec<Option<i32>>,
    reason: Vec<Option<&'static str>>,
    error: Vec<Option<Cow<'a, str>>>,
    /// Every record's payload and headers: the statement itself parks a
    /// candidate that turns out to name an unknown SKU or reuse an id.
    payload: Vec<Option<&'a [u8]>>,
    headers: Vec<String>,
    line_record: Vec<i32>,
    line_sku: Vec<&'a str>,
    line_quantity: Vec<i32>,
    /// Whether another candidate of the batch names the same (order_id,
    /// sku): only those lines are compared with each other in SQL.
    line_shared: Vec<bool>,
}

impl<'a> BatchArrays<'a> {
    fn of(batch: &'a [Classified]) -> Self {
        let mut arrays = BatchArrays::default();
        let mut first_with_id: HashMap<Uuid, i32> = HashMap::new();
        let mut order_lines: HashMap<(&str, &str), usize> = HashMap::new();
        let mut line_keys: Vec<(&str, &str)> = Vec::new();
        for (ord, item) in (1..).zip(batch) {
            let record = &item.record;
            arrays.topic.push(&record.topic);
            arrays.partition.push(record.partition);
            arrays.offset.push(record.offset);
            arrays.payload.push(
                record
                    .payload
                    .as_deref()
                    .map(|p| &p[..p.len().min(MAX_PAYLOAD_BYTES)]),
            );
            arrays.headers.push(parked::headers_json(&record.headers));
            match &item.disposition {
                Disposition::Candidate(order) | Disposition::RepeatInBatch(order) => {
                    let first = if matches!(item.disposition, Disposition::Candidate(_)) {
                        first_with_id.insert(order.message_id, ord);
                        for line in &order.lines {
                            let key = (order.order_id.as_str(), line.sku.as_str());
                            *order_lines.entry(key).or_default() += 1;
                            line_keys.push(key);
                            arrays.line_record.push(ord);
                            arrays.line_sku.push(&line.sku);
                            arrays.line_quantity.push(line.quantity);
                        }
                        arrays.kind.push("candidate");
                        None
                    } else {
                        arrays.kind.push("repeat");
                        first_with_id.get(&order.message_id).copied()
                    };
                    arrays.event_day.push(Some(order.event_day()));
                    arrays.message_id.push(Some(order.message_id));
                    arrays.order_id.push(Some(&order.order_id));
                    arrays.payload_hash.push(Some(record.payload_hash()));
                    arrays.first_ord.push(first);
                    arrays.reason.push(None);
                    arrays.error.push(None);
                }
                Disposition::Parked(rejection) => {
                    arrays.kind.push("parked");
                    arrays.event_day.push(None);
                    arrays.message_id.push(rejection.message_id);
                    arrays.order_id.push(None);
                    arrays.payload_hash.push(None);
                    arrays.first_ord.push(None);
                    arrays.reason.push(Some(rejection.reason.as_str()));
                    arrays
                        .error
                        .push(Some(parked::storable_text(&rejection.detail)));
                }
            }
        }
        arrays.line_shared = line_keys.iter().map(|key| order_lines[key] > 1).collect();
        arrays
    }
}

/// Reads the batch statement's result: fresh events by ordinal, the order
/// lines, every parked record; the rest of the valid records are duplicates.
fn batch_outcome(
    batch: &[Classified],
    row: &PgRow,
    trace_id: Option<&str>,
) -> Result<BatchOutcome, StoreError> {
    let item = |ord: i64| &batch[ord as usize - 1];
    let fresh: Vec<i64> = row.try_get("fresh")?;
    let business_duplicates: Vec<i64> = row.try_get("business_duplicates")?;
    let parked_ords: Vec<i64> = row.try_get("parked_ords")?;
    let parked_reasons: Vec<String> = row.try_get("parked_reasons")?;
    let parked_errors: Vec<String> = row.try_get("parked_errors")?;
    let parked_newly: Vec<bool> = row.try_get("parked_newly")?;
    let lines_reserved: i64 = row.try_get("lines_reserved")?;
    let lines_rejected: i64 = row.try_get("lines_rejected")?;

    let valid = batch
        .iter()
        .filter(|c| !matches!(c.disposition, Disposition::Parked(_)))
        .count();
    let valid_parked = parked_ords
        .iter()
        .filter(|ord| !matches!(item(**ord).disposition, Disposition::Parked(_)))
        .count();
    let mut outcome = BatchOutcome {
        processed: fresh.len() as u64,
        business_duplicates: business_duplicates.len() as u64,
        duplicates: (valid - fresh.len() - valid_parked) as u64,
        lines_reserved: lines_reserved as u64,
        lines_rejected: lines_rejected as u64,
        ..BatchOutcome::default()
    };
    for ord in fresh {
        if let Disposition::Candidate(order) = &item(ord).disposition {
            outcome.fresh_event_times.push(order.occurred_at);
        }
    }
    for (((ord, reason), error), newly) in parked_ords
        .into_iter()
        .zip(parked_reasons)
        .zip(parked_errors)
        .zip(parked_newly)
    {
        if !newly {
            continue;
        }
        let reason = ParkReason::from_code(&reason).ok_or_else(|| StoreError::Unexpected {
            sqlstate: String::new(),
            message: format!("the batch statement parked with an unknown reason {reason:?}"),
        })?;
        let parked = item(ord);
        let mut row = ParkedRow::new(
            &parked.record,
            reason,
            error,
            parked.message_id(),
            parked.order_id(),
        );
        row.trace_id = trace_id.map(str::to_owned);
        outcome.newly_parked.push(row);
    }
    Ok(outcome)
}

/// What a replay of a parked record did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// Applied now: ledger row, reservations, stock.
    Applied,
    /// The event was already in the ledger: nothing to do.
    Duplicate,
    /// Still not applicable; the row stays eligible for another replay.
    StillParked(ParkReason, String),
    /// Replayed before, at that time: nothing to do.
    AlreadyReplayed(DateTime<Utc>),
    NotFound,
}

impl ReplayOutcome {
    /// The event is in the ledger now, so the parked row is done.
    pub fn reached_ledger(&self) -> bool {
        matches!(self, ReplayOutcome::Applied | ReplayOutcome::Duplicate)
    }
}

impl std::fmt::Display for ReplayOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayOutcome::Applied => write!(f, "applied"),
            ReplayOutcome::Duplicate => write!(f, "duplicate (already applied)"),
            ReplayOutcome::StillParked(reason, detail) => {
                write!(f, "still parked: {reason}: {detail}")
            }
            ReplayOutcome::AlreadyReplayed(at) => write!(f, "already replayed at {at}"),
            ReplayOutcome::NotFound => write!(f, "no such parked record for this consumer"),
        }
    }
}

/// One parked record as `parked list` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParkedEntry {
    pub id: i64,
    pub parked_at: DateTime<Utc>,
    pub reason: String,
    pub error: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub message_id: Option<Uuid>,
    pub replayed_at: Option<DateTime<Utc>>,
    pub replay_outcome: Option<String>,
    /// The trace of the batch that parked it, when tracing was on.
    pub trace_id: Option<String>,
}

/// The record parked `db_rejected` without its payload, key or headers, which
/// the database refused to store (SQLSTATE `refused`).
fn reject_bare(item: &Classified, sqlstate: &str, message: &str, refused: &str) -> Classified {
    let mut bare = reject(item, sqlstate, message);
    bare.record.payload = None;
    bare.record.key = None;
    bare.record.headers.clear();
    if let Disposition::Parked(rejection) = &mut bare.disposition {
        rejection.detail.push_str(&format!(
            "; its payload and headers could not be stored (SQLSTATE {refused})"
        ));
    }
    bare
}

/// The record as parked `db_rejected`, with the database's own words.
fn reject(item: &Classified, sqlstate: &str, message: &str) -> Classified {
    Classified {
        record: item.record.clone(),
        disposition: Disposition::Parked(event::Rejection {
            reason: ParkReason::DbRejected,
            detail: format!("SQLSTATE {sqlstate}: {message}"),
            message_id: item.message_id(),
        }),
    }
}
