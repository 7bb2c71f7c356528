//! The consumer loop: poll a batch, apply it in one transaction, then commit
//! its offsets.
//!
//! ```text
//! recv ──> batch (≤ max records, ≤ linger after the first) ──> Inbox::apply (one tx)
//!   ^                                                              │ COMMIT
//!   └──────────── commit offsets (async) <── CommittedOffsets <────┘
//! ```
//!
//! Invariants:
//! - Offsets are handed to Kafka only after the batch's DB commit.
//! - While the database is unavailable the assigned partitions are paused and
//!   the loop keeps polling, so the consumer stays in its group; the batch is
//!   retried with capped, jittered backoff and nothing is committed.
//! - Records of partitions revoked while they were held in memory are
//!   dropped: their new owner rereads them from the committed offset.
//! - On shutdown: stop fetching, finish the batch in hand, commit
//!   synchronously, leave the group.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use rand::Rng;
use rdkafka::consumer::{CommitMode, Consumer, StreamConsumer};
use rdkafka::Offset;
use tokio::sync::watch;

use crate::batch::{self, InboundRecord, PartitionKey};
use crate::event::ParkReason;
use crate::kafka::{self, CommittedOffsets, Dlq, InboxContext};
use crate::metrics::Metrics;
use crate::store::{BatchOutcome, Inbox, StoreError};
use crate::telemetry::Telemetry;

/// The consumer as the pipeline uses it.
pub type InboxConsumer = StreamConsumer<InboxContext>;

/// Environment variable naming a fail point, for tests only (read only
/// when built with the `failpoints` feature):
/// - `after_db_commit` aborts the process right after a batch's DB commit,
///   before its offset commit;
/// - `drop_first_offset_commit` loses the first offset commit, as if Kafka
///   had refused it.
pub const FAILPOINT_ENV: &str = "INBOX_FAILPOINT";

/// The fail point named in [`FAILPOINT_ENV`]; inert without the feature.
struct FailPoint {
    name: Option<String>,
    commit_dropped: bool,
}

impl FailPoint {
    fn from_env() -> FailPoint {
        FailPoint {
            name: cfg!(feature = "failpoints")
                .then(|| std::env::var(FAILPOINT_ENV).ok())
                .flatten(),
            commit_dropped: false,
        }
    }

    fn is(&self, name: &str) -> bool {
        self.name.as_deref() == Some(name)
    }

    fn abort_after_db_commit(&self) {
        if self.is("after_db_commit") {
            tracing::error!("fail point after_db_commit: aborting before the offset commit");
            std::process::abort();
        }
    }

    /// True (once) when this offset commit is to be lost.
    fn drop_offset_commit(&mut self) -> bool {
        if self.is("drop_first_offset_commit") && !self.commit_dropped {
            self.commit_dropped = true;
            tracing::error!("fail point drop_first_offset_commit: offset commit not sent");
            return true;
        }
        false
    }
}

/// First and largest pause between retries of a batch.
const RETRY_BACKOFF_MIN: Duration = Duration::from_millis(100);
const RETRY_BACKOFF_MAX: Duration = Duration::from_secs(5);
/// How long shutdown waits for an unavailable database before it abandons
/// the batch in hand (uncommitted, so it is redelivered).
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How often offsets the database holds and Kafka has not confirmed (a
/// commit that failed in a rebalance, on a partition with nothing new to
/// carry the offset) are sent again.
const RECOMMIT_EVERY: Duration = Duration::from_secs(1);

/// Batch shape.
#[derive(Debug, Clone, Copy)]
pub struct BatchSettings {
    /// Records per transaction.
    pub max_records: usize,
    pub linger: Duration,
    /// Batches of distinct partitions applied concurrently (one connection
    /// each); a partition's records are in one batch of a round, and rounds
    /// follow one another, so its batches stay in order.
    pub lanes: usize,
    /// The round trip to the database from which those lanes are used (see
    /// [`Pipeline::lanes`]).
    pub lanes_from_round_trip: Duration,
    /// This consumer replaces one that was fenced (see `service::run`).
    pub replaces_fenced: bool,
}

/// The running consumer.
pub struct Pipeline {
    pub consumer: Arc<InboxConsumer>,
    pub offsets: Arc<CommittedOffsets>,
    pub inbox: Arc<Inbox>,
    pub dlq: Option<Dlq>,
    pub metrics: Metrics,
    pub settings: BatchSettings,
    /// One span per batch transaction when tracing is on.
    pub telemetry: Telemetry,
    /// The consumer group, named on the spans.
    pub group: String,
}

/// The longest a shutdown waits for the Kafka client to close.
const DESTROY_WAIT: Duration = Duration::from_secs(10);

/// A pipeline error that ends `run`.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),
}

