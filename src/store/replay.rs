//! Parked records read back: `parked list` and `parked replay`, which runs
//! a stored record through the batch statement again, exactly once. The
//! console (src/console) calls the same functions, so the two never
//! disagree.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::Row;
use uuid::Uuid;

use crate::batch::{Batch, Disposition, InboundRecord};
use crate::event::ParkReason;

use super::apply::Statement;
use super::{load_window, DbPool, StoreError};

const LIST_PARKED: &str = include_str!("../../sql/list_parked.sql");
const COUNT_PARKED: &str = include_str!("../../sql/count_parked.sql");
const LOCK_PARKED: &str = include_str!("../../sql/lock_parked.sql");
const MARK_REPLAYED: &str = include_str!("../../sql/mark_replayed.sql");
const REPLAY_CANDIDATES: &str = include_str!("../../sql/replay_candidates.sql");
const PARKED_GROUPS: &str = include_str!("../../sql/parked_groups.sql");
const PARKED_RECORD: &str = include_str!("../../sql/parked_record.sql");

/// Replays kept in a parked row's history (`replays`): the oldest goes
/// when a row was replayed more often.
pub const REPLAYS_KEPT: i32 = 20;

/// Replays one of `consumer`'s parked records through the normal path
/// (decode, validate, the batch statement), in one transaction with the
/// parked row locked: exactly once even when replays run twice or
/// concurrently. `by` (the CLI, the console and from where) goes into the
/// row's history of replays with the outcome.
pub async fn replay(
    pool: &DbPool,
    consumer: &str,
    id: i64,
    by: &str,
) -> Result<ReplayOutcome, StoreError> {
    let window = pool.with_answer_deadline(load_window(pool)).await?;
    let mut tx = pool.begin().await?;
    let Some(row) = sqlx::query(LOCK_PARKED)
        .bind(id)
        .bind(consumer)
        .persistent(pool.prepares())
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(ReplayOutcome::NotFound);
    };
    let replayed_at: Option<DateTime<Utc>> = row.try_get("replayed_at")?;
    if let Some(at) = replayed_at {
        return Ok(ReplayOutcome::AlreadyReplayed(at));
    }
    let headers_json: String = row.try_get("headers")?;
    let record = InboundRecord {
        topic: row.try_get("topic")?,
        partition: row.try_get("kafka_partition")?,
        offset: row.try_get("kafka_offset")?,
        timestamp: None,
        key: None,
        payload: row.try_get("payload")?,
        headers: crate::parked::headers_from_json(&headers_json),
    };
    let batch = Batch::classify(vec![record], &window);
    let outcome = match &batch.items()[0].disposition {
        Disposition::Parked(rejection) => {
            ReplayOutcome::StillParked(rejection.reason, rejection.detail.clone())
        }
        _ => {
            // A replay does not move positions: the record was read long
            // ago. Its row, if parked again, owes no DLQ copy (the
            // operator is at it).
            let statement = Statement {
                consumer,
                dlq_copies: false,
                prepares: pool.prepares(),
            };
            let done = statement
                .run(&mut tx, batch.items(), Vec::new(), None)
                .await?;
            // Parked again: at its own position, so the statement finds
            // the row it replays (parked before) and says why, in its
            // own words.
            match done.newly_parked.iter().chain(&done.parked_before).next() {
                Some(parked) => ReplayOutcome::StillParked(parked.reason, parked.error.clone()),
                None if done.processed == 1 => ReplayOutcome::Applied,
                None => ReplayOutcome::Duplicate,
            }
        }
    };
    sqlx::query(MARK_REPLAYED)
        .bind(id)
        .bind(outcome.to_string())
        .bind(outcome.reached_ledger())
        .bind(by)
        .bind(REPLAYS_KEPT)
        .persistent(pool.prepares())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(outcome)
}

/// Ids of `consumer`'s parked records of one reason not replayed yet, of
/// one day (UTC) or of all.
pub async fn replay_candidates(
    pool: &DbPool,
    consumer: &str,
    reason: ParkReason,
    day: Option<NaiveDate>,
) -> Result<Vec<i64>, StoreError> {
    Ok(sqlx::query_scalar(REPLAY_CANDIDATES)
        .bind(consumer)
        .bind(reason.as_str())
        .bind(day)
        .fetch_all(pool)
        .await?)
}

