//! The `OrderPlaced` event: decoding and validation, pure and without I/O.
//!
//! `decode` turns the raw bytes and headers of a Kafka record into either a
//! valid [`OrderPlaced`] with its ledger fingerprint ([`Decoded`]) or a
//! [`Rejection`] carrying one of the parking reasons of
//! docs/design.md#outcomes. A record is the event itself (plain, or
//! CloudEvents binary mode with `ce_*` headers) or a CloudEvents
//! structured-mode envelope with the event as its `data`; `content_mode`
//! tells them apart (docs/design.md#cloudevents-binary-and-structured-mode).
//!
//! One JSON is read one way: the payload is parsed once (`json`, which sees
//! every member and every number as written), and that one parse gives both
//! the event and its fingerprint, under one meaning of "the same event"
//! ([`Decoded::fingerprint`]). A repeated key anywhere is refused. A
//! rejection carries the record's id whenever it can be read. It never
//! panics, whatever the bytes (property-tested and fuzzed). The same types
//! encode events for the load generator and the tests, so there is exactly
//! one definition of the schema.

mod json;

use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use uuid::Uuid;

use json::{Object, Value};

/// Largest accepted payload (docs/design.md#the-event).
pub const MAX_PAYLOAD_BYTES: usize = 64 * 1024;
/// Largest payload whose id is still read when it is too large to apply
/// (Kafka's default largest record): its parked row can then be found by
/// id. Beyond it only a `ce_id` header names the record.
pub const MAX_ID_READ_BYTES: usize = 1024 * 1024;
/// Most lines one order may carry.
pub const MAX_LINES: usize = 100;
/// Largest quantity of one line.
pub const MAX_QUANTITY: i32 = 10_000;
/// Longest `order_id` or `sku`.
pub const MAX_IDENTIFIER_CHARS: usize = 128;
/// The only event type this consumer accepts.
pub const EVENT_TYPE: &str = "OrderPlaced";
/// The only schema version this consumer accepts.
pub const SCHEMA_VERSION: u64 = 1;
/// CloudEvents Kafka binding header carrying the event id.
pub const HEADER_CE_ID: &str = "ce_id";
/// CloudEvents Kafka binding header carrying the event time.
pub const HEADER_CE_TIME: &str = "ce_time";
/// CloudEvents Kafka binding header carrying the event type.
pub const HEADER_CE_TYPE: &str = "ce_type";
/// Prefix of every CloudEvents attribute header in binary mode.
pub const HEADER_CE_PREFIX: &str = "ce_";
/// Kafka header carrying the media type of the record's value.
pub const HEADER_CONTENT_TYPE: &str = "content-type";
/// A `content-type` beginning with this marks a structured-mode record.
pub const CLOUDEVENTS_MEDIA_TYPE_PREFIX: &str = "application/cloudevents";
/// The only CloudEvents version this consumer reads.
pub const CLOUDEVENTS_SPEC_VERSION: &str = "1.0";
/// The envelope member that names the CloudEvents version.
const ENVELOPE_SPECVERSION: &str = "specversion";

/// One Kafka record header, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

/// A valid `OrderPlaced` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderPlaced {
    /// The dedup identity: the CloudEvents id (the `ce_id` header, or the
    /// envelope's `id` in structured mode), else the event's `event_id`.
    pub message_id: Uuid,
    /// The order, also the record key and the reservation's business key.
    pub order_id: String,
    /// When the order was placed; its UTC date is the event's `event_day`.
    pub occurred_at: DateTime<Utc>,
    /// Distinct SKUs, each with a quantity in 1..=10,000.
    pub lines: Vec<OrderLine>,
}

/// One line of an order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLine {
    pub sku: String,
    pub quantity: i32,
}

impl OrderPlaced {
    /// The partition key of the ledger: the UTC date of the event time.
    pub fn event_day(&self) -> NaiveDate {
        self.occurred_at.date_naive()
    }

    /// The canonical JSON payload of this event (docs/design.md#the-event), with `event_id`
    /// equal to the message id. The event time keeps its full precision, so
    /// decoding the payload gives this event back exactly.
    pub fn to_json(&self) -> Vec<u8> {
        let lines: Vec<serde_json::Value> = self
            .lines
            .iter()
            .map(|line| serde_json::json!({"sku": line.sku, "quantity": line.quantity}))
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "event_id": self.message_id.to_string(),
            "event_type": EVENT_TYPE,
            "schema_version": SCHEMA_VERSION,
            "order_id": self.order_id,
            "occurred_at": event_time_text(self.occurred_at),
            "lines": lines,
        }))
        .expect("a JSON value always serialises")
    }
}

/// An event time as `to_json` writes it, and as the fingerprint reads any
/// spelling of the same instant: UTC, `Z`, as many fraction digits as it
/// needs (0, 3, 6 or 9).
fn event_time_text(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// A record that decoded as an event, and its fingerprint, both from one
/// parse of its payload. It reads as its event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub event: OrderPlaced,
    /// What the ledger keeps of the event, so that a redelivery is told
    /// from another event under the same id (`processed_inbox.payload_hash`,
    /// docs/design.md#outcomes): a 64-bit FNV-1a hash of the event's JSON in
    /// a canonical form, the same however a producer writes the same event
    /// out, different when a value differs. The canonical form:
    ///
    /// - the event's JSON is the record's value in binary mode, the
    ///   envelope's `data` in structured mode; the CloudEvents attributes
    ///   around it (`ce_*` headers, `id`, `time`, `source`, …) are not in
    ///   it, so the same CloudEvent sent in either mode is the same event;
    /// - an object is its members sorted by key (no key twice: a repeated
    ///   key is refused before); an array its items in order; a string its
    ///   text, escapes read;
    /// - a number is its exact decimal value, as the decoder reads it:
    ///   `2`, `2.0`, `2e0` and `0.2e1` are one number (the integer the
    ///   decoder accepts as a quantity), `2e18` is `2000000000000000000`,
    ///   `9007199254740993.0` is not `9007199254740992`; `"2"` is a string;
    /// - `occurred_at` is the instant it names, as the decoder reads it:
    ///   `…T12:00:00Z`, `…T12:00:00.000+00:00` and `…T13:00:00+01:00` are
    ///   one time (its text in the hash is that instant as `to_json`
    ///   writes it); any other string is its text;
    /// - `event_id`, when it is a UUID, is that UUID, however spelled
    ///   (capitals, braces), as the decoder compares it.
    ///
    /// So the fingerprint of an event written as `to_json` writes it
    /// (integers, strings, its time) is what it was before numbers and times
    /// were read this way, and ledger rows written then still know their
    /// redeliveries; one spelled otherwise may have a new one
    /// (docs/design.md#the-batch-transaction).
    pub fingerprint: i64,
}

impl Deref for Decoded {
    type Target = OrderPlaced;

    fn deref(&self) -> &OrderPlaced {
        &self.event
    }
}

/// Why a record was parked instead of applied (docs/design.md#outcomes). The string forms are
/// the reason codes stored in `inbox_parked.reason` and used as metric labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ParkReason {
    MalformedJson,
    MissingEventId,
    InvalidEventId,
    EventIdMismatch,
    MissingEventTime,
    UnsupportedEventType,
    UnsupportedSchemaVersion,
    InvalidField,
    PayloadTooLarge,
    UnknownSku,
    OutsideDedupWindow,
    EventTimeInFuture,
    EventIdConflict,
    DbRejected,
}

impl ParkReason {
    /// Every reason, in the order of docs/design.md#outcomes.
    pub const ALL: [ParkReason; 14] = [
        ParkReason::MalformedJson,
        ParkReason::MissingEventId,
        ParkReason::InvalidEventId,
        ParkReason::EventIdMismatch,
        ParkReason::MissingEventTime,
        ParkReason::UnsupportedEventType,
        ParkReason::UnsupportedSchemaVersion,
        ParkReason::InvalidField,
        ParkReason::PayloadTooLarge,
        ParkReason::UnknownSku,
        ParkReason::OutsideDedupWindow,
        ParkReason::EventTimeInFuture,
        ParkReason::EventIdConflict,
        ParkReason::DbRejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ParkReason::MalformedJson => "malformed_json",
            ParkReason::MissingEventId => "missing_event_id",
            ParkReason::InvalidEventId => "invalid_event_id",
            ParkReason::EventIdMismatch => "event_id_mismatch",
            ParkReason::MissingEventTime => "missing_event_time",
            ParkReason::UnsupportedEventType => "unsupported_event_type",
            ParkReason::UnsupportedSchemaVersion => "unsupported_schema_version",
            ParkReason::InvalidField => "invalid_field",
            ParkReason::PayloadTooLarge => "payload_too_large",
            ParkReason::UnknownSku => "unknown_sku",
            ParkReason::OutsideDedupWindow => "outside_dedup_window",
            ParkReason::EventTimeInFuture => "event_time_in_future",
            ParkReason::EventIdConflict => "event_id_conflict",
            ParkReason::DbRejected => "db_rejected",
        }
    }

    /// The reason for a code as stored in the database.
    pub fn from_code(code: &str) -> Option<ParkReason> {
        ParkReason::ALL.into_iter().find(|r| r.as_str() == code)
    }
}

impl fmt::Display for ParkReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A record that cannot be applied: the reason code, a human explanation, and
/// the message id when one could be read (parked rows keep it for search).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    pub reason: ParkReason,
    pub detail: String,
    pub message_id: Option<Uuid>,
}

impl Rejection {
    fn new(reason: ParkReason, detail: impl Into<String>) -> Self {
        Rejection {
            reason,
            detail: detail.into(),
            message_id: None,
        }
    }

    /// This rejection naming `id` when it names none yet.
    fn naming(self, id: Option<Uuid>) -> Self {
        Rejection {
            message_id: self.message_id.or(id),
            ..self
        }
    }
}

