//! Positions in the database (docs/design.md#positions): the next offset to read, per
//! `(consumer, topic, partition)`, written by each batch in its own
//! transaction (`sql/apply_batch.sql`, only forward). The database is the
//! authority on positions as it is on duplicates: a partition assigned to
//! this member starts where the database says, so a database restored from a
//! backup (or failed over to a replica that lacked the last commits) reads
//! again what it lost, although Kafka's committed offsets are past it.
//! Kafka's committed offset is used only where the database has no position.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::{Offset, TopicPartitionList};
use sqlx::Row;
use tokio::sync::watch;
use uuid::Uuid;

use crate::batch::PartitionKey;
use crate::metrics::Metrics;
use crate::store::{DbPool, StoreError};

const READ: &str =
    "SELECT topic, kafka_partition, next_offset, topic_id, moved_by_operator FROM inbox_position
    WHERE consumer = $1 AND topic = ANY($2::text[]) AND kafka_partition = ANY($3::int[])";

const LIST: &str = "SELECT topic, kafka_partition, next_offset, updated_at FROM inbox_position
    WHERE consumer = $1 AND ($2::text IS NULL OR topic = $2)
    ORDER BY topic, kafka_partition";

/// The only statement that moves a position backwards: an operator's
/// deliberate re-read or skip. Returns the position before.
const SET: &str = "WITH before AS (
        SELECT next_offset FROM inbox_position
        WHERE consumer = $1 AND topic = $2 AND kafka_partition = $3
        FOR UPDATE
    ), upsert AS (
        INSERT INTO inbox_position AS p (consumer, topic, kafka_partition, next_offset,
                                         moved_by_operator)
        VALUES ($1, $2, $3, $4, true)
        ON CONFLICT (consumer, topic, kafka_partition) DO UPDATE
            SET next_offset = EXCLUDED.next_offset, moved_by_operator = true,
                updated_at = now()
    )
    SELECT (SELECT next_offset FROM before)";

/// One row of `inbox_position`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Position {
    pub topic: String,
    pub partition: i32,
    pub next_offset: i64,
    pub updated_at: DateTime<Utc>,
}

/// A position as the database holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stored {
    pub next_offset: i64,
    /// Set by `inventory-inbox positions set`, not by a batch since.
    pub by_operator: bool,
}

/// The database's positions of these partitions (those it has) that
/// belong to the topics as they are now (`topic_ids`: Kafka's topic ids,
/// where the broker said). A position written for another id was written
/// for the topic's earlier life (deleted and created again since): it is
/// left out, and said, and the partition starts as if the database had no
/// position (the next batch writes the new topic's).
pub async fn read(
    pool: &DbPool,
    consumer: &str,
    partitions: &[PartitionKey],
    topic_ids: &BTreeMap<String, Uuid>,
) -> Result<BTreeMap<PartitionKey, Stored>, StoreError> {
    let topics: Vec<&str> = partitions.iter().map(|(t, _)| t.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|(_, p)| *p).collect();
    let rows = sqlx::query(READ)
        .bind(consumer)
        .bind(&topics)
        .bind(&numbers)
        .fetch_all(pool)
        .await?;
    let mut positions = BTreeMap::new();
    for row in rows {
        let key: PartitionKey = (row.try_get("topic")?, row.try_get("kafka_partition")?);
        if !partitions.contains(&key) {
            continue;
        }
        let next_offset: i64 = row.try_get("next_offset")?;
        let written_for: Option<Uuid> = row.try_get("topic_id")?;
        match (written_for, topic_ids.get(&key.0)) {
            (Some(then), Some(now)) if then != *now => {
                tracing::warn!(
                    topic = %key.0,
                    partition = key.1,
                    database_position = next_offset,
                    position_topic_id = %then,
                    topic_id = %now,
                    "the database's position was written for an earlier topic of this name (deleted and created again since): it is not used, and the partition is read as if the database had none"
                );
            }
            _ => {
                let by_operator = row.try_get("moved_by_operator")?;
                positions.insert(
                    key,
                    Stored {
                        next_offset,
                        by_operator,
                    },
                );
            }
        }
    }
    Ok(positions)
}

