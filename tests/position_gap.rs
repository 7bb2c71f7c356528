//! A database position older than the partition's earliest offset: what the
//! database lacks was deleted by retention and can never be read again. The
//! consumer says so (an error naming the partition and the count, the
//! metric `inbox_position_gap_records_total`), starts at the earliest offset
//! and goes on: no wedge.

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

    // As after a restore of an old backup: positions at 10, while retention
    // has deleted everything before 40 of each partition.
    let (ok, said) = spec.positions(&["set", "--offset", "10"]);
    assert!(ok, "positions set: {said}");
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
