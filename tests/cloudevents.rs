//! CloudEvents made by the CloudEvents SDK itself (PyPI `cloudevents`,
//! pinned, run by `scripts/cloudevents-sdk.sh` in a venv it makes), in both
//! content modes of its Kafka binding and from both of its APIs, produced
//! byte for byte through the real broker into the real database: applied
//! under their CloudEvents id, `time` the event time when the data has none,
//! a redelivery a duplicate, another type parked (docs/design.md#the-event).
//!
//! The SDK's `cloudevents.v1.kafka` sends a structured event as
//! `application/json` (the consumer knows it by its shape), its
//! `cloudevents.core.bindings.kafka` as `application/cloudevents+json`.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use chrono::{DateTime, Days, NaiveDate, SecondsFormat, Utc};
use common::*;
use serde_json::{json, Value};
use sqlx::Row;
use uuid::Uuid;

/// The Kafka messages the CloudEvents SDK made of `events` (see
/// `scripts/cloudevents_messages.py`), in order, as records to produce as
/// they are. A venv that cannot be made fails the test.
fn sdk_messages(events: &[Value]) -> Vec<Outgoing> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/cloudevents-sdk.sh");
    let mut child = Command::new(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/cloudevents-sdk.sh");
    {
        let mut stdin = child.stdin.take().expect("the script's stdin");
        for event in events {
            writeln!(stdin, "{event}").expect("write an event to the script");
        }
    }
    let output = child.wait_with_output().expect("wait for the script");
    assert!(
        output.status.success(),
        "`scripts/cloudevents-sdk.sh` failed ({}); `scripts/test-deps.sh` installs python3-venv:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let messages: Vec<Outgoing> = String::from_utf8(output.stdout)
        .expect("the script writes UTF-8")
        .lines()
        .map(|line| {
            let message: Value = serde_json::from_str(line).expect("a message as JSON");
            let text = |value: &Value| value.as_str().expect("text").to_owned();
            Outgoing {
                key: text(&message["key"]),
                payload: text(&message["value"]).into_bytes(),
                headers: message["headers"]
                    .as_array()
                    .expect("headers")
                    .iter()
                    .map(|pair| (text(&pair[0]), text(&pair[1])))
                    .collect(),
                partition: None,
                timestamp: None,
            }
        })
        .collect();
    assert_eq!(messages.len(), events.len(), "one message per event");
    messages
}

/// An event for the SDK: `api` "v1" or "core", `mode` "binary" or
/// "structured", the order as its data (keyed by its order id).
fn cloudevent(
    api: &str,
    mode: &str,
    id: Uuid,
    event_type: &str,
    time: DateTime<Utc>,
    data: Value,
) -> Value {
    json!({
        "api": api,
        "mode": mode,
        "attributes": {
            "id": id.to_string(),
            "type": event_type,
            "source": "/shop/checkout",
            "time": time.to_rfc3339_opts(SecondsFormat::Secs, true),
            "datacontenttype": "application/json",
            "partitionkey": data["order_id"],
        },
        "data": data,
    })
}

/// An order as CloudEvents data: no `event_id` and no `occurred_at` (the
/// attributes give them). Binary mode reads the value as the event, which
/// must name its `event_type`; in structured mode `type` does.
fn order_data(order_id: &str, quantity: i32, mode: &str) -> Value {
    let mut data = json!({
        "schema_version": 1,
        "order_id": order_id,
        "lines": [{"sku": "SKU-CE", "quantity": quantity}],
    });
    if mode == "binary" {
        data["event_type"] = "OrderPlaced".into();
    }
    data
}

/// Noon (UTC) `days` days ago: an event time whose day is not today's.
fn noon_days_ago(days: u64) -> DateTime<Utc> {
    (Utc::now().date_naive() - Days::new(days))
        .and_hms_opt(12, 0, 0)
        .expect("noon")
        .and_utc()
}

fn header<'a>(message: &'a Outgoing, key: &str) -> Option<&'a str> {
    message
        .headers
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// message_id -> event_day of every ledger row.
async fn ledger(db: &TestDb) -> BTreeMap<Uuid, NaiveDate> {
    sqlx::query("SELECT message_id, event_day FROM processed_inbox")
        .fetch_all(&db.pool)
        .await
        .expect("read the ledger")
        .into_iter()
        .map(|row| (row.get("message_id"), row.get("event_day")))
        .collect()
}

