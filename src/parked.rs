//! What a parked record keeps (docs/design.md#tables): the raw payload, bounded, and the
//! headers as JSON with secrets redacted. Pure: the rows are written by the
//! store in the batch's transaction.

use std::borrow::Cow;

use uuid::Uuid;

use crate::batch::InboundRecord;
use crate::event::{Header, ParkReason, MAX_PAYLOAD_BYTES};

/// Header names whose values never leave the process in clear.
const SECRET_HEADER_MARKERS: [&str; 9] = [
    "password",
    "secret",
    "token",
    "authorization",
    "credential",
    "api-key",
    "apikey",
    "cookie",
    "session",
];

/// Headers whose value, when present, ties a parked record to a trace or a
/// request in the producer's logs (compared without case, `_` as `-`).
const TRACE_HEADERS: [&str; 4] = [
    "traceparent",
    "ce-traceparent",
    "correlation-id",
    "x-correlation-id",
];

/// Longest text taken from a record into a log line.
const LOG_TEXT_CHARS: usize = 128;

/// A row for `inbox_parked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedRow {
    /// The row's id in `inbox_parked`, once the database wrote it.
    pub id: Option<i64>,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub message_id: Option<Uuid>,
    /// The order (the aggregate): from the event, else the record key. For
    /// logs only.
    pub order_id: Option<String>,
    /// A trace or correlation header of the record, for logs only.
    pub trace: Option<String>,
    /// The trace id of the batch span that parked it (tracing on).
    pub trace_id: Option<String>,
    pub reason: ParkReason,
    pub error: String,
    pub payload: Vec<u8>,
    pub headers_json: String,
}

impl ParkedRow {
    /// `order_id` is the event's when it was decoded; else the record key
    /// stands for it.
    pub fn new(
        record: &InboundRecord,
        reason: ParkReason,
        error: String,
        message_id: Option<Uuid>,
        order_id: Option<&str>,
    ) -> Self {
        let payload = record.payload.as_deref().unwrap_or_default();
        let order_id = order_for_log(record, order_id);
        ParkedRow {
            id: None,
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            message_id,
            order_id,
            trace: trace_header(&record.headers),
            trace_id: None,
            reason,
            error: storable_text(&error).into_owned(),
            payload: payload[..payload.len().min(MAX_PAYLOAD_BYTES)].to_vec(),
            headers_json: headers_json(&record.headers),
        }
    }
}

/// The order of a parked row, for `parked list`: its event's when the
/// stored payload (kept for INBOX_PARKED_PAYLOAD_DAYS) decodes, else the
/// record key, which producers set to the order id. As [`ParkedRow::new`]
/// keeps it for the log line of the parking.
pub fn stored_order_id(
    payload: Option<&[u8]>,
    headers_json: &str,
    key: Option<&[u8]>,
) -> Option<String> {
    payload
        .and_then(|payload| {
            crate::event::decode(Some(payload), &headers_from_json(headers_json)).ok()
        })
        .map(|decoded| log_text(decoded.order_id.as_bytes()))
        .or_else(|| key.map(log_text))
}

/// Text PostgreSQL can store: `text` and `jsonb` hold any character but
/// U+0000, which is written as the six characters `\u0000`.
pub fn storable_text(text: &str) -> Cow<'_, str> {
    if text.contains('\0') {
        Cow::Owned(text.replace('\0', "\\u0000"))
    } else {
        Cow::Borrowed(text)
    }
}

/// The headers with the values of secret ones replaced by `[redacted]`: what
/// leaves the process in a parked row and in a DLQ copy alike.
pub fn redacted(headers: &[Header]) -> Vec<Header> {
    headers
        .iter()
        .map(|h| Header {
            key: h.key.clone(),
            value: if is_secret(&h.key) {
                Some(REDACTED.as_bytes().to_vec())
            } else {
                h.value.clone()
            },
        })
        .collect()
}

