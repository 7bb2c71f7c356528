//! The Kafka broker killed with -9 mid-run and started again: the consumer
//! survives the outage, reconnects, and afterwards every event is applied
//! exactly once and every offset committed, although offset commits in
//! flight at the kill are lost and their records are delivered again.
//!
//! The test kills a broker of its own (`PrivateKafka`), never the shared one
//! the tests running beside it use.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::private_kafka::PrivateKafka;
use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

const PARTITIONS: i32 = 6;
const UNIQUE_EVENTS: usize = 3_000;
/// Records produced per 100 ms: 150 events/s, about 20 s of traffic.
const RECORDS_PER_TICK: usize = 15;
const TICK: Duration = Duration::from_millis(100);
const DUPLICATE_EVERY: usize = 100;
const DUPLICATE_LAG: usize = 450;
/// Ledger rows to see before the broker is killed (about 2 s of traffic).
const ROWS_BEFORE_KILL: i64 = 300;
/// How long the broker stays dead before it is started again.
const OUTAGE: Duration = Duration::from_secs(5);
const SKUS: [&str; 5] = [
    "SKU-BRK-1",
    "SKU-BRK-2",
    "SKU-BRK-3",
    "SKU-BRK-4",
    "SKU-BRK-5",
];
/// Stock no run can exhaust, so every line is reserved.
const ON_HAND: i64 = 1_000_000;

/// The end offset of every partition of `topic`.
fn end_offsets(bootstrap: &str, topic: &str) -> BTreeMap<i32, i64> {
    let client: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .create()
        .expect("watermark client");
    (0..PARTITIONS)
        .map(|partition| {
            let (_, high) = client
                .fetch_watermarks(topic, partition, Duration::from_secs(10))
                .expect("fetch watermarks");
            (partition, high)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_killed_and_restarted_loses_and_doubles_nothing() {
    let mut kafka = PrivateKafka::start();
    let topic = kafka.topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&SKUS.map(|sku| (sku, ON_HAND))).await;
    let mut spec = ConsumerSpec::new(&db, &topic);
    spec.bootstrap = kafka.bootstrap();
    let mut consumer = spec.start();
    eprintln!("consumer log: {}", consumer.log.display());

    let traffic = Traffic::orders(
        "ORD-BROKER",
        &SKUS,
        UNIQUE_EVENTS,
        DUPLICATE_EVERY,
        DUPLICATE_LAG,
    );
    let producing = traffic.produce_paced(
        producer_at(&kafka.bootstrap()),
        &topic,
        RECORDS_PER_TICK,
        TICK,
    );

    wait_until(
        Duration::from_secs(60),
        &format!("{ROWS_BEFORE_KILL} ledger rows before the broker is killed"),
        || async { db.ledger_rows().await >= ROWS_BEFORE_KILL },
    )
    .await;
    let outage = Instant::now();
    kafka.kill();
    let rows_at_kill = db.ledger_rows().await;
    eprintln!("broker killed with -9 at {rows_at_kill} ledger rows");
    while outage.elapsed() < OUTAGE {
        assert!(
            consumer.child.try_wait().expect("try_wait").is_none(),
            "the consumer exited while the broker was down; log:\n{}",
            consumer.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    kafka.start_again();
    eprintln!(
        "broker answering again {:?} after the kill",
        outage.elapsed()
    );
    assert!(
        rows_at_kill < traffic.unique_events,
        "the kill came before the traffic was consumed: {rows_at_kill} rows"
    );

    producing.await.expect("the producer task");
    // Caught up: every unique event in the ledger, every partition's
    // committed offset at its end (whatever the producer's retries wrote).
    let ends = end_offsets(&kafka.bootstrap(), &topic);
    assert!(
        ends.values().sum::<i64>() >= traffic.records.len() as i64,
        "every acknowledged record is on the restarted broker: {ends:?}"
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows = db.ledger_rows().await;
        let committed = committed_offsets_at(&kafka.bootstrap(), &spec.group, &topic, PARTITIONS);
        if rows == traffic.unique_events && committed == ends {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not caught up 60 s after the producer finished: ledger rows {rows} of {}, \
             committed {committed:?}, end offsets {ends:?}; log:\n{}",
            traffic.unique_events,
            consumer.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("caught up {:?} after the kill", outage.elapsed());

    traffic.assert_applied_once(&db).await;
    let duplicates_sent = (traffic.records.len() as i64 - traffic.unique_events) as f64;
    assert!(
        consumer.metric("inbox_duplicate_ignored_total").await >= duplicates_sent,
        "the {duplicates_sent} exact duplicates were recognised"
    );
    assert!(
        consumer.child.try_wait().expect("try_wait").is_none(),
        "the consumer is still running; log:\n{}",
        consumer.log_text()
    );
    consumer.stop().await;
}
