//! A database position older than the partition's earliest offset: what the
//! database lacks was deleted by retention and can never be read again. The
//! consumer says so (an error naming the partition and the count, the
//! metric `inbox_position_gap_records_total`), starts at the earliest offset
//! and goes on: no wedge. What it had applied before is not lacking: a
//! position an operator set back below the earliest offset raises no alarm,
//! and `positions set` refuses an offset below it.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test]
async fn positions_older_than_the_log_start_are_reported_and_skipped() {
    const PARTITIONS: i32 = 2;
    let topic = fresh_topic(PARTITIONS).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100_000)]).await;
    let producer = producer();
    let batch = |from: usize, to: usize| -> Vec<Outgoing> {
        (from..to)
            .map(|i| {
                Outgoing::event(&order(&format!("GAP-{i}"), &[("SKU-1", 1)]))
                    .on_partition(i as i32 % PARTITIONS)
            })
            .collect()
    };
    // 50 records per partition, applied.
    produce(&producer, &topic, &batch(0, 100)).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        100,
        Duration::from_secs(60),
    )
    .await;
    consumer.stop().await;

    // As after a restore of an old backup: positions at 10, as the backup
    // held them, while retention has deleted everything before 40 of each
    // partition.
    sqlx::query("UPDATE inbox_position SET next_offset = 10, applied_through = 10")
        .execute(&db.pool)
        .await
        .expect("the database goes back");
    delete_records_before(&topic, &[(0, 40), (1, 40)]);

    let consumer = spec.start();
    // Each partition's gap is found when it is assigned: wait for both.
    wait_until(Duration::from_secs(30), "both gaps counted", || async {
        consumer.metric("inbox_position_gap_records_total").await >= 60.0
    })
    .await;
    assert_eq!(
        consumer.metric("inbox_position_gap_records_total").await,
        60.0,
        "30 records of each partition can never be read again"
    );
    let log = consumer.log_text();
    assert!(
        log.contains("older than the partition's earliest offset") && log.contains("missing=30"),
        "the log says so and counts them: {log}"
    );

    // And it goes on from the earliest offset: what it reads again is
    // recognised, what is new is applied.
    produce(&producer, &topic, &batch(100, 120)).await;
    wait_for_ledger(&db, 120, Duration::from_secs(60)).await;
    wait_all_committed(
        &spec.group,
        &topic,
        PARTITIONS,
        120,
        Duration::from_secs(60),
    )
    .await;
    assert_eq!(consumer.metric("inbox_processed_total").await, 20.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 20.0);
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 120);
}

/// An operator sets a position back (a replay), and retention deletes the
/// start of the partition before the consumer reads it: every record
/// deleted had been applied, so nothing is lost and no alarm is raised
/// (seen: `inbox_position_gap_records_total` rose by the records deleted,
/// with the error the runbook calls the one case where events are lost).
/// A set below the earliest offset is refused with one line.
#[tokio::test]
async fn a_rewind_below_the_log_start_loses_nothing_applied_and_is_refused_when_asked() {
    let topic = fresh_topic(1).await;
    let db = TestDb::new().await;
    db.seed_stock(&[("SKU-1", 100_000)]).await;
    let producer = producer();
    let batch = |from: usize, to: usize| -> Vec<Outgoing> {
        (from..to)
            .map(|i| Outgoing::event(&order(&format!("REWIND-{i}"), &[("SKU-1", 1)])))
            .collect()
    };
    produce(&producer, &topic, &batch(0, 50)).await;
    let spec = ConsumerSpec::new(&db, &topic);
    let consumer = spec.start();
    wait_committed(&spec, 50).await;
    consumer.stop().await;

    let (ok, said) = spec.positions(&["set", "--offset", "2"]);
    assert!(ok, "positions set: {said}");
    delete_records_before(&topic, &[(0, 5)]);
    let (ok, said) = spec.positions(&["set", "--offset", "3"]);
    assert!(!ok, "an offset below the earliest is refused: {said}");
    assert!(
        said.contains("--offset 3 is before the earliest offset of partition 0 (5)"),
        "{said}"
    );
    let (ok, listed) = spec.positions(&["list", "--json"]);
    assert!(
        ok && listed.contains("\"position\":2"),
        "nothing moved: {listed}"
    );

    let consumer = spec.start();
    produce(&producer, &topic, &batch(50, 55)).await;
    wait_for_ledger(&db, 55, Duration::from_secs(60)).await;
    wait_committed(&spec, 55).await;
    assert_eq!(
        consumer.metric("inbox_position_gap_records_total").await,
        0.0,
        "every record deleted had been applied"
    );
    assert_eq!(consumer.metric("inbox_processed_total").await, 5.0);
    assert_eq!(consumer.metric("inbox_duplicate_ignored_total").await, 45.0);
    let log = consumer.log_text();
    assert!(log.contains("nothing lost"), "{log}");
    assert!(!log.contains("cannot be read again"), "{log}");
    consumer.stop().await;
    assert_eq!(db.reserved("SKU-1").await, 55);
}
