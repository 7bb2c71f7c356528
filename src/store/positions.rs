//! Positions in the database (docs/design.md#positions): the next offset to
//! read, per `(consumer, topic, partition)`, written by each batch in its
//! own transaction (`sql/apply_batch.sql`, only forward). The database is
//! the authority on positions as it is on duplicates: a partition assigned
//! to this member starts where the database says (`kafka::start`), so a
//! database restored from a backup (or failed over to a replica that lacked
//! the last commits) reads again what it lost, although Kafka's committed
//! offsets are past it. Kafka's committed offset is used only where the
//! database has no position.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use sqlx::Row;
use uuid::Uuid;

use super::{DbPool, StoreError};
use crate::batch::PartitionKey;

const READ: &str = include_str!("../../sql/position_read.sql");
const LIST: &str = include_str!("../../sql/position_list.sql");
/// The only statement that moves a position backwards.
const SET: &str = include_str!("../../sql/position_set.sql");

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
    /// The highest position a batch ever wrote (an operator's set does not
    /// move it back): every record before it was applied. `None` where no
    /// batch wrote one since the column exists.
    pub applied_through: Option<i64>,
}

impl Stored {
    /// How many records from this position to `log_start` (the partition's
    /// earliest offset) the database never applied: those retention
    /// deleted are lost. A position an operator set back below the log
    /// start lacks only what lies past `applied_through`.
    pub fn never_applied_before(&self, log_start: i64) -> i64 {
        let applied = self.applied_through.unwrap_or(self.next_offset);
        (log_start - self.next_offset.max(applied)).max(0)
    }
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
                positions.insert(
                    key,
                    Stored {
                        next_offset,
                        by_operator: row.try_get("moved_by_operator")?,
                        applied_through: row.try_get("applied_through")?,
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
