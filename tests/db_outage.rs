//! PostgreSQL stopped for ten seconds mid-run and started again (docs/design.md#failures): the
//! consumer pauses its partitions and retries while it stays in its group, and
//! afterwards every event is applied exactly once and every offset committed.
//!
//! The test stops a PostgreSQL server of its own (`PrivatePostgres`), never
//! the shared cluster the tests running beside it use.

mod common;

use std::time::{Duration, Instant};

use common::private_pg::PrivatePostgres;
use common::*;

const PARTITIONS: i32 = 12;
const UNIQUE_EVENTS: usize = 3_000;
/// Records produced per 100 ms: 150 events/s, about 20 s of traffic.
const RECORDS_PER_TICK: usize = 15;
const TICK: Duration = Duration::from_millis(100);
/// Every this many events, one sent `DUPLICATE_LAG` events earlier is sent
/// again, byte for byte (a producer retry or a replay).
const DUPLICATE_EVERY: usize = 100;
const DUPLICATE_LAG: usize = 450;
/// Ledger rows to see before the database goes down (about 2 s of traffic).
const ROWS_BEFORE_OUTAGE: i64 = 300;
const OUTAGE: Duration = Duration::from_secs(10);
const SKUS: [&str; 5] = [
    "SKU-OUT-1",
    "SKU-OUT-2",
    "SKU-OUT-3",
    "SKU-OUT-4",
    "SKU-OUT-5",
];
/// Stock no run can exhaust, so every line is reserved.
const ON_HAND: i64 = 1_000_000;

/// Ledger rows, or None while the database does not answer.
async fn ledger_rows(db: &TestDb) -> Option<i64> {
    sqlx::query_scalar("SELECT count(*) FROM processed_inbox")
        .fetch_one(&db.pool)
        .await
        .ok()
}

async fn readyz_status(consumer: &ConsumerProcess) -> Option<u16> {
    consumer.get("/readyz").await.map(|(status, _)| status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn database_outage_keeps_group_membership_and_loses_nothing() {
    let mut postgres = PrivatePostgres::start();
    let db = postgres.test_db().await;
    db.seed_stock(&SKUS.map(|sku| (sku, ON_HAND))).await;
    let topic = fresh_topic(PARTITIONS).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let mut consumer = spec.start();
    eprintln!("consumer log: {}", consumer.log.display());
    wait_until(
        Duration::from_secs(30),
        "the consumer is ready (partitions assigned, database reachable)",
        || async { readyz_status(&consumer).await == Some(200) },
    )
    .await;
    let assigns_before = consumer
        .metric(r#"inbox_rebalances_total{kind="assign"}"#)
        .await;

    let traffic = Traffic::orders(
        "ORD-OUTAGE",
        &SKUS,
        UNIQUE_EVENTS,
        DUPLICATE_EVERY,
        DUPLICATE_LAG,
    );
    let records_produced = traffic.records.len() as i64;
    let unique_events = traffic.unique_events;
    let producing = traffic.produce_paced(producer(), &topic, RECORDS_PER_TICK, TICK);

    wait_until(
        Duration::from_secs(20),
        &format!("{ROWS_BEFORE_OUTAGE} ledger rows before the outage"),
        || async { ledger_rows(&db).await.unwrap_or(0) >= ROWS_BEFORE_OUTAGE },
    )
    .await;
    let outage = Instant::now();
    postgres.stop();
    eprintln!("PostgreSQL stopped after at least {ROWS_BEFORE_OUTAGE} ledger rows");
    let mut not_ready_seen = false;
    while outage.elapsed() < OUTAGE {
        assert!(
            consumer.child.try_wait().expect("try_wait").is_none(),
            "the consumer exited while the database was down; log:\n{}",
            consumer.log_text()
        );
        not_ready_seen |= readyz_status(&consumer).await == Some(503);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(
        not_ready_seen,
        "/readyz never answered 503 during the {OUTAGE:?} outage; log:\n{}",
        consumer.log_text()
    );
    postgres.start_again();
    eprintln!("PostgreSQL started again after {:?}", outage.elapsed());

    producing.await.expect("the producer task");
    // Caught up: every unique event in the ledger, every record's offset
    // committed.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let rows = ledger_rows(&db).await;
        let committed: i64 = committed_offsets(&spec.group, &topic, PARTITIONS)
            .values()
            .map(|offset| (*offset).max(0))
            .sum();
        if rows == Some(unique_events) && committed == records_produced {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not caught up 30 s after the producer finished: ledger rows {rows:?} of \
             {unique_events}, committed offsets {committed} of {records_produced}; log:\n{}",
            consumer.log_text()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    eprintln!("caught up {:?} after the outage began", outage.elapsed());

    traffic.assert_applied_once(&db).await;

    wait_until(
        Duration::from_secs(10),
        "/readyz answers 200 again",
        || async { readyz_status(&consumer).await == Some(200) },
    )
    .await;
    let (_, metrics) = consumer.get("/metrics").await.expect("/metrics answers");
    assert!(
        metrics.contains(r#"inbox_rebalances_total{kind="revoke"} 0"#),
        "no partition was revoked: the consumer kept its group membership\n{metrics}"
    );
    assert_eq!(
        consumer
            .metric(r#"inbox_rebalances_total{kind="revoke"}"#)
            .await,
        0.0,
        "revocations"
    );
    assert_eq!(
        consumer
            .metric(r#"inbox_rebalances_total{kind="assign"}"#)
            .await,
        assigns_before,
        "no assignment after the first: the consumer never rejoined"
    );
    assert!(
        consumer.metric_sum("inbox_db_retries_total").await > 0.0,
        "the outage was retried and counted\n{metrics}"
    );
    let duplicates_sent = (records_produced - unique_events) as f64;
    assert!(
        consumer.metric("inbox_duplicate_ignored_total").await >= duplicates_sent,
        "the {duplicates_sent} exact duplicates were recognised\n{metrics}"
    );
    consumer.stop().await;
}
