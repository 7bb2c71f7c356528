//! Gathering a round: the records a round takes from Kafka (and from what the
//! last one left), how long it waits for them, and the records of revoked
//! partitions it lets go.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use futures::FutureExt;
use rdkafka::consumer::Consumer;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};

use crate::batch::{InboundRecord, PartitionKey};
use crate::kafka;

use crate::observe::ConsumeFailed;
use crate::store::{self, positions::Stored};

use super::{drop_partitions, Event, Held, LoopState, Pipeline};

/// The longest a check of a topic's id waits for the broker.
const TOPIC_ID_WAIT: Duration = Duration::from_secs(5);

/// How long a lingering round waits for Kafka's next record before it
/// goes: a tenth of the linger. Records come in fetches, back to back; a
/// pause of this length says the next fetch is not near, and waiting out
/// the linger would add its time to every record of the round for a few
/// more records at most (at 1,400/s and a database 2 ms away: p95 13.3–13.6
/// ms with the whole linger against 11.1–11.5 ms, in fewer transactions).
pub(super) fn quiet_after(linger: Duration) -> Duration {
    linger / 10
}

impl Pipeline {
    /// Waits for the first record, then gathers up to `max_records` per lane,
    /// until `linger` after the first, or until Kafka brought nothing for
    /// a tenth of it ([`quiet_after`]). `None` when the loop stops (a
    /// shutdown or a fatal client error) before any record. Meanwhile,
    /// every `recommit` tick, sends the offsets Kafka has not confirmed
    /// again.
    pub(super) async fn collect(
        &self,
        loop_state: &mut LoopState,
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
        // with a few records. A lingering round goes once Kafka brought
        // nothing for `quiet_after` the linger (`quiet_until`).
        let mut behind = false;
        let mut quiet_until: Option<tokio::time::Instant> = None;
        if loop_state.upkeep.tick().now_or_never().is_some() {
            self.upkeep(&mut records, loop_state).await;
        }
        while records.len() < capacity {
            let polled = if let Some(record) = loop_state.carry.pop_front() {
                Some(record)
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
                                Some(at) => {
                                    tokio::time::sleep_until(quiet_until.map_or(at, |q| q.min(at)))
                                        .await
                                }
                                None => std::future::pending().await,
                            }
                        };
                        let polled = tokio::select! {
                            biased;
                            _ = loop_state.shutdown.asked() => break,
                            _ = wait_until => break,
                            _ = loop_state.recommit.tick() => {
                                self.recommit_unconfirmed();
                                continue;
                            }
                            _ = loop_state.upkeep.tick() => None,
                            message = self.consumer.recv() => Some(message),
                        };
                        match polled {
                            Some(message) => message,
                            None => {
                                self.upkeep(&mut records, loop_state).await;
                                continue;
                            }
                        }
                    }
                };
                self.purge_revoked(&mut records, &mut loop_state.carry);
                self.received(message, loop_state)
            };
            match polled {
                Some(record) => {
                    records.push(record);
                    quiet_until =
                        Some(tokio::time::Instant::now() + quiet_after(self.settings.linger));
                }
                None if loop_state.failed() => break,
                None => continue,
            }
            if deadline.is_none() {
                deadline = Some(tokio::time::Instant::now() + self.settings.linger);
            }
        }
        self.purge_revoked(&mut records, &mut loop_state.carry);
        self.metrics
            .lag_clock
            .holding(records.iter().chain(loop_state.carry.iter()));
        let started = deadline.map(|d| (d - self.settings.linger).into_std());
        match started {
            Some(started) if !records.is_empty() => Some((records, started)),
            // Stopping with nothing in hand, or everything was revoked.
            _ if loop_state.stopping() => None,
            _ => Some((Vec::new(), Instant::now())),
        }
    }

    /// The periodic checks, between rounds: the positions, the DLQ copies
    /// the owned partitions' parked rows owe, and the outcomes counted
    /// since the last upkeep added to the console's chart.
    async fn upkeep(&self, records: &mut Vec<InboundRecord>, loop_state: &mut LoopState) {
        self.seek_again(loop_state);
        self.check_positions(records, loop_state).await;
        self.send_owed_copies().await;
        self.flush_outcomes(loop_state).await;
    }

    /// Adds the outcomes counted since the last flush to the database's
    /// ring of them; kept for the next flush when the database refuses.
    pub(super) async fn flush_outcomes(&self, loop_state: &mut LoopState) {
        if loop_state.outcomes.is_empty() {
            return;
        }
        let tally = std::mem::take(&mut loop_state.outcomes);
        let consumer = self.inbox.consumer();
        if let Err(error) = store::flush_outcomes(self.inbox.pool(), consumer, &tally).await {
            tracing::debug!(%error, "cannot add the outcomes per minute; sent with the next upkeep");
            loop_state.outcomes.restore(tally);
        }
    }

    /// Tells the database which DLQ copies the topic confirmed, and sends
    /// those the owned partitions' parked rows still owe (a batch whose
    /// answer was lost, a member killed before its copies went out, a copy
    /// the topic refused).
    async fn send_owed_copies(&self) {
        let Some(dlq) = &self.dlq else {
            return;
        };
        let delivered = dlq.take_delivered();
        if let Err(error) = store::copies_sent(self.inbox.pool(), &delivered).await {
            tracing::warn!(%error, "cannot mark DLQ copies as sent; tried again later");
            dlq.delivered_again(delivered);
            return;
        }
        let owned = self.offsets.owned();
        if owned.is_empty() {
            return;
        }
        let in_flight = dlq.in_flight();
        let owed = store::copies_owed(self.inbox.pool(), self.inbox.consumer(), &owned, &in_flight);
        match owed.await {
            Ok(owed) if !owed.is_empty() => {
                tracing::info!(
                    copies = owed.len(),
                    "sending the DLQ copies parked rows still owe"
                );
                let copies: Vec<_> = owed
                    .iter()
                    .map(|(row, record)| (row.clone(), record))
                    .collect();
                dlq.publish(&copies);
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, "cannot read the DLQ copies owed; tried again later")
            }
        }
    }

    /// Checks that the database's positions of the owned partitions are not
    /// behind what this member wrote or read at their assignment: a database
    /// restored (or failed over) under a partition that receives nothing
    /// would otherwise go unnoticed until its next record, and lose what it
    /// lacks if that record came after a restart. Those behind are read
    /// again from the database's position. The answer also says whether the
    /// database is reachable (`/readyz`).
    async fn check_positions(&self, records: &mut Vec<InboundRecord>, loop_state: &mut LoopState) {
        let owned = self.offsets.owned();
        if owned.is_empty() {
            return;
        }
        self.check_topic_ids(&owned, records, loop_state);
        match self.inbox.positions().gone_back(&owned).await {
            Ok(behind) => {
                self.metrics
                    .readiness
                    .database_reachable
                    .store(true, Ordering::Relaxed);
                if !behind.positions.is_empty() {
                    self.read_again(&behind, records, loop_state);
                }
            }
            Err(error) => {
                self.metrics
                    .readiness
                    .database_reachable
                    .store(false, Ordering::Relaxed);
                tracing::warn!(%error, "cannot check the database's positions of the owned partitions");
            }
        }
    }

    /// A topic deleted and created again under the same name while this
    /// member reads it is another topic (another Kafka topic id), whose
    /// first records librdkafka would skip, fetching on at the old offset:
    /// its partitions are read again from their beginning (what this member
    /// applied of them meanwhile is in the ledger; the positions written
    /// from now on carry the new id).
    fn check_topic_ids(
        &self,
        owned: &[PartitionKey],
        records: &mut Vec<InboundRecord>,
        loop_state: &mut LoopState,
    ) {
        let topics: BTreeSet<&str> = owned.iter().map(|(topic, _)| topic.as_str()).collect();
        let mut recreated = BTreeMap::new();
        for topic in topics {
            let Some(known) = self.inbox.positions().topic_id(topic) else {
                continue;
            };
            let now = tokio::task::block_in_place(|| {
                kafka::cluster::topic_id(self.consumer.client(), topic, TOPIC_ID_WAIT)
            });
            match now {
                Some(now) if now != known => {
                    tracing::error!(
                        topic,
                        topic_id = %now,
                        earlier_topic_id = %known,
                        "the topic was deleted and created again while this consumer read it: reading its partitions again from their beginning"
                    );
                    recreated.insert(topic.to_owned(), now);
                }
                _ => {}
            }
        }
        if recreated.is_empty() {
            return;
        }
        let partitions: Vec<PartitionKey> = owned
            .iter()
            .filter(|(topic, _)| recreated.contains_key(topic))
            .cloned()
            .collect();
        self.inbox
            .positions()
            .expect(&partitions, &BTreeMap::new(), &recreated);
        let from_the_start: BTreeMap<PartitionKey, Option<Stored>> =
            partitions.into_iter().map(|key| (key, None)).collect();
        self.seek_to(&from_the_start, records, loop_state);
    }

    /// What a poll returned: the record, or `None` after an error, which is
    /// reported ([`ConsumeFailed`]); a fatal one (librdkafka gave up on this
    /// consumer for good, e.g. a static member fenced, or the consumer
    /// protocol's UnreleasedInstanceId) fails the loop, wherever it surfaced,
    /// so that `run` ends or starts a new consumer.
    pub(super) fn received(
        &self,
        message: KafkaResult<BorrowedMessage<'_>>,
        loop_state: &mut LoopState,
    ) -> Option<InboundRecord> {
        match message {
            Ok(message) => {
                if loop_state.consume_errors > 0 {
                    loop_state.consume_errors = 0;
                    self.metrics
                        .readiness
                        .consume_failing
                        .store(false, Ordering::Relaxed);
                }
                let unsought = |(topic, partition): &PartitionKey| {
                    topic == message.topic() && *partition == message.partition()
                };
                if loop_state.unsought.keys().any(unsought) {
                    // Fetched past the records a refused seek dropped: not
                    // applied; the partition is being fetched, so the seek
                    // is tried again now.
                    self.seek_again(loop_state);
                    return None;
                }
                Some(kafka::to_record(&message))
            }
            Err(error @ KafkaError::MessageConsumptionFatal(_)) => {
                tracing::error!(%error, "the Kafka consumer failed fatally; stopping it");
                loop_state.machine.on(Event::ClientFailed(error));
                None
            }
            Err(error) => {
                loop_state.consume_errors += 1;
                ConsumeFailed {
                    error: &error,
                    in_a_row: loop_state.consume_errors,
                }
                .emit(&self.metrics);
                None
            }
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
    pub(super) fn purge_revoked(
        &self,
        held: &mut impl Held,
        carry: &mut VecDeque<InboundRecord>,
    ) -> Vec<PartitionKey> {
        let revoked = self.offsets.take_revoked();
        drop_partitions(&revoked, held, carry);
        revoked
    }
}
