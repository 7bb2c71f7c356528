//! The consumer loop: poll a round of records, apply it (one transaction per
//! batch), then commit its offsets.
//!
//! ```text
//! recv ──> round (≤ max records per lane, ≤ linger after the first,
//!   ^        sooner once Kafka is quiet for a tenth of the linger)
//!   |          ──> batches of distinct partitions, classified once (Batch)
//!   |                 ──> Inbox::apply (one tx each; a retry applies the same Batch)
//!   |                                                       │ COMMIT
//!   └──── commit its offsets (async) <── CommittedOffsets <─┘
//! ```
//!
//! Invariants:
//! - Offsets are handed to Kafka only after the batch's DB commit: they are
//!   those the store's answer carries (`BatchOutcome::to_commit`), which it
//!   gives only once the batch committed.
//! - A round's records are decoded once, when its batches are classified;
//!   a batch retried is the same `Batch`, less the records of partitions
//!   revoked or read again meanwhile.
//! - While the database is unavailable the assigned partitions are paused and
//!   the loop keeps polling, so the consumer stays in its group; the batch is
//!   retried with capped, jittered backoff and nothing is committed.
//! - A partition's batches are applied in order: a round holds at most one
//!   batch of it, and rounds follow one another.
//! - Records of partitions revoked while they were held in memory are
//!   dropped: their new owner starts at the database's position.
//! - On shutdown (draining): stop fetching, finish the round in hand,
//!   commit synchronously, leave the group.
//! - When too many records in a row (or too large a share) were parked, the
//!   poison breaker holds consumption: partitions paused, polled as above,
//!   until an operator resumes it in the database; nothing is skipped.
//!
//! Layout: `collect` gathers a round, `apply` runs its batches with their
//! retries, `failpoint` holds the test-only crash points; each operational
//! event goes through `crate::observe` (log line and metrics together).

mod apply;
mod collect;
mod failpoint;
mod state;

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use rdkafka::consumer::{Consumer, StreamConsumer};

use crate::batch::{Batch, InboundRecord, PartitionKey};
use crate::breaker::{BreakerSettings, PoisonBreaker};
use crate::kafka::offsets::{self, CommittedOffsets};
use crate::kafka::{Dlq, InboxContext};
use crate::metrics::Metrics;
use crate::observe::{BreakerHeld, CommitStep, RoundApplied};
use crate::shutdown::Shutdown;
use crate::store::{self, BatchOutcome, Inbox};
use crate::telemetry::Telemetry;

use failpoint::FailPoint;
use state::{Event, Machine, State};

/// The consumer as the pipeline uses it.
pub type InboxConsumer = StreamConsumer<InboxContext>;

/// How often offsets the database holds and Kafka has not confirmed (a
/// commit that failed in a rebalance, on a partition with nothing new to
/// carry the offset) are sent again.
const RECOMMIT_EVERY: Duration = Duration::from_secs(1);

/// How often the database's positions of the owned partitions are checked,
/// also those of partitions that receive nothing (a batch checks its own),
/// and the DLQ copies parked rows owe are sent.
const UPKEEP_EVERY: Duration = Duration::from_secs(10);
/// How long the last flush of the outcomes per minute may take at the end.
const FLUSH_AT_STOP_WITHIN: Duration = Duration::from_secs(2);

/// How often a held breaker is read from the database.
const BREAKER_CHECK_EVERY: Duration = Duration::from_secs(2);

/// The longest a shutdown waits for the Kafka client to close.
const DESTROY_WAIT: Duration = Duration::from_secs(10);

/// Batch shape.
#[derive(Debug, Clone, Copy)]
pub struct BatchSettings {
    /// Records per transaction.
    pub max_records: usize,
    /// How long a round waits for more records after its first, when the
    /// consumer was idle; it goes sooner when no record came for a tenth
    /// of this (`collect::quiet_after`).
    pub linger: Duration,
    /// Batches of distinct partitions applied concurrently (one connection
    /// each); a partition's records are in one batch of a round, and rounds
    /// follow one another, so its batches stay in order.
    pub lanes: usize,
    /// The round trip to the database from which those lanes are used (see
    /// [`Pipeline::lanes`]).
    pub lanes_from_round_trip: Duration,
    /// When parked records hold consumption (`breaker`).
    pub poison_breaker: BreakerSettings,
}

