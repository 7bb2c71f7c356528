//! Applying a round: its batches in their lanes, each one transaction in a
//! span of its own, and a batch that fails retried in order with the
//! partitions paused (the consumer keeps polling, so it stays in its group),
//! or read again from the database's positions when the database went back.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rand::Rng;
use rdkafka::consumer::Consumer;
use rdkafka::Offset;

use crate::batch::{self, Batch, InboundRecord, PartitionKey};
use crate::store::positions::Stored;
use crate::store::{BatchOutcome, Behind, StoreError};

use super::{drop_partitions, failpoint, Event, Held, LoopState, Pipeline, State};
use crate::observe::{BatchCommitted, BatchRolledBack, PositionBehind};

/// First and largest pause between retries of a batch.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(100);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// The least time between two tries of a seek librdkafka refused.
const SEEK_AGAIN_AFTER: Duration = Duration::from_millis(500);
/// How long shutdown waits for an unavailable database before it abandons
/// the batch in hand (uncommitted, so it is redelivered).
pub(super) const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

impl Pipeline {
    /// Applies a round of records: at most one batch per lane, of distinct
    /// partitions, each classified once, run concurrently, one transaction
    /// each (what does not fit goes back to the front of the carry for the
    /// next round). A batch that fails is then retried, in order, with the
    /// partitions paused. Returns the batches applied and their outcome,
    /// which carries their offsets to commit.
    pub(super) async fn apply_round(
        &self,
        records: Vec<InboundRecord>,
        started: Instant,
        loop_state: &mut LoopState,
    ) -> (Vec<Batch>, BatchOutcome) {
        let round = batch::round(records, self.lanes(), self.settings.max_records);
        for record in round.left_over.into_iter().rev() {
            loop_state.carry.push_front(record);
        }
        tracing::debug!(lanes = round.batches.len(), "round");
        let batches = round
            .batches
            .into_iter()
            .map(|records| self.inbox.classify(records));
        let results = futures::future::join_all(batches.map(|batch| async move {
            match self.apply_traced(&batch).await {
                Ok(done) => {
                    BatchCommitted {
                        size: batch.len(),
                        started,
                        statements: &done.statement_times,
                        consumer: self.inbox.consumer(),
                    }
                    .emit(&self.metrics);
                    (Some(batch), done, None)
                }
                Err(error) => {
                    // Retried at once, in order, by apply_with_retry.
                    BatchRolledBack {
                        error: &error,
                        retry_in: Duration::ZERO,
                    }
                    .emit(&self.metrics);
                    (None, BatchOutcome::default(), Some((batch, error)))
                }
            }
        }))
        .await;
        let mut applied = Vec::new();
        let mut outcome = BatchOutcome::default();
        let mut remaining = Vec::new();
        for (lane_applied, lane_outcome, failed) in results {
            applied.extend(lane_applied);
            outcome.absorb(lane_outcome);
            remaining.extend(failed);
        }
        // Partitions revoked while retrying: their records in later batches
        // belong to the new owner.
        let mut revoked_meanwhile: Vec<PartitionKey> = Vec::new();
        for (mut batch, error) in remaining {
            if let StoreError::PositionBehind(behind) = &error {
                self.read_again(behind, &mut batch, loop_state);
            }
            drop_partitions(&revoked_meanwhile, &mut batch, &mut VecDeque::new());
            let lost_answer = error.answer_may_be_lost();
            match self
                .apply_with_retry(batch, lost_answer, loop_state, &mut revoked_meanwhile)
                .await
            {
                Some((batch, done)) => {
                    BatchCommitted {
                        size: batch.len(),
                        started,
                        statements: &done.statement_times,
                        consumer: self.inbox.consumer(),
                    }
                    .emit(&self.metrics);
                    outcome.absorb(done);
                    applied.push(batch);
                }
                // Shutdown gave up on the database, or the client failed:
                // later batches of the same partitions must not be applied
                // past the abandoned one.
                None if loop_state.stopping() => break,
                None => {}
            }
        }
        (applied, outcome)
    }

    /// One batch transaction, in a span of its own when tracing is on.
    async fn apply_traced(&self, batch: &Batch) -> Result<BatchOutcome, StoreError> {
        let span = self.telemetry.batch_span(batch.records(), &self.group);
        let result = self.inbox.apply(batch, span.trace_id().as_deref()).await;
        match &result {
            Ok(outcome) => span.applied(outcome),
            Err(error) => span.failed(error.retry_reason().as_str(), error),
        }
        result
    }