/// Every position of the consumer, of one topic or all.
pub async fn list(
    pool: &DbPool,
    consumer: &str,
    topic: Option<&str>,
) -> Result<Vec<Position>, StoreError> {
    let rows = sqlx::query(LIST)
        .bind(consumer)
        .bind(topic)
        .fetch_all(pool)
        .await?;
    rows.iter()
        .map(|row| {
            Ok(Position {
                topic: row.try_get("topic")?,
                partition: row.try_get("kafka_partition")?,
                next_offset: row.try_get("next_offset")?,
                updated_at: row.try_get("updated_at")?,
            })
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(StoreError::from)
}

/// Sets a position, backwards or forwards; returns the one before, if any.
pub async fn set(
    pool: &DbPool,
    consumer: &str,
    topic: &str,
    partition: i32,
    next_offset: i64,
) -> Result<Option<i64>, StoreError> {
    Ok(sqlx::query_scalar(SET)
        .bind(consumer)
        .bind(topic)
        .bind(partition)
        .bind(next_offset)
        .fetch_one(pool)
        .await?)
}

/// Reads positions for the rebalance callback, which librdkafka calls
/// synchronously from inside `recv`.
pub struct PositionSource {
    /// The inbox whose positions these are; told what they were at
    /// assignment, so that a database going back from there is caught.
    pub inbox: std::sync::Arc<crate::store::Inbox>,
    pub runtime: tokio::runtime::Handle,
    /// Set at shutdown: stop waiting for an unreachable database.
    pub shutdown: watch::Receiver<bool>,
}

impl PositionSource {
    /// The database's positions of `partitions`, waiting (with backoff) for
    /// the database when it is unreachable: starting elsewhere could skip
    /// what a restored database lacks. `None` at shutdown.
    fn read_blocking(
        &self,
        partitions: &[PartitionKey],
        topic_ids: &BTreeMap<String, Uuid>,
    ) -> Option<BTreeMap<PartitionKey, i64>> {
        let wait = async {
            let mut delay = Duration::from_millis(200);
            let mut shutdown = self.shutdown.clone();
            loop {
                if *shutdown.borrow() {
                    return None;
                }
                let stored = self.inbox.answered(read(
                    self.inbox.pool(),
                    self.inbox.consumer(),
                    partitions,
                    topic_ids,
                ));
                match stored.await {
                    Ok(stored) => {
                        let positions: BTreeMap<PartitionKey, i64> = stored
                            .into_iter()
                            .map(|(key, stored)| (key, stored.next_offset))
                            .collect();
                        self.inbox
                            .expect_positions(partitions, &positions, topic_ids);
                        return Some(positions);
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot read the database's positions of the assigned partitions; retrying");
                    }
                }
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = shutdown.changed() => {}
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
            match crate::kafka::topic_id(consumer.client(), topic, Duration::from_secs(10)) {
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
        for ((topic, partition), next) in &positions {
            let start = checked_start(consumer, topic, *partition, *next, metrics);
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

/// Where a partition starts from the database's position `next`: there,
/// unless it is older than the partition's log start (retention deleted
/// what the database lacks): then the error is logged, the records counted in
/// `inbox_position_gap_records_total`, and it starts at the log start.
/// Blocks for the broker's answer.
pub fn checked_start<C: ConsumerContext>(
    consumer: &impl Consumer<C>,
    topic: &str,
    partition: i32,
    next: i64,
    metrics: &Metrics,
) -> Start {
    match consumer.fetch_watermarks(topic, partition, Duration::from_secs(10)) {
        Ok((log_start, _)) if next < log_start => {
            let missing = log_start - next;
            tracing::error!(
                topic,
                partition,
                database_position = next,
                log_start,
                missing,
                "the database's position is older than the partition's earliest offset: {missing} records it lacks cannot be read again (retention deleted them); continuing from the earliest offset"
            );
            metrics.position_gaps.inc_by(missing.unsigned_abs());
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

/// A partition as Kafka sees it, for `positions list` and `positions set`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PartitionOffsets {
    pub partition: i32,
    /// The log start: the earliest offset still held.
    pub earliest: i64,
    /// The high watermark: the offset the next record will get.
    pub end: i64,
    /// The group's committed offset, if any.
    pub committed: Option<i64>,
}

/// The topic's partitions with their offsets and the group's commits (a
/// client of the group that never joins it: nothing is consumed).
pub async fn kafka_offsets(
    settings: &crate::kafka::KafkaSettings,
    group: &str,
    topic: &str,
) -> Result<Vec<PartitionOffsets>, rdkafka::error::KafkaError> {
    let config = settings.consumer_config(group);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let timeout = Duration::from_secs(10);
        let consumer: BaseConsumer = config.create()?;
        let metadata = consumer.fetch_metadata(Some(&topic), timeout)?;
        let mut list = TopicPartitionList::new();
        for found in metadata.topics() {
            if let Some(error) = found.error() {
                return Err(rdkafka::error::KafkaError::MetadataFetch(error.into()));
            }
            for partition in found.partitions() {
                list.add_partition(&topic, partition.id());
            }
        }
        let committed = consumer.committed_offsets(list.clone(), timeout)?;
        let mut offsets = Vec::new();
        for element in list.elements() {
            let (earliest, end) =
                consumer.fetch_watermarks(&topic, element.partition(), timeout)?;
            let committed = committed
                .find_partition(&topic, element.partition())
                .and_then(|e| match e.offset() {
                    Offset::Offset(offset) => Some(offset),
                    _ => None,
                });
            offsets.push(PartitionOffsets {
                partition: element.partition(),
                earliest,
                end,
                committed,
            });
        }
        offsets.sort_by_key(|o| o.partition);
        Ok(offsets)
    })
    .await
    .expect("the Kafka query does not panic")
}

/// The record at `offset` of a partition, if the topic still holds it (a
/// client of the group that never joins it or commits: nothing moves).
pub async fn read_record(
    settings: &crate::kafka::KafkaSettings,
    group: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Option<crate::batch::InboundRecord>, rdkafka::error::KafkaError> {
    let config = settings.consumer_config(group);
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        let timeout = Duration::from_secs(10);
        let consumer: BaseConsumer = config.create()?;
        let (earliest, end) = consumer.fetch_watermarks(&topic, partition, timeout)?;
        if offset < earliest || offset >= end {
            return Ok(None);
        }
        let mut list = TopicPartitionList::new();
        list.add_partition_offset(&topic, partition, Offset::Offset(offset))?;
        consumer.assign(&list)?;
        let deadline = std::time::Instant::now() + timeout;
        while std::time::Instant::now() < deadline {
            match consumer.poll(Duration::from_millis(500)) {
                Some(Ok(message)) if rdkafka::Message::offset(&message) == offset => {
                    return Ok(Some(crate::kafka::to_record(&message)));
                }
                // A compacted or transactional gap: the offset holds none.
                Some(Ok(_)) => return Ok(None),
                Some(Err(error)) => return Err(error),
                None => {}
            }
        }
        Err(rdkafka::error::KafkaError::MessageConsumption(
            rdkafka::types::RDKafkaErrorCode::OperationTimedOut,
        ))
    })
    .await
    .expect("the Kafka read does not panic")
}
