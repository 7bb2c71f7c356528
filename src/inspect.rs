//! `inventory-inbox inspect`: what the database and the topic hold of one
//! event, one order or one record, with the verdict in one line ("was this
//! order applied, and how often?", docs/runbook.md). A verdict is true of
//! the tables and the topic as they are (SPEC §17): what cannot be looked
//! up is said so, with where to look instead.
//!
//! Every look-up is served by an index: the ledger's key leads with the
//! message id, and a BRIN index on its offsets finds the row written from a
//! record the topic no longer holds; the reservations are indexed by order
//! id; parked rows by message id, by position and by record key (the order
//! id). The topic is read, by a client of the group that never joins it,
//! for the record asked about and for the lines each event asked about
//! named, which tell the lines it ignored (written before by another event)
//! from those it never named.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::FromRow;
use uuid::Uuid;

use crate::batch::InboundRecord;
use crate::event::OrderPlaced;
use crate::kafka::{cluster, KafkaSettings};

const LEDGER: &str = include_str!("../sql/inspect_ledger.sql");
const LEDGER_AT: &str = include_str!("../sql/inspect_ledger_at.sql");
const BUSINESS_DUPLICATES: &str = include_str!("../sql/inspect_business_duplicates.sql");
const LINES: &str = include_str!("../sql/inspect_lines.sql");
const PARKED: &str = include_str!("../sql/inspect_parked.sql");
const POSITION: &str = include_str!("../sql/inspect_position.sql");

const OUTSIDE_WINDOW: &str = "outside_dedup_window";

/// What is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Event(Uuid),
    Order(String),
    /// A record of the topic, by its position.
    Record {
        partition: i32,
        offset: i64,
    },
}

/// An event's row in the ledger.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct LedgerEntry {
    pub message_id: Uuid,
    pub event_day: NaiveDate,
    pub topic: String,
    pub kafka_partition: i32,
    pub kafka_offset: i64,
    /// `processed`, or `business_duplicate` (every line it named was
    /// written before by another event: it reserved nothing).
    pub status: String,
    pub order_id: String,
    pub processed_at: DateTime<Utc>,
    /// The order lines its record names, read back from the topic when
    /// another event's line of its order could have stood in the way of
    /// one; `null` otherwise, or when they cannot be read (`named_unknown`
    /// says why).
    #[sqlx(skip)]
    pub named: Option<Vec<NamedLine>>,
    #[sqlx(skip)]
    pub named_unknown: Option<String>,
}

/// An order line as an event names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamedLine {
    pub sku: String,
    pub quantity: i32,
}

/// An order line in `order_reservation`.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct Line {
    pub order_id: String,
    pub sku: String,
    pub quantity: i32,
    /// `reserved` or `rejected`.
    pub status: String,
    /// The event that made it.
    pub message_id: Uuid,
    pub reserved_day: NaiveDate,
    pub created_at: DateTime<Utc>,
}

/// An order line an event named and did not write, because another event
/// had written it (a business duplicate, whole or partial).
#[derive(Debug, Clone, Serialize)]
pub struct Ignored {
    /// The event that named it.
    pub message_id: Uuid,
    pub order_id: String,
    pub sku: String,
    /// As that event named it.
    pub quantity: i32,
    /// The event whose line it is; `null` when no line of it is kept any
    /// more (past the reservations' retention).
    pub by: Option<Uuid>,
    /// That line's status, `reserved` or `rejected`.
    pub status: Option<String>,
}

/// A parked record.
#[derive(Debug, Clone, Serialize, FromRow)]
pub struct Parked {
    pub id: i64,
    pub topic: String,
    pub kafka_partition: i32,
    pub kafka_offset: i64,
    pub message_id: Option<Uuid>,
    pub reason: String,
    pub error: String,
    pub parked_at: DateTime<Utc>,
    pub replayed_at: Option<DateTime<Utc>>,
    pub replay_outcome: Option<String>,
    /// The order it names: its payload's while that is kept, else its
    /// record key (the order id, SPEC §4).
    #[sqlx(skip)]
    pub order_id: Option<String>,
    #[serde(skip)]
    payload: Option<Vec<u8>>,
    #[serde(skip)]
    headers: String,
    #[serde(skip)]
    record_key: Option<Vec<u8>>,
}