    /// Applies one batch, retrying transient failures while keeping the
    /// group membership: each try applies the same batch, less the records
    /// of partitions revoked meanwhile (left to their new owner) or read
    /// again from the database's position. `lost_answer`: an earlier try
    /// may have committed without its answer reaching here. Returns the
    /// batch applied and the outcome; `None` when there is nothing to
    /// commit: the batch was empty, every record of it was revoked, or
    /// shutdown gave up on an unavailable database.
    async fn apply_with_retry(
        &self,
        mut batch: Batch,
        mut lost_answer: bool,
        loop_state: &mut LoopState,
        revoked_meanwhile: &mut Vec<PartitionKey>,
    ) -> Option<(Batch, BatchOutcome)> {
        let mut backoff = RETRY_BACKOFF_MIN;
        let mut paused = false;
        let outcome = loop {
            if batch.is_empty() {
                break None;
            }
            match self.apply_traced(&batch).await {
                // An earlier try may have committed with its answer lost:
                // what it did is this batch's (counters, DLQ copies).
                Ok(outcome) if lost_answer => break Some(outcome.after_lost_answer()),
                Ok(outcome) => break Some(outcome),
                Err(StoreError::PositionBehind(behind)) => {
                    self.read_again(&behind, &mut batch, loop_state);
                }
                Err(error) => {
                    lost_answer |= error.answer_may_be_lost();
                    loop_state.machine.on(Event::BatchRefused);
                    let wait = jittered(backoff);
                    BatchRolledBack {
                        error: &error,
                        retry_in: wait,
                    }
                    .emit(&self.metrics);
                    if let State::Draining { since } = loop_state.state() {
                        if since.elapsed() > SHUTDOWN_GRACE {
                            tracing::warn!(reason = error.retry_reason().as_str(), "shutting down while the batch in hand still fails; it is not committed and will be redelivered");
                            break None;
                        }
                    }
                    if !paused {
                        paused = self.pause_all();
                    }
                    self.wait_polling(wait, &mut batch, loop_state, revoked_meanwhile)
                        .await;
                    if loop_state.failed() {
                        // The client is done for: the batch is not
                        // committed, and its records are read again by
                        // whoever owns the partitions next.
                        break None;
                    }
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                }
            }
        };
        loop_state.machine.on(Event::BatchSettled);
        if paused {
            self.resume_all();
        }
        if outcome.is_some() {
            self.metrics
                .readiness
                .database_reachable
                .store(true, Ordering::Relaxed);
            // The database failed meanwhile and may have come back from a
            // backup or a replica: check every owned partition now.
            loop_state.upkeep.reset_immediately();
        }
        outcome.map(|outcome| (batch, outcome))
    }

