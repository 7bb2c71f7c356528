//! What is generated: the messages a producer wrote (valid, rewritten,
//! reused or broken), each partition's log of them, and the polls that make
//! the batches a consumer applies, with its cursors moved back for
//! redeliveries.

use std::collections::HashMap;

use chrono::{NaiveDate, NaiveTime};
use inventory_inbox::batch::InboundRecord;
use inventory_inbox::event::{Header, OrderLine, OrderPlaced};
use proptest::prelude::*;
use proptest::sample::Index;
use uuid::Uuid;

use super::{COMMON_IDS, CONSUMERS, IDS, KNOWN_SKUS, MAX_BATCH, ORDERS, PARTITIONS, SKUS, TOPIC};
use inbox_model::Record;

/// One event as a producer meant it, before it is made bytes.
#[derive(Debug, Clone)]
pub struct Message {
    pub id: u8,
    pub order: u8,
    /// (SKU index, quantity); a SKU named twice counts once unless the
    /// form says otherwise.
    pub lines: Vec<(u8, i32)>,
    /// Days from the database's today.
    pub day: i8,
    pub form: Form,
    /// Headers no event needs: bytes that are no UTF-8, and UTF-8 holding
    /// a NUL, in a value; a NUL in a key; a header without a value.
    pub odd_headers: bool,
}

/// How the message is written (or broken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Plain,
    /// Other spacing and escapes: the same event as parsed.
    Rewritten,
    /// A structured-mode CloudEvent whose `data` is the plain event.
    Structured,
    /// No `event_id`; the id in a `ce_id` header.
    CeIdHeader,
    /// No `occurred_at`; the time in a `ce_time` header.
    CeTimeHeader,
    /// A `ce_id` header naming another id than `event_id`.
    CeIdMismatch,
    NotJson,
    NoPayload,
    NoEventId,
    BadEventId,
    NoEventTime,
    WrongType,
    SchemaVersion2,
    ZeroQuantity,
    SkuTwice,
    NoLines,
    BadOrderId,
    /// Over the 64 KiB limit.
    TooLarge,
}

/// A record produced to a partition: a new message, or one made from an
/// earlier message.
#[derive(Debug, Clone)]
pub enum Entry {
    New(Message),
    Again { of: Index, how: Again },
}

#[derive(Debug, Clone, Copy)]
pub enum Again {
    /// A producer retry: the same bytes.
    Same,
    /// The same event written out again (or in the other content mode).
    Rewritten,
    /// The id reused for another quantity: a conflict.
    OtherQuantity,
    /// The id reused for an event on another day.
    OtherDay(i8),
    /// The same order under another id: a business duplicate.
    OtherId(u8),
}

/// One poll of a consumer: a prefix of each named partition from its
/// cursor, after moving the cursor back `rewind` records (a redelivery).
#[derive(Debug, Clone)]
pub struct Poll {
    pub consumer: u8,
    /// A new member takes over (a new `Inbox`, nothing remembered).
    pub restart: bool,
    /// Its partitions are applied concurrently, a batch each (lanes).
    pub lanes: bool,
    /// Maintenance builds the filters of the closed days before it
    /// (docs/design.md#the-filter-of-closed-days): the batches after it look
    /// those days up through them.
    pub filters: bool,
    pub segments: Vec<Segment>,
}

#[derive(Debug, Clone)]
pub struct Segment {
    pub partition: u8,
    pub rewind: u8,
    pub take: u8,
}

#[derive(Debug, Clone)]
pub struct Case {
    /// `on_hand` of the known SKUs.
    pub on_hand: [i64; KNOWN_SKUS],
    pub produced: Vec<(u8, Entry)>,
    pub polls: Vec<Poll>,
}

pub fn form() -> impl Strategy<Value = Form> {
    use Form::*;
    prop_oneof![
        40 => Just(Plain),
        6 => Just(Rewritten),
        4 => Just(Structured),
        3 => Just(CeIdHeader),
        2 => Just(CeTimeHeader),
        1 => Just(CeIdMismatch),
        1 => Just(NotJson),
        1 => Just(NoPayload),
        1 => Just(NoEventId),
        1 => Just(BadEventId),
        1 => Just(NoEventTime),
        1 => Just(WrongType),
        1 => Just(SchemaVersion2),
        1 => Just(ZeroQuantity),
        1 => Just(SkuTwice),
        1 => Just(NoLines),
        1 => Just(BadOrderId),
        1 => Just(TooLarge),
    ]
}

/// Mostly today, often elsewhere in the window, sometimes past its edges.
pub fn day() -> impl Strategy<Value = i8> {
    prop_oneof![8 => Just(0i8), 4 => -3i8..=2, 1 => -5i8..=-4, 1 => 3i8..=4]
}