/// Decodes and validates one record, and fingerprints its event, from one
/// parse. Pure: the same input always gives the same answer, and no input
/// makes it panic. A rejection names the record's id whenever one can be
/// read by the rules that name a valid event's: the reason is still the
/// first thing wrong.
pub fn decode(payload: Option<&[u8]>, headers: &[Header]) -> Result<Decoded, Rejection> {
    let payload = payload.unwrap_or_default();
    if payload.len() <= MAX_PAYLOAD_BYTES {
        return read(payload, headers);
    }
    // Too large to apply; read while that is cheap only to name it.
    let message_id = if payload.len() <= MAX_ID_READ_BYTES {
        match read(payload, headers) {
            Ok(decoded) => Some(decoded.event.message_id),
            Err(rejection) => rejection.message_id,
        }
    } else {
        id_in_headers(headers)
    };
    Err(Rejection {
        reason: ParkReason::PayloadTooLarge,
        detail: format!(
            "payload is {} bytes, limit {MAX_PAYLOAD_BYTES}",
            payload.len()
        ),
        message_id,
    })
}

/// `decode` of a payload of any size.
fn read(payload: &[u8], headers: &[Header]) -> Result<Decoded, Rejection> {
    let not_json = |detail: String| {
        Rejection::new(ParkReason::MalformedJson, detail).naming(id_in_headers(headers))
    };
    if payload.is_empty() {
        return Err(not_json("empty payload".into()));
    }
    let parsed = json::parse(payload).map_err(|e| not_json(e.to_string()))?;
    let Some(document) = parsed.value.as_object() else {
        return Err(not_json("payload is not a JSON object".into()));
    };
    let mode = content_mode(headers, Some(document));
    let (event, attributes) = match mode {
        ContentMode::Binary => (Some(document), header_attributes(headers)),
        ContentMode::Structured => (
            document.get("data").and_then(Value::as_object),
            envelope_attributes(document),
        ),
    };
    // The identity is read first, so that every rejection can name it.
    let identity = message_id(event.and_then(|e| e.get("event_id")), &attributes.id);
    let id = match &identity {
        Ok(id) => Some(*id),
        Err(rejection) => rejection.message_id,
    };
    let repeats = parsed.repeats;
    let checked = move || {
        if repeats {
            return Err(repeated_key(document));
        }
        let event = match mode {
            ContentMode::Binary => {
                check_event_type(document, headers)?;
                document
            }
            ContentMode::Structured => envelope_data(document)?,
        };
        check_schema_version(event)?;
        let order = order(event, &attributes, identity?)?;
        let fingerprint = fingerprint(event, order.occurred_at);
        Ok(Decoded {
            event: order,
            fingerprint,
        })
    };
    checked().map_err(|rejection: Rejection| rejection.naming(id))
}

/// The id of a record whose payload cannot be read, or is too large to
/// be: binary mode's `ce_id` header, when it is a UUID.
fn id_in_headers(headers: &[Header]) -> Option<Uuid> {
    match content_mode(headers, None) {
        ContentMode::Binary => match header_attributes(headers).id.value {
            Some(Ok(text)) => Uuid::parse_str(text).ok(),
            _ => None,
        },
        ContentMode::Structured => None,
    }
}

/// A payload with a key repeated in one of its objects: its meaning
/// depends on the parser, so it has none (RFC 8259 §4).
fn repeated_key(document: &Object<'_>) -> Rejection {
    let detail = match document.first_repeat() {
        Some((path, key)) if path.is_empty() => format!("repeated key {:?}", truncate(key)),
        Some((path, key)) => format!("repeated key {:?} in {}", truncate(key), truncate(&path)),
        None => "repeated key".into(),
    };
    Rejection::new(ParkReason::MalformedJson, detail)
}

/// How a record carries its CloudEvents attributes: the two content modes
/// of the CloudEvents Kafka binding (docs/design.md#the-event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ContentMode {
    /// The value is the event; its attributes, if any, are `ce_*` headers.
    /// A record without CloudEvents headers is read this way too.
    Binary,
    /// The value is a CloudEvents JSON envelope; the event is its `data`.
    Structured,
}

/// The content mode of a record, decided in this order
/// (docs/design.md#cloudevents-binary-and-structured-mode):
/// 1. a `content-type` header whose media type begins with
///    `application/cloudevents`: structured (the binding's own rule);
/// 2. else any header whose key begins with `ce_`: binary (as the
///    CloudEvents SDK's `from_kafka` decides; a structured record has none);
/// 3. else a value that is a JSON object with a top-level `specversion`
///    member: structured (the SDK's `cloudevents.v1.kafka` sends structured
///    events as `application/json`, and the event's own schema has no
///    `specversion`);
/// 4. else binary (also when the value cannot be read: `document` none).
///
/// Header keys are compared ignoring ASCII case, as the SDK reads them,
/// here and wherever a header is read (`header`).
fn content_mode(headers: &[Header], document: Option<&Object<'_>>) -> ContentMode {
    let content_type = header(headers, HEADER_CONTENT_TYPE).flatten();
    if content_type.is_some_and(is_cloudevents_media_type) {
        return ContentMode::Structured;
    }
    let prefix = HEADER_CE_PREFIX.as_bytes();
    let binary_header = headers.iter().any(|h| {
        h.key
            .as_bytes()
            .get(..prefix.len())
            .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
    });
    if binary_header {
        return ContentMode::Binary;
    }
    match document {
        Some(object) if object.contains_key(ENVELOPE_SPECVERSION) => ContentMode::Structured,
        _ => ContentMode::Binary,
    }
}

/// `application/cloudevents+json` and its kin, parameters and case aside.
fn is_cloudevents_media_type(value: &[u8]) -> bool {
    let media_type = value.split(|b| *b == b';').next().unwrap_or_default();
    let media_type = media_type.trim_ascii();
    let prefix = CLOUDEVENTS_MEDIA_TYPE_PREFIX.as_bytes();
    media_type
        .get(..prefix.len())
        .is_some_and(|start| start.eq_ignore_ascii_case(prefix))
}

/// Binary mode: with a `ce_type` header, that is the event's type: it must
/// be `OrderPlaced`, and the value's own `event_type`, if any, must agree
/// (as `type` and `data.event_type` in structured mode). Without one, the
/// value's own `event_type` must be `OrderPlaced`.
fn check_event_type(event: &Object<'_>, headers: &[Header]) -> Result<(), Rejection> {
    let reject = |detail: String| Err(Rejection::new(ParkReason::UnsupportedEventType, detail));
    let Some(ce_type) = header(headers, HEADER_CE_TYPE) else {
        return match event.get("event_type").map(Value::as_str) {
            Some(Some(EVENT_TYPE)) => Ok(()),
            Some(Some(other)) => reject(format!("event_type {:?}", truncate(other))),
            _ => reject("event_type is missing or not a string".into()),
        };
    };
    match ce_type.map(std::str::from_utf8) {
        Some(Ok(EVENT_TYPE)) => own_event_type_agrees(event, "event_type", HEADER_CE_TYPE),
        Some(Ok(other)) => reject(format!("{HEADER_CE_TYPE} {:?}", truncate(other))),
        _ => reject(format!("{HEADER_CE_TYPE} header is empty or not UTF-8")),
    }
}

/// The event's own `event_type` (named `field` where the record holds it),
/// when it has one, agrees with the CloudEvents type attribute
/// (`attribute`), which is `OrderPlaced`.
fn own_event_type_agrees(
    event: &Object<'_>,
    field: &str,
    attribute: &str,
) -> Result<(), Rejection> {
    let reject = |detail: String| Err(Rejection::new(ParkReason::UnsupportedEventType, detail));
    match event.get("event_type").map(Value::as_str) {
        None | Some(Some(EVENT_TYPE)) => Ok(()),
        Some(Some(other)) => reject(format!(
            "{field} {:?} disagrees with {attribute} {EVENT_TYPE:?}",
            truncate(other)
        )),
        Some(None) => reject(format!("{field} is not a string")),
    }
}

/// Both modes: the event carries `schema_version` 1 (`1.0` is 1, as
/// everywhere a number is read); no CloudEvents attribute stands in for it.
fn check_schema_version(event: &Object<'_>) -> Result<(), Rejection> {
    let reject = |detail: &str| Err(Rejection::new(ParkReason::UnsupportedSchemaVersion, detail));
    match event.get("schema_version") {
        None => reject("schema_version is missing"),
        Some(version) if version.as_integer() == Some(i128::from(SCHEMA_VERSION)) => Ok(()),
        Some(_) => reject("schema_version is not 1"),
    }
}

/// The CloudEvents attributes decoding reads, from where the content mode
/// carries them: `ce_id` and `ce_time` headers in binary mode, the
/// envelope's `id` and `time` in structured mode.
struct Attributes<'a> {
    /// Stands in for a missing `event_id`; must agree with a present one.
    id: Attribute<'a>,
    /// The event time when the event has no `occurred_at`.
    time: Attribute<'a>,
}

/// One attribute: its name as the record spells it (for parking details)
/// and its text, `Some(Err(detail))` when it is there but is no text.
struct Attribute<'a> {
    name: &'static str,
    value: Option<Result<&'a str, &'static str>>,
}

/// Binary mode's attributes. A `ce_time` that is not UTF-8 counts as absent.
fn header_attributes(headers: &[Header]) -> Attributes<'_> {
    Attributes {
        id: Attribute {
            name: HEADER_CE_ID,
            value: header(headers, HEADER_CE_ID).map(|value| {
                value
                    .and_then(|bytes| std::str::from_utf8(bytes).ok())
                    .ok_or("ce_id header is not UTF-8")
            }),
        },
        time: Attribute {
            name: HEADER_CE_TIME,
            value: header_text(headers, HEADER_CE_TIME).map(Ok),
        },
    }
}

/// Structured mode's attributes: the envelope's `id` and `time`.
fn envelope_attributes<'a>(envelope: &'a Object<'_>) -> Attributes<'a> {
    let attribute = |name: &'static str, not_text: &'static str| Attribute {
        name,
        // A null attribute is an absent one, as a null occurred_at is.
        value: envelope
            .get(name)
            .filter(|value| !value.is_null())
            .map(|value| value.as_str().ok_or(not_text)),
    };
    Attributes {
        id: attribute("id", "id is not a string"),
        time: attribute("time", "time is not a string"),
    }
}