const REDACTED: &str = "[redacted]";
/// Prefix of a header key that jsonb could not hold, written in hex.
const HEX_KEY_PREFIX: &str = "hex:";
/// The member of a header value that is not storable text: its bytes in hex.
const HEX_VALUE: &str = "hex";

/// A header key as text: itself when it is UTF-8, else `hex:` and its bytes
/// in hex (the form the parked row gives a key jsonb cannot hold).
pub fn header_key_text(key: &[u8]) -> String {
    match std::str::from_utf8(key) {
        Ok(text) => text.to_owned(),
        Err(_) => format!("{HEX_KEY_PREFIX}{}", hex(key)),
    }
}

/// The headers as a JSON object (the last value of a repeated key wins),
/// secrets redacted. A value that is UTF-8 without U+0000 is a JSON string;
/// any other bytes are `{"hex": "..."}` (jsonb refuses U+0000, and text must
/// be UTF-8); no value is null. A key jsonb cannot hold is `hex:` and its
/// bytes in hex. Any header of any record can thus be stored, and read back
/// byte for byte (see [`headers_from_json`]).
pub fn headers_json(headers: &[Header]) -> String {
    let object: serde_json::Map<String, serde_json::Value> = redacted(headers)
        .into_iter()
        .map(|h| {
            let key = if h.key.contains('\0') {
                format!("{HEX_KEY_PREFIX}{}", hex(h.key.as_bytes()))
            } else {
                h.key
            };
            let value = match h.value {
                None => serde_json::Value::Null,
                Some(bytes) => match String::from_utf8(bytes) {
                    Ok(text) if !text.contains('\0') => text.into(),
                    Ok(text) => serde_json::json!({ HEX_VALUE: hex(text.as_bytes()) }),
                    Err(error) => serde_json::json!({ HEX_VALUE: hex(error.as_bytes()) }),
                },
            };
            (key, value)
        })
        .collect();
    serde_json::Value::Object(object).to_string()
}

/// Headers back from their stored JSON (for a replay). Redacted values stay
/// redacted; only the CloudEvents headers and `content-type` matter to
/// decoding.
pub fn headers_from_json(json: &str) -> Vec<Header> {
    let Ok(serde_json::Value::Object(object)) = serde_json::from_str(json) else {
        return Vec::new();
    };
    object
        .into_iter()
        .map(|(key, value)| Header {
            key: match key.strip_prefix(HEX_KEY_PREFIX).and_then(unhex) {
                Some(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                None => key,
            },
            value: match value {
                serde_json::Value::String(text) => Some(text.into_bytes()),
                serde_json::Value::Object(object) => object
                    .get(HEX_VALUE)
                    .and_then(|v| v.as_str())
                    .and_then(unhex),
                _ => None,
            },
        })
        .collect()
}

/// The first trace or correlation header with a value, for logs.
fn trace_header(headers: &[Header]) -> Option<String> {
    headers.iter().find_map(|h| {
        let key = h.key.to_ascii_lowercase().replace('_', "-");
        if TRACE_HEADERS.contains(&key.as_str()) && !is_secret(&h.key) {
            h.value.as_deref().map(log_text)
        } else {
            None
        }
    })
}

/// Bytes from a record as a bounded, printable line of text.
/// The order a log line names for a record: its event's when it was
/// decoded, else the record key (the order id, SPEC §4), as text fit for a
/// log line.
pub fn order_for_log(record: &InboundRecord, order_id: Option<&str>) -> Option<String> {
    order_id
        .map(str::to_owned)
        .or_else(|| record.key.as_deref().map(log_text))
}

fn log_text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| !c.is_control())
        .take(LOG_TEXT_CHARS)
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