impl Pipeline {
    /// Runs until `shutdown` turns true, then drains and commits.
    pub async fn run(self, mut shutdown: watch::Receiver<bool>) -> Result<(), PipelineError> {
        // Records polled while a batch was being retried, kept in order.
        let mut carry: VecDeque<InboundRecord> = VecDeque::new();
        let mut failpoint = FailPoint::from_env();
        let mut fatal = None;
        let mut recommit = tokio::time::interval(RECOMMIT_EVERY);
        recommit.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let collected = self
                .collect(&mut carry, &mut shutdown, &mut recommit, &mut fatal)
                .await;
            let Some((records, started)) = collected else {
                break;
            };
            let (records, outcome) = self
                .apply_round(records, started, &mut carry, &mut shutdown)
                .await;
            if records.is_empty() {
                continue;
            }
            // Partitions revoked while the round was applied are left out:
            // their new owner commits them.
            let next = batch::next_offsets(&records);
            self.metrics.lag_clock.applied(&next, carry.iter());
            let committed = self.offsets.advance(&next);
            self.record_outcome(&outcome);
            if let Some(dlq) = &self.dlq {
                publish_parked(dlq, &records, &outcome);
            }
            failpoint.abort_after_db_commit();
            // A dropped commit is sent again with the unconfirmed ones.
            if !committed.is_empty() && !failpoint.drop_offset_commit() {
                self.commit_async(&kafka::to_list(committed.iter()));
            }
            if *shutdown.borrow() || fatal.is_some() {
                break;
            }
        }
        self.close(fatal.is_some());
        match fatal {
            Some(error) => Err(error.into()),
            None => Ok(()),
        }
    }

    /// Commits every offset the database has, synchronously, and leaves the
    /// group (dropping the consumer closes it, which revokes its partitions).
    fn close(self, fatal: bool) {
        let offsets = self.offsets.all();
        if offsets.count() > 0 {
            if let Err(error) = self.consumer.commit(&offsets, CommitMode::Sync) {
                self.metrics.offset_commit_failures.inc();
                tracing::warn!(%error, "final offset commit failed; those records will be redelivered and ignored as duplicates");
            }
        }
        if let Some(dlq) = &self.dlq {
            dlq.flush(Duration::from_secs(5));
        }
        self.consumer.unsubscribe();
        tracing::info!("consumer closed");
        // Destroying a client that failed fatally can wait many seconds on
        // its broker connections (seen: 10 s after a coordinator moved): its
        // replacement does not wait for that. The replacement's own destroy
        // at shutdown was once seen never to end: it gets a bounded wait.
        // Otherwise the client is destroyed here (a dynamic member leaves
        // the group then, so its partitions move at once).
        if fatal || self.settings.replaces_fenced {
            let Pipeline { consumer, dlq, .. } = self;
            let (destroyed, done) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                drop((consumer, dlq));
                let _ = destroyed.send(());
            });
            if !fatal && done.recv_timeout(DESTROY_WAIT).is_err() {
                tracing::warn!(
                    "the Kafka client did not close within {DESTROY_WAIT:?}; exiting without it"
                );
            }
        }
    }

    /// Sends an offset commit; its outcome reaches the commit callback,
    /// and what Kafka does not confirm is sent again.
    fn commit_async(&self, offsets: &rdkafka::TopicPartitionList) {
        if let Err(error) = kafka::commit_async(&*self.consumer, offsets) {
            self.metrics.offset_commit_failures.inc();
            tracing::warn!(%error, "offset commit not sent; it is sent again");
        }
    }

    /// Sends again the offsets Kafka has not confirmed.
    fn recommit_unconfirmed(&self) {
        let pending = self.offsets.unconfirmed();
        if pending.count() > 0 {
            tracing::debug!(
                partitions = pending.count(),
                "sending offsets Kafka has not confirmed again"
            );
            self.commit_async(&pending);
        }
    }

    /// Waits for the first record, then gathers up to `max_records` per lane
    /// or until `linger` after the first. `None` when shutdown came before any
    /// record. Meanwhile, every `recommit` tick, sends the offsets Kafka has
    /// not confirmed again.
    async fn collect(
        &self,
        carry: &mut VecDeque<InboundRecord>,
        shutdown: &mut watch::Receiver<bool>,
        recommit: &mut tokio::time::Interval,
        fatal: &mut Option<rdkafka::error::KafkaError>,
    ) -> Option<(Vec<InboundRecord>, Instant)> {
        let capacity = self.settings.max_records * self.lanes();
        let mut records = Vec::with_capacity(capacity);
        let mut deadline: Option<tokio::time::Instant> = None;
        // Records that were already waiting when the round began queued up
        // during the previous batch: they have lingered enough. Such a round
        // takes what is there and goes, so under load a batch follows the
        // last one at once, as large as the traffic of one transaction.
        // Records carried over (left by the last round, or polled while it
        // was retried) do not count: a round that starts with them still
        // gathers what Kafka brings within the linger, rather than going
        // with a few records.
        let mut behind = false;
        while records.len() < capacity {
            let polled = if let Some(record) = carry.pop_front() {
                Ok(record)
            } else {
                let message = match self.poll_waiting() {
                    Some(message) => {
                        behind |= deadline.is_none() && message.is_ok();
                        message
                    }
                    None if behind => break,
                    None => {
                        let wait_until = async {
                            match deadline {
                                Some(at) => tokio::time::sleep_until(at).await,
                                None => std::future::pending().await,
                            }
                        };
                        tokio::select! {
                            biased;
                            _ = shutdown.wait_for(|stop| *stop) => break,
                            _ = wait_until => break,
                            _ = recommit.tick() => {
                                self.recommit_unconfirmed();
                                continue;
                            }
                            message = self.consumer.recv() => message,
                        }
                    }
                };
                self.purge_revoked(&mut records, carry);
                message.map(|m| self.received(&m))
            };
            match polled {
                Ok(record) => records.push(record),
                // librdkafka gives up on this consumer for good (e.g. the
                // consumer protocol's UnreleasedInstanceId: a static member
                // restarted before the broker let its old session go): stop,
                // so that the process exits and is started again.
                Err(error @ rdkafka::error::KafkaError::MessageConsumptionFatal(_)) => {
                    tracing::error!(%error, "the Kafka consumer failed fatally; stopping");
                    *fatal = Some(error);
                    break;
                }
                Err(error) => {
                    tracing::warn!(%error, "poll error");
                    continue;
                }
            }
            if deadline.is_none() {
                deadline = Some(tokio::time::Instant::now() + self.settings.linger);
            }
        }
        self.purge_revoked(&mut records, carry);
        let started = deadline.map(|d| (d - self.settings.linger).into_std());
        match started {
            Some(started) if !records.is_empty() => Some((records, started)),
            // Shutdown (or a fatal consumer) with nothing in hand, or
            // everything was revoked.
            _ if *shutdown.borrow() || fatal.is_some() => None,
            _ => Some((Vec::new(), Instant::now())),
        }
    }

    /// Applies a round of records: at most one batch per lane, of distinct
    /// partitions, run concurrently, one transaction each (what does not fit
    /// goes back to the front of `carry` for the next round). A batch that
    /// fails is then retried, in order, with the partitions paused. Returns
    /// the records applied and the outcome.
    async fn apply_round(
        &self,
        records: Vec<InboundRecord>,
        started: Instant,
        carry: &mut VecDeque<InboundRecord>,
        shutdown: &mut watch::Receiver<bool>,
    ) -> (Vec<InboundRecord>, BatchOutcome) {
        let round = batch::round(records, self.lanes(), self.settings.max_records);
        for record in round.left_over.into_iter().rev() {
            carry.push_front(record);
        }
        tracing::debug!(lanes = round.batches.len(), "round");
        let results =
            futures::future::join_all(round.batches.into_iter().map(|batch| async move {
                match self.apply_traced(&batch).await {
                    Ok(done) => {
                        self.observe_batch(batch.len(), started);
                        (batch, done, None)
                    }
                    Err(error) => {
                        tracing::warn!(%error, "batch rolled back; retrying");
                        (Vec::new(), BatchOutcome::default(), Some((batch, error)))
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
        let mut gone: Vec<PartitionKey> = Vec::new();
        for (mut batch, error) in remaining {
            if let StoreError::PositionBehind { positions } = &error {
                self.read_again(positions, &mut batch, carry);
            }
            batch.retain(|r| !gone.iter().any(|(t, p)| *t == r.topic && *p == r.partition));
            match self
                .apply_with_retry(batch, carry, shutdown, &mut gone)
                .await
            {
                Some((batch, done)) => {
                    self.observe_batch(batch.len(), started);
                    outcome.absorb(done);
                    applied.extend(batch);
                }
                // Shutdown gave up on the database: later batches of the same
                // partitions must not be applied past the abandoned one.
                None if *shutdown.borrow() => break,
                None => {}
            }
        }
        (applied, outcome)
    }

    /// Applies one batch, retrying transient failures while keeping the
    /// group membership. Returns the records applied (those of partitions
    /// revoked meanwhile are left to their new owner) and the outcome; `None`
    /// when there is nothing to commit: the batch was empty, every record of
    /// it was revoked, or shutdown gave up on an unavailable database.
    async fn apply_with_retry(
        &self,
        mut records: Vec<InboundRecord>,
        carry: &mut VecDeque<InboundRecord>,
        shutdown: &mut watch::Receiver<bool>,
        gone: &mut Vec<PartitionKey>,
    ) -> Option<(Vec<InboundRecord>, BatchOutcome)> {
        let mut backoff = RETRY_BACKOFF_MIN;
        let mut paused = false;
        let mut gave_up_at: Option<Instant> = None;
        let outcome = loop {
            if records.is_empty() {
                break None;
            }
            match self.apply_traced(&records).await {
                Ok(outcome) => break Some(outcome),
                Err(StoreError::PositionBehind { positions }) => {
                    self.read_again(&positions, &mut records, carry);
                }
                Err(error) => {
                    let reason = error.retry_reason();
                    self.metrics.db_retries.with_label_values(&[reason]).inc();
                    self.metrics
                        .readiness
                        .database_reachable
                        .store(false, Ordering::Relaxed);
                    if matches!(error, StoreError::Transient { .. }) {
                        tracing::warn!(%error, retry_in_ms = backoff.as_millis() as u64, "batch rolled back; retrying");
                    } else {
                        tracing::error!(%error, retry_in_ms = backoff.as_millis() as u64, "batch failed; retrying");
                    }
                    if *shutdown.borrow() {
                        let since = *gave_up_at.get_or_insert_with(Instant::now);
                        if since.elapsed() > SHUTDOWN_GRACE {
                            tracing::warn!(reason, "shutting down while the batch in hand still fails; it is not committed and will be redelivered");
                            break None;
                        }
                    }
                    if !paused {
                        paused = self.pause_all();
                    }
                    self.wait_polling(jittered(backoff), &mut records, carry, gone)
                        .await;
                    backoff = (backoff * 2).min(RETRY_BACKOFF_MAX);
                }
            }
        };
        if paused {
            self.resume_all();
        }
        if outcome.is_some() {
            self.metrics
                .readiness
                .database_reachable
                .store(true, Ordering::Relaxed);
        }
        outcome.map(|outcome| (records, outcome))
    }

    /// One batch transaction, in a span of its own when tracing is on.
    async fn apply_traced(&self, records: &[InboundRecord]) -> Result<BatchOutcome, StoreError> {
        let span = self.telemetry.batch_span(records, &self.group);
        let result = self.inbox.apply(records, span.trace_id().as_deref()).await;
        match &result {
            Ok(outcome) => span.applied(outcome),
            Err(error) => span.failed(error.retry_reason(), error),
        }
        result
    }

    /// A record polled from Kafka, copied, and counted as held (lag in
    /// seconds).
    fn received(&self, message: &rdkafka::message::BorrowedMessage<'_>) -> InboundRecord {
        let record = kafka::to_record(message);
        self.metrics.lag_clock.received(&record);
        record
    }

    /// Sleeps for `duration` while serving the consumer (heartbeats are
    /// librdkafka's, but rebalances and commits are served by polling).
    async fn wait_polling(
        &self,
        duration: Duration,
        records: &mut Vec<InboundRecord>,
        carry: &mut VecDeque<InboundRecord>,
        gone: &mut Vec<PartitionKey>,
    ) {
        let until = tokio::time::Instant::now() + duration;
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(until) => break,
                message = self.consumer.recv() => {
                    gone.extend(self.purge_revoked(records, carry));
                    if let Ok(message) = message {
                        carry.push_back(self.received(&message));
                    }
                    // Partitions assigned meanwhile are paused too.
                    self.pause_all();
                }
            }
        }
        gone.extend(self.purge_revoked(records, carry));
    }

    /// The database went back (restored, or failed over to a replica that
    /// lacked the last commits) while this member kept reading: its
    /// positions of these partitions are behind what was applied and
    /// committed. Reads each partition again from the database's position
    /// (its beginning where the database has none), dropping the records in
    /// hand, which come after what the database lacks.
    fn read_again(
        &self,
        positions: &BTreeMap<PartitionKey, Option<i64>>,
        records: &mut Vec<InboundRecord>,
        carry: &mut VecDeque<InboundRecord>,
    ) {
        self.metrics
            .db_retries
            .with_label_values(&["position_behind"])
            .inc();
        for ((topic, partition), position) in positions {
            let offset = match position {
                Some(next) => Offset::Offset(tokio::task::block_in_place(|| {
                    crate::positions::checked_start(
                        &*self.consumer,
                        topic,
                        *partition,
                        *next,
                        &self.metrics,
                    )
                })),
                None => Offset::Beginning,
            };
            tracing::error!(
                topic,
                partition,
                database_position = ?position,
                "the database is behind what this consumer applied (restored, or failed over to a replica that lacked the last commits): reading the partition again from the database's position"
            );
            let sought = tokio::task::block_in_place(|| {
                self.consumer
                    .seek(topic, *partition, offset, Duration::from_secs(10))
            });
            if let Err(error) = sought {
                tracing::error!(%error, topic, partition, "seek failed");
            }
            self.offsets
                .rewind(&(topic.to_owned(), *partition), *position);
        }
        let again = |r: &InboundRecord| positions.contains_key(&(r.topic.clone(), r.partition));
        records.retain(|r| !again(r));
        carry.retain(|r| !again(r));
    }

    fn pause_all(&self) -> bool {
        match self.consumer.assignment() {
            Ok(assignment) => self.consumer.pause(&assignment).is_ok(),
            Err(_) => false,
        }
    }

    fn resume_all(&self) {
        if let Ok(assignment) = self.consumer.assignment() {
            if let Err(error) = self.consumer.resume(&assignment) {
                tracing::warn!(%error, "resume failed");
            }
        }
    }

    /// Lanes for the next round. Concurrent batches overlap their round
    /// trips, which pays off when the database is at a distance; on the same
    /// machine or rack a batch is all database work, and concurrent ones
    /// only wait on each other's locks of the hot stock rows (measured: the
    /// batch p95 while catching up doubles, the catch-up is no faster).
    fn lanes(&self) -> usize {
        let from = self.settings.lanes_from_round_trip;
        match self.inbox.round_trip() {
            _ if from.is_zero() => self.settings.lanes,
            Some(trip) if trip >= from => self.settings.lanes,
            _ => 1,
        }
    }

    /// A record already waiting in the consumer's queue, if any. The queue
    /// also carries events (an offset commit's result, a rebalance), which
    /// a poll serves without returning a record: a few polls get past the
    /// ones that came in since the last look, so that a record queued
    /// behind them still counts as waiting.
    fn poll_waiting(
        &self,
    ) -> Option<rdkafka::error::KafkaResult<rdkafka::message::BorrowedMessage<'_>>> {
        (0..4).find_map(|_| self.consumer.recv().now_or_never())
    }

    /// Drops held records of partitions revoked since the last look, and
    /// returns those partitions.
    fn purge_revoked(
        &self,
        records: &mut Vec<InboundRecord>,
        carry: &mut VecDeque<InboundRecord>,
    ) -> Vec<PartitionKey> {
        let revoked = self.offsets.take_revoked();
        if revoked.is_empty() {
            return revoked;
        }
        let gone = |r: &InboundRecord| {
            revoked
                .iter()
                .any(|(t, p)| *t == r.topic && *p == r.partition)
        };
        records.retain(|r| !gone(r));
        carry.retain(|r| !gone(r));
        revoked
    }

    /// One committed transaction: its size, and the time since its first
    /// record was polled.
    fn observe_batch(&self, size: usize, started: Instant) {
        self.metrics.batch_size.observe(size as f64);
        self.metrics
            .batch_duration
            .observe(started.elapsed().as_secs_f64());
        tracing::debug!(
            records = size,
            elapsed_ms = started.elapsed().as_secs_f64() * 1e3,
            "batch committed"
        );
    }

    fn record_outcome(&self, outcome: &BatchOutcome) {
        let m = &self.metrics;
        m.processed.inc_by(outcome.processed);
        m.duplicate_ignored.inc_by(outcome.duplicates);
        m.business_duplicate.inc_by(outcome.business_duplicates);
        m.reservation_lines
            .with_label_values(&["reserved"])
            .inc_by(outcome.lines_reserved);
        m.reservation_lines
            .with_label_values(&["rejected"])
            .inc_by(outcome.lines_rejected);
        let now = chrono::Utc::now();
        for occurred_at in &outcome.fresh_event_times {
            let latency = (now - *occurred_at).num_microseconds().unwrap_or(i64::MAX);
            m.end_to_end_latency.observe(latency.max(0) as f64 / 1e6);
        }
        for row in &outcome.newly_parked {
            m.parked.with_label_values(&[row.reason.as_str()]).inc();
            if row.reason == ParkReason::EventIdConflict {
                m.id_conflicts.inc();
            }
            tracing::warn!(
                message_id = row.message_id.map(|id| id.to_string()).unwrap_or_default(),
                order_id = row.order_id.as_deref().unwrap_or_default(),
                trace = row.trace.as_deref().unwrap_or_default(),
                trace_id = row.trace_id.as_deref().unwrap_or_default(),
                topic = %row.topic,
                partition = row.partition,
                offset = row.offset,
                reason = %row.reason,
                error = %row.error,
                "record parked"
            );
        }
    }
}

fn publish_parked(dlq: &Dlq, records: &[InboundRecord], outcome: &BatchOutcome) {
    if outcome.newly_parked.is_empty() {
        return;
    }
    let by_position: HashMap<(&str, i32, i64), &InboundRecord> = records
        .iter()
        .map(|r| ((r.topic.as_str(), r.partition, r.offset), r))
        .collect();
    let copies: Vec<_> = outcome
        .newly_parked
        .iter()
        .filter_map(|row| {
            by_position
                .get(&(row.topic.as_str(), row.partition, row.offset))
                .map(|record| (row.clone(), *record))
        })
        .collect();
    dlq.publish(&copies);
}

/// Backoff with ±50 % jitter, so consumers retrying together spread out.
fn jittered(backoff: Duration) -> Duration {
    backoff.mul_f64(rand::thread_rng().gen_range(0.5..1.5))
}