    /// Sleeps for `duration` while serving the consumer (heartbeats are
    /// librdkafka's, but rebalances and commits are served by polling).
    /// Partitions revoked meanwhile are added to `revoked_meanwhile`, for
    /// the caller to drop their records. Returns early when the consumer
    /// failed fatally.
    pub(super) async fn wait_polling(
        &self,
        duration: Duration,
        held: &mut impl Held,
        loop_state: &mut LoopState,
        revoked_meanwhile: &mut Vec<PartitionKey>,
    ) {
        let until = tokio::time::Instant::now() + duration;
        while !loop_state.failed() {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                message = self.consumer.recv() => {
                    revoked_meanwhile.extend(self.purge_revoked(held, &mut loop_state.carry));
                    if let Some(record) = self.received(message, loop_state) {
                        loop_state.carry.push_back(record);
                        self.metrics
                            .lag_clock
                            .holding(held.records().chain(loop_state.carry.iter()));
                    }
                    // Partitions assigned meanwhile are paused too.
                    self.pause_all();
                }
            }
        }
        revoked_meanwhile.extend(self.purge_revoked(held, &mut loop_state.carry));
    }

    /// The database went back (restored, or failed over to a replica that
    /// lacked the last commits) while this member kept reading: its
    /// positions of these partitions are behind what was applied and
    /// committed. Reads each partition again from the database's position
    /// (its beginning where the database has none), dropping the records in
    /// hand, which come after what the database lacks.
    pub(super) fn read_again(
        &self,
        behind: &Behind,
        held: &mut impl Held,
        loop_state: &mut LoopState,
    ) {
        for ((topic, partition), stored) in &behind.positions {
            PositionBehind {
                topic,
                partition: *partition,
                position: stored.map(|s| s.next_offset),
                by_operator: stored.is_some_and(|s| s.by_operator),
            }
            .emit(&self.metrics);
        }
        self.seek_to(&behind.positions, held, loop_state);
    }

    /// Reads each partition again from the database's position (its
    /// beginning for `None`), dropping the records in hand, and commits
    /// that offset to Kafka from now on. A seek librdkafka refuses is not
    /// given up: librdkafka would go on fetching after the records dropped,
    /// and the next batch would skip them. The partition's records are
    /// dropped as they arrive, and the seek tried again with each, until
    /// it is done ([`Pipeline::seek_again`]).
    pub(super) fn seek_to(
        &self,
        positions: &BTreeMap<PartitionKey, Option<Stored>>,
        held: &mut impl Held,
        loop_state: &mut LoopState,
    ) {
        for ((topic, partition), stored) in positions {
            let key = (topic.to_owned(), *partition);
            let offset = match stored {
                Some(stored) => Offset::Offset(tokio::task::block_in_place(|| {
                    crate::kafka::checked_start(
                        &*self.consumer,
                        topic,
                        *partition,
                        *stored,
                        &self.metrics,
                    )
                    .offset
                })),
                None => Offset::Beginning,
            };
            if self.seek(&key, offset) {
                loop_state.unsought.remove(&key);
            } else {
                loop_state
                    .unsought
                    .insert(key.clone(), (offset, Instant::now()));
            }
            self.offsets.rewind(&key, stored.map(|s| s.next_offset));
        }
        let again: Vec<PartitionKey> = positions.keys().cloned().collect();
        drop_partitions(&again, held, &mut loop_state.carry);
        self.metrics
            .lag_clock
            .holding(held.records().chain(loop_state.carry.iter()));
    }

    /// Tries again the seeks librdkafka refused, of the partitions still
    /// owned (a revoked one starts at the database's position with its new
    /// owner), each at most every `SEEK_AGAIN_AFTER`.
    pub(super) fn seek_again(&self, loop_state: &mut LoopState) {
        if loop_state.unsought.is_empty() {
            return;
        }
        let owned = self.offsets.owned();
        loop_state.unsought.retain(|key, _| owned.contains(key));
        let pending: Vec<(PartitionKey, Offset)> = loop_state
            .unsought
            .iter()
            .filter(|(_, (_, tried))| tried.elapsed() >= SEEK_AGAIN_AFTER)
            .map(|(key, (offset, _))| (key.clone(), *offset))
            .collect();
        for (key, offset) in pending {
            if self.seek(&key, offset) {
                tracing::info!(
                    topic = key.0,
                    partition = key.1,
                    offset = ?offset,
                    "the partition is read again from its position: the seek librdkafka refused before is done"
                );
                loop_state.unsought.remove(&key);
            } else {
                loop_state.unsought.insert(key, (offset, Instant::now()));
            }
        }
    }

    /// Moves librdkafka's fetch position of a partition; false when it
    /// refused (logged).
    fn seek(&self, (topic, partition): &PartitionKey, offset: Offset) -> bool {
        if failpoint::seek_fails() {
            tracing::error!(
                topic,
                partition,
                "fail point fail_first_seek: the seek is refused"
            );
            return false;
        }
        let sought = tokio::task::block_in_place(|| {
            self.consumer
                .seek(topic, *partition, offset, Duration::from_secs(10))
        });
        match sought {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(%error, topic, partition, "seek failed: the partition's records are dropped as they arrive until a seek to its position is done");
                false
            }
        }
    }

    pub(super) fn pause_all(&self) -> bool {
        match self.consumer.assignment() {
            Ok(assignment) => self.consumer.pause(&assignment).is_ok(),
            Err(_) => false,
        }
    }

    pub(super) fn resume_all(&self) {
        if let Ok(assignment) = self.consumer.assignment() {
            if let Err(error) = self.consumer.resume(&assignment) {
                tracing::warn!(%error, "resume failed");
            }
        }
    }
}

/// Backoff with ±50 % jitter, so consumers retrying together spread out.
fn jittered(backoff: Duration) -> Duration {
    backoff.mul_f64(rand::thread_rng().gen_range(0.5..1.5))
}