/// The running consumer.
pub struct Pipeline {
    /// The Kafka consumer: polled only by this loop (its callbacks run
    /// inside the polls).
    pub consumer: Arc<InboxConsumer>,
    /// Offsets the database has committed, per owned partition, and which of
    /// them Kafka has confirmed; shared with the rebalance callbacks.
    pub offsets: Arc<CommittedOffsets>,
    /// The database side: one statement per batch.
    pub inbox: Arc<Inbox>,
    /// Where copies of parked records go, when configured.
    pub dlq: Option<Dlq>,
    pub metrics: Metrics,
    pub settings: BatchSettings,
    /// One span per batch transaction when tracing is on.
    pub telemetry: Telemetry,
    /// The consumer group, named on the spans.
    pub group: String,
}

/// A pipeline error that ends `run`.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    // Not a source: the message says it once.
    #[error("kafka: {0}")]
    Kafka(rdkafka::error::KafkaError),
}

impl From<rdkafka::error::KafkaError> for PipelineError {
    fn from(error: rdkafka::error::KafkaError) -> Self {
        PipelineError::Kafka(error)
    }
}

/// The loop's state: what it keeps from one round to the next.
struct LoopState {
    /// Records polled but not applied yet, in poll order: left over by the
    /// last round, or polled while a batch was retried.
    carry: VecDeque<InboundRecord>,
    /// Asked on SIGTERM/SIGINT: the loop drains (finishes the round in
    /// hand, polls nothing new) and stops.
    shutdown: Shutdown,
    /// When to send the offsets Kafka has not confirmed again.
    recommit: tokio::time::Interval,
    /// Where the loop is (`state`): consuming, retrying, draining, failed.
    machine: Machine,
    /// Errors the consumer returned in a row, instead of a record.
    consume_errors: u32,
    /// When to run the periodic checks (see `Pipeline::upkeep`): that the
    /// database's positions of the owned partitions are not behind what this
    /// member wrote or read, and the DLQ copies owed; at once after a
    /// database failure.
    upkeep: tokio::time::Interval,
    /// The fates of the records applied since the breaker last closed.
    breaker: PoisonBreaker,
    /// When to read the breaker's state again before a round: a breaker
    /// another member opened holds this one too.
    breaker_check: tokio::time::Interval,
    /// Partitions whose seek to their position librdkafka refused, and
    /// where to: their records are dropped as they arrive, and the seek
    /// tried again, until it is done.
    unsought: BTreeMap<PartitionKey, (rdkafka::Offset, std::time::Instant)>,
    /// The outcomes of the rounds committed since the last upkeep, per
    /// minute: added to the database's ring of them (the console's chart)
    /// at each upkeep and at the end.
    outcomes: store::OutcomeTally,
}

impl LoopState {
    /// The loop's state, a shutdown asked since it was last looked at
    /// taken in first.
    fn state(&mut self) -> &State {
        if self.shutdown.is_asked() {
            self.machine.on(Event::ShutdownAsked);
        }
        self.machine.state()
    }

    /// Draining or failed: no new round starts.
    fn stopping(&mut self) -> bool {
        self.state().is_stopping()
    }

    /// librdkafka gave up on this consumer.
    fn failed(&self) -> bool {
        matches!(self.machine.state(), State::Failed(_))
    }
}

