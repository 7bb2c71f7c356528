//! The poison breaker: a burst of invalid records holds consumption (paused,
//! unready, a metric and a log line) until an operator resumes it; what
//! follows the burst waits in Kafka and is applied after, nothing lost or
//! skipped; a member started while it holds holds too.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_burst_of_invalid_records_holds_consumption_until_resumed() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let spec = ConsumerSpec::new(&db, &topic)
        .env("INBOX_POISON_BREAKER_CONSECUTIVE", "20")
        .env("BATCH_MAX_RECORDS", "10");
    let before: Vec<_> = (0..3)
        .map(|i| order(&format!("ORD-BREAK-{i}"), &[("SKU-1", 1)]))
        .collect();
    let mut burst: Vec<Outgoing> = before.iter().map(Outgoing::event).collect();
    burst.extend((0..30).map(|i| Outgoing::raw(&format!("junk-{i}"), b"{not json")));
    produce(&producer(), &topic, &burst).await;
    let consumer = spec.start();
    wait_until(Duration::from_secs(60), "the breaker opened", || async {
        consumer.metric("inbox_poison_breaker_open").await == 1.0
    })
    .await;
    let (status, body) = consumer.get("/readyz").await.expect("readyz answers");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("poison_breaker_open=true"), "{body}");
    assert!(
        consumer.log_text().contains("poison breaker open"),
        "the log says why it stopped"
    );
    let (ok, out, _) = spec.cli("breaker", &["status"]);
    assert!(ok && out.starts_with("held since"), "{out}");

    // What comes after waits: not applied while the breaker holds.
    let after: Vec<_> = (0..5)
        .map(|i| order(&format!("ORD-AFTER-{i}"), &[("SKU-1", 2)]))
        .collect();
    produce(
        &producer(),
        &topic,
        &after.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;
    let parked_when_held = db.parked().await.len();
    assert!((20..=30).contains(&parked_when_held), "{parked_when_held}");
    // Two checks of the breaker's state go by: still held, nothing applied.
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(db.ledger_rows().await, 3, "nothing applied while held");
    assert_eq!(db.parked().await.len(), parked_when_held);

    // A member started now finds it held and holds too.
    consumer.stop().await;
    let restarted = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the restarted member holds",
        || async { restarted.metric("inbox_poison_breaker_open").await == 1.0 },
    )
    .await;
    assert_eq!(db.ledger_rows().await, 3);

    let (ok, out, _) = spec.cli("breaker", &["resume"]);
    assert!(ok && out.starts_with("resumed"), "{out}");
    wait_committed(&spec, 38).await;
    assert_eq!(
        db.ledger_rows().await,
        8,
        "everything after the burst applied"
    );
    assert_eq!(db.parked().await.len(), 30, "every junk record parked once");
    assert_eq!(db.reserved("SKU-1").await, 3 + 10);
    assert_eq!(restarted.metric("inbox_poison_breaker_open").await, 0.0);
    let (status, _) = restarted.get("/readyz").await.expect("readyz answers");
    assert_eq!(status, 200);
    let (ok, out, _) = spec.cli("breaker", &["resume"]);
    assert!(ok && out.contains("nothing to resume"), "{out}");
    restarted.stop().await;
}