pub fn message() -> impl Strategy<Value = Message> {
    let sku = prop_oneof![12 => 0..KNOWN_SKUS as u8, 1 => Just(KNOWN_SKUS as u8)];
    let order = prop_oneof![16 => 0..4u8, 1 => Just(4u8)];
    let id = prop_oneof![1 => 0..COMMON_IDS, 2 => COMMON_IDS..IDS];
    (
        id,
        order,
        prop::collection::vec((sku, 1..=4i32), 1..=3),
        day(),
        form(),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(id, order, lines, day, form, odd_headers)| Message {
            id,
            order,
            lines,
            day,
            form,
            odd_headers,
        })
}

pub fn entry() -> impl Strategy<Value = Entry> {
    let how = prop_oneof![
        4 => Just(Again::Same),
        2 => Just(Again::Rewritten),
        2 => Just(Again::OtherQuantity),
        1 => day().prop_map(Again::OtherDay),
        2 => (0..IDS).prop_map(Again::OtherId),
    ];
    prop_oneof![
        3 => message().prop_map(Entry::New),
        2 => (any::<Index>(), how).prop_map(|(of, how)| Entry::Again { of, how }),
    ]
}

pub fn poll() -> impl Strategy<Value = Poll> {
    let segment = (
        0..PARTITIONS,
        prop_oneof![4 => Just(0u8), 1 => 1..=20u8],
        1..=40u8,
    )
        .prop_map(|(partition, rewind, take)| Segment {
            partition,
            rewind,
            take,
        });
    (
        prop_oneof![6 => Just(0u8), 1 => Just(1u8)],
        prop::bool::weighted(0.1),
        prop::bool::weighted(0.4),
        prop::bool::weighted(0.15),
        prop::collection::vec(segment, 1..=3),
    )
        .prop_map(|(consumer, restart, lanes, filters, segments)| Poll {
            consumer,
            restart,
            lanes,
            filters,
            segments,
        })
}

pub fn case() -> impl Strategy<Value = Case> {
    (
        [0..=12i64, 0..=12i64, 0..=12i64],
        prop::collection::vec((0..PARTITIONS, entry()), 1..=120),
        prop::collection::vec(poll(), 1..=10),
    )
        .prop_map(|(on_hand, produced, polls)| Case {
            on_hand,
            produced,
            polls,
        })
}

// ---------------------------------------------------------------------------
// From what was generated to records and batches.

pub fn message_id(id: u8) -> Uuid {
    Uuid::from_u128(0x6f1c2f8e_3c0b_4f5e_9a59_1d2f0e3b0000 + u128::from(id))
}

/// The messages of `produced`, each `Again` made from the earlier message it
/// names (one naming nothing, at the start, is dropped), with the partition
/// each went to.
pub fn messages(produced: &[(u8, Entry)]) -> Vec<(u8, Message)> {
    let mut made: Vec<(u8, Message)> = Vec::new();
    for (partition, entry) in produced {
        let message = match entry {
            Entry::New(message) => message.clone(),
            Entry::Again { .. } if made.is_empty() => continue,
            Entry::Again { of, how } => {
                let mut message = made[of.index(made.len())].1.clone();
                match how {
                    Again::Same => {}
                    Again::Rewritten => {
                        message.form = match message.form {
                            Form::Plain => Form::Rewritten,
                            Form::Rewritten => Form::Structured,
                            _ => Form::Plain,
                        }
                    }
                    Again::OtherQuantity => {
                        if let Some(line) = message.lines.first_mut() {
                            line.1 = line.1 % 4 + 1;
                        }
                    }
                    Again::OtherDay(day) => message.day = *day,
                    Again::OtherId(id) => message.id = *id,
                }
                message
            }
        };
        made.push((*partition, message));
    }
    made
}