impl Pipeline {
    /// Runs until `shutdown` turns true, then drains and commits.
    pub async fn run(self, shutdown: Shutdown) -> Result<(), PipelineError> {
        let mut recommit = tokio::time::interval(RECOMMIT_EVERY);
        recommit.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut loop_state = LoopState {
            carry: VecDeque::new(),
            shutdown,
            recommit,
            machine: Machine::new(),
            consume_errors: 0,
            upkeep: {
                let mut every = tokio::time::interval(UPKEEP_EVERY);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                every
            },
            breaker: PoisonBreaker::new(self.settings.poison_breaker),
            breaker_check: {
                let mut every = tokio::time::interval(BREAKER_CHECK_EVERY);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                every
            },
            unsought: BTreeMap::new(),
            outcomes: store::OutcomeTally::default(),
        };
        let mut failpoint = FailPoint::from_env();
        // Held by another member, or before a restart: held here too.
        if !self.settings.poison_breaker.is_off() {
            match self.breaker().await {
                Ok(Some(state)) if state.holds() => {
                    self.hold_for_operator(&state.reason, false, &mut loop_state)
                        .await;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::warn!(%error, "cannot read the poison breaker's state; it is read again when it trips")
                }
            }
        }
        loop {
            let Some((records, started)) = self.collect(&mut loop_state).await else {
                break;
            };
            // Opened by another member since it was last read: the round
            // waits in `carry`, and this member holds too.
            if let Some(why) = self.held_elsewhere(&records, &mut loop_state).await {
                for record in records.into_iter().rev() {
                    loop_state.carry.push_front(record);
                }
                self.hold_for_operator(&why, false, &mut loop_state).await;
                if loop_state.stopping() {
                    break;
                }
                continue;
            }
            // Shutdown waits for the round in hand at most SHUTDOWN_GRACE
            // (a database that stopped answering): then it is given up,
            // uncommitted, and read again by the next owner.
            let stop = loop_state.shutdown.clone();
            let given_up = async {
                stop.asked().await;
                tokio::time::sleep(apply::SHUTDOWN_GRACE).await;
            };
            let applied = tokio::select! {
                applied = self.apply_round(records, started, &mut loop_state) => applied,
                _ = given_up => {
                    tracing::warn!("shutting down while the round in hand has no answer from the database; it is not committed and will be redelivered");
                    break;
                }
            };
            let (batches, outcome) = applied;
            if !batches.is_empty() {
                self.after_round_committed(&batches, &outcome, &loop_state, &mut failpoint);
                loop_state.outcomes.record(&outcome, chrono::Utc::now());
                if let Some(why) = tripped(&mut loop_state.breaker, &batches, &outcome) {
                    self.hold_for_operator(&why, true, &mut loop_state).await;
                }
            }
            if loop_state.stopping() {
                break;
            }
        }
        // The last counts, unless the database does not answer soon: a
        // chart's minute is not worth holding up a shutdown.
        let _ =
            tokio::time::timeout(FLUSH_AT_STOP_WITHIN, self.flush_outcomes(&mut loop_state)).await;
        if let Some(dlq) = &self.dlq {
            dlq.flush(Duration::from_secs(5));
            let delivered = dlq.take_delivered();
            if let Err(error) = store::copies_sent(self.inbox.pool(), &delivered).await {
                tracing::warn!(%error, "cannot mark the last DLQ copies as sent; the next owner sends them again");
            }
        }
        let failed = loop_state.machine.into_failure();
        self.close(failed.is_some());
        match failed {
            Some(error) => Err(error.into()),
            None => Ok(()),
        }
    }

    /// After a round's database commits: the offsets the store's answer
    /// gives to Kafka (those of partitions still owned: a revoked one's new
    /// owner commits it), its metrics and log lines, its parked records' DLQ
    /// copies.
    fn after_round_committed(
        &self,
        batches: &[Batch],
        outcome: &BatchOutcome,
        loop_state: &LoopState,
        failpoint: &mut FailPoint,
    ) {
        self.metrics.lag_clock.holding(loop_state.carry.iter());
        let committed = self.offsets.advance(&outcome.to_commit);
        RoundApplied {
            outcome,
            consumer: self.inbox.consumer(),
        }
        .emit(&self.metrics);
        failpoint.abort_after_db_commit();
        if let Some(dlq) = &self.dlq {
            publish_parked(dlq, batches, outcome);
        }
        // A dropped commit is sent again with the unconfirmed ones. While
        // one is in flight, the next goes with the unconfirmed ones once it
        // is answered (the next round, or the recommit tick).
        if !committed.is_empty() && !failpoint.drop_offset_commit() {
            self.send_unconfirmed();
        }
    }

