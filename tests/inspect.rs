//! `inventory-inbox inspect`: one event, order or record looked up in the
//! database, with the verdict in one line, for the person on call
//! (docs/runbook.md).

mod common;

use common::*;
use uuid::Uuid;

fn inspected(spec: &ConsumerSpec, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (ok, out, err) = spec.cli("inspect", &all);
    assert!(ok, "inspect {args:?} failed: {out}{err}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("inspect {args:?}: {e}: {out}"))
}

fn verdict(found: &serde_json::Value) -> &str {
    found["verdict"].as_str().expect("a verdict")
}

#[tokio::test]
async fn an_event_an_order_and_a_record_are_answered_from_the_database() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100), ("SKU-2", 1)]).await;
    let first = order("ORD-INSPECT-1", &[("SKU-1", 2), ("SKU-2", 5)]);
    // Another event of the same order: a business duplicate.
    let again = order("ORD-INSPECT-1", &[("SKU-1", 2)]);
    let records = [
        Outgoing::event(&first),
        Outgoing::event(&first),
        Outgoing::event(&again),
        Outgoing::raw("X", b"junk"),
    ];
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 4).await;
    consumer.stop().await;

    let event = first.message_id.to_string();
    let found = inspected(&spec, &["--event", &event]);
    assert!(
        verdict(&found).contains("applied once") && verdict(&found).contains("from 0:0"),
        "{found}"
    );
    assert!(
        verdict(&found).contains("1 line(s) reserved, 1 rejected"),
        "{found}"
    );
    assert_eq!(found["ledger"].as_array().unwrap().len(), 1);
    assert_eq!(found["lines"].as_array().unwrap().len(), 2);

    let found = inspected(&spec, &["--event", &again.message_id.to_string()]);
    assert!(verdict(&found).contains("business duplicate"), "{found}");

    let found = inspected(&spec, &["--order", "ORD-INSPECT-1"]);
    assert!(
        verdict(&found).contains("each line once") && verdict(&found).contains(&event),
        "{found}"
    );

    let found = inspected(&spec, &["--offset", "0:1"]);
    assert!(
        verdict(&found).contains(&format!("a redelivery of event {event}")),
        "{found}"
    );
    assert_eq!(found["position"], 4);

    let found = inspected(&spec, &["--offset", "0:3"]);
    assert!(
        verdict(&found).contains("parked as malformed_json"),
        "{found}"
    );

    let found = inspected(&spec, &["--event", &Uuid::new_v4().to_string()]);
    assert!(verdict(&found).contains("not in the ledger"), "{found}");

    // The human form leads with the same verdict.
    let (ok, out, _) = spec.cli("inspect", &["--event", &event]);
    assert!(
        ok && out.starts_with(&format!("event {event}: applied once")),
        "{out}"
    );

    // A malformed position is a one-line error naming the flag.
    let (ok, _, err) = spec.cli("inspect", &["--offset", "four"]);
    assert!(!ok && err.contains("--offset"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
}
