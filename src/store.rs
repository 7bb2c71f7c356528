//! The database side: one transaction per batch, set-based SQL from `sql/`.
//!
//! Invariants:
//! - A batch is applied in ONE transaction: ledger rows, reservations, the
//!   aggregated stock update and parked rows commit together or not at all.
//! - The ledger's primary key is the only authority on duplicates; nothing
//!   in memory decides whether an event was applied before.
//! - Stock rows are locked in SKU order before anything else is written, so
//!   concurrent consumers cannot deadlock on them.
//! - A batch the database refuses for a non-transient reason is split until
//!   the offending records are isolated and parked as `db_rejected`; every
//!   other record is applied exactly once. Transient errors are returned to
//!   the caller, which retries the whole batch.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Row};
use uuid::Uuid;

use crate::allocation::{self, LineStatus, ReservationKey};
use crate::batch::{self, Classified, Disposition, InboundRecord};
use crate::event::{self, OrderPlaced, ParkReason};
use crate::parked::ParkedRow;
use crate::window::DedupWindow;

const LOCK_STOCK: &str = include_str!("../sql/lock_stock.sql");
const EXISTING_RESERVATIONS: &str = include_str!("../sql/existing_reservations.sql");
const INSERT_LEDGER: &str = include_str!("../sql/insert_ledger.sql");
const INSERT_RESERVATIONS: &str = include_str!("../sql/insert_reservations.sql");
const RESERVE_STOCK: &str = include_str!("../sql/reserve_stock.sql");
const INSERT_PARKED: &str = include_str!("../sql/insert_parked.sql");
const WINDOW_DAYS: &str = include_str!("../sql/window_days.sql");
const MAINTAIN: &str = include_str!("../sql/maintain.sql");
const LEDGER_HASHES: &str = include_str!("../sql/ledger_hashes.sql");
const LIST_PARKED: &str = include_str!("../sql/list_parked.sql");
const LOCK_PARKED: &str = include_str!("../sql/lock_parked.sql");
const MARK_REPLAYED: &str = include_str!("../sql/mark_replayed.sql");
const REPLAY_CANDIDATES: &str = include_str!("../sql/replay_candidates.sql");

/// How often the dedup window is re-read even when nothing failed.
const WINDOW_REFRESH: Duration = Duration::from_secs(60);

/// Days of ledger partitions made ahead of today (SPEC §7).
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
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl StoreError {
    /// The label of `inbox_db_retries_total{reason}` for a transient error.
    pub fn retry_reason(&self) -> Option<&'static str> {
        match self {
            StoreError::Transient { reason, .. } => Some(reason),
            StoreError::Unexpected { .. } => Some("database_error"),
            _ => None,
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

/// A pool of connections to the inventory database.
pub async fn connect(database_url: &str, pool_size: u32) -> Result<PgPool, StoreError> {
    let options: PgConnectOptions = database_url.parse().map_err(|_| StoreError::Rejected {
        sqlstate: String::new(),
        message: "DATABASE_URL is not a valid PostgreSQL URL".into(),
    })?;
    // Generic plans: every statement is set-based over arrays, so a plan
    // does not depend on the values, while a custom plan would re-plan the
    // partitioned ledger (every partition) on each execution.
    let options = options
        .application_name("inventory-inbox")
        .options([("plan_cache_mode", "force_generic_plan")]);
    Ok(PgPoolOptions::new()
        .max_connections(pool_size)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options))
}

/// What maintenance keeps (SPEC §7).
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
    sqlx::migrate!("./migrations").run(pool).await?;
    maintain(pool, retention).await
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
/// parked rows, under an advisory lock (SPEC §7).
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
}

