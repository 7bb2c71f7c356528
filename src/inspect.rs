//! `inventory-inbox inspect`: what the database holds of one event, one
//! order or one record, with the verdict in one line ("was this order
//! applied, and how often?", docs/runbook.md). Every lookup is served by an
//! index: the ledger's key leads with the message id, the reservations are
//! indexed by order id, parked rows by message id and by position.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, NaiveDate, Utc};
use serde::Serialize;
use sqlx::FromRow;
use uuid::Uuid;

const LEDGER: &str = include_str!("../sql/inspect_ledger.sql");
const LINES: &str = include_str!("../sql/inspect_lines.sql");
const PARKED: &str = include_str!("../sql/inspect_parked.sql");
const POSITION: &str = include_str!("../sql/inspect_position.sql");

/// What is asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    Event(Uuid),
    Order(String),
    /// A record of the topic; `message_id` is the id read from it, when the
    /// topic still holds it and it has a valid one.
    Record {
        partition: i32,
        offset: i64,
        message_id: Option<Uuid>,
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
    /// `processed`, or `business_duplicate` (its order lines were reserved
    /// by an earlier event: it reserved nothing).
    pub status: String,
    pub order_id: String,
    pub processed_at: DateTime<Utc>,
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
}

/// Everything found, and what it means.
#[derive(Debug, Clone, Serialize)]
pub struct Inspection {
    pub verdict: String,
    pub ledger: Vec<LedgerEntry>,
    pub lines: Vec<Line>,
    pub parked: Vec<Parked>,
    /// For a record: the consumer's position in its partition (the next
    /// offset it reads).
    pub position: Option<i64>,
}

/// Looks `subject` up in the database of `consumer` (the ledger's name),
/// whose records come from `topic`.
pub async fn inspect(
    pool: &crate::store::DbPool,
    consumer: &str,
    topic: &str,
    subject: &Subject,
) -> Result<Inspection, sqlx::Error> {
    // An order's lines come first: they name the events that made them.
    let order_lines = match subject {
        Subject::Order(order) => Some(lines(pool, std::slice::from_ref(order), None).await?),
        _ => None,
    };
    let ids: Vec<Uuid> = match (subject, &order_lines) {
        (Subject::Event(id), _) => vec![*id],
        (Subject::Record { message_id, .. }, _) => message_id.iter().copied().collect(),
        // The events of an order that reserved its lines; those that
        // reserved nothing (business duplicates) are not indexed by order
        // and are not listed.
        (Subject::Order(_), lines) => {
            let ids: BTreeSet<Uuid> = lines.iter().flatten().map(|l| l.message_id).collect();
            ids.into_iter().collect()
        }
    };
    let ledger: Vec<LedgerEntry> = sqlx::query_as(LEDGER)
        .bind(consumer)
        .bind(&ids)
        .fetch_all(pool)
        .await?;
    let lines = match order_lines {
        Some(lines) => lines,
        None => {
            let orders: BTreeSet<String> = ledger.iter().map(|e| e.order_id.clone()).collect();
            let orders: Vec<String> = orders.into_iter().collect();
            lines(pool, &orders, Some(&ids)).await?
        }
    };
    let (partition, offset) = match subject {
        Subject::Record {
            partition, offset, ..
        } => (Some(*partition), Some(*offset)),
        _ => (None, None),
    };
    let parked: Vec<Parked> = sqlx::query_as(PARKED)
        .bind(consumer)
        .bind(&ids)
        .bind(topic)
        .bind(partition)
        .bind(offset)
        .fetch_all(pool)
        .await?;
    let position: Option<i64> = match partition {
        Some(partition) => {
            sqlx::query_scalar(POSITION)
                .bind(consumer)
                .bind(topic)
                .bind(partition)
                .fetch_optional(pool)
                .await?
        }
        None => None,
    };
    let verdict = verdict(subject, topic, &ledger, &lines, &parked, position);
    Ok(Inspection {
        verdict,
        ledger,
        lines,
        parked,
        position,
    })
}

async fn lines(
    pool: &crate::store::DbPool,
    orders: &[String],
    events: Option<&[Uuid]>,
) -> Result<Vec<Line>, sqlx::Error> {
    sqlx::query_as(LINES)
        .bind(orders)
        .bind(events)
        .fetch_all(pool)
        .await
}