/// Structured mode: the envelope's own checks (`specversion` 1.0, `type`
/// `OrderPlaced`, the order as a JSON object in `data`), then `data` as the
/// event, held to binary mode's rules except that `type` stands in for
/// its `event_type`, which may then be absent.
fn envelope_data<'d, 'a>(envelope: &'d Object<'a>) -> Result<&'d Object<'a>, Rejection> {
    let reject = |reason, detail: &str| Err(Rejection::new(reason, detail));
    check_envelope_version_and_type(envelope)?;
    if envelope.contains_key("data_base64") {
        return reject(
            ParkReason::MalformedJson,
            "data_base64: the order must be a JSON object in data, not binary data",
        );
    }
    let event = match envelope.get("data").map(Value::as_object) {
        Some(Some(event)) => event,
        Some(None) => return reject(ParkReason::MalformedJson, "data is not a JSON object"),
        None => {
            return reject(
                ParkReason::MalformedJson,
                "CloudEvents envelope without data",
            )
        }
    };
    own_event_type_agrees(event, "data.event_type", "type")?;
    Ok(event)
}

/// A structured-mode envelope's `specversion` is 1.0 and its `type` is
/// `OrderPlaced`.
fn check_envelope_version_and_type(envelope: &Object<'_>) -> Result<(), Rejection> {
    let reject = |reason, detail: String| Err(Rejection::new(reason, detail));
    match envelope.get(ENVELOPE_SPECVERSION).map(|v| v.as_str()) {
        Some(Some(CLOUDEVENTS_SPEC_VERSION)) => {}
        Some(Some(other)) => {
            return reject(
                ParkReason::UnsupportedSchemaVersion,
                format!(
                    "CloudEvents specversion {:?}; only {CLOUDEVENTS_SPEC_VERSION} is read",
                    truncate(other)
                ),
            )
        }
        Some(None) => {
            return reject(
                ParkReason::UnsupportedSchemaVersion,
                "CloudEvents specversion is not a string".into(),
            )
        }
        None => {
            return reject(
                ParkReason::UnsupportedSchemaVersion,
                "CloudEvents envelope without specversion".into(),
            )
        }
    }
    match envelope.get("type").map(|v| v.as_str()) {
        Some(Some(EVENT_TYPE)) => {}
        Some(Some(other)) => {
            return reject(
                ParkReason::UnsupportedEventType,
                format!("type {:?}", truncate(other)),
            )
        }
        _ => {
            return reject(
                ParkReason::UnsupportedEventType,
                "type is missing or not a string".into(),
            )
        }
    }
    Ok(())
}

/// The order of an event (the value in binary mode, `data` in structured
/// mode), its event time completed by the attributes.
fn order(
    event: &Object<'_>,
    attributes: &Attributes<'_>,
    message_id: Uuid,
) -> Result<OrderPlaced, Rejection> {
    let occurred_at = occurred_at(event.get("occurred_at"), &attributes.time)?;
    let order_id = identifier(event.get("order_id"), "order_id")?.to_owned();
    let lines = order_lines(event.get("lines"))?;
    Ok(OrderPlaced {
        message_id,
        order_id,
        occurred_at,
        lines,
    })
}

/// The event time: `occurred_at`, or the time attribute where it is
/// missing or null (a null occurred_at is no event time of the event's).
fn occurred_at(
    value: Option<&Value<'_>>,
    time: &Attribute<'_>,
) -> Result<DateTime<Utc>, Rejection> {
    let invalid = |detail: String| Rejection::new(ParkReason::InvalidField, detail);
    match value.filter(|value| !value.is_null()) {
        Some(value) => match value.as_str() {
            Some(text) => parse_time(text).ok_or_else(|| {
                invalid(format!("occurred_at {:?} is not RFC 3339", truncate(text)))
            }),
            None => Err(invalid("occurred_at is not a string".into())),
        },
        None => match time.value {
            Some(Ok(text)) => parse_time(text).ok_or_else(|| {
                invalid(format!(
                    "{} {:?} is not RFC 3339",
                    time.name,
                    truncate(text)
                ))
            }),
            Some(Err(detail)) => Err(invalid(detail.into())),
            None => Err(Rejection::new(
                ParkReason::MissingEventTime,
                format!("neither occurred_at nor {}", time.name),
            )),
        },
    }
}

/// An `order_id` or `sku` (named `name` where the event holds it): 1-128
/// chars of `[A-Za-z0-9._:-]`. A null one is a missing one.
fn identifier<'v>(value: Option<&'v Value<'_>>, name: &str) -> Result<&'v str, Rejection> {
    let invalid = |detail: String| Err(Rejection::new(ParkReason::InvalidField, detail));
    match value.filter(|value| !value.is_null()).map(Value::as_str) {
        Some(Some(text)) if is_identifier(text) => Ok(text),
        Some(Some(_)) => invalid(format!(
            "{name} must be 1-{MAX_IDENTIFIER_CHARS} chars of [A-Za-z0-9._:-]"
        )),
        Some(None) => invalid(format!("{name} is not a string")),
        None => invalid(format!("{name} is missing")),
    }
}

/// The order's lines: 1 to `MAX_LINES`, each a valid SKU (none twice) and
/// a quantity in 1 to `MAX_QUANTITY` (an integer, however written).
fn order_lines(value: Option<&Value<'_>>) -> Result<Vec<OrderLine>, Rejection> {
    let invalid = |detail: String| Rejection::new(ParkReason::InvalidField, detail);
    let raw_lines = match value.map(Value::as_array) {
        Some(Some(lines)) => lines,
        Some(None) => return Err(invalid("lines is not an array".into())),
        None => return Err(invalid("lines is missing".into())),
    };
    if raw_lines.is_empty() || raw_lines.len() > MAX_LINES {
        return Err(invalid(format!(
            "an order has 1-{MAX_LINES} lines, not {}",
            raw_lines.len()
        )));
    }
    let mut lines = Vec::with_capacity(raw_lines.len());
    let mut skus = HashSet::with_capacity(raw_lines.len());
    for (index, raw) in raw_lines.iter().enumerate() {
        let Some(raw) = raw.as_object() else {
            return Err(invalid(format!("lines[{index}] is not an object")));
        };
        let sku = identifier(raw.get("sku"), &format!("lines[{index}].sku"))?;
        let quantity = match raw.get("quantity").map(Value::as_integer) {
            Some(Some(q)) if (1..=i128::from(MAX_QUANTITY)).contains(&q) => q as i32,
            Some(_) => {
                return Err(invalid(format!(
                    "lines[{index}].quantity must be an integer in 1-{MAX_QUANTITY}"
                )))
            }
            None => return Err(invalid(format!("lines[{index}].quantity is missing"))),
        };
        if !skus.insert(sku) {
            return Err(invalid(format!("sku {sku:?} appears more than once")));
        }
        lines.push(OrderLine {
            sku: sku.to_owned(),
            quantity,
        });
    }
    Ok(lines)
}

/// The dedup identity: the id attribute (`ce_id`, or the envelope's `id`)
/// when present, else `event_id`; both present and different is a producer
/// error, not something to guess about. With an id attribute, an
/// `event_id` that is not a UUID (or null) is not an identity and is
/// ignored.
fn message_id(payload_id: Option<&Value<'_>>, id: &Attribute<'_>) -> Result<Uuid, Rejection> {
    let attribute_id = match id.value {
        Some(Ok(text)) => Some(parse_uuid(text, id.name)?),
        Some(Err(detail)) => return Err(Rejection::new(ParkReason::InvalidEventId, detail)),
        None => None,
    };
    // With an id attribute, the payload's event_id only has to agree when
    // it is an id at all: the identity is the attribute's.
    let payload_id = match (payload_id, attribute_id) {
        (None, _) => None,
        (Some(value), Some(_)) => value.as_str().and_then(|text| Uuid::parse_str(text).ok()),
        (Some(value), None) => match value.as_str() {
            Some(text) => Some(parse_uuid(text, "event_id")?),
            None => {
                return Err(Rejection::new(
                    ParkReason::InvalidEventId,
                    "event_id is not a string",
                ))
            }
        },
    };
    match (attribute_id, payload_id) {
        (Some(a), Some(p)) if a != p => Err(Rejection {
            reason: ParkReason::EventIdMismatch,
            detail: format!("{} {a} differs from event_id {p}", id.name),
            message_id: Some(a),
        }),
        (Some(found), _) | (None, Some(found)) => Ok(found),
        (None, None) => Err(Rejection::new(
            ParkReason::MissingEventId,
            format!("neither {} nor event_id", id.name),
        )),
    }
}

fn parse_uuid(text: &str, name: &str) -> Result<Uuid, Rejection> {
    Uuid::parse_str(text).map_err(|_| {
        Rejection::new(
            ParkReason::InvalidEventId,
            format!("{name} {:?} is not a UUID", truncate(text)),
        )
    })
}

fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// `order_id` and `sku`: 1-128 chars of `[A-Za-z0-9._:-]`.
fn is_identifier(text: &str) -> bool {
    (1..=MAX_IDENTIFIER_CHARS).contains(&text.len())
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}

/// The value of the last header with that key, ignoring ASCII case as
/// `content_mode` does (`CE_ID` is `ce_id`); `Some(None)` for a null value.
fn header<'a>(headers: &'a [Header], key: &str) -> Option<Option<&'a [u8]>> {
    headers
        .iter()
        .rev()
        .find(|h| h.key.eq_ignore_ascii_case(key))
        .map(|h| h.value.as_deref())
}

fn header_text<'a>(headers: &'a [Header], key: &str) -> Option<&'a str> {
    header(headers, key)
        .flatten()
        .and_then(|bytes| std::str::from_utf8(bytes).ok())
}

