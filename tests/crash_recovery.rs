//! Crashes at the worst moments lose nothing and apply nothing twice: right
//! after the database commit and before the offset commit (a fail point: the
//! restarted consumer starts at the database's position), and
//! kill -9 at random moments over a stream with duplicates.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use inventory_inbox::event::OrderPlaced;
use rand::{Rng, SeedableRng};

/// Expected per-SKU reservations of a set of unique orders.
fn expected_reserved(events: &[OrderPlaced]) -> BTreeMap<String, i64> {
    let mut reserved = BTreeMap::new();
    for event in events {
        for line in &event.lines {
            *reserved.entry(line.sku.clone()).or_insert(0) += i64::from(line.quantity);
        }
    }
    reserved
}

async fn assert_reconciled(db: &TestDb, events: &[OrderPlaced]) {
    assert_eq!(db.ledger_rows().await, events.len() as i64, "ledger rows");
    let reserved: BTreeMap<String, i64> = db
        .stock()
        .await
        .into_iter()
        .filter(|(_, (_, reserved))| *reserved > 0)
        .map(|(sku, (_, reserved))| (sku, reserved))
        .collect();
    assert_eq!(reserved, expected_reserved(events), "reserved per SKU");
    let lines: usize = events.iter().map(|e| e.lines.len()).sum();
    assert_eq!(db.reservations().await.len(), lines, "reservation rows");
    assert!(db.parked().await.is_empty(), "nothing parked");
}

#[tokio::test]
async fn crash_between_db_commit_and_offset_commit_applies_each_event_once() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000_000)]).await;
    let events: Vec<OrderPlaced> = (0..50)
        .map(|i| order(&format!("ORD-{i}"), &[("SKU-1", 1 + i % 5)]))
        .collect();
    produce(
        &producer(),
        &topic,
        &events.iter().map(Outgoing::event).collect::<Vec<_>>(),
    )
    .await;

    let spec = ConsumerSpec::new(&db, &topic);
    let mut crashing = spec
        .clone()
        .env("INBOX_FAILPOINT", "after_db_commit")
        .env("BATCH_MAX_RECORDS", "10")
        .start();
    let status = crashing.wait(Duration::from_secs(60)).await;
    assert!(!status.success(), "the fail point aborts the process");
    let applied_before_crash = db.ledger_rows().await;
    assert!(
        (1..50).contains(&applied_before_crash),
        "one batch committed in the database: {applied_before_crash}"
    );
    assert_eq!(
        committed_offsets(&spec.group, &topic, 1)[&0],
        -1001,
        "no offset reached Kafka"
    );

    let restarted = spec.start();
    wait_committed(&spec, 50).await;
    assert_reconciled(&db, &events).await;
    // The restarted consumer starts at the database's position (docs/design.md#positions),
    // past the batch whose offset never reached Kafka: not even redelivered.
    assert!(
        restarted.log_text().contains("from_database=1"),
        "started at the database's position"
    );
    assert_eq!(
        restarted.metric("inbox_processed_total").await,
        (50 - applied_before_crash) as f64,
        "only what the database lacked was applied"
    );
    assert_eq!(
        restarted.metric("inbox_duplicate_ignored_total").await,
        0.0,
        "the batch committed before the crash is not read again"
    );
    restarted.stop().await;
}

#[tokio::test]
async fn kill_nine_at_random_moments_loses_and_doubles_nothing() {
    const PARTITIONS: i32 = 12;
    const UNIQUE: usize = 10_000;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    let skus: Vec<String> = (0..20).map(|i| format!("SKU-{i}")).collect();
    let stock: Vec<(&str, i64)> = skus.iter().map(|s| (s.as_str(), 1_000_000_000)).collect();
    db.seed_stock(&stock).await;

    let mut rng = rand::rngs::StdRng::seed_from_u64(0x1b0b);
    let events: Vec<OrderPlaced> = (0..UNIQUE)
        .map(|i| {
            let first = rng.gen_range(0..skus.len());
            let count = rng.gen_range(1..=3);
            let lines: Vec<(&str, i32)> = (0..count)
                .map(|k| {
                    (
                        skus[(first + k * 7) % skus.len()].as_str(),
                        rng.gen_range(1..=5),
                    )
                })
                .collect();
            order(&format!("ORD-{i}"), &lines)
        })
        .collect();
    // The stream: every event once, and 10 % of them again a little later.
    let mut stream: Vec<Outgoing> = Vec::with_capacity(UNIQUE * 11 / 10);
    for (i, event) in events.iter().enumerate() {
        stream.push(Outgoing::event(event));
        if i % 10 == 9 {
            stream.push(Outgoing::event(
                &events[rng.gen_range(i.saturating_sub(200)..=i)],
            ));
        }
    }
    let total = stream.len() as i64;
    let producing = {
        let topic = topic.clone();
        tokio::spawn(async move {
            let producer = producer();
            for chunk in stream.chunks(500) {
                produce(&producer, &topic, chunk).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })
    };

    // Static membership: a restarted process takes its partitions back at
    // once instead of waiting for the killed one's session to expire.
    let spec = ConsumerSpec::new(&db, &topic)
        .env("KAFKA_PROPERTY_GROUP_INSTANCE_ID", "crash-loop")
        // Concurrent lanes of distinct partitions, crashed at random too.
        .env("DB_POOL_SIZE", "3");
    let mut kills = 0;
    while kills < 8 {
        let consumer = spec.start();
        tokio::time::sleep(Duration::from_millis(rng.gen_range(300..2_000))).await;
        consumer.kill().await;
        kills += 1;
    }
    producing.await.expect("producer task");
    let applied_by_killed = db.ledger_rows().await;
    assert!(
        applied_by_killed > 0,
        "the killed consumers were doing real work when killed"
    );
    let last = spec.start();
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        total,
        Duration::from_secs(120),
    )
    .await;
    assert_reconciled(&db, &events).await;
    last.stop().await;
}