    /// Why the breaker holds, when another member opened it since this one
    /// last read it (at most every `BREAKER_CHECK_EVERY`, before a round of
    /// `records`; a round-less member parks nothing). A state that cannot
    /// be read is read again before a later round.
    async fn held_elsewhere(
        &self,
        records: &[InboundRecord],
        loop_state: &mut LoopState,
    ) -> Option<String> {
        if records.is_empty()
            || self.settings.poison_breaker.is_off()
            || loop_state.breaker_check.tick().now_or_never().is_none()
        {
            return None;
        }
        match self.breaker().await {
            Ok(Some(state)) if state.holds() => Some(state.reason),
            Ok(_) => None,
            Err(error) => {
                tracing::debug!(%error, "cannot read the poison breaker's state; read again before a later round");
                None
            }
        }
    }

    /// The poison breaker holds consumption: every assigned partition
    /// paused (the loop keeps polling, so the member stays in its group and
    /// what it had fetched waits in `carry`), `/readyz` unready, until an
    /// operator resumes it (read from the database every
    /// `BREAKER_CHECK_EVERY`) or shutdown. `opened`: this member tripped it
    /// now, and records it; until the record is written (the database
    /// refused it, say), the database's "not held" is no resume, and the
    /// write is tried again at each check.
    async fn hold_for_operator(&self, why: &str, opened: bool, loop_state: &mut LoopState) {
        let mut recorded = !opened || self.record_breaker(why).await;
        BreakerHeld::Held { why }.emit(&self.metrics);
        self.pause_all();
        let mut revoked_meanwhile = Vec::new();
        loop {
            self.wait_polling(
                BREAKER_CHECK_EVERY,
                &mut Batch::default(),
                loop_state,
                &mut revoked_meanwhile,
            )
            .await;
            if loop_state.stopping() {
                break;
            }
            if !recorded {
                recorded = self.record_breaker(why).await;
                continue;
            }
            match self.breaker().await {
                Ok(Some(state)) if state.holds() => {}
                Ok(state) => {
                    let by = state.and_then(|s| s.resumed_by);
                    BreakerHeld::Resumed { by: by.as_deref() }.emit(&self.metrics);
                    break;
                }
                Err(error) => {
                    tracing::debug!(%error, "cannot read the poison breaker's state; still holding")
                }
            }
        }
        self.resume_all();
        loop_state.breaker.reset();
        BreakerHeld::Released.emit(&self.metrics);
    }

    /// Records in the database that the breaker opened, so that every
    /// member holds and an operator can resume it; false when it could not.
    async fn record_breaker(&self, why: &str) -> bool {
        match store::open_breaker(self.inbox.pool(), self.inbox.consumer(), why).await {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "cannot record the poison breaker in the database; holding, and trying again");
                false
            }
        }
    }

    /// Commits every offset the database has, synchronously, and leaves the
    /// group (dropping the consumer closes it, which revokes its partitions).
    fn close(self, fatal: bool) {
        offsets::commit_now(
            &*self.consumer,
            &self.offsets.all(),
            CommitStep::OnClose,
            &self.metrics,
        );
        self.consumer.unsubscribe();
        tracing::info!("consumer closed");
        // Destroying the client closes it: a dynamic member leaves the group
        // then, so its partitions move at once. That close was seen never
        // to end (librdkafka's last revoke of a closing client waiting on a
        // group handler that had already terminated, under a rebalance
        // storm, on Kafka 4.1.2 and 4.4.0), and a client that failed fatally
        // can wait many seconds on its broker connections (seen: 10 s after
        // a coordinator moved). Everything applied is committed in the
        // database and its offsets sent above, so a shutdown waits for the
        // close at most DESTROY_WAIT, and a fatal one not at all; the group
        // then lets the member's session expire.
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

    /// Sends again the offsets Kafka has not confirmed.
    fn recommit_unconfirmed(&self) {
        if self.offsets.unconfirmed().count() > 0 {
            tracing::debug!("sending offsets Kafka has not confirmed again");
            self.send_unconfirmed();
        }
    }

    /// Sends the offsets Kafka has not confirmed, unless a commit is in
    /// flight ([`offsets::CommittedOffsets::may_send`]).
    fn send_unconfirmed(&self) {
        if self.offsets.may_send()
            && !offsets::send(&*self.consumer, &self.offsets.unconfirmed(), &self.metrics)
        {
            self.offsets.answered();
        }
    }

    /// Lanes for the next round. Concurrent batches overlap their round
    /// trips, which pays off when the database is at a distance; on the same
    /// machine or rack a batch is all database work, and concurrent ones
    /// only wait on each other's locks of the hot stock rows (measured: the
    /// batch p95 while catching up doubles, the catch-up is no faster).
    /// The poison breaker of this consumer, as the database holds it.
    async fn breaker(&self) -> Result<Option<store::BreakerState>, store::StoreError> {
        store::breaker(self.inbox.pool(), self.inbox.consumer()).await
    }

    fn lanes(&self) -> usize {
        let from = self.settings.lanes_from_round_trip;
        match self.inbox.round_trip() {
            _ if from.is_zero() => self.settings.lanes,
            Some(trip) if trip >= from => self.settings.lanes,
            _ => 1,
        }
    }
}