/// Keeps parking details short when a producer sends something huge.
fn truncate(text: &str) -> &str {
    match text.char_indices().nth(64) {
        Some((end, _)) => &text[..end],
        None => text,
    }
}

/// A stable 64-bit FNV-1a hash of the payload's bytes. The ledger's rows
/// written before fingerprints were of the parsed event hold this; a
/// redelivery is still compared with it (docs/design.md#outcomes).
pub fn payload_hash(payload: &[u8]) -> i64 {
    Fnv::default().bytes(payload).0 as i64
}

/// [`Decoded::fingerprint`] of a valid event (the value, or `data`) whose
/// event time the decoder read as `occurred_at`.
fn fingerprint(event: &Object<'_>, occurred_at: DateTime<Utc>) -> i64 {
    let hash = canonical_members(Fnv::default(), event, |key, value, hash| {
        match (key, value) {
            ("occurred_at", Value::String(_)) => {
                Some(hash.token(b's', event_time_text(occurred_at).as_bytes()))
            }
            ("event_id", Value::String(text)) => Uuid::parse_str(text).ok().map(|id| {
                hash.token(
                    b's',
                    id.hyphenated()
                        .encode_lower(&mut Uuid::encode_buffer())
                        .as_bytes(),
                )
            }),
            _ => None,
        }
    });
    hash.0 as i64
}

/// FNV-1a, 64 bits.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn bytes(self, bytes: &[u8]) -> Fnv {
        Fnv(bytes.iter().fold(self.0, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        }))
    }

    /// A length before the bytes, so that no two sequences of tokens feed
    /// the same bytes.
    fn token(self, tag: u8, bytes: &[u8]) -> Fnv {
        self.bytes(&[tag])
            .bytes(&(bytes.len() as u64).to_le_bytes())
            .bytes(bytes)
    }
}

/// Feeds a JSON value in its canonical form ([`Decoded::fingerprint`]).
fn canonical(hash: Fnv, value: &Value<'_>) -> Fnv {
    match value {
        Value::Null => hash.token(b'n', b""),
        Value::Bool(b) => hash.token(b'b', &[u8::from(*b)]),
        Value::Number(number) => match number.canonical() {
            json::Canonical::Integer(n) => hash.token(b'i', &n.to_le_bytes()),
            json::Canonical::Double(bits) => hash.token(b'f', &bits.to_le_bytes()),
            json::Canonical::Decimal(text) => hash.token(b'd', text.as_bytes()),
        },
        Value::String(text) => hash.token(b's', text.as_bytes()),
        Value::Array(items) => items.iter().fold(
            hash.token(b'[', &(items.len() as u64).to_le_bytes()),
            canonical,
        ),
        Value::Object(object) => canonical_members(hash, object, |_, _, _| None),
    }
}