/// What the topic holds at a record's position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InTopic {
    pub state: RecordState,
    /// The partition's log start (its earliest offset) and end (the offset
    /// the next record produced gets), as the cluster said them just after
    /// the record was read.
    pub log_start: Option<i64>,
    pub log_end: Option<i64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    /// The topic holds it.
    Held,
    /// Before the log start: retention (or DeleteRecords) removed it.
    Deleted,
    /// At or after the log end: not produced yet.
    PastEnd,
    /// Inside the log, but no record has this offset (a transaction marker,
    /// or compacted away).
    NoRecord,
}

impl RecordState {
    /// As the JSON spells it.
    pub fn name(self) -> &'static str {
        match self {
            RecordState::Held => "held",
            RecordState::Deleted => "deleted",
            RecordState::PastEnd => "past_end",
            RecordState::NoRecord => "no_record",
        }
    }
}

impl Serialize for RecordState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// Everything found, and what it means.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub verdict: String,
    pub ledger: Vec<LedgerEntry>,
    /// The lines of the order asked about, or the lines the events asked
    /// about wrote.
    pub lines: Vec<Line>,
    /// Lines the events asked about named but did not write.
    pub ignored: Vec<Ignored>,
    pub parked: Vec<Parked>,
    /// For a record: the consumer's position in its partition (the next
    /// offset it reads).
    pub position: Option<i64>,
    /// For a record: whether the topic holds it.
    pub record: Option<InTopic>,
}

/// Errors of `inspect`.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    /// The topic, or the record's partition, does not exist, or the cluster
    /// does not answer (said as `cluster` says it).
    #[error(transparent)]
    Topic(#[from] cluster::ClusterError),
}

/// The topic inspect reads, as a client of the group that never joins it
/// nor commits.
pub struct TopicReader<'a> {
    pub settings: &'a KafkaSettings,
    pub group: &'a str,
    pub topic: &'a str,
}

impl TopicReader<'_> {
    /// What the topic holds at `partition:offset`, and the record when it
    /// holds one. A topic or partition the cluster lacks is an error.
    async fn at(
        &self,
        partition: i32,
        offset: i64,
    ) -> Result<(InTopic, Option<InboundRecord>), cluster::ClusterError> {
        let record =
            cluster::read_record(self.settings, self.group, self.topic, partition, offset).await?;
        let logs = cluster::kafka_offsets(self.settings, self.group, self.topic).await?;
        let log = logs.iter().find(|log| log.partition == partition);
        let state = match (&record, log) {
            (Some(_), _) => RecordState::Held,
            (None, Some(log)) if offset < log.earliest => RecordState::Deleted,
            (None, Some(log)) if offset >= log.end => RecordState::PastEnd,
            (None, _) => RecordState::NoRecord,
        };
        let in_topic = InTopic {
            state,
            log_start: log.map(|log| log.earliest),
            log_end: log.map(|log| log.end),
        };
        Ok((in_topic, record))
    }
}

/// The event a record holds, when it holds a valid one.
fn event_of(record: &InboundRecord) -> Option<OrderPlaced> {
    crate::event::decode(record.payload.as_deref(), &record.headers)
        .ok()
        .map(|decoded| decoded.event)
}

