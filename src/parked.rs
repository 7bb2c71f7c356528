//! What a parked record keeps (SPEC §5): the raw payload, bounded, and the
//! headers as JSON with secrets redacted. Pure: the rows are written by the
//! store in the batch's transaction.

use uuid::Uuid;

use crate::batch::InboundRecord;
use crate::event::{Header, ParkReason, Rejection, MAX_PAYLOAD_BYTES};

/// Header names whose values never leave the process in clear.
const SECRET_HEADER_MARKERS: [&str; 6] = [
    "password",
    "secret",
    "token",
    "authorization",
    "credential",
    "api-key",
];

/// A row for `inbox_parked`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkedRow {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub message_id: Option<Uuid>,
    pub reason: ParkReason,
    pub error: String,
    pub payload: Vec<u8>,
    pub headers_json: String,
}

impl ParkedRow {
    /// The row of a record and the rejection that parks it.
    pub fn rejected(record: &InboundRecord, rejection: &Rejection) -> Self {
        ParkedRow::new(
            record,
            rejection.reason,
            rejection.detail.clone(),
            rejection.message_id,
        )
    }

    pub fn new(
        record: &InboundRecord,
        reason: ParkReason,
        error: String,
        message_id: Option<Uuid>,
    ) -> Self {
        let payload = record.payload.as_deref().unwrap_or_default();
        ParkedRow {
            topic: record.topic.clone(),
            partition: record.partition,
            offset: record.offset,
            message_id,
            reason,
            error,
            payload: payload[..payload.len().min(MAX_PAYLOAD_BYTES)].to_vec(),
            headers_json: headers_json(&record.headers),
        }
    }
}

/// The headers as a JSON object (the last value of a repeated key wins),
/// values as UTF-8 text (lossy) and secrets replaced by `"[redacted]"`.
pub fn headers_json(headers: &[Header]) -> String {
    let object: serde_json::Map<String, serde_json::Value> = headers
        .iter()
        .map(|h| {
            let value = if is_secret(&h.key) {
                serde_json::Value::String("[redacted]".into())
            } else {
                match &h.value {
                    Some(bytes) => String::from_utf8_lossy(bytes).into_owned().into(),
                    None => serde_json::Value::Null,
                }
            };
            (h.key.clone(), value)
        })
        .collect();
    serde_json::Value::Object(object).to_string()
}

/// Headers back from their stored JSON (for a replay). Redacted values stay
/// redacted; only the CloudEvents headers matter to decoding.
pub fn headers_from_json(json: &str) -> Vec<Header> {
    let Ok(serde_json::Value::Object(object)) = serde_json::from_str(json) else {
        return Vec::new();
    };
    object
        .into_iter()
        .map(|(key, value)| Header {
            key,
            value: value.as_str().map(|v| v.as_bytes().to_vec()),
        })
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
    fn payloads_are_bounded() {
        let record = InboundRecord {
            topic: "t".into(),
            partition: 0,
            offset: 0,
            key: None,
            payload: Some(vec![b'x'; MAX_PAYLOAD_BYTES * 2]),
            headers: vec![],
        };
        let row = ParkedRow::new(&record, ParkReason::PayloadTooLarge, "big".into(), None);
        assert_eq!(row.payload.len(), MAX_PAYLOAD_BYTES);
    }
}