/// Records held in memory and not applied yet: those a round gathers, or
/// the batch being retried.
trait Held {
    /// Drops the records of `partitions`.
    fn drop_partitions(&mut self, partitions: &[PartitionKey]);

    /// The records, in poll order.
    fn records(&self) -> impl Iterator<Item = &InboundRecord>;
}

impl Held for Vec<InboundRecord> {
    fn drop_partitions(&mut self, partitions: &[PartitionKey]) {
        self.retain(|record| !record.is_in(partitions));
    }

    fn records(&self) -> impl Iterator<Item = &InboundRecord> {
        self.iter()
    }
}

impl Held for Batch {
    fn drop_partitions(&mut self, partitions: &[PartitionKey]) {
        Batch::drop_partitions(self, partitions);
    }

    fn records(&self) -> impl Iterator<Item = &InboundRecord> {
        Batch::records(self)
    }
}

/// Drops the held records (`held`, and `carry`) of `partitions`: their
/// reading goes on elsewhere (their new owner's after a revoke, or from the
/// database's position after it went back).
fn drop_partitions(
    partitions: &[PartitionKey],
    held: &mut impl Held,
    carry: &mut VecDeque<InboundRecord>,
) {
    if partitions.is_empty() {
        return;
    }
    held.drop_partitions(partitions);
    carry.retain(|record| !record.is_in(partitions));
}

/// Feeds the breaker each record of a round, in poll order: parked now or
/// not. A record parked at its position by an earlier delivery (a rewind
/// reads it again) is no new poison and is not fed: re-reading a topic
/// that still holds an incident's records does not open the breaker
/// again. Why it opens, when it does.
fn tripped(
    breaker: &mut PoisonBreaker,
    batches: &[Batch],
    outcome: &BatchOutcome,
) -> Option<String> {
    fn at(rows: &[crate::parked::ParkedRow]) -> HashSet<(&str, i32, i64)> {
        rows.iter()
            .map(|row| (row.topic.as_str(), row.partition, row.offset))
            .collect()
    }
    let (parked, parked_before) = (at(&outcome.newly_parked), at(&outcome.parked_before));
    let mut why = None;
    for record in batches.iter().flat_map(Batch::records) {
        let at = (record.topic.as_str(), record.partition, record.offset);
        if parked_before.contains(&at) {
            continue;
        }
        if let Some(reason) = breaker.observe(parked.contains(&at)) {
            why = Some(reason);
        }
    }
    why
}

fn publish_parked(dlq: &Dlq, batches: &[Batch], outcome: &BatchOutcome) {
    if outcome.newly_parked.is_empty() {
        return;
    }
    let by_position: HashMap<(&str, i32, i64), &InboundRecord> = batches
        .iter()
        .flat_map(Batch::records)
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

#[cfg(test)]
mod tests;