/// Feeds an object's members sorted by key; `special` feeds a member's
/// value its own way when it returns some.
fn canonical_members(
    hash: Fnv,
    object: &Object<'_>,
    special: impl Fn(&str, &Value<'_>, Fnv) -> Option<Fnv>,
) -> Fnv {
    let mut sorted: Vec<_> = object.members().iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let count = sorted.len() as u64;
    sorted.into_iter().fold(
        hash.token(b'{', &count.to_le_bytes()),
        |hash, (key, value)| {
            let hash = hash.token(b'k', key.as_bytes());
            special(key, value, hash).unwrap_or_else(|| canonical(hash, value))
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use proptest::prelude::*;

    fn sample() -> OrderPlaced {
        OrderPlaced {
            message_id: Uuid::parse_str("6f1c2f8e-3c0b-4f5e-9a59-1d2f0e3b7c11").unwrap(),
            order_id: "ORD-1001".into(),
            occurred_at: Utc.with_ymd_and_hms(2026, 12, 2, 12, 0, 0).unwrap(),
            lines: vec![
                OrderLine {
                    sku: "SKU-42".into(),
                    quantity: 2,
                },
                OrderLine {
                    sku: "SKU-7".into(),
                    quantity: 1,
                },
            ],
        }
    }

    fn sample_json() -> serde_json::Value {
        serde_json::from_slice(&sample().to_json()).unwrap()
    }

    fn reason_of(value: &serde_json::Value, headers: &[Header]) -> ParkReason {
        let bytes = serde_json::to_vec(value).unwrap();
        decode_event(&bytes, headers).unwrap_err().reason
    }

    fn with(mutate: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>)) -> ParkReason {
        let mut value = sample_json();
        mutate(value.as_object_mut().unwrap());
        reason_of(&value, &[])
    }

    fn header_of(key: &str, value: &str) -> Header {
        Header {
            key: key.into(),
            value: Some(value.as_bytes().to_vec()),
        }
    }

    #[test]
    fn encoded_event_decodes_to_itself() {
        let event = sample();
        assert_eq!(decode_event(&event.to_json(), &[]), Ok(event));
    }

    #[test]
    fn spec_example_is_valid() {
        let spec =
            br#"{"event_id":"6f1c2f8e-3c0b-4f5e-9a59-1d2f0e3b7c11","event_type":"OrderPlaced",
 "schema_version":1,"order_id":"ORD-1001","occurred_at":"2026-12-02T12:00:00.123Z",
 "lines":[{"sku":"SKU-42","quantity":2},{"sku":"SKU-7","quantity":1}]}"#;
        let event = decode_event(spec, &[]).unwrap();
        assert_eq!(event.order_id, "ORD-1001");
        assert_eq!(event.lines.len(), 2);
        assert_eq!(
            event.event_day(),
            NaiveDate::from_ymd_opt(2026, 12, 2).unwrap()
        );
    }

    #[test]
    fn ce_type_header_is_the_event_type_in_binary_mode() {
        let event = sample();
        let bytes = event.to_json();
        let placed = [header_of("ce_type", "OrderPlaced")];
        assert_eq!(decode_event(&bytes, &placed), Ok(event.clone()));

        // The header stands in for a missing event_type.
        let mut value = sample_json();
        value.as_object_mut().unwrap().remove("event_type");
        let without = serde_json::to_vec(&value).unwrap();
        assert_eq!(decode_event(&without, &placed), Ok(event));
        assert_eq!(
            reason_of(&value, &[]),
            ParkReason::UnsupportedEventType,
            "without the header an event_type is needed"
        );
        // Without the header, the type the value names is in the reason.
        let mut shipped = sample_json();
        shipped["event_type"] = "OrderShipped".into();
        let rejection = decode_event(&serde_json::to_vec(&shipped).unwrap(), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.detail.as_str()),
            (
                ParkReason::UnsupportedEventType,
                "event_type \"OrderShipped\""
            )
        );

        // Another type is parked whatever the value says, and a value that
        // disagrees with the header too.
        for (headers, payload, detail) in [
            (
                vec![header_of("ce_type", "OrderCancelled")],
                &bytes,
                "ce_type \"OrderCancelled\"",
            ),
            (
                vec![Header {
                    key: "ce_type".into(),
                    value: Some(vec![0xff, 0xfe]),
                }],
                &bytes,
                "ce_type header is empty or not UTF-8",
            ),
            (
                vec![Header {
                    key: "ce_type".into(),
                    value: None,
                }],
                &bytes,
                "ce_type header is empty or not UTF-8",
            ),
        ] {
            let rejection = decode_event(payload, &headers).unwrap_err();
            assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
            assert_eq!(rejection.detail, detail);
        }
        let mut value = sample_json();
        value["event_type"] = "OrderShipped".into();
        let rejection = decode_event(&serde_json::to_vec(&value).unwrap(), &placed).unwrap_err();
        assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
        assert_eq!(
            rejection.detail,
            "event_type \"OrderShipped\" disagrees with ce_type \"OrderPlaced\""
        );
    }

    #[test]
    fn ce_id_header_is_the_identity_when_present() {
        let mut value = sample_json();
        value.as_object_mut().unwrap().remove("event_id");
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let bytes = serde_json::to_vec(&value).unwrap();
        let event = decode_event(&bytes, &[header_of("ce_id", id)]).unwrap();
        assert_eq!(event.message_id, Uuid::parse_str(id).unwrap());
    }

    #[test]
    fn same_id_in_header_and_payload_is_accepted() {
        let event = sample();
        let headers = [header_of(
            "ce_id",
            &event.message_id.to_string().to_uppercase(),
        )];
        assert_eq!(decode_event(&event.to_json(), &headers), Ok(event));
    }

    #[test]
    fn ce_time_header_is_the_event_time_without_occurred_at_or_with_a_null_one() {
        for without in [None, Some(serde_json::Value::Null)] {
            let mut value = sample_json();
            match &without {
                None => {
                    value.as_object_mut().unwrap().remove("occurred_at");
                }
                Some(null) => value["occurred_at"] = null.clone(),
            }
            let bytes = serde_json::to_vec(&value).unwrap();
            let event = decode(
                Some(&bytes),
                &[header_of("ce_time", "2026-11-30T23:59:59+00:00")],
            )
            .unwrap();
            assert_eq!(
                event.event_day(),
                NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
                "{without:?}"
            );
            assert_eq!(reason_of(&value, &[]), ParkReason::MissingEventTime);
        }
    }

    #[test]
    fn malformed_json_is_parked() {
        assert_eq!(
            decode_event(b"{not json", &[]).unwrap_err().reason,
            ParkReason::MalformedJson
        );
        assert_eq!(
            decode_event(b"[1,2]", &[]).unwrap_err().reason,
            ParkReason::MalformedJson
        );
        assert_eq!(
            decode(None, &[]).unwrap_err().reason,
            ParkReason::MalformedJson
        );
    }

    #[test]
    fn payload_over_64_kib_is_parked() {
        let big = vec![b' '; MAX_PAYLOAD_BYTES + 1];
        assert_eq!(
            decode_event(&big, &[]).unwrap_err().reason,
            ParkReason::PayloadTooLarge
        );
    }

    #[test]
    fn a_payload_of_exactly_64_kib_is_read() {
        // The sample event, padded with spaces to the limit.
        let mut payload = sample().to_json();
        payload.resize(MAX_PAYLOAD_BYTES, b' ');
        assert_eq!(decode_event(&payload, &[]), Ok(sample()));
    }

    #[test]
    fn missing_event_id_is_parked() {
        assert_eq!(
            with(|o| {
                o.remove("event_id");
            }),
            ParkReason::MissingEventId
        );
    }

    #[test]
    fn invalid_event_id_is_parked() {
        assert_eq!(
            with(|o| {
                o.insert("event_id".into(), "not-a-uuid".into());
            }),
            ParkReason::InvalidEventId
        );
        assert_eq!(
            with(|o| {
                o.insert("event_id".into(), 42.into());
            }),
            ParkReason::InvalidEventId
        );
        let bytes = sample().to_json();
        let headers = [header_of("ce_id", "nope")];
        assert_eq!(
            decode_event(&bytes, &headers).unwrap_err().reason,
            ParkReason::InvalidEventId
        );
    }

    #[test]
    fn with_a_ce_id_an_event_id_that_is_no_uuid_is_ignored() {
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        for event_id in [
            serde_json::json!("ORDER-EVENT-7"),
            serde_json::Value::Null,
            serde_json::json!(42),
        ] {
            let mut value = sample_json();
            value["event_id"] = event_id.clone();
            let bytes = serde_json::to_vec(&value).unwrap();
            let event = decode_event(&bytes, &[header_of("ce_id", id)])
                .unwrap_or_else(|r| panic!("{event_id}: {r:?}"));
            assert_eq!(event.message_id, Uuid::parse_str(id).unwrap());
        }
        // Without a ce_id the same payloads have no identity.
        let mut value = sample_json();
        value["event_id"] = serde_json::Value::Null;
        assert_eq!(reason_of(&value, &[]), ParkReason::InvalidEventId);
    }

    #[test]
    fn different_ids_in_header_and_payload_are_parked() {
        let bytes = sample().to_json();
        let headers = [header_of("ce_id", "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11")];
        let rejection = decode_event(&bytes, &headers).unwrap_err();
        assert_eq!(rejection.reason, ParkReason::EventIdMismatch);
        assert!(rejection.message_id.is_some());
    }

    #[test]
    fn missing_event_time_is_parked() {
        assert_eq!(
            with(|o| {
                o.remove("occurred_at");
            }),
            ParkReason::MissingEventTime
        );
    }

    #[test]
    fn unparseable_event_time_is_an_invalid_field() {
        assert_eq!(
            with(|o| {
                o.insert("occurred_at".into(), "yesterday".into());
            }),
            ParkReason::InvalidField
        );
    }

    #[test]
    fn other_event_types_are_parked() {
        assert_eq!(
            with(|o| {
                o.insert("event_type".into(), "OrderCancelled".into());
            }),
            ParkReason::UnsupportedEventType
        );
        assert_eq!(
            with(|o| {
                o.remove("event_type");
            }),
            ParkReason::UnsupportedEventType
        );
    }

    #[test]
    fn other_schema_versions_are_parked() {
        for version in [
            serde_json::json!(2),
            serde_json::json!("1"),
            serde_json::Value::Null,
        ] {
            assert_eq!(
                with(|o| {
                    o.insert("schema_version".into(), version);
                }),
                ParkReason::UnsupportedSchemaVersion
            );
        }
    }

    type Edit = Box<dyn Fn(&mut serde_json::Map<String, serde_json::Value>)>;

    /// Edits of a valid event that each break one limit of its fields.
    fn limit_violations() -> Vec<Edit> {
        vec![
            Box::new(|o| {
                o.insert("order_id".into(), "".into());
            }),
            Box::new(|o| {
                o.insert("order_id".into(), "x".repeat(129).into());
            }),
            Box::new(|o| {
                o.insert("order_id".into(), "ORD 1".into());
            }),
            Box::new(|o| {
                o.insert("lines".into(), serde_json::json!([]));
            }),
            Box::new(|o| {
                let lines: Vec<_> = (0..101)
                    .map(|i| serde_json::json!({"sku": format!("S{i}"), "quantity": 1}))
                    .collect();
                o.insert("lines".into(), lines.into());
            }),
            Box::new(|o| {
                o.insert(
                    "lines".into(),
                    serde_json::json!([{"sku": "A", "quantity": 0}]),
                );
            }),
            Box::new(|o| {
                o.insert(
                    "lines".into(),
                    serde_json::json!([{"sku": "A", "quantity": 10001}]),
                );
            }),
            Box::new(|o| {
                o.insert(
                    "lines".into(),
                    serde_json::json!([{"sku": "A", "quantity": 1.5}]),
                );
            }),
            Box::new(|o| {
                o.insert(
                    "lines".into(),
                    serde_json::json!([{"sku": "A/B", "quantity": 1}]),
                );
            }),
            Box::new(|o| {
                o.insert(
                    "lines".into(),
                    serde_json::json!([{"sku": "A", "quantity": 1}, {"sku": "A", "quantity": 2}]),
                );
            }),
        ]
    }

    #[test]
    fn field_limits_are_enforced() {
        for (index, case) in limit_violations().iter().enumerate() {
            assert_eq!(with(case), ParkReason::InvalidField, "case {index}");
        }
        // The edges themselves are accepted.
        let mut value = sample_json();
        let lines: Vec<_> = (0..100)
            .map(|i| serde_json::json!({"sku": format!("S{i}"), "quantity": if i == 0 { 10_000 } else { 1 }}))
            .collect();
        value["lines"] = lines.into();
        value["order_id"] = "o".repeat(128).into();
        assert!(decode_event(&serde_json::to_vec(&value).unwrap(), &[]).is_ok());
    }

    #[test]
    fn every_reason_has_a_distinct_code() {
        let codes: HashSet<_> = ParkReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(codes.len(), ParkReason::ALL.len());
        for reason in ParkReason::ALL {
            assert_eq!(ParkReason::from_code(reason.as_str()), Some(reason));
            // Log lines name a reason by its code, as the table stores it.
            assert_eq!(reason.to_string(), reason.as_str());
        }
        assert_eq!(ParkReason::from_code("no_such_reason"), None);
    }

    #[test]
    fn a_fingerprint_is_of_the_event_not_of_its_formatting() {
        let written = br#"{"event_id":"5d3e0c1e-0000-4000-8000-000000000001","event_type":"OrderPlaced","schema_version":1,"order_id":"O-1","occurred_at":"2026-12-02T12:00:00Z","lines":[{"sku":"A","quantity":2}],"n":null,"ok":true,"ab":"c"}"#;
        let again = br#"{ "ok" : true, "n": null, "lines": [ {"quantity": 2.0, "sku": "\u0041"} ],
            "ab": "c", "schema_version": 1, "order_id": "O-1", "event_type": "OrderPlaced",
            "occurred_at": "2026-12-02T12:00:00Z", "event_id": "5d3e0c1e-0000-4000-8000-000000000001" }"#;
        assert_eq!(fingerprint_of(written, &[]), fingerprint_of(again, &[]));
        let text = std::str::from_utf8(written).unwrap();
        for (from, to) in [
            (r#""quantity":2"#, r#""quantity":3"#),
            (r#""ok":true"#, r#""ok":false"#),
            (r#","ok":true"#, ""),
            // A string is never taken for the number it spells, nor two
            // keys for one.
            (r#""n":null"#, r#""n":"null""#),
            (r#""ab":"c""#, r#""a":"bc""#),
        ] {
            let other = text.replacen(from, to, 1);
            assert_ne!(
                fingerprint_of(written, &[]),
                fingerprint_of(other.as_bytes(), &[]),
                "{other}"
            );
        }
    }

    #[test]
    fn payload_hash_is_stable_and_discriminating() {
        assert_eq!(payload_hash(b""), 0xcbf2_9ce4_8422_2325_u64 as i64);
        assert_eq!(payload_hash(b"a"), 0xaf63_dc4c_8601_ec8c_u64 as i64);
        assert_ne!(payload_hash(b"ab"), payload_hash(b"ba"));
    }

    /// The sample as a structured-mode CloudEvent: its id and time as
    /// attributes, its order (with `schema_version`, without `event_id`,
    /// `event_type` or `occurred_at`) as `data`.
    fn envelope_json() -> serde_json::Value {
        let event = sample();
        let mut data = sample_json();
        let data_members = data.as_object_mut().unwrap();
        for name in ["event_id", "event_type", "occurred_at"] {
            data_members.remove(name);
        }
        serde_json::json!({
            "specversion": "1.0",
            "id": event.message_id.to_string(),
            "type": "OrderPlaced",
            "source": "/shop/checkout",
            "time": "2026-12-02T12:00:00Z",
            "datacontenttype": "application/json",
            "data": data,
        })
    }

    fn decode_value(
        value: &serde_json::Value,
        headers: &[Header],
    ) -> Result<OrderPlaced, Rejection> {
        decode_event(&serde_json::to_vec(value).unwrap(), headers)
    }

    /// The rejection of the sample envelope after `mutate`, read by its shape.
    fn envelope_with(mutate: impl FnOnce(&mut serde_json::Value)) -> Rejection {
        let mut value = envelope_json();
        mutate(&mut value);
        decode_value(&value, &[]).unwrap_err()
    }

    fn structured_content_type() -> Header {
        header_of("content-type", "application/cloudevents+json")
    }

    #[test]
    fn structured_envelope_is_read_by_its_shape_or_its_content_type() {
        let envelope = envelope_json();
        for headers in [
            vec![],
            // The CloudEvents SDK's cloudevents.v1.kafka sends this.
            vec![header_of("content-type", "application/json")],
            vec![structured_content_type()],
            vec![header_of(
                "Content-Type",
                "Application/CloudEvents+JSON; charset=utf-8",
            )],
        ] {
            assert_eq!(
                decode_value(&envelope, &headers),
                Ok(sample()),
                "{headers:?}"
            );
        }
    }

    #[test]
    fn content_type_cloudevents_means_structured_whatever_the_value() {
        // Without specversion it is still taken for an envelope, a bad one.
        let rejection =
            decode_event(&sample().to_json(), &[structured_content_type()]).unwrap_err();
        assert_eq!(rejection.reason, ParkReason::UnsupportedSchemaVersion);
        assert!(
            rejection.detail.contains("specversion"),
            "{}",
            rejection.detail
        );
        // And it wins over ce_ headers, as the binding says.
        let headers = [header_of("ce_id", "nope"), structured_content_type()];
        assert_eq!(decode_value(&envelope_json(), &headers), Ok(sample()));
    }

    #[test]
    fn ce_headers_keep_a_record_in_binary_mode() {
        // A value with a specversion member, but ce_ headers: binary mode,
        // where the value itself must be the event.
        for (key, detail) in [
            ("ce_specversion", "event_type is missing or not a string"),
            ("CE_SOURCE", "event_type is missing or not a string"),
            // Read as ce_type, in any case.
            ("CE_TYPE", "ce_type \"1.0\""),
        ] {
            let rejection = decode_value(&envelope_json(), &[header_of(key, "1.0")]).unwrap_err();
            assert_eq!(rejection.reason, ParkReason::UnsupportedEventType, "{key}");
            assert_eq!(rejection.detail, detail, "{key}");
        }
        // The event itself with the SDK's binary headers is read as before.
        let event = sample();
        let headers = [
            header_of("content-type", "application/json"),
            header_of("ce_specversion", "1.0"),
            header_of("ce_id", &event.message_id.to_string()),
            header_of("ce_type", "OrderPlaced"),
            header_of("ce_source", "/shop/checkout"),
        ];
        assert_eq!(decode_event(&event.to_json(), &headers), Ok(event));
    }

    #[test]
    fn binary_and_structured_modes_decode_one_cloudevent_alike() {
        // The same CloudEvent in both modes, its data the full event body
        // that binary mode needs (event_type and schema_version).
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let mut data = sample_json();
        for name in ["event_id", "occurred_at"] {
            data.as_object_mut().unwrap().remove(name);
        }
        let binary = decode_event(
            &serde_json::to_vec(&data).unwrap(),
            &[
                header_of("ce_specversion", "1.0"),
                header_of("ce_id", id),
                header_of("ce_type", "OrderPlaced"),
                header_of("ce_time", "2026-11-30T08:00:00Z"),
            ],
        )
        .unwrap();
        let structured = decode_value(
            &serde_json::json!({"specversion": "1.0", "id": id, "type": "OrderPlaced",
                "source": "/shop", "time": "2026-11-30T08:00:00Z", "data": data}),
            &[],
        )
        .unwrap();
        assert_eq!(binary, structured);
        assert_eq!(structured.message_id, Uuid::parse_str(id).unwrap());
    }

    #[test]
    fn structured_id_is_the_identity_and_must_be_a_uuid() {
        for id in [
            serde_json::json!("not-a-uuid"),
            serde_json::json!(42),
            serde_json::Value::Null,
        ] {
            let rejection = envelope_with(|v| v["id"] = id.clone());
            if id.is_null() {
                // A null id is no id; data has no event_id either.
                assert_eq!(rejection.reason, ParkReason::MissingEventId);
                assert_eq!(rejection.detail, "neither id nor event_id");
            } else {
                assert_eq!(rejection.reason, ParkReason::InvalidEventId, "{id}");
            }
        }
        let rejection = envelope_with(|v| v["id"] = "nope".into());
        assert_eq!(rejection.detail, "id \"nope\" is not a UUID");
    }

    #[test]
    fn structured_id_and_a_different_event_id_in_data_are_parked() {
        let other = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let rejection = envelope_with(|v| v["data"]["event_id"] = other.into());
        assert_eq!(rejection.reason, ParkReason::EventIdMismatch);
        assert_eq!(rejection.message_id, Some(sample().message_id));
        // The same id in data, or one that is no UUID at all, is accepted.
        for event_id in [
            serde_json::json!(sample().message_id.to_string().to_uppercase()),
            serde_json::json!("ORDER-EVENT-7"),
        ] {
            let mut value = envelope_json();
            value["data"]["event_id"] = event_id;
            assert_eq!(decode_value(&value, &[]), Ok(sample()));
        }
        // Without an id attribute, data's event_id is the identity, as in
        // binary mode without ce_id.
        let mut value = envelope_json();
        value.as_object_mut().unwrap().remove("id");
        value["data"]["event_id"] = other.into();
        assert_eq!(
            decode_value(&value, &[]).unwrap().message_id,
            Uuid::parse_str(other).unwrap()
        );
    }

    #[test]
    fn structured_time_is_the_event_time_when_data_has_no_occurred_at() {
        let mut value = envelope_json();
        value["time"] = "2026-11-30T23:59:59+00:00".into();
        assert_eq!(
            decode_value(&value, &[]).unwrap().event_day(),
            NaiveDate::from_ymd_opt(2026, 11, 30).unwrap()
        );
        // occurred_at in data wins over time; a null one does not.
        value["data"]["occurred_at"] = "2026-12-01T10:00:00Z".into();
        assert_eq!(
            decode_value(&value, &[]).unwrap().event_day(),
            NaiveDate::from_ymd_opt(2026, 12, 1).unwrap()
        );
        value["data"]["occurred_at"] = serde_json::Value::Null;
        assert_eq!(
            decode_value(&value, &[]).unwrap().event_day(),
            NaiveDate::from_ymd_opt(2026, 11, 30).unwrap()
        );
    }

    #[test]
    fn structured_event_without_a_usable_time_is_parked() {
        let rejection = envelope_with(|v| {
            v.as_object_mut().unwrap().remove("time");
        });
        assert_eq!(rejection.reason, ParkReason::MissingEventTime);
        assert_eq!(rejection.detail, "neither occurred_at nor time");
        assert_eq!(rejection.message_id, Some(sample().message_id));
        assert_eq!(
            envelope_with(|v| v["time"] = serde_json::Value::Null).reason,
            ParkReason::MissingEventTime
        );
        assert_eq!(
            envelope_with(|v| v["time"] = "yesterday".into()).reason,
            ParkReason::InvalidField
        );
        assert_eq!(
            envelope_with(|v| v["time"] = 1_764_676_800.into()).detail,
            "time is not a string"
        );
    }

    #[test]
    fn structured_type_other_than_order_placed_is_parked_naming_it() {
        let rejection = envelope_with(|v| v["type"] = "OrderCancelled".into());
        assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
        assert!(
            rejection.detail.contains("OrderCancelled"),
            "{}",
            rejection.detail
        );
        for missing in [None, Some(serde_json::json!(7))] {
            let rejection = envelope_with(|v| match &missing {
                None => {
                    v.as_object_mut().unwrap().remove("type");
                }
                Some(other) => v["type"] = other.clone(),
            });
            assert_eq!(rejection.reason, ParkReason::UnsupportedEventType);
        }
    }

    #[test]
    fn structured_data_event_type_may_be_absent_but_must_agree() {
        let mut value = envelope_json();
        value["data"]["event_type"] = "OrderPlaced".into();
        assert_eq!(decode_value(&value, &[]), Ok(sample()));
        for other in [serde_json::json!("OrderShipped"), serde_json::Value::Null] {
            let rejection = envelope_with(|v| v["data"]["event_type"] = other.clone());
            assert_eq!(
                rejection.reason,
                ParkReason::UnsupportedEventType,
                "{other}"
            );
            assert!(
                rejection.detail.starts_with("data.event_type"),
                "{}",
                rejection.detail
            );
        }
    }

    #[test]
    fn structured_specversion_other_than_1_0_is_parked() {
        for version in [
            serde_json::json!("0.3"),
            serde_json::json!("1.1"),
            serde_json::json!(1.0),
            serde_json::Value::Null,
        ] {
            let rejection = envelope_with(|v| v["specversion"] = version.clone());
            assert_eq!(
                rejection.reason,
                ParkReason::UnsupportedSchemaVersion,
                "{version}"
            );
            assert!(
                rejection.detail.contains("specversion"),
                "{}",
                rejection.detail
            );
        }
        let rejection = envelope_with(|v| v["specversion"] = "0.3".into());
        assert_eq!(
            rejection.detail,
            "CloudEvents specversion \"0.3\"; only 1.0 is read"
        );
    }

    #[test]
    fn structured_data_must_be_a_json_object() {
        let rejection = envelope_with(|v| {
            let members = v.as_object_mut().unwrap();
            members.remove("data");
            members.insert("data_base64".into(), "eyJvcmRlcl9pZCI6IjEifQ==".into());
        });
        assert_eq!(rejection.reason, ParkReason::MalformedJson);
        assert!(
            rejection.detail.contains("data_base64"),
            "{}",
            rejection.detail
        );
        let rejection = envelope_with(|v| {
            v.as_object_mut().unwrap().remove("data");
        });
        assert_eq!(rejection.reason, ParkReason::MalformedJson);
        for data in [
            serde_json::json!("{\"order_id\":\"ORD-1001\"}"),
            serde_json::json!([1, 2]),
            serde_json::json!(42),
            serde_json::Value::Null,
        ] {
            let rejection = envelope_with(|v| v["data"] = data.clone());
            assert_eq!(rejection.reason, ParkReason::MalformedJson, "{data}");
            assert_eq!(rejection.detail, "data is not a JSON object");
        }
    }

    #[test]
    fn structured_data_needs_schema_version_1_as_binary_mode_does() {
        for version in [None, Some(serde_json::json!(2))] {
            let rejection = envelope_with(|v| {
                let data = v["data"].as_object_mut().unwrap();
                match &version {
                    None => {
                        data.remove("schema_version");
                    }
                    Some(other) => {
                        data.insert("schema_version".into(), other.clone());
                    }
                }
            });
            assert_eq!(rejection.reason, ParkReason::UnsupportedSchemaVersion);
        }
    }

    #[test]
    fn structured_events_keep_every_limit() {
        for (index, case) in limit_violations().iter().enumerate() {
            let rejection = envelope_with(|v| case(v["data"].as_object_mut().unwrap()));
            assert_eq!(rejection.reason, ParkReason::InvalidField, "case {index}");
        }
        // The 64 KiB are the record's value, the envelope included.
        let mut value = envelope_json();
        value["source"] = "x".repeat(MAX_PAYLOAD_BYTES).into();
        assert_eq!(
            decode_value(&value, &[]).unwrap_err().reason,
            ParkReason::PayloadTooLarge
        );
    }

    #[test]
    fn a_structured_fingerprint_is_of_its_data() {
        let written = serde_json::to_vec(&envelope_json()).unwrap();
        // Written out again with other spacing.
        let again = serde_json::to_vec_pretty(&envelope_json()).unwrap();
        assert_eq!(fingerprint_of(&written, &[]), fingerprint_of(&again, &[]));
        // The attributes around the order are not in it; the order is.
        let mut resent = envelope_json();
        resent["source"] = "/shop/retry".into();
        resent["time"] = "2026-12-02T12:00:05Z".into();
        let resent = serde_json::to_vec(&resent).unwrap();
        assert_eq!(fingerprint_of(&written, &[]), fingerprint_of(&resent, &[]));
        let mut other = envelope_json();
        other["data"]["lines"][0]["quantity"] = 3.into();
        assert_ne!(
            fingerprint_of(&written, &[]),
            fingerprint_of(&serde_json::to_vec(&other).unwrap(), &[])
        );
        // The same CloudEvent in binary mode: its value is the data.
        let mut data = envelope_json()["data"].clone();
        let data_bytes = serde_json::to_vec(&data).unwrap();
        let binary_headers = [
            header_of("ce_id", &sample().message_id.to_string()),
            header_of("ce_type", "OrderPlaced"),
            header_of("ce_time", "2026-12-02T12:00:00Z"),
        ];
        assert_eq!(
            fingerprint_of(&written, &[structured_content_type()]),
            fingerprint_of(&data_bytes, &binary_headers)
        );
        // In binary mode all of the value counts.
        data["note"] = "x".into();
        assert_ne!(
            fingerprint_of(&written, &[]),
            fingerprint_of(&serde_json::to_vec(&data).unwrap(), &binary_headers)
        );
    }

    /// The event alone of a record that decodes.
    fn decode_event(payload: &[u8], headers: &[Header]) -> Result<OrderPlaced, Rejection> {
        decode(Some(payload), headers).map(|decoded| decoded.event)
    }

    /// The fingerprint of a record that decodes, from the same decode.
    fn fingerprint_of(payload: &[u8], headers: &[Header]) -> i64 {
        decode(Some(payload), headers)
            .expect("a valid event")
            .fingerprint
    }

    /// The sample's JSON after `mutate`, as bytes.
    fn sample_bytes(mutate: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
        let mut value = sample_json();
        mutate(&mut value);
        serde_json::to_vec(&value).unwrap()
    }

    /// The sample with its `occurred_at` written as `time` and an extra
    /// member written as `number`, spelled by hand.
    fn spelled(time: &str, number: &str) -> Vec<u8> {
        format!(
            r#"{{"event_id":"6f1c2f8e-3c0b-4f5e-9a59-1d2f0e3b7c11","event_type":"OrderPlaced",
            "schema_version":1,"order_id":"ORD-1001","occurred_at":"{time}","n":{number},
            "lines":[{{"sku":"SKU-42","quantity":2}},{{"sku":"SKU-7","quantity":1}}]}}"#
        )
        .into_bytes()
    }

    #[test]
    fn ordinary_events_keep_the_fingerprint_ledger_rows_hold() {
        // Computed by the code before fingerprints were of one parse with the
        // decoder: a byte-identical redelivery of an event written as the
        // load generator and `to_json` write it must still be a duplicate.
        let mut millis = sample();
        millis.occurred_at = Utc.timestamp_millis_opt(1_764_676_800_123).unwrap();
        let mut nanos = sample();
        nanos.occurred_at = Utc.timestamp_opt(1_764_676_800, 123_456_789).unwrap();
        let ce_id = [header_of(HEADER_CE_ID, &sample().message_id.to_string())];
        for (event, pinned) in [
            (sample(), 0x4bbe_346b_d9ef_0401_u64),
            (millis, 0xf0ea_78e5_6f24_fd16),
            (nanos, 0xb495_1786_50b6_eca5),
        ] {
            let payload = event.to_json();
            assert_eq!(fingerprint_of(&payload, &[]) as u64, pinned, "{event:?}");
            assert_eq!(fingerprint_of(&payload, &ce_id) as u64, pinned, "{event:?}");
        }
        let envelope = serde_json::to_vec(&envelope_json()).unwrap();
        assert_eq!(fingerprint_of(&envelope, &[]) as u64, 0xc152_3e5a_0c94_eae7);
    }

    #[test]
    fn unsupported_schema_version_keeps_the_event_id() {
        let id = Some(sample().message_id);
        let bytes = sample_bytes(|v| v["schema_version"] = 2.into());
        let rejection = decode_event(&bytes, &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::UnsupportedSchemaVersion, id)
        );
        for rejection in [
            envelope_with(|v| v["specversion"] = "0.3".into()),
            envelope_with(|v| v["data"]["schema_version"] = 2.into()),
        ] {
            assert_eq!(
                (rejection.reason, rejection.message_id),
                (ParkReason::UnsupportedSchemaVersion, id)
            );
        }
    }

    #[test]
    fn unsupported_event_type_keeps_the_event_id() {
        let id = Some(sample().message_id);
        let bytes = sample_bytes(|v| v["event_type"] = "OrderCancelled".into());
        let rejection = decode_event(&bytes, &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::UnsupportedEventType, id)
        );
        // The id of a ce_id header, whatever the value says of its type.
        let other = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let headers = [
            header_of(HEADER_CE_ID, other),
            header_of(HEADER_CE_TYPE, "OrderCancelled"),
        ];
        let rejection = decode_event(&sample().to_json(), &headers).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (
                ParkReason::UnsupportedEventType,
                Uuid::parse_str(other).ok()
            )
        );
        let rejection = envelope_with(|v| v["type"] = "OrderCancelled".into());
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::UnsupportedEventType, id)
        );
    }

    #[test]
    fn payload_too_large_keeps_the_event_id() {
        let id = sample().message_id;
        let padded = |size: usize| {
            let mut payload = sample().to_json();
            payload.resize(size, b' ');
            payload
        };
        let rejection = decode_event(&padded(MAX_PAYLOAD_BYTES + 1), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::PayloadTooLarge, Some(id))
        );
        let mut envelope = envelope_json();
        envelope["source"] = "x".repeat(MAX_PAYLOAD_BYTES).into();
        let rejection = decode_value(&envelope, &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::PayloadTooLarge, Some(id))
        );
        // Past what is worth reading, only a ce_id header's id is kept.
        let huge = padded(MAX_ID_READ_BYTES + 1);
        assert_eq!(decode_event(&huge, &[]).unwrap_err().message_id, None);
        let other = Uuid::new_v4();
        let headers = [header_of("ce_id", &other.to_string())];
        let rejection = decode_event(&huge, &headers).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::PayloadTooLarge, Some(other))
        );
    }

    #[test]
    fn a_record_that_is_no_event_keeps_the_id_it_can_still_name() {
        // Binary mode by its ce_ headers: ce_id names the record.
        let id = Uuid::new_v4();
        let headers = [header_of("ce_id", &id.to_string())];
        let rejection = decode_event(b"{not json", &headers).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::MalformedJson, Some(id))
        );
        // A structured envelope without an order keeps its own id.
        let rejection = envelope_with(|v| v["data"] = 42.into());
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::MalformedJson, Some(sample().message_id))
        );
    }

    #[test]
    fn repeated_keys_are_refused_wherever_they_are() {
        let lines =
            r#""lines":[{"sku":"SKU-42","quantity":1}],"lines":[{"sku":"SKU-42","quantity":9}]"#;
        let event = |extra: &str| {
            format!(
                r#"{{"event_id":"6f1c2f8e-3c0b-4f5e-9a59-1d2f0e3b7c11","event_type":"OrderPlaced",
                "schema_version":1,"order_id":"ORD-1001","occurred_at":"2026-12-02T12:00:00Z",{extra}{lines}}}"#
            )
        };
        // Few members or many: simd-json kept the first, then the last.
        let many: String = (0..40).map(|i| format!(r#""x{i}":{i},"#)).collect();
        for payload in [event(""), event(&many)] {
            let rejection = decode_event(payload.as_bytes(), &[]).unwrap_err();
            assert_eq!(rejection.reason, ParkReason::MalformedJson);
            assert_eq!(rejection.detail, "repeated key \"lines\"");
            assert_eq!(rejection.message_id, Some(sample().message_id));
        }
        let inner = sample()
            .to_json()
            .iter()
            .map(|b| *b as char)
            .collect::<String>()
            .replacen(r#""quantity":2"#, r#""quantity":2,"quantity":9"#, 1);
        let rejection = decode_event(inner.as_bytes(), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.detail.as_str()),
            (
                ParkReason::MalformedJson,
                "repeated key \"quantity\" in lines[0]"
            )
        );
        // In a CloudEvents envelope, and in its data.
        let envelope = String::from_utf8(serde_json::to_vec(&envelope_json()).unwrap()).unwrap();
        for (payload, detail) in [
            (
                envelope.replacen(r#""type":"#, r#""type":"OrderPlaced","type":"#, 1),
                "repeated key \"type\"",
            ),
            (
                envelope.replacen(r#""order_id":"#, r#""order_id":"ORD-1","order_id":"#, 1),
                "repeated key \"order_id\" in data",
            ),
        ] {
            let rejection = decode_event(payload.as_bytes(), &[]).unwrap_err();
            assert_eq!(
                (rejection.reason, rejection.detail.as_str()),
                (ParkReason::MalformedJson, detail),
                "{payload}"
            );
        }
        // An id that is itself repeated names nothing.
        let twice = String::from_utf8(sample().to_json()).unwrap().replacen(
            r#""event_id":"#,
            r#""event_id":"0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11","event_id":"#,
            1,
        );
        let rejection = decode_event(twice.as_bytes(), &[]).unwrap_err();
        assert_eq!(
            (rejection.reason, rejection.message_id),
            (ParkReason::MalformedJson, None)
        );
    }

    #[test]
    fn an_integral_decimal_is_the_integer_to_decoder_and_fingerprint() {
        let written = sample().to_json();
        for (quantity, version) in [("2.0", "1.0"), ("2e0", "1E0"), ("0.2e1", "10e-1")] {
            let text = String::from_utf8(written.clone())
                .unwrap()
                .replacen(r#""quantity":2"#, &format!(r#""quantity":{quantity}"#), 1)
                .replacen(
                    r#""schema_version":1"#,
                    &format!(r#""schema_version":{version}"#),
                    1,
                );
            assert_eq!(decode_event(text.as_bytes(), &[]), Ok(sample()), "{text}");
            assert_eq!(
                fingerprint_of(text.as_bytes(), &[]),
                fingerprint_of(&written, &[]),
                "{text}"
            );
        }
        // A fraction is no quantity.
        let text =
            String::from_utf8(written)
                .unwrap()
                .replacen(r#""quantity":2"#, r#""quantity":2.5"#, 1);
        assert_eq!(
            decode_event(text.as_bytes(), &[]).unwrap_err().reason,
            ParkReason::InvalidField
        );
    }

    #[test]
    fn numbers_are_compared_as_exact_decimals() {
        let time = "2026-12-02T12:00:00Z";
        let same = [
            ("2e18", "2000000000000000000"),
            ("-2E+18", "-2000000000000000000"),
            ("1.5", "1.50"),
            ("1.5", "15e-1"),
            ("0", "-0.0"),
            ("1e300", "1000e297"),
            ("0.1", "0.10"),
        ];
        for (one, other) in same {
            assert_eq!(
                fingerprint_of(&spelled(time, one), &[]),
                fingerprint_of(&spelled(time, other), &[]),
                "{one} and {other}"
            );
        }
        let different = [
            ("9007199254740993.0", "9007199254740992"),
            ("0.1", "0.10000000000000001"),
            ("1e400", "1e401"),
            ("2", "\"2\""),
            ("1.5", "1.25"),
        ];
        for (one, other) in different {
            assert_ne!(
                fingerprint_of(&spelled(time, one), &[]),
                fingerprint_of(&spelled(time, other), &[]),
                "{one} and {other}"
            );
        }
    }

    #[test]
    fn a_re_spelled_event_time_is_the_same_event() {
        let written = spelled("2026-12-02T12:00:00.123Z", "1");
        for again in [
            "2026-12-02T12:00:00.123000Z",
            "2026-12-02T12:00:00.123+00:00",
            "2026-12-02t13:00:00.123+01:00",
            "2026-12-02T06:30:00.123-05:30",
        ] {
            assert_eq!(
                fingerprint_of(&written, &[]),
                fingerprint_of(&spelled(again, "1"), &[]),
                "{again}"
            );
        }
        assert_ne!(
            fingerprint_of(&written, &[]),
            fingerprint_of(&spelled("2026-12-02T12:00:00.124Z", "1"), &[])
        );
        // Only the event time is an instant: another member is its text.
        let other = |text: &str| {
            sample_bytes(|v| {
                v["note"] = text.into();
            })
        };
        assert_ne!(
            fingerprint_of(&other("2026-12-02T12:00:00Z"), &[]),
            fingerprint_of(&other("2026-12-02T12:00:00+00:00"), &[])
        );
    }

    #[test]
    fn an_event_id_is_compared_as_the_uuid_it_names() {
        let written = sample().to_json();
        let upper = sample_bytes(|v| {
            v["event_id"] = sample().message_id.to_string().to_uppercase().into();
        });
        assert_eq!(fingerprint_of(&written, &[]), fingerprint_of(&upper, &[]));
    }

    #[test]
    fn cloudevents_header_keys_are_read_ignoring_ascii_case() {
        let id = "0b9f5a3e-7f43-4c59-9d0e-2f6e1c3f0a11";
        let mut value = sample_json();
        for name in ["event_id", "event_type", "occurred_at"] {
            value.as_object_mut().unwrap().remove(name);
        }
        let bytes = serde_json::to_vec(&value).unwrap();
        let expected = OrderPlaced {
            message_id: Uuid::parse_str(id).unwrap(),
            ..sample()
        };
        for (id_key, type_key, time_key) in [
            ("CE_ID", "CE_TYPE", "CE_TIME"),
            ("Ce_Id", "ce_Type", "cE_time"),
        ] {
            let headers = [
                header_of(id_key, id),
                header_of(type_key, "OrderPlaced"),
                header_of(time_key, "2026-12-02T12:00:00Z"),
            ];
            assert_eq!(
                decode_event(&bytes, &headers),
                Ok(expected.clone()),
                "{headers:?}"
            );
        }
        // The last header of a name wins, whatever its case.
        let headers = [
            header_of("ce_type", "OrderPlaced"),
            header_of("CE_TYPE", "OrderCancelled"),
        ];
        assert_eq!(
            decode_event(&sample().to_json(), &headers)
                .unwrap_err()
                .detail,
            "ce_type \"OrderCancelled\""
        );
    }

    #[test]
    fn a_missing_order_id_is_said_to_be_missing() {
        for (edit, detail) in [
            (None, "order_id is missing"),
            (Some(serde_json::json!(7)), "order_id is not a string"),
            (
                Some(serde_json::json!("ORD 1")),
                "order_id must be 1-128 chars of [A-Za-z0-9._:-]",
            ),
        ] {
            let bytes = sample_bytes(|v| match edit {
                None => {
                    v.as_object_mut().unwrap().remove("order_id");
                }
                Some(other) => v["order_id"] = other,
            });
            let rejection = decode_event(&bytes, &[]).unwrap_err();
            assert_eq!(
                (rejection.reason, rejection.detail.as_str()),
                (ParkReason::InvalidField, detail)
            );
        }
    }

    #[test]
    fn a_payload_that_is_not_json_is_explained_in_words() {
        for (payload, detail) in [
            (&b"garbage"[..], "not JSON: expected a value at byte 0"),
            (
                b"{\"a\":1,}",
                "not JSON: expected a key in quotes at byte 7",
            ),
            (b"{\"a\" 1}", "not JSON: expected ':' after a key at byte 5"),
            (
                b"{\"a\":1} x",
                "not JSON: unexpected text after the value at byte 8",
            ),
            (
                b"{\"a\":\"b",
                "not JSON: a string without its closing quote at byte 5",
            ),
            (
                b"{\"a\":01}",
                "not JSON: a number with a leading zero at byte 5",
            ),
            (b"{\"a\":\xff}", "not JSON: not UTF-8 at byte 5"),
            (b"{\"a\":[1 2]}", "not JSON: expected ',' or ']' at byte 8"),
        ] {
            let rejection = decode_event(payload, &[]).unwrap_err();
            assert_eq!(
                (rejection.reason, rejection.detail.as_str()),
                (ParkReason::MalformedJson, detail),
                "{}",
                String::from_utf8_lossy(payload)
            );
        }
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = decode(Some(&bytes), &[]);
        }

        #[test]
        fn arbitrary_json_text_never_panics(text in "[{}\\[\\]\":,0-9a-z_ .\\-]{0,200}") {
            let _ = decode(Some(text.as_bytes()), &[header_of("ce_time", &text)]);
        }

        #[test]
        fn mutated_valid_events_never_panic(
            position in 0usize..200,
            byte in any::<u8>(),
            header in proptest::option::of("[ -~]{0,40}"),
        ) {
            let mut bytes = sample().to_json();
            let position = position % bytes.len();
            bytes[position] = byte;
            let headers: Vec<Header> = header.iter().map(|h| header_of("ce_id", h)).collect();
            let _ = decode(Some(&bytes), &headers);
        }

        #[test]
        fn mutated_structured_envelopes_never_panic(
            position in 0usize..400,
            byte in any::<u8>(),
            content_type in proptest::option::of("[ -~]{0,40}"),
        ) {
            let mut bytes = serde_json::to_vec(&envelope_json()).unwrap();
            let position = position % bytes.len();
            bytes[position] = byte;
            let headers: Vec<Header> =
                content_type.iter().map(|h| header_of("content-type", h)).collect();
            let _ = decode(Some(&bytes), &headers);
        }

        #[test]
        fn arbitrary_envelope_members_never_panic(
            member in "(specversion|id|type|time|data|data_base64|event_id|occurred_at|schema_version)",
            text in "[{}\\[\\]\":,0-9a-z_ .\\-]{0,80}",
            inside_data in any::<bool>(),
        ) {
            let mut value = envelope_json();
            let replacement = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
            if inside_data {
                value["data"][member.as_str()] = replacement;
            } else {
                value[member.as_str()] = replacement;
            }
            let bytes = serde_json::to_vec(&value).unwrap();
            let _ = decode(Some(&bytes), &[structured_content_type()]);
            let _ = decode(Some(&bytes), &[]);
        }

        #[test]
        fn valid_events_round_trip(
            order in "[A-Za-z0-9._:-]{1,128}",
            quantities in proptest::collection::vec(1i32..=10_000, 1..20),
            seconds in 0i64..4_000_000_000,
            nanos in 0u32..1_000_000_000,
        ) {
            let event = OrderPlaced {
                message_id: Uuid::new_v4(),
                order_id: order,
                occurred_at: Utc.timestamp_opt(seconds, nanos).unwrap(),
                lines: quantities.iter().enumerate()
                    .map(|(i, q)| OrderLine { sku: format!("SKU-{i}"), quantity: *q })
                    .collect(),
            };
            prop_assert_eq!(decode_event(&event.to_json(), &[]), Ok(event));
        }
    }
}
