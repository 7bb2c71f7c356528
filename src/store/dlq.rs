//! The DLQ copies parked rows owe (`inbox_parked.dlq_sent_at` unset): which
//! of the owned partitions' rows still need one, and marking those the
//! topic confirmed. A copy thus follows from what the database holds, not
//! from one batch's answer: a lost answer or a crash between the commit and
//! the copy leaves the row owing it, and the partition's owner sends it.

use sqlx::Row;

use crate::batch::{InboundRecord, PartitionKey};
use crate::event::ParkReason;
use crate::parked::{self, ParkedRow};

use super::{DbPool, StoreError};

const OWED: &str = include_str!("../../sql/dlq_owed.sql");
const SENT: &str = include_str!("../../sql/dlq_sent.sql");

/// Owed copies read at a time.
const OWED_PER_READ: i64 = 500;

/// `consumer`'s parked rows of `partitions` whose copies are owed, except
/// those on their way now (`in_flight`), with the record as the copy
/// carries it.
pub async fn copies_owed(
    pool: &DbPool,
    consumer: &str,
    partitions: &[PartitionKey],
    in_flight: &[i64],
) -> Result<Vec<(ParkedRow, InboundRecord)>, StoreError> {
    let topics: Vec<&str> = partitions.iter().map(|(t, _)| t.as_str()).collect();
    let numbers: Vec<i32> = partitions.iter().map(|(_, p)| *p).collect();
    let rows = pool
        .with_answer_deadline(async {
            Ok(sqlx::query(OWED)
                .bind(consumer)
                .bind(&topics)
                .bind(&numbers)
                .bind(in_flight)
                .bind(OWED_PER_READ)
                .fetch_all(pool)
                .await?)
        })
        .await?;
    rows.iter()
        .map(|row| {
            let record = InboundRecord {
                topic: row.try_get("topic")?,
                partition: row.try_get("kafka_partition")?,
                offset: row.try_get("kafka_offset")?,
                timestamp: None,
                key: row.try_get("record_key")?,
                payload: row.try_get("payload")?,
                headers: parked::headers_from_json(&row.try_get::<String, _>("headers")?),
            };
            let reason: String = row.try_get("reason")?;
            let mut parked = ParkedRow::new(
                &record,
                ParkReason::from_code(&reason).unwrap_or(ParkReason::DbRejected),
                row.try_get("error")?,
                row.try_get("message_id")?,
                None,
            );
            parked.id = Some(row.try_get("id")?);
            parked.trace_id = row.try_get("trace_id")?;
            Ok((parked, record))
        })
        .collect::<Result<_, sqlx::Error>>()
        .map_err(StoreError::from)
}

/// Marks the copies the DLQ topic confirmed as sent.
pub async fn copies_sent(pool: &DbPool, ids: &[i64]) -> Result<(), StoreError> {
    if ids.is_empty() {
        return Ok(());
    }
    pool.with_answer_deadline(async {
        sqlx::query(SENT).bind(ids).execute(pool).await?;
        Ok(())
    })
    .await
}
