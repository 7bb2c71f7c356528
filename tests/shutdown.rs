//! SIGTERM drains: `/readyz` turns unready at once (draining), the batch in
//! hand is still applied and committed, and the process exits 0 once its
//! background tasks are done. And a stop right after an assignment, when
//! the revoke runs as the Kafka client shuts down, exits too; so does a
//! member after thousands of rounds of one record, each with its commit.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn a_draining_consumer_is_unready_and_still_finishes_its_batch() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;

    // The batch in hand waits behind a held stock row, so the drain lasts.
    let holder = db.hold_stock_row("SKU-1").await;
    let spec = ConsumerSpec::new(&db, &topic).env("DB_LOCK_TIMEOUT_MS", "200");
    let mut consumer = spec.start();
    let records: Vec<Outgoing> = (0..3)
        .map(|i| Outgoing::event(&order(&format!("DRAIN-{i}"), &[("SKU-1", 1)])))
        .collect();
    produce(&producer(), &topic, &records).await;
    wait_until(Duration::from_secs(30), "the batch retried", || async {
        consumer
            .metric("inbox_db_retries_total{reason=\"lock_not_available\"}")
            .await
            >= 1.0
    })
    .await;

    consumer.signal(libc::SIGTERM);
    wait_until(Duration::from_secs(5), "/readyz says draining", || async {
        matches!(consumer.get("/readyz").await,
                 Some((503, body)) if body.contains("draining=true"))
    })
    .await;
    assert_eq!(db.ledger_rows().await, 0, "the batch is still held");

    holder.rollback().await.expect("release the row");
    let status = consumer.wait(Duration::from_secs(30)).await;
    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        consumer.log_text()
    );
    assert_eq!(db.ledger_rows().await, 3, "the batch in hand was applied");
    assert_eq!(
        committed_offsets(&spec.group, &topic, 1)[&0],
        3,
        "and committed before the exit"
    );
}

/// SIGTERM right after partitions were assigned: closing revokes them, and
/// the revoke callback runs while the client shuts its group handling down.
/// A callback that asked librdkafka's group handler anything after handing
/// the partitions back could wait for good: once the handler has terminated
/// it drops such a request unanswered (seen: 2 stops in 14 runs of
/// tests/crash_recovery.rs hung in `rd_kafka_assignment`). Each stop here
/// must exit 0 within the bound `stop` asserts.
#[tokio::test]
async fn a_stop_right_after_the_assignment_exits() {
    const PARTITIONS: i32 = 12;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000)]).await;
    let records: Vec<Outgoing> = (0..PARTITIONS)
        .map(|p| Outgoing::event(&order(&format!("STOP-{p}"), &[("SKU-1", 1)])).on_partition(p))
        .collect();
    produce(&producer(), &topic, &records).await;
    // A static member, as in a StatefulSet: it does not leave the group.
    let spec = ConsumerSpec::new(&db, &topic).env("KAFKA_PROPERTY_GROUP_INSTANCE_ID", "stopping");
    // Every partition gets a position in the database, where the members
    // below start, with nothing left to read.
    let first = spec.start();
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        i64::from(PARTITIONS),
        Duration::from_secs(60),
    )
    .await;
    first.stop().await;
    for round in 0..60 {
        let consumer = spec.start();
        wait_until(Duration::from_secs(30), "partitions assigned", || async {
            consumer.log_text().contains("partitions assigned")
        })
        .await;
        // Stops after a killed member too, whose place the next one takes.
        if round % 3 == 2 {
            consumer.kill().await;
        } else {
            consumer.stop().await;
        }
    }
}

/// A member of one record a round (`--strategy per-record`) sends an offset
/// commit a round, faster than the group coordinator answers them here: sent
/// each without waiting, they queued up, and the commit at close waited
/// behind all of them (seen: 20 s after 5,000 records, past the 30 s a
/// benchmark gives a stop after 20,000). One in flight at a time, it stops
/// at once, and Kafka holds every offset the database has.
#[tokio::test]
async fn a_member_of_many_one_record_rounds_stops_at_once() {
    const PARTITIONS: i32 = 12;
    const RECORDS: i64 = 6_000;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 1_000_000)]).await;
    let records: Vec<Outgoing> = (0..RECORDS)
        .map(|i| {
            Outgoing::event(&order(&format!("ONE-{i}"), &[("SKU-1", 1)]))
                .on_partition((i % i64::from(PARTITIONS)) as i32)
        })
        .collect();
    produce(&producer(), &topic, &records).await;
    let spec = ConsumerSpec::new(&db, &topic).env("INBOX_STRATEGY", "per-record");
    let mut consumer = spec.start();
    wait_for_ledger(&db, RECORDS, Duration::from_secs(180)).await;

    consumer.signal(libc::SIGTERM);
    // The queued commits took seconds for each thousand records: a bound
    // that holds only without them (deploy/ gives a pod 60 s).
    let status = consumer.wait(Duration::from_secs(10)).await;
    assert!(
        status.success(),
        "{status:?}; log:\n{}",
        consumer.log_text()
    );
    let committed = committed_offsets(&spec.group, &topic, PARTITIONS);
    assert_eq!(
        committed.values().sum::<i64>(),
        RECORDS,
        "every offset committed: {committed:?}"
    );
}
