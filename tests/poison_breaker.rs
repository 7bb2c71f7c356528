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

/// An operator skips the junk while the breaker holds (`positions set`
/// past it, then `breaker resume`): the consumer goes on from the skip.
/// Seen before: it went on from where it held and parked every junk record,
/// while `positions list` said it was past them.
#[tokio::test]
async fn a_skip_set_while_the_breaker_holds_is_honoured_on_resume() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let spec = ConsumerSpec::new(&db, &topic)
        .env("INBOX_POISON_BREAKER_CONSECUTIVE", "5")
        .env("BATCH_MAX_RECORDS", "5");
    let junk: Vec<Outgoing> = (0..30)
        .map(|i| Outgoing::raw(&format!("junk-{i}"), b"{not json"))
        .collect();
    produce(&producer(), &topic, &junk).await;
    let consumer = spec.start();
    wait_until(Duration::from_secs(60), "the breaker opened", || async {
        consumer.metric("inbox_poison_breaker_open").await == 1.0
    })
    .await;
    let parked_when_held = db.parked().await.len();
    assert!(parked_when_held < 30, "{parked_when_held}");
    let good: Vec<Outgoing> = (0..3)
        .map(|i| Outgoing::event(&order(&format!("ORD-SKIP-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &good).await;

    let (ok, said) = spec.positions(&["set", "--offset", "30"]);
    assert!(ok, "positions set: {said}");
    let (ok, out, _) = spec.cli("breaker", &["resume"]);
    assert!(ok && out.starts_with("resumed"), "{out}");
    wait_committed(&spec, 33).await;
    assert_eq!(
        db.ledger_rows().await,
        3,
        "the records after the skip applied"
    );
    assert_eq!(
        db.parked().await.len(),
        parked_when_held,
        "nothing of what the operator skipped was read"
    );
    assert!(
        consumer
            .log_text()
            .contains("an operator set the partition's position"),
        "the log says whose move it followed"
    );
    let (ok, listed) = spec.positions(&["list", "--json"]);
    assert!(ok && listed.contains("\"position\":33"), "{listed}");
    consumer.stop().await;
}

/// A re-read of a topic that still holds an incident's junk, parked
/// before, is no new poison: the breaker stays closed (seen: it opened on
/// the re-read and after each resume). Junk not parked before still opens
/// it.
#[tokio::test]
async fn rereading_records_parked_before_does_not_open_the_breaker() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let junk = |from: usize, to: usize| -> Vec<Outgoing> {
        (from..to)
            .map(|i| Outgoing::raw(&format!("junk-{i}"), b"{not json"))
            .collect()
    };
    produce(&producer(), &topic, &junk(0, 60)).await;
    let off = ConsumerSpec::new(&db, &topic).env("INBOX_POISON_BREAKER_CONSECUTIVE", "0");
    let first = off.start();
    wait_committed(&off, 60).await;
    first.stop().await;
    assert_eq!(db.parked().await.len(), 60);

    let spec = ConsumerSpec::new(&db, &topic)
        .env("INBOX_POISON_BREAKER_CONSECUTIVE", "20")
        .env("BATCH_MAX_RECORDS", "10");
    let (ok, said) = spec.positions(&["set", "--offset", "earliest"]);
    assert!(ok, "positions set: {said}");
    let consumer = spec.start();
    wait_committed(&spec, 60).await;
    assert_eq!(consumer.metric("inbox_poison_breaker_open").await, 0.0);
    let (ok, out, _) = spec.cli("breaker", &["status"]);
    assert!(ok && out.contains("never opened"), "{out}");

    produce(&producer(), &topic, &junk(60, 90)).await;
    wait_until(
        Duration::from_secs(60),
        "new junk opens the breaker",
        || async { consumer.metric("inbox_poison_breaker_open").await == 1.0 },
    )
    .await;
    consumer.stop().await;
}
