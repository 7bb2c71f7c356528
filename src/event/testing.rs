//! Events, envelopes and shortcuts the tests of every part of `event` share.

use chrono::{TimeZone, Utc};
use uuid::Uuid;

use super::*;

pub(super) fn sample() -> OrderPlaced {
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

pub(super) fn sample_json() -> serde_json::Value {
    serde_json::from_slice(&sample().to_json()).unwrap()
}

pub(super) fn reason_of(value: &serde_json::Value, headers: &[Header]) -> ParkReason {
    let bytes = serde_json::to_vec(value).unwrap();
    decode_event(&bytes, headers).unwrap_err().reason
}

pub(super) fn with(
    mutate: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) -> ParkReason {
    let mut value = sample_json();
    mutate(value.as_object_mut().unwrap());
    reason_of(&value, &[])
}

pub(super) fn header_of(key: &str, value: &str) -> Header {
    Header {
        key: key.into(),
        value: Some(value.as_bytes().to_vec()),
    }
}

pub(super) type Edit = Box<dyn Fn(&mut serde_json::Map<String, serde_json::Value>)>;

/// Edits of a valid event that each break one limit of its fields.
pub(super) fn limit_violations() -> Vec<Edit> {
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

/// The sample as a structured-mode CloudEvent: its id and time as
/// attributes, its order (with `schema_version`, without `event_id`,
/// `event_type` or `occurred_at`) as `data`.
pub(super) fn envelope_json() -> serde_json::Value {
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

pub(super) fn decode_value(
    value: &serde_json::Value,
    headers: &[Header],
) -> Result<OrderPlaced, Rejection> {
    decode_event(&serde_json::to_vec(value).unwrap(), headers)
}

/// The rejection of the sample envelope after `mutate`, read by its shape.
pub(super) fn envelope_with(mutate: impl FnOnce(&mut serde_json::Value)) -> Rejection {
    let mut value = envelope_json();
    mutate(&mut value);
    decode_value(&value, &[]).unwrap_err()
}

pub(super) fn structured_content_type() -> Header {
    header_of("content-type", "application/cloudevents+json")
}

/// The event alone of a record that decodes.
pub(super) fn decode_event(payload: &[u8], headers: &[Header]) -> Result<OrderPlaced, Rejection> {
    decode(Some(payload), headers).map(|decoded| decoded.event)
}

/// The sample's JSON after `mutate`, as bytes.
pub(super) fn sample_bytes(mutate: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut value = sample_json();
    mutate(&mut value);
    serde_json::to_vec(&value).unwrap()
}