/// Which parked records [`list_parked`] shows; `None`: no such filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParkedFilter {
    pub reason: Option<ParkReason>,
    /// Parked at or after.
    pub since: Option<DateTime<Utc>>,
    /// Parked on that day (UTC).
    pub day: Option<NaiveDate>,
    /// The order: its record key (the order id, SPEC §4).
    pub order: Option<String>,
    /// A SKU the payload or the error names (a text match).
    pub sku: Option<String>,
    pub partition: Option<i32>,
    /// Only ids after this one: the next page after the last id shown.
    pub after_id: Option<i64>,
}

/// `consumer`'s parked records, oldest first.
pub async fn list_parked(
    pool: &DbPool,
    consumer: &str,
    filter: &ParkedFilter,
    limit: i64,
) -> Result<Vec<ParkedEntry>, StoreError> {
    // Planned for each call's filters: a plan made once for every filter
    // (the generic plans every session of the service asks for, see
    // `Limits`) reads the whole table in id order for an order, a rare
    // reason or a late page: 0.7 s at 1,000,000 parked rows for an order,
    // against 0.2 ms planned with its values. Hence its own transaction
    // with custom plans.
    let mut tx = pool.begin().await?;
    sqlx::query("SET LOCAL plan_cache_mode = force_custom_plan")
        .persistent(false)
        .execute(&mut *tx)
        .await?;
    let rows = sqlx::query(LIST_PARKED)
        .persistent(false)
        .bind(consumer)
        .bind(filter.reason.map(ParkReason::as_str))
        .bind(filter.since)
        .bind(filter.day)
        .bind(filter.order.as_deref())
        .bind(filter.sku.as_deref())
        .bind(filter.partition)
        .bind(filter.after_id)
        .bind(limit)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    rows.iter()
        .map(parked_entry)
        .collect::<Result<_, sqlx::Error>>()
        .map_err(StoreError::from)
}

/// `consumer`'s parked records counted by reason and day (UTC), newest day
/// first, each count up to `up_to`.
pub async fn parked_groups(
    pool: &DbPool,
    consumer: &str,
    up_to: i64,
) -> Result<Vec<ParkedGroup>, StoreError> {
    let reasons: Vec<&str> = ParkReason::ALL.iter().map(|r| r.as_str()).collect();
    let rows: Vec<(String, NaiveDate, i64)> = sqlx::query_as(PARKED_GROUPS)
        .bind(consumer)
        .bind(reasons)
        .bind(up_to)
        .fetch_all(pool)
        .await?;
    Ok(rows
        .into_iter()
        .map(|(reason, day, records)| ParkedGroup {
            reason,
            day,
            count: ParkedCount {
                records,
                more: records >= up_to,
            },
        })
        .collect())
}

/// The parked records of one reason parked on one day.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedGroup {
    pub reason: String,
    pub day: NaiveDate,
    /// How many, as far as they were counted.
    pub count: ParkedCount,
}

/// A parked row as `parked list` and the console list it: its order id
/// read from what the row kept (payload, headers, key).
fn parked_entry(row: &sqlx::postgres::PgRow) -> Result<ParkedEntry, sqlx::Error> {
    let headers: String = row.try_get("headers")?;
    let payload: Option<Vec<u8>> = row.try_get("payload")?;
    let key: Option<Vec<u8>> = row.try_get("record_key")?;
    Ok(ParkedEntry {
        order_id: crate::parked::stored_order_id(payload.as_deref(), &headers, key.as_deref()),
        id: row.try_get("id")?,
        parked_at: row.try_get("parked_at")?,
        reason: row.try_get("reason")?,
        error: row.try_get("error")?,
        topic: row.try_get("topic")?,
        partition: row.try_get("kafka_partition")?,
        offset: row.try_get("kafka_offset")?,
        message_id: row.try_get("message_id")?,
        replayed_at: row.try_get("replayed_at")?,
        replay_outcome: row.try_get("replay_outcome")?,
        trace_id: row.try_get("trace_id")?,
    })
}

/// One parked record of `consumer`, whole, if there is one of that id.
pub async fn parked_record(
    pool: &DbPool,
    consumer: &str,
    id: i64,
) -> Result<Option<ParkedRecord>, StoreError> {
    let Some(row) = sqlx::query(PARKED_RECORD)
        .bind(consumer)
        .bind(id)
        .fetch_optional(pool)
        .await?
    else {
        return Ok(None);
    };
    Ok(Some(ParkedRecord {
        entry: parked_entry(&row)?,
        parked_day: row.try_get("parked_day")?,
        payload: row.try_get("payload")?,
        headers_json: row.try_get("headers")?,
        record_key: row.try_get("record_key")?,
        dlq_sent_at: row.try_get("dlq_sent_at")?,
        replays: replays_of(row.try_get("replays")?)?,
    }))
}