/// The verdict in one line. Pure.
pub fn verdict(
    subject: &Subject,
    topic: &str,
    ledger: &[LedgerEntry],
    lines: &[Line],
    parked: &[Parked],
    position: Option<i64>,
) -> String {
    match subject {
        Subject::Event(id) => event_verdict(&format!("event {id}"), ledger, lines, parked),
        Subject::Order(order) => order_verdict(order, ledger, lines),
        Subject::Record {
            partition,
            offset,
            message_id,
        } => {
            let at = format!("record {partition}:{offset}");
            if let Some(p) = parked.iter().find(|p| {
                (p.topic.as_str(), p.kafka_partition, p.kafka_offset)
                    == (topic, *partition, *offset)
            }) {
                return format!(
                    "{at}: parked as {} at {}{}",
                    p.reason,
                    p.parked_at.to_rfc3339(),
                    replayed(p)
                );
            }
            let read = position.is_some_and(|next| next > *offset);
            let Some(id) = message_id else {
                return if read {
                    format!(
                        "{at}: read (the position is {}), no row of it found",
                        show(position)
                    )
                } else {
                    format!("{at}: not read yet (the position is {})", show(position))
                };
            };
            match ledger.iter().find(|e| e.message_id == *id) {
                Some(entry)
                    if (entry.topic.as_str(), entry.kafka_partition, entry.kafka_offset)
                        == (topic, *partition, *offset) =>
                {
                    event_verdict(&format!("{at} (event {id})"), ledger, lines, parked)
                }
                Some(entry) => format!(
                    "{at}: a redelivery of event {id}, applied at {} from {}:{}; it did nothing",
                    entry.processed_at.to_rfc3339(),
                    entry.kafka_partition,
                    entry.kafka_offset
                ),
                None if read => format!(
                    "{at} (event {id}): read (the position is {}), but event {id} is not in the ledger",
                    show(position)
                ),
                None => format!("{at} (event {id}): not read yet (the position is {})", show(position)),
            }
        }
    }
}

fn event_verdict(what: &str, ledger: &[LedgerEntry], lines: &[Line], parked: &[Parked]) -> String {
    match ledger {
        [] => match parked.first() {
            Some(p) => format!(
                "{what}: not applied; parked as {} at {}:{} on {}{}",
                p.reason,
                p.kafka_partition,
                p.kafka_offset,
                p.parked_at.to_rfc3339(),
                replayed(p)
            ),
            None => format!(
                "{what}: not in the ledger (never read by this consumer, or older than the window)"
            ),
        },
        [entry] => {
            let mine: Vec<&Line> = lines
                .iter()
                .filter(|l| l.message_id == entry.message_id)
                .collect();
            let effect = if entry.status == "business_duplicate" {
                "a business duplicate: its order lines were reserved before, it reserved nothing"
                    .to_owned()
            } else {
                count_lines(&mine)
            };
            format!(
                "{what}: applied once at {} from {}:{}; {effect}",
                entry.processed_at.to_rfc3339(),
                entry.kafka_partition,
                entry.kafka_offset
            )
        }
        many => format!(
            "{what}: APPLIED {} TIMES (on days {})",
            many.len(),
            many.iter()
                .map(|e| e.event_day.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn order_verdict(order: &str, ledger: &[LedgerEntry], lines: &[Line]) -> String {
    if lines.is_empty() {
        return format!(
            "order {order}: no line reserved or rejected within the reservations kept (never applied, or older)"
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
        .map(|id| match ledger.iter().find(|e| e.message_id == *id) {
            Some(e) => format!(
                "event {id} at {} from {}:{}",
                e.processed_at.to_rfc3339(),
                e.kafka_partition,
                e.kafka_offset
            ),
            None => format!("event {id} (its ledger row is past the window)"),
        })
        .collect();
    let all: Vec<&Line> = lines.iter().collect();
    if twice.is_empty() {
        format!(
            "order {order}: each line once ({}), by {}",
            count_lines(&all),
            from.join("; ")
        )
    } else {
        format!(
            "order {order}: SKU {} TAKEN MORE THAN ONCE ({}), by {}",
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

fn replayed(parked: &Parked) -> String {
    match (&parked.replayed_at, &parked.replay_outcome) {
        (Some(at), Some(outcome)) => format!("; replayed at {}: {outcome}", at.to_rfc3339()),
        (Some(at), None) => format!("; replayed at {}", at.to_rfc3339()),
        _ => String::new(),
    }
}

fn show(position: Option<i64>) -> String {
    position.map_or_else(|| "none".to_owned(), |p| p.to_string())
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

    #[test]
    fn a_record_position_is_two_numbers() {
        assert_eq!(parse_record("4:18233"), Ok((4, 18233)));
        assert!(parse_record("4").is_err());
        assert!(parse_record("-1:3").is_err());
        assert!(parse_record("a:b").is_err());
    }
}