/// Looks `subject` up in the database of `consumer` (the ledger's name) and
/// in the topic its records come from.
pub async fn inspect(
    pool: &crate::store::DbPool,
    consumer: &str,
    topic: &TopicReader<'_>,
    subject: &Subject,
) -> Result<Inspection, InspectError> {
    // The record asked about, as the topic holds it.
    let (record, held) = match subject {
        Subject::Record { partition, offset } => {
            let (state, record) = topic.at(*partition, *offset).await?;
            (Some(state), record.as_ref().and_then(event_of))
        }
        _ => (None, None),
    };
    // An order's lines come first: they name the events that made them.
    let order_lines = match subject {
        Subject::Order(order) => Some(lines_of(pool, std::slice::from_ref(order)).await?),
        _ => None,
    };
    let mut ids: BTreeSet<Uuid> = match (subject, &order_lines) {
        (Subject::Event(id), _) => [*id].into(),
        // The events of an order that wrote its lines, and its business
        // duplicates, which wrote none.
        (Subject::Order(order), lines) => {
            let mut ids: BTreeSet<Uuid> = lines.iter().flatten().map(|l| l.message_id).collect();
            ids.extend(
                sqlx::query_scalar::<_, Uuid>(BUSINESS_DUPLICATES)
                    .bind(consumer)
                    .bind(order)
                    .fetch_all(pool)
                    .await?,
            );
            ids
        }
        (Subject::Record { .. }, _) => held.iter().map(|e| e.message_id).collect(),
    };
    let (partition, offset) = match subject {
        Subject::Record { partition, offset } => (Some(*partition), Some(*offset)),
        _ => (None, None),
    };
    if let (Some(partition), Some(offset), Some(RecordState::Deleted)) =
        (partition, offset, record.as_ref().map(|r| r.state))
    {
        ids.extend(ledger_at(pool, consumer, topic.topic, partition, offset).await?);
    }
    let order = match subject {
        Subject::Order(order) => Some(order.as_str()),
        _ => None,
    };
    let mut parked: Vec<Parked> = sqlx::query_as(PARKED)
        .bind(consumer)
        .bind(ids.iter().copied().collect::<Vec<_>>())
        .bind(topic.topic)
        .bind(partition)
        .bind(offset)
        .bind(order)
        .fetch_all(pool)
        .await?;
    for row in &mut parked {
        row.order_id = crate::parked::stored_order_id(
            row.payload.as_deref(),
            &row.headers,
            row.record_key.as_deref(),
        );
    }
    // A record parked at the position, an order's parked events: their ids.
    ids.extend(parked.iter().filter_map(|p| p.message_id));
    let ids: Vec<Uuid> = ids.into_iter().collect();
    let mut ledger: Vec<LedgerEntry> = sqlx::query_as(LEDGER)
        .bind(consumer)
        .bind(&ids)
        .fetch_all(pool)
        .await?;
    let order_lines = match order_lines {
        Some(lines) => lines,
        None => {
            let mut orders: BTreeSet<String> = ledger.iter().map(|e| e.order_id.clone()).collect();
            orders.extend(held.iter().map(|e| e.order_id.clone()));
            orders.extend(parked.iter().filter_map(|p| p.order_id.clone()));
            lines_of(pool, &orders.into_iter().collect::<Vec<_>>()).await?
        }
    };
    if !matches!(subject, Subject::Order(_)) {
        for entry in &mut ledger {
            // What it named matters where another event's line of its order
            // could have stood in its way.
            let others = order_lines
                .iter()
                .any(|l| l.order_id == entry.order_id && l.message_id != entry.message_id);
            if !others && entry.status != "business_duplicate" {
                continue;
            }
            let at = (entry.kafka_partition, entry.kafka_offset);
            let event = match (&held, partition.zip(offset)) {
                (Some(event), Some(asked)) if asked == at && entry.topic == topic.topic => {
                    Ok(event.clone())
                }
                _ => read_event(topic, entry).await,
            };
            match event {
                Ok(event) => entry.named = Some(named_lines(&event)),
                Err(why) => entry.named_unknown = Some(why),
            }
        }
    }
    let ignored = ignored_lines(&ledger, &order_lines);
    let lines: Vec<Line> = match subject {
        Subject::Order(_) => order_lines,
        _ => order_lines
            .into_iter()
            .filter(|l| ids.contains(&l.message_id))
            .collect(),
    };
    let position: Option<i64> = match partition {
        Some(partition) => {
            sqlx::query_scalar(POSITION)
                .bind(consumer)
                .bind(topic.topic)
                .bind(partition)
                .fetch_optional(pool)
                .await?
        }
        None => None,
    };
    let mut found = Inspection {
        verdict: String::new(),
        ledger,
        lines,
        ignored,
        parked,
        position,
        record,
    };
    found.verdict = verdict(
        subject,
        topic.topic,
        held.as_ref().map(|e| e.message_id),
        &found,
    );
    Ok(found)
}

