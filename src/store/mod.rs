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
//!
//! Layout:
//! - `schema`: the pool, migrations, the schema check, maintenance.
//! - `pooler`: how statements travel, directly or through a pooler
//!   (PgBouncer in session or transaction mode).
//! - `apply`: the batch statement, its bind arrays and outcome, bisection.
//! - `replay`: listing and replaying parked records.
//! - `dlq`: the DLQ copies the parked rows still owe.
//! - `breaker`: the poison breaker's state, shared by every member.
//! - `filter`: the filters of the ledger's closed days, built by maintenance.
//! - `error`: [`StoreError`] and the SQLSTATE table.

mod apply;
mod breaker;
mod dlq;
mod error;
mod filter;
mod pooler;
pub mod positions;
mod replay;
mod schema;

pub use apply::{BatchOutcome, Behind};
pub use breaker::{breaker, resume_breaker, BreakerState};
pub use error::{StoreError, RETRY_REASONS};
pub use filter::{build_next_filter, unfiltered_days, FilterBuilt};
pub use pooler::{DbPool, Pooler};
pub use replay::{ParkedCount, ParkedEntry, ReplayOutcome};
pub use schema::{
    check_schema, compact, connect, connect_lazy, load_window, maintain, migrate, register_codes,
    retention, CompactReport, Connection, MaintainReport, Retention, PREMAKE_DAYS,
};

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::Postgres;
use uuid::Uuid;

use crate::batch::{self, InboundRecord, PartitionKey};
use crate::window::DedupWindow;

/// How often the dedup window is re-read even when nothing failed.
const WINDOW_REFRESH: Duration = Duration::from_secs(60);

/// How long a statement waits for the database's answer, unless told
/// otherwise ([`Inbox::answer_within`]).
const DEFAULT_ANSWER_WITHIN: Duration = Duration::from_secs(35);

/// Timed round trips kept to estimate the distance to the database.
const ROUND_TRIP_SAMPLES: usize = 5;

/// The inbox of one logical consumer: applies batches exactly once. Shared
/// by concurrent batches (of distinct partitions): each takes its own
/// connection from the pool.
pub struct Inbox {
    pool: DbPool,
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
    /// The position this inbox last wrote per partition, or read when the
    /// partition was assigned: a database whose position is behind it went
    /// back, and the batch statement refuses to go on there
    /// (`PositionBehind`). Seeded at assignment, so that a database restored
    /// under a consumer that has not written yet is caught too.
    written: Mutex<BTreeMap<PartitionKey, i64>>,
    /// Kafka's id of each topic, as read at the last assignment: the
    /// positions written carry it (see `inbox_position.topic_id`).
    topic_ids: Mutex<BTreeMap<String, Uuid>>,
    /// The longest any statement waits for the database's answer: a
    /// database that stops answering (packets swallowed, no reset) would
    /// otherwise hold a batch, and a shutdown, for as long as the kernel
    /// keeps the connection.
    answer_within: Duration,
    /// Whether parked records are copied to a DLQ topic: their rows then
    /// owe a copy until it is sent (`inbox_parked.dlq_sent_at`).
    dlq_copies: bool,
}

impl Inbox {
    pub fn new(pool: DbPool, consumer: String) -> Self {
        Inbox {
            pool,
            consumer,
            window: Mutex::new((DedupWindow::default(), None)),
            idle: Mutex::new(Vec::new()),
            round_trips: Mutex::new(Vec::new()),
            written: Mutex::new(BTreeMap::new()),
            topic_ids: Mutex::new(BTreeMap::new()),
            answer_within: DEFAULT_ANSWER_WITHIN,
            dlq_copies: false,
        }
    }

    /// Parked records are copied to a DLQ topic: each parked row owes its
    /// copy until [`Inbox::copies_sent`] marks it.
    pub fn with_dlq_copies(mut self, copies: bool) -> Self {
        self.dlq_copies = copies;
        self
    }