/// The history of replays as the row keeps it (a JSON array, oldest
/// first; NULL: never replayed).
fn replays_of(json: Option<String>) -> Result<Vec<Replayed>, StoreError> {
    match json {
        None => Ok(Vec::new()),
        Some(json) => serde_json::from_str(&json).map_err(|error| {
            StoreError::Schema(format!(
                "inbox_parked.replays is not a history of replays: {error}"
            ))
        }),
    }
}

/// One replay of a parked record, as its row's history keeps it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
pub struct Replayed {
    pub at: DateTime<Utc>,
    /// [`ReplayOutcome`]'s words.
    pub outcome: String,
    /// Who replayed it: the CLI, or the console and from where.
    pub by: String,
}

/// A parked record with what [`ParkedEntry`] leaves out.
#[derive(Debug, Clone, PartialEq)]
pub struct ParkedRecord {
    pub entry: ParkedEntry,
    pub parked_day: NaiveDate,
    /// As received, bounded (SPEC §5); `None` once
    /// INBOX_PARKED_PAYLOAD_DAYS cleared it.
    pub payload: Option<Vec<u8>>,
    /// The headers as stored: secrets redacted when it was parked.
    pub headers_json: String,
    pub record_key: Option<Vec<u8>>,
    /// When its copy reached the DLQ topic, or (equal to `parked_at`) that
    /// none is owed (parked by a consumer without DLQ_TOPIC); `None`: owed.
    pub dlq_sent_at: Option<DateTime<Utc>>,
    /// Every replay (the last [`REPLAYS_KEPT`]), oldest first.
    pub replays: Vec<Replayed>,
}

/// How many parked records [`list_parked`] chooses from, counted up to
/// `up_to`.
pub async fn count_parked(
    pool: &DbPool,
    consumer: &str,
    reason: Option<ParkReason>,
    since: Option<DateTime<Utc>>,
    up_to: i64,
) -> Result<ParkedCount, StoreError> {
    let reasons: Vec<&str> = match reason {
        Some(reason) => vec![reason.as_str()],
        None => ParkReason::ALL.iter().map(|r| r.as_str()).collect(),
    };
    let records: i64 = sqlx::query_scalar(COUNT_PARKED)
        .bind(consumer)
        .bind(reasons)
        .bind(since.unwrap_or(DateTime::UNIX_EPOCH))
        .bind(up_to)
        .fetch_one(pool)
        .await?;
    Ok(ParkedCount {
        records,
        more: records >= up_to,
    })
}

/// How many parked records there are, as far as they were counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkedCount {
    pub records: i64,
    /// Counting stopped at `records`: there may be more.
    pub more: bool,
}

impl std::fmt::Display for ParkedCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.more {
            write!(f, "at least {}", self.records)
        } else {
            write!(f, "{}", self.records)
        }
    }
}

/// What a replay of a parked record did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplayOutcome {
    /// Applied now: ledger row, reservations, stock.
    Applied,
    /// The event was already in the ledger: nothing to do.
    Duplicate,
    /// Still not applicable; the row stays eligible for another replay.
    StillParked(ParkReason, String),
    /// Replayed before, at that time: nothing to do.
    AlreadyReplayed(DateTime<Utc>),
    NotFound,
}

impl ReplayOutcome {
    /// The event is in the ledger now, so the parked row is done.
    pub fn reached_ledger(&self) -> bool {
        matches!(self, ReplayOutcome::Applied | ReplayOutcome::Duplicate)
    }
}

impl std::fmt::Display for ReplayOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayOutcome::Applied => write!(f, "applied"),
            ReplayOutcome::Duplicate => write!(f, "duplicate (already applied)"),
            ReplayOutcome::StillParked(reason, detail) => {
                write!(f, "still parked: {reason}: {detail}")
            }
            ReplayOutcome::AlreadyReplayed(at) => write!(f, "already replayed at {at}"),
            ReplayOutcome::NotFound => write!(f, "no such parked record for this consumer"),
        }
    }
}

/// One parked record as `parked list` shows it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ParkedEntry {
    pub id: i64,
    pub parked_at: DateTime<Utc>,
    pub reason: String,
    pub error: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub message_id: Option<Uuid>,
    /// The order: its event's when the stored payload decodes, else the
    /// record key.
    pub order_id: Option<String>,
    pub replayed_at: Option<DateTime<Utc>>,
    pub replay_outcome: Option<String>,
    /// The trace of the batch that parked it, when tracing was on.
    pub trace_id: Option<String>,
}