async fn lines_of(
    pool: &crate::store::DbPool,
    orders: &[String],
) -> Result<Vec<Line>, sqlx::Error> {
    sqlx::query_as(LINES).bind(orders).fetch_all(pool).await
}

/// The ids of the ledger rows written from `partition:offset`. Sequential
/// scans are off for it: a day's heap is never read whole.
async fn ledger_at(
    pool: &crate::store::DbPool,
    consumer: &str,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<Vec<Uuid>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::raw_sql("SET LOCAL enable_seqscan = off")
        .execute(&mut *tx)
        .await?;
    let ids = sqlx::query_scalar(LEDGER_AT)
        .persistent(pool.prepares())
        .bind(consumer)
        .bind(topic)
        .bind(partition)
        .bind(offset)
        .fetch_all(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(ids)
}

/// The event of a ledger row, read back from its record; or why it cannot
/// be.
async fn read_event(topic: &TopicReader<'_>, entry: &LedgerEntry) -> Result<OrderPlaced, String> {
    let at = format!("{}:{}", entry.kafka_partition, entry.kafka_offset);
    if entry.topic != topic.topic {
        return Err(format!("its record {at} is on topic {}", entry.topic));
    }
    let (state, record) = topic
        .at(entry.kafka_partition, entry.kafka_offset)
        .await
        .map_err(|error| format!("its record {at} could not be read: {error}"))?;
    match (state.state, record.as_ref().and_then(event_of)) {
        (_, Some(event)) if event.message_id == entry.message_id => Ok(event),
        (RecordState::Deleted, _) => Err(format!(
            "its record {at} is no longer in the topic (the partition starts at {})",
            show(state.log_start)
        )),
        _ => Err(format!(
            "the topic holds no event {} at {at} (was it created again?)",
            entry.message_id
        )),
    }
}

fn named_lines(event: &OrderPlaced) -> Vec<NamedLine> {
    event
        .lines
        .iter()
        .map(|line| NamedLine {
            sku: line.sku.clone(),
            quantity: line.quantity,
        })
        .collect()
}

/// The lines each ledger entry named and did not write, with the line that
/// stood in their way: another event's line of the same order and SKU (the
/// earliest, when a line was taken twice). Pure.
pub fn ignored_lines(ledger: &[LedgerEntry], lines: &[Line]) -> Vec<Ignored> {
    let mut ignored = Vec::new();
    for entry in ledger {
        for named in entry.named.iter().flatten() {
            let same = |l: &&Line| l.order_id == entry.order_id && l.sku == named.sku;
            if lines
                .iter()
                .filter(same)
                .any(|l| l.message_id == entry.message_id)
            {
                continue;
            }
            let before = lines
                .iter()
                .filter(same)
                .min_by_key(|l| (l.created_at, l.message_id));
            ignored.push(Ignored {
                message_id: entry.message_id,
                order_id: entry.order_id.clone(),
                sku: named.sku.clone(),
                quantity: named.quantity,
                by: before.map(|l| l.message_id),
                status: before.map(|l| l.status.clone()),
            });
        }
    }
    ignored
}

/// The verdict in one line; `read_id` is the id of the event the topic
/// holds at a record's position. Pure.
pub fn verdict(
    subject: &Subject,
    topic: &str,
    read_id: Option<Uuid>,
    found: &Inspection,
) -> String {
    match subject {
        Subject::Event(id) => format!("event {id}: {}", event_state(*id, found, None)),
        Subject::Order(order) => order_verdict(order, found),
        Subject::Record { partition, offset } => {
            record_verdict(*partition, *offset, topic, read_id, found)
        }
    }
}

fn record_verdict(
    partition: i32,
    offset: i64,
    topic: &str,
    read_id: Option<Uuid>,
    found: &Inspection,
) -> String {
    let at = format!("record {partition}:{offset}");
    let position = found.position;
    let read = position.is_some_and(|next| next > offset);
    let (state, log_start, log_end) = match &found.record {
        Some(r) => (r.state, show(r.log_start), show(r.log_end)),
        None => (RecordState::Held, show(None), show(None)),
    };
    match state {
        RecordState::PastEnd => {
            return format!(
                "{at}: not in the topic yet: partition {partition} ends at {log_end} (the next \
                 record produced there gets offset {log_end}); the position is {}",
                show(position)
            )
        }
        RecordState::NoRecord => {
            return format!(
                "{at}: no record has this offset (partition {partition} holds {log_start} to \
                 {log_end}, end excluded): a transaction marker, or compacted away"
            )
        }
        RecordState::Held | RecordState::Deleted => {}
    }
    let deleted = state == RecordState::Deleted;
    let gone = if deleted {
        format!(", deleted from the topic (partition {partition} starts at {log_start} now)")
    } else {
        String::new()
    };
    let here = found.parked.iter().find(|p| {
        (p.topic.as_str(), p.kafka_partition, p.kafka_offset) == (topic, partition, offset)
    });
    // The event at the position: read from the topic, else the ledger row
    // or the parked row written from it.
    let from_here = found.ledger.iter().find(|e| {
        (e.topic.as_str(), e.kafka_partition, e.kafka_offset) == (topic, partition, offset)
    });
    let id = read_id
        .or(from_here.map(|e| e.message_id))
        .or(here.and_then(|p| p.message_id));
    let named = |id: Option<Uuid>| match id {
        Some(id) => format!("{at} (event {id}){gone}"),
        None => format!("{at}{gone}"),
    };
    if let Some(p) = here {
        let mut said = format!("{}: {}", named(id), parked_text(p, false));
        // What else is known of its event: applied from another record,
        // before its day left the window, or parked elsewhere too.
        if let Some(id) = id.filter(|id| {
            found.ledger.iter().any(|e| e.message_id == *id)
                || found.lines.iter().any(|l| l.message_id == *id)
                || found
                    .parked
                    .iter()
                    .any(|o| o.message_id == Some(*id) && o.id != p.id)
        }) {
            said.push_str(&format!(
                "; event {id}: {}",
                event_state(id, found, Some(p.id))
            ));
        }
        return said;
    }
    let Some(id) = id else {
        return match (deleted, read) {
            (true, true) => format!(
                "{}: read by this consumer (the position is {}); no ledger row and no parked \
                 row was written from {partition}:{offset} on the days kept: it was a redelivery \
                 of an event applied from another record, or its event's day has left the dedup \
                 window",
                named(None),
                show(position)
            ),
            (true, false) => format!(
                "{}, before this consumer read it (the position is {}); no ledger row was \
                 written from it",
                named(None),
                show(position)
            ),
            (false, true) => format!(
                "{}: read (the position is {}), but it holds no valid event and no parked row \
                 is at its position",
                named(None),
                show(position)
            ),
            (false, false) => format!("{at}: not read yet (the position is {})", show(position)),
        };
    };
    let rows: Vec<&LedgerEntry> = found.ledger.iter().filter(|e| e.message_id == id).collect();
    let wrote = found.lines.iter().any(|l| l.message_id == id);
    match (rows.as_slice(), from_here) {
        ([_], Some(_)) | ([_, _, ..], _) => {
            format!("{}: {}", named(Some(id)), event_state(id, found, None))
        }
        ([entry], None) => format!(
            "{}: a redelivery of event {id}, applied at {} from {}:{}; it did nothing",
            named(Some(id)),
            entry.processed_at.to_rfc3339(),
            entry.kafka_partition,
            entry.kafka_offset
        ),
        ([], _) if wrote => format!("{}: {}", named(Some(id)), event_state(id, found, None)),
        ([], _) if read => format!(
            "{}: read (the position is {}), but event {id} is not in the ledger",
            named(Some(id)),
            show(position)
        ),
        ([], _) => format!(
            "{}: not read yet (the position is {})",
            named(Some(id)),
            show(position)
        ),
    }
}

/// What the database holds of event `id`: applied (once, or more), applied
/// before its day left the window, parked, or nothing. `told` is a parked
/// row already said. Pure.
fn event_state(id: Uuid, found: &Inspection, told: Option<i64>) -> String {
    let rows: Vec<&LedgerEntry> = found.ledger.iter().filter(|e| e.message_id == id).collect();
    let wrote: Vec<&Line> = found.lines.iter().filter(|l| l.message_id == id).collect();
    let parked: Vec<&Parked> = found
        .parked
        .iter()
        .filter(|p| p.message_id == Some(id) && Some(p.id) != told)
        .collect();
    let also_parked = |parked: &[&Parked]| -> String {
        parked
            .iter()
            .map(|p| {
                format!(
                    "; its record {}:{} was {}",
                    p.kafka_partition,
                    p.kafka_offset,
                    parked_text(p, false)
                )
            })
            .collect()
    };
    match rows.as_slice() {
        [] if !wrote.is_empty() => format!(
            "applied before its day left the dedup window (its ledger row went with the day); \
             {}{}",
            count_lines(&wrote),
            also_parked(&parked)
        ),
        [] => match parked.split_first() {
            Some((first, rest)) => {
                let mut said = format!("not applied; {}", parked_text(first, true));
                if first.reason == OUTSIDE_WINDOW {
                    said.push_str(&match &first.order_id {
                        Some(order) => format!(
                            "; whether a delivery before its day left the window applied it \
                             cannot be told: order {order} keeps no line of it"
                        ),
                        None => "; whether a delivery before its day left the window applied \
                                 it cannot be told: the parked row keeps no payload or key to \
                                 find its order by (try --order)"
                            .to_owned(),
                    });
                }
                said.push_str(&also_parked(rest));
                said
            }
            None => "not in the ledger (never read by this consumer, or older than the window)"
                .to_owned(),
        },
        [entry] => {
            let ignored: Vec<&Ignored> = found
                .ignored
                .iter()
                .filter(|i| i.message_id == id)
                .collect();
            let head = format!(
                "applied once at {} from {}:{}",
                entry.processed_at.to_rfc3339(),
                entry.kafka_partition,
                entry.kafka_offset
            );
            let unknown = entry
                .named_unknown
                .as_deref()
                .map(|why| format!("which lines it named cannot be told: {why}"));
            let effect = if entry.status == "business_duplicate" {
                let which = match (ignored.is_empty(), unknown) {
                    (true, Some(unknown)) => {
                        format!(
                            "every line it named was written before by another event ({unknown})"
                        )
                    }
                    _ => ignored_text(&ignored),
                };
                format!("a business duplicate, reserved nothing; {which}")
            } else {
                let mut effect = count_lines(&wrote);
                if !ignored.is_empty() {
                    effect.push_str(&format!("; {}", ignored_text(&ignored)));
                } else if let Some(unknown) = unknown {
                    effect.push_str(&format!(
                        "; whether it named lines written before by another event: {unknown}"
                    ));
                }
                effect
            };
            format!("{head}; {effect}{}", also_parked(&parked))
        }
        many => format!(
            "APPLIED {} TIMES (on days {})",
            many.len(),
            many.iter()
                .map(|e| e.event_day.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn ignored_text(ignored: &[&Ignored]) -> String {
    ignored
        .iter()
        .map(|i| match (i.by, i.status.as_deref()) {
            (Some(by), Some("rejected")) => format!(
                "{} ignored: rejected before (not enough stock) by event {by}",
                i.sku
            ),
            (Some(by), _) => format!("{} ignored: reserved before by event {by}", i.sku),
            (None, _) => format!(
                "{} ignored: no line of it is kept now (past the reservations' retention)",
                i.sku
            ),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

fn order_verdict(order: &str, found: &Inspection) -> String {
    let parked: String = found
        .parked
        .iter()
        .map(|p| {
            let what = match p.message_id {
                Some(id) => format!("event {id}"),
                None => "a record without a valid id".to_owned(),
            };
            format!(
                "; {what} at {}:{} was {}",
                p.kafka_partition,
                p.kafka_offset,
                parked_text(p, false)
            )
        })
        .collect();
    let lines = &found.lines;
    if lines.is_empty() {
        return format!(
            "order {order}: no line reserved or rejected within the reservations kept (never \
             applied, or older){parked}"
        );
    }
    let mut per_sku: BTreeMap<&str, usize> = BTreeMap::new();
    for line in lines {
        *per_sku.entry(line.sku.as_str()).or_default() += 1;
    }
    let twice: Vec<&str> = per_sku
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(sku, _)| *sku)
        .collect();
    let events: BTreeSet<Uuid> = lines.iter().map(|l| l.message_id).collect();
    let from: Vec<String> = events
        .iter()
        .map(
            |id| match found.ledger.iter().find(|e| e.message_id == *id) {
                Some(e) => format!(
                    "event {id} at {} from {}:{}",
                    e.processed_at.to_rfc3339(),
                    e.kafka_partition,
                    e.kafka_offset
                ),
                None => format!("event {id} (its ledger row is past the window)"),
            },
        )
        .collect();
    let all: Vec<&Line> = lines.iter().collect();
    if twice.is_empty() {
        format!(
            "order {order}: each line once ({}), by {}{parked}",
            count_lines(&all),
            from.join("; ")
        )
    } else {
        format!(
            "order {order}: SKU {} TAKEN MORE THAN ONCE ({}), by {}{parked}",
            twice.join(", "),
            count_lines(&all),
            from.join("; ")
        )
    }
}

fn count_lines(lines: &[&Line]) -> String {
    let reserved = lines.iter().filter(|l| l.status == "reserved").count();
    let rejected = lines.len() - reserved;
    format!("{reserved} line(s) reserved, {rejected} rejected")
}

/// "parked as REASON [at P:O] on TIME", and its replay.
fn parked_text(parked: &Parked, position: bool) -> String {
    let at = if position {
        format!(" at {}:{}", parked.kafka_partition, parked.kafka_offset)
    } else {
        String::new()
    };
    let replayed = match (&parked.replayed_at, &parked.replay_outcome) {
        (Some(at), Some(outcome)) => format!("; replayed at {}: {outcome}", at.to_rfc3339()),
        (Some(at), None) => format!("; replayed at {}", at.to_rfc3339()),
        _ => String::new(),
    };
    format!(
        "parked as {}{at} on {}{replayed}",
        parked.reason,
        parked.parked_at.to_rfc3339()
    )
}

fn show(value: Option<i64>) -> String {
    value.map_or_else(|| "none".to_owned(), |v| v.to_string())
}

impl Inspection {
    /// The human form: the verdict, then one line per row behind it.
    pub fn text(&self) -> String {
        let mut out = vec![self.verdict.clone()];
        for entry in &self.ledger {
            out.push(format!(
                "ledger      {}  day {}  {}:{}  {}  order {}  at {}",
                entry.message_id,
                entry.event_day,
                entry.kafka_partition,
                entry.kafka_offset,
                entry.status,
                entry.order_id,
                entry.processed_at.to_rfc3339()
            ));
        }
        for line in &self.lines {
            out.push(format!(
                "line        order {}  {} x{}  {}  by {}  on {}",
                line.order_id,
                line.sku,
                line.quantity,
                line.status,
                line.message_id,
                line.reserved_day
            ));
        }
        for line in &self.ignored {
            let before = match (line.by, &line.status) {
                (Some(by), Some(status)) => format!("{status} before by {by}"),
                _ => "no line of it kept".to_owned(),
            };
            out.push(format!(
                "ignored     order {}  {} x{}  named by {}: {before}",
                line.order_id, line.sku, line.quantity, line.message_id
            ));
        }
        for parked in &self.parked {
            out.push(format!(
                "parked      #{}  {}:{}  {}  {}  at {}",
                parked.id,
                parked.kafka_partition,
                parked.kafka_offset,
                parked.reason,
                parked.error,
                parked.parked_at.to_rfc3339()
            ));
        }
        if let Some(record) = &self.record {
            out.push(format!(
                "record      {}  (the partition's log: start {}, end {})",
                record.state.name(),
                show(record.log_start),
                show(record.log_end)
            ));
        }
        if let Some(position) = self.position {
            out.push(format!(
                "position    {position} (the next offset this consumer reads)"
            ));
        }
        out.push(String::new());
        out.join("\n")
    }
}

/// Parses `PARTITION:OFFSET`.
pub fn parse_record(text: &str) -> Result<(i32, i64), String> {
    let parsed = text
        .split_once(':')
        .and_then(|(p, o)| Some((p.parse::<i32>().ok()?, o.parse::<i64>().ok()?)));
    match parsed {
        Some((partition, offset)) if partition >= 0 && offset >= 0 => Ok((partition, offset)),
        _ => Err("expected PARTITION:OFFSET, both numbers >= 0 (e.g. 4:18233)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(1_796_000_000 + i64::from(second), 0).unwrap()
    }

    fn entry(id: Uuid, offset: i64, status: &str, named: Option<&[&str]>) -> LedgerEntry {
        LedgerEntry {
            message_id: id,
            event_day: at(0).date_naive(),
            topic: "orders".into(),
            kafka_partition: 0,
            kafka_offset: offset,
            status: status.into(),
            order_id: "ORD-1".into(),
            processed_at: at(offset as u32),
            named: named.map(|skus| {
                skus.iter()
                    .map(|sku| NamedLine {
                        sku: (*sku).into(),
                        quantity: 1,
                    })
                    .collect()
            }),
            named_unknown: named
                .is_none()
                .then(|| "its record 0:1 is no longer in the topic".into()),
        }
    }

    fn line(sku: &str, status: &str, by: Uuid, second: u32) -> Line {
        Line {
            order_id: "ORD-1".into(),
            sku: sku.into(),
            quantity: 1,
            status: status.into(),
            message_id: by,
            reserved_day: at(0).date_naive(),
            created_at: at(second),
        }
    }

    fn found(ledger: Vec<LedgerEntry>, lines: Vec<Line>, record: Option<InTopic>) -> Inspection {
        Inspection {
            verdict: String::new(),
            ignored: ignored_lines(&ledger, &lines),
            ledger,
            lines,
            parked: vec![],
            position: Some(2),
            record,
        }
    }

    #[test]
    fn a_named_line_another_event_wrote_is_ignored_and_one_it_wrote_is_not() {
        let (first, second) = (Uuid::new_v4(), Uuid::new_v4());
        let lines = [
            line("SKU-1", "reserved", first, 0),
            line("SKU-3", "reserved", second, 1),
        ];
        let ledger = [entry(
            second,
            1,
            "processed",
            Some(&["SKU-1", "SKU-3", "SKU-9"]),
        )];
        let ignored = ignored_lines(&ledger, &lines);
        let said: Vec<(&str, Option<Uuid>)> =
            ignored.iter().map(|i| (i.sku.as_str(), i.by)).collect();
        // SKU-9's line is no longer kept: said so, never pinned on anyone.
        assert_eq!(said, [("SKU-1", Some(first)), ("SKU-9", None)]);
    }

    #[test]
    fn a_business_duplicate_whose_lines_cannot_be_read_claims_none_of_them() {
        let (first, again) = (Uuid::new_v4(), Uuid::new_v4());
        let found = found(
            vec![entry(again, 1, "business_duplicate", None)],
            vec![line("SKU-2", "rejected", first, 0)],
            None,
        );
        let said = verdict(&Subject::Event(again), "orders", None, &found);
        assert!(
            said.contains("business duplicate, reserved nothing")
                && said.contains("which lines it named cannot be told")
                && !said.contains("reserved before"),
            "{said}"
        );
    }

    #[test]
    fn an_offset_past_the_end_is_not_called_unread() {
        let record = InTopic {
            state: RecordState::PastEnd,
            log_start: Some(0),
            log_end: Some(2),
        };
        let found = found(vec![], vec![], Some(record));
        let subject = Subject::Record {
            partition: 0,
            offset: 7,
        };
        assert_eq!(
            verdict(&subject, "orders", None, &found),
            "record 0:7: not in the topic yet: partition 0 ends at 2 (the next record produced \
             there gets offset 2); the position is 2"
        );
    }

    #[test]
    fn a_record_position_is_two_numbers() {
        assert_eq!(parse_record("4:18233"), Ok((4, 18233)));
        assert!(parse_record("4").is_err());
        assert!(parse_record("-1:3").is_err());
        assert!(parse_record("a:b").is_err());
    }
}