#[tokio::test]
async fn sdk_events_in_both_modes_are_applied_once_under_their_cloudevents_id() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-CE", 100)]).await;
    let cases = [
        ("v1", "binary", "ORD-CE-V1-BIN", 1, 1),
        ("v1", "structured", "ORD-CE-V1-STR", 2, 2),
        ("core", "binary", "ORD-CE-CORE-BIN", 3, 3),
        ("core", "structured", "ORD-CE-CORE-STR", 4, 4),
    ];
    let ids: Vec<Uuid> = cases.iter().map(|_| Uuid::new_v4()).collect();
    let events: Vec<Value> = cases
        .iter()
        .zip(&ids)
        .map(|((api, mode, order_id, quantity, days), id)| {
            cloudevent(
                api,
                mode,
                *id,
                "OrderPlaced",
                noon_days_ago(*days),
                order_data(order_id, *quantity, mode),
            )
        })
        .collect();
    let messages = sdk_messages(&events);
    // What the SDK made: ce_ headers in binary mode; in structured mode none,
    // and the content type each API gives it.
    for (message, (api, mode, ..)) in messages.iter().zip(&cases) {
        let binary = message.headers.iter().any(|(k, _)| k.starts_with("ce_"));
        assert_eq!(binary, *mode == "binary", "{api} {mode}: {message:?}");
    }
    assert_eq!(
        header(&messages[1], "content-type"),
        Some("application/json")
    );
    assert_eq!(
        header(&messages[3], "content-type"),
        Some("application/cloudevents+json")
    );

    produce(&producer(), &topic, &messages).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 4).await;

    // Each under its CloudEvents id, on the day of its `time` (no data
    // names an occurred_at).
    let expected: BTreeMap<Uuid, NaiveDate> = cases
        .iter()
        .zip(&ids)
        .map(|((.., days), id)| (*id, noon_days_ago(*days).date_naive()))
        .collect();
    assert_eq!(ledger(&db).await, expected);
    let reservations = db.reservations().await;
    for (_, _, order_id, quantity, _) in &cases {
        assert_eq!(
            reservations.get(&(order_id.to_string(), "SKU-CE".to_string())),
            Some(&(*quantity, "reserved".to_string())),
            "{order_id}"
        );
    }
    assert_eq!(db.reserved("SKU-CE").await, 10);

    // The same messages again: each a duplicate, nothing applied twice.
    produce(&producer(), &topic, &messages).await;
    wait_committed(&spec, 8).await;
    assert_eq!(ledger(&db).await, expected);
    assert_eq!(db.reserved("SKU-CE").await, 10);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 4.0);
    assert_eq!(db.parked().await, vec![]);
    consumer.stop().await;
}

#[tokio::test]
async fn sdk_event_of_another_type_is_parked_as_unsupported_event_type() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-CE", 100)]).await;
    // In binary mode the data says OrderPlaced: the type attribute (the
    // ce_type header) is the event's type all the same.
    let events: Vec<Value> = ["v1", "core"]
        .iter()
        .flat_map(|api| ["structured", "binary"].map(|mode| (api, mode)))
        .map(|(api, mode)| {
            cloudevent(
                api,
                mode,
                Uuid::new_v4(),
                "OrderCancelled",
                noon_days_ago(1),
                order_data(&format!("ORD-CE-{api}-{mode}"), 1, mode),
            )
        })
        .collect();
    let messages = sdk_messages(&events);

    produce(&producer(), &topic, &messages).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 4).await;

    let parked: Vec<(String, String)> =
        sqlx::query("SELECT reason, error FROM inbox_parked ORDER BY kafka_offset")
            .fetch_all(&db.pool)
            .await
            .expect("read parked")
            .into_iter()
            .map(|row| (row.get("reason"), row.get("error")))
            .collect();
    assert_eq!(parked.len(), 4, "{parked:?}");
    for (reason, error) in &parked {
        assert_eq!(reason, "unsupported_event_type");
        assert!(
            error.contains("OrderCancelled"),
            "the reason names the type: {error}"
        );
    }
    assert_eq!(db.ledger_rows().await, 0);
    assert_eq!(db.reserved("SKU-CE").await, 0);
    consumer.stop().await;
}

#[tokio::test]
async fn one_cloudevent_sent_in_both_modes_is_applied_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-CE", 100)]).await;
    // One event, its data what binary mode needs, rendered in each mode.
    let id = Uuid::new_v4();
    let data = order_data("ORD-CE-BOTH", 5, "binary");
    let events: Vec<Value> = ["binary", "structured"]
        .iter()
        .map(|mode| {
            cloudevent(
                "core",
                mode,
                id,
                "OrderPlaced",
                noon_days_ago(1),
                data.clone(),
            )
        })
        .collect();
    let messages = sdk_messages(&events);

    produce(&producer(), &topic, &messages).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 2).await;

    // The fingerprint is of the data in both modes: a duplicate, not an
    // id conflict.
    assert_eq!(
        ledger(&db).await,
        BTreeMap::from([(id, noon_days_ago(1).date_naive())])
    );
    assert_eq!(db.reserved("SKU-CE").await, 5);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 1.0);
    assert_eq!(db.parked().await, vec![]);
    consumer.stop().await;
}
