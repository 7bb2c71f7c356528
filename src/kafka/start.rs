//! Where newly assigned partitions start: the database's positions, read
//! from inside the rebalance callback (librdkafka calls it synchronously
//! from `recv`, so the read blocks there), each checked against the
//! partition's log.

use std::collections::BTreeMap;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};
use uuid::Uuid;

use crate::batch::PartitionKey;
use crate::metrics::Metrics;
use crate::observe::PositionGap;
use crate::shutdown::Shutdown;
use crate::store::positions::{self, Stored};

/// Reads positions for the rebalance callback, which librdkafka calls
/// synchronously from inside `recv`.
pub struct PositionSource {
    /// The inbox whose positions these are; told what they were at
    /// assignment, so that a database going back from there is caught.
    pub inbox: std::sync::Arc<crate::store::Inbox>,
    pub runtime: tokio::runtime::Handle,
    /// Asked: stop waiting for an unreachable database.
    pub shutdown: Shutdown,
}

impl PositionSource {
    /// The database's positions of `partitions`, waiting (with backoff) for
    /// the database when it is unreachable: starting elsewhere could skip
    /// what a restored database lacks. `None` at shutdown.
    fn read_blocking(
        &self,
        partitions: &[PartitionKey],
        topic_ids: &BTreeMap<String, Uuid>,
    ) -> Option<BTreeMap<PartitionKey, Stored>> {
        let wait = async {
            let mut delay = Duration::from_millis(200);
            loop {
                if self.shutdown.is_asked() {
                    return None;
                }
                let stored = self.inbox.pool().with_answer_deadline(positions::read(
                    self.inbox.pool(),
                    self.inbox.consumer(),
                    partitions,
                    topic_ids,
                ));
                match stored.await {
                    Ok(stored) => {
                        let positions: BTreeMap<PartitionKey, i64> = stored
                            .iter()
                            .map(|(key, stored)| (key.clone(), stored.next_offset))
                            .collect();
                        self.inbox
                            .positions()
                            .expect(partitions, &positions, topic_ids);
                        return Some(stored);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot read the database's positions of the assigned partitions; retrying");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = self.shutdown.asked() => {}
                }
                delay = (delay * 2).min(Duration::from_secs(5));
            }
        };
        // The callback runs on a worker of the service's runtime: let it
        // block there while the other workers drive the database I/O.
        match tokio::runtime::Handle::try_current() {
            Ok(current)
                if current.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
            {
                tokio::task::block_in_place(|| self.runtime.block_on(wait))
            }
            Ok(_) => {
                tracing::error!("positions can only be read from a multi-threaded runtime");
                None
            }
            Err(_) => self.runtime.block_on(wait),
        }
    }

    /// Sets the start offset of each newly assigned partition to the
    /// database's position where it has one. A position older than the
    /// partition's log start (retention deleted what the database lacks) is
    /// reported loudly, counted, and the partition starts at its log start.
    /// Returns the offsets the partitions start at that Kafka is to hold
    /// too (a member that died between a database commit and its offset
    /// commit left Kafka's behind, and a partition with nothing more to read
    /// would never carry it there); None when shutdown came first (nothing
    /// was read).
    pub fn start_at_positions<C: ConsumerContext>(
        &self,
        consumer: &BaseConsumer<C>,
        assigned: &mut TopicPartitionList,
        metrics: &Metrics,
    ) -> Option<BTreeMap<PartitionKey, i64>> {
        let partitions: Vec<PartitionKey> = assigned
            .elements()
            .iter()
            .map(|e| (e.topic().to_owned(), e.partition()))
            .collect();
        let mut topic_ids = BTreeMap::new();
        for (topic, _) in &partitions {
            if topic_ids.contains_key(topic) {
                continue;
            }
            match super::cluster::topic_id(consumer.client(), topic, Duration::from_secs(10)) {
                Some(id) => {
                    topic_ids.insert(topic.clone(), id);
                }
                None => tracing::warn!(
                    topic,
                    "the broker did not give the topic's id: a topic deleted and created again under this name cannot be told from it"
                ),
            }
        }
        let positions = self.read_blocking(&partitions, &topic_ids)?;
        let mut to_commit = BTreeMap::new();
        for ((topic, partition), stored) in &positions {
            let start = checked_start(consumer, topic, *partition, *stored, metrics);
            if let Err(error) =
                assigned.set_partition_offset(topic, *partition, Offset::Offset(start.offset))
            {
                tracing::error!(%error, topic, partition, "cannot set the start offset");
                continue;
            }
            if start.within_log {
                to_commit.insert((topic.clone(), *partition), start.offset);
            }
        }
        tracing::info!(
            from_database = positions.len(),
            from_kafka = partitions.len() - positions.len(),
            "start offsets of the assigned partitions: the database's positions, Kafka's committed offsets where it has none"
        );
        Some(to_commit)
    }
}

/// The offset a partition starts at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Start {
    pub offset: i64,
    /// False for a position past the partition's end, where Kafka's reset
    /// policy decides instead, or one the broker could not check: not an
    /// offset to commit.
    pub within_log: bool,
}

impl Start {
    fn within_log(offset: i64) -> Start {
        Start {
            offset,
            within_log: true,
        }
    }
}

/// Where a partition starts from the database's position: there, unless it
/// is older than the partition's log start (retention deleted records
/// since): then it starts at the log start, and the records the database
/// never applied among those deleted are reported as lost (an error, and
/// `inbox_position_gap_records_total`); a position an operator set back
/// below the log start loses nothing it had applied. Blocks for the
/// broker's answer.
pub fn checked_start<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    partition: i32,
    stored: Stored,
    metrics: &Metrics,
) -> Start {
    let next = stored.next_offset;
    match consumer.fetch_watermarks(topic, partition, Duration::from_secs(10)) {
        Ok((log_start, _)) if next < log_start => {
            PositionGap {
                topic,
                partition,
                database_position: next,
                log_start,
                missing: stored.never_applied_before(log_start),
            }
            .emit(metrics);
            Start::within_log(log_start)
        }
        Ok((_, end)) if next > end => {
            tracing::warn!(
                topic,
                partition,
                database_position = next,
                end,
                "the database's position is past the end of the partition (a re-created topic?); auto.offset.reset decides where it starts"
            );
            Start {
                offset: next,
                within_log: false,
            }
        }
        Ok(_) => Start::within_log(next),
        Err(error) => {
            tracing::warn!(%error, topic, partition, "cannot read the partition's offsets; starting at the database's position unchecked");
            Start {
                offset: next,
                within_log: false,
            }
        }
    }
}
