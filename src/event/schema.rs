//! The `OrderPlaced` schema: its limits, its type and version, the event
//! as the service holds it, and its canonical JSON (`to_json`), which the
//! load generator and the tests send, so there is exactly one definition
//! of the schema (docs/design.md#the-event).

use chrono::{DateTime, NaiveDate, SecondsFormat, Utc};
use uuid::Uuid;

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
pub(super) fn event_time_text(time: DateTime<Utc>) -> String {
    time.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

#[cfg(test)]
mod tests {
    use crate::event::testing::*;
    use crate::event::*;
    use chrono::{NaiveDate, TimeZone, Utc};
    use proptest::prelude::*;
    use uuid::Uuid;

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

    proptest! {
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