fn is_secret(key: &str) -> bool {
    let key = key.to_ascii_lowercase().replace('_', "-");
    SECRET_HEADER_MARKERS
        .iter()
        .any(|marker| key.contains(marker))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(key: &str, value: &str) -> Header {
        Header {
            key: key.into(),
            value: Some(value.as_bytes().to_vec()),
        }
    }

    #[test]
    fn secret_headers_are_redacted() {
        let json = headers_json(&[
            header("ce_id", "abc"),
            header("Authorization", "Bearer hunter2"),
            header("x_api_key", "hunter2"),
        ]);
        assert!(!json.contains("hunter2"), "{json}");
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(value["ce_id"], "abc");
        assert_eq!(value["Authorization"], "[redacted]");
    }

    #[test]
    fn headers_survive_the_round_trip_through_json() {
        let headers = vec![
            header("ce_id", "abc"),
            header("ce_time", "2026-12-02T00:00:00Z"),
        ];
        assert_eq!(headers_from_json(&headers_json(&headers)), headers);
    }

    #[test]
    fn any_header_bytes_are_stored_and_read_back() {
        let headers = vec![
            Header {
                key: "nul".into(),
                value: Some(b"a\0b".to_vec()),
            },
            Header {
                key: "latin1".into(),
                value: Some(vec![0xe9, 0xff, 0x00]),
            },
            Header {
                key: "k\0ey".into(),
                value: None,
            },
            header("ce_id", "abc"),
        ];
        let json = headers_json(&headers);
        assert!(!json.contains("\\u0000"), "{json}");
        let mut back = headers_from_json(&json);
        back.sort_by(|a, b| a.key.cmp(&b.key));
        let mut expected = headers.clone();
        expected.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(back, expected);
    }

    #[test]
    fn text_with_nul_is_made_storable() {
        assert_eq!(storable_text("a\0b"), "a\\u0000b");
        assert!(matches!(storable_text("plain"), Cow::Borrowed("plain")));
    }

    #[test]
    fn the_order_and_trace_of_a_parked_record_are_kept_for_logs() {
        let record = InboundRecord {
            topic: "t".into(),
            partition: 0,
            offset: 0,
            timestamp: None,
            key: Some(b"ORD-9".to_vec()),
            payload: Some(b"nope".to_vec()),
            headers: vec![header("TraceParent", "00-abc-def-01")],
        };
        let row = ParkedRow::new(&record, ParkReason::MalformedJson, "x".into(), None, None);
        assert_eq!(row.order_id.as_deref(), Some("ORD-9"));
        assert_eq!(row.trace.as_deref(), Some("00-abc-def-01"));
    }

    #[test]
    fn a_stored_record_is_of_its_events_order_else_of_its_key() {
        let event = crate::event::OrderPlaced {
            message_id: Uuid::new_v4(),
            order_id: "ORD-7".into(),
            occurred_at: chrono::Utc::now(),
            lines: vec![crate::event::OrderLine {
                sku: "SKU-1".into(),
                quantity: 1,
            }],
        };
        let order = |payload: Option<&[u8]>, key: Option<&[u8]>| {
            stored_order_id(payload, &headers_json(&[]), key)
        };
        assert_eq!(
            order(Some(&event.to_json()), Some(b"KEY-7")).as_deref(),
            Some("ORD-7")
        );
        // A payload that does not decode, or was cleared: the key, as text.
        assert_eq!(
            order(Some(b"nope"), Some(b"ORD-9\n")).as_deref(),
            Some("ORD-9")
        );
        assert_eq!(order(None, Some(b"ORD-9")).as_deref(), Some("ORD-9"));
        assert_eq!(order(None, None), None);
    }

    #[test]
    fn payloads_are_bounded() {
        let record = InboundRecord {
            topic: "t".into(),
            partition: 0,
            offset: 0,
            timestamp: None,
            key: None,
            payload: Some(vec![b'x'; MAX_PAYLOAD_BYTES * 2]),
            headers: vec![],
        };
        let row = ParkedRow::new(
            &record,
            ParkReason::PayloadTooLarge,
            "big".into(),
            None,
            None,
        );
        assert_eq!(row.payload.len(), MAX_PAYLOAD_BYTES);
    }
}
