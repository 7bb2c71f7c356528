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
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
}

impl StoreError {
    /// The label of `inbox_db_retries_total{reason}` for a transient error.
    pub fn retry_reason(&self) -> Option<&'static str> {
        match self {
            StoreError::Transient { reason, .. } => Some(reason),
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
                    _ => StoreError::Rejected {
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
            _ => StoreError::Rejected {
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
    let options = options.application_name("inventory-inbox");
    Ok(PgPoolOptions::new()
        .max_connections(pool_size)
        .min_connections(0)
        .acquire_timeout(Duration::from_secs(2))
        .connect_lazy_with(options))
}

/// Applies the embedded migrations, then creates the partitions of the
/// window.
pub async fn migrate(pool: &PgPool, retention_days: i32) -> Result<MaintainReport, StoreError> {
    sqlx::migrate!("./migrations").run(pool).await?;
    maintain(pool, retention_days).await
}

/// What one maintenance run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MaintainReport {
    /// False when another instance held the maintenance lock.
    pub locked: bool,
    pub created: i32,
    pub dropped: i32,
}

/// Creates partitions ahead and drops those older than the retention, under
/// an advisory lock (SPEC §7).
pub async fn maintain(pool: &PgPool, retention_days: i32) -> Result<MaintainReport, StoreError> {
    let row = sqlx::query(MAINTAIN)
        .bind(retention_days)
        .bind(PREMAKE_DAYS)
        .fetch_one(pool)
        .await?;
    Ok(MaintainReport {
        locked: row.try_get("locked")?,
        created: row.try_get("created")?,
        dropped: row.try_get("dropped")?,
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
                Err(StoreError::Rejected { sqlstate, message }) if !message.contains("no partition") => {
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
        let mut outcome = BatchOutcome::default();
        let mut parked: Vec<ParkedRow> = Vec::new();
        let mut candidates: Vec<(&InboundRecord, &OrderPlaced)> = Vec::new();
        for item in batch {
            match &item.disposition {
                Disposition::Candidate(order) => candidates.push((&item.record, order)),
                Disposition::DuplicateInBatch => outcome.duplicates += 1,
                Disposition::Parked(rejection) => parked.push(ParkedRow::new(
                    &item.record,
                    rejection.reason,
                    rejection.detail.clone(),
                    rejection.message_id,
                )),
            }
        }

        let mut tx = self.pool.begin().await?;

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

            // 4. The ledger decides what is fresh.
            let fresh_ids: HashSet<Uuid> = sqlx::query_scalar(INSERT_LEDGER)
                .bind(&self.consumer)
                .bind(
                    candidates
                        .iter()
                        .map(|(_, o)| o.event_day())
                        .collect::<Vec<_>>(),
                )
                .bind(candidates.iter().map(|(_, o)| o.message_id).collect::<Vec<_>>())
                .bind(candidates.iter().map(|(_, o)| o.order_id.as_str()).collect::<Vec<_>>())
                .bind(candidates.iter().map(|(r, _)| r.topic.as_str()).collect::<Vec<_>>())
                .bind(candidates.iter().map(|(r, _)| r.partition).collect::<Vec<_>>())
                .bind(candidates.iter().map(|(r, _)| r.offset).collect::<Vec<_>>())
                .bind(
                    business_duplicate
                        .iter()
                        .map(|dup| if *dup { "business_duplicate" } else { "processed" })
                        .collect::<Vec<_>>(),
                )
                .bind(
                    candidates
                        .iter()
                        .map(|(r, _)| event::payload_hash(r.payload.as_deref().unwrap_or_default()))
                        .collect::<Vec<_>>(),
                )
                .fetch_all(&mut *tx)
                .await?
                .into_iter()
                .collect();

            let mut fresh: Vec<&OrderPlaced> = Vec::with_capacity(fresh_ids.len());
            for (order, is_business_duplicate) in orders_only.iter().zip(&business_duplicate) {
                if fresh_ids.contains(&order.message_id) {
                    fresh.push(order);
                    outcome.processed += 1;
                    outcome.business_duplicates += u64::from(*is_business_duplicate);
                    outcome.fresh_event_times.push(order.occurred_at);
                } else {
                    outcome.duplicates += 1;
                }
            }

            // 5. First-come allocation, then the reservations and ONE
            //    aggregated stock update.
            let lines = allocation::allocate(&fresh, &existing, &mut available);
            if !lines.is_empty() {
                let inserted = sqlx::query(INSERT_RESERVATIONS)
                    .bind(lines.iter().map(|l| l.order_id.as_str()).collect::<Vec<_>>())
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
                .bind(parked.iter().map(|p| p.payload.as_slice()).collect::<Vec<_>>())
                .bind(parked.iter().map(|p| p.headers_json.as_str()).collect::<Vec<_>>())
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

        tx.commit().await?;
        Ok(outcome)
    }
}

/// The record as parked `db_rejected`, with the database's own words.
fn reject(item: &Classified, sqlstate: &str, message: &str) -> Classified {
    let message_id = match &item.disposition {
        Disposition::Candidate(order) => Some(order.message_id),
        Disposition::Parked(rejection) => rejection.message_id,
        Disposition::DuplicateInBatch => None,
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