impl Inbox {
    pub fn new(pool: PgPool, consumer: String) -> Self {
        Inbox {
            pool,
            consumer,
            window: Mutex::new((DedupWindow::default(), None)),
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Applies a batch of records (in poll order) exactly once. On `Err`
    /// nothing of the batch is committed that was not committed before, and
    /// retrying it is always safe.
    pub async fn apply(&self, records: &[InboundRecord]) -> Result<BatchOutcome, StoreError> {
        let window = match self.current_window() {
            Some(window) => window,
            None => self.refresh_window().await?,
        };
        let batch = batch::classify(records.to_vec(), &window);
        match self.apply_isolating(&batch).await {
            // A partition dropped since the window was read: re-read it, so
            // the records of that day are parked instead of failing again.
            Err(StoreError::Rejected { ref message, .. }) if message.contains("no partition") => {
                let window = self.refresh_window().await?;
                let batch = batch::classify(records.to_vec(), &window);
                self.apply_isolating(&batch).await
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
        Ok(window)
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
                let done = self.apply_in(&mut tx, &batch).await?;
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
                })
            })
            .collect::<Result<_, sqlx::Error>>()
            .map_err(StoreError::from)
    }

    /// Applies the batch; when the database refuses it for a non-transient
    /// reason, splits it in halves (in order) until the refused records are
    /// isolated, and parks each of those as `db_rejected`.
    async fn apply_isolating(&self, batch: &[Classified]) -> Result<BatchOutcome, StoreError> {
        let mut outcome = BatchOutcome::default();
        // Work list of slices still to apply, in offset order.
        let mut pending: Vec<&[Classified]> = vec![batch];
        while let Some(part) = pending.pop() {
            match self.apply_once(part).await {
                Ok(done) => outcome.absorb(done),
                Err(StoreError::Rejected { sqlstate, message })
                    if !message.contains("no partition") =>
                {
                    if part.len() == 1 {
                        let rejected = reject(&part[0], &sqlstate, &message);
                        outcome.absorb(self.apply_once(std::slice::from_ref(&rejected)).await?);
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

    /// One transaction for the whole batch.
    async fn apply_once(&self, batch: &[Classified]) -> Result<BatchOutcome, StoreError> {
        let mut tx = self.pool.begin().await?;
        let outcome = self.apply_in(&mut tx, batch).await?;
        tx.commit().await?;
        Ok(outcome)
    }

    /// The statements of a batch, inside the caller's transaction.
    async fn apply_in(
        &self,
        tx: &mut sqlx::PgConnection,
        batch: &[Classified],
    ) -> Result<BatchOutcome, StoreError> {
        let mut outcome = BatchOutcome::default();
        let mut parked: Vec<ParkedRow> = Vec::new();
        let mut candidates: Vec<(&InboundRecord, &OrderPlaced)> = Vec::new();
        let mut repeats: Vec<(&InboundRecord, &OrderPlaced)> = Vec::new();
        for item in batch {
            match &item.disposition {
                Disposition::Candidate(order) => candidates.push((&item.record, order)),
                Disposition::RepeatInBatch(order) => repeats.push((&item.record, order)),
                Disposition::Parked(rejection) => {
                    parked.push(ParkedRow::rejected(&item.record, rejection))
                }
            }
        }

        // 1. Lock and read the stock of every SKU the batch names.
        let mut skus: Vec<&str> = candidates
            .iter()
            .flat_map(|(_, order)| order.lines.iter().map(|l| l.sku.as_str()))
            .collect();
        skus.sort_unstable();
        skus.dedup();
        let mut available: HashMap<String, i64> = HashMap::with_capacity(skus.len());
        if !skus.is_empty() {
            let rows = sqlx::query(LOCK_STOCK)
                .bind(&skus)
                .fetch_all(&mut *tx)
                .await?;
            for row in rows {
                available.insert(row.try_get("sku")?, row.try_get("available")?);
            }
        }

        // 2. An event naming an unknown SKU is parked whole.
        candidates.retain(|(record, order)| {
            match order.lines.iter().find(|l| !available.contains_key(&l.sku)) {
                None => true,
                Some(line) => {
                    parked.push(ParkedRow::new(
                        record,
                        ParkReason::UnknownSku,
                        format!("sku {:?} is not in inventory_stock", line.sku),
                        Some(order.message_id),
                    ));
                    false
                }
            }
        });

        // (partition, offset) of records whose id the ledger holds with
        // another payload.
        let mut conflicting: HashSet<(i32, i64)> = HashSet::new();
        if !candidates.is_empty() {
            // 3. Which order lines are already reserved (business duplicates).
            let (orders, line_skus): (Vec<&str>, Vec<&str>) = candidates
                .iter()
                .flat_map(|(_, order)| {
                    order
                        .lines
                        .iter()
                        .map(|l| (order.order_id.as_str(), l.sku.as_str()))
                })
                .unzip();
            let existing: HashSet<ReservationKey> = sqlx::query(EXISTING_RESERVATIONS)
                .bind(&orders)
                .bind(&line_skus)
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|row| Ok((row.try_get("order_id")?, row.try_get("sku")?)))
                .collect::<Result<_, sqlx::Error>>()?;
            let orders_only: Vec<&OrderPlaced> = candidates.iter().map(|(_, o)| *o).collect();
            let business_duplicate = allocation::business_duplicates(&orders_only, &existing);

            // 4. The ledger decides what is fresh (inserted now), what is a
            //    duplicate (not returned), and which known ids came with
            //    another payload (returned, not inserted): id conflicts.
            let returned: Vec<(Uuid, i64)> = sqlx::query_as(INSERT_LEDGER)
                .bind(&self.consumer)
                .bind(
                    candidates
                        .iter()
                        .map(|(_, o)| o.event_day())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    candidates
                        .iter()
                        .map(|(_, o)| o.message_id)
                        .collect::<Vec<_>>(),
                )
                .bind(
                    candidates
                        .iter()
                        .map(|(_, o)| o.order_id.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    candidates
                        .iter()
                        .map(|(r, _)| r.topic.as_str())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    candidates
                        .iter()
                        .map(|(r, _)| r.partition)
                        .collect::<Vec<_>>(),
                )
                .bind(candidates.iter().map(|(r, _)| r.offset).collect::<Vec<_>>())
                .bind(
                    business_duplicate
                        .iter()
                        .map(|dup| {
                            if *dup {
                                "business_duplicate"
                            } else {
                                "processed"
                            }
                        })
                        .collect::<Vec<_>>(),
                )
                .bind(
                    candidates
                        .iter()
                        .map(|(r, _)| r.payload_hash())
                        .collect::<Vec<_>>(),
                )
                .fetch_all(&mut *tx)
                .await?;
            let returned: HashMap<Uuid, i64> = returned.into_iter().collect();
            let mut fresh_ids: HashSet<Uuid> = HashSet::with_capacity(returned.len());
            for (record, order) in &candidates {
                match returned.get(&order.message_id) {
                    None => continue,
                    Some(hash) if *hash == record.payload_hash() => {
                        fresh_ids.insert(order.message_id);
                        continue;
                    }
                    Some(_) => {}
                }
                {
                    conflicting.insert((record.partition, record.offset));
                    let rejection = batch::id_conflict(order.message_id);
                    parked.push(ParkedRow::rejected(record, &rejection));
                }
            }

            // A repeat within the batch is checked against the ledger's
            // fingerprint (rare: only batches holding one id twice ask).
            let known: Vec<&(&InboundRecord, &OrderPlaced)> = repeats.iter().collect();
            if !known.is_empty() {
                let stored: HashMap<Uuid, i64> = sqlx::query(LEDGER_HASHES)
                    .bind(&self.consumer)
                    .bind(known.iter().map(|(_, o)| o.event_day()).collect::<Vec<_>>())
                    .bind(known.iter().map(|(_, o)| o.message_id).collect::<Vec<_>>())
                    .fetch_all(&mut *tx)
                    .await?
                    .into_iter()
                    .map(|row| Ok((row.try_get("message_id")?, row.try_get("payload_hash")?)))
                    .collect::<Result<_, sqlx::Error>>()?;
                for (record, order) in known {
                    if stored
                        .get(&order.message_id)
                        .is_some_and(|hash| *hash != record.payload_hash())
                    {
                        conflicting.insert((record.partition, record.offset));
                        let rejection = batch::id_conflict(order.message_id);
                        parked.push(ParkedRow::rejected(record, &rejection));
                    }
                }
            }

            let mut fresh: Vec<&OrderPlaced> = Vec::with_capacity(fresh_ids.len());
            for ((record, order), is_business_duplicate) in
                candidates.iter().zip(&business_duplicate)
            {
                if fresh_ids.contains(&order.message_id) {
                    fresh.push(order);
                    outcome.processed += 1;
                    outcome.business_duplicates += u64::from(*is_business_duplicate);
                    outcome.fresh_event_times.push(order.occurred_at);
                } else if !conflicting.contains(&(record.partition, record.offset)) {
                    outcome.duplicates += 1;
                }
            }

            // 5. First-come allocation, then the reservations and ONE
            //    aggregated stock update.
            let lines = allocation::allocate(&fresh, &existing, &mut available);
            if !lines.is_empty() {
                let inserted = sqlx::query(INSERT_RESERVATIONS)
                    .bind(
                        lines
                            .iter()
                            .map(|l| l.order_id.as_str())
                            .collect::<Vec<_>>(),
                    )
                    .bind(lines.iter().map(|l| l.sku.as_str()).collect::<Vec<_>>())
                    .bind(lines.iter().map(|l| l.quantity).collect::<Vec<_>>())
                    .bind(lines.iter().map(|l| l.status.as_str()).collect::<Vec<_>>())
                    .bind(lines.iter().map(|l| l.message_id).collect::<Vec<_>>())
                    .fetch_all(&mut *tx)
                    .await?;
                let mut reserved: Vec<(String, i64)> = Vec::with_capacity(inserted.len());
                for row in &inserted {
                    let status: String = row.try_get("status")?;
                    if status == LineStatus::Reserved.as_str() {
                        outcome.lines_reserved += 1;
                        let quantity: i32 = row.try_get("quantity")?;
                        reserved.push((row.try_get("sku")?, i64::from(quantity)));
                    } else {
                        outcome.lines_rejected += 1;
                    }
                }
                let (delta_skus, delta_quantities) =
                    allocation::stock_deltas(reserved.iter().map(|(s, q)| (s.as_str(), *q)));
                if !delta_skus.is_empty() {
                    sqlx::query(RESERVE_STOCK)
                        .bind(&delta_skus)
                        .bind(&delta_quantities)
                        .execute(&mut *tx)
                        .await?;
                }
            }
        }

        outcome.duplicates += repeats
            .iter()
            .filter(|(r, _)| !conflicting.contains(&(r.partition, r.offset)))
            .count() as u64;

        // 6. Parked records, in the same transaction, in offset order.
        if !parked.is_empty() {
            parked.sort_by_key(|p| (p.partition, p.offset));
            let newly: HashSet<(String, i32, i64)> = sqlx::query(INSERT_PARKED)
                .bind(&self.consumer)
                .bind(parked.iter().map(|p| p.topic.as_str()).collect::<Vec<_>>())
                .bind(parked.iter().map(|p| p.partition).collect::<Vec<_>>())
                .bind(parked.iter().map(|p| p.offset).collect::<Vec<_>>())
                .bind(parked.iter().map(|p| p.message_id).collect::<Vec<_>>())
                .bind(parked.iter().map(|p| p.reason.as_str()).collect::<Vec<_>>())
                .bind(parked.iter().map(|p| p.error.as_str()).collect::<Vec<_>>())
                .bind(
                    parked
                        .iter()
                        .map(|p| p.payload.as_slice())
                        .collect::<Vec<_>>(),
                )
                .bind(
                    parked
                        .iter()
                        .map(|p| p.headers_json.as_str())
                        .collect::<Vec<_>>(),
                )
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .map(|row| {
                    Ok((
                        row.try_get("topic")?,
                        row.try_get("kafka_partition")?,
                        row.try_get("kafka_offset")?,
                    ))
                })
                .collect::<Result<_, sqlx::Error>>()?;
            outcome.newly_parked = parked
                .into_iter()
                .filter(|p| newly.contains(&(p.topic.clone(), p.partition, p.offset)))
                .collect();
        }

        Ok(outcome)
    }
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
}

/// The record as parked `db_rejected`, with the database's own words.
fn reject(item: &Classified, sqlstate: &str, message: &str) -> Classified {
    let message_id = match &item.disposition {
        Disposition::Candidate(order) => Some(order.message_id),
        Disposition::Parked(rejection) => rejection.message_id,
        Disposition::RepeatInBatch(order) => Some(order.message_id),
    };
    Classified {
        record: item.record.clone(),
        disposition: Disposition::Parked(event::Rejection {
            reason: ParkReason::DbRejected,
            detail: format!("SQLSTATE {sqlstate}: {message}"),
            message_id,
        }),
    }
}