    /// The longest a statement waits for the database's answer before it is
    /// given up as a transient failure (`database_timeout`): somewhat more
    /// than the server's own `statement_timeout`, which ends a statement
    /// that runs too long, while this ends one whose answer never comes.
    pub fn answer_within(mut self, deadline: Duration) -> Self {
        self.answer_within = deadline;
        self
    }

    /// `work` against the database, given up after [`Inbox::answer_within`].
    pub(crate) async fn answered<T>(
        &self,
        work: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        match tokio::time::timeout(self.answer_within, work).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Transient {
                reason: "database_timeout",
                message: format!(
                    "no answer from the database within {:?}",
                    self.answer_within
                ),
            }),
        }
    }

    pub fn pool(&self) -> &DbPool {
        &self.pool
    }

    /// The ledger's consumer name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// Kafka's id of the topic as read at its last assignment.
    pub fn topic_id(&self, topic: &str) -> Option<Uuid> {
        self.topic_ids
            .lock()
            .expect("topic ids lock")
            .get(topic)
            .copied()
    }

    /// Partitions assigned to this member, and the database's positions of
    /// them as read then (absent: it has none): what the database must not
    /// go behind from now on.
    /// `topic_ids` are Kafka's ids of their topics, which the positions this
    /// inbox writes carry from now on.
    pub fn expect_positions(
        &self,
        assigned: &[PartitionKey],
        positions: &BTreeMap<PartitionKey, i64>,
        topic_ids: &BTreeMap<String, Uuid>,
    ) {
        self.topic_ids
            .lock()
            .expect("topic ids lock")
            .extend(topic_ids.iter().map(|(topic, id)| (topic.clone(), *id)));
        let mut written = self.written.lock().expect("written lock");
        for key in assigned {
            match positions.get(key) {
                Some(position) => written.insert(key.clone(), *position),
                None => written.remove(key),
            };
        }
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
            // the records of that day are parked instead of failing again
            // (what parts of the batch committed before is counted).
            Err(StoreError::MissingPartition { .. }) => {
                let window = self.refresh_window().await?;
                let batch = batch::classify(records.to_vec(), &window);
                self.apply_isolating(&batch, trace_id).await
            }
            Err(StoreError::PartlyApplied(error))
                if matches!(*error, StoreError::MissingPartition { .. }) =>
            {
                let window = self.refresh_window().await?;
                let batch = batch::classify(records.to_vec(), &window);
                Ok(self
                    .apply_isolating(&batch, trace_id)
                    .await?
                    .after_lost_answer())
            }
            result => result,
        }
    }

    /// The window, unless it is older than the refresh period.
    fn current_window(&self) -> Option<DedupWindow> {
        self.window_as_of(Instant::now())
    }

    /// The window as of `now`, unless it was read more than the refresh
    /// period before.
    fn window_as_of(&self, now: Instant) -> Option<DedupWindow> {
        let guard = self.window.lock().expect("window lock");
        match guard.1 {
            Some(read) if now.saturating_duration_since(read) <= WINDOW_REFRESH => {
                Some(guard.0.clone())
            }
            _ => None,
        }
    }

    /// Re-reads the dedup window from the database.
    pub async fn refresh_window(&self) -> Result<DedupWindow, StoreError> {
        let window = self.answered(load_window(&self.pool)).await?;
        *self.window.lock().expect("window lock") = (window.clone(), Some(Instant::now()));
        self.answered(self.time_round_trip()).await?;
        Ok(window)
    }

    /// Times a statement that costs the database nothing (on a connection
    /// where it is prepared already, or in the simple protocol through a
    /// transaction pooler): its time is the round trip.
    async fn time_round_trip(&self) -> Result<(), StoreError> {
        let mut connection = self.pool.acquire().await?;
        let mut took = Duration::MAX;
        for _ in 0..2 {
            let asked = Instant::now();
            if self.pool.prepares() {
                sqlx::query("SELECT 1").execute(&mut *connection).await?;
            } else {
                sqlx::Executor::execute(&mut *connection, "SELECT 1").await?;
            }
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
}

#[cfg(test)]
mod tests;
