//! A parked record's copy on the DLQ topic follows from its row in the
//! database, not from one batch's answer: a member killed between the
//! database commit and the copies leaves rows that owe them, and the
//! partition's next owner sends them, once.

mod common;

use std::time::Duration;

use common::*;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::ClientConfig;

/// Records on the topic's partition 0 (its high watermark).
fn records_on(topic: &str) -> i64 {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", KAFKA)
        .create()
        .expect("client");
    client
        .fetch_watermarks(topic, 0, Duration::from_secs(10))
        .expect("watermarks")
        .1
}

#[tokio::test]
async fn copies_a_crash_kept_from_the_dlq_are_sent_by_the_next_owner() {
    let topic = fresh_topic(1).await;
    let dlq = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100)]).await;
    let mut records: Vec<Outgoing> = (0..3)
        .map(|i| Outgoing::raw(&format!("BAD-{i}"), b"not json"))
        .collect();
    records.push(Outgoing::event(&order("ORD-1", &[("SKU-1", 1)])));
    produce(&producer(), &topic, &records).await;

    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.dlq_topic = dlq.clone();
    let mut crashing = spec
        .clone()
        .env("INBOX_FAILPOINT", "after_db_commit")
        .start();
    let status = crashing.wait(Duration::from_secs(60)).await;
    assert!(!status.success(), "the fail point aborts the process");
    let owed = "SELECT count(*) FROM inbox_parked WHERE dlq_sent_at IS NULL";
    assert_eq!(db.count(owed).await, 3, "parked, copies owed");
    assert_eq!(records_on(&dlq), 0, "no copy went out");

    let consumer = spec.start();
    wait_until(
        Duration::from_secs(60),
        "the owed copies sent and marked",
        || async { db.count(owed).await == 0 },
    )
    .await;
    assert_eq!(records_on(&dlq), 3, "each copy once");
    consumer.stop().await;
    assert_eq!(db.count("SELECT count(*) FROM inbox_parked").await, 3);
    assert_eq!(db.ledger_rows().await, 1);
}