/// The payload and headers a producer sends for `message`.
pub fn written(message: &Message, today: NaiveDate) -> (Option<Vec<u8>>, Vec<Header>) {
    let mut lines: Vec<OrderLine> = Vec::new();
    for (sku, quantity) in &message.lines {
        let sku = SKUS[usize::from(*sku)].to_string();
        if !lines.iter().any(|line| line.sku == sku) {
            lines.push(OrderLine {
                sku,
                quantity: *quantity,
            });
        }
    }
    let day = today
        .checked_add_signed(chrono::Duration::days(i64::from(message.day)))
        .expect("a day");
    let event = OrderPlaced {
        message_id: message_id(message.id),
        order_id: ORDERS[usize::from(message.order)].into(),
        occurred_at: day
            .and_time(NaiveTime::from_hms_milli_opt(12, 0, 0, 123).expect("a time"))
            .and_utc(),
        lines,
    };
    let plain = event.to_json();
    let mut value: serde_json::Value = serde_json::from_slice(&plain).expect("the event's JSON");
    let header = |key: &str, value: String| Header {
        key: key.into(),
        value: Some(value.into_bytes()),
    };
    let time = value["occurred_at"].clone();
    let mut headers = Vec::new();
    if message.odd_headers {
        // Bytes that are no UTF-8; UTF-8 holding NUL (which no text column
        // takes), in a value and in a key.
        headers.push(Header {
            key: "x-odd".into(),
            value: Some(b"a\0b\xff".to_vec()),
        });
        headers.push(Header {
            key: "x-nul".into(),
            value: Some(b"a\0b".to_vec()),
        });
        headers.push(Header {
            key: "x-\0key".into(),
            value: Some(b"v".to_vec()),
        });
        headers.push(Header {
            key: "x-none".into(),
            value: None,
        });
    }
    match message.form {
        Form::Plain => return (Some(plain), headers),
        Form::Rewritten => {
            let text = serde_json::to_string_pretty(&value).expect("JSON");
            let text = text
                .replace("\"O-", "\"O\\u002d")
                .replace("\"S-", "\"S\\u002d");
            return (Some(text.into_bytes()), headers);
        }
        Form::Structured => {
            let envelope = serde_json::json!({
                "specversion": "1.0", "id": event.message_id.to_string(),
                "type": "OrderPlaced", "source": "/model", "time": time, "data": value,
            });
            headers.push(header(
                "content-type",
                "application/cloudevents+json".into(),
            ));
            return (Some(envelope.to_string().into_bytes()), headers);
        }
        Form::NotJson => return (Some(plain[..plain.len() / 2].to_vec()), headers),
        Form::NoPayload => return (None, headers),
        Form::CeIdHeader => {
            value.as_object_mut().expect("object").remove("event_id");
            headers.push(header("ce_id", event.message_id.to_string()));
        }
        Form::CeTimeHeader => {
            value.as_object_mut().expect("object").remove("occurred_at");
            headers.push(header("ce_time", time.as_str().expect("text").into()));
        }
        Form::CeIdMismatch => {
            headers.push(header("ce_id", message_id(message.id + 100).to_string()));
        }
        Form::NoEventId => {
            value.as_object_mut().expect("object").remove("event_id");
        }
        Form::BadEventId => value["event_id"] = "not-a-uuid".into(),
        Form::NoEventTime => {
            value.as_object_mut().expect("object").remove("occurred_at");
        }
        Form::WrongType => value["event_type"] = "OrderCancelled".into(),
        Form::SchemaVersion2 => value["schema_version"] = 2.into(),
        Form::ZeroQuantity => value["lines"][0]["quantity"] = 0.into(),
        Form::SkuTwice => {
            let first = value["lines"][0].clone();
            value["lines"].as_array_mut().expect("lines").push(first);
        }
        Form::NoLines => value["lines"] = serde_json::json!([]),
        Form::BadOrderId => value["order_id"] = "O 0".into(),
        Form::TooLarge => value["padding"] = "x".repeat(64 * 1024).into(),
    }
    (Some(value.to_string().into_bytes()), headers)
}

/// Each partition's log: its records in offset order.
pub fn logs(case: &Case, today: NaiveDate) -> Vec<Vec<Record>> {
    let mut logs: Vec<Vec<Record>> = vec![Vec::new(); usize::from(PARTITIONS)];
    for (partition, message) in messages(&case.produced) {
        let log = &mut logs[usize::from(partition)];
        let (payload, headers) = written(&message, today);
        log.push(Record {
            topic: TOPIC.into(),
            partition: i32::from(partition),
            offset: log.len() as i64,
            payload,
            headers,
        });
    }
    logs
}

/// A batch as the consumer applies it.
#[derive(Debug)]
pub struct Batch {
    pub consumer: &'static str,
    pub restart: bool,
    pub lanes: bool,
    pub filters: bool,
    pub records: Vec<Record>,
}

/// The polls made batches: each consumer keeps a cursor per partition; a
/// partition appears once in a batch; at most `MAX_BATCH` records; a poll
/// that finds nothing is no batch.
pub fn batches(case: &Case, logs: &[Vec<Record>]) -> Vec<Batch> {
    let mut cursors: HashMap<(u8, u8), usize> = HashMap::new();
    let mut batches = Vec::new();
    for poll in &case.polls {
        let mut records: Vec<Record> = Vec::new();
        let mut polled: Vec<u8> = Vec::new();
        for segment in &poll.segments {
            if polled.contains(&segment.partition) {
                continue;
            }
            polled.push(segment.partition);
            let log = &logs[usize::from(segment.partition)];
            let cursor = cursors
                .entry((poll.consumer, segment.partition))
                .or_default();
            *cursor -= (*cursor).min(usize::from(segment.rewind));
            let room = MAX_BATCH - records.len();
            let end = log.len().min(*cursor + usize::from(segment.take).min(room));
            records.extend_from_slice(&log[*cursor..end]);
            *cursor = (*cursor).max(end);
        }
        if !records.is_empty() {
            batches.push(Batch {
                consumer: CONSUMERS[usize::from(poll.consumer)],
                restart: poll.restart,
                lanes: poll.lanes,
                filters: poll.filters,
                records,
            });
        }
    }
    batches
}

pub fn inbound(record: &Record) -> InboundRecord {
    InboundRecord {
        topic: record.topic.clone(),
        partition: record.partition,
        offset: record.offset,
        timestamp: None,
        key: None,
        payload: record.payload.clone(),
        headers: record.headers.clone(),
    }
}
