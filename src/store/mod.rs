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
//!   (PgBouncer in session or transaction mode), and how long they wait
//!   for an answer.
//! - `apply`: the batch writer: the batch statement, its arguments and
//!   outcome, bisection, the connections kept between batches.
//! - `position_guard`: the positions this member expects the database at.
//! - `window_cache`: the dedup window as last read.
//! - `round_trips`: the distance to the database.
//! - `positions`: positions read, listed and set (functions over the pool).
//! - `replay`: listing and replaying parked records (functions over the
//!   pool).
//! - `dlq`: the DLQ copies the parked rows still owe (functions over the
//!   pool).
//! - `breaker`: the poison breaker's state, shared by every member
//!   (functions over the pool).
//! - `filter`: the filters of the ledger's closed days, built by maintenance.
//! - `outcomes`: events per minute by outcome, counted by the members, for
//!   the console's chart.
//! - `error`: [`StoreError`] and the SQLSTATE table.

mod apply;
mod breaker;
mod dlq;
mod error;
mod filter;
mod maintenance_runs;
mod outcomes;
mod pooler;
pub mod position_guard;
pub mod positions;
mod replay;
mod round_trips;
mod schema;
mod window_cache;

pub use apply::{BatchOutcome, BatchWriter, Decision, DecisionOutcome, DECISIONS};
pub use breaker::{breaker, open_breaker, resume_breaker, BreakerState};
pub use dlq::{copies_owed, copies_sent};
pub use error::{RetryReason, StoreError};
pub use filter::{build_next_filter, unfiltered_days, FilterBuilt};
pub use maintenance_runs::{
    maintenance_runs, MaintainReport, MaintenanceRun, MaintenanceTrigger,
    RUNS_KEPT as MAINTENANCE_RUNS_KEPT,
};
pub use outcomes::{flush_outcomes, outcomes_by_minute, OutcomeMinute, OutcomeTally};
pub use pooler::{DbPool, Pooler};
pub use position_guard::{Behind, PositionGuard};
pub use replay::{
    count_parked, list_parked, parked_groups, parked_record, replay, replay_candidates,
    ParkedCount, ParkedEntry, ParkedFilter, ParkedGroup, ParkedRecord, ReplayOutcome, Replayed,
    REPLAYS_KEPT,
};
pub use round_trips::RoundTrips;
pub use schema::{
    check_schema, compact, connect, connect_lazy, load_window, maintain, migrate, register_codes,
    retention, CompactReport, Connection, Retention, PREMAKE_DAYS,
};
pub use window_cache::WindowCache;

use std::time::Instant;

use crate::batch::{Batch, InboundRecord};
use crate::window::DedupWindow;

/// The store of one logical consumer, as the consumer loop uses it: the
/// parts a batch goes through, each owning one thing. It owns nothing
/// itself; [`Inbox::apply`] only takes a batch through them (the window it
/// is judged against, the writer, the positions it is checked against).
/// Shared by concurrent batches (of distinct partitions).
pub struct Inbox {
    /// The pool, for the functions over it (replay, breaker, DLQ copies,
    /// positions).
    pool: DbPool,
    /// The ledger's `consumer`: stable across pods and restarts, so a replay
    /// under a new group id is still recognised.
    consumer: String,
    /// The dedup window batches are classified and applied against.
    window: WindowCache,
    /// The round trips timed at each read of the window.
    round_trips: RoundTrips,
    /// The positions the database must not go behind.
    positions: PositionGuard,
    /// The batch statement and the connections it keeps.
    writer: BatchWriter,
}

impl Inbox {
    /// The parts of `consumer`'s store on `pool` (whose deadline for an
    /// answer, [`DbPool::answer_within`], each statement keeps).
    pub fn new(pool: DbPool, consumer: String) -> Self {
        Inbox {
            window: WindowCache::default(),
            round_trips: RoundTrips::default(),
            positions: PositionGuard::new(pool.clone(), consumer.clone()),
            writer: BatchWriter::new(pool.clone(), consumer.clone(), false),
            pool,
            consumer,
        }
    }

    /// Parked records are copied to a DLQ topic: each parked row owes its
    /// copy until [`copies_sent`] marks it.
    pub fn with_dlq_copies(mut self, copies: bool) -> Self {
        self.writer = BatchWriter::new(self.pool.clone(), self.consumer.clone(), copies);
        self
    }

    pub fn pool(&self) -> &DbPool {
        &self.pool
    }

    /// The ledger's consumer name.
    pub fn consumer(&self) -> &str {
        &self.consumer
    }

    /// The positions this member expects the database at.
    pub fn positions(&self) -> &PositionGuard {
        &self.positions
    }

    /// A batch of `records` (in poll order) classified once, against the
    /// window as last read: [`Inbox::apply`] judges it again (without a
    /// second parse) only if the window changed since.
    pub fn classify(&self, records: Vec<InboundRecord>) -> Batch {
        Batch::classify(records, &self.window.latest())
    }

    /// Applies a batch exactly once. On `Err` nothing of the batch is
    /// committed that was not committed before, and applying the same batch
    /// again is always safe. The outcome says what to commit to Kafka.
    /// `trace_id`, the batch span's, is kept on the rows it parks.
    pub async fn apply(
        &self,
        batch: &Batch,
        trace_id: Option<&str>,
    ) -> Result<BatchOutcome, StoreError> {
        let window = match self.window.as_of(Instant::now()) {
            Some(window) => window,
            None => self.refresh_window().await?,
        };
        let judged = batch.in_window(&window);
        match self.writer.apply(&judged, &self.positions, trace_id).await {
            // A partition dropped since the window was read: re-read it, so
            // the records of that day are parked instead of failing again
            // (what parts of the batch committed before is counted).
            Err(StoreError::MissingPartition { .. }) => {
                let window = self.refresh_window().await?;
                self.writer
                    .apply(&batch.in_window(&window), &self.positions, trace_id)
                    .await
            }
            Err(StoreError::PartlyApplied(error))
                if matches!(*error, StoreError::MissingPartition { .. }) =>
            {
                let window = self.refresh_window().await?;
                Ok(self
                    .writer
                    .apply(&batch.in_window(&window), &self.positions, trace_id)
                    .await?
                    .after_lost_answer())
            }
            result => result,
        }
    }

    /// Re-reads the dedup window from the database, and times the round
    /// trip to it.
    pub async fn refresh_window(&self) -> Result<DedupWindow, StoreError> {
        let window = self
            .pool
            .with_answer_deadline(load_window(&self.pool))
            .await?;
        self.window.read_now(window.clone());
        self.pool
            .with_answer_deadline(self.round_trips.time(&self.pool))
            .await?;
        Ok(window)
    }

    /// The round trip to the database: the shortest of the last few timed.
    pub fn round_trip(&self) -> Option<std::time::Duration> {
        self.round_trips.shortest()
    }

    /// Applies `records` as one batch under `EXPLAIN` ([`BatchWriter::explain`]).
    pub async fn explain(
        &self,
        records: &[InboundRecord],
        generic: bool,
    ) -> Result<serde_json::Value, StoreError> {
        let window = self.refresh_window().await?;
        let batch = Batch::classify(records.to_vec(), &window);
        self.writer.explain(&batch, &self.positions, generic).await
    }
}

#[cfg(test)]
mod tests;
